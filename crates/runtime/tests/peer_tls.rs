//! Peer links under TLS (`[tls] peers = true`), over real TCP on loopback, with a CA and
//! node certificates made here: a primary and a backup of a fixed view replicate 2-safe
//! through a relay that records and can alter what passes, which shows TLS records on the
//! wire (no frame in the clear) and a link cut at an altered record; a peer that shows
//! another node's certificate, one from another CA, or none (a node without TLS) is refused
//! at the handshake, nothing it sent is applied, and each refusal is counted in `/metrics`.

use crate::common;

use common::{model, refused};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{NodeConfig, PeerConfig, Role, TlsTable};
use tandem_wire::{
    Frame, FrameBuffer, Hello, MAX_FRAME_LEN_DEFAULT, PeerKind, ReplyStatus, encode_call,
    encode_hello,
};
use tandem_workloads::debit_credit::{DEBIT_CREDIT, DebitCredit};

const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A CA and the certificates it signed, as files in a directory of their own.
struct Pki {
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
}

impl Pki {
    fn new(name: &str) -> Pki {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "tandem-peer-tls-{}-{}-{name}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} CA"));
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let cert = params.self_signed(&key).unwrap();
        std::fs::write(dir.join("ca.pem"), cert.pem()).unwrap();
        Pki {
            dir,
            issuer: Issuer::new(params, key),
        }
    }

    fn ca(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    /// A certificate for node `id` (`node-ID`, as `tandem up` makes them): its files.
    fn node(&self, id: u32) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(vec![format!("node-{id}"), "localhost".into()]).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, format!("tandem node {id}"));
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let cert_path = self.dir.join(format!("node{id}-cert.pem"));
        let key_path = self.dir.join(format!("node{id}-key.pem"));
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    fn table(&self, id: u32) -> TlsTable {
        let (cert, key) = self.node(id);
        TlsTable {
            cert,
            key,
            resp: false,
            peers: true,
            native: false,
            ca: Some(self.ca()),
        }
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn config(id: u32, listen: SocketAddr, peer: PeerConfig, tls: Option<TlsTable>) -> NodeConfig {
    common::pair_config(id, listen, peer, |config| config.tls = tls)
}

/// A backup (node 2) following node 1 at `primary`, on `listener`.
fn start_backup(listener: TcpListener, primary: SocketAddr, tls: TlsTable) -> RunningNode {
    let peer = PeerConfig {
        node_id: 1,
        address: primary,
        role: Some(Role::Primary),
        resp: None,
    };
    let config = config(2, listener.local_addr().unwrap(), peer, Some(tls));
    common::start(&config, listener, None, model(&config))
}

/// The primary (node 1) of the backup at `backup`, on a loopback port: the node and its
/// address.
fn start_primary(backup: SocketAddr, tls: TlsTable) -> (RunningNode, SocketAddr) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().unwrap();
    let peer = PeerConfig {
        node_id: 2,
        address: backup,
        role: Some(Role::Backup),
        resp: None,
    };
    let config = config(1, address, peer, Some(tls));
    (
        common::start(&config, listener, None, model(&config)),
        address,
    )
}

/// The last LSN the backup `node` received, as its status says.
fn lsn_received(node: &RunningNode) -> u64 {
    node.status().expect("the backup role answers").lsn
}

fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + READ_TIMEOUT;
    while !done() {
        assert!(Instant::now() < deadline, "{what}");
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Relays one connection at a time from `listener` to `to`, keeping what went towards `to`;
/// while `alter` is set, it flips a bit of the next chunk it passes on after the first
/// 2,000 bytes.
struct Relay {
    sent: Arc<Mutex<Vec<u8>>>,
    alter: Arc<AtomicBool>,
}

impl Relay {
    fn start(listener: TcpListener, to: SocketAddr) -> Relay {
        let sent = Arc::new(Mutex::new(Vec::new()));
        let alter = Arc::new(AtomicBool::new(false));
        let (kept, flip) = (Arc::clone(&sent), Arc::clone(&alter));
        std::thread::spawn(move || {
            for incoming in listener.incoming() {
                let Ok(mut from) = incoming else { return };
                let Ok(mut onward) = TcpStream::connect(to) else {
                    continue;
                };
                let mut back = onward.try_clone().unwrap();
                let mut from_back = from.try_clone().unwrap();
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut back, &mut from_back);
                });
                let mut chunk = vec![0; 64 << 10];
                let mut passed = 0;
                loop {
                    let n = match from.read(&mut chunk) {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if passed > 2_000 && flip.swap(false, Ordering::AcqRel) {
                        chunk[n - 1] ^= 0x40;
                    }
                    passed += n;
                    kept.lock().unwrap().extend_from_slice(&chunk[..n]);
                    if onward.write_all(&chunk[..n]).is_err() {
                        break;
                    }
                }
                let _ = onward.shutdown(std::net::Shutdown::Both);
            }
        });
        Relay { sent, alter }
    }
}

/// A client connection to the primary's native port.
struct Client {
    stream: TcpStream,
    buffer: FrameBuffer,
    seq: u64,
}

impl Client {
    fn open(address: SocketAddr) -> Client {
        let mut stream = TcpStream::connect(address).unwrap();
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut bytes = Vec::new();
        encode_hello(&mut bytes, &Hello::new(PeerKind::Client, 9, 0));
        stream.write_all(&bytes).unwrap();
        let mut client = Client {
            stream,
            buffer: FrameBuffer::new(MAX_FRAME_LEN_DEFAULT),
            seq: 0,
        };
        assert_eq!(client.next(), "welcome");
        client
    }

    fn next(&mut self) -> String {
        loop {
            match self.buffer.next_frame().expect("well-formed frames") {
                Some(Frame::Welcome(_)) => return "welcome".into(),
                Some(Frame::Reply(reply)) => {
                    assert_eq!(reply.seq, self.seq);
                    return format!("{:?}", reply.status);
                }
                Some(other) => return format!("{other:?}"),
                None => {}
            }
            let n = self
                .stream
                .read(self.buffer.spare())
                .expect("a reply in time");
            assert!(n > 0, "the primary closed the connection");
            self.buffer.filled(n);
        }
    }

    /// Moves 5 from one account to another, 2-safe: the reply leaves once the backup acked.
    fn call(&mut self) -> String {
        self.seq += 1;
        let mut args = Vec::new();
        DebitCredit::encode_args(&mut args, self.seq as u32, 3, 0, 5);
        let mut bytes = Vec::new();
        encode_call(&mut bytes, self.seq, DEBIT_CREDIT.0, None, &args);
        self.stream.write_all(&bytes).unwrap();
        self.next()
    }
}

