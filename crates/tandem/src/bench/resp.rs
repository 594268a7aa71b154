//! `tandem bench resp`: the same Redis commands against a tandem group (2-safe, one backup),
//! a standalone `redis-server`, and a `redis-server` with one replica where every write is
//! followed by `WAIT 1 0` (Redis's closest thing to 2-safe), interleaved in short slices.
//!
//! The client, its operations and its latencies are `resp_load`'s, shared with
//! `bench durability`. Throughput is the median of a system's slice rates.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use serde::Serialize;
use tandem_redis::resp::Value;
use tandem_replication::Safety;

use crate::Failure;
use crate::bench::resp_load::{
    Conn, KEYSPACE, RedisProcess, Tally, Target, command, ratio_cell, run_slice, start_redis,
    start_tandem,
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
}

impl System {
    fn name(self) -> &'static str {
        match self {
            System::Tandem => "tandem",
            System::TandemProxy => "tandem-proxy",
            System::Redis => "redis",
            System::RedisWait => "redis-wait",
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
    let (address, redis, cluster) = match system {
        System::Redis => {
            let (process, address) = start_redis(None, dir, &NO_PERSISTENCE)?;
            (address, vec![process], None)
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
    let target = Target::load(address, system == System::RedisWait)?;
    fill(target.address)?;
    Ok(Running {
        system,
        target,
        _redis: redis,
        _cluster: cluster,
        _proxy: proxy,
    })
}

/// Sets every key of the keyspace, so that GET reads keys that exist.
fn fill(address: SocketAddr) -> Result<(), Failure> {
    let mut conn = Conn::open(address)?;
    let mut fill = Vec::new();
    for key in 0..KEYSPACE {
        command(
            &mut fill,
            &[b"SET", format!("key:{key}").as_bytes(), b"xxx"],
        );
        if key % 1000 == 999 {
            conn.writer
                .write_all(&fill)
                .map_err(|err| Failure::Run(format!("filling: {err}")))?;
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
    }
    Ok(())
}

/// tandem's throughput over each other system's, per test and pipeline depth.
fn print_ratios(runs: &[Run]) {
    println!(
        "{:<8} {:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
        "test", "-P", "tandem", "redis", "redis-wait", "/redis", "/wait"
    );
    let mut keys: Vec<(&str, usize)> = runs.iter().map(|r| (r.test, r.pipeline)).collect();
    keys.dedup();
    for (test, pipeline) in keys {
        let rate = |system: &str| {
            runs.iter()
                .find(|r| r.test == test && r.pipeline == pipeline && r.system == system)
                .map(|r| r.ops_per_s)
        };
        let cell = |v: Option<f64>| v.map_or("-".to_string(), |v| format!("{v:.0}"));
        let (t, r, w) = (rate("tandem"), rate("redis"), rate("redis-wait"));
        println!(
            "{test:<8} {pipeline:>3}  {:>12} {:>12} {:>12}  {:>9} {:>9}",
            cell(t),
            cell(r),
            cell(w),
            ratio_cell(t, r),
            ratio_cell(t, w)
        );
    }
}
