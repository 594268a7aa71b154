//! Property tests of the passive backup (seed 000, section 5): mirror memory fed with every
//! commit's trace always holds the primary's committed image, a primary crash after any write
//! of a trace recovers to the image before or after that commit (never a mix), and mirror
//! memory refuses bad writes and corrupt contents with errors, never panics.

use crate::common;

use common::{End, SEGMENT_LEN, Step, TxnPlan, txn_plan, write_into};
use proptest::prelude::*;
use tandem_memory::{
    ClassBytes, MirrorLayout, PAGE_SIZE, PassiveError, PassiveMirror, PassiveTrace, Segment,
    Strategy as Logging, WriteClass,
};

/// Room for the largest txn a plan makes: 8 ranges of at most 300 bytes, 16 bytes of header each.
const LOG_CAPACITY: usize = 8 * (16 + 300);

const TRACED: [Logging; 3] = [
    Logging::V1MirrorCopy,
    Logging::V2MirrorDiff,
    Logging::V3InlineLog,
];

/// Applies the trace to a copy of `before` one write at a time and, after each prefix
/// (including the empty one), checks what a takeover would recover: `old` until the commit
/// point, `new` from it on. The commit point is the write that makes the mirror's
/// `committed_lsn` reach the trace's LSN; the checker finds it itself rather than trusting the
/// trace's order. Returns the first prefix length that fails, and why.
fn first_inconsistent_prefix(
    before: &PassiveMirror,
    trace: &PassiveTrace,
    old: &[u8],
    new: &[u8],
) -> Option<(usize, String)> {
    let mut mirror = before.clone();
    let mut committed = false;
    let mut writes = trace.iter();
    for prefix in 0..=trace.len() {
        if prefix > 0 {
            let (write, bytes) = writes.next().expect("one write per prefix");
            mirror
                .write(write.addr, bytes)
                .expect("the trace fits the mirror");
        }
        committed |= mirror.committed_lsn() == trace.lsn();
        let (expected, name) = if committed {
            (new, "new")
        } else {
            (old, "old")
        };
        match mirror.recover() {
            Ok(image) if image == expected => {}
            Ok(image) => {
                let first_wrong = image.iter().zip(expected).position(|(a, b)| a != b);
                return Some((
                    prefix,
                    format!(
                        "recovered image differs from the {name} image at byte {first_wrong:?}"
                    ),
                ));
            }
            Err(err) => return Some((prefix, err.to_string())),
        }
    }
    if !committed {
        return Some((
            trace.len(),
            "the trace never reaches its commit point".into(),
        ));
    }
    None
}

/// Runs the plans on a traced segment and feeds each commit's trace to a mirror primed before
/// the first txn, checking every crash point of every commit on the way.
fn run_plans(strategy: Logging, plans: &[TxnPlan]) -> Result<(), TestCaseError> {
    let mut segment = Segment::anonymous(SEGMENT_LEN, strategy).unwrap();
    let layout = segment.enable_passive_trace(LOG_CAPACITY).unwrap();
    let mut mirror = PassiveMirror::from_image(layout, &segment.passive_image()).unwrap();

    for plan in plans {
        let before = segment.bytes().to_vec();
        let mut declared: Vec<(usize, usize)> = Vec::new();
        let mut txn = segment.begin();
        for step in &plan.steps {
            match step {
                Step::SetRange {
                    offset,
                    len,
                    write_at,
                    fill,
                } => {
                    write_into(txn.set_range(*offset, *len), *write_at, fill);
                    declared.push((*offset, *len));
                }
                Step::Rewrite {
                    which,
                    write_at,
                    fill,
                } => {
                    if let Some(&(offset, len)) = declared.get(which % declared.len().max(1)) {
                        write_into(txn.range_mut(offset, len), *write_at, fill);
                    }
                }
            }
        }
        match plan.end {
            End::Commit => {
                txn.commit();
                let trace = segment.passive_trace();
                prop_assert_eq!(trace.lsn(), segment.lsn());
                prop_assert_eq!(
                    first_inconsistent_prefix(&mirror, trace, &before, segment.bytes()),
                    None,
                    "{} crash point of LSN {}",
                    strategy,
                    trace.lsn()
                );
                mirror.apply(trace).unwrap();
            }
            End::Abort => txn.abort(),
            End::Drop => drop(txn),
        }
        prop_assert!(mirror.data() == segment.bytes(), "{strategy} data region");
        prop_assert_eq!(mirror.committed_lsn(), segment.lsn());
        prop_assert!(
            mirror.recover().unwrap() == segment.bytes(),
            "{strategy} recovery"
        );
    }
    Ok(())
}

