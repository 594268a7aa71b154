//! Reads on backups, end to end: `tandem up` starts three nodes, a client stub writes with
//! calls and reads with `Client::read`. Every read must see the client's own last write
//! (read-your-writes through `min_lsn`), a linearizable read by another client must see
//! every write acknowledged before it (the backup asks the primary), backups must answer
//! reads, and a read-only frame must not run a procedure that writes.

use std::process::Command;
use std::time::Duration;

use tandem_client::{CallError, Client, ClientConfig, ErrorCode, ReadConsistency};
use tandem_workloads::debit_credit::{BALANCE, DEBIT_CREDIT};
use up_support::{Up, deposit};

use crate::up_support;

#[test]
fn backups_serve_reads_that_see_the_clients_own_writes() {
    let up = Up::start("reads");
    let mut config = ClientConfig::new(up.clients_at.clone(), 0, 1);
    config.deadline = Duration::from_secs(10);
    let mut client = Client::new(config).expect("a valid config");
    let account = 7u32;
    let mut read_by_backup = 0;
    for round in 1..=40 {
        let written = client
            .call(DEBIT_CREDIT.0, &deposit(account, 3), None)
            .expect("the deposit commits");
        assert!(written.committed());
        let balance_written = i32::from_le_bytes(written.body[..4].try_into().unwrap());
        assert_eq!(balance_written, 3 * round);
        let read = client
            .read(BALANCE.0, &account.to_le_bytes())
            .expect("the read answers");
        assert!(read.committed(), "{read:?}");
        let balance_read = i32::from_le_bytes(read.body[..4].try_into().unwrap());
        assert_eq!(
            balance_read, balance_written,
            "the read missed the client's own write"
        );
        assert!(
            read.lsn >= written.lsn,
            "the read's state predates the write"
        );
        if read.node != written.node {
            read_by_backup += 1;
        }
    }
    assert!(read_by_backup > 0, "no backup answered a read");
    // Every read was answered by a backup or sent on to the primary. (A node other than the
    // one that took the write may be a new primary, on a machine loaded enough for a
    // failover, so the stub's own count is the one to check.)
    let stats = client.stats();
    assert!(stats.reads_at_backups > 0, "{stats:?}");
    assert_eq!(
        stats.reads_at_backups + stats.reads_redirected,
        40,
        "{stats:?}"
    );

    // A Read frame never runs a procedure that writes: the backup sends it on to the
    // primary, which refuses it.
    let refused = client.read(DEBIT_CREDIT.0, &deposit(account, 1000));
    assert!(
        matches!(
            refused,
            Err(CallError::Refused {
                code: ErrorCode::BadArgs,
                ..
            })
        ),
        "{refused:?}"
    );
    let balance = client
        .read(BALANCE.0, &account.to_le_bytes())
        .expect("the read answers");
    assert_eq!(balance.body[..4], (3 * 40i32).to_le_bytes());

    // Another client sees the first one's write when it reads after the LSN it was told.
    let mut config = ClientConfig::new(up.clients_at.clone(), 0, 2);
    config.deadline = Duration::from_secs(10);
    let mut other = Client::new(config).expect("a valid config");
    for round in 1..=20 {
        let written = client
            .call(DEBIT_CREDIT.0, &deposit(account, 1), None)
            .expect("the deposit commits");
        let read = other
            .read_after(BALANCE.0, &account.to_le_bytes(), written.lsn)
            .expect("the read answers");
        assert_eq!(read.body[..4], written.body[..4], "round {round}");
    }

    // A third client, told nothing, sees each write acknowledged to the first before its
    // read: its reads are linearizable (the default), whichever backup serves them.
    let mut config = ClientConfig::new(up.clients_at.clone(), 0, 3);
    config.deadline = Duration::from_secs(10);
    assert_eq!(config.read_consistency, ReadConsistency::Linearizable);
    let mut stranger = Client::new(config).expect("a valid config");
    for round in 1..=40 {
        let written = client
            .call(DEBIT_CREDIT.0, &deposit(account, 1), None)
            .expect("the deposit commits");
        let read = stranger
            .read(BALANCE.0, &account.to_le_bytes())
            .expect("the read answers");
        assert_eq!(read.body[..4], written.body[..4], "round {round}");
        assert!(read.lsn >= written.lsn, "round {round}: {read:?}");
    }
    let stats = stranger.stats();
    assert!(stats.reads_at_backups > 0, "{stats:?}");
}

