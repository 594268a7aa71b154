//! The blocking commands (t_list.c's and t_zset.c's): `BLPOP`, `BRPOP`, `BRPOPLPUSH`,
//! `BLMOVE`, `BLMPOP`, `BZPOPMIN`, `BZPOPMAX` and `BZMPOP`; `XREAD` and `XREADGROUP` with
//! `BLOCK` (the streams family's) wait the same way ([`BLOCK_OPTION`]).
//!
//! A stream read that waits reads, on every try, after the IDs it first resolved: its
//! `$` (the stream's last ID when it blocked) would otherwise move with each entry added,
//! and it would never be served. Its first try fails with [`would_block_after`]'s text,
//! which names those IDs, and the front end puts them in place of the call's last arguments
//! ([`crate::wire::CallArgs::replace_last`]) before it tries again.
//!
//! A call never waits inside the store: the store runs one call at a time, and a call that
//! waited would stop every other. What waits is the connection. A blocking command that
//! finds something to pop runs as its twin that does not block (`BLPOP` as `LPOP`, `BLMOVE`
//! as `LMOVE`) and answers in Redis's shape; one that finds nothing answers as its call may
//! wait ([`Waiting`], carried in the call's arguments):
//! - `Never` (inside `MULTI`, in a script, a caller that cannot wait): a null, as Redis
//!   answers a client that may not block;
//! - `MayBlock` and `Awakened`: the call fails with [`WOULD_BLOCK`], having written nothing.
//!   The connection's front end then parks it ([`Blocks`] says where its timeout is and what
//!   it answers when the time is up) and tries it again, `Awakened`, after a write commits.
//!   A pop's reply leaves, as every write's, only once the group's safety rule holds, so no
//!   failover takes back an element a client was handed.
//!
//! A pop served, at once or on a try after a wake-up, publishes the keyspace events of its
//! twin that does not block (`lpop`, `del`, …), as Redis does. Nothing here tells them: they
//! belong where the twins and these share the pop itself (the list pops' `pop_from` and
//! `move_one` in [`super::lists`], the sorted-set pops' `pop_members` in [`super::zsets`]),
//! so that both forms tell the same events in the same order.
//!
//! Every try checks every argument in Redis's order before it pops anything. An awakened
//! try passes over a source key that now holds another type, since Redis 7.0 wakes a client
//! only for a key that became a list or a sorted set; a first try refuses it, `WRONGTYPE`.

use super::lists::{End, move_one, pop_first_list, pop_from};
use super::zsets::{parse_mpop, pop_first_zset, pop_members};
use super::{CmdError, Command, Ctx, Write, arg, data};
use crate::db::{Key, Kind};
use crate::num;
use crate::resp::{Argv, ReplyWriter};
use crate::wire::Waiting;

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("BLMOVE", 6, Write, (1, 2, 1), true, blmove).blocking(TIMEOUT_LAST),
    // Their keys follow a count: Redis 7.0 names no fixed key range (movablekeys).
    data("BLMPOP", -5, Write, (0, 0, 0), false, blmpop).blocking(TIMEOUT_FIRST),
    data("BLPOP", -3, Write, (1, -2, 1), false, blpop).blocking(TIMEOUT_LAST),
    data("BRPOP", -3, Write, (1, -2, 1), false, brpop).blocking(TIMEOUT_LAST),
    data("BRPOPLPUSH", 4, Write, (1, 2, 1), true, brpoplpush).blocking(TIMEOUT_LAST),
    data("BZMPOP", -5, Write, (0, 0, 0), false, bzmpop).blocking(TIMEOUT_FIRST),
    data("BZPOPMAX", -3, Write, (1, -2, 1), false, bzpopmax).blocking(TIMEOUT_LAST),
    data("BZPOPMIN", -3, Write, (1, -2, 1), false, bzpopmin).blocking(TIMEOUT_LAST),
];

