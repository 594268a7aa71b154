//! The backup receiver: accepts batches from the primary in LSN order and acks their receipt.
//!
//! A batch is accepted only if it parses whole with a good checksum, belongs to this group and
//! view, and continues exactly where the received records end (a batch that overlaps what is
//! held is trimmed; one entirely held is a duplicate and only re-acked). A gap or a corrupt
//! batch is answered with a Nack asking for everything after the last record held. Nothing from
//! a refused batch ever reaches the applier.
//!
//! A state transfer ([`crate::transfer`]) arrives as `Pages` chunks in order. They are staged
//! until the last one, then handed over whole; a chunk out of order or corrupt drops the
//! staged ones and asks again with a Nack, as does a heartbeat that finds a transfer
//! unfinished (the link is FIFO, so its remaining chunks were lost).
//!
//! A member whose segment was rewound ([`Receiver::rejoin`]: it kept its segment through a view
//! change that discarded some of its records) introduces itself with `Diverged` instead of an
//! Ack, and takes nothing but a state transfer that replaces every diverged page; until then
//! it acks nothing and takes no batch, and a heartbeat that finds no transfer under way asks
//! again.

use std::sync::Arc;

use tandem_redo::{BatchError, SealedBatch};

use crate::message::{Message, NodeId, PagesChunk};
use crate::transfer::PageImage;

/// How a receiver is set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReceiverConfig {
    pub group: u32,
    pub view: u64,
    /// The primary of the view: the only node batches are accepted from.
    pub primary: NodeId,
    /// A Nack for the same gap is repeated only after this many ticks without progress.
    pub nack_ticks: u64,
}

/// A batch accepted for application: its records from `lsn_from` on are new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyBatch {
    pub batch: SealedBatch,
    /// First LSN not yet handed to the applier; earlier records of the batch were.
    pub lsn_from: u64,
}

/// Something the receiver refused or noticed; counted, never applied.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ReceiverFault {
    /// The batch failed to parse or its checksum did not match.
    Corrupt { from: NodeId, error: BatchError },
    /// A message from an older view; the sender was told the current one.
    StaleMessage { from: NodeId, view: u64 },
    /// A message from a newer view than this backup knows; ignored until the view is learned.
    FutureView { from: NodeId, view: u64 },
    /// A batch for another group.
    WrongGroup { from: NodeId, group: u32 },
    /// A message from a node that is not this view's primary.
    UnknownPeer { from: NodeId },
    /// A batch that starts after the next expected LSN.
    Gap { lsn_expected: u64, lsn_base: u64 },
    /// A batch whose records are all held already.
    Duplicate { lsn_base: u64, lsn_last: u64 },
    /// A message a backup never expects (an Ack, a Nack).
    Unexpected { from: NodeId },
    /// A state transfer's chunk failed its checksum, came out of order, or was built for
    /// records this member does not hold; the staged chunks are dropped.
    TransferRefused { from: NodeId, lsn: u64, index: u32 },
    /// A batch or a transfer that leaves a diverged page unreplaced, sent to a member that
    /// introduced itself with `Diverged`: dropped, and the member asks again.
    DivergedLeft { from: NodeId },
}

/// What the driver must do after feeding the receiver.
///
/// Order: hand `to_install` to the applier (it follows every batch handed over before this
/// Ready and replaces what they would have done), then `to_apply` (in order), then
/// `read_indexes` (to whatever holds the member's reads), then send `messages`. An ack claims the records are held, so they must be held before it leaves.
#[derive(Debug, Default)]
pub struct ReceiverReady {
    pub to_install: Option<PageImage>,
    pub to_apply: Vec<ApplyBatch>,
    pub messages: Vec<(NodeId, Message)>,
    /// The primary's answers to `ReadIndex` questions, as (id, released LSN), in arrival
    /// order: for the member's reads, after the batches before them.
    pub read_indexes: Vec<(u64, u64)>,
    /// The primary asked the node's log to sync records up to this LSN at once (a `durable`
    /// reply waits for them), if it did since the last take.
    pub sync_wanted: Option<u64>,
    pub faults: Vec<ReceiverFault>,
}

impl ReceiverReady {
    pub fn is_empty(&self) -> bool {
        self.to_install.is_none()
            && self.to_apply.is_empty()
            && self.messages.is_empty()
            && self.read_indexes.is_empty()
            && self.sync_wanted.is_none()
            && self.faults.is_empty()
    }

