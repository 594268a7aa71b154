//! [`ConfigCore`]: one node's member of the config store, a raft-rs `RawNode` driven without
//! I/O. The caller ticks it, feeds it the bytes other members sent, proposes commands, and
//! calls [`ConfigCore::ready`] to persist, collect messages and learn what was applied.

use std::collections::BTreeSet;
use std::fmt;
use std::io;

use protobuf::Message as _;
use raft::prelude::*;
use raft::{RawNode, SnapshotStatus, StateRole};

use crate::jitter::SplitMix64;
use crate::map::{
    ClusterMap, Command, MapError, NodeId, Rejection, decode_command, decode_map, encode_command,
};
use crate::persist::{Durable, Persisted, PersistedEntry};
use crate::storage::LogStore;

/// The log is compacted into a snapshot of the map every this many applied entries, which
/// bounds the persisted state (and every save) to about this many entries plus the map.
pub const SNAPSHOT_INTERVAL_ENTRIES: u64 = 64;

/// Raft's per-message and uncommitted-log bounds. A command is a view of a few node ids (tens
/// of bytes); these only stop a runaway proposer.
const MSG_SIZE_MAX: u64 = 1 << 20;
const UNCOMMITTED_SIZE_MAX: u64 = 1 << 20;
const INFLIGHT_MSGS_MAX: usize = 64;

/// How a member is set up. Times are in ticks.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConfigSettings {
    /// This node; it must be a voter, or a node of the initial map (it then follows the log as
    /// a Raft learner, without a vote).
    pub id: NodeId,
    /// The Raft voters, identical on every node and fixed for the cluster's life (membership
    /// changes are not supported yet). See [`default_voters`].
    pub voters: Vec<NodeId>,
    /// A follower that hears no leader for `election_ticks + d` ticks, `d` drawn uniformly in
    /// `[0, election_ticks)` for each countdown, starts an election (see `jitter.rs`). A
    /// leader that has not heard from a quorum for `election_ticks` steps down.
    pub election_ticks: usize,
    /// A leader with nothing to append sends heartbeats every `heartbeat_ticks`.
    pub heartbeat_ticks: usize,
    /// Seed of the election jitter; the whole cluster may share one (the node id is mixed in).
    pub jitter_seed: u64,
}

impl ConfigSettings {
    /// With the runtime's tick of 1 ms: heartbeats every 5 ms, elections after 50–99 ms of
    /// silence. Why not faster: every vote and append is fsynced before it is answered (a few
    /// ms, more under load on 2 cores), and a spurious election stalls view changes for a
    /// round. Why that is enough: the cluster core keeps Raft leadership off the group's
    /// primary, so a primary's failure needs one Raft commit, not an election; only the loss
    /// of the Raft leader itself adds an election (~50–100 ms) to a view change.
    pub const ELECTION_TICKS_DEFAULT: usize = 50;
    pub const HEARTBEAT_TICKS_DEFAULT: usize = 5;

    /// Settings with the default timing.
    pub fn new(id: NodeId, voters: Vec<NodeId>, jitter_seed: u64) -> ConfigSettings {
        ConfigSettings {
            id,
            voters,
            election_ticks: Self::ELECTION_TICKS_DEFAULT,
            heartbeat_ticks: Self::HEARTBEAT_TICKS_DEFAULT,
            jitter_seed,
        }
    }
}

/// The default voters of a cluster: its three lowest node ids (all of them if it has fewer).
/// Three voters survive one failure; more would slow every commit for no benefit to a map
/// that changes a few times per failover. The other nodes follow as learners.
pub fn default_voters(map: &ClusterMap) -> Vec<NodeId> {
    map.nodes.keys().copied().take(3).collect()
}

/// Where a proposal went: it took effect if and only if an [`Applied`] with this index also
/// has this term (another term there means a new leader overwrote it; propose again).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Proposal {
    pub index: u64,
    pub term: u64,
}

/// A committed log entry this node applied to its map. Every node applies the same entries in
/// the same order with the same outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Applied {
    pub index: u64,
    pub term: u64,
    /// None when the entry does not decode as a command.
    pub command: Option<Command>,
    pub outcome: Result<(), Rejection>,
}

/// The Raft role of a member, as it believes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RaftRole {
    Follower,
    PreCandidate,
    Candidate,
    Leader,
}

