//! Scripted scenarios of the sans-I/O cluster core, driven by the deterministic harness of
//! `common`: crashes, partitions, restarts and joins, with the view invariants checked after
//! every tick (see `common/mod.rs`).

mod common;

use std::collections::BTreeMap;

use common::*;
use tandem_cluster::rule;
use tandem_config::{Promotion, View};
use tandem_replication::{AckCount, NodeId, Safety};

/// A failover bound: detection (`SUSPECT_TICKS`), one round of freeze and reports, one Raft
/// commit. No election is needed: the config store leader is kept off the primary.
const FAILOVER_TICKS_MAX: u64 = 4 * SUSPECT_TICKS;

/// The view a promotion makes when the other reporters hold fewer records than the promoted
/// backup: the closest, `kept`, stays a backup (the primary is not left alone), the others,
/// `behind`, are spares until they catch up.
fn promoted(
    number: u64,
    primary: NodeId,
    kept: NodeId,
    behind: &[NodeId],
    (truncate, released): (u64, u64),
) -> View {
    View {
        promotions: vec![Promotion {
            view: number,
            truncate_lsn: truncate,
            based_on: None,
            lsn_released_max: released,
            rebuilt: Vec::new(),
        }],
        ..view(number, primary, &[kept], behind)
    }
}

/// The view a promotion makes when the other reporters hold as many records as the promoted
/// backup: they stay backups.
fn promoted_level(
    number: u64,
    primary: NodeId,
    backups: &[NodeId],
    (truncate, released): (u64, u64),
) -> View {
    View {
        promotions: vec![Promotion {
            view: number,
            truncate_lsn: truncate,
            based_on: None,
            lsn_released_max: released,
            rebuilt: Vec::new(),
        }],
        ..view(number, primary, backups, &[])
    }
}

/// `view` in the reign a promotion began at view `number` with `truncate`: later views carry
/// the promotion on.
fn since_promotion(view: View, number: u64, (truncate, released): (u64, u64)) -> View {
    View {
        promotions: vec![Promotion {
            view: number,
            truncate_lsn: truncate,
            based_on: None,
            lsn_released_max: released,
            rebuilt: Vec::new(),
        }],
        ..view
    }
}

/// Three nodes settled, backups at the given LSNs, primary 1 crashed; returns the view every
/// live node agrees on once the change is done, and the ticks it took.
fn crash_primary(lsn2: u64, lsn3: u64) -> (Harness, View, u64) {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, lsn2);
    h.set_lsn(3, lsn3);
    h.crash(1);
    let ticks = h.run_until(200, |h| h.all_live_at(2));
    let new = h.view_of(2);
    assert_eq!(h.view_of(3), new);
    (h, new, ticks)
}

#[test]
fn a_crashed_primary_is_replaced_by_the_backup_with_the_highest_lsn() {
    let (mut h, new, ticks) = crash_primary(100, 90);
    assert_eq!(new, promoted(2, 2, 3, &[], (100, 90)));
    assert!(ticks <= FAILOVER_TICKS_MAX, "failover took {ticks} ticks");
    for id in [2, 3] {
        assert_eq!(
            h.node(id).plane().freezes,
            vec![1],
            "node {id} froze once, in view 1"
        );
        assert_eq!(
            h.node(id).plane().suspected,
            vec![(1, 1)],
            "node {id} suspected node 1"
        );
    }
    // The new view holds: no more suspicions, no more changes.
    h.run(200);
    assert_eq!(h.view_of(2), new);
    assert_eq!(h.history().len(), 2);
    assert_ne!(
        h.leader(),
        Some(2),
        "the config store leader left the new primary"
    );
}

#[test]
fn ties_go_to_the_lowest_id_and_the_highest_lsn_wins_whoever_holds_it() {
    let (_, tie, _) = crash_primary(100, 100);
    assert_eq!(tie, promoted_level(2, 2, &[3], (100, 100)));
    let (_, higher3, _) = crash_primary(90, 100);
    assert_eq!(higher3, promoted(2, 3, 2, &[], (100, 90)));
}

#[test]
fn a_crashed_backup_is_removed_and_rejoins_as_a_spare_after_a_restart() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.crash(3);
    let ticks = h.run_until(200, |h| h.all_live_at(2));
    assert_eq!(h.view_of(1), view(2, 1, &[2], &[]));
    assert_eq!(h.node(1).plane().suspected, vec![(3, 1)]);
    assert!(
        h.node(2).plane().freezes.is_empty(),
        "no freeze: the primary is fine"
    );
    assert!(ticks <= 200);
    h.run(100);
    assert_eq!(h.history().len(), 2, "the view holds");
    // Back with its memory gone: it asks to join and is made a spare, not a backup.
    h.restart(3);
    h.run_until(200, |h| h.all_live_at(3));
    assert_eq!(h.view_of(3), view(3, 1, &[2], &[3]));
}

/// Seeds 13144 and 54935: a backup restarts without its memory (it can never report), and the
/// other, which leads the config store, loses the primary for a while, freezes and reports.
/// A promotion needs both reports under `2-safe:1`, and no removal can be prepared (the
/// frozen backup lacks released records): the cluster stayed stuck for good though the
/// primary ran. Once the coordinator hears the primary again, a view under the same primary
/// ends the change.
#[test]
fn a_change_that_cannot_gather_its_reports_ends_while_the_primary_runs() {
    let mut h = Harness::three(Safety::TwoSafe(AckCount::Of(1)));
    let leader = h.settle();
    let other = 5 - leader;
    h.refuse_removals();
    h.crash(other);
    h.restart(other);
    h.cut_link(1, leader);
    h.run_until(200, |h| h.node(leader).core().is_frozen(GROUP));
    h.run(100);
    assert_eq!(h.history().len(), 1, "no promotion without both reports");
    h.heal();
    h.run_until(200, |h| h.history().len() >= 2);
    let resumed = h.history().get(&2).expect("a second view").clone();
    assert_eq!(
        resumed,
        view(2, 1, &[2, 3], &[]),
        "the same primary and members"
    );
    h.run_until(50, |h| !h.node(leader).core().is_frozen(GROUP));
}

/// A primary whose executor is stuck in one call keeps its process, its sockets and its
/// supervisor: only the core's watch on its progress gives it away. Once stuck for
/// `EXECUTOR_STALL_TICKS` it says neither `Alive` nor anything to its backups, and a backup
/// takes over. Not before: a long call is not a failure.
#[test]
fn a_primary_whose_executor_is_stuck_is_replaced() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 100);
    h.stick_executor(1);
    // The last progress was reported before the tick that ended the settling.
    h.run(EXECUTOR_STALL_TICKS - 2);
    assert!(!h.node(1).core().is_stalled(GROUP));
    assert_eq!(h.history().len(), 1, "a long call is not a failure");
    h.run_until(200, |h| h.history().len() >= 2);
    let next = h.history()[&2].clone();
    assert_ne!(next.primary, 1, "the stuck primary is replaced: {next:?}");
}

