//! Which kinds this kernel grants, and how the fastest is picked.

use tandem_mirror::{Region, TrackerKind, probe, tracker_for};

use crate::common;

#[test]
fn every_kind_works_on_this_machine() {
    common::require_every_kind();
}

#[test]
fn probe_and_tracker_for_pick_the_fastest_granted() {
    let _lock = common::soft_dirty_lock();
    let fastest = common::granted_kinds()[0];
    assert_eq!(probe(), fastest);
    let tracker = tracker_for(Region::with_pages(4).expect("map a region"), None)
        .expect("some kind is granted");
    assert_eq!(tracker.kind(), fastest);
    assert_eq!(
        TrackerKind::ALL[0],
        TrackerKind::Uffd,
        "uffd is tried first"
    );
}
