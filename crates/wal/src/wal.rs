//! The writer ([`Wal`]) and recovery ([`Wal::open`], [`Recovered`]).

use std::borrow::Cow;
use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tandem_redo::{BatchError, SealedBatch};

use crate::Disk;
use crate::bugs::{Bug, planted};
use crate::checkpoint::{
    CHECKPOINT_CHUNK_HEADER_LEN, CHECKPOINT_VERSION, CheckpointError, checkpoint_name,
    checkpoint_path, decode_checkpoint, encode_checkpoint_chunk, encode_checkpoint_header,
    encode_checkpoint_trailer, parse_checkpoint_name,
};
use crate::entry::{Discontinuity, Entry, ImageChunk, ImageOpen, Position};
use crate::format::{
    FRAME_HEADER_LEN, FRAME_PAYLOAD_MIN, ImageError, SEGMENT_HEADER_LEN, SEGMENT_VERSION,
    SegmentHeader, decode_frame_len, decode_image_chunk, decode_segment_header, encode_frame,
    encode_image_chunk, encode_segment_header, image_chunk_len, is_image, parse_segment_name,
    segment_name, segment_path,
};

/// How the log lays out its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// A segment file is closed and the next one begun once the next entry would take it past
    /// this size. A single entry larger than this gets a segment of its own.
    pub segment_bytes_max: u64,
    /// Zeros written after a group's entries whenever they grow the current segment, in the
    /// same sync (capped at `segment_bytes_max`; 0 writes none): a later group commit's sync
    /// that lands on them leaves the file's size alone, and so syncs the data without a
    /// journal commit (half the latency of a sync that grows the file, on this machine's ext4).
    pub preallocate_bytes: u64,
}

impl Default for WalOptions {
    fn default() -> WalOptions {
        WalOptions {
            segment_bytes_max: 64 * 1024 * 1024,
            // A megabyte: durable SET throughput +23% on this machine's ext4 (docs/wal.md).
            // It was off while the simulator's Redis seed 64195 lost records with it on; the
            // simulated disk, not the log, was at fault (it appended over zeros a cut kept).
            preallocate_bytes: 1024 * 1024,
        }
    }
}

/// Why the log cannot be opened or written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WalError {
    /// An I/O error happened on the log, now or earlier; the log refuses all further work and
    /// the node must stop serving (see [`Wal`] on why nothing is retried).
    #[error("the write-ahead log is poisoned and refuses further work: {cause}")]
    Poisoned { cause: String },
    /// A segment file was written by another format version: recovery stops rather than cut a
    /// log it cannot read.
    #[error(
        "segment file {file} has format version {found}, this node reads version \
         {SEGMENT_VERSION}: run the version that wrote it, or move the log away"
    )]
    Version { file: String, found: u16 },
    /// [`Wal::append_from`] was given a batch whose records do not decode, so it cannot be
    /// trimmed; nothing was appended and the log is not poisoned (the batch is at fault).
    #[error("the batch to append from LSN {lsn_from} cannot be trimmed: {error}")]
    Undecodable { lsn_from: u64, error: BatchError },
    /// The newest checkpoint file was written by another format version: recovery stops
    /// rather than remove a checkpoint it cannot read (the log may no longer hold what it
    /// covers).
    #[error(
        "checkpoint file {file} has format version {found}, this node reads version \
         {CHECKPOINT_VERSION}: run the version that wrote it, or move the log away"
    )]
    CheckpointVersion { file: String, found: u16 },
}

/// Where and why recovery ended the log before the end of its files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// The segment file is shorter than its header, or the header's checksum fails.
    TornSegmentHeader { file: String },
    /// The segment header names another sequence number than the file's name.
    MisnamedSegment { file: String, seq_header: u64 },
    /// A frame's length is torn (its check fails) or runs past the end of the file.
    TornFrame { file: String, offset: u64 },
    /// The frame is whole but the batch inside it is not (its checksum, most often).
    CorruptBatch {
        file: String,
        offset: u64,
        error: BatchError,
    },
    /// The frame is whole but the image chunk inside it is not.
    CorruptImage {
        file: String,
        offset: u64,
        error: ImageError,
    },
    /// The batch is valid but does not continue the entry before it (the successor check): a
    /// stale batch, or one after a gap.
    NotContinuing {
        file: String,
        offset: u64,
        lsn_expected: u64,
        lsn_found: u64,
    },
    /// An image chunk that does not continue the log (a first chunk whose `lsn_from` is past
    /// the log's end or whose `lsn` is not ahead of it, a chunk out of order or of another
    /// image), or a batch inside an unfinished image: the successor check for images.
    ImageOutOfOrder {
        file: String,
        offset: u64,
        why: &'static str,
    },
    /// The log's files end inside an image (its last chunk never reached the disk): the image
    /// is cut away from its first chunk on, as a torn batch would be. `offset` is where that
    /// first chunk's frame began. When another stop ends the log inside an image, that stop is
    /// reported and the image is cut all the same.
    IncompleteImage { file: String, offset: u64 },
}

/// The newest complete checkpoint recovery found: the database's pages as they stood at `lsn`.
#[derive(Clone)]
pub struct CheckpointRecovered {
    pub lsn: u64,
    /// The view whose history its records follow, as the writer said.
    pub view: u64,
    /// The checkpoint file as read (mapped, on a real disk), and where its chunks lie in it:
    /// the chunks are handed out as slices of it, since a copy of each would cost as much
    /// again as the database.
    bytes: Arc<dyn AsRef<[u8]> + Send + Sync>,
    chunk_ranges: Vec<std::ops::Range<usize>>,
}

impl CheckpointRecovered {
    /// A checkpoint holding `chunks`, as recovery would return it (for tests of its callers).
    pub fn from_chunks(lsn: u64, view: u64, chunks: &[&[u8]]) -> CheckpointRecovered {
        let mut bytes = Vec::new();
        let mut chunk_ranges = Vec::new();
        for chunk in chunks {
            chunk_ranges.push(bytes.len()..bytes.len() + chunk.len());
            bytes.extend_from_slice(chunk);
        }
        CheckpointRecovered {
            lsn,
            view,
            bytes: Arc::new(bytes),
            chunk_ranges,
        }
    }

    /// The chunks as they were appended, in order (state-transfer chunks, opaque to the log).
    pub fn chunks(&self) -> impl ExactSizeIterator<Item = &[u8]> {
        let bytes = (*self.bytes).as_ref();
        self.chunk_ranges.iter().map(|range| &bytes[range.clone()])
    }
}

/// Two checkpoints are equal when they hold the same chunks at the same LSN and view, however
/// their files laid them out.
impl PartialEq for CheckpointRecovered {
    fn eq(&self, other: &CheckpointRecovered) -> bool {
        (self.lsn, self.view) == (other.lsn, other.view) && self.chunks().eq(other.chunks())
    }
}

impl Eq for CheckpointRecovered {}

/// The chunks' count and size, not their bytes (as large as the database).
impl std::fmt::Debug for CheckpointRecovered {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CheckpointRecovered")
            .field("lsn", &self.lsn)
            .field("view", &self.view)
            .field("chunks", &self.chunk_ranges.len())
            .field(
                "chunk_bytes",
                &self.chunks().map(<[u8]>::len).sum::<usize>(),
            )
            .finish()
    }
}

/// What recovery found and what it cut.
///
/// **With a checkpoint.** When `checkpoint` is `Some`, the state to rebuild is the checkpoint
/// installed on the initial database, then the entries after its LSN ([`Recovered::replay`]).
/// The log is then anchored at the checkpoint: it is either empty or holds the checkpoint's
/// LSN, `lsn_base() <= checkpoint.lsn <= lsn_last()`, so its entries continue the checkpoint
/// without a gap. Its first entries may lie at or below the checkpoint's LSN (a segment is
/// removed only whole), and a batch may straddle it: the caller trims that batch to the
/// records after the LSN. A log that did not reach the checkpoint's LSN (it lagged behind the
/// checkpoint when the crash came) or began after it (a gap) is emptied, durably
/// ([`Recovered::entries_dropped`]): the checkpoint alone is the state, and the log continues
/// from its LSN (an empty log takes its next entry at any LSN, so the caller appends from
/// `checkpoint.lsn + 1`).
///
/// **Without one**, the log alone is the history: from the initial database if
/// `lsn_base() == Some(0)`; otherwise it begins later (a checkpoint that covered its start was
/// deleted by a cut below it, or a cut emptied the log) and rebuilds no state on its own.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every entry of the log, oldest first, each continuing the one before: batches exactly
    /// as sealed (views and all) and the chunks of complete images only.
    pub entries: Vec<Entry>,
    /// The newest complete, valid checkpoint, if there is one.
    pub checkpoint: Option<CheckpointRecovered>,
    /// Checkpoint files removed: temporary ones, invalid ones and those older than the newest
    /// valid one.
    pub checkpoint_files_removed: usize,
    /// Entries recovery read and then dropped because the log did not continue the checkpoint
    /// (it ended before the checkpoint's LSN, or began after it); their files are removed and
    /// counted in `files_removed` and `bytes_cut`.
    pub entries_dropped: usize,
    /// Why the log ended before its files did, if it did.
    pub stop: Option<Stop>,
    /// Bytes cut from the end of the last kept segment, plus the whole size of every segment
    /// file removed, but not the preallocated zeros after the last entry.
    pub bytes_cut: u64,
    /// Preallocated zeros cut after the last entry ([`WalOptions::preallocate_bytes`]): room
    /// the log had not used yet, whose loss loses nothing.
    pub bytes_zeroed: u64,
    /// Segment files removed: those holding no valid entry and every one after the stop.
    pub files_removed: usize,
    /// Chunks stepped over at the log's start: the rest of an image whose first segments
    /// [`Wal::remove_below`] had removed when the crash came. The log begins after that image.
    pub chunks_skipped: usize,
}

