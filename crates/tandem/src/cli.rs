//! Command-line arguments, validated before anything runs.
//!
//! A bad value gets one line that names the flag and what it accepts, and exit code 2.

use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use tandem_memory::{PAGE_SIZE, Strategy};

#[derive(Debug, Parser)]
#[command(
    name = "tandem",
    version,
    about = "A replicated in-memory transaction store"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Measure throughput (benchmarks, not tests: run them on a quiet machine).
    Bench {
        #[command(subcommand)]
        command: BenchCommand,
    },
    /// Run one node of a group from a TOML configuration file, until killed.
    Node(NodeArgs),
    /// Simulate a whole cluster deterministically from a seed (or a range of seeds), with
    /// faults, and run the checkers.
    Sim(SimArgs),
    /// Start a local cluster on loopback (child processes, data under ./.tandem/) and keep it
    /// running until Ctrl-C or `tandem down`.
    Up(UpArgs),
    /// Show each node of the local cluster: role, view, LSN, lag, last heartbeat, pid, and
    /// its native (stub, `tandem proxy --cluster`) and Redis addresses.
    Status(StatusArgs),
    /// Kill a node of the local cluster with SIGKILL, as a machine failure would.
    Kill(KillArgs),
    /// Start a killed node of the local cluster again, with its configuration: it comes back
    /// without its memory and rejoins as a spare, then a backup once caught up.
    Start(StartArgs),
    /// Stop every node of the local cluster (SIGTERM, then SIGKILL if one lingers).
    Down(DownArgs),
    /// Start 3 nodes, run Debit-Credit through the client stub (or, with --client redis,
    /// redis-py applications through `tandem proxy`), kill the primary midway and report the
    /// failover: gap, lost and duplicate commits, client errors, consistency.
    Demo(DemoArgs),
    /// Serve Redis clients on a local port and run their commands on the cluster through the
    /// client stub: every command exactly once, failovers seen as a pause, never an error.
    Proxy(ProxyArgs),
    /// Load a Redis RDB file (redis-server's dump.rdb, or what `redis-cli --rdb` saved)
    /// into a cluster through its Redis port: every key with its value and expiry, and the
    /// function libraries. Export is `redis-cli -p PORT --rdb FILE` against a node.
    Import(ImportArgs),
    /// Spin cores until standard input closes (the noise of `bench failover --noise` and the
    /// busy threads of `bench starvation`).
    #[command(hide = true)]
    Burn(BurnArgs),
}

#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The RDB file (version 10, Redis 7.0, or older).
    pub file: std::path::PathBuf,
    /// Where to send the keys: the primary's Redis address (`tandem status`), or a
    /// `tandem proxy`'s.
    #[arg(long, value_name = "HOST:PORT")]
    pub redis: String,
    /// The password the node asks for (`requirepass`, or --user's).
    #[arg(long, value_name = "PASSWORD")]
    pub password: Option<String>,
    /// The user to log in as (`AUTH user password`), with --password.
    #[arg(long, value_name = "NAME", requires = "password")]
    pub user: Option<String>,
    /// Overwrite keys and function libraries the cluster already has (without it, one that
    /// exists stops the import).
    #[arg(long)]
    pub replace: bool,
    /// Load database N's keys of the file alone (into database N); without it, every
    /// database's keys load, each into the database of its number.
    #[arg(long, value_name = "N")]
    pub db: Option<u64>,
}

#[derive(Debug, Args)]
pub struct BurnArgs {
    /// Busy threads, 1 to 1024.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub threads: u32,
}

