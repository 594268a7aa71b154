//! Deterministic simulation of a whole cluster: every node runs the real cluster core (the
//! config store's Raft member, the failure detector, the view-change coordinator), the real
//! role rule ([`tandem_cluster::role`]), the real replication core and the real store with its
//! dedup table; clients retry like the stub, with the same (client id, seq). One thread, one
//! seed.
//!
//! Every node serves in each of the run's groups (`RunOptions::groups`, one by default):
//! each group has its own views, primary, log per node and checkers (a [`GroupSim`], a
//! [`SimPlane`] per node), while a node's config store, detector and peer links are shared
//! by its groups, so a node's crash fails over every group it led at once. The clients and
//! readers are dealt out over the groups; what this module says of "the cluster" holds of
//! each group.
//!
//! Two data models ([`Model`]): Debit-Credit (the default, what every seed ran first), and
//! the Redis model, whose clients draw a seeded mix of commands on a small key space,
//! `MULTI` … `EXEC` blocks (the `EXEC` procedure) and Lua scripts (`EVAL`) from
//! [`crate::redis::workload`], and whose primaries run the model's expiry sweep every 100 ms
//! of a clock all nodes share (a tick is 10 ms of it), as the runtime's executor runs
//! the periodic procedure. A seed's faults are the same under both models.
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
//! - the write-ahead log's disk ([`disk`]): each node logs what it holds on a `SimDisk` of
//!   its own as the runtime's log thread does (a sync takes simulated time; group commit);
//!   a crash crashes the disk (unsynced bytes lost or torn), a restart recovers the log and
//!   replays it, and one seed in four fails a sync now and then (the log poisons).
//! - power loss ([`faults`]): in one `durable` seed in two and one seed in eight of the
//!   other rules, once or twice, every node crashes at the same instant (each disk as a
//!   crash leaves it) and all restart a little apart; the group comes back through a
//!   promotion from the records the logs gave back. Not while a log is poisoned (a second
//!   failure). Under `durable` every checker holds across it unchanged; under the rules that
//!   acknowledge from memory, the answers released before the latest power loss whose
//!   records did not survive it are exempt, and only those.
//!
//! Checkers, after every step that could break them:
//! - no acknowledged 2-safe commit is lost: when a backup takes over, and at the end, the
//!   primary's dedup table holds every client's last acknowledged call;
//! - never two nodes release replies as the primary of the same view;
//! - under `durable`, a reply leaves only once the primary's log and k backups' logs
//!   reported its record synced (a poisoned log reports nothing), and a restart's recovery
//!   gives back every record its log reported durable before the crash;
//! - no reply that needs the primary's lease (a 1-safe or bounded commit, a call with no
//!   commit of its own) leaves after a backup's promise to that primary ran out, nor after
//!   the primary of a newer view released a reply (a backup reports at once when it freezes;
//!   a promoted one releases nothing until its own promise ran out, so no answer of the new
//!   primary comes before an answer of the old one that could miss it);
//! - replicas at the same LSN hold identical bytes (a backup of the current view against the
//!   current primary's checksums, taken at some batch ends), and at the end every
//!   replica equals the primary;
//! - the data model's quick check (Debit-Credit's conservation; the Redis model has none)
//!   holds on every node after every batch it applies, and its whole check (the Redis
//!   model's: every allocator block owned once, the expiry index, the dedup table) at
//!   intervals and at the end;
//! - exactly-once: no (client id, seq) is committed twice into one node's records;
//! - every client call ends with a reply or a deadline error, and under a 2-safe rule a
//!   client's replies never go back in LSN (a 1-safe rule may lose released commits);
//! - on the Redis model, every acknowledged reply agrees with a plain model of the final
//!   history ([`crate::redis::Reference`]): at the end, the final primary's records are
//!   replayed on it in LSN order (each client call at the time it ran, each sweep), and every
//!   reply a client accepted is compared with it: a commit's with the reference's reply to
//!   that call at its LSN, a read's or a failed call's with the reference's answer on the
//!   state after every record up to the LSN the reply carries, at the time the call ran; then
//!   the final database with the reference's, key by key (type, value, expiry time). A reply
//!   from a history a failover discarded is not judged under a 1-safe or bounded rule (it may
//!   be lost by the rule's own terms) and fails the run under a 2-safe rule. What each LSN
//!   holds is kept beside each node's segment as a ghost ([`history`]): the records carry no
//!   time, and a state transfer carries no records, so the entries travel with the bytes
//!   (batches and transfers), and a rewind or reload drops them with the records.

use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Arc;
use std::time::Duration;

use tandem_client::route::{Action, Answered, CallRoute, Greeted, Report, Router, RouterConfig};
use tandem_client::{ErrorCode, ErrorFrame, ReplyStatus};
use tandem_cluster::{Cluster, ClusterMessage, ClusterSettings, GroupSettings};
use tandem_config::{ClusterMap, GroupId, MemDurable, NodeInfo, View, place_groups};
use tandem_memory::{Segment, Strategy};
use tandem_node::{
    Answer, AnswerKind, BackupWatch, Carried, CarryNote, Destination, DriveError, LogOrder, Needs,
    NodeEnv, NodeFailure, NodeSettings, Notice, PeerMessage, PrimaryStarting, Ran, ReadAnswer,
    ReadSettings, Records, RecordsMoved, Recovered, Refusal, RoleReady, RoleRule, Supervisor,
    WaitingCall, WaitingRead,
};
use tandem_proxy::{Answer as ProxyAnswer, ProxyConn, Unit};
use tandem_redis::RedisModel;
use tandem_redis::resp::{Argv, Proto};
use tandem_redis::wire::CallArgs;
use tandem_redo::{BatchKind, CallId, TailLimits};
use tandem_replication::{
    AckCount, ApplyBatch, LeaseMargins, Message, NodeId, PrimaryConfig, ReadConsistency, Safety,
    primary_lease_ticks,
};
use tandem_store::{Compiled, DataModel, Driver, ProcId, ProcKind, Rng};
use tandem_workloads::debit_credit::{DebitCredit, DebitCreditConfig};

use crate::MICROS_PER_TICK;
use crate::event::{EventQueue, Trace};
use crate::redis::{RedisCall, Workload};

mod checkers;
mod clients;
mod disk;
mod faults;
mod history;
mod node;
mod readers;

use history::{History, HistoryEntry};
use node::Member;

pub use faults::{ClusterFaults, Mix};

