//! `tandem up --redis-cluster`: every node's RESP port speaks Redis Cluster's protocol. A
//! client that asks any node learns the one shard (every slot, the primary, the backups as
//! replicas), a write sent to a backup is redirected to the primary with `-MOVED`, and
//! after the primary is killed the redirections and `CLUSTER SLOTS` name the new one, so
//! that redis-py's `RedisCluster`, started from a backup's port, writes through the kill
//! (its own retries outlast the failover on a machine that is not starved) and loses nothing
//! it was told was written. go-redis's `ClusterClient`
//! (built by `.ci/setup` from `tests/go_cluster`) loses nothing either; it goes on calling a
//! dead primary until its ten-second refresh of the slots (a dead node sends no
//! redirection), so its calls fail meanwhile, and it must write again after that.

use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tandem_redis::resp::Value;

use crate::redis_support::{self, Cluster, Conn};

/// go-redis's cluster client, as `.ci/setup` builds it (it runs the script if it is
/// missing); or the test fails saying why there is none.
fn go_client() -> PathBuf {
    let path = redis_support::workspace_root().join("target/go-cluster-client");
    if !path.is_file() {
        redis_support::set_up_tools();
    }
    assert!(
        path.is_file(),
        "{} is missing, and .ci/setup could not build it (it needs Go and the Go module \
         proxy): run .ci/setup and see what it says",
        path.display()
    );
    path
}

/// A client program's one JSON line, once it ended well.
fn report_of(what: &str, child: std::process::Child) -> Json {
    let output = child.wait_with_output().expect("the client ends");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(output.status.success(), "{what}: {stdout}{stderr}");
    let report = serde_json::from_str(stdout.trim()).expect("one JSON line");
    eprintln!("{what}: {report}");
    report
}

fn error_text(value: &Value) -> String {
    match value {
        Value::Error(text) => String::from_utf8_lossy(text).into_owned(),
        other => panic!("not an error: {other:?}"),
    }
}

fn text(value: &Value) -> String {
    match value {
        Value::Bulk(bytes) | Value::Simple(bytes) | Value::Verbatim(_, bytes) => {
            String::from_utf8_lossy(bytes).into_owned()
        }
        other => panic!("a string, not {other:?}"),
    }
}

/// The primary `CLUSTER SLOTS` names for its one range, as `ip:port`, after checking the
/// range and that every other member is listed as a replica.
fn slots_primary(conn: &mut Conn, members: usize) -> String {
    let Value::Array(ranges) = conn.cmd("CLUSTER SLOTS") else {
        panic!("CLUSTER SLOTS answers an array")
    };
    assert_eq!(ranges.len(), 1, "{ranges:?}");
    let Value::Array(range) = &ranges[0] else {
        panic!("a range is an array: {ranges:?}")
    };
    assert_eq!(range[0], Value::Integer(0));
    assert_eq!(range[1], Value::Integer(16383));
    assert_eq!(range.len(), 2 + members, "{range:?}");
    let Value::Array(primary) = &range[2] else {
        panic!("a node is an array: {range:?}")
    };
    let Value::Integer(port) = primary[1] else {
        panic!("a port: {primary:?}")
    };
    format!("{}:{port}", text(&primary[0]))
}

/// Kills node `id` of `cluster` (SIGKILL, through `tandem kill`).
/// What `redis-cli --cluster check` prints of the cluster it reaches at `address`.
fn cluster_check(redis_cli: &std::path::Path, address: std::net::SocketAddr) -> String {
    let output = Command::new(redis_cli)
        .args(["--cluster", "check", &address.to_string()])
        .output()
        .expect("redis-cli runs");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// One range of `CLUSTER SLOTS`: its slots, its primary's port and how many nodes serve it.
#[derive(Debug, PartialEq, Eq)]
struct SlotRange {
    first: i64,
    last: i64,
    primary_port: i64,
    members: usize,
}

/// The ranges `CLUSTER SLOTS` answers on `conn`.
fn slot_ranges(conn: &mut Conn) -> Vec<SlotRange> {
    let Value::Array(ranges) = conn.cmd("CLUSTER SLOTS") else {
        panic!("CLUSTER SLOTS answers an array")
    };
    let integer = |value: &Value| match value {
        Value::Integer(n) => *n,
        other => panic!("an integer, not {other:?}"),
    };
    ranges
        .iter()
        .map(|range| {
            let Value::Array(range) = range else {
                panic!("a range is an array: {ranges:?}")
            };
            let Value::Array(primary) = &range[2] else {
                panic!("a node is an array: {range:?}")
            };
            SlotRange {
                first: integer(&range[0]),
                last: integer(&range[1]),
                primary_port: integer(&primary[1]),
                members: range.len() - 2,
            }
        })
        .collect()
}

fn kill(cluster: &Cluster, id: u64) {
    let status = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["kill", &id.to_string(), "--dir"])
        .arg(&cluster.dir)
        .status()
        .expect("tandem kill runs");
    assert!(status.success(), "tandem kill {id} failed");
}

