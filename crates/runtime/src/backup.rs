//! The backup node: a receiver thread per primary connection and one applier thread.
//!
//! The receiver thread reads batches, runs them through the receiver core, queues accepted
//! ones for the applier and acks receipt at once (a 2-safe ack never waits for application,
//! seed 004 §3.2). The applier thread owns the segment (or, in passive mode, the mirror
//! memory), applies batches in order and acks what it applied, once per drained queue.
//!
//! **Reads** (DESIGN.md, "Versioned reads"). A client may send a backup `Read` frames: a
//! read-only procedure, `min_lsn` and a consistency. The applier keeps them in the node core's
//! `BackupReads`, which says what to do: for a linearizable read it sends the primary the
//! `ReadIndex` questions the core hands out (on the connection acks use) and feeds it the
//! answers the receiver passes on; it runs a read between batches once its `min_lsn` is final
//! and applied and while everything applied is at or below the LSN the primary last said it
//! released (heartbeats and answers carry it), so a reader never sees a record a view change
//! could still discard. While a read waits only for that release, the applier holds further
//! batches back, for at most [`READ_WAIT`]; a read it cannot serve by then is answered `Busy`,
//! and the stub asks the primary. The RESP front end's reads on a backup (a Redis client's
//! `GET`) reach the applier the same way, as linearizable reads, through a [`BackupPort`]
//! instead of a reader thread.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use std::collections::VecDeque;

use tandem_memory::{PassiveMirror, Segment};
use tandem_node::{
    ApplierRole, BackupReads, GateRule, Needs, READ_INDEX_RETRY, READ_WAIT, ReadAnswer,
    ReceiverRole, Replica as NodeReplica, WaitingRead,
};
use tandem_redo::{SealedBatch, TailLimits};
use tandem_replication::{
    ApplyBatch, Message, NodeId, ReceiverConfig, ReceiverFault, ReceiverReady, transfer::PageImage,
};
use tandem_store::DataModel;
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, PeerKind, ReplyStatus, Role, Welcome, encode_error, encode_peer,
    encode_reply, encode_welcome,
};

use crate::config::{Mode, NodeConfig};
use crate::gate::Handshake;
use crate::log::NodeLog;
use crate::members::MemberList;
use crate::metrics::{Metrics, ReasonLabel};
use crate::native::{FrameReply, FrameSink, Service};
use crate::net::{self, ConnError};
use crate::peer_auth::{PeerAuth, Sealer};
use crate::{Checksum, Control, HandoverFailure, NodeStatus, StartError};

/// Batches received and not yet applied, at most (64 MiB of 64 KiB batches).
const APPLIER_QUEUE_BATCHES: usize = 1024;

/// Backup roles this process started: each numbers its `ReadIndex` questions in a range of
/// its own (see [`BackupReads::new`]), so a late answer to an earlier role's question is
/// never taken for one of its own.
static BACKUP_ROLES_STARTED: AtomicU64 = AtomicU64::new(0);

/// The first question id of a new backup role's reads.
fn question_first() -> u64 {
    (BACKUP_ROLES_STARTED.fetch_add(1, Ordering::Relaxed) << 32) + 1
}

/// A read waiting for the applier, and where its answer goes.
pub(crate) type ReadRequest = WaitingRead<ReadTo, Instant>;

/// Where a backup role's reads go: its applier (static mode), or the node's thread
/// (cluster mode). A read that cannot be handed over is dropped, which answers it.
#[derive(Clone, Debug)]
pub(crate) enum ReadSink {
    Applier(SyncSender<ToApplier>),
    Node(crate::cluster::NodeTx),
}

impl ReadSink {
    /// Hands `read` over, waiting for room in the applier's queue; false once the role
    /// stopped.
    fn send(&self, read: ReadRequest) -> bool {
        match self {
            ReadSink::Applier(to_applier) => to_applier.send(ToApplier::Read(read)).is_ok(),
            ReadSink::Node(to_node) => to_node.send(crate::cluster::ToNode::Read(read)).is_ok(),
        }
    }

    /// Hands `read` over without waiting: a full queue or a stopped role drops it.
    fn try_send(&self, read: ReadRequest) {
        match self {
            ReadSink::Applier(to_applier) => {
                let _ = to_applier.try_send(ToApplier::Read(read));
            }
            ReadSink::Node(to_node) => {
                let _ = to_node.send(crate::cluster::ToNode::Read(read));
            }
        }
    }
}

/// Where a read's answer goes.
#[derive(Debug)]
pub(crate) enum ReadTo {
    /// A native client: the answer encoded, a `Reply` or an `Error` frame.
    Frame(FrameReply),
    /// The RESP front end, through a [`BackupPort`]: the answer as the node core gave it.
    Local(LocalRead),
}

/// The answers of the reads a [`BackupPort`] handed the applier, until the front end takes
/// them; `None` for a read the applier dropped unanswered (its role ended, or its queue was
/// full).
struct LocalAnswers {
    answers: Mutex<Vec<(u64, Option<ReadAnswer>)>>,
    /// Whether the front end was woken since it last took the answers: one wake-up serves
    /// every answer that arrives before it looks.
    woken: AtomicBool,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl std::fmt::Debug for LocalAnswers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalAnswers")
    }
}

impl LocalAnswers {
    fn put(&self, seq: u64, answer: Option<ReadAnswer>) {
        self.answers
            .lock()
            .expect("not poisoned")
            .push((seq, answer));
        if !self.woken.swap(true, Ordering::AcqRel) {
            (self.wake)();
        }
    }
}

/// One read of a [`BackupPort`]: answered exactly once, by the applier or, if it is dropped
/// unanswered, as `None`, so the front end never waits for an answer that cannot come.
#[derive(Debug)]
pub(crate) struct LocalRead {
    seq: u64,
    to: Arc<LocalAnswers>,
    answered: bool,
}

impl LocalRead {
    pub(crate) fn answer(mut self, answer: ReadAnswer) {
        self.answered = true;
        self.to.put(self.seq, Some(answer));
    }
}

impl Drop for LocalRead {
    fn drop(&mut self) {
        if !self.answered {
            self.to.put(self.seq, None);
        }
    }
}

/// A port into one backup role's applier from inside the node: the RESP front end's reads
/// go to the applier as linearizable reads, the way a stub's `Read` frames do, without a
/// socket or a frame between them. Reads are numbered from 0 in the order they are pushed;
/// the applier answers them in any order, each within [`READ_WAIT`] (or, if its role ends
/// first, as dropped), and wakes the front end.
#[derive(Debug)]
pub struct BackupPort {
    to_applier: ReadSink,
    answers: Arc<LocalAnswers>,
    /// Tells the roles apart: a node may hold a new backup role after a restart or a depose.
    role: usize,
    /// What the role applied last (`ROLE` and `INFO replication` show it).
    lsn_applied: Arc<AtomicU64>,
    seq_next: u64,
}

impl BackupPort {
    /// Whether this port leads to the role `handle` runs.
    pub fn is_of(&self, handle: &BackupHandle) -> bool {
        self.role == Arc::as_ptr(&handle.state.lsn_applied) as usize
    }

    /// The LSN the role applied last.
    pub fn lsn_applied(&self) -> u64 {
        self.lsn_applied.load(Ordering::Acquire)
    }

