//! `tandem demo --client redis` end to end, with real processes: three `tandem node`
//! processes serving the Redis model, two `tandem proxy` processes in front of them, and four
//! redis-py processes running `INCR`s and a Lua transfer through the proxies while the
//! primary is killed (SIGKILL), paused (SIGSTOP for 300 ms, thirty times the failure
//! detector's 10 ms, then SIGCONT), or cut off the network for 300 ms (every packet it sends
//! dropped, by iptables: the sockets it holds by port, those it opens by its cgroup; a machine
//! without root or cgroup v2 fails the test, saying so). Every fault must keep
//! the proxy's promises: nothing lost, nothing duplicated, no error seen by an application,
//! every reply following its client's count, identical and consistent replicas. These tests
//! read the demo's JSON report and never look at the gap's length (`tandem bench failover`
//! measures that).
//!
//! The checker is shown to have teeth without a failover: a client that sends one `INCR`
//! twice and counts it once must be reported as one duplicate.
//!
//! Where no Python can `import redis`, each test runs `.ci/setup` (which makes
//! `target/pyenv`), and fails saying so if none can still.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

// Only `demo_command` of the shared failover helpers applies here.
use crate::common;
use crate::redis_support;

/// A Python that can `import redis`, as `tandem demo --client redis` looks for one (the
/// virtualenv, else `python3`; `.ci/setup` makes the virtualenv if neither can), or the test
/// fails saying why there is none.
fn python() -> PathBuf {
    python_found()
        .or_else(|_| {
            redis_support::set_up_tools();
            python_found()
        })
        .unwrap_or_else(|why| panic!("{why}"))
}

/// A Python that can `import redis`, if there is one.
fn python_found() -> Result<PathBuf, String> {
    let mut candidates = Vec::new();
    if let Some(root) = std::env::var_os("TANDEM_PYENV") {
        candidates.push(PathBuf::from(root).join("bin/python"));
    }
    candidates.push(redis_support::workspace_root().join("target/pyenv/bin/python"));
    candidates.push(PathBuf::from("python3"));
    candidates
        .into_iter()
        .find(|python| {
            Command::new(python)
                .args(["-c", "import redis"])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|status| status.success())
        })
        .ok_or_else(|| {
            "no Python here can `import redis` (.ci/setup makes the virtualenv target/pyenv)"
                .to_string()
        })
}

/// A demo's JSON report, and what a failed assertion shows beside it: the demo's stderr
/// (warnings: `--json` keeps its progress lines quiet) and the end of each node's log.
struct Demo {
    report: Value,
    context: String,
}

impl std::fmt::Display for Demo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}\n{}", self.report, self.context)
    }
}

/// `tandem demo --client redis --fault FAULT --json` on a small cluster; its report.
fn demo(fault: &str) -> Demo {
    try_demo(fault).unwrap_or_else(|why| panic!("--fault {fault}: {why}"))
}

