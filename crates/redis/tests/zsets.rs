//! Sorted set commands, run in process (see `common`): every command's replies and errors
//! as redis-server 7.0.15 gives them, RESP3's shapes, large sets, and a seeded random
//! sequence against a plain model, with the skip list's every invariant checked after each
//! step.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};

use common::{Node, bulk, err, ok};
use tandem_redis::cmd::zsets;
use tandem_redis::db::Layout;
use tandem_redis::num::format_double;
use tandem_redis::resp::{Proto, Value};

const DB: usize = 4 << 20;

fn int(n: i64) -> Value {
    Value::Integer(n)
}

fn bulks(items: &[&str]) -> Value {
    Value::Array(items.iter().map(|item| bulk(item)).collect())
}

fn double3(text: &str) -> Value {
    Value::Double(text.as_bytes().to_vec())
}

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const NOT_FLOAT: &str = "ERR value is not a valid float";
const NOT_INTEGER: &str = "ERR value is not an integer or out of range";
const SYNTAX: &str = "ERR syntax error";
const NOT_FLOAT_RANGE: &str = "ERR min or max is not a float";
const NOT_LEX_RANGE: &str = "ERR min or max not valid string range item";

/// Checks the skip list and table of sorted set `key`, if it exists.
fn verify(node: &Node, key: &str) {
    let segment = node.store.segment();
    let layout = Layout::for_segment_len(segment.len()).unwrap();
    if let Some(found) = layout.find_any(segment, key.as_bytes()) {
        zsets::verify(segment, &layout, &found).unwrap_or_else(|e| panic!("{key}: {e}"));
    }
}

#[test]
fn zadd_options_and_errors_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1 a 2 b -0 c"), int(3));
    assert_eq!(node.s("ZSCORE z c"), bulk("-0"));
    assert_eq!(
        node.s("ZADD z NX XX 1 a"),
        err("ERR XX and NX options at the same time are not compatible")
    );
    let gt_lt = err("ERR GT, LT, and/or NX options at the same time are not compatible");
    assert_eq!(node.s("ZADD z GT LT 1 a"), gt_lt);
    assert_eq!(node.s("ZADD z GT NX 1 a"), gt_lt);
    assert_eq!(node.s("ZADD z LT NX 1 a"), gt_lt);
    assert_eq!(
        node.s("ZADD z INCR 1 a 2 b"),
        err("ERR INCR option supports a single increment-element pair")
    );
    assert_eq!(node.s("ZADD z nan a"), err(NOT_FLOAT));
    assert_eq!(node.s("ZADD z 1 a 2"), err(SYNTAX));
    assert_eq!(node.s("ZADD z NX XX"), err(SYNTAX));
    assert_eq!(node.s("ZADD z abc 1 a"), err(SYNTAX));
    assert_eq!(node.s("ZADD z 1 a 1 b 1 c foo bar"), err(NOT_FLOAT));
    assert_eq!(
        node.s("ZADD z"),
        err("ERR wrong number of arguments for 'zadd' command")
    );
    assert_eq!(node.s("ZADD z INCR inf a"), bulk("inf"));
    assert_eq!(
        node.s("ZADD z INCR -inf a"),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(node.s("ZADD z CH 5 a 6 d"), int(2));
    assert_eq!(node.s("ZADD z XX INCR 1 nosuch"), Value::Null);
    assert_eq!(node.s("ZADD z NX INCR 1 a"), Value::Null);
    assert_eq!(node.s("ZADD z GT INCR -1 a"), Value::Null);
    assert_eq!(node.s("ZADD z GT INCR 1 a"), bulk("6"));
    assert_eq!(node.s("ZADD z GT CH 1 a"), int(0));
    assert_eq!(node.s("ZADD z LT CH 1 a 7 new"), int(2));
    assert_eq!(node.s("ZADD z XX CH 2 a 9 absent"), int(1));
    assert_eq!(node.s("ZADD z NX 100 a 8 other"), int(1));
    assert_eq!(node.s("ZADD z 2 a"), int(0));
    assert_eq!(node.s("ZADD z INCR 0 a"), bulk("2"));
    assert_eq!(
        node.s("ZRANGE z 0 -1 WITHSCORES"),
        bulks(&[
            "c", "-0", "a", "2", "b", "2", "d", "6", "new", "7", "other", "8"
        ])
    );
    // Equal scores keep the old one: -0 stays -0.
    assert_eq!(node.s("ZADD z CH 0 c"), int(0));
    assert_eq!(node.s("ZSCORE z c"), bulk("-0"));
    assert_eq!(node.s("ZADD z 0x10 hex 1e-3 milli"), int(2));
    assert_eq!(node.s("ZSCORE z hex"), bulk("16"));
    assert_eq!(node.s("ZSCORE z milli"), bulk("0.001"));
    assert_eq!(node.s("ZADD z 0.1 tenth"), int(1));
    assert_eq!(node.s("ZSCORE z tenth"), bulk("0.10000000000000001"));
    assert_eq!(node.s("ZADD z 1e300 huge"), int(1));
    assert_eq!(
        node.s("ZINCRBY z 1e300 huge"),
        bulk("2.0000000000000001e+300")
    );
    // XX on a missing key creates nothing.
    assert_eq!(node.s("ZADD nokey XX 1 a"), int(0));
    assert_eq!(node.s("ZADD nokey XX INCR 1 a"), Value::Null);
    assert_eq!(node.s("EXISTS nokey"), int(0));
    // A member may be empty, and repeated in one call (the last score wins).
    assert_eq!(node.cmd(&[b"ZADD", b"e", b"1", b"", b"2", b""]), int(1));
    assert_eq!(node.cmd(&[b"ZSCORE", b"e", b""]), bulk("2"));
    assert_eq!(node.s("SET s x"), ok());
    assert_eq!(node.s("ZADD s 1 a"), err(WRONGTYPE));
    assert_eq!(node.s("ZADD s XX 1 a"), err(WRONGTYPE));
    assert_eq!(node.s("ZADD s 1 a 1"), err(SYNTAX));
    assert_eq!(node.s("ZADD s nan a"), err(NOT_FLOAT));
    verify(&node, "z");
    verify(&node, "e");
}

#[test]
fn scores_and_increments_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZINCRBY z 2 m"), bulk("2"));
    assert_eq!(node.s("ZINCRBY z 1.5 m"), bulk("3.5"));
    assert_eq!(node.s("ZINCRBY z inf m"), bulk("inf"));
    assert_eq!(
        node.s("ZINCRBY z -inf m"),
        err("ERR resulting score is not a number (NaN)")
    );
    assert_eq!(node.s("ZINCRBY z x m"), err(NOT_FLOAT));
    assert_eq!(node.s("ZINCRBY z nan m"), err(NOT_FLOAT));
    assert_eq!(node.s("ZSCORE z m"), bulk("inf"));
    assert_eq!(node.s("ZSCORE z x"), Value::Null);
    assert_eq!(node.s("ZSCORE nokey x"), Value::Null);
    assert_eq!(node.s("ZADD z 2 b"), int(1));
    assert_eq!(
        node.s("ZMSCORE z m x b"),
        Value::Array(vec![bulk("inf"), Value::Null, bulk("2")])
    );
    assert_eq!(
        node.s("ZMSCORE nokey a b"),
        Value::Array(vec![Value::Null, Value::Null])
    );
    assert_eq!(node.s("ZCARD z"), int(2));
    assert_eq!(node.s("ZCARD nokey"), int(0));
    assert_eq!(node.s("ZADD z 123456789012345678 g -1.5e-7 f"), int(2));
    assert_eq!(node.s("ZSCORE z g"), bulk("1.2345678901234568e+17"));
    assert_eq!(node.s("ZSCORE z f"), bulk("-1.4999999999999999e-07"));
    assert_eq!(node.s("SET s x"), ok());
    for command in [
        "ZINCRBY s 1 a",
        "ZSCORE s a",
        "ZMSCORE s a",
        "ZCARD s",
        "ZREM s a",
        "ZRANK s a",
        "ZREVRANK s a",
        "ZCOUNT s 0 1",
        "ZLEXCOUNT s - +",
        "ZRANGE s 0 1",
        "ZREVRANGE s 0 1",
        "ZRANGEBYSCORE s 0 1",
        "ZREVRANGEBYSCORE s 1 0",
        "ZRANGEBYLEX s - +",
        "ZREVRANGEBYLEX s + -",
        "ZRANGESTORE d s 0 1",
        "ZPOPMIN s",
        "ZPOPMIN s 0",
        "ZPOPMAX s 2",
        "ZREMRANGEBYRANK s 0 1",
        "ZREMRANGEBYSCORE s 0 1",
        "ZREMRANGEBYLEX s - +",
        "ZSCAN s 0",
    ] {
        assert_eq!(node.s(command), err(WRONGTYPE), "{command}");
    }
    assert_eq!(node.s("GET s"), bulk("x"));
    verify(&node, "z");
}

