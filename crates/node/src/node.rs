//! One member of a cluster as one value: its [`Supervisor`] (the cluster core and the role
//! rule) and, in each group it serves in, the role it holds there as values ([`PrimaryHost`],
//! [`BackupRole`]), with the carry-out table ([`crate::carry_out`]) carried out in memory. A
//! role change is a method call, never a thread. A group's role, segment, log and load are
//! its own (a `Plane` each); the core and the peers' liveness are the node's.
//!
//! A driver feeds it inputs (`tick`, `call`, `read`, `step_replication`, a cluster message
//! through [`Node::core_mut`], `peer_closed`, `log_synced`, `log_anchored`,
//! `segment_loaded`, `catch_up_ticks`), each naming its group where it concerns one, and
//! then [`Node::drive`]s it: the supervisor saves, sends and follows each group's committed
//! views. While it handles an input the node calls its [`NodeEnv`] in the order it acts,
//! naming the group of each role it speaks for. A role's turn hands over its log's orders,
//! then its messages, then its answers (a primary's in LSN order): the records a message
//! carries or acknowledges are the log's to hold before anyone hears of them. A tick visits
//! the groups in the core's order.

mod carrier;
mod env;

use std::sync::Arc;

use tandem_cluster::Cluster;
use tandem_config::{Durable, GroupId, View};
use tandem_memory::Segment;
use tandem_redo::{SealedBatch, TailLimits};
use tandem_replication::{Disposition, Message, NodeId, PrimaryConfig, ReceiverConfig, Reply};
use tandem_store::DataModel;

use crate::backup_role::{BackupReady, BackupRole, BackupTurnError, ReadSettings};
use crate::carry_out::Slot;
use crate::log::LogOrder;
use crate::peer_frame::{PeerMessage, RelayedPublication};
use crate::primary::{Observed, Ran};
use crate::primary_host::{PrimaryHost, WaitingCall};
use crate::reads::WaitingRead;
use crate::supervisor::{DriveError, Supervisor};

pub use env::{Carried, Destination, NodeEnv, NodeFailure, PrimaryStarting, RecordsMoved};

/// The role a node holds, as values.
pub type RoleSlot<D, R> = Slot<Box<PrimaryHost<D>>, Box<BackupRole<R>>>;

/// How a node's roles are set up, the same for every view.
#[derive(Clone, Debug)]
pub struct NodeSettings {
    /// A primary role's settings; its view, backups and spares are each view's.
    pub primary: PrimaryConfig,
    /// A backup's receiver repeats a Nack for the same gap after this many ticks.
    pub nack_ticks: u64,
    pub reads: ReadSettings,
    /// Batch bytes a role applies between two checkpoints of its segment.
    pub checkpoint_bytes: u64,
    /// The LSN of the initial database.
    pub lsn_loaded: u64,
    /// How often the model's periodic procedure runs on a primary, if it has one.
    pub periodic_interval_ms: Option<u64>,
    /// Whether the model keeps time: a primary tells it the clock before each call.
    pub model_clock: bool,
    /// The longest reply and redo record a primary's call may make (`usize::MAX`: no
    /// limit): what a frame and a batch carry ([`crate::reply_len_max`],
    /// [`crate::record_len_max`]).
    pub reply_len_max: usize,
    pub record_len_max: usize,
}

/// The segment a node's next role starts from: loaded ahead, since a load takes a while.
#[derive(Debug)]
enum NextSegment {
    None,
    /// The driver loads one off the node's thread ([`NodeEnv::start_load`]).
    Loading,
    Ready(Segment),
    /// Rebuilt from the log at a restart: for the role the records are followed into
    /// (`RoleRule::with_recovered`), never for one that starts from the initial load.
    Recovered(Segment),
}

/// A backup's receipt acks are written before the apply of what they acknowledge only when
/// it holds more than this many bytes of batches (seed 004 §3.2: a 2-safe ack never waits
/// for a long application); a smaller apply's acks leave with the apply's own ack.
const ACKS_WITH_APPLY_BYTES_MAX: usize = 8 << 10;

/// One member of a cluster: see the module.
pub struct Node<D, R> {
    /// The cluster core and the role rule.
    supervisor: Supervisor,
    /// One plane per group the node serves in, in the order of the core's groups.
    planes: Vec<Plane<D, R>>,
}

