//! Replication end to end, with real processes: `tandem bench replication` runs a primary (in
//! this bench process, or as a `tandem node` with `--driver network`) and each backup as its own
//! `tandem node` on loopback, stops the load, waits for every backup to apply everything and
//! compares the replicas' checksums at the same LSN. These tests read its JSON report and check
//! behaviour only: replicas identical, databases consistent, the bytes shipped per txn. They
//! never look at throughput or latency.
//!
//! Also `tandem node --config FILE` refusing a bad configuration: exit code 2 and one line
//! naming the field (or the file).

use std::io::Read;
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Command, ExitStatus, Stdio};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use serde_json::Value;
use tandem_runtime::config::EXAMPLE;

/// Far beyond what a run takes; the bench's own deadlines (ready, drain, catch-up) fire first
/// and explain themselves. This only keeps a hung process from hanging the test.
const PROCESS_LIMIT: Duration = Duration::from_secs(300);

/// Debit-Credit declares three 4-byte balances and a 16-byte history record per txn.
const DEBIT_CREDIT_BYTES: f64 = 28.0;
/// A network client's call also writes its dedup slot in the same txn: seq and LSN (8 bytes
/// each), the reply's length (4) and the 4-byte reply.
const DEDUP_SLOT_BYTES: f64 = 24.0;

struct Ran {
    status: ExitStatus,
    stdout: String,
    stderr: String,
}

/// Runs the `tandem` binary to completion (killing it after [`PROCESS_LIMIT`]).
fn tandem(args: &[&str]) -> Ran {
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tandem starts");
    let stdout = read_all(child.stdout.take().expect("piped"));
    let stderr = read_all(child.stderr.take().expect("piped"));
    let deadline = Instant::now() + PROCESS_LIMIT;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for tandem") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("tandem {args:?} still running after {PROCESS_LIMIT:?}");
        }
        thread::sleep(Duration::from_millis(10));
    };
    let text = |pipe: JoinHandle<Vec<u8>>| {
        String::from_utf8(pipe.join().expect("reader thread")).expect("UTF-8 output")
    };
    Ran {
        status,
        stdout: text(stdout),
        stderr: text(stderr),
    }
}

fn read_all(mut pipe: impl Read + Send + 'static) -> JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut bytes = Vec::new();
        let _ = pipe.read_to_end(&mut bytes);
        bytes
    })
}

/// A short `tandem bench replication --json` run that must succeed; returns its runs.
fn bench(workload: &str, db_mib: &str, extra: &[&str]) -> Vec<Value> {
    let mut args = vec![
        "bench",
        "replication",
        "--workload",
        workload,
        "--db-mib",
        db_mib,
        "--seconds",
        "0.25",
        "--json",
    ];
    args.extend_from_slice(extra);
    let ran = tandem(&args);
    assert!(
        ran.status.success(),
        "{args:?} exited with {}:\n{}\n{}",
        ran.status,
        ran.stderr,
        ran.stdout
    );
    let report: Value = serde_json::from_str(&ran.stdout)
        .unwrap_or_else(|err| panic!("{args:?} prints JSON ({err}):\n{}", ran.stdout));
    assert_eq!(report["workload"], workload);
    let runs = report["runs"].as_array().expect("a list of runs").clone();
    assert!(!runs.is_empty(), "{report}");
    runs
}

/// What every run must show: the replicas agree at the same LSN and every check passed.
fn assert_replicas_match(run: &Value) {
    assert_eq!(run["checksums_match"], true, "{run}");
    assert_eq!(run["consistent"], true, "{run}");
    assert!(run["problems"].is_null(), "{run}");
    let committed = run["committed"].as_u64().expect("committed");
    assert!(committed > 0, "{run}");
    assert!(
        run["lsn"].as_u64().expect("lsn") > committed,
        "the LSN counts the load's txns too: {run}"
    );
}

fn shipped(run: &Value, class: &str) -> f64 {
    run["shipped_bytes_per_tx"][class]
        .as_f64()
        .unwrap_or_else(|| panic!("shipped_bytes_per_tx.{class}: {run}"))
}

/// Data (and undo) bytes are those a txn changed: a call with a zero delta (one in two million)
/// leaves its balances as they were, hence the tolerance.
fn assert_about(run: &Value, class: &str, expected: f64) {
    let got = shipped(run, class);
    assert!(
        (got - expected).abs() < 0.01,
        "{class}: {got} bytes per txn, expected {expected}: {run}"
    );
}

/// A replicated run's byte counts add up.
fn assert_total(run: &Value) {
    let parts = shipped(run, "data") + shipped(run, "undo") + shipped(run, "meta");
    assert!((shipped(run, "total") - parts).abs() < 1e-6, "{run}");
}

