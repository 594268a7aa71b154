//! String commands (t_string.c): `GET`, `SET` and its relatives, counters, ranges.

use super::{CmdError, Ctx, STRING_LEN_MAX, arg, arity_error, int_arg};
use crate::db::{EncodingMark, Key, Kind};
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

/// What a write does to a key's time to live.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Ttl {
    /// The key no longer expires (`SET` without `KEEPTTL`).
    Clear,
    /// The key keeps its expiry (`KEEPTTL`, `INCR`, `APPEND`, `SETRANGE`).
    Keep,
    /// The key expires at this Unix millisecond.
    At(u64),
}

/// Sets `key` to the string `value`, replacing whatever value it held.
pub(super) fn put(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    value: &[u8],
    ttl: Ttl,
) -> Result<(), CmdError> {
    let layout = ctx.layout;
    let existing = ctx.find_for_write(key);
    let expire_at_ms = match (ttl, &existing) {
        (Ttl::Keep, Some(old)) => old.head.expire_at_ms,
        (Ttl::At(at), _) => at,
        _ => 0,
    };
    let target = match existing {
        Some(old) if old.kind() == Kind::String && value.len() <= old.string_capacity() => old,
        Some(old) => {
            ctx.delete(&old);
            layout.create(ctx.txn(), key, Kind::String, value.len())?
        }
        None => {
            let created = layout.create(ctx.txn(), key, Kind::String, value.len())?;
            ctx.notify(EventClass::New, "new", key);
            created
        }
    };
    let txn = ctx.txn();
    txn.set_range(target.string_at(), value.len())
        .copy_from_slice(value);
    layout.set_value_len(txn, &target, value.len() as u64);
    layout.touch(txn, &target);
    if target.mark() != EncodingMark::Derived {
        // A new value is a new object to Redis: its encoding follows from its bytes.
        layout.set_mark(txn, &target, EncodingMark::Derived);
    }
    layout.set_expire(txn, &target, expire_at_ms)?;
    Ok(())
}

/// The string `key` holds: `None` if it does not exist, `WRONGTYPE` if it is not a string.
pub(super) fn get_string(ctx: &Ctx<'_, '_>, key: &[u8]) -> Result<Option<Key>, CmdError> {
    ctx.find_typed(key, Kind::String)
}

pub fn get(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    match get_string(ctx, arg(argv, 1))? {
        Some(key) => out.bulk(ctx.string(&key)),
        None => out.null(),
    }
    Ok(())
}

/// How an expiry option counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    /// `EX`: seconds from now.
    Ex,
    /// `PX`: milliseconds from now.
    Px,
    /// `EXAT`: a Unix time in seconds.
    Exat,
    /// `PXAT`: a Unix time in milliseconds.
    Pxat,
}

/// The options of `SET` (from argument 3) or `GETEX` (from argument 2), read as Redis's
/// `parseExtendedStringArgumentsOrReply` reads them: every option first (an expiry's number
/// is only kept, and an option may repeat, the last one counting), the number afterwards.
#[derive(Debug, Default)]
struct StringOptions<'a> {
    nx: bool,
    xx: bool,
    get: bool,
    keep_ttl: bool,
    persist: bool,
    expire: Option<(Unit, &'a [u8])>,
}

