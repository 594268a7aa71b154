//! The passive backup of seed 000, section 5: what a primary double-writes into a backup's
//! mirror memory, and what the backup recovers from it.
//!
//! A passive backup holds a second copy of the primary's data structures and its CPU does
//! nothing: every write the primary makes to them also lands, in the same order, in the
//! backup's memory. With the trace enabled ([`crate::Segment::enable_passive_trace`]) each
//! commit records those writes as a [`PassiveTrace`]; a [`PassiveMirror`] stores them and, at
//! takeover, [`PassiveMirror::recover`] rebuilds the last committed database image. V1, V2 and
//! V3 are supported; V0's linked heap records have no fixed place in remote memory.
//!
//! Mirror memory ([`MirrorLayout`]; all integers little-endian):
//!
//! ```text
//!  V1, V2                                        V3
//!  0          S          2S     M      M+64      0          S            S+C    M      M+64
//!  +----------+----------+------+------+         +----------+------------+------+------+
//!  | database | mirror   | pad  | meta |         | database | undo log   | pad  | meta |
//!  +----------+----------+------+------+         +----------+------------+------+------+
//!  S = segment_len, M = 2S rounded up to 8       C = undo_log_capacity, M = S+C rounded up to 8
//!
//!  meta +0   committed_lsn u64                   meta +0   log_end u64 (log bytes in use)
//!  meta +8   mirrored_lsn u64                    meta +8   committed_lsn u64
//!  meta +16  zero up to +64 (reserved)           meta +16  zero up to +64 (reserved)
//!
//!  V3 log entry at log position p (address S+p), the next entry at p+16+len:
//!  +------------+---------+------------------+
//!  | offset u64 | len u64 | old bytes (len)  |
//!  +------------+---------+------------------+
//! ```
//!
//! The procedure's in-place stores are modelled as shipped at commit: they are the changed
//! runs of the redo record (class [`WriteClass::Data`], at the run's offset). A commit's trace
//! holds, in this order:
//!
//! - V3: per declared range, its entry header (Meta, 16 bytes), its old bytes (Undo) and the new
//!   `log_end` (Meta, 8 bytes); then the data runs; then one 16-byte Meta write at meta +0 of
//!   `[log_end = 0][committed_lsn]`. Truncating the log is the commit point.
//! - V1: the data runs; `committed_lsn` (Meta, the commit point); each merged declared span
//!   copied into the mirror region (Undo); `mirrored_lsn` (Meta). The range array stays on the
//!   primary (section 5.1), so nothing describes the spans to the backup.
//! - V2: as V1, but the mirror writes are only the changed runs.
//!
//! What survives a primary crash between any two writes (each write is whole or absent):
//!
//! - V3 before the commit write: `log_end` covers only complete entries, written before any
//!   data run, so rolling them back newest first restores the old image. At or after it:
//!   `log_end` is 0 and every data run is in, so the database region is the new image.
//! - V1/V2 before the commit flag: `committed_lsn == mirrored_lsn` and the mirror region is
//!   untouched, so it is the old image. From the flag until `mirrored_lsn` catches up:
//!   `committed_lsn == mirrored_lsn + 1` and every data run is in, so the database region is
//!   the new image. After: both LSNs agree again and the mirror region is the new image.
//!
//! An aborted txn ships nothing: on the primary its in-place stores are undone and, for V3, its
//! log is truncated, so its net effect on everything `recover` reads is zero. A trace carries
//! bytes only; a backup applies traces in commit order (the LSN is there to check that) and
//! never executes anything.

use std::fmt;
use std::ops::AddAssign;

use crate::redo::RedoRecord;
use crate::strategy::{Strategy, Undo, merge_spans};

/// Bytes of the meta block at the end of mirror memory.
const META_LEN: usize = 64;
/// Length of a V3 log entry's header: `[offset u64][len u64]`.
const ENTRY_HEADER_LEN: usize = 16;
/// V1/V2 meta: the LSN of the last commit whose data runs are all in the database region.
const COMMITTED_AT: usize = 0;
/// V1/V2 meta: the LSN of the last commit whose changes are all in the mirror region.
const MIRRORED_AT: usize = 8;
/// V3 meta: bytes of the log in use; 0 between txns.
const LOG_END_AT: usize = 0;
/// V3 meta: the LSN of the last commit, set together with `log_end = 0`.
const V3_COMMITTED_AT: usize = 8;

// V3's commit is one 16-byte write of `[log_end][committed_lsn]`.
const _: () = assert!(V3_COMMITTED_AT == LOG_END_AT + 8);
const _: () = assert!(MIRRORED_AT + 8 <= META_LEN && V3_COMMITTED_AT + 8 <= META_LEN);

/// The paper's classes of shipped bytes (seed 000, Tables 5 and 7).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteClass {
    /// Database bytes the txn changed.
    Data,
    /// Undo information: V3's old bytes, V1's and V2's mirror updates.
    Undo,
    /// Everything else: log headers, log end, commit flags.
    Meta,
}

