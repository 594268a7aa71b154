//! `tandem up`, `tandem status`, `tandem kill`, `tandem start` and `tandem down`: a local
//! cluster to try by hand.
//!
//! `up` runs in the foreground and supervises: it ends on Ctrl-C (stopping every node, those
//! `start` brought back included) or once no node of its cluster runs any more (after `down`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Failure;
use crate::cli::{DownArgs, KillArgs, StartArgs, StatusArgs, UpArgs};
use crate::local::{self, ClusterFile, LocalCluster, NodeEntry, Options, PidHolder};

/// How long `tandem up` waits for its cluster to serve.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

/// How often `tandem up` asks its nodes which one is primary, to say so after a failover.
const PRIMARY_WATCH_INTERVAL: Duration = Duration::from_secs(1);

/// Starts the cluster, prints where it is, and waits for Ctrl-C (then stops every node) or
/// for every node to have stopped; says which node is primary whenever that changes.
pub fn up(args: &UpArgs) -> Result<(), Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|err| Failure::Run(format!("cannot catch Ctrl-C: {err}")))?;
    let secrets = Secrets::from_args(args)?;
    let (mut cluster, settled) = if !args.fresh && LocalCluster::exists_in(&args.dir) {
        // What the cluster acknowledged lives in its nodes' logs: the same nodes come back
        // from them, as after a power loss of the whole cluster.
        eprintln!(
            "restarting the cluster in {} from its disks (its own configuration; `tandem up \
             --fresh` starts a new one and deletes this one's data)",
            args.dir.display()
        );
        if secrets.given() {
            eprintln!(
                "the password and users given are not used: the cluster keeps those it was \
                 made with (in each node's node.toml)"
            );
        }
        let mut cluster = LocalCluster::reopen(&args.dir)?;
        let settled = cluster.wait_settled(SETTLE_TIMEOUT)?;
        (cluster, settled)
    } else {
        let options = new_cluster_options(args, secrets);
        eprintln!(
            "starting {} nodes under {} ({} MiB of {} each, {})",
            args.nodes,
            args.dir.display(),
            args.db_mib,
            args.workload,
            args.safety
        );
        warn_of_open_http(&options);
        LocalCluster::start_settled(&args.dir, &options, SETTLE_TIMEOUT)?
    };
    print_cluster(&cluster, &settled);
    let announced = settled
        .groups
        .iter()
        .map(|group| (u64::from(group.group), group.primary))
        .collect();
    supervise(&mut cluster, &stop, announced)
}

/// The options of a new cluster, from `up`'s flags.
fn new_cluster_options(args: &UpArgs, secrets: Secrets) -> Options {
    let mut options = Options::new(args.nodes);
    options.groups = args.groups;
    options.db_mib = args.db_mib as usize;
    options.safety = args.safety;
    options.fsync = args.fsync;
    options.checkpoint_mib = args.checkpoint_mib;
    options.workload = args.workload.clone();
    options.suspect_ticks = args.suspect_ticks;
    options.lease_ticks = args.lease_ticks;
    options.requirepass = secrets.requirepass;
    options.users = secrets.users;
    options.tls = args.tls;
    options.http_ip = args.http_ip;
    options.redis_cluster = args.redis_cluster;
    options
}

/// Says what an HTTP address that is not loopback exposes.
fn warn_of_open_http(options: &Options) {
    if options.http_ip.to_canonical().is_loopback() {
        return;
    }
    let checksum = if options.requirepass.is_some() {
        "/checksum asks for the password (`Authorization: Bearer PASS`)"
    } else {
        "/checksum, which pauses a node, is refused (403) since the nodes have no password"
    };
    eprintln!(
        "warning: --http-ip {}: every node's /status and /metrics are open to whoever reaches \
         that address; {checksum}",
        options.http_ip
    );
}

