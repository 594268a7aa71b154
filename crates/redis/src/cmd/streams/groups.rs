//! A stream's consumer groups in the segment (Redis's `streamCG`, `streamConsumer` and
//! `streamNACK`), and the read-counter arithmetic of Redis 7 (`entries_read`, lag).
//!
//! # Layout
//!
//! The stream's root block holds the header of a [`SkipList`] of groups keyed by name. A
//! group's value holds its cursor and the headers of two more lists:
//!
//! ```text
//! offset  0  last delivered ID   u64 ms, u64 seq
//! offset 16  entries read        i64, -1 when unknown (Redis's SCG_INVALID_ENTRIES_READ)
//! offset 24  zero                u64
//! offset 32  pending entries     skip list header, keyed by ID; each value a Delivery
//! then       consumers           skip list header, keyed by name; each value a consumer
//! ```
//!
//! A consumer's value is its seen time (Unix ms, `u64`), then the header of its own list of
//! pending entries, keyed by ID, each value the segment offset of the group's node of that
//! entry. A [`Delivery`] (Redis's NACK) is the delivery time, the delivery count and the
//! consumer's node.
//!
//! # Why so
//!
//! Redis shares one NACK between the group's pending list and the consumer's; here the
//! group's node holds the delivery once and the consumer's node points at it, so serving a
//! consumer's history updates its deliveries without a second lookup, and a claim rewrites
//! 24 bytes of one node and moves one small node between consumers. A delivery declares two
//! new nodes (about 130 bytes at the usual level) and the group's 24-byte cursor, once per
//! read. Nodes never move, so the offsets held stay valid until their node is removed, and
//! every removal removes both nodes of an entry.

use bytemuck::{Pod, Zeroable};
use tandem_memory::Txn;

use super::skiplist::{self, SkipList};
use super::stream::{Meta, Stream, StreamId};
use crate::alloc::OutOfMemory;
use crate::db::Layout;
use crate::dict;
use crate::mem::Mem;
use crate::rdb::{ConsumerImage, GroupImage, PendingImage};

/// A group's entries read when not known (Redis's `SCG_INVALID_ENTRIES_READ`).
pub const ENTRIES_READ_UNKNOWN: i64 = -1;

const CURSOR_BYTES: usize = 32;
const PENDING_AT: usize = CURSOR_BYTES;
const CONSUMERS_AT: usize = PENDING_AT + skiplist::HEADER_BYTES;
const GROUP_BYTES: usize = CONSUMERS_AT + skiplist::HEADER_BYTES;
const CONSUMER_PENDING_AT: usize = 8;
const CONSUMER_BYTES: usize = CONSUMER_PENDING_AT + skiplist::HEADER_BYTES;

/// A group's cursor, as it lies at the start of its value.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
struct Cursor {
    last_ms: u64,
    last_seq: u64,
    entries_read: i64,
    zero: u64,
}

/// A pending entry's delivery, the value of its node in the group's pending list.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Delivery {
    /// When it was last delivered, in Unix ms (Redis's `mstime_t`).
    pub time_ms: i64,
    /// How many times it was delivered (Redis's `uint64_t`, shown as a signed number).
    pub count: u64,
    /// The node of the consumer it was last delivered to.
    consumer: u64,
}

/// The hash that gives a key its level in any of these lists.
fn hash(mem: &impl Mem, layout: &Layout, key: &[u8]) -> u64 {
    dict::hash(layout.seed(mem), key)
}

/// A consumer group: its node in the stream's groups list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Group {
    pub node: usize,
}

/// A consumer: its node in its group's consumers list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Consumer {
    pub node: usize,
}

/// A pending entry: its node in its group's pending list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    pub node: usize,
}

impl Group {
    pub fn name(self, mem: &impl Mem) -> &[u8] {
        SkipList::key(mem, self.node)
    }

    fn cursor(self, mem: &impl Mem) -> Cursor {
        mem.pod(SkipList::value_at(mem, self.node))
    }