/// Why a passive layout, write or recovery was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PassiveError {
    #[error(
        "strategy {strategy} has no passive backup: its undo records live at heap addresses \
         that have no place in mirror memory; use v1, v2 or v3"
    )]
    UnsupportedStrategy { strategy: Strategy },
    #[error("segment_len is 0; a passive layout mirrors a segment of at least one page")]
    EmptySegment,
    #[error(
        "a mirror of a {segment_len}-byte segment with a {undo_log_capacity}-byte undo log does \
         not fit in the address space; use a smaller segment or log capacity"
    )]
    LayoutTooLarge {
        segment_len: usize,
        undo_log_capacity: usize,
    },
    #[error(
        "write of {len} bytes at mirror address {addr} ends past the mirror's {total} bytes; \
         the sender's layout differs from this mirror's (check segment_len and \
         undo_log_capacity)"
    )]
    OutOfBounds { addr: u64, len: u64, total: u64 },
    #[error(
        "image is {got} bytes but the layout needs {expected}; take the image with \
         Segment::passive_image from a segment whose trace was enabled with this layout"
    )]
    ImageSize { got: usize, expected: usize },
    #[error(
        "mirror memory at address {addr} is corrupt: {detail}; it was not written by a primary \
         with this layout, so re-prime the backup from Segment::passive_image"
    )]
    CorruptLog { addr: u64, detail: String },
}

/// Where each of the primary's data structures sits in the backup's mirror memory: the
/// database, then V1's and V2's mirror or V3's undo log, then a 64-byte meta block (byte
/// diagram in the module documentation of `src/passive.rs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MirrorLayout {
    strategy: Strategy,
    segment_len: usize,
    /// Bytes of V3's log region; always 0 for V1 and V2, which keep no log in mirror memory.
    undo_log_capacity: usize,
    /// Address of the meta block: the end of the second region rounded up to 8.
    meta_addr: usize,
}

impl MirrorLayout {
    /// The layout for a segment of `segment_len` bytes under `strategy`.
    ///
    /// `undo_log_capacity` sizes V3's log region: the most log bytes one txn may write
    /// (16 bytes of header plus the length of each declared range). V1 and V2 ignore it (their
    /// range array stays on the primary) and record 0.
    pub fn new(
        strategy: Strategy,
        segment_len: usize,
        undo_log_capacity: usize,
    ) -> Result<MirrorLayout, PassiveError> {
        let (second_len, undo_log_capacity) = match strategy {
            Strategy::V0LinkedUndo => return Err(PassiveError::UnsupportedStrategy { strategy }),
            Strategy::V1MirrorCopy | Strategy::V2MirrorDiff => (segment_len, 0),
            Strategy::V3InlineLog => (undo_log_capacity, undo_log_capacity),
        };
        if segment_len == 0 {
            return Err(PassiveError::EmptySegment);
        }
        let too_large = PassiveError::LayoutTooLarge {
            segment_len,
            undo_log_capacity,
        };
        let meta_addr = segment_len
            .checked_add(second_len)
            .and_then(|end| end.checked_next_multiple_of(8))
            .ok_or_else(|| too_large.clone())?;
        meta_addr.checked_add(META_LEN).ok_or(too_large)?;
        Ok(MirrorLayout {
            strategy,
            segment_len,
            undo_log_capacity,
            meta_addr,
        })
    }

    /// Bytes of mirror memory the backup must allocate.
    pub fn total_len(&self) -> usize {
        self.meta_addr + META_LEN
    }

    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    pub fn segment_len(&self) -> usize {
        self.segment_len
    }

    /// Bytes of V3's log region; 0 for V1 and V2.
    pub fn undo_log_capacity(&self) -> usize {
        self.undo_log_capacity
    }

    /// Mirror memory equal to a primary between txns whose bytes are `data` and whose last
    /// commit took `lsn`.
    pub(crate) fn image(&self, data: &[u8], lsn: u64) -> Vec<u8> {
        assert_eq!(
            data.len(),
            self.segment_len,
            "image of a segment of another size"
        );
        let mut image = vec![0u8; self.total_len()];
        image[..self.segment_len].copy_from_slice(data);
        let meta = self.meta_addr;
        if self.strategy.has_mirror() {
            image[self.segment_len..2 * self.segment_len].copy_from_slice(data);
            image[meta + COMMITTED_AT..][..8].copy_from_slice(&lsn.to_le_bytes());
            image[meta + MIRRORED_AT..][..8].copy_from_slice(&lsn.to_le_bytes());
        } else {
            // The log region stays zero and log_end is 0: no txn is in flight.
            image[meta + V3_COMMITTED_AT..][..8].copy_from_slice(&lsn.to_le_bytes());
        }
        image
    }
}

/// A mirror-memory position as the u64 address a write carries.
fn addr(at: usize) -> u64 {
    u64::try_from(at).expect("usize fits in u64")
}

/// One write into the backup's mirror memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PassiveWrite {
    pub class: WriteClass,
    /// Mirror address of the first byte.
    pub addr: u64,
    /// Bytes written; never 0 in a trace.
    pub len: u32,
}

/// Payload bytes per [`WriteClass`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClassBytes {
    pub data: u64,
    pub undo: u64,
    pub meta: u64,
}

