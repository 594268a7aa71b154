//! The node's small HTTP responder: `GET /metrics`, `GET /status` and `GET /checksum`.
//!
//! One thread serves every connection from one poll, so a connection costs a socket and its
//! buffer, never a thread. One HTTP/1.1 request per connection (`Connection: close`);
//! `/checksum`, which pauses the node, is guarded by [`HttpAccess`] (open on a loopback
//! listener, else the node's password as `Authorization: Bearer`, else refused).
//!
//! Its fault model: a client may be slow, silent, send garbage or an endless header, or
//! vanish mid-response. At most [`CONNECTIONS_MAX`] connections are served at once (more are
//! answered 503 and closed); each must deliver its request head within [`REQUEST_TIMEOUT`]
//! (else 408) and in at most [`REQUEST_HEAD_MAX`] bytes (else 400), and must take the
//! response within [`REQUEST_TIMEOUT`] (else it is closed). A malformed request gets 400, an
//! unknown path or a method other than GET 404, a panicking status callback 500; none of
//! these stops the responder. A response is computed on the responder's thread: `/metrics`
//! and `/status` read atomics and a lock or two, and `/checksum` (for those allowed to ask)
//! holds the others for as long as the node's checksum takes.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token};

use crate::http_access::{CHALLENGE_HEADER, Denied, HttpAccess};
use crate::metrics::{AuthPort, METRICS_CONTENT_TYPE, Metrics};

/// The longest request head (request line and headers) the responder reads.
pub const REQUEST_HEAD_MAX: usize = 8 << 10;

/// How long a client has to send its request head, and to take the response.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(1);

/// Connections served at once; more are answered 503.
pub const CONNECTIONS_MAX: usize = 32;

/// What the responder reads of a client's bytes after its response (a body, the rest of an
/// oversized head) before it closes anyway.
const DRAIN_MAX: usize = 1 << 20;

/// Serves GET `/metrics` (the OpenMetrics text, content type [`METRICS_CONTENT_TYPE`]) and
/// GET `/status` and GET `/checksum` (whatever `status(false)` and `status(true)` return, as
/// `application/json`: the second may take a segment's checksum, the first must be cheap) on
/// `listener`, on a thread of its own, until the process exits. Anything else: 404; a
/// malformed or oversized (> [`REQUEST_HEAD_MAX`]) request: 400. `/checksum` pauses the node,
/// so it follows [`HttpAccess`] for the listener's address and the node's `password`: open on
/// loopback, else 401 without `Authorization: Bearer <password>` (a wrong one counted as a
/// failed authentication), else 403 when the node has no password. See the module
/// documentation for the fault model.
///
/// Panics only if the responder's thread cannot be started.
pub fn serve(
    listener: std::net::TcpListener,
    metrics: Arc<Metrics>,
    password: Option<tandem_redis::session::Password>,
    status: impl Fn(bool) -> String + Send + Sync + 'static,
) -> JoinHandle<()> {
    // A listener that cannot say its address is taken as reachable from anywhere.
    let address = listener
        .local_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)));
    let access = HttpAccess::new(address, password);
    thread::Builder::new()
        .name("metrics-http".to_owned())
        .spawn(move || {
            let responder = Responder::new(listener, metrics, access, Box::new(status));
            match responder {
                Ok(responder) => responder.run(),
                Err(err) => tracing::error!("the HTTP responder cannot start: {err}"),
            }
        })
        .expect("cannot start the metrics responder thread")
}

type Status = Box<dyn Fn(bool) -> String + Send + Sync>;

const LISTENER: Token = Token(0);

/// One client's connection and where its exchange stands.
struct HttpConn {
    stream: TcpStream,
    peer: Option<SocketAddr>,
    stage: Stage,
    /// When the current stage's time is up.
    due: Instant,
}

enum Stage {
    /// Reading the request head.
    Head(Vec<u8>),
    /// Writing the response; then, if `drain`, reading what the client still sends.
    Reply {
        bytes: Vec<u8>,
        written: usize,
        drain: bool,
    },
    /// The response is written and the write side shut: what the client still sends is read
    /// and dropped for a moment, since closing with unread bytes would reset the connection
    /// and could destroy the response before the client reads it.
    Drain { read: usize },
}

