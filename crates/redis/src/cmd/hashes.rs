//! Hash commands (t_hash.c).
//!
//! # Encoding
//!
//! A hash is a [`Dict`] whose header is the whole of the value's root block (see
//! `cmd/collection.rs`). Each field is one entry, one block:
//!
//! ```text
//! [Link: next, hash, key_len = field length, aux = value length][field][value]
//! ```
//!
//! allocated for exactly `24 + field + value` bytes, so `free` and the allocator's check
//! recompute every entry's length from its link. A new value whose entry falls in the same
//! size class as the old one is written in place; otherwise the field moves to a new block
//! that takes the old one's place in its chain ([`Dict::replace`]). There is no compact
//! encoding for small hashes (Redis's listpack): a hash of one short field costs its key
//! entry, a 64-byte root, a 32-byte bucket array and one entry rounded up to a 16-byte
//! class.

use tandem_memory::Txn;

use super::collection;
use super::{CmdError, Command, Ctx, Read, Write, arg, arity_error, data, int_arg};
use crate::alloc::OutOfMemory;
use crate::db::{Key, Kind, Layout};
use crate::dict::{Dict, Found, LINK_BYTES, Link};
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, Proto, ReplyWriter};

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("HDEL", -3, Write, (1, 1, 1), false, hdel),
    data("HEXISTS", 3, Read, (1, 1, 1), false, hexists),
    data("HGET", 3, Read, (1, 1, 1), false, hget),
    data("HGETALL", 2, Read, (1, 1, 1), false, hgetall),
    data("HINCRBY", 4, Write, (1, 1, 1), true, hincrby),
    data("HINCRBYFLOAT", 4, Write, (1, 1, 1), true, hincrbyfloat),
    data("HKEYS", 2, Read, (1, 1, 1), false, hkeys),
    data("HLEN", 2, Read, (1, 1, 1), false, hlen),
    data("HMGET", -3, Read, (1, 1, 1), false, hmget),
    data("HMSET", -4, Write, (1, 1, 1), true, hmset),
    data("HRANDFIELD", -2, Read, (1, 1, 1), false, hrandfield),
    data("HSCAN", -3, Read, (1, 1, 1), false, hscan),
    data("HSET", -4, Write, (1, 1, 1), true, hset),
    data("HSETNX", 4, Write, (1, 1, 1), true, hsetnx),
    data("HSTRLEN", 3, Read, (1, 1, 1), false, hstrlen),
    data("HVALS", 2, Read, (1, 1, 1), false, hvals),
];

/// Where a field's bytes start in its entry.
const FIELD_AT: usize = LINK_BYTES;
/// Where the value's length lies in an entry (the link's `aux`).
const VALUE_LEN_AT: usize = std::mem::offset_of!(Link, aux);

/// The bytes a field's entry was allocated for.
fn entry_len(link: &Link) -> usize {
    LINK_BYTES + link.key_len as usize + link.aux as usize
}

/// The value of the field whose entry is `entry`.
fn value_of(mem: &impl Mem, entry: usize) -> &[u8] {
    let link: Link = mem.pod(entry);
    mem.bytes(entry + FIELD_AT + link.key_len as usize, link.aux as usize)
}

/// The table of hash `key`.
fn table(key: &Key) -> Dict {
    collection::table(key, FIELD_AT)
}

/// Frees every block the value of `key` holds (not its key entry).
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    collection::free(txn, layout, key, FIELD_AT, entry_len);
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, _layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    collection::owned(mem, key, FIELD_AT, entry_len, owned);
}

/// Makes `to` (which does not exist) a hash of the fields and values of hash `from`
/// (`COPY`).
pub fn copy(ctx: &mut Ctx<'_, '_>, from: &Key, to: &[u8]) -> Result<(), CmdError> {
    let mem = &ctx.access;
    let source = table(from);
    let pairs: Vec<(Vec<u8>, Vec<u8>)> = collection::all_entries(mem, &source)
        .into_iter()
        .map(|entry| {
            (
                source.key(mem, entry).to_vec(),
                value_of(mem, entry).to_vec(),
            )
        })
        .collect();
    let key = collection::create(ctx, to, Kind::Hash)?;
    for (field, value) in &pairs {
        set_field(ctx, &key, field, value)?;
    }
    collection::changed(ctx, &key, &table(&key));
    Ok(())
}

