//! Fuzz targets (docs/fuzzing.md): recovery of corrupted and arbitrary files through
//! [`Wal::open`] on a [`SimDisk`], `TANDEM_FUZZ_CASES` cases each (a few seconds' worth in
//! a debug build by default).
//!
//! A log of batches, images and a checkpoint is written, its files are damaged (bytes
//! flipped, cut or inserted, files removed, copied under another segment's name, swapped,
//! strays added), and recovery must never panic, give back only a contiguous run of what was
//! written (never an entry or a checkpoint that was not), leave files that recover the same
//! again, and take the next entry. Files made up from scratch (arbitrary bytes, or valid
//! headers and frames around arbitrary payloads) must recover without a panic too.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::Index;
use proptest::test_runner::TestCaseError;
use tandem_redo::SealedBatch;

use crate::bugs::{Bug, plant};
use crate::checkpoint::checkpoint_name;
use crate::entry::Position;
use crate::format::{
    FRAME_HEADER_LEN, FRAME_PAYLOAD_MIN, SEGMENT_HEADER_LEN, decode_frame_len, encode_frame,
    encode_image_chunk, encode_segment_header, segment_name,
};
use crate::{
    CheckpointRecovered, Disk, Entry, ImageChunk, Recovered, SimDisk, Wal, WalError, WalOptions,
};

const DIR: &str = "/node/wal";
/// The view every entry is written in.
const VIEW: u64 = 7;

use tandem_fuzzkit::config as fuzz_config;

/// Cases a recovery fuzz target runs by default.
const WAL_FUZZ_CASES: u32 = 32768;

fn dir() -> &'static Path {
    Path::new(DIR)
}

/// Segments small enough that a log of a few entries spans several.
fn options() -> WalOptions {
    WalOptions {
        segment_bytes_max: 2048,
        preallocate_bytes: 512,
    }
}

/// What the written log holds next.
#[derive(Clone, Debug)]
enum Step {
    Batch {
        records: usize,
        bytes_each: usize,
    },
    Image {
        lsns: u64,
        chunks: u32,
        pages: usize,
    },
    /// A checkpoint at the log's LSN, in `chunks` chunks of `bytes` bytes (the first only).
    Checkpoint {
        chunks: u32,
        bytes: usize,
    },
}

fn steps() -> impl Strategy<Value = Vec<Step>> {
    let step = prop_oneof![
        6 => (1..4usize, 1..400usize)
            .prop_map(|(records, bytes_each)| Step::Batch { records, bytes_each }),
        2 => (1..5u64, 1..4u32, 0..700usize)
            .prop_map(|(lsns, chunks, pages)| Step::Image { lsns, chunks, pages }),
        1 => (1..4u32, 0..600usize).prop_map(|(chunks, bytes)| Step::Checkpoint { chunks, bytes }),
    ];
    vec(step, 1..16)
}

/// A batch of `records` records from `lsn_base`, sealed in the target's view.
fn batch_at(lsn_base: u64, records: usize, bytes_each: usize) -> SealedBatch {
    crate::tests::batch_at(lsn_base, records, bytes_each, VIEW)
}

/// The log's files, everything appended to it in order, and the checkpoint written (its
/// LSN and chunks), if one was.
struct Written {
    files: BTreeMap<String, Vec<u8>>,
    history: Vec<Entry>,
    checkpoint: Option<(u64, Vec<Vec<u8>>)>,
}

fn write_log(steps: &[Step]) -> Written {
    let (mut wal, _) = Wal::open(SimDisk::new(), dir(), options()).expect("an empty log opens");
    let (mut history, mut checkpoint, mut lsn) = (Vec::new(), None, 0);
    for step in steps {
        match *step {
            Step::Batch {
                records,
                bytes_each,
            } => {
                let batch = batch_at(lsn + 1, records, bytes_each);
                wal.append(&batch).expect("the log takes its next batch");
                lsn = batch.lsn_last();
                history.push(Entry::Batch(batch));
            }
            Step::Image {
                lsns,
                chunks,
                pages,
            } => {
                let (lsn_from, lsn_to) = (lsn, lsn + lsns);
                for index in 0..chunks {
                    let bytes: Vec<u8> = (0..pages).map(|at| (at as u32 ^ index) as u8).collect();
                    let chunk = ImageChunk {
                        lsn_from,
                        lsn: lsn_to,
                        view: VIEW,
                        index,
                        count: chunks,
                        pages: bytes.into(),
                    };
                    wal.append_chunk(&chunk)
                        .expect("the log takes its next chunk");
                    history.push(Entry::Image(chunk));
                }
                lsn = lsn_to;
            }
            Step::Checkpoint { chunks, bytes } if checkpoint.is_none() && lsn >= 1 => {
                wal.sync().expect("a sync");
                let parts: Vec<Vec<u8>> = (0..chunks)
                    .map(|index| vec![index as u8; if index == 0 { bytes } else { 1 }])
                    .collect();
                wal.checkpoint_begin(lsn, VIEW, chunks)
                    .expect("a checkpoint begins");
                for part in &parts {
                    wal.checkpoint_append(part).expect("a checkpoint chunk");
                }
                wal.checkpoint_finish().expect("a checkpoint completes");
                checkpoint = Some((lsn, parts));
            }
            Step::Checkpoint { .. } => {}
        }
    }
    wal.sync().expect("a sync");
    let mut disk = wal.into_disk();
    let names = disk.list(dir()).expect("the log's directory lists");
    let files = names
        .into_iter()
        .map(|name| {
            let bytes = disk.contents(&dir().join(&name)).expect("a listed file");
            (name, bytes)
        })
        .collect();
    Written {
        files,
        history,
        checkpoint,
    }
}

