//! Geo commands (`GEOADD`, `GEODIST`, `GEOHASH`, `GEOPOS`, `GEOSEARCH`, `GEOSEARCHSTORE`,
//! `GEORADIUS`, `GEORADIUSBYMEMBER` and the `_RO` forms), run in process (see `common`) and
//! compared with redis-server 7.0.15's replies: `fixtures/geo_redis_7_0_15.txt` holds the
//! cases of Redis's `tests/unit/geo.tcl` (74 commands), then a seeded sequence of 3,000, each
//! with the raw reply Redis gave (recorded by `tools/record_geo.py`, RESP2 and RESP3 by
//! turns). Planting `pqsort` with a stable sort, or walking the boxes in another order, fails
//! this test.
//! Every geo reply is deterministic, so each must equal Redis's exactly.

use crate::common;

use common::{Node, show};
use tandem_redis::resp::{Value, parse_reply};

const FIXTURE: &str = include_str!("fixtures/geo_redis_7_0_15.txt");

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex"))
        .collect()
}

#[test]
fn every_reply_matches_redis_7_0_15() {
    let mut node = Node::new(8 << 20);
    let mut args: Vec<Vec<u8>> = Vec::new();
    let mut replayed = 0;
    for line in FIXTURE.lines() {
        if let Some(proto) = line.strip_prefix("P ") {
            let hello = node.cmd(&[b"HELLO", proto.as_bytes()]);
            assert!(
                matches!(hello, Value::Map(_) | Value::Array(_)),
                "{hello:?}"
            );
        } else if let Some(command) = line.strip_prefix("C ") {
            args = command
                .split(' ')
                .map(|arg| unhex(arg.strip_prefix('x').expect("an x-prefixed argument")))
                .collect();
        } else if let Some(reply) = line.strip_prefix("R ") {
            let raw = unhex(reply);
            let (expected, used) = parse_reply(&raw).unwrap().expect("a whole reply");
            assert_eq!(used, raw.len());
            let arg_refs: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
            let ours = node.cmd(&arg_refs);
            assert_eq!(ours, expected, "command {replayed}: {:?}", show(&arg_refs));
            replayed += 1;
        }
    }
    assert_eq!(replayed, 3075);
}
