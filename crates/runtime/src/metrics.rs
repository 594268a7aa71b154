//! A node's Prometheus metrics.
//!
//! [`Metrics`] holds one registry whose metrics all start with `tandem_` and carry the
//! constant label `node` (the node id). The node's role is no constant label, since a
//! failover changes it and a registry's constant labels never change: `tandem_role{role}` is
//! 1 for the current role and 0 for every other one ([`Metrics::set_role`]). The handles are
//! public fields: the
//! threads that commit, ship, receive and apply update them directly (they are atomics, so
//! updating never blocks). [`Metrics::encode`] renders the OpenMetrics text format, which
//! `crate::http` serves.

use std::borrow::Cow;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::{Registry, Unit};
use tandem_replication::NodeId;

pub use crate::auth_failures::{AuthFailures, AuthPort};

/// The content type of `/metrics`.
pub const METRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// The values of the `reason` label of `tandem_batches_rejected_total`.
pub const REJECT_REASONS: [&str; 5] = ["corrupt", "gap", "duplicate", "stale_view", "other"];

/// The values of the `reason` label of `tandem_peers_refused_total`: a peer that offered no
/// proof of the cluster's secret (`no_proof`), a wrong one (`bad_proof`), a frame whose MAC
/// did not check after the handshake (`bad_mac`, also a TLS record that did not open), a peer
/// link from another machine to a node with no `peer_secret` (`not_loopback`), and under TLS
/// a peer that did not speak it (`no_tls`), a certificate the cluster's CA did not sign or
/// that names another node than the connector meant (`bad_certificate`), or one that names
/// another node than the connector's `Hello` claims (`wrong_node`).
pub const PEER_REFUSE_REASONS: [&str; 7] = [
    "no_proof",
    "bad_proof",
    "bad_mac",
    "not_loopback",
    "no_tls",
    "bad_certificate",
    "wrong_node",
];

/// The values of the `reason` label of `tandem_connections_refused_total`: a client
/// connection closed because it sent an HTTP request's `POST` or `Host:` line to a Redis port
/// (`cross_protocol`, a web page's attempt to drive the node), because the node already
/// served `maxclients` connections (`maxclients`), because the replies it did not read
/// passed its output buffer limit (`output_buffer`), or because it did not finish its
/// handshake in time or while too many others were handshaking (`handshake`).
pub const CONNECTION_REFUSE_REASONS: [&str; 4] =
    ["cross_protocol", "maxclients", "output_buffer", "handshake"];

/// The values of the `role` label of `tandem_role`: what a node serves as now (`outside`: in
/// no view yet, or left out of the current one).
pub const ROLES: [&str; 4] = ["primary", "backup", "spare", "outside"];

/// The `role` label: one of [`ROLES`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RoleLabel {
    pub role: String,
}

/// The `backup` label: a backup's node id, in decimal.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct BackupLabel {
    pub backup: String,
}

/// The `reason` label: one of [`REJECT_REASONS`].
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReasonLabel {
    pub reason: String,
}

