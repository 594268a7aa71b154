//! Random txn plans shared by the memory crate's property tests.

use proptest::prelude::*;
use tandem_memory::PAGE_SIZE;

pub const SEGMENT_LEN: usize = 2 * PAGE_SIZE;

#[derive(Clone, Debug)]
pub enum Step {
    /// Declare a range and write `fill` into part of it.
    SetRange {
        offset: usize,
        len: usize,
        write_at: usize,
        fill: Vec<u8>,
    },
    /// Write again into the range declared by an earlier step of this txn.
    Rewrite {
        which: usize,
        write_at: usize,
        fill: Vec<u8>,
    },
}

#[derive(Clone, Copy, Debug)]
pub enum End {
    Commit,
    Abort,
    Drop,
}

#[derive(Clone, Debug)]
pub struct TxnPlan {
    pub steps: Vec<Step>,
    pub end: End,
}

fn range() -> impl Strategy<Value = (usize, usize)> {
    prop_oneof![
        // A hot zone that straddles the page boundary, so ranges often overlap.
        (PAGE_SIZE - 64..PAGE_SIZE + 64, 0usize..48),
        (0..SEGMENT_LEN, 0usize..300),
    ]
    .prop_map(|(offset, len)| (offset, len.min(SEGMENT_LEN - offset)))
}

fn fill() -> impl Strategy<Value = Vec<u8>> {
    // A two-letter alphabet makes many writes rewrite the value already there.
    prop::collection::vec(0u8..2, 0..64)
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        3 => (range(), any::<usize>(), fill()).prop_map(|((offset, len), write_at, fill)| {
            Step::SetRange { offset, len, write_at, fill }
        }),
        1 => (any::<usize>(), any::<usize>(), fill())
            .prop_map(|(which, write_at, fill)| Step::Rewrite { which, write_at, fill }),
    ]
}

pub fn txn_plan() -> impl Strategy<Value = TxnPlan> {
    let end = prop_oneof![6 => Just(End::Commit), 2 => Just(End::Abort), 1 => Just(End::Drop)];
    (prop::collection::vec(step(), 0..8), end).prop_map(|(steps, end)| TxnPlan { steps, end })
}

/// Writes `fill` into `bytes` starting at a position derived from `write_at`, clipped to fit;
/// returns where it wrote (start, length).
pub fn write_into(bytes: &mut [u8], write_at: usize, fill: &[u8]) -> (usize, usize) {
    if bytes.is_empty() {
        return (0, 0);
    }
    let start = write_at % bytes.len();
    let len = fill.len().min(bytes.len() - start);
    bytes[start..start + len].copy_from_slice(&fill[..len]);
    (start, len)
}