impl<D, R> std::fmt::Debug for Node<D, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let roles: Vec<_> = self
            .planes
            .iter()
            .map(|plane| {
                let role = match &plane.role {
                    Slot::Outside => "outside",
                    Slot::Primary(_) => "primary",
                    Slot::Backup(_) => "backup",
                };
                (plane.group, role, plane.role_epoch)
            })
            .collect();
        f.debug_struct("Node")
            .field("id", &self.supervisor.node())
            .field("roles", &roles)
            .finish_non_exhaustive()
    }
}

/// Everything of a node's part in one group but its supervisor: what the supervisor's orders
/// for that group are carried out on.
struct Plane<D, R> {
    id: NodeId,
    group: GroupId,
    role: RoleSlot<D, R>,
    /// What the primary role observed, for the cluster core at the end of the input.
    observed: Vec<Observed>,
    /// The segment the node's next role starts from, if one is at hand or loading.
    next: NextSegment,
    /// Whether a segment is ready for a join, when that changed: the core hears it after the
    /// supervisor's drive.
    loaded: Option<bool>,
    /// Bumped with every role the node starts in the group: its links are new connections.
    role_epoch: u64,
    /// The node's settings with the group's own (its id and default safety rule).
    settings: NodeSettings,
    model: Arc<dyn DataModel>,
}

impl<D: Destination, R> Node<D, R> {
    /// A node whose supervisor is `supervisor`, holding no role in any of its core's groups;
    /// `recovered` is what each group's log gave back, `role_epoch` the last role epoch it
    /// used. Each group's roles take `settings` with the group's id and default safety rule.
    pub fn new(
        supervisor: Supervisor,
        settings: NodeSettings,
        model: Arc<dyn DataModel>,
        role_epoch: u64,
        mut recovered: Vec<(GroupId, Segment)>,
    ) -> Node<D, R> {
        let id = supervisor.node();
        let core = supervisor.core();
        let planes = core
            .groups()
            .iter()
            .map(|&group| {
                let mut settings = settings.clone();
                settings.primary.group = group;
                settings.primary.safety = core.safety(group);
                let at = recovered.iter().position(|(of, _)| *of == group);
                let next = at.map_or(NextSegment::None, |at| {
                    NextSegment::Recovered(recovered.swap_remove(at).1)
                });
                Plane {
                    id,
                    group,
                    role: Slot::Outside,
                    observed: Vec::new(),
                    next,
                    loaded: None,
                    role_epoch,
                    settings,
                    model: Arc::clone(&model),
                }
            })
            .collect();
        assert!(
            recovered.is_empty(),
            "node {id}: records recovered for groups it does not serve in: {:?}",
            recovered.iter().map(|(group, _)| group).collect::<Vec<_>>()
        );
        Node { supervisor, planes }
    }

    /// The node with `segment` (the initial database of `group`, loaded) ready for the
    /// group's first role, if no segment is: a driver that loads before the node starts saves
    /// the first role a load.
    pub fn with_segment_ready(mut self, group: GroupId, segment: Segment) -> Node<D, R> {
        let plane = self.plane_mut(group);
        if matches!(plane.next, NextSegment::None) {
            plane.next = NextSegment::Ready(segment);
        }
        self
    }

    pub fn id(&self) -> NodeId {
        self.supervisor.node()
    }

    /// The groups the node serves in, in its core's order.
    pub fn groups(&self) -> &[GroupId] {
        self.supervisor.core().groups()
    }

    /// Whether the node serves in `group`.
    pub fn serves_in(&self, group: GroupId) -> bool {
        self.planes.iter().any(|plane| plane.group == group)
    }

    /// The view of `group`, as the node's cluster core knows it.
    pub fn view(&self, group: GroupId) -> Option<&View> {
        self.supervisor.view(group)
    }

    /// The cluster core and the role rule.
    pub fn supervisor(&self) -> &Supervisor {
        &self.supervisor
    }

    /// The cluster core.
    pub fn core(&self) -> &Cluster {
        self.supervisor.core()
    }

    /// The cluster core, for the inputs the node does not wrap (a cluster message).
    pub fn core_mut(&mut self) -> &mut Cluster {
        self.supervisor.core_mut()
    }

    /// The role the node holds in `group`.
    pub fn role(&self, group: GroupId) -> &RoleSlot<D, R> {
        &self.plane(group).role
    }

    pub fn role_mut(&mut self, group: GroupId) -> &mut RoleSlot<D, R> {
        &mut self.plane_mut(group).role
    }

