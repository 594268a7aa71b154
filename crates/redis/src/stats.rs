//! What `INFO commandstats`, `INFO errorstats` and the command counters of `INFO stats` show:
//! one node's counts, as Redis 7.0's `call()`, `rejectCommand` and `afterErrorReply` keep
//! them. Sans-I/O: the front end that sees each request's outcome owns a [`CommandStats`],
//! counts into it ([`CommandStats::count`]) what the session says of the request
//! ([`Tally`]) with the reply it wrote, and hands a copy to a session only when one asks for
//! `INFO` ([`crate::session::ServerInfo::command_stats`]).
//!
//! Counting is an index into a table by command (the command table's index, or a place
//! after it for a subcommand Redis names on its own, `client|id`); only an error reply's code
//! is a string, in a table of at most [`ERROR_STATS_NUMBER`] codes.
//!
//! `usec` is always 0: the front end does not run a command. A call goes to the primary's
//! executor (or a backup's applier) in a batch, and the time until its answer comes back
//! holds the batch's commit (the log's write, the backups' acknowledgements) and the other
//! calls of the batch, none of which Redis's `usec` (the command's own run) holds; a
//! connection command runs in well under a microsecond, and reading the clock around each
//! would cost more than it runs. A 0 is true of no command, but it never misleads by adding
//! what the command did not spend.
//!
//! Known differences from Redis: the commands a script calls (`redis.call`) are not seen,
//! so they count neither as calls nor as errors (the script's own error reply counts once,
//! under its code); a silenced reply (`CLIENT REPLY OFF`) counts as a call without an error.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::OnceLock;

use crate::cmd::{self, SUBCOMMANDS};
use crate::resp::Argv;

/// The most error codes counted apart (Redis's `ERROR_STATS_NUMBER`, from 7.2; 7.0 has no
/// bound, which lets a script's `redis.error_reply` grow the table without end). A new code
/// past it empties the table, which then counts only [`ERRORSTATS_DISABLED`] until
/// `CONFIG RESETSTAT`.
pub const ERROR_STATS_NUMBER: usize = 128;
/// The one code counted once the table is full.
pub const ERRORSTATS_DISABLED: &str = "ERRORSTATS_DISABLED";
/// Redis looks for an error's code in its first 32 bytes (the `-` included).
const ERROR_CODE_SEARCH: usize = 32;

/// What the counters know a command by: its place in the command table, or after the table
/// for a subcommand that is no entry of its own (`CLIENT ID`, in [`SUBCOMMANDS`]' order).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StatId(u16);

impl StatId {
    /// No command: an unknown command, or a container's unknown subcommand (Redis counts
    /// only the error then).
    pub const NONE: StatId = StatId(u16::MAX);

    /// The id of the command `argv` runs, its entry being at `index` (resolved or not,
    /// [`cmd::resolve`]); a container's subcommand has its own, and an unknown one counts as
    /// the container.
    pub fn of(index: usize, argv: &Argv) -> StatId {
        let table = table();
        let Some(&(first, end)) = table.subcommands.get(index).and_then(Option::as_ref) else {
            return StatId::at(index);
        };
        let sub = argv.get(1).unwrap_or_default();
        (first..end)
            .find(|&i| SUBCOMMANDS[i].1.as_bytes().eq_ignore_ascii_case(sub))
            .map_or(StatId::at(index), |i| table.subcommand_ids[i])
    }

    /// The command Redis's `lookupCommand` finds for `argv`, given the id [`StatId::of`]
    /// found for it (its entry being at `index`): the same, but [`StatId::NONE`] for a
    /// container's subcommand that is not known here (Redis's `lastcmd` is then NULL).
    pub fn as_looked_up(self, index: usize, argv: &Argv) -> StatId {
        let unknown_subcommand = self == StatId::at(index)
            && argv.len() >= 2
            && table().subcommands.get(index).is_some_and(Option::is_some);
        if unknown_subcommand {
            StatId::NONE
        } else {
            self
        }
    }

