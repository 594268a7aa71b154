//! The primary: batches committed records, keeps the retained tail, ships to backups, tracks
//! their progress and releases replies when their safety rule holds.
//!
//! The executor calls [`Primary::commit`] after each local commit; the driver feeds messages
//! from backups to [`Primary::step`], calls [`Primary::tick`] every tick and
//! [`Primary::flush`] whenever the executor runs out of calls, and takes the outputs with
//! [`Primary::take_ready`].
//!
//! Batches are cut when the open one reaches `batch_bytes_max`, on every tick, and on flush:
//! under load batches are large (few packets, few acks), and an idle primary never holds a
//! record back for longer than the call that made it idle.

use std::collections::VecDeque;
use std::sync::Arc;

use tandem_memory::{RedoRecord, Segment};
use tandem_redo::{
    BatchBuilder, BatchKind, CallId, EncodedSize, RetainedTail, SealedBatch, TailLimits,
};

use crate::message::{Message, NodeId, PagesChunk, Safety};

/// How a primary is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PrimaryConfig {
    pub group: u32,
    pub view: u64,
    /// The backups of the view, each listed once.
    pub backups: Vec<NodeId>,
    /// The spares of the view: shipped to like backups, but their acks count for no rule and
    /// the tail keeps nothing for them (one that falls out of it needs a state transfer).
    pub spares: Vec<NodeId>,
    /// The group's safety rule, used by calls that do not override it.
    pub safety: Safety,
    pub tail: TailLimits,
    /// A batch is sealed once its payload reaches this many bytes.
    pub batch_bytes_max: usize,
    /// Every backup and spare gets a heartbeat this often, busy or not: its echo renews the
    /// lease.
    pub heartbeat_ticks: u64,
    /// The primary lease (DESIGN.md, "Fencing and leases"), or `None` where no other node can
    /// ever take over (a group without a config store). Replies that are not fenced by backup
    /// acks (1-safe and bounded commits, and calls with no commit of their own, which may
    /// be reads) leave only while every backup's lease holds: backup b's lease holds at tick
    /// q if b echoed a heartbeat sent at tick g with q < g + `lease_ticks`. A backup promises
    /// to report for a new view only some time after it last heard the primary; the driver
    /// sets `lease_ticks` short enough that the primary's count runs out first, allowing for
    /// tick granularity and clock drift.
    pub lease_ticks: Option<u64>,
    /// A repeated Nack for the same LSN rewinds the shipper again only after this many ticks,
    /// so the batches already in flight behind a gap do not each cause a resend.
    pub resend_ticks: u64,
    /// Redo records (an active backup) or passive write-through traces.
    pub kind: BatchKind,
    /// An idle executor's partial batch is sealed only while some backup has fewer batches
    /// than this in flight (see [`Primary::flush`]).
    pub flush_batches_in_flight_max: usize,
    /// The group has no other node (a one-node cluster, or a primary configured without
    /// backups): a 2-safe rule then releases at commit. In a group with other nodes, a view
    /// left without backups (failures removed them) releases no new 2-safe reply until a
    /// backup holds it again (a spare that catches up becomes one): a reply released with no
    /// copy but the primary's could be lost by the next promotion (the simulator found this).
    pub lone: bool,
}

impl PrimaryConfig {
    /// Panics on a configuration the primary cannot run with; the runtime validates the
    /// user's configuration with proper messages before it gets here.
    fn assert_valid(&self) {
        assert!(
            self.heartbeat_ticks >= 1,
            "heartbeat_ticks must be at least 1"
        );
        assert_ne!(self.lease_ticks, Some(0), "a lease of 0 ticks never holds");
        assert!(self.resend_ticks >= 1, "resend_ticks must be at least 1");
        assert!(
            self.batch_bytes_max >= 1,
            "batch_bytes_max must be at least 1"
        );
        let mut sorted: Vec<NodeId> = self.backups.iter().chain(&self.spares).copied().collect();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            self.backups.len() + self.spares.len(),
            "a member is listed twice"
        );
        // A view may hold fewer backups than the rule's k after failures: the rule then
        // waits for every backup there is, as the promotion rule counts it
        // (`tandem_cluster::reports_needed`). Only a rule that is wrong in itself is refused.
        if let Err(err) = self.safety.validate_form() {
            panic!("invalid group safety: {err}");
        }
    }
}

/// A reply the driver holds on behalf of a call, with the LSN of the call's commit.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply<R> {
    pub lsn: u64,
    pub reply: R,
    /// For a reply released under the lease: the tick at which the lease runs out. The
    /// reply was released before it; a driver that sends replies some time after the
    /// primary released them withholds one it would send at or after this tick (its client
    /// retries), so no reply leaves on a lease that ran out in between.
    pub lease_end: Option<u64>,
}

/// Something the primary noticed that needs no action from the driver but is worth counting.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum PrimaryFault {
    /// A message from a node that is not a backup of this view; ignored.
    UnknownPeer { from: NodeId },
    /// A message from an older view; ignored, and the sender was told the current view.
    StaleMessage { from: NodeId, view: u64 },
    /// A peer knows a newer view. Whether this node is still the primary there is for the
    /// config store to say: until the driver calls [`Primary::install_view`] or
    /// [`Primary::depose`], the primary takes no commits and releases no replies.
    NewerView { from: NodeId, view: u64 },
    /// A backup claims records this primary never committed; ignored.
    BackupAhead { from: NodeId, lsn_received: u64 },
    /// A backup echoes a heartbeat tick this primary has not reached; the ack is ignored.
    EchoAhead { from: NodeId, tick_echoed: u64 },
    /// A member needs records that have left the retained tail, and this primary ships
    /// passive traces, which a page transfer cannot replace: it must be restarted from a load.
    TailMissed {
        from: NodeId,
        lsn_received: u64,
        lsn_first: u64,
    },
    /// A member's `Diverged` introduction names page `page`, outside this primary's segment
    /// (it runs another segment size); no transfer is sent.
    DivergedOutside { from: NodeId, page: u32 },
    /// A message a primary never expects (a batch, a heartbeat, pages); ignored.
    Unexpected { from: NodeId },
}

/// A removal the primary prepared ([`Primary::prepare_removal`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removal {
    /// Other backups that lack a record a reply was released for: the change makes them
    /// spares.
    pub behind: Vec<NodeId>,
    /// Spares that hold every released record and become backups in the same change, when
    /// no other backup would remain.
    pub joining: Vec<NodeId>,
}

/// A state transfer [`Primary::transfer`] sent: the pages changed after `lsn_from`, as of
/// `lsn`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TransferSent {
    pub lsn_from: u64,
    pub lsn: u64,
    pub pages: usize,
}

/// What the driver must do after feeding the primary.
///
/// Order: send `messages`, then release `replies` and `abandoned`. Sending first keeps a
/// released 1-safe commit's record on its way to the backups as early as possible.
#[derive(Debug)]
pub struct PrimaryReady<R> {
    /// Messages to send. Messages to one destination must go out in this order.
    pub messages: Vec<(NodeId, Message)>,
    /// Replies whose safety rule holds, in LSN order.
    pub replies: Vec<Reply<R>>,
    /// Replies this primary will never release because it was deposed. Whether their calls
    /// committed is for the new primary to say; the client retries there with the same
    /// (client id, seq).
    pub abandoned: Vec<Reply<R>>,
    /// Members that need records the retained tail no longer holds: the driver calls
    /// [`Primary::transfer`] for each, with the segment, before it feeds the primary again.
    pub transfers: Vec<NodeId>,
    /// Every batch sealed since the last take, in LSN order: the driver appends them to the
    /// node's write-ahead log and reports what it synced with [`Primary::log_synced`].
    pub to_log: Vec<SealedBatch>,
    /// A `durable` reply now waits for records up to this LSN: the driver has the node's
    /// own log sync them at once, whatever its schedule (the backups are asked by
    /// `Message::SyncWanted`).
    pub sync_wanted: Option<u64>,
    pub faults: Vec<PrimaryFault>,
}

impl<R> Default for PrimaryReady<R> {
    fn default() -> Self {
        PrimaryReady {
            messages: Vec::new(),
            replies: Vec::new(),
            abandoned: Vec::new(),
            transfers: Vec::new(),
            to_log: Vec::new(),
            sync_wanted: None,
            faults: Vec::new(),
        }
    }
}

