//! Bit commands (`SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`, `BITFIELD`,
//! `BITFIELD_RO`), `LCS` and `COPY`, run in process (see `common`). The expected replies are
//! redis-server 7.0.15's to the same commands (the examples of Redis's documentation and of
//! its `tests/unit/bitops.tcl`, `bitfield.tcl` and `type/string.tcl` among them).

use crate::common;

use common::{Node, bulk, err, ok};
use tandem_redis::resp::Value;

const DB: usize = 8 << 20;

fn int(n: i64) -> Value {
    Value::Integer(n)
}

fn ints(values: &[i64]) -> Value {
    Value::Array(values.iter().map(|&n| int(n)).collect())
}

const OFFSET_INVALID: &str = "ERR bit offset is not an integer or out of range";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";

#[test]
fn setbit_and_getbit_grow_the_string_and_refuse_bad_arguments() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SETBIT k 7 1"), int(0));
    assert_eq!(node.s("SETBIT k 7 1"), int(1));
    assert_eq!(node.s("GET k"), bulk("\x01"));
    assert_eq!(node.s("SETBIT k 100 1"), int(0));
    assert_eq!(node.s("STRLEN k"), int(13));
    assert_eq!(node.s("GETBIT k 100"), int(1));
    assert_eq!(node.s("GETBIT k 101"), int(0));
    assert_eq!(node.s("GETBIT k 4294967295"), int(0));
    assert_eq!(node.s("GETBIT missing 3"), int(0));
    assert_eq!(node.s("SETBIT k 7 0"), int(1));
    assert_eq!(node.s("GETBIT k 7"), int(0));
    for offset in ["4294967296", "-1", "x", "01", ""] {
        assert_eq!(
            node.cmd(&[b"SETBIT", b"k", offset.as_bytes(), b"1"]),
            err(OFFSET_INVALID)
        );
        assert_eq!(
            node.cmd(&[b"GETBIT", b"k", offset.as_bytes()]),
            err(OFFSET_INVALID)
        );
    }
    for value in ["2", "-1", "x"] {
        assert_eq!(
            node.cmd(&[b"SETBIT", b"k", b"1", value.as_bytes()]),
            err("ERR bit is not an integer or out of range")
        );
    }
    assert_eq!(node.s("RPUSH list a"), int(1));
    assert_eq!(node.s("SETBIT list 1 1"), err(WRONGTYPE));
    assert_eq!(node.s("GETBIT list 1"), err(WRONGTYPE));
    // The offset is read before the key's type.
    assert_eq!(node.s("GETBIT list x"), err(OFFSET_INVALID));
}

#[test]
fn setbit_keeps_the_ttl_and_a_string_that_does_not_fit_changes_nothing() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k a EX 100"), ok());
    assert_eq!(node.s("SETBIT k 1000 1"), int(0));
    assert_eq!(node.s("TTL k"), int(100));
    // 512 MB does not fit an 8 MiB database: the whole call fails, as any write that does
    // not fit.
    assert_eq!(
        node.s("SETBIT k 4294967295 1"),
        err("OOM command not allowed when used memory > 'maxmemory'.")
    );
    assert_eq!(node.s("STRLEN k"), int(126));
    assert_eq!(
        node.s("SETBIT new 4294967295 1"),
        err("OOM command not allowed when used memory > 'maxmemory'.")
    );
    assert_eq!(node.s("EXISTS new"), int(0));
}

