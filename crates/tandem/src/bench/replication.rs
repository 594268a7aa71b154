//! `tandem bench replication`: a primary and its backups on loopback (seed 000 §5–7).
//!
//! Every contender is a whole group: a primary and `--backups` backup processes
//! (`tandem node`), all loaded with the same deterministic database. The contenders are
//! standalone (a primary without backups), passive (the primary's logging strategy writes
//! through to mirror memory on the backups, which only store bytes) and active (V3 locally, redo
//! records shipped and applied). With the in-process driver the primary runs inside this
//! process and its executor generates the calls; with the network driver the primary is a
//! process too and client connections send the calls over loopback.
//!
//! Contenders take turns in slices of [`SLICE`], after a warm-up, so a contender's throughput
//! is the median of its slice rates and the ratios come from one run on one noisy machine.
//! Latency is measured from a call's start to its reply (hdrhistogram). At the end the load
//! stops, every backup catches up, and the checksums of all replicas at the same LSN are
//! compared: a mismatch fails the run.

use std::fs;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use tandem_memory::Strategy;
use tandem_replication::Safety;
use tandem_runtime::config::{self, Mode, NodeConfig, PeerConfig, Role};
use tandem_runtime::metrics::Metrics;
use tandem_runtime::primary::{self, LocalLoad, PrimaryHandle};
use tandem_wire::{Frame, FrameBuffer, Hello, PeerKind, ReplyStatus, encode_call, encode_hello};

use crate::Failure;
use crate::bench::median;
use crate::cli::{BenchMode, DriverKind, ReplicationArgs, WorkloadName};

/// Length of one measured turn of one contender.
const SLICE: Duration = Duration::from_millis(250);
/// Unmeasured turn each contender takes first.
const WARMUP: Duration = Duration::from_millis(250);
/// The open-loop clients' pacing step (see `NetworkClients::pace`).
const PACING_QUANTUM: Duration = Duration::from_micros(200);
/// How long a group may take to load its database and connect.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// One line of the report.
#[derive(Debug, Serialize)]
pub struct ReplicationRun {
    pub mode: &'static str,
    pub strategy: &'static str,
    pub safety: String,
    pub driver: &'static str,
    pub backups: u32,
    pub clients: u32,
    /// Median over slices of replies per second.
    pub tx_per_s: f64,
    pub ratio_to_standalone: Option<f64>,
    pub latency_us: Latency,
    /// Payload bytes per committed txn, by the paper's classes.
    pub shipped_bytes_per_tx: Shipped,
    /// Batch bytes per txn per backup on the wire, headers and framing included.
    pub wire_bytes_per_tx: f64,
    pub committed: u64,
    pub slices: usize,
    pub lsn: u64,
    pub checksums_match: bool,
    pub consistent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub half_load: Option<HalfLoad>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p99: f64,
    pub p999: f64,
}

#[derive(Clone, Copy, Debug, Default, Serialize)]
pub struct Shipped {
    pub data: f64,
    pub undo: f64,
    pub meta: f64,
    pub total: f64,
}

/// The network driver's second measurement: an open-loop load at half the peak rate.
#[derive(Debug, Serialize)]
pub struct HalfLoad {
    pub offered_tx_per_s: f64,
    pub tx_per_s: f64,
    pub latency_us: Latency,
}

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    db_mib: u32,
    seconds_per_contender: f64,
    runs: Vec<ReplicationRun>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Standalone,
    Passive(Strategy),
    Active,
}

impl Kind {
    fn mode(self) -> &'static str {
        match self {
            Kind::Standalone => "standalone",
            Kind::Passive(_) => "passive",
            Kind::Active => "active",
        }
    }

    fn strategy(self) -> Strategy {
        match self {
            Kind::Passive(strategy) => strategy,
            Kind::Standalone | Kind::Active => Strategy::V3InlineLog,
        }
    }
}