    /// Every group's role, in the core's order of groups.
    pub fn roles(&self) -> impl Iterator<Item = (GroupId, &RoleSlot<D, R>)> {
        self.planes.iter().map(|plane| (plane.group, &plane.role))
    }

    /// The role epoch of the node's roles in `group`.
    pub fn role_epoch(&self, group: GroupId) -> u64 {
        self.plane(group).role_epoch
    }

    fn plane(&self, group: GroupId) -> &Plane<D, R> {
        self.planes
            .iter()
            .find(|plane| plane.group == group)
            .unwrap_or_else(|| panic!("node {} serves in no group {group}", self.id()))
    }

    fn plane_mut(&mut self, group: GroupId) -> &mut Plane<D, R> {
        let id = self.supervisor.node();
        plane_in(&mut self.planes, group)
            .unwrap_or_else(|| panic!("node {id} serves in no group {group}"))
    }

    /// Replays, into every primary role, `missed` ticks it missed while paused: its lease is
    /// measured against the clock, and a pause does not stop the clock.
    pub fn catch_up_ticks(&mut self, missed: u64) {
        for plane in &mut self.planes {
            if let Slot::Primary(host) = &mut plane.role {
                for _ in 0..missed {
                    host.role_mut().tick();
                }
            }
        }
    }