#[test]
fn bitcount_counts_byte_and_bit_ranges() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET s foobar"), ok());
    assert_eq!(node.s("BITCOUNT s"), int(26));
    assert_eq!(node.s("BITCOUNT s 0 0"), int(4));
    assert_eq!(node.s("BITCOUNT s 1 1"), int(6));
    assert_eq!(node.s("BITCOUNT s 1 1 BYTE"), int(6));
    assert_eq!(node.s("BITCOUNT s 5 30 BIT"), int(17));
    assert_eq!(node.s("BITCOUNT s 5 30 bit"), int(17));
    assert_eq!(node.s("BITCOUNT s -1 -2"), int(0));
    assert_eq!(node.s("BITCOUNT s -2 -1"), int(7));
    assert_eq!(node.s("BITCOUNT s 0 -100"), int(4));
    assert_eq!(node.s("BITCOUNT s 4 2"), int(0));
    assert_eq!(node.s("BITCOUNT s 0 1000 BIT"), int(26));
    assert_eq!(node.s("BITCOUNT s 1"), err("ERR syntax error"));
    assert_eq!(node.s("BITCOUNT s 0 1 BOGUS"), err("ERR syntax error"));
    // A range wholly before the start answers 0 before the unit is read.
    assert_eq!(node.s("BITCOUNT s -1 -2 BOGUS"), int(0));
    assert_eq!(
        node.s("BITCOUNT s a 1"),
        err("ERR value is not an integer or out of range")
    );
    // A missing key answers 0 before the arguments are read.
    assert_eq!(node.s("BITCOUNT missing a b c"), int(0));
    assert_eq!(node.s("SET e "), ok());
    assert_eq!(node.s("BITCOUNT e 0 -1"), int(0));
}

#[test]
fn bitpos_finds_bits_in_byte_and_bit_ranges() {
    let mut node = Node::new(DB);
    node.cmd(&[b"SET", b"a", b"\xff\xf0\x00"]);
    assert_eq!(node.s("BITPOS a 0"), int(12));
    node.cmd(&[b"SET", b"b", b"\x00\xff\xf0"]);
    assert_eq!(node.s("BITPOS b 1 0"), int(8));
    assert_eq!(node.s("BITPOS b 1 2"), int(16));
    assert_eq!(node.s("BITPOS b 1 2 -1 BYTE"), int(16));
    assert_eq!(node.s("BITPOS b 1 7 15 BIT"), int(8));
    assert_eq!(node.s("BITPOS b 0 8 15 BIT"), int(-1));
    assert_eq!(node.s("BITPOS b 0 9 23 BIT"), int(20));
    node.cmd(&[b"SET", b"z", b"\x00\x00\x00"]);
    assert_eq!(node.s("BITPOS z 1"), int(-1));
    node.cmd(&[b"SET", b"ones", b"\xff\xff\xff"]);
    // Past the string are zeros, unless the range's end was given.
    assert_eq!(node.s("BITPOS ones 0"), int(24));
    assert_eq!(node.s("BITPOS ones 0 1"), int(24));
    assert_eq!(node.s("BITPOS ones 0 0 -1"), int(-1));
    assert_eq!(node.s("BITPOS ones 0 3 1"), int(-1));
    assert_eq!(node.s("BITPOS missing 0"), int(0));
    assert_eq!(node.s("BITPOS missing 1"), int(-1));
    assert_eq!(
        node.s("BITPOS missing 2"),
        err("ERR The bit argument must be 1 or 0.")
    );
    assert_eq!(node.s("BITPOS b 1 0 1 BOGUS"), err("ERR syntax error"));
    // The unit is read before the end.
    assert_eq!(node.s("BITPOS b 1 0 x BOGUS"), err("ERR syntax error"));
    assert_eq!(node.s("BITPOS b 1 0 1 BIT 2"), err("ERR syntax error"));
}

