//! The crate's tests: round trips, rollover, removal, images, overlapping appends, cuts,
//! poisoning, recovery's cuts, the crash-consistency test on [`SimDisk`], and the planted bugs
//! it must catch.
//!
//! They live inside the crate (not in `tests/`) because the planted bugs are switched on by a
//! test-only flag of the library itself.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use tandem_memory::RedoRecord;
use tandem_redo::{BatchBuilder, BatchKind, CallId, SealedBatch};

use crate::bugs::{Bug, plant};
use crate::checkpoint::checkpoint_path;
use crate::format::{encode_frame, encode_image_chunk, encode_segment_header, segment_path};
use crate::{
    CheckpointRecovered, Disk, Entry, FsDisk, ImageChunk, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE,
    Recovered, SimDisk, Stop, Wal, WalError, WalOptions,
};

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
        ..WalOptions::default()
    }
}

fn open(disk: SimDisk, options: WalOptions) -> (Wal<SimDisk>, Recovered) {
    Wal::open(disk, dir(), options).expect("the log opens")
}

#[test]
fn many_batches_of_varying_sizes_come_back_identical_across_segments() {
    let mut rng = TestRng(1);
    let (mut wal, recovered) = open(SimDisk::new(), small_segments());
    assert!(recovered.entries.is_empty());
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
    let segments = wal.segments();
    assert!(segments.len() > 10, "{segments:?}");
    assert_eq!(segments, (1..=segments.len() as u64).collect::<Vec<_>>());
    let firsts = wal.segments_lsn_first();
    let disk = wal.into_disk();
    for &seq in &segments {
        let len = disk.contents(&segment_path(dir(), seq)).unwrap().len();
        assert!(len <= 4096, "segment {seq} holds {len} bytes");
    }
    let (wal, recovered) = open(disk, small_segments());
    assert_eq!(recovered.batches(), appended);
    assert_eq!(recovered.lsn_base(), Some(0));
    assert!(
        recovered.batches().iter().all(|batch| batch.view() == 7),
        "views kept as sealed"
    );
    assert_eq!(
        (recovered.stop, recovered.bytes_cut, recovered.files_removed),
        (None, 0, 0)
    );
    assert_eq!(wal.lsn_durable(), appended.last().unwrap().lsn_last());
    assert_eq!(wal.segments(), segments);
    assert_eq!(wal.segments_lsn_first(), firsts);
    // Every segment begins with a batch: no batch straddles two files.
    for lsn_first in firsts {
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
    assert_eq!(recovered.batches(), first);
    let second: Vec<_> = (0..5).map(|_| batches.next(1, 900)).collect();
    second.iter().for_each(|batch| wal.append(batch).unwrap());
    assert_eq!(wal.sync().unwrap(), 15);
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.batches(), [first, second].concat());
}

/// A process that dies leaves what it wrote but did not sync in the page cache, where
/// recovery reads it; recovery syncs it, so a power loss after the restart keeps it (a node
/// reports what it recovered for a promotion, and must not lose it afterwards).
#[test]
fn what_recovery_read_survives_a_later_power_loss() {
    let mut batches = Batches::starting_at(1);
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let synced = batches.next(2, 100);
    wal.append(&synced).unwrap();
    wal.sync().unwrap();
    let written = batches.next(2, 100);
    wal.append(&written).unwrap();
    wal.write().unwrap();
    // The process dies: the disk keeps its cache. Recovery reads both batches.
    let (wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.batches(), vec![synced.clone(), written.clone()]);
    assert_eq!(wal.lsn_durable(), 4);
    // Then the machine loses power: whatever is not synced may go, and nothing does.
    let disk = wal.into_disk();
    for seed in 0..32 {
        let mut crashed = disk.clone();
        crashed.crash(seed);
        let (_, recovered) = open(crashed, small_segments());
        assert_eq!(
            recovered.batches(),
            vec![synced.clone(), written.clone()],
            "seed {seed}"
        );
    }
}

