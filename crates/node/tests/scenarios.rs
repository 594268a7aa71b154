//! Data-driven scenarios for the node, in the style of etcd's raft tests: each file in
//! `tests/testdata/supervisor/` is a script of inputs to a small cluster of real
//! [`tandem_node::Node`]s (cluster core, config store, role rule, and the roles with their
//! segments: a small Debit-Credit database) and, under each input, what the nodes did: every
//! role they took, every notice, the answers their primaries released, and the cluster
//! messages but Raft's and the primary's `Alive`. A change of behaviour shows as a diff of
//! these files; `TANDEM_REWRITE=1 cargo test -p tandem-node --test suite scenarios::`
//! rewrites them to what the code does now, for review.
//!
//! The harness carries every frame at once (replication and cluster messages alike) unless a
//! cut or a crash separates the nodes, a load ends as soon as the input that started it is
//! carried out, and each node's log syncs what it is handed at once; a node's log gives
//! back, at a restart, every record the node held when it crashed.
//!
//! Commands (one per block, output after `----`, blocks separated by a blank line):
//! - `cluster nodes=N safety=RULE [groups=G]`: N fresh nodes serving in G groups (default 1),
//!   each node in every group; group g's first view has node (g - 1) mod N + 1 as primary and
//!   the nodes after it round the ring as backups (`place_groups`). With more than one group, what concerns a group's role names it;
//! - `tick [N]`: every node up ticks N times (default 1), each tick followed by the delivery
//!   of every message until none is left;
//! - `calls node=ID n=N [group=G]`: a client sends N Debit-Credit calls of group G (default
//!   1) to node ID at once;
//! - `crash node=ID` and `restart node=ID [rebuilt]`: a crash loses the node's memory (its
//!   role) and keeps what its config store saved; `rebuilt`: its log gives back the records
//!   it held;
//! - `kill node=ID`: a crash its peers see at once (their connections from it close);
//!   `closed from=A to=B`: B sees its connection from A close;
//! - `cut from=A to=B` (one direction, every message) and `heal`;
//! - `hold-syncs node=ID`: the node's log syncs nothing until `sync node=ID` syncs what it
//!   holds (and goes back to syncing at once); `fail-log node=ID`: its log fails a sync, and
//!   syncs nothing more and says nothing is durable, as a poisoned log does (the node runs
//!   on); each applies to every group's log of the node;
//! - `publish node=ID [channel=C] [message=M] [group=G]`: a pub/sub message published on
//!   node ID, which relays it if it is group G's primary (each member delivers it once
//!   applied far enough);
//! - `lead node=ID to=L`: node ID asks for the config store's leadership to go to L;
//! - `view`: each node's view, role, LSNs and the config store's leader as it knows them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::{self, Write as _};
use std::path::Path;
use std::sync::Arc;

use tandem_cluster::{Cluster, ClusterMessage, ClusterSettings, GroupSettings};
use tandem_config::{ClusterMap, GroupId, MemDurable, NodeInfo, place_groups};
use tandem_memory::{PAGE_SIZE, Segment};
use tandem_node::{
    BackupWatch, Carried, Destination, Node, NodeEnv, NodeFailure, NodeSettings, Notice,
    PeerMessage, ReadSettings, Recovered, RoleRule, RoleSlot, Slot, Supervisor, WaitingCall,
};
use tandem_redo::CallId;
use tandem_replication::{ApplyBatch, LeaseMargins, NodeId, Reply, Safety, primary_lease_ticks};
use tandem_store::{Compiled, DataModel, Driver};

use crate::common;

const GROUP: u32 = 1;
const VIEW_FIRST: u64 = 1;
/// A tick of the harness's clock, µs (the runtime's default heartbeat).
const TICK_MICROS: u64 = 10_000;
/// The backups' lease promise, ticks (the cluster settings' `lease_ticks`).
const PROMISE_TICKS: u64 = 8;
/// The one client's id.
const CLIENT: u64 = 7;

/// Where an answer goes: the client's call, by its seq (`u64::MAX`: nobody).
#[derive(Clone, Debug, PartialEq, Eq)]
struct To(u64);

impl Destination for To {
    fn periodic() -> To {
        To(u64::MAX)
    }

    fn is_periodic(&self) -> bool {
        self.0 == u64::MAX
    }
}

type ScenarioNode = Node<To, u64>;

