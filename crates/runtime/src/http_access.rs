//! Who may use the HTTP endpoints that pause the node.
//!
//! `/status` and `/metrics` are cheap and say nothing secret: anyone who reaches the HTTP
//! listener may read them. `/checksum` stops the node's thread while it checksums the whole
//! segment (tens of milliseconds for 50 MiB): anyone who could ask for it in a loop could stall
//! the node. So an endpoint that pauses or changes anything is open only where the listener
//! is bound to a loopback address (the machine's own users, who can signal the process
//! anyway); elsewhere it asks for the node's password (`requirepass`) as
//! `Authorization: Bearer <password>`, and a node without a password refuses it outright.

use std::net::{IpAddr, SocketAddr};

use tandem_redis::session::Password;

/// The rule for the endpoints that pause the node, fixed when the listener is bound.
#[derive(Clone, Debug)]
pub enum HttpAccess {
    /// The listener is bound to a loopback address: open.
    Loopback,
    /// Reachable from other machines, and the node has a password: it must be sent.
    Password(Password),
    /// Reachable from other machines, and the node has no password: refused.
    Refused { address: SocketAddr },
}

/// Why a request for a guarded endpoint is refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Denied {
    /// No `Authorization: Bearer` header (401).
    NoPassword,
    /// A password that is not the node's (401; counted as a failed authentication).
    WrongPassword,
    /// The node has no password and the listener is not loopback (403).
    Forbidden,
}

/// The header that asks a client for the password on a 401.
pub const CHALLENGE_HEADER: &str = "WWW-Authenticate: Bearer realm=\"tandem\"";

impl HttpAccess {
    /// The rule for a listener bound to `address` on a node whose password is `password`.
    pub fn new(address: SocketAddr, password: Option<Password>) -> HttpAccess {
        match password {
            _ if is_loopback(address.ip()) => HttpAccess::Loopback,
            Some(password) => HttpAccess::Password(password),
            None => HttpAccess::Refused { address },
        }
    }

    /// Whether a request whose head (request line and headers) is `head` may use a guarded
    /// endpoint.
    pub fn check(&self, head: &[u8]) -> Result<(), Denied> {
        match self {
            HttpAccess::Loopback => Ok(()),
            HttpAccess::Refused { .. } => Err(Denied::Forbidden),
            HttpAccess::Password(password) => match bearer_token(head) {
                None => Err(Denied::NoPassword),
                Some(token) if password.matches(token) => Ok(()),
                Some(_) => Err(Denied::WrongPassword),
            },
        }
    }

    /// The body of a refusal of `path`: what happened and what to send or change.
    pub fn refusal_text(&self, path: &str, denied: Denied) -> String {
        match (self, denied) {
            (HttpAccess::Refused { .. }, _) | (_, Denied::Forbidden) => {
                let address = match self {
                    HttpAccess::Refused { address } => address.to_string(),
                    _ => "this address".to_owned(),
                };
                format!(
                    "forbidden: {path} pauses the node, and its HTTP listener ({address}) is \
                     reachable from other machines while the node has no password: bind \
                     metrics_listen to a loopback address (127.0.0.1:PORT; `tandem up` does \
                     unless --http-ip says otherwise), or set requirepass and send it as \
                     `Authorization: Bearer PASSWORD`\n"
                )
            }
            (_, Denied::NoPassword) => format!(
                "unauthorized: {path} pauses the node; send the node's password (its \
                 requirepass) as `Authorization: Bearer PASSWORD`, e.g. curl -H \
                 \"Authorization: Bearer $PASSWORD\" http://HOST:PORT{path}\n"
            ),
            (_, Denied::WrongPassword) => format!(
                "unauthorized: the password in `Authorization: Bearer` is not the node's; \
                 {path} takes its requirepass\n"
            ),
        }
    }
}

/// Whether `ip` is a loopback address (an IPv4-mapped one included).
fn is_loopback(ip: IpAddr) -> bool {
    ip.to_canonical().is_loopback()
}

/// The token of the request's `Authorization: Bearer TOKEN` header (the first such header;
/// the header name and the scheme in any case), if there is one.
fn bearer_token(head: &[u8]) -> Option<&[u8]> {
    head.split(|&byte| byte == b'\n').skip(1).find_map(|line| {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let colon = line.iter().position(|&byte| byte == b':')?;
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !name.eq_ignore_ascii_case(b"authorization") {
            return None;
        }
        let scheme = value.get(..7)?;
        scheme
            .eq_ignore_ascii_case(b"bearer ")
            .then(|| value[7..].trim_ascii())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(address: &str) -> SocketAddr {
        address.parse().unwrap()
    }

    #[test]
    fn loopback_is_open_and_elsewhere_the_password_is_asked_or_the_endpoint_refused() {
        let password = || Some(Password::new(b"s3cret"));
        let head = |auth: &str| format!("GET /checksum HTTP/1.1\r\nHost: x\r\n{auth}");
        for loopback in ["127.0.0.1:9001", "[::1]:9001", "[::ffff:127.0.0.1]:9001"] {
            let access = HttpAccess::new(at(loopback), None);
            assert_eq!(access.check(head("").as_bytes()), Ok(()), "{loopback}");
        }
        let guarded = HttpAccess::new(at("0.0.0.0:9001"), password());
        assert_eq!(guarded.check(head("").as_bytes()), Err(Denied::NoPassword));
        for good in [
            "Authorization: Bearer s3cret",
            "authorization:bearer s3cret  ",
            "AUTHORIZATION:  BEARER s3cret",
        ] {
            assert_eq!(guarded.check(head(good).as_bytes()), Ok(()), "{good}");
        }
        for wrong in [
            "Authorization: Bearer s3cre",
            "Authorization: Bearer s3crett",
            "Authorization: Bearer s3cret extra",
        ] {
            let result = guarded.check(head(wrong).as_bytes());
            assert_eq!(result, Err(Denied::WrongPassword), "{wrong}");
        }
        for absent in [
            "Authorization: Basic czNjcmV0",
            "X-Authorization: Bearer s3cret",
            "Authorization: Bearer ",
        ] {
            let result = guarded.check(head(absent).as_bytes());
            assert_eq!(result, Err(Denied::NoPassword), "{absent}");
        }
        // The request line is no header, whatever it says.
        let line_only = b"GET /Authorization:Bearer%20s3cret HTTP/1.1\r\n";
        assert_eq!(guarded.check(line_only), Err(Denied::NoPassword));

        let open = HttpAccess::new(at("10.1.2.3:9001"), None);
        let bearer = head("Authorization: Bearer s3cret");
        assert_eq!(open.check(bearer.as_bytes()), Err(Denied::Forbidden));
    }

    #[test]
    fn refusals_say_what_to_send_or_change_and_never_the_password() {
        let guarded = HttpAccess::new(at("0.0.0.0:9001"), Some(Password::new(b"s3cret")));
        let text = guarded.refusal_text("/checksum", Denied::NoPassword);
        assert!(text.contains("Authorization: Bearer PASSWORD"), "{text}");
        let text = guarded.refusal_text("/checksum", Denied::WrongPassword);
        assert!(!text.contains("s3cret"), "{text}");
        let refused = HttpAccess::new(at("10.1.2.3:9001"), None);
        let text = refused.refusal_text("/checksum", Denied::Forbidden);
        assert!(text.contains("10.1.2.3:9001"), "{text}");
        assert!(
            text.contains("loopback") && text.contains("requirepass"),
            "{text}"
        );
    }
}