    /// The last ID delivered to the group.
    pub fn last_id(self, mem: &impl Mem) -> StreamId {
        let cursor = self.cursor(mem);
        StreamId {
            ms: cursor.last_ms,
            seq: cursor.last_seq,
        }
    }

    /// Entries the group read ([`ENTRIES_READ_UNKNOWN`] when not known).
    pub fn entries_read(self, mem: &impl Mem) -> i64 {
        self.cursor(mem).entries_read
    }

    pub fn set_cursor(self, txn: &mut Txn<'_>, last_id: StreamId, entries_read: i64) {
        let at = SkipList::value_at(txn, self.node);
        *txn.set_pod::<Cursor>(at) = Cursor {
            last_ms: last_id.ms,
            last_seq: last_id.seq,
            entries_read,
            zero: 0,
        };
    }

    /// The group's pending entries, keyed by ID.
    pub fn pending(self, mem: &impl Mem) -> SkipList {
        SkipList::at(SkipList::value_at(mem, self.node) + PENDING_AT)
    }

    /// The group's consumers, keyed by name.
    pub fn consumers(self, mem: &impl Mem) -> SkipList {
        SkipList::at(SkipList::value_at(mem, self.node) + CONSUMERS_AT)
    }

    pub fn find_consumer(self, mem: &impl Mem, name: &[u8]) -> Option<Consumer> {
        let node = self.consumers(mem).find(mem, name)?;
        Some(Consumer { node })
    }

    pub fn find_pending(self, mem: &impl Mem, id: StreamId) -> Option<Pending> {
        let node = self.pending(mem).find(mem, &id.key())?;
        Some(Pending { node })
    }
}

impl Consumer {
    pub fn name(self, mem: &impl Mem) -> &[u8] {
        SkipList::key(mem, self.node)
    }

    /// When the consumer was last seen, in Unix ms.
    pub fn seen_ms(self, mem: &impl Mem) -> i64 {
        mem.pod(SkipList::value_at(mem, self.node))
    }

    pub fn set_seen_ms(self, txn: &mut Txn<'_>, seen_ms: i64) {
        let at = SkipList::value_at(txn, self.node);
        *txn.set_pod::<i64>(at) = seen_ms;
    }

    /// The consumer's pending entries, keyed by ID; each value is the group's node of it.
    pub fn pending(self, mem: &impl Mem) -> SkipList {
        SkipList::at(SkipList::value_at(mem, self.node) + CONSUMER_PENDING_AT)
    }
}

impl Pending {
    /// The group's pending entry that `node`, a node of a consumer's list, stands for.
    pub fn of_consumer_node(mem: &impl Mem, node: usize) -> Pending {
        Pending {
            node: mem.word(SkipList::value_at(mem, node)) as usize,
        }
    }

    pub fn id(self, mem: &impl Mem) -> StreamId {
        StreamId::from_key(SkipList::key(mem, self.node))
    }

    pub fn delivery(self, mem: &impl Mem) -> Delivery {
        mem.pod(SkipList::value_at(mem, self.node))
    }

    pub fn consumer(self, mem: &impl Mem) -> Consumer {
        Consumer {
            node: self.delivery(mem).consumer as usize,
        }
    }

    /// Sets the delivery time and count, keeping the consumer.
    pub fn set_delivery(self, txn: &mut Txn<'_>, time_ms: i64, count: u64) {
        let at = SkipList::value_at(txn, self.node);
        let consumer = self.delivery(txn).consumer;
        *txn.set_pod::<Delivery>(at) = Delivery {
            time_ms,
            count,
            consumer,
        };
    }
}

/// The group of `stream` called `name`, if any.
pub fn find(mem: &impl Mem, stream: Stream, name: &[u8]) -> Option<Group> {
    let node = stream.groups().find(mem, name)?;
    Some(Group { node })
}

