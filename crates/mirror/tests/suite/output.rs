//! Output commit: output leaves only once the checkpoint holding its state is acked, in the
//! order it was produced, and all of it leaves once every checkpoint is acked.

use proptest::prelude::*;

use tandem_mirror::{Checkpointer, HeldOutput, PlantedOutputBug};

use crate::common;

/// What the primary does next.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    /// The program produces an item of output (a reply).
    Produce,
    /// A checkpoint is taken.
    Take,
    /// The backup's ack of the next checkpoint taken arrives, if one is unacked.
    Ack,
    /// The driver sends whatever output is released.
    Release,
}

/// Runs `steps`, then takes and acks a last checkpoint, with `bug` planted in the held output;
/// says the first item released too early or out of order, or still held at the end.
pub fn check_output(steps: &[Step], bug: Option<PlantedOutputBug>) -> Result<(), String> {
    let kind = common::granted_kinds()[0];
    let mut checkpointer = Checkpointer::new(common::make(kind, 1).expect("a granted kind"));
    let mut output = HeldOutput::new(steps.len().max(1));
    if let Some(bug) = bug {
        output.plant(bug);
    }
    // For each item, the checkpoint in progress when it was produced.
    let mut produced: Vec<u64> = Vec::new();
    let mut released = 0;
    let finish = [Step::Take, Step::Ack, Step::Release];
    for (at, step) in steps.iter().chain(&finish).enumerate() {
        let is_finish = at >= steps.len();
        match step {
            Step::Produce => {
                output
                    .hold(&checkpointer, produced.len())
                    .map_err(|item| format!("item {item} refused: room for every step"))?;
                produced.push(checkpointer.in_progress());
            }
            Step::Take => {
                checkpointer.checkpoint().expect("a checkpoint");
            }
            Step::Ack if is_finish => {
                let taken = checkpointer.taken_last();
                checkpointer.acked(taken).expect("the last ack");
            }
            Step::Ack if checkpointer.acked_last() < checkpointer.taken_last() => {
                let next = checkpointer.acked_last() + 1;
                checkpointer.acked(next).expect("the next ack");
            }
            Step::Ack => {}
            Step::Release => {
                for item in output.release(&checkpointer) {
                    let acked = checkpointer.acked_last();
                    if item != released {
                        return Err(format!("item {item} released before item {released}"));
                    }
                    if produced[item] > acked {
                        return Err(format!(
                            "item {item}, produced before checkpoint {} was taken, released with \
                             checkpoint {acked} acked (and {} taken)",
                            produced[item],
                            checkpointer.taken_last()
                        ));
                    }
                    released += 1;
                }
            }
        }
    }
    if released != produced.len() {
        return Err(format!(
            "items {released}.. still held after checkpoint {} was acked",
            checkpointer.acked_last()
        ));
    }
    Ok(())
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        Just(Step::Produce),
        Just(Step::Take),
        Just(Step::Ack),
        Just(Step::Release)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn output_leaves_once_its_checkpoint_is_acked(steps in prop::collection::vec(step(), 0..40)) {
        check_output(&steps, None).map_err(TestCaseError::fail)?;
    }
}

/// Output produced, a checkpoint taken, a release before its ack, the ack, a release.
pub const TAKEN_NOT_ACKED: [Step; 5] = [
    Step::Produce,
    Step::Take,
    Step::Release,
    Step::Ack,
    Step::Release,
];

#[test]
fn output_waits_for_the_ack_not_the_checkpoint() {
    check_output(&TAKEN_NOT_ACKED, None).expect("the real held output");
}

#[test]
fn output_past_its_bound_is_handed_back() {
    let kind = common::granted_kinds()[0];
    let checkpointer = Checkpointer::new(common::make(kind, 1).expect("a granted kind"));
    let mut output = HeldOutput::new(2);
    assert_eq!(output.hold(&checkpointer, 'a'), Ok(()));
    assert_eq!(output.hold(&checkpointer, 'b'), Ok(()));
    assert_eq!(output.hold(&checkpointer, 'c'), Err('c'));
    assert_eq!(output.len(), 2);
    assert_eq!(output.waiting_for(), Some(1));
}
