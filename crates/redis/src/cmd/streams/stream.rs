//! A stream value in the segment: its root block, its entries and the packs that mirror
//! Redis's listpack nodes. See the family's documentation ([`super`]) for why it is built
//! this way.

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use super::skiplist::{self, SkipList};
use crate::alloc::OutOfMemory;
use crate::db::{Key, Kind, Layout};
use crate::dict;
use crate::mem::{Mem, set_word};
use crate::rdb::{PackImage, StreamImage};

/// A stream entry's ID: milliseconds, then a sequence number.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId {
    pub ms: u64,
    pub seq: u64,
}

impl StreamId {
    pub const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    pub const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// The ID as a list key: both numbers big-endian, so byte order is ID order.
    pub fn key(self) -> [u8; 16] {
        let mut key = [0u8; 16];
        key[..8].copy_from_slice(&self.ms.to_be_bytes());
        key[8..].copy_from_slice(&self.seq.to_be_bytes());
        key
    }

    pub fn from_key(key: &[u8]) -> StreamId {
        let ms = u64::from_be_bytes(key[..8].try_into().expect("an ID key is 16 bytes"));
        let seq = u64::from_be_bytes(key[8..16].try_into().expect("an ID key is 16 bytes"));
        StreamId { ms, seq }
    }

    /// The next ID (Redis's `streamIncrID`), `None` after the last.
    pub fn next(self) -> Option<StreamId> {
        match (self.seq.checked_add(1), self.ms.checked_add(1)) {
            (Some(seq), _) => Some(StreamId { ms: self.ms, seq }),
            (None, Some(ms)) => Some(StreamId { ms, seq: 0 }),
            (None, None) => None,
        }
    }

    /// The previous ID (Redis's `streamDecrID`), `None` before the first.
    pub fn prev(self) -> Option<StreamId> {
        match (self.seq.checked_sub(1), self.ms.checked_sub(1)) {
            (Some(seq), _) => Some(StreamId { ms: self.ms, seq }),
            (None, Some(ms)) => Some(StreamId { ms, seq: u64::MAX }),
            (None, None) => None,
        }
    }

    pub fn is_zero(self) -> bool {
        self == StreamId::MIN
    }
}

impl std::fmt::Display for StreamId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}-{}", self.ms, self.seq)
    }
}

/// Entries a pack takes before the next entry starts a new one (Redis's default
/// `stream-node-max-entries`).
pub const PACK_ENTRIES_MAX: u64 = 100;

/// A stream's fields after its entries' list header, as they lie in the root block.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Meta {
    pub last_ms: u64,
    pub last_seq: u64,
    pub max_deleted_ms: u64,
    pub max_deleted_seq: u64,
    pub first_ms: u64,
    pub first_seq: u64,
    pub entries_added: u64,
    /// The first and last packs (0 for none) and how many there are.
    pub pack_first: u64,
    pub pack_last: u64,
    pub pack_count: u64,
}

impl Meta {
    pub fn last_id(&self) -> StreamId {
        StreamId {
            ms: self.last_ms,
            seq: self.last_seq,
        }
    }

    pub fn max_deleted_id(&self) -> StreamId {
        StreamId {
            ms: self.max_deleted_ms,
            seq: self.max_deleted_seq,
        }
    }

    pub fn first_id(&self) -> StreamId {
        StreamId {
            ms: self.first_ms,
            seq: self.first_seq,
        }
    }

    pub fn set_last_id(&mut self, id: StreamId) {
        (self.last_ms, self.last_seq) = (id.ms, id.seq);
    }

    pub fn set_max_deleted_id(&mut self, id: StreamId) {
        (self.max_deleted_ms, self.max_deleted_seq) = (id.ms, id.seq);
    }

    pub fn set_first_id(&mut self, id: StreamId) {
        (self.first_ms, self.first_seq) = (id.ms, id.seq);
    }
}

const META_AT: usize = skiplist::HEADER_BYTES;
const GROUPS_AT: usize = META_AT + size_of::<Meta>();
/// Bytes of a stream's root block: its entries' list, its fields, its groups' list.
pub const ROOT_BYTES: usize = GROUPS_AT + skiplist::HEADER_BYTES;

