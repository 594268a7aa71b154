//! What a node's data plane does when a view is committed: the one decision the runtime and
//! the simulator share, so that the truncation a view change demands is made by the same code
//! in both.
//!
//! A backup applies the records it receives as they arrive, and a segment cannot take a redo
//! record back byte by byte. So a member that holds records above the truncate LSN of the
//! promotions since the view it followed rewinds its segment to that LSN and fetches from the
//! new primary the pages those records changed, with the pages changed after the truncate LSN
//! ([`Transition::Rejoin`]; seed 003's reintegration by page versions), then catches up from
//! the tail. A member whose records all lie at or below it keeps them. The view carries its
//! recent promotions ([`View::since`]), so a member that missed views (it learned a later one
//! directly) still discards what a promotion it never saw discarded; one that missed more
//! promotions than a view remembers reloads the initial database.
//!
//! A deposed primary is no different: left out of the view, it stands by with its records
//! like a backup that was ([`Transition::StandBy`]), and rejoins the same way once a view
//! names it again.
//!
//! A node that restarted without its memory holds nothing any view made before its restart
//! counts on, and it cannot tell which views those are: until a view leaves it out
//! ([`still_restarted`]), it serves no role in a view that names it (the simulator found a
//! restarted node that replayed an old view naming it a spare, then stayed on as a backup in
//! the next view, made for its lost incarnation, and reported for a promotion holding
//! nothing).

use tandem_config::{SinceView, View};
use tandem_replication::NodeId;

/// The role a node's data plane runs when a view arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The primary role of view `view`, with its records up to `lsn_committed`.
    Primary { view: u64, lsn_committed: u64 },
    /// A backup (or spare) role following `primary` in view `view`, holding every record up
    /// to `lsn_received`.
    Backup {
        primary: NodeId,
        view: u64,
        lsn_received: u64,
    },
    /// No role. `restarted`: the node came back without its memory, so it holds nothing a
    /// view counts on.
    Outside { restarted: bool },
}

/// What the data plane does to follow a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Stay primary in the new view (a member joined or left).
    StayPrimary,
    /// Take over as primary from the records held, which end at the truncate LSN, releasing
    /// no reply for `lease_owed_ticks` (the rest of the lease this node granted the old
    /// primary: [`crate::Cluster::lease_owed_ticks`], which the supervisor fills in).
    Promote { lsn: u64, lease_owed_ticks: u64 },
    /// The first view of a fresh cluster names this node primary: serve the loaded database.
    StartPrimary,
    /// Keep following the same primary, in the new view.
    StayBackup,
    /// Follow the primary of a new reign, keeping the records held: none lies above the
    /// truncate LSN.
    Follow { lsn: u64 },
    /// Follow the primary of a new reign from the segment held, rewound to the truncate LSN
    /// `lsn` (`discarded` records lie above it): the pages they changed come back with a
    /// state transfer of those changed after `lsn`, before any batch.
    Rejoin { lsn: u64, discarded: u64 },
    /// Discard every record held (`discarded` of them lie above the truncate LSN), reload
    /// the initial database and catch up from the primary: the records' fate is unknown
    /// (more promotions than a view remembers), or the node held none.
    Reload { discarded: u64 },
    /// Hold no role: the node is outside the view and held none (a node that holds one
    /// stands by instead).
    StepDown,
    /// A backup, spare or primary left out of the view (removed, deposed, or it did not
    /// report for a promotion) keeps its records, frozen, instead of discarding them: when
    /// it is made a spare again it keeps following the same primary, or follows a new one
    /// from its records ([`Transition::Follow`] or [`Transition::Rejoin`]), and catches up
    /// from the tail rather than from a reloaded database. A deposed primary's records are
    /// held as a backup's of its own reign.
    StandBy,
    /// Hold no role: a restarted node that the view still names holds nothing the view counts
    /// on. It waits to be removed, then rejoins as a spare.
    Wait,
}

/// Whether a node that restarted without its memory (`restarted`) still does after `view`:
/// until a view leaves it out, any view naming it may count on its lost incarnation. Once
/// out, every later view that names it was made for this incarnation (it joins as a spare).
pub fn still_restarted(me: NodeId, restarted: bool, view: &View) -> bool {
    restarted && view.members().any(|node| node == me)
}

