//! `tandem demo --client redis`: the failover demo with unmodified Redis applications.
//!
//! A local 3-node cluster serves the Redis model; `--proxies` `tandem proxy` processes (this
//! executable) each speak RESP to the applications and tandem's protocol to every node; each
//! application is a redis-py process (`demo_redis.py`, embedded here and written next to the
//! cluster) that runs `INCR`s and a Lua transfer through one of them, one operation at a
//! time, and records each operation. Halfway through, the fault of `tandem demo --fault`
//! hits. Then the script's `check` reads every key back through a proxy and accounts for
//! every operation exactly (its module comment says how); this side measures the gap from
//! the acknowledgements' times and compares the replicas as the stub's demo does.
//!
//! The clients know no node: the failover gap is the longest time no client had an
//! acknowledgement, among the silences that end after the fault and begin before the load
//! stops (the last acknowledgement before the outage to the first after it, over all
//! clients). With `--proxies 0` the
//! clients connect to the nodes' RESP ports themselves, as a plain Redis application would,
//! and the report shows the errors the proxy hides.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::{BUCKET_MS, FailoverRun, Injected, Judged, Scenario, alone_ms, suspicions};
use crate::Failure;
use crate::local::{LocalCluster, Options};

/// The workload and its checker.
const SCRIPT: &str = include_str!("demo_redis.py");
/// Proxies when `--proxies` is not given: more than one, so that clients of different proxies
/// (whose stubs find the new primary each on its own) share the failover.
pub(super) const PROXIES_DEFAULT: u32 = 2;
/// How long a client waits for one reply before it counts an error: through a proxy, far
/// above the proxy's own deadline (which answers first); without one, short, since a paused
/// node would hold the client as long as it is paused.
const REPLY_WAIT_PROXY_S: &str = "30";
const REPLY_WAIT_DIRECT_S: &str = "1";

/// What only a run with Redis clients counts.
#[derive(Clone, Debug, Serialize)]
pub struct RedisCounts {
    pub clients: u32,
    /// `tandem proxy` processes; 0 when the clients connected to the nodes themselves.
    pub proxies: u32,
    /// Operations sent, acknowledged or not.
    pub ops: u64,
    pub incr_acknowledged: u64,
    pub transfers_acknowledged: u64,
    /// The first few errors the clients saw, as redis-py said them.
    pub errors: Vec<String>,
    /// The Python that ran the clients.
    pub python: PathBuf,
}

/// The script's `check` report.
#[derive(Debug, Deserialize)]
struct Checked {
    ops: u64,
    acknowledged: u64,
    incr_acknowledged: u64,
    transfers_acknowledged: u64,
    found: u64,
    lost: u64,
    duplicates: u64,
    reply_mismatches: u64,
    client_errors: u64,
    findings: Vec<String>,
    errors: Vec<String>,
    op_ms_max: f64,
    /// Every acknowledgement's time, seconds since the Unix epoch, sorted.
    acks: Vec<f64>,
}

/// A child process killed when dropped: a proxy, or a client.
struct Process {
    child: Child,
    stdin: Option<ChildStdin>,
    /// Kept open after the first line: a process that prints again must not find its stdout
    /// closed (Rust's `println!` panics on a broken pipe).
    stdout: Option<BufReader<ChildStdout>>,
    log: PathBuf,
}

impl Process {
    /// Its first line on stdout, or why there is none (its log then says why it ended).
    fn first_line(&mut self, what: &str) -> Result<String, Failure> {
        let stdout = self.child.stdout.take().expect("a piped stdout");
        let stdout = self.stdout.insert(BufReader::new(stdout));
        let mut line = String::new();
        let read = stdout.read_line(&mut line);
        if read.is_err() || line.is_empty() {
            let _ = self.child.kill();
            let _ = self.child.wait();
            return Err(Failure::Run(format!(
                "{what} ended before it was ready; its log ({}):\n{}",
                self.log.display(),
                std::fs::read_to_string(&self.log).unwrap_or_default()
            )));
        }
        Ok(line.trim().to_string())
    }

