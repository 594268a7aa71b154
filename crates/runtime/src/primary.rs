//! The primary node: one executor thread that drives the node core's primary role (the store
//! and the replication core), one link per backup (a writer thread and an ack reader thread,
//! `link.rs`), and client connections (`client.rs`).
//!
//! The executor never blocks on the network. Each turn of its loop it takes whatever arrived
//! (calls, acks, control requests), runs calls until none is queued or flow control says stop,
//! seals the open batch when it has nothing left to run, and carries out the role's
//! `RoleReady`: batches go to the links' queues, answers to the connections' writers, what the
//! cluster core must hear to the supervisor. Ticks come from the clock, checked every turn.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::io::{BufWriter, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use prometheus_client::metrics::gauge::Gauge;
use tandem_log::{BatchKind, TailLimits};
use tandem_memory::ClassBytes;
use tandem_node::{Answer, AnswerKind, Call, Observed, PrimaryRole, Ran, Refusal, RoleReady};
use tandem_replication::{
    Disposition, LeaseMargins, Message, NodeId, Primary, PrimaryConfig, PrimaryFault, Safety,
};
use tandem_store::{DataModel, Driver, ProcId, Store};
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, Hello, PeerKind, ReplyStatus, Role, Welcome, encode_error,
    encode_hello, encode_peer, encode_reply, encode_welcome,
};

use crate::config::{Mode, NodeConfig};
use crate::metrics::Metrics;
use crate::net::{self, ConnError};
use crate::{Checksum, Control, NodeStatus, StartError};

mod client;
mod link;

use client::{Acceptor, Client, ClientContext};
use link::LinkFactory;

/// A client connection's number on this node.
pub type ConnId = u64;

/// Calls a connection's reader parsed from one read, for the executor.
#[derive(Debug)]
pub struct CallBatch {
    conn: ConnId,
    client_id: u64,
    bytes: Vec<u8>,
    calls: Vec<CallSlot>,
}

#[derive(Clone, Debug)]
struct CallSlot {
    seq: u64,
    proc_id: u16,
    safety: Option<Safety>,
    args: Range<usize>,
    /// Sent as a `Read`: refused if the procedure writes.
    read_only: bool,
}

/// What reaches the executor from other threads.
#[derive(Debug)]
pub enum Inbound {
    Calls(CallBatch),
    Peer {
        from: NodeId,
        message: Message,
    },
    /// A link to a backup was (re)established: what was in flight on the old one is lost.
    LinkUp {
        node: NodeId,
    },
    ConnOpened {
        conn: ConnId,
        out: Sender<Vec<u8>>,
        /// Calls of this connection not yet answered (see `UNANSWERED_MAX`).
        unanswered: Arc<AtomicU64>,
    },
    ConnClosed {
        conn: ConnId,
    },
    /// The config store committed a view in which this node is still the primary.
    View {
        view: u64,
        backups: Vec<NodeId>,
        spares: Vec<NodeId>,
        /// Where each new member listens.
        addresses: Vec<(NodeId, SocketAddr)>,
    },
    /// The config store committed view `view`, whose primary is another node: abandon every
    /// pending reply and stop.
    Depose {
        view: u64,
    },
    /// The node's cluster core wants backup `backup` removed from view `view`: the
    /// replication core prepares the removal (`Primary::prepare_removal`) and the executor
    /// answers with [`Observed::RemovalPrepared`].
    PrepareRemoval {
        view: u64,
        backup: NodeId,
    },
    Control(Control),
}

/// Where a released answer goes, and when its call started.
#[derive(Debug, Clone, Copy)]
pub enum ReplyTo {
    /// A call of the in-process load.
    Local { started: Instant },
    /// A client connection's call.
    Remote { conn: ConnId, started: Instant },
}

/// How often at most the executor tells the node it heard a backup.
const OBSERVE_INTERVAL: Duration = Duration::from_micros(200);

/// The in-process driver: the executor generates calls itself, with at most `clients` calls
/// waiting for their replies at once (each virtual client issues its next call when its reply
/// is released). What the benchmark reads, it reads from here.
#[derive(Debug)]
pub struct LocalLoad {
    /// Calls are generated only while this is set (the benchmark interleaves contenders).
    pub active: AtomicBool,
    pub clients: usize,
    pub replies: AtomicU64,
    /// Calls issued but not yet answered.
    pub outstanding: AtomicU64,
    /// Commit latency in nanoseconds, from the call's start to its reply's release.
    pub latency_ns: Mutex<Histogram<u64>>,
    /// Set when the driver's consistency check or the workload's failed.
    pub check: Mutex<Option<Result<(), String>>>,
}