#[derive(Debug, Args)]
pub struct UpArgs {
    /// Nodes in the cluster, 1 to 9 (the first three are the config store's voters).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub nodes: u32,
    /// Replication groups, 1 to 16: each its own database, log and primary, the primaries
    /// spread round the nodes (group G led by node (G − 1) mod N + 1) and every other node a
    /// backup of each. With more than one, the groups are numbered from 1 and split the
    /// 16,384 hash slots evenly: stub clients name their group, the redis workload speaks
    /// Redis Cluster's protocol (an endpoint per group on each node) and `tandem proxy`
    /// routes each command by its keys' slot.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub groups: u32,
    /// Database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// The group's safety rule: 1-safe, bounded:N, 2-safe, 2-safe:K, 2-safe-applied[:K],
    /// durable[:K] (every acknowledged commit synced to the write-ahead logs).
    #[arg(long, default_value = "2-safe", value_parser = parse_safety)]
    pub safety: tandem_replication::Safety,
    /// When each node syncs its write-ahead log on its own: always (every group of appends),
    /// every:MS, or never (left to the operating system). A durable commit is synced at once
    /// whatever this says.
    #[arg(long, default_value = "every:100", value_parser = parse_fsync)]
    pub fsync: tandem_node::SyncPolicy,
    /// MiB of batches a node applies between two checkpoints of its database, 1 to 65536: the
    /// log then drops what a checkpoint covers, and a restart replays only what follows it.
    #[arg(long = "checkpoint-mib", value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub checkpoint_mib: u64,
    /// Where the cluster keeps its files.
    #[arg(long, default_value = ".tandem")]
    pub dir: std::path::PathBuf,
    /// The data model every node serves: redis (your own data, through Redis clients on each
    /// node's RESP port), debit-credit or order-entry.
    #[arg(long, default_value = "redis", value_parser = parse_model_name)]
    pub workload: String,
    /// Ticks (1 ms each) of silence after which a node suspects a peer, ≥ 4: fewer find a
    /// paused node sooner, and suspect falsely more often on a loaded machine, where each false
    /// suspicion may move the primary (a Redis client of the old one then gets READONLY).
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(4..=10_000))]
    pub suspect_ticks: u64,
    /// The primary's lease in ticks, ≥ 3 and below --suspect-ticks: it answers reads, and
    /// writes that change nothing, only within it of a heartbeat every backup echoed, so a
    /// longer one rides out a loaded machine's late echoes, and a failover waits it out.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(3..=9_999))]
    pub lease_ticks: u64,
    /// Start a new cluster even if --dir holds one (its data is deleted). Without it, `up`
    /// on a directory that holds a cluster restarts that cluster from its disks, with the
    /// configuration it was made with (the other flags are then ignored).
    #[arg(long)]
    pub fresh: bool,
    /// The password clients give before any other command, on every node: Redis clients
    /// (`AUTH PASS`, `redis-cli -a PASS`), stubs on the native port, and `/checksum` on a
    /// non-loopback HTTP address (`Authorization: Bearer PASS`); 1 to 512 bytes, kept in each
    /// node's `node.toml`, readable by its owner only. Prefer --requirepass-file or the
    /// TANDEM_REQUIREPASS environment variable: a flag's value stays visible to every user of
    /// the machine (`ps`, /proc/PID/cmdline) for as long as `tandem up` runs. Without a
    /// password the nodes serve Redis clients on loopback only.
    #[arg(long, value_name = "PASS", value_parser = parse_requirepass)]
    pub requirepass: Option<String>,
    /// Read the password (see --requirepass) from the first line of FILE, its line end
    /// stripped; the file should be readable by its owner only (`chmod 600 FILE`).
    #[arg(
        long = "requirepass-file",
        value_name = "FILE",
        conflicts_with = "requirepass"
    )]
    pub requirepass_file: Option<std::path::PathBuf>,
    /// A Redis user besides `default`, in the words of Redis's `ACL SETUSER` (repeat the flag
    /// for more): its name, `>PASSWORD`, any `~PATTERN`s its keys must match (none: any key)
    /// and `read-only` or `read-write` (the default), for example `--user "app >s3cret ~app:*"`
    /// or `--user "report >pw read-only"`. A user with key patterns runs no command that
    /// reaches keys it does not name (KEYS, SCAN, DBSIZE, FLUSHALL) and no script. Prefer
    /// --users-file: a flag's password is visible to every user of the machine.
    #[arg(long = "user", value_name = "SPEC", value_parser = parse_user)]
    pub users: Vec<tandem_runtime::config::UserConfig>,
    /// Read users (as --user takes them) from FILE, one SPEC a line; empty lines and lines
    /// starting with `#` are skipped. The file should be readable by its owner only.
    #[arg(long = "users-file", value_name = "FILE")]
    pub users_file: Option<std::path::PathBuf>,
    /// The IP address every node's HTTP endpoint (/status, /metrics, /checksum) binds to,
    /// each on a port of its own: 127.0.0.1 by default. Elsewhere (0.0.0.0 for every
    /// interface) /status and /metrics are open to anyone who reaches it, and /checksum,
    /// which pauses the node, asks for the password (Authorization: Bearer) or, without
    /// one, is refused.
    #[arg(long = "http-ip", value_name = "IP", default_value = "127.0.0.1")]
    pub http_ip: std::net::IpAddr,
    /// TLS everywhere but the native client port: `up` makes a CA for the cluster and a
    /// certificate per node naming it (`node-ID`); Redis clients speak TLS only and trust
    /// `DIR/tls/ca.pem` (`redis-cli --tls --cacert …`), and peer links run TLS, each node
    /// taking only peers whose certificate the CA signed for the node they claim to be.
    #[arg(long)]
    pub tls: bool,
    /// Every node's RESP port speaks Redis Cluster's protocol: `CLUSTER SLOTS`, `SHARDS`,
    /// `NODES`, `INFO`, and `-MOVED` to the primary for a write sent elsewhere, so that
    /// cluster clients (`redis-cli -c`, redis-py's `RedisCluster`, go-redis's
    /// `ClusterClient`) route by themselves and follow the primary across a failover. The
    /// group serves all 16,384 slots; without the flag each port answers as one server.
    #[arg(long = "redis-cluster")]
    pub redis_cluster: bool,
}

fn parse_user(text: &str) -> Result<tandem_runtime::config::UserConfig, String> {
    tandem_runtime::config::UserConfig::from_spec(text)
}

fn parse_requirepass(text: &str) -> Result<String, String> {
    check_requirepass(text)
}

/// A password `tandem up` may give its nodes (from a flag, a file or the environment): 1 to
/// `REQUIREPASS_LEN_MAX` bytes. The error says its length only: a password is never echoed.
pub fn check_requirepass(text: &str) -> Result<String, String> {
    let max = tandem_runtime::config::REQUIREPASS_LEN_MAX;
    if text.is_empty() || text.len() > max {
        return Err(format!(
            "a password of {} bytes; give 1 to {max} bytes",
            text.len()
        ));
    }
    Ok(text.to_owned())
}

fn parse_model_name(text: &str) -> Result<String, String> {
    if tandem_workloads::MODEL_NAMES.contains(&text) {
        Ok(text.to_string())
    } else {
        Err(format!(
            "unknown data model '{text}'; accepted values: {}",
            tandem_workloads::MODEL_NAMES.join(", ")
        ))
    }
}

