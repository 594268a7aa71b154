//! The primary lost at every step of one checkpoint: before `Begin`, after it, after each
//! `Page`, after `End` but before the primary sees the `Ack`, and after. Whenever it is lost,
//! the backup, rolled back, holds checkpoint N-1 or N exactly, never anything between; and
//! output of the interval before N has left only if the backup holds N.

use tandem_mirror::{Frame, HeldOutput, PlantedMirrorBug, TrackerKind};

use crate::common;
use crate::mirrored::{Primary, deliver, expect_at, new_mirror, pages_differing, with_page_twice};

const PAGES: usize = 8;
/// Written in checkpoint 2; the second is shipped twice (`with_page_twice`).
const PAGES_WRITTEN: [usize; 3] = [1, 3, 6];

/// Where the primary is lost: after `frames` of checkpoint 2's frames reached the backup, and
/// whether the primary saw the backup's ack.
#[derive(Debug, Clone, Copy)]
struct Loss {
    frames: usize,
    ack_seen: bool,
}

/// Says where a loss is, for failure messages.
fn describe(loss: Loss, frames: &[Frame<'_>]) -> String {
    match (loss.frames, loss.ack_seen) {
        (0, _) => "before Begin".to_string(),
        (_, true) => "after the primary saw the Ack".to_string(),
        (k, false) if k == frames.len() => "after End, before the primary saw the Ack".to_string(),
        (k, false) => format!("after frame {k}, {:?}", frames[k - 1]),
    }
}

/// Runs checkpoint 1 (every page, distinct bytes) and checkpoint 2 (`PAGES_WRITTEN`, one of
/// them shipped twice) on a primary with a tracker of `kind`; loses the primary at every step
/// of checkpoint 2, each time on a fresh backup with `bug` planted, brought to checkpoint 1
/// first. Says the first step that leaves the backup wrong.
pub fn check_every_step(kind: TrackerKind, bug: Option<PlantedMirrorBug>) -> Result<(), String> {
    let mut primary = Primary::new(kind, PAGES);
    let page_size = primary.page_size();
    for page in 0..PAGES {
        primary.store(page * page_size, 10 + page as u8);
    }
    let first = primary.take()?;
    let mut output = HeldOutput::new(4);
    output
        .hold(&primary.checkpointer, "reply of interval 2")
        .expect("room for one");
    for page in PAGES_WRITTEN {
        primary.store(page * page_size + 1, 20 + page as u8);
    }
    let second = primary.take()?;
    let frames = with_page_twice(&second.frames(), 1, 0xFF, PAGES).expect("room for a page twice");
    let steps = (0..=frames.len()).map(|frames| Loss {
        frames,
        ack_seen: false,
    });
    let last = Loss {
        frames: frames.len(),
        ack_seen: true,
    };
    for loss in steps.chain([last]) {
        let when = format!("{kind}: primary lost {}", describe(loss, &frames));
        let mut mirror = new_mirror(PAGES, bug);
        deliver(&mut mirror, &first.frames())?;
        let mut acks = Vec::new();
        for frame in &frames[..loss.frames] {
            let ack = mirror
                .step(frame)
                .map_err(|error| format!("{when}: {frame:?} refused: {error}"))?;
            acks.extend(ack);
        }
        if loss.ack_seen {
            let [ack] = acks[..] else {
                return Err(format!("{when}: acks {acks:?}"));
            };
            primary.checkpointer.acked(ack.checkpoint).expect("the ack");
        }
        let released: Vec<&str> = output.release(&primary.checkpointer).collect();
        mirror.rollback();
        let complete = loss.frames == frames.len();
        let from_first = pages_differing(mirror.memory(), &primary.saved[1], page_size);
        let from_second = pages_differing(mirror.memory(), &primary.saved[2], page_size);
        if !from_first.is_empty() && !from_second.is_empty() {
            return Err(format!(
                "{when}: the backup is between checkpoints 1 and 2 (pages {from_first:?} differ \
                 from 1, pages {from_second:?} from 2)"
            ));
        }
        expect_at(&mirror, &primary.saved, if complete { 2 } else { 1 }, &when)?;
        if !released.is_empty() && mirror.last_complete() < 2 {
            return Err(format!(
                "{when}: output {released:?} left, the backup lost its state"
            ));
        }
        if loss.ack_seen && released.is_empty() {
            return Err(format!("{when}: the acked checkpoint's output still held"));
        }
    }
    Ok(())
}

#[test]
fn a_primary_lost_at_any_step_leaves_the_backup_at_a_checkpoint() {
    common::require_every_kind();
    for kind in [TrackerKind::Uffd, TrackerKind::Mprotect] {
        if let Err(failure) = check_every_step(kind, None) {
            panic!("{failure}");
        }
    }
}