    /// Hands the applier a linearizable read of read-only procedure `proc_id` and returns its
    /// seq. Never blocks: if the applier's queue is full, the read is answered `None` at once.
    pub fn push(&mut self, proc_id: u16, args: Vec<u8>) -> u64 {
        let seq = self.seq_next;
        self.seq_next += 1;
        let now = Instant::now();
        let request = ReadRequest {
            seq,
            proc_id,
            // A RESP connection has no session LSN: the primary's answer to the read's
            // question is all it needs.
            min_lsn: 0,
            args,
            deadline: now + READ_WAIT,
            to: ReadTo::Local(LocalRead {
                seq,
                to: Arc::clone(&self.answers),
                answered: false,
            }),
            needs: Needs::ReadIndex,
        };
        // A full queue or a stopped applier hands the read back, and dropping it answers it.
        self.to_applier.try_send(request);
        seq
    }

    /// Appends the answers that arrived to `into`, without waiting: the seq of each read and
    /// its answer, `None` for one the applier dropped unanswered.
    pub fn take(&self, into: &mut Vec<(u64, Option<ReadAnswer>)>) {
        self.answers.woken.store(false, Ordering::Release);
        into.append(&mut self.answers.answers.lock().expect("not poisoned"));
    }
}

/// What the applier thread receives from the receivers and the node.
pub(crate) enum ToApplier {
    Batch(ApplyBatch),
    /// A state transfer, installed in one step after the batches before it.
    Install(PageImage),
    /// A client's read.
    Read(ReadRequest),
    /// The primary's answer to `ReadIndex` question `id`: it had released up to `lsn`.
    ReadIndexed {
        id: u64,
        lsn: u64,
    },
    /// The node was promoted: once every record up to `lsn` is applied, give the segment and
    /// the retained batches back (see [`BackupHandle::handover`]).
    Handover {
        lsn: u64,
        reply: Sender<Result<Handover, tandem_node::HandoverError>>,
    },
}

pub use tandem_node::Handover;

/// Who a backup accepts batches from, and whether it still does. Receivers take the lock
/// around everything they do with a read (accept, queue for the applier, ack), and
/// [`Gate::freeze`] takes it too: once it returns, no receiver acks anything more, so the LSN
/// it returns is exactly what this backup ever acknowledged.
/// The rule itself is the node core's [`GateRule`]; this is its lock.
#[derive(Debug)]
pub struct Gate {
    state: Mutex<GateRule>,
    /// The view, readable without the lock (the applier's acks carry it; the applier must
    /// never wait for a receiver that may itself wait for the applier's queue).
    view: AtomicU64,
}

impl Gate {
    pub fn new(view: u64, primary: NodeId) -> Gate {
        Gate {
            state: Mutex::new(GateRule::new(view, primary)),
            view: AtomicU64::new(view),
        }
    }

    /// A gate that accepts nobody: the role of a node that stands by with the records it
    /// held in view `view` under `primary` (a deposed primary: itself).
    pub fn frozen(view: u64, primary: NodeId) -> Gate {
        let gate = Gate::new(view, primary);
        gate.state.lock().expect("not poisoned").freeze();
        gate
    }

    pub fn view(&self) -> u64 {
        self.view.load(Ordering::Acquire)
    }

    /// Whether receivers take batches from `primary` now.
    pub fn accepts(&self, primary: NodeId) -> bool {
        self.state.lock().expect("not poisoned").accepts(primary)
    }

    /// Whether the backup stopped accepting its primary for a view change.
    pub fn is_frozen(&self) -> bool {
        self.state.lock().expect("not poisoned").is_frozen()
    }

    /// The primary this backup follows.
    pub fn primary(&self) -> NodeId {
        self.state.lock().expect("not poisoned").primary()
    }

    /// Stops accepting the primary (for the rest of the view) and returns the last LSN
    /// received.
    pub fn freeze(&self, lsn_received: &AtomicU64) -> u64 {
        let mut state = self.state.lock().expect("not poisoned");
        state.freeze();
        lsn_received.load(Ordering::Acquire)
    }

    /// A new view with the same primary (members joined or left): receivers speak it now.
    pub fn set_view(&self, view: u64, primary: NodeId) {
        let mut state = self.state.lock().expect("not poisoned");
        state.set_view(view, primary);
        self.view.store(view, Ordering::Release);
    }
}

/// The applier thread's state: the node core's applier, and an active backup's data model
/// (its consistency check and read-only procedures).
struct Replica {
    applier: ApplierRole,
    model: Option<Box<dyn DataModel>>,
}

impl Replica {
    fn lsn_applied(&self) -> u64 {
        self.applier.lsn_applied()
    }

    fn checksum(&self) -> Checksum {
        match self.applier.replica() {
            NodeReplica::Active { segment, .. } => {
                let mut checksum = Checksum::of(segment.bytes(), segment.lsn());
                checksum.check = self
                    .model
                    .as_ref()
                    .and_then(|model| model.check(segment).err())
                    .map(|err| err.to_string());
                checksum
            }
            NodeReplica::Passive { mirror, applier } => match mirror.recover() {
                Ok(image) => Checksum::of(&image, applier.lsn_applied()),
                Err(err) => Checksum {
                    lsn: applier.lsn_applied(),
                    crc32c: 0,
                    error: Some(format!("the mirror does not recover: {err}")),
                    check: None,
                },
            },
        }
    }
}

/// An active backup's replica of `model` on `segment`, applied up to the segment's LSN, with
/// `tail` (batches applied in an earlier role) as the start of its retained tail.
fn active_replica(
    segment: Segment,
    model: Box<dyn DataModel>,
    tail: Vec<SealedBatch>,
    limits: TailLimits,
) -> Replica {
    Replica {
        applier: ApplierRole::active(segment, tail, limits),
        model: Some(model),
    }
}

/// A running backup.
#[derive(Debug)]
pub struct BackupHandle {
    control: Sender<Control>,
    /// The applier thread (static mode; in cluster mode the node's thread holds the role).
    pub applier: Option<JoinHandle<()>>,
    to_applier: ReadSink,
    state: Shared,
}

/// Asks a backup role for its status and checksum; outlives the role harmlessly.
#[derive(Clone, Debug)]
pub struct BackupProbe {
    control: Sender<Control>,
}

impl BackupProbe {
    pub fn status(&self) -> Option<NodeStatus> {
        crate::ask(Duration::from_secs(5), |reply| {
            self.control.send(Control::Status(reply))
        })
    }

    pub fn checksum(&self) -> Option<Checksum> {
        crate::ask(Duration::from_secs(30), |reply| {
            self.control.send(Control::Checksum(reply))
        })
    }
}

impl BackupHandle {
    /// A port for reads from inside the node (the RESP front end); `wake` is called once
    /// answers wait to be taken.
    pub fn local_port(&self, wake: Arc<dyn Fn() + Send + Sync>) -> BackupPort {
        BackupPort {
            to_applier: self.to_applier.clone(),
            answers: Arc::new(LocalAnswers {
                answers: Mutex::new(Vec::new()),
                woken: AtomicBool::new(false),
                wake,
            }),
            role: Arc::as_ptr(&self.state.lsn_applied) as usize,
            lsn_applied: Arc::clone(&self.state.lsn_applied),
            seq_next: 0,
        }
    }

    /// What serves a client's connection on the node's I/O loop, apart from the role (so
    /// the caller need not hold it).
    pub(crate) fn native_service(&self) -> Box<dyn Service> {
        Box::new(BackupService {
            state: self.state.clone(),
            to_applier: self.to_applier.clone(),
            sink: None,
            waiting: false,
        })
    }

    pub fn gate(&self) -> &Gate {
        &self.state.gate
    }

    /// The last LSN received, and whether anything was heard from the primary since the
    /// previous call.
    pub fn lsn_received(&self) -> u64 {
        self.state.lsn_received.load(Ordering::Acquire)
    }

    pub fn lsn_applied(&self) -> u64 {
        self.state.lsn_applied.load(Ordering::Acquire)
    }