impl Recovered {
    /// Whether recovery gave back nothing at all: no checkpoint and no entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty() && self.checkpoint.is_none()
    }

    /// The LSN the log's history starts after: the first batch's `lsn_base - 1`, or the first
    /// image's `lsn_from` (the image holds what changed after it). `None` for an empty log.
    pub fn lsn_base(&self) -> Option<u64> {
        self.entries.first().map(|entry| match entry {
            Entry::Batch(batch) => batch.lsn_base() - 1,
            Entry::Image(chunk) => chunk.lsn_from,
        })
    }

    /// LSN of the last record in the log, or of its last image, if it holds any.
    pub fn lsn_last(&self) -> Option<u64> {
        self.entries.last().map(Entry::lsn_last)
    }

    /// The LSN of the recovered checkpoint, if there is one.
    pub fn lsn_checkpoint(&self) -> Option<u64> {
        self.checkpoint.as_ref().map(|checkpoint| checkpoint.lsn)
    }

    /// The entries to replay on top of the checkpoint: those that end above its LSN (all of
    /// them without a checkpoint). The first may be a batch that straddles the checkpoint's
    /// LSN, whose records up to it the caller skips, or an image whose `lsn_from` is at or
    /// below it, which the caller installs whole.
    pub fn replay(&self) -> &[Entry] {
        let lsn = self.lsn_checkpoint().unwrap_or(0);
        let from = self
            .entries
            .partition_point(|entry| entry.lsn_last() <= lsn);
        &self.entries[from..]
    }

    /// The log's batches, in order, leaving out the images between them.
    pub fn batches(&self) -> Vec<SealedBatch> {
        let batches = self.entries.iter().filter_map(Entry::as_batch);
        batches.cloned().collect()
    }
}

/// The segment file the writer appends to.
#[derive(Debug)]
struct Segment<F> {
    file: F,
    seq: u64,
    /// Where the next frame goes: the end of the last one written.
    bytes_len: u64,
    /// The file's length on the disk, `bytes_len` and then zeros (`preallocate_bytes`).
    bytes_allocated: u64,
    entry_count: u64,
}

/// A checkpoint file being written (`ckpt-<lsn>.tmp`).
#[derive(Debug)]
struct CheckpointWriting<F> {
    file: F,
    lsn: u64,
    chunk_count: u32,
    chunks_written: u32,
}

/// Where a written entry sits, so that [`Wal::cut_after`] knows where to cut and
/// [`Wal::remove_below`] what a segment holds without reading it back. A few dozen bytes per
/// entry; the entries themselves stay on disk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Frame {
    seq: u64,
    /// Offset of the frame (its length field) in the segment file.
    offset: u64,
    /// Bytes of the frame's payload.
    len: u32,
    /// A batch's first LSN; an image chunk's `lsn_from`.
    lsn_first: u64,
    /// [`Entry::lsn_last`]: a batch's last LSN, an image chunk's image `lsn`.
    lsn_last: u64,
    /// An image chunk's index, `None` for a batch.
    chunk_index: Option<u32>,
}

impl Frame {
    fn of(entry: &Entry, seq: u64, offset: u64, len: usize) -> Frame {
        let len = u32::try_from(len).expect("an entry fits in u32 bytes");
        let (lsn_first, chunk_index) = match entry {
            Entry::Batch(batch) => (batch.lsn_base(), None),
            Entry::Image(chunk) => (chunk.lsn_from, Some(chunk.index)),
        };
        Frame {
            seq,
            offset,
            len,
            lsn_first,
            lsn_last: entry.lsn_last(),
            chunk_index,
        }
    }

    fn end(&self) -> u64 {
        self.offset + (FRAME_HEADER_LEN as u64) + u64::from(self.len)
    }
}

/// The records of `batch` up to `lsn`, which it straddles; `None` when its records do not
/// decode (a checksummed batch from a buggy peer, appended whole), which cannot be trimmed: the
/// cut then goes before the whole batch, as it does before an image.
fn prefix_of(batch: &SealedBatch, lsn: u64) -> Option<SealedBatch> {
    assert!(batch.lsn_base() <= lsn);
    assert!(lsn < batch.lsn_last());
    batch.try_trimmed(batch.lsn_base(), lsn).ok()
}

/// An entry's bytes as a frame holds them.
fn entry_bytes(entry: &Entry) -> Cow<'_, [u8]> {
    match entry {
        Entry::Batch(batch) => Cow::Borrowed(batch.bytes()),
        Entry::Image(chunk) => {
            let mut bytes = Vec::with_capacity(image_chunk_len(chunk));
            encode_image_chunk(chunk, &mut bytes);
            Cow::Owned(bytes)
        }
    }
}

fn entry_len(entry: &Entry) -> usize {
    match entry {
        Entry::Batch(batch) => batch.len(),
        Entry::Image(chunk) => image_chunk_len(chunk),
    }
}

/// The write-ahead log's writer: buffers sealed batches and image chunks, writes and syncs them
/// to segment files (group commit: one sync for everything buffered), removes old segments and
/// cuts the log back when a view change rewinds the member.
///
/// **Poisoning.** Any I/O error poisons the writer: that call and every later one return
/// [`WalError::Poisoned`] with the first error's text, and nothing appended after the last
/// successful [`Wal::sync`] is ever reported durable. A failed sync is never retried, because
/// after a failed `fsync` the state of the page cache is unknown: Linux may already have marked
/// the dirty pages clean (or dropped them) when it reported the error, so a second `fsync` can
/// succeed without the bytes ever reaching the disk ("fsyncgate", PostgreSQL 2018). The only
/// safe way on is to stop, restart, and trust what recovery reads back from the disk.
#[derive(Debug)]
pub struct Wal<D: Disk> {
    disk: D,
    dir: PathBuf,
    options: WalOptions,
    /// Sequence numbers of the segment files, oldest first; the last is `current`'s.
    segments: VecDeque<u64>,
    current: Option<Segment<D::File>>,
    /// The number the next segment file takes: above every segment this writer has seen, so a
    /// new file always sorts after every file still on disk.
    seq_next: u64,
    /// Every entry written to the segment files, oldest first.
    frames: VecDeque<Frame>,
    /// Entries appended since the last sync, oldest first.
    buffered: Vec<Entry>,
    /// Where the log stands after the buffered entries.
    position: Position,
    lsn_durable: u64,
    /// The current segment holds bytes [`Wal::write`] wrote and no sync has covered yet, up
    /// to the end of the last complete entry at `lsn_written`.
    written_unsynced: bool,
    lsn_written: u64,
    poisoned: Option<String>,
    /// LSNs of the complete checkpoint files in the directory, oldest first: the newest is
    /// durable, and any older one is on its way out.
    checkpoints: Vec<u64>,
    checkpoint_writing: Option<CheckpointWriting<D::File>>,
}

fn io_cause(what: &str, path: &Path, error: io::Error) -> String {
    format!("{what} {}: {error}", path.display())
}

/// The result of reading one segment file.
#[derive(Debug)]
struct SegmentScan {
    entries: Vec<Entry>,
    frames: Vec<Frame>,
    /// Chunks stepped over at the log's start (see `headless` in [`scan_segment`]).
    skipped: usize,
    /// Bytes up to the end of the last valid entry; 0 when there is none.
    len_valid: usize,
    /// Zeros after the last valid entry, to the file's end (the segment's preallocated room).
    len_zeroed: usize,
    stop: Option<Stop>,
}

/// The stop a segment file's header makes (torn, or naming another segment), if any; a header
/// of another format version is an error no recovery may cut past.
fn header_stop(file: &str, seq: u64, bytes: &[u8]) -> Result<Option<Stop>, WalError> {
    let file = file.to_owned();
    match decode_segment_header(bytes) {
        SegmentHeader::Torn => Ok(Some(Stop::TornSegmentHeader { file })),
        SegmentHeader::OtherVersion { version } => Err(WalError::Version {
            file,
            found: version,
        }),
        SegmentHeader::Valid { seq: seq_header } if seq_header != seq => {
            Ok(Some(Stop::MisnamedSegment { file, seq_header }))
        }
        SegmentHeader::Valid { .. } => Ok(None),
    }
}

