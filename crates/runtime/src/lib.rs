//! The node runtime: drives the replication core with real TCP, threads and a clock.
//!
//! [`run_node`] is `tandem node --config FILE`: it loads the group's workload, then runs the
//! node's role until the process is stopped. A primary runs the executor, a link per backup and
//! the client connections ([`primary`]); a backup runs a receiver per primary connection and
//! the applier ([`backup`]). Both serve `/metrics` and `/status` over HTTP when configured.
//!
//! Roles are static here: the configuration names the primary. In cluster mode ([`cluster`])
//! the config store names it, and the roles follow its views.

mod auth_failures;
pub mod backup;
pub mod cluster;
pub mod config;
mod error;
pub mod files;
pub mod gate;
mod host;
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
pub mod scripts;
mod stops;
pub mod throttle;
pub mod tls;
pub mod workload;

pub use error::{HandoverFailure, StartError};
pub use peer_auth::TlsWriter;
pub use stops::StopWhen;

use std::net::TcpListener;
use std::sync::Arc;
use std::sync::mpsc::Sender;
use std::time::Duration;

use serde::Serialize;
use tandem_replication::NodeId;
use tandem_store::DataModel;

use crate::config::{NodeConfig, Role};
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
    Stop,
}

/// Sends a question carrying a reply channel and waits up to `timeout` for the answer; `None`
/// if the role has stopped or did not answer in time.
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

/// Waits for a role's thread; a thread that panicked is said, not hidden (the panic message
/// was printed when it happened).
fn join_or_say<T>(what: &str, handle: std::thread::JoinHandle<T>) -> Option<T> {
    let joined = handle.join();
    if joined.is_err() {
        tracing::error!("{what} panicked and stopped");
    }
    joined.ok()
}

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
    pub resp: Option<TcpListener>,
}

/// The log of the node this process runs, once it is open: a stop drains it first.
static NODE_LOG: std::sync::OnceLock<log::NodeLog> = std::sync::OnceLock::new();

/// How long a stopping node waits for its log to write what it was ordered.
const STOP_DRAIN_MAX: Duration = Duration::from_secs(5);

/// Stops the node this process runs, as `SIGTERM` or `SIGINT` asks: its log writes and syncs
/// every record ordered so far (every commit the node acknowledged, or acked as a backup,
/// was ordered before that), then the process exits with 0. Without it a stop was a crash:
/// a cluster stopped whole came back without the records its log threads had not written.
pub fn stop_node() -> ! {
    if let Some(log) = NODE_LOG.get() {
        if log.drain(STOP_DRAIN_MAX) {
            tracing::info!("stopping: the log holds every record ordered before the stop");
        } else {
            tracing::warn!(
                "stopping: the log did not finish writing within {STOP_DRAIN_MAX:?}; what it \
                 had not written is lost with the process"
            );
        }
    }
    std::process::exit(0)
}

