//! The backup applier: applies received batches to the backup's segment, in LSN order.
//!
//! A batch is decoded and checked whole (every record well formed and inside the segment)
//! before its first record is applied, so a bad batch changes nothing. A batch that passed the
//! receiver's checksum yet fails here was built wrong by the primary: the driver poisons the
//! backup rather than guess.

use tandem_memory::{PassiveError, PassiveMirror, PassiveTrace, RedoError, RedoRecord, Segment};
use tandem_redo::{BatchError, BatchKind, CallId};

use crate::receiver::ApplyBatch;
use crate::transfer::{PageImage, TransferError};

/// Why a batch could not be applied.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ApplyError {
    #[error("batch LSNs {lsn_base}..={lsn_last} hold a malformed record: {source}")]
    Malformed {
        lsn_base: u64,
        lsn_last: u64,
        source: BatchError,
    },
    #[error("record {lsn} does not fit the segment: {source}")]
    Bounds { lsn: u64, source: RedoError },
    #[error("passive trace {lsn} does not fit the mirror: {source}")]
    Passive { lsn: u64, source: PassiveError },
    #[error("a {found:?} batch reached an applier of {expected:?} batches")]
    Kind {
        found: BatchKind,
        expected: BatchKind,
    },
    #[error("a state transfer to LSN {lsn} cannot be installed: {source}")]
    Transfer { lsn: u64, source: TransferError },
}

/// Records between the one being applied and the one whose lines are being prefetched.
const PREFETCH_DISTANCE: usize = 8;

/// Starts loading the lines each run of `record` will write (a hint: no state changes).
fn prefetch_runs(segment: &Segment, record: &RedoRecord) {
    for run in record.runs() {
        segment.prefetch(run.offset as usize);
    }
}

/// What [`keep_applied`] did with a batch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kept {
    /// The batch continues the tail and was appended.
    Appended,
    /// The batch holds nothing past the tail's end: dropped.
    Held,
    /// The batch left a gap after the tail: the tail was emptied and starts with it.
    Restarted,
}

/// Keeps a batch a backup applied, for the retained tail it will serve from if promoted. A
/// batch a newer connection resent in part starts below the tail's end: only whole batches
/// that continue the tail are kept, and a gap starts the tail afresh (it stays contiguous,
/// as [`crate::Primary::resume`] requires).
pub fn keep_applied(
    tail: &mut std::collections::VecDeque<tandem_redo::SealedBatch>,
    batch: tandem_redo::SealedBatch,
) -> Kept {
    let continues = tail
        .back()
        .is_none_or(|last| last.lsn_last() + 1 == batch.lsn_base());
    if continues {
        tail.push_back(batch);
        return Kept::Appended;
    }
    if tail
        .back()
        .is_some_and(|last| batch.lsn_last() <= last.lsn_last())
    {
        return Kept::Held;
    }
    tail.clear();
    tail.push_back(batch);
    Kept::Restarted
}

/// Applies redo batches to a segment.
#[derive(Debug)]
pub struct Applier {
    lsn_applied: u64,
    /// Decoded records of the batch being applied; buffers reused across batches.
    records: Vec<RedoRecord>,
    /// The call each decoded record carries (the dedup table will be fed from these).
    calls: Vec<CallId>,
    /// Where the records the last apply applied start in `calls` (earlier ones were held).
    calls_applied_from: usize,
}

impl Applier {
    /// An applier for a segment that has applied every record up to `lsn_applied`.
    pub fn new(lsn_applied: u64) -> Applier {
        Applier {
            lsn_applied,
            records: Vec::new(),
            calls: Vec::new(),
            calls_applied_from: 0,
        }
    }

    pub fn lsn_applied(&self) -> u64 {
        self.lsn_applied
    }

    /// The client calls of the records the last `apply` applied, in LSN order (a record with
    /// no call behind it has client id 0). The dedup table will be fed from these.
    pub fn calls_applied(&self) -> &[CallId] {
        &self.calls[self.calls_applied_from..]
    }

    /// Installs a state transfer: `segment` goes to `image.lsn` in one step. Returns that LSN.
    /// A refused image leaves the segment as it was.
    pub fn install(&mut self, segment: &mut Segment, image: &PageImage) -> Result<u64, ApplyError> {
        assert_eq!(
            segment.lsn(),
            self.lsn_applied,
            "the segment is the applier's"
        );
        image
            .install(segment)
            .map_err(|source| ApplyError::Transfer {
                lsn: image.lsn,
                source,
            })?;
        self.lsn_applied = image.lsn;
        self.calls.clear();
        self.calls_applied_from = 0;
        Ok(self.lsn_applied)
    }

