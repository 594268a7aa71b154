//! The native port's gate: every connection waits here, on one thread for all of them, until
//! it has sent its first frame whole (its `Hello`); only then is it handed on (`OnHello`),
//! which serves at once what need not wait and gives a handshake that may wait a thread of
//! its own.
//!
//! So a stranger costs the node no thread and no more memory than it sent, up to the
//! handshake's small frame limit: idle connections, or four bytes announcing a large frame,
//! hold one socket and one small buffer each. The gate also bounds what waits: at most
//! `pending_max` connections without a whole `Hello` (more are closed as they come), each
//! for at most `hello_timeout`, and at most `handshakes_max` handed-on connections that have
//! not yet proved themselves (a [`Handshake`] is held until they do; more are refused).

use std::collections::{HashMap, VecDeque};
use std::io::{ErrorKind, Read};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use tandem_wire::{ErrorCode, FrameBuffer, encode_error};

use crate::metrics::Metrics;
use crate::throttle::Throttle;

/// The longest frame a connection may send before it proved itself: a `Hello` and the
/// handshake's frames are far shorter. The limit is raised to the node's once the
/// connection authenticated ([`FrameBuffer::set_max_frame_len`]).
pub const HANDSHAKE_FRAME_LEN_MAX: usize = 16 << 10;

/// How the gate bounds what waits in it.
#[derive(Clone, Copy, Debug)]
pub struct GateLimits {
    /// Connections waiting for their whole `Hello`, at most.
    pub pending_max: usize,
    /// Handed-on connections that have not yet proved themselves, at most.
    pub handshakes_max: usize,
    /// How long a connection may take to send its `Hello`.
    pub hello_timeout: Duration,
}

impl GateLimits {
    /// The gate of a node that serves at most `maxclients` clients: as many may be waiting
    /// for their `Hello`, 256 may be in their handshakes, each `Hello` within 10 s.
    pub fn for_maxclients(maxclients: usize) -> GateLimits {
        GateLimits {
            pending_max: maxclients,
            handshakes_max: 256,
            hello_timeout: Duration::from_secs(10),
        }
    }
}

/// A connection handed on and still in its handshake: it counts towards
/// [`GateLimits::handshakes_max`] until dropped (once the connection proved itself, or
/// ended).
#[derive(Debug)]
pub struct Handshake(Arc<AtomicUsize>);

impl Drop for Handshake {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What the gate hands on: a blocking stream, the buffer holding (at least) its whole first
/// frame, and its place among the handshakes.
pub type OnHello = Box<dyn Fn(std::net::TcpStream, FrameBuffer, Handshake) + Send>;

/// A connection waiting for its whole `Hello`.
struct Pending {
    stream: TcpStream,
    buffer: FrameBuffer,
}

const LISTENER: Token = Token(0);
/// The token of the gate's waker: the connections' tokens count up from it.
const STOP: Token = Token(1);

/// The gate's thread: dropped, it stops the thread, which closes the port and every
/// connection waiting in it.
#[derive(Debug)]
pub struct GateThread {
    waker: Waker,
    stop: Arc<AtomicBool>,
}

impl Drop for GateThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // A gate whose poll is gone has stopped already.
        let _ = self.waker.wake();
    }
}

/// Starts the gate's thread on `listener`; each connection that sent its whole `Hello` goes
/// to `on_hello`, which must not block (it serves the connection at once or starts its
/// thread).
pub fn spawn(
    listener: std::net::TcpListener,
    limits: GateLimits,
    metrics: Arc<Metrics>,
    on_hello: OnHello,
) -> std::io::Result<GateThread> {
    listener.set_nonblocking(true)?;
    let mut listener = TcpListener::from_std(listener);
    let poll = Poll::new()?;
    poll.registry()
        .register(&mut listener, LISTENER, Interest::READABLE)?;
    let waker = Waker::new(poll.registry(), STOP)?;
    let stop = Arc::new(AtomicBool::new(false));
    let gate = Gate {
        poll,
        listener,
        limits,
        metrics,
        on_hello,
        pending: HashMap::new(),
        deadlines: VecDeque::new(),
        token_next: STOP.0 + 1,
        stop: Arc::clone(&stop),
        handshakes: Arc::new(AtomicUsize::new(0)),
        warned: Throttle::new(Duration::from_secs(60)),
    };
    std::thread::Builder::new()
        .name("gate".into())
        .spawn(move || gate.run())?;
    Ok(GateThread { waker, stop })
}

