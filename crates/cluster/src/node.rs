//! One node's cluster core: the config store's Raft member plus the failure detector, the
//! view-change coordinator and the rejoin requests, as a sans-I/O state machine.
//!
//! Inputs: [`Cluster::tick`], [`Cluster::step`] (a message from another node), and what the
//! data plane observed ([`Cluster::heard_from_primary`], [`Cluster::heard_from_backup`],
//! [`Cluster::frozen`], [`Cluster::spare_caught_up`]). Outputs: [`ClusterReady`].
//!
//! The protocol for a failed primary (DESIGN.md, "Promotion rule"):
//! 1. A backup that has not heard from the primary for `suspect_ticks` sends `Suspect` to the
//!    config store's leader, the coordinator.
//! 2. The coordinator, unless it still hears the primary itself, sends `Freeze` to every
//!    backup of the view. A frozen backup stops accepting the old primary (the runtime closes
//!    its links and calls [`Cluster::frozen`] with the LSN it received), waits until the lease
//!    it granted the primary has run out, and sends `Report` with that LSN.
//! 3. Once every backup reported, or `collect_ticks` passed with the n − k + 1 reports the rule
//!    needs, the coordinator proposes [`crate::rule::promote`]'s view through Raft.
//! 4. Every node applies the committed view ([`ClusterEvent::View`]): the promoted backup
//!    truncates above the truncate LSN and serves as primary, the others follow it.
//!
//! A frozen backup never unfreezes in the same view: it reported, so a new view may be built
//! on its LSN, and acking the old primary again could let that primary release replies the new
//! view does not hold. It reports again to whoever leads until a new view is committed.
//!
//! A primary that has not heard a backup for `suspect_ticks` asks its data plane to prepare
//! the removal ([`ClusterEvent::RemovalWanted`]): the replication core names the backups that
//! lack a released record and holds back replies the remaining backups could not keep; then
//! [`Cluster::ask_removal`] sends `Suspect` and the coordinator removes the backup
//! ([`crate::rule::remove_backup`]) so commits that need every ack go on. A node outside the
//! view asks to `Join`: it becomes a spare, and once the primary reports it caught up, a
//! backup.
//!
//! The Raft leader is kept off the group's primary (leadership is handed to a backup), so that
//! the failure of the primary never waits for a Raft election before its view change.
//!
//! This file holds the core's state, its inputs and its hand-over of outputs; `detect.rs` the
//! failure detector and the leadership transfer, `view_change.rs` the failed primary's view
//! change, `membership.rs` removals, joins and spares made backups.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use tandem_config::{
    ClusterMap, Command, ConfigCore, ConfigError, ConfigReady, ConfigSettings, Durable, GroupId,
    Member, Persisted, View,
};
use tandem_replication::{NodeId, Safety};

use crate::rule;

mod detect;
mod membership;
mod view_change;

/// How many times the usual silence a peer not yet heard from in a view may stay silent.
pub const FIRST_CONTACT_GRACE: u64 = 20;

/// A view change that cannot gather its reports ends, if the primary runs, this many
/// suspicion timeouts after it started (and no sooner than `collect_ticks`).
pub const RESUME_AFTER_SUSPICIONS: u64 = 4;

/// The silence after which a peer is suspected grows with the jitter observed, up to this
/// many times `suspect_ticks` (see `detect::Arrivals`).
pub const SILENCE_STRETCH_MAX: u64 = 4;

/// How a node's cluster core is set up. Times are in ticks.
#[derive(Clone, Debug)]
pub struct ClusterSettings {
    pub node: NodeId,
    /// The groups this node serves in, at least one, each once.
    pub groups: Vec<GroupSettings>,
    /// The cluster's other groups: the node coordinates their view changes while it leads
    /// the config store (it counts their reports by their rule), and plays no part in them.
    pub coordinated: Vec<GroupSettings>,
    /// The config store's voters.
    pub voters: Vec<NodeId>,
    /// Silence after which a peer is suspected.
    pub suspect_ticks: u64,
    /// How long a backup's ack binds it: it reports for a new view only this long after it
    /// last heard the primary. Shorter than `suspect_ticks`, so it adds nothing to a failover.
    pub lease_ticks: u64,
    /// How long the coordinator waits for more reports once it has enough.
    pub collect_ticks: u64,
    /// Raft's timing, in ticks, and the seed of its election jitter.
    pub election_ticks: usize,
    pub raft_heartbeat_ticks: usize,
    pub jitter_seed: u64,
    /// Primary: a data plane that reports no progress ([`Cluster::executor_turned`]) for
    /// this many ticks is stuck (an executor in one call for ever); the node then stops
    /// saying it is alive, so that it is replaced. `None`: the driver does not watch its
    /// data plane.
    pub executor_stall_ticks: Option<u64>,
    /// Primary: a long call (a script) its data plane says is under way
    /// ([`Cluster::long_call_running`]) counts as progress for this many ticks from its start
    /// (its time limit and more: `u64::MAX` for none), and only then may the executor stall.
    pub long_call_ticks: u64,
    /// The initial map's view is the group's for good (a node without a `[cluster]` table):
    /// the core suspects no one, asks the config store nothing and takes no message, so
    /// nothing ever moves a role. The config store is this node's alone and never ticks.
    pub view_fixed: bool,
}

/// A group a node serves in, as its cluster core sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GroupSettings {
    pub id: GroupId,
    /// The group's default safety rule: it sets how many reports a promotion needs.
    pub safety: Safety,
}

