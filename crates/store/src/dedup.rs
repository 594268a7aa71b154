//! The dedup table: client id → last seq, the LSN it committed at and its stored reply.
//!
//! It is what makes a stub's retry after a failover exactly-once (DESIGN.md, "Seamless
//! switchover"): the stub resends the same (client id, seq) to the new primary, which finds the
//! seq in its table and returns the stored reply instead of running the call again. For that the
//! table lives inside the segment, and [`Store::call_once`](crate::Store::call_once) writes a
//! call's slot in the same txn as the procedure's effects: the slot travels in the call's own
//! redo record, so every backup that applied the record knows the call, and none knows a call
//! whose effects it lacks.
//!
//! # Where it lives
//!
//! The table is the last [`DedupTable::region_len`] bytes of the segment (the region starts on a
//! cache line); workloads lay their tables out before it through [`Layout::workload`]. Its size
//! is a function of the segment's length alone, so a primary and its backups, whose segments
//! have the same length, agree on it without being told. It has two parts:
//! - the slots, last: at most 1/128 of the segment, as the largest power of two of 64-byte
//!   slots that fits, and at most [`DEDUP_SLOTS_MAX`] slots. That is 4,096 slots (256 KiB) in
//!   the default 50 MiB database, 16,384 (1 MiB) from 128 MiB on, and none in a segment under
//!   8 KiB;
//! - before them, a [`Heap`] of 1/1024 of the segment (51,200 bytes in 50 MiB) for the replies
//!   too long for a slot.
//!
//! # Slots
//!
//! A slot is one cache line, so a lookup that finds its client costs one miss:
//!
//! ```text
//! offset  0: client id   u64   0 = empty slot
//! offset  8: seq         u64   the client's last committed seq
//! offset 16: lsn         u64   the LSN that call committed at
//! offset 24: reply len   u32   its top bit set: the reply was not kept (see below)
//! offset 28: reply       [u8; 36]: the reply, zero past reply len, when it is at most
//!                        DEDUP_REPLY_INLINE_MAX bytes; else the segment offset (u64) of the
//!                        reply's first chunk in the heap, then zeros; all zero when the
//!                        reply was not kept
//! ```
//!
//! The benchmark procedures' replies fit the slot (new-order's 12 bytes is the largest), so a
//! lookup that finds its client costs one miss. A longer reply is a chain of heap blocks, each
//! the segment offset (u64) of the next (0 ends it) followed by as much of the reply as the
//! block holds; a chunk is one block of the smallest class that holds the rest of the reply,
//! or a largest block. The call that writes a client's slot frees the chain of the reply it
//! replaces, in the same txn, so the table still holds only each client's last reply.
//!
//! A reply the heap cannot hold (the heap is small, and shared by every client's last reply)
//! does not stop its call: the call commits and its client gets the reply, but the slot keeps
//! only the reply's length, marked as not kept. A retry of that call still runs nothing; it is
//! answered [`Deduped::DuplicateReplyNotKept`](crate::Deduped::DuplicateReplyNotKept), which
//! tells the client that the call committed once and that its reply is gone. A retry is rare
//! (a failover or a timeout between the commit and the reply), and a write that ran once with
//! a lost reply is what a client can act on; a write refused because its reply was long is
//! not.
//!
//! Slots are found by open addressing with linear probing from a client's home slot, chosen by
//! a fixed multiplicative (Fibonacci) hash: no random seed, so every replica probes the same
//! way. Entries are never removed, so there are no tombstones and a probe ends at the first
//! empty slot. At most [`DedupTable::clients_max`] clients, 7/8 of the slots, are admitted,
//! which keeps a lookup to a few slots on average; a new client beyond that is refused with
//! [`CallError::DedupFull`](crate::CallError::DedupFull) before anything runs.
//!
//! Client id 0 means "no dedup" (loads, the in-process benchmark driver) and never has a slot.
//! A client has at most one call in flight: it numbers its calls with increasing seqs and sends
//! the next only after the previous one's reply, so "the last seq" is all the table keeps.

use std::collections::BTreeSet;

use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};

use crate::Inconsistency;
use crate::heap::{HEAP_BLOCK_MAX, HEAP_LEN_MIN, Heap, HeapFull};

