//! Native clients (stubs, `tandem proxy`) on the node's I/O loop.
//!
//! The node's acceptor reads a client's `Hello`, runs its authentication and decides which
//! role serves it (every step on the gate's thread, `cluster/acceptor.rs`); then it hands the
//! connection to the I/O loop that serves the RESP port (on the node's thread), which reads and writes
//! it from then on, with every other client's, and no thread is kept per connection. What the
//! connection's frames mean is its [`Service`]'s to say: a primary role's (calls go to the
//! node in one batch per pass, answers come back as frames) or a backup role's (reads, one
//! at a time).
//!
//! Frames for a connection reach the loop through its [`Mailbox`]: whoever answers (the
//! node's thread) puts them there and wakes the loop once until it looks, and the loop
//! writes them in the order they came, sealed in TLS records if the connection has them.

use std::io::{self, Read};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};

use mio::net::TcpStream;
use mio::{Interest, Registry, Token};
use tandem_wire::{FrameBuffer, encode_error};

use crate::metrics::Metrics;
use crate::net::ConnError;
use crate::peer_auth::TlsWriter;

/// Reply bytes a connection has not taken yet before its frames are left unread (TCP then
/// pushes back on the client).
const UNSENT_MAX: usize = 4 << 20;

/// Why a client connection that sent another kind of frame after its `Hello` is closed.
pub(crate) const ONLY_CALLS_AFTER_HELLO: &str =
    "after its Hello a client sends only Call, Read and Members frames";

/// What a native connection's frames mean: the role that serves it.
pub(crate) trait Service: Send {
    /// The connection starts: writes its `Welcome` into `out` and tells the role where the
    /// connection's frames go from now on.
    fn open(&mut self, sink: FrameSink, out: &mut Vec<u8>) -> Result<(), ConnError>;

    /// Takes the whole frames `buffer` holds while [`Service::takes_more`]: answers what it
    /// can at once into `out` and hands the rest to the role. `local`: the address the
    /// client reached this node at.
    fn take(
        &mut self,
        buffer: &mut FrameBuffer,
        local: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnError>;

    /// Frames the role put in the mailbox for this connection (`None`: a read it dropped
    /// unanswered), to write into `out`.
    fn mail(&mut self, frames: Option<Vec<u8>>, out: &mut Vec<u8>) -> Result<(), ConnError>;

    /// Whether the connection's next frames may be taken now.
    fn takes_more(&self) -> bool;

    /// The connection ended: the role forgets it.
    fn closed(&mut self);
}

/// A connection the acceptor hands to the loop once its handshake is done.
pub(crate) struct Handoff {
    pub(crate) stream: std::net::TcpStream,
    /// What was read after the handshake (frames already whole, perhaps).
    pub(crate) buffer: FrameBuffer,
    /// The writer of its TLS records, if it speaks TLS.
    pub(crate) tls: Option<TlsWriter>,
    pub(crate) service: Box<dyn Service>,
    /// Counts the connection among the clients until it closes.
    pub(crate) counted: ClientCount,
}

/// One client connection counted in `client_connections`, until dropped.
pub(crate) struct ClientCount(Arc<Metrics>);

impl ClientCount {
    pub(crate) fn new(metrics: &Arc<Metrics>) -> ClientCount {
        metrics.client_connections.inc();
        ClientCount(Arc::clone(metrics))
    }
}

impl Drop for ClientCount {
    fn drop(&mut self) {
        self.0.client_connections.dec();
    }
}

/// The way into the loop for connections the acceptor made ready.
#[derive(Clone)]
pub struct NativeDoor {
    handoffs: Sender<Handoff>,
    wake: crate::resp::Wake,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Handoff")
    }
}

impl std::fmt::Debug for NativeDoor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("NativeDoor")
    }
}

impl NativeDoor {
    pub(crate) fn new(handoffs: Sender<Handoff>, wake: crate::resp::Wake) -> NativeDoor {
        NativeDoor { handoffs, wake }
    }

    /// Hands a connection over; dropped (closed) if the loop has stopped.
    pub(crate) fn hand(&self, handoff: Handoff) {
        if self.handoffs.send(handoff).is_ok() {
            (self.wake)();
        }
    }
}

/// Frames for the loop's connections, from other threads.
pub struct Mailbox {
    mail: Mutex<Vec<(Token, Option<Vec<u8>>)>>,
    /// Whether the loop was woken since it last took the mail: one wake-up serves every
    /// letter that arrives before it looks.
    woken: AtomicBool,
    wake: crate::resp::Wake,
}

