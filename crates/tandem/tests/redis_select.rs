//! Databases 0 to 15 (`SELECT`), against the reference: the same script goes to a tandem
//! cluster's primary and to a `redis-server`, one connection each, and every reply must be
//! the same. It covers what a connection's database decides (its keys, `DBSIZE`, `FLUSHDB`
//! against `FLUSHALL`), the commands across databases (`MOVE` with an expiry, `SWAPDB`,
//! `COPY … DB`), `SELECT` queued in `MULTI`, a script's own `SELECT`, `WATCH` of a key of one
//! database while the same name changes in another, and every refusal. Then `INFO keyspace`
//! lists each database that holds keys, and a backup serves reads of another database.

use crate::redis_support;

use redis_support::{Cluster, Conn, RedisServer, assert_same_replies};
use tandem_redis::resp::Value;

/// The script, as [`redis_support::script_replies`] reads it.
const SCRIPT: &[&str] = &[
    "FLUSHALL",
    "SET a 0",
    "SELECT 1",
    "GET a",
    "SET a 1",
    "SET b 1",
    "EXPIREAT b 4000000001",
    "DBSIZE",
    "SELECT 0",
    "DBSIZE",
    "GET a",
    "SELECT 16",
    "SELECT -1",
    "SELECT x",
    "SELECT 15",
    "SELECT 0",
    "MOVE a 1",
    "MOVE a 2",
    "GET a",
    "MOVE a 2",
    "SELECT 2",
    "GET a",
    "MOVE a 2",
    "MOVE nothing 3",
    "MOVE a 99",
    "MOVE a -1",
    "MOVE a x",
    "SET e v EXAT 4000000000",
    "MOVE e 11",
    "EXISTS e",
    "SELECT 11",
    "EXPIRETIME e",
    "SWAPDB 1 2",
    "SELECT 1",
    "GET a",
    "SELECT 2",
    "GET a",
    "EXPIRETIME b",
    "SWAPDB 1 x",
    "SWAPDB x 1",
    "SWAPDB 1 16",
    "SWAPDB 3 3",
    "COPY a c DB 5",
    "COPY a a",
    "COPY a a DB 2",
    "COPY a a DB 6",
    "COPY a a DB 16",
    "SELECT 5",
    "GET c",
    "SELECT 6",
    "GET a",
    "FLUSHDB",
    "DBSIZE",
    "SELECT 5",
    "DBSIZE",
    "MULTI",
    "SET x 5",
    "SELECT 7",
    "SET x 7",
    "SELECT 99",
    "EXEC",
    "GET x",
    "SELECT 5",
    "GET x",
    "EVAL redis.call('select', 9); redis.call('set', 's', '9'); return redis.call('get', 's')",
    "EVAL return redis.call('select', 16)",
    "GET s",
    "SELECT 9",
    "GET s",
    "SELECT 3",
    "SET w 1",
    "WATCH w",
    "SELECT 4",
    "SET w 2",
    "SELECT 3",
    "MULTI",
    "GET w",
    "EXEC",
    "WATCH w",
    "SET w 3",
    "MULTI",
    "GET w",
    "EXEC",
    "KEYS *",
    "SELECT 0",
    "KEYS *",
    "RESET",
    "KEYS *",
    "SELECT 9",
    "FLUSHALL",
    "SELECT 1",
    "DBSIZE",
];

#[test]
fn databases_answer_as_redis_does() {
    let redis =
        RedisServer::start().unwrap_or_else(|why| panic!("no redis-server to compare with: {why}"));
    let cluster = Cluster::start("redis-select", 3, 16);
    let expected = assert_same_replies(redis.address, cluster.primary_resp(), SCRIPT);
    // The comparison has teeth: the same read answers differently in different databases,
    // and the refusals are there.
    let replies_to = |line: &str| -> Vec<&String> {
        expected
            .iter()
            .filter(|(sent, _)| sent == line)
            .map(|(_, reply)| reply)
            .collect()
    };
    let gets = replies_to("GET a");
    assert!(gets.iter().any(|r| *r != gets[0]), "{expected:?}");
    let refused = expected.iter().filter(|(_, r)| r.starts_with('-')).count();
    assert!(refused >= 12, "{expected:?}");

    let mut primary = Conn::connect(cluster.primary_resp());
    for (db, keys) in [(0, 1), (4, 2), (12, 3)] {
        primary.cmd(&format!("SELECT {db}"));
        for key in 0..keys {
            primary.cmd(&format!("SET k{key} v EX 1000"));
        }
    }
    primary.cmd("SET persistent v");
    let wanted = [
        "# Keyspace",
        "db0:keys=1,expires=1,avg_ttl=0",
        "db4:keys=2,expires=2,avg_ttl=0",
        "db12:keys=4,expires=3,avg_ttl=0",
    ];
    // The node refreshes what `INFO` says of the database now and then: wait for it (a
    // bound against a hang, not a measured threshold).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let mut info = String::new();
    while std::time::Instant::now() < deadline {
        let Value::Bulk(text) = primary.cmd("INFO keyspace") else {
            panic!("INFO answers a bulk string");
        };
        info = String::from_utf8_lossy(&text).into_owned();
        if info.lines().eq(wanted) {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    assert!(info.lines().eq(wanted), "{info}");
    // A backup serves reads of the database its client selected.
    let backup = cluster.a_backup();
    let mut reader = Conn::connect(backup.resp);
    assert_eq!(reader.cmd("SELECT 12"), Value::Simple(b"OK".to_vec()));
    assert_eq!(reader.cmd("GET persistent"), Value::Bulk(b"v".to_vec()));
    assert_eq!(reader.cmd("DBSIZE"), Value::Integer(4));
    cluster.assert_replicas_identical();
}
