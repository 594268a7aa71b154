//! Set commands (t_set.c).
//!
//! # Encoding
//!
//! A set is a [`Dict`] whose header is the whole of the value's root block (see
//! `cmd/collection.rs`). Each member is one entry, one block of exactly
//! `24 + member` bytes:
//!
//! ```text
//! [Link: next, hash, key_len = member length, aux = 0][member]
//! ```
//!
//! There is no compact encoding for small sets or sets of integers (Redis's listpack and
//! intset); a member's text is stored as given, so replies are the same either way.

use tandem_memory::Txn;

use super::collection::{self, Distinct};
use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::db::{Key, Kind, Layout};
use crate::dict::{Dict, LINK_BYTES, Link};
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("SADD", -3, Write, (1, 1, 1), true, sadd),
    data("SCARD", 2, Read, (1, 1, 1), false, scard),
    data("SDIFF", -2, Read, (1, -1, 1), false, sdiff),
    data("SDIFFSTORE", -3, Write, (1, -1, 1), true, sdiffstore),
    data("SINTER", -2, Read, (1, -1, 1), false, sinter),
    // Its keys follow a count, so Redis 7.0 names no fixed key range (movablekeys).
    data("SINTERCARD", -3, Read, (0, 0, 0), false, sintercard),
    data("SINTERSTORE", -3, Write, (1, -1, 1), true, sinterstore),
    data("SISMEMBER", 3, Read, (1, 1, 1), false, sismember),
    data("SMEMBERS", 2, Read, (1, 1, 1), false, smembers),
    data("SMISMEMBER", -3, Read, (1, 1, 1), false, smismember),
    data("SMOVE", 4, Write, (1, 2, 1), false, smove),
    data("SPOP", -2, Write, (1, 1, 1), false, spop),
    data("SRANDMEMBER", -2, Read, (1, 1, 1), false, srandmember),
    data("SREM", -3, Write, (1, 1, 1), false, srem),
    data("SSCAN", -3, Read, (1, 1, 1), false, sscan),
    data("SUNION", -2, Read, (1, -1, 1), false, sunion),
    data("SUNIONSTORE", -3, Write, (1, -1, 1), true, sunionstore),
];

/// Where a member's bytes start in its entry.
const MEMBER_AT: usize = LINK_BYTES;

/// The bytes a member's entry was allocated for.
fn entry_len(link: &Link) -> usize {
    LINK_BYTES + link.key_len as usize
}

/// The table of set `key`.
fn table(key: &Key) -> Dict {
    collection::table(key, MEMBER_AT)
}

/// Frees every block the value of `key` holds (not its key entry).
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    collection::free(txn, layout, key, MEMBER_AT, entry_len);
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, _layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    collection::owned(mem, key, MEMBER_AT, entry_len, owned);
}

/// Makes `to` (which does not exist) a set of the members of set `from` (`COPY`).
pub fn copy(ctx: &mut Ctx<'_, '_>, from: &Key, to: &[u8]) -> Result<(), CmdError> {
    let mem = &ctx.access;
    let source = table(from);
    let members: Vec<Vec<u8>> = collection::all_entries(mem, &source)
        .into_iter()
        .map(|entry| source.key(mem, entry).to_vec())
        .collect();
    let key = collection::create(ctx, to, Kind::Set)?;
    for member in &members {
        add_member(ctx, &key, member)?;
    }
    collection::changed(ctx, &key, &table(&key));
    Ok(())
}

/// Makes `name` (which does not exist) a set of `members` (distinct, not empty), as
/// `RESTORE` does.
pub fn store(ctx: &mut Ctx<'_, '_>, name: &[u8], members: &[Vec<u8>]) -> Result<(), CmdError> {
    assert!(!members.is_empty(), "an empty set is not stored");
    let key = collection::create(ctx, name, Kind::Set)?;
    for member in members {
        add_member(ctx, &key, member)?;
    }
    collection::changed(ctx, &key, &table(&key));
    Ok(())
}