#[derive(Debug, Args)]
pub struct StatusArgs {
    /// The local cluster's directory.
    #[arg(long, default_value = ".tandem")]
    pub dir: std::path::PathBuf,
    /// Print the nodes' status as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct KillArgs {
    /// The node id to kill.
    #[arg(value_name = "NODE", value_parser = clap::value_parser!(u32).range(1..=9))]
    pub node: u32,
    /// The local cluster's directory.
    #[arg(long, default_value = ".tandem")]
    pub dir: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct StartArgs {
    /// The node id to start again.
    #[arg(value_name = "NODE", value_parser = clap::value_parser!(u32).range(1..=9))]
    pub node: u32,
    /// The local cluster's directory.
    #[arg(long, default_value = ".tandem")]
    pub dir: std::path::PathBuf,
}

#[derive(Debug, Args)]
pub struct DownArgs {
    /// The local cluster's directory.
    #[arg(long, default_value = ".tandem")]
    pub dir: std::path::PathBuf,
}

#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Client stubs, each with one call in flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: u32,
    /// Seconds of load; the primary is killed halfway.
    #[arg(long, value_name = "S", default_value = "2", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// Where the demo's cluster keeps its files.
    #[arg(long, default_value = ".tandem/demo")]
    pub dir: std::path::PathBuf,
    /// The failure injected halfway: kill-primary (SIGKILL), kill-backup, pause-primary
    /// (SIGSTOP for --fault-ms, then SIGCONT: a partitioned old primary), restart-primary
    /// (restarted --fault-ms after the kill), isolate-primary (every packet it sends dropped
    /// for --fault-ms: needs root, iptables and cgroup v2), or power-loss (SIGKILL of every
    /// node at once, all restarted --fault-ms later from their disks).
    #[arg(long, default_value = "kill-primary", value_parser = crate::demo::Fault::parse)]
    pub fault: crate::demo::Fault,
    /// How long a fault that ends lasts, in ms (1 to 60000; at most half the run): a pause,
    /// an isolation (longer while no other node answers as primary), or the time killed
    /// nodes stay down before their restart.
    #[arg(long = "fault-ms", value_name = "MS", default_value_t = crate::demo::FAULT_MS_DEFAULT, value_parser = clap::value_parser!(u64).range(1..=60_000))]
    pub fault_ms: u64,
    /// Ticks (1 ms each) of silence after which a node suspects a peer, ≥ 4 (the lease,
    /// shorter, must run out first): a killed node is seen at once by its closed connection,
    /// so silence only finds a paused or cut-off one; fewer ticks find it sooner and suspect
    /// falsely more often on a loaded machine.
    #[arg(long, default_value_t = 30, value_parser = clap::value_parser!(u64).range(4..=10_000))]
    pub suspect_ticks: u64,
    /// The group's safety rule: 1-safe, bounded:N, 2-safe, 2-safe:K, 2-safe-applied[:K],
    /// durable[:K] (every acknowledged commit synced to the write-ahead logs). Default:
    /// 2-safe, or durable with --fault power-loss (the rules that acknowledge from memory
    /// lose what the logs had not synced when every node goes down at once).
    #[arg(long, value_parser = parse_safety)]
    pub safety: Option<tandem_replication::Safety>,
    /// When each node syncs its write-ahead log on its own: always, every:MS or never (a
    /// durable commit is synced at once whatever this says).
    #[arg(long, default_value = "every:100", value_parser = parse_fsync)]
    pub fsync: tandem_node::SyncPolicy,
    /// MiB of batches a node applies between two checkpoints of its database, 1 to 65536: the
    /// log then drops what a checkpoint covers, and a restart replays only what follows it.
    #[arg(long = "checkpoint-mib", value_name = "N", default_value_t = 128, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub checkpoint_mib: u64,
    /// Records each primary's retained tail keeps. A small tail makes a node that comes back
    /// (restart-primary) catch up by state transfer instead of from the tail.
    #[arg(long = "tail-records", value_name = "N", default_value_t = 1_000_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub tail_records_max: u64,
    /// Where the timeline chart goes: a .png or .svg path (default: DIR/timeline.png).
    #[arg(long, value_name = "PATH")]
    pub timeline: Option<std::path::PathBuf>,
    /// Run the peer links over TLS (certificates naming each node, from a CA made for the
    /// cluster), as `tandem up --tls` does.
    #[arg(long)]
    pub tls: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Who calls: stub (Rust client stubs running Debit-Credit) or redis (redis-py processes
    /// running INCR and a Lua transfer through `tandem proxy` on a Redis-model cluster; needs
    /// Python with redis-py: `.ci/setup` makes target/pyenv).
    #[arg(long, value_enum, default_value_t = DemoClient::Stub)]
    pub client: DemoClient,
    /// With --client redis: how many `tandem proxy` processes the clients share (0 to 16;
    /// default 2). 0 connects each client to the nodes' RESP ports directly, as a plain Redis
    /// application would: the failover then shows it errors, which the proxy hides.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(0..=16))]
    pub proxies: Option<u32>,
}

/// Who calls the cluster in `tandem demo`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum DemoClient {
    /// The Rust client stub, calling Debit-Credit procedures.
    Stub,
    /// redis-py applications through `tandem proxy`.
    Redis,
}

#[derive(Debug, Args)]
pub struct SimArgs {
    /// One seed: prints its fault rates, and its trace if a checker fails.
    #[arg(long, conflicts_with = "seeds")]
    pub seed: Option<u64>,
    /// A range of seeds, A..B (B excluded).
    #[arg(long, value_parser = parse_seed_range)]
    pub seeds: Option<std::ops::Range<u64>>,
    /// Ticks of faults before the cluster is healed and must converge.
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub ticks: u64,
    /// Which part of the fault space the cluster seeds draw from: every rule at the usual
    /// rates, 2-safe with fewer acks than backups under frequent crashes, restarts and
    /// partitions (where the rarest bugs hid), or the usual rates with crashes at any time,
    /// not only while the cluster is whole (recovery is then required whenever a node holding
    /// every acknowledged record is up).
    #[arg(long, value_enum, default_value_t = SimMix::Every)]
    pub mix: SimMix,
    /// The data model the nodes serve and the clients call: Debit-Credit (conservation of
    /// money checked on every replica), or Redis (a seeded mix of commands, MULTI/EXEC
    /// blocks and Lua scripts, every acknowledged reply checked against a plain model of the
    /// final history). A seed's faults are the same under both.
    #[arg(long, value_enum, default_value_t = SimModel::DebitCredit)]
    pub model: SimModel,
    /// Replication groups every node serves in: group g's first primary is node
    /// (g − 1) mod n + 1, the clients and readers are dealt out over the groups, a node's
    /// crash fails over every group it led, and every checker holds per group.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub groups: u32,
    /// Members of each group (its primary and the nodes after it round the ring); a node
    /// serves in the groups it is placed in alone. Default, or more than a seed's nodes:
    /// every node.
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub members: Option<u32>,
    /// Plant a known bug in the real code (builds with the inject-bugs feature):
    /// early-reply, skip-truncate, promote-lowest, skip-dedup, ignore-lease, transfer-short,
    /// ignore-views-asked-for, missed-promotion, restarted-serves, lease-margin-off-by-one,
    /// abandoned-sent, ignore-bound, rewind-forgets, ignore-lease-owed, skip-read-index,
    /// proxy-retries-unanswered or durable-before-sync.
    #[arg(long, value_name = "BUG")]
    pub inject: Option<String>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The data model `tandem sim` runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SimModel {
    #[value(name = "debit-credit")]
    DebitCredit,
    Redis,
}

/// The part of the fault space `tandem sim` draws cluster seeds from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SimMix {
    Every,
    #[value(name = "k-of-n")]
    KOfN,
    /// Crashes at any time, not only while the cluster is whole.
    #[value(name = "any-time")]
    AnyTime,
}

fn parse_seed_range(text: &str) -> Result<std::ops::Range<u64>, String> {
    let accepted = "give a range of seeds as A..B with A < B, e.g. 0..1000";
    let (start, end) = text
        .split_once("..")
        .ok_or_else(|| format!("not a range; {accepted}"))?;
    let start: u64 = start
        .trim()
        .parse()
        .map_err(|_| format!("bad start; {accepted}"))?;
    let end: u64 = end
        .trim()
        .parse()
        .map_err(|_| format!("bad end; {accepted}"))?;
    if start >= end {
        return Err(format!("empty range; {accepted}"));
    }
    Ok(start..end)
}