/// What the driver does with a reply the primary handed over
/// ([`PrimaryReady::drain_replies`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Disposition<R> {
    /// Send it: its rule held, and its lease, if it needs one, still runs.
    Send(Reply<R>),
    /// Drop it: it was released under a lease that ran out before it could leave. The
    /// client retries (and a new primary, or this one with a renewed lease, answers).
    Withhold(Reply<R>),
    /// Answer "not primary": this primary was deposed before the reply's rule held; whether
    /// the call committed is for the new primary to say, where the client retries with the
    /// same (client id, seq).
    NotPrimary(Reply<R>),
}

impl<R> PrimaryReady<R> {
    /// Every reply handed over, the released ones in LSN order and then the abandoned ones,
    /// each with what the driver must do with it when it sends at primary tick `tick_now`
    /// (by its clock, at the moment of sending; a driver that sends at once passes
    /// [`Primary::tick_count`]). The one decision of when a reply may leave, for the runtime
    /// and the simulator alike.
    pub fn drain_replies(&mut self, tick_now: u64) -> DrainReplies<'_, R> {
        DrainReplies {
            released: self.replies.drain(..),
            abandoned: self.abandoned.drain(..),
            tick_now,
            abandoned_sent: abandoned_sent(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.messages.is_empty()
            && self.replies.is_empty()
            && self.abandoned.is_empty()
            && self.transfers.is_empty()
            && self.to_log.is_empty()
            && self.sync_wanted.is_none()
            && self.faults.is_empty()
    }

    /// Empties every field, keeping their capacity.
    pub fn clear(&mut self) {
        self.messages.clear();
        self.replies.clear();
        self.abandoned.clear();
        self.transfers.clear();
        self.to_log.clear();
        self.sync_wanted = None;
        self.faults.clear();
    }
}

/// The answers of a [`PrimaryReady`], each with what to do with it: released ones first, in
/// LSN order, then abandoned ones. (A hand-written iterator: a `Chain` of two `Map`s costs
/// the executor's hot loop a few percent of its throughput.)
#[derive(Debug)]
pub struct DrainReplies<'a, R> {
    released: std::vec::Drain<'a, Reply<R>>,
    abandoned: std::vec::Drain<'a, Reply<R>>,
    tick_now: u64,
    abandoned_sent: bool,
}

impl<R> Iterator for DrainReplies<'_, R> {
    type Item = Disposition<R>;

    fn next(&mut self) -> Option<Disposition<R>> {
        if let Some(reply) = self.released.next() {
            return Some(if reply.lease_end.is_some_and(|end| self.tick_now >= end) {
                Disposition::Withhold(reply)
            } else {
                Disposition::Send(reply)
            });
        }
        let reply = self.abandoned.next()?;
        Some(if self.abandoned_sent {
            Disposition::Send(reply)
        } else {
            Disposition::NotPrimary(reply)
        })
    }
}

/// Whether the ignore-bound bug is planted.
fn ignore_bound() -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::IgnoreBound) {
        return true;
    }
    false
}

/// Whether the abandoned-sent bug is planted.
fn abandoned_sent() -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::AbandonedSent) {
        return true;
    }
    false
}

/// Batches a backup that is catching up may have in flight from the tail.
const CATCH_UP_BATCHES_IN_FLIGHT_MAX: usize = 32;

/// Sealed batches holding records after `lsn_received` and up to `lsn_sent`, counted up to
/// `limit`.
fn batches_in_flight(tail: &RetainedTail, lsn_received: u64, lsn_sent: u64, limit: usize) -> usize {
    if lsn_sent <= lsn_received || !tail.covers(lsn_received) {
        return 0;
    }
    let newest_sent = tail
        .batches_newest_first()
        .next()
        .is_some_and(|batch| batch.lsn_base() <= lsn_sent);
    if newest_sent {
        // A backup keeping up: its batches in flight are the last few of the tail.
        tail.batches_newest_first()
            .take_while(|batch| batch.lsn_last() > lsn_received)
            .take(limit)
            .count()
    } else {
        // A backup catching up: find its first batch in flight by binary search.
        tail.batches_from(lsn_received + 1)
            .take_while(|batch| batch.lsn_base() <= lsn_sent)
            .take(limit)
            .count()
    }
}

/// The k-th highest of `lsns` (k ≥ 1): k of them are at least this LSN. Reorders `lsns`.
fn kth_highest(lsns: &mut [u64], k: usize) -> u64 {
    assert!(k >= 1, "a rule waits for at least one backup");
    assert!(k <= lsns.len(), "a rule waits for at most every backup");
    lsns.sort_unstable_by(|a, b| b.cmp(a));
    lsns[k - 1]
}

/// What the primary knows about one backup.
#[derive(Clone, Debug)]
struct Progress {
    node: NodeId,
    /// False until the backup's first Ack says where it stands; nothing is shipped before.
    known: bool,
    /// Last LSN shipped to it.
    lsn_sent: u64,
    lsn_received: u64,
    lsn_applied: u64,
    /// Synced to its write-ahead log (at most `lsn_received`).
    lsn_durable: u64,
    /// (tick, LSN) of the last rewind after a Nack.
    rewind: Option<(u64, u64)>,
    /// It needs records the tail no longer holds: nothing more is shipped to it.
    needs_transfer: bool,
    /// Its `Diverged` introduction, until a transfer answers it: the LSN whose history its
    /// segment holds, and the pages where it does not (changed by records the group
    /// discarded), which the transfer carries too. Meanwhile it counts as holding nothing.
    diverged: Option<(u64, Arc<[u32]>)>,
    /// A backup (its acks count for the rules) or a spare (it only catches up).
    kind: MemberKind,
    /// The `tick_sent` of the newest heartbeat it echoed: its lease runs from there.
    tick_lease_from: Option<u64>,
}

/// What a backup's ack says it holds.
#[derive(Clone, Copy, Debug)]
struct Claim {
    lsn_received: u64,
    lsn_applied: u64,
    lsn_durable: u64,
}

/// How far along a record must be on a backup for a rule to count it.
#[derive(Clone, Copy, Debug)]
enum Held {
    Received,
    Applied,
    Durable,
}

#[derive(Debug)]
struct Pending<R> {
    lsn: u64,
    safety: Safety,
    /// Released only under a valid lease: no backup ack fences this reply.
    needs_lease: bool,
    reply: R,
}

/// What a member of the view is to the primary's rules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum MemberKind {
    /// Its acks count for the release rules and the bound.
    Backup,
    /// It catches up; its acks count for nothing until a view makes it a backup.
    Spare,
}

impl Progress {
    fn unknown(node: NodeId, kind: MemberKind) -> Progress {
        Progress {
            kind,
            node,
            known: false,
            lsn_sent: 0,
            lsn_received: 0,
            lsn_applied: 0,
            lsn_durable: 0,
            rewind: None,
            needs_transfer: false,
            diverged: None,
            tick_lease_from: None,
        }
    }

    /// Whether its acks count for the rules: it is a backup, not a spare.
    fn counts(&self) -> bool {
        self.kind == MemberKind::Backup
    }
}

/// The primary of one group in one view.
#[derive(Debug)]
pub struct Primary<R> {
    config: PrimaryConfig,
    lsn_committed: u64,
    builder: BatchBuilder,
    tail: RetainedTail,
    /// The view's backups and spares, in the view's order, each with its progress.
    members: Vec<Progress>,
    /// Replies not yet released, in LSN order.
    pending: VecDeque<Pending<R>>,
    /// Replies released under a lease that ran out before the driver could send them (the
    /// call that made them ran longer than the lease: a long script, a long read), and those
    /// released after them: they wait, in LSN order and before every pending reply, for the
    /// lease to hold again ([`Primary::hold_lapsed`]).
    lapsed: VecDeque<Reply<R>>,
    /// The latest lease end a lapsed reply was released under: they leave only under a
    /// lease renewed past it (an echo of a heartbeat sent after they lapsed).
    lapsed_lease_end: u64,
    ready: PrimaryReady<R>,
    tick: u64,
    deposed: bool,
    /// The newest view a peer showed, while it is newer than this primary's.
    view_newer: Option<u64>,
    /// Scratch for the k-th highest LSN.
    sorted: Vec<u64>,
    /// The highest LSN a reply was released for (at least the LSN the primary started at:
    /// earlier views may have released replies up to there).
    lsn_released: u64,
    /// While set, no reply leaves before this tick: a promoted primary honours the rest of
    /// the lease its node granted the old primary ([`Primary::hold_releases`]).
    tick_release_from: Option<u64>,
    /// The backups of each view this primary asked the config store for, from its current
    /// view (a removal, a spare made a backup). The store commits at most one of them, and
    /// this primary cannot know which until it installs the next view: until then a reply
    /// leaves only once its rule holds in the current view and among the backups of every
    /// view asked for, so the promotion rule stays sound in whichever view comes next.
    prospects: Vec<Vec<NodeId>>,
    /// `ReadIndex` questions not answered yet (member, id), oldest first: they wait while no
    /// reply that needs the lease could leave ([`Primary::answer_read_indexes`]).
    read_indexes: Vec<(NodeId, u64)>,
    /// What this node's own write-ahead log has synced, as the driver reported it
    /// ([`Primary::log_synced`]): a `durable` reply needs the primary's copy on disk too.
    lsn_durable: u64,
    /// The highest LSN a `durable` reply waits for, and the highest the backups were asked
    /// to sync (`Message::SyncWanted`): a log syncs on its own schedule (`fsync`) unless a
    /// durable reply waits for it.
    lsn_sync_wanted: u64,
    lsn_sync_asked: u64,
}

