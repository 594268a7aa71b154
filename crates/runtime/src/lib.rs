//! The node runtime: drives the node core (`tandem_node::Node`) with real sockets, threads, a
//! clock and a disk.
//!
//! [`run_node`] is `tandem node --config FILE`; [`start_node`] runs the same node inside
//! another program (a test, a benchmark). Either way one node thread runs the `Node` and every
//! socket on one poll loop ([`cluster`]); a primary role's connections reach it through
//! [`primary`], a backup role's through [`backup`]. A node with a `[cluster]` table follows the
//! config store's views; one without it runs the view its configuration names, for good.

mod auth_failures;
pub mod backup;
pub mod cluster;
pub mod config;
mod error;
pub mod files;
pub mod gate;
mod host;
mod http;
mod http_access;
pub mod log;
mod members;
pub mod metrics;
mod native;
mod net;
mod peer_auth;
mod peer_tls;
pub mod primary;
pub mod resp;
mod retry;
pub mod saves;
pub mod scripts;
mod stops;
pub mod throttle;
pub mod tls;
pub mod workload;

pub use error::StartError;
pub use peer_auth::TlsWriter;
pub use stops::StopWhen;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use serde::Serialize;
use tandem_replication::NodeId;
use tandem_store::DataModel;

use crate::config::NodeConfig;
use crate::metrics::Metrics;

/// Tells a cluster-mode node's supervisor, waking it, that the connection from a peer was
/// closed from the peer's side (end of stream or a reset; never a close of this node's own).
/// The kernel closes a killed process's sockets at once, so this is how a node learns of a
/// peer's death in microseconds rather than after a silence.
#[derive(Clone)]
pub struct PeerClosed(Arc<dyn Fn(NodeId) + Send + Sync>);

impl PeerClosed {
    pub fn new(tell: impl Fn(NodeId) + Send + Sync + 'static) -> PeerClosed {
        PeerClosed(Arc::new(tell))
    }

    /// The connection from `peer` was closed from its side.
    pub fn tell(&self, peer: NodeId) {
        (self.0)(peer)
    }
}

impl std::fmt::Debug for PeerClosed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("PeerClosed")
    }
}

/// A request to the thread that owns a node's segment.
#[derive(Debug)]
pub enum Control {
    Status(Sender<NodeStatus>),
    Checksum(Sender<Checksum>),
}

/// Starts a thread that serves one connection or peer. If the system refuses one (out of
/// threads or memory), says so and returns false: the closure, with the connection it owns, is
/// dropped, so the other side sees the connection close and retries.
fn spawn_or_say(name: String, work: impl FnOnce() + Send + 'static) -> bool {
    match std::thread::Builder::new().name(name.clone()).spawn(work) {
        Ok(_) => true,
        Err(err) => {
            tracing::error!("cannot start thread {name}: {err}; its connection is closed");
            false
        }
    }
}

/// Sends a question carrying a reply channel and waits up to `timeout` for the answer; `None`
/// if the role has stopped or did not answer in time.
fn ask<T, E>(timeout: Duration, send: impl FnOnce(Sender<T>) -> Result<(), E>) -> Option<T> {
    let (reply, answer) = std::sync::mpsc::channel();
    send(reply).ok()?;
    answer.recv_timeout(timeout).ok()
}

/// What `/status` reports.
#[derive(Clone, Debug, Serialize)]
pub struct NodeStatus {
    pub node_id: NodeId,
    pub role: &'static str,
    pub view: u64,
    /// Primary: last LSN committed. Backup: last LSN received.
    pub lsn: u64,
    pub lsn_applied: u64,
    pub pending_replies: u64,
    /// Primary only: (backup, lsn_received, lsn_applied).
    pub backups: Vec<(NodeId, u64, u64)>,
    /// Primary only: commits, and the payload bytes of their records by class.
    pub commits: u64,
    pub shipped_data_bytes: u64,
    pub shipped_undo_bytes: u64,
    pub shipped_meta_bytes: u64,
    /// Primary only: batch bytes handed to the links, framing included, summed over backups.
    pub shipped_wire_bytes: u64,
    /// Filled by a full report: the workload's consistency check (None when consistent).
    pub check: Option<String>,
}

