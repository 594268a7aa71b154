//! List commands, run in process (see `common`): every command through the real store, its
//! redo applied to a replica that must stay byte-identical, and the model's check (the
//! allocator's accounting and each list's shape) after every command. The expected replies
//! are what redis-server 7.0.15 answers.

use crate::common;

use std::collections::VecDeque;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

const DB: usize = 8 << 20;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const NOT_POSITIVE: &str = "ERR value is out of range, must be positive";

fn int(n: i64) -> Value {
    Value::Integer(n)
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|item| bulk(item)).collect())
}

fn ints(items: &[i64]) -> Value {
    Value::Array(items.iter().map(|&n| int(n)).collect())
}

/// The whole list `key`, as LRANGE answers it.
fn whole(node: &mut Node, key: &str) -> Vec<Vec<u8>> {
    match node.cmd(&[b"LRANGE", key.as_bytes(), b"0", b"-1"]) {
        Value::Array(items) => items
            .into_iter()
            .map(|item| match item {
                Value::Bulk(bytes) => bytes,
                other => panic!("LRANGE answered {other:?}"),
            })
            .collect(),
        other => panic!("LRANGE answered {other:?}"),
    }
}

#[test]
fn pushes_and_pops_at_both_ends() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l a b c"), int(3));
    assert_eq!(node.s("LPUSH l z y"), int(5));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["y", "z", "a", "b", "c"]));
    assert_eq!(node.s("LLEN l"), int(5));
    assert_eq!(node.s("TYPE l"), Value::Simple(b"list".to_vec()));
    assert_eq!(node.s("LPOP l"), bulk("y"));
    assert_eq!(node.s("RPOP l"), bulk("c"));
    assert_eq!(node.s("LPOP l 0"), Value::Array(vec![]));
    assert_eq!(node.s("RPOP l 2"), bulks(&["b", "a"]));
    assert_eq!(node.s("LPOP l 5"), bulks(&["z"]));
    assert_eq!(node.s("EXISTS l"), int(0));
    assert_eq!(node.s("LPOP l"), Value::Null);
    assert_eq!(node.s("LPOP l 2"), Value::NullArray);
    assert_eq!(node.s("LPOP l 0"), Value::NullArray);
    assert_eq!(node.s("LPUSHX l a"), int(0));
    assert_eq!(node.s("RPUSHX l a b"), int(0));
    assert_eq!(node.s("EXISTS l"), int(0));
    assert_eq!(node.s("RPUSH l a b c"), int(3));
    assert_eq!(node.s("LPUSHX l x y"), int(5));
    assert_eq!(node.s("RPUSHX l w"), int(6));
    assert_eq!(
        node.s("LRANGE l 0 -1"),
        bulks(&["y", "x", "a", "b", "c", "w"])
    );
    assert_eq!(
        node.s("LPOP l 9223372036854775807"),
        bulks(&["y", "x", "a", "b", "c", "w"])
    );
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn elements_are_binary_safe_and_may_be_empty() {
    let mut node = Node::new(DB);
    let odd: &[u8] = b"\x00\r\n\xff\x80";
    assert_eq!(node.cmd(&[b"RPUSH", b"l", odd, b"", b"\x80\x80"]), int(3));
    assert_eq!(node.cmd(&[b"LPOS", b"l", b""]), int(1));
    assert_eq!(
        node.cmd(&[b"LINDEX", b"l", b"0"]),
        Value::Bulk(odd.to_vec())
    );
    assert_eq!(node.cmd(&[b"LREM", b"l", b"0", odd]), int(1));
    assert_eq!(node.s("RPOP l"), Value::Bulk(b"\x80\x80".to_vec()));
    assert_eq!(node.s("LPOP l"), bulk(""));
    assert_eq!(node.s("EXISTS l"), int(0));
}

#[test]
fn pop_counts_and_arity_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("LPOP nokey -1"), err(NOT_POSITIVE));
    assert_eq!(node.s("LPOP nokey abc"), err(NOT_POSITIVE));
    assert_eq!(node.s("RPOP nokey 9223372036854775808"), err(NOT_POSITIVE));
    assert_eq!(
        node.s("LPOP nokey 1 2"),
        err("ERR wrong number of arguments for 'lpop' command")
    );
    assert_eq!(
        node.s("RPUSH l"),
        err("ERR wrong number of arguments for 'rpush' command")
    );
    assert_eq!(node.s("SET s x"), ok());
    assert_eq!(node.s("LPOP s"), err(WRONGTYPE));
    // The count is read before the key.
    assert_eq!(node.s("LPOP s -1"), err(NOT_POSITIVE));
    assert_eq!(node.s("LPOP s 0"), err(WRONGTYPE));
    assert_eq!(node.s("RPOP s 3"), err(WRONGTYPE));
}