fn string_options(argv: &Argv, from: usize, set: bool) -> Result<StringOptions<'_>, CmdError> {
    let mut o = StringOptions::default();
    let mut i = from;
    while i < argv.len() {
        let option = arg(argv, i).to_ascii_uppercase();
        let next = argv.get(i + 1);
        let unit = match option.as_slice() {
            b"EX" => Some(Unit::Ex),
            b"PX" => Some(Unit::Px),
            b"EXAT" => Some(Unit::Exat),
            b"PXAT" => Some(Unit::Pxat),
            _ => None,
        };
        // An expiry option excludes the other expiry options, KEEPTTL and PERSIST, but not
        // itself.
        let expire_fits =
            |unit: Unit| !o.keep_ttl && !o.persist && o.expire.is_none_or(|(u, _)| u == unit);
        match (option.as_slice(), unit, next) {
            (b"NX", _, _) if set && !o.xx => o.nx = true,
            (b"XX", _, _) if set && !o.nx => o.xx = true,
            (b"GET", _, _) if set => o.get = true,
            (b"KEEPTTL", _, _) if set && o.expire.is_none() => o.keep_ttl = true,
            (b"PERSIST", _, _) if !set && o.expire.is_none() => o.persist = true,
            (_, Some(unit), Some(value)) if expire_fits(unit) => {
                o.expire = Some((unit, value));
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    Ok(o)
}

/// An expiry option's number as an absolute Unix millisecond, with Redis's checks
/// (`getExpireMillisecondsOrReply`; `command` names the command in the error).
fn expire_at(ctx: &Ctx<'_, '_>, unit: Unit, value: &[u8], command: &str) -> Result<u64, CmdError> {
    let n = num::parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{command}' command"));
    let seconds = matches!(unit, Unit::Ex | Unit::Exat);
    if n <= 0 || (seconds && n > i64::MAX / 1000) {
        return Err(invalid());
    }
    let ms = if seconds { n * 1000 } else { n };
    let at = if matches!(unit, Unit::Ex | Unit::Px) {
        ms.checked_add(ctx.now_ms as i64).ok_or_else(invalid)?
    } else {
        ms
    };
    Ok(at as u64)
}

pub fn set(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let value = arg(argv, 2);
    let options = string_options(argv, 3, true)?;
    let (nx, xx, get, keep_ttl) = (options.nx, options.xx, options.get, options.keep_ttl);
    let expire = match options.expire {
        Some((unit, n)) => Some(expire_at(ctx, unit, n, "set")?),
        None => None,
    };
    let existing = ctx.find(key);
    if get
        && let Some(old) = &existing
        && old.kind() != Kind::String
    {
        return Err(CmdError::WRONGTYPE);
    }
    let old_value = match (&existing, get) {
        (Some(old), true) => Some(ctx.string(old).to_vec()),
        _ => None,
    };
    let condition_holds = !(nx && existing.is_some() || xx && existing.is_none());
    if condition_holds {
        let ttl = match expire {
            Some(at) => Ttl::At(at),
            None if keep_ttl => Ttl::Keep,
            None => Ttl::Clear,
        };
        put(ctx, key, value, ttl)?;
        ctx.notify(EventClass::String, "set", key);
        if expire.is_some() {
            ctx.notify(EventClass::Generic, "expire", key);
        }
        if let Some(at) = expire
            && at <= ctx.now_ms
        {
            // An absolute time already past: Redis sets and deletes at once.
            let key = ctx.find_for_write(key);
            debug_assert!(
                key.is_none(),
                "a key whose time passed is deleted on access"
            );
        }
    }
    match (get, old_value) {
        (true, Some(old)) => out.bulk(&old),
        (true, None) => out.null(),
        (false, _) if condition_holds => out.ok(),
        (false, _) => out.null(),
    }
    Ok(())
}

pub fn setnx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    if ctx.find(key).is_some() {
        out.integer(0);
        return Ok(());
    }
    put(ctx, key, arg(argv, 2), Ttl::Clear)?;
    ctx.notify(EventClass::String, "set", key);
    out.integer(1);
    Ok(())
}

fn setex_unit(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    unit: Unit,
    command: &str,
) -> Result<(), CmdError> {
    let at = expire_at(ctx, unit, arg(argv, 2), command)?;
    let key = arg(argv, 1);
    put(ctx, key, arg(argv, 3), Ttl::At(at))?;
    ctx.notify(EventClass::String, "set", key);
    ctx.notify(EventClass::Generic, "expire", key);
    out.ok();
    Ok(())
}

pub fn setex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    setex_unit(ctx, argv, out, Unit::Ex, "setex")
}

pub fn psetex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    setex_unit(ctx, argv, out, Unit::Px, "psetex")
}

pub fn getdel(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    match get_string(ctx, arg(argv, 1))? {
        Some(found) => {
            out.bulk(ctx.string(&found));
            ctx.delete(&found);
            ctx.notify(EventClass::Generic, "del", arg(argv, 1));
        }
        None => out.null(),
    }
    Ok(())
}

pub fn getset(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let old = get_string(ctx, key)?.map(|old| ctx.string(&old).to_vec());
    put(ctx, key, arg(argv, 2), Ttl::Clear)?;
    ctx.notify(EventClass::String, "set", key);
    match old {
        Some(old) => out.bulk(&old),
        None => out.null(),
    }
    Ok(())
}