/// Most slots a dedup table has: 1 MiB, reached by segments of 128 MiB. A group's executor
/// serves its clients' calls one at a time; 14,336 client stubs (7/8 of the slots) per group is
/// more than one executor can keep busy with one call in flight each.
pub const DEDUP_SLOTS_MAX: usize = 16_384;
/// Bytes of one slot: one cache line.
pub const DEDUP_SLOT_BYTES: usize = 64;
/// Longest reply a slot stores itself; a longer one goes to the heap.
pub const DEDUP_REPLY_INLINE_MAX: usize = 36;
/// The bit of a slot's reply length that says the reply was not kept.
const REPLY_NOT_KEPT: u32 = 1 << 31;
/// Bytes of a chunk's link to the next chunk.
const CHUNK_LINK_BYTES: usize = 8;
/// The heap takes 1/1024 of the segment: room for long replies that costs the benchmark
/// workloads nothing of their scale (Debit-Credit keeps its 5 branches in 50 MiB).
const HEAP_SHARE_DIVISOR: usize = 1024;
/// The table takes at most 1/128 of its segment, so it never costs a workload more than a
/// rounding of its scale (Debit-Credit keeps its 5 branches in 50 MiB).
const SEGMENT_SHARE_DIVISOR: usize = 128;
/// Fibonacci hashing's multiplier, 2^64 / φ: consecutive client ids land far apart.
const HASH_MULTIPLIER: u64 = 0x9E37_79B9_7F4A_7C15;

/// The name under which a malformed slot is reported.
pub const CHECK_DEDUP_SLOT: &str = "dedup slots are well formed";
/// The name under which a slot a lookup cannot reach is reported.
pub const CHECK_DEDUP_REACHABLE: &str = "dedup slots are reachable from their home slot";
/// The name under which a client with two slots, or too many clients, is reported.
pub const CHECK_DEDUP_CLIENTS: &str = "dedup clients are unique and within the limit";
/// The name under which a long reply's chain that leaves the heap is reported.
pub const CHECK_DEDUP_CHAIN: &str = "dedup long replies are whole chains in the heap";

/// One slot, exactly as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Slot {
    /// 0 for an empty slot.
    client_id: u64,
    seq: u64,
    lsn: u64,
    reply_len: u32,
    reply: [u8; DEDUP_REPLY_INLINE_MAX],
}

const _: () = assert!(size_of::<Slot>() == DEDUP_SLOT_BYTES);
const _: () = assert!(DEDUP_SLOTS_MAX.is_power_of_two());

impl Slot {
    /// The length of the reply, kept or not.
    fn reply_len(&self) -> usize {
        (self.reply_len & !REPLY_NOT_KEPT) as usize
    }

    fn reply_kept(&self) -> bool {
        self.reply_len & REPLY_NOT_KEPT == 0
    }

    /// The bytes of the slot's `reply` field in use: the reply itself, the chain's first
    /// chunk, or none for a reply not kept.
    fn inline_len(&self) -> usize {
        if !self.reply_kept() {
            0
        } else if self.reply_in_heap() {
            CHUNK_LINK_BYTES
        } else {
            self.reply_len()
        }
    }

    /// Whether the reply is a chain of chunks in the heap.
    fn reply_in_heap(&self) -> bool {
        self.reply_kept() && self.reply_len() > DEDUP_REPLY_INLINE_MAX
    }

    /// The segment offset of a long reply's first chunk.
    fn chain(&self) -> usize {
        assert!(self.reply_in_heap(), "only a reply in the heap has a chain");
        u64::from_le_bytes(self.reply[..8].try_into().expect("8 bytes")) as usize
    }
}

/// What the table holds for one client: its last committed call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DedupEntry {
    seq: u64,
    lsn: u64,
    /// `None`: the reply was too long for the heap, and only its length was kept.
    reply: Option<Vec<u8>>,
    reply_len: usize,
}

impl DedupEntry {
    /// The seq of the client's last committed call.
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// The LSN that call committed at: the LSN its reply depends on.
    pub fn lsn(&self) -> u64 {
        self.lsn
    }

    /// That call's reply; `None` when it was too long for the heap and not kept.
    pub fn reply(&self) -> Option<&[u8]> {
        self.reply.as_deref()
    }