    pub fn clear(&mut self) {
        self.to_install = None;
        self.to_apply.clear();
        self.sync_wanted = None;
        self.messages.clear();
        self.read_indexes.clear();
        self.faults.clear();
    }
}

/// The chunks of a state transfer received so far.
#[derive(Debug)]
struct Staging {
    lsn_from: u64,
    lsn: u64,
    count: u32,
    chunks: Vec<Arc<[u8]>>,
}

/// The receiving half of a backup.
#[derive(Debug)]
pub struct Receiver {
    config: ReceiverConfig,
    lsn_received: u64,
    /// As last reported by the applier; carried on acks.
    lsn_applied: u64,
    /// As last reported by the node's write-ahead log; carried on acks (capped at
    /// `lsn_received`).
    lsn_durable: u64,
    tick: u64,
    /// The primary's `tick_sent` on the newest heartbeat accepted (0: none yet), echoed on
    /// every ack. It only grows: a late heartbeat renews nothing.
    tick_echoed: u64,
    /// (tick, lsn_received) of the last Nack sent.
    nack: Option<(u64, u64)>,
    /// A state transfer under way.
    staging: Option<Staging>,
    /// The highest LSN the primary said it released a reply for: records up to here hold
    /// under the group's rule, so a reader may see them.
    lsn_released: u64,
    /// How many messages saying what the primary released were accepted (heartbeats and
    /// read index answers): a driver that sees it move knows `lsn_released` is fresh.
    released_heard: u64,
    /// The pages of a rewound segment that a transfer must replace before anything else is
    /// taken ([`Receiver::rejoin`]); `None` once one has.
    diverged: Option<Arc<[u32]>>,
    ready: ReceiverReady,
}

impl Receiver {
    /// A receiver on a backup whose segment holds every record up to `lsn_received`.
    pub fn new(config: ReceiverConfig, lsn_received: u64) -> Receiver {
        assert!(config.nack_ticks >= 1, "nack_ticks must be at least 1");
        Receiver {
            config,
            lsn_received,
            lsn_applied: lsn_received,
            lsn_durable: 0,
            tick: 0,
            tick_echoed: 0,
            nack: None,
            staging: None,
            lsn_released: 0,
            released_heard: 0,
            diverged: None,
            ready: ReceiverReady::default(),
        }
    }

    /// A receiver on a member whose segment was rewound to `lsn_received` and differs from the
    /// group's history at that LSN on `diverged` (ascending, non-empty, at most
    /// [`crate::DIVERGED_PAGES_MAX`]; see `Segment::rewind`). It introduces itself with
    /// `Diverged` and takes only a transfer that replaces those pages.
    pub fn rejoin(config: ReceiverConfig, lsn_received: u64, diverged: Arc<[u32]>) -> Receiver {
        assert!(!diverged.is_empty(), "a rejoin has diverged pages");
        assert!(
            diverged.len() <= crate::DIVERGED_PAGES_MAX,
            "{} diverged pages, more than a Diverged message names",
            diverged.len()
        );
        assert!(
            diverged.is_sorted_by(|a, b| a < b),
            "diverged pages are strictly ascending"
        );
        Receiver {
            diverged: Some(diverged),
            ..Receiver::new(config, lsn_received)
        }
    }

    /// Whether this member still waits for a transfer that replaces its diverged pages.
    pub fn is_diverged(&self) -> bool {
        self.diverged.is_some()
    }
    /// A receiver on a backup that holds every record up to `lsn_received`, of which its
    /// applier has applied those up to `lsn_applied` (a new connection while the applier
    /// still works through what the last one received).
    pub fn resume(config: ReceiverConfig, lsn_received: u64, lsn_applied: u64) -> Receiver {
        assert!(
            lsn_applied <= lsn_received,
            "applied beyond what was received"
        );
        Receiver {
            lsn_applied,
            ..Receiver::new(config, lsn_received)
        }
    }

    pub fn view(&self) -> u64 {
        self.config.view
    }

    /// The group whose stream this receiver takes.
    pub fn group(&self) -> u32 {
        self.config.group
    }

    /// The primary this receiver takes records from.
    pub fn primary(&self) -> NodeId {
        self.config.primary
    }

    pub fn lsn_received(&self) -> u64 {
        self.lsn_received
    }

    /// The most this receiver's acks said its node's log synced (0: none said any).
    pub fn lsn_synced_told(&self) -> u64 {
        self.lsn_durable.min(self.lsn_received)
    }

    pub fn lsn_applied(&self) -> u64 {
        self.lsn_applied
    }

