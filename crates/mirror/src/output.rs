//! Output commit: what the program sends the outside world (a reply to a client) waits until
//! the state it reflects is on the backup, so a failover never takes back what a client saw.
//!
//! The rule: output produced after checkpoint N-1 was taken and before N is taken reflects
//! state that only checkpoint N holds, so it is released once the backup has acked N (it then
//! holds N whole). Output is released in the order it was produced. Sans-I/O: the caller
//! sends what [`HeldOutput::release`] yields; nothing here reads a socket or a clock.

use std::collections::VecDeque;

use crate::Checkpointer;
use crate::planted::PlantedOutputBug;

/// Output held back until the checkpoint holding its state is acked.
///
/// Both methods read the numbers from the [`Checkpointer`] itself, rather than take them as
/// arguments, so output cannot be tagged with a stale checkpoint or released on an ack the
/// checkpointer refused.
#[derive(Debug)]
pub struct HeldOutput<T> {
    /// Each item with the checkpoint that holds its state, in the order produced (so the tags
    /// never decrease).
    held: VecDeque<(u64, T)>,
    held_max: usize,
    planted: Option<PlantedOutputBug>,
}

impl<T> HeldOutput<T> {
    /// Holds at most `held_max` items: past that, the program stops producing output (stops
    /// taking requests) until the backup catches up.
    pub fn new(held_max: usize) -> HeldOutput<T> {
        assert!(held_max > 0, "hold at least one item");
        HeldOutput {
            held: VecDeque::new(),
            held_max,
            planted: None,
        }
    }

    /// Plants a known bug (test use only).
    #[doc(hidden)]
    pub fn plant(&mut self, bug: PlantedOutputBug) {
        self.planted = Some(bug);
    }

    /// Holds `item`, produced now, until the checkpoint in progress
    /// ([`Checkpointer::in_progress`]) is acked. Hands it back if `held_max` items are held.
    pub fn hold(&mut self, checkpointer: &Checkpointer, item: T) -> Result<(), T> {
        if self.held.len() == self.held_max {
            return Err(item);
        }
        let checkpoint = checkpointer.in_progress();
        if let Some(&(last, _)) = self.held.back() {
            assert!(
                last <= checkpoint,
                "output of checkpoint {checkpoint} after output of {last}: another checkpointer?"
            );
        }
        self.held.push_back((checkpoint, item));
        Ok(())
    }

    /// Releases, in the order produced, every item whose checkpoint the backup has acked
    /// ([`Checkpointer::acked_last`]): all produced before that checkpoint was taken. Items the
    /// iterator is not driven to stay held.
    pub fn release(&mut self, checkpointer: &Checkpointer) -> impl Iterator<Item = T> + '_ {
        let through = match self.planted {
            Some(PlantedOutputBug::ReleasedWhenTaken) => checkpointer.taken_last(),
            None => checkpointer.acked_last(),
        };
        std::iter::from_fn(move || {
            if self.held.front()?.0 > through {
                return None;
            }
            self.held.pop_front().map(|(_, item)| item)
        })
    }

    /// Items held.
    pub fn len(&self) -> usize {
        self.held.len()
    }

    pub fn is_empty(&self) -> bool {
        self.held.is_empty()
    }

    /// The checkpoint the oldest item waits for, if any.
    pub fn waiting_for(&self) -> Option<u64> {
        self.held.front().map(|&(checkpoint, _)| checkpoint)
    }
}
