//! A node's TOML configuration, parsed and validated before anything starts.
//!
//! Contract: [`NodeConfig::from_toml_str`] and [`NodeConfig::load`] return a configuration only
//! if every field parsed and every rule in [`NodeConfig::validate`] holds; nothing is half
//! accepted. Unknown keys are refused. A syntax or type error keeps toml's message (it shows
//! the key and the line), prefixed with the file's path when loaded from a file; a rule that
//! fails names the field by its dotted path (`group.safety`, `peers[1].address`) and says how
//! to fix it. [`NodeConfig::to_toml_string`] writes a configuration that parses back to an
//! equal value, every default spelled out.
//!
//! Addresses are socket addresses (`"127.0.0.1:7001"`, `"[::1]:7001"`), not host names, so
//! loading a configuration never touches DNS. `listen` and `metrics_listen` may use port 0
//! (any free port); a peer's address may not, since nobody could dial it.
//!
//! [`EXAMPLE`] is a commented configuration for a primary with one backup.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use tandem_config::{GroupId, SLOT_COUNT, SlotError, SlotRange, SlotTable};
use tandem_memory::Strategy;
use tandem_node::SyncPolicy;
use tandem_replication::{NodeId, Safety};

/// A commented configuration for the primary of group 0 with one backup; every value shown is
/// the default where the field has one.
pub const EXAMPLE: &str = r#"# tandem node configuration: the primary of group 0, with one backup.
# Run it with `tandem node --config primary.toml`.

# This node's id (≥ 1), unique among the group's members.
node_id = 1
# Clients and the other members connect here (an IP address and port; no host names).
listen = "127.0.0.1:7001"
# Optional: HTTP GET /metrics (Prometheus text) and GET /status (JSON). Leave it out to serve
# neither.
metrics_listen = "127.0.0.1:9001"
# "primary" or "backup". A group has exactly one primary, counting this node and its peers.
role = "primary"

[group]
id = 0
# The view this membership belongs to (≥ 1); the config store moves it on after a failover.
view = 1
# "debit-credit" or "order-entry" (required).
workload = "debit-credit"
# Segment size in MiB, 1 to 65536.
db_mib = 50
# Logging strategy: "v0", "v1", "v2" or "v3".
strategy = "v3"
# Seed of the deterministic initial load and call stream.
seed = 1
# When a commit is acknowledged: "1-safe", "bounded:N", "2-safe", "2-safe:K",
# "2-safe-applied", "2-safe-applied:K", "durable" or "durable:K" (K ≤ the number of
# backups; durable: synced to the write-ahead log of the primary and K backups).
safety = "2-safe"
# "active" (backups apply redo records) or "passive" (backups store the primary's writes;
# needs strategy v1, v2 or v3).
mode = "active"
# Passive v3 only: the most undo-log bytes one txn may write, in KiB (≥ 4).
undo_log_kib = 1024

# Optional; every field has a default.
[tuning]
# Length of one tick in microseconds, 10 to 1000000. Timeouts below count ticks.
tick_us = 1000
# The primary sends every backup a heartbeat every this many ticks (≥ 1).
heartbeat_ticks = 1
# A backup suspects the primary after this many silent ticks (> heartbeat_ticks); the
# silence allowed grows with the jitter observed, up to 4 times this. A killed peer is seen
# at once, by its closed connection: silence matters for a paused or cut-off one. (On a
# small VM whose disk syncs hard, every process may stall 5 to 18 ms at once.)
suspect_ticks = 30
# A primary whose executor is stuck in one call this many milliseconds is replaced (≥ 10).
executor_stall_ms = 1000
# The largest batch of records shipped at once, in bytes (≥ 64).
batch_bytes_max = 65536
# The retained tail keeps at most this many records (≥ 1) ...
tail_records_max = 1000000
# ... and at most this many bytes (≥ 2 × batch_bytes_max); commits stall beyond either.
# One write's redo record may take at most half of it (a longer write is refused).
tail_bytes_max = 1077936128
# Longest frame accepted from a client or peer, in bytes (≥ batch_bytes_max + 4096): the
# default carries Redis's largest value (512 MiB) and its reply.
max_frame_len = 1075838976
# Client connections served at once, Redis and native together (Redis's maxclients).
maxclients = 10000
# Replies one client may leave unread, in MiB, before its connection is closed (0: no limit).
output_buffer_mib = 1024
# Replies all clients together may leave unread, in MiB, before the connection holding the
# most is closed (0: no limit).
output_buffers_total_mib = 2048
# A script that has run this many milliseconds makes the node answer other clients -BUSY
# until it ends, as Redis's busy-reply-threshold (0: never); SCRIPT KILL stops it. Once
# CONFIG SET busy-reply-threshold sets one for the group's database, that one holds.
busy_reply_threshold_ms = 5000
# A script that has run this many milliseconds is stopped and its writes undone (0: no
# limit). The failure detector takes no script under this limit for a stuck node.
script_time_limit_ms = 30000

# Optional: the write-ahead log of the batches this node holds (a cluster-mode node always
# keeps one, under cluster.data_dir unless dir says otherwise).
# [log]
# dir = "data/1/log"
# When the log is synced on its own: "always" (every group of appends), "every:MS" or
# "never" (the operating system's). A durable commit is synced at once whatever this says.
# fsync = "every:100"
# A segment file is closed at this many MiB (1 to 1024).
# segment_mib = 64
# A backup checkpoints its database once this many MiB of batches were applied since its
# last checkpoint (1 to 65536); the log then drops the segments the checkpoint covers.
# checkpoint_mib = 128

# Optional: cluster mode. The roles here are then only the first view: failure detection and
# view changes through the config store move them on.
# [cluster]
# data_dir = "data/1"
# A cluster of several groups names each in a [[cluster.groups]] table: its id, and its
# members by node id, the first view's primary first, then its backups. `role`, every peer's
# `role` and group.id are then left out; [group] gives what every group shares, and its
# safety is the rule of a group that gives none.
# [[cluster.groups]]
# id = 1
# members = [1, 2]
# safety = "2-safe"
# Optional: the hash slots (0 to 16383) the group serves, "A-B" or one slot "A". Either
# every group lists its slots, each slot in one group, or none does: they are then split
# evenly, in the order of the tables.
# slots = ["0-8191"]
# [[cluster.groups]]
# id = 2
# members = [2, 1]
# slots = ["8192-16383"]

# The other members of the group, one table each.
[[peers]]
node_id = 2
address = "127.0.0.1:7002"
role = "backup"
"#;

/// A password in a configuration: read and written as a plain TOML string, never printed
/// (its `Debug` only says one is set).
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(set)")
    }
}

/// The longest `requirepass` (Redis takes up to 512 bytes in `AUTH` without complaint).
pub const REQUIREPASS_LEN_MAX: usize = 512;

/// A Redis user besides `default`: `AUTH name password` logs a connection in as it. Its
/// rights are a subset of Redis's ACLs (`tandem_redis::session::User`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct UserConfig {
    pub name: String,
    pub password: Secret,
    /// `read-write` (the default) or `read-only`: only the commands that read the database.
    #[serde(default)]
    pub access: UserAccess,
    /// Glob patterns (Redis's `~pattern`) the keys it names must match; `["*"]` by default.
    #[serde(default = "any_key")]
    pub keys: Vec<String>,
}

/// What a user may do to the database.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum UserAccess {
    #[default]
    ReadWrite,
    ReadOnly,
}

impl UserConfig {
    /// A user from a one-line spec in the words of Redis's `ACL SETUSER`: its name, then
    /// `>password`, any `~pattern`s (none: any key) and `read-only` or `read-write` (the
    /// default), separated by spaces: `alice >s3cret ~app:* read-only`. The error names the
    /// word at fault, never the password.
    pub fn from_spec(spec: &str) -> Result<UserConfig, String> {
        let mut words = spec.split_whitespace();
        let name = words
            .next()
            .ok_or("an empty user spec; write NAME >PASSWORD [~PATTERN …] [read-only]")?;
        let mut password = None;
        let mut access = UserAccess::ReadWrite;
        let mut keys = Vec::new();
        for word in words {
            if let Some(given) = word.strip_prefix('>') {
                if password.replace(given.to_owned()).is_some() {
                    return Err(format!("user {name}: give one >PASSWORD, not two"));
                }
            } else if let Some(pattern) = word.strip_prefix('~') {
                keys.push(pattern.to_owned());
            } else if word == "read-only" {
                access = UserAccess::ReadOnly;
            } else if word == "read-write" {
                access = UserAccess::ReadWrite;
            } else {
                return Err(format!(
                    "user {name}: {word:?} is not >PASSWORD, ~PATTERN, read-only or read-write"
                ));
            }
        }
        let password = password.ok_or(format!("user {name}: give its password as >PASSWORD"))?;
        Ok(UserConfig {
            name: name.to_owned(),
            password: Secret(password),
            access,
            keys: if keys.is_empty() { any_key() } else { keys },
        })
    }
}

fn any_key() -> Vec<String> {
    vec!["*".to_owned()]
}

/// The most users a node's table holds.
pub const USERS_MAX: usize = 256;

/// The shortest `peer_secret`: 128 bits.
pub const PEER_SECRET_LEN_MIN: usize = tandem_wire::SECRET_LEN_MIN;
/// The longest `peer_secret`.
pub const PEER_SECRET_LEN_MAX: usize = 1024;

fn protected_mode_default() -> bool {
    true
}

fn is_true(value: &bool) -> bool {
    *value
}

fn is_false(value: &bool) -> bool {
    !*value
}

/// A node's whole configuration: who it is, its group, the group's other members, and the
/// limits and timeouts it runs with.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NodeConfig {
    /// This node's id, ≥ 1 and unique in the group.
    pub node_id: NodeId,
    /// Clients and peers connect here.
    pub listen: SocketAddr,
    /// Where HTTP `/metrics` and `/status` are served, if anywhere.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metrics_listen: Option<SocketAddr>,
    /// Where Redis clients connect (RESP), if anywhere; only a group whose workload is
    /// `redis` serves it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp_listen: Option<SocketAddr>,
    /// The password Redis clients give (`AUTH`, `HELLO … AUTH`) before any other command, as
    /// Redis's `requirepass`; none by default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requirepass: Option<Secret>,
    /// With no `requirepass`, serve Redis clients on the loopback interface only and tell
    /// any other how to set a password, as Redis's protected mode (true by default).
    #[serde(default = "protected_mode_default", skip_serializing_if = "is_true")]
    pub protected_mode: bool,
    /// Speak Redis Cluster's protocol on the RESP port (`CLUSTER SLOTS`, `SHARDS`, `NODES`,
    /// `-MOVED` for a write sent to a node that is not the primary), so that cluster clients
    /// (`redis-cli -c`, redis-py's `RedisCluster`, go-redis's `ClusterClient`) find the
    /// primary by themselves and follow it across a failover. False by default: the port
    /// answers as one Redis server (a write on a backup gets `READONLY`).
    #[serde(default, skip_serializing_if = "is_false")]
    pub redis_cluster: bool,
    /// The secret every node of the cluster shares: each peer link (replication, heartbeats,
    /// the config store, state transfer) proves both ends know it, and every frame on it
    /// carries a MAC. None by default: peer links are then accepted from loopback only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub peer_secret: Option<Secret>,
    /// This node's role in the group's current view. Required without
    /// `[[cluster.groups]]`; with it, each group's members say the roles and this is absent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// The group this node replicates.
    pub group: GroupConfig,
    /// The other members of the group (TOML `[[peers]]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub peers: Vec<PeerConfig>,
    /// Redis users besides `default` (TOML `[[users]]`), each with a password and rights.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub users: Vec<UserConfig>,
    /// Limits and timeouts (an optional table, every field defaulted).
    #[serde(default)]
    pub tuning: Tuning,
    /// Cluster mode (an optional table): the roles above are only the first view; failure
    /// detection and view changes through the config store move them on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ClusterTable>,
    /// The node's write-ahead log (an optional table). In cluster mode a node always keeps
    /// one, under `cluster.data_dir` unless `log.dir` says where; otherwise only with a
    /// `[log]` table that names its `dir`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub log: Option<LogTable>,
    /// TLS (an optional table): the node's certificate and key, for its RESP port.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsTable>,
}

/// A node's TLS certificate and key (PEM files, read when the node starts).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TlsTable {
    /// The node's certificate chain, its own certificate first.
    pub cert: PathBuf,
    /// The certificate's private key (PKCS#8, PKCS#1 or SEC1).
    pub key: PathBuf,
    /// The RESP port speaks TLS only (`redis-cli --tls --cacert CA`); true by default.
    #[serde(default = "protected_mode_default")]
    pub resp: bool,
    /// Peer links run TLS: each node shows its certificate, which the cluster's CA (`ca`)
    /// signed for `node-ID` (its node id), and takes only peers whose certificates do
    /// (`peer_secret` is then not used). False by default.
    #[serde(default)]
    pub peers: bool,
    /// The native client port speaks TLS 1.3 after each client's `Hello` (the stub's
    /// `ClientConfig::tls` trusts `ca`). False by default.
    #[serde(default)]
    pub native: bool,
    /// The cluster's CA certificate (PEM), which signed every node's: needed by `peers`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca: Option<PathBuf>,
}

