//! A transaction on a segment: the RVM/Vista API.
//!
//! Writes are possible only inside declared ranges: [`Txn::set_range`] declares a range and
//! hands out exactly its bytes, and [`Txn::range_mut`] hands them out again later, panicking if
//! the range was never declared. So an abort can always restore every byte the txn changed.

use crate::redo::RedoRecord;
use crate::segment::Segment;

/// An open transaction. Dropping it without [`Txn::commit`] aborts it.
#[derive(Debug)]
pub struct Txn<'a> {
    /// `None` once the txn has committed or aborted.
    segment: Option<&'a mut Segment>,
    /// Bytes declared so far (a byte declared twice counts twice).
    declared_bytes: usize,
    /// Ranges declared so far.
    declared_ranges: usize,
}

impl<'a> Txn<'a> {
    pub(crate) fn new(segment: &'a mut Segment) -> Txn<'a> {
        Txn {
            segment: Some(segment),
            declared_bytes: 0,
            declared_ranges: 0,
        }
    }

    #[inline]
    fn segment(&self) -> &Segment {
        self.segment.as_deref().expect("txn is open")
    }

    #[inline]
    fn segment_mut(&mut self) -> &mut Segment {
        self.segment.as_deref_mut().expect("txn is open")
    }

    /// Declares that the txn may modify `len` bytes at `offset`, and hands them out writable.
    ///
    /// Panics if the range leaves the segment.
    #[inline]
    pub fn set_range(&mut self, offset: usize, len: usize) -> &mut [u8] {
        self.declared_bytes = self.declared_bytes.saturating_add(len);
        self.declared_ranges += 1;
        self.segment_mut().declare(offset, len)
    }

    /// Bytes declared so far (a byte declared twice counts twice), and in how many ranges:
    /// the commit's redo record holds no more changed bytes than these, in no more runs
    /// than the ranges and the gaps between changed words allow. A caller bounds the
    /// record's size from them before it commits.
    pub fn declared(&self) -> (usize, usize) {
        (self.declared_bytes, self.declared_ranges)
    }

    /// Declares the bytes of a plain-old-data value at `offset` and hands it out writable.
    ///
    /// Panics if `offset` is not aligned for `T`.
    #[inline]
    pub fn set_pod<T: bytemuck::Pod>(&mut self, offset: usize) -> &mut T {
        assert!(
            offset.is_multiple_of(align_of::<T>()),
            "offset {offset} is not aligned to {} bytes for {}",
            align_of::<T>(),
            std::any::type_name::<T>()
        );
        bytemuck::from_bytes_mut(self.set_range(offset, size_of::<T>()))
    }

    /// Hands out bytes of a range declared earlier in this txn.
    ///
    /// Panics if `[offset, offset + len)` is not inside one declared range: a write there could
    /// not be undone.
    #[inline]
    pub fn range_mut(&mut self, offset: usize, len: usize) -> &mut [u8] {
        self.segment_mut().declared_mut(offset, len)
    }

    /// `len` bytes at `offset`, as this txn sees them (its own writes included).
    #[inline]
    pub fn read(&self, offset: usize, len: usize) -> &[u8] {
        self.segment().read(offset, len)
    }

    /// A plain-old-data value at `offset`, as this txn sees it.
    #[inline]
    pub fn read_pod<T: bytemuck::Pod>(&self, offset: usize) -> T {
        self.segment().read_pod(offset)
    }

    /// The LSN this txn takes if it commits: commits are serial, so it is known in advance.
    #[inline]
    pub fn lsn_next(&self) -> u64 {
        self.segment().lsn() + 1
    }

    /// Size of the segment in bytes.
    #[inline]
    pub fn segment_len(&self) -> usize {
        self.segment().len()
    }

    /// Makes the txn's writes permanent and returns its redo record, whose LSN is
    /// [`Txn::lsn_next`]. Every commit takes an LSN, even one that changed nothing.
    #[inline]
    pub fn commit(mut self) -> &'a RedoRecord {
        let segment = self.segment.take().expect("txn is open");
        segment.commit_txn()
    }

    /// Restores every declared byte to its value at [`Segment::begin`].
    #[inline]
    pub fn abort(mut self) {
        let segment = self.segment.take().expect("txn is open");
        segment.abort_txn();
    }
}

impl Drop for Txn<'_> {
    fn drop(&mut self) {
        if let Some(segment) = self.segment.take() {
            segment.abort_txn();
        }
    }
}