/// A message between the cluster cores of two nodes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ClusterMessage {
    /// A Raft message of the config store, protobuf-encoded.
    Raft(Vec<u8>),
    /// Sender suspects `suspect`, a member of `view`. A primary that suspects a backup also
    /// names the other backups that lack records a reply was released for (`behind`): the
    /// view that removes the suspect makes them spares until they catch up.
    /// A primary that asks to remove its last able backup names the spares that take its
    /// place (`joining`: they hold every released record).
    Suspect {
        group: GroupId,
        view: u64,
        suspect: NodeId,
        behind: Vec<NodeId>,
        joining: Vec<NodeId>,
    },
    /// Coordinator → backups: stop accepting the primary of `view` and report.
    Freeze { group: GroupId, view: u64 },
    /// Backup → coordinator: frozen in `view`, holding every record up to `lsn_received`
    /// of the history of view `view_held`; `restarted`: rebuilt from its write-ahead log
    /// after it lost its memory (see [`crate::rule::Reported`]); `incarnation`: the life of
    /// the sender ([`Cluster::incarnation`]), which a promotion made from a report of
    /// rebuilt records names; `lsn_synced`: see [`crate::rule::Reported`].
    Report {
        group: GroupId,
        view: u64,
        lsn_received: u64,
        view_held: u64,
        restarted: bool,
        incarnation: u64,
        lsn_synced: u64,
    },
    /// A node outside `view` asks to become a spare. A backup or spare of `view` that holds
    /// no role in it (it restarted without its memory and waits to be left out) sends it
    /// too: the coordinator then lets the primary remove it even if it is the last backup.
    Join { group: GroupId, view: u64 },
    /// Primary → coordinator: spare `node` has caught up and can become a backup.
    CaughtUp {
        group: GroupId,
        view: u64,
        node: NodeId,
    },
    /// Leader → every other node: `view` is committed in the config store (the leader has
    /// applied it). A node adopts it at once if it is newer than the view it knows; its own
    /// config store applies the same view later.
    Committed { group: GroupId, view: View },
    /// Primary → coordinator, every tick: the primary of `view` runs. A coordinator that
    /// hears it does not replace the primary on a backup's suspicion (the fault is that
    /// backup's link, and the primary has that backup removed instead).
    Alive { group: GroupId, view: u64 },
}

impl ClusterMessage {
    /// The group the message is about; `None` for the config store's own (Raft).
    pub fn group(&self) -> Option<GroupId> {
        match self {
            ClusterMessage::Raft(_) => None,
            ClusterMessage::Suspect { group, .. }
            | ClusterMessage::Freeze { group, .. }
            | ClusterMessage::Report { group, .. }
            | ClusterMessage::Join { group, .. }
            | ClusterMessage::CaughtUp { group, .. }
            | ClusterMessage::Committed { group, .. }
            | ClusterMessage::Alive { group, .. } => Some(*group),
        }
    }
}

/// What the runtime must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClusterEvent {
    /// Stop accepting the primary of `view` (close its links, refuse new ones), then call
    /// [`Cluster::frozen`] with the last LSN received.
    Freeze { view: u64 },
    /// The group's view changed (or is known for the first time): bring the node's role in
    /// line with it. A member whose records go above `truncate_lsn` must discard them first.
    View(View),
    /// The node suspected a peer (counted: on a loaded machine some suspicions are false,
    /// and they are safe, but a benchmark reports them), and why.
    Suspected {
        peer: NodeId,
        view: u64,
        why: Suspicion,
    },
    /// This frozen backup reported for a new view: it has given up on the primary of `view`,
    /// whose lease it no longer upholds (the simulator checks that primary released nothing
    /// that needed the lease from then on). `rebuilt_by`: the report offered records
    /// rebuilt from the log after a restart, and this is the node's life that sent it
    /// ([`Cluster::incarnation`]): a promotion made from it names that life
    /// ([`tandem_config::Promotion::rebuilt`], `role::made_from_report`).
    Reported { view: u64, rebuilt_by: Option<u64> },
    /// The primary of `view` wants backup `backup` removed (it stopped acknowledging). The
    /// driver has the replication core prepare the removal (`Primary::prepare_removal`, which
    /// names the backups `behind` and from then on releases only what the remaining backups
    /// hold) and then calls [`Cluster::ask_removal`]. Repeated every `suspect_ticks` while
    /// the silence lasts.
    RemovalWanted { view: u64, backup: NodeId },
}

/// The outputs of a step.
///
/// Order: the config store's state was persisted before this value is returned (Raft
/// messages in `messages` may depend on it), so the driver may send `messages` at once; it
/// then acts on `events` in order.
#[derive(Debug, Default)]
pub struct ClusterReady {
    pub messages: Vec<(NodeId, ClusterMessage)>,
    /// Each event with the group it is about.
    pub events: Vec<(GroupId, ClusterEvent)>,
}

impl ClusterReady {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.events.is_empty()
    }

    pub fn clear(&mut self) {
        self.messages.clear();
        self.events.clear();
    }
}

/// A view change the coordinator is collecting reports for.
#[derive(Debug)]
struct Collecting {
    view: u64,
    reports: BTreeMap<NodeId, rule::Reported>,
    tick_started: u64,
    /// The last tick Freeze went to the backups that have not reported.
    tick_freeze_sent: u64,
    tick_proposed: Option<u64>,
    /// Whether the spares were asked to report too: the backups' reports all lay below the
    /// last promotion's released LSN (`rule::promote_from`).
    spares_asked: bool,
}

/// A wish repeated every suspicion timeout while its cause lasts (a backup's suspicion of
/// the primary, the primary's request to remove a backup): when it was first and last made.
#[derive(Clone, Copy, Debug)]
struct Repeated {
    tick_first: u64,
    tick_last: u64,
}

impl Repeated {
    /// `previous` made again at `tick`; after a gap of more than two timeouts the cause is
    /// taken to have ended in between, and this is a new wish.
    fn renew(previous: Option<Repeated>, tick: u64, suspect_ticks: u64) -> Repeated {
        match previous {
            Some(previous) if !previous.is_stale(tick, suspect_ticks) => Repeated {
                tick_last: tick,
                ..previous
            },
            _ => Repeated {
                tick_first: tick,
                tick_last: tick,
            },
        }
    }