/// The password and users of a new cluster, from `up`'s flags and environment.
struct Secrets {
    requirepass: Option<String>,
    users: Vec<tandem_runtime::config::UserConfig>,
}

impl Secrets {
    /// The password from `--requirepass-file`, `--requirepass` (with a warning: it shows in
    /// the process list) or `TANDEM_REQUIREPASS`, in that order; the users from `--user`
    /// (likewise warned of) and `--users-file`.
    fn from_args(args: &UpArgs) -> Result<Secrets, Failure> {
        let requirepass = if let Some(path) = &args.requirepass_file {
            Some(read_password_file(path)?)
        } else if let Some(password) = &args.requirepass {
            eprintln!(
                "warning: --requirepass puts the password in tandem up's command line, which \
                 every user of this machine can read (ps, /proc/PID/cmdline) for as long as \
                 the cluster runs; use --requirepass-file FILE or the {} environment \
                 variable instead",
                local::REQUIREPASS_ENV
            );
            Some(password.clone())
        } else {
            password_from_env()?
        };
        let mut users = args.users.clone();
        if !users.is_empty() {
            eprintln!(
                "warning: --user puts each user's password in tandem up's command line, which \
                 every user of this machine can read (ps, /proc/PID/cmdline); use --users-file \
                 FILE instead"
            );
        }
        if let Some(path) = &args.users_file {
            users.extend(read_users_file(path)?);
        }
        Ok(Secrets { requirepass, users })
    }

    /// Whether any password or user was given.
    fn given(&self) -> bool {
        self.requirepass.is_some() || !self.users.is_empty()
    }
}

/// The password in the first line of `path` (`--requirepass-file`), its line end stripped.
fn read_password_file(path: &std::path::Path) -> Result<String, Failure> {
    use std::os::unix::fs::PermissionsExt;
    let flag = "--requirepass-file";
    let refuse = |why: String| Failure::Usage(format!("{flag} {}: {why}", path.display()));
    let bytes = std::fs::read(path).map_err(|err| refuse(format!("cannot read it: {err}")))?;
    let first = bytes
        .split(|&byte| byte == b'\n')
        .next()
        .unwrap_or_default();
    let first = first.strip_suffix(b"\r").unwrap_or(first);
    let password = std::str::from_utf8(first)
        .map_err(|_| refuse("its first line is not UTF-8 text".into()))?;
    if password.is_empty() {
        return Err(refuse(
            "its first line is empty; write the password there (1 to 512 bytes)".into(),
        ));
    }
    let password = crate::cli::check_requirepass(password).map_err(refuse)?;
    if let Ok(metadata) = std::fs::metadata(path)
        && metadata.permissions().mode() & 0o077 != 0
    {
        eprintln!(
            "warning: {flag} {}: other users of this machine may read the password in it \
             (mode {:04o}); `chmod 600 {}` keeps it yours",
            path.display(),
            metadata.permissions().mode() & 0o7777,
            path.display()
        );
    }
    Ok(password)
}

/// The password in `TANDEM_REQUIREPASS`, if it is set.
fn password_from_env() -> Result<Option<String>, Failure> {
    let name = local::REQUIREPASS_ENV;
    let Some(value) = std::env::var_os(name) else {
        return Ok(None);
    };
    let refuse = |why: &str| Failure::Usage(format!("{name}: {why}"));
    let password = value
        .into_string()
        .map_err(|_| refuse("not UTF-8 text; give the password as text, or unset it"))?;
    if password.is_empty() {
        return Err(refuse(
            "set but empty; give the password (1 to 512 bytes), or unset it",
        ));
    }
    crate::cli::check_requirepass(&password)
        .map(Some)
        .map_err(|why| refuse(&why))
}

