//! `SoftDirtyTracker`: the kernel's soft-dirty bits. Writing "4" to `/proc/self/clear_refs`
//! clears every page's bit, process-wide; the first store to a page afterwards sets it again
//! (bit 55 of the page's entry in `/proc/self/pagemap`). Needs CONFIG_MEM_SOFT_DIRTY.
//!
//! Reading the bits and clearing them are two system calls, and a store between them would
//! be lost (read clean, cleared, never seen). No order of the two closes that window, so a
//! harvest fences the region for the duration: it makes the region read-only and registers
//! it with the SIGSEGV handler (`fault.rs`), which records any store made meanwhile.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::fault::Watch;
use crate::mprotect::push_bits;
use crate::planted::{HarvestHook, Planted, PlantedBug};
use crate::{DirtyTracker, Refusal, Region, TrackError, TrackerKind};

/// Bit 55 of a pagemap entry: the page was written since soft-dirty bits were last cleared.
const PM_SOFT_DIRTY: u64 = 1 << 55;
/// Pagemap entries read per `pread`.
const ENTRIES_PER_READ: usize = 4096;

/// Whether a soft-dirty tracker (or a probe of soft-dirty bits) is live in this process.
static LIVE: AtomicBool = AtomicBool::new(false);

/// The process's one claim on soft-dirty bits, released on drop.
#[derive(Debug)]
struct Claim(());

impl Claim {
    fn take() -> Result<Claim, TrackError> {
        LIVE.compare_exchange(false, true, Ordering::SeqCst, Ordering::SeqCst)
            .map(|_| Claim(()))
            .map_err(|_| TrackError::SoftDirtyBusy)
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        assert!(
            LIVE.swap(false, Ordering::SeqCst),
            "the soft-dirty claim was held"
        );
    }
}

/// Dirty-page tracking with soft-dirty bits.
///
/// Limitation: `/proc/self/clear_refs` clears the soft-dirty bits of the whole process, so a
/// second soft-dirty tracker would erase the first one's dirty pages. Only one may live in a
/// process at a time: making a second is refused with [`TrackError::SoftDirtyBusy`]. Anything
/// else in the process that writes `clear_refs` breaks this tracker too.
#[derive(Debug)]
pub struct SoftDirtyTracker {
    // Field order is drop order: the fence's watch leaves the handler's table before the region
    // is unmapped, and the claim goes last.
    fence: Watch,
    region: Region,
    pagemap: File,
    /// A bit per page, gathered during one harvest.
    dirty_bits: Vec<u64>,
    /// One read's worth of pagemap entries.
    entries: Vec<u8>,
    planted: Planted,
    poisoned: bool,
    _claim: Claim,
}

impl SoftDirtyTracker {
    /// Watches `region`, all of its pages clean. Refused if another soft-dirty tracker lives
    /// or the kernel does not set soft-dirty bits (tested on a scratch page).
    pub fn new(region: Region) -> Result<SoftDirtyTracker, Refusal> {
        SoftDirtyTracker::with(region, Planted::default())
    }

    /// A tracker with a known bug planted (test use only).
    #[doc(hidden)]
    pub fn with_planted_bug(region: Region, bug: PlantedBug) -> Result<SoftDirtyTracker, Refusal> {
        SoftDirtyTracker::with(region, Planted::bug(bug))
    }

    fn with(region: Region, planted: Planted) -> Result<SoftDirtyTracker, Refusal> {
        let made = Claim::take().and_then(|claim| {
            let pagemap = open_pagemap()?;
            check_kernel(&pagemap)?;
            let fence = Watch::new(&region)?;
            // A new mapping reads all dirty until the first clear (its VMA is soft-dirty).
            clear_refs()?;
            Ok((claim, pagemap, fence))
        });
        let (claim, pagemap, fence) = match made {
            Ok(made) => made,
            Err(error) => return Err(Refusal { error, region }),
        };
        Ok(SoftDirtyTracker {
            fence,
            dirty_bits: vec![0; region.page_count().div_ceil(64)],
            region,
            pagemap,
            entries: vec![0; ENTRIES_PER_READ * 8],
            planted,
            poisoned: false,
            _claim: claim,
        })
    }

