//! The native port's gate: every connection waits here, on one thread for all of them, until
//! it has sent its first frame whole (its `Hello`); only then is it handed on (`OnHello`).
//! What the handler does not finish at once it hands back ([`Next`]): a connection whose
//! handshake waits for the client's next frame (a password's or a peer's proof) or for the
//! node's role waits here again, on the same thread; only a TLS handshake is given a thread
//! of its own.
//!
//! So a stranger costs the node no thread and no more memory than it sent, up to the
//! handshake's small frame limit: idle connections, or four bytes announcing a large frame,
//! hold one socket and one small buffer each. The gate also bounds what waits: at most
//! `pending_max` connections without a whole `Hello` (more are closed as they come), each
//! for at most `hello_timeout`, and at most `handshakes_max` handed-on connections that have
//! not yet proved themselves (a [`Handshake`] is held until they do; more are refused).

use std::collections::{BTreeSet, HashMap, VecDeque};
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

/// A connection the gate hands on: its blocking stream, the buffer holding what it sent
/// (at least its whole `Hello`), and its place among the handshakes.
#[derive(Debug)]
pub struct Held {
    pub stream: std::net::TcpStream,
    pub buffer: FrameBuffer,
    pub handshake: Handshake,
}

/// What a handler does with a connection it was handed: it is done with it (served it, gave
/// it a thread, or closed it), or the gate holds it again, on the gate's thread.
pub enum Next {
    Done,
    /// Hold the connection until its buffer holds another whole frame, or it sent a frame
    /// the buffer refuses, or it ended, or `timeout` passed; then `then` (told whether the
    /// time ran out: otherwise reading one frame from the buffer does not wait).
    Await {
        held: Held,
        timeout: Duration,
        then: Then,
    },
    /// Hold the connection until more bytes came into its buffer (a TLS handshake's
    /// records, which are no frames), or it ended, or `timeout` passed; then `then` (told
    /// whether the time ran out: otherwise nothing new in the buffer means it ended).
    AwaitBytes {
        held: Held,
        timeout: Duration,
        then: Then,
    },
    /// Hold the connection unread for `after` (what it sends meanwhile stays in the
    /// socket), then `then` (told that the time ran out).
    Later {
        held: Held,
        after: Duration,
        then: Then,
    },
}

impl std::fmt::Debug for Next {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Next::Done => f.write_str("Done"),
            Next::Await { held, timeout, .. } => {
                write!(f, "Await {{ held: {held:?}, timeout: {timeout:?} }}")
            }
            Next::AwaitBytes { held, timeout, .. } => {
                write!(f, "AwaitBytes {{ held: {held:?}, timeout: {timeout:?} }}")
            }
            Next::Later { held, after, .. } => {
                write!(f, "Later {{ held: {held:?}, after: {after:?} }}")
            }
        }
    }
}

/// The rest of a handshake: what to do with the connection once the gate held it as asked.
pub type Then = Box<dyn FnOnce(Held, bool) -> Next + Send>;

/// What the gate hands a connection to once its `Hello` is whole; it must not block.
pub type OnHello = Box<dyn Fn(Held) -> Next + Send>;

/// A connection held by the gate: waiting for its whole `Hello` (`then` is `None`), or
/// handed back by a handler (it holds its `Handshake`).
struct Pending {
    stream: TcpStream,
    buffer: FrameBuffer,
    /// When the gate stops waiting for it.
    due: Instant,
    then: Option<(Handshake, Then, Wait)>,
}

/// What a handed-back connection waits for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Wait {
    Frame,
    Bytes,
    Time,
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
        hellos_pending: 0,
        deadlines: BTreeSet::new(),
        token_next: STOP.0 + 1,
        stop: Arc::clone(&stop),
        handshakes: Arc::new(AtomicUsize::new(0)),
        held_again: VecDeque::new(),
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
    /// How many of `pending` wait for their `Hello`.
    hellos_pending: usize,
    /// When each held connection's time is up (an entry whose connection moved on, or now
    /// waits for another time, is skipped when it comes up).
    deadlines: BTreeSet<(Instant, Token)>,
    token_next: usize,
    /// Handed-on connections still in their handshakes.
    handshakes: Arc<AtomicUsize>,
    /// Connections handed back since the loop last looked at them ([`Gate::read_held_again`]).
    held_again: VecDeque<Token>,
    warned: Throttle,
    /// Set when the [`GateThread`] is dropped.
    stop: Arc<AtomicBool>,
}

