//! A real cluster's `ROLE` (a primary lists its backups' Redis ports, a backup names its
//! primary) and eviction (the primary evicts in the write's txn, so every backup holds the
//! same keys after it), through Redis clients' own protocol.

use crate::redis_support::{Cluster, Conn};
use tandem_redis::resp::Value;

fn text(value: &Value) -> String {
    match value {
        Value::Bulk(bytes) | Value::Simple(bytes) => String::from_utf8_lossy(bytes).into_owned(),
        other => panic!("a string, not {other:?}"),
    }
}

#[test]
fn role_names_the_group_and_evictions_reach_every_backup() {
    let cluster = Cluster::start("redis-role", 3, 8);
    let mut primary = Conn::connect(cluster.primary_resp());
    assert_eq!(primary.cmd("SET a 1"), Value::Simple(b"OK".to_vec()));
    let Value::Array(role) = primary.cmd("ROLE") else {
        panic!("ROLE answers an array")
    };
    assert_eq!(text(&role[0]), "master");
    assert!(
        matches!(role[1], Value::Integer(lsn) if lsn > 0),
        "{role:?}"
    );
    let Value::Array(backups) = &role[2] else {
        panic!("a primary lists its backups: {role:?}")
    };
    let mut listed: Vec<u16> = backups
        .iter()
        .map(|backup| match backup {
            Value::Array(fields) => text(&fields[1]).parse().expect("a port"),
            other => panic!("a backup is an array, not {other:?}"),
        })
        .collect();
    listed.sort_unstable();
    let mut expected: Vec<u16> = cluster
        .nodes
        .iter()
        .filter(|node| node.id != cluster.primary)
        .map(|node| node.resp.port())
        .collect();
    expected.sort_unstable();
    assert_eq!(listed, expected);
    let backup = cluster.a_backup();
    let mut reader = Conn::connect(backup.resp);
    let Value::Array(role) = reader.cmd("ROLE") else {
        panic!("ROLE answers an array")
    };
    assert_eq!(text(&role[0]), "slave");
    assert_eq!(
        role[2],
        Value::Integer(i64::from(cluster.primary_resp().port()))
    );
    assert_eq!(text(&role[3]), "connected");

    // Four times what maxmemory allows, in values of 10 KiB: keys go, writes never fail.
    assert_eq!(
        primary.cmd("CONFIG SET maxmemory-policy allkeys-lru maxmemory 1mb"),
        Value::Simple(b"OK".to_vec())
    );
    let value = "v".repeat(10 << 10);
    for i in 0..400 {
        let reply = primary.call(&[
            b"SET".to_vec(),
            format!("k{i}").into_bytes(),
            value.clone().into_bytes(),
        ]);
        assert_eq!(reply, Ok(Value::Simple(b"OK".to_vec())), "write {i}");
    }
    let Value::Integer(keys) = primary.cmd("DBSIZE") else {
        panic!("DBSIZE answers a number")
    };
    assert!(keys < 150, "{keys} keys left of 401");
    assert!(
        primary.cmd("GET k399") != Value::Null,
        "the last write was evicted"
    );
    cluster.assert_replicas_identical();
}
