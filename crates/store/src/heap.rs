//! A heap in the segment: blocks of variable size, allocated and freed inside txns.
//!
//! Everything the heap knows lives in its region of the segment and changes only through a
//! [`Txn`], so an allocation travels in the redo record of the txn that made it, an abort
//! undoes it, and every replica holds the same heap. Nothing is kept beside the segment: a
//! backup promoted to primary allocates from where the old primary left off.
//!
//! # Layout
//!
//! ```text
//! offset   0: bump         u64   heap-relative offset of the first byte never handed out
//! offset   8: free heads   [u64; CLASS_COUNT]   heap-relative offset of each class's first
//!                                               free block, 0 for none
//! offset 128: the arena, handed out in blocks
//! ```
//!
//! A block's size is a class: 64 bytes times a power of two, up to [`HEAP_BLOCK_MAX`]. A free
//! block starts with the heap-relative offset of the next free block of its class (0 ends the
//! list); an allocated block is its owner's, which must remember its class (the heap keeps no
//! per-block header, so a block holds its whole size). A fresh segment is all zero, which is a
//! valid empty heap: no free block, nothing handed out.
//!
//! An allocation takes a free block of its class, else carves one from the untouched end of the
//! arena, else splits the smallest larger free block in halves (the upper halves go to the free
//! lists below it). Freed blocks are not merged: memory split into small blocks stays small.
//! [`Heap::stats`] reports what that leaves unusable.

use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};

use crate::Inconsistency;

/// Smallest block: one cache line.
pub const HEAP_BLOCK_MIN: usize = 64;
/// Number of block sizes: 64 bytes to 1 MiB.
const CLASS_COUNT: usize = 15;
/// Largest block. A longer value is its owner's to split across blocks.
pub const HEAP_BLOCK_MAX: usize = HEAP_BLOCK_MIN << (CLASS_COUNT - 1);
/// Bytes of the header before the arena.
const HEADER_BYTES: usize = 128;
/// The shortest heap: its header and one smallest block.
pub const HEAP_LEN_MIN: usize = HEADER_BYTES + HEAP_BLOCK_MIN;

/// The name under which a malformed heap is reported.
pub const CHECK_HEAP: &str = "the heap's free lists are well formed";
/// The name under which a block neither free nor owned is reported.
pub const CHECK_HEAP_ACCOUNTED: &str = "every heap block is free or owned, once";

/// The header, exactly as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Header {
    bump: u64,
    free: [u64; CLASS_COUNT],
}

const _: () = assert!(size_of::<Header>() == HEADER_BYTES);

/// There is no free block large enough, and the arena's untouched end is too short.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the heap has no free {block_len}-byte block")]
pub struct HeapFull {
    pub block_len: usize,
}

/// How the heap's arena is used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HeapStats {
    /// Bytes of the arena.
    pub arena_bytes: usize,
    /// Bytes handed out at least once (owned or free now).
    pub carved_bytes: usize,
    /// Bytes in free blocks.
    pub free_bytes: usize,
    /// Free blocks.
    pub free_blocks: usize,
}

/// Where a segment's heap lies. A value of this type holds no state: the heap is in the
/// segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Heap {
    offset: usize,
    len: usize,
}

impl Heap {
    /// A heap over the `len` bytes at segment offset `offset`: aligned to a cache line, and
    /// either empty (no heap) or long enough for its header and one block.
    pub fn new(offset: usize, len: usize) -> Heap {
        assert!(offset.is_multiple_of(64), "a heap starts on a cache line");
        assert!(len.is_multiple_of(64), "a heap is whole cache lines");
        assert!(
            len == 0 || len >= HEAP_LEN_MIN,
            "a heap of {len} bytes has no room for a block"
        );
        Heap { offset, len }
    }

    /// Segment offset of the region.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes of the region, header included.
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of the smallest block that holds `len` bytes; `None` above [`HEAP_BLOCK_MAX`].
    pub fn block_len_for(len: usize) -> Option<usize> {
        Self::class_for(len).map(Self::class_len)
    }

