//! Property tests of the allocator: random txns of allocations and frees, checked against a
//! model of the blocks owners hold, with every committed txn's redo replayed on a replica.
//!
//! After every txn the allocator's own check must prove that the free blocks and the model's
//! blocks tile the carved arena, its stats must agree with the model, each owned block must
//! still hold the tags its owner wrote (so no two blocks overlap and the allocator never writes
//! into an owned block), and the replica must have the same page versions; the replica's bytes
//! are compared whole every few txns and at the end.

use std::collections::BTreeMap;

use proptest::prelude::*;
use tandem_memory::{Segment, Strategy as Logging};
use tandem_redis::alloc::{
    ALLOC_HEADER_BYTES, Alloc, AllocStats, CHECK_ALLOC, CHECK_ALLOC_ACCOUNTED, OutOfMemory,
};
use tandem_store::Rng;

const MIB: usize = 1 << 20;

/// One step of a random txn.
#[derive(Clone, Copy, Debug)]
enum Op {
    /// Allocate a block for this many bytes.
    Alloc(usize),
    /// Free the owned block at this index (modulo the number owned), if any.
    Free(usize),
    /// End the txn by committing it.
    Commit,
    /// End the txn by aborting it.
    Abort,
}

/// What an owner remembers of its block: the length it asked for and the tag it wrote.
#[derive(Clone, Copy, Debug)]
struct Owned {
    len: usize,
    tag: u64,
}

/// A segment with an allocator region, its replica, and the model of owned blocks.
struct Harness {
    segment: Segment,
    replica: Segment,
    alloc: Alloc,
    /// Owned blocks by segment offset.
    owned: BTreeMap<usize, Owned>,
    next_tag: u64,
    txns: u64,
}

fn block_len(len: usize) -> usize {
    Alloc::block_len_for(len).expect("the tests ask for at most 1 MiB")
}

impl Harness {
    /// A `segment_len` segment with a region of `region_len` bytes placed off its start (so
    /// region-relative and segment offsets differ) and short of its end.
    fn new(segment_len: usize, region_len: usize) -> Harness {
        let offset = 4096 + 48;
        assert!(offset + region_len < segment_len);
        Harness {
            segment: Segment::anonymous(segment_len, Logging::V3InlineLog).unwrap(),
            replica: Segment::anonymous(segment_len, Logging::V3InlineLog).unwrap(),
            alloc: Alloc::new(offset, region_len),
            owned: BTreeMap::new(),
            next_tag: 1,
            txns: 0,
        }
    }

    /// Runs `ops` in one txn, then commits it or aborts it, and checks everything.
    fn txn(&mut self, ops: &[Op], commit: bool) {
        let alloc = self.alloc;
        let stats_before = alloc.stats(&self.segment);
        let mut pending = self.owned.clone();
        let mut txn = self.segment.begin();
        for (index, &op) in ops.iter().enumerate() {
            match op {
                Op::Alloc(len) => {
                    let result = alloc.alloc(&mut txn, len);
                    if index == 0 {
                        // Before anything else in the txn, the stats predict the outcome.
                        assert_eq!(
                            result.is_ok(),
                            block_len(len) <= stats_before.allocatable_bytes,
                            "allocating {len} bytes with {stats_before:?}"
                        );
                    }
                    let block = match result {
                        Ok(block) => block,
                        Err(err) => {
                            assert_eq!(err, OutOfMemory { requested: len });
                            continue;
                        }
                    };
                    let end = block + block_len(len);
                    assert!(block.is_multiple_of(16), "block {block} is aligned");
                    assert!(
                        block >= alloc.offset() + ALLOC_HEADER_BYTES
                            && end <= alloc.offset() + alloc.len(),
                        "block {block}..{end} lies in the arena"
                    );
                    if let Some((&before, owner)) = pending.range(..block).next_back() {
                        assert!(before + block_len(owner.len) <= block, "overlaps {before}");
                    }
                    if let Some((&after, _)) = pending.range(block..).next() {
                        assert!(end <= after, "block {block}..{end} overlaps {after}");
                    }
                    let tag = self.next_tag;
                    self.next_tag += 1;
                    txn.set_range(block, 8).copy_from_slice(&tag.to_le_bytes());
                    txn.set_range(end - 8, 8)
                        .copy_from_slice(&tag.to_le_bytes());
                    pending.insert(block, Owned { len, tag });
                }
                Op::Free(pick) => {
                    if pending.is_empty() {
                        continue;
                    }
                    let (&block, &owner) = pending.iter().nth(pick % pending.len()).unwrap();
                    let end = block + block_len(owner.len);
                    assert_eq!(txn.read(block, 8), owner.tag.to_le_bytes());
                    assert_eq!(txn.read(end - 8, 8), owner.tag.to_le_bytes());
                    // Any length of the block's class frees it.
                    let len = if pick % 2 == 0 {
                        owner.len
                    } else {
                        block_len(owner.len)
                    };
                    alloc.free(&mut txn, block, len);
                    pending.remove(&block);
                }
                Op::Commit | Op::Abort => unreachable!("txn ends are not steps"),
            }
        }
        if commit {
            txn.commit();
            self.replica.apply_redo(self.segment.last_redo()).unwrap();
            self.owned = pending;
        } else {
            txn.abort();
            assert_eq!(
                alloc.stats(&self.segment),
                stats_before,
                "an abort restores"
            );
        }
        self.txns += 1;
        self.check();
        if self.txns.is_multiple_of(32) {
            self.check_replica();
        }
    }