#[derive(Debug, Args)]
pub struct ProxyArgs {
    /// One or more nodes of the cluster, comma-separated: their native (stub) address, not
    /// their Redis port (a node config's `listen`; the `native` column of `tandem status`).
    /// One is enough: the proxy asks it for the others, and asks again every 2 s.
    #[arg(long, value_name = "ADDR[,ADDR...]", value_parser = parse_addresses)]
    pub cluster: Addresses,
    /// Where applications connect.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6379")]
    pub listen: std::net::SocketAddr,
    /// The replication group of a cluster of one group (a local cluster's is 0); a cluster
    /// of several names its slot table, and the proxy routes each command by its keys' slot.
    #[arg(long, default_value_t = 0)]
    pub group: u32,
    /// How long a command may wait for the cluster, failovers included, before its
    /// application is told an error (1 to 3,600,000).
    #[arg(long = "deadline-ms", value_name = "MS", default_value_t = 5000, value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    pub deadline_ms: u64,
    /// How reads sent to backups after `READONLY` see the history: linearizable (the
    /// default), session, or bounded:MS.
    #[arg(long, value_name = "MODE", default_value = "linearizable", value_parser = parse_read_consistency)]
    pub reads: tandem_replication::ReadConsistency,
    /// Worker threads, 1 to 64: each serves its share of the applications' connections, and
    /// their calls to the cluster, on one poll loop. One keeps up with many connections; more
    /// help where the proxy has cores of its own.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u16).range(1..=64))]
    pub threads: u16,
    /// A node's configuration (`node.toml`) to take the cluster's passwords from: the proxy
    /// asks its applications the same password (`requirepass`) and knows the same users
    /// (`[[users]]`, their rights checked here, so they hold through failovers), and proves
    /// to the nodes the password of --cluster-user.
    #[arg(long, value_name = "NODE_TOML")]
    pub auth_from: Option<std::path::PathBuf>,
    /// Who the proxy is to the nodes, with --auth-from: `default` (the `requirepass`), or a
    /// user of the node's `[[users]]` with every right.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "default",
        requires = "auth_from"
    )]
    pub cluster_user: String,
    /// Speak TLS to the nodes' native ports (nodes with `[tls] native = true`, as `tandem up
    /// --tls` makes them), trusting this CA certificate (`DIR/tls/ca.pem`). With
    /// --auth-from, the node's `[tls] ca` is taken unless this names another.
    #[arg(long, value_name = "CA_PEM")]
    pub tls_ca: Option<std::path::PathBuf>,
    /// The least severe log lines the proxy writes (as `tandem node --log-level`).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
    /// Exit when standard input reaches its end (as `tandem node`'s flag: a parent that
    /// holds the pipe takes the proxy down with it, even when it is killed).
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
}

/// Which replication links `bench replication` authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PeerAuthMode {
    /// Plain links.
    Off,
    /// A `peer_secret`: a MAC on every frame.
    On,
    /// Plain and MAC, interleaved.
    Both,
    /// TLS 1.3 with certificates from a CA made for the run.
    Tls,
    /// Plain, MAC and TLS, interleaved.
    All,
}

/// A list of socket addresses, as `--cluster` takes them.
#[derive(Clone, Debug)]
pub struct Addresses(pub Vec<std::net::SocketAddr>);

fn parse_addresses(text: &str) -> Result<Addresses, String> {
    let mut addresses = Vec::new();
    for part in text.split(',') {
        let part = part.trim();
        let address = part.parse().map_err(|_| {
            format!("'{part}' is not an address: give HOST:PORT, e.g. 127.0.0.1:7001")
        })?;
        if !addresses.contains(&address) {
            addresses.push(address);
        }
    }
    Ok(Addresses(addresses))
}

fn parse_read_consistency(text: &str) -> Result<tandem_replication::ReadConsistency, String> {
    text.parse().map_err(|err| format!("{err}"))
}

#[derive(Debug, Args)]
pub struct NodeArgs {
    /// The node's configuration (crates/runtime/src/config.rs has a commented example).
    #[arg(long, value_name = "FILE")]
    pub config: std::path::PathBuf,
    /// Exit when standard input reaches its end: a parent that holds the other end of a pipe
    /// takes its children down with it, even when it is killed.
    #[arg(long, hide = true)]
    pub exit_on_stdin_eof: bool,
    /// The least severe log lines the node writes: warn (problems only), info (also role and
    /// view changes, the default), debug, or trace (also every cluster message). Wins over
    /// RUST_LOG, which takes tracing's filter syntax (e.g. `RUST_LOG=tandem_runtime=debug`).
    #[arg(long, value_enum, value_name = "LEVEL")]
    pub log_level: Option<LogLevel>,
}

/// A log level of `--log-level`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    /// The level as a filter directive.
    pub fn directive(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// Run a workload in-process on each logging strategy, one txn after another, as fast as
    /// possible, and report tx/s, redo bytes per txn and the consistency check.
    Engine(EngineArgs),
    /// Run a primary and its backups as separate processes on loopback: throughput, commit
    /// latency and bytes shipped, for standalone, passive and active backups.
    Replication(ReplicationArgs),
    /// Kill the primary of a 3-node cluster under load, N times, and report each failover.
    Failover(FailoverArgs),
    /// Whether a busy machine fools the failure detector: view changes of an idle cluster
    /// beside N busy threads of another process against quiet windows, interleaved, and the
    /// takeover of a killed primary with and without them.
    Starvation(StarvationArgs),
    /// The same Redis commands against tandem (2-safe, one backup), a standalone
    /// redis-server and a redis-server with a replica and WAIT after each write, interleaved.
    Resp(RespArgs),
    /// Read throughput of a local Debit-Credit cluster with reads served by backups
    /// (linearizable, session, bounded:10) against reads sent to the primary, under a stream
    /// of writes, interleaved; linearizable reads are checked against acknowledged writes.
    Reads(ReadsArgs),
    /// What splitting the data over replication groups buys: a local Debit-Credit cluster
    /// per group count (default 1 and 3), client threads dealt round its groups, committed
    /// calls per second and the nodes' CPU per call, interleaved; every group's replicas
    /// are compared by checksum afterwards.
    Groups(GroupsArgs),
    /// What durability costs: tandem 2-safe (memory), tandem durable (every acknowledged
    /// write synced to disk on every node), redis-server with appendfsync always and with
    /// everysec, on SET and on Debit-Credit (a Lua script), interleaved.
    Durability(DurabilityArgs),
    /// What finding a program's dirty pages costs with each tracker the kernel grants
    /// (userfaultfd, soft-dirty bits, mprotect): a first store to a page, and a harvest.
    Mirror(MirrorArgs),
}