#[test]
fn many_batches_take_one_sync() {
    let options = WalOptions {
        preallocate_bytes: 1024 * 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = open(SimDisk::new(), options);
    let mut batches = Batches::starting_at(1);
    // The first group grows the file: its one sync also makes the room zeroed after it
    // durable, and later groups land in that room, one sync each.
    wal.append(&batches.next(1, 100)).unwrap();
    assert_eq!(wal.sync().unwrap(), 1);
    assert_eq!(wal.disk().syncs(), 1);
    let syncs_before = wal.disk().syncs();
    for _ in 0..50 {
        wal.append(&batches.next(1, 100)).unwrap();
    }
    assert_eq!(
        wal.lsn_durable(),
        1,
        "appending alone makes nothing durable"
    );
    assert_eq!(wal.sync().unwrap(), 51);
    assert_eq!(wal.disk().syncs() - syncs_before, 1);
    assert_eq!(
        wal.sync().unwrap(),
        51,
        "a sync with nothing buffered does no I/O"
    );
    assert_eq!(wal.disk().syncs() - syncs_before, 1);
}

#[test]
fn a_batch_larger_than_a_segment_gets_a_segment_of_its_own() {
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
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
    assert_eq!(recovered.batches(), appended);
}

#[test]
fn remove_below_deletes_whole_segments_only_and_keeps_the_newest() {
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
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
    assert_eq!(recovered.batches(), appended[3..]);
    assert_eq!(recovered.lsn_base(), Some(6));
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
        ..WalOptions::default()
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

/// A segment file holding `frames` after a header naming `seq`, written durably.
fn put_segment(disk: &mut SimDisk, seq: u64, frames: &[&[u8]]) -> usize {
    let mut bytes = Vec::new();
    encode_segment_header(seq, &mut bytes);
    for frame in frames {
        encode_frame(frame, &mut bytes);
    }
    disk.put_durable(&segment_path(dir(), seq), &bytes);
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
    assert_eq!(recovered.batches(), std::slice::from_ref(&first));
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
    assert_eq!(recovered.batches(), [first, second]);
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
    assert_eq!(recovered.batches(), [first]);
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
    put_segment(&mut disk, 2, &[stale.bytes()]);
    (disk, appended)
}

#[test]
fn recovery_stops_at_a_batch_that_does_not_continue() {
    let (disk, appended) = log_with_a_stale_batch();
    let (wal, recovered) = open(disk, WalOptions::default());
    check_recovered(&as_entries(&appended), 4, 0, &recovered.entries).unwrap();
    assert_eq!(recovered.batches(), appended);
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
    assert_eq!(recovered.batches(), appended);
    assert_eq!(recovered.files_removed, 1);
    assert_eq!(wal.segments_lsn_first(), [1]);
    assert!(wal.disk().contents(&segment_path(dir(), 2)).is_none());
}

#[test]
fn planted_skip_successor_check_is_caught() {
    let _planted = plant(Bug::SkipSuccessorCheck);
    for (name, (disk, appended)) in [
        ("stale batch", log_with_a_stale_batch()),
        ("stale segment", log_with_a_stale_segment()),
    ] {
        let (_, recovered) = open(disk, WalOptions::default());
        let error = check_recovered(&as_entries(&appended), 4, 0, &recovered.entries)
            .expect_err("the planted bug is caught");
        assert!(error.contains("never appended"), "{name}: {error}");
    }
}

#[test]
fn an_empty_or_header_only_segment_is_removed() {
    let mut disk = SimDisk::new();
    disk.put_durable(&segment_path(dir(), 1), &[]);
    let (wal, recovered) = open(disk, WalOptions::default());
    assert!(recovered.entries.is_empty());
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
    header[4] = 1;
    let crc = crc32c::crc32c(&header[..20]);
    header[20..24].copy_from_slice(&crc.to_le_bytes());
    header.extend_from_slice(&[1; 100]);
    let path = segment_path(dir(), 1);
    disk.put_durable(&path, &header);
    let error = Wal::open(disk.clone(), dir(), WalOptions::default()).unwrap_err();
    assert!(
        matches!(error, WalError::Version { found: 1, .. }),
        "{error}"
    );
    assert_eq!(disk.contents(&path).unwrap(), &header[..]);
}

#[test]
fn files_that_are_not_segments_are_left_alone() {
    let mut disk = SimDisk::new();
    disk.put_durable(&dir().join("notes.txt"), b"hello");
    let (mut wal, recovered) = open(disk, WalOptions::default());
    assert!(recovered.entries.is_empty());
    wal.append(&Batches::starting_at(1).next(1, 10)).unwrap();
    wal.sync().unwrap();
    assert_eq!(
        wal.disk().contents(&dir().join("notes.txt")),
        Some(b"hello".to_vec())
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

/// The simulated disk and the real one agree on the bytes a file holds after a cut into its
/// preallocated zeros and an append after it. Recovery cuts a segment after its last entry,
/// and that entry may end in zero bytes that a crash left to the zeros beneath them (its
/// sector was cut just before them): the cut keeps those zeros as the file's own, and the
/// next append lands after them. The simulated disk appended over them instead, and the entry
/// read back corrupt after the next crash (Redis seed 64195, with preallocation on: a log
/// lost records it had reported durable).
#[test]
fn a_cut_into_preallocated_zeros_keeps_them_on_the_simulated_disk_as_on_the_real_one() {
    fn run<D: Disk>(disk: &mut D, dir: &Path) -> Vec<u8> {
        disk.create_dir_all(dir).unwrap();
        let path = dir.join("segment");
        let mut file = disk.create(&path).unwrap();
        disk.append(&mut file, &[1; 100]).unwrap();
        disk.extend_zeroed(&mut file, 1000).unwrap();
        disk.truncate(&path, 120).unwrap();
        let mut file = disk.open_append(&path).unwrap();
        disk.append(&mut file, &[7; 10]).unwrap();
        disk.sync(&mut file).unwrap();
        disk.read(&path).unwrap()
    }
    let temp = TempDir::new("cut-into-zeros");
    let real = run(&mut FsDisk, &temp.0);
    let mut expected = vec![1; 100];
    expected.extend([0; 20]);
    expected.extend([7; 10]);
    assert_eq!(real, expected, "the real disk");
    let mut disk = SimDisk::new();
    assert_eq!(run(&mut disk, dir()), expected, "the simulated disk");
    // What the cut kept is durable: a crash keeps it, and the append synced after it.
    disk.crash(1);
    assert_eq!(disk.contents(&dir().join("segment")), Some(expected));
}

#[test]
fn the_real_file_system_round_trips_and_cuts_a_torn_tail() {
    let temp = TempDir::new("round-trip");
    let options = WalOptions {
        segment_bytes_max: 2048,
        preallocate_bytes: 1024 * 1024,
    };
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert!(recovered.entries.is_empty());
    let mut rng = TestRng(7);
    let mut batches = Batches::starting_at(1);
    let appended: Vec<_> = (0..20).map(|_| batches.next_drawn(&mut rng)).collect();
    for chunk in appended.chunks(3) {
        chunk.iter().for_each(|batch| wal.append(batch).unwrap());
        wal.sync().unwrap();
    }
    let segments = wal.segments();
    assert!(segments.len() > 2);
    drop(wal);
    // The newest segment runs on in preallocated zeros, the closed ones do not; recovery takes
    // the zeros for the log's end, not for a torn frame, and cuts them off.
    let last = segment_path(&temp.0, *segments.last().unwrap());
    let first = segment_path(&temp.0, segments[0]);
    assert_eq!(std::fs::metadata(&last).unwrap().len(), 2048);
    assert!(!std::fs::read(&first).unwrap().ends_with(&[0; 16]));
    let (wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.batches(), appended);
    assert_eq!((recovered.stop, recovered.bytes_cut), (None, 0));
    assert!(std::fs::metadata(&last).unwrap().len() < 2048);
    drop(wal);
    // A torn tail: half a frame after the last batch.
    let mut disk = FsDisk;
    let mut file = disk.open_append(&last).unwrap();
    disk.append(&mut file, &[0x11; 5]).unwrap();
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.batches(), appended);
    assert_eq!(recovered.bytes_cut, 5);
    assert!(matches!(recovered.stop, Some(Stop::TornFrame { .. })));
    let more = batches.next(1, 10);
    wal.append(&more).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.batches(), [appended, vec![more]].concat());
}

fn as_entries(batches: &[SealedBatch]) -> Vec<Entry> {
    batches.iter().cloned().map(Entry::Batch).collect()
}

/// A batch of `record_count` records from `lsn_base`, sealed in `view`: the crash test moves to a
/// new view after every cut, as a view change would, so that a batch cut away never has the
/// bytes of the one appended in its place.
pub(crate) fn batch_at(
    lsn_base: u64,
    record_count: usize,
    bytes_each: usize,
    view: u64,
) -> SealedBatch {
    let mut builder = BatchBuilder::new(BatchKind::Redo, 3, view, lsn_base);
    for lsn in lsn_base..lsn_base + record_count as u64 {
        let mut record = RedoRecord::empty(lsn);
        let byte = (lsn as u8).wrapping_add(view as u8);
        record.push_run(lsn * 8, &vec![byte; bytes_each]).unwrap();
        builder.push_redo(
            CallId {
                client_id: 1,
                seq: lsn,
            },
            &record,
        );
    }
    builder.seal()
}

/// Chunk `index` of an image of `count` chunks, with `pages_len` bytes of pages that depend on
/// everything about the chunk (and on `view`, like [`batch_at`]).
fn chunk_of(
    lsn_from: u64,
    lsn: u64,
    index: u32,
    count: u32,
    pages_len: usize,
    view: u64,
) -> ImageChunk {
    let seed =
        lsn_from ^ lsn.rotate_left(16) ^ u64::from(index).rotate_left(32) ^ view.rotate_left(48);
    let pages: Vec<u8> = (0..pages_len)
        .map(|at| (seed.wrapping_add(at as u64 * 7)) as u8)
        .collect();
    ImageChunk {
        lsn_from,
        lsn,
        view,
        index,
        count,
        pages: pages.into(),
    }
}

/// The LSN of the last complete entry of `entries` (0 for none) and the image left unfinished at
/// their end, as (lsn_from, lsn, count, index of the next chunk).
fn model_position(entries: &[Entry]) -> (u64, Option<(u64, u64, u32, u32)>) {
    let (mut lsn_end, mut open) = (0, None);
    for entry in entries {
        match entry {
            Entry::Batch(batch) => (lsn_end, open) = (batch.lsn_last(), None),
            Entry::Image(chunk) if chunk.is_last() => (lsn_end, open) = (chunk.lsn, None),
            Entry::Image(chunk) => {
                open = Some((chunk.lsn_from, chunk.lsn, chunk.count, chunk.index + 1));
            }
        }
    }
    (lsn_end, open)
}

/// What `cut_after(lsn)` must leave of `history`, worked out without the writer: every entry
/// that ends at or below `lsn`, then the prefix of a batch that straddles it; nothing of an
/// image that ends above it. Returns the entries and the LSN the log then ends at.
fn model_cut(history: &[Entry], lsn: u64) -> (Vec<Entry>, u64) {
    let mut kept = Vec::new();
    for entry in history {
        if entry.lsn_last() <= lsn {
            kept.push(entry.clone());
            continue;
        }
        if let Entry::Batch(batch) = entry
            && batch.lsn_base() <= lsn
        {
            kept.push(Entry::Batch(batch.trimmed(batch.lsn_base(), lsn)));
        }
        break;
    }
    let lsn_end = model_position(&kept).0;
    (kept, lsn_end)
}

fn describe(entry: &Entry) -> String {
    match entry {
        Entry::Batch(batch) => format!("batch {}..={}", batch.lsn_base(), batch.lsn_last()),
        Entry::Image(chunk) => format!(
            "image ({}, {}] chunk {} of {}",
            chunk.lsn_from, chunk.lsn, chunk.index, chunk.count
        ),
    }
}

/// Recovery's promise, checked against a history (what was appended, minus what completed cuts
/// removed), the LSN the syncs (or a completed cut) reported durable and the highest LSN it
/// asked `remove_below` to drop: the recovered entries are a contiguous run of the history's,
/// byte for byte, that starts no later than the first entry it was never allowed to drop, at
/// an entry that begins something (a batch or an image's first chunk), ends with a complete
/// entry, and reaches at least the durable LSN.
fn check_recovered(
    history: &[Entry],
    lsn_durable: u64,
    lsn_removable: u64,
    recovered: &[Entry],
) -> Result<(), String> {
    let Some(first) = recovered.first() else {
        // The newest segment is never removed, so a log that held a durable entry never
        // empties (only a cut empties it, and then the durable LSN is 0).
        if lsn_durable > 0 {
            return Err(format!(
                "lost durable entries: LSN {lsn_durable} was reported durable, recovery found \
                 an empty log"
            ));
        }
        return Ok(());
    };
    let Some(start) = history.iter().position(|entry| entry == first) else {
        return Err(format!("recovered {} never appended", describe(first)));
    };
    if let Some(lost) = history[..start]
        .iter()
        .find(|e| e.lsn_last() > lsn_removable)
    {
        return Err(format!(
            "lost {} below the log's start: only up to {lsn_removable} could be removed",
            describe(lost)
        ));
    }
    if first.as_image().is_some_and(|chunk| chunk.index > 0) {
        return Err(format!(
            "the log starts inside an image: {}",
            describe(first)
        ));
    }
    for (index, entry) in recovered.iter().enumerate() {
        match history.get(start + index) {
            None => return Err(format!("recovered {} never appended", describe(entry))),
            Some(expected) if expected != entry => {
                return Err(format!(
                    "recovered {} differs from the {} appended in its place",
                    describe(entry),
                    describe(expected)
                ));
            }
            Some(_) => {}
        }
    }
    let last = recovered.last().expect("not empty");
    if last.as_image().is_some_and(|chunk| !chunk.is_last()) {
        return Err(format!(
            "recovery kept an unfinished image: {}",
            describe(last)
        ));
    }
    if last.lsn_last() < lsn_durable {
        return Err(format!(
            "lost durable entries: LSN {lsn_durable} was reported durable, recovery found only \
             up to {}",
            last.lsn_last()
        ));
    }
    Ok(())
}

#[test]
fn a_log_of_batches_and_images_comes_back_identical() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut appended = Vec::new();
    let first = batch_at(1, 3, 100, 1);
    wal.append(&first).unwrap();
    appended.push(Entry::Batch(first));
    // An image of the pages changed after 2 as of 9: it covers the log's end (3) and moves it.
    for index in 0..3 {
        let chunk = chunk_of(2, 9, index, 3, 1500, 1);
        wal.append_chunk(&chunk).unwrap();
        assert_eq!(wal.lsn_appended(), if index < 2 { 3 } else { 9 });
        appended.push(Entry::Image(chunk));
    }
    let after = batch_at(10, 2, 100, 1);
    wal.append(&after).unwrap();
    appended.push(Entry::Batch(after));
    assert_eq!(wal.sync().unwrap(), 11);
    assert!(wal.segments().len() >= 2, "the chunks fill segments");
    let (wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.entries, appended);
    assert_eq!(
        (recovered.lsn_base(), recovered.lsn_last()),
        (Some(0), Some(11))
    );
    assert_eq!(recovered.stop, None);
    assert_eq!(wal.lsn_durable(), 11);
}

#[test]
fn an_image_is_durable_only_with_its_last_chunk() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    wal.append(&batch_at(1, 2, 50, 1)).unwrap();
    wal.append_chunk(&chunk_of(1, 20, 0, 2, 300, 1)).unwrap();
    assert!(wal.image_unfinished());
    assert_eq!(wal.sync().unwrap(), 2, "half an image is not durable");
    let (mut wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_last(), Some(2));
    assert!(matches!(recovered.stop, Some(Stop::IncompleteImage { .. })));
    assert!(recovered.bytes_cut > 300);
    // The log continues after the cut image as if it had never begun.
    wal.append_chunk(&chunk_of(2, 20, 0, 2, 300, 1)).unwrap();
    wal.append_chunk(&chunk_of(2, 20, 1, 2, 300, 1)).unwrap();
    assert_eq!(wal.sync().unwrap(), 20);
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_last(), Some(20));
    assert_eq!(recovered.entries.len(), 3);
}

#[test]
fn an_image_may_begin_an_empty_log_and_a_chunk_larger_than_a_segment_gets_one_alone() {
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = open(SimDisk::new(), options);
    let chunks = [
        chunk_of(0, 40, 0, 3, 10, 1),
        chunk_of(0, 40, 1, 3, 3000, 1),
        chunk_of(0, 40, 2, 3, 10, 1),
    ];
    chunks
        .iter()
        .for_each(|chunk| wal.append_chunk(chunk).unwrap());
    wal.append(&batch_at(41, 1, 10, 1)).unwrap();
    assert_eq!(wal.sync().unwrap(), 41);
    assert_eq!(wal.segments().len(), 3);
    let disk = wal.into_disk();
    let big = disk.contents(&segment_path(dir(), 2)).unwrap().len();
    assert!(big > 3000, "{big}");
    let (_, recovered) = open(disk, options);
    assert_eq!(recovered.lsn_base(), Some(0));
    assert_eq!(recovered.entries.len(), 4);
}

