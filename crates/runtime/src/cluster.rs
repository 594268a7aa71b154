//! Cluster mode: a node whose role follows the config store.
//!
//! One listener serves everything; the first frame (a Hello) says who is calling:
//! - a client goes to the primary role if this node holds it, else gets `NotPrimary`;
//! - a replica link goes to the backup role if the caller is the primary it follows, else
//!   gets `StaleView`;
//! - another node's cluster core gets a reader that feeds the node.
//!
//! The node's thread ([`node_loop`]) owns the member's [`tandem_node::Node`]: its
//! supervisor (the cluster core, with the config store's Raft member, and the role rule)
//! and the role it holds, store included. It is the node's driver ([`env`]): it reads the
//! clock and its inbox, and hands what leaves to the sockets' threads and the log thread. A
//! role change is a change of the `Node`, never a thread started or stopped; the simulator
//! drives the same `Node`.
//!
//! A node that restarts with persisted config-store state never resumes a role: its memory
//! is gone. It stays out of the view until it is added as a spare, and catches up from the
//! primary's retained tail.

mod acceptor;
mod beat;
mod env;
mod links;
mod local_load;
mod node_loop;
mod peers;

pub(crate) use node_loop::{NodeTx, ToNode};

use acceptor::{Acceptor, ROLE_WAIT_MAX};

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use tandem_cluster::{Cluster, ClusterMessage, ClusterSettings, GroupSettings};
use tandem_config::{ClusterMap, FileDurable, GroupId, NodeInfo, View};
use tandem_memory::Segment;
use tandem_node::{Node, NodeSettings, READ_INDEX_RETRY, ReadSettings, RoleRule};
use tandem_replication::NodeId;
use tandem_store::DataModel;

use crate::backup::BackupHandle;
use crate::config::{ClusterTable, GroupPlan, NodeConfig};
use crate::log::NodeLog;
use crate::metrics::Metrics;
use crate::peer_auth::{ClientAuth, PeerAuth};
use crate::primary::{self, PrimaryHandle};
use crate::scripts::Scripts;
use crate::{Checksum, NodeStatus, StartError};
use env::RuntimeEnv;
use node_loop::NodeThread;
use serde::Serialize;

/// A cluster message in a few words, for the trace lines.
fn brief(message: &ClusterMessage) -> String {
    match message {
        ClusterMessage::Raft(bytes) => format!("raft ({} bytes)", bytes.len()),
        other => format!("{other:?}"),
    }
}

/// Most ticks replayed at once after the supervisor fell behind the clock.
const TICKS_REPLAYED_MAX: u32 = 2;

// The map's slot table and the RESP port's key slots count the same slots.
const _: () = assert!(tandem_config::SLOT_COUNT == tandem_redis::slot::SLOT_COUNT);

/// What this node currently is in its group.
type Slot = tandem_node::Slot<PrimaryHandle, BackupHandle>;

/// What `/status` says of this node's place in one group it serves in.
#[derive(Clone, Debug, Default, Serialize)]
pub struct GroupInfo {
    pub group: GroupId,
    /// primary, backup, spare or outside.
    pub role: &'static str,
    pub view: u64,
    pub primary: Option<NodeId>,
    /// Backups in the view.
    pub backups: usize,
    /// Which nodes they are (for `ROLE`); `/status` says how many.
    #[serde(skip)]
    pub backup_nodes: Vec<NodeId>,
    /// A backup: how long since it last heard its primary.
    pub heard_primary_ms_ago: Option<f64>,
}

/// What `/status` says of this node's place in the cluster: the node's own figures, each
/// group it serves in (`groups`), and its first group's place again at the top (`group`,
/// `role`, `view`, `primary`, `backups`, `heard_primary_ms_ago`), as a node of one group
/// says it.
#[derive(Clone, Debug, Default, Serialize)]
pub struct ClusterInfo {
    pub node: NodeId,
    /// The node's first group's place.
    #[serde(flatten)]
    pub first: GroupInfo,
    /// Where this node serves RESP, if it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resp: Option<SocketAddr>,
    /// The config store's leader as this node knows it.
    pub leader: Option<NodeId>,
    /// Each group the node serves in.
    pub groups: Vec<GroupInfo>,
    /// The cluster map as the node's config store holds it (every group's view, the slot
    /// table), for the RESP endpoints' shape.
    #[serde(skip)]
    pub map: Arc<ClusterMap>,
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

impl ClusterInfo {
    /// The place of the group at `at` now (the first group's also at the top), without a
    /// copy where nothing changed: the node's thread says it every pass.
    fn set_group(&mut self, at: usize, place: GroupPlace<'_>) {
        if self.groups.len() <= at {
            self.groups.resize_with(at + 1, GroupInfo::default);
        }
        self.groups[at].set(place);
        if at == 0 {
            let (first, groups) = (&mut self.first, &self.groups);
            first.copy_from(&groups[0]);
        }
    }
}

/// A group's place as the node's thread reads it, before it is published ([`GroupInfo`]).
pub(crate) struct GroupPlace<'a> {
    pub(crate) group: GroupId,
    pub(crate) role: &'static str,
    pub(crate) view: Option<&'a View>,
    pub(crate) heard_primary_ms_ago: Option<f64>,
}

impl GroupInfo {
    /// Takes `other`'s place, its backups' list into this one's room (no allocation while
    /// their number holds: the node's thread does it every pass).
    fn copy_from(&mut self, other: &GroupInfo) {
        let GroupInfo {
            group,
            role,
            view,
            primary,
            backups,
            backup_nodes,
            heard_primary_ms_ago,
        } = other;
        (self.group, self.role, self.view) = (*group, role, *view);
        (self.primary, self.backups) = (*primary, *backups);
        self.backup_nodes.clone_from(backup_nodes);
        self.heard_primary_ms_ago = *heard_primary_ms_ago;
    }

