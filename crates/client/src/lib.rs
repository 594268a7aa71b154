//! The client stub: routes calls to the group's primary and makes failover seamless and
//! exactly-once (DESIGN.md, "Seamless switchover").
//!
//! A [`Client`] runs one call at a time over blocking TCP. Each call gets the next sequence
//! number of this client; the pair (client id, seq) names it in the primary's dedup table.
//! When an attempt does not end in an answer (a timeout, a closed connection, garbage bytes)
//! or ends in "not primary" or "stale view", the stub finds the current primary and resends
//! the *same* (client id, seq): a call that already committed comes back as its stored reply
//! instead of running twice. A call ends in exactly one of:
//!
//! - an [`Outcome`]: the procedure committed, or it rolled back with its reason;
//! - [`CallError::Refused`]: the primary refused the call itself (unknown procedure, bad
//!   arguments), so it did not run;
//! - [`CallError::Deadline`]: no definite answer within [`ClientConfig::deadline`]. The call
//!   ran at most once. [`Client::resume`] resends it with the same seq and a fresh deadline,
//!   which turns it into one of these three again; the next [`Client::call`] gives it up.
//!
//! Nothing else: the stub never reports "unknown", and never panics on what a node sends.
//!
//! **Routing.** The stub keeps one connection, to the node that last welcomed it as primary.
//! Without one it goes round the nodes of [`ClientConfig::nodes`], starting after the node
//! it last dropped (so a failed primary is tried last): connect, send `Hello`, read the answer.
//! A `Welcome` with role `Primary` ends the search. Role `Backup`, an `Error` frame, a refused
//! or timed-out connect, or garbage move on to the next node, and so does a `Primary` whose
//! view is older than a view some node already reported (a deposed primary that has not heard
//! yet). After a round without a primary the stub pauses ([`ClientConfig::retry_backoff`],
//! doubling up to 4 times it: a failover takes milliseconds, and a long pause would add to it) and goes round again, until the call's deadline.
//!
//! **Retries.** On the primary's connection, per answer to a sent call:
//!
//! | answer | the stub |
//! |---|---|
//! | `Reply` with this seq | returns it (committed or rolled back) |
//! | `Reply` with another seq | ignores it: a late duplicate of an earlier call |
//! | `NotPrimary`, `StaleView` | drops the connection, finds the primary, resends at once |
//! | no answer in time | drops the connection, finds the primary, resends, waiting twice as long |
//! | `Busy` | pauses, resends on the same connection |
//! | `BadFrame`, `Internal`, `UnsupportedVersion`, closed, garbage | drops the connection, pauses, finds the primary, resends |
//! | `UnknownProcedure`, `BadArgs` | returns [`CallError::Refused`] |
//!
//! Pauses start at [`ClientConfig::retry_backoff`] and double while failures repeat within a
//! call, up to 4 times it. Every wait is cut short at the call's deadline.
//!
//! **Reads.** [`Client::read`] runs a read-only procedure on a backup (DESIGN.md, "Versioned
//! reads"). By default ([`ReadConsistency::Linearizable`]) the answer reflects every write
//! acknowledged to any client before the read was sent: the backup asks the primary what it
//! released and waits until it has applied that. The `Read` frame also carries `min_lsn` =
//! [`Client::lsn_seen`], the highest LSN any reply has carried to this client, which alone
//! gives read-your-writes and monotonic reads on any node ([`ReadConsistency::Session`],
//! chosen in [`ClientConfig::read_consistency`], saves the round trip). A backup shows only
//! state the primary has released, so a read never sees a record a view change could
//! discard. It gets one attempt on a backup; if
//! the backup is behind (`Busy`), not a backup any more, or silent, the read goes to the
//! primary like a call, which answers it under its lease. A read never fails for a reason a
//! call would not.
//!
//! **Calls from an event loop.** [`Client::send`] puts a call on the wire and returns;
//! [`Client::receive`] ends it as [`Client::call`] would, so one thread can have a call out
//! through each of several clients. On a connection put in non-blocking mode
//! ([`Client::nonblocking_fd`], a descriptor to wait on), [`Client::poll_receive`] takes the
//! answer once it is there, without waiting, and says when only `receive` can go on (a
//! failover, a pause, a resend): the same router decides either way.
//!
//! **Discovery.** [`discover`] learns the group's nodes from one or a few of them (the
//! seeds): it asks each in turn, whatever its role, for the members it knows (a `Members`
//! frame after the `Welcome`) and returns the first answer's addresses. A long-lived client
//! takes a new list with [`Client::set_nodes`], keeping its seq, its pending call and its
//! connection to the primary while the primary's address is still listed.
//!
//! The stub may use the clock, threads' sleep and sockets; it has its own `clippy.toml`.

