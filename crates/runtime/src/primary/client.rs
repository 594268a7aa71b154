//! A primary's client connections: an acceptor, and per connection a reader thread that
//! parses calls for the executor (and answers `Members` itself) and a writer thread that
//! sends the executor's answers.

use super::*;
use crate::gate::Handshake;
use crate::members::MemberList;
use crate::native::{FrameSink, Service};
use crate::peer_auth::{ClientOut, TlsWriter};
use tandem_redis::session::ScriptActivity;

/// What every client connection of this primary needs to know.
#[derive(Clone, Debug)]
pub(super) struct ClientContext {
    pub(super) node_id: NodeId,
    pub(super) group: u32,
    pub(super) view: Arc<AtomicU64>,
    /// Numbers client connections (shared by every acceptor of this primary).
    pub(super) conn_next: Arc<AtomicU64>,
    /// The last committed LSN, for Welcome frames.
    pub(super) lsn_committed: Arc<AtomicU64>,
    pub(super) max_frame_len: usize,
    /// Client connections served at once (`tuning.maxclients`).
    pub(super) maxclients: usize,
    pub(super) inbound: InboundTx,
    pub(super) metrics: Arc<Metrics>,
    /// What a `Members` frame is answered with.
    pub(super) members: MemberList,
    /// Asks clients for a password (a static-mode primary's own acceptor; in cluster mode
    /// the node's acceptor asked before the connection came here).
    pub(super) client_auth: crate::peer_auth::ClientAuth,
    /// The watch over the node's scripts, if its model runs any: a connection with no call
    /// of its own unanswered is answered `SCRIPT KILL` here, as on the RESP port (a proxy's
    /// clients reach the node this way).
    pub(super) scripts: Option<crate::scripts::Scripts>,
}

/// Accepts client connections (through the native port's gate, which holds each until its
/// whole `Hello` came) and runs a reader and a writer thread for each.
pub(super) struct Acceptor {
    pub(super) context: ClientContext,
}

impl Acceptor {
    pub(super) fn spawn(self, listener: TcpListener, maxclients: usize) -> Result<(), StartError> {
        let metrics = Arc::clone(&self.context.metrics);
        let on_hello = move |stream, buffer, handshake| {
            let conn = self.context.conn_next.fetch_add(1, Ordering::Relaxed);
            let client = Client {
                conn,
                context: self.context.clone(),
            };
            crate::spawn_or_say(format!("client-{conn}"), move || {
                client.run(stream, buffer, handshake)
            });
        };
        crate::gate::spawn(
            listener,
            crate::gate::GateLimits::for_maxclients(maxclients),
            metrics,
            Box::new(on_hello),
        )
        .map_err(StartError::NativePort)
    }
}

pub(super) struct Client {
    pub(super) conn: ConnId,
    pub(super) context: ClientContext,
}

impl Client {
    /// Serves a connection whose whole `Hello` the gate read into `buffer`; it counts among
    /// the handshakes (`handshake`) until it proved itself.
    pub(super) fn run(self, stream: TcpStream, buffer: FrameBuffer, handshake: Handshake) {
        self.run_with(stream, |client, stream, writer| {
            client.serve(stream, buffer, handshake, writer)
        });
    }

