//! Teeth (the one-group simulator): each bug planted in the replication core is caught by the checkers within its budget of
//! seeds. A checker that cannot fail is a defect.

use tandem_replication::bugs::{self, Bug};

/// Seeds a bug may take to be caught.
const BUDGET: u64 = 50;

#[test]
fn the_early_reply_bug_is_caught_within_its_budget() {
    // The one bug this layer reaches; the others live in the cluster core and the store's
    // dedup table, which only the whole-cluster simulator runs (tests/cluster.rs).
    bugs::plant(Some(Bug::EarlyReply));
    let caught = (0..BUDGET).find(|&seed| tandem_sim::run(seed, 300).failure.is_some());
    bugs::plant(None);
    assert!(caught.is_some(), "early-reply survived {BUDGET} seeds");
}

#[test]
fn without_a_planted_bug_the_same_seeds_pass() {
    bugs::plant(None);
    for seed in 0..10 {
        let report = tandem_sim::run(seed, 300);
        assert!(
            report.failure.is_none(),
            "seed {seed}: {:?}",
            report.failure
        );
    }
}

#[test]
fn the_forged_batch_is_caught_by_the_checksum_or_the_final_comparison() {
    bugs::plant(None);
    let report = (0..BUDGET)
        .map(|seed| tandem_sim::run_sabotaged(seed, 300, Some(tandem_sim::Sabotage::ForgeBatch)))
        .find(|report| report.failure.is_some())
        .expect("a forged batch went unnoticed for the whole budget");
    let failure = report.failure.unwrap();
    assert!(
        failure.contains("checksum") || failure.contains("differs"),
        "{failure}"
    );
}
