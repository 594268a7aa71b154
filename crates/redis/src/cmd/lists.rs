//! List commands (t_list.c): pushes and pops at either end, `LLEN`, `LRANGE`, `LINDEX`,
//! `LSET`, `LREM`, `LTRIM`, `LINSERT`, `LPOS`, `LMOVE` and `RPOPLPUSH`. The blocking
//! commands (`BLPOP`, …) are in [`super::blocking`], on the pops here.
//!
//! # Encoding
//!
//! Like Redis's quicklist, a list is a doubly linked list of *nodes*, each one allocator block
//! holding a packed run of elements, so that a push or a pop at either end touches one node
//! and a few header words, whatever the list's length.
//!
//! ```text
//! root (KeyHead::value, 24 bytes)
//!   head   u64   segment offset of the first node
//!   tail   u64   segment offset of the last node
//!   nodes  u64   nodes in the list
//! node (NODE_HEAD_BYTES + cap bytes)
//!   prev   u64   the previous node; 0 for the first
//!   next   u64   the next node; 0 for the last
//!   count  u32   elements in the node (never 0: an emptied node is freed)
//!   end    u32   payload offset one past the last entry
//!   start  u32   payload offset of the first entry
//!   cap    u32   payload bytes (the node was allocated for NODE_HEAD_BYTES + cap)
//!   payload      [start, end) holds the entries, the rest is free room
//! entry
//!   len    varint (LEB128, 1 byte below 128)
//!   bytes  [u8; len]
//!   len    the same varint bytes in reverse order, read backwards from the entry's end
//! ```
//!
//! The key entry's `value_len` is the element count. The root holds no count of its own, so a
//! push that fits its end node writes the entry, one header word of the node and the key's
//! length and version: an `RPUSH` of a 10-byte element onto a long list is 36 bytes of redo
//! data in four runs (49 bytes as the log encodes it), not a node's worth.
//!
//! The entries float in the middle of their node: a push at the head writes before `start`,
//! one at the tail after `end`, and a pop moves `start` or `end`. An end node without room
//! either slides its run to the far side (when that frees half the node), grows into a block
//! twice as large (up to [`NODE_PAYLOAD_MAX`], 8 KiB with its header, Redis's default
//! `list-max-listpack-size -2`), or gets a new neighbour. The first node of a list starts
//! small and grows; a node next to a full one is allocated full at once, since the list is
//! long. An element whose entry is larger than a node gets a node of its own, sized to it.
//!
//! `LINDEX`, `LSET`, `LRANGE` and `LTRIM` walk the nodes from the nearer end using their
//! counts, then the entries of one node. `LSET`, `LINSERT` and `LREM` rewrite a node: the new
//! run is placed where it differs least from the old bytes (aligned with the run's old start
//! or its old end) and only the differing span is declared; a run that no longer fits its
//! node moves to a larger block, one that outgrows a node is split into several, and one that
//! shrinks below a quarter of its node moves to a smaller block. Emptied nodes are freed, and
//! a list left empty is deleted with its key.

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use super::{CmdError, Command, Ctx, Read, Write, arg, arity_error, data, int_arg};
use crate::alloc::{Alloc, OutOfMemory};
use crate::db::{Key, Kind, Layout};
use crate::mem::{Mem, set_word};
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("LINDEX", 3, Read, (1, 1, 1), false, lindex),
    data("LINSERT", 5, Write, (1, 1, 1), true, linsert),
    data("LLEN", 2, Read, (1, 1, 1), false, llen),
    // Its keys follow a count: Redis 7.0 names no fixed key range (movablekeys).
    data("LMPOP", -4, Write, (0, 0, 0), false, lmpop),
    data("LMOVE", 5, Write, (1, 2, 1), true, lmove),
    data("LPOP", -2, Write, (1, 1, 1), false, lpop),
    data("LPOS", -3, Read, (1, 1, 1), false, lpos),
    data("LPUSH", -3, Write, (1, 1, 1), true, lpush),
    data("LPUSHX", -3, Write, (1, 1, 1), true, lpushx),
    data("LRANGE", 4, Read, (1, 1, 1), false, lrange),
    data("LREM", 4, Write, (1, 1, 1), false, lrem),
    data("LSET", 4, Write, (1, 1, 1), true, lset),
    data("LTRIM", 4, Write, (1, 1, 1), false, ltrim),
    data("RPOP", -2, Write, (1, 1, 1), false, rpop),
    data("RPOPLPUSH", 3, Write, (1, 2, 1), true, rpoplpush),
    data("RPUSH", -3, Write, (1, 1, 1), true, rpush),
    data("RPUSHX", -3, Write, (1, 1, 1), true, rpushx),
];

/// A list's root block, as it lies in the segment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Root {
    head: u64,
    tail: u64,
    nodes: u64,
}

const ROOT_BYTES: usize = size_of::<Root>();
const ROOT_HEAD_AT: usize = 0;
const ROOT_TAIL_AT: usize = 8;
const ROOT_NODES_AT: usize = 16;

/// A node's header, as it lies in the segment. `count` and `end` share a word, so an `RPUSH`
/// that fits changes one header word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct NodeHead {
    prev: u64,
    next: u64,
    count: u32,
    end: u32,
    start: u32,
    cap: u32,
}

const NODE_HEAD_BYTES: usize = size_of::<NodeHead>();
const _: () = assert!(NODE_HEAD_BYTES == 32);
const NODE_PREV_AT: usize = 0;
const NODE_NEXT_AT: usize = 8;
/// `count`, `end` and `start`, declared together when a node's run changes.
const NODE_BOUNDS_AT: usize = 16;

/// The payload of a full node: with its header, an 8 KiB block (an allocator class).
const NODE_PAYLOAD_MAX: usize = 8192 - NODE_HEAD_BYTES;
/// The smallest node block: room for a few small elements at once.
const NODE_BLOCK_MIN: usize = 64;

/// Which end of a list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum End {
    Head,
    Tail,
}

impl End {
    /// `LEFT` or `RIGHT` (any case), as `LMOVE` names an end.
    pub(super) fn parse(word: &[u8]) -> Result<End, CmdError> {
        if word.eq_ignore_ascii_case(b"left") {
            Ok(End::Head)
        } else if word.eq_ignore_ascii_case(b"right") {
            Ok(End::Tail)
        } else {
            Err(CmdError::SYNTAX)
        }
    }

    /// The event a push at this end publishes.
    fn push_event(self) -> &'static str {
        match self {
            End::Head => "lpush",
            End::Tail => "rpush",
        }
    }

    /// The event a pop from this end publishes.
    fn pop_event(self) -> &'static str {
        match self {
            End::Head => "lpop",
            End::Tail => "rpop",
        }
    }
}

// ---------------------------------------------------------------------------------------
// Entries.

