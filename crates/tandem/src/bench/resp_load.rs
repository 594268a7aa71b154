//! What the RESP benchmarks share (`bench resp`, `bench durability`): the bench's own Redis
//! client, the operations it sends, the systems it drives (a tandem cluster serving the
//! `redis` model, `redis-server` children) and the tallies of what it measured.
//!
//! One client drives every system alike: `clients` connections spread over
//! [`CLIENT_THREADS`] threads, each connection keeping `pipeline` operations in flight (a
//! thread writes a batch to each of its connections, then reads each one's replies). An
//! operation is one command, or for `MULTI` the block `MULTI; INCR; INCR; EXEC`, and under
//! `WAIT` a write followed by its `WAIT`. Latency is from a batch's send to the operation's
//! reply, in an hdrhistogram of microseconds.

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use tandem_redis::resp::{Value, parse_reply};
use tandem_replication::Safety;

use super::median;
use crate::Failure;
use crate::bench::replication::free_address;
use crate::local::{LocalCluster, Options};

/// The Debit-Credit transfer as a script: three balances and a bounded history.
const DEBIT_CREDIT_LUA: &str = "\
redis.call('HINCRBY', KEYS[1], 'balance', ARGV[1])
redis.call('HINCRBY', KEYS[2], 'balance', ARGV[1])
redis.call('HINCRBY', KEYS[3], 'balance', ARGV[1])
redis.call('LPUSH', 'history', ARGV[2])
redis.call('LTRIM', 'history', 0, 999)
return 1";

/// Keys a test draws from (redis-benchmark's `-r 100000`).
pub const KEYSPACE: u64 = 100_000;

/// Threads the client's connections are spread over.
const CLIENT_THREADS: usize = 2;

/// How long a reply may take before the bench gives up on a system: far above any real
/// reply, so that a system that never answers ends the run with a message, not a hang.
const REPLY_WAIT_MAX: Duration = Duration::from_secs(10);

/// How long a started system may take to load its database and settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The list `LRANGE_N` reads, filled with [`LRANGE_LIST_LEN`] elements when a target is
/// loaded (redis-benchmark fills its `mylist` with an `LPUSH` run first).
const LRANGE_LIST: &[u8] = b"lrange-list";
/// Elements of [`LRANGE_LIST`]: as many as the longest `LRANGE_N` reads.
const LRANGE_LIST_LEN: usize = 600;

/// One test: what an operation sends. Beside tandem's own (`EVALSHA` of Debit-Credit, a
/// `MULTI` block), redis-benchmark's default tests, as its `-t` names them and sending what it
/// sends (`PING_MBULK` as `PING`; `LRANGE_N` on a list of 600 of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Ping,
    Set,
    Get,
    Incr,
    Lpush,
    Rpush,
    Lpop,
    Rpop,
    Sadd,
    Hset,
    Spop,
    Zadd,
    Zpopmin,
    Lrange(u16),
    Mset,
    EvalshaDebitCredit,
    MultiExec,
}

