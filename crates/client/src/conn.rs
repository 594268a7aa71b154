//! One TCP connection to one node: the handshake, and one attempt of a call.
//!
//! Every wait ends at an `until` instant the caller computes from its attempt timeout and the
//! call's deadline, so nothing here can block past the deadline. Whatever a node sends is
//! decoded by `tandem_wire`, which never panics; anything that is not the expected frame is a
//! [`Failure`] value, and the caller drops the connection.

use std::fmt;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

use tandem_replication::NodeId;
use tandem_wire::{
    AuthStep, ErrorCode, ErrorFrame, Frame, FrameBuffer, FrameError, Hello, MembersAnswer,
    ReplyStatus, Role,
};

/// The longest frame the stub accepts from a node. A reply body is bounded by the server's
/// own frame limit, whose default this is.
pub(crate) const MAX_FRAME_LEN: usize = tandem_wire::MAX_FRAME_LEN_DEFAULT;

/// A connection's byte stream: the socket, or TLS on it.
#[derive(Debug)]
enum Stream {
    Plain(TcpStream),
    Tls(Box<rustls::StreamOwned<rustls::ClientConnection, TcpStream>>),
}

impl Stream {
    fn socket(&self) -> &TcpStream {
        match self {
            Stream::Plain(socket) => socket,
            Stream::Tls(tls) => &tls.sock,
        }
    }
}

impl Read for Stream {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.read(buf),
            Stream::Tls(tls) => tls.read(buf),
        }
    }
}

impl Write for Stream {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Plain(socket) => socket.write(buf),
            Stream::Tls(tls) => tls.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Stream::Plain(socket) => socket.flush(),
            Stream::Tls(tls) => tls.flush(),
        }
    }
}

/// A connection to a node that welcomed this client as its group's primary.
#[derive(Debug)]
pub(crate) struct Conn {
    stream: Stream,
    buffer: FrameBuffer,
    /// The node's position in `ClientConfig::nodes`.
    pub(crate) index: usize,
    pub(crate) node: NodeId,
    pub(crate) view: u64,
    /// The socket's read and write timeouts as last set: a wait sets them again only when
    /// they would end past its `until` or long before it, so a call that is answered at once
    /// costs no `setsockopt`.
    read_timeout: Option<Duration>,
    write_timeout: Option<Duration>,
}

/// How a node answered the `Hello`.
#[derive(Debug)]
pub(crate) enum Greeting {
    Primary(Conn),
    /// A backup welcomed the client: it serves reads.
    Backup(Conn),
    /// An `Error` frame: `NotPrimary` from a backup, or a refusal of the `Hello` itself.
    Refused(ErrorFrame),
}

/// A node's answer to a call.
#[derive(Debug)]
pub(crate) enum Answer {
    Reply {
        lsn: u64,
        status: ReplyStatus,
        body: Vec<u8>,
    },
    Error(ErrorFrame),
}

/// Why a connection is no longer usable. The caller drops it.
#[derive(Debug)]
pub(crate) enum Failure {
    Connect(io::Error),
    Io(io::Error),
    /// The TLS handshake failed (the node's certificate, or a node without TLS).
    Tls(io::Error),
    Closed {
        buffered: usize,
    },
    Timeout,
    Frame(FrameError),
    /// A well-formed frame a node never sends a client at this point.
    Unexpected(&'static str),
    /// An `Error` frame where a node answers with something else.
    Refused(ErrorFrame),
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Connect(err) => write!(f, "connect failed: {err}"),
            Failure::Io(err) => write!(f, "I/O error: {err}"),
            Failure::Tls(err) => write!(f, "TLS handshake failed: {err}"),
            Failure::Closed { buffered: 0 } => f.write_str("the node closed the connection"),
            Failure::Closed { buffered } => write!(
                f,
                "the node closed the connection in the middle of a frame ({buffered} bytes in)"
            ),
            Failure::Timeout => f.write_str("no answer within the attempt timeout"),
            Failure::Frame(err) => write!(f, "malformed frame: {err}"),
            Failure::Unexpected(kind) => write!(f, "unexpected {kind} frame"),
            Failure::Refused(ErrorFrame { code, message }) => {
                write!(f, "the node answered {code:?}: {message}")
            }
        }
    }
}

