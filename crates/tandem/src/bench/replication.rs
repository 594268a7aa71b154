//! `tandem bench replication`: a primary and its backups on loopback (seed 000 §5–7).
//!
//! Every contender is a whole group: a primary and `--backups` backup processes
//! (`tandem node`), all loaded with the same deterministic database. The contenders are
//! standalone (a primary without backups), passive (the primary's logging strategy writes
//! through to mirror memory on the backups, which only store bytes) and active (V3 locally, redo
//! records shipped and applied). With the in-process driver the primary runs inside this
//! process and its node thread generates the calls; with the network driver the primary is a
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
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use serde_json::Value;
use tandem_client::load::{CallSource, LoadClients};
use tandem_memory::Strategy;
use tandem_replication::Safety;
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{self, Mode, NodeConfig, PeerConfig, Role};
use tandem_runtime::primary::LocalLoad;

use crate::Failure;
use crate::bench::median;
use crate::cli::{BenchMode, DriverKind, PeerAuthMode, ReplicationArgs, WorkloadName};

/// Length of one measured turn of one contender.
const SLICE: Duration = Duration::from_millis(250);
/// Unmeasured turn each contender takes first.
const WARMUP: Duration = Duration::from_millis(250);
/// How long a group may take to load its database and connect.
const READY_TIMEOUT: Duration = Duration::from_secs(120);

/// One line of the report.
#[derive(Debug, Serialize)]
pub struct ReplicationRun {
    pub mode: &'static str,
    /// Whether the links were authenticated (a MAC on every frame, or TLS).
    pub peer_auth: bool,
    /// What the links were: `plain`, `mac` (a `peer_secret`) or `tls`.
    pub peer_link: &'static str,
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
    let workload = args.workload;
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
    // Each contender: a kind, and what its links are.
    let contenders: Vec<(Kind, PeerLink)> = kinds
        .iter()
        .flat_map(|&kind| {
            let links: &[PeerLink] = match (kind, args.peer_auth) {
                (Kind::Standalone, _) | (_, PeerAuthMode::Off) => &[PeerLink::Plain],
                (_, PeerAuthMode::On) => &[PeerLink::Mac],
                (_, PeerAuthMode::Tls) => &[PeerLink::Tls],
                (_, PeerAuthMode::Both) => &[PeerLink::Plain, PeerLink::Mac],
                (_, PeerAuthMode::All) => &[PeerLink::Plain, PeerLink::Mac, PeerLink::Tls],
            };
            links.iter().map(move |&link| (kind, link))
        })
        .collect();
    if !args.json {
        eprintln!(
            "starting {} group(s) of 1 primary + {} backup(s) (logs in {})",
            contenders.len(),
            args.backups,
            dir.display()
        );
    }
    let mut groups = Vec::new();
    for (index, &(kind, link)) in contenders.iter().enumerate() {
        let group = Group::start(args, kind, link, workload, clients, index, &dir, &exe)?;
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
        let mode = if run.peer_auth {
            format!("{}+{}", run.mode, run.peer_link)
        } else {
            run.mode.to_owned()
        };
        println!(
            "{:<11} {:<4} {:<15} {:>11.0} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>7.1} {:>7.1} {:>7.1} {:>7.1} {:>8}",
            mode,
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
    free_address_on(std::net::IpAddr::from([127, 0, 0, 1]))
}

/// [`free_address`] on `ip` (a port free there; on the unspecified address, on every one).
pub(crate) fn free_address_on(ip: std::net::IpAddr) -> Result<SocketAddr, Failure> {
    free_run_on(ip, 1)
}

/// The first of `count` consecutive ports free on 127.0.0.1 (a node's RESP endpoints, one
/// per group it serves in), as [`free_address`] draws one.
pub(crate) fn free_run(count: u16) -> Result<SocketAddr, Failure> {
    free_run_on(std::net::IpAddr::from([127, 0, 0, 1]), count)
}

/// [`free_run`] on `ip`.
fn free_run_on(ip: std::net::IpAddr, count: u16) -> Result<SocketAddr, Failure> {
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
        let run = port..port + count;
        // Nothing binds a port until its child starts: this process must not hand it out
        // twice either.
        let mut handed_out = HANDED_OUT.lock().expect("not poisoned");
        let free = run.clone().all(|port| {
            !handed_out.contains(&port) && TcpListener::bind(SocketAddr::new(ip, port)).is_ok()
        });
        if free {
            handed_out.extend(run);
            return Ok(SocketAddr::new(ip, port));
        }
    }
    Err(Failure::Run(format!(
        "no free port on {ip} in 20000..32000 after 64 tries"
    )))
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
        // It may hold the run's peer secret.
        crate::local::write_private(&path, &config.to_toml_string())?;
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

    /// The node's status (`/status`, cheap), or with `checksum` its status and checksum
    /// (`/checksum`, which pauses the node while it is taken).
    fn report(&mut self, checksum: bool) -> Result<Value, Failure> {
        if let Ok(Some(status)) = self.child.try_wait() {
            let log = fs::read_to_string(&self.log).unwrap_or_default();
            return Err(Failure::Run(format!(
                "a node exited ({status}); its log:\n{log}"
            )));
        }
        let path = if checksum { "/checksum" } else { "/status" };
        http_get_json(self.status, path)
    }
}

/// GET `path` from a node's HTTP endpoint and parse the JSON body.
pub(crate) fn http_get_json(address: SocketAddr, path: &str) -> Result<Value, Failure> {
    http_get_json_as(address, path, None)
}

/// [`http_get_json`] with the node's password as `Authorization: Bearer`, if `password` is
/// given (`/checksum` asks for it on a node whose HTTP address is not loopback). A refusal
/// (401, 403) is an error with the node's own explanation.
pub(crate) fn http_get_json_as(
    address: SocketAddr,
    path: &str,
    password: Option<&str>,
) -> Result<Value, Failure> {
    let fail = |what: String| Failure::Run(format!("GET http://{address}{path}: {what}"));
    let mut stream = TcpStream::connect_timeout(&address, Duration::from_secs(2))
        .map_err(|err| fail(err.to_string()))?;
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .map_err(|err| fail(err.to_string()))?;
    let authorization = password
        .map(|password| format!("Authorization: Bearer {password}\r\n"))
        .unwrap_or_default();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: tandem\r\n{authorization}Connection: close\r\n\r\n"
    )
    .map_err(|err| fail(err.to_string()))?;
    let mut response = String::new();
    stream
        .read_to_string(&mut response)
        .map_err(|err| fail(err.to_string()))?;
    let (head, body) = response
        .split_once("\r\n\r\n")
        .ok_or_else(|| fail("no HTTP body".into()))?;
    let code = head.split(' ').nth(1).unwrap_or("");
    if code != "200" {
        return Err(fail(format!("HTTP {code}: {}", body.trim_end())));
    }
    serde_json::from_str(body).map_err(|err| fail(format!("bad JSON: {err}")))
}