    /// Not made again for more than two timeouts.
    fn is_stale(&self, tick: u64, suspect_ticks: u64) -> bool {
        tick - self.tick_last > 2 * suspect_ticks
    }

    /// Made for `RESUME_AFTER_SUSPICIONS` timeouts in a row: it stands without confirmation.
    fn has_lasted(&self, tick: u64, suspect_ticks: u64) -> bool {
        tick - self.tick_first >= RESUME_AFTER_SUSPICIONS * suspect_ticks
    }
}

/// This node's own freeze in a view.
#[derive(Debug)]
struct Frozen {
    view: u64,
    /// Set by the runtime once it stopped accepting the old primary.
    lsn_received: Option<u64>,
    /// The view whose history those records follow (set with `lsn_received`).
    view_held: u64,
    /// The records were rebuilt from the write-ahead log by a node that lost its memory.
    restarted: bool,
    /// What the role told its primary its log synced, at most (set with `lsn_received`).
    lsn_synced: u64,
    tick_reported: Option<u64>,
}

/// Why a peer was suspected: what a node's log says of each suspicion, so that a false one
/// can be told from a dead peer after the fact.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Suspicion {
    /// The peer's process closed its connection (a strong sign, acted on at once).
    Closed,
    /// Nothing was heard from the peer for `ticks`, which reached the silence it is allowed
    /// (`suspect_ticks`, stretched by the jitter observed from it).
    Silent { ticks: u64, allowed_ticks: u64 },
}

impl std::fmt::Display for Suspicion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Suspicion::Closed => write!(f, "its connection closed"),
            Suspicion::Silent {
                ticks,
                allowed_ticks,
            } => write!(f, "silent for {ticks} ticks, {allowed_ticks} allowed"),
        }
    }
}

/// What a node that restarted without its memory rebuilt from its write-ahead log, synced:
/// every record up to `lsn` of the history of view `view`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rebuilt {
    pub lsn: u64,
    pub view: u64,
}

/// One group's part of a node's cluster core: the group's view as this node knows it, what
/// its detector heard and suspected in it, and the view change under way. Everything of the
/// node itself (the config store, the peers' connections and how regularly each is heard)
/// stays in [`Cluster`], which holds one per group the node serves in.
#[derive(Debug)]
struct GroupCore {
    id: GroupId,
    safety: Safety,
    /// The group's view as last applied from the config store.
    view: Option<View>,
    /// Backup: the tick it last heard the primary of `view`.
    tick_heard_primary: u64,
    /// The tick until which the lease this node granted the primary it last froze against
    /// holds (`tick_heard_primary` then, plus `lease_ticks`): a report may leave before it,
    /// but if this node is promoted its primary role releases nothing until it has passed
    /// ([`Cluster::lease_owed_ticks`]), so the old primary's lease has surely run out before
    /// the new primary's first answer.
    tick_lease_owed_until: u64,
    /// Primary: the tick each member last heard from.
    tick_heard: BTreeMap<NodeId, u64>,
    /// The tick of the last suspicion sent about each peer.
    tick_suspected: BTreeMap<NodeId, u64>,
    frozen: Option<Frozen>,
    collecting: Option<Collecting>,
    /// Proposals in flight for membership changes, by the view they change: at most one.
    tick_membership_proposed: Option<(u64, u64)>,
    tick_join_sent: Option<u64>,
    /// Coordinator: the tick the primary of `view` last said it was alive.
    tick_alive_primary: Option<u64>,
    /// Coordinator: the first and the latest tick of the backups' suspicions of the primary
    /// that the coordinator has not confirmed yet.
    suspicion_pending: Option<Repeated>,
    /// Coordinator: the tick each backup last said it suspects the primary of the view.
    tick_backup_suspected: BTreeMap<NodeId, u64>,
    /// Peers heard from in this view. Until a peer is first heard from, it is suspected only
    /// after `FIRST_CONTACT_GRACE` times the usual silence: starting a role (loading a
    /// segment, connecting) takes longer than a heartbeat.
    contacted: std::collections::BTreeSet<NodeId>,
    /// Whether the runtime runs the role the view gives this node. A node that restarted
    /// without its memory holds no role: it suspects nobody and never says it is alive
    /// (unless it rebuilt records, see `rebuilt`).
    serving: bool,
    /// Records a node that restarted without its memory rebuilt from its log, while it
    /// serves no role: a reporter of the view it restarted into suspects a silent primary
    /// and reports them, flagged as rebuilt, so that a group whose every node lost power at
    /// once can promote one of them ([`crate::rule::promote_from`]).
    rebuilt: Option<Rebuilt>,
    /// Records rebuilt from the log that the role now serving took, while it has not yet
    /// heard from a primary: what it holds is still exactly what the log gave back, so a
    /// report of it is flagged as rebuilt. A view proposed from the reports the lost
    /// incarnations sent from memory may be committed only after the restart (default-mix
    /// seed 420438): it names this node a backup, which serves from its log, and a primary
    /// that holds less than the truncate LSN and cannot serve. The change that must follow
    /// can waive that floor only if it learns that every reporter lost its memory.
    rebuilt_unheard: Option<Rebuilt>,
    /// Primary that restarted with rebuilt records: when it last reported them.
    tick_restarted_reported: Option<u64>,
    /// Coordinator: the members that reported records rebuilt after a restart, or asked to
    /// join while the view names them, with the view they did so in (they lost their memory,
    /// and serve nothing in it).
    restarted_reported: BTreeMap<NodeId, u64>,
    /// Primary: the tick its data plane last reported progress.
    tick_executor_turned: u64,
    /// Primary: when the long call its data plane says is under way began, if one is.
    tick_long_call_began: Option<u64>,
    /// Coordinator: the ticks the primary first and last asked for the removal of each
    /// backup (a removal the coordinator cannot confirm waits, but not for good).
    removal_asked: BTreeMap<NodeId, Repeated>,
    /// Whether the data plane has a database to rejoin with. While it loads one (off the
    /// thread that steps this core, which must keep answering the config store), a node
    /// outside the view does not ask to join.
    loaded: bool,
    /// Whether the node serves in the group; if not, it only coordinates the group's view
    /// changes (it never serves, loads, joins or reports, and the driver hears no event).
    serves: bool,
    /// The role rule holds this node out of the view that names it (it restarted without its
    /// memory: [`crate::role::Transition::Wait`]); a backup or spare asks to be left out.
    waiting: bool,
}

