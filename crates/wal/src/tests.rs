//! The crate's tests: round trips, rollover, removal, poisoning, recovery's cuts, the
//! crash-consistency test on [`SimDisk`], and the two planted bugs it must catch.
//!
//! They live inside the crate (not in `tests/`) because the planted bugs are switched on by a
//! test-only flag of the library itself.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use tandem_log::{BatchBuilder, BatchKind, CallId, SealedBatch};
use tandem_memory::RedoRecord;

use crate::bugs::{Bug, plant};
use crate::format::{encode_frame, encode_segment_header, segment_path};
use crate::{Disk, FsDisk, Recovered, SimDisk, Stop, Wal, WalError, WalOptions};

const DIR: &str = "/node/wal";

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// A deterministic generator (SplitMix64) for the tests' draws.
struct TestRng(u64);

impl TestRng {
    fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `low..=high`.
    fn between(&mut self, low: usize, high: usize) -> usize {
        assert!(low <= high);
        low + (self.next_u64() % (high - low + 1) as u64) as usize
    }
}

/// Seals batches of consecutive records, as a primary or a receiver would hand them to the log.
struct Batches {
    builder: BatchBuilder,
}

impl Batches {
    fn starting_at(lsn_base: u64) -> Batches {
        Batches {
            builder: BatchBuilder::new(BatchKind::Redo, 3, 7, lsn_base),
        }
    }

    /// A batch of `record_count` records, each writing `bytes_each` bytes.
    fn next(&mut self, record_count: usize, bytes_each: usize) -> SealedBatch {
        assert!(record_count >= 1);
        for _ in 0..record_count {
            let lsn = self.builder.lsn_next();
            let mut record = RedoRecord::empty(lsn);
            record
                .push_run(lsn * 8, &vec![lsn as u8; bytes_each])
                .unwrap();
            let call = CallId {
                client_id: 1,
                seq: lsn,
            };
            self.builder.push_redo(call, &record);
        }
        self.builder.seal()
    }

    fn next_drawn(&mut self, rng: &mut TestRng) -> SealedBatch {
        let record_count = rng.between(1, 3);
        let bytes_each = rng.between(1, 700);
        self.next(record_count, bytes_each)
    }
}

fn small_segments() -> WalOptions {
    WalOptions {
        segment_bytes_max: 4096,
    }
}

fn open(disk: SimDisk, options: WalOptions) -> (Wal<SimDisk>, Recovered) {
    Wal::open(disk, dir(), options).expect("the log opens")
}

/// Recovery's promise, checked against what a run appended, what its syncs reported durable and
/// the highest LSN it asked `remove_below` to drop: the recovered batches are a contiguous run
/// of the appended ones, byte for byte, that starts no later than the first batch it was never
/// allowed to drop and holds at least every batch reported durable.
fn check_recovered(
    appended: &[SealedBatch],
    lsn_durable_reported: u64,
    lsn_removable: u64,
    recovered: &[SealedBatch],
) -> Result<(), String> {
    let Some(first) = recovered.first() else {
        // The newest segment is never removed, so a log that held a durable batch never empties.
        if lsn_durable_reported > 0 {
            return Err(format!(
                "lost durable batches: a sync reported LSN {lsn_durable_reported} durable, \
                 recovery found an empty log"
            ));
        }
        return Ok(());
    };
    let start = appended
        .iter()
        .position(|batch| batch.lsn_base() == first.lsn_base());
    let Some(start) = start else {
        let (lsn_base, lsn_last) = (first.lsn_base(), first.lsn_last());
        return Err(format!(
            "recovered batch {lsn_base}..={lsn_last} never appended"
        ));
    };
    if first.lsn_base() - 1 > lsn_removable {
        return Err(format!(
            "lost batches below LSN {}: only up to {lsn_removable} could be removed",
            first.lsn_base()
        ));
    }
    for (index, batch) in recovered.iter().enumerate() {
        let (lsn_base, lsn_last) = (batch.lsn_base(), batch.lsn_last());
        match appended.get(start + index) {
            None => {
                return Err(format!(
                    "recovered batch {lsn_base}..={lsn_last} never appended"
                ));
            }
            Some(expected) if expected != batch => {
                return Err(format!(
                    "recovered batch {lsn_base}..={lsn_last} differs from the one appended in \
                     its place ({}..={})",
                    expected.lsn_base(),
                    expected.lsn_last()
                ));
            }
            Some(_) => {}
        }
    }
    let lsn_recovered = recovered.last().map_or(0, SealedBatch::lsn_last);
    if lsn_recovered < lsn_durable_reported {
        return Err(format!(
            "lost durable batches: a sync reported LSN {lsn_durable_reported} durable, recovery \
             found only up to {lsn_recovered}"
        ));
    }
    Ok(())
}

