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

/// Starts the cluster, prints where it is, and waits for Ctrl-C (then stops every node) or
/// for every node to have stopped.
/// How long `tandem up` waits for its cluster to serve.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(120);

pub fn up(args: &UpArgs) -> Result<(), Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|err| Failure::Run(format!("cannot catch Ctrl-C: {err}")))?;
    let (mut cluster, settled) = if !args.fresh && LocalCluster::exists_in(&args.dir) {
        // What the cluster acknowledged lives in its nodes' logs: the same nodes come back
        // from them, as after a power loss of the whole cluster.
        eprintln!(
            "restarting the cluster in {} from its disks (its own configuration; `tandem up \
             --fresh` starts a new one and deletes this one's data)",
            args.dir.display()
        );
        let mut cluster = LocalCluster::reopen(&args.dir)?;
        let settled = cluster.wait_settled(SETTLE_TIMEOUT)?;
        (cluster, settled)
    } else {
        let mut options = Options::new(args.nodes);
        options.db_mib = args.db_mib as usize;
        options.safety = args.safety;
        options.fsync = args.fsync;
        options.checkpoint_mib = args.checkpoint_mib;
        options.workload = args.workload.clone();
        options.suspect_ticks = args.suspect_ticks;
        options.lease_ticks = args.lease_ticks;
        options.requirepass = args.requirepass.clone();
        options.users = args.users.clone();
        options.tls = args.tls;
        eprintln!(
            "starting {} nodes under {} ({} MiB of {} each, {})",
            args.nodes,
            args.dir.display(),
            args.db_mib,
            args.workload,
            args.safety
        );
        LocalCluster::start_settled(&args.dir, &options, SETTLE_TIMEOUT)?
    };
    println!(
        "cluster up: node {} is primary of view {}, LSN {}",
        settled.primary, settled.view, settled.lsn
    );
    for node in &cluster.nodes {
        let resp = node
            .entry
            .resp
            .map_or(String::new(), |resp| format!("Redis clients at {resp}, "));
        println!(
            "  node {}: {resp}stub clients at {}, status at http://{}/status, log {}",
            node.entry.id,
            node.entry.listen,
            node.entry.status,
            node.entry.log.display()
        );
    }
    if let Some(primary) = cluster.nodes.iter().find(|n| n.entry.id == settled.primary)
        && let Some(resp) = primary.entry.resp
    {
        // The password is never printed: the user gave it.
        let auth = if args.requirepass.is_some() {
            " -a PASS"
        } else {
            ""
        };
        let ca = cluster.dir.join(crate::local::CA_FILE);
        let auth = if ca.is_file() {
            format!("{auth} --tls --cacert {}", ca.display())
        } else {
            auth.to_owned()
        };
        println!(
            "try: redis-cli -h {} -p {}{auth} (the primary; a backup serves reads, linearizably, \
             and answers writes with READONLY)",
            resp.ip(),
            resp.port()
        );
    }
    println!(
        "`tandem status` shows the nodes, `tandem kill N` kills one, `tandem start N` brings it \
         back; Ctrl-C or `tandem down` stops the cluster"
    );
    let mut reported = vec![false; cluster.nodes.len()];
    while !stop.load(Ordering::SeqCst) {
        std::thread::sleep(Duration::from_millis(50));
        for (index, node) in cluster.nodes.iter_mut().enumerate() {
            if !reported[index] && !node.alive() {
                reported[index] = true;
                eprintln!("node {} exited", node.entry.id);
            }
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
    drop(cluster);
    Ok(())
}

/// Prints a row per node; fails (exit code 1) when no node answers.
pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    let mut rows = Vec::new();
    for node in &file.nodes {
        let status = crate::bench::replication::http_get_json(node.status, "/status").ok();
        rows.push((node.id, status));
    }
    let none_answers = rows.iter().all(|(_, status)| status.is_none());
    let no_node_answers = || {
        Failure::Run(format!(
            "no node of the local cluster in {} answers; start a cluster with `tandem up`, or \
             bring a killed node back with `tandem start N`",
            args.dir.display()
        ))
    };
    let reason = |id: u32| {
        let entry = file
            .nodes
            .iter()
            .find(|node| node.id == id)
            .expect("listed");
        local::not_running_reason(entry, &local::probe(entry))
    };
    // Lag is measured against the primary's LSN.
    let lsn_primary = rows
        .iter()
        .filter_map(|(_, status)| status.as_ref())
        .find(|status| status["cluster"]["role"] == "primary")
        .and_then(|status| status["report"]["status"]["lsn"].as_u64());
    if args.json {
        let nodes: Vec<Value> = rows
            .iter()
            .map(|(id, status)| {
                let entry = file.nodes.iter().find(|node| node.id == *id);
                json!({
                    "node": id,
                    "role": status.as_ref().map(|s| s["cluster"]["role"].clone()),
                    "resp": entry.and_then(|node| node.resp).map(|a| a.to_string()),
                    "status": status,
                    "down": status.is_none().then(|| reason(*id)),
                })
            })
            .collect();
        println!("{}", json!({ "nodes": nodes }));
        return if none_answers {
            Err(no_node_answers())
        } else {
            Ok(())
        };
    }
    println!(
        "{:<5} {:<8} {:>5} {:>10} {:>10} {:>15}",
        "node", "role", "view", "LSN", "lag", "last heartbeat"
    );
    for (id, status) in &rows {
        let Some(status) = status else {
            println!("{id:<5} {:<8} {}", "down", reason(*id));
            continue;
        };
        let cluster = &status["cluster"];
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
        println!("{id:<5} {role:<8} {view:>5} {lsn:>10} {lag:>10} {heartbeat:>15}");
    }
    if none_answers {
        return Err(no_node_answers());
    }
    Ok(())
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
    let mut child = local::spawn_detached(&node)?;
    let pid = child.id();
    for listed in &mut file.nodes {
        if listed.id == node.id {
            listed.pid = pid;
        }
    }
    file.save(dir)?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        if let Ok(Some(exit)) = child.try_wait() {
            return Err(Failure::Run(format!(
                "node {} exited at once ({exit}); the end of its log {}:\n{}",
                node.id,
                node.log.display(),
                log_tail(&node.log, 20)
            )));
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
                node.log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    println!(
        "started node {} (pid {pid}); it rejoins as a spare and becomes a backup once caught \
         up (`tandem status` shows it); log {}",
        node.id,
        node.log.display()
    );
    Ok(())
}

/// The last `lines` lines of a log file.
fn log_tail(path: &std::path::Path, lines: usize) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let all: Vec<&str> = text.lines().collect();
    all[all.len().saturating_sub(lines)..].join("\n")
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
