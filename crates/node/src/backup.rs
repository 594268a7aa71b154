//! The backup role's applier: what a backup decides about each batch and state transfer its
//! receiver accepted, whichever driver carries them.
//!
//! The runtime's applier thread and the simulator's backups both hold an [`ApplierRole`].
//! They hand it what the receiver core accepted, in the order accepted, and after each turn
//! take the ack that reports what was applied ([`ApplierRole::take_ack`]), which leaves after
//! the receiver's own acks of that turn. A promotion or a switch of primaries takes the
//! segment and the retained batches back out ([`ApplierRole::handover`]).

use std::collections::VecDeque;

use tandem_memory::{PassiveMirror, Segment};
use tandem_redo::{CallId, SealedBatch, TailLimits};
use tandem_replication::{
    Applier, ApplyBatch, ApplyError, Kept, Message, PassiveApplier, keep_applied,
    transfer::PageImage,
};

use crate::checkpoint::Checkpointer;
use crate::log::LogOrder;

/// Rewinds `segment` to the truncate LSN `lsn` for a [`tandem_cluster::role::Transition::Rejoin`].
/// False when its diverged pages are more than a `Diverged` introduction names
/// ([`tandem_replication::DIVERGED_PAGES_MAX`]): the driver reloads the initial database
/// instead.
pub fn rewind_to_rejoin(segment: &mut Segment, lsn: u64) -> bool {
    segment.rewind(lsn).len() <= tandem_replication::DIVERGED_PAGES_MAX
}

/// What a backup applies records to.
#[derive(Debug)]
// One per backup role, built once and never moved on a hot path: the size is harmless.
#[allow(clippy::large_enum_variant)]
pub enum Replica {
    /// An active backup replays redo records on a segment of its own.
    Active { segment: Segment, applier: Applier },
    /// A passive backup's mirror takes the primary's write-through traces.
    Passive {
        mirror: PassiveMirror,
        applier: PassiveApplier,
    },
}

/// Why a backup cannot hand its segment over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HandoverError {
    #[error(
        "the applier is at LSN {lsn_applied} and was asked to hand over at {lsn} with nothing \
         more to apply"
    )]
    Behind { lsn_applied: u64, lsn: u64 },
    #[error("a passive backup cannot be promoted or follow another primary: it executes nothing")]
    Passive,
}

/// What a promoted backup (or one that follows a new primary) takes into its next role.
#[derive(Debug)]
pub struct Handover {
    pub segment: Segment,
    /// The batches it applied, contiguous and ending at the segment's LSN, oldest first.
    pub batches: Vec<SealedBatch>,
}

/// The applier of one backup role: its replica, and the batches it applied, kept for a
/// promotion (the new primary's retained tail) within the same limits as a primary's tail.
#[derive(Debug)]
pub struct ApplierRole {
    replica: Replica,
    tail: VecDeque<SealedBatch>,
    tail_records: u64,
    tail_bytes: usize,
    tail_limits: TailLimits,
    /// Something was applied since the last ack was taken.
    applied_unacked: bool,
    /// When the segment is checkpointed for the node's log (an active backup with a log).
    checkpointer: Option<Checkpointer>,
}

impl ApplierRole {
    /// An active backup's applier on `segment`, with `tail` (the batches it applied in an
    /// earlier role, ending at the segment's LSN) as the start of its retained tail.
    pub fn active(segment: Segment, tail: Vec<SealedBatch>, limits: TailLimits) -> ApplierRole {
        assert!(
            tail.last()
                .is_none_or(|last| last.lsn_last() == segment.lsn()),
            "a backup's retained tail ends at its segment's LSN"
        );
        let applier = Applier::new(segment.lsn());
        let mut role = ApplierRole::new(Replica::Active { segment, applier }, limits);
        for batch in tail {
            role.keep(batch);
        }
        role
    }

    /// A passive backup's applier on `mirror`, which holds every trace up to `lsn_applied`.
    pub fn passive(mirror: PassiveMirror, lsn_applied: u64, limits: TailLimits) -> ApplierRole {
        let applier = PassiveApplier::new(lsn_applied);
        ApplierRole::new(Replica::Passive { mirror, applier }, limits)
    }

