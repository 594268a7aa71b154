//! `MprotectTracker`: the region read-only, the first store to each page caught by the
//! process's SIGSEGV handler (`fault.rs`), which makes that page writable and sets its bit.
//! Works on any Linux; costs a signal per first store to a page per interval (~6 µs).

use crate::fault::Watch;
use crate::planted::{HarvestHook, Planted, PlantedBug};
use crate::{DirtyTracker, Refusal, Region, TrackError, TrackerKind};

/// Dirty-page tracking with `mprotect` and a SIGSEGV handler. Several may live at once, up to
/// [`crate::fault::SLOTS`] together with soft-dirty trackers.
///
/// Limitation: each page made writable by a fault splits the region's mapping, so one interval
/// can dirty at most about `vm.max_map_count / 2` separate runs of pages (32,765 by default);
/// past that the handler cannot unprotect a page and aborts the process, saying why.
#[derive(Debug)]
pub struct MprotectTracker {
    // Field order is drop order: the watch makes the region writable and leaves the handler's
    // table before the region is unmapped.
    watch: Watch,
    region: Region,
    planted: Planted,
    poisoned: bool,
}

impl MprotectTracker {
    /// Watches `region`, all of its pages clean.
    pub fn new(region: Region) -> Result<MprotectTracker, Refusal> {
        MprotectTracker::with(region, Planted::default())
    }

    /// A tracker with a known bug planted (test use only).
    #[doc(hidden)]
    pub fn with_planted_bug(region: Region, bug: PlantedBug) -> Result<MprotectTracker, Refusal> {
        MprotectTracker::with(region, Planted::bug(bug))
    }

    fn with(region: Region, planted: Planted) -> Result<MprotectTracker, Refusal> {
        // Registered before protected: a store from another thread that faults as soon as the
        // region is read-only finds the region in the table.
        let watch = match Watch::new(&region) {
            Ok(watch) => watch,
            Err(error) => return Err(Refusal { error, region }),
        };
        if let Err(error) = region.set_writable(0, region.page_count(), false) {
            drop(watch);
            return Err(Refusal { error, region });
        }
        Ok(MprotectTracker {
            watch,
            region,
            planted,
            poisoned: false,
        })
    }

    /// Reads and clears the bitmap, appending the dirty pages.
    fn take(&self, dirty_pages: &mut Vec<usize>) {
        let lost_window = self.planted.is(PlantedBug::LostWindow);
        for (index, word) in self.watch.words().iter().enumerate() {
            // The real harvest swaps each word with zero: reading and clearing are one step.
            let bits = if lost_window {
                word.load(std::sync::atomic::Ordering::SeqCst)
            } else {
                word.swap(0, std::sync::atomic::Ordering::SeqCst)
            };
            push_bits(index, bits, dirty_pages);
        }
    }

    /// The planted `LostWindow`'s second step: clearing what `take` only read.
    fn clear_all(&self) {
        for word in self.watch.words() {
            word.store(0, std::sync::atomic::Ordering::SeqCst);
        }
    }
}

/// Appends the pages of word `index` of a bitmap whose bits are `bits`, ascending.
pub(crate) fn push_bits(index: usize, mut bits: u64, pages: &mut Vec<usize>) {
    while bits != 0 {
        let bit = bits.trailing_zeros() as usize;
        pages.push(index * 64 + bit);
        bits &= bits - 1;
    }
}

/// Makes the pages listed (ascending) read-only, one `mprotect` per run of adjacent pages.
pub(crate) fn protect_runs(region: &Region, pages: &[usize]) -> Result<(), TrackError> {
    let mut rest = pages;
    while let Some(&first) = rest.first() {
        let run = rest
            .iter()
            .enumerate()
            .take_while(|&(at, &page)| page == first + at)
            .count();
        region.set_writable(first, run, false)?;
        rest = &rest[run..];
    }
    Ok(())
}

impl DirtyTracker for MprotectTracker {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Mprotect
    }

    fn region(&self) -> &Region {
        &self.region
    }

    fn region_mut(&mut self) -> &mut Region {
        &mut self.region
    }

    /// Swaps the bitmap's words with zero, then makes exactly the pages it reported read-only
    /// again. No store is lost in between: a page reported is writable until re-protected,
    /// and a store to it then is covered by this harvest (the caller reads the page after the
    /// harvest returns); a page not reported is still read-only (or its fault has just made
    /// it writable with its bit set after the swap), so a store to it faults and the next
    /// harvest reports it. The handler makes a page writable before setting its bit, so a page
    /// is never left writable with its bit clear. Protecting before swapping would lose stores:
    /// a page faulting in between would be reported now yet stay writable for good.
    fn harvest(&mut self, dirty_pages: &mut Vec<usize>) -> Result<(), TrackError> {
        if self.poisoned {
            return Err(TrackError::Poisoned);
        }
        let start = dirty_pages.len();
        self.take(dirty_pages);
        self.planted.run_hook(&mut self.region);
        if self.planted.is(PlantedBug::LostWindow) {
            self.clear_all();
        }
        if !self.planted.is(PlantedBug::NoRearm)
            && let Err(error) = protect_runs(&self.region, &dirty_pages[start..])
        {
            self.poisoned = true;
            return Err(error);
        }
        assert!(
            dirty_pages[start..]
                .windows(2)
                .all(|pair| pair[0] < pair[1]),
            "pages are reported ascending, each once"
        );
        Ok(())
    }

    fn into_region(self: Box<Self>) -> Region {
        let MprotectTracker { watch, region, .. } = *self;
        drop(watch);
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
    fn bits_come_out_ascending() {
        let mut pages = Vec::new();
        push_bits(0, 0b1010_0001, &mut pages);
        push_bits(2, 1 << 63, &mut pages);
        assert_eq!(pages, vec![0, 5, 7, 191]);
    }
}