/// What a node's cluster core holds of the node itself, whatever its groups: its settings,
/// the config store, its clock, and what it knows of its peers' connections.
#[derive(Debug)]
struct NodePart {
    settings: ClusterSettings,
    config: ConfigCore,
    config_ready: ConfigReady,
    tick: u64,
    tick_leader_transferred: Option<u64>,
    /// The config store's leader when this core last looked.
    leader_known: Option<NodeId>,
    /// Peers whose connection to this node was closed from their side (the kernel closes a
    /// dead process's sockets at once) and that have not been heard from since: a strong
    /// sign, acted on without waiting for the silence to last.
    closed: std::collections::BTreeSet<NodeId>,
    /// How irregularly each peer is heard: the silence it is allowed grows with it.
    arrivals: BTreeMap<NodeId, detect::Arrivals>,
    /// Coordinator: the tick each node last sent this node anything.
    tick_heard_node: BTreeMap<NodeId, u64>,
    ready: ClusterReady,
}

/// One node's cluster core.
///
/// It acts on one group at a time: the group an input names is moved into `group` first
/// ([`Cluster::focus`]), so that every method reads the group it acts on as `self.group`,
/// whichever group that is, and the node's other groups wait in `others`.
#[derive(Debug)]
pub struct Cluster {
    node: NodePart,
    /// The group the core acts on now: its view, its detector and its view changes.
    group: GroupCore,
    /// The node's other groups, in no order.
    others: Vec<GroupCore>,
    /// The ids of the groups the node serves in, in the settings' order.
    group_ids: Vec<GroupId>,
    /// Those, then the groups it only coordinates: the order a tick visits them in.
    every_id: Vec<GroupId>,
}

impl GroupCore {
    /// The part of a group the node serves in if `serves`, else of one it only coordinates.
    fn new(settings: GroupSettings, serves: bool) -> GroupCore {
        GroupCore {
            id: settings.id,
            safety: settings.safety,
            view: None,
            tick_heard_primary: 0,
            tick_lease_owed_until: 0,
            tick_heard: BTreeMap::new(),
            tick_suspected: BTreeMap::new(),
            frozen: None,
            collecting: None,
            tick_membership_proposed: None,
            tick_join_sent: None,
            tick_alive_primary: None,
            suspicion_pending: None,
            tick_backup_suspected: BTreeMap::new(),
            contacted: std::collections::BTreeSet::new(),
            serving: serves,
            rebuilt: None,
            rebuilt_unheard: None,
            tick_restarted_reported: None,
            restarted_reported: BTreeMap::new(),
            tick_executor_turned: 0,
            tick_long_call_began: None,
            removal_asked: BTreeMap::new(),
            loaded: serves,
            waiting: false,
            serves,
        }
    }

    /// What the node is in the group's view as it knows it.
    fn member(&self, node: &NodePart) -> Member {
        self.view
            .as_ref()
            .map_or(Member::Outside, |view| view.member(node.settings.node))
    }

    /// Primary: whether its data plane has reported no progress for `executor_stall_ticks`
    /// (see [`Cluster::is_stalled`]).
    fn is_stalled(&self, node: &NodePart) -> bool {
        // A long call within its allowance is progress; past it, silence counts from there.
        let progress = self
            .tick_long_call_began
            .map_or(self.tick_executor_turned, |began| {
                let allowed_until = began.saturating_add(node.settings.long_call_ticks);
                self.tick_executor_turned.max(node.tick.min(allowed_until))
            });
        self.member(node) == Member::Primary
            && !node.settings.view_fixed
            && node
                .settings
                .executor_stall_ticks
                .is_some_and(|ticks| node.tick - progress >= ticks)
    }
}

impl Cluster {
    /// A node's cluster core, from what its config store persisted (None on first start).
    pub fn new(
        settings: ClusterSettings,
        initial: ClusterMap,
        persisted: Option<Persisted>,
    ) -> Result<Cluster, ConfigError> {
        assert!(
            settings.suspect_ticks >= 2,
            "suspect_ticks must be at least 2"
        );
        assert!(
            settings.lease_ticks < settings.suspect_ticks,
            "a lease must run out before its holder is suspected"
        );
        let group_ids: Vec<GroupId> = settings.groups.iter().map(|group| group.id).collect();
        assert!(!group_ids.is_empty(), "a node serves in at least one group");
        let every_id = (settings.groups.iter().chain(&settings.coordinated)).map(|group| group.id);
        let every_id: Vec<GroupId> = every_id.collect();
        assert!(
            every_id
                .iter()
                .collect::<std::collections::BTreeSet<_>>()
                .len()
                == every_id.len(),
            "a node serves in or coordinates each group once"
        );
        let config = ConfigCore::new(
            ConfigSettings {
                id: settings.node,
                voters: settings.voters.clone(),
                election_ticks: settings.election_ticks,
                heartbeat_ticks: settings.raft_heartbeat_ticks,
                jitter_seed: settings.jitter_seed,
            },
            initial,
            persisted,
        )?;
        let coordinated = (settings.coordinated.iter()).map(|&group| GroupCore::new(group, false));
        let mut groups = (settings.groups.iter())
            .map(|&group| GroupCore::new(group, true))
            .chain(coordinated);
        let group = groups.next().expect("at least one group");
        let others = groups.collect();
        let mut cluster = Cluster {
            node: NodePart {
                settings,
                config,
                config_ready: ConfigReady::default(),
                tick: 0,
                tick_leader_transferred: None,
                leader_known: None,
                closed: std::collections::BTreeSet::new(),
                arrivals: BTreeMap::new(),
                tick_heard_node: BTreeMap::new(),
                ready: ClusterReady::default(),
            },
            group,
            others,
            group_ids,
            every_id,
        };
        cluster.learn_views();
        Ok(cluster)
    }