/// The first group's id: a run's groups are numbered from it, and every node serves in each.
const GROUP: GroupId = 1;
/// The group's view when the cluster is created.
const VIEW_FIRST: u64 = 1;
/// Debit-Credit's segment: small, so that a checksum and a consistency check can run after
/// every applied batch.
const DEBIT_CREDIT_SEGMENT_LEN: usize = 64 * 1024;
/// The Redis model's segment: the dedup table's heap, which keeps the replies too long for a
/// slot (`EXEC`'s arrays), is 1/1024 of it, and must hold every client's last such reply.
const REDIS_SEGMENT_LEN: usize = 2 << 20;
/// The Unix time (ms) the Redis model's primaries' clock starts at. Every node reads the
/// same clock, so that time never goes back along a history (the reference model relies on
/// it).
const CLOCK_BASE_MS: u64 = 1_700_000_000_000;
/// Milliseconds of that clock per tick: the expiry sweep, every 100 ms, runs every ten
/// ticks, some forty times in a run of the default 400.
const CLOCK_MS_PER_TICK: u64 = 10;
/// Clients are addressed as nodes from here on.
const CLIENT_BASE: NodeId = 1_000;
/// Readers (clients that read on backups) are addressed as nodes from here on.
const READER_BASE: NodeId = 2_000;
/// Readers per run.
const READERS: usize = 2;
/// How long a backup holds a read before it answers `Busy`: `tandem_node::READ_WAIT` is ten
/// of the runtime's heartbeats; here a heartbeat is a tick, and a round trip up to one.
const READ_WAIT_MICROS: u64 = 4 * MICROS_PER_TICK;
/// How long a backup's `ReadIndex` question may go unanswered before it asks again
/// (`tandem_node::READ_INDEX_RETRY`, scaled the same way).
const READ_INDEX_RETRY_MICROS: u64 = MICROS_PER_TICK;
/// How long a reader waits for an answer before it gives the read up.
const READER_TIMEOUT_MICROS: u64 = 6 * MICROS_PER_TICK;
/// Ticks the healed cluster has to converge in.
pub const LIVENESS_TICKS: u64 = 3_000;
const TRACE_LEN: usize = 100;
/// Checksums are taken at batch ends whose LSN is a multiple of this: a divergence persists,
/// so the checker keeps its teeth at a fraction of the cost.
const CHECKSUM_EVERY_LSN: u64 = 64;
/// The same for the Redis model, whose segment is 32 times larger: its checksums would
/// otherwise take a fifth of a seed's time.
const CHECKSUM_EVERY_LSN_REDIS: u64 = 256;
/// Conservation is checked after every batch a backup applies; the workload's whole check
/// (history, dedup table) when its applied LSN crosses a multiple of this, and on every
/// replica at the end: a transaction that breaks it leaves it broken.
const FULL_CHECK_EVERY_LSN: u64 = 16;
/// The same for the Redis model, whose whole check (every block of the allocator, the
/// expiry index, the dedup table) costs more, and whose quick check is none.
const FULL_CHECK_EVERY_LSN_REDIS: u64 = 64;

/// The `IncrementTwice` sabotage strikes the primary's tenth `INCR`.
const INCREMENT_TWICE_AT: u64 = 10;
/// The `AlterReply` sabotage strikes the twentieth reply with a digit in its body.
const ALTER_REPLY_AT: u64 = 20;

/// Mixed into a seed for the generator of connection resets.
const RESET_SEED: u64 = 0x7265_7365_7473;
/// Mixed into a seed for the generator of the disks' draws (which seeds run `durable`, how
/// long a sync takes, failed syncs, what a crash keeps of unsynced bytes).
const DISK_SEED: u64 = 0x6469_736b;
/// Mixed into a seed for the generator of power losses (whether a seed has them, when, and
/// when each node comes back).
const POWER_SEED: u64 = 0x0070_6f77_6572;

/// Mixed into a seed for the generator of how long a node's load of the initial database
/// takes.
const LOAD_SEED: u64 = 0x6c6f_6164;
/// The longest a load of the initial database takes, ticks (a node's load runs off its
/// thread, as the runtime's loader thread does: a tenth of a second for 50 MiB).
const LOAD_TICKS_MAX: u64 = 12;

/// The data model a run's nodes serve and its clients call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Model {
    /// TPC-B as in Vista (what every seed ran before the Redis model joined): conservation
    /// of money is the model's own check.
    #[default]
    DebitCredit,
    /// The Redis data model: a seeded mix of commands, `MULTI` … `EXEC` blocks and Lua
    /// scripts, every acknowledged reply checked against a plain model of the final history.
    Redis,
}

impl Model {
    /// The name `tandem sim --model` takes and its reports print.
    pub fn name(self) -> &'static str {
        match self {
            Model::DebitCredit => "debit-credit",
            Model::Redis => "redis",
        }
    }
}

/// How a seed runs, beyond its seed and ticks.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    pub mix: Mix,
    pub model: Model,
    pub sabotage: Option<ClusterSabotage>,
    /// The release checker stands aside (for tests): a planted bug it would catch as the
    /// reply leaves is left to the checkers behind it, which must catch it too once the
    /// record is lost (`durable-before-sync` across a power loss).
    pub release_unchecked: bool,
    /// The replication groups (0 counts as 1): group g's first primary is node
    /// (g − 1) mod n + 1, the clients and readers are dealt out over the groups in turn, and
    /// every checker holds per group.
    pub groups: u32,
    /// The members of each group, as [`place_groups`] places them: its primary and the
    /// nodes after it round the ring. 0 (or more than the seed's nodes): every node.
    pub members: u32,
}

/// What a run did and whether every checker held.
#[derive(Clone, Debug)]
pub struct ClusterReport {
    pub seed: u64,
    pub model: Model,
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
    /// Of those, retries whose reply was too long for the dedup table to keep: answered
    /// that they committed once, without the reply.
    pub replies_not_kept: u64,
    /// State transfers installed (a member the primary's retained tail no longer covered, or
    /// one that rejoined).
    pub transfers: u64,
    /// Members that kept their segment through a truncation and rejoined from it (rewound to
    /// the truncate LSN) instead of reloading the initial database.
    pub rejoins: u64,
    /// Promotions whose new primary held its replies back for the rest of the lease its node
    /// had granted the old primary.
    pub lease_waits: u64,
    /// Crashes in the middle of a save of the config store's state (counted in `crashes`).
    pub torn_saves: u64,
    /// Crashes of a node that held the only copy of acknowledged records (possible only with
    /// `crash_any_time`): a second failure the safety rules do not cover.
    pub sole_copy_crashes: u64,
    /// Crashes of a node serving as the primary of more than one group (every one of its
    /// groups fails over at once).
    pub several_primaries_crashes: u64,
    /// Reads backups served, and reads they did not (busy, not a backup, lost).
    pub reads_served: u64,
    pub reads_unserved: u64,
    /// Acknowledged replies compared with the reference model (the Redis model only).
    pub replies_checked: u64,
    /// Acknowledged replies from a history a failover rightly discarded (a 1-safe or
    /// bounded rule), which the reference cannot judge (the Redis model only).
    pub replies_discarded: u64,
    /// Expiry sweeps the primaries committed (the Redis model only).
    pub sweeps: u64,
    /// Syncs of the nodes' write-ahead logs, logs poisoned by a failed sync or cut, and
    /// restarts that rebuilt records from the log (`RoleRule::with_recovered`).
    pub log_syncs: u64,
    pub logs_poisoned: u64,
    pub log_replays: u64,
    /// Roles started from those records (a restarted node that followed a view from what
    /// its log gave back, kept or rewound, instead of reloading).
    pub recovered_followed: u64,
    /// Checkpoints the roles handed their logs whole, and restarts that installed one.
    pub checkpoints: u64,
    pub checkpoints_installed: u64,
    /// Power losses (every node crashed at once; each node's crash is counted in
    /// `crashes` too), and promotions of a restarted node from the records its log gave
    /// back (counted in `recovered_followed` too), which is how a group that lost power
    /// comes back.
    pub power_losses: u64,
    pub recovered_promoted: u64,
    /// Clients whose last acknowledged commit a power loss took under a rule that
    /// acknowledges from memory (exempt from the lost-commit checker; counted at the end).
    pub acks_lost_to_power: u64,
    /// The first checker that failed, with the tick it failed at.
    pub failure: Option<String>,
    /// The last events before the end (or the failure), oldest first.
    pub trace: Vec<String>,
}

