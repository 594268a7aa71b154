//! Data-driven scenarios for the primary, in etcd raft's style: each file under
//! `tests/testdata/primary/` is a script of inputs, each followed by `----` and the outputs
//! the primary produced (its `Ready`, rendered one line per item). A behaviour change shows as
//! a diff of these files. Run with `TANDEM_REWRITE=1` to write the outputs the code produces
//! now, then review the diff before committing it.
//!
//! Commands (one per block; `#` starts a comment line):
//! - `primary backups=2,3 spares=4 safety=2-safe:1 lease=2`: a new primary of view 1 at LSN 0
//!   (every key optional but `backups`); its greeting is taken and not shown.
//! - `commit [safety]`: a txn commits; its reply is released once its rule holds.
//! - `defer [safety]`: a reply with no commit of its own (a read).
//! - `ack NODE RECEIVED [APPLIED [ECHO]]`: an Ack from NODE (APPLIED defaults to RECEIVED, ECHO
//!   to the newest heartbeat tick sent).
//! - `tick [N]`, `flush`: time passes; the open batch is sealed.
//! - `prepare-removal VIEW NODE`, `prepare-spares VIEW`: the views asked for (see
//!   `Primary::prepare_removal`); the answer is printed.
//! - `install-view VIEW backups=… spares=…`, `depose VIEW`.
//!
//! Outputs: `to N: batch A..B`, `to N: heartbeat tick T released R`, `to N: pages …`,
//! `released LSN (lease_end E)`, `withheld LSN`, `not-primary LSN`, `transfer N`,
//! `fault …`, and a command's own answer.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use tandem_memory::{Segment, Strategy};
use tandem_redo::{BatchKind, BatchRef, CallId, TailLimits};
use tandem_replication::{
    Disposition, Message, NodeId, Primary, PrimaryConfig, PrimaryReady, Safety,
};

const SEGMENT_LEN: usize = 16 * 4096;

/// One `command` block of a file: its input line(s) and its expected output.
struct Block {
    comments: Vec<String>,
    command: String,
    expected: String,
}

fn parse(text: &str) -> Vec<Block> {
    let mut blocks = Vec::new();
    let mut lines = text.lines().peekable();
    loop {
        let mut comments = Vec::new();
        let mut command = None;
        for line in lines.by_ref() {
            if line.starts_with('#') {
                comments.push(line.to_owned());
            } else if !line.trim().is_empty() {
                command = Some(line.to_owned());
                break;
            }
        }
        let Some(command) = command else {
            return blocks;
        };
        assert_eq!(
            lines.next(),
            Some("----"),
            "'{command}' must be followed by ----"
        );
        let mut expected = String::new();
        while let Some(line) = lines.peek() {
            if line.is_empty() {
                lines.next();
                break;
            }
            expected.push_str(line);
            expected.push('\n');
            lines.next();
        }
        blocks.push(Block {
            comments,
            command,
            expected,
        });
    }
}

fn render(blocks: &[Block]) -> String {
    let mut text = String::new();
    for block in blocks {
        for comment in &block.comments {
            text.push_str(comment);
            text.push('\n');
        }
        text.push_str(&block.command);
        text.push_str("\n----\n");
        text.push_str(&block.expected);
        text.push('\n');
    }
    text
}

/// The primary under test, its segment and its buffers.
struct Script {
    primary: Option<Primary<u64>>,
    segment: Segment,
    ready: PrimaryReady<u64>,
    /// The newest heartbeat tick sent, the default echo of an `ack`.
    tick_sent: u64,
}

fn nodes(value: &str) -> Vec<NodeId> {
    if value.is_empty() {
        return Vec::new();
    }
    value
        .split(',')
        .map(|node| node.parse().expect("a node id"))
        .collect()
}

fn options(words: &[&str]) -> Vec<(String, String)> {
    words
        .iter()
        .map(|word| {
            let (key, value) = word.split_once('=').expect("key=value");
            (key.to_owned(), value.to_owned())
        })
        .collect()
}

