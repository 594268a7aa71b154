//! A deterministic group of `Cluster` cores for the scenario tests.
//!
//! Each node is a `Cluster` with a `MemDurable`; the network is a FIFO queue of
//! `(from, to, ClusterMessage)` delivered within the tick it was sent (replies included), so a
//! run depends on nothing but the script. The test may crash, restart and partition nodes.
//!
//! The data plane is modelled the way the runtime drives the core (crates/runtime/src/cluster.rs):
//! - before each tick, a backup calls `heard_from_primary` if its primary ships to it (alive,
//!   connected, primary of its own view, listing the backup), and the primary calls
//!   `heard_from_backup(n)` for each member `n` that acks it (alive, connected, following it);
//! - a frozen backup neither hears nor acks the old primary;
//! - on `ClusterEvent::Freeze` the backup calls `frozen(view, lsn_received)` with the LSN the
//!   test set for it (unless the test stalls that node's freeze);
//! - a restarted node has lost its memory: it holds no role (is neither heard nor acks) until a
//!   view leaves it out (`tandem_cluster::role::still_restarted`) and a later one names it.
//!
//! A node may serve in several groups (`Harness::groups`): the data plane above is modelled
//! per group (a [`Plane`] each), and a restart loses the memory of every group at once.
//!
//! Checker (`check`, after every step, and on every `View` event), per group: each node's
//! views (per incarnation) only move forward; every node that applied view number v applied
//! the same `View`; a promoted backup never holds more than the truncate LSN; no two nodes are
//! primary of one view.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};

use tandem_cluster::{
    Cluster, ClusterEvent, ClusterMessage, ClusterReady, ClusterSettings, GroupSettings,
};
use tandem_config::{ClusterMap, GroupId, MemDurable, NodeInfo, View};
use tandem_replication::{NodeId, Safety};

pub const GROUP: u32 = 1;
pub const SUSPECT_TICKS: u64 = 5;
pub const LEASE_TICKS: u64 = 3;
pub const COLLECT_TICKS: u64 = 4;
pub const ELECTION_TICKS: usize = 10;
pub const RAFT_HEARTBEAT_TICKS: usize = 2;
/// A primary whose executor reports no progress for this long is stuck.
pub const EXECUTOR_STALL_TICKS: u64 = 8 * SUSPECT_TICKS;
/// A long call counts as progress this long from its start.
pub const LONG_CALL_TICKS: u64 = 3 * EXECUTOR_STALL_TICKS;

pub fn view(number: u64, primary: NodeId, backups: &[NodeId], spares: &[NodeId]) -> View {
    View {
        number,
        primary,
        backups: backups.to_vec(),
        spares: spares.to_vec(),
        promotions: Vec::new(),
        primary_sole_holder: false,
    }
}

pub struct Node {
    pub settings: ClusterSettings,
    pub core: Option<Cluster>,
    pub disk: MemDurable,
    /// 0 for the first start, +1 per restart.
    pub incarnation: u32,
    /// The data plane of each group the node serves in.
    pub planes: BTreeMap<GroupId, Plane>,
}

/// A node's data plane for one group, as the runtime would run it.
#[derive(Default)]
pub struct Plane {
    /// What the data plane received: the LSN reported on a freeze.
    pub lsn_received: u64,
    /// Restarted: its memory is gone, it holds no role until it is made a spare.
    pub lost_memory: bool,
    /// Restarted with records rebuilt from its log: (LSN, view), until a role takes them.
    pub rebuilt: Option<(u64, u64)>,
    /// The life (config store incarnation) that reported its rebuilt records, if this one
    /// did.
    pub reported_rebuilt: Option<u64>,
    /// The primary role's executor is stuck in one call: it reports no progress.
    pub executor_stuck: bool,
    /// The runtime is slow to freeze: `frozen` waits until `release_freeze`.
    pub freeze_stalled: bool,
    pending_freeze: Option<u64>,
    /// Every `View` event, with the incarnation that applied it.
    pub views: Vec<(u32, View)>,
    /// Every `Freeze` event (the view frozen in).
    pub freezes: Vec<u64>,
    /// Every `Suspected` event: (peer, view).
    pub suspected: Vec<(NodeId, u64)>,
}

impl Node {
    pub fn core(&self) -> &Cluster {
        self.core.as_ref().expect("node is up")
    }

    /// The view of `GROUP` the node knows.
    pub fn view(&self) -> &View {
        self.view_in(GROUP)
    }

