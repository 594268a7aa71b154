//! The property: after each interval of random stores, every tracker's harvest is exactly the
//! set of pages stored to in that interval, and all trackers agree.

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

use tandem_mirror::{DirtyTracker, PlantedBug, Region, TrackerKind, UffdTracker};

use crate::common::{self, Interval, check};

/// A store: which page (often one of a few hot pages, so pages are stored to in several
/// intervals; the first and last page among them), where in it, and the byte (often zero, a
/// store over a zero page that changes nothing and still counts).
fn store(pages: usize) -> impl Strategy<Value = (usize, u8)> {
    let page_size = tandem_mirror::page_size();
    let hot = [0, pages - 1, pages / 2, pages / 3];
    let page = prop_oneof![(0..hot.len()).prop_map(move |at| hot[at]), 0..pages];
    let within = prop_oneof![Just(0), Just(page_size - 1), 0..page_size];
    let byte = prop_oneof![Just(0u8), any::<u8>()];
    (page, within, byte).prop_map(move |(page, within, byte)| (page * page_size + within, byte))
}

/// A region size in pages and the intervals of stores to run on it.
fn scenario() -> impl Strategy<Value = (usize, Vec<Interval>)> {
    prop_oneof![Just(1usize), Just(64), Just(3000)].prop_flat_map(|pages| {
        let interval =
            prop::collection::vec(store(pages), 0..24).prop_map(|stores| Interval { stores });
        (Just(pages), prop::collection::vec(interval, 1..6))
    })
}

/// Makes a tracker of a kind over a region of so many pages.
type Make<'a> = &'a dyn Fn(TrackerKind, usize) -> Box<dyn DirtyTracker>;

/// Runs the property over trackers of `kinds` made by `make`; says how it failed.
fn run_property(kinds: &[TrackerKind], make: Make<'_>) -> Result<(), String> {
    let config = Config {
        cases: 256,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let outcome = runner.run(&scenario(), |(pages, intervals)| {
        let mut agreed: Option<Vec<Vec<usize>>> = None;
        for &kind in kinds {
            let mut tracker = make(kind, pages);
            let harvests = check(tracker.as_mut(), &intervals);
            let harvests =
                harvests.map_err(|mismatch| TestCaseError::fail(mismatch.to_string()))?;
            if let Some(agreed) = &agreed {
                prop_assert_eq!(agreed, &harvests, "{} disagrees with {}", kind, kinds[0]);
            }
            agreed = Some(harvests);
        }
        Ok(())
    });
    outcome.map_err(|failure| failure.to_string())
}

#[test]
fn every_tracker_reports_exactly_the_pages_stored_to() {
    let _lock = common::soft_dirty_lock();
    let make = |kind, pages| common::make(kind, pages).expect("a granted kind");
    if let Err(failure) = run_property(&common::granted_kinds(), &make) {
        panic!("{failure}");
    }
    common::require_every_kind();
}

#[test]
fn the_property_catches_a_tracker_that_forgets_to_rearm() {
    let make = |_, pages| -> Box<dyn DirtyTracker> {
        let region = Region::with_pages(pages).expect("map a region");
        Box::new(UffdTracker::with_planted_bug(region, PlantedBug::NoRearm).expect("uffd"))
    };
    let failure = run_property(&[TrackerKind::Uffd], &make).expect_err("the planted bug is caught");
    assert!(failure.contains("reported but not stored to"), "{failure}");
}
