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
    config.role = Some(if id == 1 { Role::Primary } else { Role::Backup });
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

/// How long a test waits for a node it started to take the role its configuration names.
#[allow(dead_code)]
const ROLE_WAIT: std::time::Duration = std::time::Duration::from_secs(10);

/// Starts the node `config` describes in this process, through the one entry point every
/// node runs through: its native port on `native`, its RESP port on `resp` if given (served
/// only for a Redis model), serving `model`. Returns once the node holds the role
/// `config.role` names: without a `[cluster]` table its view is fixed for good, so that role
/// is its own from the first view on, and a test that talks to the node talks to the role.
/// The node runs until the returned handle is dropped.
#[allow(dead_code)]
pub fn start(
    config: &tandem_runtime::config::NodeConfig,
    native: std::net::TcpListener,
    resp: Option<std::net::TcpListener>,
    model: Box<dyn tandem_store::DataModel>,
) -> tandem_runtime::cluster::RunningNode {
    use tandem_runtime::config::Role;
    let listeners = tandem_runtime::Listeners {
        native,
        metrics: None,
        resp: resp.into_iter().map(|l| (config.group.id, l)).collect(),
    };
    let stop = tandem_runtime::StopWhen::default();
    let node =
        tandem_runtime::start_node(config, listeners, model, stop, None).expect("the node starts");
    let role = match config.role.expect("a test node's config gives its role") {
        Role::Primary => "primary",
        Role::Backup => "backup",
    };
    let deadline = std::time::Instant::now() + ROLE_WAIT;
    loop {
        let status = node.status();
        if status.as_ref().is_some_and(|status| status.role == role) {
            return node;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "node {} never took its {role} role: {status:?}",
            config.node_id
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// Threads of this process now (every test's nodes and clients included).
pub fn threads_now() -> usize {
    std::fs::read_dir("/proc/self/task")
        .expect("Linux's /proc")
        .count()
}