/// Creates group `name` (not in `stream`) with its cursor.
pub fn create(
    txn: &mut Txn<'_>,
    layout: &Layout,
    stream: Stream,
    name: &[u8],
    (last_id, entries_read): (StreamId, i64),
) -> Result<Group, OutOfMemory> {
    let hash = hash(txn, layout, name);
    let node = stream
        .groups()
        .insert(txn, &layout.alloc, name, hash, &[0u8; GROUP_BYTES])?;
    let group = Group { node };
    let at = SkipList::value_at(txn, node);
    SkipList::init(txn, at + PENDING_AT);
    SkipList::init(txn, at + CONSUMERS_AT);
    group.set_cursor(txn, last_id, entries_read);
    Ok(group)
}

/// Creates consumer `name` (not in `group`), seen at `now_ms`.
pub fn create_consumer(
    txn: &mut Txn<'_>,
    layout: &Layout,
    group: Group,
    name: &[u8],
    now_ms: i64,
) -> Result<Consumer, OutOfMemory> {
    let hash = hash(txn, layout, name);
    let consumers = group.consumers(txn);
    let node = consumers.insert(txn, &layout.alloc, name, hash, &[0u8; CONSUMER_BYTES])?;
    let consumer = Consumer { node };
    SkipList::init(txn, SkipList::value_at(txn, node) + CONSUMER_PENDING_AT);
    consumer.set_seen_ms(txn, now_ms);
    Ok(consumer)
}

/// Consumer `name` of `group`, seen now (Redis's `streamLookupConsumer`, then
/// `streamCreateConsumer` if it is missing), and whether it was created: the caller
/// publishes that (`xgroup-createconsumer`), as Redis's `streamCreateConsumer` does.
pub fn consumer_seen(
    txn: &mut Txn<'_>,
    layout: &Layout,
    group: Group,
    name: &[u8],
    now_ms: i64,
) -> Result<(Consumer, bool), OutOfMemory> {
    match group.find_consumer(txn, name) {
        Some(consumer) => {
            consumer.set_seen_ms(txn, now_ms);
            Ok((consumer, false))
        }
        None => Ok((create_consumer(txn, layout, group, name, now_ms)?, true)),
    }
}

/// Adds entry `id` (not pending in `group`) to the pending lists of `group` and `consumer`.
pub fn add_pending(
    txn: &mut Txn<'_>,
    layout: &Layout,
    (group, consumer): (Group, Consumer),
    id: StreamId,
    (time_ms, count): (i64, u64),
) -> Result<Pending, OutOfMemory> {
    let key = id.key();
    let hash = hash(txn, layout, &key);
    let delivery = Delivery {
        time_ms,
        count,
        consumer: consumer.node as u64,
    };
    let pending = group.pending(txn);
    let node = pending.insert(
        txn,
        &layout.alloc,
        &key,
        hash,
        bytemuck::bytes_of(&delivery),
    )?;
    let own = consumer.pending(txn);
    own.insert(txn, &layout.alloc, &key, hash, &(node as u64).to_le_bytes())?;
    Ok(Pending { node })
}

/// Gives pending entry `entry` to `consumer` (a no-op if it holds it already), with a new
/// delivery time and count.
pub fn reassign(
    txn: &mut Txn<'_>,
    layout: &Layout,
    entry: Pending,
    consumer: Consumer,
    (time_ms, count): (i64, u64),
) -> Result<(), OutOfMemory> {
    let previous = entry.consumer(txn);
    if previous != consumer {
        let key = entry.id(txn).key();
        let theirs = previous.pending(txn);
        let node = theirs
            .find(txn, &key)
            .expect("a consumer holds its entries");
        theirs.remove(txn, &layout.alloc, node);
        let hash = hash(txn, layout, &key);
        let own = consumer.pending(txn);
        own.insert(
            txn,
            &layout.alloc,
            &key,
            hash,
            &(entry.node as u64).to_le_bytes(),
        )?;
    }
    let at = SkipList::value_at(txn, entry.node);
    *txn.set_pod::<Delivery>(at) = Delivery {
        time_ms,
        count,
        consumer: consumer.node as u64,
    };
    Ok(())
}