    fn set(&mut self, place: GroupPlace<'_>) {
        let backups = place.view.map_or(&[][..], |view| &view.backups);
        self.group = place.group;
        self.role = place.role;
        self.view = place.view.map_or(0, |view| view.number);
        self.primary = place.view.map(|view| view.primary);
        self.backups = backups.len();
        if self.backup_nodes != backups {
            self.backup_nodes = backups.to_vec();
        }
        self.heard_primary_ms_ago = place.heard_primary_ms_ago;
    }
}

/// `/status` (and `/checksum`) in cluster mode: the cluster info and, for each group the
/// node serves in, its role's status when it holds one (and its segment's checksum with the
/// consistency check) and its log's; the first group's also at the top.
#[derive(Clone, Debug, Serialize)]
pub struct ClusterReport {
    pub cluster: ClusterInfo,
    pub report: Option<ClusterRoleReport>,
    /// The node's write-ahead log, once it is open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log: Option<LogReport>,
    pub groups: Vec<GroupReport>,
}

/// What `/status` says of one group's role and log on this node.
#[derive(Clone, Debug, Serialize)]
pub struct GroupReport {
    pub group: GroupId,
    pub report: Option<ClusterRoleReport>,
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

/// Runs a cluster-mode node until the process is stopped.
/// Where each member of the group (this node included) listens.
fn member_addresses(config: &NodeConfig) -> BTreeMap<NodeId, SocketAddr> {
    let mut addresses = BTreeMap::new();
    addresses.insert(config.node_id, config.listen);
    for peer in &config.peers {
        addresses.insert(peer.node_id, peer.address);
    }
    addresses
}

/// A node running in this process ([`crate::start_node`]): what its `/status` would say is
/// at hand. Dropped, it stops the node (a node process instead waits for it, [`Self::wait`]).
#[derive(Debug)]
pub struct RunningNode {
    /// Each group's role, the node's first group's first.
    slots: Vec<(GroupId, Arc<Mutex<Slot>>)>,
    load: Option<Arc<crate::primary::LocalLoad>>,
    metrics: Arc<Metrics>,
    to_node: NodeTx,
    /// The native port's gate, held only to be dropped with the node: that stops it.
    _gate: crate::gate::GateThread,
    thread: Option<thread::JoinHandle<()>>,
}

impl RunningNode {
    /// The status of the role in the node's first group, if the node holds one.
    pub fn status(&self) -> Option<NodeStatus> {
        slot_report(&self.slots[0].1, false).map(|report| report.status)
    }

    /// The checksum of the role in the node's first group and the model's consistency
    /// check, if the node holds a role there.
    pub fn checksum(&self) -> Option<Checksum> {
        slot_report(&self.slots[0].1, true).and_then(|report| report.checksum)
    }

    /// The status of the node's role in `group`, if it serves in it and holds one.
    pub fn status_in(&self, group: GroupId) -> Option<NodeStatus> {
        let (_, slot) = self.slots.iter().find(|(of, _)| *of == group)?;
        slot_report(slot, false).map(|report| report.status)
    }

    /// The groups the node serves in.
    pub fn groups(&self) -> Vec<GroupId> {
        self.slots.iter().map(|(group, _)| *group).collect()
    }

    /// The node's counters and gauges, as `/metrics` serves them.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// Asks the in-process driver's own check (what only it knows, such as the sum of the
    /// deltas that committed) once none of its calls waits, and waits up to `timeout` for the
    /// result; `None` without a driver, or without an answer in time.
    pub fn check(&self, timeout: Duration) -> Option<Result<(), String>> {
        let load = self.load.as_ref()?;
        load.check_asked
            .store(true, std::sync::atomic::Ordering::Release);
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(result) = load.check.lock().expect("not poisoned").clone() {
                return Some(result);
            }
            let ended = self.thread.as_ref().is_none_or(|t| t.is_finished());
            if Instant::now() >= deadline || ended {
                return None;
            }
            thread::sleep(Duration::from_millis(1));
        }
    }

    /// Waits for the node's thread, which runs until the process stops.
    pub fn wait(mut self) {
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }

    /// Stops the node's thread and waits for it: its sockets close, so its peers see it
    /// gone as they would a killed process.
    pub fn stop(self) {
        drop(self);
    }
}

impl Drop for RunningNode {
    fn drop(&mut self) {
        if let Some(thread) = self.thread.take() {
            // A thread that already ended dropped its inbox: nothing to tell it.
            let _ = self.to_node.send(ToNode::Stop);
            let _ = thread.join();
        }
    }
}

/// Has the node's thread hear every sync of `group`'s `log`: the log outlives the roles, so
/// the node hears them whatever role it holds.
fn hear_syncs(group: GroupId, log: &NodeLog, to_node: &NodeTx) {
    let to_node = to_node.clone();
    log.listen(Some(Box::new(move |lsn| {
        let _ = to_node.send(ToNode::Synced { group, lsn });
    })));
}

/// Whether the config names the cluster's groups: each group's log then goes under a
/// directory of its own (`group-G`), and a config of one group keeps its log where it was.
fn names_groups(config: &NodeConfig) -> bool {
    config
        .cluster
        .as_ref()
        .is_some_and(|cluster| !cluster.groups.is_empty())
}