#[test]
#[should_panic(expected = "not a batch inside an image whose last chunk is missing")]
fn a_batch_inside_an_unfinished_image_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 1, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(1, 5, 0, 2, 10, 1)).unwrap();
    wal.append(&batch_at(6, 1, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "must continue it: expected LSN 6, got 5")]
fn a_batch_after_an_image_continues_from_its_lsn() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 1, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(1, 5, 0, 1, 10, 1)).unwrap();
    wal.append(&batch_at(5, 1, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "an LSN the log does not reach")]
fn an_image_after_a_gap_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 2, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(3, 9, 0, 1, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "does not move the log forward")]
fn an_image_that_does_not_move_the_log_forward_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 4, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(1, 4, 0, 1, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "not the next one of the unfinished image")]
fn a_chunk_out_of_order_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append_chunk(&chunk_of(0, 9, 0, 3, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(0, 9, 2, 3, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "not the next one of the unfinished image")]
fn a_chunk_of_another_image_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append_chunk(&chunk_of(0, 9, 0, 3, 10, 1)).unwrap();
    wal.append_chunk(&chunk_of(0, 10, 1, 3, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "a chunk after the first of an image that has not begun")]
fn an_image_that_starts_past_its_first_chunk_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append_chunk(&chunk_of(0, 9, 1, 3, 10, 1)).unwrap();
}

#[test]
#[should_panic(expected = "index is below its image's count")]
fn a_chunk_past_its_count_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append_chunk(&chunk_of(0, 9, 3, 3, 10, 1)).unwrap();
}

/// Recovery of a log whose entries are written as `frames` (already encoded payloads) into
/// one segment, after a batch 1..=4.
fn recover_after_a_batch(frames: &[Vec<u8>]) -> Recovered {
    let first = batch_at(1, 4, 10, 1);
    let mut payloads: Vec<&[u8]> = vec![first.bytes()];
    payloads.extend(frames.iter().map(Vec::as_slice));
    let mut disk = SimDisk::new();
    put_segment(&mut disk, 1, &payloads);
    let (wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.batches(), [first]);
    assert_eq!(wal.lsn_durable(), 4);
    let kept = wal.disk().contents(&segment_path(dir(), 1)).unwrap().len();
    assert_eq!(
        kept,
        24 + 8 + recovered.entries[0].as_batch().unwrap().len()
    );
    recovered
}

fn encoded(chunk: &ImageChunk) -> Vec<u8> {
    let mut bytes = Vec::new();
    encode_image_chunk(chunk, &mut bytes);
    bytes
}

#[test]
fn recovery_stops_at_each_kind_of_broken_image() {
    let why = |recovered: Recovered| match recovered.stop {
        Some(Stop::ImageOutOfOrder { why, offset, .. }) => {
            assert!(offset > 24);
            why
        }
        other => panic!("{other:?}"),
    };
    let gap = recover_after_a_batch(&[encoded(&chunk_of(5, 9, 0, 1, 10, 1))]);
    assert!(why(gap).contains("does not reach"));
    let backwards = recover_after_a_batch(&[encoded(&chunk_of(2, 4, 0, 1, 10, 1))]);
    assert!(why(backwards).contains("forward"));
    let headless = recover_after_a_batch(&[encoded(&chunk_of(2, 9, 1, 2, 10, 1))]);
    assert!(why(headless).contains("has not begun"));
    let skipped = recover_after_a_batch(&[
        encoded(&chunk_of(2, 9, 0, 3, 10, 1)),
        encoded(&chunk_of(2, 9, 2, 3, 10, 1)),
    ]);
    assert!(why(skipped).contains("not the next one"));
    let interrupted = recover_after_a_batch(&[
        encoded(&chunk_of(2, 9, 0, 2, 10, 1)),
        batch_at(5, 1, 10, 1).bytes().to_vec(),
    ]);
    assert!(why(interrupted).contains("a batch inside an image"));

    let mut corrupt = encoded(&chunk_of(2, 9, 0, 1, 10, 1));
    *corrupt.last_mut().unwrap() ^= 1;
    let recovered = recover_after_a_batch(&[corrupt]);
    assert!(matches!(
        recovered.stop,
        Some(Stop::CorruptImage {
            error: crate::ImageError::Checksum { .. },
            ..
        })
    ));
    let unfinished = recover_after_a_batch(&[
        encoded(&chunk_of(2, 9, 0, 3, 10, 1)),
        encoded(&chunk_of(2, 9, 1, 3, 10, 1)),
    ]);
    assert!(matches!(
        unfinished.stop,
        Some(Stop::IncompleteImage { offset: 80.., .. })
    ));
}

#[test]
fn an_unfinished_image_across_segments_is_cut_from_its_first_chunk() {
    let first = batch_at(1, 4, 10, 1);
    let mut disk = SimDisk::new();
    put_segment(
        &mut disk,
        1,
        &[first.bytes(), &encoded(&chunk_of(2, 9, 0, 3, 10, 1))],
    );
    put_segment(&mut disk, 2, &[&encoded(&chunk_of(2, 9, 1, 3, 10, 1))]);
    let (wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.batches(), [first]);
    assert!(matches!(recovered.stop, Some(Stop::IncompleteImage { .. })));
    assert_eq!(recovered.files_removed, 1);
    assert_eq!(wal.segments(), [1]);
    assert_eq!(wal.lsn_appended(), 4);
}

#[test]
fn append_from_stores_only_the_records_the_log_lacks() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    let first = batch_at(1, 4, 10, 1);
    wal.append(&first).unwrap();
    let overlapping = batch_at(3, 5, 20, 2);
    wal.append_from(&overlapping, 5).unwrap();
    assert_eq!(wal.lsn_appended(), 7);
    // From its first LSN it is a plain append.
    let next = batch_at(8, 1, 10, 2);
    wal.append_from(&next, 8).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = open(wal.into_disk(), WalOptions::default());
    assert_eq!(
        recovered.batches(),
        [first, overlapping.trimmed(5, 7), next]
    );
}

#[test]
fn append_from_refuses_a_batch_whose_records_do_not_decode() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 2, 10, 1)).unwrap();
    let mut builder = BatchBuilder::new(BatchKind::Redo, 3, 1, 2);
    builder.payload_mut().extend_from_slice(&[0, 0x7f, 0, 0x7f]);
    builder.commit_encoded();
    builder.commit_encoded();
    let broken = builder.seal();
    assert!(matches!(
        wal.append_from(&broken, 3),
        Err(WalError::Undecodable { lsn_from: 3, .. })
    ));
    assert_eq!(wal.lsn_appended(), 2);
    assert_eq!(wal.poisoned(), None);
}

#[test]
#[should_panic(expected = "must continue it")]
fn append_from_that_leaves_a_gap_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 2, 10, 1)).unwrap();
    wal.append_from(&batch_at(2, 4, 10, 1), 4).unwrap();
}

/// A log of batches 1..=2, 3..=5, 6..=6, an image (6, 12] in two chunks and a batch 13..=14,
/// every entry in a segment of its own, synced.
fn log_to_cut(options: WalOptions) -> (Wal<SimDisk>, Vec<Entry>) {
    let (mut wal, _) = open(SimDisk::new(), options);
    let history = vec![
        Entry::Batch(batch_at(1, 2, 400, 1)),
        Entry::Batch(batch_at(3, 3, 300, 1)),
        Entry::Batch(batch_at(6, 1, 900, 1)),
        Entry::Image(chunk_of(6, 12, 0, 2, 900, 1)),
        Entry::Image(chunk_of(6, 12, 1, 2, 900, 1)),
        Entry::Batch(batch_at(13, 2, 400, 1)),
    ];
    for entry in &history {
        match entry {
            Entry::Batch(batch) => wal.append(batch).unwrap(),
            Entry::Image(chunk) => wal.append_chunk(chunk).unwrap(),
        }
    }
    assert_eq!(wal.sync().unwrap(), 14);
    (wal, history)
}

#[test]
fn cut_after_leaves_exactly_what_the_model_says_for_every_lsn() {
    for options in [
        WalOptions {
            segment_bytes_max: 1024,
            ..WalOptions::default()
        },
        WalOptions::default(),
    ] {
        for lsn in 0..=16 {
            let (mut wal, history) = log_to_cut(options);
            let (kept, lsn_end) = model_cut(&history, lsn);
            assert_eq!(wal.lsn_base(), Some(0));
            assert_eq!(wal.cut_after(lsn).unwrap(), lsn_end, "cut at {lsn}");
            let lsn_base = if lsn_end == 0 { None } else { Some(0) };
            assert_eq!(wal.lsn_base(), lsn_base);
            assert_eq!((wal.lsn_durable(), wal.lsn_appended()), (lsn_end, lsn_end));
            let expected_end = match lsn {
                0 => 0,
                6..12 => 6,
                14.. => 14,
                _ => lsn,
            };
            assert_eq!(lsn_end, expected_end, "cut at {lsn}");
            let (mut wal, recovered) = open(wal.into_disk(), options);
            assert_eq!(recovered.entries, kept, "cut at {lsn}");
            assert_eq!(
                recovered.stop, None,
                "a cut leaves nothing for recovery to cut"
            );
            // Appends continue from where the cut left the log (an emptied log, anywhere).
            let next = batch_at(lsn_end + 1, 1, 10, 2);
            wal.append(&next).unwrap();
            assert_eq!(wal.sync().unwrap(), lsn_end + 1);
            let (_, recovered) = open(wal.into_disk(), options);
            assert_eq!(recovered.entries, [kept, vec![Entry::Batch(next)]].concat());
        }
    }
}

#[test]
fn a_cut_through_a_batch_whose_records_do_not_decode_goes_before_it() {
    let mut builder = BatchBuilder::new(BatchKind::Redo, 3, 1, 3);
    builder.payload_mut().extend_from_slice(&[0, 0x7f, 0, 0x7f]);
    builder.commit_encoded();
    builder.commit_encoded();
    let broken = builder.seal();
    for written in [false, true] {
        let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
        wal.append(&batch_at(1, 2, 10, 1)).unwrap();
        wal.append(&broken).unwrap();
        if written {
            wal.sync().unwrap();
        }
        assert_eq!(wal.cut_after(3).unwrap(), 2, "written: {written}");
        let (_, recovered) = open(wal.into_disk(), WalOptions::default());
        assert_eq!(recovered.lsn_last(), Some(2));
    }
}

