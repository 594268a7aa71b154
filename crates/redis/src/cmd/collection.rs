//! What the hash and set families share: a value that is one [`Dict`] whose 64-byte header
//! starts the value's root block (`KeyHead::value` points to it), with entries the family
//! lays out, and the parts of their commands that only walk such a table: random picks,
//! `HSCAN`/`SSCAN` steps, and a scratch set of distinct members for `SUNION` and `SDIFF`.
//!
//! A collection key always holds at least one entry: the command that empties one deletes
//! the key, so `KeyHead::value_len` (kept equal to the table's length) is never zero.

use tandem_memory::Txn;

use super::{CmdError, Ctx, arg};
use crate::db::{Key, KeyHead, Kind, Layout};
use crate::dict::{DICT_HEADER_BYTES, Dict, Link};
use crate::glob;
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

/// Bytes of a collection's root block: only the table's header.
pub const ROOT_BYTES: usize = DICT_HEADER_BYTES;

/// The most elements a negative `SRANDMEMBER`/`HRANDFIELD`/`ZRANDMEMBER` count may ask for.
/// Redis 7.0 streams such a reply until the client's output limit closes it; here a reply is
/// built whole before it is sent, so a count like -9223372036854775807 would exhaust memory.
/// The cap is as many elements as one request may carry arguments
/// ([`crate::resp::RequestLimits::args_max`]).
pub const REPEATS_MAX: u64 = 1 << 20;

/// The table of collection `key`, whose entries hold their key at `key_at`.
pub fn table(key: &Key, key_at: usize) -> Dict {
    assert_ne!(key.head.value, 0, "a collection key without a root block");
    Dict::new(key.head.value as usize, key_at)
}

/// Creates key `name` (which must not exist) of type `kind`, holding an empty table, and
/// publishes `new`, as Redis's `dbAdd` does before the command's own event. The caller adds at
/// least one entry before the command ends.
pub fn create(ctx: &mut Ctx<'_, '_>, name: &[u8], kind: Kind) -> Result<Key, CmdError> {
    let key = create_unannounced(ctx, name, kind)?;
    ctx.notify(EventClass::New, "new", name);
    Ok(key)
}

/// Makes `name` a key of type `kind` holding an empty table, whatever it held before (its
/// expiry goes too), as Redis's `setKey` does for `SINTERSTORE` and its relatives: a key that
/// existed is overwritten, which is not `new`; one that did not is created, which is.
pub fn replace(ctx: &mut Ctx<'_, '_>, name: &[u8], kind: Kind) -> Result<Key, CmdError> {
    match ctx.find_for_write(name) {
        Some(old) => {
            ctx.delete(&old);
            create_unannounced(ctx, name, kind)
        }
        None => create(ctx, name, kind),
    }
}

/// [`create`] without publishing `new`.
fn create_unannounced(ctx: &mut Ctx<'_, '_>, name: &[u8], kind: Kind) -> Result<Key, CmdError> {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let root = layout.alloc.alloc(txn, ROOT_BYTES)?;
    txn.set_range(root, ROOT_BYTES).fill(0);
    let key = match layout.create(txn, name, kind, 0) {
        Ok(key) => key,
        Err(err) => {
            layout.alloc.free(txn, root, ROOT_BYTES);
            return Err(err.into());
        }
    };
    layout.set_value(txn, &key, root as u64);
    Ok(Key {
        head: KeyHead {
            value: root as u64,
            ..key.head
        },
        ..key
    })
}

/// Records that collection `key` changed: its element count becomes the table's length,
/// and its version moves (for `WATCH`).
pub fn changed(ctx: &mut Ctx<'_, '_>, key: &Key, dict: &Dict) {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let len = dict.len(txn);
    assert!(len > 0, "an emptied collection is deleted, not kept");
    layout.set_value_len(txn, key, len);
    layout.touch(txn, key);
}

/// Frees every entry of collection `key` (an entry whose link is `link` was allocated for
/// `entry_len(&link)` bytes), its bucket arrays and its root block.
pub fn free(
    txn: &mut Txn<'_>,
    layout: &Layout,
    key: &Key,
    key_at: usize,
    entry_len: impl Fn(&Link) -> usize,
) {
    let dict = table(key, key_at);
    dict.clear(txn, &layout.alloc, |txn, entry| {
        let link: Link = txn.pod(entry);
        layout.alloc.free(txn, entry, entry_len(&link));
    });
    layout.alloc.free(txn, dict.header_at(), ROOT_BYTES);
}