/// What one step of a connection's exchange came to.
enum Step {
    /// The socket has nothing more for now: wait for its next event (or its time).
    Wait,
    /// The exchange moved on: step again.
    Again,
    /// The exchange is over: close the connection.
    Close,
}

struct Responder {
    poll: Poll,
    listener: TcpListener,
    metrics: Arc<Metrics>,
    access: HttpAccess,
    status: Status,
    conns: HashMap<Token, HttpConn>,
    token_next: usize,
}

impl Responder {
    fn new(
        listener: std::net::TcpListener,
        metrics: Arc<Metrics>,
        access: HttpAccess,
        status: Status,
    ) -> io::Result<Responder> {
        listener.set_nonblocking(true)?;
        let mut listener = TcpListener::from_std(listener);
        let poll = Poll::new()?;
        poll.registry()
            .register(&mut listener, LISTENER, Interest::READABLE)?;
        Ok(Responder {
            poll,
            listener,
            metrics,
            access,
            status,
            conns: HashMap::new(),
            token_next: LISTENER.0 + 1,
        })
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        loop {
            let now = Instant::now();
            let timeout = self.conns.values().map(|conn| conn.due).min();
            let timeout = timeout.map(|due| due.saturating_duration_since(now));
            if let Err(err) = self.poll.poll(&mut events, timeout) {
                if err.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!(
                    "the HTTP responder stopped: waiting for its sockets failed: {err}"
                );
                return;
            }
            for event in &events {
                match event.token() {
                    LISTENER => self.accept(),
                    token => self.advance(token),
                }
            }
            self.expire(Instant::now());
        }
    }

    fn accept(&mut self) {
        loop {
            let (mut stream, peer) = match self.listener.accept() {
                Ok(accepted) => accepted,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                // Out of descriptors, or a connection reset as it came: the next event
                // tries again.
                Err(_) => return,
            };
            if self.conns.len() >= CONNECTIONS_MAX {
                refuse_busy(&mut stream);
                continue;
            }
            let token = Token(self.token_next);
            self.token_next += 1;
            let interest = Interest::READABLE | Interest::WRITABLE;
            if self
                .poll
                .registry()
                .register(&mut stream, token, interest)
                .is_err()
            {
                continue;
            }
            let conn = HttpConn {
                stream,
                peer: Some(peer),
                stage: Stage::Head(Vec::with_capacity(1024)),
                due: Instant::now() + REQUEST_TIMEOUT,
            };
            self.conns.insert(token, conn);
            // The request may have come with the connection: its event may be spent.
            self.advance(token);
        }
    }

    /// Moves a connection's exchange on as far as its socket allows.
    fn advance(&mut self, token: Token) {
        let Some(mut conn) = self.conns.remove(&token) else {
            return;
        };
        loop {
            let step = match &mut conn.stage {
                Stage::Head(head) => match read_some(&mut conn.stream, head) {
                    Ok(Some(())) => self.head_read(&mut conn),
                    Ok(None) => Step::Wait,
                    Err(RequestError::Closed | RequestError::Io) => Step::Close,
                    Err(err) => {
                        conn.reply(refusal(&err), true);
                        Step::Again
                    }
                },
                Stage::Reply { .. } => conn.write(),
                Stage::Drain { read } => conn_drain(&mut conn.stream, read),
            };
            match step {
                Step::Again => continue,
                Step::Wait => break,
                Step::Close => return self.close(conn),
            }
        }
        self.conns.insert(token, conn);
    }

