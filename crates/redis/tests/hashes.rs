//! Hash commands, run in process (see `common`): replies and errors as redis-server 7.0.15
//! gives them, RESP3 shapes, large hashes that rehash, deletion of emptied keys, MULTI/EXEC,
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

fn bytes_of(value: &Value) -> Vec<u8> {
    match value {
        Value::Bulk(bytes) => bytes.clone(),
        other => panic!("a bulk string, not {other:?}"),
    }
}

/// The bulk strings of an array, set or map reply (a map's keys and values in turn).
fn strings(value: Value) -> Vec<Vec<u8>> {
    match value {
        Value::Array(items) | Value::Set(items) => items.iter().map(bytes_of).collect(),
        Value::Map(pairs) => pairs
            .iter()
            .flat_map(|(k, v)| [bytes_of(k), bytes_of(v)])
            .collect(),
        other => panic!("an aggregate, not {other:?}"),
    }
}

/// A flat list of field, value, field, value, … as a map.
fn pairs(flat: Vec<Vec<u8>>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    assert!(flat.len().is_multiple_of(2), "pairs come in twos");
    flat.chunks(2)
        .map(|p| (p[0].clone(), p[1].clone()))
        .collect()
}

fn sorted(mut items: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    items.sort();
    items
}

fn texts(words: &[&str]) -> Vec<Vec<u8>> {
    words.iter().map(|w| w.as_bytes().to_vec()).collect()
}

