//! The primary role: what a primary decides about each client call and each order from its
//! node, whichever driver carries the bytes.
//!
//! The runtime's executor thread and the simulator's nodes both hold a [`PrimaryRole`]. They
//! feed it calls ([`PrimaryRole::run_call`]), peers' messages, ticks and the node's orders, and
//! after each turn take one [`RoleReady`]:
//!
//! 1. `replication.messages`: batches, heartbeats and transfers for the backups, in the order
//!    the replication core produced them (a link sends them in that order);
//! 2. the answers, through [`RoleReady::drain_replies`]: released ones in LSN order (each
//!    to send, or to withhold if the lease it was released under ran out since), then those a
//!    deposed primary abandoned (answer "not primary");
//! 3. `transfers_sent`: state transfers already copied into `replication.messages`, for the log;
//! 4. `observed`: what the node's cluster core must hear (backups heard, spares caught up,
//!    removals prepared), in the order it happened.
//!
//! The driver carries them out in that order. Nothing in the ready depends on when the driver
//! does so, except the lease check, which takes the driver's tick at the moment it sends.

use std::collections::BTreeMap;
use std::sync::Arc;

use tandem_memory::ClassBytes;
use tandem_redo::{BatchKind, CallId, encode_passive};
use tandem_replication::{
    DrainReplies, Message, NodeId, Primary, PrimaryReady, Safety, TransferSent,
};
use tandem_store::{CallError, CallWatch, Deduped, ProcError, ProcId, ProcKind, Store};

use crate::checkpoint::Checkpointer;
use crate::log::LogOrder;

/// A client's call, as the driver read it.
#[derive(Debug, Clone, Copy)]
pub struct Call<'a> {
    /// The client's id: 0 is an anonymous client, not deduplicated.
    pub client_id: u64,
    pub seq: u64,
    pub proc_id: ProcId,
    pub args: &'a [u8],
    /// Sent as a read (a Read frame): it may run only a read-only procedure.
    pub read_only: bool,
    /// The rule the call asks for, if it overrides the group's.
    pub safety: Option<Safety>,
}

/// An answer the replication core holds until the rule of its call lets it go.
#[derive(Debug)]
pub struct Answer<T> {
    /// Where the driver sends it (a connection, a simulated client, an in-process caller).
    pub to: T,
    pub seq: u64,
    pub kind: AnswerKind,
}

/// What an answer says.
#[derive(Debug)]
pub enum AnswerKind {
    /// The call committed, read, or repeated an earlier commit. `lsn_repeated` is the LSN of
    /// that earlier commit, which the reply carries instead of the LSN it was released behind.
    Committed {
        body: Vec<u8>,
        lsn_repeated: Option<u64>,
    },
    /// A retry of a call that committed at `lsn_repeated`, whose reply was too long for the
    /// dedup table to keep: `message` says so. Nothing ran again.
    CommittedReplyNotKept { lsn_repeated: u64, message: String },
    /// The procedure failed and its txn rolled back: nothing changed. `ran_before` is set
    /// when the answer repeats the failure of an earlier run of the same call (a retry of a
    /// call the model's watch stopped): where and when that run was, for the reply to carry.
    RolledBack {
        message: String,
        ran_before: Option<EarlierRun>,
    },
    /// Refused before it ran. It still waits behind the answers of earlier calls, so a client
    /// that pipelines sees its answers in call order, but for no lease: it acknowledges
    /// nothing.
    Refused { refusal: Refusal, message: String },
}

/// Where and when a run of a call happened: the LSN the store stood at and the model's time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EarlierRun {
    pub lsn: u64,
    pub time_ms: u64,
}

/// Why a call was refused before it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No procedure has the call's id.
    UnknownProcedure,
    /// A read (Read frame) named a procedure that writes.
    WritesOnRead,
    /// The rule the call asks for is malformed, or needs backups a lone primary lacks.
    RuleUnmet,
    /// The client already committed a later call: this one is an old duplicate.
    StaleSeq,
    /// A new client, and the dedup table is full.
    DedupFull,
    /// The store could not run it for a reason no client caused.
    Internal,
}