#[derive(Debug, Args)]
pub struct MirrorArgs {
    /// The mirrored region's size in MiB, 1 to 65536.
    #[arg(long = "region-mib", value_name = "N", default_value_t = 1024, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub region_mib: u32,
    /// The share of the region's pages stored to in each interval, in percent (above 0, at
    /// most 100).
    #[arg(long = "dirty-percent", value_name = "P", default_value = "1", value_parser = parse_percent)]
    pub dirty_percent: f64,
    /// Checkpoint intervals per round, 1 to 1000.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub intervals: u32,
    /// Rounds, each measuring every tracker in turn, 1 to 100.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A share in percent: above 0, at most 100.
fn parse_percent(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(percent) if percent > 0.0 && percent <= 100.0 => Ok(percent),
        _ => Err(format!("{text:?} is no percentage above 0 and at most 100")),
    }
}

#[derive(Debug, Args)]
pub struct DurabilityArgs {
    /// Nodes in each tandem cluster, 2 to 9: a primary and at least one backup.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=9))]
    pub nodes: u32,
    /// Client connections to each system, 1 to 1000.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clients: u32,
    /// Operations each connection keeps in flight, 1 to 1024.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub pipeline: u32,
    /// Measured seconds per system and workload, cut into slices of at most 0.5 s that the
    /// pairs take in turns.
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Workloads, comma-separated: set (SET on random keys), debit-credit (a Lua transfer
    /// through EVALSHA).
    #[arg(long, default_value = "set,debit-credit", value_parser = parse_durability_workloads)]
    pub workloads: DurabilityWorkloads,
    /// Systems, comma-separated: tandem-2safe, tandem-durable, redis-always, redis-everysec.
    #[arg(
        long,
        default_value = "tandem-2safe,tandem-durable,redis-always,redis-everysec",
        value_parser = parse_durability_systems
    )]
    pub systems: DurabilitySystems,
    /// Database (segment) size of each tandem node in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(16..=65536))]
    pub db_mib: u32,
    /// Where every system keeps its files (logs, append-only files), one folder each; it
    /// should be on the disk to measure, not a tmpfs.
    #[arg(long, default_value = ".tandem/bench-durability")]
    pub dir: std::path::PathBuf,
    /// Database sizes in MiB, comma-separated, at which a backup is restarted from its
    /// write-ahead log and timed (each a 3-node cluster of that size); "none" to skip.
    #[arg(long = "recovery-mib", default_value = "64,256", value_parser = parse_recovery_mib)]
    pub recovery_mib: RecoveryMib,
    /// Seconds of SETs (8 connections, 16 in flight each) that fill each recovery cluster's
    /// logs before the restart.
    #[arg(long, value_name = "S", default_value = "2", value_parser = parse_seconds)]
    pub recovery_seconds: f64,
    /// MiB of batches between two checkpoints in each recovery cluster, 1 to 65536 (small, so
    /// that the restart installs a checkpoint and replays only the log after it).
    #[arg(long = "recovery-checkpoint-mib", value_name = "N", default_value_t = 8, value_parser = clap::value_parser!(u64).range(1..=65536))]
    pub recovery_checkpoint_mib: u64,
    /// Percent of each recovery database written with 64 KiB values before the SETs, 0 to 75:
    /// the pages they change go into the checkpoint the restart installs (75, about as full as
    /// the Redis model's allocator lets such values fill it, is the worst case of a restart
    /// from a checkpoint).
    #[arg(long = "recovery-fill-percent", value_name = "P", default_value_t = 0, value_parser = clap::value_parser!(u8).range(0..=75))]
    pub recovery_fill_percent: u8,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// The database sizes `bench durability` times a restart at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecoveryMib(pub Vec<u32>);

fn parse_recovery_mib(text: &str) -> Result<RecoveryMib, String> {
    if text == "none" {
        return Ok(RecoveryMib(Vec::new()));
    }
    let mut sizes = Vec::new();
    for part in text.split(',').map(str::trim) {
        match part.parse::<u32>() {
            Ok(mib @ 16..=65536) => sizes.push(mib),
            _ => {
                return Err(format!(
                    "'{part}' is not a database size; give MiB from 16 to 65536, \
                     comma-separated (e.g. 64,256,1024), or none"
                ));
            }
        }
    }
    Ok(RecoveryMib(sizes))
}

/// The systems of `bench durability`, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurabilitySystems(pub Vec<crate::bench::durability::System>);
/// The workloads of `bench durability`, in the order given.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DurabilityWorkloads(pub Vec<crate::bench::durability::Workload>);

fn parse_durability_systems(text: &str) -> Result<DurabilitySystems, String> {
    use crate::bench::durability::System;
    let names: Vec<&str> = System::ALL.iter().map(|system| system.name()).collect();
    parse_names(text, "system", &names, System::parse).map(DurabilitySystems)
}

fn parse_durability_workloads(text: &str) -> Result<DurabilityWorkloads, String> {
    use crate::bench::durability::Workload;
    let names: Vec<&str> = Workload::ALL
        .iter()
        .map(|workload| workload.name())
        .collect();
    parse_names(text, "workload", &names, Workload::parse).map(DurabilityWorkloads)
}

/// A comma-separated list of distinct names, each one of `accepted`.
fn parse_names<T: PartialEq>(
    text: &str,
    what: &str,
    accepted: &[&str],
    parse: fn(&str) -> Option<T>,
) -> Result<Vec<T>, String> {
    let mut items = Vec::new();
    for name in text.split(',').map(str::trim) {
        let item = parse(name).ok_or_else(|| {
            format!(
                "unknown {what} '{name}'; accepted values, comma-separated: {}",
                accepted.join(", ")
            )
        })?;
        if items.contains(&item) {
            return Err(format!("{what} '{name}' is listed twice; name each once"));
        }
        items.push(item);
    }
    Ok(items)
}