/// Whether `view` was made from the report of records rebuilt from the log (up to
/// `lsn_rebuilt`) that node `me` sent after it restarted without its memory, in its life
/// `incarnation` (the config store's incarnation, named by the report; None: it sent none):
/// the promotion that made `view` names that life ([`tandem_config::Promotion::rebuilt`]).
/// Such a view counts on those records alone, never on a lost life, so `me` may serve in it
/// from them. A promotion made for a lost life (from its reports, before a power loss, and
/// perhaps served by it) does not name this one, even if it has the same number as a view
/// this life reported in the view before, and the same records: the lost life may have
/// served in it and acknowledged records its log never kept (a whole group that lost power
/// before any node saved a commit index covering that view). Named primary, only if it
/// holds exactly the truncate LSN.
pub fn made_from_report(
    me: NodeId,
    incarnation: Option<u64>,
    lsn_rebuilt: u64,
    view: &View,
) -> bool {
    let Some(incarnation) = incarnation else {
        return false;
    };
    let Some(promotion) = view.promotions.last() else {
        return false;
    };
    if promotion.view != view.number || !promotion.rebuilt.contains(&(me, incarnation)) {
        return false;
    }
    if view.primary == me {
        promotion.truncate_lsn == lsn_rebuilt
    } else {
        view.members().any(|node| node == me)
    }
}

/// The transition node `me`, holding `held`, makes to follow `view`. `view_first` is the
/// group's view number when the cluster was created.
pub fn transition(me: NodeId, held: Held, view: &View, view_first: u64) -> Transition {
    // Records of a view newer than the one followed: a node whose config store came back
    // from an older save than its log's records (the crash tore the newer save) cannot place
    // them in this view's history, and waits for a view at least as new, which the config
    // store brings (default seed 587583).
    if let Held::Backup {
        view: view_held, ..
    } = held
        && view_held > view.number
    {
        return Transition::Wait;
    }
    let member = view.backups.contains(&me) || view.spares.contains(&me);
    if view.primary == me {
        return match held {
            Held::Primary { .. } => Transition::StayPrimary,
            Held::Backup {
                view: view_held,
                lsn_received,
                ..
            } => match view.since(view_held) {
                SinceView::TruncatedAt(truncate) => {
                    assert!(
                        lsn_received <= truncate,
                        "the promoted backup holds the highest LSN reported: the truncate LSN"
                    );
                    Transition::Promote {
                        lsn: lsn_received,
                        lease_owed_ticks: 0,
                    }
                }
                SinceView::Kept => unreachable!("a backup becomes primary only by a promotion"),
                SinceView::Unknown => unreachable!("a backup is promoted from the view it held"),
            },
            Held::Outside { restarted: false } if view.number == view_first => {
                Transition::StartPrimary
            }
            // A restarted node named primary has lost its records: it serves nothing, and
            // the backups replace it once they suspect it.
            Held::Outside { .. } => Transition::Wait,
        };
    }
    if !member {
        return match held {
            Held::Primary { .. } | Held::Backup { .. } => Transition::StandBy,
            Held::Outside { .. } => Transition::StepDown,
        };
    }
    match held {
        Held::Backup {
            primary,
            view: view_held,
            lsn_received,
        } => match since(view, view_held, primary) {
            SinceView::Kept => {
                assert_eq!(
                    primary, view.primary,
                    "no promotion since: the same primary"
                );
                Transition::StayBackup
            }
            SinceView::TruncatedAt(truncate) => keep_or_rejoin(lsn_received, truncate),
            SinceView::Unknown => Transition::Reload {
                discarded: lsn_received,
            },
        },
        // A deposed primary that a view names a member at once: its records are its reign's.
        Held::Primary {
            view: view_held,
            lsn_committed,
        } => match view.since(view_held) {
            SinceView::TruncatedAt(truncate) => keep_or_rejoin(lsn_committed, truncate),
            // Another primary reigns only after a promotion, so a primary that claims this
            // view without one ignored its deposition (the simulator plants that): its
            // records prove nothing.
            SinceView::Kept | SinceView::Unknown => Transition::Reload {
                discarded: lsn_committed,
            },
        },
        Held::Outside { restarted } if !restarted || restarted_serves(view, me) => {
            Transition::Reload { discarded: 0 }
        }
        Held::Outside { .. } => Transition::Wait,
    }
}