impl ClassBytes {
    pub fn total(&self) -> u64 {
        self.data + self.undo + self.meta
    }

    fn add(&mut self, class: WriteClass, len: u64) {
        match class {
            WriteClass::Data => self.data += len,
            WriteClass::Undo => self.undo += len,
            WriteClass::Meta => self.meta += len,
        }
    }
}

impl AddAssign for ClassBytes {
    fn add_assign(&mut self, other: ClassBytes) {
        self.data += other.data;
        self.undo += other.undo;
        self.meta += other.meta;
    }
}

/// The writes one committed txn made to mirror memory, in the order the primary made them,
/// with their bytes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PassiveTrace {
    writes: Vec<PassiveWrite>,
    /// The bytes of all writes, concatenated in write order.
    bytes: Vec<u8>,
    /// LSN of the commit the trace belongs to; 0 for no commit.
    lsn: u64,
}

impl PassiveTrace {
    /// LSN of the commit that made these writes; 0 before the first traced commit.
    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    /// Each write with its bytes, in the order the primary made them.
    pub fn iter(&self) -> impl Iterator<Item = (PassiveWrite, &[u8])> + '_ {
        let mut position = 0usize;
        self.writes.iter().map(move |write| {
            let len = write.len as usize;
            let bytes = &self.bytes[position..position + len];
            position += len;
            (*write, bytes)
        })
    }

    /// Number of writes.
    pub fn len(&self) -> usize {
        self.writes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.writes.is_empty()
    }

    /// Payload bytes of each class (addresses and lengths are not counted).
    pub fn class_bytes(&self) -> ClassBytes {
        let mut counts = ClassBytes::default();
        for write in &self.writes {
            counts.add(write.class, u64::from(write.len));
        }
        counts
    }

    /// Appends a write of `bytes` at `addr`. An empty write records nothing; one longer than
    /// `u32::MAX` bytes is recorded as consecutive writes of at most that many.
    pub fn push(&mut self, class: WriteClass, addr: u64, bytes: &[u8]) {
        const CHUNK: usize = u32::MAX as usize;
        let mut chunk_addr = addr;
        for chunk in bytes.chunks(CHUNK) {
            let len = u32::try_from(chunk.len()).expect("chunks are at most u32::MAX bytes");
            self.writes.push(PassiveWrite {
                class,
                addr: chunk_addr,
                len,
            });
            self.bytes.extend_from_slice(chunk);
            // Saturating: an address past u64::MAX is out of bounds for every mirror anyway.
            chunk_addr = chunk_addr.saturating_add(u64::from(len));
        }
    }

    /// Empties the trace for the commit that takes `lsn`, keeping its buffers for reuse.
    pub fn clear(&mut self, lsn: u64) {
        self.writes.clear();
        self.bytes.clear();
        self.lsn = lsn;
    }
}

/// The trace of the last commit when the passive trace is off or no commit was traced yet.
pub(crate) static EMPTY_TRACE: PassiveTrace = PassiveTrace {
    writes: Vec::new(),
    bytes: Vec::new(),
    lsn: 0,
};

/// The primary side: a segment's passive trace and the buffers it reuses.
#[derive(Debug)]
pub(crate) struct Tracer {
    layout: MirrorLayout,
    trace: PassiveTrace,
    /// V1: the merged declared spans of the committing txn.
    spans: Vec<(usize, usize)>,
}

/// A txn wrote more V3 log than the passive backup's log region holds.
#[derive(Debug)]
pub(crate) struct LogOverflow {
    pub(crate) log_len: usize,
    pub(crate) capacity: usize,
}

impl fmt::Display for LogOverflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the txn's undo log of {} bytes exceeds the passive backup's undo_log_capacity of {} \
             bytes, so the txn was aborted; enable the passive trace with a capacity of at least \
             the largest txn's log (16 bytes plus the length of each declared range)",
            self.log_len, self.capacity
        )
    }
}

impl Tracer {
    pub(crate) fn new(layout: MirrorLayout) -> Tracer {
        Tracer {
            layout,
            trace: PassiveTrace::default(),
            spans: Vec::new(),
        }
    }

    pub(crate) fn layout(&self) -> MirrorLayout {
        self.layout
    }

    pub(crate) fn trace(&self) -> &PassiveTrace {
        &self.trace
    }

