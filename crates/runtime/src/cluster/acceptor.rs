//! The native port's handshakes: what a connection whose `Hello` the gate read whole proves,
//! step by step, each step that waits for the connector held in the gate ([`Next`]) rather
//! than on a thread of its own: TLS (the gate feeds the handshake the bytes that come), the
//! `Hello` again under TLS, a peer's proof of the cluster's secret, a client's proof of a
//! password, and a client's wait for the node's role during a view change. A peer that
//! proved itself goes to the node thread, a client to the I/O loop.

use std::net::TcpStream;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_config::GroupId;
use tandem_replication::NodeId;
use tandem_wire::{ErrorCode, Frame, FrameBuffer, Hello, PeerKind, encode_error};

use super::Slot;
use super::node_loop::{NodeTx, ToNode};
use super::peers::Connected;
use crate::gate::{Held, Next};
use crate::metrics::Metrics;
use crate::native::{ClientCount, Handoff, NativeDoor};
use crate::net::{self, ConnError};
use crate::peer_auth::{
    ClientAuth, HANDSHAKE_TIMEOUT, PeerAuth, PeerChallenge, Sealer, TlsWriter, decrypt_after,
    hello_again,
};
use crate::peer_tls::{TlsHandshake, TlsRefusal};

/// The longest a primary's link or a client waits at a node that is changing roles (frozen
/// for a view change, or between two roles) for the role it will have: about what a failover
/// takes, and less than a stub's attempt timeout.
pub(super) const ROLE_WAIT_MAX: Duration = Duration::from_millis(10);

/// How often a client held in the gate while the node changes roles looks at the role again.
const ROLE_RETRY: Duration = Duration::from_millis(1);

/// The longest one write of a handshake may take on the gate's thread.
const HANDSHAKE_WRITE_TIMEOUT: Duration = Duration::from_millis(200);

/// Reads first frames and hands each connection to whoever serves it.
pub(super) struct Acceptor {
    pub(super) node_id: NodeId,
    pub(super) max_frame_len: usize,
    /// The role of each group the node serves in: a client's `Hello` names its group.
    pub(super) slots: Vec<(GroupId, Arc<Mutex<Slot>>)>,
    pub(super) to_node: NodeTx,
    pub(super) auth: PeerAuth,
    pub(super) client_auth: ClientAuth,
    pub(super) metrics: Arc<Metrics>,
    /// Client connections served at once (`tuning.maxclients`), RESP's included.
    pub(super) maxclients: usize,
    /// The I/O loop, which serves a client once its handshake is done.
    pub(super) door: NativeDoor,
}

/// Who a connection in a TLS handshake is: it decides what it proves next, and how a
/// refusal is told and counted.
#[derive(Clone, Copy)]
enum Connector {
    Client,
    Peer(NodeId),
}

impl Acceptor {
    /// The role of `group`, if the node serves in it.
    fn slot_of(&self, group: GroupId) -> Option<&Mutex<Slot>> {
        let found = self.slots.iter().find(|(of, _)| *of == group);
        found.map(|(_, slot)| &**slot)
    }

    /// Serves the native port on `listener`: its gate holds each connection until its
    /// `Hello` is whole, then through every step of its handshake ([`Self::on_hello`]).
    pub(super) fn serve(
        self,
        listener: std::net::TcpListener,
    ) -> Result<crate::gate::GateThread, crate::StartError> {
        let limits = crate::gate::GateLimits::for_maxclients(self.maxclients);
        let metrics = Arc::clone(&self.metrics);
        let acceptor = Arc::new(self);
        let on_hello = move |held: Held| Arc::clone(&acceptor).on_hello(held);
        crate::gate::spawn(listener, limits, metrics, Box::new(on_hello))
            .map_err(crate::StartError::NativePort)
    }

