//! `tandem up` as a user runs it in a terminal, for the tests that need a local cluster of
//! processes: three Debit-Credit nodes of 8 MiB in a directory of their own, stopped with
//! Ctrl-C (SIGINT) when dropped.

// Each test binary that includes this module uses part of it.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct Up {
    pub child: Child,
    pub dir: PathBuf,
    /// Each node's address for stub clients, in node order.
    pub clients_at: Vec<SocketAddr>,
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
        let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
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
        let mut clients_at = Vec::new();
        for line in stdout.lines() {
            let line = line.expect("tandem up prints lines");
            // "  node 2: Redis clients at …, stub clients at 127.0.0.1:40001, status at …"
            if let Some(rest) = line.split("stub clients at ").nth(1) {
                let address = rest.split(',').next().expect("an address");
                clients_at.push(address.parse().expect("a socket address"));
            }
            if clients_at.len() == 3 {
                break;
            }
        }
        assert_eq!(clients_at.len(), 3, "tandem up did not list its nodes");
        Up {
            child,
            dir,
            clients_at,
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
