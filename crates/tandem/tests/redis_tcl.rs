//! Redis's own test suite, unmodified, against a tandem cluster: the units of Redis 7.0.15's
//! `tests/unit/` in [`UNITS`] run through its `./runtest` in external mode (`--host`,
//! `--port`, `--durable`; with every database, not `--singledb`) against the primary of a 3-node cluster (`tandem up`,
//! 2-safe), with the tags left out that need what an external server does not give ([`TAGS`]:
//! replication, `DEBUG`, `SAVE`, memory limits, and Redis's external CI's `-slow`;
//! `external:skip` goes by itself). `.ci/setup` fetches the suite at its pinned release into
//! `target/redis-tests/` and installs `tcl`; without them the test runs `.ci/setup` and then
//! fails naming what is missing.
//!
//! Each unit runs on its own (`--single`), in Redis's own order (units change the server's
//! configuration and do not all restore it), and every result the harness prints (`[ok]`,
//! `[err]`, `[skip]`, `[ignore]`, `[exception]`, a timeout) is compared with
//! `tests/fixtures/redis_tcl_expected.txt`: under `## unit/X`, each test known not to pass on
//! tandem, or the place where the unit stops, with a one-line reason; under `## cannot apply
//! to a replicated store`, the tests the harness is told to skip (`--skiptest`), each with its
//! reason. The test fails on any difference, both ways: a test that fails and is not listed
//! (a regression), a listed test that passes now or did not run (the list only shrinks: the
//! message names the lines to delete), a unit that stops where no line says, or that ran no
//! test. A test's name repeated in a unit is numbered from its second run (`NAME [2]`); a
//! harness error between tests (it skips the rest of the block) reads
//! `(error between tests after: NAME)`.
//!
//! - `TANDEM_TCL_WRITE_EXPECTED=1` writes the file from the run instead of comparing: the
//!   header and the cannot-apply section stay, each unit's lines are the run's (a line already
//!   there keeps its reason; a new one gets its error as reason, to be edited). Read the diff.
//! - `TANDEM_TCL_UNITS=type/list,multi` runs only those units (the others' lines are kept).
//!
//! ```text
//! cargo test -p tandem --test suite redis_tcl:: -- --nocapture
//! TANDEM_TCL_WRITE_EXPECTED=1 cargo test -p tandem --test suite redis_tcl::redis_tcl_units_on_tandem
//! ```
//!
//! The runner is shown right on a `redis-server` (every unit passes with an empty list) and
//! catching planted failures, both ways.

use crate::redis_support;

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use redis_support::{Cluster, RedisServer, free_port, scratch_dir, workspace_root};

/// Where `.ci/setup` unpacks the suite, from the workspace's root.
const SUITE: &str = "target/redis-tests/redis-7.0.15";

/// The units, in the order of Redis's `test_helper.tcl` (`all_tests`).
const UNITS: &[&str] = &[
    "unit/protocol",
    "unit/keyspace",
    "unit/info-command",
    "unit/type/string",
    "unit/type/incr",
    "unit/type/list",
    "unit/type/set",
    "unit/type/zset",
    "unit/type/hash",
    "unit/type/stream",
    "unit/type/stream-cgroups",
    "unit/expire",
    "unit/multi",
    "unit/pubsub",
    "unit/scripting",
    "unit/introspection",
    "unit/introspection-2",
];

/// The tags left out (Redis's `tests/README.md`): what needs replication (`SYNC`), `DEBUG`
/// or `OBJECT`, `SAVE`, `CONFIG SET maxmemory`, and the slow tests Redis's own external CI
/// leaves out too. On redis-server 7.0.15 the units then run 1,312 tests.
const TAGS: &str = "-slow -needs:repl -needs:debug -needs:save -needs:config-maxmemory";

/// The harness gives up on a unit after this long without a test starting or ending (its
/// `--timeout`). The slowest test takes about 6 s on redis-server and 55 s on a tandem
/// cluster of the test build (`ZDIFF fuzzing`: some 27,000 writes, one round trip each).
const NO_PROGRESS_SECONDS: u32 = 120;

/// The most a unit's run may take before the runner kills it: only a harness that hangs
/// despite its own timeout gets there.
const UNIT_WAIT_MAX: Duration = Duration::from_secs(20 * 60);

/// The expectations, from the crate's directory.
const EXPECTED: &str = "tests/fixtures/redis_tcl_expected.txt";

/// The section of the tests the harness skips.
const CANNOT_APPLY: &str = "## cannot apply to a replicated store";

/// The section of the tests that race two connections, run again alone when they fail.
const RACES: &str = "## races in the suite itself";

