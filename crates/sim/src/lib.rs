//! Deterministic simulation of one replication group: the real replication core and the real
//! store, driven by a simulated network, clock and set of clients, all from one seed.
//!
//! A run has two phases. In the safety phase faults are on; in the liveness phase they are
//! healed and the group must converge (every backup at the primary's LSN, every reply out,
//! every client call ended) within a bounded number of ticks. Checkers run throughout.
//!
//! Fault model (every rate drawn from the seed and reported):
//! - network: per-message delay, loss, duplication, reordering (by delay jitter), and
//!   partitions that cut one direction or both between two nodes for a while;
//! - clock: each node ticks at its own rate (drift) and may pause (no ticks, no processing)
//!   for a while;
//! - slow nodes: one node's messages, in and out, may take several times longer;
//! - crashes: a backup may crash and restart later from its initial database, having lost
//!   everything it held (nodes keep no disk yet). The primary never crashes here: failover
//!   arrives with the cluster core, and so do crashes of the primary.
//!
//! Checkers:
//! - a released reply's rule held: k backups had really received (or applied) its record;
//! - bounded(n): never more than n committed records missing from some backup;
//! - replies leave in LSN order, and each client sees its replies' LSNs never go back;
//! - replicas at the same LSN hold identical bytes (checksums taken at batch boundaries with
//!   an even LSN);
//! - Debit-Credit's conservation holds on every backup after every batch it applies;
//! - no (client id, seq) is committed or applied twice;
//! - every client call ends with a reply or a deadline error, and after healing the replicas
//!   converge to the primary's bytes and its tally of committed deltas.
//!
//! Time: the simulation's clock counts micro-ticks; a node's tick lasts about
//! [`MICROS_PER_TICK`] of them, more or less by its drift.

#![forbid(unsafe_code)]

pub mod cluster;
mod event;

pub use cluster::{
    ClusterFaults, ClusterReport, ClusterSabotage, Mix, run_cluster, run_cluster_mixed,
    run_cluster_sabotaged,
};

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;

use event::{EventQueue, Trace};

use tandem_log::{BatchBuilder, BatchKind, CallId, TailLimits};
use tandem_memory::{Segment, Strategy};
use tandem_replication::{
    AckCount, Applier, Message, NodeId, Primary, PrimaryConfig, PrimaryReady, Receiver,
    ReceiverConfig, ReceiverReady, Safety,
};
use tandem_store::workloads::debit_credit::{DebitCredit, DebitCreditConfig, DebitCreditDriver};
use tandem_store::{CallError, Driver, ProcId, Rng, Store, Workload};

/// Micro-ticks in a nominal tick.
pub const MICROS_PER_TICK: u64 = 1_000;
const PRIMARY: NodeId = 1;
/// Small, so that a checksum and a consistency check can run after every applied batch.
const SEGMENT_LEN: usize = 16 * 1024;
/// Clients are addressed as nodes from here on.
const CLIENT_BASE: NodeId = 1_000;

/// Fault rates of one run, drawn from its seed.
#[derive(Clone, Debug, PartialEq)]
pub struct Faults {
    pub backups: usize,
    pub clients: usize,
    pub safety: Safety,
    /// Message delay range, micro-ticks.
    pub delay_min: u64,
    pub delay_max: u64,
    /// Chances per million messages.
    pub loss_ppm: u64,
    pub duplicate_ppm: u64,
    /// Chances per million node ticks of a new partition, a crash (backups) or a pause.
    pub partition_per_tick_ppm: u64,
    pub partition_ticks_max: u64,
    pub crash_per_tick_ppm: u64,
    pub restart_ticks_max: u64,
    pub pause_per_tick_ppm: u64,
    pub pause_ticks_max: u64,
    /// Each node's tick lasts MICROS_PER_TICK ± this many micro-ticks.
    pub drift_max: u64,
    /// A slow node (if any): its messages, in and out, take this many times longer.
    pub slow_node: Option<NodeId>,
    pub slow_factor: u64,
    /// A client's deadline for one call, in micro-ticks.
    pub deadline: u64,
    pub batch_bytes_max: usize,
}