#[test]
fn cluster_clients_find_the_primary_and_follow_it_across_a_failover() {
    let python = crate::redis_clients::pyenv_python().unwrap_or_else(|why| panic!("{why}"));
    let go_path = go_client();
    let cluster = Cluster::start_with("redis-cluster", 3, 8, &["--redis-cluster"]);
    let primary = cluster.primary_resp().to_string();
    let backup = cluster.a_backup().clone();
    let mut conn = Conn::connect(backup.resp);

    // What a cluster client asks first, on any node.
    assert_eq!(conn.cmd("CLUSTER KEYSLOT foo"), Value::Integer(12182));
    assert_eq!(conn.cmd("CLUSTER KEYSLOT {foo}.bar"), Value::Integer(12182));
    assert_eq!(slots_primary(&mut conn, 3), primary);
    let myid = text(&conn.cmd("CLUSTER MYID"));
    assert_eq!(myid, format!("{:040x}", backup.id));
    let nodes = text(&conn.cmd("CLUSTER NODES"));
    assert_eq!(nodes.lines().count(), 3, "{nodes}");
    assert!(
        nodes.contains(&format!("{myid} {}@0 myself,slave ", backup.resp)),
        "{nodes}"
    );
    assert!(
        nodes.contains(" master - 0 0 1 connected 0-16383\n"),
        "{nodes}"
    );
    let info = text(&conn.cmd("CLUSTER INFO"));
    assert!(info.starts_with("cluster_state:ok\r\n"), "{info}");
    assert!(info.contains("cluster_known_nodes:3\r\n"), "{info}");
    assert!(text(&conn.cmd("INFO cluster")).contains("cluster_enabled:1"));
    // A write on a backup goes to the primary; a read is served where it is asked.
    assert_eq!(
        error_text(&conn.cmd("SET foo bar")),
        format!("MOVED 12182 {primary}")
    );
    assert_eq!(
        error_text(&conn.cmd("WATCH {foo}.x")),
        format!("MOVED 12182 {primary}")
    );
    assert_eq!(conn.cmd("GET foo"), Value::Null);
    // A write without a key has no slot to be redirected by: READONLY, as on a replica.
    assert!(error_text(&conn.cmd("FLUSHALL")).starts_with("READONLY "));
    // Redis's own cluster tools agree: redis-cli's check finds every slot covered, and
    // `redis-cli -c` follows the redirection to the primary.
    let redis_cli = redis_support::require("redis-cli");
    let text = cluster_check(&redis_cli, backup.resp);
    assert!(
        text.contains("[OK] All nodes agree about slots configuration."),
        "{text}"
    );
    assert!(text.contains("[OK] All 16384 slots covered."), "{text}");
    let port = backup.resp.port().to_string();
    let output = Command::new(&redis_cli)
        .args(["-c", "-p", &port, "SET", "by-redis-cli", "1"])
        .output()
        .expect("redis-cli runs");
    assert_eq!(String::from_utf8_lossy(&output.stdout).trim(), "OK");
    // As in Redis Cluster, only database 0.
    assert_eq!(
        error_text(&conn.cmd("SELECT 1")),
        "ERR SELECT is not allowed in cluster mode"
    );
    // The slots are the config store's to place.
    let refused = error_text(&conn.cmd("CLUSTER ADDSLOTS 1"));
    assert!(refused.contains("not served here"), "{refused}");

    // redis-py's RedisCluster and go-redis's ClusterClient, from the backup's port, while
    // the primary is killed.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/redis_cluster.py");
    let piped = std::process::Stdio::piped;
    let port = backup.resp.port().to_string();
    let py = Command::new(&python)
        .args([script.as_os_str(), port.as_ref(), "4".as_ref()])
        .stdout(piped())
        .stderr(piped())
        .spawn()
        .expect("python runs");
    // Past go-redis's ten-second refresh of the slots, with time to write after it.
    let go = Command::new(&go_path)
        .args([backup.resp.to_string().as_str(), "14"])
        .stdout(piped())
        .stderr(piped())
        .spawn()
        .expect("the go client runs");
    std::thread::sleep(Duration::from_millis(1500));
    kill(&cluster, cluster.primary);
    // redis-py retries a call a few times, which a failover here outlasts (none of its calls
    // failed in this test's runs on a quiet machine); a starved one may take longer than
    // its retries, as Redis Cluster's own failovers do: what it was told stays written, and
    // it writes again.
    let report = report_of("redis-py's RedisCluster through a failover", py);
    assert_eq!(report["wrong_count"], 0, "{report}");
    assert!(
        report["acknowledged_after_last_error"].as_u64() > Some(0),
        "{report}"
    );
    let report = report_of("go-redis's ClusterClient through a failover", go);
    assert_eq!(report["wrong_count"], 0, "{report}");
    assert!(
        report["acknowledged_after_last_error"].as_u64() > Some(0),
        "{report}"
    );
    // Both checks catch a write counted but never made.
    let planted = |program: &PathBuf, args: &[&str]| {
        let child = Command::new(program)
            .args(args)
            .stdout(piped())
            .stderr(piped())
            .spawn()
            .expect("the client runs");
        report_of("a planted lost write", child)["wrong_count"].clone()
    };
    let script = script.display().to_string();
    let port = backup.resp.port().to_string();
    assert_eq!(planted(&python, &[&script, &port, "0.2", "--plant"]), 1);
    let address = backup.resp.to_string();
    assert_eq!(planted(&go_path, &[&address, "0.2", "plant"]), 1);

    // Every live node now names the new primary, in its slots and its redirections.
    let survivor = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a live node");
    let mut conn = Conn::connect(survivor.resp);
    let started = Instant::now();
    let new_primary = loop {
        let named = slots_primary(&mut conn, 2);
        if named != primary {
            break named;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "CLUSTER SLOTS still names the killed primary"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    for node in cluster.nodes.iter().filter(|n| n.id != cluster.primary) {
        let mut conn = Conn::connect(node.resp);
        let reply = conn.cmd("SET foo baz");
        if node.resp.to_string() != new_primary {
            assert_eq!(error_text(&reply), format!("MOVED 12182 {new_primary}"));
        } else {
            assert_eq!(reply, Value::Simple(b"OK".to_vec()));
        }
    }
}

/// Without the flag a node answers as one server: a cluster client is told so and goes on as
/// a client of one node.
#[test]
fn without_the_flag_a_node_says_it_has_no_cluster_support() {
    let cluster = Cluster::start("redis-no-cluster", 1, 8);
    let mut conn = Conn::connect(cluster.primary_resp());
    assert_eq!(
        error_text(&conn.cmd("CLUSTER SLOTS")),
        "ERR This instance has cluster support disabled"
    );
    assert!(text(&conn.cmd("INFO cluster")).contains("cluster_enabled:0"));
}

/// `tandem up --groups 3` with the redis workload: every node has an endpoint per group (its
/// RESP port for group 1, the next ports for groups 2 and 3), each serving its group's slots
/// alone. A client of any endpoint learns the three shards, is sent to the primary of a key's
/// group with `-MOVED`, and gets `-CROSSSLOT` for keys of two groups; keys of two slots of
/// one group run together. `redis-cli -c` and redis-py's `RedisCluster` route by themselves,
/// through the death of the node that leads group 1.
#[test]
fn three_groups_split_the_slots_and_cluster_clients_route_by_slot() {
    let python = crate::redis_clients::pyenv_python().unwrap_or_else(|why| panic!("{why}"));
    let cluster = Cluster::start_with("redis-groups", 3, 8, &["--groups", "3"]);
    let endpoint = |node: u64, group: u16| {
        let base = cluster.node(node).resp;
        std::net::SocketAddr::new(base.ip(), base.port() + group - 1)
    };
    let ok = Value::Simple(b"OK".to_vec());
    let mut conn = Conn::connect(endpoint(1, 1));
    let ranges = slot_ranges(&mut conn);
    let split = [(0, 5460), (5461, 10922), (10923, 16383)];
    let expected: Vec<SlotRange> = (1..=3u16)
        .zip(split)
        .map(|(group, (first, last))| SlotRange {
            first,
            last,
            // Node g leads group g; the other two back it up.
            primary_port: i64::from(endpoint(u64::from(group), group).port()),
            members: 3,
        })
        .collect();
    assert_eq!(ranges, expected);
    // "bar" (slot 5061) and "b" (3300) are group 1's, "c" (7365) group 2's, "foo" (12182)
    // group 3's.
    assert_eq!(conn.cmd("SET bar 1"), ok);
    let moved =
        |slot: u16, node: u64, group: u16| format!("MOVED {slot} {}", endpoint(node, group));
    assert_eq!(error_text(&conn.cmd("SET foo 1")), moved(12182, 3, 3));
    assert_eq!(error_text(&conn.cmd("GET c")), moved(7365, 2, 2));
    let crossed = error_text(&conn.cmd("MSET bar 1 foo 2"));
    assert!(crossed.starts_with("CROSSSLOT "), "{crossed}");
    assert_eq!(conn.cmd("MSET bar 1 b 2"), ok);
    assert_eq!(
        conn.cmd("DBSIZE"),
        Value::Integer(2),
        "group 1 holds its own keys"
    );
    // A backup's endpoint of group 1 serves its reads and sends its writes to the primary.
    let mut backup = Conn::connect(endpoint(2, 1));
    assert_eq!(backup.cmd("GET b"), Value::Bulk(b"2".to_vec()));
    assert_eq!(error_text(&backup.cmd("SET b 3")), moved(3300, 1, 1));

    // Redis's own tools agree.
    let redis_cli = redis_support::require("redis-cli");
    let checked = cluster_check(&redis_cli, endpoint(1, 1));
    assert!(
        checked.contains("[OK] All 16384 slots covered."),
        "{checked}"
    );
    let cli = |port: u16, args: &[&str]| {
        let output = Command::new(&redis_cli)
            .args(["-c", "-p", &port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli runs");
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    };
    assert_eq!(cli(endpoint(1, 1).port(), &["SET", "foo", "x"]), "OK");
    assert_eq!(cli(endpoint(2, 2).port(), &["GET", "foo"]), "x");

    // redis-py's RedisCluster, from group 2's primary, while node 1 (group 1's primary) dies.
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/redis_cluster.py");
    let piped = std::process::Stdio::piped;
    let port = endpoint(2, 2).port().to_string();
    let py = Command::new(&python)
        .args([script.as_os_str(), port.as_ref(), "4".as_ref()])
        .stdout(piped())
        .stderr(piped())
        .spawn()
        .expect("python runs");
    std::thread::sleep(Duration::from_millis(1500));
    kill(&cluster, 1);
    let report = report_of("redis-py's RedisCluster over three groups", py);
    assert_eq!(report["wrong_count"], 0, "{report}\n{}", cluster.logs());
    assert!(
        report["acknowledged_after_last_error"].as_u64() > Some(0),
        "{report}"
    );
    // Group 1's slots now name a new primary, on node 2 or 3.
    let mut conn = Conn::connect(endpoint(2, 2));
    let started = Instant::now();
    loop {
        let old = i64::from(endpoint(1, 1).port());
        if slot_ranges(&mut conn)[0].primary_port != old {
            break;
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "CLUSTER SLOTS still names the killed primary of group 1"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(cli(endpoint(3, 3).port(), &["GET", "b"]), "2");
}
