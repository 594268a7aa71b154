//! The stub's decisions, without I/O: which node to greet next, whether a greeting names the
//! primary, what an answer means for the call, when to pause and when the call is over.
//!
//! A [`Router`] lives as long as its client; a [`CallRoute`] as long as one call. The driver
//! (the blocking [`Client`](crate::Client), or the simulator's clients) asks
//! [`Router::next`] what to do, does it, and reports what happened:
//!
//! | [`Action`] | the driver | then reports |
//! |---|---|---|
//! | `Connect { index, until }` | opens a connection to node `index` and sends `Hello` | [`Router::greeted`], a failure by `until` |
//! | `Send { until }` | sends the call to the primary | [`Router::answered`], [`Answered::Timeout`] at `until` |
//! | `Sleep { until }` | waits | nothing: it asks again at `until` |
//! | `Done(result)` | returns `result` | the call is over |
//!
//! After a report it asks [`Router::next`] again. Time is a `Duration` since any origin the
//! driver keeps fixed (the blocking client's first `Instant`, the simulator's clock), so the
//! same decisions run on a real clock and a simulated one.
//!
//! The rules are the ones the crate documentation lists: a round of the nodes starts after the
//! node last dropped; a `Primary` greeting from a view older than one seen is a deposed
//! primary; `NotPrimary` and `StaleView` drop the primary and look again at once; a timeout
//! looks again at once with a doubled attempt timeout; `Busy` and other failures pause, the
//! pause doubling up to 4 times [`RouterConfig::retry_backoff`]; every wait ends at the
//! call's deadline.

use std::cmp;
use std::time::Duration;

use tandem_replication::NodeId;
use tandem_wire::{ErrorCode, ErrorFrame, ReplyStatus};

use crate::{CallError, ClientStats, Outcome};

/// The factor by which pauses may grow over [`RouterConfig::retry_backoff`]: a round of
/// connects on loopback costs little next to a failover finished and not seen for 8 ms.
const BACKOFF_GROWTH_MAX: u32 = 4;

/// The largest number of doublings of the attempt timeout within one call.
const ATTEMPT_DOUBLINGS_MAX: u32 = 16;

/// What the router needs to know of its client's configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RouterConfig {
    /// How each node is named in error messages (its address), in the client's order.
    pub nodes: Vec<String>,
    /// How long one attempt (a greeting, a call) waits before it gives up.
    pub attempt_timeout: Duration,
    /// The first pause after a failure.
    pub retry_backoff: Duration,
    /// How long a call may take, all attempts together.
    pub deadline: Duration,
}

/// The primary the router is connected to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Route {
    /// The node's position in [`RouterConfig::nodes`].
    pub index: usize,
    pub node: NodeId,
    /// The node's view when it greeted the client.
    pub view: u64,
}

/// How a node answered the `Hello` the driver sent on [`Action::Connect`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Greeted {
    /// A `Welcome`; `primary` says whether the node named itself its group's primary.
    Welcome {
        primary: bool,
        node: NodeId,
        view: u64,
    },
    /// An `Error` frame.
    Refused(ErrorFrame),
    /// No greeting: the connect failed, timed out, or the node sent garbage (the message
    /// says which).
    Failed(String),
}

/// How a node answered the call the driver sent on [`Action::Send`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answered {
    Reply {
        seq: u64,
        lsn: u64,
        status: ReplyStatus,
        body: Vec<u8>,
    },
    Error(ErrorFrame),
    /// No answer by the attempt's `until`.
    Timeout,
    /// The connection failed (closed, garbage, an I/O error; the message says which).
    Failed(String),
}

/// Whether a report ended the attempt the router asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Report {
    /// It did: ask [`Router::next`].
    Concluded,
    /// A reply to an earlier call, which the router ignores: keep waiting for this one.
    Ignored,
}

