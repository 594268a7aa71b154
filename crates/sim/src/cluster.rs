//! Deterministic simulation of a whole cluster: every node runs the real cluster core (the
//! config store's Raft member, the failure detector, the view-change coordinator), the real
//! role rule ([`tandem_cluster::role`]), the real replication core and the real store with its
//! dedup table; clients retry like the stub, with the same (client id, seq). One thread, one
//! seed.
//!
//! A run has two phases. In the safety phase faults are on; in the liveness phase they are
//! healed and the cluster must converge within [`LIVENESS_TICKS`]: every node up and in the
//! view, every backup at the primary's LSN with the same bytes, every client call ended.
//!
//! Fault model (every rate drawn from the seed and reported):
//! - network: per-message delay, loss, duplication, and partitions that cut one direction or
//!   both between two nodes (or a node and a client). A link delivers in order, as a TCP
//!   connection does, except a message that overtakes (drawn per message): reordering within
//!   a link is a fault too, and across links it is the rule;
//! - clock: each node ticks at its own rate (drift) and may pause (no ticks, no processing);
//! - slow nodes: one node's messages, in and out, may take several times longer;
//! - crashes of any node, the primary and the config store's leader included. A crash loses
//!   the node's memory (its records: segments are in memory) and keeps what its config store
//!   saved (the save returns once durable, so nothing unsaved was ever acted on). A crash
//!   happens only while every node is up and in the view: a second memory loss before the
//!   first healed could lose a 2-safe commit by the rule's own terms (k backups hold it).
//!
//! A third of the seeds give the primary a short retained tail, so members that come back
//! find it moved on and catch up by state transfer. Seeds run under every safety rule:
//! 2-safe (all or k backups, received or applied), 1-safe and bounded.
//!
//! - disk: the config store's state survives a crash as last saved (a save returns once
//!   durable, and nothing that depends on it is sent before). Half the crashes happen in the
//!   middle of a save instead: the save tears, the disk keeps the state saved before (the file
//!   store alternates two checksummed slots, so a torn slot is refused and the other read, as
//!   `tandem-config`'s tests show), and nothing the torn save held back is sent.
//!
//! Checkers, after every step that could break them:
//! - no acknowledged 2-safe commit is lost: when a backup takes over, and at the end, the
//!   primary's dedup table holds every client's last acknowledged call;
//! - never two nodes release replies as the primary of the same view;
//! - no reply that needs the primary's lease (a 1-safe or bounded commit, a call with no
//!   commit of its own) leaves after a backup of that view reported for a new one: the
//!   backup's promise is what the lease stands on, and a report ends it;
//! - replicas at the same LSN hold identical bytes (a backup of the current view against the
//!   current primary's checksums, taken at some batch ends), and at the end every
//!   replica equals the primary;
//! - Debit-Credit's conservation holds on every node after every batch it applies;
//! - exactly-once: no (client id, seq) is committed twice into one node's records;
//! - every client call ends with a reply or a deadline error, and under a 2-safe rule a
//!   client's replies never go back in LSN (a 1-safe rule may lose released commits).

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};

use tandem_cluster::role::{self, Held, Transition};
use tandem_cluster::{Cluster, ClusterEvent, ClusterMessage, ClusterReady, ClusterSettings};
use tandem_config::{ClusterMap, MemDurable, NodeInfo, View};
use tandem_log::{BatchKind, CallId, SealedBatch, TailLimits};
use tandem_memory::{Segment, Strategy};
use tandem_replication::{
    AckCount, Applier, Disposition, LeaseMargins, Message, NodeId, Primary, PrimaryConfig,
    PrimaryReady, Receiver, ReceiverConfig, ReceiverReady, Safety, keep_applied,
    primary_lease_ticks,
};
use tandem_store::workloads::debit_credit::{DebitCredit, DebitCreditConfig, DebitCreditDriver};
use tandem_store::{CallError, Deduped, Driver, ProcId, Rng, Store, Workload};

use crate::MICROS_PER_TICK;
use crate::event::{EventQueue, Trace};

/// The group every node serves.
const GROUP: u32 = 1;
/// The group's view when the cluster is created.
const VIEW_FIRST: u64 = 1;
/// Small, so that a checksum and a consistency check can run after every applied batch.
const SEGMENT_LEN: usize = 64 * 1024;
/// Clients are addressed as nodes from here on.
const CLIENT_BASE: NodeId = 1_000;
/// Ticks the healed cluster has to converge in.
pub const LIVENESS_TICKS: u64 = 3_000;
const TRACE_LEN: usize = 100;
/// Checksums are taken at batch ends whose LSN is a multiple of this: a divergence persists,
/// so the checker keeps its teeth at a fraction of the cost.
const CHECKSUM_EVERY_LSN: u64 = 64;
/// Conservation is checked after every batch a backup applies; the workload's whole check
/// (history, dedup table) when its applied LSN crosses a multiple of this, and on every
/// replica at the end: a transaction that breaks it leaves it broken.
const FULL_CHECK_EVERY_LSN: u64 = 16;

/// Fault rates and timing of one run, drawn from its seed.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterFaults {
    pub nodes: usize,
    pub clients: usize,
    pub safety: Safety,
    pub suspect_ticks: u64,
    pub election_ticks: usize,
    /// Message delay range, micro-ticks.
    pub delay_min: u64,
    pub delay_max: u64,
    /// Chances per million messages.
    pub loss_ppm: u64,
    pub duplicate_ppm: u64,
    /// Chances per million that a message overtakes those sent before it on its link
    /// (links are otherwise first-in first-out, as a TCP connection is).
    pub reorder_ppm: u64,
    /// Chances per million node ticks of a new partition, a crash or a pause.
    pub partition_per_tick_ppm: u64,
    pub partition_ticks_max: u64,
    pub crash_per_tick_ppm: u64,
    pub restart_ticks_max: u64,
    pub pause_per_tick_ppm: u64,
    pub pause_ticks_max: u64,
    /// Each node's tick lasts MICROS_PER_TICK ± this many micro-ticks.
    pub drift_max: u64,
    pub slow_node: Option<NodeId>,
    pub slow_factor: u64,
    /// A client's deadline for one call, and its wait before resending it, in micro-ticks.
    pub deadline: u64,
    pub retry_after: u64,
    pub batch_bytes_max: usize,
    /// Records a primary's retained tail keeps: small in some seeds, so that members that
    /// come back find it moved on and need a state transfer.
    pub tail_records_max: u64,
}

/// Which part of the fault space a seed's rates are drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mix {
    /// Every safety rule, every fault at its usual rates (what `tandem sim` runs by default).
    #[default]
    Every,
    /// Where the rarest bugs hid past the CI budget: `2-safe` or `2-safe-applied` with fewer
    /// acks than backups, frequent crashes with quick restarts (restarted nodes rejoin as
    /// spares and catch up), frequent partitions and pauses (removals, frozen backups),
    /// short tails (state transfers). The seeds of one mix are unrelated to the other's.
    KOfN,
}

impl ClusterFaults {
    /// Draws every rate from `rng`, from the part of the fault space `mix` names.
    pub fn draw(rng: &mut Rng, mix: Mix) -> ClusterFaults {
        let mut faults = ClusterFaults::draw_every(rng);
        if mix == Mix::KOfN {
            // Drawn after the usual rates, so the seeds of `Mix::Every` stay as they were.
            faults.nodes = 3 + rng.below(2) as usize;
            let backups = faults.nodes as u64 - 1;
            let k = 1 + rng.below(backups - 1) as u32;
            faults.safety = if rng.below(2) == 0 {
                Safety::TwoSafe(AckCount::Of(k))
            } else {
                Safety::TwoSafeApplied(AckCount::Of(k))
            };
            faults.crash_per_tick_ppm = 1_000 + rng.below(4_000);
            faults.restart_ticks_max = 1 + rng.below(30);
            faults.partition_per_tick_ppm = 1_000 + rng.below(4_000);
            faults.pause_per_tick_ppm = 500 + rng.below(3_000);
            if rng.below(2) == 0 {
                faults.tail_records_max = 8 + rng.below(64);
            }
            faults.slow_node =
                (rng.below(3) == 0).then(|| 1 + rng.below(faults.nodes as u64) as NodeId);
        }
        faults
    }

