//! Typed tables of fixed-size records, placed in a segment by a [`Layout`].

use std::marker::PhantomData;

use bytemuck::Pod;
use tandem_memory::{Segment, Txn};

use crate::DedupTable;

/// Tables are aligned to a cache line, so a record never shares a line with another table.
const TABLE_ALIGN: usize = 64;

/// Why tables do not fit in a segment.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LayoutError {
    #[error(
        "table '{table}' needs {needed} bytes at offset {offset} but the segment has {segment_len}; \
         give a larger database size"
    )]
    DoesNotFit {
        table: &'static str,
        offset: usize,
        needed: usize,
        segment_len: usize,
    },
}

/// Hands out consecutive, aligned table positions in a segment of a given size.
#[derive(Clone, Debug)]
pub struct Layout {
    next: usize,
    segment_len: usize,
}

impl Layout {
    /// A layout over all `segment_len` bytes.
    pub fn new(segment_len: usize) -> Layout {
        Layout {
            next: 0,
            segment_len,
        }
    }

    /// A layout for a workload's tables in a segment of `segment_len` bytes: everything before
    /// the segment's [`DedupTable`], which the store owns. Its
    /// [`segment_len`](Layout::segment_len), and the length a [`LayoutError`] reports, are the
    /// bytes left for tables.
    pub fn workload(segment_len: usize) -> Layout {
        Layout::new(DedupTable::for_segment_len(segment_len).offset())
    }

    /// Places a table of `count` records of `T` after the previous one.
    pub fn table<T: Pod>(
        &mut self,
        name: &'static str,
        count: usize,
    ) -> Result<Table<T>, LayoutError> {
        let offset = self.next.next_multiple_of(TABLE_ALIGN.max(align_of::<T>()));
        let needed = count.saturating_mul(size_of::<T>());
        let end = offset.saturating_add(needed);
        if end > self.segment_len {
            return Err(LayoutError::DoesNotFit {
                table: name,
                offset,
                needed,
                segment_len: self.segment_len,
            });
        }
        self.next = end;
        Ok(Table {
            offset,
            count,
            _record: PhantomData,
        })
    }

    /// Bytes used so far, including alignment padding.
    pub fn used(&self) -> usize {
        self.next
    }

    /// Bytes the layout may use.
    pub fn segment_len(&self) -> usize {
        self.segment_len
    }
}

/// `count` records of `T` starting at `offset` in a segment.
#[derive(Debug)]
pub struct Table<T> {
    offset: usize,
    count: usize,
    _record: PhantomData<fn() -> T>,
}

impl<T> Clone for Table<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Table<T> {}

impl<T: Pod> Table<T> {
    #[inline]
    pub fn count(&self) -> usize {
        self.count
    }

    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Offset one past the table's last byte.
    pub fn end(&self) -> usize {
        self.offset + self.count * size_of::<T>()
    }

    /// Segment offset of record `index`; panics past the end of the table.
    #[inline]
    pub fn record_offset(&self, index: usize) -> usize {
        assert!(
            index < self.count,
            "record {index} is past the table's {} records",
            self.count
        );
        self.offset + index * size_of::<T>()
    }

    /// Record `index` as the txn sees it.
    #[inline]
    pub fn get(&self, txn: &Txn<'_>, index: usize) -> T {
        txn.read_pod(self.record_offset(index))
    }

    /// Record `index` as last committed.
    pub fn get_committed(&self, segment: &Segment, index: usize) -> T {
        segment.read_pod(self.record_offset(index))
    }

    /// Declares the whole record `index` and hands it out writable.
    #[inline]
    pub fn update<'t>(&self, txn: &'t mut Txn<'_>, index: usize) -> &'t mut T {
        txn.set_pod(self.record_offset(index))
    }

    /// Declares only one field of record `index` (at `field_offset`, from `offset_of!`) and
    /// hands it out writable: the undo image and the redo capture stay as small as the field.
    #[inline]
    pub fn update_field<'t, F: Pod>(
        &self,
        txn: &'t mut Txn<'_>,
        index: usize,
        field_offset: usize,
    ) -> &'t mut F {
        assert!(
            field_offset + size_of::<F>() <= size_of::<T>(),
            "field at {field_offset} of {} bytes leaves the {}-byte record",
            size_of::<F>(),
            size_of::<T>()
        );
        txn.set_pod(self.record_offset(index) + field_offset)
    }

    /// Every record as last committed, in index order.
    pub fn iter_committed<'s>(&self, segment: &'s Segment) -> impl Iterator<Item = T> + 's {
        let bytes = segment.read(self.offset, self.count * size_of::<T>());
        bytes
            .chunks_exact(size_of::<T>())
            .map(bytemuck::pod_read_unaligned)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::Strategy;

    #[derive(Clone, Copy, Debug, PartialEq, bytemuck::Pod, bytemuck::Zeroable)]
    #[repr(C)]
    struct Pair {
        a: u32,
        b: u32,
    }

    #[test]
    fn layout_aligns_tables_and_refuses_overflow() {
        let mut layout = Layout::new(4096);
        let first: Table<u8> = layout.table("first", 3).unwrap();
        let second: Table<Pair> = layout.table("second", 10).unwrap();
        assert_eq!(first.offset(), 0);
        assert_eq!(second.offset(), 64);
        assert_eq!(second.end(), 144);
        let err = layout.table::<Pair>("third", 1000).unwrap_err();
        assert_eq!(
            err.to_string(),
            "table 'third' needs 8000 bytes at offset 192 but the segment has 4096; give a \
             larger database size"
        );
    }

    #[test]
    fn field_updates_declare_only_the_field() {
        let mut segment = Segment::anonymous(4096, Strategy::V3InlineLog).unwrap();
        let table: Table<Pair> = Layout::new(4096).table("pairs", 4).unwrap();
        let mut txn = segment.begin();
        *table.update_field::<u32>(&mut txn, 2, std::mem::offset_of!(Pair, b)) = 9;
        assert_eq!(table.get(&txn, 2), Pair { a: 0, b: 9 });
        let redo = txn.commit();
        assert_eq!(redo.data(), &9u32.to_ne_bytes());
        assert_eq!(table.get_committed(&segment, 2), Pair { a: 0, b: 9 });
        assert_eq!(
            table.iter_committed(&segment).filter(|p| p.b == 9).count(),
            1
        );
    }
}
