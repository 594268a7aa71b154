//! `tandem demo` and `tandem bench failover`: kill the primary of a 3-node cluster under a
//! Debit-Credit load run through the client stub, and account for every call. `tandem demo
//! --client redis` (`redis.rs`) injects the same faults under redis-py applications that go
//! through `tandem proxy`.
//!
//! How calls are accounted for exactly: client stub `c` of `C` owns the accounts `c + C·j`
//! (nobody else writes them), and every call moves one unit into one of them. So an
//! account's balance is the number of its calls that committed, and each reply (the account's
//! new balance) must be one more than the replies that client saw for it before: a reply that
//! skips a number shows a lost commit, one that repeats a number a duplicate. After the load,
//! a call of zero units reads each account: acknowledged calls minus the balance found is the
//! number of lost commits; a negative difference counts duplicates. A call that ends in a
//! deadline error is a client-visible error; it is then resumed with its seq until it has a
//! definite outcome, so the accounting stays exact.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use serde::Serialize;
use serde_json::Value;
use tandem_client::{CallError, Client, ClientConfig, Outcome};
use tandem_store::Rng;
use tandem_workloads::debit_credit::{DEBIT_CREDIT, DebitCredit, DebitCreditConfig};

use crate::Failure;
use crate::bench::median;
use crate::cli::{DemoArgs, DemoClient, FailoverArgs};
use crate::local::{LocalCluster, Options, Settled};
use crate::timeline::{self, Timeline};

mod redis;

/// Accounts each client owns (fewer in a database too small for them all).
const ACCOUNTS_PER_CLIENT: usize = 64;
/// The width of a throughput bucket.
const BUCKET_MS: u32 = 10;

/// What one failover run measured.
#[derive(Clone, Debug, Serialize)]
pub struct FailoverRun {
    /// From the last reply of the old primary to the first of the new, as the clients saw it.
    pub gap_ms: Option<f64>,
    /// From the kill to the first reply of the new primary.
    pub kill_to_first_reply_ms: Option<f64>,
    pub acknowledged: u64,
    pub found: u64,
    pub lost: u64,
    pub duplicates: u64,
    /// Replies whose balance did not follow the client's own count (a lost commit or a
    /// duplicate seen as it happened).
    pub reply_mismatches: u64,
    pub client_errors: u64,
    /// Calls sent more than once by the stub (retries across the failover); unknown (null)
    /// with Redis clients, whose proxies retry out of their sight.
    pub calls_retried: Option<u64>,
    /// The longest call, retries included, as its client waited for it.
    pub call_ms_max: f64,
    pub consistent: bool,
    /// Every consistency finding; empty when consistent.
    pub findings: Vec<String>,
    pub false_suspicions: u64,
    pub fault: Fault,
    /// The group's safety rule.
    pub safety: String,
    /// A power loss under a rule that acknowledges from memory: commits the logs had not
    /// written may be lost, which is counted but breaks no promise (`durable` makes one).
    pub loss_allowed: bool,
    /// The node the fault hit.
    pub killed: u32,
    /// Replies from the faulty old primary, in a view older than the new primary's, after the
    /// new primary's first reply: must be 0. (The old node may legitimately serve again in a
    /// newer view: it rejoins in milliseconds and may be promoted again.) Unknown (null)
    /// with Redis clients, whose replies do not say which node gave them.
    pub stale_replies: Option<u64>,
    /// The longest time without any reply after the fault (a killed backup's stall).
    pub stall_ms: Option<f64>,
    pub new_primary: Option<u32>,
    pub view_before: u64,
    pub view_after: u64,
    /// Views committed from the settled start to the settled end: the fault's own (a
    /// promotion; a node that comes back rejoining as a spare and then as a backup) and any
    /// that false suspicions caused.
    pub view_changes: u64,
    /// How long a primary served a view without a backup, from the settled start to the
    /// settled end, summed over the nodes that lived through both (the time a second crash
    /// would have lost what one node alone held).
    pub alone_ms: f64,
    /// Replies per 10 ms bucket from the start of the load.
    pub throughput_per_10ms: Vec<u64>,
    pub kill_ms: f64,
    /// The old primary's last reply and the new primary's first (ms from the load's start).
    pub last_old_ms: Option<f64>,
    pub first_new_ms: Option<f64>,
    /// What only a run with Redis clients counts.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub redis: Option<redis::RedisCounts>,
}

/// The failure the demo injects halfway through the load.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fault {
    /// SIGKILL of the primary: a machine failure.
    KillPrimary,
    /// SIGKILL of a backup: commits must keep flowing once a view change removes it.
    KillBackup,
    /// SIGSTOP of the primary for `fault_ms`, then SIGCONT: a partitioned old primary. It must
    /// not have a single call acknowledged once the new primary answered, and it rejoins.
    PausePrimary,
    /// SIGKILL of the primary, then a restart `fault_ms` later: it rejoins and catches up.
    RestartPrimary,
    /// The primary cut off the network for `fault_ms` (every packet it sends dropped), then
    /// let back on: it keeps running, so it must not have a single call acknowledged once the
    /// new primary answered, and it rejoins.
    IsolatePrimary,
    /// SIGKILL of every node at once, then all restarted `fault_ms` later: each rebuilds
    /// what its write-ahead log holds, the backup whose log holds the most is promoted, and
    /// the clients carry on. Under `durable` nothing acknowledged may be lost; a rule that
    /// acknowledges from memory may lose what the logs had not written.
    PowerLoss,
}

