//! Set commands, run in process (see `common`): replies and errors as redis-server 7.0.15
//! gives them, RESP3 shapes, large sets that rehash, deletion of emptied keys, MULTI/EXEC,
//! and a seeded random sequence checked against a plain model.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

const DB: usize = 4 << 20;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// The members of an array or set reply, sorted (duplicates kept).
fn members(value: Value) -> Vec<Vec<u8>> {
    let items = match value {
        Value::Array(items) | Value::Set(items) => items,
        other => panic!("an aggregate, not {other:?}"),
    };
    let mut members: Vec<Vec<u8>> = items
        .into_iter()
        .map(|item| match item {
            Value::Bulk(bytes) => bytes,
            other => panic!("a bulk string, not {other:?}"),
        })
        .collect();
    members.sort();
    members
}

fn texts(words: &[&str]) -> Vec<Vec<u8>> {
    let mut texts: Vec<Vec<u8>> = words.iter().map(|w| w.as_bytes().to_vec()).collect();
    texts.sort();
    texts
}

#[test]
fn add_remove_and_test_members() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SADD s a b c a"), int(3));
    assert_eq!(node.s("SADD s c d"), int(1));
    assert_eq!(node.s("SCARD s"), int(4));
    assert_eq!(node.s("SCARD nokey"), int(0));
    assert_eq!(node.s("SISMEMBER s a"), int(1));
    assert_eq!(node.s("SISMEMBER s z"), int(0));
    assert_eq!(node.s("SISMEMBER nokey a"), int(0));
    assert_eq!(
        node.s("SMISMEMBER s a z d"),
        Value::Array(vec![int(1), int(0), int(1)])
    );
    assert_eq!(
        node.s("SMISMEMBER nokey a b"),
        Value::Array(vec![int(0), int(0)])
    );
    assert_eq!(members(node.s("SMEMBERS s")), texts(&["a", "b", "c", "d"]));
    assert_eq!(node.s("SMEMBERS nokey"), Value::Array(vec![]));
    assert_eq!(node.s("TYPE s"), Value::Simple(b"set".to_vec()));
    assert_eq!(node.s("SREM s a z a"), int(1));
    assert_eq!(node.s("SREM nokey a"), int(0));
    // Removing the last member deletes the key.
    assert_eq!(node.s("SREM s b c d e"), int(3));
    assert_eq!(node.s("EXISTS s"), int(0));
    // Binary members, the empty one among them; numbers keep their text.
    assert_eq!(
        node.cmd(&[b"SADD", b"b", b"", b"\x00\xff", b"007", b"7", b"a b"]),
        int(5)
    );
    assert_eq!(node.cmd(&[b"SISMEMBER", b"b", b""]), int(1));
    assert_eq!(
        members(node.s("SMEMBERS b")),
        vec![
            b"".to_vec(),
            b"\x00\xff".to_vec(),
            b"007".to_vec(),
            b"7".to_vec(),
            b"a b".to_vec()
        ]
    );
}

/// Runs an `SPOP`, checks that every member it answers was in `left`, removes them from
/// it, and answers how many it popped.
fn pop(node: &mut Node, left: &mut BTreeSet<Vec<u8>>, command: &str) -> usize {
    let popped = match node.s(command) {
        Value::Bulk(member) => vec![member],
        other => members(other),
    };
    for member in &popped {
        assert!(
            left.remove(member),
            "{command} answered {member:?} twice or never added"
        );
    }
    popped.len()
}

