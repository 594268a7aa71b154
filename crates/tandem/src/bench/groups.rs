//! `tandem bench groups`: what splitting the data over several replication groups buys, in
//! committed Debit-Credit calls per second and in the nodes' CPU per call.
//!
//! Each contender is a group count G (`--groups`, default `1,3`). Every contender gets a
//! local cluster of its own of `--nodes` `tandem node` children (2-safe), holding G groups,
//! each a Debit-Credit database of `--db-mib` MiB with its own log and primary: group g
//! (numbered 1..G when G > 1; a one-group cluster has group 0) is led by node
//! (g − 1) mod N + 1 and backed up by every other node. All the clusters start up front
//! and stay up, so that the contenders can take turns: one unmeasured warm-up slice each,
//! then `--rounds` rounds in which every contender runs one slice of `--seconds`, their
//! order rotated every round, so that the noise of a shared machine falls on all of them
//! alike. An idle cluster costs little.
//!
//! In a slice, `--clients` threads each drive one stub client of the contender closed-loop
//! (a TPC-B call from the workload's own driver, its answer, the next call); client i calls
//! group (i mod G) + 1, or group 0 when G is 1. A slice measures committed calls per wall
//! second, the nodes' CPU (utime + stime of every node process, from `/proc`) per committed
//! call, and this process's CPU per committed call (the clients', for reference: they share
//! the machine with the nodes). A contender's report gives the medians over its rounds, the
//! lowest and highest rate, and the ratios of its median rate and CPU per call to the first
//! contender's. Calls that end in an error or a rollback are counted apart.
//!
//! The run checks what it measures: after the rounds each cluster settles (every member of
//! every group applied all its primary committed) and every node's `/checksum` is read. A
//! group whose members' checksums differ at their LSN, a member at another LSN, a failed
//! consistency check or a missing checksum fails the run (exit 1).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tandem_client::{Client, ClientConfig};
use tandem_store::{Driver, Workload};
use tandem_workloads::debit_credit::{
    DEBIT_CREDIT, DebitCredit, DebitCreditConfig, DebitCreditDriver,
};

use crate::Failure;
use crate::bench::median;
use crate::bench::resp_load::{cpu_seconds, cpu_seconds_of};
use crate::cli::GroupsArgs;
use crate::local::{LocalCluster, Options};

/// The most groups a local cluster takes (`tandem up --groups`).
pub const GROUPS_MAX: u32 = 16;

/// How long a cluster may take to load its databases and settle, at the start and before
/// its checksums are read.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

/// The group counts to compare, in the order given; the first is the ratios' baseline.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupCounts(pub Vec<u32>);

/// `--groups`: distinct group counts, 1 to [`GROUPS_MAX`] each, comma-separated.
pub fn parse_group_counts(text: &str) -> Result<GroupCounts, String> {
    let mut counts = Vec::new();
    for part in text.split(',').map(str::trim) {
        let count = match part.parse::<u32>() {
            Ok(count @ 1..=GROUPS_MAX) => count,
            _ => {
                return Err(format!(
                    "'{part}' is not a group count; give 1 to {GROUPS_MAX} (what `tandem up \
                     --groups` takes), comma-separated, e.g. 1,3"
                ));
            }
        };
        if counts.contains(&count) {
            return Err(format!(
                "{count} is listed twice; give each group count once"
            ));
        }
        counts.push(count);
    }
    Ok(counts.into())
}

impl From<Vec<u32>> for GroupCounts {
    fn from(counts: Vec<u32>) -> GroupCounts {
        GroupCounts(counts)
    }
}

/// The group client `index` calls in a cluster of `groups` groups: the clients are dealt
/// round the groups, numbered from 1, and a one-group cluster's group is 0.
pub fn group_of_client(index: u32, groups: u32) -> u32 {
    assert!(groups >= 1, "a cluster has at least one group");
    if groups == 1 { 0 } else { index % groups + 1 }
}

