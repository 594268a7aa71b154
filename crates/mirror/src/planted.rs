//! Test hooks: known bugs a tracker, a mirror or held output can be built with, and a callback
//! run in the middle of a harvest, so the tests can show their checkers catch each. Hidden from
//! the docs; what `new` makes has none.

use std::fmt;

use crate::Region;

/// A known bug to plant in a tracker (test use only).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedBug {
    /// Harvest reads the dirty state, runs the hook, and only then clears and re-protects, as
    /// separate steps: a store made in between is reported by neither this harvest nor the
    /// next.
    LostWindow,
    /// Harvest reports, but never re-protects: with uffd the pages are reported again at every
    /// later harvest; with mprotect the pages stay writable and later stores go unseen.
    NoRearm,
}

/// A known bug to plant in a [`crate::Mirror`] (test use only).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedMirrorBug {
    /// Each `Page` frame drops the undo copies taken before it, as if the pages before it were
    /// safe: a rollback restores only the last page written and leaves the checkpoint
    /// half-applied.
    UndoDroppedEarly,
    /// A `Page` frame takes an undo copy every time its page is written, not only the first:
    /// a page written twice in a checkpoint rolls back to its intermediate bytes.
    UndoOnEveryWrite,
}

/// A known bug to plant in a [`crate::HeldOutput`] (test use only).
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PlantedOutputBug {
    /// Output is released once its checkpoint is taken, before the backup acks it.
    ReleasedWhenTaken,
}

/// A callback run in the middle of a harvest: after the dirty state was read, before the
/// tracker is armed again. It gets the region, to store into it.
#[doc(hidden)]
pub type HarvestHook = Box<dyn FnMut(&mut Region) + Send>;

/// A tracker's test hooks.
#[derive(Default)]
pub(crate) struct Planted {
    pub(crate) bug: Option<PlantedBug>,
    pub(crate) hook: Option<HarvestHook>,
}

impl Planted {
    pub(crate) fn bug(bug: PlantedBug) -> Planted {
        Planted {
            bug: Some(bug),
            hook: None,
        }
    }

    pub(crate) fn is(&self, bug: PlantedBug) -> bool {
        self.bug == Some(bug)
    }

    /// Runs the hook, if any, on `region`.
    pub(crate) fn run_hook(&mut self, region: &mut Region) {
        if let Some(hook) = self.hook.as_mut() {
            hook(region);
        }
    }
}

impl fmt::Debug for Planted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Planted")
            .field("bug", &self.bug)
            .field("hook", &self.hook.is_some())
            .finish()
    }
}