/// Pushes every block collection `key` holds, as [`free`] would free them.
pub fn owned(
    mem: &impl Mem,
    key: &Key,
    key_at: usize,
    entry_len: impl Fn(&Link) -> usize,
    owned: &mut Vec<(usize, usize)>,
) {
    let dict = table(key, key_at);
    owned.push((dict.header_at(), ROOT_BYTES));
    dict.blocks(mem, |block, len| owned.push((block, len)));
    dict.for_each(mem, |entry| {
        let link: Link = mem.pod(entry);
        owned.push((entry, entry_len(&link)));
    });
}

/// The chain length a random pick first assumes no chain exceeds (see [`random_entry`]).
/// Chains are short: the table keeps at most about one entry per bucket on average, so with
/// a hash that spreads keys a chain of more than 8 is about one in a million buckets.
const CHAIN_BOUND: u64 = 8;

/// A random entry of `dict`, which is not empty, each entry equally likely.
///
/// Redis's `dictGetRandomKey` picks a random non-empty bucket, then a random entry of its
/// chain, so an entry that shares its bucket is less likely than one alone in its bucket (in
/// a chain of two, half as likely); that is why `SRANDMEMBER key -N` was biased. Here a pick
/// is a random bucket slot and a random position below a bound on chain lengths: the entry
/// at that position if its chain reaches it, else another try. Every (slot, position) pair
/// is equally likely and each entry is exactly one pair, so the pick is uniform as long as
/// no chain is longer than the bound. A chain found longer raises the bound for the rest of
/// the pick (the try that met it starts over), so an entry past [`CHAIN_BOUND`] in its chain
/// is still reached, if a little less often than the others until its chain was met.
///
/// Each try succeeds with probability (entries) / (slots × bound), at least 1/128 (a table
/// at least an eighth full, twice the slots while it rehashes), so a pick is O(1) expected.
pub fn random_entry(ctx: &mut Ctx<'_, '_>, dict: &Dict) -> usize {
    assert!(
        !dict.is_empty(&ctx.access),
        "a random entry of an empty table"
    );
    let slots = dict.bucket_slots(&ctx.access);
    let mut bound = CHAIN_BOUND;
    loop {
        let slot = ctx.random_below(slots);
        let Some(first) = dict.slot_first(&ctx.access, slot) else {
            continue;
        };
        let mut chain_len = 0;
        let mut entry = first;
        while entry != 0 {
            chain_len += 1;
            entry = ctx.access.pod::<Link>(entry).next as usize;
        }
        if chain_len > bound {
            bound = chain_len;
            continue;
        }
        let position = ctx.random_below(bound);
        if position >= chain_len {
            continue;
        }
        let mut entry = first;
        for _ in 0..position {
            entry = ctx.access.pod::<Link>(entry).next as usize;
        }
        return entry;
    }
}

/// `count` distinct entries of `dict` (0 < `count` < its length), chosen at random, as
/// Redis's `SRANDMEMBER`/`HRANDFIELD` choose them. A count near the length (more than a
/// third) takes every entry and drops random ones until `count` remain, which is uniform and
/// O(length) = O(count); a smaller count draws random entries until `count` differ, an
/// expected O(count) draws, each uniform, so every subset of `count` is equally likely.
pub fn sample_distinct(ctx: &mut Ctx<'_, '_>, dict: &Dict, count: u64) -> Vec<usize> {
    let len = dict.len(&ctx.access);
    assert!(count > 0 && count < len, "a sample of {count} of {len}");
    if count.saturating_mul(3) > len {
        let mut entries = all_entries(&ctx.access, dict);
        while entries.len() as u64 > count {
            let drop = ctx.random_below(entries.len() as u64) as usize;
            entries.swap_remove(drop);
        }
        return entries;
    }
    let seed = ctx.layout.seed(&ctx.access);
    let mut seen = Distinct::new(seed);
    while (seen.len() as u64) < count {
        let entry = random_entry(ctx, dict);
        seen.insert((entry as u64).to_le_bytes());
    }
    seen.into_members()
        .into_iter()
        .map(|entry| u64::from_le_bytes(entry) as usize)
        .collect()
}

/// `count` entries of `dict` drawn at random with repeats (a negative `SRANDMEMBER` or
/// `HRANDFIELD` count).
pub fn sample_repeats(ctx: &mut Ctx<'_, '_>, dict: &Dict, count: u64) -> Vec<usize> {
    assert!(count <= REPEATS_MAX, "a count the caller refused");
    (0..count).map(|_| random_entry(ctx, dict)).collect()
}

/// Every entry of `dict`, in bucket order.
pub fn all_entries(mem: &impl Mem, dict: &Dict) -> Vec<usize> {
    let mut entries = Vec::with_capacity(dict.len(mem) as usize);
    dict.for_each(mem, |entry| entries.push(entry));
    entries
}

