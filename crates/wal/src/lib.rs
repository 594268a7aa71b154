//! The write-ahead log's storage layer: every member appends the sealed replication batches it
//! holds — and, when it catches up by a state transfer, the image chunks it installs — to
//! segment files under its data directory, syncs them in groups (group commit: many entries,
//! one `fdatasync`), cuts the log back when a view change rewinds it, and reads it back after a
//! crash.
//!
//! The log decides in pure code (the byte layout in `format`, the successor rule in `entry`,
//! recovery's scan) and touches the disk only through the [`Disk`] trait: [`FsDisk`] in a node,
//! [`SimDisk`] in tests and the simulator, so the same writer and recovery run against a disk
//! that crashes on a seed.
//!
//! # The log's history
//!
//! The log is one contiguous history of [`Entry`]s: sealed batches of consecutive records, and
//! [`ImageChunk`]s. An image ("the pages changed after `lsn_from`, as they stood at `lsn`", sent
//! in `count` chunks) stands for the records `lsn_from + 1..=lsn` of a member that caught up by
//! a state transfer, so the batches after it continue from `lsn + 1`. An image counts only
//! whole: the log's LSN moves to its `lsn` with its last chunk, a sync reports it durable only
//! then, and recovery cuts an image whose last chunk is missing as it cuts a torn batch.
//!
//! # File format
//!
//! A directory of segment files, numbered from 1 and named by their number zero-padded to 20
//! digits so that names sort as numbers do (`00000000000000000001.wal`); the log's order is the
//! files' order. A segment is closed once the next entry would take it past
//! [`WalOptions::segment_bytes_max`]; entries never straddle two files, and an entry larger
//! than that gets a file alone. All integers are little-endian.
//!
//! The newest segment may run on in zeros after its last frame: when a group grows the file,
//! the same sync makes [`WalOptions::preallocate_bytes`] of zeros after it durable, so that
//! the next group commits' syncs overwrite bytes already allocated and do not grow the file (on ext4 a
//! sync that grows a file commits the journal too: 0.40 ms against 0.25 ms for 4 KiB here,
//! 0.80 against 0.42 with three nodes syncing at once). A frame length of zeros fails its
//! checksum, so recovery reads zeros to the file's end as the log's end (not as a torn
//! frame) and cuts them off; a segment is cut to its last frame before the next one is
//! created, so only the newest ever ends in zeros.
//!
//! ```text
//! segment file:
//!   header (24 bytes)
//!     0  4  magic      "TWAL"
//!     4  2  version    2
//!     6  2  reserved   0
//!     8  8  seq        the segment's number (= the file name)
//!    16  4  reserved   0
//!    20  4  crc32c     of bytes 0..20
//!   then, for each entry, a frame:
//!     0  4  len        bytes of the entry
//!     4  4  len_crc32c CRC32C of the 4 bytes of len
//!     8  len           the entry: a batch exactly as sealed (tandem-redo's format, magic "TB",
//!                      with its own CRC32C), or an image chunk:
//!                        0  4  magic      "TIMG"
//!                        4  4  index      < count
//!                        8  4  count      >= 1
//!                       12  4  pages_len
//!                       16  8  lsn_from   <= lsn
//!                       24  8  lsn        >= 1
//!                       32  4  crc32c     of bytes 0..32, then the pages
//!                       36  …  pages      opaque to the log
//! ```
//!
//! The log shares the replication batch format: a batch is stored as it was sealed, so there is
//! no second encoding, and a recovered batch is the same [`tandem_redo::SealedBatch`] (views
//! included). The length carries its own checksum so that a torn length is recognised as torn
//! rather than read as a length that skips valid data or lands on stale bytes. Segments are
//! numbered rather than named by an LSN because no LSN names one uniquely: an image's chunks all
//! sit at one place in the history, and a batch trimmed by a cut starts where the batch it
//! replaces did.
//!
//! # Crash model and what recovery guarantees
//!
//! Appended bytes may sit in the page cache until their file is synced; a crash keeps a file's
//! synced prefix and some prefix of the rest, cut at a sector, its last sector possibly torn
//! (garbage or zeros); a file created or removed without syncing its directory may be undone.
//! [`SimDisk`] implements exactly this model. Against it recovery guarantees, and the
//! crash-consistency test checks at every disk operation of many seeded runs:
//! - the recovered entries are a contiguous run of the log's history (what was appended, minus
//!   what completed cuts removed), in order, byte for byte, each valid by its CRC and continuing
//!   the one before it (the successor check), ending with a complete entry;
//! - that run holds at least every entry a successful [`Wal::sync`] or [`Wal::cut_after`]
//!   reported durable; while a cut is under way it is a run of the history before the cut or
//!   of the history after it, and holds everything durable up to where the cut leaves the log;
//! - after recovery the files hold exactly that run (the rest is cut, durably), so the log can
//!   be appended to again.
//!
//! # Checkpoints
//!
//! Beside the segments, the directory holds at most one complete checkpoint file
//! (`ckpt-<lsn>.ckpt`, format in [`checkpoint`]): the node's database as it stood at one LSN, in
//! state-transfer chunks the log never looks inside. [`Wal::checkpoint_begin`],
//! [`Wal::checkpoint_append`] and [`Wal::checkpoint_finish`] write it to a temporary file,
//! sync it, rename it and sync the directory, and only then remove the older checkpoint and the
//! segments the new one covers ([`Wal::remove_below`]), so a crash leaves a complete checkpoint
//! or the previous one, never neither once the segments are gone. A cut below a checkpoint's
//! LSN deletes it, durably, before it cuts a single entry. Recovery returns the newest valid
//! checkpoint and the log anchored at it (see [`Recovered`] for what the caller replays).
//!
//! Segment files are removed oldest first, each removal made durable before the next, so a
//! crash never leaves a gap between segments. An I/O error poisons the writer: see [`Wal`] on
//! why a failed sync is never retried. `docs/wal.md` lists the crash points of the commit path
//! and of a cut, and what survives each; `src/tests.rs` holds the crash test and the bugs it is
//! shown to catch.

// One block maps a complete checkpoint file (`FsDisk::read_whole`); nothing else is unsafe.
#![deny(unsafe_code)]

mod bugs;
pub mod checkpoint;
mod disk;
mod entry;
pub mod format;
mod sim;
mod wal;

#[cfg(test)]
mod fuzz;
#[cfg(test)]
mod tests;

pub use checkpoint::CheckpointError;
pub use disk::{Disk, FileBytes, FsDisk, FsFile, PRIVATE_DIR_MODE, PRIVATE_FILE_MODE};
pub use entry::{Entry, ImageChunk};
pub use format::ImageError;
pub use sim::{SECTOR_BYTES, SimDisk, SimHandle};
pub use wal::{CheckpointRecovered, Recovered, Stop, Wal, WalError, WalOptions};