    /// A connection whose `Hello` is whole: a peer proves itself by TLS or the cluster's
    /// secret, a client by TLS and a password if they are asked; a client is then served
    /// once the node holds a role.
    fn on_hello(self: Arc<Self>, mut held: Held) -> Next {
        let _ = net::tune(&held.stream);
        // Each write of a handshake is a frame or a TLS flight of a few KiB, far less than a
        // socket's send buffer takes: none waits. Should one (a connector that reads
        // nothing while its window is shut), it gives up soon rather than hold the gate.
        let _ = held.stream.set_write_timeout(Some(HANDSHAKE_WRITE_TIMEOUT));
        let Some(hello) = self.read_hello(&mut held.stream, &mut held.buffer) else {
            return Next::Done;
        };
        match hello.peer {
            PeerKind::Client if self.client_auth.runs_tls() => {
                match self.client_auth.start_tls(&mut held.stream) {
                    Ok(tls) => self.start_tls(held, hello, Connector::Client, tls),
                    Err(_) => Next::Done,
                }
            }
            PeerKind::Client => self.ask_password(held, hello, None),
            PeerKind::Cluster => self.accept_peer(held, hello),
            PeerKind::Replica => {
                // No node links this way any more: every pair of nodes links over the
                // connection the two keep.
                let message = "this node runs in a cluster: its peers link over their cluster \
                               connection (every node of a cluster runs the same version)";
                refuse(&mut held.stream, ErrorCode::BadFrame, message);
                Next::Done
            }
        }
    }

    /// The connection's `Hello`, which the gate read whole into `buffer` (so this never
    /// waits), if it is one for this node's group (or a peer's); else the connection was
    /// told why and closed.
    fn read_hello(&self, stream: &mut TcpStream, buffer: &mut FrameBuffer) -> Option<Hello> {
        let hello = net::read_one(
            stream,
            buffer,
            Duration::from_secs(10),
            |frame| match frame {
                Frame::Hello(hello) => Ok(hello),
                _ => Err(ConnError::Protocol(
                    "the first frame must be a Hello".into(),
                )),
            },
        );
        let mut hello = match hello {
            Ok(hello) => hello,
            Err(err) => {
                refuse(stream, err.code(), &err.to_string());
                return None;
            }
        };
        // A client that will take any group (a proxy's discovery) gets the first this node
        // serves in: it can do nothing there that a Hello naming that group could not.
        if hello.group == tandem_wire::GROUP_ANY && hello.peer == PeerKind::Client {
            hello.group = self.slots[0].0;
        }
        if self.slot_of(hello.group).is_none() && hello.peer != PeerKind::Cluster {
            let served: Vec<String> = self.slots.iter().map(|(g, _)| g.to_string()).collect();
            let message = format!(
                "node {} does not serve in group {} (it serves in {})",
                self.node_id,
                hello.group,
                served.join(", ")
            );
            refuse(stream, ErrorCode::BadFrame, &message);
            return None;
        }
        Some(hello)
    }

    /// A peer's handshake: TLS if peer links run it; otherwise its proof of the cluster's
    /// secret, if the node has one, awaited in the gate.
    fn accept_peer(self: Arc<Self>, mut held: Held, hello: Hello) -> Next {
        let Ok(from) = NodeId::try_from(hello.id) else {
            refuse(
                &mut held.stream,
                ErrorCode::BadFrame,
                "node ids fit 32 bits",
            );
            return Next::Done;
        };
        if self.auth.runs_tls() {
            return match self.auth.start_tls(&mut held.stream, &hello) {
                Ok(tls) => self.start_tls(held, hello, Connector::Peer(from), tls),
                Err(_) => Next::Done,
            };
        }
        match self.auth.challenge(&mut held.stream, &hello) {
            Err(_) => Next::Done,
            Ok(PeerChallenge::Proved(sealer)) => self.peer_accepted(from, held, sealer),
            Ok(PeerChallenge::Sent(accepting)) => Next::Await {
                held,
                timeout: HANDSHAKE_TIMEOUT,
                then: Box::new(move |mut held, timed_out| {
                    let Held { stream, buffer, .. } = &mut held;
                    match self.auth.check_proof(stream, buffer, *accepting, timed_out) {
                        Ok(sealer) => self.peer_accepted(from, held, sealer),
                        Err(_) => Next::Done,
                    }
                }),
            },
        }
    }

    /// Hands a peer's link that proved itself to the node thread.
    fn peer_accepted(&self, from: NodeId, held: Held, sealer: Sealer) -> Next {
        let Held {
            stream,
            mut buffer,
            handshake,
        } = held;
        // Proved: the connection leaves the handshakes.
        drop(handshake);
        buffer.set_max_frame_len(self.max_frame_len);
        let connected = Connected {
            stream,
            buffer,
            sealer,
        };
        let _ = self.to_node.send(ToNode::PeerAccepted {
            peer: from,
            connected,
        });
        Next::Done
    }