/// The users in `path` (`--users-file`): one spec a line, as `--user` takes it; empty lines
/// and `#` comments skipped. An error names the line by its number: the line holds a
/// password.
fn read_users_file(
    path: &std::path::Path,
) -> Result<Vec<tandem_runtime::config::UserConfig>, Failure> {
    let flag = "--users-file";
    let refuse = |why: String| Failure::Usage(format!("{flag} {}: {why}", path.display()));
    let text =
        std::fs::read_to_string(path).map_err(|err| refuse(format!("cannot read it: {err}")))?;
    let mut users = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let user = tandem_runtime::config::UserConfig::from_spec(line)
            .map_err(|why| refuse(format!("line {}: {why}", index + 1)))?;
        users.push(user);
    }
    if users.is_empty() {
        return Err(refuse(
            "it names no user; write one SPEC a line, as --user takes it".into(),
        ));
    }
    Ok(users)
}

/// What `up` prints once the cluster serves: the primary, every node's addresses and log,
/// and how to reach the primary with redis-cli.
fn print_cluster(cluster: &LocalCluster, settled: &local::Settled) {
    if let [_, _, ..] = settled.groups.as_slice() {
        say(&format!("cluster up: {} groups", settled.groups.len()));
        for group in &settled.groups {
            say(&format!(
                "  group {}: node {} is primary of view {}, LSN {}",
                group.group, group.primary, group.view, group.lsn
            ));
        }
    } else {
        say(&format!(
            "cluster up: node {} is primary of view {}, LSN {}",
            settled.primary, settled.view, settled.lsn
        ));
    }
    for node in &cluster.nodes {
        let groups = settled.groups.len();
        let resp = node.entry.resp.map_or(String::new(), |resp| match groups {
            1 => format!("Redis clients at {resp}, "),
            // Each group's endpoint is the next port.
            _ => format!(
                "Redis clients at {resp} to {} (group 1 to {groups}), ",
                resp.port() + groups as u16 - 1
            ),
        });
        say(&format!(
            "  node {}: {resp}stub clients at {}, status at http://{}/status, log {}",
            node.entry.id,
            node.entry.listen,
            node.entry.status,
            cluster.show(&node.entry.log).display()
        ));
    }
    let redis_cluster = cluster.nodes.iter().any(|node| {
        tandem_runtime::config::NodeConfig::load(&node.entry.config)
            .is_ok_and(|config| config.redis_cluster)
    });
    if let [_, _, ..] = settled.groups.as_slice()
        && let Some(line) = primary_line(cluster, settled.primary)
    {
        say(&format!(
            "{} -c (group 1's primary; each endpoint serves its group's slots and sends a \
             client elsewhere with MOVED, which `redis-cli -c` and cluster clients follow)",
            line
        ));
    } else if let Some(line) = primary_line(cluster, settled.primary) {
        let writes = if redis_cluster {
            "redirects writes to the primary with MOVED (`redis-cli -c` follows it)"
        } else {
            "answers writes with READONLY"
        };
        say(&format!(
            "{line} (the primary now; after a failover this prints the new one, and `tandem \
             status` shows it; a backup serves reads, linearizably, and {writes})"
        ));
    }
    say(
        "`tandem status` shows the nodes, `tandem kill N` kills one, `tandem start N` brings it \
         back; Ctrl-C or `tandem down` stops the cluster",
    );
}

/// How to reach primary `primary` with redis-cli, if the nodes speak RESP.
fn primary_line(cluster: &LocalCluster, primary: u32) -> Option<String> {
    let node = cluster.nodes.iter().find(|node| node.entry.id == primary)?;
    let resp = node.entry.resp?;
    let has_password = cluster
        .nodes
        .iter()
        .any(|node| node_has_password(&node.entry));
    // The password is never printed: the user gave it.
    let auth = if has_password { " -a PASS" } else { "" };
    let ca = cluster.dir.join(crate::local::CA_FILE);
    let tls = if ca.is_file() {
        format!(" --tls --cacert {}", cluster.show(&ca).display())
    } else {
        String::new()
    };
    Some(format!(
        "try: redis-cli -h {} -p {}{auth}{tls}",
        resp.ip(),
        resp.port()
    ))
}

