//! The database in the segment: its header, the keyspace, and the key entries.
//!
//! # Layout
//!
//! ```text
//! offset   0  DbHeader (64 bytes): magic, layout version, hash seed, the primary's clock
//!             high-water mark, the highest version a deleted key had
//! offset  64  the keyspace's DictHeader (64 bytes)
//! offset 128  the script store's DictHeader (64 bytes)
//! offset 192  the expiry index's DictHeader (64 bytes): an entry per key that has an
//!             expiry, `[Link][key]`, kept by `set_expire` and `unlink`
//! offset 256  the function libraries' DictHeader (64 bytes), by name
//! offset 320  the functions' DictHeader (64 bytes), by name: which library holds each
//! offset 384  the run-time parameters `CONFIG SET` changes (128 bytes, [`crate::params`])
//! offset 512  databases 1 to 15 (`SELECT`), 192 bytes each: its keyspace's DictHeader, its
//!             expiry index's, and 64 bytes whose first word is its highest deleted version
//!             (database 0's are at 64, 192 and in the DbHeader)
//! offset 3392 the allocator's region, up to the dedup table the store keeps at the end
//! ```
//!
//! Every key is an entry of the keyspace ([`Dict`]): a [`KeyHead`] (its link, type, expiry,
//! the LSN of its last change, its value's place and length), the key's bytes, and for a
//! string the value's bytes too, so a string key is one block. Other types keep their value
//! in blocks of their own that `KeyHead::value` points to.

use bytemuck::{Pod, Zeroable};
use tandem_memory::{Segment, Txn};
use tandem_store::DedupTable;

use crate::alloc::{Alloc, OutOfMemory};
use crate::dict::{DICT_HEADER_BYTES, Dict, Found, LINK_BYTES, Link};
use crate::mem::{Mem, set_word};
use crate::params::Params;

const MAGIC: u64 = u64::from_le_bytes(*b"tandemrd");
/// The layout of the database and its values; 2 since a stream's packs keep their first ID
/// (64 bytes, were 48), 3 since the function libraries' tables took the 128 bytes the
/// allocator's region began at, 4 since the run-time parameters took the next 128, 5 since
/// databases 1 to 15 took the 2,880 bytes after them; a check of an older image says so
/// instead of misreading it.
const LAYOUT_VERSION: u64 = 5;
const KEYSPACE_AT: usize = 64;
/// The scripts `SCRIPT LOAD` and `EVAL` stored, by SHA-1: in the segment, so that a backup
/// promoted to primary knows them.
const SCRIPTS_AT: usize = 128;
/// The index of keys that have an expiry, by key: what the active sweep samples.
const EXPIRES_AT: usize = 192;
/// The libraries `FUNCTION LOAD` and `FUNCTION RESTORE` stored, by name, and the index of
/// their functions by name: in the segment, so that a backup promoted to primary has them.
const LIBRARIES_AT: usize = 256;
const FUNCTIONS_AT: usize = 320;
/// The parameters `CONFIG SET` changes: in the segment, so that a failover keeps them.
const PARAMS_AT: usize = 384;
/// Databases 1 to 15: each a keyspace's table and an expiry index's, one after the other.
const DBS_AT: usize = PARAMS_AT + crate::params::BLOCK_BYTES;
const DB_BYTES: usize = 3 * 64;
/// Where in a database's bytes its highest deleted version lies.
const DB_DELETED_VERSION_MAX_AT: usize = 2 * DICT_HEADER_BYTES;
/// How many databases `SELECT` chooses from (Redis's default `databases`).
pub const DB_COUNT: u8 = 16;
const ALLOC_AT: usize = DBS_AT + (DB_COUNT as usize - 1) * DB_BYTES;

/// The database `index` names, if there is one (0 to [`DB_COUNT`] − 1).
pub fn db_number(index: i64) -> Option<u8> {
    u8::try_from(index).ok().filter(|&db| db < DB_COUNT)
}