/// Bytes of the varint of `n`.
fn varint_len(n: usize) -> usize {
    match n {
        0..0x80 => 1,
        0x80..0x4000 => 2,
        0x4000..0x20_0000 => 3,
        0x20_0000..0x1000_0000 => 4,
        _ => 5,
    }
}

/// Bytes of the entry of an element of `len` bytes.
fn entry_len(len: usize) -> usize {
    len + 2 * varint_len(len)
}

/// Writes the entry of `element` into `out`, which is exactly [`entry_len`] bytes.
fn encode_entry(element: &[u8], out: &mut [u8]) {
    debug_assert_eq!(out.len(), entry_len(element.len()));
    let width = varint_len(element.len());
    let last = out.len() - 1;
    let mut n = element.len();
    for i in 0..width {
        let mut byte = (n & 0x7f) as u8;
        n >>= 7;
        if i + 1 < width {
            byte |= 0x80;
        }
        out[i] = byte;
        out[last - i] = byte;
    }
    out[width..width + element.len()].copy_from_slice(element);
}

/// The element of the entry at `pos` of `run`, and where the next entry starts.
fn entry_at(run: &[u8], pos: usize) -> (&[u8], usize) {
    let mut len = 0usize;
    let mut width = 0;
    loop {
        let byte = run[pos + width];
        len |= usize::from(byte & 0x7f) << (7 * width);
        width += 1;
        if byte & 0x80 == 0 {
            break;
        }
        assert!(width < 5, "a list entry's length is malformed");
    }
    let bytes = pos + width;
    (&run[bytes..bytes + len], bytes + len + width)
}

/// The element of the entry that ends at `end` of `run`, and where that entry starts.
fn entry_before(run: &[u8], end: usize) -> (&[u8], usize) {
    let mut len = 0usize;
    let mut width = 0;
    loop {
        let byte = run[end - 1 - width];
        len |= usize::from(byte & 0x7f) << (7 * width);
        width += 1;
        if byte & 0x80 == 0 {
            break;
        }
        assert!(width < 5, "a list entry's length is malformed");
    }
    let bytes = end - width - len;
    (&run[bytes..bytes + len], bytes - width)
}

/// Where each entry of `run` starts, and the run's end last.
fn entry_bounds(run: &[u8]) -> Vec<usize> {
    let mut bounds = vec![0];
    let mut pos = 0;
    while pos < run.len() {
        pos = entry_at(run, pos).1;
        bounds.push(pos);
    }
    bounds
}

// ---------------------------------------------------------------------------------------
// Reading.

/// A node and its header.
#[derive(Clone, Copy, Debug)]
struct Node {
    at: usize,
    head: NodeHead,
}

impl Node {
    fn load(mem: &impl Mem, at: usize) -> Node {
        assert_ne!(at, 0, "a list node at offset 0");
        Node {
            at,
            head: mem.pod(at),
        }
    }

    fn payload(&self) -> usize {
        self.at + NODE_HEAD_BYTES
    }

    fn count(&self) -> usize {
        self.head.count as usize
    }

    fn start(&self) -> usize {
        self.head.start as usize
    }

    fn end(&self) -> usize {
        self.head.end as usize
    }

    fn cap(&self) -> usize {
        self.head.cap as usize
    }

    fn used(&self) -> usize {
        self.end() - self.start()
    }

    /// Bytes the node's block was allocated for.
    fn block_len(&self) -> usize {
        NODE_HEAD_BYTES + self.cap()
    }

    /// Free payload bytes on the `end` side of the run.
    fn room(&self, end: End) -> usize {
        match end {
            End::Head => self.start(),
            End::Tail => self.cap() - self.end(),
        }
    }

    /// The node's packed entries.
    fn run<'m>(&self, mem: &'m impl Mem) -> &'m [u8] {
        mem.bytes(self.payload() + self.start(), self.used())
    }
}

/// The payload a node should get to hold `want` bytes: the whole of its allocator class, at
/// least [`NODE_BLOCK_MIN`] bytes with the header and at most [`NODE_PAYLOAD_MAX`].
fn node_cap_for(want: usize) -> usize {
    if want >= NODE_PAYLOAD_MAX {
        return NODE_PAYLOAD_MAX;
    }
    let block = Alloc::block_len_for(NODE_HEAD_BYTES + want).expect("a node fits a class");
    block.clamp(NODE_BLOCK_MIN, NODE_PAYLOAD_MAX + NODE_HEAD_BYTES) - NODE_HEAD_BYTES
}

/// The payload of a node made for a run of `len` bytes: a node's worth of entries gets a
/// class that fits it, a single larger entry a node of exactly its size.
fn cap_for_run(len: usize) -> usize {
    if len > NODE_PAYLOAD_MAX {
        len
    } else {
        node_cap_for(len)
    }
}

fn root_of(mem: &impl Mem, key: &Key) -> Root {
    mem.pod(key.head.value as usize)
}

/// The elements of a list from a position on, towards the tail.
struct Forward<'m, M: Mem> {
    mem: &'m M,
    node: Node,
    run: &'m [u8],
    pos: usize,
}

impl<'m, M: Mem> Forward<'m, M> {
    fn new(mem: &'m M, node: Node, pos: usize) -> Self {
        Forward {
            mem,
            node,
            run: node.run(mem),
            pos,
        }
    }
}

impl<'m, M: Mem> Iterator for Forward<'m, M> {
    type Item = &'m [u8];

    fn next(&mut self) -> Option<&'m [u8]> {
        while self.pos == self.run.len() {
            if self.node.head.next == 0 {
                return None;
            }
            self.node = Node::load(self.mem, self.node.head.next as usize);
            self.run = self.node.run(self.mem);
            self.pos = 0;
        }
        let (element, next) = entry_at(self.run, self.pos);
        self.pos = next;
        Some(element)
    }
}

/// The elements of a list from a position on, towards the head.
struct Backward<'m, M: Mem> {
    mem: &'m M,
    node: Node,
    run: &'m [u8],
    /// The end of the next entry to visit, in `run`.
    end: usize,
}

impl<'m, M: Mem> Backward<'m, M> {
    fn new(mem: &'m M, node: Node, end: usize) -> Self {
        Backward {
            mem,
            node,
            run: node.run(mem),
            end,
        }
    }
}

impl<'m, M: Mem> Iterator for Backward<'m, M> {
    type Item = &'m [u8];

    fn next(&mut self) -> Option<&'m [u8]> {
        while self.end == 0 {
            if self.node.head.prev == 0 {
                return None;
            }
            self.node = Node::load(self.mem, self.node.head.prev as usize);
            self.run = self.node.run(self.mem);
            self.end = self.run.len();
        }
        let (element, start) = entry_before(self.run, self.end);
        self.end = start;
        Some(element)
    }
}

