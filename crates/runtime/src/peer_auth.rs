//! Peer links' authentication on blocking TCP: the handshake of `tandem_wire`'s auth module
//! (this side draws the nonces from the operating system and moves the bytes), and the
//! writer that seals every frame after it.
//!
//! With a `peer_secret`, every peer link proves at its start that both ends know it, and
//! every frame after that carries a MAC the receiver checks before decoding anything of it:
//! a stranger's frame is never decoded past the `Hello`. Without one, links are plain and a
//! node accepts them from loopback addresses only (protected mode for peers: a cluster on
//! several machines needs the secret). A refusal is counted in
//! `tandem_peers_refused_total{reason}` and told to the peer in an `Error` frame that names
//! the setting, never the secret.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::net::{IpAddr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

use ring::rand::{SecureRandom, SystemRandom};
use tandem_replication::NodeId;
use tandem_wire::{
    Accepting, AuthError, AuthStep, ClusterSecret, Connecting, ErrorCode, Frame, FrameBuffer,
    FrameSealer, Hello, NONCE_LEN, PeerKind, RecordError, RecordOpener, RecordSealer, encode_auth,
    encode_error, encode_hello,
};

use crate::metrics::Metrics;
use crate::net::{self, ConnError};
use crate::peer_tls::{PeerTls, TlsHandshake, TlsRefusal};

/// How long either side of a handshake waits for the other's next step.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(2);

/// A node's side of peer authentication: TLS with the cluster's CA, or its secret, if it
/// has either.
#[derive(Clone, Debug)]
pub(crate) struct PeerAuth {
    /// Shared: a key schedule is a few hundred bytes, and every role's handle holds one.
    secret: Option<Arc<ClusterSecret>>,
    /// With `[tls] peers = true`: TLS on every peer link, instead of the secret.
    tls: Option<Arc<PeerTls>>,
    metrics: Arc<Metrics>,
}

/// What writes one side of a peer link: frames as they are, sealed with a MAC, or in TLS
/// records.
#[derive(Debug)]
pub(crate) enum Sealer {
    Plain,
    Sealed(Box<FrameSealer>),
    Tls(Box<TlsWriter>),
}

/// Where the accepting side stands after a peer's `Hello` ([`PeerAuth::challenge`]).
pub(crate) enum PeerChallenge {
    /// Nothing to prove: a plain link from loopback.
    Proved(Sealer),
    /// The challenge is sent: the peer's proof is awaited.
    Sent(Box<Accepting>),
}

/// The writer's half of a TLS link: its direction's key, and room for the records.
#[derive(Debug)]
pub struct TlsWriter {
    sealer: RecordSealer,
    records: Vec<u8>,
}

impl TlsWriter {
    fn new(keys: &crate::peer_tls::LinkKeys) -> Result<TlsWriter, ConnError> {
        Ok(TlsWriter {
            sealer: RecordSealer::new(&keys.send).map_err(tls_keys)?,
            records: Vec::new(),
        })
    }

    /// Seals `plain` into TLS records appended to `out` (a connection on the I/O loop writes
    /// them when its socket takes them).
    pub(crate) fn seal(&mut self, plain: &[u8], out: &mut Vec<u8>) -> io::Result<()> {
        self.sealer.seal(&[plain], out).map_err(io::Error::other)
    }

    fn write(&mut self, writer: &mut impl Write, parts: &[&[u8]]) -> io::Result<()> {
        self.records.clear();
        self.sealer
            .seal(parts, &mut self.records)
            .map_err(io::Error::other)?;
        writer.write_all(&self.records)
    }
}