/// What [`ConfigCore::ready`] hands over.
///
/// One exception to the order below: a leader's appends and heartbeats need no save (Raft
/// lets a leader write its log in parallel with its followers; raft-rs counts the leader
/// toward a commit only once it saved). [`ConfigCore::ready_sending`] hands them to its
/// `send_now` before the save; `ready` puts them first in `messages`.
///
/// Ordering contract (raft-rs's `Ready` rules, which `ready` follows internally): persist,
/// then send, then apply.
/// 1. Persist. raft-rs splits a Ready's messages in two: `messages()`, which a leader may send
///    before its own disk write (its appends do not depend on it; Raft thesis 10.2.1), and
///    `persisted_messages()`, which may leave only after the Ready's hard state, entries and
///    snapshot are durable (a vote, a candidate's vote request, a follower's append ack: sent
///    earlier, a crash could make the node vote twice in a term or forget entries it
///    acknowledged). `ready` saves through the [`Durable`] before it returns, and releases
///    both kinds only after that save succeeded, so everything in `messages` may go at once.
///    The `LightReady` that raft-rs returns after `advance` (a leader's commit notifications)
///    is handled the same way, after a second save if the commit index moved.
/// 2. Send `messages` in any order; the network may lose, duplicate or reorder them.
/// 3. Apply: committed entries (durable on a quorum, and on this node's disk since an
///    earlier save) are already applied to [`ConfigCore::map`] when `ready` returns;
///    `applied` lists them in log order for the caller to act on (a new view). If
///    `snapshot_installed` is set, the map was replaced wholesale by the leader's snapshot at
///    that index and the entries it covers are not listed.
///
/// `ready` asserts that `messages` and `applied` are empty on entry (the driver acts on and
/// drains them after each call, so nothing is sent or acted on twice) and overwrites
/// `snapshot_installed`.
#[derive(Debug, Default)]
pub struct ConfigReady {
    /// Raft messages (protobuf bytes) and their destination.
    pub messages: Vec<(NodeId, Vec<u8>)>,
    pub applied: Vec<Applied>,
    pub snapshot_installed: Option<u64>,
}

impl ConfigReady {
    pub fn is_empty(&self) -> bool {
        self.messages.is_empty() && self.applied.is_empty() && self.snapshot_installed.is_none()
    }

    pub fn clear(&mut self) {
        self.messages.clear();
        self.applied.clear();
        self.snapshot_installed = None;
    }
}

/// Why a member could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    #[error("settings: {reason}")]
    InvalidSettings { reason: String },
    #[error("initial map: {0}")]
    InvalidInitialMap(#[from] MapError),
    #[error("voter {node} is not a node of the initial map")]
    VoterNotInMap { node: NodeId },
    #[error("node {node} is neither a voter nor a node of the initial map (a learner)")]
    NotAMember { node: NodeId },
    #[error("the saved voters {saved:?} differ from the configured {configured:?}")]
    VotersChanged {
        saved: Vec<NodeId>,
        configured: Vec<NodeId>,
    },
    #[error("the saved state is inconsistent: {reason}")]
    CorruptPersisted { reason: String },
    #[error("raft refused the configuration: {0}")]
    Raft(raft::Error),
}

/// Why a message from another member was refused. The message had no effect.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StepError {
    #[error("not a raft message: {reason}")]
    Decode { reason: String },
    #[error("the message says it is from {claimed}, but it came from {from}")]
    WrongSender { claimed: u64, from: NodeId },
    #[error("the message is for {to}, not this node")]
    WrongRecipient { to: u64 },
    #[error("node {from} is not another member of the config store")]
    UnknownPeer { from: NodeId },
    #[error("raft message type {msg_type} never travels between members here")]
    UnexpectedType { msg_type: String },
    #[error("the snapshot is unusable: {reason}")]
    BadSnapshot { reason: String },
    #[error("raft refused the message: {0}")]
    Raft(raft::Error),
    #[error("the config store is poisoned: {reason}")]
    Poisoned { reason: String },
}

/// Why a proposal was not appended to the log.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProposeError {
    /// Only the leader appends; `leader` is who this node believes leads, if anyone.
    #[error("not the config store's leader (leader: {leader:?})")]
    NotLeader { leader: Option<NodeId> },
    /// raft-rs dropped it: a leadership transfer is under way, or too much is uncommitted.
    #[error("the leader dropped the proposal (transferring leadership, or log full)")]
    Dropped,
    #[error("raft refused the proposal: {0}")]
    Raft(raft::Error),
    #[error("the config store is poisoned: {reason}")]
    Poisoned { reason: String },
}

