//! The RESP port: Redis clients (redis-cli, redis-py, go-redis, redis-benchmark) talk to a
//! node that serves the Redis model.
//!
//! One thread per connection reads what the client sent, parses every whole request in it
//! (pipelining), lets the connection's [`Session`] answer or turn each into a call, runs the
//! calls on the node's primary role as one batch (in order, through a [`LocalClient`]), and
//! writes every reply in request order. What a command means is the session's and the model's
//! to say; this module only moves bytes.
//!
//! A node that is not the primary answers data commands with `-READONLY`, naming the primary
//! (strongly consistent reads on backups come with the reads issue). A connection gets no
//! dedup slot: a plain Redis client cannot resend a command under the same (client id, seq),
//! so exactly-once across a failover is the proxy's to give.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tandem_redis::resp::{Argv, Parsed, RequestLimits, parse_request};
use tandem_redis::session::{Call, Outcome, Purpose, ServerInfo, Session, Step};
use tandem_store::ProcKind;
use tandem_wire::ErrorCode;

use crate::primary::{LocalClient, LocalOutcome, PrimaryHandle};

/// What a RESP connection needs of its node.
pub trait RespNode: Send + Sync + 'static {
    /// What the session should know of the node now.
    fn info(&self) -> ServerInfo;

    /// Calls `with` on the node's primary role, if it holds one now.
    fn with_primary(&self, with: &mut dyn FnMut(&PrimaryHandle));
}

/// `INFO`'s lines for what the data model reported (`Metrics::model_stats`).
pub fn memory_lines(metrics: &crate::metrics::Metrics) -> Vec<(String, String)> {
    metrics
        .model_stats()
        .into_iter()
        .map(|(name, value)| {
            let text = if value.fract() == 0.0 {
                format!("{}", value as i64)
            } else {
                format!("{value:.2}")
            };
            (name.to_string(), text)
        })
        .collect()
}

/// How long a read whose reply was withheld is tried again before the client gets an error.
const READ_RETRY_MAX: Duration = Duration::from_secs(1);
/// The pause between two tries: about a heartbeat, so the lease may be renewed meanwhile.
const READ_RETRY_PAUSE: Duration = Duration::from_micros(500);

/// Bytes read from a connection at a time.
const READ_CHUNK: usize = 64 * 1024;

/// Starts the thread that accepts RESP connections on `listener`.
pub fn spawn(listener: TcpListener, node: Arc<dyn RespNode>) -> Result<(), crate::StartError> {
    std::thread::Builder::new()
        .name("resp-accept".into())
        .spawn(move || serve(listener, node))
        .map(drop)
        .map_err(|source| crate::StartError::Thread {
            thread: "the RESP accept thread",
            source,
        })
}

/// Serves RESP connections accepted on `listener` until the process ends.
pub fn serve(listener: TcpListener, node: Arc<dyn RespNode>) {
    let ids = Arc::new(AtomicU64::new(1));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        let node = Arc::clone(&node);
        let id = ids.fetch_add(1, Ordering::Relaxed);
        crate::spawn_or_say(format!("resp-{id}"), move || {
            let _ = stream.set_nodelay(true);
            Connection::new(id, node).run(stream);
        });
    }
}

struct Connection {
    session: Session,
    node: Arc<dyn RespNode>,
    client: Option<LocalClient>,
    limits: RequestLimits,
}

impl Connection {
    fn new(id: u64, node: Arc<dyn RespNode>) -> Connection {
        Connection {
            session: Session::new(id),
            node,
            client: None,
            limits: RequestLimits::default(),
        }
    }