    /// After a read of the head: the response once the head is whole or too long.
    fn head_read(&self, conn: &mut HttpConn) -> Step {
        let Stage::Head(head) = &mut conn.stage else {
            unreachable!("only a head is read");
        };
        if let Some(end) = head_end(head) {
            head.truncate(end);
            let head = std::mem::take(head);
            let reply = match parse_request_line(&head) {
                Ok((method, path)) => {
                    let guard = Guard {
                        access: &self.access,
                        head: &head,
                        metrics: &self.metrics,
                        peer: conn.peer,
                    };
                    route(method, &path, &self.metrics, &*self.status, &guard)
                }
                Err(err) => refusal(&err),
            };
            conn.reply(reply, true);
            return Step::Again;
        }
        if head.len() > REQUEST_HEAD_MAX {
            conn.reply(refusal(&RequestError::TooLarge), true);
            return Step::Again;
        }
        // More of the head may be in the socket already.
        Step::Again
    }

    /// Moves every connection whose time is up on: a head that did not come is answered 408
    /// (and nothing more is read: a client that sent nothing in time has nothing to drain); a
    /// response not taken, or a drain that lasted, ends the connection.
    fn expire(&mut self, now: Instant) {
        let due: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, conn)| conn.due <= now)
            .map(|(&token, _)| token)
            .collect();
        for token in due {
            let conn = self
                .conns
                .get_mut(&token)
                .expect("a connection just listed");
            if matches!(conn.stage, Stage::Head(_)) {
                conn.reply(refusal(&RequestError::Timeout), false);
                self.advance(token);
            } else if let Some(conn) = self.conns.remove(&token) {
                self.close(conn);
            }
        }
    }

    fn close(&mut self, mut conn: HttpConn) {
        let _ = self.poll.registry().deregister(&mut conn.stream);
    }
}

impl HttpConn {
    /// Starts writing `bytes`, the whole response; `drain`: read what the client still
    /// sends once it is written.
    fn reply(&mut self, bytes: Vec<u8>, drain: bool) {
        self.stage = Stage::Reply {
            bytes,
            written: 0,
            drain,
        };
        self.due = Instant::now() + REQUEST_TIMEOUT;
    }

    /// Writes what the socket takes of the response; once all of it, shuts the write side.
    fn write(&mut self) -> Step {
        let Stage::Reply {
            bytes,
            written,
            drain,
        } = &mut self.stage
        else {
            unreachable!("only a response is written");
        };
        while *written < bytes.len() {
            match self.stream.write(&bytes[*written..]) {
                Ok(0) => return Step::Close,
                Ok(n) => *written += n,
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Step::Close,
            }
        }
        let _ = self.stream.shutdown(Shutdown::Write);
        if !*drain {
            return Step::Close;
        }
        self.stage = Stage::Drain { read: 0 };
        self.due = Instant::now() + REQUEST_TIMEOUT;
        Step::Again
    }
}

/// Reads what the socket holds into `head`, a chunk at a time: `Some` after a chunk (the
/// caller looks at the head), `None` when the socket has nothing more for now.
fn read_some(stream: &mut TcpStream, head: &mut Vec<u8>) -> Result<Option<()>, RequestError> {
    let mut chunk = [0u8; 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) if head.is_empty() => return Err(RequestError::Closed),
            // The client stopped sending without ending its head.
            Ok(0) => return Err(RequestError::Malformed),
            Ok(n) => {
                head.extend_from_slice(&chunk[..n]);
                return Ok(Some(()));
            }
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Ok(None),
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Err(RequestError::Io),
        }
    }
}

/// Reads and drops what the client still sends after its response, up to [`DRAIN_MAX`].
fn conn_drain(stream: &mut TcpStream, read: &mut usize) -> Step {
    let mut chunk = [0u8; 4096];
    while *read < DRAIN_MAX {
        match stream.read(&mut chunk) {
            Ok(0) => return Step::Close,
            Ok(n) => *read += n,
            Err(err) if err.kind() == io::ErrorKind::WouldBlock => return Step::Wait,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return Step::Close,
        }
    }
    Step::Close
}

/// Tells a connection the responder has no room for to come back, and closes it.
fn refuse_busy(stream: &mut TcpStream) {
    // A fresh socket's send buffer takes these few bytes at once.
    let _ = stream.write(&response(
        "503 Service Unavailable",
        TEXT,
        b"busy: too many connections; try again\n",
    ));
    let _ = stream.shutdown(Shutdown::Write);
}