pub fn getex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let options = string_options(argv, 2, false)?;
    // As Redis: the options, then the key (a missing one answers null before the number is
    // read), its type, then the expiry's number.
    let Some(found) = get_string(ctx, key)? else {
        out.null();
        return Ok(());
    };
    // None: leave the expiry; Some(0): persist; Some(at): expire at.
    let change = match (options.expire, options.persist) {
        (Some((unit, n)), _) => Some(expire_at(ctx, unit, n, "getex")?),
        (None, true) => Some(0),
        (None, false) => None,
    };
    out.bulk(ctx.string(&found));
    if let Some(at) = change {
        let layout = ctx.layout;
        if at != 0 && at <= ctx.now_ms {
            ctx.delete(&found);
            ctx.notify(EventClass::Generic, "del", key);
        } else if found.head.expire_at_ms != at {
            let txn = ctx.txn();
            layout.set_expire(txn, &found, at)?;
            layout.touch(txn, &found);
        }
        // As Redis: told even when the expiry was already so.
        match at {
            0 if found.head.expire_at_ms != 0 => ctx.notify(EventClass::Generic, "persist", key),
            0 => {}
            at if at > ctx.now_ms => ctx.notify(EventClass::Generic, "expire", key),
            _ => {}
        }
    }
    Ok(())
}

pub fn mget(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    out.array(argv.len() - 1);
    for key in argv.iter().skip(1) {
        match ctx.find(key) {
            Some(found) if found.kind() == Kind::String => out.bulk(ctx.string(&found)),
            _ => out.null(),
        }
    }
    Ok(())
}

pub fn mset(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if argv.len().is_multiple_of(2) {
        return Err(arity_error(arg(argv, 0)));
    }
    for pair in (1..argv.len()).step_by(2) {
        put(ctx, arg(argv, pair), arg(argv, pair + 1), Ttl::Clear)?;
        ctx.notify(EventClass::String, "set", arg(argv, pair));
    }
    out.ok();
    Ok(())
}

pub fn msetnx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if argv.len().is_multiple_of(2) {
        return Err(arity_error(arg(argv, 0)));
    }
    let any_exists = (1..argv.len())
        .step_by(2)
        .any(|i| ctx.find(arg(argv, i)).is_some());
    if any_exists {
        out.integer(0);
        return Ok(());
    }
    for pair in (1..argv.len()).step_by(2) {
        put(ctx, arg(argv, pair), arg(argv, pair + 1), Ttl::Clear)?;
        ctx.notify(EventClass::String, "set", arg(argv, pair));
    }
    out.integer(1);
    Ok(())
}

pub fn strlen(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let len = get_string(ctx, arg(argv, 1))?.map_or(0, |key| key.head.value_len);
    out.integer(len as i64);
    Ok(())
}

pub fn getrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut start = int_arg(argv, 2)?;
    let mut end = int_arg(argv, 3)?;
    let Some(key) = get_string(ctx, arg(argv, 1))? else {
        out.bulk(b"");
        return Ok(());
    };
    let bytes = ctx.string(&key);
    let len = bytes.len() as i64;
    if start < 0 && end < 0 && start > end {
        out.bulk(b"");
        return Ok(());
    }
    if start < 0 {
        start += len;
    }
    if end < 0 {
        end += len;
    }
    start = start.max(0);
    end = end.max(0);
    if end >= len {
        end = len - 1;
    }
    if start > end || len == 0 {
        out.bulk(b"");
    } else {
        out.bulk(&bytes[start as usize..=end as usize]);
    }
    Ok(())
}

pub fn setrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let offset = int_arg(argv, 2)?;
    let value = arg(argv, 3);
    if offset < 0 {
        return Err(CmdError::fixed("ERR offset is out of range"));
    }
    let existing = get_string(ctx, key)?;
    let old_len = existing.map_or(0, |k| k.head.value_len as usize);
    if value.is_empty() {
        out.integer(old_len as i64);
        return Ok(());
    }
    let offset = offset as usize;
    let end = offset
        .checked_add(value.len())
        .filter(|&end| end <= STRING_LEN_MAX)
        .ok_or(CmdError::TOO_LONG)?;
    let new_len = end.max(old_len);
    let found = write_span(ctx, key, existing, new_len, offset, value)?;
    ctx.notify(EventClass::String, "setrange", key);
    out.integer(found.head.value_len as i64);
    Ok(())
}