impl Faults {
    /// Draws every rate from `rng`.
    pub fn draw(rng: &mut Rng) -> Faults {
        let backups = 1 + rng.below(3) as usize;
        let safety = match rng.below(5) {
            0 => Safety::TwoSafe(AckCount::All),
            1 => Safety::TwoSafe(AckCount::Of(1 + rng.below(backups as u64) as u32)),
            2 => Safety::TwoSafeApplied(AckCount::All),
            3 => Safety::Bounded(1 + rng.below(20)),
            _ => Safety::OneSafe,
        };
        let delay_min = 10 + rng.below(200);
        Faults {
            backups,
            clients: 1 + rng.below(8) as usize,
            safety,
            delay_min,
            delay_max: delay_min + rng.below(2_000),
            loss_ppm: rng.below(50_000),
            duplicate_ppm: rng.below(30_000),
            partition_per_tick_ppm: rng.below(5_000),
            partition_ticks_max: 1 + rng.below(50),
            crash_per_tick_ppm: rng.below(2_000),
            restart_ticks_max: 1 + rng.below(100),
            pause_per_tick_ppm: rng.below(5_000),
            pause_ticks_max: 1 + rng.below(30),
            drift_max: rng.below(200),
            slow_node: (rng.below(3) == 0).then(|| 1 + rng.below(backups as u64 + 1) as NodeId),
            slow_factor: 2 + rng.below(9),
            deadline: (5 + rng.below(100)) * MICROS_PER_TICK,
            batch_bytes_max: 64 + rng.below(4_096) as usize,
        }
    }
}

impl fmt::Display for Faults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} backups, {} clients, {}; delay {}..{} µt, loss {} ppm, dup {} ppm, partitions \
             {} ppm/tick ≤{} ticks, crashes {} ppm/tick restart ≤{} ticks, pauses {} ppm/tick \
             ≤{} ticks, drift ±{} µt/tick, slow {}, deadline {} µt, batches ≤{} B",
            self.backups,
            self.clients,
            self.safety,
            self.delay_min,
            self.delay_max,
            self.loss_ppm,
            self.duplicate_ppm,
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
            self.batch_bytes_max
        )
    }
}

/// What a run did and whether every checker held.
#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    pub faults: Faults,
    pub calls: u64,
    pub replies: u64,
    pub deadline_errors: u64,
    pub commits: u64,
    pub crashes: u64,
    /// The first checker that failed, with the tick it failed at.
    pub failure: Option<String>,
    /// The last events before the end (or the failure), oldest first.
    pub trace: Vec<String>,
}

/// A message on the wire: either replication or a client's call and its reply.
#[derive(Clone, Debug)]
enum Wire {
    Replication(Message),
    Call {
        seq: u64,
        args: Vec<u8>,
    },
    /// The LSN of the call's commit (or, for a rollback, of the latest commit it saw).
    Reply {
        seq: u64,
        lsn: u64,
    },
}

#[derive(Debug)]
enum Event {
    /// `link` is the pair of incarnations the message was sent between: a restart starts new
    /// connections, and what was in flight on the old ones never arrives (as with TCP).
    Deliver {
        from: NodeId,
        to: NodeId,
        link: (u64, u64),
        wire: Wire,
    },
    Tick {
        node: NodeId,
    },
    /// A client's next call, or (`deadline_of`) the deadline of one it made.
    ClientWake {
        client: usize,
        deadline_of: Option<u64>,
    },
    Restart {
        node: NodeId,
    },
}

/// What the primary holds for a reply until it is released.
#[derive(Clone, Copy, Debug)]
struct Pending {
    client: usize,
    seq: u64,
    safety: Safety,
}

struct Backup {
    node: NodeId,
    up: bool,
    receiver: Receiver,
    applier: Applier,
    segment: Segment,
    /// Highest LSN this backup ever received or applied, across restarts: what an ack can
    /// truthfully claim happened.
    ever_received: u64,
    ever_applied: u64,
    /// Calls applied in this incarnation.
    applied_calls: BTreeSet<CallId>,
}

#[derive(Default)]
struct Client {
    driver: Option<DebitCreditDriver>,
    seq: u64,
    /// (seq, deadline) of the call in flight.
    in_flight: Option<(u64, u64)>,
    /// LSN of the last reply.
    lsn_last: u64,
}

