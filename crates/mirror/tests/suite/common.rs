//! The checker every tracker test uses, and which kinds this kernel grants.
//!
//! Every kind the kernel supports is required: development and CI run as root on the same
//! kernel, so a kind refused for any reason but the kernel's lack of it fails
//! `require_every_kind`, saying why, rather than being skipped. The other tests run every
//! granted kind first, so a refused kind hides nothing about the others.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, MutexGuard, OnceLock};

use tandem_mirror::{DirtyTracker, Refusal, Region, TrackError, TrackerKind, tracker_for};

/// One interval's stores, each a byte at an offset of the region.
#[derive(Debug, Clone, Default)]
pub struct Interval {
    pub stores: Vec<(usize, u8)>,
}

impl Interval {
    /// An interval storing `byte` at the first byte of each of `pages`.
    pub fn pages(pages: &[usize], byte: u8) -> Interval {
        let page_size = tandem_mirror::page_size();
        Interval {
            stores: pages.iter().map(|&page| (page * page_size, byte)).collect(),
        }
    }

    /// The pages stored to, whatever the bytes (a store of the byte already there counts).
    pub fn pages_stored(&self, page_size: usize) -> BTreeSet<usize> {
        self.stores
            .iter()
            .map(|&(offset, _)| offset / page_size)
            .collect()
    }
}

/// A harvest that differs from the pages stored to in its interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    pub kind: TrackerKind,
    /// The interval, from 0.
    pub interval: usize,
    /// Stored to, not reported.
    pub missing: Vec<usize>,
    /// Reported, not stored to.
    pub extra: Vec<usize>,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} tracker, interval {}: pages stored to but not reported {:?}, reported but not \
             stored to {:?}",
            self.kind, self.interval, self.missing, self.extra
        )
    }
}

/// Runs `intervals` through `tracker`, harvesting after each, and requires each harvest to be
/// exactly the pages stored to in its interval, ascending, each once. Returns the harvests.
pub fn check(
    tracker: &mut dyn DirtyTracker,
    intervals: &[Interval],
) -> Result<Vec<Vec<usize>>, Mismatch> {
    let page_size = tracker.region().page_size();
    let mut harvests = Vec::new();
    for (index, interval) in intervals.iter().enumerate() {
        let bytes = tracker.region_mut().as_mut_slice();
        for &(offset, byte) in &interval.stores {
            bytes[offset] = byte;
        }
        let mut dirty_pages = Vec::new();
        tracker.harvest(&mut dirty_pages).expect("a harvest");
        assert!(
            dirty_pages.windows(2).all(|pair| pair[0] < pair[1]),
            "{} tracker reported pages out of order or twice: {dirty_pages:?}",
            tracker.kind()
        );
        let reported: BTreeSet<usize> = dirty_pages.iter().copied().collect();
        let stored = interval.pages_stored(page_size);
        if reported != stored {
            return Err(Mismatch {
                kind: tracker.kind(),
                interval: index,
                missing: stored.difference(&reported).copied().collect(),
                extra: reported.difference(&stored).copied().collect(),
            });
        }
        harvests.push(dirty_pages);
    }
    Ok(harvests)
}

static SOFT_DIRTY: Mutex<()> = Mutex::new(());

/// Held by every test that may make a soft-dirty tracker: only one may live in a process.
pub fn soft_dirty_lock() -> MutexGuard<'static, ()> {
    // Found first: finding it takes the lock too.
    availability();
    lock_soft_dirty()
}

fn lock_soft_dirty() -> MutexGuard<'static, ()> {
    SOFT_DIRTY
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A tracker of `kind` over a fresh region of `pages` pages.
pub fn make(kind: TrackerKind, pages: usize) -> Result<Box<dyn DirtyTracker>, Refusal> {
    tracker_for(Region::with_pages(pages).expect("map a region"), Some(kind))
}

/// Each kind, with why this kernel refuses it if it does (found once, on a scratch page).
pub fn availability() -> &'static [(TrackerKind, Result<(), String>)] {
    static FOUND: OnceLock<Vec<(TrackerKind, Result<(), String>)>> = OnceLock::new();
    FOUND.get_or_init(|| {
        let _lock = lock_soft_dirty();
        TrackerKind::ALL
            .into_iter()
            .map(|kind| {
                (
                    kind,
                    make(kind, 1)
                        .map(drop)
                        .map_err(|refusal| refusal.to_string()),
                )
            })
            .collect()
    })
}

/// The kinds this kernel grants, fastest first.
pub fn granted_kinds() -> Vec<TrackerKind> {
    availability()
        .iter()
        .filter(|(_, found)| found.is_ok())
        .map(|&(kind, _)| kind)
        .collect()
}

/// Fails, naming every kind this kernel refuses and why, but for soft-dirty bits on a kernel
/// built without them (`CONFIG_MEM_SOFT_DIRTY`, which this machine's lacks): that one the
/// probe must refuse as unsupported, and the refusal is said on stderr. A soft-dirty tracker
/// refused for any other reason fails too.
pub fn require_every_kind() {
    let mut refused = Vec::new();
    for (kind, found) in availability() {
        let Err(why) = found else { continue };
        let unsupported = TrackError::SoftDirtyUnsupported.to_string();
        if *kind == TrackerKind::SoftDirty && why.contains(&unsupported) {
            eprintln!("{kind}: refused by this kernel, as the probe says: {why}");
            continue;
        }
        refused.push(format!("{kind}: {why}"));
    }
    assert!(
        refused.is_empty(),
        "every tracker kind this kernel supports must work (root, the CI kernel), but:\n{}",
        refused.join("\n")
    );
}