/// The most lines of one kind a failure's message shows.
const SHOWN_MAX: usize = 25;

/// The most characters of an error message kept in a line.
const MESSAGE_MAX: usize = 110;

/// What became of one test (or of the code between two tests).
#[derive(Clone, Debug, PartialEq)]
enum Outcome {
    Passed,
    /// Failed, with the first line of why.
    Failed(String),
}

/// One unit's run, as the harness printed it.
#[derive(Debug, Default)]
struct UnitRun {
    unit: String,
    /// Each test, and each error between tests, in the order reported: key and outcome.
    results: Vec<(String, Outcome)>,
    /// The tests skipped by name (`--skiptest`).
    skipped: Vec<String>,
    /// The tests and blocks left out by their tags or the mode (`[ignore]`).
    ignored: usize,
    /// Where and why the unit stopped before its end, as the expectations name it.
    aborted: Option<String>,
    seconds: f64,
    /// How often each name ran, for the numbering of repeats.
    seen: HashMap<String, usize>,
}

impl UnitRun {
    fn new(unit: &str) -> UnitRun {
        UnitRun {
            unit: unit.to_string(),
            ..UnitRun::default()
        }
    }

    /// Records a test's outcome under its name, numbered from its second run.
    fn add(&mut self, name: &str, outcome: Outcome) {
        let count = self.seen.entry(name.to_string()).or_insert(0);
        *count += 1;
        let key = match *count {
            1 => name.to_string(),
            n => format!("{name} [{n}]"),
        };
        self.results.push((key, outcome));
    }

    /// The key of the last test reported, or none before the first.
    fn last_test(&self) -> Option<&str> {
        self.results
            .iter()
            .rev()
            .map(|(key, _)| key.as_str())
            .find(|key| !key.starts_with("(error between tests"))
    }

    /// "after: NAME" or "before the first test".
    fn place(&self) -> String {
        match self.last_test() {
            Some(name) => format!("after: {name}"),
            None => "before the first test".to_string(),
        }
    }

    fn tests(&self) -> impl Iterator<Item = &(String, Outcome)> {
        self.results
            .iter()
            .filter(|(key, _)| !key.starts_with("(error between tests"))
    }

    fn passed(&self) -> usize {
        self.tests().filter(|(_, o)| *o == Outcome::Passed).count()
    }

    fn failed(&self) -> usize {
        self.tests().count() - self.passed()
    }

    /// The errors outside tests: each between two tests (it ends its block), and the one
    /// that stopped the unit.
    fn exceptions(&self) -> usize {
        self.results.len() - self.tests().count() + usize::from(self.aborted.is_some())
    }
}

/// `text` cut to [`MESSAGE_MAX`] characters, on one line.
fn shorten(text: &str) -> String {
    let line = text.lines().next().unwrap_or("").trim();
    match line.char_indices().nth(MESSAGE_MAX) {
        Some((at, _)) => format!("{}…", &line[..at]),
        None => line.to_string(),
    }
}

/// The first line of an error's message, from the lines after its `[err]` line. The harness
/// cuts the first 10 characters of a message (`assertion:`, or part of a Redis error) and,
/// for an error that is no assertion, prints the whole error next: that is taken then.
fn error_message(cut: &str, after: &[&str]) -> String {
    let cut = cut.trim();
    let next = after.first().map(|line| line.trim()).unwrap_or("");
    if !cut.is_empty() && !next.starts_with('[') && next.ends_with(cut) {
        shorten(next)
    } else {
        shorten(cut)
    }
}

/// Reads the harness's output for `unit` (no colours: it runs without `TERM`).
fn parse_run(unit: &str, output: &str) -> UnitRun {
    let mut run = UnitRun::new(unit);
    let lines: Vec<&str> = output.lines().collect();
    let in_unit = format!(" in tests/{unit}.tcl");
    let mut finished = false;
    for (at, line) in lines.iter().enumerate() {
        let rest = &lines[at + 1..];
        if let Some(text) = line.strip_prefix("[ok]: ") {
            let name = match text.rsplit_once(" (") {
                Some((name, ms)) if ms.ends_with(" ms)") => name,
                _ => text,
            };
            run.add(name, Outcome::Passed);
        } else if let Some(text) = line.strip_prefix("[err]: ") {
            if let Some(name) = text.strip_suffix(&in_unit) {
                let cut = rest.first().copied().unwrap_or("");
                let message = error_message(cut, rest.get(1..).unwrap_or(&[]));
                run.add(name, Outcome::Failed(message));
            } else {
                let key = format!("(error between tests {})", run.place());
                let message = error_message(text, rest);
                run.results.push((key, Outcome::Failed(message)));
            }
        } else if let Some(name) = line.strip_prefix("[skip]: ") {
            run.skipped.push(name.to_string());
        } else if line.starts_with("[ignore]: ") {
            run.ignored += 1;
        } else if let Some(text) = line.strip_prefix("[exception]: ") {
            let why = text.strip_prefix("Executing test client: ").unwrap_or(text);
            let why = shorten(why.trim_end_matches('.'));
            run.aborted = Some(format!("(aborted {}: {why})", run.place()));
        } else if line.starts_with("[TIMEOUT]") {
            let test = rest
                .iter()
                .find_map(|line| line.split_once("(IN PROGRESS) ").map(|(_, name)| name))
                .unwrap_or("?");
            run.aborted = Some(format!(
                "(no progress for {NO_PROGRESS_SECONDS} s in: {test})"
            ));
        } else if line.starts_with('[') && line.contains(" done]: ") {
            finished = true;
        }
    }
    if !finished && run.aborted.is_none() {
        let last = lines.last().map(|line| shorten(line)).unwrap_or_default();
        run.aborted = Some(format!("(ended unfinished {}: {last})", run.place()));
    }
    run
}

