//! The runtime as the node's driver ([`RuntimeEnv`]): what the node hands out leaves here
//! for the sockets' threads and the log thread, and what only the runtime knows (the clock,
//! a load) comes from here. Everything runs on the node's thread.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use tandem_config::GroupId;
use tandem_memory::{ClassBytes, Segment};
use tandem_node::{
    Answer, AnswerKind, BackupWatch, Carried, CarryNote, Destination, LogOrder, NodeEnv,
    NodeFailure, Notice, PeerMessage, PrimaryHost, PrimaryStarting, Ran, ReadAnswer, Records,
    RoleReady, Slot,
};
use tandem_redo::CallId;
use tandem_replication::{ApplyBatch, Message, NodeId, Reply};
use tandem_store::{DataModel, ProcId};
use tandem_wire::ErrorCode;

use super::beat::Beats;
use super::local_load::LocalAnswer;
use super::node_loop::NodeTx;
use super::peers::Peers;
use super::{ClusterInfo, ToNode};
use crate::StartError;
use crate::backup::{ReadTo, answer_frame};
use crate::config::NodeConfig;
use crate::log::NodeLog;
use crate::metrics::Metrics;
use crate::primary::{ConnId, ConnOut, Progress};

/// Where a call's answer goes: a connection's call `seq`, or nobody (the model's periodic
/// procedure). The seq rides along so that a withheld or refused call is answered by it.
#[derive(Clone, Copy, Debug)]
pub(crate) enum CallTo {
    Conn {
        conn: ConnId,
        seq: u64,
        started: Instant,
    },
    /// A call of the in-process driver ([`super::local_load`]), issued at `started`.
    Local {
        seq: u64,
        started: Instant,
    },
    Periodic,
}

impl Destination for CallTo {
    fn periodic() -> CallTo {
        CallTo::Periodic
    }

    fn is_periodic(&self) -> bool {
        matches!(self, CallTo::Periodic)
    }
}

/// A client connection of a primary role: the group and epoch of that role.
pub(crate) struct Conn {
    pub(crate) group: GroupId,
    pub(crate) role_epoch: u64,
    pub(crate) out: ConnOut,
}

/// What a primary role did, for `/status` and `/metrics`.
#[derive(Debug, Default)]
pub(crate) struct Tallies {
    pub(crate) commits: u64,
    pub(crate) rollbacks: u64,
    pub(crate) shipped: ClassBytes,
    pub(crate) wire_bytes: u64,
}

/// What the node's driver moves its inputs and outputs through.
pub(crate) struct EnvIo {
    /// The way into the node's thread (loads and the log hand back through it).
    pub(crate) to_node: NodeTx,
    /// The connections to the other nodes.
    pub(crate) peers: Peers,
    /// The node thread's turns, which the beat reads.
    pub(crate) progress: Arc<Progress>,
    pub(crate) beats: Arc<Beats>,
}

impl EnvIo {
    /// The ways out of the node `config` describes: `to_node` into its thread, `peers`, and
    /// the beat thread (started here), which reads the node's turns and its scripts' watch.
    pub(crate) fn start(
        config: &NodeConfig,
        to_node: NodeTx,
        peers: Peers,
        scripts: &crate::scripts::Scripts,
    ) -> Result<EnvIo, StartError> {
        let progress = Arc::new(Progress::default());
        let watch = Some(Arc::clone(scripts.watch()));
        let beats = Beats::start(config, Arc::clone(&progress), watch)?;
        Ok(EnvIo {
            to_node,
            peers,
            progress,
            beats,
        })
    }
}

/// What the node's driver keeps of one group the node serves in: its log, its loads and the
/// links of its role (decision 4 of docs/many-groups.md: a journal per group).
pub(crate) struct GroupIo {
    pub(crate) group: GroupId,
    pub(crate) log: Option<NodeLog>,
    /// Loads started so far: only the last one's segment is handed to the node.
    pub(crate) loads_started: u64,
    /// A primary role's links: the backups it took, with the epoch of the role that took
    /// each.
    pub(crate) links: BTreeMap<NodeId, u64>,
    /// A backup role's link: the primary that took it, with the epoch of the role it took
    /// (at most the followed primary's is kept).
    pub(crate) replicas: BTreeMap<NodeId, u64>,
    /// The epoch of the group's primary role, if the node holds it.
    pub(crate) primary_epoch: Option<u64>,
    /// The node followed a view of the group since it started.
    pub(crate) followed: bool,
}