    fn run_with(
        self,
        mut stream: TcpStream,
        serve: impl FnOnce(
            &Client,
            &mut TcpStream,
            &mut Option<(Sender<Vec<u8>>, JoinHandle<()>)>,
        ) -> Result<(), ConnError>,
    ) {
        self.context.metrics.client_connections.inc();
        let mut writer: Option<(Sender<Vec<u8>>, JoinHandle<()>)> = None;
        if let Err(err) = serve(&self, &mut stream, &mut writer)
            && !matches!(err, ConnError::Closed | ConnError::Io(_))
        {
            self.context.metrics.frames_rejected.inc();
            let code = match &err {
                ConnError::Frame(err) => err.code(),
                _ => ErrorCode::BadFrame,
            };
            let mut frame = Vec::new();
            encode_error(&mut frame, code, &err.to_string());
            // Once the writer thread exists, it alone writes: the Error frame goes after the
            // replies already queued.
            match &writer {
                Some((out, _)) => {
                    let _ = out.send(frame);
                }
                None => {
                    let _ = net::write_all(&mut stream, &frame);
                }
            }
        }
        let _ = self
            .context
            .inbound
            .send(Inbound::ConnClosed { conn: self.conn });
        if let Some((out, handle)) = writer {
            // The writer ends once the executor has dropped its sender too.
            drop(out);
            let _ = handle.join();
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        self.context.metrics.client_connections.dec();
    }

    fn serve(
        &self,
        stream: &mut TcpStream,
        mut buffer: FrameBuffer,
        handshake: Handshake,
        writer: &mut Option<(Sender<Vec<u8>>, JoinHandle<()>)>,
    ) -> Result<(), ConnError> {
        net::tune(stream)?;
        let group = self.context.group;
        let hello_timeout = Duration::from_secs(10);
        let hello = net::read_one(stream, &mut buffer, hello_timeout, |frame| match frame {
            Frame::Hello(hello) if hello.peer != PeerKind::Client => Err(ConnError::Protocol(
                "this node is a primary: replicas do not connect to it".into(),
            )),
            Frame::Hello(hello) if hello.group != group => Err(ConnError::Protocol(format!(
                "this node serves group {group}, not group {}",
                hello.group
            ))),
            Frame::Hello(hello) => Ok(hello.clone()),
            _ => Err(ConnError::Protocol(
                "the first frame must be a Hello".into(),
            )),
        })?;
        // A refused client was told why; its connection is closed.
        let Ok(mut tls) = self.context.client_auth.accept(stream, &mut buffer, &hello) else {
            return Err(ConnError::Closed);
        };
        // Proved: the connection leaves the handshakes, and takes frames of any length the
        // node does.
        drop(handshake);
        buffer.set_max_frame_len(self.context.max_frame_len);
        // This connection is counted already (`run_with`).
        if self.context.metrics.client_connections.get() > self.context.maxclients as i64 {
            self.context.metrics.connection_refused("maxclients");
            let mut frame = Vec::new();
            let message = "max number of clients reached (tuning.maxclients)";
            encode_error(&mut frame, ErrorCode::Busy, message);
            let _ = crate::peer_auth::send(stream, tls.as_mut(), &frame);
            return Err(ConnError::Closed);
        }
        self.serve_after_hello(stream, buffer, hello.id, writer, tls)
    }

    /// `tls`: the writer of its TLS records, if it runs TLS.
    fn serve_after_hello(
        &self,
        stream: &mut TcpStream,
        mut buffer: FrameBuffer,
        client_id: u64,
        writer: &mut Option<(Sender<Vec<u8>>, JoinHandle<()>)>,
        tls: Option<TlsWriter>,
    ) -> Result<(), ConnError> {
        stream.set_read_timeout(None)?;
        let mut welcome = Vec::new();
        self.welcome(&mut welcome);
        let mut client_out = ClientOut::new(stream.try_clone()?, tls);
        client_out.write_all(&welcome)?;
        let (out, out_rx) = mpsc::channel::<Vec<u8>>();
        // The writer thread sends the executor's answers; the reader sends its own answers
        // (`Members`, `SCRIPT KILL`) under the same lock, so frames never interleave (nor TLS
        // records), and a client that asks and never reads stops the reader at TCP instead
        // of filling a queue.
        let shared = Arc::new(Mutex::new(client_out));
        let writer_stream = Arc::clone(&shared);
        let handle = thread::Builder::new()
            .name(format!("client-{}-out", self.conn))
            .spawn(move || {
                while let Ok(bytes) = out_rx.recv() {
                    let mut stream = writer_stream.lock().expect("not poisoned");
                    if stream.write_all(&bytes).is_err() {
                        return;
                    }
                }
            })?;
        *writer = Some((out.clone(), handle));
        let unanswered = Arc::new(AtomicU64::new(0));
        if self.opened(FrameSink::Thread(out), &unanswered).is_err() {
            return Ok(());
        }
        self.read_calls(stream, &mut buffer, client_id, &unanswered, &shared)
    }

    /// The `Welcome` frame a client of this primary gets first.
    fn welcome(&self, out: &mut Vec<u8>) {
        encode_welcome(
            out,
            &Welcome {
                version: tandem_wire::PROTOCOL_VERSION,
                node_id: self.context.node_id,
                role: Role::Primary,
                view: self.context.view.load(Ordering::Acquire),
                lsn: self.context.lsn_committed.load(Ordering::Acquire),
            },
        );
    }

    /// Tells the role the connection opened: its answers go to `sink`.
    fn opened(&self, sink: FrameSink, unanswered: &Arc<AtomicU64>) -> Result<(), RoleGone> {
        self.context.inbound.send(Inbound::ConnOpened {
            conn: self.conn,
            out: ConnSink::Frames(sink),
            unanswered: Arc::clone(unanswered),
            answer_withheld: false,
        })
    }

    /// While a script runs, answers `SCRIPT KILL` itself into `answer`: it stops the script
    /// (`+OK`), which the executor could not answer before the script ends. False if the call
    /// goes to the executor as usual (anything else, or no script to stop: it then answers
    /// `NOTBUSY`). Unlike the RESP port, this port answers nothing else `-BUSY`: a stub
    /// resends a call it waited for too long, with the same seq, and a `-BUSY` to the resend
    /// would say the call did not run while its first sending may still commit.
    fn answers_while_a_script_runs(
        &self,
        call: &tandem_wire::Call<'_>,
        answer: &mut Vec<u8>,
    ) -> bool {
        let Some(scripts) = &self.context.scripts else {
            return false;
        };
        if scripts.activity() == ScriptActivity::Idle
            || !tandem_redis::session::is_script_kill_call(ProcId(call.proc_id), call.args)
            || !scripts.kill()
        {
            return false;
        }
        let lsn = self.context.lsn_committed.load(Ordering::Acquire);
        encode_reply(answer, call.seq, lsn, ReplyStatus::Committed, b"+OK\r\n");
        true
    }

    fn read_calls(
        &self,
        stream: &mut TcpStream,
        buffer: &mut FrameBuffer,
        client_id: u64,
        unanswered: &AtomicU64,
        shared: &Mutex<ClientOut>,
    ) -> Result<(), ConnError> {
        let mut answers = Vec::new();
        loop {
            answers.clear();
            let local = stream.local_addr().ok();
            let taken = self.take_frames(buffer, client_id, unanswered, local, &mut answers);
            if !answers.is_empty() {
                let mut shared = shared.lock().expect("not poisoned");
                shared.write_all(&answers)?;
            }
            let (batch, broke) = match taken {
                Ok(batch) => (batch, None),
                Err((batch, err)) => (batch, Some(err)),
            };
            // Calls parsed before a malformed frame still run: what a client sent correctly
            // does not depend on how TCP split its bytes.
            if self.send_calls(batch, unanswered).is_err() {
                return Ok(());
            }
            if let Some(err) = broke {
                return Err(err);
            }
            // A client that sends and never reads is not read either: its calls stop at TCP,
            // so the executor's queue and the reply buffers stay bounded.
            while unanswered.load(Ordering::Relaxed) > UNANSWERED_MAX {
                thread::sleep(Duration::from_micros(200));
            }
            net::fill(stream, buffer)?;
        }
    }

    /// Hands the role the calls of `batch`, if it holds any.
    fn send_calls(&self, batch: CallBatch, unanswered: &AtomicU64) -> Result<(), RoleGone> {
        if batch.calls.is_empty() {
            return Ok(());
        }
        unanswered.fetch_add(batch.calls.len() as u64, Ordering::Relaxed);
        self.context.inbound.send(Inbound::Calls(batch))
    }

    /// Takes the whole frames `buffer` holds: calls and reads into the batch returned,
    /// `Members` and (while a script runs) `SCRIPT KILL` answered at once into `answers`
    /// (they may go ahead of replies to calls sent before them). `local`: the address the
    /// client reached this node at. A frame that breaks the protocol ends the taking; the
    /// calls before it are returned with the error.
    fn take_frames(
        &self,
        buffer: &mut FrameBuffer,
        client_id: u64,
        unanswered: &AtomicU64,
        local: Option<SocketAddr>,
        answers: &mut Vec<u8>,
    ) -> Result<CallBatch, (CallBatch, ConnError)> {
        let mut batch = CallBatch {
            conn: self.conn,
            client_id,
            bytes: Vec::new(),
            calls: Vec::new(),
        };
        loop {
            let (seq, proc_id, safety, args, read_only) = match buffer.next_frame() {
                Ok(Some(Frame::Call(call)))
                    if batch.calls.is_empty()
                        && unanswered.load(Ordering::Relaxed) == 0
                        && self.answers_while_a_script_runs(&call, answers) =>
                {
                    continue;
                }
                Ok(Some(Frame::Call(call))) => {
                    (call.seq, call.proc_id, call.safety, call.args, false)
                }
                // A read-only call runs here like any call: the primary holds every commit,
                // so `min_lsn` is met.
                Ok(Some(Frame::Read(read))) => (read.seq, read.proc_id, None, read.args, true),
                Ok(Some(Frame::Members)) => {
                    let view = self.context.view.load(Ordering::Acquire);
                    self.context.members.answer(answers, view, local);
                    continue;
                }
                Ok(Some(_)) => {
                    let message = crate::native::ONLY_CALLS_AFTER_HELLO.into();
                    return Err((batch, ConnError::Protocol(message)));
                }
                Ok(None) => return Ok(batch),
                Err(err) => return Err((batch, ConnError::Frame(err))),
            };
            let start = batch.bytes.len();
            batch.bytes.extend_from_slice(args);
            batch.calls.push(CallSlot {
                seq,
                proc_id,
                safety,
                args: start..batch.bytes.len(),
                read_only,
            });
        }
    }
}

/// A primary role's client connection on the node's I/O loop (`crate::native`).
pub(crate) struct PrimaryService {
    client: Client,
    client_id: u64,
    /// Calls sent and not yet answered (see `UNANSWERED_MAX`).
    unanswered: Arc<AtomicU64>,
}

impl PrimaryService {
    pub(super) fn new(client: Client, client_id: u64) -> PrimaryService {
        PrimaryService {
            client,
            client_id,
            unanswered: Arc::new(AtomicU64::new(0)),
        }
    }
}

impl Service for PrimaryService {
    fn open(&mut self, sink: FrameSink, out: &mut Vec<u8>) -> Result<(), ConnError> {
        self.client.welcome(out);
        self.client
            .opened(sink, &self.unanswered)
            .map_err(|_| ConnError::Closed)
    }

