//! Cluster mode: a node whose role follows the config store.
//!
//! One listener serves everything; the first frame (a Hello) says who is calling:
//! - a client goes to the primary role if this node holds it, else gets `NotPrimary`;
//! - a replica link goes to the backup role if the caller is the primary it follows, else
//!   gets `StaleView`;
//! - another node's cluster core gets a reader that feeds the supervisor.
//!
//! The supervisor thread is a pump around the node's [`tandem_node::Supervisor`], which owns
//! the cluster core ([`tandem_cluster::Cluster`], with the config store's Raft member) and
//! the role rule, and decides. The thread reads the clock and its inbox, ticks the core,
//! feeds it what the roles observe (acks, frames from the primary), and has
//! [`RuntimeRoles`] carry out the supervisor's orders: send a message, freeze a backup,
//! start, keep or end a role thread. The simulator carries out the same orders in memory.
//!
//! A node that restarts with persisted config-store state never resumes a role: its memory
//! is gone. It stays out of the view until it is added as a spare, and catches up from the
//! primary's retained tail.

use std::collections::BTreeMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tandem_cluster::role::Transition;
use tandem_cluster::{Cluster, ClusterMessage, ClusterSettings};
use tandem_config::{ClusterMap, FileDurable, Member, NodeInfo, View};
use tandem_log::SealedBatch;
use tandem_memory::Segment;
use tandem_replication::NodeId;
use tandem_store::DataModel;
use tandem_wire::{ErrorCode, Frame, FrameBuffer, Hello, PeerKind, encode_error};

use crate::backup::{self, BackupHandle, Gate};
use crate::config::{NodeConfig, Role};
use crate::gate::Handshake;
use crate::log::NodeLog;
use crate::metrics::Metrics;
use crate::net::{self, ConnError};
use crate::peer_auth::{ClientAuth, PeerAuth, Sealer};
use crate::primary::{self, Inbound, PrimaryHandle, RoleView};
use crate::scripts::Scripts;
use crate::{Checksum, NodeStatus, StartError};
use serde::Serialize;
use tandem_node::{
    Carrier, CarryNote, DriveError, Handover, Notice, Observed, Records, RoleHeld, RoleRule,
};

/// A cluster message in a few words, for the trace lines.
fn brief(message: &ClusterMessage) -> String {
    match message {
        ClusterMessage::Raft(bytes) => format!("raft ({} bytes)", bytes.len()),
        other => format!("{other:?}"),
    }
}

/// Most ticks replayed at once after the supervisor fell behind the clock.
const TICKS_REPLAYED_MAX: u32 = 2;

/// What this node currently is in its group.
type Slot = tandem_node::Slot<PrimaryHandle, BackupHandle>;

/// What `/status` says of this node's place in the cluster.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterInfo {
    pub node: NodeId,
    /// primary, backup, spare or outside.
    pub role: String,
    pub view: u64,
    pub primary: Option<NodeId>,
    /// Backups in the view.
    pub backups: usize,
    /// Where this node serves RESP, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resp: Option<SocketAddr>,
    /// The config store's leader as this node knows it.
    pub leader: Option<NodeId>,
    /// A backup: how long since it last heard its primary.
    pub heard_primary_ms_ago: Option<f64>,
    pub uptime_ms: f64,
    /// The suspicions this node raised, by suspected peer: a benchmark that killed one node
    /// counts the rest as false suspicions.
    pub suspected: BTreeMap<NodeId, u64>,
    /// The first view this node followed: `view` − `view_first` view changes since it
    /// started (`tandem_view_changes_total` in `/metrics`).
    pub view_first: u64,
    /// How long this node served as primary of a view without a backup, in milliseconds
    /// since it started (`tandem_primary_alone_seconds_total`).
    pub alone_ms: f64,
}

/// `/status` (and `/checksum`) in cluster mode: the cluster info and, when the node holds a
/// role, its status (and its segment's checksum with the consistency check).
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    pub cluster: ClusterInfo,
    pub report: Option<ClusterRoleReport>,
    /// The node's write-ahead log, once it is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogReport>,
}

/// What `/status` says of the write-ahead log.
#[derive(Clone, Debug, Serialize)]
pub struct LogReport {
    /// Every record up to here is synced and a restart could rebuild it (0: none).
    pub lsn_durable: u64,
    /// Why the log stopped taking records, if it did (the node acknowledges nothing as
    /// durable any more; restart it).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failed: Option<String>,
}

/// A role's status, and its checksum when asked for.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterRoleReport {
    pub status: NodeStatus,
    pub checksum: Option<Checksum>,
}

/// The role's report, asked without holding the slot (a failover must not wait for it).
fn slot_report(slot: &Mutex<Slot>, with_checksum: bool) -> Option<ClusterRoleReport> {
    let probe = match &*slot.lock().expect("not poisoned") {
        Slot::Outside => return None,
        Slot::Primary(handle) => Ok(handle.probe()),
        Slot::Backup(handle) => Err(handle.probe()),
    };
    let (status, checksum) = match probe {
        Ok(primary) => (
            primary.status()?,
            with_checksum.then(|| primary.checksum()).flatten(),
        ),
        Err(backup) => (
            backup.status()?,
            with_checksum.then(|| backup.checksum()).flatten(),
        ),
    };
    Some(ClusterRoleReport { status, checksum })
}

/// What reaches the supervisor.
#[derive(Debug)]
enum ToSupervisor {
    Cluster {
        from: NodeId,
        message: ClusterMessage,
    },
    Observed(Observed),
    /// The connection from a peer was closed from its side.
    PeerClosed(NodeId),
}

