//! `DUMP`, `RESTORE` and `OBJECT` replayed against redis-server 7.0.15's own replies, and
//! the payload codec fed arbitrary and mutated bytes.
//!
//! `fixtures/dump_redis_7_0_15.txt` (recorded by `tools/record_dump.py`) builds values of
//! every type in both of their encodings and the histories that decide Redis's encoding,
//! asks `DUMP` and `OBJECT ENCODING` of each, `RESTORE`s the payload Redis gave (so tandem
//! parses Redis's own bytes) and reads the copy back; then payloads in the encodings Redis
//! 7.0 no longer writes, broken payloads and `RESTORE`'s options. A `DUMP` reply must equal
//! Redis's byte for byte where the payload depends on the value alone (strings, intsets,
//! sorted sets); elsewhere (a hash's or set's table order, a list's node split, a stream's
//! delivery times) both payloads must decode to the same value, of the same type byte.

use crate::common::{self, sorted, sorted_pairs};

use proptest::prelude::*;
use tandem_redis::rdb::{self, Value as Payload};
use tandem_redis::resp::Value;

const FIXTURE: &str = include_str!("fixtures/dump_redis_7_0_15.txt");

/// Type bytes of the payloads Redis writes from the value alone.
const EXACT_TYPES: &[u8] = &[0, 5, 11, 17];

/// A payload's value in a form that does not depend on order or on clocks.
fn canonical_payload(payload: &[u8]) -> String {
    let value = match rdb::parse(payload) {
        Ok((value, _)) => value,
        Err(refusal) => return format!("refused: {refusal:?}"),
    };
    let shown = match value {
        Payload::Set(mut members) => {
            members.sort();
            format!("{members:?}")
        }
        Payload::Hash(mut pairs) => {
            pairs.sort();
            format!("{pairs:?}")
        }
        Payload::Stream(mut image) => {
            for group in &mut image.groups {
                group.pending.iter_mut().for_each(|p| p.delivery_ms = 0);
                group.consumers.iter_mut().for_each(|c| c.seen_ms = 0);
            }
            format!("{image:?}")
        }
        other => format!("{other:?}"),
    };
    format!("type {}: {shown}", payload[0])
}

/// Where `DUMP_PAYLOADS_OUT` names a file, each `DUMP` reply is appended to it as a line
/// `key-hex payload-hex`: `tools/restore_in_redis.py` RESTOREs them into redis-server and
/// compares each copy with the value Redis built (tandem's payloads must load there too).
pub fn save_payload(args: &[Vec<u8>], reply: &Value) {
    let (Ok(path), Value::Bulk(payload)) = (std::env::var("DUMP_PAYLOADS_OUT"), reply) else {
        return;
    };
    let hex = |bytes: &[u8]| bytes.iter().map(|b| format!("{b:02x}")).collect::<String>();
    use std::io::Write as _;
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .unwrap();
    writeln!(file, "{} {}", hex(&args[1]), hex(payload)).unwrap();
}

fn canonical(args: &[Vec<u8>], reply: Value) -> Value {
    let name = String::from_utf8_lossy(&args[0]).to_ascii_uppercase();
    match (name.as_str(), reply) {
        ("SMEMBERS", reply) => sorted(reply),
        ("HGETALL", reply) => sorted_pairs(reply),
        ("DUMP", Value::Bulk(payload)) if !EXACT_TYPES.contains(&payload[0]) => {
            Value::Bulk(canonical_payload(&payload).into_bytes())
        }
        (_, reply) => reply,
    }
}

#[test]
fn every_reply_matches_redis_7_0_15() {
    assert_eq!(common::replay_recorded(FIXTURE, canonical), 682);
}

/// Every `DUMP` payload the fixture holds (Redis's own), as bytes.
fn redis_payloads() -> Vec<Vec<u8>> {
    let lines: Vec<&str> = FIXTURE.lines().collect();
    let mut payloads = Vec::new();
    for pair in lines.windows(2) {
        if pair[0].starts_with("C x44554d50 ") {
            let raw = common::unhex(&pair[1][2..]);
            if let Ok(Some((Value::Bulk(payload), _))) = tandem_redis::resp::parse_reply(&raw) {
                payloads.push(payload);
            }
        }
    }
    payloads
}

#[test]
fn redis_payloads_parse_and_dump_back_to_an_equal_value() {
    let payloads = redis_payloads();
    assert!(payloads.len() > 40, "{} payloads", payloads.len());
    for payload in payloads {
        let (value, encoding) = rdb::parse(&payload).expect("Redis's payload parses");
        let again = rdb::dump(&value, encoding);
        // The type byte may differ: Redis's history (a set of integers that once held text)
        // is not in the payload, and a loaded value takes the encoding its content gives.
        let without_type = |text: String| text.split_once(": ").map(|(_, v)| v.to_owned());
        assert_eq!(
            without_type(canonical_payload(&again)),
            without_type(canonical_payload(&payload))
        );
        if EXACT_TYPES.contains(&payload[0]) && again[0] == payload[0] {
            assert_eq!(again, payload, "{value:?}");
        }
    }
}

/// A payload with one byte changed, a byte cut or added, and its checksum made right again,
/// so that the body's parser sees it.
fn mutated(payload: &[u8], at: usize, byte: u8, how: u8) -> Vec<u8> {
    let body_len = payload.len() - 10;
    let mut body = payload[..body_len].to_vec();
    let at = at % body.len().max(1);
    match how % 3 {
        0 => body[at] = byte,
        1 => body.truncate(at),
        _ => body.insert(at, byte),
    }
    rdb::with_footer(body, rdb::RDB_VERSION)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(tandem_fuzzkit::cases(2000)))]

    #[test]
    fn arbitrary_bytes_are_refused_never_a_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let _ = rdb::parse(&bytes);
        let _ = rdb::parse(&rdb::with_footer(bytes, rdb::RDB_VERSION));
    }

    #[test]
    fn mutated_redis_payloads_never_panic(pick in any::<usize>(), at in any::<usize>(), byte in any::<u8>(), how in any::<u8>()) {
        let payloads = redis_payloads();
        let payload = &payloads[pick % payloads.len()];
        if let Ok((value, encoding)) = rdb::parse(&mutated(payload, at, byte, how)) {
            // Whatever parses dumps and parses back to itself.
            let again = rdb::dump(&value, encoding);
            let first = canonical_payload(&rdb::dump(&value, encoding));
            prop_assert_eq!(canonical_payload(&again), first);
            prop_assert!(rdb::parse(&again).is_ok());
        }
    }
}

#[test]
fn a_wrong_checksum_or_version_is_refused_as_redis_refuses_it() {
    let good = rdb::with_footer(vec![0, 1, b'v'], 10);
    assert!(rdb::parse(&good).is_ok());
    let mut bad = good.clone();
    *bad.last_mut().unwrap() ^= 1;
    assert_eq!(rdb::parse(&bad), Err(rdb::Refusal::VersionOrChecksum));
    assert_eq!(
        rdb::parse(&rdb::with_footer(vec![0, 1, b'v'], 11)),
        Err(rdb::Refusal::VersionOrChecksum)
    );
    // A length that claims more than the payload holds allocates nothing and is refused.
    let huge = rdb::with_footer(
        vec![2, 0x81, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff],
        10,
    );
    assert_eq!(rdb::parse(&huge), Err(rdb::Refusal::BadData));
    let lzf_bomb = rdb::with_footer(vec![0, 0xc3, 1, 0x80, 0x7f, 0xff, 0xff, 0xff, 0], 10);
    assert_eq!(rdb::parse(&lzf_bomb), Err(rdb::Refusal::BadData));
}