impl Conn {
    /// Connects to `addr`, sends `hello` (the encoded `Hello` frame of `greeter.hello`) and
    /// reads the answer; a node that asks for a password gets `greeter`'s proof.
    pub(crate) fn open(
        addr: SocketAddr,
        index: usize,
        hello: &[u8],
        greeter: &Greeter,
        until: Instant,
    ) -> Result<Greeting, Failure> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        let stream = TcpStream::connect_timeout(&addr, left).map_err(Failure::Connect)?;
        // Calls and replies are small and latency-bound: no Nagle delay.
        stream.set_nodelay(true).map_err(Failure::Io)?;
        let mut conn = Conn {
            stream: Stream::Plain(stream),
            buffer: FrameBuffer::new(MAX_FRAME_LEN),
            index,
            node: 0,
            view: 0,
            read_timeout: None,
            write_timeout: None,
        };
        conn.write(hello, until)?;
        if let Some(tls) = &greeter.tls {
            // The node announces TLS; it sends nothing more until the handshake starts, so
            // nothing of the handshake is in the buffer.
            loop {
                match conn.buffer.next_frame() {
                    Ok(Some(Frame::Auth(auth))) if auth.step == AuthStep::StartTls => break,
                    Ok(Some(Frame::Error(error))) => return Ok(Greeting::Refused(error)),
                    Ok(Some(Frame::Welcome(_) | Frame::Auth(_))) => {
                        return Ok(Greeting::Refused(ErrorFrame {
                            code: ErrorCode::Unauthorized,
                            message: "the stub asks for TLS and the node's native port does \
                                      not speak it: set [tls] native = true on the nodes, or \
                                      give the stub no ClientConfig::tls"
                                .into(),
                        }));
                    }
                    Ok(Some(other)) => return Err(Failure::Unexpected(other.kind())),
                    Ok(None) => conn.fill(until)?,
                    Err(err) => return Err(Failure::Frame(err)),
                }
            }
            conn.start_tls(tls, addr, until)?;
            // The Hello again, under TLS: the node checks it is the one it read.
            conn.write(hello, until)?;
        }
        loop {
            match conn.buffer.next_frame() {
                Ok(Some(Frame::Welcome(welcome))) => {
                    conn.node = welcome.node_id;
                    conn.view = welcome.view;
                    return Ok(match welcome.role {
                        Role::Primary => Greeting::Primary(conn),
                        Role::Backup => Greeting::Backup(conn),
                    });
                }
                Ok(Some(Frame::Error(error))) => return Ok(Greeting::Refused(error)),
                Ok(Some(Frame::Auth(auth))) if auth.step == AuthStep::StartTls => {
                    return Ok(Greeting::Refused(ErrorFrame {
                        code: ErrorCode::Unauthorized,
                        message: "this node's native port speaks TLS: give the client the \
                                  cluster's CA (the stub's ClientConfig::tls, or tandem \
                                  proxy --tls-ca)"
                            .into(),
                    }));
                }
                Ok(Some(Frame::Auth(challenge))) if challenge.step == AuthStep::Challenge => {
                    let Some(credentials) = &greeter.credentials else {
                        return Ok(Greeting::Refused(ErrorFrame {
                            code: ErrorCode::Unauthorized,
                            message: "the node asks clients for a password: give the stub \
                                      credentials (ClientConfig::credentials)"
                                .into(),
                        }));
                    };
                    let proof = tandem_wire::client_proof(
                        &credentials.password,
                        &greeter.hello,
                        &challenge.nonce,
                    );
                    let mut frame = Vec::new();
                    tandem_wire::encode_client_proof(&mut frame, &credentials.user, &proof);
                    conn.write(&frame, until)?;
                }
                Ok(Some(other)) => return Err(Failure::Unexpected(other.kind())),
                Ok(None) => conn.fill(until)?,
                Err(err) => return Err(Failure::Frame(err)),
            }
        }
    }

    /// Sends `call` (an encoded `Call` frame for `seq`) and waits until `until` for its answer.
    /// A `Reply` for another seq is a late duplicate of an earlier call: it is counted in
    /// `stale_replies` and skipped.
    pub(crate) fn attempt(
        &mut self,
        call: &[u8],
        seq: u64,
        until: Instant,
        stale_replies: &mut u64,
    ) -> Result<Answer, Failure> {
        self.send(call, until)?;
        self.answer(seq, until, stale_replies)
    }

    /// Sends `call` (an encoded `Call` frame) by `until`, not waiting for its answer.
    pub(crate) fn send(&mut self, call: &[u8], until: Instant) -> Result<(), Failure> {
        self.write(call, until)
    }

    /// Waits until `until` for the answer to the call `seq` sent last ([`Conn::send`]),
    /// skipping replies to earlier seqs as [`Conn::attempt`] does.
    pub(crate) fn answer(
        &mut self,
        seq: u64,
        until: Instant,
        stale_replies: &mut u64,
    ) -> Result<Answer, Failure> {
        loop {
            match self.buffered_answer(seq, stale_replies)? {
                Some(answer) => return Ok(answer),
                None => self.fill(until)?,
            }
        }
    }

    /// [`Conn::answer`] without waiting, on a socket in non-blocking mode
    /// ([`Conn::set_nonblocking`]): `None` until the whole answer has arrived.
    pub(crate) fn answer_now(
        &mut self,
        seq: u64,
        stale_replies: &mut u64,
    ) -> Result<Option<Answer>, Failure> {
        loop {
            if let Some(answer) = self.buffered_answer(seq, stale_replies)? {
                return Ok(Some(answer));
            }
            match self.stream.read(self.buffer.spare()) {
                Ok(0) => {
                    let buffered = self.buffer.buffered();
                    return Err(Failure::Closed { buffered });
                }
                Ok(n) => self.buffer.filled(n),
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(None),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(Failure::Io(err)),
            }
        }
    }

    /// The answer to call `seq` if the buffer holds it, skipping replies to earlier seqs.
    fn buffered_answer(
        &mut self,
        seq: u64,
        stale_replies: &mut u64,
    ) -> Result<Option<Answer>, Failure> {
        loop {
            match self.buffer.next_frame() {
                Ok(Some(Frame::Reply(reply))) if reply.seq == seq => {
                    return Ok(Some(Answer::Reply {
                        lsn: reply.lsn,
                        status: reply.status,
                        body: reply.body.to_vec(),
                    }));
                }
                Ok(Some(Frame::Reply(_))) => *stale_replies += 1,
                // An Error carries no seq. It answers this send: the stub keeps at most one
                // call unanswered on a connection and drops a connection that timed out.
                Ok(Some(Frame::Error(error))) => return Ok(Some(Answer::Error(error))),
                Ok(Some(other)) => return Err(Failure::Unexpected(other.kind())),
                Ok(None) => return Ok(None),
                Err(err) => return Err(Failure::Frame(err)),
            }
        }
    }

    /// Puts the socket in non-blocking mode (for [`Conn::answer_now`]) or back: every other
    /// method waits, and needs it blocking.
    pub(crate) fn set_nonblocking(&mut self, nonblocking: bool) -> Result<(), Failure> {
        self.stream
            .socket()
            .set_nonblocking(nonblocking)
            .map_err(Failure::Io)
    }

    /// The socket's descriptor, for an event loop to wait on.
    pub(crate) fn raw_fd(&self) -> std::os::fd::RawFd {
        std::os::fd::AsRawFd::as_raw_fd(self.stream.socket())
    }

    /// Sends `members` (an encoded `Members` frame) and waits until `until` for the answer.
    pub(crate) fn members(
        &mut self,
        members: &[u8],
        until: Instant,
    ) -> Result<MembersAnswer, Failure> {
        self.write(members, until)?;
        loop {
            match self.buffer.next_frame() {
                Ok(Some(Frame::MembersAnswer(answer))) => return Ok(answer),
                Ok(Some(Frame::Error(error))) => return Err(Failure::Refused(error)),
                Ok(Some(other)) => return Err(Failure::Unexpected(other.kind())),
                Ok(None) => self.fill(until)?,
                Err(err) => return Err(Failure::Frame(err)),
            }
        }
    }

    /// Runs the TLS handshake with the node at `addr` after the plain `Hello`: its
    /// certificate must chain to the CA of `tls` and name the address's IP.
    fn start_tls(
        &mut self,
        tls: &crate::ClientTls,
        addr: SocketAddr,
        until: Instant,
    ) -> Result<(), Failure> {
        let Stream::Plain(socket) = &self.stream else {
            unreachable!("TLS starts once, on the plain stream");
        };
        if self.buffer.buffered() > 0 {
            // A node sends nothing between its StartTls and the handshake.
            return Err(Failure::Unexpected("bytes after StartTls"));
        }
        let socket = socket.try_clone().map_err(Failure::Io)?;
        let name = rustls::pki_types::ServerName::IpAddress(addr.ip().into());
        let session = rustls::ClientConnection::new(std::sync::Arc::clone(&tls.config), name)
            .map_err(|err| Failure::Tls(io::Error::other(err)))?;
        let mut tls = rustls::StreamOwned::new(session, socket);
        while tls.conn.is_handshaking() {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Timeout);
            }
            tls.sock.set_read_timeout(Some(left)).map_err(Failure::Io)?;
            tls.sock
                .set_write_timeout(Some(left))
                .map_err(Failure::Io)?;
            if let Err(err) = tls.conn.complete_io(&mut tls.sock) {
                return Err(match err.kind() {
                    ErrorKind::WouldBlock | ErrorKind::TimedOut => Failure::Timeout,
                    _ => Failure::Tls(err),
                });
            }
        }
        self.stream = Stream::Tls(Box::new(tls));
        Ok(())
    }

    fn write(&mut self, bytes: &[u8], until: Instant) -> Result<(), Failure> {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(Failure::Timeout);
        }
        if needs_timeout(self.write_timeout, left) {
            self.stream
                .socket()
                .set_write_timeout(Some(left))
                .map_err(Failure::Io)?;
            self.write_timeout = Some(left);
        }
        self.stream
            .write_all(bytes)
            .and_then(|()| self.stream.flush())
            .map_err(|err| match err.kind() {
                ErrorKind::WouldBlock | ErrorKind::TimedOut => Failure::Timeout,
                _ => Failure::Io(err),
            })
    }

    /// Reads once into the buffer, waiting until `until` at most.
    fn fill(&mut self, until: Instant) -> Result<(), Failure> {
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::Timeout);
            }
            if needs_timeout(self.read_timeout, left) {
                self.stream
                    .socket()
                    .set_read_timeout(Some(left))
                    .map_err(Failure::Io)?;
                self.read_timeout = Some(left);
            }
            match self.stream.read(self.buffer.spare()) {
                Ok(0) => {
                    let buffered = self.buffer.buffered();
                    return Err(Failure::Closed { buffered });
                }
                Ok(n) => {
                    self.buffer.filled(n);
                    return Ok(());
                }
                // A timed-out read comes back here and the loop checks the clock: the socket
                // timeout is coarse (jiffies), `until` is the bound that counts.
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::WouldBlock | ErrorKind::TimedOut | ErrorKind::Interrupted
                    ) => {}
                Err(err) => return Err(Failure::Io(err)),
            }
        }
    }
}

/// Whether a socket whose timeout is `set` must be given `left` for a wait: when its
/// timeout would end past the wait's end (the wait would overrun its `until`), or before
/// half of it (the wait would wake, find time left and read again, over and over).
fn needs_timeout(set: Option<Duration>, left: Duration) -> bool {
    set.is_none_or(|set| set > left || set < left / 2)
}

/// What a connection greets a node with: its `Hello`, and the credentials it proves if asked.
#[derive(Clone, Debug)]
pub(crate) struct Greeter {
    pub(crate) hello: Hello,
    pub(crate) credentials: Option<crate::Credentials>,
    /// TLS after the `Hello`, if the nodes' native ports speak it.
    pub(crate) tls: Option<crate::ClientTls>,
}
