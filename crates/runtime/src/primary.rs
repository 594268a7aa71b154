//! The primary node: one executor thread (`executor.rs`) that drives the node core's primary
//! role (the store and the replication core), one link per backup (a writer thread and an ack reader thread,
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
use tandem_memory::ClassBytes;
use tandem_node::{
    Answer, AnswerKind, Call, LogOrder, Observed, PrimaryRole, Ran, Refusal, RoleReady,
};
use tandem_redo::{BatchKind, TailLimits};
use tandem_replication::{
    Disposition, LeaseMargins, Message, NodeId, Primary, PrimaryConfig, PrimaryFault, Safety,
};
use tandem_store::{DataModel, Driver, ProcId, Store};
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, Hello, PeerKind, ReplyStatus, Role, Welcome, encode_error,
    encode_peer, encode_reply, encode_welcome,
};

use crate::config::{Mode, NodeConfig};
use crate::log::NodeLog;
use crate::metrics::Metrics;
use crate::net::{self, ConnError};
use crate::peer_auth::PeerAuth;
use crate::{Checksum, Control, NodeStatus, StartError};

mod client;
mod executor;
mod link;
mod local;

pub use local::{ConnSink, LocalAnswer, LocalOutcome, LocalPort, RoleGone};

pub(crate) use executor::ConnOut;
use executor::{Executor, LocalDriver, Periodic};

/// Partial batches an idle executor may have in flight to a backup before records gather for
/// the next one: enough to keep a lightly loaded link busy without an extra round trip, few
/// enough that under load batches grow instead of multiplying.
pub(crate) const FLUSH_BATCHES_IN_FLIGHT_MAX: usize = 4;

/// Calls a client connection may have waiting for answers before its reader stops reading.
const UNANSWERED_MAX: u64 = 65_536;

use client::{Acceptor, Client, ClientContext};
pub(crate) use link::LinkFactory;

/// A client connection's number on this node.
pub type ConnId = u64;

/// Calls a connection's reader parsed from one read, for the executor.
#[derive(Debug)]
pub struct CallBatch {
    pub(crate) conn: ConnId,
    pub(crate) client_id: u64,
    pub(crate) bytes: Vec<u8>,
    pub(crate) calls: Vec<CallSlot>,
}

#[derive(Clone, Debug)]
pub(crate) struct CallSlot {
    pub(crate) seq: u64,
    pub(crate) proc_id: u16,
    pub(crate) safety: Option<Safety>,
    pub(crate) args: Range<usize>,
    /// Sent as a `Read`: refused if the procedure writes.
    pub(crate) read_only: bool,
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
        out: ConnSink,
        /// Calls of this connection not yet answered (see `UNANSWERED_MAX`).
        unanswered: Arc<AtomicU64>,
        /// Whether a reply withheld (released under a lease that ran out before it could
        /// leave) is answered "not primary" at once. A stub's connection gets nothing and
        /// retries after its timeout; a RESP connection has no timeout of its own.
        answer_withheld: bool,
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
    /// The node's write-ahead log synced every record up to `lsn`.
    Synced {
        lsn: u64,
    },
    Control(Control),
}

/// Where a primary role's connections send what they read: the role's executor (static
/// mode), or the node's thread (cluster mode), tagged with the epoch of the role they were
/// opened under so that the node answers a connection of an ended role "not primary".
#[derive(Clone, Debug)]
pub(crate) enum InboundTx {
    Executor(Sender<Inbound>),
    Node {
        to_node: crate::cluster::NodeTx,
        role_epoch: u64,
    },
}

impl InboundTx {
    /// Hands `inbound` over; fails once whoever takes it has stopped.
    pub fn send(&self, inbound: Inbound) -> Result<(), RoleGone> {
        match self {
            InboundTx::Executor(tx) => tx.send(inbound).map_err(|_| RoleGone),
            InboundTx::Node {
                to_node,
                role_epoch,
            } => to_node
                .send(crate::cluster::ToNode::Primary {
                    role_epoch: *role_epoch,
                    inbound,
                })
                .map_err(|_| RoleGone),
        }
    }
}

