//! The retained tail: the most recent sealed batches, kept in memory for backups that fall
//! behind or rejoin.
//!
//! The tail is bounded by a number of records and a number of bytes. Batches leave it oldest
//! first, and only when the caller says they may (every backup has them) and room is needed, so
//! the tail keeps as much history as its bounds allow. When the tail is full of batches some
//! backup still lacks, the primary must stop taking commits: that is its flow control.

use std::collections::VecDeque;

use crate::batch::SealedBatch;

/// The tail's bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TailLimits {
    pub records_max: u64,
    pub bytes_max: usize,
}

/// Sealed batches with consecutive LSNs, oldest first.
#[derive(Debug)]
pub struct RetainedTail {
    batches: VecDeque<SealedBatch>,
    records: u64,
    bytes: usize,
    limits: TailLimits,
    /// LSN the next pushed batch must start at.
    lsn_next: u64,
}

impl RetainedTail {
    /// An empty tail whose first batch will start at `lsn_next`.
    pub fn new(limits: TailLimits, lsn_next: u64) -> RetainedTail {
        assert!(
            limits.records_max > 0,
            "a tail must hold at least one record"
        );
        assert!(limits.bytes_max > 0, "a tail must hold at least one byte");
        RetainedTail {
            batches: VecDeque::new(),
            records: 0,
            bytes: 0,
            limits,
            lsn_next,
        }
    }

    pub fn records(&self) -> u64 {
        self.records
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// LSN of the oldest retained record, or the next LSN when the tail is empty.
    pub fn lsn_first(&self) -> u64 {
        self.batches
            .front()
            .map_or(self.lsn_next, SealedBatch::lsn_base)
    }

    /// LSN the next batch will start at.
    pub fn lsn_next(&self) -> u64 {
        self.lsn_next
    }

    /// Whether a backup that has every record up to `lsn_received` can be served from here.
    pub fn covers(&self, lsn_received: u64) -> bool {
        lsn_received + 1 >= self.lsn_first() && lsn_received < self.lsn_next
    }

    /// Whether records or bytes have reached their bounds (`extra_records` and `extra_bytes`
    /// count what is still unsealed and will land here).
    pub fn is_full(&self, extra_records: u64, extra_bytes: usize) -> bool {
        self.records + extra_records >= self.limits.records_max
            || self.bytes + extra_bytes >= self.limits.bytes_max
    }

    /// Drops the oldest batches whose records all have LSNs ≤ `lsn_evictable` until the tail
    /// would have room for `extra_records` and `extra_bytes` more. Returns whether it has.
    pub fn make_room(
        &mut self,
        lsn_evictable: u64,
        extra_records: u64,
        extra_bytes: usize,
    ) -> bool {
        while self.is_full(extra_records, extra_bytes) {
            match self.batches.front() {
                Some(oldest) if oldest.lsn_last() <= lsn_evictable => {
                    self.records -= u64::from(oldest.record_count());
                    self.bytes -= oldest.len();
                    self.batches.pop_front();
                }
                _ => return false,
            }
        }
        true
    }

    /// Appends a batch, which must start where the tail ends. The caller made room first; the
    /// bounds may be exceeded by at most this one batch.
    pub fn push(&mut self, batch: SealedBatch) {
        assert_eq!(
            batch.lsn_base(),
            self.lsn_next,
            "the tail's LSNs are consecutive"
        );
        self.lsn_next = batch.lsn_last() + 1;
        self.records += u64::from(batch.record_count());
        self.bytes += batch.len();
        self.batches.push_back(batch);
        debug_assert_eq!(
            self.records,
            self.batches
                .iter()
                .map(|batch| u64::from(batch.record_count()))
                .sum::<u64>()
        );
    }

    /// The retained batches from the one holding `lsn` on, oldest first.
    ///
    /// Panics if `lsn` is older than the tail: callers check [`RetainedTail::covers`].
    pub fn batches_from(&self, lsn: u64) -> impl Iterator<Item = &SealedBatch> + '_ {
        assert!(lsn >= self.lsn_first(), "LSN {lsn} has left the tail");
        // Batches are consecutive, so the one holding `lsn` is found by binary search.
        let start = self.batches.partition_point(|batch| batch.lsn_last() < lsn);
        self.batches.range(start..)
    }

    /// The retained batches, newest first.
    pub fn batches_newest_first(&self) -> impl Iterator<Item = &SealedBatch> + '_ {
        self.batches.iter().rev()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{BatchBuilder, BatchKind, CallId};
    use tandem_memory::RedoRecord;

    fn batch(builder: &mut BatchBuilder, records: u64) -> SealedBatch {
        for _ in 0..records {
            let mut record = RedoRecord::empty(builder.lsn_next());
            record.push_run(0, &[1; 10]).unwrap();
            builder.push_redo(CallId::default(), &record);
        }
        builder.seal()
    }

    #[test]
    fn full_tails_evict_only_what_every_backup_has() {
        let limits = TailLimits {
            records_max: 10,
            bytes_max: 1 << 20,
        };
        let mut tail = RetainedTail::new(limits, 1);
        let mut builder = BatchBuilder::new(BatchKind::Redo, 0, 1, 1);
        for _ in 0..3 {
            assert!(tail.make_room(0, 3, 0));
            tail.push(batch(&mut builder, 3));
        }
        assert_eq!(tail.records(), 9);
        // Nothing acknowledged: no room for three more.
        assert!(!tail.make_room(0, 3, 0));
        assert_eq!(tail.lsn_first(), 1);
        // LSNs 1..=3 acknowledged: the oldest batch goes.
        assert!(tail.make_room(3, 3, 0));
        assert_eq!(tail.lsn_first(), 4);
        tail.push(batch(&mut builder, 3));
        assert!(tail.covers(3));
        assert!(!tail.covers(2));
        let from: Vec<u64> = tail.batches_from(8).map(SealedBatch::lsn_base).collect();
        assert_eq!(from, vec![7, 10]);
    }

    #[test]
    fn the_byte_bound_counts_too() {
        let mut builder = BatchBuilder::new(BatchKind::Redo, 0, 1, 1);
        let one = batch(&mut builder, 1);
        let limits = TailLimits {
            records_max: 100,
            bytes_max: one.len() * 2,
        };
        let mut tail = RetainedTail::new(limits, 1);
        tail.push(one.clone());
        assert!(!tail.is_full(0, one.len() - 1));
        assert!(tail.is_full(0, one.len()));
    }
}
