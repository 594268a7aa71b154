//! `tandem sim`: runs the deterministic simulation of the whole cluster for one seed or a range
//! of seeds.

use std::time::Instant;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;

use crate::Failure;
use crate::cli::{SimArgs, SimMix, SimModel};

#[derive(Debug, Serialize)]
struct SeedReport {
    seed: u64,
    faults: String,
    calls: u64,
    replies: u64,
    deadline_errors: u64,
    commits: u64,
    crashes: u64,
    /// The last view number (summed over the groups).
    views: u64,
    /// State transfers installed.
    transfers: u64,
    /// Members that rejoined from their own segment, rewound to a truncate LSN.
    rejoins: u64,
    /// Promotions whose new primary waited out the rest of the old primary's lease.
    lease_waits: u64,
    /// Crashes in the middle of a config-store save.
    torn_saves: u64,
    /// Crashes of a node that held the only copy of acknowledged records.
    sole_copy_crashes: u64,
    /// Crashes of a node then the primary of several groups (only with `--groups`).
    #[serde(skip_serializing_if = "is_zero")]
    several_primaries_crashes: u64,
    /// Readers' reads a backup served (each checked against its consistency), and reads
    /// none did (busy, sent to a node that is no backup, lost).
    reads_served: u64,
    reads_unserved: u64,
    /// Syncs of the nodes' write-ahead logs (each on a simulated disk), logs poisoned by a
    /// failed sync, restarts that replayed a log, and roles started from those records.
    log_syncs: u64,
    logs_poisoned: u64,
    log_replays: u64,
    recovered_followed: u64,
    /// Checkpoints handed to the logs whole, and restarts that installed one.
    checkpoints: u64,
    checkpoints_installed: u64,
    /// Power losses (every node crashed at once), promotions of a restarted node from the
    /// records its log gave back, and clients whose last acknowledged commit a power loss
    /// took under a rule that acknowledges from memory.
    power_losses: u64,
    recovered_promoted: u64,
    acks_lost_to_power: u64,
    /// The Redis model's figures (absent for Debit-Credit, whose reports stay as they were).
    #[serde(flatten)]
    redis: Option<RedisFigures>,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    failure: Option<String>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    trace: Vec<String>,
}

#[derive(Debug, Serialize)]
struct RedisFigures {
    model: &'static str,
    /// Acknowledged replies compared with the reference's replay of the final history.
    replies_checked: u64,
    /// Acknowledged replies from a history a failover rightly discarded (1-safe, bounded).
    replies_discarded: u64,
    /// Expiry sweeps committed.
    sweeps: u64,
    /// Retries told that their call committed once but its reply was too long to keep.
    replies_not_kept: u64,
}

#[derive(Debug, Serialize)]
struct RangeReport {
    seeds: u64,
    failed: Vec<u64>,
    /// Seeds in which a crash took the only copy of acknowledged records (a second failure:
    /// the run then holds the cluster to neither those records nor recovery).
    seeds_sole_copy_crashed: u64,
    /// Power losses over every seed, and promotions from records a log gave back.
    power_losses: u64,
    recovered_promoted: u64,
    calls: u64,
    wall_s: f64,
    calls_per_wall_s: f64,
    /// Acknowledged replies compared with the reference, over every seed (the Redis model
    /// only: Debit-Credit's report stays as it was).
    #[serde(skip_serializing_if = "Option::is_none")]
    replies_checked: Option<u64>,
    /// Expiry sweeps committed, over every seed (the Redis model only).
    #[serde(skip_serializing_if = "Option::is_none")]
    sweeps: Option<u64>,
    /// Retries told their call committed once but its reply was not kept (the Redis model
    /// only).
    #[serde(skip_serializing_if = "Option::is_none")]
    replies_not_kept: Option<u64>,
}

#[derive(Debug, Serialize)]
struct InjectReport {
    bug: String,
    caught: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_failing_seed: Option<u64>,
    seeds_run: u64,
}