    fn draw_every(rng: &mut Rng) -> ClusterFaults {
        let nodes = 3 + rng.below(2) as usize;
        let backups = nodes as u64 - 1;
        let safety = match rng.below(6) {
            0 => Safety::TwoSafeApplied(AckCount::All),
            1 => Safety::TwoSafe(AckCount::All),
            2 => Safety::TwoSafeApplied(AckCount::Of(1 + rng.below(backups) as u32)),
            3 => Safety::TwoSafe(AckCount::Of(1 + rng.below(backups) as u32)),
            4 => Safety::OneSafe,
            _ => Safety::Bounded(1 + rng.below(16)),
        };
        // Mostly loopback-like delays (a small fraction of a tick); one seed in four has a
        // slow network, with delays up to about a tick and a half.
        let delay_min = 5 + rng.below(50);
        let delay_spread = if rng.below(4) == 0 { 1_500 } else { 300 };
        // A backup's lease promise is suspect_ticks − 2 ≥ 3 ticks: with the drift below, the
        // primary's share of it is at least one tick.
        let suspect_ticks = 5 + rng.below(8);
        ClusterFaults {
            nodes,
            clients: 2 + rng.below(6) as usize,
            safety,
            suspect_ticks,
            election_ticks: 10 + rng.below(20) as usize,
            delay_min,
            delay_max: delay_min + rng.below(delay_spread),
            loss_ppm: rng.below(30_000),
            duplicate_ppm: rng.below(20_000),
            reorder_ppm: rng.below(20_000),
            partition_per_tick_ppm: rng.below(3_000),
            partition_ticks_max: 1 + rng.below(40),
            crash_per_tick_ppm: rng.below(3_000),
            restart_ticks_max: 1 + rng.below(80),
            pause_per_tick_ppm: rng.below(3_000),
            pause_ticks_max: 1 + rng.below(20),
            drift_max: rng.below(100),
            slow_node: (rng.below(3) == 0).then(|| 1 + rng.below(nodes as u64) as NodeId),
            slow_factor: 2 + rng.below(5),
            deadline: (20 + rng.below(200)) * MICROS_PER_TICK,
            retry_after: (2 + rng.below(6)) * MICROS_PER_TICK,
            batch_bytes_max: 64 + rng.below(4_096) as usize,
            tail_records_max: if rng.below(3) == 0 {
                8 + rng.below(64)
            } else {
                1 << 20
            },
        }
    }
}

impl fmt::Display for ClusterFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes, {} clients, {}, suspect {} ticks, election {} ticks; delay {}..{} µt, \
             loss {} ppm, dup {} ppm, reorder {} ppm, partitions {} ppm/tick ≤{} ticks, crashes {} ppm/tick \
             restart ≤{} ticks, pauses {} ppm/tick ≤{} ticks, drift ±{} µt/tick, slow {}, \
             deadline {} µt, retry {} µt, batches ≤{} B, tail ≤{} records",
            self.nodes,
            self.clients,
            self.safety,
            self.suspect_ticks,
            self.election_ticks,
            self.delay_min,
            self.delay_max,
            self.loss_ppm,
            self.duplicate_ppm,
            self.reorder_ppm,
            self.partition_per_tick_ppm,
            self.partition_ticks_max,
            self.crash_per_tick_ppm,
            self.restart_ticks_max,
            self.pause_per_tick_ppm,
            self.pause_ticks_max,
            self.drift_max,
            match self.slow_node {
                Some(node) => format!("node {node} ×{}", self.slow_factor),
                None => "none".to_owned(),
            },
            self.deadline,
            self.retry_after,
            self.batch_bytes_max,
            self.tail_records_max
        )
    }
}

/// What a run did and whether every checker held.
#[derive(Clone, Debug)]
pub struct ClusterReport {
    pub seed: u64,
    pub faults: ClusterFaults,
    pub calls: u64,
    pub replies: u64,
    pub deadline_errors: u64,
    /// Records the final primary holds past the loaded database.
    pub commits: u64,
    pub crashes: u64,
    /// The last view number committed.
    pub views: u64,
    /// Ticks simulated, the liveness phase included.
    pub ticks: u64,
    /// Events handled: deliveries, ticks, client timers.
    pub events: u64,
    /// Calls a primary answered from its dedup table (retries of committed calls).
    pub duplicates_answered: u64,
    /// State transfers installed (a member the primary's retained tail no longer covered).
    pub transfers: u64,
    /// Crashes in the middle of a save of the config store's state (counted in `crashes`).
    pub torn_saves: u64,
    /// The first checker that failed, with the tick it failed at.
    pub failure: Option<String>,
    /// The last events before the end (or the failure), oldest first.
    pub trace: Vec<String>,
}

/// A message on the wire.
#[derive(Clone, Debug)]
enum Wire {
    Replication(Message),
    Cluster(ClusterMessage),
    Call {
        seq: u64,
        args: Vec<u8>,
    },
    /// The call's outcome: the LSN of its commit (or of the latest commit a rolled-back call
    /// saw).
    Reply {
        seq: u64,
        lsn: u64,
    },
    /// The node is not the primary; `primary` is whom it believes is.
    NotPrimary {
        seq: u64,
        primary: NodeId,
    },
}

#[derive(Debug)]
enum Event {
    /// `link` is the pair of link epochs the message was sent between: a restart (or, for
    /// replication, a new role) starts new connections, and what was in flight on the old
    /// ones never arrives (as with TCP).
    Deliver {
        from: NodeId,
        to: NodeId,
        link: (u64, u64),
        wire: Wire,
    },
    Tick {
        node: NodeId,
    },
    Restart {
        node: NodeId,
    },
    /// A client's next call.
    ClientNext {
        client: usize,
    },
    /// Resend a client's call `seq` (unless attempt `attempt` was answered or superseded),
    /// to the next node if `rotate` (no answer in time), else to the node it was told of.
    ClientRetry {
        client: usize,
        seq: u64,
        attempt: u64,
        rotate: bool,
    },
}

/// What a primary holds for a reply until it is released.
#[derive(Clone, Copy, Debug)]
struct Pending {
    client: usize,
    seq: u64,
    committed: bool,
    /// A retried call answered from the dedup table: the LSN it committed at first.
    lsn_first: Option<u64>,
    /// No backup ack fences the reply (a 1-safe or bounded commit, or no commit of its
    /// own): the primary may release it only under its lease.
    needs_lease: bool,
}

struct PrimaryRole {
    primary: Primary<Pending>,
    store: Store<DebitCredit>,
    ready: PrimaryReady<Pending>,
    /// Calls received and waiting for flow control.
    inbox: VecDeque<(usize, u64, Vec<u8>)>,
    /// The calls committed into this node's records (exactly-once).
    calls: CallsHeld,
}

struct BackupRole {
    primary: NodeId,
    receiver: Receiver,
    applier: Applier,
    segment: Segment,
    /// Stopped accepting its primary (frozen for a view change).
    frozen: bool,
    /// The batches applied, for a promotion's retained tail.
    tail: VecDeque<SealedBatch>,
    calls: CallsHeld,
}

enum Role {
    Outside,
    Primary(Box<PrimaryRole>),
    Backup(Box<BackupRole>),
}

struct Node {
    id: NodeId,
    settings: ClusterSettings,
    /// None while crashed.
    core: Option<Cluster>,
    disk: MemDurable,
    role: Role,
    /// Came back from a crash without its memory.
    restarted: bool,
    incarnation: u64,
    /// Bumped with every role the node starts: its replication links are new connections.
    role_epoch: u64,
    /// Ticks that passed while the node was paused. A primary's data plane counts them when it
    /// resumes, before it does anything else, as the runtime's primary replays missed ticks:
    /// its lease is measured against the clock, and a pause does not stop the clock.
    ticks_missed: u64,
    /// The node crashes in the middle of its next save of the config store's state: the
    /// save tears, and the disk keeps the state saved before (the file store's torn slot is
    /// refused by its checksum and the other slot read).
    tear_next_save: bool,
}

#[derive(Default)]
struct Client {
    driver: Option<DebitCreditDriver>,
    seq: u64,
    /// The call in flight: (seq, args).
    call: Option<(u64, Vec<u8>)>,
    attempt: u64,
    /// When the call in flight ends in a deadline error.
    deadline_at: u64,
    /// The node it believes is the primary.
    target: NodeId,
    lsn_last: u64,
}