pub fn run(args: &ReplicationArgs) -> Result<(), Failure> {
    let kinds = match args.mode {
        BenchMode::Standalone => vec![Kind::Standalone],
        BenchMode::Active => vec![Kind::Active],
        BenchMode::Passive => vec![Kind::Passive(args.strategy)],
        BenchMode::All => vec![
            Kind::Standalone,
            Kind::Passive(Strategy::V1MirrorCopy),
            Kind::Passive(Strategy::V2MirrorDiff),
            Kind::Passive(Strategy::V3InlineLog),
            Kind::Active,
        ],
    };
    args.safety
        .validate(args.backups as usize)
        .map_err(|err| Failure::Usage(format!("--safety: {err}")))?;
    let workload = match args.workload {
        WorkloadName::DebitCredit => config::WorkloadName::DebitCredit,
        WorkloadName::OrderEntry => config::WorkloadName::OrderEntry,
    };
    let db_bytes = (args.db_mib as usize) << 20;
    // Fail fast, with the right flag named, if the database does not fit.
    tandem_workloads::model(workload.as_str(), db_bytes)
        .map_err(|err| Failure::Usage(format!("--db-mib: {err}")))?;
    let dir = scratch_dir().map_err(Failure::Run)?;
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Run(format!("cannot find myself: {err}")))?;
    let clients = args.clients.unwrap_or(match args.driver {
        DriverKind::InProcess => 16384,
        DriverKind::Network => 4,
    });
    if !args.json {
        eprintln!(
            "starting {} group(s) of 1 primary + {} backup(s) (logs in {})",
            kinds.len(),
            args.backups,
            dir.display()
        );
    }
    let mut groups = Vec::new();
    for (index, &kind) in kinds.iter().enumerate() {
        let group = Group::start(args, kind, workload, clients, index, &dir, &exe)?;
        groups.push(group);
    }
    for group in &mut groups {
        group.wait_ready()?;
    }
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); groups.len()];
    let rounds = (args.seconds / SLICE.as_secs_f64()).ceil().max(1.0) as usize;
    let progress = ProgressBar::new((rounds * groups.len()) as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} slices, {eta} left")
            .expect("valid template"),
    );
    progress.set_prefix("replication");
    if args.json {
        progress.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    for group in &mut groups {
        group.slice(WARMUP)?;
        group.reset_latency();
    }
    for _ in 0..rounds {
        for (index, group) in groups.iter_mut().enumerate() {
            samples[index].push(group.slice(SLICE)?);
            progress.inc(1);
        }
    }
    progress.finish_and_clear();
    let mut runs = Vec::new();
    for (group, samples) in groups.iter_mut().zip(&samples) {
        let latency = group.latency();
        let half_load = if args.driver == DriverKind::Network {
            Some(group.half_load(median(samples) / 2.0, args.seconds)?)
        } else {
            None
        };
        let mut run = group.finish(args, clients)?;
        run.tx_per_s = median(samples);
        run.slices = samples.len();
        run.latency_us = latency;
        run.half_load = half_load;
        runs.push(run);
    }
    let standalone = runs
        .iter()
        .find(|run| run.mode == "standalone")
        .map(|run| run.tx_per_s);
    for run in &mut runs {
        run.ratio_to_standalone = standalone.map(|base| run.tx_per_s / base);
    }
    let failed: Vec<String> = runs
        .iter()
        .filter(|run| !run.checksums_match || !run.consistent)
        .map(|run| format!("{} {}: {}", run.mode, run.strategy, run.problems.join("; ")))
        .collect();
    let report = Report {
        workload: workload.as_str(),
        db_mib: args.db_mib,
        seconds_per_contender: args.seconds,
        runs,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("serializable")
        );
    } else {
        print_table(&report);
    }
    drop(groups);
    let _ = fs::remove_dir_all(&dir);
    if failed.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!(
            "REPLICAS DIFFER OR ARE INCONSISTENT: {}",
            failed.join(" | ")
        )))
    }
}

fn print_table(report: &Report) {
    println!(
        "{} ({} MiB), {} s per contender, interleaved in {} ms slices",
        report.workload,
        report.db_mib,
        report.seconds_per_contender,
        SLICE.as_millis()
    );
    println!(
        "{:<11} {:<4} {:<15} {:>11} {:>7} {:>9} {:>9} {:>9} {:>7} {:>7} {:>7} {:>7} {:>8}",
        "mode",
        "str",
        "safety",
        "tx/s",
        "ratio",
        "p50 µs",
        "p99 µs",
        "p999 µs",
        "data",
        "undo",
        "meta",
        "total",
        "replicas"
    );
    for run in &report.runs {
        println!(
            "{:<11} {:<4} {:<15} {:>11.0} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8}",
            run.mode,
            run.strategy,
            run.safety,
            run.tx_per_s,
            run.ratio_to_standalone
                .map_or("-".to_owned(), |ratio| format!("{ratio:.3}")),
            run.latency_us.p50,
            run.latency_us.p99,
            run.latency_us.p999,
            run.shipped_bytes_per_tx.data,
            run.shipped_bytes_per_tx.undo,
            run.shipped_bytes_per_tx.meta,
            run.shipped_bytes_per_tx.total,
            if run.checksums_match && run.consistent {
                "match"
            } else {
                "DIFFER"
            }
        );
        if let Some(half) = &run.half_load {
            println!(
                "{:<11} at half load ({:.0} tx/s offered): {:.0} tx/s, p50 {:.1} µs, p99 {:.1} µs, p999 {:.1} µs",
                "",
                half.offered_tx_per_s,
                half.tx_per_s,
                half.latency_us.p50,
                half.latency_us.p99,
                half.latency_us.p999
            );
        }
    }
    println!(
        "bytes are shipped payload per txn (data, undo, meta-data), as the paper's Tables 5 and 7 count them"
    );
}