/// A primary in one long call (a script) its data plane reports is making progress until the
/// call's allowance (`long_call_ticks`, its time limit) is spent; only then does the stall
/// count start, and a backup takes over after it.
#[test]
fn a_long_call_is_progress_until_its_allowance_is_spent() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 100);
    h.stick_executor(1);
    h.long_call(1, true);
    h.run(LONG_CALL_TICKS + EXECUTOR_STALL_TICKS - 2);
    assert!(!h.node(1).core().is_stalled(GROUP));
    assert_eq!(
        h.history().len(),
        1,
        "a long call within its allowance is not a failure"
    );
    h.run_until(200, |h| h.history().len() >= 2);
    let next = h.history()[&2].clone();
    assert_ne!(
        next.primary, 1,
        "stuck past the allowance, it is replaced: {next:?}"
    );
}

/// Seeds 9 and 892 of `--mix any-time`: a promotion left the new primary without backups
/// (the other reporters were behind), and it died before a spare became a backup. Nothing new
/// is released in a view without backups, so the spare that holds the promotion's truncate
/// LSN holds every acknowledged record: it takes over. One short of it does not.
#[test]
fn a_caught_up_spare_replaces_a_primary_without_backups() {
    for (lsn2, promoted) in [(100, true), (99, false)] {
        let first = since_promotion(view(3, 1, &[], &[2, 3]), 3, (100, 100));
        let mut h = Harness::new(&[1, 2, 3], &[1, 2, 3], first, Safety::DEFAULT);
        h.settle();
        h.set_lsn(2, lsn2);
        h.set_lsn(3, 90);
        h.crash(1);
        h.run(300);
        if promoted {
            let next = h.history().get(&4).expect("a spare takes over").clone();
            assert_eq!(
                next,
                View {
                    promotions: vec![
                        Promotion {
                            view: 3,
                            truncate_lsn: 100,
                            based_on: None,
                            lsn_released_max: 100,
                            rebuilt: Vec::new(),
                        },
                        Promotion {
                            view: 4,
                            truncate_lsn: 100,
                            based_on: None,
                            lsn_released_max: 100,
                            rebuilt: Vec::new(),
                        },
                    ],
                    // The other spare, behind, is kept as a backup (not a spare) so that
                    // the new primary is not alone.
                    ..view(4, 2, &[3], &[])
                }
            );
        } else {
            assert_eq!(
                h.history().len(),
                1,
                "no spare holds LSN 100: {:?}",
                h.history()
            );
        }
    }
}

/// The backup that leads the config store dies. The primary must win the election and remove
/// it, never hand leadership back to the dead node (a transfer to it would stall the config
/// store at every retry).
#[test]
fn a_crashed_backup_that_led_the_config_store_is_removed() {
    let mut h = Harness::three(Safety::DEFAULT);
    let leader = h.settle();
    assert_ne!(leader, 1, "the leader is kept off the primary");
    h.crash(leader);
    let other = 5 - leader;
    h.run_until(500, |h| h.all_live_at(2));
    assert_eq!(h.view_of(1), view(2, 1, &[other], &[]));
    assert_eq!(h.view_of(other), view(2, 1, &[other], &[]));
}

/// Cuts the link between primary 1 and backup `cut`; the other backup still hears node 1.
/// Returns the first view change, the config store leader that made it, and the view the
/// three agree on once the link healed.
fn false_suspicion(cut: NodeId) -> (View, NodeId, View) {
    let other = 5 - cut;
    let mut h = Harness::three(Safety::DEFAULT);
    let coordinator = h.settle();
    h.set_lsn(cut, 100);
    h.set_lsn(other, 100);
    h.cut_link(1, cut);
    h.run_until(200, |h| h.history().len() >= 2);
    let first = h.history()[&2].clone();
    h.run(100);
    h.heal();
    let last = h.run_until_quiet(500, 6 * SUSPECT_TICKS);
    (first, coordinator, last)
}

#[test]
fn a_false_suspicion_ends_in_a_safe_view() {
    for cut in [2, 3] {
        let other = 5 - cut;
        let (first, coordinator, last) = false_suspicion(cut);
        // The safe outcomes: the cut backup is removed, or a backup is promoted over every
        // record a reporter held. (The checker already saw one primary per view everywhere.)
        let removed = view(2, 1, &[other], &[]);
        let promotion = first.number == 2
            && [cut, other].contains(&first.primary)
            && first.truncate_lsn() == Some(100)
            && first.backups.iter().all(|&b| b != 1 && b != first.primary);
        assert!(first == removed || promotion, "cut 1–{cut}: {first:?}");
        // The harness is deterministic: node 2 leads the config store. A coordinator that
        // still hears the primary blames the link and removes the backup; one that lost the
        // primary itself promotes.
        assert_eq!(coordinator, 2);
        if cut == coordinator {
            assert!(promotion && first.primary == 2, "cut 1–{cut}: {first:?}");
        } else {
            assert_eq!(first, removed, "cut 1–{cut}");
        }
        // Healed, the three agree on one view that has a place for each of them.
        let mut members: Vec<NodeId> = last.members().collect();
        members.sort_unstable();
        assert_eq!(members, vec![1, 2, 3], "cut 1–{cut}: {last:?}");
    }
}

/// A false suspicion keeps the healthy backup (collect_ticks outlasts lease_ticks).
#[test]
fn a_false_suspicion_of_the_primary_keeps_the_healthy_backup() {
    let (first, coordinator, _) = false_suspicion(2);
    assert_eq!(coordinator, 2);
    assert_eq!(first, promoted_level(2, 2, &[3], (100, 100)));
}

#[test]
fn an_old_primary_cut_off_learns_the_new_view_and_rejoins_as_a_spare() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 100);
    h.isolate(1);
    h.run_until(200, |h| {
        h.view_of(2).number >= 2 && h.view_of(3).number >= 2
    });
    assert_eq!(h.view_of(2), promoted_level(2, 2, &[3], (100, 100)));
    // Cut off, node 1 still believes it leads view 1; no backup acks it (they are frozen and
    // then follow node 2), so a 2-safe primary releases nothing.
    assert_eq!(h.view_of(1), view(1, 1, &[2, 3], &[]));
    h.heal();
    h.run_until(200, |h| h.view_of(1).number >= 2);
    assert_ne!(h.view_of(1).primary, 1);
    h.run_until(200, |h| h.all_live_at(3));
    assert_eq!(
        h.view_of(1),
        since_promotion(view(3, 2, &[3], &[1]), 2, (100, 100))
    );
}

#[test]
fn an_old_primary_restarted_learns_the_new_view_and_rejoins_as_a_spare() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 90);
    h.crash(1);
    h.run_until(200, |h| h.all_live_at(2));
    h.restart(1);
    // It restarts from its disk, which names it primary of view 1, and serves nothing.
    assert_eq!(
        h.node(1).plane().views.last().unwrap(),
        &(1, view(1, 1, &[2, 3], &[]))
    );
    h.run_until(200, |h| h.view_of(1).number >= 2);
    assert_ne!(h.view_of(1).primary, 1);
    h.run_until(200, |h| h.all_live_at(3));
    assert_eq!(
        h.view_of(1),
        since_promotion(view(3, 2, &[3], &[1]), 2, (100, 90))
    );
    // Its stale suspicions of view 1 changed nothing.
    assert_eq!(h.history().len(), 3);
}

