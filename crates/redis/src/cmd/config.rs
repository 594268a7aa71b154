//! `CONFIG GET` and `CONFIG SET` (config.c): the run-time parameters of [`crate::params`],
//! which live in the segment, and the few of Redis's other parameters clients ask for.
//!
//! Each is a command of its own in the table (`CONFIG|GET` a read, `CONFIG|SET` a write, as
//! Redis 7's table has them), which the session calls for `CONFIG GET …` and `CONFIG SET …`
//! ([`super::resolve`]): a `CONFIG SET` is one txn, replicated like any write, so every node
//! of the group answers `CONFIG GET` alike and a failover keeps what it set; a backup answers
//! `CONFIG GET` from its copy. `CONFIG SET` sets every pair it is given or, if one is refused,
//! none, as Redis does.
//!
//! Beyond the table, `CONFIG GET` answers `save` (`""`: tandem takes no scheduled snapshots,
//! its log persists every write), `appendonly` (`no`) and `databases` (16). `CONFIG SET`
//! takes `save ""` and `appendonly no`, which change nothing, and refuses the rest of them,
//! and every parameter it does not know, in Redis's words; the parameters redis-server fixes
//! when it starts ([`IMMUTABLE`]) it refuses as Redis does, as immutable. `maxmemory` unset
//! answers the database's size, fixed when its nodes start.

use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::params::{self, Param};
use crate::resp::{Argv, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("CONFIG|GET", -3, Read, (0, 0, 0), false, get),
    data("CONFIG|SET", -4, Write, (0, 0, 0), false, set),
];

/// Redis's default `busy-reply-threshold`, answered where no node's setting is known.
const BUSY_REPLY_THRESHOLD_REDIS_MS: u64 = 5000;