/// A message on the wire.
#[derive(Clone, Debug)]
enum Wire {
    /// A `Peer` frame of `group`'s replication stream, as the runtime writes it to its
    /// socket (the group beside it is the one the frame names, for the link's epochs).
    Replication {
        group: GroupId,
        frame: Vec<u8>,
    },
    /// A `Cluster` frame between two cluster cores, as the runtime writes it to its socket.
    Cluster(Vec<u8>),
    /// A client opens connection `conn` to a node and greets it. Client messages carry the
    /// connection they travel on: a client that drops a connection (a timeout, "not
    /// primary") never hears what was in flight on it, as with TCP.
    Hello {
        conn: u64,
    },
    /// The node's answer to a `Hello`: whether it serves as its group's primary, in `view`.
    Welcome {
        conn: u64,
        primary: bool,
        view: u64,
    },
    Call {
        conn: u64,
        seq: u64,
        call: SimCall,
    },
    /// The call's outcome: the LSN of its commit (or of the latest commit a read or a
    /// rolled-back call saw), whether it committed, and the procedure's reply (its reason,
    /// rolled back).
    Reply {
        conn: u64,
        seq: u64,
        lsn: u64,
        status: ReplyStatus,
        body: Vec<u8>,
        /// Not on a real wire: what the simulator knows of how the answer came to be.
        witness: Witness,
    },
    /// The node is not the primary (an `Error` frame `NotPrimary`).
    NotPrimary {
        conn: u64,
    },
    /// The primary withheld the call's reply (its lease ran out before the reply could
    /// leave): an `Error` frame `Busy`, as the runtime answers a stub.
    Busy {
        conn: u64,
    },
    /// A reader's read-only call to a backup (a `Read` frame).
    Read {
        conn: u64,
        seq: u64,
        call: SimCall,
        min_lsn: u64,
        consistency: ReadConsistency,
    },
    /// A backup's answer to a `Read`: served at `lsn`, or not (`Busy`, not a backup).
    ReadAnswer {
        conn: u64,
        seq: u64,
        served_at: Option<u64>,
    },
    /// The sender's process died and its kernel closed the connection (a FIN or a reset):
    /// the receiver learns it as soon as the packet arrives, unless a partition drops it.
    Closed,
}

impl Wire {
    /// The frame of a replication message of `group`, encoded as the runtime encodes it.
    fn replication(group: GroupId, message: &Message) -> Wire {
        let mut bytes = Vec::new();
        tandem_node::encode_replication(&mut bytes, group, message);
        Wire::Replication {
            group,
            frame: bytes,
        }
    }

    /// The cluster message's frame, encoded as the runtime encodes it.
    fn cluster(message: &ClusterMessage) -> Wire {
        let mut bytes = Vec::new();
        tandem_node::encode_cluster_message(&mut bytes, message);
        Wire::Cluster(bytes)
    }
}

/// The message a peer frame carries, decoded as the runtime decodes it. Every frame was
/// encoded by a node here, so one that does not decode is a bug.
fn decode_peer(bytes: &[u8]) -> Result<PeerMessage, String> {
    tandem_node::decode_peer_message(bytes, tandem_wire::MAX_FRAME_LEN_DEFAULT).map_err(|err| {
        format!(
            "a peer frame of {} bytes does not decode: {err}",
            bytes.len()
        )
    })
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
    /// The sync under way on node `node`'s log of `group` completes, unless the node
    /// crashed since (`epoch`).
    LogSynced {
        node: NodeId,
        group: GroupId,
        epoch: u64,
    },
    /// The load of `group` node `node` started ends, unless it was finished or abandoned
    /// since (`epoch`).
    Loaded {
        node: NodeId,
        group: GroupId,
        epoch: u64,
    },
    /// Every node loses power at once (`World::power_loss`).
    PowerLoss,
    /// A client's next call.
    ClientNext {
        client: usize,
    },
    /// A reader's next read.
    ReaderNext {
        reader: usize,
    },
    /// A reader gives its read up, unless it moved on since (`epoch`).
    ReaderTimer {
        reader: usize,
        epoch: u64,
    },
    /// The time a client's router set for what it waits for (a greeting, an answer, the end
    /// of a pause) has come, unless the client moved on since (`epoch`).
    ClientTimer {
        client: usize,
        epoch: u64,
    },
}

/// Where an answer goes: a client by its index, on one of its connections; and what the
/// answer is about: when its call ran (the reply checker judges a read or a failed call at
/// that time), and whether it ran a read-only procedure (its answer carries the latest
/// commit's LSN, but no commit of its own).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ClientConn {
    client: usize,
    conn: u64,
    ran_at_ms: u64,
    reads: bool,
}

impl ClientConn {
    /// Where the answer of the primary's own periodic procedure (the expiry sweep) goes:
    /// nowhere, as the runtime's `ReplyTo::Periodic`.
    const PERIODIC: ClientConn = ClientConn {
        client: usize::MAX,
        conn: 0,
        ran_at_ms: 0,
        reads: false,
    };
}

/// What the simulator knows of how an answer came to be, for the reply checker: the time its
/// call ran, and the fingerprint of the releasing primary's history up to the LSN the
/// answer carries (an answer from a history that a failover discarded does not match the
/// final one's). Zero for Debit-Credit, whose replies are not checked.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Witness {
    ran_at_ms: u64,
    chain: u64,
    /// Power losses before the answer was released: one released before the latest may
    /// have been lost with the memory it lived in, under a rule that acknowledges from
    /// memory (set under both models).
    power_losses: u64,
}

