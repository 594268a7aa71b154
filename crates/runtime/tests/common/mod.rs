//! What the runtime's integration tests share.

/// This machine's address on the interface that leads elsewhere, if it has one that is not
/// loopback (no packet is sent: a UDP socket's connect only picks the route).
#[allow(dead_code)]
pub fn outward_address() -> Option<std::net::IpAddr> {
    let socket = std::net::UdpSocket::bind("0.0.0.0:0").ok()?;
    socket.connect("192.0.2.1:9").ok()?;
    let ip = socket.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

/// Node `id` (1 the primary, 2 its backup) of a static 2-safe pair of 4 MiB Debit-Credit
/// nodes, listening on `listen`, with `peer` the other; `secure` sets how its peer links
/// authenticate (a `peer_secret`, or `[tls]`) before the config is checked.
#[allow(dead_code)]
pub fn pair_config(
    id: u32,
    listen: std::net::SocketAddr,
    peer: tandem_runtime::config::PeerConfig,
    secure: impl FnOnce(&mut tandem_runtime::config::NodeConfig),
) -> tandem_runtime::config::NodeConfig {
    use tandem_runtime::config::{EXAMPLE, NodeConfig, Role};
    let mut config = NodeConfig::from_toml_str(EXAMPLE).expect("the example parses");
    config.node_id = id;
    config.listen = listen;
    config.metrics_listen = None;
    config.role = if id == 1 { Role::Primary } else { Role::Backup };
    config.peers = vec![peer];
    config.group.safety = tandem_replication::Safety::TwoSafe(tandem_replication::AckCount::All);
    config.group.db_mib = 4;
    secure(&mut config);
    config.validate().expect("a valid pair");
    config
}

/// The Debit-Credit database `config` names.
#[allow(dead_code)]
pub fn model(config: &tandem_runtime::config::NodeConfig) -> Box<dyn tandem_store::DataModel> {
    use tandem_workloads::debit_credit::{DebitCredit, DebitCreditConfig};
    let workload = DebitCredit::new(config.group.db_mib << 20, &DebitCreditConfig::default())
        .expect("Debit-Credit fits in 4 MiB");
    tandem_store::Compiled::boxed(workload)
}

/// Node 2's count of peer links refused for `reason`, as `/metrics` shows it.
#[allow(dead_code)]
pub fn refused(metrics: &tandem_runtime::metrics::Metrics, reason: &str) -> u64 {
    let text = metrics.encode();
    let line = format!("tandem_peers_refused_total{{node=\"2\",reason=\"{reason}\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .unwrap_or_else(|| panic!("no {line} in\n{text}"))
        .trim()
        .parse()
        .unwrap()
}