/// Every (field, value) of hash `key`, in its table's order (`DUMP`).
pub fn pairs(mem: &impl Mem, key: &Key) -> Vec<(Vec<u8>, Vec<u8>)> {
    let dict = table(key);
    collection::all_entries(mem, &dict)
        .into_iter()
        .map(|entry| (dict.key(mem, entry).to_vec(), value_of(mem, entry).to_vec()))
        .collect()
}

/// Makes `name` (which does not exist) a hash of `pairs` (distinct fields, not empty),
/// as `RESTORE` does.
pub fn store(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    pairs: &[(Vec<u8>, Vec<u8>)],
) -> Result<(), CmdError> {
    assert!(!pairs.is_empty(), "an empty hash is not stored");
    let key = collection::create(ctx, name, Kind::Hash)?;
    for (field, value) in pairs {
        set_field(ctx, &key, field, value)?;
    }
    collection::changed(ctx, &key, &table(&key));
    Ok(())
}

/// The hash `key` names: `None` if it does not exist, `WRONGTYPE` if it is not a hash.
fn get_hash(ctx: &Ctx<'_, '_>, key: &[u8]) -> Result<Option<Key>, CmdError> {
    ctx.find_typed(key, Kind::Hash)
}

/// The entry of `field` in hash `key`.
fn find_field(ctx: &Ctx<'_, '_>, key: &Key, field: &[u8]) -> Option<Found> {
    let hash = crate::dict::hash(ctx.layout.seed(&ctx.access), field);
    table(key).find(&ctx.access, field, hash)
}

/// The value of `field` in hash `key`, if the field exists.
pub fn field_value<'m>(ctx: &'m Ctx<'_, '_>, key: &Key, field: &[u8]) -> Option<&'m [u8]> {
    find_field(ctx, key, field).map(|found| value_of(&ctx.access, found.entry))
}