    fn run(mut self, mut stream: TcpStream) {
        // Unparsed bytes are `input[start..]`; `want` is how many of them the parser needs
        // before it can get further (a large bulk string arrives in many reads, and parsing
        // it again after each would be quadratic).
        let mut input: Vec<u8> = Vec::new();
        let mut start = 0;
        let mut want = 1;
        let mut out = Vec::new();
        let mut argv = Argv::new();
        let mut chunk = vec![0u8; READ_CHUNK];
        loop {
            if start > 0 {
                input.drain(..start);
                start = 0;
            }
            while input.len() < want {
                // Read into a chunk and append what came: growing `input` by a chunk of
                // zeros first would cost a 64 KiB memset per read.
                match stream.read(&mut chunk[..]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => input.extend_from_slice(&chunk[..n]),
                }
            }
            let info = self.node.info();
            let mut pending: Vec<Call> = Vec::new();
            let mut close = false;
            loop {
                match parse_request(&input[start..], &self.limits, &mut argv) {
                    Ok(Parsed::Incomplete { at_least }) => {
                        want = at_least.max(input.len() - start + 1);
                        break;
                    }
                    Ok(Parsed::Skip { consumed }) => start += consumed,
                    Ok(Parsed::Command { consumed }) => {
                        start += consumed;
                        let mut immediate = Vec::new();
                        match self.session.handle(&argv, &info, &mut immediate) {
                            Step::Call(call) if matches!(call.purpose, Purpose::Watch(_)) => {
                                // A WATCH's versions decide what a later EXEC sends.
                                self.flush(&mut pending, &mut out);
                                pending.push(call);
                                self.flush(&mut pending, &mut out);
                            }
                            Step::Call(call) => {
                                if call.starts_batch_after(&pending) {
                                    self.flush(&mut pending, &mut out);
                                }
                                pending.push(call);
                            }
                            Step::Replied => {
                                self.flush(&mut pending, &mut out);
                                out.extend_from_slice(&immediate);
                            }
                            Step::Close => {
                                self.flush(&mut pending, &mut out);
                                out.extend_from_slice(&immediate);
                                close = true;
                                break;
                            }
                        }
                    }
                    Err(err) => {
                        self.flush(&mut pending, &mut out);
                        out.extend_from_slice(format!("-ERR {err}\r\n").as_bytes());
                        close = true;
                        break;
                    }
                }
            }
            self.flush(&mut pending, &mut out);
            if stream.write_all(&out).is_err() || close {
                let _ = stream.flush();
                return;
            }
            out.clear();
        }
    }

    /// Runs the pending calls as one batch and writes their replies to `out`.
    fn flush(&mut self, pending: &mut Vec<Call>, out: &mut Vec<u8>) {
        if pending.is_empty() {
            return;
        }
        let calls: Vec<(u16, &[u8], bool)> = pending
            .iter()
            .map(|call| (call.proc_id.0, &call.args[..], call.kind == ProcKind::Read))
            .collect();
        let mut outcomes = Vec::with_capacity(calls.len());
        let ran = match self.client_for_primary() {
            Some(client) => client.run(&calls, &mut outcomes).is_ok(),
            None => false,
        };
        if !ran {
            self.client = None;
        }
        // A read whose reply the primary withheld (its lease ran out before the reply could
        // leave: under heavy load a backup's echo came late) runs again: a read changes
        // nothing, and no write of this batch follows it. A write's withheld reply is not
        // retried: it may have committed.
        let started = Instant::now();
        loop {
            let retry: Vec<usize> = (0..calls.len())
                .filter(|&i| {
                    pending[i].runs_again()
                        && matches!(outcomes.get(i), Some(LocalOutcome::Unanswered { .. }))
                })
                .collect();
            if retry.is_empty() || started.elapsed() > READ_RETRY_MAX {
                break;
            }
            std::thread::sleep(READ_RETRY_PAUSE);
            let again: Vec<(u16, &[u8], bool)> = retry.iter().map(|&i| calls[i]).collect();
            let mut fresh = Vec::with_capacity(again.len());
            let ok = match self.client_for_primary() {
                Some(client) => client.run(&again, &mut fresh).is_ok(),
                None => false,
            };
            if !ok {
                self.client = None;
                break;
            }
            for (&i, outcome) in retry.iter().zip(fresh) {
                outcomes[i] = outcome;
            }
        }
        for (index, call) in pending.drain(..).enumerate() {
            let outcome = outcomes.get(index);
            let failed;
            let outcome = match outcome {
                Some(LocalOutcome::Committed(body)) => Outcome::Reply(body),
                Some(LocalOutcome::RolledBack(message)) => {
                    failed = with_code(message);
                    Outcome::Failed(&failed)
                }
                Some(LocalOutcome::Unanswered { code, message }) => {
                    failed = unanswered(*code, message);
                    Outcome::Failed(&failed)
                }
                None => Outcome::Failed(
                    "ERR the primary changed before the reply left; the command may have run",
                ),
            };
            self.session.called(call.purpose, outcome, out);
        }
    }

    /// The client of the node's primary role now, opened anew if the role changed.
    fn client_for_primary(&mut self) -> Option<&mut LocalClient> {
        let mut current = None;
        let existing = self.client.take();
        let mut existing = Some(existing);
        self.node.with_primary(&mut |handle| {
            let kept = existing
                .take()
                .flatten()
                .filter(|client| client.is_of(handle));
            current = Some(kept.unwrap_or_else(|| handle.local_client()));
        });
        self.client = current;
        self.client.as_mut()
    }
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