/// What the driver does next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Connect to node `index`, send `Hello`, report with [`Router::greeted`] by `until`.
    Connect { index: usize, until: Duration },
    /// Send the call to the primary ([`Router::primary`]), report with [`Router::answered`]
    /// by `until`.
    Send { until: Duration },
    /// Wait until `until`, then ask again.
    Sleep { until: Duration },
    /// The call is over.
    Done(Result<Outcome, CallError>),
}

/// One round of greetings in search of the primary.
#[derive(Clone, Copy, Debug)]
struct Search {
    /// Nodes greeted in this round.
    tried: usize,
    /// The pause after a round without a primary; it doubles per round.
    pause: Duration,
}

/// One call's way through its attempts.
#[derive(Debug)]
pub struct CallRoute {
    seq: u64,
    deadline: Duration,
    attempts: u32,
    last_error: String,
    /// The next pause after a failure.
    pause: Duration,
    /// Attempts that timed out: each doubles the next attempt's timeout.
    timeouts: u32,
    search: Option<Search>,
    sleep_until: Option<Duration>,
    done: Option<Result<Outcome, CallError>>,
}

impl CallRoute {
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Whether the last report ended the call ([`Router::next`] then says `Done`).
    pub fn is_over(&self) -> bool {
        self.done.is_some()
    }

    fn deadline_error(&self) -> CallError {
        CallError::Deadline {
            seq: self.seq,
            attempts: self.attempts,
            last_error: self.last_error.clone(),
        }
    }
}

/// The stub's routing state across calls: the primary it is connected to, the highest view
/// any node reported, where the next search starts, and the counters.
#[derive(Debug)]
pub struct Router {
    config: RouterConfig,
    primary: Option<Route>,
    /// The index where the next search for the primary starts.
    route_from: usize,
    /// The highest view any node reported: a primary in an older view is deposed.
    view_seen: u64,
    /// The highest commit LSN any reply carried.
    lsn_seen: u64,
    primaries_connected: u64,
    reply_node_last: Option<NodeId>,
    stats: ClientStats,
}

impl Router {
    pub fn new(config: RouterConfig) -> Router {
        assert!(!config.nodes.is_empty(), "a client knows at least one node");
        Router {
            config,
            primary: None,
            route_from: 0,
            view_seen: 0,
            lsn_seen: 0,
            primaries_connected: 0,
            reply_node_last: None,
            stats: ClientStats::default(),
        }
    }

    /// Starts call `seq` at `now`; its deadline is [`RouterConfig::deadline`] later.
    pub fn begin(&mut self, seq: u64, now: Duration) -> CallRoute {
        self.stats.calls += 1;
        CallRoute {
            seq,
            deadline: now.saturating_add(self.config.deadline),
            attempts: 0,
            last_error: String::from("no node was reached"),
            pause: self.config.retry_backoff,
            timeouts: 0,
            search: None,
            sleep_until: None,
            done: None,
        }
    }

    /// What to do for `call` at `now`.
    pub fn next(&mut self, call: &mut CallRoute, now: Duration) -> Action {
        if let Some(done) = call.done.take() {
            self.finish(&done);
            return Action::Done(done);
        }
        if now >= call.deadline {
            let done = Err(call.deadline_error());
            self.finish(&done);
            return Action::Done(done);
        }
        if let Some(until) = call.sleep_until {
            if now < until {
                return Action::Sleep { until };
            }
            call.sleep_until = None;
        }
        if self.primary.is_none() {
            let count = self.config.nodes.len();
            let search = call.search.get_or_insert(Search {
                tried: 0,
                pause: self.config.retry_backoff,
            });
            if search.tried == count {
                // A round without a primary: pause, then go round again.
                let until = now.saturating_add(search.pause).min(call.deadline);
                search.tried = 0;
                search.pause = cmp::min(search.pause.saturating_mul(2), self.backoff_max());
                call.sleep_until = Some(until);
                return Action::Sleep { until };
            }
            let index = (self.route_from + search.tried) % count;
            search.tried += 1;
            self.stats.connects += 1;
            let until = now
                .saturating_add(self.config.attempt_timeout)
                .min(call.deadline);
            return Action::Connect { index, until };
        }
        call.search = None;
        let wait = self
            .config
            .attempt_timeout
            .saturating_mul(1 << call.timeouts.min(ATTEMPT_DOUBLINGS_MAX));
        let until = now.saturating_add(wait).min(call.deadline);
        call.attempts = call.attempts.saturating_add(1);
        self.stats.attempts += 1;
        Action::Send { until }
    }

