//! Peer links under a `peer_secret`, over real TCP on loopback: a primary and a backup of a
//! fixed view that share it replicate; a stranger that speaks the frame format but not the
//! secret is refused at the handshake before any of its frames is decoded, nothing it sent
//! is applied, and the refusal is counted in `/metrics`. Without a secret, a node takes peer
//! links from loopback only.

use crate::common;

use common::{model, outward_address, refused};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tandem_replication::Message;
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{NodeConfig, PeerConfig, Role, Secret};
use tandem_wire::{
    ClusterSecret, Connecting, ErrorCode, Frame, FrameBuffer, Hello, MAX_FRAME_LEN_DEFAULT,
    NONCE_LEN, PeerKind, ReplyStatus, encode_auth, encode_call, encode_hello, encode_peer,
};
use tandem_workloads::debit_credit::{DEBIT_CREDIT, DebitCredit};

const SECRET: &str = "the cluster's own secret, 32+ b";
const READ_TIMEOUT: Duration = Duration::from_secs(10);

fn config(id: u32, listen: SocketAddr, peer: PeerConfig, secret: Option<&str>) -> NodeConfig {
    common::pair_config(id, listen, peer, |config| {
        config.peer_secret = secret.map(|secret| Secret(secret.to_owned()));
    })
}

/// A backup (node 2) following node 1 at `primary`, on `listener`.
fn start_backup(listener: TcpListener, primary: SocketAddr, secret: Option<&str>) -> RunningNode {
    let address = listener.local_addr().unwrap();
    let peer = PeerConfig {
        node_id: 1,
        address: primary,
        role: Some(Role::Primary),
        resp: None,
    };
    let config = config(2, address, peer, secret);
    common::start(&config, listener, None, model(&config))
}

/// The primary (node 1) of `backup`, on a loopback port: the node and its address.
fn start_primary(backup: SocketAddr, secret: Option<&str>) -> (RunningNode, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().unwrap();
    let peer = PeerConfig {
        node_id: 2,
        address: backup,
        role: Some(Role::Backup),
        resp: None,
    };
    let config = config(1, address, peer, secret);
    (
        common::start(&config, listener, None, model(&config)),
        address,
    )
}

/// The last LSN the backup `node` received, as its status says.
fn lsn_received(node: &RunningNode) -> u64 {
    node.status().expect("the backup role answers").lsn
}

/// The last LSN the backup `node` applied, as its status says.
fn lsn_applied(node: &RunningNode) -> u64 {
    node.status().expect("the backup role answers").lsn_applied
}

/// A connection that reads frames with a timeout.
struct Conn {
    stream: TcpStream,
    buffer: FrameBuffer,
}

impl Conn {
    fn open(address: SocketAddr) -> Conn {
        let stream = TcpStream::connect(address).expect("the node accepts");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        Conn {
            stream,
            buffer: FrameBuffer::new(MAX_FRAME_LEN_DEFAULT),
        }
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).unwrap();
    }

    /// The next frame, re-encoded (so that it outlives the buffer), or `None` at the end of
    /// the stream.
    fn next(&mut self) -> Option<Vec<u8>> {
        loop {
            if let Some(frame) = self.buffer.next_frame().expect("well-formed frames") {
                let mut out = Vec::new();
                frame.encode(&mut out);
                return Some(out);
            }
            let n = match self.stream.read(self.buffer.spare()) {
                Ok(n) => n,
                Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => 0,
                Err(err) => panic!("no frame in {READ_TIMEOUT:?}: {err}"),
            };
            if n == 0 {
                return None;
            }
            self.buffer.filled(n);
        }
    }

    fn next_frame(&mut self) -> Option<Frame<'static>> {
        let bytes = self.next()?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        Some(
            tandem_wire::decode_frame(bytes, MAX_FRAME_LEN_DEFAULT)
                .unwrap()
                .unwrap()
                .0,
        )
    }

    /// Expects an `Error` frame saying `says`, then the end of the stream.
    fn refused(&mut self, says: &str) {
        match self.next_frame() {
            Some(Frame::Error(err)) => {
                assert_eq!(err.code, ErrorCode::Unauthorized);
                assert!(
                    err.message.contains(says),
                    "{:?} should say {says:?}",
                    err.message
                );
                assert!(!err.message.contains(SECRET), "the secret is never told");
            }
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(self.next(), None, "the node closes the link");
    }

    /// Expects backup node 2, which took this connection for its primary's, to ask on it
    /// for a replication link (a `Hello` of kind `Replica` with its own id); the cluster
    /// messages its config store may send first are passed over.
    fn asked_for_a_link(&mut self) {
        loop {
            match self.next_frame() {
                Some(Frame::Cluster(_)) => {}
                Some(Frame::Hello(hello)) => {
                    assert_eq!((hello.peer, hello.id), (PeerKind::Replica, 2));
                    return;
                }
                other => panic!("expected the backup's ask for a link, got {other:?}"),
            }
        }
    }
}

