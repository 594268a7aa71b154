//! A stream in a payload (`RDB_TYPE_STREAM_LISTPACKS` and `_2`): its listpack nodes, its
//! fields, its consumer groups with their pending entries and consumers.
//!
//! A node's listpack (t_stream.c):
//!
//! ```text
//! master entry  count, deleted, field count, field…, 0
//! entry         flags, ms - master ms, seq - master seq,
//!               (flags & SAMEFIELDS: value… | field count, field, value, …),
//!               elements in the entry before this one
//! ```

use std::collections::{BTreeMap, BTreeSet};

use super::io::{Input, Reader, Writer};
use super::packs::{self, Item, ListpackWriter};
use super::{BadData, Id};

const FLAG_DELETED: i64 = 1;
const FLAG_SAMEFIELDS: i64 = 2;
/// A group's entries read when unknown (`SCG_INVALID_ENTRIES_READ`), as a length.
const ENTRIES_READ_UNKNOWN_LEN: u64 = u64::MAX;

/// A stream, whole.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct StreamImage {
    /// Redis's nodes, in ID order.
    pub packs: Vec<PackImage>,
    pub last_id: Id,
    pub first_id: Id,
    pub max_deleted: Id,
    pub entries_added: u64,
    pub groups: Vec<GroupImage>,
}

/// One of Redis's nodes: its master ID (its key), how many entries were ever appended to
/// it, the last one's ID (deleted or not), and its live entries with their fields and
/// values, interleaved.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PackImage {
    pub master: Id,
    pub appended: u64,
    pub last: Id,
    pub entries: Vec<(Id, Vec<Vec<u8>>)>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct GroupImage {
    pub name: Vec<u8>,
    pub last_id: Id,
    /// `None`: not in the payload (an RDB 9 stream), to be estimated as Redis does.
    pub entries_read: Option<i64>,
    pub pending: Vec<PendingImage>,
    pub consumers: Vec<ConsumerImage>,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct PendingImage {
    pub id: Id,
    pub delivery_ms: i64,
    pub count: u64,
}

#[derive(Clone, Debug, Default, PartialEq)]
pub struct ConsumerImage {
    pub name: Vec<u8>,
    pub seen_ms: i64,
    /// The IDs it holds, each one of its group's pending entries.
    pub pending: Vec<Id>,
}

impl StreamImage {
    /// Live entries.
    pub fn len(&self) -> u64 {
        self.packs.iter().map(|p| p.entries.len() as u64).sum()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn id_key(id: Id) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&id.0.to_be_bytes());
    key[8..].copy_from_slice(&id.1.to_be_bytes());
    key
}

fn raw_id(reader: &mut impl Input) -> Result<Id, BadData> {
    Ok((reader.u64_be()?, reader.u64_be()?))
}

fn len_id(reader: &mut impl Input) -> Result<Id, BadData> {
    Ok((reader.len()?, reader.len()?))
}

/// Reads a stream's body.
pub fn load(reader: &mut impl Input, version_2: bool) -> Result<StreamImage, BadData> {
    let nodes = reader.count(2)?;
    let mut image = StreamImage::default();
    for _ in 0..nodes {
        let key = reader.string()?;
        let key: [u8; 16] = key.as_slice().try_into().map_err(|_| BadData)?;
        let master = raw_id(&mut Reader::new(&key))?;
        let blob = reader.string()?;
        let pack = load_pack(master, &packs::listpack(&blob)?)?;
        if image.packs.last().is_some_and(|last| last.master >= master) {
            return Err(BadData);
        }
        image.packs.push(pack);
    }
    let length = reader.len()?;
    image.last_id = len_id(reader)?;
    if version_2 {
        image.first_id = len_id(reader)?;
        image.max_deleted = len_id(reader)?;
        image.entries_added = reader.len()?;
    } else {
        image.entries_added = length;
        image.first_id = first_live(&image).unwrap_or_default();
    }
    check_entries(&image, length)?;
    let groups = reader.count(1)?;
    for _ in 0..groups {
        let group = load_group(reader, version_2)?;
        if image.groups.iter().any(|g| g.name == group.name) {
            return Err(BadData);
        }
        image.groups.push(group);
    }
    Ok(image)
}

fn first_live(image: &StreamImage) -> Option<Id> {
    image
        .packs
        .iter()
        .find_map(|p| p.entries.first().map(|e| e.0))
}

/// Live entries strictly ascending, none past the last ID, as many as the stream's length.
fn check_entries(image: &StreamImage, length: u64) -> Result<(), BadData> {
    let mut previous: Option<Id> = None;
    for (id, _) in image.packs.iter().flat_map(|p| &p.entries) {
        if previous.is_some_and(|p| p >= *id) || *id > image.last_id {
            return Err(BadData);
        }
        previous = Some(*id);
    }
    if image.len() != length {
        return Err(BadData);
    }
    Ok(())
}

/// Walks a node's elements.
struct Items<'i, 'a> {
    items: &'i [Item<'a>],
    at: usize,
}

