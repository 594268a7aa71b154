//! `tandem bench durability`: what keeping every acknowledged write on disk costs, against
//! keeping it in the backups' memory and against Redis's append-only file.
//!
//! Four systems, all up for the whole run, each with its files in a folder of its own under
//! `--dir` (on this machine's disk): a tandem cluster of `--nodes` under `2-safe` (a reply
//! leaves once every backup holds the write in memory), a second one under `durable` (once
//! the primary and every backup synced it to their logs), a `redis-server` with
//! `appendfsync always` (its file synced before the replies to the writes in it: one fsync
//! for all the writes of a pass of its event loop) and one with `appendfsync everysec` (an
//! fsync a second, replies before it). Two workloads: `SET` on random keys, and
//! Debit-Credit as a Lua script called with `EVALSHA`; both run through `resp_load`'s
//! client, at the same client settings on every system.
//!
//! Every (system, workload) pair gets one unmeasured warm-up slice, then `--seconds` of
//! measured slices, the pairs taking turns and their order rotated every round, so that the
//! noise of a shared machine falls on all of them alike. Throughput is the median of a pair's
//! slice rates; latency comes from an hdrhistogram of all its operations. An error reply
//! ends the run: a refused operation is no measure of speed.
//!
//! Recovery (`--recovery-mib`, one database size after another): a 3-node 2-safe cluster
//! of that size, checkpointing every `--recovery-checkpoint-mib` of batches, takes 64 KiB
//! values over `--recovery-fill-percent` of its database (the pages a checkpoint must carry),
//! then `SET`s for `--recovery-seconds`; once a checkpoint begun after the fill is written, a
//! backup is killed and started again. It rebuilds its database from its write-ahead log (the
//! initial load, its newest checkpoint installed on it, then the batches after it) and
//! rejoins. `restart_s` is the time from its start to its serving as a backup again (the
//! load, the replay, the join and the catch-up); `replay_s` the checkpoint's install and the
//! replay, as the node logs them; `log_mib` its log's size before the restart, checkpoint
//! included. `tandem demo --fault power-loss` times a whole cluster's restart.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tandem_replication::{AckCount, Safety};

use crate::Failure;

use crate::bench::resp_load::{
    Conn, RedisProcess, Tally, Target, Test, command, cpu_seconds, cpu_seconds_of, ratio_cell,
    redis_server_version, run_slice, start_redis, start_tandem, start_tandem_with,
};
use crate::cli::DurabilityArgs;
use crate::local::{LocalCluster, Options};
use tandem_redis::resp::Value;

/// The longest measured slice: `--seconds` is split into slices no longer than this.
const SLICE_MAX: Duration = Duration::from_millis(500);

/// The unmeasured slice each pair runs first (connections, page faults, files created).
const WARM_UP: Duration = Duration::from_millis(100);

/// One system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum System {
    TandemTwoSafe,
    TandemDurable,
    RedisAlways,
    RedisEverysec,
}

impl System {
    pub const ALL: [System; 4] = [
        System::TandemTwoSafe,
        System::TandemDurable,
        System::RedisAlways,
        System::RedisEverysec,
    ];

    pub fn name(self) -> &'static str {
        match self {
            System::TandemTwoSafe => "tandem-2safe",
            System::TandemDurable => "tandem-durable",
            System::RedisAlways => "redis-always",
            System::RedisEverysec => "redis-everysec",
        }
    }

    pub fn parse(text: &str) -> Option<System> {
        System::ALL.into_iter().find(|system| system.name() == text)
    }

    fn is_redis(self) -> bool {
        matches!(self, System::RedisAlways | System::RedisEverysec)
    }
}

/// One workload: what every operation does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    Set,
    DebitCredit,
}

impl Workload {
    pub const ALL: [Workload; 2] = [Workload::Set, Workload::DebitCredit];

    pub fn name(self) -> &'static str {
        match self {
            Workload::Set => "set",
            Workload::DebitCredit => "debit-credit",
        }
    }

    pub fn parse(text: &str) -> Option<Workload> {
        Workload::ALL
            .into_iter()
            .find(|workload| workload.name() == text)
    }

    fn test(self) -> Test {
        match self {
            Workload::Set => Test::Set,
            Workload::DebitCredit => Test::EvalshaDebitCredit,
        }
    }
}