/// A pack, as it lies in its block: one of Redis's listpack nodes, less the entries (which
/// the entries' list holds). Only approximate trimming (`~`) and `XINFO` see packs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Pack {
    prev: u64,
    next: u64,
    /// Entries of the pack not deleted.
    live: u64,
    /// Entries ever appended to the pack (Redis counts deleted ones when it decides
    /// whether a node is full).
    appended: u64,
    /// The last entry appended, deleted or not (what `MINID ~` compares).
    last_ms: u64,
    last_seq: u64,
    /// The first entry appended, deleted or not: Redis's master ID, the node's key in its
    /// radix tree (what `XINFO STREAM` counts the nodes of).
    first_ms: u64,
    first_seq: u64,
}

const PACK_BYTES: usize = size_of::<Pack>();
/// An entry's value: its pack, its field count, then each field and value as a `u32`
/// length and its bytes.
const ENTRY_PACK_AT: usize = 0;
const ENTRY_PAIRS_AT: usize = 8;
const ENTRY_STRINGS_AT: usize = 16;

/// A stream's value: where its root block lies. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stream {
    pub root: usize,
}

impl Stream {
    pub fn of(key: &Key) -> Stream {
        assert_eq!(key.kind(), Kind::Stream, "a stream read of another type");
        Stream {
            root: key.head.value as usize,
        }
    }

    /// Allocates an empty stream's root block.
    pub fn create(txn: &mut Txn<'_>, layout: &Layout) -> Result<Stream, OutOfMemory> {
        let root = layout.alloc.alloc(txn, ROOT_BYTES)?;
        SkipList::init(txn, root);
        *txn.set_pod::<Meta>(root + META_AT) = Meta::default();
        SkipList::init(txn, root + GROUPS_AT);
        Ok(Stream { root })
    }

    pub fn entries(self) -> SkipList {
        SkipList::at(self.root)
    }

    pub fn groups(self) -> SkipList {
        SkipList::at(self.root + GROUPS_AT)
    }

    pub fn len(self, mem: &impl Mem) -> u64 {
        self.entries().len(mem)
    }

    pub fn meta(self, mem: &impl Mem) -> Meta {
        mem.pod(self.root + META_AT)
    }

    pub fn set_meta(self, txn: &mut Txn<'_>, meta: &Meta) {
        *txn.set_pod::<Meta>(self.root + META_AT) = *meta;
    }

    /// The ID of entry node `node`.
    pub fn id_of(mem: &impl Mem, node: usize) -> StreamId {
        StreamId::from_key(SkipList::key(mem, node))
    }

    /// The fields and values of entry node `node`, in order.
    pub fn fields_of(mem: &impl Mem, node: usize) -> Vec<&[u8]> {
        let value = SkipList::value(mem, node);
        let pairs = u64::from_le_bytes(value[ENTRY_PAIRS_AT..ENTRY_STRINGS_AT].try_into().unwrap());
        let mut strings = Vec::with_capacity(2 * pairs as usize);
        let mut at = ENTRY_STRINGS_AT;
        for _ in 0..2 * pairs {
            let len = u32::from_le_bytes(value[at..at + 4].try_into().unwrap()) as usize;
            strings.push(&value[at + 4..at + 4 + len]);
            at += 4 + len;
        }
        strings
    }

    fn pack_of(mem: &impl Mem, node: usize) -> usize {
        mem.word(SkipList::value_at(mem, node) + ENTRY_PACK_AT) as usize
    }

    /// The first entry node at or after `id` (0 for none).
    pub fn seek(self, mem: &impl Mem, id: StreamId) -> usize {
        self.entries().seek_ge(mem, &id.key())
    }

    /// The last entry node at or before `id` (0 for none).
    pub fn seek_back(self, mem: &impl Mem, id: StreamId) -> usize {
        self.entries().seek_le(mem, &id.key())
    }

    /// The entry node of `id`, if the stream holds it.
    pub fn find(self, mem: &impl Mem, id: StreamId) -> Option<usize> {
        self.entries().find(mem, &id.key())
    }