impl GroupIo {
    /// A group's part holding no role yet, logging to `log` if the node keeps one.
    pub(crate) fn new(group: GroupId, log: Option<NodeLog>) -> GroupIo {
        GroupIo {
            group,
            log,
            loads_started: 0,
            links: BTreeMap::new(),
            replicas: BTreeMap::new(),
            primary_epoch: None,
            followed: false,
        }
    }
}

/// The runtime as the node's driver: see the module.
pub(crate) struct RuntimeEnv {
    pub(crate) id: NodeId,
    pub(crate) config: NodeConfig,
    /// The data model the initial database is loaded with.
    pub(crate) model: Box<dyn DataModel>,
    /// Each group the node serves in, in the order of its core's groups.
    pub(crate) groups: Vec<GroupIo>,
    /// The node's clock starts here (the reads' deadlines count from it).
    pub(crate) origin: Instant,
    pub(crate) to_node: NodeTx,
    /// The connections to the other nodes.
    pub(crate) peers: Peers,
    /// What the beat thread speaks for while the node's thread is busy.
    pub(crate) beats: Arc<Beats>,
    /// The client connections of primary roles, by number.
    pub(crate) conns: BTreeMap<ConnId, Conn>,
    /// Numbers client connections across the node's roles (a connection of an ended role
    /// stays open until its client closes it).
    pub(crate) conn_next: Arc<std::sync::atomic::AtomicU64>,
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) progress: Arc<Progress>,
    pub(crate) info: Arc<Mutex<ClusterInfo>>,
    pub(crate) trace: bool,
    pub(crate) tallies: Tallies,
    /// Replies released in the current input, counted once it ends.
    pub(crate) replies_released: u64,
    /// Answers to the in-process driver's calls, for it to take after the input.
    pub(crate) local_answers: Vec<LocalAnswer>,
    /// Where the pub/sub messages the primary relays go for the RESP port's subscribers
    /// (none: the node has no RESP port).
    pub(crate) publications: Option<Arc<tandem_store::Publications>>,
}

impl RuntimeEnv {
    /// A driver for the node `config` describes, holding no role yet.
    pub(crate) fn new(
        config: &NodeConfig,
        model: Box<dyn DataModel>,
        groups: Vec<GroupIo>,
        io: EnvIo,
        metrics: Arc<Metrics>,
        info: &Arc<Mutex<ClusterInfo>>,
        trace: bool,
    ) -> RuntimeEnv {
        let EnvIo {
            to_node,
            peers,
            progress,
            beats,
        } = io;
        RuntimeEnv {
            id: config.node_id,
            config: config.clone(),
            model,
            groups,
            origin: Instant::now(),
            to_node,
            trace,
            peers,
            beats,
            conns: BTreeMap::new(),
            conn_next: Arc::new(std::sync::atomic::AtomicU64::new(1)),
            metrics,
            progress,
            info: Arc::clone(info),
            tallies: Tallies::default(),
            replies_released: 0,
            local_answers: Vec::new(),
            publications: None,
        }
    }

    /// Hands every connection the answers of this turn.
    pub(crate) fn hand_over(&mut self) {
        for conn in self.conns.values_mut() {
            conn.out.hand_over();
        }
    }

    /// Keeps the answer to the in-process driver's call `seq` for it.
    fn answer_local(&mut self, seq: u64, started: Instant, outcome: Result<(), String>) {
        self.local_answers.push(LocalAnswer {
            seq,
            outcome,
            started,
        });
    }

    /// The part of `group`: the node serves in it (the node asks about no other group).
    pub(crate) fn group(&self, group: GroupId) -> &GroupIo {
        let found = self.groups.iter().find(|part| part.group == group);
        found.unwrap_or_else(|| panic!("node {}: group {group} is not served here", self.id))
    }

    /// [`Self::group`], to change.
    pub(crate) fn group_mut(&mut self, group: GroupId) -> &mut GroupIo {
        let id = self.id;
        let found = self.groups.iter_mut().find(|part| part.group == group);
        found.unwrap_or_else(|| panic!("node {id}: group {group} is not served here"))
    }

