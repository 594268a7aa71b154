//! A chained hash table in the segment that grows and shrinks without a pause.
//!
//! Every key of the database, and every field of a hash, member of a set or of a sorted set,
//! is an *entry*: a block from the [`Alloc`] that starts with a [`Link`] (the next entry of
//! its chain, the key's hash, the key's length) and holds the key at a position fixed per
//! table (`key_at`), the rest of the block being the owner's. A table is an array of bucket
//! words, each the segment offset of the first entry of its chain (0 for none).
//!
//! # Incremental rehash
//!
//! Like Redis's `dict`, a table that must grow (more entries than buckets) or shrink (fewer
//! than an eighth) gets a second bucket array and moves into it a few old buckets at every
//! write ([`Dict::step`]), so no single command pays for the whole move. Unlike Redis's, the
//! new array is never zeroed up front (that would be one txn declaring, and undo-logging, the
//! whole array): new bucket `j` is written only when the first old bucket that maps to it
//! moves. So an entry's bucket is found by its *old* bucket `b = hash & mask[0]`: below the
//! header's `rehash_next` it has moved to the new array (at `hash & mask[1]`), at or above it
//! it is still in the old one. Inserts during a rehash follow the same rule, so they never
//! touch a new bucket before it was written.
//!
//! Growing doubles: old bucket `b` moves to new buckets `b` and `b + old size`, both written
//! when `b` moves. Shrinking halves (or more): old buckets `b`, `b + new size`, … move to new
//! bucket `b & mask[1]`, written when the first of them, `b` itself, moves.
//!
//! The header, 64 bytes at a fixed place (the keyspace's in the database header, a hash's in
//! its value block), is:
//!
//! ```text
//! buckets  [u64; 2]  segment offset of the old (0) and new (1) bucket arrays; 0: none
//! mask     [u64; 2]  bucket count − 1 of each
//! len      u64       entries
//! rehash_next u64    the next old bucket to move, while buckets[1] != 0
//! reserved [u64; 2]
//! ```

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use crate::alloc::{Alloc, OutOfMemory};
use crate::mem::{Mem, set_word};

/// The first bytes of every entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Link {
    /// Segment offset of the next entry in the chain; 0 ends it.
    pub next: u64,
    /// The key's hash ([`hash`]): compared before the key, and reused by a rehash.
    pub hash: u64,
    /// The key's length in bytes.
    pub key_len: u32,
    /// The owner's (a type tag, a value length).
    pub aux: u32,
}

pub const LINK_BYTES: usize = size_of::<Link>();
const NEXT_AT: usize = 0;

/// A table's header, as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct DictHeader {
    buckets: [u64; 2],
    mask: [u64; 2],
    len: u64,
    rehash_next: u64,
    reserved: [u64; 2],
}

pub const DICT_HEADER_BYTES: usize = size_of::<DictHeader>();
const _: () = assert!(DICT_HEADER_BYTES == 64);

const LEN_AT: usize = 32;

/// The smallest bucket array.
const BUCKETS_MIN: u64 = 4;
/// Old buckets moved by each write while a rehash runs. More than one, so a rehash always
/// ends before the table must grow again.
const STEP_BUCKETS: u64 = 4;

/// The hash of a key. Deterministic (every replica must place a key in the same bucket) and
/// keyed by the database's seed, so that keys chosen to collide in one database do not
/// collide in another.
pub fn hash(seed: u64, key: &[u8]) -> u64 {
    // std's SipHash-2-4 with explicit keys: deprecated only in favour of RandomState, which
    // is randomly seeded and so could not place a key in the same bucket on every replica.
    #[allow(deprecated)]
    let mut hasher = std::hash::SipHasher::new_with_keys(seed, seed ^ 0x9e37_79b9_7f4a_7c15);
    std::hash::Hasher::write(&mut hasher, key);
    std::hash::Hasher::finish(&hasher)
}

/// Where an entry was found: the word that points to it (a bucket or the previous entry's
/// `next`), and the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Found {
    pub link: usize,
    pub entry: usize,
}

/// A table: where its header is and where keys lie in its entries. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Dict {
    header_at: usize,
    key_at: usize,
}

impl Dict {
    pub fn new(header_at: usize, key_at: usize) -> Dict {
        assert!(key_at >= LINK_BYTES, "an entry's key follows its link");
        Dict { header_at, key_at }
    }

    pub fn header_at(&self) -> usize {
        self.header_at
    }

    fn header(&self, mem: &impl Mem) -> DictHeader {
        mem.pod(self.header_at)
    }