struct World {
    rng: Rng,
    faults: Faults,
    now: u64,
    queue: EventQueue<Event>,
    store: Store<DebitCredit>,
    primary: Primary<Pending>,
    ready: PrimaryReady<Pending>,
    /// Calls received and waiting for flow control.
    inbox: VecDeque<(usize, u64, Vec<u8>)>,
    tally: DebitCreditDriver,
    committed_calls: BTreeSet<CallId>,
    /// Primary checksum at every sealed batch end (LSN → CRC32C).
    checksums: BTreeMap<u64, u32>,
    backups: Vec<Backup>,
    clients: Vec<Client>,
    /// Node periods in micro-ticks, and paused-until times.
    period: BTreeMap<NodeId, u64>,
    paused_until: BTreeMap<NodeId, u64>,
    /// Directed links cut until a time.
    cut_until: BTreeMap<(NodeId, NodeId), u64>,
    /// Restarts of each node so far.
    incarnation: BTreeMap<NodeId, u64>,
    faults_on: bool,
    sabotage: Option<Sabotage>,
    /// Batches sent to the first backup so far (for the sabotage).
    batches_to_first: u64,
    lsn_loaded: u64,
    last_released: u64,
    report: Report,
    trace: Trace,
}

const TRACE_LEN: usize = 40;

/// Runs seed `seed` for `ticks` ticks of faults, then heals and waits for convergence.
pub fn run(seed: u64, ticks: u64) -> Report {
    run_sabotaged(seed, ticks, None)
}

/// Damage done by the simulated world itself, to show that the checkers see it (a checker that
/// cannot fail is a defect). Bugs planted in the cores are `tandem_replication::bugs`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// The fifth batch for the first backup has one data byte changed and its checksum
    /// recomputed: a primary that ships wrong bytes, which no checksum can notice.
    ForgeBatch,
}

/// Runs like [`run`] with `sabotage` done along the way.
pub fn run_sabotaged(seed: u64, ticks: u64, sabotage: Option<Sabotage>) -> Report {
    let mut world = World::new(seed);
    world.sabotage = sabotage;
    let result = world.simulate(ticks);
    world.report.failure = result.err();
    world.report.trace = world.trace.lines();
    world.report.commits = world.store.segment().lsn() - world.lsn_loaded;
    world.report
}