/// A node's log: it syncs what it is handed at once.
#[derive(Debug, Default)]
struct Log {
    lsn_written: u64,
    lsn_durable: u64,
    /// Syncs wait for a `sync` command.
    holding: bool,
    /// A sync failed: the log is poisoned, syncs nothing more and says nothing is durable.
    failed: bool,
}

/// What a node hands the harness while it handles one input.
struct Env<'a> {
    node: NodeId,
    /// Whether the cluster has more than one group: then what concerns a group names it.
    groups_named: bool,
    now_us: u64,
    /// Each group's log.
    logs: &'a mut BTreeMap<GroupId, Log>,
    network: &'a mut VecDeque<(NodeId, NodeId, PeerMessage)>,
    out: &'a mut String,
    /// The answers this node released in each group since the block began, and the highest
    /// LSN.
    released: &'a mut BTreeMap<GroupId, (u64, u64)>,
    /// The groups whose load the node started, which ends once the input is carried out.
    loads_started: BTreeSet<GroupId>,
}

impl Env<'_> {
    /// The node, and `group` if the cluster has more than one.
    fn who(&self, group: GroupId) -> String {
        if self.groups_named {
            format!("node {} (group {group})", self.node)
        } else {
            format!("node {}", self.node)
        }
    }

    fn log(&mut self, group: GroupId) -> &mut Log {
        self.logs.get_mut(&group).expect("a log per group")
    }
}

impl BackupWatch for Env<'_> {
    type Error = String;

    fn applying(&mut self, _: GroupId, _: &ApplyBatch) {}

    fn applied(&mut self, _: GroupId, _: u64, _: u64, _: &[CallId]) -> Result<(), String> {
        Ok(())
    }

    fn installed(&mut self, _: GroupId, _: u64, _: u64, _: &Segment) -> Result<(), String> {
        Ok(())
    }
}

impl NodeEnv<To, u64> for Env<'_> {
    type LoadError = std::convert::Infallible;

    fn now_us(&self) -> u64 {
        self.now_us
    }

    fn now_ms(&self) -> u64 {
        self.now_us / 1_000
    }

    fn load(&mut self, group: GroupId) -> Result<Segment, Self::LoadError> {
        self.loads_started.remove(&group);
        Ok(common::loaded())
    }

    fn start_load(&mut self, group: GroupId) {
        self.loads_started.insert(group);
    }

    fn log_align(&mut self, group: GroupId, lsn: u64) {
        let log = self.log(group);
        log.lsn_written = lsn;
        log.lsn_durable = log.lsn_durable.min(lsn);
    }

    fn log_align_rejoin(&mut self, _: GroupId, lsn: u64) -> u64 {
        lsn
    }

    fn lsn_durable(&self, group: GroupId) -> u64 {
        let log = &self.logs[&group];
        if log.failed { 0 } else { log.lsn_durable }
    }

    fn wants_checkpoint(&self, _: GroupId) -> bool {
        false
    }

    fn log_order(&mut self, group: GroupId, order: tandem_node::LogOrder) -> Option<u64> {
        if let tandem_node::LogOrder::Batch { batch, .. } = order {
            let log = self.log(group);
            log.lsn_written = log.lsn_written.max(batch.lsn_last());
        }
        None
    }

    fn send(&mut self, to: NodeId, message: PeerMessage) {
        self.network.push_back((self.node, to, message));
    }

    fn release(
        &mut self,
        group: GroupId,
        _: &tandem_node::PrimaryHost<To>,
        reply: Reply<tandem_node::Answer<To>>,
    ) -> Result<(), String> {
        let released = self.released.entry(group).or_default();
        released.0 += 1;
        released.1 = released.1.max(reply.lsn);
        Ok(())
    }

    fn withheld(&mut self, to: To) {
        let _ = writeln!(
            self.out,
            "node {}: withholds the answer to call {}",
            self.node, to.0
        );
    }

    fn not_primary(&mut self, to: To) {
        let _ = writeln!(self.out, "node {}: call {} not primary", self.node, to.0);
    }

    fn read_answered(&mut self, _: u64, _: u64, _: tandem_node::ReadAnswer) -> Result<(), String> {
        Ok(())
    }

    fn note(&mut self, note: fmt::Arguments<'_>) {
        let _ = writeln!(self.out, "{note}");
    }

    fn notice(&mut self, group: GroupId, notice: Notice<'_>) {
        let who = self.who(group);
        let _ = writeln!(self.out, "{who}: {notice}");
    }

    fn failure(&mut self, failure: NodeFailure) -> String {
        format!("node {} {failure}", self.node)
    }

    fn relayed(&mut self, publication: tandem_node::RelayedPublication) {
        let who = self.who(publication.group);
        let _ = writeln!(
            self.out,
            "{who}: delivers {:?} on {:?} (relayed at LSN {})",
            String::from_utf8_lossy(&publication.message),
            String::from_utf8_lossy(&publication.channel),
            publication.lsn
        );
    }

    fn carried(&mut self, carried: Carried<'_, To, u64>) {
        let started = carried.new_role && !matches!(carried.role, Slot::Outside);
        let who = self.who(carried.group);
        let _ = writeln!(
            self.out,
            "{who}: holds {}{}",
            describe_role(carried.role),
            if started { " (a new role)" } else { "" }
        );
    }
}