/// A primary that restarts (its memory gone) before anyone suspected it runs no role and
/// never says it is alive, so the backups replace it.
#[test]
fn a_primary_that_restarts_before_it_is_suspected_is_still_replaced() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 90);
    h.crash(1);
    h.restart(1);
    // Its disk names it primary of view 1, but its records are gone: it serves nothing.
    h.run_until(FAILOVER_TICKS_MAX, |h| h.all_live_at(2));
    assert_eq!(h.view_of(1), promoted(2, 2, 3, &[], (100, 90)));
    h.run_until(200, |h| h.all_live_at(3));
    assert_eq!(
        h.view_of(1),
        since_promotion(view(3, 2, &[3], &[1]), 2, (100, 90))
    );
}

#[test]
fn a_node_outside_the_view_joins_as_a_spare_then_becomes_a_backup() {
    let mut h = Harness::new(
        &[1, 2, 3, 4],
        &[1, 2, 3],
        view(1, 1, &[2, 3], &[]),
        Safety::DEFAULT,
    );
    h.settle();
    h.run_until(200, |h| h.all_live_at(2));
    assert_eq!(h.view_of(4), view(2, 1, &[2, 3], &[4]));
    // Only the primary's word counts: a backup claiming it caught up changes nothing.
    h.spare_caught_up(2, 4);
    h.run(3 * SUSPECT_TICKS);
    assert_eq!(h.history().len(), 2);
    h.spare_caught_up(1, 4);
    h.run_until(50, |h| h.all_live_at(3));
    assert_eq!(h.view_of(4), view(3, 1, &[2, 3, 4], &[]));
    h.run(100);
    assert_eq!(
        h.history().len(),
        3,
        "the spare-turned-backup is heard: no removal"
    );
}

#[test]
fn a_node_still_loading_its_database_asks_to_join_only_once_it_is_loaded() {
    let mut h = Harness::new(
        &[1, 2, 3, 4],
        &[1, 2, 3],
        view(1, 1, &[2, 3], &[]),
        Safety::DEFAULT,
    );
    h.core_mut(4).set_loaded(GROUP, false);
    h.settle();
    h.run(20 * SUSPECT_TICKS);
    assert_eq!(h.history().len(), 1, "it joined before it had a database");
    h.core_mut(4).set_loaded(GROUP, true);
    h.run_until(200, |h| h.all_live_at(2));
    assert_eq!(h.view_of(4), view(2, 1, &[2, 3], &[4]));
}

#[test]
fn the_config_store_leader_crashing_mid_change_delays_but_does_not_stop_a_failover() {
    // Five voters, so that the primary and the leader may both fail.
    let mut h = Harness::new(
        &[1, 2, 3, 4, 5],
        &[1, 2, 3, 4, 5],
        view(1, 1, &[2, 3, 4, 5], &[]),
        Safety::DEFAULT,
    );
    let leader = h.settle();
    assert!(h.view_of(1).backups.contains(&leader));
    let lsns = BTreeMap::from([(2, 100), (3, 110), (4, 120), (5, 105)]);
    for (&id, &lsn) in &lsns {
        h.set_lsn(id, lsn);
    }
    // One backup's runtime is slow to freeze, so the leader, which proposes as soon as the
    // last report is in, is still collecting when it dies.
    let slow = [2, 3, 4, 5].into_iter().find(|&id| id != leader).unwrap();
    h.stall_freeze(slow);
    h.crash(1);
    // The leader starts the change (it freezes itself first) and dies before proposing.
    h.run_until(50, |h| h.node(leader).core().is_frozen(GROUP));
    assert_eq!(h.history().len(), 1);
    h.crash(leader);
    h.release_freeze(slow);
    h.run_until(300, |h| h.all_live_at(2));
    let new = h.view_of(h.live()[0]);
    let new_leader = h.leader().expect("a new leader");
    assert_ne!(new_leader, leader);
    assert_eq!(new.number, 2);
    assert!(![1, leader].contains(&new.primary), "{new:?}");
    // Every surviving backup re-reported to the new coordinator: the highest LSN is promoted.
    let survivors: Vec<NodeId> = [2, 3, 4, 5]
        .into_iter()
        .filter(|&id| id != leader)
        .collect();
    let best = survivors
        .iter()
        .copied()
        .max_by_key(|id| (lsns[id], u32::MAX - id))
        .unwrap();
    // The closest behind it stays a backup; the other is a spare.
    let others: Vec<NodeId> = survivors.iter().copied().filter(|&id| id != best).collect();
    let kept = others
        .iter()
        .copied()
        .max_by_key(|id| (lsns[id], u32::MAX - id))
        .unwrap();
    let behind: Vec<NodeId> = others.iter().copied().filter(|&id| id != kept).collect();
    // Every backup acked each released record, and three of the four reported: none lies
    // above the lowest of their LSNs.
    let released = survivors.iter().map(|id| lsns[id]).min().unwrap();
    assert_eq!(
        new,
        promoted(2, best, kept, &behind, (lsns[&best], released))
    );
    h.run(100);
    assert_eq!(h.history().len(), 2);
}

/// Four nodes, primary 1 and backups 2, 3, 4, under `safety`; node 4's runtime is slow to
/// freeze; primary 1 crashes. Returns the harness once 2 and 3 have reported.
fn failover_with_a_slow_backup(safety: Safety) -> Harness {
    let mut h = Harness::new(
        &[1, 2, 3, 4],
        &[1, 2, 3],
        view(1, 1, &[2, 3, 4], &[]),
        safety,
    );
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 90);
    h.set_lsn(4, 120);
    h.stall_freeze(4);
    h.crash(1);
    h
}

#[test]
fn a_promotion_waits_for_n_minus_k_plus_one_reports() {
    let k1 = Safety::TwoSafe(AckCount::Of(1));
    assert_eq!(rule::reports_needed(3, k1), 3);
    let mut h = failover_with_a_slow_backup(k1);
    // 2 and 3 freeze and report; 4 froze in the core but its runtime has not confirmed.
    h.run_until(50, |h| h.node(4).plane().freezes == vec![1]);
    h.run(200);
    assert_eq!(
        h.history().len(),
        1,
        "no promotion on 2 of the 3 reports needed"
    );
    // The third report: node 4, the only one that may hold the single acknowledged copy.
    h.release_freeze(4);
    h.run_until(50, |h| h.all_live_at(2));
    assert_eq!(h.view_of(2), promoted(2, 4, 2, &[3], (120, 120)));

    // The same script under the default rule (every backup acks) promotes without node 4:
    // any one report holds every acknowledged record. This is what the wait above is for.
    let mut h = failover_with_a_slow_backup(Safety::DEFAULT);
    h.run_until(FAILOVER_TICKS_MAX, |h| h.all_live_at(2));
    assert_eq!(h.view_of(2), promoted(2, 2, 3, &[], (100, 90)));
}

/// A lost Freeze is sent again while the backup keeps suspecting.
#[test]
fn a_backup_that_missed_the_freeze_is_frozen_once_it_is_heard_again() {
    let k1 = Safety::TwoSafe(AckCount::Of(1));
    let mut h = Harness::new(&[1, 2, 3, 4], &[1, 2, 3], view(1, 1, &[2, 3, 4], &[]), k1);
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 90);
    h.set_lsn(4, 120);
    h.isolate(4);
    h.crash(1);
    h.run(100);
    assert_eq!(
        h.history().len(),
        1,
        "2 of the 3 reports needed: no promotion, rightly"
    );
    assert!(
        h.node(4).plane().freezes.is_empty(),
        "the freeze never reached node 4"
    );
    h.heal();
    // Node 4 now reaches the coordinator: it suspects the primary every SUSPECT_TICKS.
    h.run_until(200, |h| h.all_live_at(2));
    assert_eq!(h.view_of(2), promoted(2, 4, 2, &[3], (120, 120)));
}