    /// Starts the trace of the commit taking `lsn`, reading what `undo` is about to release:
    /// V3's log entries (shipped now, since they precede every data write) and V1's ranges.
    ///
    /// Refuses a V3 log longer than the backup's log region, leaving the last commit's trace
    /// as it was; the caller must then abort the txn.
    pub(crate) fn begin_commit(&mut self, undo: &Undo, lsn: u64) -> Result<(), LogOverflow> {
        if let Some(log) = undo.inline_log()
            && log.len() > self.layout.undo_log_capacity
        {
            return Err(LogOverflow {
                log_len: log.len(),
                capacity: self.layout.undo_log_capacity,
            });
        }
        self.trace.clear(lsn);
        match self.layout.strategy {
            Strategy::V3InlineLog => {
                let log = undo.inline_log().expect("a V3 segment keeps an inline log");
                let base = self.layout.segment_len;
                let log_end_addr = addr(self.layout.meta_addr + LOG_END_AT);
                for entry in LogEntries::new(log, self.layout.segment_len) {
                    let entry = entry.expect("the primary's own undo log is well formed");
                    let header = &log[entry.position..entry.old_start()];
                    let old = &log[entry.old_start()..entry.end()];
                    let header_addr = addr(base + entry.position);
                    let old_addr = addr(base + entry.old_start());
                    self.trace.push(WriteClass::Meta, header_addr, header);
                    self.trace.push(WriteClass::Undo, old_addr, old);
                    let log_end = addr(entry.end()).to_le_bytes();
                    self.trace.push(WriteClass::Meta, log_end_addr, &log_end);
                }
            }
            Strategy::V1MirrorCopy => {
                let ranges = undo.declared_ranges().expect("V1 keeps a range array");
                merge_spans(ranges, &mut self.spans);
            }
            Strategy::V2MirrorDiff => {}
            Strategy::V0LinkedUndo => unreachable!("no layout exists for V0"),
        }
        Ok(())
    }

    /// Finishes the trace once the segment committed: `data` is the committed image and
    /// `redo` the commit's record.
    pub(crate) fn finish_commit(&mut self, data: &[u8], redo: &RedoRecord) {
        let lsn = self.trace.lsn;
        assert_eq!(
            redo.lsn(),
            lsn,
            "the trace and the record belong to one commit"
        );
        let meta = self.layout.meta_addr;
        let mirror_base = addr(self.layout.segment_len);
        for (run, bytes) in redo.iter() {
            self.trace.push(WriteClass::Data, run.offset, bytes);
        }
        if self.layout.strategy == Strategy::V3InlineLog {
            // One write truncates the log and names the commit: the commit point.
            let mut commit = [0u8; 16];
            commit[V3_COMMITTED_AT - LOG_END_AT..].copy_from_slice(&lsn.to_le_bytes());
            let commit_addr = addr(meta + LOG_END_AT);
            self.trace.push(WriteClass::Meta, commit_addr, &commit);
            return;
        }
        let lsn_bytes = lsn.to_le_bytes();
        let committed_addr = addr(meta + COMMITTED_AT);
        self.trace
            .push(WriteClass::Meta, committed_addr, &lsn_bytes);
        if self.layout.strategy == Strategy::V1MirrorCopy {
            for &(offset, len) in &self.spans {
                let span_addr = mirror_base + addr(offset);
                let span = &data[offset..offset + len];
                self.trace.push(WriteClass::Undo, span_addr, span);
            }
        } else {
            for (run, bytes) in redo.iter() {
                self.trace
                    .push(WriteClass::Undo, mirror_base + run.offset, bytes);
            }
        }
        let mirrored_addr = addr(meta + MIRRORED_AT);
        self.trace.push(WriteClass::Meta, mirrored_addr, &lsn_bytes);
    }
}

/// One V3 log entry: its position in the log and the database range its old bytes restore.
#[derive(Clone, Copy, Debug)]
struct LogEntry {
    position: usize,
    offset: usize,
    len: usize,
}

impl LogEntry {
    fn old_start(&self) -> usize {
        self.position + ENTRY_HEADER_LEN
    }

    fn end(&self) -> usize {
        self.old_start() + self.len
    }
}

/// Walks the entries of a V3 log (`log` is exactly the bytes in use), checking each against
/// the log's end and the database size. Yields at most one error, then stops.
struct LogEntries<'a> {
    log: &'a [u8],
    segment_len: usize,
    position: usize,
}

impl<'a> LogEntries<'a> {
    fn new(log: &'a [u8], segment_len: usize) -> LogEntries<'a> {
        LogEntries {
            log,
            segment_len,
            position: 0,
        }
    }

    /// The entry at `self.position`, or why it is not one; the error's address is relative to
    /// the log's start.
    fn entry(&self) -> Result<LogEntry, (usize, String)> {
        let position = self.position;
        let log_end = self.log.len();
        let Some(header) = self.log.get(position..position + ENTRY_HEADER_LEN) else {
            return Err((
                position,
                format!(
                    "an entry header of {ENTRY_HEADER_LEN} bytes at log position {position} \
                     passes log_end {log_end}"
                ),
            ));
        };
        let offset = u64::from_le_bytes(header[..8].try_into().expect("8 bytes"));
        let len = u64::from_le_bytes(header[8..].try_into().expect("8 bytes"));
        let room = (log_end - position - ENTRY_HEADER_LEN) as u64;
        if len > room {
            return Err((
                position,
                format!(
                    "the entry at log position {position} holds {len} old bytes but only {room} \
                     remain before log_end {log_end}"
                ),
            ));
        }
        let fits = offset
            .checked_add(len)
            .is_some_and(|end| end <= self.segment_len as u64);
        if !fits {
            return Err((
                position,
                format!(
                    "the entry at log position {position} restores [{offset}, +{len}), which \
                     leaves the {}-byte database",
                    self.segment_len
                ),
            ));
        }
        // Both fit in usize: len is at most the log's length, offset + len the segment's.
        Ok(LogEntry {
            position,
            offset: offset as usize,
            len: len as usize,
        })
    }
}

impl Iterator for LogEntries<'_> {
    type Item = Result<LogEntry, (usize, String)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.position == self.log.len() {
            return None;
        }
        let entry = self.entry();
        self.position = match &entry {
            Ok(entry) => entry.end(),
            Err(_) => self.log.len(),
        };
        Some(entry)
    }
}