/// The entry a frame's `payload` holds (at `offset` of `file`), or the stop a corrupt one
/// makes.
fn decode_entry(file: &str, offset: u64, payload: &[u8]) -> Result<Entry, Stop> {
    let file = || file.to_owned();
    if is_image(payload) {
        decode_image_chunk(payload)
            .map(Entry::Image)
            .map_err(|error| Stop::CorruptImage {
                file: file(),
                offset,
                error,
            })
    } else {
        SealedBatch::verify(Arc::from(payload))
            .map(Entry::Batch)
            .map_err(|error| Stop::CorruptBatch {
                file: file(),
                offset,
                error,
            })
    }
}

/// Skips `chunk`, a chunk of an image whose start the log no longer holds (at the log's
/// start, `headless` the skipped image so far); after its last chunk the log continues at
/// the image's LSN. False if `chunk` is not the next one of that image.
fn skip_headless(
    chunk: &ImageChunk,
    position: &mut Position,
    headless: &mut Option<ImageOpen>,
) -> bool {
    let next = headless.is_none_or(|open| {
        (
            open.lsn_from,
            open.lsn,
            open.view,
            open.count,
            open.index_next,
        ) == (
            chunk.lsn_from,
            chunk.lsn,
            chunk.view,
            chunk.count,
            chunk.index,
        )
    });
    if !next {
        return false;
    }
    *headless = Some(ImageOpen {
        lsn_from: chunk.lsn_from,
        lsn: chunk.lsn,
        view: chunk.view,
        count: chunk.count,
        index_next: chunk.index + 1,
    });
    if chunk.is_last() {
        *headless = None;
        *position = Position {
            lsn_last: Some(chunk.lsn),
            image_open: None,
        };
    }
    true
}

/// The stop an entry that does not continue the log makes, at `offset` of `file`.
fn discontinuity_stop(discontinuity: Discontinuity, file: String, offset: u64) -> Stop {
    match discontinuity {
        Discontinuity::Lsn {
            lsn_expected,
            lsn_found,
        } => Stop::NotContinuing {
            file,
            offset,
            lsn_expected,
            lsn_found,
        },
        Discontinuity::Image(why) => Stop::ImageOutOfOrder { file, offset, why },
    }
}

/// Reads the entries of one segment file up to the first torn, corrupt or non-continuing one,
/// moving `position` past each one kept. The first segment read starts from an empty position
/// and so may start anywhere (older segments may have been removed).
///
/// `headless` is the image being skipped at the log's start: `remove_below` removes an image's
/// segments oldest first, so a crash in the middle leaves the log beginning with the image's
/// later chunks. They are below a checkpoint and of no use without the first ones; recovery
/// steps over them, and the log begins after the image (at its `lsn`).
fn scan_segment(
    file: &str,
    seq: u64,
    bytes: &[u8],
    position: &mut Position,
    headless: &mut Option<ImageOpen>,
) -> Result<SegmentScan, WalError> {
    assert!(seq >= 1);
    let successor_checked = !planted(Bug::SkipSuccessorCheck);
    let mut scan = SegmentScan {
        entries: Vec::new(),
        frames: Vec::new(),
        skipped: 0,
        len_valid: 0,
        len_zeroed: 0,
        stop: None,
    };
    let file = file.to_owned();
    if let Some(stop) = header_stop(&file, seq, bytes)? {
        scan.stop = Some(stop);
        return Ok(scan);
    }
    let mut offset = SEGMENT_HEADER_LEN;
    scan.len_valid = offset;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let offset_u64 = offset as u64;
        let Some(len) = decode_frame_len(rest) else {
            // Zeros to the end are the segment's preallocated room, not a torn frame: the log
            // simply ends here (recovery still cuts them off, so appends go on from here).
            if rest.iter().any(|&byte| byte != 0) {
                scan.stop = Some(Stop::TornFrame {
                    file,
                    offset: offset_u64,
                });
            } else {
                scan.len_zeroed = rest.len();
            }
            break;
        };
        let payload = &rest[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
        let entry = match decode_entry(&file, offset_u64, payload) {
            Ok(entry) => entry,
            Err(stop) => {
                scan.stop = Some(stop);
                break;
            }
        };
        let at_start = *position == Position::default();
        if let Entry::Image(chunk) = &entry
            && at_start
            && (chunk.index > 0 || headless.is_some())
        {
            if !skip_headless(chunk, position, headless) {
                scan.stop = Some(Stop::ImageOutOfOrder {
                    file,
                    offset: offset_u64,
                    why: "a chunk that is not the next one of the skipped image",
                });
                break;
            }
            scan.skipped += 1;
            offset += FRAME_HEADER_LEN + len;
            scan.len_valid = offset;
            continue;
        }
        if headless.is_some() {
            scan.stop = Some(Stop::ImageOutOfOrder {
                file,
                offset: offset_u64,
                why: "a batch inside the skipped image",
            });
            break;
        }
        if successor_checked && let Err(discontinuity) = position.check(&entry) {
            scan.stop = Some(discontinuity_stop(discontinuity, file, offset_u64));
            break;
        }
        position.advance(&entry);
        scan.frames
            .push(Frame::of(&entry, seq, offset_u64, payload.len()));
        scan.entries.push(entry);
        offset += FRAME_HEADER_LEN + len;
        scan.len_valid = offset;
    }
    if scan.entries.is_empty() {
        // A header alone holds nothing worth keeping: the file goes.
        scan.len_valid = 0;
    }
    assert!(scan.len_valid <= bytes.len());
    assert_eq!(scan.entries.len(), scan.frames.len());
    Ok(scan)
}

/// Finds the newest complete, valid checkpoint among the files `names`, and removes every other
/// checkpoint file: temporary ones (a checkpoint never finished), invalid ones, and those older
/// than the one kept (a crash in `checkpoint_finish` before it removed them). Returns the
/// checkpoint and how many files it removed, the removals made durable.
///
/// Only the newest valid file is worth reading: older ones are removed unread. One directory
/// sync covers every removal, since whichever of them a crash undoes, the files that come back
/// are temporary, invalid or older than the kept one, and the next recovery removes them again.
fn recover_checkpoints<D: Disk>(
    disk: &mut D,
    dir: &Path,
    names: &[String],
) -> Result<(Option<CheckpointRecovered>, usize), WalError> {
    let poisoned = |cause| WalError::Poisoned { cause };
    let mut found: Vec<(u64, bool)> = names
        .iter()
        .filter_map(|n| parse_checkpoint_name(n))
        .collect();
    found.sort_unstable();
    let mut checkpoint = None;
    let mut removed = 0;
    // Newest first; of one LSN the temporary file comes before the complete one.
    for &(lsn, temporary) in found.iter().rev() {
        let path = checkpoint_path(dir, lsn, temporary);
        if !temporary && checkpoint.is_none() {
            let bytes = disk
                .read_whole(&path)
                .map_err(|error| poisoned(io_cause("reading checkpoint", &path, error)))?;
            match decode_checkpoint(bytes.as_ref(), lsn) {
                Ok((view, chunk_ranges)) => {
                    checkpoint = Some(CheckpointRecovered {
                        lsn,
                        view,
                        bytes: Arc::new(bytes),
                        chunk_ranges,
                    });
                    continue;
                }
                Err(CheckpointError::Version { found }) => {
                    return Err(WalError::CheckpointVersion {
                        file: checkpoint_name(lsn, false),
                        found,
                    });
                }
                // Torn or damaged: a checkpoint is renamed to its final name only once synced,
                // so this one was damaged since; an older valid one, if any is left, serves.
                Err(_) => {}
            }
        }
        disk.remove(&path)
            .map_err(|error| poisoned(io_cause("removing checkpoint", &path, error)))?;
        removed += 1;
    }
    if removed > 0 {
        disk.sync_dir(dir)
            .map_err(|error| poisoned(io_cause("syncing log directory", dir, error)))?;
    }
    Ok((checkpoint, removed))
}

/// A segment file recovery read, with what it keeps of it.
#[derive(Debug)]
struct Scanned {
    seq: u64,
    bytes_len: usize,
    len_valid: usize,
    /// The preallocated zeros at the file's end: cut with the rest, but not counted as cut.
    len_zeroed: usize,
    frames: Vec<Frame>,
}