/// What clap cannot check flag by flag: every group of every contender gets a client.
pub fn validate(args: &GroupsArgs) -> Result<(), Failure> {
    let most = args.groups.0.iter().copied().max().unwrap_or(1);
    if args.clients < most {
        return Err(Failure::Usage(format!(
            "--clients {} leaves groups without a client under --groups {most}: give at least \
             {most} clients (one per group), or fewer groups",
            args.clients
        )));
    }
    Ok(())
}

/// One stub client and the calls it draws.
struct Stub {
    client: Client,
    group: u32,
    driver: DebitCreditDriver,
}

/// One group count's cluster, stubs and measurements.
struct Contender {
    groups: u32,
    cluster: LocalCluster,
    node_pids: Vec<u32>,
    /// Each group's primary when the cluster settled, by group.
    primaries: Vec<GroupPrimary>,
    stubs: Vec<Stub>,
    samples: Samples,
}

/// A group and the node that led it when its cluster settled.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct GroupPrimary {
    pub group: u32,
    pub primary: u32,
}

/// A contender's measured slices.
#[derive(Default)]
struct Samples {
    calls_per_s: Vec<f64>,
    server_cpu_us_per_op: Vec<f64>,
    bench_cpu_us_per_op: Vec<f64>,
    server_cpu_cores: Vec<f64>,
    tally: Tally,
}

/// What client threads counted: in one slice, or summed over a contender's slices.
#[derive(Clone, Debug, Default)]
struct Tally {
    committed: u64,
    rolled_back: u64,
    errors: u64,
    /// Call frames sent again (a timeout or a lost primary), beyond one per call.
    resends: u64,
    committed_by_group: BTreeMap<u32, u64>,
    first_error: Option<String>,
}

impl Tally {
    fn add(&mut self, other: &Tally) {
        self.committed += other.committed;
        self.rolled_back += other.rolled_back;
        self.errors += other.errors;
        self.resends += other.resends;
        for (group, committed) in &other.committed_by_group {
            *self.committed_by_group.entry(*group).or_default() += committed;
        }
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
    }
}

/// What one slice of one contender measured.
struct Slice {
    tally: Tally,
    wall_s: f64,
    server_cpu_s: f64,
    bench_cpu_s: f64,
}

pub fn run(args: &GroupsArgs) -> Result<(), Failure> {
    validate(args)?;
    let db_mib = args.db_mib as usize;
    let layout = DebitCredit::new(db_mib << 20, &DebitCreditConfig::default())
        .map_err(|err| Failure::Usage(format!("--db-mib {db_mib}: {err}")))?;
    let (dir, scratch) = match &args.dir {
        Some(dir) => (dir.clone(), false),
        None => (scratch_dir(), true),
    };
    let result = run_in(args, &dir, &layout);
    match result {
        Ok(()) if scratch => {
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        }
        Ok(()) => Ok(()),
        Err(failure) => Err(Failure::Run(format!(
            "{} (the clusters' files, node logs among them, stay in {})",
            failure.text(),
            dir.display()
        ))),
    }
}

/// A fresh folder of this process's own under the system's temp dir.
fn scratch_dir() -> PathBuf {
    std::env::temp_dir().join(format!("tandem-bench-groups-{}", std::process::id()))
}

fn run_in(args: &GroupsArgs, dir: &Path, layout: &DebitCredit) -> Result<(), Failure> {
    let say = |text: &str| {
        if !args.json {
            eprintln!("{text}");
        }
    };
    std::fs::create_dir_all(dir)
        .map_err(|err| Failure::Run(format!("cannot make {}: {err}", dir.display())))?;
    let mut contenders = Vec::new();
    for (index, &groups) in args.groups.0.iter().enumerate() {
        say(&format!(
            "starting {} nodes with {groups} group(s) of {} MiB under {}",
            args.nodes,
            args.db_mib,
            dir.display()
        ));
        contenders.push(start_contender(args, dir, layout, groups, index as u64)?);
    }
    measure(&mut contenders, args, &say)?;
    say("rounds done; every cluster settles and each node's checksums are compared");
    let mut findings = Vec::new();
    for contender in &mut contenders {
        findings.extend(check_replicas(contender)?);
    }
    let report = report(args, &contenders, findings);
    // The nodes are this process's children: dropping a cluster kills and reaps each.
    drop(contenders);
    if args.json {
        let text = serde_json::to_string_pretty(&report).expect("a report serializes");
        println!("{text}");
    } else {
        print_table(&report);
    }
    if !report.findings.is_empty() {
        return Err(Failure::Run(format!(
            "REPLICAS DISAGREE: {}",
            report.findings.join("; ")
        )));
    }
    Ok(())
}