struct Gate {
    poll: Poll,
    listener: TcpListener,
    limits: GateLimits,
    metrics: Arc<Metrics>,
    on_hello: OnHello,
    pending: HashMap<Token, Pending>,
    /// When each pending connection's time is up, in the order they came (one timeout for
    /// all, so the order of arrival is the order of deadlines).
    deadlines: VecDeque<(Instant, Token)>,
    token_next: usize,
    /// Handed-on connections still in their handshakes.
    handshakes: Arc<AtomicUsize>,
    warned: Throttle,
    /// Set when the [`GateThread`] is dropped.
    stop: Arc<AtomicBool>,
}

impl Gate {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = self
                .deadlines
                .front()
                .map(|(due, _)| due.saturating_duration_since(Instant::now()));
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("the native port stopped: waiting for its sockets failed: {err}");
                return;
            }
            if self.stop.load(Ordering::Acquire) {
                return;
            }
            for event in &events {
                match event.token() {
                    LISTENER => self.accept(),
                    STOP => {}
                    token => self.read(token),
                }
            }
            self.expire(Instant::now());
        }
    }

    fn accept(&mut self) {
        loop {
            let (mut stream, _) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(err) if err.kind() == ErrorKind::WouldBlock => return,
                // Out of descriptors, or a connection reset as it came: the next event
                // tries again.
                Err(_) => return,
            };
            if self.pending.len() >= self.limits.pending_max {
                self.refuse(&stream, "waiting for their Hello");
                continue;
            }
            let token = Token(self.token_next);
            self.token_next += 1;
            if self
                .poll
                .registry()
                .register(&mut stream, token, Interest::READABLE)
                .is_err()
            {
                continue;
            }
            let buffer = FrameBuffer::new(HANDSHAKE_FRAME_LEN_MAX);
            self.pending.insert(token, Pending { stream, buffer });
            let due = Instant::now() + self.limits.hello_timeout;
            self.deadlines.push_back((due, token));
            // Bytes may have come with the connection: an edge-triggered event for them
            // may already be spent.
            self.read(token);
        }
    }

    /// Reads what a pending connection sent; hands it on once its first frame is whole.
    fn read(&mut self, token: Token) {
        let Some(pending) = self.pending.get_mut(&token) else {
            return;
        };
        loop {
            match pending.stream.read(pending.buffer.spare()) {
                Ok(0) => return self.drop_pending(token),
                Ok(n) => pending.buffer.filled(n),
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(_) => return self.drop_pending(token),
            }
            match pending.buffer.holds_whole_frame() {
                Ok(false) => {}
                Ok(true) => return self.hand_on(token),
                Err(err) => {
                    let mut frame = Vec::new();
                    let message = format!("{err}: the first frame must be a Hello");
                    encode_error(&mut frame, ErrorCode::BadFrame, &message);
                    let _ = std::io::Write::write(&mut pending.stream, &frame);
                    self.metrics.frames_rejected.inc();
                    return self.drop_pending(token);
                }
            }
        }
    }

    fn hand_on(&mut self, token: Token) {
        let mut pending = self.pending.remove(&token).expect("a pending connection");
        let _ = self.poll.registry().deregister(&mut pending.stream);
        if self.handshakes.load(Ordering::Acquire) >= self.limits.handshakes_max {
            self.refuse(&pending.stream, "in their handshakes");
            return;
        }
        let stream = std::net::TcpStream::from(pending.stream);
        if stream.set_nonblocking(false).is_err() {
            return;
        }
        self.handshakes.fetch_add(1, Ordering::AcqRel);
        let handshake = Handshake(Arc::clone(&self.handshakes));
        (self.on_hello)(stream, pending.buffer, handshake);
    }

    fn drop_pending(&mut self, token: Token) {
        if let Some(mut pending) = self.pending.remove(&token) {
            let _ = self.poll.registry().deregister(&mut pending.stream);
        }
    }

    /// Closes the connections whose `Hello` did not come in time.
    fn expire(&mut self, now: Instant) {
        while let Some(&(due, token)) = self.deadlines.front() {
            if due > now {
                return;
            }
            self.deadlines.pop_front();
            if self.pending.contains_key(&token) {
                self.metrics.connection_refused("handshake");
                self.drop_pending(token);
            }
        }
    }

    /// Closes a connection the gate has no room for, counting and (rate-limited) logging it.
    fn refuse(&mut self, stream: &TcpStream, waiting: &str) {
        self.metrics.connection_refused("handshake");
        if let Some(held_back) = self.warned.pass(Instant::now()) {
            let peer = stream.peer_addr().map(|peer| peer.to_string());
            tracing::warn!(
                "refused a connection to the native port from {}: too many connections are \
                 {waiting} ({held_back} more refused since the last such line)",
                peer.as_deref().unwrap_or("(gone)")
            );
        }
    }
}