    pub fn view_in(&self, group: GroupId) -> &View {
        self.core()
            .view(group)
            .expect("every node knows the initial view")
    }

    /// The data plane of `GROUP`.
    pub fn plane(&self) -> &Plane {
        &self.planes[&GROUP]
    }
}

pub struct Harness {
    pub nodes: BTreeMap<NodeId, Node>,
    initial: ClusterMap,
    queue: VecDeque<(NodeId, NodeId, ClusterMessage)>,
    /// Links cut, as (lower id, higher id).
    cut: BTreeSet<(NodeId, NodeId)>,
    pub tick: u64,
    /// (group, view number) → the view as first applied anywhere.
    applied: BTreeMap<(GroupId, u64), View>,
    ready: ClusterReady,
    /// See [`Harness::refuse_removals`].
    removals_refused: bool,
}

impl Harness {
    /// Node 1 primary, 2 and 3 backups, all three voters.
    pub fn three(safety: Safety) -> Harness {
        Harness::new(&[1, 2, 3], &[1, 2, 3], view(1, 1, &[2, 3], &[]), safety)
    }

    /// `nodes` in the cluster map, `voters` voting in the config store, `first` the group's
    /// view at start.
    pub fn new(nodes: &[NodeId], voters: &[NodeId], first: View, safety: Safety) -> Harness {
        Harness::with_views(nodes, voters, first, safety, false)
    }

    /// Node 1 primary, 2 and 3 backups, each core holding that view for good (nodes without
    /// a `[cluster]` table), each the only voter of its own config store.
    pub fn fixed(safety: Safety) -> Harness {
        Harness::with_views(&[1, 2, 3], &[], view(1, 1, &[2, 3], &[]), safety, true)
    }

    /// `nodes` in the cluster map, `voters` voting in the config store, and each group of
    /// `groups` at its first view; every node serves in every group.
    pub fn groups(
        nodes: &[NodeId],
        voters: &[NodeId],
        groups: &[(GroupId, View)],
        safety: Safety,
    ) -> Harness {
        Harness::with_groups(nodes, voters, groups, safety, false)
    }

    fn with_views(
        nodes: &[NodeId],
        voters: &[NodeId],
        first: View,
        safety: Safety,
        view_fixed: bool,
    ) -> Harness {
        Harness::with_groups(nodes, voters, &[(GROUP, first)], safety, view_fixed)
    }

    fn with_groups(
        nodes: &[NodeId],
        voters: &[NodeId],
        groups: &[(GroupId, View)],
        safety: Safety,
        view_fixed: bool,
    ) -> Harness {
        let mut initial = ClusterMap::default();
        for &id in nodes {
            let address = format!("127.0.0.1:{}", 7000 + id);
            initial.nodes.insert(id, NodeInfo { id, address });
        }
        for (group, first) in groups {
            initial.groups.insert(*group, first.clone());
        }
        let mut harness = Harness {
            removals_refused: false,
            nodes: BTreeMap::new(),
            initial,
            queue: VecDeque::new(),
            cut: BTreeSet::new(),
            tick: 0,
            applied: BTreeMap::new(),
            ready: ClusterReady::default(),
        };
        for &id in nodes {
            let settings = ClusterSettings {
                node: id,
                groups: groups
                    .iter()
                    .map(|&(id, _)| GroupSettings { id, safety })
                    .collect(),
                coordinated: Vec::new(),
                voters: match view_fixed {
                    true => vec![id],
                    false => voters.to_vec(),
                },
                suspect_ticks: SUSPECT_TICKS,
                lease_ticks: LEASE_TICKS,
                collect_ticks: COLLECT_TICKS,
                election_ticks: ELECTION_TICKS,
                raft_heartbeat_ticks: RAFT_HEARTBEAT_TICKS,
                jitter_seed: u64::from(id),
                executor_stall_ticks: Some(EXECUTOR_STALL_TICKS),
                long_call_ticks: LONG_CALL_TICKS,
                view_fixed,
            };
            let core = Cluster::new(settings.clone(), harness.initial.clone(), None)
                .expect("a fresh node starts");
            let node = Node {
                settings,
                core: Some(core),
                disk: MemDurable::new(),
                incarnation: 0,
                planes: groups
                    .iter()
                    .map(|&(group, _)| (group, Plane::default()))
                    .collect(),
            };
            harness.nodes.insert(id, node);
        }
        for id in harness.live() {
            harness.drive(id);
        }
        harness.check();
        harness
    }