/// The set `key` names: `None` if it does not exist, `WRONGTYPE` if it is not a set.
fn get_set(ctx: &Ctx<'_, '_>, key: &[u8]) -> Result<Option<Key>, CmdError> {
    ctx.find_typed(key, Kind::Set)
}

/// The sets `names` name, `None` for a missing one; `WRONGTYPE` if any is of another type
/// (every key is checked, as Redis checks them all before it answers).
fn get_sets<'a>(
    ctx: &Ctx<'_, '_>,
    names: impl Iterator<Item = &'a [u8]>,
) -> Result<Vec<Option<Key>>, CmdError> {
    names.map(|name| get_set(ctx, name)).collect()
}

/// Whether `member` is in set `key`.
pub fn is_member(mem: &impl Mem, seed: u64, key: &Key, member: &[u8]) -> bool {
    let hash = crate::dict::hash(seed, member);
    table(key).find(mem, member, hash).is_some()
}

/// Every member of set `key`, in its table's order (what sorted-set algebra and `SORT` read
/// of a plain set).
pub fn members<'m>(mem: &'m impl Mem, key: &Key) -> Vec<&'m [u8]> {
    let dict = table(key);
    collection::all_entries(mem, &dict)
        .into_iter()
        .map(|entry| dict.key(mem, entry))
        .collect()
}