#[derive(Debug, Args)]
pub struct ReadsArgs {
    /// Nodes in the cluster, 2 to 9: a primary and at least one backup to read from.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=9))]
    pub nodes: u32,
    /// Reader threads, 1 to 256, each with one client stub per contender and one read in
    /// flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: u32,
    /// Writer threads, 0 to 64, depositing to random accounts throughout, so that reads
    /// compete with a live stream of commits.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(0..=64))]
    pub writers: u32,
    /// Measured seconds in all, which the contenders share in 250 ms slices: at least 1.
    #[arg(long, value_name = "S", default_value = "8", value_parser = parse_reads_seconds)]
    pub seconds: f64,
    /// Database (segment) size of each node in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// Where the cluster keeps its files (its node logs stay there after the run).
    #[arg(long, default_value = ".tandem/bench-reads")]
    pub dir: std::path::PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// Seconds for `bench reads`: enough for one slice of every contender.
fn parse_reads_seconds(text: &str) -> Result<f64, String> {
    use crate::bench::reads::{CONTENDERS, SLICE};
    let seconds = parse_seconds(text)?;
    let least = SLICE.as_secs_f64() * CONTENDERS.len() as f64;
    if seconds < least {
        return Err(format!(
            "less than one {} ms slice for each of the {} contenders; give {least} or more \
             seconds, e.g. 8",
            SLICE.as_millis(),
            CONTENDERS.len()
        ));
    }
    Ok(seconds)
}

#[derive(Debug, Args)]
pub struct GroupsArgs {
    /// Nodes in each cluster, 2 to 9: each leads some of the groups and backs up the rest.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=9))]
    pub nodes: u32,
    /// The contenders, comma-separated: a cluster with that many groups each, 1 to 16 (what
    /// `tandem up --groups` takes); the first is the baseline of the ratios.
    #[arg(
        long,
        value_name = "LIST",
        default_value = "1,3",
        value_parser = crate::bench::groups::parse_group_counts
    )]
    pub groups: crate::bench::groups::GroupCounts,
    /// Client threads, 1 to 1024, each driving one stub client with one call in flight;
    /// client i calls group (i mod G) + 1, or group 0 when G is 1.
    #[arg(long, default_value_t = 12, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub clients: u32,
    /// Seconds of each slice, one contender's measured turn.
    #[arg(long, value_name = "S", default_value = "2", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Rounds, 1 to 1000, each running every contender for one slice, in an order rotated
    /// every round.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Database (segment) size of each group in whole MiB.
    #[arg(
        long = "db-mib",
        value_name = "N",
        default_value_t = 8,
        value_parser = clap::value_parser!(u32).range(1..=65536)
    )]
    pub db_mib: u32,
    /// Where the clusters keep their files, a folder per contender, kept after the run;
    /// without it, a scratch folder under the system's temp dir, removed after a run that
    /// passes.
    #[arg(long)]
    pub dir: Option<std::path::PathBuf>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct RespArgs {
    /// Systems, comma-separated: tandem (a node's RESP port), tandem-proxy (the same group
    /// through `tandem proxy`), redis, redis-wait, and tandem-tls and redis-tls (TLS on the
    /// client port, to price it).
    #[arg(long, default_value = "tandem,tandem-proxy,redis,redis-wait", value_parser = parse_systems)]
    pub systems: Systems,
    /// Tests, comma-separated: tandem's EVALSHA (Debit-Credit) and MULTI, and redis-benchmark's
    /// default tests by its names (PING_MBULK, SET, GET, INCR, LPUSH, RPUSH, LPOP, RPOP,
    /// SADD, HSET, SPOP, ZADD, ZPOPMIN, LRANGE_100, LRANGE_300, LRANGE_500, LRANGE_600, MSET);
    /// `redis-benchmark` names all of those.
    #[arg(long, default_value = "SET,GET,INCR,LPUSH,HSET,EVALSHA,MULTI", value_parser = parse_tests)]
    pub tests: Tests,
    /// Operations each connection keeps in flight, comma-separated.
    #[arg(long, default_value = "1,16", value_parser = parse_pipelines)]
    pub pipelines: Pipelines,
    /// Client connections.
    #[arg(long, default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub clients: u32,
    /// Seconds of each slice; every system gets one slice per round.
    #[arg(long, value_name = "S", default_value = "0.5", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Rounds of slices (the report gives the median).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub rounds: u32,
    /// tandem's database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 256, value_parser = clap::value_parser!(u32).range(16..=65536))]
    pub db_mib: u32,
    /// Where tandem's cluster keeps its files.
    #[arg(long, default_value = ".tandem/bench-resp")]
    pub dir: std::path::PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

/// A list of systems (a newtype, so clap takes the whole list as one value).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Systems(pub Vec<crate::bench::resp::System>);
/// A list of tests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tests(pub Vec<crate::bench::resp_load::Test>);
/// A list of pipeline depths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pipelines(pub Vec<usize>);

fn parse_systems(text: &str) -> Result<Systems, String> {
    use crate::bench::resp::System;
    text.split(',')
        .map(|name| match name.trim() {
            "tandem" => Ok(System::Tandem),
            "tandem-proxy" => Ok(System::TandemProxy),
            "redis" => Ok(System::Redis),
            "redis-wait" => Ok(System::RedisWait),
            "tandem-tls" => Ok(System::TandemTls),
            "redis-tls" => Ok(System::RedisTls),
            other => Err(format!(
                "unknown system '{other}'; accepted values: tandem, tandem-proxy, redis, \
                 redis-wait, tandem-tls, redis-tls"
            )),
        })
        .collect::<Result<_, _>>()
        .map(Systems)
}

fn parse_tests(text: &str) -> Result<Tests, String> {
    use crate::bench::resp_load::Test;
    if text.trim().eq_ignore_ascii_case("redis-benchmark") {
        let defaults = Test::ALL
            .into_iter()
            .filter(|test| !matches!(test, Test::EvalshaDebitCredit | Test::MultiExec));
        return Ok(Tests(defaults.collect()));
    }
    text.split(',')
        .map(|name| {
            Test::parse(name.trim()).ok_or_else(|| {
                let names: Vec<&str> = Test::ALL.iter().map(|t| t.name()).collect();
                format!(
                    "unknown test '{name}'; accepted values: {}",
                    names.join(", ")
                )
            })
        })
        .collect::<Result<_, _>>()
        .map(Tests)
}

fn parse_pipelines(text: &str) -> Result<Pipelines, String> {
    text.split(',')
        .map(|n| match n.trim().parse::<usize>() {
            Ok(n) if (1..=1024).contains(&n) => Ok(n),
            _ => Err(format!(
                "pipeline depth '{n}': give whole numbers from 1 to 1024"
            )),
        })
        .collect::<Result<_, _>>()
        .map(Pipelines)
}

#[derive(Debug, Args)]
pub struct StarvationArgs {
    /// Busy threads of another process, 1 to 1024, at the nodes' own priority.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub burners: u32,
    /// Rounds of one quiet and one busy window each, 1 to 1000.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub rounds: u32,
    /// Seconds per window.
    #[arg(long, value_name = "S", default_value = "20", value_parser = parse_seconds)]
    pub window: f64,
    /// Database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// Where the clusters keep their files (idle, kill-0, kill-N).
    #[arg(long, default_value = ".tandem/bench-starvation")]
    pub dir: std::path::PathBuf,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Args)]