impl PeerAuth {
    pub(crate) fn new(
        config: &crate::config::NodeConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<PeerAuth, crate::StartError> {
        let secret = config.peer_secret.as_ref().map(|secret| {
            Arc::new(
                ClusterSecret::new(secret.0.as_bytes()).expect("the config checked its length"),
            )
        });
        let tls = match &config.tls {
            Some(table) if table.peers => Some(Arc::new(PeerTls::new(table)?)),
            _ => None,
        };
        Ok(PeerAuth {
            secret,
            tls,
            metrics: Arc::clone(metrics),
        })
    }

    /// Whether a `Hello` of this kind opens a peer link (which must authenticate).
    pub(crate) fn is_peer(hello: &Hello) -> bool {
        matches!(hello.peer, PeerKind::Replica | PeerKind::Cluster)
    }

    /// The connecting side: sends `hello` and, with a secret, runs the handshake. On success
    /// every later frame read through `buffer` is checked, and the returned sealer seals
    /// every frame written.
    /// Under TLS, `peer` is the node meant: its certificate must name it.
    pub(crate) fn connect(
        &self,
        stream: &mut TcpStream,
        buffer: &mut FrameBuffer,
        hello: &Hello,
        peer: NodeId,
    ) -> Result<Sealer, ConnError> {
        let mut bytes = Vec::new();
        encode_hello(&mut bytes, hello);
        net::write_all(stream, &bytes)?;
        if let Some(tls) = &self.tls {
            // The acceptor announces TLS before anything of the handshake is sent: nothing
            // it sends after that is read here but by the handshake.
            net::read_one(stream, buffer, HANDSHAKE_TIMEOUT, |frame| match frame {
                Frame::Auth(auth) if auth.step == AuthStep::StartTls => Ok(()),
                Frame::Auth(_) => Err(ConnError::Protocol(
                    "the peer asks for the peer_secret, not TLS: set [tls] peers alike on every \
                     node of the cluster"
                        .into(),
                )),
                Frame::Error(err) => Err(ConnError::Protocol(format!("refused: {}", err.message))),
                _ => Err(ConnError::Protocol(
                    "the peer does not run TLS on peer links: set [tls] peers = true on every \
                     node of the cluster"
                        .into(),
                )),
            })?;
            if buffer.buffered() > 0 {
                // Nothing may come between the announcement and the handshake.
                return Err(ConnError::Protocol(
                    "the peer sent bytes after StartTls before the TLS handshake".into(),
                ));
            }
            let keys = tls
                .connect(stream, peer)
                .map_err(|err| ConnError::Protocol(err.to_string()))?;
            buffer.decrypt(RecordOpener::new(&keys.receive).map_err(tls_keys)?, &[]);
            let mut writer = TlsWriter::new(&keys)?;
            // The Hello again, under TLS: the acceptor checks it is the one it read.
            writer.write(stream, &[&bytes])?;
            return Ok(Sealer::Tls(Box::new(writer)));
        }
        let Some(secret) = &self.secret else {
            return Ok(Sealer::Plain);
        };
        let connecting = Connecting::new(secret, hello, nonce()?);
        let challenge = net::read_one(stream, buffer, HANDSHAKE_TIMEOUT, expect_auth)?;
        if challenge.step == AuthStep::StartTls {
            return Err(ConnError::Protocol(
                "the peer runs TLS on peer links: set [tls] peers = true (and ca) on every node \
                 of the cluster"
                    .into(),
            ));
        }
        let (proof, waiting) = connecting.answer(&challenge).map_err(protocol)?;
        bytes.clear();
        encode_auth(&mut bytes, &proof);
        net::write_all(stream, &bytes)?;
        let confirm = net::read_one(stream, buffer, HANDSHAKE_TIMEOUT, expect_auth)?;
        let (sealer, opener) = waiting.confirm(&confirm).map_err(protocol)?;
        buffer.authenticate(opener);
        Ok(Sealer::Sealed(Box::new(sealer)))
    }

    /// Whether peer links run TLS: the accepting side's handshake is then driven by the
    /// bytes that come ([`Self::start_tls`]); otherwise by the secret's challenge
    /// ([`Self::challenge`], [`Self::check_proof`]).
    pub(crate) fn runs_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The accepting side's TLS handshake with a peer whose `Hello` is `hello`, announced to
    /// it (`Auth` step `StartTls`); its certificate must name the node the `Hello` claims.
    /// The caller feeds it what comes, then checks the `Hello` again under TLS
    /// ([`hello_again`]). On failure the peer was told why, the refusal counted, and the
    /// connection shut.
    pub(crate) fn start_tls(
        &self,
        stream: &mut TcpStream,
        hello: &Hello,
    ) -> Result<TlsHandshake, ConnError> {
        assert!(Self::is_peer(hello), "only peer links authenticate");
        let tls = self.tls.as_ref().expect("peer links run TLS");
        let handshake = tls
            .accepting(hello.id)
            .map_err(|err| self.tls_refused(stream, err))?;
        announce_tls(stream)?;
        Ok(handshake)
    }

    /// Refuses a peer whose TLS handshake (or `Hello` again) failed: counted, logged, told
    /// why if it does not speak TLS (it reads frames), and the connection shut.
    pub(crate) fn tls_refused(&self, stream: &mut TcpStream, err: TlsRefusal) -> ConnError {
        let reason = err.reason();
        self.metrics.peer_refused(reason);
        tracing::warn!(
            peer = %stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
            reason,
            "refused a peer link: {err}"
        );
        if matches!(err, TlsRefusal::NotTls) {
            let mut bytes = Vec::new();
            encode_error(&mut bytes, ErrorCode::Unauthorized, &err.to_string());
            let _ = net::write_all(stream, &bytes);
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        ConnError::Protocol(err.to_string())
    }

    /// The accepting side's first step without TLS, after a peer's `Hello`: without a secret
    /// the link is plain and taken from loopback only; with one, the challenge is sent, and
    /// the peer's proof is awaited ([`Self::check_proof`]). On failure the peer was told why,
    /// the refusal counted, and the connection shut.
    pub(crate) fn challenge(
        &self,
        stream: &mut TcpStream,
        hello: &Hello,
    ) -> Result<PeerChallenge, ConnError> {
        assert!(Self::is_peer(hello), "only peer links authenticate");
        assert!(
            self.tls.is_none(),
            "a TLS link proves itself by its certificate"
        );
        let Some(secret) = &self.secret else {
            let from = stream.peer_addr()?;
            if is_local(from) {
                return Ok(PeerChallenge::Proved(Sealer::Plain));
            }
            return Err(self.refuse(
                stream,
                "not_loopback",
                "this node has no peer_secret, so it takes peer links from loopback only; \
                 set the same peer_secret on every node of the cluster",
            ));
        };
        let accepting = Accepting::new(secret, hello, nonce()?);
        let mut bytes = Vec::new();
        encode_auth(&mut bytes, &accepting.challenge());
        net::write_all(stream, &bytes)?;
        Ok(PeerChallenge::Sent(Box::new(accepting)))
    }

    /// The accepting side's second step: the peer's proof, which `buffer` holds whole (or
    /// the peer ended, or sent something else, or its time ran out: `timed_out`), checked;
    /// on success the confirmation is sent, as for [`connect`](Self::connect); on failure as
    /// for [`Self::challenge`].
    pub(crate) fn check_proof(
        &self,
        stream: &mut TcpStream,
        buffer: &mut FrameBuffer,
        accepting: Accepting,
        timed_out: bool,
    ) -> Result<Sealer, ConnError> {
        let proof = match timed_out {
            true => Err(ConnError::Protocol("timed out waiting for a frame".into())),
            false => net::read_one(stream, buffer, HANDSHAKE_TIMEOUT, expect_auth),
        };
        let proof = match proof {
            Ok(proof) => proof,
            Err(ConnError::Closed | ConnError::Io(_)) => {
                self.metrics.peer_refused("no_proof");
                return Err(ConnError::Closed);
            }
            Err(_) => {
                return Err(self.refuse(
                    stream,
                    "no_proof",
                    "this node asks peers to prove they know the cluster's secret: set the \
                     same peer_secret on every node of the cluster",
                ));
            }
        };
        match accepting.check(&proof) {
            Ok((confirm, sealer, opener)) => {
                let mut bytes = Vec::new();
                encode_auth(&mut bytes, &confirm);
                net::write_all(stream, &bytes)?;
                buffer.authenticate(opener);
                Ok(Sealer::Sealed(Box::new(sealer)))
            }
            Err(AuthError::BadProof) => Err(self.refuse(
                stream,
                "bad_proof",
                "peer authentication failed: the peer_secret differs from this node's",
            )),
            Err(err @ AuthError::WrongStep { .. }) => {
                Err(self.refuse(stream, "no_proof", &err.to_string()))
            }
        }
    }

    /// Counts a link cut for a frame whose MAC did not check (the buffer refused it).
    pub(crate) fn note_forged(&self, err: &ConnError) {
        if matches!(
            err,
            ConnError::Frame(
                tandem_wire::FrameError::BadMac { .. } | tandem_wire::FrameError::Tls(_)
            )
        ) {
            self.metrics.peer_refused("bad_mac");
        }
    }

    fn refuse(&self, stream: &mut TcpStream, reason: &str, message: &str) -> ConnError {
        self.metrics.peer_refused(reason);
        tracing::warn!(
            peer = %stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
            reason,
            "refused a peer link: {message}"
        );
        let mut bytes = Vec::new();
        encode_error(&mut bytes, ErrorCode::Unauthorized, message);
        let _ = net::write_all(stream, &bytes);
        let _ = stream.shutdown(std::net::Shutdown::Both);
        ConnError::Protocol(message.to_owned())
    }
}

impl Sealer {
    /// Writes `frames` (whole frames this node encoded), each sealed if the link is.
    /// `scratch` is reused between calls.
    pub(crate) fn write_frames(
        &mut self,
        writer: &mut impl Write,
        frames: &[u8],
        scratch: &mut Vec<u8>,
    ) -> io::Result<()> {
        match self {
            Sealer::Plain => writer.write_all(frames),
            Sealer::Sealed(sealer) => {
                scratch.clear();
                sealer.seal_frames(frames, scratch);
                writer.write_all(scratch)
            }
            Sealer::Tls(tls) => tls.write(writer, &[frames]),
        }
    }

    /// Writes a batch frame: its `header` and the batch's shared `bytes`, never copied
    /// together.
    pub(crate) fn write_batch(
        &mut self,
        writer: &mut impl Write,
        header: &[u8],
        bytes: &[u8],
    ) -> io::Result<()> {
        if let Sealer::Tls(tls) = self {
            return tls.write(writer, &[header, bytes]);
        }
        writer.write_all(header)?;
        writer.write_all(bytes)?;
        if let Sealer::Sealed(sealer) = self {
            writer.write_all(&sealer.seal_parts(&[header, bytes]))?;
        }
        Ok(())
    }
}

/// The native client port's side of client authentication: with a `requirepass`, every
/// client's `Hello` is answered with a challenge, and the client must prove the password of
/// `default` or of a `[[users]]` user whose rights are every right (the native port runs
/// procedures, which a user's key patterns and read-only rights do not describe: a proxy
/// checks those for its applications, and proves a user with every right itself).
#[derive(Clone)]
pub(crate) struct ClientAuth {
    /// `None`: no password is asked.
    passwords: Option<Arc<ClientPasswords>>,
    /// With `[tls] native = true`: the native port speaks TLS after the `Hello`.
    tls: Option<Arc<rustls::ServerConfig>>,
    metrics: Arc<Metrics>,
}

impl std::fmt::Debug for ClientAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientAuth")
            .field("asks", &self.passwords.is_some())
            .finish_non_exhaustive()
    }
}