/// Starts a settled cluster of `groups` groups under `dir` and one stub per client thread.
fn start_contender(
    args: &GroupsArgs,
    dir: &Path,
    layout: &DebitCredit,
    groups: u32,
    index: u64,
) -> Result<Contender, Failure> {
    let mut options = Options::new(args.nodes).with_db_mib(args.db_mib as usize);
    options.groups = groups;
    assert_eq!(options.workload, "debit-credit");
    let cluster_dir = dir.join(format!("groups-{groups}"));
    let (cluster, settled) = LocalCluster::start_settled(&cluster_dir, &options, SETTLE_TIMEOUT)?;
    let node_pids = cluster
        .nodes
        .iter()
        .map(|node| {
            node.pid()
                .ok_or_else(|| Failure::Run(format!("node {} has no process", node.entry.id)))
        })
        .collect::<Result<Vec<u32>, _>>()?;
    let primaries = settled
        .groups
        .iter()
        .map(|group| GroupPrimary {
            group: group.group,
            primary: group.primary,
        })
        .collect();
    let addresses = cluster.addresses();
    let mut stubs = Vec::new();
    for client in 0..args.clients {
        let group = group_of_client(client, groups);
        let client_id = 1 + u64::from(client);
        let client = Client::new(ClientConfig::new(addresses.clone(), group, client_id))
            .map_err(|err| Failure::Run(format!("client {client_id}: {err}")))?;
        let driver = layout.driver(0x6_0000 + (index << 16) + client_id);
        stubs.push(Stub {
            client,
            group,
            driver,
        });
    }
    Ok(Contender {
        groups,
        cluster,
        node_pids,
        primaries,
        stubs,
        samples: Samples::default(),
    })
}

/// A warm-up slice per contender (connections open, pages fault in), then `--rounds`
/// rounds of measured slices, the contenders' order rotated by one each round.
fn measure(
    contenders: &mut [Contender],
    args: &GroupsArgs,
    say: &dyn Fn(&str),
) -> Result<(), Failure> {
    let slice = Duration::from_secs_f64(args.seconds);
    for contender in contenders.iter_mut() {
        run_slice(contender, slice)?;
    }
    say(&format!(
        "warmed up; measuring {} contenders in {} round(s) of {} s slices",
        contenders.len(),
        args.rounds,
        args.seconds
    ));
    for round in 0..args.rounds as usize {
        for turn in 0..contenders.len() {
            let contender = &mut contenders[(round + turn) % contenders.len()];
            let measured = run_slice(contender, slice)?;
            contender.samples.record(&measured);
        }
    }
    Ok(())
}

impl Samples {
    fn record(&mut self, slice: &Slice) {
        let committed = slice.tally.committed;
        self.calls_per_s.push(committed as f64 / slice.wall_s);
        self.server_cpu_cores
            .push(slice.server_cpu_s / slice.wall_s);
        // A slice that committed nothing has no cost per call; its rate of 0 still counts.
        if committed > 0 {
            let per_op_us = |seconds: f64| seconds * 1e6 / committed as f64;
            self.server_cpu_us_per_op
                .push(per_op_us(slice.server_cpu_s));
            self.bench_cpu_us_per_op.push(per_op_us(slice.bench_cpu_s));
        }
        self.tally.add(&slice.tally);
    }
}

