//! The checkers have teeth: each planted bug is caught, and the real trackers pass the same
//! checks.

use std::collections::BTreeSet;

use tandem_mirror::{
    DirtyTracker, HarvestHook, MprotectTracker, PlantedBug, Region, TrackError, TrackerKind,
    UffdTracker,
};

use crate::common::{self, Interval, Mismatch, check};

const PAGES: usize = 16;
/// Stored to before the harvest, and again during it.
const PAGE_DIRTY: usize = 3;
/// Clean when the harvest reads the dirty state, stored to before it re-arms.
const PAGE_IN_WINDOW: usize = 10;

/// Requires that a store made while a harvest runs (after the dirty state was read, before
/// re-arming) is reported by that harvest or the next, and that both pages are tracked again
/// afterwards. Says which page was lost otherwise.
fn check_window(tracker: &mut dyn DirtyTracker) -> Result<(), String> {
    let page_size = tracker.region().page_size();
    tracker.region_mut().as_mut_slice()[PAGE_DIRTY * page_size] = 1;
    let hook: HarvestHook = Box::new(move |region: &mut Region| {
        region.as_mut_slice()[PAGE_DIRTY * page_size + 1] = 2;
        region.as_mut_slice()[PAGE_IN_WINDOW * page_size] = 2;
    });
    tracker.set_harvest_hook(Some(hook));
    let mut during = Vec::new();
    tracker
        .harvest(&mut during)
        .expect("the harvest with the hook");
    tracker.set_harvest_hook(None);
    let mut after = Vec::new();
    tracker.harvest(&mut after).expect("the harvest after");
    let seen: BTreeSet<usize> = during.iter().chain(&after).copied().collect();
    for page in [PAGE_DIRTY, PAGE_IN_WINDOW] {
        if !seen.contains(&page) {
            return Err(format!(
                "page {page}, stored to during a harvest, was never reported"
            ));
        }
    }
    let again = Interval::pages(&[PAGE_DIRTY, PAGE_IN_WINDOW], 3);
    check(tracker, &[again]).map_err(|mismatch| format!("not re-armed: {mismatch}"))?;
    Ok(())
}

#[test]
fn a_store_in_the_harvest_window_is_never_lost() {
    let _lock = common::soft_dirty_lock();
    for kind in common::granted_kinds() {
        let mut tracker = common::make(kind, PAGES).expect("a granted kind");
        if let Err(lost) = check_window(tracker.as_mut()) {
            panic!("{kind}: {lost}");
        }
    }
    common::require_every_kind();
}

fn region() -> Region {
    Region::with_pages(PAGES).expect("map a region")
}

#[test]
fn reading_then_rearming_in_two_steps_is_caught() {
    let lost = format!("page {PAGE_IN_WINDOW}, stored to during a harvest, was never reported");
    let mut mprotect = MprotectTracker::with_planted_bug(region(), PlantedBug::LostWindow)
        .expect("a mprotect tracker");
    assert_eq!(check_window(&mut mprotect), Err(lost.clone()));
    let mut uffd =
        UffdTracker::with_planted_bug(region(), PlantedBug::LostWindow).expect("a uffd tracker");
    assert_eq!(check_window(&mut uffd), Err(lost));
}

/// Pages 1 and 2, then 3, then 1 again.
fn three_intervals() -> Vec<Interval> {
    vec![
        Interval::pages(&[1, 2], 9),
        Interval::pages(&[3], 9),
        Interval::pages(&[1], 0),
    ]
}

#[test]
fn forgetting_to_rearm_is_caught() {
    // uffd: the pages stay unprotected, so every later harvest reports them again.
    let mut uffd =
        UffdTracker::with_planted_bug(region(), PlantedBug::NoRearm).expect("a uffd tracker");
    let reported_again = Mismatch {
        kind: TrackerKind::Uffd,
        interval: 1,
        missing: vec![],
        extra: vec![1, 2],
    };
    assert_eq!(check(&mut uffd, &three_intervals()), Err(reported_again));
    // mprotect: the pages stay writable, so a later store to them is never seen.
    let mut mprotect = MprotectTracker::with_planted_bug(region(), PlantedBug::NoRearm)
        .expect("a mprotect tracker");
    let unseen = Mismatch {
        kind: TrackerKind::Mprotect,
        interval: 2,
        missing: vec![1],
        extra: vec![],
    };
    assert_eq!(check(&mut mprotect, &three_intervals()), Err(unseen));
    // The real trackers pass the same intervals.
    for kind in [TrackerKind::Uffd, TrackerKind::Mprotect] {
        let mut tracker = common::make(kind, PAGES).expect("a granted kind");
        check(tracker.as_mut(), &three_intervals()).expect("the real tracker");
    }
}

/// A tracker that never reports anything.
#[derive(Debug)]
struct Silent(Region);

impl DirtyTracker for Silent {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Mprotect
    }

    fn region(&self) -> &Region {
        &self.0
    }

    fn region_mut(&mut self) -> &mut Region {
        &mut self.0
    }

    fn harvest(&mut self, _dirty_pages: &mut Vec<usize>) -> Result<(), TrackError> {
        Ok(())
    }

    fn into_region(self: Box<Self>) -> Region {
        self.0
    }

    fn set_harvest_hook(&mut self, _hook: Option<HarvestHook>) {}
}

#[test]
fn a_tracker_reporting_nothing_is_caught() {
    let mut silent = Silent(region());
    let missing = Mismatch {
        kind: TrackerKind::Mprotect,
        interval: 0,
        missing: vec![1, 2],
        extra: vec![],
    };
    assert_eq!(check(&mut silent, &three_intervals()), Err(missing));
}