impl ClientAuth {
    pub(crate) fn new(
        config: &crate::config::NodeConfig,
        metrics: &Arc<Metrics>,
    ) -> Result<ClientAuth, crate::StartError> {
        let passwords = config.requirepass.as_ref().map(|requirepass| {
            let mut passwords = BTreeMap::new();
            passwords.insert(
                "default".to_owned(),
                (requirepass.0.as_bytes().to_vec(), true),
            );
            for user in &config.users {
                let unrestricted = user.access == crate::config::UserAccess::ReadWrite
                    && user.keys.iter().any(|key| key == "*");
                passwords.insert(
                    user.name.clone(),
                    (user.password.0.as_bytes().to_vec(), unrestricted),
                );
            }
            Arc::new(passwords)
        });
        let tls = match &config.tls {
            Some(table) if table.native => Some(crate::tls::native_server_config(table)?),
            _ => None,
        };
        Ok(ClientAuth {
            passwords,
            tls,
            metrics: Arc::clone(metrics),
        })
    }

    /// Whether the native port runs TLS: a client's handshake then starts with TLS's
    /// ([`Self::start_tls`]), driven by the bytes that come.
    pub(crate) fn runs_tls(&self) -> bool {
        self.tls.is_some()
    }

    /// The native port's TLS handshake with a client after its `Hello`, announced to it
    /// (`Auth` step `StartTls`): the node shows its certificate, the client none (it proves
    /// a password). The caller feeds it what comes, then checks the `Hello` again under TLS
    /// ([`hello_again`]). On failure the client was told why, the refusal counted, and the
    /// connection shut.
    pub(crate) fn start_tls(&self, stream: &mut TcpStream) -> Result<TlsHandshake, ConnError> {
        let config = self.tls.as_ref().expect("the native port runs TLS");
        let handshake = crate::peer_tls::accepting_client(config)
            .map_err(|err| self.tls_refused(stream, err))?;
        announce_tls(stream)?;
        Ok(handshake)
    }