/// Starts the primary `config` describes in this process, driven by `load`.
fn start_in_process(
    config: &NodeConfig,
    listener: TcpListener,
    model: Box<dyn tandem_store::DataModel>,
    load: &Arc<LocalLoad>,
) -> Result<RunningNode, Failure> {
    let listeners = tandem_runtime::Listeners {
        native: listener,
        metrics: None,
        resp: Vec::new(),
    };
    let stop = tandem_runtime::StopWhen::default();
    tandem_runtime::start_node(config, listeners, model, stop, Some(Arc::clone(load)))
        .map_err(|err| Failure::Run(err.to_string()))
}

/// The role's part of a node's `/status` or `/checksum`, which nests it under `report`
/// beside the cluster's view.
fn role_report(mut report: Value) -> Value {
    report["report"].take()
}

/// The in-process driver's own check of what it committed, run on the primary's thread.
fn driver_check(primary: &RunningNode) -> Result<(), String> {
    let checked = primary.check(Duration::from_secs(30));
    checked.unwrap_or_else(|| Err("the primary did not run the driver's check".to_owned()))
}

/// How a group's primary is driven.
enum Load {
    InProcess {
        handle: Option<RunningNode>,
        load: Arc<LocalLoad>,
    },
    Network {
        process: NodeProcess,
        clients: Arc<LoadClients>,
    },
}

/// What a contender's peer links are.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PeerLink {
    Plain,
    /// A `peer_secret`: a MAC on every frame.
    Mac,
    /// TLS 1.3, with certificates from a CA made for the group.
    Tls,
}

impl PeerLink {
    fn name(self) -> &'static str {
        match self {
            PeerLink::Plain => "plain",
            PeerLink::Mac => "mac",
            PeerLink::Tls => "tls",
        }
    }
}