#![forbid(unsafe_code)]

mod config;
mod conn;
mod discover;
pub mod load;
pub mod route;

use std::net::SocketAddr;
use std::thread;
use std::time::{Duration, Instant};

pub use config::{
    ATTEMPT_TIMEOUT_DEFAULT, ClientConfig, ClientTls, ConfigError, Credentials, DEADLINE_DEFAULT,
    DURATION_MAX, RETRY_BACKOFF_DEFAULT,
};
pub use discover::{
    DiscoverError, Discovery, SeedFailure, discover, discover_members, discover_secure,
    discover_with,
};
pub use tandem_replication::{NodeId, ReadConsistency, Safety, SafetyError};
pub use tandem_wire::{ErrorCode, ErrorFrame, GROUP_ANY, Member, ReplyStatus, SlotRange};

use conn::{Answer, Conn, Failure, Greeter, Greeting};
use route::{Action, Answered, Greeted, Router, RouterConfig};
use tandem_wire::{Hello, PeerKind, encode_call, encode_hello, encode_read};

/// The largest `args` a call may carry: the `Call` frame must fit the default frame limit
/// (type byte and 23-byte header included).
pub const ARGS_LEN_MAX: usize = conn::MAX_FRAME_LEN - 1 - 23;

/// How a call ended, when it ended in an answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// The call's sequence number.
    pub seq: u64,
    /// The call's commit LSN (for a rolled-back call, whatever the primary sent).
    pub lsn: u64,
    pub status: ReplyStatus,
    /// The procedure's reply, or its reason for rolling back.
    pub body: Vec<u8>,
    /// The primary that answered, and its view when the stub connected.
    pub node: NodeId,
    pub view: u64,
    /// How many times the call was sent, ≥ 1.
    pub attempts: u32,
}

impl Outcome {
    /// Whether the procedure committed (else it rolled back and `body` is its reason). A
    /// retry of a call whose reply was too long to keep committed too, once: its status is
    /// [`ReplyStatus::CommittedReplyNotKept`] and `body` says so.
    pub fn committed(&self) -> bool {
        self.status.committed()
    }
}

/// Why a call ended without an [`Outcome`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    /// No definite answer before the deadline. The call ran at most once; [`Client::resume`]
    /// resends it with the same seq to learn how it ended.
    #[error(
        "call {seq} got no answer within its deadline after {attempts} attempts; last error: \
         {last_error}"
    )]
    Deadline {
        seq: u64,
        attempts: u32,
        last_error: String,
    },
    /// The primary refused the call (unknown procedure, bad arguments): it did not run.
    #[error("the primary refused the call ({code:?}): {message}")]
    Refused { code: ErrorCode, message: String },
    /// Refused before sending: nothing was sent and no seq was used.
    #[error("args are {len} bytes, more than the {ARGS_LEN_MAX} a call frame can carry")]
    ArgsTooLarge { len: usize },
    /// Refused before sending: the wire cannot carry this rule. Nothing was sent.
    #[error("safety {safety} cannot be sent: {source}")]
    Safety { safety: Safety, source: SafetyError },
}