#[test]
fn ranks_counts_and_ranges_follow_redis() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1 a 2 b 3 c 4 d 5 e"), int(5));
    assert_eq!(node.s("ZRANK z a"), int(0));
    assert_eq!(node.s("ZRANK z e"), int(4));
    assert_eq!(node.s("ZREVRANK z c"), int(2));
    assert_eq!(node.s("ZREVRANK z x"), Value::Null);
    assert_eq!(node.s("ZRANK nokey x"), Value::Null);
    assert_eq!(
        node.s("ZRANK z c extra"),
        err("ERR wrong number of arguments for 'zrank' command")
    );
    // Counts, with the bounds strtod reads.
    for (min, max, count) in [
        ("(1", "3", 2),
        ("-inf", "+inf", 5),
        ("3", "1", 0),
        ("(", "3", 3),
        ("", "+inf", 5),
        (" 1", "+inf", 5),
        ("1e400", "+inf", 0),
        ("(1e400", "+inf", 0),
        ("-1e400", "+inf", 5),
        ("\t2", "+inf", 4),
        ("( 2", "+inf", 3),
        ("1e-400", "+inf", 5),
        ("(-0", "+inf", 5),
        ("infinity", "+inf", 0),
        ("-INF", "+inf", 5),
        (".5", "+inf", 5),
        ("5.", "+inf", 1),
        ("(+inf", "+inf", 0),
        ("0x1p99999", "+inf", 0),
        ("2\0abc", "+inf", 4),
        ("2", "2", 1),
        ("(2", "2", 0),
        ("2", "(2", 0),
    ] {
        let reply = node.cmd(&[b"ZCOUNT", b"z", min.as_bytes(), max.as_bytes()]);
        assert_eq!(reply, int(count), "ZCOUNT z {min:?} {max:?}");
    }
    for bad in ["x", "1 ", "+", "nan", "nan(1)", "0x", "1e", "(nan", " "] {
        let reply = node.cmd(&[b"ZCOUNT", b"z", bad.as_bytes(), b"+inf"]);
        assert_eq!(reply, err(NOT_FLOAT_RANGE), "ZCOUNT z {bad:?} +inf");
    }
    assert_eq!(node.s("ZCOUNT nokey 0 1"), int(0));
    assert_eq!(node.s("ZCOUNT nokey x 1"), err(NOT_FLOAT_RANGE));
    // Ranks.
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["a", "b", "c", "d", "e"]));
    assert_eq!(
        node.s("ZRANGE z -100 100"),
        bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(node.s("ZRANGE z 5 1"), bulks(&[]));
    assert_eq!(node.s("ZRANGE z 10 20"), bulks(&[]));
    assert_eq!(
        node.s("ZRANGE z -9223372036854775808 9223372036854775807"),
        bulks(&["a", "b", "c", "d", "e"])
    );
    assert_eq!(
        node.s("ZRANGE z 0 -1 REV"),
        bulks(&["e", "d", "c", "b", "a"])
    );
    assert_eq!(
        node.s("ZRANGE z -2 -1 REV WITHSCORES"),
        bulks(&["b", "2", "a", "1"])
    );
    assert_eq!(
        node.s("ZREVRANGE z 0 1 WITHSCORES"),
        bulks(&["e", "5", "d", "4"])
    );
    assert_eq!(
        node.s("ZRANGE z 0 -1 WITHSCORES WITHSCORES"),
        node.s("ZRANGE z 0 -1 WITHSCORES")
    );
    // Scores.
    assert_eq!(node.s("ZRANGE z (1 3 BYSCORE"), bulks(&["b", "c"]));
    assert_eq!(node.s("ZRANGE z 3 (1 BYSCORE REV"), bulks(&["c", "b"]));
    assert_eq!(node.s("ZRANGE z 1 3 BYSCORE REV"), bulks(&[]));
    assert_eq!(node.s("ZRANGE z 0 -1 BYSCORE LIMIT 0 1"), bulks(&[]));
    assert_eq!(
        node.s("ZRANGEBYSCORE z -inf +inf LIMIT 1 2 WITHSCORES"),
        bulks(&["b", "2", "c", "3"])
    );
    assert_eq!(
        node.s("ZRANGEBYSCORE z -inf +inf WITHSCORES LIMIT 1 2"),
        bulks(&["b", "2", "c", "3"])
    );
    assert_eq!(
        node.s("ZRANGEBYSCORE z -inf +inf LIMIT 1 -1"),
        bulks(&["b", "c", "d", "e"])
    );
    assert_eq!(
        node.s("ZRANGEBYSCORE z -inf +inf LIMIT 1 -5"),
        bulks(&["b", "c", "d", "e"])
    );
    assert_eq!(node.s("ZRANGEBYSCORE z -inf +inf LIMIT 0 0"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYSCORE z -inf +inf LIMIT -1 2"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYSCORE z -inf +inf LIMIT 5 2"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYSCORE z -inf +inf LIMIT 4 2"), bulks(&["e"]));
    assert_eq!(
        node.s("ZRANGEBYSCORE z 1 5 LIMIT 9223372036854775807 1"),
        bulks(&[])
    );
    assert_eq!(
        node.s("ZREVRANGEBYSCORE z +inf -inf LIMIT 1 -1"),
        bulks(&["d", "c", "b", "a"])
    );
    assert_eq!(node.s("ZREVRANGEBYSCORE z (5 (1"), bulks(&["d", "c", "b"]));
    assert_eq!(node.s("ZREVRANGEBYSCORE z 5 1 LIMIT 4 9"), bulks(&["a"]));
    assert_eq!(node.s("ZREVRANGEBYSCORE z 5 1 LIMIT 5 9"), bulks(&[]));
    assert_eq!(node.s("ZREVRANGEBYSCORE z 0 1"), bulks(&[]));
    // Members.
    assert_eq!(node.s("ZRANGE z - + BYLEX LIMIT 1 2"), bulks(&["b", "c"]));
    assert_eq!(node.s("ZRANGE z (a [c BYLEX"), bulks(&["b", "c"]));
    assert_eq!(node.s("ZRANGE z [c (a BYLEX REV"), bulks(&["c", "b"]));
    assert_eq!(node.s("ZRANGEBYLEX z + -"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYLEX z - -"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYLEX z [a [a"), bulks(&["a"]));
    assert_eq!(node.s("ZRANGEBYLEX z (a [a"), bulks(&[]));
    assert_eq!(node.s("ZRANGEBYLEX z [ [c"), bulks(&["a", "b", "c"]));
    assert_eq!(node.s("ZRANGEBYLEX z ( [c"), bulks(&["a", "b", "c"]));
    assert_eq!(
        node.cmd(&[b"ZRANGEBYLEX", b"z", b"-", b"[c\0d"]),
        bulks(&["a", "b", "c"])
    );
    assert_eq!(node.s("ZREVRANGEBYLEX z + - LIMIT 1 2"), bulks(&["d", "c"]));
    assert_eq!(node.s("ZREVRANGEBYLEX z [c [a"), bulks(&["c", "b", "a"]));
    assert_eq!(node.s("ZREVRANGEBYLEX z [a [c"), bulks(&[]));
    assert_eq!(node.s("ZLEXCOUNT z - +"), int(5));
    assert_eq!(node.s("ZLEXCOUNT z [b (d"), int(2));
    assert_eq!(node.s("ZLEXCOUNT z (d [b"), int(0));
    assert_eq!(node.s("ZLEXCOUNT nokey - +"), int(0));
    // Errors, in Redis's order.
    let limit_error =
        "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX";
    let withscores_error = "ERR syntax error, WITHSCORES not supported in combination with BYLEX";
    for (command, error) in [
        ("ZRANGE z 0 -1 LIMIT 0 1", limit_error),
        ("ZREVRANGE z 0 1 LIMIT 0 1", limit_error),
        ("ZRANGE nokey 0 1 LIMIT 1 1", limit_error),
        ("ZRANGE z 0 -1 BYLEX", NOT_LEX_RANGE),
        ("ZRANGE z 0 -1 BYSCORE BYLEX", SYNTAX),
        ("ZRANGE z 0 -1 BYSCORE BYSCORE", SYNTAX),
        ("ZRANGE z 0 -1 REV REV", SYNTAX),
        ("ZRANGE z 0 -1 WITHSCORES BYLEX", withscores_error),
        ("ZRANGEBYLEX z - + WITHSCORES", withscores_error),
        ("ZRANGE z x 1 BYSCORE", NOT_FLOAT_RANGE),
        ("ZRANGE nokey x y BYSCORE", NOT_FLOAT_RANGE),
        ("ZRANGE z a b BYLEX", NOT_LEX_RANGE),
        ("ZRANGEBYLEX z -a +", NOT_LEX_RANGE),
        ("ZRANGEBYLEX z - +b", NOT_LEX_RANGE),
        ("ZLEXCOUNT z x +", NOT_LEX_RANGE),
        ("ZLEXCOUNT nokey x +", NOT_LEX_RANGE),
        ("ZRANGE z x 1", NOT_INTEGER),
        ("ZRANGE nokey x y", NOT_INTEGER),
        ("ZRANGE z 0 1 FOO", SYNTAX),
        ("ZRANGE z 0 1 LIMIT 1", SYNTAX),
        ("ZRANGE z 0 1 BYSCORE LIMIT x 1", NOT_INTEGER),
        (
            "ZRANGEBYSCORE z 1 5 LIMIT 0 9223372036854775808",
            NOT_INTEGER,
        ),
        ("ZRANGEBYSCORE z -inf +inf LIMIT 1", SYNTAX),
        ("ZRANGEBYSCORE z -inf +inf REV", SYNTAX),
        ("ZRANGEBYSCORE z -inf +inf BYLEX", SYNTAX),
        ("ZREVRANGE z 0 1 REV", SYNTAX),
        ("ZRANGESTORE d z 0 -1 WITHSCORES", SYNTAX),
    ] {
        assert_eq!(node.s(command), err(error), "{command}");
    }
    // LIMIT with a count of -1 is no LIMIT, even by rank.
    assert_eq!(node.s("ZRANGE z 0 0 LIMIT 3 -1"), bulks(&["a"]));
    assert_eq!(node.s("ZRANGE nokey 0 -1"), bulks(&[]));
    verify(&node, "z");
}

#[test]
fn pops_removals_and_stores_delete_emptied_keys() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1 a 2 b 3 c 4 d 5 e"), int(5));
    assert_eq!(node.s("ZPOPMIN z"), bulks(&["a", "1"]));
    assert_eq!(node.s("ZPOPMAX z 2"), bulks(&["e", "5", "d", "4"]));
    assert_eq!(node.s("ZPOPMIN z 0"), bulks(&[]));
    assert_eq!(node.s("ZPOPMIN z 1 2"), err(SYNTAX));
    let positive = err("ERR value is out of range, must be positive");
    assert_eq!(node.s("ZPOPMIN z x"), positive);
    assert_eq!(node.s("ZPOPMIN z -1"), positive);
    assert_eq!(node.s("ZPOPMAX nokey -1"), positive);
    assert_eq!(node.s("ZPOPMAX nokey"), bulks(&[]));
    assert_eq!(node.s("ZPOPMAX nokey 3"), bulks(&[]));
    assert_eq!(node.s("ZPOPMAX z 100"), bulks(&["c", "3", "b", "2"]));
    assert_eq!(node.s("EXISTS z"), int(0));

    assert_eq!(node.s("ZADD z 1 a 2 b 3 c 4 d 5 e"), int(5));
    assert_eq!(node.s("ZREM z a x b"), int(2));
    assert_eq!(node.s("ZREM z c d e c"), int(3));
    assert_eq!(node.s("EXISTS z"), int(0));
    assert_eq!(node.s("ZREM z a"), int(0));

    assert_eq!(node.s("ZADD z 1 a 2 b 3 c 4 d 5 e"), int(5));
    assert_eq!(node.s("ZREMRANGEBYRANK z x 1"), err(NOT_INTEGER));
    assert_eq!(node.s("ZREMRANGEBYRANK nokey x 1"), err(NOT_INTEGER));
    assert_eq!(node.s("ZREMRANGEBYRANK nokey 0 1"), int(0));
    assert_eq!(node.s("ZREMRANGEBYRANK z 1 2"), int(2));
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["a", "d", "e"]));
    assert_eq!(node.s("ZREMRANGEBYRANK z 5 1"), int(0));
    assert_eq!(node.s("ZREMRANGEBYSCORE z (1 x"), err(NOT_FLOAT_RANGE));
    assert_eq!(node.s("ZREMRANGEBYSCORE z (1 4"), int(1));
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["a", "e"]));
    assert_eq!(node.s("ZREMRANGEBYLEX z a b"), err(NOT_LEX_RANGE));
    assert_eq!(node.s("ZREMRANGEBYLEX z - +"), int(2));
    assert_eq!(node.s("EXISTS z"), int(0));

    assert_eq!(node.s("ZADD z 1 a 2 b 3 c 4 d 5 e"), int(5));
    assert_eq!(node.s("ZRANGESTORE dst z 1 3 BYSCORE REV"), int(0));
    assert_eq!(node.s("ZRANGESTORE dst z 3 1 BYSCORE REV"), int(3));
    assert_eq!(
        node.s("ZRANGE dst 0 -1 WITHSCORES"),
        bulks(&["a", "1", "b", "2", "c", "3"])
    );
    verify(&node, "dst");
    // An empty result deletes the destination; any type is replaced.
    assert_eq!(node.s("ZRANGESTORE dst z 10 20"), int(0));
    assert_eq!(node.s("EXISTS dst"), int(0));
    assert_eq!(node.s("SET str x"), ok());
    assert_eq!(node.s("ZRANGESTORE str z 0 1"), int(2));
    assert_eq!(node.s("TYPE str"), Value::Simple(b"zset".to_vec()));
    assert_eq!(node.s("ZRANGESTORE dst nokey 0 1"), int(0));
    assert_eq!(node.s("ZRANGESTORE dst z [a [c BYLEX LIMIT 1 5"), int(2));
    assert_eq!(node.s("ZRANGE dst 0 -1"), bulks(&["b", "c"]));
    assert_eq!(node.s("ZRANGESTORE z z 0 0"), int(1));
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["a"]));
    verify(&node, "z");
    verify(&node, "dst");
    verify(&node, "str");
    assert_eq!(node.s("DEL z dst str"), int(3));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn resp3_replies_use_doubles_and_pairs() {
    let mut node = Node::new(DB);
    assert!(matches!(node.s("HELLO 3"), Value::Map(_)));
    assert_eq!(node.session.proto(), Proto::Resp3);
    assert_eq!(node.s("ZADD z 1 a 2 b 3 c"), int(3));
    assert_eq!(node.s("ZSCORE z a"), double3("1"));
    assert_eq!(node.s("ZSCORE z x"), Value::Null);
    assert_eq!(
        node.s("ZMSCORE z a x"),
        Value::Array(vec![double3("1"), Value::Null])
    );
    assert_eq!(node.s("ZINCRBY z 1 a"), double3("2"));
    assert_eq!(node.s("ZADD z INCR 1 a"), double3("3"));
    assert_eq!(node.s("ZADD z NX INCR 1 a"), Value::Null);
    let pair = |member: &str, score: &str| Value::Array(vec![bulk(member), double3(score)]);
    assert_eq!(
        node.s("ZRANGE z 0 -1 WITHSCORES"),
        Value::Array(vec![pair("b", "2"), pair("a", "3"), pair("c", "3")])
    );
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["b", "a", "c"]));
    assert_eq!(
        node.s("ZREVRANGEBYSCORE z +inf -inf WITHSCORES LIMIT 0 1"),
        Value::Array(vec![pair("c", "3")])
    );
    assert_eq!(node.s("ZRANK z x"), Value::Null);
    assert_eq!(node.s("ZRANK z c"), int(2));
    // Without a count a pop is one flat pair; with one, pairs nest, even for 1.
    assert_eq!(
        node.s("ZPOPMIN z"),
        Value::Array(vec![bulk("b"), double3("2")])
    );
    assert_eq!(node.s("ZPOPMIN z 1"), Value::Array(vec![pair("a", "3")]));
    assert_eq!(node.s("ZPOPMIN z 0"), bulks(&[]));
    assert_eq!(node.s("ZPOPMAX nokey"), bulks(&[]));
    assert_eq!(node.s("ZADD z inf f -inf g"), int(2));
    assert_eq!(
        node.s("ZPOPMAX z 5"),
        Value::Array(vec![pair("f", "inf"), pair("c", "3"), pair("g", "-inf")])
    );
    // ZSCAN answers scores as strings in RESP3 too.
    assert_eq!(node.s("ZADD z -0 zero 0.5 half"), int(2));
    assert_eq!(
        node.s("ZSCAN z 0 MATCH zero"),
        Value::Array(vec![bulk("0"), bulks(&["zero", "-0"])])
    );
    assert_eq!(node.s("ZSCORE z zero"), double3("-0"));
}

