//! The write-ahead log's storage layer: every member appends the sealed replication batches it
//! holds to segment files under its data directory, syncs them in groups (group commit: many
//! batches, one `fdatasync`), and reads them back after a crash.
//!
//! The log decides in pure code (the byte layout in `format`, recovery's scan) and touches the
//! disk only through the [`Disk`] trait: [`FsDisk`] in a node, [`SimDisk`] in tests and the
//! simulator, so the same writer and recovery run against a disk that crashes on a seed.
//!
//! # File format
//!
//! A directory of segment files, each named by the LSN of its first batch, zero-padded to 20
//! digits so that names sort as LSNs do (`00000000000000000001.wal`). A segment is closed once
//! the next batch would take it past [`WalOptions::segment_bytes_max`]; batches never straddle
//! two files. All integers are little-endian.
//!
//! ```text
//! segment file:
//!   header (24 bytes)
//!     0  4  magic      "TWAL"
//!     4  2  version    1
//!     6  2  reserved   0
//!     8  8  lsn_first  LSN of the first batch (= the file name)
//!    16  4  reserved   0
//!    20  4  crc32c     of bytes 0..20
//!   then, for each batch, a frame:
//!     0  4  len        bytes of the batch
//!     4  4  len_crc32c CRC32C of the 4 bytes of len
//!     8  len           the batch exactly as sealed (tandem-log's format, with its own CRC32C)
//! ```
//!
//! The log shares the replication batch format: a batch is stored as it was sealed, so there is
//! no second encoding, and a recovered batch is the same [`tandem_log::SealedBatch`] (views
//! included). The length carries its own checksum so that a torn length is recognised as torn
//! rather than read as a length that skips valid data or lands on stale bytes.
//!
//! # Crash model and what recovery guarantees
//!
//! Appended bytes may sit in the page cache until their file is synced; a crash keeps a file's
//! synced prefix and some prefix of the rest, cut at a sector, its last sector possibly torn
//! (garbage or zeros); a file created or removed without syncing its directory may be undone.
//! [`SimDisk`] implements exactly this model. Against it recovery guarantees, and the
//! crash-consistency test checks at every disk operation of many seeded runs:
//! - the recovered batches are a prefix of the batches appended, in order, byte for byte (each
//!   valid by its CRC and continuing the one before it: the successor check);
//! - that prefix holds at least every batch a successful [`Wal::sync`] reported durable;
//! - after recovery the files hold exactly that prefix (the rest is cut, durably), so the log
//!   can be appended to again.
//!
//! Segment files are removed oldest first, each removal made durable before the next, so a
//! crash never leaves a gap between segments. An I/O error poisons the writer: see [`Wal`] on
//! why a failed sync is never retried. `docs/wal.md` lists the commit path's crash points and
//! what survives each; `src/tests.rs` holds the crash test and the bugs it is shown to catch.

#![forbid(unsafe_code)]

mod bugs;
mod disk;
mod entry;
pub mod format;
mod sim;
mod wal;

#[cfg(test)]
mod tests;

pub use disk::{Disk, FsDisk};
pub use entry::{Entry, ImageChunk};
pub use format::ImageError;
pub use sim::{SECTOR_BYTES, SimDisk, SimHandle};
pub use wal::{Recovered, Stop, Wal, WalError, WalOptions};