/// A running system: where to send, and what to stop at the end.
struct Running {
    system: System,
    target: Target,
    /// The system's processes: its nodes, or its redis-server.
    pids: Vec<u32>,
    _cluster: Option<LocalCluster>,
    _redis: Option<RedisProcess>,
}

fn start(system: System, dir: &Path, args: &DurabilityArgs) -> Result<Running, Failure> {
    let folder = dir.join(system.name());
    let (address, cluster, redis) = match system {
        System::TandemTwoSafe | System::TandemDurable => {
            let safety = if system == System::TandemDurable {
                Safety::Durable(AckCount::All)
            } else {
                Safety::TwoSafe(AckCount::All)
            };
            let (cluster, address) =
                start_tandem(&folder, args.nodes, safety, args.db_mib as usize)?;
            (address, Some(cluster), None)
        }
        System::RedisAlways | System::RedisEverysec => {
            let fsync = if system == System::RedisAlways {
                "always"
            } else {
                "everysec"
            };
            let persistence = ["--appendonly", "yes", "--appendfsync", fsync];
            let (process, address) = start_redis(None, &folder, &persistence)?;
            (address, None, Some(process))
        }
    };
    let pids = match (&cluster, &redis) {
        (Some(cluster), _) => cluster.nodes.iter().filter_map(|node| node.pid()).collect(),
        (None, Some(redis)) => vec![redis.pid()],
        (None, None) => unreachable!("every system is a cluster or a redis-server"),
    };
    Ok(Running {
        system,
        target: Target::load(address, false, None)?,
        pids,
        _cluster: cluster,
        _redis: redis,
    })
}

/// One (system, workload) pair's line of the report.
#[derive(Debug, Serialize)]
pub struct Run {
    pub system: &'static str,
    pub workload: &'static str,
    /// Median over the pair's slices.
    pub ops_per_s: f64,
    pub p99_ms: f64,
    #[serde(skip)]
    pub p50_ms: f64,
    /// CPU time per operation, in microseconds: the system's processes (every node of a
    /// tandem cluster, its background work included), and the clients (this process).
    /// `None` where the processes' CPU time cannot be read (not Linux).
    pub server_cpu_us_per_op: Option<f64>,
    pub client_cpu_us_per_op: Option<f64>,
    /// The rate at which the servers and the clients together would keep every core of
    /// this machine busy, at the CPU time per operation measured: what throughput could
    /// reach here once nothing waits (a disk, a round trip, a thread's wake-up).
    pub saturated_ops_per_s: Option<f64>,
}

#[derive(Debug, Serialize)]
struct Report {
    runs: Vec<Run>,
    /// Restarts from disk, timed (see the module's comment).
    recovery: Vec<Recovery>,
}

/// One restart of a backup from its log.
#[derive(Debug, Serialize)]
pub struct Recovery {
    pub db_mib: u64,
    /// The log's files (segments and checkpoint) when the node was killed.
    pub log_mib: f64,
    pub restart_s: f64,
    pub replay_s: f64,
    /// Records and images the replay applied.
    pub records: u64,
    /// The checkpoint the restart installed first, if any: its LSN and its MiB.
    pub checkpoint_lsn: Option<u64>,
    pub checkpoint_mib: f64,
    /// MiB of 64 KiB values written before the SETs (`--recovery-fill-percent`).
    pub filled_mib: u64,
}

/// The size of each value the recovery fill writes.
const FILL_VALUE_BYTES: usize = 64 * 1024;

/// Fill commands a connection keeps in flight.
const FILL_PIPELINE: usize = 16;