struct World {
    rng: Rng,
    faults: ClusterFaults,
    now: u64,
    queue: EventQueue<Event>,
    workload: DebitCredit,
    initial: ClusterMap,
    lsn_loaded: u64,
    nodes: Vec<Node>,
    clients: Vec<Client>,
    period: BTreeMap<NodeId, u64>,
    paused_until: BTreeMap<NodeId, u64>,
    cut_until: BTreeMap<(NodeId, NodeId), u64>,
    /// The latest delivery time scheduled on each directed link: what keeps links FIFO.
    link_last: BTreeMap<(NodeId, NodeId), u64>,
    faults_on: bool,
    /// The newest view any node applied.
    view_latest: View,
    /// The node that released replies as the primary of each view.
    released_by: BTreeMap<u64, NodeId>,
    /// The first backup of each view to report for a new one, and when: from then on, the
    /// primary of that view holds no lease.
    reported: BTreeMap<u64, (NodeId, u64)>,
    /// When each node's next tick event fires (paused or not).
    tick_next_at: BTreeMap<NodeId, u64>,
    /// (backup, primary) → the time before which the backup cannot report for a new view,
    /// by the lease it promised when it last heard that primary: its report waits until its
    /// tick count is `lease_ticks` past the count when it heard, which its next tick raises
    /// by one (a pause only delays that).
    promise_end: BTreeMap<(NodeId, NodeId), u64>,
    /// Each client's last acknowledged commit: (seq, LSN).
    acked: BTreeMap<usize, (u64, u64)>,
    /// The current primary's checksum at sealed batch ends (LSN → CRC32C).
    checksums: BTreeMap<u64, u32>,
    cluster_ready: ClusterReady,
    sabotage: Option<ClusterSabotage>,
    /// Batches sent to node 2 so far (for the sabotage).
    batches_to_2: u64,
    report: ClusterReport,
    trace: Trace,
}

/// Damage done by the simulated world itself, to show that the checkers the planted bugs do
/// not reach can fail too (a checker that cannot fail is a defect).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterSabotage {
    /// The fifth batch node 2 receives has one data byte changed and its checksum recomputed:
    /// a primary that ships wrong bytes. The checksum checker must see it.
    ForgeBatch,
    /// As `ForgeBatch`, with the first byte of every run of the record changed: balances
    /// move without their counterparts. The conservation checker must see it.
    ForgeBalances,
    /// A deposed primary is not told: it goes on as the primary of the new view, believing
    /// itself alone in the group (no backup to wait for). The two-primaries checker must see
    /// it.
    IgnoreDepose,
}

/// Runs seed `seed` for `ticks` ticks of faults, then heals and waits for convergence. A
/// panic in the real code is a failure of the seed like any other.
pub fn run_cluster(seed: u64, ticks: u64) -> ClusterReport {
    run_cluster_mixed(seed, ticks, Mix::Every)
}

/// Runs like [`run_cluster`], with the seed's rates drawn from `mix`.
pub fn run_cluster_mixed(seed: u64, ticks: u64, mix: Mix) -> ClusterReport {
    run_cluster_sabotaged(seed, ticks, mix, None)
}

/// Runs like [`run_cluster_mixed`] with `sabotage` done along the way.
pub fn run_cluster_sabotaged(
    seed: u64,
    ticks: u64,
    mix: Mix,
    sabotage: Option<ClusterSabotage>,
) -> ClusterReport {
    let mut world = World::new(seed, mix);
    world.sabotage = sabotage;
    let result = panic::catch_unwind(AssertUnwindSafe(|| world.simulate(ticks)));
    let failure = match result {
        Ok(Ok(())) => None,
        Ok(Err(failure)) => Some(failure),
        Err(panic) => {
            let message = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| (*s).to_owned()))
                .unwrap_or_default();
            Some(world.fail(format!("panicked: {message}")))
        }
    };
    world.report.failure = failure;
    world.report.trace = world.trace.lines();
    world.report.views = world.view_latest.number;
    world.report.ticks = world.now / MICROS_PER_TICK;
    world.report.commits = world
        .nodes
        .iter()
        .find_map(|node| match &node.role {
            Role::Primary(role) if role.primary.view() == world.view_latest.number => {
                Some(role.store.segment().lsn() - world.lsn_loaded)
            }
            _ => None,
        })
        .unwrap_or(0);
    world.report
}

impl World {
    fn new(seed: u64, mix: Mix) -> World {
        let mut rng = Rng::new(seed);
        let faults = ClusterFaults::draw(&mut rng, mix);
        let config = DebitCreditConfig {
            tellers_per_branch: 4,
            accounts_per_branch: 100,
            history_bytes: 2048,
            overdraft_limit: Some(2_000_000),
        };
        let workload = DebitCredit::new(SEGMENT_LEN, &config).expect("fits");
        let lsn_loaded = loaded(&workload).lsn();
        let ids: Vec<NodeId> = (1..=faults.nodes as NodeId).collect();
        let view = View {
            number: VIEW_FIRST,
            primary: 1,
            backups: ids[1..].to_vec(),
            spares: Vec::new(),
            promotions: Vec::new(),
        };
        let mut initial = ClusterMap::default();
        for &id in &ids {
            let address = format!("sim:{id}");
            initial.nodes.insert(id, NodeInfo { id, address });
        }
        initial.groups.insert(GROUP, view.clone());
        let voters: Vec<NodeId> = ids.iter().copied().take(3).collect();
        let nodes = ids
            .iter()
            .map(|&id| {
                let settings = ClusterSettings {
                    node: id,
                    group: GROUP,
                    voters: voters.clone(),
                    safety: faults.safety,
                    suspect_ticks: faults.suspect_ticks,
                    lease_ticks: faults.suspect_ticks - 2,
                    collect_ticks: 4,
                    election_ticks: faults.election_ticks,
                    raft_heartbeat_ticks: 2,
                    jitter_seed: rng.next_u64(),
                };
                let core = Cluster::new(settings.clone(), initial.clone(), None)
                    .expect("a fresh node starts");
                Node {
                    id,
                    settings,
                    core: Some(core),
                    disk: MemDurable::new(),
                    role: Role::Outside,
                    restarted: false,
                    incarnation: 0,
                    role_epoch: 0,
                    ticks_missed: 0,
                    tear_next_save: false,
                }
            })
            .collect();
        let clients = (0..faults.clients)
            .map(|index| Client {
                driver: Some(workload.driver(seed ^ (0x9e37 + index as u64))),
                target: 1,
                ..Client::default()
            })
            .collect();
        let mut period = BTreeMap::new();
        for &id in &ids {
            let drift = rng.below(2 * faults.drift_max + 1);
            period.insert(id, MICROS_PER_TICK - faults.drift_max + drift);
        }
        let mut world = World {
            rng,
            now: 0,
            queue: EventQueue::new(),
            workload,
            initial,
            lsn_loaded,
            nodes,
            clients,
            period,
            paused_until: BTreeMap::new(),
            cut_until: BTreeMap::new(),
            link_last: BTreeMap::new(),
            faults_on: true,
            view_latest: view,
            released_by: BTreeMap::new(),
            reported: BTreeMap::new(),
            tick_next_at: BTreeMap::new(),
            promise_end: BTreeMap::new(),
            acked: BTreeMap::new(),
            checksums: BTreeMap::new(),
            cluster_ready: ClusterReady::default(),
            sabotage: None,
            batches_to_2: 0,
            report: ClusterReport {
                seed,
                faults: faults.clone(),
                calls: 0,
                replies: 0,
                deadline_errors: 0,
                commits: 0,
                crashes: 0,
                views: 1,
                ticks: 0,
                events: 0,
                duplicates_answered: 0,
                transfers: 0,
                torn_saves: 0,
                failure: None,
                trace: Vec::new(),
            },
            faults,
            trace: Trace::new(TRACE_LEN),
        };
        for id in ids {
            let first = world.rng.below(MICROS_PER_TICK);
            world.schedule(first, Event::Tick { node: id });
            world.tick_next_at.insert(id, first);
        }
        for client in 0..world.clients.len() {
            let first = world.rng.below(MICROS_PER_TICK);
            world.schedule(first, Event::ClientNext { client });
        }
        world
    }

    // ---- the event loop ----

    fn schedule(&mut self, after: u64, event: Event) {
        self.queue.schedule_at(self.now + after, event);
    }

    fn note(&mut self, line: String) {
        self.trace.note(self.now, line);
    }

    fn fail(&self, what: String) -> String {
        format!("tick {}: {what}", self.now / MICROS_PER_TICK)
    }

    fn simulate(&mut self, ticks: u64) -> Result<(), String> {
        let safety_end = ticks * MICROS_PER_TICK;
        let liveness_end = safety_end + LIVENESS_TICKS * MICROS_PER_TICK;
        while let Some((at, event)) = self.queue.pop() {
            self.now = at;
            if self.faults_on && self.now >= safety_end {
                self.heal();
            }
            if !self.faults_on && self.converged() {
                return self.final_checks();
            }
            if self.now > liveness_end {
                return Err(self.fail(format!(
                    "no convergence {LIVENESS_TICKS} ticks after healing: {}",
                    self.describe()
                )));
            }
            self.report.events += 1;
            self.handle(event)?;
        }
        Err(self.fail("the event queue ran dry".into()))
    }