/// Where and how a node keeps its write-ahead log.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogTable {
    /// The directory of the log's segment files (created if missing); default in cluster
    /// mode `<cluster.data_dir>/log`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dir: Option<PathBuf>,
    /// When the log is synced on its own: "always" (every group of appends), "every:MS"
    /// ("every:100" by default), or "never" (left to the operating system). A record a
    /// `durable` reply waits for is synced at once whatever this says.
    #[serde(default = "default_fsync", with = "fsync_text")]
    pub fsync: SyncPolicy,
    /// A segment file is closed at this size in MiB, 1 to 1024 (default 64).
    #[serde(default = "default_segment_mib")]
    pub segment_mib: u64,
    /// A backup checkpoints its database once this many MiB of batches were applied since
    /// its last checkpoint, 1 to 65536 (default 128); the log then drops what it covers.
    #[serde(default = "default_checkpoint_mib")]
    pub checkpoint_mib: u64,
}

impl Default for LogTable {
    fn default() -> LogTable {
        LogTable {
            dir: None,
            fsync: default_fsync(),
            segment_mib: default_segment_mib(),
            checkpoint_mib: default_checkpoint_mib(),
        }
    }
}

/// Every 100 ms: a power loss of the whole cluster may take the last 100 ms of what the rules
/// other than `durable` acknowledged (they are in the memory of several nodes), and the log
/// costs the commit path little; a `durable` record is synced at once whatever the policy.
fn default_fsync() -> SyncPolicy {
    SyncPolicy::EveryMs(100)
}

fn default_segment_mib() -> u64 {
    64
}

/// The largest `log.segment_mib`.
const SEGMENT_MIB_MAX: u64 = 1024;

/// Twice a default segment file: a restart replays at most about this much of the log after
/// its checkpoint, a few tenths of a second.
fn default_checkpoint_mib() -> u64 {
    128
}

/// The largest `log.checkpoint_mib`.
const CHECKPOINT_MIB_MAX: u64 = 65536;

/// The write-ahead log a node keeps, with its directory resolved.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogSettings {
    pub dir: PathBuf,
    pub fsync: SyncPolicy,
    pub segment_bytes_max: u64,
    /// Batch bytes a backup applies between checkpoints.
    pub checkpoint_bytes: u64,
}

mod fsync_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tandem_node::SyncPolicy;

    pub fn serialize<S: Serializer>(policy: &SyncPolicy, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(policy)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SyncPolicy, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map_err(|error| D::Error::custom(format!("config field `log.fsync`: {error}")))
    }
}

/// How a node takes part in the cluster: where the config store keeps its state, and the
/// timeouts of failover, in ticks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterTable {
    /// Where the config store persists its Raft state (created if missing).
    pub data_dir: PathBuf,
    /// The config store's voters (default: the three lowest node ids, or all if fewer).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub voters: Option<Vec<NodeId>>,
    /// A backup reports for a new view only this many ticks after it last heard the primary,
    /// ≥ 3 and < `tuning.suspect_ticks` (default 4). The primary serves 1-safe replies and
    /// calls without a commit (reads) only within `lease_ticks − 2` ticks of a heartbeat
    /// every backup echoed: a backup notices frames at its next tick (one tick), and a reply
    /// the primary releases leaves at the end of its executor's turn (bounded to well under a
    /// tick).
    #[serde(default = "default_lease_ticks")]
    pub lease_ticks: u64,
    /// Ticks the coordinator waits for more reports once it has enough (default 5: more than
    /// `lease_ticks`, so a backup that still heard the primary has time to report).
    #[serde(default = "default_collect_ticks")]
    pub collect_ticks: u64,
    /// Raft election timeout in ticks, ≥ 4 (default 50: every vote is fsynced first, and the
    /// Raft leader is kept off the primary, so a primary's failure needs no election).
    #[serde(default = "default_election_ticks")]
    pub election_ticks: u64,
    /// The cluster's groups (TOML `[[cluster.groups]]`), each with its members and, if any
    /// entry gives them, its slots. None: the cluster is one group, `group.id`, whose members
    /// are this node and its peers in the roles they are given.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub groups: Vec<GroupEntry>,
}

/// The most entries `[[cluster.groups]]` may hold: each group a node serves costs it a
/// segment, a log and a thread's worth of memory, and every node holds a view of each group,
/// so a cluster far beyond a thousand groups would not fit the machines it runs on.
pub const CLUSTER_GROUPS_MAX: usize = 1024;

/// One group of the cluster as `[[cluster.groups]]` names it. `[group]` gives the settings
/// every group shares (workload, segment size, strategy, seed, mode, first view number) and
/// the safety rule of an entry that gives none.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupEntry {
    /// The group's id, unique among the entries.
    pub id: u32,
    /// The group's members by node id: the primary of the first view, then its backups.
    pub members: Vec<NodeId>,
    /// When the group acknowledges a commit, written as `group.safety` (default: that one).
    #[serde(
        default,
        skip_serializing_if = "Option::is_none",
        with = "group_safety_text"
    )]
    pub safety: Option<Safety>,
    /// The hash slots the group serves, as inclusive ranges `"A-B"` or single slots `"A"`.
    /// Either every entry gives its slots or none does (the slots are then split evenly in
    /// the entries' order).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slots: Option<Vec<String>>,
}

/// One group of the cluster as this node's configuration gives it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupPlan {
    pub id: u32,
    /// The primary of the first view, then its backups.
    pub members: Vec<NodeId>,
    pub safety: Safety,
}

impl ClusterTable {
    /// Cluster mode with its state under `data_dir` and every timeout at its default.
    pub fn new(data_dir: PathBuf) -> ClusterTable {
        ClusterTable {
            data_dir,
            voters: None,
            lease_ticks: default_lease_ticks(),
            collect_ticks: default_collect_ticks(),
            election_ticks: default_election_ticks(),
            groups: Vec::new(),
        }
    }
}

fn default_lease_ticks() -> u64 {
    4
}

fn default_collect_ticks() -> u64 {
    5
}

fn default_election_ticks() -> u64 {
    50
}

impl NodeConfig {
    /// This configuration for `member` of a group of `members`: its id, address and role, and
    /// every other member as a peer.
    pub fn for_member(&self, member: &PeerConfig, members: &[PeerConfig]) -> NodeConfig {
        let mut config = self.clone();
        config.node_id = member.node_id;
        config.listen = member.address;
        config.resp_listen = member.resp;
        config.role = member.role;
        config.peers = members
            .iter()
            .filter(|peer| peer.node_id != member.node_id)
            .cloned()
            .collect();
        config
    }

    /// Where `SAVE` and `BGSAVE` write the node's snapshot: `dump.rdb` (Redis's
    /// `dbfilename`) beside the log's directory (a node of `tandem up`: its own directory);
    /// `None` on a node that keeps no log, and so no files.
    pub fn snapshot_path(&self) -> Option<PathBuf> {
        let log = self.log_settings()?;
        Some(log.dir.parent().unwrap_or(Path::new(".")).join("dump.rdb"))
    }

    /// The write-ahead log this node keeps, if any: `[log]`'s settings, its directory
    /// defaulting to `<cluster.data_dir>/log` in cluster mode, where a node always keeps one.
    pub fn log_settings(&self) -> Option<LogSettings> {
        let table = match (&self.log, &self.cluster) {
            (Some(table), _) => table.clone(),
            (None, Some(_)) => LogTable::default(),
            (None, None) => return None,
        };
        let dir = match (&table.dir, &self.cluster) {
            (Some(dir), _) => dir.clone(),
            (None, Some(cluster)) => cluster.data_dir.join("log"),
            (None, None) => return None,
        };
        Some(LogSettings {
            dir,
            fsync: table.fsync,
            segment_bytes_max: table.segment_mib << 20,
            checkpoint_bytes: table.checkpoint_mib << 20,
        })
    }

    fn validate_log(&self) -> Result<(), ConfigError> {
        if let Some(table) = &self.log {
            if table.dir.is_none() && self.cluster.is_none() {
                return Err(invalid(
                    "log.dir",
                    "name the directory of the write-ahead log (in cluster mode it defaults \
                     to <cluster.data_dir>/log)",
                ));
            }
            if !(1..=SEGMENT_MIB_MAX).contains(&table.segment_mib) {
                return Err(invalid(
                    "log.segment_mib",
                    format!(
                        "{} MiB is out of range; use 1 to {SEGMENT_MIB_MAX}",
                        table.segment_mib
                    ),
                ));
            }
            if !(1..=CHECKPOINT_MIB_MAX).contains(&table.checkpoint_mib) {
                return Err(invalid(
                    "log.checkpoint_mib",
                    format!(
                        "{} MiB is out of range; use 1 to {CHECKPOINT_MIB_MAX}",
                        table.checkpoint_mib
                    ),
                ));
            }
        }
        if self.cluster.is_some() && self.group.mode == Mode::Passive {
            return Err(invalid(
                "group.mode",
                "a cluster needs mode = \"active\": a passive backup executes nothing, so it \
                 can never take over as primary; use active mode, or leave out the [cluster] \
                 table for a static primary and passive backups",
            ));
        }
        self.validate_durable(self.group.safety, "group.safety")
    }

    /// The rules a durable `safety` (given in `field`) adds: active backups, and a log.
    fn validate_durable(&self, safety: Safety, field: &str) -> Result<(), ConfigError> {
        if let Safety::Durable(_) = safety
            && self.group.mode == Mode::Passive
        {
            return Err(invalid(
                field,
                "durable needs mode = \"active\": a passive backup keeps the primary's memory \
                 writes, not redo records, and a restart cannot rebuild them from its log; use \
                 active mode, or another safety rule",
            ));
        }
        if let Safety::Durable(_) = safety
            && self.log_settings().is_none()
        {
            return Err(invalid(
                field,
                "durable needs a write-ahead log on every member; add a [log] table with its \
                 dir, or run in cluster mode",
            ));
        }
        Ok(())
    }

    /// The config store's voters: as configured, or the three lowest node ids.
    pub fn voters(&self) -> Vec<NodeId> {
        if let Some(voters) = self.cluster.as_ref().and_then(|c| c.voters.clone()) {
            return voters;
        }
        let mut ids: Vec<NodeId> = std::iter::once(self.node_id)
            .chain(self.peers.iter().map(|peer| peer.node_id))
            .collect();
        ids.sort_unstable();
        ids.truncate(3);
        ids
    }

    fn validate_cluster(&self) -> Result<(), ConfigError> {
        let Some(cluster) = &self.cluster else {
            return Ok(());
        };
        let leaves_a_lease = tandem_replication::primary_lease_ticks(
            cluster.lease_ticks,
            crate::primary::RUNTIME_LEASE_MARGINS,
        )
        .is_some();
        if !leaves_a_lease || cluster.lease_ticks >= self.tuning.suspect_ticks {
            return Err(invalid(
                "cluster.lease_ticks",
                format!(
                    "{} must be ≥ 3 (the primary keeps two ticks less) and below \
                     tuning.suspect_ticks ({}), so a lease runs out before its holder is \
                     suspected (tuning.suspect_ticks must then be ≥ 4)",
                    cluster.lease_ticks, self.tuning.suspect_ticks
                ),
            ));
        }
        if cluster.election_ticks < 4 {
            return Err(invalid(
                "cluster.election_ticks",
                "Raft needs an election timeout of at least 4 ticks; use ≥ 4",
            ));
        }
        let members: Vec<NodeId> = std::iter::once(self.node_id)
            .chain(self.peers.iter().map(|peer| peer.node_id))
            .collect();
        for voter in self.voters() {
            if !members.contains(&voter) {
                return Err(invalid(
                    "cluster.voters",
                    format!("node {voter} is not this node or one of its peers; list members only"),
                ));
            }
        }
        if self.voters().is_empty() {
            return Err(invalid("cluster.voters", "name at least one voter"));
        }
        Ok(())
    }
}

/// The groups of `[[cluster.groups]]`, resolved for the runtime, and their rules.
impl NodeConfig {
    /// The entries of `[[cluster.groups]]`: none outside cluster mode or without the table.
    fn group_entries(&self) -> &[GroupEntry] {
        self.cluster
            .as_ref()
            .map_or(&[], |cluster| cluster.groups.as_slice())
    }