#[test]
fn zscan_visits_every_member_and_parses_cursors_as_redis() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("ZSCAN nokey 0"),
        Value::Array(vec![bulk("0"), bulks(&[])])
    );
    // Without the key, options are not read; an invalid cursor is refused first.
    assert_eq!(
        node.s("ZSCAN nokey 0 COUNT 0"),
        Value::Array(vec![bulk("0"), bulks(&[])])
    );
    assert_eq!(node.s("ZSCAN nokey x"), err("ERR invalid cursor"));
    for i in 0..1000 {
        node.s(&format!("ZADD z {i} m{i}"));
    }
    for (command, error) in [
        ("ZSCAN z 0 COUNT 0", SYNTAX),
        ("ZSCAN z 0 COUNT x", NOT_INTEGER),
        ("ZSCAN z 0 MATCH", SYNTAX),
        ("ZSCAN z 0 FOO bar", SYNTAX),
        ("ZSCAN z x", "ERR invalid cursor"),
        ("ZSCAN z 18446744073709551616", "ERR invalid cursor"),
        ("ZSCAN z -", "ERR invalid cursor"),
    ] {
        assert_eq!(node.s(command), err(error), "{command}");
    }
    assert_eq!(
        node.cmd(&[b"ZSCAN", b"z", b" 1"]),
        err("ERR invalid cursor")
    );
    // "-1" is the largest cursor, as strtoul reads it; "" is 0.
    assert!(matches!(node.s("ZSCAN z -1"), Value::Array(_)));
    assert!(matches!(
        node.s("ZSCAN z 18446744073709551615"),
        Value::Array(_)
    ));
    assert!(matches!(node.cmd(&[b"ZSCAN", b"z", b""]), Value::Array(_)));
    let mut seen = BTreeMap::new();
    let mut cursor = "0".to_string();
    let mut calls = 0;
    loop {
        let Value::Array(reply) = node.s(&format!("ZSCAN z {cursor} COUNT 20 MATCH m1*")) else {
            panic!("ZSCAN answers an array")
        };
        let [Value::Bulk(next), Value::Array(items)] = &reply[..] else {
            panic!("ZSCAN answers a cursor and items")
        };
        for pair in items.chunks(2) {
            let [Value::Bulk(member), Value::Bulk(score)] = pair else {
                panic!("a member and its score")
            };
            seen.insert(member.clone(), score.clone());
        }
        calls += 1;
        cursor = String::from_utf8(next.clone()).unwrap();
        if cursor == "0" {
            break;
        }
    }
    assert!(calls > 5, "a scan of 1000 members takes several calls");
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = (0..1000)
        .filter(|i| i.to_string().starts_with('1'))
        .map(|i| (format!("m{i}").into_bytes(), i.to_string().into_bytes()))
        .collect();
    assert_eq!(seen, expected);
}

