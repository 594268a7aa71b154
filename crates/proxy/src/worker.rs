//! The proxy's event loop: a worker thread serves many application connections on one
//! `mio` poll, with the stubs' connections to the primaries on the same poll.
//!
//! For each application connection the worker reads requests, asks its [`ProxyConn`] for the
//! next round of units and sends each through the connection's stub for the unit's group
//! ([`Client::send`]), without waiting; when a stub's socket is readable it takes the answer
//! ([`Client::poll_receive`]) and finishes the unit, and once the round is over it writes the
//! replies. No thread switch lies on that path: a busy worker wakes once for many
//! connections' requests and answers.
//!
//! What would make the loop wait goes to a helper thread with the stubs it needs, and comes
//! back as a message that wakes the worker: a unit whose stub has no connection yet, lost
//! its primary or got no answer within the attempt timeout ([`Client::receive`] rides the
//! failover out), a call every group runs, a `SCAN` step, and reads sent to backups. The
//! connection's other work waits for it, as its round does; every other connection goes on.
//! A stub is only ever used by one thread at a time: it moves to the helper and back.
//! Helpers are threads of a pool ([`Helpers`]) that grows while every one is busy.
//!
//! A blocking command that found nothing is tried again after a pause (1 ms, doubling up to
//! 20 ms) until its timeout, as before; the connection's socket is still read meanwhile, so a
//! client that leaves ends its wait.

use std::collections::{BTreeMap, VecDeque};
use std::io::{ErrorKind, Read, Write};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Condvar, Mutex, mpsc};
use std::thread;
use std::time::{Duration, Instant};

use mio::net::TcpStream;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use tandem_client::{CallError, Polled, ReplyStatus};

use crate::conn::{ProxyConn, Target, Unit};
use crate::route::Route;
use crate::server::{Lane, Lanes, Shared, call_unit, conclude, count_unit};

/// The waker's token; applications' and stubs' tokens come from one counter after it.
const WAKER: Token = Token(0);
/// Bytes read from an application at a time.
const READ_CHUNK: usize = 64 * 1024;
/// Replies waiting for an application to read them past which the worker reads no more of
/// its requests. Large: an application may write a whole long pipeline before it reads a
/// reply (Redis itself sets no bound for ordinary clients).
const OUT_MAX: usize = 256 << 20;
/// Requests read and not yet handled past which the worker reads no more (while a blocking
/// command waits, when requests are read but not handled).
const IN_MAX: usize = 1 << 20;
/// How often the worker looks at its timers while any runs; otherwise, how often it wakes.
const TIMER_STEP: Duration = Duration::from_millis(1);
const IDLE_STEP: Duration = Duration::from_millis(100);
/// The first pause before a waiting blocking command is tried again; each pause doubles, up
/// to [`BLOCKED_PAUSE_MAX`]: the most a pop through the proxy lags the push that serves it
/// (a node's own RESP port wakes a waiting connection on the push's commit instead).
const BLOCKED_PAUSE_MIN: Duration = Duration::from_millis(1);
const BLOCKED_PAUSE_MAX: Duration = Duration::from_millis(20);

/// What reaches a worker from other threads.
pub(crate) enum Message {
    /// A new application connection.
    Accepted(std::net::TcpStream),
    /// A helper finished a unit: its answer, and the stubs it took.
    Done {
        app: usize,
        unit: Unit,
        lanes: Lanes,
        answered: Result<(ReplyStatus, Vec<u8>), CallError>,
    },
}

/// A worker's handle for other threads: its mailbox and its waker.
#[derive(Clone)]
pub(crate) struct Inbox {
    sender: mpsc::Sender<Message>,
    waker: Arc<Waker>,
}

impl Inbox {
    /// Puts `message` in the worker's mailbox and wakes it; false once the worker is gone.
    pub(crate) fn send(&self, message: Message) -> bool {
        self.sender.send(message).is_ok() && self.waker.wake().is_ok()
    }
}

/// A unit on the wire through a stub the worker waits on.
struct OnWire {
    unit: Unit,
    group: u32,
    sent_at: Instant,
}