/// A primary role as the simulator holds it: answers go to a client's connection.
type PrimaryHost = tandem_node::PrimaryHost<ClientConn>;

/// A backup role: answers to reads go to a reader's connection.
type BackupRole = tandem_node::BackupRole<(usize, u64)>;

/// What the checkers know of the records a node's role holds: the calls committed in them
/// (exactly-once) and, under the Redis model, their history LSN by LSN. It follows the
/// records from role to role as the carry-out hands them on; a node outside holds none.
#[derive(Clone, Debug)]
struct Ledger {
    calls: CallsHeld,
    history: History,
}

impl Ledger {
    /// The ledger of records whose calls the checkers have not seen (a load, a rewind).
    fn of(history: History) -> Ledger {
        Ledger {
            calls: CallsHeld::default(),
            history,
        }
    }

    /// The ledger of a node that holds no records.
    fn none() -> Ledger {
        Ledger::of(History::new(0))
    }
}

impl SimNode {
    /// Node `id` of a fresh cluster of `ids` from `initial`, with `faults`' timings (its
    /// election timer jittered by `jitter_seed`), and its supervisor, for its member.
    fn first(
        id: NodeId,
        ids: &[NodeId],
        faults: &ClusterFaults,
        initial: &ClusterMap,
        jitter_seed: u64,
        lsn_loaded: u64,
    ) -> (SimNode, Supervisor) {
        let all: Vec<GroupId> = initial.groups.keys().copied().collect();
        // The groups whose first view names it: the node serves in those alone.
        let groups: Vec<GroupId> = (initial.groups.iter())
            .filter(|(_, view)| view.members().any(|member| member == id))
            .map(|(&group, _)| group)
            .collect();
        let rule = |id| GroupSettings {
            id,
            safety: faults.safety,
        };
        let settings = ClusterSettings {
            node: id,
            groups: groups.iter().copied().map(rule).collect(),
            // The rest it coordinates while it leads the config store.
            coordinated: (all.iter().copied())
                .filter(|group| !groups.contains(group))
                .map(rule)
                .collect(),
            voters: ids.iter().copied().take(3).collect(),
            suspect_ticks: faults.suspect_ticks,
            lease_ticks: faults.suspect_ticks - 2,
            collect_ticks: 4,
            election_ticks: faults.election_ticks,
            raft_heartbeat_ticks: 2,
            jitter_seed,
            // A simulated executor runs every call at once; the watch still runs.
            executor_stall_ticks: Some(faults.suspect_ticks),
            // A simulated call takes no time: none is long.
            long_call_ticks: u64::MAX,
            view_fixed: false,
        };
        let core =
            Cluster::new(settings.clone(), initial.clone(), None).expect("a fresh node starts");
        let rules = (groups.iter())
            .map(|&group| (group, RoleRule::new(id, VIEW_FIRST, false)))
            .collect();
        let supervisor = Supervisor::new(core, rules);
        let node = SimNode {
            id,
            planes: all.iter().map(|_| SimPlane::new(lsn_loaded)).collect(),
            settings,
            node: None,
            disk: MemDurable::new(),
            incarnation: 0,
            ticks_missed: 0,
            tear_next_save: false,
            outside: Slot::Outside,
        };
        (node, supervisor)
    }

    /// The node's cluster core, if it is up.
    fn core(&self) -> Option<&Cluster> {
        self.node.as_ref().map(Member::core)
    }

    /// The node's supervisor, if it is up.
    fn supervisor(&self) -> Option<&Supervisor> {
        self.node.as_ref().map(Member::supervisor)
    }

    /// The role the node holds in `group` (outside while it is down, and in a group it does
    /// not serve in).
    fn role(&self, group: GroupId) -> &Slot {
        (self.node.as_ref())
            .filter(|member| member.serves_in(group))
            .map_or(&self.outside, |member| member.role(group))
    }

    /// Whether the node serves in `group`.
    fn serves_in(&self, group: GroupId) -> bool {
        self.settings.groups.iter().any(|served| served.id == group)
    }

    fn plane(&self, group: GroupId) -> &SimPlane {
        &self.planes[group_index(group)]
    }

    fn plane_mut(&mut self, group: GroupId) -> &mut SimPlane {
        &mut self.planes[group_index(group)]
    }
}

/// How the simulated backups serve reads.
fn read_settings() -> ReadSettings {
    ReadSettings {
        reply_len_max: usize::MAX,
        index_retry_us: READ_INDEX_RETRY_MICROS,
    }
}

/// The role a node holds.
type Slot = tandem_node::RoleSlot<ClientConn, node::ReaderConn>;

struct SimNode {
    id: NodeId,
    settings: ClusterSettings,
    /// The node's member (its supervisor and roles); None while crashed, and while it
    /// handles an input.
    node: Option<Member>,
    disk: MemDurable,
    /// The node's part in each group, by group index (see [`group_index`]).
    planes: Vec<SimPlane>,
    incarnation: u64,
    /// Ticks that passed while the node was paused. A primary's data plane counts them when it
    /// resumes, before it does anything else, as the runtime's primary replays missed ticks:
    /// its lease is measured against the clock, and a pause does not stop the clock.
    ticks_missed: u64,
    /// The node crashes in the middle of its next save of the config store's state: the
    /// save tears, and the disk keeps the state saved before (the file store's torn slot is
    /// refused by its checksum and the other slot read).
    tear_next_save: bool,
    /// The role of a node that is down.
    outside: Slot,
}

/// A node's part in one group: its log, the records it recovered, what the checkers know of
/// its role's records, and its role's epochs.
struct SimPlane {
    /// The group's write-ahead log on a simulated disk of its own, which outlives the node's
    /// crashes as its config store's disk does.
    log: disk::NodeLog,
    /// The segment rebuilt from the log at a restart (with its ghost history), until the
    /// restarted member takes it.
    recovered: Option<(Segment, History)>,
    /// The ghost history of the records the member recovered, until a role follows the next
    /// view from them (`RoleRule::with_recovered`); never taken by a role that starts from
    /// the initial load.
    recovered_history: Option<History>,
    /// What the checkers know of the records the group's role holds.
    ledger: Ledger,
    /// Bumped with every role the node starts in the group: its replication links are new
    /// connections.
    role_epoch: u64,
    /// Bumped by every load the node starts, finishes at once or loses in a crash: a load
    /// event of an older epoch is void.
    load_epoch: u64,
}

impl SimPlane {
    fn new(lsn_loaded: u64) -> SimPlane {
        SimPlane {
            log: disk::NodeLog::open_new(lsn_loaded),
            recovered: None,
            recovered_history: None,
            ledger: Ledger::none(),
            role_epoch: 0,
            load_epoch: 0,
        }
    }
}