impl Gate {
    fn run(mut self) {
        let mut events = Events::with_capacity(256);
        loop {
            let timeout = match self.held_again.is_empty() {
                true => self
                    .deadlines
                    .first()
                    .map(|(due, _)| due.saturating_duration_since(Instant::now())),
                // Connections handed back wait for their read: the loop only looks for news.
                false => Some(Duration::ZERO),
            };
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
            self.read_held_again();
        }
    }

    /// Reads the connections held again since the last look: what they sent may already
    /// make their next step whole. Taken from a queue rather than at once, so that a
    /// connection whose bytes keep coming moves one step per turn of this loop, never one
    /// call deeper per step (a stream of tiny TLS records would otherwise overflow the
    /// thread's stack), and the others and the deadlines get their turn between its steps.
    fn read_held_again(&mut self) {
        for _ in 0..self.held_again.len() {
            let token = self.held_again.pop_front().expect("counted above");
            self.read(token);
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
            if self.hellos_pending >= self.limits.pending_max {
                self.refuse(&stream, "waiting for their Hello");
                continue;
            }
            let buffer = FrameBuffer::new(HANDSHAKE_FRAME_LEN_MAX);
            let due = Instant::now() + self.limits.hello_timeout;
            if let Some(token) = self.hold(&mut stream, due, true) {
                self.hellos_pending += 1;
                let pending = Pending {
                    stream,
                    buffer,
                    due,
                    then: None,
                };
                self.pending.insert(token, pending);
                // Bytes may have come with the connection: an edge-triggered event for them
                // may already be spent.
                self.read(token);
            }
        }
    }

    /// Holds a connection until `due` under a new token, registered for reading if it is read
    /// meanwhile (`read`; one waiting for a time only needs no events). `None`: it could not
    /// be registered, and is dropped.
    fn hold(&mut self, stream: &mut TcpStream, due: Instant, read: bool) -> Option<Token> {
        let token = Token(self.token_next);
        self.token_next += 1;
        if read {
            self.poll
                .registry()
                .register(stream, token, Interest::READABLE)
                .ok()?;
        }
        self.deadlines.insert((due, token));
        Some(token)
    }

    /// Reads what a held connection sent; hands it on once its next frame is whole (or, past
    /// its `Hello`, once it sent a bad frame or ended: its handler says why).
    fn read(&mut self, token: Token) {
        let Some(pending) = self.pending.get_mut(&token) else {
            return;
        };
        let hello = pending.then.is_none();
        match pending.then.as_ref().map(|(_, _, wait)| *wait) {
            Some(Wait::Time) => return,
            Some(Wait::Bytes) => return self.read_bytes(token),
            Some(Wait::Frame) | None => {}
        }
        loop {
            // What came with an earlier frame may hold this one whole already.
            match pending.buffer.holds_whole_frame() {
                Ok(false) => {}
                Ok(true) if hello => return self.hand_on(token),
                Ok(true) => return self.go_on(token, false),
                Err(_) if !hello => return self.go_on(token, false),
                Err(err) => {
                    let mut frame = Vec::new();
                    let message = format!("{err}: the first frame must be a Hello");
                    encode_error(&mut frame, ErrorCode::BadFrame, &message);
                    let _ = std::io::Write::write(&mut pending.stream, &frame);
                    self.metrics.frames_rejected.inc();
                    return self.drop_pending(token);
                }
            }
            match pending.stream.read(pending.buffer.spare()) {
                Ok(n) if n > 0 => pending.buffer.filled(n),
                Err(err) if err.kind() == ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // It ended: before its `Hello`, nothing to say; after, its handler reads
                // the end and says why it stops.
                _ if hello => return self.drop_pending(token),
                _ => return self.go_on(token, false),
            }
        }
    }

    /// Reads what a connection awaited for bytes sent; hands it back once some came (all
    /// there is, or what its buffer holds), or once it ended.
    fn read_bytes(&mut self, token: Token) {
        let Some(pending) = self.pending.get_mut(&token) else {
            return;
        };
        let mut came = false;
        loop {
            let spare = pending.buffer.spare();
            if spare.is_empty() {
                break;
            }
            match pending.stream.read(spare) {
                Ok(n) if n > 0 => {
                    pending.buffer.filled(n);
                    came = true;
                }
                Err(err) if err.kind() == ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                // It ended: its handler finds nothing new.
                _ => return self.go_on(token, false),
            }
        }
        if came {
            self.go_on(token, false);
        }
    }