impl Script {
    fn new() -> Script {
        Script {
            primary: None,
            segment: Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).expect("map"),
            ready: PrimaryReady::default(),
            tick_sent: 0,
        }
    }

    fn primary(&mut self) -> &mut Primary<u64> {
        self.primary
            .as_mut()
            .expect("a `primary` command comes first")
    }

    fn run(&mut self, command: &str) -> String {
        let words: Vec<&str> = command.split_whitespace().collect();
        let mut out = String::new();
        match words[..] {
            ["primary", ref rest @ ..] => {
                let mut config = PrimaryConfig {
                    group: 0,
                    view: 1,
                    backups: Vec::new(),
                    spares: Vec::new(),
                    safety: Safety::DEFAULT,
                    tail: TailLimits {
                        records_max: 1_000,
                        bytes_max: 1 << 20,
                    },
                    batch_bytes_max: 1 << 16,
                    heartbeat_ticks: 1,
                    resend_ticks: 2,
                    kind: BatchKind::Redo,
                    flush_batches_in_flight_max: 1,
                    lone: false,
                    lease_ticks: None,
                };
                for (key, value) in options(rest) {
                    match key.as_str() {
                        "backups" => config.backups = nodes(&value),
                        "spares" => config.spares = nodes(&value),
                        "safety" => config.safety = value.parse().expect("a safety rule"),
                        "lease" => config.lease_ticks = Some(value.parse().expect("ticks")),
                        _ => panic!("unknown key {key}"),
                    }
                }
                self.primary = Some(Primary::new(config, 0));
                // The greeting is nobody's business here.
                let mut ready = PrimaryReady::default();
                self.primary().take_ready(&mut ready);
                return "ok\n".to_owned();
            }
            ["commit", ref rest @ ..] => {
                let safety = self.safety(rest);
                assert!(self.primary().can_commit(safety), "flow control said no");
                let mut txn = self.segment.begin();
                let lsn = txn.lsn_next();
                *txn.set_pod::<u64>((lsn as usize * 8) % SEGMENT_LEN) = lsn;
                let record = txn.commit();
                let call = CallId {
                    client_id: 1,
                    seq: lsn,
                };
                self.primary
                    .as_mut()
                    .expect("a primary")
                    .commit(call, record, safety, lsn);
            }
            ["defer", ref rest @ ..] => {
                let safety = self.safety(rest);
                let lsn = self.primary().lsn_committed();
                self.primary().defer(safety, lsn);
            }
            ["ack", node, received, ref rest @ ..] => {
                let lsn_received: u64 = received.parse().expect("an LSN");
                let lsn_applied = rest
                    .first()
                    .map_or(lsn_received, |lsn| lsn.parse().unwrap());
                let tick_echoed = rest
                    .get(1)
                    .map_or(self.tick_sent, |tick| tick.parse().unwrap());
                let view = self.primary().view();
                let ack = Message::Ack {
                    view,
                    lsn_received,
                    lsn_applied,
                    lsn_durable: 0,
                    tick_echoed,
                };
                self.primary().step(node.parse().expect("a node"), ack);
            }
            ["tick", ref rest @ ..] => {
                let ticks: u64 = rest.first().map_or(1, |n| n.parse().expect("a count"));
                for _ in 0..ticks {
                    self.primary().tick();
                }
            }
            ["flush"] => self.primary().flush_now(),
            ["prepare-removal", view, node] => {
                let answer = self
                    .primary()
                    .prepare_removal(view.parse().unwrap(), node.parse().unwrap());
                let _ = writeln!(out, "removal: {answer:?}");
            }
            ["prepare-spares", view] => {
                let answer = self
                    .primary()
                    .prepare_spare_promotions(view.parse().unwrap());
                let _ = writeln!(out, "promotable: {answer:?}");
            }
            ["install-view", view, ref rest @ ..] => {
                let (mut backups, mut spares) = (Vec::new(), Vec::new());
                for (key, value) in options(rest) {
                    match key.as_str() {
                        "backups" => backups = nodes(&value),
                        "spares" => spares = nodes(&value),
                        _ => panic!("unknown key {key}"),
                    }
                }
                self.primary()
                    .install_view(view.parse().unwrap(), &backups, &spares);
            }
            ["depose", view] => self.primary().depose(view.parse().unwrap()),
            _ => panic!("unknown command '{command}'"),
        }
        self.drain(&mut out);
        if out.is_empty() {
            out.push_str("(nothing)\n");
        }
        out
    }

    fn safety(&self, words: &[&str]) -> Safety {
        words.first().map_or_else(
            || self.primary.as_ref().expect("a primary").config().safety,
            |word| word.parse().expect("a safety rule"),
        )
    }

    /// Renders and clears what the primary produced.
    fn drain(&mut self, out: &mut String) {
        let mut ready = std::mem::take(&mut self.ready);
        let primary = self.primary.as_mut().expect("a primary");
        primary.take_ready(&mut ready);
        for node in &ready.transfers {
            let _ = writeln!(out, "transfer {node}");
        }
        for (to, message) in &ready.messages {
            match message {
                Message::Batch(bytes) => {
                    let batch = BatchRef::parse(bytes).expect("a sealed batch parses");
                    let _ = writeln!(
                        out,
                        "to {to}: batch {}..{}",
                        batch.lsn_base(),
                        batch.lsn_last()
                    );
                }
                Message::Heartbeat {
                    lsn_released,
                    tick_sent,
                    ..
                } => {
                    self.tick_sent = *tick_sent;
                    let _ = writeln!(
                        out,
                        "to {to}: heartbeat tick {tick_sent} released {lsn_released}"
                    );
                }
                other => {
                    let _ = writeln!(out, "to {to}: {other:?}");
                }
            }
        }
        let tick_now = primary.tick_count();
        for disposition in ready.drain_replies(tick_now) {
            let _ = match disposition {
                Disposition::Send(reply) => match reply.lease_end {
                    Some(end) => writeln!(out, "released {} (lease ends {end})", reply.lsn),
                    None => writeln!(out, "released {}", reply.lsn),
                },
                Disposition::Withhold(reply) => writeln!(out, "withheld {}", reply.lsn),
                Disposition::NotPrimary(reply) => writeln!(out, "not-primary {}", reply.lsn),
            };
        }
        for fault in &ready.faults {
            let _ = writeln!(out, "fault {fault:?}");
        }
        ready.clear();
        self.ready = ready;
    }
}

