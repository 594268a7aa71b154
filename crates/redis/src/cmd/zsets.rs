//! Sorted set commands (t_zset.c): members kept in order of score, then of their bytes.
//!
//! # Encoding
//!
//! A sorted set is a hash table and a skip list over the same entries: the table answers
//! `ZSCORE` and membership in O(1), the list keeps the order and, through the spans of its
//! pointers, answers ranks in O(log n). The root block (`KeyHead::value`) is
//!
//! ```text
//! offset  0  DictHeader (64 bytes): the table, member -> entry
//! offset 64  level     u64   levels in use, 1 ..= capacity
//! offset 72  tail      u64   the last entry (0 when empty), where reverse walks start
//! offset 80  capacity  u64   levels the head below has room for (4 ..= 32)
//! offset 88  reserved  u64   zero
//! offset 96  the head's levels: capacity x (forward u64, span u64)
//! ```
//!
//! and every member is one block, at once the table's entry and the list's node:
//!
//! ```text
//! offset  0  Link (24 bytes): the table's chain, the member's hash and length;
//!            aux = the node's level count (1 ..= 32)
//! offset 24  score     f64
//! offset 32  backward  u64   the previous entry, 0 for the first
//! offset 40  member, padded to a multiple of 8 bytes
//! then       level count x (forward u64, span u64)
//! ```
//!
//! A forward pointer is an entry's offset (0: none). A span is how many places its pointer
//! moves ahead: the rank of the node it points to minus its own node's (the head's rank is
//! 0), or, for a pointer to nothing, the number of entries after its node, as in Redis's
//! `zskiplist`, so a walk that adds up spans knows the rank where it stands.
//!
//! ## Levels without a generator
//!
//! A node's level count comes from its member's hash (the table's, keyed by the database's
//! seed): one plus half the hash's leading zero bits, at most 32, so each further level is
//! reached with probability 1/4, as Redis's `ZSKIPLIST_P`. The leading bits are used because
//! the table picks buckets with the trailing ones. Every replica would compute the same
//! level, though none needs to: backups apply the redo of the primary's writes.
//!
//! The head's levels grow with the list: a new set's root has room for 4, and a node taller
//! than the room moves the root to a block with twice the room (or as much as the node
//! needs), so a small set does not carry 32 empty levels.
//!
//! ## Why a skip list and not a B-tree
//!
//! Every declared byte is undo-logged and diffed into the redo that backups apply, so the
//! structure that declares least per update wins. Inserting into or deleting from the skip
//! list rewrites, per level in use (about log4 n), one 16-byte pointer-and-span pair or one
//! 8-byte span of a neighbour, plus one backward pointer: a few hundred bytes at most, and no
//! block but the entry's own is allocated or freed. A B-tree of entry offsets keeps fewer
//! pointers, but each insert or delete shifts half a node's slots (hundreds of bytes for a
//! useful fan-out), updates a count in each ancestor for ranks, and splits and merges nodes,
//! which allocates, copies and frees blocks. The skip list also needs no node of its own:
//! its nodes are the table's entries.
//!
//! The price is a pointer chase per step and the dependence on the hash: members chosen to
//! all hash to level 1 would make walks linear, as members chosen to collide make the
//! table's chains long. Both are kept from an attacker only by the database's hash seed,
//! which today is a fixed default.
//!
//! ## Where this differs from Redis's small sets
//!
//! Redis keeps a set of up to 128 short members in a listpack and answers from it; every
//! set here is in the form of Redis's skiplist encoding, and answers as Redis does for a set
//! in that encoding. Two differences can be seen. A score is kept as given, so `ZSCORE`
//! answers "-0" for a member added with -0, where a listpack loses the sign ("0"). And
//! `ZSCAN` walks the table with a cursor, in hash order, where Redis answers a listpack
//! whole, in order, in one call. Member ranges over members of different scores are
//! unspecified in Redis; here they follow this list's walk, and may differ from Redis's.
//!
//! ## Scores
//!
//! A score is an `f64`, never NaN. -0.0 and 0.0 compare equal, as in Redis, so the order
//! does not see the sign, and an update to an equal score changes nothing.

use std::collections::BTreeMap;

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use super::{CmdError, Command, Ctx, Read, Write, arg, collection, data, int_arg};
use crate::alloc::{Alloc, OutOfMemory};
use crate::db::{Key, Kind, Layout};
use crate::dict::{self, DICT_HEADER_BYTES, Dict, Found, LINK_BYTES, Link};
use crate::glob;
use crate::mem::{Mem, set_word};
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, Proto, ReplyWriter};

mod algebra;
pub mod geo;
mod geohash;

/// The family's commands (merged into [`super::commands`]). Those whose keys follow a count
/// name at most their destination in (first, last, step), as Redis 7.0 (see
/// [`super::counted_keys_at`]).
pub static COMMANDS: &[Command] = &[
    data("ZADD", -4, Write, (1, 1, 1), true, zadd),
    data("ZCARD", 2, Read, (1, 1, 1), false, zcard),
    data("ZCOUNT", 4, Read, (1, 1, 1), false, zcount),
    data("ZDIFF", -3, Read, (0, 0, 0), false, algebra::zdiff),
    data(
        "ZDIFFSTORE",
        -4,
        Write,
        (1, 1, 1),
        true,
        algebra::zdiffstore,
    ),
    data("ZINCRBY", 4, Write, (1, 1, 1), true, zincrby),
    data("ZINTER", -3, Read, (0, 0, 0), false, algebra::zinter),
    data(
        "ZINTERCARD",
        -3,
        Read,
        (0, 0, 0),
        false,
        algebra::zintercard,
    ),
    data(
        "ZINTERSTORE",
        -4,
        Write,
        (1, 1, 1),
        true,
        algebra::zinterstore,
    ),
    data("ZLEXCOUNT", 4, Read, (1, 1, 1), false, zlexcount),
    data("ZMPOP", -4, Write, (0, 0, 0), false, zmpop),
    data("ZMSCORE", -3, Read, (1, 1, 1), false, zmscore),
    data("ZPOPMAX", -2, Write, (1, 1, 1), false, zpopmax),
    data("ZPOPMIN", -2, Write, (1, 1, 1), false, zpopmin),
    data("ZRANGE", -4, Read, (1, 1, 1), false, zrange),
    data("ZRANDMEMBER", -2, Read, (1, 1, 1), false, zrandmember),
    data("ZRANGEBYLEX", -4, Read, (1, 1, 1), false, zrangebylex),
    data("ZRANGEBYSCORE", -4, Read, (1, 1, 1), false, zrangebyscore),
    data("ZRANGESTORE", -5, Write, (1, 2, 1), true, zrangestore),
    data("ZRANK", 3, Read, (1, 1, 1), false, zrank),
    data("ZREM", -3, Write, (1, 1, 1), false, zrem),
    data("ZREMRANGEBYLEX", 4, Write, (1, 1, 1), false, zremrangebylex),
    data(
        "ZREMRANGEBYRANK",
        4,
        Write,
        (1, 1, 1),
        false,
        zremrangebyrank,
    ),
    data(
        "ZREMRANGEBYSCORE",
        4,
        Write,
        (1, 1, 1),
        false,
        zremrangebyscore,
    ),
    data("ZREVRANGE", -4, Read, (1, 1, 1), false, zrevrange),
    data("ZREVRANGEBYLEX", -4, Read, (1, 1, 1), false, zrevrangebylex),
    data(
        "ZREVRANGEBYSCORE",
        -4,
        Read,
        (1, 1, 1),
        false,
        zrevrangebyscore,
    ),
    data("ZREVRANK", 3, Read, (1, 1, 1), false, zrevrank),
    data("ZSCAN", -3, Read, (1, 1, 1), false, zscan),
    data("ZSCORE", 3, Read, (1, 1, 1), false, zscore),
    data("ZUNION", -3, Read, (0, 0, 0), false, algebra::zunion),
    data(
        "ZUNIONSTORE",
        -4,
        Write,
        (1, 1, 1),
        true,
        algebra::zunionstore,
    ),
];

// ---------------------------------------------------------------------------------------
// The encoding.

const SCORE_AT: usize = LINK_BYTES;
/// The link's first word, `next`, which the table writes.
const LINK_NEXT_BYTES: usize = 8;
const BACKWARD_AT: usize = SCORE_AT + 8;
/// Where an entry's member lies: the table's `key_at`.
const MEMBER_AT: usize = BACKWARD_AT + 8;
/// One level of a node: its forward pointer and its span.
const LEVEL_BYTES: usize = 16;
/// The most levels a node has (Redis's `ZSKIPLIST_MAXLEVEL`).
const LEVEL_MAX: usize = 32;
/// The levels a new set's head has room for.
const HEAD_CAPACITY_MIN: usize = 4;

