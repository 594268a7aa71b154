//! Messages a model's calls publish once they commit, for the node's pub/sub subscribers
//! (Redis's keyspace notifications): the node's thread pushes what each committed call
//! published, the front end that owns the subscriptions takes them and delivers them.
//!
//! Messages are not data: nothing here is replicated or logged, and a message no front end
//! takes in time is dropped, as a subscriber too slow for Redis is. The queue is bounded in
//! messages ([`PUBLICATIONS_QUEUED_MAX`]) and in bytes ([`PUBLICATIONS_QUEUED_BYTES_MAX`]), so
//! a front end that stopped taking costs no memory without end; what it dropped is counted.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// The most messages waiting for the front end; more are dropped.
pub const PUBLICATIONS_QUEUED_MAX: usize = 1 << 20;
/// The most bytes (channels and payloads) waiting for the front end; more are dropped.
pub const PUBLICATIONS_QUEUED_BYTES_MAX: usize = 64 << 20;

/// One message: its channel and its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Publication {
    pub channel: Vec<u8>,
    pub message: Vec<u8>,
    /// A shard channel's message (`SPUBLISH`), not a channel's.
    pub shard: bool,
    /// Relayed by the group's primary to this node: its subscribers hear it, and it is not
    /// relayed again.
    pub relayed: bool,
}

impl Publication {
    /// A message published on this node (by a call that committed here).
    pub fn new(channel: Vec<u8>, message: Vec<u8>) -> Publication {
        Publication {
            channel,
            message,
            shard: false,
            relayed: false,
        }
    }

    /// A message the group's primary relayed to this node.
    pub fn relayed(shard: bool, channel: Vec<u8>, message: Vec<u8>) -> Publication {
        Publication {
            channel,
            message,
            shard,
            relayed: true,
        }
    }

    fn len(&self) -> usize {
        self.channel.len() + self.message.len()
    }
}

/// The messages waiting, and their bytes.
#[derive(Default)]
struct Queue {
    messages: Vec<Publication>,
    bytes: usize,
}

type Wake = Box<dyn Fn() + Send + Sync>;

/// The queue between the calls that publish and the front end that delivers.
#[derive(Default)]
pub struct Publications {
    queue: Mutex<Queue>,
    /// Called after a push, so that a front end asleep in its poll takes the messages now.
    wake: Mutex<Option<Wake>>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for Publications {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Publications")
            .field("dropped", &self.dropped())
            .finish_non_exhaustive()
    }
}

impl Publications {
    /// Queues `messages` (emptying it), in order, then wakes the front end once.
    pub fn push(&self, messages: &mut Vec<Publication>) {
        if messages.is_empty() {
            return;
        }
        {
            let mut queue = self
                .queue
                .lock()
                .expect("the publications queue is never poisoned");
            let mut dropped = 0;
            for message in messages.drain(..) {
                let fits = queue.messages.len() < PUBLICATIONS_QUEUED_MAX
                    && queue.bytes + message.len() <= PUBLICATIONS_QUEUED_BYTES_MAX;
                if fits {
                    queue.bytes += message.len();
                    queue.messages.push(message);
                } else {
                    dropped += 1;
                }
            }
            self.dropped.fetch_add(dropped, Ordering::Relaxed);
        }
        if let Some(wake) = self.wake.lock().expect("never poisoned").as_ref() {
            wake();
        }
    }

    /// Every message queued so far, oldest first.
    pub fn take(&self) -> Vec<Publication> {
        std::mem::take(&mut *self.queue.lock().expect("never poisoned")).messages
    }

    /// Makes every later push call `wake`.
    pub fn on_push(&self, wake: impl Fn() + Send + Sync + 'static) {
        *self.wake.lock().expect("never poisoned") = Some(Box::new(wake));
    }

    /// Messages dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    fn message(n: usize) -> Publication {
        Publication::new(b"c".to_vec(), n.to_string().into_bytes())
    }

    #[test]
    fn messages_arrive_in_order_and_each_push_wakes_once() {
        let publications = Publications::default();
        let wakes = Arc::new(AtomicUsize::new(0));
        let counted = Arc::clone(&wakes);
        publications.on_push(move || {
            counted.fetch_add(1, Ordering::Relaxed);
        });
        publications.push(&mut vec![message(1), message(2)]);
        publications.push(&mut Vec::new());
        publications.push(&mut vec![message(3)]);
        assert_eq!(
            wakes.load(Ordering::Relaxed),
            2,
            "an empty push wakes nobody"
        );
        assert_eq!(
            publications.take(),
            vec![message(1), message(2), message(3)]
        );
        assert!(publications.take().is_empty());
    }

    #[test]
    fn a_queue_full_of_bytes_drops_and_counts_what_does_not_fit() {
        let publications = Publications::default();
        let big = |fill: u8| {
            Publication::new(b"c".to_vec(), vec![fill; PUBLICATIONS_QUEUED_BYTES_MAX / 2])
        };
        publications.push(&mut vec![big(1), big(2), message(3)]);
        assert_eq!(
            publications.dropped(),
            1,
            "the second half-sized message did not fit"
        );
        let taken = publications.take();
        assert_eq!(taken.len(), 2);
        assert_eq!(taken[1], message(3), "a small one after it still fits");
        publications.push(&mut vec![big(4)]);
        assert_eq!(publications.take().len(), 1, "taking frees the room");
    }

    #[test]
    fn a_full_queue_drops_and_counts_what_does_not_fit() {
        let publications = Publications::default();
        let mut many: Vec<Publication> = (0..PUBLICATIONS_QUEUED_MAX - 1).map(message).collect();
        publications.push(&mut many);
        publications.push(&mut vec![message(7), message(8), message(9)]);
        assert_eq!(publications.dropped(), 2);
        let taken = publications.take();
        assert_eq!(taken.len(), PUBLICATIONS_QUEUED_MAX);
        assert_eq!(taken.last(), Some(&message(7)));
    }
}
