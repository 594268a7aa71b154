//! The supervisor: a node's cluster core and a role rule per group it serves in, and the one
//! loop that turns the core's outputs into the node's actions. The [`crate::Node`] runs it,
//! on the runtime's node thread and in the simulator alike, and gives it the roles through
//! [`Roles`], which only carries orders out (builds or ends a role in memory) and decides
//! nothing.
//!
//! # Ordering contract of [`Supervisor::drive`]
//!
//! 1. What needs no save leaves first, so that a slow fsync does not delay a failover's
//!    steps: the core's own messages ([`Roles::send`]) and then its events, in order.
//! 2. The config store saves its state through the driver's [`Durable`]. Raft messages that
//!    need no save (a leader's appends) go to [`Roles::send`] before the save, so that a
//!    view change's commit waits for the leader's and a follower's fsync side by side.
//! 3. The messages that needed the save, then the events, in order.
//! 4. Acting on an event may queue more (a freeze's report, a view's first `Alive`): steps
//!    2 and 3 repeat until the core has nothing left.
//!
//! An event is acted on as follows:
//! - `Freeze`: a backup stops accepting its primary ([`Roles::freeze`]); the core hears the
//!   last LSN it received.
//! - `RemovalWanted`: a primary prepares the removal ([`Roles::prepare_removal`]); what it
//!   prepared comes back later as [`Observed::RemovalPrepared`].
//! - `View`: the node reads what its role holds (a backup that changes reign is frozen
//!   first), the [`RoleRule`] picks the transition, the driver carries it out
//!   ([`Roles::carry_out`]), and the core hears whether the node serves now.
//! - `Suspected` and `Reported` are told to the driver ([`Roles::notice`]) for its counters
//!   and checkers.
//!
//! A save that fails poisons the node: [`Supervisor::drive`] returns the error and the
//! driver must stop the node (the config store cannot promise what it persisted).

use std::fmt;

use tandem_cluster::role::{Held, Transition};
use tandem_cluster::{Cluster, ClusterEvent, ClusterMessage, ClusterReady};
use tandem_config::{Durable, GroupId, SinceView, View};
use tandem_replication::NodeId;

use crate::primary::Observed;
use crate::rule::RoleRule;

/// The role a node runs, as the supervisor reads it before following a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RoleHeld {
    /// No role.
    Outside,
    /// The primary role of view `view`.
    Primary { view: u64 },
    /// A backup (or spare) role following `primary`, admitted by view `view`.
    Backup { view: u64, primary: NodeId },
}

/// What the supervisor tells the driver, for its counters, logs and checkers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Notice<'a> {
    /// The core suspected `peer` in `view`, for `why`.
    Suspected {
        peer: NodeId,
        view: u64,
        why: tandem_cluster::Suspicion,
    },
    /// This frozen backup reported for a view after `view`: it no longer upholds the lease
    /// of that view's primary.
    Reported { view: u64 },
    /// The backup stopped accepting its primary in `view`, holding records up to
    /// `lsn_received`.
    Frozen { view: u64, lsn_received: u64 },
    /// The node follows `view`, by `transition`.
    Following {
        view: &'a View,
        transition: Transition,
    },
}

/// One line for a node's log, the same in every driver (the driver adds the node).
impl fmt::Display for Notice<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Notice::Suspected { peer, view, why } => {
                write!(f, "suspects node {peer} in view {view} ({why})")
            }
            Notice::Reported { view } => write!(f, "reported for a view after {view}"),
            Notice::Frozen { view, lsn_received } => {
                write!(f, "frozen in view {view} at LSN {lsn_received}")
            }
            Notice::Following { view, transition } => write!(
                f,
                "follows view {} (primary {}, backups {:?}, spares {:?}, truncate LSN {:?}) by \
                 {transition:?}",
                view.number,
                view.primary,
                view.backups,
                view.spares,
                view.truncate_lsn()
            ),
        }
    }
}

