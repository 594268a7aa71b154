//! The RESP connections waiting in a blocking command (`BLPOP`, `BZPOPMIN`, …; see
//! `tandem_redis::cmd::blocking`).
//!
//! A blocking call that finds nothing to pop fails with `WOULD_BLOCK` and changes nothing;
//! its connection then waits here, handling nothing more, until a try of the call is served,
//! its time is up, `CLIENT UNBLOCK` ends it, or the node stops being primary. A waiting call
//! is tried again, awakened, once the primary's committed LSN passes the one read before its
//! last try: only a write can serve it, and every write takes an LSN. The node thread publishes
//! the LSN before it hands over the answers it covers, so the pass that takes a write's answer
//! sees it. Tries go out in the order the connections first blocked, and the node thread runs a
//! batch's calls in order: the client that blocked first is served first, as in Redis.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mio::Token;
use tandem_redis::session::Unblock;

use super::Owner;

/// How often a pass runs while a connection waits, at least: it notices that the node lost
/// its primary role (no answer would wake the loop for that).
pub(super) const WAITING_PASS_MAX: Duration = Duration::from_millis(100);

/// One waiting connection's blocking call.
#[derive(Debug)]
struct Waiter {
    owner: Owner,
    /// When its time is up; `None` for never.
    deadline: Option<Instant>,
    /// The committed LSN read before its last try: a write after it may serve the call.
    lsn_tried: u64,
    /// A try is in flight.
    trying: bool,
    /// A try found nothing: the connection is blocked, as `INFO`'s `blocked_clients` counts.
    blocked: bool,
    /// `CLIENT UNBLOCK` asked while a try was in flight: how the wait ends if it finds
    /// nothing.
    unblock: Option<Unblock>,
}

/// What `CLIENT UNBLOCK` found.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Unblocking {
    /// The connection does not wait in a blocking command.
    NotWaiting,
    /// Its wait ends now: answer the call as the ask says.
    Now(Owner),
    /// A try is in flight: its answer ends the wait, served or as the ask says.
    WhenTried,
}

/// The blocking calls of the loop's connections, in the order they were first sent.
#[derive(Debug, Default)]
pub(super) struct Waiting {
    waiters: BTreeMap<u64, Waiter>,
    order_next: u64,
}

impl Waiting {
    /// A blocking call sent for the first time at `sent`, after the committed LSN was read
    /// as `lsn`: its place in the order, which its slot keeps.
    pub(super) fn begin(&mut self, owner: Owner, sent: Instant, timeout_ms: u64, lsn: u64) -> u64 {
        let order = self.order_next;
        self.order_next += 1;
        // A timeout too far off for the clock to represent is never reached.
        let deadline = (timeout_ms > 0)
            .then(|| sent.checked_add(Duration::from_millis(timeout_ms)))
            .flatten();
        self.waiters.insert(
            order,
            Waiter {
                owner,
                deadline,
                lsn_tried: lsn,
                trying: true,
                blocked: false,
                unblock: None,
            },
        );
        order
    }

    /// The call at `order` was answered (served, refused, or its wait ended): it waits no
    /// more.
    pub(super) fn end(&mut self, order: u64) {
        self.waiters.remove(&order);
    }

    /// A try of the call at `order` found nothing: it waits, unless `CLIENT UNBLOCK` asked
    /// meanwhile (then that ask, and the caller ends it).
    pub(super) fn found_nothing(&mut self, order: u64) -> Option<Unblock> {
        let waiter = self.waiters.get_mut(&order).expect("a waiting call's try");
        assert!(waiter.trying, "an answer to a try sent");
        waiter.trying = false;
        waiter.blocked = true;
        waiter.unblock.take()
    }