/// A simulated client: a closed loop of calls of the run's model, routed by the stub's own
/// [`Router`] (the same decisions `tandem_client::Client` makes over TCP).
struct Client {
    /// The group whose primary it calls.
    group: GroupId,
    calls: ClientCalls,
    router: Router,
    seq: u64,
    /// The call in flight: its route and its args.
    call: Option<(CallRoute, SimCall)>,
    /// The client's latest connection; messages on an older one are void.
    conn: u64,
    waiting: Waiting,
    /// Bumped whenever what the client waits for changes: a timer of an older epoch is void.
    epoch: u64,
    /// The LSN of its last answer, and the power losses before that answer was released.
    lsn_last: u64,
    power_losses_last: u64,
}

/// Where a client's calls come from.
enum ClientCalls {
    /// The model's own driver (Debit-Credit's).
    Driver(Box<dyn Driver>),
    Redis(Box<RedisClient>),
}

/// A client of the Redis model: its workload, what it sent, and what it was answered. It is
/// an application behind `tandem proxy`: it writes pipelines of RESP requests into a proxy
/// connection, whose units are its calls, and reads the replies the proxy writes back.
struct RedisClient {
    workload: Workload,
    proxy: ProxyConn,
    /// The unit whose call is in flight.
    unit: Option<Unit>,
    /// Requests written into the proxy connection, and replies read back from it: equal
    /// whenever the connection has nothing left to send.
    requests: u64,
    replies: u64,
    /// The data commands written and not yet sent in a unit, in order (a pipeline rolled back
    /// whole comes back here, since the proxy sends its commands again): each unit must carry
    /// the next ones, so no command the application was answered for is sent twice.
    unsent: VecDeque<Vec<Vec<u8>>>,
    /// The call of each seq, from seq 1 on.
    sent: Vec<RedisCall>,
    /// The answers its router accepted, in order.
    acked: Vec<AckedReply>,
}

/// An answer a client accepted, for the reply checker.
#[derive(Clone, Debug)]
struct AckedReply {
    seq: u64,
    lsn: u64,
    status: ReplyStatus,
    body: Vec<u8>,
    witness: Witness,
}

/// A call as a client sends it: the procedure its driver chose, and the arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SimCall {
    proc_id: ProcId,
    args: Vec<u8>,
}

/// What a client waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Waiting {
    Nothing,
    /// The greeting of node `index` (0-based), on the client's latest connection.
    Greeting {
        index: usize,
    },
    /// The primary's answer, on the client's latest connection.
    Answer,
    /// The end of a pause.
    Pause,
}

/// A reader: a closed loop of read-only calls, each to the next node in turn, as a stub's
/// `read` sends them to a backup; it gives up a read nobody serves and never retries it on
/// the primary (the writers' calls cover the primary).
struct Reader {
    /// The group whose backups it reads on.
    group: GroupId,
    seq: u64,
    conn: u64,
    /// The next node to ask, as an index.
    node_next: usize,
    /// The highest LSN its reads were served at: its `min_lsn`.
    lsn_seen: u64,
    /// Bumped whenever it moves on: a timer of an older epoch is void.
    epoch: u64,
    in_flight: Option<ReadSent>,
}

/// A read on its way, with what the checker judges its answer by.
#[derive(Clone, Copy, Debug)]
struct ReadSent {
    seq: u64,
    conn: u64,
    min_lsn: u64,
    consistency: ReadConsistency,
    /// The highest LSN any client had been answered with when the read was sent.
    lsn_acked_before: u64,
    /// Power losses before it was sent (it was served before the next one, if at all: a
    /// restarted node never hears its old connections).
    power_losses: u64,
}

struct World {
    rng: Rng,
    /// The generator of connection resets alone, so that seeds without them run as before.
    reset_rng: Rng,
    /// The generator of the disks' draws alone.
    disk_rng: Rng,
    /// The generator of power losses alone, so that seeds without them run as before.
    power_rng: Rng,
    load_rng: Rng,
    faults: ClusterFaults,
    now: u64,
    queue: EventQueue<Event>,
    /// The data model every node serves (each role gets a replica of it).
    model: Arc<dyn DataModel>,
    /// Its segments' length.
    segment_len: usize,
    /// The current primary's bytes are checksummed at batch ends whose LSN is a multiple
    /// of this.
    checksum_every_lsn: u64,
    /// A backup runs the model's whole check when its applied LSN crosses a multiple of this.
    full_check_every_lsn: u64,
    initial: ClusterMap,
    lsn_loaded: u64,
    nodes: Vec<SimNode>,
    /// What the checkers follow of each group, by group index (see [`group_index`]).
    groups: Vec<GroupSim>,
    clients: Vec<Client>,
    readers: Vec<Reader>,
    period: BTreeMap<NodeId, u64>,
    paused_until: BTreeMap<NodeId, u64>,
    cut_until: BTreeMap<(NodeId, NodeId), u64>,
    /// The latest delivery time scheduled on each directed link: what keeps links FIFO.
    link_last: BTreeMap<(NodeId, NodeId), u64>,
    faults_on: bool,
    /// When each node's next tick event fires (paused or not).
    tick_next_at: BTreeMap<NodeId, u64>,
    sabotage: Option<ClusterSabotage>,
    /// See `RunOptions::release_unchecked`.
    release_unchecked: bool,
    /// Batches sent to node 2 so far (for the sabotage).
    batches_to_2: u64,
    report: ClusterReport,
    trace: Trace,
}

/// What the checkers follow of one group: its views, who released what, what its clients
/// were acknowledged, what its backups held and synced.
struct GroupSim {
    id: GroupId,
    /// The newest view of the group any node applied.
    view_latest: View,
    /// The node that released replies as the primary of each view, and when it first did.
    released_by: BTreeMap<u64, (NodeId, u64)>,
    /// (backup, primary) → the time before which the backup cannot report for a new view,
    /// by the lease it promised when it last heard that primary: its report waits until its
    /// tick count is `lease_ticks` past the count when it heard, which its next tick raises
    /// by one (a pause only delays that).
    promise_end: BTreeMap<(NodeId, NodeId), u64>,
    /// Each client's last acknowledged commit.
    acked: BTreeMap<usize, Acked>,
    /// The highest LSN any client was answered with (a commit, a read): a linearizable read
    /// sent after that answer must reflect it.
    lsn_answered_max: u64,
    /// The highest LSN that k backups of the newest view really held at once under a 2-safe
    /// rule of k acks: a reply for it may have been released, and no node can tell, so the
    /// view change keeps it like an acknowledged record. A crash that takes its only copy
    /// may leave the group down by the rules' own terms (any-time seed 101179: nothing was
    /// released, but the one backup of two that held a record became primary and died with
    /// it, and the other backup may not take over without it).
    lsn_releasable_max: u64,
    /// A crash took the only copy of acknowledged records: they may be lost, and the group
    /// may never serve again, by the rules' own terms.
    sole_copy_lost: bool,
    /// (backup, primary) → the highest LSN the backup ever received and applied while it
    /// followed that primary's current role: what its acks to it could truthfully claim.
    received_ever: BTreeMap<(NodeId, NodeId), (u64, u64)>,
    /// (node, primary) → the highest LSN node's write-ahead log reported synced (the
    /// durable LSN its role was told) while it followed that primary's current role, or,
    /// for (primary, primary), while it served: what a `durable` release may count on.
    synced_ever: BTreeMap<(NodeId, NodeId), u64>,
    /// The current primary's checksum at sealed batch ends (LSN → CRC32C).
    checksums: BTreeMap<u64, u32>,
    /// What a run of the Redis model keeps for its reply checker; `None` for Debit-Credit.
    redis: Option<Box<RedisRun>>,
}