/// Set `name` for a write, created empty if it does not exist. The caller has checked its
/// type, and adds at least one member.
fn set_for_write(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Result<Key, CmdError> {
    match ctx.find_for_write(name) {
        Some(key) => {
            assert_eq!(key.kind(), Kind::Set, "the caller checked the type");
            Ok(key)
        }
        None => collection::create(ctx, name, Kind::Set),
    }
}

/// Adds `member` to set `key`; true if it was not there. Does not update the key's count or
/// version (see [`collection::changed`]).
fn add_member(ctx: &mut Ctx<'_, '_>, key: &Key, member: &[u8]) -> Result<bool, CmdError> {
    let layout = ctx.layout;
    let dict = table(key);
    let txn = ctx.txn();
    let hash = crate::dict::hash(layout.seed(txn), member);
    if dict.find(txn, member, hash).is_some() {
        return Ok(false);
    }
    let link = Link {
        next: 0,
        hash,
        key_len: u32::try_from(member.len()).expect("a member is shorter than 4 GiB"),
        aux: 0,
    };
    let len = entry_len(&link);
    let entry = layout.alloc.alloc(txn, len)?;
    let bytes = txn.set_range(entry, len);
    bytes[..LINK_BYTES].copy_from_slice(bytemuck::bytes_of(&link));
    bytes[MEMBER_AT..].copy_from_slice(member);
    if let Err(err) = dict.insert(txn, &layout.alloc, entry) {
        layout.alloc.free(txn, entry, len);
        return Err(err.into());
    }
    Ok(true)
}

/// Removes `member` (whose hash is `hash`) from set `key`; true if it was there. Does not
/// delete an emptied key.
fn remove_hashed(ctx: &mut Ctx<'_, '_>, key: &Key, member: &[u8], hash: u64) -> bool {
    let layout = ctx.layout;
    let dict = table(key);
    let txn = ctx.txn();
    let Some(found) = dict.find(txn, member, hash) else {
        return false;
    };
    dict.remove(txn, &layout.alloc, found);
    layout
        .alloc
        .free(txn, found.entry, LINK_BYTES + member.len());
    true
}

/// Removes `member` from set `key`; true if it was there.
fn remove_member(ctx: &mut Ctx<'_, '_>, key: &Key, member: &[u8]) -> bool {
    let hash = crate::dict::hash(ctx.layout.seed(&ctx.access), member);
    remove_hashed(ctx, key, member, hash)
}

/// Removes the member whose entry is `entry` from set `key`, and returns its bytes.
fn remove_entry(ctx: &mut Ctx<'_, '_>, key: &Key, entry: usize) -> Vec<u8> {
    let link: Link = ctx.access.pod(entry);
    let member = table(key).key(&ctx.access, entry).to_vec();
    let removed = remove_hashed(ctx, key, &member, link.hash);
    assert!(removed, "an entry of the set is in the set");
    member
}

/// After `event` (`srem`, `spop`) removed members from set `key`, named `name`: publishes
/// `event`, then deletes the key if it is empty (publishing `del` after the event, as Redis
/// does), else records the change.
fn removed_some(ctx: &mut Ctx<'_, '_>, name: &[u8], key: &Key, event: &str) {
    ctx.notify(EventClass::Set, event, name);
    let dict = table(key);
    if dict.is_empty(&ctx.access) {
        ctx.delete(key);
        ctx.notify(EventClass::Generic, "del", name);
    } else {
        collection::changed(ctx, key, &dict);
    }
}

pub fn sadd(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    get_set(ctx, name)?;
    let key = set_for_write(ctx, name)?;
    let mut added = 0;
    for member in argv.iter().skip(2) {
        added += i64::from(add_member(ctx, &key, member)?);
    }
    if added > 0 {
        collection::changed(ctx, &key, &table(&key));
        ctx.notify(EventClass::Set, "sadd", name);
    }
    out.integer(added);
    Ok(())
}

pub fn srem(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    if get_set(ctx, name)?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let key = ctx.find_for_write(name).expect("a live key stays live");
    let dict = table(&key);
    let mut removed = 0;
    for member in argv.iter().skip(2) {
        if remove_member(ctx, &key, member) {
            removed += 1;
            if dict.is_empty(&ctx.access) {
                break;
            }
        }
    }
    if removed > 0 {
        removed_some(ctx, name, &key, "srem");
    }
    out.integer(removed);
    Ok(())
}

pub fn sismember(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let seed = ctx.layout.seed(&ctx.access);
    let found = match get_set(ctx, arg(argv, 1))? {
        Some(key) => is_member(&ctx.access, seed, &key, arg(argv, 2)),
        None => false,
    };
    out.integer(i64::from(found));
    Ok(())
}

pub fn smismember(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let seed = ctx.layout.seed(&ctx.access);
    let key = get_set(ctx, arg(argv, 1))?;
    out.array(argv.len() - 2);
    for member in argv.iter().skip(2) {
        let found = key.is_some_and(|key| is_member(&ctx.access, seed, &key, member));
        out.integer(i64::from(found));
    }
    Ok(())
}

pub fn scard(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let len = get_set(ctx, arg(argv, 1))?.map_or(0, |key| key.head.value_len);
    out.integer(len as i64);
    Ok(())
}

pub fn smembers(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let Some(key) = get_set(ctx, arg(argv, 1))? else {
        out.set(0);
        return Ok(());
    };
    let dict = table(&key);
    out.set(key.head.value_len as usize);
    dict.for_each(&ctx.access, |entry| out.bulk(dict.key(&ctx.access, entry)));
    Ok(())
}

pub fn spop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    let count = match argv.len() {
        2 => None,
        3 => Some(
            num::parse_i64(arg(argv, 2))
                .filter(|&count| count >= 0)
                .ok_or(CmdError::fixed(
                    "ERR value is out of range, must be positive",
                ))? as u64,
        ),
        _ => return Err(CmdError::SYNTAX),
    };
    let Some(key) = get_set(ctx, name)? else {
        match count {
            None => out.null(),
            Some(_) => out.set(0),
        }
        return Ok(());
    };
    let dict = table(&key);
    let Some(count) = count else {
        let entry = collection::random_entry(ctx, &dict);
        let member = remove_entry(ctx, &key, entry);
        out.bulk(&member);
        removed_some(ctx, name, &key, "spop");
        return Ok(());
    };
    if count == 0 {
        out.set(0);
        return Ok(());
    }
    let size = key.head.value_len;
    if count >= size {
        out.set(size as usize);
        dict.for_each(&ctx.access, |entry| out.bulk(dict.key(&ctx.access, entry)));
        ctx.delete(&key);
        ctx.notify(EventClass::Set, "spop", name);
        ctx.notify(EventClass::Generic, "del", name);
        return Ok(());
    }
    out.set(count as usize);
    let remaining = size - count;
    if remaining * 5 > count {
        // Few to pop: pop random members one at a time, O(count).
        for _ in 0..count {
            let entry = collection::random_entry(ctx, &dict);
            out.bulk(&remove_entry(ctx, &key, entry));
        }
    } else {
        // Nearly all (Redis's case 3): choose the few that stay, uniformly, and pop the
        // rest; O(size), which is O(count) here.
        let mut popped = collection::all_entries(&ctx.access, &dict);
        for _ in 0..remaining {
            let stays = ctx.random_below(popped.len() as u64) as usize;
            popped.swap_remove(stays);
        }
        for entry in popped {
            out.bulk(&remove_entry(ctx, &key, entry));
        }
        // Redis moves the members that stay into a new set (`setTypeCreate`), whose
        // encoding follows from them alone.
        let layout = ctx.layout;
        layout.set_mark(ctx.txn(), &key, crate::db::EncodingMark::Derived);
    }
    removed_some(ctx, name, &key, "spop");
    Ok(())
}