/// How long a paused primary stays stopped, an isolated one cut off, or a killed one down
/// before its restart, unless `--fault-ms` says otherwise.
pub const FAULT_MS_DEFAULT: u64 = 300;

impl Fault {
    pub fn parse(text: &str) -> Result<Fault, String> {
        match text {
            "kill-primary" => Ok(Fault::KillPrimary),
            "kill-backup" => Ok(Fault::KillBackup),
            "pause-primary" => Ok(Fault::PausePrimary),
            "restart-primary" => Ok(Fault::RestartPrimary),
            "isolate-primary" => Ok(Fault::IsolatePrimary),
            "power-loss" => Ok(Fault::PowerLoss),
            _ => Err(
                "accepted values: kill-primary, kill-backup, pause-primary, \
                 restart-primary, isolate-primary, power-loss"
                    .to_string(),
            ),
        }
    }

    /// The safety rule a run takes unless told otherwise: `durable` for a power loss, which
    /// the memory rules do not promise to survive.
    pub fn safety_default(self) -> tandem_replication::Safety {
        match self {
            Fault::PowerLoss => {
                tandem_replication::Safety::Durable(tandem_replication::AckCount::All)
            }
            _ => tandem_replication::Safety::DEFAULT,
        }
    }

    fn hits_primary(self) -> bool {
        self != Fault::KillBackup
    }

    /// Whether the failed node is back (and must match the others) at the end.
    fn comes_back(self) -> bool {
        matches!(
            self,
            Fault::PausePrimary | Fault::RestartPrimary | Fault::IsolatePrimary | Fault::PowerLoss
        )
    }
}

/// What `tandem demo` runs: the load, the kill and the accounting.
struct Scenario {
    fault: Fault,
    suspect_ticks: u64,
    tail_records_max: u64,
    clients: u32,
    seconds: f64,
    db_mib: usize,
    dir: PathBuf,
    quiet: bool,
    safety: tandem_replication::Safety,
    fsync: tandem_node::SyncPolicy,
    checkpoint_mib: u64,
    /// How long the fault lasts, where it ends (`Fault::comes_back`).
    fault_ms: u64,
    /// Peer links (and the RESP ports) run TLS, with certificates made for the cluster.
    tls: bool,
}

/// `tandem demo`.
pub fn demo(args: &DemoArgs) -> Result<(), Failure> {
    if let Some(path) = &args.timeline {
        let extension = path.extension().and_then(|ext| ext.to_str());
        if !matches!(extension, Some("png" | "svg")) {
            return Err(Failure::Usage(format!(
                "--timeline {}: the file name must end in .png or .svg",
                path.display()
            )));
        }
    }
    if args.client == DemoClient::Stub && args.proxies.is_some() {
        return Err(Failure::Usage(
            "--proxies: only Redis clients go through proxies; add --client redis, or drop \
             --proxies"
                .to_string(),
        ));
    }
    if args.fault == Fault::IsolatePrimary
        && let Some(why) = crate::local::isolation_unavailable()
    {
        return Err(Failure::Usage(format!(
            "--fault isolate-primary cannot run here: {why}"
        )));
    }
    let scenario = Scenario {
        fault: args.fault,
        suspect_ticks: args.suspect_ticks,
        tail_records_max: args.tail_records_max,
        clients: args.clients,
        seconds: args.seconds,
        db_mib: args.db_mib as usize,
        dir: args.dir.clone(),
        quiet: args.json,
        safety: args.safety.unwrap_or(args.fault.safety_default()),
        fsync: args.fsync,
        checkpoint_mib: args.checkpoint_mib,
        fault_ms: args.fault_ms,
        tls: args.tls,
    };
    let run = match args.client {
        DemoClient::Stub => scenario.run()?,
        DemoClient::Redis => redis::run(&scenario, args.proxies.unwrap_or(redis::PROXIES_DEFAULT))?,
    };
    let chart = args
        .timeline
        .clone()
        .unwrap_or_else(|| args.dir.join("timeline.png"));
    timeline::render(&timeline_of(&run), &chart).map_err(Failure::Usage)?;
    if args.json {
        let mut value = serde_json::to_value(&run).expect("serializable");
        value["timeline"] = Value::String(chart.display().to_string());
        println!("{value}");
    } else {
        print_report(&run, &chart);
    }
    verdict(&run)
}

