//! Real Redis clients against a 3-node local cluster serving the Redis model (`tandem up`):
//!
//! - `redis-cli`: single commands in its raw and formatted output, commands piped to its
//!   stdin, `-x`, RESP3 (`-3`), `--pipe` mass insertion, and a backup's `READONLY`;
//! - `redis-benchmark -P 16 -t set,get,incr -n 20000 -q`, then the rest of its default tests
//!   whose commands tandem serves ([`BENCHMARK_TESTS`]): each must end without an error, and
//!   the 20,000 pipelined `INCR`s must count to exactly 20,000;
//! - a redis-py script from the virtualenv `.ci/setup` makes (`tests/redis_clients.py`): RESP2
//!   and RESP3, pipelines, transactions, `WATCH`, `HELLO`.
//!
//! Then every replica's checksum must match at the same LSN. A second cluster shows what a
//! client sees of a backup: linearizable reads (a `GET` sent to a backup right after a
//! `SET`'s reply sees it), `EVAL_RO`, and `READONLY` for writes and blocks. A missing client
//! is installed by `.ci/setup` (redis-tools, the virtualenv), or the test fails saying which
//! is missing. Each check is also shown failing on a planted difference.

use crate::redis_support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use redis_support::{Cluster, Conn, Mismatch, judge_checksums, workspace_root};
use serde_json::json;
use tandem_redis::resp::Value;

/// Requests per redis-benchmark test.
const BENCHMARK_REQUESTS: u32 = 20_000;

/// redis-benchmark's default tests: each test's name for `-t`, the commands it sends, and
/// how its report lines begin. A test runs once tandem serves all its commands, so the
/// families being written join by themselves.
const BENCHMARK_TESTS: &[(&str, &[&str], &[&str])] = &[
    ("ping_inline", &["PING"], &["PING_INLINE"]),
    ("ping_mbulk", &["PING"], &["PING_MBULK"]),
    ("set", &["SET"], &["SET"]),
    ("get", &["GET"], &["GET"]),
    ("incr", &["INCR"], &["INCR"]),
    ("lpush", &["LPUSH"], &["LPUSH"]),
    ("rpush", &["RPUSH"], &["RPUSH"]),
    ("lpop", &["LPOP"], &["LPOP"]),
    ("rpop", &["RPOP"], &["RPOP"]),
    ("sadd", &["SADD"], &["SADD"]),
    ("hset", &["HSET"], &["HSET"]),
    ("spop", &["SPOP"], &["SPOP"]),
    ("zadd", &["ZADD"], &["ZADD"]),
    ("zpopmin", &["ZPOPMIN"], &["ZPOPMIN"]),
    (
        "lrange",
        &["LPUSH", "LRANGE"],
        &["LRANGE_100", "LRANGE_300", "LRANGE_500", "LRANGE_600"],
    ),
    ("mset", &["MSET"], &["MSET"]),
];

/// The first three, which the test always runs (pipelined, 16 at a time).
const BENCHMARK_FIRST: &[&str] = &["set", "get", "incr"];

/// One redis-cli run: its arguments after `-p PORT`, what it reads on stdin, and what it must
/// print (Redis 7.0's redis-cli, its output not a terminal).
struct CliCase {
    args: &'static [&'static str],
    stdin: &'static str,
    stdout: &'static str,
}

const fn cli(args: &'static [&'static str], stdin: &'static str, stdout: &'static str) -> CliCase {
    CliCase {
        args,
        stdin,
        stdout,
    }
}