    /// Appends an entry of `id` (greater than the last ID) with `fields` (field, value,
    /// field, value, …), into the last pack or a new one, and updates the stream's fields.
    pub fn append(
        self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        id: StreamId,
        fields: &[&[u8]],
    ) -> Result<(), OutOfMemory> {
        let mut meta = self.meta(txn);
        assert!(id > meta.last_id(), "an appended ID is past the last");
        let mut pack_at = meta.pack_last as usize;
        if pack_at == 0 || txn.pod::<Pack>(pack_at).appended >= PACK_ENTRIES_MAX {
            let at = layout.alloc.alloc(txn, PACK_BYTES)?;
            *txn.set_pod::<Pack>(at) = Pack {
                prev: pack_at as u64,
                first_ms: id.ms,
                first_seq: id.seq,
                ..Pack::default()
            };
            if pack_at == 0 {
                meta.pack_first = at as u64;
            } else {
                set_word(txn, pack_at + 8, at as u64);
            }
            meta.pack_last = at as u64;
            meta.pack_count += 1;
            pack_at = at;
        }
        let value = entry_value(pack_at, fields);
        let key = id.key();
        let hash = dict::hash(layout.seed(txn), &key);
        self.entries()
            .insert(txn, &layout.alloc, &key, hash, &value)?;
        let mut pack: Pack = txn.pod(pack_at);
        pack.live += 1;
        pack.appended += 1;
        (pack.last_ms, pack.last_seq) = (id.ms, id.seq);
        *txn.set_pod::<Pack>(pack_at) = pack;
        meta.set_last_id(id);
        meta.entries_added += 1;
        if self.len(txn) == 1 {
            meta.set_first_id(id);
        }
        self.set_meta(txn, &meta);
        Ok(())
    }

    /// Deletes entry node `node`. Its pack goes with its last live entry unless `keep_pack`
    /// (trimming within a node leaves it, as Redis's does). Leaves the stream's fields to
    /// the caller but for its packs.
    pub fn delete_entry(self, txn: &mut Txn<'_>, layout: &Layout, node: usize, keep_pack: bool) {
        let pack_at = Self::pack_of(txn, node);
        self.entries().remove(txn, &layout.alloc, node);
        let mut pack: Pack = txn.pod(pack_at);
        if pack.live == 1 && !keep_pack {
            self.unlink_pack(txn, layout, pack_at);
        } else {
            pack.live -= 1;
            *txn.set_pod::<Pack>(pack_at) = pack;
        }
    }

    fn unlink_pack(self, txn: &mut Txn<'_>, layout: &Layout, pack_at: usize) {
        let pack: Pack = txn.pod(pack_at);
        let mut meta = self.meta(txn);
        if pack.prev == 0 {
            meta.pack_first = pack.next;
        } else {
            set_word(txn, pack.prev as usize + 8, pack.next);
        }
        if pack.next == 0 {
            meta.pack_last = pack.prev;
        } else {
            set_word(txn, pack.next as usize, pack.prev);
        }
        meta.pack_count -= 1;
        self.set_meta(txn, &meta);
        layout.alloc.free(txn, pack_at, PACK_BYTES);
    }

    /// Sets the first ID after entries were deleted: 0-0 when empty, else the first entry's.
    pub fn refresh_first_id(self, txn: &mut Txn<'_>) {
        let first = self.entries().first(txn);
        let id = if first == 0 {
            StreamId::MIN
        } else {
            Self::id_of(txn, first)
        };
        let mut meta = self.meta(txn);
        meta.set_first_id(id);
        self.set_meta(txn, &meta);
    }