/// A section of the expectations file.
enum Section {
    CannotApply,
    Races,
    Unit(String),
}

/// The expectations file, read.
#[derive(Debug, Default)]
struct Expected {
    /// Everything before the first unit's section, kept as it is when the file is written.
    header: String,
    /// The tests the harness skips: unit, name, reason.
    cannot_apply: Vec<(String, String, String)>,
    /// The tests whose outcome depends on the order in which the kernel delivers what one
    /// client sent on two connections: unit, name, reason.
    races: Vec<(String, String, String)>,
    /// Each unit's lines: key, reason.
    units: BTreeMap<String, Vec<(String, String)>>,
}

impl Expected {
    fn path() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join(EXPECTED)
    }

    fn read() -> Expected {
        let path = Expected::path();
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        Expected::parse(&text).unwrap_or_else(|why| panic!("{}: {why}", path.display()))
    }

    fn parse(text: &str) -> Result<Expected, String> {
        let mut expected = Expected::default();
        // None: the header, before any section.
        let mut section: Option<Section> = None;
        for (number, line) in text.lines().enumerate() {
            let at = |what: &str| format!("line {}: {what}: {line}", number + 1);
            if line == CANNOT_APPLY {
                section = Some(Section::CannotApply);
            } else if line == RACES {
                section = Some(Section::Races);
            } else if let Some(unit) = line.strip_prefix("## ") {
                if !UNITS.contains(&unit) || expected.units.contains_key(unit) {
                    return Err(at("not a unit the runner runs, or its second section"));
                }
                expected.units.insert(unit.to_string(), Vec::new());
                section = Some(Section::Unit(unit.to_string()));
                continue;
            }
            if matches!(
                section,
                None | Some(Section::CannotApply) | Some(Section::Races)
            ) {
                expected.header.push_str(line);
                expected.header.push('\n');
            }
            if line.trim().is_empty() || line.starts_with('#') {
                continue;
            }
            let Some((key, reason)) = line.split_once(" | ") else {
                return Err(at("want `test | reason`"));
            };
            match &section {
                None => return Err(at("a line before any section")),
                Some(kind @ (Section::CannotApply | Section::Races)) => {
                    let (unit, rest) = (key, reason);
                    let Some((name, reason)) = rest.split_once(" | ") else {
                        return Err(at("want `unit/X | test | reason`"));
                    };
                    if !UNITS.contains(&unit) {
                        return Err(at("not a unit the runner runs"));
                    }
                    let entry = (unit.to_string(), name.to_string(), reason.to_string());
                    match kind {
                        Section::CannotApply => expected.cannot_apply.push(entry),
                        _ => expected.races.push(entry),
                    }
                }
                Some(Section::Unit(unit)) => {
                    let lines = expected.units.get_mut(unit).expect("its section");
                    if lines.iter().any(|(listed, _)| listed == key) {
                        return Err(at("listed twice"));
                    }
                    lines.push((key.to_string(), reason.to_string()));
                }
            }
        }
        Ok(expected)
    }

    /// The tests of `unit` the harness is to skip.
    fn skips(&self, unit: &str) -> Vec<&str> {
        self.cannot_apply
            .iter()
            .filter(|(listed, _, _)| listed == unit)
            .map(|(_, name, _)| name.as_str())
            .collect()
    }

    /// The tests of `unit` that race two connections.
    fn races(&self, unit: &str) -> Vec<&str> {
        self.races
            .iter()
            .filter(|(listed, _, _)| listed == unit)
            .map(|(_, name, _)| name.as_str())
            .collect()
    }

    /// The file with each run unit's lines made from `runs`.
    fn rewritten(&self, runs: &[UnitRun]) -> String {
        let mut text = self.header.clone();
        for unit in UNITS {
            let old = self.units.get(*unit).cloned().unwrap_or_default();
            let lines = match runs.iter().find(|run| run.unit == *unit) {
                None => old,
                Some(run) => {
                    let reason = |key: &str, why: &str| {
                        old.iter()
                            .find(|(listed, _)| listed == key)
                            .map_or_else(|| why.to_string(), |(_, reason)| reason.clone())
                    };
                    let mut lines: Vec<(String, String)> = run
                        .results
                        .iter()
                        .filter_map(|(key, outcome)| match outcome {
                            Outcome::Passed => None,
                            Outcome::Failed(why) => Some((key.clone(), reason(key, why))),
                        })
                        .collect();
                    if let Some(key) = &run.aborted {
                        lines.push((key.clone(), reason(key, "the unit stops here")));
                    }
                    lines
                }
            };
            let _ = writeln!(text, "## {unit}");
            for (key, reason) in lines {
                assert!(!key.contains(" | "), "a key with ` | ` in it: {key}");
                let _ = writeln!(text, "{key} | {reason}");
            }
            text.push('\n');
        }
        text.trim_end().to_string() + "\n"
    }
}