    // ---- inspection ----

    pub fn node(&self, id: NodeId) -> &Node {
        &self.nodes[&id]
    }

    pub fn core_mut(&mut self, id: NodeId) -> &mut Cluster {
        self.nodes
            .get_mut(&id)
            .unwrap()
            .core
            .as_mut()
            .expect("node is up")
    }

    /// The view of `GROUP` node `id` knows now.
    pub fn view_of(&self, id: NodeId) -> View {
        self.node(id).view().clone()
    }

    /// The groups of the cluster.
    pub fn group_ids(&self) -> Vec<GroupId> {
        self.initial.groups.keys().copied().collect()
    }

    fn plane_mut(&mut self, id: NodeId, group: GroupId) -> &mut Plane {
        self.nodes
            .get_mut(&id)
            .unwrap()
            .planes
            .get_mut(&group)
            .unwrap()
    }

    pub fn alive(&self, id: NodeId) -> bool {
        self.nodes[&id].core.is_some()
    }

    pub fn live(&self) -> Vec<NodeId> {
        self.nodes
            .keys()
            .copied()
            .filter(|&id| self.alive(id))
            .collect()
    }

    pub fn connected(&self, a: NodeId, b: NodeId) -> bool {
        a != b && self.alive(a) && self.alive(b) && !self.cut.contains(&(a.min(b), a.max(b)))
    }

    /// The config store leader every live node agrees on, if any.
    pub fn leader(&self) -> Option<NodeId> {
        let live = self.live();
        let leader = self.node(live[0]).core().leader()?;
        let agreed = live
            .iter()
            .all(|&id| self.node(id).core().leader() == Some(leader));
        (agreed && self.alive(leader)).then_some(leader)
    }

    /// Every live node knows view `number` (or a later one) of `GROUP`.
    pub fn all_live_at(&self, number: u64) -> bool {
        self.live()
            .iter()
            .all(|&id| self.node(id).view().number >= number)
    }

    /// Every view number of `GROUP` applied anywhere so far, with its view.
    pub fn history(&self) -> BTreeMap<u64, View> {
        self.history_of(GROUP)
    }

    pub fn history_of(&self, group: GroupId) -> BTreeMap<u64, View> {
        self.applied
            .iter()
            .filter(|((of, _), _)| *of == group)
            .map(|(&(_, number), view)| (number, view.clone()))
            .collect()
    }

    // ---- faults and inputs ----

    /// What `GROUP`'s data plane on `id` received.
    pub fn set_lsn(&mut self, id: NodeId, lsn: u64) {
        self.plane_mut(id, GROUP).lsn_received = lsn;
    }

    pub fn cut_link(&mut self, a: NodeId, b: NodeId) {
        self.cut.insert((a.min(b), a.max(b)));
    }

    /// Cuts every link of `id`.
    pub fn isolate(&mut self, id: NodeId) {
        for other in self.nodes.keys().copied().collect::<Vec<_>>() {
            if other != id {
                self.cut_link(id, other);
            }
        }
    }

    pub fn heal(&mut self) {
        self.cut.clear();
    }

    /// The node stops; its unsaved state and the messages addressed to it are lost.
    pub fn crash(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap();
        assert!(node.core.take().is_some(), "node {id} was up");
        for plane in node.planes.values_mut() {
            plane.pending_freeze = None;
        }
        self.queue.retain(|&(_, to, _)| to != id);
    }

    /// The node starts again from its disk, with its memory gone but records up to `lsn` of
    /// view `view`'s history rebuilt from its write-ahead log (as the runtime's supervisor
    /// tells the core: `Cluster::restarted_with`).
    pub fn restart_rebuilt(&mut self, id: NodeId, lsn: u64, view: u64) {
        let node = self.nodes.get_mut(&id).unwrap();
        let persisted = node.disk.load().expect("the image decodes");
        let mut core = Cluster::new(node.settings.clone(), self.initial.clone(), persisted)
            .expect("a node restarts from its disk");
        core.set_serving(GROUP, false);
        core.restarted_with(GROUP, tandem_cluster::Rebuilt { lsn, view });
        assert!(node.core.replace(core).is_none(), "node {id} was down");
        node.incarnation += 1;
        let plane = node.planes.get_mut(&GROUP).unwrap();
        plane.lost_memory = true;
        plane.rebuilt = Some((lsn, view));
        plane.reported_rebuilt = None;
        plane.lsn_received = lsn;
        self.drive(id);
        self.check();
    }