/// Counters since the client was created.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ClientStats {
    /// Calls run, resumed ones included.
    pub calls: u64,
    /// `Call` frames sent.
    pub attempts: u64,
    /// Connections tried while looking for the primary.
    pub connects: u64,
    /// Connections to a primary opened after the first one.
    pub reconnects: u64,
    /// Answers saying "not the primary": `NotPrimary` and `StaleView` errors, and `Welcome`s
    /// with role `Backup` or from a deposed primary.
    pub not_primary: u64,
    /// Attempts that got no answer within their timeout.
    pub timeouts: u64,
    /// `Busy` answers.
    pub busy: u64,
    /// Replies ignored because their seq was not the outstanding call's.
    pub stale_replies: u64,
    /// Replies from a different node than the reply before.
    pub failovers: u64,
    /// Calls that ended in [`CallError::Deadline`].
    pub deadlines: u64,
    /// Calls that ended in [`CallError::Refused`].
    pub refused: u64,
    /// Reads a backup answered.
    pub reads_at_backups: u64,
    /// Reads a backup could not answer (behind, not a backup, silent), sent to the primary.
    pub reads_redirected: u64,
}

/// A call that ended in a deadline error and may be resumed.
#[derive(Debug)]
struct Pending {
    seq: u64,
    /// The encoded `Call` frame, resent byte for byte.
    frame: Vec<u8>,
}

/// The stub. One call at a time (`&mut self`): the dedup table keeps only a client's last seq.
/// It moves bytes and reads the clock; what to do next is its [`Router`]'s to say.
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    /// The encoded `Hello` frame every connection starts with.
    hello: Vec<u8>,
    /// The `Hello`, and the credentials proved to a node that asks.
    greeter: Greeter,
    router: Router,
    /// The connection to the router's primary, when it has one.
    conn: Option<Conn>,
    /// The connection to a backup, for reads.
    reader: Option<Conn>,
    /// The index in `config.nodes` where the next search for a backup starts.
    read_from: usize,
    seq_last: u64,
    pending: Option<Pending>,
    /// The call [`Client::send`] began and [`Client::receive`] ends.
    begun: Option<Begun>,
    /// The primary's connection is in non-blocking mode, for [`Client::poll_receive`].
    nonblocking: bool,
}

/// What [`Client::poll_receive`] found.
#[derive(Debug)]
pub enum Polled {
    /// The call is over, as [`Client::receive`] would have said.
    Answered(Result<Outcome, CallError>),
    /// Its answer has not arrived yet: poll again when the socket is readable.
    Waiting,
    /// It needs what only [`Client::receive`] does (a failover, a pause, a resend): call it.
    Stuck,
}

/// The largest call frame written on a non-blocking socket as is: a larger one is written
/// with the socket blocking, so that it never goes out in part.
const NONBLOCKING_FRAME_MAX: usize = 16 * 1024;

/// A call begun by [`Client::send`]: its route so far, and whether its first attempt is on
/// the wire (until when its answer may take).
#[derive(Debug)]
struct Begun {
    pending: Pending,
    call: route::CallRoute,
    origin: Instant,
    sent_until: Option<Duration>,
}

impl Client {
    /// Checks `config`; connects lazily, on the first call.
    pub fn new(config: ClientConfig) -> Result<Client, ConfigError> {
        config.validate()?;
        let greeter = Greeter {
            hello: Hello::new(PeerKind::Client, config.client_id, config.group),
            credentials: config.credentials.clone(),
            tls: config.tls.clone(),
        };
        let mut hello = Vec::new();
        encode_hello(&mut hello, &greeter.hello);
        let router = Router::new(RouterConfig {
            nodes: config.nodes.iter().map(|addr| addr.to_string()).collect(),
            attempt_timeout: config.attempt_timeout,
            retry_backoff: config.retry_backoff,
            deadline: config.deadline,
        });
        Ok(Client {
            config,
            hello,
            greeter,
            router,
            conn: None,
            reader: None,
            read_from: 1,
            seq_last: 0,
            pending: None,
            begun: None,
            nonblocking: false,
        })
    }