impl<R> Primary<R> {
    /// A primary whose segment has committed up to `lsn_committed`.
    pub fn new(config: PrimaryConfig, lsn_committed: u64) -> Primary<R> {
        Primary::resume(config, lsn_committed, Vec::new())
    }

    /// A primary that takes over a group: `batches` are the records it received as a backup,
    /// contiguous and ending at `lsn_committed` (the new view's truncate LSN). They seed the
    /// retained tail, so a backup that was a little behind catches up from here, not by a
    /// state transfer. Batches sealed in older views keep their view number: receivers accept
    /// them from the primary of their view (they are the records every member agreed on).
    pub fn resume(
        config: PrimaryConfig,
        lsn_committed: u64,
        batches: Vec<SealedBatch>,
    ) -> Primary<R> {
        config.assert_valid();
        let members = config
            .backups
            .iter()
            .map(|&node| Progress::unknown(node, MemberKind::Backup))
            .chain(
                config
                    .spares
                    .iter()
                    .map(|&node| Progress::unknown(node, MemberKind::Spare)),
            )
            .collect();
        let lsn_first = batches
            .first()
            .map_or(lsn_committed + 1, |batch| batch.lsn_base());
        let mut tail = RetainedTail::new(config.tail, lsn_first);
        for batch in batches {
            assert_eq!(
                batch.lsn_base(),
                tail.lsn_next(),
                "tail batches are contiguous"
            );
            assert!(
                batch.view() <= config.view,
                "a tail batch from a future view"
            );
            tail.push(batch);
        }
        assert_eq!(
            tail.lsn_next(),
            lsn_committed + 1,
            "the tail ends at the last committed record"
        );
        let primary = Primary {
            builder: BatchBuilder::new(config.kind, config.group, config.view, lsn_committed + 1),
            tail,
            config,
            lsn_committed,
            members,
            pending: VecDeque::new(),
            lapsed: VecDeque::new(),
            lapsed_lease_end: 0,
            ready: PrimaryReady::default(),
            // Tick 0 is never sent: an echo of 0 means no heartbeat was heard.
            tick: 1,
            deposed: false,
            view_newer: None,
            read_indexes: Vec::new(),
            lsn_durable: 0,
            lsn_sync_wanted: 0,
            lsn_sync_asked: 0,
            sorted: Vec::new(),
            lsn_released: lsn_committed,
            tick_release_from: None,
            prospects: Vec::new(),
        };
        primary.check_invariants();
        primary
    }

    pub fn config(&self) -> &PrimaryConfig {
        &self.config
    }

    pub fn view(&self) -> u64 {
        self.config.view
    }

    pub fn lsn_committed(&self) -> u64 {
        self.lsn_committed
    }

    /// True once the driver deposed it: the primary takes no more commits, for good.
    pub fn is_deposed(&self) -> bool {
        self.deposed
    }

    /// The newer view a peer showed, until the driver resolves it with
    /// [`Primary::install_view`] or [`Primary::depose`]. Meanwhile nothing commits or is
    /// released.
    pub fn newer_view(&self) -> Option<u64> {
        self.view_newer
    }

    /// The config store committed view `view`, in which this node is still the primary, with
    /// `backups`. Progress of backups that stay is kept; new ones start unknown (nothing is
    /// shipped until they introduce themselves); removed ones no longer count for any rule,
    /// so replies that waited only on them are released now.
    pub fn install_view(&mut self, view: u64, backups: &[NodeId], spares: &[NodeId]) {
        assert!(!self.deposed, "a deposed primary installs no views");
        assert!(view > self.config.view, "views only move forward");
        // The open batch carries the old view in its header: seal it first.
        self.flush_now();
        let mut kept = Vec::with_capacity(backups.len() + spares.len());
        let kinds = backups.iter().map(|&node| (node, MemberKind::Backup));
        for (node, kind) in kinds.chain(spares.iter().map(|&node| (node, MemberKind::Spare))) {
            let mut progress = match self.members.iter().position(|member| member.node == node) {
                Some(index) => self.members[index].clone(),
                None => Progress::unknown(node, kind),
            };
            if kind == MemberKind::Backup && progress.kind == MemberKind::Spare {
                // A spare made a backup: its echoes so far were not a backup's promise.
                progress.tick_lease_from = None;
            }
            progress.kind = kind;
            kept.push(progress);
        }
        self.members = kept;
        // Whatever was asked for from the old view is committed (this view) or void.
        self.prospects.clear();
        self.config.view = view;
        self.config.backups = backups.to_vec();
        self.config.spares = spares.to_vec();
        self.config.assert_valid();
        self.builder = BatchBuilder::new(
            self.config.kind,
            self.config.group,
            view,
            self.lsn_committed + 1,
        );
        if self.view_newer.is_some_and(|newer| newer <= view) {
            self.view_newer = None;
        }
        let members = &self.members;
        self.read_indexes
            .retain(|(node, _)| members.iter().any(|member| member.node == *node));
        self.release();
        self.answer_read_indexes();
        self.check_invariants();
    }

    /// This node is not the primary of view `view`: it abandons every pending reply (whether
    /// their calls committed is for the new primary to say) and takes no more commits.
    pub fn depose(&mut self, view: u64) {
        assert!(view > self.config.view, "deposed only by a newer view");
        if self.deposed {
            return;
        }
        self.deposed = true;
        // The records of the open batch are in the segment, which the node keeps: its log
        // must hold them too, or it could not continue from the segment's LSN. Sealed for
        // the log alone: nothing more is shipped.
        if !self.builder.is_empty() {
            let batch = self.builder.seal();
            self.ready.to_log.push(batch.clone());
            self.tail.push(batch);
        }
        self.prospects.clear();
        // Its askers time out and ask the next primary: an answer now could miss writes the
        // new view acknowledges.
        self.read_indexes.clear();
        for lapsed in self.lapsed.drain(..) {
            self.ready.abandoned.push(Reply {
                lease_end: None,
                ..lapsed
            });
        }
        for pending in self.pending.drain(..) {
            self.ready.abandoned.push(Reply {
                lsn: pending.lsn,
                reply: pending.reply,
                lease_end: None,
            });
        }
    }

    /// Replies waiting for their rule, or for a lease that ran out before they could leave.
    pub fn pending_replies(&self) -> usize {
        self.pending.len() + self.lapsed.len()
    }

    /// Takes back, from replies this primary released (`released`, in LSN order, as
    /// [`Primary::take_ready`] gave them), those a driver would send at `tick_now` on a lease
    /// that ran out meanwhile, and every one after the first of them: they wait for the lease
    /// to hold again and are released again, in the same order, with its new end. A driver
    /// calls it just before [`PrimaryReady::drain_replies`], which then withholds nothing.
    ///
    /// Only time spent by the driver between the release and the send lets a lease run out
    /// so: one call that ran longer than the lease (a script, a long read), or a paused
    /// process. Withheld, such a reply would tell a client its command may have run, or make
    /// it send a read again that runs as long again; held, it leaves once a heartbeat sent
    /// after the call is echoed, or is abandoned if this primary was replaced meanwhile.
    pub fn hold_lapsed(&mut self, released: &mut Vec<Reply<R>>, tick_now: u64) {
        let first = if self.lapsed.is_empty() {
            match released
                .iter()
                .position(|reply| reply.lease_end.is_some_and(|end| tick_now >= end))
            {
                Some(first) => first,
                None => return,
            }
        } else {
            0
        };
        if let (Some(last), Some(next)) = (self.lapsed.back(), released.get(first)) {
            assert!(last.lsn <= next.lsn, "replies are held in LSN order");
        }
        for reply in released.drain(first..) {
            if let Some(end) = reply.lease_end {
                self.lapsed_lease_end = self.lapsed_lease_end.max(end);
            }
            self.lapsed.push_back(reply);
        }
    }