/// Node 1's `Hello` as the primary of group 0 sends it on the connection it dials to its
/// backup (the node with the lower id dials; one connection carries all between them).
fn primary_hello() -> Hello {
    Hello::new(PeerKind::Cluster, 1, 0)
}

/// A batch frame with bytes a stranger made up.
fn stranger_batch() -> Vec<u8> {
    let mut frame = Vec::new();
    encode_peer(&mut frame, 0, &Message::Batch(Arc::from(vec![7u8; 64])));
    frame
}

#[test]
fn a_pair_that_shares_the_secret_replicates() {
    // The backup's port first, so the primary's link has somewhere to go.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let backup_address = listener.local_addr().unwrap();
    let (primary, primary_address) = start_primary(backup_address, Some(SECRET));
    let backup = start_backup(listener, primary_address, Some(SECRET));
    let mut client = Conn::open(primary_address);
    let mut bytes = Vec::new();
    encode_hello(&mut bytes, &Hello::new(PeerKind::Client, 9, 0));
    client.send(&bytes);
    assert!(matches!(client.next_frame(), Some(Frame::Welcome(_))));
    for seq in 1..=20u64 {
        let mut args = Vec::new();
        DebitCredit::encode_args(&mut args, seq as u32, 3, 0, 5);
        bytes.clear();
        encode_call(&mut bytes, seq, DEBIT_CREDIT.0, None, &args);
        client.send(&bytes);
        // A 2-safe reply leaves only once the backup acknowledged the batch: the link is up,
        // authenticated both ways.
        match client.next_frame() {
            Some(Frame::Reply(reply)) => {
                assert_eq!((reply.seq, reply.status), (seq, ReplyStatus::Committed))
            }
            other => panic!("call {seq}: {other:?}"),
        }
    }
    let lsn = primary.status().expect("the primary role answers").lsn;
    let deadline = Instant::now() + READ_TIMEOUT;
    while lsn_applied(&backup) < lsn {
        assert!(
            Instant::now() < deadline,
            "the backup applies what it acked"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    for reason in ["no_proof", "bad_proof", "bad_mac", "not_loopback"] {
        assert_eq!(refused(backup.metrics(), reason), 0, "{reason}");
    }
}

#[test]
fn a_stranger_without_the_secret_is_refused_at_the_handshake_and_counted() {
    let nowhere = "127.0.0.1:9".parse().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let backup = start_backup(listener, nowhere, Some(SECRET));
    let metrics = backup.metrics();
    let lsn_start = lsn_received(&backup);

    // A stranger that sends a well-formed batch right after its Hello: the node challenges
    // it, takes the batch for no proof and closes, having decoded nothing of it.
    let mut stranger = Conn::open(address);
    let mut bytes = Vec::new();
    encode_hello(&mut bytes, &primary_hello());
    bytes.extend_from_slice(&stranger_batch());
    stranger.send(&bytes);
    assert!(
        matches!(stranger.next_frame(), Some(Frame::Auth(_))),
        "a challenge first"
    );
    stranger.refused("peer_secret");
    assert_eq!(refused(metrics, "no_proof"), 1);

    // A peer with another secret: its proof does not check.
    let wrong = ClusterSecret::new(b"some other secret of 32 bytes..").unwrap();
    let mut impostor = Conn::open(address);
    bytes.clear();
    encode_hello(&mut bytes, &primary_hello());
    impostor.send(&bytes);
    let Some(Frame::Auth(challenge)) = impostor.next_frame() else {
        panic!("a challenge")
    };
    let connecting = Connecting::new(&wrong, &primary_hello(), [4; NONCE_LEN]);
    let (proof, _) = connecting.answer(&challenge).unwrap();
    bytes.clear();
    encode_auth(&mut bytes, &proof);
    bytes.extend_from_slice(&stranger_batch());
    impostor.send(&bytes);
    impostor.refused("peer_secret differs");
    assert_eq!(refused(metrics, "bad_proof"), 1);

    // A peer that knows the secret, then sends a frame whose tag is not the link's (a frame
    // injected into its stream by someone else): the link is cut at that frame.
    let secret = ClusterSecret::new(SECRET.as_bytes()).unwrap();
    let mut member = Conn::open(address);
    bytes.clear();
    encode_hello(&mut bytes, &primary_hello());
    member.send(&bytes);
    let Some(Frame::Auth(challenge)) = member.next_frame() else {
        panic!("a challenge")
    };
    let connecting = Connecting::new(&secret, &primary_hello(), [5; NONCE_LEN]);
    let (proof, waiting) = connecting.answer(&challenge).unwrap();
    bytes.clear();
    encode_auth(&mut bytes, &proof);
    member.send(&bytes);
    let Some(Frame::Auth(confirm)) = member.next_frame() else {
        panic!("a confirmation")
    };
    let (_sealer, opener) = waiting
        .confirm(&confirm)
        .expect("the node knows the secret too");
    member.buffer.authenticate(opener);
    // The backup takes the member for its primary: it asks for a link in a sealed frame.
    member.asked_for_a_link();
    let mut forged = stranger_batch();
    forged.extend_from_slice(&[0; tandem_wire::FRAME_TAG_LEN]);
    member.send(&forged);
    let deadline = Instant::now() + READ_TIMEOUT;
    while refused(metrics, "bad_mac") == 0 {
        assert!(Instant::now() < deadline, "the forged frame is counted");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(
        lsn_received(&backup),
        lsn_start,
        "nothing a stranger sent was taken"
    );
}

/// A peer's handshake that waits for its proof waits in the native port's gate, not on a
/// thread of its own: strangers challenged that never answer add no thread, and a peer that
/// knows the secret is confirmed meanwhile.
#[test]
fn peers_silent_after_the_challenge_hold_no_thread() {
    const SILENT: usize = 128;
    let nowhere = "127.0.0.1:9".parse().unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let _backup = start_backup(listener, nowhere, Some(SECRET));
    let before = common::threads_now();
    let mut hello = Vec::new();
    encode_hello(&mut hello, &primary_hello());
    let silent: Vec<Conn> = (0..SILENT)
        .map(|_| {
            let mut conn = Conn::open(address);
            conn.send(&hello);
            assert!(
                matches!(conn.next_frame(), Some(Frame::Auth(_))),
                "a challenge"
            );
            conn
        })
        .collect();
    let grown = common::threads_now().saturating_sub(before);
    // Other tests of this binary start nodes alongside; a thread per handshake would be
    // 128 more.
    assert!(
        grown < SILENT / 4,
        "{grown} more threads with {} handshakes waiting for a proof",
        silent.len()
    );
    let secret = ClusterSecret::new(SECRET.as_bytes()).unwrap();
    let mut member = Conn::open(address);
    member.send(&hello);
    let Some(Frame::Auth(challenge)) = member.next_frame() else {
        panic!("a challenge")
    };
    let (proof, waiting) = Connecting::new(&secret, &primary_hello(), [6; NONCE_LEN])
        .answer(&challenge)
        .unwrap();
    let mut bytes = Vec::new();
    encode_auth(&mut bytes, &proof);
    member.send(&bytes);
    let Some(Frame::Auth(confirm)) = member.next_frame() else {
        panic!("a confirmation")
    };
    waiting
        .confirm(&confirm)
        .expect("the node knows the secret");
}

#[test]
fn without_a_secret_peer_links_come_from_loopback_only() {
    let Some(outward) = outward_address() else {
        eprintln!("skipped: this machine has no address but loopback to connect from");
        return;
    };
    let nowhere = "127.0.0.1:9".parse().unwrap();
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let address = listener.local_addr().unwrap();
    let backup = start_backup(listener, nowhere, None);
    let mut remote = Conn::open(SocketAddr::new(outward, address.port()));
    let mut bytes = Vec::new();
    encode_hello(&mut bytes, &primary_hello());
    remote.send(&bytes);
    remote.refused("loopback only");
    assert_eq!(refused(backup.metrics(), "not_loopback"), 1);
    let mut local = Conn::open(SocketAddr::from(([127, 0, 0, 1], address.port())));
    local.send(&bytes);
    // Taken: the backup asks the peer it took for its primary for a link.
    local.asked_for_a_link();
}