#[test]
fn cut_after_in_the_buffer_trims_without_touching_the_files() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    let first = batch_at(1, 2, 10, 1);
    wal.append(&first).unwrap();
    wal.sync().unwrap();
    let second = batch_at(3, 4, 10, 1);
    wal.append(&second).unwrap();
    wal.append_chunk(&chunk_of(5, 9, 0, 2, 10, 1)).unwrap();
    assert_eq!(wal.cut_after(4).unwrap(), 4);
    assert_eq!(wal.lsn_durable(), 4);
    assert!(!wal.image_unfinished());
    let (_, recovered) = open(wal.into_disk(), WalOptions::default());
    assert_eq!(recovered.batches(), [first, second.trimmed(3, 4)]);
}

#[test]
fn cut_after_at_or_above_the_end_cuts_nothing_but_an_unfinished_image_above_it() {
    let (mut wal, _) = open(SimDisk::new(), WalOptions::default());
    wal.append(&batch_at(1, 2, 10, 1)).unwrap();
    assert_eq!(wal.cut_after(2).unwrap(), 2);
    assert_eq!(
        wal.cut_after(100).unwrap(),
        2,
        "a cut above the end is a no-op"
    );
    assert_eq!(wal.lsn_durable(), 2, "but it syncs");
    wal.append_chunk(&chunk_of(2, 9, 0, 2, 10, 1)).unwrap();
    assert_eq!(
        wal.cut_after(9).unwrap(),
        2,
        "the image may still finish at 9"
    );
    assert!(wal.image_unfinished());
    assert_eq!(
        wal.cut_after(8).unwrap(),
        2,
        "an image ending above the cut goes"
    );
    assert!(!wal.image_unfinished());
    wal.append(&batch_at(3, 1, 10, 1)).unwrap();
    assert_eq!(wal.sync().unwrap(), 3);
}

#[test]
fn remove_below_never_separates_an_image_from_its_first_chunk() {
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = log_to_cut(options);
    // Segments: 1..=2 | 3..=5 | 6 | chunk 0 | chunk 1 | 13..=14.
    assert_eq!(wal.segments().len(), 6);
    assert_eq!(wal.remove_below(11).unwrap(), 3);
    assert_eq!(wal.segments_lsn_first(), [6, 6, 13]);
    assert_eq!(
        wal.remove_below(100).unwrap(),
        2,
        "the image's two segments go together, the newest stays"
    );
    assert_eq!(wal.segments_lsn_first(), [13]);
    let (_, recovered) = open(wal.into_disk(), options);
    assert_eq!(recovered.lsn_base(), Some(12));
}

#[test]
fn recovery_steps_over_the_rest_of_an_image_whose_first_segments_were_removed() {
    // What a crash leaves when it comes between the removals of an image's two segments.
    let mut disk = SimDisk::new();
    let after = batch_at(13, 2, 10, 1);
    put_segment(&mut disk, 5, &[&encoded(&chunk_of(6, 12, 1, 2, 10, 1))]);
    put_segment(&mut disk, 6, &[after.bytes()]);
    let (mut wal, recovered) = open(disk, WalOptions::default());
    assert_eq!(recovered.entries, [Entry::Batch(after)]);
    assert_eq!((recovered.chunks_skipped, recovered.files_removed), (1, 1));
    assert_eq!((recovered.lsn_base(), recovered.stop), (Some(12), None));
    assert_eq!(wal.segments(), [6]);
    wal.append(&batch_at(15, 1, 10, 1)).unwrap();
    assert_eq!(wal.sync().unwrap(), 15);

    // A skipped image must still be whole from where it is found, and end before anything else.
    let mut disk = SimDisk::new();
    put_segment(
        &mut disk,
        5,
        &[
            &encoded(&chunk_of(6, 12, 1, 3, 10, 1)),
            batch_at(13, 2, 10, 1).bytes(),
        ],
    );
    let (_, recovered) = open(disk, WalOptions::default());
    assert!(recovered.entries.is_empty());
    assert!(matches!(
        recovered.stop,
        Some(Stop::ImageOutOfOrder { why, .. }) if why.contains("skipped image")
    ));
}

#[test]
fn a_failed_cut_poisons() {
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = log_to_cut(options);
    wal.disk_mut().fail_next_sync();
    let Err(WalError::Poisoned { cause }) = wal.cut_after(4) else {
        panic!("a failed cut must poison");
    };
    assert!(cause.contains("syncing log directory"), "{cause}");
    assert_eq!(wal.cut_after(4), Err(WalError::Poisoned { cause }));
}

#[test]
fn the_real_file_system_takes_images_and_cuts() {
    let temp = TempDir::new("cut");
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = Wal::open(FsDisk, &temp.0, options).unwrap();
    let history = vec![
        Entry::Batch(batch_at(1, 2, 400, 1)),
        Entry::Image(chunk_of(1, 8, 0, 2, 900, 1)),
        Entry::Image(chunk_of(1, 8, 1, 2, 900, 1)),
        Entry::Batch(batch_at(9, 3, 250, 1)),
        Entry::Batch(batch_at(12, 2, 400, 1)),
    ];
    for entry in &history {
        match entry {
            Entry::Batch(batch) => wal.append(batch).unwrap(),
            Entry::Image(chunk) => wal.append_chunk(chunk).unwrap(),
        }
    }
    assert_eq!(wal.sync().unwrap(), 13);
    // A straddling batch written in the current segment, then one inside the image.
    assert_eq!(wal.cut_after(10).unwrap(), 10);
    let (kept, _) = model_cut(&history, 10);
    let next = batch_at(11, 1, 10, 2);
    wal.append(&next).unwrap();
    assert_eq!(wal.sync().unwrap(), 11);
    drop(wal);
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.entries, [kept, vec![Entry::Batch(next)]].concat());
    assert_eq!(wal.cut_after(5).unwrap(), 2);
    drop(wal);
    let (_, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.entries, history[..1]);
    assert_eq!(recovered.stop, None);
}

/// Segments and checkpoints hold the node's data: the log's directory (and the parents it
/// creates) and every file in it are its owner's alone, whatever the umask (the mode is set at
/// creation, so no bit the umask leaves could make them readable by others).
#[test]
fn the_real_file_system_keeps_the_log_private() {
    use std::os::unix::fs::PermissionsExt;
    let temp = TempDir::new("private");
    let dir = temp.0.join("node").join("log");
    let options = WalOptions {
        segment_bytes_max: 1024,
        ..WalOptions::default()
    };
    let (mut wal, _) = Wal::open(FsDisk, &dir, options).unwrap();
    for lsn in [1, 3, 5] {
        wal.append(&batch_at(lsn, 2, 400, 1)).unwrap();
    }
    assert_eq!(wal.sync().unwrap(), 6);
    wal.checkpoint_begin(6, 1, 1).unwrap();
    wal.checkpoint_append(&[7; 100]).unwrap();
    assert_eq!(wal.checkpoint_finish(), Ok(6));
    wal.append(&batch_at(7, 1, 10, 1)).unwrap();
    wal.sync().unwrap();
    drop(wal);
    let mode = |path: &Path| std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
    for made in [temp.0.join("node"), dir.clone()] {
        assert_eq!(mode(&made), PRIVATE_DIR_MODE, "{}", made.display());
    }
    let files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    assert!(
        files
            .iter()
            .any(|file| file.to_string_lossy().ends_with(".ckpt")),
        "{files:?}"
    );
    for file in &files {
        assert_eq!(mode(file), PRIVATE_FILE_MODE, "{}", file.display());
    }
}

/// One seeded run of appends (batches, overlapping batches, image chunks), syncs, removals and
/// cuts, stopped after `halt_after_ops` disk operations (if given): every operation after that
/// fails, as if the machine had lost power there.
struct Run {
    disk: SimDisk,
    /// The log's logical history as of the last cut that returned: every entry appended (as
    /// stored: an overlapping batch trimmed), minus what completed cuts removed, including the
    /// chunks of an image left unfinished.
    history: Vec<Entry>,
    /// The LSN the last successful sync or cut reported durable.
    lsn_durable_reported: u64,
    /// The highest LSN the run asked `remove_below` to drop (whether or not the call succeeded).
    lsn_removable: u64,
    /// A cut that began but did not return (the disk halted during it).
    cut_unfinished: Option<CutUnfinished>,
    /// Cuts that returned.
    cuts: usize,
    /// What the log said it had appended at the end.
    lsn_appended: u64,
    /// Disk operations the run did (or tried) after opening the log.
    ops: u64,
    /// The newest checkpoint whose `checkpoint_finish` returned, unless a completed cut
    /// deleted it: recovery must find it or a newer one.
    checkpoint_durable: Option<u64>,
    /// Every checkpoint begun: its LSN, the fingerprint of the history it was taken of, and its
    /// chunk count.
    checkpoints_written: BTreeSet<(u64, u32, usize)>,
    /// Cuts that returned and deleted a checkpoint.
    cuts_deleting_a_checkpoint: usize,
}

/// A cut the crash interrupted. Until `cut_after` returns, the log on disk may be the history
/// before the cut or the history after it (or the one, then the other, as its steps land), so
/// recovery may return a run of either. The durable promise meanwhile covers what both keep:
/// up to the LSN the cut would have left the log at, if a sync had reported that far. Entries
/// above that LSN were being cut, so losing them, durable or not, is what the caller asked for.
struct CutUnfinished {
    before: Vec<Entry>,
    after: Vec<Entry>,
    lsn_durable: u64,
    /// The durable checkpoint once the cut has deleted those above it (before that, the run's):
    /// the only one recovery must find, whichever log it finds.
    checkpoint_after: Option<u64>,
}

impl Run {
    fn check(&self, recovered: &Recovered) -> Result<(), String> {
        let Some(cut) = &self.cut_unfinished else {
            return self.check_state(
                &self.history,
                self.lsn_durable_reported,
                self.checkpoint_durable,
                recovered,
            );
        };
        // The cut deletes the checkpoints above it first, so the log before the cut may come
        // back without them.
        let before = self.check_state(
            &cut.before,
            cut.lsn_durable,
            cut.checkpoint_after,
            recovered,
        );
        let after = self.check_state(&cut.after, cut.lsn_durable, cut.checkpoint_after, recovered);
        match (before, after) {
            (Ok(()), _) | (_, Ok(())) => Ok(()),
            (Err(before), Err(after)) => Err(format!(
                "during a cut, recovery found neither a log before it ({before}) nor one after \
                 it ({after})"
            )),
        }
    }
}