/// Delivers entry `id` to `consumer` as a read of new entries does (Redis's PEL update in
/// `streamReplyWithRange`): a new pending entry, or one already pending (after `XGROUP
/// SETID`) given to the consumer with its count back at 1.
pub fn deliver(
    txn: &mut Txn<'_>,
    layout: &Layout,
    (group, consumer): (Group, Consumer),
    id: StreamId,
    now_ms: i64,
) -> Result<(), OutOfMemory> {
    match group.find_pending(txn, id) {
        Some(entry) => reassign(txn, layout, entry, consumer, (now_ms, 1)),
        None => add_pending(txn, layout, (group, consumer), id, (now_ms, 1)).map(|_| ()),
    }
}

/// Removes pending entry `entry` from its group and its consumer (an acknowledgement).
pub fn remove_pending(txn: &mut Txn<'_>, layout: &Layout, group: Group, entry: Pending) {
    let key = entry.id(txn).key();
    let own = entry.consumer(txn).pending(txn);
    let node = own.find(txn, &key).expect("a consumer holds its entries");
    own.remove(txn, &layout.alloc, node);
    let pending = group.pending(txn);
    pending.remove(txn, &layout.alloc, entry.node);
}

/// Deletes `consumer` and its pending entries from `group`; returns how many it held.
pub fn delete_consumer(
    txn: &mut Txn<'_>,
    layout: &Layout,
    group: Group,
    consumer: Consumer,
) -> u64 {
    let own = consumer.pending(txn);
    let held = own.len(txn);
    let pending = group.pending(txn);
    own.free_all(txn, &layout.alloc, |txn, node| {
        let entry = Pending::of_consumer_node(txn, node);
        pending.remove(txn, &layout.alloc, entry.node);
    });
    let consumers = group.consumers(txn);
    consumers.remove(txn, &layout.alloc, consumer.node);
    held
}

/// Frees what `group`'s value holds (its pending entries and consumers), not its node.
fn free_contents(txn: &mut Txn<'_>, layout: &Layout, group: Group) {
    let alloc = &layout.alloc;
    group.pending(txn).free_all(txn, alloc, |_, _| {});
    group.consumers(txn).free_all(txn, alloc, |txn, node| {
        Consumer { node }
            .pending(txn)
            .free_all(txn, alloc, |_, _| {});
    });
}

/// Deletes `group` from `stream` (`XGROUP DESTROY`).
pub fn destroy(txn: &mut Txn<'_>, layout: &Layout, stream: Stream, group: Group) {
    free_contents(txn, layout, group);
    stream.groups().remove(txn, &layout.alloc, group.node);
}

/// Frees every group of `stream` (the list's header is the root block's).
pub fn free_all(txn: &mut Txn<'_>, layout: &Layout, stream: Stream) {
    stream.groups().free_all(txn, &layout.alloc, |txn, node| {
        free_contents(txn, layout, Group { node });
    });
}

/// Pushes every block the groups of `stream` hold, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, stream: Stream, owned: &mut Vec<(usize, usize)>) {
    let mut push = |node: usize| owned.push((node, SkipList::block_len(mem, node)));
    for node in stream.groups().nodes(mem) {
        push(node);
        let group = Group { node };
        group
            .pending(mem)
            .nodes(mem)
            .into_iter()
            .for_each(&mut push);
        for node in group.consumers(mem).nodes(mem) {
            push(node);
            let consumer = Consumer { node };
            consumer
                .pending(mem)
                .nodes(mem)
                .into_iter()
                .for_each(&mut push);
        }
    }
}