impl LocalLoad {
    pub fn new(clients: usize) -> Arc<LocalLoad> {
        Arc::new(LocalLoad {
            active: AtomicBool::new(false),
            clients: clients.max(1),
            replies: AtomicU64::new(0),
            outstanding: AtomicU64::new(0),
            latency_ns: Mutex::new(Histogram::new(3).expect("3 significant digits is valid")),
            check: Mutex::new(None),
        })
    }
}

/// A running primary: its executor and its threads.
#[derive(Debug)]
pub struct PrimaryHandle {
    pub inbound: Sender<Inbound>,
    pub executor: JoinHandle<()>,
    pub address: SocketAddr,
    context: ClientContext,
}

/// Asks a primary role for its status and checksum; outlives the role harmlessly (its
/// questions then go unanswered).
#[derive(Clone, Debug)]
pub struct PrimaryProbe {
    inbound: Sender<Inbound>,
}

impl PrimaryProbe {
    pub fn status(&self) -> Option<NodeStatus> {
        crate::ask(Duration::from_secs(5), |reply| {
            self.inbound.send(Inbound::Control(Control::Status(reply)))
        })
    }

    pub fn checksum(&self) -> Option<Checksum> {
        crate::ask(Duration::from_secs(30), |reply| {
            self.inbound
                .send(Inbound::Control(Control::Checksum(reply)))
        })
    }
}

impl PrimaryHandle {
    /// Serves a client connection whose Hello (with `client_id`) the node's acceptor read.
    pub fn serve_client(&self, stream: TcpStream, buffer: FrameBuffer, client_id: u64) {
        let conn = self.context.conn_next.fetch_add(1, Ordering::Relaxed);
        let client = Client {
            conn,
            context: self.context.clone(),
        };
        crate::spawn_or_say(format!("client-{conn}"), move || {
            client.run_accepted(stream, buffer, client_id)
        });
    }

    /// A handle that asks for status and checksum without holding the role.
    pub fn probe(&self) -> PrimaryProbe {
        PrimaryProbe {
            inbound: self.inbound.clone(),
        }
    }

    /// Asks the executor for its status.
    pub fn status(&self) -> Option<NodeStatus> {
        self.probe().status()
    }

    /// Asks the executor for its segment's checksum.
    pub fn checksum(&self) -> Option<Checksum> {
        self.probe().checksum()
    }

    /// Stops the executor after it checked the workload's consistency.
    pub fn stop(self) {
        // An executor that already stopped has dropped its receiver: nothing to tell it.
        let _ = self.inbound.send(Inbound::Control(Control::Stop));
        crate::join_or_say("the primary's executor", self.executor);
    }
}

/// What the runtime's lease allows for: a backup's supervisor notices the primary's frames at
/// its next tick (one tick), and a reply released in an executor's turn leaves at its end
/// (`TURN_MAX` later at most, well under a tick: one tick covers it). The node's clocks are
/// taken to run at the same speed.
pub const RUNTIME_LEASE_MARGINS: LeaseMargins = LeaseMargins {
    notice_ticks: 1,
    send_ticks: 1,
    period_min: 1,
    period_max: 1,
};

/// The primary's lease for a backup promise of `promise_ticks` (validated to leave one).
fn runtime_lease_ticks(promise_ticks: u64) -> u64 {
    tandem_replication::primary_lease_ticks(promise_ticks, RUNTIME_LEASE_MARGINS)
        .expect("cluster.lease_ticks is validated to leave the primary a lease")
}

/// Starts a primary serving `model` on `listener`, loaded into a fresh segment. With
/// `local`, the executor also drives its own calls (the in-process benchmark driver).
pub fn start(
    config: &NodeConfig,
    listener: TcpListener,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    local: Option<Arc<LocalLoad>>,
) -> Result<PrimaryHandle, StartError> {
    let segment = crate::workload::loaded_segment(&config.group, &*model)?;
    let members = RoleView {
        view: config.group.view,
        backups: config.backups().map(|peer| peer.node_id).collect(),
        spares: Vec::new(),
        addresses: config
            .backups()
            .map(|peer| (peer.node_id, peer.address))
            .collect(),
    };
    let address = listener.local_addr().map_err(StartError::ListenAddress)?;
    let handle = start_role(
        config,
        segment,
        Vec::new(),
        members,
        model,
        metrics,
        local,
        None,
    )?;
    let acceptor = Acceptor {
        context: handle.context.clone(),
    };
    thread::Builder::new()
        .name("accept".into())
        .spawn(move || acceptor.run(listener))
        .map_err(|source| StartError::Thread {
            thread: "the accept thread",
            source,
        })?;
    Ok(PrimaryHandle { address, ..handle })
}

