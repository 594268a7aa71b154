//! Geo commands (`GEOADD`, `GEODIST`, `GEOHASH`, `GEOPOS`, `GEOSEARCH`, `GEOSEARCHSTORE`,
//! `GEORADIUS`, `GEORADIUSBYMEMBER` and the `_RO` forms), run in process (see `common`) and
//! compared with redis-server 7.0.15's replies: `fixtures/geo_redis_7_0_15.txt` holds the
//! cases of Redis's `tests/unit/geo.tcl` (74 commands), then a seeded sequence of 3,000, each
//! with the raw reply Redis gave (recorded by `tools/record_geo.py`, RESP2 and RESP3 by
//! turns). Planting `pqsort` with a stable sort, or walking the boxes in another order, fails
//! this test.
//! Every geo reply is deterministic, so each must equal Redis's exactly.

use crate::common;

const FIXTURE: &str = include_str!("fixtures/geo_redis_7_0_15.txt");

#[test]
fn every_reply_matches_redis_7_0_15() {
    assert_eq!(common::replay_recorded(FIXTURE, |_, reply| reply), 3075);
}