    /// The allocator's check with the model's blocks, its stats against the model, and every
    /// owned block's tags.
    fn check(&self) {
        let alloc = self.alloc;
        alloc
            .check(&self.segment, &mut self.owned_pairs())
            .unwrap_or_else(|err| panic!("after txn {}: {err}", self.txns));
        let stats = alloc.stats(&self.segment);
        let used: usize = self.owned.values().map(|owner| block_len(owner.len)).sum();
        let AllocStats {
            region_bytes,
            carved_bytes,
            free_bytes,
            free_blocks,
            used_bytes,
            largest_free_block,
            allocatable_bytes,
        } = stats;
        assert_eq!(region_bytes, alloc.len());
        assert_eq!(used_bytes, used, "{stats:?}");
        assert_eq!(carved_bytes, used + free_bytes, "{stats:?}");
        assert!(carved_bytes <= alloc.len() - ALLOC_HEADER_BYTES);
        assert_eq!(free_blocks == 0, free_bytes == 0);
        assert!(largest_free_block <= free_bytes);
        assert!(largest_free_block <= allocatable_bytes);
        assert!(allocatable_bytes <= alloc.len() - ALLOC_HEADER_BYTES - used);
        for (&block, owner) in &self.owned {
            let end = block + block_len(owner.len);
            assert_eq!(self.segment.read(block, 8), owner.tag.to_le_bytes());
            assert_eq!(self.segment.read(end - 8, 8), owner.tag.to_le_bytes());
        }
        assert_eq!(self.replica.lsn(), self.segment.lsn());
        assert_eq!(self.replica.page_versions(), self.segment.page_versions());
    }

    /// The replica's bytes are the segment's, and nothing outside the region was written.
    fn check_replica(&self) {
        assert!(
            self.replica.bytes() == self.segment.bytes(),
            "the replica differs after txn {}",
            self.txns
        );
        let (start, end) = (self.alloc.offset(), self.alloc.offset() + self.alloc.len());
        let bytes = self.segment.bytes();
        assert!(
            bytes[..start]
                .iter()
                .chain(&bytes[end..])
                .all(|&byte| byte == 0)
        );
    }

    fn owned_pairs(&self) -> impl Iterator<Item = (usize, usize)> + '_ {
        self.owned.iter().map(|(&block, owner)| (block, owner.len))
    }
}

/// Runs the ops, split into txns at each commit or abort; the last txn commits.
fn run(harness: &mut Harness, ops: &[Op]) {
    let mut steps = Vec::new();
    for &op in ops {
        match op {
            Op::Commit => harness.txn(&std::mem::take(&mut steps), true),
            Op::Abort => harness.txn(&std::mem::take(&mut steps), false),
            step => steps.push(step),
        }
    }
    harness.txn(&steps, true);
    harness.check_replica();
}

/// Mostly small lengths, some up to 1 MiB.
fn any_len() -> impl Strategy<Value = usize> {
    prop_oneof![
        12 => 1..=128usize,
        6 => 129..=4096usize,
        2 => 4097..=(64usize << 10),
        2 => (64usize << 10) + 1..=MIB,
    ]
}

