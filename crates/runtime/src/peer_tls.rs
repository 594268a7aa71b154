//! TLS on peer links: a TLS 1.3 handshake (rustls, ring provider) in which both nodes show a
//! certificate the cluster's CA signed for their node id (`node-ID` among its DNS names),
//! after which each direction's traffic key is taken from the session and the link's writer
//! and reader seal and open TLS records apart (`tandem_wire`'s records module): one rustls
//! session cannot serve a reader thread and a writer thread without a lock between them,
//! which a reader blocked in `read` would hold.
//!
//! A handshake is fed the bytes that come ([`TlsHandshake`], sans I/O), and gives the session
//! one whole record at a time, never a byte past the handshake: what the connector sends
//! after it (its first frames) comes back as the handshake's `rest`, not swallowed by the
//! session before its keys are taken. The native port's gate drives an acceptor's handshake
//! that way, on its own thread, as bytes come; a connector drives its own on its link's
//! thread, reading exactly one record at a time ([`handshake_blocking`]). Servers issue no
//! session tickets: nothing but application data follows the handshake.
//!
//! The connector names the node it meant to reach and refuses a certificate for another.
//! The acceptor checks the connector's certificate names the node its `Hello` claims, and
//! the connector repeats that `Hello` as its first frame under TLS: a `Hello` altered on the
//! way is refused.

use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::server::WebPkiClientVerifier;
use rustls::{
    ClientConfig, ClientConnection, Connection, ConnectionTrafficSecrets, RootCertStore,
    ServerConfig, ServerConnection,
};
use tandem_replication::NodeId;
use tandem_wire::{RecordCipher, TrafficKey};

use crate::StartError;
use crate::config::TlsTable;
use crate::peer_auth::HANDSHAKE_TIMEOUT;

/// The DNS name a node's certificate carries for peers: `node-ID`.
pub fn peer_name(node: NodeId) -> String {
    format!("node-{node}")
}

/// A node's TLS settings for peer links: its certificate and key, and the cluster's CA.
pub(crate) struct PeerTls {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
}

impl std::fmt::Debug for PeerTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PeerTls").finish_non_exhaustive()
    }
}

/// Why a TLS handshake on a peer link failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum TlsRefusal {
    /// The peer sent something other than TLS (a node without `[tls] peers`).
    #[error("the peer does not speak TLS on peer links: set [tls] peers = true on every node")]
    NotTls,
    /// The handshake failed: a certificate not signed by the cluster's CA, none at all, or a
    /// certificate for another node where the connector checks it.
    #[error("TLS handshake failed: {0}")]
    Handshake(rustls::Error),
    /// The connector's certificate is the cluster's, but for another node than it claims.
    #[error("the peer's certificate does not name node {claimed} (its Hello's)")]
    WrongNode { claimed: u64 },
    #[error("I/O error during the TLS handshake: {0}")]
    Io(#[from] io::Error),
    /// The connector's first frame under TLS is not the `Hello` it sent before the
    /// handshake (altered on the way, say to another client's id).
    #[error("the Hello under TLS differs from the one before it")]
    HelloAltered,
}

impl TlsRefusal {
    /// The `reason` label of `tandem_peers_refused_total` for this refusal.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            TlsRefusal::NotTls => "no_tls",
            TlsRefusal::Handshake(_) => "bad_certificate",
            TlsRefusal::WrongNode { .. } => "wrong_node",
            TlsRefusal::Io(_) => "no_proof",
            TlsRefusal::HelloAltered => "bad_mac",
        }
    }
}

/// The two directions' keys of a link after its handshake.
pub(crate) struct LinkKeys {
    pub(crate) send: TrafficKey,
    pub(crate) receive: TrafficKey,
}