/// One way to damage the log's files.
#[derive(Clone, Debug)]
enum Damage {
    Flip {
        file: Index,
        at: Index,
        mask: u8,
    },
    Cut {
        file: Index,
        at: Index,
    },
    Insert {
        file: Index,
        at: Index,
        bytes: Vec<u8>,
    },
    Remove {
        file: Index,
    },
    /// A copy of a file under a segment's name.
    CopyAsSegment {
        file: Index,
        seq: u64,
    },
    Swap {
        file: Index,
        other: Index,
    },
    Stray {
        name: String,
        bytes: Vec<u8>,
    },
    /// A whole frame of a segment written again right after itself: a stale entry that every
    /// check but the successor check passes.
    RepeatFrame {
        file: Index,
        frame: Index,
    },
}

fn damage() -> impl Strategy<Value = Damage> {
    let name = prop_oneof![
        (1..8u64).prop_map(segment_name),
        (1..200u64, any::<bool>()).prop_map(|(lsn, temporary)| checkpoint_name(lsn, temporary)),
        "[a-z0-9.-]{1,12}",
    ];
    prop_oneof![
        4 => (any::<Index>(), any::<Index>(), 1..=255u8)
            .prop_map(|(file, at, mask)| Damage::Flip { file, at, mask }),
        2 => (any::<Index>(), any::<Index>()).prop_map(|(file, at)| Damage::Cut { file, at }),
        2 => (any::<Index>(), any::<Index>(), vec(any::<u8>(), 1..16))
            .prop_map(|(file, at, bytes)| Damage::Insert { file, at, bytes }),
        1 => any::<Index>().prop_map(|file| Damage::Remove { file }),
        1 => (any::<Index>(), 1..8u64).prop_map(|(file, seq)| Damage::CopyAsSegment { file, seq }),
        1 => (any::<Index>(), any::<Index>()).prop_map(|(file, other)| Damage::Swap { file, other }),
        1 => (name, vec(any::<u8>(), 0..64)).prop_map(|(name, bytes)| Damage::Stray { name, bytes }),
        2 => (any::<Index>(), any::<Index>())
            .prop_map(|(file, frame)| Damage::RepeatFrame { file, frame }),
    ]
}

fn apply(files: &mut BTreeMap<String, Vec<u8>>, damage: &Damage) {
    let names: Vec<String> = files.keys().cloned().collect();
    let pick = |index: &Index| (!names.is_empty()).then(|| names[index.index(names.len())].clone());
    match damage {
        Damage::Flip { file, at, mask } => {
            if let Some(bytes) = pick(file).and_then(|name| files.get_mut(&name))
                && !bytes.is_empty()
            {
                let at = at.index(bytes.len());
                bytes[at] ^= mask;
            }
        }
        Damage::Cut { file, at } => {
            if let Some(bytes) = pick(file).and_then(|name| files.get_mut(&name)) {
                let at = at.index(bytes.len() + 1);
                bytes.truncate(at);
            }
        }
        Damage::Insert { file, at, bytes } => {
            if let Some(contents) = pick(file).and_then(|name| files.get_mut(&name)) {
                let at = at.index(contents.len() + 1);
                contents.splice(at..at, bytes.iter().copied());
            }
        }
        Damage::Remove { file } => {
            if let Some(name) = pick(file) {
                files.remove(&name);
            }
        }
        Damage::CopyAsSegment { file, seq } => {
            if let Some(bytes) = pick(file).map(|name| files[&name].clone()) {
                files.insert(segment_name(*seq), bytes);
            }
        }
        Damage::Swap { file, other } => {
            if let (Some(a), Some(b)) = (pick(file), pick(other)) {
                let a_bytes = files[&a].clone();
                let b_bytes = std::mem::replace(files.get_mut(&b).expect("picked"), a_bytes);
                files.insert(a, b_bytes);
            }
        }
        Damage::Stray { name, bytes } => {
            files.insert(name.clone(), bytes.clone());
        }
        Damage::RepeatFrame { file, frame } => {
            if let Some(bytes) = pick(file).and_then(|name| files.get_mut(&name)) {
                let frames = frame_ranges(bytes);
                if !frames.is_empty() {
                    let range = frames[frame.index(frames.len())].clone();
                    let copy = bytes[range.clone()].to_vec();
                    bytes.splice(range.end..range.end, copy);
                }
            }
        }
    }
}