/// `tandem bench failover --runs N`.
pub fn bench_failover(args: &FailoverArgs) -> Result<(), Failure> {
    let _noise = if args.noise {
        Some(Noise::start()?)
    } else {
        None
    };
    let mut runs = Vec::new();
    for index in 0..args.runs {
        let scenario = Scenario {
            fault: Fault::KillPrimary,
            suspect_ticks: crate::local::Options::new(3).suspect_ticks,
            tail_records_max: crate::local::Options::new(3).tail_records_max,
            clients: args.clients,
            seconds: args.seconds,
            db_mib: args.db_mib as usize,
            // Each run's nodes keep their logs in a directory of their own, so that a run that
            // went wrong can be read afterwards.
            dir: args.dir.join(format!("run-{}", index + 1)),
            quiet: true,
            safety: tandem_replication::Safety::DEFAULT,
            fsync: crate::local::Options::new(3).fsync,
            checkpoint_mib: crate::local::Options::new(3).checkpoint_mib,
            fault_ms: FAULT_MS_DEFAULT,
            tls: args.tls,
        };
        let run = scenario.run()?;
        if !args.json {
            eprintln!(
                "run {}/{}: gap {} ms, lost {}, duplicates {}, client errors {}, consistent {}, \
                 false suspicions {}, view changes {}, primary alone {:.1} ms",
                index + 1,
                args.runs,
                run.gap_ms.map_or("-".into(), |gap| format!("{gap:.2}")),
                run.lost,
                run.duplicates,
                run.client_errors,
                run.consistent,
                run.false_suspicions,
                run.view_changes,
                run.alone_ms
            );
        }
        runs.push(run);
    }
    let gaps: Vec<f64> = runs.iter().filter_map(|run| run.gap_ms).collect();
    let gap_p50 = (!gaps.is_empty()).then(|| median(&gaps));
    let gap_max = gaps.iter().copied().fold(None, |max: Option<f64>, gap| {
        Some(max.map_or(gap, |max| max.max(gap)))
    });
    let alone_max = runs.iter().map(|run| run.alone_ms).fold(0.0, f64::max);
    if args.json {
        let runs: Vec<Value> = runs
            .iter()
            .map(|run| {
                serde_json::json!({
                    "gap_ms": run.gap_ms,
                    "lost": run.lost,
                    "duplicates": run.duplicates,
                    "client_errors": run.client_errors,
                    "consistent": run.consistent,
                    "false_suspicions": run.false_suspicions,
                    "view_changes": run.view_changes,
                    "alone_ms": run.alone_ms,
                    "kill_to_first_reply_ms": run.kill_to_first_reply_ms,
                    "call_ms_max": run.call_ms_max,
                    "acknowledged": run.acknowledged,
                    "findings": run.findings,
                })
            })
            .collect();
        println!(
            "{}",
            serde_json::json!({
                "runs": runs,
                "gap_ms_p50": gap_p50,
                "gap_ms_max": gap_max,
                "alone_ms_max": alone_max,
                "noise": args.noise,
            })
        );
    } else {
        println!(
            "{} runs: failover gap p50 {} ms, max {} ms; lost {}, duplicates {}, client errors \
             {}, inconsistent runs {}, false suspicions {}, view changes {}",
            runs.len(),
            gap_p50.map_or("-".into(), |gap| format!("{gap:.2}")),
            gap_max.map_or("-".into(), |gap| format!("{gap:.2}")),
            runs.iter().map(|run| run.lost).sum::<u64>(),
            runs.iter().map(|run| run.duplicates).sum::<u64>(),
            runs.iter().map(|run| run.client_errors).sum::<u64>(),
            runs.iter().filter(|run| !run.consistent).count(),
            runs.iter().map(|run| run.false_suspicions).sum::<u64>(),
            runs.iter().map(|run| run.view_changes).sum::<u64>(),
        );
    }
    for run in &runs {
        verdict(run)?;
    }
    Ok(())
}

/// A run that lost or duplicated a commit, or ended inconsistent, fails the command; so does
/// a client error that a proxy let through to a Redis client.
fn verdict(run: &FailoverRun) -> Result<(), Failure> {
    let lost = if run.loss_allowed { 0 } else { run.lost };
    if lost > 0 || run.duplicates > 0 || !run.consistent {
        return Err(Failure::Run(format!(
            "the failover broke a promise: lost {}, duplicates {}, findings: {}",
            run.lost,
            run.duplicates,
            run.findings.join("; ")
        )));
    }
    if let Some(counts) = &run.redis
        && counts.proxies > 0
        && run.client_errors > 0
    {
        return Err(Failure::Run(format!(
            "{} Redis clients saw {} errors through the proxies (must be 0), e.g. {}",
            counts.clients,
            run.client_errors,
            counts.errors.first().map_or("-", String::as_str)
        )));
    }
    Ok(())
}

/// One client stub's record of its calls.
#[derive(Debug, Default)]
struct ClientLog {
    /// (ms since the load started, the node that answered).
    /// (ms since the start, node, the node's view) of each reply.
    replies: Vec<(f64, u32, u64)>,
    /// Committed calls per owned account.
    acknowledged: BTreeMap<u32, u64>,
    mismatches: u64,
    errors: u64,
    retried: u64,
    call_ms_max: f64,
    error_last: Option<String>,
}

impl Scenario {
    /// Whether a lost commit breaks no promise: a power loss under a rule that acknowledges
    /// from memory.
    fn loss_allowed(&self) -> bool {
        self.fault == Fault::PowerLoss
            && !matches!(self.safety, tandem_replication::Safety::Durable(_))
    }

    fn say(&self, text: &str) {
        if !self.quiet {
            eprintln!("{text}");
        }
    }

