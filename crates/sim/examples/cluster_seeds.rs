//! Runs a range of seeds of the whole-cluster simulation (a development aid; `tandem sim`
//! is the user-facing command).
#![allow(clippy::disallowed_methods)]

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().unwrap())
        .collect();
    let (from, to, ticks) = (args[0], args[1], args[2]);
    if let Ok(bug) = std::env::var("BUG") {
        tandem_replication::bugs::plant(tandem_replication::bugs::Bug::from_name(&bug));
    }
    let started = std::time::Instant::now();
    let mut calls = 0;
    for seed in from..to {
        let report = tandem_sim::run_cluster(seed, ticks);
        calls += report.calls;
        if let Some(failure) = &report.failure {
            println!("seed {seed} FAILED ({}): {failure}", report.faults);
            if std::env::var("TRACE").is_ok() {
                println!("{}", report.trace.join("\n"));
            }
        } else if std::env::var("VERBOSE").is_ok() {
            println!(
                "seed {seed}: calls {} replies {} deadline {} commits {} crashes {} views {} dups {}",
                report.calls,
                report.replies,
                report.deadline_errors,
                report.commits,
                report.crashes,
                report.views,
                report.duplicates_answered
            );
            println!("  ticks {} events {}", report.ticks, report.events);
        }
    }
    let wall = started.elapsed().as_secs_f64();
    println!(
        "{} seeds, {calls} calls, {wall:.2}s, {:.0} calls/s",
        to - from,
        calls as f64 / wall
    );
}