/// Reads the log's segments `seqs` (sorted) in order, up to the first that stops the scan,
/// into `recovered`'s entries and counts; a log that ends inside an image is cut back to the
/// image's first chunk, like a torn batch. Returns what each segment read holds and how many
/// of `seqs` were read (those after are past the stop).
fn scan_log<D: Disk>(
    disk: &mut D,
    dir: &Path,
    seqs: &[u64],
    recovered: &mut Recovered,
) -> Result<(Vec<Scanned>, usize), WalError> {
    let poisoned = |cause| WalError::Poisoned { cause };
    let mut scanned: Vec<Scanned> = Vec::new();
    let mut position = Position::default();
    let mut headless = None;
    // Where the unfinished image at the end began, if the log ends inside one: its first
    // chunk's place in `scanned` and in `recovered.entries`.
    let mut image_start: Option<(usize, u64, usize)> = None;
    let mut index = 0;
    while index < seqs.len() {
        let seq = seqs[index];
        index += 1;
        let path = segment_path(dir, seq);
        let bytes = disk
            .read(&path)
            .map_err(|error| poisoned(io_cause("reading segment", &path, error)))?;
        let scan = scan_segment(
            &segment_name(seq),
            seq,
            &bytes,
            &mut position,
            &mut headless,
        )?;
        recovered.chunks_skipped += scan.skipped;
        for (frame, entry) in scan.frames.iter().zip(&scan.entries) {
            if let Entry::Image(chunk) = entry
                && chunk.index == 0
                && !chunk.is_last()
            {
                image_start = Some((scanned.len(), frame.offset, recovered.entries.len()));
            }
            recovered.entries.push(entry.clone());
        }
        scanned.push(Scanned {
            seq,
            bytes_len: bytes.len(),
            len_valid: scan.len_valid,
            len_zeroed: scan.len_zeroed,
            frames: scan.frames,
        });
        if scan.stop.is_some() {
            recovered.stop = scan.stop;
            break;
        }
    }
    if let Some(open) = position.image_open {
        // The log ends inside an image: cut it away from its first chunk, like a torn batch.
        let (at, offset, entry_index) = image_start.expect("an open image was begun");
        assert!(open.index_next < open.count);
        recovered.entries.truncate(entry_index);
        let file = segment_name(scanned[at].seq);
        if recovered.stop.is_none() {
            recovered.stop = Some(Stop::IncompleteImage { file, offset });
        }
        let cut = &mut scanned[at];
        cut.frames.retain(|frame| frame.offset < offset);
        cut.len_valid = if cut.frames.is_empty() {
            0
        } else {
            offset as usize
        };
        for later in &mut scanned[at + 1..] {
            later.frames.clear();
            later.len_valid = 0;
        }
    }
    Ok((scanned, index))
}

/// Cuts the log durably after recovery: a segment left without frames is removed, one with
/// bytes past its last kept frame truncated, and every segment of `seqs_after` (past the
/// scan's stop) removed.
fn cut_durably<D: Disk>(
    disk: &mut D,
    dir: &Path,
    scanned: &[Scanned],
    seqs_after: &[u64],
    recovered: &mut Recovered,
) -> Result<(), WalError> {
    let poisoned = |cause| WalError::Poisoned { cause };
    // Cut durably: truncations are durable when they return, removals once the directory
    // is synced. Nothing kept is ever removed, so one directory sync at the end suffices:
    // whichever removals a crash undoes, the files that come back lie after the cut.
    for segment in scanned {
        let path = segment_path(dir, segment.seq);
        let cut = (segment.bytes_len - segment.len_valid) as u64;
        if segment.frames.is_empty() {
            disk.remove(&path)
                .map_err(|error| poisoned(io_cause("removing segment", &path, error)))?;
            recovered.files_removed += 1;
        } else if cut > 0 {
            disk.truncate(&path, segment.len_valid as u64)
                .map_err(|error| poisoned(io_cause("truncating segment", &path, error)))?;
        }
        recovered.bytes_cut += cut - segment.len_zeroed as u64;
        recovered.bytes_zeroed += segment.len_zeroed as u64;
    }
    for &seq in seqs_after {
        let path = segment_path(dir, seq);
        let bytes = disk
            .read(&path)
            .map_err(|error| poisoned(io_cause("reading segment", &path, error)))?;
        disk.remove(&path)
            .map_err(|error| poisoned(io_cause("removing segment", &path, error)))?;
        recovered.bytes_cut += bytes.len() as u64;
        recovered.files_removed += 1;
    }
    if recovered.files_removed > 0 {
        disk.sync_dir(dir)
            .map_err(|error| poisoned(io_cause("syncing log directory", dir, error)))?;
    }
    Ok(())
}

/// Opens the last kept segment `last` for appending, synced first.
fn reopen_last<D: Disk>(
    disk: &mut D,
    dir: &Path,
    last: &Scanned,
) -> Result<Segment<D::File>, WalError> {
    let poisoned = |cause| WalError::Poisoned { cause };
    let path = segment_path(dir, last.seq);
    let mut file = disk
        .open_append(&path)
        .map_err(|error| poisoned(io_cause("opening segment", &path, error)))?;
    // What recovery read may have been in the page cache only (the process died,
    // the machine did not): synced now, it is as durable as the log says it is,
    // and a node may report it for a promotion. Earlier segments were synced
    // when the log rolled past them.
    disk.sync(&mut file)
        .map_err(|error| poisoned(io_cause("syncing segment", &path, error)))?;
    Ok(Segment {
        file,
        seq: last.seq,
        bytes_len: last.len_valid as u64,
        // Cut above to its last entry, zeros and all.
        bytes_allocated: last.len_valid as u64,
        entry_count: last.frames.len() as u64,
    })
}

impl<D: Disk> Wal<D> {
    /// Recovers the log in `dir` (creating the directory if needed) and returns a writer that
    /// continues after it, with what was recovered.
    ///
    /// Recovery reads the segment files in order and keeps entries while each one parses (its
    /// frame's length check and its own CRC32C hold) and continues the one before. At the
    /// first that does not, it cuts the log there, durably: the segment file is truncated after
    /// its last valid entry (or removed if it holds none), and every later segment file is
    /// removed, since none of them can continue a log that ended before it. An image whose
    /// last chunk is not in the log is cut the same way, from its first chunk on, so the log
    /// ends at its last complete entry.
    ///
    /// Before the segments, it finds the newest complete checkpoint file whose every checksum,
    /// chunk count and trailer hold, and removes every other checkpoint file (temporary, torn,
    /// older), durably. A log that does not continue that checkpoint (it ends below its LSN or
    /// begins above it) is then emptied, durably: see [`Recovered`] for what the caller gets.
    pub fn open(
        mut disk: D,
        dir: &Path,
        options: WalOptions,
    ) -> Result<(Wal<D>, Recovered), WalError> {
        let smallest_segment = SEGMENT_HEADER_LEN + FRAME_HEADER_LEN + FRAME_PAYLOAD_MIN;
        assert!(
            options.segment_bytes_max >= smallest_segment as u64,
            "a segment must hold at least its header and one smallest entry"
        );
        let poisoned = |cause| WalError::Poisoned { cause };
        disk.create_dir_all(dir)
            .map_err(|error| poisoned(io_cause("creating log directory", dir, error)))?;
        let names = disk
            .list(dir)
            .map_err(|error| poisoned(io_cause("listing log directory", dir, error)))?;
        let mut seqs: Vec<u64> = names.iter().filter_map(|n| parse_segment_name(n)).collect();
        seqs.sort_unstable();
        let (checkpoint, checkpoint_files_removed) = recover_checkpoints(&mut disk, dir, &names)?;

        let mut recovered = Recovered {
            checkpoint,
            checkpoint_files_removed,
            ..Recovered::default()
        };
        let (mut scanned, index) = scan_log(&mut disk, dir, &seqs, &mut recovered)?;
        // A log that does not continue the checkpoint is of no use beside it: it ends before
        // the checkpoint's LSN (it lagged when the crash came: the checkpoint already holds all
        // of it) or begins after it (a gap no replay can cross). It is emptied, durably, so
        // that the log continues from the checkpoint's LSN.
        if let Some(lsn) = recovered.lsn_checkpoint()
            && let (Some(base), Some(last)) = (recovered.lsn_base(), recovered.lsn_last())
            && (last < lsn || base > lsn)
        {
            recovered.entries_dropped = recovered.entries.len();
            recovered.entries.clear();
            for segment in &mut scanned {
                segment.frames.clear();
                segment.len_valid = 0;
            }
        }
        if let Some(lsn) = recovered.lsn_checkpoint()
            && let (Some(base), Some(last)) = (recovered.lsn_base(), recovered.lsn_last())
        {
            assert!(base <= lsn, "the log is anchored at the checkpoint");
            assert!(lsn <= last, "the log is anchored at the checkpoint");
        }

        cut_durably(&mut disk, dir, &scanned, &seqs[index..], &mut recovered)?;

        let kept: Vec<&Scanned> = scanned.iter().filter(|s| !s.frames.is_empty()).collect();
        let current = match kept.last() {
            None => None,
            Some(last) => Some(reopen_last(&mut disk, dir, last)?),
        };
        let segments: VecDeque<u64> = kept.iter().map(|s| s.seq).collect();
        let frames: VecDeque<Frame> = kept.iter().flat_map(|s| s.frames.iter().copied()).collect();
        assert_eq!(frames.len(), recovered.entries.len());
        // The position after what was kept: the log ends at its last complete entry.
        let position = Position {
            lsn_last: recovered.lsn_last(),
            image_open: None,
        };
        if !planted(Bug::SkipSuccessorCheck) {
            let mut check = Position::default();
            for entry in &recovered.entries {
                assert_eq!(check.check(entry), Ok(()), "recovery kept a gap");
                check.advance(entry);
            }
            assert_eq!(check, position);
        }
        let wal = Wal {
            disk,
            dir: dir.to_path_buf(),
            options,
            segments,
            current,
            seq_next: seqs.last().map_or(1, |&seq| seq + 1),
            frames,
            buffered: Vec::new(),
            position,
            lsn_durable: position.lsn(),
            written_unsynced: false,
            lsn_written: position.lsn(),
            poisoned: None,
            checkpoints: recovered.lsn_checkpoint().into_iter().collect(),
            checkpoint_writing: None,
        };
        Ok((wal, recovered))
    }

