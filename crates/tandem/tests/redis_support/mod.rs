//! What the Redis tests share: a local tandem cluster serving the Redis model (`tandem up`),
//! a throwaway `redis-server`, a small blocking RESP client, and the lookups of the tools the
//! tests need: a missing one is installed by `.ci/setup` (run once per test process), and a
//! test whose tool cannot be had fails saying which; none skips.

// Each test binary that includes this module uses only part of it.
#![allow(dead_code)]

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use tandem_redis::resp::{Value, parse_reply};

/// How long a reply may take before the client gives up: far above any real reply, so that a
/// server that never answers fails the test with a message instead of hanging it.
const REPLY_WAIT_MAX: Duration = Duration::from_secs(60);

/// Runs `.ci/setup` once in this test process: it installs what the multi-process tests need
/// and lack (iptables, redis-server, redis-tools, the Python virtualenv with redis-py) where it
/// can (root, apt-get and a network), and says what it could not.
pub fn set_up_tools() {
    static SETUP: std::sync::Once = std::sync::Once::new();
    SETUP.call_once(|| {
        let setup = workspace_root().join(".ci/setup");
        eprintln!(
            "a tool the tests need is missing: running {}",
            setup.display()
        );
        match Command::new(&setup).status() {
            Ok(status) if status.success() => {}
            Ok(status) => eprintln!("{} ended with {status}", setup.display()),
            Err(err) => eprintln!("{} cannot run: {err}", setup.display()),
        }
    });
}

/// The executable `name` on `PATH`, if it is there.
fn on_path(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// The executable `name`: on `PATH`, or on it once `.ci/setup` installed it; or why not.
pub fn tool(name: &str) -> Result<PathBuf, String> {
    if let Some(path) = on_path(name) {
        return Ok(path);
    }
    set_up_tools();
    on_path(name).ok_or_else(|| {
        format!(
            "`{name}` is not on PATH, and .ci/setup could not install it (it needs root, \
             apt-get and a network): install it and run the tests again"
        )
    })
}

/// [`tool`], or the test fails saying what is missing.
pub fn require(name: &str) -> PathBuf {
    tool(name).unwrap_or_else(|why| panic!("{why}"))
}

/// A `redis-server` of the test's own, or the test fails saying why there is none.
pub fn require_redis_server() -> RedisServer {
    RedisServer::start().unwrap_or_else(|why| panic!("no redis-server to compare with: {why}"))
}

/// The workspace's root: `target/pyenv` and `.ci/` are found from here.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A directory of the test's own under the system's temporary directory, emptied first.
pub fn scratch_dir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("a scratch directory");
    dir
}

/// A loopback port nothing listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