/// Hash `name` for a write, created empty if it does not exist. The caller has checked its
/// type, and sets at least one field.
fn hash_for_write(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Result<Key, CmdError> {
    match ctx.find_for_write(name) {
        Some(key) => {
            assert_eq!(key.kind(), Kind::Hash, "the caller checked the type");
            Ok(key)
        }
        None => collection::create(ctx, name, Kind::Hash),
    }
}

/// Writes a new entry for `field` = `value` (its link's `next` is the table's to set).
fn new_entry(
    txn: &mut Txn<'_>,
    layout: &Layout,
    hash: u64,
    field: &[u8],
    value: &[u8],
) -> Result<usize, OutOfMemory> {
    let link = Link {
        next: 0,
        hash,
        key_len: u32::try_from(field.len()).expect("a field is shorter than 4 GiB"),
        aux: u32::try_from(value.len()).expect("a value is shorter than 4 GiB"),
    };
    let len = entry_len(&link);
    let entry = layout.alloc.alloc(txn, len)?;
    let bytes = txn.set_range(entry, len);
    bytes[..LINK_BYTES].copy_from_slice(bytemuck::bytes_of(&link));
    bytes[FIELD_AT..FIELD_AT + field.len()].copy_from_slice(field);
    bytes[FIELD_AT + field.len()..].copy_from_slice(value);
    Ok(entry)
}

/// Sets `field` to `value` in hash `key`; true if the field is new. Does not update the
/// key's count or version (see [`collection::changed`]).
fn set_field(
    ctx: &mut Ctx<'_, '_>,
    key: &Key,
    field: &[u8],
    value: &[u8],
) -> Result<bool, CmdError> {
    let layout = ctx.layout;
    let dict = table(key);
    let txn = ctx.txn();
    let hash = crate::dict::hash(layout.seed(txn), field);
    let Some(found) = dict.find(txn, field, hash) else {
        let entry = new_entry(txn, &layout, hash, field, value)?;
        if let Err(err) = dict.insert(txn, &layout.alloc, entry) {
            layout
                .alloc
                .free(txn, entry, LINK_BYTES + field.len() + value.len());
            return Err(err.into());
        }
        return Ok(true);
    };
    let old: Link = txn.pod(found.entry);
    let old_len = entry_len(&old);
    let new_len = LINK_BYTES + field.len() + value.len();
    if crate::alloc::Alloc::block_len_for(old_len) == crate::alloc::Alloc::block_len_for(new_len) {
        // The same class: the block holds the new value as well, and is freed by either
        // length.
        let value_at = found.entry + FIELD_AT + field.len();
        txn.set_range(value_at, value.len()).copy_from_slice(value);
        txn.set_range(found.entry + VALUE_LEN_AT, 4)
            .copy_from_slice(&(value.len() as u32).to_le_bytes());
    } else {
        let entry = new_entry(txn, &layout, hash, field, value)?;
        dict.replace(txn, found, entry);
        layout.alloc.free(txn, found.entry, old_len);
    }
    Ok(false)
}

/// Removes `field` from hash `key`; true if it was there. Does not delete an emptied key.
fn delete_field(ctx: &mut Ctx<'_, '_>, key: &Key, field: &[u8]) -> bool {
    let layout = ctx.layout;
    let dict = table(key);
    let txn = ctx.txn();
    let hash = crate::dict::hash(layout.seed(txn), field);
    let Some(found) = dict.find(txn, field, hash) else {
        return false;
    };
    let link: Link = txn.pod(found.entry);
    dict.remove(txn, &layout.alloc, found);
    layout.alloc.free(txn, found.entry, entry_len(&link));
    true
}

/// `HSET` and `HMSET`: sets every pair and returns the new fields' count. Both publish
/// `hset`, as in Redis.
fn set_pairs(ctx: &mut Ctx<'_, '_>, argv: &Argv) -> Result<i64, CmdError> {
    // The name, the key, then pairs: an odd count lacks a value.
    if !argv.len().is_multiple_of(2) {
        return Err(arity_error(arg(argv, 0)));
    }
    let name = arg(argv, 1);
    get_hash(ctx, name)?;
    let key = hash_for_write(ctx, name)?;
    let mut created = 0;
    for pair in (2..argv.len()).step_by(2) {
        created += i64::from(set_field(ctx, &key, arg(argv, pair), arg(argv, pair + 1))?);
    }
    collection::changed(ctx, &key, &table(&key));
    ctx.notify(EventClass::Hash, "hset", name);
    Ok(created)
}

pub fn hset(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let created = set_pairs(ctx, argv)?;
    out.integer(created);
    Ok(())
}

pub fn hmset(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    set_pairs(ctx, argv)?;
    out.ok();
    Ok(())
}

pub fn hsetnx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (name, field) = (arg(argv, 1), arg(argv, 2));
    if let Some(key) = get_hash(ctx, name)?
        && find_field(ctx, &key, field).is_some()
    {
        out.integer(0);
        return Ok(());
    }
    let key = hash_for_write(ctx, name)?;
    set_field(ctx, &key, field, arg(argv, 3))?;
    collection::changed(ctx, &key, &table(&key));
    ctx.notify(EventClass::Hash, "hset", name);
    out.integer(1);
    Ok(())
}

pub fn hget(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let value = match get_hash(ctx, arg(argv, 1))? {
        Some(key) => field_value(ctx, &key, arg(argv, 2)),
        None => None,
    };
    match value {
        Some(value) => out.bulk(value),
        None => out.null(),
    }
    Ok(())
}

pub fn hmget(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = get_hash(ctx, arg(argv, 1))?;
    out.array(argv.len() - 2);
    for field in argv.iter().skip(2) {
        match key.and_then(|key| field_value(ctx, &key, field)) {
            Some(value) => out.bulk(value),
            None => out.null(),
        }
    }
    Ok(())
}