#[test]
fn a_large_set_keeps_ranks_and_shrinks_back() {
    let mut node = Node::new(8 << 20);
    let n = 5000;
    // Scores repeat, so members break ties.
    for chunk in (0..n).collect::<Vec<_>>().chunks(25) {
        let mut line = "ZADD big".to_string();
        for i in chunk {
            line.push_str(&format!(" {} member:{i:05}", i % 97));
        }
        assert_eq!(node.s(&line), int(chunk.len() as i64));
    }
    verify(&node, "big");
    assert_eq!(node.s("ZCARD big"), int(n));
    let mut order: Vec<(i64, String)> =
        (0..n).map(|i| (i % 97, format!("member:{i:05}"))).collect();
    order.sort();
    for rank in [0, 1, 2, 97, 1234, 2500, 4998, 4999] {
        let (score, member) = &order[rank as usize];
        assert_eq!(node.s(&format!("ZRANK big {member}")), int(rank));
        assert_eq!(node.s(&format!("ZREVRANK big {member}")), int(n - 1 - rank));
        assert_eq!(
            node.s(&format!("ZRANGE big {rank} {rank} WITHSCORES")),
            bulks(&[member, &score.to_string()])
        );
    }
    assert_eq!(
        node.s("ZCOUNT big 10 (20"),
        int(order.iter().filter(|(s, _)| (10..20).contains(s)).count() as i64)
    );
    let expected: Vec<&str> = order
        .iter()
        .filter(|(s, _)| *s == 50)
        .skip(3)
        .take(4)
        .map(|(_, m)| m.as_str())
        .collect();
    assert_eq!(
        node.s("ZRANGEBYSCORE big 50 50 LIMIT 3 4"),
        bulks(&expected)
    );
    // Move members across the order, then remove most of the set.
    for i in (0..n).step_by(7) {
        assert_eq!(
            node.s(&format!("ZINCRBY big 1000 member:{i:05}")),
            bulk(&(i % 97 + 1000).to_string())
        );
    }
    verify(&node, "big");
    assert_eq!(node.s("ZCOUNT big 1000 +inf"), int((n + 6) / 7));
    assert_eq!(
        node.s("ZREMRANGEBYSCORE big -inf (1000"),
        int(n - (n + 6) / 7)
    );
    verify(&node, "big");
    assert_eq!(node.s("ZREMRANGEBYRANK big 10 -10"), int((n + 6) / 7 - 19));
    verify(&node, "big");
    assert_eq!(node.s("ZCARD big"), int(19));
    assert_eq!(node.s("DEL big"), int(1));
    assert_eq!(node.s("DBSIZE"), int(0));
}

