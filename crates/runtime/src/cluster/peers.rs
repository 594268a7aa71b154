//! The node's connections to its peers: one per pair of nodes, carrying the cluster core's
//! messages and replication both ways, read and written on the node's thread (its poll
//! loop). The node with the lower id dials (a thread per attempt runs the connect and the
//! handshake, which block); the other accepts through the native port's gate.
//!
//! On the one connection, after the handshake:
//! - `Cluster` frames: the cluster core's messages, either way.
//! - A backup role asks the primary it follows for a link with a `Hello` (kind `Replica`,
//!   its own id). The primary answers every ask exactly once, in order: a `Welcome` (its
//!   role takes the backup: from then on it ships to it and reads its acks) or an `Error`.
//!   The asking side counts its asks unanswered, so only the answer to its last ask counts;
//!   the answering side resets what it knew of the backup when it welcomes it, so the backup
//!   introduces itself again (its next ack says where it stands).
//! - `Peer` frames: replication, from the primary after its `Welcome`, from the backup after
//!   it read the `Welcome`.
//!
//! Frames leave through the connection's [`PeerOut`]: sealed into its buffer under its lock,
//! then written without blocking at the end of the node's pass (or when the socket drains).
//! The beat thread writes through the same lock, which lends the beat's priority to the
//! node's thread while the beat waits for it ([`PiMutex`]). A connection that ends is
//! reported once, with whether the peer's side ended it (its process may have died: the node
//! hears of it at once).

use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Read};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mio::unix::SourceFd;
use mio::{Interest, Registry, Token};
use tandem_cluster::ClusterMessage;
use tandem_config::GroupId;
use tandem_replication::{Message, NodeId};
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, Hello, PeerKind, Welcome, encode_error, encode_hello,
    encode_peer, encode_welcome,
};

use super::beat::PiMutex;
use super::{NodeTx, ToNode, brief};
use crate::metrics::Metrics;
use crate::net::{self, ConnError};
use crate::peer_auth::{PeerAuth, Sealer};
use crate::retry::{Retry, RetrySay, error_words};

/// The poll token of the waker; a peer's connection is `peer + 1`.
pub(super) const WAKER: Token = Token(0);

/// How long a dial waits for the peer to accept the connection.
const DIAL_CONNECT_TIMEOUT: Duration = Duration::from_millis(50);

/// Bytes a connection may hold unsent, beyond its frame limit, before its peer is taken as
/// not reading (the connection is closed; the links on it start over when it comes back).
const UNSENT_MAX_BYTES: usize = 64 << 20;

fn token_of(peer: NodeId) -> Token {
    Token(peer as usize + 1)
}

/// The peer whose connection `token` polls, if it is one.
pub(super) fn peer_of(token: Token) -> Option<NodeId> {
    token
        .0
        .checked_sub(1)
        .and_then(|peer| NodeId::try_from(peer).ok())
}

/// The write side of a peer connection: frames are sealed into `pending` under its lock and
/// written from there without blocking, by the node's thread or the beat thread.
#[derive(Debug)]
pub(crate) struct PeerOut {
    stream: TcpStream,
    sealer: Sealer,
    scratch: Vec<u8>,
    pending: Vec<u8>,
    /// Bytes of `pending` already written.
    written: usize,
    /// When the last frame was queued: the beat thread pulses after a silence.
    pub(super) queued_at: Instant,
}

impl PeerOut {
    /// Queues whole frames this node encoded, sealed if the connection is.
    pub(super) fn frames(&mut self, frames: &[u8]) -> io::Result<()> {
        self.queued_at = Instant::now();
        self.sealer
            .write_frames(&mut self.pending, frames, &mut self.scratch)
    }

    /// Queues a batch frame: its header and the batch's bytes.
    fn batch(&mut self, header: &[u8], bytes: &[u8]) -> io::Result<()> {
        self.queued_at = Instant::now();
        self.sealer.write_batch(&mut self.pending, header, bytes)
    }