impl std::fmt::Debug for Mailbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Mailbox")
    }
}

impl Mailbox {
    pub(crate) fn new(wake: crate::resp::Wake) -> Mailbox {
        Mailbox {
            mail: Mutex::new(Vec::new()),
            woken: AtomicBool::new(false),
            wake,
        }
    }

    fn put(&self, token: Token, frames: Option<Vec<u8>>) {
        self.mail
            .lock()
            .expect("not poisoned")
            .push((token, frames));
        if !self.woken.swap(true, Ordering::AcqRel) {
            (self.wake)();
        }
    }

    /// Moves every letter into `into`, in the order they came.
    fn take(&self, into: &mut Vec<(Token, Option<Vec<u8>>)>) {
        self.woken.store(false, Ordering::Release);
        into.append(&mut self.mail.lock().expect("not poisoned"));
    }
}

/// Where frames for one native client go: the I/O loop's mailbox, under the client's token.
#[derive(Clone, Debug)]
pub struct FrameSink {
    token: Token,
    mailbox: Arc<Mailbox>,
}

impl FrameSink {
    /// Hands whole frames over; nothing happens if their connection is gone.
    pub(crate) fn send(&self, frames: Vec<u8>) {
        self.mailbox.put(self.token, Some(frames));
    }
}

/// Where one read's answer goes: answered once, or, if dropped unanswered (its role
/// ended), its connection is told so and closes.
#[derive(Debug)]
pub(crate) struct FrameReply {
    sink: FrameSink,
    answered: bool,
}

impl FrameReply {
    pub(crate) fn new(sink: FrameSink) -> FrameReply {
        FrameReply {
            sink,
            answered: false,
        }
    }

    pub(crate) fn answer(mut self, frame: Vec<u8>) {
        self.answered = true;
        self.sink.send(frame);
    }
}

impl Drop for FrameReply {
    fn drop(&mut self) {
        if !self.answered {
            self.sink.mailbox.put(self.sink.token, None);
        }
    }
}

/// One native connection on the loop.
pub(crate) struct NativeConn {
    stream: TcpStream,
    buffer: FrameBuffer,
    tls: Option<TlsWriter>,
    service: Box<dyn Service>,
    /// Plain frames for the client, before sealing.
    plain: Vec<u8>,
    /// Bytes for the socket, from `written` on.
    pending: Vec<u8>,
    written: usize,
    /// The address the client reached this node at (a `Members` answer names it).
    local: Option<SocketAddr>,
    /// The socket may have more to read (edge-triggered: until a read would block, or
    /// gives less than it asked for while the peer has not closed its end).
    readable: bool,
    /// The peer closed its end (an event said so): reads go on until they give 0.
    peer_closed: bool,
    /// Nothing more is read: close once `pending` is written.
    closing: bool,
    counted: ClientCount,
}

impl NativeConn {
    /// Starts serving `handoff` under `token`; `None` if its socket cannot be polled.
    pub(crate) fn open(
        handoff: Handoff,
        token: Token,
        registry: &Registry,
        mailbox: &Arc<Mailbox>,
    ) -> Option<NativeConn> {
        let Handoff {
            stream,
            buffer,
            tls,
            service,
            counted,
        } = handoff;
        stream.set_nonblocking(true).ok()?;
        let mut stream = TcpStream::from_std(stream);
        let interest = Interest::READABLE | Interest::WRITABLE;
        registry.register(&mut stream, token, interest).ok()?;
        let local = stream.local_addr().ok();
        let mut conn = NativeConn {
            stream,
            buffer,
            tls,
            service,
            plain: Vec::new(),
            pending: Vec::new(),
            written: 0,
            local,
            readable: true,
            peer_closed: false,
            closing: false,
            counted,
        };
        let sink = FrameSink {
            token,
            mailbox: Arc::clone(mailbox),
        };
        let opened = conn.service.open(sink, &mut conn.plain);
        conn.after(opened);
        Some(conn)
    }

    /// Frames that came for this connection.
    pub(crate) fn mail(&mut self, frames: Option<Vec<u8>>) {
        let taken = self.service.mail(frames, &mut self.plain);
        self.after(taken);
    }

    /// Reads and takes what the client sent while the service takes more, then writes what
    /// is ready. False once the connection is done (a closing one once it wrote everything,
    /// the frame that says why included).
    pub(crate) fn serve(&mut self) -> bool {
        let served = self.read_and_take();
        self.after(served);
        self.flush().is_ok() && !(self.closing && self.pending.is_empty())
    }