/// A blocking command's wait: since when, its pause, and when it is tried again.
struct Blocked {
    since: Instant,
    pause: Duration,
    due: Option<Instant>,
}

/// One application connection.
struct App {
    socket: TcpStream,
    conn: ProxyConn,
    lanes: Lanes,
    /// Each stub's socket as registered: its descriptor, the stub's connection count then,
    /// and its token.
    registered: BTreeMap<u32, (std::os::fd::RawFd, u64, Token)>,
    /// Replies not yet written, from `written` on.
    out: Vec<u8>,
    written: usize,
    on_wire: Vec<OnWire>,
    /// Units at helpers.
    away: usize,
    blocked: Option<Blocked>,
    /// The socket may have bytes to read (an event came and no read has found it empty).
    readable: bool,
    closed: bool,
}

pub(crate) struct Worker {
    poll: Poll,
    inbox: Inbox,
    messages: mpsc::Receiver<Message>,
    shared: Arc<Shared>,
    apps: BTreeMap<usize, App>,
    /// Which application (and which of its groups, for a stub's socket) a token names.
    tokens: BTreeMap<Token, (usize, Option<u32>)>,
    token_next: usize,
    chunk: Vec<u8>,
}

impl Worker {
    /// A worker and the handle to reach it.
    pub(crate) fn new(shared: Arc<Shared>) -> std::io::Result<(Worker, Inbox)> {
        let poll = Poll::new()?;
        let waker = Arc::new(Waker::new(poll.registry(), WAKER)?);
        let (sender, messages) = mpsc::channel();
        let inbox = Inbox { sender, waker };
        let worker = Worker {
            poll,
            inbox: inbox.clone(),
            messages,
            shared,
            apps: BTreeMap::new(),
            tokens: BTreeMap::new(),
            token_next: 1,
            chunk: vec![0; READ_CHUNK],
        };
        Ok((worker, inbox))
    }

    /// Serves until the proxy stops and its last connection closes.
    pub(crate) fn run(mut self) {
        let mut events = Events::with_capacity(1024);
        loop {
            let step = if self.timers_running() {
                TIMER_STEP
            } else {
                IDLE_STEP
            };
            if let Err(err) = self.poll.poll(&mut events, Some(step)) {
                if err.kind() == ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("proxy: a worker's poll failed: {err}");
                return;
            }
            for event in events.iter() {
                self.on_event(event.token(), event.is_readable() || event.is_read_closed());
            }
            self.take_messages();
            self.run_timers();
            if self.shared.stopping.load(Ordering::SeqCst) && self.apps.is_empty() {
                return;
            }
        }
    }

    fn on_event(&mut self, token: Token, readable: bool) {
        if token == WAKER {
            return;
        }
        let Some(&(app, group)) = self.tokens.get(&token) else {
            return;
        };
        match group {
            None => {
                if let Some(state) = self.apps.get_mut(&app) {
                    state.readable |= readable;
                }
                self.advance(app);
            }
            Some(group) => self.poll_stub(app, group),
        }
    }

    /// A stub's socket is readable: its unit may be answered.
    fn poll_stub(&mut self, app: usize, group: u32) {
        let Some(state) = self.apps.get_mut(&app) else {
            return;
        };
        let Some(at) = state.on_wire.iter().position(|wire| wire.group == group) else {
            return;
        };
        let lane = state.lanes.by_group.get_mut(&group).expect("a unit's stub");
        match lane.client.poll_receive() {
            Polled::Waiting => {}
            Polled::Answered(result) => {
                let wire = state.on_wire.swap_remove(at);
                let answered = result.map(|outcome| (outcome.status, outcome.body));
                conclude(&mut state.conn, wire.unit, answered, &self.shared);
                self.advance(app);
            }
            Polled::Stuck => {
                let wire = state.on_wire.swap_remove(at);
                self.hand_to_helper(app, wire.unit, Job::Receive(group));
            }
        }
    }