    fn run(&self) -> Result<FailoverRun, Failure> {
        let layout = DebitCredit::new(self.db_mib << 20, &DebitCreditConfig::default())
            .map_err(|err| Failure::Usage(format!("--db-mib {}: {err}", self.db_mib)))?;
        let accounts = layout.accounts.count();
        let tellers = layout.tellers.count();
        let tellers_per_branch = DebitCreditConfig::default().tellers_per_branch;
        if accounts < self.clients as usize {
            return Err(Failure::Usage(format!(
                "--db-mib {}: {accounts} accounts cannot give each of {} clients its own",
                self.db_mib, self.clients
            )));
        }
        self.say(&format!(
            "starting 3 nodes under {} ({} MiB Debit-Credit each, {})",
            self.dir.display(),
            self.db_mib,
            self.safety
        ));
        let mut options = Options::new(3).with_db_mib(self.db_mib);
        options.safety = self.safety;
        options.fsync = self.fsync;
        options.checkpoint_mib = self.checkpoint_mib;
        options.suspect_ticks = self.suspect_ticks;
        options.tail_records_max = self.tail_records_max;
        options.tls = self.tls;
        let (mut cluster, settled) =
            LocalCluster::start_settled(&self.dir, &options, Duration::from_secs(120))?;
        self.say(&format!(
            "node {} is primary of view {}; {} clients start calling",
            settled.primary, settled.view, self.clients
        ));
        let suspicions_start = suspicions(&cluster);
        let alone_start = alone_ms(&cluster);
        let stop = Arc::new(AtomicBool::new(false));
        let started = Instant::now();
        let mut workers = Vec::new();
        for index in 0..self.clients {
            let mut config = ClientConfig::new(cluster.addresses(), 0, u64::from(index) + 1);
            config.deadline = Duration::from_secs(5);
            if self.tls {
                let ca = cluster.dir.join(crate::local::CA_FILE);
                let tls = tandem_client::ClientTls::from_ca_file(&ca)
                    .map_err(|err| Failure::Run(format!("the cluster's CA: {err}")))?;
                config.tls = Some(tls);
            }
            let mut client = Client::new(config)
                .map_err(|err| Failure::Run(format!("client {}: {err}", index + 1)))?;
            let owned: Vec<u32> = (0..ACCOUNTS_PER_CLIENT)
                .map(|j| index as usize + self.clients as usize * j)
                .filter(|&account| account < accounts)
                .map(|account| account as u32)
                .collect();
            let stop = Arc::clone(&stop);
            let seed = u64::from(index) + 1;
            workers.push(thread::spawn(move || {
                let mut log = ClientLog::default();
                let mut rng = Rng::new(seed);
                let mut args = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    let account = owned[rng.below(owned.len() as u64) as usize];
                    let teller = rng.below(tellers as u64) as u32;
                    let branch = teller / tellers_per_branch as u32;
                    DebitCredit::encode_args(&mut args, account, teller, branch, 1);
                    let call_started = Instant::now();
                    let outcome = call_definitely(&mut client, &args, &mut log);
                    let done = Instant::now();
                    log.call_ms_max = log
                        .call_ms_max
                        .max(done.duration_since(call_started).as_secs_f64() * 1000.0);
                    let Some(outcome) = outcome else { continue };
                    if outcome.attempts > 1 {
                        log.retried += 1;
                    }
                    log.replies.push((
                        done.duration_since(started).as_secs_f64() * 1000.0,
                        outcome.node,
                        outcome.view,
                    ));
                    let count = log.acknowledged.entry(account).or_default();
                    *count += 1;
                    if balance_of(&outcome) != Some(*count) {
                        log.mismatches += 1;
                    }
                }
                (client, owned, log)
            }));
        }
        let Injected {
            killed,
            kill_ms,
            suspicions_at_kill,
        } = self.inject(&mut cluster, settled.primary, started)?;
        stop.store(true, Ordering::Relaxed);
        let mut finished = Vec::new();
        for worker in workers {
            finished.push(
                worker
                    .join()
                    .map_err(|_| Failure::Run("a client panicked".into()))?,
            );
        }
        self.say("load stopped; reading every account back through the stub");
        let mut acknowledged = 0;
        let mut found = 0;
        let mut lost = 0;
        let mut duplicates = 0;
        let mut logs = Vec::new();
        for (mut client, owned, mut log) in finished {
            for account in owned {
                // Zero units: the reply is the balance, and nothing changes.
                let mut args = Vec::new();
                DebitCredit::encode_args(&mut args, account, 0, 0, 0);
                let outcome = call_definitely(&mut client, &args, &mut log)
                    .ok_or_else(|| Failure::Run(format!("account {account} cannot be read")))?;
                let balance = balance_of(&outcome).unwrap_or(0);
                let acked = log.acknowledged.get(&account).copied().unwrap_or(0);
                acknowledged += acked;
                found += balance;
                lost += acked.saturating_sub(balance);
                duplicates += balance.saturating_sub(acked);
            }
            logs.push(log);
        }
        let Judged {
            settled_end,
            alone_end,
            mut findings,
            false_suspicions,
        } = self.judge(&mut cluster, killed, &suspicions_start, &suspicions_at_kill)?;
        let replies: Vec<(f64, u32, u64)> = {
            let mut all: Vec<(f64, u32, u64)> = logs
                .iter()
                .flat_map(|log| log.replies.iter().copied())
                .collect();
            all.sort_by(|a, b| a.0.total_cmp(&b.0));
            all
        };
        let hit_primary = self.fault.hits_primary();
        let last_old = replies
            .iter()
            .filter(|(t, node, _)| hit_primary && *node == killed && *t <= kill_ms + 1.0)
            .map(|(t, _, _)| *t)
            .fold(None, |max: Option<f64>, t| {
                Some(max.map_or(t, |max| max.max(t)))
            });
        // After a power loss every node comes back from its disk, and the old primary,
        // whose log may hold the most, may be the new one: any reply in a newer view counts.
        let power_loss = self.fault == Fault::PowerLoss;
        let first_new = replies
            .iter()
            .find(|&&(t, node, view)| {
                hit_primary
                    && t >= kill_ms
                    && (node != killed || (power_loss && view > settled.view))
            })
            .map(|&(t, _, view)| (t, view));
        // The old primary answering in its old view after a newer view answered: two
        // primaries at once.
        let stale_replies = first_new.map_or(0, |(first_new, view_new)| {
            replies
                .iter()
                .filter(|(t, node, view)| *node == killed && *t > first_new && *view < view_new)
                .count() as u64
        });
        if hit_primary && stale_replies > 0 {
            findings.push(format!(
                "the old primary answered {stale_replies} calls in its old view after the new \
                 one answered"
            ));
        }
        let first_new = first_new.map(|(t, _)| t);
        let stall_ms = replies
            .windows(2)
            .filter(|pair| pair[1].0 >= kill_ms)
            .map(|pair| pair[1].0 - pair[0].0.max(kill_ms))
            .fold(None, |max: Option<f64>, gap| {
                Some(max.map_or(gap, |max| max.max(gap)))
            });
        let buckets = ((self.seconds * 1000.0) / f64::from(BUCKET_MS)).ceil() as usize + 1;
        let mut throughput = vec![0u64; buckets];
        for (t, _, _) in &replies {
            let bucket = (*t / f64::from(BUCKET_MS)) as usize;
            if let Some(count) = throughput.get_mut(bucket) {
                *count += 1;
            }
        }
        let reply_mismatches: u64 = logs.iter().map(|log| log.mismatches).sum();
        if reply_mismatches > 0 {
            findings.push(format!(
                "{reply_mismatches} replies did not follow their account"
            ));
        }
        if lost > 0 || duplicates > 0 {
            findings.push(format!("lost {lost}, duplicates {duplicates}"));
        }
        if let Some(error) = logs.iter().find_map(|log| log.error_last.clone()) {
            self.say(&format!("a client error: {error}"));
        }
        let run = FailoverRun {
            gap_ms: last_old.zip(first_new).map(|(old, new)| new - old),
            kill_to_first_reply_ms: first_new.map(|new| new - kill_ms),
            acknowledged,
            found,
            lost,
            duplicates,
            reply_mismatches,
            client_errors: logs.iter().map(|log| log.errors).sum(),
            calls_retried: Some(logs.iter().map(|log| log.retried).sum()),
            call_ms_max: logs.iter().map(|log| log.call_ms_max).fold(0.0, f64::max),
            consistent: findings.is_empty(),
            findings,
            false_suspicions,
            fault: self.fault,
            safety: self.safety.to_string(),
            loss_allowed: self.loss_allowed(),
            killed,
            stale_replies: Some(stale_replies),
            stall_ms,
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
            last_old_ms: last_old,
            first_new_ms: first_new,
            redis: None,
        };
        Ok(run)
    }
}

