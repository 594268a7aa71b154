//! Commands on keys of any type (db.c, expire.c): existence, deletion, renaming, expiry,
//! listing.

use tandem_memory::Txn;

use super::{CmdError, Ctx, arg, int_arg};
use crate::db::{EncodingMark, KEY_HEAD_BYTES, Key, KeyHead, Kind, Layout};
use crate::dict::{Found, LINK_BYTES, Link};
use crate::glob;
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::resp::{Argv, ReplyWriter};

/// Frees the blocks `key`'s value holds beyond its entry (a string has none).
pub fn free_value(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    match key.kind() {
        Kind::String => {}
        Kind::Hash => super::hashes::free(txn, layout, key),
        Kind::List => super::lists::free(txn, layout, key),
        Kind::Set => super::sets::free(txn, layout, key),
        Kind::ZSet => super::zsets::free(txn, layout, key),
        Kind::Stream => super::streams::free(txn, layout, key),
    }
}

/// Every block `key`'s value holds beyond its entry, as (segment offset, bytes asked for),
/// for the allocator's check.
pub fn value_blocks(mem: &impl Mem, layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    match key.kind() {
        Kind::String => {}
        Kind::Hash => super::hashes::owned(mem, layout, key, owned),
        Kind::List => super::lists::owned(mem, layout, key, owned),
        Kind::Set => super::sets::owned(mem, layout, key, owned),
        Kind::ZSet => super::zsets::owned(mem, layout, key, owned),
        Kind::Stream => super::streams::owned(mem, layout, key, owned),
    }
}

pub fn del(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let mut deleted = 0;
    for key in argv.iter().skip(1) {
        if let Some(found) = ctx.find_for_write(key) {
            ctx.delete(&found);
            ctx.notify(EventClass::Generic, "del", key);
            deleted += 1;
        }
    }
    out.integer(deleted);
    Ok(())
}

/// Deletes the destination of a storing command whose result is empty (`ZUNIONSTORE`,
/// `SORT … STORE`, `BITOP`, …) and publishes `del` if there was a key. Redis deletes it with
/// `dbDelete`, which does not look at the expiry, so a key whose time has passed goes as
/// `del` too, not as `expired`.
pub(super) fn delete_destination(ctx: &mut Ctx<'_, '_>, key: &[u8]) {
    if let Some(found) = ctx.layout.find_any(&ctx.access, key) {
        ctx.delete(&found);
        ctx.notify(EventClass::Generic, "del", key);
    }
}

pub fn exists(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let count = argv
        .iter()
        .skip(1)
        .filter(|key| ctx.find(key).is_some())
        .count();
    out.integer(count as i64);
    Ok(())
}

pub fn type_(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    match ctx.find(arg(argv, 1)) {
        Some(found) => out.simple(found.kind().name()),
        None => out.simple("none"),
    }
    Ok(())
}

pub fn dbsize(
    ctx: &mut Ctx<'_, '_>,
    _argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // Like Redis, keys that expired but were not yet deleted still count.
    out.integer(ctx.layout.keyspace.len(&ctx.access) as i64);
    Ok(())
}

pub fn flushall(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    flush_mode(argv)?;
    for db in ctx.layout.dbs() {
        flush(ctx, &db);
    }
    out.ok();
    Ok(())
}

pub fn flushdb(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    flush_mode(argv)?;
    let layout = ctx.layout;
    flush(ctx, &layout);
    out.ok();
    Ok(())
}

/// `FLUSHALL`'s and `FLUSHDB`'s one option, `ASYNC` or `SYNC` (alike here: one txn).
fn flush_mode(argv: &Argv) -> Result<(), CmdError> {
    match argv.get(1).map(|a| a.to_ascii_uppercase()) {
        None => Ok(()),
        Some(mode) if argv.len() == 2 && (mode == b"ASYNC" || mode == b"SYNC") => Ok(()),
        Some(_) => Err(CmdError::SYNTAX),
    }
}