/// What [`PrimaryRole::run_call`] did with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ran {
    /// Nothing ran: flow control holds the call, or the primary was deposed
    /// ([`Primary::is_deposed`]). Offer it again after the next ack or tick, or, deposed,
    /// answer "not primary" (the client resends it to the new primary).
    Stalled,
    /// The call committed; `shipped` is its record's payload by class.
    Committed { call: CallId, shipped: ClassBytes },
    /// A retry of a call that committed before at `lsn`: answered from the dedup table.
    Duplicate { lsn: u64 },
    /// A read-only procedure read the latest commit.
    Read,
    /// The procedure failed; its txn rolled back.
    RolledBack,
    /// Refused before it ran.
    Refused(Refusal),
}

/// What the node's cluster core must hear from its primary role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Observed {
    /// A backup or spare sent something (once per node between two takes).
    Heard(NodeId),
    /// A spare of view `view` holds everything the slowest backup holds, and replies it
    /// lacks are held back: it may become a backup.
    SpareCaughtUp { view: u64, node: NodeId },
    /// The removal of `backup` from `view` is prepared: `behind` lack a released record;
    /// the spares `joining` take its place (see `Primary::prepare_removal`).
    RemovalPrepared {
        view: u64,
        backup: NodeId,
        behind: Vec<NodeId>,
        joining: Vec<NodeId>,
    },
}

/// Everything a primary role hands its driver after a turn (ordering contract: see the
/// module).
#[derive(Debug)]
pub struct RoleReady<T> {
    pub replication: PrimaryReady<Answer<T>>,
    pub transfers_sent: Vec<(NodeId, TransferSent)>,
    pub observed: Vec<Observed>,
}

impl<T> Default for RoleReady<T> {
    fn default() -> RoleReady<T> {
        RoleReady {
            replication: PrimaryReady::default(),
            transfers_sent: Vec::new(),
            observed: Vec::new(),
        }
    }
}

impl<T> RoleReady<T> {
    /// The answers, each with what to do with it at the driver's tick `tick_now` (see
    /// [`PrimaryReady::drain_replies`]).
    pub fn drain_replies(&mut self, tick_now: u64) -> DrainReplies<'_, Answer<T>> {
        self.replication.drain_replies(tick_now)
    }

    /// Empties every field, keeping their capacity.
    pub fn clear(&mut self) {
        self.replication.clear();
        self.transfers_sent.clear();
        self.observed.clear();
    }
}

/// The primary role of one node: its store and its replication core.
#[derive(Debug)]
pub struct PrimaryRole<T> {
    store: Store,
    primary: Primary<Answer<T>>,
    /// What the cluster core must hear, since the last take.
    observed: Vec<Observed>,
    /// A procedure's reply, written by the store.
    reply: Vec<u8>,
    /// Whether this node keeps a write-ahead log, so that a `durable` reply can ever leave
    /// ([`PrimaryRole::set_keeps_log`]).
    keeps_log: bool,
    /// When the segment is checkpointed for the node's log (a node with a log).
    checkpointer: Option<Checkpointer>,
    /// The model's watch over long calls, if it has one (given before the role starts).
    watch: Option<Arc<CallWatch>>,
    /// Calls the model's watch stopped, so that a retry is not run again.
    stopped: StoppedCalls,
    /// The time last given to the model ([`PrimaryRole::set_time_ms`]).
    time_ms: u64,
}

/// Most calls [`StoppedCalls`] remembers; past it, the lowest client id's is forgotten (its
/// retry runs again, which is still correct: the stopped run changed nothing).
const STOPPED_CALLS_MAX: usize = 4096;