/// Runs one seed.
fn run_seed(args: &SimArgs, seed: u64) -> SeedReport {
    let mix = match args.mix {
        SimMix::Every => tandem_sim::Mix::Every,
        SimMix::KOfN => tandem_sim::Mix::KOfN,
        SimMix::AnyTime => tandem_sim::Mix::AnyTime,
    };
    let model = match args.model {
        SimModel::DebitCredit => tandem_sim::Model::DebitCredit,
        SimModel::Redis => tandem_sim::Model::Redis,
    };
    let options = tandem_sim::RunOptions {
        mix,
        model,
        sabotage: None,
        release_unchecked: false,
        groups: args.groups,
        members: args.members.unwrap_or(0),
    };
    let report = tandem_sim::run_cluster_with(seed, args.ticks, options);
    let redis = (model == tandem_sim::Model::Redis).then(|| RedisFigures {
        model: model.name(),
        replies_checked: report.replies_checked,
        replies_discarded: report.replies_discarded,
        sweeps: report.sweeps,
        replies_not_kept: report.replies_not_kept,
    });
    let report = SeedReport {
        seed,
        faults: report.faults.to_string(),
        calls: report.calls,
        replies: report.replies,
        deadline_errors: report.deadline_errors,
        commits: report.commits,
        crashes: report.crashes,
        views: report.views,
        transfers: report.transfers,
        rejoins: report.rejoins,
        lease_waits: report.lease_waits,
        torn_saves: report.torn_saves,
        sole_copy_crashes: report.sole_copy_crashes,
        several_primaries_crashes: report.several_primaries_crashes,
        reads_served: report.reads_served,
        reads_unserved: report.reads_unserved,
        log_syncs: report.log_syncs,
        logs_poisoned: report.logs_poisoned,
        log_replays: report.log_replays,
        recovered_followed: report.recovered_followed,
        checkpoints: report.checkpoints,
        checkpoints_installed: report.checkpoints_installed,
        power_losses: report.power_losses,
        recovered_promoted: report.recovered_promoted,
        acks_lost_to_power: report.acks_lost_to_power,
        redis,
        ok: report.failure.is_none(),
        failure: report.failure,
        trace: report.trace,
    };
    // The trace is for a failure; a passing seed's would only be noise.
    SeedReport {
        trace: if report.ok { Vec::new() } else { report.trace },
        ..report
    }
}

pub fn run(args: &SimArgs) -> Result<(), Failure> {
    let seeds = match (&args.seeds, args.seed) {
        (Some(range), _) => range.clone(),
        (None, Some(seed)) => seed..seed + 1,
        (None, None) => 0..1,
    };
    plant(args.inject.as_deref())?;
    // A panic in the real code fails its seed, and the report carries its message; the
    // default hook would print it (and a backtrace) over the progress bar as well.
    std::panic::set_hook(Box::new(|_| {}));
    let single = seeds.end - seeds.start == 1;
    if single {
        let seed = seeds.start;
        let out = run_seed(args, seed);
        if args.json {
            println!(
                "{}",
                serde_json::to_string_pretty(&out).expect("serializable")
            );
        } else {
            println!("seed {seed}: {}", out.faults);
            println!(
                "{} calls, {} replies, {} deadline errors, {} commits, {} crashes ({} in a save, \
                 {} holding the only copy of acknowledged records), {} views, {} state transfers, \
                 {} rejoins; {} reads served by backups and checked, {} not served",
                out.calls,
                out.replies,
                out.deadline_errors,
                out.commits,
                out.crashes,
                out.torn_saves,
                out.sole_copy_crashes,
                out.views,
                out.transfers,
                out.rejoins,
                out.reads_served,
                out.reads_unserved
            );
            println!(
                "logs: {} syncs, {} poisoned by a failed sync; {} checkpoints; {} restarts \
                 replayed their log ({} installed a checkpoint first), {} roles followed a view \
                 from the records replayed",
                out.log_syncs,
                out.logs_poisoned,
                out.checkpoints,
                out.log_replays,
                out.checkpoints_installed,
                out.recovered_followed
            );
            println!(
                "power: {} losses, {} primaries promoted from the records replayed, {} clients' \
                 last acknowledged commit lost with the memory it lived in",
                out.power_losses, out.recovered_promoted, out.acks_lost_to_power
            );
            if let Some(redis) = &out.redis {
                println!(
                    "redis: {} acknowledged replies checked against the reference ({} from \
                     histories a failover discarded), {} expiry sweeps, {} retries told their \
                     reply was not kept",
                    redis.replies_checked,
                    redis.replies_discarded,
                    redis.sweeps,
                    redis.replies_not_kept
                );
            }
            match &out.failure {
                None => println!("every checker held"),
                Some(failure) => {
                    println!("FAILED: {failure}");
                    println!("trace (last events):");
                    for line in &out.trace {
                        println!("  {line}");
                    }
                }
            }
        }
        return verdict(
            args,
            out.failure.is_some(),
            Some(seed).filter(|_| !out.ok),
            1,
        );
    }
    let progress = ProgressBar::new(seeds.end - seeds.start).with_style(
        ProgressStyle::with_template("sim [{bar:30}] {pos}/{len} seeds, {eta} left")
            .expect("valid template"),
    );
    if args.json {
        progress.set_draw_target(ProgressDrawTarget::hidden());
    }
    let start = Instant::now();
    let mut failed = Vec::new();
    let mut calls = 0;
    let mut seeds_run = 0;
    let mut seeds_sole_copy_crashed = 0;
    let (mut power_losses, mut recovered_promoted) = (0, 0);
    let (mut replies_checked, mut sweeps, mut replies_not_kept) = (None, None, None);
    for seed in seeds.clone() {
        let report = run_seed(args, seed);
        seeds_run += 1;
        calls += report.calls;
        if let Some(redis) = &report.redis {
            *replies_checked.get_or_insert(0) += redis.replies_checked;
            *sweeps.get_or_insert(0) += redis.sweeps;
            *replies_not_kept.get_or_insert(0) += redis.replies_not_kept;
        }
        power_losses += report.power_losses;
        recovered_promoted += report.recovered_promoted;
        if report.sole_copy_crashes > 0 {
            seeds_sole_copy_crashed += 1;
        }
        progress.inc(1);
        if let Some(failure) = &report.failure {
            failed.push(seed);
            if !args.json {
                progress.suspend(|| {
                    eprintln!("seed {seed} FAILED ({}): {failure}", report.faults);
                    for line in &report.trace {
                        eprintln!("  {line}");
                    }
                });
            }
            if args.inject.is_some() {
                break;
            }
        }
    }
    progress.finish_and_clear();
    let wall_s = start.elapsed().as_secs_f64();
    if let Some(bug) = &args.inject {
        let report = InjectReport {
            bug: bug.clone(),
            caught: !failed.is_empty(),
            first_failing_seed: failed.first().copied(),
            seeds_run,
        };
        if args.json {
            println!("{}", serde_json::to_string(&report).expect("serializable"));
        } else if report.caught {
            println!("{bug}: caught by seed {}", failed[0]);
        } else {
            println!("{bug}: NOT caught in {seeds_run} seeds");
        }
        return verdict(args, report.caught, None, seeds_run);
    }
    let report = RangeReport {
        seeds: seeds_run,
        failed: failed.clone(),
        seeds_sole_copy_crashed,
        power_losses,
        recovered_promoted,
        calls,
        wall_s,
        calls_per_wall_s: calls as f64 / wall_s,
        replies_checked,
        sweeps,
        replies_not_kept,
    };
    if args.json {
        println!("{}", serde_json::to_string(&report).expect("serializable"));
    } else {
        println!(
            "{} seeds, {} failed ({} lost the only copy of acknowledged records in a crash), {} \
             client calls in {:.1} s ({:.0} calls per second); {} power losses, {} primaries \
             promoted from records a log gave back",
            report.seeds,
            failed.len(),
            report.seeds_sole_copy_crashed,
            calls,
            wall_s,
            report.calls_per_wall_s,
            report.power_losses,
            report.recovered_promoted
        );
        if let (Some(replies), Some(sweeps), Some(not_kept)) = (
            report.replies_checked,
            report.sweeps,
            report.replies_not_kept,
        ) {
            println!(
                "redis: {replies} acknowledged replies checked against the reference, {sweeps} \
                 expiry sweeps, {not_kept} retries told their reply was not kept"
            );
        }
    }
    verdict(args, !failed.is_empty(), failed.first().copied(), seeds_run)
}