impl<'a> Items<'_, 'a> {
    fn next(&mut self) -> Result<Item<'a>, BadData> {
        let item = *self.items.get(self.at).ok_or(BadData)?;
        self.at += 1;
        Ok(item)
    }

    fn int(&mut self) -> Result<i64, BadData> {
        self.next()?.int()
    }

    /// A count, which must fit in what is left.
    fn count(&mut self) -> Result<usize, BadData> {
        let count = self.int()?;
        usize::try_from(count)
            .ok()
            .filter(|&c| c <= self.items.len())
            .ok_or(BadData)
    }
}

fn offset_id(master: Id, ms: i64, seq: i64) -> Result<Id, BadData> {
    let ms = master.0.checked_add_signed(ms).ok_or(BadData)?;
    let seq = master.1.wrapping_add(seq as u64);
    Ok((ms, seq))
}

fn load_pack(master: Id, items: &[Item<'_>]) -> Result<PackImage, BadData> {
    let mut walk = Items { items, at: 0 };
    let live = walk.count()?;
    let deleted = walk.count()?;
    let field_count = walk.count()?;
    let fields: Vec<Vec<u8>> = (0..field_count)
        .map(|_| walk.next().map(Item::to_bytes))
        .collect::<Result<_, _>>()?;
    if walk.int()? != 0 || live + deleted == 0 {
        return Err(BadData);
    }
    let mut pack = PackImage {
        master,
        appended: (live + deleted) as u64,
        ..PackImage::default()
    };
    for _ in 0..live + deleted {
        let start = walk.at;
        let flags = walk.int()?;
        let id = offset_id(master, walk.int()?, walk.int()?)?;
        let mut strings = Vec::new();
        if flags & FLAG_SAMEFIELDS != 0 {
            for field in &fields {
                strings.push(field.clone());
                strings.push(walk.next()?.to_bytes());
            }
        } else {
            let count = walk.count()?;
            for _ in 0..2 * count {
                strings.push(walk.next()?.to_bytes());
            }
        }
        if walk.int()? != (walk.at - start - 1) as i64 {
            return Err(BadData);
        }
        pack.last = id;
        if flags & FLAG_DELETED == 0 {
            pack.entries.push((id, strings));
        }
    }
    if walk.at != items.len() || pack.entries.len() != live {
        return Err(BadData);
    }
    Ok(pack)
}

fn load_group(reader: &mut impl Input, version_2: bool) -> Result<GroupImage, BadData> {
    let mut group = GroupImage {
        name: reader.string()?,
        last_id: len_id(reader)?,
        ..GroupImage::default()
    };
    if version_2 {
        group.entries_read = Some(match reader.len()? {
            ENTRIES_READ_UNKNOWN_LEN => -1,
            read => i64::try_from(read).map_err(|_| BadData)?,
        });
    }
    let pending = reader.count(16 + 8 + 1)?;
    let mut owners: BTreeMap<Id, bool> = BTreeMap::new();
    for _ in 0..pending {
        let id = raw_id(reader)?;
        let delivery_ms = reader.u64_le()? as i64;
        let count = reader.len()?;
        if owners.insert(id, false).is_some() {
            return Err(BadData);
        }
        group.pending.push(PendingImage {
            id,
            delivery_ms,
            count,
        });
    }
    let consumers = reader.count(1 + 8 + 1)?;
    let mut names = BTreeSet::new();
    for _ in 0..consumers {
        let consumer = load_consumer(reader, &mut owners)?;
        if !names.insert(consumer.name.clone()) {
            return Err(BadData);
        }
        group.consumers.push(consumer);
    }
    // Every pending entry has a consumer (Redis checks it only when it sanitizes).
    if owners.values().any(|owned| !owned) {
        return Err(BadData);
    }
    Ok(group)
}

fn load_consumer(
    reader: &mut impl Input,
    owners: &mut BTreeMap<Id, bool>,
) -> Result<ConsumerImage, BadData> {
    let mut consumer = ConsumerImage {
        name: reader.string()?,
        seen_ms: reader.u64_le()? as i64,
        pending: Vec::new(),
    };
    let held = reader.count(16)?;
    for _ in 0..held {
        let id = raw_id(reader)?;
        match owners.get_mut(&id) {
            Some(owned) if !*owned => *owned = true,
            _ => return Err(BadData),
        }
        consumer.pending.push(id);
    }
    Ok(consumer)
}

/// Writes a stream's body.
pub fn save(out: &mut Writer, image: &StreamImage) {
    out.len(image.packs.len() as u64);
    for pack in &image.packs {
        out.string(&id_key(pack.master));
        out.string(&save_pack(pack));
    }
    out.len(image.len());
    for id in [image.last_id, image.first_id, image.max_deleted] {
        out.len(id.0);
        out.len(id.1);
    }
    out.len(image.entries_added);
    out.len(image.groups.len() as u64);
    for group in &image.groups {
        save_group(out, group);
    }
}

fn field_names(strings: &[Vec<u8>]) -> impl Iterator<Item = &Vec<u8>> {
    strings.iter().step_by(2)
}

/// A node's listpack. Deleted entries are not kept here, only counted, so the node gets as
/// many tombstones as it had deleted entries: at its master ID, and one at its last ID when
/// that entry was deleted, so that Redis sees the node's edges and fullness as they were.
fn save_pack(pack: &PackImage) -> Vec<u8> {
    let fields: Vec<&Vec<u8>> = pack
        .entries
        .first()
        .map(|(_, strings)| field_names(strings).collect())
        .unwrap_or_default();
    let live = pack.entries.len() as u64;
    let deleted = pack.appended.saturating_sub(live);
    let last_deleted = deleted > 0 && pack.entries.last().is_none_or(|e| e.0 != pack.last);
    let mut lp = ListpackWriter::default();
    lp.push_int(live as i64);
    lp.push_int(deleted as i64);
    lp.push_int(fields.len() as i64);
    for field in &fields {
        lp.push(field);
    }
    lp.push_int(0);
    let tombstone = |lp: &mut ListpackWriter, id: Id| {
        lp.push_int(FLAG_DELETED | FLAG_SAMEFIELDS);
        push_delta(lp, pack.master, id);
        for _ in &fields {
            lp.push(b"");
        }
        lp.push_int(fields.len() as i64 + 3);
    };
    for _ in 0..deleted - u64::from(last_deleted) {
        tombstone(&mut lp, pack.master);
    }
    for (id, strings) in &pack.entries {
        save_entry(&mut lp, pack.master, (*id, strings), &fields);
    }
    if last_deleted {
        tombstone(&mut lp, pack.last);
    }
    lp.finish()
}

fn push_delta(lp: &mut ListpackWriter, master: Id, id: Id) {
    lp.push_int(id.0.wrapping_sub(master.0) as i64);
    lp.push_int(id.1.wrapping_sub(master.1) as i64);
}

fn save_entry(
    lp: &mut ListpackWriter,
    master: Id,
    (id, strings): (Id, &[Vec<u8>]),
    fields: &[&Vec<u8>],
) {
    let same = field_names(strings).eq(fields.iter().copied());
    lp.push_int(if same { FLAG_SAMEFIELDS } else { 0 });
    push_delta(lp, master, id);
    if same {
        for value in strings.iter().skip(1).step_by(2) {
            lp.push(value);
        }
        lp.push_int(fields.len() as i64 + 3);
    } else {
        lp.push_int((strings.len() / 2) as i64);
        for string in strings {
            lp.push(string);
        }
        lp.push_int(strings.len() as i64 + 4);
    }
}

fn save_group(out: &mut Writer, group: &GroupImage) {
    out.string(&group.name);
    out.len(group.last_id.0);
    out.len(group.last_id.1);
    out.len(group.entries_read.unwrap_or(-1) as u64);
    out.len(group.pending.len() as u64);
    for pending in &group.pending {
        out.bytes.extend_from_slice(&id_key(pending.id));
        out.bytes
            .extend_from_slice(&pending.delivery_ms.to_le_bytes());
        out.len(pending.count);
    }
    out.len(group.consumers.len() as u64);
    for consumer in &group.consumers {
        out.string(&consumer.name);
        out.bytes.extend_from_slice(&consumer.seen_ms.to_le_bytes());
        out.len(consumer.pending.len() as u64);
        for id in &consumer.pending {
            out.bytes.extend_from_slice(&id_key(*id));
        }
    }
}