/// A role as the scenario files show it.
fn describe_role(role: &RoleSlot<To, u64>) -> String {
    match role {
        Slot::Outside => "outside".to_owned(),
        Slot::Primary(host) => format!(
            "primary of view {} at LSN {}",
            host.primary().view(),
            host.primary().lsn_committed()
        ),
        Slot::Backup(backup) => format!(
            "backup of {} (view {}{}) at LSN {}",
            backup.gate().primary(),
            backup.gate().view(),
            if backup.gate().is_frozen() {
                ", frozen"
            } else {
                ""
            },
            backup.applier().lsn_applied()
        ),
    }
}

/// What a crashed node's log gives back: its records, and the view they belong to.
struct Held {
    segment: Segment,
    view: u64,
}

struct Harness {
    nodes: Vec<Option<ScenarioNode>>,
    /// The groups every node serves in.
    groups: Vec<GroupId>,
    disks: Vec<MemDurable>,
    /// Each node's log of each group.
    logs: Vec<BTreeMap<GroupId, Log>>,
    held_at_crash: Vec<BTreeMap<GroupId, Held>>,
    released: Vec<BTreeMap<GroupId, (u64, u64)>>,
    settings: Vec<ClusterSettings>,
    node_settings: NodeSettings,
    model: Arc<dyn DataModel>,
    initial: ClusterMap,
    /// Directed cuts (from, to).
    cuts: BTreeSet<(NodeId, NodeId)>,
    network: VecDeque<(NodeId, NodeId, PeerMessage)>,
    driver: Box<dyn Driver>,
    seq: u64,
    tick: u64,
}

impl Harness {
    fn new(nodes: u32, groups: u32, safety: Safety) -> Harness {
        let ids: Vec<NodeId> = (1..=nodes).collect();
        let groups: Vec<GroupId> = (GROUP..GROUP + groups).collect();
        let mut initial = ClusterMap::default();
        for &id in &ids {
            let address = format!("node-{id}");
            initial.nodes.insert(id, NodeInfo { id, address });
        }
        initial.groups = place_groups(&ids, &groups, ids.len()).expect("each node in each group");
        let settings: Vec<ClusterSettings> = ids
            .iter()
            .map(|&id| cluster_settings(id, &ids, &groups, safety))
            .collect();
        let logs = ids
            .iter()
            .map(|_| groups.iter().map(|&g| (g, Log::default())).collect());
        let released = ids
            .iter()
            .map(|_| groups.iter().map(|&g| (g, (0, 0))).collect());
        let model: Arc<dyn DataModel> = Arc::from(Compiled::boxed(common::workload()));
        let mut harness = Harness {
            nodes: Vec::new(),
            disks: ids.iter().map(|_| MemDurable::new()).collect(),
            logs: logs.collect(),
            held_at_crash: ids.iter().map(|_| BTreeMap::new()).collect(),
            released: released.collect(),
            groups,
            node_settings: node_settings(safety),
            driver: model.driver(1).expect("Debit-Credit drives calls"),
            model,
            settings,
            initial,
            cuts: BTreeSet::new(),
            network: VecDeque::new(),
            seq: 0,
            tick: 0,
        };
        for &id in &ids {
            let core = Cluster::new(
                harness.settings[index(id)].clone(),
                harness.initial.clone(),
                None,
            )
            .expect("a fresh node starts");
            let rules = (harness.groups.iter())
                .map(|&group| (group, RoleRule::new(id, VIEW_FIRST, false)))
                .collect();
            let supervisor = Supervisor::new(core, rules);
            harness
                .nodes
                .push(Some(harness.node(supervisor, Vec::new())));
        }
        harness
    }

