//! A size-class allocator in a region of the segment, for the Redis model's keys and values.
//!
//! The store's [`Heap`](tandem_store::Heap) rounds every block up to a power of two of cache
//! lines, so a 10-byte key takes 64 bytes and a 600-byte value 1024. Redis data is mostly small
//! and of every length, so this allocator uses finer classes: waste is below 16 bytes up to
//! 128 bytes, and at most a quarter of the length above.
//!
//! Like the heap, everything the allocator knows lives in its region of the segment and changes
//! only through a [`Txn`]: an allocation travels in the redo record of the txn that made it, an
//! abort undoes it, and every replica holds the same allocator. An [`Alloc`] value only says
//! where the region lies.
//!
//! # Classes
//!
//! Block sizes step by 16 bytes from 16 to 128 (8 classes), then by four classes per doubling,
//! as in jemalloc: 160, 192, 224, 256, then 320, 384, 448, 512, then 640, and so on; the class
//! after `128 << g` steps by `32 << g`. The largest class is [`ALLOC_BLOCK_MAX`], 640 MiB, the
//! first above 512 MiB: a Redis string of the largest length Redis allows fits one block with
//! room for its owner's header. Every class is a multiple of 16, so blocks stay 16-byte aligned,
//! and every multiple of 16 is a sum of classes, so any remainder can be kept free.
//!
//! # Layout
//!
//! ```text
//! offset  0: carved     u64   bytes handed out past the header, at least once; the untouched
//!                             end of the region starts at ALLOC_HEADER_BYTES + carved
//! offset  8: reserved   u64   zero
//! offset 16: classes    [ClassEntry; CLASS_COUNT], 16 bytes each:
//!              head     u64   region-relative offset of the class's first free block, 0 for none
//!              count    u64   free blocks of the class
//! offset ALLOC_HEADER_BYTES (1568): the arena, handed out in blocks
//! ```
//!
//! A free block starts with the region-relative offset of the next free block of its class (0
//! ends the list). An allocated block has no header: it is its owner's whole, and the owner
//! remembers the length it asked for (any length of the same class frees it). A fresh region is
//! all zero, which is a valid empty allocator: nothing carved, no free block.
//!
//! Each class's count sits beside its head, so taking a block from a free list declares one
//! 16-byte range, and [`Alloc::stats`] sums the counts without walking a list.
//!
//! # Policy
//!
//! An allocation takes a free block of its class, else carves one from the untouched end,
//! else splits the free block of the smallest larger class that has one: it takes the first
//! bytes and keeps the remainder free as blocks of the largest classes that fit. Freed blocks
//! are not merged with their neighbours, except that freeing the last carved block gives it
//! back to the untouched end: memory split into small blocks stays small, and
//! [`AllocStats::allocatable_bytes`] against [`AllocStats::free_bytes`] shows how much that
//! fragmentation costs.

use crate::mem::Mem;
use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};
use tandem_store::Inconsistency;

/// Smallest block, and the alignment of every block.
pub const ALLOC_BLOCK_MIN: usize = 16;
/// Classes 16, 32, ..., 128 bytes, in steps of [`ALLOC_BLOCK_MIN`].
const SMALL_CLASSES: usize = 8;
/// The largest of the small classes, after which classes go four to a doubling.
const SMALL_MAX: usize = ALLOC_BLOCK_MIN * SMALL_CLASSES;
/// Classes per doubling above [`SMALL_MAX`].
const CLASSES_PER_DOUBLING: usize = 4;
/// Number of classes: the small ones, then 22 doublings up to 512 MiB, then 640 MiB.
const CLASS_COUNT: usize = SMALL_CLASSES + 22 * CLASSES_PER_DOUBLING + 1;
/// Largest block (640 MiB). A longer value is its owner's to split across blocks.
pub const ALLOC_BLOCK_MAX: usize = class_len(CLASS_COUNT - 1);
/// Region offset of the first class entry.
const CLASSES_AT: usize = 16;
/// Bytes of one class entry: its head and its count.
const ENTRY_BYTES: usize = size_of::<ClassEntry>();
/// Bytes of the header before the arena.
pub const ALLOC_HEADER_BYTES: usize = size_of::<Header>();
/// The shortest region: its header and one smallest block.
pub const ALLOC_LEN_MIN: usize = ALLOC_HEADER_BYTES + ALLOC_BLOCK_MIN;

const _: () = assert!(ALLOC_BLOCK_MAX == 640 << 20);
const _: () = assert!(class_len(CLASS_COUNT - 2) == 512 << 20);
const _: () = assert!(ALLOC_HEADER_BYTES == CLASSES_AT + CLASS_COUNT * ENTRY_BYTES);
const _: () = assert!(ALLOC_HEADER_BYTES.is_multiple_of(ALLOC_BLOCK_MIN));