/// One kind of difference: its heading and lines.
type Delta = (&'static str, Vec<String>);

/// What differs between `runs` and `expected`, by kind; empty when all is as listed.
fn judge(expected: &Expected, runs: &[UnitRun]) -> Vec<Delta> {
    let mut regressions = Vec::new();
    let mut passing = Vec::new();
    let mut not_run = Vec::new();
    let mut empty = Vec::new();
    let none = Vec::new();
    for run in runs {
        let unit = &run.unit;
        let listed = expected.units.get(unit).unwrap_or(&none);
        let reason = |key: &str| listed.iter().find(|(k, _)| k == key).map(|(_, r)| r);
        for (key, outcome) in &run.results {
            match (outcome, reason(key)) {
                (Outcome::Failed(why), None) => regressions.push(format!("{unit}: {key}: {why}")),
                (Outcome::Passed, Some(why)) => passing.push(format!("{unit}: {key} | {why}")),
                _ => {}
            }
        }
        if let Some(key) = &run.aborted
            && reason(key).is_none()
        {
            regressions.push(format!("{unit}: {key}"));
        }
        for (key, why) in listed {
            let ran = run.results.iter().any(|(k, _)| k == key);
            if !ran && run.aborted.as_ref() != Some(key) {
                not_run.push(format!("{unit}: {key} | {why}"));
            }
        }
        // A unit that ran no test passes only if what stopped it is listed: its abort, or an
        // error between tests (a block's set-up call) before the first.
        let stop_listed = run.aborted.as_ref().is_some_and(|k| reason(k).is_some())
            || run.results.iter().any(|(k, _)| reason(k).is_some());
        if run.tests().next().is_none() && !stop_listed {
            empty.push(format!("{unit}: ran no test"));
        }
        if run.aborted.is_none() {
            for name in expected.skips(unit) {
                if !run.skipped.iter().any(|skipped| skipped == name) {
                    not_run.push(format!(
                        "{unit}: cannot apply, but no test has the name: {name}"
                    ));
                }
            }
            for name in expected.races(unit) {
                if !run.results.iter().any(|(key, _)| key == name) {
                    not_run.push(format!("{unit}: a race, but no test has the name: {name}"));
                }
            }
        }
    }
    [
        (
            "failing or stopping, and not listed (regressions)",
            regressions,
        ),
        ("passing now: delete these lines", passing),
        (
            "listed, but nothing ran under the name: delete these lines",
            not_run,
        ),
        ("no test ran", empty),
    ]
    .into_iter()
    .filter(|(_, lines)| !lines.is_empty())
    .collect()
}

/// The deltas as a failure's message: each kind with at most [`SHOWN_MAX`] lines.
fn show(deltas: &[Delta]) -> String {
    let mut text = String::new();
    for (heading, lines) in deltas {
        let _ = writeln!(text, "{} {heading}:", lines.len());
        for line in lines.iter().take(SHOWN_MAX) {
            let _ = writeln!(text, "  {line}");
        }
        if lines.len() > SHOWN_MAX {
            let _ = writeln!(text, "  … and {} more", lines.len() - SHOWN_MAX);
        }
    }
    text
}

/// Each unit's counts, as a table.
fn counts(runs: &[UnitRun]) -> String {
    let mut text = format!(
        "{:<18} {:>5} {:>6} {:>6} {:>9} {:>7} {:>7}\n",
        "unit", "ran", "passed", "failed", "exception", "skipped", "seconds"
    );
    let mut total = [0usize; 5];
    for run in runs {
        let row = [
            run.tests().count(),
            run.passed(),
            run.failed(),
            run.exceptions(),
            run.skipped.len() + run.ignored,
        ];
        for (sum, n) in total.iter_mut().zip(row) {
            *sum += n;
        }
        let unit = run.unit.strip_prefix("unit/").unwrap_or(&run.unit);
        let [ran, passed, failed, aborted, skipped] = row;
        let _ = writeln!(
            text,
            "{unit:<18} {ran:>5} {passed:>6} {failed:>6} {aborted:>9} {skipped:>7} {:>7.1}",
            run.seconds
        );
    }
    let [ran, passed, failed, aborted, skipped] = total;
    let seconds: f64 = runs.iter().map(|run| run.seconds).sum();
    let _ = writeln!(
        text,
        "{:<18} {ran:>5} {passed:>6} {failed:>6} {aborted:>9} {skipped:>7} {seconds:>7.1}",
        "all"
    );
    text
}

/// The unpacked suite, with a Tcl to run it; or the test fails saying what is missing.
fn suite() -> PathBuf {
    let dir = workspace_root().join(SUITE);
    let tcl = ["tclsh8.6", "tclsh8.7", "tclsh8.5"]
        .iter()
        .find_map(|name| redis_support::tool(name).ok());
    if !dir.join("runtest").is_file() {
        redis_support::set_up_tools();
    }
    assert!(
        tcl.is_some(),
        "Redis's runtest needs tclsh8.5, 8.6 or 8.7, which is not on PATH, and .ci/setup could \
         not install tcl (it needs root, apt-get and a network): install tcl and run again"
    );
    assert!(
        dir.join("runtest").is_file(),
        "Redis's test suite is not in {}, and .ci/setup could not fetch it (it needs curl and \
         a network to deb.debian.org): run .ci/setup and see what it says",
        dir.display()
    );
    dir
}

/// A port for the harness's own server (it also needs the port 10,000 above it).
fn harness_port() -> u16 {
    loop {
        let port = free_port();
        if port < 55_000 {
            return port;
        }
    }
}

/// Runs `unit` against `port`, skipping `skips` (and, if `only` names one, every test but
/// it); its output goes to `log`.
fn run_unit(
    suite: &Path,
    port: u16,
    unit: &str,
    skips: &[&str],
    only: Option<&str>,
    log: &Path,
) -> UnitRun {
    use std::os::unix::process::CommandExt;
    let out = std::fs::File::create(log).expect("a log file");
    let err = out.try_clone().expect("the log again");
    let mut args: Vec<String> = ["--host", "127.0.0.1", "--port", &port.to_string()]
        .map(String::from)
        .to_vec();
    args.extend(["--durable", "--single", unit, "--tags", TAGS].map(String::from));
    args.extend(["--timeout".into(), NO_PROGRESS_SECONDS.to_string()]);
    args.extend(["--baseport".into(), (harness_port() + 32).to_string()]);
    for name in skips {
        args.extend(["--skiptest".to_string(), name.to_string()]);
    }
    if let Some(name) = only {
        args.extend(["--only".to_string(), name.to_string()]);
    }
    let started = Instant::now();
    let mut child = Command::new(suite.join("runtest"))
        .args(&args)
        .current_dir(suite)
        .env_remove("TERM")
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        .spawn()
        .unwrap_or_else(|err| panic!("{}/runtest cannot start: {err}", suite.display()));
    while matches!(child.try_wait(), Ok(None)) && started.elapsed() < UNIT_WAIT_MAX {
        std::thread::sleep(Duration::from_millis(50));
    }
    if matches!(child.try_wait(), Ok(None)) {
        // The harness and the test client it started are one process group.
        let group = format!("-{}", child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = child.wait();
    }
    let output = std::fs::read_to_string(log).unwrap_or_default();
    let mut run = parse_run(unit, &output);
    run.seconds = started.elapsed().as_secs_f64();
    run
}

/// The units `TANDEM_TCL_UNITS` names (`type/list,multi`), or all of them.
fn selected_units() -> Vec<&'static str> {
    let Ok(names) = std::env::var("TANDEM_TCL_UNITS") else {
        return UNITS.to_vec();
    };
    let wanted: Vec<String> = names
        .split(',')
        .map(|name| format!("unit/{}", name.trim().trim_start_matches("unit/")))
        .collect();
    for name in &wanted {
        assert!(
            UNITS.contains(&name.as_str()),
            "TANDEM_TCL_UNITS: no unit {name}"
        );
    }
    UNITS
        .iter()
        .copied()
        .filter(|unit| wanted.iter().any(|name| name == unit))
        .collect()
}

/// Runs `units` one after the other against `port`; the harness's logs go to `logs`.
fn run_units(port: u16, units: &[&str], expected: &Expected, logs: &Path) -> Vec<UnitRun> {
    let suite = suite();
    units
        .iter()
        .map(|unit| {
            // A unit that fails part way may leave set what its own end would have set back:
            // `scripting`'s "Consistent eval error reporting" fails (tandem counts no command
            // a script calls) with `maxmemory` at 1, which would refuse the next units'
            // writes. Redis's order of units keeps every other setting as it leaves it.
            let address = std::net::SocketAddr::from(([127, 0, 0, 1], port));
            redis_support::Conn::connect(address).cmd("CONFIG SET maxmemory 0");
            let log = logs.join(format!("{}.log", unit.replace('/', "_")));
            let mut run = run_unit(&suite, port, unit, &expected.skips(unit), None, &log);
            for name in raced(&run, &expected.races(unit)) {
                let log = logs.join(format!("{}-again.log", unit.replace('/', "_")));
                let again = run_unit(&suite, port, unit, &expected.skips(unit), Some(&name), &log);
                let outcome = settle_race(&mut run, &name, &again);
                eprintln!(
                    "{unit}: {name} failed, which races two connections: alone, it {outcome}"
                );
            }
            eprintln!(
                "{unit}: {} passed, {} failed{} in {:.1} s",
                run.passed(),
                run.failed(),
                run.aborted
                    .as_ref()
                    .map(|key| format!(", stopped {key}"))
                    .unwrap_or_default(),
                run.seconds
            );
            run
        })
        .collect()
}

/// The tests of `run` that failed and may have lost a race (listed in `races`, and run once:
/// a repeated name's later runs are not run alone).
fn raced(run: &UnitRun, races: &[&str]) -> Vec<String> {
    run.results
        .iter()
        .filter(|(key, outcome)| matches!(outcome, Outcome::Failed(_)) && races.contains(&&**key))
        .filter(|(key, _)| run.seen.get(key.as_str()) == Some(&1))
        .map(|(key, _)| key.clone())
        .collect()
}

/// Takes the outcome of the raced test `name` from `again`, its run alone: what the run
/// reports, "passed" or "failed again" (a test that did not run alone keeps its failure).
fn settle_race(run: &mut UnitRun, name: &str, again: &UnitRun) -> &'static str {
    let alone = again.results.iter().find(|(key, _)| key == name);
    let Some((_, Outcome::Passed)) = alone else {
        return "failed again";
    };
    let result = run
        .results
        .iter_mut()
        .find(|(key, _)| key == name)
        .expect("a raced test of the run");
    result.1 = Outcome::Passed;
    "passed"
}

