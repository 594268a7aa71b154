//! The writer ([`Wal`]) and recovery ([`Wal::open`], [`Recovered`]).

use std::collections::VecDeque;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tandem_log::{BatchError, SealedBatch};

use crate::Disk;
use crate::bugs::{Bug, planted};
use crate::format::{
    FRAME_HEADER_LEN, SEGMENT_HEADER_LEN, SEGMENT_VERSION, SegmentHeader, decode_frame_len,
    decode_segment_header, encode_frame, encode_segment_header, parse_segment_name, segment_name,
    segment_path,
};

/// How the log lays out its files.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WalOptions {
    /// A segment file is closed and the next one begun once the next batch would take it past
    /// this size. A single batch larger than this gets a segment of its own.
    pub segment_bytes_max: u64,
}

impl Default for WalOptions {
    fn default() -> WalOptions {
        WalOptions {
            segment_bytes_max: 64 * 1024 * 1024,
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
}

/// Where and why recovery ended the log before the end of its files.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Stop {
    /// The segment file is shorter than its header, or the header's checksum fails.
    TornSegmentHeader { file: String },
    /// The segment header names another first LSN than the file's name.
    MisnamedSegment { file: String, lsn_header: u64 },
    /// A frame's length is torn (its check fails) or runs past the end of the file.
    TornFrame { file: String, offset: u64 },
    /// The frame is whole but the batch inside it is not (its checksum, most often).
    CorruptBatch {
        file: String,
        offset: u64,
        error: BatchError,
    },
    /// The batch is valid but does not continue the one before it (the successor check): a
    /// stale batch, or one after a gap.
    NotContinuing {
        file: String,
        offset: u64,
        lsn_expected: u64,
        lsn_found: u64,
    },
}

/// What recovery found and what it cut.
#[derive(Debug, Default)]
pub struct Recovered {
    /// Every batch of the log, oldest first, each continuing the one before, exactly as sealed
    /// (views and all).
    pub batches: Vec<SealedBatch>,
    /// Why the log ended before its files did, if it did.
    pub stop: Option<Stop>,
    /// Bytes cut from the end of the last kept segment, plus the whole size of every segment
    /// file removed.
    pub bytes_cut: u64,
    /// Segment files removed: those holding no valid batch and every one after the stop.
    pub files_removed: usize,
}

impl Recovered {
    /// LSN of the first record in the log, if it holds any.
    pub fn lsn_first(&self) -> Option<u64> {
        self.batches.first().map(SealedBatch::lsn_base)
    }

    /// LSN of the last record in the log, if it holds any.
    pub fn lsn_last(&self) -> Option<u64> {
        self.batches.last().map(SealedBatch::lsn_last)
    }
}

/// The segment file the writer appends to.
#[derive(Debug)]
struct Segment<F> {
    file: F,
    lsn_first: u64,
    bytes_len: u64,
    batch_count: u64,
}

/// The write-ahead log's writer: buffers sealed batches, writes and syncs them to segment files
/// (group commit: one sync for everything buffered), and removes old segments.
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
    /// First LSNs of the segment files, oldest first; the last is `current`'s.
    segments: VecDeque<u64>,
    current: Option<Segment<D::File>>,
    /// Batches appended since the last sync, oldest first.
    buffered: Vec<SealedBatch>,
    lsn_appended: u64,
    lsn_durable: u64,
    poisoned: Option<String>,
}

fn io_cause(what: &str, path: &Path, error: io::Error) -> String {
    format!("{what} {}: {error}", path.display())
}

/// The result of reading one segment file.
#[derive(Debug)]
struct SegmentScan {
    batches: Vec<SealedBatch>,
    /// Bytes up to the end of the last valid batch; 0 when there is none.
    len_valid: usize,
    stop: Option<Stop>,
}