/// Why no request could be read.
#[derive(Debug, PartialEq, Eq)]
enum RequestError {
    /// The client closed the connection before sending anything.
    Closed,
    /// The head did not arrive within the timeout.
    Timeout,
    /// The head is longer than [`REQUEST_HEAD_MAX`].
    TooLarge,
    /// The head is not an HTTP/1.x request line.
    Malformed,
    /// The socket failed.
    Io,
}

/// The response to a request that could not be read whole or parsed.
fn refusal(err: &RequestError) -> Vec<u8> {
    match err {
        RequestError::Timeout => response(
            "408 Request Timeout",
            TEXT,
            b"request timeout: send the whole request within 1 s\n",
        ),
        RequestError::TooLarge => response(
            "400 Bad Request",
            TEXT,
            b"bad request: the request head is longer than 8 KiB\n",
        ),
        RequestError::Malformed | RequestError::Closed | RequestError::Io => response(
            "400 Bad Request",
            TEXT,
            b"bad request: expected `GET /metrics HTTP/1.1` or `GET /status HTTP/1.1`\n",
        ),
    }
}

/// Where the head ends: the first empty line (`\r\n\r\n`, or a bare `\n\n`), if it lies within
/// [`REQUEST_HEAD_MAX`] bytes.
fn head_end(bytes: &[u8]) -> Option<usize> {
    let window = &bytes[..bytes.len().min(REQUEST_HEAD_MAX)];
    let crlf = window.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = window.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

/// The method and the path (without a query string) of a request head's first line.
fn parse_request_line(head: &[u8]) -> Result<(Method, String), RequestError> {
    let line_end = head.iter().position(|&b| b == b'\n').unwrap_or(head.len());
    let line = std::str::from_utf8(&head[..line_end]).map_err(|_| RequestError::Malformed)?;
    let line = line.strip_suffix('\r').unwrap_or(line);
    let mut parts = line.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(RequestError::Malformed);
    };
    let method_ok = !method.is_empty() && method.bytes().all(|b| b.is_ascii_uppercase());
    if !method_ok || !target.starts_with('/') || !matches!(version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(RequestError::Malformed);
    }
    let path = target.split_once('?').map_or(target, |(path, _)| path);
    let method = if method == "GET" {
        Method::Get
    } else {
        Method::Other
    };
    Ok((method, path.to_owned()))
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Method {
    Get,
    Other,
}

/// What decides whether a request may use an endpoint that pauses the node.
struct Guard<'a> {
    access: &'a HttpAccess,
    /// The request's head, whose `Authorization` header may carry the password.
    head: &'a [u8],
    metrics: &'a Metrics,
    /// The client's address, which a failed authentication names.
    peer: Option<SocketAddr>,
}

impl Guard<'_> {
    /// `None` when the request may go on; else the refusal to send (a wrong password is
    /// counted and logged as a failed authentication).
    fn refusal(&self, path: &str) -> Option<Vec<u8>> {
        let denied = self.access.check(self.head).err()?;
        if denied == Denied::WrongPassword {
            self.metrics.auth_failed(AuthPort::Http, self.peer);
        }
        let body = self.access.refusal_text(path, denied);
        Some(match denied {
            Denied::Forbidden => response("403 Forbidden", TEXT, body.as_bytes()),
            Denied::NoPassword | Denied::WrongPassword => {
                response_with("401 Unauthorized", TEXT, CHALLENGE_HEADER, body.as_bytes())
            }
        })
    }
}

/// The content type of the responder's own messages.
const TEXT: &str = "text/plain; charset=utf-8";