#[test]
fn multi_exec_keeps_the_effects_of_the_commands_that_ran() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z inf a"), int(1));
    assert_eq!(node.s("MULTI"), ok());
    let queued = Value::Simple(b"QUEUED".to_vec());
    assert_eq!(node.s("ZADD z 1 b 2 c"), queued);
    assert_eq!(node.s("ZINCRBY z -inf a"), queued);
    assert_eq!(node.s("ZADD z GT LT 1 a"), queued);
    assert_eq!(node.s("ZPOPMIN z"), queued);
    assert_eq!(node.s("ZRANGE z 0 -1 WITHSCORES"), queued);
    assert_eq!(
        node.s("EXEC"),
        Value::Array(vec![
            int(2),
            err("ERR resulting score is not a number (NaN)"),
            err("ERR GT, LT, and/or NX options at the same time are not compatible"),
            bulks(&["b", "1"]),
            bulks(&["c", "2", "a", "inf"]),
        ])
    );
    verify(&node, "z");
    // WATCH sees a sorted set's change, and not a ZADD that changed nothing.
    assert_eq!(node.s("WATCH z"), ok());
    assert_eq!(node.s("ZADD z 2 c"), int(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("ZCARD z");
    assert_eq!(node.s("EXEC"), Value::Array(vec![int(2)]));
    assert_eq!(node.s("WATCH z"), ok());
    assert_eq!(node.s("ZADD z 3 c"), int(0));
    assert_eq!(node.s("MULTI"), ok());
    node.s("ZCARD z");
    assert_eq!(node.s("EXEC"), Value::NullArray);
    // A block that empties a set and builds another.
    assert_eq!(node.s("MULTI"), ok());
    node.s("ZREM z a c");
    node.s("ZADD y 1 x");
    node.s("ZRANGESTORE w y 0 -1");
    assert_eq!(node.s("EXEC"), Value::Array(vec![int(2), int(1), int(1)]));
    assert_eq!(node.s("EXISTS z"), int(0));
    verify(&node, "w");
}

#[test]
fn an_expired_set_is_gone_and_replaced() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD z 1 a 2 b"), int(2));
    assert_eq!(node.s("PEXPIRE z 10"), int(1));
    node.advance(10);
    assert_eq!(node.s("ZCARD z"), int(0));
    assert_eq!(node.s("ZADD z XX 1 a"), int(0));
    assert_eq!(node.s("ZADD z 3 c"), int(1));
    assert_eq!(node.s("ZRANGE z 0 -1"), bulks(&["c"]));
    assert_eq!(node.s("TTL z"), int(-1));
}