    /// Node `index` answered the `Hello` of `call`'s search.
    pub fn greeted(&mut self, call: &mut CallRoute, index: usize, greeted: Greeted) {
        assert!(
            self.primary.is_none(),
            "a client greets nodes only while it has no primary"
        );
        let name = &self.config.nodes[index];
        match greeted {
            Greeted::Welcome {
                primary: true,
                node,
                view,
            } if view < self.view_seen => {
                self.stats.not_primary += 1;
                call.last_error = format!(
                    "node {node} at {name} says it is primary in view {view}, but view {} was \
                     seen: it was deposed",
                    self.view_seen
                );
            }
            Greeted::Welcome {
                primary: true,
                node,
                view,
            } => {
                self.view_seen = view;
                if self.primaries_connected > 0 {
                    self.stats.reconnects += 1;
                }
                self.primaries_connected += 1;
                self.route_from = index;
                self.primary = Some(Route { index, node, view });
            }
            Greeted::Welcome {
                primary: false,
                node,
                view,
            } => {
                self.stats.not_primary += 1;
                self.view_seen = self.view_seen.max(view);
                call.last_error = format!("node {node} at {name} is a backup in view {view}");
            }
            Greeted::Refused(ErrorFrame { code, message }) => {
                if matches!(code, ErrorCode::NotPrimary | ErrorCode::StaleView) {
                    self.stats.not_primary += 1;
                }
                call.last_error = format!("{name} refused the Hello ({code:?}): {message}");
                // A password the nodes do not take is not a failover to ride out: a call not
                // yet sent anywhere ends at once (it did not run). One already sent keeps
                // looking for its answer until its deadline.
                if code == ErrorCode::Unauthorized && call.attempts == 0 {
                    call.done = Some(Err(CallError::Refused { code, message }));
                }
            }
            Greeted::Failed(failure) => call.last_error = format!("{name}: {failure}"),
        }
    }

    /// The primary answered `call` at `now` (or did not, by the attempt's `until`).
    pub fn answered(&mut self, call: &mut CallRoute, answered: Answered, now: Duration) -> Report {
        let route = self
            .primary
            .expect("a call is sent only to a primary the client is connected to");
        match answered {
            Answered::Reply { seq, .. } if seq != call.seq => {
                self.stats.stale_replies += 1;
                return Report::Ignored;
            }
            Answered::Reply {
                lsn, status, body, ..
            } => {
                if status.committed() {
                    self.lsn_seen = self.lsn_seen.max(lsn);
                }
                if self.reply_node_last.is_some_and(|last| last != route.node) {
                    self.stats.failovers += 1;
                }
                self.reply_node_last = Some(route.node);
                call.done = Some(Ok(Outcome {
                    seq: call.seq,
                    lsn,
                    status,
                    body,
                    node: route.node,
                    view: route.view,
                    attempts: call.attempts,
                }));
            }
            Answered::Error(ErrorFrame { code, message }) => {
                let said = format!("node {} answered {code:?}: {message}", route.node);
                match code {
                    ErrorCode::UnknownProcedure | ErrorCode::BadArgs => {
                        call.done = Some(Err(CallError::Refused { code, message }));
                    }
                    ErrorCode::NotPrimary | ErrorCode::StaleView => {
                        self.stats.not_primary += 1;
                        call.last_error = said;
                        self.drop_primary();
                    }
                    ErrorCode::Busy => {
                        self.stats.busy += 1;
                        call.last_error = said;
                        self.pause(call, now);
                    }
                    // The node closes the connection after these (BadFrame, Internal,
                    // UnsupportedVersion, and codes newer than this build).
                    _ => {
                        call.last_error = said;
                        self.drop_primary();
                        self.pause(call, now);
                    }
                }
            }
            Answered::Timeout => {
                call.last_error = format!(
                    "node {} at {}: no answer within the attempt timeout",
                    route.node, self.config.nodes[route.index]
                );
                self.drop_primary();
                // The attempt already waited: look elsewhere at once.
                self.stats.timeouts += 1;
                call.timeouts += 1;
            }
            Answered::Failed(failure) => {
                call.last_error = format!(
                    "node {} at {}: {failure}",
                    route.node, self.config.nodes[route.index]
                );
                self.drop_primary();
                self.pause(call, now);
            }
        }
        Report::Concluded
    }

