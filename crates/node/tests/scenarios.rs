//! Data-driven scenarios for the node's supervisor, in the style of etcd's raft tests: each
//! file in `tests/testdata/supervisor/` is a script of inputs to a small cluster of real
//! supervisors (cluster core, config store, role rule) and, under each input, what the nodes
//! did: every order the supervisors gave their roles, every notice, and the cluster messages
//! but Raft's and the primary's `Alive`. A change of behaviour shows as a diff of these files;
//! `TANDEM_REWRITE=1 cargo test -p tandem-node --test suite scenarios::` rewrites them to
//! what the code does now, for review.
//!
//! The roles are stand-ins that carry every order out at once and keep only what the
//! supervisor reads back: which role the node holds, and its LSNs. The data plane's signs of
//! life are modelled per tick: a backup hears its primary, and the primary its backups,
//! unless a cut or a crash separates them.
//!
//! Commands (one per block, output after `----`, blocks separated by a blank line):
//! - `cluster nodes=N safety=RULE`: N fresh nodes, node 1 the first view's primary;
//! - `tick [N]`: every node up ticks N times (default 1), each tick followed by the delivery
//!   of every message until none is left;
//! - `lsn node=ID received=L [committed=L]`: the LSNs node ID's role holds;
//! - `caught-up node=ID spare=S`: primary ID's role saw spare S catch up;
//! - `crash node=ID` and `restart node=ID`: a crash loses the node's memory (its role) and
//!   keeps what its config store saved;
//! - `cut from=A to=B` (one direction, data plane and cluster messages) and `heal`;
//! - `view`: each node's view, role and the config store's leader as it knows them.

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::path::Path;

use tandem_cluster::role::Transition;
use tandem_cluster::{Cluster, ClusterMessage, ClusterSettings};
use tandem_config::{ClusterMap, MemDurable, NodeInfo, View};
use tandem_node::{Notice, Observed, RoleHeld, RoleRule, Roles, Supervisor};
use tandem_replication::{NodeId, Safety};

const GROUP: u32 = 1;
const VIEW_FIRST: u64 = 1;

/// A node's roles, reduced to what the supervisor reads back; every call is logged.
struct StandIn {
    node: NodeId,
    held: RoleHeld,
    lsn_received: u64,
    lsn_committed: u64,
    log: Vec<String>,
    outbox: Vec<(NodeId, ClusterMessage)>,
    /// Removals the primary role prepared, for the core at the next tick.
    prepared: Vec<Observed>,
}

impl Roles for StandIn {
    type Error = String;

    fn held(&self) -> RoleHeld {
        self.held
    }

    fn lsn_committed(&mut self) -> u64 {
        self.lsn_committed
    }

    fn freeze(&mut self) -> u64 {
        self.log.push(format!(
            "node {}: freeze the backup (LSN received {})",
            self.node, self.lsn_received
        ));
        self.lsn_received
    }

    fn lsn_synced(&self) -> u64 {
        self.lsn_received
    }

    fn diverged(&self) -> bool {
        false
    }

    fn lsn_before_rewind(&self) -> Option<u64> {
        None
    }

    fn prepare_removal(&mut self, view: u64, backup: NodeId) -> Result<(), String> {
        self.log.push(format!(
            "node {}: prepare the removal of {backup} from view {view}",
            self.node
        ));
        self.prepared.push(Observed::RemovalPrepared {
            view,
            backup,
            behind: Vec::new(),
            joining: Vec::new(),
        });
        Ok(())
    }

