//! HyperLogLog commands (`PFADD`, `PFCOUNT`, `PFMERGE`), run in process (see `common`). The
//! expected replies, and the SHA-1 of the values (which must be byte for byte Redis's, but for
//! the cached cardinality `PFCOUNT` writes in Redis and not here), are redis-server 7.0.15's
//! to the same commands, Redis's `tests/unit/hyperloglog.tcl` among them. Corrupt values are
//! fuzzed two ways: the same seeded edits Redis answered (recorded), and the fuzz targets
//! (arbitrary and damaged values, see docs/fuzzing.md), which must never panic.

use crate::common;

use common::{Node, err, ok};
use proptest::prelude::*;
use tandem_redis::resp::Value;

const DB: usize = 16 << 20;

const NOT_HLL: &str = "WRONGTYPE Key is not a valid HyperLogLog string value.";
const CORRUPT: &str = "INVALIDOBJ Corrupted HLL object detected";
const WRONGTYPE: &str = "WRONGTYPE Operation against a key holding the wrong kind of value";
const SHA: &str = "return redis.sha1hex(redis.call('GET',KEYS[1]))";
/// The SHA-1 of a value but its cached cardinality (bytes 8 to 15), which Redis's PFCOUNT
/// writes and tandem's does not.
const SHA_UNCACHED: &str = "local v = redis.call('GET',KEYS[1]) \
    return redis.sha1hex(string.sub(v,1,8) .. string.sub(v,17))";

fn int(n: i64) -> Value {
    Value::Integer(n)
}

/// The SHA-1 of string `key`'s value, in hex, by `script`.
fn digest(node: &mut Node, script: &str, key: &str) -> String {
    match node.cmd(&[b"EVAL", script.as_bytes(), b"1", key.as_bytes()]) {
        Value::Bulk(hex) => String::from_utf8(hex).expect("hex"),
        other => panic!("EVAL answered {other:?}"),
    }
}

fn sha(node: &mut Node, key: &str) -> String {
    digest(node, SHA, key)
}

/// `PFADD key` with the given elements.
fn pfadd(node: &mut Node, key: &str, elements: impl IntoIterator<Item = String>) -> Value {
    let elements: Vec<String> = elements.into_iter().collect();
    let mut args: Vec<&[u8]> = vec![b"PFADD", key.as_bytes()];
    args.extend(elements.iter().map(|element| element.as_bytes()));
    node.cmd(&args)
}

/// A reply as the recorded tables spell it.
fn spell(value: &Value) -> String {
    match value {
        Value::Integer(n) => n.to_string(),
        Value::Error(text) => format!("E:{}", String::from_utf8_lossy(text)),
        Value::Simple(text) => String::from_utf8_lossy(text).into_owned(),
        other => format!("{other:?}"),
    }
}

#[test]
fn the_cases_of_redis_hyperloglog_tcl() {
    let mut node = Node::new(DB);
    assert_eq!(node.s("PFADD hll"), int(1));
    assert_eq!(node.s("EXISTS hll"), int(1));
    assert_eq!(node.s("PFCOUNT hll"), int(0));
    assert_eq!(node.s("PFADD hll a b c"), int(1));
    assert_eq!(node.s("PFADD hll a b c"), int(0));
    assert_eq!(node.cmd(&[b"PFADD", b"hll", b""]), int(1));
    node.s("DEL hll");
    assert_eq!(node.s("PFADD hll 1 2 3 4 5"), int(1));
    assert_eq!(node.s("PFCOUNT hll"), int(5));
    assert_eq!(node.s("PFADD hll 6 7 8 8 9 10"), int(1));
    assert_eq!(node.s("PFCOUNT hll"), int(10));
    // Corrupted values.
    node.s("DEL hll");
    node.s("PFADD hll a b c");
    node.s("APPEND hll hello");
    assert_eq!(node.s("PFCOUNT hll"), err(CORRUPT));
    node.s("DEL hll");
    node.s("PFADD hll a b c");
    node.s("SETRANGE hll 0 0123");
    assert_eq!(node.s("PFCOUNT hll"), err(NOT_HLL));
    node.s("DEL hll");
    node.s("PFADD hll a b c");
    node.s("SETRANGE hll 4 x");
    assert_eq!(node.s("PFCOUNT hll"), err(NOT_HLL));
    node.s("DEL hll");
    node.s("PFADD hll a b c");
    node.cmd(&[b"SETRANGE", b"hll", b"4", b"\x00"]);
    assert_eq!(node.s("PFCOUNT hll"), err(NOT_HLL));
    // Type checks.
    node.s("SET foo bar");
    assert_eq!(node.s("PFADD foo 1"), err(NOT_HLL));
    assert_eq!(node.s("PFCOUNT foo"), err(NOT_HLL));
    assert_eq!(node.s("PFMERGE bar foo"), err(NOT_HLL));
    assert_eq!(node.s("PFMERGE foo bar"), err(NOT_HLL));
    assert_eq!(node.s("EXISTS bar"), int(0));
    node.s("RPUSH list a");
    assert_eq!(node.s("PFADD list 1"), err(WRONGTYPE));
    assert_eq!(node.s("PFCOUNT hll2 list"), err(WRONGTYPE));
    // The union.
    node.s("DEL hll");
    node.s("PFADD hll1 a b c");
    node.s("PFADD hll2 b c d");
    node.s("PFADD hll3 c d e");
    assert_eq!(node.s("PFMERGE hll hll1 hll2 hll3"), ok());
    assert_eq!(node.s("PFCOUNT hll"), int(5));
}