pub fn append(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let value = arg(argv, 2);
    let existing = get_string(ctx, key)?;
    let old_len = existing.map_or(0, |k| k.head.value_len as usize);
    let new_len = old_len + value.len();
    if new_len > STRING_LEN_MAX {
        return Err(CmdError::TOO_LONG);
    }
    let created = existing.is_none();
    let found = write_span(ctx, key, existing, new_len, old_len, value)?;
    if created {
        // `APPEND` to no key stores its argument as `SET` would.
        super::dump::mark(ctx, key, EncodingMark::Derived);
    }
    ctx.notify(EventClass::String, "append", key);
    out.integer(found.head.value_len as i64);
    Ok(())
}

/// Makes string `key` `new_len` bytes long (zero-filled past its old end, its TTL kept) and
/// writes `bytes` at `offset`. Returns the key entry, which may have moved.
fn write_span(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    existing: Option<Key>,
    new_len: usize,
    offset: usize,
    bytes: &[u8],
) -> Result<Key, CmdError> {
    let found = lengthen(ctx, key, existing, new_len)?;
    let layout = ctx.layout;
    let txn = ctx.txn();
    txn.set_range(found.string_at() + offset, bytes.len())
        .copy_from_slice(bytes);
    layout.touch(txn, &found);
    let head = txn.pod(found.entry());
    Ok(Key { head, ..found })
}

/// String `key` (`existing`, which the caller found live and of type string, or `None`)
/// made at least `len_min` bytes long: created, or grown with zeros past its old end, its
/// TTL kept. It is not marked changed: that is the caller's to do (a bit command that
/// changes no bit leaves a `WATCH` alone, as Redis does). Returns the entry as it now
/// stands, which may have moved.
pub(super) fn lengthen(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    existing: Option<Key>,
    len_min: usize,
) -> Result<Key, CmdError> {
    let found = lengthen_unmarked(ctx, key, existing, len_min)?;
    if found.mark() == EncodingMark::Large {
        return Ok(found);
    }
    // Redis changes a string in place only in a raw copy of its own (`dbUnshareStringValue`).
    let layout = ctx.layout;
    let txn = ctx.txn();
    layout.set_mark(txn, &found, EncodingMark::Large);
    let head = txn.pod(found.entry());
    Ok(Key { head, ..found })
}

fn lengthen_unmarked(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    existing: Option<Key>,
    len_min: usize,
) -> Result<Key, CmdError> {
    assert!(
        len_min <= STRING_LEN_MAX + 8,
        "the caller bounds the length"
    );
    let layout = ctx.layout;
    let (found, old_len) = match existing {
        None => {
            // A key whose time passed is still in the keyspace: it goes first (as Redis's
            // lookupKeyWrite deletes it), or the key would have two entries.
            let expired = ctx.find_for_write(key);
            assert!(expired.is_none(), "the caller found no live key");
            let found = layout.create(ctx.txn(), key, Kind::String, len_min)?;
            ctx.notify(EventClass::New, "new", key);
            (found, 0)
        }
        Some(_) => {
            let found = ctx.find_for_write(key).expect("a live key stays live");
            let old_len = found.head.value_len as usize;
            if len_min <= old_len {
                return Ok(found);
            }
            if len_min <= found.string_capacity() {
                (found, old_len)
            } else {
                // Grow with room to spare, as Redis's sds does, so that a run of APPENDs
                // copies the string a logarithmic number of times.
                let room = len_min.saturating_mul(2).min(len_min + 1024 * 1024);
                let room = room.min(STRING_LEN_MAX).max(len_min);
                let moved = layout.grow(ctx.txn(), &found, room, old_len)?;
                (moved, old_len)
            }
        }
    };
    let txn = ctx.txn();
    txn.set_range(found.string_at() + old_len, len_min - old_len)
        .fill(0);
    layout.set_value_len(txn, &found, len_min as u64);
    let head = txn.pod(found.entry());
    Ok(Key { head, ..found })
}

