//! Reading the segment the same way inside a txn and outside one.
//!
//! A read command runs on a [`Segment`] (on the primary, or on a backup's copy); the same read
//! inside a write command runs on the open [`Txn`] (and sees the txn's own writes). Code that
//! only reads is written once against [`Mem`].

use bytemuck::Pod;
use tandem_memory::{Segment, Txn};

/// Read access to a segment's bytes.
pub trait Mem {
    /// `len` bytes at segment offset `offset`.
    fn bytes(&self, offset: usize, len: usize) -> &[u8];

    /// A plain-old-data value at `offset` (any alignment).
    #[inline]
    fn pod<T: Pod>(&self, offset: usize) -> T {
        bytemuck::pod_read_unaligned(self.bytes(offset, size_of::<T>()))
    }

    /// The little-endian `u64` at `offset`.
    #[inline]
    fn word(&self, offset: usize) -> u64 {
        self.pod::<u64>(offset)
    }
}

impl Mem for Segment {
    #[inline]
    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        self.read(offset, len)
    }
}

impl Mem for Txn<'_> {
    #[inline]
    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        self.read(offset, len)
    }
}

/// Writes `value` as the little-endian `u64` at `offset` in `txn` (declaring those 8 bytes).
#[inline]
pub fn set_word(txn: &mut Txn<'_>, offset: usize, value: u64) {
    txn.set_range(offset, 8)
        .copy_from_slice(&value.to_le_bytes());
}