/// Whether node `entry`'s configuration asks clients for a password.
fn node_has_password(entry: &NodeEntry) -> bool {
    tandem_runtime::config::NodeConfig::load(&entry.config)
        .is_ok_and(|config| config.requirepass.is_some())
}

/// A line on stdout; one nobody reads any more (a closed pipe) is dropped rather than ending
/// the supervisor, and its nodes with it.
fn say(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout(), "{line}");
}

/// The supervisor's loop: reports nodes that exit and each new primary, ends on Ctrl-C
/// (stopping every node) or once no node of the cluster runs.
fn supervise(
    cluster: &mut LocalCluster,
    stop: &AtomicBool,
    mut announced: Announced,
) -> Result<(), Failure> {
    let mut reported = vec![false; cluster.nodes.len()];
    let mut next_watch = std::time::Instant::now() + PRIMARY_WATCH_INTERVAL;
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        for (index, node) in cluster.nodes.iter_mut().enumerate() {
            if !reported[index] && !node.alive() {
                reported[index] = true;
                eprintln!("node {} exited", node.entry.id);
            }
        }
        if std::time::Instant::now() >= next_watch {
            next_watch += PRIMARY_WATCH_INTERVAL;
            announced = announce_primary(cluster, announced);
        }
        // Once every child has exited, only nodes `tandem start` brought back can keep the
        // cluster going; with none of those either, there is nothing left to supervise.
        if reported.iter().all(|&exited| exited) {
            let file = ClusterFile::load(&cluster.dir)?;
            if file
                .nodes
                .iter()
                .all(|node| local::probe(node) != PidHolder::Node)
            {
                eprintln!("every node has stopped; tandem up ends");
                return Ok(());
            }
        }
    }
    eprintln!("stopping {} nodes", cluster.nodes.len());
    // Nodes `tandem start` brought back are not this process's children: the cluster file
    // names them.
    if let Ok(file) = ClusterFile::load(&cluster.dir) {
        local::stop_nodes(&file.nodes)?;
    }
    Ok(())
}

/// Asks the nodes (those `tandem start` brought back included) which is primary of each
/// group; when one node alone says so of a group and it is not the one `announced` for it,
/// says it is the group's primary now (naming the group where there are several). Returns
/// the primaries announced last, by group.
fn announce_primary(cluster: &LocalCluster, mut announced: Announced) -> Announced {
    let Ok(file) = ClusterFile::load(&cluster.dir) else {
        return announced;
    };
    // (group, node, view) of every node that says it is a group's primary.
    let primaries: Vec<(u64, u32, u64)> = file
        .nodes
        .iter()
        .filter_map(|node| {
            let status = crate::bench::replication::http_get_json(node.status, "/status").ok()?;
            let places = status["cluster"]["groups"].as_array()?.clone();
            Some(places.into_iter().filter_map(move |place| {
                (place["role"] == "primary").then(|| {
                    let group = place["group"].as_u64().unwrap_or(0);
                    (group, node.id, place["view"].as_u64().unwrap_or(0))
                })
            }))
        })
        .flatten()
        .collect();
    let several = announced.len() > 1;
    for (&group, known) in announced.iter_mut() {
        let of_group: Vec<&(u64, u32, u64)> =
            primaries.iter().filter(|(of, _, _)| *of == group).collect();
        // During a view change two nodes may both still say so, or none yet: wait for one.
        let &[&(_, primary, view)] = of_group.as_slice() else {
            continue;
        };
        if primary == *known {
            continue;
        }
        let reach = primary_line(cluster, primary).unwrap_or_else(|| {
            let entry = file.nodes.iter().find(|node| node.id == primary);
            entry.map_or_else(String::new, |entry| {
                format!("stub clients at {}", entry.listen)
            })
        });
        let of = if several {
            format!("group {group}: ")
        } else {
            String::new()
        };
        say(&format!(
            "{of}node {primary} is primary now, of view {view} (node {known} was): {reach}"
        ));
        *known = primary;
    }
    announced
}