impl Run {
    /// What recovery returned, against `history`: without a checkpoint, recovery's promise for
    /// the log alone ([`check_recovered`]), and no durable checkpoint lost. With one at `c`, the
    /// state a caller rebuilds from it: the checkpoint is of `history` as it stood at `c` (the
    /// history reaches `c` and the chunks are those written for it: never a checkpoint of a
    /// discarded history), no older than the durable one; the log is a contiguous run of
    /// `history` anchored at `c` (empty, or `lsn_base <= c <= lsn_last`); the entries it replays
    /// after `c` continue `history` from `c`; and the state reaches at least `lsn_durable`.
    fn check_state(
        &self,
        history: &[Entry],
        lsn_durable: u64,
        checkpoint_durable: Option<u64>,
        recovered: &Recovered,
    ) -> Result<(), String> {
        let Some(checkpoint) = &recovered.checkpoint else {
            if let Some(lsn) = checkpoint_durable {
                return Err(format!("lost the durable checkpoint at {lsn}"));
            }
            return check_recovered(history, lsn_durable, self.lsn_removable, &recovered.entries);
        };
        let c = checkpoint.lsn;
        if let Some(lsn) = checkpoint_durable
            && c < lsn
        {
            return Err(format!(
                "recovered the checkpoint at {c}, older than the durable one at {lsn}"
            ));
        }
        let (prefix, reached) = model_cut(history, c);
        if reached != c {
            return Err(format!(
                "recovered a checkpoint at {c} of a discarded history: the history stands at \
                 {reached} there"
            ));
        }
        let fingerprint = fingerprint(&prefix);
        let count = checkpoint.chunks().len();
        if !self.checkpoints_written.contains(&(c, fingerprint, count)) {
            return Err(format!(
                "recovered a checkpoint at {c} ({count} chunks) never written of this history: \
                 a discarded history's"
            ));
        }
        for (index, chunk) in checkpoint.chunks().enumerate() {
            if *chunk != checkpoint_chunk(fingerprint, c, index, chunk.len())[..] {
                return Err(format!("chunk {index} of the checkpoint at {c} differs"));
            }
        }
        check_recovered(history, 0, u64::MAX, &recovered.entries)?;
        if let (Some(base), Some(last)) = (recovered.lsn_base(), recovered.lsn_last())
            && (base > c || last < c)
        {
            return Err(format!(
                "the log ({base}, {last}] does not continue the checkpoint at {c}"
            ));
        }
        let expected = entries_after(history, c);
        let replayed = entries_after(recovered.replay(), c);
        if expected.get(..replayed.len()) != Some(&replayed[..]) {
            return Err(format!(
                "the entries replayed after the checkpoint at {c} do not continue the history"
            ));
        }
        let lsn_end = replayed.last().map_or(c, Entry::lsn_last);
        if lsn_end < lsn_durable {
            return Err(format!(
                "lost durable entries: LSN {lsn_durable} was reported durable, the checkpoint \
                 at {c} and the log rebuild only up to {lsn_end}"
            ));
        }
        Ok(())
    }
}

/// The entries of `entries` that end above `lsn`, a batch straddling it trimmed to the records
/// after it: what a caller replays on top of a checkpoint at `lsn`.
fn entries_after(entries: &[Entry], lsn: u64) -> Vec<Entry> {
    let after = entries.iter().filter(|entry| entry.lsn_last() > lsn);
    let trimmed = after.map(|entry| match entry {
        Entry::Batch(batch) if batch.lsn_base() <= lsn => {
            Entry::Batch(batch.trimmed(lsn + 1, batch.lsn_last()))
        }
        _ => entry.clone(),
    });
    trimmed.collect()
}

/// A checksum of the history a checkpoint is taken of (what `model_cut` keeps of it up to the
/// checkpoint's LSN): the crash test's checkpoints hold it, so a checkpoint of a discarded
/// history is told apart from one of the history that replaced it.
fn fingerprint(prefix: &[Entry]) -> u32 {
    prefix.iter().fold(0, |crc, entry| match entry {
        Entry::Batch(batch) => crc32c::crc32c_append(crc, batch.bytes()),
        Entry::Image(chunk) => {
            let mut bytes = Vec::new();
            encode_image_chunk(chunk, &mut bytes);
            crc32c::crc32c_append(crc, &bytes)
        }
    })
}

/// Chunk `index` of the crash test's checkpoint at `lsn` of a history with `fingerprint`.
fn checkpoint_chunk(fingerprint: u32, lsn: u64, index: usize, len: usize) -> Vec<u8> {
    let seed = u64::from(fingerprint) ^ lsn.rotate_left(32) ^ (index as u64).rotate_left(48);
    let mut rng = TestRng(seed);
    (0..len).map(|_| rng.next_u64() as u8).collect()
}

/// Small segments, zeroed ahead a sector or two at a time, so that crashes land on segments
/// with and without preallocated zeros after their entries.
const CRASH_OPTIONS: WalOptions = WalOptions {
    segment_bytes_max: 2048,
    preallocate_bytes: 768,
};

/// A checkpoint the crash test's run has begun and not finished: its LSN, the fingerprint of
/// the history it is of, its chunk count and the chunks appended.
type CheckpointOpen = (u64, u32, usize, usize);

/// The run, with checkpoints among its steps when `checkpoints` is set (without them, exactly
/// the run the checkpoint-free crash test has always made).
fn run_with(seed: u64, halt_after_ops: Option<u64>, checkpoints: bool) -> Run {
    let mut rng = TestRng(seed);
    let (mut wal, _) = open(SimDisk::new(), CRASH_OPTIONS);
    let ops_at_open = wal.disk().ops();
    if let Some(ops) = halt_after_ops {
        wal.disk_mut().halt_after_ops(ops);
    }
    let mut run = Run {
        disk: SimDisk::new(),
        history: Vec::new(),
        lsn_durable_reported: 0,
        lsn_removable: 0,
        cut_unfinished: None,
        cuts: 0,
        lsn_appended: 0,
        ops: 0,
        checkpoint_durable: None,
        checkpoints_written: BTreeSet::new(),
        cuts_deleting_a_checkpoint: 0,
    };
    let mut checkpoint_open: Option<CheckpointOpen> = None;
    let mut view = 1;
    // Every draw depends on the seed and on what the log accepted so far; until the first
    // failed disk operation that is the same in every halted run, and after it every call
    // fails, so every halted run is a prefix of the run that was not halted.
    for _ in 0..rng.between(6, 16) {
        let step = rng.between(0, if checkpoints { 11 } else { 9 });
        let (lsn_end, open) = model_position(&run.history);
        // An append first finishes an unfinished image, as a state transfer would go on.
        if matches!(step, 0..=2 | 6 | 7)
            && let Some((lsn_from, lsn, count, index_next)) = open
        {
            for index in index_next..count {
                let chunk = chunk_of(lsn_from, lsn, index, count, rng.between(0, 900), view);
                if wal.append_chunk(&chunk).is_ok() {
                    run.history.push(Entry::Image(chunk));
                }
            }
        }
        let lsn_end = model_position(&run.history).0.max(lsn_end);
        match step {
            0..=2 => {
                let mut lsn_base = lsn_end + 1;
                for _ in 0..rng.between(1, 3) {
                    let batch = batch_at(lsn_base, rng.between(1, 3), rng.between(1, 700), view);
                    lsn_base = batch.lsn_last() + 1;
                    if wal.append(&batch).is_ok() {
                        run.history.push(Entry::Batch(batch));
                    }
                }
            }
            3 | 4 => {
                if let Ok(lsn) = wal.sync() {
                    run.lsn_durable_reported = lsn;
                }
            }
            // Written to the page cache, not synced: nothing more is reported durable, and
            // the next sync (or a roll to the next segment, or a cut) must sync it all.
            9 => {
                let _ = wal.write();
            }
            5 => {
                // A checkpoint covers the log up to about the durable LSN.
                let mut lsn = run
                    .lsn_durable_reported
                    .saturating_sub(rng.between(0, 3) as u64);
                // With checkpoints, only what a durable one covers: the log is the state's
                // only record of the rest.
                if checkpoints {
                    lsn = lsn.min(run.checkpoint_durable.unwrap_or(0));
                }
                run.lsn_removable = run.lsn_removable.max(lsn);
                let _ = wal.remove_below(lsn);
            }
            6 => {
                // A batch that overlaps the log's end by up to two records.
                let overlap = rng.between(0, 2).min(lsn_end.saturating_sub(1) as usize) as u64;
                let lsn_base = lsn_end + 1 - overlap;
                let count = overlap as usize + rng.between(1, 2);
                let batch = batch_at(lsn_base, count, rng.between(1, 500), view);
                if wal.append_from(&batch, lsn_end + 1).is_ok() {
                    let stored = batch.trimmed(lsn_end + 1, batch.lsn_last());
                    run.history.push(Entry::Batch(stored));
                }
            }
            7 => {
                // An image of what changed after a point at or a little below the log's end,
                // as of a little above it; one time in three only some of its chunks arrive.
                let lsn_from = lsn_end.saturating_sub(rng.between(0, 3) as u64);
                let lsn = lsn_end + rng.between(1, 4) as u64;
                let count = rng.between(1, 3) as u32;
                let arrived = if rng.between(0, 2) == 0 {
                    rng.between(1, count as usize) as u32
                } else {
                    count
                };
                for index in 0..arrived {
                    let chunk = chunk_of(lsn_from, lsn, index, count, rng.between(0, 1200), view);
                    if wal.append_chunk(&chunk).is_ok() {
                        run.history.push(Entry::Image(chunk));
                    }
                }
            }
            10 | 11 => checkpoint_step(&mut wal, &mut run, &mut rng, &mut checkpoint_open),
            _ => {
                // A view change rewinds the member: mostly a little below its end, sometimes
                // at or above it.
                let lsn = if rng.between(0, 4) == 0 {
                    lsn_end + rng.between(0, 2) as u64
                } else {
                    lsn_end.saturating_sub(rng.between(0, 8) as u64)
                };
                // The log holds the history's newest entries; remove_below took the others.
                let held = run.history.len() - wal.entries_held();
                let (kept, lsn_after) = model_cut(&run.history[held..], lsn);
                let after = [&run.history[..held], &kept[..]].concat();
                let poisoned_before = wal.poisoned().is_some();
                let checkpoint_after = run.checkpoint_durable.filter(|&c| c <= lsn);
                match wal.cut_after(lsn) {
                    Ok(lsn_returned) => {
                        if checkpoint_after != run.checkpoint_durable {
                            run.cuts_deleting_a_checkpoint += 1;
                        }
                        run.checkpoint_durable = checkpoint_after;
                        checkpoint_open = checkpoint_open.filter(|open| open.0 <= lsn);
                        let history: Vec<String> = run.history.iter().map(describe).collect();
                        assert_eq!(
                            lsn_returned, lsn_after,
                            "seed {seed}: cut at {lsn} of {history:?}"
                        );
                        assert_eq!(wal.lsn_durable(), lsn_after);
                        run.history = after;
                        run.lsn_durable_reported = lsn_after;
                        run.cuts += 1;
                    }
                    Err(_) if !poisoned_before => {
                        run.cut_unfinished = Some(CutUnfinished {
                            lsn_durable: run.lsn_durable_reported.min(lsn_after),
                            before: run.history.clone(),
                            after,
                            checkpoint_after,
                        });
                    }
                    Err(_) => {}
                }
                view += 1;
            }
        }
    }
    if let Ok(lsn) = wal.sync() {
        run.lsn_durable_reported = lsn;
    }
    run.lsn_appended = wal.lsn_appended();
    run.ops = wal.disk().ops() - ops_at_open;
    run.disk = wal.into_disk();
    run
}