    /// Redis's `streamTrim`: deletes entries from the head by `trim`, whole packs first;
    /// returns how many.
    pub fn trim(self, txn: &mut Txn<'_>, layout: &Layout, trim: &Trim) -> u64 {
        let mut deleted = 0u64;
        loop {
            let pack_at = self.meta(txn).pack_first as usize;
            if pack_at == 0 {
                break;
            }
            let length = self.len(txn);
            if let TrimBy::MaxLen(max) = trim.by
                && length <= max
            {
                break;
            }
            let pack: Pack = txn.pod(pack_at);
            if trim.limit != 0 && deleted + pack.live > trim.limit {
                break;
            }
            let whole = match trim.by {
                TrimBy::MaxLen(max) => length - pack.live >= max,
                TrimBy::MinId(min) => {
                    StreamId {
                        ms: pack.last_ms,
                        seq: pack.last_seq,
                    } < min
                }
            };
            if whole {
                for _ in 0..pack.live {
                    let node = self.entries().first(txn);
                    self.delete_entry(txn, layout, node, true);
                }
                self.unlink_pack(txn, layout, pack_at);
                deleted += pack.live;
                continue;
            }
            if trim.approx {
                break;
            }
            deleted += self.trim_within(txn, layout, trim, pack_at);
            break;
        }
        if deleted > 0 {
            self.refresh_first_id(txn);
        }
        deleted
    }

    /// Deletes entries of the first pack, `pack_at`, until `trim` is met; the pack stays.
    fn trim_within(self, txn: &mut Txn<'_>, layout: &Layout, trim: &Trim, pack_at: usize) -> u64 {
        let mut deleted = 0;
        loop {
            let node = self.entries().first(txn);
            if node == 0 || Self::pack_of(txn, node) != pack_at {
                break;
            }
            let stop = match trim.by {
                TrimBy::MaxLen(max) => self.len(txn) <= max,
                TrimBy::MinId(min) => Self::id_of(txn, node) >= min,
            };
            if stop {
                break;
            }
            self.delete_entry(txn, layout, node, true);
            deleted += 1;
        }
        deleted
    }

    /// The packs' first IDs (Redis's listpack nodes' keys in its radix tree), as list keys,
    /// in order.
    pub fn pack_keys(self, mem: &impl Mem) -> Vec<[u8; 16]> {
        let mut keys = Vec::with_capacity(self.meta(mem).pack_count as usize);
        let mut pack = self.meta(mem).pack_first as usize;
        while pack != 0 {
            let record: Pack = mem.pod(pack);
            let first = StreamId {
                ms: record.first_ms,
                seq: record.first_seq,
            };
            keys.push(first.key());
            pack = record.next as usize;
        }
        keys
    }

    /// Makes `target` (a new, empty stream) a copy of this one's entries and fields, its
    /// packs as they are (deleted entries still counted), as Redis's `streamDup` copies
    /// its listpack nodes.
    pub fn copy_entries_to(
        self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        target: Stream,
    ) -> Result<(), OutOfMemory> {
        assert_eq!(target.len(txn), 0, "a copy starts empty");
        let source = self.meta(txn);
        let mut meta = source;
        (meta.pack_first, meta.pack_last) = (0, 0);
        let mut packs = std::collections::BTreeMap::new();
        let mut pack = source.pack_first as usize;
        while pack != 0 {
            let record: Pack = txn.pod(pack);
            let at = layout.alloc.alloc(txn, PACK_BYTES)?;
            *txn.set_pod::<Pack>(at) = Pack {
                prev: meta.pack_last,
                next: 0,
                ..record
            };
            if meta.pack_last == 0 {
                meta.pack_first = at as u64;
            } else {
                set_word(txn, meta.pack_last as usize + 8, at as u64);
            }
            meta.pack_last = at as u64;
            packs.insert(pack, at);
            pack = record.next as usize;
        }
        for node in self.entries().nodes(txn) {
            let key = SkipList::key(txn, node).to_vec();
            let mut value = SkipList::value(txn, node).to_vec();
            let pack = packs[&Self::pack_of(txn, node)];
            value[ENTRY_PACK_AT..ENTRY_PAIRS_AT].copy_from_slice(&(pack as u64).to_le_bytes());
            let hash = dict::hash(layout.seed(txn), &key);
            target
                .entries()
                .insert(txn, &layout.alloc, &key, hash, &value)?;
        }
        target.set_meta(txn, &meta);
        Ok(())
    }