    /// The highest LSN the primary has released a reply for, as its heartbeats said (0: none
    /// heard in this view yet). A backup shows readers no state beyond it: records above it
    /// may still be discarded by a view change.
    pub fn lsn_released(&self) -> u64 {
        self.lsn_released
    }

    /// How many messages saying what the primary released were accepted so far; each one
    /// (even one that repeats the LSN) says `lsn_released` held when the primary sent it.
    pub fn released_heard(&self) -> u64 {
        self.released_heard
    }

    /// The newest heartbeat tick accepted, which acks echo (0: none yet).
    pub fn tick_echoed(&self) -> u64 {
        self.tick_echoed
    }

    /// Ticks counted so far ([`Receiver::tick`]).
    pub fn ticks(&self) -> u64 {
        self.tick
    }

    /// The config store committed view `view` with the same primary (a backup joined or left):
    /// the receiver speaks the new view from now on and tells the primary where it stands.
    pub fn install_view(&mut self, view: u64) {
        assert!(view >= self.config.view, "views only move forward");
        if view > self.config.view {
            self.config.view = view;
            self.push_ack();
        }
    }

    /// Tells the primary where this backup stands: sent on (re)connecting. A diverged member
    /// asks for its transfer, and asks again only after `nack_ticks`.
    pub fn introduce(&mut self) {
        if self.diverged.is_some() {
            self.nack = Some((self.tick, self.lsn_received));
        }
        self.push_ack();
    }

    /// The applier has applied every record up to `lsn_applied`.
    pub fn applied(&mut self, lsn_applied: u64) {
        assert!(
            lsn_applied <= self.lsn_received,
            "applied beyond what was received"
        );
        assert!(
            lsn_applied >= self.lsn_applied,
            "applied LSNs only move forward"
        );
        self.lsn_applied = lsn_applied;
    }

    /// The node's write-ahead log has synced every record up to `lsn_durable`; later acks
    /// say so. No ack leaves for it alone: the driver's log sends its own
    /// (`tandem_node::durable_ack`), so a sync is acknowledged without waiting for this
    /// receiver's next message. A log behind what was received is normal; one ahead of it
    /// holds records of this history the receiver has not taken yet (a new connection):
    /// acks claim no more than was received.
    pub fn synced(&mut self, lsn_durable: u64) {
        self.lsn_durable = self.lsn_durable.max(lsn_durable);
    }

    pub fn tick(&mut self) {
        self.tick += 1;
    }

    /// Bytes of a message from the primary are arriving and the message is not whole yet
    /// (a long batch: a large value takes as long to send as its bytes take): answered as a
    /// `Pulse` is, with an ack that echoes no newer tick, so that the primary keeps hearing
    /// this backup while it sends and renews no lease on the strength of it. The driver
    /// calls it at most once a tick.
    pub fn receiving(&mut self) {
        if self.diverged.is_none() {
            self.push_ack();
        }
        self.check_invariants();
    }

    /// Handles a message from node `from`.
    pub fn step(&mut self, from: NodeId, message: Message) {
        if from != self.config.primary {
            self.answer_stranger(from, &message);
            return;
        }
        match message {
            Message::Batch(bytes) => self.on_batch(from, bytes),
            Message::Heartbeat {
                view,
                lsn_committed,
                lsn_released,
                tick_sent,
            } => {
                if self.check_view(from, view) {
                    self.tick_echoed = self.tick_echoed.max(tick_sent);
                    self.lsn_released = self.lsn_released.max(lsn_released);
                    self.released_heard += 1;
                    // Chunks sent before this heartbeat would have arrived before it.
                    self.staging = None;
                    if self.diverged.is_some() {
                        // No transfer came: the introduction was lost, or is still on its
                        // way (asked again only after `nack_ticks`).
                        self.maybe_nack();
                        self.check_invariants();
                        return;
                    }
                    // Every heartbeat is answered, gap or not: the echo renews the lease.
                    self.push_ack();
                    if lsn_committed > self.lsn_received {
                        // Something shipped never arrived.
                        self.maybe_nack();
                    }
                }
            }
            Message::Pulse { view } => {
                // The primary runs: answered so that it hears this backup too. The ack
                // echoes no newer tick, so it renews no lease.
                if self.check_view(from, view) {
                    if self.diverged.is_some() {
                        self.maybe_nack();
                    } else {
                        self.push_ack();
                    }
                }
            }
            Message::Pages(chunk) => {
                if self.check_view(from, chunk.view) {
                    self.on_pages(from, chunk);
                }
            }
            Message::StaleView { view } => {
                if view > self.config.view {
                    self.ready
                        .faults
                        .push(ReceiverFault::FutureView { from, view });
                }
            }
            Message::SyncWanted { view, lsn } => {
                if self.check_view(from, view) {
                    self.ready.sync_wanted = self.ready.sync_wanted.max(Some(lsn));
                }
            }
            Message::ReadIndexed {
                view,
                id,
                lsn_released,
            } => {
                // It answers questions asked in this view only: an answer from an older view
                // says nothing of what the current one acknowledged.
                if self.check_view(from, view) {
                    self.lsn_released = self.lsn_released.max(lsn_released);
                    self.released_heard += 1;
                    self.ready.read_indexes.push((id, lsn_released));
                }
            }
            Message::Ack { .. }
            | Message::Nack { .. }
            | Message::Diverged { .. }
            | Message::ReadIndex { .. } => {
                self.ready.faults.push(ReceiverFault::Unexpected { from });
            }
        }
        self.check_invariants();
    }

