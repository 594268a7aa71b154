//! `DUMP`, `RESTORE`, `OBJECT` and `MEMORY USAGE` (cluster.c, object.c): a value as Redis
//! 7.0's payload ([`crate::rdb`]), how Redis would hold it, and what it takes here.
//!
//! # Encodings
//!
//! tandem keeps one layout per type, so `OBJECT ENCODING` answers what redis-server 7.0
//! would hold the same value in under the database's thresholds ([`Thresholds`], which
//! `CONFIG SET` changes): strings `int`, `embstr` or `raw`; lists `quicklist` (7.0 has no
//! other); sets `intset` (by default up to 512 integers) or `hashtable`; sorted sets and
//! hashes `listpack` (by default up to 128 and 512 elements, of up to 64 bytes: the
//! thresholds compiled into redis-server 7.0) or `skiplist` / `hashtable`; streams `stream`. Redis never converts a collection back to its
//! compact encoding when it shrinks, and a string a command changed in place stays `raw`,
//! so that history is kept per key ([`EncodingMark`]): after every write command, each key
//! it names that has outgrown its compact encoding is marked ([`settle`]). The mark goes
//! with `RENAME` and `COPY`, as Redis keeps the object, and a new value (`SET`, a deleted and
//! recreated key, `RESTORE`) starts without one, as Redis's new objects do. `DUMP` writes
//! the encoding so found, so a payload's type byte is the one Redis would write.
//!
//! `OBJECT REFCOUNT` answers 2147483647 for an `int` string from 0 to 9999 (Redis's shared
//! integers) and 1 for anything else. tandem keeps no access clock: `OBJECT FREQ` answers
//! Redis's error for a server without an LFU policy (true here), and `OBJECT IDLETIME`,
//! which Redis answers from its LRU clock, answers an error saying the time is not tracked,
//! rather than invent one. `RESTORE … IDLETIME s` and `FREQ f` are checked as Redis checks
//! them, then have nothing to set.

use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::db::{EncodingMark, Key, Kind};
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::num;
use crate::params::Thresholds;
use crate::rdb::{self, Encoding, Value};
use crate::resp::{Argv, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("DUMP", 2, Read, (1, 1, 1), false, dump),
    data("MEMORY|USAGE", -3, Read, (2, 2, 1), false, memory_usage),
    data("OBJECT", -2, Read, (2, 2, 1), false, object),
    data("RESTORE", -4, Write, (1, 1, 1), true, restore),
];

/// Redis's shared integers (`OBJ_SHARED_INTEGERS`), whose reference count is pinned.
const SHARED_INTEGERS: i64 = 10_000;
const SHARED_REFCOUNT: i64 = i32::MAX as i64;

/// How Redis 7.0 would hold the value of `key` under `thresholds`.
pub fn encoding_of(mem: &impl Mem, key: &Key, thresholds: &Thresholds) -> Encoding {
    let mark = key.mark();
    match key.kind() {
        Kind::String => {
            let bytes = mem.bytes(key.string_at(), key.head.value_len as usize);
            match (mark, rdb::string_encoding(bytes)) {
                (EncodingMark::Large, _) => Encoding::Raw,
                (EncodingMark::Embstr, Encoding::Raw) => Encoding::Raw,
                (EncodingMark::Embstr, _) => Encoding::Embstr,
                (EncodingMark::Derived, encoding) => encoding,
            }
        }
        Kind::List => Encoding::Quicklist,
        Kind::Stream => Encoding::Stream,
        Kind::Set if mark == EncodingMark::Large || !set_is_intset(mem, key, thresholds) => {
            Encoding::Hashtable
        }
        Kind::Set => Encoding::Intset,
        Kind::Hash if mark == EncodingMark::Large || !hash_is_listpack(mem, key, thresholds) => {
            Encoding::Hashtable
        }
        Kind::Hash => Encoding::Listpack,
        Kind::ZSet if mark == EncodingMark::Large || !zset_is_listpack(mem, key, thresholds) => {
            Encoding::Skiplist
        }
        Kind::ZSet => Encoding::Listpack,
    }
}