    /// The length of that call's reply, kept or not.
    pub fn reply_len(&self) -> usize {
        self.reply_len
    }
}

/// The chunk a long reply's `remaining` bytes start with: the bytes of its block's
/// allocation (link included) and how many of the reply's bytes it holds.
fn chunk_for(remaining: usize) -> (usize, usize) {
    assert!(remaining > 0, "a chunk holds at least one byte");
    if remaining + CHUNK_LINK_BYTES <= HEAP_BLOCK_MAX {
        (remaining + CHUNK_LINK_BYTES, remaining)
    } else {
        (HEAP_BLOCK_MAX, HEAP_BLOCK_MAX - CHUNK_LINK_BYTES)
    }
}

/// A client's slot as a probe found it: its last call, and where its reply is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct DedupSlot(Slot);

impl DedupSlot {
    pub(crate) fn seq(&self) -> u64 {
        self.0.seq
    }

    pub(crate) fn lsn(&self) -> u64 {
        self.0.lsn
    }

    /// Whether the slot keeps the call's reply (else only its length).
    pub(crate) fn reply_kept(&self) -> bool {
        self.0.reply_kept()
    }

    pub(crate) fn reply_len(&self) -> usize {
        self.0.reply_len()
    }
}

/// Where a client's slot is, or would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The client has slot `index`, which holds `slot`.
    Found { index: usize, slot: DedupSlot },
    /// The client has no slot; `index` is the empty slot it would take.
    Vacant { index: usize },
    /// The client has no slot and every slot is taken (only in tables too small for the 7/8
    /// limit to leave a slot empty).
    Full,
}

/// The position and size of a segment's dedup table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DedupTable {
    /// Segment offset of the region: the heap, then the slots.
    offset: usize,
    heap: Heap,
    slots_offset: usize,
    slot_count: usize,
}

impl DedupTable {
    /// The table of a segment of `segment_len` bytes; see the module doc for its size.
    pub fn for_segment_len(segment_len: usize) -> DedupTable {
        let fit = (segment_len / SEGMENT_SHARE_DIVISOR / DEDUP_SLOT_BYTES).min(DEDUP_SLOTS_MAX);
        let slot_count = if fit == 0 { 0 } else { 1 << fit.ilog2() };
        let slots_len = slot_count * DEDUP_SLOT_BYTES;
        // Segments are whole pages, so this rounding only matters for the unbounded lengths
        // that size computations use.
        let slots_offset = (segment_len - slots_len) / 64 * 64;
        let heap_share = segment_len / HEAP_SHARE_DIVISOR / 64 * 64;
        let heap_len = if slot_count > 0 && heap_share >= HEAP_LEN_MIN {
            heap_share
        } else {
            0
        };
        let offset = slots_offset - heap_len;
        assert!(slot_count <= DEDUP_SLOTS_MAX);
        assert!(slot_count == 0 || slot_count.is_power_of_two());
        assert!(slots_offset + slots_len <= segment_len);
        DedupTable {
            offset,
            heap: Heap::new(offset, heap_len),
            slots_offset,
            slot_count,
        }
    }

    /// Segment offset of the region; every byte before it is the workload's.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes of the region, from [`offset`](DedupTable::offset): the heap and the slots.
    pub fn region_len(&self) -> usize {
        self.heap.len() + self.slot_count * DEDUP_SLOT_BYTES
    }

    /// The heap that holds replies too long for a slot.
    pub fn heap(&self) -> &Heap {
        &self.heap
    }

    pub fn slot_count(&self) -> usize {
        self.slot_count
    }

    /// Most clients the table admits: 7/8 of the slots, or all of them in a table of fewer
    /// than 8, where the limit would leave none.
    pub fn clients_max(&self) -> usize {
        self.slot_count - self.slot_count / 8
    }

    /// Segment offset of slot `index`.
    fn slot_offset(&self, index: usize) -> usize {
        assert!(
            index < self.slot_count,
            "dedup slot {index} is past the table's {} slots",
            self.slot_count
        );
        self.slots_offset + index * DEDUP_SLOT_BYTES
    }