/// What [`Scenario::inject`] did.
pub(crate) struct Injected {
    /// The node the fault hit.
    pub killed: u32,
    /// When, in ms since the load started.
    pub kill_ms: f64,
    /// Each node's suspicions just before the fault, by suspected peer.
    pub suspicions_at_kill: BTreeMap<u32, BTreeMap<u32, u64>>,
}

/// What [`Scenario::judge`] found once the load stopped.
pub(crate) struct Judged {
    pub settled_end: Settled,
    pub alone_end: BTreeMap<u32, f64>,
    /// Replicas that differ or fail their consistency check.
    pub findings: Vec<String>,
    pub false_suspicions: u64,
}

impl Scenario {
    /// Lets the load run for half its time, applies the fault, and returns at the end of the
    /// load's time. `started` is when the load started.
    pub(crate) fn inject(
        &self,
        cluster: &mut LocalCluster,
        primary_settled: u32,
        started: Instant,
    ) -> Result<Injected, Failure> {
        let half = Duration::from_secs_f64(self.seconds / 2.0);
        thread::sleep(half);
        let suspicions_at_kill = suspicions(cluster);
        // The primary now, which a false suspicion may have moved since the cluster settled.
        let primary = current_primary(cluster).unwrap_or(primary_settled);
        let killed = if self.fault.hits_primary() {
            primary
        } else {
            cluster
                .nodes
                .iter()
                .map(|node| node.entry.id)
                .find(|&id| id != primary)
                .expect("three nodes")
        };
        let mut kill_ms = started.elapsed().as_secs_f64() * 1000.0;
        match self.fault {
            Fault::PausePrimary => cluster.pause(killed, true)?,
            Fault::IsolatePrimary => {
                cluster.isolate(killed, true)?;
                // The cut takes hold with its last rule, after the iptables commands that
                // prepared it.
                kill_ms = started.elapsed().as_secs_f64() * 1000.0;
            }
            Fault::PowerLoss => cluster.kill_all(),
            _ => cluster.kill(killed),
        }
        let killed_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        let what = match self.fault {
            Fault::KillPrimary | Fault::RestartPrimary => "killed the primary with SIGKILL",
            Fault::KillBackup => "killed a backup with SIGKILL",
            Fault::PausePrimary => "paused the primary with SIGSTOP",
            Fault::IsolatePrimary => "cut the primary off the network",
            Fault::PowerLoss => "killed every node at once with SIGKILL; the primary was",
        };
        self.say(&format!(
            "{what}: node {killed}, at {kill_ms:.0} ms ({}.{:06})",
            killed_at.as_secs(),
            killed_at.subsec_micros()
        ));
        if self.fault.comes_back() {
            let fault_started = Instant::now();
            let pause = Duration::from_millis(self.fault_ms).min(half);
            thread::sleep(pause);
            if matches!(self.fault, Fault::PausePrimary | Fault::IsolatePrimary) {
                self.hold_until_replaced(cluster, killed, fault_started + half);
            }
            let pause = fault_started.elapsed().min(half);
            if self.fault == Fault::PausePrimary {
                cluster.pause(killed, false)?;
                self.say(&format!(
                    "node {killed} continued (SIGCONT) after {} ms",
                    pause.as_millis()
                ));
            } else if self.fault == Fault::IsolatePrimary {
                cluster.isolate(killed, false)?;
                self.say(&format!(
                    "node {killed} is back on the network after {} ms",
                    pause.as_millis()
                ));
            } else if self.fault == Fault::PowerLoss {
                cluster.restart_all()?;
                self.say("every node restarted from its disk");
            } else {
                cluster.restart(killed)?;
                self.say(&format!("node {killed} restarted"));
            }
            thread::sleep(half - pause);
        } else {
            thread::sleep(half);
        }
        Ok(Injected {
            killed,
            kill_ms,
            suspicions_at_kill,
        })
    }