pub fn hexists(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let exists = match get_hash(ctx, arg(argv, 1))? {
        Some(key) => find_field(ctx, &key, arg(argv, 2)).is_some(),
        None => false,
    };
    out.integer(i64::from(exists));
    Ok(())
}

pub fn hstrlen(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let len = match get_hash(ctx, arg(argv, 1))? {
        Some(key) => field_value(ctx, &key, arg(argv, 2)).map_or(0, <[u8]>::len),
        None => 0,
    };
    out.integer(len as i64);
    Ok(())
}

pub fn hlen(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let len = get_hash(ctx, arg(argv, 1))?.map_or(0, |key| key.head.value_len);
    out.integer(len as i64);
    Ok(())
}

pub fn hdel(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    if get_hash(ctx, name)?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let key = ctx.find_for_write(name).expect("a live key stays live");
    let dict = table(&key);
    let mut deleted = 0;
    for field in argv.iter().skip(2) {
        if delete_field(ctx, &key, field) {
            deleted += 1;
            if dict.is_empty(&ctx.access) {
                break;
            }
        }
    }
    out.integer(deleted);
    if deleted == 0 {
        return Ok(());
    }
    // Redis tells `hdel`, then `del` for a hash it emptied.
    ctx.notify(EventClass::Hash, "hdel", name);
    if dict.is_empty(&ctx.access) {
        ctx.delete(&key);
        ctx.notify(EventClass::Generic, "del", name);
    } else {
        collection::changed(ctx, &key, &dict);
    }
    Ok(())
}

pub fn hincrby(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (name, field) = (arg(argv, 1), arg(argv, 2));
    let increment = int_arg(argv, 3)?;
    let old = match get_hash(ctx, name)? {
        Some(key) => match field_value(ctx, &key, field) {
            Some(value) => {
                num::parse_i64(value).ok_or(CmdError::fixed("ERR hash value is not an integer"))?
            }
            None => 0,
        },
        None => 0,
    };
    let new = old.checked_add(increment).ok_or(CmdError::OVERFLOW)?;
    let mut text = Vec::with_capacity(20);
    num::format_i64(new, &mut text);
    let key = hash_for_write(ctx, name)?;
    set_field(ctx, &key, field, &text)?;
    collection::changed(ctx, &key, &table(&key));
    ctx.notify(EventClass::Hash, "hincrby", name);
    out.integer(new);
    Ok(())
}

pub fn hincrbyfloat(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // As INCRBYFLOAT: Redis adds in 80-bit long double and stores `%.17Lf` trimmed, which
    // `LongDouble` reproduces exactly.
    let (name, field) = (arg(argv, 1), arg(argv, 2));
    let increment = num::LongDouble::parse(arg(argv, 3)).ok_or(CmdError::NOT_FLOAT)?;
    if !increment.is_finite() {
        return Err(CmdError::fixed("ERR value is NaN or Infinity"));
    }
    let old = match get_hash(ctx, name)? {
        Some(key) => field_value(ctx, &key, field)
            .map(|value| {
                num::LongDouble::parse(value)
                    .ok_or(CmdError::fixed("ERR hash value is not a float"))
            })
            .transpose()?,
        None => None,
    };
    let sum = match old {
        Some(old) => old + increment,
        None => num::LongDouble::parse(b"0").expect("zero parses") + increment,
    };
    if !sum.is_finite() {
        return Err(CmdError::fixed(
            "ERR increment would produce NaN or Infinity",
        ));
    }
    let mut text = Vec::with_capacity(32);
    sum.format_human(&mut text);
    let key = hash_for_write(ctx, name)?;
    set_field(ctx, &key, field, &text)?;
    collection::changed(ctx, &key, &table(&key));
    ctx.notify(EventClass::Hash, "hincrbyfloat", name);
    out.bulk(&text);
    Ok(())
}

/// What `HGETALL`, `HKEYS` and `HVALS` answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Listing {
    Fields,
    Values,
    Both,
}