/// The database a `SELECT` argument names, or the error Redis answers for it.
pub fn selected_db(arg: &[u8]) -> Result<u8, &'static str> {
    let index = crate::num::parse_i64(arg).ok_or("ERR value is not an integer or out of range")?;
    db_number(index).ok_or("ERR DB index is out of range")
}

/// The name under which an expiry index that disagrees with the keys is reported.
pub const CHECK_EXPIRY_INDEX: &str = "the expiry index holds exactly the keys that expire";

/// The database header, as it lies at the segment's start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct DbHeader {
    magic: u64,
    layout_version: u64,
    /// Keys the hash of every table ([`crate::dict::hash`]).
    seed: u64,
    /// The latest time, in Unix milliseconds, a primary stamped on a write that depends on
    /// time. A new primary whose clock is behind uses this instead, so a key that expired
    /// never comes back after a failover.
    clock_ms: u64,
    /// The highest [`KeyHead::version`] of any key deleted so far (by a command, expiry or
    /// `FLUSHALL`); 0 in a database formatted before this field was kept, which is correct
    /// for every `WATCH` made since. `WATCH` of a key that does not exist has no version to
    /// compare, and a key created and deleted again before `EXEC` leaves no entry: its entry
    /// had a version newer than the `WATCH`, so this word rises past the LSN the `WATCH`
    /// saw, and `EXEC` aborts (see [`crate::model`]). Deleting a key nobody changed since
    /// the `WATCH` leaves it below that LSN, so such a deletion aborts nothing.
    deleted_version_max: u64,
    reserved: [u64; 3],
}

const CLOCK_AT: usize = 24;
const DELETED_VERSION_MAX_AT: usize = 32;
const _: () = assert!(std::mem::offset_of!(DbHeader, clock_ms) == CLOCK_AT);
const _: () =
    assert!(std::mem::offset_of!(DbHeader, deleted_version_max) == DELETED_VERSION_MAX_AT);
const _: () = assert!(size_of::<DbHeader>() == KEYSPACE_AT);

/// A value's type, as `TYPE` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    String = 0,
    List = 1,
    Set = 2,
    ZSet = 3,
    Hash = 4,
    Stream = 5,
}

impl Kind {
    fn from_u8(byte: u8) -> Kind {
        match byte {
            0 => Kind::String,
            1 => Kind::List,
            2 => Kind::Set,
            3 => Kind::ZSet,
            4 => Kind::Hash,
            5 => Kind::Stream,
            _ => panic!("a key entry holds type byte {byte}, which no type has"),
        }
    }

    /// The name `TYPE` answers.
    pub fn name(self) -> &'static str {
        match self {
            Kind::String => "string",
            Kind::List => "list",
            Kind::Set => "set",
            Kind::ZSet => "zset",
            Kind::Hash => "hash",
            Kind::Stream => "stream",
        }
    }
}

/// What a value's history tells of how Redis 7.0 would hold it, where its bytes alone do
/// not (`OBJECT ENCODING`, and which encoding `DUMP` writes). Kept in bits 8 to 15 of the
/// key entry's `Link::aux` (bits 0 to 7 hold its [`Kind`]); a new key has `Derived`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub enum EncodingMark {
    /// As the value stands: Redis's encoding for a value created as it is now.
    Derived = 0,
    /// A collection Redis converted to its large encoding (hashtable, skiplist), which it
    /// never converts back; a string a command changed in place (raw).
    Large = 1,
    /// A string Redis made as a new object from text (`INCRBYFLOAT`): embstr up to 44
    /// bytes, never int.
    Embstr = 2,
}

impl EncodingMark {
    fn from_u8(byte: u8) -> EncodingMark {
        match byte {
            1 => EncodingMark::Large,
            2 => EncodingMark::Embstr,
            _ => EncodingMark::Derived,
        }
    }
}

/// Where `Link::aux` lies in a key entry.
const AUX_AT: usize = std::mem::offset_of!(Link, aux);

/// A key entry's fixed part, as it lies in the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct KeyHead {
    pub link: Link,
    /// Unix milliseconds at which the key expires; 0: never.
    pub expire_at_ms: u64,
    /// The LSN of the txn that last changed the key (`WATCH` compares it).
    pub version: u64,
    /// For a type other than string, the segment offset of its value's block.
    pub value: u64,
    /// A string's length, or a collection's element count.
    pub value_len: u64,
    /// The bytes asked of the allocator for this entry (what `free` is given back).
    pub block_len: u64,
}