/// One group as the node starts it: its role's slot, its segment (the load, or what its log
/// rebuilt), its log, and how the node follows its views.
struct GroupStart {
    group: GroupId,
    slot: Arc<Mutex<Slot>>,
    segment: Segment,
    log: Option<NodeLog>,
    replayed: bool,
    rule: RoleRule,
}

/// Has the node hear each started group's log sync, `/status` say of it, and a stopping
/// node process drain it.
fn listen_to_logs(
    starts: &[GroupStart],
    to_node: &NodeTx,
    logs_opened: &LogsOpened,
    stop: crate::StopWhen,
) {
    let logs = starts
        .iter()
        .filter_map(|start| Some((start.group, start.log.clone()?)));
    let _ = logs_opened.set(logs.collect());
    for (group, log) in logs_opened.get().into_iter().flatten() {
        hear_syncs(*group, log, to_node);
        // A node process a signal (or its stdin's end) stops drains every group's log first.
        if stop.signals || stop.stdin_closes {
            crate::stopping_drains(log);
        }
    }
}

/// Starts every group of `slots` ([`start_group`]), each publishing its role in its slot.
fn start_groups(
    config: &NodeConfig,
    slots: &[(GroupId, Arc<Mutex<Slot>>)],
    model: &dyn DataModel,
    core: &Cluster,
    restarted: bool,
    metrics: &Arc<Metrics>,
) -> Result<Vec<GroupStart>, StartError> {
    let mut starts = Vec::new();
    for (group, slot) in slots {
        let mut started = start_group(config, *group, model, core, restarted, metrics)?;
        started.slot = Arc::clone(slot);
        starts.push(started);
    }
    Ok(starts)
}

/// Loads `group`'s segment, opens its log and rebuilds what the log holds on a restart.
fn start_group(
    config: &NodeConfig,
    group: GroupId,
    model: &dyn DataModel,
    core: &Cluster,
    restarted: bool,
    metrics: &Arc<Metrics>,
) -> Result<GroupStart, StartError> {
    // The segment is loaded before the core ticks, so that the first view's roles start at
    // once rather than each node being silent for its own load.
    let mut segment = crate::workload::loaded_segment(&config.group, model)?;
    let lsn_load = segment.lsn();
    let dir = names_groups(config).then(|| format!("group-{group}"));
    let (log, recovered) = match crate::log::open_configured(config, dir, lsn_load, metrics)? {
        Some((log, recovered)) => (Some(log), Some(recovered)),
        None => (None, None),
    };
    // A node that restarts (its config store kept state) rebuilds what its log holds if the
    // log starts at the initial load or continues a checkpoint; a fresh cluster's node starts
    // from the load, and its first role cuts whatever an older cluster left in the log.
    let view_known = core.view(group);
    let replayed = match recovered {
        Some(recovered) if restarted => {
            replay_or_reload(config, model, &mut segment, &recovered, view_known)?
        }
        _ => None,
    };
    let rule = role_rule(config, restarted, replayed.as_ref());
    Ok(GroupStart {
        group,
        slot: Arc::new(Mutex::new(Slot::Outside)),
        segment,
        log,
        replayed: replayed.is_some(),
        rule,
    })
}