/// Where element `index` (< `len`, from the head) of a list lies: its node and where its
/// entry starts and ends in the node's run. Walks the nodes from the nearer end, then the
/// node's entries from its nearer end.
fn seek(mem: &impl Mem, root: Root, len: usize, index: usize) -> (Node, usize, usize) {
    assert!(index < len, "element {index} of a list of {len}");
    let (node, local) = if index < len / 2 {
        let mut node = Node::load(mem, root.head as usize);
        let mut left = index;
        while left >= node.count() {
            left -= node.count();
            node = Node::load(mem, node.head.next as usize);
        }
        (node, left)
    } else {
        let mut node = Node::load(mem, root.tail as usize);
        let mut left = len - 1 - index;
        while left >= node.count() {
            left -= node.count();
            node = Node::load(mem, node.head.prev as usize);
        }
        (node, node.count() - 1 - left)
    };
    let run = node.run(mem);
    if local < node.count() / 2 {
        let mut pos = 0;
        for _ in 0..local {
            pos = entry_at(run, pos).1;
        }
        (node, pos, entry_at(run, pos).1)
    } else {
        let mut end = run.len();
        for _ in 0..node.count() - 1 - local {
            end = entry_before(run, end).1;
        }
        (node, entry_before(run, end).1, end)
    }
}

/// The elements of a list from `index` on, towards the tail.
fn forward_from<'m, M: Mem>(mem: &'m M, key: &Key, index: usize) -> Forward<'m, M> {
    let root = root_of(mem, key);
    let (node, pos, _) = seek(mem, root, key.head.value_len as usize, index);
    Forward::new(mem, node, pos)
}

/// The elements of a list from the tail, towards the head.
fn backward_from_tail<'m, M: Mem>(mem: &'m M, key: &Key) -> Backward<'m, M> {
    let root = root_of(mem, key);
    let node = Node::load(mem, root.tail as usize);
    Backward::new(mem, node, node.used())
}

// ---------------------------------------------------------------------------------------
// Writing.

/// A list being changed in a txn.
struct ListMut<'a, 't> {
    txn: &'a mut Txn<'t>,
    alloc: Alloc,
    root_at: usize,
}

impl<'a, 't> ListMut<'a, 't> {
    fn new(ctx: &'a mut Ctx<'_, 't>, key: &Key) -> Self {
        let alloc = ctx.layout.alloc;
        ListMut {
            txn: ctx.txn(),
            alloc,
            root_at: key.head.value as usize,
        }
    }

    fn root(&self) -> Root {
        self.txn.pod(self.root_at)
    }

    fn node(&self, at: usize) -> Node {
        Node::load(&*self.txn, at)
    }

    fn end_node(&self, end: End) -> usize {
        let root = self.root();
        match end {
            End::Head => root.head as usize,
            End::Tail => root.tail as usize,
        }
    }

    fn set_bounds(&mut self, node: usize, count: usize, start: usize, end: usize) {
        let bytes = self.txn.set_range(node + NODE_BOUNDS_AT, 12);
        bytes[0..4].copy_from_slice(&(count as u32).to_le_bytes());
        bytes[4..8].copy_from_slice(&(end as u32).to_le_bytes());
        bytes[8..12].copy_from_slice(&(start as u32).to_le_bytes());
    }

    /// Makes `prev` (or the root, if 0) point forward to `node`.
    fn point_next(&mut self, prev: usize, node: usize) {
        match prev {
            0 => set_word(self.txn, self.root_at + ROOT_HEAD_AT, node as u64),
            prev => set_word(self.txn, prev + NODE_NEXT_AT, node as u64),
        }
    }

    /// Makes `next` (or the root, if 0) point back to `node`.
    fn point_prev(&mut self, next: usize, node: usize) {
        match next {
            0 => set_word(self.txn, self.root_at + ROOT_TAIL_AT, node as u64),
            next => set_word(self.txn, next + NODE_PREV_AT, node as u64),
        }
    }

    fn add_nodes(&mut self, delta: i64) {
        let nodes = self.root().nodes.checked_add_signed(delta);
        let nodes = nodes.expect("a list's node count stays in range");
        set_word(self.txn, self.root_at + ROOT_NODES_AT, nodes);
    }

    /// Allocates a node of `cap` payload bytes between `prev` and `next` (0: the list's
    /// end), with its header written and linked in. Its run's bytes are the caller's.
    fn insert_node(
        &mut self,
        prev: usize,
        next: usize,
        cap: usize,
        bounds: (usize, usize, usize),
    ) -> Result<usize, OutOfMemory> {
        let (count, start, end) = bounds;
        let at = self.alloc.alloc(self.txn, NODE_HEAD_BYTES + cap)?;
        *self.txn.set_pod::<NodeHead>(at) = NodeHead {
            prev: prev as u64,
            next: next as u64,
            count: count as u32,
            end: end as u32,
            start: start as u32,
            cap: u32::try_from(cap).expect("a node is shorter than 4 GiB"),
        };
        self.point_next(prev, at);
        self.point_prev(next, at);
        self.add_nodes(1);
        Ok(at)
    }

    /// Unlinks `node` and frees its block.
    fn unlink_free(&mut self, node: Node) {
        let (prev, next) = (node.head.prev as usize, node.head.next as usize);
        self.point_next(prev, next);
        self.point_prev(next, prev);
        self.add_nodes(-1);
        self.alloc.free(self.txn, node.at, node.block_len());
    }

    /// Moves `node`'s run (`count` entries, the bytes `run`) into a new block of `cap` bytes
    /// at payload offset `start`, in its place in the list, and frees the old block. Returns
    /// the new node.
    fn move_node(
        &mut self,
        node: Node,
        cap: usize,
        start: usize,
        count: usize,
        run: &[u8],
    ) -> Result<usize, OutOfMemory> {
        let at = self.alloc.alloc(self.txn, NODE_HEAD_BYTES + cap)?;
        *self.txn.set_pod::<NodeHead>(at) = NodeHead {
            prev: node.head.prev,
            next: node.head.next,
            count: count as u32,
            end: (start + run.len()) as u32,
            start: start as u32,
            cap: u32::try_from(cap).expect("a node is shorter than 4 GiB"),
        };
        self.txn
            .set_range(at + NODE_HEAD_BYTES + start, run.len())
            .copy_from_slice(run);
        self.point_next(node.head.prev as usize, at);
        self.point_prev(node.head.next as usize, at);
        self.alloc.free(self.txn, node.at, node.block_len());
        Ok(at)
    }