#[test]
fn the_cache_is_read_when_valid_and_marked_stale_by_writes() {
    let mut node = Node::new(DB);
    node.s("PFADD hll a b c");
    assert_eq!(node.s("GETRANGE hll 15 15"), Value::Bulk(vec![0x80]));
    // Redis writes 3 into the cache here; this PFCOUNT is a read and leaves it stale.
    assert_eq!(node.s("PFCOUNT hll"), int(3));
    assert_eq!(node.s("GETRANGE hll 15 15"), Value::Bulk(vec![0x80]));
    assert_eq!(node.s("PFADD hll a b c"), int(0));
    assert_eq!(node.s("GETRANGE hll 15 15"), Value::Bulk(vec![0x80]));
    // A valid cache (written by a client) is answered as it stands, as Redis does.
    node.cmd(&[
        b"SETRANGE",
        b"hll",
        b"8",
        b"\x2a\x00\x00\x00\x00\x00\x00\x00",
    ]);
    assert_eq!(node.s("PFCOUNT hll"), int(42));
    assert_eq!(node.s("PFCOUNT hll missing"), int(3));
    assert_eq!(node.s("PFADD hll 1 2 3"), int(1));
    assert_eq!(node.s("GETRANGE hll 15 15"), Value::Bulk(vec![0x80]));
    assert_eq!(node.s("PFCOUNT hll"), int(6));
    // A new HyperLogLog, as Redis's PFMERGE makes one, has its cache marked stale.
    assert_eq!(node.s("PFMERGE fresh"), ok());
    assert_eq!(
        node.s("GET fresh"),
        Value::Bulk(b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x7f\xff".to_vec())
    );
}

#[test]
fn a_refused_pfadd_changes_nothing_and_keeps_the_ttl() {
    let mut node = Node::new(DB);
    node.s("PFADD hll a");
    node.s("EXPIRE hll 1000");
    assert_eq!(node.s("PFADD hll b c d"), int(1));
    assert_eq!(node.s("TTL hll"), int(1000));
    // A sparse value that covers 13000 registers, fewer than all: an element whose register
    // lies past them is refused, and the elements before it go too (Redis keeps those: its
    // value then ends 71 a6 84 41 1f).
    node.cmd(&[
        b"SET",
        b"short",
        b"HYLL\x01\0\0\0\0\0\0\0\0\0\0\x80\x72\xc7",
    ]);
    let before = node.s("GET short");
    assert_eq!(node.s("PFADD short a b c d e f"), err(CORRUPT));
    assert_eq!(node.s("GET short"), before);
}

#[test]
fn pfdebug_answers_as_redis_does() {
    let mut node = Node::new(DB);
    assert_eq!(
        node.s("PFDEBUG encoding nokey"),
        err("ERR The specified key does not exist")
    );
    node.s("SET s abc");
    assert_eq!(node.s("PFDEBUG encoding s"), err(NOT_HLL));
    node.s("PFADD h a b c");
    assert_eq!(
        node.s("PFDEBUG decode h"),
        Value::Bulk(b"Z:8436 v:1,1 Z:4274 v:2,1 Z:3068 v:1,1 Z:603".to_vec())
    );
    assert_eq!(
        node.s("PFDEBUG encoding h"),
        Value::Simple(b"sparse".to_vec())
    );
    assert_eq!(
        node.s("PFDEBUG bogus h"),
        err("ERR Unknown PFDEBUG subcommand 'bogus'")
    );
    assert_eq!(
        node.cmd(&[b"PFDEBUG", b"bo\0gus", b"h"]),
        err("ERR Unknown PFDEBUG subcommand 'bo'")
    );
    assert_eq!(node.s("PFDEBUG todense h"), int(1));
    assert_eq!(node.s("PFDEBUG todense h"), int(0));
    assert_eq!(
        node.s("PFDEBUG decode h"),
        err("ERR HLL encoding is not sparse")
    );
    let Value::Array(registers) = node.s("PFDEBUG getreg h") else {
        panic!("GETREG answers an array");
    };
    assert_eq!(registers.len(), 16384);
    let set: Vec<usize> = (0..16384).filter(|&i| registers[i] != int(0)).collect();
    assert_eq!(set, [8436, 12711, 15780]);
    node.s("RPUSH l a");
    assert_eq!(node.s("PFDEBUG getreg l"), err(WRONGTYPE));
    assert_eq!(
        node.s("PFDEBUG getreg"),
        err("ERR wrong number of arguments for 'pfdebug' command")
    );
}

/// hyperloglog.tcl's sparse encoding stress test: a sparse and a dense value given the same
/// elements count the same.
#[test]
fn sparse_and_dense_values_of_the_same_elements_count_the_same() {
    let mut node = Node::new(DB);
    for round in 0..100 {
        node.s("DEL hll1 hll2");
        node.s("PFADD hll2");
        assert_eq!(node.s("PFDEBUG todense hll2"), int(1));
        let elements: Vec<String> = (0..round).map(|i| format!("{round}.{i}")).collect();
        pfadd(&mut node, "hll1", elements.clone());
        pfadd(&mut node, "hll2", elements);
        assert_eq!(
            node.s("PFDEBUG encoding hll1"),
            Value::Simple(b"sparse".to_vec())
        );
        assert_eq!(
            node.s("PFDEBUG encoding hll2"),
            Value::Simple(b"dense".to_vec())
        );
        assert_eq!(
            node.s("PFCOUNT hll1"),
            node.s("PFCOUNT hll2"),
            "round {round}"
        );
    }
}

/// Elements added 100 at a time until 20000, through sparse, the promotion and dense:
/// (elements so far, SHA-1 of the value but its cache, PFCOUNT).
const GROWTH: &[(usize, &str, i64)] = &[
    (100, "ce9540e8079eeedd39b2491a7e269d04b29a2b47", 100),
    (200, "8f56bf31a38872aa76aecfbef2d8bab76a211dbc", 200),
    (300, "417e532141527a0a03cf312f0d0f096a9c21e170", 302),
    (500, "05d3e7dce2b4bf67f5dd338402d203c8675860e6", 506),
    (1000, "f3ee858300d98882246470f931126e9ae7c73438", 1008),
    (1500, "f1d4a05d99a65c88bdc5ff4d58c1eb8e041a9ca5", 1509),
    (2000, "63f55a4e6f3722b8894f0e9ddacfc8b7e70abff0", 2000),
    (2500, "30a06162a087453f07d1431f5f6c3a65d1abf38b", 2482),
    (3000, "d458daea6bdf7152ed204a2a0b5871c2acd63231", 2979),
    (3500, "ddbbf23e821d18bf9d29ae5e1c180e59d71e4c27", 3486),
    (4000, "eac0ca2d62007e8a7cf6aa3acde274a7cbc25d8f", 3974),
    (4500, "faaf85c68d8142dbd0db9beb34d139792ca60cc7", 4463),
    (5000, "bc7cbefd688e3569e374d4827a45c05f27ac521d", 4968),
    (5500, "9eef8bf5319dce4a1fb8b9e252c1b5f1ae46bf5e", 5467),
    (6000, "27444eb3eb6308584a9c0e41b8a46213ddba017c", 5953),
    (6500, "e3b93a62d8a24345cd9650daa81d7f64753187c0", 6455),
    (7000, "7a0cd1530282d0a0ff54df9f831ca6c766facbf6", 6963),
    (7500, "2543eb1299844191dab645f6a5511cc9847c6ba7", 7449),
    (8000, "4ccbc15228590140432d2f749cafa215de5ade3b", 7966),
    (8500, "1bf1f7d037d722afe89ea0909c0376d6348d213e", 8455),
    (9000, "edd1382c9e1202082c51452ef7d5f0c7a0c858bd", 8958),
    (9500, "6e410b98352b35540c424129ad0bc06294e35154", 9451),
    (10000, "daf84f4d5151db2e3be0a4d4e181051d265976a2", 9973),
    (10500, "1082b7e0eecac11665410a082b0c689ae503ce49", 10463),
    (11000, "c52e7bba4fd4d44e16c267ef8230d3c7bd3e4c30", 10932),
    (11500, "52f935dac1ca0f7a1075a7ae9bcc42ba995c46f7", 11410),
    (12000, "94577dafd6884acf1ab8fd5b661753e38da9a7f2", 11932),
    (12500, "41172ce996c836f0e2eb4595a3dfaedb188faa70", 12454),
    (13000, "6aa8068e7bfd56669ea6c258bef5efdd054cd327", 12973),
    (13500, "e13c6eaed8c8574b9b8bbf09fd219779e311e2aa", 13447),
    (14000, "af662430e2f1e76ee4308504824eddd4034efe26", 13930),
    (14500, "8f9ce2ff3fe5df5baec0a360bacfaef88b63421d", 14444),
    (15000, "b00e21687cbb7c936428457e6a6187126b5f3832", 14942),
    (15500, "03e7c444dc17e64117122b9b8972e395da69a6e9", 15461),
    (16000, "7798bc066ef9bcc7160ce6ffd9d8aae3f1dea69c", 15967),
    (16500, "50dc99818fec267e06456e74cf6ba9cab19fabc6", 16459),
    (17000, "3a41778c3b662f5af1fb24e36a55e5d08f46ac94", 16960),
    (17500, "64ce291f21f6d9c5f76816b540e985db0a4e78a6", 17420),
    (18000, "f72a476e8a29218d6547c1fed48b7681242bec1c", 17928),
    (18500, "0eaba99e523493a0106657b34d019a5f45a91212", 18409),
    (19000, "aef3a2424afc59ee776036d8796ed0566dcdbc4a", 18933),
    (19500, "64fad1c727b9e659e148c3ca38fbb7b9668c0e33", 19393),
    (20000, "7f01ccf864c3de7346f57bcc2ff018c428070425", 19901),
];

#[test]
fn values_and_counts_match_redis_through_sparse_and_dense() {
    let mut node = Node::new(DB);
    let mut rows = GROWTH.iter();
    let mut next = rows.next();
    for batch in 0..200 {
        let from = batch * 100;
        pfadd(&mut node, "g", (from..from + 100).map(|j| format!("e{j}")));
        let Some(&(n, sha1, count)) = next else {
            break;
        };
        if n == from + 100 {
            assert_eq!(
                digest(&mut node, SHA_UNCACHED, "g"),
                sha1,
                "after {n} elements"
            );
            assert_eq!(
                node.s("PFCOUNT g nosuchkey"),
                int(count),
                "after {n} elements"
            );
            assert_eq!(node.s("PFCOUNT g"), int(count), "after {n} elements");
            next = rows.next();
        }
    }
    assert!(next.is_none());
}

/// Three HyperLogLogs of `foo-x`, `bar-x`, `zap-x`: (x, PFCOUNT of the three).
const UNION: &[(usize, i64)] = &[
    (250, 747),
    (500, 1490),
    (750, 2243),
    (1000, 2998),
    (1250, 3751),
    (1500, 4526),
    (1750, 5256),
    (2000, 6000),
    (2250, 6713),
    (2500, 7454),
    (2750, 8220),
    (3000, 8971),
];

#[test]
fn unions_and_merges_match_redis() {
    let mut node = Node::new(DB);
    let mut rows = UNION.iter().peekable();
    for x in 1..=3000 {
        for (key, prefix) in [("u1", "foo"), ("u2", "bar"), ("u3", "zap")] {
            pfadd(&mut node, key, [format!("{prefix}-{x}")]);
        }
        if let Some(&&(at, count)) = rows.peek()
            && at == x
        {
            assert_eq!(node.s("PFCOUNT u1 u2 u3"), int(count), "at {x}");
            rows.next();
        }
    }
    assert_eq!(node.s("PFMERGE m u1 u2 u3"), ok());
    assert_eq!(sha(&mut node, "m"), MERGE_DIGEST);
    assert_eq!(node.s("PFCOUNT m"), int(MERGE_COUNT));
    // A sparse destination merged with a dense source turns dense.
    node.s("PFADD small a b c");
    assert_eq!(node.s("PFMERGE small u1"), ok());
    assert_eq!(sha(&mut node, "small"), SMALL_DIGEST);
    assert_eq!(node.s("PFCOUNT small"), int(SMALL_COUNT));
    // Two sparse sources stay sparse.
    pfadd(&mut node, "sp1", (0..300).map(|j| format!("s{j}")));
    pfadd(&mut node, "sp2", (0..300).map(|j| format!("t{j}")));
    assert_eq!(node.s("PFMERGE sp3 sp1 sp2"), ok());
    assert_eq!(sha(&mut node, "sp3"), SPARSE_DIGEST);
    assert_eq!(node.s("STRLEN sp3"), int(SPARSE_LEN));
    assert_eq!(node.s("PFCOUNT sp3"), int(SPARSE_COUNT));
}

const MERGE_DIGEST: &str = "9a137235a4dade86b2e2dd7ff386a1a06c6be27d";
const MERGE_COUNT: i64 = 8971;
const SMALL_DIGEST: &str = "07b6e70903218697c69a566f329fc818b3e4e76d";
const SMALL_COUNT: i64 = 2998;
const SPARSE_DIGEST: &str = "65d454be0996c7176fa294ea7da51080d195bbde";
const SPARSE_LEN: i64 = 1236;
const SPARSE_COUNT: i64 = 606;

/// The test's generator (SplitMix64), the same as the script that asked Redis.
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) % n
    }
}