/// The last call of each client that a [`tandem_store::CallWatch`] stopped (`SCRIPT KILL`, the
/// time limit), and the failure it was answered with. A stopped call rolled back and left no
/// dedup slot, so a retry of it (a stub resends a call it timed out on, and a long script
/// outlasts its timeouts) would run the script again from the start, for as long as the
/// first run took, and need killing again. The role answers such a retry with the same
/// failure instead. Kept in memory only: a new primary runs the retry, as it would run any
/// call that never committed.
#[derive(Debug, Default)]
struct StoppedCalls {
    by_client: BTreeMap<u64, StoppedCall>,
}

#[derive(Debug)]
struct StoppedCall {
    seq: u64,
    message: String,
    ran: EarlierRun,
}

impl StoppedCalls {
    /// The answer to call `seq` of `client_id`, if the watch stopped it; a call of another
    /// seq means the client moved on, and the entry goes.
    fn repeat(&mut self, client_id: u64, seq: u64) -> Option<AnswerKind> {
        match self.by_client.get(&client_id) {
            Some(stopped) if stopped.seq == seq => Some(AnswerKind::RolledBack {
                message: stopped.message.clone(),
                ran_before: Some(stopped.ran),
            }),
            Some(_) => {
                self.by_client.remove(&client_id);
                None
            }
            None => None,
        }
    }

    fn insert(&mut self, client_id: u64, stopped: StoppedCall) {
        if self.by_client.len() >= STOPPED_CALLS_MAX && !self.by_client.contains_key(&client_id) {
            self.by_client.pop_first();
        }
        self.by_client.insert(client_id, stopped);
    }
}

/// The longest reply a primary may commit when frames are at most `max_frame_len` bytes and
/// batches are sealed past `batch_bytes_max`: the reply leaves in a Reply frame, and a
/// deduplicated one also travels in its commit's redo record, which must fit one batch frame
/// together with the batch it joins and the procedure's own writes (half of what a frame
/// leaves beyond a batch). A driver hands it to [`Store::set_reply_len_max`].
pub fn reply_len_max(max_frame_len: usize, batch_bytes_max: usize) -> usize {
    tandem_wire::reply_body_len_max(max_frame_len)
        .min(max_frame_len.saturating_sub(batch_bytes_max) / 2)
}

/// Room a batch frame needs beyond its records: the envelope, the batch header, the peer
/// message's fields.
const BATCH_FRAME_OVERHEAD: usize = 4096;

/// The longest redo record a primary may commit when frames are at most `max_frame_len`
/// bytes and the retained tail holds at most `tail_bytes_max`: a record travels in one
/// batch, which must fit one frame (with the batch it joins, at most `batch_bytes_max`) and
/// leave the tail room for the batches before it (half the tail). A longer one could never
/// be shipped, and every commit after it would wait for good. A driver hands it to
/// [`Store::set_record_len_max`].
pub fn record_len_max(
    max_frame_len: usize,
    batch_bytes_max: usize,
    tail_bytes_max: usize,
) -> usize {
    max_frame_len
        .saturating_sub(batch_bytes_max + BATCH_FRAME_OVERHEAD)
        .min(tail_bytes_max / 2)
}

impl<T> PrimaryRole<T> {
    /// A primary role serving `store`, replicating through `primary` (whose last commit is
    /// the store's).
    pub fn new(store: Store, primary: Primary<Answer<T>>) -> PrimaryRole<T> {
        assert_eq!(
            store.segment().lsn(),
            primary.lsn_committed(),
            "the replication core starts at the store's last commit"
        );
        let watch = store.model().call_watch();
        PrimaryRole {
            store,
            primary,
            observed: Vec::new(),
            reply: Vec::new(),
            keeps_log: false,
            checkpointer: None,
            watch,
            stopped: StoppedCalls::default(),
            time_ms: 0,
        }
    }

    /// Checkpoints the segment for the node's log once `bytes_between` bytes of batches were
    /// sealed since the last one (`lsn_load`: the initial load's LSN, whose pages a
    /// checkpoint leaves out). Backups do the same; the primary's own log would otherwise
    /// grow for ever.
    /// A role that checkpoints already keeps its schedule and the checkpoint under way.
    pub fn enable_checkpoints(&mut self, bytes_between: u64, lsn_load: u64) {
        if self.checkpointer.is_none() {
            self.checkpointer = Some(Checkpointer::new(bytes_between, lsn_load));
        }
    }