    /// Buffers a batch to be written by the next [`Wal::sync`]; nothing reaches a file yet.
    ///
    /// Panics unless the batch continues the log (its first LSN follows the last appended
    /// one, and no image is unfinished): a caller that appends out of order has a bug. The
    /// first entry of an empty log may start anywhere, since a checkpoint may cover what came
    /// before.
    pub fn append(&mut self, batch: &SealedBatch) -> Result<(), WalError> {
        self.append_entry(Entry::Batch(batch.clone()))
    }

    /// Buffers the part of `batch` from `lsn_from` on: a receiver that accepts a batch
    /// overlapping what it already held (`lsn_base <= lsn_appended < lsn_last`) stores only the
    /// records it did not have, `lsn_from == lsn_appended + 1`. With `lsn_from == lsn_base` this
    /// is [`Wal::append`].
    ///
    /// Panics unless `lsn_base <= lsn_from <= lsn_last` and the trimmed batch continues the log.
    /// A batch whose records do not decode (checksummed, but sealed by a buggy peer) cannot be
    /// trimmed: [`WalError::Undecodable`], and nothing is appended.
    pub fn append_from(&mut self, batch: &SealedBatch, lsn_from: u64) -> Result<(), WalError> {
        self.refuse_if_poisoned()?;
        assert!(
            batch.lsn_base() <= lsn_from,
            "append_from starts inside the batch"
        );
        assert!(
            lsn_from <= batch.lsn_last(),
            "append_from starts inside the batch"
        );
        if lsn_from == batch.lsn_base() {
            return self.append(batch);
        }
        let trimmed = batch
            .try_trimmed(lsn_from, batch.lsn_last())
            .map_err(|error| WalError::Undecodable { lsn_from, error })?;
        self.append(&trimmed)
    }

    /// Buffers an image chunk to be written by the next [`Wal::sync`], as [`Wal::append`] does
    /// a batch.
    ///
    /// Panics unless the chunk continues the log (a caller bug): an image's first chunk needs
    /// `lsn_from <= lsn_appended < lsn` (an empty log takes any first chunk), every later one
    /// is the next chunk of the same image (same `lsn_from`, `lsn` and `count`, `index + 1`),
    /// and nothing else may come between them. The log's LSN moves to the image's `lsn` only
    /// with its last chunk: until then [`Wal::lsn_appended`] and what [`Wal::sync`] reports
    /// stay where they were.
    pub fn append_chunk(&mut self, chunk: &ImageChunk) -> Result<(), WalError> {
        chunk.assert_valid();
        self.append_entry(Entry::Image(chunk.clone()))
    }

    fn append_entry(&mut self, entry: Entry) -> Result<(), WalError> {
        // A poisoned log takes nothing, so it no longer knows what would continue it.
        self.refuse_if_poisoned()?;
        match self.position.check(&entry) {
            Ok(()) => {}
            Err(Discontinuity::Lsn {
                lsn_expected,
                lsn_found,
            }) => panic!(
                "a batch appended to the log must continue it: expected LSN {lsn_expected}, \
                 got {lsn_found}"
            ),
            Err(Discontinuity::Image(why)) => {
                panic!("an entry appended to the log must continue it, not {why}")
            }
        }
        assert!(self.lsn_durable <= self.position.lsn());
        self.position.advance(&entry);
        self.buffered.push(entry);
        Ok(())
    }

    /// Writes every buffered entry to the segment files, syncs once (and once more per segment
    /// closed on the way), and returns the durable LSN: the end of the last complete entry,
    /// every entry appended before this call being then on disk. The chunks of an unfinished
    /// image are written and synced too, but the image is not durable until its last chunk is:
    /// recovery would cut it away.
    ///
    /// With nothing buffered it does no I/O and returns the durable LSN as it is.
    pub fn sync(&mut self) -> Result<u64, WalError> {
        assert!(self.lsn_durable <= self.position.lsn());
        self.refuse_if_poisoned()?;
        if self.buffered.is_empty() && !self.written_unsynced {
            assert_eq!(self.lsn_durable, self.position.lsn());
            return Ok(self.lsn_durable);
        }
        let lsn_target = self.position.lsn();
        let synced = if self.buffered.is_empty() {
            self.sync_current()
        } else {
            self.write_buffered(true)
        };
        if let Err(cause) = synced {
            return Err(self.poison(cause));
        }
        assert!(self.buffered.is_empty());
        self.written_unsynced = false;
        self.lsn_durable = lsn_target;
        if planted(Bug::ImageDurableBeforeLastChunk)
            && let Some(open) = self.position.image_open
        {
            return Ok(open.lsn);
        }
        Ok(self.lsn_durable)
    }

    /// Writes every buffered entry to the segment files without syncing the last one (a
    /// segment closed on the way is synced, as by [`Wal::sync`]): the bytes reach the page
    /// cache, so a crash of the process loses none of them, but nothing more is durable and
    /// the durable LSN does not move. A node whose policy leaves syncing to the operating
    /// system calls it, so that its next sync has little left to write.
    pub fn write(&mut self) -> Result<(), WalError> {
        self.refuse_if_poisoned()?;
        if self.buffered.is_empty() {
            return Ok(());
        }
        if let Err(cause) = self.write_buffered(false) {
            return Err(self.poison(cause));
        }
        self.written_unsynced = true;
        self.lsn_written = self.position.lsn();
        Ok(())
    }

    /// Syncs the current segment, which holds bytes [`Wal::write`] wrote.
    fn sync_current(&mut self) -> Result<(), String> {
        let segment = self
            .current
            .as_mut()
            .expect("bytes were written to a current segment");
        let path = segment_path(&self.dir, segment.seq);
        self.disk
            .sync(&mut segment.file)
            .map_err(|error| io_cause("syncing segment", &path, error))
    }

    fn write_buffered(&mut self, sync: bool) -> Result<(), String> {
        let entries = std::mem::take(&mut self.buffered);
        let bytes_total: usize = entries
            .iter()
            .map(|e| FRAME_HEADER_LEN + entry_len(e))
            .sum();
        let mut pending = Vec::with_capacity(bytes_total + SEGMENT_HEADER_LEN);
        for entry in &entries {
            let frame_len = (FRAME_HEADER_LEN + entry_len(entry)) as u64;
            let roll = match &self.current {
                None => true,
                Some(segment) => {
                    segment.entry_count > 0
                        && segment.bytes_len + frame_len > self.options.segment_bytes_max
                }
            };
            if roll {
                self.roll(&mut pending)?;
            }
            let segment = self.current.as_mut().expect("a segment was begun above");
            let bytes = entry_bytes(entry);
            encode_frame(&bytes, &mut pending);
            let frame = Frame::of(entry, segment.seq, segment.bytes_len, bytes.len());
            assert!(
                self.frames
                    .back()
                    .is_none_or(|last| last.lsn_last <= frame.lsn_last)
            );
            self.frames.push_back(frame);
            segment.bytes_len += frame_len;
            segment.entry_count += 1;
        }
        let segment = self
            .current
            .as_mut()
            .expect("at least one entry was written");
        // The path names the segment in an error only: it is not built for every write.
        let path = || segment_path(&self.dir, segment.seq);
        self.disk
            .append(&mut segment.file, &pending)
            .map_err(|error| io_cause("appending to segment", &path(), error))?;
        let grew = segment.bytes_len > segment.bytes_allocated;
        segment.bytes_allocated = segment.bytes_allocated.max(segment.bytes_len);
        let room = (segment.bytes_len + self.options.preallocate_bytes)
            .min(self.options.segment_bytes_max)
            .max(segment.bytes_len);
        let mut synced = false;
        if grew && room > segment.bytes_len {
            // These bytes grew the file, so their sync commits the journal anyway: the same
            // sync zeroes room after them (up to the segment's size) for the next groups,
            // whose syncs then overwrite and need not grow the file. The zeros go after the
            // entries, never before them: a crash in between leaves entries, not zeros where
            // the segment's header should be.
            self.disk
                .extend_zeroed(&mut segment.file, room)
                .map_err(|error| io_cause("preallocating segment", &path(), error))?;
            segment.bytes_allocated = room;
            synced = true;
        }
        if sync && !synced && !planted(Bug::AckBeforeSync) {
            self.disk
                .sync(&mut segment.file)
                .map_err(|error| io_cause("syncing segment", &path(), error))?;
        }
        Ok(())
    }

