//! The role rule as a node follows it across views: the order of the steps that turn a
//! committed view into a role, and the node's one piece of state between views (whether it
//! restarted without its memory). The runtime's supervisor and the simulator's nodes both
//! follow every view through a [`RoleRule`]:
//!
//! 1. the driver reads what its role holds (freezing a backup that must stop accepting its
//!    primary first) and asks [`RoleRule::decide`] for the transition;
//! 2. the driver carries the transition out (starts, keeps, reloads or stops a role);
//! 3. [`RoleRule::carried_out`] tells the cluster core whether the node serves now, and
//!    starts its silence timers afresh for a role that just started.

use tandem_cluster::Cluster;
use tandem_cluster::role::{self, Held, Transition};
use tandem_config::{GroupId, View};
use tandem_replication::NodeId;

/// One node's side of the role rule.
#[derive(Debug, Clone)]
pub struct RoleRule {
    me: NodeId,
    /// The group's view number when the cluster was created.
    view_first: u64,
    /// The node came back without its memory and no view has left it out since.
    restarted: bool,
    /// What the node's write-ahead log gave back when it restarted: records up to `lsn` of
    /// the history of view `view` (the newest view a batch it holds was sealed in). Held
    /// aside, like a role that stood by, until the node may serve again; then followed as
    /// a backup holding them would be.
    recovered: Option<Recovered>,
    /// The life of the node (its config store's incarnation) that reported the recovered
    /// records (a reporter of the view it restarted into whose primary was replaced): a
    /// promotion made from that report names that life, and may name the node at once
    /// (`role::made_from_report`).
    reported: Option<u64>,
}

/// Records a restarted node rebuilt from its write-ahead log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Recovered {
    pub view: u64,
    pub lsn: u64,
}

impl RoleRule {
    /// The rule for node `me`; `restarted` if it started from persisted state (its memory
    /// lost).
    pub fn new(me: NodeId, view_first: u64, restarted: bool) -> RoleRule {
        RoleRule {
            me,
            view_first,
            restarted,
            recovered: None,
            reported: None,
        }
    }

    /// A restarted node that rebuilt `recovered` from its log: once a view has left it out
    /// (it may serve no view made for its lost incarnation: what it acknowledged may exceed
    /// what its disk kept), the first view that names it again is followed from those
    /// records, keeping them or rewinding to the truncate LSN, instead of from a reloaded
    /// database; only the pages changed since then are fetched.
    pub fn with_recovered(mut self, recovered: Recovered) -> RoleRule {
        assert!(
            self.restarted,
            "records are recovered by a node that restarted"
        );
        self.recovered = Some(recovered);
        self
    }

    /// The cluster core reported (`ClusterEvent::Reported`), offering records rebuilt from
    /// the log if `rebuilt_by` names the life that sent the report; counted only while the
    /// node is restarted and holds the recovered records.
    pub fn reported(&mut self, rebuilt_by: Option<u64>) {
        if self.restarted && self.recovered.is_some() && rebuilt_by.is_some() {
            self.reported = rebuilt_by;
        }
    }

    /// The records recovered from the log that no role has taken yet.
    pub fn recovered(&self) -> Option<Recovered> {
        self.recovered
    }

    /// Whether the node holds nothing any view it is named in may count on.
    pub fn restarted(&self) -> bool {
        self.restarted
    }

    /// The transition that follows `view`, from the role `held` (`None`: no role).
    pub fn decide(&mut self, held: Option<Held>, view: &View) -> Transition {
        let held = held.unwrap_or(Held::Outside {
            restarted: self.restarted,
        });
        if !matches!(held, Held::Outside { .. }) {
            assert!(
                !self.restarted,
                "a restarted node holds no role until a view leaves it out"
            );
        }
        // A view made from this incarnation's report of its recovered records counts on
        // nothing else: the node serves in it (a whole group that lost power comes back so).
        let made_from_report = self.restarted
            && self.recovered.is_some_and(|recovered| {
                role::made_from_report(self.me, self.reported, recovered.lsn, view)
            });
        self.restarted = !made_from_report && role::still_restarted(self.me, self.restarted, view);
        let named = view.members().any(|node| node == self.me);
        let (held, from_recovered) = match (held, self.recovered) {
            // Free to serve, named by this view, with records from its log: it follows the
            // view as a backup that stood by with them (the view's primary stands for the
            // primary of their view: `since` decides from promotions, not primaries). Named
            // primary, it was promoted from them.
            (Held::Outside { .. }, Some(recovered))
                if !self.restarted && named && (view.primary != self.me || made_from_report) =>
            {
                let held = Held::Backup {
                    primary: view.primary,
                    view: recovered.view,
                    lsn_received: recovered.lsn,
                };
                (held, true)
            }
            (held, _) => (held, false),
        };
        let transition = role::transition(self.me, held, view, self.view_first);
        // A role takes the records, unless the view is older than they are (`Wait`): they
        // stay aside for a view at least as new, rather than be reloaded.
        if from_recovered && transition != Transition::Wait {
            self.recovered = None;
        }
        transition
    }