/// Reads the batches of one segment file up to the first torn, corrupt or non-continuing one.
/// `lsn_next` is the LSN the previous segment's last batch makes the next one (`None` for the
/// first segment, which may start anywhere: older segments may have been removed).
fn scan_segment(
    file: &str,
    lsn_name: u64,
    bytes: &[u8],
    lsn_next: Option<u64>,
) -> Result<SegmentScan, WalError> {
    assert!(lsn_name >= 1);
    let successor_checked = !planted(Bug::SkipSuccessorCheck);
    let mut scan = SegmentScan {
        batches: Vec::new(),
        len_valid: 0,
        stop: None,
    };
    let file = file.to_owned();
    match decode_segment_header(bytes) {
        SegmentHeader::Torn => {
            scan.stop = Some(Stop::TornSegmentHeader { file });
            return Ok(scan);
        }
        SegmentHeader::OtherVersion { version } => {
            return Err(WalError::Version {
                file,
                found: version,
            });
        }
        SegmentHeader::Valid { lsn_first } if lsn_first != lsn_name => {
            scan.stop = Some(Stop::MisnamedSegment {
                file,
                lsn_header: lsn_first,
            });
            return Ok(scan);
        }
        SegmentHeader::Valid { .. } => {}
    }
    if let Some(lsn_expected) = lsn_next
        && lsn_expected != lsn_name
        && successor_checked
    {
        scan.stop = Some(Stop::NotContinuing {
            file,
            offset: 0,
            lsn_expected,
            lsn_found: lsn_name,
        });
        return Ok(scan);
    }
    let mut lsn_expected = lsn_name;
    let mut offset = SEGMENT_HEADER_LEN;
    while offset < bytes.len() {
        let rest = &bytes[offset..];
        let offset_u64 = offset as u64;
        let Some(len) = decode_frame_len(rest) else {
            scan.stop = Some(Stop::TornFrame {
                file,
                offset: offset_u64,
            });
            break;
        };
        let batch_bytes = &rest[FRAME_HEADER_LEN..FRAME_HEADER_LEN + len];
        let batch = match SealedBatch::verify(Arc::from(batch_bytes)) {
            Ok(batch) => batch,
            Err(error) => {
                scan.stop = Some(Stop::CorruptBatch {
                    file,
                    offset: offset_u64,
                    error,
                });
                break;
            }
        };
        if batch.lsn_base() != lsn_expected && successor_checked {
            scan.stop = Some(Stop::NotContinuing {
                file,
                offset: offset_u64,
                lsn_expected,
                lsn_found: batch.lsn_base(),
            });
            break;
        }
        lsn_expected = batch.lsn_last() + 1;
        scan.batches.push(batch);
        offset += FRAME_HEADER_LEN + len;
        scan.len_valid = offset;
    }
    assert!(scan.len_valid <= bytes.len());
    assert_eq!(scan.batches.is_empty(), scan.len_valid == 0);
    Ok(scan)
}