/// The name under which a malformed header or free list is reported.
pub const CHECK_ALLOC: &str = "the allocator's header and free lists are well formed";
/// The name under which a class count that disagrees with its free list is reported.
pub const CHECK_ALLOC_COUNTS: &str = "the allocator's free-block counts match its free lists";
/// The name under which a carved block neither free nor owned, or owned twice, is reported.
pub const CHECK_ALLOC_ACCOUNTED: &str = "every carved block is free or owned, once";

/// One class's free list head and its length, side by side so that a push or a pop declares
/// a single range.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct ClassEntry {
    head: u64,
    count: u64,
}

/// The header, exactly as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Header {
    carved: u64,
    reserved: u64,
    classes: [ClassEntry; CLASS_COUNT],
}

/// No free block is large enough and the region's untouched end is too short (or the request
/// is larger than the largest block). Nothing was changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("out of memory: no block of {requested} bytes can be allocated")]
pub struct OutOfMemory {
    /// The length asked for.
    pub requested: usize,
}

/// How the region is used. Every field comes from the header, so reading them is cheap.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AllocStats {
    /// Bytes of the whole region, header included.
    pub region_bytes: usize,
    /// Bytes of the arena handed out at least once (owned or free now); the header is not
    /// counted.
    pub carved_bytes: usize,
    /// Bytes in free blocks.
    pub free_bytes: usize,
    /// Free blocks.
    pub free_blocks: usize,
    /// Bytes owners hold, counted in whole blocks: carved minus free.
    pub used_bytes: usize,
    /// Bytes of the largest free block; 0 if none.
    pub largest_free_block: usize,
    /// The largest block one allocation could still get: the largest free block, or the
    /// largest class that fits the untouched end, whichever is larger. An allocation of `len`
    /// bytes succeeds exactly when `block_len_for(len) <= allocatable_bytes`.
    pub allocatable_bytes: usize,
}

/// Where the allocator's region lies. A value of this type holds no state: the allocator is in
/// the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Alloc {
    offset: usize,
    len: usize,
}

impl Alloc {
    /// An allocator over the `len` bytes at segment offset `offset`: 16-byte aligned, a whole
    /// number of 16-byte units, and at least [`ALLOC_LEN_MIN`] long, so that every block is
    /// aligned and there is room for one.
    pub fn new(offset: usize, len: usize) -> Alloc {
        assert!(
            offset.is_multiple_of(ALLOC_BLOCK_MIN),
            "an allocator's region starts on a {ALLOC_BLOCK_MIN}-byte boundary, not at {offset}"
        );
        assert!(
            len.is_multiple_of(ALLOC_BLOCK_MIN),
            "an allocator's region is whole {ALLOC_BLOCK_MIN}-byte units, not {len} bytes"
        );
        assert!(
            len >= ALLOC_LEN_MIN,
            "an allocator's region of {len} bytes has no room for its header and a block \
             ({ALLOC_LEN_MIN} bytes)"
        );
        assert!(
            offset.checked_add(len).is_some(),
            "an allocator's region at {offset} of {len} bytes passes the end of memory"
        );
        Alloc { offset, len }
    }

    /// Segment offset of the region.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes of the region, header included.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region holds at least its header and one block.
    pub fn is_empty(&self) -> bool {
        false
    }

    /// Bytes of the smallest block that holds `len` bytes (16 for 0); `None` above
    /// [`ALLOC_BLOCK_MAX`].
    pub fn block_len_for(len: usize) -> Option<usize> {
        class_for(len).map(class_len)
    }

    /// Allocates a block for `len` bytes (at least 1) in `txn`, and returns its segment offset,
    /// 16-byte aligned. Its contents are whatever was there: the owner writes them.
    ///
    /// On [`OutOfMemory`] nothing was declared or written in `txn`. A request above
    /// [`ALLOC_BLOCK_MAX`] is out of memory too: no region can serve it.
    pub fn alloc(&self, txn: &mut Txn<'_>, len: usize) -> Result<usize, OutOfMemory> {
        assert!(len > 0, "an allocation holds at least one byte");
        let out_of_memory = OutOfMemory { requested: len };
        let Some(class) = class_for(len) else {
            return Err(out_of_memory);
        };
        let block_len = class_len(class);
        // 1. A free block of the class.
        let entry = self.entry(txn, class);
        if entry.head != 0 {
            return Ok(self.pop(txn, class, entry));
        }
        // 2. The region's untouched end.
        let carved = self.carved(txn);
        let bump = ALLOC_HEADER_BYTES + carved;
        if block_len <= self.len - bump {
            *txn.set_pod::<u64>(self.offset) = (carved + block_len) as u64;
            return Ok(self.offset + bump);
        }
        // 3. The front of the smallest larger free block, the rest kept free.
        let Some(larger) = (class + 1..CLASS_COUNT).find(|&c| self.entry(txn, c).head != 0) else {
            return Err(out_of_memory);
        };
        Ok(self.split(txn, class, larger))
    }