impl World {
    fn new(seed: u64) -> World {
        let mut rng = Rng::new(seed);
        let faults = Faults::draw(&mut rng);
        let config = DebitCreditConfig {
            tellers_per_branch: 4,
            accounts_per_branch: 100,
            history_bytes: 2048,
            overdraft_limit: Some(2_000_000),
        };
        let workload = DebitCredit::new(SEGMENT_LEN, &config).expect("fits");
        let fresh = |workload: &DebitCredit| {
            let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).expect("map");
            workload.load(&mut segment);
            segment
        };
        let segment = fresh(&workload);
        let lsn_loaded = segment.lsn();
        let backup_ids: Vec<NodeId> = (0..faults.backups as NodeId).map(|i| 2 + i).collect();
        let primary_config = PrimaryConfig {
            spares: Vec::new(),
            group: 0,
            view: 1,
            backups: backup_ids.clone(),
            safety: faults.safety,
            tail: TailLimits {
                records_max: 1 << 20,
                bytes_max: 256 << 20,
            },
            batch_bytes_max: faults.batch_bytes_max,
            heartbeat_ticks: 2,
            resend_ticks: 3,
            kind: BatchKind::Redo,
            flush_batches_in_flight_max: 1 + rng.below(4) as usize,
            lone: false,
            // The primary is never replaced in this layer: no lease to keep.
            lease_ticks: None,
        };
        let backups = backup_ids
            .iter()
            .map(|&node| Backup {
                node,
                up: true,
                receiver: Receiver::new(receiver_config(), lsn_loaded),
                applier: Applier::new(lsn_loaded),
                segment: fresh(&workload),
                ever_received: lsn_loaded,
                ever_applied: lsn_loaded,
                applied_calls: BTreeSet::new(),
            })
            .collect();
        let clients = (0..faults.clients)
            .map(|index| Client {
                driver: Some(workload.driver(seed ^ (0x9e37 + index as u64))),
                ..Client::default()
            })
            .collect();
        let mut period = BTreeMap::new();
        for node in std::iter::once(PRIMARY).chain(backup_ids.iter().copied()) {
            let drift = rng.below(2 * faults.drift_max + 1);
            period.insert(node, MICROS_PER_TICK - faults.drift_max + drift);
        }
        let tally = workload.driver(0);
        let mut world = World {
            rng,
            now: 0,
            queue: EventQueue::new(),
            store: Store::open(segment, workload),
            primary: Primary::new(primary_config, lsn_loaded),
            ready: PrimaryReady::default(),
            inbox: VecDeque::new(),
            tally,
            committed_calls: BTreeSet::new(),
            checksums: BTreeMap::new(),
            backups,
            clients,
            period,
            paused_until: BTreeMap::new(),
            cut_until: BTreeMap::new(),
            incarnation: BTreeMap::new(),
            faults_on: true,
            sabotage: None,
            batches_to_first: 0,
            lsn_loaded,
            last_released: 0,
            report: Report {
                seed,
                faults: faults.clone(),
                calls: 0,
                replies: 0,
                deadline_errors: 0,
                commits: 0,
                crashes: 0,
                failure: None,
                trace: Vec::new(),
            },
            faults,
            trace: Trace::new(TRACE_LEN),
        };
        let nodes: Vec<NodeId> = world.period.keys().copied().collect();
        for node in nodes {
            let first = world.rng.below(MICROS_PER_TICK);
            world.schedule(first, Event::Tick { node });
        }
        for client in 0..world.clients.len() {
            let first = world.rng.below(MICROS_PER_TICK);
            world.schedule(
                first,
                Event::ClientWake {
                    client,
                    deadline_of: None,
                },
            );
        }
        for backup in 0..world.backups.len() {
            world.backups[backup].receiver.introduce();
            world
                .collect_backup(backup)
                .expect("introductions apply nothing");
        }
        world
    }

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
        while let Some((at, event)) = self.queue.pop() {
            self.now = at;
            if self.faults_on && self.now >= safety_end {
                self.heal();
            }
            if !self.faults_on && self.converged() {
                return self.final_checks();
            }
            if self.now > safety_end + 2_000 * MICROS_PER_TICK {
                return Err(self.fail(format!(
                    "no convergence 2000 ticks after healing: primary at LSN {} (sees backups \
                     at {:?}, tail {}..{}, {} calls waiting), backups at {:?}, {} replies pending",
                    self.primary.lsn_committed(),
                    self.primary.backup_progress().collect::<Vec<_>>(),
                    self.primary.tail().lsn_first(),
                    self.primary.tail().lsn_next(),
                    self.inbox.len(),
                    self.backups
                        .iter()
                        .map(|b| (b.node, b.up, b.applier.lsn_applied()))
                        .collect::<Vec<_>>(),
                    self.primary.pending_replies()
                )));
            }
            self.handle(event)?;
        }
        Err(self.fail("the event queue ran dry".into()))
    }

    fn heal(&mut self) {
        self.faults_on = false;
        self.cut_until.clear();
        self.paused_until.clear();
        self.note("heal: faults off".into());
        for index in 0..self.backups.len() {
            if !self.backups[index].up {
                let node = self.backups[index].node;
                self.schedule(0, Event::Restart { node });
            }
        }
    }

    fn converged(&self) -> bool {
        let lsn = self.primary.lsn_committed();
        self.primary.pending_replies() == 0
            && self.inbox.is_empty()
            && self
                .backups
                .iter()
                .all(|b| b.up && b.applier.lsn_applied() == lsn)
            && self.clients.iter().all(|c| c.in_flight.is_none())
    }

    fn final_checks(&mut self) -> Result<(), String> {
        let workload = self.store.workload().clone();
        for backup in &self.backups {
            if backup.segment.bytes() != self.store.segment().bytes() {
                return Err(self.fail(format!("backup {} differs from the primary", backup.node)));
            }
            self.tally
                .check(&workload, &backup.segment)
                .map_err(|err| self.fail(format!("backup {}: {err}", backup.node)))?;
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
                if self.paused(node) {
                    return Ok(());
                }
                if self.faults_on {
                    self.maybe_fault(node);
                }
                if node == PRIMARY {
                    self.primary.tick();
                    self.drain_inbox()?;
                    self.collect_primary()?;
                } else {
                    let index = self.backup_index(node);
                    if self.backups[index].up {
                        self.backups[index].receiver.tick();
                        self.collect_backup(index)?;
                    }
                }
            }
            Event::Deliver {
                from,
                to,
                link,
                wire,
            } => {
                if link != self.link(from, to) {
                    return Ok(());
                }
                if self.paused(to) {
                    // A paused node reads its socket later.
                    let resume = self.paused_until[&to] - self.now;
                    self.schedule(
                        resume,
                        Event::Deliver {
                            from,
                            to,
                            link,
                            wire,
                        },
                    );
                    return Ok(());
                }
                self.deliver(from, to, wire)?;
            }
            Event::ClientWake {
                client,
                deadline_of,
            } => self.client_wake(client, deadline_of),
            Event::Restart { node } => {
                let index = self.backup_index(node);
                if !self.backups[index].up {
                    self.restart(index)?;
                }
            }
        }
        Ok(())
    }

    fn maybe_sabotage(&mut self, to: NodeId, wire: Wire) -> Wire {
        let Wire::Replication(Message::Batch(bytes)) = &wire else {
            return wire;
        };
        if to != 2 || self.sabotage != Some(Sabotage::ForgeBatch) {
            return wire;
        }
        self.batches_to_first += 1;
        if self.batches_to_first != 5 {
            return wire;
        }
        let lsn_base = tandem_log::BatchRef::parse(bytes)
            .expect("sealed by the primary")
            .lsn_base();
        self.note(format!(
            "sabotage: forged batch at LSN {lsn_base} for backup {to}"
        ));
        Wire::Replication(Message::Batch(forge_batch(bytes, false)))
    }

    /// The current incarnations of both ends of a link.
    fn link(&self, from: NodeId, to: NodeId) -> (u64, u64) {
        let incarnation = |node: NodeId| self.incarnation.get(&node).copied().unwrap_or(0);
        (incarnation(from), incarnation(to))
    }

    fn backup_index(&self, node: NodeId) -> usize {
        (node - 2) as usize
    }

    /// Per tick of `node`, maybe start a partition, a pause or (backups) a crash.
    fn maybe_fault(&mut self, node: NodeId) {
        let faults = self.faults.clone();
        if self.rng.below(1_000_000) < faults.partition_per_tick_ppm {
            let others: Vec<NodeId> = self.period.keys().copied().filter(|&n| n != node).collect();
            let other = others[self.rng.below(others.len() as u64) as usize];
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
        if node != PRIMARY
            && self.backups[self.backup_index(node)].up
            && self.rng.below(1_000_000) < faults.crash_per_tick_ppm
        {
            let index = self.backup_index(node);
            self.crash(index);
            let restart = (1 + self.rng.below(faults.restart_ticks_max)) * MICROS_PER_TICK;
            self.schedule(restart, Event::Restart { node });
        }
    }

    fn crash(&mut self, index: usize) {
        let backup = &mut self.backups[index];
        backup.up = false;
        self.report.crashes += 1;
        let node = backup.node;
        self.note(format!("crash {node}"));
    }

    /// A backup comes back from its initial database: a new incarnation on a new link.
    fn restart(&mut self, index: usize) -> Result<(), String> {
        let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).expect("map");
        self.store.workload().load(&mut segment);
        let lsn = segment.lsn();
        let backup = &mut self.backups[index];
        *self.incarnation.entry(backup.node).or_insert(0) += 1;
        backup.up = true;
        backup.segment = segment;
        backup.receiver = Receiver::new(receiver_config(), lsn);
        backup.applier = Applier::new(lsn);
        backup.applied_calls.clear();
        let node = backup.node;
        self.note(format!("restart {node}"));
        // The runtime tells the executor when a link comes back; the backup introduces itself.
        self.primary.link_reset(node);
        self.backups[index].receiver.introduce();
        self.collect_backup(index)
    }

    /// Sends `wire` from `from` to `to` through the faulty network.
    fn send(&mut self, from: NodeId, to: NodeId, wire: Wire) {
        let wire = self.maybe_sabotage(to, wire);
        let link = self.link(from, to);
        let (loss, duplicate) = (self.faults.loss_ppm, self.faults.duplicate_ppm);
        if self.faults_on {
            if self
                .cut_until
                .get(&(from, to))
                .is_some_and(|&until| until > self.now)
            {
                return;
            }
            if self.rng.below(1_000_000) < loss {
                return;
            }
            // A client's call is never duplicated: that is a client retry, which is safe only
            // with the dedup table (issue 4); the exactly-once checker catches it without.
            let is_call = matches!(wire, Wire::Call { .. });
            if !is_call && self.rng.below(1_000_000) < duplicate {
                self.deliver_later(from, to, link, wire.clone());
            }
        }
        self.deliver_later(from, to, link, wire);
    }

    /// Puts `wire` on the wire from `from` to `to`, arriving after a drawn delay.
    fn deliver_later(&mut self, from: NodeId, to: NodeId, link: (u64, u64), wire: Wire) {
        let delay = self.delay(from, to);
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

    /// A message's time on the wire: drawn from the delay range, longer to or from a slow node.
    fn delay(&mut self, from: NodeId, to: NodeId) -> u64 {
        let (delay_min, delay_max) = (self.faults.delay_min, self.faults.delay_max);
        let delay = delay_min + self.rng.below(delay_max - delay_min + 1);
        let slow = self.faults.slow_node;
        if self.faults_on && (slow == Some(from) || slow == Some(to)) {
            delay * self.faults.slow_factor
        } else {
            delay
        }
    }

    fn deliver(&mut self, from: NodeId, to: NodeId, wire: Wire) -> Result<(), String> {
        match (to, wire) {
            (PRIMARY, Wire::Replication(message)) => {
                self.primary.step(from, message);
                // An ack may lift flow control: the executor runs what was waiting.
                self.drain_inbox()?;
                self.primary.flush();
                self.collect_primary()
            }
            (PRIMARY, Wire::Call { seq, args }) => {
                let client = (from - CLIENT_BASE) as usize;
                self.inbox.push_back((client, seq, args));
                self.drain_inbox()?;
                // The executor has run dry: ship what is open.
                self.primary.flush();
                self.collect_primary()
            }
            (to, Wire::Replication(message)) if to < CLIENT_BASE => {
                let index = self.backup_index(to);
                if !self.backups[index].up {
                    return Ok(());
                }
                let lsn_before = self.backups[index].segment.lsn();
                self.backups[index].receiver.step(from, message);
                self.collect_backup(index)?;
                if self.backups[index].segment.lsn() == lsn_before {
                    return Ok(());
                }
                self.check_backup(index)
            }
            (to, Wire::Reply { seq, lsn }) => {
                let index = (to - CLIENT_BASE) as usize;
                let client = &mut self.clients[index];
                if client.in_flight.is_some_and(|(waiting, _)| waiting == seq) {
                    // A client that calls one at a time sees its replies' LSNs never go back.
                    if lsn < client.lsn_last {
                        let last = client.lsn_last;
                        return Err(
                            self.fail(format!("client {index} got LSN {lsn} after LSN {last}"))
                        );
                    }
                    client.lsn_last = lsn;
                    client.in_flight = None;
                    self.report.replies += 1;
                    self.schedule_next_call(index);
                }
                Ok(())
            }
            (_, wire) => Err(self.fail(format!("misrouted {wire:?} to {to}"))),
        }
    }

    /// Runs the calls waiting at the primary while flow control allows.
    fn drain_inbox(&mut self) -> Result<(), String> {
        let safety = self.faults.safety;
        while let Some((client, seq, args)) = self.inbox.front().cloned() {
            if !self.primary.can_commit(safety) {
                break;
            }
            self.inbox.pop_front();
            let call = CallId {
                client_id: CLIENT_BASE as u64 + client as u64,
                seq,
            };
            let pending = Pending {
                client,
                seq,
                safety,
            };
            let mut reply = Vec::new();
            match self.store.call(ProcId(0), &args, &mut reply) {
                Ok(record) => {
                    if !self.committed_calls.insert(call) {
                        return Err(self.fail(format!("call {call:?} committed twice")));
                    }
                    self.primary.commit(call, record, safety, pending);
                    self.check_bounded(safety)?;
                    self.tally.observe(ProcId(0), &args, Ok(()));
                    // The executor dispatches as it goes, so a batch cut by size is checksummed
                    // at its own LSN.
                    self.collect_primary()?;
                }
                Err(CallError::Proc(err)) => {
                    self.tally.observe(ProcId(0), &args, Err(&err));
                    self.primary.defer(safety, pending);
                }
                Err(err) => return Err(self.fail(format!("a call the store cannot run: {err}"))),
            }
        }
        Ok(())
    }

    fn collect_primary(&mut self) -> Result<(), String> {
        let mut ready = std::mem::take(&mut self.ready);
        self.primary.take_ready(&mut ready);
        // The primary's bytes at the end of its last sealed batch, while the segment is there:
        // what a backup must hold once it has applied that batch.
        let segment = self.store.segment();
        let lsn_sealed = self.primary.tail().lsn_next() - 1;
        // Every other LSN: the checker keeps its teeth (a divergence persists) at half the cost.
        if lsn_sealed == segment.lsn()
            && lsn_sealed > self.lsn_loaded
            && lsn_sealed.is_multiple_of(2)
        {
            self.checksums
                .entry(lsn_sealed)
                .or_insert_with(|| crc32c::crc32c(segment.bytes()));
        }
        for (to, message) in ready.messages.drain(..) {
            self.send(PRIMARY, to, Wire::Replication(message));
        }
        for reply in ready.replies.drain(..) {
            self.check_release(reply.lsn, reply.reply.safety)?;
            let Pending { client, seq, .. } = reply.reply;
            let to = CLIENT_BASE + client as NodeId;
            self.send(
                PRIMARY,
                to,
                Wire::Reply {
                    seq,
                    lsn: reply.lsn,
                },
            );
        }
        ready.clear();
        self.ready = ready;
        Ok(())
    }

    /// bounded(n): no more than n committed records lack receipt by some backup, counting
    /// what the backups really received (a failover would lose at most n).
    fn check_bounded(&self, safety: Safety) -> Result<(), String> {
        let Safety::Bounded(n) = safety else {
            return Ok(());
        };
        let lsn = self.primary.lsn_committed();
        let received_by_all = self
            .backups
            .iter()
            .map(|b| b.ever_received)
            .min()
            .unwrap_or(lsn);
        let uncertain = lsn - received_by_all.min(lsn);
        if uncertain > n {
            return Err(self.fail(format!(
                "bounded:{n} committed LSN {lsn} while only LSN {received_by_all} had reached \
                 every backup ({uncertain} uncertain)"
            )));
        }
        Ok(())
    }

    /// The checker of the reply rule: k backups really received (or applied) the record.
    fn check_release(&mut self, lsn: u64, safety: Safety) -> Result<(), String> {
        if lsn < self.last_released {
            return Err(self.fail(format!(
                "reply for LSN {lsn} released after one for LSN {}",
                self.last_released
            )));
        }
        self.last_released = lsn;
        let n = self.backups.len();
        let (holding, acks) = match safety {
            Safety::OneSafe | Safety::Bounded(_) => return Ok(()),
            Safety::TwoSafe(acks) => (
                self.backups
                    .iter()
                    .filter(|b| b.ever_received >= lsn)
                    .count(),
                acks,
            ),
            Safety::TwoSafeApplied(acks) => (
                self.backups
                    .iter()
                    .filter(|b| b.ever_applied >= lsn)
                    .count(),
                acks,
            ),
        };
        let k = match acks {
            AckCount::All => n,
            AckCount::Of(k) => k as usize,
        };
        if holding < k {
            return Err(self.fail(format!(
                "{safety} reply for LSN {lsn} released while {holding} of the {k} backups it \
                 needs had it"
            )));
        }
        Ok(())
    }

    fn collect_backup(&mut self, index: usize) -> Result<(), String> {
        let mut ready = ReceiverReady::default();
        let backup = &mut self.backups[index];
        backup.receiver.take_ready(&mut ready);
        backup.ever_received = backup.ever_received.max(backup.receiver.lsn_received());
        let node = backup.node;
        let mut acks = Vec::new();
        for apply in ready.to_apply.drain(..) {
            let backup = &mut self.backups[index];
            let lsn = match backup.applier.apply(&mut backup.segment, &apply) {
                Ok(lsn) => lsn,
                Err(err) => {
                    let node = backup.node;
                    return Err(self.fail(format!("backup {node} cannot apply a batch: {err}")));
                }
            };
            backup.receiver.applied(lsn);
            backup.ever_applied = backup.ever_applied.max(lsn);
            for &call in backup.applier.calls_applied() {
                if call.client_id != 0 && !backup.applied_calls.insert(call) {
                    let node = backup.node;
                    return Err(self.fail(format!("backup {node} applied call {call:?} twice")));
                }
            }
            acks.push(Message::Ack {
                view: backup.receiver.view(),
                lsn_received: lsn,
                lsn_applied: lsn,
                tick_echoed: backup.receiver.tick_echoed(),
            });
        }
        for (to, message) in ready.messages.drain(..) {
            self.send(node, to, Wire::Replication(message));
        }
        for ack in acks {
            self.send(node, PRIMARY, Wire::Replication(ack));
        }
        Ok(())
    }

    /// Checks a backup after it applied: same bytes as the primary at the same LSN (where
    /// the primary's checksum was taken), conservation, no call applied twice.
    fn check_backup(&mut self, index: usize) -> Result<(), String> {
        let backup = &self.backups[index];
        let lsn = backup.segment.lsn();
        if let Some(&expected) = self.checksums.get(&lsn) {
            let actual = crc32c::crc32c(backup.segment.bytes());
            if actual != expected {
                return Err(self.fail(format!(
                    "backup {} at LSN {lsn} has checksum {actual:#010x}, the primary had \
                     {expected:#010x}",
                    backup.node
                )));
            }
        }
        self.store
            .workload()
            .check(&backup.segment)
            .map_err(|err| self.fail(format!("backup {} at LSN {lsn}: {err}", backup.node)))
    }

    /// A client wakes to start its next call, or at the deadline of call `deadline_of`.
    fn client_wake(&mut self, client: usize, deadline_of: Option<u64>) {
        let state = &mut self.clients[client];
        match (deadline_of, state.in_flight) {
            // The deadline of a call that is still in flight: a deadline error. Without the
            // dedup table (issue 4) a retry could run twice, so the client gives up instead.
            (Some(seq), Some((waiting, _))) if seq == waiting => {
                state.in_flight = None;
                self.report.deadline_errors += 1;
                self.note(format!("client {client} call {seq}: deadline"));
                self.schedule_next_call(client);
                return;
            }
            // The deadline of a call answered in time, or a wake while a call is in flight.
            (Some(_), _) | (None, Some(_)) => return,
            (None, None) => {}
        }
        if !self.faults_on {
            // After healing, clients finish what they started and start nothing new.
            return;
        }
        let deadline_after = self.faults.deadline;
        let state = &mut self.clients[client];
        state.seq += 1;
        let seq = state.seq;
        let mut args = Vec::new();
        state
            .driver
            .as_mut()
            .expect("a client has a driver")
            .next_call(&mut args);
        state.in_flight = Some((seq, self.now + deadline_after));
        self.report.calls += 1;
        self.send(
            CLIENT_BASE + client as NodeId,
            PRIMARY,
            Wire::Call { seq, args },
        );
        self.schedule(
            deadline_after,
            Event::ClientWake {
                client,
                deadline_of: Some(seq),
            },
        );
    }

    /// The client thinks a little, then calls again.
    fn schedule_next_call(&mut self, client: usize) {
        let think = self.rng.below(MICROS_PER_TICK / 4);
        self.schedule(
            think,
            Event::ClientWake {
                client,
                deadline_of: None,
            },
        );
    }
}

