//! The property: a random program's memory, mirrored checkpoint by checkpoint, is on the backup
//! byte for byte after every complete checkpoint; and if the primary is lost part-way through a
//! checkpoint, a rollback leaves the backup exactly at the one before, from which the whole
//! checkpoint, sent again, still completes.

use proptest::prelude::*;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use tandem_mirror::bench::measure_checkpoints;
use tandem_mirror::{Ack, Checkpointer, PlantedMirrorBug, Region, TrackerKind, tracker_for};

use crate::common;
use crate::mirrored::{Primary, deliver, expect_at, new_mirror, with_page_twice};

/// What the program does before one checkpoint, and how that checkpoint travels.
#[derive(Debug, Clone)]
struct Interval {
    /// Bytes stored, each at an offset of the region.
    stores: Vec<(usize, u8)>,
    /// The primary is lost after this many of the checkpoint's frames (modulo their count,
    /// so always before its `End`), and the backup rolls back.
    lost_after: Option<usize>,
    /// One page is sent twice, first with intermediate bytes (which page, and the xor).
    page_twice: Option<(usize, u8)>,
}

/// A store: often to one of a few hot pages (so pages are written in several intervals), at
/// the start, the end or anywhere in the page.
fn store(pages: usize) -> impl Strategy<Value = (usize, u8)> {
    let page_size = tandem_mirror::page_size();
    let hot = [0, pages - 1, pages / 2];
    let page = prop_oneof![(0..hot.len()).prop_map(move |at| hot[at]), 0..pages];
    let within = prop_oneof![Just(0), Just(page_size - 1), 0..page_size];
    (page, within, any::<u8>())
        .prop_map(move |(page, within, byte)| (page * page_size + within, byte))
}

/// A region size in pages and the intervals of the program.
fn program() -> impl Strategy<Value = (usize, Vec<Interval>)> {
    prop_oneof![Just(1usize), Just(5), Just(64)].prop_flat_map(|pages| {
        let interval = (
            prop::collection::vec(store(pages), 0..20),
            prop::option::weighted(0.5, any::<usize>()),
            prop::option::weighted(0.5, (any::<usize>(), 1..=255u8)),
        )
            .prop_map(|(stores, lost_after, page_twice)| Interval {
                stores,
                lost_after,
                page_twice,
            });
        (Just(pages), prop::collection::vec(interval, 1..8))
    })
}

/// Runs one program on a primary with a tracker of `kind` and a backup with `bug` planted;
/// says the first way the backup differs from the primary.
fn mirror_program(
    kind: TrackerKind,
    pages: usize,
    intervals: &[Interval],
    bug: Option<PlantedMirrorBug>,
) -> Result<(), String> {
    let mut primary = Primary::new(kind, pages);
    let mut mirror = new_mirror(pages, bug);
    for interval in intervals {
        for &(offset, byte) in &interval.stores {
            primary.store(offset, byte);
        }
        let checkpoint = primary.take()?;
        let n = checkpoint.number();
        let frames = checkpoint.frames();
        let frames = interval
            .page_twice
            .and_then(|(which, xor)| with_page_twice(&frames, which, xor, pages))
            .unwrap_or(frames);
        if let Some(lost_after) = interval.lost_after {
            let k = lost_after % frames.len();
            deliver(&mut mirror, &frames[..k])?;
            mirror.rollback();
            let when = format!(
                "{kind}: checkpoint {n}, primary lost after {k} of its {} frames {:?}, rolled back",
                frames.len(),
                &frames[..k]
            );
            expect_at(&mirror, &primary.saved, n - 1, &when)?;
        }
        let acks = deliver(&mut mirror, &frames)?;
        if acks != [Ack { checkpoint: n }] {
            return Err(format!("{kind}: checkpoint {n} answered with {acks:?}"));
        }
        expect_at(
            &mirror,
            &primary.saved,
            n,
            &format!("{kind}: checkpoint {n} complete"),
        )?;
        primary
            .checkpointer
            .acked(n)
            .expect("the ack of the checkpoint sent");
    }
    Ok(())
}

/// Runs the property over `kinds` with `bug` planted in every backup, `cases` programs drawn
/// from a fresh seed (or, `deterministic`, always the same ones); says how it failed.
pub fn run_mirroring(
    kinds: &[TrackerKind],
    bug: Option<PlantedMirrorBug>,
    cases: u32,
    deterministic: bool,
) -> Result<(), String> {
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner = if deterministic {
        TestRunner::new_with_rng(config, TestRng::deterministic_rng(RngAlgorithm::ChaCha))
    } else {
        TestRunner::new(config)
    };
    let outcome = runner.run(&program(), |(pages, intervals)| {
        for &kind in kinds {
            mirror_program(kind, pages, &intervals, bug).map_err(TestCaseError::fail)?;
        }
        Ok(())
    });
    outcome.map_err(|failure| failure.to_string())
}

#[test]
fn the_backup_holds_every_complete_checkpoint_and_rolls_back_to_it() {
    let _lock = common::soft_dirty_lock();
    let kinds = common::granted_kinds();
    for required in [TrackerKind::Uffd, TrackerKind::Mprotect] {
        assert!(
            kinds.contains(&required),
            "{required} is required here: {:?}",
            common::availability()
        );
    }
    if let Err(failure) = run_mirroring(&kinds, None, 256, false) {
        panic!("{failure}");
    }
    common::require_every_kind();
}

/// The benchmark runs each tracker end to end and counts the bytes it ships exactly (its times
/// are only reported, never checked).
#[test]
fn the_benchmark_ships_the_pages_stored_to() {
    let page_size = tandem_mirror::page_size();
    let (pages, dirty) = (64, 4);
    // Begin and End (9 + 16 bytes each), and per page a 9-byte header, checkpoint and index.
    let shipped = 2 * (9 + 16) + dirty * (9 + 12 + page_size);
    for kind in [TrackerKind::Uffd, TrackerKind::Mprotect] {
        let report =
            measure_checkpoints(kind, pages * page_size, dirty, 4).expect("a granted kind");
        assert_eq!(report.checkpoints, 4);
        assert_eq!(report.bytes_per_checkpoint, shipped as f64, "{kind}");
        assert_eq!(
            report.first_bytes,
            2 * (9 + 16) + pages * (9 + 12 + page_size)
        );
    }
}

/// The first checkpoint ships every page, so bytes the program wrote before its region was
/// tracked (which no harvest reports) reach the backup too.
#[test]
fn the_first_checkpoint_ships_what_was_written_before_tracking() {
    let page_size = tandem_mirror::page_size();
    for kind in [TrackerKind::Uffd, TrackerKind::Mprotect] {
        let mut region = Region::with_pages(4).expect("map a region");
        region.as_mut_slice()[2 * page_size + 9] = 42;
        let tracker = tracker_for(region, Some(kind)).expect("a granted kind");
        let mut checkpointer = Checkpointer::new(tracker);
        let checkpoint = checkpointer.checkpoint().expect("checkpoint 1");
        assert_eq!(checkpoint.pages(), 4, "{kind}: every page");
        let mut mirror = new_mirror(4, None);
        deliver(&mut mirror, &checkpoint.frames()).expect("checkpoint 1");
        assert_eq!(mirror.memory(), checkpointer.region().as_slice(), "{kind}");
    }
}