pub struct FailoverArgs {
    /// Kills, each on a fresh cluster.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub runs: u32,
    /// Client stubs, each with one call in flight.
    #[arg(long, default_value_t = 8, value_parser = clap::value_parser!(u32).range(1..=256))]
    pub clients: u32,
    /// Seconds of load per run; the primary is killed halfway.
    #[arg(long, value_name = "S", default_value = "1", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// Where the clusters keep their files, one directory per run (run-1, run-2, …).
    #[arg(long, default_value = ".tandem/bench-failover")]
    pub dir: std::path::PathBuf,
    /// Run the peer links over TLS, as `tandem up --tls` does.
    #[arg(long)]
    pub tls: bool,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
    /// Keep one core busy with another process during the runs, as other work on the machine
    /// would.
    #[arg(long)]
    pub noise: bool,
}

#[derive(Debug, Args)]
pub struct ReplicationArgs {
    /// Workload: debit-credit or order-entry.
    #[arg(long, default_value = "debit-credit", value_parser = parse_workload)]
    pub workload: WorkloadName,
    /// standalone, active, passive, or all (standalone, passive v1..v3 and active, interleaved).
    #[arg(long, default_value = "all", value_parser = parse_mode)]
    pub mode: BenchMode,
    /// The primary's logging strategy in passive mode: v1, v2 or v3.
    #[arg(long, default_value = "v3", value_parser = parse_passive_strategy)]
    pub strategy: Strategy,
    /// 1-safe, bounded:N, 2-safe, 2-safe:K, 2-safe-applied[:K] or durable[:K].
    #[arg(long, default_value = "2-safe", value_parser = parse_safety)]
    pub safety: tandem_replication::Safety,
    /// Backups per group, 1 to 8.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=8))]
    pub backups: u32,
    /// in-process (the primary's node thread generates the calls) or network (client
    /// connections over loopback).
    #[arg(long, default_value = "in-process", value_parser = parse_driver)]
    pub driver: DriverKind,
    /// Concurrent clients: calls awaiting their replies (in-process, default 16384) or
    /// connections (network, default 4).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub clients: Option<u32>,
    /// Calls each network connection keeps in flight.
    #[arg(long, default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=4096))]
    pub window: u32,
    /// Measured seconds per contender.
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Database (segment) size in whole MiB.
    #[arg(long = "db-mib", value_name = "N", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=65536))]
    pub db_mib: u32,
    /// Seed of the load and of the call streams.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Peer authentication on the replication links: off, on (a `peer_secret`: a challenge
    /// at connect and a Poly1305 tag on every frame), tls (TLS 1.3, certificates from a CA
    /// made for the run), both (off and on) or all (off, on and tls): each replicated mode
    /// runs once per kind of link, interleaved, to price them.
    #[arg(long, value_enum, default_value = "off")]
    pub peer_auth: PeerAuthMode,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BenchMode {
    Standalone,
    Active,
    Passive,
    All,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DriverKind {
    InProcess,
    Network,
}

fn parse_mode(text: &str) -> Result<BenchMode, String> {
    match text {
        "standalone" => Ok(BenchMode::Standalone),
        "active" => Ok(BenchMode::Active),
        "passive" => Ok(BenchMode::Passive),
        "all" => Ok(BenchMode::All),
        _ => Err("unknown mode; accepted values: standalone, active, passive, all".to_owned()),
    }
}

fn parse_driver(text: &str) -> Result<DriverKind, String> {
    match text {
        "in-process" => Ok(DriverKind::InProcess),
        "network" => Ok(DriverKind::Network),
        _ => Err("unknown driver; accepted values: in-process, network".to_owned()),
    }
}

fn parse_passive_strategy(text: &str) -> Result<Strategy, String> {
    match text.parse::<Strategy>() {
        Ok(Strategy::V0LinkedUndo) | Err(_) => {
            Err("accepted values: v1, v2, v3 (the strategies of the passive study)".to_owned())
        }
        Ok(strategy) => Ok(strategy),
    }
}

fn parse_safety(text: &str) -> Result<tandem_replication::Safety, String> {
    text.parse()
        .map_err(|err: tandem_replication::SafetyError| err.to_string())
}

fn parse_fsync(text: &str) -> Result<tandem_node::SyncPolicy, String> {
    text.parse()
        .map_err(|err: tandem_node::SyncPolicyError| err.to_string())
}

#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Workload: debit-credit or order-entry.
    #[arg(long, default_value = "debit-credit", value_parser = parse_workload)]
    pub workload: WorkloadName,
    /// Logging strategy: v0, v1, v2, v3, or all (the four interleaved in one process).
    #[arg(long, default_value = "all", value_parser = parse_strategies)]
    pub strategy: Strategies,
    /// Database (segment) size in MiB; a whole number of 4 KiB pages, e.g. 50 or 0.5.
    #[arg(long = "db-mib", value_name = "N", default_value = "50", value_parser = parse_db_mib)]
    pub db_bytes: usize,
    /// Measured seconds per strategy (slices of all strategies alternate until each has had
    /// this long).
    #[arg(long, value_name = "S", default_value = "3", value_parser = parse_seconds)]
    pub seconds: f64,
    /// Do not prefetch: by default the benchmark produces each call one call ahead and lets its
    /// procedure prefetch the records it will touch while the current call runs.
    #[arg(long)]
    pub no_prefetch: bool,
    /// Seed of the call generator; every strategy runs the same call stream.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Also run each strategy as N groups at once, 1 to 64, each on a thread of its own with
    /// its own segment and call stream (seed 000's multiprocessor primary), beside one group.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u64).range(1..=64))]
    pub groups: u64,
    /// Print the results as JSON on stdout.
    #[arg(long)]
    pub json: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WorkloadName {
    DebitCredit,
    OrderEntry,
}

impl WorkloadName {
    /// The data model's name, as `tandem_workloads::model` and a node's `group.workload` take
    /// it.
    pub fn as_str(self) -> &'static str {
        match self {
            WorkloadName::DebitCredit => "debit-credit",
            WorkloadName::OrderEntry => "order-entry",
        }
    }
}

/// The strategies a benchmark runs, in version order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Strategies(pub Vec<Strategy>);

fn parse_workload(text: &str) -> Result<WorkloadName, String> {
    match text {
        "debit-credit" => Ok(WorkloadName::DebitCredit),
        "order-entry" => Ok(WorkloadName::OrderEntry),
        _ => Err("unknown workload; accepted values: debit-credit, order-entry".to_owned()),
    }
}

fn parse_strategies(text: &str) -> Result<Strategies, String> {
    if text.eq_ignore_ascii_case("all") {
        return Ok(Strategies(Strategy::ALL.to_vec()));
    }
    match text.parse::<Strategy>() {
        Ok(strategy) => Ok(Strategies(vec![strategy])),
        Err(_) => Err("unknown logging strategy; accepted values: v0, v1, v2, v3, all".to_owned()),
    }
}

/// MiB to bytes, refusing sizes that are not a positive whole number of pages.
fn parse_db_mib(text: &str) -> Result<usize, String> {
    let accepted = "give a positive size in MiB that is a whole number of 4 KiB pages \
                    (a multiple of 1/256 MiB), e.g. 50 or 0.5";
    let mib: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("not a number; {accepted}"))?;
    if !mib.is_finite() || mib <= 0.0 {
        return Err(format!("must be greater than zero; {accepted}"));
    }
    let bytes = mib * f64::from(1u32 << 20);
    if bytes.fract() != 0.0 || bytes % PAGE_SIZE as f64 != 0.0 {
        return Err(format!(
            "{text} MiB is not a whole number of 4 KiB pages; {accepted}"
        ));
    }
    if bytes > (1u64 << 40) as f64 {
        return Err(format!("{text} MiB is more than 1 TiB; {accepted}"));
    }
    Ok(bytes as usize)
}

