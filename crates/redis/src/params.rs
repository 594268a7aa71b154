//! The run-time parameters `CONFIG SET` changes, held in the segment so that every node of a
//! group has them and a failover keeps them.
//!
//! They are one block of [`SLOTS`] words at [`crate::db`]'s `PARAMS_AT`, a word per
//! parameter, written with Redis 7.0's defaults when the database is formatted. A `CONFIG
//! SET` is a write command: its words change in the txn of its call, so they reach the backups
//! in its redo and a new primary reads what the old one last set. What each parameter does
//! here:
//!
//! - the encoding thresholds (`hash-max-listpack-entries`, `zset-max-listpack-value`,
//!   `set-max-intset-entries`, …) decide what `OBJECT ENCODING` answers and which encoding
//!   `DUMP` writes, as they decide how redis-server holds a value ([`Thresholds`]). A value
//!   converted to its large encoding stays so ([`crate::db::EncodingMark`]); one not yet
//!   converted is judged by the thresholds as they stand when asked, where redis-server
//!   judges it at its next write: lowered under a value that exists, they make tandem answer
//!   the large encoding for it at once, and redis-server only after that value's next write;
//! - `busy-reply-threshold` (alias `lua-time-limit`): how long a script runs before other
//!   clients are answered `-BUSY`; a database that never had it set follows each node's
//!   `tuning.busy_reply_threshold_ms` ([`BUSY_REPLY_THRESHOLD_UNSET`]);
//! - `list-max-listpack-size`, `list-compress-depth`, `stream-node-max-bytes` and
//!   `stream-node-max-entries` tune how redis-server lays out lists and streams in memory;
//!   tandem keeps its own layout, so they are checked and kept, and change nothing else (as
//!   Dragonfly does with the encoding settings it has no use for).
//!
//! - `notify-keyspace-events`: the classes of keyspace notifications a committed call
//!   publishes ([`crate::notify`]);
//! - `maxmemory`, `maxmemory-policy` and `maxmemory-samples`: when the primary evicts keys,
//!   which, and how many it samples to choose ([`crate::cmd::evict`]).
//!
//! `notify-keyspace-events` is checked as Redis checks it, but only its values that need
//! nothing tandem lacks are taken (no key-miss events).

use tandem_memory::Txn;

use crate::mem::{Mem, set_word};

/// The words of the block.
pub const SLOTS: usize = 16;
/// The block's length in bytes.
pub const BLOCK_BYTES: usize = SLOTS * 8;

/// `busy-reply-threshold` never set in this database: each node uses its own configuration's
/// threshold.
pub const BUSY_REPLY_THRESHOLD_UNSET: u64 = u64::MAX;

/// How a parameter's value reads and what it may be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ParamKind {
    /// An integer in `min..=max`, written in plain decimal (Redis's integer configs).
    Integer { min: i64, max: i64 },
    /// A byte count in `0..=max`, given with or without Redis's units (`4kb`, `1mb`, `1g`).
    Memory { max: i64 },
    /// One of these names, without case; the word holds its index.
    Choice(&'static [&'static str]),
    /// `notify-keyspace-events`' flags; the word holds them as a mask.
    KeyspaceEvents,
}

/// A parameter `CONFIG SET` may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Param {
    pub name: &'static str,
    /// The name Redis also answers to (its older name), if any.
    pub alias: Option<&'static str>,
    /// Its word in the block.
    pub slot: usize,
    pub kind: ParamKind,
    /// Its word in a fresh database.
    pub default: u64,
}

const LONG_MAX: i64 = i64::MAX;
const INT_MAX: i64 = i32::MAX as i64;
const INT_MIN: i64 = i32::MIN as i64;

/// Redis's eviction policies, in the order its error lists them.
pub const MAXMEMORY_POLICIES: &[&str] = &[
    "volatile-lru",
    "volatile-lfu",
    "volatile-random",
    "volatile-ttl",
    "allkeys-lru",
    "allkeys-lfu",
    "allkeys-random",
    "noeviction",
];
pub const NOEVICTION: u64 = 7;

