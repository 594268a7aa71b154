//! Property tests: random txns leave every strategy's segment equal to a plain byte model, and
//! each commit's redo record rebuilds the same bytes and page versions on a second segment.

use crate::common;

use common::{End, SEGMENT_LEN, Step, TxnPlan, txn_plan, write_into};
use proptest::prelude::*;
use tandem_memory::{PAGE_SIZE, RedoRecord, Segment, Strategy as Logging, WORD_SIZE};

fn any_strategy() -> impl Strategy<Value = Logging> {
    prop::sample::select(Logging::ALL.to_vec())
}

/// Checks that every run is word-aligned at its inner edges and that each of its words holds a
/// byte that really changed: the record carries nothing it need not.
fn assert_runs_minimal(redo: &RedoRecord, before: &[u8], after: &[u8]) {
    let mut covered = vec![false; before.len()];
    for (run, bytes) in redo.iter() {
        let start = run.offset as usize;
        let end = run.end() as usize;
        assert_eq!(bytes, &after[start..end], "run data is the committed bytes");
        let mut word_start = start;
        while word_start < end {
            let word_end = (word_start / WORD_SIZE + 1) * WORD_SIZE;
            let word_end = word_end.min(end);
            assert_ne!(
                before[word_start..word_end],
                after[word_start..word_end],
                "run word [{word_start}, {word_end}) of LSN {} did not change",
                redo.lsn()
            );
            word_start = word_end;
        }
        covered[start..end].iter_mut().for_each(|c| *c = true);
    }
    for (index, (b, a)) in before.iter().zip(after).enumerate() {
        assert!(
            b == a || covered[index],
            "changed byte {index} is missing from the redo record"
        );
    }
}

fn run_plans(strategy: Logging, replica_strategy: Logging, plans: &[TxnPlan]) {
    run_plans_shipping(strategy, replica_strategy, plans, |redo| redo);
}

/// Runs the plans; `ship` is what reaches the replica of each commit's redo record (the
/// identity, except in the test that shows the check catches a lossy replica).
fn run_plans_shipping(
    strategy: Logging,
    replica_strategy: Logging,
    plans: &[TxnPlan],
    ship: fn(RedoRecord) -> RedoRecord,
) {
    let mut segment = Segment::anonymous(SEGMENT_LEN, strategy).unwrap();
    let mut replica = Segment::anonymous(SEGMENT_LEN, replica_strategy).unwrap();
    let mut model = vec![0u8; SEGMENT_LEN];
    let mut page_versions = [0u64; SEGMENT_LEN / PAGE_SIZE];

    for plan in plans {
        let before = model.clone();
        let mut pending = model.clone();
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
                    let bytes = txn.set_range(*offset, *len);
                    assert_eq!(
                        bytes,
                        &pending[*offset..*offset + *len],
                        "set_range hands out current bytes"
                    );
                    let (start, n) = write_into(bytes, *write_at, fill);
                    pending[offset + start..offset + start + n].copy_from_slice(&fill[..n]);
                    declared.push((*offset, *len));
                }
                Step::Rewrite {
                    which,
                    write_at,
                    fill,
                } => {
                    if declared.is_empty() {
                        continue;
                    }
                    let (offset, len) = declared[which % declared.len()];
                    let (start, n) = write_into(txn.range_mut(offset, len), *write_at, fill);
                    pending[offset + start..offset + start + n].copy_from_slice(&fill[..n]);
                }
            }
            assert_eq!(
                txn.read(0, SEGMENT_LEN),
                &pending[..],
                "a txn reads its own writes"
            );
        }
        match plan.end {
            End::Commit => {
                let lsn = txn.lsn_next();
                let redo = txn.commit().clone();
                assert_eq!(redo.lsn(), lsn);
                model = pending;
                assert_runs_minimal(&redo, &before, &model);
                for (page, version) in page_versions.iter_mut().enumerate() {
                    let span = page * PAGE_SIZE..(page + 1) * PAGE_SIZE;
                    if before[span.clone()] != model[span] {
                        *version = lsn;
                    }
                }
                replica.apply_redo(&ship(redo)).unwrap();
            }
            End::Abort => txn.abort(),
            End::Drop => drop(txn),
        }
        assert_eq!(
            segment.bytes(),
            &model[..],
            "segment equals the model after {:?}",
            plan.end
        );
        assert_eq!(
            replica.bytes(),
            segment.bytes(),
            "replica is byte-identical"
        );
        assert_eq!(segment.page_versions(), &page_versions[..]);
        assert_eq!(replica.page_versions(), segment.page_versions());
        assert_eq!(replica.lsn(), segment.lsn());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn every_strategy_matches_the_model_and_its_redo_rebuilds_a_replica(
        strategy in any_strategy(),
        replica_strategy in any_strategy(),
        plans in prop::collection::vec(txn_plan(), 1..24),
    ) {
        run_plans(strategy, replica_strategy, &plans);
    }
}