    /// Pushes `elements` one after another at `end`, as `LPUSH`/`RPUSH` do (each pushed at
    /// the head becomes the new head). Writes each node's new entries as one range and its
    /// bounds once.
    fn push_all(&mut self, elements: &[&[u8]], end: End) -> Result<(), OutOfMemory> {
        let mut remaining: usize = elements.iter().map(|e| entry_len(e.len())).sum();
        let mut i = 0;
        while i < elements.len() {
            let size = entry_len(elements[i].len());
            let node = self.room_for(end, size, remaining)?;
            let node = self.node(node);
            let room = node.room(end);
            let (mut take, mut bytes) = (0, 0);
            while let Some(element) = elements.get(i + take) {
                let size = entry_len(element.len());
                if bytes + size > room {
                    break;
                }
                bytes += size;
                take += 1;
            }
            let batch = &elements[i..i + take];
            let (from, start, stop) = match end {
                End::Tail => (node.end(), node.start(), node.end() + bytes),
                End::Head => (node.start() - bytes, node.start() - bytes, node.end()),
            };
            let out = self.txn.set_range(node.payload() + from, bytes);
            let mut pos = 0;
            let mut put = |element: &[u8]| {
                let size = entry_len(element.len());
                encode_entry(element, &mut out[pos..pos + size]);
                pos += size;
            };
            match end {
                End::Tail => batch.iter().for_each(|e| put(e)),
                End::Head => batch.iter().rev().for_each(|e| put(e)),
            }
            self.set_bounds(node.at, node.count() + take, start, stop);
            remaining -= bytes;
            i += take;
        }
        Ok(())
    }

    /// The node at `end` with room for an entry of `size` bytes on that side, made if need
    /// be; `remaining` is the bytes of every entry still to push (this one included), so a
    /// node made or grown fits them if it can.
    fn room_for(&mut self, end: End, size: usize, remaining: usize) -> Result<usize, OutOfMemory> {
        let at = self.end_node(end);
        let place = |cap: usize| match end {
            End::Tail => (0, 0, 0),
            End::Head => (0, cap, cap),
        };
        if at == 0 {
            let cap = if size > NODE_PAYLOAD_MAX {
                size
            } else {
                node_cap_for(remaining)
            };
            return self.insert_node(0, 0, cap, place(cap));
        }
        let node = self.node(at);
        if node.room(end) >= size {
            return Ok(at);
        }
        let (used, cap) = (node.used(), node.cap());
        if used + size <= cap / 2 {
            // Slide the run to the far side: that leaves half the node for pushes.
            let start = match end {
                End::Tail => 0,
                End::Head => cap - used,
            };
            let run = node.run(&*self.txn).to_vec();
            let span = start.min(node.start())..(start + used).max(node.end());
            let bytes = self.txn.set_range(node.payload() + span.start, span.len());
            let from = start - span.start;
            bytes[from..from + used].copy_from_slice(&run);
            self.set_bounds(at, node.count(), start, start + used);
            return Ok(at);
        }
        if cap < NODE_PAYLOAD_MAX && used + size <= NODE_PAYLOAD_MAX {
            // Grow, at least doubling, so a run of pushes copies a node a few times only.
            let new_cap = node_cap_for((used + remaining).max(2 * (used + size)));
            let start = match end {
                End::Tail => 0,
                End::Head => new_cap - used,
            };
            let run = node.run(&*self.txn).to_vec();
            return self.move_node(node, new_cap, start, node.count(), &run);
        }
        // A new end node: full at once beside a full node (the list is long), else small.
        let new_cap = if size > NODE_PAYLOAD_MAX {
            size
        } else if cap == NODE_PAYLOAD_MAX {
            NODE_PAYLOAD_MAX
        } else {
            node_cap_for(remaining.min(NODE_PAYLOAD_MAX))
        };
        let (prev, next) = match end {
            End::Head => (0, at),
            End::Tail => (at, 0),
        };
        self.insert_node(prev, next, new_cap, place(new_cap))
    }

    /// Removes `n` elements from `end`, freeing the nodes it empties, and pushes them to
    /// `out` (if given) in the order they leave the list. The caller keeps the count.
    fn remove_end(&mut self, end: End, n: usize, mut out: Option<&mut Vec<Vec<u8>>>) {
        let mut left = n;
        while left > 0 {
            let node = self.node(self.end_node(end));
            let run = node.run(&*self.txn);
            if node.count() <= left {
                if let Some(out) = out.as_deref_mut() {
                    match end {
                        End::Head => {
                            out.extend(
                                Forward::new(&*self.txn, node, 0)
                                    .take(node.count())
                                    .map(<[u8]>::to_vec),
                            );
                        }
                        End::Tail => {
                            out.extend(
                                Backward::new(&*self.txn, node, run.len())
                                    .take(node.count())
                                    .map(<[u8]>::to_vec),
                            );
                        }
                    }
                }
                left -= node.count();
                self.unlink_free(node);
                continue;
            }
            let (start, stop) = match end {
                End::Head => {
                    let mut pos = 0;
                    for _ in 0..left {
                        let (element, next) = entry_at(run, pos);
                        if let Some(out) = out.as_deref_mut() {
                            out.push(element.to_vec());
                        }
                        pos = next;
                    }
                    (node.start() + pos, node.end())
                }
                End::Tail => {
                    let mut stop = run.len();
                    for _ in 0..left {
                        let (element, start) = entry_before(run, stop);
                        if let Some(out) = out.as_deref_mut() {
                            out.push(element.to_vec());
                        }
                        stop = start;
                    }
                    (node.start(), node.start() + stop)
                }
            };
            self.set_bounds(node.at, node.count() - left, start, stop);
            left = 0;
        }
    }

    /// Replaces `node`'s run with `run`, of `count` entries: frees the node if it is empty,
    /// writes in place if the run fits (declaring only the bytes that differ), moves it to a
    /// block of a better size, or splits a run larger than a node into several nodes.
    fn rewrite(&mut self, node: Node, run: &[u8], count: usize) -> Result<(), OutOfMemory> {
        if count == 0 {
            self.unlink_free(node);
            return Ok(());
        }
        if run.len() > NODE_PAYLOAD_MAX && count > 1 {
            let pieces = split_run(run);
            let (first, first_count) = &pieces[0];
            let mut prev = self.rewrite_one(node, &run[first.clone()], *first_count)?;
            for (range, count) in &pieces[1..] {
                let piece = &run[range.clone()];
                let next = self.node(prev).head.next as usize;
                let cap = cap_for_run(piece.len());
                let at = self.insert_node(prev, next, cap, (*count, 0, piece.len()))?;
                self.txn
                    .set_range(at + NODE_HEAD_BYTES, piece.len())
                    .copy_from_slice(piece);
                prev = at;
            }
            return Ok(());
        }
        self.rewrite_one(node, run, count).map(|_| ())
    }

    /// [`ListMut::rewrite`] of a run that one node holds. Returns the node's offset.
    fn rewrite_one(&mut self, node: Node, run: &[u8], count: usize) -> Result<usize, OutOfMemory> {
        let (len, cap) = (run.len(), node.cap());
        let best_cap = cap_for_run(len);
        let oversized = cap > NODE_PAYLOAD_MAX && len <= NODE_PAYLOAD_MAX;
        let wasteful = len * 4 < cap && best_cap < cap;
        if len > cap || oversized || wasteful {
            return self.move_node(node, best_cap, 0, count, run);
        }
        let payload = node.payload();
        let candidates = [
            (node.start() + len <= cap).then_some(node.start()),
            (node.end() >= len).then(|| node.end() - len),
        ];
        let (start, span) = candidates
            .into_iter()
            .flatten()
            .map(|start| (start, differing(self.txn.read(payload + start, len), run)))
            .min_by_key(|(_, span)| span.len())
            .unwrap_or((0, 0..len));
        if !span.is_empty() {
            self.txn
                .set_range(payload + start + span.start, span.len())
                .copy_from_slice(&run[span]);
        }
        self.set_bounds(node.at, count, start, start + len);
        Ok(node.at)
    }
}