/// Runs every stub of `contender` on a thread of its own for `slice`, and reads the CPU
/// the nodes and this process used meanwhile.
fn run_slice(contender: &mut Contender, slice: Duration) -> Result<Slice, Failure> {
    let server_cpu = |pids: &[u32]| {
        cpu_seconds_of(pids).ok_or_else(|| {
            Failure::Run("a node's /proc/PID/stat is unreadable: did a node exit?".into())
        })
    };
    let bench_cpu =
        || cpu_seconds("self").ok_or_else(|| Failure::Run("/proc/self/stat is unreadable".into()));
    let stop = AtomicBool::new(false);
    let (server_before, bench_before) = (server_cpu(&contender.node_pids)?, bench_cpu()?);
    let started = Instant::now();
    let tallies = thread::scope(|scope| {
        let threads: Vec<_> = contender
            .stubs
            .iter_mut()
            .map(|stub| {
                let stop = &stop;
                scope.spawn(move || call_until(stub, stop))
            })
            .collect();
        thread::sleep(slice);
        stop.store(true, Ordering::Relaxed);
        threads
            .into_iter()
            .map(|thread| thread.join())
            .collect::<Result<Vec<Tally>, _>>()
    })
    .map_err(|_| Failure::Run("a client thread panicked".into()))?;
    // Every call a thread started before the stop is counted, so the slice lasts until the
    // last thread finished.
    let wall_s = started.elapsed().as_secs_f64();
    let (server_after, bench_after) = (server_cpu(&contender.node_pids)?, bench_cpu()?);
    let mut tally = Tally::default();
    for thread_tally in &tallies {
        tally.add(thread_tally);
    }
    Ok(Slice {
        tally,
        wall_s,
        server_cpu_s: server_after - server_before,
        bench_cpu_s: bench_after - bench_before,
    })
}

/// Issues the stub's calls one after another until `stop`.
fn call_until(stub: &mut Stub, stop: &AtomicBool) -> Tally {
    let mut tally = Tally::default();
    let mut args = Vec::new();
    let (attempts_before, calls_before) = (stub.client.stats().attempts, stub.client.stats().calls);
    while !stop.load(Ordering::Relaxed) {
        let proc_id = stub.driver.next_call(&mut args);
        assert_eq!(
            proc_id, DEBIT_CREDIT,
            "the driver issues debit-credit calls"
        );
        match stub.client.call(proc_id.0, &args, None) {
            Ok(outcome) if outcome.committed() => {
                tally.committed += 1;
                *tally.committed_by_group.entry(stub.group).or_default() += 1;
            }
            Ok(_) => tally.rolled_back += 1,
            Err(err) => {
                tally.errors += 1;
                if tally.first_error.is_none() {
                    tally.first_error = Some(format!("group {}: {err}", stub.group));
                }
            }
        }
    }
    let stats = stub.client.stats();
    let attempts = stats.attempts - attempts_before;
    let calls = stats.calls - calls_before;
    tally.resends = attempts.saturating_sub(calls);
    tally
}

/// One node's checksum of one group, as its `/checksum` gives it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    pub node: u32,
    pub group: u32,
    pub lsn: Option<u64>,
    pub crc32c: Option<u64>,
    /// Why the node could take no checksum.
    pub error: Option<String>,
    /// The workload's consistency check, when it failed.
    pub check: Option<String>,
}

/// Every group's checksum in a node's `/checksum` JSON (`groups: [{group, report}]`).
fn readings_of(node: u32, checksum: &Value) -> Vec<Reading> {
    let groups = checksum["groups"].as_array().cloned().unwrap_or_default();
    groups
        .iter()
        .filter_map(|entry| {
            let group = entry["group"].as_u64()? as u32;
            let sum = &entry["report"]["checksum"];
            Some(Reading {
                node,
                group,
                lsn: sum["lsn"].as_u64(),
                crc32c: sum["crc32c"].as_u64(),
                error: sum["error"].as_str().map(str::to_owned),
                check: sum["check"].as_str().map(str::to_owned),
            })
        })
        .collect()
}

