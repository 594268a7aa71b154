//! The links to a primary's backups: a writer thread per member that sends batches (and
//! reconnects forever), and a reader thread that hands the member's acks to the executor.
//!
//! The reader also tells the node's supervisor that it heard the member, itself rather than
//! through the executor: a failure detector must not take a busy executor (a long call, a
//! checksum, a starved thread on a loaded machine) for a silent backup. For the same reason
//! the writer sends a `Pulse` when the executor gave it nothing for a heartbeat's interval,
//! unless the cluster core took the executor as stuck (no turn for
//! `tuning.executor_stall_ms`): the backups keep hearing a busy primary, and stop hearing a
//! stuck one. A connection the backup closed (its
//! process died) is reported to the supervisor at once.
//!
//! A link that cannot reach its member retries every 500 µs for the first 10 ms (a failover
//! makes members refuse links for about that long, and its speed depends on retrying at
//! once), then backs off, doubling from 1 ms to 20 ms. `Retry` decides the pauses and what
//! is logged: the first failure, then at most one summary per `RETRY_SUMMARY_INTERVAL`, and
//! the reconnection; never a line per attempt.

use super::*;
use crate::retry::{Retry, RetrySay, error_words};

/// Starts link threads to backups, one per member.
#[derive(Clone)]
pub(crate) struct LinkFactory {
    pub(super) node_id: NodeId,
    pub(super) group: u32,
    pub(super) max_frame_len: usize,
    pub(super) inbound: InboundTx,
    pub(super) metrics: Arc<Metrics>,
    /// Where the node hears about backups (cluster mode), if anywhere.
    pub(super) observed: Option<Sender<Observed>>,
    /// Whom to tell that a backup closed its connection (cluster mode).
    pub(super) peer_closed: Option<crate::PeerClosed>,
    pub(super) progress: Arc<Progress>,
    /// A link given nothing for this long sends a pulse (unless the executor is stuck).
    pub(super) pulse_interval: Duration,
    pub(super) auth: PeerAuth,
}

impl LinkFactory {
    pub(crate) fn spawn(
        &self,
        node: NodeId,
        address: SocketAddr,
    ) -> Result<Sender<Message>, StartError> {
        let (tx, rx) = mpsc::channel();
        let link = Link {
            node,
            address,
            hello: Hello::new(PeerKind::Replica, u64::from(self.node_id), self.group),
            max_frame_len: self.max_frame_len,
            inbound: self.inbound.clone(),
            metrics: Arc::clone(&self.metrics),
            observed: self.observed.clone(),
            peer_closed: self.peer_closed.clone(),
            progress: Arc::clone(&self.progress),
            pulse_interval: self.pulse_interval,
            auth: self.auth.clone(),
        };
        thread::Builder::new()
            .name(format!("link-{node}"))
            .spawn(move || link.run(rx))
            .map_err(|source| StartError::Thread {
                thread: "a link thread",
                source,
            })?;
        Ok(tx)
    }
}

/// The writer side of the link to one backup, reconnecting forever.
struct Link {
    node: NodeId,
    address: SocketAddr,
    hello: Hello,
    max_frame_len: usize,
    inbound: InboundTx,
    metrics: Arc<Metrics>,
    observed: Option<Sender<Observed>>,
    peer_closed: Option<crate::PeerClosed>,
    progress: Arc<Progress>,
    pulse_interval: Duration,
    auth: PeerAuth,
}

impl Link {
    fn run(self, outbox: Receiver<Message>) {
        let mut retry = Retry::default();
        loop {
            let result = match TcpStream::connect(self.address) {
                Ok(stream) => self.serve(stream, &outbox, &mut retry),
                Err(err) => Err(ConnError::Io(err)),
            };
            match result {
                Ok(()) => return,
                Err(err) => {
                    // Drop what cannot be sent: the backup's introduction on reconnect makes
                    // the primary ship again from where the backup stands.
                    loop {
                        match outbox.try_recv() {
                            Ok(_) => {}
                            Err(mpsc::TryRecvError::Empty) => break,
                            // The member left the view (or the executor stopped).
                            Err(mpsc::TryRecvError::Disconnected) => return,
                        }
                    }
                    let (pause, said) = retry.failed(Instant::now());
                    let why = error_words(&err);
                    match said {
                        RetrySay::Nothing => {}
                        RetrySay::FirstFailure => tracing::info!(
                            backup = self.node,
                            address = %self.address,
                            "cannot reach backup {} at {}: {why}; retrying",
                            self.node,
                            self.address
                        ),
                        RetrySay::StillFailing { attempts } => tracing::warn!(
                            backup = self.node,
                            address = %self.address,
                            attempts,
                            "still cannot reach backup {} at {} after {attempts} attempts: {why}",
                            self.node,
                            self.address
                        ),
                    }
                    thread::sleep(pause);
                }
            }
        }
    }