/// What redis-cli prints against Redis 7.0.15 for each, checked in order on one database.
const CLI_CASES: &[CliCase] = &[
    cli(&["SET", "greeting", "hello world"], "", "OK\n"),
    cli(&["GET", "greeting"], "", "hello world\n"),
    cli(&["--no-raw", "GET", "greeting"], "", "\"hello world\"\n"),
    cli(&["--no-raw", "INCR", "visits"], "", "(integer) 1\n"),
    cli(&["--raw", "INCRBY", "visits", "41"], "", "42\n"),
    cli(&["--no-raw", "GET", "missing"], "", "(nil)\n"),
    cli(
        &["--raw", "MGET", "greeting", "missing", "visits"],
        "",
        "hello world\n\n42\n",
    ),
    cli(
        &["--no-raw", "INCR", "greeting"],
        "",
        "(error) ERR value is not an integer or out of range\n",
    ),
    cli(
        &["--no-raw", "EXPIRE", "greeting", "100000"],
        "",
        "(integer) 1\n",
    ),
    cli(&["--no-raw", "PERSIST", "greeting"], "", "(integer) 1\n"),
    cli(&["--no-raw", "TTL", "greeting"], "", "(integer) -1\n"),
    // Commands piped to its stdin, one a line, run in order on one connection.
    cli(&[], "SET a 1\nINCR a\nGET a\nPING\n", "OK\n2\n2\nPONG\n"),
    cli(&["-x", "SET", "fromstdin"], "data", "OK\n"),
    cli(&["--no-raw", "GET", "fromstdin"], "", "\"data\"\n"),
    cli(&["-3", "--no-raw", "GET", "missing"], "", "(nil)\n"),
    cli(
        &["-3", "--no-raw", "EXISTS", "a", "visits"],
        "",
        "(integer) 2\n",
    ),
];

/// The output of `program args` with `stdin`, and whether it exited with success.
fn run(program: &PathBuf, args: &[String], stdin: &[u8]) -> (String, String, bool) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{} cannot start: {err}", program.display()));
    let mut input = child.stdin.take().expect("piped stdin");
    input.write_all(stdin).expect("stdin taken");
    drop(input);
    let output = child.wait_with_output().expect("it ends");
    (
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status.success(),
    )
}

/// Runs one redis-cli case against `port`; `Err` says how its output differed.
fn check_cli(redis_cli: &PathBuf, port: u16, case: &CliCase) -> Result<(), String> {
    let mut args = vec!["-p".to_string(), port.to_string()];
    args.extend(case.args.iter().map(|arg| arg.to_string()));
    let (stdout, stderr, _) = run(redis_cli, &args, case.stdin.as_bytes());
    if stdout == case.stdout {
        Ok(())
    } else {
        Err(format!(
            "redis-cli {} (stdin {:?}) printed {stdout:?}, not {:?}; stderr: {stderr}",
            args.join(" "),
            case.stdin,
            case.stdout
        ))
    }
}

/// The redis-cli part: every case, mass insertion, RESP3's HELLO, a backup's refusal.
fn redis_cli_part(cluster: &Cluster, redis_cli: &PathBuf) {
    let port = cluster.primary_resp().port();
    for case in CLI_CASES {
        check_cli(redis_cli, port, case).unwrap_or_else(|why| panic!("{why}"));
    }
    // The check catches a planted difference: a second INCR of a fresh key is not 1.
    let planted = cli(&["--no-raw", "INCR", "planted"], "", "(integer) 1\n");
    check_cli(redis_cli, port, &planted).expect("the first INCR answers 1");
    let caught = check_cli(redis_cli, port, &planted);
    assert!(caught.is_err(), "a second INCR printed what the first did");

    // HELLO 3 in RESP3, printed as a map.
    let args = ["-p", &port.to_string(), "-3", "--no-raw", "HELLO", "3"].map(String::from);
    let (stdout, _, ok) = run(redis_cli, &args, b"");
    assert!(ok, "redis-cli -3 HELLO 3 failed: {stdout}");
    assert!(
        stdout.starts_with("1# \"server\" => \"redis\"\n")
            && stdout.contains("\"proto\" => (integer) 3"),
        "redis-cli -3 HELLO 3 printed {stdout:?}"
    );

    // Mass insertion: the RESP of 1,000 SETs through --pipe.
    let mut protocol = Vec::new();
    for i in 0..1000 {
        let (key, value) = (format!("mass:{i}"), format!("value-{i}"));
        write!(
            protocol,
            "*3\r\n$3\r\nSET\r\n${}\r\n{key}\r\n${}\r\n{value}\r\n",
            key.len(),
            value.len()
        )
        .expect("a Vec takes it");
    }
    let args = ["-p".to_string(), port.to_string(), "--pipe".to_string()];
    let (stdout, stderr, ok) = run(redis_cli, &args, &protocol);
    assert!(
        ok && stdout.contains("errors: 0, replies: 1000"),
        "redis-cli --pipe: {stdout}{stderr}"
    );
    let mut conn = Conn::connect(cluster.primary_resp());
    assert_eq!(conn.cmd("GET mass:999"), Value::Bulk(b"value-999".to_vec()));

    // A backup refuses writes, naming the primary.
    let backup = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a backup");
    let args = ["-p", &backup.resp.port().to_string(), "SET", "x", "1"].map(String::from);
    let (stdout, _, _) = run(redis_cli, &args, b"");
    assert!(
        stdout.starts_with("READONLY You can't write against a read only replica.")
            && stdout.contains(&cluster.primary_resp().to_string()),
        "a backup answered SET with {stdout:?}"
    );
}

