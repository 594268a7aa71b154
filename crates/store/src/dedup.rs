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
//! have the same length, agree on it without being told:
//! [`DedupTable::for_segment_len`] gives it at most 1/128 of the segment, as the largest power
//! of two of 64-byte slots that fits, and at most [`DEDUP_SLOTS_MAX`] slots. That is 4,096
//! slots (256 KiB) in the default 50 MiB database, 16,384 (1 MiB) from 128 MiB on, and none in
//! a segment under 8 KiB.
//!
//! # Slots
//!
//! A slot is one cache line, so a lookup that finds its client costs one miss:
//!
//! ```text
//! offset  0: client id   u64   0 = empty slot
//! offset  8: seq         u64   the client's last committed seq
//! offset 16: lsn         u64   the LSN that call committed at
//! offset 24: reply len   u32   at most DEDUP_REPLY_LEN_MAX
//! offset 28: reply       [u8; 36], zero past reply len
//! ```
//!
//! The largest reply of the registered procedures is new-order's 12 bytes (order id and
//! total); 36 is what is left of the cache line, three times that. Every procedure's reply
//! must fit, deduplicated or not: [`Store::call`](crate::Store::call) aborts the txn and panics
//! on a longer one, so such a bug fails the first test that makes that reply rather than the
//! first client that retries it.
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

/// Most slots a dedup table has: 1 MiB, reached by segments of 128 MiB. A group's executor
/// serves its clients' calls one at a time; 14,336 client stubs (7/8 of the slots) per group is
/// more than one executor can keep busy with one call in flight each.
pub const DEDUP_SLOTS_MAX: usize = 16_384;
/// Bytes of one slot: one cache line.
pub const DEDUP_SLOT_BYTES: usize = 64;
/// Longest reply a slot stores, and so the longest reply any procedure may write.
pub const DEDUP_REPLY_LEN_MAX: usize = 36;
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

/// One slot, exactly as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Slot {
    /// 0 for an empty slot.
    client_id: u64,
    seq: u64,
    lsn: u64,
    reply_len: u32,
    reply: [u8; DEDUP_REPLY_LEN_MAX],
}

const _: () = assert!(size_of::<Slot>() == DEDUP_SLOT_BYTES);
const _: () = assert!(DEDUP_SLOTS_MAX.is_power_of_two());

/// What the table holds for one client: its last committed call.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct DedupEntry {
    slot: Slot,
}

impl DedupEntry {
    /// The seq of the client's last committed call.
    pub fn seq(&self) -> u64 {
        self.slot.seq
    }

    /// The LSN that call committed at: the LSN its reply depends on.
    pub fn lsn(&self) -> u64 {
        self.slot.lsn
    }

    /// That call's reply.
    pub fn reply(&self) -> &[u8] {
        &self.slot.reply[..self.slot.reply_len as usize]
    }
}

impl std::fmt::Debug for DedupEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DedupEntry")
            .field("client_id", &self.slot.client_id)
            .field("seq", &self.slot.seq)
            .field("lsn", &self.slot.lsn)
            .field("reply", &self.reply())
            .finish()
    }
}

/// Where a client's slot is, or would go.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Probe {
    /// The client has slot `index`.
    Found { index: usize, entry: DedupEntry },
    /// The client has no slot; `index` is the empty slot it would take.
    Vacant { index: usize },
    /// The client has no slot and every slot is taken (only in tables too small for the 7/8
    /// limit to leave a slot empty).
    Full,
}

/// The position and size of a segment's dedup table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DedupTable {
    offset: usize,
    slot_count: usize,
}

impl DedupTable {
    /// The table of a segment of `segment_len` bytes; see the module doc for its size.
    pub fn for_segment_len(segment_len: usize) -> DedupTable {
        let fit = (segment_len / SEGMENT_SHARE_DIVISOR / DEDUP_SLOT_BYTES).min(DEDUP_SLOTS_MAX);
        let slot_count = if fit == 0 { 0 } else { 1 << fit.ilog2() };
        let region_len = slot_count * DEDUP_SLOT_BYTES;
        // Segments are whole pages, so this rounding only matters for the unbounded lengths
        // that size computations use.
        let offset = (segment_len - region_len) / 64 * 64;
        assert!(slot_count <= DEDUP_SLOTS_MAX);
        assert!(slot_count == 0 || slot_count.is_power_of_two());
        assert!(offset + region_len <= segment_len);
        DedupTable { offset, slot_count }
    }