pub const HASH_MAX_LISTPACK_ENTRIES: Param = Param {
    name: "hash-max-listpack-entries",
    alias: Some("hash-max-ziplist-entries"),
    slot: 0,
    kind: ParamKind::Integer {
        min: 0,
        max: LONG_MAX,
    },
    // The value compiled into redis-server 7.0 (the redis.conf it ships sets 128; a server
    // started without one, as Redis's tests start it, holds 512).
    default: 512,
};
pub const HASH_MAX_LISTPACK_VALUE: Param = Param {
    name: "hash-max-listpack-value",
    alias: Some("hash-max-ziplist-value"),
    slot: 1,
    kind: ParamKind::Memory { max: LONG_MAX },
    default: 64,
};
pub const ZSET_MAX_LISTPACK_ENTRIES: Param = Param {
    name: "zset-max-listpack-entries",
    alias: Some("zset-max-ziplist-entries"),
    slot: 2,
    kind: ParamKind::Integer {
        min: 0,
        max: LONG_MAX,
    },
    default: 128,
};
pub const ZSET_MAX_LISTPACK_VALUE: Param = Param {
    name: "zset-max-listpack-value",
    alias: Some("zset-max-ziplist-value"),
    slot: 3,
    kind: ParamKind::Memory { max: LONG_MAX },
    default: 64,
};
pub const SET_MAX_INTSET_ENTRIES: Param = Param {
    name: "set-max-intset-entries",
    alias: None,
    slot: 4,
    kind: ParamKind::Integer {
        min: 0,
        max: LONG_MAX,
    },
    default: 512,
};
pub const LIST_MAX_LISTPACK_SIZE: Param = Param {
    name: "list-max-listpack-size",
    alias: Some("list-max-ziplist-size"),
    slot: 5,
    kind: ParamKind::Integer {
        min: INT_MIN,
        max: INT_MAX,
    },
    default: -2i64 as u64,
};
pub const LIST_COMPRESS_DEPTH: Param = Param {
    name: "list-compress-depth",
    alias: None,
    slot: 6,
    kind: ParamKind::Integer {
        min: 0,
        max: INT_MAX,
    },
    default: 0,
};
pub const STREAM_NODE_MAX_BYTES: Param = Param {
    name: "stream-node-max-bytes",
    alias: None,
    slot: 7,
    kind: ParamKind::Memory { max: LONG_MAX },
    default: 4096,
};
pub const STREAM_NODE_MAX_ENTRIES: Param = Param {
    name: "stream-node-max-entries",
    alias: None,
    slot: 8,
    kind: ParamKind::Integer {
        min: 0,
        max: LONG_MAX,
    },
    default: 100,
};
pub const BUSY_REPLY_THRESHOLD: Param = Param {
    name: "busy-reply-threshold",
    alias: Some("lua-time-limit"),
    slot: 9,
    kind: ParamKind::Integer {
        min: 0,
        max: LONG_MAX,
    },
    default: BUSY_REPLY_THRESHOLD_UNSET,
};
pub const MAXMEMORY_POLICY: Param = Param {
    name: "maxmemory-policy",
    alias: None,
    slot: 10,
    kind: ParamKind::Choice(MAXMEMORY_POLICIES),
    default: NOEVICTION,
};
pub const NOTIFY_KEYSPACE_EVENTS: Param = Param {
    name: "notify-keyspace-events",
    alias: None,
    slot: 11,
    kind: ParamKind::KeyspaceEvents,
    default: 0,
};
/// 0: the database's size (what `CONFIG GET` then answers); below it, the used bytes past
/// which keys are evicted or growing writes refused ([`crate::cmd::evict`]). `CONFIG SET` refuses
/// more than the database holds.
pub const MAXMEMORY: Param = Param {
    name: "maxmemory",
    alias: None,
    slot: 12,
    kind: ParamKind::Memory { max: LONG_MAX },
    default: 0,
};
/// Keys sampled per database for each eviction. A database formatted before the parameter
/// existed holds 0 here, read as Redis's default ([`Params::maxmemory_samples`]).
pub const MAXMEMORY_SAMPLES: Param = Param {
    name: "maxmemory-samples",
    alias: None,
    slot: 13,
    kind: ParamKind::Integer { min: 1, max: 64 },
    default: MAXMEMORY_SAMPLES_DEFAULT,
};
/// Redis's default `maxmemory-samples`.
pub const MAXMEMORY_SAMPLES_DEFAULT: u64 = 5;

