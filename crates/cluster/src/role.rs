//! What a node's data plane does when a view is committed: the one decision the runtime and
//! the simulator share, so that the truncation a view change demands is made by the same code
//! in both.
//!
//! A backup applies the records it receives as they arrive, and a segment cannot take a redo
//! record back. So a member that holds records above the view's truncate LSN discards all of
//! its records and reloads the initial database, then catches up from the new primary's
//! retained tail. A member whose records all lie at or below the truncate LSN keeps them.

use tandem_config::View;
use tandem_replication::NodeId;

/// The role a node's data plane runs when a view arrives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Held {
    /// The primary role, with its records up to `lsn_committed`.
    Primary { lsn_committed: u64 },
    /// A backup (or spare) role following `primary`, holding every record up to
    /// `lsn_received`.
    Backup { primary: NodeId, lsn_received: u64 },
    /// No role. `restarted`: the node came back without its memory, so it holds nothing a
    /// view counts on.
    Outside { restarted: bool },
}

/// What the data plane does to follow a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transition {
    /// Stay primary in the new view (a member joined or left).
    StayPrimary,
    /// Take over as primary from the records held, which end at the truncate LSN.
    Promote { lsn: u64 },
    /// The first view of a fresh cluster names this node primary: serve the loaded database.
    StartPrimary,
    /// Keep following the same primary, in the new view.
    StayBackup,
    /// Follow a new primary, keeping the records held: none lies above the truncate LSN.
    Follow { lsn: u64 },
    /// Discard every record held (`discarded` of them lie above the truncate LSN), reload
    /// the initial database and catch up from the primary.
    Reload { discarded: u64 },
    /// Stop serving: the node is outside the view (a deposed primary, a removed backup).
    StepDown { discarded: u64 },
    /// Hold no role: a restarted node that the view still names holds nothing the view counts
    /// on. It waits to be removed, then rejoins as a spare.
    Wait,
}

/// The transition node `me`, holding `held`, makes to follow `view`. `view_first` is the
/// group's view number when the cluster was created.
pub fn transition(me: NodeId, held: Held, view: &View, view_first: u64) -> Transition {
    let member = view.backups.contains(&me) || view.spares.contains(&me);
    let truncate = view.truncate_lsn.unwrap_or(u64::MAX);
    let above = |lsn: u64| lsn.saturating_sub(truncate);
    if view.primary == me {
        return match held {
            Held::Primary { .. } => Transition::StayPrimary,
            Held::Backup { lsn_received, .. } => {
                assert!(
                    lsn_received <= truncate,
                    "the promoted backup holds the highest LSN reported: it is the truncate LSN"
                );
                Transition::Promote { lsn: lsn_received }
            }
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
            Held::Primary { lsn_committed } => Transition::StepDown {
                discarded: above(lsn_committed),
            },
            Held::Backup { lsn_received, .. } => Transition::StepDown {
                discarded: above(lsn_received),
            },
            Held::Outside { .. } => Transition::StepDown { discarded: 0 },
        };
    }
    match held {
        Held::Backup { primary, .. } if primary == view.primary => Transition::StayBackup,
        Held::Backup { lsn_received, .. } if lsn_received <= truncate || skip_truncate() => {
            Transition::Follow { lsn: lsn_received }
        }
        Held::Backup { lsn_received, .. } => Transition::Reload {
            discarded: above(lsn_received),
        },
        // A primary's records cannot be split at the truncate LSN once it applied them: the
        // deposed primary reloads whatever it held.
        Held::Primary { lsn_committed } => Transition::Reload {
            discarded: above(lsn_committed),
        },
        Held::Outside { restarted } if !restarted || !view.backups.contains(&me) => {
            Transition::Reload { discarded: 0 }
        }
        Held::Outside { .. } => Transition::Wait,
    }
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

    fn view(primary: NodeId, backups: &[NodeId], spares: &[NodeId], truncate: u64) -> View {
        View {
            number: 5,
            primary,
            backups: backups.to_vec(),
            spares: spares.to_vec(),
            truncate_lsn: Some(truncate),
        }
    }

    #[test]
    fn a_member_above_the_truncate_lsn_reloads_and_one_at_or_below_keeps_its_records() {
        let next = view(2, &[3], &[4], 100);
        let behind = Held::Backup {
            primary: 1,
            lsn_received: 100,
        };
        let ahead = Held::Backup {
            primary: 1,
            lsn_received: 107,
        };
        assert_eq!(
            transition(3, behind, &next, 1),
            Transition::Follow { lsn: 100 }
        );
        assert_eq!(
            transition(4, ahead, &next, 1),
            Transition::Reload { discarded: 7 }
        );
    }

    #[test]
    fn the_promoted_backup_takes_over_and_the_deposed_primary_reloads() {
        let next = view(2, &[1, 3], &[], 100);
        let backup = Held::Backup {
            primary: 1,
            lsn_received: 100,
        };
        assert_eq!(
            transition(2, backup, &next, 1),
            Transition::Promote { lsn: 100 }
        );
        let deposed = Held::Primary { lsn_committed: 104 };
        assert_eq!(
            transition(1, deposed, &next, 1),
            Transition::Reload { discarded: 4 }
        );
    }

    #[test]
    fn a_restarted_node_waits_while_the_view_still_counts_on_it() {
        let next = view(2, &[3], &[], 100);
        let restarted = Held::Outside { restarted: true };
        assert_eq!(transition(3, restarted, &next, 1), Transition::Wait);
        assert_eq!(transition(2, restarted, &next, 1), Transition::Wait);
        let spare = view(2, &[], &[3], 100);
        assert_eq!(
            transition(3, restarted, &spare, 1),
            Transition::Reload { discarded: 0 }
        );
        assert_eq!(
            transition(4, restarted, &spare, 1),
            Transition::StepDown { discarded: 0 }
        );
    }

    #[test]
    fn membership_changes_keep_roles() {
        let next = View {
            truncate_lsn: None,
            ..view(1, &[2, 3], &[], 0)
        };
        let primary = Held::Primary { lsn_committed: 50 };
        let backup = Held::Backup {
            primary: 1,
            lsn_received: 40,
        };
        assert_eq!(transition(1, primary, &next, 1), Transition::StayPrimary);
        assert_eq!(transition(2, backup, &next, 1), Transition::StayBackup);
        let fresh = Held::Outside { restarted: false };
        let first = View { number: 1, ..next };
        assert_eq!(transition(1, fresh, &first, 1), Transition::StartPrimary);
    }
}