/// Deletes every key of the database `layout` is of.
fn flush(ctx: &mut Ctx<'_, '_>, layout: &crate::db::Layout) {
    let txn = ctx.txn();
    let mut version_max = 0;
    layout.keyspace.clear(txn, &layout.alloc, |txn, entry| {
        let head: KeyHead = txn.pod(entry);
        version_max = version_max.max(head.version);
        let key = Key {
            found: Found { link: 0, entry },
            head,
        };
        free_value(txn, layout, &key);
        layout.alloc.free(txn, entry, head.block_len as usize);
    });
    // What `unlink` records for each key it deletes (a `WATCH` of an absent key reads it).
    layout.note_deleted(txn, version_max);
    layout.expires.clear(txn, &layout.alloc, |txn, entry| {
        let link: Link = txn.pod(entry);
        layout
            .alloc
            .free(txn, entry, LINK_BYTES + link.key_len as usize);
    });
}

/// Renames `from` to `to`; `Ok(false)` if `nx` and `to` exists.
fn rename_key(ctx: &mut Ctx<'_, '_>, argv: &Argv, nx: bool) -> Result<bool, CmdError> {
    let (from, to) = (arg(argv, 1), arg(argv, 2));
    if ctx.find_for_write(from).is_none() {
        return Err(CmdError::NO_SUCH_KEY);
    }
    if from == to {
        return Ok(!nx);
    }
    if let Some(target) = ctx.find_for_write(to) {
        if nx {
            return Ok(false);
        }
        ctx.delete(&target);
    }
    // The value stays where it is: only the entry (head, key, a string's bytes) moves.
    let layout = ctx.layout;
    let source = ctx.find_for_write(from).expect("the source is still there");
    let txn = ctx.txn();
    let kind = source.kind();
    let value_bytes = if kind == Kind::String {
        source.head.value_len as usize
    } else {
        0
    };
    let value = txn.bytes(source.string_at(), value_bytes).to_vec();
    let head = source.head;
    let target = layout.create(txn, to, kind, value_bytes)?;
    txn.set_range(target.string_at(), value_bytes)
        .copy_from_slice(&value);
    ctx.notify(EventClass::New, "new", to);
    let txn = ctx.txn();
    layout.set_value(txn, &target, head.value);
    layout.set_value_len(txn, &target, head.value_len);
    if source.mark() != EncodingMark::Derived {
        // The value is the same object to Redis: its encoding goes with it.
        layout.set_mark(txn, &target, source.mark());
    }
    layout.set_expire(txn, &target, head.expire_at_ms)?;
    let source = layout
        .find_any(txn, from)
        .expect("the source is still there");
    layout.unlink(txn, &source);
    ctx.notify(EventClass::Generic, "rename_from", from);
    ctx.notify(EventClass::Generic, "rename_to", to);
    Ok(true)
}

pub fn rename(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    rename_key(ctx, argv, false)?;
    out.ok();
    Ok(())
}

pub fn renamenx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let renamed = rename_key(ctx, argv, true)?;
    out.integer(renamed as i64);
    Ok(())
}