    /// The slot where a lookup for `client_id` starts: the top bits of a fixed multiplicative
    /// hash, which spread consecutive ids evenly over the table.
    fn home_slot(&self, client_id: u64) -> usize {
        assert!(self.slot_count > 0, "an empty table has no home slots");
        let shift = u64::BITS - self.slot_count.trailing_zeros();
        client_id
            .wrapping_mul(HASH_MULTIPLIER)
            .checked_shr(shift)
            .unwrap_or(0) as usize
    }

    /// Finds `client_id`'s slot in `segment`, or the empty slot it would take.
    pub(crate) fn probe(&self, segment: &Segment, client_id: u64) -> Probe {
        assert_ne!(client_id, 0, "client id 0 is never deduplicated");
        if self.slot_count == 0 {
            return Probe::Full;
        }
        let mask = self.slot_count - 1;
        let home = self.home_slot(client_id);
        for step in 0..self.slot_count {
            let index = (home + step) & mask;
            let offset = self.slot_offset(index);
            let slot_client_id: u64 = segment.read_pod(offset);
            if slot_client_id == client_id {
                return Probe::Found {
                    index,
                    slot: DedupSlot(segment.read_pod(offset)),
                };
            }
            if slot_client_id == 0 {
                return Probe::Vacant { index };
            }
        }
        Probe::Full
    }

    /// What the table in `segment` holds for `client_id`; `None` for client 0 and for a
    /// client without a committed deduplicated call.
    pub fn entry(&self, segment: &Segment, client_id: u64) -> Option<DedupEntry> {
        if client_id == 0 {
            return None;
        }
        match self.probe(segment, client_id) {
            Probe::Found { slot, .. } => {
                let mut reply = Vec::new();
                self.read_reply(segment, &slot, &mut reply);
                Some(DedupEntry {
                    seq: slot.seq(),
                    lsn: slot.lsn(),
                    reply: slot.reply_kept().then_some(reply),
                    reply_len: slot.reply_len(),
                })
            }
            Probe::Vacant { .. } | Probe::Full => None,
        }
    }

    /// Copies the reply `slot` holds into `reply` (cleared first; left empty for a reply not
    /// kept).
    pub(crate) fn read_reply(&self, segment: &Segment, slot: &DedupSlot, reply: &mut Vec<u8>) {
        let slot = &slot.0;
        reply.clear();
        if !slot.reply_in_heap() {
            reply.extend_from_slice(&slot.reply[..slot.inline_len()]);
            return;
        }
        let mut chunk = slot.chain();
        while reply.len() < slot.reply_len() {
            let (_, held) = chunk_for(slot.reply_len() - reply.len());
            reply.extend_from_slice(segment.read(chunk + CHUNK_LINK_BYTES, held));
            chunk = segment.read_pod::<u64>(chunk) as usize;
        }
        assert_eq!(chunk, 0, "a long reply's chain ends with its last byte");
    }

    /// The chunks of the long reply `slot` holds, as (segment offset, allocated bytes);
    /// `Err` names what is wrong with a chain that leaves the heap or ends early or late.
    fn chain(
        &self,
        read_u64: impl Fn(usize) -> u64,
        slot: &Slot,
    ) -> Result<Vec<(usize, usize)>, String> {
        let mut chunks = Vec::new();
        if !slot.reply_in_heap() {
            return Ok(chunks);
        }
        let heap_end = self.heap.offset() + self.heap.len();
        let mut chunk = slot.chain();
        let mut remaining = slot.reply_len();
        while remaining > 0 {
            let (allocated, held) = chunk_for(remaining);
            if chunk < self.heap.offset() || chunk + allocated > heap_end {
                return Err(format!(
                    "a chunk at {chunk} of client {}'s reply is outside the heap",
                    slot.client_id
                ));
            }
            chunks.push((chunk, allocated));
            remaining -= held;
            chunk = read_u64(chunk) as usize;
        }
        if chunk != 0 {
            return Err(format!(
                "client {}'s reply chain goes on past its {} bytes",
                slot.client_id,
                slot.reply_len()
            ));
        }
        Ok(chunks)
    }

    /// Number of clients with a slot in `segment`.
    pub fn clients(&self, segment: &Segment) -> usize {
        (0..self.slot_count)
            .filter(|&index| segment.read_pod::<u64>(self.slot_offset(index)) != 0)
            .count()
    }