/// Settles the contender's cluster (so that every member of a group is at its primary's
/// LSN) and compares each group's checksums over its members.
fn check_replicas(contender: &mut Contender) -> Result<Vec<String>, Failure> {
    let settled = contender.cluster.wait_settled(SETTLE_TIMEOUT)?;
    let mut readings = Vec::new();
    let mut findings = Vec::new();
    for node in &contender.cluster.nodes {
        match node.checksum() {
            Ok(checksum) => readings.extend(readings_of(node.entry.id, &checksum)),
            Err(err) => findings.push(format!(
                "{} groups: node {} gave no /checksum: {}",
                contender.groups,
                node.entry.id,
                err.text()
            )),
        }
    }
    let nodes: Vec<u32> = contender.cluster.nodes.iter().map(|n| n.entry.id).collect();
    let groups: Vec<u32> = settled.groups.iter().map(|group| group.group).collect();
    let prefix = format!("{} groups: ", contender.groups);
    findings.extend(
        checksum_findings(&readings, &groups, &nodes)
            .into_iter()
            .map(|finding| format!("{prefix}{finding}")),
    );
    Ok(findings)
}

/// What is wrong with the checksums `readings` of `groups`, each of which every one of
/// `nodes` holds a copy of: a missing or failed checksum, a failed consistency check, or
/// members of a group at different LSNs or with different bytes at the same LSN.
pub fn checksum_findings(readings: &[Reading], groups: &[u32], nodes: &[u32]) -> Vec<String> {
    let mut findings = Vec::new();
    for &group in groups {
        let mut first: Option<(u32, u64, u64)> = None;
        for &node in nodes {
            let at = format!("node {node} group {group}");
            let Some(reading) = readings.iter().find(|r| r.node == node && r.group == group) else {
                findings.push(format!("{at}: not reported"));
                continue;
            };
            if let Some(check) = &reading.check {
                findings.push(format!("{at} fails its consistency check: {check}"));
            }
            // A checksum that could not be taken still carries an LSN and a CRC, of nothing.
            let (None, Some(lsn), Some(crc)) = (&reading.error, reading.lsn, reading.crc32c) else {
                let why = reading.error.as_deref().unwrap_or("none in the report");
                findings.push(format!("{at}: no checksum ({why})"));
                continue;
            };
            match first {
                None => first = Some((node, lsn, crc)),
                Some((node_first, lsn_first, _)) if lsn != lsn_first => findings.push(format!(
                    "{at} is at LSN {lsn}, node {node_first} at {lsn_first}, after settling"
                )),
                Some((node_first, _, crc_first)) if crc != crc_first => findings.push(format!(
                    "{at} and node {node_first} hold different bytes at LSN {lsn}"
                )),
                Some(_) => {}
            }
        }
    }
    findings
}

/// One contender's line of the report.
#[derive(Debug, Serialize)]
pub struct ContenderReport {
    pub groups: u32,
    /// Committed calls per wall second: the median over the rounds, and the extremes.
    pub calls_per_s: f64,
    pub calls_per_s_min: f64,
    pub calls_per_s_max: f64,
    /// `calls_per_s` over the first contender's; null when that committed nothing.
    pub calls_per_s_ratio: Option<f64>,
    /// The nodes' CPU per committed call, the median over the rounds; null when no slice
    /// committed anything.
    pub server_cpu_us_per_op: Option<f64>,
    /// `server_cpu_us_per_op` over the first contender's.
    pub server_cpu_us_per_op_ratio: Option<f64>,
    /// The nodes' CPU seconds per wall second, the median over the rounds.
    pub server_cpu_cores: f64,
    /// This process's CPU (the clients') per committed call, the median over the rounds.
    pub bench_cpu_us_per_op: Option<f64>,
    /// Calls committed, rolled back and ended in an error in all measured slices.
    pub committed: u64,
    pub rolled_back: u64,
    pub errors: u64,
    pub first_error: Option<String>,
    /// Call frames the stubs sent again (timeouts, a lost primary), beyond one per call.
    pub resends: u64,
    /// Each group's primary and its share of the committed calls.
    pub by_group: Vec<GroupShare>,
    pub slices: usize,
}

/// One group of a contender: who led it and what share of the calls it committed.
#[derive(Debug, Serialize)]
pub struct GroupShare {
    pub group: u32,
    pub primary: u32,
    pub clients: u32,
    pub committed: u64,
}