/// The span of positions where `old` and `new` (of one length) differ; empty if none.
fn differing(old: &[u8], new: &[u8]) -> std::ops::Range<usize> {
    let Some(first) = old.iter().zip(new).position(|(a, b)| a != b) else {
        return 0..0;
    };
    let last = old.iter().zip(new).rposition(|(a, b)| a != b);
    first..last.expect("a first difference has a last") + 1
}

/// Cuts `run` at entry boundaries into pieces a node holds (a single entry may be larger),
/// halving at the boundary nearest the middle: (byte range, entries) of each, in order.
fn split_run(run: &[u8]) -> Vec<(std::ops::Range<usize>, usize)> {
    fn halve(
        bounds: &[usize],
        lo: usize,
        hi: usize,
        out: &mut Vec<(std::ops::Range<usize>, usize)>,
    ) {
        let bytes = bounds[hi] - bounds[lo];
        if bytes <= NODE_PAYLOAD_MAX || hi - lo == 1 {
            out.push((bounds[lo]..bounds[hi], hi - lo));
            return;
        }
        let middle = bounds[lo] + bytes / 2;
        let after = bounds[lo..hi].partition_point(|&b| b < middle) + lo;
        let cut = [after - 1, after]
            .into_iter()
            .filter(|&k| k > lo && k < hi)
            .min_by_key(|&k| bounds[k].abs_diff(middle))
            .expect("a run of two entries has an inner boundary");
        halve(bounds, lo, cut, out);
        halve(bounds, cut, hi, out);
    }
    let bounds = entry_bounds(run);
    let mut pieces = Vec::new();
    halve(&bounds, 0, bounds.len() - 1, &mut pieces);
    pieces
}

// ---------------------------------------------------------------------------------------
// Keys.

/// Creates list `key` (which does not exist) with an empty root, and publishes `new`, as
/// Redis's `dbAdd` does before the command's own event; the caller pushes at once.
fn create(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Key, CmdError> {
    let found = create_unannounced(ctx, key)?;
    ctx.notify(EventClass::New, "new", key);
    Ok(found)
}

/// [`create`] without publishing `new`.
fn create_unannounced(ctx: &mut Ctx<'_, '_>, key: &[u8]) -> Result<Key, CmdError> {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let mut found = layout.create(txn, key, Kind::List, 0)?;
    let root = layout.alloc.alloc(txn, ROOT_BYTES)?;
    *txn.set_pod::<Root>(root) = Root::default();
    layout.set_value(txn, &found, root as u64);
    found.head.value = root as u64;
    Ok(found)
}

/// Sets list `key`'s element count to `len` and marks it changed; deletes it if empty.
fn settle(ctx: &mut Ctx<'_, '_>, key: &Key, len: u64) {
    if len == 0 {
        ctx.delete(key);
        return;
    }
    let layout = ctx.layout;
    let txn = ctx.txn();
    if len != key.head.value_len {
        layout.set_value_len(txn, key, len);
    }
    layout.touch(txn, key);
}

/// Publishes that `event` changed list `name`, which it left `len` long: Redis tells a pop,
/// `LREM` or `LTRIM`, then `del` if that emptied the list.
fn notify_changed(ctx: &mut Ctx<'_, '_>, name: &[u8], event: &str, len: u64) {
    ctx.notify(EventClass::List, event, name);
    if len == 0 {
        ctx.notify(EventClass::Generic, "del", name);
    }
}

/// Pushes `elements` at `end` of list `key`, made if missing (which publishes `new`; the
/// caller publishes its own event). Returns its new length.
fn push_to(
    ctx: &mut Ctx<'_, '_>,
    key: &[u8],
    elements: &[&[u8]],
    end: End,
) -> Result<u64, CmdError> {
    let found = match ctx.find_for_write(key) {
        Some(found) => found,
        None => create(ctx, key)?,
    };
    debug_assert_eq!(found.kind(), Kind::List, "the caller checked the type");
    ListMut::new(ctx, &found).push_all(elements, end)?;
    let len = found.head.value_len + elements.len() as u64;
    settle(ctx, &found, len);
    Ok(len)
}

/// Pops `n` (≤ its length) elements from `end` of list `key` (which exists), in the order
/// they leave; deletes the key if that empties it. Publishes the pop (and `del`), so every
/// command that pops, blocking or not, tells it as Redis does.
pub(super) fn pop_from(ctx: &mut Ctx<'_, '_>, key: &[u8], end: End, n: u64) -> Vec<Vec<u8>> {
    let (popped, left) = take_from(ctx, key, end, n);
    notify_changed(ctx, key, end.pop_event(), left);
    popped
}

/// [`pop_from`] without publishing anything: the popped elements and the length left.
fn take_from(ctx: &mut Ctx<'_, '_>, key: &[u8], end: End, n: u64) -> (Vec<Vec<u8>>, u64) {
    let found = ctx.find_for_write(key).expect("the caller found the list");
    let len = found.head.value_len;
    assert!(n <= len, "{n} elements popped from a list of {len}");
    let mut out = Vec::with_capacity(n as usize);
    ListMut::new(ctx, &found).remove_end(end, n as usize, Some(&mut out));
    settle(ctx, &found, len - n);
    (out, len - n)
}

/// Up to `count` elements of list `key`, from index `start` (within the list) towards the
/// tail: what `SORT` reads of a list it does not sort, so that a `LIMIT` bounds the work.
pub fn elements_from(mem: &impl Mem, key: &Key, start: usize, count: usize) -> Vec<Vec<u8>> {
    forward_from(mem, key, start)
        .take(count)
        .map(<[u8]>::to_vec)
        .collect()
}

/// Makes `name` a list of `elements` (not empty), replacing whatever it held (its expiry
/// too), as `SORT … STORE` does. As Redis's `setKey`, a key that existed is overwritten,
/// which is not `new`; one that did not is created, which is (`RESTORE` deletes the old key
/// first, and so always publishes `new`, as Redis's `dbAdd` there).
pub fn store(ctx: &mut Ctx<'_, '_>, name: &[u8], elements: &[&[u8]]) -> Result<(), CmdError> {
    assert!(!elements.is_empty(), "an empty list is not stored");
    let found = match ctx.find_for_write(name) {
        Some(old) => {
            ctx.delete(&old);
            create_unannounced(ctx, name)?
        }
        None => create(ctx, name)?,
    };
    ListMut::new(ctx, &found).push_all(elements, End::Tail)?;
    settle(ctx, &found, elements.len() as u64);
    Ok(())
}

/// Frees every block the value of `key` holds (not its key entry): every node, then the root.
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    let root_at = key.head.value as usize;
    let root: Root = txn.pod(root_at);
    let mut at = root.head as usize;
    while at != 0 {
        let node = Node::load(txn, at);
        layout.alloc.free(txn, at, node.block_len());
        at = node.head.next as usize;
    }
    layout.alloc.free(txn, root_at, ROOT_BYTES);
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for). Checks
/// the list's shape on the way (links both ways, counts, bounds, entries), since the model's
/// check walks every list through here: a broken list is a bug, and panics.
pub fn owned(mem: &impl Mem, layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    let _ = layout;
    let root_at = key.head.value as usize;
    let root: Root = mem.pod(root_at);
    owned.push((root_at, ROOT_BYTES));
    let (mut at, mut prev, mut nodes, mut elements) = (root.head as usize, 0, 0u64, 0u64);
    while at != 0 {
        let node = Node::load(mem, at);
        owned.push((at, node.block_len()));
        assert_eq!(node.head.prev as usize, prev, "list node {at}'s back link");
        assert!(
            node.count() > 0 && node.start() <= node.end() && node.end() <= node.cap(),
            "list node {at} holds {} entries in {}..{} of {}",
            node.count(),
            node.start(),
            node.end(),
            node.cap()
        );
        assert_eq!(
            entry_bounds(node.run(mem)).len() - 1,
            node.count(),
            "list node {at}'s entries"
        );
        elements += node.head.count as u64;
        nodes += 1;
        prev = at;
        at = node.head.next as usize;
    }
    assert_eq!(root.tail as usize, prev, "a list's tail");
    assert_eq!(root.nodes, nodes, "a list's node count");
    assert!(elements > 0, "an empty list key");
    assert_eq!(elements, key.head.value_len, "a list's length");
}

