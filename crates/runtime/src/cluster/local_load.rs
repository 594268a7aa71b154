//! The in-process driver (`tandem bench replication --driver in-process`): the primary
//! role's own calls, produced by the workload's driver on the node's thread, with at most
//! `clients` of them waiting for their answers at once, as the paper's measurements ran
//! the workload inside the primary's process. The calls go through the same queue, flow
//! control and safety rule as a client's; only their answers stay on the thread.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use tandem_node::WaitingCall;
use tandem_store::{DataModel, Driver, ProcError, ProcId};

use super::env::CallTo;
use crate::primary::LocalLoad;

/// The most calls the driver issues in one pass of the node's loop: a pass then stays short
/// enough that acks and heartbeats are read between them.
const ISSUED_PER_PASS_MAX: usize = 1024;

/// How a call of the in-process driver ended, as the node released its answer.
#[derive(Debug)]
pub(crate) struct LocalAnswer {
    pub(crate) seq: u64,
    /// Committed, or why not (rolled back, refused, or never run).
    pub(crate) outcome: Result<(), String>,
    /// When the call was issued: its latency runs to the pass that takes its answer (one
    /// clock read per pass, not per answer, which cost 4% of the thread).
    pub(crate) started: Instant,
}

/// The in-process driver's state on the node's thread.
pub(crate) struct LocalCalls {
    driver: Box<dyn Driver>,
    load: Arc<LocalLoad>,
    /// The calls issued and not answered yet, in the order they were issued: the node
    /// answers them in that order (their commits in LSN order, a rollback behind the
    /// answers before it), which is the order the driver must observe them in.
    waiting: VecDeque<(u64, ProcId, Vec<u8>)>,
    seq_next: u64,
    /// Argument buffers of answered calls, reused for the next ones.
    spare_args: Vec<Vec<u8>>,
}

impl LocalCalls {
    /// The driver of `model` seeded with `seed`, issuing for `load`; an error naming the
    /// model if it has no driver.
    pub(crate) fn new(
        model: &dyn DataModel,
        seed: u64,
        load: Arc<LocalLoad>,
    ) -> Result<LocalCalls, crate::StartError> {
        let driver = model
            .driver(seed)
            .ok_or_else(|| crate::StartError::NoLocalLoad {
                model: model.name().to_owned(),
            })?;
        Ok(LocalCalls {
            driver,
            load,
            waiting: VecDeque::new(),
            seq_next: 1,
            spare_args: Vec::new(),
        })
    }

    /// Whether the benchmark wants more calls now: it is on, and fewer than `clients` wait.
    pub(crate) fn wants_calls(&self) -> bool {
        self.load.active.load(Ordering::Acquire) && self.waiting.len() < self.load.clients
    }

    /// Issues calls into `calls` until `clients` wait for their answers, at most
    /// [`ISSUED_PER_PASS_MAX`] at a time.
    pub(crate) fn issue(&mut self, calls: &mut Vec<WaitingCall<CallTo>>) {
        let started = Instant::now();
        while self.wants_calls() && calls.len() < ISSUED_PER_PASS_MAX {
            let mut kept = self.spare_args.pop().unwrap_or_default();
            let proc_id = self.driver.next_call(&mut kept);
            let args = kept.clone();
            let seq = self.seq_next;
            self.seq_next += 1;
            self.waiting.push_back((seq, proc_id, kept));
            self.load.outstanding.fetch_add(1, Ordering::Relaxed);
            calls.push(WaitingCall {
                to: CallTo::Local { seq, started },
                client_id: 0,
                seq,
                proc_id,
                args,
                read_only: false,
                safety: None,
            });
        }
    }

    /// Takes the answers the node released: the driver observes each, and the benchmark's
    /// tallies and latencies count them.
    pub(crate) fn answered(&mut self, answers: &mut Vec<LocalAnswer>) {
        if answers.is_empty() {
            return;
        }
        let now = Instant::now();
        let mut histogram = self.load.latency_ns.lock().expect("not poisoned");
        for answer in answers.drain(..) {
            let (seq, proc_id, args) = self
                .waiting
                .pop_front()
                .expect("an answer to a call that waits");
            assert_eq!(
                seq, answer.seq,
                "the node answers local calls in issue order"
            );
            match answer.outcome {
                Ok(()) => self.driver.observe(proc_id, &args, Ok(())),
                Err(message) => {
                    self.driver
                        .observe(proc_id, &args, Err(&ProcError::Failed(message)))
                }
            }
            self.spare_args.push(args);
            let latency = now.saturating_duration_since(answer.started);
            let _ = histogram.record(u64::try_from(latency.as_nanos()).unwrap_or(u64::MAX).max(1));
            self.load.replies.fetch_add(1, Ordering::Relaxed);
            self.load.outstanding.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether the benchmark asked for the check and no call of the driver's waits.
    pub(crate) fn check_due(&self) -> bool {
        self.waiting.is_empty()
            && self.load.check_asked.load(Ordering::Acquire)
            && self.load.check.lock().expect("not poisoned").is_none()
    }

    /// Checks what only the driver knows (the sum of the deltas that committed, …) against
    /// `segment`, and the model's own consistency, and leaves the result for the benchmark.
    pub(crate) fn check(&self, model: &dyn DataModel, segment: &tandem_memory::Segment) {
        let result = model
            .check(segment)
            .and_then(|()| self.driver.check(segment))
            .map_err(|err| err.to_string());
        *self.load.check.lock().expect("not poisoned") = Some(result);
    }
}