#[test]
fn bitop_combines_strings_padded_with_zeros() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET key1 foobar"), ok());
    assert_eq!(node.s("SET key2 abcdef"), ok());
    assert_eq!(node.s("BITOP AND dest key1 key2"), int(6));
    assert_eq!(node.s("GET dest"), bulk("`bc`ab"));
    assert_eq!(node.s("BITOP OR dest key1 key2"), int(6));
    assert_eq!(node.s("GET dest"), bulk("goofev"));
    assert_eq!(node.s("BITOP XOR dest key1 key2"), int(6));
    assert_eq!(node.s("GET dest"), Value::Bulk(vec![7, 13, 12, 6, 4, 20]));
    assert_eq!(node.s("SET short a"), ok());
    assert_eq!(node.s("BITOP AND dest key1 short"), int(6));
    assert_eq!(node.s("GET dest"), Value::Bulk(b"`\0\0\0\0\0".to_vec()));
    assert_eq!(node.s("BITOP AND dest key1 missing"), int(6));
    assert_eq!(node.s("GET dest"), Value::Bulk(vec![0; 6]));
    assert_eq!(node.s("BITOP NOT dest short"), int(1));
    assert_eq!(node.s("GET dest"), Value::Bulk(vec![!b'a']));
    assert_eq!(
        node.s("BITOP NOT dest key1 key2"),
        err("ERR BITOP NOT must be called with a single source key.")
    );
    assert_eq!(node.s("BITOP NAND dest key1"), err("ERR syntax error"));
    // The result replaces any value and its TTL; an empty one deletes the destination.
    assert_eq!(node.s("RPUSH list a"), int(1));
    assert_eq!(node.s("SET t x EX 100"), ok());
    assert_eq!(node.s("BITOP OR t key1"), int(6));
    assert_eq!(node.s("TTL t"), int(-1));
    assert_eq!(node.s("BITOP OR list missing"), int(0));
    assert_eq!(node.s("EXISTS list"), int(0));
    assert_eq!(node.s("RPUSH list a"), int(1));
    assert_eq!(node.s("BITOP OR dest key1 list"), err(WRONGTYPE));
    assert_eq!(node.s("GET dest"), Value::Bulk(vec![!b'a']));
}

#[test]
fn bitop_of_thousands_of_keys_is_answered() {
    let mut node = Node::new(64 << 20);
    let names: Vec<String> = (0..5000).map(|i| format!("k{i}")).collect();
    for name in names.iter().step_by(100) {
        node.cmd(&[b"SETBIT", name.as_bytes(), b"80000", b"1"]);
    }
    let mut args: Vec<&[u8]> = vec![b"BITOP", b"XOR", b"dest"];
    args.extend(names.iter().map(|name| name.as_bytes()));
    assert_eq!(node.cmd(&args), int(10001));
    assert_eq!(node.s("BITCOUNT dest"), int(0));
    args[1] = b"OR";
    assert_eq!(node.cmd(&args), int(10001));
    assert_eq!(node.s("BITPOS dest 1"), int(80000));
}

#[test]
fn bitfield_gets_sets_and_increments_as_redis_tests_show() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("BITFIELD bits SET i8 0 -100"), ints(&[0]));
    assert_eq!(node.s("BITFIELD bits SET i8 0 101"), ints(&[-100]));
    assert_eq!(node.s("BITFIELD bits GET i8 0"), ints(&[101]));
    assert_eq!(node.s("DEL bits"), int(1));
    assert_eq!(
        node.s("BITFIELD bits set i8 0 255 set i8 0 100 get i8 0"),
        ints(&[0, -1, 100])
    );
    assert_eq!(node.s("DEL bits"), int(1));
    assert_eq!(
        node.s("BITFIELD bits set u8 0 255 incrby u8 0 100 get u8 0"),
        ints(&[0, 99, 99])
    );
    assert_eq!(node.s("BITFIELD bits"), Value::Array(vec![]));
    assert_eq!(node.s("DEL bits"), int(1));
    node.s("BITFIELD bits set u8 #0 65 set u8 #1 66 set u8 #2 67");
    assert_eq!(node.s("GET bits"), bulk("ABC"));
    node.s("BITFIELD bits set u8 #0 100");
    assert_eq!(
        node.s("BITFIELD bits overflow wrap incrby u8 #0 257 get u8 #0"),
        ints(&[101, 101])
    );
    assert_eq!(
        node.s("BITFIELD bits overflow sat incrby u8 #0 257 incrby u8 #0 -300"),
        ints(&[255, 0])
    );
    node.s("BITFIELD bits set u8 #0 100");
    assert_eq!(
        node.s("BITFIELD bits overflow sat incrby i8 #0 257 incrby i8 #0 -255"),
        ints(&[127, -128])
    );
    assert_eq!(
        node.s("BITFIELD bits overflow fail incrby u2 102 7 incrby u2 102 2"),
        Value::Array(vec![Value::Null, int(2)])
    );
}