/// The backup side: mirror memory that only stores bytes.
///
/// It never interprets a write; only [`PassiveMirror::recover`] and
/// [`PassiveMirror::committed_lsn`] read the layout's structures, at takeover or for checks.
#[derive(Clone)]
pub struct PassiveMirror {
    layout: MirrorLayout,
    bytes: Vec<u8>,
}

impl fmt::Debug for PassiveMirror {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PassiveMirror")
            .field("layout", &self.layout)
            .field("committed_lsn", &self.committed_lsn())
            .finish_non_exhaustive()
    }
}

impl PassiveMirror {
    /// Zeroed mirror memory: the image of a fresh segment that has committed nothing.
    pub fn new(layout: MirrorLayout) -> PassiveMirror {
        PassiveMirror {
            layout,
            bytes: vec![0; layout.total_len()],
        }
    }

    /// Mirror memory primed with `image`, taken with [`crate::Segment::passive_image`].
    pub fn from_image(layout: MirrorLayout, image: &[u8]) -> Result<PassiveMirror, PassiveError> {
        if image.len() != layout.total_len() {
            return Err(PassiveError::ImageSize {
                got: image.len(),
                expected: layout.total_len(),
            });
        }
        Ok(PassiveMirror {
            layout,
            bytes: image.to_vec(),
        })
    }

    pub fn layout(&self) -> MirrorLayout {
        self.layout
    }

    /// The mirror memory bytes where `len` bytes at `addr` go, if they fit.
    fn target(&self, addr: u64, len: usize) -> Result<std::ops::Range<usize>, PassiveError> {
        let total = self.bytes.len() as u64;
        let len = len as u64;
        match addr.checked_add(len) {
            // Both ends are at most the mirror's length, which is a usize.
            Some(end) if end <= total => Ok(addr as usize..end as usize),
            _ => Err(PassiveError::OutOfBounds { addr, len, total }),
        }
    }

    /// Stores `bytes` at `addr`. A write that leaves mirror memory is refused and changes
    /// nothing: the input comes from the network.
    pub fn write(&mut self, addr: u64, bytes: &[u8]) -> Result<(), PassiveError> {
        let target = self.target(addr, bytes.len())?;
        self.bytes[target].copy_from_slice(bytes);
        Ok(())
    }

    /// Stores every write of `trace` in order. The bounds of all writes are checked first, so
    /// a refused trace changes nothing. The LSN is not checked: mirror memory only stores.
    pub fn apply(&mut self, trace: &PassiveTrace) -> Result<(), PassiveError> {
        for (write, bytes) in trace.iter() {
            self.target(write.addr, bytes.len())?;
        }
        for (write, bytes) in trace.iter() {
            let target = self.target(write.addr, bytes.len())?;
            self.bytes[target].copy_from_slice(bytes);
        }
        Ok(())
    }

    /// All of mirror memory.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The database region, as the last write left it (not necessarily a committed image).
    pub fn data(&self) -> &[u8] {
        &self.bytes[..self.layout.segment_len]
    }

    fn meta_u64(&self, at: usize) -> u64 {
        let start = self.layout.meta_addr + at;
        u64::from_le_bytes(self.bytes[start..start + 8].try_into().expect("8 bytes"))
    }

    /// The LSN of the last commit whose commit write arrived.
    pub fn committed_lsn(&self) -> u64 {
        if self.layout.strategy.has_mirror() {
            self.meta_u64(COMMITTED_AT)
        } else {
            self.meta_u64(V3_COMMITTED_AT)
        }
    }