    /// Takes a new list of nodes, named as [`RouterConfig::nodes`] names them (the old list's
    /// indexes mean nothing after it). The primary stays, at its new index, if its name is
    /// still listed, and is forgotten otherwise; the next search starts where it would have
    /// if that node is still listed, else at the first. Returns the primary's new index.
    /// The highest view and LSN seen, and the counters, are the client's and stay.
    pub fn set_nodes(&mut self, nodes: Vec<String>) -> Option<usize> {
        assert!(!nodes.is_empty(), "a client knows at least one node");
        let old = std::mem::replace(&mut self.config.nodes, nodes);
        let nodes = &self.config.nodes;
        let moved = |index: usize| nodes.iter().position(|name| *name == old[index]);
        let route_from = moved(self.route_from).unwrap_or(0);
        let primary = self.primary.and_then(|route| {
            Some(Route {
                index: moved(route.index)?,
                ..route
            })
        });
        self.route_from = route_from;
        self.primary = primary;
        primary.map(|route| route.index)
    }

    /// The primary the client is connected to.
    pub fn primary(&self) -> Option<Route> {
        self.primary
    }

    /// Forgets the primary (its connection failed outside a call); the next search starts
    /// after its node.
    pub fn drop_primary(&mut self) {
        let route = self.primary.take().expect("a primary to drop");
        self.route_from = (route.index + 1) % self.config.nodes.len();
    }

    /// A node reported `view` (a backup greeting a read).
    pub fn see_view(&mut self, view: u64) {
        self.view_seen = self.view_seen.max(view);
    }

    /// A reply carried commit LSN `lsn` (a read a backup answered).
    pub fn see_lsn(&mut self, lsn: u64) {
        self.lsn_seen = self.lsn_seen.max(lsn);
    }

    /// The highest commit LSN any reply has carried.
    pub fn lsn_seen(&self) -> u64 {
        self.lsn_seen
    }

    pub fn stats(&self) -> &ClientStats {
        &self.stats
    }

    pub fn stats_mut(&mut self) -> &mut ClientStats {
        &mut self.stats
    }

    fn finish(&mut self, done: &Result<Outcome, CallError>) {
        match done {
            Ok(_) => {}
            Err(CallError::Deadline { .. }) => self.stats.deadlines += 1,
            Err(CallError::Refused { .. }) => self.stats.refused += 1,
            Err(_) => unreachable!("argument errors are returned before a call is routed"),
        }
    }

    /// Pauses `call` from `now`, cut short at its deadline, and doubles the next pause.
    fn pause(&self, call: &mut CallRoute, now: Duration) {
        call.sleep_until = Some(now.saturating_add(call.pause).min(call.deadline));
        call.pause = cmp::min(call.pause.saturating_mul(2), self.backoff_max());
    }