    /// Frees the block at segment offset `block`, allocated for `len` bytes (or any length of
    /// the same class), in `txn`. The last carved block goes back to the untouched end; any
    /// other goes to the head of its class's free list.
    ///
    /// Panics if the block is not a carved block of this region. A block freed twice is not
    /// caught here (that would need a walk of its list); [`Alloc::check`] reports it.
    pub fn free(&self, txn: &mut Txn<'_>, block: usize, len: usize) {
        assert!(len > 0, "a block is allocated for at least one byte");
        let class = class_for(len).expect("a block is at most the largest class");
        let block_len = class_len(class);
        let carved = self.carved(txn);
        let bump = ALLOC_HEADER_BYTES + carved;
        let at = block.wrapping_sub(self.offset);
        assert!(
            block >= self.offset
                && at >= ALLOC_HEADER_BYTES
                && at.is_multiple_of(ALLOC_BLOCK_MIN)
                && at.saturating_add(block_len) <= bump,
            "block {block} of {block_len} bytes is not a carved block of the allocator at \
             {}..{}",
            self.offset + ALLOC_HEADER_BYTES,
            self.offset + bump
        );
        if at + block_len == bump {
            *txn.set_pod::<u64>(self.offset) = (carved - block_len) as u64;
            return;
        }
        let entry = self.entry(txn, class);
        *txn.set_pod::<u64>(block) = entry.head;
        *txn.set_pod::<ClassEntry>(self.offset + entry_at(class)) = ClassEntry {
            head: at as u64,
            count: entry.count + 1,
        };
    }

    /// How the region is used, from the header alone: O(classes).
    pub fn stats(&self, mem: &impl Mem) -> AllocStats {
        let header: Header = mem.pod(self.offset);
        let carved = header.carved as usize;
        let (mut free_bytes, mut free_blocks, mut largest_free_block) = (0usize, 0usize, 0);
        for (class, entry) in header.classes.iter().enumerate() {
            // A corrupt count must not overflow here: `check` is what reports it.
            let count = entry.count as usize;
            free_blocks = free_blocks.saturating_add(count);
            free_bytes = free_bytes.saturating_add(count.saturating_mul(class_len(class)));
            if count > 0 {
                largest_free_block = class_len(class);
            }
        }
        let tail = self
            .len
            .saturating_sub(ALLOC_HEADER_BYTES.saturating_add(carved));
        let tail_block = class_floor(tail).map_or(0, class_len);
        AllocStats {
            region_bytes: self.len,
            carved_bytes: carved,
            free_bytes,
            free_blocks,
            used_bytes: carved.saturating_sub(free_bytes),
            largest_free_block,
            allocatable_bytes: largest_free_block.max(tail_block),
        }
    }

    /// Checks the header and the free lists, then proves that the free blocks and `owned`
    /// (every block an owner holds, as segment offset and the length it was allocated for)
    /// tile the carved arena exactly: no block lost, none owned twice, none both owned and
    /// free. Also checks each class's count against the length of its list.
    pub fn check(
        &self,
        segment: &Segment,
        owned: &mut dyn Iterator<Item = (usize, usize)>,
    ) -> Result<(), Inconsistency> {
        let mut blocks = self.free_blocks(segment)?;
        for (block, len) in owned {
            let Some(block_len) = Self::block_len_for(len).filter(|_| len > 0) else {
                return Err(Inconsistency {
                    check: CHECK_ALLOC_ACCOUNTED,
                    detail: format!(
                        "a block at {block} is owned for {len} bytes, which no class holds"
                    ),
                });
            };
            blocks.push((block, block_len));
        }
        blocks.sort_unstable();
        let carved: u64 = segment.read_pod(self.offset);
        let carved_end = self.offset + ALLOC_HEADER_BYTES + carved as usize;
        let mut expected = self.offset + ALLOC_HEADER_BYTES;
        for &(block, block_len) in &blocks {
            if block != expected {
                return Err(Inconsistency {
                    check: CHECK_ALLOC_ACCOUNTED,
                    detail: format!(
                        "the arena's bytes from {expected} are neither free nor owned, or owned \
                         twice, or owned and free: the next block starts at {block}"
                    ),
                });
            }
            expected = block.saturating_add(block_len);
        }
        if expected != carved_end {
            return Err(Inconsistency {
                check: CHECK_ALLOC_ACCOUNTED,
                detail: format!(
                    "free and owned blocks end at {expected}, the carved arena at {carved_end}"
                ),
            });
        }
        Ok(())
    }

