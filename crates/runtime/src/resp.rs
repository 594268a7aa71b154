//! The RESP port: Redis clients (redis-cli, redis-py, go-redis, redis-benchmark) talk to a
//! node that serves the Redis model.
//!
//! One I/O loop ([`IoLoop`]) serves every connection of the node, as Redis's own event loop
//! does: it waits on all sockets at once (epoll, through `mio`), reads what clients sent,
//! parses every whole request (pipelining), lets each connection's [`Session`] answer or turn
//! each into a call, and hands the calls of every connection gathered in one pass to the
//! node as one batch, through a [`LocalPort`]. The node hands back a turn's answers at once;
//! each connection's replies are written in request order. In a cluster the loop runs on the
//! node's own thread, which watches the loop's epoll descriptor beside its peers' sockets
//! and turns the loop when it is ready or due ([`IoLoop::turn`], [`IoLoop::pass`]): a call
//! and its answer cross no thread.
//!
//! What a command means is the session's and the model's to say; which call must wait for
//! which is the session's ([`Call::waits_for`], [`Call::holds_later`],
//! [`Call::runs_again_after`]); this module only
//! moves bytes and keeps each connection's replies in order.
//!
//! On a backup, the session turns a read-only command into a call that runs on the backup
//! ([`RunsOn::Backup`]): the thread hands it to the backup role's applier through a
//! [`BackupPort`], as a linearizable read (the applier asks the primary a `ReadIndex`
//! question and serves the read once its state reflects every write acknowledged before the
//! read arrived), and the applier hands the answer back and wakes the thread; the reply takes
//! its place among the connection's others. A read the backup cannot serve within its wait
//! (10 ms) gets `-TRYAGAIN`, naming the primary. Writes, `MULTI` blocks and `WATCH` get
//! `-READONLY`, naming the primary, as on a node with no role. A connection gets no dedup
//! slot: a plain Redis client cannot resend a command under the same (client id, seq), so
//! exactly-once across a failover is the proxy's to give.
//!
//! Pub/sub lives here, not in the database: the loop's [`Hub`] holds its connections'
//! subscriptions; a pub/sub command runs on it in the connection's order (after the replies
//! of its earlier calls, so a subscriber that hears a message sees the writes sent before
//! it), and each message a publication delivers is written to its receiver's connection in
//! that connection's protocol. Messages reach this node's subscribers only.
//!
//! `CLIENT LIST`, `CLIENT INFO` and `CLIENT KILL` need every connection, so the loop answers
//! them too (`clients`): the session checks them and says what is asked.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use tandem_node::ReadAnswer;
use tandem_redis::cmd::blocking::{WOULD_BLOCK, would_block};
use tandem_redis::pubsub::{self, Hub};
use tandem_redis::resp::{Argv, Parsed, RequestLimits, parse_request};
use tandem_redis::session::{
    Call, KillRequest, Outcome, Purpose, RunsOn, SaveKind, ScriptActivity, ServerInfo, Session,
    Step, UNBLOCKED_BY_CLIENT, UNBLOCKED_BY_ROLE, Unblock, backup_busy, passive_backup,
};
use tandem_redis::stats::{CommandStats, Tally};
use tandem_redis::wire::CallArgs;
use tandem_store::{ProcKind, Publication, Publications};
use tandem_wire::ErrorCode;

use crate::backup::{BackupHandle, BackupPort};
use crate::config::ClientLimits;
use crate::metrics::Metrics;
use crate::native::{Mailbox, NativeConns, NativeDoor};
use crate::primary::{LocalAnswer, LocalOutcome, LocalPort, PrimaryHandle};
use crate::scripts::Scripts;
use crate::stops::{StopWhen, Stops};
use crate::throttle::Throttle;
use crate::tls::TlsStream;

mod clients;
mod monitors;
mod waiting;

use waiting::{Unblocking, Waiting};

/// What the RESP front end needs of its node.
pub trait RespNode: Send + Sync + 'static {
    /// What the sessions should know of the node now.
    fn info(&self) -> ServerInfo;

    /// Calls `with` on the node's primary role, if it holds one now.
    fn with_primary(&self, with: &mut dyn FnMut(&PrimaryHandle));

    /// Calls `with` on the node's backup role, if it holds one now.
    fn with_backup(&self, with: &mut dyn FnMut(&BackupHandle));

    /// The node's metrics (the front end counts its connections there).
    fn metrics(&self) -> &Metrics;

    /// Whether a node that asks no password serves loopback clients only
    /// (`protected_mode` in its configuration).
    fn protected_mode(&self) -> bool;

    /// Relays a pub/sub message published on this node to the group's other members, if
    /// the node is the group's primary now (each delivers it to its own subscribers once it
    /// applied every write before it). A node without a group relays nothing.
    fn relay_publication(&self, shard: bool, channel: Vec<u8>, message: Vec<u8>) {
        let _ = (shard, channel, message);
    }

    /// Where the node writes its snapshot (`SAVE`, `BGSAVE`), if it keeps files.
    fn saver(&self) -> Option<&crate::saves::Saver> {
        None
    }

    /// The watch over the node's scripts (`SCRIPT KILL` asks it), if it keeps one.
    fn scripts(&self) -> Option<&crate::scripts::Scripts> {
        None
    }
}

/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Replies a connection has not taken yet before its requests are left unparsed (and so
/// unread: TCP then pushes back on the client), as Redis's output buffer limits do.
const UNSENT_MAX: usize = 4 << 20;
/// Calls sent to the primary role and not yet answered, across connections, before requests are
/// left unparsed.
const UNANSWERED_MAX: u64 = 65_536;

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const SIGNALS: Token = Token(2);
const STDIN: Token = Token(3);
const FIRST_CONN: usize = 4;
/// Socket events taken per wait.
const EVENTS_PER_TURN: usize = 1024;

/// What a caller whose call's outcome is unknown is told.
const PRIMARY_CHANGED: &str =
    "ERR the primary changed before the reply left; the command may have run";

/// What a reader whose backup role ended before it answered is told (a read changed
/// nothing: it may simply be sent again).
const BACKUP_CHANGED: &str =
    "TRYAGAIN this node's backup role changed before it served the read; retry";

/// What a client past `maxclients` is told before its connection is closed (Redis's text).
const MAXCLIENTS_REFUSAL: &[u8] = b"-ERR max number of clients reached\r\n";

/// A way to wake the thread that runs the I/O loop.
pub(crate) type Wake = Arc<dyn Fn() + Send + Sync>;

/// How a loop that another loop drives (the node thread's: [`IoLoop::turn`]) is woken when
/// something waits for it.
pub(crate) struct LoopWakers {
    /// Called on the driving thread itself (answers, letters, publications handed over by
    /// the node): it may skip the wake while that thread is awake, since it looks at the
    /// loop again before it sleeps.
    pub(crate) from_driver: Wake,
    /// Called from other threads (a native client handed over): it always wakes.
    pub(crate) from_elsewhere: Wake,
}

/// The node's I/O loop, ready to run: it serves the RESP connections accepted on its
/// listener (if the node has a RESP port) and the native clients handed to it through its
/// door, and watches what stops the node. The node thread's loop drives it, one turn at a
/// time ([`IoLoop::turn`]).
pub struct IoLoop {
    front: Front,
}

impl std::fmt::Debug for IoLoop {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("IoLoop")
    }
}

