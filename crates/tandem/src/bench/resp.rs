//! `tandem bench resp`: the same Redis commands against a tandem group (2-safe, one backup),
//! a standalone `redis-server`, and a `redis-server` with one replica where every write is
//! followed by `WAIT 1 0` (Redis's closest thing to 2-safe), interleaved in short slices;
//! and, to price TLS, the same tandem group and `redis-server` with TLS on their client ports
//! (`tandem-tls`, `redis-tls`: certificates from a CA made for the run).
//!
//! The client, its operations and its latencies are `resp_load`'s, shared with
//! `bench durability`. Throughput is the median of a system's slice rates.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tandem_redis::resp::Value;
use tandem_replication::Safety;

use crate::Failure;
use crate::bench::resp_load::{
    Conn, KEYSPACE, RedisProcess, Tally, Target, command, ratio_cell, run_slice, start_redis,
    start_redis_tls, start_tandem, start_tandem_with, tls_client,
};
use crate::cli::RespArgs;
use crate::local::LocalCluster;

/// One system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum System {
    Tandem,
    /// The same tandem group, through a `tandem proxy` (in this process) in front of it.
    TandemProxy,
    Redis,
    RedisWait,
    /// A tandem group whose RESP ports speak TLS only.
    TandemTls,
    /// A standalone `redis-server` whose only port speaks TLS.
    RedisTls,
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Tandem => "tandem",
            System::TandemProxy => "tandem-proxy",
            System::Redis => "redis",
            System::RedisWait => "redis-wait",
            System::TandemTls => "tandem-tls",
            System::RedisTls => "redis-tls",
        }
    }
}

/// A running system: where to send, and what to stop at the end.
struct Running {
    system: System,
    target: Target,
    _redis: Vec<RedisProcess>,
    _cluster: Option<LocalCluster>,
    _proxy: Option<tandem_proxy::Proxy>,
}

/// Redis without persistence: `bench resp` compares memory with memory.
const NO_PERSISTENCE: [&str; 2] = ["--appendonly", "no"];

