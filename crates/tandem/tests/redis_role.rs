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

/// Whether process `pid` has ended (gone, or a zombie its parent has not reaped yet).
fn ended(pid: u64) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(true, |stat| {
        stat.rsplit(") ")
            .next()
            .is_some_and(|rest| rest.starts_with('Z'))
    })
}

/// `SHUTDOWN` stops the node it is sent to, as Redis's stops: no reply, the connection
/// closes, the process ends; a backup then takes over with every write the primary
/// acknowledged. What it cannot do (`SAVE`: a node writes no RDB file; `ABORT`: nothing is
/// under way) is refused and the node serves on.
#[test]
fn shutdown_stops_the_primary_and_a_backup_takes_over_with_every_write() {
    let cluster = Cluster::start("redis-shutdown", 3, 8);
    let ok = Value::Simple(b"OK".to_vec());
    let mut primary = Conn::connect(cluster.primary_resp());
    for i in 0..20 {
        assert_eq!(primary.cmd(&format!("SET k{i} {i}")), ok);
    }
    let error = |text: &str| Value::Error(text.as_bytes().to_vec());
    let save_failed = error("ERR Errors trying to SHUTDOWN. Check logs.");
    assert_eq!(primary.cmd("SHUTDOWN SAVE"), save_failed);
    assert_eq!(
        primary.cmd("SHUTDOWN ABORT"),
        error("ERR No shutdown in progress.")
    );
    assert_eq!(primary.cmd("PING"), Value::Simple(b"PONG".to_vec()));

    let listed = std::fs::read_to_string(cluster.dir.join("cluster.json")).expect("cluster.json");
    let file: serde_json::Value = serde_json::from_str(&listed).expect("JSON");
    let pid = file["nodes"]
        .as_array()
        .and_then(|nodes| {
            nodes
                .iter()
                .find(|n| n["id"].as_u64() == Some(cluster.primary))
        })
        .and_then(|node| node["pid"].as_u64())
        .expect("the primary's pid");
    let stopped = primary.call(&[b"SHUTDOWN".to_vec()]);
    assert_eq!(stopped, Err("the connection closed".to_owned()));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while !ended(pid) {
        assert!(
            std::time::Instant::now() < deadline,
            "node {pid} still runs"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }

    let new_primary = loop {
        let serving = cluster
            .nodes
            .iter()
            .filter(|n| n.id != cluster.primary)
            .find(|node| {
                let Value::Array(role) = Conn::connect(node.resp).cmd("ROLE") else {
                    return false;
                };
                text(&role[0]) == "master"
            });
        if let Some(node) = serving {
            break node;
        }
        assert!(std::time::Instant::now() < deadline, "no backup took over");
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut conn = Conn::connect(new_primary.resp);
    for i in 0..20 {
        assert_eq!(
            conn.cmd(&format!("GET k{i}")),
            Value::Bulk(i.to_string().into_bytes())
        );
    }
}

/// Reads the next message a subscribed connection is pushed: `[kind, channel, payload]`.
fn pushed(conn: &mut Conn) -> (String, String, String) {
    match conn.read().expect("a pushed message") {
        Value::Array(fields) if fields.len() == 3 => {
            (text(&fields[0]), text(&fields[1]), text(&fields[2]))
        }
        other => panic!("a message is [kind, channel, payload], not {other:?}"),
    }
}

#[test]
fn what_is_published_on_the_primary_reaches_the_subscribers_of_every_backup() {
    let cluster = Cluster::start("redis-pubsub-relay", 3, 8);
    let mut subscribers: Vec<Conn> = Vec::new();
    for node in cluster
        .nodes
        .iter()
        .filter(|node| node.id != cluster.primary)
    {
        let mut conn = Conn::connect(node.resp);
        for (command, kind) in [
            ("SUBSCRIBE news", "subscribe"),
            ("SSUBSCRIBE orders", "ssubscribe"),
        ] {
            let name = command.split(' ').nth(1).expect("a channel");
            conn.send(
                &command
                    .split(' ')
                    .map(|word| word.as_bytes().to_vec())
                    .collect::<Vec<_>>(),
            )
            .expect("sent");
            match conn.read().expect("a confirmation") {
                Value::Array(fields) => {
                    assert_eq!(
                        (text(&fields[0]).as_str(), text(&fields[1]).as_str()),
                        (kind, name)
                    )
                }
                other => panic!("a confirmation, not {other:?}"),
            }
        }
        subscribers.push(conn);
    }
    assert_eq!(subscribers.len(), 2);
    let mut primary = Conn::connect(cluster.primary_resp());
    // The primary's own count: no subscriber of its own, as a Redis master counts.
    assert_eq!(primary.cmd("PUBLISH news first"), Value::Integer(0));
    assert_eq!(primary.cmd("SPUBLISH orders one"), Value::Integer(0));
    let script = b"return redis.call('PUBLISH','news','from-a-script')".to_vec();
    assert_eq!(
        primary.call(&[b"EVAL".to_vec(), script, b"0".to_vec()]),
        Ok(Value::Integer(0))
    );
    assert_eq!(
        primary.cmd("CONFIG SET notify-keyspace-events KA"),
        Value::Simple(b"OK".to_vec())
    );
    let mut keyspace = Conn::connect(cluster.a_backup().resp);
    keyspace
        .send(&[b"SUBSCRIBE".to_vec(), b"__keyspace@0__:k".to_vec()])
        .expect("sent");
    keyspace.read().expect("a confirmation");
    assert_eq!(primary.cmd("SET k v"), Value::Simple(b"OK".to_vec()));
    for subscriber in &mut subscribers {
        assert_eq!(
            pushed(subscriber),
            ("message".into(), "news".into(), "first".into())
        );
        assert_eq!(
            pushed(subscriber),
            ("smessage".into(), "orders".into(), "one".into())
        );
        assert_eq!(
            pushed(subscriber),
            ("message".into(), "news".into(), "from-a-script".into())
        );
    }
    assert_eq!(
        pushed(&mut keyspace),
        ("message".into(), "__keyspace@0__:k".into(), "set".into())
    );
    // A backup's own publication reaches its own subscribers only, as on a Redis replica.
    let backup = cluster.a_backup();
    let mut local = Conn::connect(backup.resp);
    assert_eq!(local.cmd("PUBLISH news local"), Value::Integer(1));
}
