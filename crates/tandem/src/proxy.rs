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
    let proxy = Proxy::start(config).map_err(|err| Failure::Run(err.to_string()))?;
    // One line once it listens: scripts and the demo wait for it.
    println!("tandem proxy: listening on {}", proxy.local_addr());
    loop {
        std::thread::park();
    }
}