/// Waits until something accepts connections at `address`; `false` if it never did.
fn wait_listening(address: SocketAddr, child: &mut Child, within: Duration) -> bool {
    let started = Instant::now();
    while started.elapsed() < within {
        if TcpStream::connect(address).is_ok() {
            return true;
        }
        if matches!(child.try_wait(), Ok(Some(_))) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// A `redis-server` of this test's own on a free port, with no persistence (nothing is
/// written to disk), killed when dropped.
pub struct RedisServer {
    child: Child,
    pub address: SocketAddr,
    pub version: String,
    dir: PathBuf,
}

impl RedisServer {
    /// Starts one, or says why it cannot be started here.
    pub fn start() -> Result<RedisServer, String> {
        RedisServer::start_with(&[])
    }

    /// [`RedisServer::start`] with `extra` arguments (`--requirepass`, say).
    pub fn start_with(extra: &[&str]) -> Result<RedisServer, String> {
        RedisServer::launch(extra, None)
    }

    /// A server that starts from the RDB file `rdb` (copied into its directory as
    /// `dump.rdb`, which it loads as it starts).
    pub fn start_loading(rdb: &Path) -> Result<RedisServer, String> {
        RedisServer::launch(&[], Some(rdb))
    }

    /// Where the server keeps its files (`SAVE` writes `dump.rdb` here).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn launch(extra: &[&str], rdb: Option<&Path>) -> Result<RedisServer, String> {
        let exe = tool("redis-server")?;
        let version = Command::new(&exe)
            .arg("--version")
            .output()
            .map(|output| String::from_utf8_lossy(&output.stdout).trim().to_string())
            .map_err(|err| format!("redis-server --version: {err}"))?;
        let port = free_port();
        let dir = scratch_dir(&format!("redis-server-{port}"));
        if let Some(rdb) = rdb {
            std::fs::copy(rdb, dir.join("dump.rdb"))
                .map_err(|err| format!("{}: {err}", rdb.display()))?;
        }
        let log = std::fs::File::create(dir.join("redis.log"))
            .map_err(|err| format!("redis.log: {err}"))?;
        let mut child = Command::new(&exe)
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(Stdio::null())
            .spawn()
            .map_err(|err| format!("redis-server cannot start: {err}"))?;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        if !wait_listening(address, &mut child, Duration::from_secs(30)) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("redis-server did not listen on {address}"));
        }
        Ok(RedisServer {
            child,
            address,
            version,
            dir,
        })
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // A failed test leaves the server's log behind.
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The silence (ticks of 1 ms) after which a node of a test cluster suspects a peer, and the
/// primary's lease: these tests check what clients see of the data model, not failover. On a
/// machine busy with other builds the defaults (10 and 4) suspect falsely now and then, which
/// would move the primary under a client that cannot follow it (a plain Redis client gets
/// READONLY), and let the lease lapse between two late heartbeat echoes, which holds back
/// the reply of a read or of a write that changed nothing.
const SUSPECT_TICKS: &str = "2000";
const LEASE_TICKS: &str = "1000";

/// One node of a [`Cluster`], as its `cluster.json` lists it.
#[derive(Clone, Debug)]
pub struct ClusterNode {
    pub id: u64,
    pub resp: SocketAddr,
    pub status: SocketAddr,
    pub log: PathBuf,
}

/// A local cluster serving the Redis model: `tandem up` with a RESP port on every node. The
/// nodes read their stdin until `tandem up` ends, so killing it when dropped ends them too.
pub struct Cluster {
    up: Child,
    pub dir: PathBuf,
    pub nodes: Vec<ClusterNode>,
    /// The node that was primary when the cluster came up.
    pub primary: u64,
    /// Dropping it leaves its directory (a restart goes on from it).
    keep_dir: bool,
}

impl Cluster {
    /// Starts `nodes` nodes of `db_mib` MiB each and waits until the cluster serves. The
    /// binary is the one under test, so a failure here fails the test.
    pub fn start(name: &str, nodes: u32, db_mib: u32) -> Cluster {
        Cluster::start_with(name, nodes, db_mib, &[])
    }

    /// [`Cluster::start`] with `extra` arguments to `tandem up` (`--requirepass`, say).
    pub fn start_with(name: &str, nodes: u32, db_mib: u32, extra: &[&str]) -> Cluster {
        Cluster::launch(scratch_dir(name), nodes, db_mib, extra)
    }

    /// Stops every node (as a power cut would: `tandem up` killed, its nodes end with it)
    /// and runs `tandem up` again in the same directory: the cluster comes back from its
    /// nodes' disks.
    pub fn restart(mut self, nodes: u32, db_mib: u32) -> Cluster {
        let _ = self.up.kill();
        let _ = self.up.wait();
        let dir = self.dir.clone();
        self.keep_dir = true;
        drop(self);
        let pids_gone = |dir: &Path| {
            let text = std::fs::read_to_string(dir.join("cluster.json")).unwrap_or_default();
            let file: Json = serde_json::from_str(&text).unwrap_or(Json::Null);
            file["nodes"].as_array().is_none_or(|nodes| {
                nodes.iter().all(|node| {
                    node["pid"]
                        .as_u64()
                        .is_none_or(|pid| !Path::new(&format!("/proc/{pid}")).exists())
                })
            })
        };
        let started = Instant::now();
        while !pids_gone(&dir) && started.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(20));
        }
        Cluster::launch(dir, nodes, db_mib, &[])
    }

    fn launch(dir: PathBuf, nodes: u32, db_mib: u32, extra: &[&str]) -> Cluster {
        // Into files, not pipes: `tandem up` prints as long as it runs, and a pipe nobody
        // reads would end it.
        let stdout = std::fs::File::create(dir.join("up.out")).expect("up.out");
        let stderr = std::fs::File::create(dir.join("up.log")).expect("up.log");
        let mut up = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["up", "--workload", "redis"])
            .args([
                "--suspect-ticks",
                SUSPECT_TICKS,
                "--lease-ticks",
                LEASE_TICKS,
            ])
            .args([
                "--nodes",
                &nodes.to_string(),
                "--db-mib",
                &db_mib.to_string(),
            ])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("tandem up runs");
        // `tandem up` prints "cluster up: node N is primary of view V, LSN L" once it serves
        // (of several groups, "cluster up: G groups" and "  group 1: node N is primary …"),
        // or exits with the reason (it gives up by itself if the cluster does not settle).
        let mut primary = None;
        while primary.is_none() && matches!(up.try_wait(), Ok(None)) {
            std::thread::sleep(Duration::from_millis(20));
            let text = std::fs::read_to_string(dir.join("up.out")).unwrap_or_default();
            primary = text
                .lines()
                .find_map(|line| {
                    let line = line.trim_start();
                    (line.strip_prefix("cluster up: node "))
                        .or_else(|| line.strip_prefix("group 1: node "))
                })
                .and_then(|rest| rest.split(' ').next()?.parse::<u64>().ok());
        }
        let Some(primary) = primary else {
            let _ = up.kill();
            let _ = up.wait();
            let log = std::fs::read_to_string(dir.join("up.log")).unwrap_or_default();
            panic!("tandem up did not bring the cluster up:\n{log}");
        };
        let text = std::fs::read_to_string(dir.join("cluster.json")).expect("cluster.json");
        let file: Json = serde_json::from_str(&text).expect("cluster.json is JSON");
        let address = |value: &Json| -> SocketAddr {
            value
                .as_str()
                .and_then(|text| text.parse().ok())
                .expect("an address")
        };
        let nodes = file["nodes"]
            .as_array()
            .expect("nodes")
            .iter()
            .map(|node| ClusterNode {
                id: node["id"].as_u64().expect("an id"),
                resp: address(&node["resp"]),
                status: address(&node["status"]),
                log: PathBuf::from(node["log"].as_str().expect("a log path")),
            })
            .collect();
        Cluster {
            up,
            dir,
            nodes,
            primary,
            keep_dir: false,
        }
    }

    /// Where the primary serves RESP.
    pub fn primary_resp(&self) -> SocketAddr {
        self.node(self.primary).resp
    }

    pub fn node(&self, id: u64) -> &ClusterNode {
        self.nodes
            .iter()
            .find(|node| node.id == id)
            .expect("a node of the cluster")
    }

    /// A node that is not the primary.
    pub fn a_backup(&self) -> &ClusterNode {
        self.nodes
            .iter()
            .find(|node| node.id != self.primary)
            .expect("a backup")
    }

    /// Every node's log, for a failure's message.
    pub fn logs(&self) -> String {
        self.nodes
            .iter()
            .map(|node| {
                let log = std::fs::read_to_string(&node.log).unwrap_or_default();
                format!("--- node {} ---\n{log}", node.id)
            })
            .collect()
    }

    /// Waits until every backup has applied everything the primary committed, then requires
    /// every replica to have the same checksum at the same LSN and to pass its consistency
    /// check. Returns that LSN.
    pub fn assert_replicas_identical(&self) -> u64 {
        let started = Instant::now();
        let mut last = String::new();
        // The deadline only turns a cluster that never settles into a failure with a reason.
        while started.elapsed() < Duration::from_secs(60) {
            match self.replicas_identical() {
                Ok(lsn) => return lsn,
                Err(Mismatch::NotYet(why)) => last = why,
                Err(Mismatch::Differ(why)) => panic!("replicas differ: {why}\n{}", self.logs()),
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("the replicas did not settle: {last}\n{}", self.logs());
    }

    fn replicas_identical(&self) -> Result<u64, Mismatch> {
        let not_yet = Mismatch::NotYet;
        let mut primary_lsn = None;
        let mut statuses = Vec::new();
        for node in &self.nodes {
            let status = http_get_json(node.status, "/status").map_err(not_yet)?;
            if status["cluster"]["role"] == "primary" {
                primary_lsn = status["report"]["status"]["lsn"].as_u64();
            }
            statuses.push((node, status));
        }
        let lsn = primary_lsn.ok_or_else(|| not_yet("no primary with an LSN".into()))?;
        for (node, status) in &statuses {
            let applied = status["report"]["status"]["lsn_applied"].as_u64();
            if status["cluster"]["role"] == "backup" && applied != Some(lsn) {
                return Err(not_yet(format!(
                    "node {} applied {applied:?} of {lsn}",
                    node.id
                )));
            }
        }
        // Backups first: a checksum pauses a node's executor, and a primary paused for long
        // might have a backup suspected meanwhile.
        let mut order: Vec<&ClusterNode> = statuses
            .iter()
            .filter(|(_, status)| status["cluster"]["role"] != "primary")
            .map(|(node, _)| *node)
            .collect();
        order.extend(
            statuses
                .iter()
                .filter(|(_, status)| status["cluster"]["role"] == "primary")
                .map(|(node, _)| *node),
        );
        let mut checksums = Vec::new();
        for node in order {
            let report = http_get_json(node.status, "/checksum").map_err(not_yet)?;
            checksums.push((node.id, report));
        }
        judge_checksums(&checksums)?;
        Ok(lsn)
    }
}

/// Whether the `/checksum` reports of `nodes` (node id, report) show identical replicas: each
/// passed its consistency check, and all have one checksum at one LSN. Different LSNs mean
/// not settled yet.
pub fn judge_checksums(nodes: &[(u64, Json)]) -> Result<(), Mismatch> {
    let mut first: Option<(u64, u64, u64)> = None;
    for (id, report) in nodes {
        let checksum = &report["report"]["checksum"];
        if let Some(check) = checksum["check"].as_str() {
            return Err(Mismatch::Differ(format!("node {id}: {check}")));
        }
        let (Some(at), Some(crc)) = (checksum["lsn"].as_u64(), checksum["crc32c"].as_u64()) else {
            return Err(Mismatch::NotYet(format!(
                "node {id} gave no checksum: {report}"
            )));
        };
        match first {
            None => first = Some((*id, at, crc)),
            Some((_, first_at, _)) if first_at != at => {
                return Err(Mismatch::NotYet(format!("LSNs {first_at} and {at}")));
            }
            Some((first_id, _, first_crc)) if first_crc != crc => {
                return Err(Mismatch::Differ(format!(
                    "node {id} and node {first_id} differ at LSN {at}"
                )));
            }
            Some(_) => {}
        }
    }
    Ok(())
}

/// Why replicas are not (yet) identical.
#[derive(Debug)]
pub enum Mismatch {
    /// Not settled yet: ask again.
    NotYet(String),
    /// Settled, and different.
    Differ(String),
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.up.kill();
        let _ = self.up.wait();
        if !std::thread::panicking() && !self.keep_dir {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// `GET path` from a node's HTTP responder, as JSON.
pub fn http_get_json(address: SocketAddr, path: &str) -> Result<Json, String> {
    let fail = |what: String| format!("GET http://{address}{path}: {what}");
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))
        .map_err(|e| fail(e.to_string()))?;
    stream
        .set_read_timeout(Some(REPLY_WAIT_MAX))
        .map_err(|e| fail(e.to_string()))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: tandem\r\nConnection: close\r\n\r\n"
    )
    .map_err(|e| fail(e.to_string()))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|e| fail(e.to_string()))?;
    let (_, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail("no HTTP body".into()))?;
    serde_json::from_str(body).map_err(|e| fail(format!("bad JSON: {e}")))
}