/// The skip list's fields in the root block, after the table's header.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct SkipHead {
    level: u64,
    tail: u64,
    capacity: u64,
    reserved: u64,
}

const SKIP_AT: usize = DICT_HEADER_BYTES;
const LEVEL_FIELD_AT: usize = SKIP_AT;
const TAIL_AT: usize = SKIP_AT + 8;
const CAPACITY_AT: usize = SKIP_AT + 16;
const HEAD_AT: usize = SKIP_AT + size_of::<SkipHead>();
const _: () = assert!(HEAD_AT == 96);

/// The list's head as a node: no entry lies at offset 0 (the database header does), so 0
/// names the head where a node is expected, and a backward pointer to the head is 0.
const HEAD: usize = 0;

/// Bytes of a root block whose head has room for `capacity` levels.
fn root_len(capacity: usize) -> usize {
    HEAD_AT + LEVEL_BYTES * capacity
}

/// Bytes of an entry for a member of `member_len` bytes with `level_count` levels.
fn entry_len(member_len: usize, level_count: usize) -> usize {
    MEMBER_AT + member_len.next_multiple_of(8) + LEVEL_BYTES * level_count
}

/// The level count of a node whose member has `hash`: each further level with probability
/// 1/4, from the hash's leading bits (the table's buckets use the trailing ones).
fn level_for(hash: u64) -> usize {
    1 + (hash.leading_zeros() as usize / 2).min(LEVEL_MAX - 1)
}

fn link_of(mem: &impl Mem, entry: usize) -> Link {
    mem.pod(entry)
}

fn score_of(mem: &impl Mem, entry: usize) -> f64 {
    f64::from_bits(mem.word(entry + SCORE_AT))
}

fn member_of(mem: &impl Mem, entry: usize) -> &[u8] {
    let len = link_of(mem, entry).key_len as usize;
    mem.bytes(entry + MEMBER_AT, len)
}

fn backward_of(mem: &impl Mem, entry: usize) -> usize {
    mem.word(entry + BACKWARD_AT) as usize
}

/// Segment offset of an entry's first level.
fn entry_levels(mem: &impl Mem, entry: usize) -> usize {
    let len = link_of(mem, entry).key_len as usize;
    entry + MEMBER_AT + len.next_multiple_of(8)
}

/// The bytes an entry was allocated for (what `free` is given back).
fn entry_block_len(mem: &impl Mem, entry: usize) -> usize {
    let link = link_of(mem, entry);
    entry_len(link.key_len as usize, link.aux as usize)
}

/// Whether `(score_a, member_a)` sorts before `(score_b, member_b)`: by score, then by the
/// members' bytes (Redis's `memcmp` order, the shorter first when one is a prefix).
fn sorts_before(score_a: f64, member_a: &[u8], score_b: f64, member_b: &[u8]) -> bool {
    score_a < score_b || (score_a == score_b && member_a < member_b)
}

/// Whether `entry` sorts before `(score, member)`.
fn entry_before(mem: &impl Mem, entry: usize, score: f64, member: &[u8]) -> bool {
    sorts_before(score_of(mem, entry), member_of(mem, entry), score, member)
}

/// Writes one level (forward pointer and span) of the node whose levels start at `levels`.
fn set_level(txn: &mut Txn<'_>, levels: usize, i: usize, forward: usize, span: u64) {
    let bytes = txn.set_range(levels + LEVEL_BYTES * i, LEVEL_BYTES);
    bytes[..8].copy_from_slice(&(forward as u64).to_le_bytes());
    bytes[8..].copy_from_slice(&span.to_le_bytes());
}

/// Writes one level's span alone.
fn set_span(txn: &mut Txn<'_>, levels: usize, i: usize, span: u64) {
    set_word(txn, levels + LEVEL_BYTES * i + 8, span);
}

/// The last node before a place in the list at every level in use, and its rank: what an
/// insert or a delete at that place rewrites.
struct Path {
    node: [usize; LEVEL_MAX],
    rank: [u64; LEVEL_MAX],
}

impl Path {
    /// The last node before the place (the head if none).
    fn last(&self) -> usize {
        self.node[0]
    }

    /// How many entries lie before the place.
    fn count(&self) -> u64 {
        self.rank[0]
    }
}

/// A sorted set's value: where its root block lies. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct ZSet {
    root: usize,
}

impl ZSet {
    fn of(key: &Key) -> ZSet {
        assert_eq!(key.kind(), Kind::ZSet, "a sorted set read of another type");
        ZSet {
            root: key.head.value as usize,
        }
    }

    fn dict(self) -> Dict {
        Dict::new(self.root, MEMBER_AT)
    }

    /// Members in the set.
    fn len(self, mem: &impl Mem) -> u64 {
        self.dict().len(mem)
    }

    fn skip(self, mem: &impl Mem) -> SkipHead {
        mem.pod(self.root + SKIP_AT)
    }

    /// Segment offset of the first level of `node` (an entry or [`HEAD`]).
    fn levels(self, mem: &impl Mem, node: usize) -> usize {
        if node == HEAD {
            self.root + HEAD_AT
        } else {
            entry_levels(mem, node)
        }
    }

    /// Level `i` of `node`: its forward pointer and span.
    fn level(self, mem: &impl Mem, node: usize, i: usize) -> (usize, u64) {
        let [forward, span]: [u64; 2] = mem.pod(self.levels(mem, node) + LEVEL_BYTES * i);
        (forward as usize, span)
    }

    /// The entry after `node` (0 for none).
    fn next(self, mem: &impl Mem, node: usize) -> usize {
        self.level(mem, node, 0).0
    }

    /// The first entry (0 when empty).
    fn first(self, mem: &impl Mem) -> usize {
        self.next(mem, HEAD)
    }

    /// The last entry (0 when empty).
    fn last(self, mem: &impl Mem) -> usize {
        self.skip(mem).tail as usize
    }

    /// The entry of `member`, found through the table.
    fn find(self, mem: &impl Mem, seed: u64, member: &[u8]) -> Option<Found> {
        self.dict().find(mem, member, dict::hash(seed, member))
    }

    /// Walks down from the top level, at each level as far as the nodes for which `before`
    /// holds (it must hold for a prefix of the order), and returns where it stopped.
    fn walk<M: Mem>(self, mem: &M, before: impl Fn(&M, usize) -> bool) -> Path {
        let level = self.skip(mem).level as usize;
        let mut path = Path {
            node: [HEAD; LEVEL_MAX],
            rank: [0; LEVEL_MAX],
        };
        let (mut node, mut node_levels, mut rank) = (HEAD, self.root + HEAD_AT, 0u64);
        for i in (0..level).rev() {
            loop {
                let [forward, span]: [u64; 2] = mem.pod(node_levels + LEVEL_BYTES * i);
                let forward = forward as usize;
                if forward == 0 || !before(mem, forward) {
                    break;
                }
                node = forward;
                node_levels = entry_levels(mem, forward);
                rank += span;
            }
            path.node[i] = node;
            path.rank[i] = rank;
        }
        path
    }

    /// The path to the place of `entry` (an entry of the list or not): every node before it.
    fn path_to<M: Mem>(self, mem: &M, entry: usize) -> Path {
        let score = score_of(mem, entry);
        let member = member_of(mem, entry);
        self.walk(mem, |mem, e| entry_before(mem, e, score, member))
    }

    /// The entry at 1-based `rank` (1 ..= len).
    fn by_rank(self, mem: &impl Mem, rank: u64) -> usize {
        assert!(
            (1..=self.len(mem)).contains(&rank),
            "rank {rank} is outside the set"
        );
        let level = self.skip(mem).level as usize;
        let (mut node, mut node_levels, mut traversed) = (HEAD, self.root + HEAD_AT, 0u64);
        for i in (0..level).rev() {
            loop {
                let [forward, span]: [u64; 2] = mem.pod(node_levels + LEVEL_BYTES * i);
                if forward == 0 || traversed + span > rank {
                    break;
                }
                traversed += span;
                node = forward as usize;
                node_levels = entry_levels(mem, node);
            }
            if traversed == rank {
                return node;
            }
        }
        panic!("the list's spans do not reach rank {rank}");
    }

    /// The 1-based rank of `entry`, an entry of the list.
    fn rank_of(self, mem: &impl Mem, entry: usize) -> u64 {
        let score = score_of(mem, entry);
        let member = member_of(mem, entry);
        let path = self.walk(mem, |mem, e| {
            !sorts_before(score, member, score_of(mem, e), member_of(mem, e))
        });
        assert_eq!(
            path.last(),
            entry,
            "an entry of the list is found by its order"
        );
        path.count()
    }