/// Every parameter the block holds.
pub const PARAMS: &[Param] = &[
    HASH_MAX_LISTPACK_ENTRIES,
    HASH_MAX_LISTPACK_VALUE,
    ZSET_MAX_LISTPACK_ENTRIES,
    ZSET_MAX_LISTPACK_VALUE,
    SET_MAX_INTSET_ENTRIES,
    LIST_MAX_LISTPACK_SIZE,
    LIST_COMPRESS_DEPTH,
    STREAM_NODE_MAX_BYTES,
    STREAM_NODE_MAX_ENTRIES,
    BUSY_REPLY_THRESHOLD,
    MAXMEMORY_POLICY,
    NOTIFY_KEYSPACE_EVENTS,
    MAXMEMORY,
    MAXMEMORY_SAMPLES,
];

const _: () = {
    let mut i = 0;
    while i < PARAMS.len() {
        assert!(
            PARAMS[i].slot == i,
            "each parameter's slot is its place in PARAMS"
        );
        i += 1;
    }
    assert!(PARAMS.len() <= SLOTS);
};

/// The parameter called `name` (or its alias), without case.
pub fn find(name: &[u8]) -> Option<&'static Param> {
    PARAMS.iter().find(|param| {
        std::iter::once(param.name)
            .chain(param.alias)
            .any(|known| known.as_bytes().eq_ignore_ascii_case(name))
    })
}

/// The block of parameters at segment offset `at`. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Params {
    at: usize,
}

impl Params {
    pub const fn new(at: usize) -> Params {
        Params { at }
    }

    /// Writes every parameter's default (a fresh database).
    pub fn format(&self, txn: &mut Txn<'_>) {
        for param in PARAMS {
            self.set(txn, param, param.default);
        }
    }

    /// `param`'s word.
    pub fn get(&self, mem: &impl Mem, param: &Param) -> u64 {
        mem.word(self.at + param.slot * 8)
    }

    pub fn set(&self, txn: &mut Txn<'_>, param: &Param, word: u64) {
        set_word(txn, self.at + param.slot * 8, word);
    }

    /// Checks that every parameter's word is one `CONFIG SET` could have written: in its
    /// range, one of its choices, known flags (or `busy-reply-threshold` never set).
    pub fn check(&self, mem: &impl Mem) -> Result<(), tandem_store::Inconsistency> {
        for param in PARAMS {
            let word = self.get(mem, param);
            let valid = match param.kind {
                _ if *param == BUSY_REPLY_THRESHOLD && word == BUSY_REPLY_THRESHOLD_UNSET => true,
                _ if *param == MAXMEMORY_SAMPLES && word == 0 => true,
                ParamKind::Integer { min, max } => (min..=max).contains(&(word as i64)),
                ParamKind::Memory { max } => (0..=max).contains(&(word as i64)),
                ParamKind::Choice(names) => word < names.len() as u64,
                ParamKind::KeyspaceEvents => word >> KEYSPACE_EVENT_CLASSES.len() == 0,
            };
            if !valid {
                return Err(tandem_store::Inconsistency {
                    check: "every run-time parameter holds a value CONFIG SET takes",
                    detail: format!("{} holds the word {word}", param.name),
                });
            }
        }
        Ok(())
    }

    /// `maxmemory-samples`, Redis's default where the database never had it.
    pub fn maxmemory_samples(&self, mem: &impl Mem) -> u64 {
        match self.get(mem, &MAXMEMORY_SAMPLES) {
            0 => MAXMEMORY_SAMPLES_DEFAULT,
            samples => samples,
        }
    }

