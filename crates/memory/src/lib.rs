//! Recoverable memory: the bottom layer of tandem.
//!
//! A [`Segment`] is a fixed-size region of 4 KiB pages. A [`Txn`] on it follows the RVM/Vista
//! API: [`Segment::begin`], [`Txn::set_range`] (declare a range and receive its writable bytes),
//! reads, [`Txn::commit`] and [`Txn::abort`]. How a txn keeps its undo information is the
//! segment's [`Strategy`], chosen at creation: the four versions of Amza, Cox and Zwaenepoel
//! (seed 000, section 4).
//!
//! At commit the segment captures a [`RedoRecord`]: the words that actually changed inside the
//! declared ranges, coalesced into sorted runs, stamped with the commit's LSN. Applying that
//! record to another segment ([`Segment::apply_redo`]) reproduces the bytes exactly. Every page a
//! record touches takes the record's LSN as its page version.
//!
//! With [`Segment::enable_passive_trace`] each commit also records the writes a passive backup
//! (seed 000, section 5) would receive in its mirror memory; a [`PassiveMirror`] stores them
//! and recovers the last committed image from them. The layout, the write order and what
//! survives each crash point are documented in `src/passive.rs`.
//!
//! This crate never does network I/O, never reads the clock and never starts a thread. `unsafe`
//! is confined to the segment module (`segment::region`), which maps memory.

#[cfg(feature = "inject-bugs")]
pub mod bugs;
mod passive;
mod redo;
mod segment;
mod strategy;
mod txn;

pub use passive::{
    ClassBytes, MirrorLayout, PassiveError, PassiveMirror, PassiveTrace, PassiveWrite, WriteClass,
};
pub use redo::{RedoError, RedoRecord, Run, extend_small};
pub use segment::{InstallError, SNAPSHOT_ENTRY_LEN, Segment, SegmentError, SnapshotStep};
pub use strategy::{ParseStrategyError, Strategy};
pub use txn::Txn;

/// Size of a page: the unit of segment sizing and of page versions.
pub const PAGE_SIZE: usize = 4096;

/// Granularity of the redo comparison: changes are found and shipped in aligned 8-byte words.
pub const WORD_SIZE: usize = 8;

const _: () = assert!(PAGE_SIZE.is_power_of_two());
const _: () = assert!(PAGE_SIZE.is_multiple_of(WORD_SIZE));