/// The units against a 3-node cluster's primary, compared with the expectations (or, with
/// `TANDEM_TCL_WRITE_EXPECTED=1`, written into them); then the replicas must be identical.
#[test]
fn redis_tcl_units_on_tandem() {
    let expected = Expected::read();
    let units = selected_units();
    // The suite and Tcl first: without them the test fails before it starts a cluster.
    suite();
    let cluster = Cluster::start("redis-tcl", 3, 128);
    let logs = scratch_dir("redis-tcl-logs");
    let runs = run_units(cluster.primary_resp().port(), &units, &expected, &logs);
    eprintln!("Redis 7.0.15's units on tandem:\n{}", counts(&runs));
    if std::env::var_os("TANDEM_TCL_WRITE_EXPECTED").is_some() {
        std::fs::write(Expected::path(), expected.rewritten(&runs)).expect("written");
        eprintln!(
            "wrote {}: read its diff (the harness's output: {})",
            Expected::path().display(),
            logs.display()
        );
        return;
    }
    let deltas = judge(&expected, &runs);
    assert!(
        deltas.is_empty(),
        "Redis's units on tandem differ from {EXPECTED}:\n{}the harness's output: {}; \
         TANDEM_TCL_WRITE_EXPECTED=1 rewrites the file from a run",
        show(&deltas),
        logs.display()
    );
    let _ = std::fs::remove_dir_all(&logs);
    let lsn = cluster.assert_replicas_identical();
    eprintln!("the three replicas are identical at LSN {lsn}");
}

