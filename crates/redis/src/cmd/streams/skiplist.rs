//! An ordered map from byte strings to values, as a skip list in the segment: what a stream
//! keeps its entries, consumer groups, consumers and pending entries in.
//!
//! Keys order by their bytes (shorter first when one is a prefix, as Redis's radix tree
//! orders its keys); a stream ID is its two numbers big-endian, so byte order is ID order.
//! A node's value has the length given when it was inserted and may be rewritten in place,
//! so a value may hold the header of another list (a group holds its pending entries).
//!
//! # Layout
//!
//! The header, where its owner puts it (a root block, or a value of another list):
//!
//! ```text
//! offset  0  level    u64   levels in use, 1 ..= LEVEL_MAX
//! offset  8  len      u64   nodes in the list
//! offset 16  tail     u64   the last node, 0 when empty
//! offset 24  reserved u64   zero
//! offset 32  the head's forward pointers, LEVEL_MAX x u64
//! ```
//!
//! and every node is one block:
//!
//! ```text
//! offset  0  backward  u64   the previous node, 0 for the first
//! offset  8  key_len   u32
//! offset 12  levels    u32   the node's level count, 1 ..= LEVEL_MAX
//! offset 16  value_len u64
//! offset 24  levels x forward u64
//! then       the key, padded to a multiple of 8 bytes, then the value
//! ```
//!
//! No node lies at offset 0 (the database header does), so 0 means "none", and names the
//! head where a node is expected. A node's level count comes from its key's hash, keyed by
//! the database's seed, as the sorted sets' do: each further level with probability 1/4.
//! Lookups, inserts and removals are O(log n) expected; a walk in either direction is O(1)
//! per node.

use tandem_memory::Txn;

use crate::alloc::{Alloc, OutOfMemory};
use crate::mem::{Mem, set_word};

/// The most levels a node has: 4^16 nodes before walks slow down.
pub const LEVEL_MAX: usize = 16;
/// Bytes of a list's header.
pub const HEADER_BYTES: usize = FORWARDS_AT + 8 * LEVEL_MAX;

const LEN_AT: usize = 8;
const TAIL_AT: usize = 16;
const FORWARDS_AT: usize = 32;

const KEY_LEN_AT: usize = 8;
const LEVELS_AT: usize = 12;
const VALUE_LEN_AT: usize = 16;
const NODE_FORWARDS_AT: usize = 24;

/// The head, where a node is expected.
const HEAD: usize = 0;

/// A list: where its header lies. Holds no state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SkipList {
    at: usize,
}

/// Bytes of a node with a key of `key_len` bytes, `levels` levels and a value of
/// `value_len` bytes.
fn node_len(key_len: usize, levels: usize, value_len: usize) -> usize {
    NODE_FORWARDS_AT + 8 * levels + key_len.next_multiple_of(8) + value_len
}

/// The level count of a node whose key hashes to `hash`.
fn level_for(hash: u64) -> usize {
    1 + (hash.leading_zeros() as usize / 2).min(LEVEL_MAX - 1)
}

impl SkipList {
    pub fn at(at: usize) -> SkipList {
        SkipList { at }
    }

    /// Writes an empty list's header at `at`.
    pub fn init(txn: &mut Txn<'_>, at: usize) -> SkipList {
        let bytes = txn.set_range(at, HEADER_BYTES);
        bytes.fill(0);
        bytes[..8].copy_from_slice(&1u64.to_le_bytes());
        SkipList { at }
    }

    fn level(self, mem: &impl Mem) -> usize {
        mem.word(self.at) as usize
    }

    pub fn len(self, mem: &impl Mem) -> u64 {
        mem.word(self.at + LEN_AT)
    }

    /// The first node (0 when empty).
    pub fn first(self, mem: &impl Mem) -> usize {
        mem.word(self.at + FORWARDS_AT) as usize
    }

    /// The last node (0 when empty).
    pub fn last(self, mem: &impl Mem) -> usize {
        mem.word(self.at + TAIL_AT) as usize
    }

    /// The node after `node` (0 for none).
    pub fn next(self, mem: &impl Mem, node: usize) -> usize {
        mem.word(node + NODE_FORWARDS_AT) as usize
    }

    /// The node before `node` (0 for none).
    pub fn prev(self, mem: &impl Mem, node: usize) -> usize {
        mem.word(node) as usize
    }

    fn levels_of(mem: &impl Mem, node: usize) -> usize {
        mem.pod::<u32>(node + LEVELS_AT) as usize
    }