    /// Applies the new records of `apply` to `segment` and returns the LSN applied through.
    ///
    /// Precondition: `apply.lsn_from` is the next LSN (the receiver guarantees continuity).
    pub fn apply(&mut self, segment: &mut Segment, apply: &ApplyBatch) -> Result<u64, ApplyError> {
        assert_eq!(
            apply.lsn_from,
            self.lsn_applied + 1,
            "batches arrive in LSN order"
        );
        assert_eq!(
            segment.lsn(),
            self.lsn_applied,
            "the segment is the applier's"
        );
        let batch = apply.batch.as_ref();
        let (lsn_base, lsn_last) = (batch.lsn_base(), batch.lsn_last());
        assert!(lsn_base <= apply.lsn_from && apply.lsn_from <= lsn_last);
        if batch.kind() != BatchKind::Redo {
            return Err(ApplyError::Kind {
                found: batch.kind(),
                expected: BatchKind::Redo,
            });
        }
        // Decode every record first so that a bad one leaves the segment untouched.
        let count = batch.record_count() as usize;
        batch
            .decode_redo_into(&mut self.records, &mut self.calls)
            .map_err(|source| ApplyError::Malformed {
                lsn_base,
                lsn_last,
                source,
            })?;
        let segment_len = segment.len() as u64;
        for record in &self.records[..count] {
            record
                .validate_bounds(segment_len)
                .map_err(|source| ApplyError::Bounds {
                    lsn: record.lsn(),
                    source,
                })?;
        }
        let skip = (apply.lsn_from - lsn_base) as usize;
        self.calls_applied_from = skip;
        let records = &self.records[skip..count];
        // The runs of a batch land at random places in the segment, each a likely cache miss.
        // All of them are known up front, so the lines of the record PREFETCH_DISTANCE ahead
        // start loading while this one is applied.
        for record in records.iter().take(PREFETCH_DISTANCE) {
            prefetch_runs(segment, record);
        }
        for (index, record) in records.iter().enumerate() {
            if let Some(ahead) = records.get(index + PREFETCH_DISTANCE) {
                prefetch_runs(segment, ahead);
            }
            segment
                .apply_redo(record)
                .expect("records were validated and arrive in LSN order");
        }
        self.lsn_applied = lsn_last;
        assert_eq!(segment.lsn(), self.lsn_applied);
        Ok(self.lsn_applied)
    }
}

/// Applies passive write-through batches to mirror memory: the backup only stores bytes.
#[derive(Debug)]
pub struct PassiveApplier {
    lsn_applied: u64,
    traces: Vec<PassiveTrace>,
}

impl PassiveApplier {
    pub fn new(lsn_applied: u64) -> PassiveApplier {
        PassiveApplier {
            lsn_applied,
            traces: Vec::new(),
        }
    }

    pub fn lsn_applied(&self) -> u64 {
        self.lsn_applied
    }

    /// Stores the new traces of `apply` in `mirror` and returns the LSN applied through. Every
    /// write of the batch is checked against the mirror's bounds before the first is stored.
    pub fn apply(
        &mut self,
        mirror: &mut PassiveMirror,
        apply: &ApplyBatch,
    ) -> Result<u64, ApplyError> {
        assert_eq!(
            apply.lsn_from,
            self.lsn_applied + 1,
            "batches arrive in LSN order"
        );
        let batch = apply.batch.as_ref();
        let (lsn_base, lsn_last) = (batch.lsn_base(), batch.lsn_last());
        assert!(lsn_base <= apply.lsn_from && apply.lsn_from <= lsn_last);
        if batch.kind() != BatchKind::Passive {
            return Err(ApplyError::Kind {
                found: batch.kind(),
                expected: BatchKind::Passive,
            });
        }
        batch
            .decode_passive_into(&mut self.traces)
            .map_err(|source| ApplyError::Malformed {
                lsn_base,
                lsn_last,
                source,
            })?;
        let count = batch.record_count() as usize;
        let total = mirror.layout().total_len() as u64;
        for trace in &self.traces[..count] {
            for (write, bytes) in trace.iter() {
                let end = write.addr.checked_add(bytes.len() as u64);
                if end.is_none_or(|end| end > total) {
                    let source = PassiveError::OutOfBounds {
                        addr: write.addr,
                        len: bytes.len() as u64,
                        total,
                    };
                    let lsn = trace.lsn();
                    return Err(ApplyError::Passive { lsn, source });
                }
            }
        }
        let skip = (apply.lsn_from - lsn_base) as usize;
        for trace in &self.traces[skip..count] {
            mirror
                .apply(trace)
                .expect("every write was checked against the mirror's bounds");
        }
        self.lsn_applied = lsn_last;
        Ok(self.lsn_applied)
    }
}