#[test]
fn the_rule_depends_on_the_reports() {
    let old = view(1, 1, &[2, 3], &[]);
    let reports = BTreeMap::from([(2, 100), (3, 90)]);
    let swapped = BTreeMap::from([(2, 90), (3, 100)]);
    let a = rule::promote(&old, &reports, Safety::DEFAULT).unwrap();
    let b = rule::promote(&old, &swapped, Safety::DEFAULT).unwrap();
    assert_eq!(a, promoted(2, 2, 3, &[], (100, 90)));
    assert_eq!(b, promoted(2, 3, 2, &[], (100, 90)));
    assert_ne!(a.primary, b.primary);
}

#[test]
#[should_panic(expected = "applied a different view 2")]
fn the_checker_catches_two_different_views_with_one_number() {
    let (mut h, new, _) = crash_primary(100, 90);
    // Node 1 crashed in view 1, so the planted view moves forward for it, but it differs.
    h.plant_view(1, View { primary: 3, ..new });
}

#[test]
#[should_panic(expected = "applied view 1 after view 2")]
fn the_checker_catches_a_view_going_backwards() {
    let (mut h, _, _) = crash_primary(100, 90);
    h.plant_view(3, view(1, 1, &[2, 3], &[]));
}

/// Every node of the group is killed at once and restarts from its disk: none holds its
/// memory, each rebuilt what its write-ahead log synced. Three nodes, primary 1; the nodes
/// rebuilt `lsns` (of nodes 1, 2, 3) of view 1's history.
fn power_loss(safety: Safety, lsns: [u64; 3]) -> Harness {
    let mut h = Harness::three(safety);
    h.settle();
    for id in [1, 2, 3] {
        h.crash(id);
    }
    for (id, lsn) in (1..=3).zip(lsns) {
        h.restart_rebuilt(id, lsn, 1);
    }
    h
}

#[test]
fn a_group_that_lost_power_promotes_the_node_whose_log_holds_the_most() {
    for safety in [
        Safety::DEFAULT,
        Safety::TwoSafe(AckCount::Of(1)),
        Safety::Durable(AckCount::Of(1)),
    ] {
        // The backups' logs hold the most: node 3 takes over from its own, node 2 stays a
        // backup rather than leave it alone, and the old primary comes back as a spare.
        let mut h = power_loss(safety, [50, 90, 100]);
        h.run_until(40 * SUSPECT_TICKS, |h| h.all_live_at(2));
        let promoted_view = h.history()[&2].clone();
        assert_eq!(promoted_view.primary, 3, "{safety:?}");
        assert_eq!(promoted_view.backups, vec![2], "{safety:?}");
        assert_eq!(promoted_view.truncate_lsn(), Some(100), "{safety:?}");
        assert!(!h.node(3).plane().lost_memory, "node 3 serves from its log");
        assert!(!h.node(2).plane().lost_memory, "node 2 serves from its log");
        h.run_until(200, |h| {
            let view = h.view_of(1);
            view.spares.contains(&1) || view.backups.contains(&1)
        });
        assert!(!h.node(1).plane().lost_memory);

        // The old primary's log holds the most (it logged what it sealed before the backups
        // had it). A memory rule waits for its report (that it restarted is what makes the
        // logs all there is) and promotes it, a new reign of its own; `durable` needs only
        // the backups' reports (every acknowledged record was synced by one of them) and
        // may go ahead before it reports.
        let mut h = power_loss(safety, [110, 90, 100]);
        h.run_until(40 * SUSPECT_TICKS, |h| h.all_live_at(2));
        let promoted_view = h.history()[&2].clone();
        if let Safety::Durable(_) = safety {
            assert!(
                promoted_view.truncate_lsn() >= Some(100),
                "{promoted_view:?}"
            );
        } else {
            assert_eq!(promoted_view.primary, 1, "{safety:?}");
            assert_eq!(promoted_view.backups, vec![3], "{safety:?}");
            assert_eq!(promoted_view.truncate_lsn(), Some(110), "{safety:?}");
            assert!(!h.node(1).plane().lost_memory, "node 1 serves from its log");
        }
    }
}

/// k-of-n seed 80996: the one backup of a view restarted while the primary ran (briefly
/// silent to the coordinator), and its report was taken for a whole group's. Without the
/// primary's own report that it restarted, a memory rule does not count it.
#[test]
fn a_lone_backups_rebuilt_report_needs_the_primarys_restart_under_a_memory_rule() {
    let old = view(3, 1, &[2], &[3]);
    let rebuilt = |lsn| rule::Reported {
        lsn_received: lsn,
        view_held: 1,
        restarted: true,
        incarnation: 1,
        lsn_synced: lsn,
    };
    let k1 = Safety::TwoSafe(AckCount::Of(1));
    let backup_only = BTreeMap::from([(2, rebuilt(709))]);
    assert_eq!(
        rule::promote_from(&old, &backup_only, k1),
        Err(rule::RuleError::TooFewReports { got: 0, needed: 1 })
    );
    let with_primary = BTreeMap::from([(1, rebuilt(700)), (2, rebuilt(709))]);
    let promoted = rule::promote_from(&old, &with_primary, k1).expect("the whole group restarted");
    assert_eq!((promoted.primary, promoted.truncate_lsn()), (2, Some(709)));
    // A report from a primary that did not restart is refused.
    let live = BTreeMap::from([(
        1,
        rule::Reported {
            restarted: false,
            ..rebuilt(700)
        },
    )]);
    assert!(rule::promote_from(&old, &live, k1).is_err());
}

/// A backup that restarted alone reports nothing while the primary runs: its log may lack
/// what its lost incarnation acknowledged, and the primary has it removed instead.
#[test]
fn a_backup_restarted_with_its_log_does_not_replace_a_live_primary() {
    let mut h = Harness::three(Safety::TwoSafe(AckCount::Of(1)));
    h.settle();
    h.crash(2);
    h.restart_rebuilt(2, 500, 1);
    h.run_until(200, |h| h.view_of(2).spares.contains(&2));
    h.run(100);
    assert!(
        h.history().values().all(|view| view.primary == 1),
        "the primary was replaced: {:?}",
        h.history()
    );
}

/// The primary dies and a backup restarts with its log while the other backup lives. Under
/// a rule that acknowledges from memory the rebuilt report does not count (the record only
/// the lost incarnation acknowledged may be missing from it), and the change waits for the
/// living; under `durable` every acknowledged record was synced by k backups, and it counts.
#[test]
fn a_rebuilt_report_counts_alongside_the_living_only_under_durable() {
    for (safety, promotes) in [
        (Safety::TwoSafe(AckCount::Of(1)), false),
        (Safety::Durable(AckCount::Of(1)), true),
    ] {
        let mut h = Harness::three(safety);
        h.settle();
        h.set_lsn(3, 90);
        h.crash(1);
        h.crash(2);
        h.restart_rebuilt(2, 100, 1);
        h.run(40 * SUSPECT_TICKS);
        let promoted_view = h.history().get(&2).cloned();
        if promotes {
            let promoted_view = promoted_view.expect("durable: a promotion");
            assert_eq!(promoted_view.primary, 2);
            assert_eq!(promoted_view.truncate_lsn(), Some(100));
        } else {
            assert_eq!(
                promoted_view, None,
                "a memory rule promoted on a rebuilt report"
            );
        }
    }
}