    fn take_messages(&mut self) {
        while let Ok(message) = self.messages.try_recv() {
            match message {
                Message::Accepted(stream) => self.accept(stream),
                Message::Done {
                    app,
                    unit,
                    lanes,
                    answered,
                } => {
                    let Some(state) = self.apps.get_mut(&app) else {
                        // The application left: the stubs go back to the pool.
                        self.shared.return_lanes(lanes);
                        continue;
                    };
                    state.lanes.by_group.extend(lanes.by_group);
                    state.away -= 1;
                    if state.closed {
                        self.close(app);
                        continue;
                    }
                    conclude(&mut state.conn, unit, answered, &self.shared);
                    self.advance(app);
                }
            }
        }
    }

    fn accept(&mut self, stream: std::net::TcpStream) {
        let shared = Arc::clone(&self.shared);
        let counters = &shared.counters;
        counters.connections.fetch_add(1, Ordering::Relaxed);
        drop(stream.set_nodelay(true));
        if let Err(err) = stream.set_nonblocking(true) {
            tracing::warn!("proxy: cannot use an application's connection: {err}");
            return;
        }
        let mut socket = TcpStream::from_std(stream);
        let token = self.next_token();
        let interest = Interest::READABLE | Interest::WRITABLE;
        if let Err(err) = self.poll.registry().register(&mut socket, token, interest) {
            tracing::warn!("proxy: cannot watch an application's connection: {err}");
            return;
        }
        counters.connections_open.fetch_add(1, Ordering::Relaxed);
        let id = self.shared.conn_next.fetch_add(1, Ordering::Relaxed);
        let app = token.0;
        self.tokens.insert(token, (app, None));
        self.apps.insert(
            app,
            App {
                socket,
                conn: ProxyConn::new(id),
                lanes: Lanes::default(),
                registered: BTreeMap::new(),
                out: Vec::new(),
                written: 0,
                on_wire: Vec::new(),
                away: 0,
                blocked: None,
                readable: true,
                closed: false,
            },
        );
        self.advance(app);
    }

    fn next_token(&mut self) -> Token {
        let token = Token(self.token_next);
        self.token_next += 1;
        token
    }

    /// Moves the application's connection on as far as it goes without waiting: writes its
    /// replies, runs its next rounds, reads its requests.
    fn advance(&mut self, app: usize) {
        loop {
            let Some(state) = self.apps.get_mut(&app) else {
                return;
            };
            if state.closed {
                return;
            }
            if !flush(state) {
                self.close(app);
                return;
            }
            if !state.on_wire.is_empty() || state.away > 0 {
                return;
            }
            // Nothing is handled while a blocking command waits (it holds later requests).
            state.conn.route_by(self.shared.slots());
            let units = state.conn.next_units(&self.shared.info);
            if !units.is_empty() {
                self.start_round(app, units);
                continue;
            }
            // Replies the session wrote itself (`SELECT`, `PING`, a refusal).
            if !flush(state) {
                self.close(app);
                return;
            }
            if state.conn.waiting_ms().is_none() {
                state.blocked = None;
            } else if schedule_wait(state) {
                // Its time was up: its reply is written, and what it held back goes on.
                continue;
            }
            if state.conn.done() || (!state.conn.wants_input() && state.blocked.is_none()) {
                // Closing (QUIT, a protocol error): what is left is sent, then the socket
                // closes.
                if state.written == state.out.len() {
                    self.close(app);
                }
                return;
            }
            if state.out.len() - state.written > OUT_MAX || state.conn.buffered() > IN_MAX {
                return;
            }
            match read(state, &mut self.chunk) {
                Reading::Fed => {}
                Reading::Empty => return,
                Reading::Closed => {
                    self.close(app);
                    return;
                }
            }
        }
    }

    /// Sends the round's units: each to its group's primary through the connection's stub
    /// for the group, or to a helper.
    fn start_round(&mut self, app: usize, units: Vec<Unit>) {
        for unit in units {
            let group = match &unit.route {
                Route::Group(group) => Some(*group),
                Route::Only => Some(self.shared.config.group),
                Route::Every(_) | Route::Scan(_) => None,
                Route::Refused(_) => unreachable!("a refused call is answered without a unit"),
            };
            match (group, unit.target) {
                (Some(group), Target::Primary) => self.send(app, unit, group),
                (Some(group), Target::Backup) => {
                    self.hand_to_helper(app, unit, Job::Run(Some(group)))
                }
                (None, _) => self.hand_to_helper(app, unit, Job::Run(None)),
            }
        }
    }

