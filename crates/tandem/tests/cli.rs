//! The `tandem` command as a user runs it: bad values are refused in one line with exit code 2,
//! and a short benchmark prints the documented JSON.

use std::process::{Command, Output};

fn tandem(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(args)
        .output()
        .expect("tandem runs")
}

/// Runs `tandem ARGS`, which must succeed, and parses what it printed as JSON.
fn tandem_json(args: &[&str]) -> serde_json::Value {
    let output = tandem(args);
    assert!(
        output.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).expect("JSON")
}

fn assert_refused(args: &[&str], flag: &str, accepted: &str) {
    let output = tandem(args);
    assert_eq!(output.status.code(), Some(2), "{args:?} exits with 2");
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "one line for {args:?}: {stderr}"
    );
    assert!(stderr.contains(flag), "{args:?} names {flag}: {stderr}");
    assert!(
        stderr.contains(accepted),
        "{args:?} says what is accepted: {stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[test]
fn bad_values_are_refused_in_one_line_with_exit_code_2() {
    let engine = ["bench", "engine"];
    let with = |extra: &[&'static str]| [&engine[..], extra].concat();
    assert_refused(
        &with(&["--db-mib", "1.001"]),
        "--db-mib",
        "whole number of 4 KiB pages",
    );
    assert_refused(&with(&["--db-mib", "0"]), "--db-mib", "greater than zero");
    assert_refused(
        &with(&["--seconds", "0"]),
        "--seconds",
        "positive number of seconds",
    );
    assert_refused(
        &with(&["--strategy", "v4"]),
        "--strategy",
        "v0, v1, v2, v3, all",
    );
    assert_refused(
        &with(&["--workload", "tpcc"]),
        "--workload",
        "debit-credit, order-entry",
    );
    assert_refused(&with(&["--sekonds", "1"]), "--sekonds", "--seconds");

    let reads = ["bench", "reads"];
    let with = |extra: &[&'static str]| [&reads[..], extra].concat();
    assert_refused(&with(&["--nodes", "1"]), "--nodes", "2..=9");
    assert_refused(&with(&["--clients", "0"]), "--clients", "1..=256");
    assert_refused(&with(&["--writers", "65"]), "--writers", "0..=64");
    assert_refused(
        &with(&["--seconds", "0.5"]),
        "--seconds",
        "1 or more seconds",
    );

    let durability = ["bench", "durability"];
    let with = |extra: &[&'static str]| [&durability[..], extra].concat();
    assert_refused(&with(&["--nodes", "1"]), "--nodes", "2..=9");
    assert_refused(&with(&["--pipeline", "0"]), "--pipeline", "1..=1024");
    assert_refused(
        &with(&["--systems", "tandem,redis-always"]),
        "--systems",
        "tandem-2safe, tandem-durable, redis-always, redis-everysec",
    );
    assert_refused(
        &with(&["--workloads", "set,set"]),
        "--workloads",
        "name each once",
    );
}

#[test]
fn a_node_config_naming_an_unknown_data_model_is_refused_before_anything_starts() {
    let dir = std::env::temp_dir().join(format!("tandem-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let example = include_str!("../../../examples/primary.toml");
    assert!(example.contains("workload = \"debit-credit\""));
    let path = dir.join("tpcb.toml");
    std::fs::write(&path, example.replace("debit-credit", "tpcb")).unwrap();
    assert_refused(
        &["node", "--config", path.to_str().unwrap()],
        "group.workload",
        "debit-credit, order-entry",
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_database_too_small_for_the_workload_says_how_large_it_must_be() {
    let args = [
        "bench",
        "engine",
        "--workload",
        "order-entry",
        "--db-mib",
        "2",
    ];
    assert_refused(&args, "--db-mib", "give --db-mib 18 or more");
}

#[test]
fn a_short_run_prints_the_documented_json_and_checks_consistency() {
    // One warehouse of Order-Entry at the default scale needs about 18 MiB.
    for (workload, db_mib) in [("debit-credit", "2"), ("order-entry", "18")] {
        let report = tandem_json(&[
            "bench",
            "engine",
            "--workload",
            workload,
            "--db-mib",
            db_mib,
            "--seconds",
            "0.05",
            "--json",
        ]);
        let runs = report["runs"].as_array().unwrap();
        let strategies: Vec<&str> = runs
            .iter()
            .map(|r| r["strategy"].as_str().unwrap())
            .collect();
        assert_eq!(strategies, ["v0", "v1", "v2", "v3"]);
        for run in runs {
            assert_eq!(run["workload"], workload);
            assert_eq!(run["consistent"], true, "{run}");
            assert!(run["tx_per_s"].as_f64().unwrap() > 0.0);
            let data = run["redo_data_bytes_per_tx"].as_f64().unwrap();
            let meta = run["redo_meta_bytes_per_tx"].as_f64().unwrap();
            let total = run["redo_bytes_per_tx"].as_f64().unwrap();
            assert!((data + meta - total).abs() < 1e-6);
            if workload == "debit-credit" {
                // Three balances and a history record; a zero delta (one in two million) changes
                // no balance, hence the tolerance.
                assert!((data - 28.0).abs() < 0.01, "{data} data bytes per txn");
                assert!(total <= 64.0, "compact encoding: {total} bytes per txn");
            }
        }
    }
}

/// `bench engine --groups 2`: each strategy on one group and on two at once, every group's
/// store checked, the ratio to one group reported.
#[test]
fn the_engine_benchmark_runs_groups_side_by_side() {
    let report = tandem_json(&[
        "bench",
        "engine",
        "--strategy",
        "v2",
        "--groups",
        "2",
        "--db-mib",
        "2",
        "--seconds",
        "0.05",
        "--json",
    ]);
    let runs = report["runs"].as_array().unwrap();
    let groups: Vec<u64> = runs.iter().map(|r| r["groups"].as_u64().unwrap()).collect();
    assert_eq!(groups, [1, 2]);
    assert_eq!(runs[0]["ratio_to_one_group"], 1.0);
    for run in runs {
        assert_eq!(run["strategy"], "v2");
        assert_eq!(run["consistent"], true, "{run}");
        assert!(run["tx_per_s"].as_f64().unwrap() > 0.0, "{run}");
        assert!(run["ratio_to_one_group"].as_f64().unwrap() > 0.0, "{run}");
    }
    assert_refused(&["bench", "engine", "--groups", "0"], "--groups", "1..=64");
}

/// `bench durability`, briefly: tandem under 2-safe and under durable always, the two Redis
/// append-only files where `redis-server` is installed (`.ci/setup` installs it), and one
/// restart of a backup from its write-ahead log.
#[test]
fn the_durability_benchmark_prints_the_documented_json() {
    let mut systems = vec!["tandem-2safe", "tandem-durable"];
    match Command::new("redis-server").arg("--version").output() {
        Ok(_) => systems.extend(["redis-always", "redis-everysec"]),
        Err(err) => eprintln!("no redis-server ({err}): measuring tandem-2safe alone"),
    }
    let dir = std::env::temp_dir().join(format!("tandem-bench-durability-{}", std::process::id()));
    let systems_arg = systems.join(",");
    let report = tandem_json(&[
        "bench",
        "durability",
        "--nodes",
        "2",
        "--clients",
        "4",
        "--seconds",
        "0.2",
        "--db-mib",
        "16",
        "--systems",
        &systems_arg,
        "--recovery-mib",
        "16",
        "--recovery-seconds",
        "0.3",
        "--recovery-checkpoint-mib",
        "1",
        "--recovery-fill-percent",
        "50",
        "--dir",
        dir.to_str().unwrap(),
        "--json",
    ]);
    let _ = std::fs::remove_dir_all(&dir);
    let fields = |value: &serde_json::Value| {
        let mut keys: Vec<String> = value.as_object().unwrap().keys().cloned().collect();
        keys.sort();
        keys
    };
    assert_eq!(fields(&report), ["recovery", "runs"], "{report}");
    // The backup restarted from its log, replayed what the SETs wrote, and served again.
    let recovery = report["recovery"].as_array().unwrap();
    assert_eq!(recovery.len(), 1, "{report}");
    assert_eq!(
        fields(&recovery[0]),
        [
            "checkpoint_lsn",
            "checkpoint_mib",
            "db_mib",
            "filled_mib",
            "log_mib",
            "records",
            "replay_s",
            "restart_s"
        ],
        "{report}"
    );
    // Half of the 16 MiB went to 128 values of 64 KiB, one commit each; the restart installed
    // a checkpoint that holds them all (the SETs waited for it), from a file the log holds.
    assert_eq!(recovery[0]["filled_mib"], 8, "{report}");
    assert!(
        recovery[0]["checkpoint_lsn"].as_u64().unwrap() >= 128,
        "{report}"
    );
    assert!(
        recovery[0]["checkpoint_mib"].as_f64().unwrap() >= 8.0,
        "{report}"
    );
    assert_eq!(recovery[0]["db_mib"], 16, "{report}");
    // Records after that checkpoint: none when one more checkpoint landed just before the
    // kill (every MiB of batches here), so only their count's presence is checked.
    assert!(recovery[0]["records"].as_u64().is_some(), "{report}");
    assert!(recovery[0]["restart_s"].as_f64().unwrap() > 0.0, "{report}");
    let runs = report["runs"].as_array().unwrap();
    let mut pairs = Vec::new();
    for workload in ["set", "debit-credit"] {
        for system in &systems {
            pairs.push((system.to_string(), workload.to_string()));
        }
    }
    let reported: Vec<(String, String)> = runs
        .iter()
        .map(|run| {
            assert_eq!(
                fields(run),
                [
                    "client_cpu_us_per_op",
                    "ops_per_s",
                    "p99_ms",
                    "saturated_ops_per_s",
                    "server_cpu_us_per_op",
                    "system",
                    "workload"
                ],
                "{run}"
            );
            assert!(run["ops_per_s"].as_f64().unwrap() > 0.0, "{run}");
            // Linux tells every process's CPU time, so both are measured (in ticks of 10 ms:
            // a brief run may see none).
            for field in ["client_cpu_us_per_op", "server_cpu_us_per_op"] {
                assert!(run[field].as_f64().unwrap() >= 0.0, "{run}");
            }
            assert!(run["p99_ms"].as_f64().unwrap() > 0.0, "{run}");
            let name = |field: &str| run[field].as_str().unwrap().to_string();
            (name("system"), name("workload"))
        })
        .collect();
    assert_eq!(reported, pairs);
}

/// `tandem bench mirror` measures every tracker the kernel grants and says why it refuses
/// the others; userfaultfd and mprotect work on every kernel CI runs.
#[test]
fn the_mirror_benchmark_prints_the_documented_json() {
    let report = tandem_json(&[
        "bench",
        "mirror",
        "--region-mib",
        "4",
        "--intervals",
        "1",
        "--rounds",
        "1",
        "--json",
    ]);
    assert_eq!(report["pages"].as_u64(), Some((4 << 20) / 4096));
    let trackers = report["trackers"].as_array().expect("trackers");
    assert_eq!(trackers.len(), 3);
    for tracker in trackers {
        let kind = tracker["kind"].as_str().expect("a kind");
        match tracker["refused"].as_str() {
            Some(why) => assert!(kind == "soft-dirty" && why.contains("CONFIG_MEM_SOFT_DIRTY")),
            None => {
                for field in [
                    "first_write_ns",
                    "harvest_us_dirty",
                    "harvest_us_clean",
                    "checkpoint_take_us",
                    "checkpoint_apply_us",
                    "checkpoint_rollback_us",
                ] {
                    assert!(tracker[field].is_number(), "{kind}: {field}");
                }
            }
        }
    }
    assert_refused(
        &["bench", "mirror", "--dirty-percent", "101"],
        "--dirty-percent",
        "at most 100",
    );
}

#[test]
fn the_simulator_reports_a_seed_and_a_range_as_json() {
    let report = tandem_json(&["sim", "--seed", "4", "--ticks", "100", "--json"]);
    assert_eq!(report["seed"], 4);
    assert_eq!(report["ok"], true);
    assert!(report["faults"].as_str().unwrap().contains("loss"));
    assert!(report["calls"].as_u64().unwrap() > 0);

    let report = tandem_json(&["sim", "--seeds", "0..5", "--ticks", "100", "--json"]);
    assert_eq!(report["seeds"], 5);
    assert_eq!(report["failed"], serde_json::json!([]));
    assert!(report["wall_s"].as_f64().unwrap() > 0.0);
}

#[test]
fn the_simulator_runs_the_redis_model_and_reports_its_replies_checked() {
    let report = tandem_json(&[
        "sim", "--seed", "4", "--ticks", "100", "--model", "redis", "--json",
    ]);
    assert_eq!(report["ok"], true);
    assert_eq!(report["model"], "redis");
    assert!(report["replies_checked"].as_u64().unwrap() > 0);
    // Debit-Credit's report stays as it was.
    let output = tandem(&["sim", "--seed", "4", "--ticks", "100", "--json"]);
    let report: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert!(report.get("model").is_none() && report.get("replies_checked").is_none());
    assert_refused(&["sim", "--model", "memcached"], "--model", "redis");
}

#[test]
fn the_simulator_refuses_bad_ranges_and_bugs_it_was_not_built_with() {
    assert_refused(&["sim", "--seeds", "5..5"], "--seeds", "A..B");
    assert_refused(&["sim", "--seeds", "x"], "--seeds", "A..B");
    let output = tandem(&["sim", "--inject", "early-reply"]);
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--features inject-bugs"));
}

/// A fresh directory for one test.
fn scratch(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("tandem-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// An unknown table in a node's configuration is called unknown, with the tables there are,
/// not a secret.
#[test]
fn an_unknown_config_table_is_named_with_the_known_tables() {
    let dir = scratch("unknown-table");
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/primary.toml"),
    )
    .unwrap();
    let config = dir.join("node.toml");
    std::fs::write(
        &config,
        format!("{text}\n[http]\nlisten = \"127.0.0.1:1\"\n"),
    )
    .unwrap();
    let output = tandem(&["node", "--config", config.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("unknown table `[http]`"), "{stderr}");
    assert!(
        stderr.contains("[tuning]") && stderr.contains("[[peers]]"),
        "{stderr}"
    );
    assert!(!stderr.contains("secret"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Each flag's help is its own: `--tls` says TLS, `--json` says JSON.
#[test]
fn bench_failover_help_describes_each_flag() {
    let output = tandem(&["bench", "failover", "--help"]);
    let help = String::from_utf8(output.stdout).unwrap();
    // A flag's line, then its description's lines, until the next flag's.
    let described = |flag: &str| -> String {
        let mut lines = help
            .lines()
            .skip_while(|line| !line.trim_start().starts_with(flag));
        let first = lines
            .next()
            .unwrap_or_else(|| panic!("no {flag} in {help}"));
        let rest = lines.take_while(|line| !line.trim_start().starts_with('-'));
        std::iter::once(&first[first.find(flag).unwrap() + flag.len()..])
            .chain(rest)
            .collect::<Vec<_>>()
            .join(" ")
    };
    let tls = described("--tls");
    assert!(tls.contains("TLS") && !tls.contains("JSON"), "{tls}");
    assert!(described("--json").contains("JSON"), "{help}");
}

/// `tandem proxy --help` sends users to the native column of `tandem status`.
#[test]
fn proxy_help_names_where_the_native_addresses_are() {
    let output = tandem(&["proxy", "--help"]);
    let help = String::from_utf8(output.stdout).unwrap();
    assert!(
        help.contains("native") && help.contains("tandem status"),
        "{help}"
    );
}

/// Runs `tandem ARGS` in `dir` with `env` set.
fn tandem_in(dir: &std::path::Path, env: &[(&str, &str)], args: &[&str]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tandem"));
    for (name, value) in env {
        command.env(name, value);
    }
    command
        .current_dir(dir)
        .args(args)
        .output()
        .expect("tandem runs")
}

/// The password comes from a file or the environment rather than the command line; a file
/// or variable that cannot give one is refused, naming it; `--requirepass` still works but
/// says who can see it. Messages repeat the `--dir` given.
#[test]
fn up_takes_its_password_from_a_file_or_the_environment_and_warns_of_the_flag() {
    let dir = scratch("requirepass");
    std::fs::write(dir.join("empty"), "\nsecond line\n").unwrap();
    std::fs::write(dir.join("a-file"), "").unwrap();
    // (environment, arguments, what the refusal must name)
    type Refusal<'a> = (&'a [(&'a str, &'a str)], &'a [&'a str], &'a [&'a str]);
    let refusals: [Refusal<'_>; 3] = [
        (
            &[],
            &["up", "--requirepass-file", "empty"],
            &["--requirepass-file", "empty"],
        ),
        (
            &[],
            &["up", "--requirepass-file", "missing"],
            &["--requirepass-file", "missing"],
        ),
        (
            &[("TANDEM_REQUIREPASS", "")],
            &["up"],
            &["TANDEM_REQUIREPASS", "empty"],
        ),
    ];
    for (env, args, named) in refusals {
        let output = tandem_in(&dir, env, args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{args:?}: {stderr}");
        for word in named {
            assert!(stderr.contains(word), "{args:?} names {word}: {stderr}");
        }
    }
    // A --dir under a file cannot be made: the message repeats it as given, after the
    // warning that --requirepass is visible.
    let output = tandem_in(
        &dir,
        &[],
        &[
            "up",
            "--requirepass",
            "s3cret-pass",
            "--dir",
            "a-file/cluster",
        ],
    );
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--requirepass-file") && stderr.contains("TANDEM_REQUIREPASS"),
        "{stderr}"
    );
    assert!(stderr.contains("/proc/PID/cmdline"), "{stderr}");
    assert!(stderr.contains("cannot make a-file/cluster "), "{stderr}");
    assert!(!stderr.contains("s3cret-pass"), "{stderr}");
    let _ = std::fs::remove_dir_all(&dir);
}