impl<D: Disk> Wal<D> {
    /// Recovers the log in `dir` (creating the directory if needed) and returns a writer that
    /// continues after it, with what was recovered.
    ///
    /// Recovery reads the segment files in LSN order and keeps batches while each one parses
    /// (its frame's length check and its own CRC32C hold) and continues the one before. At the
    /// first that does not, it cuts the log there, durably: the segment file is truncated after
    /// its last valid batch (or removed if it holds none), and every later segment file is
    /// removed, since none of them can continue a log that ended before it.
    pub fn open(
        mut disk: D,
        dir: &Path,
        options: WalOptions,
    ) -> Result<(Wal<D>, Recovered), WalError> {
        let smallest_segment =
            SEGMENT_HEADER_LEN + FRAME_HEADER_LEN + tandem_log::batch::HEADER_LEN;
        assert!(
            options.segment_bytes_max >= smallest_segment as u64,
            "a segment must hold at least its header and one empty-payload batch"
        );
        let poisoned = |cause| WalError::Poisoned { cause };
        disk.create_dir_all(dir)
            .map_err(|error| poisoned(io_cause("creating log directory", dir, error)))?;
        let names = disk
            .list(dir)
            .map_err(|error| poisoned(io_cause("listing log directory", dir, error)))?;
        let mut lsns_first: Vec<u64> = names.iter().filter_map(|n| parse_segment_name(n)).collect();
        lsns_first.sort_unstable();

        let mut recovered = Recovered::default();
        let mut segments = VecDeque::new();
        let mut tail = None;
        let mut lsn_next = None;
        let mut index = 0;
        while index < lsns_first.len() {
            let lsn_name = lsns_first[index];
            index += 1;
            let path = segment_path(dir, lsn_name);
            let bytes = disk
                .read(&path)
                .map_err(|error| poisoned(io_cause("reading segment", &path, error)))?;
            let scan = scan_segment(&segment_name(lsn_name), lsn_name, &bytes, lsn_next)?;
            let cut = (bytes.len() - scan.len_valid) as u64;
            if scan.batches.is_empty() {
                disk.remove(&path)
                    .map_err(|error| poisoned(io_cause("removing segment", &path, error)))?;
                recovered.files_removed += 1;
            } else {
                if cut > 0 {
                    disk.truncate(&path, scan.len_valid as u64)
                        .map_err(|error| poisoned(io_cause("truncating segment", &path, error)))?;
                }
                let last = scan.batches.last().expect("not empty");
                lsn_next = Some(last.lsn_last() + 1);
                segments.push_back(lsn_name);
                tail = Some((lsn_name, scan.len_valid as u64, scan.batches.len() as u64));
            }
            recovered.bytes_cut += cut;
            recovered.batches.extend(scan.batches);
            if scan.stop.is_some() {
                recovered.stop = scan.stop;
                break;
            }
        }
        for &lsn_name in &lsns_first[index..] {
            let path = segment_path(dir, lsn_name);
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

        let current = match tail {
            None => None,
            Some((lsn_first, bytes_len, batch_count)) => {
                let path = segment_path(dir, lsn_first);
                let file = disk
                    .open_append(&path)
                    .map_err(|error| poisoned(io_cause("opening segment", &path, error)))?;
                Some(Segment {
                    file,
                    lsn_first,
                    bytes_len,
                    batch_count,
                })
            }
        };
        let lsn_last = recovered.lsn_last().unwrap_or(0);
        assert_eq!(
            segments.back().copied(),
            current.as_ref().map(|s| s.lsn_first)
        );
        if !planted(Bug::SkipSuccessorCheck) {
            for pair in recovered.batches.windows(2) {
                assert_eq!(
                    pair[0].lsn_last() + 1,
                    pair[1].lsn_base(),
                    "recovery kept a gap"
                );
            }
        }
        let wal = Wal {
            disk,
            dir: dir.to_path_buf(),
            options,
            segments,
            current,
            buffered: Vec::new(),
            lsn_appended: lsn_last,
            lsn_durable: lsn_last,
            poisoned: None,
        };
        Ok((wal, recovered))
    }

    /// Buffers a batch to be written by the next [`Wal::sync`]; nothing reaches a file yet.
    ///
    /// Panics unless the batch continues the log (its first LSN follows the last appended
    /// one): a caller that appends out of order has a bug. The first batch of an empty log may
    /// start anywhere, since a checkpoint may cover what came before.
    pub fn append(&mut self, batch: &SealedBatch) -> Result<(), WalError> {
        // A poisoned log takes nothing, so it no longer knows what would continue it.
        self.refuse_if_poisoned()?;
        if self.lsn_appended > 0 {
            assert_eq!(
                batch.lsn_base(),
                self.lsn_appended + 1,
                "a batch appended to the log must continue it"
            );
        }
        assert!(self.lsn_durable <= self.lsn_appended);
        self.lsn_appended = batch.lsn_last();
        self.buffered.push(batch.clone());
        Ok(())
    }

    /// Writes every buffered batch to the segment files, syncs once (and once more per segment
    /// closed on the way), and returns the durable LSN: every batch appended before this call
    /// is then on disk.
    ///
    /// With nothing buffered it does no I/O and returns the durable LSN as it is.
    pub fn sync(&mut self) -> Result<u64, WalError> {
        assert!(self.lsn_durable <= self.lsn_appended);
        self.refuse_if_poisoned()?;
        if self.buffered.is_empty() {
            assert_eq!(self.lsn_durable, self.lsn_appended);
            return Ok(self.lsn_durable);
        }
        let lsn_target = self.lsn_appended;
        if let Err(cause) = self.write_and_sync() {
            return Err(self.poison(cause));
        }
        assert!(self.buffered.is_empty());
        self.lsn_durable = lsn_target;
        Ok(self.lsn_durable)
    }

    fn write_and_sync(&mut self) -> Result<(), String> {
        let batches = std::mem::take(&mut self.buffered);
        let bytes_total: usize = batches.iter().map(|b| FRAME_HEADER_LEN + b.len()).sum();
        let mut pending = Vec::with_capacity(bytes_total + SEGMENT_HEADER_LEN);
        for batch in &batches {
            let frame_len = (FRAME_HEADER_LEN + batch.len()) as u64;
            let roll = match &self.current {
                None => true,
                Some(segment) => {
                    segment.batch_count > 0
                        && segment.bytes_len + frame_len > self.options.segment_bytes_max
                }
            };
            if roll {
                self.roll(batch.lsn_base(), &mut pending)?;
            }
            let segment = self.current.as_mut().expect("a segment was begun above");
            encode_frame(batch.bytes(), &mut pending);
            segment.bytes_len += frame_len;
            segment.batch_count += 1;
        }
        let segment = self
            .current
            .as_mut()
            .expect("at least one batch was written");
        let path = segment_path(&self.dir, segment.lsn_first);
        self.disk
            .append(&mut segment.file, &pending)
            .map_err(|error| io_cause("appending to segment", &path, error))?;
        if !planted(Bug::AckBeforeSync) {
            self.disk
                .sync(&mut segment.file)
                .map_err(|error| io_cause("syncing segment", &path, error))?;
        }
        Ok(())
    }

    /// Closes the current segment (writing and syncing what is pending for it) and begins a new
    /// one whose first batch has LSN `lsn_first`; its header goes into `pending`.
    fn roll(&mut self, lsn_first: u64, pending: &mut Vec<u8>) -> Result<(), String> {
        if let Some(segment) = &mut self.current
            && !pending.is_empty()
        {
            let path = segment_path(&self.dir, segment.lsn_first);
            self.disk
                .append(&mut segment.file, pending)
                .map_err(|error| io_cause("appending to segment", &path, error))?;
            self.disk
                .sync(&mut segment.file)
                .map_err(|error| io_cause("syncing segment", &path, error))?;
            pending.clear();
        }
        assert!(pending.is_empty());
        let path = segment_path(&self.dir, lsn_first);
        let file = self
            .disk
            .create(&path)
            .map_err(|error| io_cause("creating segment", &path, error))?;
        // The new file's entry must be durable before anything in it is reported durable.
        self.disk
            .sync_dir(&self.dir)
            .map_err(|error| io_cause("syncing log directory", &self.dir, error))?;
        encode_segment_header(lsn_first, pending);
        assert!(self.segments.back().is_none_or(|&last| last < lsn_first));
        self.segments.push_back(lsn_first);
        self.current = Some(Segment {
            file,
            lsn_first,
            bytes_len: SEGMENT_HEADER_LEN as u64,
            batch_count: 0,
        });
        Ok(())
    }

    /// Removes the segment files all of whose batches are at or below `lsn` (a checkpoint covers
    /// them), oldest first, and returns how many. The newest segment file is always kept, so the
    /// log still knows where it ends.
    ///
    /// Each removal is made durable (the directory synced) before the next one begins. Removals
    /// that are not yet durable may be undone by a crash independently of each other, so
    /// removing segments 1 and 2 with one directory sync could leave segment 1 back and 2 gone:
    /// a gap, at which recovery would stop and cut every later, durable segment.
    pub fn remove_below(&mut self, lsn: u64) -> Result<usize, WalError> {
        self.refuse_if_poisoned()?;
        let sync_each = !planted(Bug::RemoveWithOneDirectorySync);
        let mut removed = 0;
        // A segment's batches end where the next segment's begin.
        while self.segments.len() >= 2 && self.segments[1] <= lsn.saturating_add(1) {
            let path = segment_path(&self.dir, self.segments[0]);
            if let Err(error) = self.disk.remove(&path) {
                return Err(self.poison(io_cause("removing segment", &path, error)));
            }
            if sync_each && let Err(error) = self.disk.sync_dir(&self.dir) {
                let cause = io_cause("syncing log directory", &self.dir, error);
                return Err(self.poison(cause));
            }
            self.segments.pop_front();
            removed += 1;
        }
        if !sync_each
            && removed > 0
            && let Err(error) = self.disk.sync_dir(&self.dir)
        {
            let cause = io_cause("syncing log directory", &self.dir, error);
            return Err(self.poison(cause));
        }
        assert!(!self.segments.is_empty() || self.current.is_none());
        Ok(removed)
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

    /// LSN of the last record appended (0 for a log that never held one).
    pub fn lsn_appended(&self) -> u64 {
        self.lsn_appended
    }

    /// LSN of the last record known to be on disk: recovered, or written by a successful sync.
    pub fn lsn_durable(&self) -> u64 {
        self.lsn_durable
    }

    /// Bytes of the batches appended since the last sync, so a caller can bound them.
    pub fn bytes_buffered(&self) -> usize {
        self.buffered.iter().map(SealedBatch::len).sum()
    }

    /// First LSNs of the segment files, oldest first.
    pub fn segments_lsn_first(&self) -> Vec<u64> {
        self.segments.iter().copied().collect()
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
