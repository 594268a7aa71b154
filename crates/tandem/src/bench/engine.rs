//! `tandem bench engine`: the standalone engine on each logging strategy (seed 000, Table 3).
//!
//! Each strategy gets its own segment and store, loaded identically, and a driver with the
//! same seed, so all run the same call stream. They take turns in slices of [`SLICE`] until
//! each has been measured for the requested time; a strategy's throughput is the median of its
//! slice rates. Every committed redo record is sized with the compact codec
//! (`tandem_redo::encoded_size`, which equals the encoder's output) and its bytes are counted as
//! data or meta-data; encoding and shipping belong to the replication benchmark.
//!
//! The driver works one call ahead, as an executor with a queue of calls does: while call k
//! runs, call k+1 is already known, and unless `--no-prefetch` is given its procedure's
//! prefetch hint starts loading the records it will touch. Calls still run one after another.
//!
//! `--groups N` measures seed 000's multiprocessor primary (§8, Figures 2 and 3): each strategy
//! runs as one group and as N groups, each group its own segment, store and call stream (no
//! data shared, as the paper's streams), the N on a thread each at once; a slice of N groups
//! counts every group's commits. Their ratio is how the engine scales with cores.

use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;
use tandem_memory::{Segment, Strategy};
use tandem_redo::{CallId, encoded_size};
use tandem_store::{CallError, Compiled, Driver, ProcId, Store, Workload};
use tandem_workloads::debit_credit::{DebitCredit, DebitCreditConfig};
use tandem_workloads::order_entry::{OrderEntry, OrderEntryConfig};

use crate::Failure;
use crate::bench::median;
use crate::cli::{EngineArgs, WorkloadName};

/// Length of one measured turn of one strategy.
const SLICE: Duration = Duration::from_millis(200);
/// Unmeasured turn each strategy takes first, to warm caches and branch predictors.
const WARMUP: Duration = Duration::from_millis(100);
/// Calls between two reads of the clock.
const CALLS_PER_CLOCK_READ: usize = 256;

/// One line of the report, as printed with `--json`.
#[derive(Debug, Serialize)]
pub struct EngineRun {
    pub strategy: &'static str,
    pub workload: &'static str,
    /// Groups run at once, each on its own thread, segment and call stream.
    pub groups: usize,
    /// Median over slices of committed txns per second.
    pub tx_per_s: f64,
    /// Committed txns over the whole measured time.
    pub tx_per_s_mean: f64,
    pub ratio_to_first: f64,
    /// Against the same strategy on one group (1 for one group).
    pub ratio_to_one_group: f64,
    pub redo_bytes_per_tx: f64,
    pub redo_data_bytes_per_tx: f64,
    pub redo_meta_bytes_per_tx: f64,
    pub committed: u64,
    pub rolled_back: u64,
    pub slices: usize,
    pub consistent: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub inconsistency: Option<String>,
}

#[derive(Debug, Serialize)]
struct Report {
    workload: &'static str,
    db_bytes: usize,
    seconds_per_strategy: f64,
    prefetch: bool,
    scale: String,
    runs: Vec<EngineRun>,
}

pub fn run(args: &EngineArgs) -> Result<(), Failure> {
    match args.workload {
        WorkloadName::DebitCredit => {
            let workload = DebitCredit::new(args.db_bytes, &DebitCreditConfig::default())
                .map_err(|err| Failure::Usage(format!("--db-mib: {err}")))?;
            let scale = format!(
                "{}, {}, {}, {}",
                count(workload.branches.count(), "branch", "branches"),
                count(workload.tellers.count(), "teller", "tellers"),
                count(workload.accounts.count(), "account", "accounts"),
                count(workload.history.count(), "history slot", "history slots")
            );
            bench(args, workload, scale)
        }
        WorkloadName::OrderEntry => {
            let config = OrderEntryConfig::default();
            let workload = OrderEntry::new(args.db_bytes, &config).map_err(|_| {
                let mib = OrderEntry::min_db_mib(&config);
                Failure::Usage(format!(
                    "--db-mib: order-entry needs at least {mib} MiB for one warehouse at the \
                     default scale; give --db-mib {mib} or more"
                ))
            })?;
            let scale = format!(
                "{}, {} items, {} customers and an order ring of {} per district",
                count(workload.warehouses(), "warehouse", "warehouses"),
                workload.item_count(),
                workload.customers_per_district(),
                workload.orders_per_district()
            );
            bench(args, workload, scale)
        }
    }
}

/// "1 branch", "5 branches".
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// One strategy on one or more groups, and its slices' rates (every group's commits).
struct Contender {
    strategy: Strategy,
    lanes: Vec<Lane>,
    measured: Duration,
    slice_rates: Vec<f64>,
}