#[test]
fn many_batches_of_varying_sizes_come_back_identical_across_segments() {
    let mut rng = TestRng(1);
    let (mut wal, recovered) = open(SimDisk::new(), small_segments());
    assert!(recovered.batches.is_empty());
    assert_eq!(recovered.lsn_last(), None);
    let mut batches = Batches::starting_at(1);
    let mut appended = Vec::new();
    for round in 0..60 {
        for _ in 0..round % 4 + 1 {
            let batch = batches.next_drawn(&mut rng);
            wal.append(&batch).unwrap();
            appended.push(batch);
        }
        let lsn_durable = wal.sync().unwrap();
        assert_eq!(lsn_durable, appended.last().unwrap().lsn_last());
        assert_eq!(wal.lsn_durable(), wal.lsn_appended());
    }
    let segments = wal.segments_lsn_first();
    assert!(segments.len() > 10, "{segments:?}");
    let disk = wal.into_disk();
    for &lsn_first in &segments {
        let len = disk
            .contents(&segment_path(dir(), lsn_first))
            .unwrap()
            .len();
        assert!(len <= 4096, "segment {lsn_first} holds {len} bytes");
    }
    let (wal, recovered) = open(disk, small_segments());
    assert_eq!(recovered.batches, appended);
    assert_eq!(recovered.lsn_first(), Some(1));
    assert!(
        recovered.batches.iter().all(|batch| batch.view() == 7),
        "views kept as sealed"
    );
    assert_eq!(
        (recovered.stop, recovered.bytes_cut, recovered.files_removed),
        (None, 0, 0)
    );
    assert_eq!(wal.lsn_durable(), appended.last().unwrap().lsn_last());
    assert_eq!(wal.segments_lsn_first(), segments);
    // Every segment begins with a batch, and is named by that batch's first LSN.
    for lsn_first in segments {
        assert!(appended.iter().any(|batch| batch.lsn_base() == lsn_first));
    }
}

#[test]
fn a_reopened_log_continues_after_what_it_recovered() {
    let mut batches = Batches::starting_at(1);
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let first: Vec<_> = (0..5).map(|_| batches.next(2, 300)).collect();
    first.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    let (mut wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.batches, first);
    let second: Vec<_> = (0..5).map(|_| batches.next(1, 900)).collect();
    second.iter().for_each(|batch| wal.append(batch).unwrap());
    assert_eq!(wal.sync().unwrap(), 15);
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.batches, [first, second].concat());
}

#[test]
fn many_batches_take_one_sync() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    let mut batches = Batches::starting_at(1);
    let syncs_before = wal.disk().syncs();
    for _ in 0..50 {
        wal.append(&batches.next(1, 100)).unwrap();
    }
    assert_eq!(
        wal.lsn_durable(),
        0,
        "appending alone makes nothing durable"
    );
    assert_eq!(wal.sync().unwrap(), 50);
    assert_eq!(wal.disk().syncs() - syncs_before, 1);
    assert_eq!(
        wal.sync().unwrap(),
        50,
        "a sync with nothing buffered does no I/O"
    );
    assert_eq!(wal.disk().syncs() - syncs_before, 1);
}