    /// Closes the current segment (writing and syncing what is pending for it) and begins the
    /// next one; its header goes into `pending`.
    fn roll(&mut self, pending: &mut Vec<u8>) -> Result<(), String> {
        // The closing segment is synced whole: what `write` left in it unsynced too, since a
        // later sync only syncs the segment current then.
        if let Some(segment) = &mut self.current
            && (!pending.is_empty() || self.written_unsynced)
        {
            let path = segment_path(&self.dir, segment.seq);
            if !pending.is_empty() {
                self.disk
                    .append(&mut segment.file, pending)
                    .map_err(|error| io_cause("appending to segment", &path, error))?;
            }
            self.disk
                .sync(&mut segment.file)
                .map_err(|error| io_cause("syncing segment", &path, error))?;
            pending.clear();
        }
        // A closed segment ends at its last entry: its preallocated zeros go, durably, before
        // the next segment exists, so that only the newest segment ever ends in zeros.
        if let Some(segment) = &mut self.current
            && segment.bytes_allocated > segment.bytes_len
        {
            let path = segment_path(&self.dir, segment.seq);
            self.disk
                .truncate(&path, segment.bytes_len)
                .map_err(|error| io_cause("truncating segment", &path, error))?;
            segment.bytes_allocated = segment.bytes_len;
        }
        assert!(pending.is_empty());
        let (file, seq) = self.create_segment()?;
        encode_segment_header(seq, pending);
        self.current = Some(Segment {
            file,
            seq,
            bytes_len: SEGMENT_HEADER_LEN as u64,
            bytes_allocated: 0,
            entry_count: 0,
        });
        Ok(())
    }

    /// Creates the next segment file, durably (its directory entry synced), and counts it in
    /// `segments`; the caller writes its header.
    fn create_segment(&mut self) -> Result<(D::File, u64), String> {
        let seq = self.seq_next;
        let path = segment_path(&self.dir, seq);
        let file = self
            .disk
            .create(&path)
            .map_err(|error| io_cause("creating segment", &path, error))?;
        // The new file's entry must be durable before anything in it is reported durable.
        self.disk
            .sync_dir(&self.dir)
            .map_err(|error| io_cause("syncing log directory", &self.dir, error))?;
        assert!(self.segments.back().is_none_or(|&last| last < seq));
        self.segments.push_back(seq);
        self.seq_next = seq + 1;
        Ok((file, seq))
    }

    /// Removes the segment files all of whose entries are at or below `lsn` (a checkpoint covers
    /// them), oldest first, and returns how many. The newest segment file is always kept, so the
    /// log still knows where it ends, and removal stops only before a segment that begins with
    /// an entry's start (a batch, or an image's first chunk): the segments an image spans go
    /// together or not at all.
    ///
    /// Each removal is made durable (the directory synced) before the next one begins. Removals
    /// that are not yet durable may be undone by a crash independently of each other, so
    /// removing segments 1 and 2 with one directory sync could leave segment 1 back and 2 gone:
    /// a gap, at which recovery would stop and cut every later, durable segment. A crash in the
    /// middle of an image's segments leaves the log beginning with the image's later chunks,
    /// which recovery skips (see [`Wal::open`]).
    pub fn remove_below(&mut self, lsn: u64) -> Result<usize, WalError> {
        self.refuse_if_poisoned()?;
        let sync_each = !planted(Bug::RemoveWithOneDirectorySync);
        // How many of the oldest segments may go: all their entries at or below `lsn`, and the
        // segment after them beginning where an entry begins.
        let mut removable = 0;
        let mut frames = self.frames.iter().peekable();
        for (index, &seq) in self.segments.iter().enumerate() {
            let mut below = true;
            while let Some(frame) = frames.next_if(|frame| frame.seq == seq) {
                below &= frame.lsn_last <= lsn;
            }
            if !below || index + 1 == self.segments.len() {
                break;
            }
            let next_first = frames.peek();
            if next_first.is_some_and(|frame| frame.chunk_index.is_none_or(|index| index == 0)) {
                removable = index + 1;
            }
        }
        for _ in 0..removable {
            let oldest = self.segments[0];
            let path = segment_path(&self.dir, oldest);
            if let Err(error) = self.disk.remove(&path) {
                return Err(self.poison(io_cause("removing segment", &path, error)));
            }
            if sync_each && let Err(error) = self.disk.sync_dir(&self.dir) {
                let cause = io_cause("syncing log directory", &self.dir, error);
                return Err(self.poison(cause));
            }
            while self.frames.front().is_some_and(|frame| frame.seq == oldest) {
                self.frames.pop_front();
            }
            self.segments.pop_front();
        }
        if !sync_each
            && removable > 0
            && let Err(error) = self.disk.sync_dir(&self.dir)
        {
            let cause = io_cause("syncing log directory", &self.dir, error);
            return Err(self.poison(cause));
        }
        assert!(!self.segments.is_empty() || self.current.is_none());
        assert!(
            self.frames
                .front()
                .is_none_or(|frame| frame.chunk_index.is_none_or(|index| index == 0)),
            "the log begins where an entry begins"
        );
        Ok(removable)
    }

    /// Begins a checkpoint: an image of the database as it stood at `lsn`, in `chunk_count`
    /// chunks that [`Wal::checkpoint_append`] adds and [`Wal::checkpoint_finish`] completes. The
    /// chunks go to a temporary file (`ckpt-<lsn>.tmp`), which recovery removes unread: until
    /// `checkpoint_finish` returns, the checkpoint does not exist for recovery.
    ///
    /// Panics (a caller bug) if a checkpoint is already being written, if `lsn` is 0, or if
    /// `lsn` is not above the newest durable checkpoint's. `lsn` may lie above what the log
    /// holds (a node that applies records before the log syncs them); recovery then keeps the
    /// checkpoint and empties the log if it ends before `lsn`.
    pub fn checkpoint_begin(
        &mut self,
        lsn: u64,
        view: u64,
        chunk_count: u32,
    ) -> Result<(), WalError> {
        assert!(
            self.checkpoint_writing.is_none(),
            "a checkpoint is already being written"
        );
        assert!(
            lsn >= 1,
            "a checkpoint stands at an LSN, and LSNs start at 1"
        );
        assert!(
            self.lsn_checkpoint().is_none_or(|newest| newest < lsn),
            "a checkpoint must stand above the newest one"
        );
        self.refuse_if_poisoned()?;
        let path = checkpoint_path(&self.dir, lsn, true);
        let mut file = match self.disk.create(&path) {
            Ok(file) => file,
            Err(error) => return Err(self.poison(io_cause("creating checkpoint", &path, error))),
        };
        let mut header = Vec::new();
        encode_checkpoint_header(lsn, view, chunk_count, &mut header);
        if let Err(error) = self.disk.append(&mut file, &header) {
            return Err(self.poison(io_cause("appending to checkpoint", &path, error)));
        }
        self.checkpoint_writing = Some(CheckpointWriting {
            file,
            lsn,
            chunk_count,
            chunks_written: 0,
        });
        Ok(())
    }

    /// Appends the next chunk of the checkpoint being written, to the page cache only: one
    /// sync in [`Wal::checkpoint_finish`] covers them all.
    ///
    /// Panics without a checkpoint begun, or past the chunk count it announced.
    pub fn checkpoint_append(&mut self, chunk: &[u8]) -> Result<(), WalError> {
        let writing = self
            .checkpoint_writing
            .as_ref()
            .expect("checkpoint_append after checkpoint_begin");
        assert!(
            writing.chunks_written < writing.chunk_count,
            "more checkpoint chunks than checkpoint_begin announced"
        );
        self.refuse_if_poisoned()?;
        let writing = self.checkpoint_writing.as_mut().expect("checked above");
        let mut bytes = Vec::with_capacity(CHECKPOINT_CHUNK_HEADER_LEN + chunk.len());
        encode_checkpoint_chunk(writing.chunks_written, chunk, &mut bytes);
        if let Err(error) = self.disk.append(&mut writing.file, &bytes) {
            let path = checkpoint_path(&self.dir, writing.lsn, true);
            return Err(self.poison(io_cause("appending to checkpoint", &path, error)));
        }
        writing.chunks_written += 1;
        Ok(())
    }

    /// Completes the checkpoint being written and returns its LSN, once it is durable and the
    /// log's segments it covers are gone.
    ///
    /// The order is what makes every crash leave a complete checkpoint or none (see
    /// `docs/wal.md`): the trailer is appended and the file synced; only then is it renamed to
    /// its final name (`ckpt-<lsn>.ckpt`) and the directory synced, which makes it the
    /// checkpoint recovery finds. Renaming first could leave, after a crash, a file under the
    /// final name whose bytes never reached the disk. Then the older checkpoint files are
    /// removed (the directory synced once: an older one that comes back is superseded), and
    /// last [`Wal::remove_below`] drops the segments the checkpoint covers, which only a
    /// durable checkpoint may do.
    ///
    /// Panics without a checkpoint begun, or before all its chunks are appended.
    pub fn checkpoint_finish(&mut self) -> Result<u64, WalError> {
        let writing = self
            .checkpoint_writing
            .as_ref()
            .expect("checkpoint_finish after checkpoint_begin");
        assert_eq!(
            writing.chunks_written, writing.chunk_count,
            "checkpoint_finish after every chunk checkpoint_begin announced"
        );
        self.refuse_if_poisoned()?;
        let mut writing = self.checkpoint_writing.take().expect("checked above");
        let lsn = writing.lsn;
        if let Err(cause) = self.write_checkpoint_out(&mut writing) {
            return Err(self.poison(cause));
        }
        drop(writing);
        self.checkpoints.push(lsn);
        assert!(self.checkpoints.is_sorted());
        let older: Vec<u64> = self
            .checkpoints
            .iter()
            .copied()
            .filter(|&c| c < lsn)
            .collect();
        for &older_lsn in &older {
            let path = checkpoint_path(&self.dir, older_lsn, false);
            if let Err(error) = self.disk.remove(&path) {
                return Err(self.poison(io_cause("removing checkpoint", &path, error)));
            }
        }
        if !older.is_empty() {
            if let Err(error) = self.disk.sync_dir(&self.dir) {
                let cause = io_cause("syncing log directory", &self.dir, error);
                return Err(self.poison(cause));
            }
            self.checkpoints.retain(|&c| c == lsn);
        }
        self.remove_below(lsn)?;
        Ok(lsn)
    }