/// What `/status` serves (the status; `checksum` null) and `/checksum` (with the segment's
/// checksum, which pauses the role's thread while it is taken).
#[derive(Clone, Debug, Serialize)]
pub struct NodeReport {
    pub status: NodeStatus,
    pub checksum: Option<Checksum>,
}

/// A CRC32C of a segment's bytes at an LSN: replicas at the same LSN must agree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Checksum {
    pub lsn: u64,
    pub crc32c: u32,
    /// Why no checksum could be taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The workload's consistency check on these bytes, when it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
}

impl Checksum {
    pub fn of(bytes: &[u8], lsn: u64) -> Checksum {
        Checksum {
            lsn,
            crc32c: crc32c::crc32c(bytes),
            error: None,
            check: None,
        }
    }
}

/// The sockets a node listens on: its native port, and its `/metrics` and RESP ports if
/// configured.
#[derive(Debug)]
pub struct Listeners {
    pub native: TcpListener,
    pub metrics: Option<TcpListener>,
    /// The RESP endpoint of each group the node serves in, if it serves RESP.
    pub resp: Vec<(u32, TcpListener)>,
}

/// The logs of the node this process runs (one per group it serves in), once they are open:
/// a stop drains them first.
static NODE_LOGS: std::sync::Mutex<Vec<log::NodeLog>> = std::sync::Mutex::new(Vec::new());

/// How long a stopping node waits for its log to write what it was ordered.
const STOP_DRAIN_MAX: Duration = Duration::from_secs(5);

/// Stops the node this process runs, as `SIGTERM` or `SIGINT` asks: its log writes and syncs
/// every record ordered so far (every commit the node acknowledged, or acked as a backup,
/// was ordered before that), then the process exits with 0. Without it a stop was a crash:
/// a cluster stopped whole came back without the records its log threads had not written.
pub fn stop_node() -> ! {
    // A stop that comes while a log is being remembered waits for it; a poisoned lock's
    // logs are drained all the same.
    let logs = NODE_LOGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let drained = logs.iter().all(|log| log.drain(STOP_DRAIN_MAX));
    match (logs.is_empty(), drained) {
        (true, _) => {}
        (false, true) => {
            tracing::info!("stopping: the logs hold every record ordered before the stop");
        }
        (false, false) => tracing::warn!(
            "stopping: a log did not finish writing within {STOP_DRAIN_MAX:?}; what it had \
             not written is lost with the process"
        ),
    }
    std::process::exit(0)
}

/// The RESP endpoints' listeners, one per group the node serves in, if the node has a RESP
/// port: only a Redis workload opens them.
fn bind_resp(
    config: &NodeConfig,
    model: &dyn DataModel,
) -> Result<Vec<(u32, TcpListener)>, StartError> {
    match config.resp_listen {
        Some(_) if model.name() == "redis" => {
            let mut listeners = Vec::new();
            for group in config.served_groups() {
                let address = config
                    .resp_address(config.node_id, group)
                    .expect("a valid config's served group has an endpoint");
                let listener = TcpListener::bind(address).map_err(|source| StartError::Bind {
                    field: "resp_listen",
                    address,
                    source,
                })?;
                listeners.push((group, listener));
            }
            Ok(listeners)
        }
        Some(_) => {
            tracing::warn!(
                "node {}: resp_listen is set but the workload is {}, which Redis clients cannot \
                 use; the RESP port stays closed",
                config.node_id,
                model.name()
            );
            Ok(Vec::new())
        }
        None => Ok(Vec::new()),
    }
}