    fn carry_out(&mut self, transition: Transition, view: &View) -> Result<bool, String> {
        self.held = match transition {
            Transition::StayPrimary | Transition::StartPrimary | Transition::Promote { .. } => {
                if let Transition::Promote { lsn, .. } = transition {
                    self.lsn_committed = lsn;
                }
                RoleHeld::Primary { view: view.number }
            }
            Transition::StayBackup
            | Transition::Follow { .. }
            | Transition::Rejoin { .. }
            | Transition::Reload { .. } => {
                match transition {
                    Transition::Reload { .. } => self.lsn_received = 0,
                    Transition::Rejoin { lsn, .. } => self.lsn_received = lsn,
                    _ => {}
                }
                RoleHeld::Backup {
                    view: view.number,
                    primary: view.primary,
                }
            }
            // A deposed primary keeps its records as a backup of its own reign.
            Transition::StandBy => match self.held {
                RoleHeld::Primary { view: view_held } => {
                    self.lsn_received = self.lsn_committed;
                    RoleHeld::Backup {
                        view: view_held,
                        primary: self.node,
                    }
                }
                // Its role stays, frozen (the supervisor froze it before deciding).
                held => held,
            },
            Transition::StepDown | Transition::Wait => RoleHeld::Outside,
        };
        let serving = self.held != RoleHeld::Outside;
        self.log.push(format!(
            "node {}: carry out {transition:?} in view {} (serving: {serving})",
            self.node, view.number
        ));
        Ok(serving)
    }

    fn send(&mut self, to: NodeId, message: ClusterMessage) {
        self.outbox.push((to, message));
    }

    fn notice(&mut self, notice: Notice<'_>) {
        self.log.push(format!("node {}: {notice}", self.node));
    }
}

struct Harness {
    supervisors: Vec<Option<Supervisor>>,
    roles: Vec<StandIn>,
    disks: Vec<MemDurable>,
    settings: Vec<ClusterSettings>,
    initial: ClusterMap,
    /// Directed cuts (from, to).
    cuts: BTreeSet<(NodeId, NodeId)>,
    network: VecDeque<(NodeId, NodeId, ClusterMessage)>,
}

impl Harness {
    fn new(nodes: u32, safety: Safety) -> Harness {
        let ids: Vec<NodeId> = (1..=nodes).collect();
        let mut initial = ClusterMap::default();
        for &id in &ids {
            let address = format!("node-{id}");
            initial.nodes.insert(id, NodeInfo { id, address });
        }
        let view = View {
            number: VIEW_FIRST,
            primary: 1,
            backups: ids[1..].to_vec(),
            spares: Vec::new(),
            promotions: Vec::new(),
        };
        initial.groups.insert(GROUP, view);
        let settings: Vec<ClusterSettings> = ids
            .iter()
            .map(|&id| ClusterSettings {
                node: id,
                group: GROUP,
                voters: ids.iter().copied().take(3).collect(),
                safety,
                suspect_ticks: 10,
                lease_ticks: 8,
                collect_ticks: 4,
                election_ticks: 10,
                raft_heartbeat_ticks: 2,
                jitter_seed: u64::from(id),
                executor_stall_ticks: None,
                long_call_ticks: u64::MAX,
            })
            .collect();
        let mut harness = Harness {
            supervisors: Vec::new(),
            roles: Vec::new(),
            disks: Vec::new(),
            settings,
            initial,
            cuts: BTreeSet::new(),
            network: VecDeque::new(),
        };
        for &id in &ids {
            let core = Cluster::new(
                harness.settings[index(id)].clone(),
                harness.initial.clone(),
                None,
            )
            .expect("a fresh node starts");
            harness.supervisors.push(Some(Supervisor::new(
                core,
                RoleRule::new(id, VIEW_FIRST, false),
            )));
            harness.roles.push(StandIn {
                node: id,
                held: RoleHeld::Outside,
                lsn_received: 0,
                lsn_committed: 0,
                log: Vec::new(),
                outbox: Vec::new(),
                prepared: Vec::new(),
            });
            harness.disks.push(MemDurable::new());
        }
        for &id in &ids {
            harness.drive(id);
        }
        harness
    }

    fn ids(&self) -> Vec<NodeId> {
        (1..=self.supervisors.len() as NodeId).collect()
    }