/// Every metric a node exports. LSN gauges are `i64` (prometheus-client's native gauge); an
/// LSN would need 2^63 commits to overflow one.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,

    /// `tandem_role{role}`: 1 for the role the node serves as now, 0 for the others.
    role: Family<RoleLabel, Gauge>,
    /// The role `role` says is current, so that an unchanged role costs no update.
    role_current: std::sync::Mutex<&'static str>,

    // Primary.
    /// `tandem_commits_total`: txns committed by the primary role.
    pub commits: Counter,
    /// `tandem_rollbacks_total`: calls whose procedure failed, so their txn was aborted.
    pub rollbacks: Counter,
    /// `tandem_lsn_committed`: the last LSN committed on the primary.
    pub lsn_committed: Gauge,
    /// `tandem_replies_released_total`: replies sent once their safety rule held.
    pub replies_released: Counter,
    /// `tandem_batches_shipped_total`: batches sent to backups (each copy counts).
    pub batches_shipped: Counter,
    /// `tandem_bytes_shipped_total`: batch bytes sent to backups.
    pub bytes_shipped: Counter,
    /// `tandem_ack_latency_seconds`: from commit to the reply's release; buckets from 10 µs,
    /// doubling, 16 of them (up to about 0.33 s).
    pub ack_latency_seconds: Histogram,
    /// `tandem_backup_lsn_received{backup}`: the last LSN each backup acknowledged receiving.
    pub backup_lsn_received: Family<BackupLabel, Gauge>,
    /// `tandem_backup_lsn_applied{backup}`: the last LSN each backup acknowledged applying.
    pub backup_lsn_applied: Family<BackupLabel, Gauge>,
    /// `tandem_backup_lag_records{backup}`: records committed but not yet at the backup.
    pub backup_lag_records: Family<BackupLabel, Gauge>,
    /// `tandem_flow_control_stalls_total`: times the primary role stopped taking commits because
    /// the retained tail or a bounded safety rule was full.
    pub flow_control_stalls: Counter,
    /// `tandem_suspicions_total`: peers this node suspected (some may be false on a loaded
    /// machine; fencing makes them safe).
    pub suspicions: Counter,
    /// `tandem_view_changes_total`: views this node followed after its first (each a
    /// committed view change, whether a failure asked for it or a false suspicion did).
    pub view_changes: Counter,
    /// `tandem_primary_alone_seconds_total`: time this node served as primary of a view
    /// without a backup (its crash then would lose what only it holds, and 2-safe commits
    /// wait).
    pub primary_alone_seconds: Counter<f64, std::sync::atomic::AtomicU64>,
    /// `tandem_duplicates_answered_total`: retried calls answered from the dedup table.
    pub duplicates_answered: Counter,
    /// `tandem_reads_served_total`: reads a backup answered from its own copy.
    pub reads_served: Counter,
    /// `tandem_reads_refused_total`: reads a backup could not serve in time (`Busy`).
    pub reads_refused: Counter,
    /// `tandem_replies_withheld_total`: replies the primary released under its lease but did
    /// not send, the lease having run out before they could leave.
    pub replies_withheld: Counter,

    // The write-ahead log (any role).
    /// `tandem_log_lsn_durable`: the last LSN the log synced that a restart could rebuild
    /// (0: none, or the log failed).
    pub log_lsn_durable: Gauge,
    /// `tandem_log_syncs_total`: syncs of the log (each covers every batch appended since the
    /// one before: group commit).
    pub log_syncs: Counter,
    /// `tandem_log_sync_seconds`: how long each sync took (the writes and the `fdatasync`).
    pub log_sync_seconds: Histogram,

    // Backup.
    /// `tandem_lsn_received`: the last LSN this backup holds.
    pub lsn_received: Gauge,
    /// `tandem_lsn_applied`: the last LSN this backup applied.
    pub lsn_applied: Gauge,
    /// `tandem_batches_received_total`: batches accepted.
    pub batches_received: Counter,
    /// `tandem_batches_rejected_total{reason}`: batches refused, by [`REJECT_REASONS`].
    pub batches_rejected: Family<ReasonLabel, Counter>,

    // Connections.
    /// `tandem_client_connections`: client connections open now.
    pub client_connections: Gauge,
    /// `tandem_blocked_clients`: RESP connections waiting in a blocking command (`BLPOP`, …).
    pub blocked_clients: Gauge,
    /// `tandem_frames_rejected_total`: frames refused as malformed or too long.
    pub frames_rejected: Counter,
    /// `tandem_publications_not_relayed_total`: pub/sub messages the primary did not relay
    /// to a member (longer than a peer frame may be) or a backup dropped (too many waited
    /// for its applier).
    pub publications_not_relayed: Counter,
    /// `tandem_peers_refused_total{reason}`: peer links refused at the handshake or cut for
    /// a frame whose MAC did not check, by [`PEER_REFUSE_REASONS`].
    pub peers_refused: Family<ReasonLabel, Counter>,
    /// `tandem_clients_refused_total`: native-port clients that did not prove a password the
    /// node accepts.
    pub clients_refused: Counter,
    /// `tandem_auth_failures_total{port}`: wrong passwords (or unknown users) given on the
    /// RESP, native and HTTP ports ([`Metrics::auth_failed`]).
    pub auth_failures: AuthFailures,
    /// `tandem_connections_refused_total{reason}`: client connections refused or closed to
    /// protect the node, by [`CONNECTION_REFUSE_REASONS`].
    pub connections_refused: Family<ReasonLabel, Counter>,

    // The data model.
    /// `tandem_model{stat}`: what the primary's data model reports of its database
    /// (`DataModel::stats`: the Redis model's memory in use, its allocator's free bytes and
    /// fragmentation, its keys), refreshed every tenth of a second.
    pub model_stats: Family<StatLabel, Gauge<f64, std::sync::atomic::AtomicU64>>,
    /// The same figures, in the model's order, for `INFO`.
    model_stats_latest: std::sync::Mutex<Vec<(&'static str, f64)>>,
}