/// The runner on a `redis-server`: every unit runs to its end and passes with an empty list.
/// Then on one whose `INCRBYFLOAT` is renamed away, with a list that names a passing test and
/// a stop that does not happen: the runner reports the failures and both stale lines.
#[test]
fn the_runner_passes_redis_server_and_catches_planted_failures() {
    let server = redis_support::require_redis_server();
    let logs = scratch_dir("redis-tcl-redis-server");
    let none = Expected::default();
    let runs = run_units(server.address.port(), &selected_units(), &none, &logs);
    eprintln!("{} on the same units:\n{}", server.version, counts(&runs));
    let deltas = judge(&none, &runs);
    assert!(deltas.is_empty(), "on redis-server:\n{}", show(&deltas));
    for run in &runs {
        assert!(
            run.aborted.is_none(),
            "{} stopped: {:?}",
            run.unit,
            run.aborted
        );
        assert!(run.passed() > 0, "{} passed no test", run.unit);
    }
    drop(server);

    let planted = RedisServer::start_with(&["--rename-command", "INCRBYFLOAT", ""])
        .unwrap_or_else(|why| panic!("no redis-server: {why}"));
    // The failure listed as a race is run again alone, and fails again: still a regression.
    let listed = "## races in the suite itself\n\
                  unit/type/incr | INCRBYFLOAT against non existing key | planted\n\
                  ## unit/type/incr\n\
                  INCR against non existing key | planted: it passes\n\
                  (aborted after: INCR against non existing key: planted) | planted: no stop\n";
    let expected = Expected::parse(listed).expect("a valid list");
    let runs = run_units(
        planted.address.port(),
        &["unit/type/incr"],
        &expected,
        &logs,
    );
    let text = show(&judge(&expected, &runs));
    eprintln!("planted:\n{text}");
    assert!(
        text.contains("(regressions):\n  unit/type/incr: INCRBYFLOAT against non existing key: ")
            && text.contains("unknown command 'incrbyfloat'"),
        "{text}"
    );
    assert!(
        text.contains(
            "passing now: delete these lines:\n  unit/type/incr: INCR against non \
                       existing key | planted: it passes"
        ),
        "{text}"
    );
    assert!(text.contains("planted: no stop"), "{text}");
    let _ = std::fs::remove_dir_all(&logs);
}

