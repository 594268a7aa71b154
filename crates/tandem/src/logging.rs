//! The log of a process: the runtime's `tracing` events, written to stderr one line each.
//!
//! Only the binary installs the subscriber; the library crates emit events and never choose
//! where they go. Which events pass, the first that is set wins:
//!
//! 1. `tandem node --log-level LEVEL` (error, warn, info, debug, trace);
//! 2. `RUST_LOG`, in tracing's filter syntax (`info`, `tandem_runtime=debug,warn`);
//! 3. `TANDEM_TRACE` set (any value): trace, as before the levels existed;
//! 4. info.
//!
//! A line reads `1764026402.123456  INFO node 2: primary of view 3 from LSN 40 view=3 lsn=40`:
//! the wall clock in seconds since the Unix epoch (microseconds), so that the logs of several
//! nodes line up in a failover, the level, the message, then its structured fields. Colours
//! only when stderr is a terminal.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use crate::cli::LogLevel;

/// The filter directives to use: the flag's level, else `RUST_LOG`, else `TANDEM_TRACE`'s
/// trace, else info. A pure function of its inputs, so the precedence is tested without an
/// environment.
pub fn directives(
    flag: Option<LogLevel>,
    rust_log: Option<&str>,
    tandem_trace: bool,
) -> (String, &'static str) {
    match (flag, rust_log) {
        (Some(level), _) => (level.directive().to_string(), "--log-level"),
        (None, Some(text)) if !text.trim().is_empty() => (text.to_string(), "RUST_LOG"),
        _ if tandem_trace => ("trace".to_string(), "TANDEM_TRACE"),
        _ => ("info".to_string(), "the default"),
    }
}

/// Installs the subscriber for this process. Fails with a message naming the variable when
/// `RUST_LOG` cannot be parsed.
pub fn init(flag: Option<LogLevel>) -> Result<(), String> {
    let rust_log = std::env::var("RUST_LOG").ok();
    let tandem_trace = std::env::var_os("TANDEM_TRACE").is_some();
    let (directives, source) = directives(flag, rust_log.as_deref(), tandem_trace);
    let filter = EnvFilter::builder().parse(&directives).map_err(|err| {
        format!(
            "{source} = {directives:?} is not a log filter ({err}); give a level such as \
             `info` or `warn`, or per crate `tandem_runtime=debug,info`"
        )
    })?;
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_timer(EpochMicros)
        .compact()
        .init();
    Ok(())
}

/// Seconds since the Unix epoch, with microseconds.
struct EpochMicros;

impl FormatTime for EpochMicros {
    fn format_time(&self, writer: &mut Writer<'_>) -> std::fmt::Result {
        let since_epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        write!(
            writer,
            "{}.{:06}",
            since_epoch.as_secs(),
            since_epoch.subsec_micros()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_flag_wins_over_rust_log_which_wins_over_tandem_trace() {
        let with = |flag, rust_log, trace| directives(flag, rust_log, trace).0;
        assert_eq!(with(Some(LogLevel::Warn), Some("debug"), true), "warn");
        assert_eq!(
            with(None, Some("tandem_runtime=debug"), true),
            "tandem_runtime=debug"
        );
        assert_eq!(with(None, Some(""), true), "trace");
        assert_eq!(with(None, None, true), "trace");
        assert_eq!(with(None, None, false), "info");
    }
}