    /// Sets the bit of every page whose soft-dirty bit is set.
    fn read_bits(&mut self) -> Result<(), TrackError> {
        let (base, _) = self.region.address_range();
        let first_entry = base / self.region.page_size();
        let pages = self.region.page_count();
        let mut page = 0;
        while page < pages {
            let count = ENTRIES_PER_READ.min(pages - page);
            let bytes = &mut self.entries[..count * 8];
            let offset = u64::try_from((first_entry + page) * 8).expect("offset fits in u64");
            self.pagemap
                .read_exact_at(bytes, offset)
                .map_err(|source| TrackError::Proc {
                    path: "/proc/self/pagemap",
                    source,
                })?;
            for (at, entry) in bytes.chunks_exact(8).enumerate() {
                let entry = u64::from_ne_bytes(entry.try_into().expect("8 bytes"));
                if entry & PM_SOFT_DIRTY != 0 {
                    self.dirty_bits[(page + at) / 64] |= 1 << ((page + at) % 64);
                }
            }
            page += count;
        }
        Ok(())
    }

    /// The harvest's steps between raising and lowering the fence.
    fn fenced(&mut self) -> Result<(), TrackError> {
        self.read_bits()?;
        self.planted.run_hook(&mut self.region);
        if !self.planted.is(PlantedBug::NoRearm) {
            clear_refs()?;
        }
        Ok(())
    }
}

fn open_pagemap() -> Result<File, TrackError> {
    File::open("/proc/self/pagemap").map_err(|source| TrackError::Proc {
        path: "/proc/self/pagemap",
        source,
    })
}

/// Clears the soft-dirty bits of every page of the process.
fn clear_refs() -> Result<(), TrackError> {
    std::fs::write("/proc/self/clear_refs", b"4").map_err(|source| TrackError::Proc {
        path: "/proc/self/clear_refs",
        source,
    })
}

/// Whether a store sets a page's soft-dirty bit, tried on a scratch page.
fn check_kernel(pagemap: &File) -> Result<(), TrackError> {
    let mut scratch = Region::with_pages(1)?;
    clear_refs()?;
    scratch.as_mut_slice()[0] = 1;
    let (base, _) = scratch.address_range();
    let mut entry = [0; 8];
    let offset = u64::try_from(base / scratch.page_size() * 8).expect("offset fits in u64");
    pagemap
        .read_exact_at(&mut entry, offset)
        .map_err(|source| TrackError::Proc {
            path: "/proc/self/pagemap",
            source,
        })?;
    if u64::from_ne_bytes(entry) & PM_SOFT_DIRTY == 0 {
        return Err(TrackError::SoftDirtyUnsupported);
    }
    Ok(())
}

impl DirtyTracker for SoftDirtyTracker {
    fn kind(&self) -> TrackerKind {
        TrackerKind::SoftDirty
    }

    fn region(&self) -> &Region {
        &self.region
    }

    fn region_mut(&mut self) -> &mut Region {
        &mut self.region
    }

    /// Raises the fence (region read-only, its watch bits clear), reads the soft-dirty bits,
    /// clears them, lowers the fence (region writable), then adds the pages the fence caught.
    /// No store is lost: one made before the fence rose is in the soft-dirty bits read; one
    /// made while it stands faults, and the handler makes its page writable and sets its
    /// fence bit, so this harvest reports it; one made after it fell finds its page's
    /// soft-dirty bit clear and write-protected by the kernel (mprotect never makes such a
    /// page writable), so it sets the bit and the next harvest reports it.
    fn harvest(&mut self, dirty_pages: &mut Vec<usize>) -> Result<(), TrackError> {
        if self.poisoned {
            return Err(TrackError::Poisoned);
        }
        let pages = self.region.page_count();
        let raised = self.region.set_writable(0, pages, false);
        let fenced = raised.and_then(|()| self.fenced());
        let lowered = self.region.set_writable(0, pages, true);
        if let Err(error) = fenced.and(lowered) {
            self.poisoned = true;
            return Err(error);
        }
        for (word, caught) in self.dirty_bits.iter_mut().zip(self.fence.words()) {
            *word |= caught.swap(0, Ordering::SeqCst);
        }
        for (index, word) in self.dirty_bits.iter_mut().enumerate() {
            push_bits(index, std::mem::take(word), dirty_pages);
        }
        Ok(())
    }

    fn into_region(self: Box<Self>) -> Region {
        let SoftDirtyTracker {
            fence,
            region,
            _claim,
            ..
        } = *self;
        drop(fence);
        region
    }

    fn set_harvest_hook(&mut self, hook: Option<HarvestHook>) {
        self.planted.hook = hook;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_one_claim_at_a_time() {
        // The unit tests make no soft-dirty tracker, so nothing else holds the claim here.
        let claim = Claim::take().expect("the first claim");
        assert!(matches!(Claim::take(), Err(TrackError::SoftDirtyBusy)));
        drop(claim);
        drop(Claim::take().expect("a claim again once the first is dropped"));
    }
}