/// A member holding records up to `lsn` follows a new primary whose history agrees with
/// them up to `truncate`: it keeps them all, or rewinds to `truncate`.
fn keep_or_rejoin(lsn: u64, truncate: u64) -> Transition {
    if lsn <= truncate || skip_truncate() {
        Transition::Follow { lsn }
    } else {
        Transition::Rejoin {
            lsn: truncate,
            discarded: lsn - truncate,
        }
    }
}

/// `view.since(view_held)`, unless the missed-promotion bug is planted: then the rule before
/// views carried their promotions (the same primary keeps everything; another truncates at
/// the newest view's own truncate LSN, if it has one).
fn since(view: &View, view_held: u64, primary_held: NodeId) -> SinceView {
    #[cfg(feature = "inject-bugs")]
    if tandem_replication::bugs::planted(tandem_replication::bugs::Bug::MissedPromotion) {
        if primary_held == view.primary {
            return SinceView::Kept;
        }
        return SinceView::TruncatedAt(view.truncate_lsn().unwrap_or(u64::MAX));
    }
    let _ = primary_held;
    view.since(view_held)
}

/// Whether the restarted-serves bug is planted and `view` names `me` a spare (the old rule).
fn restarted_serves(view: &View, me: NodeId) -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_replication::bugs::planted(tandem_replication::bugs::Bug::RestartedServes) {
        return !view.backups.contains(&me);
    }
    let _ = (view, me);
    false
}