/// A rebuilt report the promotion did not come from (the lost incarnation reported from
/// memory first) does not let a node serve as primary holding less than the truncate LSN.
#[test]
fn a_node_promoted_from_a_report_of_its_lost_incarnation_serves_nothing() {
    let promoted_view = View {
        promotions: vec![Promotion {
            view: 2,
            truncate_lsn: 100,
            based_on: None,
            lsn_released_max: 100,
            rebuilt: vec![(2, 1), (3, 1)],
        }],
        ..view(2, 2, &[3], &[])
    };
    use tandem_cluster::role::made_from_report;
    assert!(made_from_report(2, Some(1), 100, &promoted_view));
    assert!(!made_from_report(2, Some(1), 90, &promoted_view));
    assert!(!made_from_report(2, None, 100, &promoted_view));
    assert!(!made_from_report(2, Some(0), 100, &promoted_view));
    assert!(made_from_report(3, Some(1), 80, &promoted_view));
    assert!(!made_from_report(1, Some(1), 100, &promoted_view));
}

/// Any-time seed 82: a primary promoted alone (no backups, no spares) crashed at once and came
/// back with the records its log gave back; no one else could report, and the group waited on
/// it for good. Its own report of them now makes a reign of its own.
#[test]
fn a_lone_primary_that_restarted_is_promoted_from_its_own_log() {
    let alone = view(6, 3, &[], &[]);
    let rebuilt = BTreeMap::from([(
        3,
        rule::Reported {
            lsn_received: 321,
            view_held: 4,
            restarted: true,
            incarnation: 1,
            lsn_synced: 321,
        },
    )]);
    for safety in [
        Safety::DEFAULT,
        Safety::TwoSafe(AckCount::Of(1)),
        Safety::Durable(AckCount::All),
    ] {
        let next = rule::promote_from(&alone, &rebuilt, safety).expect("its own log suffices");
        assert_eq!((next.number, next.primary), (7, 3));
        assert_eq!(next.truncate_lsn(), Some(321));
    }
}

/// Default-mix seeds 585 and 1160: on equal logs the old primary won the promotion, or stayed
/// a backup of it; a second power loss then left backups that could not serve and no spare to
/// replace them. A backup now wins a tie, and the old primary, unless promoted, leaves the
/// view and rejoins as a spare.
#[test]
fn on_equal_logs_a_backup_is_promoted_and_the_old_primary_leaves() {
    let old = view(1, 1, &[2, 3], &[]);
    let rebuilt = |lsn| rule::Reported {
        lsn_received: lsn,
        view_held: 1,
        restarted: true,
        incarnation: 1,
        lsn_synced: lsn,
    };
    let reports = BTreeMap::from([(1, rebuilt(37)), (2, rebuilt(37)), (3, rebuilt(37))]);
    let next = rule::promote_from(&old, &reports, Safety::TwoSafe(AckCount::Of(1))).unwrap();
    assert_eq!((next.primary, next.backups.clone()), (2, vec![3]));
    assert!(!next.members().any(|node| node == 1), "{next:?}");
}

/// Default-mix seed 420438: a promotion proposed from the backups' reports from memory
/// (LSN 100) was committed only after every node lost power and came back with less in its
/// log (90). The view named a primary that could not serve (it holds less than the truncate
/// LSN) and a backup that served from its rebuilt records; frozen for the next change, that
/// backup reported its records as a live backup's, so the floor of the truncate LSN held, and
/// the group waited for good. The power loss strikes here at every tick of such a failover.
#[test]
fn a_power_loss_during_a_failover_from_memory_reports_ends_in_a_serving_view() {
    let safety = Safety::TwoSafe(AckCount::Of(1));
    let mut promoted_from_memory = 0;
    for ticks_before_loss in 0..4 * SUSPECT_TICKS {
        let mut h = Harness::three(safety);
        h.settle();
        h.set_lsn(2, 100);
        h.set_lsn(3, 100);
        h.crash(1);
        h.run(ticks_before_loss);
        for id in [2, 3] {
            h.crash(id);
        }
        for id in [1, 2, 3] {
            h.restart_rebuilt(id, 90, 1);
        }
        h.run_until(100 * SUSPECT_TICKS, |h| {
            let view = h.view_of(1);
            [2, 3].iter().all(|&id| h.view_of(id) == view)
                && !h.node(view.primary).plane().lost_memory
        });
        let view = h.view_of(1);
        assert!(
            !h.node(view.primary).plane().lost_memory,
            "power loss {ticks_before_loss} ticks into the failover: no primary serves {view:?}\n{}",
            h.describe()
        );
        let from_memory = |view: &View| view.truncate_lsn() == Some(100);
        promoted_from_memory += usize::from(h.history().values().any(from_memory));
    }
    assert!(
        promoted_from_memory > 0,
        "no promotion from the reports from memory committed"
    );
}

/// Default-mix seed 458046 (1-safe): after two power losses the primary served again, and
/// its one backup came back with records its log gave back but without its memory: it waits
/// to be left out (it serves nothing the view counts on). Its primary prepared no removal (no
/// spare held what it released), and the coordinator would have refused a view without a
/// backup unless it knew the backup restarted, which it learned only from reports that a
/// coordinator still hearing the primary may never ask for. The backup waited for good. A member that waits now says so (`Join`), and a
/// primary under a rule that promises nothing at a failover asks for the removal all the
/// same (as the harness's primary does); the member then joins again as a spare.
#[test]
fn a_lone_backup_restarted_with_its_log_is_left_out_while_the_primary_runs() {
    let first = view(1, 1, &[2], &[3]);
    let mut h = Harness::new(&[1, 2, 3], &[1, 2, 3], first, Safety::OneSafe);
    h.settle();
    h.crash(2);
    h.restart_rebuilt(2, 50, 1);
    h.run_until(100 * SUSPECT_TICKS, |h| !h.view_of(1).backups.contains(&2));
    h.run_until(100 * SUSPECT_TICKS, |h| {
        h.view_of(1).spares.contains(&2) && !h.node(2).plane().lost_memory
    });
    assert!(
        h.history().values().all(|view| view.primary == 1),
        "the live primary stays: {:?}",
        h.history()
    );
}