impl Test {
    pub const ALL: [Test; 20] = [
        Test::Ping,
        Test::Set,
        Test::Get,
        Test::Incr,
        Test::Lpush,
        Test::Rpush,
        Test::Lpop,
        Test::Rpop,
        Test::Sadd,
        Test::Hset,
        Test::Spop,
        Test::Zadd,
        Test::Zpopmin,
        Test::Lrange(100),
        Test::Lrange(300),
        Test::Lrange(500),
        Test::Lrange(600),
        Test::Mset,
        Test::EvalshaDebitCredit,
        Test::MultiExec,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Ping => "PING_MBULK",
            Test::Set => "SET",
            Test::Get => "GET",
            Test::Incr => "INCR",
            Test::Lpush => "LPUSH",
            Test::Rpush => "RPUSH",
            Test::Lpop => "LPOP",
            Test::Rpop => "RPOP",
            Test::Sadd => "SADD",
            Test::Hset => "HSET",
            Test::Spop => "SPOP",
            Test::Zadd => "ZADD",
            Test::Zpopmin => "ZPOPMIN",
            Test::Lrange(100) => "LRANGE_100",
            Test::Lrange(300) => "LRANGE_300",
            Test::Lrange(500) => "LRANGE_500",
            Test::Lrange(_) => "LRANGE_600",
            Test::Mset => "MSET",
            Test::EvalshaDebitCredit => "EVALSHA",
            Test::MultiExec => "MULTI",
        }
    }

    pub fn parse(text: &str) -> Option<Test> {
        Test::ALL
            .into_iter()
            .find(|test| test.name().eq_ignore_ascii_case(text))
    }

    fn writes(self) -> bool {
        !matches!(self, Test::Ping | Test::Get | Test::Lrange(_))
    }

    /// Appends one operation's commands to `out`; returns how many replies it gets.
    fn write_op(self, out: &mut Vec<u8>, rng: &mut u64, sha: &str, wait: bool) -> usize {
        let key = next(rng) % KEYSPACE;
        let replies = match self.single_command(key) {
            Some(args) => {
                let args: Vec<&[u8]> = args.iter().map(Vec::as_slice).collect();
                command(out, &args);
                1
            }
            None => self.write_composite(out, key, rng, sha),
        };
        if wait && self.writes() {
            command(out, &[b"WAIT", b"1", b"0"]);
            replies + 1
        } else {
            replies
        }
    }

    /// The one command of a test that sends one, on `key`; `None` for the others.
    fn single_command(self, key: u64) -> Option<Vec<Vec<u8>>> {
        let named = |prefix: &str| format!("{prefix}:{key}").into_bytes();
        let word = |text: &[u8]| text.to_vec();
        let args = match self {
            Test::Ping => vec![word(b"PING")],
            Test::Set => vec![word(b"SET"), named("key"), word(b"xxx")],
            Test::Get => vec![word(b"GET"), named("key")],
            Test::Incr => vec![word(b"INCR"), named("counter")],
            Test::Lpush => vec![word(b"LPUSH"), word(b"mylist"), word(b"xxx")],
            Test::Rpush => vec![word(b"RPUSH"), word(b"mylist"), word(b"xxx")],
            Test::Lpop => vec![word(b"LPOP"), word(b"mylist")],
            Test::Rpop => vec![word(b"RPOP"), word(b"mylist")],
            Test::Sadd => vec![word(b"SADD"), word(b"myset"), named("element")],
            Test::Hset => vec![word(b"HSET"), word(b"myhash"), named("f"), word(b"xxx")],
            Test::Spop => vec![word(b"SPOP"), word(b"myset")],
            Test::Zadd => {
                let score = key.to_string().into_bytes();
                vec![word(b"ZADD"), word(b"myzset"), score, named("element")]
            }
            Test::Zpopmin => vec![word(b"ZPOPMIN"), word(b"myzset")],
            Test::Lrange(len) => {
                let last = (len - 1).to_string().into_bytes();
                vec![word(b"LRANGE"), word(LRANGE_LIST), word(b"0"), last]
            }
            Test::Mset | Test::EvalshaDebitCredit | Test::MultiExec => return None,
        };
        Some(args)
    }

    /// Appends the commands of a test that sends more than one key or command; returns how
    /// many replies they get.
    fn write_composite(self, out: &mut Vec<u8>, key: u64, rng: &mut u64, sha: &str) -> usize {
        match self {
            Test::Mset => {
                let keys: Vec<String> = (0..10)
                    .map(|_| format!("key:{}", next(rng) % KEYSPACE))
                    .collect();
                let mut args: Vec<&[u8]> = vec![b"MSET"];
                for key in &keys {
                    args.push(key.as_bytes());
                    args.push(b"xxx");
                }
                command(out, &args);
                1
            }
            Test::EvalshaDebitCredit => {
                let account = format!("account:{key}");
                let teller = format!("teller:{}", key % 100);
                let branch = format!("branch:{}", key % 10);
                let delta = (next(rng) % 1999) as i64 - 999;
                command(
                    out,
                    &[
                        b"EVALSHA",
                        sha.as_bytes(),
                        b"3",
                        account.as_bytes(),
                        teller.as_bytes(),
                        branch.as_bytes(),
                        delta.to_string().as_bytes(),
                        format!("{account}:{delta}").as_bytes(),
                    ],
                );
                1
            }
            Test::MultiExec => {
                command(out, &[b"MULTI"]);
                command(out, &[b"INCR", format!("a:{key}").as_bytes()]);
                command(out, &[b"INCR", format!("b:{key}").as_bytes()]);
                command(out, &[b"EXEC"]);
                4
            }
            single => unreachable!("{} sends one command", single.name()),
        }
    }
}