    /// The connection of call `to`, if it is still open.
    fn conn_of(&mut self, to: &CallTo) -> Option<(&mut ConnOut, u64, Instant)> {
        let CallTo::Conn { conn, seq, started } = *to else {
            return None;
        };
        self.conns
            .get_mut(&conn)
            .map(|conn| (&mut conn.out, seq, started))
    }

    /// Sends `group`'s replication `message` to `to` on the link of the group's role: a
    /// primary's to a backup it took, a backup's to the primary that took it.
    fn send_replication(&mut self, to: NodeId, group: GroupId, message: Message) {
        let part = self.group(group);
        if part.primary_epoch.is_some() {
            // A member not linked yet asks for its link and introduces itself; what was
            // sent before is of no use to it.
            let linked = part.links.get(&to) == part.primary_epoch.as_ref();
            if let Message::Batch(bytes) = &message {
                self.metrics.batches_shipped.inc();
                self.metrics.bytes_shipped.inc_by(bytes.len() as u64);
                self.tallies.wire_bytes += bytes.len() as u64;
            }
            if linked {
                self.peers.send_replication(to, group, &message);
            }
        } else if part.replicas.contains_key(&to) {
            self.peers.send_replication(to, group, &message);
            self.beats.note_ack(group, &message);
        }
    }
}

/// The runtime checks nothing a backup applies: the simulator's checkers do.
impl BackupWatch for RuntimeEnv {
    type Error = String;

    fn applying(&mut self, group: GroupId, batch: &ApplyBatch) {
        let _ = (group, batch);
    }

    fn applied(
        &mut self,
        group: GroupId,
        lsn_before: u64,
        lsn: u64,
        calls: &[CallId],
    ) -> Result<(), String> {
        let _ = (group, lsn_before, calls);
        self.metrics.lsn_applied.set(lsn as i64);
        Ok(())
    }

    fn installed(
        &mut self,
        group: GroupId,
        view: u64,
        lsn: u64,
        segment: &Segment,
    ) -> Result<(), String> {
        let _ = (group, view, segment);
        tracing::info!(
            "node {}: installed a state transfer, up to LSN {lsn}",
            self.id
        );
        self.metrics.lsn_applied.set(lsn as i64);
        Ok(())
    }
}

impl NodeEnv<CallTo, ReadTo> for RuntimeEnv {
    type LoadError = StartError;