#[test]
fn set_get_and_delete_fields() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h a 1 b 2 a 3"), int(2));
    assert_eq!(node.s("HGET h a"), bulk("3"));
    assert_eq!(node.s("HGET h zz"), Value::Null);
    assert_eq!(node.s("HGET nokey a"), Value::Null);
    assert_eq!(node.s("HMSET h c 4 d 5"), ok());
    assert_eq!(node.s("HLEN h"), int(4));
    assert_eq!(node.s("HLEN nokey"), int(0));
    assert_eq!(
        node.s("HMGET h a zz d"),
        Value::Array(vec![bulk("3"), Value::Null, bulk("5")])
    );
    assert_eq!(
        node.s("HMGET nokey a b"),
        Value::Array(vec![Value::Null, Value::Null])
    );
    assert_eq!(node.s("HEXISTS h a"), int(1));
    assert_eq!(node.s("HEXISTS h zz"), int(0));
    assert_eq!(node.s("HEXISTS nokey a"), int(0));
    assert_eq!(node.s("HSETNX h a 9"), int(0));
    assert_eq!(node.s("HSETNX h e 9"), int(1));
    assert_eq!(node.s("HSETNX fresh f v"), int(1));
    assert_eq!(node.s("HSTRLEN h e"), int(1));
    assert_eq!(node.s("HSTRLEN h zz"), int(0));
    assert_eq!(node.s("HSTRLEN nokey zz"), int(0));
    assert_eq!(
        sorted(strings(node.s("HKEYS h"))),
        texts(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(
        sorted(strings(node.s("HVALS h"))),
        texts(&["2", "3", "4", "5", "9"])
    );
    assert_eq!(
        pairs(strings(node.s("HGETALL h"))),
        pairs(texts(&["a", "3", "b", "2", "c", "4", "d", "5", "e", "9"]))
    );
    assert_eq!(node.s("HGETALL nokey"), Value::Array(vec![]));
    assert_eq!(node.s("HKEYS nokey"), Value::Array(vec![]));
    assert_eq!(node.s("HDEL h a zz b a"), int(2));
    assert_eq!(node.s("HDEL nokey a"), int(0));
    assert_eq!(node.s("TYPE h"), Value::Simple(b"hash".to_vec()));
    // The last field's deletion deletes the key.
    assert_eq!(node.s("HDEL h c d e zz"), int(3));
    assert_eq!(node.s("EXISTS h"), int(0));
    assert_eq!(node.s("HDEL fresh f"), int(1));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn values_grow_and_shrink_in_place_or_move() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h f v"), int(1));
    // Within the entry's size class the value is rewritten in place; past it, the field
    // moves to a larger block (and back to a smaller one).
    for len in [2, 3, 40, 41, 300, 5000, 1, 0, 700, 2] {
        let value = "x".repeat(len);
        assert_eq!(node.cmd(&[b"HSET", b"h", b"f", value.as_bytes()]), int(0));
        assert_eq!(node.s("HSTRLEN h f"), int(len as i64));
        assert_eq!(
            node.cmd(&[b"HGET", b"h", b"f"]),
            Value::Bulk(value.into_bytes())
        );
    }
    // Binary fields and values, the empty field among them.
    assert_eq!(
        node.cmd(&[b"HSET", b"h", b"", b"empty", b"a\r\nb\0", b"\xff\x00"]),
        int(2)
    );
    assert_eq!(node.cmd(&[b"HGET", b"h", b""]), bulk("empty"));
    assert_eq!(
        node.cmd(&[b"HGET", b"h", b"a\r\nb\0"]),
        Value::Bulk(b"\xff\x00".to_vec())
    );
    assert_eq!(node.s("HLEN h"), int(3));
}

#[test]
fn counters_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HINCRBY h n 5"), int(5));
    assert_eq!(node.s("HINCRBY h n -7"), int(-2));
    assert_eq!(node.s("HGET h n"), bulk("-2"));
    assert_eq!(
        node.s("HINCRBY h n x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("HSET h s abc big 9223372036854775807"), int(2));
    assert_eq!(
        node.s("HINCRBY h s 1"),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        node.s("HINCRBY h big 1"),
        err("ERR increment or decrement would overflow")
    );
    assert_eq!(node.s("HGET h big"), bulk("9223372036854775807"));
    assert_eq!(node.s("HSET h f 10.5"), int(1));
    assert_eq!(node.s("HINCRBYFLOAT h f 0.1"), bulk("10.6"));
    // Long double arithmetic, as redis-server 7.0.15 answers.
    assert_eq!(
        node.s("HINCRBYFLOAT h f 5.0e3"),
        bulk("5010.60000000000000009")
    );
    assert_eq!(node.s("HINCRBYFLOAT h new 1e3"), bulk("1000"));
    assert_eq!(node.s("HINCRBYFLOAT h big 1"), bulk("9223372036854775808"));
    assert_eq!(
        node.s("HINCRBY h big 0"),
        err("ERR hash value is not an integer")
    );
    assert_eq!(
        node.s("HINCRBYFLOAT h s 1"),
        err("ERR hash value is not a float")
    );
    assert_eq!(
        node.s("HINCRBYFLOAT h f abc"),
        err("ERR value is not a valid float")
    );
    assert_eq!(
        node.s("HINCRBYFLOAT h f inf"),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(node.s("HSET h e 1e4932"), int(1));
    assert_eq!(
        node.s("HINCRBYFLOAT h e 1e4932"),
        err("ERR increment would produce NaN or Infinity")
    );
    // A refused counter on a missing key creates nothing.
    assert_eq!(
        node.s("HINCRBY none f x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("HINCRBYFLOAT none f inf"),
        err("ERR value is NaN or Infinity")
    );
    assert_eq!(node.s("EXISTS none"), int(0));
}

#[test]
fn wrong_types_and_bad_arguments_are_refused() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET str x"), ok());
    assert_eq!(node.s("SADD set m"), int(1));
    for command in [
        "HSET str f v",
        "HMSET str f v",
        "HSETNX str f v",
        "HGET str f",
        "HMGET str f",
        "HGETALL str",
        "HDEL str f",
        "HEXISTS set f",
        "HINCRBY str f 1",
        "HINCRBYFLOAT str f 1",
        "HKEYS str",
        "HVALS set",
        "HLEN str",
        "HSTRLEN str f",
        "HSCAN str 0",
        "HRANDFIELD str",
        "HRANDFIELD set 1",
    ] {
        assert_eq!(node.s(command), err(WRONGTYPE), "{command}");
    }
    for (command, name) in [
        ("HSET h f", "hset"),
        ("HSET h f v g", "hset"),
        ("HMSET h f v g", "hmset"),
        ("HGET h", "hget"),
        ("HSETNX h f", "hsetnx"),
        ("HINCRBY h f", "hincrby"),
        ("HSCAN h", "hscan"),
    ] {
        assert_eq!(
            node.s(command),
            err(&format!(
                "ERR wrong number of arguments for '{name}' command"
            )),
            "{command}"
        );
    }
    assert_eq!(node.s("HSET h f v"), int(1));
    assert_eq!(
        node.s("HRANDFIELD h x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("HRANDFIELD str x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("HRANDFIELD str 1 bad"), err("ERR syntax error"));
    assert_eq!(
        node.s("HRANDFIELD h 1 WITHVALUES x"),
        err("ERR syntax error")
    );
    assert_eq!(
        node.s("HRANDFIELD h -9223372036854775808"),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
        )
    );
    assert_eq!(
        node.s("HRANDFIELD h -9223372036854775807 WITHVALUES"),
        err("ERR value is out of range")
    );
    assert_eq!(node.s("HSCAN h x"), err("ERR invalid cursor"));
    assert_eq!(
        node.s("HSCAN h 18446744073709551616"),
        err("ERR invalid cursor")
    );
    assert_eq!(node.s("HSCAN h 0 COUNT 0"), err("ERR syntax error"));
    assert_eq!(
        node.s("HSCAN h 0 COUNT x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("HSCAN h 0 MATCH"), err("ERR syntax error"));
    assert_eq!(node.s("HSCAN h 0 TYPE hash"), err("ERR syntax error"));
    // Redis looks the key up before it reads the options.
    assert_eq!(
        node.s("HSCAN nokey 0 COUNT 0"),
        Value::Array(vec![bulk("0"), Value::Array(vec![])])
    );
    assert_eq!(node.s("HSCAN str 0 COUNT x"), err(WRONGTYPE));
    // Nothing refused changed anything.
    assert_eq!(node.s("DBSIZE"), int(3));
    assert_eq!(node.s("HLEN h"), int(1));
}

#[test]
fn resp3_answers_maps_and_nested_pairs() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h a 1"), int(1));
    assert!(matches!(node.s("HELLO 3"), Value::Map(_)));
    assert_eq!(
        node.s("HGETALL h"),
        Value::Map(vec![(bulk("a"), bulk("1"))])
    );
    assert_eq!(node.s("HGETALL nokey"), Value::Map(vec![]));
    assert_eq!(node.s("HKEYS h"), Value::Array(vec![bulk("a")]));
    assert_eq!(
        node.s("HMGET h a b"),
        Value::Array(vec![bulk("1"), Value::Null])
    );
    assert_eq!(
        node.s("HRANDFIELD h 3 WITHVALUES"),
        Value::Array(vec![Value::Array(vec![bulk("a"), bulk("1")])])
    );
    assert_eq!(
        node.s("HRANDFIELD h -2 WITHVALUES"),
        Value::Array(vec![
            Value::Array(vec![bulk("a"), bulk("1")]),
            Value::Array(vec![bulk("a"), bulk("1")])
        ])
    );
    assert_eq!(node.s("HRANDFIELD nokey"), Value::Null);
    assert_eq!(
        node.s("HSCAN h 0"),
        Value::Array(vec![bulk("0"), Value::Array(vec![bulk("a"), bulk("1")])])
    );
    assert!(matches!(node.s("HELLO 2"), Value::Array(_)));
    assert_eq!(
        node.s("HRANDFIELD h -2 WITHVALUES"),
        Value::Array(vec![bulk("a"), bulk("1"), bulk("a"), bulk("1")])
    );
}

#[test]
fn random_fields_are_fields_and_distinct_unless_repeated() {
    let mut node = Node::new(DB);
    for i in 0..50 {
        node.s(&format!("HSET h f{i} v{i}"));
    }
    let all: BTreeSet<Vec<u8>> = (0..50).map(|i| format!("f{i}").into_bytes()).collect();
    for count in [1, 2, 10, 16, 17, 30, 49] {
        let fields = strings(node.s(&format!("HRANDFIELD h {count}")));
        assert_eq!(fields.len(), count);
        let distinct: BTreeSet<Vec<u8>> = fields.iter().cloned().collect();
        assert_eq!(distinct.len(), count, "HRANDFIELD h {count} repeats");
        assert!(distinct.is_subset(&all));
        let with_values = pairs(strings(node.s(&format!("HRANDFIELD h {count} WITHVALUES"))));
        assert_eq!(with_values.len(), count);
        for (field, value) in with_values {
            assert_eq!(value, [b"v", &field[1..]].concat());
        }
    }
    assert_eq!(strings(node.s("HRANDFIELD h 50")).len(), 50);
    assert_eq!(
        strings(node.s("HRANDFIELD h 500"))
            .into_iter()
            .collect::<BTreeSet<_>>(),
        all
    );
    assert_eq!(node.s("HRANDFIELD h 0"), Value::Array(vec![]));
    // A negative count repeats: 2,000 draws from 50 fields reach nearly all of them.
    let drawn = strings(node.s("HRANDFIELD h -2000"));
    assert_eq!(drawn.len(), 2000);
    let reached: BTreeSet<Vec<u8>> = drawn.into_iter().collect();
    assert!(reached.is_subset(&all));
    assert!(reached.len() > 40, "only {} fields drawn", reached.len());
    let single = bytes_of(&node.s("HRANDFIELD h"));
    assert!(all.contains(&single));
    // The repeat cap refuses a reply that would not fit in memory, but not a missing key.
    assert_eq!(
        node.s("HRANDFIELD h -9223372036854775807"),
        err("ERR value is out of range, a negative count asks for at most 1048576 elements")
    );
    assert_eq!(
        node.s("HRANDFIELD nokey -9223372036854775807"),
        Value::Array(vec![])
    );
}

#[test]
fn a_large_hash_rehashes_scans_and_frees_every_block() {
    let mut node = Node::new(DB);
    const FIELDS: usize = 3000;
    // Several fields per command keep the test quick; the table grows through many
    // rehashes, each spread over later writes.
    for start in (0..FIELDS).step_by(10) {
        let mut args: Vec<Vec<u8>> = vec![b"HSET".to_vec(), b"big".to_vec()];
        for i in start..start + 10 {
            args.push(format!("field:{i}").into_bytes());
            args.push(format!("{}", i * 7).into_bytes());
        }
        let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        assert_eq!(node.cmd(&refs), int(10));
    }
    assert_eq!(node.s("HLEN big"), int(FIELDS as i64));
    for i in (0..FIELDS).step_by(97) {
        assert_eq!(
            node.s(&format!("HGET big field:{i}")),
            bulk(&format!("{}", i * 7))
        );
    }
    let all = pairs(strings(node.s("HGETALL big")));
    assert_eq!(all.len(), FIELDS);
    // A full HSCAN visits every field (at least once), with its value, while fields are
    // deleted under the cursor (which shrinks the table).
    let mut seen = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut steps = 0;
    loop {
        let Value::Array(reply) = node.s(&format!("HSCAN big {cursor} COUNT 50")) else {
            panic!("HSCAN answers an array")
        };
        let [Value::Bulk(next), batch] = &reply[..] else {
            panic!("HSCAN answers a cursor and pairs")
        };
        seen.extend(pairs(strings(batch.clone())));
        cursor = String::from_utf8(next.clone()).unwrap();
        steps += 1;
        if steps == 5 {
            for i in 2000..FIELDS {
                node.s(&format!("HDEL big field:{i}"));
            }
        }
        if cursor == "0" {
            break;
        }
    }
    for i in 0..2000 {
        let field = format!("field:{i}").into_bytes();
        assert_eq!(seen.get(&field), Some(&format!("{}", i * 7).into_bytes()));
    }
    let matched = strings(match node.s("HSCAN big 0 MATCH field:1?? COUNT 100000") {
        Value::Array(mut parts) => parts.pop().unwrap(),
        other => panic!("{other:?}"),
    });
    assert_eq!(pairs(matched).len(), 100);
    // Deleting the key frees every entry, the bucket arrays and the root (the harness's
    // allocator check would fail otherwise).
    assert_eq!(node.s("DEL big"), int(1));
    assert_eq!(node.s("DBSIZE"), int(0));
    assert_eq!(node.s("HSET big a b"), int(1));
    assert_eq!(node.s("FLUSHALL"), ok());
}

#[test]
fn ttl_survives_changes_and_an_expired_hash_is_gone() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h a 1"), int(1));
    assert_eq!(node.s("PEXPIRE h 100"), int(1));
    assert_eq!(node.s("HSET h b 2"), int(1));
    assert_eq!(node.s("HINCRBY h a 1"), int(2));
    assert_eq!(node.s("HDEL h b"), int(1));
    assert_eq!(node.s("PTTL h"), int(100));
    node.advance(100);
    assert_eq!(node.s("HGET h a"), Value::Null);
    assert_eq!(node.s("HLEN h"), int(0));
    // A write replaces the expired hash with a new one, without a TTL.
    assert_eq!(node.s("HSET h c 3"), int(1));
    assert_eq!(
        node.s("HGETALL h"),
        Value::Array(vec![bulk("c"), bulk("3")])
    );
    assert_eq!(node.s("PTTL h"), int(-1));
    assert_eq!(node.s("RENAME h g"), ok());
    assert_eq!(node.s("HGET g c"), bulk("3"));
}

#[test]
fn multi_exec_keeps_other_commands_effects_when_one_is_refused() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("HSET h s text"), int(1));
    assert_eq!(node.s("MULTI"), ok());
    for command in [
        "HSET h a 1",
        "HINCRBY h s 1",
        "HINCRBY h a 10",
        "HDEL h s",
        "HINCRBYFLOAT h a x",
        "HGETALL h",
    ] {
        assert_eq!(node.s(command), Value::Simple(b"QUEUED".to_vec()));
    }
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            int(1),
            err("ERR hash value is not an integer"),
            int(11),
            int(1),
            err("ERR value is not a valid float"),
            Value::Array(vec![bulk("a"), bulk("11")]),
        ])
    );
    // WATCH sees a hash change, and not a refused one.
    assert_eq!(node.s("WATCH h"), ok());
    assert_eq!(node.s("HSETNX h a 5"), int(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("HINCRBY h a 1");
    assert_eq!(node.s("EXEC"), Value::Array(vec![int(12)]));
    assert_eq!(node.s("WATCH h"), ok());
    assert_eq!(node.s("HSET h a 0"), int(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("HINCRBY h a 1");
    assert_eq!(node.s("EXEC"), Value::NullArray);
    assert_eq!(node.s("HGET h a"), bulk("0"));
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

type Model = BTreeMap<Vec<u8>, BTreeMap<Vec<u8>, Vec<u8>>>;

#[test]
fn a_random_sequence_matches_a_model() {
    let mut node = Node::new(DB);
    let mut model: Model = BTreeMap::new();
    let mut rng = Rng(0x6861_7368);
    let keys: Vec<Vec<u8>> = (0..4).map(|i| format!("h{i}").into_bytes()).collect();
    // Enough fields that one hash grows past a few rehashes and shrinks back.
    let field = |rng: &mut Rng| format!("f{}", rng.below(300)).into_bytes();
    let value = |rng: &mut Rng| match rng.below(4) {
        0 => format!("{}", rng.below(1000) as i64 - 500).into_bytes(),
        1 => "v".repeat(rng.below(200)).into_bytes(),
        2 => Vec::new(),
        _ => format!("w{}", rng.below(50)).into_bytes(),
    };
    let (mut emptied, mut largest) = (0, 0);
    for step in 0..4000 {
        let key = keys[rng.below(keys.len())].clone();
        let hash = model.get(&key).cloned().unwrap_or_default();
        largest = largest.max(hash.len());
        // Inserts dominate at first, deletes later, so hashes grow and then empty.
        let deleting = step > 2500;
        let choice = rng.below(12);
        let (args, expected): (Vec<Vec<u8>>, Value) = match choice {
            0..=2 if !deleting => {
                let mut args = vec![b"HSET".to_vec(), key.clone()];
                let mut created = 0;
                let mut after = hash.clone();
                for _ in 0..=rng.below(3) {
                    let (f, v) = (field(&mut rng), value(&mut rng));
                    created += i64::from(!after.contains_key(&f));
                    after.insert(f.clone(), v.clone());
                    args.push(f);
                    args.push(v);
                }
                model.insert(key.clone(), after);
                (args, int(created))
            }
            3 => {
                let f = field(&mut rng);
                let expected = hash.get(&f).map_or(Value::Null, |v| Value::Bulk(v.clone()));
                (vec![b"HGET".to_vec(), key.clone(), f], expected)
            }
            4 | 5 | 0..=2 => {
                let mut args = vec![b"HDEL".to_vec(), key.clone()];
                let mut after = hash.clone();
                let mut deleted = 0;
                for _ in 0..=rng.below(4) {
                    let f = if !after.is_empty() && rng.below(2) == 0 {
                        after.keys().nth(rng.below(after.len())).unwrap().clone()
                    } else {
                        field(&mut rng)
                    };
                    deleted += i64::from(after.remove(&f).is_some());
                    args.push(f);
                }
                if after.is_empty() {
                    emptied += usize::from(model.remove(&key).is_some());
                } else {
                    model.insert(key.clone(), after);
                }
                (args, int(deleted))
            }
            6 => {
                let f = field(&mut rng);
                let delta = rng.below(100) as i64 - 50;
                let expected = match hash.get(&f) {
                    None => Some(delta),
                    Some(v) => tandem_redis::num::parse_i64(v).map(|n| n + delta),
                };
                let reply = match expected {
                    Some(n) => {
                        let mut after = hash.clone();
                        after.insert(f.clone(), n.to_string().into_bytes());
                        model.insert(key.clone(), after);
                        int(n)
                    }
                    None => err("ERR hash value is not an integer"),
                };
                let args = vec![
                    b"HINCRBY".to_vec(),
                    key.clone(),
                    f,
                    delta.to_string().into_bytes(),
                ];
                (args, reply)
            }
            7 => (vec![b"HLEN".to_vec(), key.clone()], int(hash.len() as i64)),
            8 => {
                let f = field(&mut rng);
                let expected = hash.get(&f).map_or(0, Vec::len) as i64;
                (vec![b"HSTRLEN".to_vec(), key.clone(), f], int(expected))
            }
            9 => {
                let (f, v) = (field(&mut rng), value(&mut rng));
                let added = !hash.contains_key(&f);
                if added {
                    let mut after = hash.clone();
                    after.insert(f.clone(), v.clone());
                    model.insert(key.clone(), after);
                }
                (
                    vec![b"HSETNX".to_vec(), key.clone(), f, v],
                    int(i64::from(added)),
                )
            }
            10 => {
                let f = field(&mut rng);
                let expected = int(i64::from(hash.contains_key(&f)));
                (vec![b"HEXISTS".to_vec(), key.clone(), f], expected)
            }
            _ => {
                let args = [b"HGETALL".to_vec(), key.clone()];
                let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                let got = pairs(strings(node.cmd(&refs)));
                assert_eq!(got, hash, "step {step}: HGETALL {key:?}");
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
    assert!(emptied >= 2, "only {emptied} hashes were emptied");
    assert!(
        largest >= 150,
        "the largest hash held only {largest} fields"
    );
    // Every key the model holds is there, with every field; no other key is.
    assert_eq!(node.s("DBSIZE"), int(model.len() as i64));
    for (key, hash) in &model {
        let got = pairs(strings(node.cmd(&[b"HGETALL", key])));
        assert_eq!(&got, hash);
    }
}