    /// Segment offset of level `i`'s forward pointer of `node` (or of the head).
    fn forward_at(self, node: usize, i: usize) -> usize {
        if node == HEAD {
            self.at + FORWARDS_AT + 8 * i
        } else {
            node + NODE_FORWARDS_AT + 8 * i
        }
    }

    fn key_at(mem: &impl Mem, node: usize) -> usize {
        node + NODE_FORWARDS_AT + 8 * Self::levels_of(mem, node)
    }

    pub fn key(mem: &impl Mem, node: usize) -> &[u8] {
        let key_len = mem.pod::<u32>(node + KEY_LEN_AT) as usize;
        mem.bytes(Self::key_at(mem, node), key_len)
    }

    /// Segment offset of `node`'s value.
    pub fn value_at(mem: &impl Mem, node: usize) -> usize {
        let key_len = mem.pod::<u32>(node + KEY_LEN_AT) as usize;
        Self::key_at(mem, node) + key_len.next_multiple_of(8)
    }

    pub fn value_len(mem: &impl Mem, node: usize) -> usize {
        mem.word(node + VALUE_LEN_AT) as usize
    }

    pub fn value(mem: &impl Mem, node: usize) -> &[u8] {
        mem.bytes(Self::value_at(mem, node), Self::value_len(mem, node))
    }

    /// The bytes `node`'s block was allocated for.
    pub fn block_len(mem: &impl Mem, node: usize) -> usize {
        let key_len = mem.pod::<u32>(node + KEY_LEN_AT) as usize;
        node_len(
            key_len,
            Self::levels_of(mem, node),
            Self::value_len(mem, node),
        )
    }

    /// The last node at each level in use whose key satisfies `before` (which holds for a
    /// prefix of the order), the head where none does.
    fn walk<M: Mem>(self, mem: &M, before: impl Fn(&[u8]) -> bool) -> [usize; LEVEL_MAX] {
        let mut path = [HEAD; LEVEL_MAX];
        let mut node = HEAD;
        for i in (0..self.level(mem)).rev() {
            loop {
                let forward = mem.word(self.forward_at(node, i)) as usize;
                if forward == 0 || !before(Self::key(mem, forward)) {
                    break;
                }
                node = forward;
            }
            path[i] = node;
        }
        path
    }

    /// The first node whose key is at least `key` (0 for none).
    pub fn seek_ge(self, mem: &impl Mem, key: &[u8]) -> usize {
        let path = self.walk(mem, |k| k < key);
        mem.word(self.forward_at(path[0], 0)) as usize
    }

    /// The last node whose key is at most `key` (0 for none).
    pub fn seek_le(self, mem: &impl Mem, key: &[u8]) -> usize {
        self.walk(mem, |k| k <= key)[0]
    }

    /// The node of `key`, if the list holds it.
    pub fn find(self, mem: &impl Mem, key: &[u8]) -> Option<usize> {
        let node = self.seek_ge(mem, key);
        (node != 0 && Self::key(mem, node) == key).then_some(node)
    }

    /// Inserts `key` (not in the list) with `value`, whose level count comes from `hash`
    /// (the key's hash under the database's seed). Returns the new node.
    pub fn insert(
        self,
        txn: &mut Txn<'_>,
        alloc: &Alloc,
        key: &[u8],
        hash: u64,
        value: &[u8],
    ) -> Result<usize, OutOfMemory> {
        let levels = level_for(hash);
        let path = self.walk(txn, |k| k < key);
        let after = txn.word(self.forward_at(path[0], 0)) as usize;
        assert!(
            after == 0 || Self::key(txn, after) != key,
            "a key inserted twice"
        );
        let mut forwards = [0u64; LEVEL_MAX];
        for (i, &before) in path.iter().enumerate().take(levels) {
            forwards[i] = txn.word(self.forward_at(before, i));
        }
        let len = node_len(key.len(), levels, value.len());
        let node = alloc.alloc(txn, len)?;
        let key_at = NODE_FORWARDS_AT + 8 * levels;
        let bytes = txn.set_range(node, len);
        bytes.fill(0);
        bytes[..8].copy_from_slice(&(path[0] as u64).to_le_bytes());
        let key_len = u32::try_from(key.len()).expect("a key is shorter than 4 GiB");
        bytes[KEY_LEN_AT..LEVELS_AT].copy_from_slice(&key_len.to_le_bytes());
        bytes[LEVELS_AT..VALUE_LEN_AT].copy_from_slice(&(levels as u32).to_le_bytes());
        bytes[VALUE_LEN_AT..NODE_FORWARDS_AT].copy_from_slice(&(value.len() as u64).to_le_bytes());
        for (i, &forward) in forwards.iter().enumerate().take(levels) {
            bytes_forward(bytes, i, forward);
        }
        bytes[key_at..key_at + key.len()].copy_from_slice(key);
        let value_at = key_at + key.len().next_multiple_of(8);
        bytes[value_at..].copy_from_slice(value);
        for (i, &before) in path.iter().enumerate().take(levels) {
            set_word(txn, self.forward_at(before, i), node as u64);
        }
        if levels > self.level(txn) {
            set_word(txn, self.at, levels as u64);
        }
        if after == 0 {
            set_word(txn, self.at + TAIL_AT, node as u64);
        } else {
            set_word(txn, after, node as u64);
        }
        set_word(txn, self.at + LEN_AT, self.len(txn) + 1);
        Ok(node)
    }