/// Any of the above, for callers that forward them with `?`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error(transparent)]
    Start(#[from] StartError),
    #[error(transparent)]
    Step(#[from] StepError),
    #[error(transparent)]
    Propose(#[from] ProposeError),
}

/// One node's member of the config store (see the crate documentation).
pub struct ConfigCore {
    id: NodeId,
    node: RawNode<LogStore>,
    /// The map after applying every entry up to `applied`.
    map: ClusterMap,
    applied: u64,
    election_ticks: usize,
    jitter: SplitMix64,
    /// Election clock value at which this node campaigns; re-drawn at each countdown's start.
    election_deadline: usize,
    /// Set when a save failed: raft-rs's memory is then ahead of the disk, so the core refuses
    /// all further work; the node restarts from what the disk holds.
    poisoned: Option<String>,
    /// This life of the node: 0 on a first start, the saved count plus one on a start from
    /// saved state ([`ConfigCore::incarnation`]).
    incarnation: u64,
    /// Whether `incarnation` is saved: a restart saves it at its first `ready`.
    incarnation_saved: bool,
}

impl fmt::Debug for ConfigCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConfigCore")
            .field("id", &self.id)
            .field("role", &self.role())
            .field("term", &self.term())
            .field("leader", &self.leader())
            .field("applied", &self.applied)
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl ConfigCore {
    /// Starts from what was persisted (None on a node's first start). Every voter of a fresh
    /// cluster starts from the same `initial` map (the state machine at index 0) and the same
    /// voter set, so no bootstrap entry needs replicating; `initial` is ignored when
    /// `persisted` is given. Learners are the initial map's nodes that are not voters.
    pub fn new(
        settings: ConfigSettings,
        initial: ClusterMap,
        persisted: Option<Persisted>,
    ) -> Result<ConfigCore, StartError> {
        let voters = check_settings(&settings)?;
        let (incarnation, incarnation_saved) = match &persisted {
            None => (0, true),
            Some(persisted) => (persisted.incarnation + 1, false),
        };
        let (store, map, applied) = match persisted {
            None => fresh_start(&voters, initial)?,
            Some(persisted) => restart(&voters, persisted)?,
        };
        let learners: BTreeSet<NodeId> = store
            .conf_state
            .learners
            .iter()
            .map(|&id| raft_to_node(id))
            .collect();
        if !voters.contains(&settings.id) && !learners.contains(&settings.id) {
            return Err(StartError::NotAMember { node: settings.id });
        }

        let election_ticks = settings.election_ticks;
        let config = raft::Config {
            id: u64::from(settings.id),
            election_tick: election_ticks,
            heartbeat_tick: settings.heartbeat_ticks,
            applied,
            max_size_per_msg: MSG_SIZE_MAX,
            max_inflight_msgs: INFLIGHT_MSGS_MAX,
            check_quorum: true,
            pre_vote: true,
            // Degenerate: raft-rs's thread-RNG draw has a single value to pick. The jitter is
            // drawn from `jitter_seed` instead (see `jitter.rs` and `tick`).
            min_election_tick: 2 * election_ticks,
            max_election_tick: 2 * election_ticks + 1,
            max_uncommitted_size: UNCOMMITTED_SIZE_MAX,
            ..raft::Config::default()
        };
        let logger = slog::Logger::root(slog::Discard, slog::o!());
        let node = RawNode::new(&config, store, &logger).map_err(StartError::Raft)?;
        let core = ConfigCore {
            id: settings.id,
            node,
            map,
            applied,
            election_ticks,
            jitter: SplitMix64::for_node(settings.jitter_seed, settings.id),
            election_deadline: 2 * election_ticks,
            poisoned: None,
            incarnation,
            incarnation_saved,
        };
        assert_eq!(
            core.node.raft.randomized_election_timeout(),
            2 * election_ticks
        );
        assert_eq!(core.node.raft.raft_log.applied, applied);
        Ok(core)
    }

    pub fn id(&self) -> NodeId {
        self.id
    }

    /// Advances the logical clock by one tick.
    pub fn tick(&mut self) {
        if self.poisoned.is_some() {
            return;
        }
        let raft = &mut self.node.raft;
        let timeout = raft.randomized_election_timeout();
        assert_eq!(
            timeout,
            2 * self.election_ticks,
            "the raft-rs timeout range is degenerate"
        );
        if raft.state != StateRole::Leader && raft.promotable() {
            if raft.election_elapsed == 0 {
                // A countdown starts (the node just heard a leader, started an election, or
                // changed term): draw its deadline.
                let jitter = self.jitter.below(self.election_ticks);
                self.election_deadline = self.election_ticks + jitter;
            }
            assert!(self.election_deadline < timeout);
            if raft.election_elapsed + 1 >= self.election_deadline {
                // This tick is the deadline: move raft-rs's clock so that this tick is also
                // its own timeout, and it campaigns now.
                raft.election_elapsed = timeout - 1;
            }
        }
        self.node.tick();
    }

    /// A Raft message from another member, as bytes (protobuf). Bad bytes, a message that
    /// claims another sender or recipient, and a type that never travels between members
    /// are errors, never a panic, and leave the core unchanged.
    ///
    /// Members are trusted: a well-formed message from a member that breaks Raft's rules
    /// (say, a heartbeat committing past the follower's log) can make raft-rs panic. Raft
    /// does not tolerate Byzantine members.
    pub fn step(&mut self, from: NodeId, bytes: &[u8]) -> Result<(), StepError> {
        self.check_poisoned()
            .map_err(|reason| StepError::Poisoned { reason })?;
        let message = Message::parse_from_bytes(bytes).map_err(|error| StepError::Decode {
            reason: error.to_string(),
        })?;
        if message.from != u64::from(from) {
            return Err(StepError::WrongSender {
                claimed: message.from,
                from,
            });
        }
        if message.to != u64::from(self.id) {
            return Err(StepError::WrongRecipient { to: message.to });
        }
        if from == self.id || !self.is_member(from) {
            return Err(StepError::UnknownPeer { from });
        }
        let msg_type = message.get_msg_type();
        match msg_type {
            MessageType::MsgAppend
            | MessageType::MsgAppendResponse
            | MessageType::MsgRequestPreVote
            | MessageType::MsgRequestPreVoteResponse
            | MessageType::MsgRequestVote
            | MessageType::MsgRequestVoteResponse
            | MessageType::MsgHeartbeat
            | MessageType::MsgHeartbeatResponse
            | MessageType::MsgSnapshot
            | MessageType::MsgTransferLeader
            | MessageType::MsgTimeoutNow => {}
            // Local messages (MsgHup, MsgBeat, ...) would let a peer drive this node's clock;
            // proposals and read indexes are never forwarded here (only the leader proposes).
            _ => {
                return Err(StepError::UnexpectedType {
                    msg_type: format!("{msg_type:?}"),
                });
            }
        }
        if msg_type == MessageType::MsgSnapshot {
            self.check_snapshot(message.get_snapshot())
                .map_err(|reason| StepError::BadSnapshot { reason })?;
        }
        self.node.step(message).map_err(StepError::Raft)
    }

    /// Appends a command to the log if this node leads. The command is validated when it is
    /// applied, against the map of that moment, identically on every node.
    pub fn propose(&mut self, command: Command) -> Result<Proposal, ProposeError> {
        self.check_poisoned()
            .map_err(|reason| ProposeError::Poisoned { reason })?;
        if !self.is_leader() {
            return Err(ProposeError::NotLeader {
                leader: self.leader(),
            });
        }
        let index_last = self.node.raft.raft_log.last_index();
        match self.node.propose(Vec::new(), encode_command(&command)) {
            Ok(()) => {}
            Err(raft::Error::ProposalDropped) => return Err(ProposeError::Dropped),
            Err(error) => return Err(ProposeError::Raft(error)),
        }
        let proposal = Proposal {
            index: self.node.raft.raft_log.last_index(),
            term: self.node.raft.term,
        };
        assert_eq!(proposal.index, index_last + 1);
        Ok(proposal)
    }

    /// The leader as this node believes (it may be stale during an election).
    pub fn leader(&self) -> Option<NodeId> {
        match self.node.raft.leader_id {
            raft::INVALID_ID => None,
            id => Some(raft_to_node(id)),
        }
    }

    pub fn is_leader(&self) -> bool {
        self.node.raft.state == StateRole::Leader
    }

    pub fn role(&self) -> RaftRole {
        match self.node.raft.state {
            StateRole::Follower => RaftRole::Follower,
            StateRole::PreCandidate => RaftRole::PreCandidate,
            StateRole::Candidate => RaftRole::Candidate,
            StateRole::Leader => RaftRole::Leader,
        }
    }

    pub fn term(&self) -> u64 {
        self.node.raft.term
    }

    /// This life of the node, once it is saved (None until the first [`ConfigCore::ready`]
    /// after a restart saved it): 0 for a node that never restarted from saved state, and a
    /// number no earlier life of this node used otherwise. What a node says of itself that
    /// must not be taken for what an earlier life said (a report of records rebuilt from its
    /// log after a restart) names it.
    pub fn incarnation(&self) -> Option<u64> {
        self.incarnation_saved.then_some(self.incarnation)
    }

    /// The index of the last entry applied to [`ConfigCore::map`].
    pub fn applied_index(&self) -> u64 {
        self.applied
    }

    pub fn commit_index(&self) -> u64 {
        self.node.raft.raft_log.committed
    }

    /// Asks Raft to hand leadership to voter `to` (so the cluster core can keep it off the
    /// group's primary). Called on a follower, the request is forwarded to the leader. Raft
    /// ignores it if `to` is not a voter or already leads; while the transfer is under way
    /// (at most `election_ticks`) the leader drops proposals. Check [`ConfigCore::leader`]
    /// later to see the outcome.
    pub fn transfer_leader(&mut self, to: NodeId) {
        if self.poisoned.is_some() {
            return;
        }
        self.node.transfer_leader(u64::from(to));
    }

    /// Campaigns at once, as a leadership transfer's target does: no election timeout, no
    /// pre-vote round, and votes granted even by members that heard the leader lately. For a
    /// follower that saw the leader's process die (its connection closed): waiting out the
    /// election timeout would hold every view change that long. Raft's safety does not depend
    /// on when a node campaigns; a false alarm costs the live leader its term. A leader, a
    /// poisoned core or a node that cannot lead does nothing.
    pub fn campaign_now(&mut self) {
        if self.poisoned.is_some()
            || self.node.raft.state == StateRole::Leader
            || !self.node.raft.promotable()
        {
            return;
        }
        // raft-rs campaigns this way only on the leader's `TimeoutNow`; a message of that
        // type for the current term from the leader we know is what it acts on.
        let mut message = Message::default();
        message.set_msg_type(MessageType::MsgTimeoutNow);
        message.from = self.node.raft.leader_id;
        message.to = u64::from(self.id);
        message.term = self.node.raft.term;
        self.node
            .step(message)
            .expect("a TimeoutNow of the current term is not a local message");
    }

    /// The cluster map as of [`ConfigCore::applied_index`].
    pub fn map(&self) -> &ClusterMap {
        &self.map
    }

    /// Why the core refuses work, if it does.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// Drives raft-rs's Ready (and LightReady) until nothing is pending: persists through
    /// `disk` before releasing any message that depends on it, applies committed entries to
    /// the map, and returns what to send and what was applied (see [`ConfigReady`] for the
    /// order). A failed save poisons the core: the error is returned now and on every later
    /// call, and nothing of the unsaved state leaves the node.
    pub fn ready(&mut self, disk: &mut impl Durable, out: &mut ConfigReady) -> io::Result<()> {
        let mut early = Vec::new();
        let result = self.ready_sending(disk, out, &mut |to, bytes| early.push((to, bytes)));
        early.append(&mut out.messages);
        out.messages = early;
        result
    }

    /// [`ConfigCore::ready`], but the messages raft-rs allows to leave before the save (a
    /// leader's appends and heartbeats: Raft lets a leader write its log in parallel with
    /// its followers, §10.2.1 of Ongaro's thesis) go to `send_now` before the save starts,
    /// so the leader's fsync and its followers' overlap.
    pub fn ready_sending(
        &mut self,
        disk: &mut impl Durable,
        out: &mut ConfigReady,
        send_now: &mut dyn FnMut(NodeId, Vec<u8>),
    ) -> io::Result<()> {
        assert!(
            out.messages.is_empty(),
            "the driver must send and drain the previous messages"
        );
        assert!(
            out.applied.is_empty(),
            "the driver must act on and drain the previous applied"
        );
        out.snapshot_installed = None;
        self.check_poisoned().map_err(io::Error::other)?;
        if !self.incarnation_saved {
            self.save(disk)?;
            self.incarnation_saved = true;
        }
        while self.node.has_ready() {
            let mut ready = self.node.ready();
            // A snapshot is of applied (so committed) state: it may leave before the save too.
            let mut snapshots_to = Vec::new();
            for message in ready.take_messages() {
                if message.get_msg_type() == MessageType::MsgSnapshot {
                    snapshots_to.push(message.to);
                }
                let to = raft_to_node(message.to);
                let bytes = message
                    .write_to_bytes()
                    .expect("a raft message always encodes");
                send_now(to, bytes);
            }
            let mut messages = Vec::new();
            let mut dirty = false;
            if !ready.snapshot().is_empty() {
                self.install_snapshot(ready.snapshot(), out);
                dirty = true;
            }
            self.apply_entries(ready.take_committed_entries(), out);
            if !ready.entries().is_empty() {
                self.node.mut_store().append(ready.entries());
                dirty = true;
            }
            if let Some(hard_state) = ready.hs() {
                let store = self.node.mut_store();
                // Term and vote must be durable before a message leaves. The commit index need
                // not be (a restarted node learns it again, and re-applies the entries above
                // the applied index it saved): a change of it alone costs no save, which
                // keeps two fsyncs off every view change.
                if hard_state.term != store.hard_state.term
                    || hard_state.vote != store.hard_state.vote
                {
                    dirty = true;
                }
                store.hard_state = hard_state.clone();
            }
            // Read states answer read-index requests, which this store never makes.
            drop(ready.take_read_states());
            dirty |= self.maybe_compact();
            if dirty {
                self.save(disk)?;
            }
            messages.append(&mut ready.take_persisted_messages());

            let mut light = self.node.advance_append(ready);
            let mut dirty = false;
            if let Some(commit) = light.commit_index() {
                // Not saved on its own: see above.
                let store = self.node.mut_store();
                assert!(commit > store.hard_state.commit);
                store.hard_state.commit = commit;
            }
            messages.append(&mut light.take_messages());
            self.apply_entries(light.take_committed_entries(), out);
            dirty |= self.maybe_compact();
            if dirty {
                self.save(disk)?;
            }
            self.node.advance_apply_to(self.applied);
            assert_eq!(self.node.raft.raft_log.applied, self.applied);

            for message in messages {
                let to = raft_to_node(message.to);
                if message.get_msg_type() == MessageType::MsgSnapshot {
                    snapshots_to.push(message.to);
                }
                let bytes = message
                    .write_to_bytes()
                    .expect("a raft message always encodes");
                out.messages.push((to, bytes));
            }
            // raft-rs waits for a report on every snapshot it sent before it replicates to
            // that follower again. The network gives none, so report success at once: if the
            // snapshot is lost, the follower rejects the next append and the leader sends the
            // snapshot again.
            for to in snapshots_to {
                self.node.report_snapshot(to, SnapshotStatus::Finish);
            }
        }
        Ok(())
    }

    fn check_poisoned(&self) -> Result<(), String> {
        match &self.poisoned {
            None => Ok(()),
            Some(reason) => Err(reason.clone()),
        }
    }

    fn is_member(&self, node: NodeId) -> bool {
        let conf_state = &self.node.store().conf_state;
        let node = u64::from(node);
        conf_state.voters.contains(&node) || conf_state.learners.contains(&node)
    }

    /// A snapshot from the leader must carry a valid map, at a real index, for this
    /// membership; checked before raft-rs sees it, so `ready` can install it without failing.
    fn check_snapshot(&self, snapshot: &Snapshot) -> Result<(), String> {
        let metadata = snapshot.get_metadata();
        if metadata.index == 0 {
            return Err("index 0".to_string());
        }
        let theirs = metadata.get_conf_state();
        let ours = &self.node.store().conf_state;
        let same_set = |a: &[u64], b: &[u64]| {
            a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
        };
        if !same_set(&theirs.voters, &ours.voters)
            || !same_set(&theirs.learners, &ours.learners)
            || !theirs.voters_outgoing.is_empty()
            || !theirs.learners_next.is_empty()
        {
            return Err(format!("membership {theirs:?} differs from this store's"));
        }
        if decode_map(snapshot.get_data()).is_none() {
            return Err("the data is not a valid cluster map".to_string());
        }
        Ok(())
    }

    fn install_snapshot(&mut self, snapshot: &Snapshot, out: &mut ConfigReady) {
        let metadata = snapshot.get_metadata();
        let map = decode_map(snapshot.get_data()).expect("checked in step");
        assert!(
            metadata.index > self.applied,
            "raft-rs installs only newer snapshots"
        );
        self.node
            .mut_store()
            .install_snapshot(metadata.index, metadata.term, map.clone());
        self.map = map;
        self.applied = metadata.index;
        out.snapshot_installed = Some(metadata.index);
    }

    fn apply_entries(&mut self, entries: Vec<Entry>, out: &mut ConfigReady) {
        for entry in entries {
            assert_eq!(entry.index, self.applied + 1, "entries apply in log order");
            self.applied = entry.index;
            if let Some(applied) = apply_entry(&mut self.map, &entry) {
                out.applied.push(applied);
            }
        }
    }

    /// Snapshots the map and drops the log it covers once enough entries were applied.
    fn maybe_compact(&mut self) -> bool {
        let applied = self.applied;
        let store = self.node.mut_store();
        if applied < store.snapshot_index + SNAPSHOT_INTERVAL_ENTRIES {
            return false;
        }
        store.compact(applied, &self.map);
        true
    }

    fn save(&mut self, disk: &mut impl Durable) -> io::Result<()> {
        let state = persisted_of(self.node.store(), self.incarnation);
        if let Err(error) = disk.save(&state) {
            let reason = format!("saving the config store state failed: {error}");
            self.poisoned = Some(reason.clone());
            return Err(io::Error::new(error.kind(), reason));
        }
        Ok(())
    }
}

/// Applies one committed entry; None for a new leader's empty entry, which carries nothing.
fn apply_entry(map: &mut ClusterMap, entry: &Entry) -> Option<Applied> {
    let entry_type = entry.get_entry_type();
    if entry_type != EntryType::EntryNormal {
        // Membership changes are never proposed here; raft-rs leaves a rejected one without
        // effect as long as `apply_conf_change` is not called.
        return Some(Applied {
            index: entry.index,
            term: entry.term,
            command: None,
            outcome: Err(Rejection::UnsupportedEntry {
                entry_type: entry_type as i32,
            }),
        });
    }
    if entry.get_data().is_empty() {
        return None;
    }
    let Some(command) = decode_command(entry.get_data()) else {
        return Some(Applied {
            index: entry.index,
            term: entry.term,
            command: None,
            outcome: Err(Rejection::Undecodable),
        });
    };
    let outcome = map.apply(&command);
    Some(Applied {
        index: entry.index,
        term: entry.term,
        command: Some(command),
        outcome,
    })
}

/// Member ids inside raft-rs come from `ConfState` (built from `NodeId`s) or from messages
/// whose sender `step` checked against it, so they always fit.
fn raft_to_node(id: u64) -> NodeId {
    NodeId::try_from(id).expect("raft member ids are NodeIds")
}

/// Validates the settings; returns the voters as a set.
fn check_settings(settings: &ConfigSettings) -> Result<BTreeSet<NodeId>, StartError> {
    let invalid = |reason: String| Err(StartError::InvalidSettings { reason });
    if settings.voters.is_empty() {
        return invalid("voters is empty: name at least one node".to_string());
    }
    let voters: BTreeSet<NodeId> = settings.voters.iter().copied().collect();
    if voters.len() != settings.voters.len() {
        return invalid(format!("voters {:?} lists a node twice", settings.voters));
    }
    if voters.contains(&0) || settings.id == 0 {
        return invalid("node id 0 cannot be a Raft member: number nodes from 1".to_string());
    }
    if settings.heartbeat_ticks == 0 {
        return invalid("heartbeat_ticks is 0: it must be at least 1".to_string());
    }
    if settings.election_ticks <= settings.heartbeat_ticks {
        return invalid(format!(
            "election_ticks ({}) must exceed heartbeat_ticks ({}); 10× is usual",
            settings.election_ticks, settings.heartbeat_ticks
        ));
    }
    Ok(voters)
}

fn fresh_start(
    voters: &BTreeSet<NodeId>,
    initial: ClusterMap,
) -> Result<(LogStore, ClusterMap, u64), StartError> {
    initial.validate()?;
    if let Some(&node) = voters.iter().find(|node| !initial.nodes.contains_key(node)) {
        return Err(StartError::VoterNotInMap { node });
    }
    let learners = initial.nodes.keys().filter(|node| !voters.contains(node));
    let conf_state = ConfState::from((
        voters.iter().map(|&id| u64::from(id)),
        learners.map(|&id| u64::from(id)),
    ));
    let store = LogStore {
        hard_state: HardState::default(),
        conf_state,
        snapshot_index: 0,
        snapshot_term: 0,
        snapshot_map: initial.clone(),
        entries: Vec::new(),
    };
    Ok((store, initial, 0))
}

/// Rebuilds the log store from a saved state and replays the committed entries after the
/// snapshot, so the map is current as soon as the node starts (raft-rs is then told they
/// are applied and does not hand them out again).
fn restart(
    voters: &BTreeSet<NodeId>,
    persisted: Persisted,
) -> Result<(LogStore, ClusterMap, u64), StartError> {
    let corrupt = |reason: String| Err(StartError::CorruptPersisted { reason });
    let saved: BTreeSet<NodeId> = persisted.voters.iter().copied().collect();
    if &saved != voters {
        return Err(StartError::VotersChanged {
            saved: saved.into_iter().collect(),
            configured: voters.iter().copied().collect(),
        });
    }
    if persisted.learners.iter().any(|node| saved.contains(node)) {
        return corrupt("a node is both voter and learner".to_string());
    }
    if let Err(error) = persisted.snapshot_map.validate() {
        return corrupt(format!("snapshot map: {error}"));
    }
    if persisted.vote != 0 && !saved.contains(&persisted.vote) {
        return corrupt(format!("vote for {}, not a voter", persisted.vote));
    }
    if persisted.snapshot_term > persisted.term {
        return corrupt("snapshot term above the current term".to_string());
    }
    let mut entries = Vec::with_capacity(persisted.entries.len());
    let mut term_last = persisted.snapshot_term;
    for (offset, saved) in persisted.entries.iter().enumerate() {
        let index = persisted.snapshot_index + 1 + offset as u64;
        if saved.index != index {
            return corrupt(format!("entry {} where {index} belongs", saved.index));
        }
        if saved.term < term_last || saved.term > persisted.term {
            return corrupt(format!("entry {index} has term {}", saved.term));
        }
        term_last = saved.term;
        let entry_type = match saved.entry_type {
            0 => EntryType::EntryNormal,
            1 => EntryType::EntryConfChange,
            2 => EntryType::EntryConfChangeV2,
            other => return corrupt(format!("entry {index} has unknown type {other}")),
        };
        let mut entry = Entry::default();
        entry.set_entry_type(entry_type);
        entry.index = saved.index;
        entry.term = saved.term;
        entry.set_data(saved.data.clone().into());
        entry.set_context(saved.context.clone().into());
        entries.push(entry);
    }
    let index_last = persisted.snapshot_index + entries.len() as u64;
    if persisted.commit < persisted.snapshot_index || persisted.commit > index_last {
        return corrupt(format!(
            "commit {} outside the log [{}, {index_last}]",
            persisted.commit, persisted.snapshot_index
        ));
    }

    let mut map = persisted.snapshot_map.clone();
    for entry in &entries {
        if entry.index > persisted.commit {
            break;
        }
        let _ = apply_entry(&mut map, entry);
    }
    let hard_state = HardState {
        term: persisted.term,
        vote: u64::from(persisted.vote),
        commit: persisted.commit,
        ..HardState::default()
    };
    let store = LogStore {
        hard_state,
        conf_state: ConfState::from((
            persisted.voters.iter().map(|&id| u64::from(id)),
            persisted.learners.iter().map(|&id| u64::from(id)),
        )),
        snapshot_index: persisted.snapshot_index,
        snapshot_term: persisted.snapshot_term,
        snapshot_map: persisted.snapshot_map,
        entries,
    };
    Ok((store, map, persisted.commit))
}

/// The durable image of the log store.
fn persisted_of(store: &LogStore, incarnation: u64) -> Persisted {
    let hard_state = &store.hard_state;
    assert!(
        store.snapshot_index <= hard_state.commit,
        "a snapshot covers committed entries"
    );
    assert!(
        hard_state.commit <= store.last_index(),
        "commit within the log"
    );
    Persisted {
        term: hard_state.term,
        vote: raft_to_node(hard_state.vote),
        commit: hard_state.commit,
        voters: store
            .conf_state
            .voters
            .iter()
            .map(|&id| raft_to_node(id))
            .collect(),
        learners: store
            .conf_state
            .learners
            .iter()
            .map(|&id| raft_to_node(id))
            .collect(),
        snapshot_index: store.snapshot_index,
        snapshot_term: store.snapshot_term,
        snapshot_map: store.snapshot_map.clone(),
        entries: store
            .entries
            .iter()
            .map(|entry| PersistedEntry {
                index: entry.index,
                term: entry.term,
                entry_type: entry.get_entry_type() as i32,
                data: entry.get_data().to_vec(),
                context: entry.get_context().to_vec(),
            })
            .collect(),
        incarnation,
    }
}