impl GroupSim {
    /// Group `id`, from its first view `view`.
    fn new(id: GroupId, view: View, redis: Option<Box<RedisRun>>) -> GroupSim {
        GroupSim {
            id,
            view_latest: view,
            released_by: BTreeMap::new(),
            promise_end: BTreeMap::new(),
            acked: BTreeMap::new(),
            lsn_answered_max: 0,
            lsn_releasable_max: 0,
            sole_copy_lost: false,
            received_ever: BTreeMap::new(),
            synced_ever: BTreeMap::new(),
            checksums: BTreeMap::new(),
            redis,
        }
    }
}

/// A client's last acknowledged commit, for the lost-commit checker.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Acked {
    seq: u64,
    lsn: u64,
    /// Power losses before its reply was released (see `World::acked_kept`).
    power_losses: u64,
}

/// What a run of the Redis model keeps beside the world for its reply checker.
struct RedisRun {
    /// The entries of every batch a primary sent, by the batch's (view, first LSN,
    /// checksum): a backup that applies it takes them into its history.
    batches: BTreeMap<(u64, u64, u32), Vec<HistoryEntry>>,
    /// The history of every state transfer a primary sent, by its view, its LSN and the
    /// checksum of the segment it was copied from: a member that installs it (and then holds
    /// the same bytes) takes it as its history. The view tells apart two primaries that held
    /// the same bytes at the same LSN by different histories (a retried call run again at
    /// another time: Redis seed 1229989 at `k-of-n`).
    transfers: BTreeMap<(u64, u64, u32), History>,
    /// How often the primary runs the model's periodic procedure, ms.
    periodic_interval_ms: u64,
    /// Replies sent to clients so far, and INCRs run so far (for the sabotages).
    replies_sent: u64,
    increments_run: u64,
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
    /// (Redis model.) The twentieth reply sent to a client with a digit in its body has that
    /// digit changed on the way: the client is told something the primary's history does
    /// not say. The reply checker must see it.
    AlterReply,
    /// (Redis model.) The primary runs the tenth `INCR` it is sent as `INCRBY 2`: a call
    /// applied twice within one record, which no dedup table and no exactly-once checker can
    /// see. The reply checker must see it.
    IncrementTwice,
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
    let options = RunOptions {
        mix,
        model: Model::DebitCredit,
        sabotage,
        release_unchecked: false,
        groups: 1,
        members: 0,
    };
    run_cluster_with(seed, ticks, options)
}

/// Runs seed `seed` as `options` say: its fault rates drawn from their mix, its nodes
/// serving their model, their sabotage done along the way.
pub fn run_cluster_with(seed: u64, ticks: u64, options: RunOptions) -> ClusterReport {
    let mut world = World::new(seed, options);
    world.sabotage = options.sabotage;
    world.release_unchecked = options.release_unchecked;
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
    world.report.views = (world.groups.iter())
        .map(|group| group.view_latest.number)
        .sum();
    world.report.ticks = world.now / MICROS_PER_TICK;
    world.report.commits = (world.groups.iter())
        .map(|group| world.commits(group))
        .sum();
    world.report
}

impl World {
    fn new(seed: u64, options: RunOptions) -> World {
        let (mix, model_kind, groups) = (options.mix, options.model, options.groups.max(1));
        let mut rng = Rng::new(seed);
        let mut faults = ClusterFaults::draw(&mut rng, mix);
        let mut reset_rng = Rng::new(seed ^ RESET_SEED);
        faults.draw_resets(&mut reset_rng);
        let mut disk_rng = Rng::new(seed ^ DISK_SEED);
        faults.draw_disks(&mut disk_rng);
        let mut power_rng = Rng::new(seed ^ POWER_SEED);
        faults.draw_power(&mut power_rng);
        let (model, segment_len) = sim_model(model_kind);
        let model: Arc<dyn DataModel> = Arc::from(model);
        let redis = || {
            (model_kind == Model::Redis).then(|| {
                let (_, interval_ms) = model.periodic().expect("the Redis model sweeps");
                Box::new(RedisRun::new(interval_ms))
            })
        };
        let lsn_loaded = loaded(&*model, segment_len).lsn();
        let ids: Vec<NodeId> = (1..=faults.nodes as NodeId).collect();
        let members = match options.members as usize {
            0 => ids.len(),
            members => members.min(ids.len()),
        };
        let initial = initial_map(&ids, groups, members);
        let group_sims = (initial.groups.iter())
            .map(|(&group, view)| GroupSim::new(group, view.clone(), redis()))
            .collect();
        let (nodes, supervisors): (Vec<SimNode>, Vec<Supervisor>) = ids
            .iter()
            .map(|&id| {
                let jitter_seed = rng.next_u64();
                SimNode::first(id, &ids, &faults, &initial, jitter_seed, lsn_loaded)
            })
            .unzip();
        let router_config = RouterConfig {
            nodes: ids.iter().map(|id| format!("sim:{id}")).collect(),
            attempt_timeout: Duration::from_micros(faults.retry_after),
            // A short pause, about half a tick, between rounds of greetings and after `Busy`.
            retry_backoff: Duration::from_micros(MICROS_PER_TICK / 2),
            deadline: Duration::from_micros(faults.deadline),
        };
        let clients = (0..faults.clients)
            .map(|index| {
                Client::new(
                    model_kind,
                    &*model,
                    seed ^ (0x9e37 + index as u64),
                    (index, dealt(index, groups)),
                    &router_config,
                )
            })
            .collect();
        let mut period = BTreeMap::new();
        for &id in &ids {
            let drift = rng.below(2 * faults.drift_max + 1);
            period.insert(id, MICROS_PER_TICK - faults.drift_max + drift);
        }
        let mut world = World {
            rng,
            reset_rng,
            disk_rng,
            power_rng,
            load_rng: Rng::new(seed ^ LOAD_SEED),
            now: 0,
            queue: EventQueue::new(),
            model,
            segment_len,
            checksum_every_lsn: match model_kind {
                Model::DebitCredit => CHECKSUM_EVERY_LSN,
                Model::Redis => CHECKSUM_EVERY_LSN_REDIS,
            },
            full_check_every_lsn: match model_kind {
                Model::DebitCredit => FULL_CHECK_EVERY_LSN,
                Model::Redis => FULL_CHECK_EVERY_LSN_REDIS,
            },
            initial,
            lsn_loaded,
            nodes,
            groups: group_sims,
            clients,
            readers: (0..READERS)
                .map(|index| Reader::new(index, dealt(index, groups)))
                .collect(),
            period,
            paused_until: BTreeMap::new(),
            cut_until: BTreeMap::new(),
            link_last: BTreeMap::new(),
            faults_on: true,
            tick_next_at: BTreeMap::new(),
            sabotage: None,
            release_unchecked: false,
            batches_to_2: 0,
            report: ClusterReport::empty(seed, model_kind, faults.clone()),
            faults,
            trace: Trace::new(TRACE_LEN),
        };
        world.start(supervisors, &ids);
        world
    }

