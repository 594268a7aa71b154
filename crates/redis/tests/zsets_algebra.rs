//! Sorted-set algebra (`ZUNION`, `ZINTER`, `ZDIFF`, their `STORE` forms, `ZINTERCARD`), `ZMPOP`,
//! `LMPOP` and `ZRANDMEMBER`, run in process (see `common`): replies and errors as
//! redis-server 7.0.15 gives them, plain sets counted with the score 1, NaN products counted as
//! 0, errors that change nothing, inputs and counts far past the arguments.

use crate::common;

use common::{Node, bulk, err};
use tandem_redis::resp::Value;

const DB: usize = 8 << 20;

const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SYNTAX: &str = "ERR syntax error";

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// An array of bulk strings.
fn strs(words: &[&str]) -> Value {
    Value::Array(words.iter().map(|word| bulk(word)).collect())
}

/// A node holding the sorted sets a {x:1 y:2 z:3} and b {y:10 z:20 w:30}, the plain set
/// s {x w q} and the string str.
fn node_with_inputs() -> Node {
    let mut node = Node::new(DB);
    assert_eq!(node.s("ZADD a 1 x 2 y 3 z"), int(3));
    assert_eq!(node.s("ZADD b 10 y 20 z 30 w"), int(3));
    assert_eq!(node.s("SADD s x w q"), int(3));
    assert_eq!(node.s("SET str v"), Value::Simple(b"OK".to_vec()));
    node
}

#[test]
fn union_intersection_and_difference_answer_as_redis() {
    let mut node = node_with_inputs();
    assert_eq!(
        node.s("ZUNION 2 a b WITHSCORES"),
        strs(&["x", "1", "y", "12", "z", "23", "w", "30"])
    );
    assert_eq!(
        node.s("ZUNION 2 a b weights 2 0.5 aggregate max withscores"),
        strs(&["x", "2", "y", "5", "z", "10", "w", "15"])
    );
    assert_eq!(
        node.s("ZINTER 2 a b AGGREGATE MIN WITHSCORES"),
        strs(&["y", "2", "z", "3"])
    );
    assert_eq!(node.s("ZINTER 3 a b s WITHSCORES"), strs(&[]));
    // A plain set's members count with the score 1.
    assert_eq!(
        node.s("ZUNION 2 a s WITHSCORES"),
        strs(&["q", "1", "w", "1", "x", "2", "y", "2", "z", "3"])
    );
    assert_eq!(node.s("ZDIFF 2 a b WITHSCORES"), strs(&["x", "1"]));
    assert_eq!(node.s("ZDIFF 2 b s"), strs(&["y", "z"]));
    assert_eq!(node.s("ZUNION 2 a nosuch"), strs(&["x", "y", "z"]));
    assert_eq!(node.s("ZINTER 2 a nosuch"), strs(&[]));
    assert_eq!(node.s("ZINTERCARD 2 a b"), int(2));
    assert_eq!(node.s("ZINTERCARD 2 a b LIMIT 1"), int(1));
    assert_eq!(node.s("ZINTERCARD 2 a b LIMIT 0"), int(2));
    assert_eq!(node.s("ZINTERCARD 2 a nosuch"), int(0));
}

#[test]
fn products_that_are_nan_count_as_zero() {
    let mut node = node_with_inputs();
    assert_eq!(node.s("ZADD i 0 m"), int(1));
    assert_eq!(
        node.s("ZUNION 1 a WEIGHTS inf WITHSCORES"),
        strs(&["x", "inf", "y", "inf", "z", "inf"])
    );
    assert_eq!(
        node.s("ZUNION 1 i WEIGHTS inf WITHSCORES"),
        strs(&["m", "0"])
    );
    // inf + -inf is NaN: 0.
    assert_eq!(
        node.s("ZUNION 2 a a WEIGHTS inf -inf WITHSCORES"),
        strs(&["x", "0", "y", "0", "z", "0"])
    );
    assert_eq!(
        node.s("ZINTER 2 a a WEIGHTS 0 inf AGGREGATE MAX WITHSCORES"),
        strs(&["x", "inf", "y", "inf", "z", "inf"])
    );
    assert_eq!(
        node.s("ZINTER 2 i i WEIGHTS inf inf WITHSCORES"),
        strs(&["m", "0"])
    );
}

