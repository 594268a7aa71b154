//! TLS on peer links: a TLS 1.3 handshake (rustls, ring provider) in which both nodes show a
//! certificate the cluster's CA signed for their node id (`node-ID` among its DNS names),
//! after which each direction's traffic key is taken from the session and the link's writer
//! and reader seal and open TLS records apart (`tandem_wire`'s records module): one rustls
//! session cannot serve a reader thread and a writer thread without a lock between them,
//! which a reader blocked in `read` would hold.
//!
//! The handshake reads the socket one record at a time, so that no byte sent after it (the
//! connector's first frames) is swallowed by the session before its keys are taken. Servers
//! issue no session tickets: nothing but application data follows the handshake.
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
}

impl TlsRefusal {
    /// The `reason` label of `tandem_peers_refused_total` for this refusal.
    pub(crate) fn reason(&self) -> &'static str {
        match self {
            TlsRefusal::NotTls => "no_tls",
            TlsRefusal::Handshake(_) => "bad_certificate",
            TlsRefusal::WrongNode { .. } => "wrong_node",
            TlsRefusal::Io(_) => "no_proof",
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

    /// The connecting side's handshake with node `peer`, whose certificate must name it.
    pub(crate) fn connect(
        &self,
        stream: &mut TcpStream,
        peer: NodeId,
    ) -> Result<LinkKeys, TlsRefusal> {
        let name = ServerName::try_from(peer_name(peer)).expect("node-ID is a DNS name");
        let connection =
            ClientConnection::new(Arc::clone(&self.client), name).map_err(TlsRefusal::Handshake)?;
        let (keys, _) = handshake(stream, Connection::Client(connection), Vec::new())?;
        Ok(keys)
    }

    /// The accepting side's handshake with a connector whose `Hello` claimed node `claimed`
    /// (`unread`: bytes read with the `Hello`, the start of the handshake). Returns the keys
    /// and the bytes read past the handshake, which are records.
    pub(crate) fn accept(
        &self,
        stream: &mut TcpStream,
        claimed: u64,
        unread: Vec<u8>,
    ) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
        let connection =
            ServerConnection::new(Arc::clone(&self.server)).map_err(TlsRefusal::Handshake)?;
        let name = NodeId::try_from(claimed)
            .ok()
            .map(peer_name)
            .ok_or(TlsRefusal::WrongNode { claimed })?;
        let check = move |connection: &Connection| {
            let cert = connection
                .peer_certificates()
                .and_then(|certs| certs.first())
                .ok_or(TlsRefusal::WrongNode { claimed })?;
            names_node(cert, &name)
                .then_some(())
                .ok_or(TlsRefusal::WrongNode { claimed })
        };
        handshake_checked(stream, Connection::Server(connection), unread, check)
    }
}

/// The native port's handshake with a client, after its `Hello` (`unread`: bytes read with
/// it): the node shows its certificate, the client none (it proves a password). Returns the
/// keys and the bytes read past the handshake, which are records.
pub(crate) fn accept_client(
    config: &Arc<ServerConfig>,
    stream: &mut TcpStream,
    unread: Vec<u8>,
) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
    let connection = ServerConnection::new(Arc::clone(config)).map_err(TlsRefusal::Handshake)?;
    handshake(stream, Connection::Server(connection), unread)
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

fn handshake(
    stream: &mut TcpStream,
    connection: Connection,
    unread: Vec<u8>,
) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
    handshake_checked(stream, connection, unread, |_| Ok(()))
}

/// Runs `connection`'s handshake on `stream` (after the bytes `unread`), checks the session
/// with `check` once it is done, and takes its keys.
fn handshake_checked(
    stream: &mut TcpStream,
    mut connection: Connection,
    unread: Vec<u8>,
    check: impl FnOnce(&Connection) -> Result<(), TlsRefusal>,
) -> Result<(LinkKeys, Vec<u8>), TlsRefusal> {
    let timeout = stream.read_timeout()?;
    stream.set_read_timeout(Some(HANDSHAKE_TIMEOUT))?;
    let mut reader = RecordReader {
        stream: &mut *stream,
        unread,
        at: 0,
        record: Vec::new(),
        given: 0,
        first: true,
        not_tls: false,
    };
    let result = (|| {
        loop {
            while connection.wants_write() {
                connection.write_tls(reader.stream)?;
            }
            reader.stream.flush()?;
            if !connection.is_handshaking() {
                return Ok(());
            }
            if connection.read_tls(&mut reader)? == 0 {
                return Err(TlsRefusal::Io(io::ErrorKind::UnexpectedEof.into()));
            }
            if let Err(err) = connection.process_new_packets() {
                // Tell the peer why (an alert), then give up.
                while connection.wants_write() {
                    if connection.write_tls(reader.stream).is_err() {
                        break;
                    }
                }
                return Err(TlsRefusal::Handshake(err));
            }
        }
    })();
    if let Err(err) = result {
        return Err(if reader.not_tls {
            TlsRefusal::NotTls
        } else {
            err
        });
    }
    let rest = reader.unread[reader.at..].to_vec();
    stream.set_read_timeout(timeout)?;
    check(&connection)?;
    let secrets = connection
        .dangerous_extract_secrets()
        .map_err(TlsRefusal::Handshake)?;
    Ok((
        LinkKeys {
            send: traffic_key(secrets.tx),
            receive: traffic_key(secrets.rx),
        },
        rest,
    ))
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

/// Gives rustls the handshake one whole record at a time (first from the bytes read with
/// the `Hello`, then from the socket), never a byte of the record after the one it asks for.
struct RecordReader<'a> {
    stream: &'a mut TcpStream,
    unread: Vec<u8>,
    at: usize,
    record: Vec<u8>,
    given: usize,
    /// No record read yet: if the first is not TLS, the peer does not speak it.
    first: bool,
    /// The first record was not a TLS handshake's.
    not_tls: bool,
}

impl RecordReader<'_> {
    fn read_exact(&mut self, out: &mut [u8]) -> io::Result<()> {
        let from_unread = (self.unread.len() - self.at).min(out.len());
        out[..from_unread].copy_from_slice(&self.unread[self.at..self.at + from_unread]);
        self.at += from_unread;
        self.stream.read_exact(&mut out[from_unread..])
    }
}

impl Read for RecordReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        if self.given == self.record.len() {
            let mut header = [0; 5];
            self.read_exact(&mut header)?;
            self.record.clear();
            self.record.extend_from_slice(&header);
            self.given = 0;
            let first = std::mem::take(&mut self.first);
            if first && header[0] != 22 {
                self.not_tls = true;
                return Err(io::Error::new(io::ErrorKind::InvalidData, "not TLS"));
            }
            let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
            if len > tandem_wire::RECORD_PLAINTEXT_MAX + 2048 {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    "record too long",
                ));
            }
            self.record.resize(5 + len, 0);
            let mut body = std::mem::take(&mut self.record);
            let result = self.read_exact(&mut body[5..]);
            self.record = body;
            result?;
        }
        let n = out.len().min(self.record.len() - self.given);
        out[..n].copy_from_slice(&self.record[self.given..self.given + n]);
        self.given += n;
        Ok(n)
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
                outcomes.push(acceptor.accept(&mut stream, 1, Vec::new()).is_ok());
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