    /// Starts the nodes `ids` with `supervisors`: their members, and their first events.
    fn start(&mut self, supervisors: Vec<Supervisor>, ids: &[NodeId]) {
        for supervisor in supervisors {
            let member = self.member(supervisor, Vec::new());
            let index = index_of(member.id());
            self.nodes[index].node = Some(member);
        }
        self.schedule_first_events(ids);
    }

    /// Each node's first tick, each client's first call and each reader's first read, within
    /// the first tick.
    fn schedule_first_events(&mut self, ids: &[NodeId]) {
        for &id in ids {
            let first = self.rng.below(MICROS_PER_TICK);
            self.schedule(first, Event::Tick { node: id });
            self.tick_next_at.insert(id, first);
        }
        for client in 0..self.clients.len() {
            let first = self.rng.below(MICROS_PER_TICK);
            self.schedule(first, Event::ClientNext { client });
        }
        for reader in 0..self.readers.len() {
            let first = self.rng.below(MICROS_PER_TICK);
            self.schedule(first, Event::ReaderNext { reader });
        }
    }

    fn group(&self, group: GroupId) -> &GroupSim {
        &self.groups[group_index(group)]
    }

    fn group_mut(&mut self, group: GroupId) -> &mut GroupSim {
        &mut self.groups[group_index(group)]
    }

    /// The ids of the groups every node serves in.
    fn group_ids(&self) -> Vec<GroupId> {
        self.groups.iter().map(|group| group.id).collect()
    }

    /// Whether the nodes serve the Redis model.
    fn redis_model(&self) -> bool {
        self.report.model == Model::Redis
    }

    /// Records `group`'s newest primary holds past the loaded database.
    fn commits(&self, group: &GroupSim) -> u64 {
        let view = group.view_latest.number;
        (self.nodes.iter())
            .find_map(|node| match node.role(group.id) {
                Slot::Primary(role) if role.primary().view() == view => {
                    Some(role.role().store().segment().lsn() - self.lsn_loaded)
                }
                _ => None,
            })
            .unwrap_or(0)
    }