    /// Makes `group` the group the core acts on; false if the node serves in no such group.
    fn try_focus(&mut self, group: GroupId) -> bool {
        if self.group.id == group {
            return true;
        }
        match self.others.iter_mut().find(|other| other.id == group) {
            Some(other) => {
                std::mem::swap(&mut self.group, other);
                true
            }
            None => false,
        }
    }

    /// Makes `group` the group the core acts on. The driver names only groups it set the
    /// core up with.
    fn focus(&mut self, group: GroupId) {
        assert!(
            self.try_focus(group) && self.group.serves,
            "node {} serves in no group {group}",
            self.node.settings.node
        );
    }

    /// The core's part for `group`, wherever it waits.
    fn group_core(&self, group: GroupId) -> &GroupCore {
        std::iter::once(&self.group)
            .chain(&self.others)
            .find(|core| core.id == group)
            .unwrap_or_else(|| {
                panic!(
                    "node {} serves in no group {group}",
                    self.node.settings.node
                )
            })
    }

    /// The core's part of every group, in the settings' order.
    fn group_cores(&self) -> impl Iterator<Item = &GroupCore> {
        self.every_id.iter().map(|&group| self.group_core(group))
    }

    /// Every group's view this node knows.
    fn views(&self) -> impl Iterator<Item = &View> {
        self.group_cores().filter_map(|group| group.view.as_ref())
    }

    /// The groups this node serves in, in the settings' order.
    pub fn groups(&self) -> &[GroupId] {
        &self.group_ids
    }

    /// The default safety rule of `group` (one the node serves in).
    pub fn safety(&self, group: GroupId) -> Safety {
        self.group_core(group).safety
    }

    pub fn node(&self) -> NodeId {
        self.node.settings.node
    }

    /// This life of the node, once its config store saved it
    /// ([`tandem_config::ConfigCore::incarnation`]): a report of records rebuilt from the
    /// log names it, and so does a promotion made from that report, so that a later life
    /// never takes a view made from an earlier life's report for one made from its own.
    pub fn incarnation(&self) -> Option<u64> {
        self.node.config.incarnation()
    }

    /// `group`'s view as this node knows it.
    pub fn view(&self, group: GroupId) -> Option<&View> {
        self.group_core(group).view.as_ref()
    }

    pub fn map(&self) -> &ClusterMap {
        self.node.config.map()
    }

    /// Asks the config store to hand its leadership to voter `to` (an operator's request, or
    /// a test's; the core itself moves it off the primary, see `keep_leader_off_primary`).
    pub fn transfer_leader(&mut self, to: NodeId) {
        self.node.config.transfer_leader(to);
    }

    /// The config store's leader as this node knows it.
    pub fn leader(&self) -> Option<NodeId> {
        self.node.config.leader()
    }

    /// Ticks since `group`'s backup role last heard its primary.
    pub fn ticks_since_heard_primary(&self, group: GroupId) -> u64 {
        self.node.tick - self.group_core(group).tick_heard_primary
    }

    pub fn is_frozen(&self, group: GroupId) -> bool {
        self.group_core(group).frozen.is_some()
    }

    /// `group`'s backup role heard from its primary (any message).
    pub fn heard_from_primary(&mut self, group: GroupId) {
        self.focus(group);
        let primary = self.group.view.as_ref().map_or(0, |view| view.primary);
        if self.group.contacted.contains(&primary) {
            self.node
                .arrivals
                .entry(primary)
                .or_default()
                .heard(self.node.tick, self.group.tick_heard_primary);
        }
        self.group.tick_heard_primary = self.node.tick;
        self.group.contacted.insert(primary);
        self.node.closed.remove(&primary);
        // From now on it may hold what a live primary sent and acknowledged from memory.
        self.group.rebuilt_unheard = None;
    }

    /// `group`'s primary role heard from member `node` (an ack).
    pub fn heard_from_backup(&mut self, group: GroupId, node: NodeId) {
        self.focus(group);
        if self.group.contacted.contains(&node)
            && let Some(&last) = self.group.tick_heard.get(&node)
        {
            self.node
                .arrivals
                .entry(node)
                .or_default()
                .heard(self.node.tick, last);
        }
        self.group.tick_heard.insert(node, self.node.tick);
        self.group.contacted.insert(node);
        self.node.closed.remove(&node);
    }

    /// The connection from `peer` was closed from its side (end of stream or a reset, not a
    /// close of this node's own): a strong sign that its process died. The suspicion it
    /// raises leaves now, not at the next tick; hearing from `peer` again takes it back.
    pub fn peer_closed(&mut self, peer: NodeId) {
        if peer == self.node.settings.node || self.node.settings.view_fixed {
            return;
        }
        self.node.closed.insert(peer);
        self.campaign_if_leader_closed(peer);
        self.each_group(|core| {
            core.detect();
            core.maybe_confirm_suspicion();
        });
    }

    /// `group`'s primary: its data plane made progress (the executor began a turn).
    pub fn executor_turned(&mut self, group: GroupId) {
        self.focus(group);
        self.group.tick_executor_turned = self.node.tick;
    }

    /// `group`'s primary: whether its data plane has reported no progress for
    /// `executor_stall_ticks`. A stuck primary says it is not alive; its driver also stops
    /// whatever else speaks for it (the runtime's links stop their pulses).
    pub fn is_stalled(&self, group: GroupId) -> bool {
        self.group_core(group).is_stalled(&self.node)
    }