pub const KEY_HEAD_BYTES: usize = size_of::<KeyHead>();
const _: () = assert!(KEY_HEAD_BYTES == 64);
const _: () = assert!(LINK_BYTES == 24);

const EXPIRE_AT: usize = 24;
const VERSION_AT: usize = 32;
const VALUE_AT: usize = 40;
const VALUE_LEN_AT: usize = 48;

/// A key that exists and has not expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub found: Found,
    pub head: KeyHead,
}

impl Key {
    pub fn kind(&self) -> Kind {
        Kind::from_u8(self.head.link.aux as u8)
    }

    pub fn entry(&self) -> usize {
        self.found.entry
    }

    /// What the key's history tells of how Redis would hold its value ([`EncodingMark`]).
    pub fn mark(&self) -> EncodingMark {
        EncodingMark::from_u8((self.head.link.aux >> 8) as u8)
    }

    /// Segment offset of a string's bytes.
    pub fn string_at(&self) -> usize {
        self.found.entry + KEY_HEAD_BYTES + self.head.link.key_len as usize
    }

    /// Bytes a string may grow to in place.
    pub fn string_capacity(&self) -> usize {
        let block = Alloc::block_len_for(self.head.block_len as usize)
            .expect("an allocated entry has a class");
        block - KEY_HEAD_BYTES - self.head.link.key_len as usize
    }
}

/// Where the database lies in a segment. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    pub alloc: Alloc,
    /// The database the keyspace and the expiry index are of (`SELECT`; 0 to
    /// [`DB_COUNT`] − 1). The layout of a call is its database's ([`Layout::in_db`]).
    pub db: u8,
    pub keyspace: Dict,
    /// The script store's table; its entries' layout is the scripts family's.
    pub scripts_at: usize,
    /// Every key with an expiry, by key (entries `[Link][key]`): the active sweep samples it
    /// instead of the whole keyspace.
    pub expires: Dict,
    /// Where the database's highest deleted version lies (see
    /// `DbHeader::deleted_version_max`): each database keeps its own, so a deletion in one
    /// aborts no `EXEC` that watched a key of another.
    deleted_version_max_at: usize,
    /// The function libraries' table and the functions' index; their entries' layouts are
    /// the functions family's.
    pub libraries_at: usize,
    pub functions_at: usize,
    pub params: Params,
    /// The segment's length in bytes (what `CONFIG GET maxmemory` answers).
    pub segment_len: usize,
}

/// The database does not fit the segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "a {segment_len}-byte segment leaves no room for the database after its dedup table; give \
     a larger database size"
)]
pub struct TooSmall {
    pub segment_len: usize,
}

impl Layout {
    /// The layout of a segment of `segment_len` bytes.
    pub fn for_segment_len(segment_len: usize) -> Result<Layout, TooSmall> {
        let end = DedupTable::for_segment_len(segment_len).offset() & !15;
        if end < ALLOC_AT + 4096 {
            return Err(TooSmall { segment_len });
        }
        Ok(Layout {
            alloc: Alloc::new(ALLOC_AT, end - ALLOC_AT),
            db: 0,
            keyspace: Dict::new(KEYSPACE_AT, KEY_HEAD_BYTES),
            scripts_at: SCRIPTS_AT,
            expires: Dict::new(EXPIRES_AT, LINK_BYTES),
            deleted_version_max_at: DELETED_VERSION_MAX_AT,
            libraries_at: LIBRARIES_AT,
            functions_at: FUNCTIONS_AT,
            params: Params::new(PARAMS_AT),
            segment_len,
        })
    }