#[test]
fn wrong_types_and_bad_numbers_answer_redis_errors() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET s x"), ok());
    for line in [
        "LPUSH s a",
        "RPUSH s a",
        "LPUSHX s a",
        "RPUSHX s a",
        "LLEN s",
        "LRANGE s 0 -1",
        "LINDEX s 0",
        "LINDEX s abc",
        "LSET s 0 x",
        "LSET s abc x",
        "LREM s 0 x",
        "LTRIM s 0 1",
        "LINSERT s BEFORE a x",
        "LPOS s a",
    ] {
        assert_eq!(node.s(line), err(WRONGTYPE), "{line}");
    }
    assert_eq!(node.s("RPUSH l a b"), int(2));
    assert_eq!(node.s("LMOVE l s LEFT RIGHT"), err(WRONGTYPE));
    assert_eq!(node.s("RPOPLPUSH l s"), err(WRONGTYPE));
    assert_eq!(node.s("LMOVE s l LEFT RIGHT"), err(WRONGTYPE));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["a", "b"]));
    // Integers are parsed before the key is looked at, except by LINDEX and LSET.
    assert_eq!(node.s("LRANGE s a 1"), err(NOT_INTEGER));
    assert_eq!(node.s("LTRIM s a 1"), err(NOT_INTEGER));
    assert_eq!(node.s("LREM s abc a"), err(NOT_INTEGER));
    assert_eq!(node.s("LINDEX nokey abc"), Value::Null);
    assert_eq!(node.s("LINDEX l abc"), err(NOT_INTEGER));
    assert_eq!(node.s("LINDEX l 9223372036854775808"), err(NOT_INTEGER));
    assert_eq!(node.s("LSET nokey abc x"), err("ERR no such key"));
    assert_eq!(node.s("LSET l abc x"), err(NOT_INTEGER));
    assert_eq!(node.s("LSET l 5 x"), err("ERR index out of range"));
    assert_eq!(node.s("LSET l -3 x"), err("ERR index out of range"));
    assert_eq!(node.s("LINSERT l middle a x"), err("ERR syntax error"));
    assert_eq!(node.s("LINSERT s middle a x"), err("ERR syntax error"));
    assert_eq!(node.s("LMOVE l l UP RIGHT"), err("ERR syntax error"));
    assert_eq!(node.s("LMOVE l l LEFT DOWN"), err("ERR syntax error"));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["a", "b"]));
}

#[test]
fn ranges_indexes_and_sets_count_from_either_end() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l a b c d e"), int(5));
    assert_eq!(node.s("LRANGE l 1 2"), bulks(&["b", "c"]));
    assert_eq!(node.s("LRANGE l -2 -1"), bulks(&["d", "e"]));
    assert_eq!(
        node.s("LRANGE l -100 100"),
        bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(node.s("LRANGE l 2 1"), Value::Array(vec![]));
    assert_eq!(node.s("LRANGE l 5 10"), Value::Array(vec![]));
    assert_eq!(
        node.s("LRANGE l 9223372036854775807 -9223372036854775808"),
        Value::Array(vec![])
    );
    assert_eq!(node.s("LRANGE nokey 0 -1"), Value::Array(vec![]));
    assert_eq!(node.s("LINDEX l 0"), bulk("a"));
    assert_eq!(node.s("LINDEX l -1"), bulk("e"));
    assert_eq!(node.s("LINDEX l 5"), Value::Null);
    assert_eq!(node.s("LINDEX l -6"), Value::Null);
    assert_eq!(node.s("LSET l 1 B"), ok());
    assert_eq!(node.s("LSET l -1 last"), ok());
    assert_eq!(node.s("LSET l 0 x"), ok());
    assert_eq!(
        node.s("LRANGE l 0 -1"),
        bulks(&["x", "B", "c", "d", "last"])
    );
    assert_eq!(node.s("LLEN nokey"), int(0));
}