/// One Debit-Credit active run with `backups` backups.
fn assert_active_debit_credit(run: &Value, backups: u64, safety: &str) {
    let data = if run["driver"] == "network" {
        DEBIT_CREDIT_BYTES + DEDUP_SLOT_BYTES
    } else {
        DEBIT_CREDIT_BYTES
    };
    assert_eq!(
        (&run["mode"], &run["strategy"]),
        (&Value::from("active"), &Value::from("v3")),
        "{run}"
    );
    assert_eq!(run["backups"], backups, "{run}");
    assert_eq!(run["safety"], safety, "{run}");
    assert_replicas_match(run);
    assert_about(run, "data", data);
    assert_eq!(
        shipped(run, "undo"),
        0.0,
        "active backups get redo only: {run}"
    );
    assert!(shipped(run, "meta") > 0.0, "{run}");
    assert_total(run);
}

#[test]
fn every_mode_keeps_one_backup_identical() {
    let runs = bench("debit-credit", "4", &["--mode", "all", "--clients", "256"]);
    let contenders: Vec<(&str, &str)> = runs
        .iter()
        .map(|run| {
            (
                run["mode"].as_str().unwrap(),
                run["strategy"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        contenders,
        [
            ("standalone", "v3"),
            ("passive", "v1"),
            ("passive", "v2"),
            ("passive", "v3"),
            ("active", "v3"),
        ]
    );
    for run in &runs {
        assert_replicas_match(run);
        assert_eq!(run["driver"], "in-process", "{run}");
    }

    let standalone = &runs[0];
    assert_eq!(standalone["backups"], 0, "{standalone}");
    assert_eq!(standalone["safety"], "none", "{standalone}");
    assert_eq!(shipped(standalone, "total"), 0.0, "{standalone}");

    // Passive (crates/memory/src/passive.rs): the backup receives the primary's writes to its
    // mirror memory. Data: the changed runs. Undo: V1 copies the declared spans into the
    // mirror, V2 the changed runs, V3 logs each declared range's old bytes. Meta: V1 and V2
    // write two LSNs (8 bytes each); V3 writes, per declared range (4 of them), a 16-byte
    // entry header and an 8-byte log end, then one 16-byte commit: 4 × 24 + 16 = 112.
    for (run, meta) in runs[1..4].iter().zip([16.0, 16.0, 112.0]) {
        assert_eq!(run["backups"], 1, "{run}");
        assert_eq!(run["safety"], "2-safe", "{run}");
        assert_about(run, "data", DEBIT_CREDIT_BYTES);
        assert_about(run, "undo", DEBIT_CREDIT_BYTES);
        assert_eq!(shipped(run, "meta"), meta, "{run}");
        assert_total(run);
    }

    assert_active_debit_credit(&runs[4], 1, "2-safe");
}

#[test]
fn active_mode_keeps_two_backups_identical() {
    let runs = bench(
        "debit-credit",
        "4",
        &["--mode", "active", "--backups", "2", "--clients", "256"],
    );
    assert_eq!(runs.len(), 1);
    assert_active_debit_credit(&runs[0], 2, "2-safe");
}

#[test]
fn every_safety_rule_keeps_the_backup_identical() {
    for safety in ["2-safe-applied", "1-safe", "bounded:64"] {
        let runs = bench(
            "debit-credit",
            "4",
            &["--mode", "active", "--safety", safety, "--clients", "256"],
        );
        assert_eq!(runs.len(), 1);
        assert_active_debit_credit(&runs[0], 1, safety);
    }
}

#[test]
fn order_entry_replicas_match_and_are_consistent() {
    let runs = bench(
        "order-entry",
        "24",
        &["--mode", "active", "--clients", "256"],
    );
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["mode"], "active", "{run}");
    assert_eq!(run["backups"], 1, "{run}");
    assert_replicas_match(run);
    assert!(shipped(run, "data") > 0.0, "{run}");
    assert_eq!(shipped(run, "undo"), 0.0, "{run}");
    assert_total(run);
}

/// The primary as a `tandem node` process too, its calls sent by client connections.
#[test]
fn the_network_driver_keeps_the_backup_identical() {
    let runs = bench(
        "debit-credit",
        "4",
        &["--mode", "active", "--driver", "network", "--clients", "2"],
    );
    assert_eq!(runs.len(), 1);
    let run = &runs[0];
    assert_eq!(run["driver"], "network", "{run}");
    assert!(run["half_load"].is_object(), "{run}");
    assert_active_debit_credit(run, 1, "2-safe");
}

/// A scratch directory for config files, removed when dropped.
struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!(
            "tandem-replication-test-{}-{name}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        Scratch(dir)
    }

    fn write(&self, name: &str, text: &str) -> String {
        let path = self.0.join(name);
        std::fs::write(&path, text).expect("the config is written");
        path.to_str().expect("a UTF-8 path").to_owned()
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// `tandem node --config PATH` must exit with code 2, print nothing on stdout and say `says`
/// on stderr, in one line unless `one_line` is false.
fn assert_node_refuses(path: &str, says: &[&str], one_line: bool) {
    let ran = tandem(&["node", "--config", path]);
    assert_eq!(ran.status.code(), Some(2), "{path}: {}", ran.stderr);
    assert!(ran.stdout.is_empty(), "{path}: {}", ran.stdout);
    assert!(ran.stderr.starts_with("error: "), "{path}: {}", ran.stderr);
    if one_line {
        assert_eq!(ran.stderr.trim_end().lines().count(), 1, "{}", ran.stderr);
    }
    for word in says {
        assert!(
            ran.stderr.contains(word),
            "{path}: {word:?} in {}",
            ran.stderr
        );
    }
}

fn example_with(from: &str, to: &str) -> String {
    assert!(EXAMPLE.contains(from), "{from}");
    EXAMPLE.replacen(from, to, 1)
}

#[test]
fn a_node_refuses_a_bad_config_naming_the_field() {
    let scratch = Scratch::new("bad-config");
    let node_id = scratch.write("node-id.toml", &example_with("node_id = 1", "node_id = 0"));
    assert_node_refuses(&node_id, &["config field `node_id`", "≥ 1"], true);

    // The example has one backup: three acks can never come.
    let safety = example_with("safety = \"2-safe\"", "safety = \"2-safe:3\"");
    let safety = scratch.write("safety.toml", &safety);
    assert_node_refuses(&safety, &["config field `group.safety`", "K ≤ 1"], true);

    let missing = scratch.0.join("missing.toml");
    let missing = missing.to_str().unwrap();
    assert_node_refuses(missing, &["cannot read config file", missing], true);

    // A type error keeps toml's message, which shows the line over several lines.
    let typed = scratch.write(
        "typed.toml",
        &example_with("node_id = 1", "node_id = \"one\""),
    );
    assert_node_refuses(&typed, &[typed.as_str(), "node_id"], false);
}

#[test]
fn a_node_that_cannot_listen_exits_with_code_1_naming_the_address() {
    let scratch = Scratch::new("listen");
    let taken = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = taken.local_addr().unwrap().to_string();
    // A valid standalone primary whose listen address is already in use.
    let config = format!(
        "node_id = 1\nlisten = \"{address}\"\nrole = \"primary\"\n\
         [group]\nworkload = \"debit-credit\"\ndb_mib = 4\nsafety = \"1-safe\"\n"
    );
    let path = scratch.write("node.toml", &config);
    let ran = tandem(&["node", "--config", &path]);
    assert_eq!(ran.status.code(), Some(1), "{}", ran.stderr);
    assert_eq!(ran.stderr.trim_end().lines().count(), 1, "{}", ran.stderr);
    assert!(ran.stderr.contains("listen"), "{}", ran.stderr);
    assert!(ran.stderr.contains(&address), "{}", ran.stderr);
}

/// Three `tandem node` processes of a group without a `[cluster]` table, killed when dropped.
struct FixedGroup {
    scratch: Scratch,
    /// Per node (1, 2, 3): its config path, RESP address and process.
    nodes: Vec<(String, std::net::SocketAddr, Option<std::process::Child>)>,
}

impl FixedGroup {
    /// Node 1 the primary, 2 and 3 backups, Redis on each, 2-safe.
    fn start(name: &str) -> FixedGroup {
        let scratch = Scratch::new(name);
        let port = crate::redis_support::free_port;
        let members: Vec<(u16, u16)> = (0..3).map(|_| (port(), port())).collect();
        let mut nodes = Vec::new();
        for (index, (listen, resp)) in members.iter().enumerate() {
            let id = index + 1;
            let role = |id: usize| if id == 1 { "primary" } else { "backup" };
            let mut config = format!(
                "node_id = {id}\nlisten = \"127.0.0.1:{listen}\"\n\
                 resp_listen = \"127.0.0.1:{resp}\"\nrole = \"{}\"\n\
                 [group]\nworkload = \"redis\"\ndb_mib = 16\nsafety = \"2-safe\"\n",
                role(id)
            );
            for (peer, (listen, resp)) in members.iter().enumerate() {
                if peer != index {
                    config.push_str(&format!(
                        "[[peers]]\nnode_id = {}\naddress = \"127.0.0.1:{listen}\"\n\
                         role = \"{}\"\nresp = \"127.0.0.1:{resp}\"\n",
                        peer + 1,
                        role(peer + 1)
                    ));
                }
            }
            let path = scratch.write(&format!("node{id}.toml"), &config);
            let address = format!("127.0.0.1:{resp}").parse().expect("an address");
            nodes.push((path, address, None));
        }
        let mut group = FixedGroup { scratch, nodes };
        for id in 1..=3 {
            group.spawn(id);
        }
        group
    }

    /// Starts node `id` (again), and waits until its RESP port answers.
    fn spawn(&mut self, id: usize) {
        let log = std::fs::File::create(self.scratch.0.join(format!("node{id}.log")))
            .expect("a log file");
        let (path, address, child) = &mut self.nodes[id - 1];
        *child = Some(
            Command::new(env!("CARGO_BIN_EXE_tandem"))
                .args(["node", "--config", path.as_str()])
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("a log file"))
                .stderr(log)
                .spawn()
                .expect("tandem node starts"),
        );
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::net::TcpStream::connect(*address).is_err() {
            assert!(Instant::now() < deadline, "node {id} never served RESP");
            thread::sleep(Duration::from_millis(10));
        }
    }

    fn kill(&mut self, id: usize) {
        if let Some(mut child) = self.nodes[id - 1].2.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn conn(&self, id: usize) -> crate::redis_support::Conn {
        crate::redis_support::Conn::connect(self.nodes[id - 1].1)
    }

    fn threads(&self, id: usize) -> usize {
        let pid = self.nodes[id - 1].2.as_ref().expect("running").id();
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .expect("the node's threads")
            .count()
    }

    fn logs(&self) -> String {
        (1..=3)
            .map(|id| {
                let log = self.scratch.0.join(format!("node{id}.log"));
                format!(
                    "node {id}:\n{}",
                    std::fs::read_to_string(log).unwrap_or_default()
                )
            })
            .collect()
    }
}

impl Drop for FixedGroup {
    fn drop(&mut self) {
        for id in 1..=3 {
            self.kill(id);
        }
    }
}

/// A group without a `[cluster]` table runs the cluster's `Node` with a view that never
/// changes: a write reaches every backup, whose reads are linearizable; a backup refuses
/// writes and names the primary; no node holds a thread per client; and a backup killed and
/// started afresh catches up while the 2-safe write sent meanwhile waits for it, with
/// nothing moving the primary.
#[test]
fn a_fixed_group_serves_from_every_node_and_a_backup_started_again_catches_up() {
    use tandem_redis::resp::Value as Resp;
    let mut group = FixedGroup::start("fixed-group");
    let mut primary = group.conn(1);
    for key in 0..100 {
        assert_eq!(
            primary.cmd(&format!("SET k{key} v{key}")),
            Resp::Simple(b"OK".to_vec())
        );
    }
    let mut clients: Vec<_> = (0..8).map(|_| group.conn(1)).collect();
    for client in &mut clients {
        assert_eq!(client.cmd("PING"), Resp::Simple(b"PONG".to_vec()));
    }
    for id in 2..=3 {
        let mut backup = group.conn(id);
        assert_eq!(
            backup.cmd("GET k99"),
            Resp::Bulk(b"v99".to_vec()),
            "{}",
            group.logs()
        );
        let Resp::Error(refusal) = backup.cmd("SET k0 x") else {
            panic!("a backup took a write");
        };
        let refusal = String::from_utf8_lossy(&refusal).into_owned();
        assert!(refusal.starts_with("READONLY"), "{refusal}");
        assert!(refusal.contains(&group.nodes[0].1.to_string()), "{refusal}");
    }
    for id in 1..=3 {
        assert!(
            group.threads(id) <= 6,
            "node {id}: {} threads",
            group.threads(id)
        );
    }
    group.kill(3);
    let writer = {
        let mut conn = group.conn(1);
        thread::spawn(move || conn.cmd("SET during outage"))
    };
    thread::sleep(Duration::from_millis(300));
    assert!(
        !writer.is_finished(),
        "a 2-safe write was acknowledged without backup 3"
    );
    group.spawn(3);
    let written = writer.join().expect("the writer");
    assert_eq!(written, Resp::Simple(b"OK".to_vec()), "{}", group.logs());
    let mut backup = group.conn(3);
    assert_eq!(
        backup.cmd("GET during"),
        Resp::Bulk(b"outage".to_vec()),
        "{}",
        group.logs()
    );
    assert_eq!(backup.cmd("DBSIZE"), Resp::Integer(101), "{}", group.logs());
    let mut role = group.conn(1);
    let Resp::Array(role) = role.cmd("ROLE") else {
        panic!("ROLE answers an array");
    };
    assert_eq!(role[0], Resp::Bulk(b"master".to_vec()), "{}", group.logs());
}