    /// Refuses a client whose TLS handshake (or `Hello` again) failed: counted, told why if
    /// it does not speak TLS (it reads frames), and the connection shut.
    pub(crate) fn tls_refused(&self, stream: &mut TcpStream, err: TlsRefusal) -> ConnError {
        self.metrics.clients_refused.inc();
        tracing::debug!(
            client = %stream.peer_addr().map_or_else(|_| "?".into(), |a| a.to_string()),
            "refused a client: {err}"
        );
        if matches!(err, TlsRefusal::NotTls) {
            let message = "this node's native port speaks TLS: give the client the cluster's CA \
                           (the stub's ClientConfig::tls, or tandem proxy --tls-ca)";
            let mut bytes = Vec::new();
            encode_error(&mut bytes, ErrorCode::Unauthorized, message);
            let _ = net::write_all(stream, &bytes);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            return ConnError::Protocol(message.into());
        }
        let _ = stream.shutdown(std::net::Shutdown::Both);
        ConnError::Protocol(err.to_string())
    }

    /// Asks the client to prove a password, if one is asked (`None`: none is): sends the
    /// challenge, and returns its nonce; the proof is checked by [`Self::check_proof`].
    pub(crate) fn challenge(
        &self,
        stream: &mut TcpStream,
        tls: Option<&mut TlsWriter>,
    ) -> Result<Option<[u8; NONCE_LEN]>, ConnError> {
        if self.passwords.is_none() {
            return Ok(None);
        }
        let challenge = tandem_wire::Auth {
            step: tandem_wire::AuthStep::Challenge,
            nonce: nonce()?,
            proof: [0; tandem_wire::TAG_LEN],
        };
        let mut bytes = Vec::new();
        encode_auth(&mut bytes, &challenge);
        send(stream, tls, &bytes)?;
        Ok(Some(challenge.nonce))
    }