    /// Allocates an empty set's root block.
    fn create(txn: &mut Txn<'_>, alloc: &Alloc) -> Result<ZSet, OutOfMemory> {
        let root = alloc.alloc(txn, root_len(HEAD_CAPACITY_MIN))?;
        let skip = SkipHead {
            level: 1,
            tail: 0,
            capacity: HEAD_CAPACITY_MIN as u64,
            reserved: 0,
        };
        // The table's header, the list's fields and the head's one level in use; the levels
        // above are written when the list first reaches them.
        let bytes = txn.set_range(root, HEAD_AT + LEVEL_BYTES);
        bytes.fill(0);
        bytes[SKIP_AT..HEAD_AT].copy_from_slice(bytemuck::bytes_of(&skip));
        Ok(ZSet { root })
    }

    /// The set with room in its head for `levels` levels: the same, or its root moved to a
    /// larger block (and `key` pointed at it).
    fn reserve_levels(
        self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        key: &Key,
        levels: usize,
    ) -> Result<ZSet, OutOfMemory> {
        let skip = self.skip(txn);
        let capacity = skip.capacity as usize;
        if levels <= capacity {
            return Ok(self);
        }
        let grown = levels.max(2 * capacity).min(LEVEL_MAX);
        let root = layout.alloc.alloc(txn, root_len(grown))?;
        // Only the levels in use hold anything; the rest are written when reached.
        let used = HEAD_AT + LEVEL_BYTES * skip.level as usize;
        let mut bytes = txn.read(self.root, used).to_vec();
        bytes[CAPACITY_AT..CAPACITY_AT + 8].copy_from_slice(&(grown as u64).to_le_bytes());
        txn.set_range(root, used).copy_from_slice(&bytes);
        layout.alloc.free(txn, self.root, root_len(capacity));
        layout.set_value(txn, key, root as u64);
        Ok(ZSet { root })
    }

    /// Adds `member` (not in the set) with `score`; `hash` is the member's table hash. The
    /// set may move (see [`ZSet::reserve_levels`]): the returned one is current.
    fn insert(
        self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        key: &Key,
        score: f64,
        member: &[u8],
        hash: u64,
    ) -> Result<ZSet, OutOfMemory> {
        let level_count = level_for(hash);
        let zset = self.reserve_levels(txn, layout, key, level_count)?;
        let entry = layout
            .alloc
            .alloc(txn, entry_len(member.len(), level_count))?;
        let link = Link {
            next: 0,
            hash,
            key_len: u32::try_from(member.len()).expect("a member is shorter than 4 GiB"),
            aux: level_count as u32,
        };
        // The link's `next` word is the table's to write when it links the entry: declaring
        // each byte once keeps the txn's capture on its fast path, which overlaps leave.
        let bytes = txn.set_range(entry + LINK_NEXT_BYTES, SCORE_AT + 8 - LINK_NEXT_BYTES);
        bytes[..LINK_BYTES - LINK_NEXT_BYTES]
            .copy_from_slice(&bytemuck::bytes_of(&link)[LINK_NEXT_BYTES..]);
        bytes[SCORE_AT - LINK_NEXT_BYTES..].copy_from_slice(&score.to_bits().to_le_bytes());
        if !member.is_empty() {
            txn.set_range(entry + MEMBER_AT, member.len())
                .copy_from_slice(member);
        }
        let linked = zset.len(txn);
        zset.dict().insert(txn, &layout.alloc, entry)?;
        zset.link(txn, entry, linked);
        Ok(zset)
    }

    /// Links `entry` (its score, member and level count written; not in the list) at its
    /// place in the order, when `linked` entries are in the list.
    ///
    /// Declares, per level in use, the predecessor's pointer and span (below the entry's
    /// height) or its span alone (above it), then the entry's levels and backward pointer,
    /// the next entry's backward pointer (or the tail) and, if the list grew taller, its
    /// level.
    fn link(self, txn: &mut Txn<'_>, entry: usize, linked: u64) {
        let level = self.skip(txn).level as usize;
        let level_count = link_of(txn, entry).aux as usize;
        assert!(
            level_count <= self.skip(txn).capacity as usize,
            "the head has room for the entry's levels"
        );
        let path = self.path_to(txn, entry);
        let mut levels = [(0usize, 0u64); LEVEL_MAX];
        for (i, new_level) in levels.iter_mut().enumerate().take(level_count) {
            // Above the levels in use the head points to nothing, past every entry.
            let (pred, pred_rank, (forward, span)) = if i < level {
                let pred = path.node[i];
                (pred, path.rank[i], self.level(txn, pred, i))
            } else {
                (HEAD, 0, (0, linked))
            };
            let steps_to_entry = path.count() - pred_rank + 1;
            *new_level = (forward, span + 1 - steps_to_entry);
            let pred_levels = self.levels(txn, pred);
            set_level(txn, pred_levels, i, entry, steps_to_entry);
        }
        for i in level_count..level {
            let pred = path.node[i];
            let (_, span) = self.level(txn, pred, i);
            let pred_levels = self.levels(txn, pred);
            set_span(txn, pred_levels, i, span + 1);
        }
        let own_levels = entry_levels(txn, entry);
        let bytes = txn.set_range(own_levels, LEVEL_BYTES * level_count);
        for (chunk, (forward, span)) in bytes.chunks_exact_mut(LEVEL_BYTES).zip(levels) {
            chunk[..8].copy_from_slice(&(forward as u64).to_le_bytes());
            chunk[8..].copy_from_slice(&span.to_le_bytes());
        }
        set_word(txn, entry + BACKWARD_AT, path.last() as u64);
        match levels[0].0 {
            0 => set_word(txn, self.root + TAIL_AT, entry as u64),
            next => set_word(txn, next + BACKWARD_AT, entry as u64),
        }
        if level_count > level {
            set_word(txn, self.root + LEVEL_FIELD_AT, level_count as u64);
        }
    }

    /// Unlinks `entry`, which follows `path.last()`, from the list (not from the table).
    /// The path stays the path to the entry that followed it, so a run of entries is
    /// unlinked with one walk.
    fn unlink_after(self, txn: &mut Txn<'_>, path: &Path, entry: usize) {
        let level = self.skip(txn).level as usize;
        assert_eq!(
            self.next(txn, path.last()),
            entry,
            "the path leads to the entry"
        );
        for i in 0..level {
            let pred = path.node[i];
            let (forward, span) = self.level(txn, pred, i);
            let pred_levels = self.levels(txn, pred);
            if forward == entry {
                let (after, entry_span) = self.level(txn, entry, i);
                set_level(txn, pred_levels, i, after, span + entry_span - 1);
            } else {
                set_span(txn, pred_levels, i, span - 1);
            }
        }
        let next = self.next(txn, entry);
        let backward = backward_of(txn, entry) as u64;
        match next {
            0 => set_word(txn, self.root + TAIL_AT, backward),
            next => set_word(txn, next + BACKWARD_AT, backward),
        }
        let mut lowered = level;
        while lowered > 1 && self.level(txn, HEAD, lowered - 1).0 == 0 {
            lowered -= 1;
        }
        if lowered != level {
            set_word(txn, self.root + LEVEL_FIELD_AT, lowered as u64);
        }
    }

    /// Gives `entry` (of the set) a new score, moving it only if its place changes.
    fn set_score(self, txn: &mut Txn<'_>, entry: usize, score: f64) {
        let stays = {
            let member = member_of(txn, entry);
            let backward = backward_of(txn, entry);
            let next = self.next(txn, entry);
            (backward == 0 || entry_before(txn, backward, score, member))
                && (next == 0
                    || sorts_before(score, member, score_of(txn, next), member_of(txn, next)))
        };
        if !stays {
            let path = self.path_to(txn, entry);
            self.unlink_after(txn, &path, entry);
        }
        set_word(txn, entry + SCORE_AT, score.to_bits());
        if !stays {
            let linked = self.len(txn) - 1;
            self.link(txn, entry, linked);
        }
    }

    /// Removes `count` consecutive entries starting at `first`: one walk, then per entry
    /// its unlinking, its removal from the table and its block's freeing.
    fn remove_run(self, txn: &mut Txn<'_>, alloc: &Alloc, first: usize, count: u64) {
        let path = self.path_to(txn, first);
        let mut entry = first;
        for _ in 0..count {
            assert_ne!(entry, 0, "the run is inside the list");
            let next = self.next(txn, entry);
            self.unlink_after(txn, &path, entry);
            let found = {
                let hash = link_of(txn, entry).hash;
                self.dict()
                    .find(txn, member_of(txn, entry), hash)
                    .expect("an entry of the list is in the table")
            };
            let block_len = entry_block_len(txn, entry);
            self.dict().remove(txn, alloc, found);
            alloc.free(txn, entry, block_len);
            entry = next;
        }
    }