    /// The layout of database `db` (`SELECT`): its keyspace and expiry index, the rest
    /// shared.
    pub fn in_db(&self, db: u8) -> Layout {
        assert!(db < DB_COUNT, "database {db} does not exist");
        let (keyspace_at, expires_at, deleted_version_max_at) = match db {
            0 => (KEYSPACE_AT, EXPIRES_AT, DELETED_VERSION_MAX_AT),
            n => {
                let at = DBS_AT + (usize::from(n) - 1) * DB_BYTES;
                (at, at + DICT_HEADER_BYTES, at + DB_DELETED_VERSION_MAX_AT)
            }
        };
        Layout {
            db,
            keyspace: Dict::new(keyspace_at, KEY_HEAD_BYTES),
            expires: Dict::new(expires_at, LINK_BYTES),
            deleted_version_max_at,
            ..*self
        }
    }

    /// Every database's layout, 0 first.
    pub fn dbs(&self) -> impl Iterator<Item = Layout> + use<> {
        let layout = *self;
        (0..DB_COUNT).map(move |db| layout.in_db(db))
    }

    /// Swaps databases `a` and `b` whole in `txn` (`SWAPDB`): their keyspaces' and expiry
    /// indexes' tables trade places, so every key moves at once. A `WATCH` of a key of
    /// either sees it changed if it appeared, vanished or has another version; both keep
    /// the higher deleted version, since each now holds keys the other deleted around.
    pub fn swap_dbs(&self, txn: &mut Txn<'_>, a: u8, b: u8) {
        let (a, b) = (self.in_db(a), self.in_db(b));
        let deleted = a.deleted_version_max(txn).max(b.deleted_version_max(txn));
        a.note_deleted(txn, deleted);
        b.note_deleted(txn, deleted);
        for (x, y) in [(a.keyspace, b.keyspace), (a.expires, b.expires)] {
            let (x_at, y_at) = (x.header_at(), y.header_at());
            let x_bytes = txn.bytes(x_at, DICT_HEADER_BYTES).to_vec();
            let y_bytes = txn.bytes(y_at, DICT_HEADER_BYTES).to_vec();
            txn.set_range(x_at, DICT_HEADER_BYTES)
                .copy_from_slice(&y_bytes);
            txn.set_range(y_at, DICT_HEADER_BYTES)
                .copy_from_slice(&x_bytes);
        }
    }

    /// Writes a fresh database's header in `txn` (the rest of a fresh segment is zero, an
    /// empty keyspace and allocator).
    pub fn format(&self, txn: &mut Txn<'_>, seed: u64) {
        let header = DbHeader {
            magic: MAGIC,
            layout_version: LAYOUT_VERSION,
            seed,
            clock_ms: 0,
            deleted_version_max: 0,
            reserved: [0; 3],
        };
        *txn.set_pod::<DbHeader>(0) = header;
        self.params.format(txn);
        const _: () = assert!(KEYSPACE_AT + DICT_HEADER_BYTES <= SCRIPTS_AT);
        const _: () = assert!(SCRIPTS_AT + DICT_HEADER_BYTES <= EXPIRES_AT);
        const _: () = assert!(EXPIRES_AT + DICT_HEADER_BYTES <= LIBRARIES_AT);
        const _: () = assert!(LIBRARIES_AT + DICT_HEADER_BYTES <= FUNCTIONS_AT);
        const _: () = assert!(FUNCTIONS_AT + DICT_HEADER_BYTES <= PARAMS_AT);
        const _: () = assert!(ALLOC_AT.is_multiple_of(64));
    }

    /// Whether the segment holds a database of this layout.
    pub fn is_formatted(&self, segment: &Segment) -> bool {
        let header: DbHeader = segment.read_pod(0);
        header.magic == MAGIC && header.layout_version == LAYOUT_VERSION
    }

    pub fn seed(&self, mem: &impl Mem) -> u64 {
        mem.pod::<DbHeader>(0).seed
    }

    pub fn clock_ms(&self, mem: &impl Mem) -> u64 {
        mem.word(CLOCK_AT)
    }

    /// Raises the clock's high-water mark to `now_ms`.
    pub fn advance_clock(&self, txn: &mut Txn<'_>, now_ms: u64) {
        if now_ms > self.clock_ms(txn) {
            set_word(txn, CLOCK_AT, now_ms);
        }
    }

