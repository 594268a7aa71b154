//! TLS on the RESP port (rustls with the `ring` provider): the node's certificate and key
//! from the `[tls]` table's PEM files, and a connection that reads and writes plaintext over
//! a non-blocking socket for the RESP event loop.
//!
//! The event loop's contract holds through TLS: `read` and `write` give `WouldBlock` when
//! the socket has nothing more to give or take, and `Ok(0)` from `read` is the end of the
//! client's stream (a `close_notify`, or the socket's end). Bytes TLS still has to send
//! (a handshake's, or replies the socket did not take) go out with
//! [`TlsStream::flush_tls`], which the loop calls whenever it writes, and a connection is
//! not closed while any are pending.

use std::io::{self, ErrorKind, Read, Write};
use std::path::Path;
use std::sync::Arc;

use mio::net::TcpStream;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection};

use crate::StartError;
use crate::config::TlsTable;

/// The RESP port's TLS settings from the `[tls]` table: its certificate chain and key.
pub fn server_config(table: &TlsTable) -> Result<Arc<ServerConfig>, StartError> {
    let certs = read_certs(&table.cert, "cert")?;
    let key = read_key(&table.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|err| tls_error("cert", err))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| tls_error("key", format!("does not go with tls.cert: {err}")))?;
    Ok(Arc::new(config))
}

/// The certificates of the PEM file at `path` (the `[tls]` table's `field`): at least one.
pub(crate) fn read_certs(
    path: &Path,
    field: &'static str,
) -> Result<Vec<CertificateDer<'static>>, StartError> {
    let certs = read_pem(path, field, |bytes| {
        CertificateDer::pem_slice_iter(bytes).collect::<Result<Vec<_>, _>>()
    })?;
    if certs.is_empty() {
        return Err(StartError::Tls {
            field,
            reason: format!("{} holds no PEM certificate", path.display()),
        });
    }
    Ok(certs)
}

/// The private key of the PEM file at `path` (the `[tls]` table's `key`).
pub(crate) fn read_key(path: &Path) -> Result<PrivateKeyDer<'static>, StartError> {
    read_pem(path, "key", PrivateKeyDer::from_pem_slice)
}

/// The native client port's TLS settings (`[tls] native = true`): TLS 1.3 only, the node's
/// certificate, no client certificate (clients prove a password), no session tickets, and
/// the session's keys taken after the handshake (the connection's reader and writer threads
/// then seal and open records apart: `tandem_wire::RecordSealer`).
pub fn native_server_config(table: &TlsTable) -> Result<Arc<ServerConfig>, StartError> {
    let certs = read_certs(&table.cert, "cert")?;
    let key = read_key(&table.key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ServerConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .map_err(|err| tls_error("cert", err))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|err| tls_error("key", format!("does not go with tls.cert: {err}")))?;
    config.enable_secret_extraction = true;
    config.send_tls13_tickets = 0;
    Ok(Arc::new(config))
}

fn tls_error(field: &'static str, reason: impl ToString) -> StartError {
    StartError::Tls {
        field,
        reason: reason.to_string(),
    }
}

fn read_pem<T, E: std::fmt::Display>(
    path: &Path,
    field: &'static str,
    parse: impl FnOnce(&[u8]) -> Result<T, E>,
) -> Result<T, StartError> {
    let bytes = std::fs::read(path)
        .map_err(|err| tls_error(field, format!("cannot read {}: {err}", path.display())))?;
    parse(&bytes).map_err(|err| tls_error(field, format!("{}: not PEM: {err}", path.display())))
}

/// A client's TLS session over the event loop's non-blocking socket.
#[derive(Debug)]
pub struct TlsStream {
    session: ServerConnection,
}

impl TlsStream {
    pub fn new(config: &Arc<ServerConfig>) -> io::Result<TlsStream> {
        let session = ServerConnection::new(Arc::clone(config)).map_err(io::Error::other)?;
        Ok(TlsStream { session })
    }

    /// Plaintext the client sent, as a non-blocking socket's `read` gives it.
    pub fn read(&mut self, socket: &mut TcpStream, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.session.reader().read(buf) {
                Ok(n) => return Ok(n),
                Err(err) if err.kind() == ErrorKind::WouldBlock => {}
                // The socket ended without a close_notify: the client is gone all the same.
                Err(err) if err.kind() == ErrorKind::UnexpectedEof => return Ok(0),
                Err(err) => return Err(err),
            }
            match self.session.read_tls(socket) {
                Ok(0) => return Ok(0),
                Ok(_) => {
                    let processed = self.session.process_new_packets();
                    // An alert saying why goes out before the error closes the connection.
                    let _ = self.flush_tls(socket);
                    processed.map_err(|err| io::Error::new(ErrorKind::InvalidData, err))?;
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Takes plaintext to send; `WouldBlock` when TLS holds all the socket will take now.
    pub fn write(&mut self, socket: &mut TcpStream, buf: &[u8]) -> io::Result<usize> {
        self.flush_tls(socket)?;
        let taken = self.session.writer().write(buf)?;
        self.flush_tls(socket)?;
        if taken == 0 && !buf.is_empty() {
            return Err(ErrorKind::WouldBlock.into());
        }
        Ok(taken)
    }

    /// Sends what TLS holds for the socket, as much as it takes; `Ok` also when it would
    /// block (the socket's next writable event comes back here).
    pub fn flush_tls(&mut self, socket: &mut TcpStream) -> io::Result<()> {
        while self.session.wants_write() {
            match self.session.write_tls(socket) {
                Ok(_) => {}
                Err(err) if err.kind() == ErrorKind::WouldBlock => return Ok(()),
                Err(err) if err.kind() == ErrorKind::Interrupted => {}
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Whether TLS holds bytes the socket has not taken yet.
    pub fn pending(&self) -> bool {
        self.session.wants_write()
    }
}