    /// The name Redis 7 gives the command (`get`, `client|list`); `None` for
    /// [`StatId::NONE`].
    pub fn name(self) -> Option<&'static str> {
        table().names.get(usize::from(self.0)).map(String::as_str)
    }

    /// The id of the command table's entry at `index` itself.
    pub fn entry(index: usize) -> StatId {
        StatId::at(index)
    }

    /// The id of `argv`'s command as a client names it (unknown: [`StatId::NONE`]).
    pub fn of_argv(argv: &Argv) -> StatId {
        match cmd::lookup(argv.get(0).unwrap_or_default()) {
            Some((index, command)) => {
                let (index, _) = cmd::resolve(index, command, argv);
                StatId::of(index, argv)
            }
            None => StatId::NONE,
        }
    }

    fn at(index: usize) -> StatId {
        u16::try_from(index).map_or(StatId::NONE, StatId)
    }
}

/// The command table as the counters see it, built once.
struct StatTable {
    /// Entries in the command table.
    commands: usize,
    /// Per table entry: the range of [`SUBCOMMANDS`] that are its subcommands without an
    /// entry of their own, if any.
    subcommands: Vec<Option<(usize, usize)>>,
    /// Per [`SUBCOMMANDS`] entry: its id, the table's entry where it has one (`CONFIG|GET`).
    subcommand_ids: Vec<StatId>,
    /// The names Redis 7 gives each id (`get`, `config|get`, `client|id`).
    names: Vec<String>,
    resetstat: StatId,
}

fn table() -> &'static StatTable {
    static TABLE: OnceLock<StatTable> = OnceLock::new();
    TABLE.get_or_init(|| {
        let commands = cmd::commands();
        let mut names: Vec<String> = commands
            .iter()
            .map(|command| command.name.to_ascii_lowercase())
            .collect();
        let mut subcommands = vec![None; commands.len()];
        let mut subcommand_ids = Vec::with_capacity(SUBCOMMANDS.len());
        for (i, (container, sub, _)) in SUBCOMMANDS.iter().enumerate() {
            let name = format!("{container}|{sub}");
            subcommand_ids.push(match cmd::find(name.as_bytes()) {
                Some((index, _)) => StatId::at(index),
                None => StatId::at(commands.len() + i),
            });
            names.push(name.to_ascii_lowercase());
            let Some((index, _)) = cmd::find(container.as_bytes()) else {
                continue;
            };
            let range: &mut Option<(usize, usize)> = &mut subcommands[index];
            *range = Some(range.map_or((i, i + 1), |(first, _)| (first, i + 1)));
        }
        let resetstat = names
            .iter()
            .position(|name| name == "config|resetstat")
            .map_or(StatId::NONE, StatId::at);
        StatTable {
            commands: commands.len(),
            subcommands,
            subcommand_ids,
            names,
            resetstat,
        }
    })
}

/// What the counters make of one request, as the session handled it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Tally {
    /// Nothing: queued in `MULTI` (it counts when `EXEC` runs it).
    #[default]
    Nothing,
    /// Refused before it ran (unknown, arity, `NOAUTH`, rights, `BUSY`, …): a rejected call.
    Rejected(StatId),
    /// It ran: a call, failed if it replied an error.
    Ran(StatId),
    /// `EXEC` ran its block: `EXEC`'s id and the block's commands', in order, each answered
    /// by an element of the reply's array.
    Exec { exec: StatId, block: Vec<StatId> },
}

/// One command's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counts {
    calls: u64,
    rejected_calls: u64,
    failed_calls: u64,
}

/// A node's command and error counters (see the module's documentation).
#[derive(Clone, Debug, Default)]
pub struct CommandStats {
    /// By [`StatId`], grown on first use.
    commands: Vec<Counts>,
    /// By error code; at most [`ERROR_STATS_NUMBER`] codes.
    errors: BTreeMap<String, u64>,
    errors_disabled: bool,
    total_error_replies: u64,
    total_commands_processed: u64,
    total_connections_received: u64,
}