/// The bound a frozen backup role reports as what its log synced ([`Roles::lsn_synced`]),
/// from what its log says is durable now (`lsn_log`, 0 when the log says nothing: not
/// anchored, poisoned, or absent) and the most this role's acks told the primary
/// (`lsn_told`, 0 when none said any). Under `durable` a release counts a backup for what
/// its acks said its log synced and no more, and a role starts at a view boundary (releases
/// before it are bounded by the last promotion), so what this role told is all it added to
/// the releases of the view being replaced. A log that says nothing adds nothing to that
/// (k-of-n seed 222437: counting every record a node with a poisoned log received made a
/// bound no log held), and neither does a role whose acks said nothing: its log had failed
/// before the role started (`--ticks 2000` seed 153285: such a backup was counted for the
/// records it received, the promotion's released bound rose above every log, and once
/// healing restarted the poisoned nodes no reporter held it; the group waited for good).
pub fn lsn_synced_bound(lsn_log: u64, lsn_told: u64) -> u64 {
    lsn_log.max(lsn_told)
}

/// What a primary that a promotion starts in `view` may count as released at its start
/// (`tandem_replication::Primary::released_at_most`): the last promotion's bound on what
/// earlier views released, not every record it took over (k-of-n seed 508619 at 2,000
/// ticks). `None` for a view no promotion made (the group's first primary).
pub fn lsn_released_at_promotion(view: &View) -> Option<u64> {
    view.promotions
        .last()
        .map(|promotion| promotion.lsn_released_max)
}

/// A node's roles as its driver runs them, one per group it serves in. Every method carries
/// an order out; none decides.
pub trait Roles {
    /// What carrying an order out may fail with that the driver must hear about (the
    /// simulator's checkers; the runtime reports and goes on).
    type Error;

    /// The role the node runs in `group` now.
    fn held(&self, group: GroupId) -> RoleHeld;

    /// The primary role's last committed LSN (asked only of a primary that the view
    /// replaces: the count of records it discards is reported).
    fn lsn_committed(&mut self, group: GroupId) -> u64;

    /// The backup role stops accepting its primary: it closes the primary's links and
    /// refuses new ones until a view reopens it. Returns the last LSN it received. Asked
    /// only of a backup.
    fn freeze(&mut self, group: GroupId) -> u64;

    /// After [`freeze`](Self::freeze): at least every LSN the backup role told its primary its
    /// log had synced, as [`lsn_synced_bound`] makes it. A frozen role acknowledges nothing
    /// more, so a promotion under `durable` may bound what was released by it.
    fn lsn_synced(&self, group: GroupId) -> u64;

    /// Whether the backup role's segment was rewound and still waits for the transfer that
    /// replaces its diverged pages ([`tandem_cluster::role::Transition::Rejoin`]): it holds
    /// no state a promotion could start from, so it does not report for one. False for any
    /// other role.
    fn diverged(&self, group: GroupId) -> bool;

    /// A diverged backup role's LSN before its segment's first rewind, while no install has
    /// touched the segment since (`Segment::lsn_before_rewind`): the records it held then are
    /// intact, and it reports those for a promotion. `None` for any other role.
    fn lsn_before_rewind(&self, group: GroupId) -> Option<u64>;

    /// The primary role prepares the removal of `backup` from `view` (asked only of a
    /// primary; a role that stopped meanwhile does nothing, and the wish repeats).
    fn prepare_removal(
        &mut self,
        group: GroupId,
        view: u64,
        backup: NodeId,
    ) -> Result<(), Self::Error>;

    /// Carries `transition` out to follow `view`: keeps, starts, reloads or ends a role. A
    /// primary the view replaces is deposed here, before its role ends. Returns whether the
    /// node serves a role afterwards (starting one can fail).
    fn carry_out(
        &mut self,
        group: GroupId,
        transition: Transition,
        view: &View,
    ) -> Result<bool, Self::Error>;

    /// Sends a cluster message to node `to` (best effort: the core repeats what matters).
    fn send(&mut self, to: NodeId, message: ClusterMessage);