/// The queue `model`'s committed calls publish their keyspace notifications to, for the
/// subscribers of the node's RESP port. Every role's model is a replica of this one, so all
/// publish to the same queue.
fn publishing(model: &mut dyn DataModel) -> Arc<tandem_store::Publications> {
    let publications = Arc::new(tandem_store::Publications::default());
    model.publish_to(Arc::clone(&publications));
    publications
}

/// Remembers one of the logs of the node this process runs (one a signal stops), for
/// [`stop_node`].
fn stopping_drains(log: &log::NodeLog) {
    let mut logs = NODE_LOGS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    logs.push(log.clone());
}

/// Runs a node serving `model` until the process is stopped (as `stop` says, or killed).
/// Errors are setup failures, with the field or resource named.
pub fn run_node(
    config: NodeConfig,
    model: Box<dyn DataModel>,
    stop: StopWhen,
) -> Result<(), StartError> {
    let listeners = Listeners::bind(&config, model.as_ref())?;
    let node = start_node(&config, listeners, model, stop, None)?;
    // The node's thread runs until the process stops: it exits the process itself.
    node.wait();
    Err(StartError::NodeThreadEnded)
}

/// Starts the node `config` describes, serving `model` on `listeners`, and returns once its
/// threads run: `tandem node`'s work, and a node inside a test or a benchmark (`load`: the
/// in-process driver whose calls its primary role runs on its own thread). A group without a
/// `[cluster]` table runs the same `Node` with a view that never changes.
pub fn start_node(
    config: &NodeConfig,
    listeners: Listeners,
    mut model: Box<dyn DataModel>,
    stop: StopWhen,
    load: Option<Arc<primary::LocalLoad>>,
) -> Result<cluster::RunningNode, StartError> {
    files::secure_data_dirs(config)?;
    // One watch for the node's scripts: every role's model is a replica of this one.
    let scripts = scripts::Scripts::new(&config.tuning);
    model.watch_calls(Arc::clone(scripts.watch()));
    // The model's keyspace notifications go to the RESP port of a node of one group; one
    // serving in several has no queue for them yet (docs/many-groups.md, step 4).
    let one_group = config.served_groups().len() == 1;
    let publications =
        (!listeners.resp.is_empty() && one_group).then(|| publishing(model.as_mut()));
    // The node starts in its role in the first group it serves: the primary if it leads
    // that group's first view.
    let plans = config.group_plans();
    let first_served = plans
        .iter()
        .find(|plan| plan.members.contains(&config.node_id));
    let role = match first_served.is_some_and(|plan| plan.members[0] == config.node_id) {
        true => "primary",
        false => "backup",
    };
    let metrics = Arc::new(Metrics::new(config.node_id, role));
    let served: Vec<String> = (config.served_groups().iter())
        .map(u32::to_string)
        .collect();
    tracing::info!(
        "node {} serving group {} {} on {}",
        config.node_id,
        served.join(", "),
        match config.cluster {
            Some(_) => "in cluster mode".to_owned(),
            None => format!("in view {} for good ({role})", config.group.view),
        },
        config.listen
    );
    cluster::start(
        config,
        listeners,
        model,
        metrics,
        scripts,
        stop,
        publications,
        load,
    )
}

impl Listeners {
    /// Binds the ports `config` names: its native port, and its `/metrics` and RESP ports if
    /// set (the RESP port only for a model Redis clients can use).
    pub fn bind(config: &NodeConfig, model: &dyn DataModel) -> Result<Listeners, StartError> {
        let bind = |field, address| {
            TcpListener::bind(address).map_err(|source| StartError::Bind {
                field,
                address,
                source,
            })
        };
        Ok(Listeners {
            native: bind("listen", config.listen)?,
            metrics: config
                .metrics_listen
                .map(|address| bind("metrics_listen", address))
                .transpose()?,
            resp: bind_resp(config, model)?,
        })
    }
}
