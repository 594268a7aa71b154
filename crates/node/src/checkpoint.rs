//! When a backup checkpoints, and what it hands its log while it does (issue 16, part 2).
//!
//! A node's log would grow for ever, and a restart would replay all of it. So once the
//! batches a backup applied since its last checkpoint reach `bytes_between`, it takes an image
//! of its segment as it stands at that LSN ([`Segment::begin_snapshot`]: copy-on-write by
//! page, so the stream never stops) and hands it to the log a chunk at a time between
//! batches; once the log has it all, synced, the log drops the segment files it covers, and a
//! restart installs the image and replays only what came after. The image holds only the
//! pages changed since the initial load (a restart loads that anyway).
//!
//! The applier calls [`Checkpointer::step`] after every batch and whenever it is idle; each
//! step copies at most [`PAGES_PER_STEP`] pages, so a step costs tens of microseconds
//! whatever the segment's size.

use std::sync::Arc;

use tandem_memory::{SNAPSHOT_ENTRY_LEN, Segment};
use tandem_replication::transfer::PAGES_PER_CHUNK;

use crate::log::LogOrder;

/// Pages one step copies at most: one chunk.
pub const PAGES_PER_STEP: usize = PAGES_PER_CHUNK;

/// The checkpoint under way.
#[derive(Debug)]
struct UnderWay {
    lsn: u64,
    chunk_count: u32,
    chunks_sent: u32,
    /// Entries not yet a whole chunk.
    entries: Vec<u8>,
}

/// A backup's checkpoint schedule and the checkpoint under way.
#[derive(Debug)]
pub struct Checkpointer {
    /// Batch bytes applied between the start of one checkpoint and the next.
    bytes_between: u64,
    /// The initial load's LSN: pages at or below it are the load's, and need no image.
    lsn_load: u64,
    bytes_since: u64,
    /// The newest view a batch applied was sealed in: the view whose history an image follows
    /// (as a replay reads it, `Replayed::view`).
    view_applied: u64,
    under_way: Option<UnderWay>,
    /// The LSN of the last checkpoint begun.
    lsn_last: Option<u64>,
}

impl Checkpointer {
    /// A schedule of one checkpoint per `bytes_between` bytes of batches applied, for a
    /// segment whose initial load is at `lsn_load`.
    pub fn new(bytes_between: u64, lsn_load: u64) -> Checkpointer {
        assert!(bytes_between > 0, "a checkpoint schedule needs a distance");
        Checkpointer {
            bytes_between,
            lsn_load,
            bytes_since: 0,
            view_applied: 0,
            under_way: None,
            lsn_last: None,
        }
    }

    /// A batch of `bytes` sealed in view `view` was applied.
    pub fn applied(&mut self, bytes: usize, view: u64) {
        self.bytes_since += bytes as u64;
        self.view_applied = self.view_applied.max(view);
    }

    /// Whether a checkpoint is under way.
    pub fn is_under_way(&self) -> bool {
        self.under_way.is_some()
    }

    /// Begins a checkpoint if one is due (or `wanted`: the log is not anchored, and reports
    /// nothing durable until a checkpoint anchors it), or hands the next pages of the one
    /// under way to the log, in `orders`: `CheckpointBegin`, then `CheckpointChunk`s, then
    /// `CheckpointFinish`. A segment that gave its snapshot up (a rewind below it) ends the
    /// checkpoint with `CheckpointAbandon`.
    pub fn step(&mut self, segment: &mut Segment, wanted: bool, orders: &mut Vec<LogOrder>) {
        let Some(under_way) = &mut self.under_way else {
            let due = (self.bytes_since >= self.bytes_between || wanted)
                && segment.diverged().is_empty()
                && segment.lsn() > self.lsn_load
                && self.lsn_last != Some(segment.lsn());
            if due {
                self.begin(segment, orders);
            }
            return;
        };
        if segment.snapshot_lsn() != Some(under_way.lsn) {
            self.under_way = None;
            orders.push(LogOrder::CheckpointAbandon);
            return;
        }
        let step = segment.snapshot_step(PAGES_PER_STEP, &mut under_way.entries);
        let chunk_len = PAGES_PER_CHUNK * SNAPSHOT_ENTRY_LEN;
        while under_way.entries.len() >= chunk_len {
            let rest = under_way.entries.split_off(chunk_len);
            let chunk = std::mem::replace(&mut under_way.entries, rest);
            under_way.chunks_sent += 1;
            let lsn = under_way.lsn;
            orders.push(LogOrder::CheckpointChunk {
                lsn,
                chunk: Arc::from(chunk),
            });
        }
        if step.done {
            if under_way.chunks_sent < under_way.chunk_count {
                let chunk = std::mem::take(&mut under_way.entries);
                under_way.chunks_sent += 1;
                let lsn = under_way.lsn;
                orders.push(LogOrder::CheckpointChunk {
                    lsn,
                    chunk: Arc::from(chunk),
                });
            }
            assert_eq!(
                under_way.chunks_sent, under_way.chunk_count,
                "a checkpoint holds the chunks it announced"
            );
            orders.push(LogOrder::CheckpointFinish { lsn: under_way.lsn });
            self.under_way = None;
        }
    }