#[test]
fn bitfield_handles_the_widest_fields_and_their_overflow() {
    let mut node = Node::new(DB);
    let max = i64::MAX.to_string();
    let min = i64::MIN.to_string();
    let run = |node: &mut Node, line: &str| node.s(line);
    assert_eq!(
        run(&mut node, &format!("BITFIELD w SET i64 3 {max}")),
        ints(&[0])
    );
    assert_eq!(
        run(&mut node, "BITFIELD w INCRBY i64 3 1"),
        ints(&[i64::MIN])
    );
    assert_eq!(
        run(&mut node, "BITFIELD w OVERFLOW SAT INCRBY i64 3 -1"),
        ints(&[i64::MIN])
    );
    assert_eq!(
        run(
            &mut node,
            &format!("BITFIELD w OVERFLOW FAIL INCRBY i64 3 {min}")
        ),
        Value::Array(vec![Value::Null])
    );
    assert_eq!(
        run(&mut node, &format!("BITFIELD w SET u63 0 {max} GET u63 0")),
        // The i64 at bit 3 holds its minimum, whose sign bit is bit 3 of the u63.
        ints(&[1 << 59, i64::MAX])
    );
    assert_eq!(run(&mut node, "BITFIELD w INCRBY u63 0 1"), ints(&[0]));
    assert_eq!(
        run(&mut node, "BITFIELD w OVERFLOW SAT SET u63 0 -1 GET i64 0"),
        ints(&[0, -2])
    );
    assert_eq!(
        run(&mut node, "BITFIELD w OVERFLOW WRAP SET u8 0 -1 GET u8 0"),
        ints(&[255, 255])
    );
    assert_eq!(
        run(&mut node, "BITFIELD w SET i1 0 1 GET i1 0"),
        ints(&[-1, -1])
    );
}