/// Whether the skip-truncate bug is planted.
fn skip_truncate() -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_replication::bugs::planted(tandem_replication::bugs::Bug::SkipTruncate) {
        return true;
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_config::Promotion;

    /// Default seed 587583: a crash tore a node's newest config-store save, so it came back
    /// following an older view than its log's records; it waits rather than judge them by a
    /// history that does not reach them (`View::since` asserts it is never asked).
    #[test]
    fn records_of_a_newer_view_than_the_one_followed_wait() {
        let older = view(1, &[2, 3, 4], &[], 100);
        for (me, view_held) in [(4, 6), (1, 9)] {
            let held = Held::Backup {
                primary: 1,
                view: view_held,
                lsn_received: 58,
            };
            assert_eq!(transition(me, held, &older, 1), Transition::Wait);
        }
        let held = Held::Backup {
            primary: 1,
            view: 5,
            lsn_received: 58,
        };
        assert_eq!(transition(4, held, &older, 1), Transition::StayBackup);
    }

    fn view(primary: NodeId, backups: &[NodeId], spares: &[NodeId], truncate: u64) -> View {
        View {
            number: 5,
            primary,
            backups: backups.to_vec(),
            spares: spares.to_vec(),
            promotions: vec![Promotion {
                view: 5,
                truncate_lsn: truncate,
                based_on: None,
                lsn_released_max: truncate,
                rebuilt: Vec::new(),
            }],
            primary_sole_holder: false,
        }
    }

    #[test]
    fn a_member_above_the_truncate_lsn_rewinds_and_one_at_or_below_keeps_its_records() {
        let next = view(2, &[3], &[4], 100);
        let behind = Held::Backup {
            primary: 1,
            view: 4,
            lsn_received: 100,
        };
        let ahead = Held::Backup {
            primary: 1,
            view: 4,
            lsn_received: 107,
        };
        assert_eq!(
            transition(3, behind, &next, 1),
            Transition::Follow { lsn: 100 }
        );
        assert_eq!(
            transition(4, ahead, &next, 1),
            Transition::Rejoin {
                lsn: 100,
                discarded: 7
            }
        );
    }

    #[test]
    fn the_promoted_backup_takes_over_and_the_deposed_primary_stands_by_then_rejoins() {
        let next = view(2, &[1, 3], &[], 100);
        let backup = Held::Backup {
            primary: 1,
            view: 4,
            lsn_received: 100,
        };
        assert_eq!(
            transition(2, backup, &next, 1),
            Transition::Promote {
                lsn: 100,
                lease_owed_ticks: 0
            }
        );
        let deposed = Held::Primary {
            view: 4,
            lsn_committed: 104,
        };
        assert_eq!(
            transition(1, deposed, &next, 1),
            Transition::Rejoin {
                lsn: 100,
                discarded: 4
            }
        );
        // Left out, it keeps its records; as a backup of its own reign they rejoin later.
        let without = view(2, &[3], &[], 100);
        assert_eq!(transition(1, deposed, &without, 1), Transition::StandBy);
        let stood_by = Held::Backup {
            primary: 1,
            view: 4,
            lsn_received: 104,
        };
        let joined = View {
            number: 6,
            spares: vec![1],
            ..without
        };
        assert_eq!(
            transition(1, stood_by, &joined, 1),
            Transition::Rejoin {
                lsn: 100,
                discarded: 4
            }
        );
    }

    #[test]
    fn a_restarted_node_waits_while_the_view_still_counts_on_it() {
        let next = view(2, &[3], &[], 100);
        let restarted = Held::Outside { restarted: true };
        assert_eq!(transition(3, restarted, &next, 1), Transition::Wait);
        assert_eq!(transition(2, restarted, &next, 1), Transition::Wait);
        // Seed 28840: named a spare by a view it replays after its restart, the node waits
        // too: the next view may make it a backup on its lost incarnation's progress.
        let spare = view(2, &[], &[3], 100);
        assert_eq!(transition(3, restarted, &spare, 1), Transition::Wait);
        assert!(still_restarted(3, true, &spare));
        assert_eq!(transition(4, restarted, &spare, 1), Transition::StepDown);
        // Left out once, it is a fresh node: a later view naming it was made for it.
        assert!(!still_restarted(4, true, &spare));
        let fresh = Held::Outside { restarted: false };
        let joined = view(2, &[3], &[4], 100);
        assert_eq!(
            transition(4, fresh, &joined, 1),
            Transition::Reload { discarded: 0 }
        );
    }

    /// Seed 28184: a spare of view 9 held records of primary 1 above the truncate LSN of view
    /// 10, which promoted node 2; it learned view 11 (a membership change) directly and kept
    /// them, then applied a retried call a second time.
    #[test]
    fn a_member_that_missed_a_promotion_still_truncates() {
        let promoted = View {
            number: 10,
            primary: 2,
            backups: Vec::new(),
            spares: vec![3],
            promotions: vec![Promotion {
                view: 10,
                truncate_lsn: 623,
                based_on: None,
                lsn_released_max: 623,
                rebuilt: Vec::new(),
            }],
            primary_sole_holder: false,
        };
        let joined = View {
            number: 11,
            spares: vec![1, 3],
            ..promoted.clone()
        };
        assert_eq!(joined.truncate_lsn(), None);
        let spare = Held::Backup {
            primary: 1,
            view: 9,
            lsn_received: 625,
        };
        assert_eq!(
            transition(3, spare, &joined, 1),
            Transition::Rejoin {
                lsn: 623,
                discarded: 2
            }
        );
        // A backup that followed node 2 in view 10 stays in view 11.
        let follower = Held::Backup {
            primary: 2,
            view: 10,
            lsn_received: 640,
        };
        assert_eq!(transition(3, follower, &joined, 1), Transition::StayBackup);
        // The primary changed twice while it was away and came back to its old primary:
        // the lowest truncate LSN of the two decides, not the last one's.
        let twice = View {
            number: 14,
            primary: 1,
            backups: vec![3],
            spares: Vec::new(),
            promotions: vec![
                Promotion {
                    view: 10,
                    truncate_lsn: 623,
                    based_on: None,
                    lsn_released_max: 623,
                    rebuilt: Vec::new(),
                },
                Promotion {
                    view: 13,
                    truncate_lsn: 700,
                    based_on: None,
                    lsn_released_max: 700,
                    rebuilt: Vec::new(),
                },
            ],
            primary_sole_holder: false,
        };
        assert_eq!(
            transition(3, spare, &twice, 1),
            Transition::Rejoin {
                lsn: 623,
                discarded: 2
            }
        );
        let behind = Held::Backup {
            primary: 1,
            view: 9,
            lsn_received: 600,
        };
        assert_eq!(
            transition(3, behind, &twice, 1),
            Transition::Follow { lsn: 600 }
        );
        // A later promotion that truncated lower (a member behind took over under a rule
        // that allows it) discarded records of the first reign too.
        let lower = View {
            promotions: vec![
                Promotion {
                    view: 10,
                    truncate_lsn: 623,
                    based_on: None,
                    lsn_released_max: 623,
                    rebuilt: Vec::new(),
                },
                Promotion {
                    view: 13,
                    truncate_lsn: 590,
                    based_on: None,
                    lsn_released_max: 590,
                    rebuilt: Vec::new(),
                },
            ],
            ..twice
        };
        assert_eq!(
            transition(3, behind, &lower, 1),
            Transition::Rejoin {
                lsn: 590,
                discarded: 10
            }
        );
    }

    /// A promotion whose released bound is its truncate LSN.
    fn promotion(view: u64, truncate_lsn: u64, based_on: Option<u64>) -> Promotion {
        Promotion {
            view,
            truncate_lsn,
            based_on,
            lsn_released_max: truncate_lsn,
            rebuilt: Vec::new(),
        }
    }

    /// Any-time seed 20550: view 4 promoted node 3 at LSN 1450, but node 3 restarted
    /// without its memory before view 4 was committed, so it never served. View 5 recovers
    /// from the deposed primary, node 1, which holds the records of view 3 up to 1454.
    #[test]
    fn a_recovery_keeps_the_records_of_the_view_it_is_based_on() {
        let passed_over = promotion(4, 1450, None);
        let recovery = View {
            number: 5,
            primary: 1,
            backups: Vec::new(),
            spares: vec![2],
            promotions: vec![passed_over.clone(), promotion(5, 1454, Some(3))],
            primary_sole_holder: false,
        };
        assert_eq!(recovery.since(3), SinceView::TruncatedAt(1454));
        // The deposed primary keeps every record it holds.
        let deposed = Held::Backup {
            primary: 1,
            view: 3,
            lsn_received: 1454,
        };
        assert_eq!(
            transition(1, deposed, &recovery, 1),
            Transition::Promote {
                lsn: 1454,
                lease_owed_ticks: 0
            }
        );
        // A spare of view 3 keeps what node 1 sent it, whatever view 4 said.
        let spare_of_3 = Held::Backup {
            primary: 1,
            view: 3,
            lsn_received: 1452,
        };
        assert_eq!(
            transition(2, spare_of_3, &recovery, 1),
            Transition::Follow { lsn: 1452 }
        );
        // A member of view 4 may hold records node 3 made above 1450 in an incarnation
        // that served: they are not node 1's, so it keeps only what views 3 and 4 share.
        let member_of_4 = Held::Backup {
            primary: 3,
            view: 4,
            lsn_received: 1460,
        };
        assert_eq!(recovery.since(4), SinceView::TruncatedAt(1450));
        assert_eq!(
            transition(2, member_of_4, &recovery, 1),
            Transition::Rejoin {
                lsn: 1450,
                discarded: 10
            }
        );
        // Promotions before the base still count for a member older than it.
        let older = View {
            promotions: vec![
                promotion(2, 1000, None),
                passed_over,
                promotion(5, 1454, Some(3)),
            ],
            ..recovery.clone()
        };
        assert_eq!(older.since(1), SinceView::TruncatedAt(1000));
        assert_eq!(older.since(2), SinceView::TruncatedAt(1454));
        assert_eq!(older.since(4), SinceView::TruncatedAt(1450));
        assert_eq!(older.since(5), SinceView::Kept);
    }

    #[test]
    fn membership_changes_keep_roles() {
        let next = View {
            promotions: Vec::new(),
            ..view(1, &[2, 3], &[], 0)
        };
        let primary = Held::Primary {
            view: 4,
            lsn_committed: 50,
        };
        let backup = Held::Backup {
            primary: 1,
            view: 4,
            lsn_received: 40,
        };
        assert_eq!(transition(1, primary, &next, 1), Transition::StayPrimary);
        assert_eq!(transition(2, backup, &next, 1), Transition::StayBackup);
        let fresh = Held::Outside { restarted: false };
        let first = View { number: 1, ..next };
        assert_eq!(transition(1, fresh, &first, 1), Transition::StartPrimary);
    }
}