impl IoLoop {
    /// The loop for RESP connections accepted on `listener`, each held to `limits` (with
    /// `tls`, every one speaks TLS), stopping the node as `stop` says; and the door through
    /// which native clients are handed to it. The messages the node's model publishes to
    /// `publications` (keyspace notifications) reach this loop's subscribers. A loop given
    /// `wakers` is driven by another ([`IoLoop::turn`]) and wakes its thread through them;
    /// one given none wakes its own poll.
    pub(crate) fn new(
        listener: Option<std::net::TcpListener>,
        node: Arc<dyn RespNode>,
        tls: Option<Arc<rustls::ServerConfig>>,
        limits: ClientLimits,
        stop: StopWhen,
        publications: Option<Arc<Publications>>,
        wakers: Option<LoopWakers>,
    ) -> Result<(IoLoop, NativeDoor), crate::StartError> {
        let io = crate::StartError::RespPort;
        let poll = Poll::new().map_err(io)?;
        let listener = match listener {
            Some(listener) => {
                listener.set_nonblocking(true).map_err(io)?;
                let mut listener = TcpListener::from_std(listener);
                poll.registry()
                    .register(&mut listener, LISTENER, Interest::READABLE)
                    .map_err(io)?;
                Some(listener)
            }
            None => None,
        };
        let stops = Stops::register(stop, poll.registry(), SIGNALS, STDIN)
            .map_err(crate::StartError::Stops)?;
        let wakers = match wakers {
            Some(wakers) => wakers,
            None => {
                let waker = Waker::new(poll.registry(), WAKER).map_err(io)?;
                let wake: Wake = Arc::new(move || {
                    let _ = waker.wake();
                });
                LoopWakers {
                    from_driver: Arc::clone(&wake),
                    from_elsewhere: wake,
                }
            }
        };
        let (handoffs_in, handoffs) = std::sync::mpsc::channel();
        let door = NativeDoor::new(handoffs_in, wakers.from_elsewhere);
        let mailbox = Arc::new(Mailbox::new(Arc::clone(&wakers.from_driver)));
        let info = node.info();
        let front = Front {
            poll,
            events: Events::with_capacity(EVENTS_PER_TURN),
            listener,
            native: NativeConns::new(handoffs, mailbox),
            stops,
            wake: wakers.from_driver,
            again: false,
            events_full: false,
            node,
            conns: BTreeMap::new(),
            token_next: FIRST_CONN,
            port: None,
            inflight: VecDeque::new(),
            inflight_seq_first: 0,
            backup: None,
            backup_inflight: HashMap::new(),
            backup_answers: Vec::new(),
            info,
            retries: VecDeque::new(),
            waiting: Waiting::default(),
            visit: Visits::default(),
            starved: BTreeSet::new(),
            limits: RequestLimits::default(),
            argv: Argv::new(),
            chunk: vec![0; READ_CHUNK],
            answers: Vec::new(),
            pass_started: Instant::now(),
            tls,
            client_limits: limits,
            reply_bytes_total: 0,
            warned: Warned::default(),
            hub: Hub::new(),
            publications: None,
            stats: CommandStats::default(),
            monitors: monitors::Monitors::default(),
        };
        let mut io_loop = IoLoop { front };
        if let Some(publications) = publications {
            io_loop.publish_from(publications);
        }
        Ok((io_loop, door))
    }

    /// Delivers the messages the node's model publishes (keyspace notifications) to this
    /// loop's subscribers: the model must have been given the same queue
    /// (`DataModel::publish_to`). A push wakes the loop.
    fn publish_from(&mut self, publications: Arc<Publications>) {
        let wake = Arc::clone(&self.front.wake);
        publications.on_push(move || wake());
        self.front.publications = Some(publications);
    }

    /// Shows the monitors the commands the node's model runs inside its calls (a script's):
    /// the model must have been given the same feed (`DataModel::monitor_to`).
    pub(crate) fn monitor_from(&mut self, inner_calls: Arc<tandem_store::InnerCalls>) {
        self.front.monitors.watch_model(inner_calls);
    }

    /// One turn of a loop another loop drives: waits up to `timeout` for its sockets (the
    /// driver passes zero when its own poll said this loop's is ready, or just to look),
    /// then serves what they hold and what the node handed over. Fails only if waiting for
    /// the sockets failed.
    pub(crate) fn turn(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.front.turn(timeout)
    }

    /// A pass without waiting for the sockets: what the node handed over since the last
    /// (answers, letters, publications) reaches its connections.
    pub(crate) fn pass(&mut self) {
        self.front.pass();
    }

    /// When the loop must look again though its poll may not say so: now, if its last pass
    /// left requests unserved or its last wait filled its list of events; when a withheld
    /// read or a blocked call falls due; or never.
    pub(crate) fn due(&self) -> Option<Instant> {
        self.front.due()
    }

    /// The loop's own poll, which a driving loop watches (readable when a socket of this
    /// loop's is ready).
    pub(crate) fn poll_fd(&self) -> std::os::fd::RawFd {
        use std::os::fd::AsRawFd;
        self.front.poll.as_raw_fd()
    }
}

/// A call of a connection: which connection, and the call's place among its replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Owner {
    token: Token,
    serial: u64,
}

/// A read whose reply was withheld, to be sent again at `due`.
#[derive(Debug)]
struct Retry {
    owner: Owner,
    due: Instant,
}

/// A reply in a connection's order: written by the session at once, or a call's.
#[derive(Debug)]
enum Slot {
    Written(Vec<u8>),
    /// A pub/sub command, run on the hub when its turn comes (its reply silenced, or not).
    PubSub(pubsub::Request, bool),
    Call {
        call: Call,
        outcome: Option<Resolved>,
        /// When it was first sent (a withheld read is tried again for a while from then).
        sent: Instant,
        /// A blocking call's place among the waiting ones ([`Waiting`]).
        waits: Option<u64>,
    },
}

/// Reply bytes a slot holds: a written reply's, an outcome's that came back; none for a
/// call still unanswered.
fn slot_len(slot: &Slot) -> usize {
    match slot {
        Slot::Written(reply) => reply.len(),
        Slot::PubSub(..) => 0,
        Slot::Call { outcome, .. } => match outcome {
            Some(Resolved::Reply(body)) => body.len(),
            Some(Resolved::Failed(text)) => text.len(),
            None => 0,
        },
    }
}

/// A call's outcome, ready for [`Session::called`].
#[derive(Debug)]
enum Resolved {
    Reply(Vec<u8>),
    Failed(String),
}

#[derive(Debug)]
struct Conn {
    stream: TcpStream,
    /// The connection's TLS session, on a port that speaks TLS.
    tls: Option<Box<TlsStream>>,
    session: Session,
    /// Unparsed bytes are `input[start..]`; the parser needs `want` of them before it can get
    /// further (a large bulk string arrives in many reads, and parsing it again after each
    /// would be quadratic).
    input: Vec<u8>,
    start: usize,
    want: usize,
    /// The socket may have more to read (edge-triggered: until a read would block, or
    /// returns less than it asked for while the peer has not closed its end).
    readable: bool,
    /// The peer closed its end (an event said so): reads go on until they return 0.
    peer_closed: bool,
    /// Replies not yet written, from `written` on.
    out: Vec<u8>,
    written: usize,
    /// Replies not yet in `out`, in request order; the first is `slot_first`'s.
    slots: VecDeque<Slot>,
    slot_first: u64,
    /// Calls among `slots` without an outcome.
    unanswered: usize,
    /// A call that waits for the earlier ones to be answered before it is sent.
    held: Option<Call>,
    /// Nothing more is handled until every call is answered (after a WATCH).
    holding: bool,
    /// Nothing more is read: close once every reply is written (QUIT, a protocol error).
    closing: bool,
    /// Bytes of the replies waiting in `slots` (written by the session, or a call's outcome
    /// that came back) behind an unanswered call.
    slot_bytes: usize,
    /// What [`Front::reply_bytes_total`] counts of this connection.
    reply_bytes_counted: usize,
    /// The client's address, and the one it connected to (`CLIENT LIST`'s `addr`, `laddr`).
    peer: SocketAddr,
    local: Option<SocketAddr>,
    /// When it connected, and when it last sent or was sent anything (`age`, `idle`).
    connected: Instant,
    last_interaction: Instant,
}

impl Conn {
    /// A connection just accepted from `peer`, at `now`.
    fn new(
        stream: TcpStream,
        tls: Option<Box<TlsStream>>,
        session: Session,
        peer: SocketAddr,
        now: Instant,
    ) -> Conn {
        let local = stream.local_addr().ok();
        Conn {
            stream,
            tls,
            session,
            input: Vec::new(),
            start: 0,
            want: 1,
            readable: true,
            peer_closed: false,
            out: Vec::new(),
            written: 0,
            slots: VecDeque::new(),
            slot_first: 0,
            unanswered: 0,
            held: None,
            holding: false,
            closing: false,
            slot_bytes: 0,
            reply_bytes_counted: 0,
            peer,
            local,
            connected: now,
            last_interaction: now,
        }
    }

    fn serial_next(&self) -> u64 {
        self.slot_first + self.slots.len() as u64
    }

    /// Whether the connection may handle another request now.
    fn may_handle(&self) -> bool {
        self.held.is_none()
            && !self.holding
            && !self.closing
            && self.held_reply_bytes() < UNSENT_MAX
    }