    fn read_and_take(&mut self) -> Result<(), ConnError> {
        loop {
            if self.service.takes_more() && !self.closing {
                self.service
                    .take(&mut self.buffer, self.local, &mut self.plain)?;
            }
            let unsent = self.pending.len() - self.written + self.plain.len();
            if !self.readable || self.closing || !self.service.takes_more() || unsent > UNSENT_MAX {
                return Ok(());
            }
            let spare = self.buffer.spare();
            let asked = spare.len();
            match self.stream.read(spare) {
                Ok(0) => return Err(ConnError::Closed),
                Ok(n) => {
                    self.buffer.filled(n);
                    // A socket that gave less than was asked is empty now: bytes that come
                    // later raise a new event, so the read that would only say `WouldBlock`
                    // is skipped (as the RESP connections do), unless the peer closed its end.
                    if n < asked && !self.peer_closed {
                        self.readable = false;
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => self.readable = false,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(err) => return Err(ConnError::Io(err)),
            }
        }
    }

    /// Seals what the service wrote; a connection that failed is told why (if the client
    /// caused it) and closes once that is written.
    fn after(&mut self, result: Result<(), ConnError>) {
        if let Err(err) = result {
            if !matches!(err, ConnError::Closed | ConnError::Io(_)) {
                self.counted.0.frames_rejected.inc();
                encode_error(&mut self.plain, err.code(), &err.to_string());
            }
            self.closing = true;
        }
        if self.plain.is_empty() {
            return;
        }
        let sealed = match &mut self.tls {
            Some(tls) => tls.seal(&self.plain, &mut self.pending),
            None => {
                self.pending.extend_from_slice(&self.plain);
                Ok(())
            }
        };
        self.plain.clear();
        if sealed.is_err() {
            self.closing = true;
        }
    }

    /// What an event said of the socket: it has bytes to read, its peer closed its end.
    pub(crate) fn readable(&mut self, readable: bool, peer_closed: bool) {
        self.readable |= readable || peer_closed;
        self.peer_closed |= peer_closed;
    }

    /// Writes what is pending until the socket takes no more.
    fn flush(&mut self) -> io::Result<()> {
        crate::net::write_pending(&mut self.stream, &mut self.pending, &mut self.written)
    }

    /// Ends the connection: the role forgets it and the socket leaves the poll.
    pub(crate) fn close(mut self, registry: &Registry) {
        self.service.closed();
        let _ = registry.deregister(&mut self.stream);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// The loop's native connections and the ways into them.
pub(crate) struct NativeConns {
    pub(crate) conns: std::collections::BTreeMap<Token, NativeConn>,
    pub(crate) mailbox: Arc<Mailbox>,
    handoffs: Receiver<Handoff>,
    letters: Vec<(Token, Option<Vec<u8>>)>,
}

impl NativeConns {
    pub(crate) fn new(handoffs: Receiver<Handoff>, mailbox: Arc<Mailbox>) -> NativeConns {
        NativeConns {
            conns: std::collections::BTreeMap::new(),
            mailbox,
            handoffs,
            letters: Vec::new(),
        }
    }

    /// Takes the connections handed over, each under a token `token_next` gives; returns
    /// the tokens to look at.
    pub(crate) fn take_handoffs(
        &mut self,
        registry: &Registry,
        mut token_next: impl FnMut() -> Token,
        visit: &mut crate::resp::Visits,
    ) {
        while let Ok(handoff) = self.handoffs.try_recv() {
            let token = token_next();
            if let Some(conn) = NativeConn::open(handoff, token, registry, &self.mailbox) {
                self.conns.insert(token, conn);
                visit.insert(token);
            }
        }
    }

    /// Hands each connection the frames that came for it.
    pub(crate) fn take_mail(&mut self, visit: &mut crate::resp::Visits) {
        let mut letters = std::mem::take(&mut self.letters);
        self.mailbox.take(&mut letters);
        for (token, frames) in letters.drain(..) {
            // A connection that closed needs nothing.
            if let Some(conn) = self.conns.get_mut(&token) {
                conn.mail(frames);
                visit.insert(token);
            }
        }
        self.letters = letters;
    }

    /// Serves connection `token`, closing it once it is done.
    pub(crate) fn serve(&mut self, token: Token, registry: &Registry) {
        let Some(conn) = self.conns.get_mut(&token) else {
            return;
        };
        if !conn.serve() {
            let conn = self.conns.remove(&token).expect("served just now");
            conn.close(registry);
        }
    }
}