/// Who a primary serves with, in its view.
#[derive(Clone, Debug)]
pub struct RoleView {
    pub view: u64,
    pub backups: Vec<NodeId>,
    pub spares: Vec<NodeId>,
    /// Where each backup and spare listens.
    pub addresses: Vec<(NodeId, SocketAddr)>,
}

/// Starts the primary role on `segment`, whose last records are `batches` (a promoted
/// backup's; empty for a fresh load). Client connections are handed to it with
/// [`PrimaryHandle::serve_client`]; `observed` hears about the backups.
#[allow(clippy::too_many_arguments)]
pub fn start_role(
    config: &NodeConfig,
    mut segment: tandem_memory::Segment,
    batches: Vec<tandem_log::SealedBatch>,
    members: RoleView,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    local: Option<Arc<LocalLoad>>,
    observed: Option<Sender<Observed>>,
) -> Result<PrimaryHandle, StartError> {
    let group = &config.group;
    let passive = group.mode == Mode::Passive;
    if passive {
        segment
            .enable_passive_trace(group.undo_log_kib << 10)
            .map_err(StartError::Passive)?;
    }
    let lsn_start = segment.lsn();
    metrics.lsn_committed.set(lsn_start as i64);
    let tuning = &config.tuning;
    let primary_config = PrimaryConfig {
        group: group.id,
        view: members.view,
        backups: members.backups.clone(),
        spares: members.spares.clone(),
        safety: group.safety,
        tail: TailLimits {
            records_max: tuning.tail_records_max,
            bytes_max: tuning.tail_bytes_max,
        },
        batch_bytes_max: tuning.batch_bytes_max,
        heartbeat_ticks: tuning.heartbeat_ticks,
        resend_ticks: tuning.heartbeat_ticks.max(2),
        flush_batches_in_flight_max: FLUSH_BATCHES_IN_FLIGHT_MAX,
        lone: config.peers.is_empty(),
        lease_ticks: config
            .cluster
            .as_ref()
            .map(|cluster| runtime_lease_ticks(cluster.lease_ticks)),
        kind: if passive {
            BatchKind::Passive
        } else {
            BatchKind::Redo
        },
    };
    let (inbound, inbound_rx) = mpsc::channel();
    let link_factory = LinkFactory {
        node_id: config.node_id,
        group: group.id,
        max_frame_len: tuning.max_frame_len,
        inbound: inbound.clone(),
        metrics: Arc::clone(&metrics),
    };
    let mut links = BTreeMap::new();
    for &(node, address) in &members.addresses {
        links.insert(node, link_factory.spawn(node, address)?);
    }
    let lsn_committed = Arc::new(AtomicU64::new(lsn_start));
    let context = ClientContext {
        node_id: config.node_id,
        group: group.id,
        view: Arc::new(AtomicU64::new(members.view)),
        lsn_committed: Arc::clone(&lsn_committed),
        max_frame_len: tuning.max_frame_len,
        inbound: inbound.clone(),
        metrics: Arc::clone(&metrics),
        conn_next: Arc::new(AtomicU64::new(1)),
    };
    let local = match local {
        Some(load) => Some(LocalDriver {
            driver: model
                .driver(group.seed)
                .ok_or_else(|| StartError::NoLocalLoad {
                    model: model.name().to_owned(),
                })?,
            load,
            args: Vec::new(),
            id_next: None,
            args_next: Vec::new(),
            started: Instant::now(),
            calls_since_clock: 0,
        }),
        None => None,
    };
    let mut store = Store::open(segment, model);
    store.set_reply_len_max(tandem_node::reply_len_max(
        tuning.max_frame_len,
        tuning.batch_bytes_max,
    ));
    let mut executor = Executor {
        node_id: config.node_id,
        role: PrimaryRole::new(store, Primary::resume(primary_config, lsn_start, batches)),
        ready: RoleReady::default(),
        links,
        links_lost: BTreeSet::new(),
        link_factory,
        observed,
        observed_sent: BTreeMap::new(),
        conns: BTreeMap::new(),
        queue: VecDeque::new(),
        local,
        metrics,
        tick: Duration::from_micros(tuning.tick_us),
        tick_origin: Instant::now(),
        replies_local: Vec::new(),
        shipped: ClassBytes::default(),
        wire_bytes: 0,
        commits: 0,
        backup_gauges: Vec::new(),
        commits_reported: 0,
        rollbacks: 0,
        rollbacks_reported: 0,
        lsn_committed,
        view_shared: Arc::clone(&context.view),
    };
    executor.refresh_gauges();
    let handle = thread::Builder::new()
        .name("executor".into())
        .spawn(move || executor.run(inbound_rx))
        .map_err(|source| StartError::Thread {
            thread: "the executor",
            source,
        })?;
    Ok(PrimaryHandle {
        inbound,
        executor: handle,
        address: SocketAddr::from(([0, 0, 0, 0], 0)),
        context,
    })
}