    /// A tick of the node's clock: the cluster core's and every role's. A role's error ends
    /// the input, after what every role observed reached the core.
    pub fn tick<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        for plane in &self.planes {
            if matches!(plane.role, Slot::Primary(_)) {
                self.supervisor.executor_turned(plane.group);
            }
        }
        self.supervisor.core_mut().tick();
        let mut result = Ok(());
        for plane in &mut self.planes {
            result = plane.tick(env);
            if result.is_err() {
                break;
            }
        }
        self.observe();
        result
    }

    /// Saves, sends and acts on everything the cluster core has produced, then tells it what
    /// the primary roles observed meanwhile, until nothing is left. Call after every input.
    pub fn drive<E: NodeEnv<D, R>>(
        &mut self,
        disk: &mut impl Durable,
        env: &mut E,
    ) -> Result<(), DriveError<E::Error>> {
        loop {
            // The supervisor is driven in place (it is large: moving it out and back cost a
            // copy of it on every message a primary heard).
            let supervisor = &mut self.supervisor;
            let mut roles = carrier::Driving {
                planes: &mut self.planes,
                env,
            };
            let driven = supervisor.drive(disk, &mut roles);
            let mut nothing_new = true;
            for plane in &mut self.planes {
                if let Some(loaded) = plane.loaded.take() {
                    supervisor.core_mut().set_loaded(plane.group, loaded);
                }
                nothing_new &= plane.observed.is_empty();
                for observed in plane.observed.drain(..) {
                    supervisor.observe(plane.group, observed);
                }
            }
            driven?;
            if nothing_new {
                return Ok(());
            }
        }
    }

    /// Tells the cluster core what the primary roles observed.
    fn observe(&mut self) {
        for plane in &mut self.planes {
            for observed in plane.observed.drain(..) {
                self.supervisor.observe(plane.group, observed);
            }
        }
    }

    /// The connection from `peer` closed from its side: a strong sign of a dead process.
    pub fn peer_closed(&mut self, peer: NodeId) {
        self.supervisor.peer_closed(peer);
    }

    /// Whether the node serves clients of `group` as its primary now: it serves in the
    /// group, its role is not deposed and the group's view names it primary of the role's
    /// view.
    pub fn serving<E: NodeEnv<D, R>>(&self, group: GroupId, env: &E) -> bool {
        if !self.serves_in(group) {
            return false;
        }
        let Slot::Primary(host) = &self.plane(group).role else {
            return false;
        };
        if env.ignores_depose() {
            return !host.primary().is_deposed();
        }
        !host.primary().is_deposed()
            && self.view(group).is_some_and(|view| {
                view.number == host.primary().view() && view.primary == self.id()
            })
    }

    /// What a client's greeting in `group` is answered: whether the node serves as the
    /// group's primary, and its view (0 in a group the node does not serve in).
    pub fn welcome<E: NodeEnv<D, R>>(&self, group: GroupId, env: &E) -> (bool, u64) {
        if !self.serves_in(group) {
            return (false, 0);
        }
        match &self.plane(group).role {
            Slot::Primary(host) if self.serving(group, env) => (true, host.primary().view()),
            _ => (false, self.view(group).map_or(0, |view| view.number)),
        }
    }

    /// A client's call in `group`: queued at the group's serving primary and run while flow
    /// control allows; anywhere else answered "not primary".
    pub fn call<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        call: WaitingCall<D>,
        env: &mut E,
    ) -> Result<(), E::Error> {
        if !self.serving(group, env) {
            env.not_primary(call.to);
            return Ok(());
        }
        if let Slot::Primary(host) = &mut self.plane_mut(group).role {
            host.queue(call);
        }
        self.run_queued(group, env)
    }

    /// Calls in `group` queued at its serving primary without running them yet, so that the
    /// calls of many connections share batches: run them with [`Node::run_queued`] once the
    /// inputs at hand are taken. Anywhere else each is answered "not primary".
    pub fn queue_calls<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        calls: impl IntoIterator<Item = WaitingCall<D>>,
        env: &mut E,
    ) {
        if !self.serving(group, env) {
            for call in calls {
                env.not_primary(call.to);
            }
            return;
        }
        if let Slot::Primary(host) = &mut self.plane_mut(group).role {
            for call in calls {
                host.queue(call);
            }
        }
    }

    /// Runs the calls queued at `group`'s primary role while flow control allows, and hands
    /// out what leaves.
    pub fn run_queued<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        env: &mut E,
    ) -> Result<(), E::Error> {
        let Some(plane) = plane_in(&mut self.planes, group) else {
            return Ok(());
        };
        if !matches!(plane.role, Slot::Primary(_)) {
            return Ok(());
        }
        let result = plane.run_queued(env);
        self.observe();
        result
    }

    /// Bytes of a message from peer `from` arrived and the message is not whole yet (a
    /// large batch or transfer): every backup role following `from` hears its primary
    /// meanwhile, as between frames.
    pub fn receiving<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        env: &mut E,
    ) -> Result<(), E::Error> {
        for plane in &mut self.planes {
            let Slot::Backup(backup) = &mut plane.role else {
                continue;
            };
            if from != backup.gate().primary() || !backup.admits(from) {
                continue;
            }
            backup.receiving();
            self.supervisor.core_mut().heard_from_primary(plane.group);
            env.heard_primary(plane.group, from);
            plane.collect_backup(env)?;
        }
        Ok(())
    }

    /// A primary role's connection to member `node` was (re)established: what was in
    /// flight on the old one is lost, and the member introduces itself again, in every
    /// group.
    pub fn link_up(&mut self, node: NodeId) {
        for plane in &mut self.planes {
            if let Slot::Primary(host) = &mut plane.role {
                host.role_mut().link_reset(node);
            }
        }
    }

    /// A client's read in `group`: kept by a backup role for its rule. False if the node
    /// holds no backup role there, or does not serve in the group (the driver refuses the
    /// read).
    pub fn read<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        read: WaitingRead<R, u64>,
        env: &mut E,
    ) -> Result<bool, E::Error> {
        let Some(plane) = plane_in(&mut self.planes, group) else {
            return Ok(false);
        };
        let Slot::Backup(backup) = &mut plane.role else {
            return Ok(false);
        };
        backup.read(read);
        plane.collect_backup(env)?;
        Ok(true)
    }

    /// A replication message of `group`'s stream from peer `from`; dropped if the node
    /// serves in no such group.
    pub fn step_replication<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        group: GroupId,
        message: Message,
        env: &mut E,
    ) -> Result<(), E::Error> {
        let Some(plane) = plane_in(&mut self.planes, group) else {
            env.note(format_args!(
                "node {}: a message of group {group} from node {from}, which it serves in no \
                 such group, dropped",
                self.supervisor.node()
            ));
            return Ok(());
        };
        let heard = match &mut plane.role {
            Slot::Primary(host) => {
                host.role_mut().step(from, message);
                // An ack may lift flow control: the calls that waited run.
                let result = plane.run_queued(env);
                self.observe();
                return result;
            }
            Slot::Backup(backup) => {
                // A frozen backup has closed its primary's links; a stranger's message goes
                // to the receiver, which fences an older view's primary.
                if !backup.admits(from) {
                    return Ok(());
                }
                from == backup.gate().primary()
            }
            Slot::Outside => return Ok(()),
        };
        // What the log synced first, as the runtime's receiver loop before each read.
        plane.hears_synced(env);
        let Slot::Backup(backup) = &mut plane.role else {
            unreachable!("matched above");
        };
        backup.step(from, message);
        if heard {
            self.supervisor.core_mut().heard_from_primary(group);
            env.heard_primary(group, from);
        }
        plane.collect_backup(env)
    }

    /// A pub/sub message published on this node, which `group`'s primary relays to every
    /// other member of its view (backups and spares), tagged with its last committed LSN:
    /// they deliver it once they applied that far. A node in another role relays nothing
    /// (its subscribers alone hear what is published on it, as on a Redis replica).
    pub fn relay_publication<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        shard: bool,
        channel: &[u8],
        message: &[u8],
        env: &mut E,
    ) {
        let Slot::Primary(host) = &self.plane(group).role else {
            return;
        };
        let primary = host.primary();
        if primary.is_deposed() || primary.newer_view().is_some() {
            return;
        }
        let publication = RelayedPublication {
            group,
            view: primary.view(),
            lsn: primary.lsn_committed(),
            shard,
            channel: channel.to_vec(),
            message: message.to_vec(),
        };
        let members: Vec<NodeId> = primary.backup_progress().map(|(node, ..)| node).collect();
        for member in members {
            env.send(member, PeerMessage::Publication(publication.clone()));
        }
    }

    /// A pub/sub message peer `from` relayed: a backup of `from`'s view of the message's
    /// group holds it until it applied the message's LSN, then hands it to the driver
    /// ([`NodeEnv::relayed`]); any other node drops it (a message is never kept for later).
    pub fn step_publication<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        publication: RelayedPublication,
        env: &mut E,
    ) {
        let group = publication.group;
        let Some(plane) = plane_in(&mut self.planes, group) else {
            return;
        };
        let Slot::Backup(backup) = &mut plane.role else {
            return;
        };
        let gate = backup.gate();
        if gate.is_frozen() || gate.primary() != from || gate.view() != publication.view {
            return;
        }
        if !backup.hold_relayed(publication) {
            env.relayed_dropped();
        }
        plane.deliver_relayed(env);
    }

    /// `group`'s log synced up to `lsn` (its listener): the primary role hears it; a backup
    /// acks it to its primary at once.
    pub fn log_synced<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        lsn: u64,
        env: &mut E,
    ) -> Result<(), E::Error> {
        let result = self.plane_mut(group).log_synced(lsn, env);
        self.observe();
        result
    }

    /// The load of `group` that [`NodeEnv::start_load`] began has ended: its segment is the
    /// group's next role's (a load the node no longer waits for is dropped). Drive the node
    /// afterwards.
    pub fn segment_loaded<E: NodeEnv<D, R>>(
        &mut self,
        group: GroupId,
        loaded: Result<Segment, E::LoadError>,
        env: &mut E,
    ) {
        let plane = self.plane_mut(group);
        if !matches!(plane.next, NextSegment::Loading) {
            return;
        }
        plane.next = match loaded {
            Ok(segment) => NextSegment::Ready(segment),
            Err(err) => {
                // The next role that needs a segment loads one itself.
                env.note(format_args!(
                    "node {}: cannot load a segment of group {group}: {err}",
                    plane.id
                ));
                NextSegment::None
            }
        };
        plane.loaded = Some(true);
    }

    /// A checkpoint `group`'s log finished made `lsn` durable: the role hears it at its next
    /// step.
    pub fn log_anchored<E: NodeEnv<D, R>>(&mut self, group: GroupId, lsn: u64, env: &mut E) {
        self.plane_mut(group).log_anchored(lsn, env);
    }
}