impl PeerTls {
    /// Reads the `[tls]` table's certificate, key and CA.
    pub(crate) fn new(table: &TlsTable) -> Result<PeerTls, StartError> {
        let ca_path = table.ca.as_ref().ok_or_else(|| StartError::Tls {
            field: "ca",
            reason: "[tls] peers = true needs the cluster's CA certificate in tls.ca".into(),
        })?;
        let certs = crate::tls::read_certs(&table.cert, "cert")?;
        let key = crate::tls::read_key(&table.key)?;
        let mut roots = RootCertStore::empty();
        for ca in crate::tls::read_certs(ca_path, "ca")? {
            roots.add(ca).map_err(|err| StartError::Tls {
                field: "ca",
                reason: format!("{}: not a CA certificate: {err}", ca_path.display()),
            })?;
        }
        let roots = Arc::new(roots);
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls13 = &[&rustls::version::TLS13];
        let client_verifier =
            WebPkiClientVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|err| tls_error("ca", err))?;
        let mut server = ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_protocol_versions(tls13)
            .map_err(|err| tls_error("cert", err))?
            .with_client_cert_verifier(client_verifier)
            .with_single_cert(certs.clone(), key.clone_key())
            .map_err(|err| tls_error("key", format!("does not go with tls.cert: {err}")))?;
        server.enable_secret_extraction = true;
        server.send_tls13_tickets = 0;
        let server_verifier =
            WebPkiServerVerifier::builder_with_provider(Arc::clone(&roots), Arc::clone(&provider))
                .build()
                .map_err(|err| tls_error("ca", err))?;
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(tls13)
            .map_err(|err| tls_error("cert", err))?
            .with_webpki_verifier(server_verifier)
            .with_client_auth_cert(certs, key)
            .map_err(|err| tls_error("key", format!("does not go with tls.cert: {err}")))?;
        client.enable_secret_extraction = true;
        client.resumption = rustls::client::Resumption::disabled();
        Ok(PeerTls {
            client: Arc::new(client),
            server: Arc::new(server),
        })
    }

    /// The connecting side's handshake with node `peer`, whose certificate must name it:
    /// blocks on `stream`.
    pub(crate) fn connect(
        &self,
        stream: &mut TcpStream,
        peer: NodeId,
    ) -> Result<LinkKeys, TlsRefusal> {
        let name = ServerName::try_from(peer_name(peer)).expect("node-ID is a DNS name");
        let connection =
            ClientConnection::new(Arc::clone(&self.client), name).map_err(TlsRefusal::Handshake)?;
        let handshake = TlsHandshake::new(Connection::Client(connection), None);
        let (keys, _) = handshake_blocking(stream, handshake, Vec::new())?;
        Ok(keys)
    }

    /// The accepting side's handshake with a connector whose `Hello` claimed node `claimed`:
    /// its certificate must name that node.
    pub(crate) fn accepting(&self, claimed: u64) -> Result<TlsHandshake, TlsRefusal> {
        let connection =
            ServerConnection::new(Arc::clone(&self.server)).map_err(TlsRefusal::Handshake)?;
        Ok(TlsHandshake::new(
            Connection::Server(connection),
            Some(claimed),
        ))
    }
}

/// The native port's handshake with a client, after its `Hello`: the node shows its
/// certificate, the client none (it proves a password).
pub(crate) fn accepting_client(config: &Arc<ServerConfig>) -> Result<TlsHandshake, TlsRefusal> {
    let connection = ServerConnection::new(Arc::clone(config)).map_err(TlsRefusal::Handshake)?;
    Ok(TlsHandshake::new(Connection::Server(connection), None))
}

/// Whether `cert` (which the handshake verified against the cluster's CA) names `name`.
fn names_node(cert: &CertificateDer<'_>, name: &str) -> bool {
    let Ok(cert) = webpki::EndEntityCert::try_from(cert) else {
        return false;
    };
    let Ok(name) = ServerName::try_from(name) else {
        return false;
    };
    cert.verify_is_valid_for_subject_name(&name).is_ok()
}

/// A TLS handshake fed the bytes that come, sans I/O ([`TlsHandshake::feed`]); once it is
/// done, [`TlsHandshake::finish`] checks the session and takes its keys.
pub(crate) struct TlsHandshake {
    connection: Connection,
    /// Bytes received and not yet given to the session: the start of a record not yet
    /// whole, or, once the handshake is done, what came after it.
    received: Vec<u8>,
    /// No record seen yet: if the first is not a handshake's, the peer does not speak TLS.
    first: bool,
    /// On an acceptor of peer links, the node the connector's `Hello` claimed: its
    /// certificate must name it.
    claimed: Option<u64>,
}