    /// Reads that brought bytes from primaries so far: the failure detector watches it move.
    /// Bytes, not whole frames: a primary sending one large batch (a large value) is heard
    /// while its frame is still arriving, so a long transfer is not taken for silence.
    pub fn reads_heard(&self) -> u64 {
        self.state.reads_heard.load(Ordering::Relaxed)
    }

    /// Whether the segment was rewound and no receiver has taken the transfer that replaces
    /// its diverged pages yet.
    pub fn is_diverged(&self) -> bool {
        self.state.diverged.lock().expect("not poisoned").is_some()
    }

    /// A diverged role's LSN before its segment's first rewind, while no transfer has
    /// replaced its diverged pages (`Segment::lsn_before_rewind`).
    pub fn lsn_before_rewind(&self) -> Option<u64> {
        self.state.lsn_before_rewind.filter(|_| self.is_diverged())
    }

    /// Stops accepting the primary for good; returns the last LSN received.
    pub fn freeze(&self) -> u64 {
        self.state.gate.freeze(&self.state.lsn_received)
    }

    /// At least every LSN this role told its primary its log synced
    /// (`tandem_node::lsn_synced_bound`).
    pub fn lsn_synced(&self) -> u64 {
        tandem_node::lsn_synced_bound(
            self.state.log.as_ref().map_or(0, NodeLog::lsn_durable),
            self.state.lsn_synced_told.load(Ordering::Acquire),
        )
    }

    /// Ends the backup role once every record up to `lsn` is applied, handing over the segment
    /// and the batches received. Call it frozen, with `lsn` at most what was received.
    pub fn handover(self, lsn: u64) -> Result<Handover, HandoverFailure> {
        let (reply, answer) = mpsc::channel();
        let ReadSink::Applier(to_applier) = &self.to_applier else {
            return Err(HandoverFailure::ApplierStopped);
        };
        to_applier
            .send(ToApplier::Handover { lsn, reply })
            .map_err(|_| HandoverFailure::ApplierStopped)?;
        let handover = answer.recv().map_err(|_| HandoverFailure::ApplierStopped)?;
        Ok(handover?)
    }

    /// A handle that asks for status and checksum without holding the role.
    pub fn probe(&self) -> BackupProbe {
        BackupProbe {
            control: self.control.clone(),
        }
    }

    pub fn status(&self) -> Option<NodeStatus> {
        self.probe().status()
    }

    pub fn checksum(&self) -> Option<Checksum> {
        self.probe().checksum()
    }
}

/// What a cluster-mode backup role shares with the node's acceptor and RESP front end: its
/// reads go to the node's thread, which keeps `gate` and `lsn_applied` in step with the
/// role it holds (they tell the roles apart and fill a reader's Welcome).
pub(crate) struct NodeBackup {
    pub(crate) handle: BackupHandle,
    pub(crate) gate: Arc<Gate>,
    pub(crate) lsn_applied: Arc<AtomicU64>,
}

impl BackupHandle {
    /// The handle of a cluster-mode backup role following `primary` in `view`, applied up
    /// to `lsn_applied`; `control` reaches the node's thread for status and checksum.
    pub(crate) fn on_node(
        config: &NodeConfig,
        metrics: &Arc<Metrics>,
        to_node: crate::cluster::NodeTx,
        control: Sender<Control>,
        gate: Gate,
        lsn_applied: u64,
    ) -> Result<NodeBackup, StartError> {
        let gate = Arc::new(gate);
        let lsn_applied = Arc::new(AtomicU64::new(lsn_applied));
        let state = Shared {
            node_id: config.node_id,
            group: config.group.id,
            tick: Duration::from_micros(config.tuning.tick_us),
            max_frame_len: config.tuning.max_frame_len,
            lsn_applied: Arc::clone(&lsn_applied),
            lsn_received: Arc::new(AtomicU64::new(0)),
            lsn_synced_told: Arc::new(AtomicU64::new(0)),
            lsn_released: Arc::new(AtomicU64::new(0)),
            released_heard: Arc::new(Mutex::new(None)),
            started: Instant::now(),
            reads_heard: Arc::new(AtomicU64::new(0)),
            gate: Arc::clone(&gate),
            ack_writer: Arc::new(Mutex::new(None)),
            auth: PeerAuth::new(config, metrics)?,
            metrics: Arc::clone(metrics),
            peer_closed: None,
            diverged: Arc::new(Mutex::new(None)),
            lsn_before_rewind: None,
            members: MemberList::of(config),
            log: None,
        };
        let handle = BackupHandle {
            control,
            applier: None,
            to_applier: ReadSink::Node(to_node),
            state,
        };
        Ok(NodeBackup {
            handle,
            gate,
            lsn_applied,
        })
    }
}

/// Starts a backup of `workload`: loads the same initial database as the primary (the load is
/// deterministic), then accepts the primary's connection on `listener`.
pub fn start(
    config: &NodeConfig,
    listener: TcpListener,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
) -> Result<BackupHandle, StartError> {
    let segment = crate::workload::loaded_segment(&config.group, &*model)?;
    let primary = config
        .peers
        .iter()
        .find(|peer| peer.role == crate::config::Role::Primary)
        .map_or(0, |peer| peer.node_id);
    let gate = Gate::new(config.group.view, primary);
    let log = crate::log::open_fresh(config, segment.lsn(), &metrics)?;
    if let Some(log) = &log {
        crate::stopping_drains(log);
    }
    let gate_metrics = Arc::clone(&metrics);
    let handle = start_role(config, segment, model, metrics, gate, Vec::new(), None, log)?;
    let state = handle.state.clone();
    let ReadSink::Applier(to_applier) = handle.to_applier.clone() else {
        unreachable!("a static backup has an applier");
    };
    // A connection gets a thread only once its whole Hello came (gate.rs).
    let on_hello = move |stream: TcpStream, buffer: FrameBuffer, handshake: Handshake| {
        let state = state.clone();
        let to_applier = to_applier.clone();
        crate::spawn_or_say("receiver".into(), move || {
            serve_connection(stream, buffer, handshake, state, to_applier)
        });
    };
    crate::gate::spawn(
        listener,
        crate::gate::GateLimits::for_maxclients(config.tuning.maxclients),
        gate_metrics,
        Box::new(on_hello),
    )
    .map_err(StartError::NativePort)?;
    Ok(handle)
}