fn incr_by(ctx: &mut Ctx<'_, '_>, key: &[u8], delta: i64) -> Result<i64, CmdError> {
    let existing = get_string(ctx, key)?;
    let old = match &existing {
        Some(found) => num::parse_i64(ctx.string(found)).ok_or(CmdError::NOT_INTEGER)?,
        None => 0,
    };
    let new = old.checked_add(delta).ok_or(CmdError::OVERFLOW)?;
    let mut text = Vec::with_capacity(20);
    num::format_i64(new, &mut text);
    put(ctx, key, &text, Ttl::Keep)?;
    ctx.notify(EventClass::String, "incrby", key);
    Ok(new)
}

pub fn incr(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let n = incr_by(ctx, arg(argv, 1), 1)?;
    out.integer(n);
    Ok(())
}

pub fn decr(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let n = incr_by(ctx, arg(argv, 1), -1)?;
    out.integer(n);
    Ok(())
}

pub fn incrby(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let delta = int_arg(argv, 2)?;
    let n = incr_by(ctx, arg(argv, 1), delta)?;
    out.integer(n);
    Ok(())
}

pub fn decrby(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let delta = int_arg(argv, 2)?;
    let delta = delta
        .checked_neg()
        .ok_or(CmdError::fixed("ERR decrement would overflow"))?;
    let n = incr_by(ctx, arg(argv, 1), delta)?;
    out.integer(n);
    Ok(())
}

pub fn incrbyfloat(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // Redis adds in 80-bit long double and prints the sum with `%.17Lf`; `LongDouble` does
    // both exactly as Redis's machine does, so `0.1 + 0.2` answers "0.3" here too.
    let key = arg(argv, 1);
    // As Redis's incrbyfloatCommand: the key's type, its value, then the increment.
    let existing = get_string(ctx, key)?;
    let old = match &existing {
        Some(found) => num::LongDouble::parse(ctx.string(found)).ok_or(CmdError::NOT_FLOAT)?,
        None => num::LongDouble::parse(b"0").expect("zero parses"),
    };
    let delta = num::LongDouble::parse(arg(argv, 2)).ok_or(CmdError::NOT_FLOAT)?;
    let sum = old + delta;
    if !sum.is_finite() {
        return Err(CmdError::fixed(
            "ERR increment would produce NaN or Infinity",
        ));
    }
    let mut text = Vec::with_capacity(32);
    sum.format_human(&mut text);
    put(ctx, key, &text, Ttl::Keep)?;
    // Redis makes the result a new string object from its text: embstr, never int.
    super::dump::mark(ctx, key, EncodingMark::Embstr);
    ctx.notify(EventClass::String, "incrbyfloat", key);
    out.bulk(&text);
    Ok(())
}

/// `LCS`'s options.
#[derive(Clone, Copy, Debug, Default)]
struct LcsOptions {
    len: bool,
    idx: bool,
    with_match_len: bool,
    /// Matches shorter than this are left out of `IDX`'s list (0: none is).
    min_match_len: u64,
}

