//! `tandem bench resp`: the same Redis commands against a tandem group (2-safe, one backup),
//! a standalone `redis-server`, and a `redis-server` with one replica where every write is
//! followed by `WAIT 1 0` (Redis's closest thing to 2-safe), interleaved in short slices.
//!
//! One client of the bench's own drives every system alike: `clients` connections spread
//! over a few threads, each connection keeping `pipeline` operations in flight (a thread
//! writes a batch to each of its connections, then reads each one's replies). An operation
//! is one command, or for `MULTI` the block `MULTI; INCR; INCR; EXEC`, and under `WAIT` a
//! write followed by its `WAIT`. Latency is from a batch's send to the operation's reply.

use std::io::{BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tandem_redis::resp::{Value, parse_reply};
use tandem_replication::Safety;

use super::median;
use crate::Failure;
use crate::bench::replication::free_address;
use crate::cli::RespArgs;
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
const KEYSPACE: u64 = 100_000;

/// Threads the client's connections are spread over.
const CLIENT_THREADS: usize = 2;

/// One system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    Tandem,
    /// The same tandem group, through a `tandem proxy` (in this process) in front of it.
    TandemProxy,
    Redis,
    RedisWait,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Tandem => "tandem",
            System::TandemProxy => "tandem-proxy",
            System::Redis => "redis",
            System::RedisWait => "redis-wait",
        }
    }
}

/// One test: what an operation sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Test {
    Set,
    Get,
    Incr,
    Lpush,
    Hset,
    EvalshaDebitCredit,
    MultiExec,
}

impl Test {
    pub const ALL: [Test; 7] = [
        Test::Set,
        Test::Get,
        Test::Incr,
        Test::Lpush,
        Test::Hset,
        Test::EvalshaDebitCredit,
        Test::MultiExec,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Test::Set => "SET",
            Test::Get => "GET",
            Test::Incr => "INCR",
            Test::Lpush => "LPUSH",
            Test::Hset => "HSET",
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
        self != Test::Get
    }