fn scratch_dir() -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!("tandem-bench-{}", std::process::id()));
    fs::create_dir_all(&dir).map_err(|err| format!("cannot create {}: {err}", dir.display()))?;
    Ok(dir)
}

/// A port nobody listens on right now (a child process will bind it).
///
/// Drawn from below Linux's ephemeral range (32768–60999): a port the kernel hands out for
/// `bind(0)` may be taken by any outgoing connection (a client's, or a parallel test's)
/// before the child binds it. The draw mixes this process's id, a counter and the clock, so
/// parallel processes rarely try the same port; a port that is taken, or that this process
/// handed out before, is skipped.
pub(crate) fn free_address() -> Result<SocketAddr, Failure> {
    use std::sync::atomic::{AtomicU64, Ordering};
    const PORT_FIRST: u64 = 20_000;
    const PORTS: u64 = 12_000;
    static DRAWS: AtomicU64 = AtomicU64::new(0);
    static HANDED_OUT: std::sync::Mutex<std::collections::BTreeSet<u16>> =
        std::sync::Mutex::new(std::collections::BTreeSet::new());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| u64::from(since.subsec_nanos()));
    let mut seed = u64::from(std::process::id()) << 32 ^ nanos;
    for _ in 0..64 {
        let draw = DRAWS.fetch_add(1, Ordering::Relaxed);
        seed = tandem_store::Rng::new(seed ^ draw).next_u64();
        let port = (PORT_FIRST + seed % PORTS) as u16;
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        // Nothing binds a port until its child starts: this process must not hand it out
        // twice either.
        let mut handed_out = HANDED_OUT.lock().expect("not poisoned");
        if !handed_out.contains(&port) && TcpListener::bind(address).is_ok() {
            handed_out.insert(port);
            return Ok(address);
        }
    }
    Err(Failure::Run(
        "no free loopback port in 20000..32000 after 64 tries".into(),
    ))
}

/// A child process that is killed when dropped.
struct NodeProcess {
    child: Child,
    /// The write end of the child's stdin: when this process ends, however it ends, the child
    /// reads end-of-file and exits (`tandem node --exit-on-stdin-eof`).
    _stdin: Option<std::process::ChildStdin>,
    status: SocketAddr,
    log: PathBuf,
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl NodeProcess {
    fn spawn(
        exe: &Path,
        config: &NodeConfig,
        dir: &Path,
        name: &str,
    ) -> Result<NodeProcess, Failure> {
        let path = dir.join(format!("{name}.toml"));
        fs::write(&path, config.to_toml_string())
            .map_err(|err| Failure::Run(format!("cannot write {}: {err}", path.display())))?;
        let log = dir.join(format!("{name}.log"));
        let log_file = fs::File::create(&log)
            .map_err(|err| Failure::Run(format!("cannot create {}: {err}", log.display())))?;
        let mut child = Command::new(exe)
            .arg("node")
            .arg("--config")
            .arg(&path)
            .arg("--exit-on-stdin-eof")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log_file)
            .spawn()
            .map_err(|err| Failure::Run(format!("cannot start {name}: {err}")))?;
        let stdin = child.stdin.take();
        Ok(NodeProcess {
            child,
            _stdin: stdin,
            status: config.metrics_listen.expect("bench nodes serve /status"),
            log,
        })
    }

    fn report(&mut self) -> Result<Value, Failure> {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            return Err(Failure::Run(format!(
                "a node exited ({status}); its log:\n{log}"
            )));
        }
        http_get_json(self.status, "/status")
    }
}

/// GET `path` from a node's HTTP endpoint and parse the JSON body.
pub(crate) fn http_get_json(address: SocketAddr, path: &str) -> Result<Value, Failure> {
    let fail = |what: String| Failure::Run(format!("GET http://{address}{path}: {what}"));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))
        .map_err(|err| fail(err.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|err| fail(err.to_string()))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: tandem\r\nConnection: close\r\n\r\n"
    )
    .map_err(|err| fail(err.to_string()))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|err| fail(err.to_string()))?;
    let (_, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail("no HTTP body".into()))?;
    serde_json::from_str(body).map_err(|err| fail(format!("bad JSON: {err}")))
}