    fn new(replica: Replica, tail_limits: TailLimits) -> ApplierRole {
        ApplierRole {
            replica,
            tail: VecDeque::new(),
            tail_records: 0,
            tail_bytes: 0,
            tail_limits,
            applied_unacked: false,
            checkpointer: None,
        }
    }

    /// Checkpoints the segment for the node's log once `bytes_between` bytes of batches
    /// were applied since the last one (`lsn_load`: the initial load's LSN, whose pages a
    /// checkpoint leaves out). A passive backup has no segment to checkpoint.
    /// A role that checkpoints already keeps its schedule and the checkpoint under way.
    pub fn enable_checkpoints(&mut self, bytes_between: u64, lsn_load: u64) {
        if matches!(self.replica, Replica::Active { .. }) && self.checkpointer.is_none() {
            self.checkpointer = Some(Checkpointer::new(bytes_between, lsn_load));
        }
    }

    /// Begins a checkpoint if one is due (or the log `wanted` one: `LogCore::wants_checkpoint`),
    /// or hands the log the next pages of the one under way (at most
    /// [`crate::PAGES_PER_STEP`]); the driver calls it after every turn and when idle, and
    /// carries `orders` out in order with the log's other orders.
    pub fn checkpoint_step(&mut self, wanted: bool, orders: &mut Vec<LogOrder>) {
        if let (Some(checkpointer), Replica::Active { segment, .. }) =
            (&mut self.checkpointer, &mut self.replica)
        {
            checkpointer.step(segment, wanted, orders);
        }
    }

    /// Whether a checkpoint is under way: the driver steps it without waiting for batches.
    pub fn checkpoint_under_way(&self) -> bool {
        self.checkpointer
            .as_ref()
            .is_some_and(Checkpointer::is_under_way)
    }

    pub fn replica(&self) -> &Replica {
        &self.replica
    }

    /// The active backup's segment (a passive backup has none).
    pub fn segment(&self) -> Option<&Segment> {
        match &self.replica {
            Replica::Active { segment, .. } => Some(segment),
            Replica::Passive { .. } => None,
        }
    }

    /// Whether the segment was rewound and waits for the transfer that replaces its diverged
    /// pages (see `Segment::rewind`): it shows no state of the group's history meanwhile.
    pub fn is_diverged(&self) -> bool {
        self.segment()
            .is_some_and(|segment| !segment.diverged().is_empty())
    }

    /// A rewound segment's LSN before its first rewind, while nothing has replaced its
    /// diverged pages (see `Segment::lsn_before_rewind`).
    pub fn lsn_before_rewind(&self) -> Option<u64> {
        self.segment().and_then(Segment::lsn_before_rewind)
    }

    pub fn lsn_applied(&self) -> u64 {
        match &self.replica {
            Replica::Active { applier, .. } => applier.lsn_applied(),
            Replica::Passive { applier, .. } => applier.lsn_applied(),
        }
    }

    /// The client calls of the records the last [`ApplierRole::apply`] applied, in LSN
    /// order (empty for a passive backup: its traces carry none).
    pub fn calls_applied(&self) -> &[CallId] {
        match &self.replica {
            Replica::Active { applier, .. } => applier.calls_applied(),
            Replica::Passive { .. } => &[],
        }
    }