/// A redis-benchmark run's verdict: the report lines (name, requests per second), or why the
/// run failed: it exited with an error (redis-benchmark stops at the first error reply), its
/// output mentions an error, or a test in `expected` (line names) reported nothing.
fn judge_benchmark(
    output: &str,
    ok: bool,
    expected: &[&str],
) -> Result<Vec<(String, f64)>, String> {
    if !ok || output.contains("Error") || output.contains("ERR") {
        return Err(format!("redis-benchmark failed:\n{output}"));
    }
    // Progress lines end in \r; each test's report is "NAME: N requests per second, …".
    let reports: Vec<(String, f64)> = output
        .split(['\r', '\n'])
        .filter_map(|line| {
            let (name, rest) = line.trim().split_once(": ")?;
            let rate = rest.strip_suffix(" requests per second").or_else(|| {
                rest.split_once(" requests per second")
                    .map(|(rate, _)| rate)
            })?;
            Some((name.to_string(), rate.parse().ok()?))
        })
        .collect();
    for name in expected {
        if !reports.iter().any(|(line, _)| line.starts_with(name)) {
            return Err(format!("redis-benchmark reported no {name}:\n{output}"));
        }
    }
    Ok(reports)
}

/// Runs redis-benchmark against `port` with `args`; its judged report.
fn benchmark(
    redis_benchmark: &PathBuf,
    port: u16,
    args: &[&str],
    expected: &[&str],
) -> Result<Vec<(String, f64)>, String> {
    let mut all = vec!["-p".to_string(), port.to_string()];
    all.extend(args.iter().map(|arg| arg.to_string()));
    let (stdout, stderr, ok) = run(redis_benchmark, &all, b"");
    judge_benchmark(&format!("{stdout}{stderr}"), ok, expected)
        .map_err(|why| format!("redis-benchmark {}: {why}", all.join(" ")))
}

/// The redis-benchmark part.
fn redis_benchmark_part(cluster: &Cluster, redis_benchmark: &PathBuf) {
    let port = cluster.primary_resp().port();
    let requests = BENCHMARK_REQUESTS.to_string();
    let tests = |names: &[&str]| -> (String, Vec<&'static str>) {
        let chosen: Vec<_> = BENCHMARK_TESTS
            .iter()
            .filter(|(test, _, _)| names.contains(test))
            .collect();
        let lines = chosen
            .iter()
            .flat_map(|(_, _, lines)| lines.iter().copied())
            .collect();
        (names.join(","), lines)
    };
    let (first, lines) = tests(BENCHMARK_FIRST);
    let args = ["-P", "16", "-t", &first, "-n", &requests, "-q"];
    let reports =
        benchmark(redis_benchmark, port, &args, &lines).unwrap_or_else(|why| panic!("{why}"));
    eprintln!("redis-benchmark {}: {reports:?}", args.join(" "));
    // Without -r every INCR hits one key: 20,000 pipelined INCRs count to exactly 20,000.
    let mut conn = Conn::connect(cluster.primary_resp());
    assert_eq!(
        conn.cmd("GET counter:__rand_int__"),
        Value::Bulk(requests.clone().into_bytes()),
        "the pipelined INCRs did not count to {requests}"
    );

    // The rest of its default tests whose commands tandem serves.
    let served = |commands: &[&str]| {
        commands
            .iter()
            .all(|name| tandem_redis::cmd::lookup(name.as_bytes()).is_some())
    };
    let rest: Vec<&str> = BENCHMARK_TESTS
        .iter()
        .filter(|(test, commands, _)| !BENCHMARK_FIRST.contains(test) && served(commands))
        .map(|(test, _, _)| *test)
        .collect();
    let waiting: Vec<&str> = BENCHMARK_TESTS
        .iter()
        .filter(|(_, commands, _)| !served(commands))
        .map(|(test, _, _)| *test)
        .collect();
    if !waiting.is_empty() {
        eprintln!(
            "redis-benchmark tests waiting for their commands: {}",
            waiting.join(", ")
        );
    }
    let (rest, lines) = tests(&rest);
    let args = ["-P", "16", "-t", &rest, "-n", &requests, "-q"];
    let reports =
        benchmark(redis_benchmark, port, &args, &lines).unwrap_or_else(|why| panic!("{why}"));
    eprintln!("redis-benchmark {}: {reports:?}", args.join(" "));

    // The judge catches a planted failure: INCR of a value that is not a number.
    assert_eq!(
        conn.cmd("SET bench:text abc"),
        Value::Simple(b"OK".to_vec())
    );
    let planted = benchmark(
        redis_benchmark,
        port,
        &["-n", "10", "-q", "INCR", "bench:text"],
        &[],
    );
    let why = planted.expect_err("redis-benchmark's error went unseen");
    assert!(why.contains("not an integer"), "{why}");
}