#[test]
fn a_pair_over_tls_replicates_in_tls_records_and_a_record_altered_cuts_the_link() {
    let pki = Pki::new("cluster");
    let backup_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let relay_address = relay_listener.local_addr().unwrap();
    let relay = Relay::start(relay_listener, backup_listener.local_addr().unwrap());
    let (primary, primary_address) = start_primary(relay_address, pki.table(1));
    let backup = start_backup(backup_listener, primary_address, pki.table(2));
    let metrics = backup.metrics();
    let mut client = Client::open(primary_address);
    for _ in 0..20 {
        assert_eq!(client.call(), format!("{:?}", ReplyStatus::Committed));
    }
    let lsn = primary.status().expect("the primary role answers").lsn;
    wait_for("the backup applies what it acked", || {
        backup
            .status()
            .is_some_and(|status| status.lsn_applied >= lsn)
    });

    // What the primary sent: its Hello in the clear (node 1 dials the connection that
    // carries everything between the two), then TLS records only (a handshake, then
    // application data), whose lengths account for every byte. (The backup's StartTls went
    // the other way.)
    let sent = relay.sent.lock().unwrap().clone();
    let mut hello = Vec::new();
    encode_hello(&mut hello, &Hello::new(PeerKind::Cluster, 1, 0));
    assert!(sent.starts_with(&hello), "a Hello first");
    let mut at = hello.len();
    let mut kinds = Vec::new();
    while at < sent.len() {
        let header = &sent[at..at + 5];
        // The ClientHello's record says TLS 1.0 for old middleboxes (RFC 8446 5.1).
        let version = if at == hello.len() { [3, 1] } else { [3, 3] };
        assert_eq!(header[1..3], version, "a TLS record at byte {at}");
        kinds.push(header[0]);
        at += 5 + usize::from(u16::from_be_bytes([header[3], header[4]]));
    }
    assert_eq!(at, sent.len(), "nothing but records");
    assert_eq!(kinds[0], 22, "the handshake starts");
    assert!(
        kinds.iter().filter(|&&kind| kind == 23).count() > 20,
        "batches and heartbeats travel in application data records: {kinds:?}"
    );
    assert_eq!(refused(metrics, "bad_mac"), 0);

    // A bit flipped in a record on its way: the backup cuts the link at that record and
    // counts it; the primary links again, and the calls go on.
    relay.alter.store(true, Ordering::Release);
    wait_for("the altered record is counted", || {
        refused(metrics, "bad_mac") == 1
    });
    for _ in 0..5 {
        assert_eq!(client.call(), format!("{:?}", ReplyStatus::Committed));
    }
    for reason in ["no_tls", "bad_certificate", "wrong_node"] {
        assert_eq!(refused(metrics, reason), 0, "{reason}");
    }
}

/// A TLS client with `cert` and `key` that sends a peer's `Hello` claiming node 1 (as node 1
/// dials its backup), runs the handshake and sends the `Hello` again under TLS: whether the
/// backup let the handshake finish and then spoke to it under TLS.
fn claim_node_1(address: SocketAddr, ca: &Path, cert: &Path, key: &Path) -> bool {
    let mut roots = rustls::RootCertStore::empty();
    for ca in CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(ca.unwrap()).unwrap();
    }
    let certs = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .with_root_certificates(roots)
        .with_client_auth_cert(certs, key)
        .unwrap();
    let name = ServerName::try_from("node-2").unwrap();
    let mut session = rustls::ClientConnection::new(Arc::new(config), name).unwrap();
    let mut stream = TcpStream::connect(address).unwrap();
    stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut hello = Vec::new();
    encode_hello(&mut hello, &Hello::new(PeerKind::Cluster, 1, 0));
    stream.write_all(&hello).unwrap();
    // The node announces TLS (an `Auth` frame, step StartTls) and waits for the handshake.
    let mut announced = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
    loop {
        match announced.next_frame().expect("a frame") {
            Some(Frame::Auth(auth)) => {
                assert_eq!(auth.step, tandem_wire::AuthStep::StartTls);
                break;
            }
            Some(other) => panic!("expected StartTls, got {other:?}"),
            None => {
                let n = stream.read(announced.spare()).unwrap();
                assert!(n > 0, "the node closed before announcing TLS");
                announced.filled(n);
            }
        }
    }
    if session.complete_io(&mut stream).is_err() {
        return false;
    }
    // TLS 1.3 clients finish first: the backup's verdict on this client's certificate comes
    // after, as an alert or the end of the stream, or as frames under TLS (the backup,
    // taking this client for its primary, asks it for a link).
    let _ = session.writer().write_all(&hello);
    if session.complete_io(&mut stream).is_err() {
        return false;
    }
    loop {
        let mut buf = [0; 64];
        match session.reader().read(&mut buf) {
            Ok(n) => return n > 0,
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {}
            Err(_) => return false,
        }
        match session.read_tls(&mut stream) {
            Ok(0) | Err(_) => return false,
            Ok(_) => {}
        }
        if session.process_new_packets().is_err() {
            return false;
        }
    }
}