#[test]
fn lrem_ltrim_and_linsert_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l a b a c a d a"), int(7));
    assert_eq!(node.s("LREM l 2 a"), int(2));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["b", "c", "a", "d", "a"]));
    assert_eq!(node.s("LREM l -1 a"), int(1));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["b", "c", "a", "d"]));
    assert_eq!(node.s("LREM l 0 zz"), int(0));
    assert_eq!(node.s("LREM nokey 0 zz"), int(0));
    assert_eq!(node.s("LINSERT l BEFORE c x"), int(5));
    assert_eq!(node.s("LINSERT l after d y"), int(6));
    assert_eq!(node.s("LINSERT l AFTER nothere y"), int(-1));
    assert_eq!(node.s("LINSERT nokey BEFORE a x"), int(0));
    assert_eq!(
        node.s("LRANGE l 0 -1"),
        bulks(&["b", "x", "c", "a", "d", "y"])
    );
    assert_eq!(node.s("LTRIM l 1 -2"), ok());
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["x", "c", "a", "d"]));
    assert_eq!(node.s("LTRIM l -100 100"), ok());
    assert_eq!(node.s("LLEN l"), int(4));
    assert_eq!(node.s("LTRIM nokey 0 1"), ok());
    assert_eq!(node.s("LTRIM l 5 10"), ok());
    assert_eq!(node.s("EXISTS l"), int(0));
    assert_eq!(node.s("RPUSH l a a a"), int(3));
    assert_eq!(node.s("LREM l 0 a"), int(3));
    assert_eq!(node.s("EXISTS l"), int(0));
    assert_eq!(node.s("RPUSH l a b"), int(2));
    assert_eq!(node.s("LTRIM l 1 0"), ok());
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn lpos_follows_redis_including_its_odd_corners() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l a b a c a"), int(5));
    assert_eq!(node.s("LPOS l a"), int(0));
    assert_eq!(node.s("LPOS l a RANK 2"), int(2));
    assert_eq!(node.s("LPOS l a RANK -1"), int(4));
    assert_eq!(node.s("LPOS l a RANK -1 COUNT 2"), ints(&[4, 2]));
    assert_eq!(node.s("LPOS l a COUNT 0"), ints(&[0, 2, 4]));
    assert_eq!(node.s("LPOS l a RANK 2 COUNT 0 MAXLEN 4"), ints(&[2]));
    assert_eq!(node.s("LPOS l a MAXLEN 1 COUNT 0"), ints(&[0]));
    assert_eq!(node.s("LPOS l c MAXLEN 3"), Value::Null);
    assert_eq!(
        node.s("LPOS l a COUNT 0 RANK 9223372036854775807"),
        Value::Array(vec![])
    );
    assert_eq!(node.s("LPOS l a RANK 1 RANK 2"), int(2));
    assert_eq!(node.s("LPOS l z COUNT 2"), Value::Array(vec![]));
    assert_eq!(node.s("LPOS l z"), Value::Null);
    assert_eq!(node.s("LPOS nokey a COUNT 0"), Value::Array(vec![]));
    assert_eq!(node.s("LPOS nokey a"), Value::Null);
    // Redis negates the rank in wrapping arithmetic: the smallest rank stays negative, so
    // every match from the tail counts and COUNT never stops the search.
    assert_eq!(node.s("LPOS l a RANK -9223372036854775808"), int(4));
    assert_eq!(
        node.s("LPOS l a RANK -9223372036854775808 COUNT 1"),
        ints(&[4, 2, 0])
    );
    assert_eq!(
        node.s("LPOS l a RANK 0"),
        err(
            "ERR RANK can't be zero: use 1 to start from the first match, 2 from the second \
             ... or use negative to start from the end of the list"
        )
    );
    assert_eq!(
        node.s("LPOS l a COUNT -1"),
        err("ERR COUNT can't be negative")
    );
    assert_eq!(
        node.s("LPOS l a COUNT abc"),
        err("ERR COUNT can't be negative")
    );
    assert_eq!(
        node.s("LPOS l a MAXLEN -1"),
        err("ERR MAXLEN can't be negative")
    );
    assert_eq!(
        node.s("LPOS l a MAXLEN abc"),
        err("ERR MAXLEN can't be negative")
    );
    assert_eq!(node.s("LPOS l a RANK abc"), err(NOT_INTEGER));
    assert_eq!(node.s("LPOS l a FOO"), err("ERR syntax error"));
    assert_eq!(node.s("LPOS l a RANK"), err("ERR syntax error"));
}

#[test]
fn lmove_and_rpoplpush_move_between_lists_and_rotate_one() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("LMOVE nokey d LEFT RIGHT"), Value::Null);
    assert_eq!(node.s("RPOPLPUSH nokey d"), Value::Null);
    assert_eq!(node.s("EXISTS d"), int(0));
    assert_eq!(node.s("RPUSH r 1 2 3"), int(3));
    assert_eq!(node.s("LMOVE r r LEFT LEFT"), bulk("1"));
    assert_eq!(node.s("LMOVE r r LEFT RIGHT"), bulk("1"));
    assert_eq!(node.s("LRANGE r 0 -1"), bulks(&["2", "3", "1"]));
    assert_eq!(node.s("RPOPLPUSH r r"), bulk("1"));
    assert_eq!(node.s("LRANGE r 0 -1"), bulks(&["1", "2", "3"]));
    assert_eq!(node.s("RPUSH one x"), int(1));
    assert_eq!(node.s("LMOVE one one right left"), bulk("x"));
    assert_eq!(node.s("LRANGE one 0 -1"), bulks(&["x"]));
    assert_eq!(node.s("LMOVE r d RIGHT LEFT"), bulk("3"));
    assert_eq!(node.s("LMOVE r d LEFT RIGHT"), bulk("1"));
    assert_eq!(node.s("RPOPLPUSH r d"), bulk("2"));
    assert_eq!(node.s("EXISTS r"), int(0));
    assert_eq!(node.s("LRANGE d 0 -1"), bulks(&["2", "3", "1"]));
    assert_eq!(node.s("DEL d one"), int(2));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn resp3_replies_use_its_null_and_keep_arrays() {
    let mut node = Node::new(DB);
    let Value::Map(_) = node.s("HELLO 3") else {
        panic!("HELLO 3 answers a map")
    };
    // RESP3 has one null, `_`, for both the missing element and the missing array.
    assert_eq!(node.s("LPOP nokey"), Value::Null);
    assert_eq!(node.s("LPOP nokey 2"), Value::Null);
    assert_eq!(node.s("LINDEX nokey 0"), Value::Null);
    assert_eq!(node.s("LPOS nokey a"), Value::Null);
    assert_eq!(node.s("LMOVE nokey x LEFT LEFT"), Value::Null);
    assert_eq!(node.s("LRANGE nokey 0 -1"), Value::Array(vec![]));
    assert_eq!(node.s("RPUSH l a b c"), int(3));
    assert_eq!(node.s("LPOP l 0"), Value::Array(vec![]));
    assert_eq!(node.s("LINDEX l 9"), Value::Null);
    assert_eq!(node.s("LPOS l z"), Value::Null);
    assert_eq!(node.s("LPOS l b COUNT 0"), ints(&[1]));
    assert_eq!(node.s("RPOP l 2"), bulks(&["c", "b"]));
    assert_eq!(node.s("LPOP l"), bulk("a"));
}