    fn backoff_max(&self) -> Duration {
        self.config.retry_backoff.saturating_mul(BACKOFF_GROWTH_MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    fn router(nodes: usize) -> Router {
        Router::new(RouterConfig {
            nodes: (0..nodes).map(|index| format!("n{index}")).collect(),
            attempt_timeout: 10 * MS,
            retry_backoff: MS,
            deadline: 1000 * MS,
        })
    }

    fn welcome(primary: bool, node: NodeId, view: u64) -> Greeted {
        Greeted::Welcome {
            primary,
            node,
            view,
        }
    }

    fn error(code: ErrorCode) -> Answered {
        Answered::Error(ErrorFrame {
            code,
            message: "said so".into(),
        })
    }

    fn reply(seq: u64, lsn: u64) -> Answered {
        Answered::Reply {
            seq,
            lsn,
            status: ReplyStatus::Committed,
            body: vec![1],
        }
    }

    /// Greets node `index` as the primary of `view`, from a call with no primary yet.
    fn connect(router: &mut Router, call: &mut CallRoute, index: usize, view: u64, now: Duration) {
        assert_eq!(
            router.next(call, now),
            Action::Connect {
                index,
                until: now + 10 * MS
            }
        );
        router.greeted(call, index, welcome(true, index as NodeId + 1, view));
    }

    #[test]
    fn a_search_skips_backups_and_deposed_primaries_and_a_reply_ends_the_call() {
        let mut router = router(3);
        let mut call = router.begin(1, Duration::ZERO);
        let now = Duration::ZERO;
        assert!(matches!(
            router.next(&mut call, now),
            Action::Connect { index: 0, .. }
        ));
        router.greeted(&mut call, 0, welcome(false, 1, 5));
        // Node 2 still thinks it is primary, in a view older than one seen: deposed.
        assert!(matches!(
            router.next(&mut call, now),
            Action::Connect { index: 1, .. }
        ));
        router.greeted(&mut call, 1, welcome(true, 2, 4));
        assert_eq!(router.primary(), None);
        connect(&mut router, &mut call, 2, 5, now);
        assert_eq!(router.next(&mut call, now), Action::Send { until: 10 * MS });
        assert_eq!(
            router.answered(&mut call, reply(7, 3), now),
            Report::Ignored
        );
        assert_eq!(
            router.answered(&mut call, reply(1, 9), now),
            Report::Concluded
        );
        let Action::Done(Ok(outcome)) = router.next(&mut call, now) else {
            panic!("the reply ends the call");
        };
        assert_eq!((outcome.node, outcome.view, outcome.lsn), (3, 5, 9));
        assert_eq!(outcome.attempts, 1);
        assert_eq!(router.lsn_seen(), 9);
        let stats = router.stats();
        assert_eq!(
            (stats.connects, stats.not_primary, stats.stale_replies),
            (3, 2, 1)
        );
    }

    #[test]
    fn not_primary_looks_again_at_once_after_the_node_and_a_timeout_doubles_the_wait() {
        let mut router = router(3);
        let mut call = router.begin(1, Duration::ZERO);
        connect(&mut router, &mut call, 0, 1, Duration::ZERO);
        assert!(matches!(
            router.next(&mut call, Duration::ZERO),
            Action::Send { .. }
        ));
        router.answered(&mut call, error(ErrorCode::NotPrimary), MS);
        // The next round starts after the node that said no, at once.
        connect(&mut router, &mut call, 1, 2, MS);
        assert_eq!(router.next(&mut call, MS), Action::Send { until: 11 * MS });
        router.answered(&mut call, Answered::Timeout, 11 * MS);
        connect(&mut router, &mut call, 2, 2, 11 * MS);
        assert_eq!(
            router.next(&mut call, 11 * MS),
            Action::Send { until: 31 * MS }
        );
        assert_eq!(router.stats().timeouts, 1);
        assert_eq!(router.stats().reconnects, 2);
    }

    #[test]
    fn busy_and_failures_pause_doubling_up_to_four_times_the_backoff() {
        let mut router = router(1);
        let mut call = router.begin(1, Duration::ZERO);
        connect(&mut router, &mut call, 0, 1, Duration::ZERO);
        let mut now = Duration::ZERO;
        for pause in [1, 2, 4, 4] {
            assert!(matches!(router.next(&mut call, now), Action::Send { .. }));
            router.answered(&mut call, error(ErrorCode::Busy), now);
            assert_eq!(
                router.next(&mut call, now),
                Action::Sleep {
                    until: now + pause * MS
                }
            );
            now += pause * MS;
        }
        // A failed connection pauses too, then looks for the primary again.
        assert!(matches!(router.next(&mut call, now), Action::Send { .. }));
        router.answered(&mut call, Answered::Failed("closed".into()), now);
        assert_eq!(router.primary(), None);
        assert_eq!(
            router.next(&mut call, now),
            Action::Sleep {
                until: now + 4 * MS
            }
        );
        assert!(matches!(
            router.next(&mut call, now + 4 * MS),
            Action::Connect { .. }
        ));
        assert_eq!(router.stats().busy, 4);
    }

    #[test]
    fn a_round_without_a_primary_pauses_and_the_deadline_ends_the_call() {
        let mut router = router(2);
        let mut call = router.begin(4, Duration::ZERO);
        let mut now = Duration::ZERO;
        let mut pauses = Vec::new();
        loop {
            match router.next(&mut call, now) {
                Action::Connect { index, .. } => {
                    router.greeted(&mut call, index, Greeted::Failed("refused".into()));
                }
                Action::Sleep { until } => {
                    pauses.push(until - now);
                    now = until;
                }
                Action::Done(result) => {
                    let Err(CallError::Deadline {
                        seq, last_error, ..
                    }) = result
                    else {
                        panic!("no primary: the deadline ends the call");
                    };
                    assert_eq!(seq, 4);
                    assert!(last_error.contains("refused"), "{last_error}");
                    break;
                }
                Action::Send { .. } => panic!("no primary to send to"),
            }
        }
        assert_eq!(&pauses[..4], &[MS, 2 * MS, 4 * MS, 4 * MS]);
        assert_eq!(now, 1000 * MS);
        assert_eq!(router.stats().deadlines, 1);
    }

    #[test]
    fn a_new_node_list_keeps_the_primary_by_name_or_forgets_it() {
        let mut router = router(3);
        let mut call = router.begin(1, Duration::ZERO);
        connect(&mut router, &mut call, 0, 2, Duration::ZERO);
        let names = |names: &[&str]| names.iter().map(|name| name.to_string()).collect();
        assert_eq!(router.set_nodes(names(&["n5", "n0"])), Some(1));
        let route = router.primary().expect("n0 is still listed");
        assert_eq!((route.index, route.node, route.view), (1, 1, 2));
        assert!(matches!(
            router.next(&mut call, Duration::ZERO),
            Action::Send { .. }
        ));
        router.answered(&mut call, reply(1, 4), MS);
        assert!(matches!(router.next(&mut call, MS), Action::Done(Ok(_))));

        // Without the primary, the next call greets from the first node.
        assert_eq!(router.set_nodes(names(&["n7", "n8"])), None);
        assert_eq!(router.primary(), None);
        let mut call = router.begin(2, MS);
        assert!(matches!(
            router.next(&mut call, MS),
            Action::Connect { index: 0, .. }
        ));
        assert_eq!(router.lsn_seen(), 4, "what was seen stays");
    }

    #[test]
    fn a_refusal_ends_the_call_and_keeps_the_primary() {
        let mut router = router(2);
        let mut call = router.begin(1, Duration::ZERO);
        connect(&mut router, &mut call, 0, 1, Duration::ZERO);
        router.next(&mut call, Duration::ZERO);
        router.answered(&mut call, error(ErrorCode::UnknownProcedure), MS);
        let Action::Done(Err(CallError::Refused { code, .. })) = router.next(&mut call, MS) else {
            panic!("a refusal ends the call");
        };
        assert_eq!(code, ErrorCode::UnknownProcedure);
        assert!(router.primary().is_some());
        assert_eq!(router.stats().refused, 1);
    }
}
