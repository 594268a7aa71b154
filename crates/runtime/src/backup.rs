//! The backup node: a receiver thread per primary connection and one applier thread.
//!
//! The receiver thread reads batches, runs them through the receiver core, queues accepted
//! ones for the applier and acks receipt at once (a 2-safe ack never waits for application,
//! seed 004 §3.2). The applier thread owns the segment (or, in passive mode, the mirror
//! memory), applies batches in order and acks what it applied, once per drained queue.

use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use tandem_memory::{PassiveMirror, Segment};
use tandem_replication::{
    Applier, ApplyBatch, Message, NodeId, PassiveApplier, Receiver as ReceiverCore, ReceiverConfig,
    ReceiverFault, ReceiverReady,
};
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, PeerKind, Role, Welcome, encode_error, encode_peer,
    encode_welcome,
};

use crate::config::{Mode, NodeConfig};
use crate::metrics::{Metrics, ReasonLabel};
use crate::net::{self, ConnError};
use crate::workload::ServedWorkload;
use crate::{Checksum, Control, NodeStatus};

/// Batches received and not yet applied, at most (64 MiB of 64 KiB batches).
const APPLIER_QUEUE_BATCHES: usize = 1024;

/// What the applier thread receives from the receivers.
enum ToApplier {
    Batch(ApplyBatch),
}

/// A workload's consistency check: None when the segment is consistent.
type ConsistencyCheck = Box<dyn Fn(&Segment) -> Option<String> + Send>;

/// The applier's state: an active backup's segment or a passive backup's mirror.
enum Replica {
    Active {
        segment: Segment,
        applier: Applier,
        /// The workload's consistency check.
        check: ConsistencyCheck,
    },
    Passive {
        mirror: PassiveMirror,
        applier: PassiveApplier,
    },
}

impl Replica {
    fn lsn_applied(&self) -> u64 {
        match self {
            Replica::Active { applier, .. } => applier.lsn_applied(),
            Replica::Passive { applier, .. } => applier.lsn_applied(),
        }
    }

    fn apply(&mut self, batch: &ApplyBatch) -> Result<u64, tandem_replication::ApplyError> {
        match self {
            Replica::Active {
                segment, applier, ..
            } => applier.apply(segment, batch),
            Replica::Passive { mirror, applier } => applier.apply(mirror, batch),
        }
    }

