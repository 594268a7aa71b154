//! What tracking costs: the time of a first store to a page in an interval, and of a harvest.
//!
//! This is the only module of the crate that reads the clock. It measures and reports, and
//! asserts nothing about time (`tandem bench mirror` will print it).

use std::time::{Duration, Instant};

use crate::{Region, TrackError, TrackerKind, tracker_for};

/// What [`measure_tracking`] found; times are means over the intervals.
#[derive(Debug, Clone, PartialEq)]
pub struct TrackingReport {
    pub kind: TrackerKind,
    pub region_bytes: usize,
    /// Distinct pages stored to in each interval (at most the region's page count).
    pub pages_written_per_interval: usize,
    pub intervals: usize,
    /// Per page, a store to a page already written and untracked.
    pub write_ns_untracked: f64,
    /// Per page, the first store to a page in an interval, tracked.
    pub write_ns_tracked: f64,
    /// `write_ns_tracked - write_ns_untracked`: what tracking adds to a first store.
    pub first_write_ns: f64,
    /// A harvest (with its re-arm) after an interval's stores.
    pub harvest_ns_dirty: f64,
    /// A harvest (with its re-arm) right after another: no page dirty.
    pub harvest_ns_clean: f64,
}

/// Measures a tracker of `kind` over a region of `region_bytes` (rounded up to whole pages):
/// `intervals` times, a store to each of `pages_written_per_interval` distinct pages spread
/// over the region, then a harvest, then another harvest with nothing dirty. The same stores
/// are first timed on the region untracked. Every page is written before timing starts, so
/// neither run pays for the kernel allocating pages.
pub fn measure_tracking(
    kind: TrackerKind,
    region_bytes: usize,
    pages_written_per_interval: usize,
    intervals: usize,
) -> Result<TrackingReport, TrackError> {
    assert!(intervals > 0, "measure at least one interval");
    let page_size = crate::page_size();
    let mut region = Region::new(region_bytes.max(1).div_ceil(page_size) * page_size)?;
    let pages = pages_written_per_interval.clamp(1, region.page_count());
    for page in 0..region.page_count() {
        region.as_mut_slice()[page * page_size] = 1;
    }
    let mut untracked = Duration::ZERO;
    for interval in 0..intervals {
        untracked += store_to_pages(&mut region, pages, interval);
    }
    let mut tracker = tracker_for(region, Some(kind)).map_err(|refusal| refusal.error)?;
    let mut dirty_pages = Vec::new();
    tracker.harvest(&mut dirty_pages)?;
    let (mut tracked, mut harvest_dirty, mut harvest_clean) = Default::default();
    for interval in 0..intervals {
        tracked += store_to_pages(tracker.region_mut(), pages, interval);
        dirty_pages.clear();
        harvest_dirty += timed(|| tracker.harvest(&mut dirty_pages))?;
        assert!(
            dirty_pages.len() == pages,
            "the harvest reports each page stored to"
        );
        dirty_pages.clear();
        harvest_clean += timed(|| tracker.harvest(&mut dirty_pages))?;
        assert!(
            dirty_pages.is_empty(),
            "a harvest right after another reports nothing"
        );
    }
    let per_page = |total: Duration| total.as_nanos() as f64 / (intervals * pages) as f64;
    let per_interval = |total: Duration| total.as_nanos() as f64 / intervals as f64;
    Ok(TrackingReport {
        kind,
        region_bytes: tracker.region().len(),
        pages_written_per_interval: pages,
        intervals,
        write_ns_untracked: per_page(untracked),
        write_ns_tracked: per_page(tracked),
        first_write_ns: per_page(tracked) - per_page(untracked),
        harvest_ns_dirty: per_interval(harvest_dirty),
        harvest_ns_clean: per_interval(harvest_clean),
    })
}

/// Stores one byte to each of `pages` distinct pages spread evenly over the region (shifted by
/// `interval`), and says how long that took.
#[allow(clippy::disallowed_methods, reason = "the benchmark reads the clock")]
fn store_to_pages(region: &mut Region, pages: usize, interval: usize) -> Duration {
    let page_size = region.page_size();
    let stride = region.page_count() / pages;
    let shift = interval % stride;
    let bytes = std::hint::black_box(region.as_mut_slice());
    let started = Instant::now();
    for at in 0..pages {
        bytes[(at * stride + shift) * page_size + interval % page_size] = interval as u8;
    }
    let elapsed = started.elapsed();
    std::hint::black_box(bytes);
    elapsed
}

#[allow(clippy::disallowed_methods, reason = "the benchmark reads the clock")]
fn timed(run: impl FnOnce() -> Result<(), TrackError>) -> Result<Duration, TrackError> {
    let started = Instant::now();
    run()?;
    Ok(started.elapsed())
}
