//! A segment's image as it stood at one LSN, taken while it goes on changing: the fuzzy
//! checkpoint of seed 003 (section 4.4.2), made exact by copy-on-write by page.
//!
//! [`Segment::begin_snapshot`] marks the pages the image needs (those changed after a floor
//! LSN: the pages at or below it are the initial database, which a restart loads anyway) and
//! notes the LSN. From then on, a write that is about to change a page still marked copies
//! the page first, with its version ([`Segment::apply_redo`], a txn's declared range,
//! [`Segment::install_pages`]); [`Segment::snapshot_step`] hands out those copies and then
//! sweeps the marked pages in order, a few at a time, so the thread that owns the segment
//! spreads the copying between its other work and never stops for the whole segment. Every
//! page is handed out exactly once, as it stood at the snapshot's LSN.
//!
//! The pages leave as entries of `[page u32 LE][version u64 LE][PAGE_SIZE bytes]`, the
//! state-transfer chunk format, so a restart installs them with [`Segment::install_pages`].

use super::Segment;
use crate::PAGE_SIZE;

/// Bytes of one page entry a snapshot hands out.
pub const SNAPSHOT_ENTRY_LEN: usize = 4 + 8 + PAGE_SIZE;

/// A snapshot under way.
#[derive(Debug)]
pub(super) struct Snapshot {
    /// The LSN the image is of.
    lsn: u64,
    /// One bit per page: still to be handed out, as it stood at `lsn`.
    pending: Vec<u64>,
    /// Pages still marked.
    pending_count: usize,
    /// The next page the sweep looks at.
    sweep_next: usize,
    /// Entries of pages copied because a write was about to change them, not handed out yet.
    saved: Vec<u8>,
    /// Pages the image holds in all.
    pages_total: usize,
}

/// What [`Segment::snapshot_step`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapshotStep {
    /// Entries appended by this step.
    pub pages: usize,
    /// Every page of the image has been handed out: the snapshot is over.
    pub done: bool,
}

impl Snapshot {
    fn is_pending(&self, page: usize) -> bool {
        self.pending[page / 64] & (1 << (page % 64)) != 0
    }

    fn clear(&mut self, page: usize) {
        self.pending[page / 64] &= !(1 << (page % 64));
        self.pending_count -= 1;
    }
}

fn push_entry(out: &mut Vec<u8>, page: usize, version: u64, bytes: &[u8]) {
    debug_assert_eq!(bytes.len(), PAGE_SIZE);
    let index = u32::try_from(page).expect("a segment has fewer than 2^32 pages");
    out.extend_from_slice(&index.to_le_bytes());
    out.extend_from_slice(&version.to_le_bytes());
    out.extend_from_slice(bytes);
}

impl Segment {
    /// Begins an image of this segment as it stands now, at its LSN, holding every page
    /// changed after `lsn_floor` (each with its version). Returns how many pages it holds.
    ///
    /// Panics if a snapshot is already under way, inside a txn, on a rewound segment (its
    /// bytes are no state of any history) or with the passive trace on.
    pub fn begin_snapshot(&mut self, lsn_floor: u64) -> usize {
        assert!(self.snapshot.is_none(), "a snapshot is already under way");
        assert!(
            self.undo.is_empty(),
            "begin_snapshot called while a txn has ranges declared"
        );
        assert!(
            self.diverged.is_empty(),
            "a rewound segment holds no state to take an image of"
        );
        assert!(
            self.passive.is_none(),
            "begin_snapshot on a segment with the passive trace enabled"
        );
        let pages = self.pages();
        let mut pending = vec![0u64; pages.div_ceil(64)];
        let mut pending_count = 0;
        for (page, &version) in self.page_versions.iter().enumerate() {
            if version > lsn_floor {
                pending[page / 64] |= 1 << (page % 64);
                pending_count += 1;
            }
        }
        self.snapshot = Some(Box::new(Snapshot {
            lsn: self.lsn,
            pending,
            pending_count,
            sweep_next: 0,
            saved: Vec::new(),
            pages_total: pending_count,
        }));
        pending_count
    }

    /// The LSN of the snapshot under way, if one is.
    pub fn snapshot_lsn(&self) -> Option<u64> {
        self.snapshot.as_ref().map(|snapshot| snapshot.lsn)
    }

    /// Pages the snapshot under way holds in all, and how many it has still to hand out.
    pub fn snapshot_progress(&self) -> Option<(usize, usize)> {
        self.snapshot.as_ref().map(|snapshot| {
            let left = snapshot.pending_count + snapshot.saved.len() / SNAPSHOT_ENTRY_LEN;
            (snapshot.pages_total, left)
        })
    }

    /// Hands out up to `pages_max` pages of the snapshot under way, appended to `out` as
    /// entries: first those a write copied before it changed them, then the next marked pages
    /// in page order. Once every page is out the snapshot ends (`done`).
    ///
    /// Panics if no snapshot is under way.
    pub fn snapshot_step(&mut self, pages_max: usize, out: &mut Vec<u8>) -> SnapshotStep {
        let snapshot = self.snapshot.as_mut().expect("no snapshot is under way");
        let mut pages = 0;
        let saved_pages = snapshot.saved.len() / SNAPSHOT_ENTRY_LEN;
        if saved_pages > 0 {
            let take = saved_pages.min(pages_max);
            out.extend_from_slice(&snapshot.saved[..take * SNAPSHOT_ENTRY_LEN]);
            snapshot.saved.drain(..take * SNAPSHOT_ENTRY_LEN);
            pages += take;
        }
        while pages < pages_max && snapshot.pending_count > 0 {
            let page = snapshot.sweep_next;
            snapshot.sweep_next += 1;
            if !snapshot.is_pending(page) {
                continue;
            }
            snapshot.clear(page);
            let offset = page * PAGE_SIZE;
            push_entry(
                out,
                page,
                self.page_versions[page],
                &self.region.bytes()[offset..offset + PAGE_SIZE],
            );
            pages += 1;
        }
        let done = snapshot.pending_count == 0 && snapshot.saved.is_empty();
        if done {
            self.snapshot = None;
        }
        SnapshotStep { pages, done }
    }

    /// Gives up the snapshot under way, if any (its image is no longer wanted, or describes
    /// a history a view change discarded).
    pub fn abandon_snapshot(&mut self) {
        self.snapshot = None;
    }

    /// Before bytes `[offset, offset + len)` change: copies every page they touch that the
    /// snapshot under way still needs, as it stands (which is as it stood at the snapshot's
    /// LSN, since no write touched it since).
    #[inline]
    pub(super) fn save_before_write(&mut self, offset: usize, len: usize) {
        let Some(snapshot) = self.snapshot.as_mut() else {
            return;
        };
        if len == 0 || snapshot.pending_count == 0 {
            return;
        }
        let first = offset / PAGE_SIZE;
        let last = (offset + len - 1) / PAGE_SIZE;
        for page in first..=last {
            if snapshot.is_pending(page) {
                snapshot.clear(page);
                let start = page * PAGE_SIZE;
                push_entry(
                    &mut snapshot.saved,
                    page,
                    self.page_versions[page],
                    &self.region.bytes()[start..start + PAGE_SIZE],
                );
            }
        }
    }
}