/// The RESP port's listener, if the node has one: only a Redis workload opens it.
fn bind_resp(
    config: &NodeConfig,
    model: &dyn DataModel,
) -> Result<Option<TcpListener>, StartError> {
    match config.resp_listen {
        Some(address) if model.name() == "redis" => {
            TcpListener::bind(address)
                .map(Some)
                .map_err(|source| StartError::Bind {
                    field: "resp_listen",
                    address,
                    source,
                })
        }
        Some(_) => {
            tracing::warn!(
                "node {}: resp_listen is set but the workload is {}, which Redis clients cannot \
                 use; the RESP port stays closed",
                config.node_id,
                model.name()
            );
            Ok(None)
        }
        None => Ok(None),
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

/// Remembers the node's log, for [`stop_node`].
fn stopping_drains(log: &log::NodeLog) {
    let _ = NODE_LOG.set(log.clone());
}

/// Runs a node serving `model` until the process is stopped (as `stop` says, or killed).
/// Errors are setup failures, with the field or resource named.
pub fn run_node(
    config: NodeConfig,
    mut model: Box<dyn DataModel>,
    stop: StopWhen,
) -> Result<(), StartError> {
    files::secure_data_dirs(&config)?;
    // One watch for the node's scripts: every role's model is a replica of this one.
    let scripts = scripts::Scripts::new(&config.tuning);
    model.watch_calls(Arc::clone(scripts.watch()));
    let listener = TcpListener::bind(config.listen).map_err(|source| StartError::Bind {
        field: "listen",
        address: config.listen,
        source,
    })?;
    let metrics_listener = match config.metrics_listen {
        Some(address) => Some(
            TcpListener::bind(address).map_err(|source| StartError::Bind {
                field: "metrics_listen",
                address,
                source,
            })?,
        ),
        None => None,
    };
    let resp_listener = bind_resp(&config, model.as_ref())?;
    let publications = resp_listener.as_ref().map(|_| publishing(model.as_mut()));
    let role = match config.role {
        Role::Primary => "primary",
        Role::Backup => "backup",
    };
    let metrics = Arc::new(Metrics::new(config.node_id, role));
    // A node without a `[cluster]` table runs the same `Node` with a view that never changes;
    // only a passive group's nodes still run the static executor and applier.
    if config.cluster.is_some() || config.group.mode == config::Mode::Active {
        tracing::info!(
            "node {} serving group {} {} on {}",
            config.node_id,
            config.group.id,
            match config.cluster {
                Some(_) => "in cluster mode".to_owned(),
                None => format!("in view {} for good ({role})", config.group.view),
            },
            config.listen
        );
        let listeners = Listeners {
            native: listener,
            metrics: metrics_listener,
            resp: resp_listener,
        };
        return cluster::run(
            &config,
            listeners,
            model,
            metrics,
            scripts,
            stop,
            publications,
        );
    }
    let node = Arc::new(match config.role {
        Role::Primary => Node::Primary(primary::start(
            &config,
            listener,
            model,
            Arc::clone(&metrics),
            None,
        )?),
        Role::Backup => Node::Backup(backup::start(
            &config,
            listener,
            model,
            Arc::clone(&metrics),
        )?),
    });
    tracing::info!(
        "node {} ({role}) serving group {} view {} on {}",
        config.node_id,
        config.group.id,
        config.group.view,
        config.listen
    );
    // The I/O loop serves the RESP port, if the node has one, and watches for a stop; a
    // static node's native clients keep threads of their own (its primary's acceptor).
    let resp_port = resp_listener.as_ref().and_then(|l| l.local_addr().ok());
    let resp_node = StaticResp::new(&config, Arc::clone(&node), resp_port, &metrics, &scripts);
    let (io_loop, _) = resp::IoLoop::new(
        resp_listener,
        Arc::new(resp_node),
        config.resp_tls()?,
        config.tuning.client_limits(),
        stop,
        publications,
        None,
    )?;
    if let Some(listener) = metrics_listener {
        serve_static_status(listener, metrics, &config, node);
    }
    // The main thread serves the loop until the process is stopped.
    Err(StartError::IoLoop(io_loop.run()))
}

/// Serves a static node's `/metrics` and `/status` on `listener`.
fn serve_static_status(
    listener: std::net::TcpListener,
    metrics: Arc<Metrics>,
    config: &NodeConfig,
    node: Arc<Node>,
) {
    metrics::serve(
        listener,
        metrics,
        config.resp_password(),
        move |with_checksum| {
            let report = node.report(with_checksum);
            serde_json::to_string(&report).unwrap_or_else(|_| "null".into())
        },
    );
}

/// What a RESP connection knows of a node whose role the configuration fixes.
struct StaticResp {
    node: Arc<Node>,
    node_id: NodeId,
    resp_port: u16,
    primary_resp: Option<std::net::SocketAddr>,
    backups: usize,
    /// The backups' RESP addresses the configuration names (`ROLE`).
    backups_resp: Arc<[String]>,
    maxmemory: usize,
    safety: String,
    safety_rule: tandem_replication::Safety,
    metrics: Arc<Metrics>,
    requirepass: Option<tandem_redis::session::Password>,
    users: Arc<Vec<Arc<tandem_redis::session::User>>>,
    protected_mode: bool,
    scripts: scripts::Scripts,
    host: Arc<host::Host>,
}

impl StaticResp {
    /// What the RESP sessions of the node `config` describes know of it (`resp_port`: where
    /// its RESP port listens, if it has one).
    fn new(
        config: &NodeConfig,
        node: Arc<Node>,
        resp_port: Option<std::net::SocketAddr>,
        metrics: &Arc<Metrics>,
        scripts: &scripts::Scripts,
    ) -> StaticResp {
        StaticResp {
            node,
            resp_port: resp_port.map_or(0, |a| a.port()),
            primary_resp: match config.role {
                Role::Primary => config.resp_listen,
                Role::Backup => config
                    .peers
                    .iter()
                    .find(|peer| peer.role == Role::Primary)
                    .and_then(|peer| peer.resp),
            },
            node_id: config.node_id,
            requirepass: config.resp_password(),
            users: Arc::new(config.resp_users()),
            protected_mode: config.protected_mode,
            scripts: scripts.clone(),
            backups: config
                .peers
                .iter()
                .filter(|p| p.role == Role::Backup)
                .count()
                + usize::from(config.role == Role::Backup),
            backups_resp: config
                .peers
                .iter()
                .filter(|peer| peer.role == Role::Backup)
                .filter_map(|peer| peer.resp.map(|address| address.to_string()))
                .collect(),
            maxmemory: config.group.db_mib << 20,
            safety: config.group.safety.to_string(),
            safety_rule: config.group.safety,
            host: host::Host::new(metrics),
            metrics: Arc::clone(metrics),
        }
    }
}

impl resp::RespNode for StaticResp {
    fn info(&self) -> tandem_redis::session::ServerInfo {
        tandem_redis::session::ServerInfo {
            node_id: u64::from(self.node_id),
            primary: matches!(*self.node, Node::Primary(_)),
            backup: matches!(*self.node, Node::Backup(_)),
            primary_resp: self.primary_resp.map(|a| a.to_string()),
            resp_port: self.resp_port,
            backups: self.backups,
            backups_resp: Arc::clone(&self.backups_resp),
            backups_acked: self
                .safety_rule
                .backup_acks()
                .map_or(0, |acks| acks.needed(self.backups)),
            maxmemory: self.maxmemory,
            safety: self.safety.clone(),
            requirepass: self.requirepass.clone(),
            users: Arc::clone(&self.users),
            script: self.scripts.activity(),
            host: Some(self.host.clone() as Arc<dyn tandem_redis::session::HostFacts>),
            // The RESP port's loop holds the node's pub/sub hub.
            pubsub: true,
            // The RESP port's loop fills it in from its hub.
            pubsub_counts: Default::default(),
            // The RESP port's loop fills these in: it keeps the counters and reads the port's LSN.
            command_stats: None,
            repl_offset: 0,
        }
    }

    fn scripts(&self) -> Option<&scripts::Scripts> {
        Some(&self.scripts)
    }

    fn with_primary(&self, with: &mut dyn FnMut(&primary::PrimaryHandle)) {
        if let Node::Primary(handle) = &*self.node {
            with(handle);
        }
    }

    fn with_backup(&self, with: &mut dyn FnMut(&backup::BackupHandle)) {
        if let Node::Backup(handle) = &*self.node {
            with(handle);
        }
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn protected_mode(&self) -> bool {
        self.protected_mode
    }
}

/// A running node of either role.
#[derive(Debug)]
pub enum Node {
    Primary(primary::PrimaryHandle),
    Backup(backup::BackupHandle),
}

impl Node {
    pub fn status(&self) -> Option<NodeStatus> {
        match self {
            Node::Primary(handle) => handle.status(),
            Node::Backup(handle) => handle.status(),
        }
    }

    pub fn checksum(&self) -> Option<Checksum> {
        match self {
            Node::Primary(handle) => handle.checksum(),
            Node::Backup(handle) => handle.checksum(),
        }
    }

    /// The status, and with `with_checksum` the checksum too: `/status` and `/checksum`.
    pub fn report(&self, with_checksum: bool) -> Option<NodeReport> {
        let status = self.status()?;
        let checksum = if with_checksum {
            Some(self.checksum()?)
        } else {
            None
        };
        Some(NodeReport { status, checksum })
    }
}