/// The crash test's checkpoint step: finishes (or, one time in four, abandons) the checkpoint
/// begun earlier, if there is one; else begins one of the history as it stands at a point at
/// or a little below the log's end, appends its chunks and, three times in four, finishes it.
fn checkpoint_step(
    wal: &mut Wal<SimDisk>,
    run: &mut Run,
    rng: &mut TestRng,
    checkpoint_open: &mut Option<CheckpointOpen>,
) {
    // A poisoned log refuses everything; the run only goes on to show that.
    if wal.poisoned().is_some() {
        return;
    }
    let (lsn, fingerprint, count, mut appended) = match checkpoint_open.take() {
        Some(open) if rng.between(0, 3) == 0 => {
            let _ = wal.checkpoint_abandon();
            assert!(open.0 > 0);
            return;
        }
        Some(open) => open,
        None => {
            let target = model_position(&run.history)
                .0
                .saturating_sub(rng.between(0, 4) as u64);
            // A checkpoint stands where the history has a state: at the end of a complete
            // entry, or inside a batch.
            let (prefix, lsn) = model_cut(&run.history, target);
            let newest = run.checkpoint_durable.max(wal.lsn_checkpoint());
            if lsn == 0 || newest.is_some_and(|newest| newest >= lsn) {
                return;
            }
            let fingerprint = fingerprint(&prefix);
            let count = rng.between(0, 3);
            if wal.checkpoint_begin(lsn, 7, count as u32).is_err() {
                return;
            }
            run.checkpoints_written.insert((lsn, fingerprint, count));
            (lsn, fingerprint, count, 0)
        }
    };
    let leave_open = rng.between(0, 3) == 0;
    let stop_at = if leave_open {
        rng.between(appended, count)
    } else {
        count
    };
    while appended < stop_at {
        let chunk = checkpoint_chunk(fingerprint, lsn, appended, rng.between(8, 1500));
        if wal.checkpoint_append(&chunk).is_err() {
            return;
        }
        appended += 1;
    }
    if leave_open {
        *checkpoint_open = Some((lsn, fingerprint, count, appended));
        return;
    }
    if wal.checkpoint_finish() == Ok(lsn) {
        run.checkpoint_durable = Some(lsn);
        run.lsn_removable = run.lsn_removable.max(lsn);
    }
}

/// What the crash test saw, to show it reached the cases it is meant to.
#[derive(Debug, Default)]
struct Coverage {
    crash_points: usize,
    /// Crash points of recovery itself, each followed by another recovery.
    recovery_crash_points: usize,
    recoveries_that_cut: usize,
    /// Recoveries that found preallocated zeros after the last entry.
    recoveries_that_found_zeros: usize,
    /// Crashes after which recovery found less than the history holds (unsynced entries).
    unsynced_entries_lost: usize,
    /// Crashes after which recovery found more than the syncs had reported durable (unsynced
    /// bytes that happened to reach the disk): the prefix may end anywhere past the durable LSN.
    kept_beyond_durable: usize,
    /// Crashes after which the log began after LSN 0: `remove_below` had removed segments, or
    /// the log began with an image or after a cut that emptied it.
    started_after_base_zero: usize,
    /// Crashes after which recovery returned at least one image.
    images_recovered: usize,
    /// Crashes after at least one cut had returned.
    after_a_cut: usize,
    /// Crashes in the middle of a cut, and those of them whose recovery found the log as the
    /// cut leaves it (and not as it was before).
    during_a_cut: usize,
    during_a_cut_found_after: usize,
    /// Chunks recovery stepped over: an image's later chunks left by a crash among the
    /// removals of its segments.
    chunks_skipped: usize,
    stops: BTreeMap<&'static str, usize>,
    /// Crashes after which recovery returned a checkpoint; those where it also dropped a log
    /// that did not continue it; those where the log replays from a batch straddling it; and
    /// those where it removed checkpoint files (temporary, torn or older).
    checkpoints_recovered: usize,
    logs_dropped_for_a_checkpoint: usize,
    replays_from_a_straddling_batch: usize,
    checkpoint_files_removed: usize,
    /// Crashes after a cut that deleted a checkpoint had returned.
    after_a_cut_deleting_a_checkpoint: usize,
}

fn stop_name(stop: &Option<Stop>) -> &'static str {
    match stop {
        None => "none",
        Some(Stop::TornSegmentHeader { .. }) => "torn segment header",
        Some(Stop::MisnamedSegment { .. }) => "misnamed segment",
        Some(Stop::TornFrame { .. }) => "torn frame",
        Some(Stop::CorruptBatch { .. }) => "corrupt batch",
        Some(Stop::CorruptImage { .. }) => "corrupt image",
        Some(Stop::NotContinuing { .. }) => "not continuing",
        Some(Stop::ImageOutOfOrder { .. }) => "image out of order",
        Some(Stop::IncompleteImage { .. }) => "incomplete image",
    }
}

/// Crashes the seed's run after every disk operation, with the crash's own draws, and checks
/// recovery's promise each time, then that the recovered log takes more batches.
fn check_crashes(seed: u64, coverage: &mut Coverage) -> Result<(), String> {
    check_crashes_with(seed, false, coverage)
}