    /// Writes slot `index` in `txn`: `client_id` committed `seq` at the txn's LSN with
    /// `reply`. The slot must be empty or already the client's. The chain of the reply it
    /// replaces goes back to the heap; a long `reply` takes a new one, or, when the heap
    /// cannot hold it, the slot keeps only its length. Returns whether the reply was kept.
    pub(crate) fn record(
        &self,
        txn: &mut Txn<'_>,
        index: usize,
        client_id: u64,
        seq: u64,
        reply: &[u8],
    ) -> bool {
        assert_ne!(client_id, 0, "client id 0 is never deduplicated");
        let reply_len = u32::try_from(reply.len())
            .ok()
            .filter(|&len| len < REPLY_NOT_KEPT)
            .expect("a reply is under 2 GiB (a node's reply frame limit)");
        let offset = self.slot_offset(index);
        let old: Slot = txn.read_pod(offset);
        assert!(
            old.client_id == 0 || old.client_id == client_id,
            "dedup slot {index} belongs to client {}, not {client_id}",
            old.client_id
        );
        if old.reply_in_heap() {
            let chunks = self
                .chain(|at| txn.read_pod(at), &old)
                .expect("a slot's chain is whole");
            for (chunk, allocated) in chunks {
                self.heap.free(txn, chunk, allocated);
            }
        }
        let mut slot = Slot {
            client_id,
            seq,
            lsn: txn.lsn_next(),
            reply_len,
            reply: [0; DEDUP_REPLY_INLINE_MAX],
        };
        let mut kept = true;
        if reply.len() <= DEDUP_REPLY_INLINE_MAX {
            slot.reply[..reply.len()].copy_from_slice(reply);
        } else {
            match self.write_chain(txn, reply) {
                Ok(chain) => slot.reply[..8].copy_from_slice(&(chain as u64).to_le_bytes()),
                Err(HeapFull { .. }) => {
                    slot.reply_len |= REPLY_NOT_KEPT;
                    kept = false;
                }
            }
        }
        // Declaring the whole line costs one 64-byte undo copy; the redo capture diffs it
        // against that copy, so only the words that changed (seq, LSN, the reply's) ship.
        *txn.set_pod::<Slot>(offset) = slot;
        kept
    }

    /// Writes `reply` into a new chain of heap chunks in `txn`; returns its first chunk's
    /// segment offset. When the heap runs out part way, the chunks already taken go back to
    /// it (the txn still commits: its slot keeps only the reply's length).
    fn write_chain(&self, txn: &mut Txn<'_>, reply: &[u8]) -> Result<usize, HeapFull> {
        let mut first = 0;
        let mut previous: Option<usize> = None;
        let mut taken = Vec::new();
        let mut rest = reply;
        while !rest.is_empty() {
            let (allocated, held) = chunk_for(rest.len());
            let chunk = match self.heap.alloc(txn, allocated) {
                Ok(chunk) => chunk,
                Err(full) => {
                    for (chunk, allocated) in taken {
                        self.heap.free(txn, chunk, allocated);
                    }
                    return Err(full);
                }
            };
            taken.push((chunk, allocated));
            let bytes = txn.set_range(chunk, CHUNK_LINK_BYTES + held);
            bytes[..CHUNK_LINK_BYTES].copy_from_slice(&0u64.to_le_bytes());
            bytes[CHUNK_LINK_BYTES..].copy_from_slice(&rest[..held]);
            match previous {
                Some(previous) => *txn.set_pod::<u64>(previous) = chunk as u64,
                None => first = chunk,
            }
            previous = Some(chunk);
            rest = &rest[held..];
        }
        Ok(first)
    }