    /// Begins a checkpoint if one is due (or the log `wanted` one), or hands the log the
    /// next pages of the one under way; the driver calls it after every turn, and carries
    /// `orders` out after the turn's batches.
    pub fn checkpoint_step(&mut self, wanted: bool, orders: &mut Vec<LogOrder>) {
        if let Some(checkpointer) = &mut self.checkpointer {
            checkpointer.step(self.store.segment_for_snapshot(), wanted, orders);
        }
    }

    /// Whether a checkpoint is under way: the driver steps it without waiting for calls.
    pub fn checkpoint_under_way(&self) -> bool {
        self.checkpointer
            .as_ref()
            .is_some_and(Checkpointer::is_under_way)
    }

    /// Says whether this node keeps a write-ahead log (a node without one refuses a call that
    /// asks for `durable`: it could never answer).
    pub fn set_keeps_log(&mut self, keeps: bool) {
        self.keeps_log = keeps;
    }

    /// The node's write-ahead log has synced every record up to `lsn`: `durable` replies
    /// whose backups synced too may leave.
    pub fn log_synced(&mut self, lsn: u64) {
        self.primary.log_synced(lsn);
    }

    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Tells the data model the time by the driver's clock, in Unix milliseconds (a model
    /// whose data expires measures against it; see `DataModel::set_time_ms`).
    pub fn set_time_ms(&mut self, now_ms: u64) {
        self.time_ms = now_ms;
        self.store.model_mut().set_time_ms(now_ms);
    }

    /// Ends a deposed primary role and gives its segment back, at its last commit: the node
    /// keeps its records and stands by ([`tandem_cluster::role::Transition::StandBy`]) until
    /// a view names it again and they are rewound to that view's truncate LSN.
    pub fn into_segment(self) -> tandem_memory::Segment {
        assert!(
            self.primary.is_deposed(),
            "only a deposed primary gives its segment up"
        );
        let mut segment = self.store.into_parts().0;
        // The next role's log starts by aligning, which gives the checkpoint up there.
        segment.abandon_snapshot();
        segment
    }

    pub fn primary(&self) -> &Primary<Answer<T>> {
        &self.primary
    }

    /// Holds back the replies in `ready` that would leave at `tick_now` on a lease that ran
    /// out since their release, and those after them, until the lease holds again (see
    /// [`Primary::hold_lapsed`]). A driver calls it just before draining the replies.
    pub fn hold_lapsed(&mut self, ready: &mut RoleReady<T>, tick_now: u64) {
        self.primary
            .hold_lapsed(&mut ready.replication.replies, tick_now);
    }