/// A blocking RESP client: one request written as a multibulk, one reply read back with the
/// crate's own reply parser.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    pub address: SocketAddr,
}

impl Conn {
    pub fn connect(address: SocketAddr) -> Conn {
        let stream = TcpStream::connect(address)
            .unwrap_or_else(|err| panic!("cannot connect to {address}: {err}"));
        stream
            .set_read_timeout(Some(REPLY_WAIT_MAX))
            .expect("a timeout");
        stream.set_nodelay(true).expect("nodelay");
        Conn {
            stream,
            buf: Vec::new(),
            address,
        }
    }

    /// Sends `args` and reads the reply; `Err` if the connection closed or broke.
    pub fn call(&mut self, args: &[Vec<u8>]) -> Result<Value, String> {
        self.send(args)?;
        self.read()
    }

    /// [`Conn::call`] for arguments written as text, split on spaces.
    pub fn cmd(&mut self, text: &str) -> Value {
        let args: Vec<Vec<u8>> = text.split(' ').map(|arg| arg.as_bytes().to_vec()).collect();
        self.call(&args)
            .unwrap_or_else(|err| panic!("{text} to {}: {err}", self.address))
    }

    pub fn send(&mut self, args: &[Vec<u8>]) -> Result<(), String> {
        let mut out = format!("*{}\r\n", args.len()).into_bytes();
        for arg in args {
            out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
            out.extend_from_slice(arg);
            out.extend_from_slice(b"\r\n");
        }
        self.stream
            .write_all(&out)
            .map_err(|err| format!("write: {err}"))
    }