#[test]
fn a_full_database_answers_oom_and_keeps_the_set_whole() {
    let mut node = Node::new(1 << 20);
    let mut added = 0;
    loop {
        let line = format!("ZADD z {added} {}", format!("{added:08}").repeat(8));
        match node.s(&line) {
            Value::Integer(1) => added += 1,
            Value::Error(text) => {
                assert!(
                    text.starts_with(b"OOM"),
                    "{}",
                    String::from_utf8_lossy(&text)
                );
                break;
            }
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(added > 1000, "only {added} members fit");
    verify(&node, "z");
    assert_eq!(node.s("ZCARD z"), int(added));
    // Popping frees room for the same member again.
    let first = "00000000".repeat(8);
    assert_eq!(node.s("ZPOPMIN z"), bulks(&[&first, "0"]));
    assert_eq!(node.s(&format!("ZADD z 0 {first}")), int(1));
    assert_eq!(node.s("ZCARD z"), int(added));
    verify(&node, "z");
}

// ---------------------------------------------------------------------------------------
// A seeded random sequence against a model.

/// SplitMix64: the test's own seeded generator.
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

    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

type Set = BTreeMap<Vec<u8>, f64>;

fn text(score: f64) -> String {
    let mut out = Vec::new();
    format_double(score, &mut out);
    String::from_utf8(out).unwrap()
}

struct Model {
    sets: BTreeMap<String, Set>,
    proto: Proto,
}

impl Model {
    fn double(&self, score: f64) -> Value {
        match self.proto {
            Proto::Resp2 => bulk(&text(score)),
            Proto::Resp3 => double3(&text(score)),
        }
    }

    fn null(&self) -> Value {
        Value::Null
    }

    fn sorted(&self, key: &str) -> Vec<(Vec<u8>, f64)> {
        let mut entries: Vec<(Vec<u8>, f64)> = self
            .sets
            .get(key)
            .map(|set| set.iter().map(|(m, s)| (m.clone(), *s)).collect())
            .unwrap_or_default();
        entries.sort_by(|a, b| a.1.partial_cmp(&b.1).unwrap().then_with(|| a.0.cmp(&b.0)));
        entries
    }

    fn entries(&self, entries: &[(Vec<u8>, f64)], scores: bool) -> Value {
        let mut items = Vec::new();
        for (member, score) in entries {
            let member = Value::Bulk(member.clone());
            match (scores, self.proto) {
                (false, _) => items.push(member),
                (true, Proto::Resp2) => items.extend([member, self.double(*score)]),
                (true, Proto::Resp3) => {
                    items.push(Value::Array(vec![member, self.double(*score)]));
                }
            }
        }
        Value::Array(items)
    }

    fn store(&mut self, key: &str, set: Set) {
        if set.is_empty() {
            self.sets.remove(key);
        } else {
            self.sets.insert(key.to_string(), set);
        }
    }
}

const MEMBERS: &[&str] = &[
    "a",
    "b",
    "c",
    "d",
    "e",
    "f",
    "g",
    "h",
    "aa",
    "ab",
    "ba",
    "m1",
    "m2",
    "m3",
    "m10",
    "x",
    "y",
    "z",
    "",
    "long-member-name-that-is-longer-than-a-cache-line-of-sixty-four-bytes-yes",
];

const SCORES: &[f64] = &[
    f64::NEG_INFINITY,
    -2.5,
    -1.0,
    -0.0,
    0.0,
    0.5,
    1.0,
    2.0,
    3.0,
    1e300,
    f64::INFINITY,
];

fn score(rng: &mut Rng) -> f64 {
    if rng.chance(40) {
        *rng.pick(SCORES)
    } else {
        rng.below(9) as f64 - 4.0
    }
}

fn member(rng: &mut Rng) -> Vec<u8> {
    if rng.chance(20) {
        format!("n{}", rng.below(300)).into_bytes()
    } else {
        rng.pick(MEMBERS).as_bytes().to_vec()
    }
}

/// A score bound's text and its test.
fn score_bound(rng: &mut Rng) -> (String, f64, bool) {
    let value = score(rng);
    let exclusive = rng.chance(30);
    let text = match (exclusive, value) {
        (true, v) => format!("({}", text(v)),
        (false, v) if v == f64::INFINITY && rng.chance(50) => "+inf".to_string(),
        (false, v) => text(v),
    };
    (text, value, exclusive)
}

fn in_min(score: f64, min: f64, exclusive: bool) -> bool {
    if exclusive { score > min } else { score >= min }
}

fn in_max(score: f64, max: f64, exclusive: bool) -> bool {
    if exclusive { score < max } else { score <= max }
}

/// A member range's end, as the model tests it.
enum LexEnd {
    Least,
    Greatest,
    Member(Vec<u8>, bool),
}

impl LexEnd {
    fn admits_as_min(&self, member: &[u8]) -> bool {
        match self {
            LexEnd::Least => true,
            LexEnd::Greatest => false,
            LexEnd::Member(bound, true) => member > bound.as_slice(),
            LexEnd::Member(bound, false) => member >= bound.as_slice(),
        }
    }

    fn admits_as_max(&self, member: &[u8]) -> bool {
        match self {
            LexEnd::Least => false,
            LexEnd::Greatest => true,
            LexEnd::Member(bound, true) => member < bound.as_slice(),
            LexEnd::Member(bound, false) => member <= bound.as_slice(),
        }
    }
}

/// A member bound's text and its end.
fn lex_bound(rng: &mut Rng) -> (Vec<u8>, LexEnd) {
    match rng.below(6) {
        0 => (b"-".to_vec(), LexEnd::Least),
        1 => (b"+".to_vec(), LexEnd::Greatest),
        n => {
            let exclusive = n % 2 == 0;
            let member = member(rng);
            let mut text = vec![if exclusive { b'(' } else { b'[' }];
            text.extend_from_slice(&member);
            (text, LexEnd::Member(member, exclusive))
        }
    }
}

/// Redis's rank range.
fn rank_range(len: usize, start: i64, end: i64) -> Option<(usize, usize)> {
    let len = len as i64;
    let (mut start, mut end) = (start, end);
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    if start > end || start >= len {
        return None;
    }
    Some((start as usize, end.min(len - 1) as usize))
}

fn limit_entries(entries: Vec<(Vec<u8>, f64)>, offset: i64, limit: i64) -> Vec<(Vec<u8>, f64)> {
    if offset < 0 {
        return Vec::new();
    }
    let take = if limit < 0 {
        usize::MAX
    } else {
        limit as usize
    };
    entries
        .into_iter()
        .skip(offset as usize)
        .take(take)
        .collect()
}

fn push(args: &mut Vec<Vec<u8>>, text: &[u8]) {
    args.push(text.to_vec());
}

/// One random command and the reply the model expects.
fn step(rng: &mut Rng, model: &mut Model) -> (Vec<Vec<u8>>, Value) {
    let key = rng.pick(&["a", "a", "b", "s"]).to_string();
    let wrongtype = key == "s";
    let mut args: Vec<Vec<u8>> = Vec::new();
    let expected = match rng.below(22) {
        0..=3 => {
            push(&mut args, b"ZADD");
            push(&mut args, key.as_bytes());
            let (nx, xx, gt, lt, ch, incr) = (
                rng.chance(15),
                rng.chance(15),
                rng.chance(15),
                rng.chance(15),
                rng.chance(30),
                rng.chance(20),
            );
            for (on, name) in [
                (nx, "NX"),
                (xx, "XX"),
                (gt, "GT"),
                (lt, "LT"),
                (ch, "CH"),
                (incr, "INCR"),
            ] {
                if on {
                    push(&mut args, name.as_bytes());
                }
            }
            let pairs: Vec<(f64, Vec<u8>)> = (0..1 + rng.below(if incr { 1 } else { 4 }))
                .map(|_| (score(rng), member(rng)))
                .collect();
            for (score, member) in &pairs {
                push(&mut args, text(*score).as_bytes());
                push(&mut args, member);
            }
            if nx && xx {
                err("ERR XX and NX options at the same time are not compatible")
            } else if (gt || lt) && nx || gt && lt {
                err("ERR GT, LT, and/or NX options at the same time are not compatible")
            } else if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut set = model.sets.get(&key).cloned().unwrap_or_default();
                let (mut added, mut updated, mut last) = (0, 0, None);
                let mut nan = false;
                if !xx || model.sets.contains_key(&key) {
                    for (score, member) in &pairs {
                        match set.get(member).copied() {
                            Some(_) if nx => {}
                            Some(current) => {
                                let new = if incr { current + score } else { *score };
                                if new.is_nan() {
                                    nan = true;
                                    break;
                                }
                                if (lt && new >= current) || (gt && new <= current) {
                                    continue;
                                }
                                last = Some(new);
                                if new != current {
                                    set.insert(member.clone(), new);
                                    updated += 1;
                                }
                            }
                            None if xx => {}
                            None => {
                                set.insert(member.clone(), *score);
                                added += 1;
                                last = Some(*score);
                            }
                        }
                    }
                }
                if nan {
                    err("ERR resulting score is not a number (NaN)")
                } else {
                    model.store(&key, set);
                    match (incr, last) {
                        (true, Some(score)) => model.double(score),
                        (true, None) => model.null(),
                        (false, _) if ch => int(added + updated),
                        (false, _) => int(added),
                    }
                }
            }
        }
        4 => {
            let (increment, member) = (score(rng), member(rng));
            args = vec![
                b"ZINCRBY".to_vec(),
                key.clone().into_bytes(),
                text(increment).into_bytes(),
                member.clone(),
            ];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut set = model.sets.get(&key).cloned().unwrap_or_default();
                let new = set.get(&member).copied().unwrap_or(0.0) + increment;
                let new = if set.contains_key(&member) {
                    new
                } else {
                    increment
                };
                if new.is_nan() {
                    err("ERR resulting score is not a number (NaN)")
                } else {
                    set.insert(member, new);
                    model.store(&key, set);
                    model.double(new)
                }
            }
        }
        5 | 6 => {
            push(&mut args, b"ZREM");
            push(&mut args, key.as_bytes());
            let members: Vec<Vec<u8>> = (0..1 + rng.below(4)).map(|_| member(rng)).collect();
            for member in &members {
                push(&mut args, member);
            }
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut set = model.sets.get(&key).cloned().unwrap_or_default();
                let removed = members.iter().filter(|m| set.remove(*m).is_some()).count();
                model.store(&key, set);
                int(removed as i64)
            }
        }
        7 => {
            let member = member(rng);
            let reverse = rng.chance(50);
            let name: &[u8] = if reverse { b"ZREVRANK" } else { b"ZRANK" };
            args = vec![name.to_vec(), key.clone().into_bytes(), member.clone()];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let sorted = model.sorted(&key);
                match sorted.iter().position(|(m, _)| *m == member) {
                    Some(rank) if reverse => int((sorted.len() - 1 - rank) as i64),
                    Some(rank) => int(rank as i64),
                    None => Value::Null,
                }
            }
        }
        8 => {
            push(&mut args, b"ZMSCORE");
            push(&mut args, key.as_bytes());
            let members: Vec<Vec<u8>> = (0..1 + rng.below(3)).map(|_| member(rng)).collect();
            for member in &members {
                push(&mut args, member);
            }
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let set = model.sets.get(&key);
                Value::Array(
                    members
                        .iter()
                        .map(|m| match set.and_then(|s| s.get(m)) {
                            Some(score) => model.double(*score),
                            None => Value::Null,
                        })
                        .collect(),
                )
            }
        }
        9 => {
            let (min_text, min, min_ex) = score_bound(rng);
            let (max_text, max, max_ex) = score_bound(rng);
            args = vec![
                b"ZCOUNT".to_vec(),
                key.clone().into_bytes(),
                min_text.into_bytes(),
                max_text.into_bytes(),
            ];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let count = model
                    .sorted(&key)
                    .iter()
                    .filter(|(_, s)| in_min(*s, min, min_ex) && in_max(*s, max, max_ex))
                    .count();
                int(count as i64)
            }
        }
        10 | 11 => {
            let (start, end) = (rng.below(14) as i64 - 7, rng.below(14) as i64 - 7);
            let (reverse, scores) = (rng.chance(40), rng.chance(50));
            args = vec![
                b"ZRANGE".to_vec(),
                key.clone().into_bytes(),
                start.to_string().into_bytes(),
                end.to_string().into_bytes(),
            ];
            if reverse {
                push(&mut args, b"REV");
            }
            if scores {
                push(&mut args, b"WITHSCORES");
            }
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut sorted = model.sorted(&key);
                if reverse {
                    sorted.reverse();
                }
                let selected = match rank_range(sorted.len(), start, end) {
                    Some((start, end)) => sorted[start..=end].to_vec(),
                    None => Vec::new(),
                };
                model.entries(&selected, scores)
            }
        }
        12 | 13 => {
            let (min_text, min, min_ex) = score_bound(rng);
            let (max_text, max, max_ex) = score_bound(rng);
            let (reverse, scores) = (rng.chance(40), rng.chance(50));
            let limit = rng
                .chance(40)
                .then(|| (rng.below(6) as i64 - 1, rng.below(6) as i64 - 2));
            let old_style = rng.chance(50);
            args = if old_style {
                let name: &[u8] = if reverse {
                    b"ZREVRANGEBYSCORE"
                } else {
                    b"ZRANGEBYSCORE"
                };
                vec![name.to_vec(), key.clone().into_bytes()]
            } else {
                vec![b"ZRANGE".to_vec(), key.clone().into_bytes()]
            };
            if reverse {
                push(&mut args, max_text.as_bytes());
                push(&mut args, min_text.as_bytes());
            } else {
                push(&mut args, min_text.as_bytes());
                push(&mut args, max_text.as_bytes());
            }
            if !old_style {
                push(&mut args, b"BYSCORE");
                if reverse {
                    push(&mut args, b"REV");
                }
            }
            if scores {
                push(&mut args, b"WITHSCORES");
            }
            if let Some((offset, count)) = limit {
                push(&mut args, b"LIMIT");
                push(&mut args, offset.to_string().as_bytes());
                push(&mut args, count.to_string().as_bytes());
            }
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut selected: Vec<(Vec<u8>, f64)> = model
                    .sorted(&key)
                    .into_iter()
                    .filter(|(_, s)| in_min(*s, min, min_ex) && in_max(*s, max, max_ex))
                    .collect();
                if reverse {
                    selected.reverse();
                }
                let (offset, count) = limit.unwrap_or((0, -1));
                model.entries(&limit_entries(selected, offset, count), scores)
            }
        }
        14 => {
            let max = rng.chance(50);
            let count = rng.chance(60).then(|| rng.below(5) as i64);
            let name: &[u8] = if max { b"ZPOPMAX" } else { b"ZPOPMIN" };
            args = vec![name.to_vec(), key.clone().into_bytes()];
            if let Some(count) = count {
                push(&mut args, count.to_string().as_bytes());
            }
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let mut sorted = model.sorted(&key);
                if max {
                    sorted.reverse();
                }
                let n = if sorted.is_empty() {
                    0
                } else {
                    count.unwrap_or(1) as usize
                };
                let popped: Vec<(Vec<u8>, f64)> = sorted.into_iter().take(n).collect();
                let mut set = model.sets.get(&key).cloned().unwrap_or_default();
                for (member, _) in &popped {
                    set.remove(member);
                }
                model.store(&key, set);
                if count.is_some() {
                    model.entries(&popped, true)
                } else {
                    let mut items = Vec::new();
                    for (member, score) in &popped {
                        items.extend([Value::Bulk(member.clone()), model.double(*score)]);
                    }
                    Value::Array(items)
                }
            }
        }
        15 => {
            let by = rng.below(2);
            let mut set = model.sets.get(&key).cloned().unwrap_or_default();
            let sorted = model.sorted(&key);
            let removed: Vec<(Vec<u8>, f64)> = if by == 0 {
                let (start, end) = (rng.below(10) as i64 - 5, rng.below(10) as i64 - 5);
                args = vec![
                    b"ZREMRANGEBYRANK".to_vec(),
                    key.clone().into_bytes(),
                    start.to_string().into_bytes(),
                    end.to_string().into_bytes(),
                ];
                match rank_range(sorted.len(), start, end) {
                    Some((start, end)) => sorted[start..=end].to_vec(),
                    None => Vec::new(),
                }
            } else {
                let (min_text, min, min_ex) = score_bound(rng);
                let (max_text, max, max_ex) = score_bound(rng);
                args = vec![
                    b"ZREMRANGEBYSCORE".to_vec(),
                    key.clone().into_bytes(),
                    min_text.into_bytes(),
                    max_text.into_bytes(),
                ];
                sorted
                    .into_iter()
                    .filter(|(_, s)| in_min(*s, min, min_ex) && in_max(*s, max, max_ex))
                    .collect()
            };
            if wrongtype {
                err(WRONGTYPE)
            } else {
                for (member, _) in &removed {
                    set.remove(member);
                }
                model.store(&key, set);
                int(removed.len() as i64)
            }
        }
        16 => {
            // Member ranges, on a set whose scores are all equal.
            let (min_text, min) = lex_bound(rng);
            let (max_text, max) = lex_bound(rng);
            let reverse = rng.chance(40);
            let what = rng.below(4);
            let limit = (what < 2 && rng.chance(40))
                .then(|| (rng.below(5) as i64 - 1, rng.below(5) as i64 - 2));
            let name: &[u8] = match (what, reverse) {
                (0 | 1, false) => b"ZRANGEBYLEX",
                (0 | 1, true) => b"ZREVRANGEBYLEX",
                (2, _) => b"ZLEXCOUNT",
                _ => b"ZREMRANGEBYLEX",
            };
            args = vec![name.to_vec(), b"lex".to_vec()];
            if reverse && what < 2 {
                args.extend([max_text, min_text]);
            } else {
                args.extend([min_text, max_text]);
            }
            if let Some((offset, count)) = limit {
                push(&mut args, b"LIMIT");
                push(&mut args, offset.to_string().as_bytes());
                push(&mut args, count.to_string().as_bytes());
            }
            let mut selected: Vec<(Vec<u8>, f64)> = model
                .sorted("lex")
                .into_iter()
                .filter(|(m, _)| min.admits_as_min(m) && max.admits_as_max(m))
                .collect();
            match what {
                0 | 1 => {
                    if reverse {
                        selected.reverse();
                    }
                    let (offset, count) = limit.unwrap_or((0, -1));
                    model.entries(&limit_entries(selected, offset, count), false)
                }
                2 => int(selected.len() as i64),
                _ => {
                    let mut set = model.sets.get("lex").cloned().unwrap_or_default();
                    for (member, _) in &selected {
                        set.remove(member);
                    }
                    model.store("lex", set);
                    int(selected.len() as i64)
                }
            }
        }
        17 => {
            let members: Vec<Vec<u8>> = (0..1 + rng.below(3)).map(|_| member(rng)).collect();
            args = vec![b"ZADD".to_vec(), b"lex".to_vec()];
            let mut set = model.sets.get("lex").cloned().unwrap_or_default();
            let mut added = 0;
            for member in &members {
                args.extend([b"0".to_vec(), member.clone()]);
                if set.insert(member.clone(), 0.0).is_none() {
                    added += 1;
                }
            }
            model.store("lex", set);
            int(added)
        }
        18 => {
            let (start, end) = (rng.below(10) as i64 - 5, rng.below(10) as i64 - 5);
            let destination = rng.pick(&["a", "b", "dst"]).to_string();
            args = vec![
                b"ZRANGESTORE".to_vec(),
                destination.clone().into_bytes(),
                key.clone().into_bytes(),
                start.to_string().into_bytes(),
                end.to_string().into_bytes(),
            ];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                let sorted = model.sorted(&key);
                let selected = match rank_range(sorted.len(), start, end) {
                    Some((start, end)) => sorted[start..=end].to_vec(),
                    None => Vec::new(),
                };
                let count = selected.len();
                model.store(&destination, selected.into_iter().collect());
                int(count as i64)
            }
        }
        19 => {
            args = vec![b"DEL".to_vec(), key.clone().into_bytes()];
            if wrongtype {
                int(1)
            } else {
                int(i64::from(model.sets.remove(&key).is_some()))
            }
        }
        20 => {
            args = vec![b"ZCARD".to_vec(), key.clone().into_bytes()];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                int(model.sets.get(&key).map_or(0, |s| s.len()) as i64)
            }
        }
        _ => {
            let member = member(rng);
            args = vec![b"ZSCORE".to_vec(), key.clone().into_bytes(), member.clone()];
            if wrongtype {
                err(WRONGTYPE)
            } else {
                match model.sets.get(&key).and_then(|s| s.get(&member)) {
                    Some(score) => model.double(*score),
                    None => Value::Null,
                }
            }
        }
    };
    (args, expected)
}