    /// Starts an acceptor's TLS handshake (announced already) with what came with the
    /// `Hello`.
    fn start_tls(
        self: Arc<Self>,
        mut held: Held,
        hello: Hello,
        who: Connector,
        tls: TlsHandshake,
    ) -> Next {
        let came = held.buffer.take_unread();
        self.feed_tls(held, hello, who, tls, &came)
    }

    /// Feeds the TLS handshake what came, sends what it answers, and awaits more bytes in
    /// the gate until it is done; then the `Hello` again under TLS.
    fn feed_tls(
        self: Arc<Self>,
        mut held: Held,
        hello: Hello,
        who: Connector,
        mut tls: TlsHandshake,
        came: &[u8],
    ) -> Next {
        let mut answer = Vec::new();
        let fed = tls.feed(came, &mut answer);
        let sent = net::write_all(&mut held.stream, &answer);
        let done = match (fed, sent) {
            (Err(err), _) => return self.tls_refused(held, who, err),
            (Ok(_), Err(_)) => return Next::Done,
            (Ok(done), Ok(())) => done,
        };
        if !done {
            return Next::AwaitBytes {
                held,
                timeout: HANDSHAKE_TIMEOUT,
                then: Box::new(move |mut held, timed_out| {
                    let came = held.buffer.take_unread();
                    if timed_out || came.is_empty() {
                        let why = match timed_out {
                            true => std::io::ErrorKind::TimedOut,
                            false => std::io::ErrorKind::UnexpectedEof,
                        };
                        return self.tls_refused(held, who, TlsRefusal::Io(why.into()));
                    }
                    self.feed_tls(held, hello, who, tls, &came)
                }),
            };
        }
        let (keys, rest) = match tls.finish() {
            Ok(finished) => finished,
            Err(err) => return self.tls_refused(held, who, err),
        };
        let Ok(writer) = decrypt_after(&mut held.buffer, &keys, &rest) else {
            return Next::Done;
        };
        Next::Await {
            held,
            timeout: HANDSHAKE_TIMEOUT,
            then: Box::new(move |mut held, timed_out| {
                let Held { stream, buffer, .. } = &mut held;
                match hello_again(stream, buffer, &hello, timed_out) {
                    Ok(()) => self.tls_proved(held, hello, who, writer),
                    Err(err) => self.tls_refused(held, who, err),
                }
            }),
        }
    }

    /// A connection whose TLS handshake and `Hello` again checked out: a peer is linked, a
    /// client asked for its password if one is asked.
    fn tls_proved(
        self: Arc<Self>,
        held: Held,
        hello: Hello,
        who: Connector,
        writer: TlsWriter,
    ) -> Next {
        match who {
            Connector::Peer(from) => self.peer_accepted(from, held, Sealer::Tls(Box::new(writer))),
            Connector::Client => self.ask_password(held, hello, Some(writer)),
        }
    }

    /// Tells a connector why its TLS handshake failed, counts it, and closes the connection.
    fn tls_refused(&self, mut held: Held, who: Connector, err: TlsRefusal) -> Next {
        match who {
            Connector::Client => self.client_auth.tls_refused(&mut held.stream, err),
            Connector::Peer(_) => self.auth.tls_refused(&mut held.stream, err),
        };
        Next::Done
    }

    /// A client's password, if one is asked: its proof awaited in the gate; then it is
    /// served once the node holds a role. `tls`: the writer of a client under TLS.
    fn ask_password(
        self: Arc<Self>,
        mut held: Held,
        hello: Hello,
        mut tls: Option<TlsWriter>,
    ) -> Next {
        let nonce = match self.client_auth.challenge(&mut held.stream, tls.as_mut()) {
            Err(_) => return Next::Done,
            Ok(None) => {
                let deadline = Instant::now() + ROLE_WAIT_MAX;
                return self.serve_when_ready(held, hello.id, hello.group, tls, deadline);
            }
            Ok(Some(nonce)) => nonce,
        };
        Next::Await {
            held,
            timeout: crate::peer_auth::CLIENT_PROOF_TIMEOUT,
            then: Box::new(move |mut held, timed_out| {
                let Held { stream, buffer, .. } = &mut held;
                let proved = self.client_auth.check_proof(
                    stream,
                    tls.as_mut(),
                    buffer,
                    &hello,
                    &nonce,
                    timed_out,
                );
                match proved {
                    Ok(()) => {
                        let deadline = Instant::now() + ROLE_WAIT_MAX;
                        self.serve_when_ready(held, hello.id, hello.group, tls, deadline)
                    }
                    Err(_) => Next::Done,
                }
            }),
        }
    }