fn route(
    method: Method,
    path: &str,
    metrics: &Metrics,
    status: &(dyn Fn(bool) -> String + Send + Sync),
    guard: &Guard<'_>,
) -> Vec<u8> {
    match (method, path) {
        (Method::Get, "/metrics") => {
            response("200 OK", METRICS_CONTENT_TYPE, metrics.encode().as_bytes())
        }
        // The callback belongs to the caller; if it panics, this connection gets a 500 and the
        // responder carries on.
        (Method::Get, "/status") => match catch_unwind(AssertUnwindSafe(|| status(false))) {
            Ok(body) => response("200 OK", "application/json", body.as_bytes()),
            Err(_) => response(
                "500 Internal Server Error",
                "text/plain; charset=utf-8",
                b"internal error: the status callback panicked\n",
            ),
        },
        (Method::Get, "/checksum") => {
            if let Some(refusal) = guard.refusal(path) {
                return refusal;
            }
            match catch_unwind(AssertUnwindSafe(|| status(true))) {
                Ok(body) => response("200 OK", "application/json", body.as_bytes()),
                Err(_) => response(
                    "500 Internal Server Error",
                    "text/plain; charset=utf-8",
                    b"internal error: the status callback panicked\n",
                ),
            }
        }
        _ => response(
            "404 Not Found",
            "text/plain; charset=utf-8",
            b"not found: GET /metrics, /status or /checksum\n",
        ),
    }
}

fn response(status_line: &str, content_type: &str, body: &[u8]) -> Vec<u8> {
    response_with(status_line, content_type, "", body)
}