impl CommandStats {
    /// Counts a connection accepted (`total_connections_received`).
    pub fn connection_received(&mut self) {
        self.total_connections_received += 1;
    }

    /// Counts a request the session handled as `tally` says, which replied `reply` (the
    /// bytes written for it; empty if silenced). `CONFIG RESETSTAT` resets every counter
    /// first, then counts itself, as in Redis.
    pub fn count(&mut self, tally: &Tally, reply: &[u8]) {
        match tally {
            Tally::Nothing => {}
            Tally::Rejected(id) => {
                if let Some(counts) = self.counts(*id) {
                    counts.rejected_calls += 1;
                }
                self.error_reply(reply);
            }
            Tally::Ran(id) => self.ran(*id, reply),
            Tally::Exec { exec, block } => {
                // Redis counts each command of the block as `EXEC` runs it, then `EXEC`.
                let elements = crate::resp::array_elements(reply);
                if let Some(elements) = elements.filter(|e| e.len() == block.len()) {
                    for (id, element) in block.iter().zip(elements) {
                        self.ran(*id, element);
                    }
                }
                let failed = reply.first() == Some(&b'-');
                self.ran(*exec, if failed { reply } else { b"" });
            }
        }
    }

    /// Counts an error reply that no command answers (a protocol error).
    pub fn error_reply(&mut self, reply: &[u8]) {
        if reply.first() != Some(&b'-') {
            return;
        }
        self.total_error_replies += 1;
        self.count_error_code(error_code(reply));
    }

    fn ran(&mut self, id: StatId, reply: &[u8]) {
        if id == table().resetstat {
            self.reset();
        }
        self.total_commands_processed += 1;
        let failed = reply.first() == Some(&b'-');
        if let Some(counts) = self.counts(id) {
            counts.calls += 1;
            counts.failed_calls += u64::from(failed);
        }
        self.error_reply(reply);
    }

    fn counts(&mut self, id: StatId) -> Option<&mut Counts> {
        if id == StatId::NONE {
            return None;
        }
        let index = usize::from(id.0);
        if index >= self.commands.len() {
            self.commands
                .resize(table().names.len().max(index + 1), Counts::default());
        }
        self.commands.get_mut(index)
    }

    /// As Redis's `incrementErrorCount` (7.2's, bounded): a new code past the table's
    /// bound empties it and counts only [`ERRORSTATS_DISABLED`] until reset.
    fn count_error_code(&mut self, code: &[u8]) {
        if self.errors_disabled {
            return;
        }
        let code = String::from_utf8_lossy(code);
        if let Some(count) = self.errors.get_mut(code.as_ref()) {
            *count += 1;
            return;
        }
        if self.errors.len() >= ERROR_STATS_NUMBER {
            self.errors.clear();
            self.errors.insert(ERRORSTATS_DISABLED.to_string(), 1);
            self.errors_disabled = true;
            return;
        }
        self.errors.insert(code.into_owned(), 1);
    }

    /// `CONFIG RESETSTAT`: every counter back to 0 (Redis's `resetServerStats`,
    /// `resetCommandTableStats` and `resetErrorTableStats`).
    pub fn reset(&mut self) {
        *self = CommandStats::default();
    }

    pub fn total_commands_processed(&self) -> u64 {
        self.total_commands_processed
    }

    pub fn total_connections_received(&self) -> u64 {
        self.total_connections_received
    }

    pub fn total_error_replies(&self) -> u64 {
        self.total_error_replies
    }