    /// This node's id, then its peers', as the configuration lists them.
    fn node_ids(&self) -> impl Iterator<Item = NodeId> + '_ {
        std::iter::once(self.node_id).chain(self.peers.iter().map(|peer| peer.node_id))
    }

    /// Every group of the cluster (one for a config without [[cluster.groups]]: group.id,
    /// with this node and its peers as members, the primary first — the one whose role is
    /// primary — then the backups in ascending node id, safety = group.safety).
    pub fn group_plans(&self) -> Vec<GroupPlan> {
        let entries = self.group_entries();
        if !entries.is_empty() {
            let plan = |entry: &GroupEntry| GroupPlan {
                id: entry.id,
                members: entry.members.clone(),
                safety: entry.safety.unwrap_or(self.group.safety),
            };
            return entries.iter().map(plan).collect();
        }
        // A validated configuration has exactly one primary; an unvalidated one without any
        // still gets a group, led by this node.
        let primary = match self.role {
            Some(Role::Primary) => self.node_id,
            _ => (self.peers.iter())
                .find(|peer| peer.role == Some(Role::Primary))
                .map_or(self.node_id, |peer| peer.node_id),
        };
        let mut backups: Vec<NodeId> = self.node_ids().filter(|&id| id != primary).collect();
        backups.sort_unstable();
        backups.dedup();
        vec![GroupPlan {
            id: self.group.id,
            members: std::iter::once(primary).chain(backups).collect(),
            safety: self.group.safety,
        }]
    }

    /// The slot table of the cluster's first map: the entries' slots, or an even split in
    /// entry order; for a config without [[cluster.groups]] the empty table (one group serves
    /// every slot).
    ///
    /// Panics on slots [`NodeConfig::validate`] refuses.
    pub fn slot_table(&self) -> SlotTable {
        match self.slot_table_checked() {
            Ok(table) => table,
            Err(error) => panic!("slot_table of an invalid configuration: {error}"),
        }
    }

    /// Where `node` (this node or a peer) serves RESP for `group`, if it serves RESP: each
    /// group a node serves in has an endpoint of its own, at its RESP address (`resp_listen`,
    /// a peer's `resp`) with the port moved on by the group's place among the cluster's groups
    /// (0 for the first, and for a cluster of one group). `None` for a group the cluster
    /// does not hold.
    pub fn resp_address(&self, node: NodeId, group: u32) -> Option<SocketAddr> {
        let base = match node == self.node_id {
            true => self.resp_listen?,
            false => self.peers.iter().find(|peer| peer.node_id == node)?.resp?,
        };
        // The entries' order, without making the plans: this is asked per node and group.
        let entries = self.group_entries();
        let place = match entries.is_empty() {
            true => (group == self.group.id).then_some(0)?,
            false => entries.iter().position(|entry| entry.id == group)?,
        };
        let port = u16::try_from(usize::from(base.port()) + place).ok()?;
        Some(SocketAddr::new(base.ip(), port))
    }

    /// The groups this node is a member of (the ids of the plans whose members include
    /// node_id), in plan order.
    pub fn served_groups(&self) -> Vec<u32> {
        (self.group_plans().into_iter())
            .filter(|plan| plan.members.contains(&self.node_id))
            .map(|plan| plan.id)
            .collect()
    }

    /// The rules of `[[cluster.groups]]`: unique ids, members among the configured nodes,
    /// each group's safety against its backups, this node in some group, and slots that
    /// cover every slot once. `group.id` keeps its default, since each entry names its own.
    fn validate_groups(&self) -> Result<(), ConfigError> {
        let entries = self.group_entries();
        if entries.is_empty() {
            return Ok(());
        }
        if entries.len() > CLUSTER_GROUPS_MAX {
            return Err(invalid(
                "cluster.groups",
                format!(
                    "{} groups; a cluster has at most {CLUSTER_GROUPS_MAX} (each costs its \
                     members a segment, a log and a thread's worth of memory), so merge some",
                    entries.len()
                ),
            ));
        }
        if self.group.id != 0 {
            return Err(invalid(
                "group.id",
                "with [[cluster.groups]] each group's id is given there; remove group.id (or \
                 leave it 0)",
            ));
        }
        for (index, entry) in entries.iter().enumerate() {
            if entry.id == tandem_wire::GROUP_ANY {
                return Err(invalid(
                    format!("cluster.groups[{index}].id"),
                    format!(
                        "{} is the id a client names for any group; give the group a lower id",
                        entry.id
                    ),
                ));
            }
            if let Some(first) = entries[..index].iter().position(|e| e.id == entry.id) {
                return Err(invalid(
                    format!("cluster.groups[{index}].id"),
                    format!(
                        "group {} is also `cluster.groups[{first}].id`; give each group its \
                         own id",
                        entry.id
                    ),
                ));
            }
            self.validate_group_members(index, entry)?;
            self.validate_group_safety(index, entry)?;
        }
        // A node's cluster core runs the groups it serves in, at least one.
        if self.served_groups().is_empty() {
            return Err(invalid(
                "cluster.groups",
                format!(
                    "node {} is a member of no group in cluster.groups; add it to one's members",
                    self.node_id
                ),
            ));
        }
        self.slot_table_checked()?;
        self.validate_group_resp()
    }

    /// Each group's RESP endpoint is the RESP address's port moved on by the group's place:
    /// every node's last one must be a port, and none of this node's may be another of its
    /// listeners.
    fn validate_group_resp(&self) -> Result<(), ConfigError> {
        let last = self.group_entries().len() - 1;
        // Each endpoint serves its group's slots alone: the rest are another group's, which
        // only Redis Cluster's protocol can send a client to.
        if last > 0 && self.resp_listen.is_some() && !self.redis_cluster {
            return Err(invalid(
                "redis_cluster",
                "a cluster of several groups serves each group's slots at that group's RESP \
                 endpoints, and sends a client elsewhere with -MOVED: set redis_cluster = true \
                 (clients then route by slot: redis-cli -c, RedisCluster, ClusterClient)",
            ));
        }
        let bases = std::iter::once(("resp_listen".to_owned(), self.resp_listen)).chain(
            (self.peers.iter().enumerate())
                .map(|(i, peer)| (format!("peers[{i}].resp"), peer.resp)),
        );
        for (field, base) in bases {
            let Some(base) = base else { continue };
            if usize::from(base.port()) + last > usize::from(u16::MAX) {
                return Err(invalid(
                    field,
                    format!(
                        "{base}: each of the {} groups has a RESP port of its own, this one's \
                         port and the next {last}, which run past 65535; use a lower port",
                        last + 1
                    ),
                ));
            }
        }
        let others = [Some(self.listen), self.metrics_listen];
        for group in self.served_groups() {
            let address = self.resp_address(self.node_id, group);
            if address.is_some_and(|a| a.port() != 0 && others.contains(&Some(a))) {
                return Err(invalid(
                    "resp_listen",
                    format!(
                        "group {group}'s RESP port ({}) is another listener of this node's; \
                         each group's port is resp_listen's moved on by its place in \
                         cluster.groups, so move resp_listen",
                        address.expect("checked above")
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A group's members: at least one, at most a `Members` frame carries, each once, each
    /// this node or a peer.
    fn validate_group_members(&self, index: usize, entry: &GroupEntry) -> Result<(), ConfigError> {
        let field = format!("cluster.groups[{index}].members");
        if entry.members.is_empty() {
            return Err(invalid(
                field,
                "a group needs a member; list its node ids, the first view's primary first",
            ));
        }
        // A node names every member of its group in its answer to a client's `Members`
        // frame, which carries at most MEMBERS_MAX.
        if entry.members.len() > tandem_wire::MEMBERS_MAX {
            return Err(invalid(
                field,
                format!(
                    "{} members; a group has at most {}, so list fewer",
                    entry.members.len(),
                    tandem_wire::MEMBERS_MAX
                ),
            ));
        }
        for (at, member) in entry.members.iter().enumerate() {
            if entry.members[..at].contains(member) {
                return Err(invalid(
                    field,
                    format!("node {member} is listed twice; list each member once"),
                ));
            }
            if !self.node_ids().any(|id| id == *member) {
                return Err(invalid(
                    field,
                    format!(
                        "node {member} is neither this node (node_id = {}) nor one of its \
                         peers; add a [[peers]] table for it, or remove it from the group",
                        self.node_id
                    ),
                ));
            }
        }
        Ok(())
    }

    /// A group's safety rule, its own or `group.safety`, against the group's backups (every
    /// member but the first) and the rules a durable one adds.
    fn validate_group_safety(&self, index: usize, entry: &GroupEntry) -> Result<(), ConfigError> {
        let backups = entry.members.len().saturating_sub(1);
        let Some(safety) = entry.safety else {
            self.group.safety.validate(backups).map_err(|error| {
                invalid(
                    "group.safety",
                    format!(
                        "the rule of cluster.groups[{index}] (group {}, which gives none of its \
                         own): {error}; or give that group its own safety",
                        entry.id
                    ),
                )
            })?;
            return Ok(());
        };
        let field = format!("cluster.groups[{index}].safety");
        safety
            .validate(backups)
            .map_err(|error| invalid(&field, error.to_string()))?;
        self.validate_durable(safety, &field)
    }

    /// The slot table the entries give, or why they give none.
    fn slot_table_checked(&self) -> Result<SlotTable, ConfigError> {
        let entries = self.group_entries();
        if entries.iter().all(|entry| entry.slots.is_none()) {
            let ids: Vec<GroupId> = entries.iter().map(|entry| entry.id).collect();
            return Ok(SlotTable::even(&ids));
        }
        if let Some(index) = entries.iter().position(|entry| entry.slots.is_none()) {
            return Err(invalid(
                format!("cluster.groups[{index}].slots"),
                "other groups give their slots, so this one must too: either every group \
                 lists its slots or none does (an even split); add this group's, or remove \
                 every group's",
            ));
        }
        // Each range with the path of the text it came from, in slot order.
        let mut ranges: Vec<(SlotRange, String)> = Vec::new();
        for (index, entry) in entries.iter().enumerate() {
            for (at, text) in entry.slots.iter().flatten().enumerate() {
                let field = format!("cluster.groups[{index}].slots[{at}]");
                let (first, last) = slot_range(text).map_err(|message| invalid(&field, message))?;
                let group = entry.id;
                ranges.push((SlotRange { first, last, group }, field));
            }
        }
        ranges.sort_by_key(|(range, _)| range.first);
        let plain: Vec<SlotRange> = ranges.iter().map(|(range, _)| *range).collect();
        SlotTable::from_ranges(plain).map_err(|error| slot_error(error, &ranges))?;
        Ok(SlotTable::from_ranges(merged(&ranges)).expect("merging keeps the cover"))
    }
}

/// `ranges` (in slot order, every slot in one) with each run of adjacent ranges of one
/// group made one range, as a slot table keeps them.
fn merged(ranges: &[(SlotRange, String)]) -> Vec<SlotRange> {
    let mut merged: Vec<SlotRange> = Vec::with_capacity(ranges.len());
    for &(range, _) in ranges {
        match merged.last_mut() {
            Some(last) if last.group == range.group && last.last + 1 == range.first => {
                last.last = range.last;
            }
            _ => merged.push(range),
        }
    }
    merged
}

/// Why the entries' `ranges` (in slot order, each with the path of its text) do not cover
/// every slot once, naming the entries at fault.
fn slot_error(error: SlotError, ranges: &[(SlotRange, String)]) -> ConfigError {
    let last_slot = SLOT_COUNT - 1;
    match error {
        SlotError::Overlap { slot } => {
            let mut holders = ranges
                .iter()
                .filter(|(range, _)| (range.first..=range.last).contains(&slot));
            let first = holders.next().map_or("", |(_, field)| field.as_str());
            let second = holders.next().map_or("cluster.groups", |(_, field)| field);
            invalid(
                second,
                format!("slot {slot} is also in `{first}`; give each slot to one group"),
            )
        }
        SlotError::Unserved { slot } => invalid(
            "cluster.groups",
            format!(
                "slot {slot} is in no group's slots; every slot of 0-{last_slot} must be in \
                 exactly one, so add it to a group's slots"
            ),
        ),
        other => invalid("cluster.groups", format!("{other}; fix the groups' slots")),
    }
}

/// A slot range as `[[cluster.groups]]` writes it: `"A-B"` (inclusive, A ≤ B) or one slot
/// `"A"`, every slot below [`SLOT_COUNT`].
fn slot_range(text: &str) -> Result<(u16, u16), String> {
    let last_slot = SLOT_COUNT - 1;
    let form = || {
        format!(
            "{text:?} is not a slot range; write \"A-B\" (A ≤ B ≤ {last_slot}) or one \
             slot \"A\""
        )
    };
    let slot = |part: &str| -> Result<u16, String> {
        let number: u64 = part.trim().parse().map_err(|_| form())?;
        u16::try_from(number)
            .ok()
            .filter(|&slot| slot < SLOT_COUNT)
            .ok_or_else(|| {
                format!("slot {number} is past the last slot, {last_slot}; use 0 to {last_slot}")
            })
    };
    let (first, last) = match text.split_once('-') {
        Some((first, last)) => (slot(first)?, slot(last)?),
        None => (slot(text)?, slot(text)?),
    };
    if first > last {
        return Err(format!(
            "{text:?} runs backwards; write the lower slot first (\"{last}-{first}\")"
        ));
    }
    Ok((first, last))
}

/// A member's role in its group's view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Executes calls and ships redo records.
    Primary,
    /// Receives (and, in active mode, applies) the primary's records.
    Backup,
}

impl Role {
    /// The name used in configuration files: `primary` or `backup`.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Primary => "primary",
            Role::Backup => "backup",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl From<Role> for tandem_wire::Role {
    fn from(role: Role) -> tandem_wire::Role {
        match role {
            Role::Primary => tandem_wire::Role::Primary,
            Role::Backup => tandem_wire::Role::Backup,
        }
    }
}

/// The group a node replicates and how.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GroupConfig {
    /// The group's id (default 0).
    #[serde(default)]
    pub id: u32,
    /// The view the listed membership belongs to, ≥ 1 (default 1).
    #[serde(default = "default_view")]
    pub view: u64,
    /// The name of the data model the group serves (required). The runtime never resolves
    /// it: the program that starts the node does (`tandem` knows `debit-credit` and
    /// `order-entry`) and hands the runtime the model itself.
    pub workload: String,
    /// The segment's size in MiB, 1 to 65536 (default 50).
    #[serde(default = "default_db_mib")]
    pub db_mib: usize,
    /// The logging strategy, written `v0` to `v3` (default v3).
    #[serde(default = "default_strategy", with = "strategy_text")]
    pub strategy: Strategy,
    /// Seed of the deterministic initial load (default 1).
    #[serde(default = "default_seed")]
    pub seed: u64,
    /// When a commit is acknowledged, written as `Safety` displays (default `2-safe`).
    #[serde(default = "default_safety", with = "safety_text")]
    pub safety: Safety,
    /// Active or passive backups (default active).
    #[serde(default)]
    pub mode: Mode,
    /// Capacity of a passive V3 backup's undo log in KiB, ≥ 4 (default 1024).
    #[serde(default = "default_undo_log_kib")]
    pub undo_log_kib: usize,
}

/// How backups follow the primary (seed 000, sections 5 and 6).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Backups receive redo records and apply them with their own CPU.
    #[default]
    Active,
    /// Backups store the primary's double writes (data and undo log) without executing
    /// anything; at takeover the mirror is rolled back to the last commit.
    Passive,
}

impl Mode {
    /// The name used in configuration files: `active` or `passive`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Active => "active",
            Mode::Passive => "passive",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Another member of the group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PeerConfig {
    pub node_id: NodeId,
    /// Where the member listens (its own `listen`).
    pub address: SocketAddr,
    /// The member's role in the group's current view: required without
    /// `[[cluster.groups]]`, absent with it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<Role>,
    /// Where the member serves RESP (its own `resp_listen`), so that a node that is not the
    /// primary can tell a Redis client where the primary is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp: Option<SocketAddr>,
}

/// What the client ports hold client connections to (from [`Tuning`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClientLimits {
    /// Client connections served at once, RESP and native together.
    pub maxclients: usize,
    /// Unread reply bytes one connection may hold before it is closed; `None`: no limit.
    pub output_buffer_bytes: Option<usize>,
    /// Unread reply bytes all connections together may hold before the one holding the most
    /// is closed; `None`: no limit.
    pub output_buffers_total_bytes: Option<usize>,
}

impl ClientLimits {
    /// The most one reply may hold unsent before its connection is closed for it (the
    /// smaller of the two output buffer limits), and the setting that says so.
    pub fn reply_limit(&self) -> Option<tandem_redis::cmd::sync::ReplyLimit> {
        let one = self
            .output_buffer_bytes
            .map(|bytes| (bytes, "tuning.output_buffer_mib"));
        let total = self
            .output_buffers_total_bytes
            .map(|bytes| (bytes, "tuning.output_buffers_total_mib"));
        [one, total]
            .into_iter()
            .flatten()
            .min_by_key(|(bytes, _)| *bytes)
            .map(|(bytes, setting)| tandem_redis::cmd::sync::ReplyLimit { bytes, setting })
    }
}

impl Default for ClientLimits {
    fn default() -> ClientLimits {
        Tuning::default().client_limits()
    }
}

/// Limits and timeouts. Every field has a default; the relations between them are checked
/// by [`NodeConfig::validate`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Tuning {
    /// Length of one tick in microseconds, 10 to 1,000,000 (default 1000).
    pub tick_us: u64,
    /// Idle ticks after which the primary sends a heartbeat, ≥ 1 (default 1).
    pub heartbeat_ticks: u64,
    /// Silent ticks after which a backup suspects the primary, > `heartbeat_ticks`
    /// (default 30). The silence allowed grows with the jitter observed, up to 4 times this;
    /// a connection the primary's process closed is acted on at once. Measured on this
    /// project's 2-core VM: under `durable` load (three nodes syncing the same disk) every
    /// process stalled 5–18 ms about every 100 ms, and the data plane with them; with 10 the
    /// primary moved within two seconds of every `bench durability` run, with 30 never.
    pub suspect_ticks: u64,
    /// A primary whose executor has not begun a turn for this many milliseconds (one call
    /// that runs for ever) stops saying it is alive, and its backups replace it, ≥ 10
    /// (default 1000). Shorter stalls (a checksum, a long script) only delay replies: the
    /// links keep the backups hearing the primary meanwhile.
    pub executor_stall_ms: u64,
    /// The largest batch shipped at once in bytes, ≥ 64 (default 65536).
    pub batch_bytes_max: usize,
    /// Most records the retained tail holds, ≥ 1 (default 1,000,000).
    pub tail_records_max: u64,
    /// Most bytes the retained tail holds, ≥ 2 × `batch_bytes_max` (default 1 GiB + 4 MiB:
    /// one write's record may take half of it, and Redis's largest value is 512 MiB).
    pub tail_bytes_max: usize,
    /// Longest frame accepted from a connection once it proved itself, ≥ `batch_bytes_max` +
    /// 4096 and ≤ 2^32 − 1 (default 1 GiB + 2 MiB: a record or a reply of Redis's largest
    /// value, 512 MiB, twice over).
    pub max_frame_len: usize,
    /// Client connections served at once, RESP and native together, ≥ 1 (default 10,000, as
    /// Redis's `maxclients`); one more is told `-ERR max number of clients reached`.
    pub maxclients: usize,
    /// Replies one client connection may leave unread, in MiB, before the node closes it
    /// (Redis's `client-output-buffer-limit normal` hard limit); 0: no limit (default 1024:
    /// a reply of Redis's largest value, 512 MiB, fits twice over).
    pub output_buffer_mib: usize,
    /// Replies all client connections together may leave unread, in MiB, before the node
    /// closes the one holding the most (as Redis's `maxmemory-clients`); 0: no limit
    /// (default 2048).
    pub output_buffers_total_mib: usize,
    /// A script that has run this many milliseconds makes the node answer other clients
    /// `-BUSY` (Redis's `busy-reply-threshold`, default 5000); 0: never. The database's own,
    /// once `CONFIG SET busy-reply-threshold` gave it one, holds instead.
    pub busy_reply_threshold_ms: u64,
    /// A script that has run this many milliseconds is stopped and rolled back, ≥ 100 or 0
    /// for no limit (default 30,000). The executor-stall rule waits this long plus
    /// `executor_stall_ms` for a script, so no script under it replaces the primary.
    pub script_time_limit_ms: u64,
}

impl Default for Tuning {
    fn default() -> Tuning {
        Tuning {
            tick_us: 1000,
            heartbeat_ticks: 1,
            // Under `durable` load this machine stalls every process 5 to 18 ms about every
            // 100 ms: 10 moved the primary within seconds, 30 never (docs/measurements.md);
            // a kill is seen at once anyway, by its closed connection.
            suspect_ticks: 30,
            executor_stall_ms: 1000,
            batch_bytes_max: 64 << 10,
            tail_records_max: 1_000_000,
            tail_bytes_max: TAIL_BYTES_MAX_DEFAULT,
            max_frame_len: tandem_wire::MAX_FRAME_LEN_DEFAULT,
            maxclients: MAXCLIENTS_DEFAULT,
            output_buffer_mib: 1024,
            output_buffers_total_mib: 2048,
            busy_reply_threshold_ms: 5000,
            script_time_limit_ms: 30_000,
        }
    }
}

impl Tuning {
    /// What the client ports hold each client connection to.
    pub fn client_limits(&self) -> ClientLimits {
        let bytes = |mib: usize| (mib > 0).then_some(mib << 20);
        ClientLimits {
            maxclients: self.maxclients,
            output_buffer_bytes: bytes(self.output_buffer_mib),
            output_buffers_total_bytes: bytes(self.output_buffers_total_mib),
        }
    }
}

/// The retained tail's default bound: room for one record of Redis's largest value
/// (512 MiB), which may take half of it, and the batches around it.
pub const TAIL_BYTES_MAX_DEFAULT: usize = (1 << 30) + (4 << 20);

/// The shortest script time limit accepted (0 aside, which means none).
pub const SCRIPT_TIME_LIMIT_MS_MIN: u64 = 100;

/// Redis's default `maxclients`.
pub const MAXCLIENTS_DEFAULT: usize = 10_000;
/// The most `maxclients` may say: every connection holds a file descriptor.
const MAXCLIENTS_MAX: usize = 1 << 20;
/// The most an output buffer limit may say, in MiB (what a MiB count can hold in bytes).
const OUTPUT_BUFFER_MIB_MAX: usize = 1 << 30;

const DB_MIB_MAX: usize = 65536;
const UNDO_LOG_KIB_MIN: usize = 4;
const TICK_US_MIN: u64 = 10;
const TICK_US_MAX: u64 = 1_000_000;
const BATCH_BYTES_MIN: usize = 64;
/// The shortest executor stall that replaces a primary.
const EXECUTOR_STALL_MS_MIN: u64 = 10;
/// Room a frame needs beyond its batch: the envelope, the batch header and slack for
/// control fields.
const FRAME_OVERHEAD: usize = 4096;

fn default_view() -> u64 {
    1
}

fn default_db_mib() -> usize {
    50
}

fn default_strategy() -> Strategy {
    Strategy::V3InlineLog
}

fn default_seed() -> u64 {
    1
}

fn default_safety() -> Safety {
    Safety::DEFAULT
}

fn default_undo_log_kib() -> usize {
    1024
}

/// `group.strategy` as its short name; a bad name's error names the field.
mod strategy_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tandem_memory::Strategy;

    pub fn serialize<S: Serializer>(strategy: &Strategy, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(strategy.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Strategy, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map_err(|error| D::Error::custom(format!("config field `group.strategy`: {error}")))
    }
}

/// `group.safety` as `Safety` displays it; a bad rule's error names the field.
mod safety_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tandem_replication::Safety;

    pub fn serialize<S: Serializer>(safety: &Safety, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(safety)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Safety, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse()
            .map_err(|error| D::Error::custom(format!("config field `group.safety`: {error}")))
    }
}

/// A `cluster.groups` entry's `safety`, optional, as `Safety` displays it; a bad rule's error
/// names the field.
mod group_safety_text {
    use serde::de::Error as _;
    use serde::{Deserialize, Deserializer, Serializer};
    use tandem_replication::Safety;

    pub fn serialize<S: Serializer>(
        safety: &Option<Safety>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match safety {
            Some(safety) => super::safety_text::serialize(safety, serializer),
            None => serializer.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<Safety>, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map(Some).map_err(|error| {
            D::Error::custom(format!("config field `cluster.groups.safety`: {error}"))
        })
    }
}

/// Why a configuration was refused.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file could not be read.
    #[error("cannot read config file `{}`: {error}", path.display())]
    Read { path: PathBuf, error: io::Error },
    /// The text is not TOML, has a value of the wrong type, an unknown key or a missing
    /// field; toml's message shows the key and the line.
    #[error("{message}")]
    Syntax {
        path: Option<PathBuf>,
        /// toml's message, rendered when the file was read (toml's error keeps the whole
        /// text, secrets included, which no `Debug` of this error may show).
        message: String,
    },
    /// A field's value breaks a rule; `field` is its dotted path, `message` says how to fix it.
    #[error("config field `{field}`: {message}")]
    Invalid { field: String, message: String },
}

/// The keys whose values are secrets: a line that holds one is never quoted in an error.
const SECRET_KEYS: [&str; 3] = ["requirepass", "password", "peer_secret"];

/// The tables a node's configuration may hold, as an error about an unknown one lists them.
const KNOWN_TABLES: &str = "[group], [tuning], [cluster], [log], [tls], [[peers]], [[users]]";

/// toml's message (position, snippet and reason), after the file's path if there is one. A
/// table of an unknown name is said to be one, with the tables there are. An error whose
/// lines hold a secret's key is told without its snippet and without any value toml's reason
/// quotes: the line number and the reason remain.
fn syntax_text(path: &Option<PathBuf>, error: &toml::de::Error, text: &str) -> String {
    let span = error.span().map(|span| {
        let start = span.start.min(text.len());
        start..span.end.clamp(start, text.len())
    });
    let line = span
        .as_ref()
        .map(|span| text[..span.start].matches('\n').count() + 1);
    let at = |after: &str| line.map_or_else(String::new, |line| format!("line {line}{after}"));
    let message = if let Some(table) = span.as_ref().and_then(|s| unknown_table(error, text, s)) {
        format!(
            "{}unknown table `{table}`; a node's configuration knows the tables \
             {KNOWN_TABLES} (docs/config.md lists their fields)",
            at(": ")
        )
    } else if span.as_ref().is_none_or(|span| holds_secret(text, span)) {
        format!(
            "{}(not quoted: it holds a secret): {}",
            at(" "),
            without_values(error.message())
        )
    } else {
        error.to_string()
    };
    match path {
        Some(path) => format!("config file `{}`: {}", path.display(), message.trim_end()),
        None => format!("config: {}", message.trim_end()),
    }
}

/// The whole lines of `text` that `span` touches.
fn lines_of<'t>(text: &'t str, span: &std::ops::Range<usize>) -> &'t str {
    let start = text[..span.start].rfind('\n').map_or(0, |at| at + 1);
    let end = text[span.end..]
        .find('\n')
        .map_or(text.len(), |at| span.end + at);
    &text[start..end]
}