    /// Appends one operation's commands to `out`; returns how many replies it gets.
    fn write_op(self, out: &mut Vec<u8>, rng: &mut u64, sha: &str, wait: bool) -> usize {
        let key = next(rng) % KEYSPACE;
        let replies = match self {
            Test::Set => {
                command(out, &[b"SET", format!("key:{key}").as_bytes(), b"xxx"]);
                1
            }
            Test::Get => {
                command(out, &[b"GET", format!("key:{key}").as_bytes()]);
                1
            }
            Test::Incr => {
                command(out, &[b"INCR", format!("counter:{key}").as_bytes()]);
                1
            }
            Test::Lpush => {
                command(out, &[b"LPUSH", b"mylist", b"xxx"]);
                1
            }
            Test::Hset => {
                command(
                    out,
                    &[b"HSET", b"myhash", format!("f:{key}").as_bytes(), b"xxx"],
                );
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
        };
        if wait && self.writes() {
            command(out, &[b"WAIT", b"1", b"0"]);
            replies + 1
        } else {
            replies
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
fn command(out: &mut Vec<u8>, args: &[&[u8]]) {
    out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg);
        out.extend_from_slice(b"\r\n");
    }
}

/// A connection of the bench's client.
struct Conn {
    writer: TcpStream,
    reader: BufReader<TcpStream>,
    buf: Vec<u8>,
}

impl Conn {
    fn open(address: SocketAddr) -> Result<Conn, Failure> {
        let stream = TcpStream::connect(address)
            .map_err(|err| Failure::Run(format!("cannot connect to {address}: {err}")))?;
        let _ = stream.set_nodelay(true);
        let reader = stream
            .try_clone()
            .map_err(|err| Failure::Run(format!("cannot clone a socket: {err}")))?;
        Ok(Conn {
            writer: stream,
            reader: BufReader::with_capacity(1 << 16, reader),
            buf: Vec::new(),
        })
    }

    /// Reads one reply.
    fn read_reply(&mut self) -> Result<Value, Failure> {
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
            let n = self
                .reader
                .read(&mut chunk)
                .map_err(|err| Failure::Run(format!("reading a reply: {err}")))?;
            if n == 0 {
                return Err(Failure::Run("the server closed the connection".into()));
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends one command and reads its reply.
    fn call(&mut self, args: &[&[u8]]) -> Result<Value, Failure> {
        let mut out = Vec::new();
        command(&mut out, args);
        self.writer
            .write_all(&out)
            .map_err(|err| Failure::Run(format!("sending a command: {err}")))?;
        self.read_reply()
    }
}

/// A running system: where to connect, and what to stop at the end.
struct Running {
    system: System,
    address: SocketAddr,
    /// The script's SHA-1 on this system.
    sha: String,
    _redis: Vec<RedisProcess>,
    _cluster: Option<LocalCluster>,
    _proxy: Option<tandem_proxy::Proxy>,
}

/// A `redis-server` child, stopped when dropped.
struct RedisProcess {
    child: Child,
}

impl Drop for RedisProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts a `redis-server` that keeps whatever it writes (a replica's copy of its primary's
/// snapshot) in a folder of its own under `dir`, not in the working directory.
fn start_redis(
    replica_of: Option<SocketAddr>,
    dir: &Path,
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
        .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
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

fn wait_for_pong(address: SocketAddr) -> Result<(), Failure> {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Ok(mut conn) = Conn::open(address)
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

fn start(system: System, dir: &Path, db_mib: usize) -> Result<Running, Failure> {
    let mut proxy = None;
    let (address, redis, cluster) = match system {
        System::Redis => {
            let (process, address) = start_redis(None, dir)?;
            (address, vec![process], None)
        }
        System::RedisWait => {
            let (primary, address) = start_redis(None, dir)?;
            let (replica, replica_address) = start_redis(Some(address), dir)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut conn = Conn::open(replica_address)?;
            loop {
                let Value::Bulk(info) = conn.call(&[b"INFO", b"replication"])? else {
                    return Err(Failure::Run("INFO answered no text".into()));
                };
                if String::from_utf8_lossy(&info).contains("master_link_status:up") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(Failure::Run("the Redis replica did not link up".into()));
                }
                thread::sleep(Duration::from_millis(20));
            }
            (address, vec![primary, replica], None)
        }
        System::Tandem | System::TandemProxy => {
            let mut options = Options::new(2).with_db_mib(db_mib);
            options.safety = Safety::DEFAULT;
            options.workload = "redis".into();
            let name = system.name();
            let mut cluster = LocalCluster::start(&dir.join(name), &options)?;
            let settled = cluster.wait_settled(Duration::from_secs(60))?;
            let address = if system == System::TandemProxy {
                let started = tandem_proxy::Proxy::start(tandem_proxy::ProxyConfig {
                    cluster: cluster.addresses(),
                    listen: "127.0.0.1:0".parse().expect("an address"),
                    group: 0,
                    deadline: Duration::from_secs(5),
                    read_consistency: tandem_replication::ReadConsistency::Linearizable,
                })
                .map_err(|err| Failure::Run(format!("the proxy: {err}")))?;
                let address = started.local_addr();
                proxy = Some(started);
                address
            } else {
                cluster
                    .nodes
                    .iter()
                    .find(|node| node.entry.id == settled.primary)
                    .and_then(|node| node.entry.resp)
                    .ok_or_else(|| Failure::Run("the primary has no RESP port".into()))?
            };
            (address, Vec::new(), Some(cluster))
        }
    };
    let mut conn = Conn::open(address)?;
    let sha = match conn.call(&[b"SCRIPT", b"LOAD", DEBIT_CREDIT_LUA.as_bytes()])? {
        Value::Bulk(sha) => String::from_utf8_lossy(&sha).into_owned(),
        // A system without scripts runs the other tests; EVALSHA then counts errors.
        _ => String::from("0000000000000000000000000000000000000000"),
    };
    // GET reads keys that exist.
    let mut fill = Vec::new();
    for key in 0..KEYSPACE {
        command(
            &mut fill,
            &[b"SET", format!("key:{key}").as_bytes(), b"xxx"],
        );
        if key % 1000 == 999 {
            conn.writer
                .write_all(&fill)
                .map_err(|err| Failure::Run(format!("filling: {err}")))?;
            fill.clear();
            for _ in 0..1000 {
                conn.read_reply()?;
            }
        }
    }
    Ok(Running {
        system,
        address,
        sha,
        _redis: redis,
        _cluster: cluster,
        _proxy: proxy,
    })
}

/// Microseconds from 1 µs to a minute, three significant digits (a fixed range: recording
/// clamps rather than grows, and merged histograms must agree).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("valid bounds")
}

/// What one slice measured.
struct Slice {
    ops: u64,
    errors: u64,
    seconds: f64,
    latency_us: Histogram<u64>,
}

fn run_slice(
    running: &Running,
    test: Test,
    pipeline: usize,
    clients: usize,
    duration: Duration,
    seed: u64,
) -> Result<Slice, Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let ops = Arc::new(AtomicU64::new(0));
    let errors = Arc::new(AtomicU64::new(0));
    let wait = running.system == System::RedisWait;
    let mut threads = Vec::new();
    let started = Instant::now();
    for t in 0..CLIENT_THREADS.min(clients) {
        let count = clients / CLIENT_THREADS.min(clients)
            + usize::from(t < clients % CLIENT_THREADS.min(clients));
        let mut conns = Vec::new();
        for _ in 0..count {
            conns.push(Conn::open(running.address)?);
        }
        let (stop, ops, errors) = (Arc::clone(&stop), Arc::clone(&ops), Arc::clone(&errors));
        let sha = running.sha.clone();
        let mut rng = seed ^ (t as u64) << 40;
        threads.push(thread::spawn(move || -> Result<Histogram<u64>, Failure> {
            let mut latency = latency_histogram();
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
                    conn.writer
                        .write_all(&out)
                        .map_err(|err| Failure::Run(format!("sending: {err}")))?;
                }
                for (conn, &expected) in conns.iter_mut().zip(&expected) {
                    for _ in 0..expected {
                        if let Value::Error(_) = conn.read_reply()? {
                            errors.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                    let micros = sent.elapsed().as_micros() as u64;
                    latency.saturating_record_n(micros.max(1), pipeline as u64);
                }
                ops.fetch_add((pipeline * conns.len()) as u64, Ordering::Relaxed);
            }
            Ok(latency)
        }));
    }
    thread::sleep(duration);
    stop.store(true, Ordering::Relaxed);
    let seconds = started.elapsed().as_secs_f64();
    let mut latency_us = latency_histogram();
    for thread in threads {
        let histogram = thread
            .join()
            .map_err(|_| Failure::Run("a client thread panicked".into()))??;
        latency_us
            .add(&histogram)
            .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
    }
    Ok(Slice {
        ops: ops.load(Ordering::Relaxed),
        errors: errors.load(Ordering::Relaxed),
        seconds,
        latency_us,
    })
}

/// One (system, test, pipeline) over every round.
#[derive(Debug, Serialize)]
pub struct Run {
    pub system: &'static str,
    pub test: &'static str,
    pub pipeline: usize,
    pub clients: usize,
    /// Median over the rounds.
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Error replies seen (a command a system does not serve, a refusal).
    pub errors: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    runs: Vec<Run>,
}

pub fn run(args: &RespArgs) -> Result<(), Failure> {
    let systems: Vec<System> = args.systems.0.clone();
    let clients = args.clients as usize;
    let dir = args.dir.clone();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|err| Failure::Run(format!("cannot clear {}: {err}", dir.display())))?;
    }
    let mut running = Vec::new();
    for &system in &systems {
        eprintln!("starting {}", system.name());
        running.push(start(system, &dir, args.db_mib as usize)?);
    }
    let slice = Duration::from_secs_f64(args.seconds);
    let mut runs = Vec::new();
    for &test in &args.tests.0 {
        for &pipeline in &args.pipelines.0 {
            let mut rates: Vec<Vec<f64>> = vec![Vec::new(); running.len()];
            let mut hists: Vec<Histogram<u64>> =
                (0..running.len()).map(|_| latency_histogram()).collect();
            let mut errors = vec![0u64; running.len()];
            for round in 0..args.rounds {
                for (index, system) in running.iter().enumerate() {
                    let seed = (round as u64) << 32 | index as u64;
                    let measured = run_slice(system, test, pipeline, clients, slice, seed)?;
                    rates[index].push(measured.ops as f64 / measured.seconds);
                    hists[index]
                        .add(&measured.latency_us)
                        .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
                    errors[index] += measured.errors;
                }
            }
            for (index, system) in running.iter().enumerate() {
                let run = Run {
                    system: system.system.name(),
                    test: test.name(),
                    pipeline,
                    clients,
                    ops_per_s: median(&rates[index]),
                    p50_ms: hists[index].value_at_quantile(0.5) as f64 / 1000.0,
                    p99_ms: hists[index].value_at_quantile(0.99) as f64 / 1000.0,
                    errors: errors[index],
                };
                if !args.json {
                    eprintln!(
                        "{:<8} -P {:<3} {:<11} {:>10.0} ops/s  p50 {:>7.3} ms  p99 {:>7.3} ms{}",
                        run.test,
                        run.pipeline,
                        run.system,
                        run.ops_per_s,
                        run.p50_ms,
                        run.p99_ms,
                        if run.errors > 0 {
                            format!("  ({} errors)", run.errors)
                        } else {
                            String::new()
                        }
                    );
                }
                runs.push(run);
            }
        }
    }
    if args.json {
        let report = Report { runs };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        print_ratios(&runs);
    }
    Ok(())
}

/// tandem's throughput over each other system's, per test and pipeline depth.
fn print_ratios(runs: &[Run]) {
    println!(
        "{:<8} {:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
        "test", "-P", "tandem", "redis", "redis-wait", "/redis", "/wait"
    );
    let mut keys: Vec<(&str, usize)> = runs.iter().map(|r| (r.test, r.pipeline)).collect();
    keys.dedup();
    for (test, pipeline) in keys {
        let rate = |system: &str| {
            runs.iter()
                .find(|r| r.test == test && r.pipeline == pipeline && r.system == system)
                .map(|r| r.ops_per_s)
        };
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let ratio = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) if b > 0.0 => format!("{:.2}x", a / b),
            _ => "-".to_string(),
        };
        let (t, r, w) = (rate("tandem"), rate("redis"), rate("redis-wait"));
        println!(
            "{test:<8} {pipeline:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
            cell(t),
            cell(r),
            cell(w),
            ratio(t, r),
            ratio(t, w)
        );
    }
}