    /// Primary: whether its data plane is in a long call (a script) now. The first report of
    /// one starts its allowance (`long_call_ticks`); a report of none ends it.
    pub fn long_call_running(&mut self, group: GroupId, running: bool) {
        self.focus(group);
        self.group.tick_long_call_began = match (running, self.group.tick_long_call_began) {
            (true, Some(began)) => Some(began),
            (true, None) => Some(self.node.tick),
            (false, _) => None,
        };
    }

    /// The runtime started the role the view gives this node: silence is counted from now,
    /// and a peer not yet heard from in this view gets the first-contact grace.
    pub fn role_started(&mut self, group: GroupId) {
        self.focus(group);
        self.group.tick_heard_primary = self.node.tick;
        self.group.tick_executor_turned = self.node.tick;
        for tick in self.group.tick_heard.values_mut() {
            *tick = self.node.tick;
        }
    }

    /// The runtime stopped accepting the primary of `view`; the backup holds every record up
    /// to `lsn_received` of the history of view `view_held` (`view`, or an older view a
    /// rewound member held before it rewound: [`crate::rule::Reported`]). The report leaves
    /// at once; the lease this backup granted the old primary is honoured by the new primary
    /// instead, should this node become it ([`Cluster::lease_owed_ticks`]).
    /// `lsn_synced`: the most the frozen role told its primary its log synced.
    pub fn frozen(
        &mut self,
        group: GroupId,
        view: u64,
        lsn_received: u64,
        view_held: u64,
        lsn_synced: u64,
    ) {
        self.focus(group);
        assert!(
            view_held <= view,
            "a member holds no view newer than its own"
        );
        if let Some(frozen) = &mut self.group.frozen
            && frozen.view == view
            && frozen.lsn_received.is_none()
        {
            frozen.lsn_received = Some(lsn_received);
            frozen.view_held = view_held;
            frozen.lsn_synced = lsn_synced;
            // A role that rewound its rebuilt records (a rejoin below them) still holds only
            // what its log gave back.
            frozen.restarted = self
                .group
                .rebuilt_unheard
                .is_some_and(|rebuilt| lsn_received <= rebuilt.lsn);
            // Nothing is heard from the old primary from now on: the promise ends here.
            self.group.tick_lease_owed_until =
                self.group.tick_heard_primary + self.node.settings.lease_ticks;
            self.maybe_report();
        }
    }

    /// Ticks from now until the lease this node granted the primary it last froze against
    /// runs out (0 if it has). A primary role started by a promotion releases no reply
    /// before then: the old primary may answer under that lease until it ends, and an answer
    /// of the new primary before it could be missed by one of the old primary's. Waiting
    /// here rather than before the report lets the wait run alongside the view change.
    pub fn lease_owed_ticks(&self, group: GroupId) -> u64 {
        self.group_core(group)
            .tick_lease_owed_until
            .saturating_sub(self.node.tick)
    }

    /// Primary: the data plane prepared the removal of `backup` from `view` (see
    /// [`ClusterEvent::RemovalWanted`]); `behind` are the other backups that lack a record a
    /// reply was released for, made spares by the same change. Sends `Suspect` to the
    /// coordinator, unless the view moved on meanwhile.
    pub fn ask_removal(
        &mut self,
        group: GroupId,
        view: u64,
        backup: NodeId,
        behind: Vec<NodeId>,
        joining: Vec<NodeId>,
    ) {
        self.focus(group);
        let Some(current) = &self.group.view else {
            return;
        };
        if self.node.settings.view_fixed
            || current.number != view
            || current.primary != self.node.settings.node
            || !current.backups.contains(&backup)
        {
            return;
        }
        let message = ClusterMessage::Suspect {
            group: self.group.id,
            view,
            suspect: backup,
            behind,
            joining,
        };
        self.send_coordinator(message);
    }

    /// Primary: spare `node` of `view` has caught up and the replication core now holds back
    /// replies it lacks (`Primary::prepare_spare_promotions`); it may become a backup.
    pub fn spare_caught_up(&mut self, group: GroupId, view: u64, node: NodeId) {
        self.focus(group);
        let Some(current) = &self.group.view else {
            return;
        };
        if self.node.settings.view_fixed
            || current.number != view
            || current.primary != self.node.settings.node
            || !current.spares.contains(&node)
        {
            return;
        }
        let view = current;
        let message = ClusterMessage::CaughtUp {
            group: self.group.id,
            view: view.number,
            node,
        };
        self.send_coordinator(message);
    }

    pub fn tick(&mut self) {
        self.node.tick += 1;
        if self.node.settings.view_fixed {
            return;
        }
        self.node.config.tick();
        self.follow_leader_change();
        self.each_group(|core| {
            core.detect();
            core.maybe_report();
            core.maybe_report_restarted_primary();
            core.maybe_confirm_suspicion();
            core.coordinate();
            core.maybe_leave_out_restarted();
        });
        self.keep_leader_off_primary();
        self.each_group(|core| {
            core.maybe_join();
            core.maybe_alive();
        });
    }

    /// Runs `act` on each group in turn, those the node coordinates only last.
    fn each_group(&mut self, mut act: impl FnMut(&mut Cluster)) {
        for index in 0..self.every_id.len() {
            let group = self.every_id[index];
            assert!(self.try_focus(group), "a group the core was set up with");
            act(self);
        }
    }

    /// The runtime says whether it runs the role the view gives this node (true until told
    /// otherwise). A role that serves took the rebuilt records, if it did not discard them.
    pub fn set_serving(&mut self, group: GroupId, serving: bool) {
        self.focus(group);
        self.group.serving = serving;
        if !serving {
            self.group.rebuilt_unheard = None;
        } else if let Some(rebuilt) = self.group.rebuilt.take() {
            self.group.rebuilt_unheard = Some(rebuilt);
        }
    }