/// The redis-py part: the script from the virtualenv, then planted (it must fail).
fn redis_py_part(cluster: &Cluster, python: &PathBuf) {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/redis_clients.py");
    let port = cluster.primary_resp().port().to_string();
    let args = [script.display().to_string(), port.clone()];
    let (stdout, stderr, ok) = run(python, &args, b"");
    assert!(ok, "redis-py: {stdout}{stderr}");
    eprintln!("{}", stdout.trim());
    let args = [script.display().to_string(), port, "--plant".to_string()];
    let (_, stderr, ok) = run(python, &args, b"");
    assert!(
        !ok && stderr.contains("mismatch: INCR"),
        "the planted redis-py mismatch went unseen: {stderr}"
    );
}

/// The virtualenv's python with redis-py (made by `.ci/setup` if it is not there yet), or why
/// there is none.
pub(crate) fn pyenv_python() -> Result<PathBuf, String> {
    pyenv_python_made().or_else(|_| {
        redis_support::set_up_tools();
        pyenv_python_made()
    })
}

/// The virtualenv's python with redis-py, if there is one.
fn pyenv_python_made() -> Result<PathBuf, String> {
    let root = std::env::var_os("TANDEM_PYENV")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("target/pyenv"));
    let python = root.join("bin/python");
    let imports = Command::new(&python)
        .args(["-c", "import redis"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    if imports {
        Ok(python)
    } else {
        Err(format!(
            "{} cannot import redis (.ci/setup makes the virtualenv)",
            python.display()
        ))
    }
}

#[test]
fn real_clients_work_against_a_three_node_cluster_and_the_replicas_match() {
    let cluster = Cluster::start("redis-clients", 3, 64);
    redis_cli_part(&cluster, &redis_support::require("redis-cli"));
    redis_benchmark_part(&cluster, &redis_support::require("redis-benchmark"));
    let python = pyenv_python().unwrap_or_else(|why| panic!("{why}"));
    redis_py_part(&cluster, &python);
    let lsn = cluster.assert_replicas_identical();
    eprintln!("the three replicas are identical at LSN {lsn}");
}

/// Whether `value` is a backup's `TRYAGAIN`: it could not serve the read within its wait
/// (on a machine busy with other builds it may happen), and the client's part is to retry.
fn is_tryagain(value: &Value) -> bool {
    matches!(value, Value::Error(text) if text.starts_with(b"TRYAGAIN "))
}

/// Sends the pipeline `requests` to a backup and reads the replies, again while any is
/// `TRYAGAIN`; returns them and the retries.
fn read_on_backup(backup: &mut Conn, requests: &[&[&str]]) -> (Vec<Value>, u32) {
    let mut retries = 0;
    loop {
        for request in requests {
            let args: Vec<Vec<u8>> = request.iter().map(|a| a.as_bytes().to_vec()).collect();
            backup.send(&args).expect("sent");
        }
        let replies: Vec<Value> = requests
            .iter()
            .map(|_| backup.read().expect("a reply"))
            .collect();
        if !replies.iter().any(is_tryagain) || retries == 1_000 {
            return (replies, retries);
        }
        retries += 1;
    }
}

fn error_text(value: &Value) -> String {
    match value {
        Value::Error(text) => String::from_utf8_lossy(text).into_owned(),
        other => panic!("not an error: {other:?}"),
    }
}

/// What a Redis client sees of a backup: a read right after a write's reply sees it (the
/// backup asks the primary what it released before it serves the read), pipelined reads of
/// several families and `EVAL_RO` come back in order, and writes, a script that may write, a
/// `WATCH` and a block's `EXEC` get `READONLY`, naming the primary.
#[test]
fn backups_serve_reads_linearizably_and_refuse_writes() {
    let cluster = Cluster::start("redis-backup-reads", 3, 64);
    let mut primary = Conn::connect(cluster.primary_resp());
    let mut backups: Vec<Conn> = cluster
        .nodes
        .iter()
        .filter(|node| node.id != cluster.primary)
        .map(|node| Conn::connect(node.resp))
        .collect();
    assert_eq!(backups.len(), 2);
    let ok = Value::Simple(b"OK".to_vec());
    let mut retries = 0;
    for backup in &mut backups {
        // What a Redis Cluster client sends before it reads from a replica.
        assert_eq!(backup.cmd("READONLY"), ok);
    }

    // Linearizable: each GET is sent once the SET's reply is in, with no pause, to each
    // backup in turn, and must see it.
    for round in 0..100 {
        let value = format!("v{round}");
        assert_eq!(primary.cmd(&format!("SET k {value}")), ok);
        for backup in &mut backups {
            let (got, tries) = read_on_backup(backup, &[&["GET", "k"]]);
            retries += tries;
            assert_eq!(
                got,
                [Value::Bulk(value.clone().into_bytes())],
                "round {round}: backup at {} answered GET k",
                backup.address
            );
        }
    }

    // Bursts of long writes (a SET's reply waits for the backups to receive it, not to
    // apply it): a read sent as soon as the last reply is in sees the last, however far the
    // backup's applier got by then.
    for round in 0..10u8 {
        let burst = 40;
        for i in 0..burst {
            let value = vec![b'a' + round; 256 << 10];
            let set = [b"SET".to_vec(), format!("long:{i}").into_bytes(), value];
            primary.send(&set).expect("sent");
        }
        for _ in 0..burst {
            assert_eq!(primary.read().expect("a reply"), ok);
        }
        let last = format!("long:{}", burst - 1);
        for backup in &mut backups {
            let (got, tries) = read_on_backup(
                backup,
                &[&["STRLEN", &last], &["GETRANGE", &last, "0", "0"]],
            );
            retries += tries;
            assert_eq!(
                got,
                [Value::Integer(256 << 10), Value::Bulk(vec![b'a' + round])],
                "round {round}: backup at {} answered for {last}",
                backup.address
            );
        }
    }

    // Other families and read-only scripts, pipelined: the replies come in request order.
    assert_eq!(primary.cmd("HSET h f hv"), Value::Integer(1));
    assert_eq!(primary.cmd("RPUSH l a b c"), Value::Integer(3));
    let bulk = |text: &str| Value::Bulk(text.as_bytes().to_vec());
    for backup in &mut backups {
        let requests: [&[&str]; 5] = [
            &["HGET", "h", "f"],
            &["LRANGE", "l", "0", "-1"],
            &[
                "EVAL_RO",
                "return redis.call('GET', KEYS[1]) .. '!'",
                "1",
                "k",
            ],
            &["GET", "nothing"],
            // A read-only script may not write, on a backup as on a primary.
            &[
                "EVAL_RO",
                "return redis.call('SET', KEYS[1], 'x')",
                "1",
                "k",
            ],
        ];
        let (mut replies, tries) = read_on_backup(backup, &requests);
        retries += tries;
        let refused = error_text(&replies.pop().expect("five replies"));
        assert!(refused.starts_with("ERR "), "a writing EVAL_RO: {refused}");
        assert_eq!(
            replies,
            [
                bulk("hv"),
                Value::Array(vec![bulk("a"), bulk("b"), bulk("c")]),
                bulk("v99!"),
                Value::Null,
            ],
            "backup at {}",
            backup.address
        );
    }

    // Writes, a script that may write, a block and a WATCH get READONLY, naming the primary.
    let primary_address = cluster.primary_resp().to_string();
    for backup in &mut backups {
        let writes: [&[&str]; 4] = [
            &["SET", "k", "other"],
            &["DEL", "k"],
            &["EVAL", "return 1", "0"],
            &["WATCH", "k"],
        ];
        for request in writes {
            let args: Vec<Vec<u8>> = request.iter().map(|a| a.as_bytes().to_vec()).collect();
            let refusal = error_text(&backup.call(&args).expect("a reply"));
            let text = request.join(" ");
            assert!(
                refusal.starts_with("READONLY You can't write against a read only replica.")
                    && refusal.contains(&primary_address),
                "{text} on a backup: {refusal}"
            );
        }
        assert_eq!(backup.cmd("MULTI"), ok);
        assert_eq!(backup.cmd("GET k"), Value::Simple(b"QUEUED".to_vec()));
        let refusal = error_text(&backup.cmd("EXEC"));
        assert!(
            refusal.starts_with("READONLY "),
            "EXEC on a backup: {refusal}"
        );
    }
    assert_eq!(primary.cmd("GET k"), Value::Bulk(b"v99".to_vec()));
    eprintln!("reads on backups retried after TRYAGAIN: {retries}");
    let lsn = cluster.assert_replicas_identical();
    eprintln!("the three replicas are identical at LSN {lsn}");
}

/// The benchmark's judge on redis-benchmark 7.0's own output: a clean run passes, and an
/// error, a failed exit or a missing test's report is caught.
#[test]
fn the_benchmark_judge_catches_errors_and_missing_reports() {
    let clean = "SET: rps=0.0 (overall: 0.0) avg_msec=-nan (overall: -nan)\r\
                 SET: 121951.22 requests per second, p50=3.543 msec\n\
                 GET: 281690.12 requests per second, p50=2.135 msec\n\
                 MSET (10 keys): 98039.22 requests per second, p50=7.199 msec\n";
    let reports = judge_benchmark(clean, true, &["SET", "GET", "MSET"]).expect("a clean run");
    assert_eq!(reports.len(), 3, "{reports:?}");
    assert_eq!(reports[0], ("SET".to_string(), 121951.22));
    assert!(
        judge_benchmark(clean, true, &["SET", "INCR"]).is_err(),
        "INCR is missing"
    );
    assert!(
        judge_benchmark(clean, false, &["SET"]).is_err(),
        "it exited with an error"
    );
    let error = "INCR nan: rps=0.0 (overall: 0.0)\rError from server: ERR value is not an integer \
                 or out of range\n";
    assert!(judge_benchmark(error, true, &[]).is_err());
}

/// The replicas' judge: identical checksums pass, a different checksum or a failed
/// consistency check is a difference, different LSNs are not settled yet.
#[test]
fn the_checksum_judge_catches_a_planted_mismatch() {
    let report = |lsn: u64, crc: u64| json!({"report": {"checksum": {"lsn": lsn, "crc32c": crc}}});
    let same = [(1, report(7, 42)), (2, report(7, 42)), (3, report(7, 42))];
    assert!(judge_checksums(&same).is_ok());
    let differ = [(1, report(7, 42)), (2, report(7, 43))];
    assert!(matches!(judge_checksums(&differ), Err(Mismatch::Differ(_))));
    let behind = [(1, report(7, 42)), (2, report(6, 41))];
    assert!(matches!(judge_checksums(&behind), Err(Mismatch::NotYet(_))));
    let broken = [(
        1,
        json!({"report": {"checksum": {"lsn": 7, "crc32c": 42, "check": "bad"}}}),
    )];
    assert!(matches!(judge_checksums(&broken), Err(Mismatch::Differ(_))));
}

/// A 20 MiB value (Redis takes up to 512 MiB) is written through the primary, replicated,
/// read back whole from the primary and from every backup, and again from the nodes' disks
/// after the whole cluster stopped at once; no view changes meanwhile, and the replicas stay
/// identical. (Before frames carried large values, such a write stopped every write for
/// tens of seconds and was then dropped.)
#[test]
fn a_twenty_mib_value_replicates_persists_and_reads_back() {
    const NODES: u32 = 3;
    const DB_MIB: u32 = 96;
    let cluster = Cluster::start("big-value", NODES, DB_MIB);
    let value: Vec<u8> = (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8)
        .collect();
    let view_before = view_of(&cluster, cluster.primary);
    let mut primary = Conn::connect(cluster.primary_resp());
    let set = primary.call(&[b"SET".to_vec(), b"big".to_vec(), value.clone()]);
    assert_eq!(set, Ok(Value::Simple(b"OK".to_vec())), "{}", cluster.logs());
    let get = || vec![b"GET".to_vec(), b"big".to_vec()];
    assert!(
        primary.call(&get()) == Ok(Value::Bulk(value.clone())),
        "the primary's copy"
    );
    cluster.assert_replicas_identical();
    for node in &cluster.nodes {
        let mut conn = Conn::connect(node.resp);
        let got = conn.call(&get());
        assert!(
            got == Ok(Value::Bulk(value.clone())),
            "node {}'s copy",
            node.id
        );
    }
    assert_eq!(
        view_of(&cluster, cluster.primary),
        view_before,
        "the view changed while the value was written: {}",
        cluster.logs()
    );
    let cluster = cluster.restart(NODES, DB_MIB);
    let mut conn = Conn::connect(cluster.primary_resp());
    let got = conn.call(&get());
    assert!(
        got == Ok(Value::Bulk(value)),
        "the value after a restart from disk"
    );
    cluster.assert_replicas_identical();
}

/// The view a node says it follows (`/status`).
fn view_of(cluster: &Cluster, node: u64) -> u64 {
    let status = redis_support::http_get_json(cluster.node(node).status, "/status")
        .expect("the node answers /status");
    status["cluster"]["view"]
        .as_u64()
        .unwrap_or_else(|| panic!("no view in {status}"))
}

/// A read-only script on a backup runs on the backup's node thread, which then sends no acks
/// of its own for as long: the backup's beat speaks for it (its last ack again), so its
/// primary does not take it for dead and no view changes. (Before the beat spoke for
/// backups, such a script of under a second moved the backup out of the view.)
#[test]
fn a_long_read_only_script_on_a_backup_moves_no_view() {
    let cluster = Cluster::start("long-read-script", 3, 16);
    let view_before = view_of(&cluster, cluster.primary);
    let mut writer = Conn::connect(cluster.primary_resp());
    assert_eq!(writer.cmd("SET r 7"), Value::Simple(b"OK".to_vec()));
    let backup = cluster
        .nodes
        .iter()
        .find(|node| node.id != cluster.primary)
        .expect("a backup");
    // Seconds of C functions (0.8 GB of `string.upper`: 2-10 s on a 2-core machine, busy
    // or not) in few Lua instructions: no limit stops it, and it outlasts the detector's
    // bound (the script's `TIME` stands still while it runs, so it cannot time itself).
    let script = b"local s = string.rep('x', 100000) local n = 0 \
        for i = 1, 8000 do n = n + #s:upper() end return redis.call('GET', 'r')";
    let mut reader = Conn::connect(backup.resp);
    let answer = reader
        .call(&[b"EVAL_RO".to_vec(), script.to_vec(), b"0".to_vec()])
        .expect("the backup answers");
    assert_eq!(answer, Value::Bulk(b"7".to_vec()), "{}", cluster.logs());
    assert_eq!(
        view_of(&cluster, cluster.primary),
        view_before,
        "the view changed while the backup ran a read-only script: {}",
        cluster.logs()
    );
    cluster.assert_replicas_identical();
}

/// A script that spends its time in C functions (the hardening issue's finding: a loop of
/// `string.upper` on a megabyte ran 13–21 s, its primary was replaced and `SCRIPT KILL`
/// answered `NOTBUSY`): past the busy threshold (5 s) other clients get `-BUSY`, `SCRIPT
/// KILL` stops it and undoes its write, the primary stays primary, and the replicas agree.
#[test]
fn a_long_script_answers_others_busy_is_killed_and_moves_no_primary() {
    let cluster = Cluster::start("long-script", 3, 16);
    let view_before = view_of(&cluster, cluster.primary);
    let mut writer = Conn::connect(cluster.primary_resp());
    assert_eq!(writer.cmd("SET w 0"), Value::Simple(b"OK".to_vec()));
    let script = b"redis.call('SET', 'w', '1') local s = string.rep('x', 1000000) \
        while true do local u = s:upper() end";
    writer
        .send(&[b"EVAL".to_vec(), script.to_vec(), b"0".to_vec()])
        .expect("sent");
    // The front end answers `PING` itself: `PONG` until the script has run 5 s, then `BUSY`.
    let mut probe = Conn::connect(cluster.primary_resp());
    loop {
        match probe.cmd("PING") {
            Value::Simple(pong) if pong == b"PONG" => {
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            Value::Error(text) => {
                assert!(text.starts_with(b"BUSY Redis is busy running a script"));
                break;
            }
            other => panic!("PING answered {other}"),
        }
    }
    assert_eq!(
        Conn::connect(cluster.primary_resp()).cmd("SCRIPT KILL"),
        Value::Simple(b"OK".to_vec())
    );
    let Ok(Value::Error(text)) = writer.read() else {
        panic!("the killed script answers an error: {}", cluster.logs());
    };
    assert!(
        text.starts_with(b"ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_eq!(writer.cmd("GET w"), Value::Bulk(b"0".to_vec()), "undone");
    assert_eq!(writer.cmd("SET after 1"), Value::Simple(b"OK".to_vec()));
    assert_eq!(
        view_of(&cluster, cluster.primary),
        view_before,
        "the view changed while the script ran: {}",
        cluster.logs()
    );
    cluster.assert_replicas_identical();
}

/// Function libraries in a cluster: a library loaded on the primary reaches the backups,
/// which serve `FCALL_RO` linearizably from their own copies (their engines never saw the
/// load) and refuse `FCALL` and `FUNCTION DELETE` as writes; `FUNCTION KILL`, as `SCRIPT
/// KILL`, stops a running function, read-only or one that wrote (whose write is undone).
#[test]
fn functions_replicate_are_read_on_backups_and_are_killed() {
    let cluster = Cluster::start("redis-functions", 3, 16);
    let mut primary = Conn::connect(cluster.primary_resp());
    let ok = Value::Simple(b"OK".to_vec());
    let library = "#!lua name=lib\n\
        redis.register_function('put', function(keys, args) return redis.call('SET', keys[1], args[1]) end)\n\
        redis.register_function{function_name='read', callback=function(keys) \
          return redis.call('GET', keys[1]) end, flags={'no-writes'}}\n\
        redis.register_function{function_name='spin', callback=function() \
          local s = string.rep('x', 100000) while true do local u = s:upper() end end, \
          flags={'no-writes'}}\n\
        redis.register_function('spin_write', function(keys) redis.call('SET', keys[1], 'spun') \
          local s = string.rep('x', 100000) while true do local u = s:upper() end end)";
    assert_eq!(
        primary.call(&[
            b"FUNCTION".to_vec(),
            b"LOAD".to_vec(),
            library.as_bytes().to_vec()
        ]),
        Ok(Value::Bulk(b"lib".to_vec()))
    );
    assert_eq!(primary.cmd("FCALL put 1 f v1"), ok);
    let primary_address = cluster.primary_resp().to_string();
    for node in cluster
        .nodes
        .iter()
        .filter(|node| node.id != cluster.primary)
    {
        let mut backup = Conn::connect(node.resp);
        let (got, _) = read_on_backup(&mut backup, &[&["FCALL_RO", "read", "1", "f"]]);
        assert_eq!(got, [Value::Bulk(b"v1".to_vec())], "backup {}", node.id);
        for write in ["FCALL put 1 f v2", "FUNCTION DELETE lib"] {
            let refusal = error_text(&backup.cmd(write));
            assert!(
                refusal.starts_with("READONLY ") && refusal.contains(&primary_address),
                "{write} on a backup: {refusal}"
            );
        }
    }
    for (call, killed_key) in [
        ("FCALL_RO spin 0", None),
        ("FCALL spin_write 1 f", Some("f")),
    ] {
        let mut caller = Conn::connect(cluster.primary_resp());
        let args: Vec<Vec<u8>> = call.split(' ').map(|a| a.as_bytes().to_vec()).collect();
        caller.send(&args).expect("sent");
        // A `FUNCTION KILL` sent before the function runs would wait behind it for the
        // executor: the front end's `PING` says when it runs (`BUSY` past 5 s).
        let mut probe = Conn::connect(cluster.primary_resp());
        while probe.cmd("PING") == Value::Simple(b"PONG".to_vec()) {
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        assert_eq!(
            Conn::connect(cluster.primary_resp()).cmd("FUNCTION KILL"),
            ok,
            "{call}"
        );
        let text = error_text(&caller.read().expect("the killed function answers"));
        assert!(
            text.starts_with("ERR Script killed by user with SCRIPT KILL...")
                && text.contains("script: spin"),
            "{call}: {text}"
        );
        if let Some(key) = killed_key {
            assert_eq!(
                primary.cmd(&format!("GET {key}")),
                Value::Bulk(b"v1".to_vec())
            );
        }
    }
    assert_eq!(
        primary.cmd("FUNCTION KILL"),
        Value::Error(b"NOTBUSY No scripts in execution right now.".to_vec())
    );
    cluster.assert_replicas_identical();
}
