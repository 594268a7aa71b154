//! `tandem up`, `tandem status` and `tandem kill`: a local cluster to try by hand.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use serde_json::{Value, json};

use crate::Failure;
use crate::cli::{KillArgs, StatusArgs, UpArgs};
use crate::local::{ClusterFile, LocalCluster, Options};

/// Starts the cluster, prints where it is, and waits for Ctrl-C (then stops every node).
pub fn up(args: &UpArgs) -> Result<(), Failure> {
    let stop = Arc::new(AtomicBool::new(false));
    let flag = Arc::clone(&stop);
    ctrlc::set_handler(move || flag.store(true, Ordering::SeqCst))
        .map_err(|err| Failure::Run(format!("cannot catch Ctrl-C: {err}")))?;
    let mut options = Options::new(args.nodes);
    options.db_mib = args.db_mib as usize;
    options.safety = args.safety;
    options.workload = args.workload.clone();
    options.suspect_ticks = args.suspect_ticks;
    options.lease_ticks = args.lease_ticks;
    eprintln!(
        "starting {} nodes under {} ({} MiB of {} each, {})",
        args.nodes,
        args.dir.display(),
        args.db_mib,
        args.workload,
        args.safety
    );
    let mut cluster = LocalCluster::start(&args.dir, &options)?;
    let settled = cluster.wait_settled(Duration::from_secs(120))?;
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
        println!(
            "try: redis-cli -h {} -p {} (the primary; a backup answers writes with READONLY)",
            resp.ip(),
            resp.port()
        );
    }
    println!(
        "`tandem status` shows the nodes, `tandem kill N` kills one; Ctrl-C stops the cluster"
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
    }
    eprintln!("stopping {} nodes", cluster.nodes.len());
    drop(cluster);
    Ok(())
}

/// Prints a row per node.
pub fn status(args: &StatusArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    let mut rows = Vec::new();
    for node in &file.nodes {
        let status = crate::bench::replication::http_get_json(node.status, "/status").ok();
        rows.push((node.id, status));
    }
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
                })
            })
            .collect();
        println!("{}", json!({ "nodes": nodes }));
        return Ok(());
    }
    println!(
        "{:<5} {:<8} {:>5} {:>10} {:>10} {:>15}",
        "node", "role", "view", "LSN", "lag", "last heartbeat"
    );
    for (id, status) in &rows {
        let Some(status) = status else {
            println!("{id:<5} {:<8}", "down");
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
    Ok(())
}

/// SIGKILL to one node of the local cluster.
pub fn kill(args: &KillArgs) -> Result<(), Failure> {
    let file = ClusterFile::load(&args.dir)?;
    let node = file
        .nodes
        .iter()
        .find(|node| node.id == args.node)
        .ok_or_else(|| {
            let ids: Vec<String> = file.nodes.iter().map(|node| node.id.to_string()).collect();
            Failure::Usage(format!(
                "NODE {}: the cluster's nodes are {}",
                args.node,
                ids.join(", ")
            ))
        })?;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(node.pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .map_err(|err| {
        Failure::Run(format!(
            "cannot kill node {} (pid {}): {err}",
            node.id, node.pid
        ))
    })?;
    println!("killed node {} (pid {})", node.id, node.pid);
    Ok(())
}