    /// Entries in the table.
    pub fn len(&self, mem: &impl Mem) -> u64 {
        mem.word(self.header_at + LEN_AT)
    }

    pub fn is_empty(&self, mem: &impl Mem) -> bool {
        self.len(mem) == 0
    }

    /// The key of the entry at `entry`.
    pub fn key<'m>(&self, mem: &'m impl Mem, entry: usize) -> &'m [u8] {
        let link: Link = mem.pod(entry);
        mem.bytes(entry + self.key_at, link.key_len as usize)
    }

    /// Segment offset of the bucket word an entry with `hash` belongs in.
    fn bucket_of(header: &DictHeader, hash: u64) -> usize {
        assert_ne!(
            header.buckets[0], 0,
            "a table without buckets has no bucket"
        );
        let old = hash & header.mask[0];
        if header.buckets[1] != 0 && old < header.rehash_next {
            (header.buckets[1] + 8 * (hash & header.mask[1])) as usize
        } else {
            (header.buckets[0] + 8 * old) as usize
        }
    }

    /// Finds the entry whose key is `key` (with hash `hash`).
    pub fn find(&self, mem: &impl Mem, key: &[u8], hash: u64) -> Option<Found> {
        let header = self.header(mem);
        if header.buckets[0] == 0 {
            return None;
        }
        let mut link = Self::bucket_of(&header, hash);
        loop {
            let entry = mem.word(link) as usize;
            if entry == 0 {
                return None;
            }
            let head: Link = mem.pod(entry);
            if head.hash == hash
                && head.key_len as usize == key.len()
                && mem.bytes(entry + self.key_at, key.len()) == key
            {
                return Some(Found { link, entry });
            }
            link = entry + NEXT_AT;
        }
    }

    /// Links `entry` (a block whose link and key are written; its key is not in the table)
    /// into the table, then moves the rehash along. Fails only if a first bucket array or a
    /// grown one cannot be allocated; then nothing changed.
    pub fn insert(
        &self,
        txn: &mut Txn<'_>,
        alloc: &Alloc,
        entry: usize,
    ) -> Result<(), OutOfMemory> {
        let mut header = self.header(txn);
        if header.buckets[0] == 0 {
            let buckets = alloc.alloc(txn, 8 * BUCKETS_MIN as usize)?;
            txn.set_range(buckets, 8 * BUCKETS_MIN as usize).fill(0);
            header.buckets[0] = buckets as u64;
            header.mask[0] = BUCKETS_MIN - 1;
            *txn.set_pod::<DictHeader>(self.header_at) = header;
        }
        let hash = txn.read_pod::<Link>(entry).hash;
        let bucket = Self::bucket_of(&header, hash);
        let first = txn.word(bucket);
        set_word(txn, entry + NEXT_AT, first);
        set_word(txn, bucket, entry as u64);
        set_word(txn, self.header_at + LEN_AT, header.len + 1);
        let size = header.mask[0] + 1;
        if header.buckets[1] == 0 && header.len + 1 > size {
            // A table that cannot grow now stays as it is: its chains are longer, nothing is
            // wrong, and the next insert tries again.
            let _ = self.start_rehash(txn, alloc, size * 2);
        }
        self.step(txn, alloc);
        Ok(())
    }

    /// Unlinks the entry `found` names (the caller frees its block), then moves the rehash
    /// along, and starts a shrink if the table is mostly empty.
    pub fn remove(&self, txn: &mut Txn<'_>, alloc: &Alloc, found: Found) {
        let next = txn.word(found.entry + NEXT_AT);
        assert_eq!(txn.word(found.link), found.entry as u64, "a stale Found");
        set_word(txn, found.link, next);
        let header = self.header(txn);
        assert!(header.len > 0, "an entry was found in an empty table");
        set_word(txn, self.header_at + LEN_AT, header.len - 1);
        self.step(txn, alloc);
        let header = self.header(txn);
        let size = header.mask[0] + 1;
        if header.buckets[1] == 0 && size > BUCKETS_MIN && header.len < size / 8 {
            let target = header.len.max(1).next_power_of_two().max(BUCKETS_MIN);
            let _ = self.start_rehash(txn, alloc, target);
        }
    }

    /// Puts `new` (a block holding the same key, with its link's hash and key written) in
    /// the place of the entry `found` names (the caller frees the old block).
    pub fn replace(&self, txn: &mut Txn<'_>, found: Found, new: usize) {
        assert_eq!(txn.word(found.link), found.entry as u64, "a stale Found");
        let next = txn.word(found.entry + NEXT_AT);
        set_word(txn, new + NEXT_AT, next);
        set_word(txn, found.link, new as u64);
    }

    fn start_rehash(&self, txn: &mut Txn<'_>, alloc: &Alloc, size: u64) -> Result<(), OutOfMemory> {
        assert!(size.is_power_of_two() && size >= BUCKETS_MIN);
        let buckets = alloc.alloc(txn, 8 * size as usize)?;
        let header = txn.set_pod::<DictHeader>(self.header_at);
        assert_eq!(header.buckets[1], 0, "one rehash at a time");
        header.buckets[1] = buckets as u64;
        header.mask[1] = size - 1;
        header.rehash_next = 0;
        Ok(())
    }

    /// Moves up to [`STEP_BUCKETS`] old buckets into the new array, and ends the rehash once
    /// every old bucket moved.
    pub fn step(&self, txn: &mut Txn<'_>, alloc: &Alloc) {
        let header = self.header(txn);
        if header.buckets[1] == 0 {
            return;
        }
        let (old_size, new_size) = (header.mask[0] + 1, header.mask[1] + 1);
        let end = (header.rehash_next + STEP_BUCKETS).min(old_size);
        for old in header.rehash_next..end {
            // The new buckets this old one is the first to reach.
            if new_size > old_size {
                for j in (old..new_size).step_by(old_size as usize) {
                    set_word(txn, (header.buckets[1] + 8 * j) as usize, 0);
                }
            } else if old < new_size {
                set_word(txn, (header.buckets[1] + 8 * old) as usize, 0);
            }
            let mut entry = txn.word((header.buckets[0] + 8 * old) as usize) as usize;
            while entry != 0 {
                let link: Link = txn.read_pod(entry);
                let bucket = (header.buckets[1] + 8 * (link.hash & header.mask[1])) as usize;
                let first = txn.word(bucket);
                set_word(txn, entry + NEXT_AT, first);
                set_word(txn, bucket, entry as u64);
                entry = link.next as usize;
            }
        }
        let header_mut = txn.set_pod::<DictHeader>(self.header_at);
        header_mut.rehash_next = end;
        if end == old_size {
            let old_buckets = header_mut.buckets[0] as usize;
            header_mut.buckets = [header_mut.buckets[1], 0];
            header_mut.mask = [header_mut.mask[1], 0];
            header_mut.rehash_next = 0;
            alloc.free(txn, old_buckets, 8 * old_size as usize);
        }
    }

    /// Calls `visit` with every entry, in bucket order.
    pub fn for_each(&self, mem: &impl Mem, mut visit: impl FnMut(usize)) {
        let header = self.header(mem);
        if header.buckets[0] == 0 {
            return;
        }
        let old_size = header.mask[0] + 1;
        let start = if header.buckets[1] != 0 {
            self.visit_new(mem, &header, &mut visit);
            header.rehash_next
        } else {
            0
        };
        for old in start..old_size {
            self.visit_chain(mem, (header.buckets[0] + 8 * old) as usize, &mut visit);
        }
    }

    /// Visits the new array's buckets that have been written (those old buckets below
    /// `rehash_next` reached).
    fn visit_new(&self, mem: &impl Mem, header: &DictHeader, visit: &mut impl FnMut(usize)) {
        for new in 0..=header.mask[1] {
            if Self::new_bucket_written(header, new) {
                self.visit_chain(mem, (header.buckets[1] + 8 * new) as usize, visit);
            }
        }
    }

    fn visit_chain(&self, mem: &impl Mem, bucket: usize, visit: &mut impl FnMut(usize)) {
        let mut entry = mem.word(bucket) as usize;
        while entry != 0 {
            let next = mem.word(entry + NEXT_AT) as usize;
            visit(entry);
            entry = next;
        }
    }

    /// One step of a cursor scan, as Redis's `SCAN` makes it: visits the entries of the
    /// buckets cursor `cursor` names and returns the next cursor (0 when the scan is done).
    ///
    /// The cursor counts buckets in reversed bit order over the smaller of the two arrays,
    /// so an entry present from the first call to the last is visited at least once, even
    /// if the table grows or shrinks in between (Redis's guarantee; an entry may be visited
    /// twice).
    pub fn scan(&self, mem: &impl Mem, cursor: u64, mut visit: impl FnMut(usize)) -> u64 {
        let header = self.header(mem);
        if header.buckets[0] == 0 {
            return 0;
        }
        if header.buckets[1] == 0 {
            let mask = header.mask[0];
            self.visit_chain(
                mem,
                (header.buckets[0] + 8 * (cursor & mask)) as usize,
                &mut visit,
            );
            return next_cursor(cursor, mask);
        }
        // Rehashing: the entries whose hash has the cursor's low bits (in the smaller mask)
        // lie in the old buckets not moved yet and in the new buckets written so far that
        // have those low bits.
        let small = header.mask[0].min(header.mask[1]);
        let low = cursor & small;
        for old in (low..=header.mask[0]).step_by(small as usize + 1) {
            if old >= header.rehash_next {
                self.visit_chain(mem, (header.buckets[0] + 8 * old) as usize, &mut visit);
            }
        }
        for new in (low..=header.mask[1]).step_by(small as usize + 1) {
            if Self::new_bucket_written(&header, new) {
                self.visit_chain(mem, (header.buckets[1] + 8 * new) as usize, &mut visit);
            }
        }
        next_cursor(cursor, small)
    }

    /// How many bucket slots [`Dict::slot_first`] takes: the old array's buckets, then, while
    /// a rehash runs, the new array's. A random entry is picked from random slots and
    /// positions in their chains (`collection::random_entry`); the caller draws the numbers,
    /// so that the table needs no generator of its own.
    pub fn bucket_slots(&self, mem: &impl Mem) -> u64 {
        let header = self.header(mem);
        if header.buckets[0] == 0 {
            return 0;
        }
        let new_size = if header.buckets[1] != 0 {
            header.mask[1] + 1
        } else {
            0
        };
        header.mask[0] + 1 + new_size
    }

    /// The first entry of the chain in slot `slot` (below [`Dict::bucket_slots`]), or `None`
    /// if the bucket is empty or holds no live chain: an old bucket the rehash moved, or a
    /// new bucket not written yet (whose bytes are not a chain).
    pub fn slot_first(&self, mem: &impl Mem, slot: u64) -> Option<usize> {
        let header = self.header(mem);
        assert_ne!(header.buckets[0], 0, "a slot of a table without buckets");
        let old_size = header.mask[0] + 1;
        let bucket = if slot < old_size {
            if header.buckets[1] != 0 && slot < header.rehash_next {
                return None;
            }
            header.buckets[0] + 8 * slot
        } else {
            let new = slot - old_size;
            assert!(
                header.buckets[1] != 0 && new <= header.mask[1],
                "slot {slot} lies past the table"
            );
            if !Self::new_bucket_written(&header, new) {
                return None;
            }
            header.buckets[1] + 8 * new
        };
        match mem.word(bucket as usize) {
            0 => None,
            entry => Some(entry as usize),
        }
    }

    /// Whether new bucket `new` has been written: the first old bucket that reaches it
    /// moved.
    fn new_bucket_written(header: &DictHeader, new: u64) -> bool {
        if header.mask[1] > header.mask[0] {
            (new & header.mask[0]) < header.rehash_next
        } else {
            new < header.rehash_next
        }
    }

    /// Frees every entry (through `free_entry`) and the bucket arrays; the table is empty.
    pub fn clear(
        &self,
        txn: &mut Txn<'_>,
        alloc: &Alloc,
        mut free_entry: impl FnMut(&mut Txn<'_>, usize),
    ) {
        let mut entries = Vec::new();
        self.for_each(txn, |entry| entries.push(entry));
        for entry in entries {
            free_entry(txn, entry);
        }
        let header = self.header(txn);
        for t in 0..2 {
            if header.buckets[t] != 0 {
                alloc.free(
                    txn,
                    header.buckets[t] as usize,
                    8 * (header.mask[t] + 1) as usize,
                );
            }
        }
        *txn.set_pod::<DictHeader>(self.header_at) = DictHeader::zeroed();
    }

    /// The bucket arrays, as (segment offset, bytes), for the allocator's check.
    pub fn blocks(&self, mem: &impl Mem, mut owned: impl FnMut(usize, usize)) {
        let header = self.header(mem);
        for t in 0..2 {
            if header.buckets[t] != 0 {
                owned(
                    header.buckets[t] as usize,
                    8 * (header.mask[t] + 1) as usize,
                );
            }
        }
    }
}

/// Redis's reverse-binary cursor increment over `mask`.
fn next_cursor(v: u64, mask: u64) -> u64 {
    let mut v = v | !mask;
    v = v.reverse_bits();
    v = v.wrapping_add(1);
    v.reverse_bits()
}