    /// What a takeover starts from: the last committed database image, whatever write the
    /// primary crashed after. Mirror memory not written by a primary with this layout gives
    /// [`PassiveError::CorruptLog`], never a panic.
    pub fn recover(&self) -> Result<Vec<u8>, PassiveError> {
        let layout = &self.layout;
        let segment_len = layout.segment_len;
        if layout.strategy.has_mirror() {
            let committed = self.meta_u64(COMMITTED_AT);
            let mirrored = self.meta_u64(MIRRORED_AT);
            if committed == mirrored {
                return Ok(self.bytes[segment_len..2 * segment_len].to_vec());
            }
            if mirrored.checked_add(1) == Some(committed) {
                // Crashed between the commit flag and the end of the mirror update: every data
                // run of the commit is in, and the next txn cannot have started.
                return Ok(self.data().to_vec());
            }
            return Err(PassiveError::CorruptLog {
                addr: addr(layout.meta_addr + COMMITTED_AT),
                detail: format!(
                    "committed_lsn {committed} is neither mirrored_lsn {mirrored} nor one more"
                ),
            });
        }
        let log_end = self.meta_u64(LOG_END_AT);
        let log_end_addr = addr(layout.meta_addr + LOG_END_AT);
        let capacity = layout.undo_log_capacity;
        if log_end > capacity as u64 {
            return Err(PassiveError::CorruptLog {
                addr: log_end_addr,
                detail: format!("log_end {log_end} exceeds the log capacity {capacity}"),
            });
        }
        let mut image = self.data().to_vec();
        if log_end == 0 {
            return Ok(image);
        }
        // Crashed inside a txn: undo its entries newest first, so where ranges overlap the
        // oldest image (the value before the txn) is written last.
        let log = &self.bytes[segment_len..segment_len + log_end as usize];
        let entries: Vec<LogEntry> = LogEntries::new(log, segment_len)
            .collect::<Result<_, _>>()
            .map_err(|(position, detail)| PassiveError::CorruptLog {
                addr: addr(segment_len + position),
                detail,
            })?;
        for entry in entries.iter().rev() {
            image[entry.offset..entry.offset + entry.len]
                .copy_from_slice(&log[entry.old_start()..entry.end()]);
        }
        Ok(image)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{PAGE_SIZE, Segment};

    const LOG_CAPACITY: usize = 1024;

    fn traced(strategy: Strategy) -> (Segment, MirrorLayout) {
        let mut segment = Segment::anonymous(PAGE_SIZE, strategy).unwrap();
        let layout = segment.enable_passive_trace(LOG_CAPACITY).unwrap();
        (segment, layout)
    }

    /// (class, addr, len) of each write: the shape of a trace without its bytes.
    fn shape(trace: &PassiveTrace) -> Vec<(WriteClass, u64, u32)> {
        trace
            .iter()
            .map(|(w, _)| (w.class, w.addr, w.len))
            .collect()
    }

    /// A txn that declares two overlapping ranges and one apart, and changes a byte in each.
    /// Runs are whole words clipped to the declared ranges: [8, 20) and [100, 104).
    fn overlapping_txn(segment: &mut Segment) {
        let mut txn = segment.begin();
        txn.set_range(8, 8)[0] = 1;
        txn.set_range(12, 8)[7] = 2; // overlaps [8, 16)
        txn.set_range(100, 4)[0] = 3;
        txn.commit();
    }

    #[test]
    fn layouts_place_the_meta_block_after_the_second_region_aligned_to_8() {
        let v1 = MirrorLayout::new(Strategy::V1MirrorCopy, 4096, 999).unwrap();
        assert_eq!(
            v1.undo_log_capacity(),
            0,
            "V1 keeps no log in mirror memory"
        );
        assert_eq!(v1.meta_addr, 8192);
        assert_eq!(v1.total_len(), 8192 + 64);
        let v3 = MirrorLayout::new(Strategy::V3InlineLog, 4096, 13).unwrap();
        assert_eq!(v3.undo_log_capacity(), 13);
        assert_eq!(v3.meta_addr, 4096 + 16);
        assert_eq!(v3.total_len(), 4096 + 16 + 64);
        assert_eq!(
            MirrorLayout::new(Strategy::V0LinkedUndo, 4096, 0),
            Err(PassiveError::UnsupportedStrategy {
                strategy: Strategy::V0LinkedUndo
            })
        );
        assert_eq!(
            MirrorLayout::new(Strategy::V2MirrorDiff, 0, 0),
            Err(PassiveError::EmptySegment)
        );
        assert!(matches!(
            MirrorLayout::new(Strategy::V3InlineLog, 4096, usize::MAX - 10),
            Err(PassiveError::LayoutTooLarge { .. })
        ));
        let mut v0 = Segment::anonymous(PAGE_SIZE, Strategy::V0LinkedUndo).unwrap();
        let err = v0.enable_passive_trace(LOG_CAPACITY).unwrap_err();
        assert_eq!(
            err.to_string(),
            "strategy v0 has no passive backup: its undo records live at heap addresses that \
             have no place in mirror memory; use v1, v2 or v3"
        );
    }

    #[test]
    fn the_image_of_a_fresh_segment_is_zero_but_for_the_lsns() {
        for strategy in [Strategy::V1MirrorCopy, Strategy::V3InlineLog] {
            let (mut segment, layout) = traced(strategy);
            assert_eq!(segment.passive_image(), vec![0; layout.total_len()]);
            assert!(segment.passive_trace().is_empty());
            assert_eq!(segment.passive_trace().lsn(), 0);
            segment.begin().commit();
            let image = segment.passive_image();
            let mirror = PassiveMirror::from_image(layout, &image).unwrap();
            assert_eq!(mirror.committed_lsn(), 1, "{strategy}");
            assert_eq!(mirror.recover().unwrap(), segment.bytes());
        }
    }

    #[test]
    fn v3_ships_each_entry_and_log_end_then_data_then_one_commit_write() {
        let (mut segment, layout) = traced(Strategy::V3InlineLog);
        overlapping_txn(&mut segment);
        let log = 4096;
        let meta = layout.meta_addr as u64;
        use WriteClass::{Data, Meta, Undo};
        assert_eq!(
            shape(segment.passive_trace()),
            vec![
                (Meta, log, 16),
                (Undo, log + 16, 8),
                (Meta, meta, 8),
                (Meta, log + 24, 16),
                (Undo, log + 40, 8),
                (Meta, meta, 8),
                (Meta, log + 48, 16),
                (Undo, log + 64, 4),
                (Meta, meta, 8),
                (Data, 8, 12),
                (Data, 100, 4),
                (Meta, meta, 16),
            ]
        );
        let trace = segment.passive_trace();
        assert_eq!(trace.lsn(), 1);
        let writes: Vec<(PassiveWrite, &[u8])> = trace.iter().collect();
        assert_eq!(
            writes[3].1,
            [12, 0, 0, 0, 0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            writes[4].1,
            [0, 0, 0, 0, 0, 0, 0, 0],
            "old bytes before the txn"
        );
        assert_eq!(writes[8].1, 68u64.to_le_bytes());
        assert_eq!(
            writes[11].1,
            [0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]
        );
        assert_eq!(
            trace.class_bytes(),
            ClassBytes {
                data: 16,
                undo: 20,
                meta: 3 * 16 + 3 * 8 + 16
            }
        );
    }

    #[test]
    fn v1_copies_merged_spans_and_v2_only_changed_runs_after_the_commit_flag() {
        use WriteClass::{Data, Meta, Undo};
        let (mut v1, layout) = traced(Strategy::V1MirrorCopy);
        overlapping_txn(&mut v1);
        let meta = layout.meta_addr as u64;
        let mirror = 4096;
        // Each merged span is covered by changed words, so V2's runs equal V1's spans here.
        let expected = vec![
            (Data, 8, 12),
            (Data, 100, 4),
            (Meta, meta, 8),
            (Undo, mirror + 8, 12),
            (Undo, mirror + 100, 4),
            (Meta, meta + 8, 8),
        ];
        assert_eq!(shape(v1.passive_trace()), expected);
        let (mut v2, _) = traced(Strategy::V2MirrorDiff);
        overlapping_txn(&mut v2);
        assert_eq!(shape(v2.passive_trace()), expected);
    }

    #[test]
    fn an_abort_ships_nothing_and_keeps_the_last_commits_trace() {
        let (mut segment, _) = traced(Strategy::V3InlineLog);
        overlapping_txn(&mut segment);
        let trace = segment.passive_trace().clone();
        let mut txn = segment.begin();
        txn.set_range(0, 64).fill(9);
        txn.abort();
        assert_eq!(segment.passive_trace(), &trace);
    }

    #[test]
    fn the_trace_reuses_its_buffers() {
        let (mut segment, _) = traced(Strategy::V3InlineLog);
        overlapping_txn(&mut segment);
        let bytes_capacity = segment.passive_trace().bytes.capacity();
        let writes_capacity = segment.passive_trace().writes.capacity();
        let bytes_pointer = segment.passive_trace().bytes.as_ptr();
        overlapping_txn(&mut segment);
        let trace = segment.passive_trace();
        assert_eq!(trace.lsn(), 2);
        assert_eq!(trace.bytes.capacity(), bytes_capacity);
        assert_eq!(trace.writes.capacity(), writes_capacity);
        assert_eq!(trace.bytes.as_ptr(), bytes_pointer);
    }

    #[test]
    fn a_v3_log_larger_than_the_capacity_aborts_the_txn_and_panics() {
        let mut segment = Segment::anonymous(PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        segment.enable_passive_trace(16 + 8).unwrap();
        let committed = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            let mut txn = segment.begin();
            txn.set_range(0, 8).fill(1);
            txn.set_range(8, 1).fill(1);
            txn.commit();
        }));
        let message = committed.unwrap_err();
        let message = message.downcast_ref::<String>().unwrap();
        assert!(
            message.starts_with(
                "the txn's undo log of 41 bytes exceeds the passive backup's undo_log_capacity \
                 of 24 bytes, so the txn was aborted"
            ),
            "{message}"
        );
        assert!(
            segment.bytes().iter().all(|&b| b == 0),
            "the txn was aborted"
        );
        assert_eq!(segment.lsn(), 0);
        assert_eq!(
            segment.passive_trace(),
            &PassiveTrace::default(),
            "nothing shipped"
        );
        let mut txn = segment.begin();
        txn.set_range(0, 8).fill(1);
        txn.commit();
        assert_eq!(segment.passive_trace().lsn(), 1, "the segment works on");
    }