/// The count of `SRANDMEMBER key count` or `HRANDFIELD key count` (argument `i`), which
/// Redis takes as a `long` in [-LONG_MAX, LONG_MAX].
pub fn random_count_arg(argv: &Argv, i: usize) -> Result<i64, CmdError> {
    let count = num::parse_i64(arg(argv, i)).ok_or(CmdError::NOT_INTEGER)?;
    if count == i64::MIN {
        return Err(CmdError::fixed(
            "ERR value is out of range, value must between -9223372036854775807 and \
             9223372036854775807",
        ));
    }
    Ok(count)
}

/// The count of `HRANDFIELD key count [WITHVALUES]` or `ZRANDMEMBER key count [WITHSCORES]`
/// and whether `with` (the option's word) follows it. Pairs double the reply, so with them
/// the count must lie within ±`i64::MAX / 2`, as Redis checks.
pub fn random_count_with(argv: &Argv, with: &[u8]) -> Result<(i64, bool), CmdError> {
    let count = random_count_arg(argv, 2)?;
    let pairs = match argv.len() {
        3 => false,
        4 if arg(argv, 3).eq_ignore_ascii_case(with) => true,
        _ => return Err(CmdError::SYNTAX),
    };
    if pairs && !(-i64::MAX / 2..=i64::MAX / 2).contains(&count) {
        return Err(CmdError::fixed("ERR value is out of range"));
    }
    Ok((count, pairs))
}

/// Refuses a negative random count whose reply would exceed [`REPEATS_MAX`] elements.
pub fn check_repeats(count: u64) -> Result<(), CmdError> {
    if count > REPEATS_MAX {
        return Err(CmdError::owned(format!(
            "ERR value is out of range, a negative count asks for at most {REPEATS_MAX} \
             elements"
        )));
    }
    Ok(())
}

/// Parses a `*SCAN` cursor as Redis's `parseScanCursorOrReply` does with `strtoul`: an
/// optional sign then decimal digits, the whole text (a leading space is refused, the empty
/// text is cursor 0, and a minus sign negates modulo 2^64), or "ERR invalid cursor".
pub fn parse_cursor(text: &[u8]) -> Result<u64, CmdError> {
    let invalid = || CmdError::fixed("ERR invalid cursor");
    if text.is_empty() {
        return Ok(0);
    }
    let (negative, digits) = match text[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(invalid());
    }
    let mut value: u64 = 0;
    for &digit in digits {
        value = value
            .checked_mul(10)
            .and_then(|v| v.checked_add(u64::from(digit - b'0')))
            .ok_or_else(invalid)?;
    }
    Ok(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

/// The options of `HSCAN`/`SSCAN` after the cursor.
#[derive(Clone, Copy, Debug)]
pub struct ScanOptions<'a> {
    /// `MATCH`'s pattern; `None` for none, or for `*`, which matches everything.
    pub pattern: Option<&'a [u8]>,
    /// `COUNT`: about how many elements a step returns (10 by default).
    pub count: u64,
}

/// Parses `MATCH pattern` and `COUNT n` from argument `from` on, as Redis's
/// `scanGenericCommand` does for a key's collection (no `TYPE`).
pub fn scan_options(argv: &Argv, from: usize) -> Result<ScanOptions<'_>, CmdError> {
    let mut options = ScanOptions {
        pattern: None,
        count: 10,
    };
    let mut i = from;
    while i < argv.len() {
        let Some(value) = argv.get(i + 1) else {
            return Err(CmdError::SYNTAX);
        };
        match arg(argv, i).to_ascii_uppercase().as_slice() {
            b"COUNT" => {
                let count = num::parse_i64(value).ok_or(CmdError::NOT_INTEGER)?;
                if count < 1 {
                    return Err(CmdError::SYNTAX);
                }
                options.count = count as u64;
            }
            b"MATCH" => options.pattern = Some(value).filter(|pattern| *pattern != b"*"),
            _ => return Err(CmdError::SYNTAX),
        }
        i += 2;
    }
    Ok(options)
}

/// One step of a scan of `dict` from `cursor`, as Redis's `scanGenericCommand` takes it:
/// bucket groups are visited until `items` reply elements were gathered (`per_entry` for
/// each entry: 2 for a hash's field and value), the scan ends, or ten times `items` more
/// groups were visited. Returns the next cursor and the entries whose key matches the
/// pattern.
pub fn scan_step(
    mem: &impl Mem,
    dict: &Dict,
    cursor: u64,
    options: &ScanOptions<'_>,
    per_entry: u64,
) -> (u64, Vec<usize>) {
    let items = options.count.saturating_mul(per_entry);
    let mut visits_left = items.saturating_mul(10);
    let mut entries = Vec::new();
    let mut cursor = cursor;
    loop {
        cursor = dict.scan(mem, cursor, |entry| entries.push(entry));
        if cursor == 0 || visits_left == 0 || (entries.len() as u64) * per_entry >= items {
            break;
        }
        visits_left -= 1;
    }
    if let Some(pattern) = options.pattern {
        entries.retain(|&entry| glob::matches(pattern, dict.key(mem, entry)));
    }
    (cursor, entries)
}