    fn checksum(&self) -> Checksum {
        match self {
            Replica::Active { segment, check, .. } => {
                let mut checksum = Checksum::of(segment.bytes(), segment.lsn());
                checksum.check = check(segment);
                checksum
            }
            Replica::Passive { mirror, applier } => match mirror.recover() {
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

/// A running backup.
#[derive(Debug)]
pub struct BackupHandle {
    control: Sender<Control>,
    pub applier: JoinHandle<()>,
}

impl BackupHandle {
    pub fn status(&self) -> Option<NodeStatus> {
        let (reply, answer) = mpsc::channel();
        self.control.send(Control::Status(reply)).ok()?;
        answer.recv_timeout(Duration::from_secs(5)).ok()
    }

    pub fn checksum(&self) -> Option<Checksum> {
        let (reply, answer) = mpsc::channel();
        self.control.send(Control::Checksum(reply)).ok()?;
        answer.recv_timeout(Duration::from_secs(30)).ok()
    }
}

/// Starts a backup of `workload`: loads the same initial database as the primary (the load is
/// deterministic), then accepts the primary's connection on `listener`.
pub fn start<W: ServedWorkload>(
    config: &NodeConfig,
    listener: TcpListener,
    workload: W,
    metrics: Arc<Metrics>,
) -> Result<BackupHandle, String>
where
    W::Driver: Send,
{
    let group = &config.group;
    let mut segment = crate::workload::loaded_segment(group, &workload)?;
    let lsn_start = segment.lsn();
    metrics.lsn_received.set(lsn_start as i64);
    metrics.lsn_applied.set(lsn_start as i64);
    let replica = match group.mode {
        Mode::Active => {
            let checked = workload.clone();
            Replica::Active {
                segment,
                applier: Applier::new(lsn_start),
                check: Box::new(move |segment| checked.check(segment).err().map(|e| e.to_string())),
            }
        }
        Mode::Passive => {
            let layout = segment
                .enable_passive_trace(group.undo_log_kib << 10)
                .map_err(|err| format!("group.mode: {err}"))?;
            let mirror = PassiveMirror::from_image(layout, &segment.passive_image())
                .map_err(|err| format!("group.mode: {err}"))?;
            drop(segment);
            Replica::Passive {
                mirror,
                applier: PassiveApplier::new(lsn_start),
            }
        }
    };
    // Bounded: when the applier falls this far behind, the receiver blocks, stops reading and
    // acking, the primary's retained tail fills, and its flow control stops commits.
    let (to_applier, applier_rx) = mpsc::sync_channel(APPLIER_QUEUE_BATCHES);
    let (control, control_rx) = mpsc::channel();
    let lsn_applied = Arc::new(AtomicU64::new(lsn_start));
    let lsn_received = Arc::new(AtomicU64::new(lsn_start));
    let ack_writer: Arc<Mutex<Option<SharedWriter>>> = Arc::new(Mutex::new(None));
    let state = Shared {
        node_id: config.node_id,
        group: group.id,
        view: group.view,
        tick: Duration::from_micros(config.tuning.tick_us),
        max_frame_len: config.tuning.max_frame_len,
        lsn_applied: Arc::clone(&lsn_applied),
        lsn_received: Arc::clone(&lsn_received),
        ack_writer: Arc::clone(&ack_writer),
        metrics: Arc::clone(&metrics),
    };
    let applier_state = state.clone();
    let applier = thread::Builder::new()
        .name("applier".into())
        .spawn(move || run_applier(replica, applier_rx, control_rx, applier_state))
        .map_err(|err| format!("cannot start the applier: {err}"))?;
    thread::Builder::new()
        .name("accept".into())
        .spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let state = state.clone();
                let to_applier = to_applier.clone();
                let _ = thread::Builder::new()
                    .name("receiver".into())
                    .spawn(move || serve_connection(stream, state, to_applier));
            }
        })
        .map_err(|err| format!("cannot start the accept thread: {err}"))?;
    Ok(BackupHandle { control, applier })
}

/// The writing half of a connection to the primary. Its receiver thread and the applier both
/// write acks on it, so each frame is written whole under the lock, never interleaved.
type SharedWriter = Arc<Mutex<TcpStream>>;

#[derive(Clone)]
struct Shared {
    node_id: NodeId,
    group: u32,
    view: u64,
    tick: Duration,
    max_frame_len: usize,
    lsn_applied: Arc<AtomicU64>,
    lsn_received: Arc<AtomicU64>,
    /// The connection to the current primary, shared by the receiver (receipt acks) and the
    /// applier (application acks).
    ack_writer: Arc<Mutex<Option<SharedWriter>>>,
    metrics: Arc<Metrics>,
}

fn serve_connection(mut stream: TcpStream, state: Shared, to_applier: SyncSender<ToApplier>) {
    if let Err(err) = receive(&mut stream, &state, &to_applier)
        && !matches!(err, ConnError::Closed | ConnError::Io(_))
    {
        state.metrics.frames_rejected.inc();
        let mut frame = Vec::new();
        let code = match &err {
            ConnError::Frame(err) => err.code(),
            _ => ErrorCode::BadFrame,
        };
        encode_error(&mut frame, code, &err.to_string());
        let _ = net::write_all(&mut stream, &frame);
    }
    let _ = stream.shutdown(std::net::Shutdown::Both);
}

fn receive(
    stream: &mut TcpStream,
    state: &Shared,
    to_applier: &SyncSender<ToApplier>,
) -> Result<(), ConnError> {
    net::tune(stream)?;
    let mut buffer = FrameBuffer::new(state.max_frame_len);
    let primary = net::read_one(
        stream,
        &mut buffer,
        Duration::from_secs(10),
        |frame| match frame {
            Frame::Hello(hello) if hello.peer == PeerKind::Replica => NodeId::try_from(hello.id)
                .map_err(|_| {
                    ConnError::Protocol(format!("node id {} does not fit 32 bits", hello.id))
                }),
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
    let lsn_received = state.lsn_received.load(Ordering::Acquire);
    let mut welcome = Vec::new();
    encode_welcome(
        &mut welcome,
        &Welcome {
            version: tandem_wire::PROTOCOL_VERSION,
            node_id: state.node_id,
            role: Role::Backup,
            view: state.view,
            lsn: lsn_received,
        },
    );
    net::write_all(stream, &welcome)?;
    let writer: SharedWriter = Arc::new(Mutex::new(stream.try_clone()?));
    *state.ack_writer.lock().expect("not poisoned") = Some(Arc::clone(&writer));
    let receiver_config = ReceiverConfig {
        group: state.group,
        view: state.view,
        primary,
        nack_ticks: 2,
    };
    let mut core = ReceiverCore::new(receiver_config, lsn_received);
    core.applied(state.lsn_applied.load(Ordering::Acquire).min(lsn_received));
    core.introduce();
    let mut ready = ReceiverReady::default();
    let mut out = Vec::new();
    stream.set_read_timeout(Some(state.tick))?;
    let mut next_tick = Instant::now() + state.tick;
    loop {
        let lsn_applied = state.lsn_applied.load(Ordering::Acquire);
        if lsn_applied > core.lsn_applied() && lsn_applied <= core.lsn_received() {
            core.applied(lsn_applied);
        }
        while let Some(frame) = buffer.next_frame()? {
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
        for apply in ready.to_apply.drain(..) {
            if to_applier.send(ToApplier::Batch(apply)).is_err() {
                return Ok(());
            }
        }
        state
            .lsn_received
            .store(core.lsn_received(), Ordering::Release);
        state.metrics.lsn_received.set(core.lsn_received() as i64);
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
            writer.lock().expect("not poisoned").write_all(&out)?;
        }
        net::fill(stream, &mut buffer)?;
    }
}

fn run_applier(
    mut replica: Replica,
    batches: Receiver<ToApplier>,
    control: Receiver<Control>,
    state: Shared,
) {
    let mut frame = Vec::new();
    loop {
        let first = match batches.recv_timeout(Duration::from_millis(10)) {
            Ok(first) => Some(first),
            Err(mpsc::RecvTimeoutError::Timeout) => None,
            Err(mpsc::RecvTimeoutError::Disconnected) => return,
        };
        let mut applied_any = false;
        let mut next = first;
        while let Some(item) = next {
            match item {
                ToApplier::Batch(batch) => {
                    if batch.lsn_from != replica.lsn_applied() + 1 {
                        // A batch accepted by an older connection's receiver that a newer one
                        // also accepted; the receiver guarantees continuity per connection.
                        if batch.batch.lsn_last() <= replica.lsn_applied() {
                            next = batches.try_recv().ok();
                            continue;
                        }
                    }
                    match replica.apply(&batch) {
                        Ok(lsn) => {
                            applied_any = true;
                            state.lsn_applied.store(lsn, Ordering::Release);
                            state.metrics.lsn_applied.set(lsn as i64);
                        }
                        Err(err) => {
                            eprintln!(
                                "node {}: poisoned: a batch that passed its checksum cannot be \
                                 applied ({err}); this backup stops applying",
                                state.node_id
                            );
                            return;
                        }
                    }
                }
            }
            next = batches.try_recv().ok();
        }
        while let Ok(request) = control.try_recv() {
            answer(&replica, &state, request);
        }
        if applied_any {
            let lsn = replica.lsn_applied();
            let ack = Message::Ack {
                view: state.view,
                lsn_received: lsn,
                lsn_applied: lsn,
            };
            frame.clear();
            encode_peer(&mut frame, &ack);
            let writer = state.ack_writer.lock().expect("not poisoned").clone();
            if let Some(writer) = writer {
                let _ = writer.lock().expect("not poisoned").write_all(&frame);
            }
        }
    }
}

fn answer(replica: &Replica, state: &Shared, request: Control) {
    match request {
        Control::Status(reply) => {
            let lsn = replica.lsn_applied();
            let _ = reply.send(NodeStatus {
                node_id: state.node_id,
                role: "backup",
                view: state.view,
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