/// A small mirror, so random writes often hit its meta block and log.
fn small_layout() -> impl Strategy<Value = MirrorLayout> {
    prop::sample::select(TRACED.to_vec())
        .prop_map(|strategy| MirrorLayout::new(strategy, 64, 96).unwrap())
}

/// A write aimed anywhere: small addresses with random bytes, small integers where the meta
/// block and the log headers sit, or any address at all.
fn any_write() -> impl Strategy<Value = (u64, Vec<u8>)> {
    prop_oneof![
        (0u64..300, prop::collection::vec(any::<u8>(), 0..24)),
        (0u64..300, 0u64..200).prop_map(|(addr, value)| (addr, value.to_le_bytes().to_vec())),
        (any::<u64>(), prop::collection::vec(any::<u8>(), 0..4)),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn a_mirror_fed_every_trace_recovers_the_committed_image_at_every_crash_point(
        strategy in prop::sample::select(TRACED.to_vec()),
        plans in prop::collection::vec(txn_plan(), 1..24),
    ) {
        run_plans(strategy, &plans)?;
    }

    #[test]
    fn arbitrary_writes_are_refused_or_stored_and_recovery_never_panics(
        layout in small_layout(),
        writes in prop::collection::vec(any_write(), 0..32),
    ) {
        let mut mirror = PassiveMirror::new(layout);
        let total = layout.total_len() as u64;
        let mut trace = PassiveTrace::default();
        for (addr, bytes) in &writes {
            let before = mirror.bytes().to_vec();
            let fits = addr.checked_add(bytes.len() as u64).is_some_and(|end| end <= total);
            match mirror.write(*addr, bytes) {
                Ok(()) => {
                    prop_assert!(fits);
                    let at = *addr as usize;
                    prop_assert_eq!(&mirror.bytes()[at..at + bytes.len()], &bytes[..]);
                }
                Err(err) => {
                    prop_assert!(!fits);
                    let out_of_bounds = matches!(err, PassiveError::OutOfBounds { .. });
                    prop_assert!(out_of_bounds, "{err}");
                    prop_assert!(mirror.bytes() == &before[..], "a refused write changes nothing");
                }
            }
            trace.push(WriteClass::Data, *addr, bytes);
        }
        match mirror.recover() {
            Ok(image) => prop_assert_eq!(image.len(), 64),
            Err(err) => {
                let corrupt = matches!(err, PassiveError::CorruptLog { .. });
                prop_assert!(corrupt, "{err}");
            }
        }
        // The same writes as one trace: applied whole or not at all.
        let mut whole = PassiveMirror::new(layout);
        match whole.apply(&trace) {
            Ok(()) => prop_assert!(whole.bytes() == mirror.bytes()),
            Err(_) => prop_assert!(whole.bytes().iter().all(|&b| b == 0)),
        }
    }
}

/// A Debit-Credit-shaped txn: three 4-byte balances at scattered offsets and one 16-byte
/// history record, every field changed.
fn debit_credit(segment: &mut Segment, round: u32) {
    let mut txn = segment.begin();
    for (index, offset) in [1_004, 20_008, 40_012].into_iter().enumerate() {
        *txn.set_pod::<u32>(offset) += 100 + round + index as u32;
    }
    let history: &mut [u32; 4] = txn.set_pod(60_000 + 16 * round as usize);
    *history = [1 + round, 2, 3, 4];
    txn.commit();
}

#[test]
fn debit_credit_ships_the_byte_counts_of_each_version() {
    for (strategy, per_txn) in [
        (
            Logging::V1MirrorCopy,
            ClassBytes {
                data: 28,
                undo: 28, // the declared spans: 3 * 4 + 16
                meta: 16, // commit flag and mirrored LSN
            },
        ),
        (
            Logging::V2MirrorDiff,
            ClassBytes {
                data: 28,
                undo: 28, // the changed runs, the same bytes as the data
                meta: 16,
            },
        ),
        (
            Logging::V3InlineLog,
            ClassBytes {
                data: 28,
                undo: 28,                  // the declared lengths
                meta: 4 * 16 + 4 * 8 + 16, // entry headers, log ends, the commit write
            },
        ),
    ] {
        let mut segment = Segment::anonymous(16 * PAGE_SIZE, strategy).unwrap();
        segment.enable_passive_trace(4096).unwrap();
        let mut total = ClassBytes::default();
        for round in 0..3 {
            debit_credit(&mut segment, round);
            let counts = segment.passive_trace().class_bytes();
            assert_eq!(counts, per_txn, "{strategy} round {round}");
            total += counts;
        }
        assert_eq!(total.total(), 3 * per_txn.total(), "{strategy}");
    }
}

/// A traced txn on a fresh segment, with the mirror and image from before it.
fn one_commit(strategy: Logging) -> (PassiveMirror, PassiveTrace, Vec<u8>, Vec<u8>) {
    let mut segment = Segment::anonymous(SEGMENT_LEN, strategy).unwrap();
    let layout = segment.enable_passive_trace(LOG_CAPACITY).unwrap();
    debit_credit_small(&mut segment, 1);
    let mirror = PassiveMirror::from_image(layout, &segment.passive_image()).unwrap();
    let old = segment.bytes().to_vec();
    debit_credit_small(&mut segment, 2);
    let trace = segment.passive_trace().clone();
    (mirror, trace, old, segment.bytes().to_vec())
}

fn debit_credit_small(segment: &mut Segment, round: u32) {
    let mut txn = segment.begin();
    *txn.set_pod::<u32>(100) += round;
    *txn.set_pod::<u32>(PAGE_SIZE + 8) += round;
    txn.set_range(200, 16).fill(round as u8);
    txn.commit();
}

/// The same writes as `trace` in the order `order` gives (indices into the trace).
fn reordered(trace: &PassiveTrace, order: &[usize]) -> PassiveTrace {
    let writes: Vec<_> = trace.iter().collect();
    assert_eq!(order.len(), writes.len(), "a permutation of every write");
    let mut out = PassiveTrace::default();
    out.clear(trace.lsn());
    for &index in order {
        let (write, bytes) = writes[index];
        out.push(write.class, write.addr, bytes);
    }
    out
}

#[test]
fn the_real_traces_pass_the_crash_check() {
    for strategy in TRACED {
        let (mirror, trace, old, new) = one_commit(strategy);
        assert_ne!(old, new);
        assert_eq!(
            first_inconsistent_prefix(&mirror, &trace, &old, &new),
            None,
            "{strategy}"
        );
    }
}

/// The crash check has teeth: a V3 primary that truncates its log (commits) before its data
/// writes arrive leaves a backup that recovers neither image.
#[test]
fn the_crash_check_catches_a_v3_commit_before_the_data() {
    let (mirror, trace, old, new) = one_commit(Logging::V3InlineLog);
    let classes: Vec<WriteClass> = trace.iter().map(|(write, _)| write.class).collect();
    let first_data = classes
        .iter()
        .position(|&class| class == WriteClass::Data)
        .unwrap();
    let commit = trace.len() - 1;
    let mut order: Vec<usize> = (0..first_data).collect();
    order.push(commit);
    order.extend(first_data..commit);
    let bad = reordered(&trace, &order);
    let (prefix, why) = first_inconsistent_prefix(&mirror, &bad, &old, &new).unwrap();
    assert_eq!(prefix, first_data + 1, "right after the early commit write");
    assert_eq!(
        why,
        "recovered image differs from the new image at byte Some(100)"
    );
}

/// The crash check has teeth: a V1 primary that updates the mirror before setting its commit
/// flag leaves a backup whose mirror is half new while it still counts as the committed image.
#[test]
fn the_crash_check_catches_a_v1_commit_flag_after_the_mirror_writes() {
    let (mirror, trace, old, new) = one_commit(Logging::V1MirrorCopy);
    let classes: Vec<WriteClass> = trace.iter().map(|(write, _)| write.class).collect();
    let flag = classes
        .iter()
        .position(|&class| class == WriteClass::Meta)
        .unwrap();
    let mirrored = trace.len() - 1;
    let mut order: Vec<usize> = (0..flag).collect();
    order.extend(flag + 1..mirrored);
    order.push(flag);
    order.push(mirrored);
    let bad = reordered(&trace, &order);
    let (prefix, why) = first_inconsistent_prefix(&mirror, &bad, &old, &new).unwrap();
    assert_eq!(prefix, flag + 1, "right after the first early mirror write");
    assert_eq!(
        why,
        "recovered image differs from the old image at byte Some(100)"
    );
}
