//! One application connection, sans-I/O: RESP bytes in, calls for the stub out, replies in
//! request order back.
//!
//! The proxy runs each connection's [`Session`] itself (the node's RESP port runs the same
//! one), so `MULTI` queues, `WATCH`, `HELLO 3`, client names and refusals behave as on a node;
//! what reaches the cluster is the session's calls. [`ProxyConn::next_unit`] handles the
//! requests that arrived and groups the calls they make into a round of [`Unit`]s, the next
//! things the stubs send; [`ProxyConn::finish`] takes how each ended, and once every unit of
//! the round has, the round's replies are written in request order. A round holds at most
//! one unit per group, each one stub call of that group's stub: exactly once, by its
//! (client id, seq). Rounds run one after another, so a connection's commands of one group
//! run in the order they were sent.
//!
//! **Pipelines.** Consecutive data commands become a round, a unit per group (one, over a
//! cluster of one group) that the proxy sends together: commands of different groups run side
//! by side, as a Redis Cluster client's pipeline does, and each group's in order. A unit of
//! several commands is, for reads only, a
//! [`PROC_READS`] call (one read of the history, on the primary or, after `READONLY`, on a
//! backup); with a write among them, a [`PROC_EXEC`] call without watched keys (one txn, one
//! dedup entry: its reply array is what a retry after a failover gets back). Running them as
//! one is a valid order of a pipeline (no other client's command comes between them), and a
//! command that refuses still answers its own error in place, as in Redis. A unit the cluster
//! rolls back whole (out of memory, a script that failed after writing) ran nothing, so its
//! commands are sent again one at a time, each getting its own answer, before the round's
//! replies are written. A `MULTI` block's `EXEC`, a `WATCH`, a blocking command and a command
//! every group runs are rounds of their own.
//!
//! **Replies not kept.** The cluster keeps each client's last reply for a retry in a small
//! heap; a reply too long for it is still sent, but a retry of that unit (after a failover
//! or a timeout) is told only that it committed once ([`Answer::ReplyNotKept`]): each of its
//! commands gets that error, and nothing runs again.
//!
//! **Reads on backups.** After `READONLY` (what Redis Cluster clients send before reading
//! from replicas) units of reads only go to a backup ([`Target::Backup`]), linearizable by
//! default; `READWRITE` sends them to the primary again.

use std::collections::VecDeque;
use std::sync::Arc;

use tandem_client::ReplyStatus;
use tandem_redis::cmd::blocking::would_block;
use tandem_redis::model::{PROC_EXEC, PROC_READS};
use tandem_redis::resp::{Argv, Parsed, Proto, ReplyWriter, RequestLimits, parse_request};
use tandem_redis::session::{Call, Outcome, Purpose, ServerInfo, Session, Step};
use tandem_redis::wire::{CallArgs, ExecArgs};
use tandem_store::{ProcId, ProcKind};

use crate::route::{Route, SlotGroups, route_of};

/// Most commands one pipelined unit carries.
pub const UNIT_COMMANDS_MAX: usize = 256;
/// Most argument bytes one pipelined unit carries (a lone command may carry more, up to what
/// a call frame holds).
pub const UNIT_ARGS_MAX: usize = 1 << 20;

/// Where a unit goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// The primary, as a call: exactly once by (client id, seq).
    Primary,
    /// A backup, as a read (the stub falls back to the primary).
    Backup,
}

/// The next call a stub makes for a connection.
#[derive(Debug)]
pub struct Unit {
    pub proc_id: ProcId,
    pub kind: ProcKind,
    pub args: Vec<u8>,
    pub target: Target,
    /// The group (or groups) it goes to.
    pub route: Route,
    /// The calls it carries: their places in the round, in order.
    calls: Vec<usize>,
    /// Whether it carries several commands (its reply is an array to split).
    batched: bool,
}

impl Unit {
    /// Whether it is a pipeline of several commands: rolled back whole, its commands are sent
    /// again one at a time (a lone command, a `MULTI` block or a `WATCH` is answered as is).
    pub fn batched(&self) -> bool {
        self.batched
    }

    /// The data commands it carries.
    pub fn commands(&self) -> usize {
        self.calls.len()
    }
}