/// Starts the backup role on `segment` (freshly loaded, or kept from an earlier role), taking
/// batches from the primary `gate` names. Connections are handed to it with
/// [`BackupHandle::serve`].
#[allow(clippy::too_many_arguments)]
pub fn start_role(
    config: &NodeConfig,
    mut segment: Segment,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    gate: Gate,
    tail: Vec<SealedBatch>,
    peer_closed: Option<crate::PeerClosed>,
    log: Option<NodeLog>,
) -> Result<BackupHandle, StartError> {
    let group = &config.group;
    let lsn_start = segment.lsn();
    if let Some(log) = &log {
        // The log must end where the segment does before the role appends to it.
        log.align(lsn_start);
    }
    let diverged: Option<Arc<[u32]>> = Some(segment.diverged())
        .filter(|pages| !pages.is_empty())
        .map(Arc::from);
    let lsn_before_rewind = segment.lsn_before_rewind();
    metrics.lsn_received.set(lsn_start as i64);
    metrics.lsn_applied.set(lsn_start as i64);
    let tail_limits = TailLimits {
        records_max: config.tuning.tail_records_max,
        bytes_max: config.tuning.tail_bytes_max,
    };
    let replica = match group.mode {
        Mode::Active => {
            let mut replica = active_replica(segment, model, tail, tail_limits);
            if let Some(log) = &log {
                // A backup checkpoints for its log, which then drops what a checkpoint covers.
                let (bytes_between, lsn_load) = log.checkpoints();
                replica.applier.enable_checkpoints(bytes_between, lsn_load);
            }
            replica
        }
        Mode::Passive => {
            let layout = segment
                .enable_passive_trace(group.undo_log_kib << 10)
                .map_err(StartError::Passive)?;
            let mirror = PassiveMirror::from_image(layout, &segment.passive_image())
                .map_err(StartError::Passive)?;
            drop(segment);
            Replica {
                applier: ApplierRole::passive(mirror, lsn_start, tail_limits),
                model: None,
            }
        }
    };
    // Bounded: when the applier falls this far behind, the receiver blocks, stops reading and
    // acking, the primary's retained tail fills, and its flow control stops commits.
    let (to_applier, applier_rx) = mpsc::sync_channel(APPLIER_QUEUE_BATCHES);
    let (control, control_rx) = mpsc::channel();
    let state = Shared {
        node_id: config.node_id,
        group: group.id,
        tick: Duration::from_micros(config.tuning.tick_us),
        max_frame_len: config.tuning.max_frame_len,
        lsn_applied: Arc::new(AtomicU64::new(lsn_start)),
        lsn_received: Arc::new(AtomicU64::new(lsn_start)),
        lsn_synced_told: Arc::new(AtomicU64::new(0)),
        lsn_released: Arc::new(AtomicU64::new(0)),
        released_heard: Arc::new(Mutex::new(None)),
        started: Instant::now(),
        reads_heard: Arc::new(AtomicU64::new(0)),
        gate: Arc::new(gate),
        ack_writer: Arc::new(Mutex::new(None)),
        auth: PeerAuth::new(config, &metrics)?,
        metrics: Arc::clone(&metrics),
        peer_closed,
        diverged: Arc::new(Mutex::new(diverged)),
        lsn_before_rewind,
        members: MemberList::of(config),
        log,
    };
    if let Some(log) = &state.log {
        let acks = state.clone();
        log.listen(Some(Box::new(move |lsn| acks.send_durable_ack(lsn))));
    }
    let applier_state = state.clone();
    // The applier runs clients' reads, scripts among them (`EVAL_RO`): its stack holds the
    // deepest input the script engine's bounds accept.
    let applier = thread::Builder::new()
        .name("applier".into())
        .stack_size(tandem_redis::SCRIPT_THREAD_STACK_BYTES)
        .spawn(move || run_applier(replica, applier_rx, control_rx, applier_state))
        .map_err(|source| StartError::Thread {
            thread: "the applier",
            source,
        })?;
    Ok(BackupHandle {
        control,
        applier: Some(applier),
        to_applier: ReadSink::Applier(to_applier),
        state,
    })
}

/// The writing half of a connection to the primary. Its receiver thread and the applier both
/// write acks on it, so each frame is written whole under the lock, never interleaved.
type SharedWriter = Arc<Mutex<AckWriter>>;

/// The write half of the connection to the primary, shared by the receiver, the applier and
/// the log's thread: the sealer's sequence moves with the bytes, under the same lock.
#[derive(Debug)]
struct AckWriter {
    stream: TcpStream,
    sealer: Sealer,
    scratch: Vec<u8>,
}

impl AckWriter {
    /// Writes `frames` (whole frames) whole.
    fn write_frames(&mut self, frames: &[u8]) -> std::io::Result<()> {
        self.sealer
            .write_frames(&mut self.stream, frames, &mut self.scratch)
    }
}

#[derive(Clone, Debug)]
struct Shared {
    node_id: NodeId,
    group: u32,
    tick: Duration,
    max_frame_len: usize,
    lsn_applied: Arc<AtomicU64>,
    lsn_received: Arc<AtomicU64>,
    /// The most this role's acks said its log synced (`BackupHandle::lsn_synced`).
    lsn_synced_told: Arc<AtomicU64>,
    /// The highest LSN the primary said it released a reply for: readers see no further.
    lsn_released: Arc<AtomicU64>,
    /// When the receiver last heard the primary say what it released, and the LSN then (for
    /// bounded-staleness reads).
    released_heard: Arc<Mutex<Option<(Instant, u64)>>>,
    /// When the role started: a bounded read's window never reaches further back.
    started: Instant,
    reads_heard: Arc<AtomicU64>,
    gate: Arc<Gate>,
    /// The connection to the current primary, shared by the receiver (receipt acks) and the
    /// applier (application acks).
    ack_writer: Arc<Mutex<Option<SharedWriter>>>,
    /// Authenticates the primary's links (a static-mode backup's own acceptor).
    auth: PeerAuth,
    metrics: Arc<Metrics>,
    /// Whom to tell that the current primary closed its connection (cluster mode).
    peer_closed: Option<crate::PeerClosed>,
    /// The diverged pages of a rewound segment (`Transition::Rejoin`), until a receiver
    /// takes the transfer that replaces them: each new connection's receiver introduces
    /// itself with them.
    diverged: Arc<Mutex<Option<Arc<[u32]>>>>,
    /// A rewound segment's LSN before its first rewind (`Segment::lsn_before_rewind`), as
    /// the role started: it holds while `diverged` is set.
    lsn_before_rewind: Option<u64>,
    /// What a client's `Members` frame is answered with.
    members: MemberList,
    /// The node's write-ahead log: it takes what the receivers accept, and its syncs are
    /// acknowledged to the primary ([`Shared::send_durable_ack`]).
    log: Option<NodeLog>,
}

impl Shared {
    /// Tells the current primary that the log synced every record up to `lsn`, at once (on
    /// the log's thread), as the applier tells it what it applied.
    fn send_durable_ack(&self, lsn: u64) {
        let ack = Message::durable_ack(
            self.gate.view(),
            lsn,
            self.lsn_applied.load(Ordering::Acquire),
        );
        self.send_ack(&ack, &mut Vec::new());
    }

    /// Writes `ack` whole on the connection to the current primary, if there is one (the
    /// applier's and the log's acks; `frame` is scratch).
    fn send_ack(&self, ack: &Message, frame: &mut Vec<u8>) {
        frame.clear();
        encode_peer(frame, ack);
        let writer = self.ack_writer.lock().expect("not poisoned").clone();
        if let Some(writer) = writer {
            let _ = writer.lock().expect("not poisoned").write_frames(frame);
        }
    }

    /// The applier reached `lsn`: what the receivers, the readers and `/metrics` read.
    fn note_applied(&self, lsn: u64) {
        self.lsn_applied.store(lsn, Ordering::Release);
        self.metrics.lsn_applied.set(lsn as i64);
    }
}

fn serve_connection(
    mut stream: TcpStream,
    buffer: FrameBuffer,
    handshake: Handshake,
    state: Shared,
    to_applier: SyncSender<ToApplier>,
) {
    let result = receive(&mut stream, buffer, handshake, &state, &to_applier);
    close(stream, result, &state);
}

