//! One member of a cluster as one value: its [`Supervisor`] (the cluster core and the role
//! rule) and the role it holds as values ([`PrimaryHost`], [`BackupRole`]), with the
//! carry-out table ([`crate::carry_out`]) carried out in memory. A role change is a method
//! call, never a thread.
//!
//! A driver feeds it inputs (`tick`, `call`, `read`, `step_replication`, a cluster message
//! through [`Node::core_mut`], `peer_closed`, `log_synced`, `log_anchored`,
//! `segment_loaded`, `catch_up_ticks`) and then [`Node::drive`]s it: the supervisor saves,
//! sends and follows each committed view. While it handles an input the node calls its
//! [`NodeEnv`] in the order it acts. A role's turn hands over its log's orders, then its
//! messages, then its answers (a primary's in LSN order): the records a message carries or
//! acknowledges are the log's to hold before anyone hears of them.

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
    plane: Plane<D, R>,
}

impl<D, R> std::fmt::Debug for Node<D, R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let role = match &self.plane.role {
            Slot::Outside => "outside",
            Slot::Primary(_) => "primary",
            Slot::Backup(_) => "backup",
        };
        f.debug_struct("Node")
            .field("id", &self.plane.id)
            .field("role", &role)
            .field("role_epoch", &self.plane.role_epoch)
            .finish_non_exhaustive()
    }
}

/// Everything of a node but its supervisor: what the supervisor's orders are carried out on.
struct Plane<D, R> {
    id: NodeId,
    /// The group whose roles the node holds: one for now (docs/many-groups.md).
    group: GroupId,
    role: RoleSlot<D, R>,
    /// What the primary role observed, for the cluster core at the end of the input.
    observed: Vec<Observed>,
    /// The segment the node's next role starts from, if one is at hand or loading.
    next: NextSegment,
    /// Whether a segment is ready for a join, when that changed: the core hears it after the
    /// supervisor's drive.
    loaded: Option<bool>,
    /// Bumped with every role the node starts: its links are new connections.
    role_epoch: u64,
    settings: NodeSettings,
    model: Arc<dyn DataModel>,
}

impl<D: Destination, R> Node<D, R> {
    /// A node whose supervisor is `supervisor`, holding no role; `recovered` is what its log
    /// gave back, `role_epoch` the last role epoch it used.
    pub fn new(
        supervisor: Supervisor,
        settings: NodeSettings,
        model: Arc<dyn DataModel>,
        role_epoch: u64,
        recovered: Option<Segment>,
    ) -> Node<D, R> {
        let id = supervisor.node();
        let &[group] = supervisor.core().groups() else {
            panic!(
                "a node holds one group's roles for now, not {:?}",
                supervisor.core().groups()
            );
        };
        Node {
            supervisor,
            plane: Plane {
                id,
                group,
                role: Slot::Outside,
                observed: Vec::new(),
                next: recovered.map_or(NextSegment::None, NextSegment::Recovered),
                loaded: None,
                role_epoch,
                settings,
                model,
            },
        }
    }

    /// The node with `segment` (the initial database, loaded) ready for its first role, if
    /// no segment is: a driver that loads before the node starts saves the first role a load.
    pub fn with_segment_ready(mut self, segment: Segment) -> Node<D, R> {
        if matches!(self.plane.next, NextSegment::None) {
            self.plane.next = NextSegment::Ready(segment);
        }
        self
    }

    pub fn id(&self) -> NodeId {
        self.plane.id
    }

    /// The group whose roles the node holds.
    pub fn group(&self) -> GroupId {
        self.plane.group
    }

    /// The view of the node's group, as its cluster core knows it.
    pub fn view(&self) -> Option<&View> {
        self.supervisor.view(self.plane.group)
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

    pub fn role(&self) -> &RoleSlot<D, R> {
        &self.plane.role
    }

    pub fn role_mut(&mut self) -> &mut RoleSlot<D, R> {
        &mut self.plane.role
    }

    pub fn role_epoch(&self) -> u64 {
        self.plane.role_epoch
    }

    /// Replays, into a primary's role, `missed` ticks it missed while paused: its lease is
    /// measured against the clock, and a pause does not stop the clock.
    pub fn catch_up_ticks(&mut self, missed: u64) {
        if let Slot::Primary(host) = &mut self.plane.role {
            for _ in 0..missed {
                host.role_mut().tick();
            }
        }
    }

    /// A tick of the node's clock: the cluster core's and the role's.
    pub fn tick<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let primary = matches!(self.plane.role, Slot::Primary(_));
        let supervisor = &mut self.supervisor;
        if primary {
            supervisor.executor_turned(self.plane.group);
        }
        supervisor.core_mut().tick();
        let result = self.plane.tick(env);
        self.observe();
        result
    }

