//! `tandem bench reads`: read throughput of a local Debit-Credit cluster with reads served by
//! backups, against reads sent to the primary, and the latency each consistency adds.
//!
//! One cluster of `--nodes` `tandem node` children (2-safe) serves every contender. The
//! contenders are `primary` (each read a `Client::call` of `BALANCE`, which the primary
//! answers), and `linearizable`, `session` and `bounded:10` (each read a `Client::read` under
//! that `read_consistency`, which a backup serves unless it is behind). Each reader thread owns
//! one client stub per contender, so a contender's connections and its stub's counters are its
//! own; a slice runs every reader thread on one contender. Contenders take turns in slices of
//! [`SLICE`] after one unmeasured warm-up slice each, their order rotated every round, so that
//! the noise of a shared machine falls on all of them alike; throughput is the median of a
//! contender's slice rates, latency comes from an hdrhistogram of all its reads.
//!
//! `--writers` threads deposit to random accounts throughout, so reads compete with a live
//! stream of commits, and the writers' commit rate during each contender's slices shows
//! whether its reads slow writes down.
//!
//! The run checks what it measures: a reader notes the highest LSN any writer was answered
//! with before it sends a read, and a read that returns a lower LSN saw a state older than an
//! acknowledged write. Under `primary` and `linearizable` that is a violation, and a run with
//! one fails (exit 1); under `session` and `bounded:10` it is allowed, and counted as a stale
//! read.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use serde::Serialize;
use tandem_client::{Client, ClientConfig, ClientStats, ReadConsistency};
use tandem_store::Rng;
use tandem_workloads::debit_credit::{BALANCE, DEBIT_CREDIT, DebitCredit, DebitCreditConfig};

use crate::Failure;
use crate::bench::median;
use crate::cli::ReadsArgs;
use crate::local::{LocalCluster, Options};

/// Length of one measured turn of one contender.
pub const SLICE: Duration = Duration::from_millis(250);

/// The contenders, in the report's order.
pub const CONTENDERS: [Contender; 4] = [
    Contender::Primary,
    Contender::Backup(ReadConsistency::Linearizable),
    Contender::Backup(ReadConsistency::Session),
    Contender::Backup(ReadConsistency::Bounded { staleness_ms: 10 }),
];

/// How long the cluster may take to load its databases and settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

/// Where a contender sends its reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Contender {
    /// A call to the primary.
    Primary,
    /// A read that a backup serves under this consistency (or the primary, if it is behind).
    Backup(ReadConsistency),
}

impl Contender {
    fn name(self) -> String {
        match self {
            Contender::Primary => "primary".to_owned(),
            Contender::Backup(consistency) => consistency.to_string(),
        }
    }

    /// Whether a read must reflect every write acknowledged before it was sent.
    fn linearizable(self) -> bool {
        matches!(
            self,
            Contender::Primary | Contender::Backup(ReadConsistency::Linearizable)
        )
    }
}

/// One contender's line of the report.
#[derive(Debug, Serialize)]
pub struct ContenderReport {
    pub name: String,
    /// Median over the contender's slices.
    pub reads_per_s: f64,
    /// Reads answered in all of its slices.
    pub reads: u64,
    pub p50_us: f64,
    pub p99_us: f64,
    pub p999_us: f64,
    /// Reads a backup answered, over all reads (0 for `primary`, which never asks one).
    pub share_at_backups: f64,
    /// `reads_per_s` over `primary`'s; null when `primary` answered nothing.
    pub ratio_to_primary: Option<f64>,
    /// Median over the contender's slices of the writers' commits per second.
    pub writes_per_s: f64,
    /// Whether the contender promises to reflect every write acknowledged before a read.
    pub linearizable: bool,
    /// Reads that returned an LSN below one a writer had been answered with before the read
    /// was sent: violations when `linearizable`, allowed otherwise.
    pub stale_reads: u64,
    /// Reads that ended in an error or a rollback instead of a balance.
    pub errors: u64,
    pub slices: usize,
}