    /// The primaries' clock now, Unix ms (what the Redis model's expiry measures against).
    fn clock_ms(&self) -> u64 {
        CLOCK_BASE_MS + self.now * CLOCK_MS_PER_TICK / MICROS_PER_TICK
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
        let liveness_end = safety_end + LIVENESS_TICKS * MICROS_PER_TICK;
        // Power losses strike in the middle three quarters of the fault period: the cluster
        // has served a while before, and has time to come back before the faults heal.
        for _ in 0..self.faults.power_losses {
            let at = safety_end / 8 + self.power_rng.below((safety_end * 3 / 4).max(1));
            self.schedule(at, Event::PowerLoss);
        }
        while let Some((at, event)) = self.queue.pop() {
            self.now = at;
            if self.faults_on && self.now >= safety_end {
                self.heal();
            }
            if !self.faults_on && self.converged() {
                return self.final_checks();
            }
            if self.now > liveness_end {
                if self.groups.iter().any(|group| group.sole_copy_lost) {
                    // No node may hold what was acknowledged: waiting for good is right.
                    self.note("no convergence after the only copy was lost".into());
                    return Ok(());
                }
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

    fn heal(&mut self) {
        self.faults_on = false;
        self.cut_until.clear();
        self.paused_until.clear();
        self.note("heal: faults off".into());
        for index in 0..self.nodes.len() {
            if self.nodes[index].node.is_none() {
                let node = self.nodes[index].id;
                self.schedule(0, Event::Restart { node });
            }
        }
    }

    fn handle(&mut self, event: Event) -> Result<(), String> {
        match event {
            Event::Tick { node } => {
                let period = self.period[&node];
                self.schedule(period, Event::Tick { node });
                self.tick_next_at.insert(node, self.now + period);
                if self.nodes[index_of(node)].node.is_none() {
                    return Ok(());
                }
                if self.paused(node) {
                    self.nodes[index_of(node)].ticks_missed += 1;
                    return Ok(());
                }
                if self.faults_on {
                    self.note_releasable();
                    self.maybe_fault(node);
                    if self.nodes[index_of(node)].node.is_none() {
                        return Ok(());
                    }
                }
                if self.poisoned_restart_due(node) {
                    self.note(format!(
                        "node {node}'s operator restarts it: its log is poisoned"
                    ));
                    self.crash_and_restart(node);
                    return Ok(());
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
                if self.nodes[index_of(node)].node.is_none() {
                    self.restart(node)?;
                }
                Ok(())
            }
            Event::LogSynced { node, group, epoch } => self.log_synced(node, group, epoch),
            Event::Loaded { node, group, epoch } => self.loaded(node, group, epoch),
            Event::PowerLoss => {
                self.power_loss();
                Ok(())
            }
            Event::ClientNext { client } => self.client_next(client),
            Event::ClientTimer { client, epoch } => {
                self.client_timer(client, epoch);
                Ok(())
            }
            Event::ReaderNext { reader } => {
                self.reader_next(reader);
                Ok(())
            }
            Event::ReaderTimer { reader, epoch } => {
                self.reader_timer(reader, epoch);
                Ok(())
            }
        }
    }
}

/// The cluster map a run starts from: nodes `ids` serving in `groups` groups of `members`
/// placed by [`place_groups`]: group g's first view is led by node (g − 1) mod n + 1, its
/// backups the nodes after it round the ring.
fn initial_map(ids: &[NodeId], groups: u32, members: usize) -> ClusterMap {
    let mut initial = ClusterMap::default();
    for &id in ids {
        let address = format!("sim:{id}");
        initial.nodes.insert(id, NodeInfo { id, address });
    }
    let group_ids: Vec<GroupId> = (GROUP..).take(groups as usize).collect();
    initial.groups = place_groups(ids, &group_ids, members).expect("members ≤ nodes");
    assert!(
        initial
            .groups
            .values()
            .all(|view| view.number == VIEW_FIRST)
    );
    initial
}

/// The group the `index`th client or reader calls: they are dealt out over the groups in
/// turn.
fn dealt(index: usize, groups: u32) -> GroupId {
    GROUP + (index % groups as usize) as GroupId
}

impl RedisRun {
    /// The Redis model's run, its expiry sweep every `periodic_interval_ms`.
    fn new(periodic_interval_ms: u64) -> RedisRun {
        RedisRun {
            batches: BTreeMap::new(),
            transfers: BTreeMap::new(),
            periodic_interval_ms,
            replies_sent: 0,
            increments_run: 0,
        }
    }
}

/// The data model the simulated nodes serve, and its segment's length.
fn sim_model(model_kind: Model) -> (Box<dyn DataModel>, usize) {
    match model_kind {
        Model::DebitCredit => {
            let config = DebitCreditConfig {
                tellers_per_branch: 4,
                accounts_per_branch: 100,
                history_bytes: 2048,
                overdraft_limit: Some(2_000_000),
            };
            let model = DebitCredit::new(DEBIT_CREDIT_SEGMENT_LEN, &config).expect("fits");
            (Compiled::boxed(model), DEBIT_CREDIT_SEGMENT_LEN)
        }
        Model::Redis => {
            let mut model = RedisModel::new(REDIS_SEGMENT_LEN).expect("fits");
            // Every node's model is a replica of this one, and shares its watch.
            model.watch_calls(crate::redis::workload::script_watch());
            (Box::new(model), REDIS_SEGMENT_LEN)
        }
    }
}

impl ClusterReport {
    /// The report of a run of `seed` that has not started.
    fn empty(seed: u64, model: Model, faults: ClusterFaults) -> ClusterReport {
        ClusterReport {
            seed,
            model,
            faults,
            calls: 0,
            replies: 0,
            deadline_errors: 0,
            commits: 0,
            crashes: 0,
            views: 1,
            ticks: 0,
            events: 0,
            duplicates_answered: 0,
            replies_not_kept: 0,
            transfers: 0,
            rejoins: 0,
            lease_waits: 0,
            torn_saves: 0,
            sole_copy_crashes: 0,
            several_primaries_crashes: 0,
            reads_served: 0,
            reads_unserved: 0,
            replies_checked: 0,
            replies_discarded: 0,
            sweeps: 0,
            log_syncs: 0,
            logs_poisoned: 0,
            log_replays: 0,
            recovered_followed: 0,
            power_losses: 0,
            recovered_promoted: 0,
            checkpoints: 0,
            checkpoints_installed: 0,
            acks_lost_to_power: 0,
            failure: None,
            trace: Vec::new(),
        }
    }
}

impl Client {
    /// Client `index` of a run, calling `model` in `group` (drawn from `seed`) through a
    /// router of `router_config`.
    fn new(
        model_kind: Model,
        model: &dyn DataModel,
        seed: u64,
        (index, group): (usize, GroupId),
        router_config: &RouterConfig,
    ) -> Client {
        Client {
            group,
            calls: match model_kind {
                Model::DebitCredit => ClientCalls::Driver(
                    model
                        .driver(seed)
                        .expect("the simulated model generates calls"),
                ),
                Model::Redis => ClientCalls::Redis(Box::new(RedisClient {
                    workload: Workload::new(seed),
                    proxy: ProxyConn::new(index as u64 + 1),
                    unit: None,
                    requests: 0,
                    replies: 0,
                    unsent: VecDeque::new(),
                    sent: Vec::new(),
                    acked: Vec::new(),
                })),
            },
            router: Router::new(router_config.clone()),
            seq: 0,
            call: None,
            conn: 0,
            waiting: Waiting::Nothing,
            epoch: 0,
            lsn_last: 0,
            power_losses_last: 0,
        }
    }
}

impl Reader {
    /// Reader `index` of `group`, which starts at node `index`'s turn in the round of
    /// backups.
    fn new(index: usize, group: GroupId) -> Reader {
        Reader {
            group,
            seq: 0,
            conn: 0,
            node_next: index,
            lsn_seen: 0,
            epoch: 0,
            in_flight: None,
        }
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
    /// The calls `segment`'s records hold as far as its dedup table tells: each client's last
    /// committed seq. For records rebuilt from a log, whose calls were never seen applied: a
    /// retry after the restart must be answered from that table, not run again.
    fn from_dedup(segment: &Segment, clients: usize) -> CallsHeld {
        let dedup = tandem_store::DedupTable::for_segment_len(segment.len());
        let seq_last = (0..clients)
            .map(|client| {
                dedup
                    .entry(segment, client_id(client))
                    .map_or(0, |entry| entry.seq())
            })
            .collect();
        CallsHeld { seq_last }
    }

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
    safety.backup_acks().is_some()
}

fn index_of(node: NodeId) -> usize {
    (node - 1) as usize
}

/// Where `group`'s part is kept in a list of every group's.
fn group_index(group: GroupId) -> usize {
    (group - GROUP) as usize
}

fn client_id(client: usize) -> u64 {
    u64::from(CLIENT_BASE) + client as u64
}

/// A segment with the initial database: every node loads the same one.
fn loaded(model: &dyn DataModel, segment_len: usize) -> Segment {
    let mut segment = Segment::anonymous(segment_len, Strategy::V3InlineLog).expect("map");
    model.load(&mut segment);
    segment
}

/// The procedure of the Redis command `name`.
fn command_proc_of(name: &[u8]) -> ProcId {
    let (index, _) = tandem_redis::cmd::lookup(name).expect("a command of the table");
    tandem_redis::model::command_proc(index)
}

/// A sealed batch's identity (its view, first LSN and checksum: a primary seals each batch
/// once, and the checksum tells a forged one apart), its first and its last LSN. Read from
/// the header as `tandem_redo::batch` lays it out, without checking the checksum again: the
/// primary sealed it, and a receiver checks it before anything is applied.
fn batch_key(bytes: &[u8]) -> ((u64, u64, u32), u64, u64) {
    let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("a header"));
    let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("a header"));
    let (view, lsn_base, records, crc) = (word(8), word(16), half(24), half(32));
    assert!(records > 0, "a sealed batch holds records");
    let lsn_last = lsn_base + u64::from(records) - 1;
    ((view, lsn_base, crc), lsn_base, lsn_last)
}