/// Writes `mib` MiB of 64 KiB values (`fill:0`, `fill:1`, ...) through one pipelined
/// connection, every reply checked.
fn fill(address: std::net::SocketAddr, mib: u64) -> Result<(), Failure> {
    let count = mib * (1 << 20) / FILL_VALUE_BYTES as u64;
    let mut conn = Conn::open(address)?;
    let value: Vec<u8> = (0..FILL_VALUE_BYTES)
        .map(|i| b'a' + (i % 26) as u8)
        .collect();
    let mut out = Vec::new();
    let mut in_flight = 0;
    for index in 0..count {
        let key = format!("fill:{index}");
        out.clear();
        command(&mut out, &[b"SET", key.as_bytes(), &value]);
        conn.send(&out)?;
        in_flight += 1;
        if in_flight == FILL_PIPELINE || index + 1 == count {
            for _ in 0..in_flight {
                if let Value::Error(text) = conn.read_reply()? {
                    let text = String::from_utf8_lossy(&text);
                    return Err(Failure::Run(format!("filling: SET {key} answered {text}")));
                }
            }
            in_flight = 0;
        }
    }
    Ok(())
}

/// The number right after `marker` on the last line of a node's `log` that contains `line_has`.
fn last_number_after(log: &str, line_has: &str, marker: &str) -> Option<u64> {
    let line = log.lines().rev().find(|line| line.contains(line_has))?;
    let start = line.find(marker)? + marker.len();
    let digits: String = line[start..]
        .chars()
        .take_while(char::is_ascii_digit)
        .collect();
    digits.parse().ok()
}

/// The LSN of the newest checkpoint the node's log says it wrote.
fn checkpoint_written_lsn(log: &str) -> Option<u64> {
    let written = "written; the log keeps only what follows it";
    last_number_after(log, written, "checkpoint at LSN ")
}

/// Longest the bench waits for a checkpoint begun after the fill to be written.
const CHECKPOINT_WAIT_MAX: Duration = Duration::from_secs(300);

/// Ticks of silence before a recovery cluster's node suspects a peer (see `measure_recovery`).
const RECOVERY_SUSPECT_TICKS: u64 = 200;

/// The node restarted: the last one, a backup of the first view.
const RESTARTED: u32 = 3;