impl Contender {
    /// Runs every group for `duration`, each on a thread of its own when there are several;
    /// returns how many calls committed over all of them.
    fn run_for(&mut self, duration: Duration) -> u64 {
        let start = Instant::now();
        let committed = match self.lanes.as_mut_slice() {
            [lane] => lane.run_for(duration),
            lanes => std::thread::scope(|scope| {
                let threads: Vec<_> = lanes
                    .iter_mut()
                    .map(|lane| scope.spawn(move || lane.run_for(duration)))
                    .collect();
                threads
                    .into_iter()
                    .map(|thread| thread.join().expect("a group's thread does not panic"))
                    .sum()
            }),
        };
        self.measured += start.elapsed();
        committed
    }

    fn total(&self, of: impl Fn(&Lane) -> u64) -> u64 {
        self.lanes.iter().map(of).sum()
    }

    /// Every group's consistency check; the first failure.
    fn check(&self) -> Result<(), String> {
        self.lanes.iter().try_for_each(Lane::check)
    }
}

/// One group: its store, driver and tallies. Each on pages of its own: with the groups side
/// by side, two groups on two cores committed less than one group on one (0.8-1.1x one
/// group, measured), even two cache lines apart (`align(128)`): a core's prefetcher pulls in
/// the lines beside the ones it reads, within a page, and the other core writes them.
#[repr(align(4096))]
struct Lane {
    store: Store,
    driver: Box<dyn Driver>,
    prefetch: bool,
    /// The call produced ahead of the one running.
    id_next: ProcId,
    args_next: Vec<u8>,
    args: Vec<u8>,
    reply: Vec<u8>,
    committed: u64,
    rolled_back: u64,
    redo_data_bytes: u64,
    redo_meta_bytes: u64,
}

impl Lane {
    /// Issues calls for `duration`; returns the number that committed.
    fn run_for(&mut self, duration: Duration) -> u64 {
        let committed_before = self.committed;
        let start = Instant::now();
        loop {
            for _ in 0..CALLS_PER_CLOCK_READ {
                self.call_once();
            }
            if start.elapsed() >= duration {
                break;
            }
        }
        self.committed - committed_before
    }

    fn call_once(&mut self) {
        let id = self.id_next;
        std::mem::swap(&mut self.args, &mut self.args_next);
        self.id_next = self.driver.next_call(&mut self.args_next);
        if self.prefetch {
            self.store.prefetch(self.id_next, &self.args_next);
        }
        match self.store.call(id, &self.args, &mut self.reply) {
            Ok(redo) => {
                let size = encoded_size(CallId::default(), redo);
                self.redo_data_bytes += size.data as u64;
                self.redo_meta_bytes += size.meta as u64;
                self.committed += 1;
                self.driver.observe(id, &self.args, Ok(()));
            }
            Err(CallError::Proc(err)) => {
                self.rolled_back += 1;
                self.driver.observe(id, &self.args, Err(&err));
            }
            Err(err) => panic!("the driver produced a call the registry cannot run: {err}"),
        }
    }

    fn check(&self) -> Result<(), String> {
        self.store
            .model()
            .check(self.store.segment())
            .map_err(|err| err.to_string())?;
        self.driver
            .check(self.store.segment())
            .map_err(|err| err.to_string())
    }
}

fn bench<W: Workload + Clone>(
    args: &EngineArgs,
    workload: W,
    scale: String,
) -> Result<(), Failure> {
    let strategies = &args.strategy.0;
    let mut group_counts = vec![1];
    if args.groups > 1 {
        group_counts.push(args.groups);
    }
    let mut contenders = Vec::with_capacity(strategies.len() * group_counts.len());
    for &strategy in strategies {
        for &groups in &group_counts {
            let lanes = (0..groups)
                .map(|group| lane(args, &workload, strategy, group))
                .collect::<Result<Vec<_>, _>>()?;
            contenders.push(Contender {
                strategy,
                lanes,
                measured: Duration::ZERO,
                slice_rates: Vec::new(),
            });
        }
    }
    for contender in &mut contenders {
        contender.run_for(WARMUP);
        contender.measured = Duration::ZERO;
        for lane in &mut contender.lanes {
            (lane.committed, lane.rolled_back) = (0, 0);
            (lane.redo_data_bytes, lane.redo_meta_bytes) = (0, 0);
        }
    }

    let rounds = (args.seconds / SLICE.as_secs_f64()).ceil().max(1.0) as usize;
    let slice = Duration::from_secs_f64(args.seconds / rounds as f64);
    let progress = ProgressBar::new((rounds * contenders.len()) as u64).with_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} slices, {eta} left")
            .expect("valid template")
            .progress_chars("=> "),
    );
    progress.set_prefix(format!("bench engine {}", W::NAME));
    let contender_count = contenders.len();
    for round in 0..rounds {
        // Rotate who goes first so no strategy always follows the same neighbour.
        for turn in 0..contender_count {
            let contender = &mut contenders[(round + turn) % contender_count];
            let committed = contender.run_for(slice);
            contender
                .slice_rates
                .push(committed as f64 / slice.as_secs_f64());
            progress.inc(1);
        }
    }
    progress.finish_and_clear();

    let mut runs: Vec<EngineRun> = contenders.iter().map(engine_run::<W>).collect();
    let first_rate = runs[0].tx_per_s;
    for at in 0..runs.len() {
        let one_group = runs
            .iter()
            .find(|run| run.strategy == runs[at].strategy && run.groups == 1)
            .map_or(f64::NAN, |run| run.tx_per_s);
        runs[at].ratio_to_first = runs[at].tx_per_s / first_rate;
        runs[at].ratio_to_one_group = runs[at].tx_per_s / one_group;
    }
    let report = Report {
        workload: W::NAME,
        db_bytes: args.db_bytes,
        seconds_per_strategy: args.seconds,
        prefetch: !args.no_prefetch,
        scale,
        runs,
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("report serializes")
        );
    } else {
        print_table(&report);
    }
    let inconsistent: Vec<&str> = report
        .runs
        .iter()
        .filter(|run| !run.consistent)
        .map(|run| run.strategy)
        .collect();
    if inconsistent.is_empty() {
        Ok(())
    } else {
        Err(Failure::Run(format!(
            "consistency check failed on {}",
            inconsistent.join(", ")
        )))
    }
}

