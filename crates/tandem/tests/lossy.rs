//! Packet loss on the nodes' links, then a kill of the primary, with real processes: while
//! `tandem demo` runs Debit-Credit on three `tandem node` processes, this test drops 20% of
//! the packets to and from every node's port (iptables' `statistic` match) for two seconds,
//! then the demo kills the primary. The cluster must serve again and lose nothing: no lost or
//! duplicated commit, no client error, identical and consistent replicas.
//!
//! iptables needs root and a kernel with the `statistic` match; `.ci/setup` installs the
//! command (the test runs it if iptables is missing). Where packet loss still cannot be set up,
//! the test fails saying why.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common;
use crate::redis_support;

/// The share of packets dropped, and for how long.
const LOSS_PROBABILITY: &str = "0.2";
const LOSS_FOR: Duration = Duration::from_secs(2);

/// An iptables chain of this test's own, hooked into OUTPUT (loopback packets pass it once),
/// removed with every rule in it when dropped.
struct LossChain {
    name: String,
}

impl LossChain {
    /// The chain, or why it cannot be made here.
    fn create() -> Result<LossChain, String> {
        let name = format!("TANDEM_LOSS_{}", std::process::id());
        iptables(&["-N", &name])?;
        let chain = LossChain { name };
        iptables(&["-I", "OUTPUT", "-j", &chain.name])?;
        // The statistic match must exist: try it on a port nothing uses.
        chain.drop_port(9)?;
        iptables(&["-F", &chain.name])?;
        Ok(chain)
    }

    /// Drops a share of the packets from and to TCP port `port`.
    fn drop_port(&self, port: u16) -> Result<(), String> {
        let port = port.to_string();
        for direction in ["--dport", "--sport"] {
            iptables(&[
                "-A",
                &self.name,
                "-p",
                "tcp",
                direction,
                &port,
                "-m",
                "statistic",
                "--mode",
                "random",
                "--probability",
                LOSS_PROBABILITY,
                "-j",
                "DROP",
            ])?;
        }
        Ok(())
    }

    /// Packets the chain's rules dropped so far.
    fn dropped(&self) -> u64 {
        let output = Command::new("iptables")
            .args(["-w", "-L", &self.name, "-v", "-n", "-x"])
            .output();
        let Ok(output) = output else { return 0 };
        String::from_utf8_lossy(&output.stdout)
            .lines()
            .filter(|line| line.contains("DROP"))
            .filter_map(|line| line.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// Stops dropping anything.
    fn clear(&self) {
        let _ = iptables(&["-F", &self.name]);
    }
}

impl Drop for LossChain {
    fn drop(&mut self) {
        let _ = iptables(&["-D", "OUTPUT", "-j", &self.name]);
        let _ = iptables(&["-F", &self.name]);
        let _ = iptables(&["-X", &self.name]);
    }
}

fn iptables(args: &[&str]) -> Result<(), String> {
    let output = Command::new("iptables")
        .arg("-w")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| format!("iptables cannot run ({err}); .ci/setup installs it"))?;
    if output.status.success() {
        Ok(())
    } else {
        Err(format!(
            "iptables {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        ))
    }
}

/// The port each node listens on, from the demo's `cluster.json`, once all three are there.
fn node_ports(dir: &Path, within: Duration) -> Vec<u16> {
    let started = Instant::now();
    while started.elapsed() < within {
        if let Ok(text) = std::fs::read_to_string(dir.join("cluster.json"))
            && let Ok(cluster) = serde_json::from_str::<Value>(&text)
            && let Some(nodes) = cluster["nodes"].as_array()
        {
            let ports: Vec<u16> = nodes
                .iter()
                .filter_map(|node| node["listen"].as_str())
                .filter_map(|listen| listen.rsplit(':').next()?.parse().ok())
                .collect();
            if ports.len() == 3 {
                return ports;
            }
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    panic!("the demo wrote no cluster.json with three nodes in {within:?}");
}

#[test]
fn packet_loss_on_the_links_then_a_kill_of_the_primary_loses_nothing() {
    redis_support::require("iptables");
    let chain = LossChain::create()
        .unwrap_or_else(|why| panic!("packet loss cannot be set up here: {why}"));
    let dir: PathBuf =
        std::env::temp_dir().join(format!("tandem-lossy-test-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    // Four seconds of load: the primary is killed halfway, as the loss ends.
    let demo = common::demo_command(&dir, "4")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("tandem runs");
    for port in node_ports(&dir, Duration::from_secs(60)) {
        chain.drop_port(port).expect("the chain took a rule before");
    }
    std::thread::sleep(LOSS_FOR);
    let dropped = chain.dropped();
    chain.clear();
    let output = demo.wait_with_output().expect("the demo ends");
    drop(chain);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: Value = serde_json::from_str(stdout.trim()).unwrap_or(Value::Null);
    assert!(
        output.status.success(),
        "tandem demo failed after packet loss: {stderr}\n{report}"
    );
    eprintln!(
        "packet loss on the nodes' ports: {dropped} packets dropped; then gap {} ms, longest \
         stall {} ms, {} view changes, {} false suspicions, {} ms without a backup",
        report["gap_ms"],
        report["stall_ms"],
        report["view_changes"],
        report["false_suspicions"],
        report["alone_ms"]
    );
    assert!(dropped > 0, "the loss dropped nothing: {report}");
    common::assert_safe(&report);
    // The cluster served again after the kill: another node answered, in a newer view.
    let killed = report["killed"].as_u64();
    assert!(report["first_new_ms"].as_f64().is_some(), "{report}");
    assert_ne!(report["new_primary"].as_u64(), killed, "{report}");
    let _ = std::fs::remove_dir_all(&dir);
}