#[test]
fn stores_replace_or_delete_the_destination() {
    let mut node = node_with_inputs();
    assert_eq!(node.s("ZUNIONSTORE d 2 a s"), int(5));
    assert_eq!(
        node.s("ZRANGE d 0 -1 WITHSCORES"),
        strs(&["q", "1", "w", "1", "x", "2", "y", "2", "z", "3"])
    );
    // A wrong type among the inputs changes nothing.
    assert_eq!(node.s("ZINTERSTORE d 2 a str"), err(WRONGTYPE));
    assert_eq!(node.s("ZCARD d"), int(5));
    // An empty result deletes the destination, whatever its type.
    assert_eq!(node.s("ZINTERSTORE d 2 a nosuch"), int(0));
    assert_eq!(node.s("EXISTS d"), int(0));
    assert_eq!(node.s("ZDIFFSTORE str 2 a b"), int(1));
    assert_eq!(node.s("ZRANGE str 0 -1 WITHSCORES"), strs(&["x", "1"]));
    // The destination may be an input.
    assert_eq!(node.s("ZINTERSTORE a 2 a b WEIGHTS 1 0"), int(2));
    assert_eq!(
        node.s("ZRANGE a 0 -1 WITHSCORES"),
        strs(&["y", "2", "z", "3"])
    );
}