/// Makes `to` (which does not exist) a list of the elements of list `from`, in order
/// (`COPY`).
pub fn copy(ctx: &mut Ctx<'_, '_>, from: &Key, to: &[u8]) -> Result<(), CmdError> {
    let elements: Vec<Vec<u8>> = forward_from(&ctx.access, from, 0)
        .map(<[u8]>::to_vec)
        .collect();
    let elements: Vec<&[u8]> = elements.iter().map(Vec::as_slice).collect();
    push_to(ctx, to, &elements, End::Tail)?;
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Commands.

/// A count that must be zero or more, as `getPositiveLongFromObjectOrReply` reads it:
/// anything else answers `error`.
fn count_arg(argv: &Argv, i: usize, error: &'static str) -> Result<u64, CmdError> {
    num::parse_i64(arg(argv, i))
        .and_then(|n| u64::try_from(n).ok())
        .ok_or(CmdError::fixed(error))
}

fn push(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    end: End,
    only_existing: bool,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let existing = ctx.find_typed(key, Kind::List)?;
    if existing.is_none() && only_existing {
        out.integer(0);
        return Ok(());
    }
    let elements: Vec<&[u8]> = argv.iter().skip(2).collect();
    let len = push_to(ctx, key, &elements, end)?;
    ctx.notify(EventClass::List, end.push_event(), key);
    out.integer(len as i64);
    Ok(())
}

pub fn lpush(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    push(ctx, argv, out, End::Head, false)
}

pub fn rpush(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    push(ctx, argv, out, End::Tail, false)
}

pub fn lpushx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    push(ctx, argv, out, End::Head, true)
}

pub fn rpushx(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    push(ctx, argv, out, End::Tail, true)
}

fn pop(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    end: End,
) -> Result<(), CmdError> {
    if argv.len() > 3 {
        return Err(arity_error(arg(argv, 0)));
    }
    let count = match argv.len() {
        3 => Some(count_arg(
            argv,
            2,
            "ERR value is out of range, must be positive",
        )?),
        _ => None,
    };
    let key = arg(argv, 1);
    let Some(found) = ctx.find_typed(key, Kind::List)? else {
        match count {
            Some(_) => out.null_array(),
            None => out.null(),
        }
        return Ok(());
    };
    match count {
        None => {
            let popped = pop_from(ctx, key, end, 1);
            out.bulk(&popped[0]);
        }
        Some(0) => out.array(0),
        Some(count) => {
            let popped = pop_from(ctx, key, end, count.min(found.head.value_len));
            out.array(popped.len());
            for element in &popped {
                out.bulk(element);
            }
        }
    }
    Ok(())
}

pub fn lpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop(ctx, argv, out, End::Head)
}

pub fn rpop(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    pop(ctx, argv, out, End::Tail)
}

/// `LMPOP numkeys key… LEFT|RIGHT [COUNT n]`: pops from the first of the keys that holds a
/// list (a key of another type before it is refused), answering the key and the popped
/// elements, or a null array if none does.
pub fn lmpop(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (keys, right, count) = super::zsets::parse_mpop(argv, 1, ["LEFT", "RIGHT"])?;
    let end = if right { End::Tail } else { End::Head };
    let find = |ctx: &Ctx<'_, '_>, name: &[u8]| ctx.find_typed(name, Kind::List);
    if !pop_first_list(ctx, argv, 2..2 + keys, end, count, find, out)? {
        out.null_array();
    }
    Ok(())
}

/// The pop of `LMPOP` and `BLMPOP`: up to `count` elements from `end` of the first of the
/// keys at `keys` (argument indexes) that `find` finds, answering the key and the elements;
/// false, having written nothing, if none holds a list.
pub(super) fn pop_first_list(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    keys: std::ops::Range<usize>,
    end: End,
    count: u64,
    find: impl Fn(&Ctx<'_, '_>, &[u8]) -> Result<Option<Key>, CmdError>,
    out: &mut ReplyWriter<'_>,
) -> Result<bool, CmdError> {
    for i in keys {
        let name = arg(argv, i);
        let Some(found) = find(ctx, name)? else {
            continue;
        };
        let popped = pop_from(ctx, name, end, count.min(found.head.value_len));
        out.array(2);
        out.bulk(name);
        out.array(popped.len());
        for element in &popped {
            out.bulk(element);
        }
        return Ok(true);
    }
    Ok(false)
}

pub fn llen(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let len = ctx
        .find_typed(arg(argv, 1), Kind::List)?
        .map_or(0, |key| key.head.value_len);
    out.integer(len as i64);
    Ok(())
}

/// Redis's range of `start..=stop` (negative from the end) in a list of `len`, clamped;
/// `None` if empty.
fn clamp_range(start: i64, stop: i64, len: u64) -> Option<(u64, u64)> {
    let len = len as i64;
    let start = if start < 0 { len + start } else { start }.max(0);
    let stop = if stop < 0 { len + stop } else { stop };
    if start > stop || start >= len {
        return None;
    }
    Some((start as u64, stop.min(len - 1) as u64))
}