/// The `stat` label of `tandem_model`.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StatLabel {
    pub stat: String,
}

impl Metrics {
    /// Records what the data model reports of its database.
    pub fn set_model_stats(&self, stats: Vec<(&'static str, f64)>) {
        for (stat, value) in &stats {
            self.model_stats
                .get_or_create(&StatLabel {
                    stat: (*stat).to_string(),
                })
                .set(*value);
        }
        *self.model_stats_latest.lock().expect("not poisoned") = stats;
    }

    /// What the data model last reported.
    pub fn model_stats(&self) -> Vec<(&'static str, f64)> {
        self.model_stats_latest
            .lock()
            .expect("not poisoned")
            .clone()
    }

    /// Says `role` (one of [`ROLES`]) is the node's role now: `tandem_role` sets it to 1 and
    /// the role before to 0.
    pub fn set_role(&self, role: &str) {
        let role = ROLES
            .into_iter()
            .find(|known| *known == role)
            .unwrap_or_else(|| panic!("{role} is not one of {ROLES:?}"));
        let mut current = self.role_current.lock().expect("not poisoned");
        if *current == role {
            return;
        }
        let label = |role: &str| RoleLabel {
            role: role.to_owned(),
        };
        self.role.get_or_create(&label(&current)).set(0);
        self.role.get_or_create(&label(role)).set(1);
        *current = role;
    }

    /// A registry for node `node_id` starting in `role` (one of [`ROLES`]), every other
    /// metric at zero.
    pub fn new(node_id: NodeId, role: &str) -> Metrics {
        let labels = [(Cow::Borrowed("node"), Cow::Owned(node_id.to_string()))];
        let mut m = Metrics {
            registry: Registry::with_prefix_and_labels("tandem", labels.into_iter()),
            role: Family::default(),
            role_current: std::sync::Mutex::new(ROLES[0]),
            commits: Counter::default(),
            rollbacks: Counter::default(),
            lsn_committed: Gauge::default(),
            replies_released: Counter::default(),
            batches_shipped: Counter::default(),
            bytes_shipped: Counter::default(),
            ack_latency_seconds: Histogram::new(exponential_buckets(10e-6, 2.0, 16)),
            backup_lsn_received: Family::default(),
            backup_lsn_applied: Family::default(),
            backup_lag_records: Family::default(),
            flow_control_stalls: Counter::default(),
            suspicions: Counter::default(),
            view_changes: Counter::default(),
            primary_alone_seconds: Counter::default(),
            duplicates_answered: Counter::default(),
            reads_served: Counter::default(),
            reads_refused: Counter::default(),
            replies_withheld: Counter::default(),
            log_lsn_durable: Gauge::default(),
            log_syncs: Counter::default(),
            log_sync_seconds: Histogram::new(exponential_buckets(10e-6, 2.0, 16)),
            lsn_received: Gauge::default(),
            lsn_applied: Gauge::default(),
            batches_received: Counter::default(),
            batches_rejected: Family::default(),
            client_connections: Gauge::default(),
            blocked_clients: Gauge::default(),
            frames_rejected: Counter::default(),
            publications_not_relayed: Counter::default(),
            peers_refused: Family::default(),
            clients_refused: Counter::default(),
            auth_failures: AuthFailures::default(),
            connections_refused: Family::default(),
            model_stats: Family::default(),
            model_stats_latest: std::sync::Mutex::new(Vec::new()),
        };
        m.registry.register(
            "model",
            "What the data model reports of its database, by stat",
            m.model_stats.clone(),
        );
        m.registry.register(
            "role",
            "1 for the role this node serves as now (primary, backup, spare, outside), else 0",
            m.role.clone(),
        );
        // Every role is exported from the start, so that a query for one never finds nothing.
        for known in ROLES {
            drop(m.role.get_or_create(&RoleLabel {
                role: known.to_owned(),
            }));
        }
        m.role
            .get_or_create(&RoleLabel {
                role: ROLES[0].to_owned(),
            })
            .set(1);
        m.set_role(role);
        m.register_primary();
        m.register_log();
        m.register_cluster();
        m.register_backup();
        m.register_connections();
        m
    }

    /// Registers the primary's metrics: its commits, what it ships, when its replies leave,
    /// its backups' progress.
    fn register_primary(&mut self) {
        self.registry
            .register("commits", "Txns committed", self.commits.clone());
        self.registry
            .register("rollbacks", "Calls rolled back", self.rollbacks.clone());
        self.registry.register(
            "lsn_committed",
            "Last LSN committed",
            self.lsn_committed.clone(),
        );
        self.registry.register(
            "replies_released",
            "Replies released once their safety rule held",
            self.replies_released.clone(),
        );
        self.registry.register(
            "batches_shipped",
            "Batches sent to backups",
            self.batches_shipped.clone(),
        );
        self.registry.register(
            "bytes_shipped",
            "Batch bytes sent to backups",
            self.bytes_shipped.clone(),
        );
        self.registry.register_with_unit(
            "ack_latency",
            "From commit to the release of its reply",
            Unit::Seconds,
            self.ack_latency_seconds.clone(),
        );
        self.registry.register(
            "backup_lsn_received",
            "Last LSN each backup acknowledged receiving",
            self.backup_lsn_received.clone(),
        );
        self.registry.register(
            "backup_lsn_applied",
            "Last LSN each backup acknowledged applying",
            self.backup_lsn_applied.clone(),
        );
        self.registry.register(
            "backup_lag_records",
            "Records committed but not yet at each backup",
            self.backup_lag_records.clone(),
        );
        self.registry.register(
            "flow_control_stalls",
            "Times the primary stopped taking commits because a limit was reached",
            self.flow_control_stalls.clone(),
        );
        self.registry.register(
            "duplicates_answered",
            "Retried calls answered from the dedup table without running again",
            self.duplicates_answered.clone(),
        );
        self.registry.register(
            "replies_withheld",
            "Replies released under the lease and withheld because it ran out before they left",
            self.replies_withheld.clone(),
        );
    }

    /// Registers the write-ahead log's metrics.
    fn register_log(&mut self) {
        self.registry.register(
            "log_lsn_durable",
            "Last LSN the write-ahead log synced that a restart could rebuild",
            self.log_lsn_durable.clone(),
        );
        self.registry.register(
            "log_syncs",
            "Syncs of the write-ahead log",
            self.log_syncs.clone(),
        );
        self.registry.register_with_unit(
            "log_sync",
            "How long each sync of the write-ahead log took",
            Unit::Seconds,
            self.log_sync_seconds.clone(),
        );
    }

    /// Registers the metrics of the failure detector and the view changes.
    fn register_cluster(&mut self) {
        self.registry.register(
            "suspicions",
            "Peers this node suspected of having failed",
            self.suspicions.clone(),
        );
        self.registry.register(
            "view_changes",
            "Views this node followed after its first",
            self.view_changes.clone(),
        );
        self.registry.register(
            "primary_alone_seconds",
            "Time this node served as primary of a view without a backup",
            self.primary_alone_seconds.clone(),
        );
    }

    /// Registers a backup's metrics: what it received and applied, the reads it served.
    fn register_backup(&mut self) {
        self.registry.register(
            "lsn_received",
            "Last LSN this backup holds",
            self.lsn_received.clone(),
        );
        self.registry.register(
            "lsn_applied",
            "Last LSN this backup applied",
            self.lsn_applied.clone(),
        );
        self.registry.register(
            "batches_received",
            "Batches accepted",
            self.batches_received.clone(),
        );
        self.registry.register(
            "batches_rejected",
            "Batches refused, by reason",
            self.batches_rejected.clone(),
        );
        self.registry.register(
            "reads_served",
            "Reads this backup answered from its own copy",
            self.reads_served.clone(),
        );
        self.registry.register(
            "reads_refused",
            "Reads this backup could not serve within the wait and answered Busy",
            self.reads_refused.clone(),
        );
    }

    /// Registers the ports' metrics: the clients connected, what was refused and closed.
    fn register_connections(&mut self) {
        self.registry.register(
            "client_connections",
            "Client connections open",
            self.client_connections.clone(),
        );
        self.registry.register(
            "blocked_clients",
            "RESP connections waiting in a blocking command",
            self.blocked_clients.clone(),
        );
        self.registry.register(
            "frames_rejected",
            "Frames refused",
            self.frames_rejected.clone(),
        );
        self.registry.register(
            "publications_not_relayed",
            "Pub/sub messages not relayed to a member, or dropped by a backup",
            self.publications_not_relayed.clone(),
        );
        self.registry.register(
            "peers_refused",
            "Peer links refused at the handshake or cut for a forged frame, by reason",
            self.peers_refused.clone(),
        );
        self.registry.register(
            "clients_refused",
            "Native-port clients that did not prove a password the node accepts",
            self.clients_refused.clone(),
        );
        self.registry.register(
            "auth_failures",
            "Wrong passwords or unknown users given to authenticate, by port",
            self.auth_failures.total.clone(),
        );
        self.registry.register(
            "connections_refused",
            "Client connections refused or closed to protect the node, by reason",
            self.connections_refused.clone(),
        );
        for port in AuthPort::ALL {
            drop(self.auth_failures.counter(port));
        }
        // Every reason is exported from the start, so a rate over it never starts missing.
        for reason in REJECT_REASONS {
            drop(self.batches_rejected.get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            }));
        }
        for reason in PEER_REFUSE_REASONS {
            drop(self.peers_refused.get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            }));
        }
        for reason in CONNECTION_REFUSE_REASONS {
            drop(self.connections_refused.get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            }));
        }
    }

    /// Counts a client connection refused or closed for `reason`, one of
    /// [`CONNECTION_REFUSE_REASONS`].
    pub fn connection_refused(&self, reason: &str) {
        debug_assert!(
            CONNECTION_REFUSE_REASONS.contains(&reason),
            "unknown reason {reason}"
        );
        self.connections_refused
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// Counts a failed authentication on `port` by `client` and logs it, at most one line
    /// every ten seconds per port ([`crate::auth_failures`]).
    pub fn auth_failed(&self, port: AuthPort, client: Option<std::net::SocketAddr>) {
        self.auth_failures.failed(port, client);
    }

    /// What the RESP front end calls with each reply its session wrote: a refused password
    /// (`-WRONGPASS`) counts as a failed authentication by the client `client` names
    /// (asked only then, since it costs a system call).
    pub fn resp_replied(
        &self,
        reply: &[u8],
        client: impl FnOnce() -> Option<std::net::SocketAddr>,
    ) {
        if crate::auth_failures::refuses_password(reply) {
            self.auth_failed(AuthPort::Resp, client());
        }
    }

    /// Counts a peer link refused for `reason`, one of [`PEER_REFUSE_REASONS`].
    pub fn peer_refused(&self, reason: &str) {
        debug_assert!(
            PEER_REFUSE_REASONS.contains(&reason),
            "unknown reason {reason}"
        );
        self.peers_refused
            .get_or_create(&ReasonLabel {
                reason: reason.to_owned(),
            })
            .inc();
    }

    /// The metrics in the OpenMetrics text format, ending with `# EOF`.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &self.registry)
            .expect("encoding into a String cannot fail: our labels and values always encode");
        text
    }
}