/// Runs a cluster-mode node until the process is stopped.
pub fn run(
    config: &NodeConfig,
    listener: TcpListener,
    metrics_listener: Option<TcpListener>,
    resp_listener: Option<TcpListener>,
    model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    scripts: Scripts,
) -> Result<(), StartError> {
    let table = config
        .cluster
        .as_ref()
        .expect("cluster mode has a cluster table");
    let peer_auth = PeerAuth::new(config, &metrics)?;
    std::fs::create_dir_all(&table.data_dir).map_err(|source| StartError::DataDir {
        path: table.data_dir.clone(),
        source,
    })?;
    let (disk, persisted) =
        FileDurable::open(&table.data_dir).map_err(StartError::ConfigStoreDisk)?;
    let restarted = persisted.is_some();
    let mut addresses: BTreeMap<NodeId, SocketAddr> = BTreeMap::new();
    addresses.insert(config.node_id, config.listen);
    for peer in &config.peers {
        addresses.insert(peer.node_id, peer.address);
    }
    let initial = initial_map(config, &addresses);
    let settings = ClusterSettings {
        node: config.node_id,
        group: config.group.id,
        voters: config.voters(),
        safety: config.group.safety,
        suspect_ticks: config.tuning.suspect_ticks,
        lease_ticks: table.lease_ticks,
        collect_ticks: table.collect_ticks,
        election_ticks: table.election_ticks as usize,
        raft_heartbeat_ticks: 2,
        jitter_seed: u64::from(config.node_id),
        executor_stall_ticks: Some(
            (config.tuning.executor_stall_ms * 1000).div_ceil(config.tuning.tick_us),
        ),
        // A script within its time limit (and the stall allowance after it) is progress;
        // without a limit, for ever.
        long_call_ticks: match config.tuning.script_time_limit_ms {
            0 => u64::MAX,
            limit_ms => ((limit_ms + config.tuning.executor_stall_ms) * 1000)
                .div_ceil(config.tuning.tick_us),
        },
    };
    let core = Cluster::new(settings, initial, persisted).map_err(StartError::ConfigStore)?;
    // The trace lines cost a formatted message per cluster message: they are built only when
    // the log level lets them through (`--log-level trace`, `RUST_LOG=trace`, `TANDEM_TRACE`).
    let trace = tracing::enabled!(tracing::Level::TRACE);
    let (to_supervisor, inbox) = mpsc::channel();
    let slot = Arc::new(Mutex::new(Slot::Outside));
    let slot_changed = Arc::new(Condvar::new());
    let info = Arc::new(Mutex::new(ClusterInfo {
        node: config.node_id,
        resp: config.resp_listen,
        ..ClusterInfo::default()
    }));
    if let Some(listener) = resp_listener {
        let node = ClusterResp {
            node_id: config.node_id,
            resp_port: listener.local_addr().map_or(0, |a| a.port()),
            resp_by_node: config
                .peers
                .iter()
                .filter_map(|peer| Some((peer.node_id, peer.resp?)))
                .chain(config.resp_listen.map(|a| (config.node_id, a)))
                .collect(),
            maxmemory: config.group.db_mib << 20,
            safety: config.group.safety.to_string(),
            safety_rule: config.group.safety,
            slot: Arc::clone(&slot),
            requirepass: config.resp_password(),
            users: Arc::new(config.resp_users()),
            protected_mode: config.protected_mode,
            info: Arc::clone(&info),
            metrics: Arc::clone(&metrics),
            scripts: scripts.clone(),
        };
        crate::resp::spawn(
            listener,
            Arc::new(node),
            config.resp_tls()?,
            config.tuning.client_limits(),
        )?;
    }
    // The log opens once the segment is loaded (below); `/status` says of it from then on.
    let log_opened: Arc<std::sync::OnceLock<NodeLog>> = Arc::new(std::sync::OnceLock::new());
    if let Some(listener) = metrics_listener {
        let slot = Arc::clone(&slot);
        let info = Arc::clone(&info);
        let log_opened = Arc::clone(&log_opened);
        let password = config.resp_password();
        crate::metrics::serve(
            listener,
            Arc::clone(&metrics),
            password,
            move |with_checksum| {
                let info = info.lock().expect("not poisoned").clone();
                let report = slot_report(&slot, with_checksum);
                let log = log_opened.get().map(|log| LogReport {
                    lsn_durable: log.lsn_durable(),
                    failed: log.poisoned(),
                });
                serde_json::to_string(&ClusterReport {
                    cluster: info,
                    report,
                    log,
                })
                .unwrap_or_else(|_| "null".into())
            },
        );
    }
    let peer_closed = {
        let to_supervisor = to_supervisor.clone();
        crate::PeerClosed::new(move |peer| {
            // The supervisor outlives the roles; if it is gone, so is the node.
            let _ = to_supervisor.send(ToSupervisor::PeerClosed(peer));
        })
    };
    let acceptor = Acceptor {
        node_id: config.node_id,
        group: config.group.id,
        max_frame_len: config.tuning.max_frame_len,
        slot: Arc::clone(&slot),
        slot_changed: Arc::clone(&slot_changed),
        to_supervisor,
        auth: peer_auth.clone(),
        client_auth: ClientAuth::new(config, &metrics)?,
        metrics: Arc::clone(&metrics),
        maxclients: config.tuning.maxclients,
    };
    let acceptor = Arc::new(acceptor);
    crate::gate::spawn(
        listener,
        crate::gate::GateLimits::for_maxclients(config.tuning.maxclients),
        Arc::clone(&metrics),
        Box::new(move |stream, buffer, handshake| {
            let acceptor = Arc::clone(&acceptor);
            crate::spawn_or_say("hello".into(), move || {
                acceptor.dispatch(stream, buffer, handshake)
            });
        }),
    )
    .map_err(StartError::NativePort)?;
    // The segment is loaded before the core ticks, so that the first view's roles start at
    // once rather than each node being silent for its own load.
    let mut segment = crate::workload::loaded_segment(&config.group, &*model)?;
    let lsn_load = segment.lsn();
    let (log, recovered) = match crate::log::open_configured(config, lsn_load, &metrics)? {
        Some((log, recovered)) => (Some(log), Some(recovered)),
        None => (None, None),
    };
    if let Some(log) = &log {
        let _ = log_opened.set(log.clone());
    }
    // A node that restarts (its config store kept state) rebuilds what its log holds, if
    // the log starts at the initial load or continues a checkpoint; a node of a fresh
    // cluster starts from the load, and its first role cuts whatever an older cluster left
    // in the log.
    let view_known = core.view().map_or(config.group.view, |view| view.number);
    let replayed = match recovered {
        Some(recovered) if restarted => {
            replay_log(config, &mut segment, &recovered, lsn_load, view_known)
        }
        _ => None,
    };
    if replayed.is_none() && segment.lsn() != lsn_load {
        // A replay that stopped part way leaves a segment no role may start from as loaded.
        segment = crate::workload::loaded_segment(&config.group, &*model)?;
    }
    let segment_next = match replayed {
        Some(_) => NextSegment::Recovered(segment),
        None => NextSegment::Ready(segment),
    };
    let roles = RuntimeRoles {
        log,
        config: config.clone(),
        model,
        scripts,
        metrics,
        slot,
        slot_changed,
        outbox: Outbox {
            node: config.node_id,
            group: config.group.id,
            addresses,
            writers: BTreeMap::new(),
            trace,
            auth: peer_auth.clone(),
        },
        reads_heard: 0,
        executor_turns: 0,
        segment_next,
        loaded: None,
        info: Arc::clone(&info),
        trace,
        observed: None,
        heard_since_role: std::collections::BTreeSet::new(),
        peer_closed,
    };
    let mut rule = RoleRule::new(config.node_id, config.group.view, restarted);
    if let Some(replayed) = replayed {
        rule = rule.with_recovered(tandem_node::Recovered {
            view: replayed.view,
            lsn: replayed.lsn,
        });
    }
    let mut supervisor = SupervisorThread {
        node: tandem_node::Supervisor::new(core, rule),
        disk,
        roles,
        tick_us: config.tuning.tick_us,
        info,
        started: Instant::now(),
        alone_since: None,
        trace,
    };
    if let Some(replayed) = replayed {
        tracing::info!(
            "node {}: restarted; rebuilt LSN {} from its log (records of view {}), it rejoins \
             as a spare from there and fetches only what changed since",
            config.node_id,
            replayed.lsn,
            replayed.view
        );
    } else if restarted {
        tracing::info!(
            "node {}: restarted; its memory is gone, so it waits to rejoin as a spare",
            config.node_id
        );
    }
    supervisor.run(inbox);
    Ok(())
}