    /// Saves, sends and acts on everything the cluster core has produced, then tells it what
    /// the primary role observed meanwhile, until nothing is left. Call after every input.
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
                plane: &mut self.plane,
                env,
            };
            let driven = supervisor.drive(disk, &mut roles);
            if let Some(loaded) = self.plane.loaded.take() {
                supervisor.core_mut().set_loaded(self.plane.group, loaded);
            }
            let nothing_new = self.plane.observed.is_empty();
            for observed in self.plane.observed.drain(..) {
                supervisor.observe(self.plane.group, observed);
            }
            driven?;
            if nothing_new {
                return Ok(());
            }
        }
    }

    /// Tells the cluster core what the primary role observed.
    fn observe(&mut self) {
        for observed in self.plane.observed.drain(..) {
            self.supervisor.observe(self.plane.group, observed);
        }
    }

    /// The connection from `peer` closed from its side: a strong sign of a dead process.
    pub fn peer_closed(&mut self, peer: NodeId) {
        self.supervisor.peer_closed(peer);
    }

    /// Whether the node serves clients as primary now: its role is not deposed and its view
    /// names it primary of the role's view.
    pub fn serving<E: NodeEnv<D, R>>(&self, env: &E) -> bool {
        let Slot::Primary(host) = &self.plane.role else {
            return false;
        };
        if env.ignores_depose() {
            return !host.primary().is_deposed();
        }
        !host.primary().is_deposed()
            && self.view().is_some_and(|view| {
                view.number == host.primary().view() && view.primary == self.plane.id
            })
    }

    /// What a client's greeting is answered: whether the node serves as primary, and its
    /// view.
    pub fn welcome<E: NodeEnv<D, R>>(&self, env: &E) -> (bool, u64) {
        match &self.plane.role {
            Slot::Primary(host) if self.serving(env) => (true, host.primary().view()),
            _ => (false, self.view().map_or(0, |view| view.number)),
        }
    }

    /// A client's call: queued at a serving primary and run while flow control allows;
    /// anywhere else answered "not primary".
    pub fn call<E: NodeEnv<D, R>>(
        &mut self,
        call: WaitingCall<D>,
        env: &mut E,
    ) -> Result<(), E::Error> {
        if !self.serving(env) {
            env.not_primary(call.to);
            return Ok(());
        }
        if let Slot::Primary(host) = &mut self.plane.role {
            host.queue(call);
        }
        let result = self.plane.run_queued(env);
        self.observe();
        result
    }

    /// Calls queued at a serving primary without running them yet, so that the calls of
    /// many connections share batches: run them with [`Node::run_queued`] once the inputs
    /// at hand are taken. Anywhere else each is answered "not primary".
    pub fn queue_calls<E: NodeEnv<D, R>>(
        &mut self,
        calls: impl IntoIterator<Item = WaitingCall<D>>,
        env: &mut E,
    ) {
        if !self.serving(env) {
            for call in calls {
                env.not_primary(call.to);
            }
            return;
        }
        if let Slot::Primary(host) = &mut self.plane.role {
            for call in calls {
                host.queue(call);
            }
        }
    }

    /// Runs the calls queued at the primary role while flow control allows, and hands out
    /// what leaves.
    pub fn run_queued<E: NodeEnv<D, R>>(&mut self, env: &mut E) -> Result<(), E::Error> {
        let result = self.plane.run_queued(env);
        self.observe();
        result
    }

    /// Bytes of a message from peer `from` arrived and the message is not whole yet (a
    /// large batch or transfer): a backup's primary is heard meanwhile, as between frames.
    pub fn receiving<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        env: &mut E,
    ) -> Result<(), E::Error> {
        let Slot::Backup(backup) = &mut self.plane.role else {
            return Ok(());
        };
        if from != backup.gate().primary() || !backup.admits(from) {
            return Ok(());
        }
        backup.receiving();
        let group = self.plane.group;
        self.core_mut().heard_from_primary(group);
        env.heard_primary(from);
        self.plane.collect_backup(env)
    }

    /// A primary role's connection to member `node` was (re)established: what was in
    /// flight on the old one is lost, and the member introduces itself again.
    pub fn link_up(&mut self, node: NodeId) {
        if let Slot::Primary(host) = &mut self.plane.role {
            host.role_mut().link_reset(node);
        }
    }

    /// A client's read: kept by a backup role for its rule. False if the node holds no
    /// backup role (the driver refuses the read).
    pub fn read<E: NodeEnv<D, R>>(
        &mut self,
        read: WaitingRead<R, u64>,
        env: &mut E,
    ) -> Result<bool, E::Error> {
        let Slot::Backup(backup) = &mut self.plane.role else {
            return Ok(false);
        };
        backup.read(read);
        self.plane.collect_backup(env)?;
        Ok(true)
    }

    /// A replication message from peer `from`.
    pub fn step_replication<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        message: Message,
        env: &mut E,
    ) -> Result<(), E::Error> {
        let heard = match &mut self.plane.role {
            Slot::Primary(host) => {
                host.role_mut().step(from, message);
                // An ack may lift flow control: the calls that waited run.
                let result = self.plane.run_queued(env);
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
        self.plane.hears_synced(env);
        let Slot::Backup(backup) = &mut self.plane.role else {
            unreachable!("matched above");
        };
        backup.step(from, message);
        if heard {
            let group = self.plane.group;
            self.core_mut().heard_from_primary(group);
            env.heard_primary(from);
        }
        self.plane.collect_backup(env)
    }

    /// A pub/sub message published on this node, which a primary relays to every other
    /// member of its view (backups and spares), tagged with its last committed LSN: they
    /// deliver it once they applied that far. A node in another role relays nothing (its
    /// subscribers alone hear what is published on it, as on a Redis replica).
    pub fn relay_publication<E: NodeEnv<D, R>>(
        &mut self,
        shard: bool,
        channel: &[u8],
        message: &[u8],
        env: &mut E,
    ) {
        let Slot::Primary(host) = &self.plane.role else {
            return;
        };
        let primary = host.primary();
        if primary.is_deposed() || primary.newer_view().is_some() {
            return;
        }
        let publication = RelayedPublication {
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

    /// A pub/sub message peer `from` relayed: a backup of `from`'s view holds it until it
    /// applied the message's LSN, then hands it to the driver ([`NodeEnv::relayed`]); any
    /// other node drops it (a message is never kept for later).
    pub fn step_publication<E: NodeEnv<D, R>>(
        &mut self,
        from: NodeId,
        publication: RelayedPublication,
        env: &mut E,
    ) {
        let Slot::Backup(backup) = &mut self.plane.role else {
            return;
        };
        let gate = backup.gate();
        if gate.is_frozen() || gate.primary() != from || gate.view() != publication.view {
            return;
        }
        if !backup.hold_relayed(publication) {
            env.relayed_dropped();
        }
        self.plane.deliver_relayed(env);
    }

    /// The log synced up to `lsn` (its listener): the primary role hears it; a backup acks it
    /// to its primary at once.
    pub fn log_synced<E: NodeEnv<D, R>>(&mut self, lsn: u64, env: &mut E) -> Result<(), E::Error> {
        let result = self.plane.log_synced(lsn, env);
        self.observe();
        result
    }

    /// The load [`NodeEnv::start_load`] began has ended: its segment is the next role's (a
    /// load the node no longer waits for is dropped). Drive the node afterwards.
    pub fn segment_loaded<E: NodeEnv<D, R>>(
        &mut self,
        loaded: Result<Segment, E::LoadError>,
        env: &mut E,
    ) {
        let plane = &mut self.plane;
        if !matches!(plane.next, NextSegment::Loading) {
            return;
        }
        plane.next = match loaded {
            Ok(segment) => NextSegment::Ready(segment),
            Err(err) => {
                // The next role that needs a segment loads one itself.
                env.note(format_args!(
                    "node {}: cannot load a segment: {err}",
                    plane.id
                ));
                NextSegment::None
            }
        };
        plane.loaded = Some(true);
    }

    /// A checkpoint the log finished made `lsn` durable: the role hears it at its next step.
    pub fn log_anchored<E: NodeEnv<D, R>>(&mut self, lsn: u64, env: &mut E) {
        self.plane.log_anchored(lsn, env);
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
            let own = env.rewrite_call(front).map(|(proc_id, args)| {
                let proc_id = std::mem::replace(&mut front.proc_id, proc_id);
                (proc_id, std::mem::replace(&mut front.args, args))
            });
            env.running(front, time_ms);
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
            env.ran(host, proc_id, &ran, time_ms)?;
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
        env.swept(host, now_ms)
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
            if let Some(lsn) = env.log_order(LogOrder::Batch { batch, lsn_from }) {
                host.role_mut().log_synced(lsn);
                env.synced_heard(self.id, lsn);
            }
        }
        if let Some(lsn) = ready.replication.sync_wanted.take()
            && let Some(lsn) = env.log_order(LogOrder::SyncWanted { lsn })
        {
            host.role_mut().log_synced(lsn);
            env.synced_heard(self.id, lsn);
        }
        env.leaving(host, &mut ready);
        let tick_now = host.primary().tick_count();
        for (to, message) in ready.replication.messages.drain(..) {
            env.send(to, PeerMessage::Replication(message));
        }
        for disposition in ready.drain_replies(tick_now) {
            match disposition {
                Disposition::Send(reply) => release(host, reply, env)?,
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
            env.backup_applied(backup, lsn_before)?;
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
        if let Some(lsn) = env.log_order(order) {
            self.log_anchored(lsn, env);
        }
    }

    /// One step of the role's checkpoint, between its turns: it begins one when it is due
    /// (or the log is not anchored) and hands the log a chunk of the one under way.
    fn checkpoint_step<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let wanted = env.wants_checkpoint();
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
                env.synced_heard(self.id, lsn);
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
                env.synced_heard(primary, lsn);
                env.send(primary, PeerMessage::Replication(ack));
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
                env.synced_heard(self.id, lsn);
            }
            Slot::Backup(_) => self.hears_synced(env),
            Slot::Outside => {}
        }
    }

    /// A role just started hears from its log: a primary that the log syncs and what is
    /// durable already; a backup's receiver the durable LSN its acks may claim.
    fn log_listen<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let lsn = env.lsn_durable();
        match &mut self.role {
            Slot::Primary(host) => {
                host.role_mut().set_keeps_log(true);
                if lsn > 0 {
                    host.role_mut().log_synced(lsn);
                    env.synced_heard(self.id, lsn);
                }
            }
            Slot::Backup(_) => self.hears_synced(env),
            Slot::Outside => {}
        }
    }

    /// A backup's receiver learns what its log synced before it takes the next message.
    fn hears_synced<E: NodeEnv<D, R>>(&mut self, env: &mut E) {
        let lsn = env.lsn_durable();
        let Slot::Backup(backup) = &mut self.role else {
            return;
        };
        backup.synced(lsn);
        if lsn > 0 {
            env.synced_heard(backup.gate().primary(), lsn);
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

/// Hands the log the orders in `ready`, then sends its messages: a backup acknowledges only
/// what its log was told to hold.
fn send_backup_ready<D: Destination, R, E: NodeEnv<D, R>>(
    backup: &mut BackupRole<R>,
    ready: &mut BackupReady<R>,
    env: &mut E,
) {
    for order in ready.to_log.drain(..) {
        if let Some(lsn) = env.log_order(order) {
            backup.synced(lsn);
            env.synced_heard(backup.gate().primary(), lsn);
        }
    }
    for (to, message) in ready.messages.drain(..) {
        env.send(to, PeerMessage::Replication(message));
    }
}

/// Sends an answer the primary role released (the periodic procedure's goes nowhere).
fn release<D: Destination, R, E: NodeEnv<D, R>>(
    host: &PrimaryHost<D>,
    reply: Reply<crate::primary::Answer<D>>,
    env: &mut E,
) -> Result<(), E::Error> {
    if reply.reply.to.is_periodic() {
        return Ok(());
    }
    env.release(host, reply)
}

/// The first `ReadIndex` question of the role of epoch `role_epoch`: a role's questions never
/// repeat an earlier role's.
fn question_first(role_epoch: u64) -> u64 {
    (role_epoch << 32) + 1
}
