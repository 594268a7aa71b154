//! What mirroring costs: the time of a first store to a page in an interval and of a harvest
//! ([`measure_tracking`]); of taking a checkpoint, applying it on a backup and rolling one back
//! ([`measure_checkpoints`]).
//!
//! This is the only module of the crate that reads the clock. It measures and reports, and
//! asserts nothing about time (`tandem bench mirror` will print it).

use std::time::{Duration, Instant};

use crate::{
    Checkpoint, Checkpointer, Frame, FrameReader, Mirror, Region, TrackError, TrackerKind,
    tracker_for,
};

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

/// How long `run` took.
#[allow(clippy::disallowed_methods, reason = "the benchmark reads the clock")]
fn time_of(run: impl FnOnce()) -> Duration {
    let started = Instant::now();
    run();
    started.elapsed()
}

/// What [`measure_checkpoints`] found. Times are means over the checkpoints after the first,
/// which ships every page and is reported apart.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckpointReport {
    pub kind: TrackerKind,
    pub region_bytes: usize,
    /// Distinct pages stored to before each checkpoint (at most the region's page count).
    pub dirty_pages_per_checkpoint: usize,
    /// Checkpoints measured, the first not counted.
    pub checkpoints: usize,
    /// The first checkpoint (every page): taking it, its bytes encoded, applying it.
    pub first_take_ns: f64,
    pub first_bytes: usize,
    pub first_apply_ns: f64,
    /// Harvest, copy of each dirty page into a frame, and the hash.
    pub take_ns: f64,
    /// Bytes of the frames encoded: what one checkpoint puts on the wire.
    pub bytes_per_checkpoint: f64,
    /// Encoding the frames into one buffer.
    pub encode_ns: f64,
    /// Decoding and order-checking them with a [`FrameReader`].
    pub decode_ns: f64,
    /// The mirror stepping through the decoded frames: undo copies, writes, the hash check
    /// (in-process: no network). Measured on every other checkpoint, a fresh one.
    pub apply_ns: f64,
    /// A rollback of a checkpoint whose pages all arrived and whose `End` did not (the
    /// costliest), on the checkpoints `apply_ns` skips.
    pub rollback_ns: f64,
}

/// The totals [`measure_checkpoints`] adds up, and how many each is over.
#[derive(Debug, Default)]
struct Totals {
    take: Duration,
    bytes: usize,
    encode: Duration,
    decode: Duration,
    apply: Duration,
    applied: u32,
    rollback: Duration,
    rolled_back: u32,
}

/// Checkpoints taken and applied, untimed, before the timed ones: the allocator and the caches
/// settle on the sizes of a checkpoint.
const WARM_UP_CHECKPOINTS: usize = 4;

/// Measures a primary with a tracker of `kind` over a region of `region_bytes` (rounded up to
/// whole pages) mirrored to a backup in the same process: a first checkpoint of every page,
/// then `checkpoints` (at least 2) after a store to each of `dirty_pages_per_checkpoint`
/// distinct pages spread over the region. Each checkpoint is taken, encoded into a buffer the
/// sender reuses, and decoded; on every other one the mirror's applying it is timed, on the
/// others a rollback after all its pages (and then it is applied, untimed), so that each time
/// is of a checkpoint the mirror has not seen. Every page is written before the tracker is
/// made, so no time goes to the kernel allocating the region's pages.
pub fn measure_checkpoints(
    kind: TrackerKind,
    region_bytes: usize,
    dirty_pages_per_checkpoint: usize,
    checkpoints: usize,
) -> Result<CheckpointReport, TrackError> {
    assert!(checkpoints >= 2, "measure an apply and a rollback");
    let page_size = crate::page_size();
    let mut region = Region::new(region_bytes.max(1).div_ceil(page_size) * page_size)?;
    let page_count = region.page_count();
    for page in 0..page_count {
        region.as_mut_slice()[page * page_size] = 1;
    }
    let pages = dirty_pages_per_checkpoint.clamp(1, page_count);
    let tracker = tracker_for(region, Some(kind)).map_err(|refusal| refusal.error)?;
    let mut checkpointer = Checkpointer::new(tracker);
    let mut mirror = Mirror::new(page_count)?;
    let (first_take, first) = timed_take(&mut checkpointer)?;
    let first_apply = time_of(|| apply(&mut mirror, &first.frames()));
    checkpointer
        .acked(first.number())
        .expect("the mirror acks what it was sent");
    let first = (first_take, first.encoded_len(), first_apply);
    let (mut totals, mut warm_up) = (Totals::default(), Totals::default());
    let mut pair = Pair {
        checkpointer,
        mirror,
        checkpoint: Checkpoint::default(),
        bytes: Vec::new(),
    };
    for interval in 0..WARM_UP_CHECKPOINTS + checkpoints {
        store_to_pages(pair.checkpointer.region_mut(), pages, interval);
        let timed = interval >= WARM_UP_CHECKPOINTS;
        let totals = if timed { &mut totals } else { &mut warm_up };
        pair.checkpoint(totals, interval % 2 == 0, pages)?;
    }
    Ok(report(kind, &pair.checkpointer, pages, first, &totals))
}

