//! The simulator on a budget of seeds: every checker holds on the real code, and (with the
//! `inject-bugs` feature) each planted bug is caught.

/// The CI budget: a thousand seeds of 300 ticks each, a few seconds.
const SEEDS: u64 = 1_000;

#[test]
fn a_budget_of_seeds_passes_every_checker() {
    let mut calls = 0;
    for seed in 0..SEEDS {
        let report = tandem_sim::run(seed, 300);
        assert!(
            report.failure.is_none(),
            "seed {seed} ({}) failed: {}\n{}",
            report.faults,
            report.failure.unwrap_or_default(),
            report.trace.join("\n")
        );
        calls += report.calls;
    }
    assert!(calls > 100_000, "the clients made only {calls} calls");
}

#[test]
fn the_same_seed_gives_the_same_run() {
    let first = tandem_sim::run(7, 200);
    let second = tandem_sim::run(7, 200);
    assert_eq!(first.calls, second.calls);
    assert_eq!(first.commits, second.commits);
    assert_eq!(first.trace, second.trace);
}
