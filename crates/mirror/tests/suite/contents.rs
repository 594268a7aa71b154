//! Tracking never changes the region's bytes: what a program stores is what it reads back,
//! under tracking and after it.

use crate::common;

/// A small seeded generator (splitmix64), so the stores are the same on every run.
struct Seeded(u64);

impl Seeded {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

#[test]
fn bytes_read_back_equal_bytes_stored() {
    let _lock = common::soft_dirty_lock();
    for kind in common::granted_kinds() {
        let mut tracker = common::make(kind, 64).expect("a granted kind");
        let len = tracker.region().len();
        let mut model = vec![0u8; len];
        let mut seeded = Seeded(42);
        let mut dirty_pages = Vec::new();
        for _ in 0..8 {
            let bytes = tracker.region_mut().as_mut_slice();
            for _ in 0..500 {
                let offset = (seeded.next() % len as u64) as usize;
                let byte = seeded.next() as u8;
                bytes[offset] = byte;
                model[offset] = byte;
            }
            tracker.harvest(&mut dirty_pages).expect("a harvest");
            assert!(
                tracker.region().as_slice() == model,
                "{kind}: bytes changed by a harvest"
            );
        }
        let mut region = tracker.into_region();
        assert!(
            region.as_slice() == model,
            "{kind}: bytes changed when tracking stopped"
        );
        region.as_mut_slice().fill(7);
        assert!(
            region.as_slice().iter().all(|&byte| byte == 7),
            "{kind}: untracked stores"
        );
    }
    common::require_every_kind();
}