struct LocalDriver {
    driver: Box<dyn Driver>,
    load: Arc<LocalLoad>,
    args: Vec<u8>,
    /// The call generated ahead and prefetched (the executor works one call ahead).
    id_next: Option<ProcId>,
    args_next: Vec<u8>,
    started: Instant,
    calls_since_clock: usize,
}

/// Local calls that share one reading of the clock as their start time.
const LOCAL_CALLS_PER_CLOCK_READ: usize = 16;

struct ConnOut {
    out: Sender<Vec<u8>>,
    buf: Vec<u8>,
    unanswered: Arc<AtomicU64>,
}

impl ConnOut {
    /// Counts one call answered (a reply or an Error frame).
    fn answered(&self) {
        self.unanswered.fetch_sub(1, Ordering::Relaxed);
    }
}

struct Executor {
    node_id: NodeId,
    /// The primary role's decisions: the store, the replication core, each call's outcome.
    role: PrimaryRole<ReplyTo>,
    ready: RoleReady<ReplyTo>,
    links: BTreeMap<NodeId, Sender<Message>>,
    /// Links whose thread stopped (said once each).
    links_lost: BTreeSet<NodeId>,
    link_factory: LinkFactory,
    /// Where the node hears about backups (cluster mode), if anywhere.
    observed: Option<Sender<Observed>>,
    /// When each backup's last sign of life was passed to `observed`.
    observed_sent: BTreeMap<NodeId, Instant>,
    conns: BTreeMap<ConnId, ConnOut>,
    /// Calls received and not yet run, with the index of the next one in each batch.
    queue: VecDeque<(CallBatch, usize)>,
    local: Option<LocalDriver>,
    metrics: Arc<Metrics>,
    tick: Duration,
    /// When the core's tick 1 began: the clock's tick at any instant counts from here.
    tick_origin: Instant,
    /// Latencies of local replies released in this turn, in nanoseconds.
    replies_local: Vec<u64>,
    /// Payload bytes of every record shipped, by class (an active record's are data and
    /// meta; a passive trace's are data, undo and meta).
    shipped: ClassBytes,
    /// Batch bytes handed to the links, framing included (once per backup).
    wire_bytes: u64,
    commits: u64,
    /// What the metrics have been told of `commits` and `rollbacks` so far.
    commits_reported: u64,
    rollbacks: u64,
    rollbacks_reported: u64,
    /// The last committed LSN, for the client threads' Welcome frames.
    lsn_committed: Arc<AtomicU64>,
    /// Each backup's gauges, in the order of the view's backups (looked up once, not per turn).
    backup_gauges: Vec<BackupGauges>,
    /// The view, for the client threads' Welcome frames.
    view_shared: Arc<AtomicU64>,
}

/// Handles on one backup's labelled gauges.
struct BackupGauges {
    lsn_received: Gauge,
    lsn_applied: Gauge,
    lag_records: Gauge,
}

impl BackupGauges {
    fn new(metrics: &Metrics, node: NodeId) -> BackupGauges {
        let label = crate::metrics::BackupLabel {
            backup: node.to_string(),
        };
        BackupGauges {
            lsn_received: metrics.backup_lsn_received.get_or_create(&label).clone(),
            lsn_applied: metrics.backup_lsn_applied.get_or_create(&label).clone(),
            lag_records: metrics.backup_lag_records.get_or_create(&label).clone(),
        }
    }
}