/// `EXPIRE` and its relatives: `unit_ms` per unit, relative or absolute.
fn expire_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    unit_ms: i64,
    absolute: bool,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    // As Redis's expireGenericCommand: the options first, then the number.
    let (mut nx, mut xx, mut gt, mut lt) = (false, false, false, false);
    for option in argv.iter().skip(3) {
        match option.to_ascii_uppercase().as_slice() {
            b"NX" => nx = true,
            b"XX" => xx = true,
            b"GT" => gt = true,
            b"LT" => lt = true,
            _ => {
                // Redis prints the option as a C string (it ends at a NUL), and its
                // addReplyErrorFormat trims CR and LF from the end of the text.
                let shown = option.split(|&b| b == 0).next().unwrap_or_default();
                let end = shown
                    .iter()
                    .rposition(|&b| b != b'\r' && b != b'\n')
                    .map_or(0, |last| last + 1);
                let shown = &shown[..end];
                return Err(CmdError::owned(format!(
                    "ERR Unsupported option {}",
                    String::from_utf8_lossy(shown)
                )));
            }
        }
    }
    if nx && (xx || gt || lt) {
        return Err(CmdError::fixed(
            "ERR NX and XX, GT or LT options at the same time are not compatible",
        ));
    }
    if gt && lt {
        return Err(CmdError::fixed(
            "ERR GT and LT options at the same time are not compatible",
        ));
    }
    let n = int_arg(argv, 2)?;
    let command = String::from_utf8_lossy(arg(argv, 0)).to_lowercase();
    let invalid = || CmdError::owned(format!("ERR invalid expire time in '{command}' command"));
    let mut at = n.checked_mul(unit_ms).ok_or_else(invalid)?;
    if !absolute {
        at = at.checked_add(ctx.now_ms as i64).ok_or_else(invalid)?;
    }
    let Some(found) = ctx.find_for_write(key) else {
        out.integer(0);
        return Ok(());
    };
    let current = found.head.expire_at_ms;
    // A key without a TTL counts as an infinite one for GT and LT.
    let refused = (nx && current != 0)
        || (xx && current == 0)
        || (gt && (current == 0 || at <= current as i64))
        || (lt && current != 0 && at >= current as i64);
    if refused {
        out.integer(0);
        return Ok(());
    }
    let layout = ctx.layout;
    if at <= ctx.now_ms as i64 {
        ctx.delete(&found);
        ctx.notify(EventClass::Generic, "del", key);
    } else {
        let txn = ctx.txn();
        layout.set_expire(txn, &found, at as u64)?;
        layout.touch(txn, &found);
        ctx.notify(EventClass::Generic, "expire", key);
    }
    out.integer(1);
    Ok(())
}

pub fn expire(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    expire_generic(ctx, argv, out, 1000, false)
}

pub fn pexpire(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    expire_generic(ctx, argv, out, 1, false)
}

pub fn expireat(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    expire_generic(ctx, argv, out, 1000, true)
}

pub fn pexpireat(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    expire_generic(ctx, argv, out, 1, true)
}

pub fn persist(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let removed = match ctx.find_for_write(key) {
        Some(found) if found.head.expire_at_ms != 0 => {
            let layout = ctx.layout;
            let txn = ctx.txn();
            layout.set_expire(txn, &found, 0)?;
            layout.touch(txn, &found);
            ctx.notify(EventClass::Generic, "persist", key);
            true
        }
        _ => false,
    };
    out.integer(removed as i64);
    Ok(())
}

/// Time to live in milliseconds: -2 without the key, -1 without an expiry.
fn ttl_ms(ctx: &Ctx<'_, '_>, key: &[u8]) -> i64 {
    match ctx.find(key) {
        None => -2,
        Some(found) if found.head.expire_at_ms == 0 => -1,
        Some(found) => (found.head.expire_at_ms - ctx.now_ms) as i64,
    }
}

pub fn ttl(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let ms = ttl_ms(ctx, arg(argv, 1));
    out.integer(if ms < 0 { ms } else { (ms + 500) / 1000 });
    Ok(())
}

pub fn pttl(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    out.integer(ttl_ms(ctx, arg(argv, 1)));
    Ok(())
}

fn expire_time(ctx: &Ctx<'_, '_>, key: &[u8]) -> i64 {
    match ctx.find(key) {
        None => -2,
        Some(found) if found.head.expire_at_ms == 0 => -1,
        Some(found) => found.head.expire_at_ms as i64,
    }
}

pub fn expiretime(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let at = expire_time(ctx, arg(argv, 1));
    out.integer(if at < 0 { at } else { at / 1000 });
    Ok(())
}

pub fn pexpiretime(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    out.integer(expire_time(ctx, arg(argv, 1)));
    Ok(())
}

/// The key bytes of the entry at `entry`.
fn entry_key(mem: &impl Mem, entry: usize) -> &[u8] {
    let head: KeyHead = mem.pod(entry);
    mem.bytes(entry + KEY_HEAD_BYTES, head.link.key_len as usize)
}

/// Whether the entry at `entry` is live at `now_ms`.
fn entry_live(mem: &impl Mem, entry: usize, now_ms: u64) -> bool {
    let head: KeyHead = mem.pod(entry);
    head.expire_at_ms == 0 || head.expire_at_ms > now_ms
}

