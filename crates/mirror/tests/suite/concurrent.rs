//! Stores from another thread while harvests run: none is lost.

#![allow(unsafe_code)]

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common;

const PAGES: usize = 4096;

#[test]
fn stores_racing_with_harvests_are_all_reported() {
    let _lock = common::soft_dirty_lock();
    for kind in common::granted_kinds() {
        let mut tracker = common::make(kind, PAGES).expect("a granted kind");
        let page_size = tracker.region().page_size();
        // Sent to the writer as an integer: the writer stores through it while this thread
        // harvests, which reads no byte of the region.
        let base = tracker.region_mut().as_mut_ptr() as usize;
        let done = AtomicBool::new(false);
        let mut reported = BTreeSet::new();
        std::thread::scope(|scope| {
            scope.spawn(|| {
                for page in 0..PAGES {
                    let byte = (base + page * page_size) as *mut u8;
                    // SAFETY: inside the region, which the tracker keeps mapped until after
                    // this scope; no reference to its bytes is alive meanwhile.
                    unsafe { byte.write_volatile(1) };
                }
                done.store(true, Ordering::SeqCst);
            });
            let mut dirty_pages = Vec::new();
            loop {
                let finished = done.load(Ordering::SeqCst);
                dirty_pages.clear();
                tracker.harvest(&mut dirty_pages).expect("a harvest");
                // A page may be reported twice: a store racing with a harvest may show in it
                // and in the next (uffd does so here, now and then, for a page whose first
                // store faults while the scan passes it).
                reported.extend(dirty_pages.iter().copied());
                if finished {
                    break;
                }
            }
        });
        let unreported: Vec<usize> = (0..PAGES).filter(|page| !reported.contains(page)).collect();
        assert!(
            unreported.is_empty(),
            "{kind}: stores never reported to pages {unreported:?}"
        );
    }
    common::require_every_kind();
}