/// Exit status: a failed checker fails the command, except when a bug was planted, where
/// being caught is the success.
fn verdict(args: &SimArgs, failed: bool, seed: Option<u64>, seeds: u64) -> Result<(), Failure> {
    match (&args.inject, failed) {
        (None, false) | (Some(_), true) => Ok(()),
        (None, true) => Err(Failure::Run(format!(
            "a checker failed (first failing seed {})",
            seed.map_or("?".to_owned(), |seed| seed.to_string())
        ))),
        (Some(bug), false) => Err(Failure::Run(format!(
            "the planted bug {bug} survived {seeds} seeds: a checker is missing its teeth"
        ))),
    }
}

#[cfg(feature = "inject-bugs")]
fn plant(bug: Option<&str>) -> Result<(), Failure> {
    use tandem_replication::bugs::{self, Bug};
    let Some(name) = bug else {
        bugs::plant(None);
        return Ok(());
    };
    let bug = Bug::from_name(name).ok_or_else(|| {
        let names: Vec<&str> = Bug::ALL.iter().map(|bug| bug.name()).collect();
        Failure::Usage(format!(
            "--inject: unknown bug '{name}'; accepted: {}",
            names.join(", ")
        ))
    })?;
    bugs::plant(Some(bug));
    Ok(())
}

#[cfg(not(feature = "inject-bugs"))]
fn plant(bug: Option<&str>) -> Result<(), Failure> {
    match bug {
        None => Ok(()),
        Some(_) => Err(Failure::Usage(
            "--inject: this build has no planted bugs; build with `cargo build --release -p \
             tandem --features inject-bugs`"
                .into(),
        )),
    }
}

/// Whether a count is zero (a figure a one-group run's report leaves out).
fn is_zero(count: &u64) -> bool {
    *count == 0
}