    /// Returns Ok when the executor has gone (the outbox is closed).
    fn serve(
        &self,
        mut stream: TcpStream,
        outbox: &Receiver<Message>,
        retry: &mut Retry,
    ) -> Result<(), ConnError> {
        net::tune(&stream)?;
        let mut buffer = FrameBuffer::new(self.max_frame_len);
        let mut sealer = self
            .auth
            .connect(&mut stream, &mut buffer, &self.hello, self.node)?;
        net::read_one(
            &mut stream,
            &mut buffer,
            Duration::from_secs(5),
            |frame| match frame {
                Frame::Welcome(_) => Ok(()),
                Frame::Error(err) => Err(ConnError::Protocol(format!("refused: {}", err.message))),
                Frame::Auth(auth) if auth.step == tandem_wire::AuthStep::StartTls => {
                    Err(ConnError::Protocol(
                        "the backup runs TLS on peer links: set [tls] peers = true (and ca) on \
                         every node of the cluster"
                            .into(),
                    ))
                }
                Frame::Auth(_) => Err(ConnError::Protocol(
                    "the backup asks peers to prove they know the cluster's secret: set the \
                     same peer_secret on every node of the cluster"
                        .into(),
                )),
                _ => Err(ConnError::Protocol("expected a Welcome".into())),
            },
        )?;
        stream.set_read_timeout(None)?;
        if let Some(attempts) = retry.connected() {
            tracing::info!(
                backup = self.node,
                address = %self.address,
                attempts,
                "reached backup {} at {} after {attempts} attempts",
                self.node,
                self.address
            );
        }
        // What was queued for the old connection is stale: the backup introduces itself again.
        while outbox.try_recv().is_ok() {}
        if self
            .inbound
            .send(Inbound::LinkUp { node: self.node })
            .is_err()
        {
            return Ok(());
        }
        let reader_stream = stream.try_clone()?;
        // Set before this side shuts the connection, so that the reader does not report the
        // end of stream that follows as the backup's doing.
        let closing = Arc::new(AtomicBool::new(false));
        let acks = AckReader {
            auth: self.auth.clone(),
            node: self.node,
            inbound: self.inbound.clone(),
            metrics: Arc::clone(&self.metrics),
            observed: self.observed.clone(),
            peer_closed: self.peer_closed.clone(),
            closing: Arc::clone(&closing),
        };
        let reader = thread::Builder::new()
            .name(format!("acks-{}", self.node))
            .spawn(move || acks.run(reader_stream, buffer))
            .map_err(ConnError::Io)?;
        let mut writer = BufWriter::with_capacity(256 * 1024, stream.try_clone()?);
        let mut frame = Vec::new();
        let mut scratch = Vec::new();
        // The view of the last heartbeat sent: pulses speak for it.
        let mut view = None;
        let result = loop {
            let message = match outbox.recv_timeout(self.pulse_interval) {
                Ok(message) => message,
                Err(RecvTimeoutError::Timeout) => {
                    if reader.is_finished() {
                        break Err(ConnError::Closed);
                    }
                    // A stuck executor sends no pulse: the backups hear the silence.
                    match view {
                        Some(view) if !self.progress.is_stuck() => Message::Pulse { view },
                        _ => continue,
                    }
                }
                Err(RecvTimeoutError::Disconnected) => break Ok(()),
            };
            let mut next = Some(message);
            while let Some(message) = next {
                frame.clear();
                if let Message::Heartbeat { view: sent, .. } = message {
                    view = Some(sent);
                }
                if let Message::Batch(bytes) = &message {
                    tandem_wire::encode_batch_frame_header(&mut frame, bytes.len());
                    if sealer.write_batch(&mut writer, &frame, bytes).is_err() {
                        break;
                    }
                } else {
                    encode_peer(&mut frame, &message);
                    if sealer
                        .write_frames(&mut writer, &frame, &mut scratch)
                        .is_err()
                    {
                        break;
                    }
                }
                next = outbox.try_recv().ok();
            }
            if let Err(err) = writer.flush() {
                break Err(ConnError::Io(err));
            }
            if reader.is_finished() {
                break Err(ConnError::Closed);
            }
        };
        closing.store(true, Ordering::Release);
        let _ = stream.shutdown(std::net::Shutdown::Both);
        let _ = reader.join();
        result
    }
}

/// The reader side of the link to one backup.
struct AckReader {
    auth: PeerAuth,
    node: NodeId,
    inbound: InboundTx,
    metrics: Arc<Metrics>,
    observed: Option<Sender<Observed>>,
    peer_closed: Option<crate::PeerClosed>,
    closing: Arc<AtomicBool>,
}

impl AckReader {
    /// Hands every message the backup sends to the executor, and tells the supervisor it
    /// heard the backup (at most once per `OBSERVE_INTERVAL`), until the connection or the
    /// executor ends.
    fn run(self, mut stream: TcpStream, mut buffer: FrameBuffer) {
        let mut told: Option<Instant> = None;
        loop {
            let mut heard = false;
            loop {
                match buffer.next_frame() {
                    Ok(Some(Frame::Peer(message))) => {
                        heard = true;
                        let peer = Inbound::Peer {
                            from: self.node,
                            message,
                        };
                        if self.inbound.send(peer).is_err() {
                            return;
                        }
                    }
                    Ok(Some(_)) => {
                        self.metrics.frames_rejected.inc();
                        return;
                    }
                    Err(err) => {
                        self.metrics.frames_rejected.inc();
                        self.auth.note_forged(&ConnError::Frame(err));
                        return;
                    }
                    Ok(None) => break,
                }
            }
            if heard && let Some(observed) = &self.observed {
                let now = Instant::now();
                if told.is_none_or(|at| now.duration_since(at) >= OBSERVE_INTERVAL) {
                    told = Some(now);
                    // The supervisor outlives its roles; if it is gone, so is the node.
                    let _ = observed.send(Observed::Heard(self.node));
                }
            }
            if let Err(err) = net::fill(&mut stream, &mut buffer) {
                let by_peer = matches!(err, ConnError::Closed | ConnError::Io(_));
                if by_peer
                    && !self.closing.load(Ordering::Acquire)
                    && let Some(peer_closed) = &self.peer_closed
                {
                    peer_closed.tell(self.node);
                }
                return;
            }
        }
    }
}