#[test]
fn expired_lists_read_as_missing_and_are_replaced_on_write() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l a b c"), int(3));
    assert_eq!(node.s("PEXPIRE l 100"), int(1));
    node.advance(100);
    assert_eq!(node.s("LLEN l"), int(0));
    assert_eq!(node.s("LPUSHX l x"), int(0));
    assert_eq!(node.s("RPUSH l new"), int(1));
    assert_eq!(node.s("LRANGE l 0 -1"), bulks(&["new"]));
    assert_eq!(node.s("TTL l"), int(-1));
    assert_eq!(node.s("RENAME l m"), ok());
    assert_eq!(node.s("LRANGE m 0 -1"), bulks(&["new"]));
    assert_eq!(node.s("RPUSH m a b"), int(3));
    assert_eq!(node.s("SET s x"), ok());
    assert_eq!(node.s("PEXPIRE s 10"), int(1));
    node.advance(10);
    assert_eq!(node.s("LMOVE m s LEFT RIGHT"), bulk("new"));
    assert_eq!(node.s("LRANGE s 0 -1"), bulks(&["new"]));
    assert_eq!(node.s("FLUSHALL"), ok());
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn multi_exec_keeps_the_effects_of_list_commands_around_an_error() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET s x"), ok());
    assert_eq!(node.s("MULTI"), ok());
    let queued = Value::Simple(b"QUEUED".to_vec());
    assert_eq!(node.s("RPUSH l a b c"), queued);
    assert_eq!(node.s("LPUSH s a"), queued);
    assert_eq!(node.s("LSET l 10 x"), queued);
    assert_eq!(node.s("LMOVE l d LEFT RIGHT"), queued);
    assert_eq!(node.s("LPOP l 5"), queued);
    assert_eq!(node.s("LLEN d"), queued);
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            int(3),
            err(WRONGTYPE),
            err("ERR index out of range"),
            bulk("a"),
            bulks(&["b", "c"]),
            int(1),
        ])
    );
    assert_eq!(node.s("EXISTS l"), int(0));
    assert_eq!(node.s("LRANGE d 0 -1"), bulks(&["a"]));
    // WATCH sees a list change, even one that leaves it as it was.
    assert_eq!(node.s("WATCH d"), ok());
    assert_eq!(node.s("LMOVE d d LEFT LEFT"), bulk("a"));
    assert_eq!(node.s("MULTI"), ok());
    node.s("RPUSH d b");
    assert_eq!(node.s("EXEC"), Value::NullArray);
    assert_eq!(node.s("WATCH d"), ok());
    assert_eq!(node.s("MULTI"), ok());
    node.s("RPUSH d b");
    assert_eq!(node.s("EXEC"), Value::Array(vec![int(2)]));
}

