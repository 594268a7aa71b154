//! `tandem proxy`: serves Redis clients on a local port (crates/proxy) until killed.

use std::time::Duration;

use tandem_proxy::{Proxy, ProxyConfig};

use crate::Failure;
use crate::cli::ProxyArgs;

/// The proxy's own credentials to the nodes configured as `node`: `user`'s password, if the
/// nodes ask one (they do when they have a `requirepass`).
fn cluster_credentials(
    node: &tandem_runtime::config::NodeConfig,
    user: &str,
) -> Result<Option<tandem_client::Credentials>, Failure> {
    let Some(requirepass) = &node.requirepass else {
        return Ok(None);
    };
    let password = if user == "default" {
        requirepass.0.clone()
    } else {
        let found = node.users.iter().find(|u| u.name == user).ok_or_else(|| {
            Failure::Usage(format!(
                "--cluster-user {user}: the node's configuration has no such user; name one \
                 of its [[users]], or `default`"
            ))
        })?;
        found.password.0.clone()
    };
    Ok(Some(tandem_client::Credentials {
        user: user.to_owned(),
        password: password.into_bytes(),
    }))
}

/// TLS to the nodes configured as `node`, if their native ports speak it: trusting their
/// `[tls] ca`.
fn native_tls(
    node: &tandem_runtime::config::NodeConfig,
) -> Result<Option<tandem_client::ClientTls>, String> {
    match &node.tls {
        Some(table) if table.native => {
            let ca = table.ca.as_ref().ok_or(
                "[tls] native = true: the proxy trusts the nodes' certificates by tls.ca, which \
                 is missing",
            )?;
            tandem_client::ClientTls::from_ca_file(ca)
                .map(Some)
                .map_err(|err| err.to_string())
        }
        _ => Ok(None),
    }
}

pub fn run(args: &ProxyArgs) -> Result<(), Failure> {
    if args.exit_on_stdin_eof {
        std::thread::spawn(|| {
            let mut sink = Vec::new();
            let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
            std::process::exit(0);
        });
    }
    let mut config = ProxyConfig {
        cluster: args.cluster.0.clone(),
        listen: args.listen,
        group: args.group,
        deadline: Duration::from_millis(args.deadline_ms),
        read_consistency: args.reads,
        credentials: None,
        tls: None,
        requirepass: None,
        users: Default::default(),
        threads: usize::from(args.threads),
    };
    if let Some(path) = &args.auth_from {
        let node = tandem_runtime::config::NodeConfig::load(path)
            .map_err(|err| Failure::Usage(format!("--auth-from {}: {err}", path.display())))?;
        config.requirepass = node.resp_password();
        config.users = std::sync::Arc::new(node.resp_users());
        config.credentials = cluster_credentials(&node, &args.cluster_user)?;
        config.tls = native_tls(&node)
            .map_err(|err| Failure::Usage(format!("--auth-from {}: {err}", path.display())))?;
    }
    if let Some(ca) = &args.tls_ca {
        let tls = tandem_client::ClientTls::from_ca_file(ca)
            .map_err(|err| Failure::Usage(format!("--tls-ca: {err}")))?;
        config.tls = Some(tls);
    }
    refuse_resp_ports(&config)?;
    let proxy = Proxy::start(config).map_err(|err| Failure::Run(err.to_string()))?;
    // One line once it listens: scripts and the demo wait for it.
    println!("tandem proxy: listening on {}", proxy.local_addr());
    loop {
        std::thread::park();
    }
}

/// How long each `--cluster` address has to answer the checks before the proxy starts.
const SEED_CHECK_TIMEOUT: Duration = Duration::from_secs(1);

/// Refuses to start on a `--cluster` address that is a node's Redis (RESP) port rather than
/// its native one: a RESP port answers the native `Hello` with a RESP error, or with nothing
/// until a line ends, so without this check the proxy would only ever time out on it. Each
/// address is first greeted as the proxy will (a node's native port answers that); only one
/// that gave no answer or bytes that are no frame is then sent a RESP `PING`. A node that is
/// down is no error here: the proxy waits for it, as before.
fn refuse_resp_ports(config: &ProxyConfig) -> Result<(), Failure> {
    for &seed in &config.cluster {
        let greeted = tandem_client::discover_secure(
            &[seed],
            config.group,
            SEED_CHECK_TIMEOUT,
            config.credentials.as_ref(),
            config.tls.as_ref(),
        );
        let Err(tandem_client::DiscoverError::Unanswered { failures }) = greeted else {
            continue;
        };
        // A refused connection or a node's own refusal (an `Error` frame) says nothing of
        // RESP, and a native port should not be sent a PING it would take for a bad frame.
        let spoke_native = failures.iter().all(|failure| {
            failure.reason.starts_with("connect failed")
                || failure.reason.starts_with("the node answered")
        });
        if !spoke_native && answers_resp(seed) {
            return Err(Failure::Usage(format!(
                "{seed} is a Redis (RESP) port; --cluster takes the nodes' native addresses: \
                 see `tandem status` (its `native` column), or `listen` in a node's \
                 configuration"
            )));
        }
    }
    Ok(())
}

/// Whether `address` answers a RESP `PING` as a Redis server does (`+PONG`, or an error such
/// as `-NOAUTH` or protected mode's `-DENIED`).
fn answers_resp(address: std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut stream) = std::net::TcpStream::connect_timeout(&address, SEED_CHECK_TIMEOUT) else {
        return false;
    };
    let _ = stream.set_read_timeout(Some(SEED_CHECK_TIMEOUT));
    let _ = stream.set_write_timeout(Some(SEED_CHECK_TIMEOUT));
    if stream.write_all(b"PING\r\n").is_err() {
        return false;
    }
    let mut reply = [0u8; 256];
    let mut read = 0;
    while read < reply.len() {
        match stream.read(&mut reply[read..]) {
            Ok(0) | Err(_) => break,
            Ok(n) => read += n,
        }
        if reply[..read].contains(&b'\n') {
            break;
        }
    }
    looks_like_resp(&reply[..read])
}

/// Whether `bytes` begin with a RESP line: a type byte (`+`, `-`, `:`, `$`, `*`, or RESP3's
/// `_`, `%`, `~`, `>`, `|`), printable text, then `\r\n`. A native frame begins with a binary
/// length, which is never followed by a line of text.
fn looks_like_resp(bytes: &[u8]) -> bool {
    let Some((&kind, rest)) = bytes.split_first() else {
        return false;
    };
    let Some(end) = rest.windows(2).position(|pair| pair == b"\r\n") else {
        return false;
    };
    b"+-:$*_%~>|".contains(&kind) && rest[..end].iter().all(|&b| (b' '..=b'~').contains(&b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resp_lines_are_told_from_native_frames() {
        for resp in [
            &b"+PONG\r\n"[..],
            b"-NOAUTH Authentication required.\r\n",
            b"-DENIED Redis is running in protected mode\r\n",
            b"-ERR unknown command\r\n",
            b"$4\r\nPONG\r\n",
        ] {
            assert!(looks_like_resp(resp), "{}", String::from_utf8_lossy(resp));
        }
        for other in [
            &b""[..],
            b"+PONG",
            b"-\x00\x00\x00\x07\r\n",
            b"\x2d\x00\x00\x00\x01\x02",
            b"HTTP/1.1 400 Bad Request\r\n",
        ] {
            assert!(!looks_like_resp(other), "{other:?}");
        }
    }
}