    /// Something the driver may count, log or check.
    fn notice(&mut self, group: GroupId, notice: Notice<'_>);
}

/// Why [`Supervisor::drive`] stopped.
#[derive(Debug)]
pub enum DriveError<E> {
    /// The config store's state could not be saved: the node is poisoned.
    Save(std::io::Error),
    /// The driver failed to carry an order out.
    Role(E),
}

/// A node's cluster core, its role rule for each group, and the loop that carries their
/// outputs out.
#[derive(Debug)]
pub struct Supervisor {
    core: Cluster,
    /// How the node follows each group it serves in, by group.
    groups: std::collections::BTreeMap<GroupId, Following>,
    /// The buffers of the last drive, kept for their capacity.
    ready: ClusterReady,
}

/// How a node follows one group's views into its roles.
#[derive(Debug)]
struct Following {
    rule: RoleRule,
    /// The view whose history the records of a rewound segment followed before its first
    /// rewind (with [`Roles::lsn_before_rewind`], what a diverged member reports). `None`
    /// unless the role holds a diverged segment.
    view_before_rewind: Option<u64>,
}

impl Supervisor {
    /// The supervisor of a node whose core is `core`, with a rule for each group the core
    /// serves in (`rules`); a rule knows whether the node restarted without its memory.
    pub fn new(mut core: Cluster, rules: Vec<(GroupId, RoleRule)>) -> Supervisor {
        let mut groups = std::collections::BTreeMap::new();
        for (group, rule) in rules {
            assert!(
                core.groups().contains(&group),
                "a rule for group {group}, which the core does not serve in"
            );
            if rule.restarted() {
                // No role until the rule says so; records rebuilt from the log are reported
                // for a promotion meanwhile (a whole group that lost power comes back so).
                core.set_serving(group, false);
                if let Some(recovered) = rule.recovered() {
                    core.restarted_with(
                        group,
                        tandem_cluster::Rebuilt {
                            lsn: recovered.lsn,
                            view: recovered.view,
                        },
                    );
                }
            }
            let following = Following {
                rule,
                view_before_rewind: None,
            };
            assert!(
                groups.insert(group, following).is_none(),
                "two rules for group {group}"
            );
        }
        assert_eq!(
            groups.len(),
            core.groups().len(),
            "a rule for every group the core serves in"
        );
        Supervisor {
            core,
            groups,
            ready: ClusterReady::default(),
        }
    }

    pub fn core(&self) -> &Cluster {
        &self.core
    }

    /// The core, for inputs the supervisor does not wrap (a step, a tick).
    pub fn core_mut(&mut self) -> &mut Cluster {
        &mut self.core
    }

    /// How the node follows `group`'s views.
    pub fn rule(&self, group: GroupId) -> &RoleRule {
        &self.following(group).rule
    }

    fn following(&self, group: GroupId) -> &Following {
        self.groups
            .get(&group)
            .unwrap_or_else(|| panic!("the node serves in no group {group}"))
    }

    fn following_mut(&mut self, group: GroupId) -> &mut Following {
        self.groups
            .get_mut(&group)
            .unwrap_or_else(|| panic!("the node serves in no group {group}"))
    }

    pub fn node(&self) -> NodeId {
        self.core.node()
    }

    /// `group`'s view as the core knows it.
    pub fn view(&self, group: GroupId) -> Option<&View> {
        self.core.view(group)
    }

    /// Tells the core what `group`'s primary role observed.
    pub fn observe(&mut self, group: GroupId, observed: Observed) {
        match observed {
            Observed::Heard(node) => self.core.heard_from_backup(group, node),
            Observed::SpareCaughtUp { view, node } => self.core.spare_caught_up(group, view, node),
            Observed::RemovalPrepared {
                view,
                backup,
                behind,
                joining,
            } => self.core.ask_removal(group, view, backup, behind, joining),
        }
    }

    /// The driver saw the connection from `peer` closed from `peer`'s side (end of stream or
    /// a reset, not a close of its own): a strong sign of a dead process, acted on at once.
    pub fn peer_closed(&mut self, peer: NodeId) {
        self.core.peer_closed(peer);
    }