#[test]
fn long_lists_walk_from_the_nearer_end_and_free_every_node() {
    let mut node = Node::new(DB);
    let n = 6000;
    let mut model: VecDeque<String> = VecDeque::new();
    for batch in 0..(n / 100) {
        let mut args: Vec<String> = vec!["RPUSH".into(), "l".into()];
        for i in 0..100 {
            let element = format!("element-{}", batch * 100 + i);
            model.push_back(element.clone());
            args.push(element);
        }
        let args: Vec<&[u8]> = args.iter().map(|a| a.as_bytes()).collect();
        node.cmd(&args);
    }
    for i in 0..3000 {
        let element = format!("front-{i}");
        assert_eq!(
            node.cmd(&[b"LPUSH", b"l", element.as_bytes()]),
            int(model.len() as i64 + 1)
        );
        model.push_front(element);
    }
    let len = model.len() as i64;
    assert_eq!(node.s("LLEN l"), int(len));
    for index in [0, 1, 2999, 3000, 4500, len / 2, len - 2, len - 1] {
        assert_eq!(
            node.s(&format!("LINDEX l {index}")),
            bulk(&model[index as usize]),
            "{index}"
        );
        assert_eq!(
            node.s(&format!("LINDEX l {}", index - len)),
            bulk(&model[index as usize])
        );
    }
    let range: Vec<&str> = model.range(2990..3010).map(String::as_str).collect();
    assert_eq!(node.s("LRANGE l 2990 3009"), bulks(&range));
    // LSET and LINSERT in the middle rewrite nodes, splitting the ones that overflow.
    for i in 0..400 {
        let index = (i * 37) % model.len();
        let element = format!("set-{i}-{}", "s".repeat(i % 50));
        assert_eq!(
            node.cmd(&[
                b"LSET",
                b"l",
                index.to_string().as_bytes(),
                element.as_bytes()
            ]),
            ok()
        );
        model[index] = element;
        let pivot = model[(i * 53) % model.len()].clone();
        let at = model.iter().position(|e| *e == pivot).unwrap();
        let element = format!("ins-{i}-{}", "i".repeat(i % 70));
        assert_eq!(
            node.cmd(&[
                b"LINSERT",
                b"l",
                b"AFTER",
                pivot.as_bytes(),
                element.as_bytes()
            ]),
            int(model.len() as i64 + 1)
        );
        model.insert(at + 1, element);
    }
    let expected: Vec<Vec<u8>> = model.iter().map(|e| e.as_bytes().to_vec()).collect();
    assert_eq!(whole(&mut node, "l"), expected);
    // LREM from both ends.
    let victims: Vec<String> = model.iter().step_by(40).cloned().collect();
    for victim in &victims {
        node.cmd(&[b"RPUSH", b"l", victim.as_bytes()]);
        model.push_back(victim.clone());
        assert_eq!(node.cmd(&[b"LREM", b"l", b"-1", victim.as_bytes()]), int(1));
        model.pop_back();
        assert_eq!(node.cmd(&[b"LREM", b"l", b"0", victim.as_bytes()]), int(1));
        let at = model.iter().position(|e| e == victim).unwrap();
        model.remove(at);
    }
    let expected: Vec<Vec<u8>> = model.iter().map(|e| e.as_bytes().to_vec()).collect();
    assert_eq!(whole(&mut node, "l"), expected);
    assert_eq!(node.s("LTRIM l 100 -100"), ok());
    let kept: Vec<String> = model.range(100..model.len() - 99).cloned().collect();
    let expected: Vec<Vec<u8>> = kept.iter().map(|e| e.as_bytes().to_vec()).collect();
    assert_eq!(whole(&mut node, "l"), expected);
    // Deleting the key frees every node: the check after DEL proves nothing leaked.
    assert_eq!(node.s("DEL l"), int(1));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn elements_larger_than_a_node_get_nodes_of_their_own() {
    let mut node = Node::new(DB);
    let big = "B".repeat(20_000);
    let bigger = "C".repeat(70_000);
    let medium = "m".repeat(3000);
    assert_eq!(
        node.cmd(&[b"RPUSH", b"l", b"a", big.as_bytes(), b"b"]),
        int(3)
    );
    assert_eq!(node.cmd(&[b"LPUSH", b"l", bigger.as_bytes()]), int(4));
    for _ in 0..5 {
        node.cmd(&[b"RPUSH", b"l", medium.as_bytes()]);
    }
    assert_eq!(node.s("LINDEX l 2"), bulk(&big));
    assert_eq!(node.s("LINDEX l 0"), bulk(&bigger));
    // LINSERT next to a big element splits the node into the big one and the rest.
    assert_eq!(
        node.cmd(&[b"LINSERT", b"l", b"BEFORE", big.as_bytes(), b"x"]),
        int(10)
    );
    assert_eq!(
        node.cmd(&[b"LINSERT", b"l", b"AFTER", big.as_bytes(), b"y"]),
        int(11)
    );
    // LSET shrinks a big element and grows a small one past a node.
    assert_eq!(node.s("LSET l 0 small"), ok());
    assert_eq!(node.cmd(&[b"LSET", b"l", b"4", big.as_bytes()]), ok());
    let expected: Vec<Vec<u8>> = [
        "small", "a", "x", &big, &big, "b", &medium, &medium, &medium, &medium, &medium,
    ]
    .iter()
    .map(|e| e.as_bytes().to_vec())
    .collect();
    assert_eq!(whole(&mut node, "l"), expected);
    assert_eq!(node.cmd(&[b"LREM", b"l", b"0", big.as_bytes()]), int(2));
    assert_eq!(node.s("LLEN l"), int(9));
    assert_eq!(node.s("RPOP l 3"), bulks(&[&medium, &medium, &medium]));
    assert_eq!(node.s("LPOP l 100").to_owned(), {
        let mut rest = vec![bulk("small"), bulk("a"), bulk("x"), bulk("b")];
        rest.extend([bulk(&medium), bulk(&medium)]);
        Value::Array(rest)
    });
    assert_eq!(node.s("DBSIZE"), int(0));
}

/// The size of the compact encoding of the store's last redo record, as `tandem_redo`
/// writes it (a varint per run offset gap and length, then the data), without the call id.
fn last_redo_size(node: &Node) -> (usize, usize) {
    fn varint_len(n: u64) -> usize {
        (64 - (n | 1).leading_zeros() as usize).div_ceil(7)
    }
    let record = node.store.segment().last_redo();
    let mut meta = varint_len(record.runs().len() as u64);
    let mut end = 0;
    for run in record.runs() {
        meta += varint_len(run.offset - end) + varint_len(run.len);
        end = run.end();
    }
    (record.data().len(), meta)
}

#[test]
fn a_push_onto_a_long_list_redoes_tens_of_bytes() {
    let mut node = Node::new(DB);
    for batch in 0..100 {
        let elements: Vec<String> = (0..100)
            .map(|i| format!("e{:09}", batch * 100 + i))
            .collect();
        let mut args: Vec<&[u8]> = vec![b"RPUSH", b"l"];
        args.extend(elements.iter().map(|e| e.as_bytes()));
        node.cmd(&args);
    }
    assert_eq!(node.s("LLEN l"), int(10_000));
    for line in [
        "RPUSH l 0123456789",
        "LPUSH l 0123456789",
        "RPOP l",
        "LPOP l",
        "LSET l 5000 abcdefghij",
    ] {
        // Twenty of each: the typical one fits its node; the worst may make a node.
        let mut sizes: Vec<(usize, usize)> = (0..20)
            .map(|_| {
                node.s(line);
                last_redo_size(&node)
            })
            .collect();
        sizes.sort_by_key(|(data, meta)| data + meta);
        let (data, meta) = sizes[sizes.len() / 2];
        let (worst_data, worst_meta) = sizes[sizes.len() - 1];
        println!(
            "{line}: typically {data} data bytes + {meta} bytes of run headers; at worst \
             {worst_data} + {worst_meta}"
        );
        assert!(data + meta < 64, "{line}: {data} + {meta} bytes of redo");
        assert!(
            worst_data + worst_meta < 160,
            "{line}: {worst_data} + {worst_meta}"
        );
    }
}

// ---------------------------------------------------------------------------------------
// A seeded random sequence against a plain model.

/// SplitMix64: a small seeded generator for the test.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn range(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
}