/// The primary and backup [`measure_checkpoints`] runs, and the sender's buffers.
struct Pair {
    checkpointer: Checkpointer,
    mirror: Mirror,
    checkpoint: Checkpoint,
    bytes: Vec<u8>,
}

impl Pair {
    /// Takes, encodes, decodes and applies one checkpoint of `pages` pages, adding the times
    /// to `totals`; with `rollback`, rolls it back after its pages first (timed) and applies it
    /// untimed.
    fn checkpoint(
        &mut self,
        totals: &mut Totals,
        rollback: bool,
        pages: usize,
    ) -> Result<(), TrackError> {
        let mut taken = Ok(());
        totals.take += time_of(|| taken = self.checkpointer.checkpoint_into(&mut self.checkpoint));
        taken?;
        let checkpoint = &self.checkpoint;
        assert_eq!(checkpoint.pages(), pages, "each page stored to is shipped");
        self.bytes.clear();
        totals.encode += time_of(|| checkpoint.encode(&mut self.bytes));
        totals.bytes += self.bytes.len();
        let mut frames = Vec::with_capacity(checkpoint.pages() + 2);
        totals.decode += time_of(|| decode_all(&self.mirror, &self.bytes, &mut frames));
        assert!(frames == checkpoint.frames(), "frames decode to themselves");
        if rollback {
            for frame in &frames[..frames.len() - 1] {
                self.mirror.step(frame).expect("a frame of the checkpoint");
            }
            totals.rollback += time_of(|| assert!(self.mirror.rollback().is_some()));
            totals.rolled_back += 1;
            apply(&mut self.mirror, &frames);
        } else {
            totals.apply += time_of(|| apply(&mut self.mirror, &frames));
            totals.applied += 1;
        }
        self.checkpointer
            .acked(checkpoint.number())
            .expect("the mirror acks what it was sent");
        Ok(())
    }
}

/// The report from the first checkpoint's take, bytes and apply, and the later ones' totals.
fn report(
    kind: TrackerKind,
    checkpointer: &Checkpointer,
    pages: usize,
    (first_take, first_bytes, first_apply): (Duration, usize, Duration),
    totals: &Totals,
) -> CheckpointReport {
    let ns = |total: Duration| total.as_nanos() as f64;
    let mean = |total: Duration, over: u32| ns(total) / f64::from(over.max(1));
    let checkpoints = totals.applied + totals.rolled_back;
    CheckpointReport {
        kind,
        region_bytes: checkpointer.region().len(),
        dirty_pages_per_checkpoint: pages,
        checkpoints: checkpoints as usize,
        first_take_ns: ns(first_take),
        first_bytes,
        first_apply_ns: ns(first_apply),
        take_ns: mean(totals.take, checkpoints),
        bytes_per_checkpoint: totals.bytes as f64 / f64::from(checkpoints),
        encode_ns: mean(totals.encode, checkpoints),
        decode_ns: mean(totals.decode, checkpoints),
        apply_ns: mean(totals.apply, totals.applied),
        rollback_ns: mean(totals.rollback, totals.rolled_back),
    }
}

#[allow(clippy::disallowed_methods, reason = "the benchmark reads the clock")]
fn timed_take(checkpointer: &mut Checkpointer) -> Result<(Duration, Checkpoint), TrackError> {
    let started = Instant::now();
    let checkpoint = checkpointer.checkpoint()?;
    Ok((started.elapsed(), checkpoint))
}

/// Steps the mirror through a whole checkpoint; it must ack it.
fn apply(mirror: &mut Mirror, frames: &[Frame]) {
    let mut acks = frames
        .iter()
        .filter_map(|frame| mirror.step(frame).expect("a frame of the checkpoint"));
    let ack = acks.next().expect("the End is acked");
    assert!(acks.next().is_none(), "one ack per checkpoint");
    assert_eq!(ack.checkpoint, mirror.last_complete());
}

/// Decodes `bytes`, one checkpoint's frames, as the mirror's connection would.
fn decode_all<'a>(mirror: &Mirror, bytes: &'a [u8], frames: &mut Vec<Frame<'a>>) {
    let mut reader = FrameReader::to_backup(mirror.limits(), mirror.last_complete());
    let mut at = 0;
    while at < bytes.len() {
        let (frame, len) = reader.read(&bytes[at..]).expect("frames as encoded");
        frames.push(frame);
        at += len;
    }
}