/// Whether the lines an error points at name a secret's key (and may hold its value). An
/// error at the start of a line (the end of the text among them) counts the line before it
/// too, since toml shows that line for an error at the end of the text.
fn holds_secret(text: &str, span: &std::ops::Range<usize>) -> bool {
    let start = if text[..span.start].ends_with('\n') {
        text[..span.start - 1].rfind('\n').map_or(0, |at| at + 1)
    } else {
        span.start
    };
    let lines = lines_of(text, &(start..span.end));
    SECRET_KEYS.iter().any(|key| lines.contains(key))
}

/// The table an "unknown field" error points at, as written (`[http]`, `[[peerz]]`), when
/// the field is a top-level table's header.
fn unknown_table(
    error: &toml::de::Error,
    text: &str,
    span: &std::ops::Range<usize>,
) -> Option<String> {
    let field = error
        .message()
        .strip_prefix("unknown field `")?
        .split('`')
        .next()?;
    let header = lines_of(text, span).trim();
    let name = header
        .strip_prefix("[[")
        .and_then(|rest| rest.split("]]").next())
        .or_else(|| {
            header
                .strip_prefix('[')
                .and_then(|rest| rest.split(']').next())
        })?;
    (name.trim() == field).then(|| header.split('#').next().unwrap_or(header).trim().to_owned())
}