    /// Every block the stream holds beyond what its entries' and groups' values hold.
    pub fn owned(self, mem: &impl Mem, owned: &mut Vec<(usize, usize)>) {
        owned.push((self.root, ROOT_BYTES));
        let mut node = self.entries().first(mem);
        while node != 0 {
            owned.push((node, SkipList::block_len(mem, node)));
            node = self.entries().next(mem, node);
        }
        let mut pack = self.meta(mem).pack_first as usize;
        while pack != 0 {
            owned.push((pack, PACK_BYTES));
            pack = mem.pod::<Pack>(pack).next as usize;
        }
    }

    /// Frees the entries and packs (the groups are the caller's) and the root block.
    pub fn free(self, txn: &mut Txn<'_>, layout: &Layout) {
        self.entries().free_all(txn, &layout.alloc, |_, _| {});
        let mut pack = self.meta(txn).pack_first as usize;
        while pack != 0 {
            let next = txn.pod::<Pack>(pack).next as usize;
            layout.alloc.free(txn, pack, PACK_BYTES);
            pack = next;
        }
        layout.alloc.free(txn, self.root, ROOT_BYTES);
    }

    /// Checks the entries' list, the packs' counts against the entries, and the stream's
    /// fields, for the model's whole check.
    pub fn verify(self, mem: &impl Mem) -> Result<(), String> {
        self.entries().verify(mem)?;
        self.groups().verify(mem)?;
        let meta = self.meta(mem);
        let mut live = std::collections::BTreeMap::<usize, u64>::new();
        let mut node = self.entries().first(mem);
        while node != 0 {
            *live.entry(Self::pack_of(mem, node)).or_default() += 1;
            node = self.entries().next(mem, node);
        }
        let (mut pack, mut count) = (meta.pack_first as usize, 0);
        while pack != 0 {
            let record: Pack = mem.pod(pack);
            if live.remove(&pack).unwrap_or(0) != record.live {
                return Err(format!("a pack counts {} live entries", record.live));
            }
            count += 1;
            pack = record.next as usize;
        }
        if !live.is_empty() || count != meta.pack_count {
            return Err("an entry's pack is not in the packs' list".into());
        }
        let last = self.entries().last(mem);
        if last != 0 && Self::id_of(mem, last) > meta.last_id() {
            return Err("an entry is past the last ID".into());
        }
        Ok(())
    }
}

/// An entry's value: its pack, its field count, each field and value with its length.
fn entry_value<S: AsRef<[u8]>>(pack_at: usize, fields: &[S]) -> Vec<u8> {
    let mut value = Vec::with_capacity(
        ENTRY_STRINGS_AT + fields.iter().map(|f| 4 + f.as_ref().len()).sum::<usize>(),
    );
    value.extend_from_slice(&(pack_at as u64).to_le_bytes());
    value.extend_from_slice(&(fields.len() as u64 / 2).to_le_bytes());
    for field in fields {
        let field = field.as_ref();
        let len = u32::try_from(field.len()).expect("an argument is shorter than 4 GiB");
        value.extend_from_slice(&len.to_le_bytes());
        value.extend_from_slice(field);
    }
    value
}

impl Stream {
    /// The stream's entries in their packs and its fields, as a payload holds them
    /// (`DUMP`); its groups are the caller's to add.
    pub fn image(self, mem: &impl Mem) -> StreamImage {
        let meta = self.meta(mem);
        let mut packs = Vec::with_capacity(meta.pack_count as usize);
        let mut index = std::collections::BTreeMap::new();
        let mut pack = meta.pack_first as usize;
        while pack != 0 {
            let record: Pack = mem.pod(pack);
            index.insert(pack, packs.len());
            packs.push(PackImage {
                master: (record.first_ms, record.first_seq),
                appended: record.appended,
                last: (record.last_ms, record.last_seq),
                entries: Vec::new(),
            });
            pack = record.next as usize;
        }
        for node in self.entries().nodes(mem) {
            let id = Self::id_of(mem, node);
            let strings = Self::fields_of(mem, node).into_iter().map(<[u8]>::to_vec);
            packs[index[&Self::pack_of(mem, node)]]
                .entries
                .push(((id.ms, id.seq), strings.collect()));
        }
        StreamImage {
            packs,
            last_id: (meta.last_ms, meta.last_seq),
            first_id: (meta.first_ms, meta.first_seq),
            max_deleted: (meta.max_deleted_ms, meta.max_deleted_seq),
            entries_added: meta.entries_added,
            groups: Vec::new(),
        }
    }

