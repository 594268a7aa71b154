//! The stub's configuration and its validation.

use std::net::SocketAddr;
use std::time::Duration;

use tandem_replication::ReadConsistency;

/// Default [`ClientConfig::attempt_timeout`]: well above a healthy primary's reply latency
/// (tens to hundreds of microseconds on a LAN), well below a failover (< 50 ms), so a hung
/// primary costs one short wait before the stub looks elsewhere.
pub const ATTEMPT_TIMEOUT_DEFAULT: Duration = Duration::from_millis(20);

/// Default [`ClientConfig::deadline`]: long enough to ride out several failovers.
pub const DEADLINE_DEFAULT: Duration = Duration::from_secs(5);

/// Default [`ClientConfig::retry_backoff`]: short next to a failover, long enough that a round
/// of refusals does not turn into a connection storm on the nodes.
pub const RETRY_BACKOFF_DEFAULT: Duration = Duration::from_micros(500);

/// The longest duration any field accepts: past it a deadline is a hang, not a bound.
pub const DURATION_MAX: Duration = Duration::from_secs(24 * 60 * 60);

/// Where the cluster is and how long the stub waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientConfig {
    /// Every node of the cluster, in any order: the stub finds the group's primary among them.
    pub nodes: Vec<SocketAddr>,
    /// The group whose procedures this client calls.
    pub group: u32,
    /// This client's id in the primary's dedup table, ≥ 1 (0 means "no dedup"). It must be
    /// unique among live clients, and a new `Client` must not reuse the id of an earlier one
    /// while the group may still remember that one's last seq: seqs restart at 1 per `Client`.
    pub client_id: u64,
    /// How long one attempt waits: for a TCP connect, for a `Welcome`, and for the reply to a
    /// sent call. Doubled for each further attempt of the same call that timed out, so a
    /// primary that is merely slow is not abandoned over and over.
    pub attempt_timeout: Duration,
    /// How long one call may take in all: past it the call fails with
    /// [`CallError::Deadline`](crate::CallError::Deadline).
    pub deadline: Duration,
    /// The first pause after a round over all nodes found no primary, and after a failed
    /// attempt on the primary itself (busy, closed, malformed). It doubles while failures
    /// repeat within one call, up to 16 times this value.
    pub retry_backoff: Duration,
    /// What [`Client::read`](crate::Client::read) promises when a backup serves it:
    /// linearizable by default (the backup asks the primary what was acknowledged, one
    /// round trip), or session (read-your-writes and monotonic reads) or bounded staleness
    /// for less latency.
    pub read_consistency: ReadConsistency,
    /// Who the stub is to a node that asks clients for a password (one with `requirepass`):
    /// the node challenges, and the stub answers with a proof made from the password (which
    /// never travels). `None`: no password to give.
    pub credentials: Option<Credentials>,
    /// TLS to the nodes' native ports (nodes with `[tls] native = true`): after its `Hello`
    /// the stub runs a TLS 1.3 handshake and checks the node's certificate against the
    /// cluster's CA, for the node's IP address. `None`: plain TCP.
    pub tls: Option<ClientTls>,
}

/// The stub's TLS settings: the CA the nodes' certificates must chain to.
#[derive(Clone)]
pub struct ClientTls {
    pub(crate) config: std::sync::Arc<rustls::ClientConfig>,
}

impl ClientTls {
    /// Trusts the CA certificates of the PEM file at `path` (`tandem up --tls` writes the
    /// cluster's to `DIR/tls/ca.pem`).
    pub fn from_ca_file(path: &std::path::Path) -> Result<ClientTls, ConfigError> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let bad = |reason: String| ConfigError::Tls {
            path: path.to_path_buf(),
            reason,
        };
        let mut roots = rustls::RootCertStore::empty();
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|err| bad(err.to_string()))?
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| bad(format!("not PEM: {err}")))?;
        if certs.is_empty() {
            return Err(bad("holds no PEM certificate".into()));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|err| bad(format!("not a CA certificate: {err}")))?;
        }
        Ok(ClientTls::with_roots(roots))
    }

    /// Trusts the CAs of `roots`.
    pub fn with_roots(roots: rustls::RootCertStore) -> ClientTls {
        let provider = std::sync::Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[&rustls::version::TLS13])
            .expect("the ring provider speaks TLS 1.3")
            .with_root_certificates(roots)
            .with_no_client_auth();
        ClientTls {
            config: std::sync::Arc::new(config),
        }
    }
}