    /// Runs a client's call exactly once and hands its answer to the replication core.
    ///
    /// A (client id, seq) the dedup table holds is answered with the reply stored when it
    /// committed, at that commit's LSN, and runs nothing. A read runs on the segment as it
    /// stands and waits behind the latest commit (and, as any answer without a commit of its
    /// own, for the lease). A refusal waits behind earlier answers too.
    pub fn run_call(&mut self, call: &Call<'_>, to: T) -> Ran {
        if self.primary.is_deposed() {
            return Ran::Stalled;
        }
        let safety = self.primary.effective_safety(call.safety);
        if let Some(refused) = self.check_rule(call, safety) {
            return self.refuse(to, call.seq, Refusal::RuleUnmet, refused);
        }
        if !self.primary.can_commit(safety) {
            return Ran::Stalled;
        }
        if call.read_only && self.store.model().kind(call.proc_id) != Some(ProcKind::Read) {
            let message = format!(
                "procedure {} writes: a Read frame runs only read-only procedures; send a Call",
                call.proc_id.0
            );
            return self.refuse(to, call.seq, Refusal::WritesOnRead, message);
        }
        if call.client_id != 0
            && let Some(kind) = self.stopped.repeat(call.client_id, call.seq)
        {
            self.primary.defer(
                safety,
                Answer {
                    to,
                    seq: call.seq,
                    kind,
                },
            );
            return Ran::RolledBack;
        }
        let runs_before = self.watch.as_ref().map(|watch| watch.runs());
        let ran = EarlierRun {
            lsn: self.store.segment().lsn(),
            time_ms: self.time_ms,
        };
        let outcome = self.store.call_once(
            call.client_id,
            call.seq,
            call.proc_id,
            call.args,
            &mut self.reply,
        );
        if let (Err(err @ CallError::Proc(_)), Some(watch), Some(mark)) =
            (&outcome, &self.watch, runs_before)
            && call.client_id != 0
            && watch.stopped_since(mark)
        {
            let stopped = StoppedCall {
                seq: call.seq,
                message: err.to_string(),
                ran,
            };
            self.stopped.insert(call.client_id, stopped);
        }
        let answer = |body, lsn_repeated| AnswerKind::Committed { body, lsn_repeated };
        match outcome {
            Ok(Deduped::Committed(_)) => {
                let kind = answer(std::mem::take(&mut self.reply), None);
                let call_id = CallId {
                    client_id: call.client_id,
                    seq: call.seq,
                };
                let shipped = self.commit_last(
                    call_id,
                    safety,
                    Answer {
                        to,
                        seq: call.seq,
                        kind,
                    },
                );
                Ran::Committed {
                    call: call_id,
                    shipped,
                }
            }
            Ok(Deduped::Duplicate { lsn }) => {
                // The call committed before (a retry after a timeout or a failover). Its
                // answer waits behind the latest commit under the call's rule, which then also
                // holds for the earlier LSN the answer carries.
                let kind = answer(std::mem::take(&mut self.reply), Some(lsn));
                let seq = call.seq;
                self.primary.repeat(safety, Answer { to, seq, kind });
                Ran::Duplicate { lsn }
            }
            Ok(Deduped::DuplicateReplyNotKept { lsn, reply_len }) => {
                let kind = AnswerKind::CommittedReplyNotKept {
                    lsn_repeated: lsn,
                    message: reply_not_kept(lsn, reply_len),
                };
                let seq = call.seq;
                self.primary.repeat(safety, Answer { to, seq, kind });
                Ran::Duplicate { lsn }
            }
            Ok(Deduped::Read) => {
                let kind = answer(std::mem::take(&mut self.reply), None);
                let seq = call.seq;
                self.primary.defer(safety, Answer { to, seq, kind });
                Ran::Read
            }
            // The procedure failed, its reply was too long for a frame, or its record too long
            // to ship: either way its txn rolled back and nothing changed.
            Err(
                err @ (CallError::Proc(_)
                | CallError::ReplyTooLong { .. }
                | CallError::RecordTooLong { .. }),
            ) => {
                let kind = AnswerKind::RolledBack {
                    message: err.to_string(),
                    ran_before: None,
                };
                let seq = call.seq;
                self.primary.defer(safety, Answer { to, seq, kind });
                Ran::RolledBack
            }
            Err(err) => {
                let refusal = match err {
                    CallError::UnknownProcedure(_) => Refusal::UnknownProcedure,
                    CallError::StaleSeq { .. } => Refusal::StaleSeq,
                    CallError::DedupFull { .. } => Refusal::DedupFull,
                    _ => Refusal::Internal,
                };
                self.refuse(to, call.seq, refusal, err.to_string())
            }
        }
    }