/// Seeded corruptions, as `hyperloglog.tcl`'s fuzzing: case `i` adds elements to a
/// HyperLogLog, overwrites 1 to 5 random bytes, then runs PFADD of one element, PFCOUNT of it
/// and another, PFMERGE of it into a third and PFCOUNT of it alone. Redis's answers: (elements,
/// edits, PFADD, SHA-1 prefix after it, PFCOUNT, PFCOUNT of two, PFMERGE, SHA-1 prefix of the
/// merge).
#[allow(clippy::type_complexity)]
const FUZZ: &[(u64, u64, &str, &str, &str, &str, &str, &str)] = &[
    (
        535,
        1,
        "1",
        "7d4dba5d0a23",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2465,
        5,
        "1",
        "7c672c8d87d1",
        "2456",
        "2457",
        "OK",
        "fef3d1d123a9",
    ),
    (
        2110,
        2,
        "1",
        "e3eee2701a4f",
        "2098",
        "2099",
        "OK",
        "c0616cbdc982",
    ),
    (
        1053,
        2,
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "7e6f92d52e2e",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "da39a3ee5e6b",
    ),
    (
        1978,
        5,
        "1",
        "d63ee4770451",
        "1980",
        "1980",
        "OK",
        "d63ee4770451",
    ),
    (
        2618,
        5,
        "1",
        "fc205a6bf8d7",
        "2628",
        "2629",
        "OK",
        "f917b72bc495",
    ),
    (
        1592,
        4,
        "1",
        "dd9a750d2374",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2487,
        5,
        "1",
        "b5f2b44d724c",
        "2482",
        "2483",
        "OK",
        "b13d2ecafc81",
    ),
    (
        622,
        3,
        "1",
        "6851b9c14435",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1228,
        2,
        "1",
        "a46fd29c4dac",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        466,
        5,
        "1",
        "dd77fa90fece",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        813,
        1,
        "1",
        "3291514648b1",
        "821",
        "822",
        "OK",
        "e8777f2fe254",
    ),
    (
        1323,
        3,
        "1",
        "e958b7e03ef7",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2695,
        2,
        "0",
        "91ab163c6928",
        "2706",
        "2708",
        "OK",
        "38a42c23eba5",
    ),
    (
        1838,
        5,
        "1",
        "2d66139caec6",
        "1845",
        "1846",
        "OK",
        "75396576e909",
    ),
    (
        941,
        2,
        "1",
        "b009e8aaa395",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        95,
        4,
        "1",
        "1e533877ec75",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2379,
        4,
        "1",
        "d5b30dd13622",
        "2386",
        "2387",
        "OK",
        "0570d7988375",
    ),
    (
        370,
        4,
        "1",
        "b9c2eb4e1b53",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        636,
        1,
        "1",
        "aaca5d0803c6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1044,
        3,
        "1",
        "d4be12d5d61f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1543,
        5,
        "1",
        "25a9d2ea718f",
        "1551",
        "1552",
        "OK",
        "f7c26b2907f6",
    ),
    (
        1346,
        2,
        "1",
        "a967eb0b3da2",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1966,
        5,
        "1",
        "38330e8bbd9e",
        "1945",
        "1946",
        "OK",
        "3b1c505d8bfb",
    ),
    (
        108,
        1,
        "1",
        "52c92115bba7",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        33,
        1,
        "1",
        "3a616a4aa379",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2314,
        3,
        "1",
        "2a20accbc5ee",
        "2331",
        "2333",
        "OK",
        "e32d485b1df7",
    ),
    (
        1474,
        5,
        "1",
        "b580640cadc4",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        796,
        2,
        "1",
        "6eee2e3712b0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2000,
        2,
        "1",
        "6c6babdfbc2a",
        "2004",
        "2004",
        "OK",
        "d6c7b09cbed9",
    ),
    (
        1910,
        4,
        "1",
        "d18dcbe5ba35",
        "1926",
        "1926",
        "OK",
        "d18dcbe5ba35",
    ),
    (
        1770,
        1,
        "1",
        "4051e7721af7",
        "1780",
        "1782",
        "OK",
        "1828a43ba435",
    ),
    (
        2401,
        3,
        "1",
        "37af82965df2",
        "2401",
        "2402",
        "OK",
        "7e03277f44ba",
    ),
    (
        2736,
        4,
        "1",
        "22df68d65462",
        "2743",
        "2744",
        "OK",
        "955c86b1a82b",
    ),
    (
        1589,
        4,
        "1",
        "dd6031729227",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2595,
        5,
        "0",
        "ba78ba50a94b",
        "2627",
        "2627",
        "OK",
        "ba78ba50a94b",
    ),
    (
        2171,
        4,
        "1",
        "9d3de15b57ea",
        "2196",
        "2197",
        "OK",
        "5bac2b9fc57f",
    ),
    (
        287,
        3,
        "1",
        "39bbd690e953",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2712,
        2,
        "1",
        "e4ccedb71cb9",
        "2691",
        "2692",
        "OK",
        "41ff1ce5fd6c",
    ),
    (
        2444,
        1,
        "1",
        "7b96fdfcc381",
        "2440",
        "2441",
        "OK",
        "3df07b31b765",
    ),
    (
        1498,
        2,
        "1",
        "d830c56c7a96",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1713,
        1,
        "1",
        "43dcc5b925d1",
        "1708",
        "1709",
        "OK",
        "ff86c7f954ca",
    ),
    (
        2413,
        2,
        "1",
        "be26cc65d1b6",
        "2419",
        "2421",
        "OK",
        "3bc7b8ce4dbd",
    ),
    (
        160,
        4,
        "1",
        "b0f16c3cc7f3",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2331,
        1,
        "1",
        "7287c1126987",
        "2348",
        "2350",
        "OK",
        "47c21001672c",
    ),
    (
        2326,
        4,
        "1",
        "552417223e77",
        "2330",
        "2331",
        "OK",
        "57bfdd42ae62",
    ),
    (
        2343,
        4,
        "1",
        "c3f546a20b2f",
        "2334",
        "2335",
        "OK",
        "b6a11cd31395",
    ),
    (
        765,
        2,
        "1",
        "1f429b77bacb",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2267,
        5,
        "1",
        "870fedaf1382",
        "2261",
        "2262",
        "OK",
        "18bf5005c027",
    ),
    (
        2592,
        2,
        "1",
        "a76b0a847f95",
        "2599",
        "2601",
        "OK",
        "5b606edb8571",
    ),
    (
        1539,
        3,
        "1",
        "9aee7ff2ccec",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        832,
        2,
        "1",
        "dcb3cdfb4fe9",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1802,
        4,
        "0",
        "ad46dddc097d",
        "1797",
        "1798",
        "OK",
        "0a64750db815",
    ),
    (
        1942,
        3,
        "1",
        "59a4bd0cead6",
        "1972",
        "1973",
        "OK",
        "d6f1fb42cda1",
    ),
    (
        1605,
        2,
        "1",
        "de4cc011d559",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2508,
        2,
        "1",
        "bfe3f93136fa",
        "2523",
        "2524",
        "OK",
        "783315399b8b",
    ),
    (
        1103,
        3,
        "1",
        "9ecca7fe2078",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1033,
        5,
        "1",
        "6e07a889b7df",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        722,
        1,
        "1",
        "17527cde4da3",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2076,
        4,
        "1",
        "cdf8e8ea0e4d",
        "2085",
        "2086",
        "OK",
        "ecccac3c9447",
    ),
    (
        2655,
        1,
        "1",
        "b6edd9e6e105",
        "2646",
        "2647",
        "OK",
        "bbeddf865ecd",
    ),
    (
        1289,
        2,
        "1",
        "9030d8842205",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        762,
        5,
        "1",
        "153c2ca5151a",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2245,
        5,
        "1",
        "60025d8a28ef",
        "2235",
        "2236",
        "OK",
        "6c9216078cf3",
    ),
    (
        2011,
        5,
        "1",
        "44c440f93dcc",
        "1995",
        "1996",
        "OK",
        "bb39f79a13d7",
    ),
    (
        1929,
        3,
        "1",
        "00906f7b6209",
        "1941",
        "1942",
        "OK",
        "e9cd3c08e735",
    ),
    (
        2481,
        5,
        "1",
        "8ff1aeb830cd",
        "2512",
        "2514",
        "OK",
        "cf06ebbe3152",
    ),
    (
        2028,
        2,
        "1",
        "b0807a79cb21",
        "2034",
        "2035",
        "OK",
        "f0c8ea9ca070",
    ),
    (
        2290,
        5,
        "1",
        "44011a199481",
        "2297",
        "2298",
        "OK",
        "84bab546b1bf",
    ),
    (
        2871,
        3,
        "0",
        "849f22e83566",
        "2883",
        "2884",
        "OK",
        "ba4537a8adbf",
    ),
    (
        39,
        2,
        "1",
        "4ea72fade8ff",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        543,
        4,
        "1",
        "7ece262667d8",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1050,
        3,
        "1",
        "27ce01417e77",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2763,
        1,
        "0",
        "0fa3ac9394d0",
        "2756",
        "2758",
        "OK",
        "f2128ec1fb33",
    ),
    (
        1603,
        1,
        "1",
        "d440cada364e",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        300,
        1,
        "1",
        "19bf147a83ec",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1474,
        5,
        "1",
        "b0c080e9fad6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1257,
        1,
        "1",
        "b6469f26b980",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2236,
        4,
        "1",
        "3aa40fdc296a",
        "2226",
        "2227",
        "OK",
        "850d5f994ec8",
    ),
    (
        587,
        1,
        "1",
        "982ac44979a4",
        "584",
        "585",
        "OK",
        "795aa1311fb6",
    ),
    (
        2595,
        4,
        "1",
        "5de56c0d04d6",
        "2637",
        "2637",
        "OK",
        "5de56c0d04d6",
    ),
    (
        2117,
        5,
        "1",
        "91be459b9275",
        "2139",
        "2140",
        "OK",
        "1f7d61e5109c",
    ),
    (
        980,
        2,
        "1",
        "611601844df5",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2893,
        1,
        "1",
        "339d823a4a40",
        "2894",
        "2895",
        "OK",
        "81cb70cb1bf7",
    ),
    (
        2418,
        5,
        "1",
        "a0e4453c53ff",
        "2427",
        "2428",
        "OK",
        "e4c285927a90",
    ),
    (
        1352,
        2,
        "1",
        "629586ef0531",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2901,
        2,
        "1",
        "4014866508cd",
        "2905",
        "2906",
        "OK",
        "8e3f30ec6557",
    ),
    (
        2346,
        3,
        "0",
        "c52714d2f1db",
        "2330",
        "2332",
        "OK",
        "33388b4fe1db",
    ),
    (
        2795,
        5,
        "0",
        "ac51f936c34b",
        "2823",
        "2824",
        "OK",
        "3032ab788f7a",
    ),
    (
        1502,
        3,
        "1",
        "5a76dbb3419f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2734,
        3,
        "0",
        "8154459c4836",
        "2740",
        "2740",
        "OK",
        "8154459c4836",
    ),
    (
        1498,
        4,
        "1",
        "9a01af251309",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1807,
        4,
        "1",
        "0d6022eac3e6",
        "1816",
        "1817",
        "OK",
        "3f0db83c11ac",
    ),
    (
        2511,
        2,
        "1",
        "b111125f580f",
        "2509",
        "2511",
        "OK",
        "9c0b806bea6f",
    ),
    (
        143,
        3,
        "1",
        "9e09dc4adcc6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2668,
        3,
        "1",
        "27b2dde41c57",
        "2712",
        "2714",
        "OK",
        "e3af17733041",
    ),
    (
        1401,
        4,
        "1",
        "a87f75054a41",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2505,
        3,
        "1",
        "f73909c0628b",
        "2516",
        "2516",
        "OK",
        "f73909c0628b",
    ),
    (
        2373,
        2,
        "0",
        "5a09005b3dbe",
        "2388",
        "2389",
        "OK",
        "e7baeeb3e5b1",
    ),
    (
        1403,
        5,
        "1",
        "170f2740287b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1124,
        1,
        "1",
        "37a1ab376593",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2511,
        2,
        "1",
        "08421b92216c",
        "2505",
        "2506",
        "OK",
        "896f51bb4f61",
    ),
    (
        2100,
        5,
        "1",
        "ed21fb34f974",
        "2097",
        "2098",
        "OK",
        "feb0a84e783d",
    ),
    (
        528,
        5,
        "1",
        "8cf4adc27b6d",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1246,
        5,
        "1",
        "e46db5192649",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        131,
        3,
        "1",
        "688f9548ab5a",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1522,
        2,
        "1",
        "6072e7b5ab0b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1940,
        2,
        "1",
        "3595d6899b8a",
        "1933",
        "1934",
        "OK",
        "7cbd53705e02",
    ),
    (
        188,
        1,
        "1",
        "6cf89be80d5f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2934,
        1,
        "1",
        "6d923353c15e",
        "2922",
        "2924",
        "OK",
        "1bceb3729cec",
    ),
    (
        1887,
        2,
        "1",
        "1ba69418b007",
        "1905",
        "1906",
        "OK",
        "944c459ed2bf",
    ),
    (
        977,
        5,
        "1",
        "f4ca3b75f148",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2738,
        5,
        "1",
        "2a6cd7defaaf",
        "2746",
        "2746",
        "OK",
        "2a6cd7defaaf",
    ),
    (
        1876,
        4,
        "1",
        "75a3c931dd75",
        "1879",
        "1879",
        "OK",
        "75a3c931dd75",
    ),
    (
        633,
        4,
        "1",
        "1eefc07559be",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1116,
        1,
        "1",
        "eb844e6ef35e",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1609,
        2,
        "1",
        "a2230520015e",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        750,
        5,
        "1",
        "a26d8154eef2",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        793,
        5,
        "1",
        "fcf107a722bf",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        719,
        4,
        "1",
        "0b8e9c0b14a0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1750,
        2,
        "0",
        "9f82f0570196",
        "1736",
        "1737",
        "OK",
        "63107e14b884",
    ),
    (
        2410,
        1,
        "1",
        "72ca40099d21",
        "2414",
        "2414",
        "OK",
        "b0992053f210",
    ),
    (
        596,
        5,
        "1",
        "945b535155f9",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1675,
        4,
        "1",
        "c76ca6e9d71f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2833,
        3,
        "1",
        "5c73bf35449f",
        "2803",
        "2804",
        "OK",
        "f64c86b0dbf6",
    ),
    (
        2738,
        2,
        "0",
        "0691705d250c",
        "2758",
        "2760",
        "OK",
        "b972f99a211f",
    ),
    (
        355,
        5,
        "1",
        "e3da01cdf3a5",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        616,
        2,
        "1",
        "86908130c8b1",
        "620",
        "621",
        "OK",
        "d508bfde2b01",
    ),
    (
        710,
        4,
        "1",
        "eacd28df8b24",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        93,
        4,
        "1",
        "6d20870c57fe",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        331,
        1,
        "1",
        "3c09e2af9062",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        760,
        2,
        "1",
        "69a6c1a8e09b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2659,
        1,
        "1",
        "2f2a66be5ab0",
        "2667",
        "2668",
        "OK",
        "7d94b3a42a0d",
    ),
    (
        2360,
        5,
        "1",
        "e50ea3d173fd",
        "2390",
        "2391",
        "OK",
        "3b0aadaf5109",
    ),
    (
        2446,
        4,
        "1",
        "8fd6ddb11fb6",
        "2438",
        "2439",
        "OK",
        "d4270fb531aa",
    ),
    (
        1410,
        1,
        "1",
        "4050a116f234",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        825,
        2,
        "1",
        "da9da271309c",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1627,
        1,
        "1",
        "4d212470e741",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1774,
        5,
        "1",
        "bfb7b9fda632",
        "1783",
        "1784",
        "OK",
        "cfc1a1aa97bc",
    ),
    (
        483,
        1,
        "1",
        "a42ed8b8b314",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1033,
        5,
        "1",
        "fc0bc5b1c6ce",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1196,
        3,
        "1",
        "d8dde5b4d8d0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2441,
        2,
        "1",
        "9f67eb528412",
        "2433",
        "2434",
        "OK",
        "e955451c6b74",
    ),
    (
        47,
        3,
        "1",
        "be93ce4669f0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1872,
        2,
        "1",
        "e7b00df0ea73",
        "1890",
        "1891",
        "OK",
        "33c82586b486",
    ),
    (
        847,
        3,
        "1",
        "7e1af9a41ee1",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1857,
        4,
        "1",
        "04ad34b49420",
        "1863",
        "1864",
        "OK",
        "3c4894e8107b",
    ),
    (
        1796,
        1,
        "1",
        "3d2143f51d7c",
        "1784",
        "1785",
        "OK",
        "f778519ed9a4",
    ),
    (
        2159,
        5,
        "1",
        "b2740531eb90",
        "2184",
        "2186",
        "OK",
        "3385c5bdb25c",
    ),
    (
        1696,
        4,
        "1",
        "35a4cde1adfd",
        "1689",
        "1690",
        "OK",
        "c4921f69b370",
    ),
    (
        2312,
        2,
        "1",
        "0ea813825e07",
        "2330",
        "2331",
        "OK",
        "b68da44cbe98",
    ),
    (
        1089,
        4,
        "1",
        "dbe818d8fd05",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2386,
        1,
        "0",
        "c7de2d8433fd",
        "2357",
        "2358",
        "OK",
        "9c2333a0a1d1",
    ),
    (
        1180,
        3,
        "1",
        "eebd1a883b0b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2423,
        5,
        "0",
        "1fbdead4d212",
        "2436",
        "2436",
        "OK",
        "0cf9877465e7",
    ),
    (
        2936,
        1,
        "1",
        "d743ad690c53",
        "2946",
        "2947",
        "OK",
        "ae265f3a7e1a",
    ),
    (
        1049,
        4,
        "1",
        "2d370bb92dc6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1366,
        5,
        "1",
        "3d55b4bce6e7",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        896,
        3,
        "1",
        "9fd4961e9865",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        387,
        3,
        "1",
        "5b957fb7238e",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        672,
        3,
        "1",
        "e9201893290d",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        870,
        1,
        "1",
        "2edad75599de",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1465,
        2,
        "1",
        "bb02e75f1bca",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2396,
        1,
        "1",
        "beaf9f1c47af",
        "2368",
        "2369",
        "OK",
        "4590234fd80b",
    ),
    (
        992,
        4,
        "0",
        "f29a57f36efb",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        535,
        5,
        "1",
        "1b1f688b2bef",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1271,
        2,
        "1",
        "ac8d1a5ff42a",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1921,
        5,
        "1",
        "2ae01e595d6b",
        "1923",
        "1925",
        "OK",
        "02ce2190c5f8",
    ),
    (
        1813,
        4,
        "1",
        "6704cc674133",
        "1821",
        "1822",
        "OK",
        "df66c80656a2",
    ),
    (
        1293,
        3,
        "1",
        "b8f394bc0302",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        114,
        1,
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "504d934839ee",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "da39a3ee5e6b",
    ),
    (
        850,
        2,
        "1",
        "da0c018c1361",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1236,
        2,
        "1",
        "dd19c2d21cf6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1610,
        5,
        "1",
        "6c0f064b0f0c",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2153,
        1,
        "1",
        "477489c4a11c",
        "2153",
        "2155",
        "OK",
        "0b5f5267172c",
    ),
    (
        336,
        1,
        "1",
        "1c0c55a8fd09",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        7,
        1,
        "1",
        "71ea2648f642",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2029,
        5,
        "1",
        "aa5a5d6740d9",
        "2049",
        "2050",
        "OK",
        "37c4086d4db2",
    ),
    (
        1220,
        4,
        "1",
        "ea5c4064f479",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1415,
        4,
        "1",
        "14b952ab8f85",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2052,
        5,
        "1",
        "161977a34e41",
        "2060",
        "2061",
        "OK",
        "ecc0e6d90130",
    ),
    (
        1965,
        2,
        "1",
        "ed7408dddcdc",
        "1954",
        "1955",
        "OK",
        "5a2ef90b5388",
    ),
    (
        469,
        2,
        "1",
        "ab5aa56a5bea",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2431,
        5,
        "1",
        "d9bd7fe28315",
        "2443",
        "2444",
        "OK",
        "85d834504c0a",
    ),
    (
        638,
        2,
        "1",
        "30a44cf6ee39",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1414,
        3,
        "1",
        "946ad5fa748a",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2600,
        1,
        "1",
        "ecffe8f01b63",
        "2582",
        "2583",
        "OK",
        "bac5313c6922",
    ),
    (
        307,
        1,
        "1",
        "70cda8c37f7c",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        262,
        5,
        "1",
        "4174045c6b62",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2745,
        2,
        "1",
        "3f4fd835a3cb",
        "2717",
        "2718",
        "OK",
        "b35542dcede5",
    ),
    (
        1485,
        3,
        "0",
        "9de68dbf4e40",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        21,
        1,
        "1",
        "0da3826d754b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        408,
        2,
        "1",
        "b96460bdf2aa",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        269,
        4,
        "0",
        "4c99f37eeec6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1628,
        2,
        "1",
        "f139208d4eb4",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        417,
        3,
        "1",
        "97d531dbc0e9",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1143,
        5,
        "1",
        "91e76183d735",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1977,
        5,
        "1",
        "831d71492afb",
        "1983",
        "1984",
        "OK",
        "22515d23c6bc",
    ),
    (
        1238,
        5,
        "1",
        "8ee35fb184f1",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2717,
        3,
        "1",
        "5b98f9d4e7b6",
        "2747",
        "2749",
        "OK",
        "2c62e1182338",
    ),
    (
        337,
        2,
        "1",
        "918a3ed9b774",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2812,
        5,
        "1",
        "a1c5d3c53341",
        "2803",
        "2804",
        "OK",
        "4939f4c02ee9",
    ),
    (
        1768,
        2,
        "1",
        "bcdcebfddf85",
        "1770",
        "1771",
        "OK",
        "d040c96b5f85",
    ),
    (
        1526,
        5,
        "1",
        "6b7eceb2aa11",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1413,
        3,
        "1",
        "07c24243133e",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2068,
        4,
        "0",
        "75afbd994a7c",
        "2059",
        "2061",
        "OK",
        "a3c13c788084",
    ),
    (
        2124,
        2,
        "0",
        "60c1023951b7",
        "2149",
        "2150",
        "OK",
        "07108393376b",
    ),
    (
        755,
        2,
        "1",
        "f6e88f572ea5",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2368,
        2,
        "1",
        "9535c511c94a",
        "2376",
        "2378",
        "OK",
        "d498111c913d",
    ),
    (
        432,
        2,
        "0",
        "e2f8405cf277",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        337,
        2,
        "1",
        "4ab39433e922",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2043,
        3,
        "0",
        "be373011d5e1",
        "2013",
        "2014",
        "OK",
        "7f8d006fa7ec",
    ),
    (
        2421,
        2,
        "1",
        "7e1f8eb3b286",
        "2419",
        "2420",
        "OK",
        "8935600533f0",
    ),
    (
        2590,
        1,
        "1",
        "9af739482fbf",
        "2564",
        "2565",
        "OK",
        "be9ae9a3cef0",
    ),
    (
        2073,
        1,
        "0",
        "3e9644a23ce8",
        "2092",
        "2093",
        "OK",
        "4dd48a7ce5d1",
    ),
    (
        193,
        1,
        "1",
        "7461e6f6587f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1528,
        1,
        "1",
        "6a766c68b2e5",
        "1544",
        "1545",
        "OK",
        "8c776bbe07fd",
    ),
    (
        1999,
        4,
        "1",
        "a53684a2a455",
        "2003",
        "2004",
        "OK",
        "8e50f55ad7dc",
    ),
    (
        1815,
        5,
        "1",
        "cd4d9e74086d",
        "1828",
        "1829",
        "OK",
        "7462bf1a225d",
    ),
    (
        1609,
        3,
        "1",
        "b0abd7990800",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2300,
        2,
        "1",
        "ec06af461cb9",
        "2328",
        "2329",
        "OK",
        "37ddf3e7b727",
    ),
    (
        15,
        3,
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "1edd545071c1",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "da39a3ee5e6b",
    ),
    (
        1243,
        3,
        "1",
        "cc12b005440b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        666,
        1,
        "1",
        "7362f6e80a07",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2745,
        2,
        "1",
        "4801a36f18b9",
        "2756",
        "2757",
        "OK",
        "51b0ff2fce93",
    ),
    (
        1535,
        2,
        "1",
        "6730e19657d5",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2797,
        5,
        "1",
        "2a3afbcdbca5",
        "2826",
        "2827",
        "OK",
        "33408c317c12",
    ),
    (
        2180,
        2,
        "1",
        "aa6ceea8cd54",
        "2179",
        "2180",
        "OK",
        "44829d26e046",
    ),
    (
        1086,
        4,
        "1",
        "f53d90f20e5c",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        815,
        1,
        "1",
        "3cb72814d865",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1039,
        3,
        "1",
        "fdbb07677c3f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1114,
        2,
        "1",
        "be9f6a6b24a6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1095,
        2,
        "1",
        "6ba816a65fbf",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2767,
        4,
        "1",
        "8e49d9745a2f",
        "2780",
        "2781",
        "OK",
        "5491a08ddf9f",
    ),
    (
        2921,
        4,
        "1",
        "88420f92b20f",
        "2903",
        "2904",
        "OK",
        "4ea48a142125",
    ),
    (
        2906,
        5,
        "1",
        "0f75ccd97ecf",
        "2912",
        "2913",
        "OK",
        "d537d6336e6d",
    ),
    (
        883,
        4,
        "1",
        "6f345e1ac9e3",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1448,
        3,
        "1",
        "ad2f2e2be1c9",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1639,
        3,
        "1",
        "6b6519bdd538",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1629,
        1,
        "1",
        "932818022040",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        462,
        5,
        "1",
        "16871afb27bc",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2500,
        4,
        "1",
        "b6b9d9fa367c",
        "2523",
        "2524",
        "OK",
        "472c20662778",
    ),
    (
        2501,
        3,
        "1",
        "de654216c440",
        "2536",
        "2537",
        "OK",
        "89f2a33e4667",
    ),
    (
        2798,
        4,
        "1",
        "401526f28161",
        "2819",
        "2820",
        "OK",
        "0bc359b6a661",
    ),
    (
        2505,
        5,
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "fca91b420687",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "E:WRONGTYPE Key is not a valid HyperLogLog string value.",
        "da39a3ee5e6b",
    ),
    (
        1669,
        3,
        "1",
        "9859b1bdd7c8",
        "1686",
        "1687",
        "OK",
        "be841aaca59c",
    ),
    (
        2684,
        1,
        "1",
        "36486342e4f3",
        "2696",
        "2697",
        "OK",
        "1c8f4bf733c1",
    ),
    (
        1299,
        1,
        "1",
        "bf91cd2b2f8c",
        "1297",
        "1298",
        "OK",
        "b2c564590185",
    ),
    (
        412,
        5,
        "1",
        "4685bba2b603",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        26,
        3,
        "1",
        "6c7e3f3318b8",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2036,
        1,
        "1",
        "06fa3625ea0b",
        "2039",
        "2040",
        "OK",
        "f9742fab760d",
    ),
    (
        2829,
        3,
        "1",
        "b68370d97ffe",
        "2824",
        "2826",
        "OK",
        "82d0e0b07a3c",
    ),
    (
        2550,
        3,
        "1",
        "29e647f38df2",
        "2543",
        "2544",
        "OK",
        "a645bd93de3a",
    ),
    (
        1461,
        2,
        "1",
        "22a30fdb3c1b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        745,
        5,
        "1",
        "c010affeb403",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2972,
        5,
        "1",
        "b891c91f28e4",
        "3000",
        "3001",
        "OK",
        "c448007a9275",
    ),
    (
        2287,
        4,
        "1",
        "f9dc9aefd33c",
        "2315",
        "2316",
        "OK",
        "db87770a50f1",
    ),
    (
        1452,
        4,
        "1",
        "f6457da76a02",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        148,
        3,
        "1",
        "e5537a217e11",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1496,
        2,
        "1",
        "91c0f414222c",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1763,
        5,
        "1",
        "0d07408c1065",
        "1771",
        "1773",
        "OK",
        "1126821bd661",
    ),
    (
        706,
        2,
        "1",
        "fba47e89f88d",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        517,
        1,
        "1",
        "7df29428c8ef",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        837,
        3,
        "1",
        "42ba5fe00191",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1085,
        4,
        "1",
        "892e0a7c1160",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        471,
        3,
        "1",
        "4627a572f9c4",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        384,
        5,
        "1",
        "d10686e97fea",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        159,
        3,
        "1",
        "affa1cd37ca3",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2379,
        3,
        "1",
        "d33e751a3f55",
        "2392",
        "2394",
        "OK",
        "911550d351f4",
    ),
    (
        1747,
        2,
        "1",
        "7c982eb8c205",
        "1755",
        "1756",
        "OK",
        "92a8c6f0c6e7",
    ),
    (
        2830,
        1,
        "1",
        "7547839aeef7",
        "2826",
        "2828",
        "OK",
        "d18045833382",
    ),
    (
        1495,
        2,
        "1",
        "c17b33dac1e5",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2720,
        5,
        "1",
        "693b9bd532b5",
        "2717",
        "2718",
        "OK",
        "d8032469a4af",
    ),
    (
        228,
        3,
        "1",
        "534a48020455",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1994,
        3,
        "1",
        "80b7805b70b5",
        "2008",
        "2009",
        "OK",
        "f53eea22f5bd",
    ),
    (
        160,
        5,
        "1",
        "e0486921c428",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1724,
        1,
        "1",
        "fdab63861b3c",
        "1734",
        "1735",
        "OK",
        "3ee5b28f508c",
    ),
    (
        2604,
        4,
        "1",
        "de420b0db636",
        "2614",
        "2615",
        "OK",
        "395e22b89555",
    ),
    (
        2429,
        2,
        "0",
        "142af46959bf",
        "2437",
        "2438",
        "OK",
        "8738bffe64bd",
    ),
    (
        2557,
        5,
        "1",
        "ea3d39aefdf1",
        "2558",
        "2558",
        "OK",
        "ea3d39aefdf1",
    ),
    (
        1955,
        4,
        "1",
        "061348284145",
        "1967",
        "1969",
        "OK",
        "b42854754458",
    ),
    (
        2809,
        4,
        "0",
        "9ce681304095",
        "2820",
        "2821",
        "OK",
        "f89b0b018193",
    ),
    (
        2061,
        4,
        "1",
        "50489f880280",
        "2075",
        "2076",
        "OK",
        "0db0e8039122",
    ),
    (
        142,
        2,
        "1",
        "f814760a7df6",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        61,
        3,
        "1",
        "fab67ac1cba0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1667,
        1,
        "1",
        "46e18cc4a522",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1192,
        5,
        "1",
        "0562651bd69f",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        163,
        2,
        "1",
        "744801969103",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1791,
        3,
        "1",
        "850c9c7e9ba3",
        "1816",
        "1816",
        "OK",
        "850c9c7e9ba3",
    ),
    (
        126,
        1,
        "1",
        "e0bd1e3e2da0",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2436,
        1,
        "1",
        "525fa4fb0a9b",
        "2460",
        "2461",
        "OK",
        "8a0f56e64a35",
    ),
    (
        432,
        3,
        "1",
        "4186682d3b9b",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1357,
        3,
        "1",
        "a427fa573dea",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        199,
        3,
        "1",
        "2bafb2f071ad",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        511,
        4,
        "1",
        "ccc0b6e312be",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        819,
        2,
        "1",
        "759f88b4110a",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        2526,
        2,
        "1",
        "6cdf3ca76dd6",
        "2519",
        "2521",
        "OK",
        "1ae7fe77eeb8",
    ),
    (
        1853,
        5,
        "1",
        "9c2806a85c9c",
        "1865",
        "1866",
        "OK",
        "f46749737014",
    ),
    (
        80,
        5,
        "1",
        "3ebab3da7165",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "E:INVALIDOBJ Corrupted HLL object detected",
        "da39a3ee5e6b",
    ),
    (
        1760,
        1,
        "1",
        "b8d42e5e66fe",
        "1762",
        "1764",
        "OK",
        "d4114a651ba4",
    ),
];