fn start(system: System, dir: &Path, db_mib: usize) -> Result<Running, Failure> {
    let mut proxy = None;
    let mut tls = None;
    let (address, redis, cluster) = match system {
        System::Redis => {
            let (process, address) = start_redis(None, dir, &NO_PERSISTENCE)?;
            (address, vec![process], None)
        }
        System::RedisTls => {
            let certificates = dir.join("redis-tls");
            let files = crate::local::certificates_for_one(&certificates)?;
            let flags = [
                "--tls-cert-file",
                &path_text(&files.cert),
                "--tls-key-file",
                &path_text(&files.key),
                "--tls-auth-clients",
                "no",
            ]
            .map(str::to_owned);
            let mut args: Vec<&str> = NO_PERSISTENCE.to_vec();
            args.extend(flags.iter().map(String::as_str));
            let (process, address) = start_redis_tls(dir, &args, &files.ca)?;
            tls = Some(tls_client(&files.ca)?);
            (address, vec![process], None)
        }
        System::TandemTls => {
            let mut options = crate::local::Options::new(2).with_db_mib(db_mib);
            options.tls = true;
            let cluster_dir = dir.join(system.name());
            let (cluster, primary) = start_tandem_with(&cluster_dir, options, Safety::DEFAULT)?;
            tls = Some(tls_client(&cluster_dir.join(crate::local::CA_FILE))?);
            (primary, Vec::new(), Some(cluster))
        }
        System::RedisWait => {
            let (primary, address) = start_redis(None, dir, &NO_PERSISTENCE)?;
            let (replica, replica_address) = start_redis(Some(address), dir, &NO_PERSISTENCE)?;
            let deadline = Instant::now() + Duration::from_secs(10);
            let mut conn = Conn::open(replica_address)?;
            loop {
                let Value::Bulk(info) = conn.call(&[b"INFO", b"replication"])? else {
                    return Err(Failure::Run("INFO answered no text".into()));
                };
                if String::from_utf8_lossy(&info).contains("master_link_status:up") {
                    break;
                }
                if Instant::now() > deadline {
                    return Err(Failure::Run("the Redis replica did not link up".into()));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            (address, vec![primary, replica], None)
        }
        System::Tandem | System::TandemProxy => {
            let (cluster, primary) =
                start_tandem(&dir.join(system.name()), 2, Safety::DEFAULT, db_mib)?;
            let address = if system == System::TandemProxy {
                let started = tandem_proxy::Proxy::start(tandem_proxy::ProxyConfig {
                    cluster: cluster.addresses(),
                    listen: "127.0.0.1:0".parse().expect("an address"),
                    group: 0,
                    deadline: Duration::from_secs(5),
                    read_consistency: tandem_replication::ReadConsistency::Linearizable,
                    credentials: None,
                    tls: None,
                    requirepass: None,
                    users: Default::default(),
                    threads: 1,
                })
                .map_err(|err| Failure::Run(format!("the proxy: {err}")))?;
                let address = started.local_addr();
                proxy = Some(started);
                address
            } else {
                primary
            };
            (address, Vec::new(), Some(cluster))
        }
    };
    let target = Target::load(address, system == System::RedisWait, tls)?;
    fill(&target)?;
    Ok(Running {
        system,
        target,
        _redis: redis,
        _cluster: cluster,
        _proxy: proxy,
    })
}

fn path_text(path: &Path) -> String {
    path.display().to_string()
}

/// Sets every key of the keyspace, so that GET reads keys that exist.
fn fill(target: &Target) -> Result<(), Failure> {
    let mut conn = Conn::open_with(target.address, target.tls.as_ref())?;
    let mut fill = Vec::new();
    for key in 0..KEYSPACE {
        command(
            &mut fill,
            &[b"SET", format!("key:{key}").as_bytes(), b"xxx"],
        );
        if key % 1000 == 999 {
            conn.send(&fill)?;
            fill.clear();
            for _ in 0..1000 {
                conn.read_reply()?;
            }
        }
    }
    Ok(())
}

/// One (system, test, pipeline) over every round.
#[derive(Debug, Serialize)]
pub struct Run {
    pub system: &'static str,
    pub test: &'static str,
    pub pipeline: usize,
    pub clients: usize,
    /// Median over the rounds.
    pub ops_per_s: f64,
    pub p50_ms: f64,
    pub p99_ms: f64,
    /// Error replies seen (a command a system does not serve, a refusal).
    pub errors: u64,
}

#[derive(Debug, Serialize)]
struct Report {
    runs: Vec<Run>,
}

pub fn run(args: &RespArgs) -> Result<(), Failure> {
    let systems: Vec<System> = args.systems.0.clone();
    let clients = args.clients as usize;
    let dir = args.dir.clone();
    if dir.exists() {
        std::fs::remove_dir_all(&dir)
            .map_err(|err| Failure::Run(format!("cannot clear {}: {err}", dir.display())))?;
    }
    let mut running = Vec::new();
    for &system in &systems {
        eprintln!("starting {}", system.name());
        running.push(start(system, &dir, args.db_mib as usize)?);
    }
    let slice = Duration::from_secs_f64(args.seconds);
    let mut runs = Vec::new();
    for &test in &args.tests.0 {
        for &pipeline in &args.pipelines.0 {
            let mut tallies: Vec<Tally> = running.iter().map(|_| Tally::default()).collect();
            for round in 0..args.rounds {
                for (index, system) in running.iter().enumerate() {
                    let seed = (round as u64) << 32 | index as u64;
                    let measured = run_slice(&system.target, test, pipeline, clients, slice, seed)?;
                    tallies[index].add(measured)?;
                }
            }
            for (index, system) in running.iter().enumerate() {
                let run = Run {
                    system: system.system.name(),
                    test: test.name(),
                    pipeline,
                    clients,
                    ops_per_s: tallies[index].ops_per_s(),
                    p50_ms: tallies[index].latency_ms(0.5),
                    p99_ms: tallies[index].latency_ms(0.99),
                    errors: tallies[index].errors,
                };
                if !args.json {
                    eprintln!(
                        "{:<8} -P {:<3} {:<11} {:>10.0} ops/s  p50 {:>7.3} ms  p99 {:>7.3} ms{}",
                        run.test,
                        run.pipeline,
                        run.system,
                        run.ops_per_s,
                        run.p50_ms,
                        run.p99_ms,
                        if run.errors > 0 {
                            format!("  ({} errors)", run.errors)
                        } else {
                            String::new()
                        }
                    );
                }
                runs.push(run);
            }
        }
    }
    if args.json {
        let report = Report { runs };
        println!(
            "{}",
            serde_json::to_string_pretty(&report).expect("a report serializes")
        );
    } else {
        print_ratios(&runs);
        print_tls_ratios(&runs);
    }
    Ok(())
}

/// Each (test, pipeline depth) the runs measured, in the order they ran.
fn test_pipelines(runs: &[Run]) -> Vec<(&'static str, usize)> {
    let mut keys: Vec<(&str, usize)> = runs.iter().map(|r| (r.test, r.pipeline)).collect();
    keys.dedup();
    keys
}

/// `system`'s throughput on `test` at `pipeline`, if it ran.
fn rate_of(runs: &[Run], test: &str, pipeline: usize, system: &str) -> Option<f64> {
    runs.iter()
        .find(|r| r.test == test && r.pipeline == pipeline && r.system == system)
        .map(|r| r.ops_per_s)
}

fn rate_cell(rate: Option<f64>) -> String {
    rate.map_or("-".to_string(), |v| format!("{v:.0}"))
}

/// What TLS costs each system that ran with and without it: throughput with TLS over
/// throughput without, per test and pipeline depth.
fn print_tls_ratios(runs: &[Run]) {
    let has = |system: &str| runs.iter().any(|r| r.system == system);
    if !has("tandem-tls") && !has("redis-tls") {
        return;
    }
    println!(
        "{:<8} {:>3}  {:>12} {:>12} {:>12} {:>12}  {:>11} {:>11}",
        "test", "-P", "tandem", "tandem-tls", "redis", "redis-tls", "tandem tls", "redis tls"
    );
    for (test, pipeline) in test_pipelines(runs) {
        let rate = |system: &str| rate_of(runs, test, pipeline, system);
        let (t, tt) = (rate("tandem"), rate("tandem-tls"));
        let (r, rt) = (rate("redis"), rate("redis-tls"));
        println!(
            "{test:<8} {pipeline:>3}  {:>12} {:>12} {:>12} {:>12}  {:>11} {:>11}",
            rate_cell(t),
            rate_cell(tt),
            rate_cell(r),
            rate_cell(rt),
            ratio_cell(tt, t),
            ratio_cell(rt, r)
        );
    }
}

/// tandem's throughput over each other system's, per test and pipeline depth.
fn print_ratios(runs: &[Run]) {
    println!(
        "{:<8} {:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
        "test", "-P", "tandem", "redis", "redis-wait", "/redis", "/wait"
    );
    for (test, pipeline) in test_pipelines(runs) {
        let rate = |system: &str| rate_of(runs, test, pipeline, system);
        let (t, r, w) = (rate("tandem"), rate("redis"), rate("redis-wait"));
        println!(
            "{test:<8} {pipeline:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
            rate_cell(t),
            rate_cell(r),
            rate_cell(w),
            ratio_cell(t, r),
            ratio_cell(t, w)
        );
    }
}