/// What a RESP connection knows of a cluster-mode node.
struct ClusterResp {
    node_id: NodeId,
    resp_port: u16,
    resp_by_node: BTreeMap<NodeId, SocketAddr>,
    maxmemory: usize,
    safety: String,
    safety_rule: tandem_replication::Safety,
    slot: Arc<Mutex<Slot>>,
    info: Arc<Mutex<ClusterInfo>>,
    metrics: Arc<Metrics>,
    requirepass: Option<tandem_redis::session::Password>,
    users: Arc<Vec<Arc<tandem_redis::session::User>>>,
    protected_mode: bool,
    scripts: Scripts,
}

impl crate::resp::RespNode for ClusterResp {
    fn info(&self) -> tandem_redis::session::ServerInfo {
        let (primary, backup) = match &*self.slot.lock().expect("not poisoned") {
            Slot::Primary(_) => (true, false),
            Slot::Backup(_) => (false, true),
            Slot::Outside => (false, false),
        };
        let info = self.info.lock().expect("not poisoned");
        tandem_redis::session::ServerInfo {
            node_id: u64::from(self.node_id),
            primary,
            backup,
            primary_resp: info
                .primary
                .and_then(|node| self.resp_by_node.get(&node))
                .map(ToString::to_string),
            resp_port: self.resp_port,
            backups: info.backups,
            backups_acked: self
                .safety_rule
                .backup_acks()
                .map_or(0, |acks| acks.needed(info.backups)),
            maxmemory: self.maxmemory,
            safety: self.safety.clone(),
            memory_lines: crate::resp::memory_lines(&self.metrics),
            requirepass: self.requirepass.clone(),
            users: Arc::clone(&self.users),
            script: self.scripts.activity(),
        }
    }

    fn scripts(&self) -> Option<&Scripts> {
        Some(&self.scripts)
    }

    fn with_primary(&self, with: &mut dyn FnMut(&PrimaryHandle)) {
        if let Slot::Primary(handle) = &*self.slot.lock().expect("not poisoned") {
            with(handle);
        }
    }