fn next(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Appends a command as a RESP multibulk.
pub fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// A connection of the bench's client.
pub struct Conn {
    stream: Stream,
    buf: Vec<u8>,
    address: SocketAddr,
}

/// A client's connection: plain TCP, or TLS over it (the client writes a batch, then reads
/// its replies, on one thread: one stream serves both).
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(stream) => stream.read(buf),
            Stream::Tls(stream) => stream.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Stream::Plain(stream) => stream.write(buf),
            Stream::Tls(stream) => stream.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Stream::Plain(stream) => stream.flush(),
            Stream::Tls(stream) => stream.flush(),
        }
    }
}

/// How clients reach a server over TLS: the CA its certificate chains to.
pub fn tls_client(ca: &Path) -> Result<Arc<rustls::ClientConfig>, Failure> {
    use rustls::pki_types::CertificateDer;
    use rustls::pki_types::pem::PemObject;
    let failed = |err: &dyn std::fmt::Display| {
        Failure::Run(format!("the CA certificate {}: {err}", ca.display()))
    };
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(ca).map_err(|err| failed(&err))? {
        roots
            .add(cert.map_err(|err| failed(&err))?)
            .map_err(|err| failed(&err))?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| failed(&err))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    Ok(Arc::new(config))
}

impl Conn {
    pub fn open(address: SocketAddr) -> Result<Conn, Failure> {
        Conn::open_with(address, None)
    }

    /// A connection to `address`, over TLS with `tls` (the server's certificate must name
    /// its IP address).
    pub fn open_with(
        address: SocketAddr,
        tls: Option<&Arc<rustls::ClientConfig>>,
    ) -> Result<Conn, Failure> {
        let stream = TcpStream::connect(address)
            .map_err(|err| Failure::Run(format!("cannot connect to {address}: {err}")))?;
        let _ = stream.set_nodelay(true);
        stream
            .set_read_timeout(Some(REPLY_WAIT_MAX))
            .map_err(|err| Failure::Run(format!("cannot set a read timeout: {err}")))?;
        let stream = match tls {
            None => Stream::Plain(stream),
            Some(config) => {
                let name = rustls::pki_types::ServerName::IpAddress(address.ip().into());
                let session = rustls::ClientConnection::new(Arc::clone(config), name)
                    .map_err(|err| Failure::Run(format!("TLS to {address}: {err}")))?;
                Stream::Tls(Box::new(rustls::StreamOwned::new(session, stream)))
            }
        };
        Ok(Conn {
            stream,
            buf: Vec::new(),
            address,
        })
    }