/// How a group's primary is driven.
enum Load {
    InProcess {
        handle: Option<PrimaryHandle>,
        load: Arc<LocalLoad>,
    },
    Network {
        process: NodeProcess,
        clients: Arc<NetworkClients>,
    },
}

/// One contender: a primary and its backup processes.
struct Group {
    kind: Kind,
    load: Load,
    backups: Vec<NodeProcess>,
    lsn_start: u64,
    backup_ids: Vec<u32>,
}

impl Group {
    #[allow(clippy::too_many_arguments)]
    fn start(
        args: &ReplicationArgs,
        kind: Kind,
        workload: config::WorkloadName,
        clients: u32,
        index: usize,
        dir: &Path,
        exe: &Path,
    ) -> Result<Group, Failure> {
        let backups = if kind == Kind::Standalone {
            0
        } else {
            args.backups
        };
        let mut base = NodeConfig::from_toml_str(config::EXAMPLE)
            .map_err(|err| Failure::Run(format!("the example config: {err}")))?;
        base.group.workload = workload;
        base.group.db_mib = args.db_mib as usize;
        base.group.strategy = kind.strategy();
        base.group.seed = args.seed;
        base.group.safety = if backups == 0 {
            Safety::OneSafe
        } else {
            args.safety
        };
        // A contender waiting for its turn heartbeats every 50 ms rather than every tick, so
        // idle groups do not tax the one being measured. A loaded group ships batches, not
        // heartbeats, so its own costs are unchanged.
        base.tuning.heartbeat_ticks = 50;
        base.tuning.suspect_ticks = 150;
        base.group.mode = if matches!(kind, Kind::Passive(_)) {
            Mode::Passive
        } else {
            Mode::Active
        };
        let primary_listen = free_address()?;
        let mut members = vec![PeerConfig {
            node_id: 1,
            address: primary_listen,
            role: Role::Primary,
        }];
        for backup in 0..backups {
            members.push(PeerConfig {
                node_id: 2 + backup,
                address: free_address()?,
                role: Role::Backup,
            });
        }
        let config_for = |member: &PeerConfig| -> Result<NodeConfig, Failure> {
            let mut config = base.for_member(member, &members);
            config.metrics_listen = Some(free_address()?);
            config
                .validate()
                .map_err(|err| Failure::Run(format!("bench config: {err}")))?;
            Ok(config)
        };
        let mut processes = Vec::new();
        for member in &members[1..] {
            let name = format!("group{index}-node{}", member.node_id);
            processes.push(NodeProcess::spawn(exe, &config_for(member)?, dir, &name)?);
        }
        let primary_config = config_for(&members[0])?;
        let load = match args.driver {
            DriverKind::InProcess => {
                let load = LocalLoad::new(clients as usize);
                let listener = TcpListener::bind(primary_listen)
                    .map_err(|err| Failure::Run(format!("cannot bind {primary_listen}: {err}")))?;
                let model =
                    tandem_workloads::model(workload.as_str(), (args.db_mib as usize) << 20)
                        .map_err(Failure::Usage)?;
                let metrics = Arc::new(Metrics::new(primary_config.node_id, "primary"));
                let handle = primary::start(
                    &primary_config,
                    listener,
                    model,
                    metrics,
                    Some(Arc::clone(&load)),
                )
                .map_err(|err| Failure::Run(err.to_string()))?;
                Load::InProcess {
                    handle: Some(handle),
                    load,
                }
            }
            DriverKind::Network => {
                let name = format!("group{index}-node1");
                let process = NodeProcess::spawn(exe, &primary_config, dir, &name)?;
                let clients = NetworkClients::new(
                    workload,
                    (args.db_mib as usize) << 20,
                    primary_listen,
                    clients,
                    args.window,
                    args.seed,
                )?;
                Load::Network { process, clients }
            }
        };
        Ok(Group {
            kind,
            load,
            backups: processes,
            lsn_start: 0,
            backup_ids: members[1..].iter().map(|member| member.node_id).collect(),
        })
    }

    /// The primary's status as JSON.
    fn primary_status(&mut self) -> Result<Value, Failure> {
        match &mut self.load {
            Load::InProcess { handle, .. } => {
                let status = handle
                    .as_ref()
                    .and_then(PrimaryHandle::status)
                    .ok_or_else(|| Failure::Run("the in-process primary stopped".into()))?;
                Ok(serde_json::to_value(status).expect("serializable"))
            }
            Load::Network { process, .. } => Ok(process.report()?["status"].clone()),
        }
    }