    fn connected(&self, from: NodeId, to: NodeId) -> bool {
        self.supervisors[index(from)].is_some()
            && self.supervisors[index(to)].is_some()
            && !self.cuts.contains(&(from, to))
    }

    fn drive(&mut self, node: NodeId) {
        let i = index(node);
        let Some(supervisor) = self.supervisors[i].as_mut() else {
            return;
        };
        supervisor
            .drive(&mut self.disks[i], &mut self.roles[i])
            .expect("the stand-ins and the disk do not fail");
        for (to, message) in self.roles[i].outbox.drain(..) {
            self.network.push_back((node, to, message));
        }
    }

    fn tick(&mut self, out: &mut String) {
        for node in self.ids() {
            if self.supervisors[index(node)].is_none() {
                continue;
            }
            self.data_plane_signs_of_life(node);
            let supervisor = self.supervisors[index(node)].as_mut().expect("up");
            for observed in self.roles[index(node)].prepared.drain(..) {
                supervisor.observe(observed);
            }
            supervisor.core_mut().tick();
            self.drive(node);
        }
        self.deliver_all(out);
    }

    /// What the replication links would tell the node's core this tick.
    fn data_plane_signs_of_life(&mut self, node: NodeId) {
        let held = self.roles[index(node)].held;
        let view = self.supervisors[index(node)]
            .as_ref()
            .and_then(|supervisor| supervisor.core().view().cloned());
        match held {
            RoleHeld::Backup { primary, .. } => {
                let primary_serves =
                    matches!(self.roles[index(primary)].held, RoleHeld::Primary { .. });
                if primary_serves && self.connected(primary, node) {
                    let supervisor = self.supervisors[index(node)].as_mut().expect("up");
                    supervisor.core_mut().heard_from_primary();
                }
            }
            RoleHeld::Primary { .. } => {
                let Some(view) = view else { return };
                for member in view.backups.iter().chain(&view.spares).copied() {
                    let follows = matches!(
                        self.roles[index(member)].held,
                        RoleHeld::Backup { primary, .. } if primary == node
                    );
                    if follows && self.connected(member, node) {
                        let supervisor = self.supervisors[index(node)].as_mut().expect("up");
                        supervisor.observe(Observed::Heard(member));
                    }
                }
            }
            RoleHeld::Outside => {}
        }
    }

    fn deliver_all(&mut self, out: &mut String) {
        let mut delivered = 0;
        while let Some((from, to, message)) = self.network.pop_front() {
            delivered += 1;
            assert!(delivered < 100_000, "the cluster never goes quiet");
            if !self.connected(from, to) {
                continue;
            }
            if !matches!(
                message,
                ClusterMessage::Raft(_) | ClusterMessage::Alive { .. }
            ) {
                let _ = writeln!(out, "{from} → {to}: {message:?}");
            }
            let supervisor = self.supervisors[index(to)].as_mut().expect("connected: up");
            supervisor
                .core_mut()
                .step(from, message)
                .expect("every message was encoded by a real core");
            self.drive(to);
            self.flush_log(to, out);
        }
        for node in self.ids() {
            self.flush_log(node, out);
        }
    }

    fn flush_log(&mut self, node: NodeId, out: &mut String) {
        for line in self.roles[index(node)].log.drain(..) {
            out.push_str(&line);
            out.push('\n');
        }
    }

    fn crash(&mut self, node: NodeId) {
        let i = index(node);
        self.supervisors[i] = None;
        let roles = &mut self.roles[i];
        roles.held = RoleHeld::Outside;
        roles.lsn_received = 0;
        roles.lsn_committed = 0;
        roles.prepared.clear();
        roles.outbox.clear();
    }

    /// Every node `node` is not cut from sees its connection from `node` closed.
    fn closed(&mut self, node: NodeId, out: &mut String) {
        for peer in self.ids() {
            if peer != node && !self.cuts.contains(&(node, peer)) {
                self.close_one(node, peer);
            }
        }
        self.deliver_all(out);
    }