/// Ends a connection: one that broke the protocol is told why in an Error frame first.
fn close(mut stream: TcpStream, result: Result<(), ConnError>, state: &Shared) {
    if let Some(frame) = error_frame(&result, state) {
        let _ = net::write_all(&mut stream, &frame);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

/// The `Error` frame that tells the peer why its connection ends, counted as a rejected
/// frame, if it ends for something the peer sent (not for a close or an I/O error).
fn error_frame(result: &Result<(), ConnError>, state: &Shared) -> Option<Vec<u8>> {
    let Err(err) = result else { return None };
    if matches!(err, ConnError::Closed | ConnError::Io(_)) {
        return None;
    }
    state.metrics.frames_rejected.inc();
    let code = match err {
        ConnError::Frame(err) => err.code(),
        _ => ErrorCode::BadFrame,
    };
    let mut frame = Vec::new();
    encode_error(&mut frame, code, &err.to_string());
    Some(frame)
}

/// Serves a connection the gate handed on, its whole Hello in `buffer` (which holds no more
/// than a handshake's frames until the primary proved itself).
fn receive(
    stream: &mut TcpStream,
    mut buffer: FrameBuffer,
    handshake: Handshake,
    state: &Shared,
    to_applier: &SyncSender<ToApplier>,
) -> Result<(), ConnError> {
    net::tune(stream)?;
    let (primary, hello) =
        net::read_one(
            stream,
            &mut buffer,
            Duration::from_secs(10),
            |frame| match frame {
                Frame::Hello(hello) if hello.peer == PeerKind::Replica => {
                    NodeId::try_from(hello.id)
                        .map(|primary| (primary, hello.clone()))
                        .map_err(|_| {
                            ConnError::Protocol(format!(
                                "node id {} does not fit 32 bits",
                                hello.id
                            ))
                        })
                }
                Frame::Hello(_) => Err(ConnError::Protocol(
                    "this node is a backup; send calls to the primary".into(),
                )),
                _ => Err(ConnError::Protocol(
                    "the first frame must be a Hello".into(),
                )),
            },
        )
        .map_err(|err| match err {
            ConnError::Protocol(message) if message.contains("backup") => {
                let mut frame = Vec::new();
                encode_error(&mut frame, ErrorCode::NotPrimary, &message);
                let _ = net::write_all(stream, &frame);
                ConnError::Closed
            }
            other => other,
        })?;
    let sealer = match state.auth.accept(stream, &mut buffer, &hello) {
        Ok(sealer) => sealer,
        Err(_) => return Err(ConnError::Closed),
    };
    // Proved: its frames may be as long as the node's, and it no longer counts as waiting.
    buffer.set_max_frame_len(state.max_frame_len);
    drop(handshake);
    receive_from(stream, buffer, primary, sealer, state, to_applier)
}

/// Runs the receiver core on a connection from node `primary`, after its Hello.
fn receive_from(
    stream: &mut TcpStream,
    mut buffer: FrameBuffer,
    primary: NodeId,
    mut sealer: Sealer,
    state: &Shared,
    to_applier: &SyncSender<ToApplier>,
) -> Result<(), ConnError> {
    let view = {
        let gate = state.gate.state.lock().expect("not poisoned");
        if !gate.accepts(primary) {
            let mut frame = Vec::new();
            let message = format!(
                "node {} follows node {} in view {}, not node {primary}",
                state.node_id,
                gate.primary(),
                gate.view()
            );
            encode_error(&mut frame, ErrorCode::StaleView, &message);
            drop(gate);
            let _ = sealer.write_frames(stream, &frame, &mut Vec::new());
            return Err(ConnError::Closed);
        }
        gate.view()
    };
    let lsn_received = state.lsn_received.load(Ordering::Acquire);
    let mut welcome = Vec::new();
    encode_welcome(
        &mut welcome,
        &Welcome {
            version: tandem_wire::PROTOCOL_VERSION,
            node_id: state.node_id,
            role: Role::Backup,
            view,
            lsn: lsn_received,
        },
    );
    sealer.write_frames(stream, &welcome, &mut Vec::new())?;
    let writer: SharedWriter = Arc::new(Mutex::new(AckWriter {
        stream: stream.try_clone()?,
        sealer,
        scratch: Vec::new(),
    }));
    *state.ack_writer.lock().expect("not poisoned") = Some(Arc::clone(&writer));
    let receiver_config = ReceiverConfig {
        group: state.group,
        view,
        primary,
        nack_ticks: 2,
    };
    let lsn_applied = state.lsn_applied.load(Ordering::Acquire);
    let diverged = state.diverged.lock().expect("not poisoned").clone();
    let mut core = match diverged {
        Some(pages) => ReceiverRole::rejoin(receiver_config, lsn_received, pages),
        None => ReceiverRole::new(receiver_config, lsn_received, lsn_applied),
    };
    let mut ready = ReceiverReady::default();
    let mut out = Vec::new();
    let mut released_heard = 0;
    // The tick in which the receiver last answered bytes of a frame not yet whole.
    let mut tick_answered_receiving = None;
    stream.set_read_timeout(Some(state.tick))?;
    let mut next_tick = Instant::now() + state.tick;
    loop {
        // Everything done with what was read happens under the gate: a freeze waits for it,
        // and after a freeze nothing more is accepted or acknowledged.
        let gate = state.gate.state.lock().expect("not poisoned");
        if !core.follow(&gate, state.lsn_applied.load(Ordering::Acquire)) {
            return Err(ConnError::Closed);
        }
        if let Some(log) = &state.log {
            core.synced(log.lsn_durable());
            // Under the gate: a freeze reads it after every ack that could carry it.
            state
                .lsn_synced_told
                .fetch_max(core.core().lsn_synced_told(), Ordering::AcqRel);
        }
        while let Some(frame) = buffer.next_frame().inspect_err(|err| {
            state.auth.note_forged(&ConnError::Frame(err.clone()));
        })? {
            let Frame::Peer(message) = frame else {
                return Err(ConnError::Protocol(
                    "a primary sends only Peer frames".into(),
                ));
            };
            if let Message::Batch(_) = message {
                state.metrics.batches_received.inc();
            }
            core.step(primary, message);
        }
        let now = Instant::now();
        while now >= next_tick {
            core.tick();
            next_tick += state.tick;
        }
        core.take_ready(&mut ready);
        // What the primary released is published before the answers that carry it reach the
        // applier, which reads it when it serves them.
        let received = core.core();
        state
            .lsn_released
            .fetch_max(received.lsn_released(), Ordering::AcqRel);
        if received.released_heard() != released_heard {
            released_heard = received.released_heard();
            let heard = (now, received.lsn_released());
            *state.released_heard.lock().expect("not poisoned") = Some(heard);
        }
        // The log takes them in the order the applier will.
        if let Some(log) = &state.log {
            for order in tandem_node::receiver_orders(&ready, core.core().view()) {
                log.order(order);
            }
        }
        if let Some(image) = ready.to_install.take() {
            if to_applier.send(ToApplier::Install(image)).is_err() {
                return Ok(());
            }
            // Its diverged pages are replaced: a later connection introduces itself plainly.
            if !core.core().is_diverged() {
                *state.diverged.lock().expect("not poisoned") = None;
            }
        }
        for apply in ready.to_apply.drain(..) {
            if to_applier.send(ToApplier::Batch(apply)).is_err() {
                return Ok(());
            }
        }
        for (id, lsn) in ready.read_indexes.drain(..) {
            if to_applier.send(ToApplier::ReadIndexed { id, lsn }).is_err() {
                return Ok(());
            }
        }
        let received = core.core();
        state
            .lsn_received
            .store(received.lsn_received(), Ordering::Release);
        state
            .metrics
            .lsn_received
            .set(received.lsn_received() as i64);
        for fault in ready.faults.drain(..) {
            let reason = match fault {
                ReceiverFault::Corrupt { .. } => "corrupt",
                ReceiverFault::Gap { .. } => "gap",
                ReceiverFault::Duplicate { .. } => "duplicate",
                ReceiverFault::StaleMessage { .. } => "stale_view",
                _ => "other",
            };
            let label = ReasonLabel {
                reason: reason.into(),
            };
            state.metrics.batches_rejected.get_or_create(&label).inc();
        }
        out.clear();
        for (_, message) in ready.messages.drain(..) {
            encode_peer(&mut out, &message);
        }
        ready.clear();
        if !out.is_empty() {
            let written = writer.lock().expect("not poisoned").write_frames(&out);
            if let Err(err) = written {
                drop(gate);
                let err = ConnError::from(err);
                tell_if_closed(state, &writer, primary, &err);
                return Err(err);
            }
        }
        drop(gate);
        match net::fill(stream, &mut buffer) {
            Ok(0) => {}
            Ok(_) => {
                state.reads_heard.fetch_add(1, Ordering::Relaxed);
                // A long frame is arriving: the primary hears this backup meanwhile, once a
                // tick, as it would between frames.
                let tick_now = core.core().ticks();
                let partial = !buffer.holds_whole_frame().unwrap_or(true);
                if partial && tick_answered_receiving != Some(tick_now) {
                    tick_answered_receiving = Some(tick_now);
                    core.receiving();
                }
            }
            Err(err) => {
                tell_if_closed(state, &writer, primary, &err);
                return Err(err);
            }
        }
    }
}

/// The primary's side ended the connection (a read found its end, or a read or an ack's write
/// failed): if it is still the one the acks go to (not one a newer connection replaced), the
/// primary's process may have died, and the supervisor hears of it at once. A write counts as
/// much as a read: a killed process's socket resets when it held unread acks, and the ack
/// written first then fails before any read can (one failover in about two hundred waited
/// out the silence, 30 ms, for that).
fn tell_if_closed(state: &Shared, writer: &SharedWriter, primary: NodeId, err: &ConnError) {
    let current = state
        .ack_writer
        .lock()
        .expect("not poisoned")
        .as_ref()
        .is_some_and(|current| Arc::ptr_eq(current, writer));
    if current
        && matches!(err, ConnError::Closed | ConnError::Io(_))
        && let Some(peer_closed) = &state.peer_closed
    {
        peer_closed.tell(primary);
    }
}

/// A backup role's client connection on the node's I/O loop (`crate::native`): it is
/// welcomed as a backup, its reads are served one at a time (the next frame is taken once
/// the last read is answered, so replies keep the order of the frames), `Call` frames get
/// `NotPrimary` and `Members` frames are answered at once. It outlives the role harmlessly:
/// a read the role drops unanswered closes the connection.
pub(crate) struct BackupService {
    state: Shared,
    to_applier: ReadSink,
    /// Where the answers go, once the connection opened.
    sink: Option<FrameSink>,
    /// A read was handed over and is not answered yet.
    waiting: bool,
}

impl Service for BackupService {
    fn open(&mut self, sink: FrameSink, out: &mut Vec<u8>) -> Result<(), ConnError> {
        encode_welcome(
            out,
            &Welcome {
                version: tandem_wire::PROTOCOL_VERSION,
                node_id: self.state.node_id,
                role: Role::Backup,
                view: self.state.gate.view(),
                lsn: self.state.lsn_applied.load(Ordering::Acquire),
            },
        );
        self.sink = Some(sink);
        Ok(())
    }

    fn take(
        &mut self,
        buffer: &mut FrameBuffer,
        local: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnError> {
        let state = &self.state;
        while !self.waiting
            && let Some(frame) = buffer.next_frame().map_err(ConnError::Frame)?
        {
            match frame {
                Frame::Read(read) => {
                    let now = Instant::now();
                    let needs = Needs::of(read.consistency, |staleness_ms| {
                        let staleness = Duration::from_millis(u64::from(staleness_ms));
                        now.checked_sub(staleness)
                            .map_or(state.started, |from| from.max(state.started))
                    });
                    let sink = self
                        .sink
                        .clone()
                        .expect("a connection opens before it reads");
                    let request = ReadRequest {
                        seq: read.seq,
                        proc_id: read.proc_id,
                        min_lsn: read.min_lsn,
                        args: read.args.to_vec(),
                        deadline: now + READ_WAIT,
                        to: ReadTo::Frame(FrameReply::new(sink)),
                        needs,
                    };
                    // The role answers every read by its deadline, or drops it (a role
                    // change), which closes the connection.
                    if !self.to_applier.send(request) {
                        return Err(ConnError::Closed);
                    }
                    self.waiting = true;
                }
                Frame::Call(_) => {
                    let message = format!(
                        "node {} is a backup: it serves reads only; send calls to the primary",
                        state.node_id
                    );
                    encode_error(out, ErrorCode::NotPrimary, &message);
                }
                Frame::Members => state.members.answer(out, state.gate.view(), local),
                _ => {
                    return Err(ConnError::Protocol(
                        crate::native::ONLY_CALLS_AFTER_HELLO.into(),
                    ));
                }
            }
        }
        Ok(())
    }

    fn mail(&mut self, frames: Option<Vec<u8>>, out: &mut Vec<u8>) -> Result<(), ConnError> {
        self.waiting = false;
        let frame = frames.ok_or(ConnError::Closed)?;
        out.extend_from_slice(&frame);
        Ok(())
    }

    fn takes_more(&self) -> bool {
        !self.waiting
    }

    fn closed(&mut self) {}
}

/// Answers the reads the node core's rule says can be answered now (see
/// [`tandem_node::BackupReads::answer`]), each to where it goes: a frame to a reader
/// thread, or the answer itself to a [`BackupPort`].
fn serve_reads_waiting(replica: &Replica, state: &Shared, reads: &mut Reads) {
    if reads.is_empty() {
        return;
    }
    let heard = *state.released_heard.lock().expect("not poisoned");
    if let Some((at, lsn)) = heard {
        reads.heard_released(at, lsn);
    }
    let lsn_released = state.lsn_released.load(Ordering::Acquire);
    let model = replica.model.as_deref();
    reads.answer(
        &replica.applier,
        model,
        lsn_released,
        Instant::now(),
        |to, seq, answer| {
            if matches!(answer, ReadAnswer::Served { .. }) {
                state.metrics.reads_served.inc();
            } else if matches!(answer, ReadAnswer::Busy { .. }) {
                state.metrics.reads_refused.inc();
            }
            match to {
                ReadTo::Frame(to) => to.answer(answer_frame(state.node_id, seq, answer)),
                ReadTo::Local(read) => read.answer(answer),
            }
        },
    );
}

/// A read's answer as the frame a stub's reader thread sends.
pub(crate) fn answer_frame(node_id: NodeId, seq: u64, answer: ReadAnswer) -> Vec<u8> {
    let mut frame = Vec::new();
    match answer {
        ReadAnswer::Served { lsn, body } => {
            encode_reply(&mut frame, seq, lsn, ReplyStatus::Committed, &body);
        }
        ReadAnswer::RolledBack { lsn, reason } => {
            let status = ReplyStatus::RolledBack;
            encode_reply(&mut frame, seq, lsn, status, reason.as_bytes());
        }
        ReadAnswer::Writes { proc_id } => {
            let message = format!(
                "procedure {proc_id} writes: send it to the primary, not to backup {node_id}"
            );
            encode_error(&mut frame, ErrorCode::NotPrimary, &message);
        }
        ReadAnswer::Unknown { proc_id } => {
            let message = format!("no procedure has id {proc_id}");
            encode_error(&mut frame, ErrorCode::UnknownProcedure, &message);
        }
        ReadAnswer::Busy {
            lsn_applied,
            lsn_released,
            min_lsn,
        } => {
            let needs = match min_lsn {
                Some(lsn) => format!("the read needs LSN {lsn}"),
                None => "the primary did not say what the read needs in time".into(),
            };
            let message = format!(
                "node {node_id} has applied LSN {lsn_applied} and may show up to LSN \
                 {lsn_released}; {needs}: ask the primary"
            );
            encode_error(&mut frame, ErrorCode::Busy, &message);
        }
    }
    frame
}

/// Whether the applier holds further batches back for a waiting read.
fn holding_for_reads(replica: &Replica, state: &Shared, reads: &Reads) -> bool {
    reads.holding(
        replica.lsn_applied(),
        state.lsn_released.load(Ordering::Acquire),
    )
}

/// The reads waiting at the applier.
type Reads = BackupReads<ReadTo, Instant>;

/// `tail_start`: the batches a backup that switched primaries kept (oldest first, ending at its
/// segment's LSN), so that its retained tail stays whole across a view change.
fn run_applier(
    mut replica: Replica,
    batches: Receiver<ToApplier>,
    control: Receiver<Control>,
    state: Shared,
) {
    let mut frame = Vec::new();
    let mut log_orders = Vec::new();
    // Items taken off the channel while batches were held back for a read, in order.
    let mut held: VecDeque<ToApplier> = VecDeque::new();
    let mut reads = Reads::new(
        tandem_wire::reply_body_len_max(state.max_frame_len),
        question_first(),
    );
    loop {
        serve_reads_waiting(&replica, &state, &mut reads);
        if holding_for_reads(&replica, &state, &reads) {
            // Take what arrives without applying it: reads join the waiting ones; anything
            // but a batch (a transfer, a handover) cannot wait, and ends the hold.
            let wait = Duration::from_micros(200);
            let first = match batches.recv_timeout(wait) {
                Ok(item) => Some(item),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            };
            for item in first
                .into_iter()
                .chain(std::iter::from_fn(|| batches.try_recv().ok()))
            {
                match item {
                    ToApplier::Read(read) => reads.push(read),
                    ToApplier::ReadIndexed { id, lsn } => {
                        reads.indexed(id, lsn);
                    }
                    other => held.push_back(other),
                }
            }
            ask_read_index(&replica, &state, &mut reads, &mut frame);
            if held.iter().all(|item| matches!(item, ToApplier::Batch(_))) {
                continue;
            }
            reads.expire(Instant::now());
            serve_reads_waiting(&replica, &state, &mut reads);
        }
        let wait = if replica.applier.checkpoint_under_way() {
            // A checkpoint goes on between batches, and whenever none waits.
            Duration::ZERO
        } else if reads.is_empty() {
            Duration::from_millis(10)
        } else {
            // Waiting reads need their deadlines and questions looked at soon.
            READ_INDEX_RETRY
        };
        let first = match held.pop_front() {
            Some(item) => Some(item),
            None => match batches.recv_timeout(wait) {
                Ok(first) => Some(first),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            },
        };
        let mut take_next = || held.pop_front().or_else(|| batches.try_recv().ok());
        let mut next = first;
        while let Some(item) = next {
            match item {
                ToApplier::Read(read) => {
                    reads.push(read);
                    ask_read_index(&replica, &state, &mut reads, &mut frame);
                    // Stop applying while it could be served as things stand.
                    if reads.could_be_served(replica.lsn_applied()) {
                        break;
                    }
                }
                ToApplier::ReadIndexed { id, lsn } => {
                    reads.indexed(id, lsn);
                    if reads.could_be_served(replica.lsn_applied()) {
                        break;
                    }
                }
                ToApplier::Batch(batch) => match replica.applier.apply(batch) {
                    Ok(Some(lsn)) => {
                        state.note_applied(lsn);
                        // Under a steady stream this loop never runs dry: a checkpoint goes
                        // on between batches.
                        checkpoint_step(&mut replica, &state, &mut log_orders);
                    }
                    Ok(None) => {}
                    Err(err) => {
                        tracing::error!(
                            "node {}: poisoned: a batch that passed its checksum cannot be \
                             applied ({err}); this backup stops applying",
                            state.node_id
                        );
                        return;
                    }
                },
                ToApplier::Install(image) => match replica.applier.install(&image) {
                    Ok(Some(lsn)) => {
                        state.note_applied(lsn);
                        tracing::info!(
                            "node {}: installed a state transfer of {} pages, LSN {} → {lsn}",
                            state.node_id,
                            image.page_count(),
                            image.lsn_from
                        );
                    }
                    Ok(None) => {}
                    Err(err) => {
                        tracing::error!(
                            "node {}: poisoned: a state transfer that passed its checksums \
                             cannot be installed ({err}); this backup stops applying",
                            state.node_id
                        );
                        return;
                    }
                },
                ToApplier::Handover { lsn, reply } => {
                    // Not there yet means the batches up to `lsn` were never queued: the
                    // role ends either way.
                    let _ = reply.send(replica.applier.handover(lsn));
                    return;
                }
            }
            next = take_next();
        }
        while let Ok(request) = control.try_recv() {
            answer(&replica, &state, request);
        }
        ask_read_index(&replica, &state, &mut reads, &mut frame);
        if let Some(ack) = replica.applier.take_ack(state.gate.view()) {
            state.send_ack(&ack, &mut frame);
        }
        checkpoint_step(&mut replica, &state, &mut log_orders);
    }
}

/// One step of the role's checkpoint, if the node keeps a log: its orders go to the log at once.
fn checkpoint_step(replica: &mut Replica, state: &Shared, orders: &mut Vec<tandem_node::LogOrder>) {
    if let Some(log) = &state.log {
        replica
            .applier
            .checkpoint_step(log.checkpoint_wanted(), orders);
        for order in orders.drain(..) {
            log.order(order);
        }
    }
}

/// Sends the primary the `ReadIndex` question the node core hands out, if any, on the
/// connection acks use (none while no primary is connected: the core asks again later).
fn ask_read_index(replica: &Replica, state: &Shared, reads: &mut Reads, frame: &mut Vec<u8>) {
    let now = Instant::now();
    let lsn_released = state.lsn_released.load(Ordering::Acquire);
    let question = reads.question(
        now,
        now + READ_INDEX_RETRY,
        replica.lsn_applied(),
        lsn_released,
    );
    let Some(id) = question else {
        return;
    };
    let view = state.gate.view();
    frame.clear();
    encode_peer(frame, &Message::ReadIndex { view, id });
    let writer = state.ack_writer.lock().expect("not poisoned").clone();
    if let Some(writer) = writer {
        let _ = writer.lock().expect("not poisoned").write_frames(frame);
    }
}

fn answer(replica: &Replica, state: &Shared, request: Control) {
    match request {
        Control::Status(reply) => {
            let lsn = replica.lsn_applied();
            let _ = reply.send(NodeStatus {
                node_id: state.node_id,
                role: "backup",
                view: state.gate.view(),
                lsn: state.lsn_received.load(Ordering::Acquire),
                lsn_applied: lsn,
                pending_replies: 0,
                backups: Vec::new(),
                commits: 0,
                shipped_data_bytes: 0,
                shipped_undo_bytes: 0,
                shipped_meta_bytes: 0,
                shipped_wire_bytes: 0,
                check: None,
            });
        }
        Control::Checksum(reply) => {
            let _ = reply.send(replica.checksum());
        }
        Control::Stop => {}
    }
}

#[cfg(test)]
mod tests {
    use tandem_store::{Compiled, Store, Workload};
    use tandem_wire::{Reply, decode_frame};
    use tandem_workloads::debit_credit::{BALANCE, DEBIT_CREDIT, DebitCredit};

    use super::*;

    const SEGMENT_LEN: usize = 1 << 20;

    fn state(lsn_released: u64) -> Shared {
        let config = crate::config::NodeConfig::from_toml_str(crate::config::EXAMPLE)
            .expect("the example parses");
        let metrics = Arc::new(Metrics::new(2, "backup"));
        Shared {
            node_id: 2,
            group: 0,
            tick: Duration::from_millis(1),
            max_frame_len: tandem_wire::MAX_FRAME_LEN_DEFAULT,
            lsn_applied: Arc::new(AtomicU64::new(0)),
            lsn_received: Arc::new(AtomicU64::new(0)),
            lsn_synced_told: Arc::new(AtomicU64::new(0)),
            lsn_released: Arc::new(AtomicU64::new(lsn_released)),
            released_heard: Arc::new(Mutex::new(None)),
            started: Instant::now(),
            reads_heard: Arc::new(AtomicU64::new(0)),
            gate: Arc::new(Gate::new(1, 1)),
            ack_writer: Arc::new(Mutex::new(None)),
            auth: PeerAuth::new(&config, &metrics).expect("no TLS files"),
            metrics,
            peer_closed: None,
            diverged: Arc::new(Mutex::new(None)),
            lsn_before_rewind: None,
            members: MemberList::of(&config),
            log: None,
        }
    }

    /// A replica whose account 0 holds 7, after the load and one deposit.
    fn replica() -> Replica {
        let workload = DebitCredit::new(SEGMENT_LEN, &Default::default()).unwrap();
        let segment = Segment::anonymous(SEGMENT_LEN, tandem_memory::Strategy::V3InlineLog);
        let mut store = Store::load(segment.unwrap(), Compiled::boxed(workload.clone()));
        let mut args = Vec::new();
        for field in [0u32, 0, 0] {
            args.extend_from_slice(&field.to_le_bytes());
        }
        args.extend_from_slice(&7i32.to_le_bytes());
        store.call(DEBIT_CREDIT, &args, &mut Vec::new()).unwrap();
        let (segment, _) = store.into_parts();
        active_replica(
            segment,
            Compiled::boxed(workload.clone()),
            Vec::new(),
            TailLimits {
                records_max: 1_000,
                bytes_max: 1 << 20,
            },
        )
    }

    fn read(min_lsn: u64, proc_id: u16, deadline: Instant) -> (ReadRequest, Receiver<Vec<u8>>) {
        let (answer, answered) = mpsc::channel();
        let request = ReadRequest {
            seq: 9,
            proc_id,
            min_lsn,
            args: 0u32.to_le_bytes().to_vec(),
            deadline,
            to: ReadTo::Frame(FrameReply::new(FrameSink::Thread(answer))),
            needs: Needs::Nothing,
        };
        (request, answered)
    }

    fn reads_with(request: ReadRequest) -> Reads {
        let mut reads = Reads::new(
            tandem_wire::reply_body_len_max(tandem_wire::MAX_FRAME_LEN_DEFAULT),
            question_first(),
        );
        reads.push(request);
        reads
    }

    fn decoded(bytes: &[u8]) -> Frame<'_> {
        decode_frame(bytes, tandem_wire::MAX_FRAME_LEN_DEFAULT)
            .unwrap()
            .unwrap()
            .0
    }

    #[test]
    fn a_read_waits_for_its_min_lsn_and_for_the_primary_to_release_what_is_applied() {
        let replica = replica();
        let lsn = replica.lsn_applied();
        let later = Instant::now() + Duration::from_secs(60);
        // Applied beyond what the primary released: nothing is shown yet.
        let state = state(lsn - 1);
        let (request, answered) = read(lsn - 1, BALANCE.0, later);
        let mut reads = reads_with(request);
        serve_reads_waiting(&replica, &state, &mut reads);
        assert_eq!(
            reads.len(),
            1,
            "served a state the primary had not released"
        );
        assert!(holding_for_reads(&replica, &state, &reads));
        // Released: served, at the applied LSN.
        state.lsn_released.store(lsn, Ordering::Release);
        serve_reads_waiting(&replica, &state, &mut reads);
        assert!(reads.is_empty());
        let bytes = answered.try_recv().unwrap();
        let Frame::Reply(Reply {
            seq, lsn: at, body, ..
        }) = decoded(&bytes)
        else {
            panic!("not a reply");
        };
        assert_eq!((seq, at, body), (9, lsn, &7i32.to_le_bytes()[..]));

        // A read that needs a later LSN waits, then is told to ask the primary.
        let (request, answered) = read(lsn + 1, BALANCE.0, later);
        let mut reads = reads_with(request);
        serve_reads_waiting(&replica, &state, &mut reads);
        assert_eq!(reads.len(), 1, "served a state older than min_lsn");
        assert!(!holding_for_reads(&replica, &state, &reads));
        reads.expire(Instant::now());
        serve_reads_waiting(&replica, &state, &mut reads);
        let bytes = answered.try_recv().unwrap();
        assert!(
            matches!(decoded(&bytes), Frame::Error(error) if error.code == ErrorCode::Busy),
            "a late read is answered Busy"
        );
    }

    #[test]
    fn a_backup_runs_no_procedure_that_writes() {
        let replica = replica();
        let state = state(u64::MAX);
        let (request, answered) = read(0, DEBIT_CREDIT.0, Instant::now());
        let mut reads = reads_with(request);
        serve_reads_waiting(&replica, &state, &mut reads);
        let bytes = answered.try_recv().unwrap();
        assert!(matches!(
            decoded(&bytes),
            Frame::Error(error) if error.code == ErrorCode::NotPrimary
        ));
        assert!(DebitCredit::registry().get(DEBIT_CREDIT).is_some());
    }

    /// The RESP front end's reads: each is answered exactly once, the front end is woken once
    /// until it takes the answers, and a read the applier could not take (its queue full) or
    /// dropped unanswered (its role ended) is answered as lost, never left waiting.
    #[test]
    fn a_local_read_is_answered_once_and_one_never_served_as_lost() {
        let woken = Arc::new(AtomicU64::new(0));
        let wake = {
            let woken = Arc::clone(&woken);
            Arc::new(move || {
                woken.fetch_add(1, Ordering::Relaxed);
            })
        };
        let (to_applier, applier) = mpsc::sync_channel(1);
        let mut port = BackupPort {
            to_applier: ReadSink::Applier(to_applier),
            answers: Arc::new(LocalAnswers {
                answers: Mutex::new(Vec::new()),
                woken: AtomicBool::new(false),
                wake,
            }),
            role: 0,
            lsn_applied: Arc::default(),
            seq_next: 0,
        };
        let first = port.push(7, vec![1]);
        let full = port.push(7, vec![2]);
        let mut answers = Vec::new();
        port.take(&mut answers);
        assert_eq!(answers, [(full, None)], "the queue held one read");
        assert_eq!(woken.load(Ordering::Relaxed), 1);

        let Ok(ToApplier::Read(read)) = applier.try_recv() else {
            panic!("the first read reached the applier")
        };
        assert_eq!(read.needs, Needs::ReadIndex, "a RESP read is linearizable");
        assert_eq!(read.args, [1]);
        let ReadTo::Local(local) = read.to else {
            panic!("its answer goes back to the port")
        };
        local.answer(ReadAnswer::Unknown { proc_id: 7 });
        let dropped = port.push(7, vec![3]);
        drop(applier.try_recv().expect("the third read"));
        answers.clear();
        port.take(&mut answers);
        assert_eq!(
            answers,
            [
                (first, Some(ReadAnswer::Unknown { proc_id: 7 })),
                (dropped, None)
            ]
        );
        assert_eq!(
            woken.load(Ordering::Relaxed),
            2,
            "one wake-up for both answers taken together"
        );
    }
}