#[test]
fn seeded_corruptions_are_answered_as_redis_answers_them() {
    let mut node = Node::new(DB);
    for (case, row) in FUZZ.iter().enumerate() {
        let mut rng = Rng(case as u64);
        node.s("DEL f f2 f3");
        let count = rng.below(3000);
        pfadd(&mut node, "f", (0..count).map(|j| format!("x{case}-{j}")));
        let edits = 1 + rng.below(5);
        for _ in 0..edits {
            let Value::Integer(len) = node.s("STRLEN f") else {
                panic!("STRLEN");
            };
            let at = rng.below(len as u64).to_string();
            let byte = [rng.below(256) as u8];
            node.cmd(&[b"SETRANGE", b"f", at.as_bytes(), &byte]);
        }
        node.s("PFADD f2 a");
        let added = spell(&pfadd(&mut node, "f", [format!("y{case}")]));
        let digest = sha(&mut node, "f");
        let union = spell(&node.s("PFCOUNT f f2"));
        let merged = spell(&node.s("PFMERGE f3 f2 f"));
        let merged_digest = sha(&mut node, "f3");
        let alone = spell(&node.s("PFCOUNT f"));
        let got = (
            count,
            edits,
            added.as_str(),
            &digest[..12],
            alone.as_str(),
            union.as_str(),
            merged.as_str(),
            &merged_digest[..12],
        );
        assert_eq!(got, *row, "case {case}");
    }
}