    /// Checks every slot: an empty slot is all zero; an occupied one has a reply that fits
    /// with zeros after it and an LSN the segment has reached; a lookup reaches it (no empty
    /// slot between its home and it); no client has two slots; at most
    /// [`clients_max`](DedupTable::clients_max) clients have one.
    pub fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        let slots: Vec<Slot> = (0..self.slot_count)
            .map(|index| segment.read_pod(self.slot_offset(index)))
            .collect();
        let malformed = |index: usize, slot: &Slot, why: &str| Inconsistency {
            check: CHECK_DEDUP_SLOT,
            detail: format!("slot {index} {why}: {slot:?}"),
        };
        for (index, slot) in slots.iter().enumerate() {
            if slot.client_id == 0 {
                if *slot != Slot::zeroed() {
                    return Err(malformed(index, slot, "is empty but not zero"));
                }
                continue;
            }
            if slot.reply[slot.inline_len()..]
                .iter()
                .any(|&byte| byte != 0)
            {
                return Err(malformed(index, slot, "has bytes after its reply"));
            }
            if slot.lsn == 0 || slot.lsn > segment.lsn() {
                return Err(malformed(
                    index,
                    slot,
                    &format!("has an LSN outside 1..={}", segment.lsn()),
                ));
            }
        }

        // A lookup walks from the home slot to the first empty one, so an occupied slot is
        // reachable when the run of occupied slots ending at it reaches back to its home. The
        // runs are counted from an empty slot, going round once; in a full table every slot
        // is reachable.
        if let Some(empty) = slots.iter().position(|slot| slot.client_id == 0) {
            let mask = self.slot_count - 1;
            let mut run_len = 0;
            for step in 1..=self.slot_count {
                let index = (empty + step) & mask;
                let slot = &slots[index];
                if slot.client_id == 0 {
                    run_len = 0;
                    continue;
                }
                run_len += 1;
                let distance = index.wrapping_sub(self.home_slot(slot.client_id)) & mask;
                if distance >= run_len {
                    return Err(Inconsistency {
                        check: CHECK_DEDUP_REACHABLE,
                        detail: format!(
                            "client {} sits in slot {index}, {distance} slots past its home, \
                             behind an empty slot",
                            slot.client_id
                        ),
                    });
                }
            }
        }

        let mut client_ids = BTreeSet::new();
        for (index, slot) in slots.iter().enumerate() {
            if slot.client_id != 0 && !client_ids.insert(slot.client_id) {
                return Err(Inconsistency {
                    check: CHECK_DEDUP_CLIENTS,
                    detail: format!("client {} has a second slot, {index}", slot.client_id),
                });
            }
        }
        if client_ids.len() > self.clients_max() {
            return Err(Inconsistency {
                check: CHECK_DEDUP_CLIENTS,
                detail: format!(
                    "{} clients have slots, over the limit of {}",
                    client_ids.len(),
                    self.clients_max()
                ),
            });
        }

        // Every long reply is a whole chain in the heap, and the chains and the free blocks
        // account for every carved byte of it: nothing leaked, nothing owned twice.
        let mut owned = Vec::new();
        for slot in slots.iter().filter(|slot| slot.client_id != 0) {
            let chunks = self
                .chain(|at| segment.read_pod(at), slot)
                .map_err(|detail| Inconsistency {
                    check: CHECK_DEDUP_CHAIN,
                    detail,
                })?;
            owned.extend(chunks);
        }
        self.heap.check(segment, &owned)?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_memory::{PAGE_SIZE, Strategy};

    #[test]
    fn the_table_scales_with_the_segment_up_to_its_maximum() {
        let cases = [
            (PAGE_SIZE, 0),
            (2 * PAGE_SIZE, 1),
            (16 << 10, 2),
            (1 << 20, 128),
            (50 << 20, 4096),
            (128 << 20, DEDUP_SLOTS_MAX),
            (1 << 40, DEDUP_SLOTS_MAX),
        ];
        for (segment_len, slot_count) in cases {
            let table = DedupTable::for_segment_len(segment_len);
            assert_eq!(table.slot_count(), slot_count, "{segment_len}");
            assert_eq!(table.offset() + table.region_len(), segment_len);
            let slots_len = table.region_len() - table.heap().len();
            assert!(slots_len <= segment_len / SEGMENT_SHARE_DIVISOR);
            assert!(table.heap().len() <= segment_len / HEAP_SHARE_DIVISOR);
            assert_eq!(table.offset() % 64, 0);
        }
        assert_eq!(DedupTable::for_segment_len(50 << 20).clients_max(), 3584);
        assert_eq!(DedupTable::for_segment_len(16 << 10).clients_max(), 2);
        let unbounded = DedupTable::for_segment_len(usize::MAX);
        assert_eq!(unbounded.slot_count(), DEDUP_SLOTS_MAX);
        let unbounded_heap = usize::MAX / HEAP_SHARE_DIVISOR / 64 * 64;
        assert_eq!(
            unbounded.offset(),
            (usize::MAX - (1 << 20)) / 64 * 64 - unbounded_heap
        );
    }