#[derive(Debug, Serialize)]
pub struct Report {
    pub contenders: Vec<ContenderReport>,
    pub nodes: u32,
    pub clients: u32,
    pub seconds: f64,
    pub rounds: u32,
    pub db_mib: u32,
    /// Cores of the machine, which every client thread and every node share.
    pub cores: usize,
    /// Calls that ended in an error, over all contenders.
    pub client_errors: u64,
    /// What the checksums after the rounds showed wrong; empty when every group's members
    /// agree and every consistency check held.
    pub findings: Vec<String>,
}

fn report(args: &GroupsArgs, contenders: &[Contender], findings: Vec<String>) -> Report {
    let mut lines: Vec<ContenderReport> = contenders
        .iter()
        .map(|contender| contender_report(contender, args.clients))
        .collect();
    let baseline_rate = lines.first().map(|line| line.calls_per_s);
    let baseline_cpu = lines.first().and_then(|line| line.server_cpu_us_per_op);
    for line in &mut lines {
        line.calls_per_s_ratio = ratio(Some(line.calls_per_s), baseline_rate);
        line.server_cpu_us_per_op_ratio = ratio(line.server_cpu_us_per_op, baseline_cpu);
    }
    Report {
        client_errors: lines.iter().map(|line| line.errors).sum(),
        contenders: lines,
        nodes: args.nodes,
        clients: args.clients,
        seconds: args.seconds,
        rounds: args.rounds,
        db_mib: args.db_mib,
        cores: cores(),
        findings,
    }
}

/// `value` over `baseline`, when both are known and the baseline is above zero.
pub fn ratio(value: Option<f64>, baseline: Option<f64>) -> Option<f64> {
    match (value, baseline) {
        (Some(value), Some(baseline)) if baseline > 0.0 => Some(value / baseline),
        _ => None,
    }
}

/// The median of `samples`, or `None` for none.
fn median_of(samples: &[f64]) -> Option<f64> {
    (!samples.is_empty()).then(|| median(samples))
}

fn cores() -> usize {
    thread::available_parallelism().map_or(1, usize::from)
}

fn contender_report(contender: &Contender, clients: u32) -> ContenderReport {
    let samples = &contender.samples;
    let rates = &samples.calls_per_s;
    let by_group = contender
        .primaries
        .iter()
        .map(|place| GroupShare {
            group: place.group,
            primary: place.primary,
            clients: (0..clients)
                .filter(|&client| group_of_client(client, contender.groups) == place.group)
                .count() as u32,
            committed: samples
                .tally
                .committed_by_group
                .get(&place.group)
                .copied()
                .unwrap_or(0),
        })
        .collect();
    ContenderReport {
        groups: contender.groups,
        calls_per_s: median_of(rates).unwrap_or(0.0),
        calls_per_s_min: rates.iter().copied().fold(f64::INFINITY, f64::min),
        calls_per_s_max: rates.iter().copied().fold(0.0, f64::max),
        calls_per_s_ratio: None,
        server_cpu_us_per_op: median_of(&samples.server_cpu_us_per_op),
        server_cpu_us_per_op_ratio: None,
        server_cpu_cores: median_of(&samples.server_cpu_cores).unwrap_or(0.0),
        bench_cpu_us_per_op: median_of(&samples.bench_cpu_us_per_op),
        committed: samples.tally.committed,
        rolled_back: samples.tally.rolled_back,
        errors: samples.tally.errors,
        first_error: samples.tally.first_error.clone(),
        resends: samples.tally.resends,
        by_group,
        slices: rates.len(),
    }
}

/// A figure with `decimals` decimals, or "-" for none.
fn shown(value: Option<f64>, decimals: usize) -> String {
    value.map_or("-".to_owned(), |value| format!("{value:.decimals$}"))
}