    /// Moves the outputs so far into `into`, which must be empty.
    pub fn take_ready(&mut self, into: &mut ReceiverReady) {
        assert!(
            into.is_empty(),
            "the driver must act on and clear the previous Ready"
        );
        std::mem::swap(&mut self.ready, into);
    }

    fn on_batch(&mut self, from: NodeId, bytes: std::sync::Arc<[u8]>) {
        if self.diverged.is_some() {
            // Sent before the primary heard the introduction: nothing applies before the
            // diverged pages are replaced.
            self.ready.faults.push(ReceiverFault::DivergedLeft { from });
            return;
        }
        // Checked once, checksum included; the applier reads the header without checking again.
        let batch = match SealedBatch::verify(bytes) {
            Ok(batch) => batch,
            Err(error) => {
                self.ready
                    .faults
                    .push(ReceiverFault::Corrupt { from, error });
                self.maybe_nack();
                return;
            }
        };
        let parsed = batch.as_ref();
        if parsed.group() != self.config.group {
            let group = parsed.group();
            self.ready
                .faults
                .push(ReceiverFault::WrongGroup { from, group });
            return;
        }
        // A batch sealed in an older view is accepted from this view's primary: it resends
        // records every member of the new view agreed on (those at or below the truncate LSN,
        // which it held when promoted). A batch from a future view waits for the view.
        if parsed.view() > self.config.view {
            let view = parsed.view();
            self.ready
                .faults
                .push(ReceiverFault::FutureView { from, view });
            return;
        }
        let (lsn_base, lsn_last) = (parsed.lsn_base(), parsed.lsn_last());
        if lsn_last <= self.lsn_received {
            self.ready
                .faults
                .push(ReceiverFault::Duplicate { lsn_base, lsn_last });
            self.push_ack();
            return;
        }
        if lsn_base > self.lsn_received + 1 {
            self.ready.faults.push(ReceiverFault::Gap {
                lsn_expected: self.lsn_received + 1,
                lsn_base,
            });
            // During a transfer the gap is expected: the transfer fills it.
            if self.staging.is_none() {
                self.maybe_nack();
            }
            return;
        }
        let lsn_from = self.lsn_received + 1;
        self.ready.to_apply.push(ApplyBatch { batch, lsn_from });
        self.lsn_received = lsn_last;
        self.nack = None;
        self.push_ack();
    }

    fn on_pages(&mut self, from: NodeId, chunk: PagesChunk) {
        let refuse = |receiver: &mut Receiver| {
            receiver.staging = None;
            receiver.ready.faults.push(ReceiverFault::TransferRefused {
                from,
                lsn: chunk.lsn,
                index: chunk.index,
            });
            receiver.maybe_nack();
        };
        if chunk.lsn <= self.lsn_received && self.diverged.is_none() {
            // A transfer to where this member already is: a late duplicate. (A rewound
            // member needs one even to the LSN it holds: its diverged pages are not it.)
            return;
        }
        let whole = chunk.count >= 1 && chunk.index < chunk.count;
        if !whole || crc32c::crc32c(&chunk.pages) != chunk.crc || chunk.lsn_from > self.lsn_received
        {
            refuse(self);
            return;
        }
        if chunk.index == 0 {
            self.staging = Some(Staging {
                lsn_from: chunk.lsn_from,
                lsn: chunk.lsn,
                count: chunk.count,
                // The count comes off the wire: it sizes nothing before the chunks arrive.
                chunks: Vec::with_capacity((chunk.count as usize).min(16)),
            });
        }
        let Some(staging) = self.staging.as_mut() else {
            refuse(self);
            return;
        };
        let next = staging.chunks.len() as u32;
        if (staging.lsn_from, staging.lsn, staging.count, next)
            != (chunk.lsn_from, chunk.lsn, chunk.count, chunk.index)
        {
            refuse(self);
            return;
        }
        staging.chunks.push(chunk.pages);
        if staging.chunks.len() < staging.count as usize {
            return;
        }
        let staging = self.staging.take().expect("staged above");
        if let Some(diverged) = &self.diverged {
            if !crate::transfer::covers(&staging.chunks, diverged) {
                self.ready.faults.push(ReceiverFault::DivergedLeft { from });
                self.maybe_nack();
                return;
            }
            self.diverged = None;
        }
        // The image brings the segment to `lsn`: batches of this Ready that were not handed
        // over yet are inside it.
        self.ready.to_apply.clear();
        self.ready.to_install = Some(PageImage {
            lsn_from: staging.lsn_from,
            lsn: staging.lsn,
            chunks: staging.chunks,
        });
        self.lsn_received = staging.lsn;
        self.nack = None;
        self.push_ack();
    }