pub fn srandmember(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    match argv.len() {
        2 => {
            match get_set(ctx, name)? {
                Some(key) => {
                    let dict = table(&key);
                    let entry = collection::random_entry(ctx, &dict);
                    out.bulk(dict.key(&ctx.access, entry));
                }
                None => out.null(),
            }
            return Ok(());
        }
        3 => {}
        _ => return Err(CmdError::SYNTAX),
    }
    let count = collection::random_count_arg(argv, 2)?;
    let Some(key) = get_set(ctx, name)? else {
        out.array(0);
        return Ok(());
    };
    let dict = table(&key);
    let wanted = count.unsigned_abs();
    let entries = if wanted == 0 {
        Vec::new()
    } else if count < 0 {
        collection::check_repeats(wanted)?;
        collection::sample_repeats(ctx, &dict, wanted)
    } else if wanted >= key.head.value_len {
        collection::all_entries(&ctx.access, &dict)
    } else {
        collection::sample_distinct(ctx, &dict, wanted)
    };
    out.array(entries.len());
    for entry in entries {
        out.bulk(dict.key(&ctx.access, entry));
    }
    Ok(())
}

/// Calls `each` with every member of all of `sets` (taken from the smallest), until it
/// answers false. Redis's `sinterGenericCommand`: O(N × M), N the smallest set's size and M
/// the number of sets.
fn for_each_common<'m>(
    mem: &'m impl Mem,
    seed: u64,
    sets: &[Key],
    mut each: impl FnMut(&'m [u8]) -> bool,
) {
    let mut by_size: Vec<&Key> = sets.iter().collect();
    by_size.sort_by_key(|key| key.head.value_len);
    let (smallest, others) = by_size.split_first().expect("at least one set");
    let dict = table(smallest);
    let mut entries = Vec::with_capacity(smallest.head.value_len as usize);
    dict.for_each(mem, |entry| entries.push(entry));
    for entry in entries {
        let member = dict.key(mem, entry);
        let everywhere = others.iter().all(|other| {
            other.head.value == smallest.head.value || is_member(mem, seed, other, member)
        });
        if everywhere && !each(member) {
            return;
        }
    }
}

/// The members of every one of `sets` (a missing set is empty).
fn intersection<'m>(mem: &'m impl Mem, seed: u64, sets: &[Option<Key>]) -> Vec<&'m [u8]> {
    let Some(sets) = sets.iter().copied().collect::<Option<Vec<Key>>>() else {
        return Vec::new();
    };
    let mut members = Vec::new();
    for_each_common(mem, seed, &sets, |member| {
        members.push(member);
        true
    });
    members
}

/// The members of any of `sets`, each once. O(total size).
fn union<'m>(mem: &'m impl Mem, seed: u64, sets: &[Option<Key>]) -> Vec<&'m [u8]> {
    let mut members = Distinct::new(seed);
    for key in sets.iter().flatten() {
        let dict = table(key);
        dict.for_each(mem, |entry| {
            members.insert(dict.key(mem, entry));
        });
    }
    members.into_members()
}