/// A parameter `CONFIG GET` answers: one of the segment's, or a fixed one.
enum Answer {
    Param(&'static Param),
    Fixed(&'static str),
}

/// The parameters outside the segment that clients ask for.
const FIXED: &[&str] = &["save", "appendonly", "databases"];

/// Redis 7.0.15's parameters fixed when redis-server starts (`IMMUTABLE_CONFIG` in its
/// `config.c`), which `CONFIG SET` refuses as immutable whatever the value. What they set
/// (the process, its sockets, its files, its threads) a tandem node takes from its config
/// file when it starts, so they are as fixed here; a client that tries one learns that
/// rather than that the parameter is unknown.
const IMMUTABLE: &[&str] = &[
    "rdbchecksum",
    "daemonize",
    "io-threads-do-reads",
    "always-show-logo",
    "set-proc-title",
    "syslog-enabled",
    "cluster-enabled",
    "disable-thp",
    "aclfile",
    "unixsocket",
    "pidfile",
    "cluster-config-file",
    "syslog-ident",
    "appendfilename",
    "appenddirname",
    "server_cpulist",
    "bio_cpulist",
    "aof_rewrite_cpulist",
    "bgsave_cpulist",
    "logfile",
    "supervised",
    "syslog-facility",
    "enable-protected-configs",
    "enable-debug-command",
    "enable-module-command",
    "databases",
    "io-threads",
    "tcp-backlog",
    "cluster-port",
    "unixsocketperm",
    "socket-mark-id",
    "replicaof",
    "slaveof",
];

fn get(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    // (the name as answered, what it is), in the order first matched.
    let mut found: Vec<(Vec<u8>, Answer)> = Vec::new();
    let mut push = |answered: &[u8], answer: Answer| {
        if !found
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case(answered))
        {
            found.push((answered.to_vec(), answer));
        }
    };
    for pattern in argv.iter().skip(2) {
        // Like Redis, a name without glob characters is answered as it was asked.
        let exact = !pattern.iter().any(|b| matches!(b, b'[' | b'*' | b'?'));
        let lower = pattern.to_ascii_lowercase();
        let matches = |name: &str| {
            if exact {
                lower == name.as_bytes()
            } else {
                crate::glob::matches(&lower, name.as_bytes())
            }
        };
        let answered = |name: &'static str| if exact { pattern } else { name.as_bytes() };
        for param in params::PARAMS {
            for name in std::iter::once(param.name).chain(param.alias) {
                if matches(name) {
                    push(answered(name), Answer::Param(param));
                }
            }
        }
        for &name in FIXED {
            if matches(name) {
                push(answered(name), Answer::Fixed(name));
            }
        }
    }
    out.map(found.len());
    for (name, answer) in found {
        out.bulk(&name);
        out.bulk(value(ctx, &answer).as_bytes());
    }
    Ok(())
}

fn value(ctx: &Ctx<'_, '_>, answer: &Answer) -> String {
    match answer {
        Answer::Param(param) if param.name == params::BUSY_REPLY_THRESHOLD.name => {
            let node_default = ctx
                .scripts
                .as_ref()
                .map(|engine| engine.watch().busy_reply_threshold_default_ms())
                .unwrap_or(BUSY_REPLY_THRESHOLD_REDIS_MS);
            let ms = ctx.layout.params.busy_reply_threshold_ms(&ctx.access);
            ms.unwrap_or(node_default).to_string()
        }
        Answer::Param(param) if param.name == params::MAXMEMORY.name => {
            match ctx.layout.params.get(&ctx.access, param) {
                0 => ctx.layout.segment_len.to_string(),
                bytes => bytes.to_string(),
            }
        }
        Answer::Param(param) if param.name == params::MAXMEMORY_SAMPLES.name => {
            ctx.layout.params.maxmemory_samples(&ctx.access).to_string()
        }
        Answer::Param(param) => params::format(param, ctx.layout.params.get(&ctx.access, param)),
        Answer::Fixed("save") => String::new(),
        Answer::Fixed("appendonly") => "no".to_owned(),
        Answer::Fixed("databases") => crate::db::DB_COUNT.to_string(),
        Answer::Fixed(name) => unreachable!("{name} is not a fixed parameter"),
    }
}

/// What a pair of `CONFIG SET` does, once checked.
enum Change {
    Param(&'static Param, u64),
    /// A fixed parameter set to the value it has.
    Nothing,
}

fn set(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if !(argv.len() - 2).is_multiple_of(2) {
        return Err(CmdError::SYNTAX);
    }
    let pairs: Vec<(&[u8], &[u8])> = (2..argv.len())
        .step_by(2)
        .map(|at| (arg(argv, at), arg(argv, at + 1)))
        .collect();
    // As Redis: every name is checked before any value. A name given twice is refused; a
    // name and its alias are two names (the later one wins), as in Redis 7.0.
    let mut named: Vec<Vec<u8>> = Vec::with_capacity(pairs.len());
    for &(name, _) in &pairs {
        let known = params::find(name).is_some() || fixed(name).is_some() || immutable(name);
        if !known {
            return Err(CmdError::owned(format!(
                "ERR Unknown option or number of arguments for CONFIG SET - '{}'",
                String::from_utf8_lossy(name)
            )));
        }
        if immutable(name) {
            return Err(failed(name, "can't set immutable config"));
        }
        let lower = name.to_ascii_lowercase();
        if named.contains(&lower) {
            return Err(failed(&lower, "duplicate parameter"));
        }
        named.push(lower);
    }
    let mut changes = Vec::with_capacity(pairs.len());
    for &(name, text) in &pairs {
        // A known parameter's refusal names it as Redis's table does: in lower case.
        let lower = name.to_ascii_lowercase();
        let change = change(name, text).and_then(|change| fits(ctx, change));
        changes.push(change.map_err(|why| failed(&lower, &why))?);
    }
    let layout = ctx.layout;
    for change in changes {
        if let Change::Param(param, word) = change {
            layout.params.set(ctx.txn(), param, word);
        }
    }
    out.ok();
    Ok(())
}

/// What setting `name` to `text` does, or why it is refused.
fn change(name: &[u8], text: &[u8]) -> Result<Change, String> {
    if let Some(param) = params::find(name) {
        let word = params::parse(param, text)?;
        if let Some(why) = params::unserved(param, word) {
            return Err(why);
        }
        return Ok(Change::Param(param, word));
    }
    match fixed(name).expect("the names were checked") {
        "save" if text.is_empty() => Ok(Change::Nothing),
        "save" if !save_params_valid(text) => Err("Invalid save parameters".to_owned()),
        "save" => Err(
            "tandem takes no scheduled snapshots (its log persists every write, \
                       and SAVE writes one when asked): only \"\" is served"
                .to_owned(),
        ),
        "appendonly" if text.eq_ignore_ascii_case(b"no") => Ok(Change::Nothing),
        "appendonly" if text.eq_ignore_ascii_case(b"yes") => Err(
            "tandem keeps no append-only file: its write-ahead log persists every write".to_owned(),
        ),
        "appendonly" => Err("argument must be 'yes' or 'no'".to_owned()),
        other => unreachable!("{other} was refused with the names"),
    }
}

/// `change`, if the database can take it: a `maxmemory` past the database's size is
/// refused, since nothing could be stored beyond it.
fn fits(ctx: &Ctx<'_, '_>, change: Change) -> Result<Change, String> {
    match change {
        Change::Param(param, bytes)
            if param.name == params::MAXMEMORY.name && bytes > ctx.layout.segment_len as u64 =>
        {
            Err(format!(
                "tandem's database holds {} bytes (group.db_mib, which every node of the group \
                 is started with): maxmemory may lower that, not raise it",
                ctx.layout.segment_len
            ))
        }
        change => Ok(change),
    }
}

/// The fixed parameter called `name`, without case.
fn fixed(name: &[u8]) -> Option<&'static str> {
    FIXED
        .iter()
        .copied()
        .find(|fixed| fixed.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether `name` is one of Redis's parameters fixed at start ([`IMMUTABLE`]), without case.
fn immutable(name: &[u8]) -> bool {
    IMMUTABLE
        .iter()
        .any(|immutable| immutable.as_bytes().eq_ignore_ascii_case(name))
}

/// Whether `text` is a list of `seconds changes` pairs, as Redis's `save` takes.
fn save_params_valid(text: &[u8]) -> bool {
    let words: Vec<&[u8]> = text
        .split(|b| *b == b' ')
        .filter(|word| !word.is_empty())
        .collect();
    words.len().is_multiple_of(2)
        && words
            .iter()
            .all(|word| crate::num::parse_i64(word).is_some_and(|n| n >= 0))
}

/// Redis's refusal of a `CONFIG SET` pair.
fn failed(name: &[u8], why: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR CONFIG SET failed (possibly related to argument '{}') - {why}",
        String::from_utf8_lossy(name)
    ))
}