    fn close_one(&mut self, from: NodeId, to: NodeId) {
        let Some(supervisor) = self.supervisors[index(to)].as_mut() else {
            return;
        };
        supervisor.core_mut().peer_closed(from);
        self.drive(to);
    }

    /// Node `node` starts again from its disk, its memory gone; `rebuilt`: the records (LSN,
    /// view) its write-ahead log gave back.
    fn restart(&mut self, node: NodeId, rebuilt: Option<(u64, u64)>) {
        let i = index(node);
        assert!(self.supervisors[i].is_none(), "restart a crashed node");
        let persisted = self.disks[i].load().expect("the saved state decodes");
        let core = Cluster::new(self.settings[i].clone(), self.initial.clone(), persisted)
            .expect("the node restarts");
        let mut rule = RoleRule::new(node, VIEW_FIRST, true);
        if let Some((lsn, view)) = rebuilt {
            rule = rule.with_recovered(tandem_node::Recovered { view, lsn });
            self.roles[i].lsn_received = lsn;
            self.roles[i].lsn_committed = lsn;
        }
        let mut supervisor = Supervisor::new(core, rule);
        // As the runtime: a node without its memory runs no role.
        supervisor.core_mut().set_serving(false);
        self.supervisors[i] = Some(supervisor);
        self.drive(node);
    }

    fn describe(&self, out: &mut String) {
        for node in self.ids() {
            let Some(supervisor) = &self.supervisors[index(node)] else {
                let _ = writeln!(out, "node {node}: down");
                continue;
            };
            let core = supervisor.core();
            let view = core.view().map_or("none".to_owned(), |view| {
                format!(
                    "{} (primary {}, backups {:?}, spares {:?})",
                    view.number, view.primary, view.backups, view.spares
                )
            });
            let _ = writeln!(
                out,
                "node {node}: view {view}; role {:?}; leader {:?}",
                self.roles[index(node)].held,
                core.leader()
            );
        }
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
    let mut out = String::new();
    if verb == "cluster" {
        let safety: Safety = args
            .get("safety")
            .unwrap_or(&"2-safe:1")
            .parse()
            .expect("a safety rule");
        *harness = Some(Harness::new(number("nodes") as u32, safety));
        let harness = harness.as_mut().expect("just made");
        harness.deliver_all(&mut out);
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
        "lsn" => {
            let node = number("node") as NodeId;
            let roles = &mut harness.roles[index(node)];
            roles.lsn_received = number("received");
            if args.contains_key("committed") {
                roles.lsn_committed = number("committed");
            }
        }
        "caught-up" => {
            let node = number("node") as NodeId;
            let supervisor = harness.supervisors[index(node)]
                .as_mut()
                .expect("a node that is up");
            let view = supervisor.core().view().expect("a view").number;
            supervisor.observe(Observed::SpareCaughtUp {
                view,
                node: number("spare") as NodeId,
            });
            harness.drive(node);
            harness.deliver_all(&mut out);
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
            harness.close_one(number("from") as NodeId, to);
            harness.deliver_all(&mut out);
        }
        // `rebuilt=LSN view=V`: the node's log gave back records up to LSN of view V.
        "restart" => {
            let node = number("node") as NodeId;
            let rebuilt = args
                .contains_key("rebuilt")
                .then(|| (number("rebuilt"), number("view")));
            harness.restart(node, rebuilt);
            harness.deliver_all(&mut out);
        }
        "cut" => {
            harness
                .cuts
                .insert((number("from") as NodeId, number("to") as NodeId));
        }
        "heal" => harness.cuts.clear(),
        // Node `node` asks for the config store's leadership to go to `to`.
        "lead" => {
            let node = number("node") as NodeId;
            let supervisor = harness.supervisors[index(node)]
                .as_mut()
                .expect("a node that is up");
            supervisor
                .core_mut()
                .transfer_leader(number("to") as NodeId);
            harness.drive(node);
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