/// What the harness prints of a unit that runs to its end: two tests passed, one failed, a
/// name repeated, one skipped by name, two left out by tags, an error between tests.
const FINISHED: &str = "\
Testing unit/type/incr
[ok]: INCR against non existing key (1 ms)
[err]: INCR over 32bit value in tests/unit/type/incr.tcl
Expected '1' to equal or match '2' (context: type eval line 3 cmd {assert_equal 1 2})
[ok]: INCR over 32bit value (0 ms)
[skip]: INCR uses shared objects in the 0-9999 range
[ignore]: INCR can modify objects in-place: Tag: needs:debug denied
[ignore]: Tag: slow denied
[err]:  SET is not supported: a tandem node is configured by its config file
ERR CONFIG SET is not supported: a tandem node is configured by its config file
    while executing
[1/1 done]: unit/type/incr (1 seconds)
";

/// The harness's output read, and each kind of difference from a list found.
#[test]
fn the_judge_reads_the_harness_and_catches_each_difference() {
    let run = parse_run("unit/type/incr", FINISHED);
    let failed = |why: &str| Outcome::Failed(why.to_string());
    let config = "ERR CONFIG SET is not supported: a tandem node is configured by its config file";
    assert_eq!(
        run.results,
        [
            ("INCR against non existing key".into(), Outcome::Passed),
            (
                "INCR over 32bit value".into(),
                failed(
                    "Expected '1' to equal or match '2' (context: type eval line 3 cmd {assert_equal 1 2})"
                )
            ),
            ("INCR over 32bit value [2]".into(), Outcome::Passed),
            (
                "(error between tests after: INCR over 32bit value [2])".into(),
                failed(config)
            ),
        ]
    );
    assert_eq!(
        run.skipped,
        ["INCR uses shared objects in the 0-9999 range"]
    );
    assert_eq!((run.ignored, run.aborted.as_deref()), (2, None));
    assert_eq!((run.passed(), run.failed(), run.exceptions()), (2, 1, 1));

    // As listed, nothing differs; and a list written from the run reads back the same.
    let listed = "## cannot apply to a replicated store\n\
                  unit/type/incr | INCR uses shared objects in the 0-9999 range | why\n\
                  ## unit/type/incr\n\
                  INCR over 32bit value | why\n\
                  (error between tests after: INCR over 32bit value [2]) | why\n";
    let expected = Expected::parse(listed).expect("a valid list");
    let runs = [run];
    assert!(
        judge(&expected, &runs).is_empty(),
        "{:?}",
        judge(&expected, &runs)
    );
    let rewritten = Expected::parse(&expected.rewritten(&runs)).expect("a valid list");
    assert!(judge(&rewritten, &runs).is_empty());
    assert_eq!(rewritten.cannot_apply.len(), 1);

    // A regression, a line to delete of each kind, a skip that found no test.
    let listed = "## cannot apply to a replicated store\n\
                  unit/type/incr | No such test | why\n\
                  ## races in the suite itself\n\
                  unit/type/incr | No such race | why\n\
                  ## unit/type/incr\n\
                  INCR against non existing key | why\n\
                  Gone | why\n";
    let text = show(&judge(&Expected::parse(listed).expect("valid"), &runs));
    for line in [
        "2 failing or stopping, and not listed (regressions):\n  \
         unit/type/incr: INCR over 32bit value: Expected '1'",
        "unit/type/incr: (error between tests after: INCR over 32bit value [2]): ERR CONFIG SET",
        "1 passing now: delete these lines:\n  unit/type/incr: INCR against non existing key | why",
        "unit/type/incr: Gone | why",
        "unit/type/incr: cannot apply, but no test has the name: No such test",
        "unit/type/incr: a race, but no test has the name: No such race",
    ] {
        assert!(text.contains(line), "{line:?} not in:\n{text}");
    }

    // A unit stopped before its first test: a difference unless listed, with its reason.
    let stopped = "Testing unit/type/incr\n[exception]: Executing test client: ERR unknown \
                   command 'function', with args beginning with: 'flush'.\nERR unknown …\n";
    let runs = [parse_run("unit/type/incr", stopped)];
    let key = "(aborted before the first test: ERR unknown command 'function', with args \
               beginning with: 'flush')";
    assert_eq!(runs[0].aborted.as_deref(), Some(key));
    assert_eq!((runs[0].tests().count(), runs[0].exceptions()), (0, 1));
    let text = show(&judge(&Expected::default(), &runs));
    assert!(
        text.contains(&format!("(regressions):\n  unit/type/incr: {key}")),
        "{text}"
    );
    assert!(
        text.contains("1 no test ran:\n  unit/type/incr: ran no test"),
        "{text}"
    );
    let listed = Expected::parse(&format!("## unit/type/incr\n{key} | why\n")).expect("valid");
    assert!(judge(&listed, &runs).is_empty());

    // A timeout, and a harness that ended without saying why.
    let timeout = "[ok]: A (1 ms)\n[TIMEOUT]: clients state report follows.\n\
                   sock55 => (IN PROGRESS) B\n";
    let run = parse_run("unit/type/incr", timeout);
    let no_progress = format!("(no progress for {NO_PROGRESS_SECONDS} s in: B)");
    assert_eq!(run.aborted, Some(no_progress));
    let run = parse_run("unit/type/incr", "[ok]: A (1 ms)\nKilled\n");
    assert_eq!(
        run.aborted.as_deref(),
        Some("(ended unfinished after: A: Killed)")
    );

    // A race's failure is run again alone: passing then, it counts as passed; failing
    // again, or not run, it stays; a failure not listed as a race is never run again.
    let listed = "## races in the suite itself\n\
                  unit/type/incr | INCR over 32bit value | why\n\
                  unit/type/incr | INCR against non existing key | why\n";
    let expected = Expected::parse(listed).expect("valid");
    let mut run = parse_run("unit/type/incr", FINISHED);
    // Its name ran twice: only the first run's failure could be run alone.
    assert!(raced(&run, &expected.races("unit/type/incr")).is_empty());
    run.seen.insert("INCR over 32bit value".into(), 1);
    let names = raced(&run, &expected.races("unit/type/incr"));
    assert_eq!(names, ["INCR over 32bit value"]);
    let alone = |line: &str| parse_run("unit/type/incr", &format!("{line}\n[1/1 done]: x\n"));
    let failed_again = alone("[err]: INCR over 32bit value in tests/unit/type/incr.tcl\nwhy");
    assert_eq!(
        settle_race(&mut run, &names[0], &failed_again),
        "failed again"
    );
    assert_eq!(settle_race(&mut run, &names[0], &alone("")), "failed again");
    assert_eq!(run.failed(), 1);
    let passed = alone("[ok]: INCR over 32bit value (2 ms)");
    assert_eq!(settle_race(&mut run, &names[0], &passed), "passed");
    assert_eq!(run.failed(), 0);

    // A malformed list is refused, saying where.
    for bad in [
        "## unit/nope\n",
        "## unit/multi\nno reason\n",
        "stray | line\n",
    ] {
        assert!(Expected::parse(bad).is_err(), "{bad:?} was taken");
    }
}