    /// Gives this stream (new, empty) the entries, packs and fields of `image` (`RESTORE`;
    /// the codec checked that its entries ascend).
    pub fn restore(
        self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        image: &StreamImage,
    ) -> Result<(), OutOfMemory> {
        assert_eq!(self.len(txn), 0, "a restore starts empty");
        let mut meta = Meta::default();
        for pack in &image.packs {
            let at = layout.alloc.alloc(txn, PACK_BYTES)?;
            *txn.set_pod::<Pack>(at) = Pack {
                prev: meta.pack_last,
                next: 0,
                live: pack.entries.len() as u64,
                appended: pack.appended,
                last_ms: pack.last.0,
                last_seq: pack.last.1,
                first_ms: pack.master.0,
                first_seq: pack.master.1,
            };
            if meta.pack_last == 0 {
                meta.pack_first = at as u64;
            } else {
                set_word(txn, meta.pack_last as usize + 8, at as u64);
            }
            meta.pack_last = at as u64;
            meta.pack_count += 1;
            for (id, strings) in &pack.entries {
                let key = StreamId {
                    ms: id.0,
                    seq: id.1,
                }
                .key();
                let hash = dict::hash(layout.seed(txn), &key);
                let value = entry_value(at, strings);
                self.entries()
                    .insert(txn, &layout.alloc, &key, hash, &value)?;
            }
        }
        meta.set_last_id(StreamId {
            ms: image.last_id.0,
            seq: image.last_id.1,
        });
        meta.set_first_id(StreamId {
            ms: image.first_id.0,
            seq: image.first_id.1,
        });
        meta.set_max_deleted_id(StreamId {
            ms: image.max_deleted.0,
            seq: image.max_deleted.1,
        });
        meta.entries_added = image.entries_added;
        self.set_meta(txn, &meta);
        Ok(())
    }
}

/// What a trim keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimBy {
    /// At most this many entries.
    MaxLen(u64),
    /// No entry below this ID.
    MinId(StreamId),
}

/// A trim's strategy and its bounds (Redis's `streamAddTrimArgs`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trim {
    pub by: TrimBy,
    /// Whole packs only (`~`).
    pub approx: bool,
    /// At most this many entries deleted (0: no bound).
    pub limit: u64,
}

/// The nodes of the radix tree Redis keeps for listpack nodes keyed `keys` (Redis's
/// `rax->numnodes`, which `XINFO STREAM` answers as `radix-tree-nodes`).
///
/// Redis's `rax` keeps its tree compressed, whatever order keys came and went in: a chain
/// of bytes with no branch and no key is one node. With keys of one length (16 bytes, so
/// none is a prefix of another) that gives: the head; the node of each branching point
/// and each key; and, below a branching point, one node more for each child whose edge
/// is longer than its first byte (the rest of the edge, compressed). A head with a single
/// child holds the common prefix itself.
pub fn radix_tree_nodes(keys: &[[u8; 16]]) -> u64 {
    let mut sorted = keys.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let Some((first, last)) = sorted.first().zip(sorted.last()) else {
        return 1;
    };
    match common_prefix(first, last) {
        0 => subtree_nodes(&sorted, 0),
        shared => 1 + subtree_nodes(&sorted, shared),
    }
}

/// Bytes `a` and `b` share at their start.
fn common_prefix(a: &[u8; 16], b: &[u8; 16]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// The nodes below and including the branching point (or key, at depth 16) at `depth`
/// that `keys` (sorted, sharing their first `depth` bytes) pass through.
fn subtree_nodes(keys: &[[u8; 16]], depth: usize) -> u64 {
    if depth == 16 {
        return 1;
    }
    let mut nodes = 1;
    for child in keys.chunk_by(|a, b| a[depth] == b[depth]) {
        let end = common_prefix(&child[0], &child[child.len() - 1]);
        if end - depth > 1 {
            nodes += 1;
        }
        nodes += subtree_nodes(child, end);
    }
    nodes
}