/// What a blocking call fails with when its connection is to wait: never a client's reply,
/// since only a front end that parks the connection asks for it ([`Waiting::MayBlock`]).
pub const WOULD_BLOCK: &str =
    "TANDEMWAIT nothing to pop yet: the connection waits for a write (an internal answer)";

/// Where a blocking command's timeout is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TimeoutAt {
    /// The last argument (`BLPOP key… timeout`), in seconds.
    Last,
    /// The first argument (`BLMPOP timeout numkeys key…`), in seconds.
    First,
    /// After a `BLOCK` option, in milliseconds (`XREAD BLOCK ms STREAMS …`); a call without
    /// one does not block.
    BlockOption,
}

/// Where `XREAD`'s and `XREADGROUP`'s timeout is.
pub const BLOCK_OPTION: Blocks = Blocks {
    timeout_at: TimeoutAt::BlockOption,
};

/// What a stream read that found nothing fails with when its connection is to wait: the
/// IDs each of its streams is to be read after on its next tries, in its keys' order.
pub fn would_block_after(ids: &[String]) -> String {
    format!("{WOULD_BLOCK}; after {}", ids.join(" "))
}

/// Whether `message` is what a call that would block fails with, and if it names IDs to
/// read after ([`would_block_after`]), those.
pub fn would_block(message: &str) -> Option<Vec<&str>> {
    let rest = message.strip_prefix(WOULD_BLOCK)?;
    if rest.is_empty() {
        return Some(Vec::new());
    }
    let ids = rest.strip_prefix("; after ")?;
    Some(ids.split(' ').collect())
}

/// What a blocking command that found nothing answers where it may not wait: Redis's null
/// array (`BLPOP`) or null bulk string (`BLMOVE`). When a wait's time is up, every one
/// answers a null array, as Redis 7.0's `replyToBlockedClientTimedOut`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum NullReply {
    Array,
    Bulk,
}

/// How a blocking command leaves its connection waiting: where its timeout is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocks {
    timeout_at: TimeoutAt,
}

const TIMEOUT_LAST: Blocks = Blocks {
    timeout_at: TimeoutAt::Last,
};
const TIMEOUT_FIRST: Blocks = Blocks {
    timeout_at: TimeoutAt::First,
};

impl Command {
    /// The command, blocking as `blocks` says.
    pub(crate) const fn blocking(mut self, blocks: Blocks) -> Command {
        self.blocks = Some(blocks);
        self
    }
}

impl Blocks {
    /// How long a connection waits for the call `argv`, in milliseconds, 0 for as long as it
    /// takes; `None` if the timeout is one Redis refuses (the call then answers the error
    /// without waiting).
    pub fn timeout_ms(&self, argv: &Argv) -> Option<u64> {
        let at = match self.timeout_at {
            TimeoutAt::Last => argv.len().checked_sub(1)?,
            TimeoutAt::First => 1,
            TimeoutAt::BlockOption => return block_option_ms(argv),
        };
        parse_timeout_ms(argv.get(at)?).ok()
    }

    /// Writes what the call answers when its time is up (or `CLIENT UNBLOCK` ends its wait
    /// as a timeout): a null array, whatever the command.
    pub fn write_timeout_reply(&self, out: &mut ReplyWriter<'_>) {
        out.null_array();
    }
}

fn write_null(null: NullReply, out: &mut ReplyWriter<'_>) {
    match null {
        NullReply::Array => out.null_array(),
        NullReply::Bulk => out.null(),
    }
}

/// Whether a script may not call command `name` (Redis 7.0's `noscript` flag): the blocking
/// commands but `BLMPOP` and `BZMPOP`, which a script calls and which then answer at once.
pub fn refused_in_scripts(name: &str) -> bool {
    matches!(
        name,
        "BLMOVE" | "BLPOP" | "BRPOP" | "BRPOPLPUSH" | "BZPOPMAX" | "BZPOPMIN"
    )
}