    fn node(&self, supervisor: Supervisor, recovered: Vec<(GroupId, Segment)>) -> ScenarioNode {
        let settings = self.node_settings.clone();
        Node::new(supervisor, settings, Arc::clone(&self.model), 0, recovered)
    }

    fn ids(&self) -> Vec<NodeId> {
        (1..=self.nodes.len() as NodeId).collect()
    }

    fn connected(&self, from: NodeId, to: NodeId) -> bool {
        self.nodes[index(from)].is_some()
            && self.nodes[index(to)].is_some()
            && !self.cuts.contains(&(from, to))
    }

    /// Runs `input` on node `node` (if it is up), then drives it and has its log sync what it
    /// was handed.
    fn with_node(
        &mut self,
        node: NodeId,
        out: &mut String,
        input: impl FnOnce(&mut ScenarioNode, &mut Env<'_>) -> Result<(), String>,
    ) {
        let i = index(node);
        let Some(member) = self.nodes[i].as_mut() else {
            return;
        };
        let mut env = Env {
            node,
            groups_named: self.groups.len() > 1,
            now_us: self.tick * TICK_MICROS,
            logs: &mut self.logs[i],
            network: &mut self.network,
            out,
            released: &mut self.released[i],
            loads_started: BTreeSet::new(),
        };
        input(member, &mut env).expect("the node carries the input out");
        member
            .drive(&mut self.disks[i], &mut env)
            .expect("the harness's disk and env do not fail");
        for group in std::mem::take(&mut env.loads_started) {
            member.segment_loaded(group, Ok(common::loaded()), &mut env);
            member
                .drive(&mut self.disks[i], &mut env)
                .expect("the harness's disk and env do not fail");
        }
        // Each log syncs at once what it was handed; its role hears it.
        for &group in &self.groups {
            loop {
                let log = env.log(group);
                if log.holding || log.failed || log.lsn_durable >= log.lsn_written {
                    break;
                }
                log.lsn_durable = log.lsn_written;
                let lsn = log.lsn_durable;
                member
                    .log_synced(group, lsn, &mut env)
                    .expect("the node hears its log");
                member
                    .drive(&mut self.disks[i], &mut env)
                    .expect("the harness's disk and env do not fail");
            }
        }
    }

    fn tick(&mut self, out: &mut String) {
        self.tick += 1;
        for node in self.ids() {
            self.with_node(node, out, |member, env| member.tick(env));
        }
        self.deliver_all(out);
    }

    /// `n` calls in `group` of its client at node `node`, then every message until none is
    /// left.
    fn calls(&mut self, node: NodeId, group: GroupId, n: u64, out: &mut String) {
        for _ in 0..n {
            let mut args = Vec::new();
            let proc_id = self.driver.next_call(&mut args);
            self.seq += 1;
            let call = WaitingCall {
                to: To(self.seq),
                // A client per group, each with its own dedup entry.
                client_id: CLIENT + 100 * u64::from(group - GROUP),
                seq: self.seq,
                proc_id,
                args,
                read_only: false,
                safety: None,
            };
            self.with_node(node, out, |member, env| member.call(group, call, env));
        }
        self.deliver_all(out);
    }

    fn deliver_all(&mut self, out: &mut String) {
        let mut delivered = 0;
        while let Some((from, to, message)) = self.network.pop_front() {
            delivered += 1;
            assert!(delivered < 1_000_000, "the cluster never goes quiet");
            if !self.connected(from, to) {
                continue;
            }
            match message {
                PeerMessage::Cluster(message) => {
                    if !matches!(
                        message,
                        ClusterMessage::Raft(_) | ClusterMessage::Alive { .. }
                    ) {
                        let _ = writeln!(out, "{from} → {to}: {message:?}");
                    }
                    self.with_node(to, out, |member, _| {
                        member
                            .core_mut()
                            .step(from, message)
                            .map_err(|err| format!("a message a real core encoded: {err}"))
                    });
                }
                PeerMessage::Replication { group, message } => {
                    self.with_node(to, out, |member, env| {
                        member.step_replication(from, group, message, env)
                    });
                }
                PeerMessage::Publication(publication) => {
                    self.with_node(to, out, |member, env| {
                        member.step_publication(from, publication, env);
                        Ok(())
                    });
                }
            }
        }
        self.report_released(out);
    }

    /// The answers each node released since the last report.
    fn report_released(&mut self, out: &mut String) {
        for node in self.ids() {
            for group in self.groups.clone() {
                let released = self.released[index(node)].entry(group).or_default();
                let (count, lsn) = std::mem::take(released);
                if count > 0 {
                    let who = self.who(node, group);
                    let _ = writeln!(out, "{who}: released {count} answers, up to LSN {lsn}");
                }
            }
        }
    }

    /// The node, and `group` if the cluster has more than one (as [`Env::who`]).
    fn who(&self, node: NodeId, group: GroupId) -> String {
        if self.groups.len() > 1 {
            format!("node {node} (group {group})")
        } else {
            format!("node {node}")
        }
    }

    fn crash(&mut self, node: NodeId) {
        let i = index(node);
        let Some(member) = self.nodes[i].take() else {
            return;
        };
        self.held_at_crash[i] = (member.roles())
            .filter_map(|(group, role)| Some((group, held(role)?)))
            .collect();
        for log in self.logs[i].values_mut() {
            *log = Log::default();
        }
        for released in self.released[i].values_mut() {
            *released = (0, 0);
        }
    }

    /// Every node `node` is not cut from sees its connection from `node` closed.
    fn closed(&mut self, node: NodeId, out: &mut String) {
        for peer in self.ids() {
            if peer != node && !self.cuts.contains(&(node, peer)) {
                self.close_one(node, peer, out);
            }
        }
        self.deliver_all(out);
    }

    fn close_one(&mut self, from: NodeId, to: NodeId, out: &mut String) {
        self.with_node(to, out, |member, _| {
            member.peer_closed(from);
            Ok(())
        });
    }

    /// Node `node` starts again from its disk, its memory gone; `rebuilt`: its log gives back
    /// the records it held when it crashed.
    fn restart(&mut self, node: NodeId, rebuilt: bool, out: &mut String) {
        let i = index(node);
        assert!(self.nodes[i].is_none(), "restart a crashed node");
        let persisted = self.disks[i].load().expect("the saved state decodes");
        let core = Cluster::new(self.settings[i].clone(), self.initial.clone(), persisted)
            .expect("the node restarts");
        let mut held_at_crash = std::mem::take(&mut self.held_at_crash[i]);
        let mut rules = Vec::new();
        let mut recovered = Vec::new();
        for &group in &self.groups {
            let mut rule = RoleRule::new(node, VIEW_FIRST, true);
            if let Some(held) = held_at_crash.remove(&group).filter(|_| rebuilt) {
                let lsn = held.segment.lsn();
                rule = rule.with_recovered(Recovered {
                    view: held.view,
                    lsn,
                });
                recovered.push((group, held.segment));
            }
            rules.push((group, rule));
        }
        let mut supervisor = Supervisor::new(core, rules);
        // As the runtime: a node without its memory runs no role.
        for &group in &self.groups {
            supervisor.core_mut().set_serving(group, false);
        }
        self.nodes[i] = Some(self.node(supervisor, recovered));
        self.with_node(node, out, |_, _| Ok(()));
    }

    fn describe(&self, out: &mut String) {
        for node in self.ids() {
            let Some(member) = &self.nodes[index(node)] else {
                let _ = writeln!(out, "node {node}: down");
                continue;
            };
            let core = member.core();
            for &group in &self.groups {
                let view = core.view(group).map_or("none".to_owned(), |view| {
                    format!(
                        "{} (primary {}, backups {:?}, spares {:?})",
                        view.number, view.primary, view.backups, view.spares
                    )
                });
                let _ = writeln!(
                    out,
                    "{}: view {view}; {}; leader {:?}",
                    self.who(node, group),
                    describe_role(member.role(group)),
                    core.leader()
                );
            }
        }
    }
}

/// A copy of the records `role` holds, as a log that logged them all gives them back.
fn held(role: &RoleSlot<To, u64>) -> Option<Held> {
    let (segment, view) = match role {
        Slot::Primary(host) => (host.role().store().segment(), host.primary().view()),
        Slot::Backup(backup) => (backup.segment(), backup.gate().view()),
        Slot::Outside => return None,
    };
    let mut copy = common::loaded();
    let lsn_loaded = copy.lsn();
    let pages: Vec<(usize, u64, &[u8])> = (0..segment.pages())
        .filter(|&page| segment.page_version(page) > lsn_loaded)
        .map(|page| {
            let bytes = &segment.bytes()[page * PAGE_SIZE..(page + 1) * PAGE_SIZE];
            (page, segment.page_version(page), bytes)
        })
        .collect();
    copy.install_pages(segment.lsn(), &pages)
        .expect("a later state of the same history");
    Some(Held {
        segment: copy,
        view,
    })
}

fn cluster_settings(
    id: NodeId,
    ids: &[NodeId],
    groups: &[GroupId],
    safety: Safety,
) -> ClusterSettings {
    ClusterSettings {
        node: id,
        groups: (groups.iter())
            .map(|&id| GroupSettings { id, safety })
            .collect(),
        coordinated: Vec::new(),
        voters: ids.iter().copied().take(3).collect(),
        suspect_ticks: 10,
        lease_ticks: PROMISE_TICKS,
        collect_ticks: 4,
        election_ticks: 10,
        raft_heartbeat_ticks: 2,
        jitter_seed: u64::from(id),
        executor_stall_ticks: None,
        long_call_ticks: u64::MAX,
        view_fixed: false,
    }
}

fn node_settings(safety: Safety) -> NodeSettings {
    let margins = LeaseMargins {
        notice_ticks: 1,
        send_ticks: 0,
        period_min: TICK_MICROS,
        period_max: TICK_MICROS,
    };
    let lease_ticks = primary_lease_ticks(PROMISE_TICKS, margins).expect("a lease");
    NodeSettings {
        primary: tandem_replication::PrimaryConfig {
            group: GROUP,
            heartbeat_ticks: 1,
            lease_ticks: Some(lease_ticks),
            ..common::config(VIEW_FIRST, &[], safety)
        },
        nack_ticks: 2,
        reads: ReadSettings {
            reply_len_max: usize::MAX,
            index_retry_us: TICK_MICROS,
        },
        checkpoint_bytes: u64::MAX,
        lsn_loaded: common::loaded().lsn(),
        periodic_interval_ms: None,
        model_clock: false,
        reply_len_max: usize::MAX,
        record_len_max: usize::MAX,
    }
}

fn index(node: NodeId) -> usize {
    (node - 1) as usize
}

/// Runs one command against the harness (created by the first `cluster` command).
fn run(harness: &mut Option<Harness>, command: &str) -> String {
    let mut words = command.split_whitespace();
    let verb = words.next().expect("a command");
    let args: BTreeMap<&str, &str> = words
        .map(|word| word.split_once('=').unwrap_or((word, "")))
        .collect();
    let number = |key: &str| -> u64 {
        args.get(key)
            .unwrap_or_else(|| panic!("`{command}` needs {key}="))
            .parse()
            .unwrap_or_else(|err| panic!("`{command}`: {key}: {err}"))
    };
    let group = || {
        args.get("group")
            .map_or(GROUP, |_| number("group") as GroupId)
    };
    let mut out = String::new();
    if verb == "cluster" {
        let safety: Safety = args
            .get("safety")
            .unwrap_or(&"2-safe:1")
            .parse()
            .expect("a safety rule");
        let groups = args.get("groups").map_or(1, |_| number("groups") as u32);
        let mut fresh = Harness::new(number("nodes") as u32, groups, safety);
        for node in fresh.ids() {
            fresh.with_node(node, &mut out, |_, _| Ok(()));
        }
        fresh.deliver_all(&mut out);
        *harness = Some(fresh);
        return out;
    }
    let harness = harness.as_mut().expect("a `cluster` command first");
    match verb {
        "tick" => {
            let ticks = args
                .keys()
                .next()
                .map_or(1, |ticks| ticks.parse().expect("tick N"));
            for _ in 0..ticks {
                harness.tick(&mut out);
            }
        }
        "calls" => {
            let node = number("node") as NodeId;
            harness.calls(node, group(), number("n"), &mut out);
        }
        "crash" => harness.crash(number("node") as NodeId),
        // A crash the peers learn of at once: the kernel closes a dead process's sockets.
        "kill" => {
            let node = number("node") as NodeId;
            harness.crash(node);
            harness.closed(node, &mut out);
        }
        // Node `to` sees its connection from `from` closed (`from` may live on).
        "closed" => {
            let to = number("to") as NodeId;
            harness.close_one(number("from") as NodeId, to, &mut out);
            harness.deliver_all(&mut out);
        }
        "restart" => {
            let node = number("node") as NodeId;
            harness.restart(node, args.contains_key("rebuilt"), &mut out);
            harness.deliver_all(&mut out);
        }
        "cut" => {
            harness
                .cuts
                .insert((number("from") as NodeId, number("to") as NodeId));
        }
        "heal" => harness.cuts.clear(),
        "hold-syncs" => {
            for log in harness.logs[index(number("node") as NodeId)].values_mut() {
                log.holding = true;
            }
        }
        "sync" => {
            let node = number("node") as NodeId;
            for log in harness.logs[index(node)].values_mut() {
                log.holding = false;
            }
            harness.with_node(node, &mut out, |_, _| Ok(()));
            harness.deliver_all(&mut out);
        }
        "publish" => {
            let node = number("node") as NodeId;
            let channel = args.get("channel").copied().unwrap_or("news");
            let message = args.get("message").copied().unwrap_or("hello");
            let group = group();
            harness.with_node(node, &mut out, |member, env| {
                member.relay_publication(group, false, channel.as_bytes(), message.as_bytes(), env);
                Ok(())
            });
            harness.deliver_all(&mut out);
        }
        "fail-log" => {
            for log in harness.logs[index(number("node") as NodeId)].values_mut() {
                log.failed = true;
            }
        }
        "lead" => {
            let node = number("node") as NodeId;
            let to = number("to") as NodeId;
            harness.with_node(node, &mut out, |member, _| {
                member.core_mut().transfer_leader(to);
                Ok(())
            });
            harness.deliver_all(&mut out);
        }
        "view" => harness.describe(&mut out),
        other => panic!("unknown command `{other}`"),
    }
    out
}

/// Runs every block of `path` and returns the file as the code makes it now.
fn replay(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a testdata file");
    let mut harness = None;
    let mut rewritten = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        if line.trim().is_empty() || line.starts_with('#') {
            rewritten.push_str(line);
            rewritten.push('\n');
            continue;
        }
        let command = line;
        assert_eq!(
            lines.next(),
            Some("----"),
            "{}: `{command}` is followed by ----",
            path.display()
        );
        // Skip the recorded output: it ends at a blank line or the end of the file.
        while lines.peek().is_some_and(|line| !line.trim().is_empty()) {
            lines.next();
        }
        let output = run(&mut harness, command);
        rewritten.push_str(command);
        rewritten.push_str("\n----\n");
        rewritten.push_str(&output);
    }
    rewritten
}