    /// Runs procedure `proc_id` with `args` exactly once under `safety` (`None`: the group's
    /// default), failing over as often as the deadline allows. Gives up a call left pending
    /// by a deadline error.
    pub fn call(
        &mut self,
        proc_id: u16,
        args: &[u8],
        safety: Option<Safety>,
    ) -> Result<Outcome, CallError> {
        let pending = self.next_call(proc_id, args, safety)?;
        self.blocking();
        self.run(pending)
    }

    /// Begins what [`Client::call`] does and returns once the call is on its way: sent to the
    /// primary when the stub is connected to one, else left for [`Client::receive`] to route.
    /// Several clients (of different groups, say) can so have a call out at once from one
    /// thread. Until `receive`, this client takes no other call. True when the call is on
    /// the wire ([`Client::poll_receive`] can then see its answer).
    pub fn send(
        &mut self,
        proc_id: u16,
        args: &[u8],
        safety: Option<Safety>,
    ) -> Result<bool, CallError> {
        let pending = self.next_call(proc_id, args, safety)?;
        let origin = Instant::now();
        let mut call = self.router.begin(pending.seq, origin.elapsed());
        let mut sent_until = None;
        if self.conn.is_some() {
            let Action::Send { until } = self.router.next(&mut call, origin.elapsed()) else {
                unreachable!("a call just begun with a primary at hand goes to it at once");
            };
            let conn = self.conn.as_mut().expect("checked above");
            let whole = !self.nonblocking || pending.frame.len() <= NONBLOCKING_FRAME_MAX;
            let written = if whole {
                conn.send(&pending.frame, origin + until)
            } else {
                conn.set_nonblocking(false)
                    .and_then(|()| conn.send(&pending.frame, origin + until))
                    .and_then(|()| conn.set_nonblocking(true))
            };
            match written {
                Ok(()) => sent_until = Some(until),
                Err(failure) => {
                    let answered = Answered::Failed(failure.to_string());
                    self.answered(&mut call, answered, origin.elapsed());
                }
            }
        }
        let sent = sent_until.is_some();
        self.begun = Some(Begun {
            pending,
            call,
            origin,
            sent_until,
        });
        Ok(sent)
    }

    /// Puts the connection to the primary in non-blocking mode and returns its socket's
    /// descriptor, for an event loop to wait on for [`Client::poll_receive`]; `None` without
    /// a connection. Any other method that waits puts it back in blocking mode first.
    pub fn nonblocking_fd(&mut self) -> Option<std::os::fd::RawFd> {
        let conn = self.conn.as_mut()?;
        if !self.nonblocking {
            if conn.set_nonblocking(true).is_err() {
                return None;
            }
            self.nonblocking = true;
        }
        Some(conn.raw_fd())
    }

    /// Ends the call [`Client::send`] put on the wire if its answer has arrived, without
    /// waiting (on a connection in non-blocking mode, [`Client::nonblocking_fd`]).
    pub fn poll_receive(&mut self) -> Polled {
        let Some(begun) = self.begun.as_mut() else {
            panic!("poll_receive follows send");
        };
        let (Some(_), true) = (begun.sent_until, self.nonblocking) else {
            return Polled::Stuck;
        };
        // A new node list may have dropped the connection (`set_nodes`).
        let Some(conn) = self.conn.as_mut() else {
            return Polled::Stuck;
        };
        let stale = &mut self.router.stats_mut().stale_replies;
        let answered = match conn.answer_now(begun.call.seq(), stale) {
            Ok(None) => return Polled::Waiting,
            Ok(Some(answer)) => Self::answer_of(Ok(answer), &begun.call),
            Err(failure) => Self::answer_of(Err(failure), &begun.call),
        };
        let mut begun = self.begun.take().expect("checked above");
        begun.sent_until = None;
        let now = begun.origin.elapsed();
        self.answered(&mut begun.call, answered, now);
        if begun.call.is_over() {
            return Polled::Answered(self.drive(begun.pending, begun.call, begun.origin));
        }
        self.begun = Some(begun);
        Polled::Stuck
    }