fn print_table(report: &Report) {
    println!(
        "groups on {} nodes (Debit-Credit, {} MiB per group, 2-safe): {} client threads, {} \
         round(s) of {} s slices per contender, interleaved; {} cores shared by clients and \
         nodes",
        report.nodes, report.db_mib, report.clients, report.rounds, report.seconds, report.cores
    );
    println!(
        "{:>6} {:>9} {:>9} {:>9} {:>7} {:>12} {:>7} {:>12} {:>9} {:>7} {:>7}",
        "groups",
        "calls/s",
        "min",
        "max",
        "ratio",
        "server µs/op",
        "ratio",
        "client µs/op",
        "srv cores",
        "resends",
        "errors"
    );
    for line in &report.contenders {
        println!(
            "{:>6} {:>9.0} {:>9.0} {:>9.0} {:>7} {:>12} {:>7} {:>12} {:>9.2} {:>7} {:>7}",
            line.groups,
            line.calls_per_s,
            line.calls_per_s_min,
            line.calls_per_s_max,
            shown(line.calls_per_s_ratio, 3),
            shown(line.server_cpu_us_per_op, 1),
            shown(line.server_cpu_us_per_op_ratio, 3),
            shown(line.bench_cpu_us_per_op, 1),
            line.server_cpu_cores,
            line.resends,
            line.errors
        );
    }
    print_notes(report);
}