    /// Removes the entry `found` names.
    fn remove(self, txn: &mut Txn<'_>, alloc: &Alloc, found: Found) {
        self.remove_run(txn, alloc, found.entry, 1);
    }
}

/// Frees every block the value of `key` holds (not its key entry).
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    let zset = ZSet::of(key);
    let mut entry = zset.first(txn);
    while entry != 0 {
        let next = zset.next(txn, entry);
        let block_len = entry_block_len(txn, entry);
        layout.alloc.free(txn, entry, block_len);
        entry = next;
    }
    let mut buckets = Vec::with_capacity(2);
    zset.dict()
        .blocks(txn, |block, len| buckets.push((block, len)));
    for (block, len) in buckets {
        layout.alloc.free(txn, block, len);
    }
    let capacity = zset.skip(txn).capacity as usize;
    layout.alloc.free(txn, zset.root, root_len(capacity));
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    let _ = layout;
    let zset = ZSet::of(key);
    owned.push((zset.root, root_len(zset.skip(mem).capacity as usize)));
    zset.dict()
        .blocks(mem, |block, len| owned.push((block, len)));
    zset.dict().for_each(mem, |entry| {
        owned.push((entry, entry_block_len(mem, entry)))
    });
}

/// Makes `to` (which does not exist) a sorted set of the members and scores of sorted set
/// `from` (`COPY`).
pub fn copy(ctx: &mut Ctx<'_, '_>, from: &Key, to: &[u8]) -> Result<(), CmdError> {
    let mem = &ctx.access;
    let pairs: Vec<(Vec<u8>, f64)> = super::collection::all_entries(mem, &ZSet::of(from).dict())
        .into_iter()
        .map(|entry| (member_of(mem, entry).to_vec(), score_of(mem, entry)))
        .collect();
    create_with(ctx, to, &pairs)
}

/// Every (member, score) of sorted set `key`, in its table's order (`DUMP`).
pub fn pairs(mem: &impl Mem, key: &Key) -> Vec<(Vec<u8>, f64)> {
    super::collection::all_entries(mem, &ZSet::of(key).dict())
        .into_iter()
        .map(|entry| (member_of(mem, entry).to_vec(), score_of(mem, entry)))
        .collect()
}

/// Makes `name` (which does not exist) a sorted set of `pairs` (distinct members, not
/// empty), as `RESTORE` does.
pub fn store(ctx: &mut Ctx<'_, '_>, name: &[u8], pairs: &[(Vec<u8>, f64)]) -> Result<(), CmdError> {
    assert!(!pairs.is_empty(), "an empty sorted set is not stored");
    create_with(ctx, name, pairs)
}