    /// A message from a node that is not this view's primary. If it speaks an older view it is
    /// a replaced primary: it is told the current view (fencing), so it stops.
    fn answer_stranger(&mut self, from: NodeId, message: &Message) {
        let view = match message {
            Message::Batch(bytes) => SealedBatch::verify(bytes.clone())
                .ok()
                .map(|batch| batch.as_ref().view()),
            other => other.view(),
        };
        match view {
            Some(view) if view < self.config.view => {
                self.ready
                    .faults
                    .push(ReceiverFault::StaleMessage { from, view });
                let current = Message::StaleView {
                    view: self.config.view,
                };
                self.ready.messages.push((from, current));
            }
            _ => self.ready.faults.push(ReceiverFault::UnknownPeer { from }),
        }
    }

    /// Whether a message of `view` may be acted on; tells an older sender the current view.
    fn check_view(&mut self, from: NodeId, view: u64) -> bool {
        if view < self.config.view {
            self.ready
                .faults
                .push(ReceiverFault::StaleMessage { from, view });
            let current = Message::StaleView {
                view: self.config.view,
            };
            self.ready.messages.push((from, current));
            return false;
        }
        if view > self.config.view {
            self.ready
                .faults
                .push(ReceiverFault::FutureView { from, view });
            return false;
        }
        true
    }

    fn push_ack(&mut self) {
        if let Some(pages) = &self.diverged {
            let diverged = Message::Diverged {
                view: self.config.view,
                lsn_received: self.lsn_received,
                pages: Arc::clone(pages),
            };
            self.ready.messages.push((self.config.primary, diverged));
            return;
        }
        let ack = Message::Ack {
            view: self.config.view,
            lsn_received: self.lsn_received,
            lsn_applied: self.lsn_applied,
            lsn_durable: self.lsn_durable.min(self.lsn_received),
            tick_echoed: self.tick_echoed,
        };
        self.ready.messages.push((self.config.primary, ack));
    }

    /// Asks for everything after `lsn_received`, at most once per `nack_ticks` per gap.
    fn maybe_nack(&mut self) {
        if let Some((tick_sent, lsn)) = self.nack
            && lsn == self.lsn_received
            && self.tick - tick_sent < self.config.nack_ticks
        {
            return;
        }
        self.nack = Some((self.tick, self.lsn_received));
        if self.diverged.is_some() {
            // A diverged member's Nack is its introduction again.
            self.push_ack();
            return;
        }
        let nack = Message::Nack {
            view: self.config.view,
            lsn_received: self.lsn_received,
        };
        self.ready.messages.push((self.config.primary, nack));
    }

    fn check_invariants(&self) {
        assert!(self.lsn_applied <= self.lsn_received);
        if self.diverged.is_some() {
            assert!(
                self.ready.to_apply.is_empty(),
                "a diverged member applies no batch"
            );
            assert!(self.ready.to_install.is_none());
            assert_eq!(self.lsn_applied, self.lsn_received, "nothing taken yet");
        }
        if let Some(last) = self.ready.to_apply.last() {
            assert_eq!(last.batch.lsn_last(), self.lsn_received);
        } else if let Some(image) = &self.ready.to_install {
            assert_eq!(image.lsn, self.lsn_received);
        }
        if let Some(staging) = &self.staging {
            assert!(staging.chunks.len() < staging.count as usize);
            assert!(staging.lsn_from <= self.lsn_received);
        }
    }
}