    /// Walks the header and every free list: the carved part lies in the region, each free
    /// block lies in the carved part on a 16-byte boundary, no two overlap, and each class
    /// holds as many blocks as its count says. Returns the free blocks as (segment offset,
    /// bytes), in address order.
    fn free_blocks(&self, segment: &Segment) -> Result<Vec<(usize, usize)>, Inconsistency> {
        let malformed = |detail: String| Inconsistency {
            check: CHECK_ALLOC,
            detail,
        };
        let header: Header = segment.read_pod(self.offset);
        let carved = header.carved as usize;
        let arena = self.len - ALLOC_HEADER_BYTES;
        if carved > arena || !carved.is_multiple_of(ALLOC_BLOCK_MIN) {
            return Err(malformed(format!(
                "{carved} bytes carved, not a multiple of {ALLOC_BLOCK_MIN} within the arena's \
                 {arena}"
            )));
        }
        if header.reserved != 0 {
            return Err(malformed(format!(
                "the reserved header word holds {}",
                header.reserved
            )));
        }
        let bump = ALLOC_HEADER_BYTES + carved;
        let mut blocks = Vec::new();
        let mut walked_counts = [0u64; CLASS_COUNT];
        for (class, entry) in header.classes.iter().enumerate() {
            let block_len = class_len(class);
            // More blocks than fit the carved arena means the list runs in a cycle.
            let fit = carved / block_len;
            let mut walked = 0;
            let mut next = entry.head as usize;
            while next != 0 {
                if walked == fit {
                    return Err(malformed(format!(
                        "the free list of {block_len}-byte blocks holds more than the {fit} that \
                         fit the carved arena: it runs in a cycle (a block freed twice?)"
                    )));
                }
                if next < ALLOC_HEADER_BYTES
                    || next > bump.saturating_sub(block_len)
                    || !next.is_multiple_of(ALLOC_BLOCK_MIN)
                {
                    return Err(malformed(format!(
                        "a free {block_len}-byte block at region offset {next} is outside the \
                         carved arena {ALLOC_HEADER_BYTES}..{bump} or off a \
                         {ALLOC_BLOCK_MIN}-byte boundary"
                    )));
                }
                blocks.push((self.offset + next, block_len));
                walked += 1;
                next = segment.read_pod::<u64>(self.offset + next) as usize;
            }
            walked_counts[class] = walked as u64;
        }
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            if pair[0].0 + pair[0].1 > pair[1].0 {
                return Err(malformed(format!(
                    "free blocks at {} and {} overlap (a block freed twice?)",
                    pair[0].0, pair[1].0
                )));
            }
        }
        for (class, (entry, walked)) in header.classes.iter().zip(walked_counts).enumerate() {
            if walked != entry.count {
                return Err(Inconsistency {
                    check: CHECK_ALLOC_COUNTS,
                    detail: format!(
                        "the free list of {}-byte blocks holds {walked}, its count says {}",
                        class_len(class),
                        entry.count
                    ),
                });
            }
        }
        Ok(blocks)
    }

    /// Bytes carved so far, as `txn` sees them.
    fn carved(&self, txn: &Txn<'_>) -> usize {
        txn.read_pod::<u64>(self.offset) as usize
    }

    /// A class's entry, as `txn` sees it.
    fn entry(&self, txn: &Txn<'_>, class: usize) -> ClassEntry {
        txn.read_pod(self.offset + entry_at(class))
    }

    /// Takes the first free block of `class`, whose entry is `entry` (it has a block).
    fn pop(&self, txn: &mut Txn<'_>, class: usize, entry: ClassEntry) -> usize {
        let block = self.offset + entry.head as usize;
        let next: u64 = txn.read_pod(block);
        *txn.set_pod::<ClassEntry>(self.offset + entry_at(class)) = ClassEntry {
            head: next,
            count: entry.count.checked_sub(1).expect(
                "a class with a free block counts at least one: the allocator's header is corrupt",
            ),
        };
        block
    }

    /// Takes the first `class_len(class)` bytes of the first free block of `larger`, and puts
    /// the rest at the heads of the free lists of the largest classes that fit it.
    ///
    /// The remainder's classes strictly decrease (each class is below twice the one before
    /// it), so each class gains at most one block, and all the entries written lie between the
    /// remainder's smallest class and `larger`: one declared range holds them.
    fn split(&self, txn: &mut Txn<'_>, class: usize, larger: usize) -> usize {
        let entry = self.entry(txn, larger);
        let at = entry.head as usize;
        let next: u64 = txn.read_pod(self.offset + at);
        let rest_at = at + class_len(class);
        let rest = class_len(larger) - class_len(class);
        let mut lowest = larger;
        for (piece_class, piece) in pieces(rest_at, rest) {
            let head = self.entry(txn, piece_class).head;
            *txn.set_pod::<u64>(self.offset + piece) = head;
            lowest = piece_class;
        }
        let entries: &mut [ClassEntry] = bytemuck::cast_slice_mut(txn.set_range(
            self.offset + entry_at(lowest),
            (larger - lowest + 1) * ENTRY_BYTES,
        ));
        entries[larger - lowest] = ClassEntry {
            head: next,
            count: entry.count.checked_sub(1).expect(
                "a class with a free block counts at least one: the allocator's header is corrupt",
            ),
        };
        for (piece_class, piece) in pieces(rest_at, rest) {
            let piece_entry = &mut entries[piece_class - lowest];
            piece_entry.head = piece as u64;
            piece_entry.count += 1;
        }
        self.offset + at
    }
}