    /// `# Commandstats`' lines: one per command that ran, or was refused or failed, in the
    /// command table's order (Redis's is its hash table's), a container's subcommands after
    /// it.
    pub fn write_commandstats(&self, text: &mut String) {
        let table = table();
        let mut line = |id: usize| {
            let Some(counts) = self.commands.get(id).filter(|c| **c != Counts::default()) else {
                return;
            };
            let _ = write!(
                text,
                "cmdstat_{}:calls={},usec=0,usec_per_call=0.00,rejected_calls={},\
                 failed_calls={}\r\n",
                safe_info_string(&table.names[id]),
                counts.calls,
                counts.rejected_calls,
                counts.failed_calls
            );
        };
        for (index, subcommands) in table.subcommands.iter().enumerate() {
            line(index);
            for sub in subcommands.map_or(0..0, |(first, end)| first..end) {
                line(table.commands + sub);
            }
        }
    }

    /// `# Errorstats`' lines, by code in byte order (as Redis's radix tree).
    pub fn write_errorstats(&self, text: &mut String) {
        for (code, count) in &self.errors {
            let _ = write!(
                text,
                "errorstat_{}:count={count}\r\n",
                safe_info_string(code)
            );
        }
    }
}

/// The code of the error reply `reply` (`-CODE message`), as Redis's `afterErrorReply` finds
/// it: up to the first space within 32 bytes, else `ERR`.
fn error_code(reply: &[u8]) -> &[u8] {
    let head = &reply[..reply.len().min(ERROR_CODE_SEARCH)];
    match head.iter().position(|&b| b == b' ') {
        Some(space) => &reply[1..space],
        None => b"ERR",
    }
}