    /// Reply bytes held for the client now: those not yet sent and those waiting behind an
    /// unanswered call (a pipeline of large reads counts before its first reply goes).
    fn held_reply_bytes(&self) -> usize {
        (self.out.len() - self.written) + self.slot_bytes
    }

    /// The session's reply to a request, in order behind the replies still awaited.
    fn push_written(&mut self, reply: Vec<u8>) {
        if self.slots.is_empty() {
            self.out.extend_from_slice(&reply);
        } else {
            self.slot_bytes += reply.len();
            self.slots.push_back(Slot::Written(reply));
        }
    }

    /// Moves the replies at the front whose outcome is known into `out`, running the
    /// pub/sub commands among them on `hub`, and counts each call's reply in `stats`.
    fn drain_slots(
        &mut self,
        hub: &mut Hub,
        stats: &mut CommandStats,
        saver: Option<&crate::saves::Saver>,
    ) {
        while let Some(front) = self.slots.front() {
            if matches!(front, Slot::Call { outcome: None, .. }) {
                break;
            }
            let slot = self.slots.pop_front().expect("a front slot");
            self.slot_first += 1;
            self.slot_bytes -= slot_len(&slot);
            match slot {
                Slot::Written(reply) => self.out.extend_from_slice(&reply),
                Slot::PubSub(request, silent) => {
                    let mut reply = Vec::new();
                    self.run_pubsub(hub, request, silent, &mut reply);
                    self.out.extend_from_slice(&reply);
                }
                Slot::Call {
                    mut call, outcome, ..
                } => {
                    let mut outcome = outcome.expect("answered");
                    if let Purpose::Save(kind) = call.purpose {
                        outcome = save(kind, outcome, saver);
                        call.purpose = Purpose::Command;
                    }
                    let outcome = match &outcome {
                        Resolved::Reply(body) => Outcome::Reply(body),
                        Resolved::Failed(text) => Outcome::Failed(text),
                    };
                    let tally = std::mem::take(&mut call.tally);
                    let start = self.out.len();
                    self.session.called(call, outcome, &mut self.out, Some(hub));
                    stats.count(&tally, &self.out[start..]);
                }
            }
        }
        if self.unanswered == 0 {
            self.holding = false;
        }
        debug_assert_eq!(
            self.slot_bytes,
            self.slots.iter().map(slot_len).sum::<usize>(),
            "slot_bytes counts the replies waiting in slots"
        );
    }

    /// Runs a pub/sub command of this connection on `hub`, appending its answer to `reply`
    /// (a silenced reply is dropped; the confirmations of subscriptions are pushes, never
    /// silenced), and tells the session whether it is still subscribed.
    fn run_pubsub(
        &mut self,
        hub: &mut Hub,
        request: pubsub::Request,
        silent: bool,
        reply: &mut Vec<u8>,
    ) {
        let id = self.session.id();
        let proto = self.session.proto();
        let push = request.answers_with_push();
        let mut answer = Vec::new();
        hub.run(id, proto, request, &mut answer);
        // As Redis: a publication's messages to the publisher itself (a RESP3 connection may
        // publish where it listens) come before the count.
        for message in hub.take_deliveries_to(id) {
            message.write(proto, reply);
        }
        if !silent || push {
            reply.extend_from_slice(&answer);
        }
        self.session.set_subscribed(hub.subscriptions(id) > 0);
    }

    /// After an answer: the call held back goes out once every earlier one is answered.
    fn release_held(&mut self) -> Option<Call> {
        if self.unanswered == 0 {
            self.held.take()
        } else {
            None
        }
    }

    /// Whether a blocking call of the connection waits ([`Waiting`]).
    fn waits(&self) -> bool {
        self.slots
            .iter()
            .any(|slot| matches!(slot, Slot::Call { waits: Some(_), .. }))
    }

    fn unanswered_calls(&self) -> impl Iterator<Item = &Call> {
        self.slots.iter().filter_map(|slot| match slot {
            Slot::Call {
                call,
                outcome: None,
                ..
            } => Some(call),
            _ => None,
        })
    }