pub fn lrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let start = int_arg(argv, 2)?;
    let stop = int_arg(argv, 3)?;
    let Some(found) = ctx.find_typed(arg(argv, 1), Kind::List)? else {
        out.array(0);
        return Ok(());
    };
    let Some((start, stop)) = clamp_range(start, stop, found.head.value_len) else {
        out.array(0);
        return Ok(());
    };
    let n = (stop - start + 1) as usize;
    out.array(n);
    for element in forward_from(&ctx.access, &found, start as usize).take(n) {
        out.bulk(element);
    }
    Ok(())
}

/// Index `index` (negative from the end) of a list of `len`, if it is in the list.
fn list_index(index: i64, len: u64) -> Option<usize> {
    let len = len as i64;
    let index = if index < 0 { len + index } else { index };
    (0..len).contains(&index).then_some(index as usize)
}

pub fn lindex(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let Some(found) = ctx.find_typed(arg(argv, 1), Kind::List)? else {
        out.null();
        return Ok(());
    };
    let index = int_arg(argv, 2)?;
    let Some(index) = list_index(index, found.head.value_len) else {
        out.null();
        return Ok(());
    };
    let root = root_of(&ctx.access, &found);
    let (node, pos, _) = seek(&ctx.access, root, found.head.value_len as usize, index);
    out.bulk(entry_at(node.run(&ctx.access), pos).0);
    Ok(())
}

pub fn lset(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let element = arg(argv, 3);
    if ctx.find_typed(key, Kind::List)?.is_none() {
        return Err(CmdError::NO_SUCH_KEY);
    }
    let index = int_arg(argv, 2)?;
    let found = ctx.find_for_write(key).expect("the list was found");
    let len = found.head.value_len;
    let index = list_index(index, len).ok_or(CmdError::fixed("ERR index out of range"))?;
    let root = root_of(&ctx.access, &found);
    let (node, pos, stop) = seek(&ctx.access, root, len as usize, index);
    let old = node.run(&ctx.access);
    let mut run = Vec::with_capacity(old.len() + entry_len(element.len()));
    run.extend_from_slice(&old[..pos]);
    let at = run.len();
    run.resize(at + entry_len(element.len()), 0);
    encode_entry(element, &mut run[at..]);
    run.extend_from_slice(&old[stop..]);
    ListMut::new(ctx, &found).rewrite(node, &run, node.count())?;
    settle(ctx, &found, len);
    ctx.notify(EventClass::List, "lset", key);
    out.ok();
    Ok(())
}

pub fn linsert(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let place = arg(argv, 2);
    let after = if place.eq_ignore_ascii_case(b"after") {
        true
    } else if place.eq_ignore_ascii_case(b"before") {
        false
    } else {
        return Err(CmdError::SYNTAX);
    };
    let key = arg(argv, 1);
    let (pivot, element) = (arg(argv, 3), arg(argv, 4));
    if ctx.find_typed(key, Kind::List)?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let found = ctx.find_for_write(key).expect("the list was found");
    let mem = &ctx.access;
    let mut at = root_of(mem, &found).head as usize;
    let mut hit = None;
    while at != 0 && hit.is_none() {
        let node = Node::load(mem, at);
        let run = node.run(mem);
        let mut pos = 0;
        while pos < run.len() {
            let (candidate, next) = entry_at(run, pos);
            if candidate == pivot {
                hit = Some((node, if after { next } else { pos }));
                break;
            }
            pos = next;
        }
        at = node.head.next as usize;
    }
    let Some((node, cut)) = hit else {
        out.integer(-1);
        return Ok(());
    };
    let old = node.run(&ctx.access);
    let size = entry_len(element.len());
    let mut run = Vec::with_capacity(old.len() + size);
    run.extend_from_slice(&old[..cut]);
    run.resize(cut + size, 0);
    encode_entry(element, &mut run[cut..]);
    run.extend_from_slice(&old[cut..]);
    ListMut::new(ctx, &found).rewrite(node, &run, node.count() + 1)?;
    let len = found.head.value_len + 1;
    settle(ctx, &found, len);
    ctx.notify(EventClass::List, "linsert", key);
    out.integer(len as i64);
    Ok(())
}

pub fn lrem(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let count = int_arg(argv, 2)?;
    let element = arg(argv, 3);
    if ctx.find_typed(key, Kind::List)?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let found = ctx.find_for_write(key).expect("the list was found");
    let from_tail = count < 0;
    let limit = count.unsigned_abs();
    let mut removed = 0u64;
    let root = root_of(&ctx.access, &found);
    let mut at = if from_tail { root.tail } else { root.head } as usize;
    while at != 0 && (limit == 0 || removed < limit) {
        let node = Node::load(&ctx.access, at);
        at = if from_tail {
            node.head.prev
        } else {
            node.head.next
        } as usize;
        let run = node.run(&ctx.access);
        let bounds = entry_bounds(run);
        let entries = bounds.len() - 1;
        let mut drop = vec![false; entries];
        let order: Box<dyn Iterator<Item = usize>> = if from_tail {
            Box::new((0..entries).rev())
        } else {
            Box::new(0..entries)
        };
        let mut dropped = 0;
        for i in order {
            if limit != 0 && removed == limit {
                break;
            }
            if entry_at(run, bounds[i]).0 == element {
                drop[i] = true;
                dropped += 1;
                removed += 1;
            }
        }
        if dropped == 0 {
            continue;
        }
        let mut kept = Vec::with_capacity(run.len());
        for i in (0..entries).filter(|&i| !drop[i]) {
            kept.extend_from_slice(&run[bounds[i]..bounds[i + 1]]);
        }
        ListMut::new(ctx, &found).rewrite(node, &kept, entries - dropped)?;
    }
    if removed > 0 {
        let left = found.head.value_len - removed;
        settle(ctx, &found, left);
        notify_changed(ctx, key, "lrem", left);
    }
    out.integer(removed as i64);
    Ok(())
}

pub fn ltrim(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let start = int_arg(argv, 2)?;
    let stop = int_arg(argv, 3)?;
    if ctx.find_typed(key, Kind::List)?.is_none() {
        out.ok();
        return Ok(());
    }
    let found = ctx.find_for_write(key).expect("the list was found");
    let len = found.head.value_len;
    let (drop_head, drop_tail) = match clamp_range(start, stop, len) {
        Some((start, stop)) => (start, len - 1 - stop),
        None => (len, 0),
    };
    let kept = len - drop_head - drop_tail;
    if kept > 0 {
        let mut list = ListMut::new(ctx, &found);
        list.remove_end(End::Head, drop_head as usize, None);
        list.remove_end(End::Tail, drop_tail as usize, None);
    }
    settle(ctx, &found, kept);
    // Told even when nothing was trimmed, as Redis does.
    notify_changed(ctx, key, "ltrim", kept);
    out.ok();
    Ok(())
}