    /// The durable steps of [`Wal::checkpoint_finish`]: the trailer, the file's sync, the
    /// rename and the directory's sync.
    fn write_checkpoint_out(
        &mut self,
        writing: &mut CheckpointWriting<D::File>,
    ) -> Result<(), String> {
        let path_temp = checkpoint_path(&self.dir, writing.lsn, true);
        let path = checkpoint_path(&self.dir, writing.lsn, false);
        let mut trailer = Vec::new();
        encode_checkpoint_trailer(writing.lsn, writing.chunk_count, &mut trailer);
        self.disk
            .append(&mut writing.file, &trailer)
            .map_err(|error| io_cause("appending to checkpoint", &path_temp, error))?;
        if !planted(Bug::CheckpointRenamedBeforeSync) {
            self.disk
                .sync(&mut writing.file)
                .map_err(|error| io_cause("syncing checkpoint", &path_temp, error))?;
        }
        self.disk
            .rename(&path_temp, &path)
            .map_err(|error| io_cause("renaming checkpoint", &path_temp, error))?;
        self.disk
            .sync_dir(&self.dir)
            .map_err(|error| io_cause("syncing log directory", &self.dir, error))
    }

    /// Gives up the checkpoint being written, if any, and removes its temporary file, durably:
    /// the view change rewound the node past it, or the node's role ended.
    pub fn checkpoint_abandon(&mut self) -> Result<(), WalError> {
        let Some(writing) = self.checkpoint_writing.take() else {
            return Ok(());
        };
        self.refuse_if_poisoned()?;
        if let Err(cause) = self.remove_checkpoint_files(Some(writing.lsn), &[]) {
            return Err(self.poison(cause));
        }
        Ok(())
    }

    /// Removes the temporary checkpoint file of `temporary` and the complete ones of `complete`,
    /// then syncs the directory once.
    fn remove_checkpoint_files(
        &mut self,
        temporary: Option<u64>,
        complete: &[u64],
    ) -> Result<(), String> {
        let paths = temporary
            .map(|lsn| checkpoint_path(&self.dir, lsn, true))
            .into_iter()
            .chain(
                complete
                    .iter()
                    .map(|&lsn| checkpoint_path(&self.dir, lsn, false)),
            );
        let paths: Vec<PathBuf> = paths.collect();
        for path in &paths {
            self.disk
                .remove(path)
                .map_err(|error| io_cause("removing checkpoint", path, error))?;
        }
        if !paths.is_empty() {
            self.disk
                .sync_dir(&self.dir)
                .map_err(|error| io_cause("syncing log directory", &self.dir, error))?;
        }
        Ok(())
    }

    /// The LSN of the newest durable checkpoint: recovered, or completed by
    /// [`Wal::checkpoint_finish`] (`None` once a cut below it deleted it).
    pub fn lsn_checkpoint(&self) -> Option<u64> {
        self.checkpoints.last().copied()
    }

    /// The LSN of the checkpoint being written, if one is.
    pub fn lsn_checkpoint_writing(&self) -> Option<u64> {
        self.checkpoint_writing.as_ref().map(|writing| writing.lsn)
    }

    /// Cuts the log so that it ends at `lsn`, durably, and returns the LSN it now ends at: a
    /// member whose segment a view change rewound to `lsn` discards its records above it.
    ///
    /// A checkpoint above `lsn` describes a history the cluster discarded: first of all, every
    /// checkpoint file above `lsn` (complete or temporary) is removed and the directory synced,
    /// and a checkpoint being written above `lsn` is abandoned (one at or below `lsn` goes on).
    /// [`Wal::lsn_checkpoint`] then says which checkpoint, if any, is left; what is returned is
    /// still where the log's own entries end.
    ///
    /// Entries wholly above `lsn` go, buffered or written; a batch that straddles `lsn` is
    /// replaced by its prefix up to `lsn` ([`SealedBatch::trimmed`]). An image cannot be kept in
    /// part: a cut below an image's `lsn` cuts before the image, and the log then ends at the
    /// entry before it, below `lsn`. What it returns:
    /// - `lsn`, normally;
    /// - less than `lsn` when `lsn` falls inside an image (or an unfinished image is dropped),
    ///   or inside a batch whose records do not decode (it cannot be trimmed, so it goes whole);
    /// - [`Wal::lsn_appended`] when `lsn` is at or above it (nothing is cut but an unfinished
    ///   image ending above `lsn`);
    /// - 0 when nothing is left (`lsn` below the log's first record or image): the log is then
    ///   empty and, as a fresh one, takes its next entry at any LSN.
    ///
    /// When it returns `Ok`, everything kept is durable: [`Wal::lsn_durable`] and
    /// [`Wal::lsn_appended`] equal what it returned, and appends continue from there.
    ///
    /// On disk, the order is what makes a crash at any point recover either the log as it was
    /// before the cut or the log after it (see `docs/wal.md`): the segment files after the one
    /// holding the first entry to go are removed, newest first, each removal made durable before
    /// the next; a straddling batch's prefix is written to a new segment file and synced; only
    /// then is the entry's own file truncated at the entry's frame (or removed, if nothing
    /// before it is left in it). Truncating first would leave, until the prefix is written, a
    /// log that ends below `lsn` and has lost records a sync reported durable.
    pub fn cut_after(&mut self, lsn: u64) -> Result<u64, WalError> {
        self.refuse_if_poisoned()?;
        assert!(self.lsn_durable <= self.position.lsn());
        // Checkpoints go before any entry does: until the cut returns, recovery may find the
        // log before the cut, which an older checkpoint or none continues as well.
        if !planted(Bug::CutKeepsCheckpoint) {
            let writing_above = self.lsn_checkpoint_writing().filter(|&c| c > lsn);
            if writing_above.is_some() {
                self.checkpoint_writing = None;
            }
            let above: Vec<u64> = self
                .checkpoints
                .iter()
                .copied()
                .filter(|&c| c > lsn)
                .collect();
            if let Err(cause) = self.remove_checkpoint_files(writing_above, &above) {
                return Err(self.poison(cause));
            }
            self.checkpoints.retain(|&c| c <= lsn);
        }
        // What `write` left unsynced is made durable first: a cut reports all it keeps
        // durable, and a cut in the buffer alone touches no file.
        if self.written_unsynced {
            if let Err(cause) = self.sync_current() {
                return Err(self.poison(cause));
            }
            self.written_unsynced = false;
            self.lsn_durable = self.lsn_written;
        }
        if let Some(at) = self.frames.iter().position(|frame| frame.lsn_last > lsn) {
            self.buffered.clear();
            if let Err(cause) = self.cut_written(at, lsn) {
                return Err(self.poison(cause));
            }
        } else if let Some(at) = self.buffered.iter().position(|e| e.lsn_last() > lsn) {
            let first_cut = self.buffered[at].clone();
            self.buffered.truncate(at);
            let prefix = match &first_cut {
                Entry::Batch(batch) if batch.lsn_base() <= lsn => prefix_of(batch, lsn),
                _ => None,
            };
            let lsn_end = match prefix {
                Some(prefix) => {
                    self.buffered.push(Entry::Batch(prefix));
                    Some(lsn)
                }
                None => match self.buffered.last() {
                    Some(entry) => Some(entry.lsn_last()),
                    None => self.frames.back().map(|frame| frame.lsn_last),
                },
            };
            self.position = Position {
                lsn_last: lsn_end,
                image_open: None,
            };
        }
        // Whatever is still buffered (kept entries, a trimmed batch) is made durable too.
        let lsn_end = self.sync()?;
        assert_eq!(lsn_end, self.position.lsn());
        assert!(lsn_end <= lsn, "a cut never leaves the log ending above it");
        Ok(lsn_end)
    }