    /// Reads what the client sent (plaintext, through TLS if the port speaks it).
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match &mut self.tls {
            Some(tls) => tls.read(&mut self.stream, buf),
            None => self.stream.read(buf),
        }
    }

    /// Writes what it can of `out` (a write that takes bytes is an interaction at `now`).
    /// Fails if the client is gone.
    fn write_out(&mut self, now: Instant) -> std::io::Result<()> {
        if let Some(tls) = &mut self.tls {
            tls.flush_tls(&mut self.stream)?;
        }
        while self.written < self.out.len() {
            let unsent = &self.out[self.written..];
            let wrote = match &mut self.tls {
                Some(tls) => tls.write(&mut self.stream, unsent),
                None => self.stream.write(unsent),
            };
            match wrote {
                Ok(0) => return Err(ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.written += n;
                    self.last_interaction = now;
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        self.out.clear();
        self.written = 0;
        Ok(())
    }

    fn done(&self) -> bool {
        let tls_pending = self.tls.as_ref().is_some_and(|tls| tls.pending());
        self.closing && self.slots.is_empty() && self.out.is_empty() && !tls_pending
    }
}

/// The event loop's state.
struct Front {
    poll: Poll,
    /// What the last wait found (kept between turns).
    events: Events,
    listener: Option<TcpListener>,
    /// The native clients the node's acceptor handed over.
    native: NativeConns,
    /// What stops the node.
    stops: Stops,
    /// Wakes the thread that runs the loop (the node's answers, letters and publications
    /// call it).
    wake: Wake,
    /// The last pass left requests unserved (too many calls were unanswered then): the next
    /// turn must not wait.
    again: bool,
    /// The last wait filled its list of events: sockets may be ready that no new event
    /// will announce, so the loop looks again at once.
    events_full: bool,
    node: Arc<dyn RespNode>,
    conns: BTreeMap<Token, Box<Conn>>,
    token_next: usize,
    /// The port into the primary role the calls go to, while this node holds one.
    port: Option<LocalPort>,
    /// The calls sent on `port` and not yet answered, by seq from `inflight_seq_first`;
    /// `None` once answered out of turn, or for a connection that closed.
    inflight: VecDeque<Option<Owner>>,
    inflight_seq_first: u64,
    /// The port into the backup role the reads go to, while this node holds one.
    backup: Option<BackupPort>,
    /// The reads sent on `backup` and not yet answered, by seq (answered in any order).
    backup_inflight: HashMap<u64, Owner>,
    backup_answers: Vec<(u64, Option<ReadAnswer>)>,
    /// What the sessions knew of the node at the last pass that looked at a connection.
    info: ServerInfo,
    /// Withheld reads to send again, in the order they fall due.
    retries: VecDeque<Retry>,
    /// Blocking calls whose connections wait for a write to serve them.
    waiting: Waiting,
    /// Connections to look at in this pass: readable, writable, or with new replies.
    visit: Visits,
    /// Connections that stopped handling requests because too many calls were unanswered.
    starved: BTreeSet<Token>,
    limits: RequestLimits,
    argv: Argv,
    chunk: Vec<u8>,
    answers: Vec<LocalAnswer>,
    /// When the current pass began.
    pass_started: Instant,
    /// The port speaks TLS with these settings.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// `maxclients` and the output buffer limits.
    client_limits: ClientLimits,
    /// Reply bytes every connection holds and has not sent, as each last counted them.
    reply_bytes_total: usize,
    /// The warnings clients can cause, each logged at most once a minute.
    warned: Warned,
    /// The connections' pub/sub subscriptions, and the messages to write.
    hub: Hub,
    /// What the node's committed calls published (keyspace notifications), if it publishes.
    publications: Option<Arc<Publications>>,
    /// The node's command and error counters (`INFO commandstats`, `errorstats`, `stats`):
    /// this loop sees every RESP request and the reply each gets.
    stats: CommandStats,
    /// The connections in `MONITOR`, and what they are to be shown.
    monitors: monitors::Monitors,
}

/// The connections a pass is to look at, each once, in the order their events came: the
/// requests of several clients reach the node thread in the order the clients sent them (as in
/// Redis, whose loop handles sockets in the order they became readable), so a push sent
/// after another client's blocking pop runs after that pop's first try.
#[derive(Debug, Default)]
pub(crate) struct Visits {
    order: VecDeque<Token>,
    queued: BTreeSet<Token>,
}

impl Visits {
    pub(crate) fn insert(&mut self, token: Token) {
        if self.queued.insert(token) {
            self.order.push_back(token);
        }
    }

    fn pop_front(&mut self) -> Option<Token> {
        let token = self.order.pop_front()?;
        self.queued.remove(&token);
        Some(token)
    }

    fn extend(&mut self, tokens: impl IntoIterator<Item = Token>) {
        for token in tokens {
            self.insert(token);
        }
    }

    fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

/// The warnings a client can cause on the RESP port, each rate-limited.
#[derive(Debug)]
struct Warned {
    cross_protocol: Throttle,
    maxclients: Throttle,
    output_buffer: Throttle,
}

impl Default for Warned {
    fn default() -> Warned {
        let minute = std::time::Duration::from_secs(60);
        Warned {
            cross_protocol: Throttle::new(minute),
            maxclients: Throttle::new(minute),
            output_buffer: Throttle::new(minute),
        }
    }
}

impl Front {
    fn due(&self) -> Option<Instant> {
        if self.again || self.events_full {
            return Some(Instant::now());
        }
        // The clock is read only when something falls due (not on every wake-up).
        if self.retries.is_empty() && self.waiting.is_empty() {
            return None;
        }
        let retry_due = self.retries.front().map(|retry| retry.due);
        [retry_due, self.waiting.look_again_by(Instant::now())]
            .into_iter()
            .flatten()
            .min()
    }

    fn turn(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        let mut events = std::mem::replace(&mut self.events, Events::with_capacity(0));
        let waited = self.poll.poll(&mut events, timeout);
        match waited {
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) => {
                self.events = events;
                return Err(err);
            }
            Ok(()) => {
                // A full list may have left ready sockets behind, and (edge-triggered) no
                // new event will come for them: the driver must turn the loop again.
                self.events_full = events.iter().count() >= EVENTS_PER_TURN;
                self.take_events(&events);
            }
        }
        self.events = events;
        self.pass();
        Ok(())
    }

    fn take_events(&mut self, events: &Events) {
        for event in events {
            match event.token() {
                LISTENER => self.accept(),
                WAKER => {}
                SIGNALS if self.stops.signalled() => crate::stop_node(),
                STDIN if self.stops.stdin_ended() => crate::stop_node(),
                SIGNALS | STDIN => {}
                token => {
                    if let Some(conn) = self.conns.get_mut(&token) {
                        conn.readable |= event.is_readable() || event.is_read_closed();
                        conn.peer_closed |= event.is_read_closed();
                        self.visit.insert(token);
                    } else if let Some(conn) = self.native.conns.get_mut(&token) {
                        conn.readable(event.is_readable(), event.is_read_closed());
                        self.visit.insert(token);
                    }
                }
            }
        }
    }

    fn accept(&mut self) {
        loop {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((mut stream, peer)) => {
                    // The password is the configuration's: the sessions' view of the node,
                    // taken at the start, holds it for good.
                    if let Some(refusal) = tandem_redis::session::protected_refusal(
                        peer.ip(),
                        self.info.requirepass.is_some(),
                        self.node.protected_mode(),
                    ) {
                        // A fresh socket's buffer takes the whole line; then it is closed.
                        let _ = std::io::Write::write(&mut stream, refusal.as_bytes());
                        continue;
                    }
                    if self.node.metrics().client_connections.get()
                        >= self.client_limits.maxclients as i64
                    {
                        let _ = std::io::Write::write(&mut stream, MAXCLIENTS_REFUSAL);
                        self.node.metrics().connection_refused("maxclients");
                        if let Some(held_back) = self.warned.maxclients.pass(Instant::now()) {
                            tracing::warn!(
                                %peer,
                                "refused a Redis client: {} connections are open, the most \
                                 tuning.maxclients allows ({held_back} more refused since the \
                                 last such line)",
                                self.client_limits.maxclients
                            );
                        }
                        continue;
                    }
                    let token = Token(self.token_next);
                    self.token_next += 1;
                    let _ = stream.set_nodelay(true);
                    let interest = Interest::READABLE | Interest::WRITABLE;
                    if self
                        .poll
                        .registry()
                        .register(&mut stream, token, interest)
                        .is_err()
                    {
                        continue;
                    }
                    let tls = match &self.tls {
                        Some(config) => match TlsStream::new(config) {
                            Ok(tls) => Some(Box::new(tls)),
                            Err(err) => {
                                tracing::warn!("cannot start TLS for a RESP client: {err}");
                                let _ = self.poll.registry().deregister(&mut stream);
                                continue;
                            }
                        },
                        None => None,
                    };
                    self.node.metrics().client_connections.inc();
                    self.stats.connection_received();
                    let session = Session::new(token.0 as u64 - FIRST_CONN as u64 + 1)
                        .with_reply_limit(self.client_limits.reply_limit());
                    let conn = Conn::new(stream, tls, session, peer, Instant::now());
                    self.conns.insert(token, Box::new(conn));
                    self.visit.insert(token);
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => return,
                // A connection that failed as it was accepted, or no file descriptors
                // left: the listener stays registered and the next event tries again.
                Err(_) => return,
            }
        }
    }

    /// One pass: the answers that came, the retries due, every connection to look at, and
    /// the calls gathered sent as one batch.
    fn pass(&mut self) {
        // One reading of the clock serves the pass: a call's send time only bounds how long
        // a withheld read is tried again.
        self.pass_started = Instant::now();
        self.again = false;
        let token_next = &mut self.token_next;
        let registry = self.poll.registry();
        self.native.take_handoffs(
            registry,
            || {
                *token_next += 1;
                Token(*token_next - 1)
            },
            &mut self.visit,
        );
        self.native.take_mail(&mut self.visit);
        // A call's notifications go out no later than its reply (`take_answers` takes them
        // again once it has the answers); a message to a connection still waits behind the
        // replies that connection is owed.
        self.take_publications();
        self.take_answers();
        self.take_backup_answers();
        self.retry_due();
        if !self.waiting.is_empty() {
            // A lost role must end the waits even if no connection asks anything meanwhile.
            self.refresh_port();
            self.wake_waiting();
        }
        // What the sessions know of the node is asked for (and the ports follow its roles)
        // only in a pass that serves a RESP connection: a native client needs neither.
        let mut info = None;
        loop {
            if self.hub.has_deliveries() {
                self.deliver();
            }
            let Some(token) = self.visit.pop_front() else {
                break;
            };
            if self.native.conns.contains_key(&token) {
                self.native.serve(token, self.poll.registry());
                continue;
            }
            let info = info.get_or_insert_with(|| {
                self.refresh_port();
                self.refresh_backup();
                let mut info = self.node.info();
                info.pubsub_counts = self.hub.counts();
                info.repl_offset = match (&self.port, &self.backup) {
                    (Some(port), _) => port.lsn_committed(),
                    (None, Some(backup)) => backup.lsn_applied(),
                    (None, None) => 0,
                };
                info
            });
            self.serve(token, info);
        }
        if let Some(info) = info {
            self.info = info;
            self.keep_to_total_budget();
        }
        for published in self.hub.take_published() {
            let pubsub::Published {
                shard,
                channel,
                message,
            } = published;
            self.node.relay_publication(shard, channel, message);
        }
        self.feed_monitors();
        self.send_calls();
        let blocked = self.waiting.blocked() as i64;
        self.node.metrics().blocked_clients.set(blocked);
        if self.unanswered() < UNANSWERED_MAX {
            self.visit.extend(std::mem::take(&mut self.starved));
            // Their requests wait in buffers already read: no event will come for them.
            self.again = !self.visit.is_empty();
        }
    }

    /// Keeps `port` leading to the node's primary role now: a new role gets a new port, and
    /// the calls the old one left unanswered get an error (their outcome is unknown).
    fn refresh_port(&mut self) {
        let wake = self.wake_loop();
        let (port, orphaned) = follow_role(
            self.port.take(),
            |with| self.node.with_primary(with),
            LocalPort::is_of,
            |handle: &PrimaryHandle| handle.local_port(Arc::clone(&wake)),
        );
        if orphaned {
            self.fail_inflight();
        }
        self.port = port;
    }

    /// Calls sent to either role and not yet answered.
    fn unanswered(&self) -> u64 {
        let primary = self.port.as_ref().map_or(0, LocalPort::unanswered);
        primary + self.backup_inflight.len() as u64
    }

    /// Keeps `backup` leading to the node's backup role now: a new role gets a new port,
    /// and the reads the old one left unanswered get an error once its answers are taken.
    fn refresh_backup(&mut self) {
        let wake = self.wake_loop();
        let (port, orphaned) = follow_role(
            self.backup.take(),
            |with| self.node.with_backup(with),
            BackupPort::is_of,
            |handle: &BackupHandle| handle.local_port(Arc::clone(&wake)),
        );
        if orphaned {
            let owners: Vec<Owner> = self.backup_inflight.drain().map(|(_, o)| o).collect();
            for owner in owners {
                self.resolve(owner, Resolved::Failed(BACKUP_CHANGED.into()));
            }
        }
        self.backup = port;
    }

    /// What a role calls when it has answers for this loop: a wake-up of its poll.
    fn wake_loop(&self) -> Wake {
        Arc::clone(&self.wake)
    }

    /// The answers the backup role's applier handed back: each becomes its call's outcome,
    /// as a read on the primary's does.
    fn take_backup_answers(&mut self) {
        let Some(port) = self.backup.as_ref() else {
            return;
        };
        let mut answers = std::mem::take(&mut self.backup_answers);
        port.take(&mut answers);
        for (seq, answer) in answers.drain(..) {
            // A read of a role whose reads were already failed is no longer tracked.
            let Some(owner) = self.backup_inflight.remove(&seq) else {
                continue;
            };
            let resolved = match answer {
                Some(ReadAnswer::Served { body, .. }) => Resolved::Reply(body),
                Some(ReadAnswer::RolledBack { reason, .. }) => Resolved::Failed(with_code(&reason)),
                // A passive backup runs no procedure.
                Some(ReadAnswer::Writes { .. }) => Resolved::Failed(passive_backup(&self.info)),
                Some(ReadAnswer::Unknown { proc_id }) => {
                    Resolved::Failed(format!("ERR no procedure has id {proc_id}"))
                }
                Some(ReadAnswer::Busy { .. }) | None => Resolved::Failed(backup_busy(&self.info)),
            };
            self.resolve(owner, resolved);
        }
        self.backup_answers = answers;
    }

    /// Every call in flight gets an error: the role that had them is gone.
    fn fail_inflight(&mut self) {
        let owners: Vec<Owner> = self.inflight.drain(..).flatten().collect();
        self.inflight_seq_first = 0;
        for owner in owners {
            self.resolve(owner, Resolved::Failed(PRIMARY_CHANGED.into()));
        }
        let retries: Vec<Retry> = self.retries.drain(..).collect();
        for retry in retries {
            self.resolve(retry.owner, Resolved::Failed(PRIMARY_CHANGED.into()));
        }
        for owner in self.waiting.take_untried() {
            self.resolve(owner, Resolved::Failed(UNBLOCKED_BY_ROLE.into()));
        }
    }

    fn take_answers(&mut self) {
        let Some(port) = self.port.as_mut() else {
            return;
        };
        let mut answers = std::mem::take(&mut self.answers);
        let gone = port.take(&mut answers).is_err();
        // The node queues a call's notifications before it answers the call: taken now, they
        // hold those of every answer just taken, and reach their subscribers first (behind
        // the replies each subscriber is still owed).
        self.take_publications();
        for answer in answers.drain(..) {
            let index = answer
                .seq
                .checked_sub(self.inflight_seq_first)
                .expect("an answer to a call sent");
            let owner = self
                .inflight
                .get_mut(index as usize)
                .and_then(Option::take)
                .expect("one answer per call sent");
            self.answered(owner, answer.outcome);
        }
        self.answers = answers;
        while self.inflight.front().is_some_and(Option::is_none) {
            self.inflight.pop_front();
            self.inflight_seq_first += 1;
        }
        if gone {
            self.port = None;
            self.fail_inflight();
        }
    }

    /// A call's outcome came: a withheld read is tried again for a while, everything else is
    /// the caller's reply.
    fn answered(&mut self, owner: Owner, outcome: LocalOutcome) {
        let resolved = match outcome {
            LocalOutcome::Committed(body) => Resolved::Reply(body),
            LocalOutcome::RolledBack(message) => match would_block(&message) {
                Some(after) => match self.found_nothing(owner, &after) {
                    Some(resolved) => resolved,
                    None => return,
                },
                None => Resolved::Failed(with_code(&message)),
            },
            LocalOutcome::Unanswered { code, message } => {
                // Whether a withheld reply's call runs again is the session's to say (a read
                // does, for a while: no write of its connection was sent after it).
                let pause = match self.slot(owner) {
                    Some(Slot::Call { call, sent, .. }) => call.runs_again_after(sent.elapsed()),
                    _ => None,
                };
                if let Some(pause) = pause {
                    let due = Instant::now() + pause;
                    self.retries.push_back(Retry { owner, due });
                    return;
                }
                Resolved::Failed(unanswered(code, &message))
            }
        };
        self.resolve(owner, resolved);
    }

    fn slot(&mut self, owner: Owner) -> Option<&mut Slot> {
        let conn = self.conns.get_mut(&owner.token)?;
        let index = owner.serial.checked_sub(conn.slot_first)?;
        conn.slots.get_mut(index as usize)
    }

    /// Settles a call's outcome, and moves its connection's replies along.
    fn resolve(&mut self, owner: Owner, resolved: Resolved) {
        let Some(Slot::Call { outcome, waits, .. }) = self.slot(owner) else {
            // Its connection closed.
            return;
        };
        assert!(outcome.is_none(), "a call is answered once");
        *outcome = Some(resolved);
        if let Some(order) = waits.take() {
            self.waiting.end(order);
        }
        let conn = self
            .conns
            .get_mut(&owner.token)
            .expect("the slot's connection");
        let index = (owner.serial - conn.slot_first) as usize;
        conn.slot_bytes += slot_len(&conn.slots[index]);
        conn.unanswered -= 1;
        conn.drain_slots(&mut self.hub, &mut self.stats, self.node.saver());
        self.visit.insert(owner.token);
    }

    fn retry_due(&mut self) {
        let now = Instant::now();
        while self.retries.front().is_some_and(|retry| retry.due <= now) {
            let retry = self.retries.pop_front().expect("a due retry");
            let Some(Slot::Call { call, .. }) = self.slot(retry.owner) else {
                continue;
            };
            let (proc_id, read_only) = (call.proc_id.0, call.kind == ProcKind::Read);
            let args = call.args.clone();
            match self.port.as_mut() {
                Some(port) => {
                    let seq = port.push(proc_id, args, read_only);
                    self.track(seq, retry.owner);
                }
                None => self.resolve(retry.owner, Resolved::Failed(PRIMARY_CHANGED.into())),
            }
        }
    }

    fn track(&mut self, seq: u64, owner: Owner) {
        if self.inflight.is_empty() {
            self.inflight_seq_first = seq;
        }
        assert_eq!(
            self.inflight_seq_first + self.inflight.len() as u64,
            seq,
            "calls are numbered in the order sent"
        );
        self.inflight.push_back(Some(owner));
    }

    fn send_calls(&mut self) {
        let Some(port) = self.port.as_mut() else {
            return;
        };
        if port.send().is_err() {
            self.port = None;
            self.fail_inflight();
        }
    }

    /// Reads, handles and writes what one connection has, then closes it if it is done.
    fn serve(&mut self, token: Token, info: &ServerInfo) {
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        // A client that left while it waits in a blocking command is dropped at once, as
        // Redis drops it: no write may come to answer it.
        let left_waiting = conn.peer_closed && conn.waits();
        self.start_scheduled_save(token, &mut conn, info);
        let alive = !left_waiting
            && self.handle_requests(token, &mut conn, info)
            && conn.write_out(self.pass_started).is_ok()
            && self.within_output_buffer(&conn);
        self.reply_bytes_total -= conn.reply_bytes_counted;
        if alive && !conn.done() {
            conn.reply_bytes_counted = conn.held_reply_bytes();
            self.reply_bytes_total += conn.reply_bytes_counted;
            self.conns.insert(token, conn);
        } else {
            self.close(token, conn);
        }
    }

    /// Makes the call of a `BGSAVE` that a block of `conn`'s scheduled, once it can start:
    /// after the block's reply, behind the connection's earlier calls, and not while a call
    /// of the connection's is held back (it would take that call's place).
    fn start_scheduled_save(&mut self, token: Token, conn: &mut Conn, info: &ServerInfo) {
        if !conn.session.save_is_scheduled() || conn.held.is_some() {
            return;
        }
        let Some(call) = conn.session.take_scheduled_save(info) else {
            return;
        };
        if call.waits_for(conn.unanswered_calls()) {
            conn.held = Some(call);
        } else {
            self.send(token, conn, call);
        }
    }

    fn close(&mut self, token: Token, mut conn: Box<Conn>) {
        self.waiting.forget(token);
        self.monitors.remove(token);
        self.hub.forget(conn.session.id());
        let _ = self.poll.registry().deregister(&mut conn.stream);
        self.node.metrics().client_connections.dec();
    }

    /// Whether `conn` holds no more unsent replies than one connection may (Redis's
    /// `client-output-buffer-limit normal` hard limit); one that holds more is closed, as
    /// Redis closes it, for a client that does not read its replies must not grow the node
    /// without bound.
    fn within_output_buffer(&mut self, conn: &Conn) -> bool {
        let Some(limit) = self.client_limits.output_buffer_bytes else {
            return true;
        };
        let held = conn.held_reply_bytes();
        if held <= limit {
            return true;
        }
        self.refuse_output_buffer(conn, held, "tuning.output_buffer_mib");
        false
    }

    /// Counts and (rate-limited) logs a connection closed for the replies it left unread.
    fn refuse_output_buffer(&mut self, conn: &Conn, held: usize, limit_field: &str) {
        self.node.metrics().connection_refused("output_buffer");
        if let Some(held_back) = self.warned.output_buffer.pass(self.pass_started) {
            let peer = conn.stream.peer_addr().map(|peer| peer.to_string());
            tracing::warn!(
                "closed the Redis client at {}: it left {held} bytes of replies unread, past \
                 {limit_field} ({held_back} more closed since the last such line)",
                peer.as_deref().unwrap_or("(gone)")
            );
        }
    }

    /// While every connection's unsent replies together pass the total budget, closes the
    /// connection that holds the most (as Redis's client eviction under
    /// `maxmemory-clients`): one client's pipeline cannot take the node's memory, and the
    /// clients that read their replies keep being served.
    fn keep_to_total_budget(&mut self) {
        let Some(budget) = self.client_limits.output_buffers_total_bytes else {
            return;
        };
        while self.reply_bytes_total > budget {
            // As Redis's client eviction, it spares a connection that asked so
            // (`CLIENT NO-EVICT on`), even if the budget then stays exceeded.
            let largest = self
                .conns
                .iter()
                .filter(|(_, conn)| !conn.session.no_evict())
                .max_by_key(|(_, conn)| conn.reply_bytes_counted)
                .map(|(token, _)| *token);
            let Some(token) = largest else { return };
            let conn = self.conns.remove(&token).expect("the largest connection");
            self.reply_bytes_total -= conn.reply_bytes_counted;
            self.refuse_output_buffer(
                &conn,
                conn.reply_bytes_counted,
                "tuning.output_buffers_total_mib",
            );
            self.close(token, conn);
        }
    }

    /// Handles every whole request the connection may handle now, reading more while the
    /// socket has it. Returns false once the connection failed.
    fn handle_requests(&mut self, token: Token, conn: &mut Conn, info: &ServerInfo) -> bool {
        loop {
            if let Some(call) = conn.release_held() {
                self.send(token, conn, call);
            }
            while conn.input.len() - conn.start >= conn.want && conn.may_handle() {
                if self.unanswered() >= UNANSWERED_MAX {
                    self.starved.insert(token);
                    return true;
                }
                if !self.handle_one(token, conn, info) {
                    return false;
                }
            }
            if !conn.may_handle() || !conn.readable {
                return true;
            }
            if conn.start > 0 {
                conn.input.drain(..conn.start);
                conn.start = 0;
            }
            // Read into a chunk and append what came: growing `input` by a chunk of zeros
            // first would cost a 64 KiB memset per read.
            match conn.read(&mut self.chunk) {
                // The client sent all it will: its replies still go out (`printf … | nc`),
                // then the connection closes.
                Ok(0) => {
                    conn.readable = false;
                    conn.closing = true;
                }
                Ok(n) => {
                    conn.input.extend_from_slice(&self.chunk[..n]);
                    conn.last_interaction = self.pass_started;
                    // A plain socket that gave less than was asked is empty now: bytes that
                    // come later raise a new readable event, so the read that would only say
                    // `WouldBlock` (one system call per request under load) is skipped, as
                    // nginx does. Not under TLS (the session may hold decrypted bytes back),
                    // nor once the peer closed its end (no event would follow to say so).
                    if n < self.chunk.len() && conn.tls.is_none() && !conn.peer_closed {
                        conn.readable = false;
                    }
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => conn.readable = false,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(_) => return false,
            }
        }
    }

    /// Parses and handles one request (or learns how many more bytes it needs).
    /// Returns false when the connection must close at once (an HTTP request).
    fn handle_one(&mut self, token: Token, conn: &mut Conn, info: &ServerInfo) -> bool {
        self.limits.unauthenticated = conn.session.awaits_auth(info);
        match parse_request(&conn.input[conn.start..], &self.limits, &mut self.argv) {
            Ok(Parsed::Incomplete { at_least }) => {
                conn.want = at_least.max(conn.input.len() - conn.start + 1);
            }
            Ok(Parsed::Skip { consumed }) => {
                conn.start += consumed;
                conn.want = 1;
            }
            Ok(Parsed::Command { consumed }) => {
                conn.start += consumed;
                conn.want = 1;
                return self.handle_command(token, conn, info, consumed);
            }
            Err(err) => {
                let reply = format!("-ERR {err}\r\n").into_bytes();
                self.stats.error_reply(&reply);
                conn.push_written(reply);
                conn.closing = true;
            }
        }
        true
    }

    /// `SHUTDOWN`: a node process stops as `SIGTERM` stops it (its log writes and syncs every
    /// record ordered so far, then the process exits; the connection closes unanswered, as
    /// Redis's does). A node inside another program, or a `SAVE` asked without `FORCE` (a
    /// node writes no RDB file when it stops), answers Redis's failed-shutdown error and
    /// says why in the log.
    fn shutdown(&mut self, conn: &mut Conn, save_refused: bool, tally: &Tally, silent: bool) {
        let peer = conn
            .stream
            .peer_addr()
            .map_or_else(|_| "an unknown address".to_owned(), |peer| peer.to_string());
        let refusal = if save_refused {
            "SHUTDOWN SAVE refused: a node writes no RDB file when it stops (its log and its \
             backups keep the data); SHUTDOWN, SHUTDOWN NOSAVE or SHUTDOWN SAVE FORCE stops it"
        } else if !self.stops.ends_process() {
            "SHUTDOWN refused: this node runs inside another program, which stops it"
        } else {
            tracing::warn!("SHUTDOWN from {peer}: the node stops");
            crate::stop_node()
        };
        tracing::warn!("{refusal} (asked by {peer})");
        let reply = b"-ERR Errors trying to SHUTDOWN. Check logs.\r\n".to_vec();
        self.loop_reply(conn, tally, reply, silent);
    }

    /// Handles the request just parsed into `argv` (it took `request_len` bytes of the
    /// connection's input): the session answers it or says what to do, which is done here.
    /// Returns false when the connection must close at once (an HTTP request).
    fn handle_command(
        &mut self,
        token: Token,
        conn: &mut Conn,
        info: &ServerInfo,
        request_len: usize,
    ) -> bool {
        let mut written = Vec::new();
        let info = self.session_view(conn, info);
        // The block an `EXEC` runs, for the monitors (copied only while one watches).
        let block = match self.monitors.is_empty() {
            true => None,
            false => conn.session.queued().map(<[Argv]>::to_vec),
        };
        let db = conn.session.db();
        let step = conn.session.handle(&self.argv, &info, &mut written);
        let tally = conn.session.take_tally();
        if !self.monitors.is_empty() {
            self.show_monitors(token, conn, db, &step, &tally, block.as_deref());
        }
        // A call's reply is counted when it is written (`Conn::drain_slots`); a reply the
        // loop writes, when it is.
        let loop_replies = matches!(
            step,
            Step::Call(_)
                | Step::KillScript(_)
                | Step::ClientList(_)
                | Step::ClientKill(_)
                | Step::Shutdown { .. }
        );
        if !loop_replies {
            self.stats.count(&tally, &written);
        }
        // A refused password (AUTH, HELLO … AUTH) is answered at once: counted and logged as
        // a failed authentication.
        self.node
            .metrics()
            .resp_replied(&written, || conn.stream.peer_addr().ok());
        let silent = conn.session.reply_silenced();
        match step {
            Step::KillScript(_) if self.node.scripts().is_some_and(Scripts::kill) => {
                self.stats.count(&tally, b"+OK\r\n");
                if !silent {
                    conn.push_written(b"+OK\r\n".to_vec());
                }
            }
            // The script ended before the ask: the call answers `NOTBUSY`.
            Step::Call(call) | Step::KillScript(call) => {
                conn.closing |= call.closes_connection();
                if call.waits_for(conn.unanswered_calls()) {
                    conn.held = Some(call);
                } else {
                    self.send(token, conn, call);
                }
            }
            Step::Replied => conn.push_written(written),
            Step::Unblock(unblock) => {
                let ended = self.unblock(unblock);
                if !silent {
                    conn.push_written(format!(":{}\r\n", i64::from(ended)).into_bytes());
                }
            }
            Step::PubSub(request) => self.pubsub(conn, request, silent, written),
            Step::ClientList(request) => {
                let reply = self.client_list(token, conn, &request, request_len);
                self.loop_reply(conn, &tally, reply, silent);
            }
            Step::ClientKill(request) => {
                self.kill_clients(conn, &request, &tally, silent, request_len);
            }
            Step::Shutdown { save_refused } => self.shutdown(conn, save_refused, &tally, silent),
            Step::Monitor => {
                conn.push_written(written);
                self.monitors.add(token);
            }
            Step::Close => {
                conn.push_written(written);
                conn.closing = true;
            }
            Step::CrossProtocol => {
                self.refuse_cross_protocol(conn);
                return false;
            }
        }
        true
    }

    /// Shows the monitors the request just handled for `conn` (whose commands ran in `db`),
    /// if it ran; a `RESET` ends the connection's own monitoring.
    fn show_monitors(
        &mut self,
        token: Token,
        conn: &Conn,
        db: u8,
        step: &Step,
        tally: &Tally,
        block: Option<&[Argv]>,
    ) {
        let tally = match step {
            Step::Call(call) | Step::KillScript(call) => &call.tally,
            _ => tally,
        };
        let client = conn
            .stream
            .peer_addr()
            .map_or_else(|_| "?:0".to_owned(), |peer| peer.to_string());
        self.monitors
            .show(u32::from(db), &client, &self.argv, tally, block);
        if self
            .argv
            .get(0)
            .is_some_and(|name| name.eq_ignore_ascii_case(b"RESET"))
        {
            self.monitors.remove(token);
        }
    }

    /// Writes the lines waiting for the monitors to each of them.
    fn feed_monitors(&mut self) {
        let Some(lines) = self.monitors.take_lines() else {
            return;
        };
        let tokens: Vec<Token> = self.monitors.tokens().collect();
        for token in tokens {
            if let Some(conn) = self.conns.get_mut(&token) {
                conn.push_written(lines.clone());
                self.visit.insert(token);
            }
        }
    }

    /// What the session handling the connection's next request should know of the node:
    /// `info`, unless the request needs more or less of it.
    fn session_view<'a>(&self, conn: &Conn, info: &'a ServerInfo) -> Cow<'a, ServerInfo> {
        let mut view = Cow::Borrowed(info);
        // A connection waiting for its own calls reads nothing of a script that runs, as
        // Redis's blocked script caller: it gets no `-BUSY` and its `SCRIPT KILL` waits.
        let waits = conn.unanswered > 0 || conn.held.is_some();
        if waits && info.script != ScriptActivity::Idle {
            view.to_mut().script = ScriptActivity::Idle;
        }
        // Only a request that shows the counters pays for their copy.
        if conn.session.wants_stats(&self.argv) {
            view.to_mut().command_stats = Some(Arc::new(self.stats.clone()));
        }
        view
    }

    /// `CLIENT KILL` from `conn`, whose request took `request_len` bytes: kills the
    /// connections it matches and answers how many.
    fn kill_clients(
        &mut self,
        conn: &mut Conn,
        request: &KillRequest,
        tally: &Tally,
        silent: bool,
        request_len: usize,
    ) {
        let (killed, caller_too) = self.client_kill(conn, request, request_len);
        let mut reply = Vec::new();
        request.write_reply(killed, conn.session.proto(), &mut reply);
        self.loop_reply(conn, tally, reply, silent);
        // As Redis: a connection that killed itself is closed after its reply.
        conn.closing |= caller_too;
    }

    /// A reply the loop wrote for the connection's request, counted as `tally` says and sent
    /// unless `silent` (`CLIENT REPLY OFF`, counted then as a reply without an error).
    fn loop_reply(&mut self, conn: &mut Conn, tally: &Tally, reply: Vec<u8>, silent: bool) {
        if silent {
            self.stats.count(tally, b"");
        } else {
            self.stats.count(tally, &reply);
            conn.push_written(reply);
        }
    }

    /// A pub/sub command (after `written`, `RESET`'s reply): run now if nothing of the
    /// connection's is still awaited, else in its turn, the connection handling nothing more
    /// until then (whether it is subscribed decides what it may send next).
    fn pubsub(
        &mut self,
        conn: &mut Conn,
        request: pubsub::Request,
        silent: bool,
        mut written: Vec<u8>,
    ) {
        if conn.slots.is_empty() {
            conn.run_pubsub(&mut self.hub, request, silent, &mut written);
            conn.push_written(written);
            return;
        }
        if !written.is_empty() {
            conn.push_written(written);
        }
        conn.slots.push_back(Slot::PubSub(request, silent));
        conn.holding = true;
    }

    /// Publishes on the hub what the node's committed calls published, and writes the
    /// messages to their subscribers.
    fn take_publications(&mut self) {
        let Some(publications) = &self.publications else {
            return;
        };
        for publication in publications.take() {
            self.hub.publish(
                publication.shard,
                &publication.channel,
                &publication.message,
            );
            // What this node's calls published (a primary's) reaches the group's other
            // members too; what the primary relayed here goes no further.
            if !publication.relayed {
                let Publication {
                    shard,
                    channel,
                    message,
                    ..
                } = publication;
                self.node.relay_publication(shard, channel, message);
            }
        }
        if self.hub.has_deliveries() {
            self.deliver();
        }
    }

    /// Writes the messages publications delivered to their connections (a connection
    /// closed meanwhile gets none), and looks at those connections in this pass.
    fn deliver(&mut self) {
        for delivery in self.hub.take_deliveries() {
            let Some(token) = token_of(delivery.client_id) else {
                continue;
            };
            let Some(conn) = self.conns.get_mut(&token) else {
                continue;
            };
            let mut bytes = Vec::with_capacity(delivery.message.len() + 64);
            delivery.message.write(conn.session.proto(), &mut bytes);
            conn.push_written(bytes);
            self.visit.insert(token);
        }
    }

    /// Counts and (rate-limited) logs a connection that sent an HTTP request's `POST` or
    /// `Host:` line, in Redis's words.
    fn refuse_cross_protocol(&mut self, conn: &Conn) {
        self.node.metrics().connection_refused("cross_protocol");
        if let Some(held_back) = self.warned.cross_protocol.pass(self.pass_started) {
            let peer = conn.stream.peer_addr().map(|peer| peer.to_string());
            tracing::warn!(
                "Possible SECURITY ATTACK detected. It looks like somebody is sending POST or \
                 Host: commands to tandem's Redis port (from {}). This is likely due to an \
                 attacker attempting to use Cross Protocol Scripting to compromise this node. \
                 Connection aborted. ({held_back} more since the last such line)",
                peer.as_deref().unwrap_or("(gone)")
            );
        }
    }

    /// Adds a call to this pass's batch (or, for a read on a backup, hands it to the backup
    /// role's applier), in its place among the connection's replies.
    fn send(&mut self, token: Token, conn: &mut Conn, mut call: Call) {
        let owner = Owner {
            token,
            serial: conn.serial_next(),
        };
        conn.holding = call.holds_later();
        let read_only = call.kind == ProcKind::Read;
        let mut waits = None;
        // Why the call could not be sent: no role of its kind to send it to.
        let unsent = if call.runs_on == RunsOn::Backup {
            assert!(read_only, "only a read runs on a backup");
            match self.backup.as_mut() {
                Some(port) => {
                    // It is never sent again (`Call::runs_again_after`): the port takes the
                    // arguments.
                    let seq = port.push(call.proc_id.0, std::mem::take(&mut call.args));
                    self.backup_inflight.insert(seq, owner);
                    None
                }
                None => Some(BACKUP_CHANGED),
            }
        } else {
            match self.port.as_mut() {
                Some(port) => {
                    let lsn = port.lsn_committed();
                    // A call that may be sent again keeps its arguments (a blocking
                    // command's next try, a read tried again); any other gives them up.
                    let again = read_only || matches!(call.purpose, Purpose::Block(_));
                    let args = match again {
                        true => call.args.clone(),
                        false => std::mem::take(&mut call.args),
                    };
                    let seq = port.push(call.proc_id.0, args, read_only);
                    self.track(seq, owner);
                    if let Purpose::Block(blocking) = &call.purpose {
                        let timeout_ms = blocking.timeout_ms;
                        waits = Some(
                            self.waiting
                                .begin(owner, self.pass_started, timeout_ms, lsn),
                        );
                    }
                    None
                }
                None => Some(PRIMARY_CHANGED),
            }
        };
        if unsent.is_none() {
            conn.unanswered += 1;
        }
        let slot = Slot::Call {
            call,
            outcome: unsent.map(|why| Resolved::Failed(why.into())),
            sent: self.pass_started,
            waits,
        };
        conn.slot_bytes += slot_len(&slot);
        conn.slots.push_back(slot);
        if unsent.is_some() {
            conn.drain_slots(&mut self.hub, &mut self.stats, self.node.saver());
        }
    }
}

impl Front {
    /// A try of a blocking call found nothing: its connection waits (and the call will be
    /// sent again awakened), or, if `CLIENT UNBLOCK` asked meanwhile, how the call ends now.
    /// `after`: the IDs a stream read's later tries read after, if its try named them.
    fn found_nothing(&mut self, owner: Owner, after: &[&str]) -> Option<Resolved> {
        let Some(Slot::Call { call, waits, .. }) = self.slot(owner) else {
            // Its connection closed.
            return None;
        };
        let Some(order) = *waits else {
            // Only a call that may block is answered so.
            return Some(Resolved::Failed(with_code(WOULD_BLOCK)));
        };
        if !after.is_empty() {
            assert!(
                CallArgs::replace_last(&mut call.args, after),
                "a stream read's call names as many IDs as its try resolved"
            );
        }
        CallArgs::set_awakened(&mut call.args);
        let unblock = self.waiting.found_nothing(order)?;
        Some(self.unblocked(owner, unblock))
    }

    /// How a call whose wait `CLIENT UNBLOCK` ended answers: as if its time were up, or
    /// with an error.
    fn unblocked(&mut self, owner: Owner, unblock: Unblock) -> Resolved {
        if unblock.error {
            return Resolved::Failed(UNBLOCKED_BY_CLIENT.into());
        }
        Resolved::Reply(self.timeout_reply(owner))
    }

    /// What the blocking call `owner` answers when its time is up.
    fn timeout_reply(&mut self, owner: Owner) -> Vec<u8> {
        match self.slot(owner) {
            Some(Slot::Call {
                call:
                    Call {
                        purpose: Purpose::Block(blocking),
                        ..
                    },
                ..
            }) => blocking.timeout_reply.clone(),
            _ => unreachable!("a waiting call is a blocking command's"),
        }
    }

    /// Ends the waits whose time is up, and tries again those a write may now serve.
    fn wake_waiting(&mut self) {
        for owner in self.waiting.take_due(self.pass_started) {
            let reply = self.timeout_reply(owner);
            self.resolve(owner, Resolved::Reply(reply));
        }
        let Some(lsn) = self.port.as_ref().map(LocalPort::lsn_committed) else {
            for owner in self.waiting.take_untried() {
                self.resolve(owner, Resolved::Failed(UNBLOCKED_BY_ROLE.into()));
            }
            return;
        };
        for owner in self.waiting.take_to_try(lsn) {
            let Some(Slot::Call { call, .. }) = self.slot(owner) else {
                unreachable!("a closed connection's call waits no more");
            };
            let (proc_id, args) = (call.proc_id.0, call.args.clone());
            let read_only = call.kind == ProcKind::Read;
            let port = self.port.as_mut().expect("the port read above");
            let seq = port.push(proc_id, args, read_only);
            self.track(seq, owner);
        }
    }

    /// `CLIENT UNBLOCK`: whether the connection it names was waiting (its wait ends now, or
    /// when its try in flight comes back finding nothing).
    fn unblock(&mut self, unblock: Unblock) -> bool {
        let Some(token) = token_of(unblock.client_id) else {
            return false;
        };
        match self.waiting.unblock(token, unblock) {
            Unblocking::NotWaiting => false,
            Unblocking::WhenTried => true,
            Unblocking::Now(owner) => {
                let resolved = self.unblocked(owner, unblock);
                self.resolve(owner, resolved);
                true
            }
        }
    }
}

/// The token of the connection whose id (`CLIENT ID`) is `client_id`: a connection's id is
/// its token's place after the first connection's, from 1.
/// What a `SAVE` or `BGSAVE` call's `outcome` (the database's RDB file, as `SYNC`'s) comes to
/// once `saver` took the file: Redis's reply, or the error it gives.
fn save(kind: SaveKind, outcome: Resolved, saver: Option<&crate::saves::Saver>) -> Resolved {
    let Resolved::Reply(reply) = outcome else {
        return outcome;
    };
    let Some(saver) = saver else {
        return Resolved::Failed(tandem_redis::session::SAVES_NOT_SERVED.to_owned());
    };
    let Some((_, file)) = tandem_redis::cmd::sync::snapshot_parts(&reply) else {
        return Resolved::Failed("ERR the node answered SAVE with a malformed file".to_owned());
    };
    let saved = match kind {
        SaveKind::Foreground => saver.save_now(file).map(|()| "+OK\r\n"),
        SaveKind::Background => saver
            .save_in_background(file.to_vec())
            .map(|()| "+Background saving started\r\n")
            .map_err(str::to_owned),
    };
    match saved {
        Ok(status) => Resolved::Reply(status.as_bytes().to_vec()),
        Err(text) => Resolved::Failed(text),
    }
}

fn token_of(client_id: u64) -> Option<Token> {
    (client_id as usize)
        .checked_sub(1)
        .and_then(|index| index.checked_add(FIRST_CONN))
        .map(Token)
}

/// A rolled-back call's message as an error reply: the model's own errors carry their code
/// ("ERR", "WRONGTYPE"); the store's (a reply too long to keep) get "ERR".
fn with_code(message: &str) -> String {
    let code = message.split(' ').next().unwrap_or_default();
    if !code.is_empty() && code.bytes().all(|b| b.is_ascii_uppercase()) {
        message.to_string()
    } else {
        format!("ERR {message}")
    }
}

fn unanswered(code: ErrorCode, message: &str) -> String {
    match code {
        ErrorCode::NotPrimary => format!(
            "ERR the primary changed before the reply left ({message}); the command may have \
             run"
        ),
        _ => format!("ERR {message}"),
    }
}

/// The port to the role the node holds now (`with_role` visits it, if any): `port` if it
/// still leads there, else one `open` makes for the new role, else none; and whether calls
/// sent through the old port are orphaned (it led to a role the node no longer holds).
fn follow_role<H: ?Sized, P>(
    port: Option<P>,
    with_role: impl FnOnce(&mut dyn FnMut(&H)),
    is_of: impl Fn(&P, &H) -> bool,
    open: impl Fn(&H) -> P,
) -> (Option<P>, bool) {
    let had_port = port.is_some();
    let mut current = None;
    let mut kept = port;
    with_role(&mut |handle| {
        current = Some(match kept.take() {
            Some(port) if is_of(&port, handle) => (port, false),
            _ => (open(handle), true),
        });
    });
    match current {
        Some((port, replaced)) => (Some(port), had_port && replaced),
        None => (None, had_port),
    }
}