    /// Unlinks `node` (a node of the list) and frees its block.
    pub fn remove(self, txn: &mut Txn<'_>, alloc: &Alloc, node: usize) {
        let key = Self::key(txn, node).to_vec();
        let path = self.walk(txn, |k| k < key.as_slice());
        let levels = Self::levels_of(txn, node);
        for (i, &before) in path.iter().enumerate().take(levels) {
            let at = self.forward_at(before, i);
            assert_eq!(txn.word(at) as usize, node, "a removed node is in the list");
            let forward = txn.word(node + NODE_FORWARDS_AT + 8 * i);
            set_word(txn, at, forward);
        }
        let (prev, next) = (self.prev(txn, node), self.next(txn, node));
        if next == 0 {
            set_word(txn, self.at + TAIL_AT, prev as u64);
        } else {
            set_word(txn, next, prev as u64);
        }
        let mut level = self.level(txn);
        while level > 1 && txn.word(self.forward_at(HEAD, level - 1)) == 0 {
            level -= 1;
        }
        if level != self.level(txn) {
            set_word(txn, self.at, level as u64);
        }
        set_word(txn, self.at + LEN_AT, self.len(txn) - 1);
        let block_len = Self::block_len(txn, node);
        alloc.free(txn, node, block_len);
    }

    /// Every node, first to last.
    pub fn nodes(self, mem: &impl Mem) -> Vec<usize> {
        let mut nodes = Vec::new();
        let mut node = self.first(mem);
        while node != 0 {
            nodes.push(node);
            node = self.next(mem, node);
        }
        nodes
    }

    /// Frees every node, after `each` has seen it (to free what its value holds). The
    /// header is left as it was: its owner frees it.
    pub fn free_all(
        self,
        txn: &mut Txn<'_>,
        alloc: &Alloc,
        mut each: impl FnMut(&mut Txn<'_>, usize),
    ) {
        let mut node = self.first(txn);
        while node != 0 {
            let next = self.next(txn, node);
            each(txn, node);
            let block_len = Self::block_len(txn, node);
            alloc.free(txn, node, block_len);
            node = next;
        }
    }

    /// Checks the list's order, backward pointers, tail, length and levels, for the
    /// model's whole check.
    pub fn verify(self, mem: &impl Mem) -> Result<(), String> {
        let level = self.level(mem);
        if !(1..=LEVEL_MAX).contains(&level) {
            return Err(format!("a skip list uses {level} levels"));
        }
        let mut prev = 0;
        let mut count = 0u64;
        let mut node = self.first(mem);
        while node != 0 {
            if self.prev(mem, node) != prev {
                return Err("a backward pointer skips a node".into());
            }
            if prev != 0 && Self::key(mem, prev) >= Self::key(mem, node) {
                return Err("two keys out of order".into());
            }
            if Self::levels_of(mem, node) > level {
                return Err("a node is taller than the levels in use".into());
            }
            count += 1;
            prev = node;
            node = self.next(mem, node);
        }
        if self.last(mem) != prev {
            return Err("the tail is not the last node".into());
        }
        if count != self.len(mem) {
            return Err(format!(
                "a skip list counts {} nodes, holds {count}",
                self.len(mem)
            ));
        }
        Ok(())
    }
}

/// Writes forward pointer `i` into a node's bytes being built.
fn bytes_forward(bytes: &mut [u8], i: usize, forward: u64) {
    let at = NODE_FORWARDS_AT + 8 * i;
    bytes[at..at + 8].copy_from_slice(&forward.to_le_bytes());
}