    /// Sends `unit` through the connection's stub for `group`, and waits on the stub's socket.
    fn send(&mut self, app: usize, unit: Unit, group: u32) {
        let state = self.apps.get_mut(&app).expect("a live application");
        count_unit(&unit, &self.shared);
        let client = &mut self.shared.lane(&mut state.lanes, group).client;
        let sent = client
            .send(unit.proc_id.0, &unit.args, None)
            .map(|on_wire| {
                let fd = if on_wire {
                    client.nonblocking_fd()
                } else {
                    None
                };
                (fd, client.stats().connects)
            });
        match sent {
            Err(err) => conclude(&mut state.conn, unit, Err(err), &self.shared),
            Ok((None, _)) => self.hand_to_helper(app, unit, Job::Receive(group)),
            Ok((Some(fd), connects)) => {
                self.watch_stub(app, group, fd, connects);
                let state = self.apps.get_mut(&app).expect("a live application");
                state.on_wire.push(OnWire {
                    unit,
                    group,
                    sent_at: Instant::now(),
                });
                // An answer that came before the socket was watched is reported by the poll
                // when it starts watching; later ones, as they come.
            }
        }
    }

    /// Watches the stub's socket `fd` (its `connects`-th connection) for `app`'s `group`,
    /// unless it already is.
    fn watch_stub(&mut self, app: usize, group: u32, fd: std::os::fd::RawFd, connects: u64) {
        let state = self.apps.get_mut(&app).expect("a live application");
        if let Some(&(watched, count, _)) = state.registered.get(&group)
            && (watched, count) == (fd, connects)
        {
            return;
        }
        if let Some((_, _, old)) = state.registered.remove(&group) {
            self.tokens.remove(&old);
        }
        let token = self.next_token();
        let registry = self.poll.registry();
        let mut source = SourceFd(&fd);
        let watched = match registry.register(&mut source, token, Interest::READABLE) {
            Err(err) if err.kind() == ErrorKind::AlreadyExists => {
                registry.reregister(&mut source, token, Interest::READABLE)
            }
            other => other,
        };
        if let Err(err) = watched {
            // The unit still ends: its attempt timeout sends it to a helper.
            tracing::warn!("proxy: cannot watch a stub's connection: {err}");
            return;
        }
        let state = self.apps.get_mut(&app).expect("a live application");
        state.registered.insert(group, (fd, connects, token));
        self.tokens.insert(token, (app, Some(group)));
    }

    /// Hands `unit` to a helper thread with the stubs `job` needs.
    fn hand_to_helper(&mut self, app: usize, unit: Unit, job: Job) {
        let state = self.apps.get_mut(&app).expect("a live application");
        let lanes = match job {
            Job::Receive(group) | Job::Run(Some(group)) => {
                let lane = state.lanes.by_group.remove(&group);
                let mut lanes = Lanes::default();
                if let Some(lane) = lane {
                    lanes.by_group.insert(group, lane);
                }
                lanes
            }
            Job::Run(None) => std::mem::take(&mut state.lanes),
        };
        state.away += 1;
        let shared = Arc::clone(&self.shared);
        let inbox = self.inbox.clone();
        let started = self.shared.helpers.run(Box::new(move || {
            help(app, unit, lanes, job, &shared, &inbox)
        }));
        if let Err(err) = started {
            // Nothing to fall back on: the connection ends (its application sees it close).
            tracing::error!("proxy: cannot start a helper thread: {err}");
            state.away -= 1;
            self.close(app);
        }
    }

    /// Ends the application's connection; its stubs go back to the pool once none has a
    /// call out (a unit on the wire goes to a helper, which ends it).
    fn close(&mut self, app: usize) {
        let Some(state) = self.apps.get_mut(&app) else {
            return;
        };
        if !state.closed {
            state.closed = true;
            drop(self.poll.registry().deregister(&mut state.socket));
            self.shared
                .counters
                .connections_open
                .fetch_sub(1, Ordering::Relaxed);
        }
        for wire in std::mem::take(&mut state.on_wire) {
            self.hand_to_helper(app, wire.unit, Job::Receive(wire.group));
        }
        let state = self.apps.get_mut(&app).expect("checked above");
        if state.away > 0 {
            return;
        }
        let state = self.apps.remove(&app).expect("checked above");
        // The connection's own token and its stubs' go.
        self.tokens.retain(|_, (owner, _)| *owner != app);
        self.shared.return_lanes(state.lanes);
    }

