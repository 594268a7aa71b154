//! A primary role's connections: what its client connections (`client.rs`) and local ports
//! (`local.rs`, the RESP front end) send the node's thread, and how its answers go back
//! (`conn_out.rs`). The role itself runs on the node's thread (`cluster/node_loop.rs`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hdrhistogram::Histogram;
use tandem_redo::{BatchKind, TailLimits};
use tandem_replication::{LeaseMargins, NodeId, PrimaryConfig, Safety};
use tandem_store::ProcId;
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, ReplyStatus, Role, Welcome, encode_reply, encode_welcome,
};

use crate::config::{Mode, NodeConfig};
use crate::net::ConnError;
use crate::{Checksum, Control, NodeStatus};

mod client;
mod conn_out;
mod local;

pub use local::{ConnSink, LocalAnswer, LocalOutcome, LocalPort, RoleGone};

pub(crate) use conn_out::ConnOut;

/// Partial batches an idle primary role may have in flight to a backup before records gather for
/// the next one: enough to keep a lightly loaded link busy without an extra round trip, few
/// enough that under load batches grow instead of multiplying.
pub(crate) const FLUSH_BATCHES_IN_FLIGHT_MAX: usize = 4;

/// Calls a client connection may have waiting for answers before its reader stops reading.
const UNANSWERED_MAX: u64 = 65_536;

use client::{Client, ClientContext};

/// A client connection's number on this node.
pub type ConnId = u64;

/// Calls a connection's reader parsed from one read, for the node's thread.
#[derive(Debug)]
pub struct CallBatch {
    pub(crate) conn: ConnId,
    pub(crate) client_id: u64,
    pub(crate) calls: Vec<CallSlot>,
}

#[derive(Clone, Debug)]
pub(crate) struct CallSlot {
    pub(crate) seq: u64,
    pub(crate) proc_id: u16,
    pub(crate) safety: Option<Safety>,
    /// Its arguments, moved on to the role as they are (never copied again).
    pub(crate) args: Vec<u8>,
    /// Sent as a `Read`: refused if the procedure writes.
    pub(crate) read_only: bool,
}

/// What a primary role's connections send the node's thread.
#[derive(Debug)]
pub enum Inbound {
    Calls(CallBatch),
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
    /// A pub/sub message published on the node, for the role to relay to the group's other
    /// members (`tandem_node::Node::relay_publication`).
    Publication {
        shard: bool,
        channel: Vec<u8>,
        message: Vec<u8>,
    },
    Control(Control),
}

/// Where a primary role's connections send what they read: the node's thread, tagged with
/// the group and epoch of the role they were opened under so that the node answers a connection of an
/// ended role "not primary".
#[derive(Clone, Debug)]
pub(crate) struct InboundTx {
    pub(crate) to_node: crate::cluster::NodeTx,
    pub(crate) group: tandem_config::GroupId,
    pub(crate) role_epoch: u64,
}

impl InboundTx {
    /// Hands `inbound` over; fails once whoever takes it has stopped.
    pub fn send(&self, inbound: Inbound) -> Result<(), RoleGone> {
        let role_epoch = self.role_epoch;
        self.to_node
            .send(crate::cluster::ToNode::Primary {
                group: self.group,
                role_epoch,
                inbound,
            })
            .map_err(|_| RoleGone)
    }
}

/// The node thread's progress, shared with the beat thread: the node counts its turns and
/// publishes the cluster core's verdict (`Cluster::is_stalled`), and the beat sends pulses
/// only while it is not stuck.
#[derive(Debug, Default)]
pub struct Progress {
    turns: AtomicU64,
    stuck: AtomicBool,
}

impl Progress {
    /// The node's thread begins a turn.
    pub(crate) fn turn(&self) {
        self.turns.fetch_add(1, Ordering::Relaxed);
    }

    /// Turns begun so far.
    pub fn turns(&self) -> u64 {
        self.turns.load(Ordering::Relaxed)
    }

    /// The cluster core's verdict on whether the node's thread is stuck.
    pub fn set_stuck(&self, stuck: bool) {
        self.stuck.store(stuck, Ordering::Relaxed);
    }

    pub(crate) fn is_stuck(&self) -> bool {
        self.stuck.load(Ordering::Relaxed)
    }
}

/// The in-process driver: the node's thread generates calls itself, with at most `clients` calls
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

/// A primary role as its connections see it: where they send what they read, and what
/// their Welcome frames say.
#[derive(Debug)]
pub struct PrimaryHandle {
    pub(crate) inbound: InboundTx,
    /// The node thread's turns, and whether the cluster core takes it as stuck.
    pub progress: Arc<Progress>,
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

    /// A port inside this node (the RESP front end) whose calls go to this role;
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

    /// Asks the role for its status.
    pub fn status(&self) -> Option<NodeStatus> {
        self.probe().status()
    }

    /// Asks the role for its segment's checksum.
    pub fn checksum(&self) -> Option<Checksum> {
        self.probe().checksum()
    }
}

/// What the runtime's lease allows for: a backup's node notices the primary's frames at its
/// next tick (one tick), and a reply released in a pass of the node's thread leaves at the
/// pass's end (one tick is allowed for it). The nodes' clocks are taken to run at the same
/// speed.
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
    inbound: InboundTx,
    progress: Arc<Progress>,
    scripts: Option<crate::scripts::Scripts>,
    conn_next: Arc<AtomicU64>,
) -> NodeRole {
    let view = Arc::new(AtomicU64::new(0));
    let lsn_committed = Arc::new(AtomicU64::new(0));
    let context = ClientContext {
        node_id: config.node_id,
        view: Arc::clone(&view),
        lsn_committed: Arc::clone(&lsn_committed),
        inbound: inbound.clone(),
        conn_next,
        members: crate::members::MemberList::of(config),
        scripts,
    };
    let handle = PrimaryHandle {
        inbound,
        progress,
        context,
    };
    NodeRole {
        handle,
        view,
        lsn_committed,
    }
}