/// `tandem bench reads`, briefly: the documented JSON, every contender measured, backups
/// serving the reads sent to them, and no linearizable read older than an acknowledged write.
#[test]
fn the_reads_benchmark_reports_every_contender_and_no_violation() {
    let dir = std::env::temp_dir().join(format!("tandem-bench-reads-{}", std::process::id()));
    let output = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args([
            "bench",
            "reads",
            "--seconds",
            "1",
            "--clients",
            "2",
            "--db-mib",
            "8",
            "--json",
        ])
        .arg("--dir")
        .arg(&dir)
        .output()
        .expect("tandem runs");
    let _ = std::fs::remove_dir_all(&dir);
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).expect("JSON");
    assert_eq!(report["nodes"], 3);
    assert_eq!(report["clients"], 2);
    assert_eq!(report["writers"], 1);
    assert_eq!(report["violations"], 0, "{report}");
    let contenders = report["contenders"].as_array().expect("a list");
    let names: Vec<&str> = contenders
        .iter()
        .map(|contender| contender["name"].as_str().expect("a name"))
        .collect();
    assert_eq!(names, ["primary", "linearizable", "session", "bounded:10"]);
    for contender in contenders {
        for field in [
            "reads_per_s",
            "p50_us",
            "p99_us",
            "p999_us",
            "share_at_backups",
            "writes_per_s",
        ] {
            assert!(
                contender[field].as_f64().is_some(),
                "{field} in {contender}"
            );
        }
        assert!(
            contender["reads_per_s"].as_f64().unwrap() > 0.0,
            "{contender}"
        );
        assert!(
            contender["ratio_to_primary"].as_f64().is_some(),
            "{contender}"
        );
        assert!(contender["stale_reads"].as_u64().is_some(), "{contender}");
    }
    assert_eq!(contenders[0]["share_at_backups"], 0.0);
    assert_eq!(contenders[0]["ratio_to_primary"], 1.0);
    // Backups answer reads sent to them, unless the machine is loaded enough that each one
    // was behind: a share of zero for all three would mean they never serve.
    let served_at_backups: f64 = contenders[1..]
        .iter()
        .map(|contender| contender["share_at_backups"].as_f64().unwrap())
        .sum();
    assert!(served_at_backups > 0.0, "{report}");
}

/// A node keeps no thread per client: two dozen stubs that each wrote and read (so each
/// holds a connection to the primary and to a backup) leave every node with no more threads
/// than it had with one client, and every stub is still served on its connections.
#[test]
fn many_stub_clients_cost_the_nodes_no_thread_each() {
    let up = Up::start("threads");
    let connect = |id: u64| {
        let mut config = ClientConfig::new(up.clients_at.clone(), 0, id);
        config.deadline = Duration::from_secs(10);
        Client::new(config).expect("a valid config")
    };
    let account = 3u32;
    let mut first = connect(1);
    first
        .call(DEBIT_CREDIT.0, &deposit(account, 1), None)
        .expect("the deposit commits");
    first
        .read(BALANCE.0, &account.to_le_bytes())
        .expect("the read answers");
    let pids = node_pids(&up);
    let before: Vec<usize> = pids
        .iter()
        .map(|&pid| settled_threads(pid, usize::MAX))
        .collect();
    let mut clients: Vec<Client> = (2..=25).map(connect).collect();
    for client in &mut clients {
        client
            .call(DEBIT_CREDIT.0, &deposit(account, 1), None)
            .expect("the deposit commits");
        client
            .read(BALANCE.0, &account.to_le_bytes())
            .expect("the read answers");
    }
    let read_at_backups: u64 = clients.iter().map(|c| c.stats().reads_at_backups).sum();
    assert!(read_at_backups > 0, "no stub read at a backup");
    for (&pid, &threads) in pids.iter().zip(&before) {
        let after = settled_threads(pid, threads);
        assert!(
            after <= threads,
            "node (pid {pid}) runs {after} threads with 25 clients, {threads} with one"
        );
    }
    for client in &mut clients {
        client
            .call(DEBIT_CREDIT.0, &deposit(account, 1), None)
            .expect("the deposit commits");
    }
    let balance = first
        .read(BALANCE.0, &account.to_le_bytes())
        .expect("the read answers");
    assert_eq!(balance.body[..4], (1 + 2 * 24i32).to_le_bytes());
}

/// The nodes' process ids, from `tandem up`'s cluster.json.
fn node_pids(up: &Up) -> Vec<u32> {
    let text = std::fs::read_to_string(up.dir.join("cluster.json")).expect("cluster.json");
    let json: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    json["nodes"]
        .as_array()
        .expect("nodes")
        .iter()
        .map(|node| node["pid"].as_u64().expect("pid") as u32)
        .collect()
}

/// The threads process `pid` runs once no more than `wanted` run (short-lived ones, such as
/// a handshake's, end), or after ten seconds, whatever it then runs.
fn settled_threads(pid: u32, wanted: usize) -> usize {
    let count = || {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|tasks| tasks.count())
            .unwrap_or(0)
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let threads = count();
        if threads <= wanted || std::time::Instant::now() >= deadline {
            return threads;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A fresh cluster under `durable` answers reads before anything is written: on the primary
/// (`GET`, and `CONFIG GET`, which `redis-benchmark` sends before it starts) and on a backup.
/// Its reads were held until a write made the logs sync something, since no log reported
/// the initial load durable.
#[test]
fn a_fresh_durable_cluster_answers_reads_before_any_write() {
    use crate::redis_support::{Cluster, Conn};
    use tandem_redis::resp::Value;
    let cluster = Cluster::start_with("durable-reads", 3, 16, &["--safety", "durable"]);
    let mut primary = Conn::connect(cluster.primary_resp());
    assert_eq!(primary.cmd("GET nothing"), Value::Null);
    assert!(matches!(
        primary.cmd("CONFIG GET maxmemory"),
        Value::Array(_)
    ));
    let backup = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a backup");
    assert_eq!(Conn::connect(backup.resp).cmd("GET nothing"), Value::Null);
    assert_eq!(primary.cmd("SET some thing"), Value::Simple(b"OK".to_vec()));
}