    /// The written part of [`Wal::cut_after`]: `frames[at]` is the first written entry ending
    /// above `lsn`, and the buffer is already empty.
    fn cut_written(&mut self, at: usize, lsn: u64) -> Result<(), String> {
        assert!(self.buffered.is_empty());
        let first_cut = self.frames[at];
        assert!(first_cut.lsn_last > lsn);
        // The first entry of an image to go is its first chunk: all its chunks end at its lsn,
        // and remove_below never leaves an image without its first chunk.
        assert!(first_cut.chunk_index.is_none_or(|index| index == 0));
        let path_cut = segment_path(&self.dir, first_cut.seq);
        // A straddling batch is read back now, before anything is cut.
        let straddling = first_cut.chunk_index.is_none() && first_cut.lsn_first <= lsn;
        let prefix = if straddling {
            let bytes = self
                .disk
                .read(&path_cut)
                .map_err(|error| io_cause("reading segment", &path_cut, error))?;
            let start = first_cut.offset as usize + FRAME_HEADER_LEN;
            let payload = bytes
                .get(start..start + first_cut.len as usize)
                .ok_or_else(|| format!("segment {} is shorter than written", path_cut.display()))?;
            let batch = SealedBatch::verify(Arc::from(payload))
                .map_err(|error| format!("re-reading {}: {error}", path_cut.display()))?;
            assert_eq!(batch.lsn_base(), first_cut.lsn_first);
            prefix_of(&batch, lsn)
        } else {
            None
        };
        let lsn_end = if prefix.is_some() {
            Some(lsn)
        } else {
            at.checked_sub(1).map(|before| self.frames[before].lsn_last)
        };

        // The later segment files go, newest first, each removal durable before the next.
        self.current = None;
        while self.segments.back().is_some_and(|&seq| seq > first_cut.seq) {
            let seq = self.segments.pop_back().expect("checked above");
            let path = segment_path(&self.dir, seq);
            self.disk
                .remove(&path)
                .map_err(|error| io_cause("removing segment", &path, error))?;
            self.disk
                .sync_dir(&self.dir)
                .map_err(|error| io_cause("syncing log directory", &self.dir, error))?;
        }
        assert_eq!(self.segments.back(), Some(&first_cut.seq));
        self.frames.truncate(at);
        let truncate_first = planted(Bug::CutTruncatesBeforeWritingPrefix);
        if truncate_first {
            self.truncate_at(first_cut)?;
        }
        // The straddling batch's prefix goes to a new segment file, sorting after the cut one.
        let mut segment_prefix = None;
        if let Some(prefix) = &prefix {
            let (mut file, seq) = self.create_segment()?;
            let path = segment_path(&self.dir, seq);
            let mut bytes =
                Vec::with_capacity(SEGMENT_HEADER_LEN + FRAME_HEADER_LEN + prefix.len());
            encode_segment_header(seq, &mut bytes);
            encode_frame(prefix.bytes(), &mut bytes);
            self.disk
                .append(&mut file, &bytes)
                .map_err(|error| io_cause("appending to segment", &path, error))?;
            self.disk
                .sync(&mut file)
                .map_err(|error| io_cause("syncing segment", &path, error))?;
            let entry = Entry::Batch(prefix.clone());
            let frame = Frame::of(&entry, seq, SEGMENT_HEADER_LEN as u64, prefix.len());
            segment_prefix = Some((file, seq, frame));
        }
        if !truncate_first {
            self.truncate_at(first_cut)?;
        }

        // The writer continues in the prefix's segment, or in the last one left.
        if let Some((file, seq, frame)) = segment_prefix {
            self.frames.push_back(frame);
            self.current = Some(Segment {
                file,
                seq,
                bytes_len: frame.end(),
                bytes_allocated: frame.end(),
                entry_count: 1,
            });
        } else if let Some(&seq) = self.segments.back() {
            let path = segment_path(&self.dir, seq);
            let file = self
                .disk
                .open_append(&path)
                .map_err(|error| io_cause("opening segment", &path, error))?;
            let held = self.frames.iter().filter(|frame| frame.seq == seq);
            let (entry_count, bytes_len) = held.fold((0, SEGMENT_HEADER_LEN as u64), |acc, f| {
                (acc.0 + 1, f.end())
            });
            assert!(entry_count > 0, "a kept segment holds an entry");
            // `truncate_at` cut it to its last entry, zeros and all.
            self.current = Some(Segment {
                file,
                seq,
                bytes_len,
                bytes_allocated: bytes_len,
                entry_count,
            });
        }
        assert_eq!(self.frames.back().map(|frame| frame.lsn_last), lsn_end);
        self.position = Position {
            lsn_last: lsn_end,
            image_open: None,
        };
        self.lsn_durable = self.position.lsn();
        self.written_unsynced = false;
        Ok(())
    }

    /// Cuts the segment holding `frame` at the frame's start: truncated (durable on return), or
    /// removed and the removal synced when no entry before the frame is left in it. The frames
    /// from `frame` on are already out of `frames`.
    fn truncate_at(&mut self, frame: Frame) -> Result<(), String> {
        let path = segment_path(&self.dir, frame.seq);
        // Bytes before the first kept frame may be the skipped chunks of an image a checkpoint
        // removed (see `Wal::open`): a file with no kept entry left goes whole.
        let entries_left = self.frames.iter().any(|kept| kept.seq == frame.seq);
        if entries_left {
            assert!(frame.offset > SEGMENT_HEADER_LEN as u64);
            return self
                .disk
                .truncate(&path, frame.offset)
                .map_err(|error| io_cause("truncating segment", &path, error));
        }
        self.disk
            .remove(&path)
            .map_err(|error| io_cause("removing segment", &path, error))?;
        self.disk
            .sync_dir(&self.dir)
            .map_err(|error| io_cause("syncing log directory", &self.dir, error))?;
        let at = self.segments.iter().position(|&seq| seq == frame.seq);
        self.segments.remove(at.expect("the cut segment is listed"));
        Ok(())
    }

    fn poison(&mut self, cause: String) -> WalError {
        assert!(self.poisoned.is_none(), "a poisoned log does no more I/O");
        self.poisoned = Some(cause.clone());
        WalError::Poisoned { cause }
    }

    fn refuse_if_poisoned(&self) -> Result<(), WalError> {
        match &self.poisoned {
            None => Ok(()),
            Some(cause) => Err(WalError::Poisoned {
                cause: cause.clone(),
            }),
        }
    }

    /// The first I/O error's text, once the log is poisoned.
    pub fn poisoned(&self) -> Option<&str> {
        self.poisoned.as_deref()
    }

    /// LSN of the last complete entry appended: a batch's last record or a finished image's
    /// `lsn` (0 for a log that holds none).
    pub fn lsn_appended(&self) -> u64 {
        self.position.lsn()
    }

    /// LSN of the last complete entry known to be on disk: recovered, or written by a
    /// successful sync or cut.
    pub fn lsn_durable(&self) -> u64 {
        self.lsn_durable
    }

    /// The LSN the log's history starts after (as [`Recovered::lsn_base`]): a cut below it
    /// leaves an empty log. `None` for a log that holds nothing. It speaks of the log's own
    /// entries only: with a checkpoint ([`Wal::lsn_checkpoint`]) the state starts from the
    /// checkpoint, and the log from at or below its LSN.
    pub fn lsn_base(&self) -> Option<u64> {
        match (self.frames.front(), self.buffered.first()) {
            (Some(frame), _) if frame.chunk_index.is_none() => Some(frame.lsn_first - 1),
            (Some(frame), _) => Some(frame.lsn_first),
            (None, Some(Entry::Batch(batch))) => Some(batch.lsn_base() - 1),
            (None, Some(Entry::Image(chunk))) => Some(chunk.lsn_from),
            (None, None) => None,
        }
    }

    /// Entries the log holds, written or buffered: the tests' model of the log needs to know
    /// how many of the oldest `remove_below` took.
    #[cfg(test)]
    pub(crate) fn entries_held(&self) -> usize {
        self.frames.len() + self.buffered.len()
    }

    /// Whether an image has begun and its last chunk is not appended yet.
    pub fn image_unfinished(&self) -> bool {
        self.position.image_open.is_some()
    }

    /// Bytes of the entries appended since the last sync, so a caller can bound them.
    pub fn bytes_buffered(&self) -> usize {
        self.buffered.iter().map(entry_len).sum()
    }

    /// Sequence numbers of the segment files, oldest first.
    pub fn segments(&self) -> Vec<u64> {
        self.segments.iter().copied().collect()
    }

    /// The first LSN of the first entry of each segment file, oldest first: a batch's first
    /// record, or an image chunk's `lsn_from` (what its image's history starts after).
    pub fn segments_lsn_first(&self) -> Vec<u64> {
        let mut firsts = Vec::new();
        let mut last_seq = None;
        for frame in &self.frames {
            if last_seq != Some(frame.seq) {
                firsts.push(frame.lsn_first);
                last_seq = Some(frame.seq);
            }
        }
        firsts
    }

    pub fn disk(&self) -> &D {
        &self.disk
    }

    pub fn disk_mut(&mut self) -> &mut D {
        &mut self.disk
    }

    /// The disk, giving up the writer (to crash it, or to open the log again).
    pub fn into_disk(self) -> D {
        self.disk
    }
}