/// Checks every invariant of the sorted set `key` holds, for tests: the order, the spans
/// at every level, the backward pointers and the tail, the level in use and the head's
/// room, the level counts the hashes give, and that the table and the list hold the same
/// entries, as many as the key's element count.
pub fn verify(mem: &impl Mem, layout: &Layout, key: &Key) -> Result<(), String> {
    let zset = ZSet::of(key);
    let skip = zset.skip(mem);
    let len = zset.len(mem);
    let level = skip.level as usize;
    let capacity = skip.capacity as usize;
    if key.head.value_len != len {
        return Err(format!(
            "the key counts {} members, the table {len}",
            key.head.value_len
        ));
    }
    if len == 0 {
        return Err("an empty sorted set was kept".into());
    }
    if !(1..=capacity).contains(&level) || !(HEAD_CAPACITY_MIN..=LEVEL_MAX).contains(&capacity) {
        return Err(format!("level {level} with room for {capacity}"));
    }
    if level > 1 && zset.level(mem, HEAD, level - 1).0 == 0 {
        return Err(format!("the top level in use, {level}, is empty"));
    }
    let seed = layout.seed(mem);
    let mut ranks = BTreeMap::new();
    let (mut previous, mut entry, mut rank) = (HEAD, zset.first(mem), 0u64);
    let mut taller = [0u64; LEVEL_MAX];
    while entry != 0 {
        rank += 1;
        if rank > len {
            return Err(format!(
                "the list holds more than the table's {len} entries"
            ));
        }
        let link = link_of(mem, entry);
        let member = member_of(mem, entry);
        let score = score_of(mem, entry);
        if score.is_nan() {
            return Err(format!("rank {rank} has a NaN score"));
        }
        if link.hash != dict::hash(seed, member) {
            return Err(format!("rank {rank} holds a wrong hash"));
        }
        let level_count = link.aux as usize;
        if level_count != level_for(link.hash) || level_count > level {
            return Err(format!("rank {rank} has {level_count} levels"));
        }
        for count in taller.iter_mut().take(level_count) {
            *count += 1;
        }
        if zset.find(mem, seed, member).map(|found| found.entry) != Some(entry) {
            return Err(format!(
                "rank {rank} is not the table's entry for its member"
            ));
        }
        if backward_of(mem, entry) != previous {
            return Err(format!("rank {rank} points back to the wrong entry"));
        }
        if previous != HEAD && !entry_before(mem, previous, score, member) {
            return Err(format!("rank {rank} does not sort after rank {}", rank - 1));
        }
        ranks.insert(entry, rank);
        previous = entry;
        entry = zset.next(mem, entry);
    }
    if rank != len {
        return Err(format!("the list holds {rank} entries, the table {len}"));
    }
    if zset.last(mem) != previous {
        return Err("the tail is not the last entry".into());
    }
    for (i, &expected) in taller.iter().enumerate().take(level) {
        let (mut node, mut node_rank, mut visited) = (HEAD, 0u64, 0u64);
        loop {
            let (forward, span) = zset.level(mem, node, i);
            let forward_rank = match forward {
                0 => len,
                forward => *ranks
                    .get(&forward)
                    .ok_or_else(|| format!("level {i} points outside the list"))?,
            };
            if forward != 0 && forward_rank <= node_rank {
                return Err(format!("level {i} goes backwards at rank {node_rank}"));
            }
            if span != forward_rank - node_rank {
                return Err(format!(
                    "level {i} at rank {node_rank} spans {span}, not {}",
                    forward_rank - node_rank
                ));
            }
            if forward == 0 {
                break;
            }
            visited += 1;
            (node, node_rank) = (forward, forward_rank);
        }
        if visited != expected {
            return Err(format!(
                "level {i} links {visited} entries of the {expected} that tall"
            ));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Ranges.

/// One end of a score range: `(` makes it exclusive.
#[derive(Clone, Copy, Debug)]
struct ScoreBound {
    value: f64,
    exclusive: bool,
}

/// One end of a lexicographic range: `-`, `+`, `[member` or `(member`.
#[derive(Clone, Copy, Debug)]
enum LexBound<'a> {
    Least,
    Greatest,
    Inclusive(&'a [u8]),
    Exclusive(&'a [u8]),
}

/// A range by score or by member, minimum and maximum.
#[derive(Clone, Copy, Debug)]
enum Bounds<'a> {
    Score {
        min: ScoreBound,
        max: ScoreBound,
    },
    Lex {
        min: LexBound<'a>,
        max: LexBound<'a>,
    },
}

impl Bounds<'_> {
    /// Whether an entry is at or past the minimum.
    fn reaches_min(&self, mem: &impl Mem, entry: usize) -> bool {
        match self {
            Bounds::Score { min, .. } => {
                let score = score_of(mem, entry);
                if min.exclusive {
                    score > min.value
                } else {
                    score >= min.value
                }
            }
            Bounds::Lex { min, .. } => {
                let member = member_of(mem, entry);
                match min {
                    LexBound::Least => true,
                    LexBound::Greatest => false,
                    LexBound::Inclusive(bound) => member >= *bound,
                    LexBound::Exclusive(bound) => member > *bound,
                }
            }
        }
    }

    /// Whether an entry is at or before the maximum.
    fn within_max(&self, mem: &impl Mem, entry: usize) -> bool {
        match self {
            Bounds::Score { max, .. } => {
                let score = score_of(mem, entry);
                if max.exclusive {
                    score < max.value
                } else {
                    score <= max.value
                }
            }
            Bounds::Lex { max, .. } => {
                let member = member_of(mem, entry);
                match max {
                    LexBound::Least => false,
                    LexBound::Greatest => true,
                    LexBound::Inclusive(bound) => member <= *bound,
                    LexBound::Exclusive(bound) => member < *bound,
                }
            }
        }
    }

    /// How many entries lie in the range: those before the maximum's place, less those
    /// before the minimum's (two walks, as Redis's `ZCOUNT` takes two ranks).
    fn count(&self, mem: &impl Mem, zset: ZSet) -> u64 {
        let before_min = zset.walk(mem, |mem, e| !self.reaches_min(mem, e)).count();
        let through_max = zset.walk(mem, |mem, e| self.within_max(mem, e)).count();
        through_max.saturating_sub(before_min)
    }
}

const NOT_A_FLOAT_RANGE: CmdError = CmdError::fixed("ERR min or max is not a float");
const NOT_A_LEX_RANGE: CmdError = CmdError::fixed("ERR min or max not valid string range item");

/// Parses a score range's ends as Redis's `zslParseRange` does.
fn parse_score_bounds<'a>(min: &[u8], max: &[u8]) -> Result<Bounds<'a>, CmdError> {
    fn bound(text: &[u8]) -> Option<ScoreBound> {
        let (exclusive, number) = match text.split_first() {
            Some((b'(', rest)) => (true, rest),
            _ => (false, text),
        };
        let value = num::parse_f64_strtod(number).filter(|value| !value.is_nan())?;
        Some(ScoreBound { value, exclusive })
    }
    match (bound(min), bound(max)) {
        (Some(min), Some(max)) => Ok(Bounds::Score { min, max }),
        _ => Err(NOT_A_FLOAT_RANGE),
    }
}

/// Parses a lexicographic range's ends as Redis's `zslParseLexRange` does.
fn parse_lex_bounds<'a>(min: &'a [u8], max: &'a [u8]) -> Result<Bounds<'a>, CmdError> {
    fn bound(text: &[u8]) -> Option<LexBound<'_>> {
        // Redis reads `+` and `-` as C strings: whatever follows a NUL is not seen.
        let alone = |text: &[u8]| text.len() == 1 || text[1] == 0;
        match text.split_first()? {
            (b'+', _) if alone(text) => Some(LexBound::Greatest),
            (b'-', _) if alone(text) => Some(LexBound::Least),
            (b'[', rest) => Some(LexBound::Inclusive(rest)),
            (b'(', rest) => Some(LexBound::Exclusive(rest)),
            _ => None,
        }
    }
    match (bound(min), bound(max)) {
        (Some(min), Some(max)) => Ok(Bounds::Lex { min, max }),
        _ => Err(NOT_A_LEX_RANGE),
    }
}

/// What a range command selects before `LIMIT`: ranks, or a score or member range.
#[derive(Clone, Copy, Debug)]
enum Span<'a> {
    Rank { start: i64, end: i64 },
    Bounds(Bounds<'a>),
}

/// The entries `span` selects, in reply order (descending if `reverse`), after skipping
/// `offset` and taking at most `limit` (all if negative). As Redis 7.0: a negative offset
/// selects nothing.
fn select(
    mem: &impl Mem,
    zset: ZSet,
    span: &Span<'_>,
    reverse: bool,
    offset: i64,
    limit: i64,
) -> Vec<usize> {
    let mut selected = Vec::new();
    let len = zset.len(mem);
    let step = |entry: usize| {
        if reverse {
            backward_of(mem, entry)
        } else {
            zset.next(mem, entry)
        }
    };
    match span {
        Span::Rank { start, end } => {
            let len = len as i64;
            let (mut start, mut end) = (*start, *end);
            if start < 0 {
                start += len;
            }
            if end < 0 {
                end += len;
            }
            start = start.max(0);
            if start > end || start >= len {
                return selected;
            }
            end = end.min(len - 1);
            let first_rank = if reverse { len - start } else { start + 1 };
            let mut entry = zset.by_rank(mem, first_rank as u64);
            for _ in start..=end {
                selected.push(entry);
                entry = step(entry);
            }
        }
        Span::Bounds(bounds) => {
            let Ok(offset) = u64::try_from(offset) else {
                return selected;
            };
            let mut entry = if reverse {
                let path = zset.walk(mem, |mem, e| bounds.within_max(mem, e));
                match offset {
                    0 => path.last(),
                    _ if offset >= path.count() => return selected,
                    _ => zset.by_rank(mem, path.count() - offset),
                }
            } else {
                let path = zset.walk(mem, |mem, e| !bounds.reaches_min(mem, e));
                match offset {
                    0 => zset.next(mem, path.last()),
                    _ if offset >= len - path.count() => return selected,
                    _ => zset.by_rank(mem, path.count() + 1 + offset),
                }
            };
            let mut left = limit;
            while entry != HEAD && left != 0 {
                let inside = if reverse {
                    bounds.reaches_min(mem, entry)
                } else {
                    bounds.within_max(mem, entry)
                };
                if !inside {
                    break;
                }
                selected.push(entry);
                entry = step(entry);
                if left > 0 {
                    left -= 1;
                }
            }
        }
    }
    selected
}

/// Writes `entries` as a range reply: members, or with their scores (a flat array in
/// RESP2, an array of [member, score] pairs in RESP3).
fn write_entries(mem: &impl Mem, out: &mut ReplyWriter<'_>, entries: &[usize], scores: bool) {
    if !scores {
        out.array(entries.len());
        for &entry in entries {
            out.bulk(member_of(mem, entry));
        }
        return;
    }
    let nested = out.proto() == Proto::Resp3;
    out.array(if nested {
        entries.len()
    } else {
        2 * entries.len()
    });
    for &entry in entries {
        if nested {
            out.array(2);
        }
        out.bulk(member_of(mem, entry));
        out.double(score_of(mem, entry));
    }
}

// ---------------------------------------------------------------------------------------
// Writing a set.

/// The sorted set `name` (type-checked by the caller) for a write, created empty if
/// missing (a new key to Redis: `new` is published); the caller adds to a created one.
fn open_or_create(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Result<(Key, ZSet), CmdError> {
    if let Some(key) = ctx.find_for_write(name) {
        return Ok((key, ZSet::of(&key)));
    }
    let created = create_empty(ctx, name)?;
    ctx.notify(EventClass::New, "new", name);
    Ok(created)
}

/// Creates the empty sorted set `name` (which does not exist), telling no one: the caller
/// knows whether Redis would call the key new.
fn create_empty(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Result<(Key, ZSet), CmdError> {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let key = layout.create(txn, name, Kind::ZSet, 0)?;
    let zset = ZSet::create(txn, &layout.alloc)?;
    layout.set_value(txn, &key, zset.root as u64);
    Ok((key, zset))
}

/// Records a change to `key`'s set: its count and version, or its deletion once empty.
/// Returns whether it deleted the key, which the caller publishes (`del`) after its own
/// event, as Redis does.
fn finish(ctx: &mut Ctx<'_, '_>, key: &Key, zset: ZSet) -> bool {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let len = zset.len(txn);
    if len == 0 {
        // The entry as it stands now: its root may have moved since it was read.
        let key = Key {
            head: txn.pod(key.entry()),
            ..*key
        };
        ctx.delete(&key);
        return true;
    }
    layout.set_value_len(txn, key, len);
    layout.touch(txn, key);
    false
}

/// Publishes `event` for a removal from sorted set `name`, then `del` if it emptied the
/// key (`deleted`), in Redis's order.
fn notify_removal(ctx: &mut Ctx<'_, '_>, name: &[u8], event: &str, deleted: bool) {
    ctx.notify(EventClass::ZSet, event, name);
    if deleted {
        ctx.notify(EventClass::Generic, "del", name);
    }
}

/// The sorted set `name`, if it exists; `WRONGTYPE` if it is of another type.
fn read_zset(ctx: &Ctx<'_, '_>, name: &[u8]) -> Result<Option<ZSet>, CmdError> {
    Ok(ctx.find_typed(name, Kind::ZSet)?.map(|key| ZSet::of(&key)))
}

/// `ZADD`'s options.
#[derive(Clone, Copy, Debug, Default)]
struct AddFlags {
    nx: bool,
    xx: bool,
    gt: bool,
    lt: bool,
    ch: bool,
    incr: bool,
}

/// What an add did.
#[derive(Clone, Copy, Debug, Default)]
struct Added {
    added: i64,
    updated: i64,
    /// The score of the last member added or updated (or left at its score by an
    /// increment of zero): what `INCR` answers.
    score: Option<f64>,
}

const NAN_SCORE: CmdError = CmdError::fixed("ERR resulting score is not a number (NaN)");

/// `ZADD` and `ZINCRBY` after their arguments are parsed (Redis's `zsetAdd` per pair).
fn add(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    pairs: &[(f64, &[u8])],
    flags: AddFlags,
) -> Result<Added, CmdError> {
    let existing = read_zset(ctx, name)?;
    if let (true, Some(zset)) = (flags.incr && !flags.nx, existing) {
        // INCR takes one pair, so its only refusal is checked before the first write.
        let (increment, member) = pairs[0];
        let seed = ctx.layout.seed(&ctx.access);
        if let Some(found) = zset.find(&ctx.access, seed, member)
            && (score_of(&ctx.access, found.entry) + increment).is_nan()
        {
            return Err(NAN_SCORE);
        }
    }
    let mut outcome = Added::default();
    if existing.is_none() && flags.xx {
        return Ok(outcome);
    }
    let layout = ctx.layout;
    let (key, mut zset) = open_or_create(ctx, name)?;
    let txn = ctx.txn();
    let seed = layout.seed(txn);
    for &(score, member) in pairs {
        let hash = dict::hash(seed, member);
        match zset.dict().find(txn, member, hash) {
            Some(_) if flags.nx => {}
            Some(found) => {
                let current = score_of(txn, found.entry);
                let new = if flags.incr { current + score } else { score };
                assert!(!new.is_nan(), "a NaN sum was refused before writing");
                if (flags.lt && new >= current) || (flags.gt && new <= current) {
                    continue;
                }
                outcome.score = Some(new);
                if new != current {
                    zset.set_score(txn, found.entry, new);
                    outcome.updated += 1;
                }
            }
            None if flags.xx => {}
            None => {
                zset = zset.insert(txn, &layout, &key, score, member, hash)?;
                outcome.added += 1;
                outcome.score = Some(score);
            }
        }
    }
    if outcome.added + outcome.updated > 0 {
        finish(ctx, &key, zset);
        let event = if flags.incr { "zincr" } else { "zadd" };
        ctx.notify(EventClass::ZSet, event, name);
    }
    Ok(outcome)
}

/// Creates the sorted set `name` (which does not exist, so it is new) holding `pairs`
/// (distinct members).
fn create_with(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    pairs: &[(Vec<u8>, f64)],
) -> Result<(), CmdError> {
    let (key, zset) = open_or_create(ctx, name)?;
    insert_all(ctx, &key, zset, pairs)
}

/// Adds `pairs` (distinct members, none in it) to the sorted set `key`, just created.
fn insert_all(
    ctx: &mut Ctx<'_, '_>,
    key: &Key,
    mut zset: ZSet,
    pairs: &[(Vec<u8>, f64)],
) -> Result<(), CmdError> {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let seed = layout.seed(txn);
    for (member, score) in pairs {
        let hash = dict::hash(seed, member);
        zset = zset.insert(txn, &layout, key, *score, member, hash)?;
    }
    finish(ctx, key, zset);
    Ok(())
}

/// Stores the result of a storing command (`ZUNIONSTORE`, `ZRANGESTORE`, `GEOSEARCHSTORE`,
/// …): `name` becomes a sorted set of `pairs` (distinct members) in place of whatever it
/// held, as Redis's `setKey`, and `event` is published; an empty result deletes `name`
/// instead. Only a key that did not exist is new: an overwritten one is not
/// (`dbOverwrite`).
fn replace_with(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    pairs: &[(Vec<u8>, f64)],
    event: &str,
) -> Result<(), CmdError> {
    if pairs.is_empty() {
        super::keys::delete_destination(ctx, name);
        return Ok(());
    }
    let old = ctx.find_for_write(name);
    if let Some(old) = &old {
        ctx.delete(old);
    }
    let (key, zset) = create_empty(ctx, name)?;
    if old.is_none() {
        ctx.notify(EventClass::New, "new", name);
    }
    insert_all(ctx, &key, zset, pairs)?;
    ctx.notify(EventClass::ZSet, event, name);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Commands.

pub fn zadd(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let mut flags = AddFlags::default();
    let mut first_pair = 2;
    while first_pair < argv.len() {
        let flag = match arg(argv, first_pair).to_ascii_uppercase().as_slice() {
            b"NX" => &mut flags.nx,
            b"XX" => &mut flags.xx,
            b"GT" => &mut flags.gt,
            b"LT" => &mut flags.lt,
            b"CH" => &mut flags.ch,
            b"INCR" => &mut flags.incr,
            _ => break,
        };
        *flag = true;
        first_pair += 1;
    }
    let elements = argv.len() - first_pair;
    if elements == 0 || !elements.is_multiple_of(2) {
        return Err(CmdError::SYNTAX);
    }
    if flags.nx && flags.xx {
        return Err(CmdError::fixed(
            "ERR XX and NX options at the same time are not compatible",
        ));
    }
    if (flags.gt || flags.lt) && flags.nx || flags.gt && flags.lt {
        return Err(CmdError::fixed(
            "ERR GT, LT, and/or NX options at the same time are not compatible",
        ));
    }
    if flags.incr && elements > 2 {
        return Err(CmdError::fixed(
            "ERR INCR option supports a single increment-element pair",
        ));
    }
    let pairs = (first_pair..argv.len())
        .step_by(2)
        .map(|i| num::parse_f64(arg(argv, i)).map(|score| (score, arg(argv, i + 1))))
        .collect::<Option<Vec<_>>>()
        .ok_or(CmdError::NOT_FLOAT)?;
    let outcome = add(ctx, arg(argv, 1), &pairs, flags)?;
    if flags.incr {
        match outcome.score {
            Some(score) => out.double(score),
            None => out.null(),
        }
    } else if flags.ch {
        out.integer(outcome.added + outcome.updated);
    } else {
        out.integer(outcome.added);
    }
    Ok(())
}

pub fn zincrby(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let increment = num::parse_f64(arg(argv, 2)).ok_or(CmdError::NOT_FLOAT)?;
    let flags = AddFlags {
        incr: true,
        ..AddFlags::default()
    };
    let outcome = add(ctx, arg(argv, 1), &[(increment, arg(argv, 3))], flags)?;
    out.double(
        outcome
            .score
            .expect("an increment without options always applies"),
    );
    Ok(())
}

pub fn zrem(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    if read_zset(ctx, name)?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let key = ctx.find_for_write(name).expect("a live key stays live");
    let zset = ZSet::of(&key);
    let layout = ctx.layout;
    let txn = ctx.txn();
    let seed = layout.seed(txn);
    let mut removed = 0;
    for member in argv.iter().skip(2) {
        if let Some(found) = zset.find(txn, seed, member) {
            zset.remove(txn, &layout.alloc, found);
            removed += 1;
            if zset.len(txn) == 0 {
                break;
            }
        }
    }
    if removed > 0 {
        let deleted = finish(ctx, &key, zset);
        notify_removal(ctx, name, "zrem", deleted);
    }
    out.integer(removed);
    Ok(())
}

pub fn zcard(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let len = read_zset(ctx, arg(argv, 1))?.map_or(0, |zset| zset.len(&ctx.access));
    out.integer(len as i64);
    Ok(())
}

pub fn zscore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let seed = ctx.layout.seed(&ctx.access);
    let found =
        read_zset(ctx, arg(argv, 1))?.and_then(|zset| zset.find(&ctx.access, seed, arg(argv, 2)));
    match found {
        Some(found) => out.double(score_of(&ctx.access, found.entry)),
        None => out.null(),
    }
    Ok(())
}

pub fn zmscore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let zset = read_zset(ctx, arg(argv, 1))?;
    let seed = ctx.layout.seed(&ctx.access);
    out.array(argv.len() - 2);
    for member in argv.iter().skip(2) {
        match zset.and_then(|zset| zset.find(&ctx.access, seed, member)) {
            Some(found) => out.double(score_of(&ctx.access, found.entry)),
            None => out.null(),
        }
    }
    Ok(())
}

fn rank_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    reverse: bool,
) -> Result<(), CmdError> {
    let seed = ctx.layout.seed(&ctx.access);
    let mem = &ctx.access;
    let found = read_zset(ctx, arg(argv, 1))?
        .and_then(|zset| Some((zset, zset.find(mem, seed, arg(argv, 2))?)));
    match found {
        Some((zset, found)) => {
            let rank = zset.rank_of(mem, found.entry);
            let len = zset.len(mem);
            out.integer(if reverse { len - rank } else { rank - 1 } as i64);
        }
        None => out.null(),
    }
    Ok(())
}

pub fn zrank(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    rank_generic(ctx, argv, out, false)
}

pub fn zrevrank(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    rank_generic(ctx, argv, out, true)
}

pub fn zcount(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let bounds = parse_score_bounds(arg(argv, 2), arg(argv, 3))?;
    let count = read_zset(ctx, arg(argv, 1))?.map_or(0, |zset| bounds.count(&ctx.access, zset));
    out.integer(count as i64);
    Ok(())
}

pub fn zlexcount(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let bounds = parse_lex_bounds(arg(argv, 2), arg(argv, 3))?;
    let count = read_zset(ctx, arg(argv, 1))?.map_or(0, |zset| bounds.count(&ctx.access, zset));
    out.integer(count as i64);
    Ok(())
}

/// How a range is taken: by rank, score or member.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum RangeBy {
    Rank,
    Score,
    Lex,
}