    fn with_backup(&self, with: &mut dyn FnMut(&BackupHandle)) {
        if let Slot::Backup(handle) = &*self.slot.lock().expect("not poisoned") {
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

/// The cluster map of a fresh cluster: every configured node, and the group's first view
/// as the roles in the configuration give it.
fn initial_map(config: &NodeConfig, addresses: &BTreeMap<NodeId, SocketAddr>) -> ClusterMap {
    let mut map = ClusterMap::default();
    for (&id, address) in addresses {
        map.nodes.insert(
            id,
            NodeInfo {
                id,
                address: address.to_string(),
            },
        );
    }
    let primary = if config.role == Role::Primary {
        config.node_id
    } else {
        config
            .peers
            .iter()
            .find(|peer| peer.role == Role::Primary)
            .map_or(config.node_id, |peer| peer.node_id)
    };
    let mut backups: Vec<NodeId> = addresses
        .keys()
        .copied()
        .filter(|&id| id != primary)
        .collect();
    backups.sort_unstable();
    map.groups.insert(
        config.group.id,
        View {
            number: config.group.view,
            primary,
            backups,
            spares: Vec::new(),
            promotions: Vec::new(),
        },
    );
    map
}

/// The supervisor thread: it reads the clock and its inbox, feeds the node's
/// [`tandem_node::Supervisor`], and has [`RuntimeRoles`] carry out what that decides.
struct SupervisorThread {
    node: tandem_node::Supervisor,
    disk: FileDurable,
    roles: RuntimeRoles,
    tick_us: u64,
    /// What `/status` says of the cluster, refreshed after every step.
    info: Arc<Mutex<ClusterInfo>>,
    started: Instant,
    /// Since when this node is primary of a view without a backup, if it is.
    alone_since: Option<Instant>,
    /// Trace level on: log every cluster message (but `Alive`) and every slow save.
    trace: bool,
}

impl SupervisorThread {
    fn run(&mut self, inbox: Receiver<ToSupervisor>) {
        let tick = Duration::from_micros(self.tick_us);
        let mut next_tick = Instant::now() + tick;
        self.drive();
        loop {
            let timeout = next_tick.saturating_duration_since(Instant::now());
            match inbox.recv_timeout(timeout) {
                Ok(message) => {
                    self.handle(message);
                    while let Ok(message) = inbox.try_recv() {
                        self.handle(message);
                    }
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => return,
            }
            while let Some(observed) = self
                .roles
                .observed
                .as_ref()
                .and_then(|rx| rx.try_recv().ok())
            {
                self.handle(ToSupervisor::Observed(observed));
            }
            self.roles.poll_spare();
            let now = Instant::now();
            // Ticks this thread missed while it was busy (loading a segment, changing role)
            // or descheduled are skipped, not replayed: replayed at once they would make the
            // failure detector accuse peers of a silence that was this node's own. Skipping
            // only ever makes this node wait longer, which keeps its lease promise.
            if now >= next_tick + tick * TICKS_REPLAYED_MAX {
                next_tick = now;
            }
            while now >= next_tick {
                if self.roles.heard_primary() {
                    self.node.core_mut().heard_from_primary();
                }
                if self.roles.executor_turned() {
                    self.node.executor_turned();
                }
                let long_call = self.roles.scripts.watch().running().is_some();
                self.node.core_mut().long_call_running(long_call);
                self.node.core_mut().tick();
                next_tick += tick;
            }
            self.roles.publish_stuck(self.node.core().is_stalled());
            self.drive();
            self.publish();
        }
    }

    /// Refreshes what `/status` says of the cluster.
    fn publish(&mut self) {
        self.count_alone();
        let core = self.node.core();
        let role = match &*self.roles.slot.lock().expect("not poisoned") {
            Slot::Outside => "outside",
            Slot::Primary(_) => "primary",
            // A backup role serves a backup or a spare, as the view says.
            Slot::Backup(_) => match core.member() {
                Member::Spare => "spare",
                _ => "backup",
            },
        };
        // `/metrics` follows the same role as `/status`, however it changed.
        self.roles.metrics.set_role(role);
        let mut info = self.info.lock().expect("not poisoned");
        info.role = role.to_string();
        info.view = core.view().map_or(0, |view| view.number);
        info.primary = core.view().map(|view| view.primary);
        info.backups = core.view().map_or(0, |view| view.backups.len());
        info.leader = core.leader();
        info.heard_primary_ms_ago = (role == "backup" || role == "spare")
            .then(|| core.ticks_since_heard_primary() as f64 * self.tick_us as f64 / 1000.0);
        info.uptime_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        info.alone_ms = self.roles.metrics.primary_alone_seconds.get() * 1000.0;
    }

    /// Adds the time since the last turn to `tandem_primary_alone_seconds_total` while this
    /// node serves as primary of a view without a backup.
    fn count_alone(&mut self) {
        let now = Instant::now();
        if let Some(since) = self.alone_since.take() {
            let alone = now.duration_since(since).as_secs_f64();
            self.roles.metrics.primary_alone_seconds.inc_by(alone);
        }
        let alone = matches!(
            &*self.roles.slot.lock().expect("not poisoned"),
            Slot::Primary(_)
        ) && self
            .node
            .core()
            .view()
            .is_some_and(|view| view.backups.is_empty() && !self.roles.config.peers.is_empty());
        if alone {
            self.alone_since = Some(now);
        }
    }

    fn handle(&mut self, message: ToSupervisor) {
        let me = self.node.node();
        match message {
            ToSupervisor::Cluster { from, message } => {
                if self.trace && !matches!(message, ClusterMessage::Alive { .. }) {
                    tracing::trace!("node {me}: from {from}: {}", brief(&message));
                }
                if let Err(err) = self.node.core_mut().step(from, message) {
                    self.roles.metrics.frames_rejected.inc();
                    tracing::warn!("node {me}: a cluster message from node {from}: {err}");
                }
            }
            ToSupervisor::Observed(observed) => {
                if let Observed::Heard(backup) = observed
                    && self.trace
                    && self.roles.heard_since_role.insert(backup)
                {
                    tracing::trace!("node {me}: first ack from node {backup} in this role");
                }
                self.node.observe(observed);
            }
            ToSupervisor::PeerClosed(peer) => {
                if self.trace {
                    tracing::trace!("node {me}: node {peer} closed its connection");
                }
                // The frames the backup role counted before its primary's connection closed
                // came before the close: taken now, the next tick does not count them as the
                // primary heard again, which took the closed connection back and made the
                // view change wait out the silence (8 ms, in two failovers of 40). (A backup
                // role's only peer connection is its primary's; any other role counts none.)
                let _ = self.roles.heard_primary();
                self.node.peer_closed(peer);
            }
        }
    }

    /// Has the node's supervisor save, send and act on what its core produced.
    fn drive(&mut self) {
        let started = Instant::now();
        let driven = self.node.drive(&mut self.disk, &mut self.roles);
        if let Some(loaded) = self.roles.loaded.take() {
            self.node.core_mut().set_loaded(loaded);
        }
        match driven {
            Ok(()) => {}
            Err(DriveError::Save(err)) => {
                // The config store cannot promise what it persisted: stop, never retry.
                tracing::error!(
                    "node {}: poisoned: the config store's state cannot be persisted ({err}); \
                     the node stops",
                    self.node.node()
                );
                std::process::exit(70);
            }
            Err(DriveError::Role(never)) => match never {},
        }
        if self.trace && started.elapsed() > Duration::from_micros(300) {
            tracing::trace!(
                "node {}: a step of the supervisor (saving the config store's state) \
                 took {:?}",
                self.node.node(),
                started.elapsed()
            );
        }
    }
}

/// The node's roles as threads: carries out the supervisor's orders, deciding nothing.
struct RuntimeRoles {
    /// Notified whenever the role in `slot` changes: a primary's link or a client's greeting
    /// that the acceptor holds while the node changes roles waits on it.
    slot_changed: Arc<Condvar>,
    config: NodeConfig,
    /// The data model this node's roles serve; each role gets a replica of it.
    model: Box<dyn DataModel>,
    /// The watch the model's scripts run under: the cluster core hears whether one runs
    /// (`Cluster::long_call_running`), and counts it as progress within its allowance.
    scripts: Scripts,
    metrics: Arc<Metrics>,
    slot: Arc<Mutex<Slot>>,
    /// Sends cluster messages to the other nodes (and knows their addresses).
    outbox: Outbox,
    /// The backup role's frame count when last read.
    reads_heard: u64,
    /// The primary role's executor turns when last read.
    executor_turns: u64,
    /// A freshly loaded segment, if one is ready (loading takes a while).
    segment_next: NextSegment,
    /// Whether a segment is ready for a join, when that changed; the thread tells the core
    /// after the drive.
    loaded: Option<bool>,
    info: Arc<Mutex<ClusterInfo>>,
    trace: bool,
    /// What the primary role observed (acks, caught-up spares), drained at every turn.
    observed: Option<Receiver<Observed>>,
    /// Backups the primary role heard from since it started (for the trace lines).
    heard_since_role: std::collections::BTreeSet<NodeId>,
    /// How the roles' threads tell the supervisor a peer closed its connection.
    peer_closed: crate::PeerClosed,
    /// The node's write-ahead log, which every role it takes appends to.
    log: Option<NodeLog>,
}

impl tandem_node::Roles for RuntimeRoles {
    type Error = std::convert::Infallible;

    fn held(&self) -> RoleHeld {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Outside => RoleHeld::Outside,
            Slot::Primary(handle) => RoleHeld::Primary {
                view: handle.view(),
            },
            Slot::Backup(handle) => RoleHeld::Backup {
                view: handle.gate().view(),
                primary: handle.gate().primary(),
            },
        }
    }

    fn lsn_committed(&mut self) -> u64 {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Primary(handle) => handle.status().map_or(0, |status| status.lsn),
            _ => unreachable!("only a primary is asked its committed LSN"),
        }
    }

    fn diverged(&self) -> bool {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Backup(handle) => handle.is_diverged(),
            _ => false,
        }
    }

    fn lsn_before_rewind(&self) -> Option<u64> {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Backup(handle) => handle.lsn_before_rewind(),
            _ => None,
        }
    }

