//! One value in Redis's RDB object format, as `DUMP` and `RESTORE` carry it (Redis 7.0.15's
//! `rdbSaveObject` and `rdbLoadObject`).
//!
//! # The payload
//!
//! ```text
//! [type: u8][body][RDB version: u16 LE][CRC-64 of everything before: u64 LE]
//! ```
//!
//! [`parse`] accepts every type Redis 7.0 loads (RDB version 10 and older): strings in
//! each encoding (plain, 8/16/32-bit integers, LZF), lists (plain, ziplist, quicklist of
//! ziplists, quicklist of listpacks with plain and packed nodes), sets (plain, intset),
//! sorted sets (text and binary scores, ziplist, listpack), hashes (plain, zipmap, ziplist,
//! listpack) and streams (listpacks, with and without Redis 7's fields, consumer groups,
//! pending entries, consumers). Modules' types are refused. Every length, count and offset
//! is untrusted: each is checked against the bytes left before anything is sized by it,
//! nothing recurses, and no input panics. Blobs are checked whole (what Redis does only
//! with `sanitize-dump-payload yes`), so a payload Redis would take and crash on later is
//! refused here; so are duplicate members, a stream whose entries are out of order or whose
//! length disagrees with them, and a pending entry no consumer holds, which tandem's stream
//! cannot represent.
//!
//! [`dump`] writes the encoding Redis 7.0 would for the same value in the same encoding
//! ([`Encoding`]): a string, an intset and a sorted set byte for byte as Redis dumps them
//! (they depend on the value alone); a listpack hash in tandem's field order; a list as a
//! quicklist of listpacks split as tail pushes split Redis's; a stream as one listpack per
//! pack, Redis's nodes.
//!
//! [`functions`] reads and writes the payload of `FUNCTION DUMP`, the same format's library
//! records.

pub mod file;
pub mod functions;
mod io;
mod load;
mod lzf;
mod packs;
mod save;
mod stream;

use crate::params::Thresholds;

pub use io::crc64;
pub use stream::{ConsumerImage, GroupImage, PackImage, PendingImage, StreamImage};

/// The RDB version Redis 7.0 writes; it loads this one and every older one.
pub const RDB_VERSION: u16 = 10;
/// Bytes after the body: the version and the checksum.
const FOOTER_BYTES: usize = 10;

/// A body that does not parse (Redis: `ERR Bad data format`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct BadData;

/// Why a payload was refused, as `RESTORE` answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Too short, a newer RDB version, or a checksum that does not match.
    VersionOrChecksum,
    /// The body does not parse.
    BadData,
}

impl Refusal {
    pub fn text(self) -> &'static str {
        match self {
            Refusal::VersionOrChecksum => "ERR DUMP payload version or checksum are wrong",
            Refusal::BadData => "ERR Bad data format",
        }
    }
}

/// A stream entry ID: milliseconds, sequence.
pub type Id = (u64, u64);

/// One value, whole.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    String(Vec<u8>),
    List(Vec<Vec<u8>>),
    Set(Vec<Vec<u8>>),
    /// Members and scores, in no particular order.
    ZSet(Vec<(Vec<u8>, f64)>),
    Hash(Vec<(Vec<u8>, Vec<u8>)>),
    Stream(Box<StreamImage>),
}

/// How Redis 7.0 holds a value (what `OBJECT ENCODING` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Encoding {
    Int,
    Embstr,
    Raw,
    Quicklist,
    Intset,
    Listpack,
    Skiplist,
    Hashtable,
    Stream,
}

impl Encoding {
    pub fn name(self) -> &'static str {
        match self {
            Encoding::Int => "int",
            Encoding::Embstr => "embstr",
            Encoding::Raw => "raw",
            Encoding::Quicklist => "quicklist",
            Encoding::Intset => "intset",
            Encoding::Listpack => "listpack",
            Encoding::Skiplist => "skiplist",
            Encoding::Hashtable => "hashtable",
            Encoding::Stream => "stream",
        }
    }
}

/// The thresholds a value loaded from a payload is judged by ([`parse`]'s encoding): Redis
/// 7.0's defaults ([`crate::params::Thresholds::DEFAULT`]).
pub const ZSET_LISTPACK_ENTRIES_MAX: usize = Thresholds::DEFAULT.zset_entries;
pub const HASH_LISTPACK_ENTRIES_MAX: usize = Thresholds::DEFAULT.hash_entries;
pub const LISTPACK_VALUE_MAX: usize = Thresholds::DEFAULT.hash_value;
const _: () = assert!(Thresholds::DEFAULT.hash_value == Thresholds::DEFAULT.zset_value);
pub const INTSET_ENTRIES_MAX: usize = Thresholds::DEFAULT.intset_entries;
/// The longest string Redis keeps in one allocation with its object (`embstr`).
pub const EMBSTR_LEN_MAX: usize = 44;

/// How Redis's `tryObjectEncoding` holds string `bytes`.
pub fn string_encoding(bytes: &[u8]) -> Encoding {
    if bytes.len() <= 20 && crate::num::parse_i64(bytes).is_some() {
        Encoding::Int
    } else if bytes.len() <= EMBSTR_LEN_MAX {
        Encoding::Embstr
    } else {
        Encoding::Raw
    }
}

/// Checks `payload`'s footer and parses its body: the value, and how Redis 7.0 would hold
/// it right after loading it (under the default thresholds).
pub fn parse(payload: &[u8]) -> Result<(Value, Encoding), Refusal> {
    if payload.len() < FOOTER_BYTES {
        return Err(Refusal::VersionOrChecksum);
    }
    let (body, footer) = payload.split_at(payload.len() - 8);
    let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
    let checksum = u64::from_le_bytes(footer.try_into().expect("8 bytes"));
    if version > RDB_VERSION || crc64(body) != checksum {
        return Err(Refusal::VersionOrChecksum);
    }
    // Like Redis, the body is read from the whole payload: bytes after the value are not
    // looked at, and a value cut short may run on into the footer's bytes, as Redis's does.
    load::value(payload).map_err(|BadData| Refusal::BadData)
}

/// The payload of `value` as Redis 7.0 dumps it when it holds it as `encoding`.
pub fn dump(value: &Value, encoding: Encoding) -> Vec<u8> {
    let mut bytes = save::value(value, encoding);
    bytes.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// `body` (a type byte and a value) as a payload, its footer computed: for tests.
pub fn with_footer(mut body: Vec<u8>, version: u16) -> Vec<u8> {
    body.extend_from_slice(&version.to_le_bytes());
    let checksum = crc64(&body);
    body.extend_from_slice(&checksum.to_le_bytes());
    body
}