/// toml's reason with every quoted value (between backquotes) left out.
fn without_values(message: &str) -> String {
    let mut kept = String::new();
    for (index, part) in message.split('`').enumerate() {
        kept.push_str(if index % 2 == 0 { part } else { "…" });
    }
    kept.replace('\n', "; ")
}

fn invalid(field: impl Into<String>, message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid {
        field: field.into(),
        message: message.into(),
    }
}

/// One member of the group as the rules see it, with the paths of its fields.
struct Member {
    node_id: NodeId,
    role: Option<Role>,
    id_field: String,
    role_field: String,
}

impl NodeConfig {
    /// Parses and validates a configuration.
    pub fn from_toml_str(text: &str) -> Result<NodeConfig, ConfigError> {
        NodeConfig::parse(text, None)
    }

    /// Reads, parses and validates the configuration file at `path`.
    pub fn load(path: &Path) -> Result<NodeConfig, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
            path: path.to_owned(),
            error,
        })?;
        NodeConfig::parse(&text, Some(path))
    }

    fn parse(text: &str, path: Option<&Path>) -> Result<NodeConfig, ConfigError> {
        let path = path.map(Path::to_owned);
        let config: NodeConfig = toml::from_str(text).map_err(|error| ConfigError::Syntax {
            message: syntax_text(&path, &error, text),
            path,
        })?;
        config.validate()?;
        Ok(config)
    }

    /// The configuration as TOML, every field written out; [`NodeConfig::from_toml_str`]
    /// gives back an equal value.
    pub fn to_toml_string(&self) -> String {
        toml::to_string(self).expect("a NodeConfig has only strings, integers and tables")
    }

    /// The peers that are backups (this node excluded, whatever its role).
    pub fn backups(&self) -> impl Iterator<Item = &PeerConfig> {
        self.peers
            .iter()
            .filter(|peer| peer.role == Some(Role::Backup))
    }

    /// Where the group's primary listens: this node's `listen` if it is the primary, else the
    /// primary peer's address.
    pub fn primary_address(&self) -> Option<SocketAddr> {
        if self.role == Some(Role::Primary) {
            return Some(self.listen);
        }
        self.peers
            .iter()
            .find(|peer| peer.role == Some(Role::Primary))
            .map(|peer| peer.address)
    }

    /// Checks the rules a field's type cannot express: ranges, uniqueness, the one primary,
    /// the safety rule against the group's backups, and the relations between limits. The
    /// first broken rule is returned, naming its field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.validate_fields()?;
        self.validate_tuning()?;
        self.validate_members()?;
        self.validate_addresses()?;
        self.validate_replication()?;
        self.validate_cluster()?;
        self.validate_log()?;
        self.validate_groups()
    }

    /// The password the RESP port asks for, as its sessions hold it.
    pub fn resp_password(&self) -> Option<tandem_redis::session::Password> {
        self.requirepass
            .as_ref()
            .map(|Secret(password)| tandem_redis::session::Password::new(password.as_bytes()))
    }

    /// The RESP port's TLS settings, if `[tls]` asks for TLS there (its files are read now).
    pub fn resp_tls(&self) -> Result<Option<Arc<rustls::ServerConfig>>, crate::StartError> {
        match &self.tls {
            Some(table) if table.resp => crate::tls::server_config(table).map(Some),
            _ => Ok(None),
        }
    }

    /// The Redis users of `[[users]]`, as the RESP sessions check them.
    pub fn resp_users(&self) -> Vec<Arc<tandem_redis::session::User>> {
        self.users
            .iter()
            .map(|user| {
                let keys: Vec<&[u8]> = user.keys.iter().map(|key| key.as_bytes()).collect();
                Arc::new(tandem_redis::session::User::new(
                    &user.name,
                    user.password.0.as_bytes(),
                    user.access == UserAccess::ReadOnly,
                    &keys,
                ))
            })
            .collect()
    }

    fn validate_users(&self) -> Result<(), ConfigError> {
        if self.users.len() > USERS_MAX {
            return Err(invalid(
                "users",
                format!(
                    "{} users; a node takes at most {USERS_MAX}",
                    self.users.len()
                ),
            ));
        }
        let mut names = std::collections::BTreeSet::new();
        for user in &self.users {
            let name = &user.name;
            let name_ok =
                !name.is_empty() && name.len() <= 128 && name.bytes().all(|b| b.is_ascii_graphic());
            if !name_ok {
                return Err(invalid(
                    "users.name",
                    format!(
                        "{name:?} is not a user name; use 1 to 128 printable ASCII characters \
                         without spaces"
                    ),
                ));
            }
            if name == "default" {
                return Err(invalid(
                    "users.name",
                    "the default user's password is `requirepass`; name the others otherwise",
                ));
            }
            if !names.insert(name.as_str()) {
                return Err(invalid(
                    "users.name",
                    format!("user {name:?} is listed twice; give each user one entry"),
                ));
            }
            // The length only: a password never appears in an error.
            let password = &user.password.0;
            if password.is_empty() || password.len() > REQUIREPASS_LEN_MAX {
                return Err(invalid(
                    "users.password",
                    format!(
                        "user {name:?} has a password of {} bytes; use 1 to \
                         {REQUIREPASS_LEN_MAX} bytes",
                        password.len()
                    ),
                ));
            }
            if user.keys.is_empty() || user.keys.iter().any(|key| key.is_empty()) {
                return Err(invalid(
                    "users.keys",
                    format!(
                        "user {name:?} needs at least one non-empty key pattern; \
                         [\"*\"] is any key"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn validate_fields(&self) -> Result<(), ConfigError> {
        self.validate_users()?;
        if self.node_id == 0 {
            return Err(invalid("node_id", "node ids start at 1; use an id ≥ 1"));
        }
        let group = &self.group;
        if group.view == 0 {
            return Err(invalid("group.view", "views start at 1; use a view ≥ 1"));
        }
        if group.workload.trim().is_empty() {
            return Err(invalid(
                "group.workload",
                "name the data model the group serves, for example \"debit-credit\"",
            ));
        }
        if group.db_mib == 0 || group.db_mib > DB_MIB_MAX {
            return Err(invalid(
                "group.db_mib",
                format!(
                    "{} MiB is out of range; use 1 to {DB_MIB_MAX}",
                    group.db_mib
                ),
            ));
        }
        if let Some(Secret(password)) = &self.requirepass {
            // The length only: a password never appears in an error.
            if password.is_empty() || password.len() > REQUIREPASS_LEN_MAX {
                return Err(invalid(
                    "requirepass",
                    format!(
                        "a password of {} bytes; use 1 to {REQUIREPASS_LEN_MAX} bytes, or leave \
                         requirepass out to ask none",
                        password.len()
                    ),
                ));
            }
        }
        if let Some(Secret(secret)) = &self.peer_secret
            && !(PEER_SECRET_LEN_MIN..=PEER_SECRET_LEN_MAX).contains(&secret.len())
        {
            return Err(invalid(
                "peer_secret",
                format!(
                    "a secret of {} bytes; use {PEER_SECRET_LEN_MIN} to {PEER_SECRET_LEN_MAX} \
                     bytes, the same on every node (`openssl rand -hex 32` makes one)",
                    secret.len()
                ),
            ));
        }
        if let Some(tls) = &self.tls
            && tls.peers
            && tls.ca.is_none()
        {
            return Err(invalid(
                "tls.ca",
                "peers = true checks every peer's certificate against the cluster's CA: name \
                 its certificate (PEM) in tls.ca, or set peers = false",
            ));
        }
        if group.undo_log_kib < UNDO_LOG_KIB_MIN {
            return Err(invalid(
                "group.undo_log_kib",
                format!(
                    "{} KiB cannot hold one undo entry; use at least {UNDO_LOG_KIB_MIN}",
                    group.undo_log_kib
                ),
            ));
        }
        Ok(())
    }

    fn validate_tuning(&self) -> Result<(), ConfigError> {
        let t = &self.tuning;
        if !(TICK_US_MIN..=TICK_US_MAX).contains(&t.tick_us) {
            return Err(invalid(
                "tuning.tick_us",
                format!(
                    "{} µs is out of range; use {TICK_US_MIN} to {TICK_US_MAX}",
                    t.tick_us
                ),
            ));
        }
        if t.heartbeat_ticks == 0 {
            return Err(invalid(
                "tuning.heartbeat_ticks",
                "0 would send heartbeats without pause; use at least 1",
            ));
        }
        if t.suspect_ticks <= t.heartbeat_ticks {
            return Err(invalid(
                "tuning.suspect_ticks",
                format!(
                    "{} ticks would suspect a primary before its heartbeat (every {} ticks) is \
                     due; use more than tuning.heartbeat_ticks",
                    t.suspect_ticks, t.heartbeat_ticks
                ),
            ));
        }
        if t.executor_stall_ms < EXECUTOR_STALL_MS_MIN {
            return Err(invalid(
                "tuning.executor_stall_ms",
                format!(
                    "{} ms would replace a primary for an ordinary long call; use at least \
                     {EXECUTOR_STALL_MS_MIN}",
                    t.executor_stall_ms
                ),
            ));
        }
        if t.script_time_limit_ms != 0 && t.script_time_limit_ms < SCRIPT_TIME_LIMIT_MS_MIN {
            return Err(invalid(
                "tuning.script_time_limit_ms",
                format!(
                    "{} ms would stop ordinary scripts; use at least {SCRIPT_TIME_LIMIT_MS_MIN}, \
                     or 0 for no limit",
                    t.script_time_limit_ms
                ),
            ));
        }
        if t.batch_bytes_max < BATCH_BYTES_MIN {
            return Err(invalid(
                "tuning.batch_bytes_max",
                format!(
                    "{} bytes cannot hold a batch header and a record; use at least \
                     {BATCH_BYTES_MIN}",
                    t.batch_bytes_max
                ),
            ));
        }
        if t.tail_records_max == 0 {
            return Err(invalid(
                "tuning.tail_records_max",
                "0 would stall every commit; use at least 1",
            ));
        }
        let tail_bytes_min = t.batch_bytes_max.saturating_mul(2);
        if t.tail_bytes_max < tail_bytes_min {
            return Err(invalid(
                "tuning.tail_bytes_max",
                format!(
                    "{} bytes cannot hold two full batches; use at least {tail_bytes_min} \
                     (2 × tuning.batch_bytes_max)",
                    t.tail_bytes_max
                ),
            ));
        }
        let frame_len_min = t.batch_bytes_max.saturating_add(FRAME_OVERHEAD);
        if t.max_frame_len < frame_len_min {
            return Err(invalid(
                "tuning.max_frame_len",
                format!(
                    "{} bytes cannot carry a full batch; use at least {frame_len_min} \
                     (tuning.batch_bytes_max + {FRAME_OVERHEAD})",
                    t.max_frame_len
                ),
            ));
        }
        if u32::try_from(t.max_frame_len).is_err() {
            return Err(invalid(
                "tuning.max_frame_len",
                format!(
                    "{} bytes does not fit a frame's 32-bit length field; use at most {}",
                    t.max_frame_len,
                    u32::MAX
                ),
            ));
        }
        if !(1..=MAXCLIENTS_MAX).contains(&t.maxclients) {
            return Err(invalid(
                "tuning.maxclients",
                format!(
                    "{} is out of range; use 1 to {MAXCLIENTS_MAX} (default \
                     {MAXCLIENTS_DEFAULT})",
                    t.maxclients
                ),
            ));
        }
        for (field, mib) in [
            ("tuning.output_buffer_mib", t.output_buffer_mib),
            (
                "tuning.output_buffers_total_mib",
                t.output_buffers_total_mib,
            ),
        ] {
            if mib > OUTPUT_BUFFER_MIB_MAX {
                return Err(invalid(
                    field,
                    format!(
                        "{mib} MiB is out of range; use 0 (no limit) to {OUTPUT_BUFFER_MIB_MAX}"
                    ),
                ));
            }
        }
        Ok(())
    }

    fn members(&self) -> Vec<Member> {
        let this = Member {
            node_id: self.node_id,
            role: self.role,
            id_field: "node_id".to_owned(),
            role_field: "role".to_owned(),
        };
        let peers = self.peers.iter().enumerate().map(|(i, peer)| Member {
            node_id: peer.node_id,
            role: peer.role,
            id_field: format!("peers[{i}].node_id"),
            role_field: format!("peers[{i}].role"),
        });
        std::iter::once(this).chain(peers).collect()
    }

    fn validate_members(&self) -> Result<(), ConfigError> {
        let members = self.members();
        // A node names every member in its answer to a client's `Members` frame, which
        // carries at most MEMBERS_MAX.
        if members.len() > tandem_wire::MEMBERS_MAX {
            return Err(invalid(
                "peers",
                format!(
                    "{} members (this node and its peers); a group has at most {}, so list \
                     fewer peers",
                    members.len(),
                    tandem_wire::MEMBERS_MAX
                ),
            ));
        }
        for (i, member) in members.iter().enumerate() {
            if member.node_id == 0 {
                return Err(invalid(
                    &member.id_field,
                    "node ids start at 1; use an id ≥ 1",
                ));
            }
            if let Some(first) = members[..i].iter().find(|m| m.node_id == member.node_id) {
                let hint = if first.id_field == "node_id" {
                    "this node must not be listed among its peers; remove that [[peers]] table \
                     or give each node its own id"
                } else {
                    "give each node its own id"
                };
                return Err(invalid(
                    &member.id_field,
                    format!(
                        "node id {} is also `{}`; {hint}",
                        member.node_id, first.id_field
                    ),
                ));
            }
        }
        self.validate_roles(&members)
    }

    /// Without `[[cluster.groups]]`: every member has a role, and exactly one is the primary.
    /// With it: no member has one, since each group's members say the roles.
    fn validate_roles(&self, members: &[Member]) -> Result<(), ConfigError> {
        if !self.group_entries().is_empty() {
            return match members.iter().find(|m| m.role.is_some()) {
                Some(given) => Err(invalid(
                    &given.role_field,
                    "with [[cluster.groups]] each group's members say the roles (the first the \
                     primary, the rest its backups); remove it",
                )),
                None => Ok(()),
            };
        }
        if let Some(missing) = members.iter().find(|m| m.role.is_none()) {
            return Err(invalid(
                &missing.role_field,
                "missing; say \"primary\" or \"backup\" (a group has exactly one primary), or \
                 name the roles through [[cluster.groups]] in cluster mode",
            ));
        }
        let mut primaries = members.iter().filter(|m| m.role == Some(Role::Primary));
        match (primaries.next(), primaries.next()) {
            (None, _) => Err(invalid(
                "role",
                "the group has no primary; set role = \"primary\" on exactly one of this node \
                 and its peers",
            )),
            (Some(first), Some(second)) => Err(invalid(
                &second.role_field,
                format!(
                    "a second primary (`{}` is one already); a group has exactly one primary, \
                     so set this one to \"backup\"",
                    first.role_field
                ),
            )),
            (Some(_), None) => Ok(()),
        }
    }

    fn validate_addresses(&self) -> Result<(), ConfigError> {
        let mut addresses: Vec<(String, SocketAddr)> = vec![("listen".to_owned(), self.listen)];
        if let Some(metrics_listen) = self.metrics_listen {
            addresses.push(("metrics_listen".to_owned(), metrics_listen));
        }
        if let Some(resp_listen) = self.resp_listen {
            addresses.push(("resp_listen".to_owned(), resp_listen));
        }
        for (i, peer) in self.peers.iter().enumerate() {
            let field = format!("peers[{i}].address");
            if peer.address.port() == 0 {
                return Err(invalid(
                    field,
                    format!(
                        "port 0 means any port, so nobody could dial {}; give the peer's \
                         listen address",
                        peer.address
                    ),
                ));
            }
            addresses.push((field, peer.address));
        }
        for (i, (field, address)) in addresses.iter().enumerate() {
            // Port 0 asks the OS for a free port: two of them never collide.
            if address.port() == 0 {
                continue;
            }
            if let Some((first, _)) = addresses[..i].iter().find(|(_, a)| a == address) {
                return Err(invalid(
                    field,
                    format!("{address} is also `{first}`; give each listener its own address"),
                ));
            }
        }
        Ok(())
    }

    fn validate_replication(&self) -> Result<(), ConfigError> {
        let group = &self.group;
        let backups = self
            .members()
            .iter()
            .filter(|m| m.role == Some(Role::Backup))
            .count();
        // With [[cluster.groups]], group.safety is only the rule of the groups that give
        // none, and is checked against each of them there.
        let checked = match self.group_entries().is_empty() {
            true => group.safety.validate(backups),
            false => group.safety.validate_form(),
        };
        checked.map_err(|error| invalid("group.safety", error.to_string()))?;
        if group.mode == Mode::Passive && group.strategy == Strategy::V0LinkedUndo {
            return Err(invalid(
                "group.strategy",
                "passive mode needs strategy v1, v2 or v3: v0's undo records live at heap \
                 addresses that have no place in a backup's mirror; use v1, v2 or v3, or \
                 mode = \"active\"",
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::net::{IpAddr, Ipv4Addr};

    use tandem_replication::AckCount;

    use super::*;

    fn address(port: u16) -> SocketAddr {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    }

    fn example() -> NodeConfig {
        NodeConfig::from_toml_str(EXAMPLE).expect("EXAMPLE parses")
    }

    #[test]
    fn example_parses_with_the_defaults_it_documents() {
        let config = example();
        assert_eq!(config.node_id, 1);
        assert_eq!(config.listen, address(7001));
        assert_eq!(config.metrics_listen, Some(address(9001)));
        assert_eq!(config.role, Some(Role::Primary));
        assert_eq!(
            config.peers,
            vec![PeerConfig {
                node_id: 2,
                address: address(7002),
                role: Some(Role::Backup),
                resp: None,
            }]
        );
        assert_eq!(config.tuning, Tuning::default());

        // The example spells out every group default; a minimal group gets the same values.
        let minimal = NodeConfig::from_toml_str(
            "node_id = 1\nlisten = \"127.0.0.1:7001\"\nrole = \"primary\"\n\
             [group]\nworkload = \"debit-credit\"\n",
        )
        .expect("a minimal config parses");
        assert_eq!(minimal.group, config.group);
        assert_eq!(minimal.tuning, Tuning::default());
        assert_eq!(minimal.metrics_listen, None);
        assert!(minimal.peers.is_empty());
        assert_eq!(config.group.strategy, Strategy::V3InlineLog);
        assert_eq!(config.group.safety, Safety::DEFAULT);
        assert_eq!(config.group.mode, Mode::Active);
        assert_eq!(
            (
                config.group.id,
                config.group.view,
                config.group.db_mib,
                config.group.seed
            ),
            (0, 1, 50, 1)
        );
        assert_eq!(config.group.undo_log_kib, 1024);
    }

    #[test]
    fn accessors() {
        let config = example();
        let backups: Vec<NodeId> = config.backups().map(|peer| peer.node_id).collect();
        assert_eq!(backups, vec![2]);
        assert_eq!(config.primary_address(), Some(address(7001)));

        let mut backup = config.clone();
        backup.role = Some(Role::Backup);
        backup.peers[0].role = Some(Role::Primary);
        assert_eq!(backup.backups().count(), 0);
        assert_eq!(backup.primary_address(), Some(address(7002)));
        assert_eq!(
            tandem_wire::Role::from(Role::Backup),
            tandem_wire::Role::Backup
        );
    }

    #[test]
    fn round_trips_through_toml() {
        let mut config = example();
        config.group.workload = "order-entry".into();
        config.group.strategy = Strategy::V1MirrorCopy;
        config.group.safety = Safety::TwoSafeApplied(AckCount::Of(2));
        config.group.mode = Mode::Passive;
        config.group.seed = u64::MAX >> 1;
        config.peers.push(PeerConfig {
            node_id: 3,
            address: "[::1]:7003".parse().unwrap(),
            role: Some(Role::Backup),
            resp: None,
        });
        config.tuning.tail_bytes_max = 1 << 30;
        let text = config.to_toml_string();
        assert_eq!(NodeConfig::from_toml_str(&text).unwrap(), config, "{text}");

        let mut lone = example();
        lone.metrics_listen = None;
        lone.peers.clear();
        lone.group.safety = Safety::OneSafe;
        let text = lone.to_toml_string();
        assert_eq!(NodeConfig::from_toml_str(&text).unwrap(), lone, "{text}");

        let text = example().to_toml_string();
        assert_eq!(
            NodeConfig::from_toml_str(&text).unwrap(),
            example(),
            "{text}"
        );
    }

    /// Each rule, broken by one edit of the example, with the field and a word of the fix
    /// its message must carry.
    #[test]
    fn each_rule_refuses_naming_the_field() {
        type Edit = fn(&mut NodeConfig);
        let cases: &[(&str, Edit, &str)] = &[
            ("`node_id`", |c| c.node_id = 0, "≥ 1"),
            (
                "`peer_secret`",
                |c| c.peer_secret = Some(Secret("too short".into())),
                "16 to 1024 bytes",
            ),
            (
                "`users.name`",
                |c| c.users = vec![user("default >pw")],
                "`requirepass`",
            ),
            (
                "`users.name`",
                |c| c.users = vec![user("bob >pw"), user("bob >other")],
                "listed twice",
            ),
            (
                "`users.name`",
                |c| {
                    c.users = vec![UserConfig {
                        name: "two words".into(),
                        ..user("x >pw")
                    }]
                },
                "without spaces",
            ),
            (
                "`users.password`",
                |c| {
                    c.users = vec![UserConfig {
                        password: Secret(String::new()),
                        ..user("x >pw")
                    }]
                },
                "1 to 512 bytes",
            ),
            (
                "`users.keys`",
                |c| {
                    c.users = vec![UserConfig {
                        keys: vec![String::new()],
                        ..user("x >pw")
                    }]
                },
                "non-empty key pattern",
            ),
            ("`group.view`", |c| c.group.view = 0, "≥ 1"),
            ("`group.db_mib`", |c| c.group.db_mib = 0, "1 to 65536"),
            ("`group.db_mib`", |c| c.group.db_mib = 65537, "1 to 65536"),
            (
                "`group.undo_log_kib`",
                |c| c.group.undo_log_kib = 3,
                "at least 4",
            ),
            (
                "`tuning.tick_us`",
                |c| c.tuning.tick_us = 9,
                "10 to 1000000",
            ),
            (
                "`tuning.tick_us`",
                |c| c.tuning.tick_us = 1_000_001,
                "10 to 1000000",
            ),
            (
                "`tuning.heartbeat_ticks`",
                |c| c.tuning.heartbeat_ticks = 0,
                "at least 1",
            ),
            (
                "`tuning.executor_stall_ms`",
                |c| c.tuning.executor_stall_ms = 9,
                "at least 10",
            ),
            (
                "`tuning.script_time_limit_ms`",
                |c| c.tuning.script_time_limit_ms = 99,
                "at least 100, or 0 for no limit",
            ),
            (
                "`tuning.suspect_ticks`",
                |c| c.tuning.suspect_ticks = 1,
                "more than",
            ),
            (
                "`tuning.batch_bytes_max`",
                |c| c.tuning.batch_bytes_max = 63,
                "at least 64",
            ),
            (
                "`tuning.tail_records_max`",
                |c| c.tuning.tail_records_max = 0,
                "at least 1",
            ),
            (
                "`tuning.tail_bytes_max`",
                |c| c.tuning.tail_bytes_max = 2 * c.tuning.batch_bytes_max - 1,
                "at least 131072",
            ),
            (
                "`tuning.max_frame_len`",
                |c| c.tuning.max_frame_len = c.tuning.batch_bytes_max + 4095,
                "at least 69632",
            ),
            (
                "`tuning.max_frame_len`",
                |c| {
                    c.tuning.batch_bytes_max = 1 << 32;
                    c.tuning.tail_bytes_max = 1 << 34;
                    c.tuning.max_frame_len = 1 << 33;
                },
                "at most 4294967295",
            ),
            (
                "`peers`",
                |c| {
                    c.peers = (2..=65)
                        .map(|id| peer(id, 7000 + id as u16, Role::Backup))
                        .collect()
                },
                "65 members (this node and its peers); a group has at most 64",
            ),
            ("`peers[0].node_id`", |c| c.peers[0].node_id = 0, "≥ 1"),
            (
                "`peers[0].node_id`",
                |c| c.peers[0].node_id = 1,
                "must not be listed",
            ),
            (
                "`peers[1].node_id`",
                |c| c.peers.push(peer(2, 7003, Role::Backup)),
                "its own id",
            ),
            ("`role`", |c| c.role = Some(Role::Backup), "exactly one"),
            ("`role`", |c| c.role = None, "say \"primary\" or \"backup\""),
            (
                "`peers[0].role`",
                |c| c.peers[0].role = None,
                "say \"primary\" or \"backup\"",
            ),
            (
                "`peers[0].role`",
                |c| c.peers[0].role = Some(Role::Primary),
                "\"backup\"",
            ),
            (
                "`peers[0].address`",
                |c| c.peers[0].address = c.listen,
                "is also `listen`",
            ),
            (
                "`metrics_listen`",
                |c| c.metrics_listen = Some(c.listen),
                "is also `listen`",
            ),
            (
                "`peers[1].address`",
                |c| c.peers.push(peer(3, 7002, Role::Backup)),
                "is also `peers[0].address`",
            ),
            (
                "`peers[0].address`",
                |c| c.peers[0].address = address(0),
                "port 0",
            ),
            (
                "`group.safety`",
                |c| c.group.safety = Safety::TwoSafe(AckCount::Of(3)),
                "a rule with 3 backup acks cannot be met by a group of 1 backups; use K ≤ 1",
            ),
            (
                "`group.safety`",
                |c| c.group.safety = Safety::TwoSafeApplied(AckCount::Of(0)),
                "1-safe",
            ),
            (
                "`group.safety`",
                |c| c.group.safety = Safety::Bounded(0),
                "N ≥ 1",
            ),
            (
                "`group.strategy`",
                |c| {
                    c.group.mode = Mode::Passive;
                    c.group.strategy = Strategy::V0LinkedUndo;
                },
                "passive mode needs strategy v1, v2 or v3",
            ),
            (
                "`group.safety`",
                |c| {
                    c.group.mode = Mode::Passive;
                    c.group.strategy = Strategy::V3InlineLog;
                    c.group.safety = Safety::Durable(tandem_replication::AckCount::All);
                },
                "durable needs mode = \"active\"",
            ),
            (
                "`group.mode`",
                |c| {
                    c.group.mode = Mode::Passive;
                    c.group.strategy = Strategy::V3InlineLog;
                    c.cluster = Some(ClusterTable::new(PathBuf::from("raft")));
                },
                "a cluster needs mode = \"active\"",
            ),
        ];
        fn peer(node_id: NodeId, port: u16, role: Role) -> PeerConfig {
            PeerConfig {
                node_id,
                address: address(port),
                role: Some(role),
                resp: None,
            }
        }
        for (field, edit, fix) in cases {
            let mut config = example();
            edit(&mut config);
            // Through validate and through the text a user would write.
            let error = config.validate().expect_err(field).to_string();
            assert!(
                error.starts_with(&format!("config field {field}: ")),
                "{error}"
            );
            assert!(error.contains(fix), "{field}: {error}");
            let reparsed = NodeConfig::from_toml_str(&config.to_toml_string());
            let reparsed = reparsed.expect_err(field).to_string();
            assert!(
                reparsed.contains(&format!("config field {field}: ")),
                "{reparsed}"
            );
        }
    }

    #[test]
    fn a_syntax_error_on_a_secrets_line_never_quotes_it() {
        for (line, secret) in [
            ("requirepass = s3cret-unquoted", "s3cret-unquoted"),
            (
                "peer_secret = 0123456789abcdef0123456789abcdef",
                "0123456789abcdef",
            ),
            (
                "[[users]]\nname = \"bob\"\npassword = b0b-unquoted",
                "b0b-unquoted",
            ),
        ] {
            let text = format!("{line}\n{EXAMPLE}");
            let error = NodeConfig::from_toml_str(&text).expect_err(line);
            let message = error.to_string();
            assert!(!message.contains(secret), "{message}");
            assert!(!format!("{error:?}").contains(secret), "{error:?}");
            assert!(message.contains("line "), "{message}");
            assert!(message.contains("not quoted"), "{message}");
        }
    }

    /// A string left open before a secret's line runs on through it: the error points past
    /// the secret, on a line that may not name its key, and still quotes nothing.
    #[test]
    fn an_open_string_that_runs_through_a_secrets_line_never_quotes_it() {
        let secret = "s3cr3t-never-quoted-0123456789";
        for opening in [
            "\"\"\"",
            "'''",
            "\"",
            "x = \"\"\"",
            "x = '''",
            "[\"\"\"",
            "x = [\"",
        ] {
            let text = format!(
                "{opening}ode_id = 1\nrequirepass = \"{secret}\"\npeer_secret = \"{secret}\"\n"
            );
            let error = NodeConfig::from_toml_str(&text).expect_err(opening);
            let message = error.to_string();
            assert!(!message.contains(secret), "{message}");
            assert!(!format!("{error:?}").contains(secret), "{error:?}");
        }
    }

    fn user(spec: &str) -> UserConfig {
        UserConfig::from_spec(spec).expect("a valid spec")
    }

    #[test]
    fn a_user_spec_reads_as_acl_setuser_and_its_errors_never_show_the_password() {
        let alice = user("alice >s3cret ~app:* ~cache:* read-only");
        assert_eq!(alice.name, "alice");
        assert_eq!(alice.password, Secret("s3cret".into()));
        assert_eq!(alice.access, UserAccess::ReadOnly);
        assert_eq!(alice.keys, ["app:*", "cache:*"]);
        let bob = user("bob >pw");
        assert_eq!(
            (bob.access, bob.keys.clone()),
            (UserAccess::ReadWrite, vec!["*".to_owned()])
        );
        for (spec, says) in [
            ("", "empty user spec"),
            ("carol", "give its password as >PASSWORD"),
            ("carol >s3cret >s3cret2", "one >PASSWORD"),
            ("carol >s3cret +@all", "\"+@all\" is not"),
        ] {
            let err = UserConfig::from_spec(spec).expect_err(spec);
            assert!(err.contains(says), "{spec}: {err}");
            assert!(!err.contains("s3cret"), "{spec}: {err}");
        }
        // Users survive the round trip through TOML.
        let mut config = example();
        config.users = vec![alice, bob];
        let text = config.to_toml_string();
        assert_eq!(NodeConfig::from_toml_str(&text).expect("parses"), config);
        assert!(format!("{config:?}").contains("Secret(set)"));
        assert!(!format!("{config:?}").contains("s3cret"));
    }

    #[test]
    fn accepted_edge_values() {
        let mut config = example();
        config.group.db_mib = 65536;
        config.group.undo_log_kib = 4;
        config.group.mode = Mode::Passive;
        config.group.strategy = Strategy::V2MirrorDiff;
        config.group.safety = Safety::TwoSafe(AckCount::Of(1));
        config.tuning = Tuning {
            tick_us: 10,
            heartbeat_ticks: 1,
            suspect_ticks: 2,
            executor_stall_ms: 10,
            batch_bytes_max: 64,
            tail_records_max: 1,
            tail_bytes_max: 128,
            max_frame_len: 64 + 4096,
            maxclients: 1,
            output_buffer_mib: 0,
            output_buffers_total_mib: 0,
            busy_reply_threshold_ms: 0,
            script_time_limit_ms: 0,
        };
        config.validate().unwrap();
        // Two listeners on port 0 get different ports from the OS.
        config.listen = address(0);
        config.metrics_listen = Some(address(0));
        config.validate().unwrap();
    }

    #[test]
    fn bad_strings_name_the_field() {
        let cases = [
            (
                "strategy = \"v3\"",
                "strategy = \"v9\"",
                "config field `group.strategy`",
            ),
            (
                "safety = \"2-safe\"",
                "safety = \"3-safe\"",
                "config field `group.safety`",
            ),
            (
                "safety = \"2-safe\"",
                "safety = \"2-safe:0\"",
                "config field `group.safety`",
            ),
            (
                "mode = \"active\"",
                "mode = \"hybrid\"",
                "`active` or `passive`",
            ),
            (
                "role = \"primary\"",
                "role = \"leader\"",
                "`primary` or `backup`",
            ),
            (
                "listen = \"127.0.0.1:7001\"",
                "listen = \"localhost:7001\"",
                "listen",
            ),
            ("db_mib = 50", "db_mib = -1", "db_mib"),
        ];
        let unnamed = EXAMPLE.replacen("workload = \"debit-credit\"", "workload = \" \"", 1);
        let error = NodeConfig::from_toml_str(&unnamed).unwrap_err().to_string();
        assert!(error.contains("group.workload"), "{error}");
        for (from, to, expected) in cases {
            assert!(EXAMPLE.contains(from), "{from}");
            let error = NodeConfig::from_toml_str(&EXAMPLE.replacen(from, to, 1)).unwrap_err();
            let message = error.to_string();
            assert!(matches!(error, ConfigError::Syntax { .. }), "{message}");
            assert!(message.starts_with("config: "), "{message}");
            assert!(message.contains(expected), "{to}: {message}");
            // toml's message points at the line.
            assert!(message.contains(to), "{to}: {message}");
        }
    }

    #[test]
    fn an_unknown_table_is_called_unknown_and_the_known_tables_are_listed() {
        for (table, line) in [("[http]", 2), ("[[peerz]]", 2), ("[tunning]  # typo", 2)] {
            let text = format!("{}\n{table}\nx = 1\n", EXAMPLE.trim_end());
            let lines_before = EXAMPLE.trim_end().lines().count();
            let message = NodeConfig::from_toml_str(&text).unwrap_err().to_string();
            let shown = table.split('#').next().unwrap().trim();
            assert!(
                message.contains(&format!("unknown table `{shown}`")),
                "{message}"
            );
            assert!(
                message.contains(&format!("line {}", lines_before + line - 1)),
                "{message}"
            );
            assert!(message.contains(KNOWN_TABLES), "{message}");
            assert!(!message.contains("secret"), "{message}");
        }
        // A table nested in a known one is toml's word: an unknown field of that table.
        let text = EXAMPLE.replacen("[tuning]\n", "[tuning]\n[tuning.extra]\n", 1);
        let message = NodeConfig::from_toml_str(&text).unwrap_err().to_string();
        assert!(message.contains("unknown field `extra`"), "{message}");
    }

    #[test]
    fn a_wrong_type_on_a_secrets_line_never_shows_the_value() {
        for line in ["requirepass = 123456789", "peer_secret = [\"123456789\"]"] {
            let text = format!("{line}\n{EXAMPLE}");
            let message = NodeConfig::from_toml_str(&text).unwrap_err().to_string();
            assert!(!message.contains("123456789"), "{message}");
            assert!(message.contains("line 1 (not quoted"), "{message}");
        }
    }

    #[test]
    fn unknown_keys_are_refused() {
        for (anchor, extra) in [
            ("role = \"primary\"\n", "colour = \"blue\"\n"),
            ("[group]\n", "size_mib = 50\n"),
            ("[tuning]\n", "tick_ms = 1\n"),
            ("role = \"backup\"\n", "weight = 1\n"),
        ] {
            assert!(EXAMPLE.contains(anchor), "{anchor}");
            let text = EXAMPLE.replacen(anchor, &format!("{anchor}{extra}"), 1);
            let message = NodeConfig::from_toml_str(&text).unwrap_err().to_string();
            let key = extra.split(' ').next().unwrap();
            assert!(
                message.contains(&format!("unknown field `{key}`")),
                "{message}"
            );
        }
    }

    #[test]
    fn missing_required_fields_are_named() {
        for line in [
            "node_id = 1\n",
            "listen = \"127.0.0.1:7001\"\n",
            "workload = \"debit-credit\"\n",
            "address = \"127.0.0.1:7002\"\n",
        ] {
            assert!(EXAMPLE.contains(line), "{line}");
            let message = NodeConfig::from_toml_str(&EXAMPLE.replacen(line, "", 1))
                .unwrap_err()
                .to_string();
            let key = line.split(' ').next().unwrap();
            assert!(
                message.contains(&format!("missing field `{key}`")),
                "{message}"
            );
        }
        // A role may be left out with [[cluster.groups]] only: without, a rule names it.
        for (line, field) in [
            ("role = \"primary\"\n", "role"),
            ("role = \"backup\"\n", "peers[0].role"),
        ] {
            assert!(EXAMPLE.contains(line), "{line}");
            let message = NodeConfig::from_toml_str(&EXAMPLE.replacen(line, "", 1))
                .unwrap_err()
                .to_string();
            assert!(
                message.starts_with(&format!("config field `{field}`: missing; say")),
                "{message}"
            );
        }
    }

    #[test]
    fn load_names_the_path() {
        let dir = std::env::temp_dir().join(format!("tandem-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();

        let missing = dir.join("missing.toml");
        let message = NodeConfig::load(&missing).unwrap_err().to_string();
        assert!(
            message.starts_with("cannot read config file `"),
            "{message}"
        );
        assert!(message.contains("missing.toml"), "{message}");

        let good = dir.join("good.toml");
        std::fs::write(&good, EXAMPLE).unwrap();
        assert_eq!(NodeConfig::load(&good).unwrap(), example());

        let bad = dir.join("bad.toml");
        std::fs::write(
            &bad,
            EXAMPLE.replacen("node_id = 1", "node_id = \"one\"", 1),
        )
        .unwrap();
        let message = NodeConfig::load(&bad).unwrap_err().to_string();
        assert!(
            message.starts_with(&format!("config file `{}`: ", bad.display())),
            "{message}"
        );
        assert!(message.contains("node_id"), "{message}");

        let invalid = dir.join("invalid.toml");
        std::fs::write(&invalid, EXAMPLE.replacen("view = 1", "view = 0", 1)).unwrap();
        let message = NodeConfig::load(&invalid).unwrap_err().to_string();
        assert!(
            message.starts_with("config field `group.view`"),
            "{message}"
        );

        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_lease_the_primary_cannot_keep_or_that_outlasts_suspicion_is_refused() {
        let mut config = example();
        config.cluster = Some(ClusterTable::new(PathBuf::from("raft")));
        assert!(
            config.validate().is_ok(),
            "the defaults: lease 4, suspicion 30"
        );
        for lease_ticks in [2, config.tuning.suspect_ticks] {
            let mut bad = config.clone();
            bad.cluster.as_mut().unwrap().lease_ticks = lease_ticks;
            let err = bad.validate().unwrap_err();
            assert!(
                matches!(&err, ConfigError::Invalid { field, .. } if field == "cluster.lease_ticks"),
                "{err}"
            );
        }
    }

    /// A cluster of three nodes and three groups, each node the first primary of one.
    const THREE_GROUPS: &str = r#"
node_id = 1
listen = "127.0.0.1:7001"

[group]
workload = "debit-credit"
safety = "2-safe"

[cluster]
data_dir = "raft"

[[cluster.groups]]
id = 1
members = [1, 2, 3]

[[cluster.groups]]
id = 2
members = [2, 3, 1]
safety = "2-safe:1"

[[cluster.groups]]
id = 3
members = [3, 1, 2]

[[peers]]
node_id = 2
address = "127.0.0.1:7002"

[[peers]]
node_id = 3
address = "127.0.0.1:7003"
"#;

    fn three_groups() -> NodeConfig {
        NodeConfig::from_toml_str(THREE_GROUPS).expect("THREE_GROUPS parses")
    }

    fn groups_of(config: &mut NodeConfig) -> &mut Vec<GroupEntry> {
        &mut config.cluster.as_mut().expect("cluster mode").groups
    }

    /// Gives each group the slots of `slots`, in entry order.
    fn with_slots(config: &mut NodeConfig, slots: [&[&str]; 3]) {
        for (entry, slots) in groups_of(config).iter_mut().zip(slots) {
            entry.slots = Some(slots.iter().map(|slot| slot.to_string()).collect());
        }
    }

    fn ranges(table: &SlotTable) -> Vec<(u16, u16, GroupId)> {
        (table.ranges().iter())
            .map(|range| (range.first, range.last, range.group))
            .collect()
    }

    /// Each group's RESP endpoint is a node's RESP port moved on by the group's place in
    /// `cluster.groups`; a cluster of several groups serving RESP speaks Redis Cluster's
    /// protocol, and every endpoint's port must exist.
    #[test]
    fn each_group_has_a_resp_endpoint_of_its_own_on_each_node() {
        let mut config = three_groups();
        let address = |text: &str| text.parse::<SocketAddr>().unwrap();
        config.resp_listen = Some(address("127.0.0.1:6001"));
        config.peers[1].resp = Some(address("127.0.0.1:6301"));
        config.redis_cluster = true;
        config.validate().expect("valid");
        assert_eq!(config.resp_address(1, 1), Some(address("127.0.0.1:6001")));
        assert_eq!(config.resp_address(1, 3), Some(address("127.0.0.1:6003")));
        assert_eq!(config.resp_address(3, 2), Some(address("127.0.0.1:6302")));
        assert_eq!(config.resp_address(2, 1), None, "node 2 serves no RESP");
        assert_eq!(config.resp_address(1, 9), None, "no group 9");

        config.redis_cluster = false;
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("`redis_cluster`"), "{error}");
        config.redis_cluster = true;
        config.resp_listen = Some(address("127.0.0.1:65534"));
        let error = config.validate().unwrap_err().to_string();
        assert!(
            error.contains("`resp_listen`") && error.contains("65535"),
            "{error}"
        );
        config.resp_listen = Some(address("127.0.0.1:8000"));
        config.metrics_listen = Some(address("127.0.0.1:8002"));
        let error = config.validate().unwrap_err().to_string();
        assert!(error.contains("group 3's RESP port"), "{error}");
    }

    #[test]
    fn a_cluster_of_three_groups_gives_its_plans_and_an_even_split() {
        let config = three_groups();
        assert_eq!(config.role, None);
        assert!(config.peers.iter().all(|peer| peer.role.is_none()));
        let two_safe = Safety::TwoSafe(AckCount::All);
        let plan = |id, members: [NodeId; 3], safety| GroupPlan {
            id,
            members: members.to_vec(),
            safety,
        };
        assert_eq!(
            config.group_plans(),
            [
                plan(1, [1, 2, 3], two_safe),
                plan(2, [2, 3, 1], Safety::TwoSafe(AckCount::Of(1))),
                plan(3, [3, 1, 2], two_safe),
            ]
        );
        assert_eq!(config.served_groups(), [1, 2, 3]);
        assert_eq!(config.slot_table(), SlotTable::even(&[1, 2, 3]));
        assert_eq!(
            ranges(&config.slot_table()),
            [(0, 5460, 1), (5461, 10922, 2), (10923, 16383, 3)]
        );

        // A node that is a member of two groups serves those two, in plan order.
        let mut two = config.clone();
        groups_of(&mut two)[1].members = vec![2, 3];
        two.validate().unwrap();
        assert_eq!(two.served_groups(), [1, 3]);
        // The split follows the entries' order, not their ids.
        let mut reordered = config.clone();
        groups_of(&mut reordered).reverse();
        reordered.validate().unwrap();
        assert_eq!(reordered.slot_table(), SlotTable::even(&[3, 2, 1]));
    }

    #[test]
    fn explicit_slots_make_the_table_adjacent_ranges_of_a_group_merged() {
        let mut config = three_groups();
        with_slots(
            &mut config,
            [
                &["0-99", "100-5000"],
                &["5001-9999", "16383"],
                &[" 10000 - 16382 "],
            ],
        );
        config.validate().unwrap();
        assert_eq!(
            ranges(&config.slot_table()),
            [
                (0, 5000, 1),
                (5001, 9999, 2),
                (10000, 16382, 3),
                (16383, 16383, 2)
            ]
        );
        // A group may serve no slot.
        with_slots(&mut config, [&["0-16383"], &[], &[]]);
        config.validate().unwrap();
        assert_eq!(ranges(&config.slot_table()), [(0, 16383, 1)]);
    }

    #[test]
    fn a_config_with_groups_round_trips_through_toml() {
        let mut config = three_groups();
        with_slots(
            &mut config,
            [&["0-5000"], &["5001-9999", "16383"], &["10000-16382"]],
        );
        groups_of(&mut config)[0].safety = Some(Safety::Durable(AckCount::Of(2)));
        let text = config.to_toml_string();
        assert!(text.contains("[[cluster.groups]]"), "{text}");
        assert!(!text.contains("role"), "{text}");
        assert_eq!(NodeConfig::from_toml_str(&text).unwrap(), config, "{text}");
    }

    /// The commented `[[cluster.groups]]` of [`EXAMPLE`], taken in (and the roles it says to
    /// leave out left out), is a valid configuration.
    #[test]
    fn the_examples_commented_groups_parse() {
        let mut text = String::new();
        let mut in_cluster = false;
        for line in EXAMPLE.lines() {
            in_cluster = (in_cluster || line == "# [cluster]") && !line.is_empty();
            let setting = line
                .strip_prefix("# ")
                .filter(|rest| rest.starts_with('[') || rest.contains(" = "));
            match setting {
                Some(setting) if in_cluster => text.push_str(setting),
                _ if line.starts_with("role = ") => continue,
                _ => text.push_str(line),
            }
            text.push('\n');
        }
        let config = NodeConfig::from_toml_str(&text).expect(&text);
        assert_eq!(config.served_groups(), [1, 2]);
        assert_eq!(config.group_plans()[1].members, [2, 1]);
        assert_eq!(
            ranges(&config.slot_table()),
            [(0, 8191, 1), (8192, 16383, 2)]
        );
    }

    /// Each rule of `[[cluster.groups]]`, broken by one edit of [`THREE_GROUPS`], with the
    /// field and a word of the fix its message must carry.
    #[test]
    fn each_group_rule_refuses_naming_the_field() {
        type Edit = fn(&mut NodeConfig);
        let cases: &[(&str, Edit, &str)] = &[
            (
                "`cluster.groups[1].id`",
                |c| groups_of(c)[1].id = 1,
                "is also `cluster.groups[0].id`; give each group its own id",
            ),
            (
                "`cluster.groups[1].id`",
                |c| groups_of(c)[1].id = tandem_wire::GROUP_ANY,
                "is the id a client names for any group; give the group a lower id",
            ),
            (
                "`cluster.groups`",
                |c| {
                    *groups_of(c) = (0..=CLUSTER_GROUPS_MAX as u32)
                        .map(|id| GroupEntry {
                            id,
                            members: vec![1],
                            safety: None,
                            slots: None,
                        })
                        .collect()
                },
                "at most 1024",
            ),
            (
                "`cluster.groups[0].members`",
                |c| groups_of(c)[0].members.clear(),
                "needs a member",
            ),
            (
                "`cluster.groups[0].members`",
                |c| groups_of(c)[0].members = vec![1; 65],
                "65 members; a group has at most 64",
            ),
            (
                "`cluster.groups[0].members`",
                |c| groups_of(c)[0].members = vec![1, 2, 1],
                "node 1 is listed twice",
            ),
            (
                "`cluster.groups[2].members`",
                |c| groups_of(c)[2].members.push(4),
                "node 4 is neither this node (node_id = 1) nor one of its peers",
            ),
            (
                "`cluster.groups`",
                |c| {
                    for entry in groups_of(c) {
                        entry.members.retain(|&member| member != 1);
                    }
                },
                "node 1 is a member of no group in cluster.groups; add it",
            ),
            (
                "`role`",
                |c| c.role = Some(Role::Primary),
                "each group's members say the roles",
            ),
            (
                "`peers[0].role`",
                |c| c.peers[0].role = Some(Role::Backup),
                "remove it",
            ),
            (
                "`group.id`",
                |c| c.group.id = 7,
                "each group's id is given there",
            ),
            (
                "`cluster.groups[1].safety`",
                |c| {
                    groups_of(c)[1].members = vec![2, 3];
                    groups_of(c)[1].safety = Some(Safety::TwoSafe(AckCount::Of(3)));
                },
                "cannot be met by a group of 1 backups; use K ≤ 1",
            ),
            (
                "`cluster.groups[0].safety`",
                |c| groups_of(c)[0].safety = Some(Safety::Durable(AckCount::Of(3))),
                "cannot be met by a group of 2 backups",
            ),
            (
                "`group.safety`",
                |c| {
                    c.group.safety = Safety::TwoSafeApplied(AckCount::Of(2));
                    groups_of(c)[2].members = vec![3, 1];
                },
                "the rule of cluster.groups[2] (group 3, which gives none of its own)",
            ),
            (
                "`cluster.groups[0].slots[1]`",
                |c| with_slots(c, [&["0-4", "5-3"], &["6-9999"], &["10000-16383"]]),
                "\"5-3\" runs backwards",
            ),
            (
                "`cluster.groups[2].slots[0]`",
                |c| with_slots(c, [&["0-5000"], &["5001-9999"], &["10000-16384"]]),
                "slot 16384 is past the last slot, 16383",
            ),
            (
                "`cluster.groups[2].slots[0]`",
                |c| with_slots(c, [&["0-5000"], &["5001-9999"], &["16384"]]),
                "slot 16384 is past the last slot",
            ),
            (
                "`cluster.groups[1].slots[0]`",
                |c| with_slots(c, [&["0-5000"], &["five"], &["10000-16383"]]),
                "\"five\" is not a slot range; write \"A-B\"",
            ),
            (
                "`cluster.groups[1].slots[0]`",
                |c| with_slots(c, [&["0-5000"], &["4000-9999"], &["10000-16383"]]),
                "slot 4000 is also in `cluster.groups[0].slots[0]`",
            ),
            (
                "`cluster.groups`",
                |c| with_slots(c, [&["0-5000"], &["5001-9999"], &["10000-16382"]]),
                "slot 16383 is in no group's slots",
            ),
            (
                "`cluster.groups`",
                |c| with_slots(c, [&["0-5000"], &["5002-9999"], &["10000-16383"]]),
                "slot 5001 is in no group's slots",
            ),
            (
                "`cluster.groups[1].slots`",
                |c| groups_of(c)[0].slots = Some(vec!["0-16383".into()]),
                "either every group lists its slots or none does",
            ),
        ];
        for (field, edit, fix) in cases {
            let mut config = three_groups();
            edit(&mut config);
            // Through validate and through the text a user would write.
            let error = config.validate().expect_err(field).to_string();
            assert!(
                error.starts_with(&format!("config field {field}: ")),
                "{error}"
            );
            assert!(error.contains(fix), "{field}: {error}");
            let reparsed = NodeConfig::from_toml_str(&config.to_toml_string());
            let reparsed = reparsed.expect_err(field).to_string();
            assert!(
                reparsed.contains(&format!("config field {field}: ")),
                "{reparsed}"
            );
        }
        // A group's safety that is not a rule at all is the parser's to name.
        let text = THREE_GROUPS.replacen("safety = \"2-safe:1\"", "safety = \"3-safe\"", 1);
        let message = NodeConfig::from_toml_str(&text).unwrap_err().to_string();
        assert!(
            message.contains("config field `cluster.groups.safety`: unknown safety"),
            "{message}"
        );
    }
}