    /// Waits until the primary has loaded and every backup has introduced itself.
    fn wait_ready(&mut self) -> Result<(), Failure> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Ok(status) = self.primary_status() {
                let lsn = status["lsn"].as_u64().unwrap_or(0);
                let backups = status["backups"].as_array().cloned().unwrap_or_default();
                let known = backups
                    .iter()
                    .filter(|entry| entry[1].as_u64().unwrap_or(0) >= lsn && lsn > 0)
                    .count();
                if lsn > 0 && known == self.backup_ids.len() {
                    self.lsn_start = lsn;
                    if let Load::Network { clients, .. } = &self.load {
                        clients.connect()?;
                    }
                    return Ok(());
                }
            }
            for backup in &mut self.backups {
                if let Ok(Some(status)) = backup.child.try_wait() {
                    let log = fs::read_to_string(&backup.log).unwrap_or_default();
                    return Err(Failure::Run(format!("a backup exited ({status}):\n{log}")));
                }
            }
            if Instant::now() > deadline {
                return Err(Failure::Run(format!(
                    "the {} group was not ready after {} s",
                    self.kind.mode(),
                    READY_TIMEOUT.as_secs()
                )));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Runs the load for `length`, drains it, and returns replies per second.
    fn slice(&mut self, length: Duration) -> Result<f64, Failure> {
        let (active, replies) = match &self.load {
            Load::InProcess { load, .. } => (&load.active, &load.replies),
            Load::Network { clients, .. } => (&clients.active, &clients.replies),
        };
        let before = replies.load(Ordering::Relaxed);
        let start = Instant::now();
        active.store(true, Ordering::Release);
        thread::sleep(length);
        let after = replies.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        active.store(false, Ordering::Release);
        self.drain()?;
        Ok((after - before) as f64 / elapsed.as_secs_f64())
    }

    /// Waits until no call is waiting for its reply.
    fn drain(&self) -> Result<(), Failure> {
        let outstanding = match &self.load {
            Load::InProcess { load, .. } => &load.outstanding,
            Load::Network { clients, .. } => &clients.outstanding,
        };
        let deadline = Instant::now() + Duration::from_secs(30);
        while outstanding.load(Ordering::Acquire) > 0 {
            if Instant::now() > deadline {
                return Err(Failure::Run(format!(
                    "{} group: {} replies still missing after 30 s",
                    self.kind.mode(),
                    outstanding.load(Ordering::Acquire)
                )));
            }
            thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    fn reset_latency(&self) {
        match &self.load {
            Load::InProcess { load, .. } => load.latency_ns.lock().expect("not poisoned").reset(),
            Load::Network { clients, .. } => {
                clients.latency_ns.lock().expect("not poisoned").reset()
            }
        }
    }

    fn latency(&self) -> Latency {
        let histogram = match &self.load {
            Load::InProcess { load, .. } => load.latency_ns.lock().expect("not poisoned").clone(),
            Load::Network { clients, .. } => {
                clients.latency_ns.lock().expect("not poisoned").clone()
            }
        };
        latency_of(&histogram)
    }

    fn half_load(&mut self, rate: f64, seconds: f64) -> Result<HalfLoad, Failure> {
        let Load::Network { clients, .. } = &self.load else {
            unreachable!("half load is measured with the network driver");
        };
        let clients = Arc::clone(clients);
        clients.latency_ns.lock().expect("not poisoned").reset();
        let before = clients.replies.load(Ordering::Relaxed);
        clients
            .rate_per_s
            .store(rate.max(1.0) as u64, Ordering::Release);
        let start = Instant::now();
        clients.active.store(true, Ordering::Release);
        thread::sleep(Duration::from_secs_f64(seconds));
        let after = clients.replies.load(Ordering::Relaxed);
        let elapsed = start.elapsed();
        clients.active.store(false, Ordering::Release);
        self.drain()?;
        clients.rate_per_s.store(0, Ordering::Release);
        let histogram = clients.latency_ns.lock().expect("not poisoned").clone();
        Ok(HalfLoad {
            offered_tx_per_s: rate,
            tx_per_s: (after - before) as f64 / elapsed.as_secs_f64(),
            latency_us: latency_of(&histogram),
        })
    }

    /// Stops the load, waits for every backup to apply everything, compares checksums.
    fn finish(&mut self, args: &ReplicationArgs, clients: u32) -> Result<ReplicationRun, Failure> {
        if let Load::Network { clients, .. } = &self.load {
            clients.stopping.store(true, Ordering::Release);
        }
        let mut problems = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(60);
        let status = loop {
            let status = self.primary_status()?;
            let lsn = status["lsn"].as_u64().unwrap_or(0);
            let caught_up = status["backups"]
                .as_array()
                .map(|backups| backups.iter().all(|entry| entry[2].as_u64() == Some(lsn)))
                .unwrap_or(false);
            if caught_up && status["pending_replies"].as_u64() == Some(0) {
                break status;
            }
            if Instant::now() > deadline {
                problems.push(format!("backups did not catch up: {status}"));
                break status;
            }
            thread::sleep(Duration::from_millis(5));
        };
        let lsn = status["lsn"].as_u64().unwrap_or(0);
        let primary_checksum = match &mut self.load {
            Load::InProcess { handle, .. } => serde_json::to_value(
                handle
                    .as_ref()
                    .and_then(PrimaryHandle::checksum)
                    .ok_or_else(|| Failure::Run("the in-process primary stopped".into()))?,
            )
            .expect("serializable"),
            Load::Network { process, .. } => process.report()?["checksum"].clone(),
        };
        let mut consistent = primary_checksum["check"].is_null();
        if !consistent {
            problems.push(format!("primary: {}", primary_checksum["check"]));
        }
        let mut checksums_match = primary_checksum["lsn"].as_u64() == Some(lsn);
        for (backup, node_id) in self.backups.iter_mut().zip(&self.backup_ids) {
            let report = backup.report()?;
            let checksum = &report["checksum"];
            if checksum["lsn"] != primary_checksum["lsn"]
                || checksum["crc32c"] != primary_checksum["crc32c"]
                || !checksum["error"].is_null()
            {
                checksums_match = false;
                problems.push(format!(
                    "backup {node_id} at LSN {} has checksum {} but the primary at LSN {} has {}{}",
                    checksum["lsn"],
                    checksum["crc32c"],
                    primary_checksum["lsn"],
                    primary_checksum["crc32c"],
                    checksum["error"]
                        .as_str()
                        .map(|e| format!(" ({e})"))
                        .unwrap_or_default()
                ));
            }
            if !checksum["check"].is_null() {
                consistent = false;
                problems.push(format!("backup {node_id}: {}", checksum["check"]));
            }
        }
        if let Load::InProcess { handle, load } = &mut self.load
            && let Some(handle) = handle.take()
        {
            handle.stop();
            if let Some(Err(err)) = load.check.lock().expect("not poisoned").clone() {
                consistent = false;
                problems.push(format!("driver check: {err}"));
            }
        }
        let commits = status["commits"].as_u64().unwrap_or(0).max(1) as f64;
        let per_tx = |key: &str| status[key].as_u64().unwrap_or(0) as f64 / commits;
        let (data, undo, meta) = (
            per_tx("shipped_data_bytes"),
            per_tx("shipped_undo_bytes"),
            per_tx("shipped_meta_bytes"),
        );
        let backups = self.backup_ids.len().max(1) as f64;
        Ok(ReplicationRun {
            mode: self.kind.mode(),
            strategy: self.kind.strategy().name(),
            safety: if self.kind == Kind::Standalone {
                "none".into()
            } else {
                args.safety.to_string()
            },
            driver: match args.driver {
                DriverKind::InProcess => "in-process",
                DriverKind::Network => "network",
            },
            backups: self.backup_ids.len() as u32,
            clients,
            tx_per_s: 0.0,
            ratio_to_standalone: None,
            latency_us: Latency::default(),
            shipped_bytes_per_tx: if self.kind == Kind::Standalone {
                Shipped::default()
            } else {
                Shipped {
                    data,
                    undo,
                    meta,
                    total: data + undo + meta,
                }
            },
            wire_bytes_per_tx: per_tx("shipped_wire_bytes") / backups,
            committed: status["commits"].as_u64().unwrap_or(0),
            slices: 0,
            lsn,
            checksums_match,
            consistent,
            half_load: None,
            problems,
        })
    }
}

fn latency_of(histogram: &Histogram<u64>) -> Latency {
    if histogram.is_empty() {
        return Latency::default();
    }
    let us = |q: f64| histogram.value_at_quantile(q) as f64 / 1000.0;
    Latency {
        p50: us(0.5),
        p99: us(0.99),
        p999: us(0.999),
    }
}

/// A generator of calls: writes the next call's arguments and returns its procedure.
type CallSource = Box<dyn FnMut(&mut Vec<u8>) -> u16 + Send>;

/// The network driver's client connections for one group.
struct NetworkClients {
    active: AtomicBool,
    replies: AtomicU64,
    outstanding: AtomicU64,
    /// 0: closed loop with `window` calls in flight per connection; otherwise an open-loop
    /// rate for all connections together, in calls per second.
    rate_per_s: AtomicU64,
    latency_ns: Mutex<Histogram<u64>>,
    address: SocketAddr,
    connections: u32,
    window: u32,
    sources: Mutex<Vec<CallSource>>,
    welcomed: AtomicBool,
    /// Set when the benchmark ends, so closed connections are not reported as errors.
    stopping: AtomicBool,
}

impl NetworkClients {
    fn new(
        workload: config::WorkloadName,
        db_bytes: usize,
        address: SocketAddr,
        connections: u32,
        window: u32,
        seed: u64,
    ) -> Result<Arc<NetworkClients>, Failure> {
        let model = tandem_workloads::model(workload.as_str(), db_bytes).map_err(Failure::Usage)?;
        let sources = (0..connections)
            .map(|index| {
                let mut driver = model
                    .driver(seed.wrapping_add(1 + u64::from(index)))
                    .ok_or_else(|| {
                        Failure::Usage(format!(
                            "the data model '{}' has no call generator",
                            model.name()
                        ))
                    })?;
                Ok(Box::new(move |args: &mut Vec<u8>| driver.next_call(args).0) as CallSource)
            })
            .collect::<Result<Vec<CallSource>, Failure>>()?;
        Ok(Arc::new(NetworkClients {
            active: AtomicBool::new(false),
            replies: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            rate_per_s: AtomicU64::new(0),
            latency_ns: Mutex::new(Histogram::new(3).expect("valid")),
            address,
            connections,
            window,
            sources: Mutex::new(sources),
            welcomed: AtomicBool::new(false),
            stopping: AtomicBool::new(false),
        }))
    }

    /// Opens the connections. Each has a receiver thread, which reads replies and, in closed
    /// loop, sends the next calls at once. One pacer thread for all of them starts the closed
    /// loop and sends on schedule in open loop. (Socket read timeouts are rounded to the
    /// kernel's jiffies, so pacing cannot ride on them.)
    fn connect(self: &Arc<Self>) -> Result<(), Failure> {
        let sources: Vec<CallSource> =
            std::mem::take(&mut *self.sources.lock().expect("not poisoned"));
        let mut connections = Vec::new();
        for (index, source) in sources.into_iter().enumerate() {
            let mut stream = TcpStream::connect(self.address).map_err(|err| {
                Failure::Run(format!("cannot connect to {}: {err}", self.address))
            })?;
            stream
                .set_nodelay(true)
                .map_err(|err| Failure::Run(err.to_string()))?;
            let mut hello = Vec::new();
            encode_hello(
                &mut hello,
                &Hello::new(PeerKind::Client, 1000 + index as u64, 0),
            );
            stream
                .write_all(&hello)
                .map_err(|err| Failure::Run(err.to_string()))?;
            let writer = stream
                .try_clone()
                .map_err(|err| Failure::Run(err.to_string()))?;
            let connection = Arc::new(Connection {
                sender: Mutex::new(Sender {
                    stream: writer,
                    source,
                    seq: 0,
                    args: Vec::new(),
                    out: Vec::new(),
                }),
                in_flight: Mutex::new(std::collections::VecDeque::new()),
            });
            let (clients, receiving) = (Arc::clone(self), Arc::clone(&connection));
            thread::Builder::new()
                .name(format!("bench-client-{index}"))
                .spawn(move || {
                    if let Err(err) = clients.receive(stream, &receiving)
                        && !clients.stopping.load(Ordering::Acquire)
                    {
                        eprintln!("bench client {index}: {err}");
                    }
                })
                .map_err(|err| Failure::Run(err.to_string()))?;
            connections.push(connection);
        }
        let clients = Arc::clone(self);
        thread::Builder::new()
            .name("bench-pacer".into())
            .spawn(move || clients.pace(&connections))
            .map_err(|err| Failure::Run(err.to_string()))?;
        Ok(())
    }

    /// Sends `count` calls in one write; the i-th counts its latency from `started(i)`.
    fn send(
        &self,
        connection: &Connection,
        count: usize,
        started: impl Fn(usize) -> Instant,
    ) -> Result<(), String> {
        let mut sender = connection.sender.lock().expect("not poisoned");
        let sender = &mut *sender;
        sender.out.clear();
        for _ in 0..count {
            sender.seq += 1;
            let proc_id = (sender.source)(&mut sender.args);
            encode_call(&mut sender.out, sender.seq, proc_id, None, &sender.args);
        }
        {
            let mut in_flight = connection.in_flight.lock().expect("not poisoned");
            in_flight.extend((0..count).map(started));
        }
        self.outstanding.fetch_add(count as u64, Ordering::AcqRel);
        sender
            .stream
            .write_all(&sender.out)
            .map_err(|err| err.to_string())
    }

    /// Starts the closed loop when the load turns on; sends on schedule in open loop, each
    /// connection carrying an equal share of the rate.
    fn pace(&self, connections: &[Arc<Connection>]) {
        let mut next_send = vec![Instant::now(); connections.len()];
        loop {
            if self.stopping.load(Ordering::Acquire) {
                return;
            }
            let active = self.active.load(Ordering::Acquire);
            let rate = self.rate_per_s.load(Ordering::Acquire);
            if !active || !self.welcomed.load(Ordering::Acquire) {
                next_send.fill(Instant::now());
                thread::sleep(Duration::from_micros(500));
                continue;
            }
            if rate == 0 {
                for connection in connections {
                    let idle = connection
                        .in_flight
                        .lock()
                        .expect("not poisoned")
                        .is_empty();
                    let now = Instant::now();
                    if idle
                        && self
                            .send(connection, self.window as usize, |_| now)
                            .is_err()
                    {
                        return;
                    }
                }
                thread::sleep(Duration::from_millis(1));
                continue;
            }
            // Open loop: each call leaves on its schedule, and its latency counts from the
            // schedule, so a late send is charged to the system (no coordinated omission).
            let interval = Duration::from_secs_f64(f64::from(self.connections) / rate as f64);
            let now = Instant::now();
            for (connection, next) in connections.iter().zip(&mut next_send) {
                if *next + Duration::from_millis(100) < now {
                    *next = now;
                }
                let mut due = 0usize;
                while *next + interval * due as u32 <= now {
                    due += 1;
                }
                let first = *next;
                if due > 0
                    && self
                        .send(connection, due, |i| first + interval * i as u32)
                        .is_err()
                {
                    return;
                }
                *next += interval * due as u32;
            }
            // Wake at most every PACING_QUANTUM: each wake is a send per connection, and on a
            // 2-core machine the load generator competes with the system it measures. Calls
            // that fall due between wakes wait for the next one, and that wait counts in their
            // latency.
            let earliest = next_send.iter().min().copied().unwrap_or(now);
            thread::sleep(
                earliest
                    .saturating_duration_since(Instant::now())
                    .max(PACING_QUANTUM),
            );
        }
    }

    fn receive(&self, mut stream: TcpStream, connection: &Connection) -> Result<(), String> {
        let mut buffer = FrameBuffer::new(tandem_wire::MAX_FRAME_LEN_DEFAULT);
        let mut histogram = Histogram::<u64>::new(3).expect("valid");
        loop {
            match stream.read(buffer.spare()) {
                Ok(0) => return Err("the primary closed the connection".into()),
                Ok(n) => buffer.filled(n),
                Err(err) => return Err(err.to_string()),
            }
            let mut answered = 0usize;
            let now = Instant::now();
            while let Some(frame) = buffer.next_frame().map_err(|err| err.to_string())? {
                match frame {
                    Frame::Welcome(_) => self.welcomed.store(true, Ordering::Release),
                    Frame::Reply(reply) => {
                        let started = connection
                            .in_flight
                            .lock()
                            .expect("not poisoned")
                            .pop_front()
                            .ok_or("a reply nobody asked for")?;
                        if matches!(
                            reply.status,
                            ReplyStatus::Committed | ReplyStatus::RolledBack
                        ) {
                            let latency = now.duration_since(started).as_nanos().max(1) as u64;
                            let _ = histogram.record(latency);
                        }
                        answered += 1;
                    }
                    Frame::Error(err) => return Err(format!("error frame: {}", err.message)),
                    _ => return Err("unexpected frame".into()),
                }
            }
            if answered == 0 {
                continue;
            }
            self.replies.fetch_add(answered as u64, Ordering::Relaxed);
            self.outstanding
                .fetch_sub(answered as u64, Ordering::AcqRel);
            let closed_loop = self.rate_per_s.load(Ordering::Acquire) == 0;
            if closed_loop && self.active.load(Ordering::Acquire) {
                let now = Instant::now();
                self.send(connection, answered, |_| now)?;
            }
            if histogram.len() > 4096 || self.outstanding.load(Ordering::Acquire) == 0 {
                let _ = self
                    .latency_ns
                    .lock()
                    .expect("not poisoned")
                    .add(&histogram);
                histogram.reset();
            }
        }
    }
}

/// One client connection's sending half and the start times of its calls in flight.
struct Connection {
    sender: Mutex<Sender>,
    in_flight: Mutex<std::collections::VecDeque<Instant>>,
}

struct Sender {
    stream: TcpStream,
    source: CallSource,
    seq: u64,
    args: Vec<u8>,
    out: Vec<u8>,
}

impl Drop for NetworkClients {
    fn drop(&mut self) {
        self.stopping.store(true, Ordering::Release);
    }
}