type Model = std::collections::BTreeMap<Vec<u8>, VecDeque<Vec<u8>>>;

const KEYS: [&[u8]; 3] = [b"a", b"b", b"c"];

fn element(rng: &mut Rng) -> Vec<u8> {
    let tag = format!("v{}", rng.below(12));
    let pad = match rng.below(100) {
        0 => 9000 + rng.below(3000) as usize,
        1..=6 => 500 + rng.below(3000) as usize,
        7..=40 => rng.below(200) as usize,
        _ => 0,
    };
    let mut bytes = tag.into_bytes();
    bytes.extend(std::iter::repeat_n(b'.', pad));
    bytes
}

fn elements_reply(items: impl IntoIterator<Item = Vec<u8>>) -> Value {
    Value::Array(items.into_iter().map(Value::Bulk).collect())
}

fn resolve(index: i64, len: usize) -> Option<usize> {
    let index = if index < 0 { index + len as i64 } else { index };
    (0..len as i64).contains(&index).then_some(index as usize)
}

fn clamp(start: i64, stop: i64, len: usize) -> Option<(usize, usize)> {
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as usize, stop.min(len - 1) as usize))
}

/// One random command and the reply the model expects; the model is updated.
fn step(rng: &mut Rng, model: &mut Model) -> (Vec<Vec<u8>>, Value) {
    let key = KEYS[rng.below(3) as usize].to_vec();
    let list = model.get(&key).cloned().unwrap_or_default();
    let len = list.len() as i64;
    let mut args: Vec<Vec<u8>> = Vec::new();
    let word = |s: &str| s.as_bytes().to_vec();
    let pick_existing = |rng: &mut Rng, list: &VecDeque<Vec<u8>>| {
        if !list.is_empty() && rng.below(4) != 0 {
            list[rng.below(list.len() as u64) as usize].clone()
        } else {
            element(rng)
        }
    };
    let reply = match rng.below(16) {
        0..=2 => {
            let left = rng.below(2) == 0;
            let only_existing = rng.below(6) == 0;
            let name = match (left, only_existing) {
                (true, false) => "LPUSH",
                (false, false) => "RPUSH",
                (true, true) => "LPUSHX",
                (false, true) => "RPUSHX",
            };
            args.push(word(name));
            args.push(key.clone());
            let n = if rng.below(5) == 0 {
                1 + rng.below(60)
            } else {
                1 + rng.below(4)
            };
            let new: Vec<Vec<u8>> = (0..n).map(|_| element(rng)).collect();
            args.extend(new.iter().cloned());
            if only_existing && list.is_empty() {
                Value::Integer(0)
            } else {
                let entry = model.entry(key.clone()).or_default();
                for e in new {
                    if left {
                        entry.push_front(e);
                    } else {
                        entry.push_back(e);
                    }
                }
                Value::Integer(entry.len() as i64)
            }
        }
        3 | 4 => {
            let left = rng.below(2) == 0;
            args.push(word(if left { "LPOP" } else { "RPOP" }));
            args.push(key.clone());
            let count = (rng.below(2) == 0).then(|| rng.below(12) as usize);
            if let Some(count) = count {
                args.push(count.to_string().into_bytes());
            }
            match (count, list.is_empty()) {
                (None, true) => Value::Null,
                (Some(_), true) => Value::NullArray,
                (Some(0), false) => Value::Array(vec![]),
                (count, false) => {
                    let entry = model.get_mut(&key).unwrap();
                    let n = count.unwrap_or(1).min(entry.len());
                    let popped: Vec<Vec<u8>> = (0..n)
                        .map(|_| {
                            if left {
                                entry.pop_front().unwrap()
                            } else {
                                entry.pop_back().unwrap()
                            }
                        })
                        .collect();
                    if entry.is_empty() {
                        model.remove(&key);
                    }
                    match count {
                        None => Value::Bulk(popped.into_iter().next().unwrap()),
                        Some(_) => elements_reply(popped),
                    }
                }
            }
        }
        5 => {
            let (start, stop) = (rng.range(-len - 3, len + 3), rng.range(-len - 3, len + 3));
            args = vec![
                word("LRANGE"),
                key.clone(),
                word(&start.to_string()),
                word(&stop.to_string()),
            ];
            match clamp(start, stop, list.len()) {
                Some((start, stop)) => elements_reply(list.range(start..=stop).cloned()),
                None => Value::Array(vec![]),
            }
        }
        6 => {
            let index = rng.range(-len - 2, len + 1);
            args = vec![word("LINDEX"), key.clone(), word(&index.to_string())];
            match resolve(index, list.len()) {
                Some(i) => Value::Bulk(list[i].clone()),
                None => Value::Null,
            }
        }
        7 => {
            let index = rng.range(-len - 1, len);
            let new = element(rng);
            args = vec![
                word("LSET"),
                key.clone(),
                word(&index.to_string()),
                new.clone(),
            ];
            if list.is_empty() {
                err("ERR no such key")
            } else {
                match resolve(index, list.len()) {
                    Some(i) => {
                        model.get_mut(&key).unwrap()[i] = new;
                        ok()
                    }
                    None => err("ERR index out of range"),
                }
            }
        }
        8 => {
            let count = rng.range(-3, 3);
            let target = pick_existing(rng, &list);
            args = vec![
                word("LREM"),
                key.clone(),
                word(&count.to_string()),
                target.clone(),
            ];
            let mut removed = 0i64;
            if let Some(entry) = model.get_mut(&key) {
                let limit = count.unsigned_abs() as i64;
                let indexes: Vec<usize> = if count < 0 {
                    (0..entry.len()).rev().collect()
                } else {
                    (0..entry.len()).collect()
                };
                let mut drop = vec![false; entry.len()];
                for i in indexes {
                    if limit != 0 && removed == limit {
                        break;
                    }
                    if entry[i] == target {
                        drop[i] = true;
                        removed += 1;
                    }
                }
                let kept: VecDeque<Vec<u8>> = entry
                    .iter()
                    .zip(&drop)
                    .filter(|(_, d)| !**d)
                    .map(|(e, _)| e.clone())
                    .collect();
                *entry = kept;
                if entry.is_empty() {
                    model.remove(&key);
                }
            }
            Value::Integer(removed)
        }
        9 => {
            // Mostly a few elements off each end, so that lists grow long; now and then
            // anything.
            let (start, stop) = if rng.below(8) == 0 {
                (rng.range(-len - 2, len + 2), rng.range(-len - 2, len + 2))
            } else {
                (rng.range(0, 3), rng.range(-4, -1))
            };
            args = vec![
                word("LTRIM"),
                key.clone(),
                word(&start.to_string()),
                word(&stop.to_string()),
            ];
            if !list.is_empty() {
                match clamp(start, stop, list.len()) {
                    Some((start, stop)) => {
                        let kept = list.range(start..=stop).cloned().collect();
                        model.insert(key.clone(), kept);
                    }
                    None => {
                        model.remove(&key);
                    }
                }
            }
            ok()
        }
        10 => {
            let after = rng.below(2) == 0;
            let pivot = pick_existing(rng, &list);
            let new = element(rng);
            args = vec![
                word("LINSERT"),
                key.clone(),
                word(if after { "AFTER" } else { "before" }),
                pivot.clone(),
                new.clone(),
            ];
            if list.is_empty() {
                Value::Integer(0)
            } else {
                match list.iter().position(|e| *e == pivot) {
                    Some(at) => {
                        let entry = model.get_mut(&key).unwrap();
                        entry.insert(if after { at + 1 } else { at }, new);
                        Value::Integer(entry.len() as i64)
                    }
                    None => Value::Integer(-1),
                }
            }
        }
        11 => {
            let target = pick_existing(rng, &list);
            args = vec![word("LPOS"), key.clone(), target.clone()];
            let mut rank = 1i64;
            let mut count: Option<usize> = None;
            let mut maxlen = 0usize;
            if rng.below(2) == 0 {
                rank = rng.range(-3, 3);
                if rank == 0 {
                    rank = 1;
                }
                args.push(word("RANK"));
                args.push(word(&rank.to_string()));
            }
            if rng.below(2) == 0 {
                count = Some(rng.below(4) as usize);
                args.push(word("COUNT"));
                args.push(word(&count.unwrap().to_string()));
            }
            if rng.below(3) == 0 {
                maxlen = rng.below(len as u64 + 2) as usize;
                args.push(word("MAXLEN"));
                args.push(word(&maxlen.to_string()));
            }
            let order: Vec<usize> = if rank < 0 {
                (0..list.len()).rev().collect()
            } else {
                (0..list.len()).collect()
            };
            let scanned = if maxlen == 0 {
                order.len()
            } else {
                maxlen.min(order.len())
            };
            let matches: Vec<i64> = order[..scanned]
                .iter()
                .filter(|&&i| list[i] == target)
                .map(|&i| i as i64)
                .skip(rank.unsigned_abs() as usize - 1)
                .collect();
            match count {
                None => matches.first().map_or(Value::Null, |&i| Value::Integer(i)),
                Some(0) => ints(&matches),
                Some(n) => ints(&matches[..n.min(matches.len())]),
            }
        }
        12 | 13 => {
            let destination = KEYS[rng.below(3) as usize].to_vec();
            let (from_left, to_left) = if rng.below(3) == 0 {
                args = vec![word("RPOPLPUSH"), key.clone(), destination.clone()];
                (false, true)
            } else {
                let (from_left, to_left) = (rng.below(2) == 0, rng.below(2) == 0);
                let side = |left: bool| word(if left { "LEFT" } else { "right" });
                args = vec![
                    word("LMOVE"),
                    key.clone(),
                    destination.clone(),
                    side(from_left),
                    side(to_left),
                ];
                (from_left, to_left)
            };
            if list.is_empty() {
                Value::Null
            } else {
                let source = model.get_mut(&key).unwrap();
                let moved = if from_left {
                    source.pop_front().unwrap()
                } else {
                    source.pop_back().unwrap()
                };
                if source.is_empty() {
                    model.remove(&key);
                }
                let target = model.entry(destination).or_default();
                if to_left {
                    target.push_front(moved.clone());
                } else {
                    target.push_back(moved.clone());
                }
                Value::Bulk(moved)
            }
        }
        14 => {
            args = vec![word("LLEN"), key.clone()];
            Value::Integer(len)
        }
        _ => {
            if rng.below(16) == 0 {
                args = vec![word("DEL"), key.clone()];
                let existed = model.remove(&key).is_some();
                Value::Integer(existed as i64)
            } else {
                args = vec![word("LLEN"), key.clone()];
                Value::Integer(len)
            }
        }
    };
    (args, reply)
}

