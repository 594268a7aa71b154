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
//! reads"). The `Read` frame carries `min_lsn` = [`Client::lsn_seen`], the highest LSN any
//! reply has carried to this client, so the answer reflects every commit this client saw
//! acknowledged (its own writes, and what its earlier reads saw): read-your-writes and
//! monotonic reads on any node. A backup shows only state the primary has released, so a
//! read never sees a record a view change could discard. It gets one attempt on a backup; if
//! the backup is behind (`Busy`), not a backup any more, or silent, the read goes to the
//! primary like a call, which answers it under its lease. A read never fails for a reason a
//! call would not.
//!
//! The stub may use the clock, threads' sleep and sockets; it has its own `clippy.toml`.

#![forbid(unsafe_code)]

mod config;
mod conn;

use std::cmp;
use std::thread;
use std::time::{Duration, Instant};

pub use config::{
    ATTEMPT_TIMEOUT_DEFAULT, ClientConfig, ConfigError, DEADLINE_DEFAULT, DURATION_MAX,
    RETRY_BACKOFF_DEFAULT,
};
pub use tandem_replication::{NodeId, Safety, SafetyError};
pub use tandem_wire::{ErrorCode, ReplyStatus};

use conn::{Answer, Conn, Failure, Greeting};
use tandem_wire::{ErrorFrame, Hello, PeerKind, encode_call, encode_hello, encode_read};

/// The largest `args` a call may carry: the `Call` frame must fit the default frame limit
/// (type byte and 23-byte header included).
pub const ARGS_LEN_MAX: usize = conn::MAX_FRAME_LEN - 1 - 23;

/// The factor by which pauses may grow over [`ClientConfig::retry_backoff`]: a round of
/// connects on loopback costs little next to a failover finished and not seen for 8 ms.
const BACKOFF_GROWTH_MAX: u32 = 4;

