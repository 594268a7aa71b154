//! The local cluster's commands as a user runs them: `kill` signals only a pid that still is
//! the node, `status` says why a node is down and fails when none answers, `start` brings a
//! killed node back into the cluster, and `down` stops every node (and so ends `up`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tandem_workloads::debit_credit::DEBIT_CREDIT;

mod up_support;

use up_support::deposit;

fn tandem(dir: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .arg("--dir")
        .arg(dir)
        .output()
        .expect("tandem runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh directory for one test.
fn test_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A loopback address nothing listens on (bound, then released).
fn closed_address() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().to_string()
}

/// Writes a `cluster.json` that names `pids` as nodes 1, 2, … of a cluster in `dir`.
fn write_cluster_file(dir: &Path, pids: &[u32]) {
    let nodes: Vec<Value> = pids
        .iter()
        .enumerate()
        .map(|(index, pid)| {
            let node_dir = dir.join(format!("node{}", index + 1));
            json!({
                "id": index + 1,
                "listen": closed_address(),
                "status": closed_address(),
                "pid": pid,
                "config": node_dir.join("node.toml"),
                "log": node_dir.join("node.log"),
            })
        })
        .collect();
    let file = json!({ "nodes": nodes });
    std::fs::write(dir.join("cluster.json"), file.to_string()).unwrap();
}

/// The pid of a process that has ended (and was reaped).
fn ended_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("true runs");
    let pid = child.id();
    child.wait().unwrap();
    pid
}