/// Default-mix seed 477403 (`2-safe-applied:1`): a node restarted with records its log gave
/// back was left out of the view, then named a spare again, and its role followed from those
/// records. Its core had dropped them when it was left out, so once a second power loss left
/// it a reporter of a view without backups, it reported its log's records as received from a
/// live primary: the change took the group for alive, the report lay below the last
/// promotion's floor, and the group waited for good. Until it hears a primary, a role that
/// follows from its log's records reports them as rebuilt.
#[test]
fn a_restarted_node_left_out_and_named_again_reports_its_logs_records_as_rebuilt() {
    let mut h = Harness::three(Safety::TwoSafe(AckCount::Of(1)));
    h.settle();
    h.crash(3);
    h.restart_rebuilt(3, 40, 1);
    assert!(h.node(3).core().reports_rebuilt(GROUP));
    h.run_until(100 * SUSPECT_TICKS, |h| {
        !h.view_of(1).members().any(|node| node == 3)
    });
    // The primary's stream never reaches node 3 again.
    h.cut_link(1, 3);
    h.run_until(100 * SUSPECT_TICKS, |h| {
        h.view_of(3).spares.contains(&3) && !h.node(3).plane().lost_memory
    });
    assert!(
        h.node(3).core().reports_rebuilt(GROUP),
        "a spare following from its log's records, unheard, reports them as received"
    );
}

/// Default-mix seed 33390 (`2-safe:1`): after a power loss the primary served again, and its
/// one backup and its one spare came back without their memory. The backup could not be
/// removed (no spare held what was released), and its report of the records its log gave
/// back, sent at once in each new view, started a view change each time, which the
/// coordinator ended in a view of the same members while the primary ran; as long as a change
/// was collecting, the silent spare was never left out, so none could rejoin, catch up and
/// take the backup's place, and the group committed nothing for good. The coordinator had
/// forgotten with every new view that the primary runs. Now the primary's `Alive` holds
/// across a view under the same primary, and a report of rebuilt records starts no change
/// while the primary runs: nothing is frozen.
#[test]
fn a_rebuilt_report_right_after_a_view_change_starts_no_change_while_the_primary_runs() {
    let mut h = Harness::three(Safety::TwoSafe(AckCount::Of(1)));
    let leader = h.settle();
    let other = 5 - leader;
    // A membership change under the same primary: the backup that does not lead leaves.
    h.crash(other);
    h.run_until(50 * SUSPECT_TICKS, |h| h.view_of(1).number >= 2);
    let view = h.view_of(leader);
    assert_eq!(view.primary, 1);
    // At once, before the primary says again that it runs, a report of rebuilt records.
    let report = tandem_cluster::ClusterMessage::Report {
        group: GROUP,
        view: view.number,
        lsn_received: 10,
        view_held: 1,
        restarted: true,
        lsn_synced: 10,
        incarnation: 1,
    };
    h.core_mut(leader).step(leader, report).expect("a report");
    h.run(10 * SUSPECT_TICKS);
    assert!(
        h.node(leader).plane().freezes.is_empty(),
        "a change froze the backup under a live primary: {:?}",
        h.history()
    );
    assert!(h.history().values().all(|view| view.primary == 1));
}

/// Default-mix seed 571285 (`2-safe-applied`): a second power loss struck while a view made
/// for the lost incarnations (a spare made a backup on what it had caught up from memory)
/// waited in the config store's log; it committed after the restart. The primary served again
/// from its log, and both backups, restarted, waited to be left out of every view that named
/// them: they could not serve in a view that may count on what their lost incarnations held.
/// The primary, under a rule that waits for backups, prepared no removal (no spare held what
/// it released), a change started on their reports ended in a view of the same members while
/// the primary ran, and the group committed nothing for good. Now the coordinator leaves out
/// the members of a view that all restarted in it while its primary runs; they join again as
/// spares and catch up.
#[test]
fn backups_that_all_restarted_under_a_live_primary_are_left_out_and_join_again() {
    for safety in [
        Safety::TwoSafeApplied(AckCount::All),
        Safety::TwoSafe(AckCount::Of(1)),
        Safety::Durable(AckCount::All),
    ] {
        let mut h = Harness::three(safety);
        h.settle();
        // The primary prepares no removal: no member it could keep holds what it released.
        h.refuse_removals();
        for id in [2, 3] {
            h.crash(id);
        }
        for id in [2, 3] {
            h.restart_rebuilt(id, 131, 1);
        }
        h.run_until(100 * SUSPECT_TICKS, |h| {
            let view = h.view_of(1);
            !view.backups.contains(&2) && !view.backups.contains(&3)
        });
        // Left out, each is a fresh node: it joins as a spare, and once caught up becomes a
        // backup.
        for id in [2, 3] {
            h.run_until(100 * SUSPECT_TICKS, |h| {
                h.view_of(1).spares.contains(&id) && !h.node(id).plane().lost_memory
            });
            h.spare_caught_up(1, id);
            h.run_until(100 * SUSPECT_TICKS, |h| h.view_of(1).backups.contains(&id));
        }
        assert!(
            h.history().values().all(|view| view.primary == 1),
            "{safety:?}: the live primary stays: {:?}",
            h.history()
        );
        let view = h.run_until_quiet(100 * SUSPECT_TICKS, 20 * SUSPECT_TICKS);
        assert_eq!((view.primary, view.backups), (1, vec![2, 3]), "{safety:?}");
    }
}

/// Any-time seed 1301508 (Redis model, `durable:2`): a primary's only backup restarted with
/// its log and was left out while the primary ran (as above), holding records the primary
/// had released with it. A node whose log had stopped short of them joined as a spare, and
/// the primary failed before the spare caught up: the spare, reporter of a view without
/// backups, was promoted from its log at the last promotion's bound on what was released,
/// which said nothing of what the primary released since, and an acknowledged commit was
/// lost. The view that leaves the backups out now says that its primary may be the only
/// holder of what it released (`View::primary_sole_holder`): no spare is promoted out of it,
/// and the change waits for the primary's own report.
#[test]
fn a_spare_does_not_replace_a_primary_that_left_its_restarted_backups_out() {
    // Node 2, the only backup, holds what the primary released. Nodes 3 and 4, outside the
    // view, are still loading. Node 2 is no voter, so the config store outlives it.
    let first = view(1, 1, &[2], &[]);
    let mut h = Harness::new(
        &[1, 2, 3, 4],
        &[1, 3, 4],
        first,
        Safety::Durable(AckCount::All),
    );
    for id in [3, 4] {
        h.core_mut(id).set_loaded(GROUP, false);
    }
    h.run_until(200, |h| h.leader().is_some());
    h.refuse_removals();
    h.set_lsn(1, 131);
    h.crash(2);
    h.restart_rebuilt(2, 131, 1);
    let left_out = h.run_until(100 * SUSPECT_TICKS, |h| h.view_of(1).backups.is_empty());
    let view = h.view_of(1);
    assert!(view.primary_sole_holder, "{view:?} after {left_out} ticks");
    // The holder is gone for good; nodes 3 and 4 join, behind what was released; the
    // primary fails before they catch up.
    h.crash(2);
    for id in [3, 4] {
        h.set_lsn(id, 40);
        h.core_mut(id).set_loaded(GROUP, true);
    }
    h.run_until(100 * SUSPECT_TICKS, |h| h.view_of(1).spares == [3, 4]);
    assert!(h.view_of(1).primary_sole_holder);
    h.crash(1);
    h.run(100 * SUSPECT_TICKS);
    let last = h.history().values().next_back().expect("views").clone();
    assert_eq!(
        last.primary, 1,
        "a spare holding LSN 40 took the place of a primary that released up to 131: {last:?}"
    );
    // The primary comes back with its log, which holds all it released: its own report
    // promotes it, and every record it holds counts as released.
    h.restart_rebuilt(1, 131, last.number);
    h.run_until(100 * SUSPECT_TICKS, |h| {
        h.live()
            .iter()
            .all(|&id| h.view_of(id).number > last.number)
    });
    let promoted = h.view_of(3);
    assert_eq!(promoted.primary, 1, "{promoted:?}");
    assert!(!promoted.primary_sole_holder);
    let promotion = promoted.promotions.last().expect("a promotion");
    assert_eq!(
        (promotion.truncate_lsn, promotion.lsn_released_max),
        (131, 131)
    );
}