/// What a range command's name fixes: where its source key is, the kind of range and the
/// direction (`None`: chosen by its options, as `ZRANGE`'s), and whether it stores.
#[derive(Clone, Copy, Debug)]
struct RangeCall {
    key_at: usize,
    by: Option<RangeBy>,
    reverse: Option<bool>,
    store: bool,
}

/// A parsed range request.
#[derive(Debug)]
struct RangeRequest<'a> {
    span: Span<'a>,
    reverse: bool,
    offset: i64,
    limit: i64,
    scores: bool,
}

/// Parses a range command's options and range as Redis 7.0's `zrangeGenericCommand`, in its
/// order of errors.
fn parse_range(argv: &Argv, call: RangeCall) -> Result<RangeRequest<'_>, CmdError> {
    let (mut by, mut reverse) = (call.by, call.reverse);
    let (mut scores, mut offset, mut limit) = (false, 0, -1);
    let mut i = call.key_at + 3;
    while i < argv.len() {
        let option = arg(argv, i);
        let is = |name: &str| option.eq_ignore_ascii_case(name.as_bytes());
        if !call.store && is("WITHSCORES") {
            scores = true;
        } else if is("LIMIT") && argv.len() - i > 2 {
            offset = int_arg(argv, i + 1)?;
            limit = int_arg(argv, i + 2)?;
            i += 2;
        } else if reverse.is_none() && is("REV") {
            reverse = Some(true);
        } else if by.is_none() && is("BYSCORE") {
            by = Some(RangeBy::Score);
        } else if by.is_none() && is("BYLEX") {
            by = Some(RangeBy::Lex);
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    let by = by.unwrap_or(RangeBy::Rank);
    let reverse = reverse.unwrap_or(false);
    if limit != -1 && by == RangeBy::Rank {
        return Err(CmdError::fixed(
            "ERR syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX",
        ));
    }
    if scores && by == RangeBy::Lex {
        return Err(CmdError::fixed(
            "ERR syntax error, WITHSCORES not supported in combination with BYLEX",
        ));
    }
    let (mut min_at, mut max_at) = (call.key_at + 1, call.key_at + 2);
    if reverse && by != RangeBy::Rank {
        // A reversed score or member range is given as max, min.
        std::mem::swap(&mut min_at, &mut max_at);
    }
    let span = match by {
        RangeBy::Rank => Span::Rank {
            start: int_arg(argv, min_at)?,
            end: int_arg(argv, max_at)?,
        },
        RangeBy::Score => Span::Bounds(parse_score_bounds(arg(argv, min_at), arg(argv, max_at))?),
        RangeBy::Lex => Span::Bounds(parse_lex_bounds(arg(argv, min_at), arg(argv, max_at))?),
    };
    Ok(RangeRequest {
        span,
        reverse,
        offset,
        limit,
        scores,
    })
}

fn range_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    by: Option<RangeBy>,
    reverse: Option<bool>,
) -> Result<(), CmdError> {
    let call = RangeCall {
        key_at: 1,
        by,
        reverse,
        store: false,
    };
    let request = parse_range(argv, call)?;
    let Some(zset) = read_zset(ctx, arg(argv, 1))? else {
        out.array(0);
        return Ok(());
    };
    let mem = &ctx.access;
    let entries = select(
        mem,
        zset,
        &request.span,
        request.reverse,
        request.offset,
        request.limit,
    );
    write_entries(mem, out, &entries, request.scores);
    Ok(())
}