    /// Reads one reply.
    pub fn read(&mut self) -> Result<Value, String> {
        loop {
            match parse_reply(&self.buf) {
                Ok(Some((value, used))) => {
                    self.buf.drain(..used);
                    return Ok(value);
                }
                Ok(None) => {}
                Err(err) => {
                    return Err(format!(
                        "unparsable reply ({err}): {:?}",
                        String::from_utf8_lossy(&self.buf)
                    ));
                }
            }
            let mut chunk = [0u8; 64 * 1024];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("the connection closed".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(err) => return Err(format!("read: {err}")),
            }
        }
    }
}

/// The lines of two transcripts (line, reply) whose replies differ, as "line: a vs b".
/// The replies of the server at `conn` to `script`, each line a command split on spaces
/// but an `EVAL` or `EVAL_RO`, whose body is the rest of the line and which names no key
/// (`EVAL return 0` is `EVAL "return 0" 0`); `HELLO`'s maps are reduced to their kind (they
/// name the server's own id and role).
pub fn script_replies(mut conn: Conn, script: &[&str]) -> Vec<(String, String)> {
    script
        .iter()
        .map(|line| {
            let args: Vec<Vec<u8>> = match line.strip_prefix("EVAL") {
                Some(rest) if rest.starts_with(' ') || rest.starts_with("_RO") => {
                    let (name, body) = line.split_once(' ').expect("a body");
                    vec![name.into(), body.into(), b"0".to_vec()]
                }
                _ => line
                    .split(' ')
                    .map(|word| word.as_bytes().to_vec())
                    .collect(),
            };
            let reply = conn.call(&args).expect("the server answers");
            let shown = match reply {
                Value::Map(_) | Value::Array(_) if line.starts_with("HELLO") => {
                    "HELLO's map".to_owned()
                }
                other => shown(&other),
            };
            (line.to_string(), shown)
        })
        .collect()
}

