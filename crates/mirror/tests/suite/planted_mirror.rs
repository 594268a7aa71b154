//! The mirroring checkers have teeth: each bug planted in the backup or the held output is
//! caught by the checker of `crash.rs`, `mirroring.rs` or `output.rs`, which the real code
//! passes (their own tests).

use tandem_mirror::{PlantedMirrorBug, PlantedOutputBug, TrackerKind};

use crate::crash::check_every_step;
use crate::mirroring::run_mirroring;
use crate::output::{TAKEN_NOT_ACKED, check_output};

/// Requires `failure` to hold each of `parts`, printing it whole otherwise.
fn expect_parts(failure: &str, parts: &[&str]) {
    for part in parts {
        assert!(failure.contains(part), "missing {part:?} in:\n{failure}");
    }
}

#[test]
fn undo_copies_dropped_before_end_are_caught() {
    let bug = PlantedMirrorBug::UndoDroppedEarly;
    let failure = check_every_step(TrackerKind::Uffd, Some(bug)).expect_err("caught");
    expect_parts(
        &failure,
        &[
            "uffd: primary lost after frame 3",
            "the backup is between checkpoints 1 and 2 (pages [1] differ from 1",
        ],
    );
    let failure = run_mirroring(&[TrackerKind::Uffd], Some(bug), 64, true).expect_err("caught");
    expect_parts(
        &failure,
        &["rolled back: the mirror's memory is not checkpoint"],
    );
}

#[test]
fn an_undo_copy_taken_at_every_write_is_caught() {
    let bug = PlantedMirrorBug::UndoOnEveryWrite;
    let failure = check_every_step(TrackerKind::Mprotect, Some(bug)).expect_err("caught");
    expect_parts(
        &failure,
        &[
            "mprotect: primary lost after frame 4",
            "the backup is between checkpoints 1 and 2 (pages [3] differ from 1",
        ],
    );
    let failure = run_mirroring(&[TrackerKind::Uffd], Some(bug), 64, true).expect_err("caught");
    expect_parts(
        &failure,
        &["rolled back: the mirror's memory is not checkpoint"],
    );
}

#[test]
fn output_released_when_its_checkpoint_is_taken_is_caught() {
    let bug = PlantedOutputBug::ReleasedWhenTaken;
    let failure = check_output(&TAKEN_NOT_ACKED, Some(bug)).expect_err("caught");
    assert_eq!(
        failure,
        "item 0, produced before checkpoint 1 was taken, released with checkpoint 0 acked (and \
         1 taken)"
    );
}