/// Group `group`'s store and driver for `strategy`: a segment of its own, loaded the same
/// way, and a call stream seeded apart from the other groups'.
fn lane<W: Workload + Clone>(
    args: &EngineArgs,
    workload: &W,
    strategy: Strategy,
    group: u64,
) -> Result<Lane, Failure> {
    let segment = Segment::anonymous(args.db_bytes, strategy)
        .map_err(|err| Failure::Run(format!("cannot create a {strategy} segment: {err}")))?;
    let mut driver: Box<dyn Driver> = Box::new(workload.driver(args.seed.wrapping_add(group)));
    let mut args_next = Vec::new();
    let id_next = driver.next_call(&mut args_next);
    Ok(Lane {
        store: Store::load(segment, Compiled::boxed(workload.clone())),
        driver,
        prefetch: !args.no_prefetch,
        id_next,
        args_next,
        args: Vec::new(),
        reply: Vec::new(),
        committed: 0,
        rolled_back: 0,
        redo_data_bytes: 0,
        redo_meta_bytes: 0,
    })
}

/// A contender's line of the report (ratios filled in by the caller).
fn engine_run<W: Workload>(contender: &Contender) -> EngineRun {
    let committed = contender.total(|lane| lane.committed);
    let per_tx = committed.max(1) as f64;
    let data = contender.total(|lane| lane.redo_data_bytes);
    let meta = contender.total(|lane| lane.redo_meta_bytes);
    let check = contender.check();
    EngineRun {
        strategy: contender.strategy.name(),
        workload: W::NAME,
        groups: contender.lanes.len(),
        tx_per_s: median(&contender.slice_rates),
        tx_per_s_mean: committed as f64 / contender.measured.as_secs_f64(),
        ratio_to_first: 0.0,
        ratio_to_one_group: 0.0,
        redo_bytes_per_tx: (data + meta) as f64 / per_tx,
        redo_data_bytes_per_tx: data as f64 / per_tx,
        redo_meta_bytes_per_tx: meta as f64 / per_tx,
        committed,
        rolled_back: contender.total(|lane| lane.rolled_back),
        slices: contender.slice_rates.len(),
        consistent: check.is_ok(),
        inconsistency: check.err(),
    }
}

fn print_table(report: &Report) {
    println!(
        "{} on a {:.2} MiB segment: {}",
        report.workload,
        report.db_bytes as f64 / f64::from(1u32 << 20),
        report.scale
    );
    println!(
        "{} s per strategy in interleaved slices, prefetch {}",
        report.seconds_per_strategy,
        if report.prefetch { "on" } else { "off" }
    );
    let first = report.runs[0].strategy;
    println!(
        "{:<8} {:>6} {:>14} {:>8} {:>9} {:>26} {:>11} {:>11}",
        "strategy",
        "groups",
        "tx/s (median)",
        format!("vs {first}"),
        "vs 1 group",
        "redo B/tx (data + meta)",
        "rollbacks",
        "consistent"
    );
    for run in &report.runs {
        let redo = format!(
            "{:.1} ({:.1} + {:.1})",
            run.redo_bytes_per_tx, run.redo_data_bytes_per_tx, run.redo_meta_bytes_per_tx
        );
        println!(
            "{:<8} {:>6} {:>14.0} {:>8.2} {:>9.2} {:>26} {:>11} {:>11}",
            run.strategy,
            run.groups,
            run.tx_per_s,
            run.ratio_to_first,
            run.ratio_to_one_group,
            redo,
            run.rolled_back,
            if run.consistent { "yes" } else { "NO" }
        );
        if let Some(detail) = &run.inconsistency {
            println!("         {detail}");
        }
    }
}