    /// The highest version any deleted key had (see `DbHeader::deleted_version_max`).
    pub fn deleted_version_max(&self, mem: &impl Mem) -> u64 {
        mem.word(self.deleted_version_max_at)
    }

    /// Records in `txn` that a key whose version was `version` is deleted.
    pub fn note_deleted(&self, txn: &mut Txn<'_>, version: u64) {
        if version > self.deleted_version_max(txn) {
            set_word(txn, self.deleted_version_max_at, version);
        }
    }

    /// The entry of `key`, expired or not.
    pub fn find_any(&self, mem: &impl Mem, key: &[u8]) -> Option<Key> {
        let hash = crate::dict::hash(self.seed(mem), key);
        self.keyspace.find(mem, key, hash).map(|found| Key {
            found,
            head: mem.pod(found.entry),
        })
    }

    /// The entry of `key` if it exists at `now_ms` (an expired key reads as missing).
    pub fn find(&self, mem: &impl Mem, key: &[u8], now_ms: u64) -> Option<Key> {
        self.find_any(mem, key)
            .filter(|k| k.head.expire_at_ms == 0 || k.head.expire_at_ms > now_ms)
    }

    /// Allocates a key entry for `key` of type `kind` with `extra` bytes after the key (a
    /// string's value), writes its head and key, and links it into the keyspace. Its value
    /// bytes are the caller's to write. The key must not be in the keyspace.
    pub fn create(
        &self,
        txn: &mut Txn<'_>,
        key: &[u8],
        kind: Kind,
        extra: usize,
    ) -> Result<Key, OutOfMemory> {
        let hash = crate::dict::hash(self.seed(txn), key);
        let block_len = KEY_HEAD_BYTES + key.len() + extra;
        let entry = self.alloc.alloc(txn, block_len)?;
        let head = KeyHead {
            link: Link {
                next: 0,
                hash,
                key_len: u32::try_from(key.len()).expect("a key is shorter than 4 GiB"),
                aux: kind as u32,
            },
            expire_at_ms: 0,
            version: txn.lsn_next(),
            value: 0,
            value_len: 0,
            block_len: block_len as u64,
        };
        let bytes = txn.set_range(entry, KEY_HEAD_BYTES + key.len());
        bytes[..KEY_HEAD_BYTES].copy_from_slice(bytemuck::bytes_of(&head));
        bytes[KEY_HEAD_BYTES..].copy_from_slice(key);
        if let Err(err) = self.keyspace.insert(txn, &self.alloc, entry) {
            self.alloc.free(txn, entry, block_len);
            return Err(err);
        }
        let found = self
            .keyspace
            .find(txn, key, hash)
            .expect("a key just inserted is found");
        Ok(Key { found, head })
    }

    /// Unlinks `key` and frees its entry; the caller has freed its value's blocks.
    pub fn unlink(&self, txn: &mut Txn<'_>, key: &Key) {
        // The version `key` was read with, not one this command may have touched it to since:
        // a key created after a `WATCH` was read with a version newer than the `WATCH`, and a
        // key that existed then need not abort an `EXEC` because it is deleted.
        self.note_deleted(txn, key.head.version);
        if txn.word(key.entry() + EXPIRE_AT) != 0 {
            self.unindex_expiry(txn, key);
        }
        self.keyspace.remove(txn, &self.alloc, key.found);
        self.alloc
            .free(txn, key.found.entry, key.head.block_len as usize);
    }

    /// Marks `key` as changed by this txn (for `WATCH`).
    pub fn touch(&self, txn: &mut Txn<'_>, key: &Key) {
        set_word(txn, key.entry() + VERSION_AT, txn.lsn_next());
    }

    /// Sets when `key` expires (0: never), keeping the expiry index. Fails only if a first
    /// expiry's index entry does not fit; then nothing changed.
    pub fn set_expire(
        &self,
        txn: &mut Txn<'_>,
        key: &Key,
        expire_at_ms: u64,
    ) -> Result<(), OutOfMemory> {
        let before = txn.word(key.entry() + EXPIRE_AT);
        if before == expire_at_ms {
            return Ok(());
        }
        if before == 0 {
            self.index_expiry(txn, key)?;
        } else if expire_at_ms == 0 {
            self.unindex_expiry(txn, key);
        }
        set_word(txn, key.entry() + EXPIRE_AT, expire_at_ms);
        Ok(())
    }

