//! Known bugs that can be planted in this crate's real code, one at a time, so that the
//! simulator's checkers can show they catch them. Compiled only with the `inject-bugs` feature;
//! a normal build has no switch at all.
//!
//! The switch is per thread: a simulation runs in one thread, and tests running side by side
//! do not plant bugs in each other.

use std::cell::Cell;

/// A bug to plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The primary releases a 2-safe reply at commit, before any backup acknowledged it.
    EarlyReply,
}

impl Bug {
    pub const ALL: [Bug; 1] = [Bug::EarlyReply];

    pub fn name(self) -> &'static str {
        match self {
            Bug::EarlyReply => "early-reply",
        }
    }
}

thread_local! {
    static PLANTED: Cell<Option<Bug>> = const { Cell::new(None) };
}

/// Plants `bug` (or none) for the calling thread.
pub fn plant(bug: Option<Bug>) {
    PLANTED.with(|planted| planted.set(bug));
}

/// Whether `bug` is planted on the calling thread.
pub(crate) fn planted(bug: Bug) -> bool {
    PLANTED.with(|planted| planted.get() == Some(bug))
}
