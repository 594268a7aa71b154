//! The segment: a fixed-size region of recoverable memory, its page versions and its LSN.
//!
//! A segment's bytes change in exactly two ways: through a [`Txn`] (on the node that executes
//! transactions) or through [`Segment::apply_redo`] (on a node that replays another's commits).
//! Both advance the LSN by one and stamp every page they change with the new LSN, so two
//! segments that saw the same records hold the same bytes and the same page versions.

pub(crate) mod region;
mod snapshot;

use std::fmt;
use std::io;
use std::path::Path;

use crate::PAGE_SIZE;
use crate::passive::{EMPTY_TRACE, MirrorLayout, PassiveError, PassiveTrace, Tracer};
use crate::redo::{RedoError, RedoRecord, copy_small};
use crate::strategy::{Scratch, Strategy, Undo};
use crate::txn::Txn;
use region::Region;
pub use snapshot::{SNAPSHOT_ENTRY_LEN, SnapshotStep};

/// Why a segment could not be created.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SegmentError {
    #[error(
        "segment size must be greater than zero; give a whole number of {PAGE_SIZE}-byte pages"
    )]
    Empty,
    #[error(
        "segment size {len} bytes is not a whole number of {PAGE_SIZE}-byte pages; use a \
         multiple of {PAGE_SIZE} such as {rounded}"
    )]
    NotWholePages { len: usize, rounded: usize },
    #[error("cannot map the segment: {0}")]
    Map(#[from] io::Error),
}

/// Why pages from another segment could not be installed; nothing was written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InstallError {
    #[error("the pages are of LSN {lsn}, behind this segment's LSN {lsn_segment}")]
    Behind { lsn: u64, lsn_segment: u64 },
    #[error("page {page} is outside this segment of {pages} pages")]
    PageOutOfRange { page: usize, pages: usize },
    #[error("page {page} holds {len} bytes, not {PAGE_SIZE}")]
    PageLen { page: usize, len: usize },
    #[error("page {page} has version {version}, above the pages' LSN {lsn}")]
    VersionAhead { page: usize, version: u64, lsn: u64 },
    #[error(
        "page {page} diverged from the group's history when this segment was rewound, and the \
         pages given do not replace it"
    )]
    DivergedLeft { page: usize },
}

/// A fixed-size region of 4 KiB pages with transactional updates and redo capture.
pub struct Segment {
    region: Region,
    undo: Undo,
    /// LSN of the last change to each page; 0 for a page never changed.
    page_versions: Vec<u64>,
    /// LSN of the last commit (or applied record); 0 before the first.
    lsn: u64,
    /// The redo record of the last commit, kept so its buffers are reused.
    redo: RedoRecord,
    scratch: Scratch,
    /// The passive backup's write-through trace, when enabled; boxed so the common case costs
    /// one pointer and one branch per commit.
    passive: Option<Box<Tracer>>,
    /// Pages changed by records above the LSN this segment was rewound to, in ascending
    /// order (see [`Segment::rewind`]); empty unless rewound. Until pages replace them all
    /// ([`Segment::install_pages`]), the segment's bytes are no state of any history: it runs
    /// no txn and applies no record.
    diverged: Vec<u32>,
    /// The LSN a rewound segment had before its first rewind: while no install has touched
    /// its bytes since, they are that state exactly ([`Segment::undo_rewind`]). Meaningless
    /// while `diverged` is empty.
    lsn_before_rewind: u64,
    /// The image under way, if any ([`Segment::begin_snapshot`]): every write first copies
    /// the pages it still needs.
    snapshot: Option<Box<snapshot::Snapshot>>,
}

impl fmt::Debug for Segment {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Segment")
            .field("len", &self.len())
            .field("strategy", &self.strategy())
            .field("lsn", &self.lsn)
            .finish_non_exhaustive()
    }
}

impl Segment {
    /// A zeroed segment of `len` bytes in anonymous memory.
    pub fn anonymous(len: usize, strategy: Strategy) -> Result<Segment, SegmentError> {
        check_len(len)?;
        Segment::with_region(Region::anonymous(len)?, strategy)
    }