    #[test]
    #[should_panic(expected = "apply_redo on a segment with the passive trace enabled")]
    fn apply_redo_on_a_traced_segment_panics() {
        let (mut segment, _) = traced(Strategy::V2MirrorDiff);
        segment.apply_redo(&RedoRecord::empty(1)).unwrap();
    }

    #[test]
    #[should_panic(expected = "call enable_passive_trace first")]
    fn passive_image_without_the_trace_panics() {
        Segment::anonymous(PAGE_SIZE, Strategy::V3InlineLog)
            .unwrap()
            .passive_image();
    }

    #[test]
    fn out_of_bounds_writes_and_traces_change_nothing() {
        let layout = MirrorLayout::new(Strategy::V3InlineLog, 64, 32).unwrap();
        let mut mirror = PassiveMirror::new(layout);
        assert_eq!(layout.total_len(), 160);
        let err = mirror.write(150, &[1; 11]).unwrap_err();
        assert_eq!(
            err,
            PassiveError::OutOfBounds {
                addr: 150,
                len: 11,
                total: 160
            }
        );
        assert_eq!(
            err.to_string(),
            "write of 11 bytes at mirror address 150 ends past the mirror's 160 bytes; the \
             sender's layout differs from this mirror's (check segment_len and undo_log_capacity)"
        );
        assert!(mirror.write(u64::MAX, &[1]).is_err());
        mirror.write(150, &[1; 10]).unwrap();
        let mut trace = PassiveTrace::default();
        trace.push(WriteClass::Data, 0, &[7; 4]);
        trace.push(WriteClass::Data, 160, &[7]);
        assert!(mirror.apply(&trace).is_err());
        assert!(mirror.data().iter().all(|&b| b == 0), "never half-applied");
        assert_eq!(
            PassiveMirror::from_image(layout, &[0; 10]).unwrap_err(),
            PassiveError::ImageSize {
                got: 10,
                expected: 160
            }
        );
    }