fn random_sequence(seed: u64, steps: usize) {
    let mut node = Node::new(DB);
    let mut rng = Rng(seed);
    let mut model = Model::new();
    let mut longest = 0;
    for i in 0..steps {
        let (args, expected) = step(&mut rng, &mut model);
        let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let reply = node.cmd(&args);
        if reply != expected {
            panic!(
                "seed {seed} step {i}: {:?} answered {:?}, the model {:?}",
                common::show(&args)
                    .iter()
                    .map(|a| if a.len() > 40 {
                        format!("{}…({})", &a[..20], a.len())
                    } else {
                        a.clone()
                    })
                    .collect::<Vec<_>>(),
                reply,
                expected
            );
        }
        longest = model
            .values()
            .map(VecDeque::len)
            .max()
            .unwrap_or(0)
            .max(longest);
        if i % 200 == 199 {
            for key in KEYS {
                let want: Vec<Vec<u8>> = model
                    .get(key)
                    .map(|l| l.iter().cloned().collect())
                    .unwrap_or_default();
                let key = std::str::from_utf8(key).unwrap();
                assert_eq!(
                    whole(&mut node, key),
                    want,
                    "seed {seed} step {i} key {key}"
                );
            }
        }
    }
    eprintln!("seed {seed}: the longest list held {longest} elements");
    // Every key of the model exists in the store, and no other.
    assert_eq!(node.s("DBSIZE"), int(model.len() as i64));
}

#[test]
fn random_sequences_match_a_plain_model() {
    for seed in [1, 2, 0xdead_beef] {
        random_sequence(seed, 2500);
    }
}

#[test]
fn random_sequences_in_one_multi_block_match_a_plain_model() {
    // The same commands queued in MULTI blocks of a few: each block is one txn.
    let mut node = Node::new(DB);
    let mut rng = Rng(77);
    let mut model = Model::new();
    for _ in 0..200 {
        assert_eq!(node.s("MULTI"), ok());
        let mut expected = Vec::new();
        for _ in 0..1 + rng.below(8) {
            let (args, reply) = step(&mut rng, &mut model);
            let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            assert_eq!(node.cmd(&args), Value::Simple(b"QUEUED".to_vec()));
            expected.push(reply);
        }
        assert_eq!(node.s("EXEC"), Value::Array(expected));
    }
    assert_eq!(node.s("DBSIZE"), int(model.len() as i64));
}