pub fn keys(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let pattern = arg(argv, 1);
    let mut found: Vec<Vec<u8>> = Vec::new();
    let now_ms = ctx.now_ms;
    ctx.layout.keyspace.for_each(&ctx.access, |entry| {
        let key = entry_key(&ctx.access, entry);
        if entry_live(&ctx.access, entry, now_ms) && glob::matches(pattern, key) {
            found.push(key.to_vec());
        }
    });
    out.array(found.len());
    for key in &found {
        out.bulk(key);
    }
    Ok(())
}

/// Random picks `RANDOMKEY` makes before it lists the live keys instead: more than a few
/// only when most keys have expired but are not yet swept.
const RANDOM_KEY_TRIES: usize = 64;

/// `RANDOMKEY`: a live key drawn uniformly (a null reply when there is none). A pick that
/// lands on an expired key (not swept yet) is drawn again, which keeps the draw uniform over
/// the live keys; after [`RANDOM_KEY_TRIES`] such picks the live keys are listed and one of
/// them drawn, so the work stays bounded when most keys have expired.
pub fn randomkey(
    ctx: &mut Ctx<'_, '_>,
    _argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let keyspace = ctx.layout.keyspace;
    if keyspace.is_empty(&ctx.access) {
        out.null();
        return Ok(());
    }
    let now_ms = ctx.now_ms;
    for _ in 0..RANDOM_KEY_TRIES {
        let entry = super::collection::random_entry(ctx, &keyspace);
        if entry_live(&ctx.access, entry, now_ms) {
            out.bulk(entry_key(&ctx.access, entry));
            return Ok(());
        }
    }
    let mut live = Vec::new();
    keyspace.for_each(&ctx.access, |entry| {
        if entry_live(&ctx.access, entry, now_ms) {
            live.push(entry);
        }
    });
    if live.is_empty() {
        out.null();
    } else {
        let entry = live[ctx.random_below(live.len() as u64) as usize];
        out.bulk(entry_key(&ctx.access, entry));
    }
    Ok(())
}

/// `TIME`: the time the call runs at (the primary's clock, which a backup's reads never
/// fall behind), as Unix seconds and microseconds, two bulk strings. The clock is kept in
/// milliseconds, so the microseconds are a multiple of 1000.
pub fn time(
    ctx: &mut Ctx<'_, '_>,
    _argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let seconds = ctx.now_ms / 1000;
    let micros = (ctx.now_ms % 1000) * 1000;
    out.array(2);
    out.bulk(seconds.to_string().as_bytes());
    out.bulk(micros.to_string().as_bytes());
    Ok(())
}

pub fn scan(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let cursor = super::collection::parse_cursor(arg(argv, 1))?;
    let (mut pattern, mut count, mut kind): (Option<&[u8]>, i64, Option<Vec<u8>>) =
        (None, 10, None);
    let mut i = 2;
    while i < argv.len() {
        let option = arg(argv, i).to_ascii_uppercase();
        let Some(value) = argv.get(i + 1) else {
            return Err(CmdError::SYNTAX);
        };
        match option.as_slice() {
            b"MATCH" => pattern = Some(value),
            b"COUNT" => {
                count = crate::num::parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                if count < 1 {
                    return Err(CmdError::SYNTAX);
                }
            }
            b"TYPE" => kind = Some(value.to_ascii_lowercase()),
            _ => return Err(CmdError::SYNTAX),
        }
        i += 2;
    }
    let now_ms = ctx.now_ms;
    let mut found: Vec<Vec<u8>> = Vec::new();
    let mut next = cursor;
    // Like Redis, visit about `count` buckets' worth (at most ten times as many empty ones).
    let mut visits = 0i64;
    loop {
        next = ctx.layout.keyspace.scan(&ctx.access, next, |entry| {
            let key = entry_key(&ctx.access, entry);
            let head: KeyHead = ctx.access.pod(entry);
            let kind_ok = kind.as_deref().is_none_or(|want| {
                let kind = Key {
                    found: Found { link: 0, entry },
                    head,
                }
                .kind();
                kind.name().as_bytes() == want
            });
            if entry_live(&ctx.access, entry, now_ms)
                && kind_ok
                && pattern.is_none_or(|p| glob::matches(p, key))
            {
                found.push(key.to_vec());
            }
        });
        visits += 1;
        if next == 0 || visits >= count.saturating_mul(10) || found.len() as i64 >= count {
            break;
        }
    }
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(found.len());
    for key in &found {
        out.bulk(key);
    }
    Ok(())
}