/// Fills `fill_percent` of a cluster of `db_mib` with large values, sends it SETs for
/// `seconds`, kills a backup, starts it again, and times its way back from its log.
fn measure_recovery(
    dir: &Path,
    db_mib: u32,
    seconds: f64,
    checkpoint_mib: u64,
    fill_percent: u8,
) -> Result<Recovery, Failure> {
    let folder = dir.join(format!("recovery-{db_mib}mib"));
    let mut options = Options::new(RESTARTED).with_db_mib(db_mib as usize);
    options.checkpoint_mib = checkpoint_mib;
    // A fill saturates this shared machine's two cores (three nodes and the client copying
    // 64 KiB values): a peer silent for the default 10 ms would move the primary, and the
    // fill's writes would fail. This measures a restart, not a failover.
    options.suspect_ticks = RECOVERY_SUSPECT_TICKS;
    let (mut cluster, address) =
        start_tandem_with(&folder, options, Safety::TwoSafe(AckCount::All))?;
    let target = Target::load(address, false, None)?;
    let filled_mib = u64::from(db_mib) * u64::from(fill_percent) / 100;
    // Each of the fill's SETs commits one LSN.
    let fill_commits = filled_mib * (1 << 20) / FILL_VALUE_BYTES as u64;
    if filled_mib > 0 {
        fill(address, filled_mib)?;
    }
    let restarted_log = |cluster: &LocalCluster| {
        let node = cluster.nodes.iter().find(|node| node.entry.id == RESTARTED);
        node.expect("the cluster has the node").log()
    };
    // The backup checkpoints what it applied, behind the primary's acknowledgements: the SETs
    // that follow wait for a checkpoint that holds the whole fill, so that the restart
    // installs the filled pages from it and replays only the SETs after it.
    if filled_mib > 0 {
        let deadline = Instant::now() + CHECKPOINT_WAIT_MAX;
        while checkpoint_written_lsn(&restarted_log(&cluster)).is_none_or(|lsn| lsn < fill_commits)
        {
            if Instant::now() > deadline {
                return Err(Failure::Run(format!(
                    "node {RESTARTED} wrote no checkpoint after the fill within {} s",
                    CHECKPOINT_WAIT_MAX.as_secs()
                )));
            }
            let waited = run_slice(
                &target,
                Workload::Set.test(),
                16,
                8,
                Duration::from_millis(200),
                u64::from(db_mib),
            )?;
            if let Some(error) = waited.first_error() {
                return Err(Failure::Run(format!("loading the cluster: {error}")));
            }
        }
    }
    let filled = run_slice(
        &target,
        Workload::Set.test(),
        16,
        8,
        Duration::from_secs_f64(seconds),
        u64::from(db_mib),
    )?;
    if let Some(error) = filled.first_error() {
        return Err(Failure::Run(format!("filling the cluster: {error}")));
    }
    let log_dir = folder.join(format!("node{RESTARTED}")).join("log");
    let files: Vec<(String, u64)> = std::fs::read_dir(&log_dir)
        .map_err(|err| Failure::Run(format!("{}: {err}", log_dir.display())))?
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let len = entry.metadata().ok()?.len();
            Some((entry.file_name().to_string_lossy().into_owned(), len))
        })
        .collect();
    let log_bytes: u64 = files.iter().map(|(_, len)| len).sum();
    let checkpoint_bytes: u64 = files
        .iter()
        .filter(|(name, _)| name.ends_with(".ckpt"))
        .map(|(_, len)| len)
        .sum();
    cluster.kill(RESTARTED);
    let started = Instant::now();
    cluster.restart(RESTARTED)?;
    let node = cluster
        .nodes
        .iter()
        .find(|node| node.entry.id == RESTARTED)
        .expect("the cluster has the node");
    let deadline = started + RECOVERY_TIMEOUT;
    loop {
        let role = node
            .status()
            .ok()
            .and_then(|status| status["cluster"]["role"].as_str().map(str::to_owned));
        if role.as_deref() == Some("backup") {
            break;
        }
        if Instant::now() > deadline {
            return Err(Failure::Run(format!(
                "node {RESTARTED} was not a backup again {} s after its restart; see {}",
                RECOVERY_TIMEOUT.as_secs(),
                node.entry.log.display()
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let restart_s = started.elapsed().as_secs_f64();
    let log = node.log();
    let (records, replay_s) = replayed(&log).ok_or_else(|| {
        Failure::Run(format!(
            "node {RESTARTED} rejoined without replaying its log; see {}",
            node.entry.log.display()
        ))
    })?;
    Ok(Recovery {
        db_mib: u64::from(db_mib),
        log_mib: log_bytes as f64 / f64::from(1 << 20),
        restart_s,
        replay_s,
        records,
        checkpoint_lsn: checkpoint_installed(&log),
        checkpoint_mib: checkpoint_bytes as f64 / f64::from(1 << 20),
        filled_mib,
    })
}

/// The LSN of the checkpoint a restarted node's log says it installed before its replay.
fn checkpoint_installed(log: &str) -> Option<u64> {
    let marker = "after installing its checkpoint at LSN ";
    last_number_after(log, marker, marker)
}

/// Longest a restarted node may take to serve again before the bench gives up on it.
const RECOVERY_TIMEOUT: Duration = Duration::from_secs(300);

/// From a node's log, the last replay's records and images, and its seconds.
fn replayed(log: &str) -> Option<(u64, f64)> {
    let line = log
        .lines()
        .rev()
        .find(|line| line.contains("from its log in"))?;
    let number_after = |marker: &str| -> Option<f64> {
        let start = line.find(marker)? + marker.len();
        let text: String = line[start..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.')
            .collect();
        text.parse().ok()
    };
    let records = number_after("replayed ")? as u64;
    let images = number_after("records and ")? as u64;
    let ms = number_after("from its log in ")?;
    Some((records + images, ms / 1e3))
}

/// How `--seconds` is cut: the number of measured slices per pair, and their length.
fn slicing(seconds: f64) -> (u32, Duration) {
    let count = (seconds / SLICE_MAX.as_secs_f64()).ceil().max(1.0) as u32;
    (count, Duration::from_secs_f64(seconds / f64::from(count)))
}

pub fn run(args: &DurabilityArgs) -> Result<(), Failure> {
    let systems = &args.systems.0;
    let workloads = &args.workloads.0;
    let say = |text: &str| {
        if !args.json {
            eprintln!("{text}");
        }
    };
    let redis_systems: Vec<&str> = systems
        .iter()
        .filter(|system| system.is_redis())
        .map(|system| system.name())
        .collect();
    if !redis_systems.is_empty() {
        let version = redis_server_version(&redis_systems.join(" and "))?;
        say(&format!("comparing with {version}"));
    }
    let dir = &args.dir;
    if dir.exists() {
        std::fs::remove_dir_all(dir)
            .map_err(|err| Failure::Run(format!("cannot clear {}: {err}", dir.display())))?;
    }
    let mut running = Vec::new();
    for &system in systems {
        say(&format!(
            "starting {} under {}",
            system.name(),
            dir.join(system.name()).display()
        ));
        let started = start(system, dir, args).map_err(|failure| {
            Failure::Run(format!(
                "{} did not start: {}; leave it out of --systems to measure the others",
                system.name(),
                failure.text()
            ))
        })?;
        running.push(started);
    }
    let pairs: Vec<(usize, Workload)> = workloads
        .iter()
        .flat_map(|&workload| (0..running.len()).map(move |index| (index, workload)))
        .collect();
    let clients = args.clients as usize;
    let pipeline = args.pipeline as usize;
    let (rounds, slice) = slicing(args.seconds);
    say(&format!(
        "{} clients, pipeline {pipeline}: {rounds} slice(s) of {} ms per system and workload",
        clients,
        slice.as_millis()
    ));
    let cores = std::thread::available_parallelism().map_or(1, usize::from) as f64;
    let mut tallies: Vec<Tally> = pairs.iter().map(|_| Tally::default()).collect();
    for round in 0..=rounds {
        for turn in 0..pairs.len() {
            // The order rotates every round, so no pair always follows the same one.
            let at = (turn + round as usize) % pairs.len();
            let (index, workload) = pairs[at];
            let system = &running[index];
            let seed = u64::from(round) << 32 | at as u64;
            let length = if round == 0 { WARM_UP } else { slice };
            let cpu_before = (cpu_seconds_of(&system.pids), cpu_seconds("self"));
            let measured = run_slice(
                &system.target,
                workload.test(),
                pipeline,
                clients,
                length,
                seed,
            )
            .map_err(|failure| {
                Failure::Run(format!(
                    "{} on {}: {}",
                    system.system.name(),
                    workload.name(),
                    failure.text()
                ))
            })?;
            if let Some(error) = measured.first_error() {
                return Err(Failure::Run(format!(
                    "{} answered an error to {}: {error}",
                    system.system.name(),
                    workload.name()
                )));
            }
            if round > 0 {
                let cpu_after = (cpu_seconds_of(&system.pids), cpu_seconds("self"));
                if let ((Some(server_0), Some(client_0)), (Some(server_1), Some(client_1))) =
                    (cpu_before, cpu_after)
                {
                    let ops = measured.ops();
                    tallies[at].add_cpu(ops, server_1 - server_0, client_1 - client_0);
                }
                tallies[at].add(measured)?;
            }
        }
    }
    let runs: Vec<Run> = pairs
        .iter()
        .zip(&tallies)
        .map(|(&(index, workload), tally)| Run {
            system: running[index].system.name(),
            workload: workload.name(),
            ops_per_s: tally.ops_per_s(),
            p99_ms: tally.latency_ms(0.99),
            p50_ms: tally.latency_ms(0.5),
            server_cpu_us_per_op: tally.server_cpu_us_per_op(),
            client_cpu_us_per_op: tally.client_cpu_us_per_op(),
            saturated_ops_per_s: tally
                .server_cpu_us_per_op()
                .zip(tally.client_cpu_us_per_op())
                .filter(|(server, client)| server + client > 0.0)
                .map(|(server, client)| cores * 1e6 / (server + client)),
        })
        .collect();
    let mut recovery = Vec::new();
    for &db_mib in &args.recovery_mib.0 {
        say(&format!(
            "recovery: a {db_mib} MiB cluster takes SETs for {} s, then a backup restarts \
             from its log",
            args.recovery_seconds
        ));
        recovery.push(measure_recovery(
            dir,
            db_mib,
            args.recovery_seconds,
            args.recovery_checkpoint_mib,
            args.recovery_fill_percent,
        )?);
    }
    if args.json {
        let report = Report { runs, recovery };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        print_report(&runs, workloads, &recovery);
    }
    Ok(())
}

/// Each pair's line, then tandem-durable's throughput over each other system's per workload.
fn print_report(runs: &[Run], workloads: &[Workload], recovery: &[Recovery]) {
    println!(
        "{:<13} {:<15} {:>11} {:>9} {:>9} {:>10} {:>10} {:>11}",
        "workload", "system", "ops/s", "p50 ms", "p99 ms", "server µs", "client µs", "saturated"
    );
    let cell = |value: Option<f64>, decimals: usize| {
        value.map_or("-".to_string(), |value| format!("{value:.decimals$}"))
    };
    for run in runs {
        println!(
            "{:<13} {:<15} {:>11.0} {:>9.3} {:>9.3} {:>10} {:>10} {:>11}",
            run.workload,
            run.system,
            run.ops_per_s,
            run.p50_ms,
            run.p99_ms,
            cell(run.server_cpu_us_per_op, 2),
            cell(run.client_cpu_us_per_op, 2),
            cell(run.saturated_ops_per_s, 0)
        );
    }
    println!("(ops/s: the median of the slices' rates; latency: from a batch's send to a reply;");
    println!(" server and client µs: CPU time per operation in the system's processes and in the");
    println!(" clients; saturated: the ops/s at which they would keep every core busy)");
    let rate = |system: System, workload: Workload| {
        runs.iter()
            .find(|run| run.system == system.name() && run.workload == workload.name())
            .map(|run| run.ops_per_s)
    };
    // What durable is judged by: at least half of 2-safe, twice Redis's fsync-always and as
    // much as Redis's everysec.
    let others = [
        (System::TandemTwoSafe, "0.5x"),
        (System::RedisAlways, "2x"),
        (System::RedisEverysec, "1x"),
    ];
    println!();
    for workload in workloads {
        let durable = rate(System::TandemDurable, *workload);
        for (other, target) in others {
            println!(
                "{:<13} tandem-durable / {:<15} {:>7}  (target ≥ {target})",
                workload.name(),
                other.name(),
                ratio_cell(durable, rate(other, *workload))
            );
        }
    }
    println!();
    if recovery.is_empty() {
        println!("recovery: not measured (--recovery-mib names no size)");
        return;
    }
    println!(
        "{:>7} {:>11} {:>9} {:>15} {:>10} {:>11} {:>10}",
        "db MiB", "filled MiB", "log MiB", "checkpoint MiB", "records", "restart s", "replay s"
    );
    for restart in recovery {
        println!(
            "{:>7} {:>11} {:>9.1} {:>15.1} {:>10} {:>11.3} {:>10.3}",
            restart.db_mib,
            restart.filled_mib,
            restart.log_mib,
            restart.checkpoint_mib,
            restart.records,
            restart.restart_s,
            restart.replay_s
        );
    }
    println!(
        "(restart: from the killed backup's start to its serving as a backup again; replay: \
         its newest checkpoint installed on the initial load, then the log after it; log MiB \
         counts the checkpoint's file too)"
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_are_cut_into_slices_of_at_most_half_a_second() {
        assert_eq!(slicing(3.0), (6, Duration::from_millis(500)));
        assert_eq!(slicing(0.2), (1, Duration::from_millis(200)));
        assert_eq!(slicing(1.5), (3, Duration::from_millis(500)));
    }

    #[test]
    fn names_parse_back() {
        for system in System::ALL {
            assert_eq!(System::parse(system.name()), Some(system));
        }
        for workload in Workload::ALL {
            assert_eq!(Workload::parse(workload.name()), Some(workload));
        }
        assert_eq!(System::parse("redis"), None);
    }
}