/// The batch `bytes` with data of its first record changed (the first byte, or with
/// `every_run` the first byte of each run) and its checksum recomputed: what a primary that
/// ships wrong bytes sends, which no checksum can notice.
pub(crate) fn forge_batch(bytes: &[u8], every_run: bool) -> std::sync::Arc<[u8]> {
    let batch = tandem_log::BatchRef::parse(bytes).expect("sealed by the primary");
    let (mut records, mut calls) = (Vec::new(), Vec::new());
    batch
        .decode_redo_into(&mut records, &mut calls)
        .expect("the primary's records decode");
    let mut builder = BatchBuilder::new(
        BatchKind::Redo,
        batch.group(),
        batch.view(),
        batch.lsn_base(),
    );
    for (index, (record, call)) in records.iter().zip(&calls).enumerate() {
        let mut data = record.data().to_vec();
        if index == 0 && !data.is_empty() {
            data[0] ^= 0x01;
            if every_run {
                let mut start = 0;
                for run in record.runs() {
                    data[start] ^= 0x01;
                    start += run.len as usize;
                }
                data[0] ^= 0x01;
            }
        }
        let forged =
            tandem_memory::RedoRecord::from_parts(record.lsn(), record.runs().to_vec(), data)
                .expect("same shape");
        builder.push_redo(*call, &forged);
    }
    builder.seal().shared()
}

/// Every backup's receiver: group 0, view 1, the one primary.
fn receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        group: 0,
        view: 1,
        primary: PRIMARY,
        nack_ticks: 2,
    }
}