/// The header of a `*SCAN` reply: the next cursor (as a bulk string), then an array of
/// `items` elements the caller writes.
pub fn scan_reply_header(out: &mut ReplyWriter<'_>, cursor: u64, items: usize) {
    let mut text = Vec::with_capacity(20);
    num::format_u64(cursor, &mut text);
    out.array(2);
    out.bulk(&text);
    out.array(items);
}

/// Distinct byte strings, in the order first inserted: the scratch set `SUNION`, `SDIFF`
/// and random samples build their results in. An open-addressing table keyed by the
/// database's hash (std's `HashSet` is randomly seeded, which this crate forbids), so that
/// inserting and testing are O(1), as in Redis's temporary dict. `T` is the string: a slice
/// of the segment, or an entry's offset as bytes while the segment is borrowed elsewhere.
#[derive(Debug)]
pub struct Distinct<T> {
    seed: u64,
    members: Vec<T>,
    hashes: Vec<u64>,
    /// Index + 1 into `members`, 0 for a free slot; a power of two long, at most half full.
    slots: Vec<usize>,
}

impl<T: AsRef<[u8]>> Distinct<T> {
    pub fn new(seed: u64) -> Distinct<T> {
        Distinct {
            seed,
            members: Vec::new(),
            hashes: Vec::new(),
            slots: vec![0; 16],
        }
    }

    /// The slot that holds `member` (true) or where it would go (false).
    fn slot_of(&self, member: &[u8], hash: u64) -> (usize, bool) {
        let mask = self.slots.len() - 1;
        let mut slot = hash as usize & mask;
        loop {
            match self.slots[slot] {
                0 => return (slot, false),
                index
                    if self.hashes[index - 1] == hash
                        && self.members[index - 1].as_ref() == member =>
                {
                    return (slot, true);
                }
                _ => slot = (slot + 1) & mask,
            }
        }
    }

    /// Adds `member`; false if it was there already.
    pub fn insert(&mut self, member: T) -> bool {
        if (self.members.len() + 1) * 2 > self.slots.len() {
            self.grow();
        }
        let hash = crate::dict::hash(self.seed, member.as_ref());
        let (slot, found) = self.slot_of(member.as_ref(), hash);
        if found {
            return false;
        }
        self.members.push(member);
        self.hashes.push(hash);
        self.slots[slot] = self.members.len();
        true
    }

    pub fn contains(&self, member: &[u8]) -> bool {
        let hash = crate::dict::hash(self.seed, member);
        self.slot_of(member, hash).1
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// The members, in the order first inserted.
    pub fn into_members(self) -> Vec<T> {
        self.members
    }

    fn grow(&mut self) {
        let size = self.slots.len() * 2;
        let mask = size - 1;
        self.slots = vec![0; size];
        for (index, &hash) in self.hashes.iter().enumerate() {
            let mut slot = hash as usize & mask;
            while self.slots[slot] != 0 {
                slot = (slot + 1) & mask;
            }
            self.slots[slot] = index + 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_parse_as_strtoul_does() {
        assert_eq!(parse_cursor(b""), Ok(0));
        assert_eq!(parse_cursor(b"0"), Ok(0));
        assert_eq!(parse_cursor(b"+17"), Ok(17));
        assert_eq!(parse_cursor(b"-1"), Ok(u64::MAX));
        assert_eq!(parse_cursor(b"18446744073709551615"), Ok(u64::MAX));
        for bad in [
            &b"18446744073709551616"[..],
            b" 1",
            b"1 ",
            b"x",
            b"-",
            b"+",
            b"1x",
            b"0x10",
        ] {
            assert!(parse_cursor(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn distinct_keeps_the_first_of_each_member_in_order() {
        let words: Vec<Vec<u8>> = (0..1000).map(|i| format!("m{}", i % 300).into()).collect();
        let mut distinct = Distinct::new(7);
        let added = words
            .iter()
            .filter(|w| distinct.insert(w.as_slice()))
            .count();
        assert_eq!(added, 300);
        assert_eq!(distinct.len(), 300);
        assert!(distinct.contains(b"m299"));
        assert!(!distinct.contains(b"m300"));
        let members = distinct.into_members();
        assert_eq!(members[0], b"m0");
        assert_eq!(members[299], b"m299");
    }
}