/// The promises of the proxy under every fault.
fn assert_exactly_once_without_errors(demo: &Demo) {
    let report = &demo.report;
    assert_eq!(report["lost"], 0, "{demo}");
    assert_eq!(report["duplicates"], 0, "{demo}");
    assert_eq!(report["reply_mismatches"], 0, "{demo}");
    assert_eq!(report["client_errors"], 0, "{demo}");
    assert_eq!(report["consistent"], true, "{demo}");
    let acknowledged = report["acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 0, "{demo}");
    assert_eq!(report["found"].as_u64(), Some(acknowledged), "{demo}");
    let redis = &report["redis"];
    assert_eq!(redis["proxies"], 2, "{demo}");
    // Both kinds of operation ran.
    assert!(redis["incr_acknowledged"].as_u64() > Some(0), "{demo}");
    assert!(redis["transfers_acknowledged"].as_u64() > Some(0), "{demo}");
    // The fault moved the primary: a view change, and clients acknowledged after it.
    assert!(
        report["view_after"].as_u64() > report["view_before"].as_u64(),
        "{demo}"
    );
    assert!(report["first_new_ms"].as_f64().is_some(), "{demo}");
}

/// The faults one after another: each demo runs three debug-build nodes, two proxies and four
/// Python processes, and the suite's other tests share the machine's two cores.
#[test]
fn redis_clients_through_proxies_see_no_error_and_lose_nothing_when_the_primary_fails() {
    python();
    // The cut-off primary's packets are dropped with iptables.
    redis_support::require("iptables");
    let killed = demo("kill-primary");
    assert_exactly_once_without_errors(&killed);
    let report = &killed.report;
    assert_ne!(report["new_primary"], report["killed"], "{killed}");

    assert_exactly_once_without_errors(&demo("pause-primary"));
    assert_exactly_once_without_errors(&demo("isolate-primary"));
}

/// [`demo`] for a fault this machine may not be able to inject: the demo's refusal (exit
/// code 2, "cannot run here") as an error.
fn try_demo(fault: &str) -> Result<Demo, String> {
    let dir =
        std::env::temp_dir().join(format!("tandem-demo-redis-{fault}-{}", std::process::id()));
    let output = common::demo_command(&dir, "1.5")
        .args(["--client", "redis", "--proxies", "2", "--fault", fault])
        .output()
        .expect("tandem runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(2) && stderr.contains("cannot run here") {
        return Err(stderr.trim().to_owned());
    }
    let stdout = String::from_utf8_lossy(&output.stdout);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    let mut context = format!("the demo's stderr:\n{stderr}");
    for node in 1..=3 {
        let log = std::fs::read_to_string(dir.join(format!("node{node}/node.log")));
        let log = log.unwrap_or_default();
        let lines: Vec<&str> = log.lines().collect();
        let tail = lines[lines.len().saturating_sub(LOG_LINES_SHOWN)..].join("\n");
        context += &format!("the end of node {node}'s log:\n{tail}\n");
    }
    let demo = Demo { report, context };
    assert!(
        output.status.success(),
        "tandem demo --client redis --fault {fault} failed: {demo}"
    );
    let _ = std::fs::remove_dir_all(&dir);
    Ok(demo)
}

/// How many of its last lines a node's log shows beside a failed assertion.
const LOG_LINES_SHOWN: usize = 20;

/// Runs the workload's `client` for `ops` operations against `address`, then its `check`;
/// the check's report.
fn client_then_check(python: &Path, address: &str, id: u32, plant: bool) -> Value {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/demo/demo_redis.py");
    let dir = redis_support::scratch_dir(&format!("demo-redis-plant-{id}"));
    let record = dir.join("client.json");
    let mut client = Command::new(python);
    client
        .arg(&script)
        .arg("client")
        .args([
            "--id",
            &id.to_string(),
            "--addresses",
            address,
            "--ops",
            "200",
        ])
        .arg("--out")
        .arg(&record)
        .stdin(Stdio::null());
    if plant {
        client.arg("--plant-double-incr");
    }
    let output = client.output().expect("python runs");
    assert!(
        output.status.success(),
        "the client failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let output = Command::new(python)
        .arg(&script)
        .args(["check", "--addresses", address, "--records"])
        .arg(&record)
        .stdin(Stdio::null())
        .output()
        .expect("python runs");
    assert!(
        output.status.success(),
        "the check failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let _ = std::fs::remove_dir_all(&dir);
    serde_json::from_slice(&output.stdout).expect("the check prints JSON")
}

#[test]
fn the_checker_reports_an_incr_sent_twice_as_a_duplicate() {
    let python = python();
    // One node is enough: the bug is the client's, and no failover is needed to show it.
    let cluster = redis_support::Cluster::start("demo-redis-plant", 1, 8);
    let address = cluster.primary_resp().to_string();
    let honest = client_then_check(&python, &address, 1, false);
    assert_eq!(honest["duplicates"], 0, "{honest}");
    assert_eq!(honest["lost"], 0, "{honest}");
    assert_eq!(honest["reply_mismatches"], 0, "{honest}");
    assert_eq!(honest["findings"], Value::Array(Vec::new()), "{honest}");
    assert_eq!(honest["acknowledged"], 200, "{honest}");
    let planted = client_then_check(&python, &address, 2, true);
    assert_eq!(planted["duplicates"], 1, "{planted}");
    assert_eq!(planted["lost"], 0, "{planted}");
    // Its owner saw the counter skip a number, too.
    assert_eq!(planted["reply_mismatches"], 1, "{planted}");
}

#[test]
fn redis_flags_are_refused_with_exit_code_2_before_anything_starts() {
    let dir = std::env::temp_dir().join(format!("tandem-demo-redis-bad-{}", std::process::id()));
    let refused = |args: &[&str]| {
        let output = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .arg("demo")
            .args(args)
            .arg("--dir")
            .arg(&dir)
            .output()
            .expect("tandem runs");
        assert_eq!(output.status.code(), Some(2), "{args:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let stderr = refused(&["--proxies", "2"]);
    assert!(stderr.contains("add --client redis"), "{stderr}");
    let stderr = refused(&["--client", "memcached"]);
    assert!(
        stderr.contains("stub") && stderr.contains("redis"),
        "{stderr}"
    );
    let stderr = refused(&["--client", "redis", "--proxies", "17"]);
    assert!(stderr.contains("--proxies"), "{stderr}");
    assert!(!dir.exists(), "nothing started");
}