/// Checks every group of `stream`: its lists, and that its pending entries are exactly
/// those its consumers hold, each held by the consumer it names.
pub fn verify(mem: &impl Mem, stream: Stream) -> Result<(), String> {
    stream.groups().verify(mem)?;
    for node in stream.groups().nodes(mem) {
        let group = Group { node };
        group.pending(mem).verify(mem)?;
        group.consumers(mem).verify(mem)?;
        let mut held = 0;
        for node in group.consumers(mem).nodes(mem) {
            let consumer = Consumer { node };
            consumer.pending(mem).verify(mem)?;
            for own in consumer.pending(mem).nodes(mem) {
                let entry = Pending::of_consumer_node(mem, own);
                if SkipList::key(mem, own) != SkipList::key(mem, entry.node) {
                    return Err("a consumer's entry points at another ID".into());
                }
                if entry.consumer(mem) != consumer {
                    return Err("a pending entry names another consumer than its holder".into());
                }
                held += 1;
            }
        }
        if held != group.pending(mem).len(mem) {
            return Err(format!(
                "a group has {} pending entries, its consumers hold {held}",
                group.pending(mem).len(mem)
            ));
        }
    }
    Ok(())
}

/// Gives `to` (without groups) a copy of every group of `from` (Redis's `streamDup`):
/// cursors, consumers with their seen times, pending entries with their deliveries.
pub fn copy(
    txn: &mut Txn<'_>,
    layout: &Layout,
    from: Stream,
    to: Stream,
) -> Result<(), OutOfMemory> {
    assert_eq!(to.groups().len(txn), 0, "a copy starts without groups");
    for node in from.groups().nodes(txn) {
        let source = Group { node };
        let name = source.name(txn).to_vec();
        let cursor = (source.last_id(txn), source.entries_read(txn));
        let target = create(txn, layout, to, &name, cursor)?;
        for node in source.consumers(txn).nodes(txn) {
            let consumer = Consumer { node };
            let name = consumer.name(txn).to_vec();
            let copied = create_consumer(txn, layout, target, &name, consumer.seen_ms(txn))?;
            for own in consumer.pending(txn).nodes(txn) {
                let entry = Pending::of_consumer_node(txn, own);
                let delivery = entry.delivery(txn);
                let id = entry.id(txn);
                let times = (delivery.time_ms, delivery.count);
                add_pending(txn, layout, (target, copied), id, times)?;
            }
        }
    }
    Ok(())
}

/// The groups of `stream`, as a payload holds them (`DUMP`).
pub fn images(mem: &impl Mem, stream: Stream) -> Vec<GroupImage> {
    let mut images = Vec::new();
    for node in stream.groups().nodes(mem) {
        let group = Group { node };
        let pending = group
            .pending(mem)
            .nodes(mem)
            .into_iter()
            .map(|node| {
                let entry = Pending { node };
                let delivery = entry.delivery(mem);
                let id = entry.id(mem);
                PendingImage {
                    id: (id.ms, id.seq),
                    delivery_ms: delivery.time_ms,
                    count: delivery.count,
                }
            })
            .collect();
        let consumers = group
            .consumers(mem)
            .nodes(mem)
            .into_iter()
            .map(|node| {
                let consumer = Consumer { node };
                let held = consumer.pending(mem).nodes(mem);
                ConsumerImage {
                    name: consumer.name(mem).to_vec(),
                    seen_ms: consumer.seen_ms(mem),
                    pending: held
                        .into_iter()
                        .map(|own| {
                            let id = Pending::of_consumer_node(mem, own).id(mem);
                            (id.ms, id.seq)
                        })
                        .collect(),
                }
            })
            .collect();
        let last_id = group.last_id(mem);
        images.push(GroupImage {
            name: group.name(mem).to_vec(),
            last_id: (last_id.ms, last_id.seq),
            entries_read: Some(group.entries_read(mem)),
            pending,
            consumers,
        });
    }
    images
}