    fn take(
        &mut self,
        buffer: &mut FrameBuffer,
        local: Option<SocketAddr>,
        out: &mut Vec<u8>,
    ) -> Result<(), ConnError> {
        let unanswered = &self.unanswered;
        let taken = self
            .client
            .take_frames(buffer, self.client_id, unanswered, local, out);
        let (batch, broke) = match taken {
            Ok(batch) => (batch, None),
            Err((batch, err)) => (batch, Some(err)),
        };
        self.client
            .send_calls(batch, unanswered)
            .map_err(|_| ConnError::Closed)?;
        broke.map_or(Ok(()), Err)
    }

    fn mail(&mut self, frames: Option<Vec<u8>>, out: &mut Vec<u8>) -> Result<(), ConnError> {
        if let Some(frames) = frames {
            out.extend_from_slice(&frames);
        }
        Ok(())
    }

    /// A client that sends and never reads is not read either: its calls stop at TCP, so
    /// the role's queue and the reply buffers stay bounded.
    fn takes_more(&self) -> bool {
        self.unanswered.load(Ordering::Relaxed) <= UNANSWERED_MAX
    }

    fn closed(&mut self) {
        let closed = Inbound::ConnClosed {
            conn: self.client.conn,
        };
        let _ = self.client.context.inbound.send(closed);
    }
}