/// Starts a node's threads (its node thread, the gate, the beat, the log's): see
/// [`crate::start_node`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn start(
    config: &NodeConfig,
    listeners: crate::Listeners,
    mut model: Box<dyn DataModel>,
    metrics: Arc<Metrics>,
    scripts: Scripts,
    stop: crate::StopWhen,
    publications: Option<Arc<tandem_store::Publications>>,
    local: Option<Arc<crate::primary::LocalLoad>>,
) -> Result<RunningNode, StartError> {
    let crate::Listeners {
        native: listener,
        metrics: metrics_listener,
        resp: resp_listeners,
    } = listeners;
    let served = config.served_groups();
    let peer_auth = PeerAuth::new(config, &metrics)?;
    let (disk, persisted) = ConfigDisk::open(config)?;
    let restarted = persisted.is_some();
    let addresses = member_addresses(config);
    let initial = initial_map(config, &addresses);
    let settings = cluster_settings(config);
    let core = Cluster::new(settings, initial, persisted).map_err(StartError::ConfigStore)?;
    // The trace lines cost a formatted message per cluster message: they are built only when
    // the log level lets them through (`--log-level trace`, `RUST_LOG=trace`, `TANDEM_TRACE`).
    let trace = tracing::enabled!(tracing::Level::TRACE);
    let (to_node, inbox, poll) = NodeTx::with_poll()?;
    let slots: Vec<(GroupId, Arc<Mutex<Slot>>)> = served
        .iter()
        .map(|&group| (group, Arc::new(Mutex::new(Slot::Outside))))
        .collect();
    let info = Arc::new(Mutex::new(ClusterInfo {
        node: config.node_id,
        resp: config.resp_listen,
        ..ClusterInfo::default()
    }));
    let fronts = Fronts {
        config,
        endpoints: Arc::new(endpoints(config)),
        slots: &slots,
        info: &info,
        metrics: &metrics,
        scripts: &scripts,
        to_node: &to_node,
    };
    let (io_loops, door) = fronts.io_loops(resp_listeners, stop, &publications, model.as_mut())?;
    // The logs open once the segments are loaded (below); `/status` says of them from then on.
    let logs_opened: LogsOpened = Arc::new(std::sync::OnceLock::new());
    if let Some(listener) = metrics_listener {
        serve_status(listener, config, &metrics, &slots, &info, &logs_opened);
    }
    let acceptor = Acceptor {
        node_id: config.node_id,
        max_frame_len: config.tuning.max_frame_len,
        slots: slots.clone(),
        to_node: to_node.clone(),
        auth: peer_auth.clone(),
        client_auth: ClientAuth::new(config, &metrics)?,
        metrics: Arc::clone(&metrics),
        maxclients: config.tuning.maxclients,
        door,
    };
    let gate = acceptor.serve(listener)?;
    let starts = start_groups(config, &slots, &*model, &core, restarted, &metrics)?;
    listen_to_logs(&starts, &to_node, &logs_opened, stop);
    let lsn_load = starts[0].segment.lsn();
    let node_model = model.replica();
    let periodic_interval_ms = model.periodic().map(|(_, interval_ms)| interval_ms.max(1));
    let settings = node_settings(config, lsn_load, periodic_interval_ms);
    let rules = starts.iter().map(|start| (start.group, start.rule.clone()));
    let supervisor = tandem_node::Supervisor::new(core, rules.collect());
    let mut hosted = Vec::new();
    let mut group_ios = Vec::new();
    let mut recovered = Vec::new();
    let mut loaded = Vec::new();
    for start in starts {
        hosted.push(node_loop::Hosted::new(start.group, start.slot));
        group_ios.push(env::GroupIo::new(start.group, start.log));
        match start.replayed {
            true => recovered.push((start.group, start.segment)),
            false => loaded.push((start.group, start.segment)),
        }
    }
    // The node is made on its thread: its model is shared by its roles, not across threads.
    let make_node = move || {
        let node_model: Arc<dyn DataModel> = Arc::from(node_model);
        let mut node = Node::new(supervisor, settings, node_model, 0, recovered);
        for (group, segment) in loaded {
            node = node.with_segment_ready(group, segment);
        }
        node
    };
    let peers = peers::Peers::new(
        config,
        addresses,
        peer_auth,
        poll.registry(),
        to_node.clone(),
        Arc::clone(&metrics),
        trace,
    )?;
    let local_load = local.clone();
    let local = local
        .map(|load| local_load::LocalCalls::new(&*model, config.group.seed, load))
        .transpose()?;
    let to_node_kept = to_node.clone();
    let io = env::EnvIo::start(config, to_node, peers, &scripts)?;
    let metrics_kept = Arc::clone(&metrics);
    let mut env = RuntimeEnv::new(config, model, group_ios, io, metrics, &info, trace);
    env.publications = publications;
    let (controls_tx, controls) = mpsc::channel();
    let tick = Duration::from_micros(config.tuning.tick_us);
    let thread = move || NodeThread {
        node: make_node(),
        hosted,
        disk,
        env,
        inbox,
        poll,
        beats_published: Vec::new(),
        peer_inputs: Vec::new(),
        controls,
        controls_tx,
        tick,
        scripts,
        info,
        started: Instant::now(),
        stats_refreshed: None,
        io: io_loops
            .into_iter()
            .map(|io_loop| Arc::new(Mutex::new(io_loop)))
            .collect(),
        local,
        stopping: false,
    };
    let thread = spawn_node_thread(thread)?;
    Ok(RunningNode {
        slots,
        load: local_load,
        metrics: metrics_kept,
        to_node: to_node_kept,
        _gate: gate,
        thread: Some(thread),
    })
}

/// What the clients' I/O loops of a node are made of.
struct Fronts<'a> {
    config: &'a NodeConfig,
    /// Every RESP endpoint of the cluster, which every loop's shape lists.
    endpoints: Arc<Endpoints>,
    slots: &'a [(GroupId, Arc<Mutex<Slot>>)],
    info: &'a Arc<Mutex<ClusterInfo>>,
    metrics: &'a Arc<Metrics>,
    scripts: &'a Scripts,
    to_node: &'a NodeTx,
}

impl Fronts<'_> {
    /// The clients' I/O loops, which the node's thread drives, so a call is run where it is
    /// read and answered where it is released. The first serves every native client,
    /// watches for a stop, and serves the RESP endpoint of the node's first group if it has
    /// one; each other RESP endpoint (`resp_listeners`: one per group the node serves in)
    /// has a loop of its own, which serves that group alone.
    fn io_loops(
        &self,
        resp_listeners: Vec<(GroupId, std::net::TcpListener)>,
        stop: crate::StopWhen,
        publications: &Option<Arc<tandem_store::Publications>>,
        model: &mut dyn DataModel,
    ) -> Result<(Vec<crate::resp::IoLoop>, crate::native::NativeDoor), StartError> {
        let mut listeners: BTreeMap<GroupId, std::net::TcpListener> =
            resp_listeners.into_iter().collect();
        let mut loops = Vec::new();
        let mut door = None;
        for (at, (group, slot)) in self.slots.iter().enumerate() {
            let listener = listeners.remove(group);
            let first = at == 0;
            if !first && listener.is_none() {
                continue;
            }
            let resp_port = listener.as_ref().and_then(|l| l.local_addr().ok());
            let node = ClusterResp::new(self, *group, resp_port, slot);
            let (mut io_loop, made_door) = crate::resp::IoLoop::new(
                listener,
                Arc::new(node),
                self.config.resp_tls()?,
                self.config.tuning.client_limits(),
                if first {
                    stop
                } else {
                    crate::StopWhen::default()
                },
                if first { publications.clone() } else { None },
                Some(self.to_node.io_wakers()),
            )?;
            if first {
                if publications.is_some() {
                    monitor_model(&mut io_loop, model);
                }
                door = Some(made_door);
            }
            loops.push(io_loop);
        }
        Ok((loops, door.expect("a node serves in a group")))
    }
}