/// A response with one more header line (`extra`, without its line end; empty for none).
fn response_with(status_line: &str, content_type: &str, extra: &str, body: &[u8]) -> Vec<u8> {
    let extra = if extra.is_empty() {
        String::new()
    } else {
        format!("{extra}\r\n")
    };
    let mut out = format!(
        "HTTP/1.1 {status_line}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         {extra}Connection: close\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
    use std::sync::Arc;
    use std::thread;
    use std::time::Duration;

    use super::*;
    use crate::metrics::auth_failures;

    /// Sends `request`, reads until the server closes, returns (status code, headers, body).
    fn exchange(address: SocketAddr, request: &[u8]) -> (u16, String, String) {
        let mut stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        stream.write_all(request).unwrap();
        let mut raw = Vec::new();
        stream.read_to_end(&mut raw).unwrap();
        let raw = String::from_utf8(raw).unwrap();
        let (head, body) = raw.split_once("\r\n\r\n").expect("a response head");
        let code = head.split(' ').nth(1).unwrap().parse().unwrap();
        assert!(head.starts_with("HTTP/1.1 "), "{head}");
        assert!(head.contains("\r\nConnection: close"), "{head}");
        let length = format!("\r\nContent-Length: {}", body.len());
        assert!(head.contains(&length), "{head}");
        (code, head.to_owned(), body.to_owned())
    }

    fn start(status: impl Fn() -> String + Send + Sync + 'static) -> (SocketAddr, Arc<Metrics>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let metrics = Arc::new(Metrics::new(1, "backup"));
        serve(listener, Arc::clone(&metrics), None, move |_| status());
        (address, metrics)
    }

    /// A responder on every interface (so not loopback), with `password` or none; its
    /// address as reached from this machine, and its metrics.
    fn start_reachable(password: Option<&[u8]>) -> (SocketAddr, Arc<Metrics>) {
        let listener = TcpListener::bind("0.0.0.0:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let metrics = Arc::new(Metrics::new(1, "backup"));
        let password = password.map(tandem_redis::session::Password::new);
        serve(listener, Arc::clone(&metrics), password, |with_checksum| {
            format!(r#"{{"checksummed":{with_checksum}}}"#)
        });
        (SocketAddr::from(([127, 0, 0, 1], port)), metrics)
    }

    #[test]
    fn checksum_is_open_on_loopback_and_asks_the_password_elsewhere() {
        let (address, _) = start(|| "{}".to_owned());
        let (code, _, _) = exchange(address, b"GET /checksum HTTP/1.1\r\n\r\n");
        assert_eq!(code, 200, "a loopback listener needs no password");

        let (address, metrics) = start_reachable(Some(b"s3cret"));
        let (code, head, body) = exchange(address, b"GET /checksum HTTP/1.1\r\n\r\n");
        assert_eq!(code, 401, "{body}");
        assert!(head.contains("WWW-Authenticate: Bearer"), "{head}");
        assert!(body.contains("Authorization: Bearer PASSWORD"), "{body}");
        assert_eq!(
            auth_failures(&metrics, "http"),
            0,
            "no password is no guess"
        );
        let wrong = b"GET /checksum HTTP/1.1\r\nAuthorization: Bearer guess\r\n\r\n";
        let (code, _, body) = exchange(address, wrong);
        assert_eq!(code, 401, "{body}");
        assert_eq!(auth_failures(&metrics, "http"), 1);
        let right = b"GET /checksum HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n\r\n";
        let (code, _, body) = exchange(address, right);
        assert_eq!((code, body.as_str()), (200, r#"{"checksummed":true}"#));
        // What pauses nothing stays open.
        for path in ["/status", "/metrics"] {
            let request = format!("GET {path} HTTP/1.1\r\n\r\n");
            let (code, _, _) = exchange(address, request.as_bytes());
            assert_eq!(code, 200, "{path}");
        }
        assert_eq!(auth_failures(&metrics, "resp"), 0);
        assert_eq!(auth_failures(&metrics, "native"), 0);
    }

    #[test]
    fn checksum_is_forbidden_off_loopback_without_a_password() {
        let (address, _) = start_reachable(None);
        let with_bearer = b"GET /checksum HTTP/1.1\r\nAuthorization: Bearer x\r\n\r\n";
        for request in [&b"GET /checksum HTTP/1.1\r\n\r\n"[..], with_bearer] {
            let (code, _, body) = exchange(address, request);
            assert_eq!(code, 403, "{body}");
            assert!(
                body.contains("loopback") && body.contains("requirepass"),
                "{body}"
            );
        }
        let (code, _, body) = exchange(address, b"GET /status HTTP/1.1\r\n\r\n");
        assert_eq!((code, body.as_str()), (200, r#"{"checksummed":false}"#));
    }

    #[test]
    fn http_round_trips() {
        let (address, metrics) = start(|| r#"{"lsn":5}"#.to_owned());
        metrics.batches_received.inc_by(4);

        let (code, head, body) = exchange(address, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        assert_eq!(code, 200);
        assert!(
            head.contains(&format!("Content-Type: {METRICS_CONTENT_TYPE}")),
            "{head}"
        );
        assert!(body.contains(r#"tandem_batches_received_total{node="1"} 4"#));
        assert!(body.ends_with("# EOF\n"));

        let (code, head, body) = exchange(address, b"GET /status?pretty HTTP/1.0\r\n\r\n");
        assert_eq!(code, 200);
        assert!(head.contains("Content-Type: application/json"), "{head}");
        assert_eq!(body, r#"{"lsn":5}"#);

        for request in [
            &b"GET / HTTP/1.1\r\n\r\n"[..],
            b"GET /metricsx HTTP/1.1\r\n\r\n",
            b"POST /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc",
        ] {
            let (code, _, _) = exchange(address, request);
            assert_eq!(code, 404, "{}", String::from_utf8_lossy(request));
        }

        for request in [
            &b"\x00\x01\xffgarbage\r\n\r\n"[..],
            b"GET /metrics\r\n\r\n",
            b"GET /metrics HTTP/2.0\r\n\r\n",
            b"get /metrics HTTP/1.1\r\n\r\n",
            b"GET metrics HTTP/1.1\r\n\r\n",
            b"GET  /metrics HTTP/1.1\r\n\r\n",
        ] {
            let (code, _, body) = exchange(address, request);
            assert_eq!(code, 400, "{}", String::from_utf8_lossy(request));
            assert!(body.starts_with("bad request"), "{body}");
        }

        // A head that never ends within 8 KiB.
        let mut oversized = b"GET /metrics HTTP/1.1\r\n".to_vec();
        oversized.extend(std::iter::repeat_n(b'a', 9000));
        let (code, _, body) = exchange(address, &oversized);
        assert_eq!(code, 400);
        assert!(body.contains("8 KiB"), "{body}");

        // A client that half-closes before finishing its head.
        let mut stream = TcpStream::connect(address).unwrap();
        stream.write_all(b"GET /metr").unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        let mut raw = String::new();
        stream.read_to_string(&mut raw).unwrap();
        assert!(raw.starts_with("HTTP/1.1 400 "), "{raw}");
    }

    #[test]
    fn silent_clients_and_panics_do_not_stop_the_responder() {
        let (address, _metrics) = start(|| panic!("status callback fails"));

        let (code, _, body) = exchange(address, b"GET /status HTTP/1.1\r\n\r\n");
        assert_eq!(code, 500);
        assert!(body.contains("panicked"), "{body}");

        // A client that connects and says nothing holds only its own connection.
        let silent = TcpStream::connect(address).unwrap();
        let (code, _, _) = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(code, 200);

        // With every slot held by a silent client, the next connection is told to come back.
        // The slot of the exchange above is given back when the responder sees the client
        // close, a moment after the response: a silent client that got there first is turned
        // away at once with a 503, so connect again until each one holds a slot (bounded,
        // never a timing guess).
        let mut silents = vec![silent];
        let mut attempts = 0;
        while silents.len() < CONNECTIONS_MAX {
            attempts += 1;
            assert!(attempts < 1000, "the responder never freed its slots");
            let candidate = TcpStream::connect(address).unwrap();
            candidate
                .set_read_timeout(Some(Duration::from_millis(20)))
                .unwrap();
            let mut first = [0u8; 1];
            match (&candidate).read(&mut first) {
                // Turned away (a 503) or closed: that slot was not free yet.
                Ok(_read) => thread::sleep(Duration::from_millis(5)),
                // Nothing said within the wait: it holds a slot.
                Err(_) => silents.push(candidate),
            }
        }
        let (code, _, body) = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(code, 503);
        assert!(body.starts_with("busy"), "{body}");

        // Each silent client is told it took too long, and its slot is given back.
        for mut silent in silents.drain(..) {
            silent
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut raw = String::new();
            silent.read_to_string(&mut raw).unwrap();
            assert!(raw.starts_with("HTTP/1.1 408 "), "{raw}");
        }
        // A slot is given back when its connection closes, just after the 408 is sent: wait
        // for it (bounded, so a leak fails the test instead of hanging it).
        let served = (0..100).any(|_| {
            let (code, _, _) = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n");
            if code != 200 {
                thread::sleep(Duration::from_millis(50));
            }
            code == 200
        });
        assert!(
            served,
            "the responder never served again after its slots were released"
        );
    }

    /// Silent connections hold a socket each in the responder, never a thread: the only
    /// responder threads in this process are the responders themselves (one per test that
    /// started one). A thread per connection, as the responder once had, fails it while the
    /// silent connections wait for their 408.
    #[test]
    fn silent_connections_cost_no_thread() {
        let (address, _metrics) = start(|| "{}".to_owned());
        let silent: Vec<TcpStream> = (0..CONNECTIONS_MAX - 1)
            .map(|_| TcpStream::connect(address).unwrap())
            .collect();
        // Answered after the silent ones were accepted: one thread takes them in order.
        let (code, _, _) = exchange(address, b"GET /metrics HTTP/1.1\r\n\r\n");
        assert_eq!(code, 200);
        let names: Vec<String> = std::fs::read_dir("/proc/self/task")
            .unwrap()
            .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
            .map(|name| name.trim_end().to_owned())
            .filter(|name| name.starts_with("metrics"))
            .collect();
        assert!(
            names.iter().all(|name| name == "metrics-http"),
            "threads beside the responders while {} connections wait: {names:?}",
            silent.len()
        );
    }

    #[test]
    fn request_lines() {
        let parse = |head: &[u8]| parse_request_line(head);
        assert_eq!(
            parse(b"GET /status?x=1 HTTP/1.1\r\nHost: a"),
            Ok((Method::Get, "/status".to_owned()))
        );
        assert_eq!(
            parse(b"HEAD / HTTP/1.0"),
            Ok((Method::Other, "/".to_owned()))
        );
        assert_eq!(parse(b""), Err(RequestError::Malformed));
        assert_eq!(parse(b"GET / HTTP/1.1 extra"), Err(RequestError::Malformed));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n\r\nbody"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\n\n"), Some(14));
        assert_eq!(head_end(b"GET / HTTP/1.1\r\n"), None);
    }
}