    #[test]
    fn corrupt_v3_logs_are_errors() {
        let layout = MirrorLayout::new(Strategy::V3InlineLog, 64, 32).unwrap();
        let meta = layout.meta_addr as u64;
        let log = 64;
        let corrupt = |writes: &[(u64, [u8; 8])]| {
            let mut mirror = PassiveMirror::new(layout);
            for (addr, bytes) in writes {
                mirror.write(*addr, bytes).unwrap();
            }
            match mirror.recover() {
                Err(PassiveError::CorruptLog { addr, detail }) => (addr, detail),
                other => panic!("expected a corrupt log, got {other:?}"),
            }
        };
        assert_eq!(
            corrupt(&[(meta, 33u64.to_le_bytes())]),
            (meta, "log_end 33 exceeds the log capacity 32".to_owned())
        );
        assert_eq!(
            corrupt(&[(meta, 8u64.to_le_bytes())]),
            (
                log,
                "an entry header of 16 bytes at log position 0 passes log_end 8".to_owned()
            )
        );
        assert_eq!(
            corrupt(&[(meta, 20u64.to_le_bytes()), (log + 8, 5u64.to_le_bytes())]),
            (
                log,
                "the entry at log position 0 holds 5 old bytes but only 4 remain before log_end \
                 20"
                .to_owned()
            )
        );
        assert_eq!(
            corrupt(&[
                (meta, 20u64.to_le_bytes()),
                (log, 61u64.to_le_bytes()),
                (log + 8, 4u64.to_le_bytes())
            ]),
            (
                log,
                "the entry at log position 0 restores [61, +4), which leaves the 64-byte \
                 database"
                    .to_owned()
            )
        );
        let mut mirror = PassiveMirror::new(layout);
        mirror.write(meta, &20u64.to_le_bytes()).unwrap();
        mirror.write(log, &60u64.to_le_bytes()).unwrap();
        mirror.write(log + 8, &4u64.to_le_bytes()).unwrap();
        mirror.write(log + 16, &[5, 6, 7, 8]).unwrap();
        let mut expected = vec![0; 64];
        expected[60..].copy_from_slice(&[5, 6, 7, 8]);
        assert_eq!(
            mirror.recover().unwrap(),
            expected,
            "a valid entry rolls back"
        );
    }

    #[test]
    fn v1_lsns_that_are_neither_equal_nor_one_apart_are_corrupt() {
        let layout = MirrorLayout::new(Strategy::V1MirrorCopy, 64, 0).unwrap();
        let meta = layout.meta_addr as u64;
        let mut mirror = PassiveMirror::new(layout);
        mirror.write(meta, &5u64.to_le_bytes()).unwrap();
        mirror.write(meta + 8, &3u64.to_le_bytes()).unwrap();
        let err = mirror.recover().unwrap_err();
        assert_eq!(
            err.to_string(),
            "mirror memory at address 128 is corrupt: committed_lsn 5 is neither mirrored_lsn 3 \
             nor one more; it was not written by a primary with this layout, so re-prime the \
             backup from Segment::passive_image"
        );
        mirror.write(meta + 8, &u64::MAX.to_le_bytes()).unwrap();
        assert!(
            mirror.recover().is_err(),
            "no overflow at the top of the LSN range"
        );
    }

    #[test]
    fn class_bytes_add_up() {
        let mut sum = ClassBytes {
            data: 1,
            undo: 2,
            meta: 3,
        };
        sum += ClassBytes {
            data: 10,
            undo: 20,
            meta: 30,
        };
        assert_eq!(
            sum,
            ClassBytes {
                data: 11,
                undo: 22,
                meta: 33
            }
        );
        assert_eq!(sum.total(), 66);
    }
}