/// Redis's `getSafeInfoString`: the characters that would break `INFO`'s lines (`#`, `:`,
/// CR, LF) become `_`.
fn safe_info_string(name: &str) -> String {
    name.replace(['#', ':', '\r', '\n'], "_")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Argv {
        let mut argv = Argv::default();
        for word in line.split(' ') {
            argv.push(word.as_bytes());
        }
        argv
    }

    fn id(line: &str) -> StatId {
        StatId::of_argv(&argv(line))
    }

    fn commandstats(stats: &CommandStats) -> String {
        let mut text = String::new();
        stats.write_commandstats(&mut text);
        text
    }

    fn errorstats(stats: &CommandStats) -> String {
        let mut text = String::new();
        stats.write_errorstats(&mut text);
        text
    }

    #[test]
    fn calls_failures_and_rejections_are_written_as_redis_writes_them() {
        let mut stats = CommandStats::default();
        stats.count(&Tally::Ran(id("SET k v")), b"+OK\r\n");
        stats.count(&Tally::Ran(id("set k v")), b"+OK\r\n");
        stats.count(
            &Tally::Ran(id("GET k")),
            b"-WRONGTYPE Operation against a key\r\n",
        );
        stats.count(
            &Tally::Rejected(id("GET")),
            b"-ERR wrong number of arguments\r\n",
        );
        stats.count(
            &Tally::Rejected(StatId::NONE),
            b"-ERR unknown command 'x'\r\n",
        );
        stats.count(&Tally::Nothing, b"+QUEUED\r\n");
        assert_eq!(
            commandstats(&stats),
            "cmdstat_get:calls=1,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=1\r\n\
             cmdstat_set:calls=2,usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=0\r\n"
        );
        assert_eq!(
            errorstats(&stats),
            "errorstat_ERR:count=2\r\nerrorstat_WRONGTYPE:count=1\r\n"
        );
        assert_eq!(stats.total_commands_processed(), 3);
        assert_eq!(stats.total_error_replies(), 3);
    }

    #[test]
    fn subcommands_are_named_as_redis_7_names_them() {
        let mut stats = CommandStats::default();
        for line in [
            "CONFIG GET maxmemory",
            "client ID",
            "CLIENT nosuch",
            "config",
        ] {
            stats.count(&Tally::Ran(id(line)), b"+OK\r\n");
        }
        let text = commandstats(&stats);
        for name in [
            "cmdstat_config|get:",
            "cmdstat_client|id:",
            "cmdstat_client:",
            "cmdstat_config:",
        ] {
            assert!(text.contains(name), "{name} in {text}");
        }
        assert_eq!(text.lines().count(), 4, "{text}");
        assert_eq!(id("nosuch"), StatId::NONE);
    }

    #[test]
    fn an_exec_counts_its_block_then_itself() {
        let mut stats = CommandStats::default();
        let tally = Tally::Exec {
            exec: id("EXEC"),
            block: vec![id("SET k v"), id("LPUSH k v")],
        };
        stats.count(&tally, b"*2\r\n+OK\r\n-WRONGTYPE Operation\r\n");
        let text = commandstats(&stats);
        assert!(text.contains(
            "cmdstat_exec:calls=1,usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=0"
        ));
        assert!(text.contains(
            "cmdstat_lpush:calls=1,usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=1"
        ));
        assert!(text.contains("cmdstat_set:calls=1,"));
        // An aborted block (a watched key changed) ran none of its commands.
        stats.count(&tally, b"*-1\r\n");
        assert!(commandstats(&stats).contains("cmdstat_exec:calls=2,"));
        assert!(commandstats(&stats).contains("cmdstat_set:calls=1,"));
        stats.count(&tally, b"-EXECABORT Transaction discarded\r\n");
        assert!(commandstats(&stats).contains(
            "cmdstat_exec:calls=3,usec=0,usec_per_call=0.00,rejected_calls=0,failed_calls=1"
        ));
        assert_eq!(
            errorstats(&stats),
            "errorstat_EXECABORT:count=1\r\nerrorstat_WRONGTYPE:count=1\r\n"
        );
    }

    #[test]
    fn an_error_code_is_its_first_word_within_32_bytes_made_safe() {
        assert_eq!(error_code(b"-MY_ERR_CODE custom msg\r\n"), b"MY_ERR_CODE");
        assert_eq!(error_code(b"-ERR\r\n"), b"ERR");
        assert_eq!(error_code(b"-\r\n"), b"ERR");
        assert_eq!(
            error_code(b"-A_CODE_LONGER_THAN_THIRTY_TWO_BYTES x\r\n"),
            b"ERR"
        );
        let mut stats = CommandStats::default();
        stats.count(&Tally::Ran(id("EVAL")), b"-a:b#c msg\r\n");
        assert_eq!(errorstats(&stats), "errorstat_a_b_c:count=1\r\n");
    }

    #[test]
    fn the_error_table_is_bounded_and_resetstat_empties_everything() {
        let mut stats = CommandStats::default();
        for i in 0..ERROR_STATS_NUMBER {
            stats.error_reply(format!("-E{i} x\r\n").as_bytes());
        }
        stats.error_reply(b"-E0 x\r\n");
        assert_eq!(errorstats(&stats).lines().count(), ERROR_STATS_NUMBER);
        assert!(errorstats(&stats).contains("errorstat_E0:count=2\r\n"));
        stats.error_reply(b"-ONE_MORE x\r\n");
        stats.error_reply(b"-E0 x\r\n");
        assert_eq!(
            errorstats(&stats),
            "errorstat_ERRORSTATS_DISABLED:count=1\r\n"
        );
        assert_eq!(stats.total_error_replies(), ERROR_STATS_NUMBER as u64 + 3);
        stats.connection_received();
        stats.count(&Tally::Ran(id("GET k")), b"$-1\r\n");
        stats.count(&Tally::Ran(id("CONFIG RESETSTAT")), b"+OK\r\n");
        assert_eq!(errorstats(&stats), "");
        assert_eq!(
            commandstats(&stats),
            "cmdstat_config|resetstat:calls=1,usec=0,usec_per_call=0.00,rejected_calls=0,\
             failed_calls=0\r\n"
        );
        assert_eq!(stats.total_error_replies(), 0);
        assert_eq!(stats.total_connections_received(), 0);
        assert_eq!(stats.total_commands_processed(), 1);
        stats.error_reply(b"-E0 x\r\n");
        assert_eq!(errorstats(&stats), "errorstat_E0:count=1\r\n");
    }
}