/// The members of the first of `sets` that are in none of the others. As Redis's
/// `sunionDiffGenericCommand`, one of two ways, whichever is cheaper: testing each member of
/// the first set against every other set (O(N × M)), or gathering the members of the
/// others that are in the first set and keeping the rest (O(total size)).
fn difference<'m>(mem: &'m impl Mem, seed: u64, sets: &[Option<Key>]) -> Vec<&'m [u8]> {
    let (Some(Some(first)), others) = (sets.first(), &sets[1..]) else {
        return Vec::new();
    };
    let others: Vec<&Key> = others.iter().flatten().collect();
    if others
        .iter()
        .any(|other| other.head.value == first.head.value)
    {
        // The first set less itself.
        return Vec::new();
    }
    let first_dict = table(first);
    let first_size = first.head.value_len;
    let test_each_work = first_size * (others.len() as u64 + 1) / 2;
    let gather_work = first_size + others.iter().map(|other| other.head.value_len).sum::<u64>();
    let mut members = Vec::new();
    if test_each_work <= gather_work {
        let mut by_size = others;
        // Larger sets first: a member found early is dropped sooner.
        by_size.sort_by_key(|other| std::cmp::Reverse(other.head.value_len));
        first_dict.for_each(mem, |entry| {
            let member = first_dict.key(mem, entry);
            if !by_size
                .iter()
                .any(|other| is_member(mem, seed, other, member))
            {
                members.push(member);
            }
        });
    } else {
        let mut dropped = Distinct::new(seed);
        for other in others {
            let dict = table(other);
            dict.for_each(mem, |entry| {
                let member = dict.key(mem, entry);
                if is_member(mem, seed, first, member) {
                    dropped.insert(member);
                }
            });
        }
        first_dict.for_each(mem, |entry| {
            let member = first_dict.key(mem, entry);
            if !dropped.contains(member) {
                members.push(member);
            }
        });
    }
    members
}

/// What `SINTER`, `SUNION` and `SDIFF` (and their `STORE` forms) compute.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum SetOperation {
    Intersection,
    Union,
    Difference,
}

impl SetOperation {
    /// The event its `STORE` form publishes on the key it stored.
    fn store_event(self) -> &'static str {
        match self {
            SetOperation::Intersection => "sinterstore",
            SetOperation::Union => "sunionstore",
            SetOperation::Difference => "sdiffstore",
        }
    }
}

/// The members `operation` makes of `sets`, each once.
fn compute<'m>(
    mem: &'m impl Mem,
    seed: u64,
    operation: SetOperation,
    sets: &[Option<Key>],
) -> Vec<&'m [u8]> {
    match operation {
        SetOperation::Intersection => intersection(mem, seed, sets),
        SetOperation::Union => union(mem, seed, sets),
        SetOperation::Difference => difference(mem, seed, sets),
    }
}

/// `SINTER`, `SUNION` and `SDIFF`: `operation` over every key argument, answered as a set.
fn combine(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    operation: SetOperation,
) -> Result<(), CmdError> {
    let sets = get_sets(ctx, argv.iter().skip(1))?;
    let seed = ctx.layout.seed(&ctx.access);
    let members = compute(&ctx.access, seed, operation, &sets);
    out.set(members.len());
    for member in members {
        out.bulk(member);
    }
    Ok(())
}

/// `SINTERSTORE`, `SUNIONSTORE` and `SDIFFSTORE`: `operation` over the key arguments after
/// the first, stored as the first (whatever it held, and without its TTL; an empty result
/// deletes it). Answers the stored set's size.
fn combine_store(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    operation: SetOperation,
) -> Result<(), CmdError> {
    let sets = get_sets(ctx, argv.iter().skip(2))?;
    let seed = ctx.layout.seed(&ctx.access);
    // Copied out: the destination may be one of the sources, and is deleted first.
    let members: Vec<Vec<u8>> = compute(&ctx.access, seed, operation, &sets)
        .into_iter()
        .map(<[u8]>::to_vec)
        .collect();
    let destination = arg(argv, 1);
    if members.is_empty() {
        super::keys::delete_destination(ctx, destination);
        out.integer(0);
        return Ok(());
    }
    let key = collection::replace(ctx, destination, Kind::Set)?;
    for member in &members {
        let added = add_member(ctx, &key, member)?;
        assert!(added, "a set operation's result has no duplicates");
    }
    collection::changed(ctx, &key, &table(&key));
    ctx.notify(EventClass::Set, operation.store_event(), destination);
    out.integer(members.len() as i64);
    Ok(())
}