/// Region offset of `class`'s entry in the header.
const fn entry_at(class: usize) -> usize {
    CLASSES_AT + class * ENTRY_BYTES
}

/// Bytes of a block of `class`.
const fn class_len(class: usize) -> usize {
    assert!(class < CLASS_COUNT, "a class past the largest");
    if class < SMALL_CLASSES {
        ALLOC_BLOCK_MIN * (class + 1)
    } else {
        // Doubling `g` runs from 128 << g (exclusive) to 256 << g in steps of 32 << g.
        let g = (class - SMALL_CLASSES) / CLASSES_PER_DOUBLING;
        let step = (class - SMALL_CLASSES) % CLASSES_PER_DOUBLING + 1;
        (CLASSES_PER_DOUBLING + step) << (g + 5)
    }
}

/// The smallest class that holds `len` bytes (class 0 for 0), by arithmetic alone; `None`
/// above [`ALLOC_BLOCK_MAX`].
fn class_for(len: usize) -> Option<usize> {
    let class = if len <= SMALL_MAX {
        len.saturating_sub(1) / ALLOC_BLOCK_MIN
    } else {
        // `len - 1` lies in [128 << g, 256 << g) for doubling `g`; the step within it is the
        // quarter of that span it falls in.
        let last = len - 1;
        let g = (last.ilog2() - SMALL_MAX.ilog2()) as usize;
        let step = (last - (SMALL_MAX << g)) >> (g + 5);
        SMALL_CLASSES + g * CLASSES_PER_DOUBLING + step
    };
    (class < CLASS_COUNT).then_some(class)
}

/// The largest class no longer than `len` bytes; `None` below [`ALLOC_BLOCK_MIN`].
fn class_floor(len: usize) -> Option<usize> {
    if len < ALLOC_BLOCK_MIN {
        return None;
    }
    let Some(class) = class_for(len) else {
        return Some(CLASS_COUNT - 1);
    };
    Some(if class_len(class) == len {
        class
    } else {
        class - 1
    })
}