    fn describe(&self) -> String {
        let nodes: Vec<String> = self
            .nodes
            .iter()
            .map(|node| {
                let view = node.core.as_ref().and_then(|core| core.view().cloned());
                let role = match &node.role {
                    Role::Outside => "outside".to_owned(),
                    Role::Primary(role) => format!(
                        "primary v{} lsn {} pending {} inbox {} backups {:?}",
                        role.primary.view(),
                        role.primary.lsn_committed(),
                        role.primary.pending_replies(),
                        role.inbox.len(),
                        role.primary.backup_progress().collect::<Vec<_>>()
                    ),
                    Role::Backup(role) => format!(
                        "backup of {} v{} lsn {}{}",
                        role.primary,
                        role.receiver.view(),
                        role.applier.lsn_applied(),
                        if role.frozen { " frozen" } else { "" }
                    ),
                };
                let leader = node.core.as_ref().and_then(|core| core.leader());
                format!(
                    "node {} ({}): {role}; view {:?}, leader {leader:?}",
                    node.id,
                    if node.core.is_some() { "up" } else { "down" },
                    view.map(|view| (view.number, view.primary, view.backups, view.spares))
                )
            })
            .collect();
        let calls: Vec<Option<u64>> = self
            .clients
            .iter()
            .map(|client| client.call.as_ref().map(|(seq, _)| *seq))
            .collect();
        format!("{}; calls in flight {calls:?}", nodes.join("; "))
    }

    fn heal(&mut self) {
        self.faults_on = false;
        self.cut_until.clear();
        self.paused_until.clear();
        self.note("heal: faults off".into());
        for index in 0..self.nodes.len() {
            if self.nodes[index].core.is_none() {
                let node = self.nodes[index].id;
                self.schedule(0, Event::Restart { node });
            }
        }
    }

    /// One primary of the newest view, every other node its backup at its LSN, nothing in
    /// flight.
    fn converged(&self) -> bool {
        if self.clients.iter().any(|client| client.call.is_some()) {
            return false;
        }
        let view = &self.view_latest;
        if !view.spares.is_empty() || view.backups.len() + 1 != self.nodes.len() {
            return false;
        }
        let Role::Primary(primary) = &self.nodes[index_of(view.primary)].role else {
            return false;
        };
        if primary.primary.view() != view.number
            || primary.primary.pending_replies() > 0
            || !primary.inbox.is_empty()
        {
            return false;
        }
        let lsn = primary.primary.lsn_committed();
        view.backups.iter().all(|&id| {
            let node = &self.nodes[index_of(id)];
            node.core
                .as_ref()
                .is_some_and(|core| core.view().is_some_and(|v| v.number == view.number))
                && matches!(&node.role, Role::Backup(backup)
                    if backup.primary == view.primary && backup.applier.lsn_applied() == lsn)
        })
    }

    fn final_checks(&mut self) -> Result<(), String> {
        let view = self.view_latest.clone();
        let Role::Primary(primary) = &self.nodes[index_of(view.primary)].role else {
            unreachable!("converged on a primary");
        };
        let bytes = primary.store.segment().bytes().to_vec();
        self.workload
            .check(primary.store.segment())
            .map_err(|err| self.fail(format!("primary {}: {err}", view.primary)))?;
        self.check_acked(view.primary)?;
        for &id in &view.backups {
            let Role::Backup(backup) = &self.nodes[index_of(id)].role else {
                unreachable!("converged on backups");
            };
            if backup.segment.bytes() != bytes.as_slice() {
                return Err(self.fail(format!(
                    "backup {id} differs from primary {} at LSN {}",
                    view.primary,
                    backup.segment.lsn()
                )));
            }
        }
        Ok(())
    }

    fn paused(&self, node: NodeId) -> bool {
        self.paused_until
            .get(&node)
            .is_some_and(|&until| until > self.now)
    }