/// Where the frames of a segment file lie, as far as their lengths check.
fn frame_ranges(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let mut ranges = Vec::new();
    let mut at = SEGMENT_HEADER_LEN;
    while let Some(len) = bytes.get(at..).and_then(decode_frame_len) {
        let end = at + FRAME_HEADER_LEN + len;
        ranges.push(at..end);
        at = end;
    }
    ranges
}

fn disk_with(files: &BTreeMap<String, Vec<u8>>) -> SimDisk {
    let mut disk = SimDisk::new();
    for (name, bytes) in files {
        disk.put_durable(&PathBuf::from(DIR).join(name), bytes);
    }
    disk
}

/// Recovers the log from `files`: a log, or the one error damaged files may cause (a
/// segment or checkpoint header that names another format version, checksum and all).
fn recover(
    files: &BTreeMap<String, Vec<u8>>,
) -> Result<Option<(Wal<SimDisk>, Recovered)>, TestCaseError> {
    match Wal::open(disk_with(files), dir(), options()) {
        Ok(opened) => Ok(Some(opened)),
        Err(WalError::Version { .. } | WalError::CheckpointVersion { .. }) => Ok(None),
        Err(error) => Err(TestCaseError::fail(format!("recovery failed: {error}"))),
    }
}

/// The recovered entries are a contiguous run of `history`, begin and end on whole images.
fn check_run(history: &[Entry], recovered: &[Entry]) -> Result<(), TestCaseError> {
    let Some(first) = recovered.first() else {
        return Ok(());
    };
    let start = history.iter().position(|entry| entry == first);
    prop_assert!(
        start.is_some(),
        "recovered an entry never written: {:?}",
        first
    );
    let start = start.expect("checked");
    prop_assert!(
        history[start..].starts_with(recovered),
        "the recovered entries are not a run of what was written"
    );
    prop_assert!(first.as_image().is_none_or(|chunk| chunk.index == 0));
    let last = recovered.last().expect("not empty");
    prop_assert!(last.as_image().is_none_or(ImageChunk::is_last));
    Ok(())
}

/// The recovered log is what recovery finds again in the files it left, and takes its next
/// entry.
fn check_settled(wal: Wal<SimDisk>, recovered: &Recovered) -> Result<(), TestCaseError> {
    let (wal, again) = Wal::open(wal.into_disk(), dir(), options())
        .map_err(|error| TestCaseError::fail(format!("the recovered log reopens: {error}")))?;
    prop_assert_eq!(&again.entries, &recovered.entries);
    prop_assert_eq!(&again.checkpoint, &recovered.checkpoint);
    prop_assert!(again.stop.is_none() && again.bytes_cut == 0 && again.files_removed == 0);
    let mut wal = wal;
    let lsn_next = again.lsn_last().or(again.lsn_checkpoint()).unwrap_or(0) + 1;
    wal.append(&batch_at(lsn_next, 1, 8))
        .and_then(|()| wal.sync())
        .map_err(|error| TestCaseError::fail(format!("the next entry appends: {error}")))?;
    Ok(())
}

/// A frame around `payload` whose length checks, even for a payload shorter than any entry
/// (which `encode_frame` refuses to write).
fn frame_around(payload: &[u8], out: &mut Vec<u8>) {
    if payload.len() >= FRAME_PAYLOAD_MIN {
        return encode_frame(payload, out);
    }
    let len = (payload.len() as u32).to_le_bytes();
    out.extend_from_slice(&len);
    out.extend_from_slice(&crc32c::crc32c(&len).to_le_bytes());
    out.extend_from_slice(payload);
}

