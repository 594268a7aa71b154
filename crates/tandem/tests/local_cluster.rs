//! The local cluster's commands as a user runs them: `kill` signals only a pid that still is
//! the node, `status` says why a node is down and fails when none answers, `start` brings a
//! killed node back into the cluster, and `down` stops every node (and so ends `up`).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tandem_workloads::debit_credit::DEBIT_CREDIT;

use crate::up_support;

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

    // A port of the cluster taken by another program: `up` says so first, in the node's
    // own words, and how to come back with the data (not --fresh); not the older starts'
    // lines of the node's log.
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap();
    let taken = file["nodes"][1]["listen"].as_str().unwrap().to_owned();
    let squatter = std::net::TcpListener::bind(&taken).expect("the port is free again");
    let output = tandem(&dir, &["up"]);
    let stderr = text(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    let first = stderr
        .lines()
        .find(|line| line.starts_with("error: "))
        .expect("an error line");
    assert!(
        first.starts_with("error: node 2 could not start: listen: cannot bind")
            && first.contains(&taken)
            && first.contains("in use"),
        "{stderr}"
    );
    assert!(stderr.contains("stop the other program"), "{stderr}");
    assert!(
        stderr.contains(&format!("tandem up --dir {}", dir.display())),
        "{stderr}"
    );
    assert!(
        !stderr.contains("serving group"),
        "earlier starts' lines: {stderr}"
    );
    drop(squatter);

    let mut up = up_support::Up::start_in(dir.clone());
    let mut reader = client(&up, 2);
    let outcome = reader
        .call(DEBIT_CREDIT.0, &deposit(account, 0), None)
        .expect("the cluster serves after its restart");
    let node_logs = || -> String {
        (1..=3)
            .filter_map(|node| {
                let log = std::fs::read_to_string(dir.join(format!("node{node}/node.log")));
                log.ok().map(|log| format!("--- node {node} ---\n{log}"))
            })
            .collect()
    };
    assert_eq!(
        balance(&outcome),
        acknowledged,
        "commits lost across the restart:\n{}",
        node_logs()
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

/// A stub client of `group` (client id `id`) of `up`'s cluster.
fn group_client(up: &up_support::Up, group: u32, id: u64) -> tandem_client::Client {
    let mut config = tandem_client::ClientConfig::new(up.clients_at.clone(), group, id);
    config.deadline = Duration::from_secs(30);
    tandem_client::Client::new(config).expect("a valid config")
}

/// `tandem up --groups 3`: each node leads one group and backs up the other two, and each
/// group is a database of its own (the same account holds what was deposited in its group
/// alone). A killed node's group fails over while the other two serve on, `status` lists
/// each group's members, and `up` again brings every group back from its own log.
#[test]
fn groups_are_databases_of_their_own_and_fail_over_and_restart_apart() {
    let dir = std::env::temp_dir().join(format!("tandem-groups-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let mut up = up_support::Up::start_with(dir.clone(), &["--groups", "3"]);
    let account = 11u32;
    // Group g holds 10·g after its deposits, whatever the other groups hold.
    let deposit_in = |group: u32, client: &mut tandem_client::Client, times: i32| {
        let mut last = 0;
        for _ in 0..times {
            let outcome = client
                .call(DEBIT_CREDIT.0, &deposit(account, group as i32), None)
                .unwrap_or_else(|err| panic!("a deposit in group {group}: {err}"));
            last = balance(&outcome);
        }
        last
    };
    for group in 1..=3 {
        let mut writer = group_client(&up, group, u64::from(group));
        assert_eq!(deposit_in(group, &mut writer, 10), 10 * group as i32);
    }
    let output = tandem(&dir, &["status"]);
    let table = text(&output.stdout);
    assert!(output.status.success(), "{}", text(&output.stderr));
    for group in 1..=3 {
        // Node g leads group g; the other two back it up.
        let rows: Vec<&str> = table
            .lines()
            .filter(|line| line.split_whitespace().next() == Some(&group.to_string()))
            .collect();
        assert_eq!(rows.len(), 3, "{table}");
        let primaries: Vec<&&str> = rows.iter().filter(|r| r.contains("primary")).collect();
        assert_eq!(primaries.len(), 1, "{table}");
        assert_eq!(
            primaries[0].split_whitespace().nth(1),
            Some(&*group.to_string()),
            "{table}"
        );
    }

    // Node 1 leads group 1: its death fails group 1 over; groups 2 and 3 lose a backup.
    let output = tandem(&dir, &["kill", "1"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let announced = up.line_where(Duration::from_secs(60), |line| {
        line.starts_with("group 1: node ") && line.contains(" is primary now, of view 2 (node 1")
    });
    assert!(announced.is_some(), "up did not say who leads group 1 now");
    for group in [2, 3, 1] {
        let mut writer = group_client(&up, group, 10 + u64::from(group));
        assert_eq!(
            deposit_in(group, &mut writer, 1),
            11 * group as i32,
            "group {group} after node 1's death"
        );
    }
    up.stop();

    let mut up = up_support::Up::start_in(dir.clone());
    for group in 1..=3 {
        let mut reader = group_client(&up, group, 20 + u64::from(group));
        assert_eq!(
            deposit_in(group, &mut reader, 1),
            12 * group as i32,
            "group {group} after the restart"
        );
    }
    // A client of a group the cluster does not hold is told so.
    let mut config = tandem_client::ClientConfig::new(up.clients_at.clone(), 9, 30);
    config.deadline = Duration::from_secs(3);
    let mut stranger = tandem_client::Client::new(config).expect("a valid config");
    let refused = stranger.call(DEBIT_CREDIT.0, &deposit(account, 1), None);
    assert!(refused.is_err(), "{refused:?}");
    up.stop();
    let _ = std::fs::remove_dir_all(&dir);
}

/// The password the private-cluster test gives in a file.
const PASSWORD: &str = "correct-horse-battery-7";

/// `/proc/PID/<what>` of a process, empty if it cannot be read.
fn proc_file(pid: u32, what: &str) -> Vec<u8> {
    std::fs::read(format!("/proc/{pid}/{what}")).unwrap_or_default()
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// Paths with their permission bits.
type Modes = Vec<(PathBuf, u32)>;

/// Every directory under `root` (itself included) and every file, with its permission bits.
fn modes_under(root: &Path) -> (Modes, Modes) {
    use std::os::unix::fs::PermissionsExt;
    let (mut dirs, mut files) = (Vec::new(), Vec::new());
    let mut pending = vec![root.to_path_buf()];
    while let Some(dir) = pending.pop() {
        let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
        dirs.push((dir.clone(), mode));
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let metadata = std::fs::symlink_metadata(&path).unwrap();
            if metadata.is_dir() {
                pending.push(path);
            } else {
                files.push((path, metadata.permissions().mode() & 0o777));
            }
        }
    }
    (dirs, files)
}

/// GET `path` with `authorization` (a whole header line, or nothing): the status code, the
/// body.
fn http_get(address: &str, path: &str, authorization: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\n{authorization}\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let (head, body) = response.split_once("\r\n\r\n").expect("a response");
    let code = head.split(' ').nth(1).unwrap().parse().unwrap();
    (code, body.to_owned())
}

/// The value of `tandem_auth_failures_total` for `port` in a node's `/metrics`.
fn auth_failures(http: &str, port: &str) -> u64 {
    let (code, metrics) = http_get(http, "/metrics", "");
    assert_eq!(code, 200);
    let wanted = format!("port=\"{port}\"}} ");
    metrics
        .lines()
        .filter(|line| line.starts_with("tandem_auth_failures_total{"))
        .find_map(|line| Some(line.split(&wanted).nth(1)?.parse().unwrap()))
        .unwrap_or_else(|| panic!("no auth failures of {port} in:\n{metrics}"))
}

/// A cluster started with `--requirepass-file` under a umask of 000 and with its HTTP
/// endpoints on every interface: the password is in no command line and no node's
/// environment (not even the `TANDEM_REQUIREPASS` `up` had, which the file overrides), every
/// directory is 0700 and every file 0600, `/checksum` asks for the password and counts a
/// wrong one, a stub's wrong password is counted too, `status` shows each node's pid and
/// native address, and after a failover `up` says which node is primary now.
#[test]
fn a_password_file_reaches_no_command_line_and_the_cluster_is_private() {
    let base = test_dir("private");
    let password_file = base.join("password");
    std::fs::write(&password_file, format!("{PASSWORD}\n")).unwrap();
    let dir = base.join("cluster");
    // A directory open to others before `up` is tightened.
    std::fs::create_dir_all(&dir).unwrap();
    let up = up_support::Up::start_set(
        dir.clone(),
        &[
            "--requirepass-file",
            password_file.to_str().unwrap(),
            "--http-ip",
            "0.0.0.0",
        ],
        &up_support::Setting {
            env: &[("TANDEM_REQUIREPASS", "a-decoy-password")],
            umask: Some(0),
        },
    );
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap()).unwrap();
    let nodes = file["nodes"].as_array().unwrap().clone();
    let pid = |node: &Value| node["pid"].as_u64().unwrap() as u32;
    for holder in nodes.iter().map(pid).chain([up.child.id()]) {
        let cmdline = proc_file(holder, "cmdline");
        assert!(!cmdline.is_empty(), "pid {holder} runs");
        assert!(!contains(&cmdline, PASSWORD), "pid {holder}'s command line");
    }
    for node in &nodes {
        let environ = proc_file(pid(node), "environ");
        assert!(!environ.is_empty(), "{node}");
        assert!(!contains(&environ, "TANDEM_REQUIREPASS"), "{node}");
    }

    let (dirs, files) = modes_under(&dir);
    // The cluster's own, and each node's with its `log` and `raft`.
    assert!(dirs.len() > 3 * 3, "{dirs:?}");
    for (path, mode) in dirs {
        assert_eq!(mode, 0o700, "{}", path.display());
    }
    for name in ["cluster.json", "node1/node.toml", "node1/node.log"] {
        assert!(files.iter().any(|(path, _)| path.ends_with(name)), "{name}");
    }
    for (path, mode) in files {
        assert_eq!(mode, 0o600, "{}", path.display());
    }

    // Reached here through loopback, but bound to every interface: /checksum asks.
    let port = |node: &Value| {
        let address: std::net::SocketAddr = node["status"].as_str().unwrap().parse().unwrap();
        assert!(address.ip().is_unspecified(), "{address}");
        format!("127.0.0.1:{}", address.port())
    };
    let http = port(&nodes[0]);
    let (code, body) = http_get(&http, "/checksum", "");
    assert_eq!(code, 401, "{body}");
    assert!(body.contains("Authorization: Bearer"), "{body}");
    for wrong in ["a-decoy-password", "guess"] {
        let (code, _) = http_get(
            &http,
            "/checksum",
            &format!("Authorization: Bearer {wrong}\r\n"),
        );
        assert_eq!(code, 401, "{wrong}");
    }
    assert_eq!(auth_failures(&http, "http"), 2);
    let bearer = format!("Authorization: Bearer {PASSWORD}\r\n");
    let (code, body) = http_get(&http, "/checksum", &bearer);
    assert_eq!(code, 200, "{body}");
    let report: Value = serde_json::from_str(&body).unwrap();
    assert!(report["report"]["checksum"]["crc32c"].is_u64(), "{report}");
    assert_eq!(http_get(&http, "/status", "").0, 200);

    // A stub with a wrong password is refused, and counted where it called.
    let mut config = tandem_client::ClientConfig::new(up.clients_at.clone(), 0, 9);
    config.deadline = Duration::from_secs(10);
    config.credentials = Some(tandem_client::Credentials {
        user: "default".into(),
        password: b"guess".to_vec(),
    });
    let mut stranger = tandem_client::Client::new(config).unwrap();
    assert!(stranger.call(DEBIT_CREDIT.0, &deposit(3, 1), None).is_err());
    let native: u64 = nodes
        .iter()
        .map(|node| auth_failures(&port(node), "native"))
        .sum();
    assert!(native >= 1, "no native failure counted");

    // `status` names each node's pid and native address, as `tandem proxy` needs them.
    let output = tandem(&dir, &["status", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let report: Value = serde_json::from_slice(&output.stdout).unwrap();
    let table = text(&tandem(&dir, &["status"]).stdout);
    assert!(table.lines().next().unwrap().contains("native"), "{table}");
    for node in &nodes {
        let row = report["nodes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["node"] == node["id"])
            .unwrap();
        assert_eq!(row["pid"], node["pid"], "{row}");
        assert_eq!(row["native"], node["listen"], "{row}");
        let listen = node["listen"].as_str().unwrap();
        let pid = node["pid"].to_string();
        assert!(
            table
                .lines()
                .any(|line| line.contains(listen) && line.contains(&pid)),
            "{table}"
        );
    }

    // After a failover `up` says which node is primary now.
    let primary = (1..=3)
        .find(|id| role(&dir, *id).as_deref() == Some("primary"))
        .expect("a primary");
    let output = tandem(&dir, &["kill", &primary.to_string()]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let line = up
        .line_where(Duration::from_secs(60), |line| {
            line.contains("is primary now")
        })
        .expect("up says who is primary after the failover");
    assert!(!line.starts_with(&format!("node {primary} ")), "{line}");
    assert!(line.contains("stub clients at"), "{line}");
    drop(up);
    let _ = std::fs::remove_dir_all(&base);
}