pub fn zrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, None, None)
}

pub fn zrevrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, Some(RangeBy::Rank), Some(true))
}

pub fn zrangebyscore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, Some(RangeBy::Score), Some(false))
}

pub fn zrevrangebyscore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, Some(RangeBy::Score), Some(true))
}

pub fn zrangebylex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, Some(RangeBy::Lex), Some(false))
}

pub fn zrevrangebylex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, Some(RangeBy::Lex), Some(true))
}

pub fn zrangestore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let call = RangeCall {
        key_at: 2,
        by: None,
        reverse: None,
        store: true,
    };
    let request = parse_range(argv, call)?;
    let pairs: Vec<(Vec<u8>, f64)> = match read_zset(ctx, arg(argv, 2))? {
        Some(zset) => {
            let mem = &ctx.access;
            select(
                mem,
                zset,
                &request.span,
                request.reverse,
                request.offset,
                request.limit,
            )
            .into_iter()
            .map(|entry| (member_of(mem, entry).to_vec(), score_of(mem, entry)))
            .collect()
        }
        None => Vec::new(),
    };
    // The destination is replaced whatever its type, and deleted by an empty result.
    replace_with(ctx, arg(argv, 1), &pairs, "zrangestore")?;
    out.integer(pairs.len() as i64);
    Ok(())
}

/// Pops up to `count` members from the low end (or, if `max`, the high end) of the sorted
/// set `name`, which exists: each member and its score, in the order they leave. Deletes the
/// key if that empties it.
pub(super) fn pop_members(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    max: bool,
    count: u64,
) -> Vec<(Vec<u8>, f64)> {
    let key = ctx.find_for_write(name).expect("a live key stays live");
    let zset = ZSet::of(&key);
    let layout = ctx.layout;
    let txn = ctx.txn();
    let popped = count.min(zset.len(txn));
    let mut pairs = Vec::with_capacity(popped as usize);
    let mut entry = if max { zset.last(txn) } else { zset.first(txn) };
    let mut run_start = entry;
    for _ in 0..popped {
        pairs.push((member_of(txn, entry).to_vec(), score_of(txn, entry)));
        run_start = entry;
        entry = if max {
            backward_of(txn, entry)
        } else {
            zset.next(txn, entry)
        };
    }
    // The popped entries are one run: from the first for ZPOPMIN, up to the last for ZPOPMAX.
    let first = if max { run_start } else { zset.first(txn) };
    zset.remove_run(txn, &layout.alloc, first, popped);
    let deleted = finish(ctx, &key, zset);
    // The blocking pops (`BZPOPMIN`, …) pop here too, and tell the same, as in Redis.
    notify_removal(ctx, name, if max { "zpopmax" } else { "zpopmin" }, deleted);
    pairs
}

/// Writes (member, score) pairs: nested pairs if `nested`, else one flat array.
fn write_pairs(out: &mut ReplyWriter<'_>, pairs: &[(Vec<u8>, f64)], nested: bool) {
    out.array(if nested { pairs.len() } else { 2 * pairs.len() });
    for (member, score) in pairs {
        if nested {
            out.array(2);
        }
        out.bulk(member);
        out.double(*score);
    }
}

fn pop_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    max: bool,
) -> Result<(), CmdError> {
    if argv.len() > 3 {
        return Err(CmdError::SYNTAX);
    }
    let count = match argv.get(2) {
        Some(text) => Some(num::parse_i64(text).filter(|&count| count >= 0).ok_or(
            CmdError::fixed("ERR value is out of range, must be positive"),
        )?),
        None => None,
    };
    let name = arg(argv, 1);
    if read_zset(ctx, name)?.is_none() || count == Some(0) {
        out.array(0);
        return Ok(());
    }
    let pairs = pop_members(ctx, name, max, count.unwrap_or(1) as u64);
    // RESP3 nests each pair when a count was given, even a count of 1.
    write_pairs(out, &pairs, count.is_some() && out.proto() == Proto::Resp3);
    Ok(())
}

/// Parses argument `i` as a count in 1 ..= `i64::MAX`, as Redis's `getRangeLongFromObject`
/// with the minimum 1, answering `error` for anything else (text that is not a number too).
pub fn positive_arg(argv: &Argv, i: usize, error: &'static str) -> Result<u64, CmdError> {
    num::parse_i64(arg(argv, i))
        .filter(|&n| n >= 1)
        .map(|n| n as u64)
        .ok_or(CmdError::fixed(error))
}