/// Where each node serves RESP for each group of the cluster.
type Endpoints = BTreeMap<(NodeId, GroupId), SocketAddr>;

/// Every RESP endpoint of the cluster `config` describes: each node's for each group.
fn endpoints(config: &NodeConfig) -> Endpoints {
    let plans = config.group_plans();
    let nodes = std::iter::once(config.node_id).chain(config.peers.iter().map(|p| p.node_id));
    nodes
        .flat_map(|node| plans.iter().map(move |plan| (node, plan.id)))
        .filter_map(|(node, of)| Some(((node, of), config.resp_address(node, of)?)))
        .collect()
}

/// The logs of the node's groups, once they are open (`/status` says of them).
type LogsOpened = Arc<std::sync::OnceLock<Vec<(GroupId, NodeLog)>>>;

/// Shows the RESP port's monitors the commands `model`'s scripts run inside its calls.
fn monitor_model(io_loop: &mut crate::resp::IoLoop, model: &mut dyn DataModel) {
    let inner_calls = Arc::new(tandem_store::InnerCalls::default());
    model.monitor_to(Arc::clone(&inner_calls));
    io_loop.monitor_from(inner_calls);
}

/// Serves `/metrics`, `/status` and `/checksum` on `listener`: the cluster's view as this
/// node knows it, and each group's role's report and its log's.
fn serve_status(
    listener: std::net::TcpListener,
    config: &NodeConfig,
    metrics: &Arc<Metrics>,
    slots: &[(GroupId, Arc<Mutex<Slot>>)],
    info: &Arc<Mutex<ClusterInfo>>,
    logs_opened: &LogsOpened,
) {
    let slots = slots.to_vec();
    let info = Arc::clone(info);
    let logs_opened = Arc::clone(logs_opened);
    crate::http::serve(
        listener,
        Arc::clone(metrics),
        config.resp_password(),
        move |with_checksum| {
            let info = info.lock().expect("not poisoned").clone();
            let groups: Vec<GroupReport> = slots
                .iter()
                .map(|(group, slot)| GroupReport {
                    group: *group,
                    report: slot_report(slot, with_checksum),
                    log: logs_opened
                        .get()
                        .and_then(|logs| logs.iter().find(|(of, _)| of == group))
                        .map(|(_, log)| LogReport {
                            lsn_durable: log.lsn_durable(),
                            failed: log.poisoned(),
                        }),
                })
                .collect();
            serde_json::to_string(&ClusterReport {
                cluster: info,
                report: groups[0].report.clone(),
                log: groups[0].log.clone(),
                groups,
            })
            .unwrap_or_else(|_| "null".into())
        },
    );
}

/// Starts the node's thread. It runs clients' calls, scripts among them: its stack holds the
/// deepest input the script engine's bounds accept.
fn spawn_node_thread(
    thread: impl FnOnce() -> NodeThread + Send + 'static,
) -> Result<thread::JoinHandle<()>, StartError> {
    thread::Builder::new()
        .name("node".into())
        .stack_size(tandem_redis::SCRIPT_THREAD_STACK_BYTES)
        .spawn(move || {
            let run = std::panic::AssertUnwindSafe(move || thread().run());
            if std::panic::catch_unwind(run).is_err() {
                // A bug (its message was printed): the node cannot serve on, and says so in
                // its exit code.
                std::process::exit(70);
            }
        })
        .map_err(|source| StartError::Thread {
            thread: "the node",
            source,
        })
}

