//! `SORT` and `SORT_RO`, run in process (see `common`): replies and errors as redis-server
//! 7.0.15 gives them for lists, sets and sorted sets, numbers and text, `BY` and `GET`
//! patterns (`#`, keys, hash fields, `nosort`), `LIMIT` at its edges and `STORE`; and a long
//! list sorted with a small `LIMIT`.

use crate::common;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

const DB: usize = 64 << 20;

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// An array of bulk strings, `~` standing for a null.
fn strs(words: &[&str]) -> Value {
    Value::Array(
        words
            .iter()
            .map(|word| {
                if *word == "~" {
                    Value::Null
                } else {
                    bulk(word)
                }
            })
            .collect(),
    )
}

/// The keys the cases read: a list of numbers, one of text, weights, strings and hashes the
/// patterns name, a set, a sorted set and a string.
fn node_with_values() -> Node {
    let mut node = Node::new(DB);
    assert_eq!(node.s("RPUSH l 3 1 2 10"), int(4));
    assert_eq!(node.cmd(&[b"RPUSH", b"t", b"b", b"a", b"", b"c"]), int(4));
    assert_eq!(
        node.s("MSET w_1 30 w_2 20 w_3 10 w_10 40 k1 one k2 two"),
        ok()
    );
    assert_eq!(node.s("HSET h_1 f x"), int(1));
    assert_eq!(node.s("HSET h_3 f z"), int(1));
    assert_eq!(node.s("SADD s 5 1 3"), int(3));
    assert_eq!(node.s("ZADD z 1 c 2 a 3 b"), int(3));
    assert_eq!(node.s("SET str v"), ok());
    node
}

