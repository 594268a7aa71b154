//! Property test of the copy-on-write snapshot: whatever writes land while it is taken (txns
//! on the executing segment, records applied on a replica, aborts), the pages it hands out,
//! installed on the state at its floor, give exactly the state at its LSN, bytes and page
//! versions.

use proptest::prelude::*;
use tandem_memory::{PAGE_SIZE, RedoRecord, SNAPSHOT_ENTRY_LEN, Segment, Strategy as Logging};

const PAGES: usize = 16;
const SEGMENT_LEN: usize = PAGES * PAGE_SIZE;

/// One txn: writes of a byte value over (offset, len), committed or aborted.
#[derive(Clone, Debug)]
struct Txn {
    writes: Vec<(usize, usize, u8)>,
    commit: bool,
}

#[derive(Clone, Debug)]
enum Op {
    Txn(Txn),
    /// Hand out up to this many pages of the snapshot.
    Step(usize),
}

fn txn() -> impl Strategy<Value = Txn> {
    let write = (0..SEGMENT_LEN, 1usize..3 * PAGE_SIZE, any::<u8>())
        .prop_map(|(offset, len, value)| (offset, len.min(SEGMENT_LEN - offset), value));
    (
        prop::collection::vec(write, 1..4),
        prop::bool::weighted(0.85),
    )
        .prop_map(|(writes, commit)| Txn { writes, commit })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![3 => txn().prop_map(Op::Txn), 2 => (1usize..5).prop_map(Op::Step)]
}

/// Runs `txn` on `segment`; its redo record if it committed.
fn run(segment: &mut Segment, txn: &Txn) -> Option<RedoRecord> {
    let mut t = segment.begin();
    for &(offset, len, value) in &txn.writes {
        t.set_range(offset, len).fill(value);
    }
    if txn.commit {
        Some(t.commit().clone())
    } else {
        t.abort();
        None
    }
}

/// The pages `entries` carry, for `install_pages`.
fn pages(entries: &[u8]) -> Vec<(usize, u64, &[u8])> {
    assert_eq!(entries.len() % SNAPSHOT_ENTRY_LEN, 0);
    entries
        .chunks_exact(SNAPSHOT_ENTRY_LEN)
        .map(|entry| {
            let page = u32::from_le_bytes(entry[..4].try_into().unwrap()) as usize;
            let version = u64::from_le_bytes(entry[4..12].try_into().unwrap());
            (page, version, &entry[12..])
        })
        .collect()
}

fn check(before_floor: &[Txn], before_snapshot: &[Txn], during: &[Op], strategy: Logging) {
    let mut primary = Segment::anonymous(SEGMENT_LEN, strategy).unwrap();
    let mut replica = Segment::anonymous(SEGMENT_LEN, Logging::V0LinkedUndo).unwrap();
    // The state at the floor, and then at the snapshot's LSN, rebuilt from the records.
    let mut at_floor = Segment::anonymous(SEGMENT_LEN, Logging::V0LinkedUndo).unwrap();
    let mut at_snapshot = Segment::anonymous(SEGMENT_LEN, Logging::V0LinkedUndo).unwrap();
    for txn in before_floor {
        if let Some(redo) = run(&mut primary, txn) {
            replica.apply_redo(&redo).unwrap();
            at_floor.apply_redo(&redo).unwrap();
            at_snapshot.apply_redo(&redo).unwrap();
        }
    }
    let floor = primary.lsn();
    for txn in before_snapshot {
        if let Some(redo) = run(&mut primary, txn) {
            replica.apply_redo(&redo).unwrap();
            at_snapshot.apply_redo(&redo).unwrap();
        }
    }
    let total_primary = primary.begin_snapshot(floor);
    let total_replica = replica.begin_snapshot(floor);
    let changed = |segment: &Segment| {
        segment
            .page_versions()
            .iter()
            .filter(|&&v| v > floor)
            .count()
    };
    assert_eq!(total_primary, changed(&at_snapshot));
    assert_eq!(total_replica, total_primary);
    let lsn = primary.lsn();
    let (mut out_primary, mut out_replica) = (Vec::new(), Vec::new());
    let (mut done_primary, mut done_replica) = (total_primary == 0, total_replica == 0);
    if done_primary {
        assert!(primary.snapshot_step(1, &mut out_primary).done);
    }
    if done_replica {
        assert!(replica.snapshot_step(1, &mut out_replica).done);
    }
    for op in during {
        match op {
            Op::Txn(txn) => {
                if let Some(redo) = run(&mut primary, txn) {
                    replica.apply_redo(&redo).unwrap();
                }
            }
            Op::Step(pages_max) => {
                if !done_primary {
                    done_primary = primary.snapshot_step(*pages_max, &mut out_primary).done;
                }
                if !done_replica {
                    done_replica = replica.snapshot_step(*pages_max, &mut out_replica).done;
                }
            }
        }
    }
    while !done_primary {
        done_primary = primary.snapshot_step(3, &mut out_primary).done;
    }
    while !done_replica {
        done_replica = replica.snapshot_step(3, &mut out_replica).done;
    }
    assert_eq!(primary.snapshot_lsn(), None);
    for out in [&out_primary, &out_replica] {
        assert_eq!(
            out.len(),
            total_primary * SNAPSHOT_ENTRY_LEN,
            "each page once"
        );
        // The floor's state first, as a restart loads the initial database.
        let mut restored = Segment::anonymous(SEGMENT_LEN, Logging::V0LinkedUndo).unwrap();
        restored
            .install_pages(floor, &pages(at_floor_pages(&at_floor).as_slice()))
            .unwrap();
        restored.install_pages(lsn, &pages(out)).unwrap();
        assert_eq!(
            restored.bytes(),
            at_snapshot.bytes(),
            "bytes at the snapshot"
        );
        assert_eq!(
            restored.page_versions(),
            at_snapshot.page_versions(),
            "page versions at the snapshot"
        );
    }
}

/// Every page of `segment`, as entries: its whole state, to start a restored segment from.
fn at_floor_pages(segment: &Segment) -> Vec<u8> {
    let mut entries = Vec::new();
    for page in 0..segment.pages() {
        entries.extend_from_slice(&(page as u32).to_le_bytes());
        entries.extend_from_slice(&segment.page_version(page).to_le_bytes());
        entries.extend_from_slice(segment.read(page * PAGE_SIZE, PAGE_SIZE));
    }
    entries
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn a_snapshot_is_the_state_at_its_lsn_whatever_writes_land_meanwhile(
        before_floor in prop::collection::vec(txn(), 0..6),
        before_snapshot in prop::collection::vec(txn(), 0..10),
        during in prop::collection::vec(op(), 0..40),
        strategy in prop::sample::select(Logging::ALL.to_vec()),
    ) {
        check(&before_floor, &before_snapshot, &during, strategy);
    }
}