/// The hazard 384a3f7 left open (seed 571285's view 8). A promotion (view 2, node 2 at LSN 100) committed and was served before a whole
/// group's power loss: node 2 shipped records 101..=105 of view 2, which node 3's log synced
/// and its own did not. Every node saved no commit index covering view 2 (a change of the
/// commit index alone is not saved; node 2 learned the view from the leader's announcement),
/// so each restarted into view 1. Node 2 answered a freeze of view 1 with its log's records
/// before view 2 committed again: in the simulator a new coordinator freezes view 1 on the
/// restarted primary's report, which leaves before a save, while the acks that commit its own
/// term's first entry (and with it view 2) leave after one; here the freeze is delivered by
/// hand. View 2 then looks made from that report (`role::made_from_report`: reported in view
/// 1, named primary at its log's LSN), so node 2's new incarnation serves as primary in the
/// view its lost incarnation served in, and writes records of its own above 100 under the
/// same view number as node 3's logged 101..=105. Node 3, left out and named again under the
/// same primary, keeps those (`SinceView::Kept`): two different records at one LSN. Now a
/// promotion names the life of each member it named from a report of rebuilt records
/// (`Promotion::rebuilt`, the config store's incarnation), and only that life serves in it
/// from them: view 2 names none, node 2 waits in it, and the next change promotes node 3
/// from its log.
#[test]
fn a_restarted_node_serves_no_promotion_its_lost_incarnation_served() {
    use tandem_cluster::role::{self, Held, Transition};
    let mut h = Harness::three(Safety::TwoSafe(AckCount::Of(1)));
    h.settle();
    h.set_lsn(2, 100);
    h.set_lsn(3, 90);
    h.crash(1);
    h.run_until(FAILOVER_TICKS_MAX, |h| h.all_live_at(2));
    let served = h.view_of(2);
    assert_eq!((served.primary, served.truncate_lsn()), (2, Some(100)));
    assert!(
        !h.node(2).plane().lost_memory,
        "node 2 serves view 2 as its primary"
    );
    // Node 2 ships records 101..=105 of view 2; node 3's log syncs them, node 2's does not.
    // The power loss strikes before any node saved a commit index covering view 2.
    for id in [2, 3] {
        h.crash(id);
    }
    h.restart_rebuilt(1, 80, 1);
    h.restart_rebuilt(2, 100, 1);
    h.restart_rebuilt(3, 105, 2);
    for id in [1, 2, 3] {
        assert_eq!(h.view_of(id).number, 1, "node {id} restarted into view 1");
    }
    let freeze = tandem_cluster::ClusterMessage::Freeze {
        group: GROUP,
        view: 1,
    };
    h.core_mut(2).step(3, freeze).expect("a freeze");
    h.run_until(40 * SUSPECT_TICKS, |h| h.view_of(2).number >= 2);
    assert_eq!(h.view_of(2), served, "view 2 committed again");
    // What node 3 does with its log's records of view 2 once left out and named a spare
    // under the same primary: it keeps them all.
    let joined = View {
        number: 4,
        backups: Vec::new(),
        spares: vec![3],
        ..served.clone()
    };
    let held = Held::Backup {
        primary: 2,
        view: 2,
        lsn_received: 105,
    };
    assert_eq!(
        role::transition(3, held, &joined, 1),
        Transition::StayBackup
    );
    assert!(
        h.node(2).plane().lost_memory,
        "node 2 serves again in view 2, which its lost incarnation served in: {}",
        h.describe()
    );
    // The group recovers all the same: node 2's new life waits in view 2, and the next
    // change is proposed from this life's reports.
    h.run_until(80 * SUSPECT_TICKS, |h| {
        let view = h.view_of(1);
        view.number >= 3 && h.all_live_at(view.number) && !h.node(view.primary).plane().lost_memory
    });
    // Node 3 is promoted from the records of view 2 its log kept (the history node 2's lost
    // life served, 101..=105 included), and the promotion names node 3's new life.
    let next = h.history()[&3].clone();
    assert_eq!(
        (next.primary, next.truncate_lsn()),
        (3, Some(105)),
        "{next:?}"
    );
    let life = h.node(3).core().incarnation().expect("saved");
    assert_eq!(next.promotions.last().unwrap().rebuilt, vec![(3, life)]);
    assert!(!next.members().any(|node| node == 2), "{next:?}");
}

/// `--ticks 2000` seed 155723, scripted: under `durable`, the primary and its only backup
/// come back with logs that hold less than the last promotion released (100), and only a
/// spare's log still holds it. The backups' reports cannot make a promotion
/// (`RuleError::BehindTruncate`), so the coordinator asks the spares too, and promotes the
/// one that holds every released record. Before, the change waited for good.
#[test]
fn a_spare_holding_what_the_backups_lost_is_promoted() {
    let mut first = view(1, 1, &[2], &[3, 4]);
    first.promotions = vec![Promotion {
        view: 1,
        truncate_lsn: 100,
        based_on: None,
        lsn_released_max: 100,
        rebuilt: Vec::new(),
    }];
    let mut h = Harness::new(
        &[1, 2, 3, 4],
        &[1, 2, 3],
        first,
        Safety::Durable(AckCount::All),
    );
    h.settle();
    for id in [1, 2, 3] {
        h.set_lsn(id, 100);
        h.crash(id);
    }
    h.restart_rebuilt(1, 60, 1);
    h.restart_rebuilt(2, 50, 1);
    h.restart_rebuilt(3, 100, 1);
    h.run_until(80 * SUSPECT_TICKS, |h| h.view_of(4).number >= 2);
    let next = h.view_of(4);
    assert_eq!(
        (next.primary, next.truncate_lsn()),
        (3, Some(100)),
        "{}",
        h.describe()
    );
    assert_eq!(next.promotions.last().unwrap().lsn_released_max, 100);
    // Asked only once the backups' reports fell short: the spare that had nothing to offer
    // (node 4, live) was asked too, and its report of nothing lost out.
    assert!(h.node(4).plane().freezes.contains(&1), "{}", h.describe());
}

/// A fixed view (nodes without a `[cluster]` table): a crash, a stuck executor, a partition
/// and a restart move nothing. No core suspects a peer or sends anything, and every node
/// still holds the view it started with.
#[test]
fn a_fixed_view_stays_whatever_fails() {
    let first = view(1, 1, &[2, 3], &[]);
    let mut h = Harness::fixed(Safety::DEFAULT);
    h.run(5 * SUSPECT_TICKS);
    h.stick_executor(1);
    h.run(5 * SUSPECT_TICKS);
    h.crash(1);
    h.run(10 * SUSPECT_TICKS);
    h.restart(1);
    h.isolate(2);
    h.run(10 * SUSPECT_TICKS);
    h.heal();
    h.crash(3);
    h.run(10 * SUSPECT_TICKS);
    for id in h.live() {
        assert_eq!(h.view_of(id), first, "node {id}: {}", h.describe());
        assert!(
            h.node(id).plane().suspected.is_empty(),
            "node {id}: {}",
            h.describe()
        );
    }
    assert_eq!(h.history().len(), 1, "{}", h.describe());
}