    /// The bytes of `key`'s name.
    pub fn key_bytes<'m>(&self, mem: &'m impl Mem, key: &Key) -> &'m [u8] {
        self.keyspace.key(mem, key.entry())
    }

    fn index_expiry(&self, txn: &mut Txn<'_>, key: &Key) -> Result<(), OutOfMemory> {
        let name = self.key_bytes(txn, key).to_vec();
        let block_len = LINK_BYTES + name.len();
        let entry = self.alloc.alloc(txn, block_len)?;
        let link = Link {
            next: 0,
            hash: key.head.link.hash,
            key_len: key.head.link.key_len,
            aux: 0,
        };
        let bytes = txn.set_range(entry, block_len);
        bytes[..LINK_BYTES].copy_from_slice(bytemuck::bytes_of(&link));
        bytes[LINK_BYTES..].copy_from_slice(&name);
        if let Err(err) = self.expires.insert(txn, &self.alloc, entry) {
            self.alloc.free(txn, entry, block_len);
            return Err(err);
        }
        Ok(())
    }

    fn unindex_expiry(&self, txn: &mut Txn<'_>, key: &Key) {
        let name = self.key_bytes(txn, key).to_vec();
        let found = self
            .expires
            .find(txn, &name, key.head.link.hash)
            .expect("a key with an expiry is in the expiry index");
        self.expires.remove(txn, &self.alloc, found);
        self.alloc.free(txn, found.entry, LINK_BYTES + name.len());
    }

    /// Moves `key`, with its value and expiry, from this layout's database to `there`'s
    /// (`MOVE`): its entry is unlinked here and linked there, so a value of any size moves
    /// at once. `key` must not be in `there`. Fails only if `there`'s tables cannot grow;
    /// the caller's call then fails and its txn writes nothing.
    pub fn move_key(
        &self,
        txn: &mut Txn<'_>,
        key: &Key,
        there: &Layout,
    ) -> Result<(), OutOfMemory> {
        let name = self.key_bytes(txn, key).to_vec();
        let expires = txn.word(key.entry() + EXPIRE_AT) != 0;
        if expires {
            self.unindex_expiry(txn, key);
        }
        self.note_deleted(txn, key.head.version);
        // Unlinked here before it is linked there: a link holds one chain's next entry.
        self.keyspace.remove(txn, &self.alloc, key.found);
        there.keyspace.insert(txn, &there.alloc, key.entry())?;
        let found = there
            .keyspace
            .find(txn, &name, key.head.link.hash)
            .expect("the key was just linked there");
        let moved = Key {
            found,
            head: txn.read_pod(found.entry),
        };
        there.touch(txn, &moved);
        if expires {
            there.index_expiry(txn, &moved)?;
        }
        Ok(())
    }

    /// Records what `key`'s history tells of its encoding.
    pub fn set_mark(&self, txn: &mut Txn<'_>, key: &Key, mark: EncodingMark) {
        let aux = (key.head.link.aux & 0xff) | (mark as u32) << 8;
        txn.set_range(key.entry() + AUX_AT, 4)
            .copy_from_slice(&aux.to_le_bytes());
    }

    pub fn set_value(&self, txn: &mut Txn<'_>, key: &Key, value: u64) {
        set_word(txn, key.entry() + VALUE_AT, value);
    }

    pub fn set_value_len(&self, txn: &mut Txn<'_>, key: &Key, value_len: u64) {
        set_word(txn, key.entry() + VALUE_LEN_AT, value_len);
    }

    /// The key entry after `key`'s was moved to a block of `block_len` bytes (with
    /// `value_len` set and the old block's head, key and the first `keep` value bytes copied),
    /// or `OutOfMemory` with nothing changed.
    pub fn grow(
        &self,
        txn: &mut Txn<'_>,
        key: &Key,
        value_len: usize,
        keep: usize,
    ) -> Result<Key, OutOfMemory> {
        let key_len = key.head.link.key_len as usize;
        let block_len = KEY_HEAD_BYTES + key_len + value_len;
        let entry = self.alloc.alloc(txn, block_len)?;
        let copy_len = KEY_HEAD_BYTES + key_len + keep;
        let old = txn.read(key.entry(), copy_len).to_vec();
        let bytes = txn.set_range(entry, copy_len);
        bytes.copy_from_slice(&old);
        let mut head = key.head;
        head.block_len = block_len as u64;
        head.value_len = value_len as u64;
        head.version = txn.lsn_next();
        *txn.set_pod::<KeyHead>(entry) = head;
        self.keyspace.replace(txn, key.found, entry);
        self.alloc
            .free(txn, key.entry(), key.head.block_len as usize);
        Ok(Key {
            found: Found {
                link: key.found.link,
                entry,
            },
            head,
        })
    }

    /// No key has two entries in the keyspace (a write that creates a key must first delete
    /// an expired entry of it: the simulator found APPEND that did not).
    pub fn check_keys_unique(&self, mem: &impl Mem) -> Result<(), tandem_store::Inconsistency> {
        let mut keys = std::collections::BTreeSet::new();
        let mut twice = None;
        self.keyspace.for_each(mem, |entry| {
            let link: Link = mem.pod(entry);
            let key = mem
                .bytes(entry + KEY_HEAD_BYTES, link.key_len as usize)
                .to_vec();
            if !keys.insert(key.clone()) && twice.is_none() {
                twice = Some(key);
            }
        });
        match twice {
            None => Ok(()),
            Some(key) => Err(tandem_store::Inconsistency {
                check: "every key has one entry",
                detail: format!("key {:?} has two", String::from_utf8_lossy(&key)),
            }),
        }
    }

    /// The expiry index holds exactly the keys that have an expiry.
    pub fn check_expiry_index(&self, mem: &impl Mem) -> Result<(), tandem_store::Inconsistency> {
        let mut volatile = 0u64;
        let mut missing = None;
        self.keyspace.for_each(mem, |entry| {
            let head: KeyHead = mem.pod(entry);
            if head.expire_at_ms != 0 {
                volatile += 1;
                let name = self.keyspace.key(mem, entry);
                if self.expires.find(mem, name, head.link.hash).is_none() {
                    missing = Some(String::from_utf8_lossy(name).into_owned());
                }
            }
        });
        let indexed = self.expires.len(mem);
        if let Some(name) = missing {
            return Err(tandem_store::Inconsistency {
                check: CHECK_EXPIRY_INDEX,
                detail: format!("key '{name}' expires but is not in the expiry index"),
            });
        }
        if indexed != volatile {
            return Err(tandem_store::Inconsistency {
                check: CHECK_EXPIRY_INDEX,
                detail: format!("{volatile} keys expire, the index holds {indexed}"),
            });
        }
        Ok(())
    }

    /// Every block the database owns, as (segment offset, bytes asked for): the allocator's
    /// check proves they and the free blocks tile what it carved.
    pub fn owned_blocks(&self, mem: &impl Mem, owned: &mut Vec<(usize, usize)>) {
        for db in self.dbs() {
            db.keyspace
                .blocks(mem, |block, len| owned.push((block, len)));
            db.keyspace.for_each(mem, |entry| {
                let head: KeyHead = mem.pod(entry);
                owned.push((entry, head.block_len as usize));
                let key = Key {
                    found: Found { link: 0, entry },
                    head,
                };
                crate::cmd::value_blocks(mem, &db, &key, owned);
            });
            db.expires
                .blocks(mem, |block, len| owned.push((block, len)));
            db.expires.for_each(mem, |entry| {
                let link: Link = mem.pod(entry);
                owned.push((entry, LINK_BYTES + link.key_len as usize));
            });
        }
        crate::cmd::scripts::owned(mem, self, owned);
        crate::cmd::functions::owned(mem, self, owned);
    }
}