    /// A segment whose bytes are the file at `path`, created zero-filled if absent.
    ///
    /// The file holds the bytes only: LSN and page versions start at zero when it is mapped
    /// again, and a mapped file is a snapshot only after [`Segment::flush`] between txns. A
    /// process that dies inside a txn leaves that txn's writes in the file; tandem recovers a
    /// node from its replicas, not from this file.
    pub fn file(path: &Path, len: usize, strategy: Strategy) -> Result<Segment, SegmentError> {
        check_len(len)?;
        let mut segment = Segment::with_region(Region::file(path, len)?, strategy)?;
        // A mirror starts zeroed; a file that already holds data must be copied into it.
        segment.undo.after_apply(0, segment.region.bytes());
        Ok(segment)
    }

    fn with_region(region: Region, strategy: Strategy) -> Result<Segment, SegmentError> {
        let len = region.len();
        Ok(Segment {
            undo: Undo::new(strategy, len)?,
            region,
            page_versions: vec![0; len / PAGE_SIZE],
            lsn: 0,
            redo: RedoRecord::empty(0),
            scratch: Scratch::default(),
            passive: None,
            diverged: Vec::new(),
            lsn_before_rewind: 0,
            snapshot: None,
        })
    }

    /// Starts a txn. Dropping the txn without committing aborts it.
    #[inline]
    pub fn begin(&mut self) -> Txn<'_> {
        assert!(
            self.undo.is_empty(),
            "a previous txn on this segment was leaked (mem::forget) with ranges declared; \
             its writes can no longer be undone"
        );
        assert!(
            self.diverged.is_empty(),
            "a txn on a rewound segment whose diverged pages were never replaced"
        );
        Txn::new(self)
    }

    #[inline]
    pub fn len(&self) -> usize {
        self.region.len()
    }

    /// Always false: a segment has at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn pages(&self) -> usize {
        self.page_versions.len()
    }

    pub fn strategy(&self) -> Strategy {
        self.undo.strategy()
    }

    /// LSN of the last commit or applied record; 0 before the first.
    #[inline]
    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    /// All bytes of the segment.
    pub fn bytes(&self) -> &[u8] {
        self.region.bytes()
    }

    /// `len` bytes at `offset`; panics if the range leaves the segment.
    #[inline]
    pub fn read(&self, offset: usize, len: usize) -> &[u8] {
        check_range(offset, len, self.len());
        &self.region.bytes()[offset..offset + len]
    }

    /// A plain-old-data value at `offset` (any alignment).
    #[inline]
    pub fn read_pod<T: bytemuck::Pod>(&self, offset: usize) -> T {
        bytemuck::pod_read_unaligned(self.read(offset, size_of::<T>()))
    }

    /// Hints that byte `offset` will be used soon, so the CPU can load its cache line while it
    /// works on something else. Has no effect on the segment's state; ignored past the end.
    #[inline]
    pub fn prefetch(&self, offset: usize) {
        self.region.prefetch(offset);
        // A commit that changes the byte will stamp its page's version.
        if let Some(version) = self.page_versions.get(offset / PAGE_SIZE) {
            region::prefetch_line(version);
        }
    }

    /// LSN of the last change to page `page`; 0 if it never changed.
    pub fn page_version(&self, page: usize) -> u64 {
        self.page_versions[page]
    }

    pub fn page_versions(&self) -> &[u64] {
        &self.page_versions
    }

    /// The redo record of the last commit made through a txn on this segment.
    pub fn last_redo(&self) -> &RedoRecord {
        &self.redo
    }

    /// Applies another segment's committed record: its LSN must be the next one.
    ///
    /// The record is checked whole before any byte is written, so a refused record leaves the
    /// segment untouched.
    ///
    /// Panics on a segment with the passive trace enabled: its passive backup would miss the
    /// record's bytes. A segment either executes txns for a passive backup or replays records.
    pub fn apply_redo(&mut self, record: &RedoRecord) -> Result<(), RedoError> {
        assert!(
            self.undo.is_empty(),
            "apply_redo called while a txn has ranges declared"
        );
        assert!(
            self.passive.is_none(),
            "apply_redo on a segment with the passive trace enabled: its passive backup would \
             miss these bytes; replay records on a segment without the trace"
        );
        assert!(
            self.diverged.is_empty(),
            "apply_redo on a rewound segment whose diverged pages were never replaced"
        );
        let expected = self.lsn + 1;
        if record.lsn() != expected {
            return Err(RedoError::LsnGap {
                expected,
                got: record.lsn(),
            });
        }
        record.validate_bounds(self.len() as u64)?;
        for (run, bytes) in record.iter() {
            let offset = run.offset as usize;
            self.save_before_write(offset, bytes.len());
            copy_small(
                &mut self.region.bytes_mut()[offset..offset + bytes.len()],
                bytes,
            );
            self.undo.after_apply(offset, bytes);
        }
        stamp_pages(&mut self.page_versions, record);
        self.lsn = expected;
        Ok(())
    }

    /// Brings this segment to LSN `lsn` with pages of a segment at that LSN: `(page, version,
    /// bytes)` for every page changed after this segment's LSN (a state transfer). Pages not
    /// given must be the same in both segments, which holds when this segment's state is the
    /// other's history at this segment's LSN. Every page is checked before any byte is
    /// written, so a refused install leaves the segment untouched.
    ///
    /// Panics on a segment with the passive trace enabled, as [`Segment::apply_redo`] does.
    pub fn install_pages(
        &mut self,
        lsn: u64,
        pages: &[(usize, u64, &[u8])],
    ) -> Result<(), InstallError> {
        assert!(
            self.undo.is_empty(),
            "install_pages called while a txn has ranges declared"
        );
        assert!(
            self.passive.is_none(),
            "install_pages on a segment with the passive trace enabled"
        );
        if lsn < self.lsn {
            return Err(InstallError::Behind {
                lsn,
                lsn_segment: self.lsn,
            });
        }
        for &(page, version, bytes) in pages {
            if page >= self.pages() {
                let pages = self.pages();
                return Err(InstallError::PageOutOfRange { page, pages });
            }
            if bytes.len() != PAGE_SIZE {
                let len = bytes.len();
                return Err(InstallError::PageLen { page, len });
            }
            if version > lsn {
                return Err(InstallError::VersionAhead { page, version, lsn });
            }
        }
        if let Some(page) = self.diverged_left(pages) {
            return Err(InstallError::DivergedLeft { page });
        }
        for &(page, version, bytes) in pages {
            let offset = page * PAGE_SIZE;
            self.save_before_write(offset, PAGE_SIZE);
            self.region.bytes_mut()[offset..offset + PAGE_SIZE].copy_from_slice(bytes);
            self.undo.after_apply(offset, bytes);
            self.page_versions[page] = version;
        }
        self.diverged.clear();
        self.lsn = lsn;
        Ok(())
    }

    /// Takes back every record above `lsn` without touching a byte: the segment's LSN goes
    /// back to `lsn`, and the pages those records changed (version above `lsn`) are marked
    /// diverged. Returns the diverged pages, ascending.
    ///
    /// A node whose records above a view's truncate LSN were discarded keeps its segment this
    /// way: every other page is the group's history at `lsn` (no record at or below `lsn`
    /// changed it since), so a state transfer of the pages changed after `lsn` plus the
    /// diverged ones brings it to the primary's state ([`Segment::install_pages`], which
    /// refuses pages that leave a diverged one unreplaced). Until then the segment runs no
    /// txn and applies no record. Rewinding again, to a lower LSN, adds to the diverged pages.
    ///
    /// Panics if `lsn` is above the segment's LSN, or on a segment with the passive trace
    /// enabled (its passive backup holds the diverged bytes too).
    pub fn rewind(&mut self, lsn: u64) -> &[u32] {
        assert!(
            lsn <= self.lsn,
            "rewind to LSN {lsn}, above the segment's LSN {}",
            self.lsn
        );
        assert!(
            self.undo.is_empty(),
            "rewind called while a txn has ranges declared"
        );
        assert!(
            self.passive.is_none(),
            "rewind on a segment with the passive trace enabled"
        );
        if self.diverged.is_empty() {
            self.lsn_before_rewind = self.lsn;
        }
        // An image of records the rewind takes back describes a history that was discarded.
        if self.snapshot_lsn().is_some_and(|snapshot| snapshot > lsn) {
            self.abandon_snapshot();
        }
        #[cfg(feature = "inject-bugs")]
        let forget = crate::bugs::planted(crate::bugs::Bug::RewindForgets);
        #[cfg(not(feature = "inject-bugs"))]
        let forget = false;
        for (page, &version) in self.page_versions.iter().enumerate() {
            if version > lsn && !forget {
                let page = u32::try_from(page).expect("a segment has fewer than 2^32 pages");
                if let Err(at) = self.diverged.binary_search(&page) {
                    self.diverged.insert(at, page);
                }
            }
        }
        self.lsn = lsn;
        &self.diverged
    }

    /// A rewound segment's LSN before its first rewind (`None` if it is not rewound). No
    /// install has touched it since (an install replaces every diverged page or nothing), so
    /// its bytes still are that state, and [`Segment::undo_rewind`] takes the rewind back.
    pub fn lsn_before_rewind(&self) -> Option<u64> {
        (!self.diverged.is_empty()).then_some(self.lsn_before_rewind)
    }

    /// Takes back the rewinds since the segment last held a state of some history: its LSN
    /// is again the one before the first of them, and no page is diverged. For a node that
    /// rewound to follow a primary that never served, and is promoted from the records it
    /// held before (a recovery: `tandem_config::Promotion::based_on`).
    ///
    /// Panics on a segment that is not rewound.
    pub fn undo_rewind(&mut self) {
        let lsn = self
            .lsn_before_rewind()
            .expect("undo_rewind on a segment that is not rewound");
        assert!(lsn >= self.lsn, "a rewind only lowers the LSN");
        self.diverged.clear();
        self.lsn = lsn;
    }

    /// The pages a rewind left diverged that no install has replaced yet, ascending (empty
    /// for a segment that holds a state of the group's history).
    pub fn diverged(&self) -> &[u32] {
        &self.diverged
    }

    /// The first diverged page that `pages` does not replace.
    fn diverged_left(&self, pages: &[(usize, u64, &[u8])]) -> Option<usize> {
        if self.diverged.is_empty() {
            return None;
        }
        let mut given: Vec<usize> = pages.iter().map(|&(page, _, _)| page).collect();
        given.sort_unstable();
        self.diverged
            .iter()
            .map(|&page| page as usize)
            .find(|page| given.binary_search(page).is_err())
    }

    /// Writes a file-backed segment's dirty pages back to its file.
    pub fn flush(&self) -> io::Result<()> {
        assert!(
            self.undo.is_empty(),
            "flush inside a txn would persist uncommitted bytes"
        );
        self.region.flush()
    }

    #[inline]
    pub(crate) fn declare(&mut self, offset: usize, len: usize) -> &mut [u8] {
        check_range(offset, len, self.len());
        if len > 0 {
            self.save_before_write(offset, len);
            self.undo.declare(self.region.bytes(), offset, len);
        }
        &mut self.region.bytes_mut()[offset..offset + len]
    }

    pub(crate) fn declared_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        check_range(offset, len, self.len());
        assert!(
            len == 0 || self.undo.covers(offset, len),
            "write to [{offset}, {}) outside every declared range; call set_range first",
            offset + len
        );
        &mut self.region.bytes_mut()[offset..offset + len]
    }

    /// Turns on the passive backup's trace: from now on every commit fills
    /// [`Segment::passive_trace`]. `undo_log_capacity` sizes V3's log region in the backup (the
    /// most log bytes one txn may write; a commit that exceeds it panics after aborting the txn);
    /// V1 and V2 ignore it. Enabling again replaces the layout and empties the trace.
    ///
    /// Refused for V0, whose heap-linked undo records have no place in mirror memory.
    pub fn enable_passive_trace(
        &mut self,
        undo_log_capacity: usize,
    ) -> Result<MirrorLayout, PassiveError> {
        let layout = MirrorLayout::new(self.strategy(), self.len(), undo_log_capacity)?;
        self.passive = Some(Box::new(Tracer::new(layout)));
        Ok(layout)
    }

    /// The layout of the passive backup's mirror memory, if the trace is on.
    pub fn passive_layout(&self) -> Option<MirrorLayout> {
        self.passive.as_ref().map(|tracer| tracer.layout())
    }

    /// The writes the last committed txn made to its passive backup's mirror memory; empty
    /// before the first traced commit and when the trace is off. An abort leaves it unchanged.
    pub fn passive_trace(&self) -> &PassiveTrace {
        match &self.passive {
            Some(tracer) => tracer.trace(),
            None => &EMPTY_TRACE,
        }
    }

    /// The bytes a passive backup's mirror memory must start from to equal this segment now:
    /// the database and (V1, V2) its mirror hold the segment's bytes, V3's log is empty, and
    /// the meta block names the current LSN. Prime a [`crate::PassiveMirror`] with it before
    /// the first traced commit.
    ///
    /// Panics if the passive trace is off.
    pub fn passive_image(&self) -> Vec<u8> {
        let tracer = self
            .passive
            .as_ref()
            .expect("passive_image needs the passive trace; call enable_passive_trace first");
        assert!(
            self.undo.is_empty(),
            "passive_image inside a txn would hold uncommitted bytes"
        );
        tracer.layout().image(self.bytes(), self.lsn)
    }

    #[inline]
    pub(crate) fn commit_txn(&mut self) -> &RedoRecord {
        if self.passive.is_some() {
            self.commit_traced();
        } else {
            self.commit_untraced();
        }
        &self.redo
    }

    /// A commit that also fills the passive trace: the trace reads the undo state before the
    /// commit releases it and the committed bytes after.
    #[inline(never)]
    fn commit_traced(&mut self) {
        let tracer = self.passive.as_mut().expect("the passive trace is on");
        if let Err(overflow) = tracer.begin_commit(&self.undo, self.lsn + 1) {
            self.abort_txn();
            panic!("{overflow}");
        }
        self.commit_untraced();
        let tracer = self.passive.as_mut().expect("the passive trace is on");
        tracer.finish_commit(self.region.bytes(), &self.redo);
    }

    #[inline(always)]
    fn commit_untraced(&mut self) {
        let lsn = self.lsn + 1;
        self.redo.reset(lsn);
        self.undo
            .commit(self.region.bytes(), &mut self.scratch, self.redo.runs_mut());
        debug_assert!(
            self.redo
                .runs()
                .windows(2)
                .all(|pair| pair[0].end() < pair[1].offset),
            "capture yields sorted runs that neither overlap nor touch"
        );
        self.redo.fill_data(self.region.bytes());
        debug_assert_eq!(self.redo.validate_bounds(self.len() as u64), Ok(()));
        stamp_pages(&mut self.page_versions, &self.redo);
        self.lsn = lsn;
        assert!(self.undo.is_empty(), "commit left undo state behind");
        assert_eq!(self.redo.lsn(), self.lsn);
    }

    pub(crate) fn abort_txn(&mut self) {
        self.undo.abort(self.region.bytes_mut());
        assert!(self.undo.is_empty(), "abort left undo state behind");
    }

    #[cfg(test)]
    pub(crate) fn mirror(&self) -> Option<&[u8]> {
        self.undo.mirror()
    }
}