#[test]
fn a_batch_larger_than_a_segment_gets_a_segment_of_its_own() {
    let options = WalOptions {
        segment_bytes_max: 1024,
    };
    let (mut wal, _) = open(SimDisk::new(), options);
    let mut batches = Batches::starting_at(1);
    let appended = vec![
        batches.next(1, 10),
        batches.next(2, 3000),
        batches.next(1, 10),
    ];
    appended.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    assert_eq!(wal.segments_lsn_first(), [1, 2, 4]);
    let (_, recovered) = open(wal.into_disk(), options);
    assert_eq!(recovered.batches, appended);
}

#[test]
fn remove_below_deletes_whole_segments_only_and_keeps_the_newest() {
    let options = WalOptions {
        segment_bytes_max: 1024,
    };
    let (mut wal, _) = open(SimDisk::new(), options);
    let mut batches = Batches::starting_at(1);
    // Each batch of two 400-byte records fills a segment of its own.
    let appended: Vec<_> = (0..4).map(|_| batches.next(2, 400)).collect();
    appended.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    assert_eq!(wal.segments_lsn_first(), [1, 3, 5, 7]);
    assert_eq!(
        wal.remove_below(1).unwrap(),
        0,
        "segment 1 holds 1..=2: LSN 2 is still needed"
    );
    assert_eq!(wal.remove_below(2).unwrap(), 1);
    assert_eq!(
        wal.remove_below(3).unwrap(),
        0,
        "segment 3 holds 3..=4: LSN 4 is still needed"
    );
    assert_eq!(wal.remove_below(6).unwrap(), 2);
    assert_eq!(wal.segments_lsn_first(), [7]);
    assert_eq!(
        wal.remove_below(u64::MAX).unwrap(),
        0,
        "the newest segment stays"
    );
    assert!(wal.disk().contents(&segment_path(dir(), 1)).is_none());
    let (mut wal, recovered) = open(wal.into_disk(), options);
    assert_eq!(recovered.batches, appended[3..]);
    assert_eq!(recovered.lsn_first(), Some(7));
    wal.append(&batches.next(1, 10)).unwrap();
    assert_eq!(wal.sync().unwrap(), 9);
}

#[test]
#[should_panic(expected = "must continue it")]
fn appending_a_batch_that_does_not_continue_the_log_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&Batches::starting_at(1).next(1, 10)).unwrap();
    wal.append(&Batches::starting_at(5).next(1, 10)).unwrap();
}

#[test]
fn a_failed_sync_poisons_and_reports_nothing_more_durable() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    let mut batches = Batches::starting_at(1);
    wal.append(&batches.next(2, 10)).unwrap();
    assert_eq!(wal.sync().unwrap(), 2);
    wal.append(&batches.next(2, 10)).unwrap();
    wal.disk_mut().fail_next_sync();
    let Err(WalError::Poisoned { cause }) = wal.sync() else {
        panic!("a failed sync must poison");
    };
    assert!(cause.contains("simulated sync failure"), "{cause}");
    assert_eq!(
        wal.lsn_durable(),
        2,
        "nothing after a failed sync is durable"
    );
    assert_eq!(wal.poisoned(), Some(&cause[..]));
    // Every later call refuses, with the first error's text, and does no I/O: no retried fsync.
    let ops = wal.disk().ops();
    let poisoned = Err(WalError::Poisoned {
        cause: cause.clone(),
    });
    assert_eq!(wal.sync(), poisoned);
    assert_eq!(wal.append(&batches.next(1, 10)).map(|()| 0), poisoned);
    assert_eq!(wal.remove_below(100).map(|n| n as u64), poisoned);
    assert_eq!(wal.disk().ops(), ops);
    assert_eq!(wal.lsn_durable(), 2);
}