/// Gives `stream` (without groups, its entries restored) the groups of `images`
/// (`RESTORE`; the codec checked that each pending entry has exactly one consumer). A group
/// an RDB 9 payload gives no read count is estimated as Redis estimates it.
pub fn restore(
    txn: &mut Txn<'_>,
    layout: &Layout,
    stream: Stream,
    images: &[GroupImage],
) -> Result<(), OutOfMemory> {
    let meta = stream.meta(txn);
    let len = stream.len(txn);
    for image in images {
        let last_id = StreamId {
            ms: image.last_id.0,
            seq: image.last_id.1,
        };
        let entries_read = image
            .entries_read
            .unwrap_or_else(|| estimate_entries_read(&meta, len, last_id));
        let group = create(txn, layout, stream, &image.name, (last_id, entries_read))?;
        let deliveries: std::collections::BTreeMap<(u64, u64), (i64, u64)> = image
            .pending
            .iter()
            .map(|p| (p.id, (p.delivery_ms, p.count)))
            .collect();
        for consumer in &image.consumers {
            let created = create_consumer(txn, layout, group, &consumer.name, consumer.seen_ms)?;
            for id in &consumer.pending {
                let times = deliveries[id];
                let id = StreamId {
                    ms: id.0,
                    seq: id.1,
                };
                add_pending(txn, layout, (group, created), id, times)?;
            }
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Read counters (Redis 7's `entries_read` and lag).

/// Whether the stream holds a deleted entry at or after `from` (Redis's
/// `streamRangeHasTombstones` with no end).
pub fn has_tombstones_from(meta: &Meta, len: u64, from: StreamId) -> bool {
    let max_deleted = meta.max_deleted_id();
    if len == 0 || max_deleted.is_zero() || meta.first_id() > max_deleted {
        return false;
    }
    from <= max_deleted
}

/// How many entries were added to the stream up to and including `id`, when that can be
/// known (Redis's `streamEstimateDistanceFromFirstEverEntry`), else
/// [`ENTRIES_READ_UNKNOWN`].
pub fn estimate_entries_read(meta: &Meta, len: u64, id: StreamId) -> i64 {
    let added = meta.entries_added as i64;
    if meta.entries_added == 0 {
        return 0;
    }
    if len == 0 && id <= meta.last_id() {
        return added;
    }
    match id.cmp(&meta.last_id()) {
        std::cmp::Ordering::Equal => return added,
        std::cmp::Ordering::Greater => return ENTRIES_READ_UNKNOWN,
        std::cmp::Ordering::Less => {}
    }
    let max_deleted = meta.max_deleted_id();
    // Redis subtracts in unsigned 64 bits, then answers the bits as a signed number.
    let before_first = meta.entries_added.wrapping_sub(len);
    if max_deleted.is_zero() || max_deleted < meta.first_id() {
        match id.cmp(&meta.first_id()) {
            std::cmp::Ordering::Less => return before_first as i64,
            std::cmp::Ordering::Equal => return before_first.wrapping_add(1) as i64,
            std::cmp::Ordering::Greater => {}
        }
    }
    ENTRIES_READ_UNKNOWN
}

/// The group's lag: entries added it has not read, if that can be known (Redis's
/// `streamReplyWithCGLag`).
pub fn lag(meta: &Meta, len: u64, (last_id, entries_read): (StreamId, i64)) -> Option<i64> {
    let added = meta.entries_added as i64;
    if meta.entries_added == 0 {
        return Some(0);
    }
    if entries_read != ENTRIES_READ_UNKNOWN && !has_tombstones_from(meta, len, last_id) {
        return Some(added.wrapping_sub(entries_read));
    }
    match estimate_entries_read(meta, len, last_id) {
        ENTRIES_READ_UNKNOWN => None,
        read => Some(added.wrapping_sub(read)),
    }
}

/// The group's entries read after it is delivered entry `id` past its last (Redis's
/// counter update in `streamReplyWithRange`).
pub fn entries_read_after(meta: &Meta, len: u64, entries_read: i64, id: StreamId) -> i64 {
    if entries_read != ENTRIES_READ_UNKNOWN && !has_tombstones_from(meta, len, id) {
        entries_read.wrapping_add(1)
    } else if meta.entries_added != 0 {
        estimate_entries_read(meta, len, id)
    } else {
        entries_read
    }
}