    fn freeze(&mut self) -> u64 {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Backup(handle) => handle.freeze(),
            _ => unreachable!("only a backup is frozen"),
        }
    }

    fn lsn_synced(&self) -> u64 {
        match &*self.slot.lock().expect("not poisoned") {
            Slot::Backup(handle) => handle.lsn_synced(),
            _ => unreachable!("asked of a frozen backup"),
        }
    }

    fn prepare_removal(&mut self, view: u64, backup: NodeId) -> Result<(), Self::Error> {
        if let Slot::Primary(handle) = &*self.slot.lock().expect("not poisoned") {
            // A role that stopped answers nothing; the wish repeats next suspicion.
            let _ = handle
                .inbound
                .send(Inbound::PrepareRemoval { view, backup });
        }
        Ok(())
    }

    fn carry_out(&mut self, transition: Transition, view: &View) -> Result<bool, Self::Error> {
        let slot = std::mem::take(&mut *self.slot.lock().expect("not poisoned"));
        let next = tandem_node::carry_out(self, transition, slot, view);
        let serving = !matches!(next, Slot::Outside);
        self.heard_since_role.clear();
        *self.slot.lock().expect("not poisoned") = next;
        self.slot_changed.notify_all();
        Ok(serving)
    }

    fn send(&mut self, to: NodeId, message: ClusterMessage) {
        self.outbox.send(to, &message);
    }

    fn notice(&mut self, notice: Notice<'_>) {
        if let Notice::Following { view, .. } = notice {
            let mut info = self.info.lock().expect("not poisoned");
            if info.view_first == 0 {
                info.view_first = view.number;
            } else {
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
        tracing::info!(view, "node {}: {notice}", self.node());
    }
}

/// The node's roles as threads, for the carry-out table: each operation starts, stops or
/// changes a role's threads.
impl Carrier for RuntimeRoles {
    type Primary = PrimaryHandle;
    type Backup = BackupHandle;
    type HandoverError = crate::HandoverFailure;
    type LoadError = StartError;

    fn primary_view(&self, primary: &PrimaryHandle) -> u64 {
        primary.view()
    }

    fn stay_primary(&mut self, handle: PrimaryHandle, view: &View) -> Slot {
        let members = self.role_view(view);
        let installed = handle.inbound.send(primary::Inbound::View {
            view: view.number,
            backups: members.backups,
            spares: members.spares,
            addresses: members.addresses,
        });
        if installed.is_err() {
            // The executor is gone (it panicked): the node serves nothing, and the backups
            // replace it once they suspect it.
            tracing::error!(
                "node {}: the primary role's executor stopped; it cannot take view {}",
                self.node(),
                view.number
            );
            crate::join_or_say("the primary's executor", handle.executor);
            return Slot::Outside;
        }
        Slot::Primary(handle)
    }

    fn stay_backup(&mut self, handle: BackupHandle, view: &View) -> BackupHandle {
        handle.gate().set_view(view.number, view.primary);
        handle
    }

    fn hand_over(
        &mut self,
        handle: BackupHandle,
        lsn: u64,
    ) -> Result<Handover, crate::HandoverFailure> {
        handle.handover(lsn)
    }

    fn give_back(&mut self, handle: PrimaryHandle, view: &View) -> Option<Segment> {
        self.depose(handle, view)
    }

    fn stop(&mut self, slot: Slot, view: &View, discarded: u64) {
        self.stop_role(slot, view, discarded);
    }

    fn take_recovered(&mut self) -> Option<Segment> {
        self.recovered_segment()
    }

    fn load(&mut self) -> Result<Segment, StartError> {
        self.fresh_segment()
    }

    fn rewound(&mut self, segment: Segment, lsn: u64) -> Option<Segment> {
        self.rewound_to_rejoin(segment, lsn)
    }

    fn start_primary(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        lease_owed_ticks: u64,
        records: Records,
    ) -> Slot {
        let (me, lsn) = (self.node(), segment.lsn());
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
        self.spawn_primary(segment, tail, view, lease_owed_ticks)
    }

    fn start_backup(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        _: Records,
    ) -> Slot {
        if self.trace {
            tracing::trace!(
                "node {}: follows node {} from LSN {}",
                self.node(),
                view.primary,
                segment.lsn()
            );
        }
        self.spawn_backup(segment, tail, view)
    }

    fn start_frozen_backup(&mut self, segment: Segment, view_held: u64, _: &View) -> Slot {
        let gate = Gate::frozen(view_held, self.node());
        self.spawn_backup_gated(segment, Vec::new(), gate)
    }

    fn reload_backup(&mut self, view: &View) -> Slot {
        self.fresh_backup(view)
    }

    fn load_spare(&mut self) {
        self.start_loading_spare();
    }

    fn join_with_records(&mut self) {
        self.loaded = Some(true);
    }

    fn note(&mut self, note: CarryNote<'_>) {
        let me = self.node();
        match note {
            CarryNote::HandoverRefused { .. } | CarryNote::LoadFailed { .. } => {
                tracing::warn!("node {me}: {note}");
            }
            CarryNote::TakesBack { .. } | CarryNote::CannotRewind { .. } => {
                tracing::info!("node {me}: {note}");
            }
        }
    }
}

impl RuntimeRoles {
    fn node(&self) -> NodeId {
        self.config.node_id
    }

    /// Whether the backup role read bytes from its primary since the last call.
    fn heard_primary(&mut self) -> bool {
        let slot = self.slot.lock().expect("not poisoned");
        let Slot::Backup(handle) = &*slot else {
            return false;
        };
        let reads = handle.reads_heard();
        let heard = reads != self.reads_heard;
        self.reads_heard = reads;
        heard
    }

    /// Whether the primary role's executor began a turn since the last call.
    fn executor_turned(&mut self) -> bool {
        let slot = self.slot.lock().expect("not poisoned");
        let Slot::Primary(handle) = &*slot else {
            return false;
        };
        let turns = handle.progress.turns();
        let turned = turns != self.executor_turns;
        self.executor_turns = turns;
        turned
    }

    /// Tells the primary role's links whether the cluster core takes its executor as stuck.
    fn publish_stuck(&self, stuck: bool) {
        if let Slot::Primary(handle) = &*self.slot.lock().expect("not poisoned") {
            handle.progress.set_stuck(stuck);
        }
    }

    /// Carries out `transition` from the role in `slot`.
    /// Deposes the primary role in `slot` and takes its segment back, at its last commit;
    /// `None` if its executor had stopped, or in passive mode (the segment carries the
    /// passive trace, which a backup's mirror replaces): the node then reloads.
    fn depose(&self, handle: PrimaryHandle, view: &View) -> Option<Segment> {
        let _ = handle
            .inbound
            .send(primary::Inbound::Depose { view: view.number });
        let segment = crate::join_or_say("the deposed primary's executor", handle.executor)??;
        if self.config.group.mode != crate::config::Mode::Active {
            tracing::info!(
                "node {}: replaced by node {} in view {}; a passive primary's segment carries \
                 its trace, so it reloads",
                self.node(),
                view.primary,
                view.number
            );
            return None;
        }
        tracing::info!(
            "node {}: replaced by node {} in view {}; keeps its records up to LSN {}",
            self.node(),
            view.primary,
            view.number,
            segment.lsn()
        );
        Some(segment)
    }

    /// Ends the role in `slot` (a backup is frozen already) and says how many of its records
    /// the new view discards.
    fn stop_role(&self, slot: Slot, view: &View, discarded: u64) {
        let truncate = view
            .truncate_lsn()
            .map_or("none".to_owned(), |lsn| lsn.to_string());
        match slot {
            Slot::Primary(handle) => {
                let _ = handle
                    .inbound
                    .send(primary::Inbound::Depose { view: view.number });
                crate::join_or_say("the deposed primary's executor", handle.executor);
                tracing::info!(
                    "node {}: replaced by node {} in view {}; discarded {discarded} records \
                     above the truncate LSN {truncate}",
                    self.node(),
                    view.primary,
                    view.number
                );
            }
            Slot::Backup(_) if discarded > 0 => tracing::info!(
                "node {}: discarded {discarded} records above the truncate LSN {truncate}; \
                 reloading to catch up from the primary",
                self.node()
            ),
            Slot::Backup(_) | Slot::Outside => {}
        }
    }

    fn role_view(&self, view: &View) -> RoleView {
        let members: Vec<NodeId> = view.backups.iter().chain(&view.spares).copied().collect();
        RoleView {
            answer_from: None,
            lsn_released_max: None,
            view: view.number,
            backups: view.backups.clone(),
            spares: view.spares.clone(),
            addresses: members
                .iter()
                .filter_map(|node| {
                    self.outbox
                        .addresses
                        .get(node)
                        .map(|&address| (*node, address))
                })
                .collect(),
        }
    }

    fn spawn_primary(
        &mut self,
        segment: Segment,
        batches: Vec<SealedBatch>,
        view: &View,
        lease_owed_ticks: u64,
    ) -> Slot {
        // The supervisor drains what the primary role observed at every turn: a relay thread
        // would add a wake-up to every sign of life on a loaded machine.
        let (observed, observed_rx) = mpsc::channel();
        self.observed = Some(observed_rx);
        // The cluster core counts the lease owed in its ticks, from the one it is at: as many
        // from now (when the old code would have reported, had it waited here) keep it whole.
        let answer_from = (lease_owed_ticks > 0).then(|| {
            let tick = Duration::from_micros(self.config.tuning.tick_us);
            let owed = u32::try_from(lease_owed_ticks).unwrap_or(u32::MAX);
            Instant::now() + tick.saturating_mul(owed)
        });
        let members = RoleView {
            answer_from,
            lsn_released_max: tandem_node::lsn_released_at_promotion(view),
            ..self.role_view(view)
        };
        match primary::start_role(
            &self.config,
            segment,
            batches,
            members,
            self.model.replica(),
            Arc::clone(&self.metrics),
            None,
            Some(observed),
            Some(self.peer_closed.clone()),
            self.log.clone(),
        ) {
            Ok(handle) => Slot::Primary(handle),
            Err(err) => {
                tracing::error!("node {}: cannot start the primary role: {err}", self.node());
                Slot::Outside
            }
        }
    }

    /// Starts the backup role on `segment`, keeping `tail` (the batches it applied before, if
    /// it switched primaries) as the start of its retained tail.
    fn spawn_backup(&mut self, segment: Segment, tail: Vec<SealedBatch>, view: &View) -> Slot {
        self.spawn_backup_gated(segment, tail, Gate::new(view.number, view.primary))
    }

    /// Starts the backup role on `segment`, taking batches from the primary `gate` names
    /// while it is open.
    fn spawn_backup_gated(&mut self, segment: Segment, tail: Vec<SealedBatch>, gate: Gate) -> Slot {
        self.reads_heard = 0;
        match backup::start_role(
            &self.config,
            segment,
            self.model.replica(),
            Arc::clone(&self.metrics),
            gate,
            tail,
            Some(self.peer_closed.clone()),
            self.log.clone(),
        ) {
            Ok(handle) => Slot::Backup(handle),
            Err(err) => {
                tracing::error!("node {}: cannot start the backup role: {err}", self.node());
                Slot::Outside
            }
        }
    }

    fn fresh_backup(&mut self, view: &View) -> Slot {
        // A node that stood by asked to join before its spare segment was loaded: it serves
        // nothing until the load is done (the primary has it leave, and it asks again).
        if let NextSegment::Loading(loader) = &self.segment_next
            && !loader.is_finished()
        {
            tracing::info!(
                "node {}: its records lie above the truncate LSN and its database is still \
                 loading; it rejoins once loaded",
                self.node()
            );
            self.loaded = Some(false);
            return Slot::Outside;
        }
        match self.fresh_segment() {
            Ok(segment) => self.spawn_backup(segment, Vec::new(), view),
            Err(err) => {
                tracing::warn!("node {}: {err}", self.node());
                Slot::Outside
            }
        }
    }

    /// `segment` rewound to rejoin from the truncate LSN `lsn`, or from where the node's log
    /// can end below it (a logged image spans `lsn`: `NodeLog::align_rejoin`); `None` if it
    /// cannot be rewound (its diverged pages exceed what a `Diverged` names): it reloads.
    fn rewound_to_rejoin(&self, mut segment: Segment, lsn: u64) -> Option<Segment> {
        let lsn = self
            .log
            .as_ref()
            .map_or(lsn, |log| log.align_rejoin(lsn))
            .min(segment.lsn());
        tandem_node::rewind_to_rejoin(&mut segment, lsn).then_some(segment)
    }

    /// The segment rebuilt from the log at a restart, if no role has taken it.
    fn recovered_segment(&mut self) -> Option<Segment> {
        match std::mem::replace(&mut self.segment_next, NextSegment::None) {
            NextSegment::Recovered(segment) => Some(segment),
            other => {
                self.segment_next = other;
                None
            }
        }
    }

    fn fresh_segment(&mut self) -> Result<Segment, StartError> {
        match std::mem::replace(&mut self.segment_next, NextSegment::None) {
            NextSegment::Ready(segment) => Ok(segment),
            // A role that starts from the load does not take records rebuilt from the log.
            NextSegment::Recovered(_) | NextSegment::None => {
                crate::workload::loaded_segment(&self.config.group, &*self.model)
            }
            NextSegment::Loading(loader) => {
                self.loaded = Some(true);
                loader.join().map_err(|_| StartError::LoaderPanicked)?
            }
        }
    }

    /// Starts loading the segment this node will rejoin with, on a thread of its own: a load
    /// takes long (a tenth of a second for 50 MiB), and this thread must keep answering the
    /// config store meanwhile, whose quorum may need this node. The core asks to join once
    /// the segment is ready ([`Supervisor::poll_spare`]).
    fn start_loading_spare(&mut self) {
        if !matches!(self.segment_next, NextSegment::None) {
            return;
        }
        let group = self.config.group.clone();
        let model = self.model.replica();
        let loader = thread::Builder::new()
            .name("load".into())
            .spawn(move || crate::workload::loaded_segment(&group, &*model));
        match loader {
            Ok(loader) => {
                self.segment_next = NextSegment::Loading(loader);
                self.loaded = Some(false);
            }
            Err(err) => tracing::warn!(
                "node {}: cannot start loading a segment: {err}",
                self.node()
            ),
        }
    }

    /// Takes the loaded segment once its loader has finished.
    fn poll_spare(&mut self) {
        let NextSegment::Loading(loader) = &self.segment_next else {
            return;
        };
        if !loader.is_finished() {
            return;
        }
        let NextSegment::Loading(loader) =
            std::mem::replace(&mut self.segment_next, NextSegment::None)
        else {
            unreachable!("checked above");
        };
        match loader.join() {
            Ok(Ok(segment)) => self.segment_next = NextSegment::Ready(segment),
            Ok(Err(err)) => tracing::warn!("node {}: cannot load a segment: {err}", self.node()),
            Err(_) => tracing::warn!("node {}: {}", self.node(), StartError::LoaderPanicked),
        }
        // A failed load is retried by the next role that needs a segment, on this thread.
        self.loaded = Some(true);
    }
}

/// The segment the node's next role starts from, loaded ahead (a load takes a while).
// One per node, moved only when a role changes: the size is harmless.
#[allow(clippy::large_enum_variant)]
enum NextSegment {
    None,
    Loading(thread::JoinHandle<Result<Segment, StartError>>),
    Ready(Segment),
    /// Rebuilt from the log at a restart: for the role the records are followed into
    /// (`RoleRule::with_recovered`), never for one that starts from the initial load.
    Recovered(Segment),
}

/// Rebuilds what the node's log recovered onto `segment` (at the initial load,
/// `tandem_node::rebuild`); `None` (the node starts from the load, as without a log) if the
/// log rebuilds nothing or the replay fails, which it says.
fn replay_log(
    config: &NodeConfig,
    segment: &mut Segment,
    recovered: &tandem_wal::Recovered,
    lsn_load: u64,
    view_known: u64,
) -> Option<tandem_node::Replayed> {
    if config.group.mode != crate::config::Mode::Active {
        tracing::info!(
            "node {}: a passive node does not replay its log; it rejoins from the load",
            config.node_id
        );
        return None;
    }
    let started = Instant::now();
    match tandem_node::rebuild(segment, recovered, lsn_load, view_known) {
        Ok(None) => None,
        Ok(Some(replayed)) if recovered.is_empty() => {
            tracing::info!(
                "node {}: its log holds no record; it holds the initial load (LSN {lsn_load})",
                config.node_id
            );
            Some(replayed)
        }
        Ok(Some(replayed)) => {
            let from = recovered.lsn_checkpoint().map_or(String::new(), |lsn| {
                format!(", after installing its checkpoint at LSN {lsn}")
            });
            tracing::info!(
                "node {}: replayed {} records and {} images from its log in {:.0} ms{from}",
                config.node_id,
                replayed.records,
                replayed.images,
                started.elapsed().as_secs_f64() * 1e3
            );
            Some(replayed)
        }
        Err(err) => {
            // The segment is half replayed: the node reloads before it serves anything.
            tracing::warn!(
                "node {}: cannot replay its log ({err}); it rejoins from the initial load",
                config.node_id
            );
            None
        }
    }
}

/// The writer side of cluster messages: a thread per peer, started on first use.
#[derive(Debug)]
struct Outbox {
    node: NodeId,
    group: u32,
    addresses: BTreeMap<NodeId, SocketAddr>,
    writers: BTreeMap<NodeId, Sender<Vec<u8>>>,
    /// Trace level on: log every message sent (but `Alive`).
    trace: bool,
    auth: PeerAuth,
}

impl Outbox {
    fn send(&mut self, to: NodeId, message: &ClusterMessage) {
        if self.trace && !matches!(message, ClusterMessage::Alive { .. }) {
            tracing::trace!("node {}: to {to}: {}", self.node, brief(message));
        }
        let mut frame = Vec::new();
        tandem_node::encode_cluster_message(&mut frame, message);
        if !self.writers.contains_key(&to) {
            let Some(&address) = self.addresses.get(&to) else {
                return;
            };
            let (tx, rx) = mpsc::channel();
            let hello = Hello::new(PeerKind::Cluster, u64::from(self.node), self.group);
            // Without its writer a peer would hear nothing from this node for good: the
            // writer is kept only if its thread started, and the next message tries again.
            let auth = self.auth.clone();
            if !crate::spawn_or_say(format!("cluster-{to}"), move || {
                cluster_writer(address, to, hello, auth, rx)
            }) {
                return;
            }
            self.writers.insert(to, tx);
        }
        if let Some(outbox) = self.writers.get(&to) {
            let _ = outbox.send(frame);
        }
    }
}

/// Writes one peer's cluster frames, reconnecting as needed; frames that cannot be written
/// are dropped (the cluster core repeats what matters).
fn cluster_writer(
    address: SocketAddr,
    peer: NodeId,
    hello: Hello,
    auth: PeerAuth,
    outbox: Receiver<Vec<u8>>,
) {
    let mut stream: Option<(TcpStream, Sealer)> = None;
    let mut scratch = Vec::new();
    // The first failure to authenticate is logged; repeats are not (the peer is asked
    // again with the next message, which the cluster core repeats).
    let mut said = false;
    while let Ok(frame) = outbox.recv() {
        if stream.is_none() {
            let Ok(mut fresh) = TcpStream::connect_timeout(&address, Duration::from_millis(50))
            else {
                continue;
            };
            let _ = net::tune(&fresh);
            // Nothing is read on this connection but the handshake's answers.
            let mut buffer = FrameBuffer::new(tandem_wire::MAX_FRAME_LEN_DEFAULT);
            match auth.connect(&mut fresh, &mut buffer, &hello, peer) {
                Ok(sealer) => {
                    said = false;
                    stream = Some((fresh, sealer));
                }
                Err(err) => {
                    if !said {
                        said = true;
                        tracing::warn!(%address, "cannot link to the cluster peer at {address}: {err}");
                    }
                    continue;
                }
            }
        }
        let mut frames = frame;
        while let Ok(more) = outbox.try_recv() {
            frames.extend_from_slice(&more);
        }
        if let Some((open, sealer)) = &mut stream
            && sealer.write_frames(open, &frames, &mut scratch).is_err()
        {
            stream = None;
        }
    }
}

/// The longest a primary's link or a client waits at a node that is changing roles (frozen
/// for a view change, or between two roles) for the role it will have: about what a failover
/// takes, and less than a stub's attempt timeout.
const ROLE_WAIT_MAX: Duration = Duration::from_millis(10);

/// Reads first frames and hands each connection to whoever serves it.
struct Acceptor {
    node_id: NodeId,
    group: u32,
    max_frame_len: usize,
    slot: Arc<Mutex<Slot>>,
    /// Notified when the role in `slot` changes.
    slot_changed: Arc<Condvar>,
    to_supervisor: Sender<ToSupervisor>,
    auth: PeerAuth,
    client_auth: ClientAuth,
    metrics: Arc<Metrics>,
    /// Client connections served at once (`tuning.maxclients`), RESP's included.
    maxclients: usize,
}

impl Acceptor {
    /// Serves a connection whose whole `Hello` the gate read into `buffer` (under the
    /// handshake's small frame limit). The connection counts among the handshakes until it
    /// proved itself.
    fn dispatch(&self, mut stream: TcpStream, mut buffer: FrameBuffer, handshake: Handshake) {
        let _ = net::tune(&stream);
        let hello =
            net::read_one(
                &mut stream,
                &mut buffer,
                Duration::from_secs(10),
                |frame| match frame {
                    Frame::Hello(hello) => Ok(hello),
                    _ => Err(ConnError::Protocol(
                        "the first frame must be a Hello".into(),
                    )),
                },
            );
        let hello = match hello {
            Ok(hello) => hello,
            Err(err) => {
                refuse(&mut stream, ErrorCode::BadFrame, &err.to_string());
                return;
            }
        };
        if hello.group != self.group && hello.peer != PeerKind::Cluster {
            let message = format!(
                "this node serves group {}, not group {}",
                self.group, hello.group
            );
            refuse(&mut stream, ErrorCode::BadFrame, &message);
            return;
        }
        let peer = NodeId::try_from(hello.id);
        // A peer proves it knows the cluster's secret before anything it sends is decoded.
        let mut client_tls = None;
        let sealer = if PeerAuth::is_peer(&hello) {
            match self.auth.accept(&mut stream, &mut buffer, &hello) {
                Ok(sealer) => Some(sealer),
                Err(_) => return,
            }
        } else {
            match self.client_auth.accept(&mut stream, &mut buffer, &hello) {
                Ok(tls) => client_tls = tls,
                Err(_) => return,
            }
            None
        };
        // Proved: the connection leaves the handshakes and may send frames of any length
        // the node takes.
        drop(handshake);
        buffer.set_max_frame_len(self.max_frame_len);
        if hello.peer == PeerKind::Client
            && self.metrics.client_connections.get() >= self.maxclients as i64
        {
            self.metrics.connection_refused("maxclients");
            let mut frame = Vec::new();
            encode_error(
                &mut frame,
                ErrorCode::Busy,
                "max number of clients reached (tuning.maxclients)",
            );
            let _ = crate::peer_auth::send(&mut stream, client_tls.as_mut(), &frame);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        match hello.peer {
            PeerKind::Client => {
                // A node in the middle of a view change may be the next primary: the stub
                // waits here for its role rather than going round the nodes and pausing.
                let slot = self.wait_for_role(|slot| match slot {
                    Slot::Primary(_) => true,
                    Slot::Backup(handle) => !handle.gate().is_frozen(),
                    Slot::Outside => false,
                });
                match &*slot {
                    Slot::Primary(handle) => {
                        let server = handle.client_server();
                        drop(slot);
                        let _ = stream.set_read_timeout(None);
                        server.serve(stream, buffer, hello.id, client_tls);
                    }
                    // A backup (or spare) serves reads; it welcomes the client as a backup,
                    // which tells a stub looking for the primary to go on. The role's lock is
                    // not held meanwhile: a promotion must not wait for a reader.
                    Slot::Backup(handle) => {
                        let reader = handle.reader();
                        drop(slot);
                        let _ = stream.set_read_timeout(None);
                        self.metrics.client_connections.inc();
                        reader.serve(stream, buffer, client_tls);
                        self.metrics.client_connections.dec();
                    }
                    Slot::Outside => {
                        drop(slot);
                        let message = format!("node {} is not the primary", self.node_id);
                        let mut frame = Vec::new();
                        encode_error(&mut frame, ErrorCode::NotPrimary, &message);
                        let _ = crate::peer_auth::send(&mut stream, client_tls.as_mut(), &frame);
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    }
                }
            }
            PeerKind::Replica => {
                let Ok(primary) = peer else {
                    refuse(&mut stream, ErrorCode::BadFrame, "node ids fit 32 bits");
                    return;
                };
                // A node in the middle of a view change is most likely about to follow the
                // primary that connects: the connection waits for its new role rather than
                // being refused and tried again (a primary's link retries only every 500 µs,
                // and a failover is a few milliseconds).
                let slot = self.wait_for_role(
                    |slot| matches!(slot, Slot::Backup(handle) if handle.gate().accepts(primary)),
                );
                match &*slot {
                    Slot::Backup(handle) => {
                        let server = handle.replica_server();
                        drop(slot);
                        let _ = stream.set_read_timeout(None);
                        let sealer = sealer.expect("a replica link authenticated");
                        server.serve(stream, buffer, primary, sealer);
                    }
                    _ => {
                        drop(slot);
                        let message = format!("node {} is not a backup now", self.node_id);
                        let mut sealer = sealer.expect("a replica link authenticated");
                        let mut frame = Vec::new();
                        encode_error(&mut frame, ErrorCode::StaleView, &message);
                        let _ = sealer.write_frames(&mut stream, &frame, &mut Vec::new());
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                    }
                }
            }
            PeerKind::Cluster => {
                let Ok(from) = peer else {
                    refuse(&mut stream, ErrorCode::BadFrame, "node ids fit 32 bits");
                    return;
                };
                let _ = stream.set_read_timeout(None);
                self.read_cluster(stream, buffer, from);
            }
        }
    }

    /// The node's role once `ready` holds for it, or once it is no longer changing roles (a
    /// frozen backup, or no role: the moment between two roles), or after
    /// [`ROLE_WAIT_MAX`], whichever comes first. The lock is held on return.
    fn wait_for_role(&self, ready: impl Fn(&Slot) -> bool) -> std::sync::MutexGuard<'_, Slot> {
        let deadline = Instant::now() + ROLE_WAIT_MAX;
        let mut slot = self.slot.lock().expect("not poisoned");
        loop {
            let changing = match &*slot {
                Slot::Backup(handle) => handle.gate().is_frozen(),
                Slot::Outside => true,
                Slot::Primary(_) => false,
            };
            let now = Instant::now();
            if ready(&slot) || !changing || now >= deadline {
                return slot;
            }
            slot = self
                .slot_changed
                .wait_timeout(slot, deadline - now)
                .expect("not poisoned")
                .0;
        }
    }

    fn read_cluster(&self, mut stream: TcpStream, mut buffer: FrameBuffer, from: NodeId) {
        loop {
            loop {
                match buffer.next_frame() {
                    Ok(Some(Frame::Cluster(body))) => {
                        // A message that does not decode is dropped; the connection stays.
                        if let Ok(message) = tandem_node::decode_cluster_message(body) {
                            let event = ToSupervisor::Cluster { from, message };
                            if self.to_supervisor.send(event).is_err() {
                                return;
                            }
                        }
                    }
                    Ok(Some(_)) => return,
                    Err(err) => {
                        self.auth.note_forged(&ConnError::Frame(err));
                        return;
                    }
                    Ok(None) => break,
                }
            }
            if net::fill(&mut stream, &mut buffer).is_err() {
                return;
            }
        }
    }
}

fn refuse(stream: &mut TcpStream, code: ErrorCode, message: &str) {
    let mut frame = Vec::new();
    encode_error(&mut frame, code, message);
    let _ = net::write_all(stream, &frame);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}