#[test]
fn peers_with_another_nodes_certificate_another_ca_or_no_tls_are_refused_and_counted() {
    let pki = Pki::new("cluster");
    let other = Pki::new("other");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let backup = start_backup(listener, "127.0.0.1:9".parse().unwrap(), pki.table(2));
    let metrics = backup.metrics();
    let lsn_start = lsn_received(&backup);

    // Node 3's certificate, from the cluster's CA, on a link that claims node 1.
    let (cert, key) = pki.node(3);
    assert!(!claim_node_1(address, &pki.ca(), &cert, &key));
    wait_for("the wrong node is counted", || {
        refused(metrics, "wrong_node") == 1
    });

    // A certificate for node 1 that another CA signed.
    let (cert, key) = other.node(1);
    assert!(!claim_node_1(address, &pki.ca(), &cert, &key));
    wait_for("the foreign certificate is counted", || {
        refused(metrics, "bad_certificate") == 1
    });

    // A node without TLS: frames after its Hello.
    let mut plain = TcpStream::connect(address).unwrap();
    plain.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
    let mut bytes = Vec::new();
    encode_hello(&mut bytes, &Hello::new(PeerKind::Cluster, 1, 0));
    encode_hello(&mut bytes, &Hello::new(PeerKind::Cluster, 1, 0));
    plain.write_all(&bytes).unwrap();
    let mut rest = Vec::new();
    let _ = plain.read_to_end(&mut rest);
    wait_for("the plain peer is counted", || {
        refused(metrics, "no_tls") == 1
    });

    // Node 1's own certificate passes (the same client code), and nothing any of the others
    // sent was taken.
    let (cert, key) = pki.node(1);
    assert!(claim_node_1(address, &pki.ca(), &cert, &key));
    assert_eq!(lsn_received(&backup), lsn_start);
    assert_eq!(refused(metrics, "wrong_node"), 1);
    assert_eq!(refused(metrics, "bad_certificate"), 1);
}

/// A TLS handshake waits for the connector's records in the native port's gate, not on a
/// thread of its own: peers that said their `Hello`, were told TLS follows, and then send
/// half a record or nothing add no thread, and a node with the cluster's certificate links
/// meanwhile.
#[test]
fn peers_silent_in_their_tls_handshakes_hold_no_thread() {
    const SILENT: usize = 128;
    let pki = Pki::new("silent");
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let _backup = start_backup(listener, "127.0.0.1:9".parse().unwrap(), pki.table(2));
    let before = common::threads_now();
    let mut hello = Vec::new();
    encode_hello(&mut hello, &Hello::new(PeerKind::Cluster, 1, 0));
    let silent: Vec<TcpStream> = (0..SILENT)
        .map(|index| {
            let mut stream = TcpStream::connect(address).unwrap();
            stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
            stream.write_all(&hello).unwrap();
            let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
            loop {
                match buffer.next_frame().expect("well-formed frames") {
                    Some(Frame::Auth(auth)) => {
                        assert_eq!(auth.step, tandem_wire::AuthStep::StartTls);
                        break;
                    }
                    Some(other) => panic!("expected StartTls, got {other:?}"),
                    None => {}
                }
                let n = stream.read(buffer.spare()).expect("StartTls in time");
                assert!(n > 0, "the node closed the connection");
                buffer.filled(n);
            }
            if index % 2 == 0 {
                // The header of a handshake record announcing 200 bytes, and no more.
                stream.write_all(&[22, 3, 1, 0, 200]).unwrap();
            }
            stream
        })
        .collect();
    let grown = common::threads_now().saturating_sub(before);
    // Other tests of this binary start nodes alongside; a thread per handshake would be
    // 128 more.
    assert!(
        grown < SILENT / 4,
        "{grown} more threads with {} TLS handshakes waiting",
        silent.len()
    );
    let (cert, key) = pki.node(1);
    assert!(claim_node_1(address, &pki.ca(), &cert, &key));
}