    /// Segment offset of the first slot; every byte before it is the workload's.
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Bytes of the region, from [`offset`](DedupTable::offset).
    pub fn region_len(&self) -> usize {
        self.slot_count * DEDUP_SLOT_BYTES
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
        self.offset + index * DEDUP_SLOT_BYTES
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
                let slot: Slot = segment.read_pod(offset);
                return Probe::Found {
                    index,
                    entry: DedupEntry { slot },
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
            Probe::Found { entry, .. } => Some(entry),
            Probe::Vacant { .. } | Probe::Full => None,
        }
    }

    /// Number of clients with a slot in `segment`.
    pub fn clients(&self, segment: &Segment) -> usize {
        (0..self.slot_count)
            .filter(|&index| segment.read_pod::<u64>(self.slot_offset(index)) != 0)
            .count()
    }

    /// Writes slot `index` in `txn`: `client_id` committed `seq` at the txn's LSN with
    /// `reply`. The slot must be empty or already the client's.
    pub(crate) fn record(
        &self,
        txn: &mut Txn<'_>,
        index: usize,
        client_id: u64,
        seq: u64,
        reply: &[u8],
    ) {
        assert_ne!(client_id, 0, "client id 0 is never deduplicated");
        assert!(
            reply.len() <= DEDUP_REPLY_LEN_MAX,
            "a {}-byte reply does not fit a dedup slot",
            reply.len()
        );
        let offset = self.slot_offset(index);
        let slot_client_id: u64 = txn.read_pod(offset);
        assert!(
            slot_client_id == 0 || slot_client_id == client_id,
            "dedup slot {index} belongs to client {slot_client_id}, not {client_id}"
        );
        let mut slot = Slot {
            client_id,
            seq,
            lsn: txn.lsn_next(),
            reply_len: reply.len() as u32,
            reply: [0; DEDUP_REPLY_LEN_MAX],
        };
        slot.reply[..reply.len()].copy_from_slice(reply);
        // Declaring the whole line costs one 64-byte undo copy; the redo capture diffs it
        // against that copy, so only the words that changed (seq, LSN, the reply's) ship.
        *txn.set_pod::<Slot>(offset) = slot;
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
            let reply_len = slot.reply_len as usize;
            if reply_len > DEDUP_REPLY_LEN_MAX {
                return Err(malformed(
                    index,
                    slot,
                    "has a reply longer than a slot holds",
                ));
            }
            if slot.reply[reply_len..].iter().any(|&byte| byte != 0) {
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
            assert!(table.region_len() <= segment_len / SEGMENT_SHARE_DIVISOR);
            assert_eq!(table.offset() % 64, 0);
        }
        assert_eq!(DedupTable::for_segment_len(50 << 20).clients_max(), 3584);
        assert_eq!(DedupTable::for_segment_len(16 << 10).clients_max(), 2);
        let unbounded = DedupTable::for_segment_len(usize::MAX);
        assert_eq!(unbounded.slot_count(), DEDUP_SLOTS_MAX);
        assert_eq!(unbounded.offset(), (usize::MAX - (1 << 20)) / 64 * 64);
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
            table.record(&mut txn, index, client_id, 1, &[7; 12]);
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

    #[test]
    fn the_check_catches_malformed_slots() {
        let index = index_of(&[5], 5);
        let err = check_after(&[5], |table, txn| {
            slot_mut(table, txn, index).reply_len = DEDUP_REPLY_LEN_MAX as u32 + 1;
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
            let Probe::Found { index, entry } = table.probe(&segment, client_id) else {
                panic!("client {client_id} has a slot");
            };
            assert_eq!(index, (home + step) % table.slot_count());
            assert_eq!((entry.seq(), entry.reply()), (1, &[7; 12][..]));
        }
        assert_eq!(table.clients(&segment), 3);
    }
}