/// Sets the version of every page a record changed to the record's LSN.
#[inline]
fn stamp_pages(page_versions: &mut [u64], record: &RedoRecord) {
    for run in record.runs() {
        let first = run.offset as usize / PAGE_SIZE;
        let last = (run.end() as usize - 1) / PAGE_SIZE;
        for version in &mut page_versions[first..=last] {
            debug_assert!(*version <= record.lsn(), "page versions only move forward");
            *version = record.lsn();
        }
    }
}

fn check_len(len: usize) -> Result<(), SegmentError> {
    if len == 0 {
        return Err(SegmentError::Empty);
    }
    if !len.is_multiple_of(PAGE_SIZE) {
        return Err(SegmentError::NotWholePages {
            len,
            rounded: len.next_multiple_of(PAGE_SIZE),
        });
    }
    Ok(())
}

#[inline]
fn check_range(offset: usize, len: usize, segment_len: usize) {
    let end = offset.checked_add(len);
    assert!(
        end.is_some_and(|end| end <= segment_len),
        "range [{offset}, +{len}) leaves the segment of {segment_len} bytes"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Run;

    fn segment(strategy: Strategy) -> Segment {
        Segment::anonymous(4 * PAGE_SIZE, strategy).unwrap()
    }

    #[test]
    fn sizes_must_be_whole_nonzero_pages() {
        assert!(matches!(
            Segment::anonymous(0, Strategy::V3InlineLog),
            Err(SegmentError::Empty)
        ));
        let err = Segment::anonymous(5000, Strategy::V3InlineLog).unwrap_err();
        assert_eq!(
            err.to_string(),
            "segment size 5000 bytes is not a whole number of 4096-byte pages; use a multiple \
             of 4096 such as 8192"
        );
    }

    #[test]
    fn commit_captures_changed_words_and_stamps_pages() {
        for strategy in Strategy::ALL {
            let mut segment = segment(strategy);
            let mut txn = segment.begin();
            txn.set_range(100, 4).copy_from_slice(&[1, 2, 3, 4]);
            *txn.set_pod::<u32>(2 * PAGE_SIZE) = 7;
            txn.set_range(3 * PAGE_SIZE, 64); // declared, never written
            let redo = txn.commit();
            assert_eq!(redo.lsn(), 1);
            assert_eq!(
                redo.runs(),
                &[
                    Run {
                        offset: 100,
                        len: 4
                    },
                    Run {
                        offset: 2 * PAGE_SIZE as u64,
                        len: 4
                    }
                ]
            );
            assert_eq!(redo.data(), &[1, 2, 3, 4, 7, 0, 0, 0]);
            assert_eq!(segment.page_versions(), &[1, 0, 1, 0], "{strategy}");
            assert_eq!(segment.lsn(), 1);
            if let Some(mirror) = segment.mirror() {
                assert_eq!(
                    mirror,
                    segment.bytes(),
                    "{strategy} mirror holds the committed image"
                );
            }
        }
    }

    /// The pages changed after `lsn_from`, as a state transfer sends them.
    fn changed_pages(segment: &Segment, lsn_from: u64) -> Vec<(usize, u64, &[u8])> {
        (0..segment.pages())
            .filter(|&page| segment.page_version(page) > lsn_from)
            .map(|page| {
                let bytes = segment.read(page * PAGE_SIZE, PAGE_SIZE);
                (page, segment.page_version(page), bytes)
            })
            .collect()
    }

    #[test]
    fn installing_the_pages_changed_since_its_lsn_makes_a_segment_equal() {
        for strategy in Strategy::ALL {
            let mut source = segment(strategy);
            let mut behind = segment(strategy);
            for value in 1..=3u32 {
                let mut txn = source.begin();
                *txn.set_pod::<u32>(value as usize * 8) = value;
                let record = txn.commit().clone();
                if value == 1 {
                    behind.apply_redo(&record).unwrap();
                }
                let mut txn = source.begin();
                *txn.set_pod::<u32>(3 * PAGE_SIZE) = value;
                let record = txn.commit().clone();
                if value == 1 {
                    behind.apply_redo(&record).unwrap();
                }
            }
            let pages = changed_pages(&source, behind.lsn());
            assert_eq!(pages.len(), 2, "pages 0 and 3 changed after LSN 2");
            behind.install_pages(source.lsn(), &pages).unwrap();
            assert_eq!(behind.lsn(), source.lsn());
            assert!(behind.bytes() == source.bytes(), "{strategy}");
            assert_eq!(behind.page_versions(), source.page_versions());
            if let Some(mirror) = behind.mirror() {
                assert_eq!(
                    mirror,
                    behind.bytes(),
                    "{strategy} mirror follows the install"
                );
            }
            // The installed segment goes on with txns and aborts like any other.
            let mut txn = behind.begin();
            txn.set_range(0, 4).fill(9);
            txn.abort();
            assert!(
                behind.bytes() == source.bytes(),
                "{strategy} abort after install"
            );
        }
    }

    #[test]
    fn a_rewound_segment_takes_back_its_records_by_installing_the_diverged_pages_too() {
        for strategy in Strategy::ALL {
            let mut primary = segment(strategy);
            let mut deposed = segment(strategy);
            let commit = |segment: &mut Segment, offset: usize, value: u32| {
                let mut txn = segment.begin();
                *txn.set_pod::<u32>(offset) = value;
                txn.commit().clone()
            };
            // A common history up to LSN 2.
            for (offset, value) in [(0, 1), (PAGE_SIZE, 2)] {
                let record = commit(&mut primary, offset, value);
                deposed.apply_redo(&record).unwrap();
            }
            // The deposed node ran two records the group discards; page 2 only it changed.
            commit(&mut deposed, 2 * PAGE_SIZE, 9);
            commit(&mut deposed, PAGE_SIZE + 8, 9);
            // The new primary went on from LSN 2 elsewhere.
            commit(&mut primary, 3 * PAGE_SIZE, 3);
            assert_eq!(deposed.rewind(2), &[1, 2]);
            assert_eq!(deposed.lsn(), 2);
            // Rewinding again to the same LSN marks nothing new.
            assert_eq!(deposed.rewind(2), &[1, 2]);
            // The pages changed after LSN 2 alone leave page 2 as the discarded record left it.
            let changed = changed_pages(&primary, 2);
            assert_eq!(
                deposed.install_pages(primary.lsn(), &changed),
                Err(InstallError::DivergedLeft { page: 1 })
            );
            let mut wanted: Vec<usize> = changed.iter().map(|&(page, _, _)| page).collect();
            wanted.extend(deposed.diverged().iter().map(|&page| page as usize));
            wanted.sort_unstable();
            wanted.dedup();
            let pages: Vec<(usize, u64, &[u8])> = wanted
                .into_iter()
                .map(|page| {
                    let bytes = primary.read(page * PAGE_SIZE, PAGE_SIZE);
                    (page, primary.page_version(page), bytes)
                })
                .collect();
            deposed.install_pages(primary.lsn(), &pages).unwrap();
            assert!(deposed.diverged().is_empty());
            assert!(deposed.bytes() == primary.bytes(), "{strategy}");
            assert_eq!(deposed.page_versions(), primary.page_versions());
            if let Some(mirror) = deposed.mirror() {
                assert_eq!(mirror, deposed.bytes(), "{strategy} mirror follows");
            }
            // It replays the primary's next record like any backup.
            let record = commit(&mut primary, 8, 4);
            deposed.apply_redo(&record).unwrap();
            assert!(deposed.bytes() == primary.bytes(), "{strategy}");
        }
    }

    #[test]
    fn a_rewind_nothing_touched_since_is_taken_back_to_the_state_before_it() {
        for strategy in Strategy::ALL {
            let mut deposed = segment(strategy);
            let mut twin = segment(strategy);
            for (offset, value) in [(0, 1), (PAGE_SIZE, 2), (2 * PAGE_SIZE, 3)] {
                let mut txn = deposed.begin();
                *txn.set_pod::<u32>(offset) = value;
                let record = txn.commit().clone();
                twin.apply_redo(&record).unwrap();
            }
            assert_eq!(deposed.lsn_before_rewind(), None);
            deposed.rewind(2);
            deposed.rewind(1);
            assert_eq!(deposed.lsn_before_rewind(), Some(3));
            deposed.undo_rewind();
            assert_eq!(deposed.lsn(), 3);
            assert!(deposed.diverged().is_empty());
            assert_eq!(deposed.lsn_before_rewind(), None);
            assert!(deposed.bytes() == twin.bytes(), "{strategy}");
            // It runs txns again, from the state before the rewind.
            let mut txn = deposed.begin();
            *txn.set_pod::<u32>(8) = 4;
            assert_eq!(txn.commit().lsn(), 4);
        }
    }

    #[test]
    #[should_panic(expected = "rewound segment")]
    fn a_rewound_segment_runs_no_txn_until_its_diverged_pages_are_replaced() {
        let mut segment = segment(Strategy::V3InlineLog);
        let mut txn = segment.begin();
        *txn.set_pod::<u32>(0) = 1;
        txn.commit();
        segment.rewind(0);
        let _ = segment.begin();
    }

    #[test]
    fn a_refused_install_writes_nothing() {
        let mut target = segment(Strategy::V3InlineLog);
        let page = [7u8; PAGE_SIZE];
        let short = [7u8; 10];
        type Page<'a> = (usize, u64, &'a [u8]);
        let cases: [(u64, Vec<Page>, InstallError); 3] = [
            (
                5,
                vec![(0, 5, &page[..]), (4, 5, &page[..])],
                InstallError::PageOutOfRange { page: 4, pages: 4 },
            ),
            (
                5,
                vec![(1, 5, &page[..]), (2, 5, &short[..])],
                InstallError::PageLen { page: 2, len: 10 },
            ),
            (
                5,
                vec![(1, 6, &page[..])],
                InstallError::VersionAhead {
                    page: 1,
                    version: 6,
                    lsn: 5,
                },
            ),
        ];
        for (lsn, pages, expected) in cases {
            assert_eq!(target.install_pages(lsn, &pages), Err(expected));
            assert!(target.bytes().iter().all(|&byte| byte == 0));
            assert_eq!(target.lsn(), 0);
            assert_eq!(target.page_versions(), &[0, 0, 0, 0]);
        }
        let mut txn = target.begin();
        txn.set_range(0, 1).fill(1);
        txn.commit();
        assert_eq!(
            target.install_pages(0, &[]),
            Err(InstallError::Behind {
                lsn: 0,
                lsn_segment: 1
            })
        );
    }

    #[test]
    fn abort_restores_every_declared_byte() {
        for strategy in Strategy::ALL {
            let mut segment = segment(strategy);
            let mut txn = segment.begin();
            txn.set_range(0, 8).fill(5);
            txn.commit();
            let mut txn = segment.begin();
            txn.set_range(0, 8).fill(9);
            txn.set_range(4, 8).fill(6); // overlaps the first range
            txn.abort();
            assert_eq!(
                segment.read(0, 12),
                &[5, 5, 5, 5, 5, 5, 5, 5, 0, 0, 0, 0],
                "{strategy}"
            );
            assert_eq!(segment.lsn(), 1, "an abort takes no LSN");
        }
    }

    #[test]
    fn dropping_a_txn_aborts_it() {
        let mut segment = segment(Strategy::V3InlineLog);
        {
            let mut txn = segment.begin();
            txn.set_range(10, 2).fill(1);
        }
        assert!(segment.bytes().iter().all(|&b| b == 0));
        assert_eq!(segment.lsn(), 0);
    }

    #[test]
    #[should_panic(expected = "outside every declared range; call set_range first")]
    fn writing_outside_declared_ranges_panics() {
        let mut segment = segment(Strategy::V1MirrorCopy);
        let mut txn = segment.begin();
        txn.set_range(0, 8);
        txn.range_mut(4, 8);
    }

    #[test]
    #[should_panic(expected = "leaves the segment")]
    fn set_range_past_the_end_panics() {
        let mut segment = segment(Strategy::V0LinkedUndo);
        segment.begin().set_range(4 * PAGE_SIZE - 2, 4);
    }

    #[test]
    fn an_empty_commit_still_takes_an_lsn() {
        let mut segment = segment(Strategy::V2MirrorDiff);
        let redo = segment.begin().commit();
        assert!(redo.is_empty());
        assert_eq!(segment.lsn(), 1);
    }

    #[test]
    fn apply_refuses_a_gap_or_out_of_bounds_record_and_changes_nothing() {
        let mut segment = segment(Strategy::V3InlineLog);
        let gap = RedoRecord::from_parts(2, vec![Run { offset: 0, len: 1 }], vec![1]).unwrap();
        assert_eq!(
            segment.apply_redo(&gap),
            Err(RedoError::LsnGap {
                expected: 1,
                got: 2
            })
        );
        let runs = vec![
            Run { offset: 0, len: 1 },
            Run {
                offset: 4 * PAGE_SIZE as u64,
                len: 1,
            },
        ];
        let outside = RedoRecord::from_parts(1, runs, vec![1, 1]).unwrap();
        assert!(matches!(
            segment.apply_redo(&outside),
            Err(RedoError::OutOfBounds { .. })
        ));
        assert!(
            segment.bytes().iter().all(|&b| b == 0),
            "nothing of a refused record applies"
        );
        assert_eq!(segment.lsn(), 0);
    }

    #[test]
    fn a_long_undo_list_is_freed_without_recursion() {
        let mut segment = Segment::anonymous(64 * PAGE_SIZE, Strategy::V0LinkedUndo).unwrap();
        let mut txn = segment.begin();
        for offset in 0..200_000 {
            txn.set_range(offset, 1)[0] = 1;
        }
        txn.abort();
        assert!(segment.bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn file_segment_primes_its_mirror_from_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("segment");
        {
            let mut segment = Segment::file(&path, PAGE_SIZE, Strategy::V3InlineLog).unwrap();
            segment.begin().set_range(0, 4).fill(3);
            segment.begin().set_range(0, 4).fill(3);
            let mut txn = segment.begin();
            txn.set_range(0, 4).fill(3);
            txn.commit();
            segment.flush().unwrap();
        }
        let mut segment = Segment::file(&path, PAGE_SIZE, Strategy::V1MirrorCopy).unwrap();
        assert_eq!(segment.read(0, 4), &[3, 3, 3, 3]);
        let mut txn = segment.begin();
        txn.set_range(0, 4).fill(8);
        txn.abort();
        assert_eq!(
            segment.read(0, 4),
            &[3, 3, 3, 3],
            "abort restores from the primed mirror"
        );
    }
}