impl std::fmt::Debug for TlsHandshake {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsHandshake")
            .field("received", &self.received.len())
            .field("claimed", &self.claimed)
            .finish_non_exhaustive()
    }
}

/// A TLS record's header: its type, version and length.
const RECORD_HEADER_LEN: usize = 5;

/// A handshake record's content type.
const CONTENT_HANDSHAKE: u8 = 22;

impl TlsHandshake {
    fn new(connection: Connection, claimed: Option<u64>) -> TlsHandshake {
        TlsHandshake {
            connection,
            received: Vec::new(),
            first: true,
            claimed,
        }
    }

    /// Takes `bytes` that came from the peer, gives the session every whole record among
    /// what came while it still handshakes, and appends what it sends to `out` (on an
    /// error too: an alert that tells the peer why). `true` once the handshake is done.
    pub(crate) fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>) -> Result<bool, TlsRefusal> {
        self.received.extend_from_slice(bytes);
        loop {
            while self.connection.wants_write() {
                self.connection.write_tls(out)?;
            }
            if !self.connection.is_handshaking() {
                return Ok(true);
            }
            let Some(len) = self.whole_record()? else {
                return Ok(false);
            };
            let record: Vec<u8> = self.received.drain(..len).collect();
            let mut record = &record[..];
            while !record.is_empty() {
                if self.connection.read_tls(&mut record)? == 0 {
                    let refused = "the TLS session took none of a whole record";
                    let refused = io::Error::new(io::ErrorKind::InvalidData, refused);
                    return Err(TlsRefusal::Io(refused));
                }
            }
            if let Err(err) = self.connection.process_new_packets() {
                while self.connection.wants_write() {
                    if self.connection.write_tls(out).is_err() {
                        break;
                    }
                }
                return Err(TlsRefusal::Handshake(err));
            }
        }
    }

    /// The length of the whole record at the front of what came, if it is whole; an error
    /// if the first record is not TLS, or one announces more than a record holds.
    fn whole_record(&mut self) -> Result<Option<usize>, TlsRefusal> {
        let Some(header) = self.received.first_chunk::<RECORD_HEADER_LEN>() else {
            return Ok(None);
        };
        if std::mem::take(&mut self.first) && header[0] != CONTENT_HANDSHAKE {
            return Err(TlsRefusal::NotTls);
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len > tandem_wire::RECORD_PLAINTEXT_MAX + 2048 {
            let too_long = io::Error::new(io::ErrorKind::InvalidData, "record too long");
            return Err(TlsRefusal::Io(too_long));
        }
        let whole = RECORD_HEADER_LEN + len;
        Ok((self.received.len() >= whole).then_some(whole))
    }

    /// How many more bytes the record at the front needs to be whole (its header's, if its
    /// header is not in yet).
    fn record_missing(&self) -> usize {
        match self.received.first_chunk::<RECORD_HEADER_LEN>() {
            None => RECORD_HEADER_LEN - self.received.len(),
            Some(header) => {
                let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
                (RECORD_HEADER_LEN + len).saturating_sub(self.received.len())
            }
        }
    }

    /// The done handshake's keys, once the session checks out (a peer's certificate names
    /// the node its `Hello` claimed), and the bytes that came after it, which are records.
    pub(crate) fn finish(self) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
        assert!(!self.connection.is_handshaking(), "the handshake is done");
        if let Some(claimed) = self.claimed {
            let name = NodeId::try_from(claimed)
                .ok()
                .map(peer_name)
                .ok_or(TlsRefusal::WrongNode { claimed })?;
            let named = self
                .connection
                .peer_certificates()
                .and_then(|certs| certs.first())
                .is_some_and(|cert| names_node(cert, &name));
            if !named {
                return Err(TlsRefusal::WrongNode { claimed });
            }
        }
        let secrets = self
            .connection
            .dangerous_extract_secrets()
            .map_err(TlsRefusal::Handshake)?;
        let keys = LinkKeys {
            send: traffic_key(secrets.tx),
            receive: traffic_key(secrets.rx),
        };
        Ok((keys, self.received))
    }
}