#[test]
fn a_failed_append_poisons() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    let mut batches = Batches::starting_at(1);
    wal.append(&batches.next(1, 10)).unwrap();
    wal.disk_mut().fail_next_append();
    let Err(WalError::Poisoned { cause }) = wal.sync() else {
        panic!("a failed append must poison");
    };
    assert!(cause.contains("simulated append failure"), "{cause}");
    assert_eq!(wal.lsn_durable(), 0);
    let second = batches.next(1, 10);
    assert_eq!(wal.append(&second), Err(WalError::Poisoned { cause }));
}

#[test]
fn a_failed_directory_sync_at_rollover_poisons() {
    let options = WalOptions {
        segment_bytes_max: 1024,
    };
    let (mut wal, _) = open(SimDisk::new(), options);
    let mut batches = Batches::starting_at(1);
    wal.append(&batches.next(2, 400)).unwrap();
    wal.sync().unwrap();
    wal.append(&batches.next(2, 400)).unwrap();
    // The rollover syncs the closed segment (nothing pending there) then the directory.
    wal.disk_mut().fail_next_sync();
    let Err(WalError::Poisoned { cause }) = wal.sync() else {
        panic!("a failed directory sync must poison");
    };
    assert!(cause.contains("syncing log directory"), "{cause}");
    assert_eq!(wal.lsn_durable(), 2);
}

/// A segment file holding `frames` after a header naming `lsn_first`, written durably.
fn put_segment(disk: &mut SimDisk, lsn_first: u64, frames: &[&[u8]]) -> usize {
    let mut bytes = Vec::new();
    encode_segment_header(lsn_first, &mut bytes);
    for frame in frames {
        encode_frame(frame, &mut bytes);
    }
    disk.put_durable(&segment_path(dir(), lsn_first), &bytes);
    bytes.len()
}

#[test]
fn recovery_stops_at_a_torn_batch_even_when_a_valid_one_follows() {
    let mut batches = Batches::starting_at(1);
    let (first, second, third) = (
        batches.next(2, 50),
        batches.next(2, 50),
        batches.next(2, 50),
    );
    let mut torn = second.bytes().to_vec();
    *torn.last_mut().unwrap() ^= 0x40;
    let mut disk = SimDisk::new();
    let len = put_segment(&mut disk, 1, &[first.bytes(), &torn, third.bytes()]);
    let (mut wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.batches, std::slice::from_ref(&first));
    assert!(matches!(
        recovered.stop,
        Some(Stop::CorruptBatch { offset: 80.., .. })
    ));
    let len_kept = 24 + 8 + first.len();
    assert_eq!(recovered.bytes_cut, (len - len_kept) as u64);
    assert_eq!(
        wal.disk().contents(&segment_path(dir(), 1)).unwrap().len(),
        len_kept
    );
    // The log continues where the valid part ended.
    wal.append(&second).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = open(wal.into_disk(), WalOptions::default());
    assert_eq!(recovered.batches, [first, second]);
}

#[test]
fn recovery_stops_at_a_torn_length() {
    let mut batches = Batches::starting_at(1);
    let (first, second) = (batches.next(1, 50), batches.next(1, 50));
    let mut disk = SimDisk::new();
    let path = segment_path(dir(), 1);
    put_segment(&mut disk, 1, &[first.bytes(), second.bytes()]);
    // Zero the second frame's length, as a torn sector would: recovery must not read on.
    let mut bytes = disk.contents(&path).unwrap().to_vec();
    let frame_second = 24 + 8 + first.len();
    bytes[frame_second..frame_second + 4].fill(0);
    disk.put_durable(&path, &bytes);
    let (_, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.batches, [first]);
    assert!(matches!(recovered.stop, Some(Stop::TornFrame { .. })));
}

/// A log of two batches followed, in the same file, by a valid batch from an older incarnation
/// of the log (a stale batch in a reused region): it parses, but does not continue.
fn log_with_a_stale_batch() -> (SimDisk, Vec<SealedBatch>) {
    let mut batches = Batches::starting_at(1);
    let appended = vec![batches.next(2, 50), batches.next(2, 50)];
    let stale = Batches::starting_at(20).next(2, 50);
    let mut disk = SimDisk::new();
    put_segment(
        &mut disk,
        1,
        &[appended[0].bytes(), appended[1].bytes(), stale.bytes()],
    );
    (disk, appended)
}