#[test]
fn bitfield_refuses_bad_subcommands_before_it_writes() {
    let mut node = Node::new(DB);
    let bad_type = "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not \
                    supported but i64 is.";
    for line in [
        "BITFIELD k SET u64 0 1",
        "BITFIELD k SET i65 0 1",
        "BITFIELD k SET i0 0 1",
        "BITFIELD k SET I8 0 1",
        "BITFIELD k GET x8 0",
    ] {
        assert_eq!(node.s(line), err(bad_type), "{line}");
    }
    assert_eq!(node.s("BITFIELD k GET i8 4294967296"), err(OFFSET_INVALID));
    assert_eq!(node.s("BITFIELD k GET i8 #-1"), err(OFFSET_INVALID));
    assert_eq!(node.s("BITFIELD k GET i8 #x"), err(OFFSET_INVALID));
    // `#n` is multiplied as Redis's C does: 2^61 + 1 fields of 8 bits wrap to bit 8.
    assert_eq!(node.s("BITFIELD k GET u8 #2305843009213693953"), ints(&[0]));
    assert_eq!(
        node.s("BITFIELD k SET i8 0 1 OVERFLOW BOGUS"),
        err("ERR Invalid OVERFLOW type specified")
    );
    assert_eq!(
        node.s("BITFIELD k SET i8 0 1 OVERFLOW"),
        err("ERR syntax error")
    );
    assert_eq!(node.s("BITFIELD k SET i8 0"), err("ERR syntax error"));
    assert_eq!(
        node.s("BITFIELD k SET i8 0 1 INCRBY i8 0 x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("EXISTS k"), int(0));
    assert_eq!(node.s("RPUSH list a"), int(1));
    assert_eq!(node.s("BITFIELD list GET i8 0"), err(WRONGTYPE));
    assert_eq!(
        node.s("BITFIELD_RO list SET i8 0 1"),
        err("ERR BITFIELD_RO only supports the GET subcommand")
    );
    assert_eq!(node.s("BITFIELD_RO list GET i8 0"), err(WRONGTYPE));
    assert_eq!(node.s("SET k A"), ok());
    assert_eq!(node.s("BITFIELD_RO k GET u8 0 GET u4 4"), ints(&[65, 1]));
    // A write that fails under FAIL still makes the key, as Redis's lookup does.
    assert_eq!(
        node.s("BITFIELD made OVERFLOW FAIL SET u8 0 300"),
        Value::Array(vec![Value::Null])
    );
    assert_eq!(node.s("STRLEN made"), int(1));
}

/// `BITFIELD` with only `GET` is a write command in Redis's table, so a read-only script may
/// not call it; `BITFIELD_RO` and the other bit reads it may.
#[test]
fn read_only_scripts_call_the_bit_reads_only() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET k foobar"), ok());
    let eval_ro = |node: &mut Node, call: &str| {
        let script = format!("return redis.call({call})");
        node.cmd(&[b"EVAL_RO", script.as_bytes(), b"0"])
    };
    assert_eq!(eval_ro(&mut node, "'BITCOUNT', 'k'"), int(26));
    assert_eq!(eval_ro(&mut node, "'GETBIT', 'k', 1"), int(1));
    assert_eq!(eval_ro(&mut node, "'BITPOS', 'k', 1"), int(1));
    assert_eq!(
        eval_ro(&mut node, "'BITFIELD_RO', 'k', 'GET', 'u8', 0"),
        ints(&[102])
    );
    assert_eq!(eval_ro(&mut node, "'LCS', 'k', 'k'"), bulk("foobar"));
    let Value::Error(text) = eval_ro(&mut node, "'BITFIELD', 'k', 'GET', 'u8', 0") else {
        panic!("a read-only script ran BITFIELD");
    };
    assert!(text.starts_with(b"ERR Write commands are not allowed from read-only scripts."));
}

#[test]
fn a_setbit_that_changes_nothing_leaves_a_watch_alone() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SETBIT k 3 1"), int(0));
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("SETBIT k 3 1"), int(1));
    assert_eq!(node.s("BITFIELD k SET u1 3 1 OVERFLOW FAIL SET u1 0 2"), {
        Value::Array(vec![int(1), Value::Null])
    });
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("GET k"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(node.s("EXEC"), Value::Array(vec![bulk("\x10")]));
    assert_eq!(node.s("WATCH k"), ok());
    assert_eq!(node.s("SETBIT k 3 0"), int(1));
    assert_eq!(node.s("MULTI"), ok());
    assert_eq!(node.s("GET k"), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(node.s("EXEC"), Value::NullArray);
}

#[test]
fn lcs_answers_the_string_its_length_and_its_matches() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("SET key1 ohmytext"), ok());
    assert_eq!(node.s("SET key2 mynewtext"), ok());
    assert_eq!(node.s("LCS key1 key2"), bulk("mytext"));
    assert_eq!(node.s("LCS key1 key2 LEN"), int(6));
    let range = |a: (i64, i64), b: (i64, i64), len: Option<i64>| {
        let mut items = vec![ints(&[a.0, a.1]), ints(&[b.0, b.1])];
        items.extend(len.map(int));
        Value::Array(items)
    };
    assert_eq!(
        node.s("LCS key1 key2 IDX"),
        Value::Array(vec![
            bulk("matches"),
            Value::Array(vec![
                range((4, 7), (5, 8), None),
                range((2, 3), (0, 1), None)
            ]),
            bulk("len"),
            int(6),
        ])
    );
    assert_eq!(
        node.s("LCS key1 key2 IDX MINMATCHLEN 4 WITHMATCHLEN"),
        Value::Array(vec![
            bulk("matches"),
            Value::Array(vec![range((4, 7), (5, 8), Some(4))]),
            bulk("len"),
            int(6),
        ])
    );
    assert_eq!(node.s("LCS missing key1"), bulk(""));
    assert_eq!(
        node.s("LCS missing other IDX"),
        Value::Array(vec![
            bulk("matches"),
            Value::Array(vec![]),
            bulk("len"),
            int(0)
        ])
    );
    assert_eq!(
        node.s("LCS key1 key2 IDX LEN"),
        err("ERR If you want both the length and indexes, please just use IDX.")
    );
    assert_eq!(node.s("LCS key1 key2 MINMATCHLEN"), err("ERR syntax error"));
    assert_eq!(
        node.s("LCS key1 key2 MINMATCHLEN x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(node.s("RPUSH list a"), int(1));
    assert_eq!(
        node.s("LCS key1 list BOGUS"),
        err("ERR The specified keys must contain string values")
    );
}

#[test]
fn lcs_of_strings_too_long_for_its_table_is_refused() {
    let mut node = Node::new(32 << 20);
    let long = vec![b'a'; 12_000];
    node.cmd(&[b"SET", b"a", &long]);
    node.cmd(&[b"SET", b"b", &long]);
    assert_eq!(
        node.s("LCS a b LEN"),
        err("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
    );
    node.cmd(&[b"SET", b"b", &long[..1000]]);
    assert_eq!(node.s("LCS a b LEN"), int(1000));
}

#[test]
fn copy_duplicates_every_type_with_its_expiry() {
    let mut node = Node::new(DB);
    node.s("SET s v EX 100");
    node.s("RPUSH l a b c");
    node.s("HSET h f1 v1 f2 v2");
    node.s("SADD set a b");
    node.s("ZADD z 1 a 2 b");
    for (from, to) in [
        ("s", "s2"),
        ("l", "l2"),
        ("h", "h2"),
        ("set", "set2"),
        ("z", "z2"),
    ] {
        assert_eq!(node.s(&format!("COPY {from} {to}")), int(1), "{from}");
        assert_eq!(
            node.s(&format!("TYPE {to}")),
            node.s(&format!("TYPE {from}"))
        );
    }
    assert_eq!(node.s("GET s2"), bulk("v"));
    assert_eq!(node.s("TTL s2"), int(100));
    assert_eq!(node.s("TTL l2"), int(-1));
    assert_eq!(node.s("LRANGE l2 0 -1"), node.s("LRANGE l 0 -1"));
    assert_eq!(node.s("HGET h2 f2"), bulk("v2"));
    assert_eq!(node.s("HLEN h2"), int(2));
    assert_eq!(node.s("SISMEMBER set2 b"), int(1));
    assert_eq!(node.s("SCARD set2"), int(2));
    assert_eq!(
        node.s("ZRANGE z2 0 -1 WITHSCORES"),
        node.s("ZRANGE z 0 -1 WITHSCORES")
    );
    // The copy is its own value.
    assert_eq!(node.s("RPUSH l2 d"), int(4));
    assert_eq!(node.s("LLEN l"), int(3));
    assert_eq!(node.s("DEL h"), int(1));
    assert_eq!(node.s("HLEN h2"), int(2));
}

#[test]
fn copy_replaces_only_when_asked_and_refuses_databases_out_of_range() {
    let mut node = Node::new(DB);
    node.s("SET a 1");
    node.s("RPUSH b x");
    node.s("EXPIRE b 100");
    assert_eq!(node.s("COPY a b"), int(0));
    assert_eq!(node.s("TYPE b"), Value::Simple(b"list".to_vec()));
    assert_eq!(node.s("COPY a b REPLACE"), int(1));
    assert_eq!(node.s("GET b"), bulk("1"));
    assert_eq!(node.s("TTL b"), int(-1));
    assert_eq!(node.s("COPY missing b REPLACE"), int(0));
    assert_eq!(node.s("COPY a b DB 0 replace"), int(1));
    assert_eq!(
        node.s("COPY a a"),
        err("ERR source and destination objects are the same")
    );
    assert_eq!(
        node.s("COPY a c DB 16"),
        err("ERR DB index is out of range")
    );
    assert_eq!(
        node.s("COPY a c DB -1"),
        err("ERR DB index is out of range")
    );
    assert_eq!(node.s("SELECT 16"), err("ERR DB index is out of range"));
    assert_eq!(
        node.s("COPY a c DB x"),
        err("ERR value is not an integer or out of range")
    );
    assert_eq!(
        node.s("COPY a c DB 2147483648"),
        err("ERR value is out of range, value must between -2147483648 and 2147483647")
    );
    assert_eq!(node.s("COPY a c DB"), err("ERR syntax error"));
    assert_eq!(node.s("COPY a c BOGUS"), err("ERR syntax error"));
    assert_eq!(node.s("EXISTS c"), int(0));
}