/// The timeout of `XREAD`'s or `XREADGROUP`'s `BLOCK` option (a non-negative integer of
/// milliseconds), found as their parser finds it: options before `STREAMS`, `COUNT` and
/// `BLOCK` with a value, `GROUP` with two. `None` without one, or with one Redis refuses
/// (the call then answers the error without waiting).
fn block_option_ms(argv: &Argv) -> Option<u64> {
    let mut i = 1;
    let mut timeout = None;
    while i < argv.len() {
        let option = argv.get(i)?.to_ascii_uppercase();
        match option.as_slice() {
            b"BLOCK" => {
                let ms = num::parse_i64(argv.get(i + 1)?)?;
                timeout = Some(u64::try_from(ms).ok()?);
                i += 2;
            }
            b"COUNT" => i += 2,
            b"GROUP" => i += 3,
            b"NOACK" => i += 1,
            _ => break,
        }
    }
    timeout
}

/// 2^63, the least `f64` past `i64::MAX`.
const I64_PAST_MAX: f64 = 9_223_372_036_854_775_808.0;

/// A timeout in seconds, as Redis's `getTimeoutFromObjectOrReply`: a long double (`0.1`,
/// `1e3`, `0x10`) rounded up to milliseconds; 0 waits for as long as it takes.
fn parse_timeout_ms(text: &[u8]) -> Result<u64, CmdError> {
    let seconds = num::parse_long_double_like(text).ok_or(CmdError::fixed(
        "ERR timeout is not a float or out of range",
    ))?;
    let ms = (seconds * 1000.0).ceil();
    // Redis converts to a long long, and a value past its range becomes its least (x86-64's
    // conversion), which is negative: `1e16` seconds is refused as negative there too.
    let in_range = (0.0..I64_PAST_MAX).contains(&ms);
    if !in_range {
        return Err(CmdError::fixed("ERR timeout is negative"));
    }
    Ok(ms as u64)
}

/// Answers a call that found nothing: a null if it may not wait, else [`WOULD_BLOCK`].
fn found_nothing(
    ctx: &Ctx<'_, '_>,
    null: NullReply,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    match ctx.waiting {
        Waiting::Never => {
            write_null(null, out);
            Ok(())
        }
        Waiting::MayBlock | Waiting::Awakened => Err(CmdError::WouldBlock),
    }
}

/// Source key `name` if it holds `kind`. One of another type is refused, `WRONGTYPE`, unless
/// the call is awakened: then it is passed over (see the module's notes).
fn source(ctx: &Ctx<'_, '_>, name: &[u8], kind: Kind) -> Result<Option<Key>, CmdError> {
    match ctx.find_typed(name, kind) {
        Err(_) if ctx.waiting == Waiting::Awakened => Ok(None),
        found => found,
    }
}

fn blpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop_one_of_lists(ctx, argv, out, End::Head)
}

fn brpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop_one_of_lists(ctx, argv, out, End::Tail)
}

/// `BLPOP`/`BRPOP key… timeout`: pops from the first of the keys that holds a list, answering
/// the key and the element.
fn pop_one_of_lists(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    end: End,
) -> Result<(), CmdError> {
    parse_timeout_ms(arg(argv, argv.len() - 1))?;
    for i in 1..argv.len() - 1 {
        let name = arg(argv, i);
        if source(ctx, name, Kind::List)?.is_none() {
            continue;
        }
        let popped = pop_from(ctx, name, end, 1);
        out.array(2);
        out.bulk(name);
        out.bulk(&popped[0]);
        return Ok(());
    }
    found_nothing(ctx, NullReply::Array, out)
}

/// `BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout`, as `LMOVE` once the source
/// holds a list.
fn blmove(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let from = End::parse(arg(argv, 3))?;
    let to = End::parse(arg(argv, 4))?;
    parse_timeout_ms(arg(argv, 5))?;
    move_when_found(ctx, argv, out, from, to)
}

/// `BRPOPLPUSH source destination timeout`: `BLMOVE source destination RIGHT LEFT timeout`.
fn brpoplpush(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    parse_timeout_ms(arg(argv, 3))?;
    move_when_found(ctx, argv, out, End::Tail, End::Head)
}