    fn class_for(len: usize) -> Option<usize> {
        if len > HEAP_BLOCK_MAX {
            return None;
        }
        let blocks = len.div_ceil(HEAP_BLOCK_MIN).max(1);
        Some(blocks.next_power_of_two().trailing_zeros() as usize)
    }

    fn class_len(class: usize) -> usize {
        assert!(class < CLASS_COUNT, "class {class} is past the largest");
        HEAP_BLOCK_MIN << class
    }

    fn header(&self, txn: &Txn<'_>) -> Header {
        txn.read_pod(self.offset)
    }

    /// Allocates a block for `len` bytes (1 to [`HEAP_BLOCK_MAX`]) in `txn`; returns its
    /// segment offset. Its contents are whatever was there: the owner writes them.
    pub fn alloc(&self, txn: &mut Txn<'_>, len: usize) -> Result<usize, HeapFull> {
        assert!(len > 0, "an allocation holds at least one byte");
        let class = Self::class_for(len).expect("an allocation fits the largest block");
        let block_len = Self::class_len(class);
        if self.is_empty() {
            return Err(HeapFull { block_len });
        }
        let header = self.header(txn);
        // 1. A free block of the class.
        if header.free[class] != 0 {
            return Ok(self.pop(txn, class));
        }
        // 2. The arena's untouched end.
        let bump = header.bump.max(HEADER_BYTES as u64) as usize;
        if bump + block_len <= self.len {
            txn.set_pod::<Header>(self.offset).bump = (bump + block_len) as u64;
            return Ok(self.offset + bump);
        }
        // 3. Halves of the smallest larger free block.
        let Some(larger) = (class + 1..CLASS_COUNT).find(|&c| header.free[c] != 0) else {
            return Err(HeapFull { block_len });
        };
        let block = self.pop(txn, larger);
        for lower in (class..larger).rev() {
            self.push(txn, lower, block + Self::class_len(lower));
        }
        Ok(block)
    }

    /// Frees the block at segment offset `block`, allocated for `len` bytes, in `txn`.
    pub fn free(&self, txn: &mut Txn<'_>, block: usize, len: usize) {
        let class = Self::class_for(len).expect("a block is at most the largest");
        assert!(
            block >= self.offset + HEADER_BYTES
                && block + Self::class_len(class) <= self.offset + self.len,
            "block {block} is not in the heap at {}..{}",
            self.offset,
            self.offset + self.len
        );
        self.push(txn, class, block);
    }

    /// Takes the first free block of `class` (there is one).
    fn pop(&self, txn: &mut Txn<'_>, class: usize) -> usize {
        let head = self.header(txn).free[class] as usize;
        assert_ne!(head, 0, "class {class} has a free block");
        let block = self.offset + head;
        let next: u64 = txn.read_pod(block);
        txn.set_pod::<Header>(self.offset).free[class] = next;
        block
    }

    /// Puts the block at segment offset `block` at the head of `class`'s free list.
    fn push(&self, txn: &mut Txn<'_>, class: usize, block: usize) {
        let head = self.header(txn).free[class];
        *txn.set_pod::<u64>(block) = head;
        txn.set_pod::<Header>(self.offset).free[class] = (block - self.offset) as u64;
    }