    /// Puts the primary's connection back in blocking mode, for a method that waits.
    fn blocking(&mut self) {
        if !self.nonblocking {
            return;
        }
        self.nonblocking = false;
        if let Some(conn) = self.conn.as_mut()
            && conn.set_nonblocking(false).is_err()
        {
            // A socket that cannot wait is no use: the next attempt finds the primary again.
            self.router.drop_primary();
            self.conn = None;
        }
    }

    /// Ends the call [`Client::send`] began, as [`Client::call`] would have: its answer, or
    /// the failover and retries that get one, until the deadline counted from the send.
    pub fn receive(&mut self) -> Result<Outcome, CallError> {
        let Begun {
            pending,
            mut call,
            origin,
            sent_until,
        } = self.begun.take().expect("receive follows send");
        self.blocking();
        if let Some(until) = sent_until
            && self.conn.is_some()
        {
            let conn = self.conn.as_mut().expect("a sent call's connection stays");
            let stale = &mut self.router.stats_mut().stale_replies;
            let answered = Self::answer_of(conn.answer(call.seq(), origin + until, stale), &call);
            self.answered(&mut call, answered, origin.elapsed());
        }
        self.drive(pending, call, origin)
    }

    /// Checks a call's arguments and rule, and gives it the next seq and its frame. Gives up
    /// a call left pending by a deadline error.
    fn next_call(
        &mut self,
        proc_id: u16,
        args: &[u8],
        safety: Option<Safety>,
    ) -> Result<Pending, CallError> {
        assert!(
            self.begun.is_none(),
            "a call follows the last send's receive"
        );
        if args.len() > ARGS_LEN_MAX {
            return Err(CallError::ArgsTooLarge { len: args.len() });
        }
        if let Some(safety) = safety {
            // The stub does not know the group's size, so the primary checks ack counts
            // against it; here only the rules the wire cannot carry at all are refused.
            safety
                .validate_form()
                .map_err(|source| CallError::Safety { safety, source })?;
        }
        self.pending = None;
        self.seq_last += 1;
        let seq = self.seq_last;
        let mut frame = Vec::with_capacity(args.len() + 28);
        encode_call(&mut frame, seq, proc_id, safety, args);
        Ok(Pending { seq, frame })
    }

    /// Runs read-only procedure `proc_id` with `args` on a backup that has applied everything
    /// this client has seen (see the module doc), or else on the primary. Gives up a call
    /// left pending by a deadline error, as [`Client::call`] does.
    pub fn read(&mut self, proc_id: u16, args: &[u8]) -> Result<Outcome, CallError> {
        self.read_after(proc_id, args, 0)
    }

    /// [`Client::read`] that also sees every commit up to `min_lsn`: an LSN another client
    /// was told (a reply's `lsn`, passed along by the application), for a read that must
    /// follow that client's write.
    pub fn read_after(
        &mut self,
        proc_id: u16,
        args: &[u8],
        min_lsn: u64,
    ) -> Result<Outcome, CallError> {
        if args.len() > ARGS_LEN_MAX {
            return Err(CallError::ArgsTooLarge { len: args.len() });
        }
        assert!(
            self.begun.is_none(),
            "a read follows the last send's receive"
        );
        self.blocking();
        self.pending = None;
        self.seq_last += 1;
        let seq = self.seq_last;
        let mut frame = Vec::with_capacity(args.len() + 28);
        let lsn_seen = self.router.lsn_seen();
        let consistency = self.config.read_consistency;
        encode_read(
            &mut frame,
            seq,
            proc_id,
            lsn_seen.max(min_lsn),
            consistency,
            args,
        );
        if let Some(outcome) = self.read_at_backup(seq, &frame) {
            let stats = self.router.stats_mut();
            stats.calls += 1;
            stats.reads_at_backups += 1;
            return Ok(outcome);
        }
        self.router.stats_mut().reads_redirected += 1;
        self.run(Pending { seq, frame })
    }