/// The primary announced last of each group.
type Announced = std::collections::BTreeMap<u64, u32>;

/// Prints a row per node; fails (exit code 1) when no node answers.
pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    let rows: Vec<(&NodeEntry, Option<Value>)> = file
        .nodes
        .iter()
        .map(|node| {
            let status = crate::bench::replication::http_get_json(node.status, "/status").ok();
            (node, status)
        })
        .collect();
    if args.json {
        let nodes: Vec<Value> = rows
            .iter()
            .map(|(entry, status)| status_json(entry, status.as_ref()))
            .collect();
        println!("{}", json!({ "nodes": nodes }));
    } else if rows
        .iter()
        .any(|(_, status)| serves_several(status.as_ref()))
    {
        print_group_rows(&rows);
    } else {
        // Lag is measured against the primary's LSN.
        let lsn_primary = rows
            .iter()
            .filter_map(|(_, status)| status.as_ref())
            .find(|status| status["cluster"]["role"] == "primary")
            .and_then(|status| status["report"]["status"]["lsn"].as_u64());
        println!(
            "{:<5} {:<8} {:>5} {:>10} {:>10} {:>15} {:>8}  {:<21} {:<21}",
            "node", "role", "view", "LSN", "lag", "last heartbeat", "pid", "native (stub)", "redis"
        );
        for (entry, status) in &rows {
            let place = status.as_ref().map(|status| (&status["cluster"], status));
            println!("{}", status_row(entry, place, lsn_primary));
        }
    }
    if rows.iter().all(|(_, status)| status.is_none()) {
        return Err(Failure::Run(format!(
            "no node of the local cluster in {} answers; start a cluster with `tandem up`, or \
             bring a killed node back with `tandem start N`",
            args.dir.display()
        )));
    }
    Ok(())
}

/// A node in `status --json`: its addresses and pid from `cluster.json`, and its `/status`
/// (or why it does not answer).
fn status_json(entry: &NodeEntry, status: Option<&Value>) -> Value {
    json!({
        "node": entry.id,
        "role": status.map(|s| s["cluster"]["role"].clone()),
        "pid": entry.pid,
        "native": entry.listen.to_string(),
        "resp": entry.resp.map(|a| a.to_string()),
        "http": entry.status.to_string(),
        "status": status,
        "down": status.is_none().then(|| local::not_running_reason(entry, &local::probe(entry))),
    })
}

/// Whether a node's `/status` says it serves in several groups.
fn serves_several(status: Option<&Value>) -> bool {
    status.is_some_and(|status| status["groups"].as_array().is_some_and(|g| g.len() > 1))
}