/// A log whose second segment file does not continue the first (a stale file whose removal
/// was lost, say).
fn log_with_a_stale_segment() -> (SimDisk, Vec<SealedBatch>) {
    let mut batches = Batches::starting_at(1);
    let appended = vec![batches.next(2, 50), batches.next(2, 50)];
    let stale = Batches::starting_at(9).next(2, 50);
    let mut disk = SimDisk::new();
    put_segment(&mut disk, 1, &[appended[0].bytes(), appended[1].bytes()]);
    put_segment(&mut disk, 9, &[stale.bytes()]);
    (disk, appended)
}

#[test]
fn recovery_stops_at_a_batch_that_does_not_continue() {
    let (disk, appended) = log_with_a_stale_batch();
    let (wal, recovered) = open(disk, WalOptions::default());
    check_recovered(&appended, 4, 0, &recovered.batches).unwrap();
    assert_eq!(recovered.batches, appended);
    let expected = (20, 5);
    let Some(Stop::NotContinuing {
        lsn_found,
        lsn_expected,
        ..
    }) = recovered.stop
    else {
        panic!("{:?}", recovered.stop);
    };
    assert_eq!((lsn_found, lsn_expected), expected);
    assert_eq!(wal.lsn_appended(), 4);

    let (disk, appended) = log_with_a_stale_segment();
    let (wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.batches, appended);
    assert_eq!(recovered.files_removed, 1);
    assert_eq!(wal.segments_lsn_first(), [1]);
    assert!(wal.disk().contents(&segment_path(dir(), 9)).is_none());
}

#[test]
fn planted_skip_successor_check_is_caught() {
    let _planted = plant(Bug::SkipSuccessorCheck);
    for (name, (disk, appended)) in [
        ("stale batch", log_with_a_stale_batch()),
        ("stale segment", log_with_a_stale_segment()),
    ] {
        let (_, recovered) = open(disk, WalOptions::default());
        let error = check_recovered(&appended, 4, 0, &recovered.batches)
            .expect_err("the planted bug is caught");
        assert!(error.contains("never appended"), "{name}: {error}");
    }
}