    /// Primary: the data plane made progress (its executor began a turn). The core decides
    /// when its silence makes the primary stuck ([`Cluster::is_stalled`]).
    pub fn executor_turned(&mut self, group: GroupId) {
        self.core.executor_turned(group);
    }

    /// Saves, sends and acts on everything the core has produced, as the module's ordering
    /// contract says, until it has nothing left.
    pub fn drive<R: Roles>(
        &mut self,
        disk: &mut impl Durable,
        roles: &mut R,
    ) -> Result<(), DriveError<R::Error>> {
        let mut ready = std::mem::take(&mut self.ready);
        let result = self.drive_with(disk, roles, &mut ready);
        ready.clear();
        self.ready = ready;
        result
    }

    fn drive_with<R: Roles>(
        &mut self,
        disk: &mut impl Durable,
        roles: &mut R,
        ready: &mut ClusterReady,
    ) -> Result<(), DriveError<R::Error>> {
        self.core.take_early(ready);
        self.dispatch(roles, ready)?;
        loop {
            self.core
                .take_ready_sending(disk, ready, &mut |to, message| roles.send(to, message))
                .map_err(DriveError::Save)?;
            if ready.is_empty() {
                return Ok(());
            }
            self.dispatch(roles, ready)?;
        }
    }

    /// Sends the taken messages, then acts on the taken events, leaving `ready` empty.
    fn dispatch<R: Roles>(
        &mut self,
        roles: &mut R,
        ready: &mut ClusterReady,
    ) -> Result<(), DriveError<R::Error>> {
        for (to, message) in ready.messages.drain(..) {
            roles.send(to, message);
        }
        // Acting may not queue into `ready`: what it produces waits in the core for the next
        // take. The events are taken out, so that an error leaves `ready` empty.
        for (group, event) in std::mem::take(&mut ready.events) {
            self.act(roles, group, event).map_err(DriveError::Role)?;
        }
        Ok(())
    }

    fn act<R: Roles>(
        &mut self,
        roles: &mut R,
        group: GroupId,
        event: ClusterEvent,
    ) -> Result<(), R::Error> {
        match event {
            ClusterEvent::Freeze { view } => {
                let RoleHeld::Backup { .. } = roles.held(group) else {
                    return Ok(());
                };
                // What it reports: the records it received, of `view`'s history; a diverged
                // role, those it held before its first rewind, of the view it held then, if
                // they are intact. Without them it holds no state a promotion could start
                // from, and does not report.
                // The freeze comes first: once it returns, no transfer is taken that could
                // replace the diverged pages (and so the records held before the rewind).
                let lsn_received = roles.freeze(group);
                let holding = if roles.diverged(group) {
                    self.held_before_rewind(roles, group)
                } else {
                    Some((lsn_received, view))
                };
                if let Some((lsn_received, view_held)) = holding {
                    roles.notice(group, Notice::Frozen { view, lsn_received });
                    let lsn_synced = roles.lsn_synced(group);
                    self.core
                        .frozen(group, view, lsn_received, view_held, lsn_synced);
                }
                Ok(())
            }
            ClusterEvent::Suspected { peer, view, why } => {
                roles.notice(group, Notice::Suspected { peer, view, why });
                Ok(())
            }
            ClusterEvent::Reported { view, rebuilt_by } => {
                self.following_mut(group).rule.reported(rebuilt_by);
                roles.notice(group, Notice::Reported { view });
                Ok(())
            }
            ClusterEvent::RemovalWanted { view, backup } => {
                if let RoleHeld::Primary { .. } = roles.held(group) {
                    roles.prepare_removal(group, view, backup)?;
                }
                Ok(())
            }
            ClusterEvent::View(view) => self.follow(roles, group, &view),
        }
    }

    /// A diverged role's LSN before its first rewind and the view it held then, if no install
    /// has touched those records since.
    fn held_before_rewind<R: Roles>(&self, roles: &R, group: GroupId) -> Option<(u64, u64)> {
        roles
            .lsn_before_rewind(group)
            .zip(self.following(group).view_before_rewind)
    }