// ---- many groups: one config store, a view change per group ----

/// Three nodes serving in three groups, each group's first view given as (primary,
/// backups); the config store's voters are the three nodes.
fn three_groups(views: [(NodeId, [NodeId; 2]); 3]) -> Harness {
    let groups: Vec<(u32, View)> = (1..=3)
        .zip(views)
        .map(|(group, (primary, backups))| (group, view(1, primary, &backups, &[])))
        .collect();
    Harness::groups(&[1, 2, 3], &[1, 2, 3], &groups, Safety::DEFAULT)
}

/// The view of `group` every live node agrees on, if they do.
fn agreed_view(h: &Harness, group: u32) -> Option<View> {
    let live = h.live();
    let first = h.node(live[0]).view_in(group).clone();
    live.iter()
        .all(|&id| *h.node(id).view_in(group) == first)
        .then_some(first)
}

#[test]
fn a_node_that_leads_two_groups_is_replaced_in_both_at_once() {
    // Node 1 leads groups 1 and 2, node 2 leads group 3; node 3 leads none, so the config
    // store's leadership goes to it (kept off every primary).
    let mut h = three_groups([(1, [2, 3]), (1, [2, 3]), (2, [1, 3])]);
    h.run_until(200, |h| h.leader() == Some(3));
    h.run(20);
    h.crash(1);
    let mut replaced_at: BTreeMap<u32, u64> = BTreeMap::new();
    let ticks = h.run_until(FAILOVER_TICKS_MAX, |h| {
        for group in [1, 2] {
            if agreed_view(h, group).is_some_and(|view| view.primary != 1) {
                replaced_at.entry(group).or_insert(h.tick);
            }
        }
        replaced_at.len() == 2
    });
    assert!(ticks <= FAILOVER_TICKS_MAX, "{}", h.describe());
    for group in [1, 2] {
        let view = agreed_view(&h, group).expect("agreed");
        assert_eq!(
            view.number, 2,
            "one view change for group {group}: {view:?}"
        );
        assert!(view.primary == 2 || view.primary == 3, "{view:?}");
    }
    // The two changes ran side by side, not one after the other.
    let (first, last) = (
        replaced_at[&1].min(replaced_at[&2]),
        replaced_at[&1].max(replaced_at[&2]),
    );
    assert!(
        last - first < SUSPECT_TICKS,
        "{replaced_at:?}: {}",
        h.describe()
    );
    // Group 3 keeps its primary and lets the dead backup go.
    let view = h.run_until(FAILOVER_TICKS_MAX, |h| {
        agreed_view(h, 3).is_some_and(|view| !view.backups.contains(&1))
    });
    let group3 = agreed_view(&h, 3).unwrap();
    assert_eq!(group3.primary, 2, "after {view} more ticks: {group3:?}");
    assert!(group3.number >= 2);
}

#[test]
fn where_every_voter_leads_a_group_the_leadership_stays_and_a_dead_leader_is_replaced() {
    let mut h = three_groups([(1, [2, 3]), (2, [3, 1]), (3, [1, 2])]);
    h.run_until(200, |h| h.leader().is_some());
    let leader = h.leader().unwrap();
    // No transfer: every voter is a primary, and moving the leadership helps no group.
    for _ in 0..300 {
        h.step();
        assert_eq!(h.leader(), Some(leader), "{}", h.describe());
    }
    for group in 1..=3 {
        assert_eq!(
            agreed_view(&h, group).unwrap().number,
            1,
            "{}",
            h.describe()
        );
    }
    // The leader dies with its group: the group waits for an election, then fails over.
    h.crash(leader);
    h.run_until(ELECTION_TICKS as u64 * 4 + FAILOVER_TICKS_MAX, |h| {
        agreed_view(h, leader).is_some_and(|view| view.primary != leader)
    });
    let survivors: Vec<NodeId> = h.live();
    for group in 1..=3 {
        let view = h.run_until(FAILOVER_TICKS_MAX * 2, |h| {
            agreed_view(h, group).is_some_and(|view| !view.members().any(|m| m == leader))
        });
        let agreed = agreed_view(&h, group).unwrap();
        assert!(survivors.contains(&agreed.primary), "{view}: {agreed:?}");
    }
}

#[test]
fn a_message_of_a_group_the_node_does_not_serve_in_changes_nothing() {
    let mut h = Harness::three(Safety::DEFAULT);
    h.settle();
    let before = h.view_of(2);
    let message = tandem_cluster::ClusterMessage::Freeze {
        group: GROUP + 7,
        view: before.number,
    };
    h.core_mut(2)
        .step(1, message)
        .expect("accepted and ignored");
    h.run(50);
    assert_eq!(h.view_of(2), before);
    assert!(h.node(2).plane().freezes.is_empty(), "{}", h.describe());
}

#[test]
fn views_of_two_groups_may_share_a_number() {
    let mut h = three_groups([(1, [2, 3]), (2, [3, 1]), (3, [1, 2])]);
    h.run(20);
    // Group 2's view 2, planted on node 1, is no conflict with group 1's views.
    h.plant_view_in(1, 2, view(2, 3, &[1, 2], &[]));
}

#[test]
#[should_panic(expected = "node 2 applied a different view 2")]
fn the_checker_catches_two_different_views_with_one_number_in_one_group() {
    let mut h = three_groups([(1, [2, 3]), (2, [3, 1]), (3, [1, 2])]);
    h.run(20);
    h.plant_view_in(1, 2, view(2, 3, &[1, 2], &[]));
    h.plant_view_in(2, 2, view(2, 1, &[2, 3], &[]));
}

#[test]
fn one_groups_view_change_does_not_wait_for_anothers() {
    // Node 1 leads groups 1 and 2. When it dies, node 2 is slow to freeze in group 2 (its
    // runtime has not stopped taking the old primary): group 2's change waits for that
    // report, group 1's goes through within the usual bound all the same.
    let mut h = three_groups([(1, [2, 3]), (1, [2, 3]), (2, [1, 3])]);
    h.run_until(200, |h| h.leader() == Some(3));
    h.run(20);
    h.stall_freeze_in(2, 2);
    h.crash(1);
    let ticks = h.run_until(FAILOVER_TICKS_MAX, |h| {
        agreed_view(h, 1).is_some_and(|view| view.primary != 1)
    });
    assert!(ticks <= FAILOVER_TICKS_MAX, "{}", h.describe());
    assert_eq!(
        agreed_view(&h, 2).map(|view| view.number),
        Some(1),
        "group 2 still waits for node 2's report: {}",
        h.describe()
    );
    assert!(
        h.node(2).planes[&2].freezes.contains(&1),
        "node 2 was asked to freeze in group 2: {}",
        h.describe()
    );
    h.release_freeze_in(2, 2);
    h.run_until(FAILOVER_TICKS_MAX * 4, |h| {
        agreed_view(h, 2).is_some_and(|view| view.primary != 1)
    });
}