    fn begin(&mut self, segment: &mut Segment, orders: &mut Vec<LogOrder>) {
        let pages = segment.begin_snapshot(self.lsn_load);
        // At least one chunk, empty if nothing changed since the load, as a transfer.
        let chunk_count = u32::try_from(pages.div_ceil(PAGES_PER_CHUNK).max(1))
            .expect("a segment has fewer than 2^32 pages");
        let lsn = segment.lsn();
        self.bytes_since = 0;
        self.lsn_last = Some(lsn);
        self.under_way = Some(UnderWay {
            lsn,
            chunk_count,
            chunks_sent: 0,
            entries: Vec::new(),
        });
        orders.push(LogOrder::CheckpointBegin {
            lsn,
            view: self.view_applied,
            chunk_count,
        });
    }

    /// The role ends (a handover): the checkpoint under way, if any, is given up.
    pub fn abandon(&mut self, segment: &mut Segment, orders: &mut Vec<LogOrder>) {
        if self.under_way.take().is_some() {
            segment.abandon_snapshot();
            orders.push(LogOrder::CheckpointAbandon);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::{PAGE_SIZE, Strategy};
    use tandem_replication::transfer::PageImage;

    const PAGES: usize = 200;

    /// A segment whose first txn (the "load") writes every page, then `more` txns.
    fn segment_with(more: usize) -> Segment {
        let mut segment = Segment::anonymous(PAGES * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        let mut txn = segment.begin();
        txn.set_range(0, PAGES * PAGE_SIZE).fill(1);
        txn.commit();
        for index in 0..more {
            write(&mut segment, index * 3 % PAGES, 2 + index as u8);
        }
        segment
    }

    fn write(segment: &mut Segment, page: usize, value: u8) {
        let mut txn = segment.begin();
        txn.set_range(page * PAGE_SIZE + 100, 8).fill(value);
        txn.commit();
    }

    #[test]
    fn a_checkpoint_holds_the_state_at_its_lsn_while_writes_go_on() {
        let mut segment = segment_with(150);
        let lsn_load = 1;
        let mut checkpointer = Checkpointer::new(1, lsn_load);
        let mut orders = Vec::new();
        // Nothing applied yet: nothing due, unless the log wants one.
        checkpointer.step(&mut segment, false, &mut orders);
        assert!(orders.is_empty());
        checkpointer.applied(10, 4);
        checkpointer.step(&mut segment, false, &mut orders);
        let Some(LogOrder::CheckpointBegin {
            lsn,
            view,
            chunk_count,
        }) = orders.pop()
        else {
            panic!("a checkpoint begins: {orders:?}");
        };
        assert_eq!((lsn, view), (segment.lsn(), 4));
        let expected = segment.bytes().to_vec();
        let mut chunks = Vec::new();
        let mut finished = false;
        for round in 0..100 {
            // Writes land between steps, on pages swept and not yet swept alike.
            write(&mut segment, round * 7 % PAGES, 200);
            checkpointer.step(&mut segment, false, &mut orders);
            for order in orders.drain(..) {
                match order {
                    LogOrder::CheckpointChunk { lsn: of, chunk } => {
                        assert_eq!(of, lsn);
                        chunks.push(chunk);
                    }
                    LogOrder::CheckpointFinish { lsn: of } => {
                        assert_eq!(of, lsn);
                        finished = true;
                    }
                    other => panic!("unexpected {other:?}"),
                }
            }
            if finished {
                break;
            }
        }
        assert!(finished, "a checkpoint of {PAGES} pages ends");
        assert_eq!(chunks.len() as u32, chunk_count);
        // Installed on the load, the chunks give the state at the checkpoint's LSN.
        let mut restored = segment_with(0);
        PageImage {
            lsn_from: restored.lsn(),
            lsn,
            chunks,
        }
        .install(&mut restored)
        .unwrap();
        assert_eq!(restored.bytes(), &expected[..]);
        assert_eq!(restored.lsn(), lsn);
        // Not due again until as many bytes were applied.
        checkpointer.step(&mut segment, false, &mut orders);
        assert!(orders.is_empty());
    }

    #[test]
    fn a_rewind_below_the_checkpoint_abandons_it_and_an_unanchored_log_asks_at_once() {
        let mut segment = segment_with(150);
        let mut checkpointer = Checkpointer::new(u64::MAX, 1);
        let mut orders = Vec::new();
        checkpointer.step(&mut segment, true, &mut orders);
        assert!(matches!(orders[..], [LogOrder::CheckpointBegin { .. }]));
        orders.clear();
        let lsn = segment.lsn();
        segment.rewind(lsn - 1);
        checkpointer.step(&mut segment, false, &mut orders);
        assert!(matches!(orders[..], [LogOrder::CheckpointAbandon]));
        assert!(!checkpointer.is_under_way());
    }
}