/// A range declared again with the same offset and length after the txn wrote it (a header
/// word a txn updates twice): the redo must compare with the bytes before the txn, not with
/// the second image, which already holds the first write.
#[test]
fn a_range_declared_twice_is_diffed_against_its_first_image() {
    let plans = vec![TxnPlan {
        steps: vec![
            Step::SetRange {
                offset: 512,
                len: 16,
                write_at: 0,
                fill: vec![7; 16],
            },
            Step::SetRange {
                offset: 512,
                len: 16,
                write_at: 8,
                fill: vec![9; 8],
            },
            Step::SetRange {
                offset: 1024,
                len: 8,
                write_at: 0,
                fill: vec![3; 8],
            },
        ],
        end: End::Commit,
    }];
    for strategy in Logging::ALL {
        for replica_strategy in Logging::ALL {
            run_plans(strategy, replica_strategy, &plans);
        }
    }
}

/// The same plans drive all four strategies, so a bug in one shows as a difference here even
/// where the model check above happened to draw another strategy.
#[test]
fn all_strategies_agree_on_a_fixed_overlapping_history() {
    let plans = vec![
        TxnPlan {
            steps: vec![
                Step::SetRange {
                    offset: 4090,
                    len: 12,
                    write_at: 0,
                    fill: vec![1; 12],
                },
                Step::SetRange {
                    offset: 4094,
                    len: 4,
                    write_at: 0,
                    fill: vec![0; 4],
                },
                Step::SetRange {
                    offset: 4080,
                    len: 40,
                    write_at: 30,
                    fill: vec![1; 3],
                },
            ],
            end: End::Commit,
        },
        TxnPlan {
            steps: vec![
                Step::SetRange {
                    offset: 4092,
                    len: 8,
                    write_at: 0,
                    fill: vec![0; 8],
                },
                Step::SetRange {
                    offset: 4088,
                    len: 16,
                    write_at: 0,
                    fill: vec![1; 16],
                },
            ],
            end: End::Abort,
        },
    ];
    for strategy in Logging::ALL {
        for replica_strategy in Logging::ALL {
            run_plans(strategy, replica_strategy, &plans);
        }
    }
}

/// The replica check has teeth: a replica that loses the last run of every record diverges,
/// and the check says so.
#[test]
#[should_panic(expected = "replica is byte-identical")]
fn the_replica_check_catches_a_lost_run() {
    fn drop_last_run(redo: RedoRecord) -> RedoRecord {
        let mut lossy = RedoRecord::empty(redo.lsn());
        let keep = redo.runs().len().saturating_sub(1);
        for (run, bytes) in redo.iter().take(keep) {
            lossy.push_run(run.offset, bytes).unwrap();
        }
        lossy
    }
    let plans = vec![TxnPlan {
        steps: vec![Step::SetRange {
            offset: 64,
            len: 8,
            write_at: 0,
            fill: vec![1; 8],
        }],
        end: End::Commit,
    }];
    run_plans_shipping(
        Logging::V3InlineLog,
        Logging::V3InlineLog,
        &plans,
        drop_last_run,
    );
}