/// Partial batches an idle executor may have in flight to a backup before records gather for
/// the next one: enough to keep a lightly loaded link busy without an extra round trip, few
/// enough that under load batches grow instead of multiplying.
const FLUSH_BATCHES_IN_FLIGHT_MAX: usize = 4;

/// Calls a client connection may have waiting for answers before its reader stops reading.
const UNANSWERED_MAX: u64 = 65_536;

/// Calls run per turn before the executor looks at its inbox again.
const CALLS_PER_TURN: usize = 512;
/// The longest a turn runs calls (or a quarter of a tick, if less): replies released in it
/// leave at its end, and the lease allows them a tick at most (see `lease_ticks` in `start`).
const TURN_MAX: Duration = Duration::from_micros(250);

impl Executor {
    fn run(mut self, inbound: Receiver<Inbound>) {
        self.tick_origin = Instant::now();
        let mut next_tick = self.tick_origin + self.tick;
        loop {
            // 1. Ticks, every one missed replayed: the lease is measured in them, so the
            // primary's tick must be current before an ack can release a reply.
            let now = Instant::now();
            while now >= next_tick {
                self.role.tick();
                next_tick += self.tick;
            }
            // 2. Everything that arrived.
            loop {
                match inbound.try_recv() {
                    Ok(Inbound::Control(Control::Stop)) => {
                        self.finish();
                        return;
                    }
                    Ok(event) => self.handle(event),
                    Err(_) => break,
                }
            }
            // 3. Calls.
            let ran = self.run_calls();
            // 4. Nothing more to run right now: ship what is open.
            let idle = self.queue.is_empty() && !self.local_can_issue();
            if idle || ran == 0 {
                self.role.flush();
            }
            self.dispatch();
            if self.role.primary().is_deposed() {
                self.refuse_queued();
                return;
            }
            // 5. Wait for work when there is none.
            if ran == 0 {
                let timeout = next_tick.saturating_duration_since(Instant::now());
                match inbound.recv_timeout(timeout) {
                    Ok(Inbound::Control(Control::Stop)) => {
                        self.finish();
                        return;
                    }
                    Ok(event) => self.handle(event),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
        }
    }

    fn local_can_issue(&self) -> bool {
        self.local.as_ref().is_some_and(|local| {
            local.load.active.load(Ordering::Relaxed)
                && (local.load.outstanding.load(Ordering::Relaxed) as usize) < local.load.clients
        })
    }

    fn handle(&mut self, event: Inbound) {
        match event {
            Inbound::Calls(batch) => self.queue.push_back((batch, 0)),
            Inbound::Peer { from, message } => self.role.step(from, message),
            Inbound::LinkUp { node } => self.role.link_reset(node),
            Inbound::ConnOpened {
                conn,
                out,
                unanswered,
            } => {
                self.conns.insert(
                    conn,
                    ConnOut {
                        out,
                        buf: Vec::new(),
                        unanswered,
                    },
                );
            }
            Inbound::ConnClosed { conn } => {
                self.conns.remove(&conn);
            }
            Inbound::Control(Control::Status(reply)) => {
                let _ = reply.send(self.status());
            }
            Inbound::Control(Control::Checksum(reply)) => {
                let store = self.role.store();
                let segment = store.segment();
                let mut checksum = Checksum::of(segment.bytes(), segment.lsn());
                checksum.check = store.model().check(segment).err().map(|e| e.to_string());
                let _ = reply.send(checksum);
            }
            Inbound::View {
                view,
                backups,
                spares,
                addresses,
            } => {
                if self.role.install_view(view, &backups, &spares) {
                    self.view_shared.store(view, Ordering::Release);
                    let members: Vec<NodeId> = backups.iter().chain(&spares).copied().collect();
                    // A link whose member left ends when its sender is dropped.
                    self.links.retain(|node, _| members.contains(node));
                    for (node, address) in addresses {
                        if members.contains(&node) && !self.links.contains_key(&node) {
                            match self.link_factory.spawn(node, address) {
                                Ok(link) => {
                                    self.links.insert(node, link);
                                }
                                Err(err) => eprintln!("node {}: {err}", self.node_id),
                            }
                        }
                    }
                    self.refresh_gauges();
                }
            }
            Inbound::Depose { view } => self.role.depose(view),
            Inbound::PrepareRemoval { view, backup } => self.role.prepare_removal(view, backup),
            Inbound::Control(Control::Stop) => unreachable!("handled by the loop"),
        }
    }

    fn status(&self) -> NodeStatus {
        let primary = self.role.primary();
        let lsn = self.role.store().segment().lsn();
        NodeStatus {
            node_id: self.node_id,
            role: "primary",
            view: primary.view(),
            lsn,
            lsn_applied: lsn,
            pending_replies: primary.pending_replies() as u64,
            commits: self.commits,
            shipped_data_bytes: self.shipped.data,
            shipped_undo_bytes: self.shipped.undo,
            shipped_meta_bytes: self.shipped.meta,
            shipped_wire_bytes: self.wire_bytes,
            check: None,
            backups: primary.backup_progress().collect(),
        }
    }

    /// Runs queued calls, then local ones, for at most `CALLS_PER_TURN` calls or `TURN_MAX`.
    /// Returns how many ran.
    fn run_calls(&mut self) -> usize {
        let mut ran = 0;
        let turn_started = Instant::now();
        let turn_max = (self.tick / 4).min(TURN_MAX);
        // The clock is read every 16 calls: a read costs a fifth of a Debit-Credit call.
        let turn_over = |ran: usize| {
            ran >= CALLS_PER_TURN
                || (ran.is_multiple_of(16) && ran > 0 && turn_started.elapsed() >= turn_max)
        };
        // The front batch is taken out of the queue while its calls run (they borrow its
        // bytes), and put back if flow control stops the turn half-way.
        while !turn_over(ran) {
            let Some((batch, mut next)) = self.queue.pop_front() else {
                break;
            };
            let mut stalled = false;
            while next < batch.calls.len() && !turn_over(ran) {
                let slot = &batch.calls[next];
                let call = Call {
                    client_id: batch.client_id,
                    seq: slot.seq,
                    proc_id: ProcId(slot.proc_id),
                    args: &batch.bytes[slot.args.clone()],
                    read_only: slot.read_only,
                    safety: slot.safety,
                };
                let to = ReplyTo::Remote {
                    conn: batch.conn,
                    started: Instant::now(),
                };
                match self.role.run_call(&call, to) {
                    Ran::Stalled => {
                        self.metrics.flow_control_stalls.inc();
                        stalled = true;
                        break;
                    }
                    Ran::Committed { shipped, .. } => {
                        self.commits += 1;
                        self.shipped += shipped;
                    }
                    Ran::Duplicate { .. } => {
                        self.metrics.duplicates_answered.inc();
                    }
                    Ran::RolledBack => self.rollbacks += 1,
                    Ran::Read | Ran::Refused(_) => {}
                }
                next += 1;
                ran += 1;
            }
            if next < batch.calls.len() {
                self.queue.push_front((batch, next));
            }
            if stalled {
                return ran;
            }
        }
        while !turn_over(ran) && self.local_can_issue() {
            let safety = self.role.primary().effective_safety(None);
            if !self.role.can_commit(safety) {
                self.metrics.flow_control_stalls.inc();
                break;
            }
            self.run_local(safety);
            ran += 1;
        }
        ran
    }

    fn run_local(&mut self, safety: Safety) {
        let local = self.local.as_mut().expect("local load");
        // Reading the clock costs as much as a fifth of a Debit-Credit call, so local calls
        // share a start time per run of LOCAL_CALLS_PER_CLOCK_READ (a few microseconds).
        if local.calls_since_clock == 0 {
            local.started = Instant::now();
        }
        local.calls_since_clock = (local.calls_since_clock + 1) % LOCAL_CALLS_PER_CLOCK_READ;
        let started = local.started;
        let id = match local.id_next.take() {
            Some(id) => id,
            None => local.driver.next_call(&mut local.args_next),
        };
        std::mem::swap(&mut local.args, &mut local.args_next);
        // Work one call ahead: the next call's records start loading while this one runs.
        let id_next = local.driver.next_call(&mut local.args_next);
        self.role.store().prefetch(id_next, &local.args_next);
        local.id_next = Some(id_next);
        local.load.outstanding.fetch_add(1, Ordering::Relaxed);
        let outcome = self
            .role
            .run_local(id, &local.args, safety, ReplyTo::Local { started });
        match outcome {
            Ok(shipped) => {
                local.driver.observe(id, &local.args, Ok(()));
                self.commits += 1;
                self.shipped += shipped;
            }
            Err(err) => {
                local.driver.observe(id, &local.args, Err(&err));
                self.rollbacks += 1;
            }
        }
    }

    /// Acts on the core's outputs: messages to the links, replies to their clients.
    fn dispatch(&mut self) {
        self.role.take_ready(&mut self.ready);
        // A transfer's pages were copied into its messages while the executor waited: it
        // costs a pause proportional to the pages changed since the member's LSN.
        for (node, sent) in self.ready.transfers_sent.drain(..) {
            eprintln!(
                "node {}: state transfer to node {node}: {} pages changed after LSN {}, as of \
                 LSN {}",
                self.node_id, sent.pages, sent.lsn_from, sent.lsn
            );
        }
        self.pass_observed();
        for (to, message) in self.ready.replication.messages.drain(..) {
            if let Message::Batch(bytes) = &message {
                self.metrics.batches_shipped.inc();
                self.metrics.bytes_shipped.inc_by(bytes.len() as u64);
                self.wire_bytes += bytes.len() as u64;
            }
            // A link reconnects for as long as the role runs: a send fails only if its
            // thread panicked, and then that backup hears nothing more and is removed once
            // the primary suspects it. Said once per link.
            if let Some(link) = self.links.get(&to)
                && link.send(message).is_err()
                && self.links_lost.insert(to)
            {
                eprintln!(
                    "node {}: the link to node {to} stopped; that backup will be suspected",
                    self.node_id
                );
            }
        }
        let now = Instant::now();
        // Counters move once per turn, not once per call: an atomic add per call costs as
        // much as a tenth of a Debit-Credit call.
        self.metrics
            .replies_released
            .inc_by(self.ready.replication.replies.len() as u64);
        self.metrics
            .commits
            .inc_by(self.commits - self.commits_reported);
        self.commits_reported = self.commits;
        self.metrics
            .rollbacks
            .inc_by(self.rollbacks - self.rollbacks_reported);
        self.rollbacks_reported = self.rollbacks;
        // The core released these at its tick, earlier in the turn: it says which to send
        // now, which to withhold (a lease that ran out since: its client retries) and which
        // to answer "not primary" (abandoned by a deposed primary).
        let tick_now = 1
            + (now.duration_since(self.tick_origin).as_nanos() / self.tick.as_nanos().max(1))
                as u64;
        let mut withheld = 0;
        for disposition in self.ready.drain_replies(tick_now) {
            match disposition {
                Disposition::Send(reply) => {
                    let Answer { to, seq, kind } = reply.reply;
                    let (conn, started) = match to {
                        ReplyTo::Local { started } => {
                            self.replies_local
                                .push(now.duration_since(started).as_nanos() as u64);
                            continue;
                        }
                        ReplyTo::Remote { conn, started } => (conn, started),
                    };
                    let Some(out) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    match kind {
                        AnswerKind::Committed { body, lsn_repeated } => {
                            let lsn = lsn_repeated.unwrap_or(reply.lsn);
                            encode_reply(&mut out.buf, seq, lsn, ReplyStatus::Committed, &body);
                        }
                        AnswerKind::RolledBack { message } => {
                            let status = ReplyStatus::RolledBack;
                            encode_reply(&mut out.buf, seq, reply.lsn, status, message.as_bytes());
                        }
                        AnswerKind::Refused { refusal, message } => {
                            encode_error(&mut out.buf, error_code(refusal), &message);
                            out.answered();
                            continue;
                        }
                    }
                    out.answered();
                    self.metrics
                        .ack_latency_seconds
                        .observe(now.duration_since(started).as_secs_f64());
                }
                Disposition::Withhold(reply) => {
                    withheld += 1;
                    if let ReplyTo::Remote { conn, .. } = reply.reply.to
                        && let Some(out) = self.conns.get_mut(&conn)
                    {
                        out.answered();
                    }
                }
                Disposition::NotPrimary(reply) => {
                    if let ReplyTo::Remote { conn, .. } = reply.reply.to
                        && let Some(out) = self.conns.get_mut(&conn)
                    {
                        encode_error(
                            &mut out.buf,
                            ErrorCode::NotPrimary,
                            "this primary was replaced",
                        );
                        out.answered();
                    }
                }
            }
        }
        self.metrics.replies_withheld.inc_by(withheld);
        for fault in self.ready.replication.faults.drain(..) {
            if let PrimaryFault::TailMissed { from, .. } = fault {
                eprintln!(
                    "node {}: passive backup {from} needs records that left the retained tail; \
                     restart it from the same load, or raise tuning.tail_records_max and \
                     tuning.tail_bytes_max",
                    self.node_id
                );
            }
        }
        self.ready.clear();
        for out in self.conns.values_mut() {
            if !out.buf.is_empty() {
                let _ = out.out.send(std::mem::take(&mut out.buf));
            }
        }
        if let Some(local) = &self.local
            && !self.replies_local.is_empty()
        {
            let count = self.replies_local.len() as u64;
            let mut histogram = local.load.latency_ns.lock().expect("not poisoned");
            for &latency in &self.replies_local {
                let _ = histogram.record(latency.max(1));
            }
            drop(histogram);
            local.load.replies.fetch_add(count, Ordering::Relaxed);
            local.load.outstanding.fetch_sub(count, Ordering::Relaxed);
            self.replies_local.clear();
        }
        let lsn = self.role.primary().lsn_committed();
        self.lsn_committed.store(lsn, Ordering::Release);
        self.metrics.lsn_committed.set(lsn as i64);
        let gauges = self.backup_gauges.iter();
        for ((_, received, applied), gauges) in self.role.primary().backup_progress().zip(gauges) {
            gauges.lsn_received.set(received as i64);
            gauges.lsn_applied.set(applied as i64);
            gauges.lag_records.set(lsn.saturating_sub(applied) as i64);
        }
    }

    /// A deposed primary answers the calls it never ran: another node is the primary now,
    /// and the client resends them there with the same (client id, seq).
    fn refuse_queued(&mut self) {
        for (batch, next) in self.queue.drain(..) {
            if let Some(out) = self.conns.get_mut(&batch.conn) {
                for _ in next..batch.calls.len() {
                    encode_error(
                        &mut out.buf,
                        ErrorCode::NotPrimary,
                        "this primary was replaced",
                    );
                    out.answered();
                }
            }
        }
        for out in self.conns.values_mut() {
            if !out.buf.is_empty() {
                let _ = out.out.send(std::mem::take(&mut out.buf));
            }
        }
    }

    /// Looks up the gauges of the view's backups and spares, in `backup_progress` order.
    fn refresh_gauges(&mut self) {
        self.backup_gauges = self
            .role
            .primary()
            .backup_progress()
            .map(|(node, _, _)| BackupGauges::new(&self.metrics, node))
            .collect();
    }

    /// Tells the node's supervisor what the role observed. The failure detector needs a
    /// sign of life per tick, not every ack: one `Heard` per backup per `OBSERVE_INTERVAL`
    /// keeps its thread quiet.
    fn pass_observed(&mut self) {
        let Some(observed) = &self.observed else {
            self.ready.observed.clear();
            return;
        };
        let now = Instant::now();
        for event in self.ready.observed.drain(..) {
            if let Observed::Heard(node) = event {
                let due = self
                    .observed_sent
                    .get(&node)
                    .is_none_or(|&sent| now.duration_since(sent) >= OBSERVE_INTERVAL);
                if !due {
                    continue;
                }
                self.observed_sent.insert(node, now);
            }
            // The supervisor outlives its roles; if it is gone, so is the node.
            let _ = observed.send(event);
        }
    }

    /// Checks the data model's consistency and the local driver's tallies before stopping.
    fn finish(&mut self) {
        if let Some(local) = &self.local {
            let store = self.role.store();
            let segment = store.segment();
            let result = store
                .model()
                .check(segment)
                .and_then(|()| local.driver.check(segment))
                .map_err(|err| err.to_string());
            *local.load.check.lock().expect("not poisoned") = Some(result);
        }
    }
}

/// The Error frame's code for a refused call.
fn error_code(refusal: Refusal) -> ErrorCode {
    match refusal {
        Refusal::UnknownProcedure => ErrorCode::UnknownProcedure,
        Refusal::WritesOnRead | Refusal::RuleUnmet | Refusal::StaleSeq | Refusal::DedupFull => {
            ErrorCode::BadArgs
        }
        Refusal::Internal => ErrorCode::Internal,
    }
}