#[test]
fn an_empty_or_header_only_segment_is_removed() {
    let mut disk = SimDisk::new();
    disk.put_durable(&segment_path(dir(), 1), &[]);
    let (wal, recovered) = open(disk, WalOptions::default());
    assert!(recovered.batches.is_empty());
    assert_eq!(
        recovered.stop,
        Some(Stop::TornSegmentHeader {
            file: "00000000000000000001.wal".into()
        })
    );
    assert_eq!(recovered.files_removed, 1);
    assert!(wal.segments_lsn_first().is_empty());

    let mut disk = SimDisk::new();
    put_segment(&mut disk, 5, &[]);
    let (mut wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(
        (recovered.stop, recovered.files_removed, recovered.bytes_cut),
        (None, 1, 24)
    );
    // An empty log takes its first batch at any LSN (a checkpoint may cover what came before).
    wal.append(&Batches::starting_at(5).next(1, 10)).unwrap();
    assert_eq!(wal.sync().unwrap(), 5);
    assert_eq!(wal.segments_lsn_first(), [5]);
}

#[test]
fn a_segment_of_another_format_version_is_refused_not_cut() {
    let mut disk = SimDisk::new();
    let mut header = Vec::new();
    encode_segment_header(1, &mut header);
    header[4] = 2;
    let crc = crc32c::crc32c(&header[..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&[1; 100]);
    let path = segment_path(dir(), 1);
    disk.put_durable(&path, &header);
    let error = Wal::open(disk.clone(), dir(), WalOptions::default()).unwrap_err();
    assert!(
        matches!(error, WalError::Version { found: 2, .. }),
        "{error}"
    );
    assert_eq!(disk.contents(&path).unwrap(), &header[..]);
}

#[test]
fn files_that_are_not_segments_are_left_alone() {
    let mut disk = SimDisk::new();
    disk.put_durable(&dir().join("notes.txt"), b"hello");
    let (mut wal, recovered) = open(disk, WalOptions::default());
    assert!(recovered.batches.is_empty());
    wal.append(&Batches::starting_at(1).next(1, 10)).unwrap();
    wal.sync().unwrap();
    assert_eq!(
        wal.disk().contents(&dir().join("notes.txt")),
        Some(&b"hello"[..])
    );
}

/// A temporary directory for the real file system, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("tandem-wal-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[test]
fn the_real_file_system_round_trips_and_cuts_a_torn_tail() {
    let temp = TempDir::new("round-trip");
    let options = WalOptions {
        segment_bytes_max: 2048,
    };
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert!(recovered.batches.is_empty());
    let mut rng = TestRng(7);
    let mut batches = Batches::starting_at(1);
    let appended: Vec<_> = (0..20).map(|_| batches.next_drawn(&mut rng)).collect();
    for chunk in appended.chunks(3) {
        chunk.iter().for_each(|batch| wal.append(batch).unwrap());
        wal.sync().unwrap();
    }
    let segments = wal.segments_lsn_first();
    assert!(segments.len() > 2);
    drop(wal);
    // A torn tail: half a frame after the last batch.
    let last = segment_path(&temp.0, *segments.last().unwrap());
    let mut disk = FsDisk;
    let mut file = disk.open_append(&last).unwrap();
    disk.append(&mut file, &[0x11; 5]).unwrap();
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.batches, appended);
    assert_eq!(recovered.bytes_cut, 5);
    assert!(matches!(recovered.stop, Some(Stop::TornFrame { .. })));
    let more = batches.next(1, 10);
    wal.append(&more).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.batches, [appended, vec![more]].concat());
}

/// One seeded run of appends and syncs, stopped after `halt_after_ops` disk operations (if
/// given): every operation after that fails, as if the machine had lost power there.
struct Run {
    disk: SimDisk,
    appended: Vec<SealedBatch>,
    lsn_durable_reported: u64,
    /// The highest LSN the run asked `remove_below` to drop (whether or not the call succeeded).
    lsn_removable: u64,
    /// Disk operations the run did (or tried) after opening the log.
    ops: u64,
}

const CRASH_OPTIONS: WalOptions = WalOptions {
    segment_bytes_max: 2048,
};

fn run(seed: u64, halt_after_ops: Option<u64>) -> Run {
    let mut rng = TestRng(seed);
    let (mut wal, _) = open(SimDisk::new(), CRASH_OPTIONS);
    let ops_at_open = wal.disk().ops();
    if let Some(ops) = halt_after_ops {
        wal.disk_mut().halt_after_ops(ops);
    }
    let mut batches = Batches::starting_at(1);
    let (mut appended, mut lsn_durable_reported, mut lsn_removable) = (Vec::new(), 0u64, 0u64);
    // The steps are drawn from the seed alone, whatever the disk answers, so every halted run
    // is a prefix of the run that was not halted.
    for _ in 0..rng.between(6, 14) {
        let step = rng.between(0, 5);
        if step == 5 {
            // A checkpoint covers the log up to about the durable LSN.
            let lsn = lsn_durable_reported.saturating_sub(rng.between(0, 3) as u64);
            lsn_removable = lsn_removable.max(lsn);
            let _ = wal.remove_below(lsn);
        } else if step < 3 {
            for _ in 0..rng.between(1, 3) {
                let batch = batches.next_drawn(&mut rng);
                if wal.append(&batch).is_ok() {
                    appended.push(batch);
                }
            }
        } else if let Ok(lsn) = wal.sync() {
            lsn_durable_reported = lsn;
        }
    }
    if let Ok(lsn) = wal.sync() {
        lsn_durable_reported = lsn;
    }
    assert!(lsn_durable_reported <= wal.lsn_appended());
    let ops = wal.disk().ops() - ops_at_open;
    Run {
        disk: wal.into_disk(),
        appended,
        lsn_durable_reported,
        lsn_removable,
        ops,
    }
}

