//! The simulator's event loop's parts: the queue of timed events and the trace of the last
//! things that happened.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::MICROS_PER_TICK;

/// Events by the time they are due (micro-ticks), ties in the order they were scheduled: the
/// order is a function of the seed alone. Events live in a slab whose slots are reused, so the
/// heap moves small keys only.
#[derive(Debug)]
pub(crate) struct EventQueue<E> {
    heap: BinaryHeap<Reverse<(u64, u64, usize)>>,
    slab: Vec<Option<E>>,
    free: Vec<usize>,
    scheduled: u64,
}

impl<E> EventQueue<E> {
    pub(crate) fn new() -> EventQueue<E> {
        EventQueue {
            heap: BinaryHeap::new(),
            slab: Vec::new(),
            free: Vec::new(),
            scheduled: 0,
        }
    }

    /// Schedules `event` at micro-tick `at`.
    pub(crate) fn schedule_at(&mut self, at: u64, event: E) {
        let index = match self.free.pop() {
            Some(index) => {
                self.slab[index] = Some(event);
                index
            }
            None => {
                self.slab.push(Some(event));
                self.slab.len() - 1
            }
        };
        self.scheduled += 1;
        self.heap.push(Reverse((at, self.scheduled, index)));
    }

    /// The next event and the micro-tick it is due at.
    pub(crate) fn pop(&mut self) -> Option<(u64, E)> {
        let Reverse((at, _, index)) = self.heap.pop()?;
        let event = self.slab[index].take().expect("each event runs once");
        self.free.push(index);
        Some((at, event))
    }
}

/// The last `capacity` things that happened, each stamped with its tick.
#[derive(Debug)]
pub(crate) struct Trace {
    lines: VecDeque<String>,
    capacity: usize,
}

impl Trace {
    pub(crate) fn new(capacity: usize) -> Trace {
        assert!(capacity > 0, "a trace keeps at least one line");
        Trace {
            lines: VecDeque::with_capacity(capacity),
            capacity,
        }
    }

    /// Notes `line` at micro-tick `now`, forgetting the oldest line if full.
    pub(crate) fn note(&mut self, now: u64, line: String) {
        if self.lines.len() == self.capacity {
            self.lines.pop_front();
        }
        self.lines.push_back(format!(
            "t={}.{:03} {line}",
            now / MICROS_PER_TICK,
            now % MICROS_PER_TICK
        ));
    }

    /// The lines kept, oldest first.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.lines.iter().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_come_out_by_time_then_by_the_order_they_were_scheduled() {
        let mut queue = EventQueue::new();
        queue.schedule_at(5, "b");
        queue.schedule_at(3, "a");
        queue.schedule_at(5, "c");
        assert_eq!(queue.pop(), Some((3, "a")));
        queue.schedule_at(4, "d");
        assert_eq!(queue.pop(), Some((4, "d")));
        assert_eq!(queue.pop(), Some((5, "b")));
        assert_eq!(queue.pop(), Some((5, "c")));
        assert_eq!(queue.pop(), None);
    }

    #[test]
    fn a_trace_keeps_the_last_lines() {
        let mut trace = Trace::new(2);
        for (now, line) in [(1_000, "one"), (2_500, "two"), (3_001, "three")] {
            trace.note(now, line.to_owned());
        }
        assert_eq!(trace.lines(), vec!["t=2.500 two", "t=3.001 three"]);
    }
}