    /// Writes what is queued until the socket takes no more.
    pub(super) fn flush(&mut self) -> io::Result<()> {
        crate::net::write_pending(&mut self.stream, &mut self.pending, &mut self.written)
    }

    fn unsent(&self) -> usize {
        self.pending.len() - self.written
    }

    /// A plain connection's write side on `stream`, last written at `queued_at`.
    #[cfg(test)]
    pub(super) fn plain(stream: TcpStream, queued_at: Instant) -> PeerOut {
        PeerOut {
            stream,
            sealer: Sealer::Plain,
            scratch: Vec::new(),
            pending: Vec::new(),
            written: 0,
            queued_at,
        }
    }
}

/// What a peer's connection brought, for the node.
#[derive(Debug)]
pub(super) enum PeerInput {
    Cluster {
        from: NodeId,
        message: ClusterMessage,
    },
    Replication {
        from: NodeId,
        group: GroupId,
        message: Message,
    },
    /// A pub/sub message `from`'s primary role relayed.
    Publication {
        from: NodeId,
        publication: tandem_node::RelayedPublication,
    },
    /// Bytes of a frame not yet whole arrived (said at most once per tick): a long frame
    /// from a primary is hearing from it.
    Receiving { from: NodeId },
    /// Backup `from` asks this node's primary role of `group` for a link.
    LinkAsked { from: NodeId, group: GroupId },
    /// The answer to this node's last ask for a link in `group` from `from`.
    LinkAnswered {
        from: NodeId,
        group: GroupId,
        answer: Result<(), String>,
    },
}

/// An authenticated connection, handed from the thread that dialed or accepted it.
#[derive(Debug)]
pub(crate) struct Connected {
    pub(crate) stream: TcpStream,
    pub(crate) buffer: FrameBuffer,
    pub(crate) sealer: Sealer,
}

/// How a connection ended.
enum Ended {
    /// The peer's side closed or reset it.
    ByPeer,
    /// This side gave up on it, for the reason given.
    Here(ConnError),
}

/// One peer's connection, as the node's thread holds it.
struct PeerConn {
    stream: TcpStream,
    buffer: FrameBuffer,
    out: Arc<PiMutex<PeerOut>>,
    /// Numbers the connections, so that the beat thread's list follows a replacement.
    number: u64,
    /// The groups of this node's asks for a link, not answered yet, in the order they were
    /// sent (the peer answers them in that order).
    asks_unanswered: VecDeque<GroupId>,
    /// When the node was last told a frame not yet whole is arriving.
    told_receiving: Option<Instant>,
}

impl PeerConn {
    /// Reads until the socket has nothing more, handing over every whole frame. A read that
    /// gave less than it asked for emptied the socket (bytes that come later raise a new
    /// readable event), so the read that would only say `WouldBlock`, one system call per
    /// frame under load, is skipped; unless the peer's side `closed` (no event would follow
    /// to tell the end).
    fn read(
        &mut self,
        from: NodeId,
        closed: bool,
        now: Instant,
        tick: Duration,
        inputs: &mut Vec<PeerInput>,
    ) -> Result<(), Ended> {
        loop {
            self.take_frames(from, inputs)?;
            let spare = self.buffer.spare();
            let asked = spare.len();
            match self.stream.read(spare) {
                Ok(0) => return Err(Ended::ByPeer),
                Ok(n) => {
                    self.buffer.filled(n);
                    if n < asked && !closed {
                        self.take_frames(from, inputs)?;
                        break;
                    }
                }
                Err(err) if err.kind() == io::ErrorKind::WouldBlock => break,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return Err(Ended::ByPeer),
            }
        }
        let partial =
            self.buffer.buffered() > 0 && !self.buffer.holds_whole_frame().unwrap_or(true);
        if partial && self.told_receiving.is_none_or(|at| now - at >= tick) {
            self.told_receiving = Some(now);
            inputs.push(PeerInput::Receiving { from });
        }
        Ok(())
    }