#[test]
fn the_scenarios_in_testdata_produce_what_they_record() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/supervisor");
    let rewrite = std::env::var_os("TANDEM_REWRITE").is_some();
    let mut paths: Vec<_> = std::fs::read_dir(&dir)
        .expect("crates/node/tests/testdata/supervisor")
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no scenarios in {}", dir.display());
    let mut differing = Vec::new();
    for path in paths {
        let recorded = std::fs::read_to_string(&path).expect("readable");
        let now = replay(&path);
        if now != recorded {
            if rewrite {
                std::fs::write(&path, &now).expect("writable");
            } else {
                differing.push(path.display().to_string());
                eprintln!("--- {}\n{}", path.display(), diff(&recorded, &now));
            }
        }
    }
    assert!(
        differing.is_empty(),
        "these scenarios now produce something else (TANDEM_REWRITE=1 rewrites them, for \
         review): {differing:?}"
    );
}

/// The lines that differ, marked `-` (recorded) and `+` (now), with their line numbers.
fn diff(recorded: &str, now: &str) -> String {
    let recorded: Vec<&str> = recorded.lines().collect();
    let now: Vec<&str> = now.lines().collect();
    let mut out = String::new();
    for line in 0..recorded.len().max(now.len()) {
        let (old, new) = (recorded.get(line), now.get(line));
        if old != new {
            if let Some(old) = old {
                let _ = writeln!(out, "{:>4} - {old}", line + 1);
            }
            if let Some(new) = new {
                let _ = writeln!(out, "{:>4} + {new}", line + 1);
            }
        }
    }
    out
}
