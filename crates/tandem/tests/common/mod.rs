//! What the multi-process failover tests share: the demo they run and the promises every
//! fault must keep.

use std::path::Path;
use std::process::{Command, Stdio};

use serde_json::Value;

/// `tandem demo --json` on a small cluster (8 MiB, 4 clients) for `seconds` of load, its
/// files under `dir`; stdin closed, the rest for the caller to set.
pub fn demo_command(dir: &Path, seconds: &str) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    command
        .args([
            "demo",
            "--json",
            "--db-mib",
            "8",
            "--clients",
            "4",
            "--seconds",
            seconds,
        ])
        .arg("--dir")
        .arg(dir)
        .stdin(Stdio::null());
    command
}

/// The promises every fault must keep: nothing lost or duplicated, every reply consistent
/// with its account, no client error, no answer of an old primary in its old view after the
/// new one answered, identical and consistent replicas.
pub fn assert_safe(report: &Value) {
    assert_eq!(report["lost"], 0, "{report}");
    assert_eq!(report["duplicates"], 0, "{report}");
    assert_eq!(report["reply_mismatches"], 0, "{report}");
    assert_eq!(report["client_errors"], 0, "{report}");
    assert_eq!(report["stale_replies"], 0, "{report}");
    assert_eq!(report["consistent"], true, "{report}");
    let acknowledged = report["acknowledged"].as_u64().unwrap();
    assert!(acknowledged > 0, "{report}");
    assert_eq!(report["found"].as_u64(), Some(acknowledged), "{report}");
}