/// Keys of the expiry index one round of the sweep samples (Redis's
/// `ACTIVE_EXPIRE_CYCLE_KEYS_PER_LOOP`).
const SWEEP_SAMPLE: usize = 20;
/// Rounds one sweep runs at most: the sweep is one txn, and a txn must stay short.
const SWEEP_ROUNDS_MAX: usize = 16;

/// The active expiry sweep, Redis's `activeExpireCycle` as one txn: samples keys of the
/// expiry index and deletes those whose time passed, round after round while a quarter or
/// more of a round's sample had expired. Returns how many keys it deleted. Only the primary
/// runs it; backups get the deletions as redo and never read a clock.
pub fn sweep(ctx: &mut Ctx<'_, '_>) -> usize {
    let base = ctx.layout;
    let mut deleted = 0;
    for db in base.dbs() {
        ctx.layout = db;
        deleted += sweep_db(ctx);
    }
    ctx.layout = base;
    deleted
}

/// [`sweep`] of the database `ctx.layout` is of.
fn sweep_db(ctx: &mut Ctx<'_, '_>) -> usize {
    let layout = ctx.layout;
    let mut deleted = 0;
    for _ in 0..SWEEP_ROUNDS_MAX {
        if layout.expires.is_empty(&ctx.access) {
            break;
        }
        let mut sample: Vec<Vec<u8>> = Vec::new();
        let mut cursor = ctx.random();
        for _ in 0..4 * SWEEP_SAMPLE {
            if sample.len() >= SWEEP_SAMPLE {
                break;
            }
            cursor = layout.expires.scan(&ctx.access, cursor, |entry| {
                sample.push(layout.expires.key(&ctx.access, entry).to_vec());
            });
        }
        sample.sort();
        sample.dedup();
        let mut expired = 0;
        for name in &sample {
            let Some(key) = layout.find_any(&ctx.access, name) else {
                continue;
            };
            if key.head.expire_at_ms != 0 && key.head.expire_at_ms <= ctx.now_ms {
                ctx.delete(&key);
                ctx.notify(EventClass::Expired, "expired", name);
                expired += 1;
            }
        }
        deleted += expired;
        if expired * 4 < sample.len() {
            break;
        }
    }
    deleted
}