/// A value that starts as a HyperLogLog, sparse or dense, with arbitrary bytes after its
/// header (or arbitrary bytes over a real one).
fn hll_like() -> impl Strategy<Value = Vec<u8>> {
    let header = |encoding: u8, cache: u8| {
        let mut value = b"HYLL".to_vec();
        value.extend_from_slice(&[encoding, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, cache]);
        value
    };
    prop_oneof![
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 0..3100))
            .prop_map(move |(cache, body)| [header(1, cache & 0x80), body].concat()),
        (any::<u8>(), proptest::collection::vec(any::<u8>(), 12288))
            .prop_map(move |(cache, body)| [header(0, cache & 0x80), body].concat()),
        proptest::collection::vec(any::<u8>(), 0..40),
    ]
}

/// Runs PFADD (of `elements`), PFCOUNT of one and of several keys and PFMERGE both ways on
/// `v`, whatever it holds: each must answer (a count, OK or an error) without panicking or
/// reading past the value, and a refused PFADD must leave `v` as it was.
fn commands_answer(node: &mut Node, elements: &[Vec<u8>]) -> Result<(), TestCaseError> {
    node.s("PFADD w x y z");
    let before = node.s("GET v");
    let mut args: Vec<&[u8]> = vec![b"PFADD", b"v"];
    args.extend(elements.iter().map(Vec::as_slice));
    let added = node.cmd(&args);
    if matches!(added, Value::Error(_)) {
        prop_assert_eq!(node.s("GET v"), before);
    }
    for line in ["PFCOUNT v", "PFCOUNT v w", "PFCOUNT w v missing"] {
        let reply = node.s(line);
        let answered =
            matches!(reply, Value::Integer(n) if n >= 0) || matches!(reply, Value::Error(_));
        prop_assert!(answered, "{}: {:?}", line, reply);
    }
    for line in ["PFMERGE w v", "PFMERGE v w"] {
        let merged = node.s(line);
        prop_assert!(merged == ok() || matches!(merged, Value::Error(_)));
    }
    Ok(())
}