fn print_notes(report: &Report) {
    println!(
        "calls/s: committed calls per wall second, median over rounds (min, max); server: the \
         nodes' CPU (utime+stime) per committed call; client: this process's; srv cores: the \
         nodes' CPU seconds per second; ratios to the first contender's"
    );
    for line in report
        .contenders
        .iter()
        .filter(|line| line.by_group.len() > 1)
    {
        let shares: Vec<String> = line
            .by_group
            .iter()
            .map(|share| {
                let percent = 100.0 * share.committed as f64 / line.committed.max(1) as f64;
                format!(
                    "group {} (node {}, {} clients) {percent:.1}%",
                    share.group, share.primary, share.clients
                )
            })
            .collect();
        println!(
            "{} groups, committed calls by group: {}",
            line.groups,
            shares.join(", ")
        );
    }
    for line in report.contenders.iter().filter(|line| line.errors > 0) {
        println!(
            "CLIENT ERRORS under {} groups: {} calls ended in an error (first: {})",
            line.groups,
            line.errors,
            line.first_error.as_deref().unwrap_or("?")
        );
    }
    if report.findings.is_empty() {
        println!(
            "replicas: every group's members hold the same bytes at the same LSN after \
             settling, and every consistency check holds"
        );
    } else {
        println!("REPLICAS DISAGREE: {}", report.findings.join("; "));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::{BenchCommand, Cli, Command};
    use clap::Parser;

    fn parse(flags: &[&str]) -> Result<GroupsArgs, String> {
        let argv = ["tandem", "bench", "groups"].iter().chain(flags);
        let cli = Cli::try_parse_from(argv).map_err(|err| err.to_string())?;
        match cli.command {
            Command::Bench {
                command: BenchCommand::Groups(args),
            } => Ok(args),
            other => panic!("parsed as another command: {other:?}"),
        }
    }

    #[test]
    fn defaults_and_flag_errors_name_the_flag() {
        let args = parse(&[]).expect("the defaults parse");
        assert_eq!(args.groups, GroupCounts(vec![1, 3]));
        assert_eq!(
            (args.nodes, args.clients, args.rounds, args.db_mib),
            (3, 12, 5, 8)
        );
        assert_eq!(args.seconds, 2.0);
        assert!(validate(&args).is_ok());
        for (flags, named) in [
            (&["--groups", "0"][..], "--groups"),
            (&["--groups", "17"], "--groups"),
            (&["--groups", "1,x"], "--groups"),
            (&["--groups", "3,3"], "--groups"),
            (&["--clients", "0"], "--clients"),
            (&["--rounds", "0"], "--rounds"),
            (&["--seconds", "0"], "--seconds"),
            (&["--nodes", "1"], "--nodes"),
        ] {
            let err = parse(flags).expect_err("refused");
            assert!(err.contains(named), "{flags:?}: {err}");
        }
        let few = parse(&["--groups", "1,4", "--clients", "3"]).expect("parses");
        let err = validate(&few).expect_err("a group without a client").text();
        assert!(err.contains("--clients 3"), "{err}");
    }

    #[test]
    fn group_counts_parse_in_order() {
        assert_eq!(
            parse_group_counts("3, 1,16"),
            Ok(GroupCounts(vec![3, 1, 16]))
        );
        assert!(parse_group_counts("").is_err());
        assert!(parse_group_counts("2,2").unwrap_err().contains("twice"));
    }

    #[test]
    fn clients_are_dealt_round_the_groups() {
        let dealt: Vec<u32> = (0..7).map(|client| group_of_client(client, 3)).collect();
        assert_eq!(dealt, [1, 2, 3, 1, 2, 3, 1]);
        assert!((0..5).all(|client| group_of_client(client, 1) == 0));
    }

    #[test]
    fn medians_and_ratios() {
        assert_eq!(median_of(&[]), None);
        assert_eq!(median_of(&[5.0, 1.0, 3.0]), Some(3.0));
        assert_eq!(ratio(Some(300.0), Some(200.0)), Some(1.5));
        assert_eq!(ratio(Some(300.0), Some(0.0)), None);
        assert_eq!(ratio(None, Some(200.0)), None);
        assert_eq!(ratio(Some(1.0), None), None);
        let mut samples = Samples::default();
        for (committed, wall_s, server_cpu_s) in [(100, 1.0, 0.5), (0, 1.0, 0.1), (300, 2.0, 0.6)] {
            let tally = Tally {
                committed,
                ..Tally::default()
            };
            samples.record(&Slice {
                tally,
                wall_s,
                server_cpu_s,
                bench_cpu_s: 0.0,
            });
        }
        assert_eq!(samples.calls_per_s, [100.0, 0.0, 150.0]);
        // The slice that committed nothing has a rate but no cost per call.
        assert_eq!(samples.server_cpu_us_per_op, [5000.0, 2000.0]);
        assert_eq!(median_of(&samples.server_cpu_us_per_op), Some(3500.0));
        assert_eq!(samples.tally.committed, 400);
    }

    fn reading(node: u32, group: u32, lsn: u64, crc32c: u64) -> Reading {
        Reading {
            node,
            group,
            lsn: Some(lsn),
            crc32c: Some(crc32c),
            ..Reading::default()
        }
    }

    #[test]
    fn checksums_must_agree_within_each_group() {
        let nodes = [1, 2, 3];
        let mut readings: Vec<Reading> = (1..=3)
            .flat_map(|node| [reading(node, 1, 40, 7), reading(node, 2, 90, 8)])
            .collect();
        assert!(checksum_findings(&readings, &[1, 2], &nodes).is_empty());
        // Groups apart may differ; members of one may not.
        readings[3] = reading(2, 2, 90, 9);
        readings[4] = reading(3, 1, 41, 7);
        readings[5].check = Some("sums differ".into());
        readings.remove(0);
        let findings = checksum_findings(&readings, &[1, 2], &nodes);
        assert_eq!(
            findings,
            [
                "node 1 group 1: not reported",
                "node 3 group 1 is at LSN 41, node 2 at 40, after settling",
                "node 2 group 2 and node 1 hold different bytes at LSN 90",
                "node 3 group 2 fails its consistency check: sums differ",
            ]
        );
    }

    #[test]
    fn readings_come_from_each_group_of_the_checksum_json() {
        let json = serde_json::json!({
            "groups": [
                {"group": 1, "report": {"status": {}, "checksum": {"lsn": 5, "crc32c": 6}}},
                {"group": 2, "report": {"status": {}, "checksum": {
                    "lsn": 0, "crc32c": 0, "error": "busy", "check": "bad"}}},
                {"group": 3, "report": null},
            ]
        });
        let readings = readings_of(4, &json);
        assert_eq!(readings[0], reading(4, 1, 5, 6));
        assert_eq!(readings[1].error.as_deref(), Some("busy"));
        assert_eq!(readings[1].check.as_deref(), Some("bad"));
        assert_eq!((readings[2].group, readings[2].lsn), (3, None));
    }
}