fn any_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        10 => any_len().prop_map(Op::Alloc),
        7 => any::<usize>().prop_map(Op::Free),
        5 => Just(Op::Commit),
        1 => Just(Op::Abort),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 48,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Random txns in a 16 MiB segment, in a region of nearly all of it (which rarely fills)
    /// or of 2 MiB or 256 KiB (which fill, so that splits and out-of-memory happen).
    #[test]
    fn random_txns_keep_the_allocator_consistent_and_replicated(
        region_len in prop::sample::select(vec![16 * MIB - 8192, 2 * MIB, 256 << 10]),
        ops in prop::collection::vec(any_op(), 1..400),
    ) {
        let mut harness = Harness::new(16 * MIB, region_len);
        run(&mut harness, &ops);
    }
}

/// A draw from the test's length mix.
fn draw_len(rng: &mut Rng) -> usize {
    let (low, high) = match rng.below(100) {
        0..70 => (1, 128),
        70..90 => (129, 4096),
        90..98 => (4097, 64 << 10),
        _ => ((64 << 10) + 1, MIB),
    };
    rng.between(low, high as i64) as usize
}

/// Ops for a long run that fills the region and then churns at the full mark: allocation is
/// likelier below three quarters used, freeing above.
fn churn(harness: &mut Harness, rng: &mut Rng, txns: usize) {
    for _ in 0..txns {
        let stats = harness.alloc.stats(&harness.segment);
        let filling = stats.used_bytes < harness.alloc.len() / 4 * 3;
        let steps = 1 + rng.below(4) as usize;
        let ops: Vec<Op> = (0..steps)
            .map(|_| {
                if rng.percent(if filling { 70 } else { 35 }) {
                    Op::Alloc(draw_len(rng))
                } else {
                    Op::Free(rng.next_u64() as usize)
                }
            })
            .collect();
        harness.txn(&ops, !rng.percent(5));
    }
}

/// A long seeded run in a 64 MiB segment: the region fills, churns, and every path of the
/// allocator (free lists, carving, splits, out of memory, giving back the end) is taken.
#[test]
fn a_long_seeded_run_fills_and_churns_a_64_mib_region() {
    let mut harness = Harness::new(64 * MIB, 64 * MIB - 8192);
    let mut rng = Rng::new(0x5EED_A110C);
    churn(&mut harness, &mut rng, 6000);
    harness.check_replica();
    let stats = harness.alloc.stats(&harness.segment);
    assert!(
        stats.carved_bytes > harness.alloc.len() / 2,
        "the run used the region: {stats:?}"
    );
    assert!(stats.free_blocks > 0, "the run left free blocks: {stats:?}");
}

/// The check that passes after every txn of a run is not vacuous: forgetting an owned block,
/// owning one twice, or freeing one twice makes it fail.
#[test]
fn the_check_fails_on_a_leak_a_double_owner_and_a_double_free() {
    let mut harness = Harness::new(16 * MIB, 2 * MIB);
    let mut rng = Rng::new(7);
    churn(&mut harness, &mut rng, 300);
    harness.check_replica();
    let alloc = harness.alloc;
    let owned: Vec<(usize, usize)> = harness.owned_pairs().collect();
    assert!(owned.len() > 10, "the run owns blocks to plant bugs with");

    let leak = alloc
        .check(&harness.segment, &mut owned[1..].iter().copied())
        .unwrap_err();
    assert_eq!(leak.check, CHECK_ALLOC_ACCOUNTED);
    let twice = alloc
        .check(
            &harness.segment,
            &mut owned.iter().copied().chain(Some(owned[5])),
        )
        .unwrap_err();
    assert_eq!(twice.check, CHECK_ALLOC_ACCOUNTED);

    // Free a block that is not the last carved one twice (the last would go back to the end,
    // and the second free would then panic as a free of a block never carved).
    let carved_end =
        alloc.offset() + ALLOC_HEADER_BYTES + alloc.stats(&harness.segment).carved_bytes;
    let &(block, len) = owned
        .iter()
        .find(|&&(block, len)| block + block_len(len) < carved_end)
        .unwrap();
    let mut txn = harness.segment.begin();
    alloc.free(&mut txn, block, len);
    alloc.free(&mut txn, block, len);
    txn.commit();
    let rest = owned.iter().copied().filter(|&(owned, _)| owned != block);
    let double_free = alloc
        .check(&harness.segment, &mut rest.collect::<Vec<_>>().into_iter())
        .unwrap_err();
    assert_eq!(double_free.check, CHECK_ALLOC);
}