    /// Walks the free lists: each block lies in the carved part of the arena, on a cache line,
    /// and no two overlap. Returns the free blocks as (segment offset, bytes), in address
    /// order.
    fn free_blocks(&self, segment: &Segment) -> Result<Vec<(usize, usize)>, Inconsistency> {
        let malformed = |detail: String| Inconsistency {
            check: CHECK_HEAP,
            detail,
        };
        if self.is_empty() {
            return Ok(Vec::new());
        }
        let header: Header = segment.read_pod(self.offset);
        let bump = header.bump as usize;
        if bump != 0 && (bump < HEADER_BYTES || bump > self.len || !bump.is_multiple_of(64)) {
            return Err(malformed(format!(
                "bump {bump} is outside {HEADER_BYTES}..={}",
                self.len
            )));
        }
        let mut blocks = Vec::new();
        let block_count_max = self.len / HEAP_BLOCK_MIN;
        for (class, &head) in header.free.iter().enumerate() {
            let block_len = Self::class_len(class);
            let mut next = head as usize;
            while next != 0 {
                if blocks.len() > block_count_max {
                    return Err(malformed(format!("class {class}'s free list has a cycle")));
                }
                if next < HEADER_BYTES || next + block_len > bump || !next.is_multiple_of(64) {
                    return Err(malformed(format!(
                        "a free {block_len}-byte block at {next} is outside the carved arena \
                         {HEADER_BYTES}..{bump}"
                    )));
                }
                blocks.push((self.offset + next, block_len));
                next = segment.read_pod::<u64>(self.offset + next) as usize;
            }
        }
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            if pair[0].0 + pair[0].1 > pair[1].0 {
                return Err(malformed(format!(
                    "free blocks at {} and {} overlap",
                    pair[0].0, pair[1].0
                )));
            }
        }
        Ok(blocks)
    }

    /// How the arena is used, from the free lists (a walk of every free block).
    pub fn stats(&self, segment: &Segment) -> Result<HeapStats, Inconsistency> {
        let blocks = self.free_blocks(segment)?;
        Ok(self.stats_of(segment, &blocks))
    }

    /// How the arena is used, given its free blocks.
    fn stats_of(&self, segment: &Segment, blocks: &[(usize, usize)]) -> HeapStats {
        let header: Header = if self.is_empty() {
            Header::zeroed()
        } else {
            segment.read_pod(self.offset)
        };
        HeapStats {
            arena_bytes: self.len.saturating_sub(HEADER_BYTES),
            carved_bytes: (header.bump as usize).saturating_sub(HEADER_BYTES),
            free_bytes: blocks.iter().map(|&(_, len)| len).sum(),
            free_blocks: blocks.len(),
        }
    }

    /// Checks the free lists, then that `owned` (every block an owner holds, as segment
    /// offset and the length it was allocated for) and the free blocks tile the carved arena
    /// exactly: no block lost, none owned twice or both owned and free.
    pub fn check(
        &self,
        segment: &Segment,
        owned: &[(usize, usize)],
    ) -> Result<HeapStats, Inconsistency> {
        // One walk of the free lists serves both the stats and the tiling.
        let mut blocks = self.free_blocks(segment)?;
        let stats = self.stats_of(segment, &blocks);
        for &(block, len) in owned {
            let Some(block_len) = Self::block_len_for(len) else {
                return Err(Inconsistency {
                    check: CHECK_HEAP_ACCOUNTED,
                    detail: format!(
                        "a block at {block} is owned for {len} bytes, past the largest"
                    ),
                });
            };
            blocks.push((block, block_len));
        }
        blocks.sort_unstable();
        let mut expected = self.offset + HEADER_BYTES;
        for &(block, len) in &blocks {
            if block != expected {
                return Err(Inconsistency {
                    check: CHECK_HEAP_ACCOUNTED,
                    detail: format!(
                        "the arena's bytes from {expected} are neither free nor owned, or owned \
                         twice: the next block starts at {block}"
                    ),
                });
            }
            expected = block + len;
        }
        let carved_end = self.offset + HEADER_BYTES + stats.carved_bytes;
        if !self.is_empty() && expected != carved_end {
            return Err(Inconsistency {
                check: CHECK_HEAP_ACCOUNTED,
                detail: format!(
                    "free and owned blocks end at {expected}, the carved arena at {carved_end}"
                ),
            });
        }
        Ok(stats)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::Strategy;

    const LEN: usize = 64 << 10;

    fn heap_segment() -> (Segment, Heap) {
        let segment = Segment::anonymous(LEN * 2, Strategy::V3InlineLog).unwrap();
        (segment, Heap::new(LEN, LEN))
    }

    #[test]
    fn classes_round_up_to_powers_of_two_of_cache_lines() {
        assert_eq!(Heap::block_len_for(1), Some(64));
        assert_eq!(Heap::block_len_for(64), Some(64));
        assert_eq!(Heap::block_len_for(65), Some(128));
        assert_eq!(Heap::block_len_for(1000), Some(1024));
        assert_eq!(Heap::block_len_for(HEAP_BLOCK_MAX), Some(HEAP_BLOCK_MAX));
        assert_eq!(Heap::block_len_for(HEAP_BLOCK_MAX + 1), None);
    }

    #[test]
    fn freed_blocks_are_reused_and_split_and_the_check_accounts_for_every_byte() {
        let (mut segment, heap) = heap_segment();
        let mut txn = segment.begin();
        let a = heap.alloc(&mut txn, 100).unwrap();
        let b = heap.alloc(&mut txn, 1000).unwrap();
        txn.commit();
        heap.check(&segment, &[(a, 100), (b, 1000)]).unwrap();

        // A freed block is taken again by the next allocation of its class.
        let mut txn = segment.begin();
        heap.free(&mut txn, b, 1000);
        let c = heap.alloc(&mut txn, 600).unwrap();
        txn.commit();
        assert_eq!(c, b);
        heap.check(&segment, &[(a, 100), (c, 600)]).unwrap();

        // With the arena's end used up, a small block comes from halving a larger free one.
        let mut segment = Segment::anonymous(LEN * 2, Strategy::V3InlineLog).unwrap();
        let heap = Heap::new(LEN, HEADER_BYTES + 1024);
        let mut txn = segment.begin();
        let whole = heap.alloc(&mut txn, 1000).unwrap();
        heap.free(&mut txn, whole, 1000);
        let small = heap.alloc(&mut txn, 10).unwrap();
        txn.commit();
        assert_eq!(small, whole);
        let stats = heap.check(&segment, &[(small, 10)]).unwrap();
        assert_eq!(stats.free_bytes, 1024 - 64);
        assert_eq!(stats.free_blocks, 4);
        assert_eq!(stats.carved_bytes, 1024);
    }

    #[test]
    fn an_abort_undoes_an_allocation_and_a_full_heap_says_so() {
        let (mut segment, heap) = heap_segment();
        let mut txn = segment.begin();
        heap.alloc(&mut txn, 4096).unwrap();
        txn.abort();
        heap.check(&segment, &[]).unwrap();
        assert_eq!(
            heap.stats(&segment).unwrap(),
            HeapStats {
                arena_bytes: LEN - HEADER_BYTES,
                ..HeapStats::default()
            }
        );
        let mut txn = segment.begin();
        let err = heap.alloc(&mut txn, LEN).unwrap_err();
        assert_eq!(err, HeapFull { block_len: LEN });
        txn.abort();
        let empty = Heap::new(0, 0);
        let mut txn = segment.begin();
        assert!(empty.alloc(&mut txn, 1).is_err());
        txn.abort();
    }

    #[test]
    fn the_check_catches_a_leak_a_double_owner_and_a_broken_list() {
        let (mut segment, heap) = heap_segment();
        let mut txn = segment.begin();
        let a = heap.alloc(&mut txn, 64).unwrap();
        let b = heap.alloc(&mut txn, 64).unwrap();
        txn.commit();
        let leak = heap.check(&segment, &[(a, 64)]).unwrap_err();
        assert_eq!(leak.check, CHECK_HEAP_ACCOUNTED);
        let twice = heap
            .check(&segment, &[(a, 64), (a, 64), (b, 64)])
            .unwrap_err();
        assert_eq!(twice.check, CHECK_HEAP_ACCOUNTED);

        let mut txn = segment.begin();
        heap.free(&mut txn, b, 64);
        // The freed block's link points past the carved arena.
        *txn.set_pod::<u64>(b) = (LEN - 64) as u64;
        txn.commit();
        let broken = heap.check(&segment, &[(a, 64)]).unwrap_err();
        assert_eq!(broken.check, CHECK_HEAP);
    }
}