    /// Checks the client's proof of a password against the challenge's `nonce`: `buffer`
    /// holds it whole (or the client ended, or sent something else, or its time ran out:
    /// `timed_out`; a blocking caller's read waits for it). `Ok` once proved; otherwise the
    /// client was told why, the refusal counted, and the connection shut.
    pub(crate) fn check_proof(
        &self,
        stream: &mut TcpStream,
        mut tls: Option<&mut TlsWriter>,
        buffer: &mut FrameBuffer,
        hello: &Hello,
        nonce: &[u8; NONCE_LEN],
        timed_out: bool,
    ) -> Result<(), ConnError> {
        let passwords = self.passwords.as_ref().expect("a password is asked");
        let proof = match timed_out {
            true => Err(ConnError::Protocol("timed out waiting for a frame".into())),
            false => net::read_one(stream, buffer, CLIENT_PROOF_TIMEOUT, |frame| match frame {
                Frame::ClientProof(proof) => Ok(proof),
                _ => Err(ConnError::Protocol("expected a ClientProof".into())),
            }),
        };
        let refused = |stream: &mut TcpStream, tls: Option<&mut TlsWriter>, message: &str| {
            self.metrics.clients_refused.inc();
            let mut bytes = Vec::new();
            encode_error(&mut bytes, ErrorCode::Unauthorized, message);
            let _ = send(stream, tls, &bytes);
            let _ = stream.shutdown(std::net::Shutdown::Both);
            ConnError::Protocol(message.to_owned())
        };
        let proof = match proof {
            Ok(proof) => proof,
            Err(ConnError::Closed | ConnError::Io(_)) => {
                self.metrics.clients_refused.inc();
                return Err(ConnError::Closed);
            }
            Err(_) => {
                return Err(refused(
                    stream,
                    tls.as_deref_mut(),
                    "NOAUTH this node asks clients for a password: give the stub credentials",
                ));
            }
        };
        let known = passwords.get(&proof.user);
        let proved = known.is_some_and(|(password, _)| {
            tandem_wire::check_client_proof(password, hello, nonce, &proof.proof)
        });
        match known {
            Some((_, true)) if proved => Ok(()),
            Some((_, false)) if proved => Err(refused(
                stream,
                tls.as_deref_mut(),
                &format!(
                    "NOPERM user {} has restricted rights, which the native port does not \
                     serve; give the stub (or the proxy) a user with every right",
                    proof.user
                ),
            )),
            _ => {
                // A wrong password or an unknown user: what a guess looks like.
                self.metrics
                    .auth_failed(crate::metrics::AuthPort::Native, stream.peer_addr().ok());
                Err(refused(stream, tls, tandem_redis::session::WRONGPASS))
            }
        }
    }
}