/// Where a released answer goes, and when its call started.
#[derive(Debug, Clone, Copy)]
pub enum ReplyTo {
    /// A call of the in-process load.
    Local { started: Instant },
    /// A client connection's call.
    Remote { conn: ConnId, started: Instant },
    /// The model's periodic procedure (`DataModel::periodic`): nobody waits for its answer.
    Periodic,
}

/// How often at most a link tells the node it heard its backup.
const OBSERVE_INTERVAL: Duration = Duration::from_micros(200);

/// The executor's progress, shared with the supervisor and the links: the executor counts
/// its turns, the supervisor tells the cluster core when the count moved and publishes the
/// core's verdict (`Cluster::is_stalled`), and the links send pulses only while it is not
/// stuck.
#[derive(Debug, Default)]
pub struct Progress {
    turns: AtomicU64,
    stuck: AtomicBool,
}

impl Progress {
    /// The executor begins a turn.
    pub(crate) fn turn(&self) {
        self.turns.fetch_add(1, Ordering::Relaxed);
    }

    /// Turns begun so far.
    pub fn turns(&self) -> u64 {
        self.turns.load(Ordering::Relaxed)
    }

    /// The cluster core's verdict on whether the executor is stuck.
    pub fn set_stuck(&self, stuck: bool) {
        self.stuck.store(stuck, Ordering::Relaxed);
    }

    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck.load(Ordering::Relaxed)
    }
}

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
    /// The benchmark asks a node-thread driver for `check` (once no call waits).
    pub check_asked: AtomicBool,
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
            check_asked: AtomicBool::new(false),
        })
    }
}

/// A running primary: its executor and its threads.
#[derive(Debug)]
pub struct PrimaryHandle {
    pub(crate) inbound: InboundTx,
    /// The executor, which gives the segment back when deposed (static mode; in cluster
    /// mode the node's thread holds the role).
    pub executor: Option<JoinHandle<Option<tandem_memory::Segment>>>,
    /// The executor's turns, and whether the cluster core takes it as stuck.
    pub progress: Arc<Progress>,
    pub address: SocketAddr,
    context: ClientContext,
}

impl PrimaryHandle {
    /// The view the role serves.
    pub fn view(&self) -> u64 {
        self.context.view.load(Ordering::Acquire)
    }
}

/// Asks a primary role for its status and checksum; outlives the role harmlessly (its
/// questions then go unanswered).
#[derive(Clone, Debug)]
pub struct PrimaryProbe {
    inbound: InboundTx,
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
    /// What serves a client's connection (whose `Hello` said it is client `client_id`) on
    /// the node's I/O loop, apart from the role: it outlives the role harmlessly (its calls
    /// are then answered "not primary").
    pub(crate) fn native_service(&self, client_id: u64) -> Box<dyn crate::native::Service> {
        let conn = self.context.conn_next.fetch_add(1, Ordering::Relaxed);
        let client = Client {
            conn,
            context: self.context.clone(),
        };
        Box::new(client::PrimaryService::new(client, client_id))
    }

