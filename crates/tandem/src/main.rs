//! The `tandem` command.
//!
//! It runs a node (`tandem node`) and the benchmarks; the local cluster, the demo and the
//! simulator join it as their issues land.

#![forbid(unsafe_code)]

mod bench;
mod cli;
mod demo;
mod import;
mod local;
mod logging;
mod proxy;
mod sim;
mod timeline;
mod up;

use std::process::ExitCode;

use clap::Parser;

use cli::{BenchCommand, Cli, Command};

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => return cli::exit_on_parse_error(err),
    };
    let log_level = match &cli.command {
        Command::Node(args) => args.log_level,
        Command::Proxy(args) => args.log_level,
        _ => None,
    };
    if let Err(message) = logging::init(log_level) {
        eprintln!("error: {message}");
        return ExitCode::from(2);
    }
    let result = match cli.command {
        Command::Bench {
            command: BenchCommand::Engine(args),
        } => bench::engine::run(&args),
        Command::Bench {
            command: BenchCommand::Replication(args),
        } => bench::replication::run(&args),
        Command::Bench {
            command: BenchCommand::Failover(args),
        } => demo::bench_failover(&args),
        Command::Bench {
            command: BenchCommand::Starvation(args),
        } => bench::starvation::run(&args),
        Command::Bench {
            command: BenchCommand::Resp(args),
        } => bench::resp::run(&args),
        Command::Bench {
            command: BenchCommand::Reads(args),
        } => bench::reads::run(&args),
        Command::Bench {
            command: BenchCommand::Groups(args),
        } => bench::groups::run(&args),
        Command::Bench {
            command: BenchCommand::Durability(args),
        } => bench::durability::run(&args),
        Command::Bench {
            command: BenchCommand::Mirror(args),
        } => bench::mirror::run(&args),
        Command::Node(args) => node(&args),
        Command::Sim(args) => sim::run(&args),
        Command::Up(args) => up::up(&args),
        Command::Status(args) => up::status(&args),
        Command::Kill(args) => up::kill(&args),
        Command::Start(args) => up::start(&args),
        Command::Down(args) => up::down(&args),
        Command::Demo(args) => demo::demo(&args),
        Command::Proxy(args) => proxy::run(&args),
        Command::Import(args) => import::run(&args),
        Command::Burn(args) => burn(args.threads),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Usage(message)) => {
            eprintln!("error: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Run(message)) => {
            eprintln!("error: {message}");
            ExitCode::FAILURE
        }
    }
}

/// `tandem burn`: spins `threads` threads until its standard input closes, which happens
/// when the process that started it ends, however it ends.
fn burn(threads: u32) -> Result<(), Failure> {
    std::thread::spawn(|| {
        let mut sink = Vec::new();
        let _ = std::io::Read::read_to_end(&mut std::io::stdin(), &mut sink);
        std::process::exit(0);
    });
    for _ in 1..threads {
        std::thread::spawn(spin);
    }
    spin()
}

/// Keeps a core busy for good.
fn spin() -> ! {
    let mut state = 1u64;
    loop {
        state = std::hint::black_box(
            state
                .wrapping_mul(6_364_136_223_846_793_005)
                .wrapping_add(1),
        );
    }
}

/// `tandem node --config FILE`: runs until killed.
fn node(args: &cli::NodeArgs) -> Result<(), Failure> {
    let config = tandem_runtime::config::NodeConfig::load(&args.config)
        .map_err(|err| Failure::Usage(err.to_string()))?;
    // A stop (`tandem down`, Ctrl-C, a service manager's SIGTERM, the end of standard input
    // under `--exit-on-stdin-eof`) lets the log write what it was ordered before the process
    // ends.
    let stop = tandem_runtime::StopWhen {
        signals: true,
        stdin_closes: args.exit_on_stdin_eof,
    };
    // The binary, not the runtime, knows which data models exist: the runtime serves the one
    // it is given.
    let model = tandem_workloads::model(config.group.workload.as_str(), config.group.db_mib << 20)
        .map_err(|err| {
            Failure::Usage(format!("{}: group.workload: {err}", args.config.display()))
        })?;
    tandem_runtime::run_node(config, model, stop).map_err(|err| Failure::Run(err.to_string()))
}

/// Why a command failed: a flag value that cannot work (exit code 2, like a parse error) or a
/// run that went wrong (exit code 1).
#[derive(Debug)]
pub enum Failure {
    Usage(String),
    Run(String),
}

impl Failure {
    /// What went wrong, in words, whichever kind it is.
    pub fn text(self) -> String {
        match self {
            Failure::Usage(text) | Failure::Run(text) => text,
        }
    }
}