    fn handle(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Tick { node } => {
                let period = self.period[&node];
                self.schedule(period, Event::Tick { node });
                self.tick_next_at.insert(node, self.now + period);
                if self.nodes[index_of(node)].core.is_none() {
                    return Ok(());
                }
                if self.paused(node) {
                    self.nodes[index_of(node)].ticks_missed += 1;
                    return Ok(());
                }
                if self.faults_on {
                    self.maybe_fault(node);
                    if self.nodes[index_of(node)].core.is_none() {
                        return Ok(());
                    }
                }
                self.tick(node)
            }
            Event::Deliver {
                from,
                to,
                link,
                wire,
            } => {
                if link != self.link(from, to, &wire) {
                    return Ok(());
                }
                if to < CLIENT_BASE && self.paused(to) {
                    // A paused node reads its socket later.
                    let resume = self.paused_until[&to] - self.now;
                    let wire = Event::Deliver {
                        from,
                        to,
                        link,
                        wire,
                    };
                    self.schedule(resume, wire);
                    return Ok(());
                }
                self.deliver(from, to, wire)
            }
            Event::Restart { node } => {
                if self.nodes[index_of(node)].core.is_none() {
                    self.restart(node)?;
                }
                Ok(())
            }
            Event::ClientNext { client } => {
                self.client_next(client);
                Ok(())
            }
            Event::ClientRetry {
                client,
                seq,
                attempt,
                rotate,
            } => {
                self.client_retry(client, seq, attempt, rotate);
                Ok(())
            }
        }
    }

    // ---- faults ----

    /// The epochs of both ends of the connection `wire` travels on.
    fn link(&self, from: NodeId, to: NodeId, wire: &Wire) -> (u64, u64) {
        let replication = matches!(wire, Wire::Replication(_));
        let epoch = |node: NodeId| {
            if node >= CLIENT_BASE {
                return 0;
            }
            let node = &self.nodes[index_of(node)];
            if replication {
                node.role_epoch
            } else {
                node.incarnation
            }
        };
        (epoch(from), epoch(to))
    }

    /// Per tick of `node`, maybe start a partition, a pause or a crash.
    fn maybe_fault(&mut self, node: NodeId) {
        let faults = self.faults.clone();
        if self.rng.below(1_000_000) < faults.partition_per_tick_ppm {
            // A partition from another node or (one time in four) from a client.
            let other = if self.rng.below(4) == 0 {
                CLIENT_BASE + self.rng.below(faults.clients as u64) as NodeId
            } else {
                let pick = self.rng.below(faults.nodes as u64 - 1) as NodeId + 1;
                if pick >= node { pick + 1 } else { pick }
            };
            let until =
                self.now + (1 + self.rng.below(faults.partition_ticks_max)) * MICROS_PER_TICK;
            let both = self.rng.below(2) == 0;
            self.cut_until.insert((node, other), until);
            if both {
                self.cut_until.insert((other, node), until);
            }
            self.note(format!(
                "partition {node}{}{other}",
                if both { "|" } else { "->|" }
            ));
        }
        if self.rng.below(1_000_000) < faults.pause_per_tick_ppm {
            let until = self.now + (1 + self.rng.below(faults.pause_ticks_max)) * MICROS_PER_TICK;
            self.paused_until.insert(node, until);
            self.note(format!("pause {node}"));
        }
        if self.rng.below(1_000_000) < faults.crash_per_tick_ppm && self.whole() {
            if self.rng.below(2) == 0 {
                let state = &mut self.nodes[index_of(node)];
                state.tear_next_save = true;
                state.disk.set_failing(true);
                self.note(format!(
                    "node {node} will crash in the middle of its next save"
                ));
            } else {
                self.crash_and_restart(node);
            }
        }
    }

    /// Every node up, not frozen for a view change, and a member of the newest view, as
    /// primary or backup: a crash now costs one node's memory, which the 2-safe rules
    /// tolerate. (A crash of a backup that reported, while the view change that promotes it
    /// is under way, is a second failure: the new view may hold no other copy.)
    fn whole(&self) -> bool {
        let view = &self.view_latest;
        view.spares.is_empty()
            && view.backups.len() + 1 == self.nodes.len()
            && self.nodes.iter().all(|node| {
                node.core.as_ref().is_some_and(|core| {
                    !core.is_frozen() && core.view().is_some_and(|v| v.number == view.number)
                }) && !node.restarted
                    && match &node.role {
                        Role::Primary(role) => role.primary.view() == view.number,
                        Role::Backup(role) => {
                            role.primary == view.primary && role.receiver.view() == view.number
                        }
                        Role::Outside => false,
                    }
            })
    }

    fn crash_and_restart(&mut self, node: NodeId) {
        self.crash(node);
        let restart = (1 + self.rng.below(self.faults.restart_ticks_max)) * MICROS_PER_TICK;
        self.schedule(restart, Event::Restart { node });
    }

    fn crash(&mut self, node: NodeId) {
        let state = &mut self.nodes[index_of(node)];
        state.core = None;
        state.role = Role::Outside;
        state.ticks_missed = 0;
        state.tear_next_save = false;
        state.disk.set_failing(false);
        self.report.crashes += 1;
        self.note(format!("crash {node}"));
    }

    /// The node starts again from its config store's saved state, with its memory gone.
    fn restart(&mut self, node: NodeId) -> Result<(), String> {
        let initial = self.initial.clone();
        let state = &mut self.nodes[index_of(node)];
        let persisted = state
            .disk
            .load()
            .map_err(|err| format!("node {node}: the saved state does not decode: {err}"))?;
        let core = Cluster::new(state.settings.clone(), initial, persisted)
            .map_err(|err| format!("node {node} cannot restart: {err}"))?;
        state.core = Some(core);
        state.incarnation += 1;
        state.role_epoch += 1;
        state.restarted = true;
        // As the runtime: a node without its memory runs no role.
        state
            .core
            .as_mut()
            .expect("just started")
            .set_serving(false);
        self.note(format!("restart {node}"));
        self.drive(node)
    }

    // ---- the network ----

    fn send(&mut self, from: NodeId, to: NodeId, wire: Wire) {
        let wire = self.maybe_forge(to, wire);
        let link = self.link(from, to, &wire);
        if self.faults_on {
            if self
                .cut_until
                .get(&(from, to))
                .is_some_and(|&until| until > self.now)
            {
                return;
            }
            if self.rng.below(1_000_000) < self.faults.loss_ppm {
                return;
            }
            if self.rng.below(1_000_000) < self.faults.duplicate_ppm {
                self.deliver_later(from, to, link, wire.clone());
            }
        }
        self.deliver_later(from, to, link, wire);
    }

    fn maybe_forge(&mut self, to: NodeId, wire: Wire) -> Wire {
        let Wire::Replication(Message::Batch(bytes)) = &wire else {
            return wire;
        };
        let every_run = match self.sabotage {
            Some(ClusterSabotage::ForgeBatch) => false,
            Some(ClusterSabotage::ForgeBalances) => true,
            _ => return wire,
        };
        if to != 2 {
            return wire;
        }
        self.batches_to_2 += 1;
        if self.batches_to_2 != 5 {
            return wire;
        }
        self.note("sabotage: a forged batch for node 2".into());
        Wire::Replication(Message::Batch(crate::forge_batch(bytes, every_run)))
    }

    fn deliver_later(&mut self, from: NodeId, to: NodeId, link: (u64, u64), wire: Wire) {
        let (delay_min, delay_max) = (self.faults.delay_min, self.faults.delay_max);
        let mut delay = delay_min + self.rng.below(delay_max - delay_min + 1);
        let slow = self.faults.slow_node;
        if self.faults_on && (slow == Some(from) || slow == Some(to)) {
            delay *= self.faults.slow_factor;
        }
        let overtakes = self.faults_on && self.rng.below(1_000_000) < self.faults.reorder_ppm;
        let last = self.link_last.entry((from, to)).or_insert(0);
        if !overtakes {
            // Behind whatever the link carries already.
            delay = delay.max((*last + 1).saturating_sub(self.now));
            *last = self.now + delay;
        }
        self.schedule(
            delay,
            Event::Deliver {
                from,
                to,
                link,
                wire,
            },
        );
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, wire: Wire) -> Result<(), String> {
        if to >= CLIENT_BASE {
            return self.client_receive((to - CLIENT_BASE) as usize, from, wire);
        }
        if self.nodes[index_of(to)].core.is_none() {
            return Ok(());
        }
        self.catch_up_ticks(to);
        match wire {
            Wire::Cluster(message) => {
                let core = self.core_mut(to);
                // A malformed message is refused and counted by the runtime; here every
                // message was encoded by a real core, so a refusal is a bug.
                core.step(from, message)
                    .map_err(|err| format!("node {to} refused a cluster message: {err}"))?;
                self.drive(to)
            }
            Wire::Replication(message) => self.replicate(from, to, message),
            Wire::Call { seq, args } => self.call(from, to, seq, args),
            wire => Err(self.fail(format!("misrouted {wire:?} to node {to}"))),
        }
    }

    fn core_mut(&mut self, node: NodeId) -> &mut Cluster {
        self.nodes[index_of(node)]
            .core
            .as_mut()
            .expect("the node is up")
    }

    // ---- a node ----

    /// Replays, into a primary's data plane, the ticks it missed while paused (the cluster
    /// core skips them, as the runtime's supervisor does: that only delays its reports).
    fn catch_up_ticks(&mut self, node: NodeId) {
        let state = &mut self.nodes[index_of(node)];
        let missed = std::mem::take(&mut state.ticks_missed);
        if let Role::Primary(role) = &mut state.role {
            for _ in 0..missed {
                role.primary.tick();
            }
        }
    }

    fn tick(&mut self, node: NodeId) -> Result<(), String> {
        self.catch_up_ticks(node);
        self.core_mut(node).tick();
        let index = index_of(node);
        match &mut self.nodes[index].role {
            Role::Primary(role) => {
                role.primary.tick();
                let view = role.primary.view();
                let caught_up = role.primary.prepare_spare_promotions(view);
                let core = self.nodes[index].core.as_mut().expect("up");
                for spare in caught_up {
                    core.spare_caught_up(view, spare);
                }
                self.drain_inbox(node)?;
                self.collect_primary(node)?;
            }
            Role::Backup(role) => {
                if !role.frozen {
                    role.receiver.tick();
                }
                self.collect_backup(node)?;
            }
            Role::Outside => {}
        }
        self.drive(node)
    }

    /// Saves and sends what the node's cluster core produced, then acts on its events.
    fn drive(&mut self, node: NodeId) -> Result<(), String> {
        let mut ready = std::mem::take(&mut self.cluster_ready);
        // A crash now would cost a second node's memory: the save goes through after all.
        if self.nodes[index_of(node)].tear_next_save && !self.whole() {
            let state = &mut self.nodes[index_of(node)];
            state.tear_next_save = false;
            state.disk.set_failing(false);
        }
        loop {
            let state = &mut self.nodes[index_of(node)];
            let Some(core) = state.core.as_mut() else {
                break;
            };
            let saved = core.take_ready(&mut state.disk, &mut ready);
            if saved.is_err() && state.tear_next_save {
                // The save tore: nothing that depended on it was sent, and the node is gone.
                ready.clear();
                self.note(format!("node {node}: crash in the middle of a save"));
                self.report.torn_saves += 1;
                self.crash_and_restart(node);
                break;
            }
            saved.map_err(|err| format!("node {node}: the config store cannot save: {err}"))?;
            if ready.is_empty() {
                break;
            }
            for (to, message) in ready.messages.drain(..) {
                self.send(node, to, Wire::Cluster(message));
            }
            for event in ready.events.drain(..) {
                self.act(node, event)?;
            }
        }
        ready.clear();
        self.cluster_ready = ready;
        Ok(())
    }

    fn act(&mut self, node: NodeId, event: ClusterEvent) -> Result<(), String> {
        match event {
            ClusterEvent::Freeze { view } => {
                let index = index_of(node);
                if let Role::Backup(role) = &mut self.nodes[index].role {
                    role.frozen = true;
                    let lsn = role.receiver.lsn_received();
                    self.note(format!("node {node}: frozen in view {view} at LSN {lsn}"));
                    self.core_mut(node).frozen(view, lsn);
                }
                Ok(())
            }
            ClusterEvent::Suspected { peer, view } => {
                self.note(format!("node {node}: suspects {peer} in view {view}"));
                Ok(())
            }
            ClusterEvent::Reported { view } => {
                self.note(format!("node {node}: reported for a view after {view}"));
                self.reported.entry(view).or_insert((node, self.now));
                Ok(())
            }
            ClusterEvent::RemovalWanted { view, backup } => {
                let index = index_of(node);
                if let Role::Primary(role) = &mut self.nodes[index].role
                    && let Some(behind) = role.primary.prepare_removal(view, backup)
                {
                    self.core_mut(node).ask_removal(view, backup, behind);
                }
                Ok(())
            }
            ClusterEvent::View(view) => self.follow(node, view),
        }
    }

    /// Brings the node's role in line with a committed view, through the runtime's rule.
    fn follow(&mut self, node: NodeId, view: View) -> Result<(), String> {
        self.note(format!(
            "node {node}: view {} primary {} backups {:?} spares {:?} truncate {:?}",
            view.number,
            view.primary,
            view.backups,
            view.spares,
            view.truncate_lsn()
        ));
        if view.number > self.view_latest.number {
            self.view_latest = view.clone();
        }
        let index = index_of(node);
        // As the runtime: a primary that a view replaces is deposed, and its pending replies
        // are answered as the core says (abandoned: "not primary").
        let ignore_depose = self.sabotage == Some(ClusterSabotage::IgnoreDepose);
        if let Role::Primary(role) = &mut self.nodes[index].role
            && view.primary != node
            && !ignore_depose
            && !role.primary.is_deposed()
            && role.primary.view() < view.number
        {
            role.primary.depose(view.number);
            self.collect_primary(node)?;
        }
        let restarted = self.nodes[index].restarted;
        let role = std::mem::replace(&mut self.nodes[index].role, Role::Outside);
        let held = match &role {
            Role::Primary(role) => Held::Primary {
                lsn_committed: role.primary.lsn_committed(),
            },
            Role::Backup(role) => Held::Backup {
                primary: role.primary,
                view: role.receiver.view(),
                lsn_received: role.receiver.lsn_received(),
            },
            Role::Outside => Held::Outside { restarted },
        };
        self.nodes[index].restarted = role::still_restarted(node, restarted, &view);
        let transition = role::transition(node, held, &view, VIEW_FIRST);
        let ignore_depose = self.sabotage == Some(ClusterSabotage::IgnoreDepose)
            && view.primary != node
            && matches!(role, Role::Primary(_));
        if ignore_depose {
            let Role::Primary(mut stale) = role else {
                unreachable!("checked: a primary")
            };
            if !stale.primary.is_deposed() && stale.primary.view() < view.number {
                self.note(format!(
                    "sabotage: node {node} stays primary in view {}",
                    view.number
                ));
                // It believes it is alone in the new view: it releases at commit.
                let config = PrimaryConfig {
                    backups: Vec::new(),
                    spares: Vec::new(),
                    lone: true,
                    ..self.primary_config(&view)
                };
                stale.primary = Primary::resume(config, stale.primary.lsn_committed(), Vec::new());
            }
            self.nodes[index].role = Role::Primary(stale);
            return self.collect_primary(node);
        }
        let next = match (transition, role) {
            (Transition::StayPrimary, Role::Primary(mut role)) => {
                role.primary
                    .install_view(view.number, &view.backups, &view.spares);
                Role::Primary(role)
            }
            (Transition::Promote { lsn }, Role::Backup(role)) => {
                let role = *role;
                assert_eq!(
                    role.applier.lsn_applied(),
                    lsn,
                    "a backup applies what it gets"
                );
                // The checksums of records above the truncate LSN described a history the
                // new view discards.
                self.checksums.split_off(&(lsn + 1));
                let primary = Primary::resume(
                    self.primary_config(&view),
                    lsn,
                    role.tail.into_iter().collect(),
                );
                Role::Primary(Box::new(PrimaryRole {
                    primary,
                    store: Store::open(role.segment, self.workload.clone()),
                    ready: PrimaryReady::default(),
                    inbox: VecDeque::new(),
                    calls: role.calls,
                }))
            }
            (Transition::StartPrimary, _) => Role::Primary(Box::new(PrimaryRole {
                primary: Primary::new(self.primary_config(&view), self.lsn_loaded),
                store: Store::open(loaded(&self.workload), self.workload.clone()),
                ready: PrimaryReady::default(),
                inbox: VecDeque::new(),
                calls: CallsHeld::default(),
            })),
            (Transition::StayBackup, Role::Backup(mut role)) => {
                // A new view reopens a backup frozen in the old one (the runtime's gate).
                role.frozen = false;
                role.receiver.install_view(view.number);
                Role::Backup(role)
            }
            (Transition::Follow { lsn }, Role::Backup(mut role)) => {
                role.receiver = Receiver::new(receiver_config(&view), lsn);
                role.receiver.introduce();
                role.primary = view.primary;
                role.frozen = false;
                Role::Backup(role)
            }
            (Transition::Reload { discarded }, _) => {
                if discarded > 0 {
                    self.note(format!("node {node}: discards {discarded} records"));
                }
                let mut receiver = Receiver::new(receiver_config(&view), self.lsn_loaded);
                receiver.introduce();
                Role::Backup(Box::new(BackupRole {
                    primary: view.primary,
                    receiver,
                    applier: Applier::new(self.lsn_loaded),
                    segment: loaded(&self.workload),
                    frozen: false,
                    tail: VecDeque::new(),
                    calls: CallsHeld::default(),
                }))
            }
            (Transition::StepDown { .. } | Transition::Wait, _) => Role::Outside,
            (transition, _) => unreachable!("{transition:?} from a role it does not apply to"),
        };
        let promoted = matches!(transition, Transition::Promote { .. });
        let new_role = !matches!(
            transition,
            Transition::StayPrimary | Transition::StayBackup | Transition::Wait
        );
        if new_role {
            self.nodes[index].role_epoch += 1;
            // The primary accepts the new role's connection: what it knew of the old one is
            // void, and the backup's introduction says where it stands now.
            if let Role::Backup(_) = &next
                && let Role::Primary(primary) = &mut self.nodes[index_of(view.primary)].role
            {
                primary.primary.link_reset(node);
            }
        }
        let serving = !matches!(next, Role::Outside);
        self.nodes[index].role = next;
        let core = self.core_mut(node);
        // As the runtime: a role that stays keeps counting the silence it was counting.
        if serving && new_role {
            core.role_started();
        }
        core.set_serving(serving);
        if promoted {
            self.check_acked(node)?;
        }
        match &self.nodes[index].role {
            Role::Primary(_) => self.collect_primary(node),
            Role::Backup(_) => self.collect_backup(node),
            Role::Outside => Ok(()),
        }
    }

    /// A backup of `primary`'s view whose lease promise to it has run out by now, if any:
    /// such a backup may already have reported for a new view, so a reply that needs the
    /// lease must not leave (a sharper check than waiting for an actual report, which
    /// usually comes ticks after the promise ran out).
    fn promise_broken(&self, primary: NodeId, view: u64) -> Option<(NodeId, u64)> {
        let Role::Primary(role) = &self.nodes[index_of(primary)].role else {
            return None;
        };
        debug_assert_eq!(role.primary.view(), view);
        role.primary.config().backups.iter().find_map(|&backup| {
            self.promise_end
                .get(&(backup, primary))
                .filter(|&&end| self.now >= end)
                .map(|&end| (backup, end))
        })
    }

    fn primary_config(&self, view: &View) -> PrimaryConfig {
        PrimaryConfig {
            group: GROUP,
            view: view.number,
            backups: view.backups.clone(),
            spares: view.spares.clone(),
            safety: self.faults.safety,
            tail: TailLimits {
                records_max: self.faults.tail_records_max,
                bytes_max: 256 << 20,
            },
            batch_bytes_max: self.faults.batch_bytes_max,
            heartbeat_ticks: 1,
            resend_ticks: 3,
            kind: BatchKind::Redo,
            flush_batches_in_flight_max: 2,
            lone: false,
            lease_ticks: Some(self.primary_lease_ticks()),
        }
    }

    /// The primary's share of the backups' lease promise (`tandem_replication::lease`): a
    /// backup notices a message at some point inside a tick, a released reply leaves at
    /// once, and the nodes' ticks differ by their drift.
    fn primary_lease_ticks(&self) -> u64 {
        let margins = LeaseMargins {
            notice_ticks: 1,
            send_ticks: 0,
            period_min: *self.period.values().min().expect("nodes"),
            period_max: *self.period.values().max().expect("nodes"),
        };
        let promise_ticks = self.nodes[0].settings.lease_ticks;
        primary_lease_ticks(promise_ticks, margins).expect("the faults leave the primary a lease")
    }

    // ---- the data plane ----

    fn replicate(&mut self, from: NodeId, to: NodeId, message: Message) -> Result<(), String> {
        let index = index_of(to);
        match &mut self.nodes[index].role {
            Role::Primary(role) => {
                role.primary.step(from, message);
                self.core_mut(to).heard_from_backup(from);
                // An ack may lift flow control: the executor runs what was waiting.
                self.drain_inbox(to)?;
                if let Role::Primary(role) = &mut self.nodes[index].role {
                    role.primary.flush();
                }
                // Hearing a member changes only the core's timers: nothing for it to hand over
                // until its next tick or message.
                self.collect_primary(to)
            }
            Role::Backup(role) => {
                // A frozen backup has closed its primary's links; a stranger's message goes
                // to the receiver, which fences an older view's primary.
                if role.frozen && from == role.primary {
                    return Ok(());
                }
                let heard = from == role.primary;
                role.receiver.step(from, message);
                if heard {
                    self.core_mut(to).heard_from_primary();
                    let promise_ticks = self.nodes[index_of(to)].settings.lease_ticks;
                    let end = self.tick_next_at[&to] + (promise_ticks - 1) * self.period[&to];
                    let promise = self.promise_end.entry((to, from)).or_insert(0);
                    *promise = (*promise).max(end);
                }
                self.collect_backup(to)
            }
            Role::Outside => Ok(()),
        }
    }

    fn call(&mut self, from: NodeId, to: NodeId, seq: u64, args: Vec<u8>) -> Result<(), String> {
        let client = (from - CLIENT_BASE) as usize;
        let index = index_of(to);
        // The sabotaged stale primary serves whatever its node's view says.
        let stale_serves = self.sabotage == Some(ClusterSabotage::IgnoreDepose);
        let serving = match &self.nodes[index].role {
            Role::Primary(role) if stale_serves => !role.primary.is_deposed(),
            Role::Primary(role) => {
                !role.primary.is_deposed()
                    && self.nodes[index]
                        .core
                        .as_ref()
                        .and_then(|core| core.view())
                        .is_some_and(|view| {
                            view.number == role.primary.view() && view.primary == to
                        })
            }
            _ => false,
        };
        if !serving {
            let primary = self.nodes[index]
                .core
                .as_ref()
                .and_then(|core| core.view())
                .map_or(to, |view| view.primary);
            self.send(to, from, Wire::NotPrimary { seq, primary });
            return Ok(());
        }
        if let Role::Primary(role) = &mut self.nodes[index].role {
            role.inbox.push_back((client, seq, args));
        }
        self.drain_inbox(to)?;
        if let Role::Primary(role) = &mut self.nodes[index].role {
            // The executor has run dry: ship what is open.
            role.primary.flush();
        }
        self.collect_primary(to)
    }

    /// Runs the calls waiting at primary `node` while flow control allows.
    fn drain_inbox(&mut self, node: NodeId) -> Result<(), String> {
        let safety = self.faults.safety;
        let Role::Primary(role) = &mut self.nodes[index_of(node)].role else {
            return Ok(());
        };
        let mut reply = Vec::new();
        while let Some((client, seq, args)) = role.inbox.front().cloned() {
            if !role.primary.can_commit(safety) {
                break;
            }
            role.inbox.pop_front();
            let call = CallId {
                client_id: client_id(client),
                seq,
            };
            let pending = Pending {
                client,
                seq,
                committed: true,
                lsn_first: None,
                needs_lease: !fenced_by_acks(safety),
            };
            match role
                .store
                .call_once(call.client_id, seq, ProcId(0), &args, &mut reply)
            {
                Ok(Deduped::Committed(record)) => {
                    if !role.calls.insert(call) {
                        return Err(format!(
                            "tick {}: node {node} committed call {call:?} twice",
                            self.now / MICROS_PER_TICK
                        ));
                    }
                    role.primary.commit(call, record, safety, pending);
                }
                Ok(Deduped::Read) => {
                    return Err(format!("node {node}: the simulated clients issue no reads"));
                }
                Ok(Deduped::Duplicate { lsn }) => {
                    self.report.duplicates_answered += 1;
                    let pending = Pending {
                        lsn_first: Some(lsn),
                        needs_lease: !fenced_by_acks(safety),
                        ..pending
                    };
                    role.primary.repeat(safety, pending);
                }
                Err(CallError::Proc(_)) => {
                    let pending = Pending {
                        committed: false,
                        needs_lease: true,
                        ..pending
                    };
                    role.primary.defer(safety, pending);
                }
                // The client gave up on this call and moved on: nobody waits for it.
                Err(CallError::StaleSeq { .. }) => {}
                Err(err) => {
                    return Err(format!(
                        "tick {}: node {node} cannot run a call: {err}",
                        self.now / MICROS_PER_TICK
                    ));
                }
            }
        }
        Ok(())
    }

    fn collect_primary(&mut self, node: NodeId) -> Result<(), String> {
        let authoritative_view = self.view_latest.number;
        let Role::Primary(role) = &mut self.nodes[index_of(node)].role else {
            return Ok(());
        };
        let mut ready = std::mem::take(&mut role.ready);
        role.primary.take_ready(&mut ready);
        for (to, sent) in role
            .primary
            .transfer_named(&mut ready, role.store.segment())
        {
            self.trace.note(
                self.now,
                format!(
                    "node {node}: transfer to {to}: {} pages, LSN {} → {}",
                    sent.pages, sent.lsn_from, sent.lsn
                ),
            );
        }
        let tick_now = role.primary.tick_count();
        let view = role.primary.view();
        // The primary's bytes at the end of its last sealed batch: what a backup must hold
        // once it has applied that batch. Only the newest view's primary writes history.
        let segment = role.store.segment();
        let lsn_sealed = role.primary.tail().lsn_next() - 1;
        if view == authoritative_view
            && lsn_sealed == segment.lsn()
            && lsn_sealed > self.lsn_loaded
            && lsn_sealed.is_multiple_of(CHECKSUM_EVERY_LSN)
        {
            self.checksums
                .entry(lsn_sealed)
                .or_insert_with(|| crc32c::crc32c(segment.bytes()));
        }
        for (to, message) in ready.messages.drain(..) {
            self.send(node, to, Wire::Replication(message));
        }
        for disposition in ready.drain_replies(tick_now) {
            let reply = match disposition {
                Disposition::Send(reply) => reply,
                // Replies leave as soon as they are released here: the lease they were
                // released under still runs.
                Disposition::Withhold(_) => unreachable!("a reply leaves as it is released"),
                Disposition::NotPrimary(reply) => {
                    let primary = self.nodes[index_of(node)]
                        .core
                        .as_ref()
                        .and_then(|core| core.view())
                        .map_or(node, |view| view.primary);
                    let Pending { client, seq, .. } = reply.reply;
                    let client = CLIENT_BASE + client as NodeId;
                    self.send(node, client, Wire::NotPrimary { seq, primary });
                    continue;
                }
            };
            let releaser = *self.released_by.entry(view).or_insert(node);
            if releaser != node {
                return Err(self.fail(format!(
                    "nodes {releaser} and {node} both released replies as primary of view {view}"
                )));
            }
            let Pending {
                client,
                seq,
                committed,
                lsn_first,
                needs_lease,
            } = reply.reply;
            if needs_lease && let Some((backup, end)) = self.promise_broken(node, view) {
                return Err(self.fail(format!(
                    "node {node} released a reply to client {client} (call {seq}) that \
                     needed its lease as primary of view {view} at {} µt, after backup \
                     {backup}'s promise ran out at {end} µt: the lease outlived the promise",
                    self.now
                )));
            }
            if needs_lease && let Some(&(reporter, at)) = self.reported.get(&view) {
                let at = at / MICROS_PER_TICK;
                return Err(self.fail(format!(
                    "node {node} released a reply to client {client} (call {seq}) \
                     that needed its lease as primary of view {view}, but node {reporter} \
                     reported for a new view at tick {at}: the lease had run out"
                )));
            }
            let lsn = lsn_first.unwrap_or(reply.lsn);
            if committed && fenced_by_acks(self.faults.safety) {
                let acked = self.acked.entry(client).or_insert((0, 0));
                if seq > acked.0 {
                    *acked = (seq, lsn);
                }
            }
            self.send(
                node,
                CLIENT_BASE + client as NodeId,
                Wire::Reply { seq, lsn },
            );
        }
        // The buffers go back for the next collection (capacity kept).
        ready.clear();
        if let Role::Primary(role) = &mut self.nodes[index_of(node)].role {
            role.ready = ready;
        }
        Ok(())
    }

    fn collect_backup(&mut self, node: NodeId) -> Result<(), String> {
        let Role::Backup(role) = &mut self.nodes[index_of(node)].role else {
            return Ok(());
        };
        let mut ready = ReceiverReady::default();
        role.receiver.take_ready(&mut ready);
        let mut applied_any = false;
        let lsn_before = role.applier.lsn_applied();
        if let Some(image) = ready.to_install.take() {
            let lsn = role
                .applier
                .install(&mut role.segment, &image)
                .map_err(|err| format!("node {node} cannot install a transfer: {err}"))?;
            role.receiver.applied(lsn);
            // The kept batches end below the image. The calls inside it are not seen here;
            // those after it come later in the history, so their seqs still only go up.
            role.tail.clear();
            applied_any = true;
            self.report.transfers += 1;
        }
        for apply in ready.to_apply.drain(..) {
            let lsn = role
                .applier
                .apply(&mut role.segment, &apply)
                .map_err(|err| format!("node {node} cannot apply a batch: {err}"))?;
            role.receiver.applied(lsn);
            for &call in role.applier.calls_applied() {
                if !role.calls.insert(call) {
                    return Err(format!(
                        "tick {}: node {node} applied call {call:?} twice",
                        self.now / MICROS_PER_TICK
                    ));
                }
            }
            keep_applied(&mut role.tail, apply.batch);
            applied_any = true;
        }
        // The receiver acked receipt; a backup that applies at once acks receipt and
        // application in one message, as the runtime's applier does.
        if applied_any {
            ready
                .messages
                .retain(|(_, message)| !matches!(message, Message::Ack { .. }));
        }
        if applied_any && !role.frozen {
            let lsn = role.applier.lsn_applied();
            ready.messages.push((
                role.primary,
                Message::Ack {
                    view: role.receiver.view(),
                    lsn_received: lsn,
                    lsn_applied: lsn,
                    tick_echoed: role.receiver.tick_echoed(),
                },
            ));
        }
        let frozen = role.frozen;
        let primary = role.primary;
        for (to, message) in ready.messages.drain(..) {
            if frozen && to == primary {
                continue;
            }
            self.send(node, to, Wire::Replication(message));
        }
        if applied_any {
            self.check_backup(node, lsn_before)?;
        }
        Ok(())
    }

    /// A backup after it applied from `lsn_before` on: the current primary's bytes at the
    /// same LSN (if it follows the newest view's primary), and conservation, each at its
    /// sampled LSNs.
    fn check_backup(&mut self, node: NodeId, lsn_before: u64) -> Result<(), String> {
        let Role::Backup(role) = &self.nodes[index_of(node)].role else {
            return Ok(());
        };
        let lsn = role.segment.lsn();
        let checked = if lsn / FULL_CHECK_EVERY_LSN != lsn_before / FULL_CHECK_EVERY_LSN {
            self.workload.check(&role.segment)
        } else {
            self.workload.conservation(&role.segment)
        };
        checked.map_err(|err| self.fail(format!("node {node} at LSN {lsn}: {err}")))?;
        let current = role.primary == self.view_latest.primary
            && role.receiver.view() == self.view_latest.number;
        if current && let Some(&expected) = self.checksums.get(&lsn) {
            let actual = crc32c::crc32c(role.segment.bytes());
            if actual != expected {
                return Err(self.fail(format!(
                    "node {node} at LSN {lsn} has checksum {actual:#010x}, its primary had \
                     {expected:#010x}"
                )));
            }
        }
        Ok(())
    }

    /// Every client's last acknowledged commit is in primary `node`'s dedup table.
    fn check_acked(&self, node: NodeId) -> Result<(), String> {
        let Role::Primary(role) = &self.nodes[index_of(node)].role else {
            return Ok(());
        };
        for (&client, &(seq, lsn)) in &self.acked {
            let held = role
                .store
                .dedup_entry(client_id(client))
                .map_or(0, |entry| entry.seq());
            if held < seq {
                return Err(self.fail(format!(
                    "lost an acknowledged commit: client {client}'s call {seq} (LSN {lsn}) is \
                     not in node {node}'s records (it holds the client's call {held}, up to \
                     LSN {})",
                    role.primary.lsn_committed()
                )));
            }
        }
        Ok(())
    }

    // ---- clients ----

    fn client_next(&mut self, client: usize) {
        if !self.faults_on || self.clients[client].call.is_some() {
            // After healing, clients finish what they started and start nothing new.
            return;
        }
        let state = &mut self.clients[client];
        state.seq += 1;
        let seq = state.seq;
        let mut args = Vec::new();
        state
            .driver
            .as_mut()
            .expect("a client has a driver")
            .next_call(&mut args);
        state.call = Some((seq, args));
        state.attempt = 0;
        state.deadline_at = self.now + self.faults.deadline;
        self.report.calls += 1;
        self.client_send(client);
    }

    /// Sends the call in flight to the node the client believes is the primary, and sets the
    /// retry timer.
    fn client_send(&mut self, client: usize) {
        let state = &mut self.clients[client];
        let Some((seq, args)) = state.call.clone() else {
            return;
        };
        state.attempt += 1;
        let attempt = state.attempt;
        let target = state.target;
        let retry = self.faults.retry_after.min(state.deadline_at - self.now);
        self.send(
            CLIENT_BASE + client as NodeId,
            target,
            Wire::Call { seq, args },
        );
        // One timer per attempt: the retry, or the deadline if it comes first.
        self.schedule(
            retry,
            Event::ClientRetry {
                client,
                seq,
                attempt,
                rotate: true,
            },
        );
    }

    /// Like the stub: resend with the same (client id, seq), to the next node when the last
    /// attempt got no answer in time.
    fn client_retry(&mut self, client: usize, seq: u64, attempt: u64, rotate: bool) {
        let nodes = self.faults.nodes as NodeId;
        let state = &mut self.clients[client];
        let waiting = state
            .call
            .as_ref()
            .is_some_and(|(waiting, _)| *waiting == seq);
        if !waiting || state.attempt != attempt {
            return;
        }
        if self.now >= state.deadline_at {
            state.call = None;
            self.report.deadline_errors += 1;
            self.note(format!("client {client} call {seq}: deadline"));
            self.schedule_next_call(client);
            return;
        }
        if rotate {
            state.target = state.target % nodes + 1;
        }
        self.client_send(client);
    }

    fn client_receive(&mut self, client: usize, from: NodeId, wire: Wire) -> Result<(), String> {
        let state = &mut self.clients[client];
        let waiting = |seq: u64| state.call.as_ref().is_some_and(|(w, _)| *w == seq);
        match wire {
            Wire::Reply { seq, lsn, .. } if waiting(seq) => {
                // Under a 1-safe rule a new view may rightly lose released commits, and
                // LSNs go back with them.
                if lsn < state.lsn_last && fenced_by_acks(self.faults.safety) {
                    let last = state.lsn_last;
                    return Err(self.fail(format!(
                        "client {client} got LSN {lsn} for call {seq} after LSN {last}"
                    )));
                }
                state.lsn_last = lsn;
                state.call = None;
                state.target = from;
                self.report.replies += 1;
                self.schedule_next_call(client);
            }
            Wire::NotPrimary { seq, primary } if waiting(seq) => {
                // Follow the hint, or move on if the node named itself (it is not serving).
                let nodes = self.faults.nodes as NodeId;
                state.target = if primary == from {
                    from % nodes + 1
                } else {
                    primary
                };
                // The timer of this attempt is void now; a short pause, like the stub's
                // backoff, before resending.
                state.attempt += 1;
                let attempt = state.attempt;
                let pause = (MICROS_PER_TICK / 2).min(state.deadline_at - self.now);
                self.schedule(
                    pause,
                    Event::ClientRetry {
                        client,
                        seq,
                        attempt,
                        rotate: false,
                    },
                );
            }
            // A late answer to a call the client finished or gave up on.
            _ => {}
        }
        Ok(())
    }

    fn schedule_next_call(&mut self, client: usize) {
        // Closed-loop clients: a short think between calls.
        let think = self.rng.below(MICROS_PER_TICK / 10);
        self.schedule(think, Event::ClientNext { client });
    }
}