    fn timers_running(&self) -> bool {
        self.apps
            .values()
            .any(|state| !state.on_wire.is_empty() || state.blocked.is_some())
    }

    /// Units whose answer is late go to helpers; waiting blocking commands are tried again.
    fn run_timers(&mut self) {
        let now = Instant::now();
        let attempt = self.shared.attempt_timeout;
        let mut late = Vec::new();
        let mut due = Vec::new();
        for (&app, state) in &mut self.apps {
            for wire in &state.on_wire {
                if now.duration_since(wire.sent_at) >= attempt {
                    late.push((app, wire.group, wire.sent_at));
                }
            }
            if let Some(blocked) = &mut state.blocked
                && blocked.due.is_some_and(|at| at <= now)
            {
                blocked.due = None;
                due.push(app);
            }
        }
        for (app, group, sent_at) in late {
            // An answer that came since the last poll is taken here; a unit still without
            // one goes to a helper, whose stub decides (it waits no longer than the attempt
            // timeout, then looks for the primary again).
            self.poll_stub(app, group);
            let Some(state) = self.apps.get_mut(&app) else {
                continue;
            };
            // (Answered, the unit may have made way for the connection's next one.)
            let still = |w: &OnWire| w.group == group && w.sent_at == sent_at;
            if let Some(at) = state.on_wire.iter().position(still) {
                let wire = state.on_wire.swap_remove(at);
                self.hand_to_helper(app, wire.unit, Job::Receive(group));
            }
        }
        for app in due {
            let Some(state) = self.apps.get_mut(&app) else {
                continue;
            };
            if state.conn.waiting_ms().is_some() {
                state.conn.try_again();
            }
            self.advance(app);
        }
    }
}

/// What a helper does with a unit.
#[derive(Clone, Copy, Debug)]
enum Job {
    /// Ends the call the stub of this group sent or began ([`Client::receive`]).
    Receive(u32),
    /// Runs the unit with the stub of this group, or of every group it needs.
    Run(Option<u32>),
}

/// How long a helper thread waits for work before it ends.
const HELPER_IDLE_MAX: Duration = Duration::from_secs(10);

/// Work for a helper.
type HelperWork = Box<dyn FnOnce() + Send>;

/// The threads that run what would make a worker wait: started as work comes and none is
/// idle (a failover sends every connection's unit of the group at once, and none may wait
/// for another's), kept while work keeps coming.
#[derive(Default)]
pub(crate) struct Helpers {
    state: Mutex<HelperState>,
    ready: Condvar,
}

#[derive(Default)]
struct HelperState {
    queue: VecDeque<HelperWork>,
    /// Helpers waiting for work; each takes one piece when woken.
    idle: usize,
}

impl std::fmt::Debug for Helpers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Helpers").finish_non_exhaustive()
    }
}

impl Helpers {
    /// Runs `work` on an idle helper, or on a new one if every helper is busy.
    pub(crate) fn run(self: &Arc<Self>, work: HelperWork) -> std::io::Result<()> {
        let mut state = self.state.lock().expect("helpers");
        state.queue.push_back(work);
        if state.queue.len() <= state.idle {
            self.ready.notify_one();
            return Ok(());
        }
        let helpers = Arc::clone(self);
        let started = thread::Builder::new()
            .name("proxy-helper".into())
            .spawn(move || helpers.serve());
        if started.is_err() {
            state.queue.pop_back();
        }
        started.map(drop)
    }

    fn serve(&self) {
        let mut state = self.state.lock().expect("helpers");
        loop {
            if let Some(work) = state.queue.pop_front() {
                drop(state);
                work();
                state = self.state.lock().expect("helpers");
                continue;
            }
            state.idle += 1;
            let (woken, waited) = self
                .ready
                .wait_timeout(state, HELPER_IDLE_MAX)
                .expect("helpers");
            state = woken;
            state.idle -= 1;
            if waited.timed_out() && state.queue.is_empty() {
                return;
            }
        }
    }
}