    /// Brings the node's role in line with a committed view.
    fn follow<R: Roles>(
        &mut self,
        roles: &mut R,
        group: GroupId,
        view: &View,
    ) -> Result<(), R::Error> {
        let me = self.node();
        let member = view.backups.contains(&me) || view.spares.contains(&me);
        let diverged_before = roles.diverged(group);
        if !diverged_before {
            self.following_mut(group).view_before_rewind = None;
        }
        // Promoted from what it reported: a diverged member reported the records it held
        // before it rewound (its handover takes the rewind back).
        let restored = if view.primary == me && diverged_before {
            self.held_before_rewind(roles, group)
        } else {
            None
        };
        let held = match roles.held(group) {
            RoleHeld::Outside => None,
            // A primary that stays needs no LSN: only a change reports what it discards.
            RoleHeld::Primary { view: view_held } if view.primary == me => Some(Held::Primary {
                view: view_held,
                lsn_committed: 0,
            }),
            RoleHeld::Primary { view: view_held } => Some(Held::Primary {
                view: view_held,
                lsn_committed: roles.lsn_committed(group),
            }),
            // The same reign goes on: a backup that stays needs no LSN.
            RoleHeld::Backup {
                view: view_held, ..
            } if member && view.since(view_held) == SinceView::Kept => Some(Held::Backup {
                primary: view.primary,
                view: view_held,
                lsn_received: 0,
            }),
            // Any other change (a new primary, or leaving the view) stops the backup
            // accepting its primary first: the LSN it reports must not move afterwards.
            RoleHeld::Backup {
                view: view_held,
                primary,
            } => Some(Held::Backup {
                primary,
                view: view_held,
                lsn_received: roles.freeze(group),
            }),
        };
        let held = match (held, restored) {
            (Some(Held::Backup { primary, .. }), Some((lsn_received, view_held))) => {
                Some(Held::Backup {
                    primary,
                    view: view_held,
                    lsn_received,
                })
            }
            (held, _) => held,
        };
        let following = self.following_mut(group);
        let recovered_before = following.rule.recovered();
        let mut transition = following.rule.decide(held, view);
        // The records the rule took from the log, if this view made it follow with them.
        let recovered_taken = recovered_before.filter(|_| following.rule.recovered().is_none());
        if let (Transition::Rejoin { .. }, false) = (transition, diverged_before) {
            // The records it rewinds are of the view it held: a diverged member reports
            // them, should the primary it rewinds for never serve. Records rebuilt from the
            // log are of the view they were sealed in (default-mix seed 423837: a restarted
            // node rewound its log's records for a primary that could not serve, reported
            // nothing, and the group waited for good).
            following.view_before_rewind = match held {
                Some(Held::Backup { view, .. } | Held::Primary { view, .. }) => Some(view),
                None => recovered_taken.map(|recovered| recovered.view),
                _ => None,
            };
        }
        if let Transition::Promote {
            lease_owed_ticks, ..
        } = &mut transition
        {
            *lease_owed_ticks = self.core.lease_owed_ticks(group);
        }
        roles.notice(group, Notice::Following { view, transition });
        let serving = roles.carry_out(group, transition, view)?;
        // The fields apart: the rule tells the core.
        let rule = &self.groups[&group].rule;
        rule.carried_out(&mut self.core, group, transition, serving);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::lsn_synced_bound;

    #[test]
    fn a_frozen_backup_is_counted_for_what_its_log_or_its_acks_said_was_synced() {
        // A log that says something bounds what the acks could have said.
        assert_eq!(lsn_synced_bound(2_165, 2_100), 2_165);
        // A poisoned log says nothing: the acks this role sent before it failed do.
        assert_eq!(lsn_synced_bound(0, 2_165), 2_165);
        // A role whose log had failed before it started told nothing synced, and counts for
        // nothing, however many records it received (seed 153285).
        assert_eq!(lsn_synced_bound(0, 0), 0);
    }
}