#[test]
fn arguments_are_refused_as_redis_refuses_them() {
    let mut node = node_with_inputs();
    for (line, name) in [
        ("ZUNION 0 a", "zunion"),
        ("ZINTER 0 a", "zinter"),
        ("ZDIFF -1 a", "zdiff"),
        ("ZUNIONSTORE d 0 a", "zunionstore"),
        ("ZINTERSTORE d 0 a", "zinterstore"),
        ("ZDIFFSTORE d 0 a", "zdiffstore"),
        ("ZINTERCARD 0 a", "zintercard"),
    ] {
        let expected = format!("ERR at least 1 input key is needed for '{name}' command");
        assert_eq!(node.s(line), err(&expected), "{line}");
    }
    assert_eq!(
        node.s("ZUNION x a"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("ZUNION 5 a"), err(SYNTAX));
    assert_eq!(node.s("ZUNION 9223372036854775807 a"), err(SYNTAX));
    assert_eq!(node.s("ZUNIONSTORE d 3 a b"), err(SYNTAX));
    assert_eq!(node.s("ZUNION 2 a b WEIGHTS 1"), err(SYNTAX));
    assert_eq!(node.s("ZUNION 2 a b AGGREGATE AVG"), err(SYNTAX));
    assert_eq!(node.s("ZDIFF 2 a b AGGREGATE SUM"), err(SYNTAX));
    assert_eq!(node.s("ZDIFF 2 a b WEIGHTS 1 1"), err(SYNTAX));
    assert_eq!(node.s("ZINTERCARD 2 a b WITHSCORES"), err(SYNTAX));
    assert_eq!(node.s("ZUNIONSTORE d 1 a WITHSCORES"), err(SYNTAX));
    let not_float = err("ERR weight value is not a float");
    assert_eq!(node.s("ZUNION 1 a WEIGHTS nan"), not_float);
    assert_eq!(node.s("ZUNION 1 a WEIGHTS x"), not_float);
    let negative = err("ERR LIMIT can't be negative");
    assert_eq!(node.s("ZINTERCARD 1 a LIMIT -1"), negative);
    assert_eq!(node.s("ZINTERCARD 1 a LIMIT x"), negative);
    // A wrong type is found before the options are read.
    assert_eq!(node.s("ZUNION 2 a str BOGUS"), err(WRONGTYPE));
    assert_eq!(node.s("EXISTS d"), int(0));
}

#[test]
fn a_union_of_many_keys_is_answered() {
    let mut node = node_with_inputs();
    let mut args: Vec<Vec<u8>> = vec![b"ZUNIONSTORE".to_vec(), b"d".to_vec(), b"3000".to_vec()];
    for i in 0..3000 {
        args.push(if i % 3 == 0 {
            b"a".to_vec()
        } else {
            format!("k{i}").into_bytes()
        });
    }
    let refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
    assert_eq!(node.cmd(&refs), int(3));
    assert_eq!(
        node.s("ZRANGE d 0 -1 WITHSCORES"),
        strs(&["x", "1000", "y", "2000", "z", "3000"])
    );
}

#[test]
fn zmpop_and_lmpop_pop_from_the_first_key_that_holds_one() {
    let mut node = node_with_inputs();
    let pair = |member: &str, score: &str| strs(&[member, score]);
    assert_eq!(
        node.s("ZMPOP 2 nosuch a MIN COUNT 2"),
        Value::Array(vec![
            bulk("a"),
            Value::Array(vec![pair("x", "1"), pair("y", "2")])
        ])
    );
    assert_eq!(
        node.s("ZMPOP 1 a max"),
        Value::Array(vec![bulk("a"), Value::Array(vec![pair("z", "3")])])
    );
    assert_eq!(node.s("EXISTS a"), int(0));
    assert_eq!(node.s("ZMPOP 2 str b MIN"), err(WRONGTYPE));
    assert_eq!(node.s("ZMPOP 1 nosuch MIN"), Value::NullArray);
    assert_eq!(node.s("ZMPOP 1 b LEFT"), err(SYNTAX));
    assert_eq!(node.s("ZMPOP 5 b MIN"), err(SYNTAX));
    // The end word is read before the options.
    assert_eq!(node.s("ZMPOP 1 b UP COUNT 0"), err(SYNTAX));
    let numkeys = err("ERR numkeys should be greater than 0");
    assert_eq!(node.s("ZMPOP 0 b MIN"), numkeys);
    assert_eq!(node.s("LMPOP x b LEFT"), numkeys);
    let count = err("ERR count should be greater than 0");
    assert_eq!(node.s("ZMPOP 1 b MIN COUNT 0"), count);
    assert_eq!(node.s("LMPOP 1 b LEFT COUNT x"), count);
    assert_eq!(node.s("ZMPOP 1 b MIN COUNT 1 COUNT 1"), err(SYNTAX));
    assert_eq!(
        node.s("ZMPOP 1 b MAX COUNT 9223372036854775807"),
        Value::Array(vec![
            bulk("b"),
            Value::Array(vec![pair("w", "30"), pair("z", "20"), pair("y", "10")])
        ])
    );

    assert_eq!(node.s("RPUSH l a b c"), int(3));
    assert_eq!(
        node.s("LMPOP 2 nosuch l RIGHT COUNT 2"),
        Value::Array(vec![bulk("l"), strs(&["c", "b"])])
    );
    assert_eq!(
        node.s("LMPOP 1 l left COUNT 5"),
        Value::Array(vec![bulk("l"), strs(&["a"])])
    );
    assert_eq!(node.s("LMPOP 1 l LEFT"), Value::NullArray);
    assert_eq!(node.s("LMPOP 2 str l LEFT"), err(WRONGTYPE));
    assert_eq!(node.s("LMPOP 1 l MIN"), err(SYNTAX));
}

#[test]
fn zrandmember_counts_follow_redis() {
    let mut node = node_with_inputs();
    assert_eq!(node.s("ZRANDMEMBER nosuch"), Value::Null);
    assert_eq!(node.s("ZRANDMEMBER nosuch 5"), strs(&[]));
    assert_eq!(node.s("ZRANDMEMBER str"), err(WRONGTYPE));
    assert_eq!(node.s("ZRANDMEMBER str 5"), err(WRONGTYPE));
    assert_eq!(node.s("ZRANDMEMBER a 0"), strs(&[]));
    assert_eq!(node.s("ZRANDMEMBER a 1 WITHSCORES x"), err(SYNTAX));
    assert_eq!(node.s("ZRANDMEMBER a 1 BOGUS"), err(SYNTAX));
    assert_eq!(
        node.s("ZRANDMEMBER a -9223372036854775808"),
        err(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807"
        )
    );
    assert_eq!(
        node.s("ZRANDMEMBER a 9223372036854775807 WITHSCORES"),
        err("ERR value is out of range")
    );
    // A negative count past what a reply may hold is refused, not attempted.
    assert!(matches!(
        node.s("ZRANDMEMBER a -9223372036854775807"),
        Value::Error(_)
    ));
    // At least the whole set: every member once, with its score.
    let Value::Array(items) = node.s("ZRANDMEMBER a 100 WITHSCORES") else {
        panic!("an array");
    };
    let mut pairs: Vec<(Value, Value)> = items
        .chunks(2)
        .map(|pair| (pair[0].clone(), pair[1].clone()))
        .collect();
    pairs.sort_by_key(|pair| format!("{pair:?}"));
    assert_eq!(
        pairs,
        vec![
            (bulk("x"), bulk("1")),
            (bulk("y"), bulk("2")),
            (bulk("z"), bulk("3"))
        ]
    );
    // Fewer: distinct members; negative: that many, repeats allowed.
    for _ in 0..20 {
        let Value::Array(two) = node.s("ZRANDMEMBER a 2") else {
            panic!("an array");
        };
        assert_eq!(two.len(), 2);
        assert_ne!(two[0], two[1]);
    }
    let Value::Array(many) = node.s("ZRANDMEMBER a -50") else {
        panic!("an array");
    };
    assert_eq!(many.len(), 50);
    assert!(
        many.iter()
            .all(|m| ["x", "y", "z"].iter().any(|w| *m == bulk(w)))
    );
    // RESP3 nests each pair.
    node.s("HELLO 3");
    let Value::Array(nested) = node.s("ZRANDMEMBER a -2 WITHSCORES") else {
        panic!("an array");
    };
    assert_eq!(nested.len(), 2);
    assert!(
        nested
            .iter()
            .all(|pair| matches!(pair, Value::Array(p) if p.len() == 2))
    );
}