// Each check reads at most its threshold's worth of elements.
fn set_is_intset(mem: &impl Mem, key: &Key, thresholds: &Thresholds) -> bool {
    key.head.value_len as usize <= thresholds.intset_entries
        && super::sets::members(mem, key)
            .iter()
            .all(|member| num::parse_i64(member).is_some())
}

fn hash_is_listpack(mem: &impl Mem, key: &Key, thresholds: &Thresholds) -> bool {
    let short = |bytes: &[u8]| bytes.len() <= thresholds.hash_value;
    key.head.value_len as usize <= thresholds.hash_entries
        && super::hashes::pairs(mem, key)
            .iter()
            .all(|(field, value)| short(field) && short(value))
}

fn zset_is_listpack(mem: &impl Mem, key: &Key, thresholds: &Thresholds) -> bool {
    key.head.value_len as usize <= thresholds.zset_entries
        && super::zsets::pairs(mem, key)
            .iter()
            .all(|(member, _)| member.len() <= thresholds.zset_value)
}

/// After a write command: marks each key it names (`positions` in `argv`) whose collection
/// Redis would have converted to its large encoding by now, so that it stays so.
pub fn settle(ctx: &mut Ctx<'_, '_>, argv: &Argv, positions: &[usize]) {
    let thresholds = ctx.thresholds();
    for &at in positions {
        let Some(name) = argv.get(at) else { continue };
        let Some(key) = ctx.find(name) else { continue };
        let collection = matches!(key.kind(), Kind::Set | Kind::Hash | Kind::ZSet);
        if !collection || key.mark() != EncodingMark::Derived {
            continue;
        }
        let large = matches!(
            encoding_of(&ctx.access, &key, &thresholds),
            Encoding::Hashtable | Encoding::Skiplist
        );
        if large || hash_set_converts(argv, key.kind(), &thresholds) {
            let layout = ctx.layout;
            layout.set_mark(ctx.txn(), &key, EncodingMark::Large);
        }
    }
}

/// Whether `HSET` or `HMSET` `argv` converted its hash whatever it holds now: Redis's
/// `hashTypeTryConversion` judges every field and value given, so one too long converts the
/// hash even when a later pair of the same command overwrote it.
fn hash_set_converts(argv: &Argv, kind: Kind, thresholds: &Thresholds) -> bool {
    let name = argv.get(0).unwrap_or_default();
    kind == Kind::Hash
        && (name.eq_ignore_ascii_case(b"HSET") || name.eq_ignore_ascii_case(b"HMSET"))
        && argv
            .iter()
            .skip(2)
            .any(|arg| arg.len() > thresholds.hash_value)
}

/// Marks `key` (which the caller just wrote) with `mark`.
pub fn mark(ctx: &mut Ctx<'_, '_>, name: &[u8], mark: EncodingMark) {
    let layout = ctx.layout;
    if let Some(key) = ctx.find_for_write(name)
        && key.mark() != mark
    {
        layout.set_mark(ctx.txn(), &key, mark);
    }
}

/// The whole value of `key`.
fn value_of(mem: &impl Mem, key: &Key) -> Value {
    match key.kind() {
        Kind::String => Value::String(
            mem.bytes(key.string_at(), key.head.value_len as usize)
                .to_vec(),
        ),
        Kind::List => Value::List(super::lists::elements_from(
            mem,
            key,
            0,
            key.head.value_len as usize,
        )),
        Kind::Set => Value::Set(
            super::sets::members(mem, key)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect(),
        ),
        Kind::Hash => Value::Hash(super::hashes::pairs(mem, key)),
        Kind::ZSet => Value::ZSet(super::zsets::pairs(mem, key)),
        Kind::Stream => Value::Stream(Box::new(super::streams::image(mem, key))),
    }
}