    /// The encoding thresholds as they stand.
    pub fn thresholds(&self, mem: &impl Mem) -> Thresholds {
        let size = |param: &Param| usize::try_from(self.get(mem, param)).unwrap_or(usize::MAX);
        Thresholds {
            hash_entries: size(&HASH_MAX_LISTPACK_ENTRIES),
            hash_value: size(&HASH_MAX_LISTPACK_VALUE),
            zset_entries: size(&ZSET_MAX_LISTPACK_ENTRIES),
            zset_value: size(&ZSET_MAX_LISTPACK_VALUE),
            intset_entries: size(&SET_MAX_INTSET_ENTRIES),
        }
    }

    /// The database's `busy-reply-threshold` in milliseconds, if one was set.
    pub fn busy_reply_threshold_ms(&self, mem: &impl Mem) -> Option<u64> {
        let word = self.get(mem, &BUSY_REPLY_THRESHOLD);
        (word != BUSY_REPLY_THRESHOLD_UNSET).then_some(word)
    }
}

/// Up to which sizes redis-server keeps a value in its compact encoding: a hash or sorted set
/// as a listpack (at most `*_entries` elements, none longer than `*_value` bytes), a set of
/// integers as an intset.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thresholds {
    pub hash_entries: usize,
    pub hash_value: usize,
    pub zset_entries: usize,
    pub zset_value: usize,
    pub intset_entries: usize,
}

impl Thresholds {
    /// Redis 7.0's defaults: what a fresh database holds.
    pub const DEFAULT: Thresholds = Thresholds {
        hash_entries: HASH_MAX_LISTPACK_ENTRIES.default as usize,
        hash_value: HASH_MAX_LISTPACK_VALUE.default as usize,
        zset_entries: ZSET_MAX_LISTPACK_ENTRIES.default as usize,
        zset_value: ZSET_MAX_LISTPACK_VALUE.default as usize,
        intset_entries: SET_MAX_INTSET_ENTRIES.default as usize,
    };
}

/// Why a value was refused: the text after Redis's "CONFIG SET failed (possibly related to
/// argument '…') - ".
pub type Refusal = String;

/// Parses `text` as `param`'s value, as Redis's `CONFIG SET` does: its word, or why not.
pub fn parse(param: &Param, text: &[u8]) -> Result<u64, Refusal> {
    match param.kind {
        ParamKind::Integer { min, max } => {
            let value = crate::num::parse_i64(text)
                .ok_or_else(|| "argument couldn't be parsed into an integer".to_owned())?;
            in_range(value, min, max)
        }
        ParamKind::Memory { max } => {
            let bytes = parse_memory(text).ok_or("argument must be a memory value")?;
            let value = i64::try_from(bytes).map_err(|_| range_text(0, max))?;
            in_range(value, 0, max)
        }
        ParamKind::Choice(names) => names
            .iter()
            .position(|name| name.as_bytes().eq_ignore_ascii_case(text))
            .map(|index| index as u64)
            .ok_or_else(|| {
                format!(
                    "argument(s) must be one of the following: {}",
                    names.join(", ")
                )
            }),
        ParamKind::KeyspaceEvents => keyspace_events(text),
    }
}

fn in_range(value: i64, min: i64, max: i64) -> Result<u64, Refusal> {
    if (min..=max).contains(&value) {
        Ok(value as u64)
    } else {
        Err(range_text(min, max))
    }
}

fn range_text(min: i64, max: i64) -> Refusal {
    format!("argument must be between {min} and {max} inclusive")
}