    /// Runs a call of the in-process load (client 0: not deduplicated, no reply body kept).
    /// A failed procedure's answer is held as any other; its error is returned for the load's
    /// own tally.
    ///
    /// Panics if the call cannot run at all: the in-process load only makes valid calls.
    pub fn run_local(
        &mut self,
        proc_id: ProcId,
        args: &[u8],
        safety: Safety,
        to: T,
    ) -> Result<ClassBytes, ProcError> {
        assert!(
            !self.primary.is_deposed(),
            "a deposed primary runs no calls"
        );
        match self.store.call(proc_id, args, &mut self.reply) {
            Ok(_) => {
                let kind = AnswerKind::Committed {
                    body: Vec::new(),
                    lsn_repeated: None,
                };
                let answer = Answer { to, seq: 0, kind };
                Ok(self.commit_last(CallId::default(), safety, answer))
            }
            Err(CallError::Proc(err)) => {
                let kind = AnswerKind::RolledBack {
                    message: String::new(),
                    ran_before: None,
                };
                self.primary.defer(safety, Answer { to, seq: 0, kind });
                Err(err)
            }
            Err(err) => panic!("the in-process load made a call the store cannot run: {err}"),
        }
    }

    /// Runs the model's periodic procedure (`DataModel::periodic`, the Redis model's expiry
    /// sweep) once, as a call of no client under the group's rule, if the role may commit
    /// now; its answer goes to `to`. Returns what its record shipped if it committed; `None`
    /// if the model has none, the role is deposed or flow control holds, or it found nothing
    /// to do (it rolled back and took no LSN). The driver decides only when it is due.
    pub fn run_periodic(&mut self, to: T) -> Option<ClassBytes> {
        let (proc_id, _) = self.store.model().periodic()?;
        let safety = self.primary.effective_safety(None);
        if self.primary.is_deposed() || !self.primary.can_commit(safety) {
            return None;
        }
        self.run_local(proc_id, &[], safety, to).ok()
    }

    /// Whether a call with rule `safety` may run now (flow control, deposition).
    pub fn can_commit(&mut self, safety: Safety) -> bool {
        self.primary.can_commit(safety)
    }

    /// Why the rule a call names cannot be met, if it cannot. The group's own rule was
    /// checked when the node started; a view with fewer backups than its k waits for every
    /// backup there is.
    fn check_rule(&self, call: &Call<'_>, safety: Safety) -> Option<String> {
        call.safety?;
        if matches!(safety, Safety::Durable(_)) && !self.keeps_log {
            return Some(format!(
                "call {}: durable needs a write-ahead log, and this node keeps none; use \
                 2-safe, or give the node a [log] table (cluster-mode nodes always keep one)",
                call.seq
            ));
        }
        let backups = if self.primary.config().lone {
            0
        } else {
            usize::MAX
        };
        safety
            .validate(backups)
            .err()
            .map(|err| format!("call {}: {err}", call.seq))
    }

    /// Holds a refusal behind the answers of earlier calls (for no lease: it acknowledges
    /// nothing).
    fn refuse(&mut self, to: T, seq: u64, refusal: Refusal, message: String) -> Ran {
        let kind = AnswerKind::Refused { refusal, message };
        self.primary.refuse(Answer { to, seq, kind });
        Ran::Refused(refusal)
    }

    /// Hands the store's last commit to the replication core; returns its payload by class.
    fn commit_last(&mut self, call: CallId, safety: Safety, answer: Answer<T>) -> ClassBytes {
        let segment = self.store.segment();
        if self.primary.config().kind == BatchKind::Passive {
            let trace = segment.passive_trace();
            let lsn = trace.lsn();
            let mut classes = ClassBytes::default();
            self.primary.commit_encoded(lsn, safety, answer, |out| {
                classes = encode_passive(trace, out);
            });
            classes
        } else {
            let size = self
                .primary
                .commit(call, segment.last_redo(), safety, answer);
            ClassBytes {
                data: size.data as u64,
                undo: 0,
                meta: size.meta as u64,
            }
        }
    }

    /// Seals the open batch and ships it, within flow control (the executor ran dry).
    pub fn flush(&mut self) {
        self.primary.flush();
    }

    /// One tick of the node's clock: heartbeats, resends, the lease; then the spares that
    /// caught up are observed.
    /// Releases no reply for the next `ticks` ticks: see [`Primary::hold_releases`] (a role a
    /// promotion started honours the rest of the old primary's lease).
    pub fn hold_releases(&mut self, ticks: u64) {
        self.primary.hold_releases(ticks);
    }

