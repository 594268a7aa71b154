//! `tandem bench starvation`: whether a busy machine fools the failure detector.
//!
//! A local 3-node cluster sits idle while windows with N busy threads of another process
//! (`tandem burn --threads N`, at the nodes' own priority) alternate with quiet windows, on
//! the same cluster, so that the machine's other noise falls on both alike. Every view change
//! a window sees is counted: no node failed, so each one is the detector mistaking a late
//! process for a dead one (and costs every client of the old primary a `READONLY`). Then the
//! primary of a fresh cluster is killed, once beside the burners and once without, and the
//! time until a survivor serves as primary is measured: the detector must still see a real
//! death.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::Failure;
use crate::cli::StarvationArgs;
use crate::local::{LocalCluster, Options};

/// How long a cluster may take to settle.
const SETTLE: Duration = Duration::from_secs(60);
/// How long a takeover may take before the run says it never came.
const TAKEOVER_MAX: Duration = Duration::from_secs(30);
/// How often the nodes' views are read.
const POLL: Duration = Duration::from_millis(20);

/// Another process keeping `threads` threads busy until dropped.
struct Burners {
    child: Child,
}

impl Burners {
    fn start(threads: u32) -> Result<Burners, Failure> {
        let exe = std::env::current_exe()
            .map_err(|err| Failure::Run(format!("cannot find myself: {err}")))?;
        let child = Command::new(exe)
            .args(["burn", "--threads", &threads.to_string()])
            .stdin(Stdio::piped())
            .spawn()
            .map_err(|err| Failure::Run(format!("cannot start the burners: {err}")))?;
        Ok(Burners { child })
    }
}

impl Drop for Burners {
    fn drop(&mut self) {
        // Closing its stdin ends it too, should the kill fail.
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One window of the idle phase: how many burner threads ran, and the view changes seen.
struct Window {
    burners: u32,
    seconds: f64,
    view_changes: u64,
}

pub fn run(args: &StarvationArgs) -> Result<(), Failure> {
    let options = Options::new(3).with_db_mib(args.db_mib as usize);
    let (cluster, settled) = LocalCluster::start_settled(&args.dir.join("idle"), &options, SETTLE)?;
    let mut windows = Vec::new();
    let mut view = settled.view;
    for round in 1..=args.rounds {
        for burners in [0, args.burners] {
            let burning = (burners > 0).then(|| Burners::start(burners)).transpose()?;
            let started = Instant::now();
            let view_changes = watch(&cluster, args.window, &mut view);
            drop(burning);
            let seconds = started.elapsed().as_secs_f64();
            if !args.json {
                println!(
                    "round {round}: {burners:>3} busy threads, {seconds:.1} s: {view_changes} \
                     view changes"
                );
            }
            windows.push(Window {
                burners,
                seconds,
                view_changes,
            });
        }
    }
    drop(cluster);
    let mut kills = Vec::new();
    for burners in [0, args.burners] {
        let dir = args.dir.join(format!("kill-{burners}"));
        let takeover_ms = takeover(&dir, &options, burners)?;
        if !args.json {
            println!("kill beside {burners:>3} busy threads: taken over in {takeover_ms:.1} ms");
        }
        kills.push(json!({ "burners": burners, "takeover_ms": takeover_ms }));
    }
    let report = report(args, &windows, kills);
    if args.json {
        println!("{report}");
    } else {
        summarize(&report);
    }
    Ok(())
}

/// Watches the cluster for `seconds`: the view changes it makes (the highest view any node
/// knows, read every [`POLL`]), with `view` the highest known before and after.
fn watch(cluster: &LocalCluster, seconds: f64, view: &mut u64) -> u64 {
    let end = Instant::now() + Duration::from_secs_f64(seconds);
    let before = *view;
    while Instant::now() < end {
        *view = (*view).max(view_max(cluster));
        std::thread::sleep(POLL);
    }
    *view = (*view).max(view_max(cluster));
    *view - before
}

/// The highest view any node of the cluster reports (0 if none answers).
fn view_max(cluster: &LocalCluster) -> u64 {
    cluster
        .nodes
        .iter()
        .filter_map(|node| node.status().ok())
        .filter_map(|status| status["cluster"]["view"].as_u64())
        .max()
        .unwrap_or(0)
}

/// Kills the primary of a fresh cluster in `dir` beside `burners` busy threads; the
/// milliseconds until a survivor serves as primary of a newer view.
fn takeover(dir: &Path, options: &Options, burners: u32) -> Result<f64, Failure> {
    let (mut cluster, settled) = LocalCluster::start_settled(dir, options, SETTLE)?;
    let _burning = (burners > 0).then(|| Burners::start(burners)).transpose()?;
    // The burners take the cores first, as other work on the machine would.
    std::thread::sleep(Duration::from_millis(500));
    let killed = Instant::now();
    cluster.kill(settled.primary);
    while killed.elapsed() < TAKEOVER_MAX {
        let serves = cluster
            .nodes
            .iter()
            .filter_map(|node| node.status().ok())
            .any(|status| {
                status["cluster"]["role"] == "primary"
                    && status["cluster"]["view"].as_u64() > Some(settled.view)
            });
        if serves {
            return Ok(killed.elapsed().as_secs_f64() * 1e3);
        }
        std::thread::sleep(Duration::from_millis(2));
    }
    Err(Failure::Run(format!(
        "beside {burners} busy threads, no survivor took the killed primary's place within \
         {TAKEOVER_MAX:?} (the cluster's files are in {})",
        dir.display()
    )))
}

fn report(args: &StarvationArgs, windows: &[Window], kills: Vec<Value>) -> Value {
    let phase = |burners: u32| {
        let (seconds, changes) = windows
            .iter()
            .filter(|window| window.burners == burners)
            .fold((0.0, 0), |(seconds, changes), window| {
                (seconds + window.seconds, changes + window.view_changes)
            });
        json!({
            "burners": burners,
            "seconds": seconds,
            "view_changes": changes,
            "view_changes_per_minute": if seconds > 0.0 { changes as f64 * 60.0 / seconds } else { 0.0 },
        })
    };
    json!({
        "burners": args.burners,
        "rounds": args.rounds,
        "window_s": args.window,
        "idle": [phase(0), phase(args.burners)],
        "kills": kills,
    })
}

fn summarize(report: &Value) {
    println!();
    for phase in report["idle"].as_array().into_iter().flatten() {
        println!(
            "idle beside {:>3} busy threads: {} view changes in {:.0} s ({:.2} per minute)",
            phase["burners"],
            phase["view_changes"],
            phase["seconds"].as_f64().unwrap_or(0.0),
            phase["view_changes_per_minute"].as_f64().unwrap_or(0.0)
        );
    }
}