#[test]
fn kill_refuses_a_pid_that_is_not_the_node_and_leaves_it_alone() {
    let dir = test_dir("kill-other");
    let mut sleeper = Command::new("sleep").arg("30").spawn().expect("sleep runs");
    write_cluster_file(&dir, &[sleeper.id()]);
    let output = tandem(&dir, &["kill", "1"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("another program") && stderr.contains("sleep 30"),
        "says what holds the pid: {stderr}"
    );
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "the sleep process was signalled"
    );
    // `down` leaves it alone too.
    let output = tandem(&dir, &["down"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        sleeper.try_wait().unwrap().is_none(),
        "down signalled sleep"
    );
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn status_with_every_node_down_says_why_in_words_and_exits_1() {
    let dir = test_dir("status-down");
    let pids = [ended_pid(), ended_pid()];
    write_cluster_file(&dir, &pids);
    let output = tandem(&dir, &["status"]);
    let stdout = text(&output.stdout);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stdout}{stderr}");
    for pid in pids {
        assert!(
            stdout.contains(&format!("not running (process {pid} is gone)")),
            "{stdout}"
        );
    }
    assert!(stderr.contains("no node"), "{stderr}");
    for raw in ["ESRCH", "os error", "errno"] {
        assert!(
            !stdout.contains(raw) && !stderr.contains(raw),
            "{stdout}{stderr}"
        );
    }
    let output = tandem(&dir, &["status", "--json"]);
    assert_eq!(output.status.code(), Some(1));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(
        report["nodes"][0]["down"],
        format!("not running (process {} is gone)", pids[0])
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn start_and_kill_name_the_nodes_when_given_an_unknown_one() {
    let dir = test_dir("unknown-node");
    write_cluster_file(&dir, &[ended_pid()]);
    for command in ["start", "kill"] {
        let output = tandem(&dir, &[command, "7"]);
        let stderr = text(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{command}: {stderr}");
        assert!(
            stderr.contains("NODE 7") && stderr.contains("nodes are 1"),
            "{stderr}"
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// Node `id`'s role as `tandem status --json` reports it, if it answers.
fn role(dir: &Path, id: u64) -> Option<String> {
    let output = tandem(dir, &["status", "--json"]);
    let report: Value = serde_json::from_slice(&output.stdout).ok()?;
    let node = report["nodes"]
        .as_array()?
        .iter()
        .find(|node| node["node"] == id)?;
    node["role"].as_str().map(str::to_string)
}

/// Waits for `done`, at most `within` (a deadline against a hang, not a measured threshold).
fn eventually(within: Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if done() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

#[test]
fn a_killed_node_started_again_rejoins_and_down_stops_every_node() {
    // `up` lists the nodes once the cluster has settled.
    let mut up = up_support::Up::start("start-down");
    let dir = up.dir.clone();
    let output = tandem(&dir, &["kill", "2"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = tandem(&dir, &["status"]);
    assert!(output.status.success(), "two nodes still answer");
    assert!(
        text(&output.stdout).contains("not running (process"),
        "{}",
        text(&output.stdout)
    );

    let output = tandem(&dir, &["start", "2"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        eventually(Duration::from_secs(30), || {
            matches!(role(&dir, 2).as_deref(), Some("backup" | "spare"))
        }),
        "node 2 did not rejoin: {:?}",
        role(&dir, 2)
    );
    let output = tandem(&dir, &["start", "2"]);
    assert_eq!(output.status.code(), Some(1));
    assert!(
        text(&output.stderr).contains("still running"),
        "{}",
        text(&output.stderr)
    );

    let output = tandem(&dir, &["down"]);
    let stdout = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    for id in 1..=3 {
        assert!(stdout.contains(&format!("stopped node {id}")), "{stdout}");
    }
    let output = tandem(&dir, &["status"]);
    assert_eq!(output.status.code(), Some(1), "a node still answers");
    // With every node stopped, `up` has nothing left to supervise and ends.
    assert!(
        eventually(Duration::from_secs(10), || up
            .child
            .try_wait()
            .unwrap()
            .is_some()),
        "tandem up still runs"
    );
}

/// What a committed call answered: the account's balance.
fn balance(outcome: &tandem_client::Outcome) -> i32 {
    assert!(outcome.committed(), "{outcome:?}");
    i32::from_le_bytes(outcome.body[..4].try_into().unwrap())
}

fn client(up: &up_support::Up, id: u64) -> tandem_client::Client {
    let mut config = tandem_client::ClientConfig::new(up.clients_at.clone(), 0, id);
    config.deadline = Duration::from_secs(30);
    tandem_client::Client::new(config).expect("a valid config")
}

/// Ctrl-C stops every node of `tandem up`; `tandem up` on the same directory brings the same
/// cluster back from its nodes' logs, with every commit acknowledged before the stop, and
/// goes on from there. `--fresh` starts a new, empty one instead.
#[test]
fn up_again_restarts_the_cluster_from_disk_and_fresh_starts_anew() {
    let mut up = up_support::Up::start("restart");
    let dir = up.dir.clone();
    let account = 11u32;
    let mut writer = client(&up, 1);
    let mut acknowledged = 0;
    for _ in 0..50 {
        let outcome = writer
            .call(DEBIT_CREDIT.0, &deposit(account, 2), None)
            .expect("the deposit commits");
        acknowledged = balance(&outcome);
    }
    assert_eq!(acknowledged, 100);
    up.stop();
    assert_eq!(
        tandem(&dir, &["status"]).status.code(),
        Some(1),
        "a node still runs"
    );

    let mut up = up_support::Up::start_in(dir.clone());
    let mut reader = client(&up, 2);
    let outcome = reader
        .call(DEBIT_CREDIT.0, &deposit(account, 0), None)
        .expect("the cluster serves after its restart");
    assert_eq!(
        balance(&outcome),
        acknowledged,
        "commits lost across the restart"
    );
    let outcome = reader
        .call(DEBIT_CREDIT.0, &deposit(account, 5), None)
        .expect("the restarted cluster takes commits");
    assert_eq!(balance(&outcome), acknowledged + 5);
    let logs: String = (1..=3)
        .filter_map(|node| std::fs::read_to_string(dir.join(format!("node{node}/node.log"))).ok())
        .collect();
    assert!(
        logs.contains("rebuilt from its log"),
        "no node was promoted from its log:\n{logs}"
    );
    up.stop();

    // `--fresh` deletes the cluster and starts an empty one.
    let mut up = up_support::Up::start_with(dir.clone(), &["--fresh"]);
    let mut reader = client(&up, 3);
    let outcome = reader
        .call(DEBIT_CREDIT.0, &deposit(account, 0), None)
        .expect("the fresh cluster serves");
    assert_eq!(balance(&outcome), 0, "--fresh kept the old data");
    up.stop();
}