    /// Keeps a paused or cut-off primary so until another node answers as primary, or until
    /// `until`: on a machine so starved that the group could not replace it within
    /// `--fault-ms`, it would come back still primary, and the demo would show no failover.
    fn hold_until_replaced(&self, cluster: &LocalCluster, primary: u32, until: Instant) {
        let replaced = || {
            cluster.nodes.iter().any(|node| {
                node.entry.id != primary
                    && node
                        .status()
                        .is_ok_and(|status| status["cluster"]["role"] == "primary")
            })
        };
        let mut said = false;
        while !replaced() && Instant::now() < until {
            if !said {
                self.say(&format!(
                    "node {primary} is still the primary after {} ms: the fault lasts until \
                     another node takes over",
                    self.fault_ms
                ));
                said = true;
            }
            thread::sleep(Duration::from_millis(10));
        }
    }

    /// Once the load stopped: waits until the cluster settles, then compares the replicas and
    /// counts the false suspicions.
    pub(crate) fn judge(
        &self,
        cluster: &mut LocalCluster,
        killed: u32,
        suspicions_start: &BTreeMap<u32, BTreeMap<u32, u64>>,
        suspicions_at_kill: &BTreeMap<u32, BTreeMap<u32, u64>>,
    ) -> Result<Judged, Failure> {
        // A node that came back rejoins as a spare and catches up; it may take a reload.
        let settled_end = cluster.wait_settled(Duration::from_secs(60))?;
        // Suspicions are counted before the checksums: a checksum pauses a node's thread
        // for tens of milliseconds, long enough to be suspected.
        let suspicions_end = suspicions(cluster);
        let alone_end = alone_ms(cluster);
        let gone = if self.fault.comes_back() {
            None
        } else {
            Some(killed)
        };
        // A node that a false suspicion moved out of the view has no checksum to give, or is
        // still catching up: the cluster settles again and every replica is read again, a few
        // times at most.
        let mut findings = check_replicas(cluster, gone);
        for _ in 0..CHECK_RETRIES {
            if !findings.iter().all(|finding| unsettled(finding)) || findings.is_empty() {
                break;
            }
            cluster.wait_settled(Duration::from_secs(60))?;
            findings = check_replicas(cluster, gone);
        }
        let false_suspicions = false_suspicions(
            suspicions_start,
            suspicions_at_kill,
            &suspicions_end,
            killed,
        );
        Ok(Judged {
            settled_end,
            alone_end,
            findings,
            false_suspicions,
        })
    }
}

/// Another process that keeps one core busy (`tandem burn`) until dropped.
struct Noise {
    child: std::process::Child,
}

impl Noise {
    fn start() -> Result<Noise, Failure> {
        let exe = std::env::current_exe()
            .map_err(|err| Failure::Run(format!("--noise: cannot find myself: {err}")))?;
        let child = std::process::Command::new(exe)
            .arg("burn")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .map_err(|err| Failure::Run(format!("--noise: cannot start the noise: {err}")))?;
        Ok(Noise { child })
    }
}