#[test]
fn pop_and_random_members() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SPOP nokey"), Value::Null);
    assert_eq!(node.s("SPOP nokey 3"), Value::Array(vec![]));
    assert_eq!(node.s("SRANDMEMBER nokey"), Value::Null);
    assert_eq!(node.s("SRANDMEMBER nokey 3"), Value::Array(vec![]));
    let all: BTreeSet<Vec<u8>> = (0..60).map(|i| format!("m{i}").into_bytes()).collect();
    for member in &all {
        node.cmd(&[b"SADD", b"s", member]);
    }
    for count in [1, 2, 19, 20, 21, 59] {
        let drawn = members(node.s(&format!("SRANDMEMBER s {count}")));
        assert_eq!(drawn.len(), count);
        let distinct: BTreeSet<Vec<u8>> = drawn.into_iter().collect();
        assert_eq!(distinct.len(), count, "SRANDMEMBER s {count} repeats");
        assert!(distinct.is_subset(&all));
    }
    assert_eq!(
        members(node.s("SRANDMEMBER s 1000")),
        all.iter().cloned().collect::<Vec<_>>()
    );
    assert_eq!(node.s("SRANDMEMBER s 0"), Value::Array(vec![]));
    let repeated = members(node.s("SRANDMEMBER s -3000"));
    assert_eq!(repeated.len(), 3000);
    let reached: BTreeSet<Vec<u8>> = repeated.into_iter().collect();
    assert!(reached.len() > 50, "only {} members drawn", reached.len());
    assert_eq!(
        node.s("SRANDMEMBER s -9223372036854775807"),
        err("ERR value is out of range, a negative count asks for at most 1048576 elements")
    );
    assert_eq!(node.s("SCARD s"), int(60));
    // SPOP removes what it answers, few at a time or nearly all at once.
    let mut left = all.clone();

    assert_eq!(pop(&mut node, &mut left, "SPOP s"), 1);
    assert_eq!(pop(&mut node, &mut left, "SPOP s 3"), 3);
    assert_eq!(pop(&mut node, &mut left, "SPOP s 0"), 0);
    // 56 left: popping 50 leaves 6, which Redis's case 3 chooses to keep.
    assert_eq!(pop(&mut node, &mut left, "SPOP s 50"), 50);
    assert_eq!(node.s("SCARD s"), int(6));
    assert_eq!(
        members(node.s("SMEMBERS s")),
        left.iter().cloned().collect::<Vec<_>>()
    );
    // Popping at least the whole set answers it all and deletes the key.
    assert_eq!(pop(&mut node, &mut left, "SPOP s 6"), 6);
    assert!(left.is_empty());
    assert_eq!(node.s("EXISTS s"), int(0));
    assert_eq!(node.s("SADD one x"), int(1));
    assert_eq!(node.s("SPOP one"), bulk("x"));
    assert_eq!(node.s("EXISTS one"), int(0));
    assert_eq!(node.s("SADD two x y"), int(2));
    assert_eq!(members(node.s("SPOP two 9")), texts(&["x", "y"]));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn intersections_unions_and_differences() {
    let mut node = Node::new(DB);
    node.s("SADD a 1 2 3 4 5");
    node.s("SADD b 4 5 6");
    node.s("SADD c 5 6 7 1");
    node.s("SET str x");
    assert_eq!(members(node.s("SINTER a b")), texts(&["4", "5"]));
    assert_eq!(members(node.s("SINTER a b c")), texts(&["5"]));
    assert_eq!(
        members(node.s("SINTER a a")),
        texts(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(node.s("SINTER a nokey"), Value::Array(vec![]));
    assert_eq!(
        members(node.s("SUNION a b nokey c")),
        texts(&["1", "2", "3", "4", "5", "6", "7"])
    );
    assert_eq!(
        members(node.s("SUNION a a")),
        texts(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(node.s("SUNION nokey"), Value::Array(vec![]));
    assert_eq!(members(node.s("SDIFF a b")), texts(&["1", "2", "3"]));
    assert_eq!(members(node.s("SDIFF a b c")), texts(&["2", "3"]));
    assert_eq!(
        members(node.s("SDIFF a nokey")),
        texts(&["1", "2", "3", "4", "5"])
    );
    assert_eq!(node.s("SDIFF a b a"), Value::Array(vec![]));
    assert_eq!(node.s("SDIFF nokey a"), Value::Array(vec![]));
    // Every key's type is checked, even after a missing one.
    assert_eq!(node.s("SINTER nokey str"), err(WRONGTYPE));
    assert_eq!(node.s("SUNION a str"), err(WRONGTYPE));
    assert_eq!(node.s("SDIFF nokey str"), err(WRONGTYPE));
    assert_eq!(node.s("SINTERCARD 2 a b"), int(2));
    assert_eq!(node.s("SINTERCARD 2 a b LIMIT 1"), int(1));
    assert_eq!(node.s("SINTERCARD 2 a b LIMIT 0"), int(2));
    assert_eq!(node.s("SINTERCARD 1 a limit 9 LIMIT 3"), int(3));
    assert_eq!(node.s("SINTERCARD 2 a nokey"), int(0));
    assert_eq!(node.s("SINTERCARD 2 nokey str"), err(WRONGTYPE));
    assert_eq!(
        node.s("SINTERCARD 0 a"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        node.s("SINTERCARD x a"),
        err("ERR numkeys should be greater than 0")
    );
    assert_eq!(
        node.s("SINTERCARD 3 a b"),
        err("ERR Number of keys can't be greater than number of args")
    );
    assert_eq!(
        node.s("SINTERCARD 1 a LIMIT -1"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(
        node.s("SINTERCARD 1 a LIMIT x"),
        err("ERR LIMIT can't be negative")
    );
    assert_eq!(node.s("SINTERCARD 1 a LIMIT"), err("ERR syntax error"));
    assert_eq!(node.s("SINTERCARD 1 a FOO 1"), err("ERR syntax error"));
}

#[test]
fn store_forms_replace_the_destination() {
    let mut node = Node::new(DB);
    node.s("SADD a 1 2 3");
    node.s("SADD b 2 3 4");
    node.s("SET str x");
    node.s("HSET h f v");
    // The destination's type does not matter: it is replaced, and its TTL dropped.
    assert_eq!(node.s("EXPIRE str 100"), int(1));
    assert_eq!(node.s("SINTERSTORE str a b"), int(2));
    assert_eq!(node.s("TYPE str"), Value::Simple(b"set".to_vec()));
    assert_eq!(node.s("TTL str"), int(-1));
    assert_eq!(members(node.s("SMEMBERS str")), texts(&["2", "3"]));
    assert_eq!(node.s("SUNIONSTORE h a b"), int(4));
    assert_eq!(members(node.s("SMEMBERS h")), texts(&["1", "2", "3", "4"]));
    // A destination that is also a source.
    assert_eq!(node.s("SDIFFSTORE a a b"), int(1));
    assert_eq!(members(node.s("SMEMBERS a")), texts(&["1"]));
    assert_eq!(node.s("SUNIONSTORE a a b"), int(4));
    // An empty result deletes the destination.
    assert_eq!(node.s("SINTERSTORE h a nokey"), int(0));
    assert_eq!(node.s("EXISTS h"), int(0));
    assert_eq!(node.s("SDIFFSTORE nothing nokey"), int(0));
    assert_eq!(node.s("EXISTS nothing"), int(0));
    assert_eq!(node.s("SDIFFSTORE str a a"), int(0));
    assert_eq!(node.s("EXISTS str"), int(0));
    // A refused store changes nothing.
    node.s("SET str x");
    assert_eq!(node.s("SUNIONSTORE a str b"), err(WRONGTYPE));
    assert_eq!(node.s("SCARD a"), int(4));
}

#[test]
fn smove_moves_one_member() {
    let mut node = Node::new(DB);
    node.s("SADD src a b");
    node.s("SADD dst c");
    node.s("SET str x");
    assert_eq!(node.s("SMOVE src dst a"), int(1));
    assert_eq!(members(node.s("SMEMBERS src")), texts(&["b"]));
    assert_eq!(members(node.s("SMEMBERS dst")), texts(&["a", "c"]));
    assert_eq!(node.s("SMOVE src dst zz"), int(0));
    // A member the destination holds already leaves the source only.
    node.s("SADD src c");
    assert_eq!(node.s("SMOVE src dst c"), int(1));
    assert_eq!(node.s("SCARD dst"), int(2));
    assert_eq!(node.s("SMOVE src src b"), int(1));
    assert_eq!(node.s("SMOVE src src zz"), int(0));
    // Moving the last member deletes the source and creates the destination.
    assert_eq!(node.s("SMOVE src fresh b"), int(1));
    assert_eq!(node.s("EXISTS src"), int(0));
    assert_eq!(members(node.s("SMEMBERS fresh")), texts(&["b"]));
    // A missing source answers 0 before the destination's type is looked at.
    assert_eq!(node.s("SMOVE nokey str a"), int(0));
    assert_eq!(node.s("SMOVE str dst a"), err(WRONGTYPE));
    assert_eq!(node.s("SMOVE dst str a"), err(WRONGTYPE));
    assert_eq!(node.s("SCARD dst"), int(2));
}

#[test]
fn wrong_types_and_bad_arguments_are_refused() {
    let mut node = Node::new(DB);
    node.s("SET str x");
    node.s("HSET h f v");
    node.s("SADD s a");
    for command in [
        "SADD str a",
        "SREM str a",
        "SISMEMBER h a",
        "SMISMEMBER str a",
        "SMEMBERS str",
        "SCARD h",
        "SPOP str",
        "SPOP str 0",
        "SRANDMEMBER str",
        "SRANDMEMBER str 1",
        "SINTER str",
        "SUNION s h",
        "SDIFF h",
        "SINTERSTORE d str",
        "SINTERCARD 1 str",
        "SSCAN str 0",
    ] {
        assert_eq!(node.s(command), err(WRONGTYPE), "{command}");
    }
    let out_of_range = "ERR value is out of range, must be positive";
    assert_eq!(node.s("SPOP s -1"), err(out_of_range));
    assert_eq!(node.s("SPOP nokey x"), err(out_of_range));
    assert_eq!(node.s("SPOP str x"), err(out_of_range));
    assert_eq!(node.s("SPOP s 1 2"), err("ERR syntax error"));
    assert_eq!(node.s("SRANDMEMBER s 1 2"), err("ERR syntax error"));
    assert_eq!(
        node.s("SRANDMEMBER s x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("SRANDMEMBER nokey -9223372036854775808"),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
        )
    );
    assert_eq!(node.s("SSCAN s x"), err("ERR invalid cursor"));
    assert_eq!(node.s("SSCAN s 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(node.s("SSCAN s 0 FOO 1"), err("ERR syntax error"));
    assert_eq!(
        node.s("SSCAN nokey 0 COUNT 0"),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    for (command, name) in [
        ("SADD s", "sadd"),
        ("SMOVE a b", "smove"),
        ("SINTERSTORE d", "sinterstore"),
        ("SINTERCARD 1", "sintercard"),
        ("SISMEMBER s", "sismember"),
    ] {
        assert_eq!(
            node.s(command),
            err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            )),
            "{command}"
        );
    }
    assert_eq!(node.s("SCARD s"), int(1));
    assert_eq!(node.s("DBSIZE"), int(3));
}

#[test]
fn resp3_answers_sets() {
    let mut node = Node::new(DB);
    node.s("SADD a x y");
    node.s("SADD b y");
    assert!(matches!(node.s("HELLO 3"), Value::Map(_)));
    let set = |items: &[&str]| Value::Set(items.iter().map(|item| bulk(item)).collect());
    assert!(matches!(node.s("SMEMBERS a"), Value::Set(items) if items.len() == 2));
    assert_eq!(node.s("SMEMBERS nokey"), set(&[]));
    assert_eq!(node.s("SINTER a b"), set(&["y"]));
    assert_eq!(node.s("SINTER a nokey"), set(&[]));
    assert!(matches!(node.s("SUNION a b"), Value::Set(items) if items.len() == 2));
    assert_eq!(node.s("SDIFF a b"), set(&["x"]));
    assert_eq!(node.s("SPOP nokey 2"), set(&[]));
    assert_eq!(node.s("SPOP a 0"), set(&[]));
    assert_eq!(node.s("SPOP nokey"), Value::Null);
    assert!(matches!(node.s("SRANDMEMBER a 2"), Value::Array(items) if items.len() == 2));
    assert!(matches!(node.s("SRANDMEMBER a -3"), Value::Array(items) if items.len() == 3));
    assert_eq!(
        node.s("SMISMEMBER a x z"),
        Value::Array(vec![int(1), int(0)])
    );
    assert!(matches!(node.s("SPOP a 1"), Value::Set(items) if items.len() == 1));
    assert_eq!(node.s("SPOP b 5"), set(&["y"]));
}

#[test]
fn a_large_set_rehashes_scans_and_frees_every_block() {
    let mut node = Node::new(DB);
    const MEMBERS: usize = 4000;
    for start in (0..MEMBERS).step_by(20) {
        let mut args: Vec<Vec<u8>> = vec![b"SADD".to_vec(), b"big".to_vec()];
        args.extend((start..start + 20).map(|i| format!("member:{i}").into_bytes()));
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(node.cmd(&refs), int(20));
    }
    assert_eq!(node.s("SCARD big"), int(MEMBERS as i64));
    assert_eq!(members(node.s("SMEMBERS big")).len(), MEMBERS);
    node.s("SADD odd member:1 member:3 member:5 extra");
    assert_eq!(
        members(node.s("SINTER big odd")),
        texts(&["member:1", "member:3", "member:5"])
    );
    assert_eq!(node.s("SINTERCARD 2 odd big LIMIT 2"), int(2));
    assert_eq!(members(node.s("SDIFF odd big")), texts(&["extra"]));
    assert_eq!(node.s("SDIFFSTORE d big odd"), int(MEMBERS as i64 - 3));
    assert_eq!(node.s("SUNIONSTORE u big odd"), int(MEMBERS as i64 + 1));
    // A full SSCAN visits every member, while members are removed under the cursor (which
    // shrinks the table).
    let mut seen = BTreeSet::new();
    let mut cursor = "0".to_string();
    let mut steps = 0;
    loop {
        let Value::Array(reply) = node.s(&format!("SSCAN big {cursor} COUNT 100")) else {
            panic!("SSCAN answers an array")
        };
        let [Value::Bulk(next), batch] = &reply[..] else {
            panic!("SSCAN answers a cursor and members")
        };
        seen.extend(members(batch.clone()));
        cursor = String::from_utf8(next.clone()).unwrap();
        steps += 1;
        if steps == 3 {
            for start in (3000..MEMBERS).step_by(50) {
                let mut args: Vec<Vec<u8>> = vec![b"SREM".to_vec(), b"big".to_vec()];
                args.extend((start..start + 50).map(|i| format!("member:{i}").into_bytes()));
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                assert_eq!(node.cmd(&refs), int(50));
            }
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..3000 {
        assert!(
            seen.contains(format!("member:{i}").as_bytes()),
            "member:{i} was not visited"
        );
    }
    let Value::Array(mut parts) = node.s("SSCAN big 0 MATCH member:2?? COUNT 100000") else {
        panic!("SSCAN answers an array")
    };
    assert_eq!(members(parts.pop().unwrap()).len(), 100);
    // Popping nearly everything, then deleting the rest: every block is freed (the
    // harness's allocator check would fail otherwise).
    assert_eq!(members(node.s("SPOP big 2990")).len(), 2990);
    assert_eq!(node.s("SCARD big"), int(10));
    assert_eq!(node.s("DEL big d u odd"), int(4));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn multi_exec_keeps_other_commands_effects_when_one_is_refused() {
    let mut node = Node::new(DB);
    node.s("SET str x");
    assert_eq!(node.s("MULTI"), ok());
    for command in [
        "SADD s a b",
        "SADD str a",
        "SMOVE s t a",
        "SPOP s -1",
        "SUNIONSTORE u s t",
        "SCARD u",
    ] {
        assert_eq!(node.s(command), Value::Simple(b"QUEUED".to_vec()));
    }
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            int(2),
            err(WRONGTYPE),
            int(1),
            err("ERR value is out of range, must be positive"),
            int(2),
            int(2),
        ])
    );
    assert_eq!(members(node.s("SMEMBERS t")), texts(&["a"]));
    // WATCH sees a set change, and not an SADD that added nothing.
    assert_eq!(node.s("WATCH s"), ok());
    assert_eq!(node.s("SADD s b"), int(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("SADD s c");
    assert_eq!(node.s("EXEC"), Value::Array(vec![int(1)]));
    assert_eq!(node.s("WATCH s"), ok());
    assert_eq!(node.s("SREM s c"), int(1));
    assert_eq!(node.s("MULTI"), ok());
    node.s("SADD s d");
    assert_eq!(node.s("EXEC"), Value::NullArray);
    assert_eq!(members(node.s("SMEMBERS s")), texts(&["b"]));
}

#[test]
fn ttl_survives_changes_and_an_expired_set_is_gone() {
    let mut node = Node::new(DB);
    node.s("SADD s a b");
    assert_eq!(node.s("PEXPIRE s 50"), int(1));
    node.s("SADD s c");
    node.s("SREM s a");
    node.s("SPOP s");
    assert_eq!(node.s("PTTL s"), int(50));
    node.advance(50);
    assert_eq!(node.s("SCARD s"), int(0));
    assert_eq!(node.s("SMOVE s t c"), int(0));
    assert_eq!(node.s("SADD s z"), int(1));
    assert_eq!(members(node.s("SMEMBERS s")), texts(&["z"]));
    assert_eq!(node.s("PTTL s"), int(-1));
}

/// A deterministic generator for the model test (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

type Model = BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>>;

/// Stores `set` as `key` in the model (an empty set is no key).
fn put(model: &mut Model, key: &[u8], set: BTreeSet<Vec<u8>>) {
    if set.is_empty() {
        model.remove(key);
    } else {
        model.insert(key.to_vec(), set);
    }
}

#[test]
fn a_random_sequence_matches_a_model() {
    let mut node = Node::new(DB);
    let mut model: Model = BTreeMap::new();
    let mut rng = Rng(0x7365_7473);
    let keys: Vec<Vec<u8>> = (0..5).map(|i| format!("s{i}").into_bytes()).collect();
    let member = |rng: &mut Rng| format!("m{}", rng.below(400)).into_bytes();
    let (mut emptied, mut largest) = (0, 0);
    for step in 0..4000 {
        let key = keys[rng.below(keys.len())].clone();
        let other = keys[rng.below(keys.len())].clone();
        let set = model.get(&key).cloned().unwrap_or_default();
        largest = largest.max(set.len());
        let growing = step < 2500;
        let (args, expected): (Vec<Vec<u8>>, Value) = match rng.below(14) {
            0..=3 if growing => {
                let mut args = vec![b"SADD".to_vec(), key.clone()];
                let mut after = set.clone();
                let mut added = 0;
                for _ in 0..=rng.below(4) {
                    let m = member(&mut rng);
                    added += i64::from(after.insert(m.clone()));
                    args.push(m);
                }
                put(&mut model, &key, after);
                (args, int(added))
            }
            0..=4 => {
                let mut args = vec![b"SREM".to_vec(), key.clone()];
                let mut after = set.clone();
                let mut removed = 0;
                // Late in the sequence, removals take many members at once, so sets empty.
                let removals = if growing { 4 } else { 40 };
                for _ in 0..=rng.below(removals) {
                    let m = if !after.is_empty() && rng.below(4) != 0 {
                        after.iter().nth(rng.below(after.len())).unwrap().clone()
                    } else {
                        member(&mut rng)
                    };
                    removed += i64::from(after.remove(&m));
                    args.push(m);
                }
                emptied += usize::from(after.is_empty() && !set.is_empty());
                put(&mut model, &key, after);
                (args, int(removed))
            }
            5 => {
                let m = member(&mut rng);
                let expected = int(i64::from(set.contains(&m)));
                (vec![b"SISMEMBER".to_vec(), key.clone(), m], expected)
            }
            6 => (vec![b"SCARD".to_vec(), key.clone()], int(set.len() as i64)),
            7 => {
                let m = member(&mut rng);
                let m = set
                    .iter()
                    .next()
                    .cloned()
                    .filter(|_| rng.below(2) == 0)
                    .unwrap_or(m);
                let moved = set.contains(&m);
                if moved && key != other {
                    let mut source = set.clone();
                    source.remove(&m);
                    emptied += usize::from(source.is_empty());
                    put(&mut model, &key, source);
                    let mut destination = model.get(&other).cloned().unwrap_or_default();
                    destination.insert(m.clone());
                    put(&mut model, &other, destination);
                }
                let args = vec![b"SMOVE".to_vec(), key.clone(), other.clone(), m];
                (args, int(i64::from(moved)))
            }
            8 => {
                // SPOP with a count: the model learns which members left from the reply.
                let count = rng.below(6);
                let args = [
                    b"SPOP".to_vec(),
                    key.clone(),
                    count.to_string().into_bytes(),
                ];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let popped = members(node.cmd(&refs));
                assert_eq!(popped.len(), count.min(set.len()), "step {step}");
                let mut after = set.clone();
                for m in &popped {
                    assert!(after.remove(m), "step {step}: SPOP answered {m:?}");
                }
                emptied += usize::from(after.is_empty() && !set.is_empty());
                put(&mut model, &key, after);
                continue;
            }
            9 => {
                let count = rng.below(8) as i64 - 3;
                let args = [
                    b"SRANDMEMBER".to_vec(),
                    key.clone(),
                    count.to_string().into_bytes(),
                ];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let drawn = members(node.cmd(&refs));
                let expected_len = if set.is_empty() {
                    0
                } else if count < 0 {
                    count.unsigned_abs() as usize
                } else {
                    (count as usize).min(set.len())
                };
                assert_eq!(drawn.len(), expected_len, "step {step}: {count}");
                assert!(drawn.iter().all(|m| set.contains(m)), "step {step}");
                continue;
            }
            10 => {
                let expected: BTreeSet<Vec<u8>> = match model.get(&other) {
                    Some(second) => set.intersection(second).cloned().collect(),
                    None => BTreeSet::new(),
                };
                let args = [b"SINTER".to_vec(), key.clone(), other.clone()];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                assert_eq!(
                    members(node.cmd(&refs)),
                    expected.into_iter().collect::<Vec<_>>(),
                    "step {step}"
                );
                continue;
            }
            11 if growing => {
                let second = model.get(&other).cloned().unwrap_or_default();
                let union: BTreeSet<Vec<u8>> = set.union(&second).cloned().collect();
                let destination = keys[rng.below(keys.len())].clone();
                put(&mut model, &destination, union.clone());
                let args = vec![
                    b"SUNIONSTORE".to_vec(),
                    destination,
                    key.clone(),
                    other.clone(),
                ];
                (args, int(union.len() as i64))
            }
            12 => {
                let second = model.get(&other).cloned().unwrap_or_default();
                let difference: BTreeSet<Vec<u8>> = set.difference(&second).cloned().collect();
                let args = [b"SDIFF".to_vec(), key.clone(), other.clone()];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                assert_eq!(
                    members(node.cmd(&refs)),
                    difference.into_iter().collect::<Vec<_>>(),
                    "step {step}"
                );
                continue;
            }
            _ => {
                let args = [b"SMEMBERS".to_vec(), key.clone()];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                assert_eq!(
                    members(node.cmd(&refs)),
                    set.iter().cloned().collect::<Vec<_>>(),
                    "step {step}"
                );
                continue;
            }
        };
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(
            node.cmd(&refs),
            expected,
            "step {step}: {:?}",
            common::show(&refs)
        );
    }
    assert!(emptied >= 2, "only {emptied} sets were emptied");
    assert!(
        largest >= 150,
        "the largest set held only {largest} members"
    );
    assert_eq!(node.s("DBSIZE"), int(model.len() as i64));
    for (key, set) in &model {
        assert_eq!(
            members(node.cmd(&[b"SMEMBERS", key])),
            set.iter().cloned().collect::<Vec<_>>()
        );
    }
}