impl<D: Destination, R> Plane<D, R> {
    /// A tick of the role: a primary runs its periodic procedure if due and the calls that
    /// wait; a backup expires what waited too long.
    fn tick<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        match &mut self.role {
            Slot::Primary(host) => {
                host.role_mut().tick();
                self.run_periodic(env)?;
                self.drain_queue(env)?;
                self.collect_primary(env)
            }
            Slot::Backup(backup) => {
                backup.tick();
                self.collect_backup(env)
            }
            Slot::Outside => Ok(()),
        }
    }

    /// Runs the calls waiting while flow control allows, ships what is open, and hands out
    /// what leaves.
    fn run_queued<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        self.drain_queue(env)?;
        if let Slot::Primary(host) = &mut self.role {
            // The queue has run dry or stalls: ship what is open.
            host.role_mut().flush();
        }
        self.collect_primary(env)
    }

    /// Runs the calls waiting at the primary role, in arrival order, while flow control
    /// allows.
    fn drain_queue<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let time_ms = env.now_ms();
        loop {
            let Slot::Primary(host) = &mut self.role else {
                return Ok(());
            };
            let Some(front) = host.front_mut() else {
                return Ok(());
            };
            let proc_id = front.proc_id;
            // A planted bug runs the call with other words this once: a stalled call keeps
            // its own, as it waits.
            let own = env.rewrite_call(self.group, front).map(|(proc_id, args)| {
                let proc_id = std::mem::replace(&mut front.proc_id, proc_id);
                (proc_id, std::mem::replace(&mut front.args, args))
            });
            env.running(self.group, front, time_ms);
            if self.settings.model_clock {
                host.role_mut().set_time_ms(time_ms);
            }
            let ran = host.run_next().expect("a call waits");
            if ran == Ran::Stalled {
                if let Some((proc_id, args)) = own {
                    let front = host.front_mut().expect("a stalled call keeps its place");
                    front.proc_id = proc_id;
                    front.args = args;
                }
                return Ok(());
            }
            env.ran(self.group, host, proc_id, &ran, time_ms)?;
        }
    }

    /// Runs the model's periodic procedure (the Redis model's expiry sweep) if it is due; a
    /// sweep that found nothing to delete takes no LSN.
    fn run_periodic<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let Some(interval_ms) = self.settings.periodic_interval_ms else {
            return Ok(());
        };
        let now_ms = env.now_ms();
        let Slot::Primary(host) = &mut self.role else {
            return Ok(());
        };
        if host
            .run_periodic_if_due(now_ms, interval_ms, D::periodic())
            .is_none()
        {
            return Ok(());
        }
        host.role_mut().flush();
        env.swept(self.group, host, now_ms)
    }

    /// Hands out what leaves the primary role, in this order: the log's orders, the
    /// messages, the answers (each sent, withheld or told "not primary"), what it observed.
    fn collect_primary<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let Slot::Primary(host) = &mut self.role else {
            return Ok(());
        };
        // Released under a lease that ran out before it could leave: held until the lease
        // holds again.
        let mut ready = host.collect(host.primary().tick_count());
        // The log first: the batches' records are the node's from now on.
        for batch in ready.replication.to_log.drain(..) {
            let lsn_from = batch.lsn_base();
            if let Some(lsn) = env.log_order(self.group, LogOrder::Batch { batch, lsn_from }) {
                host.role_mut().log_synced(lsn);
                env.synced_heard(self.group, self.id, lsn);
            }
        }
        if let Some(lsn) = ready.replication.sync_wanted.take()
            && let Some(lsn) = env.log_order(self.group, LogOrder::SyncWanted { lsn })
        {
            host.role_mut().log_synced(lsn);
            env.synced_heard(self.group, self.id, lsn);
        }
        env.leaving(self.group, host, &mut ready);
        let tick_now = host.primary().tick_count();
        for (to, message) in ready.replication.messages.drain(..) {
            let group = self.group;
            env.send(to, PeerMessage::Replication { group, message });
        }
        for disposition in ready.drain_replies(tick_now) {
            match disposition {
                Disposition::Send(reply) => release(self.group, host, reply, env)?,
                Disposition::Withhold(reply) if !reply.reply.to.is_periodic() => {
                    env.withheld(reply.reply.to);
                }
                Disposition::NotPrimary(reply) if !reply.reply.to.is_periodic() => {
                    env.not_primary(reply.reply.to);
                }
                // The primary's own periodic procedure answers nobody.
                Disposition::Withhold(_) | Disposition::NotPrimary(_) => {}
            }
        }
        self.observed.append(&mut ready.observed);
        self.checkpoint_step(env);
        // The buffers go back for the next collection (capacity kept).
        if let Slot::Primary(host) = &mut self.role {
            host.recycle(ready);
        }
        Ok(())
    }

    /// A turn of the backup role: what it applied checked, then what its log must hold
    /// ordered, what it sends sent and what it answered answered.
    fn collect_backup<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let Slot::Backup(backup) = &mut self.role else {
            return Ok(());
        };
        let mut ready = BackupReady::default();
        // The receiver's acks are handed out before the batches they acknowledge are
        // applied, and before a long apply the driver is told to write them at once.
        backup.receive(env.now_us(), &mut ready);
        let acks = !ready.messages.is_empty();
        send_backup_ready(backup, &mut ready, env);
        // A small apply takes microseconds: its acks may leave with its own ack, in one
        // write, rather than cost a write and the primary a wake-up of their own.
        if acks && backup.bytes_to_apply() > ACKS_WITH_APPLY_BYTES_MAX {
            env.acks_sent();
        }
        let turned = backup.apply_received(env.now_us(), &*self.model, env, &mut ready);
        turned.map_err(|err| match err {
            BackupTurnError::Apply(err) => env.failure(NodeFailure::Apply(err)),
            BackupTurnError::Install(err) => env.failure(NodeFailure::Install(err)),
            BackupTurnError::Watch(err) => err,
        })?;
        env.backup_holds(
            self.group,
            backup.gate().primary(),
            backup.receiver().core().lsn_received(),
            backup.applier().lsn_applied(),
        );
        send_backup_ready(backup, &mut ready, env);
        for (to, seq, answer) in ready.answers.drain(..) {
            env.read_answered(to, seq, answer)?;
        }
        self.checkpoint_step(env);
        if let (Some(lsn_before), Slot::Backup(backup)) = (ready.applied_from, &self.role) {
            env.backup_applied(self.group, backup, lsn_before)?;
        }
        self.deliver_relayed(env);
        Ok(())
    }

    /// Hands the driver the relayed pub/sub messages the backup role has applied far enough
    /// for.
    fn deliver_relayed<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let Slot::Backup(backup) = &mut self.role else {
            return;
        };
        let mut applied = Vec::new();
        backup.take_relayed_applied(&mut applied);
        for publication in applied {
            env.relayed(publication);
        }
    }

    /// Ends every read waiting at the backup role and applies the batches held back for
    /// them.
    fn release_held<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let Slot::Backup(backup) = &mut self.role else {
            return Ok(());
        };
        if !backup.has_reads_or_held() {
            return Ok(());
        }
        backup.expire_reads(env.now_us());
        self.collect_backup(env)
    }

    /// Hands the log an order; a checkpoint that made more durable at once is heard.
    fn log_order<E: NodeEnv<D, R>>(&mut self, order: LogOrder, env: &mut E) {
        if let Some(lsn) = env.log_order(self.group, order) {
            self.log_anchored(lsn, env);
        }
    }

    /// One step of the role's checkpoint, between its turns: it begins one when it is due
    /// (or the log is not anchored) and hands the log a chunk of the one under way.
    fn checkpoint_step<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let wanted = env.wants_checkpoint(self.group);
        let mut orders = Vec::new();
        match &mut self.role {
            Slot::Primary(host) => host.role_mut().checkpoint_step(wanted, &mut orders),
            Slot::Backup(backup) => backup.applier_mut().checkpoint_step(wanted, &mut orders),
            Slot::Outside => {}
        }
        for order in orders {
            self.log_order(order, env);
        }
    }

    /// The log's listener: the primary role hears `log_synced`; a backup acks to its primary
    /// at once.
    fn log_synced<E: NodeEnv<D, R>>(&mut self, lsn: u64, env: &mut E) -> Result<(), E::Error> {
        match &mut self.role {
            Slot::Primary(host) => {
                host.role_mut().log_synced(lsn);
                env.synced_heard(self.group, self.id, lsn);
                self.collect_primary(env)
            }
            Slot::Backup(backup) => {
                if backup.gate().is_frozen() {
                    // A frozen backup has closed its primary's links.
                    return Ok(());
                }
                // The receiver keeps what this ack tells: a view change asks the backup what
                // its acks said its log synced, and its log may fail before the receiver's
                // next message would have heard it (k-of-n seed 1251240: the primary
                // released an LSN on this ack, the log failed, and the backup reported one
                // less, which became the promotion's released bound).
                backup.synced(lsn);
                let primary = backup.gate().primary();
                let ack =
                    Message::durable_ack(backup.gate().view(), lsn, backup.applier().lsn_applied());
                env.synced_heard(self.group, primary, lsn);
                let group = self.group;
                env.send(
                    primary,
                    PeerMessage::Replication {
                        group,
                        message: ack,
                    },
                );
                Ok(())
            }
            Slot::Outside => Ok(()),
        }
    }

    /// What a finished checkpoint made durable, heard at the role's next step (as the
    /// runtime's log thread publishes after a checkpoint).
    fn log_anchored<E: NodeEnv<D, R>>(&mut self, lsn: u64, env: &mut E) {
        match &mut self.role {
            Slot::Primary(host) => {
                host.role_mut().log_synced(lsn);
                env.synced_heard(self.group, self.id, lsn);
            }
            Slot::Backup(_) => self.hears_synced(env),
            Slot::Outside => {}
        }
    }

    /// A role just started hears from its log: a primary that the log syncs and what is
    /// durable already; a backup's receiver the durable LSN its acks may claim.
    fn log_listen<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let lsn = env.lsn_durable(self.group);
        match &mut self.role {
            Slot::Primary(host) => {
                host.role_mut().set_keeps_log(true);
                if lsn > 0 {
                    host.role_mut().log_synced(lsn);
                    env.synced_heard(self.group, self.id, lsn);
                }
            }
            Slot::Backup(_) => self.hears_synced(env),
            Slot::Outside => {}
        }
    }

    /// A backup's receiver learns what its log synced before it takes the next message.
    fn hears_synced<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let lsn = env.lsn_durable(self.group);
        let Slot::Backup(backup) = &mut self.role else {
            return;
        };
        backup.synced(lsn);
        if lsn > 0 {
            env.synced_heard(self.group, backup.gate().primary(), lsn);
        }
    }

    /// A retained tail's limits, a primary's and a backup's alike.
    fn tail_limits(&self) -> TailLimits {
        self.settings.primary.tail
    }

    /// A primary role's settings in `view`.
    fn primary_config(&self, view: &View) -> PrimaryConfig {
        PrimaryConfig {
            view: view.number,
            backups: view.backups.clone(),
            spares: view.spares.clone(),
            ..self.settings.primary.clone()
        }
    }

    /// A backup's receiver's settings in `view`.
    fn receiver_config(&self, view: &View) -> ReceiverConfig {
        ReceiverConfig {
            group: self.settings.primary.group,
            view: view.number,
            primary: view.primary,
            nack_ticks: self.settings.nack_ticks,
        }
    }

    /// A backup role of `view` on `segment`, keeping `tail`, the batches a handed-over
    /// applier retained.
    fn backup_on_tail(
        &self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
    ) -> RoleSlot<D, R> {
        let question_first = question_first(self.role_epoch + 1);
        // A segment that traces its writes for a passive backup (a passive group's, loaded
        // so) makes a passive backup: its mirror starts from the segment's image.
        let role = match segment.passive_layout() {
            Some(layout) => BackupRole::passive(
                self.receiver_config(view),
                &segment,
                layout,
                self.tail_limits(),
                self.settings.reads,
                question_first,
            ),
            None => BackupRole::on_segment(
                self.receiver_config(view),
                segment,
                tail,
                self.tail_limits(),
                self.settings.reads,
                question_first,
            ),
        };
        Slot::Backup(Box::new(role))
    }
}