/// `status`'s table of a cluster of several groups: a row per group each node serves in,
/// grouped by group, each lag measured against its group's primary.
fn print_group_rows(rows: &[(&NodeEntry, Option<Value>)]) {
    // Each node's place in each group and its role's report there.
    let places = |status: &Value| -> Vec<(u64, Value, Value)> {
        let reports = status["groups"].as_array().cloned().unwrap_or_default();
        let places = status["cluster"]["groups"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        places
            .into_iter()
            .filter_map(|place| {
                let group = place["group"].as_u64()?;
                let report = reports
                    .iter()
                    .find(|r| r["group"].as_u64() == Some(group))?;
                Some((group, place, report.clone()))
            })
            .collect()
    };
    let mut groups: Vec<u64> = rows
        .iter()
        .filter_map(|(_, status)| status.as_ref())
        .flat_map(|status| places(status).into_iter().map(|(group, _, _)| group))
        .collect();
    groups.sort_unstable();
    groups.dedup();
    println!(
        "{:<5} {:<5} {:<8} {:>5} {:>10} {:>10} {:>15} {:>8}  {:<21} {:<21}",
        "group",
        "node",
        "role",
        "view",
        "LSN",
        "lag",
        "last heartbeat",
        "pid",
        "native (stub)",
        "redis"
    );
    for group in groups {
        // A node that is down is listed in every group; one that runs, in its own.
        let members: Vec<(&NodeEntry, Option<(Value, Value)>)> = rows
            .iter()
            .filter_map(|(entry, status)| match status {
                None => Some((*entry, None)),
                Some(status) => {
                    let (_, place, report) = places(status).into_iter().find(|p| p.0 == group)?;
                    Some((*entry, Some((place, report))))
                }
            })
            .collect();
        let lsn_primary = members
            .iter()
            .filter_map(|(_, place)| place.as_ref())
            .find(|(place, _)| place["role"] == "primary")
            .and_then(|(_, report)| report["report"]["status"]["lsn"].as_u64());
        for (entry, place) in &members {
            let place = place.as_ref().map(|(place, report)| (place, report));
            println!("{group:<5} {}", status_row(entry, place, lsn_primary));
        }
    }
}

/// A node's row in `status`'s table, from its place in the group (role, view, heartbeat)
/// and what holds its role's report (`report.status`); a node that does not answer says why.
fn status_row(
    entry: &NodeEntry,
    place: Option<(&Value, &Value)>,
    lsn_primary: Option<u64>,
) -> String {
    let id = entry.id;
    let Some((cluster, status)) = place else {
        let reason = local::not_running_reason(entry, &local::probe(entry));
        return format!("{id:<5} {:<8} {reason}", "down");
    };
    let role = cluster["role"].as_str().unwrap_or("?");
    let view = cluster["view"].as_u64().unwrap_or(0);
    let applied = status["report"]["status"]["lsn_applied"].as_u64();
    let lsn = applied.map_or("-".to_string(), |lsn| lsn.to_string());
    let lag = match (lsn_primary, applied) {
        (Some(primary), Some(applied)) => primary.saturating_sub(applied).to_string(),
        _ => "-".to_string(),
    };
    let heartbeat = match cluster["heard_primary_ms_ago"].as_f64() {
        Some(ms) => format!("{ms:.0} ms ago"),
        None if role == "primary" => "(sends them)".to_string(),
        None => "-".to_string(),
    };
    let (pid, native) = (entry.pid, entry.listen.to_string());
    let redis = entry.resp.map_or("-".to_string(), |resp| resp.to_string());
    format!(
        "{id:<5} {role:<8} {view:>5} {lsn:>10} {lag:>10} {heartbeat:>15} {pid:>8}  {native:<21} \
         {redis:<21}"
    )
}

/// The entry of node `id`, or a usage error that lists the cluster's nodes.
fn entry(file: &ClusterFile, id: u32) -> Result<&NodeEntry, Failure> {
    file.nodes.iter().find(|node| node.id == id).ok_or_else(|| {
        let ids: Vec<String> = file.nodes.iter().map(|node| node.id.to_string()).collect();
        Failure::Usage(format!(
            "NODE {id}: the cluster's nodes are {}",
            ids.join(", ")
        ))
    })
}

/// SIGKILL to one node of the local cluster, once its pid is found to be that node.
pub fn kill(args: &KillArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    let node = entry(&file, args.node)?;
    match local::probe(node) {
        PidHolder::Node => {}
        PidHolder::Gone => {
            return Err(Failure::Run(format!(
                "node {} is not running (process {} is gone); nothing was killed",
                node.id, node.pid
            )));
        }
        PidHolder::Other { command } => {
            return Err(Failure::Run(format!(
                "node {} is not running: pid {} is another program ({command}), so it was left \
                 alone; `tandem start {}` brings the node back",
                node.id, node.pid, node.id
            )));
        }
    }
    local::signal(node, nix::sys::signal::Signal::SIGKILL)?;
    // Said once the process is gone, so that a `tandem status` right after finds it down.
    if !local::wait_gone(&[node], local::STOP_GRACE) {
        return Err(Failure::Run(format!(
            "node {} (pid {}) still runs {:?} after SIGKILL",
            node.id,
            node.pid,
            local::STOP_GRACE
        )));
    }
    println!("killed node {} (pid {})", node.id, node.pid);
    Ok(())
}

/// Starts a killed node again, detached, and waits until it answers `/status`.
pub fn start(args: &StartArgs) -> Result<(), Failure> {
    let dir = &args.dir;
    let mut file = ClusterFile::load(dir)?;
    let node = entry(&file, args.node)?.clone();
    if local::probe(&node) == PidHolder::Node {
        return Err(Failure::Run(format!(
            "node {} is still running (pid {}); to restart it, `tandem kill {}` first",
            node.id, node.pid, node.id
        )));
    }
    let (mut child, log_from) = local::spawn_detached(&node, dir)?;
    let pid = child.id();
    for listed in &mut file.nodes {
        if listed.id == node.id {
            listed.pid = pid;
        }
    }
    file.save(dir)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(_)) = child.try_wait() {
            let log = local::log_since(&node.log, log_from);
            return Err(Failure::Run(local::start_failure(&node, &log, dir, false)));
        }
        if crate::bench::replication::http_get_json(node.status, "/status").is_ok() {
            break;
        }
        if std::time::Instant::now() >= deadline {
            return Err(Failure::Run(format!(
                "node {} (pid {pid}) runs but does not answer at http://{}/status; its log is \
                 {}",
                node.id,
                node.status,
                local::shown_path(dir, &node.log).display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "started node {} (pid {pid}); it rejoins as a spare and becomes a backup once caught \
         up (`tandem status` shows it); log {}",
        node.id,
        local::shown_path(dir, &node.log).display()
    );
    Ok(())
}

/// Stops every node of the local cluster whose pid still is that node.
pub fn down(args: &DownArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    for node in &file.nodes {
        if let PidHolder::Other { command } = local::probe(node) {
            println!(
                "node {}: not running (pid {} now belongs to another program, left alone: \
                 {command})",
                node.id, node.pid
            );
        }
    }
    let stopped = local::stop_nodes(&file.nodes)?;
    if stopped.is_empty() {
        println!(
            "no node of the local cluster in {} was running",
            args.dir.display()
        );
    }
    for node in &stopped {
        println!("stopped node {} (pid {})", node.id, node.pid);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_password_file_gives_its_first_line_without_its_line_end() {
        let dir = std::env::temp_dir().join(format!("tandem-up-pw-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("password");
        for (text, expected) in [
            ("s3cret\n", "s3cret"),
            ("s3cret\r\nsecond line\n", "s3cret"),
            ("s3cret", "s3cret"),
            (" spaced out \n", " spaced out "),
        ] {
            std::fs::write(&path, text).unwrap();
            assert_eq!(read_password_file(&path).unwrap(), expected, "{text:?}");
        }
        for (text, why) in [
            ("", "empty"),
            ("\ns3cret\n", "empty"),
            (&"x".repeat(513), "1 to 512 bytes"),
        ] {
            std::fs::write(&path, text).unwrap();
            let error = read_password_file(&path).unwrap_err().text();
            assert!(error.starts_with("--requirepass-file "), "{error}");
            assert!(error.contains(why), "{error}");
        }
        std::fs::write(&path, b"\xff\xfe\n").unwrap();
        let error = read_password_file(&path).unwrap_err().text();
        assert!(error.contains("UTF-8"), "{error}");
        std::fs::remove_dir_all(&dir).unwrap();
        let error = read_password_file(&path).unwrap_err().text();
        assert!(error.contains("cannot read"), "{error}");
    }
}