/// Runs `handshake` on a blocking `stream` (after the bytes `unread`), reading exactly the
/// records it needs, under [`HANDSHAKE_TIMEOUT`] per read; returns its keys and the bytes
/// past it.
fn handshake_blocking(
    stream: &mut TcpStream,
    mut handshake: TlsHandshake,
    unread: Vec<u8>,
) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
    let timeout = stream.read_timeout()?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut came = unread;
    let mut out = Vec::new();
    loop {
        let fed = handshake.feed(&came, &mut out);
        stream.write_all(&out)?;
        stream.flush()?;
        out.clear();
        if fed? {
            break;
        }
        came.resize(handshake.record_missing(), 0);
        stream.read_exact(&mut came)?;
    }
    stream.set_read_timeout(timeout)?;
    handshake.finish()
}

fn traffic_key((seq, secrets): (u64, ConnectionTrafficSecrets)) -> TrafficKey {
    let (cipher, key, iv) = match secrets {
        ConnectionTrafficSecrets::Aes128Gcm { key, iv } => (RecordCipher::Aes128Gcm, key, iv),
        ConnectionTrafficSecrets::Aes256Gcm { key, iv } => (RecordCipher::Aes256Gcm, key, iv),
        ConnectionTrafficSecrets::Chacha20Poly1305 { key, iv } => {
            (RecordCipher::Chacha20Poly1305, key, iv)
        }
        _ => unreachable!("TLS 1.3 with the ring provider agrees on one of three AEADs"),
    };
    TrafficKey {
        cipher,
        key: key.as_ref().to_vec(),
        iv: iv.as_ref().try_into().expect("TLS 1.3 IVs are 12 bytes"),
        seq,
    }
}

fn tls_error(field: &'static str, reason: impl ToString) -> StartError {
    StartError::Tls {
        field,
        reason: reason.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;

    use rcgen::{BasicConstraints, CertificateParams, IsCa, Issuer, KeyPair};

    use super::*;

    /// `[tls]` tables for nodes `ids`, signed by one CA made in a directory of their own.
    fn tables(name: &str, ids: &[u32]) -> Vec<TlsTable> {
        let dir = std::env::temp_dir().join(format!("tandem-tls-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        std::fs::write(dir.join("ca.pem"), ca.self_signed(&ca_key).unwrap().pem()).unwrap();
        let issuer = Issuer::new(ca, ca_key);
        ids.iter()
            .map(|&id| {
                let key = KeyPair::generate().unwrap();
                let params = CertificateParams::new(vec![peer_name(id)]).unwrap();
                let cert = params.signed_by(&key, &issuer).unwrap();
                let table = TlsTable {
                    cert: dir.join(format!("{id}-cert.pem")),
                    key: dir.join(format!("{id}-key.pem")),
                    resp: false,
                    peers: true,
                    native: false,
                    ca: Some(dir.join("ca.pem")),
                };
                std::fs::write(&table.cert, cert.pem()).unwrap();
                std::fs::write(&table.key, key.serialize_pem()).unwrap();
                table
            })
            .collect()
    }

    #[test]
    fn a_connector_refuses_an_acceptor_whose_certificate_names_another_node() {
        let tables = tables("connector", &[1, 3]);
        let connector = PeerTls::new(&tables[0]).unwrap();
        let acceptor = PeerTls::new(&tables[1]).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let mut outcomes = Vec::new();
            for _ in 0..2 {
                let (mut stream, _) = listener.accept().unwrap();
                let handshake = acceptor.accepting(1).unwrap();
                outcomes.push(handshake_blocking(&mut stream, handshake, Vec::new()).is_ok());
            }
            outcomes
        });
        // Node 1 means to reach node 2, and node 3 answers: refused at the connector.
        let mut stream = TcpStream::connect(address).unwrap();
        let err = connector.connect(&mut stream, 2).err().expect("refused");
        assert!(matches!(err, TlsRefusal::Handshake(_)), "{err}");
        drop(stream);
        // Meaning node 3, the same certificate passes, and both ends agree on the keys.
        let mut stream = TcpStream::connect(address).unwrap();
        let keys = connector.connect(&mut stream, 3).expect("node 3 is node 3");
        assert_eq!(keys.send.seq, 0);
        assert_eq!(server.join().unwrap(), vec![false, true]);
    }
}