/// Scans `key` to the end and compares what it sees with the model.
fn scan_matches(node: &mut Node, model: &Model, key: &str, count: usize) {
    let mut seen = BTreeMap::new();
    let mut cursor = b"0".to_vec();
    loop {
        let reply = node.cmd(&[
            b"ZSCAN",
            key.as_bytes(),
            &cursor,
            b"COUNT",
            count.to_string().as_bytes(),
        ]);
        let Value::Array(reply) = reply else {
            panic!("ZSCAN answers an array")
        };
        let [Value::Bulk(next), Value::Array(items)] = &reply[..] else {
            panic!("ZSCAN answers a cursor and items")
        };
        for pair in items.chunks(2) {
            let [Value::Bulk(member), Value::Bulk(score)] = pair else {
                panic!("a member and its score")
            };
            seen.insert(member.clone(), score.clone());
        }
        cursor = next.clone();
        if cursor == b"0" {
            break;
        }
    }
    let expected: BTreeMap<Vec<u8>, Vec<u8>> = model
        .sets
        .get(key)
        .map(|set| {
            set.iter()
                .map(|(m, s)| (m.clone(), text(*s).into_bytes()))
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(seen, expected, "ZSCAN {key}");
}

fn random_sequence(seed: u64, steps: usize, proto: Proto) {
    let mut node = Node::new(DB);
    if proto == Proto::Resp3 {
        assert!(matches!(node.s("HELLO 3"), Value::Map(_)));
    }
    assert_eq!(node.s("SET s text"), ok());
    let mut rng = Rng(seed);
    let mut model = Model {
        sets: BTreeMap::new(),
        proto,
    };
    for i in 0..steps {
        let (args, expected) = step(&mut rng, &mut model);
        let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
        let reply = node.cmd(&argv);
        assert_eq!(
            reply,
            expected,
            "seed {seed} step {i}: {:?}",
            common::show(&argv)
        );
        if args[0] == b"DEL" && args[1] == b"s" {
            assert_eq!(node.s("SET s text"), ok());
        }
        for key in ["a", "b", "lex", "dst"] {
            verify(&node, key);
        }
        if i % 50 == 0 {
            for key in ["a", "b", "lex"] {
                scan_matches(&mut node, &model, key, 1 + rng.below(5));
            }
        }
    }
    let keys: BTreeSet<String> = model.sets.keys().cloned().collect();
    for key in &keys {
        let expected = model.sorted(key);
        let reply = node.cmd(&[b"ZRANGE", key.as_bytes(), b"0", b"-1", b"WITHSCORES"]);
        assert_eq!(reply, model.entries(&expected, true), "final {key}");
    }
}

#[test]
fn a_random_sequence_matches_the_model_in_resp2() {
    for seed in 1..=4 {
        random_sequence(seed, 1500, Proto::Resp2);
    }
}

#[test]
fn a_random_sequence_matches_the_model_in_resp3() {
    for seed in 101..=103 {
        random_sequence(seed, 1500, Proto::Resp3);
    }
}

// ---------------------------------------------------------------------------------------
// Against a live server.

/// A connection to a live redis-server.
struct Live(std::net::TcpStream, Vec<u8>);

impl Live {
    /// Connects to the server on `TANDEM_REDIS_PORT`, if that is set.
    fn connect() -> Option<Live> {
        let port = std::env::var("TANDEM_REDIS_PORT").ok()?;
        let stream = std::net::TcpStream::connect(("127.0.0.1", port.parse().ok()?)).ok()?;
        Some(Live(stream, Vec::new()))
    }

    fn cmd(&mut self, args: &[&[u8]]) -> Value {
        use std::io::{Read, Write};
        let mut request = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            request.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            request.extend_from_slice(arg);
            request.extend_from_slice(b"\r\n");
        }
        self.0.write_all(&request).unwrap();
        loop {
            if let Some((value, used)) = tandem_redis::resp::parse_reply(&self.1).unwrap() {
                self.1.drain(..used);
                return value;
            }
            let mut buffer = [0u8; 65536];
            let n = self.0.read(&mut buffer).unwrap();
            assert!(n > 0, "the server closed the connection");
            self.1.extend_from_slice(&buffer[..n]);
        }
    }
}

/// The random sequence's commands, each run on the in-process node and on a live
/// redis-server 7.0 kept in its skiplist encoding (so that scores keep their sign there
/// too), must answer alike. Run with `TANDEM_REDIS_PORT=<port> cargo test -- --ignored`.
#[test]
#[ignore = "needs a live redis-server on TANDEM_REDIS_PORT"]
fn the_random_sequence_matches_a_live_redis_server() {
    let Some(mut live) = Live::connect() else {
        panic!("set TANDEM_REDIS_PORT to the port of a redis-server 7.0 to compare with");
    };
    for (seed, proto) in [(7, Proto::Resp2), (8, Proto::Resp3), (9, Proto::Resp2)] {
        let mut node = Node::new(DB);
        for line in [
            "FLUSHALL",
            "CONFIG SET zset-max-listpack-entries 0",
            "SET s text",
        ] {
            let args: Vec<&[u8]> = line.split(' ').map(str::as_bytes).collect();
            live.cmd(&args);
        }
        let hello: &[&[u8]] = match proto {
            Proto::Resp2 => &[b"HELLO", b"2"],
            Proto::Resp3 => &[b"HELLO", b"3"],
        };
        live.cmd(hello);
        node.cmd(hello);
        node.s("SET s text");
        let mut rng = Rng(seed);
        let mut model = Model {
            sets: BTreeMap::new(),
            proto,
        };
        for i in 0..3000 {
            let (args, _) = step(&mut rng, &mut model);
            let argv: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let ours = node.cmd(&argv);
            let theirs = live.cmd(&argv);
            assert_eq!(
                ours,
                theirs,
                "seed {seed} step {i}: {:?}",
                common::show(&argv)
            );
            if args[0] == b"DEL" && args[1] == b"s" {
                node.s("SET s text");
                live.cmd(&[b"SET", b"s", b"text"]);
            }
        }
    }
}