    /// The node starts again from its disk, with its memory (its records of every group)
    /// gone.
    pub fn restart(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap();
        let persisted = node.disk.load().expect("the image decodes");
        let mut core = Cluster::new(node.settings.clone(), self.initial.clone(), persisted)
            .expect("a node restarts from its disk");
        for (&group, plane) in &mut node.planes {
            plane.lost_memory = true;
            plane.rebuilt = None;
            plane.reported_rebuilt = None;
            // As the runtime: a node without its memory runs no role.
            core.set_serving(group, false);
        }
        assert!(node.core.replace(core).is_none(), "node {id} was down");
        node.incarnation += 1;
        self.drive(id);
        self.check();
    }

    /// From now on the primary's data plane prepares no removal, as when no other backup
    /// holds every record a reply was released for (`Primary::prepare_removal` says `None`).
    /// The executor of `id` is stuck in one call from now on: it reports no progress.
    pub fn stick_executor(&mut self, id: NodeId) {
        self.plane_mut(id, GROUP).executor_stuck = true;
    }

    /// Node `id`'s data plane says whether it is in a long call (a script).
    pub fn long_call(&mut self, id: NodeId, running: bool) {
        let node = self.nodes.get_mut(&id).unwrap();
        node.core
            .as_mut()
            .expect("running")
            .long_call_running(GROUP, running);
    }

    pub fn refuse_removals(&mut self) {
        self.removals_refused = true;
    }

    /// The primary's data plane prepares removals again.
    pub fn allow_removals(&mut self) {
        self.removals_refused = false;
    }

    pub fn stall_freeze(&mut self, id: NodeId) {
        self.stall_freeze_in(id, GROUP);
    }

    /// The runtime of `id` is slow to stop accepting `group`'s primary: `frozen` waits until
    /// `release_freeze_in`.
    pub fn stall_freeze_in(&mut self, id: NodeId, group: GroupId) {
        self.plane_mut(id, group).freeze_stalled = true;
    }

    /// The runtime of `id` stopped accepting `GROUP`'s old primary at last.
    pub fn release_freeze(&mut self, id: NodeId) {
        self.release_freeze_in(id, GROUP);
    }

    pub fn release_freeze_in(&mut self, id: NodeId, group: GroupId) {
        let node = self.nodes.get_mut(&id).unwrap();
        let plane = node.planes.get_mut(&group).unwrap();
        plane.freeze_stalled = false;
        if let Some(view) = plane.pending_freeze.take() {
            let lsn = plane.lsn_received;
            node.core
                .as_mut()
                .expect("node is up")
                .frozen(group, view, lsn, view, lsn);
            self.drive(id);
        }
    }

    /// The primary role of `primary` reports that spare `spare` caught up.
    pub fn spare_caught_up(&mut self, primary: NodeId, spare: NodeId) {
        let core = self.core_mut(primary);
        let view = core.view(GROUP).expect("a primary knows its view").number;
        core.spare_caught_up(GROUP, view, spare);
        self.drive(primary);
        self.deliver();
        self.check();
    }

    // ---- the loop ----

    /// One tick: every live node observes its data plane, ticks and is driven; then every
    /// message is delivered; then the checker runs.
    pub fn step(&mut self) {
        self.tick += 1;
        for id in self.live() {
            self.observe(id);
            self.core_mut(id).tick();
            self.drive(id);
        }
        self.deliver();
        self.check();
    }