/// A byte count as Redis's `memtoull` reads it: decimal digits (none is 0) and an optional
/// unit, `b`, `k` (1000), `kb` (1024), `m`, `mb`, `g` or `gb`, without case.
fn parse_memory(text: &[u8]) -> Option<u64> {
    let lower = text.to_ascii_lowercase();
    let units: [(&[u8], u64); 7] = [
        (b"kb", 1 << 10),
        (b"mb", 1 << 20),
        (b"gb", 1 << 30),
        (b"b", 1),
        (b"k", 1000),
        (b"m", 1_000_000),
        (b"g", 1_000_000_000),
    ];
    let (digits, unit) = units
        .iter()
        .find_map(|(suffix, unit)| lower.strip_suffix(*suffix).map(|digits| (digits, *unit)))
        .unwrap_or((&lower[..], 1));
    // As Redis's `memtoull`: at most 127 digits; `strtoull` saturates a number too large,
    // and the unit multiplies it wrapping, so such a number is then refused by its range.
    if !digits.iter().all(u8::is_ascii_digit) || digits.len() >= 128 {
        return None;
    }
    let mut value: u64 = 0;
    for digit in digits {
        value = value
            .checked_mul(10)
            .and_then(|tens| tens.checked_add(u64::from(digit - b'0')))
            .unwrap_or(u64::MAX);
    }
    Some(value.wrapping_mul(unit))
}

/// `notify-keyspace-events`' classes, as Redis names them ('A' stands for "g$lshzxetd"), in
/// the order `CONFIG GET` writes them.
const KEYSPACE_EVENT_CLASSES: &[u8] = b"g$lshzxetdKEmn";
const KEYSPACE_EVENTS_ALL: &[u8] = b"g$lshzxetd";

/// The bit of `notify-keyspace-events`' class `class` (one of "g$lshzxetdKEmn").
pub const fn keyspace_event_bit(class: u8) -> u64 {
    let mut bit = 0;
    while bit < KEYSPACE_EVENT_CLASSES.len() {
        if KEYSPACE_EVENT_CLASSES[bit] == class {
            return 1 << bit;
        }
        bit += 1;
    }
    panic!("not a class of notify-keyspace-events")
}

/// `notify-keyspace-events`' flags as a mask of [`KEYSPACE_EVENT_CLASSES`], as Redis's
/// `keyspaceEventsStringToFlags` checks them.
fn keyspace_events(text: &[u8]) -> Result<u64, Refusal> {
    let mut mask = 0u64;
    for &byte in text {
        let classes: &[u8] = if byte == b'A' {
            KEYSPACE_EVENTS_ALL
        } else {
            std::slice::from_ref(&byte)
        };
        for class in classes {
            let bit = KEYSPACE_EVENT_CLASSES
                .iter()
                .position(|known| known == class)
                .ok_or("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")?;
            mask |= 1 << bit;
        }
    }
    Ok(mask)
}

/// Whether tandem can serve `param` at `word` (checked after [`parse`]): a value that needs
/// what tandem does not have yet is refused with why, rather than kept and not acted on.
pub fn unserved(param: &Param, word: u64) -> Option<Refusal> {
    match param.name {
        "notify-keyspace-events" if word & keyspace_event_bit(b'm') != 0 => Some(
            "tandem sends no key-miss events (reads change nothing and run on backups too): \
             leave out the class 'm'"
                .to_owned(),
        ),
        _ => None,
    }
}