/// The blocks, largest first, that `len` bytes at region offset `at` are cut into when kept
/// free: greedily the largest class that fits what is left. `len` is a multiple of 16, and
/// class 0 is 16 bytes, so the pieces cover it exactly.
fn pieces(at: usize, len: usize) -> impl Iterator<Item = (usize, usize)> {
    assert!(
        len.is_multiple_of(ALLOC_BLOCK_MIN),
        "a remainder of whole 16-byte units"
    );
    let (mut at, mut left) = (at, len);
    std::iter::from_fn(move || {
        let class = class_floor(left)?;
        let piece = at;
        at += class_len(class);
        left -= class_len(class);
        Some((class, piece))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::Strategy;

    /// A region not at the segment's start, so that offsets are not region-relative by luck.
    const AT: usize = 4096 + 48;

    fn segment() -> Segment {
        Segment::anonymous(1 << 20, Strategy::V3InlineLog).unwrap()
    }

    fn check(alloc: &Alloc, segment: &Segment, owned: &[(usize, usize)]) {
        alloc
            .check(segment, &mut owned.iter().copied())
            .unwrap_or_else(|err| panic!("{err}"));
    }

    fn all_classes() -> Vec<usize> {
        (0..CLASS_COUNT).map(class_len).collect()
    }

    #[test]
    fn the_class_table_steps_by_16_then_by_four_per_doubling() {
        let classes = all_classes();
        assert_eq!(&classes[..8], &[16, 32, 48, 64, 80, 96, 112, 128]);
        assert_eq!(
            &classes[8..20],
            &[160, 192, 224, 256, 320, 384, 448, 512, 640, 768, 896, 1024]
        );
        assert_eq!(classes[CLASS_COUNT - 1], 640 << 20);
        assert!(classes.windows(2).all(|pair| pair[0] < pair[1]));
        assert!(classes.iter().all(|len| len.is_multiple_of(16)));
        for (class, &len) in classes.iter().enumerate() {
            assert_eq!(class_for(len), Some(class));
            assert_eq!(class_floor(len), Some(class));
            assert_eq!(class_floor(len + 15), Some(class));
            if class > 0 {
                assert_eq!(class_for(len - 1), Some(class), "{len}");
                assert_eq!(class_floor(len - 1), Some(class - 1), "{len}");
            }
        }
        assert_eq!(class_floor(15), None);
        assert_eq!(class_floor(usize::MAX), Some(CLASS_COUNT - 1));
    }

    #[test]
    fn every_length_maps_to_the_smallest_class_that_holds_it() {
        let classes = all_classes();
        for len in 1..=4096 {
            let smallest = *classes.iter().find(|&&c| c >= len).unwrap();
            assert_eq!(Alloc::block_len_for(len), Some(smallest), "{len}");
            if len > 128 {
                assert!(
                    smallest * 4 <= len * 5,
                    "{len} wastes over 25% in {smallest}"
                );
            } else {
                assert!(smallest - len < 16);
            }
        }
        // Around every class, far past 4 KiB too.
        for &class in &classes[1..] {
            for len in [class - 1, class, class + 1] {
                let Some(block_len) = Alloc::block_len_for(len) else {
                    assert!(len > ALLOC_BLOCK_MAX);
                    continue;
                };
                assert_eq!(block_len, *classes.iter().find(|&&c| c >= len).unwrap());
                assert!(len <= 128 || block_len * 4 <= len * 5);
            }
        }
        assert_eq!(Alloc::block_len_for(512 << 20), Some(512 << 20));
        assert_eq!(Alloc::block_len_for((512 << 20) + 64), Some(640 << 20));
        assert_eq!(Alloc::block_len_for(ALLOC_BLOCK_MAX), Some(ALLOC_BLOCK_MAX));
        assert_eq!(Alloc::block_len_for(ALLOC_BLOCK_MAX + 1), None);
        assert_eq!(Alloc::block_len_for(usize::MAX), None);
    }

    #[test]
    fn a_remainder_is_cut_into_the_largest_classes_that_fit() {
        let cut = |len| pieces(1000, len).collect::<Vec<_>>();
        assert_eq!(cut(16), vec![(0, 1000)]);
        assert_eq!(cut(528), vec![(15, 1000), (0, 1512)]);
        // Every multiple of 16 up to a few classes is covered exactly, in decreasing classes.
        for len in (16..=70_000).step_by(16) {
            let cut = cut(len);
            assert!(cut.windows(2).all(|pair| pair[0].0 > pair[1].0), "{len}");
            let mut at = 1000;
            for &(class, piece) in &cut {
                assert_eq!(piece, at);
                at += class_len(class);
            }
            assert_eq!(at, 1000 + len);
        }
    }

    #[test]
    fn a_fresh_zero_region_is_an_empty_allocator() {
        let segment = segment();
        let alloc = Alloc::new(AT, 64 << 10);
        check(&alloc, &segment, &[]);
        let tail = (64 << 10) - ALLOC_HEADER_BYTES;
        assert_eq!(
            alloc.stats(&segment),
            AllocStats {
                region_bytes: 64 << 10,
                allocatable_bytes: class_len(class_floor(tail).unwrap()),
                ..AllocStats::default()
            }
        );
        assert_eq!(alloc.stats(&segment).allocatable_bytes, 56 << 10);
    }

    #[test]
    fn freed_blocks_are_reused_and_the_last_one_goes_back_to_the_end() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, 64 << 10);
        let arena = AT + ALLOC_HEADER_BYTES;
        let mut txn = segment.begin();
        let a = alloc.alloc(&mut txn, 10).unwrap();
        let b = alloc.alloc(&mut txn, 100).unwrap();
        let c = alloc.alloc(&mut txn, 10).unwrap();
        txn.commit();
        assert_eq!((a, b, c), (arena, arena + 16, arena + 128));
        check(&alloc, &segment, &[(a, 10), (b, 100), (c, 10)]);

        // A freed block is taken again by the next allocation of its class.
        let mut txn = segment.begin();
        alloc.free(&mut txn, b, 100);
        let d = alloc.alloc(&mut txn, 97).unwrap();
        txn.commit();
        assert_eq!(d, b);

        let mut txn = segment.begin();
        alloc.free(&mut txn, a, 16);
        txn.commit();
        let stats = alloc.stats(&segment);
        assert_eq!((stats.free_blocks, stats.free_bytes), (1, 16));
        assert_eq!((stats.carved_bytes, stats.used_bytes), (144, 128));
        check(&alloc, &segment, &[(d, 100), (c, 1)]);

        // The last carved block goes back to the untouched end; a block before it does not.
        let mut txn = segment.begin();
        alloc.free(&mut txn, c, 1);
        txn.commit();
        let stats = alloc.stats(&segment);
        assert_eq!((stats.free_blocks, stats.carved_bytes), (1, 128));
        check(&alloc, &segment, &[(d, 100)]);
        let mut txn = segment.begin();
        let e = alloc.alloc(&mut txn, 1000).unwrap();
        txn.commit();
        assert_eq!(e, arena + 128, "carved where the freed last block was");
        check(&alloc, &segment, &[(d, 100), (e, 1000)]);
    }

    #[test]
    fn a_split_keeps_the_remainder_free_in_the_largest_classes() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, ALLOC_HEADER_BYTES + 640 + 16);
        let arena = AT + ALLOC_HEADER_BYTES;
        let mut txn = segment.begin();
        let big = alloc.alloc(&mut txn, 600).unwrap();
        let pin = alloc.alloc(&mut txn, 16).unwrap();
        alloc.free(&mut txn, big, 600);
        txn.commit();
        assert_eq!(alloc.stats(&segment).allocatable_bytes, 640);

        // No 112-byte block is free and the end is used up: the 640-byte block is split.
        let mut txn = segment.begin();
        let small = alloc.alloc(&mut txn, 100).unwrap();
        txn.commit();
        assert_eq!(small, arena);
        check(&alloc, &segment, &[(small, 100), (pin, 16)]);
        let stats = alloc.stats(&segment);
        assert_eq!(
            stats,
            AllocStats {
                region_bytes: ALLOC_HEADER_BYTES + 656,
                carved_bytes: 656,
                free_bytes: 528,
                free_blocks: 2,
                used_bytes: 128,
                largest_free_block: 512,
                allocatable_bytes: 512,
            }
        );
        // The remainder is a 512-byte block then a 16-byte one, each at its class's head.
        let mut txn = segment.begin();
        let sixteen = alloc.alloc(&mut txn, 3).unwrap();
        let half = alloc.alloc(&mut txn, 500).unwrap();
        txn.commit();
        assert_eq!((half, sixteen), (arena + 112, arena + 624));
        check(
            &alloc,
            &segment,
            &[(small, 100), (pin, 16), (half, 500), (sixteen, 3)],
        );
        assert_eq!(alloc.stats(&segment).allocatable_bytes, 0);
    }

    #[test]
    fn out_of_memory_changes_nothing() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, ALLOC_HEADER_BYTES + 1024);
        let mut txn = segment.begin();
        let a = alloc.alloc(&mut txn, 256).unwrap();
        let b = alloc.alloc(&mut txn, 512).unwrap();
        alloc.free(&mut txn, a, 256);
        txn.commit();
        let before = segment.bytes().to_vec();
        // 256 bytes are free in a block and 256 untouched: 257 fits neither.
        assert_eq!(alloc.stats(&segment).allocatable_bytes, 256);
        let mut txn = segment.begin();
        for len in [257, 1024, ALLOC_BLOCK_MAX, ALLOC_BLOCK_MAX + 1, usize::MAX] {
            assert_eq!(
                alloc.alloc(&mut txn, len),
                Err(OutOfMemory { requested: len })
            );
        }
        assert!(txn.commit().is_empty(), "nothing was declared");
        assert!(segment.bytes() == &before[..]);
        check(&alloc, &segment, &[(b, 512)]);
    }

    #[test]
    fn an_abort_restores_the_allocator() {
        for strategy in Strategy::ALL {
            let mut segment = Segment::anonymous(1 << 20, strategy).unwrap();
            let alloc = Alloc::new(AT, 64 << 10);
            let mut txn = segment.begin();
            let a = alloc.alloc(&mut txn, 300).unwrap();
            let b = alloc.alloc(&mut txn, 40).unwrap();
            let c = alloc.alloc(&mut txn, 40).unwrap();
            txn.commit();
            let before = segment.bytes().to_vec();
            let stats = alloc.stats(&segment);

            let mut txn = segment.begin();
            alloc.free(&mut txn, a, 300);
            alloc.free(&mut txn, c, 40);
            alloc.alloc(&mut txn, 5000).unwrap();
            alloc.alloc(&mut txn, 20).unwrap();
            txn.abort();
            assert!(segment.bytes() == &before[..], "{strategy}");
            assert_eq!(alloc.stats(&segment), stats);
            check(&alloc, &segment, &[(a, 300), (b, 40), (c, 40)]);
        }
    }

    #[test]
    fn the_check_catches_a_leak_a_double_owner_a_double_free_and_a_bad_count() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, 64 << 10);
        let mut txn = segment.begin();
        let a = alloc.alloc(&mut txn, 64).unwrap();
        let b = alloc.alloc(&mut txn, 64).unwrap();
        let c = alloc.alloc(&mut txn, 64).unwrap();
        txn.commit();
        let failed = |owned: &[(usize, usize)], segment: &Segment| {
            alloc
                .check(segment, &mut owned.iter().copied())
                .unwrap_err()
                .check
        };
        // A block forgotten, a block owned twice, a block of the wrong class.
        assert_eq!(failed(&[(a, 64), (c, 64)], &segment), CHECK_ALLOC_ACCOUNTED);
        assert_eq!(
            failed(&[(a, 64), (b, 64), (b, 64), (c, 64)], &segment),
            CHECK_ALLOC_ACCOUNTED
        );
        assert_eq!(
            failed(&[(a, 64), (b, 65), (c, 64)], &segment),
            CHECK_ALLOC_ACCOUNTED
        );
        assert_eq!(
            failed(&[(a, 64), (b, 0), (c, 64)], &segment),
            CHECK_ALLOC_ACCOUNTED
        );

        // A block freed but still owned.
        let mut txn = segment.begin();
        alloc.free(&mut txn, b, 64);
        txn.commit();
        assert_eq!(
            failed(&[(a, 64), (b, 64), (c, 64)], &segment),
            CHECK_ALLOC_ACCOUNTED
        );
        check(&alloc, &segment, &[(a, 64), (c, 64)]);

        // A block freed twice makes its list a cycle.
        let mut txn = segment.begin();
        alloc.free(&mut txn, b, 64);
        txn.commit();
        assert_eq!(failed(&[(a, 64), (c, 64)], &segment), CHECK_ALLOC);
    }

    #[test]
    fn the_check_catches_a_broken_header() {
        let alloc = Alloc::new(AT, 64 << 10);
        let setup = || {
            let mut segment = segment();
            let mut txn = segment.begin();
            let a = alloc.alloc(&mut txn, 64).unwrap();
            let b = alloc.alloc(&mut txn, 64).unwrap();
            let c = alloc.alloc(&mut txn, 64).unwrap();
            alloc.free(&mut txn, b, 64);
            txn.commit();
            check(&alloc, &segment, &[(a, 64), (c, 64)]);
            (segment, [(a, 64), (c, 64)], b)
        };
        let corrupt = |offset: usize, value: u64| {
            let (mut segment, owned, _) = setup();
            let mut txn = segment.begin();
            *txn.set_pod::<u64>(offset) = value;
            txn.commit();
            alloc
                .check(&segment, &mut owned.iter().copied())
                .unwrap_err()
                .check
        };
        let class = class_for(64).unwrap();
        let (_, _, b) = setup();
        let count_at = AT + entry_at(class) + 8;
        assert_eq!(corrupt(count_at, 2), CHECK_ALLOC_COUNTS);
        assert_eq!(corrupt(count_at, 0), CHECK_ALLOC_COUNTS);
        assert_eq!(corrupt(AT, 17), CHECK_ALLOC, "carved off the 16-byte grid");
        assert_eq!(corrupt(AT, 1 << 20), CHECK_ALLOC, "carved past the region");
        assert_eq!(
            corrupt(AT, 64),
            CHECK_ALLOC,
            "the free block past the carved end"
        );
        assert_eq!(corrupt(AT + 8, 1), CHECK_ALLOC, "the reserved word");
        assert_eq!(corrupt(b, 8), CHECK_ALLOC, "a link into the header");
        assert_eq!(corrupt(b, (b - AT) as u64 + 16), CHECK_ALLOC, "overlapping");
        // A link to the other owned block: the list is longer than its count.
        assert_eq!(corrupt(b, (b - AT) as u64 + 64), CHECK_ALLOC_COUNTS);
    }

    #[test]
    fn every_block_is_aligned_and_inside_the_region() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, 256 << 10);
        let mut owned = Vec::new();
        let mut txn = segment.begin();
        for len in (1..).step_by(37) {
            let Ok(block) = alloc.alloc(&mut txn, len) else {
                break;
            };
            assert!(block.is_multiple_of(16));
            assert!(block >= AT + ALLOC_HEADER_BYTES);
            assert!(block + Alloc::block_len_for(len).unwrap() <= AT + (256 << 10));
            owned.push((block, len));
        }
        txn.commit();
        check(&alloc, &segment, &owned);
    }

    #[test]
    #[should_panic(expected = "is not a carved block")]
    fn freeing_a_block_never_carved_panics() {
        let mut segment = segment();
        let alloc = Alloc::new(AT, 64 << 10);
        let mut txn = segment.begin();
        alloc.free(&mut txn, AT + ALLOC_HEADER_BYTES, 16);
    }

    #[test]
    #[should_panic(expected = "has no room")]
    fn a_region_without_room_for_a_block_panics() {
        Alloc::new(0, ALLOC_HEADER_BYTES);
    }
}