    /// Hands a connection whose `Hello` is whole to the handler, unless too many are in
    /// their handshakes.
    fn hand_on(&mut self, token: Token) {
        let Some(Pending { stream, buffer, .. }) = self.release(token) else {
            return;
        };
        if self.handshakes.load(Ordering::Acquire) >= self.limits.handshakes_max {
            self.refuse(&stream, "in their handshakes");
            return;
        }
        let Some(stream) = blocking(stream) else {
            return;
        };
        self.handshakes.fetch_add(1, Ordering::AcqRel);
        let handshake = Handshake(Arc::clone(&self.handshakes));
        let next = (self.on_hello)(Held {
            stream,
            buffer,
            handshake,
        });
        self.hold_again(next);
    }

    /// Hands a connection the gate held for its handler back to it (`timed_out`: its time
    /// ran out).
    fn go_on(&mut self, token: Token, timed_out: bool) {
        let Some(pending) = self.release(token) else {
            return;
        };
        let (handshake, then, _) = pending.then.expect("a connection handed back");
        let Some(stream) = blocking(pending.stream) else {
            return;
        };
        let held = Held {
            stream,
            buffer: pending.buffer,
            handshake,
        };
        let next = then(held, timed_out);
        self.hold_again(next);
    }

    /// Holds a connection again as its handler asked.
    fn hold_again(&mut self, next: Next) {
        let (held, wait, due, then) = match next {
            Next::Done => return,
            Next::Await {
                held,
                timeout,
                then,
            } => (held, Wait::Frame, timeout, then),
            Next::AwaitBytes {
                held,
                timeout,
                then,
            } => (held, Wait::Bytes, timeout, then),
            Next::Later { held, after, then } => (held, Wait::Time, after, then),
        };
        let Held {
            stream,
            buffer,
            handshake,
        } = held;
        if stream.set_nonblocking(true).is_err() {
            return;
        }
        let mut stream = TcpStream::from_std(stream);
        let due = Instant::now() + due;
        let Some(token) = self.hold(&mut stream, due, wait != Wait::Time) else {
            return;
        };
        let pending = Pending {
            stream,
            buffer,
            due,
            then: Some((handshake, then, wait)),
        };
        self.pending.insert(token, pending);
        self.held_again.push_back(token);
    }

    /// Takes a held connection out of the gate.
    fn release(&mut self, token: Token) -> Option<Pending> {
        let mut pending = self.pending.remove(&token)?;
        if pending.then.is_none() {
            self.hellos_pending -= 1;
        }
        let _ = self.poll.registry().deregister(&mut pending.stream);
        Some(pending)
    }

    fn drop_pending(&mut self, token: Token) {
        self.release(token);
    }