/// The move of `BLMOVE` and `BRPOPLPUSH`: a destination of another type is refused only once
/// there is an element to move, as Redis refuses it when the client wakes.
fn move_when_found(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    from: End,
    to: End,
) -> Result<(), CmdError> {
    if source(ctx, arg(argv, 1), Kind::List)?.is_none() {
        return found_nothing(ctx, NullReply::Bulk, out);
    }
    move_one(ctx, argv, out, from, to)
}

/// `BLMPOP timeout numkeys key… LEFT|RIGHT [COUNT n]`, as `LMPOP` once a key holds a list.
fn blmpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let (keys, right, count) = parse_mpop(argv, 2, ["LEFT", "RIGHT"])?;
    parse_timeout_ms(arg(argv, 1))?;
    let end = if right { End::Tail } else { End::Head };
    let find = |ctx: &Ctx<'_, '_>, name: &[u8]| source(ctx, name, Kind::List);
    if pop_first_list(ctx, argv, 3..3 + keys, end, count, find, out)? {
        return Ok(());
    }
    found_nothing(ctx, NullReply::Array, out)
}

fn bzpopmin(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop_one_of_zsets(ctx, argv, out, false)
}

fn bzpopmax(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop_one_of_zsets(ctx, argv, out, true)
}

/// `BZPOPMIN`/`BZPOPMAX key… timeout`: pops the least (greatest) member of the first of the
/// keys that holds a sorted set, answering the key, the member and its score.
fn pop_one_of_zsets(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    max: bool,
) -> Result<(), CmdError> {
    parse_timeout_ms(arg(argv, argv.len() - 1))?;
    for i in 1..argv.len() - 1 {
        let name = arg(argv, i);
        if source(ctx, name, Kind::ZSet)?.is_none() {
            continue;
        }
        let (member, score) = pop_members(ctx, name, max, 1)
            .pop()
            .expect("a sorted set holds a member");
        out.array(3);
        out.bulk(name);
        out.bulk(&member);
        out.double(score);
        return Ok(());
    }
    found_nothing(ctx, NullReply::Array, out)
}

/// `BZMPOP timeout numkeys key… MIN|MAX [COUNT n]`, as `ZMPOP` once a key holds a sorted
/// set.
fn bzmpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let (keys, max, count) = parse_mpop(argv, 2, ["MIN", "MAX"])?;
    parse_timeout_ms(arg(argv, 1))?;
    let find = |ctx: &Ctx<'_, '_>, name: &[u8]| source(ctx, name, Kind::ZSet);
    if pop_first_zset(ctx, argv, 3..3 + keys, max, count, find, out)? {
        return Ok(());
    }
    found_nothing(ctx, NullReply::Array, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timeouts_are_read_as_redis_reads_them() {
        let ms =
            |text: &str| parse_timeout_ms(text.as_bytes()).map_err(|err| err.text().to_string());
        assert_eq!(ms("0"), Ok(0));
        assert_eq!(ms("1"), Ok(1000));
        assert_eq!(ms("0.001"), Ok(1));
        assert_eq!(ms("0.0001"), Ok(1), "rounded up");
        assert_eq!(
            ms("-0.0001"),
            Ok(0),
            "rounded up to zero: waits for as long as it takes"
        );
        assert_eq!(ms("0x10"), Ok(16_000));
        assert_eq!(ms("1e15"), Ok(1_000_000_000_000_000_000));
        for negative in ["-1", "1e16", "inf", "9223372036854775807", "1e400"] {
            assert_eq!(
                ms(negative),
                Err("ERR timeout is negative".into()),
                "{negative}"
            );
        }
        for refused in ["abc", "nan", " 1", "", "1 "] {
            let err = Err("ERR timeout is not a float or out of range".into());
            assert_eq!(ms(refused), err, "{refused:?}");
        }
    }
}