/// The whole value of `key` and how Redis 7.0 would hold it under `thresholds`: what a
/// payload or a file writes.
pub fn image(mem: &impl Mem, key: &Key, thresholds: &Thresholds) -> (Value, Encoding) {
    (value_of(mem, key), encoding_of(mem, key, thresholds))
}

/// `DUMP key`: the payload, or null without the key.
pub fn dump(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    match ctx.find(arg(argv, 1)) {
        None => out.null(),
        Some(key) => {
            let (value, encoding) = image(&ctx.access, &key, &ctx.thresholds());
            out.bulk(&rdb::dump(&value, encoding));
        }
    }
    Ok(())
}

/// `RESTORE`'s options: `REPLACE`, `ABSTTL`.
struct RestoreOptions {
    replace: bool,
    absolute: bool,
}

/// Reads `RESTORE`'s options as Redis does, `IDLETIME` and `FREQ` checked (and excluding
/// each other) though tandem keeps no access clock for them to set.
fn restore_options(argv: &Argv) -> Result<RestoreOptions, CmdError> {
    let mut options = RestoreOptions {
        replace: false,
        absolute: false,
    };
    let (mut idle, mut freq) = (false, false);
    let mut i = 4;
    while i < argv.len() {
        let more = i + 1 < argv.len();
        match arg(argv, i).to_ascii_lowercase().as_slice() {
            b"replace" => options.replace = true,
            b"absttl" => options.absolute = true,
            b"idletime" if more && !freq => {
                if super::int_arg(argv, i + 1)? < 0 {
                    return Err(CmdError::fixed("ERR Invalid IDLETIME value, must be >= 0"));
                }
                idle = true;
                i += 1;
            }
            b"freq" if more && !idle => {
                if !(0..=255).contains(&super::int_arg(argv, i + 1)?) {
                    return Err(CmdError::fixed(
                        "ERR Invalid FREQ value, must be >= 0 and <= 255",
                    ));
                }
                freq = true;
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    Ok(options)
}

/// `RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]`, checked in Redis's
/// order: options, an existing key, the TTL, the payload.
pub fn restore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    let options = restore_options(argv)?;
    if !options.replace && ctx.find(name).is_some() {
        return Err(CmdError::fixed("BUSYKEY Target key name already exists."));
    }
    let ttl = super::int_arg(argv, 2)?;
    if ttl < 0 {
        return Err(CmdError::fixed("ERR Invalid TTL value, must be >= 0"));
    }
    let (value, _) = rdb::parse(arg(argv, 3)).map_err(|refusal| CmdError::fixed(refusal.text()))?;
    // `REPLACE` deletes the old key as Redis's `dbDelete` does, expired or not, telling
    // nothing; without it only an expired key can be there, which goes as `expired`.
    let replaced = if options.replace {
        ctx.layout.find_any(&ctx.access, name)
    } else {
        ctx.find_for_write(name)
    };
    if let Some(old) = &replaced {
        ctx.delete(old);
    }
    let expire_at_ms = match ttl {
        0 => 0,
        ttl if options.absolute => ttl,
        // Redis adds the clock as C does: an overflow wraps to a time long past.
        ttl => ttl.wrapping_add(ctx.now_ms as i64),
    };
    // A time already past creates nothing (the old value, with REPLACE, is gone), as Redis.
    if expire_at_ms != 0 && expire_at_ms <= ctx.now_ms as i64 {
        if replaced.is_some() {
            ctx.notify(EventClass::Generic, "del", name);
        }
        out.ok();
        return Ok(());
    }
    store(ctx, name, &value)?;
    if expire_at_ms != 0 {
        let layout = ctx.layout;
        let key = ctx.find_for_write(name).expect("the key was just restored");
        layout.set_expire(ctx.txn(), &key, expire_at_ms as u64)?;
    }
    ctx.notify(EventClass::Generic, "restore", name);
    out.ok();
    Ok(())
}

/// Makes `name` (which does not exist) hold `value`.
fn store(ctx: &mut Ctx<'_, '_>, name: &[u8], value: &Value) -> Result<(), CmdError> {
    match value {
        Value::String(bytes) => super::strings::put(ctx, name, bytes, super::strings::Ttl::Clear),
        Value::List(elements) => {
            let elements: Vec<&[u8]> = elements.iter().map(Vec::as_slice).collect();
            super::lists::store(ctx, name, &elements)
        }
        Value::Set(members) => super::sets::store(ctx, name, members),
        Value::Hash(pairs) => super::hashes::store(ctx, name, pairs),
        Value::ZSet(pairs) => super::zsets::store(ctx, name, pairs),
        Value::Stream(image) => super::streams::restore(ctx, name, image),
    }
}

const OBJECT_HELP: &[&str] = &[
    "ENCODING <key>",
    "    Return the kind of internal representation used in order to store the value",
    "    associated with a <key>.",
    "FREQ <key>",
    "    Return the access frequency index of the <key>. The returned integer is",
    "    proportional to the logarithm of the recent access frequency of the key.",
    "IDLETIME <key>",
    "    Return the idle time of the <key>, that is the approximated number of",
    "    seconds elapsed since the last access to the key.",
    "REFCOUNT <key>",
    "    Return the number of references of the value associated with the specified",
    "    <key>.",
];

/// `OBJECT ENCODING|REFCOUNT|FREQ|IDLETIME key`, `OBJECT HELP`.
pub fn object(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if let Some(refusal) = super::subcommand_error("OBJECT", argv) {
        return Err(refusal);
    }
    let subcommand = arg(argv, 1).to_ascii_lowercase();
    if subcommand == b"help" {
        super::streams::reply_help(out, "OBJECT", OBJECT_HELP);
        return Ok(());
    }
    let Some(key) = ctx.find(arg(argv, 2)) else {
        out.null();
        return Ok(());
    };
    let encoding = encoding_of(&ctx.access, &key, &ctx.thresholds());
    match subcommand.as_slice() {
        b"encoding" => out.bulk(encoding.name().as_bytes()),
        b"refcount" => {
            let shared = encoding == Encoding::Int
                && num::parse_i64(ctx.string(&key))
                    .is_some_and(|n| (0..SHARED_INTEGERS).contains(&n));
            out.integer(if shared { SHARED_REFCOUNT } else { 1 });
        }
        b"freq" => {
            return Err(CmdError::fixed(
                "ERR An LFU maxmemory policy is not selected, access frequency not tracked. \
                 Please note that when switching between policies at runtime LRU and LFU data \
                 will take some time to adjust.",
            ));
        }
        _ => {
            return Err(CmdError::fixed(
                "ERR tandem does not track when a key was last accessed: OBJECT IDLETIME \
                 has no idle time to answer",
            ));
        }
    }
    Ok(())
}

/// `MEMORY USAGE key [SAMPLES count]`: the bytes `key` takes in the segment, its entry's block
/// and every block its value holds, as the allocator hands them out (Redis answers its own
/// allocations, sampling `count` elements of a collection; tandem counts every block, so
/// `SAMPLES` is checked and changes nothing). Nil for a key that does not exist.
fn memory_usage(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut at = 3;
    while at < argv.len() {
        let option = arg(argv, at);
        if option.eq_ignore_ascii_case(b"SAMPLES") && at + 1 < argv.len() {
            let samples = super::int_arg(argv, at + 1)?;
            if samples < 0 {
                return Err(CmdError::SYNTAX);
            }
            at += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let Some(key) = ctx.find(arg(argv, 2)) else {
        out.null();
        return Ok(());
    };
    let block = |len: usize| crate::alloc::Alloc::block_len_for(len).unwrap_or(len);
    let mut owned = Vec::new();
    super::value_blocks(&ctx.access, &ctx.layout, &key, &mut owned);
    let bytes = block(key.head.block_len as usize)
        + owned.iter().map(|&(_, len)| block(len)).sum::<usize>();
    out.integer(bytes as i64);
    Ok(())
}