/// [`check_crashes`] of the run with or without checkpoints.
fn check_crashes_with(seed: u64, checkpoints: bool, coverage: &mut Coverage) -> Result<(), String> {
    let ops = run_with(seed, None, checkpoints).ops;
    for halt in 0..=ops {
        let run = run_with(seed, Some(halt), checkpoints);
        let mut disk = run.disk.clone();
        disk.crash(seed.wrapping_mul(1_000_003).wrapping_add(halt));
        let context = |error: String| format!("seed {seed}, crash after op {halt}: {error}");
        let (mut wal, recovered) = Wal::open(disk.clone(), dir(), CRASH_OPTIONS)
            .map_err(|error| context(error.to_string()))?;
        run.check(&recovered).map_err(context)?;
        if run.lsn_durable_reported > run.lsn_appended {
            return Err(context(format!(
                "LSN {} was reported durable, beyond the last complete entry appended ({})",
                run.lsn_durable_reported, run.lsn_appended
            )));
        }
        let recovery_crash_seeds = if checkpoints {
            CHECKPOINT_RECOVERY_CRASH_SEEDS
        } else {
            RECOVERY_CRASH_SEEDS
        };
        if seed < recovery_crash_seeds {
            check_crashes_during_recovery(seed, halt, &disk, &run, coverage).map_err(context)?;
        }
        coverage.crash_points += 1;
        coverage.recoveries_that_cut += usize::from(recovered.bytes_cut > 0);
        coverage.recoveries_that_found_zeros += usize::from(recovered.bytes_zeroed > 0);
        *coverage
            .stops
            .entry(stop_name(&recovered.stop))
            .or_default() += 1;
        coverage.unsynced_entries_lost += usize::from(recovered.entries.len() < run.history.len());
        let lsn_recovered = recovered.lsn_last().unwrap_or(0);
        coverage.kept_beyond_durable += usize::from(lsn_recovered > run.lsn_durable_reported);
        coverage.started_after_base_zero += usize::from(recovered.lsn_base() > Some(0));
        coverage.images_recovered +=
            usize::from(recovered.entries.iter().any(|e| e.as_image().is_some()));
        coverage.after_a_cut += usize::from(run.cuts > 0);
        coverage.chunks_skipped += recovered.chunks_skipped;
        if let Some(checkpoint) = &recovered.checkpoint {
            coverage.checkpoints_recovered += 1;
            coverage.logs_dropped_for_a_checkpoint += usize::from(recovered.entries_dropped > 0);
            coverage.replays_from_a_straddling_batch += usize::from(
                recovered
                    .replay()
                    .first()
                    .and_then(Entry::as_batch)
                    .is_some_and(|batch| batch.lsn_base() <= checkpoint.lsn),
            );
        }
        coverage.checkpoint_files_removed += usize::from(recovered.checkpoint_files_removed > 0);
        coverage.after_a_cut_deleting_a_checkpoint +=
            usize::from(run.cuts_deleting_a_checkpoint > 0);
        if let Some(cut) = &run.cut_unfinished {
            coverage.during_a_cut += 1;
            let before = check_recovered(&cut.before, 0, run.lsn_removable, &recovered.entries);
            coverage.during_a_cut_found_after += usize::from(before.is_err());
        }
        // The recovered log continues: two more batches, synced, come back after it (and after
        // the checkpoint, which stays).
        let lsn_next = recovered
            .lsn_last()
            .max(recovered.lsn_checkpoint())
            .map_or(1, |lsn| lsn + 1);
        let more = [
            batch_at(lsn_next, 1, 100, 99),
            batch_at(lsn_next + 1, 2, 600, 99),
        ];
        for batch in &more {
            wal.append(batch)
                .map_err(|error| context(error.to_string()))?;
        }
        wal.sync().map_err(|error| context(error.to_string()))?;
        let (_, reopened) = Wal::open(wal.into_disk(), dir(), CRASH_OPTIONS)
            .map_err(|error| context(error.to_string()))?;
        if reopened.checkpoint != recovered.checkpoint {
            return Err(context("reopening found another checkpoint".to_owned()));
        }
        let expected = [recovered.entries, as_entries(&more)].concat();
        if reopened.entries != expected || reopened.stop.is_some() {
            return Err(context(format!(
                "after recovery and two more batches, reopening found {} entries (stop {:?}), \
                 expected {}",
                reopened.entries.len(),
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
        run.check(&recovered).map_err(context)?;
        coverage.recovery_crash_points += 1;
    }
    Ok(())
}

/// Seeds of the crash-consistency test: each crashes its run after every disk operation.
const CRASH_SEEDS: u64 = 500;

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
    assert!(coverage.recoveries_that_found_zeros > 100, "{coverage:?}");
    assert!(coverage.recovery_crash_points > 1000, "{coverage:?}");
    assert!(coverage.kept_beyond_durable > 100, "{coverage:?}");
    assert!(coverage.started_after_base_zero > 100, "{coverage:?}");
    assert!(coverage.images_recovered > 100, "{coverage:?}");
    assert!(coverage.after_a_cut > 100, "{coverage:?}");
    assert!(coverage.chunks_skipped > 5, "{coverage:?}");
    assert!(coverage.during_a_cut > 100, "{coverage:?}");
    // Only a cut's last steps make the log differ from a prefix of the one before it.
    assert!(coverage.during_a_cut_found_after > 5, "{coverage:?}");
    for stop in [
        "none",
        "torn segment header",
        "torn frame",
        "corrupt batch",
        "incomplete image",
    ] {
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
    assert!(error.contains("lost durable"), "{error}");
}

#[test]
fn planted_remove_with_one_directory_sync_is_caught_by_the_crash_test() {
    let error = caught_by_the_crash_test(Bug::RemoveWithOneDirectorySync);
    assert!(error.contains("lost"), "{error}");
}

#[test]
fn planted_cut_that_truncates_before_writing_the_prefix_is_caught_by_the_crash_test() {
    let error = caught_by_the_crash_test(Bug::CutTruncatesBeforeWritingPrefix);
    assert!(error.contains("lost durable"), "{error}");
}

#[test]
fn planted_image_durable_before_its_last_chunk_is_caught_by_the_crash_test() {
    let error = caught_by_the_crash_test(Bug::ImageDurableBeforeLastChunk);
    assert!(error.contains("lost durable"), "{error}");
}

/// Seeds of the crash-consistency test with checkpoints, and those of them whose recoveries are
/// crashed too.
const CHECKPOINT_CRASH_SEEDS: u64 = 400;
const CHECKPOINT_RECOVERY_CRASH_SEEDS: u64 = 60;

/// The crash test again, with checkpoints among the steps (begun, appended, finished, left
/// unfinished or abandoned; cut below; made to cover what `remove_below` drops): after every
/// crash, the checkpoint and the entries after it rebuild a prefix of the history that holds
/// everything reported durable, never a checkpoint of a discarded history.
#[test]
fn recovery_after_a_crash_with_checkpoints_rebuilds_a_prefix_holding_all_durable() {
    let mut coverage = Coverage::default();
    for seed in 0..CHECKPOINT_CRASH_SEEDS {
        if let Err(error) = check_crashes_with(seed, true, &mut coverage) {
            panic!("{error}");
        }
    }
    eprintln!("{coverage:?}");
    assert!(
        coverage.crash_points > 20 * CHECKPOINT_CRASH_SEEDS as usize,
        "{coverage:?}"
    );
    assert!(coverage.recovery_crash_points > 1000, "{coverage:?}");
    assert!(coverage.checkpoints_recovered > 1000, "{coverage:?}");
    assert!(coverage.logs_dropped_for_a_checkpoint > 20, "{coverage:?}");
    assert!(
        coverage.replays_from_a_straddling_batch > 20,
        "{coverage:?}"
    );
    assert!(coverage.checkpoint_files_removed > 100, "{coverage:?}");
    assert!(
        coverage.after_a_cut_deleting_a_checkpoint > 50,
        "{coverage:?}"
    );
    assert!(coverage.during_a_cut > 100, "{coverage:?}");
    assert!(coverage.started_after_base_zero > 100, "{coverage:?}");
}

/// The checkpoint crash test's first complaint with `bug` planted.
fn caught_by_the_checkpoint_crash_test(bug: Bug) -> String {
    let _planted = plant(bug);
    let mut coverage = Coverage::default();
    let caught = (0..CHECKPOINT_CRASH_SEEDS)
        .find_map(|seed| check_crashes_with(seed, true, &mut coverage).err());
    let error = caught.expect("the planted bug is caught");
    eprintln!("caught: {error}");
    error
}

#[test]
fn planted_checkpoint_renamed_before_sync_is_caught_by_the_crash_test() {
    let error = caught_by_the_checkpoint_crash_test(Bug::CheckpointRenamedBeforeSync);
    assert!(error.contains("lost"), "{error}");
}

#[test]
fn planted_cut_that_keeps_a_checkpoint_is_caught_by_the_crash_test() {
    let error = caught_by_the_checkpoint_crash_test(Bug::CutKeepsCheckpoint);
    assert!(error.contains("discarded history"), "{error}");
}

/// `count` chunks of a checkpoint, of sizes between 1 and about 4 KiB (every 50th a whole
/// 64-page transfer chunk, 257 KiB), each of bytes that depend on its index.
fn checkpoint_chunks(count: usize) -> Vec<Vec<u8>> {
    let mut rng = TestRng(count as u64);
    let chunk = |index: usize, rng: &mut TestRng| {
        let len = if index % 50 == 7 {
            64 * (4 + 8 + 4096)
        } else {
            rng.between(1, 4000)
        };
        (0..len).map(|at| (index * 31 + at) as u8).collect()
    };
    (0..count).map(|index| chunk(index, &mut rng)).collect()
}

fn write_checkpoint(wal: &mut Wal<SimDisk>, lsn: u64, chunks: &[Vec<u8>]) {
    wal.checkpoint_begin(lsn, 7, chunks.len() as u32).unwrap();
    for chunk in chunks {
        wal.checkpoint_append(chunk).unwrap();
    }
    assert_eq!(wal.checkpoint_finish(), Ok(lsn));
}

fn as_recovered(lsn: u64, chunks: &[Vec<u8>]) -> Option<CheckpointRecovered> {
    let chunks: Vec<&[u8]> = chunks.iter().map(|chunk| &chunk[..]).collect();
    Some(CheckpointRecovered::from_chunks(lsn, 7, &chunks))
}

fn checkpoint_files(disk: &SimDisk) -> Vec<String> {
    let mut disk = disk.clone();
    let mut names = disk.list(dir()).unwrap();
    names.retain(|name| name.starts_with("ckpt-"));
    names.sort();
    names
}

#[test]
fn a_checkpoint_of_many_chunks_round_trips() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut batches = Batches::starting_at(1);
    let appended: Vec<_> = (0..10).map(|_| batches.next(2, 100)).collect();
    appended.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    let chunks = checkpoint_chunks(1500);
    let syncs_before = wal.disk().syncs();
    write_checkpoint(&mut wal, 20, &chunks);
    assert_eq!(
        wal.disk().syncs() - syncs_before,
        1,
        "one sync for the whole file"
    );
    assert_eq!(wal.lsn_checkpoint(), Some(20));
    assert_eq!(
        checkpoint_files(wal.disk()),
        ["ckpt-00000000000000000020.ckpt"]
    );
    let (wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.checkpoint, as_recovered(20, &chunks));
    assert_eq!(recovered.checkpoint_files_removed, 0);
    assert_eq!(wal.lsn_checkpoint(), Some(20));
    // The log ends at the checkpoint: it is kept (its newest segment), and nothing is replayed.
    assert_eq!(recovered.lsn_last(), Some(20));
    assert!(recovered.replay().is_empty());
    // A checkpoint without chunks (no page changed since the initial load) is a checkpoint.
    let (mut wal, _) = open(wal.into_disk(), small_segments());
    wal.append(&batches.next(1, 10)).unwrap();
    write_checkpoint(&mut wal, 21, &[]);
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.checkpoint, as_recovered(21, &[]));
}

#[test]
fn recovery_picks_the_newest_complete_checkpoint_and_removes_the_others() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut batches = Batches::starting_at(1);
    (0..5).for_each(|_| wal.append(&batches.next(2, 100)).unwrap());
    wal.sync().unwrap();
    let chunks = checkpoint_chunks(3);
    write_checkpoint(&mut wal, 6, &chunks);
    // A checkpoint begun and never finished: its temporary file is left.
    wal.checkpoint_begin(8, 7, 2).unwrap();
    wal.checkpoint_append(&[1; 100]).unwrap();
    let mut disk = wal.into_disk();
    // A complete-looking newer checkpoint, torn (damaged after it was written), and an older
    // one that a crash kept.
    let torn = {
        let mut other = SimDisk::new();
        let (mut wal, _) = open(other.clone(), small_segments());
        write_checkpoint(&mut wal, 9, &checkpoint_chunks(2));
        other = wal.into_disk();
        let bytes = other.contents(&checkpoint_path(dir(), 9, false)).unwrap();
        bytes[..bytes.len() - 3].to_vec()
    };
    disk.put_durable(&checkpoint_path(dir(), 9, false), &torn);
    disk.put_durable(&checkpoint_path(dir(), 2, false), b"an older checkpoint");
    let (_, recovered) = open(disk, small_segments());
    assert_eq!(recovered.checkpoint, as_recovered(6, &chunks));
    assert_eq!(recovered.checkpoint_files_removed, 3);
    assert_eq!(recovered.lsn_last(), Some(10));
    assert_eq!(recovered.replay().len(), 2, "batches 7..=8 and 9..=10");
}

#[test]
fn a_torn_checkpoint_without_an_older_one_leaves_no_checkpoint() {
    let mut disk = SimDisk::new();
    disk.put_durable(&checkpoint_path(dir(), 4, false), b"TCKP, then nothing");
    let (wal, recovered) = open(disk, small_segments());
    assert_eq!(recovered.checkpoint, None);
    assert_eq!(recovered.checkpoint_files_removed, 1);
    assert_eq!(wal.lsn_checkpoint(), None);
    assert!(checkpoint_files(wal.disk()).is_empty());
}

#[test]
fn remove_below_after_a_checkpoint_keeps_the_log_replayable_from_it() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut batches = Batches::starting_at(1);
    let appended: Vec<_> = (0..40).map(|_| batches.next(3, 300)).collect();
    appended.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    let segments_before = wal.segments().len();
    // LSN 62 lies inside the batch 61..=63.
    write_checkpoint(&mut wal, 62, &checkpoint_chunks(4));
    assert!(
        wal.segments().len() < segments_before,
        "the covered segments went"
    );
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_checkpoint(), Some(62));
    assert!(
        recovered.lsn_base().unwrap() <= 62,
        "the log is anchored at the checkpoint"
    );
    assert!(
        recovered.lsn_base().unwrap() > 0,
        "segments below the checkpoint are gone"
    );
    let replay = recovered.replay();
    let first = replay[0].as_batch().unwrap();
    assert_eq!(
        (first.lsn_base(), first.lsn_last()),
        (61, 63),
        "straddles the checkpoint"
    );
    assert_eq!(as_entries(&appended[20..]), replay);
}