/// `COPY`'s options: whether it may replace the destination, and the database it copies
/// into (`DB`; `None`: the source's).
fn copy_options(argv: &Argv) -> Result<(bool, Option<u8>), CmdError> {
    let mut replace = false;
    let mut db = None;
    let mut i = 3;
    while i < argv.len() {
        match arg(argv, i).to_ascii_uppercase().as_slice() {
            b"REPLACE" => replace = true,
            b"DB" if i + 1 < argv.len() => {
                db = Some(db_index(c_int_arg(argv, i + 1)?)?);
                i += 1;
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    Ok((replace, db))
}

/// Argument `i` read as Redis reads a database's index: a C int (getIntFromObjectOrReply).
fn c_int_arg(argv: &Argv, i: usize) -> Result<i64, CmdError> {
    let index = int_arg(argv, i)?;
    if i32::try_from(index).is_err() {
        return Err(CmdError::fixed(
            "ERR value is out of range, value must between -2147483648 and 2147483647",
        ));
    }
    Ok(index)
}

/// A database's number as `SELECT` takes it.
fn db_index(index: i64) -> Result<u8, CmdError> {
    crate::db::db_number(index).ok_or(CmdError::fixed("ERR DB index is out of range"))
}

/// `MOVE key db`: moves the key, with its expiry, to another database, unless it is there
/// already (db.c's `moveCommand`).
pub fn move_key(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    let db = db_index(c_int_arg(argv, 2)?)?;
    let home = ctx.layout;
    if db == home.db {
        return Err(CmdError::fixed(
            "ERR source and destination objects are the same",
        ));
    }
    let Some(key) = ctx.find_for_write(name) else {
        out.integer(0);
        return Ok(());
    };
    let there = home.in_db(db);
    ctx.layout = there;
    let taken = ctx.find_for_write(name).is_some();
    ctx.layout = home;
    if taken {
        out.integer(0);
        return Ok(());
    }
    // Found again: deleting an expired entry there cannot move this one's link, but the
    // link is read fresh all the same.
    let key = ctx.find_for_write(name).unwrap_or(key);
    home.move_key(ctx.txn(), &key, &there)?;
    // As Redis: the key is new there, then gone from here, then moved there.
    ctx.layout = there;
    ctx.notify(EventClass::New, "new", name);
    ctx.layout = home;
    ctx.notify(EventClass::Generic, "move_from", name);
    ctx.layout = there;
    ctx.notify(EventClass::Generic, "move_to", name);
    ctx.layout = home;
    out.integer(1);
    Ok(())
}

/// `SWAPDB a b`: the two databases trade every key at once (db.c's `swapdbCommand`).
pub fn swapdb(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let index = |i: usize, what: &'static str| {
        crate::num::parse_i64(arg(argv, i))
            .filter(|index| i32::try_from(*index).is_ok())
            .ok_or(CmdError::fixed(what))
    };
    let a = index(1, "ERR invalid first DB index")?;
    let b = index(2, "ERR invalid second DB index")?;
    let (a, b) = (db_index(a)?, db_index(b)?);
    if a != b {
        let layout = ctx.layout;
        layout.swap_dbs(ctx.txn(), a, b);
    }
    out.ok();
    Ok(())
}

pub fn copy(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let (from, to) = (arg(argv, 1), arg(argv, 2));
    let (replace, db) = copy_options(argv)?;
    let home = ctx.layout;
    let there = home.in_db(db.unwrap_or(home.db));
    if from == to && there.db == home.db {
        return Err(CmdError::fixed(
            "ERR source and destination objects are the same",
        ));
    }
    if ctx.find(from).is_none() {
        out.integer(0);
        return Ok(());
    }
    // The destination is written in its database; the source is read by its entry.
    ctx.layout = there;
    let copied = copy_into(ctx, &home, from, to, replace);
    ctx.layout = home;
    out.integer(i64::from(copied?));
    Ok(())
}

/// [`copy`] into the database `ctx.layout` is of, from `from` in `home`'s: whether it
/// copied.
fn copy_into(
    ctx: &mut Ctx<'_, '_>,
    home: &Layout,
    from: &[u8],
    to: &[u8],
    replace: bool,
) -> Result<bool, CmdError> {
    if let Some(target) = ctx.find_for_write(to) {
        if !replace {
            return Ok(false);
        }
        ctx.delete(&target);
    }
    // Found again: deleting the destination may have moved the source's link.
    let source = home
        .find(&ctx.access, from, ctx.now_ms)
        .expect("the source is still there");
    match source.kind() {
        Kind::String => {
            let value = ctx.string(&source).to_vec();
            super::strings::put(ctx, to, &value, super::strings::Ttl::Clear)?;
        }
        Kind::Hash => super::hashes::copy(ctx, &source, to)?,
        Kind::List => super::lists::copy(ctx, &source, to)?,
        Kind::Set => super::sets::copy(ctx, &source, to)?,
        Kind::ZSet => super::zsets::copy(ctx, &source, to)?,
        Kind::Stream => super::streams::copy(ctx, &source, to)?,
    }
    if source.mark() != EncodingMark::Derived {
        // Redis's copy keeps the source's encoding.
        super::dump::mark(ctx, to, source.mark());
    }
    if source.head.expire_at_ms != 0 {
        let layout = ctx.layout;
        let copied = ctx.find_for_write(to).expect("the copy was just made");
        layout.set_expire(ctx.txn(), &copied, source.head.expire_at_ms)?;
    }
    ctx.notify(EventClass::Generic, "copy_to", to);
    Ok(true)
}
