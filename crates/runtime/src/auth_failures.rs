//! Failed authentications: counted per port in `/metrics`, and logged at warn at most once
//! per [`LOG_INTERVAL`] per port.
//!
//! A wrong password is what a guessing attack looks like, so each one is counted
//! (`tandem_auth_failures_total{port}`), but a log line per guess would let the attacker
//! fill the disk: a port logs its first failure, then at most one line every ten seconds,
//! which says how many failures it did not log since its last line and which client failed
//! last ([`crate::throttle::Throttle`] decides, from the instants it is handed).

use std::net::SocketAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;

use crate::throttle::Throttle;

/// The shortest time between two log lines about failed authentications on one port.
pub const LOG_INTERVAL: Duration = Duration::from_secs(10);

/// Where a client failed to authenticate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthPort {
    /// The Redis port: `AUTH` or `HELLO … AUTH` with a wrong password or an unknown user.
    Resp,
    /// The native (stub) port: a `ClientProof` of a wrong password or an unknown user.
    Native,
    /// The HTTP endpoint: `Authorization: Bearer` with a wrong password on `/checksum`.
    Http,
}

impl AuthPort {
    /// Every port, in the order of [`AuthPort::label`]'s values.
    pub const ALL: [AuthPort; 3] = [AuthPort::Resp, AuthPort::Native, AuthPort::Http];

    /// The value of the `port` label.
    pub fn label(self) -> &'static str {
        match self {
            AuthPort::Resp => "resp",
            AuthPort::Native => "native",
            AuthPort::Http => "http",
        }
    }

    fn index(self) -> usize {
        match self {
            AuthPort::Resp => 0,
            AuthPort::Native => 1,
            AuthPort::Http => 2,
        }
    }
}

/// The `port` label of `tandem_auth_failures_total`: one of [`AuthPort::label`]'s values.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct PortLabel {
    pub port: String,
}

/// The counter of failed authentications by port, and each port's log throttle.
#[derive(Debug)]
pub struct AuthFailures {
    /// `tandem_auth_failures_total{port}`.
    pub total: Family<PortLabel, Counter>,
    logs: Mutex<[Throttle; 3]>,
}

impl Default for AuthFailures {
    fn default() -> AuthFailures {
        AuthFailures {
            total: Family::default(),
            logs: Mutex::new([const { Throttle::new(LOG_INTERVAL) }; 3]),
        }
    }
}

impl AuthFailures {
    /// Counts a failed authentication on `port` by `client` (if its address is known) and
    /// logs it at warn, unless a line about `port` was written less than [`LOG_INTERVAL`]
    /// ago. The password tried is never logged.
    pub fn failed(&self, port: AuthPort, client: Option<SocketAddr>) {
        self.counter(port).inc();
        let pass = self.logs.lock().expect("not poisoned")[port.index()].pass(Instant::now());
        if let Some(unlogged) = pass {
            tracing::warn!("{}", line_text(port, client, unlogged));
        }
    }

    /// The counter of `port`.
    pub fn counter(&self, port: AuthPort) -> Counter {
        self.total
            .get_or_create(&PortLabel {
                port: port.label().to_owned(),
            })
            .clone()
    }
}

/// What the log says of a failure on `port` by `client`, `unlogged` failures on that port
/// having been counted without a line since its last one.
fn line_text(port: AuthPort, client: Option<SocketAddr>, unlogged: u64) -> String {
    let client = client.map_or_else(|| "an unknown address".to_owned(), |a| a.to_string());
    let what = match port {
        AuthPort::Resp => "the Redis port (a wrong password or an unknown user in AUTH or HELLO)",
        AuthPort::Native => "the native port (a stub's proof of a wrong password or user)",
        AuthPort::Http => "the HTTP port (a wrong password in Authorization: Bearer)",
    };
    let since = match unlogged {
        0 => String::new(),
        1 => "; 1 more failed there since the last such line, not logged".to_owned(),
        n => format!("; {n} more failed there since the last such line, not logged"),
    };
    format!(
        "failed authentication on {what} from {client}{since} (one line every {} s at most \
         per port; tandem_auth_failures_total counts every failure)",
        LOG_INTERVAL.as_secs()
    )
}

/// Whether a reply the RESP port's session wrote refuses a password (`-WRONGPASS`, in
/// RESP2 and RESP3 alike): what the RESP front end counts as a failed authentication.
pub fn refuses_password(reply: &[u8]) -> bool {
    reply.starts_with(b"-WRONGPASS")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_failure_is_counted_by_port_and_the_line_names_the_client() {
        let failures = AuthFailures::default();
        let client: SocketAddr = "10.0.0.9:4432".parse().unwrap();
        for _ in 0..3 {
            failures.failed(AuthPort::Native, Some(client));
        }
        failures.failed(AuthPort::Resp, None);
        assert_eq!(failures.counter(AuthPort::Native).get(), 3);
        assert_eq!(failures.counter(AuthPort::Resp).get(), 1);
        assert_eq!(failures.counter(AuthPort::Http).get(), 0);
        let text = line_text(AuthPort::Native, Some(client), 7);
        assert!(text.contains("10.0.0.9:4432"), "{text}");
        assert!(text.contains("7 more failed"), "{text}");
        assert!(text.contains("native port"), "{text}");
        let first = line_text(AuthPort::Resp, None, 0);
        assert!(!first.contains("more failed"), "{first}");
        // Each port has a throttle of its own: the native port's lines never hold back the
        // first of another port.
        let mut logs = failures.logs.lock().unwrap();
        let now = Instant::now();
        assert_eq!(logs[AuthPort::Native.index()].pass(now), None);
        assert_eq!(logs[AuthPort::Http.index()].pass(now), Some(0));
    }

    #[test]
    fn only_a_refused_password_counts_on_the_resp_port() {
        let wrongpass = format!("-{}\r\n", tandem_redis::session::WRONGPASS);
        assert!(refuses_password(wrongpass.as_bytes()));
        assert!(!refuses_password(b"+OK\r\n"));
        assert!(!refuses_password(b"-NOAUTH Authentication required.\r\n"));
        assert!(!refuses_password(b"$10\r\n-WRONGPASS\r\n"));
    }
}