    /// One attempt at a backup; `None` if none answered with a reply.
    fn read_at_backup(&mut self, seq: u64, frame: &[u8]) -> Option<Outcome> {
        if self.reader.is_none() {
            self.reader = self.find_backup();
        }
        let conn = self.reader.as_mut()?;
        let until = Instant::now() + self.config.attempt_timeout;
        let stats = self.router.stats_mut();
        stats.attempts += 1;
        match conn.attempt(frame, seq, until, &mut stats.stale_replies) {
            Ok(Answer::Reply { lsn, status, body }) => {
                self.router.see_lsn(lsn);
                Some(Outcome {
                    seq,
                    lsn,
                    status,
                    body,
                    node: conn.node,
                    view: conn.view,
                    attempts: 1,
                })
            }
            // Behind for now: the connection stays for the next read.
            Ok(Answer::Error(ErrorFrame {
                code: ErrorCode::Busy,
                ..
            })) => None,
            Ok(Answer::Error(_)) | Err(_) => {
                let conn = self.reader.take().expect("attempted on it");
                self.read_from = (conn.index + 1) % self.config.nodes.len();
                None
            }
        }
    }

    /// One round of the nodes, from `read_from`, for one that welcomes this client as a
    /// backup; the primary's node is skipped when it is known.
    fn find_backup(&mut self) -> Option<Conn> {
        let count = self.config.nodes.len();
        let primary = self.router.primary().map(|route| route.index);
        for k in 0..count {
            let index = (self.read_from + k) % count;
            if Some(index) == primary {
                continue;
            }
            let until = Instant::now() + self.config.attempt_timeout;
            self.router.stats_mut().connects += 1;
            if let Ok(Greeting::Backup(conn)) = Conn::open(
                self.config.nodes[index],
                index,
                &self.hello,
                &self.greeter,
                until,
            ) {
                self.router.see_view(conn.view);
                self.read_from = index;
                return Some(conn);
            }
        }
        None
    }

    /// Resends the call that last ended in [`CallError::Deadline`], with its seq and a fresh
    /// deadline: the primary runs it if it never did, or returns its stored reply. `None` when
    /// no call is pending (the last one ended otherwise, or a later call gave it up).
    pub fn resume(&mut self) -> Option<Result<Outcome, CallError>> {
        let pending = self.pending.take()?;
        self.blocking();
        Some(self.run(pending))
    }

    /// Makes the next search for a backup to read from start at node `index` of
    /// [`ClientConfig::nodes`] (modulo their count), so that clients given different indexes
    /// spread their reads over the backups. The primary's node is skipped as always.
    pub fn prefer_backup(&mut self, index: usize) {
        self.read_from = index % self.config.nodes.len();
    }

    /// The seq of the call [`resume`](Self::resume) would resend.
    pub fn pending_seq(&self) -> Option<u64> {
        self.pending.as_ref().map(|pending| pending.seq)
    }

    /// The primary the stub is connected to, and its view; `None` before the first call and
    /// after the connection failed (the next call looks again).
    pub fn primary(&self) -> Option<(NodeId, u64)> {
        self.router.primary().map(|route| (route.node, route.view))
    }

    /// The highest commit LSN any reply has carried: a read that must see this client's
    /// writes needs a node that has applied at least this far.
    pub fn lsn_seen(&self) -> u64 {
        self.router.lsn_seen()
    }

