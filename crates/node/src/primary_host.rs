//! A primary role as one value, beside [`crate::BackupRole`]: the node core's
//! [`PrimaryRole`], the calls waiting for flow control, when the model's periodic procedure
//! is next due, and the buffers its turns hand out.
//!
//! A driver queues each call it reads ([`PrimaryHost::queue`]), runs the waiting ones in
//! arrival order ([`PrimaryHost::run_next`], until it stalls or none waits), runs the model's
//! periodic procedure when it is due ([`PrimaryHost::run_periodic_if_due`]), and after each
//! input takes what leaves the role ([`PrimaryHost::collect`]): one [`RoleReady`], in
//! [`PrimaryRole::take_ready`]'s order, whose replies released under a lease that ran out
//! since are held back until it holds again. A deposed primary's waiting calls are the
//! driver's to answer "not primary" ([`PrimaryHost::take_waiting`]): their clients resend
//! them to the new primary under the same (client id, seq).

use std::collections::VecDeque;

use tandem_memory::{ClassBytes, Segment};
use tandem_replication::{Primary, Safety};
use tandem_store::ProcId;

use crate::primary::{Answer, Call, PrimaryRole, Ran, RoleReady};

/// A call waiting at a primary for its turn, and where its answer goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitingCall<D> {
    pub to: D,
    /// The client's id: 0 is an anonymous client, not deduplicated.
    pub client_id: u64,
    pub seq: u64,
    pub proc_id: ProcId,
    pub args: Vec<u8>,
    /// Sent as a read: it may run only a read-only procedure.
    pub read_only: bool,
    /// The rule the call asks for, if it overrides the group's.
    pub safety: Option<Safety>,
}

/// A primary role with the calls waiting for it.
#[derive(Debug)]
pub struct PrimaryHost<D> {
    role: PrimaryRole<D>,
    waiting: VecDeque<WaitingCall<D>>,
    /// The buffers [`PrimaryHost::collect`] hands out, back for the next collection.
    ready: RoleReady<D>,
    /// When the model's periodic procedure is next due, by the primary's clock (Unix ms).
    periodic_due_ms: u64,
}

impl<D: Clone> PrimaryHost<D> {
    pub fn new(role: PrimaryRole<D>) -> PrimaryHost<D> {
        PrimaryHost {
            role,
            waiting: VecDeque::new(),
            ready: RoleReady::default(),
            periodic_due_ms: 0,
        }
    }

    pub fn role(&self) -> &PrimaryRole<D> {
        &self.role
    }

    pub fn role_mut(&mut self) -> &mut PrimaryRole<D> {
        &mut self.role
    }

    /// The role's replication core.
    pub fn primary(&self) -> &Primary<Answer<D>> {
        self.role.primary()
    }

    /// Ends a deposed role and gives its segment back (see [`PrimaryRole::into_segment`]).
    /// Its waiting calls must have been taken first.
    pub fn into_segment(self) -> Segment {
        assert!(
            self.waiting.is_empty(),
            "a deposed primary's waiting calls are answered before it gives its segment up"
        );
        self.role.into_segment()
    }

    /// A call read from a client, behind those already waiting.
    pub fn queue(&mut self, call: WaitingCall<D>) {
        self.waiting.push_back(call);
    }

    /// Calls waiting.
    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    /// The call that runs next, for a driver that says more of where its answer goes at the
    /// moment it runs (the time it ran, for the simulator's checkers).
    pub fn front_mut(&mut self) -> Option<&mut WaitingCall<D>> {
        self.waiting.front_mut()
    }

    /// Runs the call that waits longest: `None` if none waits. A call flow control holds
    /// ([`Ran::Stalled`]) keeps its place; every other outcome ends its wait.
    pub fn run_next(&mut self) -> Option<Ran> {
        let waiting = self.waiting.front()?;
        let call = Call {
            client_id: waiting.client_id,
            seq: waiting.seq,
            proc_id: waiting.proc_id,
            args: &waiting.args,
            read_only: waiting.read_only,
            safety: waiting.safety,
        };
        // The call after it starts loading the records it will touch while this one runs
        // (a Debit-Credit call on a database larger than the caches waits on its misses).
        if let Some(next) = self.waiting.get(1) {
            self.role.store().prefetch(next.proc_id, &next.args);
        }
        let ran = self.role.run_call(&call, waiting.to.clone());
        if ran != Ran::Stalled {
            self.waiting.pop_front();
        }
        Some(ran)
    }

    /// Every call still waiting, in arrival order, for a deposed primary to answer "not
    /// primary".
    pub fn take_waiting(&mut self) -> impl Iterator<Item = WaitingCall<D>> + '_ {
        self.waiting.drain(..)
    }

    /// Runs the model's periodic procedure (the Redis model's expiry sweep) if it is due at
    /// `now_ms`, and makes it due again `interval_ms` later; its answer goes to `to`. Returns
    /// what its record shipped if it committed (see [`PrimaryRole::run_periodic`]).
    pub fn run_periodic_if_due(
        &mut self,
        now_ms: u64,
        interval_ms: u64,
        to: D,
    ) -> Option<ClassBytes> {
        if now_ms < self.periodic_due_ms {
            return None;
        }
        self.periodic_due_ms = now_ms + interval_ms;
        self.role.set_time_ms(now_ms);
        self.role.run_periodic(to)
    }

    /// What leaves the role now, at the driver's tick `tick_now`: the role's ready, with the
    /// replies released under a lease that ran out since held back until it holds again (a
    /// paused primary replays the ticks it missed, and a hold that ends inside them releases
    /// replies at a tick the replay then passes). Give it back with
    /// [`PrimaryHost::recycle`] once carried out, to keep its buffers.
    pub fn collect(&mut self, tick_now: u64) -> RoleReady<D> {
        let mut ready = std::mem::take(&mut self.ready);
        self.role.take_ready(&mut ready);
        self.role.hold_lapsed(&mut ready, tick_now);
        ready
    }

    /// A ready [`PrimaryHost::collect`] handed out, carried out: its buffers serve the next.
    pub fn recycle(&mut self, mut ready: RoleReady<D>) {
        ready.clear();
        self.ready = ready;
    }
}