/// The `numkeys key… MIN|MAX|LEFT|RIGHT [COUNT n]` of `ZMPOP` and `LMPOP` (and
/// of `BZMPOP` and `BLMPOP`, after their timeout), the count at `numkeys_at`, in Redis's order
/// (the count, the end word, then the options): the number of keys, whether the end word is
/// the second of `ends` (any case; neither is a syntax error), and the count (1 unless given).
pub fn parse_mpop(
    argv: &Argv,
    numkeys_at: usize,
    ends: [&str; 2],
) -> Result<(usize, bool, u64), CmdError> {
    let keys = positive_arg(argv, numkeys_at, "ERR numkeys should be greater than 0")?;
    let end_at = keys
        .checked_add(numkeys_at as u64 + 1)
        .filter(|&at| at < argv.len() as u64)
        .ok_or(CmdError::SYNTAX)? as usize;
    let end = arg(argv, end_at);
    let second = if end.eq_ignore_ascii_case(ends[0].as_bytes()) {
        false
    } else if end.eq_ignore_ascii_case(ends[1].as_bytes()) {
        true
    } else {
        return Err(CmdError::SYNTAX);
    };
    let mut count = None;
    let mut i = end_at + 1;
    while i < argv.len() {
        if count.is_none() && arg(argv, i).eq_ignore_ascii_case(b"COUNT") && i + 1 < argv.len() {
            count = Some(positive_arg(
                argv,
                i + 1,
                "ERR count should be greater than 0",
            )?);
            i += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    Ok((keys as usize, second, count.unwrap_or(1)))
}

/// `ZMPOP numkeys key… MIN|MAX [COUNT n]`: pops from the first of the keys that holds a
/// sorted set (a key of another type before it is refused), answering the key and its
/// popped pairs, or a null array if none does.
pub fn zmpop(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (keys, max, count) = parse_mpop(argv, 1, ["MIN", "MAX"])?;
    let find = |ctx: &Ctx<'_, '_>, name: &[u8]| ctx.find_typed(name, Kind::ZSet);
    if !pop_first_zset(ctx, argv, 2..2 + keys, max, count, find, out)? {
        out.null_array();
    }
    Ok(())
}

/// The pop of `ZMPOP` and `BZMPOP`: up to `count` members from the low (or, if `max`, the
/// high) end of the first of the keys at `keys` (argument indexes) that `find` finds,
/// answering the key and its popped pairs; false, having written nothing, if none holds a
/// sorted set.
pub(super) fn pop_first_zset(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    keys: std::ops::Range<usize>,
    max: bool,
    count: u64,
    find: impl Fn(&Ctx<'_, '_>, &[u8]) -> Result<Option<Key>, CmdError>,
    out: &mut ReplyWriter<'_>,
) -> Result<bool, CmdError> {
    for i in keys {
        let name = arg(argv, i);
        if find(ctx, name)?.is_none() {
            continue;
        }
        let pairs = pop_members(ctx, name, max, count);
        out.array(2);
        out.bulk(name);
        write_pairs(out, &pairs, true);
        return Ok(true);
    }
    Ok(false)
}

/// `ZRANDMEMBER key [count [WITHSCORES]]`: a positive count asks for distinct members (the
/// whole set at most), a negative one for that many drawn with repeats, each draw uniform
/// (see [`collection::random_entry`]).
pub fn zrandmember(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    if argv.len() == 2 {
        match read_zset(ctx, name)? {
            Some(zset) => {
                let entry = collection::random_entry(ctx, &zset.dict());
                out.bulk(member_of(&ctx.access, entry));
            }
            None => out.null(),
        }
        return Ok(());
    }
    let (count, scores) = collection::random_count_with(argv, b"WITHSCORES")?;
    let Some(zset) = read_zset(ctx, name)? else {
        out.array(0);
        return Ok(());
    };
    let wanted = count.unsigned_abs();
    if count < 0 {
        collection::check_repeats(wanted)?;
    }
    let dict = zset.dict();
    let entries = if wanted == 0 {
        Vec::new()
    } else if count < 0 {
        collection::sample_repeats(ctx, &dict, wanted)
    } else if wanted >= zset.len(&ctx.access) {
        collection::all_entries(&ctx.access, &dict)
    } else {
        collection::sample_distinct(ctx, &dict, wanted)
    };
    write_entries(&ctx.access, out, &entries, scores);
    Ok(())
}

/// Up to `count` members of the sorted set `key` at 0-based ranks from `first` on, in order,
/// or in reverse order if `reverse` (the same window, read from its high end): what `SORT`
/// reads of a sorted set it does not sort.
pub fn members_by_rank(
    mem: &impl Mem,
    key: &Key,
    first: usize,
    count: usize,
    reverse: bool,
) -> Vec<Vec<u8>> {
    let zset = ZSet::of(key);
    let len = zset.len(mem) as usize;
    let count = count.min(len.saturating_sub(first));
    let mut members = Vec::with_capacity(count);
    if count == 0 {
        return members;
    }
    let start_rank = if reverse { first + count } else { first + 1 };
    let mut entry = zset.by_rank(mem, start_rank as u64);
    while members.len() < count {
        members.push(member_of(mem, entry).to_vec());
        entry = if reverse {
            backward_of(mem, entry)
        } else {
            zset.next(mem, entry)
        };
    }
    members
}

pub fn zpopmin(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    pop_generic(ctx, argv, out, false)
}

pub fn zpopmax(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    pop_generic(ctx, argv, out, true)
}

fn remrange_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    by: RangeBy,
) -> Result<(), CmdError> {
    let (min, max) = (arg(argv, 2), arg(argv, 3));
    let span = match by {
        RangeBy::Rank => Span::Rank {
            start: int_arg(argv, 2)?,
            end: int_arg(argv, 3)?,
        },
        RangeBy::Score => Span::Bounds(parse_score_bounds(min, max)?),
        RangeBy::Lex => Span::Bounds(parse_lex_bounds(min, max)?),
    };
    let name = arg(argv, 1);
    let Some(zset) = read_zset(ctx, name)? else {
        out.integer(0);
        return Ok(());
    };
    let entries = select(&ctx.access, zset, &span, false, 0, -1);
    if let Some(&first) = entries.first() {
        let key = ctx.find_for_write(name).expect("a live key stays live");
        let layout = ctx.layout;
        zset.remove_run(ctx.txn(), &layout.alloc, first, entries.len() as u64);
        let deleted = finish(ctx, &key, zset);
        let event = match by {
            RangeBy::Rank => "zremrangebyrank",
            RangeBy::Score => "zremrangebyscore",
            RangeBy::Lex => "zremrangebylex",
        };
        notify_removal(ctx, name, event, deleted);
    }
    out.integer(entries.len() as i64);
    Ok(())
}

pub fn zremrangebyrank(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    remrange_generic(ctx, argv, out, RangeBy::Rank)
}

pub fn zremrangebyscore(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    remrange_generic(ctx, argv, out, RangeBy::Score)
}

pub fn zremrangebylex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    remrange_generic(ctx, argv, out, RangeBy::Lex)
}

/// Parses a `SCAN`-family cursor as Redis 7.0's `parseScanCursorOrReply`: C's `strtoul` on
/// the argument as a C string, which must consume all of it. So a sign is allowed (`-1` is
/// the largest cursor), an empty text is 0, and a leading space or an overflow is refused.
fn parse_cursor(text: &[u8]) -> Option<u64> {
    let text = text.split(|&byte| byte == 0).next().unwrap_or_default();
    let (negative, digits) = match text.split_first() {
        None => return Some(0),
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        Some(_) => (false, text),
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let value = digits.iter().try_fold(0u64, |value, &digit| {
        value.checked_mul(10)?.checked_add(u64::from(digit - b'0'))
    })?;
    Some(if negative {
        value.wrapping_neg()
    } else {
        value
    })
}

pub fn zscan(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let cursor = parse_cursor(arg(argv, 2)).ok_or(CmdError::fixed("ERR invalid cursor"))?;
    let Some(zset) = read_zset(ctx, arg(argv, 1))? else {
        out.array(2);
        out.bulk(b"0");
        out.array(0);
        return Ok(());
    };
    let (mut pattern, mut count): (Option<&[u8]>, i64) = (None, 10);
    let mut i = 3;
    while i < argv.len() {
        let option = arg(argv, i);
        let has_value = i + 1 < argv.len();
        if option.eq_ignore_ascii_case(b"COUNT") && has_value {
            count = int_arg(argv, i + 1)?;
            if count < 1 {
                return Err(CmdError::SYNTAX);
            }
        } else if option.eq_ignore_ascii_case(b"MATCH") && has_value {
            pattern = Some(arg(argv, i + 1)).filter(|pattern| *pattern != b"*");
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 2;
    }
    let mem = &ctx.access;
    let mut found = Vec::new();
    let mut next = cursor;
    // As Redis: buckets until `count` replies (a member and its score are two) or ten
    // times `count` more buckets; MATCH filters what was gathered.
    let mut visits_left = count.saturating_mul(10);
    loop {
        next = zset.dict().scan(mem, next, |entry| found.push(entry));
        if next == 0 || visits_left == 0 || 2 * found.len() as i64 >= count {
            break;
        }
        visits_left -= 1;
    }
    found.retain(|&entry| {
        pattern.is_none_or(|pattern| glob::matches(pattern, member_of(mem, entry)))
    });
    out.array(2);
    out.bulk(next.to_string().as_bytes());
    out.array(2 * found.len());
    let mut text = Vec::new();
    for entry in found {
        out.bulk(member_of(mem, entry));
        // Redis 7.0 sends scores here as strings (`%.17g`), even in RESP3.
        text.clear();
        num::format_double(score_of(mem, entry), &mut text);
        out.bulk(&text);
    }
    Ok(())
}