pub fn sinter(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine(ctx, argv, out, SetOperation::Intersection)
}

pub fn sunion(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine(ctx, argv, out, SetOperation::Union)
}

pub fn sdiff(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine(ctx, argv, out, SetOperation::Difference)
}

pub fn sinterstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine_store(ctx, argv, out, SetOperation::Intersection)
}

pub fn sunionstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine_store(ctx, argv, out, SetOperation::Union)
}

pub fn sdiffstore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    combine_store(ctx, argv, out, SetOperation::Difference)
}

pub fn sintercard(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key_count = num::parse_i64(arg(argv, 1))
        .filter(|&n| n >= 1)
        .ok_or(CmdError::fixed("ERR numkeys should be greater than 0"))?;
    if key_count > argv.len() as i64 - 2 {
        return Err(CmdError::fixed(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    let keys_end = 2 + key_count as usize;
    // 0: no limit.
    let mut limit = 0;
    let mut i = keys_end;
    while i < argv.len() {
        match argv.get(i + 1) {
            Some(value) if arg(argv, i).eq_ignore_ascii_case(b"LIMIT") => {
                limit = num::parse_i64(value)
                    .filter(|&n| n >= 0)
                    .ok_or(CmdError::fixed("ERR LIMIT can't be negative"))?
                    as u64;
                i += 2;
            }
            _ => return Err(CmdError::SYNTAX),
        }
    }
    let sets = get_sets(ctx, (2..keys_end).map(|i| arg(argv, i)))?;
    let seed = ctx.layout.seed(&ctx.access);
    let mut count: u64 = 0;
    if let Some(sets) = sets.into_iter().collect::<Option<Vec<Key>>>() {
        for_each_common(&ctx.access, seed, &sets, |_| {
            count += 1;
            limit == 0 || count < limit
        });
    }
    out.integer(count as i64);
    Ok(())
}

pub fn smove(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (source_name, destination_name, member) = (arg(argv, 1), arg(argv, 2), arg(argv, 3));
    // Redis's order: a missing source answers 0 before the destination's type is checked.
    let Some(source) = get_set(ctx, source_name)? else {
        out.integer(0);
        return Ok(());
    };
    get_set(ctx, destination_name)?;
    let seed = ctx.layout.seed(&ctx.access);
    let in_source = is_member(&ctx.access, seed, &source, member);
    if source_name == destination_name || !in_source {
        out.integer(i64::from(in_source));
        return Ok(());
    }
    let source = ctx
        .find_for_write(source_name)
        .expect("a live key stays live");
    remove_member(ctx, &source, member);
    removed_some(ctx, source_name, &source, "srem");
    let destination = set_for_write(ctx, destination_name)?;
    if add_member(ctx, &destination, member)? {
        collection::changed(ctx, &destination, &table(&destination));
        ctx.notify(EventClass::Set, "sadd", destination_name);
    }
    out.integer(1);
    Ok(())
}

pub fn sscan(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // Redis's order: the cursor, then the key (a missing key answers an empty scan whatever
    // the options), then the options.
    let cursor = collection::parse_cursor(arg(argv, 2))?;
    let Some(key) = get_set(ctx, arg(argv, 1))? else {
        collection::scan_reply_header(out, 0, 0);
        return Ok(());
    };
    let options = collection::scan_options(argv, 3)?;
    let dict = table(&key);
    let (next, entries) = collection::scan_step(&ctx.access, &dict, cursor, &options, 1);
    collection::scan_reply_header(out, next, entries.len());
    for entry in entries {
        out.bulk(dict.key(&ctx.access, entry));
    }
    Ok(())
}