fn parse_seconds(text: &str) -> Result<f64, String> {
    let accepted = "give a positive number of seconds, e.g. 3 or 0.5";
    let seconds: f64 = text
        .trim()
        .parse()
        .map_err(|_| format!("not a number; {accepted}"))?;
    if !seconds.is_finite() || seconds <= 0.0 {
        return Err(format!("must be greater than zero; {accepted}"));
    }
    if seconds > 86_400.0 {
        return Err(format!("more than a day; {accepted}"));
    }
    Ok(seconds)
}

/// Prints help and version as clap does; turns every other error into one line, exit code 2.
pub fn exit_on_parse_error(err: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    if matches!(
        err.kind(),
        ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
    ) || matches!(
        err.kind(),
        ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = err.print();
        return ExitCode::from(if err.use_stderr() { 2 } else { 0 });
    }
    eprintln!("{}", one_line(&err.render().to_string()));
    ExitCode::from(2)
}

/// Joins clap's multi-line message into one line, dropping its usage and "try --help" hints.
fn one_line(rendered: &str) -> String {
    let kept: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .filter(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .collect();
    kept.join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn database_sizes_must_be_whole_pages() {
        assert_eq!(parse_db_mib("50"), Ok(50 << 20));
        assert_eq!(parse_db_mib("0.5"), Ok(512 << 10));
        assert!(
            parse_db_mib("0.001")
                .unwrap_err()
                .contains("not a whole number of 4 KiB pages")
        );
        assert!(parse_db_mib("0").unwrap_err().contains("greater than zero"));
        assert!(
            parse_db_mib("-3")
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(parse_db_mib("ten").unwrap_err().contains("not a number"));
        assert!(
            parse_db_mib("NaN")
                .unwrap_err()
                .contains("greater than zero")
        );
    }

    #[test]
    fn seconds_must_be_positive() {
        assert_eq!(parse_seconds("0.25"), Ok(0.25));
        assert!(
            parse_seconds("0")
                .unwrap_err()
                .contains("greater than zero")
        );
        assert!(
            parse_seconds("inf")
                .unwrap_err()
                .contains("greater than zero")
        );
    }

    #[test]
    fn names_are_checked() {
        assert_eq!(parse_strategies("all").unwrap().0.len(), 4);
        assert_eq!(
            parse_strategies("v2").unwrap().0,
            vec![Strategy::V2MirrorDiff]
        );
        assert!(
            parse_strategies("v4")
                .unwrap_err()
                .contains("v0, v1, v2, v3, all")
        );
        assert!(
            parse_workload("tpcc")
                .unwrap_err()
                .contains("debit-credit, order-entry")
        );
    }

    #[test]
    fn reads_seconds_give_every_contender_a_slice() {
        assert_eq!(parse_reads_seconds("8"), Ok(8.0));
        assert_eq!(parse_reads_seconds("1"), Ok(1.0));
        assert!(
            parse_reads_seconds("0.5")
                .unwrap_err()
                .contains("give 1 or more seconds")
        );
        assert!(
            parse_reads_seconds("0")
                .unwrap_err()
                .contains("greater than zero")
        );
    }

    #[test]
    fn durability_lists_name_known_systems_and_workloads_once() {
        use crate::bench::durability::{System, Workload};
        assert_eq!(
            parse_durability_systems("tandem-2safe, redis-always")
                .unwrap()
                .0,
            vec![System::TandemTwoSafe, System::RedisAlways]
        );
        assert_eq!(
            parse_durability_workloads("debit-credit").unwrap().0,
            vec![Workload::DebitCredit]
        );
        let unknown = parse_durability_systems("tandem,redis-always").unwrap_err();
        assert!(unknown.contains("unknown system 'tandem'"), "{unknown}");
        assert!(
            unknown.contains("tandem-2safe, tandem-durable"),
            "{unknown}"
        );
        let twice = parse_durability_workloads("set,set").unwrap_err();
        assert!(twice.contains("listed twice"), "{twice}");
        assert!(parse_durability_workloads("").is_err());
    }

    #[test]
    fn clap_errors_become_one_line() {
        let err = Cli::try_parse_from(["tandem", "bench", "engine", "--seconds", "0"]).unwrap_err();
        let line = one_line(&err.render().to_string());
        assert!(!line.contains('\n'));
        assert!(line.contains("--seconds"), "{line}");
        assert!(line.contains("greater than zero"), "{line}");
    }
}