/// Sends `script` to the reference server at `redis` and to tandem at `tandem`, one
/// connection each, and asserts every reply is the same; returns the reference's replies.
pub fn assert_same_replies(
    redis: SocketAddr,
    tandem: SocketAddr,
    script: &[&str],
) -> Vec<(String, String)> {
    let expected = script_replies(Conn::connect(redis), script);
    let answered = script_replies(Conn::connect(tandem), script);
    let differ = differences(&expected, &answered);
    assert!(
        differ.is_empty(),
        "tandem differs from Redis:\n{}",
        differ.join("\n")
    );
    expected
}

/// A reply as text, its strings as text.
pub fn shown(value: &Value) -> String {
    match value {
        Value::Simple(text) => format!("+{}", String::from_utf8_lossy(text)),
        Value::Error(text) => format!("-{}", String::from_utf8_lossy(text)),
        Value::Bulk(bytes) => format!("{:?}", String::from_utf8_lossy(bytes)),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(shown).collect();
            format!("[{}]", items.join(", "))
        }
        other => format!("{other:?}"),
    }
}

pub fn differences(a: &[(String, String)], b: &[(String, String)]) -> Vec<String> {
    a.iter()
        .zip(b)
        .filter(|(x, y)| x.1 != y.1)
        .map(|(x, y)| format!("{}: {} vs {}", x.0, x.1, y.1))
        .collect()
}