    /// Sends `bytes` (whole commands) at once.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|err| Failure::Run(format!("sending: {err}")))
    }

    /// Reads one reply.
    pub fn read_reply(&mut self) -> Result<Value, Failure> {
        loop {
            match parse_reply(&self.buf) {
                Ok(Some((value, used))) => {
                    self.buf.drain(..used);
                    return Ok(value);
                }
                Ok(None) => {}
                Err(err) => return Err(Failure::Run(format!("a malformed reply: {err:?}"))),
            }
            let mut chunk = [0u8; 1 << 16];
            let n = self.stream.read(&mut chunk).map_err(|err| {
                if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) {
                    Failure::Run(format!(
                        "{} sent no reply within {REPLY_WAIT_MAX:?}",
                        self.address
                    ))
                } else {
                    Failure::Run(format!("reading a reply: {err}"))
                }
            })?;
            if n == 0 {
                return Err(Failure::Run("the server closed the connection".into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one command and reads its reply.
    pub fn call(&mut self, args: &[&[u8]]) -> Result<Value, Failure> {
        let mut out = Vec::new();
        command(&mut out, args);
        self.send(&out)?;
        self.read_reply()
    }
}

/// Where a slice sends its operations, and how.
pub struct Target {
    pub address: SocketAddr,
    /// The Debit-Credit script's SHA-1 on this system.
    pub sha: String,
    /// Whether every write is followed by `WAIT 1 0`.
    pub wait: bool,
    /// Clients speak TLS with these settings.
    pub tls: Option<Arc<rustls::ClientConfig>>,
}

impl Target {
    /// A target at `address` whose script is loaded (`SCRIPT LOAD`), or the SHA-1 of none
    /// on a system without scripts (its `EVALSHA` operations then count errors).
    pub fn load(
        address: SocketAddr,
        wait: bool,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Result<Target, Failure> {
        let mut conn = Conn::open_with(address, tls.as_ref())?;
        fill_lrange_list(&mut conn)?;
        let loaded = conn
            .call(&[b"SCRIPT", b"LOAD", DEBIT_CREDIT_LUA.as_bytes()])
            .map_err(|failure| Failure::Run(format!("SCRIPT LOAD: {}", failure.text())))?;
        let sha = match loaded {
            Value::Bulk(sha) => String::from_utf8_lossy(&sha).into_owned(),
            _ => String::from("0000000000000000000000000000000000000000"),
        };
        Ok(Target {
            address,
            sha,
            wait,
            tls,
        })
    }
}

/// Fills [`LRANGE_LIST`] afresh with [`LRANGE_LIST_LEN`] elements, for the `LRANGE_N` tests.
fn fill_lrange_list(conn: &mut Conn) -> Result<(), Failure> {
    let failed =
        |failure: Failure| Failure::Run(format!("filling the LRANGE list: {}", failure.text()));
    conn.call(&[b"DEL", LRANGE_LIST]).map_err(failed)?;
    let mut args: Vec<&[u8]> = vec![b"RPUSH", LRANGE_LIST];
    args.extend(std::iter::repeat_n(&b"xxx"[..], LRANGE_LIST_LEN));
    conn.call(&args).map_err(failed)?;
    Ok(())
}

/// A `redis-server` child, stopped when dropped.
pub struct RedisProcess {
    child: Child,
}

impl RedisProcess {
    pub fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// CPU seconds a process has used so far, all its threads (live and ended) together, from
/// `/proc/<pid>/stat`'s `utime` and `stime`; `None` where there is no such file (not Linux,
/// or the process is gone). Linux gives them in `USER_HZ` ticks, 100 a second on every
/// architecture it runs on, so the figure has a resolution of 10 ms.
pub fn cpu_seconds(pid: &str) -> Option<f64> {
    cpu_seconds_in(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
}

/// [`cpu_seconds`] from the text of a `/proc/<pid>/stat` file.
fn cpu_seconds_in(stat: &str) -> Option<f64> {
    const USER_HZ: f64 = 100.0;
    // The command name, in parentheses, may hold spaces; the fields after it do not.
    let after_name = &stat[stat.rfind(')')? + 1..];
    let mut fields = after_name.split_whitespace();
    // After the name: state (3), ppid, pgrp, session, tty, tpgid, flags, minflt, cminflt,
    // majflt, cmajflt, then utime (14) and stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// CPU seconds the processes `pids` have used so far, together (`None` if any is unknown).
pub fn cpu_seconds_of(pids: &[u32]) -> Option<f64> {
    pids.iter().map(|pid| cpu_seconds(&pid.to_string())).sum()
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `redis-server --version`'s line, or a usage error that says how to get one: `systems`
/// names the systems that need it, which the user may leave out instead.
pub fn redis_server_version(systems: &str) -> Result<String, Failure> {
    let output = Command::new("redis-server")
        .arg("--version")
        .output()
        .map_err(|err| {
            Failure::Usage(format!(
                "{systems} need redis-server, which cannot be run here ({err}): install it \
                 (`.ci/setup` does; on Debian `apt-get install redis-server`), or leave \
                 {systems} out of --systems"
            ))
        })?;
    Ok(String::from_utf8_lossy(&output.stdout).trim().to_string())
}

/// Starts a `redis-server` that keeps whatever it writes (a replica's copy of its primary's
/// snapshot, an append-only file) in a folder of its own under `dir`, not in the working
/// directory. `persistence` are its `--appendonly`/`--appendfsync` arguments; snapshots are
/// always off (`--save ""`).
pub fn start_redis(
    replica_of: Option<SocketAddr>,
    dir: &Path,
    persistence: &[&str],
) -> Result<(RedisProcess, SocketAddr), Failure> {
    let address = free_address()?;
    let folder = dir.join(format!("redis-{}", address.port()));
    std::fs::create_dir_all(&folder)
        .map_err(|err| Failure::Run(format!("cannot create {}: {err}", folder.display())))?;
    let mut command = Command::new("redis-server");
    command
        .args(["--port", &address.port().to_string()])
        .arg("--dir")
        .arg(&folder)
        .args(["--bind", "127.0.0.1", "--save", ""])
        .args(persistence)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if let Some(primary) = replica_of {
        command.args(["--replicaof", "127.0.0.1", &primary.port().to_string()]);
    }
    let child = command.spawn().map_err(|err| {
        Failure::Run(format!(
            "cannot start redis-server ({err}); install Debian's redis-server to compare"
        ))
    })?;
    let process = RedisProcess { child };
    wait_for_pong(address)?;
    Ok((process, address))
}

/// Starts a standalone `redis-server` whose only port speaks TLS (`args` name its
/// certificate and key, which chain to `ca`), keeping its files under `dir`.
pub fn start_redis_tls(
    dir: &Path,
    args: &[&str],
    ca: &Path,
) -> Result<(RedisProcess, SocketAddr), Failure> {
    let address = free_address()?;
    let folder = dir.join(format!("redis-{}", address.port()));
    std::fs::create_dir_all(&folder)
        .map_err(|err| Failure::Run(format!("cannot create {}: {err}", folder.display())))?;
    let child = Command::new("redis-server")
        .args(["--port", "0", "--tls-port", &address.port().to_string()])
        .arg("--dir")
        .arg(&folder)
        .args(["--bind", "127.0.0.1", "--save", ""])
        .args(args)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|err| {
            Failure::Run(format!(
                "cannot start redis-server ({err}); install Debian's redis-server to compare"
            ))
        })?;
    let process = RedisProcess { child };
    wait_for_pong_with(address, Some(&tls_client(ca)?))?;
    Ok((process, address))
}

fn wait_for_pong(address: SocketAddr) -> Result<(), Failure> {
    wait_for_pong_with(address, None)
}

fn wait_for_pong_with(
    address: SocketAddr,
    tls: Option<&Arc<rustls::ClientConfig>>,
) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut conn) = Conn::open_with(address, tls)
            && let Ok(Value::Simple(pong)) = conn.call(&[b"PING"])
            && pong == b"PONG"
        {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(Failure::Run(format!(
                "{address} did not answer PING in 10 s"
            )));
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Starts a local cluster of `nodes` serving the `redis` model under `safety`, with its
/// files under `dir`, and waits until it settles; returns it and its primary's RESP address.
pub fn start_tandem(
    dir: &Path,
    nodes: u32,
    safety: Safety,
    db_mib: usize,
) -> Result<(LocalCluster, SocketAddr), Failure> {
    start_tandem_with(dir, Options::new(nodes).with_db_mib(db_mib), safety)
}

/// [`start_tandem`] with every local cluster option given.
pub fn start_tandem_with(
    dir: &Path,
    mut options: Options,
    safety: Safety,
) -> Result<(LocalCluster, SocketAddr), Failure> {
    options.safety = safety;
    options.workload = "redis".into();
    let (cluster, settled) = LocalCluster::start_settled(dir, &options, SETTLE_TIMEOUT)?;
    let address = cluster
        .nodes
        .iter()
        .find(|node| node.entry.id == settled.primary)
        .and_then(|node| node.entry.resp)
        .ok_or_else(|| Failure::Run("the primary has no RESP port".into()))?;
    Ok((cluster, address))
}

/// Microseconds from 1 µs to a minute, three significant digits (a fixed range: recording
/// clamps rather than grows, and merged histograms must agree).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// What one slice measured.
pub struct Slice {
    ops: u64,
    errors: u64,
    /// The first error reply, as text.
    first_error: Option<String>,
    seconds: f64,
    latency_us: Histogram<u64>,
}

impl Slice {
    pub fn ops(&self) -> u64 {
        self.ops
    }

    /// The first error reply any operation got, as text.
    pub fn first_error(&self) -> Option<&str> {
        self.first_error.as_deref()
    }
}

/// What a connection's thread measured.
struct ThreadTally {
    latency_us: Histogram<u64>,
    first_error: Option<String>,
}

/// Runs `test` against `target` for `duration`: `clients` connections, opened for the
/// slice, each with `pipeline` operations in flight. `seed` varies the keys.
pub fn run_slice(
    target: &Target,
    test: Test,
    pipeline: usize,
    clients: usize,
    duration: Duration,
    seed: u64,
) -> Result<Slice, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let wait = target.wait;
    let mut threads = Vec::new();
    let started = Instant::now();
    for t in 0..CLIENT_THREADS.min(clients) {
        let count = clients / CLIENT_THREADS.min(clients)
            + usize::from(t < clients % CLIENT_THREADS.min(clients));
        let mut conns = Vec::new();
        for _ in 0..count {
            conns.push(Conn::open_with(target.address, target.tls.as_ref())?);
        }
        let (stop, ops, errors) = (Arc::clone(&stop), Arc::clone(&ops), Arc::clone(&errors));
        let sha = target.sha.clone();
        let mut rng = seed ^ (t as u64) << 40;
        threads.push(thread::spawn(move || -> Result<ThreadTally, Failure> {
            let mut latency = latency_histogram();
            let mut first_error = None;
            let mut out = Vec::new();
            let mut expected = vec![0usize; conns.len()];
            while !stop.load(Ordering::Relaxed) {
                let sent = Instant::now();
                for (conn, expected) in conns.iter_mut().zip(&mut expected) {
                    out.clear();
                    *expected = 0;
                    for _ in 0..pipeline {
                        *expected += test.write_op(&mut out, &mut rng, &sha, wait);
                    }
                    conn.send(&out)?;
                }
                for (conn, &expected) in conns.iter_mut().zip(&expected) {
                    for _ in 0..expected {
                        if let Value::Error(text) = conn.read_reply()? {
                            errors.fetch_add(1, Ordering::Relaxed);
                            first_error
                                .get_or_insert_with(|| String::from_utf8_lossy(&text).into());
                        }
                    }
                    let micros = sent.elapsed().as_micros() as u64;
                    latency.saturating_record_n(micros.max(1), pipeline as u64);
                }
                ops.fetch_add((pipeline * conns.len()) as u64, Ordering::Relaxed);
            }
            Ok(ThreadTally {
                latency_us: latency,
                first_error,
            })
        }));
    }
    thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let mut latency_us = latency_histogram();
    let mut first_error = None;
    for thread in threads {
        let tally = thread
            .join()
            .map_err(|_| Failure::Run("a client thread panicked".into()))??;
        latency_us
            .add(&tally.latency_us)
            .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
        first_error = first_error.or(tally.first_error);
    }
    Ok(Slice {
        ops: ops.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        first_error,
        seconds,
        latency_us,
    })
}

/// One system's slices of one test, added up.
pub struct Tally {
    /// Each slice's operations per second.
    rates: Vec<f64>,
    latency_us: Histogram<u64>,
    /// Error replies seen (a command a system does not serve, a refusal).
    pub errors: u64,
    /// Operations of the slices whose CPU time was measured, and that CPU time: the
    /// system's processes (the servers) and this one (the clients).
    cpu_ops: u64,
    server_cpu_s: f64,
    client_cpu_s: f64,
}

impl Default for Tally {
    fn default() -> Tally {
        Tally {
            rates: Vec::new(),
            latency_us: latency_histogram(),
            errors: 0,
            cpu_ops: 0,
            server_cpu_s: 0.0,
            client_cpu_s: 0.0,
        }
    }
}

impl Tally {
    pub fn add(&mut self, slice: Slice) -> Result<(), Failure> {
        self.rates.push(slice.ops as f64 / slice.seconds);
        self.latency_us
            .add(&slice.latency_us)
            .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
        self.errors += slice.errors;
        Ok(())
    }

    /// Adds the CPU seconds a slice of `ops` operations took: `server_s` in the system's
    /// processes, `client_s` in this one.
    pub fn add_cpu(&mut self, ops: u64, server_s: f64, client_s: f64) {
        self.cpu_ops += ops;
        self.server_cpu_s += server_s;
        self.client_cpu_s += client_s;
    }

    /// Microseconds of CPU the servers spent per operation (`None`: not measured).
    pub fn server_cpu_us_per_op(&self) -> Option<f64> {
        (self.cpu_ops > 0).then(|| self.server_cpu_s * 1e6 / self.cpu_ops as f64)
    }

    /// Microseconds of CPU the clients spent per operation (`None`: not measured).
    pub fn client_cpu_us_per_op(&self) -> Option<f64> {
        (self.cpu_ops > 0).then(|| self.client_cpu_s * 1e6 / self.cpu_ops as f64)
    }

    /// The median of the slices' rates.
    pub fn ops_per_s(&self) -> f64 {
        median(&self.rates)
    }

    pub fn latency_ms(&self, quantile: f64) -> f64 {
        self.latency_us.value_at_quantile(quantile) as f64 / 1000.0
    }
}

/// `a / b` as a ratio cell ("1.23x"), or "-" where either is missing.
pub fn ratio_cell(a: Option<f64>, b: Option<f64>) -> String {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
        _ => "-".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::{Test, cpu_seconds, cpu_seconds_in};
    use tandem_redis::resp::{Argv, Parsed, RequestLimits, parse_request};

    /// Each test's operation is whole RESP commands, as many as the replies it expects (a
    /// write under `WAIT` one more), and each test's name reads back as that test.
    #[test]
    fn every_test_sends_whole_commands_and_its_name_reads_back() {
        for test in Test::ALL {
            assert_eq!(Test::parse(test.name()), Some(test), "{}", test.name());
            for wait in [false, true] {
                let mut out = Vec::new();
                let mut rng = 7;
                let replies = test.write_op(&mut out, &mut rng, "sha", wait);
                let mut argv = Argv::new();
                let (mut at, mut commands) = (0, 0);
                while at < out.len() {
                    let parsed = parse_request(&out[at..], &RequestLimits::default(), &mut argv);
                    let Ok(Parsed::Command { consumed }) = parsed else {
                        panic!("{}: {parsed:?}", test.name());
                    };
                    at += consumed;
                    commands += 1;
                }
                assert_eq!(commands, replies, "{} (wait: {wait})", test.name());
            }
        }
    }

    #[test]
    fn cpu_time_is_read_after_a_command_name_with_spaces_and_parentheses() {
        // A node's stat line (fields 14 and 15: 2,345 and 655 ticks) whose name would
        // shift every field if it were split on spaces.
        let stat = "4242 (tandem (a) b) S 1 4242 4242 0 -1 4194560 1200 0 3 0 2345 655 0 0 20 \
                    0 12 0 100 1000000 500 18446744073709551615";
        assert_eq!(cpu_seconds_in(stat), Some(30.0));
        assert_eq!(cpu_seconds_in("4242 (cut short) S 1 2"), None);
    }

    #[test]
    fn this_process_is_seen_to_use_cpu_time() {
        let Some(before) = cpu_seconds("self") else {
            eprintln!("no /proc here: CPU time is not measured");
            return;
        };
        // Busy work until the 10 ms ticks move (bounded by the work done, not by a timer).
        let mut sum = 0u64;
        let mut after = before;
        for round in 0..2_000u64 {
            for i in 0..1_000_000u64 {
                sum = sum.wrapping_add(std::hint::black_box(i ^ round));
            }
            after = cpu_seconds("self").expect("readable a moment ago");
            if after > before {
                break;
            }
        }
        std::hint::black_box(sum);
        assert!(
            after > before,
            "{before} s of CPU before, {after} s after busy work"
        );
    }
}