#[derive(Debug, Serialize)]
struct Report {
    contenders: Vec<ContenderReport>,
    nodes: u32,
    clients: u32,
    writers: u32,
    db_mib: u32,
    slice_ms: u64,
    /// Stale reads of the contenders that promise linearizability: must be 0.
    violations: u64,
    /// Deposits that ended in an error or a rollback.
    writer_errors: u64,
}

/// What every thread shares.
struct Shared {
    /// The highest commit LSN any writer has been answered with.
    lsn_acknowledged: AtomicU64,
    /// Deposits committed so far.
    commits: AtomicU64,
    writer_errors: AtomicU64,
    /// Accounts, tellers and tellers per branch of the cluster's Debit-Credit layout.
    accounts: u64,
    tellers: u64,
    tellers_per_branch: u64,
}

/// A reader thread's stubs (one per contender, in [`CONTENDERS`] order) and its draws.
struct Reader {
    clients: Vec<Client>,
    rng: Rng,
}

/// What one reader thread measured in one slice.
struct Tally {
    reads: u64,
    stale_reads: u64,
    errors: u64,
    latency_ns: Histogram<u64>,
}

/// One contender's measurements over all its slices.
struct Measured {
    read_rates: Vec<f64>,
    write_rates: Vec<f64>,
    reads: u64,
    stale_reads: u64,
    errors: u64,
    latency_ns: Histogram<u64>,
    backups: BackupCounts,
}

pub fn run(args: &ReadsArgs) -> Result<(), Failure> {
    let db_mib = args.db_mib as usize;
    let layout = DebitCredit::new(db_mib << 20, &DebitCreditConfig::default())
        .map_err(|err| Failure::Usage(format!("--db-mib {db_mib}: {err}")))?;
    let shared = Shared {
        lsn_acknowledged: AtomicU64::new(0),
        commits: AtomicU64::new(0),
        writer_errors: AtomicU64::new(0),
        accounts: layout.accounts.count() as u64,
        tellers: layout.tellers.count() as u64,
        tellers_per_branch: DebitCreditConfig::default().tellers_per_branch as u64,
    };
    let say = |text: &str| {
        if !args.json {
            eprintln!("{text}");
        }
    };
    say(&format!(
        "starting {} nodes under {} ({db_mib} MiB Debit-Credit each, 2-safe)",
        args.nodes,
        args.dir.display()
    ));
    let mut cluster = start_cluster(&args.dir, args.nodes, db_mib)?;
    let settled = cluster.wait_settled(SETTLE_TIMEOUT)?;
    say(&format!(
        "node {} is primary of view {}; {} writer(s) start depositing",
        settled.primary, settled.view, args.writers
    ));
    let addresses = cluster.addresses();
    let new_client = |client_id: u64, consistency: ReadConsistency| {
        let mut config = ClientConfig::new(addresses.clone(), 0, client_id);
        config.read_consistency = consistency;
        Client::new(config).map_err(|err| Failure::Run(format!("client {client_id}: {err}")))
    };
    // Client ids: writers first, then each reader's one per contender; all distinct.
    let mut writers = Vec::new();
    for index in 0..u64::from(args.writers) {
        writers.push(new_client(1 + index, ReadConsistency::default())?);
    }
    let mut readers = Vec::new();
    for index in 0..u64::from(args.clients) {
        let mut clients = Vec::new();
        for (k, contender) in CONTENDERS.iter().enumerate() {
            let consistency = match contender {
                Contender::Primary => ReadConsistency::default(),
                Contender::Backup(consistency) => *consistency,
            };
            let client_id = 1 + u64::from(args.writers) + index * CONTENDERS.len() as u64;
            clients.push(new_client(client_id + k as u64, consistency)?);
        }
        readers.push(Reader {
            clients,
            rng: Rng::new(0x5eed_0000 + index),
        });
    }
    let rounds = rounds_for(args.seconds);
    let stop_writers = AtomicBool::new(false);
    let measured = thread::scope(|scope| {
        let writer_threads: Vec<_> = writers
            .into_iter()
            .enumerate()
            .map(|(index, client)| {
                let (shared, stop) = (&shared, &stop_writers);
                scope.spawn(move || write_until(client, index as u64, shared, stop))
            })
            .collect();
        let measured = measure(&mut readers, &shared, rounds, &say);
        stop_writers.store(true, Ordering::Relaxed);
        for writer in writer_threads {
            writer
                .join()
                .map_err(|_| Failure::Run("a writer thread panicked".into()))?;
        }
        measured
    })?;
    let report = report(args, measured, &shared);
    // The nodes are this process's children: dropping the cluster kills and reaps each.
    drop(readers);
    drop(cluster);
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        print_table(&report, rounds);
    }
    if report.violations > 0 {
        return Err(Failure::Run(format!(
            "LINEARIZABILITY VIOLATED: {} reads that promise linearizability returned an LSN \
             below one a writer had been answered with before the read was sent",
            report.violations
        )));
    }
    Ok(())
}