    fn now_us(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    /// Expiry is measured against the primary's clock (backups get the deletions as redo).
    /// A clock set before 1970 reads as 0: nothing expires until it is set right.
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64)
    }

    fn load(&mut self, group: GroupId) -> Result<Segment, StartError> {
        // A load under way is abandoned: its segment is never handed over.
        self.group_mut(group).loads_started += 1;
        crate::workload::loaded_segment(&self.config.group, &*self.model)
    }

    /// Loads on a thread of its own: a load takes long (a tenth of a second for 50 MiB), and
    /// the node must keep answering the config store meanwhile, whose quorum may need it.
    fn start_load(&mut self, group: GroupId) {
        let part = self.group_mut(group);
        part.loads_started += 1;
        let load = part.loads_started;
        let settings = self.config.group.clone();
        let model = self.model.replica();
        let to_node = self.to_node.clone();
        let started = crate::spawn_or_say("load".into(), move || {
            let result = crate::workload::loaded_segment(&settings, &*model);
            let _ = to_node.send(ToNode::Loaded {
                group,
                load,
                result,
            });
        });
        if !started {
            let _ = self.to_node.send(ToNode::Loaded {
                group,
                load,
                result: Err(StartError::LoaderPanicked),
            });
        }
    }

    fn log_align(&mut self, group: GroupId, lsn: u64) {
        if let Some(log) = &self.group(group).log {
            log.align(lsn);
        }
    }

    fn log_align_rejoin(&mut self, group: GroupId, lsn: u64) -> u64 {
        let log = self.group(group).log.as_ref();
        log.map_or(lsn, |log| log.align_rejoin(lsn))
    }

    fn lsn_durable(&self, group: GroupId) -> u64 {
        self.group(group)
            .log
            .as_ref()
            .map_or(0, NodeLog::lsn_durable)
    }

    fn wants_checkpoint(&self, group: GroupId) -> bool {
        let log = self.group(group).log.as_ref();
        log.is_some_and(NodeLog::checkpoint_wanted)
    }

    /// The log thread tells the node what it synced through its listener
    /// ([`ToNode::Synced`]), a finished checkpoint's anchor included.
    fn log_order(&mut self, group: GroupId, order: LogOrder) -> Option<u64> {
        if let Some(log) = &self.group(group).log {
            log.order(order);
        }
        None
    }

    fn send(&mut self, to: NodeId, message: PeerMessage) {
        match message {
            PeerMessage::Cluster(message) => self.peers.send_cluster(to, &message),
            PeerMessage::Publication(publication) => {
                if !self.peers.send_publication(to, &publication) {
                    self.metrics.publications_not_relayed.inc();
                }
            }
            PeerMessage::Replication { group, message } => {
                self.send_replication(to, group, message)
            }
        }
    }

    fn acks_sent(&mut self) {
        // The primary a backup role follows is its only replica link in its group.
        for part in &self.groups {
            for &primary in part.replicas.keys() {
                self.peers.flush(Some(primary));
            }
        }
    }

    fn release(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<CallTo>,
        reply: Reply<Answer<CallTo>>,
    ) -> Result<(), String> {
        let _ = (group, primary);
        self.replies_released += 1;
        let Answer { to, seq: _, kind } = reply.reply;
        if let CallTo::Local { seq, started } = to {
            let outcome = match kind {
                AnswerKind::Committed { .. } | AnswerKind::CommittedReplyNotKept { .. } => Ok(()),
                AnswerKind::RolledBack { message, .. } | AnswerKind::Refused { message, .. } => {
                    Err(message)
                }
            };
            self.answer_local(seq, started, outcome);
            return Ok(());
        }
        let Some((out, seq, started)) = self.conn_of(&to) else {
            return Ok(());
        };
        if !out.answer(seq, reply.lsn, kind) {
            return Ok(());
        }
        self.metrics
            .ack_latency_seconds
            .observe(started.elapsed().as_secs_f64());
        Ok(())
    }

    fn withheld(&mut self, to: CallTo) {
        self.metrics.replies_withheld.inc();
        if let CallTo::Local { seq, started } = to {
            self.answer_local(seq, started, Err("withheld: the lease ran out".into()));
        }
        if let Some((out, seq, _)) = self.conn_of(&to) {
            out.withheld(seq);
        }
    }

    fn not_primary(&mut self, to: CallTo) {
        if let CallTo::Local { seq, started } = to {
            self.answer_local(seq, started, Err("this primary was replaced".into()));
        }
        if let Some((out, seq, _)) = self.conn_of(&to) {
            out.error(seq, ErrorCode::NotPrimary, "this primary was replaced");
        }
    }

    fn read_answered(&mut self, to: ReadTo, seq: u64, answer: ReadAnswer) -> Result<(), String> {
        if matches!(answer, ReadAnswer::Served { .. }) {
            self.metrics.reads_served.inc();
        } else if matches!(answer, ReadAnswer::Busy { .. }) {
            self.metrics.reads_refused.inc();
        }
        match to {
            ReadTo::Frame(to) => to.answer(answer_frame(self.id, seq, answer)),
            ReadTo::Local(read) => read.answer(answer),
        }
        Ok(())
    }

    fn note(&mut self, note: fmt::Arguments<'_>) {
        tracing::info!("{note}");
    }

    fn notice(&mut self, group: GroupId, notice: Notice<'_>) {
        if let Notice::Following { view, .. } = notice {
            // Each group's first view is where the node started in it, not a change.
            let part = self.group_mut(group);
            let first = !std::mem::replace(&mut part.followed, true);
            let first_group = self.groups[0].group == group;
            if first && first_group {
                self.info.lock().expect("not poisoned").view_first = view.number;
            } else if !first {
                self.metrics.view_changes.inc();
            }
        }
        if let Notice::Suspected { peer, .. } = notice {
            self.metrics.suspicions.inc();
            *self
                .info
                .lock()
                .expect("not poisoned")
                .suspected
                .entry(peer)
                .or_default() += 1;
        }
        let view = match &notice {
            Notice::Suspected { view, .. }
            | Notice::Reported { view }
            | Notice::Frozen { view, .. } => *view,
            Notice::Following { view, .. } => view.number,
        };
        tracing::info!(view, group, "node {}: {notice}", self.id);
    }

    fn failure(&mut self, failure: NodeFailure) -> String {
        format!("node {}: {failure}", self.id)
    }

    fn carry_note(&mut self, group: GroupId, note: &CarryNote<'_>) -> Result<(), String> {
        match note {
            CarryNote::HandoverRefused { .. } | CarryNote::LoadFailed { .. } => {
                tracing::warn!(group, "node {}: {note}", self.id);
            }
            CarryNote::TakesBack { .. } | CarryNote::CannotRewind { .. } => {
                tracing::info!(group, "node {}: {note}", self.id);
            }
        }
        Ok(())
    }

    fn ran(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<CallTo>,
        proc_id: ProcId,
        ran: &Ran,
        time_ms: u64,
    ) -> Result<(), String> {
        let _ = (group, primary, proc_id, time_ms);
        match ran {
            Ran::Committed { shipped, .. } => {
                self.tallies.commits += 1;
                self.tallies.shipped += *shipped;
                self.metrics.commits.inc();
            }
            Ran::Duplicate { .. } => {
                self.metrics.duplicates_answered.inc();
            }
            Ran::RolledBack => {
                self.tallies.rollbacks += 1;
                self.metrics.rollbacks.inc();
            }
            Ran::Stalled | Ran::Read | Ran::Refused(_) => {}
        }
        Ok(())
    }

    fn swept(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<CallTo>,
        time_ms: u64,
    ) -> Result<(), String> {
        let _ = (group, primary, time_ms);
        self.tallies.commits += 1;
        self.metrics.commits.inc();
        Ok(())
    }

    fn leaving(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<CallTo>,
        ready: &mut RoleReady<CallTo>,
    ) {
        let _ = (group, primary);
        // A transfer's pages were copied into its messages while the node waited: it costs a
        // pause proportional to the pages changed since the member's LSN.
        for (node, sent) in ready.transfers_sent.drain(..) {
            tracing::info!(
                "node {}: state transfer to node {node}: {} pages changed after LSN {}, as of \
                 LSN {}",
                self.id,
                sent.pages,
                sent.lsn_from,
                sent.lsn
            );
        }
    }

    fn relayed(&mut self, publication: tandem_node::RelayedPublication) {
        if let Some(publications) = &self.publications {
            let tandem_node::RelayedPublication {
                shard,
                channel,
                message,
                ..
            } = publication;
            let relayed = tandem_store::Publication::relayed(shard, channel, message);
            publications.push(&mut vec![relayed]);
        }
    }

    fn relayed_dropped(&mut self) {
        self.metrics.publications_not_relayed.inc();
    }

    fn backup_holds(
        &mut self,
        group: GroupId,
        primary: NodeId,
        lsn_received: u64,
        lsn_applied: u64,
    ) {
        let _ = (group, primary);
        self.metrics.lsn_received.set(lsn_received as i64);
        self.metrics.lsn_applied.set(lsn_applied as i64);
    }

    /// What the node sends from now on goes by the role it holds now: a primary's messages
    /// to its links, a backup's to its primary's link.
    fn carried(&mut self, carried: Carried<'_, CallTo, ReadTo>) {
        self.group_mut(carried.group).primary_epoch = match carried.role {
            Slot::Primary(_) => Some(carried.role_epoch),
            Slot::Backup(_) | Slot::Outside => None,
        };
    }

    fn primary_starting(&mut self, starting: PrimaryStarting<'_>) {
        let PrimaryStarting {
            view, records, lsn, ..
        } = starting;
        let me = self.id;
        match records {
            Records::Loaded => {}
            Records::Recovered => tracing::info!(
                view = view.number,
                lsn,
                "node {me}: primary of view {} from LSN {lsn}, rebuilt from its log",
                view.number
            ),
            Records::Kept | Records::Rewound => tracing::info!(
                view = view.number,
                lsn,
                "node {me}: primary of view {} from LSN {lsn}",
                view.number
            ),
        }
    }
}