/// What the crash test saw, to show it reached the cases it is meant to.
#[derive(Debug, Default)]
struct Coverage {
    crash_points: usize,
    /// Crash points of recovery itself, each followed by another recovery.
    recovery_crash_points: usize,
    recoveries_that_cut: usize,
    /// Crashes after which recovery found fewer batches than were appended (unsynced ones).
    unsynced_batches_lost: usize,
    /// Crashes after which recovery found more than the syncs had reported durable (unsynced
    /// bytes that happened to reach the disk): the prefix may end anywhere past the durable LSN.
    kept_beyond_durable: usize,
    /// Crashes after which the log began after LSN 1: `remove_below` had removed segments.
    started_after_removal: usize,
    stops: BTreeMap<&'static str, usize>,
}

fn stop_name(stop: &Option<Stop>) -> &'static str {
    match stop {
        None => "none",
        Some(Stop::TornSegmentHeader { .. }) => "torn segment header",
        Some(Stop::MisnamedSegment { .. }) => "misnamed segment",
        Some(Stop::TornFrame { .. }) => "torn frame",
        Some(Stop::CorruptBatch { .. }) => "corrupt batch",
        Some(Stop::NotContinuing { .. }) => "not continuing",
    }
}

/// Crashes the seed's run after every disk operation, with the crash's own draws, and checks
/// recovery's promise each time, then that the recovered log takes more batches.
fn check_crashes(seed: u64, coverage: &mut Coverage) -> Result<(), String> {
    let ops = run(seed, None).ops;
    for halt in 0..=ops {
        let run = run(seed, Some(halt));
        let mut disk = run.disk.clone();
        disk.crash(seed.wrapping_mul(1_000_003).wrapping_add(halt));
        let context = |error: String| format!("seed {seed}, crash after op {halt}: {error}");
        let (mut wal, recovered) = Wal::open(disk.clone(), dir(), CRASH_OPTIONS)
            .map_err(|error| context(error.to_string()))?;
        check_recovered(
            &run.appended,
            run.lsn_durable_reported,
            run.lsn_removable,
            &recovered.batches,
        )
        .map_err(context)?;
        if seed < RECOVERY_CRASH_SEEDS {
            check_crashes_during_recovery(seed, halt, &disk, &run, coverage).map_err(context)?;
        }
        coverage.crash_points += 1;
        coverage.recoveries_that_cut += usize::from(recovered.bytes_cut > 0);
        *coverage
            .stops
            .entry(stop_name(&recovered.stop))
            .or_default() += 1;
        coverage.unsynced_batches_lost += usize::from(recovered.batches.len() < run.appended.len());
        let lsn_recovered = recovered.lsn_last().unwrap_or(0);
        coverage.kept_beyond_durable += usize::from(lsn_recovered > run.lsn_durable_reported);
        coverage.started_after_removal += usize::from(recovered.lsn_first() > Some(1));
        // The recovered log continues: two more batches, synced, come back after it.
        let lsn_next = recovered.lsn_last().map_or(1, |lsn| lsn + 1);
        let mut batches = Batches::starting_at(lsn_next);
        let more = [batches.next(1, 100), batches.next(2, 600)];
        for batch in &more {
            wal.append(batch)
                .map_err(|error| context(error.to_string()))?;
        }
        wal.sync().map_err(|error| context(error.to_string()))?;
        let (_, reopened) = Wal::open(wal.into_disk(), dir(), CRASH_OPTIONS)
            .map_err(|error| context(error.to_string()))?;
        let expected = [recovered.batches, more.to_vec()].concat();
        if reopened.batches != expected || reopened.stop.is_some() {
            return Err(context(format!(
                "after recovery and two more batches, reopening found {} batches (stop {:?}), \
                 expected {}",
                reopened.batches.len(),
                reopened.stop,
                expected.len()
            )));
        }
    }
    Ok(())
}