    /// Closes the connections whose `Hello` did not come in time, and hands the others whose
    /// time ran out back to their handlers.
    fn expire(&mut self, now: Instant) {
        while let Some(&(due, token)) = self.deadlines.first() {
            if due > now {
                return;
            }
            self.deadlines.pop_first();
            let Some(pending) = self.pending.get(&token) else {
                continue;
            };
            if pending.due != due {
                continue;
            }
            if pending.then.is_some() {
                self.go_on(token, true);
            } else {
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

/// The blocking stream a handler works with (`None`: the socket could not be switched, and
/// the connection is dropped).
fn blocking(stream: TcpStream) -> Option<std::net::TcpStream> {
    let stream = std::net::TcpStream::from(stream);
    stream.set_nonblocking(false).ok()?;
    Some(stream)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use tandem_wire::{Hello, PeerKind, encode_hello};

    /// A gate on loopback whose handler is `on_hello`; returns its address.
    fn start(on_hello: OnHello) -> (std::net::SocketAddr, GateThread) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new(1, "primary"));
        let limits = GateLimits::for_maxclients(16);
        (address, spawn(listener, limits, metrics, on_hello).unwrap())
    }

    fn hello() -> Vec<u8> {
        let mut bytes = Vec::new();
        encode_hello(&mut bytes, &Hello::new(PeerKind::Client, 1, 0));
        bytes
    }

    /// Reads until the end of the stream.
    fn read_to_end(mut stream: std::net::TcpStream) -> Vec<u8> {
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let mut got = Vec::new();
        stream.read_to_end(&mut got).unwrap();
        got
    }

    /// A handler's steps: it writes `tag`, then waits in the gate for a second frame (which
    /// came with the `Hello`, so at once), then for a time, then for a frame that never
    /// comes, and says how each step ended before it closes.
    #[test]
    fn a_connection_handed_back_waits_in_the_gate_for_each_step() {
        let step = |tag: &'static [u8], then: Then| -> Then {
            Box::new(move |mut held: Held, timed_out: bool| {
                let said = if timed_out { b'T' } else { b'F' };
                held.stream.write_all(&[tag[0], said]).unwrap();
                then(held, timed_out)
            })
        };
        let on_hello: OnHello = Box::new(move |mut held: Held| {
            held.buffer.next_frame().unwrap().expect("the Hello");
            held.stream.write_all(b"h").unwrap();
            // The last step: a frame that never comes.
            let last: Then = Box::new(|mut held: Held, timed_out| {
                held.stream.write_all(&[b'c', u8::from(timed_out)]).unwrap();
                Next::Done
            });
            let wait_frame: Then = Box::new(move |held, _| Next::Await {
                held,
                timeout: Duration::from_millis(20),
                then: last,
            });
            let later: Then = Box::new(move |mut held: Held, _| {
                held.buffer.next_frame().unwrap().expect("the second frame");
                Next::Later {
                    held,
                    after: Duration::from_millis(5),
                    then: step(b"b", wait_frame),
                }
            });
            Next::Await {
                held,
                timeout: Duration::from_secs(10),
                then: step(b"a", later),
            }
        });
        let (address, _gate) = start(on_hello);
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        let mut bytes = hello();
        bytes.extend_from_slice(&hello());
        stream.write_all(&bytes).unwrap();
        // The second frame was there at once (F), the time ran out (T), the third frame
        // never came (timed out: 1).
        assert_eq!(read_to_end(stream), b"haFbTc\x01");
    }

    /// A connection whose bytes keep coming, each a step of its handshake, moves one step
    /// per turn of the gate's loop: the gate neither recurses once per step (which a stream
    /// of tiny records would overflow the stack with) nor starves the others meanwhile.
    #[test]
    fn a_stream_of_steps_neither_deepens_the_stack_nor_holds_others_up() {
        fn step(mut held: Held, _: bool) -> Next {
            if held.buffer.take_unread().is_empty() {
                return Next::Done;
            }
            Next::AwaitBytes {
                held,
                timeout: Duration::from_secs(10),
                then: Box::new(step),
            }
        }
        let on_hello: OnHello = Box::new(|mut held: Held| {
            held.buffer.next_frame().unwrap().expect("the Hello");
            if held.buffer.take_unread() == b"stream" {
                return Next::AwaitBytes {
                    held,
                    timeout: Duration::from_secs(10),
                    then: Box::new(step),
                };
            }
            held.stream.write_all(b"served").unwrap();
            Next::Done
        });
        let (address, _gate) = start(on_hello);
        let mut streaming = std::net::TcpStream::connect(address).unwrap();
        streaming.set_nodelay(true).unwrap();
        let mut first = hello();
        first.extend_from_slice(b"stream");
        streaming.write_all(&first).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let writer = {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    if streaming.write_all(&[22]).is_err() {
                        return;
                    }
                }
            })
        };
        std::thread::sleep(Duration::from_millis(300));
        let mut other = std::net::TcpStream::connect(address).unwrap();
        other.write_all(&hello()).unwrap();
        other.shutdown(std::net::Shutdown::Write).unwrap();
        let served = read_to_end(other);
        stop.store(true, Ordering::Relaxed);
        writer.join().unwrap();
        assert_eq!(
            served, b"served",
            "the other connection was served meanwhile"
        );
    }

    /// A connection that ends while the gate waits for its next frame is handed back at once
    /// (not at its deadline): its handler reads the end.
    #[test]
    fn a_connection_that_ends_while_awaited_is_handed_back_at_once() {
        let (told, heard) = std::sync::mpsc::channel();
        let told = std::sync::Mutex::new(told);
        let on_hello: OnHello = Box::new(move |held: Held| {
            let told = told.lock().unwrap().clone();
            Next::Await {
                held,
                timeout: Duration::from_secs(60),
                then: Box::new(move |mut held: Held, timed_out| {
                    let mut byte = [0];
                    let read = held.stream.read(&mut byte).unwrap();
                    told.send((timed_out, read)).unwrap();
                    Next::Done
                }),
            }
        });
        let (address, _gate) = start(on_hello);
        let mut stream = std::net::TcpStream::connect(address).unwrap();
        stream.write_all(&hello()).unwrap();
        stream.shutdown(std::net::Shutdown::Write).unwrap();
        let got = heard
            .recv_timeout(Duration::from_secs(10))
            .expect("handed back");
        assert_eq!(
            got,
            (false, 0),
            "not timed out, and the handler reads the end"
        );
    }
}