/// The value of `tandem_auth_failures_total{port}` in the rendered text of node 1's metrics.
#[cfg(test)]
pub(crate) fn auth_failures(metrics: &Metrics, port: &str) -> u64 {
    let prefix = format!("tandem_auth_failures_total{{node=\"1\",port=\"{port}\"}} ");
    let text = metrics.encode();
    text.lines()
        .find_map(|line| line.strip_prefix(prefix.as_str()))
        .unwrap_or_else(|| panic!("no {prefix} in:\n{text}"))
        .parse()
        .unwrap()
}

#[cfg(test)]
mod tests {
    use std::net::SocketAddr;

    use super::*;

    #[test]
    fn encode_names_every_metric_after_updates() {
        let metrics = Metrics::new(7, "primary");
        metrics.commits.inc();
        metrics.rollbacks.inc();
        metrics.lsn_committed.set(42);
        metrics.replies_released.inc_by(3);
        metrics.batches_shipped.inc();
        metrics.bytes_shipped.inc_by(512);
        metrics.ack_latency_seconds.observe(25e-6);
        let backup = BackupLabel {
            backup: "2".to_owned(),
        };
        metrics.backup_lsn_received.get_or_create(&backup).set(41);
        metrics.backup_lsn_applied.get_or_create(&backup).set(40);
        metrics.backup_lag_records.get_or_create(&backup).set(2);
        metrics.flow_control_stalls.inc();
        metrics.lsn_received.set(9);
        metrics.lsn_applied.set(8);
        metrics.batches_received.inc();
        metrics
            .batches_rejected
            .get_or_create(&ReasonLabel {
                reason: "gap".to_owned(),
            })
            .inc();
        metrics.client_connections.inc();
        metrics.frames_rejected.inc();

        let text = metrics.encode();
        let labels = r#"node="7""#;
        for line in [
            format!("tandem_commits_total{{{labels}}} 1"),
            format!("tandem_rollbacks_total{{{labels}}} 1"),
            format!("tandem_lsn_committed{{{labels}}} 42"),
            format!("tandem_replies_released_total{{{labels}}} 3"),
            format!("tandem_batches_shipped_total{{{labels}}} 1"),
            format!("tandem_bytes_shipped_total{{{labels}}} 512"),
            format!("tandem_ack_latency_seconds_count{{{labels}}} 1"),
            format!("tandem_ack_latency_seconds_bucket{{{labels},le=\"0.00001\"}} 0"),
            format!("tandem_ack_latency_seconds_bucket{{{labels},le=\"0.00004\"}} 1"),
            format!("tandem_backup_lsn_received{{{labels},backup=\"2\"}} 41"),
            format!("tandem_backup_lsn_applied{{{labels},backup=\"2\"}} 40"),
            format!("tandem_backup_lag_records{{{labels},backup=\"2\"}} 2"),
            format!("tandem_flow_control_stalls_total{{{labels}}} 1"),
            format!("tandem_lsn_received{{{labels}}} 9"),
            format!("tandem_lsn_applied{{{labels}}} 8"),
            format!("tandem_batches_received_total{{{labels}}} 1"),
            format!("tandem_batches_rejected_total{{{labels},reason=\"gap\"}} 1"),
            format!("tandem_batches_rejected_total{{{labels},reason=\"stale_view\"}} 0"),
            format!("tandem_client_connections{{{labels}}} 1"),
            format!("tandem_frames_rejected_total{{{labels}}} 1"),
        ] {
            assert!(
                text.lines().any(|l| l == line),
                "missing `{line}` in:\n{text}"
            );
        }
        assert!(
            text.contains("# UNIT tandem_ack_latency_seconds seconds"),
            "{text}"
        );
        // 16 finite buckets plus +Inf.
        let buckets = text
            .lines()
            .filter(|l| l.starts_with("tandem_ack_latency_seconds_bucket"));
        assert_eq!(buckets.count(), 17, "{text}");
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    /// The value of `tandem_role{role}` in the rendered text.
    fn role_value(text: &str, role: &str) -> Option<i64> {
        let prefix = format!("tandem_role{{node=\"3\",role=\"{role}\"}} ");
        text.lines()
            .find_map(|line| line.strip_prefix(prefix.as_str()))
            .map(|value| value.parse().expect("an integer"))
    }

    #[test]
    fn the_role_follows_a_failover_and_the_old_role_reads_zero() {
        let metrics = Metrics::new(3, "backup");
        let text = metrics.encode();
        assert_eq!(role_value(&text, "backup"), Some(1), "{text}");
        for other in ["primary", "spare", "outside"] {
            assert_eq!(role_value(&text, other), Some(0), "{other} in:\n{text}");
        }
        // No metric carries a role label of its own that could go stale.
        assert!(
            text.lines()
                .filter(|line| !line.starts_with('#') && !line.starts_with("tandem_role"))
                .all(|line| !line.contains("role=")),
            "{text}"
        );

        metrics.set_role("primary");
        let text = metrics.encode();
        assert_eq!(role_value(&text, "primary"), Some(1), "{text}");
        assert_eq!(role_value(&text, "backup"), Some(0), "{text}");
        let ones = ROLES
            .iter()
            .filter(|role| role_value(&text, role) == Some(1))
            .count();
        assert_eq!(ones, 1, "exactly one current role:\n{text}");

        // An unchanged role changes nothing; a deposed primary that rejoins as a spare moves
        // the 1 again.
        metrics.set_role("primary");
        assert_eq!(metrics.encode(), text);
        metrics.set_role("spare");
        let text = metrics.encode();
        assert_eq!(role_value(&text, "spare"), Some(1), "{text}");
        assert_eq!(role_value(&text, "primary"), Some(0), "{text}");
    }

    #[test]
    fn a_refused_password_on_the_resp_port_is_counted() {
        let metrics = Metrics::new(1, "primary");
        let client: SocketAddr = "10.0.0.7:5000".parse().unwrap();
        let wrongpass = format!("-{}\r\n", tandem_redis::session::WRONGPASS);
        metrics.resp_replied(wrongpass.as_bytes(), || Some(client));
        metrics.resp_replied(b"+OK\r\n", || {
            panic!("the client is asked only on a failure")
        });
        assert_eq!(auth_failures(&metrics, "resp"), 1);
    }
}