/// After an acceptor's TLS handshake (`keys`, and `rest`: the bytes that came after it):
/// from now on the connection's frames come in records. The connector's first frame under
/// TLS must be the `Hello` it sent before the handshake: the caller awaits it whole, then
/// checks it ([`hello_again`]).
pub(crate) fn decrypt_after(
    buffer: &mut FrameBuffer,
    keys: &crate::peer_tls::LinkKeys,
    rest: &[u8],
) -> Result<TlsWriter, ConnError> {
    buffer.decrypt(RecordOpener::new(&keys.receive).map_err(tls_keys)?, rest);
    TlsWriter::new(keys)
}

/// Whether the connector's first frame under TLS, which `buffer` holds whole (or the
/// connector ended, or sent something else, or its time ran out: `timed_out`), is `hello`.
pub(crate) fn hello_again(
    stream: &mut TcpStream,
    buffer: &mut FrameBuffer,
    hello: &Hello,
    timed_out: bool,
) -> Result<(), TlsRefusal> {
    if timed_out {
        return Err(TlsRefusal::Io(io::ErrorKind::TimedOut.into()));
    }
    let again = net::read_one(stream, buffer, HANDSHAKE_TIMEOUT, |frame| match frame {
        Frame::Hello(again) => Ok(again),
        _ => Err(ConnError::Protocol(
            "expected the Hello again under TLS".into(),
        )),
    });
    match again {
        Ok(again) if again == *hello => Ok(()),
        Err(ConnError::Closed | ConnError::Io(_)) => {
            Err(TlsRefusal::Io(io::ErrorKind::UnexpectedEof.into()))
        }
        _ => Err(TlsRefusal::HelloAltered),
    }
}

/// Tells the connector this side runs TLS from now on (`Auth` step `StartTls`).
fn announce_tls(stream: &mut TcpStream) -> Result<(), ConnError> {
    let mut bytes = Vec::new();
    encode_auth(&mut bytes, &tandem_wire::Auth::start_tls());
    net::write_all(stream, &bytes)
}

/// Writes `bytes` (whole frames) to a client: in TLS records if the connection has them.
pub(crate) fn send(
    stream: &mut TcpStream,
    tls: Option<&mut TlsWriter>,
    bytes: &[u8],
) -> Result<(), ConnError> {
    match tls {
        Some(tls) => Ok(tls.write(stream, &[bytes])?),
        None => net::write_all(stream, bytes),
    }
}

/// Each user's password, and whether its rights are every right, by name (`default` for the
/// `requirepass`).
type ClientPasswords = BTreeMap<String, (Vec<u8>, bool)>;

/// How long a node waits for a client's proof.
pub(crate) const CLIENT_PROOF_TIMEOUT: Duration = Duration::from_secs(10);

/// A peer that may link without the secret: one on this machine.
fn is_local(from: SocketAddr) -> bool {
    match from.ip() {
        IpAddr::V4(ip) => ip.is_loopback(),
        IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|v4| v4.is_loopback())
        }
    }
}

fn nonce() -> Result<[u8; NONCE_LEN], ConnError> {
    let mut nonce = [0; NONCE_LEN];
    SystemRandom::new()
        .fill(&mut nonce)
        .map_err(|_| ConnError::Protocol("the system's random source failed".into()))?;
    Ok(nonce)
}

fn expect_auth(frame: Frame<'_>) -> Result<tandem_wire::Auth, ConnError> {
    match frame {
        Frame::Auth(auth) => Ok(auth),
        Frame::Error(err) => Err(ConnError::Protocol(format!("refused: {}", err.message))),
        _ => Err(ConnError::Protocol(
            "the peer does not authenticate: set the same peer_secret on every node of the \
             cluster"
                .into(),
        )),
    }
}

fn tls_keys(err: RecordError) -> ConnError {
    ConnError::Protocol(format!("TLS session keys: {err}"))
}

fn protocol(err: AuthError) -> ConnError {
    ConnError::Protocol(err.to_string())
}