#[test]
fn numbers_text_and_windows_sort_as_redis_sorts_them() {
    let mut node = node_with_values();
    assert_eq!(node.s("SORT l"), strs(&["1", "2", "3", "10"]));
    assert_eq!(node.s("SORT l DESC"), strs(&["10", "3", "2", "1"]));
    assert_eq!(node.s("SORT l LIMIT 1 2"), strs(&["2", "3"]));
    assert_eq!(node.s("SORT l LIMIT -5 2"), strs(&["1", "2"]));
    assert_eq!(node.s("SORT l LIMIT 10 2"), strs(&[]));
    assert_eq!(
        node.s("SORT t"),
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(node.s("SORT t ALPHA"), strs(&["", "a", "b", "c"]));
    assert_eq!(node.s("SORT t ALPHA DESC"), strs(&["c", "b", "a", ""]));
    assert_eq!(node.s("SORT s"), strs(&["1", "3", "5"]));
    assert_eq!(node.s("SORT_RO s DESC"), strs(&["5", "3", "1"]));
    assert_eq!(
        node.s("SORT z"),
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(node.s("SORT nosuch"), strs(&[]));
    assert_eq!(
        node.s("SORT str"),
        err("WRONGTYPE Operation against a key holding the wrong kind of value")
    );
}

#[test]
fn by_and_get_patterns_reach_the_keys_they_make() {
    let mut node = node_with_values();
    assert_eq!(node.s("SORT l BY w_*"), strs(&["3", "2", "1", "10"]));
    assert_eq!(
        node.s("SORT l BY w_* GET # GET w_*"),
        strs(&["3", "10", "2", "20", "1", "30", "10", "40"])
    );
    assert_eq!(node.s("SORT l GET k*"), strs(&["one", "two", "~", "~"]));
    assert_eq!(node.s("SORT l GET h_*->f"), strs(&["x", "~", "z", "~"]));
    // Missing BY values sort first under ALPHA, in the list's order.
    assert_eq!(
        node.s("SORT l BY h_*->f ALPHA"),
        strs(&["2", "10", "1", "3"])
    );
    assert_eq!(
        node.s("SORT l ALPHA BY w_* GET #"),
        strs(&["3", "2", "1", "10"])
    );
    // Without a `*`, BY sorts nothing: a list or sorted set keeps its order.
    assert_eq!(node.s("SORT l BY nosort"), strs(&["3", "1", "2", "10"]));
    assert_eq!(node.s("SORT l BY nosort DESC LIMIT 1 2"), strs(&["2", "1"]));
    assert_eq!(node.s("SORT z BY nosort"), strs(&["c", "a", "b"]));
    assert_eq!(node.s("SORT z BY nosort DESC LIMIT 0 2"), strs(&["b", "a"]));
}

#[test]
fn store_writes_a_list_or_deletes_the_destination() {
    let mut node = node_with_values();
    assert_eq!(node.s("SORT s BY nosort STORE d"), int(3));
    assert_eq!(node.s("LRANGE d 0 -1"), strs(&["1", "3", "5"]));
    assert_eq!(node.s("SORT l GET k* STORE str"), int(4));
    assert_eq!(node.s("LRANGE str 0 -1"), strs(&["one", "two", "", ""]));
    assert_eq!(node.s("SORT l STORE d LIMIT 0 0"), int(0));
    assert_eq!(node.s("EXISTS d"), int(0));
    // A refusal changes nothing.
    assert_eq!(
        node.s("SORT t STORE str"),
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(node.s("LLEN str"), int(4));
}

#[test]
fn options_are_refused_as_redis_refuses_them() {
    let mut node = node_with_values();
    let syntax = err("ERR syntax error");
    assert_eq!(node.s("SORT l LIMIT 0"), syntax);
    assert_eq!(
        node.s("SORT l LIMIT x 1"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("SORT_RO l STORE d"), syntax);
    assert_eq!(node.s("SORT l GET"), syntax);
    assert_eq!(node.s("SORT l BOGUS"), syntax);
    assert_eq!(node.s("EXISTS d"), int(0));
}

#[test]
fn a_long_list_sorts_with_a_small_limit() {
    let mut node = Node::new(DB);
    let mut pushed = 0;
    while pushed < 100_000 {
        let mut args: Vec<Vec<u8>> = vec![b"RPUSH".to_vec(), b"big".to_vec()];
        args.extend(
            (pushed..pushed + 10_000).map(|i| ((i * 7919) % 100_000).to_string().into_bytes()),
        );
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        node.cmd(&refs);
        pushed += 10_000;
    }
    assert_eq!(node.s("SORT big LIMIT 0 3"), strs(&["0", "1", "2"]));
    assert_eq!(node.s("SORT big DESC LIMIT 1 2"), strs(&["99998", "99997"]));
    assert_eq!(node.s("SORT big BY nosort LIMIT 99999 5"), strs(&["92081"]));
}

/// As redis-server 7.0.15: `SORT` of a sorted set converts it to its skiplist encoding before
/// it reads it, also when it then refuses a number; `SORT_RO` (a read here, which Redis
/// also converts with) leaves it.
#[test]
fn sort_converts_a_sorted_set_to_its_skiplist() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1 a"), int(1));
    assert_eq!(node.s("SORT_RO z ALPHA"), strs(&["a"]));
    assert_eq!(node.s("OBJECT ENCODING z"), bulk("listpack"));
    assert_eq!(node.s("SORT z ALPHA"), strs(&["a"]));
    assert_eq!(node.s("OBJECT ENCODING z"), bulk("skiplist"));
    assert_eq!(node.s("ZADD y 1 notanumber"), int(1));
    assert_eq!(
        node.s("SORT y"),
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(node.s("OBJECT ENCODING y"), bulk("skiplist"));
    // A list is not converted, and its refusal commits nothing.
    assert_eq!(node.s("RPUSH l x"), int(1));
    let lsn = node.store.segment().lsn();
    assert_eq!(
        node.s("SORT l"),
        err("ERR One or more scores can't be converted into double")
    );
    assert_eq!(node.store.segment().lsn(), lsn);
}