impl Drop for Noise {
    fn drop(&mut self) {
        // Closing its stdin ends it too, should the kill fail.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// How often the replicas are read again when a node had no checksum to give.
const CHECK_RETRIES: u32 = 3;
/// The finding of a node without a role (out of the view) when its checksum was asked.
const NO_CHECKSUM: &str = "gave no checksum";
/// The finding of two replicas read at different LSNs.
const OTHER_LSN: &str = "is at LSN";

/// A finding that says the cluster moved while it was read (a false suspicion took a node out
/// of the view, or it was still catching up), not that two replicas disagree.
fn unsettled(finding: &str) -> bool {
    finding.ends_with(NO_CHECKSUM) || finding.contains(OTHER_LSN)
}

/// How often a call that ended in a deadline error is resumed before the demo gives up on
/// the cluster (6 × the 5 s deadline).
const RESUMES_MAX: u32 = 6;

/// Calls until the outcome is definite: a deadline error counts as a client-visible error,
/// and the same call (same seq) is resumed. `None` only if the call was refused.
fn call_definitely(client: &mut Client, args: &[u8], log: &mut ClientLog) -> Option<Outcome> {
    let mut result = client.call(DEBIT_CREDIT.0, args, None);
    let mut resumes = 0;
    loop {
        match result {
            Ok(outcome) => return Some(outcome),
            Err(CallError::Deadline { .. }) if resumes < RESUMES_MAX => {
                log.errors += 1;
                log.error_last = Some(format!("{}", result.as_ref().unwrap_err()));
                resumes += 1;
                result = client.resume()?;
            }
            Err(err) => {
                log.errors += 1;
                log.error_last = Some(err.to_string());
                return None;
            }
        }
    }
}

/// The account balance a Debit-Credit reply carries.
fn balance_of(outcome: &Outcome) -> Option<u64> {
    let bytes: [u8; 4] = outcome.body.get(..4)?.try_into().ok()?;
    u64::try_from(i32::from_le_bytes(bytes)).ok()
}

/// The node that says it is primary in the highest view.
fn current_primary(cluster: &LocalCluster) -> Option<u32> {
    cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let status = node.status().ok()?;
            (status["cluster"]["role"] == "primary").then(|| {
                (
                    status["cluster"]["view"].as_u64().unwrap_or(0),
                    node.entry.id,
                )
            })
        })
        .max()
        .map(|(_, id)| id)
}

/// Each live node's suspicions so far, by suspected peer.
/// Each node's time as primary of a view without a backup, in milliseconds since it started.
fn alone_ms(cluster: &LocalCluster) -> BTreeMap<u32, f64> {
    cluster
        .nodes
        .iter()
        .filter_map(|node| {
            let status = node.status().ok()?;
            Some((node.entry.id, status["cluster"]["alone_ms"].as_f64()?))
        })
        .collect()
}

fn suspicions(cluster: &LocalCluster) -> BTreeMap<u32, BTreeMap<u32, u64>> {
    let mut all = BTreeMap::new();
    for node in &cluster.nodes {
        let Ok(status) = node.status() else { continue };
        let mut by_peer = BTreeMap::new();
        if let Some(map) = status["cluster"]["suspected"].as_object() {
            for (peer, count) in map {
                if let (Ok(peer), Some(count)) = (peer.parse::<u32>(), count.as_u64()) {
                    by_peer.insert(peer, count);
                }
            }
        }
        all.insert(node.entry.id, by_peer);
    }
    all
}

/// Suspicions of a node that was alive: every one before the kill, and after it every one
/// of a node other than the killed one.
fn false_suspicions(
    start: &BTreeMap<u32, BTreeMap<u32, u64>>,
    at_kill: &BTreeMap<u32, BTreeMap<u32, u64>>,
    end: &BTreeMap<u32, BTreeMap<u32, u64>>,
    killed: u32,
) -> u64 {
    let count = |map: &BTreeMap<u32, BTreeMap<u32, u64>>, node: u32, peer: u32| {
        map.get(&node)
            .and_then(|peers| peers.get(&peer))
            .copied()
            .unwrap_or(0)
    };
    let mut total = 0;
    for (&node, peers) in at_kill {
        for &peer in peers.keys() {
            total += count(at_kill, node, peer).saturating_sub(count(start, node, peer));
        }
    }
    for (&node, peers) in end {
        for &peer in peers.keys().filter(|&&peer| peer != killed) {
            total += count(end, node, peer).saturating_sub(count(at_kill, node, peer));
        }
    }
    total
}

/// The survivors' checksums at the same LSN, and each one's consistency check.
fn check_replicas(cluster: &LocalCluster, gone: Option<u32>) -> Vec<String> {
    let mut findings = Vec::new();
    let mut seen: Option<(u32, u64, u64)> = None;
    // Backups first: a checksum stops a node's thread for tens of milliseconds, and a
    // primary stopped that long may have a backup suspected and removed before it is read.
    let mut survivors: Vec<_> = cluster
        .nodes
        .iter()
        .filter(|node| Some(node.entry.id) != gone)
        .collect();
    survivors.sort_by_key(|node| {
        node.status()
            .is_ok_and(|status| status["cluster"]["role"] == "primary")
    });
    for node in survivors {
        let id = node.entry.id;
        let report = match node.checksum() {
            Ok(report) => report,
            Err(_) => {
                findings.push(format!("node {id} {NO_CHECKSUM}"));
                continue;
            }
        };
        let checksum = &report["report"]["checksum"];
        if let Some(check) = checksum["check"].as_str() {
            findings.push(format!("node {id}: {check}"));
        }
        let (Some(lsn), Some(crc)) = (checksum["lsn"].as_u64(), checksum["crc32c"].as_u64()) else {
            findings.push(format!("node {id} {NO_CHECKSUM}"));
            continue;
        };
        match seen {
            None => seen = Some((id, lsn, crc)),
            Some((first, lsn_first, crc_first)) => {
                if lsn != lsn_first {
                    findings.push(format!(
                        "node {id} {OTHER_LSN} {lsn}, node {first} at {lsn_first}"
                    ));
                } else if crc != crc_first {
                    findings.push(format!("node {id} and node {first} differ at LSN {lsn}"));
                }
            }
        }
    }
    findings
}

