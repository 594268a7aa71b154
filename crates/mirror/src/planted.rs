//! Test hooks: known bugs a tracker can be built with, and a callback run in the middle of a
//! harvest, so the tests can show their checkers catch a lost write. Hidden from the docs;
//! a tracker made with `new` has neither.

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