fn lcs_options(argv: &Argv) -> Result<LcsOptions, CmdError> {
    let mut options = LcsOptions::default();
    let mut i = 3;
    while i < argv.len() {
        match arg(argv, i).to_ascii_uppercase().as_slice() {
            b"IDX" => options.idx = true,
            b"LEN" => options.len = true,
            b"WITHMATCHLEN" => options.with_match_len = true,
            b"MINMATCHLEN" if i + 1 < argv.len() => {
                options.min_match_len = int_arg(argv, i + 1)?.max(0) as u64;
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    if options.len && options.idx {
        return Err(CmdError::fixed(
            "ERR If you want both the length and indexes, please just use IDX.",
        ));
    }
    Ok(options)
}

/// The table of Redis's `lcsCommand`: at (i, j) the length of the longest common
/// subsequence of `a[..i]` and `b[..j]`.
struct LcsTable {
    cells: Vec<u32>,
    width: usize,
}

impl LcsTable {
    /// The table of `a` and `b`, within Redis's limit on its size (`proto-max-bulk-len`).
    fn build(a: &[u8], b: &[u8]) -> Result<LcsTable, CmdError> {
        let width = b.len() + 1;
        let cell_count = (a.len() as u64 + 1) * width as u64;
        if cell_count * 4 > STRING_LEN_MAX as u64 {
            return Err(CmdError::fixed(
                "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len",
            ));
        }
        let mut cells = Vec::new();
        if cells.try_reserve_exact(cell_count as usize).is_err() {
            return Err(CmdError::fixed(
                "ERR Insufficient memory, failed allocating transient memory for LCS",
            ));
        }
        cells.resize(cell_count as usize, 0u32);
        for i in 1..=a.len() {
            for j in 1..=b.len() {
                cells[i * width + j] = if a[i - 1] == b[j - 1] {
                    cells[(i - 1) * width + j - 1] + 1
                } else {
                    cells[(i - 1) * width + j].max(cells[i * width + j - 1])
                };
            }
        }
        Ok(LcsTable { cells, width })
    }

    fn at(&self, i: usize, j: usize) -> u32 {
        self.cells[i * self.width + j]
    }
}

/// One run of matching bytes `IDX` lists: its ranges in `a` and in `b`, inclusive.
#[derive(Clone, Copy, Debug)]
struct LcsMatch {
    a: (usize, usize),
    b: (usize, usize),
}

/// The longest common subsequence of `a` and `b` and its runs, from the end backwards, as
/// Redis's `lcsCommand` walks its table (runs shorter than `min_match_len` left out).
fn lcs_walk(a: &[u8], b: &[u8], table: &LcsTable, min_match_len: u64) -> (Vec<u8>, Vec<LcsMatch>) {
    let mut common = vec![0u8; table.at(a.len(), b.len()) as usize];
    let mut left = common.len();
    let mut matches = Vec::new();
    let mut run: Option<LcsMatch> = None;
    let (mut i, mut j) = (a.len(), b.len());
    while i > 0 && j > 0 {
        let mut emit = false;
        if a[i - 1] == b[j - 1] {
            common[left - 1] = a[i - 1];
            left -= 1;
            match &mut run {
                None => {
                    run = Some(LcsMatch {
                        a: (i - 1, i - 1),
                        b: (j - 1, j - 1),
                    })
                }
                // A match just before the run extends it.
                Some(current) if current.a.0 == i && current.b.0 == j => {
                    current.a.0 -= 1;
                    current.b.0 -= 1;
                }
                Some(_) => emit = true,
            }
            let at_start = run.is_some_and(|current| current.a.0 == 0 || current.b.0 == 0);
            emit |= at_start;
            i -= 1;
            j -= 1;
        } else {
            if table.at(i - 1, j) > table.at(i, j - 1) {
                i -= 1;
            } else {
                j -= 1;
            }
            emit = run.is_some();
        }
        // An emitted run ends whether or not it is long enough to be listed.
        if emit
            && let Some(current) = run.take()
            && (current.a.1 - current.a.0 + 1) as u64 >= min_match_len
        {
            matches.push(current);
        }
    }
    (common, matches)
}

pub fn lcs(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let (a, b) = match (get_string(ctx, arg(argv, 1)), get_string(ctx, arg(argv, 2))) {
        (Ok(a), Ok(b)) => (a, b),
        _ => {
            return Err(CmdError::fixed(
                "ERR The specified keys must contain string values",
            ));
        }
    };
    let a = a.map_or(&[][..], |key| ctx.string(&key));
    let b = b.map_or(&[][..], |key| ctx.string(&key));
    let options = lcs_options(argv)?;
    let table = LcsTable::build(a, b)?;
    let len = i64::from(table.at(a.len(), b.len()));
    if options.len {
        out.integer(len);
        return Ok(());
    }
    let (common, matches) = lcs_walk(a, b, &table, options.min_match_len);
    if !options.idx {
        out.bulk(&common);
        return Ok(());
    }
    out.map(2);
    out.bulk(b"matches");
    out.array(matches.len());
    for found in &matches {
        out.array(2 + usize::from(options.with_match_len));
        for (start, end) in [found.a, found.b] {
            out.array(2);
            out.integer(start as i64);
            out.integer(end as i64);
        }
        if options.with_match_len {
            out.integer((found.a.1 - found.a.0 + 1) as i64);
        }
    }
    out.bulk(b"len");
    out.integer(len);
    Ok(())
}