/// Arbitrary bytes under a segment's name, or a segment header and frames around arbitrary
/// payloads (and now and then a valid image chunk), or a checkpoint's name.
fn made_up_file() -> impl Strategy<Value = (String, Vec<u8>)> {
    let chunk = (0..3u64, 1..3u64, 0..64usize).prop_map(|(lsn_from, ahead, pages)| {
        let chunk = ImageChunk {
            lsn_from,
            lsn: lsn_from + ahead,
            view: VIEW,
            index: 0,
            count: 1,
            pages: vec![1; pages].into(),
        };
        let mut out = Vec::new();
        encode_image_chunk(&chunk, &mut out);
        out
    });
    let payload = prop_oneof![vec(any::<u8>(), 0..80), chunk];
    let segment =
        (1..4u64, vec(payload, 0..4), any::<bool>()).prop_map(|(seq, payloads, header)| {
            let mut bytes = Vec::new();
            if header {
                encode_segment_header(seq, &mut bytes);
            }
            for payload in payloads {
                frame_around(&payload, &mut bytes);
            }
            (segment_name(seq), bytes)
        });
    let raw = ((1..4u64).prop_map(segment_name), vec(any::<u8>(), 0..200));
    let checkpoint = (
        (1..5u64, any::<bool>()).prop_map(|(lsn, temporary)| checkpoint_name(lsn, temporary)),
        vec(any::<u8>(), 0..200),
    );
    prop_oneof![3 => segment, 2 => raw, 1 => checkpoint]
}

proptest! {
    #![proptest_config(fuzz_config(WAL_FUZZ_CASES))]

    /// Fuzz target: recovery of a damaged log.
    #[test]
    fn fuzz_recovery_of_a_damaged_log(steps in steps(), damages in vec(damage(), 1..5)) {
        recover_damaged(&steps, &damages)?;
    }

    /// Fuzz target: recovery of files made up from scratch.
    #[test]
    fn fuzz_recovery_of_made_up_files(files in vec(made_up_file(), 0..5)) {
        let files: BTreeMap<String, Vec<u8>> = files.into_iter().collect();
        let Some((wal, recovered)) = recover(&files)? else {
            return Ok(());
        };
        let mut position = Position::default();
        for entry in &recovered.entries {
            prop_assert!(position.check(entry).is_ok(), "a recovered entry does not continue");
            position.advance(entry);
        }
        check_settled(wal, &recovered)?;
    }
}

/// Writes the log `steps` make, damages its files, and checks what recovery makes of them.
fn recover_damaged(steps: &[Step], damages: &[Damage]) -> Result<(), TestCaseError> {
    let written = write_log(steps);
    let mut files = written.files.clone();
    for damage in damages {
        apply(&mut files, damage);
    }
    let Some((wal, recovered)) = recover(&files)? else {
        return Ok(());
    };
    check_run(&written.history, &recovered.entries)?;
    if let Some(checkpoint) = &recovered.checkpoint {
        let written_checkpoint = written.checkpoint.as_ref();
        prop_assert!(
            written_checkpoint.is_some(),
            "a checkpoint that was never written"
        );
        let (lsn, chunks) = written_checkpoint.expect("checked");
        let chunks: Vec<&[u8]> = chunks.iter().map(Vec::as_slice).collect();
        prop_assert_eq!(
            checkpoint,
            &CheckpointRecovered::from_chunks(*lsn, VIEW, &chunks)
        );
    }
    check_settled(wal, &recovered)
}

/// The damaged-log target has teeth: with recovery's successor check switched off, a repeated
/// frame comes back as an entry that was never written there, and the target says so.
#[test]
fn the_damaged_log_target_catches_recovery_without_the_successor_check() {
    let _planted = plant(Bug::SkipSuccessorCheck);
    let config = ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let outcome = runner.run(&(steps(), vec(damage(), 1..5)), |(steps, damages)| {
        recover_damaged(&steps, &damages)
    });
    assert!(outcome.is_err(), "the planted bug went unnoticed");
}

/// The log the damage is done to holds what it should: a sanity check of the fuzz target.
#[test]
fn an_undamaged_log_recovers_whole() {
    let steps = [
        Step::Batch {
            records: 2,
            bytes_each: 300,
        },
        Step::Image {
            lsns: 2,
            chunks: 3,
            pages: 500,
        },
        Step::Batch {
            records: 1,
            bytes_each: 10,
        },
        Step::Batch {
            records: 3,
            bytes_each: 200,
        },
    ];
    let written = write_log(&steps);
    assert!(written.files.len() >= 2, "{:?}", written.files.keys());
    let (wal, recovered) = recover(&written.files).unwrap().expect("the log opens");
    assert_eq!(recovered.entries, written.history);
    check_settled(wal, &recovered).unwrap();
}