    fn take_frames(&mut self, from: NodeId, inputs: &mut Vec<PeerInput>) -> Result<(), Ended> {
        loop {
            let input = match self.buffer.next_frame() {
                Ok(None) => return Ok(()),
                Ok(Some(Frame::Cluster(body))) => {
                    // A message that does not decode is dropped; the connection stays.
                    match tandem_node::decode_cluster_message(body) {
                        Ok(message) => PeerInput::Cluster { from, message },
                        Err(_) => continue,
                    }
                }
                Ok(Some(Frame::Peer { group, message })) => PeerInput::Replication {
                    from,
                    group,
                    message,
                },
                Ok(Some(Frame::Publication(body))) => {
                    // As a cluster message: one that does not decode is dropped.
                    match tandem_node::decode_relayed_publication(body) {
                        Ok(publication) => PeerInput::Publication { from, publication },
                        Err(_) => continue,
                    }
                }
                Ok(Some(Frame::Hello(hello)))
                    if hello.peer == PeerKind::Replica && hello.id == u64::from(from) =>
                {
                    PeerInput::LinkAsked {
                        from,
                        group: hello.group,
                    }
                }
                Ok(Some(Frame::Welcome(_))) => match self.answered(from, Ok(())) {
                    Some(input) => input,
                    None => continue,
                },
                Ok(Some(Frame::Error(err))) => match self.answered(from, Err(err.message)) {
                    Some(input) => input,
                    None => continue,
                },
                Ok(Some(other)) => {
                    return Err(Ended::Here(ConnError::Protocol(format!(
                        "it sent a {} frame on the peer connection",
                        other.kind()
                    ))));
                }
                Err(err) => return Err(Ended::Here(ConnError::Frame(err))),
            };
            inputs.push(input);
        }
    }

    /// An answer to one of this node's asks: the node hears only the answer to its last in
    /// the group (one the peer sends unasked is dropped).
    fn answered(&mut self, from: NodeId, answer: Result<(), String>) -> Option<PeerInput> {
        let group = self.asks_unanswered.pop_front()?;
        let last = !self.asks_unanswered.contains(&group);
        last.then_some(PeerInput::LinkAnswered {
            from,
            group,
            answer,
        })
    }
}

/// Where a dial to a peer stands.
enum Dial {
    /// The next attempt is due at `at`.
    Waiting { at: Instant, retry: Retry },
    /// An attempt runs on a thread of its own.
    Running { retry: Retry },
}

/// The node's peer connections: see the module.
pub(crate) struct Peers {
    me: NodeId,
    addresses: BTreeMap<NodeId, SocketAddr>,
    auth: PeerAuth,
    max_frame_len: usize,
    registry: Registry,
    to_node: NodeTx,
    metrics: Arc<Metrics>,
    trace: bool,
    conns: BTreeMap<NodeId, PeerConn>,
    dials: BTreeMap<NodeId, Dial>,
    /// Connections that ended since the node last took them: (peer, by the peer's side).
    ended: Vec<(NodeId, bool)>,
    conns_opened: u64,
    /// Reused for every frame this node encodes.
    frame: Vec<u8>,
}

impl Peers {
    /// The connections of the node `config` describes with its peers at `addresses`,
    /// polled through `registry`; what dials hand back reaches the node through `to_node`.
    pub(crate) fn new(
        config: &crate::config::NodeConfig,
        addresses: BTreeMap<NodeId, SocketAddr>,
        auth: PeerAuth,
        registry: &Registry,
        to_node: NodeTx,
        metrics: Arc<Metrics>,
        trace: bool,
    ) -> Result<Peers, crate::StartError> {
        let registry = registry
            .try_clone()
            .map_err(|source| crate::StartError::Thread {
                thread: "the node's poll",
                source,
            })?;
        let me = config.node_id;
        let now = Instant::now();
        let dials = addresses
            .keys()
            .filter(|&&peer| peer > me)
            .map(|&peer| {
                let retry = Retry::default();
                (peer, Dial::Waiting { at: now, retry })
            })
            .collect();
        Ok(Peers {
            me,
            addresses,
            auth,
            max_frame_len: config.tuning.max_frame_len,
            registry,
            to_node,
            metrics,
            trace,
            conns: BTreeMap::new(),
            dials,
            ended: Vec::new(),
            conns_opened: 0,
            frame: Vec::new(),
        })
    }