fn list_all(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    listing: Listing,
) -> Result<(), CmdError> {
    let key = get_hash(ctx, arg(argv, 1))?;
    let len = key.map_or(0, |key| key.head.value_len as usize);
    if listing == Listing::Both {
        out.map(len);
    } else {
        out.array(len);
    }
    let Some(key) = key else {
        return Ok(());
    };
    let dict = table(&key);
    let mut written = 0;
    dict.for_each(&ctx.access, |entry| {
        if listing != Listing::Values {
            out.bulk(dict.key(&ctx.access, entry));
        }
        if listing != Listing::Fields {
            out.bulk(value_of(&ctx.access, entry));
        }
        written += 1;
    });
    assert_eq!(written, len, "a hash's count is its table's length");
    Ok(())
}

pub fn hgetall(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    list_all(ctx, argv, out, Listing::Both)
}

pub fn hkeys(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    list_all(ctx, argv, out, Listing::Fields)
}

pub fn hvals(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    list_all(ctx, argv, out, Listing::Values)
}

pub fn hscan(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // Redis's order: the cursor, then the key (a missing key answers an empty scan whatever
    // the options), then the options.
    let cursor = collection::parse_cursor(arg(argv, 2))?;
    let Some(key) = get_hash(ctx, arg(argv, 1))? else {
        collection::scan_reply_header(out, 0, 0);
        return Ok(());
    };
    let options = collection::scan_options(argv, 3)?;
    let dict = table(&key);
    let (next, entries) = collection::scan_step(&ctx.access, &dict, cursor, &options, 2);
    collection::scan_reply_header(out, next, entries.len() * 2);
    for entry in entries {
        out.bulk(dict.key(&ctx.access, entry));
        out.bulk(value_of(&ctx.access, entry));
    }
    Ok(())
}

/// Writes fields (with their values if `with_values`) as `HRANDFIELD` does: a flat array in
/// RESP2, an array of [field, value] pairs in RESP3.
fn reply_fields(
    mem: &impl Mem,
    dict: &Dict,
    entries: &[usize],
    with_values: bool,
    out: &mut ReplyWriter<'_>,
) {
    let pairs_nested = with_values && out.proto() == Proto::Resp3;
    if with_values && !pairs_nested {
        out.array(entries.len() * 2);
    } else {
        out.array(entries.len());
    }
    for &entry in entries {
        if pairs_nested {
            out.array(2);
        }
        out.bulk(dict.key(mem, entry));
        if with_values {
            out.bulk(value_of(mem, entry));
        }
    }
}

pub fn hrandfield(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    if argv.len() == 2 {
        match get_hash(ctx, name)? {
            Some(key) => {
                let dict = table(&key);
                let entry = collection::random_entry(ctx, &dict);
                out.bulk(dict.key(&ctx.access, entry));
            }
            None => out.null(),
        }
        return Ok(());
    }
    let (count, with_values) = collection::random_count_with(argv, b"WITHVALUES")?;
    let Some(key) = get_hash(ctx, name)? else {
        out.array(0);
        return Ok(());
    };
    let repeats = count < 0;
    if repeats {
        collection::check_repeats(count.unsigned_abs())?;
    }
    let dict = table(&key);
    let size = key.head.value_len;
    let wanted = count.unsigned_abs();
    let entries = if wanted == 0 {
        Vec::new()
    } else if repeats {
        collection::sample_repeats(ctx, &dict, wanted)
    } else if wanted >= size {
        collection::all_entries(&ctx.access, &dict)
    } else {
        collection::sample_distinct(ctx, &dict, wanted)
    };
    reply_fields(&ctx.access, &dict, &entries, with_values, out);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_entry_is_its_link_field_and_value() {
        let link = Link {
            next: 0,
            hash: 1,
            key_len: 5,
            aux: 7,
        };
        assert_eq!(entry_len(&link), 24 + 5 + 7);
        assert_eq!(VALUE_LEN_AT, 20);
    }
}