pub fn lpos(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let element = arg(argv, 2);
    // Redis's defaults: the first match, no COUNT (-1), no MAXLEN (0).
    let (mut rank, mut count, mut maxlen) = (1i64, -1i64, 0i64);
    let mut j = 3;
    while j < argv.len() {
        let option = arg(argv, j);
        let more = j + 1 < argv.len();
        if option.eq_ignore_ascii_case(b"RANK") && more {
            j += 1;
            rank = int_arg(argv, j)?;
            if rank == 0 {
                return Err(CmdError::fixed(
                    "ERR RANK can't be zero: use 1 to start from the first match, 2 from the \
                     second ... or use negative to start from the end of the list",
                ));
            }
        } else if option.eq_ignore_ascii_case(b"COUNT") && more {
            j += 1;
            count = count_arg(argv, j, "ERR COUNT can't be negative")? as i64;
        } else if option.eq_ignore_ascii_case(b"MAXLEN") && more {
            j += 1;
            maxlen = count_arg(argv, j, "ERR MAXLEN can't be negative")? as i64;
        } else {
            return Err(CmdError::SYNTAX);
        }
        j += 1;
    }
    // A negative rank searches from the tail. Redis negates in C's wrapping arithmetic, so
    // RANK -9223372036854775808 stays negative and every match counts: kept here.
    let from_tail = rank < 0;
    if from_tail {
        rank = rank.wrapping_neg();
    }
    let Some(found) = ctx.find_typed(arg(argv, 1), Kind::List)? else {
        if count != -1 {
            out.array(0);
        } else {
            out.null();
        }
        return Ok(());
    };
    let len = found.head.value_len as i64;
    let mem = &ctx.access;
    let elements: Box<dyn Iterator<Item = &[u8]>> = if from_tail {
        Box::new(backward_from_tail(mem, &found))
    } else {
        Box::new(forward_from(mem, &found, 0))
    };
    let mut indexes = Vec::new();
    let mut matches = 0i64;
    for (index, candidate) in (0i64..).zip(elements) {
        if maxlen != 0 && index >= maxlen {
            break;
        }
        if candidate != element {
            continue;
        }
        matches += 1;
        if matches < rank {
            continue;
        }
        indexes.push(if from_tail { len - index - 1 } else { index });
        if count == -1 || count != 0 && matches.wrapping_sub(rank).wrapping_add(1) >= count {
            break;
        }
    }
    if count != -1 {
        out.array(indexes.len());
        for index in indexes {
            out.integer(index);
        }
    } else {
        match indexes.first() {
            Some(&index) => out.integer(index),
            None => out.null(),
        }
    }
    Ok(())
}

/// `LMOVE` and `RPOPLPUSH`: pops from `from` of the source and pushes at `to` of the
/// destination, answering the element.
pub(super) fn move_one(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    from: End,
    to: End,
) -> Result<(), CmdError> {
    let (source, destination) = (arg(argv, 1), arg(argv, 2));
    let Some(found) = ctx.find_typed(source, Kind::List)? else {
        out.null();
        return Ok(());
    };
    ctx.find_typed(destination, Kind::List)?;
    if source == destination && (from == to || found.head.value_len == 1) {
        // Popped and pushed back where it was: the list is as it was, but touched, and Redis
        // tells the push and the pop all the same.
        let element = match from {
            End::Head => forward_from(&ctx.access, &found, 0).next(),
            End::Tail => backward_from_tail(&ctx.access, &found).next(),
        };
        out.bulk(element.expect("a list holds an element"));
        let found = ctx.find_for_write(source).expect("the list was found");
        settle(ctx, &found, found.head.value_len);
        ctx.notify(EventClass::List, to.push_event(), destination);
        ctx.notify(EventClass::List, from.pop_event(), source);
        return Ok(());
    }
    let (popped, left) = take_from(ctx, source, from, 1);
    let element = popped[0].as_slice();
    push_to(ctx, destination, &[element], to)?;
    // Redis tells the push (after the destination's `new`) before the pop and the source's
    // `del`, whatever order the writes took here.
    ctx.notify(EventClass::List, to.push_event(), destination);
    notify_changed(ctx, source, from.pop_event(), left);
    out.bulk(element);
    Ok(())
}

pub fn lmove(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let from = End::parse(arg(argv, 3))?;
    let to = End::parse(arg(argv, 4))?;
    move_one(ctx, argv, out, from, to)
}

pub fn rpoplpush(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    move_one(ctx, argv, out, End::Tail, End::Head)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_read_the_same_forwards_and_backwards() {
        for len in [0, 1, 127, 128, 300, 16_383, 16_384, 70_000] {
            let element: Vec<u8> = (0..len).map(|i| (i * 7) as u8).collect();
            let mut run = vec![0u8; entry_len(len) * 2];
            let (first, second) = run.split_at_mut(entry_len(len));
            encode_entry(&element, first);
            encode_entry(&element, second);
            let (read, next) = entry_at(&run, 0);
            assert_eq!(read, &element[..]);
            assert_eq!(next, entry_len(len));
            let (read, start) = entry_before(&run, run.len());
            assert_eq!(read, &element[..]);
            assert_eq!(start, entry_len(len));
            assert_eq!(
                entry_bounds(&run),
                vec![0, entry_len(len), 2 * entry_len(len)]
            );
        }
        assert_eq!(varint_len(0x0fff_ffff), 4);
        assert_eq!(varint_len(0x1000_0000), 5);
    }

    #[test]
    fn a_split_run_keeps_every_entry_in_order_in_pieces_a_node_holds() {
        let mut run = Vec::new();
        let sizes = [100usize, 3000, 9000, 5, 5, 4000, 4000, 4000, 1, 20_000, 7];
        for (i, size) in sizes.iter().enumerate() {
            let element = vec![i as u8; *size];
            let at = run.len();
            run.resize(at + entry_len(*size), 0);
            encode_entry(&element, &mut run[at..]);
        }
        let pieces = split_run(&run);
        let mut expected = 0;
        let mut entries = 0;
        for (range, count) in &pieces {
            assert_eq!(range.start, expected);
            assert!(range.len() <= NODE_PAYLOAD_MAX || *count == 1, "{range:?}");
            assert_eq!(entry_bounds(&run[range.clone()]).len() - 1, *count);
            expected = range.end;
            entries += count;
        }
        assert_eq!(expected, run.len());
        assert_eq!(entries, sizes.len());
    }

    #[test]
    fn node_sizes_are_whole_classes() {
        for want in [0, 1, 31, 32, 33, 100, 1000, 5000, 8160, 8161, 100_000] {
            let cap = node_cap_for(want);
            assert!(cap >= want.min(NODE_PAYLOAD_MAX));
            assert!(cap <= NODE_PAYLOAD_MAX);
            assert_eq!(
                Alloc::block_len_for(NODE_HEAD_BYTES + cap),
                Some(NODE_HEAD_BYTES + cap),
                "{want}"
            );
        }
    }
}