    pub fn tick(&mut self) {
        self.primary.tick();
        let view = self.primary.view();
        for node in self.primary.prepare_spare_promotions(view) {
            self.observed.push(Observed::SpareCaughtUp { view, node });
        }
    }

    /// A message from a backup or spare.
    pub fn step(&mut self, from: NodeId, message: Message) {
        if !self.observed.contains(&Observed::Heard(from)) {
            self.observed.push(Observed::Heard(from));
        }
        self.primary.step(from, message);
    }

    /// The link to `node` was established anew: what was in flight on the old one is lost.
    pub fn link_reset(&mut self, node: NodeId) {
        self.primary.link_reset(node);
    }

    /// The node committed view `view` with this primary in it. Returns whether it was
    /// installed: a view not newer than the role's, or one reaching a deposed primary, is
    /// ignored.
    pub fn install_view(&mut self, view: u64, backups: &[NodeId], spares: &[NodeId]) -> bool {
        if view <= self.primary.view() || self.primary.is_deposed() {
            return false;
        }
        self.primary.install_view(view, backups, spares);
        true
    }

    /// View `view` replaced this primary: every pending answer is abandoned.
    pub fn depose(&mut self, view: u64) {
        if view > self.primary.view() && !self.primary.is_deposed() {
            self.primary.depose(view);
        }
    }

    /// The node's cluster core wants `backup` out of `view`: hold back what it must, and
    /// observe who lacks a released record. Nothing is observed if the removal cannot be
    /// prepared in this role (another view, a deposed primary).
    pub fn prepare_removal(&mut self, view: u64, backup: NodeId) {
        if let Some(removal) = self.primary.prepare_removal(view, backup) {
            self.observed.push(Observed::RemovalPrepared {
                view,
                backup,
                behind: removal.behind,
                joining: removal.joining,
            });
        }
    }

    /// Starts the replication core over under `config`, from the last commit and with an
    /// empty tail. Only the simulator's sabotage of a primary that ignores its deposition
    /// does this.
    pub fn restart_replication(&mut self, config: tandem_replication::PrimaryConfig) {
        let lsn = self.primary.lsn_committed();
        self.primary = Primary::resume(config, lsn, Vec::new());
    }

    /// Everything to carry out after a turn, in the order of the module's contract. State
    /// transfers the replication core asked for are copied from the segment as it stands
    /// (at the last commit: no call is half done between turns).
    pub fn take_ready(&mut self, ready: &mut RoleReady<T>) {
        self.primary.take_ready(&mut ready.replication);
        if let Some(checkpointer) = &mut self.checkpointer {
            for batch in &ready.replication.to_log {
                checkpointer.applied(batch.len(), batch.view());
            }
        }
        let sent = self
            .primary
            .transfer_named(&mut ready.replication, self.store.segment());
        ready.transfers_sent.extend(sent);
        ready.observed.append(&mut self.observed);
    }
}

/// What a client is told when the primary withholds its call's reply (the lease ran out
/// before the reply could leave): `Busy` when the call is the only one its connection has in
/// flight (a stub, which sends the same (client id, seq) again at once instead of after its
/// attempt timeout); nothing otherwise, since an error frame names no call and a pipelined
/// connection could not tell which it answers (it is left to its timeout).
pub fn withheld_answer(calls_in_flight: u64) -> Option<tandem_wire::ErrorCode> {
    (calls_in_flight == 1).then_some(tandem_wire::ErrorCode::Busy)
}

/// What a retry of a call committed at `lsn` is told when its `reply_len`-byte reply was too
/// long for the dedup table to keep.
pub fn reply_not_kept(lsn: u64, reply_len: usize) -> String {
    format!(
        "the command ran once and committed (LSN {lsn}), but its {reply_len}-byte reply was too \
         long for the cluster to keep for this retry; read the keys it changed to see its effect"
    )
}