    /// A node that restarted without its memory (it serves no role) rebuilt `rebuilt` from
    /// its write-ahead log and synced it. While it serves nothing and the view names it a
    /// reporter ([`crate::rule::reporters`]), it watches the primary as a backup would (it
    /// hears nothing from it, so it suspects it once the first-contact grace ran out; a
    /// coordinator that still hears the primary waits) and answers a freeze with these
    /// records at once. The lease its lost incarnation granted ended before this one could
    /// have started plus `lease_ticks`, which a promotion of this node honours.
    pub fn restarted_with(&mut self, group: GroupId, rebuilt: Rebuilt) {
        self.focus(group);
        assert!(
            !self.group.serving,
            "a node with records rebuilt from its log serves no role yet"
        );
        self.group.rebuilt = Some(rebuilt);
        self.group.tick_lease_owed_until = self.node.tick + self.node.settings.lease_ticks;
    }

    /// The records rebuilt from the log that this core reports for, if it does: the node
    /// serves no role and its view is not older than their view.
    fn rebuilt_reporting(&self) -> Option<Rebuilt> {
        let view = self.group.view.as_ref()?;
        self.group
            .rebuilt
            .filter(|rebuilt| !self.group.serving && rebuilt.view <= view.number)
    }

    /// Whether a report from this node would now say that it holds only records its log
    /// gave back after a restart ([`crate::rule::Reported::restarted`]): its role serves from
    /// them and has heard no primary since, or it serves no role and holds them aside.
    pub fn reports_rebuilt(&self, group: GroupId) -> bool {
        let group = self.group_core(group);
        group.rebuilt_unheard.is_some() || (!group.serving && group.rebuilt.is_some())
    }

    /// The runtime says whether it has a database ready for the role a join would give
    /// (true until told otherwise); a node outside the view asks to join only then.
    pub fn set_loaded(&mut self, group: GroupId, loaded: bool) {
        self.focus(group);
        self.group.loaded = loaded;
    }

    /// The driver carried a view out: whether the role rule holds the node out of that view
    /// although it names it ([`crate::role::Transition::Wait`]). A backup or spare that waits
    /// says so to the coordinator ([`ClusterMessage::Join`]), which then lets the primary
    /// remove it even when it is the last backup: otherwise it waited for good as the
    /// primary's only backup (default-mix seed 458046).
    pub fn set_waiting(&mut self, group: GroupId, waiting: bool) {
        self.focus(group);
        self.group.waiting = waiting;
    }

    /// A message from node `from`. Malformed Raft bytes are an error (counted by the caller),
    /// never a panic.
    pub fn step(&mut self, from: NodeId, message: ClusterMessage) -> Result<(), ConfigError> {
        if self.node.settings.view_fixed {
            // A fixed view's core has nothing to learn: a cluster-mode peer's message (a
            // configuration that mixes the modes) changes nothing here.
            return Ok(());
        }
        self.node.tick_heard_node.insert(from, self.node.tick);
        let Some(group) = message.group() else {
            if let ClusterMessage::Raft(bytes) = message {
                self.node.config.step(from, &bytes)?;
                self.follow_leader_change();
            }
            return Ok(());
        };
        if !self.try_focus(group) {
            // The business of a group this node does not serve in.
            return Ok(());
        }
        match message {
            ClusterMessage::Raft(_) => unreachable!("a Raft message names no group"),
            ClusterMessage::Suspect {
                view,
                suspect,
                behind,
                joining,
                ..
            } => self.on_suspect(from, view, suspect, &behind, &joining),
            ClusterMessage::Freeze { view, .. } => self.on_freeze(view),
            ClusterMessage::Report {
                view,
                lsn_received,
                view_held,
                restarted,
                incarnation,
                lsn_synced,
                ..
            } => {
                let reported = rule::Reported {
                    lsn_received,
                    view_held,
                    restarted,
                    incarnation,
                    lsn_synced,
                };
                self.on_report(from, view, reported)
            }
            ClusterMessage::Join { view, .. } => self.on_join(from, view),
            ClusterMessage::CaughtUp { view, node, .. } => self.on_caught_up(from, view, node),
            ClusterMessage::Committed { view, .. }
                if self
                    .group
                    .view
                    .as_ref()
                    .is_none_or(|known| known.number < view.number) =>
            {
                self.adopt(view)
            }
            ClusterMessage::Committed { .. } => {}
            ClusterMessage::Alive { view, .. } => {
                if self
                    .group
                    .view
                    .as_ref()
                    .is_some_and(|known| known.number == view && known.primary == from)
                {
                    self.group.tick_alive_primary = Some(self.node.tick);
                    self.node.closed.remove(&from);
                }
            }
        }
        Ok(())
    }

    /// Hands over what the core queued since the last hand-over that depends on nothing to
    /// persist: its own messages (a freeze, a report, an announced view) and events. Raft's
    /// messages are never among them; they leave only through [`Cluster::take_ready`]. A
    /// driver calls this first, so that a slow save does not delay a failover's steps.
    pub fn take_early(&mut self, into: &mut ClusterReady) {
        assert!(
            into.is_empty(),
            "the driver must act on and clear the previous Ready"
        );
        assert!(
            self.node
                .ready
                .messages
                .iter()
                .all(|(_, message)| !matches!(message, ClusterMessage::Raft(_))),
            "Raft's messages wait for the save"
        );
        std::mem::swap(&mut self.node.ready, into);
    }

    /// Persists the config store's state through `disk`, then hands over the outputs.
    pub fn take_ready(
        &mut self,
        disk: &mut impl Durable,
        into: &mut ClusterReady,
    ) -> std::io::Result<()> {
        let mut early = Vec::new();
        let result = self.take_ready_sending(disk, into, &mut |to, message| {
            early.push((to, message));
        });
        early.append(&mut into.messages);
        into.messages = early;
        result
    }