/// Seeds whose every crash point also has its recovery crashed after each disk operation.
const RECOVERY_CRASH_SEEDS: u64 = 100;

/// Crashes the recovery of a crashed disk after each of its disk operations (it truncates and
/// removes files, and syncs the directory), then checks that the next recovery still keeps
/// recovery's promise: recovery is itself crash-safe.
fn check_crashes_during_recovery(
    seed: u64,
    halt: u64,
    crashed: &SimDisk,
    run: &Run,
    coverage: &mut Coverage,
) -> Result<(), String> {
    let mut probe = crashed.clone();
    let ops_before = probe.ops();
    Wal::open(&mut probe, dir(), CRASH_OPTIONS).map_err(|error| error.to_string())?;
    let recovery_ops = probe.ops() - ops_before;
    for recovery_halt in 0..recovery_ops {
        let mut disk = crashed.clone();
        disk.halt_after_ops(recovery_halt);
        // Halted, this recovery fails part-way; what it did before is what the crash keeps.
        let _ = Wal::open(&mut disk, dir(), CRASH_OPTIONS);
        disk.crash(seed ^ halt.rotate_left(32) ^ recovery_halt.rotate_left(48));
        let context = |error: String| format!("recovery crashed after op {recovery_halt}: {error}");
        let (_, recovered) =
            Wal::open(disk, dir(), CRASH_OPTIONS).map_err(|error| context(error.to_string()))?;
        check_recovered(
            &run.appended,
            run.lsn_durable_reported,
            run.lsn_removable,
            &recovered.batches,
        )
        .map_err(context)?;
        coverage.recovery_crash_points += 1;
    }
    Ok(())
}

/// Seeds of the crash-consistency test: each crashes its run after every disk operation.
const CRASH_SEEDS: u64 = 300;

#[test]
fn recovery_after_a_crash_at_every_disk_operation_keeps_a_prefix_holding_all_durable() {
    let mut coverage = Coverage::default();
    for seed in 0..CRASH_SEEDS {
        if let Err(error) = check_crashes(seed, &mut coverage) {
            panic!("{error}");
        }
    }
    eprintln!("{coverage:?}");
    assert!(
        coverage.crash_points > 20 * CRASH_SEEDS as usize,
        "{coverage:?}"
    );
    assert!(coverage.recoveries_that_cut > 100, "{coverage:?}");
    assert!(coverage.recovery_crash_points > 1000, "{coverage:?}");
    assert!(coverage.kept_beyond_durable > 100, "{coverage:?}");
    assert!(coverage.started_after_removal > 100, "{coverage:?}");
    for stop in ["none", "torn segment header", "torn frame", "corrupt batch"] {
        assert!(
            coverage.stops.get(stop).is_some_and(|&n| n > 10),
            "{stop}: {coverage:?}"
        );
    }
}

/// The crash test's first complaint with `bug` planted.
fn caught_by_the_crash_test(bug: Bug) -> String {
    let _planted = plant(bug);
    let mut coverage = Coverage::default();
    let caught = (0..CRASH_SEEDS).find_map(|seed| check_crashes(seed, &mut coverage).err());
    let error = caught.expect("the planted bug is caught");
    eprintln!("caught: {error}");
    error
}

#[test]
fn planted_ack_before_sync_is_caught_by_the_crash_test() {
    let error = caught_by_the_crash_test(Bug::AckBeforeSync);
    assert!(error.contains("lost durable batches"), "{error}");
}

#[test]
fn planted_remove_with_one_directory_sync_is_caught_by_the_crash_test() {
    let error = caught_by_the_crash_test(Bug::RemoveWithOneDirectorySync);
    assert!(error.contains("lost"), "{error}");
}