#[test]
fn a_log_that_ends_before_the_checkpoint_is_emptied_and_continues_from_it() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut batches = Batches::starting_at(1);
    (0..4).for_each(|_| wal.append(&batches.next(2, 100)).unwrap());
    wal.sync().unwrap();
    // The node checkpoints records it applied before the log holds them.
    write_checkpoint(&mut wal, 12, &checkpoint_chunks(2));
    let (mut wal, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_checkpoint(), Some(12));
    assert!(recovered.entries.is_empty());
    assert_eq!(recovered.entries_dropped, 4);
    assert!(recovered.files_removed > 0);
    // The log continues from the checkpoint.
    let next = batch_at(13, 2, 50, 1);
    wal.append(&next).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_checkpoint(), Some(12));
    assert_eq!(recovered.entries, as_entries(&[next]));
    assert_eq!(recovered.entries_dropped, 0);
}

#[test]
fn a_log_that_begins_after_the_checkpoint_is_emptied() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    write_checkpoint(&mut wal, 5, &checkpoint_chunks(1));
    // An empty log takes any first entry; one that leaves a gap after the checkpoint cannot
    // be replayed on it.
    wal.append(&batch_at(9, 2, 50, 1)).unwrap();
    wal.sync().unwrap();
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_checkpoint(), Some(5));
    assert!(recovered.entries.is_empty());
    assert_eq!(recovered.entries_dropped, 1);
}

#[test]
fn cut_after_below_a_checkpoint_deletes_it_and_abandons_one_above() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    let mut batches = Batches::starting_at(1);
    (0..15).for_each(|_| wal.append(&batches.next(2, 200)).unwrap());
    wal.sync().unwrap();
    write_checkpoint(&mut wal, 10, &checkpoint_chunks(2));
    write_checkpoint(&mut wal, 20, &checkpoint_chunks(2));
    assert_eq!(
        checkpoint_files(wal.disk()),
        ["ckpt-00000000000000000020.ckpt"]
    );
    wal.checkpoint_begin(24, 7, 1).unwrap();
    // A cut at or above the checkpoint keeps it, and the one being written below the cut.
    assert_eq!(wal.cut_after(26).unwrap(), 26);
    assert_eq!(wal.lsn_checkpoint(), Some(20));
    assert_eq!(wal.lsn_checkpoint_writing(), Some(24));
    // Below both: the checkpoint is deleted and the one being written abandoned.
    assert_eq!(wal.cut_after(19).unwrap(), 19);
    assert_eq!(wal.lsn_checkpoint(), None);
    assert_eq!(wal.lsn_checkpoint_writing(), None);
    assert!(checkpoint_files(wal.disk()).is_empty());
    // Durably: a crash now brings neither back.
    for seed in 0..16 {
        let mut crashed = wal.disk().clone();
        crashed.crash(seed);
        let (_, recovered) = open(crashed, small_segments());
        assert_eq!(recovered.checkpoint, None, "seed {seed}");
        assert_eq!(recovered.lsn_last(), Some(19), "seed {seed}");
    }
    // A new checkpoint may stand below the deleted one.
    write_checkpoint(&mut wal, 18, &checkpoint_chunks(1));
    assert_eq!(wal.lsn_checkpoint(), Some(18));
}

#[test]
fn checkpoint_abandon_removes_the_temporary_file() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    wal.append(&batch_at(1, 2, 10, 1)).unwrap();
    wal.checkpoint_begin(2, 7, 3).unwrap();
    wal.checkpoint_append(&[7; 10]).unwrap();
    assert_eq!(
        checkpoint_files(wal.disk()),
        ["ckpt-00000000000000000002.tmp"]
    );
    wal.checkpoint_abandon().unwrap();
    assert!(checkpoint_files(wal.disk()).is_empty());
    assert_eq!(wal.lsn_checkpoint(), None);
    wal.checkpoint_abandon().unwrap();
    // The same checkpoint may be begun again.
    write_checkpoint(&mut wal, 2, &checkpoint_chunks(3));
}

#[test]
#[should_panic(expected = "already being written")]
fn beginning_a_second_checkpoint_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    wal.checkpoint_begin(3, 7, 1).unwrap();
    let _ = wal.checkpoint_begin(4, 7, 1);
}

#[test]
#[should_panic(expected = "every chunk")]
fn finishing_a_checkpoint_before_its_last_chunk_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    wal.checkpoint_begin(3, 7, 2).unwrap();
    wal.checkpoint_append(&[1; 10]).unwrap();
    let _ = wal.checkpoint_finish();
}

#[test]
#[should_panic(expected = "above the newest")]
fn a_checkpoint_below_the_newest_is_a_bug() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    write_checkpoint(&mut wal, 5, &[]);
    let _ = wal.checkpoint_begin(5, 7, 1);
}

#[test]
fn a_failed_checkpoint_sync_poisons_and_leaves_the_older_checkpoint() {
    let (mut wal, _) = open(SimDisk::new(), small_segments());
    (0..3).for_each(|index| wal.append(&batch_at(index * 2 + 1, 2, 10, 1)).unwrap());
    wal.sync().unwrap();
    write_checkpoint(&mut wal, 2, &checkpoint_chunks(1));
    wal.checkpoint_begin(4, 7, 1).unwrap();
    wal.checkpoint_append(&[3; 30]).unwrap();
    wal.disk_mut().fail_next_sync();
    assert!(matches!(
        wal.checkpoint_finish(),
        Err(WalError::Poisoned { .. })
    ));
    assert!(wal.poisoned().is_some());
    assert_eq!(wal.lsn_checkpoint(), Some(2));
    assert!(matches!(wal.sync(), Err(WalError::Poisoned { .. })));
    let (_, recovered) = open(wal.into_disk(), small_segments());
    assert_eq!(recovered.lsn_checkpoint(), Some(2));
    assert_eq!(recovered.checkpoint_files_removed, 1, "the temporary file");
}

#[test]
fn a_crash_during_a_rename_leaves_either_name() {
    let path_from = dir().join("from");
    let path_to = dir().join("to");
    let mut names_seen = BTreeSet::new();
    for seed in 0..32 {
        let mut disk = SimDisk::new();
        disk.create_dir_all(dir()).unwrap();
        let mut file = disk.create(&path_from).unwrap();
        disk.append(&mut file, b"bytes").unwrap();
        disk.sync(&mut file).unwrap();
        disk.sync_dir(dir()).unwrap();
        disk.rename(&path_from, &path_to).unwrap();
        assert_eq!(disk.contents(&path_to), Some(b"bytes".to_vec()));
        assert_eq!(disk.contents(&path_from), None);
        let mut synced = disk.clone();
        synced.sync_dir(dir()).unwrap();
        disk.crash(seed);
        let names: Vec<String> = disk.list(dir()).unwrap();
        assert_eq!(names.len(), 1, "seed {seed}: {names:?}");
        assert_eq!(
            disk.contents(&dir().join(&names[0])),
            Some(b"bytes".to_vec())
        );
        names_seen.insert(names[0].clone());
        synced.crash(seed);
        assert_eq!(synced.list(dir()).unwrap(), ["to"], "seed {seed}");
    }
    assert_eq!(names_seen.len(), 2, "both names occur: {names_seen:?}");
}

#[test]
fn the_real_file_system_takes_a_checkpoint() {
    let temp = TempDir::new("checkpoint");
    let options = small_segments();
    let (mut wal, _) = Wal::open(FsDisk, &temp.0, options).unwrap();
    let mut batches = Batches::starting_at(1);
    let appended: Vec<_> = (0..30).map(|_| batches.next(2, 300)).collect();
    appended.iter().for_each(|batch| wal.append(batch).unwrap());
    wal.sync().unwrap();
    let chunks = checkpoint_chunks(60);
    wal.checkpoint_begin(41, 7, chunks.len() as u32).unwrap();
    chunks
        .iter()
        .for_each(|chunk| wal.checkpoint_append(chunk).unwrap());
    assert_eq!(wal.checkpoint_finish(), Ok(41));
    drop(wal);
    let (mut wal, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.checkpoint, as_recovered(41, &chunks));
    assert_eq!(as_entries(&appended[20..]), recovered.replay());
    // The segments below the checkpoint are gone, so a cut below it empties the log too.
    assert_eq!(wal.cut_after(30).unwrap(), 0);
    drop(wal);
    let (_, recovered) = Wal::open(FsDisk, &temp.0, options).unwrap();
    assert_eq!(recovered.checkpoint, None);
    let names: Vec<String> = std::fs::read_dir(&temp.0)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .filter(|name| name.starts_with("ckpt-"))
        .collect();
    assert!(names.is_empty(), "{names:?}");
}

#[test]
fn a_checkpoint_of_another_format_version_is_refused_not_removed() {
    let mut bytes = Vec::new();
    crate::checkpoint::encode_checkpoint_header(7, 7, 0, &mut bytes);
    bytes[4..6].copy_from_slice(&2u16.to_le_bytes());
    let crc = crc32c::crc32c(&bytes[..32]);
    bytes[32..36].copy_from_slice(&crc.to_le_bytes());
    crate::checkpoint::encode_checkpoint_trailer(7, 0, &mut bytes);
    let path = checkpoint_path(dir(), 7, false);
    let mut disk = SimDisk::new();
    disk.put_durable(&path, &bytes);
    let error = Wal::open(&mut disk, dir(), small_segments()).unwrap_err();
    assert!(
        matches!(&error, WalError::CheckpointVersion { found: 2, .. }),
        "{error}"
    );
    assert_eq!(disk.contents(&path), Some(bytes.to_vec()));
}
