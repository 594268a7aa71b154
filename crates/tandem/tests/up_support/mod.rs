//! `tandem up` as a user runs it in a terminal, for the tests that need a local cluster of
//! processes: three Debit-Credit nodes of 8 MiB in a directory of their own, stopped with
//! Ctrl-C (SIGINT) when dropped.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::Receiver;
use std::time::{Duration, Instant};

pub struct Up {
    pub child: Child,
    pub dir: PathBuf,
    /// Each node's address for stub clients, in node order.
    pub clients_at: Vec<SocketAddr>,
    /// The lines `up` prints on its standard output, read as it prints them (a pipe nobody
    /// read would stop it once full).
    pub lines: Receiver<String>,
}

/// How `tandem up` is run beyond its flags.
#[derive(Default)]
pub struct Setting<'a> {
    /// Environment variables set for `tandem up`.
    pub env: &'a [(&'a str, &'a str)],
    /// The umask `tandem up` runs under, if not the test's own.
    pub umask: Option<u32>,
}

impl Up {
    /// Starts the cluster in a fresh directory named after `name` and returns once `up` has
    /// listed every node.
    pub fn start(name: &str) -> Up {
        let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        Up::start_in(dir)
    }

    /// `tandem up` in `dir` as it is: a cluster it holds restarts from its disks.
    pub fn start_in(dir: PathBuf) -> Up {
        Up::start_with(dir, &[])
    }

    /// `tandem up` in `dir` with `extra` flags.
    pub fn start_with(dir: PathBuf, extra: &[&str]) -> Up {
        Up::start_set(dir, extra, &Setting::default())
    }

    /// `tandem up` in `dir` with `extra` flags, its environment and umask as `setting` says.
    pub fn start_set(dir: PathBuf, extra: &[&str], setting: &Setting<'_>) -> Up {
        let mut command = match setting.umask {
            Some(umask) => {
                let mut shell = Command::new("sh");
                shell
                    .arg("-c")
                    .arg(format!("umask {umask:03o} && exec \"$0\" \"$@\""))
                    .arg(env!("CARGO_BIN_EXE_tandem"));
                shell
            }
            None => Command::new(env!("CARGO_BIN_EXE_tandem")),
        };
        for (name, value) in setting.env {
            command.env(name, value);
        }
        let mut child = command
            .args([
                "up",
                "--workload",
                "debit-credit",
                "--nodes",
                "3",
                "--db-mib",
                "8",
            ])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("tandem up starts");
        let stdout = BufReader::new(child.stdout.take().expect("piped"));
        let (to_test, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in stdout.lines() {
                let Ok(line) = line else { break };
                if to_test.send(line).is_err() {
                    break;
                }
            }
        });
        let mut up = Up {
            child,
            dir,
            clients_at: Vec::new(),
            lines,
        };
        // "  node 2: Redis clients at …, stub clients at 127.0.0.1:40001, status at …"
        while up.clients_at.len() < 3 {
            let Some(line) = up.next_line(Duration::from_secs(180)) else {
                panic!("tandem up did not list its nodes");
            };
            if let Some(rest) = line.split("stub clients at ").nth(1) {
                let address = rest.split(',').next().expect("an address");
                up.clients_at
                    .push(address.parse().expect("a socket address"));
            }
        }
        up
    }

    /// The next line `up` prints, waiting at most `within` (`None`: none came, or `up` ended).
    pub fn next_line(&self, within: Duration) -> Option<String> {
        self.lines.recv_timeout(within).ok()
    }

    /// The first line `up` prints from now on that `wanted` accepts, within `within` (a bound
    /// against a hang, not a measured threshold).
    pub fn line_where(&self, within: Duration, wanted: impl Fn(&str) -> bool) -> Option<String> {
        let deadline = Instant::now() + within;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = self.next_line(left)?;
            if wanted(&line) {
                return Some(line);
            }
        }
    }
}

impl Up {
    /// Ctrl-C: `up` stops every node and ends; the directory and what the nodes wrote stay.
    pub fn stop(&mut self) {
        if self.child.try_wait().is_ok_and(|exit| exit.is_none()) {
            let _ = Command::new("kill")
                .args(["-INT", &self.child.id().to_string()])
                .status();
        }
        let _ = self.child.wait();
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        self.stop();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The arguments of a Debit-Credit deposit of `amount` into `account`, through teller 0 of
/// branch 0.
pub fn deposit(account: u32, amount: i32) -> Vec<u8> {
    let mut args = Vec::new();
    for field in [account, 0, 0] {
        args.extend_from_slice(&field.to_le_bytes());
    }
    args.extend_from_slice(&amount.to_le_bytes());
    args
}