/// The calls in one node's records, as each client's last seq: a client has one call in
/// flight and moves on only after its reply or deadline (a stale retry is refused by the dedup
/// table), so within one history its seqs only go up. A seq that does not is a call applied
/// twice (or applied out of order, as bad).
#[derive(Clone, Debug, Default)]
struct CallsHeld {
    seq_last: Vec<u64>,
}

impl CallsHeld {
    /// Records `call`; false if its client's seqs did not go up.
    fn insert(&mut self, call: CallId) -> bool {
        if call.client_id == 0 {
            return true;
        }
        let client = (call.client_id - u64::from(CLIENT_BASE)) as usize;
        if self.seq_last.len() <= client {
            self.seq_last.resize(client + 1, 0);
        }
        let fresh = call.seq > self.seq_last[client];
        self.seq_last[client] = self.seq_last[client].max(call.seq);
        fresh
    }
}

/// Whether a reply under `safety` waits for backup acks (and so needs no lease).
fn fenced_by_acks(safety: Safety) -> bool {
    matches!(safety, Safety::TwoSafe(_) | Safety::TwoSafeApplied(_))
}

fn index_of(node: NodeId) -> usize {
    (node - 1) as usize
}

fn client_id(client: usize) -> u64 {
    u64::from(CLIENT_BASE) + client as u64
}

/// A segment with the initial database: every node loads the same one.
fn loaded(workload: &DebitCredit) -> Segment {
    let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).expect("map");
    workload.load(&mut segment);
    segment
}

fn receiver_config(view: &View) -> ReceiverConfig {
    ReceiverConfig {
        group: GROUP,
        view: view.number,
        primary: view.primary,
        nack_ticks: 2,
    }
}