fn elements() -> impl Strategy<Value = Vec<Vec<u8>>> {
    proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..6), 0..40)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tandem_fuzzkit::cases(64)))]

    /// Arbitrary bytes after a HyperLogLog's header (or none at all), as a client may `SET`.
    #[test]
    fn fuzz_hll_commands_on_arbitrary_values(value in hll_like(), elements in elements()) {
        let mut node = Node::new(DB);
        node.cmd(&[b"SET", b"v", &value]);
        commands_answer(&mut node, &elements)?;
    }

    /// A real HyperLogLog, sparse or dense, with bytes overwritten, cut or added.
    #[test]
    fn fuzz_hll_commands_on_damaged_values(
        count in 0..2500usize,
        damage in proptest::collection::vec((any::<usize>(), any::<u8>(), 0..3u8), 1..6),
        elements in elements(),
    ) {
        let mut node = Node::new(DB);
        pfadd(&mut node, "v", (0..count).map(|i| format!("d{i}")));
        let Value::Bulk(mut value) = node.s("GET v") else {
            panic!("a HyperLogLog is a string");
        };
        for (at, byte, how) in damage {
            let at = at % value.len();
            match how {
                0 => value[at] = byte,
                1 => value.truncate(at.max(1)),
                _ => value.insert(at, byte),
            }
        }
        node.cmd(&[b"SET", b"v", &value]);
        commands_answer(&mut node, &elements)?;
    }
}

/// Elements `{p}:{i}` added one at a time: (p, the i whose add turned the value dense, the
/// sparse length before it), as Redis answered. Promotion happens when an add would take the
/// sparse value past 3000 bytes, so a limit off by one moves these.
const PROMOTIONS: &[(usize, usize, i64)] = &[
    (0, 1666, 3000),
    (1, 1674, 3000),
    (2, 1699, 3000),
    (3, 1686, 3000),
    (4, 1654, 2999),
    (5, 1676, 3000),
];

#[test]
fn a_sparse_value_turns_dense_where_redis_turns_it() {
    let mut node = Node::new(DB);
    for &(p, promoted_at, sparse_len) in PROMOTIONS {
        node.s("DEL t");
        let mut last_sparse = 0;
        let mut i = 0;
        loop {
            pfadd(&mut node, "t", [format!("{p}:{i}")]);
            let Value::Integer(len) = node.s("STRLEN t") else {
                panic!("STRLEN");
            };
            if len == 12304 {
                break;
            }
            last_sparse = len;
            i += 1;
        }
        assert_eq!(
            (i, last_sparse),
            (promoted_at, sparse_len),
            "elements {p}:…"
        );
    }
}