    /// A port inside this node (the RESP front end) whose calls go to this role's executor;
    /// `wake` is called whenever answers are handed over.
    pub fn local_port(&self, wake: Arc<dyn Fn() + Send + Sync>) -> LocalPort {
        let conn = self.context.conn_next.fetch_add(1, Ordering::Relaxed);
        LocalPort::open(conn, &self.context, wake)
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
        if let Some(executor) = self.executor {
            crate::join_or_say("the primary's executor", executor);
        }
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
pub(crate) fn runtime_lease_ticks(promise_ticks: u64) -> u64 {
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
        answer_from: None,
        lsn_released_max: None,
        backups: config.backups().map(|peer| peer.node_id).collect(),
        spares: Vec::new(),
        addresses: config
            .backups()
            .map(|peer| (peer.node_id, peer.address))
            .collect(),
    };
    let address = listener.local_addr().map_err(StartError::ListenAddress)?;
    let log = crate::log::open_fresh(config, segment.lsn(), &metrics)?;
    if let Some(log) = &log {
        crate::stopping_drains(log);
    }
    let handle = start_role(
        config,
        segment,
        Vec::new(),
        members,
        model,
        metrics,
        local,
        None,
        None,
        log,
    )?;
    let acceptor = Acceptor {
        context: handle.context.clone(),
    };
    acceptor.spawn(listener, config.tuning.maxclients)?;
    Ok(PrimaryHandle { address, ..handle })
}

/// Who a primary serves with, in its view.
#[derive(Clone, Debug)]
pub struct RoleView {
    pub view: u64,
    /// The role releases no reply before this instant: the end of the lease the node granted
    /// the old primary, when a promotion starts the role (see
    /// `tandem_replication::Primary::hold_releases`).
    pub answer_from: Option<Instant>,
    /// When a promotion starts the role: the promotion's bound on what earlier views
    /// released (`tandem_replication::Primary::released_at_most`).
    pub lsn_released_max: Option<u64>,
    pub backups: Vec<NodeId>,
    pub spares: Vec<NodeId>,
    /// Where each backup and spare listens.
    pub addresses: Vec<(NodeId, SocketAddr)>,
}

/// Starts the primary role on `segment`, whose last records are `batches` (a promoted
/// backup's; empty for a fresh load). Client connections are handed to it with
/// [`PrimaryHandle::client_server`]; `observed` hears about the backups.
#[allow(clippy::too_many_arguments)]
pub fn start_role(
    config: &NodeConfig,
    mut segment: tandem_memory::Segment,
    batches: Vec<tandem_redo::SealedBatch>,
    members: RoleView,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    local: Option<Arc<LocalLoad>>,
    observed: Option<Sender<Observed>>,
    peer_closed: Option<crate::PeerClosed>,
    log: Option<NodeLog>,
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
        view: members.view,
        backups: members.backups.clone(),
        spares: members.spares.clone(),
        ..primary_config(config)
    };
    let (inbound, inbound_rx) = mpsc::channel();
    let progress = Arc::new(Progress::default());
    let link_factory = LinkFactory {
        observed: observed.clone(),
        peer_closed,
        progress: Arc::clone(&progress),
        pulse_interval: Duration::from_micros(tuning.tick_us * tuning.heartbeat_ticks),
        node_id: config.node_id,
        group: group.id,
        max_frame_len: tuning.max_frame_len,
        inbound: InboundTx::Executor(inbound.clone()),
        metrics: Arc::clone(&metrics),
        auth: PeerAuth::new(config, &metrics)?,
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
        maxclients: tuning.maxclients,
        inbound: InboundTx::Executor(inbound.clone()),
        metrics: Arc::clone(&metrics),
        conn_next: Arc::new(AtomicU64::new(1)),
        members: crate::members::MemberList::of(config),
        client_auth: crate::peer_auth::ClientAuth::new(config, &metrics)?,
        scripts: (model.name() == "redis")
            .then(|| crate::scripts::Scripts::of(&*model))
            .flatten(),
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
    store.set_record_len_max(tandem_node::record_len_max(
        tuning.max_frame_len,
        tuning.batch_bytes_max,
        tuning.tail_bytes_max,
    ));
    let periodic = store.model().periodic().map(|(_, interval_ms)| Periodic {
        interval: Duration::from_millis(interval_ms.max(1)),
        due: Instant::now(),
    });
    let mut primary = Primary::resume(primary_config, lsn_start, batches);
    if let Some(lsn_released_max) = members.lsn_released_max {
        primary.released_at_most(lsn_released_max);
    }
    let mut role = PrimaryRole::new(store, primary);
    if let Some(log) = &log {
        // The log must end where the segment does before the role appends to it.
        log.align(lsn_start);
        role.set_keeps_log(true);
        // A passive primary's segment carries its backups' trace: it takes no snapshot.
        if !passive {
            let (bytes_between, lsn_load) = log.checkpoints();
            role.enable_checkpoints(bytes_between, lsn_load);
        }
        let inbound = inbound.clone();
        log.listen(Some(Box::new(move |lsn| {
            let _ = inbound.send(Inbound::Synced { lsn });
        })));
    }
    let mut executor = Executor {
        periodic,
        log,
        log_orders: Vec::new(),
        node_id: config.node_id,
        role,
        answer_from: members.answer_from,
        ready: RoleReady::default(),
        links,
        links_lost: BTreeSet::new(),
        link_factory,
        observed,
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
        progress: Arc::clone(&progress),
    };
    executor.refresh_gauges();
    // The executor runs clients' calls, scripts among them: its stack holds the deepest
    // input the script engine's bounds accept.
    let handle = thread::Builder::new()
        .name("executor".into())
        .stack_size(tandem_redis::SCRIPT_THREAD_STACK_BYTES)
        .spawn(move || executor.run(inbound_rx))
        .map_err(|source| StartError::Thread {
            thread: "the executor",
            source,
        })?;
    Ok(PrimaryHandle {
        inbound: InboundTx::Executor(inbound),
        executor: Some(handle),
        progress,
        address: SocketAddr::from(([0, 0, 0, 0], 0)),
        context,
    })
}

/// A primary role's settings from the configuration, in the group's first view with no
/// member (each role's view sets its own).
pub(crate) fn primary_config(config: &NodeConfig) -> PrimaryConfig {
    let (group, tuning) = (&config.group, &config.tuning);
    PrimaryConfig {
        group: group.id,
        view: group.view,
        backups: Vec::new(),
        spares: Vec::new(),
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
        kind: match group.mode {
            Mode::Passive => BatchKind::Passive,
            Mode::Active => BatchKind::Redo,
        },
    }
}

/// What a cluster-mode primary role shares with its connections: the handle the node's
/// acceptor and RESP front end see, whose connections send what they read to the node's
/// thread (tagged with `role_epoch`), and the figures their Welcome frames read.
pub(crate) struct NodeRole {
    pub(crate) handle: PrimaryHandle,
    pub(crate) view: Arc<AtomicU64>,
    pub(crate) lsn_committed: Arc<AtomicU64>,
}

/// The handle of a cluster-mode primary role, whose connections send to `inbound` (its
/// caller sets the view and LSN its Welcome frames say before it publishes the handle);
/// `conn_next` numbers connections across the node's roles.
pub(crate) fn node_role(
    config: &NodeConfig,
    metrics: &Arc<Metrics>,
    inbound: InboundTx,
    progress: Arc<Progress>,
    scripts: Option<crate::scripts::Scripts>,
    conn_next: Arc<AtomicU64>,
) -> Result<NodeRole, StartError> {
    let view = Arc::new(AtomicU64::new(0));
    let lsn_committed = Arc::new(AtomicU64::new(0));
    let context = ClientContext {
        node_id: config.node_id,
        group: config.group.id,
        view: Arc::clone(&view),
        lsn_committed: Arc::clone(&lsn_committed),
        max_frame_len: config.tuning.max_frame_len,
        maxclients: config.tuning.maxclients,
        inbound: inbound.clone(),
        metrics: Arc::clone(metrics),
        conn_next,
        members: crate::members::MemberList::of(config),
        client_auth: crate::peer_auth::ClientAuth::new(config, metrics)?,
        scripts,
    };
    let handle = PrimaryHandle {
        inbound,
        executor: None,
        progress,
        address: SocketAddr::from(([0, 0, 0, 0], 0)),
        context,
    };
    Ok(NodeRole {
        handle,
        view,
        lsn_committed,
    })
}