fn run_file(path: &Path) -> Result<(), String> {
    let text = std::fs::read_to_string(path).map_err(|err| format!("{path:?}: {err}"))?;
    let mut blocks = parse(&text);
    let mut script = Script::new();
    let mut failures = Vec::new();
    for block in &mut blocks {
        let actual = script.run(&block.command);
        if actual != block.expected {
            failures.push(format!(
                "{}: '{}'\n--- expected\n{}--- actual\n{}",
                path.display(),
                block.command,
                block.expected,
                actual
            ));
            block.expected = actual;
        }
    }
    if failures.is_empty() {
        return Ok(());
    }
    if std::env::var_os("TANDEM_REWRITE").is_some() {
        std::fs::write(path, render(&blocks)).map_err(|err| format!("{path:?}: {err}"))?;
        return Ok(());
    }
    Err(failures.join("\n"))
}

#[test]
fn primary_scenarios_produce_their_recorded_outputs() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/testdata/primary");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("the testdata directory")
        .map(|entry| entry.expect("an entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    paths.sort();
    assert!(!paths.is_empty(), "no scenario in {dir:?}");
    let failures: Vec<String> = paths
        .iter()
        .filter_map(|path| run_file(path).err())
        .collect();
    assert!(
        failures.is_empty(),
        "{}\n(rewrite with TANDEM_REWRITE=1 and review the diff)",
        failures.join("\n")
    );
}