    pub fn tail(&self) -> &RetainedTail {
        &self.tail
    }

    /// (node, lsn_received, lsn_applied) of each backup and then each spare, as last
    /// acknowledged.
    pub fn backup_progress(&self) -> impl Iterator<Item = (NodeId, u64, u64)> + '_ {
        self.members
            .iter()
            .map(|backup| (backup.node, backup.lsn_received, backup.lsn_applied))
    }

    /// The LSN every member's log has synced, as last reported (0 if unknown), and the last
    /// released LSN: what a removal under `durable` weighs (the simulator's descriptions).
    pub fn durable_progress(&self) -> (u64, Vec<(NodeId, u64)>) {
        let members = self
            .members
            .iter()
            .map(|backup| {
                (
                    backup.node,
                    if backup.known { backup.lsn_durable } else { 0 },
                )
            })
            .collect();
        (self.lsn_released, members)
    }

    /// Prepares asking the config store to remove backup `suspect` from view `view`, which
    /// stopped acknowledging. Returns the other backups that lack a record a reply was
    /// released for: the same change makes them spares, so every backup of the view asked
    /// for holds every released record. From now until the next view is installed, a reply
    /// leaves only once its rule also holds among the backups that would remain (see
    /// `prospects`): the simulator found acknowledged commits lost when a removal was asked
    /// for on what the backups held a moment earlier, and the suspect's late acks released
    /// records the remaining backups lacked.
    ///
    /// When no other backup holds every released record, the spares that do take the
    /// suspect's place in the same change (`Removal::joining`): a primary whose last backup
    /// died right after a promotion (it reported, then crashed before the view was
    /// committed) otherwise could neither remove it nor make a spare a backup (the rule
    /// would need the dead one's acks), and commits nothing for good; the simulator found
    /// clusters down that way.
    ///
    /// Under a rule that releases without backups (`1-safe`, `bounded`), which promises
    /// nothing at a failover, the last backup may be removed with no spare to take its place:
    /// the coordinator refuses such a view unless the backup restarted without its memory
    /// (it serves nothing in the view, and waited there for good: default-mix seed 458046).
    ///
    /// Under `durable`, to hold a record is to have synced it (`holds`): the promotion rule
    /// counts a report of records rebuilt from a log under `durable`, so a backup that
    /// received every released record but whose log lacks some is behind (default-mix seed
    /// 591408: a backup's log failed, the backup that synced every released record was
    /// removed, and the view kept the other one as its only backup; it restarted from its
    /// log, was promoted from that report, and acknowledged commits were lost).
    ///
    /// `None` when there is nothing to ask: `view` is not this primary's current view, it was
    /// deposed, `suspect` is not a backup, or, under a rule that waits for backups, neither
    /// another backup nor a spare holds every released record (a view without a backup
    /// could not survive its primary; the coordinator refuses one).
    pub fn prepare_removal(&mut self, view: u64, suspect: NodeId) -> Option<Removal> {
        if view != self.config.view || self.deposed || !self.config.backups.contains(&suspect) {
            return None;
        }
        let (remaining, behind): (Vec<NodeId>, Vec<NodeId>) = self
            .config
            .backups
            .iter()
            .copied()
            .filter(|&node| node != suspect)
            .partition(|&node| self.holds(node) >= self.lsn_released);
        if !remaining.is_empty() {
            self.expect_view(remaining);
            return Some(Removal {
                behind,
                joining: Vec::new(),
            });
        }
        let joining: Vec<NodeId> = self
            .members
            .iter()
            .filter(|progress| !progress.counts() && progress.known)
            .filter(|progress| self.holds(progress.node) >= self.lsn_released)
            .map(|progress| progress.node)
            .collect();
        let promises = self.config.safety.backup_acks().is_some();
        if promises && (joining.is_empty() || !self.rule_holds_among(&joining, self.lsn_released)) {
            return None;
        }
        self.expect_view(joining.clone());
        Some(Removal { behind, joining })
    }

    /// Spares that may become backups in view `view` without weakening any rule: each has
    /// received everything the slowest backup has (everything committed, when there is no
    /// backup), and the group's rule holds for every released record among the backups of
    /// the view that adds it. From now until the next view is installed, a reply leaves only
    /// once its rule also holds among those backups (see [`Primary::prepare_removal`]):
    /// under `2-safe` with every backup acking, a spare made a backup must hold every record
    /// released before the change commits. Empty when `view` is not the current view.
    pub fn prepare_spare_promotions(&mut self, view: u64) -> Vec<NodeId> {
        if view != self.config.view || self.deposed {
            return Vec::new();
        }
        let slowest_backup = self
            .members
            .iter()
            .filter(|progress| progress.counts())
            .map(|progress| progress.lsn_received)
            .min()
            .unwrap_or(self.lsn_committed);
        let caught_up: Vec<NodeId> = self
            .members
            .iter()
            .filter(|progress| !progress.counts() && progress.known)
            .filter(|progress| progress.lsn_received >= slowest_backup)
            .map(|progress| progress.node)
            .collect();
        let mut promotable = Vec::with_capacity(caught_up.len());
        for spare in caught_up {
            let mut backups = self.config.backups.clone();
            backups.push(spare);
            backups.sort_unstable();
            if self.rule_holds_among(&backups, self.lsn_released) {
                self.expect_view(backups);
                promotable.push(spare);
            }
        }
        promotable
    }

    /// Registers the backups of a view asked for (once per distinct set).
    fn expect_view(&mut self, mut backups: Vec<NodeId>) {
        backups.sort_unstable();
        assert!(
            self.rule_holds_among(&backups, self.lsn_released),
            "a view is asked for only while its backups hold what was released"
        );
        for &node in &backups {
            assert!(
                self.members.iter().any(|progress| progress.node == node),
                "a view asked for names only members of the current one"
            );
        }
        if !self.prospects.contains(&backups) {
            self.prospects.push(backups);
        }
    }

    /// The LSN member `node` is known to have received (0 if unknown).
    fn received(&self, node: NodeId) -> u64 {
        self.members
            .iter()
            .find(|progress| progress.node == node)
            .filter(|progress| progress.known)
            .map_or(0, |progress| progress.lsn_received)
    }

    /// The LSN up to which member `node` holds every record as a promotion counts it (0 if
    /// unknown): what it received, or under `durable` what its log synced, since a report
    /// of records rebuilt from a log counts under `durable` (`promote_from`).
    fn holds(&self, node: NodeId) -> u64 {
        match self.config.safety {
            Safety::Durable(_) => self
                .members
                .iter()
                .find(|progress| progress.node == node)
                .filter(|progress| progress.known)
                .map_or(0, |progress| progress.lsn_durable),
            Safety::OneSafe
            | Safety::Bounded(_)
            | Safety::TwoSafe(_)
            | Safety::TwoSafeApplied(_) => self.received(node),
        }
    }

    /// Whether the group's rule would hold for `lsn` with `backups` as the view's backups:
    /// as many of them as the rule counts (all of them, when there are fewer) hold it as a
    /// promotion counts it (`holds`: under `durable`, synced, so that every released record
    /// is in the logs of k backups of every view, which a promotion's bound on what was
    /// released counts on).
    fn rule_holds_among(&self, backups: &[NodeId], lsn: u64) -> bool {
        let Some(acks) = self.config.safety.backup_acks() else {
            return true;
        };
        let k = acks.needed(backups.len());
        let holding = backups
            .iter()
            .filter(|&&node| self.holds(node) >= lsn)
            .count();
        k > 0 && holding >= k
    }

    /// Records committed here that some backup has not acknowledged receiving: what a failover
    /// could lose (seed 004's uncertainty counter).
    pub fn uncertainty(&self) -> u64 {
        let received_by_all = self
            .members
            .iter()
            .filter(|member| member.counts())
            .map(|backup| backup.lsn_received)
            .min()
            .unwrap_or(self.lsn_committed);
        self.lsn_committed - received_by_all
    }

    /// Whether a call with rule `safety` may commit now. False while the retained tail is full
    /// of records some backup lacks (flow control), while a `bounded(n)` rule has n records
    /// unacknowledged, and once deposed. Evicts acknowledged batches to make room.
    pub fn can_commit(&mut self, safety: Safety) -> bool {
        if self.deposed || self.view_newer.is_some() {
            return false;
        }
        if let Safety::Bounded(n) = safety
            && self.uncertainty() >= n
            && !ignore_bound()
        {
            return false;
        }
        if let Safety::Bounded(n) = self.config.safety
            && self.uncertainty() >= n
            && !ignore_bound()
        {
            return false;
        }
        let lsn_evictable = self.lsn_evictable();
        let extra_records = u64::from(self.builder.record_count()) + 1;
        self.tail
            .make_room(lsn_evictable, extra_records, self.builder.payload_len())
    }

    /// The group's rule unless the call overrides it.
    pub fn effective_safety(&self, call_safety: Option<Safety>) -> Safety {
        call_safety.unwrap_or(self.config.safety)
    }

    /// Takes a locally committed redo record; `reply` is released once `safety` holds.
    ///
    /// Precondition: [`Primary::can_commit`] said yes, and the record has the next LSN.
    /// Returns the record's encoded size.
    pub fn commit(
        &mut self,
        call: CallId,
        record: &RedoRecord,
        safety: Safety,
        reply: R,
    ) -> EncodedSize {
        assert_eq!(self.config.kind, BatchKind::Redo);
        self.assert_can_take(record.lsn(), safety);
        let size = self.builder.push_redo(call, record);
        self.after_commit(record.lsn(), safety, reply);
        size
    }

    /// Takes a commit whose record body `encode` appends to the batch (a passive trace).
    pub fn commit_encoded(
        &mut self,
        lsn: u64,
        safety: Safety,
        reply: R,
        encode: impl FnOnce(&mut Vec<u8>),
    ) {
        self.assert_can_take(lsn, safety);
        let payload = self.builder.payload_mut();
        let len_before = payload.len();
        encode(payload);
        assert!(payload.len() > len_before, "a record body is never empty");
        self.builder.commit_encoded();
        self.after_commit(lsn, safety, reply);
    }

    fn assert_can_take(&self, lsn: u64, safety: Safety) {
        assert!(!self.deposed, "a deposed primary takes no commits");
        assert_eq!(lsn, self.lsn_committed + 1, "commits arrive in LSN order");
        assert_eq!(self.builder.lsn_next(), lsn);
        // Well-formed; a view with fewer backups than its k waits for all of them.
        debug_assert_eq!(safety.validate_form(), Ok(()));
    }

    fn after_commit(&mut self, lsn: u64, safety: Safety, reply: R) {
        self.lsn_committed = lsn;
        self.want_sync(safety, lsn);
        let needs_lease = matches!(safety, Safety::OneSafe | Safety::Bounded(_));
        if self.builder.payload_len() >= self.config.batch_bytes_max {
            self.seal_and_ship();
        }
        let pending = Pending {
            lsn,
            safety,
            needs_lease,
            reply,
        };
        if self.pending.is_empty() {
            // The common case under a lone primary or a 1-safe rule: the reply may leave at
            // once, so it skips the queue (a reply is large; each copy shows in throughput).
            if let Some(pending) = self.release_front(pending) {
                self.pending.push_back(pending);
            }
        } else {
            // Only a reply at the front can go, and the front did not change: no ack arrived
            // since the last release, or the queue would have been released then.
            self.pending.push_back(pending);
        }
        debug_assert!(self.check_invariants());
    }

    /// Holds a reply that has no commit of its own (a read, a call that rolled back). It may
    /// have read the latest commit, so it is released with that commit, once the commit's
    /// rule holds, and only under a valid lease: a primary that a new view replaced must not
    /// answer from its stale state.
    pub fn defer(&mut self, safety: Safety, reply: R) {
        self.hold(safety, true, reply);
    }

    /// Holds the answer to a retry of a call that committed before (found in the dedup
    /// table): released with the latest commit once its rule holds. The answer states a fact
    /// of this primary's history, which that rule makes durable, so under a 2-safe rule no
    /// lease is needed; under 1-safe and bounded rules it is, as for any of their replies.
    pub fn repeat(&mut self, safety: Safety, reply: R) {
        let needs_lease = matches!(safety, Safety::OneSafe | Safety::Bounded(_));
        self.hold(safety, needs_lease, reply);
    }

    /// Holds the answer to a call refused before it ran (an unknown procedure, a stale seq):
    /// it leaves in call order, behind the answers held before it, and waits for no rule and
    /// no lease. It acknowledges nothing, so a primary that a new view replaced may still send
    /// it, and a lapsed lease must not hold back the answers queued behind it.
    pub fn refuse(&mut self, reply: R) {
        self.hold(Safety::OneSafe, false, reply);
    }

    fn hold(&mut self, safety: Safety, needs_lease: bool, reply: R) {
        assert!(!self.deposed, "a deposed primary takes no calls");
        self.want_sync(safety, self.lsn_committed);
        self.ask_sync();
        let pending = Pending {
            lsn: self.lsn_committed,
            safety,
            needs_lease,
            reply,
        };
        if self.pending.is_empty() {
            if let Some(pending) = self.release_front(pending) {
                self.pending.push_back(pending);
            }
        } else {
            self.pending.push_back(pending);
            self.release();
        }
    }

    /// Whether the lease holds now: every member that could report for a new view echoed a
    /// heartbeat sent less than `lease_ticks` ago. Those are the backups, or the spares in a
    /// view without backups (a caught-up spare may then replace the primary). Without a
    /// lease setting, or without members, it always holds.
    pub fn lease_holds(&self) -> bool {
        self.lease_end().is_none_or(|end| self.tick < end)
    }

    /// The tick at which the lease runs out (it holds while the tick is below it), or `None`
    /// if it never does (no lease setting, or no member that could build a new view).
    pub fn lease_end(&self) -> Option<u64> {
        #[cfg(feature = "inject-bugs")]
        if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::IgnoreLease) {
            return None;
        }
        let lease_ticks = self.config.lease_ticks?;
        let backups = self.members.iter().any(Progress::counts);
        self.members
            .iter()
            .filter(|member| member.counts() || !backups)
            .map(|backup| backup.tick_lease_from.map_or(0, |tick| tick + lease_ticks))
            .min()
    }

    /// The link to `node` was re-established: batches in flight on the old one may be lost.
    /// Nothing more is shipped to it until it introduces itself again with an Ack.
    pub fn link_reset(&mut self, node: NodeId) {
        if let Some(backup) = self.members.iter_mut().find(|backup| backup.node == node) {
            backup.known = false;
            backup.needs_transfer = false;
            backup.diverged = None;
            backup.rewind = None;
        }
    }

    /// Sends `node`, which [`PrimaryReady::transfers`] named, the pages of `segment` changed
    /// after the LSN it holds, as they stand at this primary's last commit; from there on it
    /// is shipped batches as usual. Returns what was sent, or `None` if `node` no longer needs
    /// a transfer (its link was reset, it left the view).
    ///
    /// Precondition: `segment` is this primary's, at [`Primary::lsn_committed`].
    pub fn transfer(&mut self, node: NodeId, segment: &Segment) -> Option<TransferSent> {
        assert_eq!(
            self.config.kind,
            BatchKind::Redo,
            "passive traces are not pages"
        );
        assert_eq!(
            segment.lsn(),
            self.lsn_committed,
            "a transfer carries the segment at the last commit"
        );
        let index = self.members.iter().position(|backup| backup.node == node)?;
        if !self.members[index].needs_transfer || self.deposed {
            return None;
        }
        // Batches sealed from here on start after the transferred LSN.
        self.flush_now();
        let lsn = self.lsn_committed;
        let view = self.config.view;
        let backup = &mut self.members[index];
        let (lsn_from, diverged) = match backup.diverged.take() {
            Some((lsn_from, pages)) => (lsn_from, Some(pages)),
            None => (backup.lsn_received, None),
        };
        let diverged = diverged.as_deref().unwrap_or_default();
        if let Some(&page) = diverged.last()
            && page as usize >= segment.pages()
        {
            // Pages this segment does not have: the member runs another configuration.
            backup.needs_transfer = false;
            let from = backup.node;
            self.ready
                .faults
                .push(PrimaryFault::DivergedOutside { from, page });
            return None;
        }
        // A diverged member is shipped batches after its transfer, like any other.
        backup.known = true;
        let chunks = crate::transfer::capture(segment, lsn_from, diverged);
        let count = u32::try_from(chunks.len()).expect("fewer than 2^32 chunks");
        let mut pages = 0;
        for (index, chunk) in chunks.into_iter().enumerate() {
            pages += chunk.len() / crate::transfer::ENTRY_LEN;
            let message = Message::Pages(PagesChunk {
                view,
                lsn_from,
                lsn,
                index: index as u32,
                count,
                crc: crc32c::crc32c(&chunk),
                pages: chunk,
            });
            self.ready.messages.push((node, message));
        }
        backup.needs_transfer = false;
        backup.lsn_sent = lsn;
        backup.rewind = None;
        self.check_invariants();
        Some(TransferSent {
            lsn_from,
            lsn,
            pages,
        })
    }

    /// The executor has nothing more to run: seals and ships the open batch, unless every
    /// backup already has `flush_batches_in_flight_max` batches in flight. Then the records
    /// keep gathering until an ack arrives (or the batch fills, or the tick comes), so under
    /// load batches grow instead of multiplying: adaptive group commit, Nagle's rule with a
    /// window. A link with room always gets the records at once.
    pub fn flush(&mut self) {
        if self.builder.is_empty() {
            return;
        }
        let window = self.config.flush_batches_in_flight_max;
        let tail = &self.tail;
        let room = self.members.iter().any(|backup| {
            backup.known
                && batches_in_flight(tail, backup.lsn_received, backup.lsn_sent, window) < window
        });
        let none_known = self.members.iter().all(|backup| !backup.known);
        if room || none_known {
            self.seal_and_ship();
        }
    }

    /// Seals and ships the open batch, if any, whatever is in flight.
    pub fn flush_now(&mut self) {
        if !self.builder.is_empty() {
            self.seal_and_ship();
        }
    }

    /// Advances logical time: seals the open batch and, every `heartbeat_ticks`, sends every
    /// member a heartbeat.
    pub fn tick(&mut self) {
        self.tick += 1;
        if self.deposed {
            return;
        }
        self.flush_now();
        if self.tick_release_from.is_some_and(|tick| self.tick >= tick) {
            self.tick_release_from = None;
            self.release();
        } else if !self.lapsed.is_empty() {
            // The lease they wait for may hold again at this tick (an echo came meanwhile).
            self.release();
        }
        self.answer_read_indexes();
        // Ticks count from 1 (see `resume`): every `heartbeat_ticks` ticks since the start.
        if (self.tick - 1).is_multiple_of(self.config.heartbeat_ticks) {
            let heartbeat = self.heartbeat();
            for backup in &self.members {
                self.ready.messages.push((backup.node, heartbeat.clone()));
            }
        }
        self.check_invariants();
    }

    /// Handles a message from node `from`.
    pub fn step(&mut self, from: NodeId, message: Message) {
        let Some(index) = self.members.iter().position(|backup| backup.node == from) else {
            self.ready.faults.push(PrimaryFault::UnknownPeer { from });
            return;
        };
        if self.deposed {
            return;
        }
        if let Some(view) = message.view() {
            if view > self.config.view {
                self.view_newer = Some(self.view_newer.map_or(view, |newer| newer.max(view)));
                self.ready
                    .faults
                    .push(PrimaryFault::NewerView { from, view });
                return;
            }
            if view < self.config.view {
                self.ready
                    .faults
                    .push(PrimaryFault::StaleMessage { from, view });
                let current = Message::StaleView {
                    view: self.config.view,
                };
                self.ready.messages.push((from, current));
                return;
            }
        }
        match message {
            Message::Ack {
                lsn_received,
                lsn_applied,
                lsn_durable,
                tick_echoed,
                ..
            } => {
                if tick_echoed > self.tick {
                    // A heartbeat this primary never sent: the echo proves nothing.
                    self.ready
                        .faults
                        .push(PrimaryFault::EchoAhead { from, tick_echoed });
                    return;
                }
                if tick_echoed > 0 {
                    let backup = &mut self.members[index];
                    backup.tick_lease_from = backup.tick_lease_from.max(Some(tick_echoed));
                }
                let introduced = !self.members[index].known;
                let claim = Claim {
                    lsn_received,
                    lsn_applied,
                    lsn_durable,
                };
                if self.learn_progress(index, claim) {
                    if introduced {
                        // A heartbeat at once: its echo starts the lease without waiting
                        // for the next tick (a new primary's first replies need it).
                        self.greet(index);
                    }
                    self.catch_up(index);
                    self.release();
                }
                // The echo may have renewed the lease that questions wait for.
                self.answer_read_indexes();
            }
            Message::Nack { lsn_received, .. } => {
                // A Nack does not say what is applied: keep what is known, never above what
                // the backup holds (after a restart that is less than before).
                let backup = &self.members[index];
                let (lsn_applied, lsn_durable) = if backup.known {
                    (
                        backup.lsn_applied.min(lsn_received),
                        backup.lsn_durable.min(lsn_received),
                    )
                } else {
                    (0, 0)
                };
                let claim = Claim {
                    lsn_received,
                    lsn_applied,
                    lsn_durable,
                };
                if self.learn_progress(index, claim) {
                    self.maybe_rewind(index, lsn_received);
                    self.catch_up(index);
                    self.release();
                }
            }
            Message::Diverged {
                lsn_received,
                pages,
                ..
            } => self.on_diverged(index, lsn_received, pages),
            Message::ReadIndex { id, .. } => {
                self.read_indexes.push((from, id));
                self.answer_read_indexes();
            }
            // A StaleView of our own view carries no news.
            Message::StaleView { .. } => {}
            Message::Batch(_)
            | Message::Heartbeat { .. }
            | Message::Pulse { .. }
            | Message::Pages(_)
            | Message::SyncWanted { .. }
            | Message::ReadIndexed { .. } => {
                self.ready.faults.push(PrimaryFault::Unexpected { from });
            }
        }
        self.check_invariants();
    }

    /// Moves the outputs accumulated so far into `into`, which must be empty; both keep their
    /// buffers, so a driver that clears and passes the same value back allocates nothing.
    pub fn take_ready(&mut self, into: &mut PrimaryReady<R>) {
        assert!(
            into.is_empty(),
            "the driver must act on and clear the previous Ready"
        );
        std::mem::swap(&mut self.ready, into);
    }

    /// Carries out the state transfers `ready` names ([`PrimaryReady::transfers`]) from
    /// `segment`, this primary's at its last commit, and appends what they produced (the
    /// `Pages` messages, anything else released meanwhile) to `ready`, whose `transfers` are
    /// then empty. Returns each transfer sent, for the driver's log. The runtime and the
    /// simulator both call this, so no output is lost on the way (the simulator once dropped
    /// the abandoned replies and faults a transfer's round trip produced).
    pub fn transfer_named(
        &mut self,
        ready: &mut PrimaryReady<R>,
        segment: &Segment,
    ) -> Vec<(NodeId, TransferSent)> {
        if ready.transfers.is_empty() {
            return Vec::new();
        }
        let mut sent = Vec::with_capacity(ready.transfers.len());
        for node in std::mem::take(&mut ready.transfers) {
            if let Some(transfer) = self.transfer(node, segment) {
                sent.push((node, transfer));
            }
        }
        let more = std::mem::take(&mut self.ready);
        assert!(more.transfers.is_empty(), "a transfer asks for no other");
        let PrimaryReady {
            mut messages,
            mut replies,
            mut abandoned,
            transfers: _,
            mut to_log,
            sync_wanted,
            mut faults,
        } = more;
        ready.to_log.append(&mut to_log);
        ready.sync_wanted = ready.sync_wanted.max(sync_wanted);
        ready.messages.append(&mut messages);
        ready.replies.append(&mut replies);
        ready.abandoned.append(&mut abandoned);
        ready.faults.append(&mut faults);
        sent
    }

    /// The primary's tick count: a driver that sends replies as soon as they are released
    /// passes it to [`PrimaryReady::drain_replies`].
    pub fn tick_count(&self) -> u64 {
        self.tick
    }

    fn greet(&mut self, index: usize) {
        let heartbeat = self.heartbeat();
        let node = self.members[index].node;
        self.ready.messages.push((node, heartbeat));
        // A backup that connects after the ask still owes the replies waiting their sync.
        if self.lsn_sync_asked > 0 && self.members[index].counts() {
            let ask = Message::SyncWanted {
                view: self.config.view,
                lsn: self.lsn_sync_asked,
            };
            self.ready.messages.push((node, ask));
        }
    }

    /// What has been shipped and released, and this tick (which echoes renew the lease).
    fn heartbeat(&self) -> Message {
        Message::Heartbeat {
            view: self.config.view,
            lsn_committed: self.tail.lsn_next() - 1,
            lsn_released: self.lsn_released,
            tick_sent: self.tick,
        }
    }

    /// Records what a backup says it holds. Returns false if the claim was refused.
    fn learn_progress(&mut self, index: usize, claim: Claim) -> bool {
        let Claim {
            lsn_received,
            lsn_applied,
            lsn_durable,
        } = claim;
        let backup = &mut self.members[index];
        if lsn_received > self.lsn_committed
            || lsn_applied > lsn_received
            || lsn_durable > lsn_received
        {
            self.ready.faults.push(PrimaryFault::BackupAhead {
                from: backup.node,
                lsn_received,
            });
            return false;
        }
        if !backup.known {
            // The backup's introduction (a new link) is the truth, even if it is behind what
            // it acked before: a backup that restarted has lost what it held. Ship from there.
            backup.known = true;
            backup.lsn_received = lsn_received;
            backup.lsn_applied = lsn_applied;
            backup.lsn_durable = lsn_durable;
            backup.lsn_sent = lsn_received;
            return true;
        }
        backup.lsn_received = backup.lsn_received.max(lsn_received);
        backup.lsn_applied = backup.lsn_applied.max(lsn_applied);
        backup.lsn_durable = backup.lsn_durable.max(lsn_durable);
        backup.lsn_sent = backup.lsn_sent.max(backup.lsn_received);
        true
    }

    /// This node's write-ahead log has synced every record up to `lsn` (the driver's report;
    /// it never goes back within one primary role). Releases the `durable` replies it holds.
    pub fn log_synced(&mut self, lsn: u64) {
        assert!(
            lsn <= self.lsn_committed,
            "the log synced LSN {lsn}, beyond the last commit {}",
            self.lsn_committed
        );
        if lsn <= self.lsn_durable {
            return;
        }
        self.lsn_durable = lsn;
        self.release();
        self.check_invariants();
    }

    /// What this node's write-ahead log has synced, as last reported.
    pub fn lsn_durable(&self) -> u64 {
        self.lsn_durable
    }

    /// A member introduced itself with `Diverged`: whatever it said before, it holds the
    /// group's history at `lsn_received` except on `pages`, and gets a transfer of those and
    /// of the pages changed after `lsn_received` before any batch. Until that transfer is
    /// sent it counts as holding nothing (it could not take over), and until it acks the
    /// transfer, as holding nothing new. Asked again (its introduction or the transfer was
    /// lost), it gets another.
    fn on_diverged(&mut self, index: usize, lsn_received: u64, pages: Arc<[u32]>) {
        let backup = &mut self.members[index];
        let from = backup.node;
        if lsn_received > self.lsn_committed {
            self.ready
                .faults
                .push(PrimaryFault::BackupAhead { from, lsn_received });
            return;
        }
        if self.config.kind != BatchKind::Redo {
            // A passive backup's mirror takes no pages; a passive member never rewinds.
            self.ready.faults.push(PrimaryFault::Unexpected { from });
            return;
        }
        backup.known = false;
        backup.lsn_received = 0;
        backup.lsn_applied = 0;
        backup.lsn_durable = 0;
        backup.lsn_sent = 0;
        backup.rewind = None;
        backup.diverged = Some((lsn_received, pages));
        if !backup.needs_transfer {
            backup.needs_transfer = true;
            self.ready.transfers.push(from);
        }
    }

    /// After a Nack, ship again from `lsn_received` unless a rewind to the same place happened
    /// within `resend_ticks` (the Nacks of batches already in flight behind the gap).
    fn maybe_rewind(&mut self, index: usize, lsn_received: u64) {
        let tick = self.tick;
        let resend_ticks = self.config.resend_ticks;
        let backup = &mut self.members[index];
        // A late or duplicated Nack may name less than the backup is known to hold in this
        // incarnation: never ship again from below that.
        let lsn_received = lsn_received.max(backup.lsn_received);
        if backup.lsn_sent <= lsn_received {
            return;
        }
        if let Some((tick_rewound, lsn_rewound)) = backup.rewind
            && lsn_rewound == lsn_received
            && tick - tick_rewound < resend_ticks
        {
            return;
        }
        backup.rewind = Some((tick, lsn_received));
        backup.lsn_sent = lsn_received;
    }

    /// Ships to one backup every sealed batch it has not been sent.
    fn catch_up(&mut self, index: usize) {
        let backup = &mut self.members[index];
        let lsn_shipped = self.tail.lsn_next() - 1;
        if !backup.known || backup.needs_transfer || backup.lsn_sent >= lsn_shipped {
            return;
        }
        if !self.tail.covers(backup.lsn_sent) {
            backup.needs_transfer = true;
            if self.config.kind == BatchKind::Redo {
                self.ready.transfers.push(backup.node);
            } else {
                self.ready.faults.push(PrimaryFault::TailMissed {
                    from: backup.node,
                    lsn_received: backup.lsn_sent,
                    lsn_first: self.tail.lsn_first(),
                });
            }
            return;
        }
        // A backup that is behind gets a window of batches at a time, the next as its acks
        // come back: a rewind after a lost batch resends a window, not the whole tail.
        let window = CATCH_UP_BATCHES_IN_FLIGHT_MAX;
        let in_flight = batches_in_flight(&self.tail, backup.lsn_received, backup.lsn_sent, window);
        let room = window.saturating_sub(in_flight);
        for batch in self.tail.batches_from(backup.lsn_sent + 1).take(room) {
            self.ready
                .messages
                .push((backup.node, Message::Batch(batch.shared())));
            backup.lsn_sent = batch.lsn_last();
        }
    }

    fn seal_and_ship(&mut self) {
        let batch: SealedBatch = self.builder.seal();
        self.ready.to_log.push(batch.clone());
        for backup in &mut self.members {
            if backup.known && !backup.needs_transfer && backup.lsn_sent + 1 == batch.lsn_base() {
                self.ready
                    .messages
                    .push((backup.node, Message::Batch(batch.shared())));
                backup.lsn_sent = batch.lsn_last();
            }
        }
        self.tail.push(batch);
        self.ask_sync();
    }

    /// A reply under `safety` at `lsn` is held: under `durable` the logs must sync it.
    fn want_sync(&mut self, safety: Safety, lsn: u64) {
        if let Safety::Durable(_) = safety
            && lsn > self.lsn_sync_wanted
        {
            self.lsn_sync_wanted = lsn;
            self.ready.sync_wanted = Some(lsn);
        }
    }

    /// Asks the backups to sync what a durable reply waits for, once it is shipped (each
    /// LSN once: a backup that missed the ask syncs on its own schedule, or at the next).
    fn ask_sync(&mut self) {
        let lsn_shipped = self.tail.lsn_next() - 1;
        let lsn = self.lsn_sync_wanted.min(lsn_shipped);
        if lsn <= self.lsn_sync_asked {
            return;
        }
        self.lsn_sync_asked = lsn;
        let view = self.config.view;
        for backup in &self.members {
            if backup.known && backup.counts() {
                let ask = Message::SyncWanted { view, lsn };
                self.ready.messages.push((backup.node, ask));
            }
        }
    }

    /// The highest LSN a `durable` reply waits for: the driver's own log syncs at least that
    /// far at once, whatever its schedule.
    pub fn lsn_sync_wanted(&self) -> u64 {
        self.lsn_sync_wanted
    }

    /// A primary started by a promotion: no reply above `lsn_released_max`, the promotion's
    /// bound on what earlier views released, counts as released. The records it took over
    /// above that bound are held by no backup the promotion counted on, so what it says is
    /// released (its `ReadIndexed` answers, its heartbeats, and the releases of a view
    /// without backups) must not reach them until its own backups hold them (k-of-n seed
    /// 508619 at 2,000 ticks: a promoted primary started with every record it took over
    /// counted released, a backup served a linearizable read of records the next promotion
    /// discarded, and a later read saw less).
    pub fn released_at_most(&mut self, lsn_released_max: u64) {
        self.lsn_released = self.lsn_released.min(lsn_released_max);
    }

    /// Releases no reply for the next `ticks` ticks (they leave at the first tick after).
    /// A primary started by a promotion calls it with the rest of the lease its node granted
    /// the old primary: the old primary may still answer under that lease (a read, a 1-safe
    /// commit), and no answer of this one may come before such an answer it does not reflect.
    /// Commits and shipping go on meanwhile.
    pub fn hold_releases(&mut self, ticks: u64) {
        #[cfg(feature = "inject-bugs")]
        if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::IgnoreLeaseOwed) {
            return;
        }
        if ticks > 0 {
            self.tick_release_from = Some(self.tick + ticks);
        }
    }

    /// Answers every waiting `ReadIndex` with the released LSN, if a reply that needs the
    /// lease could leave now: this node is the primary of the newest view it knows, owes no
    /// earlier primary its lease, and its own lease holds. Then no other node can have
    /// acknowledged a write this primary does not hold (a new view needs reports that the
    /// lease forbids until after it ends), and every write this one acknowledged lies at or
    /// below its released LSN. Otherwise the questions wait; the member's reads time out
    /// and their clients ask the primary itself.
    fn answer_read_indexes(&mut self) {
        if self.read_indexes.is_empty() {
            return;
        }
        if self.view_newer.is_some() || self.deposed || self.holding() || !self.lease_holds() {
            return;
        }
        let lsn_released = self.lsn_released;
        let view = self.config.view;
        for (node, id) in self.read_indexes.drain(..) {
            let answer = Message::ReadIndexed {
                view,
                id,
                lsn_released,
            };
            self.ready.messages.push((node, answer));
        }
    }

    /// Whether replies are held back for the lease a promotion owes ([`Primary::hold_releases`]).
    fn holding(&self) -> bool {
        self.tick_release_from.is_some_and(|tick| self.tick < tick)
    }

    /// Releases `pending`, a reply with nothing held before it, if its rule holds now; hands
    /// it back to be held if not. The same decision as [`Primary::release`] makes for the
    /// front of the queue, without the trip through it.
    fn release_front(&mut self, pending: Pending<R>) -> Option<Pending<R>> {
        assert!(
            self.pending.is_empty(),
            "a reply skips the queue only when it is empty"
        );
        if self.view_newer.is_some() || self.deposed || self.holding() || !self.lapsed.is_empty() {
            return Some(pending);
        }
        let lease_end = self.lease_end();
        let lease_holds = lease_end.is_none_or(|end| self.tick < end);
        if pending.needs_lease && !lease_holds {
            return Some(pending);
        }
        if pending.lsn > self.lsn_releasable(pending.safety) {
            return Some(pending);
        }
        self.lsn_released = self.lsn_released.max(pending.lsn);
        self.ready.replies.push(Reply {
            lsn: pending.lsn,
            reply: pending.reply,
            lease_end: if pending.needs_lease { lease_end } else { None },
        });
        None
    }

    /// Releases, in LSN order, every pending reply whose rule holds.
    fn release(&mut self) {
        // Under a newer view this node may have been replaced: acks it counted may come from
        // backups that have since moved on, so nothing leaves until the view is resolved.
        if self.view_newer.is_some() || self.deposed || self.holding() {
            return;
        }
        // Most replies share one rule: compute its threshold once per release, not per reply.
        let mut memo: Option<(Safety, u64)> = None;
        let lease_end = self.lease_end();
        let lease_holds = lease_end.is_none_or(|end| self.tick < end);
        if !self.lapsed.is_empty() {
            if !lease_holds || lease_end.is_some_and(|end| end <= self.lapsed_lease_end) {
                return;
            }
            for lapsed in self.lapsed.drain(..) {
                self.ready.replies.push(Reply {
                    lease_end: lapsed.lease_end.and(lease_end),
                    ..lapsed
                });
            }
        }
        while let Some(front) = self.pending.front() {
            if front.needs_lease && !lease_holds {
                break;
            }
            let releasable = match memo {
                Some((safety, lsn)) if safety == front.safety => lsn,
                _ => {
                    let safety = front.safety;
                    let lsn = self.lsn_releasable(safety);
                    memo = Some((safety, lsn));
                    lsn
                }
            };
            let front = self.pending.front().expect("checked above");
            if front.lsn > releasable {
                break;
            }
            let pending = self.pending.pop_front().expect("front exists");
            self.lsn_released = self.lsn_released.max(pending.lsn);
            self.ready.replies.push(Reply {
                lsn: pending.lsn,
                reply: pending.reply,
                lease_end: if pending.needs_lease { lease_end } else { None },
            });
        }
    }

    /// The highest LSN whose commits `safety` allows to be acknowledged now.
    fn lsn_releasable(&mut self, safety: Safety) -> u64 {
        #[cfg(feature = "inject-bugs")]
        if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::EarlyReply) {
            return self.lsn_committed;
        }
        let (held, acks) = match safety {
            Safety::OneSafe | Safety::Bounded(_) => return self.lsn_committed,
            Safety::TwoSafe(acks) => (Held::Received, acks),
            Safety::TwoSafeApplied(acks) => (Held::Applied, acks),
            Safety::Durable(acks) => (Held::Durable, acks),
        };
        // A durable record must be on this node's disk too.
        let lsn_local = match held {
            Held::Durable => self.lsn_durable,
            Held::Received | Held::Applied => self.lsn_committed,
        };
        let n = self.config.backups.len();
        let k = acks.needed(n);
        if k == 0 && self.config.lone {
            return lsn_local;
        }
        if k == 0 {
            // No backup left in a group that has other nodes: nothing new leaves. Under
            // `durable`, not even what a promotion took over as released (`resume` counts
            // every record it took over) until this node's own log synced it: a retry
            // answered from the dedup table would otherwise acknowledge a record no disk of
            // the view holds (simulator seed 643: the promoted backup's log was poisoned).
            return self.lsn_released.min(lsn_local);
        }
        let progress_lsn = |backup: &Progress| match held {
            Held::Received => backup.lsn_received,
            Held::Applied => backup.lsn_applied,
            #[cfg(feature = "inject-bugs")]
            Held::Durable
                if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::DurableBeforeSync) =>
            {
                backup.lsn_received
            }
            Held::Durable => backup.lsn_durable,
        };
        self.sorted.clear();
        self.sorted.extend(
            self.members
                .iter()
                .filter(|member| member.counts())
                .map(progress_lsn),
        );
        let mut releasable = kth_highest(&mut self.sorted, k);
        // Every view asked for must hold the record too (see `prospects`).
        #[cfg(feature = "inject-bugs")]
        if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::IgnoreViewsAskedFor) {
            return releasable;
        }
        for prospect in &self.prospects {
            let k = acks.needed(prospect.len());
            assert!(k > 0, "a view asked for has a backup");
            self.sorted.clear();
            self.sorted.extend(prospect.iter().map(|&node| {
                self.members
                    .iter()
                    .find(|backup| backup.node == node)
                    .map_or(0, progress_lsn)
            }));
            releasable = releasable.min(kth_highest(&mut self.sorted, k));
        }
        releasable.min(lsn_local)
    }

    /// Records every backup has received may leave the tail.
    fn lsn_evictable(&self) -> u64 {
        self.members
            .iter()
            .filter(|member| member.counts())
            .map(|backup| backup.lsn_received)
            .min()
            .unwrap_or(self.lsn_committed)
    }

    /// The invariants that hold between steps; returns true so it can sit in debug_assert.
    fn check_invariants(&self) -> bool {
        assert_eq!(self.builder.lsn_next(), self.lsn_committed + 1);
        assert_eq!(
            self.tail.lsn_next() + u64::from(self.builder.record_count()),
            self.lsn_committed + 1,
            "every committed record is sealed in the tail or waiting in the open batch"
        );
        let lsn_shipped = self.tail.lsn_next() - 1;
        for backup in &self.members {
            assert!(backup.lsn_applied <= backup.lsn_received);
            assert!(backup.lsn_durable <= backup.lsn_received);
            assert!(backup.lsn_received <= self.lsn_committed);
            assert!(backup.lsn_sent <= lsn_shipped.max(backup.lsn_received));
        }
        if let (Some(first), Some(last)) = (self.pending.front(), self.pending.back()) {
            assert!(first.lsn <= last.lsn);
            assert!(last.lsn <= self.lsn_committed);
        }
        // Lapsed replies were released: in LSN order, before every pending one.
        assert!(
            self.deposed
                || self
                    .lapsed
                    .iter()
                    .all(|reply| reply.lsn <= self.lsn_committed)
        );
        if let (Some(last), Some(first)) = (self.lapsed.back(), self.pending.front()) {
            assert!(last.lsn <= first.lsn);
        }
        // A deposed primary answers no read index: a new view may acknowledge what it lacks.
        assert!(!self.deposed || self.read_indexes.is_empty());
        assert!(self.lsn_durable <= self.lsn_committed);
        true
    }
}