impl std::fmt::Debug for ClientTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientTls").finish_non_exhaustive()
    }
}

impl PartialEq for ClientTls {
    fn eq(&self, other: &ClientTls) -> bool {
        std::sync::Arc::ptr_eq(&self.config, &other.config)
    }
}

impl Eq for ClientTls {}

/// A user and its password, as a node's `requirepass` (user `default`) or `[[users]]` table
/// knows them. Its `Debug` shows the user only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    pub user: String,
    pub password: Vec<u8>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("user", &self.user)
            .finish_non_exhaustive()
    }
}

impl ClientConfig {
    /// A configuration with the default durations.
    pub fn new(nodes: Vec<SocketAddr>, group: u32, client_id: u64) -> ClientConfig {
        ClientConfig {
            nodes,
            group,
            client_id,
            attempt_timeout: ATTEMPT_TIMEOUT_DEFAULT,
            deadline: DEADLINE_DEFAULT,
            retry_backoff: RETRY_BACKOFF_DEFAULT,
            read_consistency: ReadConsistency::Linearizable,
            credentials: None,
            tls: None,
        }
    }

    /// Checks every field; the error names the field and the fix.
    pub fn validate(&self) -> Result<(), ConfigError> {
        validate_nodes(&self.nodes)?;
        if self.client_id == 0 {
            return Err(ConfigError::ClientIdZero);
        }
        for (field, value, default) in [
            (
                "attempt_timeout",
                self.attempt_timeout,
                ATTEMPT_TIMEOUT_DEFAULT,
            ),
            ("deadline", self.deadline, DEADLINE_DEFAULT),
            ("retry_backoff", self.retry_backoff, RETRY_BACKOFF_DEFAULT),
        ] {
            if value.is_zero() {
                return Err(ConfigError::ZeroDuration { field, default });
            }
            if value > DURATION_MAX {
                return Err(ConfigError::TooLong { field, value });
            }
        }
        check_credentials(self.credentials.as_ref())
    }
}

/// Checks a list of nodes: not empty, each node once.
pub(crate) fn validate_nodes(nodes: &[SocketAddr]) -> Result<(), ConfigError> {
    if nodes.is_empty() {
        return Err(ConfigError::NoNodes);
    }
    for (i, node) in nodes.iter().enumerate() {
        if nodes[..i].contains(node) {
            return Err(ConfigError::DuplicateNode(*node));
        }
    }
    Ok(())
}

/// Whether `credentials` can be given: a name the wire carries and a password.
pub(crate) fn check_credentials(credentials: Option<&Credentials>) -> Result<(), ConfigError> {
    match credentials {
        Some(c)
            if c.user.is_empty()
                || c.user.len() > tandem_wire::CLIENT_USER_LEN_MAX
                || c.password.is_empty() =>
        {
            Err(ConfigError::BadCredentials)
        }
        _ => Ok(()),
    }
}

/// Why a [`ClientConfig`] was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    #[error("nodes is empty: list the address of every node of the cluster")]
    NoNodes,
    #[error("nodes lists {0} twice: list each node once")]
    DuplicateNode(SocketAddr),
    #[error("client_id is 0, which is reserved for calls without dedup: use a unique id ≥ 1")]
    ClientIdZero,
    #[error("{field} is zero: give it a positive duration (the default is {default:?})")]
    ZeroDuration {
        field: &'static str,
        default: Duration,
    },
    #[error("{field} is {value:?}, longer than the {DURATION_MAX:?} allowed")]
    TooLong {
        field: &'static str,
        value: Duration,
    },
    #[error(
        "credentials: a user name of 1 to {} bytes and a password of at least 1 byte",
        tandem_wire::CLIENT_USER_LEN_MAX
    )]
    BadCredentials,
    #[error("tls: the CA file {}: {reason}", path.display())]
    Tls {
        path: std::path::PathBuf,
        reason: String,
    },
}