fn start_cluster(dir: &Path, nodes: u32, db_mib: usize) -> Result<LocalCluster, Failure> {
    let options = Options::new(nodes).with_db_mib(db_mib);
    assert_eq!(options.workload, "debit-credit");
    LocalCluster::start(dir, &options)
}

/// Rounds of slices that fill `seconds`, each round one slice per contender; at least one.
pub fn rounds_for(seconds: f64) -> usize {
    let round = SLICE.as_secs_f64() * CONTENDERS.len() as f64;
    ((seconds / round).round() as usize).max(1)
}

/// Deposits one unit to random accounts until `stop`, noting each answered LSN.
fn write_until(mut client: Client, index: u64, shared: &Shared, stop: &AtomicBool) {
    let mut rng = Rng::new(0xd0_0000 + index);
    let mut args = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let account = rng.below(shared.accounts) as u32;
        let teller = rng.below(shared.tellers);
        let branch = teller / shared.tellers_per_branch;
        DebitCredit::encode_args(&mut args, account, teller as u32, branch as u32, 1);
        match client.call(DEBIT_CREDIT.0, &args, None) {
            Ok(outcome) if outcome.committed() => {
                // Published after the answer arrived: a read that loads it afterwards was
                // sent after this write was acknowledged.
                shared
                    .lsn_acknowledged
                    .fetch_max(outcome.lsn, Ordering::AcqRel);
                shared.commits.fetch_add(1, Ordering::Relaxed);
            }
            Ok(_) | Err(_) => {
                shared.writer_errors.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// A warm-up slice per contender (its connections open, its caches fill), then `rounds`
/// rounds of measured slices, the contenders' order rotated by one each round.
fn measure(
    readers: &mut [Reader],
    shared: &Shared,
    rounds: usize,
    say: &dyn Fn(&str),
) -> Result<Vec<Measured>, Failure> {
    for index in 0..CONTENDERS.len() {
        run_slice(readers, index, shared)?;
    }
    say(&format!(
        "warmed up; measuring {} contenders in {rounds} round(s) of {} ms slices",
        CONTENDERS.len(),
        SLICE.as_millis()
    ));
    // The stubs' counters cannot be reset: the warm-up's are subtracted at the end.
    let warmup_counts: Vec<BackupCounts> = (0..CONTENDERS.len())
        .map(|index| BackupCounts::of(readers, index))
        .collect();
    let mut measured: Vec<Measured> = (0..CONTENDERS.len())
        .map(|_| Measured {
            read_rates: Vec::new(),
            write_rates: Vec::new(),
            reads: 0,
            stale_reads: 0,
            errors: 0,
            latency_ns: latency_histogram(),
            backups: BackupCounts::default(),
        })
        .collect();
    for round in 0..rounds {
        for turn in 0..CONTENDERS.len() {
            let index = (round + turn) % CONTENDERS.len();
            let slice = run_slice(readers, index, shared)?;
            let contender = &mut measured[index];
            contender.read_rates.push(slice.read_rate_per_s);
            contender.write_rates.push(slice.write_rate_per_s);
            contender.reads += slice.tally.reads;
            contender.stale_reads += slice.tally.stale_reads;
            contender.errors += slice.tally.errors;
            contender
                .latency_ns
                .add(&slice.tally.latency_ns)
                .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
        }
    }
    for (index, contender) in measured.iter_mut().enumerate() {
        contender.backups = BackupCounts::of(readers, index).since(warmup_counts[index]);
    }
    Ok(measured)
}

/// Reads a backup answered, and reads sent on to the primary, by one contender's stubs.
#[derive(Clone, Copy, Debug, Default)]
struct BackupCounts {
    at_backups: u64,
    redirected: u64,
}

impl BackupCounts {
    fn of(readers: &[Reader], index: usize) -> BackupCounts {
        let stats: Vec<&ClientStats> = readers
            .iter()
            .map(|reader| reader.clients[index].stats())
            .collect();
        BackupCounts {
            at_backups: stats.iter().map(|stats| stats.reads_at_backups).sum(),
            redirected: stats.iter().map(|stats| stats.reads_redirected).sum(),
        }
    }

    fn since(self, earlier: BackupCounts) -> BackupCounts {
        BackupCounts {
            at_backups: self.at_backups - earlier.at_backups,
            redirected: self.redirected - earlier.redirected,
        }
    }

    fn share_at_backups(self) -> f64 {
        let reads = self.at_backups + self.redirected;
        if reads == 0 {
            0.0
        } else {
            self.at_backups as f64 / reads as f64
        }
    }
}

/// What one slice of one contender measured.
struct Slice {
    read_rate_per_s: f64,
    /// The writers' commits per second during the slice.
    write_rate_per_s: f64,
    tally: Tally,
}

/// Runs every reader thread on contender `index` for one [`SLICE`].
fn run_slice(readers: &mut [Reader], index: usize, shared: &Shared) -> Result<Slice, Failure> {
    let stop = AtomicBool::new(false);
    let commits_before = shared.commits.load(Ordering::Relaxed);
    let started = Instant::now();
    let tallies = thread::scope(|scope| {
        let threads: Vec<_> = readers
            .iter_mut()
            .map(|reader| {
                let stop = &stop;
                scope.spawn(move || read_until(reader, index, shared, stop))
            })
            .collect();
        thread::sleep(SLICE);
        stop.store(true, Ordering::Relaxed);
        threads
            .into_iter()
            .map(|thread| thread.join())
            .collect::<Result<Vec<Tally>, _>>()
    })
    .map_err(|_| Failure::Run("a reader thread panicked".into()))?;
    // Every read a thread started before the stop is counted, so the slice runs until the
    // last thread finished.
    let seconds = started.elapsed().as_secs_f64();
    let commits = shared.commits.load(Ordering::Relaxed) - commits_before;
    let mut tally = Tally {
        reads: 0,
        stale_reads: 0,
        errors: 0,
        latency_ns: latency_histogram(),
    };
    for thread_tally in tallies {
        tally.reads += thread_tally.reads;
        tally.stale_reads += thread_tally.stale_reads;
        tally.errors += thread_tally.errors;
        tally
            .latency_ns
            .add(&thread_tally.latency_ns)
            .map_err(|err| Failure::Run(format!("merging latencies: {err}")))?;
    }
    Ok(Slice {
        read_rate_per_s: tally.reads as f64 / seconds,
        write_rate_per_s: commits as f64 / seconds,
        tally,
    })
}

/// Reads random accounts' balances through contender `index`'s stub until `stop`.
fn read_until(reader: &mut Reader, index: usize, shared: &Shared, stop: &AtomicBool) -> Tally {
    let contender = CONTENDERS[index];
    let client = &mut reader.clients[index];
    let mut tally = Tally {
        reads: 0,
        stale_reads: 0,
        errors: 0,
        latency_ns: latency_histogram(),
    };
    while !stop.load(Ordering::Relaxed) {
        let account = reader.rng.below(shared.accounts) as u32;
        let args = account.to_le_bytes();
        // Loaded before the read is sent: every LSN in it belongs to a write acknowledged
        // before the read started, which a linearizable read must reflect.
        let lsn_floor = shared.lsn_acknowledged.load(Ordering::Acquire);
        let started = Instant::now();
        let result = match contender {
            Contender::Primary => client.call(BALANCE.0, &args, None),
            Contender::Backup(_) => client.read(BALANCE.0, &args),
        };
        let latency_ns = started.elapsed().as_nanos() as u64;
        match result {
            Ok(outcome) if outcome.committed() => {
                tally.reads += 1;
                tally.latency_ns.saturating_record(latency_ns.max(1));
                if outcome.lsn < lsn_floor {
                    tally.stale_reads += 1;
                }
            }
            Ok(_) | Err(_) => tally.errors += 1,
        }
    }
    tally
}

/// Nanoseconds from 1 ns to a minute, three significant digits (a fixed range, so that the
/// slices' histograms merge).
fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000_000, 3).expect("valid bounds")
}

fn report(args: &ReadsArgs, measured: Vec<Measured>, shared: &Shared) -> Report {
    let quantile_us = |histogram: &Histogram<u64>, quantile: f64| {
        if histogram.is_empty() {
            0.0
        } else {
            histogram.value_at_quantile(quantile) as f64 / 1000.0
        }
    };
    let mut contenders: Vec<ContenderReport> = CONTENDERS
        .iter()
        .zip(measured)
        .map(|(contender, measured)| ContenderReport {
            name: contender.name(),
            reads_per_s: median(&measured.read_rates),
            reads: measured.reads,
            p50_us: quantile_us(&measured.latency_ns, 0.5),
            p99_us: quantile_us(&measured.latency_ns, 0.99),
            p999_us: quantile_us(&measured.latency_ns, 0.999),
            share_at_backups: measured.backups.share_at_backups(),
            ratio_to_primary: None,
            writes_per_s: median(&measured.write_rates),
            linearizable: contender.linearizable(),
            stale_reads: measured.stale_reads,
            errors: measured.errors,
            slices: measured.read_rates.len(),
        })
        .collect();
    let primary = contenders
        .iter()
        .find(|contender| contender.name == "primary")
        .map(|contender| contender.reads_per_s)
        .filter(|&rate| rate > 0.0);
    for contender in &mut contenders {
        contender.ratio_to_primary = primary.map(|rate| contender.reads_per_s / rate);
    }
    let violations = contenders
        .iter()
        .filter(|contender| contender.linearizable)
        .map(|contender| contender.stale_reads)
        .sum();
    Report {
        contenders,
        nodes: args.nodes,
        clients: args.clients,
        writers: args.writers,
        db_mib: args.db_mib,
        slice_ms: SLICE.as_millis() as u64,
        violations,
        writer_errors: shared.writer_errors.load(Ordering::Relaxed),
    }
}

fn print_table(report: &Report, rounds: usize) {
    println!(
        "reads on {} nodes (Debit-Credit, {} MiB, 2-safe): {} reader threads, {} writer \
         thread(s); {rounds} slice(s) of {} ms per contender, interleaved",
        report.nodes, report.db_mib, report.clients, report.writers, report.slice_ms
    );
    println!(
        "{:<13} {:>10} {:>7} {:>9} {:>9} {:>9} {:>10} {:>9} {:>7} {:>7}",
        "contender",
        "reads/s",
        "ratio",
        "p50 µs",
        "p99 µs",
        "p999 µs",
        "at backup",
        "writes/s",
        "stale",
        "errors"
    );
    for contender in &report.contenders {
        println!(
            "{:<13} {:>10.0} {:>7} {:>9.1} {:>9.1} {:>9.1} {:>9.1}% {:>9.0} {:>7} {:>7}",
            contender.name,
            contender.reads_per_s,
            contender
                .ratio_to_primary
                .map_or("-".to_owned(), |ratio| format!("{ratio:.3}")),
            contender.p50_us,
            contender.p99_us,
            contender.p999_us,
            contender.share_at_backups * 100.0,
            contender.writes_per_s,
            contender.stale_reads,
            contender.errors
        );
    }
    println!(
        "reads/s and writes/s are medians over slices; stale: reads that returned an LSN below \
         one a writer had been answered with before the read was sent (allowed for session and \
         bounded)"
    );
    println!(
        "linearizability violations (stale primary and linearizable reads): {}; writer errors: {}",
        report.violations, report.writer_errors
    );
}