/// `param`'s word as `CONFIG GET` answers it.
pub fn format(param: &Param, word: u64) -> String {
    match param.kind {
        ParamKind::Integer { .. } | ParamKind::Memory { .. } => (word as i64).to_string(),
        ParamKind::Choice(names) => names[word as usize].to_owned(),
        ParamKind::KeyspaceEvents => {
            // As `keyspaceEventsFlagsToString`: 'A', or the classes it stands for and 'n', then
            // 'K', 'E' and 'm'. With 'A', Redis leaves 'n' out of the text (it keeps the flag).
            let all_bits = keyspace_events(KEYSPACE_EVENTS_ALL).expect("known classes");
            let (first, classes): (&str, &[u8]) = if word & all_bits == all_bits {
                ("A", b"KEm")
            } else {
                ("", b"g$lshzxetdnKEm")
            };
            let mut text = first.to_owned();
            for &class in classes {
                if word & keyspace_event_bit(class) != 0 {
                    text.push(char::from(class));
                }
            }
            text
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `CONFIG GET notify-keyspace-events` writes the flags as redis-server 7.0.15 wrote them
    /// for each of these `CONFIG SET`s.
    #[test]
    fn keyspace_event_flags_read_back_as_redis_writes_them() {
        for (set, got) in [
            ("KEA", "AKE"),
            ("AKEn", "AKE"),
            ("nKE", "nKE"),
            ("Km", "Km"),
            ("mAn", "Am"),
            ("gKE", "gKE"),
            ("$lshzxeKE", "$lshzxeKE"),
            ("EA", "AE"),
            ("", ""),
            ("d", "d"),
            ("xn", "xn"),
        ] {
            let word = parse(&NOTIFY_KEYSPACE_EVENTS, set.as_bytes()).expect("valid flags");
            assert_eq!(format(&NOTIFY_KEYSPACE_EVENTS, word), got, "{set}");
        }
    }

    #[test]
    fn memory_values_read_as_redis_reads_them() {
        assert_eq!(parse_memory(b"64"), Some(64));
        assert_eq!(parse_memory(b""), Some(0));
        assert_eq!(parse_memory(b"4KB"), Some(4096));
        assert_eq!(parse_memory(b"4k"), Some(4000));
        assert_eq!(parse_memory(b"1gb"), Some(1 << 30));
        assert_eq!(parse_memory(b"5B"), Some(5));
        for bad in [&b"-1"[..], b"+5", b"0x10", b"1.0", b"1tb"] {
            assert_eq!(parse_memory(bad), None, "{}", String::from_utf8_lossy(bad));
        }
        let range = Err("argument must be between 0 and 9223372036854775807 inclusive".to_owned());
        assert_eq!(
            parse(&HASH_MAX_LISTPACK_VALUE, b"9223372036854775808"),
            range
        );
        // Past u64, Redis's `strtoull` saturates: refused by the range, not as a non-number
        // (redis-server's answer, which the differential test met).
        assert_eq!(parse_memory(b"99999999999999999999"), Some(u64::MAX));
        assert_eq!(
            parse(&HASH_MAX_LISTPACK_VALUE, b"99999999999999999999"),
            range
        );
        assert_eq!(
            parse(&HASH_MAX_LISTPACK_VALUE, b"99999999999999999999kb"),
            range
        );
    }

    #[test]
    fn each_kind_refuses_in_redis_words() {
        assert_eq!(
            parse(&HASH_MAX_LISTPACK_ENTRIES, b"10k"),
            Err("argument couldn't be parsed into an integer".to_owned())
        );
        assert_eq!(
            parse(&LIST_COMPRESS_DEPTH, b"-1"),
            Err("argument must be between 0 and 2147483647 inclusive".to_owned())
        );
        assert_eq!(parse(&LIST_MAX_LISTPACK_SIZE, b"-6"), Ok(-6i64 as u64));
        assert_eq!(parse(&MAXMEMORY_POLICY, b"ALLKEYS-LRU"), Ok(4));
        assert!(
            parse(&MAXMEMORY_POLICY, b"bad")
                .unwrap_err()
                .contains("noeviction")
        );
        assert_eq!(
            parse(&NOTIFY_KEYSPACE_EVENTS, b"Q"),
            Err("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.".to_owned())
        );
    }

    #[test]
    fn keyspace_events_read_back_as_redis_writes_them() {
        for (given, shown) in [("AKE", "AKE"), ("gKE", "gKE"), ("Ex", "xE"), ("", "")] {
            let word = parse(&NOTIFY_KEYSPACE_EVENTS, given.as_bytes()).unwrap();
            assert_eq!(format(&NOTIFY_KEYSPACE_EVENTS, word), shown, "{given}");
        }
    }

    #[test]
    fn names_and_aliases_are_found_without_case() {
        assert_eq!(
            find(b"HASH-MAX-ZIPLIST-ENTRIES"),
            Some(&HASH_MAX_LISTPACK_ENTRIES)
        );
        assert_eq!(find(b"lua-time-limit"), Some(&BUSY_REPLY_THRESHOLD));
        assert_eq!(find(b"nosuch"), None);
    }
}