    pub(super) fn is_connected(&self, peer: NodeId) -> bool {
        self.conns.contains_key(&peer)
    }

    /// The number of `peer`'s connection, if it has one.
    pub(super) fn number_of(&self, peer: NodeId) -> Option<u64> {
        self.conns.get(&peer).map(|conn| conn.number)
    }

    /// The write side of `peer`'s connection and the connection's number, if it has one.
    pub(super) fn out_of(&self, peer: NodeId) -> Option<(u64, Arc<PiMutex<PeerOut>>)> {
        self.conns
            .get(&peer)
            .map(|conn| (conn.number, Arc::clone(&conn.out)))
    }

    /// Takes `connected` as the connection with `peer`, in place of any other. The caller
    /// reads it at once: the handshake may have buffered frames already.
    pub(super) fn open(&mut self, peer: NodeId, connected: Connected) {
        if peer == self.me {
            return;
        }
        if self.conns.contains_key(&peer) {
            let again = ConnError::Protocol("the peer connected again".into());
            self.close(peer, Ended::Here(again));
        }
        let Connected {
            stream,
            mut buffer,
            sealer,
        } = connected;
        let prepared = stream
            .set_nonblocking(true)
            .and_then(|()| stream.set_read_timeout(None))
            .and_then(|()| stream.try_clone());
        let out_stream = match prepared {
            Ok(out_stream) => out_stream,
            Err(err) => {
                tracing::warn!("node {}: a connection with node {peer}: {err}", self.me);
                return;
            }
        };
        let registered = self.registry.register(
            &mut SourceFd(&stream.as_raw_fd()),
            token_of(peer),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(err) = registered {
            tracing::warn!(
                "node {}: cannot poll the connection with node {peer}: {err}",
                self.me
            );
            return;
        }
        buffer.set_max_frame_len(self.max_frame_len);
        self.conns_opened += 1;
        let out = PeerOut {
            stream: out_stream,
            sealer,
            scratch: Vec::new(),
            pending: Vec::new(),
            written: 0,
            queued_at: Instant::now(),
        };
        let conn = PeerConn {
            stream,
            buffer,
            out: Arc::new(PiMutex::new(out)),
            number: self.conns_opened,
            asks_unanswered: VecDeque::new(),
            told_receiving: None,
        };
        self.conns.insert(peer, conn);
        if let Some(Dial::Waiting { retry, .. } | Dial::Running { retry }) =
            self.dials.get_mut(&peer)
            && let Some(attempts) = retry.connected()
        {
            tracing::info!(
                "node {}: reached node {peer} after {attempts} attempts",
                self.me
            );
        }
    }

    /// Reads what `peer`'s connection holds into `inputs`; a connection that ends or sends
    /// what it must not is closed (and reported by [`take_ended`](Self::take_ended)).
    pub(super) fn read(
        &mut self,
        peer: NodeId,
        closed: bool,
        now: Instant,
        tick: Duration,
        inputs: &mut Vec<PeerInput>,
    ) {
        let Some(conn) = self.conns.get_mut(&peer) else {
            return;
        };
        if let Err(ended) = conn.read(peer, closed, now, tick, inputs) {
            if let Ended::Here(why) = &ended {
                self.metrics.frames_rejected.inc();
                self.auth.note_forged(why);
                tracing::warn!(
                    "node {}: closed the connection with node {peer}: {why}",
                    self.me
                );
            }
            self.close(peer, ended);
        }
    }

    /// Sends a cluster message to `peer`, if connected (the core repeats what matters).
    pub(super) fn send_cluster(&mut self, peer: NodeId, message: &ClusterMessage) {
        if self.trace && !matches!(message, ClusterMessage::Alive { .. }) {
            tracing::trace!("node {}: to {peer}: {}", self.me, brief(message));
        }
        self.frame.clear();
        tandem_node::encode_cluster_message(&mut self.frame, message);
        self.queue(peer);
    }

    /// Sends a replication message of `group`'s stream to `peer`, if connected.
    pub(super) fn send_replication(&mut self, peer: NodeId, group: GroupId, message: &Message) {
        self.frame.clear();
        let Some(conn) = self.conns.get(&peer) else {
            return;
        };
        let mut out = conn.out.lock();
        let queued = if let Message::Batch(bytes) = message {
            tandem_wire::encode_batch_frame_header(&mut self.frame, group, bytes.len());
            out.batch(&self.frame, bytes)
        } else {
            encode_peer(&mut self.frame, group, message);
            out.frames(&self.frame)
        };
        drop(out);
        if let Err(err) = queued {
            self.close(peer, Ended::Here(ConnError::Io(err)));
        }
    }

    /// Relays a pub/sub message to `peer`, if connected; one whose frame is longer than a
    /// peer takes is not relayed (the peer would close the connection on it): false.
    pub(super) fn send_publication(
        &mut self,
        peer: NodeId,
        publication: &tandem_node::RelayedPublication,
    ) -> bool {
        let frame_len = tandem_node::relayed_publication_frame_len(
            publication.channel.len(),
            publication.message.len(),
        );
        if frame_len > self.max_frame_len {
            return false;
        }
        self.frame.clear();
        tandem_node::encode_relayed_publication(&mut self.frame, publication);
        self.queue(peer);
        true
    }

    /// Asks `primary` for a link in `group` (this node's backup role there follows it).
    pub(super) fn ask_link(&mut self, primary: NodeId, group: GroupId) {
        self.frame.clear();
        let hello = Hello::new(PeerKind::Replica, u64::from(self.me), group);
        encode_hello(&mut self.frame, &hello);
        if self.queue(primary)
            && let Some(conn) = self.conns.get_mut(&primary)
        {
            conn.asks_unanswered.push_back(group);
        }
    }

    /// Answers `backup`'s ask for a link: welcomed into the view `view` at `lsn`, or refused.
    pub(super) fn answer_link(&mut self, backup: NodeId, answer: Result<(u64, u64), String>) {
        self.frame.clear();
        match answer {
            Ok((view, lsn)) => {
                let welcome = Welcome {
                    version: tandem_wire::PROTOCOL_VERSION,
                    node_id: self.me,
                    role: tandem_wire::Role::Primary,
                    view,
                    lsn,
                };
                encode_welcome(&mut self.frame, &welcome);
            }
            Err(why) => encode_error(&mut self.frame, ErrorCode::StaleView, &why),
        }
        self.queue(backup);
    }

    /// Queues `self.frame` to `peer`; false if there is no connection (or it broke).
    fn queue(&mut self, peer: NodeId) -> bool {
        let Some(conn) = self.conns.get(&peer) else {
            return false;
        };
        let queued = conn.out.lock().frames(&self.frame);
        if let Err(err) = queued {
            self.close(peer, Ended::Here(ConnError::Io(err)));
            return false;
        }
        true
    }

    /// Writes what every connection holds, or `peer`'s only; a connection that cannot be
    /// written (its peer reset it) or whose peer reads too slowly is closed.
    pub(super) fn flush(&mut self, peer: Option<NodeId>) {
        let unsent_max = UNSENT_MAX_BYTES + self.max_frame_len;
        let mut broken = Vec::new();
        for (&node, conn) in &self.conns {
            if peer.is_some_and(|peer| peer != node) {
                continue;
            }
            let mut out = conn.out.lock();
            if out.unsent() == 0 {
                continue;
            }
            match out.flush() {
                Ok(()) if out.unsent() > unsent_max => {
                    let why = format!("it reads too slowly ({} bytes unsent)", out.unsent());
                    broken.push((node, Ended::Here(ConnError::Protocol(why))));
                }
                Ok(()) => {}
                Err(_) => broken.push((node, Ended::ByPeer)),
            }
        }
        for (node, ended) in broken {
            if let Ended::Here(why) = &ended {
                tracing::warn!(
                    "node {}: closed the connection with node {node}: {why}",
                    self.me
                );
            }
            self.close(node, ended);
        }
    }

    fn close(&mut self, peer: NodeId, ended: Ended) {
        let Some(conn) = self.conns.remove(&peer) else {
            return;
        };
        let _ = self
            .registry
            .deregister(&mut SourceFd(&conn.stream.as_raw_fd()));
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
        let by_peer = matches!(ended, Ended::ByPeer);
        self.ended.push((peer, by_peer));
        // A peer this node dials is dialed again at once (a dial under way goes on).
        if let Some(Dial::Waiting { at, .. }) = self.dials.get_mut(&peer) {
            *at = Instant::now();
        }
    }

    /// The connections that ended since the last call: (peer, whether its side ended it).
    pub(super) fn take_ended(&mut self) -> Vec<(NodeId, bool)> {
        std::mem::take(&mut self.ended)
    }

    /// Starts a dial to every peer this node dials that has no connection and is due.
    pub(super) fn dial_due(&mut self, now: Instant) {
        let due: Vec<NodeId> = self
            .dials
            .iter()
            .filter(|(peer, dial)| {
                !self.conns.contains_key(peer)
                    && matches!(dial, Dial::Waiting { at, .. } if *at <= now)
            })
            .map(|(&peer, _)| peer)
            .collect();
        for peer in due {
            let Some(&address) = self.addresses.get(&peer) else {
                continue;
            };
            // A node's connection carries every group's stream: its Hello names none (0).
            let hello = Hello::new(PeerKind::Cluster, u64::from(self.me), 0);
            let auth = self.auth.clone();
            let to_node = self.to_node.clone();
            let max_frame_len = self.max_frame_len;
            let started = crate::spawn_or_say(format!("dial-{peer}"), move || {
                let result = dial(address, peer, &hello, &auth, max_frame_len);
                let _ = to_node.send(ToNode::PeerDialed { peer, result });
            });
            let Some(dial) = self.dials.get_mut(&peer) else {
                continue;
            };
            let retry = match dial {
                Dial::Waiting { retry, .. } | Dial::Running { retry } => std::mem::take(retry),
            };
            *dial = if started {
                Dial::Running { retry }
            } else {
                Dial::Waiting {
                    at: now + Duration::from_millis(20),
                    retry,
                }
            };
        }
    }

    /// A dial to `peer` ended: its connection, or the next attempt scheduled.
    pub(super) fn dialed(&mut self, peer: NodeId, result: Result<Connected, ConnError>) {
        let now = Instant::now();
        let retry = match self.dials.get_mut(&peer) {
            Some(Dial::Waiting { retry, .. } | Dial::Running { retry }) => std::mem::take(retry),
            None => return,
        };
        self.dials.insert(peer, Dial::Waiting { at: now, retry });
        match result {
            Ok(connected) => self.open(peer, connected),
            Err(err) => {
                let Some(Dial::Waiting { at, retry }) = self.dials.get_mut(&peer) else {
                    unreachable!("just inserted");
                };
                let (pause, said) = retry.failed(now);
                *at = now + pause;
                let address = self.addresses.get(&peer).copied();
                let address = address.map_or_else(|| "?".into(), |a| a.to_string());
                let why = error_words(&err);
                match said {
                    RetrySay::Nothing => {}
                    RetrySay::FirstFailure => tracing::info!(
                        "node {}: cannot reach node {peer} at {address}: {why}; retrying",
                        self.me
                    ),
                    RetrySay::StillFailing { attempts } => tracing::warn!(
                        "node {}: still cannot reach node {peer} at {address} after {attempts} \
                         attempts: {why}",
                        self.me
                    ),
                }
            }
        }
    }
}

/// Connects to `peer` at `address` and runs the handshake (on a thread of its own: both
/// block).
fn dial(
    address: SocketAddr,
    peer: NodeId,
    hello: &Hello,
    auth: &PeerAuth,
    max_frame_len: usize,
) -> Result<Connected, ConnError> {
    let mut stream = TcpStream::connect_timeout(&address, DIAL_CONNECT_TIMEOUT)?;
    net::tune(&stream)?;
    let mut buffer = FrameBuffer::new(max_frame_len);
    let sealer = auth.connect(&mut stream, &mut buffer, hello, peer)?;
    Ok(Connected {
        stream,
        buffer,
        sealer,
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::net::TcpListener;

    use super::*;

    /// Both ends of a loopback connection: this node's, non-blocking, and the peer's.
    fn pair() -> (PeerConn, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (stream, _) = listener.accept().unwrap();
        stream.set_nonblocking(true).unwrap();
        let out = PeerOut::plain(stream.try_clone().unwrap(), Instant::now());
        let conn = PeerConn {
            stream,
            buffer: FrameBuffer::new(tandem_wire::MAX_FRAME_LEN_DEFAULT),
            out: Arc::new(PiMutex::new(out)),
            number: 1,
            asks_unanswered: VecDeque::new(),
            told_receiving: None,
        };
        (conn, peer)
    }

    /// Reads until `conn` has what `peer` wrote (loopback delivers within microseconds).
    fn read_all(conn: &mut PeerConn, now: Instant) -> Result<Vec<PeerInput>, Ended> {
        std::thread::sleep(Duration::from_millis(20));
        let mut inputs = Vec::new();
        conn.read(2, true, now, Duration::from_millis(1), &mut inputs)?;
        Ok(inputs)
    }

    fn welcome() -> Vec<u8> {
        let mut frame = Vec::new();
        let welcome = Welcome {
            version: tandem_wire::PROTOCOL_VERSION,
            node_id: 2,
            role: tandem_wire::Role::Primary,
            view: 3,
            lsn: 9,
        };
        encode_welcome(&mut frame, &welcome);
        frame
    }

    #[test]
    fn only_the_answer_to_the_last_ask_is_heard() {
        let (mut conn, mut peer) = pair();
        conn.asks_unanswered = VecDeque::from([0, 0]);
        let mut frames = welcome();
        encode_error(&mut frames, ErrorCode::StaleView, "node 1 is not a member");
        peer.write_all(&frames).unwrap();
        let inputs = read_all(&mut conn, Instant::now()).ok().unwrap();
        assert_eq!(inputs.len(), 1, "{inputs:?}");
        assert!(
            matches!(&inputs[0], PeerInput::LinkAnswered { from: 2, group: 0, answer: Err(why) }
                if why == "node 1 is not a member"),
            "{inputs:?}"
        );
        assert!(conn.asks_unanswered.is_empty());

        // The next ask's answer is heard.
        conn.asks_unanswered = VecDeque::from([0]);
        peer.write_all(&welcome()).unwrap();
        let inputs = read_all(&mut conn, Instant::now()).ok().unwrap();
        assert!(
            matches!(
                &inputs[..],
                [PeerInput::LinkAnswered {
                    from: 2,
                    group: 0,
                    answer: Ok(())
                }]
            ),
            "{inputs:?}"
        );
    }

    /// Asks of two groups on one connection are answered in order; each group hears the
    /// answer to its own last ask, and an answer nobody asked for is dropped.
    #[test]
    fn each_group_hears_the_answer_to_its_last_ask() {
        let (mut conn, mut peer) = pair();
        conn.asks_unanswered = VecDeque::from([1, 2, 1]);
        let mut frames = Vec::new();
        encode_error(&mut frames, ErrorCode::StaleView, "first ask of group 1");
        frames.extend(welcome());
        encode_error(&mut frames, ErrorCode::StaleView, "second ask of group 1");
        frames.extend(welcome());
        peer.write_all(&frames).unwrap();
        let inputs = read_all(&mut conn, Instant::now()).ok().unwrap();
        assert!(
            matches!(
                &inputs[..],
                [
                    PeerInput::LinkAnswered { from: 2, group: 2, answer: Ok(()) },
                    PeerInput::LinkAnswered { from: 2, group: 1, answer: Err(why) },
                ] if why == "second ask of group 1"
            ),
            "{inputs:?}"
        );
        assert!(conn.asks_unanswered.is_empty());
    }

    #[test]
    fn a_backup_asks_with_a_replica_hello_naming_itself_and_nothing_else_passes() {
        let (mut conn, mut peer) = pair();
        let mut frame = Vec::new();
        encode_hello(&mut frame, &Hello::new(PeerKind::Replica, 2, 0));
        peer.write_all(&frame).unwrap();
        let inputs = read_all(&mut conn, Instant::now()).ok().unwrap();
        assert!(
            matches!(&inputs[..], [PeerInput::LinkAsked { from: 2, group: 0 }]),
            "{inputs:?}"
        );

        // A Hello that claims another node, and a client's call, end the connection.
        for frame in [
            {
                let mut frame = Vec::new();
                encode_hello(&mut frame, &Hello::new(PeerKind::Replica, 3, 0));
                frame
            },
            {
                let mut frame = Vec::new();
                tandem_wire::encode_call(&mut frame, 1, 1, None, b"x");
                frame
            },
        ] {
            let (mut conn, mut peer) = pair();
            peer.write_all(&frame).unwrap();
            match read_all(&mut conn, Instant::now()) {
                Err(Ended::Here(ConnError::Protocol(why))) => {
                    assert!(why.contains("on the peer connection"), "{why}")
                }
                other => panic!("expected the connection to end: {:?}", other.ok()),
            }
        }
    }

    #[test]
    fn a_long_frame_arriving_is_told_once_a_tick_and_a_close_is_the_peers() {
        let (mut conn, mut peer) = pair();
        let message = Message::Batch(vec![7; 100_000].into());
        let mut frame = Vec::new();
        if let Message::Batch(bytes) = &message {
            tandem_wire::encode_batch_frame_header(&mut frame, 0, bytes.len());
            frame.extend_from_slice(bytes);
        }
        let start = Instant::now();
        peer.write_all(&frame[..1_000]).unwrap();
        let inputs = read_all(&mut conn, start).ok().unwrap();
        assert!(
            matches!(&inputs[..], [PeerInput::Receiving { from: 2 }]),
            "{inputs:?}"
        );
        peer.write_all(&frame[1_000..2_000]).unwrap();
        let inputs = read_all(&mut conn, start).ok().unwrap();
        assert!(inputs.is_empty(), "told again within the tick: {inputs:?}");
        peer.write_all(&frame[2_000..]).unwrap();
        let later = start + Duration::from_millis(1);
        let inputs = read_all(&mut conn, later).ok().unwrap();
        assert!(
            matches!(&inputs[..], [PeerInput::Replication { from: 2, group: 0, message: got }] if *got == message),
            "{} inputs",
            inputs.len()
        );
        drop(peer);
        assert!(matches!(read_all(&mut conn, later), Err(Ended::ByPeer)));
    }

    #[test]
    fn what_the_socket_cannot_take_waits_and_leaves_in_order() {
        let (conn, mut peer) = pair();
        let mut out = conn.out.lock();
        // More than the socket buffers hold with nobody reading.
        let chunk = vec![5u8; 1 << 20];
        for _ in 0..64 {
            out.frames(&chunk).unwrap();
            out.flush().unwrap();
        }
        assert!(out.unsent() > 0, "the kernel took 64 MiB unread");
        let mut read = 0usize;
        let mut buffer = vec![0; 1 << 20];
        peer.set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        while read < 64 << 20 {
            out.flush().unwrap();
            let n = peer.read(&mut buffer).unwrap();
            assert!(buffer[..n].iter().all(|&b| b == 5));
            read += n;
        }
        out.flush().unwrap();
        assert_eq!(out.unsent(), 0);
    }
}