    fn say(&mut self, line: &str) -> Result<(), Failure> {
        let stdin = self.stdin.as_mut().expect("a piped stdin");
        writeln!(stdin, "{line}")
            .and_then(|()| stdin.flush())
            .map_err(|err| Failure::Run(format!("a client stopped listening: {err}")))
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The Python to run the clients with: the project's virtualenv (`$TANDEM_PYENV`, else the
/// `target/pyenv` beside this executable's build directory or under the working directory),
/// else `python3`; the first that can `import redis`.
pub fn python() -> Result<PathBuf, Failure> {
    let mut candidates = Vec::new();
    if let Some(root) = std::env::var_os("TANDEM_PYENV") {
        candidates.push(PathBuf::from(root).join("bin/python"));
    }
    // target/release/tandem (or target/debug/tandem, which the tests run) → target/pyenv.
    if let Some(target) = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.ancestors().nth(2).map(Path::to_path_buf))
    {
        candidates.push(target.join("pyenv/bin/python"));
    }
    candidates.push(PathBuf::from("target/pyenv/bin/python"));
    candidates.push(PathBuf::from("python3"));
    for candidate in &candidates {
        let imports = Command::new(candidate)
            .args(["-c", "import redis"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        if imports {
            return Ok(candidate.clone());
        }
    }
    Err(Failure::Run(format!(
        "--client redis runs redis-py, and no Python here can `import redis` (tried {}): run \
         .ci/setup (it makes the virtualenv target/pyenv), or `pip install redis==5.2.1`",
        candidates
            .iter()
            .map(|path| path.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )))
}

/// Seconds since the Unix epoch, the clock the clients stamp their acknowledgements with.
fn epoch_s() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64()
}

/// Starts `tandem proxy` in front of `cluster` on a port of its choosing.
/// `tls_ca`: the cluster's CA, when the nodes' native ports speak TLS.
fn start_proxy(
    dir: &Path,
    index: u32,
    cluster: &[SocketAddr],
    tls_ca: Option<&Path>,
) -> Result<(Process, SocketAddr), Failure> {
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Run(format!("cannot find the tandem binary: {err}")))?;
    let log = dir.join(format!("proxy{index}.log"));
    let stderr = std::fs::File::create(&log)
        .map_err(|err| Failure::Run(format!("cannot create {}: {err}", log.display())))?;
    let addresses: Vec<String> = cluster.iter().map(SocketAddr::to_string).collect();
    let mut child = Command::new(exe)
        .arg("proxy")
        .arg("--cluster")
        .arg(addresses.join(","))
        .args(["--listen", "127.0.0.1:0"])
        .args(
            tls_ca
                .map(|ca| ["--tls-ca".as_ref(), ca.as_os_str()])
                .into_iter()
                .flatten(),
        )
        // The proxy ends when this process does, however it ends (as the nodes do).
        .arg("--exit-on-stdin-eof")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|err| Failure::Run(format!("cannot start tandem proxy: {err}")))?;
    let stdin = child.stdin.take();
    let mut proxy = Process {
        child,
        stdin,
        stdout: None,
        log,
    };
    // "tandem proxy: listening on 127.0.0.1:PORT" once it serves.
    let line = proxy.first_line("tandem proxy")?;
    let address = line
        .rsplit(' ')
        .next()
        .and_then(|text| text.parse().ok())
        .ok_or_else(|| Failure::Run(format!("tandem proxy said {line:?}, not its address")))?;
    Ok((proxy, address))
}

/// Runs the demo with `scenario.clients` redis-py clients through `proxies` proxies.
pub fn run(scenario: &Scenario, proxies: u32) -> Result<FailoverRun, Failure> {
    let python = python()?;
    scenario.say(&format!(
        "starting 3 nodes under {} ({} MiB Redis each, {})",
        scenario.dir.display(),
        scenario.db_mib,
        scenario.safety
    ));
    let mut options = Options::new(3).with_db_mib(scenario.db_mib);
    options.safety = scenario.safety;
    options.fsync = scenario.fsync;
    options.checkpoint_mib = scenario.checkpoint_mib;
    options.workload = "redis".to_string();
    options.tls = scenario.tls;
    options.suspect_ticks = scenario.suspect_ticks;
    options.tail_records_max = scenario.tail_records_max;
    let (mut cluster, settled) =
        LocalCluster::start_settled(&scenario.dir, &options, Duration::from_secs(120))?;
    let work = cluster.dir.join("redis-clients");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work)
        .map_err(|err| Failure::Run(format!("cannot create {}: {err}", work.display())))?;
    let script = work.join("demo_redis.py");
    std::fs::write(&script, SCRIPT)
        .map_err(|err| Failure::Run(format!("cannot write {}: {err}", script.display())))?;
    let mut proxy_processes = Vec::new();
    let mut entries = Vec::new();
    let ca = cluster.dir.join(crate::local::CA_FILE);
    let tls_ca = scenario.tls.then_some(ca.as_path());
    for index in 1..=proxies {
        let (process, address) = start_proxy(&work, index, &cluster.addresses(), tls_ca)?;
        proxy_processes.push(process);
        entries.push(address.to_string());
    }
    // Without proxies each client starts at the primary and moves on along the nodes.
    let direct = direct_addresses(&cluster, settled.primary);
    let how = if proxies == 0 {
        "straight to the nodes' RESP ports".to_string()
    } else {
        format!("through {proxies} tandem proxies ({})", entries.join(", "))
    };
    scenario.say(&format!(
        "node {} is primary of view {}; {} redis-py clients connect {how}",
        settled.primary, settled.view, scenario.clients
    ));
    let mut clients = Vec::new();
    let mut records = Vec::new();
    for index in 1..=scenario.clients {
        let addresses = if proxies == 0 {
            direct.clone()
        } else {
            entries[(index as usize - 1) % entries.len()].clone()
        };
        let record = work.join(format!("client{index}.json"));
        let log = work.join(format!("client{index}.log"));
        let stderr = std::fs::File::create(&log)
            .map_err(|err| Failure::Run(format!("cannot create {}: {err}", log.display())))?;
        let mut child = Command::new(&python)
            .arg(&script)
            .arg("client")
            .args(["--id", &index.to_string(), "--addresses", &addresses])
            .arg("--out")
            .arg(&record)
            .args(["--timeout-s", reply_wait_s(proxies)])
            .args(plant())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .map_err(|err| Failure::Run(format!("cannot run {}: {err}", python.display())))?;
        let stdin = child.stdin.take();
        clients.push(Process {
            child,
            stdin,
            stdout: None,
            log,
        });
        records.push(record);
    }
    for (index, client) in clients.iter_mut().enumerate() {
        let line = client.first_line(&format!("redis-py client {}", index + 1))?;
        if line != "ready" {
            return Err(Failure::Run(format!(
                "redis-py client {} said {line:?}, not ready",
                index + 1
            )));
        }
    }
    let suspicions_start = suspicions(&cluster);
    let alone_start = alone_ms(&cluster);
    let started = Instant::now();
    let started_s = epoch_s();
    for client in &mut clients {
        client.say("go")?;
    }
    let Injected {
        killed,
        kill_ms,
        suspicions_at_kill,
    } = scenario.inject(&mut cluster, settled.primary, started)?;
    let stop_ms = started.elapsed().as_secs_f64() * 1000.0;
    for client in &mut clients {
        client.say("stop")?;
    }
    for (index, client) in clients.iter_mut().enumerate() {
        let status = client
            .child
            .wait()
            .map_err(|err| Failure::Run(format!("redis-py client {}: {err}", index + 1)))?;
        if !status.success() {
            return Err(Failure::Run(format!(
                "redis-py client {} failed ({status}); its log ({}):\n{}",
                index + 1,
                client.log.display(),
                std::fs::read_to_string(&client.log).unwrap_or_default()
            )));
        }
    }
    scenario.say(&format!(
        "load stopped; reading every key back {}",
        if proxies == 0 {
            "from the nodes"
        } else {
            "through a proxy"
        }
    ));
    let read_at = if proxies == 0 {
        direct.clone()
    } else {
        entries[0].clone()
    };
    let checked = check(&python, &script, &read_at, &records)?;
    drop(proxy_processes);
    let Judged {
        settled_end,
        alone_end,
        mut findings,
        false_suspicions,
    } = scenario.judge(&mut cluster, killed, &suspicions_start, &suspicions_at_kill)?;
    findings.extend(checked.findings.iter().cloned());
    if checked.reply_mismatches > 0 {
        findings.push(format!(
            "{} replies did not follow their client's count",
            checked.reply_mismatches
        ));
    }
    if checked.lost > 0 || checked.duplicates > 0 {
        findings.push(format!(
            "lost {}, duplicates {}",
            checked.lost, checked.duplicates
        ));
    }
    if let Some(error) = checked.errors.first() {
        scenario.say(&format!("a client error: {error}"));
    }
    let acks_ms: Vec<f64> = checked
        .acks
        .iter()
        .map(|ack| (ack - started_s) * 1000.0)
        .collect();
    let silence = longest_silence(&acks_ms, kill_ms, stop_ms);
    let buckets = ((scenario.seconds * 1000.0) / f64::from(BUCKET_MS)).ceil() as usize + 1;
    let mut throughput = vec![0u64; buckets];
    for ack in &acks_ms {
        if let Some(count) = throughput.get_mut((ack.max(0.0) / f64::from(BUCKET_MS)) as usize) {
            *count += 1;
        }
    }
    let hit_primary = scenario.fault.hits_primary();
    let gap = silence.filter(|_| hit_primary);
    Ok(FailoverRun {
        gap_ms: gap.map(|(from, to)| to - from),
        kill_to_first_reply_ms: gap.map(|(_, to)| to - kill_ms),
        acknowledged: checked.acknowledged,
        found: checked.found,
        lost: checked.lost,
        duplicates: checked.duplicates,
        reply_mismatches: checked.reply_mismatches,
        client_errors: checked.client_errors,
        calls_retried: None,
        call_ms_max: checked.op_ms_max,
        consistent: findings.is_empty(),
        findings,
        false_suspicions,
        fault: scenario.fault,
        safety: scenario.safety.to_string(),
        loss_allowed: scenario.loss_allowed(),
        killed,
        stale_replies: None,
        stall_ms: silence.map(|(from, to)| to - from.max(kill_ms)),
        new_primary: Some(settled_end.primary),
        view_before: settled.view,
        view_after: settled_end.view,
        view_changes: settled_end.view.saturating_sub(settled.view),
        alone_ms: alone_end
            .iter()
            .filter_map(|(node, end)| alone_start.get(node).map(|start| (end - start).max(0.0)))
            .sum(),
        throughput_per_10ms: throughput,
        kill_ms,
        last_old_ms: gap.map(|(from, _)| from),
        first_new_ms: gap.map(|(_, to)| to),
        redis: Some(RedisCounts {
            clients: scenario.clients,
            proxies,
            ops: checked.ops,
            incr_acknowledged: checked.incr_acknowledged,
            transfers_acknowledged: checked.transfers_acknowledged,
            errors: checked.errors,
            python,
        }),
    })
}