    /// The driver carried `transition` out and the node serves a role now (`serving`) or not;
    /// a node the view names that waits to be left out says so ([`Cluster::set_waiting`]).
    /// A role just started has heard nobody yet: its silence timers start now, not when the
    /// view was learned (starting a role may take a while). A role that stays keeps counting
    /// the silence it was counting.
    pub fn carried_out(
        &self,
        core: &mut Cluster,
        group: GroupId,
        transition: Transition,
        serving: bool,
    ) {
        let stays = matches!(transition, Transition::StayPrimary | Transition::StayBackup);
        if serving && !stays {
            core.role_started(group);
        }
        core.set_serving(group, serving);
        core.set_waiting(group, transition == Transition::Wait);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn view(number: u64, primary: NodeId, backups: &[NodeId], spares: &[NodeId]) -> View {
        View {
            number,
            primary,
            backups: backups.to_vec(),
            spares: spares.to_vec(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    #[test]
    fn a_restarted_node_waits_until_a_view_leaves_it_out_then_joins_as_a_spare() {
        let mut rule = RoleRule::new(3, 1, true);
        // Replayed views that name it were made for its lost incarnation.
        assert_eq!(
            rule.decide(None, &view(4, 1, &[2, 3], &[])),
            Transition::Wait
        );
        assert!(rule.restarted());
        assert_eq!(rule.decide(None, &view(5, 1, &[2], &[3])), Transition::Wait);
        assert!(rule.restarted());
        // Left out: whatever names it from now on was made for this incarnation.
        assert_eq!(
            rule.decide(None, &view(6, 1, &[2], &[])),
            Transition::StepDown
        );
        assert!(!rule.restarted());
        assert!(matches!(
            rule.decide(None, &view(7, 1, &[2], &[3])),
            Transition::Reload { .. }
        ));
    }

    #[test]
    fn a_restarted_node_with_records_from_its_log_follows_from_them_once_left_out() {
        let recovered = Recovered { view: 4, lsn: 90 };
        let mut rule = RoleRule::new(3, 1, true).with_recovered(recovered);
        assert_eq!(
            rule.decide(None, &view(4, 1, &[2, 3], &[])),
            Transition::Wait,
            "a view made for its lost incarnation"
        );
        assert_eq!(
            rule.decide(None, &view(6, 1, &[2], &[])),
            Transition::StepDown
        );
        assert_eq!(rule.recovered(), Some(recovered), "kept while outside");
        // The same primary reigns: every record is kept.
        assert_eq!(
            rule.decide(None, &view(7, 1, &[2], &[3])),
            Transition::StayBackup
        );
        assert_eq!(rule.recovered(), None, "taken by the role");

        // A promotion since view 4 truncated at LSN 80: it rewinds to there.
        let mut rule = RoleRule::new(3, 1, true).with_recovered(recovered);
        rule.decide(None, &view(6, 1, &[2], &[]));
        let mut promoted = view(8, 2, &[], &[3]);
        promoted.promotions = vec![tandem_config::Promotion {
            view: 8,
            truncate_lsn: 80,
            based_on: None,
            lsn_released_max: 80,
            rebuilt: Vec::new(),
        }];
        assert_eq!(
            rule.decide(None, &promoted),
            Transition::Rejoin {
                lsn: 80,
                discarded: 10
            }
        );
    }

    /// Records of a view newer than the one followed (the config store came back from an
    /// older save than the log): the node waits, and keeps the records for the next view.
    #[test]
    fn records_newer_than_the_view_followed_wait_for_a_newer_view_and_are_kept() {
        let recovered = Recovered { view: 7, lsn: 90 };
        let mut rule = RoleRule::new(3, 1, true).with_recovered(recovered);
        assert_eq!(
            rule.decide(None, &view(4, 1, &[2, 3], &[])),
            Transition::Wait
        );
        assert_eq!(
            rule.decide(None, &view(5, 1, &[2], &[])),
            Transition::StepDown
        );
        assert_eq!(rule.decide(None, &view(6, 1, &[2], &[3])), Transition::Wait);
        assert_eq!(rule.recovered(), Some(recovered), "kept through the wait");
        assert_eq!(
            rule.decide(None, &view(8, 1, &[2], &[3])),
            Transition::StayBackup,
            "followed from the records, not reloaded"
        );
        assert_eq!(rule.recovered(), None, "taken by the role");
    }

    #[test]
    fn a_restarted_node_serves_only_a_promotion_that_names_its_own_life() {
        let recovered = Recovered { view: 1, lsn: 100 };
        // View 2 promotes node 2 at its log's LSN, from the report of its life 1 or 2.
        let promoted = |life: u64| {
            let mut promoted = view(2, 2, &[3], &[]);
            promoted.promotions = vec![tandem_config::Promotion {
                view: 2,
                truncate_lsn: 100,
                based_on: None,
                lsn_released_max: 100,
                rebuilt: vec![(2, life)],
            }];
            promoted
        };
        // Life 2 reported: a view made for life 1 (which may have served in it) is not its.
        let mut rule = RoleRule::new(2, 1, true).with_recovered(recovered);
        rule.reported(Some(2));
        assert_eq!(rule.decide(None, &promoted(1)), Transition::Wait);
        assert!(rule.restarted());
        let mut rule = RoleRule::new(2, 1, true).with_recovered(recovered);
        rule.reported(Some(2));
        assert!(matches!(
            rule.decide(None, &promoted(2)),
            Transition::Promote { lsn: 100, .. }
        ));
        assert!(!rule.restarted());
        // A report of records from memory names no life.
        let mut rule = RoleRule::new(2, 1, true).with_recovered(recovered);
        rule.reported(None);
        assert_eq!(rule.decide(None, &promoted(2)), Transition::Wait);
    }

    #[test]
    fn a_node_that_kept_its_memory_follows_the_view_at_once() {
        let mut rule = RoleRule::new(3, 1, false);
        assert!(matches!(
            rule.decide(None, &view(2, 1, &[2, 3], &[])),
            Transition::Reload { .. }
        ));
        let held = Held::Backup {
            primary: 1,
            view: 2,
            lsn_received: 10,
        };
        assert_eq!(
            rule.decide(Some(held), &view(3, 1, &[2, 3], &[])),
            Transition::StayBackup
        );
    }
}