/// How the node follows views into roles, from the records its log gave back if any (it
/// says so).
fn role_rule(
    config: &NodeConfig,
    restarted: bool,
    replayed: Option<&tandem_node::Replayed>,
) -> RoleRule {
    let mut rule = RoleRule::new(config.node_id, config.group.view, restarted);
    if let Some(replayed) = replayed {
        rule = rule.with_recovered(tandem_node::Recovered {
            view: replayed.view,
            lsn: replayed.lsn,
        });
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
    rule
}

/// The cluster core's settings, from the configuration.
fn cluster_settings(config: &NodeConfig) -> ClusterSettings {
    // A node without the table runs a fixed view, whose core uses no timing but these.
    let fixed = ClusterTable::new(PathBuf::new());
    let table = config.cluster.as_ref().unwrap_or(&fixed);
    let view_fixed = config.cluster.is_none();
    // The node serves in the groups it is a member of; it coordinates the view changes of
    // the others while it leads the config store.
    let (served, others): (Vec<_>, Vec<_>) =
        (config.group_plans().into_iter()).partition(|plan| plan.members.contains(&config.node_id));
    let settings = |plans: Vec<GroupPlan>| -> Vec<GroupSettings> {
        (plans.into_iter())
            .map(|plan| GroupSettings {
                id: plan.id,
                safety: plan.safety,
            })
            .collect()
    };
    ClusterSettings {
        node: config.node_id,
        groups: settings(served),
        coordinated: settings(others),
        // A fixed view's config store is the node's alone: it never hears another's.
        voters: match view_fixed {
            true => vec![config.node_id],
            false => config.voters(),
        },
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
        view_fixed,
    }
}

/// Where the config store keeps its state: files under `cluster.data_dir` in cluster mode;
/// memory for a fixed view, whose store holds only the view the configuration names (a
/// restart finds it there again).
pub(super) enum ConfigDisk {
    File(FileDurable),
    Memory(tandem_config::MemDurable),
}

impl ConfigDisk {
    /// The disk `config` asks for, and what the config store persisted on it (None on a
    /// first start, and always for a fixed view).
    fn open(
        config: &NodeConfig,
    ) -> Result<(ConfigDisk, Option<tandem_config::Persisted>), StartError> {
        let Some(table) = &config.cluster else {
            return Ok((ConfigDisk::Memory(tandem_config::MemDurable::new()), None));
        };
        std::fs::create_dir_all(&table.data_dir).map_err(|source| StartError::DataDir {
            path: table.data_dir.clone(),
            source,
        })?;
        let (disk, persisted) =
            FileDurable::open(&table.data_dir).map_err(StartError::ConfigStoreDisk)?;
        Ok((ConfigDisk::File(disk), persisted))
    }
}

impl tandem_config::Durable for ConfigDisk {
    fn save(&mut self, state: &tandem_config::Persisted) -> std::io::Result<()> {
        match self {
            ConfigDisk::File(disk) => disk.save(state),
            ConfigDisk::Memory(disk) => disk.save(state),
        }
    }
}

/// How the node's roles are set up, from the configuration.
fn node_settings(
    config: &NodeConfig,
    lsn_loaded: u64,
    periodic_interval_ms: Option<u64>,
) -> NodeSettings {
    let tuning = &config.tuning;
    let checkpoint_bytes = config
        .log_settings()
        .map_or(u64::MAX, |log| log.checkpoint_bytes);
    NodeSettings {
        primary: primary::primary_config(config),
        nack_ticks: 2,
        reads: ReadSettings {
            reply_len_max: tandem_wire::reply_body_len_max(tuning.max_frame_len),
            index_retry_us: u64::try_from(READ_INDEX_RETRY.as_micros()).unwrap_or(u64::MAX),
        },
        checkpoint_bytes,
        lsn_loaded,
        periodic_interval_ms,
        model_clock: true,
        reply_len_max: tandem_node::reply_len_max(tuning.max_frame_len, tuning.batch_bytes_max),
        record_len_max: tandem_node::record_len_max(
            tuning.max_frame_len,
            tuning.batch_bytes_max,
            tuning.tail_bytes_max,
        ),
    }
}

/// What a RESP connection knows of a cluster-mode node, at the endpoint of one group it
/// serves in.
struct ClusterResp {
    node_id: NodeId,
    group: GroupId,
    resp_port: u16,
    /// Every RESP endpoint of the cluster: each node's for each group it could serve in.
    endpoints: Arc<Endpoints>,
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
    host: Arc<crate::host::Host>,
    /// The backups' RESP addresses last made for `ROLE`, and the nodes they are of: made
    /// again only when the view's backups change, not in every pass of the loop.
    backups_resp: Mutex<(Vec<NodeId>, Arc<[String]>)>,
    /// Where `SAVE` and `BGSAVE` write, on a node that keeps files.
    saver: Option<crate::saves::Saver>,
    /// The longest frame a peer takes: a publication longer than that is not relayed.
    max_frame_len: usize,
    /// Whether the RESP port speaks Redis Cluster's protocol (`redis_cluster`).
    redis_cluster: bool,
    /// The shards last made for it, and the map they are of: made again only when the map
    /// changes.
    shape: Mutex<ShapeMade>,
}

/// [`ClusterResp::shape`]'s cache: the map a shape was made of, and the shape.
type ShapeMade = (Arc<ClusterMap>, Arc<tandem_redis::session::ClusterShape>);

impl ClusterResp {
    /// What the RESP sessions at the endpoint of `group` on the node `fronts` describes know
    /// of it (`resp_port`: where the endpoint listens, if it does); `slot` is the group's role.
    fn new(
        fronts: &Fronts<'_>,
        group: GroupId,
        resp_port: Option<SocketAddr>,
        slot: &Arc<Mutex<Slot>>,
    ) -> ClusterResp {
        let Fronts {
            config,
            info,
            metrics,
            scripts,
            ..
        } = *fronts;
        let plans = config.group_plans();
        let safety = plans
            .iter()
            .find(|plan| plan.id == group)
            .map_or(config.group.safety, |plan| plan.safety);
        // Each group's endpoint saves its own database.
        let snapshot = config.snapshot_path().map(|path| match plans.len() {
            1 => path,
            _ => path.with_file_name(format!("dump-group-{group}.rdb")),
        });
        ClusterResp {
            node_id: config.node_id,
            group,
            resp_port: resp_port.map_or(0, |a| a.port()),
            endpoints: Arc::clone(&fronts.endpoints),
            maxmemory: config.group.db_mib << 20,
            safety: safety.to_string(),
            safety_rule: safety,
            slot: Arc::clone(slot),
            requirepass: config.resp_password(),
            users: Arc::new(config.resp_users()),
            protected_mode: config.protected_mode,
            info: Arc::clone(info),
            host: crate::host::Host::new(metrics),
            metrics: Arc::clone(metrics),
            scripts: scripts.clone(),
            backups_resp: Mutex::new((Vec::new(), Arc::from([]))),
            saver: snapshot.map(crate::saves::Saver::new),
            max_frame_len: config.tuning.max_frame_len,
            redis_cluster: config.redis_cluster,
            shape: Mutex::new(Default::default()),
        }
    }

    /// The cluster as Redis Cluster's clients see it: a shard per group of the map, its
    /// slots, and its members' endpoints for it, this endpoint's group's shard its own; made
    /// again only when the map changes. Before the map names this endpoint's group, one
    /// shard of it without a primary.
    fn shape(&self, info: &ClusterInfo) -> Arc<tandem_redis::session::ClusterShape> {
        use tandem_redis::session::{ClusterShape, Shard, endpoint_name};
        let mut made = self.shape.lock().expect("not poisoned");
        if Arc::ptr_eq(&made.0, &info.map) && !made.1.myself.is_empty() {
            return Arc::clone(&made.1);
        }
        let map = &info.map;
        let lowest = map.groups.keys().next().copied();
        let shards: Vec<Shard> = (map.groups.iter())
            .map(|(&group, view)| Shard {
                slots: match map.slots.is_empty() {
                    // An unassigned table gives every slot to the lowest group.
                    true if Some(group) == lowest => vec![(0, tandem_config::SLOT_COUNT - 1)],
                    true => Vec::new(),
                    false => map.slots.ranges_of(group).collect(),
                },
                primary: self.endpoint(view.primary, group),
                replicas: (view.backups.iter())
                    .filter_map(|&node| self.endpoint(node, group))
                    .collect(),
            })
            .collect();
        let myself = endpoint_name(u64::from(self.node_id), self.group);
        let epoch = map.groups.get(&self.group).map_or(0, |view| view.number);
        let shape = match map.groups.keys().position(|&group| group == self.group) {
            Some(own) => ClusterShape {
                myself,
                epoch,
                shards,
                own,
            },
            None => ClusterShape {
                myself,
                epoch,
                shards: vec![Shard {
                    slots: vec![(0, tandem_config::SLOT_COUNT - 1)],
                    primary: None,
                    replicas: Vec::new(),
                }],
                own: 0,
            },
        };
        *made = (Arc::clone(&info.map), Arc::new(shape));
        Arc::clone(&made.1)
    }

    /// `node`'s endpoint for `group` as a shard lists it, if it serves RESP.
    fn endpoint(&self, node: NodeId, group: GroupId) -> Option<tandem_redis::session::ShardNode> {
        let address = self.endpoints.get(&(node, group))?;
        Some(tandem_redis::session::ShardNode {
            name: tandem_redis::session::endpoint_name(u64::from(node), group),
            ip: address.ip().to_string(),
            port: address.port(),
        })
    }

    /// This endpoint's group's place, as the node's thread last published it.
    fn place<'a>(&self, info: &'a ClusterInfo) -> Option<&'a GroupInfo> {
        info.groups.iter().find(|place| place.group == self.group)
    }

    /// The RESP addresses of `backups` (those that serve RESP), as `ROLE` lists them.
    fn backups_resp(&self, backups: &[NodeId]) -> Arc<[String]> {
        let mut made = self.backups_resp.lock().expect("not poisoned");
        if made.0 != backups {
            let addresses = backups
                .iter()
                .filter_map(|&node| self.endpoints.get(&(node, self.group)))
                .map(ToString::to_string)
                .collect();
            *made = (backups.to_vec(), addresses);
        }
        Arc::clone(&made.1)
    }
}