/// The plane of `group` among a node's `planes`, if the node serves in it.
fn plane_in<D, R>(planes: &mut [Plane<D, R>], group: GroupId) -> Option<&mut Plane<D, R>> {
    planes.iter_mut().find(|plane| plane.group == group)
}

/// Hands the log the orders in `ready`, then sends its messages: a backup acknowledges only
/// what its log was told to hold.
fn send_backup_ready<D: Destination, R, E: NodeEnv<D, R>>(
    backup: &mut BackupRole<R>,
    ready: &mut BackupReady<R>,
    env: &mut E,
) {
    let group = backup.group();
    for order in ready.to_log.drain(..) {
        if let Some(lsn) = env.log_order(group, order) {
            backup.synced(lsn);
            env.synced_heard(group, backup.gate().primary(), lsn);
        }
    }
    for (to, message) in ready.messages.drain(..) {
        env.send(to, PeerMessage::Replication { group, message });
    }
}

/// Sends an answer the primary role released (the periodic procedure's goes nowhere).
fn release<D: Destination, R, E: NodeEnv<D, R>>(
    group: GroupId,
    host: &PrimaryHost<D>,
    reply: Reply<crate::primary::Answer<D>>,
    env: &mut E,
) -> Result<(), E::Error> {
    if reply.reply.to.is_periodic() {
        return Ok(());
    }
    env.release(group, host, reply)
}

/// The first `ReadIndex` question of the role of epoch `role_epoch`: a role's questions never
/// repeat an earlier role's.
fn question_first(role_epoch: u64) -> u64 {
    (role_epoch << 32) + 1
}