fn timeline_of(run: &FailoverRun) -> Timeline {
    let mut notes = vec![
        format!(
            "failover gap {}",
            run.gap_ms.map_or("-".into(), |gap| format!("{gap:.1} ms"))
        ),
        format!("acknowledged {}, lost {}", run.acknowledged, run.lost),
        format!(
            "duplicates {}, client errors {}",
            run.duplicates, run.client_errors
        ),
    ];
    notes.push(if run.consistent {
        "replicas identical, checks hold".to_string()
    } else {
        format!("INCONSISTENT: {}", run.findings.join("; "))
    });
    Timeline {
        title: format!(
            "tandem demo: node {} killed, node {} took over (replies per {BUCKET_MS} ms)",
            run.killed,
            run.new_primary.map_or("?".into(), |node| node.to_string())
        ),
        bucket_ms: BUCKET_MS,
        replies: run.throughput_per_10ms.clone(),
        kill_ms: Some(run.kill_ms),
        gap_ms: run.last_old_ms.zip(run.first_new_ms),
        notes,
    }
}

fn print_report(run: &FailoverRun, chart: &Path) {
    let gap = run.gap_ms.map_or("-".into(), |gap| format!("{gap:.2} ms"));
    println!(
        "failover: node {} killed at {:.0} ms; node {} is primary of view {}",
        run.killed,
        run.kill_ms,
        run.new_primary.map_or("?".into(), |node| node.to_string()),
        run.view_after
    );
    // Redis clients cannot tell which node answered: their gap is the silence across the
    // fault.
    let (gap_what, first_what) = if run.redis.is_some() {
        (
            "the longest silence across the fault, over all clients",
            "first acknowledgement after it",
        )
    } else {
        (
            "last reply of the old primary → first of the new",
            "first reply of the new primary",
        )
    };
    println!("  failover gap ({gap_what}): {gap}");
    println!(
        "  kill → {first_what}: {}",
        run.kill_to_first_reply_ms
            .map_or("-".into(), |ms| format!("{ms:.2} ms"))
    );
    println!(
        "  longest call as a client waited for it: {:.2} ms",
        run.call_ms_max
    );
    println!();
    println!("  throughput around the failure (replies per {BUCKET_MS} ms):");
    let kill_bucket = (run.kill_ms / f64::from(BUCKET_MS)) as usize;
    // A power loss's outage lasts the pause and the restart: the chart shows it whole.
    let after = if run.fault == Fault::PowerLoss {
        60
    } else {
        10
    };
    let first = kill_bucket.saturating_sub(5);
    let last = (kill_bucket + after).min(run.throughput_per_10ms.len().saturating_sub(1));
    for bucket in first..=last {
        let count = run.throughput_per_10ms[bucket];
        let marker = if bucket == kill_bucket {
            "  ← kill"
        } else {
            ""
        };
        println!(
            "    {:>6} ms {:>6}  {}{marker}",
            bucket as u32 * BUCKET_MS,
            count,
            "#".repeat((count / 20).min(60) as usize)
        );
    }
    println!();
    println!(
        "  commits acknowledged {}, found afterwards {}",
        run.acknowledged, run.found
    );
    if run.loss_allowed {
        println!(
            "  lost {} ({} acknowledges from memory: a power loss takes what the logs had not \
             written; durable loses nothing)",
            run.lost, run.safety
        );
    } else {
        println!("  lost {} ({}: must be 0)", run.lost, run.safety);
    }
    println!("  duplicates {} (must be 0)", run.duplicates);
    println!("  client-visible errors {} (must be 0)", run.client_errors);
    if let Some(retried) = run.calls_retried {
        println!("  calls retried across the failover {retried}");
    }
    println!("  false suspicions {}", run.false_suspicions);
    println!(
        "  view changes {} (view {} → {})",
        run.view_changes, run.view_before, run.view_after
    );
    println!(
        "  a primary without a backup for {:.1} ms (a second crash then loses what one node \
         holds)",
        run.alone_ms
    );
    if let Some(counts) = &run.redis {
        let through = if counts.proxies == 0 {
            "straight to the nodes".to_string()
        } else {
            format!("through {} tandem proxies", counts.proxies)
        };
        println!(
            "  redis-py clients {} {through}: {} operations, {} INCRs and {} Lua transfers \
             acknowledged, {} replies off their client's count",
            counts.clients,
            counts.ops,
            counts.incr_acknowledged,
            counts.transfers_acknowledged,
            run.reply_mismatches
        );
        if let Some(error) = counts.errors.first() {
            println!("  a client error: {error}");
        }
    }
    if run.consistent && run.redis.is_some() {
        println!(
            "  consistency: replicas identical at the same LSN; every counter, transfer log \
             and balance accounts for its client's operations; the sum of the balances holds"
        );
    } else if run.consistent {
        println!(
            "  consistency: replicas identical at the same LSN; Debit-Credit and dedup checks hold"
        );
    } else {
        println!("  consistency: FAILED: {}", run.findings.join("; "));
    }
    println!("  timeline: {}", chart.display());
}