impl crate::resp::RespNode for ClusterResp {
    fn info(&self) -> tandem_redis::session::ServerInfo {
        let (primary, backup) = match &*self.slot.lock().expect("not poisoned") {
            Slot::Primary(_) => (true, false),
            Slot::Backup(_) => (false, true),
            Slot::Outside => (false, false),
        };
        let info = self.info.lock().expect("not poisoned");
        let unknown = GroupInfo::default();
        let place = self.place(&info).unwrap_or(&unknown);
        tandem_redis::session::ServerInfo {
            node_id: u64::from(self.node_id),
            primary,
            backup,
            primary_resp: place
                .primary
                .and_then(|node| self.endpoints.get(&(node, self.group)))
                .map(ToString::to_string),
            resp_port: self.resp_port,
            backups: place.backups,
            backups_resp: self.backups_resp(&place.backup_nodes),
            backups_acked: self
                .safety_rule
                .backup_acks()
                .map_or(0, |acks| acks.needed(place.backups)),
            maxmemory: self.maxmemory,
            safety: self.safety.clone(),
            requirepass: self.requirepass.clone(),
            users: Arc::clone(&self.users),
            script: self.scripts.activity(),
            host: Some(self.host.clone() as Arc<dyn tandem_redis::session::HostFacts>),
            // An `INFO` call fills it in with what it read.
            model_stats_read: None,
            // The RESP port's loop holds the node's pub/sub hub.
            pubsub: true,
            // The RESP port's loop fills it in from its hub.
            pubsub_counts: Default::default(),
            // The RESP port's loop holds every connection: it lists and kills them.
            clients: true,
            // The RESP port's loop fills these in: it keeps the counters and reads the port's LSN.
            command_stats: None,
            repl_offset: 0,
            saves: self.saver.as_ref().map(crate::saves::Saver::facts),
            cluster: self.redis_cluster.then(|| self.shape(&info)),
        }
    }

    fn scripts(&self) -> Option<&Scripts> {
        Some(&self.scripts)
    }