    /// [`Cluster::take_ready`], but the Raft messages that need no save (a leader's appends
    /// and heartbeats) go to `send_now` before the config store saves: a view change's
    /// commit then waits for the leader's and a follower's fsync side by side, not in turn.
    pub fn take_ready_sending(
        &mut self,
        disk: &mut impl Durable,
        into: &mut ClusterReady,
        send_now: &mut dyn FnMut(NodeId, ClusterMessage),
    ) -> std::io::Result<()> {
        assert!(
            into.is_empty(),
            "the driver must act on and clear the previous Ready"
        );
        self.node
            .config
            .ready_sending(disk, &mut self.node.config_ready, &mut |to, bytes| {
                send_now(to, ClusterMessage::Raft(bytes))
            })?;
        for (to, bytes) in self.node.config_ready.messages.drain(..) {
            self.node
                .ready
                .messages
                .push((to, ClusterMessage::Raft(bytes)));
        }
        self.node.config_ready.applied.clear();
        self.learn_views();
        std::mem::swap(&mut self.node.ready, into);
        Ok(())
    }

    /// Picks up the views the config store committed.
    fn learn_views(&mut self) {
        self.each_group(Cluster::learn_view);
    }

    /// Picks up a view of the group at hand the config store committed.
    fn learn_view(&mut self) {
        let Some(view) = self.node.config.map().groups.get(&self.group.id) else {
            return;
        };
        if let Some(known) = &self.group.view {
            if known.number == view.number {
                assert_eq!(known, view, "one view per view number");
            }
            // Equal, or older than a view the leader already announced: nothing new.
            if known.number >= view.number {
                return;
            }
        }
        let view = view.clone();
        // The leader applies a view first: it tells every other node at once, so that the
        // new primary need not wait for Raft to carry the commit index to it.
        if self.node.config.is_leader() {
            let announce = ClusterMessage::Committed {
                group: self.group.id,
                view: view.clone(),
            };
            for &node in self.node.config.map().nodes.keys() {
                if node != self.node.settings.node {
                    self.node.ready.messages.push((node, announce.clone()));
                }
            }
        }
        self.adopt(view);
    }

    /// Takes `view` as the group's current view, newer than any known.
    fn adopt(&mut self, view: View) {
        assert!(
            self.group
                .view
                .as_ref()
                .is_none_or(|known| known.number < view.number),
            "views only move forward"
        );
        // A view with a new primary starts every timer afresh: members are heard from as of
        // now. A membership change under the same primary keeps the silence already counted
        // (and who was heard from): the links carry on, and a primary that died just as a
        // member joined or left must not win a fresh timeout, nor the first-contact grace
        // (the demo once waited 100 ms on that grace after a spare joined at the kill).
        let same_primary = self
            .group
            .view
            .as_ref()
            .is_some_and(|known| known.primary == view.primary);
        let heard_before = std::mem::take(&mut self.group.tick_heard);
        if !same_primary {
            self.group.tick_heard_primary = self.node.tick;
        }
        for &node in view.backups.iter().chain(&view.spares) {
            let tick = match heard_before.get(&node) {
                Some(&tick) if same_primary => tick,
                _ => self.node.tick,
            };
            self.group.tick_heard.insert(node, tick);
        }
        self.group.tick_suspected.clear();
        self.group.tick_restarted_reported = None;
        self.group.frozen = None;
        self.group.collecting = None;
        self.group.tick_membership_proposed = None;
        self.group.tick_join_sent = None;
        // The same primary's word that it runs holds across a membership change: a report of
        // rebuilt records sent at once in the new view must not find it forgotten (seed
        // 33390, see `on_report`).
        if !same_primary {
            self.group.tick_alive_primary = None;
        }
        self.group.suspicion_pending = None;
        self.group.tick_backup_suspected.clear();
        self.group.removal_asked.clear();
        if same_primary {
            let members: Vec<NodeId> = view.members().collect();
            self.group.contacted.retain(|node| members.contains(node));
        } else {
            self.group.contacted.clear();
        }
        // A closed connection speaks of a peer a view had contact with; a node that comes
        // back into the view is first heard afresh.
        let (contacted, others) = (&self.group.contacted, &self.others);
        self.node.closed.retain(|node| {
            contacted.contains(node) || others.iter().any(|other| other.contacted.contains(node))
        });
        // Left out, a restarted node keeps what it rebuilt: outside the view it reports
        // nothing, and when a later view names it again its role takes those records, whose
        // reports say they are only what the log gave back until it hears a primary
        // (`set_serving`). Dropped here, they were reported as a live member's (default-mix
        // seed 477403: a spare that followed a view from its log's records, short of the last
        // promotion's floor, reported them as received from a primary, so the whole group's
        // power loss was not recognised and the group waited for good).
        self.group.view = Some(view.clone());
        self.push_event(ClusterEvent::View(view));
    }

    /// What this node is in `group`'s view as it knows it.
    pub fn member(&self, group: GroupId) -> Member {
        self.group_core(group).member(&self.node)
    }

    /// Queues an event of the group at hand, if the node serves in it.
    fn push_event(&mut self, event: ClusterEvent) {
        if self.group.serves {
            self.node.ready.events.push((self.group.id, event));
        }
    }

    /// Sends to the config store's leader, or handles it here when this node leads. Without a
    /// known leader the message is dropped: the sender repeats it on its next timeout.
    fn send_coordinator(&mut self, message: ClusterMessage) {
        match self.node.config.leader() {
            Some(leader) if leader == self.node.settings.node => {
                let node = self.node.settings.node;
                // Local messages cannot be malformed Raft bytes.
                let _ = self.step(node, message);
            }
            Some(leader) => self.node.ready.messages.push((leader, message)),
            None => {}
        }
    }
}
