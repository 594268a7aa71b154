//! What calls ran inside them (a script's commands), for the node's monitors (Redis's
//! `MONITOR`): the front end that sees a call's own request shows it; what the call ran
//! inside the model only the model sees, so the node's thread pushes it here and the front
//! end takes it.
//!
//! Nothing is pushed while no front end watches ([`InnerCalls::set_watching`]), so a node
//! without monitors pays one relaxed load per inner command. Like publications, entries are
//! not data: bounded in entries ([`INNER_CALLS_QUEUED_MAX`]) and bytes
//! ([`INNER_CALLS_QUEUED_BYTES_MAX`]); what does not fit is dropped and counted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The most entries waiting for the front end; more are dropped.
pub const INNER_CALLS_QUEUED_MAX: usize = 1 << 16;
/// The most bytes of words waiting for the front end; more are dropped.
pub const INNER_CALLS_QUEUED_BYTES_MAX: usize = 16 << 20;

/// One command a call ran inside the model: the database it ran in and its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InnerCall {
    pub db: u32,
    pub words: Vec<Vec<u8>>,
}

#[derive(Debug, Default)]
struct Queue {
    calls: Vec<InnerCall>,
    bytes: usize,
}

/// The queue between the node's thread, which runs calls, and the front end that serves
/// monitors.
#[derive(Debug, Default)]
pub struct InnerCalls {
    watching: AtomicBool,
    queue: Mutex<Queue>,
    dropped: AtomicU64,
}

impl InnerCalls {
    /// Whether a front end takes entries now: the model pushes none otherwise.
    pub fn is_watching(&self) -> bool {
        self.watching.load(Ordering::Relaxed)
    }

    /// The front end has monitors (or no longer has any, which also drops what waits).
    pub fn set_watching(&self, watching: bool) {
        self.watching.store(watching, Ordering::Relaxed);
        if !watching {
            *self.queue.lock().expect("never poisoned") = Queue::default();
        }
    }

    /// Queues `call` if a front end watches and it fits.
    pub fn push(&self, call: InnerCall) {
        if !self.is_watching() {
            return;
        }
        let len: usize = call.words.iter().map(Vec::len).sum();
        let mut queue = self.queue.lock().expect("never poisoned");
        if queue.calls.len() < INNER_CALLS_QUEUED_MAX
            && queue.bytes + len <= INNER_CALLS_QUEUED_BYTES_MAX
        {
            queue.bytes += len;
            queue.calls.push(call);
        } else {
            self.dropped.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Every entry queued so far, oldest first.
    pub fn take(&self) -> Vec<InnerCall> {
        std::mem::take(&mut *self.queue.lock().expect("never poisoned")).calls
    }

    /// Entries dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(word: &str) -> InnerCall {
        InnerCall {
            db: 0,
            words: vec![word.as_bytes().to_vec()],
        }
    }

    #[test]
    fn entries_are_kept_only_while_watched_and_within_bounds() {
        let feed = InnerCalls::default();
        feed.push(call("unseen"));
        assert!(feed.take().is_empty());
        feed.set_watching(true);
        feed.push(call("a"));
        feed.push(call("b"));
        assert_eq!(feed.take(), [call("a"), call("b")]);
        assert!(feed.take().is_empty());
        let big = "x".repeat(INNER_CALLS_QUEUED_BYTES_MAX);
        feed.push(call("c"));
        feed.push(call(&big));
        assert_eq!(feed.dropped(), 1);
        feed.set_watching(false);
        assert!(
            feed.take().is_empty(),
            "what waited is dropped with the last monitor"
        );
    }
}