    fn saver(&self) -> Option<&crate::saves::Saver> {
        self.saver.as_ref()
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

    fn relay_publication(&self, shard: bool, channel: Vec<u8>, message: Vec<u8>) {
        let Slot::Primary(handle) = &*self.slot.lock().expect("not poisoned") else {
            return;
        };
        // A message no peer would take is not copied on its way to the peers at all.
        let frame_len = tandem_node::relayed_publication_frame_len(channel.len(), message.len());
        if frame_len > self.max_frame_len {
            self.metrics.publications_not_relayed.inc();
            return;
        }
        // A role that has ended takes nothing more: the message is its subscribers'.
        let _ = handle.inbound.send(crate::primary::Inbound::Publication {
            shard,
            channel,
            message,
        });
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn protected_mode(&self) -> bool {
        self.protected_mode
    }
}

/// The cluster map of a fresh cluster: every configured node, each group's first view as
/// the configuration's plans give it (the primary first, then the backups), and the slot
/// table the configuration gives.
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
    for plan in config.group_plans() {
        let (&primary, backups) = plan.members.split_first().expect("a group has a member");
        map.groups.insert(
            plan.id,
            View {
                number: config.group.view,
                primary,
                backups: backups.to_vec(),
                spares: Vec::new(),
                promotions: Vec::new(),
                primary_sole_holder: false,
            },
        );
    }
    map.slots = config.slot_table();
    map
}

/// Rebuilds what the node's log recovered onto `segment` (at the initial load,
/// `tandem_node::rebuild`), the group's view as its config store knows it being
/// `view_known`; `None` (the node starts from the load, as without a log) if the log
/// rebuilds nothing or the replay fails, which it says.
/// Replays `recovered` onto `segment` (the initial load) with [`replay_log`]; a replay that
/// stopped part way leaves a segment no role may start from as loaded, so it is loaded again.
fn replay_or_reload(
    config: &NodeConfig,
    model: &dyn DataModel,
    segment: &mut Segment,
    recovered: &tandem_wal::Recovered,
    view_known: Option<&View>,
) -> Result<Option<tandem_node::Replayed>, StartError> {
    let lsn_load = segment.lsn();
    let replayed = replay_log(config, segment, recovered, lsn_load, view_known);
    if replayed.is_none() && segment.lsn() != lsn_load {
        *segment = crate::workload::loaded_segment(&config.group, model)?;
    }
    Ok(replayed)
}

fn replay_log(
    config: &NodeConfig,
    segment: &mut Segment,
    recovered: &tandem_wal::Recovered,
    lsn_load: u64,
    view_known: Option<&View>,
) -> Option<tandem_node::Replayed> {
    let view_known = view_known.map_or(config.group.view, |view| view.number);
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

#[cfg(test)]
mod tests {
    use tandem_config::{GroupId, SlotTable};
    use tandem_replication::{AckCount, Safety};

    use super::*;
    use crate::config::{EXAMPLE, PeerConfig, Role};

    /// Three nodes and three groups; node 1 serves in groups 1 and 3 and only coordinates 2.
    const THREE_GROUPS: &str = r#"
node_id = 1
listen = "127.0.0.1:7001"

[group]
workload = "debit-credit"
view = 4

[cluster]
data_dir = "raft"

[[cluster.groups]]
id = 1
members = [1, 2, 3]

[[cluster.groups]]
id = 2
members = [2, 3]
safety = "2-safe:1"

[[cluster.groups]]
id = 3
members = [3, 1]

[[peers]]
node_id = 2
address = "127.0.0.1:7002"

[[peers]]
node_id = 3
address = "127.0.0.1:7003"
"#;

    fn view(number: u64, primary: NodeId, backups: &[NodeId]) -> View {
        View {
            number,
            primary,
            backups: backups.to_vec(),
            spares: Vec::new(),
            promotions: Vec::new(),
            primary_sole_holder: false,
        }
    }

    #[test]
    fn the_first_map_holds_a_view_of_each_group_and_the_even_slot_table() {
        let config = NodeConfig::from_toml_str(THREE_GROUPS).expect("THREE_GROUPS parses");
        let map = initial_map(&config, &member_addresses(&config));
        assert_eq!(map.nodes.keys().copied().collect::<Vec<_>>(), [1, 2, 3]);
        let views: Vec<(GroupId, View)> = map.groups.clone().into_iter().collect();
        assert_eq!(
            views,
            [
                (1, view(4, 1, &[2, 3])),
                (2, view(4, 2, &[3])),
                (3, view(4, 3, &[1])),
            ]
        );
        assert_eq!(map.slots, SlotTable::even(&[1, 2, 3]));
        map.validate().expect("the first map is well formed");

        let settings = cluster_settings(&config);
        let two_safe = Safety::TwoSafe(AckCount::All);
        let group = |id, safety| GroupSettings { id, safety };
        assert_eq!(settings.groups, [group(1, two_safe), group(3, two_safe)]);
        let one_ack = Safety::TwoSafe(AckCount::Of(1));
        assert_eq!(settings.coordinated, [group(2, one_ack)]);
        assert!(!settings.view_fixed);
    }

    /// A configuration without `[[cluster.groups]]` makes the map it always made: group.id,
    /// the primary its roles name, every other node a backup in ascending id, no slots.
    #[test]
    fn a_one_group_config_makes_the_map_it_always_made() {
        let mut config = NodeConfig::from_toml_str(EXAMPLE).expect("EXAMPLE parses");
        config.group.id = 7;
        config.role = Some(Role::Backup);
        for (node_id, role) in [(5, Role::Backup), (3, Role::Primary)] {
            config.peers.push(PeerConfig {
                node_id,
                address: format!("127.0.0.1:700{node_id}").parse().unwrap(),
                role: Some(role),
                resp: None,
            });
        }
        config.validate().unwrap();
        let addresses = member_addresses(&config);
        let map = initial_map(&config, &addresses);
        let mut expected = ClusterMap::default();
        for (&id, address) in &addresses {
            let address = address.to_string();
            expected.nodes.insert(id, NodeInfo { id, address });
        }
        expected.groups.insert(7, view(1, 3, &[1, 2, 5]));
        assert_eq!(map, expected);
        assert!(map.slots.is_empty());

        let settings = cluster_settings(&config);
        let safety = Safety::TwoSafe(AckCount::All);
        assert_eq!(settings.groups, [GroupSettings { id: 7, safety }]);
        assert!(settings.coordinated.is_empty());
        assert!(settings.view_fixed);
    }
}