    pub fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step();
        }
    }

    /// Steps until `done` holds; panics after `ticks_max`. Returns the ticks taken.
    pub fn run_until(&mut self, ticks_max: u64, mut done: impl FnMut(&Harness) -> bool) -> u64 {
        for taken in 0..=ticks_max {
            if done(self) {
                return taken;
            }
            self.step();
        }
        panic!(
            "not reached within {ticks_max} ticks (tick {}): {}",
            self.tick,
            self.describe()
        );
    }

    /// Runs until a config store leader is known to every node and is not the primary.
    pub fn settle(&mut self) -> NodeId {
        self.run_until(200, |h| {
            h.leader()
                .is_some_and(|leader| leader != h.view_of(leader).primary)
        });
        self.leader().unwrap()
    }

    /// Runs until every live node knows the same view and nothing changed for `quiet` ticks.
    pub fn run_until_quiet(&mut self, ticks_max: u64, quiet: u64) -> View {
        let mut last: Option<(View, u64)> = None;
        for _ in 0..=ticks_max {
            let live = self.live();
            let first = self.view_of(live[0]);
            if live.iter().all(|&id| self.view_of(id) == first) {
                match &last {
                    Some((seen, since)) if *seen == first => {
                        if self.tick - since >= quiet {
                            return first;
                        }
                    }
                    _ => last = Some((first, self.tick)),
                }
            } else {
                last = None;
            }
            self.step();
        }
        panic!(
            "no quiet agreement within {ticks_max} ticks: {}",
            self.describe()
        );
    }

    pub fn describe(&self) -> String {
        let mut out = format!("leader {:?}; cut {:?}", self.leader(), self.cut);
        for (&id, node) in &self.nodes {
            let Some(core) = &node.core else {
                out.push_str(&format!("\n  node {id}: down"));
                continue;
            };
            out.push_str(&format!("\n  node {id}: leader {:?}", core.leader()));
            for (group, plane) in &node.planes {
                out.push_str(&format!(
                    "\n    group {group}: view {:?}, frozen {}, freezes {:?}, suspected {:?}",
                    core.view(*group),
                    core.is_frozen(*group),
                    plane.freezes,
                    plane.suspected
                ));
            }
        }
        out
    }

    /// Whether `primary` ships `group` to member `member` and `member` takes it: both alive,
    /// connected, both holding their memory, `primary` primary of its own view listing
    /// `member`, and `member` following `primary` and not frozen.
    fn streams(&self, group: GroupId, primary: NodeId, member: NodeId) -> bool {
        if !self.connected(primary, member) {
            return false;
        }
        let (p, m) = (self.node(primary), self.node(member));
        let (pv, mv) = (p.view_in(group), m.view_in(group));
        let lists = |v: &View| v.backups.contains(&member) || v.spares.contains(&member);
        // A stuck executor's links send no pulses once the core takes it as stuck.
        !p.planes[&group].lost_memory
            && !m.planes[&group].lost_memory
            && !p.core().is_stalled(group)
            && pv.primary == primary
            && lists(pv)
            && mv.primary == primary
            && lists(mv)
            && !m.core().is_frozen(group)
    }

    /// What the data plane of `id` saw since the last tick, group by group.
    fn observe(&mut self, id: NodeId) {
        for group in self.group_ids() {
            let view = self.node(id).view_in(group).clone();
            if view.primary == id && !self.node(id).planes[&group].executor_stuck {
                self.core_mut(id).executor_turned(group);
            }
            if view.primary == id {
                let heard: Vec<NodeId> = view
                    .backups
                    .iter()
                    .chain(&view.spares)
                    .copied()
                    .filter(|&member| self.streams(group, id, member))
                    .collect();
                for member in heard {
                    self.core_mut(id).heard_from_backup(group, member);
                }
            } else if self.streams(group, view.primary, id) {
                self.core_mut(id).heard_from_primary(group);
            }
        }
    }

    /// Takes the node's Ready until it is empty: queues the messages, acts on the events.
    fn drive(&mut self, id: NodeId) {
        loop {
            let node = self.nodes.get_mut(&id).unwrap();
            let Some(core) = node.core.as_mut() else {
                return;
            };
            core.take_ready(&mut node.disk, &mut self.ready)
                .expect("the disk works");
            if self.ready.is_empty() {
                return;
            }
            for (to, message) in self.ready.messages.drain(..) {
                assert_ne!(to, id, "a node handles its own messages");
                self.queue.push_back((id, to, message));
            }
            let events: Vec<(GroupId, ClusterEvent)> = self.ready.events.drain(..).collect();
            for (group, event) in events {
                self.act(id, group, event);
            }
        }
    }

    fn act(&mut self, id: NodeId, group: GroupId, event: ClusterEvent) {
        let removals_refused = self.removals_refused;
        let node = self.nodes.get_mut(&id).unwrap();
        let core = node.core.as_mut().unwrap();
        let plane = node.planes.get_mut(&group).unwrap();
        match event {
            ClusterEvent::Freeze { view } => {
                plane.freezes.push(view);
                if plane.lost_memory {
                    // No backup role: nothing to freeze, nothing to report (as the runtime).
                } else if plane.freeze_stalled {
                    plane.pending_freeze = Some(view);
                } else {
                    let lsn = plane.lsn_received;
                    core.frozen(group, view, lsn, view, lsn);
                }
            }
            ClusterEvent::Suspected { peer, view, .. } => plane.suspected.push((peer, view)),
            ClusterEvent::Reported { rebuilt_by, .. } => {
                if plane.lost_memory && plane.rebuilt.is_some() && rebuilt_by.is_some() {
                    plane.reported_rebuilt = rebuilt_by;
                }
            }
            ClusterEvent::RemovalWanted { .. } if removals_refused => {}
            ClusterEvent::RemovalWanted { view, backup } => {
                // No data plane here: every other backup holds what was released.
                core.ask_removal(group, view, backup, Vec::new(), Vec::new());
            }
            ClusterEvent::View(view) => {
                if plane.lost_memory {
                    // As `RoleRule::decide`: a view made from its report of rebuilt records
                    // is served from them.
                    let made = plane.rebuilt.is_some_and(|(lsn, _)| {
                        tandem_cluster::role::made_from_report(
                            id,
                            plane.reported_rebuilt,
                            lsn,
                            &view,
                        )
                    });
                    plane.lost_memory =
                        !made && tandem_cluster::role::still_restarted(id, true, &view);
                    if made {
                        plane.rebuilt = None;
                        core.set_serving(group, true);
                    }
                    // As the role rule: named but without its memory, it waits to be left
                    // out (`Transition::Wait`).
                    core.set_waiting(group, plane.lost_memory && view.primary != id);
                } else if view.members().any(|member| member == id) {
                    // The runtime loads a fresh segment and catches up (as the role says).
                    core.set_serving(group, true);
                    core.set_waiting(group, false);
                }
                self.record_view(id, group, view);
            }
        }
    }

    fn record_view(&mut self, id: NodeId, group: GroupId, view: View) {
        let node = self.nodes.get_mut(&id).unwrap();
        let incarnation_now = node.incarnation;
        let node = node.planes.get_mut(&group).unwrap();
        if let Some((incarnation, last)) = node.views.last()
            && *incarnation == incarnation_now
        {
            assert!(
                view.number > last.number,
                "node {id} applied view {} after view {}",
                view.number,
                last.number
            );
        }
        match self.applied.get(&(group, view.number)) {
            None => {
                self.applied.insert((group, view.number), view.clone());
            }
            Some(first) => assert_eq!(
                first, &view,
                "node {id} applied a different view {}",
                view.number
            ),
        }
        if view.primary == id
            && let Some(truncate) = view.truncate_lsn()
            && !node.lost_memory
        {
            // What the runtime asserts when it promotes a backup.
            assert!(
                node.lsn_received <= truncate,
                "node {id} promoted holding LSN {} above the truncate LSN {truncate}",
                node.lsn_received
            );
        }
        node.views.push((incarnation_now, view));
    }

    fn deliver(&mut self) {
        for _ in 0..100_000 {
            let Some((from, to, message)) = self.queue.pop_front() else {
                return;
            };
            if !self.connected(from, to) {
                continue;
            }
            self.core_mut(to)
                .step(from, message)
                .expect("members' messages are accepted");
            self.drive(to);
        }
        panic!("the network did not quiesce");
    }

    /// The invariants, checked after every step (views are also checked as they are applied).
    pub fn check(&self) {
        for group in self.group_ids() {
            self.check_group(group);
        }
    }

    fn check_group(&self, group: GroupId) {
        let mut primaries: BTreeMap<u64, NodeId> = BTreeMap::new();
        for id in self.live() {
            let node = self.node(id);
            let current = node.view_in(group);
            let plane = &node.planes[&group];
            let (incarnation, last) = plane.views.last().expect("the first view is an event");
            assert_eq!(*incarnation, node.incarnation);
            assert_eq!(last, current, "node {id}'s view is the last it applied");
            assert_eq!(
                self.applied.get(&(group, current.number)),
                Some(current),
                "node {id}'s view of group {group} agrees with the history"
            );
            if current.primary == id
                && let Some(other) = primaries.insert(current.number, id)
            {
                panic!(
                    "nodes {other} and {id} are both primary of view {} of group {group}",
                    current.number
                );
            }
        }
    }

    /// Records a view as if node `id` had applied it: lets a test show the checker's teeth.
    pub fn plant_view(&mut self, id: NodeId, view: View) {
        self.record_view(id, GROUP, view);
    }

    /// As [`Harness::plant_view`], in `group`.
    pub fn plant_view_in(&mut self, id: NodeId, group: GroupId, view: View) {
        self.record_view(id, group, view);
    }
}