    /// Serves a client that proved itself once the node holds a role that serves it, or at
    /// `deadline`, whichever comes first: a node in the middle of a view change may be the
    /// next primary, and the stub waits here for its role rather than going round the nodes
    /// and pausing. Meanwhile the gate holds the connection and looks again every
    /// [`ROLE_RETRY`].
    fn serve_when_ready(
        self: Arc<Self>,
        held: Held,
        client_id: u64,
        group: GroupId,
        tls: Option<TlsWriter>,
        deadline: Instant,
    ) -> Next {
        let slot = self
            .slot_of(group)
            .expect("a client's Hello names a group the node serves in")
            .lock()
            .expect("not poisoned");
        if !serves_clients(&slot) && Instant::now() < deadline {
            drop(slot);
            return Next::Later {
                held,
                after: ROLE_RETRY,
                then: Box::new(move |held, _| {
                    self.serve_when_ready(held, client_id, group, tls, deadline)
                }),
            };
        }
        // The role's lock is not held meanwhile: a promotion must not wait for a client.
        let service = client_service(&slot, client_id);
        drop(slot);
        let Held {
            stream,
            buffer,
            handshake,
        } = held;
        // Proved: the connection leaves the handshakes.
        drop(handshake);
        self.serve_client(stream, buffer, tls, service);
        Next::Done
    }

    /// Hands a client that proved itself to the I/O loop, to be served by `service` (none:
    /// the node holds no role that serves it, and says so), unless the node already serves
    /// `maxclients` clients.
    fn serve_client(
        &self,
        mut stream: TcpStream,
        mut buffer: FrameBuffer,
        mut client_tls: Option<crate::TlsWriter>,
        service: Option<Box<dyn crate::native::Service>>,
    ) {
        // The client may send frames of any length the node takes.
        buffer.set_max_frame_len(self.max_frame_len);
        if self.metrics.client_connections.get() >= self.maxclients as i64 {
            self.metrics.connection_refused("maxclients");
            let mut frame = Vec::new();
            encode_error(
                &mut frame,
                ErrorCode::Busy,
                "max number of clients reached (tuning.maxclients)",
            );
            let _ = crate::peer_auth::send(&mut stream, client_tls.as_mut(), &frame);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        }
        let Some(service) = service else {
            let message = format!("node {} is not the primary", self.node_id);
            let mut frame = Vec::new();
            encode_error(&mut frame, ErrorCode::NotPrimary, &message);
            let _ = crate::peer_auth::send(&mut stream, client_tls.as_mut(), &frame);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return;
        };
        self.door.hand(Handoff {
            stream,
            buffer,
            tls: client_tls,
            service,
            counted: ClientCount::new(&self.metrics),
        });
    }
}

/// Whether the node holds a role that serves clients and is not changing it: a primary, or
/// a backup (or spare) that is not frozen for a view change.
fn serves_clients(slot: &Slot) -> bool {
    match slot {
        Slot::Primary(_) => true,
        Slot::Backup(handle) => !handle.gate().is_frozen(),
        Slot::Outside => false,
    }
}

/// What serves a native client (`client_id`) at the role in `slot`: a backup (or spare)
/// serves reads and welcomes the client as a backup, which tells a stub looking for the
/// primary to go on; no role, nothing.
fn client_service(slot: &Slot, client_id: u64) -> Option<Box<dyn crate::native::Service>> {
    match slot {
        Slot::Primary(handle) => Some(handle.native_service(client_id)),
        Slot::Backup(handle) => Some(handle.native_service()),
        Slot::Outside => None,
    }
}

fn refuse(stream: &mut TcpStream, code: ErrorCode, message: &str) {
    let mut frame = Vec::new();
    encode_error(&mut frame, code, message);
    let _ = net::write_all(stream, &frame);
    let _ = stream.shutdown(std::net::Shutdown::Both);
}