/// One contender: a primary and its backup processes.
struct Group {
    kind: Kind,
    link: PeerLink,
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
        link: PeerLink,
        workload: WorkloadName,
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
        base.group.workload = workload.as_str().to_owned();
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
        base.peer_secret = (link == PeerLink::Mac)
            .then(|| config::Secret("the bench's own peer secret, 32 bytes or more".to_owned()));
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
            role: Some(Role::Primary),
            resp: None,
        }];
        for backup in 0..backups {
            members.push(PeerConfig {
                node_id: 2 + backup,
                address: free_address()?,
                role: Some(Role::Backup),
                resp: None,
            });
        }
        let certificates = match link {
            PeerLink::Tls => Some(crate::local::Certificates::make(
                &dir.join(format!("group{index}-pki")),
                &members,
            )?),
            PeerLink::Plain | PeerLink::Mac => None,
        };
        let config_for = |member: &PeerConfig| -> Result<NodeConfig, Failure> {
            let mut config = base.for_member(member, &members);
            if let Some(certificates) = &certificates {
                let mut table = certificates.node(member.node_id);
                table.resp = false;
                config.tls = Some(table);
            }
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
                let handle = start_in_process(&primary_config, listener, model, &load)?;
                Load::InProcess {
                    handle: Some(handle),
                    load,
                }
            }
            DriverKind::Network => {
                let name = format!("group{index}-node1");
                let process = NodeProcess::spawn(exe, &primary_config, dir, &name)?;
                let sources =
                    call_sources(workload, (args.db_mib as usize) << 20, clients, args.seed)?;
                let clients = LoadClients::new(primary_listen, args.window, sources);
                Load::Network { process, clients }
            }
        };
        Ok(Group {
            kind,
            link,
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
                    .and_then(RunningNode::status)
                    .ok_or_else(|| Failure::Run("the in-process primary stopped".into()))?;
                Ok(serde_json::to_value(status).expect("serializable"))
            }
            Load::Network { process, .. } => {
                Ok(role_report(process.report(false)?)["status"].clone())
            }
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
                        clients
                            .connect()
                            .map_err(|err| Failure::Run(err.to_string()))?;
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
        let before = self.replies();
        let start = Instant::now();
        self.set_active(true);
        thread::sleep(length);
        let after = self.replies();
        let elapsed = start.elapsed();
        self.set_active(false);
        self.drain()?;
        Ok((after - before) as f64 / elapsed.as_secs_f64())
    }

    fn replies(&self) -> u64 {
        match &self.load {
            Load::InProcess { load, .. } => load.replies.load(Ordering::Relaxed),
            Load::Network { clients, .. } => clients.replies(),
        }
    }

    fn set_active(&self, active: bool) {
        match &self.load {
            Load::InProcess { load, .. } => load.active.store(active, Ordering::Release),
            Load::Network { clients, .. } => clients.set_active(active),
        }
    }

    fn outstanding(&self) -> u64 {
        match &self.load {
            Load::InProcess { load, .. } => load.outstanding.load(Ordering::Acquire),
            Load::Network { clients, .. } => clients.outstanding(),
        }
    }

    /// Waits until no call is waiting for its reply.
    fn drain(&self) -> Result<(), Failure> {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.outstanding() > 0 {
            if Instant::now() > deadline {
                return Err(Failure::Run(format!(
                    "{} group: {} replies still missing after 30 s",
                    self.kind.mode(),
                    self.outstanding()
                )));
            }
            thread::sleep(Duration::from_micros(200));
        }
        Ok(())
    }

    fn reset_latency(&self) {
        match &self.load {
            Load::InProcess { load, .. } => load.latency_ns.lock().expect("not poisoned").reset(),
            Load::Network { clients, .. } => clients.reset_latency(),
        }
    }

    fn latency(&self) -> Latency {
        let histogram = match &self.load {
            Load::InProcess { load, .. } => load.latency_ns.lock().expect("not poisoned").clone(),
            Load::Network { clients, .. } => clients.latency_ns(),
        };
        latency_of(&histogram)
    }

    fn half_load(&mut self, rate: f64, seconds: f64) -> Result<HalfLoad, Failure> {
        let Load::Network { clients, .. } = &self.load else {
            unreachable!("half load is measured with the network driver");
        };
        let clients = Arc::clone(clients);
        clients.reset_latency();
        let before = clients.replies();
        clients.set_rate_per_s(rate.max(1.0) as u64);
        let start = Instant::now();
        clients.set_active(true);
        thread::sleep(Duration::from_secs_f64(seconds));
        let after = clients.replies();
        let elapsed = start.elapsed();
        clients.set_active(false);
        self.drain()?;
        clients.set_rate_per_s(0);
        let histogram = clients.latency_ns();
        Ok(HalfLoad {
            offered_tx_per_s: rate,
            tx_per_s: (after - before) as f64 / elapsed.as_secs_f64(),
            latency_us: latency_of(&histogram),
        })
    }

    /// Stops the load, waits for every backup to apply everything, compares checksums.
    fn finish(&mut self, args: &ReplicationArgs, clients: u32) -> Result<ReplicationRun, Failure> {
        if let Load::Network { clients, .. } = &self.load {
            clients.stop();
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
                    .and_then(RunningNode::checksum)
                    .ok_or_else(|| Failure::Run("the in-process primary stopped".into()))?,
            )
            .expect("serializable"),
            Load::Network { process, .. } => role_report(process.report(true)?)["checksum"].clone(),
        };
        let mut consistent = primary_checksum["check"].is_null();
        if !consistent {
            problems.push(format!("primary: {}", primary_checksum["check"]));
        }
        let mut checksums_match = primary_checksum["lsn"].as_u64() == Some(lsn);
        for (backup, node_id) in self.backups.iter_mut().zip(&self.backup_ids) {
            let report = role_report(backup.report(true)?);
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
        if let Load::InProcess { handle, .. } = &mut self.load
            && let Some(handle) = handle.take()
            && let Err(err) = driver_check(&handle)
        {
            consistent = false;
            problems.push(format!("driver check: {err}"));
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
            peer_auth: self.link != PeerLink::Plain,
            peer_link: self.link.name(),
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

/// One call generator per client connection, from the data model's seeded driver.
fn call_sources(
    workload: WorkloadName,
    db_bytes: usize,
    connections: u32,
    seed: u64,
) -> Result<Vec<CallSource>, Failure> {
    let model = tandem_workloads::model(workload.as_str(), db_bytes).map_err(Failure::Usage)?;
    (0..connections)
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
        .collect()
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