    /// The waiting calls whose time is up at `now` (none with a try in flight: its answer
    /// comes first), which wait no more.
    pub(super) fn take_due(&mut self, now: Instant) -> Vec<Owner> {
        let due: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| !w.trying && w.deadline.is_some_and(|deadline| deadline <= now))
            .map(|(&order, _)| order)
            .collect();
        due.iter()
            .map(|order| self.waiters.remove(order).expect("a due call").owner)
            .collect()
    }

    /// The waiting calls to try again now that the committed LSN is `lsn`, in the order they
    /// first blocked; each is marked as tried at `lsn`.
    pub(super) fn take_to_try(&mut self, lsn: u64) -> Vec<Owner> {
        let mut owners = Vec::new();
        for waiter in self.waiters.values_mut() {
            if !waiter.trying && waiter.lsn_tried < lsn {
                waiter.trying = true;
                waiter.lsn_tried = lsn;
                owners.push(waiter.owner);
            }
        }
        owners
    }

    /// Every call that waits with no try in flight (the node lost the role that would try
    /// them), which waits no more.
    pub(super) fn take_untried(&mut self) -> Vec<Owner> {
        let untried: Vec<u64> = self
            .waiters
            .iter()
            .filter(|(_, w)| !w.trying)
            .map(|(&order, _)| order)
            .collect();
        untried
            .iter()
            .map(|order| self.waiters.remove(order).expect("an untried call").owner)
            .collect()
    }

    /// `CLIENT UNBLOCK` of the connection `token`.
    pub(super) fn unblock(&mut self, token: Token, unblock: Unblock) -> Unblocking {
        let found = self
            .waiters
            .iter_mut()
            .find(|(_, w)| w.owner.token == token && w.blocked);
        let Some((&order, waiter)) = found else {
            return Unblocking::NotWaiting;
        };
        if waiter.trying {
            waiter.unblock = Some(unblock);
            return Unblocking::WhenTried;
        }
        let owner = waiter.owner;
        self.waiters.remove(&order);
        Unblocking::Now(owner)
    }

    /// The connection `token` closed: its call waits no more.
    pub(super) fn forget(&mut self, token: Token) {
        self.waiters.retain(|_, w| w.owner.token != token);
    }

    /// Connections blocked now (`INFO`'s `blocked_clients`).
    pub(super) fn blocked(&self) -> usize {
        self.waiters.values().filter(|w| w.blocked).count()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.waiters.is_empty()
    }

    /// When the loop must look again at the latest: the earliest deadline of a call with no
    /// try in flight (a try's answer wakes the loop, and a due call waits for it), and at most
    /// [`WAITING_PASS_MAX`] from `now` while any call waits.
    pub(super) fn look_again_by(&self, now: Instant) -> Option<Instant> {
        if self.waiters.is_empty() {
            return None;
        }
        let deadline = self
            .waiters
            .values()
            .filter(|w| !w.trying)
            .filter_map(|w| w.deadline)
            .min();
        let regular = now + WAITING_PASS_MAX;
        Some(deadline.map_or(regular, |deadline| deadline.min(regular)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn owner(token: usize) -> Owner {
        Owner {
            token: Token(token),
            serial: 0,
        }
    }

    #[test]
    fn a_call_is_tried_again_only_after_a_later_commit_in_the_order_it_blocked() {
        let now = Instant::now();
        let mut waiting = Waiting::default();
        let first = waiting.begin(owner(7), now, 0, 10);
        let second = waiting.begin(owner(3), now, 0, 12);
        assert_eq!(waiting.take_to_try(20), vec![], "both tries are in flight");
        assert_eq!(
            waiting.blocked(),
            0,
            "not blocked before a try found nothing"
        );
        assert_eq!(waiting.found_nothing(second), None);
        assert_eq!(waiting.found_nothing(first), None);
        assert_eq!(waiting.blocked(), 2);
        assert_eq!(
            waiting.take_to_try(12),
            vec![owner(7)],
            "only the first saw LSN 10"
        );
        assert_eq!(waiting.take_to_try(13), vec![owner(3)]);
        waiting.found_nothing(first);
        waiting.found_nothing(second);
        assert_eq!(
            waiting.take_to_try(14),
            vec![owner(7), owner(3)],
            "first blocked, first tried"
        );
        waiting.end(first);
        assert_eq!(waiting.blocked(), 1);
    }

    #[test]
    fn a_deadline_ends_a_wait_but_not_while_a_try_is_in_flight() {
        let now = Instant::now();
        let mut waiting = Waiting::default();
        let order = waiting.begin(owner(1), now, 50, 0);
        let later = now + Duration::from_millis(60);
        assert_eq!(waiting.take_due(later), vec![], "its try is in flight");
        assert_eq!(
            waiting.look_again_by(later),
            Some(later + WAITING_PASS_MAX),
            "no pass is due for a deadline behind a try in flight: its answer wakes the loop"
        );
        waiting.found_nothing(order);
        assert_eq!(
            waiting.look_again_by(now),
            Some(now + Duration::from_millis(50))
        );
        assert_eq!(waiting.take_due(now), vec![]);
        assert_eq!(waiting.take_due(later), vec![owner(1)]);
        assert!(waiting.is_empty());
        let forever = waiting.begin(owner(2), now, 0, 0);
        waiting.found_nothing(forever);
        assert_eq!(waiting.look_again_by(now), Some(now + WAITING_PASS_MAX));
        assert_eq!(waiting.take_due(now + Duration::from_secs(3600)), vec![]);
    }

    #[test]
    fn client_unblock_ends_a_blocked_wait_now_or_when_its_try_comes_back() {
        let now = Instant::now();
        let mut waiting = Waiting::default();
        let ask = Unblock {
            client_id: 1,
            error: true,
        };
        let order = waiting.begin(owner(4), now, 0, 0);
        assert_eq!(
            waiting.unblock(Token(4), ask),
            Unblocking::NotWaiting,
            "not blocked before its first try found nothing"
        );
        waiting.found_nothing(order);
        waiting.take_to_try(1);
        assert_eq!(waiting.unblock(Token(4), ask), Unblocking::WhenTried);
        assert_eq!(waiting.found_nothing(order), Some(ask));
        waiting.end(order);
        let order = waiting.begin(owner(5), now, 0, 0);
        waiting.found_nothing(order);
        assert_eq!(waiting.unblock(Token(5), ask), Unblocking::Now(owner(5)));
        assert!(waiting.is_empty());
    }
}