    pub fn stats(&self) -> &ClientStats {
        self.router.stats()
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    /// Takes a new list of the group's nodes (say, from [`discover`] after a view change),
    /// checked as [`ClientConfig::nodes`] is: not empty, each node once. The client keeps
    /// its seq, the call [`resume`](Self::resume) would resend, and its connection to the
    /// primary and to a backup when their addresses are still listed; the next search for
    /// either starts over the new list.
    pub fn set_nodes(&mut self, nodes: Vec<SocketAddr>) -> Result<(), ConfigError> {
        config::validate_nodes(&nodes)?;
        let names = nodes.iter().map(ToString::to_string).collect();
        match (self.router.set_nodes(names), self.conn.as_mut()) {
            (Some(index), Some(conn)) => conn.index = index,
            (Some(_), None) => unreachable!("the router has a primary only while connected"),
            (None, _) => {
                self.conn = None;
                self.nonblocking = false;
            }
        }
        let moved = |index: usize| {
            nodes
                .iter()
                .position(|node| *node == self.config.nodes[index])
        };
        if let Some(reader) = self.reader.as_mut() {
            match moved(reader.index) {
                Some(index) => reader.index = index,
                None => self.reader = None,
            }
        }
        self.read_from = moved(self.read_from % self.config.nodes.len()).unwrap_or(0);
        self.config.nodes = nodes;
        Ok(())
    }

    /// Carries out the router's actions for `pending` until it says the call is over.
    fn run(&mut self, pending: Pending) -> Result<Outcome, CallError> {
        let origin = Instant::now();
        let call = self.router.begin(pending.seq, origin.elapsed());
        self.drive(pending, call, origin)
    }

    /// Reports `answered` for `call` to the router, and drops the connection when the
    /// router dropped its primary.
    fn answered(&mut self, call: &mut route::CallRoute, answered: Answered, now: Duration) {
        self.router.answered(call, answered, now);
        if self.router.primary().is_none() {
            self.conn = None;
            self.nonblocking = false;
        }
    }

    /// An attempt's result as the router takes it.
    fn answer_of(result: Result<Answer, Failure>, call: &route::CallRoute) -> Answered {
        match result {
            Ok(Answer::Reply { lsn, status, body }) => Answered::Reply {
                seq: call.seq(),
                lsn,
                status,
                body,
            },
            Ok(Answer::Error(error)) => Answered::Error(error),
            Err(Failure::Timeout) => Answered::Timeout,
            Err(failure) => Answered::Failed(failure.to_string()),
        }
    }

    /// Carries out the router's actions for `call`, begun at `origin`, until it says the call
    /// is over.
    fn drive(
        &mut self,
        pending: Pending,
        mut call: route::CallRoute,
        origin: Instant,
    ) -> Result<Outcome, CallError> {
        loop {
            match self.router.next(&mut call, origin.elapsed()) {
                Action::Connect { index, until } => {
                    let addr = self.config.nodes[index];
                    let opened =
                        Conn::open(addr, index, &self.hello, &self.greeter, origin + until);
                    let greeted = match opened {
                        Ok(Greeting::Primary(conn)) => {
                            let (node, view) = (conn.node, conn.view);
                            self.conn = Some(conn);
                            Greeted::Welcome {
                                primary: true,
                                node,
                                view,
                            }
                        }
                        Ok(Greeting::Backup(conn)) => Greeted::Welcome {
                            primary: false,
                            node: conn.node,
                            view: conn.view,
                        },
                        Ok(Greeting::Refused(error)) => Greeted::Refused(error),
                        Err(failure) => Greeted::Failed(failure.to_string()),
                    };
                    self.router.greeted(&mut call, index, greeted);
                    if self.router.primary().is_none() {
                        // Not the primary after all (a deposed one): the connection goes.
                        self.conn = None;
                    }
                }
                Action::Send { until } => {
                    let conn = self
                        .conn
                        .as_mut()
                        .expect("the router sends only to the primary it greeted");
                    let stale = &mut self.router.stats_mut().stale_replies;
                    let result = conn.attempt(&pending.frame, call.seq(), origin + until, stale);
                    let answered = Self::answer_of(result, &call);
                    self.answered(&mut call, answered, origin.elapsed());
                }
                Action::Sleep { until } => {
                    thread::sleep(until.saturating_sub(origin.elapsed()));
                }
                Action::Done(result) => {
                    if let Err(CallError::Deadline { .. }) = &result {
                        self.pending = Some(pending);
                    }
                    return result;
                }
            }
        }
    }
}