/// How a unit ended.
#[derive(Clone, Copy, Debug)]
pub enum Answer<'a> {
    /// The cluster committed or read it: the reply, in RESP.
    Reply(&'a [u8]),
    /// The cluster rolled it back (a refused command: its error text, code first). Nothing
    /// of it ran.
    RolledBack(&'a str),
    /// The unit committed once, before a failover or a timeout, and its reply was too long
    /// for the cluster to keep for the stub's retry: the text every command is told. It is
    /// never sent again.
    ReplyNotKept(&'a str),
    /// The proxy could not get an answer (the stub's deadline) or the cluster refused the
    /// call: the error every command of the unit is told, code first.
    Failed(&'a str),
}

/// A reply in request order.
#[derive(Debug)]
enum Item {
    /// The session answered it at once.
    Written(Vec<u8>),
    /// A call's outcome answers it, made where its route says.
    Call(Call, Route),
}

/// The requests whose calls are out, in request order, each call's outcome as its unit
/// ended.
#[derive(Debug)]
struct Round {
    items: Vec<Item>,
    /// Each item's outcome once its unit ended (`None` for a written reply).
    outcomes: Vec<Option<Ended>>,
    /// Units out and not finished.
    open: usize,
    /// Calls of pipelines the cluster rolled back whole, to send again one at a time, in
    /// request order.
    again: VecDeque<usize>,
}

/// How one call of a round ended.
#[derive(Debug)]
enum Ended {
    Reply(Vec<u8>),
    Failed(String),
}

/// One application connection's state.
#[derive(Debug)]
pub struct ProxyConn {
    session: Session,
    /// `READONLY` was sent: units of reads only go to a backup.
    readonly: bool,
    /// Unparsed bytes are `input[start..]`; the parser needs `want` of them to get further.
    input: Vec<u8>,
    start: usize,
    want: usize,
    limits: RequestLimits,
    argv: Argv,
    /// Handled requests not yet sent, in order.
    items: VecDeque<Item>,
    /// The requests whose calls are out: nothing more is handled until it ends.
    round: Option<Round>,
    /// Replies ready to send to the application.
    out: Vec<u8>,
    /// Nothing more is read: close once `out` is sent (QUIT, a protocol error).
    closing: bool,
    /// A blocking command's call that found nothing to pop: the connection waits, handling
    /// nothing more, until the proxy tries it again or its time is up.
    parked: Option<Call>,
    /// Which group serves each slot, over a cluster of several groups (`None`: one group
    /// runs every call).
    slots: Option<Arc<SlotGroups>>,
}

impl ProxyConn {
    /// A connection whose session answers `CLIENT ID` with `id`.
    pub fn new(id: u64) -> ProxyConn {
        ProxyConn {
            session: Session::new(id),
            readonly: false,
            input: Vec::new(),
            start: 0,
            want: 1,
            limits: RequestLimits::default(),
            argv: Argv::new(),
            items: VecDeque::new(),
            round: None,
            out: Vec::new(),
            closing: false,
            parked: None,
            slots: None,
        }
    }

    /// Routes the calls handled from now on by `slots` (`None`: the cluster has one group).
    pub fn route_by(&mut self, slots: Option<Arc<SlotGroups>>) {
        self.slots = slots;
    }

    fn route(&self, call: &Call) -> Route {
        match &self.slots {
            None => Route::Only,
            Some(slots) => route_of(call, slots),
        }
    }

    /// How long the connection waits in a blocking command that found nothing (in
    /// milliseconds from when it first found nothing; 0 for as long as it takes), if it does:
    /// the proxy then tries it again a little later ([`try_again`](Self::try_again)), or,
    /// once the time is up, ends it ([`time_up`](Self::time_up)).
    pub fn waiting_ms(&self) -> Option<u64> {
        match &self.parked {
            Some(Call {
                purpose: Purpose::Block(blocking),
                ..
            }) => Some(blocking.timeout_ms),
            Some(_) => unreachable!("only a blocking call waits"),
            None => None,
        }
    }

    /// The waiting call becomes the next unit, awakened: a write may have served it.
    pub fn try_again(&mut self) {
        let call = self.parked.take().expect("a waiting call");
        let route = self.route(&call);
        self.items.push_front(Item::Call(call, route));
    }

    /// The waiting call's time is up: it answers as Redis answers then (a null).
    pub fn time_up(&mut self) {
        let call = self.parked.take().expect("a waiting call");
        let Purpose::Block(blocking) = &call.purpose else {
            unreachable!("only a blocking call waits");
        };
        let reply = blocking.timeout_reply.clone();
        self.session
            .called(call, Outcome::Reply(&reply), &mut self.out, None);
        self.flush_written();
    }

    /// Bytes the application sent.
    pub fn feed(&mut self, bytes: &[u8]) {
        if self.closing {
            return;
        }
        if self.start > 0 && self.start == self.input.len() {
            self.input.clear();
            self.start = 0;
        }
        self.input.extend_from_slice(bytes);
    }

    /// Handles what arrived and returns the next round's units to send together, at most one
    /// per group (none: nothing to send until more arrives); replies that need no call are
    /// moved to [`out`](Self::out) as they come due. Every unit of a round is
    /// [`finish`](Self::finish)ed before the next call; a round whose pipelines were rolled
    /// back whole gives their commands again, one per group at a time, before it ends.
    pub fn next_units(&mut self, info: &ServerInfo) -> Vec<Unit> {
        if let Some(round) = &mut self.round {
            assert_eq!(round.open, 0, "every unit of the round is finished first");
            let units = self.again_units();
            assert!(!units.is_empty(), "an open round has calls to send again");
            return units;
        }
        loop {
            self.handle_requests(info);
            let refused = self.flush_written();
            let units = self.take_round();
            // A refused call that held later requests back lets them be handled now.
            if !units.is_empty() || !refused {
                return units;
            }
        }
    }

    /// [`next_units`](Self::next_units) for a cluster of one group, whose rounds hold one
    /// unit.
    pub fn next_unit(&mut self, info: &ServerInfo) -> Option<Unit> {
        let mut units = self.next_units(info).into_iter();
        let unit = units.next();
        assert!(units.next().is_none(), "a round over one group is one unit");
        unit
    }

    /// Takes how `unit` ended; once every unit of its round has, writes the round's replies.
    pub fn finish(&mut self, unit: Unit, answer: Answer<'_>) {
        let round = self.round.as_mut().expect("finish follows next_units");
        assert!(round.open > 0, "a unit of the round is out");
        round.open -= 1;
        if !unit.batched {
            let [at] = unit.calls[..] else {
                unreachable!("a unit of one command carries one call");
            };
            if let Answer::RolledBack(text) = answer
                && let Some(after) = would_block(text)
                && let Item::Call(call, _) = &round.items[at]
                && matches!(call.purpose, Purpose::Block(_))
            {
                self.park(&after);
                return;
            }
            round.outcomes[at] = Some(match answer {
                Answer::Reply(body) => Ended::Reply(body.to_vec()),
                Answer::RolledBack(text) | Answer::ReplyNotKept(text) | Answer::Failed(text) => {
                    Ended::Failed(with_code(text))
                }
            });
        } else {
            match answer {
                Answer::Reply(body) => match split_array(body, unit.calls.len()) {
                    Some(elements) => {
                        for (&at, element) in unit.calls.iter().zip(elements) {
                            round.outcomes[at] = Some(Ended::Reply(element.to_vec()));
                        }
                    }
                    None => round.fail(
                        &unit.calls,
                        "ERR tandem proxy: the cluster answered a pipeline with a malformed reply",
                    ),
                },
                // Nothing ran: each command goes again alone and gets its own answer.
                Answer::RolledBack(_) => round.send_again(&unit.calls),
                Answer::Failed(_) if retries_unanswered() => round.send_again(&unit.calls),
                Answer::ReplyNotKept(text) => round.fail(&unit.calls, &with_code(text)),
                Answer::Failed(text) => round.fail(&unit.calls, text),
            }
        }
        if round.open == 0 && round.again.is_empty() {
            self.end_round();
        }
    }

    /// Writes the replies of the round, every call of which has ended.
    fn end_round(&mut self) {
        let round = self.round.take().expect("a round to end");
        for (item, ended) in round.items.into_iter().zip(round.outcomes) {
            match (item, ended) {
                (Item::Written(reply), None) => self.out.extend_from_slice(&reply),
                (Item::Call(call, _), Some(ended)) => {
                    let outcome = match &ended {
                        Ended::Reply(body) => Outcome::Reply(body),
                        Ended::Failed(text) => Outcome::Failed(text),
                    };
                    self.session.called(call, outcome, &mut self.out, None);
                }
                (item, ended) => unreachable!("{item:?} ended as {ended:?}"),
            }
        }
        self.flush_written();
    }

    /// The round's lone blocking call found nothing: it waits, tried again reading after
    /// `after` if its try named IDs (a stream read's `$` resolved).
    fn park(&mut self, after: &[&str]) {
        let round = self.round.take().expect("the blocking call's round");
        let mut items = round.items.into_iter();
        let (Some(Item::Call(mut call, _)), None) = (items.next(), items.next()) else {
            unreachable!("a blocking call is a round of its own");
        };
        if !after.is_empty() {
            assert!(
                CallArgs::replace_last(&mut call.args, after),
                "a stream read's call names as many IDs as its try resolved"
            );
        }
        CallArgs::set_awakened(&mut call.args);
        self.parked = Some(call);
    }

    /// Writes the replies of `unit` as the cluster answered it: the call's `status` and its
    /// `body` (a reply, or a reason). The one place that reads a status, for the proxy and
    /// for the simulator's proxied clients alike.
    pub fn finish_answered(&mut self, unit: Unit, status: ReplyStatus, body: &[u8]) {
        let text = || String::from_utf8_lossy(body);
        match status {
            ReplyStatus::Committed => self.finish(unit, Answer::Reply(body)),
            ReplyStatus::CommittedReplyNotKept => {
                self.finish(unit, Answer::ReplyNotKept(&text()));
            }
            ReplyStatus::RolledBack => self.finish(unit, Answer::RolledBack(&text())),
        }
    }

    /// Bytes the application sent that are not handled yet.
    pub fn buffered(&self) -> usize {
        self.input.len() - self.start
    }

    /// Replies ready for the application; the caller sends them and clears the buffer.
    pub fn out(&mut self) -> &mut Vec<u8> {
        &mut self.out
    }

    /// Whether the connection is done: nothing more will be read, every reply is out.
    pub fn done(&self) -> bool {
        self.closing
            && self.items.is_empty()
            && self.round.is_none()
            && self.parked.is_none()
            && self.out.is_empty()
    }

    /// Whether more input could make a unit or a reply (false while a call holds later
    /// requests back, or once closing).
    pub fn wants_input(&self) -> bool {
        !self.closing && !self.holding()
    }

    /// The protocol the application speaks (for a reply the proxy writes itself).
    pub fn proto(&self) -> Proto {
        self.session.proto()
    }

    /// A handled call whose outcome decides how later requests are handled (WATCH, an EXEC
    /// with connection commands) holds the rest back until it is sent and finished (requests
    /// are handled only in `next_units`, and only once the last round ended).
    fn holding(&self) -> bool {
        self.parked.is_some()
            || self
                .items
                .iter()
                .any(|item| matches!(item, Item::Call(call, _) if call.holds_later()))
    }

    /// Parses and handles whole requests while the connection may take more.
    fn handle_requests(&mut self, info: &ServerInfo) {
        while self.wants_input() && self.calls_waiting() < UNIT_COMMANDS_MAX {
            let buffered = self.input.len() - self.start;
            if buffered < self.want {
                return;
            }
            self.limits.unauthenticated = self.session.awaits_auth(info);
            match parse_request(&self.input[self.start..], &self.limits, &mut self.argv) {
                Ok(Parsed::Incomplete { at_least }) => {
                    self.want = at_least;
                    return;
                }
                Ok(Parsed::Skip { consumed }) => {
                    self.start += consumed;
                    self.want = 1;
                }
                Ok(Parsed::Command { consumed }) => {
                    self.start += consumed;
                    self.want = 1;
                    self.handle_one(info);
                }
                Err(error) => {
                    let mut reply = Vec::new();
                    ReplyWriter::new(&mut reply, self.session.proto()).protocol_error(&error);
                    self.items.push_back(Item::Written(reply));
                    self.closing = true;
                }
            }
        }
    }

    fn handle_one(&mut self, info: &ServerInfo) {
        let name = self.argv.get(0).unwrap_or_default();
        // The session answers `+OK`; the proxy remembers where reads should go (a `MULTI`
        // block always runs on the primary, whatever it queued).
        if name.eq_ignore_ascii_case(b"READONLY") && self.argv.len() == 1 {
            self.readonly = true;
        } else if name.eq_ignore_ascii_case(b"READWRITE") && self.argv.len() == 1 {
            self.readonly = false;
        }
        let mut reply = Vec::new();
        match self.session.handle(&self.argv, info, &mut reply) {
            Step::Replied => self.items.push_back(Item::Written(reply)),
            Step::Close => {
                self.items.push_back(Item::Written(reply));
                self.closing = true;
            }
            Step::CrossProtocol => {
                // Nothing after the line is read or run; the replies already owed still go.
                warn_cross_protocol();
                self.closing = true;
            }
            // The proxy's sessions see no script run (`ServerInfo::script` stays idle): a
            // `SCRIPT KILL` goes to the primary as a call.
            Step::Call(call) | Step::KillScript(call) => {
                debug_assert!(reply.is_empty(), "a call's reply comes with its outcome");
                // Nothing is read after `SYNC`: its file ends the connection.
                self.closing |= call.closes_connection();
                let route = self.route(&call);
                self.items.push_back(Item::Call(call, route));
            }
            // Each connection waits on its own thread here; no other connection's wait is
            // seen from this one, so none is ended (documented in the README).
            Step::Unblock(_) => {
                if !self.session.reply_silenced() {
                    ReplyWriter::new(&mut reply, self.session.proto()).integer(0);
                }
                self.items.push_back(Item::Written(reply));
            }
            // The proxy stops no node: a node's own RESP port takes `SHUTDOWN`.
            Step::Shutdown { .. } => {
                ReplyWriter::new(&mut reply, self.session.proto()).error(
                    "ERR SHUTDOWN is not served through tandem proxy: send it to the node's \
                     own RESP port (or stop the proxy itself)",
                );
                self.items.push_back(Item::Written(reply));
            }
            // The proxy's sessions are told that no hub serves pub/sub (`ServerInfo::pubsub`
            // is false): they refuse its commands, and `RESET` has no subscription to end.
            Step::PubSub(request) => {
                debug_assert!(false, "a proxy session asked for pub/sub: {request:?}");
                self.items.push_back(Item::Written(reply));
            }
            // The proxy's sessions are told that it does not list its connections
            // (`ServerInfo::clients` is false): they refuse `CLIENT LIST`, `INFO`, `KILL`
            // and `MONITOR`.
            step @ (Step::ClientList(_) | Step::ClientKill(_) | Step::Monitor) => {
                debug_assert!(false, "a proxy session asked for its connections: {step:?}");
                self.items.push_back(Item::Written(reply));
            }
        }
    }

    fn calls_waiting(&self) -> usize {
        self.items
            .iter()
            .filter(|item| matches!(item, Item::Call(..)))
            .count()
    }

    /// Moves the session's replies at the front of the queue to `out`, and answers the
    /// refused calls among them, unless a round is out (its replies come first). Whether it
    /// answered a refused call.
    fn flush_written(&mut self) -> bool {
        if self.round.is_some() {
            return false;
        }
        let mut refused = false;
        loop {
            match self.items.front() {
                Some(Item::Written(_)) => {
                    let Some(Item::Written(reply)) = self.items.pop_front() else {
                        unreachable!("the front is a written reply");
                    };
                    self.out.extend_from_slice(&reply);
                }
                // A call no group may run is answered its refusal in its turn.
                Some(Item::Call(_, Route::Refused(_))) => {
                    let Some(Item::Call(call, Route::Refused(text))) = self.items.pop_front()
                    else {
                        unreachable!("the front is a refused call");
                    };
                    self.session
                        .called(call, Outcome::Failed(&text), &mut self.out, None);
                    refused = true;
                }
                _ => return refused,
            }
        }
    }

    /// The next round from the front of the queue (whose first item is a call), if any: a
    /// call that runs alone, or the run of data commands of single groups (and the session's
    /// replies between them) at the front, a unit per group.
    fn take_round(&mut self) -> Vec<Unit> {
        let Some(Item::Call(first, route)) = self.items.front() else {
            return Vec::new();
        };
        if !pipelined(first, route) {
            let item = self.items.pop_front().expect("the front is a call");
            return self.open_round(vec![item]);
        }
        // Each group's share is bounded as one unit: commands, and argument bytes (a lone
        // command may carry more).
        let mut shares: Vec<(Route, usize, usize)> = Vec::new();
        let mut run = 0;
        for item in &self.items {
            match item {
                Item::Call(call, route) if pipelined(call, route) => {
                    let len = call.args.len();
                    match shares.iter_mut().find(|(group, ..)| group == route) {
                        Some((_, calls, args_len)) => {
                            if *calls == UNIT_COMMANDS_MAX || *args_len + len > UNIT_ARGS_MAX {
                                break;
                            }
                            *calls += 1;
                            *args_len += len;
                        }
                        None => shares.push((route.clone(), 1, len)),
                    }
                    run += 1;
                }
                Item::Call(..) => break,
                Item::Written(_) => run += 1,
            }
        }
        // A run never ends on a written reply: those wait for the next round's turn.
        while matches!(self.items.get(run - 1), Some(Item::Written(_))) {
            run -= 1;
        }
        let items: Vec<Item> = self.items.drain(..run).collect();
        self.open_round(items)
    }

    /// Opens the round of `items` and makes its units: each group's calls, as one unit.
    fn open_round(&mut self, items: Vec<Item>) -> Vec<Unit> {
        let mut by_group: Vec<(Route, Vec<usize>)> = Vec::new();
        for (at, item) in items.iter().enumerate() {
            if let Item::Call(_, route) = item {
                match by_group.iter_mut().find(|(group, _)| group == route) {
                    Some((_, calls)) => calls.push(at),
                    None => by_group.push((route.clone(), vec![at])),
                }
            }
        }
        let units: Vec<Unit> = by_group
            .into_iter()
            .map(|(route, calls)| self.unit_of(&items, route, calls))
            .collect();
        self.round = Some(Round {
            outcomes: items.iter().map(|_| None).collect(),
            items,
            open: units.len(),
            again: VecDeque::new(),
        });
        units
    }

    /// The calls rolled back whole that go again now: the first of each group.
    fn again_units(&mut self) -> Vec<Unit> {
        let round = self.round.as_mut().expect("an open round");
        let mut picked: Vec<(Route, usize)> = Vec::new();
        round.again.retain(|&at| {
            let Item::Call(_, route) = &round.items[at] else {
                unreachable!("only calls go again");
            };
            if picked.iter().any(|(group, _)| group == route) {
                return true;
            }
            picked.push((route.clone(), at));
            false
        });
        let round = self.round.take().expect("an open round");
        let units: Vec<Unit> = picked
            .into_iter()
            .map(|(route, at)| self.unit_of(&round.items, route, vec![at]))
            .collect();
        self.round = Some(Round {
            open: units.len(),
            ..round
        });
        units
    }

    /// The unit of `route` carrying the calls of `items` at `calls`: the call itself when it
    /// is one, else a pipeline of them.
    fn unit_of(&self, items: &[Item], route: Route, calls: Vec<usize>) -> Unit {
        let call_at = |at: usize| match &items[at] {
            Item::Call(call, _) => call,
            Item::Written(_) => unreachable!("a unit carries calls"),
        };
        if let [at] = calls[..] {
            let call = call_at(at);
            let target = if call.kind == ProcKind::Read && call.purpose == Purpose::Command {
                self.read_target()
            } else {
                Target::Primary
            };
            return Unit {
                proc_id: call.proc_id,
                kind: call.kind,
                args: call.args.clone(),
                target,
                route,
                calls,
                batched: false,
            };
        }
        let mut commands = Vec::with_capacity(calls.len());
        let mut args_len = 0;
        for &at in &calls {
            let call = call_at(at);
            let mut argv = Argv::new();
            let proto = CallArgs::decode_into(&call.args, &mut argv)
                .expect("the session encodes a data command's call");
            commands.push((proto, CallArgs::db(&call.args), argv));
            args_len += call.args.len();
        }
        let writes = calls.iter().any(|&at| call_at(at).kind == ProcKind::Write);
        let mut args = Vec::with_capacity(args_len + 16);
        ExecArgs::encode_in(self.session.proto(), &[], &commands, &mut args);
        let (proc_id, kind, target) = if writes {
            (PROC_EXEC, ProcKind::Write, Target::Primary)
        } else {
            (PROC_READS, ProcKind::Read, self.read_target())
        };
        Unit {
            proc_id,
            kind,
            args,
            target,
            route,
            calls,
            batched: true,
        }
    }

    fn read_target(&self) -> Target {
        if self.readonly {
            Target::Backup
        } else {
            Target::Primary
        }
    }
}

/// Whether `call` may join a pipeline: a data command of one group.
fn pipelined(call: &Call, route: &Route) -> bool {
    call.purpose == Purpose::Command && matches!(route, Route::Only | Route::Group(_))
}

impl Round {
    /// The calls at `calls` go again, one at a time.
    fn send_again(&mut self, calls: &[usize]) {
        self.again.extend(calls);
        self.again.make_contiguous().sort_unstable();
    }

    /// The calls at `calls` are told `text`.
    fn fail(&mut self, calls: &[usize], text: &str) {
        for &at in calls {
            self.outcomes[at] = Some(Ended::Failed(text.to_owned()));
        }
    }
}

/// `text` as a Redis error: a command's own error starts with its code (`WRONGTYPE …`); the
/// store's refusals (a reply too long to keep for a retry) do not, and get `ERR`, so that a
/// client shows the whole sentence rather than taking its first word for a code.
fn with_code(text: &str) -> String {
    let code = text.split(' ').next().unwrap_or_default();
    let has_code = !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase());
    if has_code {
        text.to_owned()
    } else {
        format!("ERR {text}")
    }
}

/// Whether the planted `proxy-retries-unanswered` bug is on (never, in a normal build).
fn retries_unanswered() -> bool {
    #[cfg(feature = "inject-bugs")]
    return tandem_memory::bugs::planted(tandem_memory::bugs::Bug::ProxyRetriesUnanswered);
    #[cfg(not(feature = "inject-bugs"))]
    false
}

/// The byte ranges of the `count` elements of the RESP array `body`, or `None` if it is not
/// exactly such an array.
fn split_array(body: &[u8], count: usize) -> Option<Vec<&[u8]>> {
    tandem_redis::resp::array_elements(body).filter(|elements| elements.len() == count)
}

/// Says in the log that a client sent HTTP to the Redis port, at most once a minute (an
/// attacker must not be able to fill the log), as Redis does.
fn warn_cross_protocol() {
    use std::sync::atomic::{AtomicU64, Ordering};
    static SAID_AT_SECS: AtomicU64 = AtomicU64::new(0);
    let now_secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    let said = SAID_AT_SECS.load(Ordering::Relaxed);
    if now_secs >= said.saturating_add(60)
        && SAID_AT_SECS
            .compare_exchange(said, now_secs, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    {
        tracing::warn!(
            "Possible SECURITY ATTACK detected: a client sent an HTTP request's POST or Host: \
             line to the proxy's Redis port (likely a web page using cross protocol \
             scripting); its connection was closed (said at most once a minute)"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tandem_redis::wire::ExecArgs;

    fn info() -> ServerInfo {
        ServerInfo {
            primary: true,
            ..ServerInfo::default()
        }
    }

    /// Inline requests, one per line.
    fn requests(lines: &[&str]) -> Vec<u8> {
        lines
            .iter()
            .flat_map(|l| format!("{l}\r\n").into_bytes())
            .collect()
    }

    fn commands_of(unit: &Unit) -> Vec<String> {
        let exec = ExecArgs::decode(&unit.args).expect("a batched unit carries ExecArgs");
        exec.commands()
            .iter()
            .map(|(_, argv)| {
                argv.iter()
                    .map(|a| String::from_utf8_lossy(a).into_owned())
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    fn take_out(conn: &mut ProxyConn) -> String {
        String::from_utf8(std::mem::take(conn.out())).unwrap()
    }

    #[test]
    fn a_pipeline_of_reads_is_one_read_call_and_its_replies_keep_their_places() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["GET a", "PING", "GET b", "ECHO x"]));
        let unit = conn.next_unit(&info()).expect("a unit");
        assert_eq!(unit.proc_id, PROC_READS);
        assert_eq!(unit.kind, ProcKind::Read);
        assert_eq!(unit.target, Target::Primary);
        assert_eq!(commands_of(&unit), ["GET a", "GET b"]);
        assert_eq!(take_out(&mut conn), "", "PING's reply waits behind GET a's");
        conn.finish(unit, Answer::Reply(b"*2\r\n$1\r\n1\r\n$-1\r\n"));
        assert_eq!(
            take_out(&mut conn),
            "$1\r\n1\r\n+PONG\r\n$-1\r\n$1\r\nx\r\n"
        );
        assert!(conn.next_unit(&info()).is_none());
    }

    #[test]
    fn a_pipeline_with_a_write_is_one_exec_without_watches() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["SET a 1", "INCR a", "GET a"]));
        let unit = conn.next_unit(&info()).expect("a unit");
        assert_eq!(unit.proc_id, PROC_EXEC);
        assert_eq!(unit.kind, ProcKind::Write);
        assert_eq!(commands_of(&unit), ["SET a 1", "INCR a", "GET a"]);
        let exec = ExecArgs::decode(&unit.args).unwrap();
        assert_eq!(exec.watched().count(), 0);
        conn.finish(unit, Answer::Reply(b"*3\r\n+OK\r\n:2\r\n$1\r\n2\r\n"));
        assert_eq!(take_out(&mut conn), "+OK\r\n:2\r\n$1\r\n2\r\n");
    }

    /// Three groups, as `tandem up --groups 3` splits the slots: "bar" and "b" are group 1's,
    /// "c" group 2's, "foo" group 3's.
    fn three_groups() -> Option<Arc<SlotGroups>> {
        let ranges = [(0, 5460, 1), (5461, 10922, 2), (10923, 16383, 3)];
        Some(Arc::new(SlotGroups::new(ranges).unwrap().unwrap()))
    }

    #[test]
    fn over_several_groups_a_pipeline_is_a_unit_per_group_sent_together_replies_in_order() {
        let mut conn = ProxyConn::new(1);
        conn.route_by(three_groups());
        conn.feed(&requests(&[
            "SET bar 1",
            "GET c",
            "PING",
            "GET b",
            "GET foo",
            "MSET bar 1 foo 2",
            "DBSIZE",
            "GET foo",
        ]));
        let round = conn.next_units(&info());
        let shape: Vec<(Route, usize)> = round
            .iter()
            .map(|unit| (unit.route.clone(), unit.commands()))
            .collect();
        assert_eq!(
            shape,
            [
                (Route::Group(1), 2),
                (Route::Group(2), 1),
                (Route::Group(3), 1)
            ],
            "the run before the MSET of two groups: a unit per group, in order of first use"
        );
        assert_eq!(commands_of(&round[0]), ["SET bar 1", "GET b"]);
        // The answers come back in any order; the replies go out in request order, once the
        // last unit of the round is finished.
        let mut units = round.into_iter();
        let (one, two, three) = (
            units.next().unwrap(),
            units.next().unwrap(),
            units.next().unwrap(),
        );
        conn.finish(three, Answer::Reply(b"$1\r\n3\r\n"));
        conn.finish(one, Answer::Reply(b"*2\r\n+OK\r\n$1\r\n1\r\n"));
        assert_eq!(
            take_out(&mut conn),
            "",
            "group 2's reply comes before group 3's"
        );
        conn.finish(two, Answer::Reply(b"$-1\r\n"));
        assert_eq!(
            take_out(&mut conn),
            "+OK\r\n$-1\r\n+PONG\r\n$1\r\n1\r\n$1\r\n3\r\n-CROSSSLOT Keys in request don't \
             hash to the same slot\r\n"
        );
        // The MSET of two groups was refused in its turn, without a call; DBSIZE, which every
        // group runs, is a round of its own, and the GET after it waits for it.
        let every = conn.next_units(&info());
        let sum = tandem_redis::session::spread::Combine::Sum;
        assert_eq!(every.len(), 1);
        assert_eq!(every[0].route, Route::Every(sum));
        conn.finish(every.into_iter().next().unwrap(), Answer::Reply(b":3\r\n"));
        let last = conn.next_unit(&info()).expect("group 3's unit");
        assert_eq!(last.route, Route::Group(3));
        conn.finish(last, Answer::Reply(b"$1\r\n2\r\n"));
        assert_eq!(take_out(&mut conn), ":3\r\n$1\r\n2\r\n");
    }

    #[test]
    fn a_group_rolled_back_whole_goes_again_alone_while_the_rest_of_its_round_waits() {
        let mut conn = ProxyConn::new(1);
        conn.route_by(three_groups());
        conn.feed(&requests(&["INCR bar", "INCR c", "INCR b", "INCR foo"]));
        let round = conn.next_units(&info());
        assert_eq!(round.len(), 3);
        for unit in round {
            let answer = match unit.route {
                Route::Group(1) => Answer::RolledBack("OOM command not allowed"),
                Route::Group(2) => Answer::Reply(b":7\r\n"),
                _ => Answer::Reply(b":9\r\n"),
            };
            conn.finish(unit, answer);
        }
        assert_eq!(take_out(&mut conn), "");
        for (n, key) in [(1, "bar"), (2, "b")] {
            let again = conn.next_units(&info());
            assert_eq!(again.len(), 1, "group 1's commands go again one at a time");
            let unit = again.into_iter().next().unwrap();
            assert_eq!(
                (unit.route.clone(), unit.batched()),
                (Route::Group(1), false)
            );
            let mut argv = Argv::new();
            CallArgs::decode_into(&unit.args, &mut argv).unwrap();
            assert_eq!(argv.get(1), Some(key.as_bytes()));
            conn.finish(unit, Answer::Reply(format!(":{n}\r\n").as_bytes()));
        }
        assert_eq!(take_out(&mut conn), ":1\r\n:7\r\n:2\r\n:9\r\n");
        assert!(conn.next_units(&info()).is_empty());
    }

    #[test]
    fn a_refused_watch_lets_the_requests_it_held_back_run() {
        let mut conn = ProxyConn::new(1);
        conn.route_by(three_groups());
        conn.feed(&requests(&["WATCH bar foo", "GET c"]));
        let unit = conn
            .next_unit(&info())
            .expect("GET c, after the WATCH's refusal");
        assert_eq!(unit.route, Route::Group(2));
        conn.finish(unit, Answer::Reply(b"$-1\r\n"));
        let out = take_out(&mut conn);
        assert!(
            out.starts_with("-CROSSSLOT ") && out.ends_with("\r\n$-1\r\n"),
            "{out}"
        );
    }

    #[test]
    fn a_lone_command_is_its_own_call() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["INCR n"]));
        let unit = conn.next_unit(&info()).expect("a unit");
        assert_eq!(unit.commands(), 1);
        assert_ne!(unit.proc_id, PROC_EXEC);
        assert_eq!(unit.kind, ProcKind::Write);
        conn.finish(
            unit,
            Answer::RolledBack("WRONGTYPE Operation against a key"),
        );
        assert_eq!(
            take_out(&mut conn),
            "-WRONGTYPE Operation against a key\r\n"
        );
    }

    #[test]
    fn a_unit_rolled_back_whole_is_sent_again_one_command_at_a_time() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["INCR a", "PING", "INCR b", "INCR c"]));
        let unit = conn.next_unit(&info()).expect("a unit");
        assert_eq!(unit.commands(), 3);
        conn.finish(unit, Answer::RolledBack("OOM command not allowed"));
        assert_eq!(take_out(&mut conn), "");
        let mut replies = String::new();
        for (n, expected) in [(1, "INCR a"), (2, "INCR b"), (3, "INCR c")] {
            let unit = conn.next_unit(&info()).expect("a single");
            assert_eq!(unit.commands(), 1, "{expected}");
            let mut argv = Argv::new();
            CallArgs::decode_into(&unit.args, &mut argv).unwrap();
            assert_eq!(argv.get(1), Some(&expected.as_bytes()[5..]));
            conn.finish(unit, Answer::Reply(format!(":{n}\r\n").as_bytes()));
            replies.push_str(&take_out(&mut conn));
        }
        assert_eq!(replies, ":1\r\n+PONG\r\n:2\r\n:3\r\n");
        // Later pipelines are batched again.
        conn.feed(&requests(&["INCR a", "INCR b"]));
        assert_eq!(conn.next_unit(&info()).unwrap().commands(), 2);
    }

    #[test]
    fn a_refusal_without_a_code_gets_err() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["LPOP big 100000", "INCR n"]));
        let unit = conn.next_unit(&info()).unwrap();
        conn.finish(unit, Answer::RolledBack("OOM command not allowed"));
        let lpop = conn.next_unit(&info()).unwrap();
        conn.finish(
            lpop,
            Answer::RolledBack("the call's 9000-byte reply does not fit"),
        );
        let incr = conn.next_unit(&info()).unwrap();
        conn.finish(
            incr,
            Answer::RolledBack("WRONGTYPE Operation against a key"),
        );
        assert_eq!(
            take_out(&mut conn),
            "-ERR the call's 9000-byte reply does not fit\r\n\
             -WRONGTYPE Operation against a key\r\n"
        );
    }

    #[test]
    fn a_failed_unit_tells_each_of_its_commands() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["INCR a", "PING", "GET b"]));
        let unit = conn.next_unit(&info()).unwrap();
        conn.finish(unit, Answer::Failed("ERR no answer"));
        assert_eq!(
            take_out(&mut conn),
            "-ERR no answer\r\n+PONG\r\n-ERR no answer\r\n"
        );
    }

    #[test]
    fn a_retry_whose_reply_was_not_kept_tells_each_command_and_sends_nothing_again() {
        let text = "the command ran once and committed (LSN 9), but its 90000-byte reply was \
                    too long for the cluster to keep for this retry";
        // A pipeline: each of its commands is told, in place.
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["SET a 1", "PING", "GETSET b 2"]));
        let unit = conn.next_unit(&info()).unwrap();
        assert!(unit.batched());
        conn.finish(unit, Answer::ReplyNotKept(text));
        assert_eq!(
            take_out(&mut conn),
            format!("-ERR {text}\r\n+PONG\r\n-ERR {text}\r\n")
        );
        assert!(conn.next_unit(&info()).is_none(), "nothing runs again");
        // A lone command and a MULTI block's EXEC: one error each.
        conn.feed(&requests(&["GETSET b 3", "MULTI", "GET a", "EXEC"]));
        let unit = conn.next_unit(&info()).unwrap();
        conn.finish(unit, Answer::ReplyNotKept(text));
        assert_eq!(
            take_out(&mut conn),
            format!("-ERR {text}\r\n+OK\r\n+QUEUED\r\n")
        );
        let unit = conn.next_unit(&info()).unwrap();
        conn.finish(unit, Answer::ReplyNotKept(text));
        assert_eq!(take_out(&mut conn), format!("-ERR {text}\r\n"));
        assert!(conn.next_unit(&info()).is_none(), "nothing runs again");
    }

    #[test]
    fn a_malformed_batch_reply_is_an_error_not_a_misplaced_reply() {
        for body in [
            &b":1\r\n"[..],
            b"*3\r\n:1\r\n:2\r\n",
            b"*2\r\n:1\r\n",
            b"*2\r\n:1\r\n:2\r\n:3\r\n",
        ] {
            let mut conn = ProxyConn::new(1);
            conn.feed(&requests(&["INCR a", "INCR b"]));
            let unit = conn.next_unit(&info()).unwrap();
            conn.finish(unit, Answer::Reply(body));
            let out = take_out(&mut conn);
            assert_eq!(out.matches("-ERR tandem proxy").count(), 2, "{out}");
        }
    }

    #[test]
    fn multi_blocks_and_watch_are_units_of_their_own_and_watch_holds_later_requests() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&[
            "GET x", "WATCH k", "MULTI", "INCR k", "EXEC", "GET y",
        ]));
        let unit = conn.next_unit(&info()).unwrap();
        assert_eq!(
            unit.commands(),
            1,
            "GET x alone: WATCH does not join a pipeline"
        );
        conn.finish(unit, Answer::Reply(b"$-1\r\n"));
        let watch = conn.next_unit(&info()).unwrap();
        assert_eq!(watch.proc_id, tandem_redis::PROC_WATCH);
        assert!(conn.items.is_empty(), "nothing handled past WATCH");
        assert!(
            conn.start < conn.input.len(),
            "MULTI and the rest wait, unparsed"
        );
        let mut versions = Vec::new();
        tandem_redis::wire::encode_versions(&[7], &mut versions);
        conn.finish(watch, Answer::Reply(&versions));
        let exec = conn.next_unit(&info()).unwrap();
        assert_eq!(exec.proc_id, PROC_EXEC);
        let args = ExecArgs::decode(&exec.args).unwrap();
        assert_eq!(args.watched().collect::<Vec<_>>(), [(&b"k"[..], 7, 0)]);
        conn.finish(exec, Answer::Reply(b"*1\r\n:1\r\n"));
        let get = conn.next_unit(&info()).unwrap();
        conn.finish(get, Answer::Reply(b"$-1\r\n"));
        assert_eq!(
            take_out(&mut conn),
            "$-1\r\n+OK\r\n+OK\r\n+QUEUED\r\n*1\r\n:1\r\n$-1\r\n"
        );
    }

    #[test]
    fn reads_go_to_backups_after_readonly_and_writes_never_do() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["READONLY", "GET a", "GET b"]));
        let reads = conn.next_unit(&info()).unwrap();
        assert_eq!(reads.target, Target::Backup);
        conn.finish(reads, Answer::Reply(b"*2\r\n$-1\r\n$-1\r\n"));
        conn.feed(&requests(&["GET a", "INCR a"]));
        let mixed = conn.next_unit(&info()).unwrap();
        assert_eq!(mixed.target, Target::Primary);
        conn.finish(mixed, Answer::Reply(b"*2\r\n$-1\r\n:1\r\n"));
        conn.feed(&requests(&["READWRITE", "GET a"]));
        let read = conn.next_unit(&info()).unwrap();
        assert_eq!(read.target, Target::Primary);
        conn.finish(read, Answer::Reply(b"$1\r\n1\r\n"));
        assert_eq!(
            take_out(&mut conn),
            "+OK\r\n$-1\r\n$-1\r\n$-1\r\n:1\r\n+OK\r\n$1\r\n1\r\n"
        );
    }

    #[test]
    fn a_pipeline_is_cut_at_the_unit_limit_and_requests_split_across_reads_wait() {
        let mut conn = ProxyConn::new(1);
        let lines: Vec<String> = (0..UNIT_COMMANDS_MAX + 3)
            .map(|i| format!("INCR k{i}"))
            .collect();
        let lines: Vec<&str> = lines.iter().map(String::as_str).collect();
        let mut bytes = requests(&lines);
        bytes.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$1\r");
        conn.feed(&bytes);
        let first = conn.next_unit(&info()).unwrap();
        assert_eq!(first.commands(), UNIT_COMMANDS_MAX);
        let body: Vec<u8> = std::iter::once(format!("*{UNIT_COMMANDS_MAX}\r\n"))
            .chain((0..UNIT_COMMANDS_MAX).map(|_| ":1\r\n".to_owned()))
            .flat_map(String::into_bytes)
            .collect();
        conn.finish(first, Answer::Reply(&body));
        let rest = conn.next_unit(&info()).unwrap();
        assert_eq!(rest.commands(), 3, "the half-sent GET waits for its bytes");
        conn.finish(rest, Answer::Reply(b"*3\r\n:1\r\n:1\r\n:1\r\n"));
        assert!(conn.next_unit(&info()).is_none());
        conn.feed(b"\nk\r\n");
        let get = conn.next_unit(&info()).unwrap();
        assert_eq!(get.kind, ProcKind::Read);
    }

    #[test]
    fn quit_and_protocol_errors_close_after_the_replies_before_them() {
        let mut conn = ProxyConn::new(1);
        conn.feed(&requests(&["INCR a", "QUIT", "INCR b"]));
        let unit = conn.next_unit(&info()).unwrap();
        assert_eq!(unit.commands(), 1, "nothing after QUIT runs");
        conn.finish(unit, Answer::Reply(b":1\r\n"));
        assert!(conn.next_unit(&info()).is_none());
        assert_eq!(take_out(&mut conn), ":1\r\n+OK\r\n");
        assert!(conn.done());

        let mut conn = ProxyConn::new(2);
        conn.feed(b"*1\r\n$x\r\n");
        assert!(conn.next_unit(&info()).is_none());
        assert!(take_out(&mut conn).starts_with("-ERR Protocol error"));
        assert!(conn.done());
    }
}