    #[test]
    fn home_slots_spread_consecutive_ids_and_stay_in_range() {
        let table = DedupTable::for_segment_len(1 << 20);
        let homes: BTreeSet<usize> = (1..=64).map(|id| table.home_slot(id)).collect();
        assert!(homes.len() >= 60, "{} distinct homes", homes.len());
        assert!(homes.iter().all(|&home| home < table.slot_count()));
        let single = DedupTable::for_segment_len(2 * PAGE_SIZE);
        assert_eq!(single.home_slot(u64::MAX), 0);
    }

    /// A segment whose table holds `clients` at the slots a probe gives them, committed.
    fn segment_with(clients: &[u64]) -> (Segment, DedupTable) {
        let len = 1 << 20;
        let mut segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        let table = DedupTable::for_segment_len(len);
        for &client_id in clients {
            let Probe::Vacant { index } = table.probe(&segment, client_id) else {
                panic!("client {client_id} is new");
            };
            let mut txn = segment.begin();
            assert!(table.record(&mut txn, index, client_id, 1, &[7; 12]));
            txn.commit();
        }
        table.check(&segment).unwrap();
        (segment, table)
    }

    /// Commits `plant` behind the table's back and returns the check that fails.
    fn check_after(
        clients: &[u64],
        plant: impl FnOnce(&DedupTable, &mut Txn<'_>),
    ) -> Inconsistency {
        let (mut segment, table) = segment_with(clients);
        let mut txn = segment.begin();
        plant(&table, &mut txn);
        txn.commit();
        table
            .check(&segment)
            .expect_err("the planted bug is caught")
    }

    /// Slot `index` of the table, writable in `txn`.
    fn slot_mut<'t>(table: &DedupTable, txn: &'t mut Txn<'_>, index: usize) -> &'t mut Slot {
        txn.set_pod(table.slot_offset(index))
    }

    /// The slot `client_id` holds in `table`, as committed in a fresh `segment_with` it.
    fn index_of(clients: &[u64], client_id: u64) -> usize {
        let (segment, table) = segment_with(clients);
        match table.probe(&segment, client_id) {
            Probe::Found { index, .. } => index,
            probe => panic!("client {client_id} is in the table: {probe:?}"),
        }
    }

    /// A reply whose second chunk the heap cannot give back leaves its first chunk free, not
    /// leaked: the slot keeps the reply's length alone, and the check accounts for every byte.
    #[test]
    fn a_reply_the_heap_holds_only_part_of_is_not_kept_and_leaks_nothing() {
        // 2 GiB (untouched pages cost nothing): a 2 MiB heap, room for one largest block.
        let len = 2 << 30;
        let mut segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        let table = DedupTable::for_segment_len(len);
        assert_eq!(table.heap().len(), 2 << 20);
        let reply = vec![9; HEAP_BLOCK_MAX + HEAP_BLOCK_MAX / 2];
        let Probe::Vacant { index } = table.probe(&segment, 5) else {
            panic!("client 5 is new");
        };
        let mut txn = segment.begin();
        assert!(!table.record(&mut txn, index, 5, 1, &reply));
        txn.commit();
        table.check(&segment).unwrap();
        let stats = table.heap().stats(&segment).unwrap();
        assert_eq!(
            (stats.carved_bytes, stats.free_bytes),
            (HEAP_BLOCK_MAX, HEAP_BLOCK_MAX)
        );
        let entry = table.entry(&segment, 5).unwrap();
        assert_eq!((entry.reply(), entry.reply_len()), (None, reply.len()));
        // The freed block serves the client's next reply, which is kept.
        let mut txn = segment.begin();
        assert!(table.record(&mut txn, index, 5, 2, &reply[..HEAP_BLOCK_MAX / 2]));
        txn.commit();
        table.check(&segment).unwrap();
        let entry = table.entry(&segment, 5).unwrap();
        assert_eq!(entry.reply(), Some(&reply[..HEAP_BLOCK_MAX / 2]));
    }

    #[test]
    fn the_check_catches_malformed_slots() {
        let index = index_of(&[5], 5);
        let err = check_after(&[5], |table, txn| {
            slot_mut(table, txn, index).reply_len = DEDUP_REPLY_INLINE_MAX as u32 + 1;
        });
        assert_eq!(err.check, CHECK_DEDUP_SLOT);
        let err = check_after(&[5], |table, txn| {
            slot_mut(table, txn, index).reply[20] = 1;
        });
        assert!(err.detail.contains("bytes after its reply"), "{err}");
        let err = check_after(&[5], |table, txn| {
            slot_mut(table, txn, index).lsn = 99;
        });
        assert!(err.detail.contains("LSN outside"), "{err}");
        let err = check_after(&[5], |table, txn| {
            slot_mut(table, txn, (index + 1) % table.slot_count()).seq = 3;
        });
        assert!(err.detail.contains("empty but not zero"), "{err}");
    }

    #[test]
    fn the_check_catches_an_unreachable_slot_and_a_second_slot() {
        let index = index_of(&[5], 5);
        let err = check_after(&[5], |table, txn| {
            // Client 5 moves one slot past its home, leaving the home empty.
            let slot = *slot_mut(table, txn, index);
            *slot_mut(table, txn, index) = Slot::zeroed();
            *slot_mut(table, txn, (index + 1) % table.slot_count()) = slot;
        });
        assert_eq!(err.check, CHECK_DEDUP_REACHABLE);
        let err = check_after(&[5], |table, txn| {
            // A second slot right after the first is reachable, so only uniqueness fails.
            let slot = *slot_mut(table, txn, index);
            *slot_mut(table, txn, (index + 1) % table.slot_count()) = slot;
        });
        assert_eq!(err.check, CHECK_DEDUP_CLIENTS);
    }

    #[test]
    fn colliding_clients_probe_past_each_other() {
        let table = DedupTable::for_segment_len(1 << 20);
        // Ids that share a home slot, found by search: the hash is fixed.
        let home = table.home_slot(1);
        let colliding: Vec<u64> = (1..)
            .filter(|&id| table.home_slot(id) == home)
            .take(3)
            .collect();
        let (segment, table) = segment_with(&colliding);
        for (step, &client_id) in colliding.iter().enumerate() {
            let Probe::Found { index, slot } = table.probe(&segment, client_id) else {
                panic!("client {client_id} has a slot");
            };
            assert_eq!(index, (home + step) % table.slot_count());
            let entry = table.entry(&segment, client_id).unwrap();
            assert_eq!(slot.seq(), 1);
            assert_eq!((entry.seq(), entry.reply()), (1, Some(&[7; 12][..])));
        }
        assert_eq!(table.clients(&segment), 3);
    }

    #[test]
    fn a_reply_longer_than_the_largest_block_is_a_chain_and_is_freed_whole() {
        // 2 GiB: a 2 MiB heap. The segment is mapped lazily; only the pages written are
        // touched.
        let len = 2 << 30;
        let mut segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        let table = DedupTable::for_segment_len(len);
        assert_eq!(table.heap().len(), 2 << 20);
        let reply: Vec<u8> = (0..HEAP_BLOCK_MAX + 1000)
            .map(|i| (i % 251) as u8)
            .collect();
        let Probe::Vacant { index } = table.probe(&segment, 9) else {
            panic!("client 9 is new");
        };
        let mut txn = segment.begin();
        assert!(table.record(&mut txn, index, 9, 1, &reply));
        txn.commit();
        assert_eq!(table.entry(&segment, 9).unwrap().reply(), Some(&reply[..]));
        let stats = table.heap().check(&segment, &[]).err();
        assert!(stats.is_some(), "two chunks are owned");
        table.check(&segment).unwrap();
        // The next call's short reply frees both chunks.
        let mut txn = segment.begin();
        assert!(table.record(&mut txn, index, 9, 2, &[5; 3]));
        txn.commit();
        table.check(&segment).unwrap();
        let stats = table.heap().stats(&segment).unwrap();
        assert_eq!(stats.free_bytes, stats.carved_bytes);
        assert_eq!(stats.free_blocks, 2);
    }
}