/// A helper thread's work: one unit, then the answer back to the worker.
fn help(app: usize, unit: Unit, mut lanes: Lanes, job: Job, shared: &Shared, inbox: &Inbox) {
    let answered = match job {
        Job::Receive(group) => {
            let lane: &mut Lane = lanes.by_group.get_mut(&group).expect("the unit's stub");
            lane.client
                .receive()
                .map(|outcome| (outcome.status, outcome.body))
        }
        Job::Run(_) => {
            count_unit(&unit, shared);
            let slots = shared.slots();
            call_unit(&unit, slots.as_deref(), &mut lanes, shared)
        }
    };
    let sent = inbox.send(Message::Done {
        app,
        unit,
        lanes,
        answered,
    });
    if !sent {
        tracing::warn!("proxy: a worker left before a helper's answer");
    }
}

/// Sets when a waiting blocking command is tried again, or ends its wait once its time is
/// up (true).
fn schedule_wait(state: &mut App) -> bool {
    let timeout_ms = state.conn.waiting_ms().expect("a waiting command");
    let now = Instant::now();
    let blocked = state.blocked.get_or_insert(Blocked {
        since: now,
        pause: Duration::ZERO,
        due: None,
    });
    if blocked.due.is_some() {
        return false;
    }
    let timeout = Duration::from_millis(timeout_ms);
    let waited = now.duration_since(blocked.since);
    if timeout_ms > 0 && waited >= timeout {
        state.conn.time_up();
        state.blocked = None;
        return true;
    }
    blocked.pause = (blocked.pause * 2).clamp(BLOCKED_PAUSE_MIN, BLOCKED_PAUSE_MAX);
    if timeout_ms > 0 {
        blocked.pause = blocked.pause.min(timeout - waited);
    }
    blocked.due = Some(now + blocked.pause);
    false
}

/// Writes what the connection's replies it can without waiting; false once the application
/// is gone.
fn flush(state: &mut App) -> bool {
    state.out.extend_from_slice(state.conn.out());
    state.conn.out().clear();
    while state.written < state.out.len() {
        match state.socket.write(&state.out[state.written..]) {
            Ok(0) => return false,
            Ok(n) => state.written += n,
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => return true,
            Err(_) => return false,
        }
    }
    state.out.clear();
    state.written = 0;
    true
}

enum Reading {
    Fed,
    Empty,
    Closed,
}

/// Reads what the application sent, once.
fn read(state: &mut App, chunk: &mut [u8]) -> Reading {
    if !state.readable {
        return Reading::Empty;
    }
    loop {
        match state.socket.read(chunk) {
            Ok(0) => return Reading::Closed,
            Ok(n) => {
                state.conn.feed(&chunk[..n]);
                // A short read emptied the socket: the poll reports the next bytes as they
                // come (as tokio assumes on Linux), which saves a read that would find none.
                if n < chunk.len() {
                    state.readable = false;
                }
                return Reading::Fed;
            }
            Err(err) if err.kind() == ErrorKind::Interrupted => {}
            Err(err) if err.kind() == ErrorKind::WouldBlock => {
                state.readable = false;
                return Reading::Empty;
            }
            Err(_) => return Reading::Closed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Barrier;

    #[test]
    fn helpers_run_every_piece_of_work_at_once_when_each_waits_for_the_others() {
        let helpers = Arc::new(Helpers::default());
        let (done, finished) = mpsc::channel();
        for round in 0..2 {
            // Each piece waits until all four run: one left queued behind a busy helper
            // would hold the other three for ever.
            let all = Arc::new(Barrier::new(4));
            for _ in 0..4 {
                let (all, done) = (Arc::clone(&all), done.clone());
                helpers
                    .run(Box::new(move || {
                        all.wait();
                        done.send(round).unwrap();
                    }))
                    .unwrap();
            }
            for _ in 0..4 {
                let piece = finished.recv_timeout(Duration::from_secs(10));
                assert_eq!(piece, Ok(round), "every piece of round {round} ran");
            }
        }
    }
}