/// The largest number of doublings of the attempt timeout within one call.
const ATTEMPT_DOUBLINGS_MAX: u32 = 16;

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
    /// Whether the procedure committed (else it rolled back and `body` is its reason).
    pub fn committed(&self) -> bool {
        self.status == ReplyStatus::Committed
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
#[derive(Debug)]
pub struct Client {
    config: ClientConfig,
    /// The encoded `Hello` frame every connection starts with.
    hello: Vec<u8>,
    conn: Option<Conn>,
    /// The connection to a backup, for reads.
    reader: Option<Conn>,
    /// The index in `config.nodes` where the next search for a backup starts.
    read_from: usize,
    /// The index in `config.nodes` where the next search for the primary starts.
    route_from: usize,
    seq_last: u64,
    pending: Option<Pending>,
    lsn_seen: u64,
    /// The highest view any node reported: a primary in an older view is deposed.
    view_seen: u64,
    primaries_connected: u64,
    reply_node_last: Option<NodeId>,
    stats: ClientStats,
}

/// What one call carries through its attempts.
struct Progress {
    seq: u64,
    deadline: Instant,
    attempts: u32,
    last_error: String,
    /// The next pause after a failure, and how long pauses may grow.
    pause: Duration,
    pause_max: Duration,
}

impl Client {
    /// Checks `config`; connects lazily, on the first call.
    pub fn new(config: ClientConfig) -> Result<Client, ConfigError> {
        config.validate()?;
        let mut hello = Vec::new();
        encode_hello(
            &mut hello,
            &Hello::new(PeerKind::Client, config.client_id, config.group),
        );
        Ok(Client {
            config,
            hello,
            conn: None,
            reader: None,
            read_from: 1,
            route_from: 0,
            seq_last: 0,
            pending: None,
            lsn_seen: 0,
            view_seen: 0,
            primaries_connected: 0,
            reply_node_last: None,
            stats: ClientStats::default(),
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
        self.run(Pending { seq, frame })
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
        self.pending = None;
        self.seq_last += 1;
        let seq = self.seq_last;
        let mut frame = Vec::with_capacity(args.len() + 28);
        encode_read(&mut frame, seq, proc_id, self.lsn_seen.max(min_lsn), args);
        if let Some(outcome) = self.read_at_backup(seq, &frame) {
            self.stats.calls += 1;
            self.stats.reads_at_backups += 1;
            return Ok(outcome);
        }
        self.stats.reads_redirected += 1;
        self.run(Pending { seq, frame })
    }

    /// One attempt at a backup; `None` if none answered with a reply.
    fn read_at_backup(&mut self, seq: u64, frame: &[u8]) -> Option<Outcome> {
        if self.reader.is_none() {
            self.reader = self.find_backup();
        }
        let conn = self.reader.as_mut()?;
        let until = Instant::now() + self.config.attempt_timeout;
        self.stats.attempts += 1;
        match conn.attempt(frame, seq, until, &mut self.stats.stale_replies) {
            Ok(Answer::Reply { lsn, status, body }) => {
                self.lsn_seen = self.lsn_seen.max(lsn);
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
        let primary = self.conn.as_ref().map(|conn| conn.index);
        for k in 0..count {
            let index = (self.read_from + k) % count;
            if Some(index) == primary {
                continue;
            }
            let until = Instant::now() + self.config.attempt_timeout;
            self.stats.connects += 1;
            if let Ok(Greeting::Backup(conn)) =
                Conn::open(self.config.nodes[index], index, &self.hello, until)
            {
                self.view_seen = self.view_seen.max(conn.view);
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
        Some(self.run(pending))
    }

    /// The seq of the call [`resume`](Self::resume) would resend.
    pub fn pending_seq(&self) -> Option<u64> {
        self.pending.as_ref().map(|pending| pending.seq)
    }

    /// The primary the stub is connected to, and its view; `None` before the first call and
    /// after the connection failed (the next call looks again).
    pub fn primary(&self) -> Option<(NodeId, u64)> {
        self.conn.as_ref().map(|conn| (conn.node, conn.view))
    }

    /// The highest commit LSN any reply has carried: a read that must see this client's
    /// writes needs a node that has applied at least this far.
    pub fn lsn_seen(&self) -> u64 {
        self.lsn_seen
    }

    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    pub fn config(&self) -> &ClientConfig {
        &self.config
    }

    fn run(&mut self, pending: Pending) -> Result<Outcome, CallError> {
        self.stats.calls += 1;
        let mut progress = Progress {
            seq: pending.seq,
            deadline: Instant::now() + self.config.deadline,
            attempts: 0,
            last_error: String::from("no node was reached"),
            pause: self.config.retry_backoff,
            pause_max: self.backoff_max(),
        };
        let result = self.attempts(&pending.frame, &mut progress);
        match &result {
            Ok(outcome) => {
                assert_eq!(outcome.seq, pending.seq);
                assert!(outcome.attempts >= 1);
            }
            Err(CallError::Deadline { .. }) => {
                self.stats.deadlines += 1;
                self.pending = Some(pending);
            }
            Err(CallError::Refused { .. }) => self.stats.refused += 1,
            Err(_) => unreachable!("argument errors are returned before the call runs"),
        }
        result
    }

    /// Sends the call until it gets a definite answer or its deadline passes.
    fn attempts(&mut self, frame: &[u8], progress: &mut Progress) -> Result<Outcome, CallError> {
        let mut timeouts: u32 = 0;
        loop {
            if Instant::now() >= progress.deadline {
                return Err(progress.deadline_error());
            }
            if self.conn.is_none() && !self.find_primary(progress) {
                return Err(progress.deadline_error());
            }
            let Some(conn) = self.conn.as_mut() else {
                unreachable!("find_primary connected");
            };
            let now = Instant::now();
            let wait = self
                .config
                .attempt_timeout
                .saturating_mul(1 << timeouts.min(ATTEMPT_DOUBLINGS_MAX));
            let until = cmp::min(
                now.checked_add(wait).unwrap_or(progress.deadline),
                progress.deadline,
            );
            progress.attempts = progress.attempts.saturating_add(1);
            self.stats.attempts += 1;
            let (node, view) = (conn.node, conn.view);
            let answer = conn.attempt(frame, progress.seq, until, &mut self.stats.stale_replies);
            match answer {
                Ok(Answer::Reply { lsn, status, body }) => {
                    if status == ReplyStatus::Committed {
                        self.lsn_seen = self.lsn_seen.max(lsn);
                    }
                    if self.reply_node_last.is_some_and(|last| last != node) {
                        self.stats.failovers += 1;
                    }
                    self.reply_node_last = Some(node);
                    return Ok(Outcome {
                        seq: progress.seq,
                        lsn,
                        status,
                        body,
                        node,
                        view,
                        attempts: progress.attempts,
                    });
                }
                Ok(Answer::Error(ErrorFrame { code, message })) => match code {
                    ErrorCode::UnknownProcedure | ErrorCode::BadArgs => {
                        return Err(CallError::Refused { code, message });
                    }
                    ErrorCode::NotPrimary | ErrorCode::StaleView => {
                        self.stats.not_primary += 1;
                        progress.last_error = self.node_said(code, &message);
                        self.drop_conn();
                    }
                    ErrorCode::Busy => {
                        self.stats.busy += 1;
                        progress.last_error = self.node_said(code, &message);
                        progress.pause();
                    }
                    // The node closes the connection after these (BadFrame, Internal,
                    // UnsupportedVersion, and codes newer than this build).
                    _ => {
                        progress.last_error = self.node_said(code, &message);
                        self.drop_conn();
                        progress.pause();
                    }
                },
                Err(failure) => {
                    progress.last_error = self.conn_failed(&failure);
                    self.drop_conn();
                    if let Failure::Timeout = failure {
                        // The attempt already waited: look elsewhere at once.
                        self.stats.timeouts += 1;
                        timeouts += 1;
                    } else {
                        progress.pause();
                    }
                }
            }
        }
    }

    /// Goes round the nodes until one welcomes this client as primary (true) or the deadline
    /// passes (false).
    fn find_primary(&mut self, progress: &mut Progress) -> bool {
        let count = self.config.nodes.len();
        let mut pause = self.config.retry_backoff;
        loop {
            for k in 0..count {
                let index = (self.route_from + k) % count;
                let addr = self.config.nodes[index];
                let now = Instant::now();
                if now >= progress.deadline {
                    return false;
                }
                let until = now
                    .checked_add(self.config.attempt_timeout)
                    .map_or(progress.deadline, |until| until.min(progress.deadline));
                self.stats.connects += 1;
                match Conn::open(addr, index, &self.hello, until) {
                    Ok(Greeting::Primary(conn)) if conn.view < self.view_seen => {
                        self.stats.not_primary += 1;
                        progress.last_error = format!(
                            "node {} at {addr} says it is primary in view {}, but view {} was \
                             seen: it was deposed",
                            conn.node, conn.view, self.view_seen
                        );
                    }
                    Ok(Greeting::Primary(conn)) => {
                        self.view_seen = conn.view;
                        if self.primaries_connected > 0 {
                            self.stats.reconnects += 1;
                        }
                        self.primaries_connected += 1;
                        self.route_from = index;
                        self.conn = Some(conn);
                        return true;
                    }
                    Ok(Greeting::Backup(conn)) => {
                        self.stats.not_primary += 1;
                        self.view_seen = self.view_seen.max(conn.view);
                        progress.last_error = format!(
                            "node {} at {addr} is a backup in view {}",
                            conn.node, conn.view
                        );
                    }
                    Ok(Greeting::Refused(ErrorFrame { code, message })) => {
                        if matches!(code, ErrorCode::NotPrimary | ErrorCode::StaleView) {
                            self.stats.not_primary += 1;
                        }
                        progress.last_error =
                            format!("{addr} refused the Hello ({code:?}): {message}");
                    }
                    Err(failure) => progress.last_error = format!("{addr}: {failure}"),
                }
            }
            let left = progress.deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            thread::sleep(pause.min(left));
            pause = cmp::min(pause.saturating_mul(2), self.backoff_max());
        }
    }

    /// Forgets the connection; the next search for a primary starts after its node.
    fn drop_conn(&mut self) {
        let conn = self.conn.take().expect("a connection to drop");
        self.route_from = (conn.index + 1) % self.config.nodes.len();
    }

    fn backoff_max(&self) -> Duration {
        self.config.retry_backoff.saturating_mul(BACKOFF_GROWTH_MAX)
    }

    fn node_said(&self, code: ErrorCode, message: &str) -> String {
        let conn = self.conn.as_ref().expect("an answer came on a connection");
        format!("node {} answered {code:?}: {message}", conn.node)
    }

    fn conn_failed(&self, failure: &Failure) -> String {
        let conn = self.conn.as_ref().expect("a failure on a connection");
        let addr = self.config.nodes[conn.index];
        format!("node {} at {addr}: {failure}", conn.node)
    }
}

impl Progress {
    fn deadline_error(&self) -> CallError {
        CallError::Deadline {
            seq: self.seq,
            attempts: self.attempts,
            last_error: self.last_error.clone(),
        }
    }

    /// Sleeps the current pause, cut short at the deadline, and doubles it for the next one.
    fn pause(&mut self) {
        let left = self.deadline.saturating_duration_since(Instant::now());
        thread::sleep(self.pause.min(left));
        self.pause = cmp::min(self.pause.saturating_mul(2), self.pause_max);
    }
}