    /// Applies a batch the receiver accepted. Returns the LSN applied to, or `None` for a
    /// batch applied already (one an older connection's receiver accepted and a newer one
    /// accepted again: each receiver guarantees continuity only on its own connection).
    ///
    /// An error means the primary built a batch that passed its checksum yet cannot apply:
    /// the driver poisons the backup.
    pub fn apply(&mut self, batch: ApplyBatch) -> Result<Option<u64>, ApplyError> {
        if batch.lsn_from != self.lsn_applied() + 1 && batch.batch.lsn_last() <= self.lsn_applied()
        {
            return Ok(None);
        }
        let lsn = match &mut self.replica {
            Replica::Active { segment, applier } => applier.apply(segment, &batch)?,
            Replica::Passive { mirror, applier } => applier.apply(mirror, &batch)?,
        };
        self.applied_unacked = true;
        if let Some(checkpointer) = &mut self.checkpointer {
            checkpointer.applied(batch.batch.len(), batch.batch.view());
        }
        self.keep(batch.batch);
        while self.tail.len() > 1
            && (self.tail_records > self.tail_limits.records_max
                || self.tail_bytes > self.tail_limits.bytes_max)
        {
            let oldest = self.tail.pop_front().expect("not empty");
            self.tail_records -= u64::from(oldest.record_count());
            self.tail_bytes -= oldest.len();
        }
        Ok(Some(lsn))
    }

    /// Installs a state transfer the receiver accepted: the segment goes to the image's LSN
    /// in one step. Returns that LSN, or `None` for an image a newer connection overtook.
    pub fn install(&mut self, image: &PageImage) -> Result<Option<u64>, String> {
        // A rewound segment takes an image even to the LSN it is at: it replaces the
        // diverged pages.
        if image.lsn <= self.lsn_applied() && !self.is_diverged() {
            return Ok(None);
        }
        let Replica::Active { segment, applier } = &mut self.replica else {
            return Err("a passive backup was sent pages; its mirror takes only traces".into());
        };
        let lsn = applier
            .install(segment, image)
            .map_err(|err| err.to_string())?;
        self.applied_unacked = true;
        // The retained batches end below the image: none continues it.
        self.tail.clear();
        (self.tail_records, self.tail_bytes) = (0, 0);
        Ok(Some(lsn))
    }

    /// The ack of what was applied since the last take, for the primary of `view`, if
    /// anything was. It echoes no tick: the receiver's acks carry the lease's echo.
    pub fn take_ack(&mut self, view: u64) -> Option<Message> {
        if !std::mem::take(&mut self.applied_unacked) {
            return None;
        }
        let lsn = self.lsn_applied();
        Some(Message::Ack {
            view,
            lsn_received: lsn,
            lsn_applied: lsn,
            // The applier knows nothing of the log; the primary keeps the highest it heard.
            lsn_durable: 0,
            tick_echoed: 0,
        })
    }

    /// Gives the segment and the retained batches back, once every record up to `lsn` is
    /// applied (the receiver accepted nothing past it: the gate was frozen).
    pub fn handover(self, lsn: u64) -> Result<Handover, HandoverError> {
        let lsn_applied = self.lsn_applied();
        // A rewound member promoted from the records it held before it rewound (it reported
        // those: `tandem_cluster::rule::Reported`) takes the rewind back; nothing touched
        // them since. Its tail ends at the rewound LSN, so none is handed over.
        let restores = lsn_applied < lsn && self.lsn_before_rewind() == Some(lsn);
        if lsn_applied < lsn && !restores {
            return Err(HandoverError::Behind { lsn_applied, lsn });
        }
        assert!(
            restores || lsn_applied == lsn,
            "handover at the LSN applied"
        );
        match self.replica {
            Replica::Active { mut segment, .. } => {
                // The next role's log starts by aligning, which gives the checkpoint up there.
                segment.abandon_snapshot();
                let batches = if restores {
                    segment.undo_rewind();
                    Vec::new()
                } else {
                    self.tail.into_iter().collect()
                };
                Ok(Handover { segment, batches })
            }
            Replica::Passive { .. } => Err(HandoverError::Passive),
        }
    }

    /// Keeps an applied batch for a promotion, counting what the tail holds.
    fn keep(&mut self, batch: SealedBatch) {
        let (records, bytes) = (u64::from(batch.record_count()), batch.len());
        match keep_applied(&mut self.tail, batch) {
            Kept::Held => return,
            Kept::Restarted => (self.tail_records, self.tail_bytes) = (0, 0),
            Kept::Appended => {}
        }
        self.tail_records += records;
        self.tail_bytes += bytes;
    }
}