fn reply_wait_s(proxies: u32) -> &'static str {
    if proxies == 0 {
        REPLY_WAIT_DIRECT_S
    } else {
        REPLY_WAIT_PROXY_S
    }
}

/// `--plant-double-incr` for the clients when `TANDEM_DEMO_PLANT=double-incr`: a client bug
/// (an INCR sent twice, counted once) that the checker must report as a duplicate.
fn plant() -> Option<&'static str> {
    (std::env::var("TANDEM_DEMO_PLANT").as_deref() == Ok("double-incr"))
        .then_some("--plant-double-incr")
}

/// Every node's RESP address, the primary's first, comma-separated.
fn direct_addresses(cluster: &LocalCluster, primary: u32) -> String {
    let mut nodes: Vec<_> = cluster.nodes.iter().collect();
    nodes.sort_by_key(|node| node.entry.id != primary);
    nodes
        .iter()
        .filter_map(|node| node.entry.resp)
        .map(|address| address.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Runs the script's `check` on the clients' records, reading the keys at `addresses`.
fn check(
    python: &Path,
    script: &Path,
    addresses: &str,
    records: &[PathBuf],
) -> Result<Checked, Failure> {
    let output = Command::new(python)
        .arg(script)
        .arg("check")
        .args(["--addresses", addresses])
        .arg("--records")
        .args(records)
        .stdin(Stdio::null())
        .output()
        .map_err(|err| Failure::Run(format!("cannot run {}: {err}", python.display())))?;
    if !output.status.success() {
        return Err(Failure::Run(format!(
            "the redis-py check failed ({}): {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    serde_json::from_slice(&output.stdout).map_err(|err| {
        Failure::Run(format!(
            "the redis-py check printed no report ({err}): {}",
            String::from_utf8_lossy(&output.stdout)
        ))
    })
}

/// The longest time without an acknowledgement (ms, sorted) among those that end after
/// `fault_ms` and begin before `stop_ms`: (the last before it, the first after it). `None` if
/// nothing was acknowledged after the fault. A silence that begins after the stop is the
/// clients finishing their last operations one by one, not an outage.
fn longest_silence(acks_ms: &[f64], fault_ms: f64, stop_ms: f64) -> Option<(f64, f64)> {
    let mut longest: Option<(f64, f64)> = None;
    for pair in acks_ms.windows(2) {
        let (from, to) = (pair[0], pair[1]);
        if to < fault_ms || from >= stop_ms {
            continue;
        }
        if longest.is_none_or(|(a, b)| to - from > b - a) {
            longest = Some((from, to));
        }
    }
    longest
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_gap_is_the_longest_silence_that_ends_after_the_fault() {
        // A longer silence before the fault does not count; the one across it does.
        let acks = [0.0, 50.0, 51.0, 52.0, 60.0, 61.0];
        assert_eq!(longest_silence(&acks, 55.0, 100.0), Some((52.0, 60.0)));
        assert_eq!(longest_silence(&acks, 100.0, 200.0), None);
        // A silence after the fault, longer than the one across it, is the gap.
        let acks = [0.0, 1.0, 2.0, 3.0, 10.0, 11.0];
        assert_eq!(longest_silence(&acks, 2.5, 100.0), Some((3.0, 10.0)));
        // One that begins after the stop (the last operations ending) is not.
        let acks = [0.0, 1.0, 2.0, 5.0, 6.0, 30.0];
        assert_eq!(longest_silence(&acks, 1.5, 6.0), Some((2.0, 5.0)));
        // One that begins before the stop and ends after it is.
        assert_eq!(longest_silence(&acks, 1.5, 7.0), Some((6.0, 30.0)));
    }
}
