//! Streams in the reference: a stream is its entries in a `BTreeMap` by ID, the fields Redis
//! 7.0 keeps beside them (the last generated ID, the greatest deleted ID, how many entries
//! were ever added) and its consumer groups, each with its cursor (last delivered ID,
//! entries read), its consumers (with the time each was last seen) and its pending entries
//! (with their consumer, delivery time and delivery count). The first entry's ID is not
//! kept: Redis's recorded first ID is always the first entry's (0-0 for an empty stream).
//!
//! Only the workload's forms are modelled, each as Redis 7.0's `t_stream.c` answers it:
//! exact trimming only (approximate trimming depends on how Redis packs entries), no
//! `BLOCK`, claims with a minimum idle time of 0, and the group counters (`entries-read`,
//! `lag`) by Redis's own estimate (`streamEstimateDistanceFromFirstEverEntry`).
//!
//! Time: `XADD *` makes its ID from the call's time and the stream's top
//! (`max(now, top's ms)`, so IDs never go back even if a clock does), and deliveries,
//! claims and consumers' seen times are the call's time; `XPENDING` measures idle times
//! from the time the read ran. That time is the one the primary gave its model for the
//! call (a record's `time_ms`, a read's `ran_at_ms`), as for expiry, so every one of these
//! replies can be compared exactly. tandem's model runs a call at the later of that time
//! and the database's clock mark (`RedisModel::now_ms`), the latest time a primary stamped
//! (in steps of 100 ms); the simulated nodes share one clock, so the mark is never later.

use std::collections::BTreeMap;

use super::{Reference, Value, WRONGTYPE, array, bulk, integer, null, simple};

const ID_NOT_GREATER: &str =
    "ERR The ID specified in XADD is equal or smaller than the target stream top item";
const ID_ZERO: &str = "ERR The ID specified in XADD must be greater than 0-0";
const GROUP_NEEDS_KEY: &str = "ERR The XGROUP subcommand requires the key to exist. Note that \
                               for CREATE you may want to use the MKSTREAM option to create an \
                               empty stream automatically.";
const BUSYGROUP: &str = "BUSYGROUP Consumer Group name already exists";

/// Whether `name` is a stream command (the workload's are all named `X…`).
pub(super) fn is_stream_command(name: &[u8]) -> bool {
    name.first() == Some(&b'X')
}

/// A stream entry's ID.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct StreamId {
    ms: u64,
    seq: u64,
}

impl StreamId {
    const MIN: StreamId = StreamId { ms: 0, seq: 0 };
    const MAX: StreamId = StreamId {
        ms: u64::MAX,
        seq: u64::MAX,
    };

    /// `ms-seq`, or `ms` with `missing_seq`, as the workload writes them.
    fn parse(text: &[u8], missing_seq: u64) -> StreamId {
        let text = std::str::from_utf8(text).expect("the workload writes ASCII IDs");
        let number = |part: &str| part.parse::<u64>().expect("the workload writes IDs");
        match text.split_once('-') {
            Some((ms, seq)) => StreamId {
                ms: number(ms),
                seq: number(seq),
            },
            None => StreamId {
                ms: number(text),
                seq: missing_seq,
            },
        }
    }

    /// The ID after this one, if any.
    fn next(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (u64::MAX, u64::MAX) => None,
            (ms, u64::MAX) => Some(StreamId { ms: ms + 1, seq: 0 }),
            (ms, seq) => Some(StreamId { ms, seq: seq + 1 }),
        }
    }

    /// The ID before this one, if any.
    fn prev(self) -> Option<StreamId> {
        match (self.ms, self.seq) {
            (0, 0) => None,
            (ms, 0) => Some(StreamId {
                ms: ms - 1,
                seq: u64::MAX,
            }),
            (ms, seq) => Some(StreamId { ms, seq: seq - 1 }),
        }
    }

    fn text(self) -> String {
        format!("{}-{}", self.ms, self.seq)
    }
}

/// A range bound as `XRANGE`, `XPENDING` and `XAUTOCLAIM` read it: `-`, `+`, an ID (a
/// missing sequence is `missing_seq`), or `(` and an ID for an exclusive bound (moved to
/// the next or previous ID, by `exclusive`); an error if there is none.
fn bound(
    text: &[u8],
    missing_seq: u64,
    exclusive: fn(StreamId) -> Option<StreamId>,
    what: &str,
) -> Result<StreamId, String> {
    match text {
        b"-" => Ok(StreamId::MIN),
        b"+" => Ok(StreamId::MAX),
        [b'(', id @ ..] => exclusive(StreamId::parse(id, missing_seq))
            .ok_or_else(|| format!("ERR invalid {what} ID for the interval")),
        id => Ok(StreamId::parse(id, missing_seq)),
    }
}

/// A stream.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Stream {
    /// Each entry's field/value pairs, flat.
    entries: BTreeMap<StreamId, Vec<Vec<u8>>>,
    /// The last ID `XADD` made (Redis's `last_id`): no later ID may be smaller.
    last_id: StreamId,
    /// The greatest ID `XDEL` deleted (trimming does not count).
    max_deleted: StreamId,
    /// Entries ever added.
    entries_added: u64,
    groups: BTreeMap<Vec<u8>, Group>,
}

/// A consumer group.
#[derive(Clone, Debug, Default, PartialEq)]
struct Group {
    /// The last ID delivered to the group.
    last_id: StreamId,
    /// Entries the group read, when known (Redis's `SCG_INVALID_ENTRIES_READ` is `None`).
    entries_read: Option<i64>,
    /// Each consumer's last seen time, Unix ms.
    consumers: BTreeMap<Vec<u8>, u64>,
    /// The pending entries, each with its delivery.
    pending: BTreeMap<StreamId, Delivery>,
}

/// A pending entry's delivery (Redis's NACK).
#[derive(Clone, Debug, PartialEq)]
struct Delivery {
    consumer: Vec<u8>,
    time_ms: u64,
    count: u64,
}

/// How a trim cuts the stream.
#[derive(Clone, Copy, Debug)]
enum Trim {
    MaxLen(u64),
    MinId(StreamId),
}

impl Trim {
    /// `MAXLEN|MINID [=] threshold` at `words[*at]`, if there; `*at` moves past it.
    fn parse(words: &[Vec<u8>], at: &mut usize) -> Option<Trim> {
        let by = words[*at].clone();
        if by != b"MAXLEN" && by != b"MINID" {
            return None;
        }
        *at += 1;
        if words[*at] == b"=" {
            *at += 1;
        }
        let threshold = &words[*at];
        *at += 1;
        Some(if by == b"MAXLEN" {
            Trim::MaxLen(super::integer_arg(threshold) as u64)
        } else {
            Trim::MinId(StreamId::parse(threshold, 0))
        })
    }
}

impl Stream {
    /// The first entry's ID, 0-0 when empty (Redis's `first_id`).
    fn first_id(&self) -> StreamId {
        self.entries.keys().next().copied().unwrap_or(StreamId::MIN)
    }

    fn len(&self) -> u64 {
        self.entries.len() as u64
    }

    /// Whether an entry at or after `from` was deleted (`streamRangeHasTombstones`).
    fn has_tombstones_from(&self, from: StreamId) -> bool {
        if self.entries.is_empty() || self.max_deleted == StreamId::MIN {
            return false;
        }
        self.first_id() <= self.max_deleted && from <= self.max_deleted
    }

    /// How many entries were added up to `id`, when that can be known
    /// (`streamEstimateDistanceFromFirstEverEntry`).
    fn estimate_entries_read(&self, id: StreamId) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if self.entries.is_empty() && id <= self.last_id {
            return Some(added);
        }
        match id.cmp(&self.last_id) {
            std::cmp::Ordering::Equal => return Some(added),
            std::cmp::Ordering::Greater => return None,
            std::cmp::Ordering::Less => {}
        }
        let first = self.first_id();
        if self.max_deleted == StreamId::MIN || self.max_deleted < first {
            let before_first = added - self.len() as i64;
            match id.cmp(&first) {
                std::cmp::Ordering::Less => return Some(before_first),
                std::cmp::Ordering::Equal => return Some(before_first + 1),
                std::cmp::Ordering::Greater => {}
            }
        }
        None
    }

    /// A group's lag (`streamReplyWithCGLag`), when it can be known.
    fn lag(&self, group: &Group) -> Option<i64> {
        let added = self.entries_added as i64;
        if self.entries_added == 0 {
            return Some(0);
        }
        if let Some(read) = group.entries_read
            && !self.has_tombstones_from(group.last_id)
        {
            return Some(added - read);
        }
        self.estimate_entries_read(group.last_id)
            .map(|read| added - read)
    }

    /// Trims from the head; returns how many entries went.
    fn trim(&mut self, trim: Trim) -> i64 {
        let mut deleted = 0;
        while let Some((&first, _)) = self.entries.first_key_value() {
            let goes = match trim {
                Trim::MaxLen(max) => self.len() > max,
                Trim::MinId(min) => first < min,
            };
            if !goes {
                break;
            }
            self.entries.remove(&first);
            deleted += 1;
        }
        deleted
    }

    /// The ID `XADD` adds with `given` (`None` for `*`, else the ID and whether its
    /// sequence was given) at `now_ms`, or Redis's refusal.
    fn next_id(&self, given: Option<(StreamId, bool)>, now_ms: u64) -> Result<StreamId, String> {
        let last = self.last_id;
        let id = match given {
            None if now_ms > last.ms => StreamId { ms: now_ms, seq: 0 },
            None => last.next().expect("the workload never reaches the last ID"),
            Some((id, true)) => id,
            Some((id, false)) if id.ms == last.ms => StreamId {
                ms: id.ms,
                seq: last.seq + 1,
            },
            Some((id, false)) => id,
        };
        if id <= last {
            return Err(ID_NOT_GREATER.into());
        }
        Ok(id)
    }

    /// The stream as a dump shows it: its fields, its entries, then each group with its
    /// consumers and pending entries (see `super::super::dump_database`).
    pub(super) fn dump(&self) -> Vec<Vec<u8>> {
        let mut lines = vec![format!(
            "length {} last-generated-id {} max-deleted-entry-id {} entries-added {} \
             recorded-first-entry-id {}",
            self.len(),
            self.last_id.text(),
            self.max_deleted.text(),
            self.entries_added,
            self.first_id().text()
        )];
        for (id, fields) in &self.entries {
            lines.push(entry_line(&id.text(), fields));
        }
        for (name, group) in &self.groups {
            let name = String::from_utf8_lossy(name);
            lines.push(group_line(
                &name,
                &group.last_id.text(),
                group.entries_read,
                self.lag(group),
                group.pending.len(),
            ));
            for (id, delivery) in &group.pending {
                lines.push(format!(
                    "pending {name} {} consumer {} delivery-time {} delivery-count {}",
                    id.text(),
                    String::from_utf8_lossy(&delivery.consumer),
                    delivery.time_ms,
                    delivery.count
                ));
            }
            for (consumer, seen_ms) in &group.consumers {
                let held = group.held_by(consumer).count();
                lines.push(consumer_line(
                    &name,
                    &String::from_utf8_lossy(consumer),
                    *seen_ms,
                    held,
                ));
            }
        }
        lines.into_iter().map(String::into_bytes).collect()
    }
}

/// Entry `id`'s reply: its ID and its fields.
fn reply_entry(entries: &BTreeMap<StreamId, Vec<Vec<u8>>>, id: StreamId, out: &mut Vec<u8>) {
    array(out, 2);
    bulk(out, id.text().as_bytes());
    let fields = &entries[&id];
    array(out, fields.len());
    for word in fields {
        bulk(out, word);
    }
}

/// A dump's line for an entry (the database's side writes the same).
pub(crate) fn entry_line(id: &str, fields: &[Vec<u8>]) -> String {
    let fields: Vec<String> = fields
        .iter()
        .map(|word| String::from_utf8_lossy(word).into_owned())
        .collect();
    format!("entry {id} {}", fields.join(" "))
}

/// A dump's line for a group.
pub(crate) fn group_line(
    name: &str,
    last_id: &str,
    entries_read: Option<i64>,
    lag: Option<i64>,
    pending: usize,
) -> String {
    let shown = |n: Option<i64>| n.map_or("nil".to_owned(), |n| n.to_string());
    format!(
        "group {name} last-delivered-id {last_id} entries-read {} lag {} pel-count {pending}",
        shown(entries_read),
        shown(lag)
    )
}

/// A dump's line for a consumer.
pub(crate) fn consumer_line(group: &str, name: &str, seen_ms: u64, held: usize) -> String {
    format!("consumer {group} {name} seen-time {seen_ms} pel-count {held}")
}

impl Group {
    /// The pending entries `consumer` holds, by ID.
    fn held_by<'a>(
        &'a self,
        consumer: &'a [u8],
    ) -> impl Iterator<Item = (&'a StreamId, &'a Delivery)> + 'a {
        self.pending
            .iter()
            .filter(move |(_, delivery)| delivery.consumer == consumer)
    }

    /// Consumer `name`, seen at `now_ms` (created if missing).
    fn seen(&mut self, name: &[u8], now_ms: u64) {
        self.consumers.insert(name.to_vec(), now_ms);
    }

    /// Gives pending entry `id` to `consumer` at `now_ms`, its count raised unless
    /// `justid` (a claim).
    fn claim(&mut self, id: StreamId, consumer: &[u8], now_ms: u64, justid: bool) {
        let delivery = self.pending.get_mut(&id).expect("a pending entry");
        delivery.consumer = consumer.to_vec();
        delivery.time_ms = now_ms;
        if !justid {
            delivery.count += 1;
        }
    }
}

impl Reference {
    /// The stream at `key` at `now_ms`, if any; `WRONGTYPE` if it holds another type.
    fn stream(&self, key: &[u8], now_ms: u64) -> Result<Option<&Stream>, String> {
        match self.visible(key, now_ms) {
            None => Ok(None),
            Some(Value::Stream(stream)) => Ok(Some(stream)),
            Some(_) => Err(WRONGTYPE.into()),
        }
    }

    /// The stream at `key` at `now_ms` to change, if any; `WRONGTYPE` if it holds another
    /// type.
    fn stream_mut(&mut self, key: &[u8], now_ms: u64) -> Result<Option<&mut Stream>, String> {
        match self.live(key, now_ms).map(|entry| &mut entry.value) {
            None => Ok(None),
            Some(Value::Stream(stream)) => Ok(Some(stream)),
            Some(_) => Err(WRONGTYPE.into()),
        }
    }

    /// The stream at `words[1]` to change and the name of its group `words[2]`, or Redis's
    /// `NOGROUP` error if either is missing.
    fn group_mut(
        &mut self,
        words: &[Vec<u8>],
        now_ms: u64,
    ) -> Result<(&mut Stream, Vec<u8>), String> {
        let (key, name) = (&words[1], &words[2]);
        let missing = || {
            format!(
                "NOGROUP No such key '{}' or consumer group '{}'",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(name)
            )
        };
        match self.stream_mut(key, now_ms)? {
            Some(stream) if stream.groups.contains_key(name) => Ok((stream, name.clone())),
            _ => Err(missing()),
        }
    }

    /// Runs a stream command, writing its reply to `out`; an error is returned (and
    /// nothing changed) instead.
    pub(super) fn stream_command(
        &mut self,
        words: &[Vec<u8>],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        match words[0].as_slice() {
            b"XADD" => self.xadd(words, now, out),
            b"XDEL" => {
                let Some(stream) = self.stream_mut(&words[1], now)? else {
                    integer(out, 0);
                    return Ok(());
                };
                let mut deleted = 0;
                for id in words[2..].iter().map(|text| StreamId::parse(text, 0)) {
                    if stream.entries.remove(&id).is_some() {
                        stream.max_deleted = stream.max_deleted.max(id);
                        deleted += 1;
                    }
                }
                integer(out, deleted);
                Ok(())
            }
            b"XTRIM" => {
                let trim = Trim::parse(words, &mut 2).expect("XTRIM's strategy");
                let deleted = match self.stream_mut(&words[1], now)? {
                    Some(stream) => stream.trim(trim),
                    None => 0,
                };
                integer(out, deleted);
                Ok(())
            }
            b"XGROUP" => self.xgroup(words, now, out),
            b"XREADGROUP" => self.xreadgroup(words, now, out),
            b"XACK" => {
                let group = match self.stream_mut(&words[1], now)? {
                    Some(stream) => stream.groups.get_mut(&words[2]),
                    None => None,
                };
                let acknowledged = group.map_or(0, |group| {
                    let ids = words[3..].iter().map(|text| StreamId::parse(text, 0));
                    ids.filter(|id| group.pending.remove(id).is_some()).count()
                });
                integer(out, acknowledged as i64);
                Ok(())
            }
            b"XCLAIM" => self.xclaim(words, now, out),
            b"XAUTOCLAIM" => self.xautoclaim(words, now, out),
            _ => self.stream_read(words, now, out),
        }
    }

    /// `XADD key [NOMKSTREAM] [MAXLEN|MINID [=] threshold] id|* field value…`.
    fn xadd(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let mut at = 2;
        let no_mkstream = words[at] == b"NOMKSTREAM";
        at += usize::from(no_mkstream);
        let trim = Trim::parse(words, &mut at);
        let given = match words[at].as_slice() {
            b"*" => None,
            [ms @ .., b'-', b'*'] => Some((StreamId::parse(ms, 0), false)),
            id => Some((StreamId::parse(id, 0), true)),
        };
        // Refused before the key is looked up, so that no empty stream is left behind.
        if given == Some((StreamId::MIN, true)) {
            return Err(ID_ZERO.into());
        }
        let id = match self.stream_mut(&words[1], now)? {
            None if no_mkstream => {
                null(out);
                return Ok(());
            }
            None => Stream::default().next_id(given, now)?,
            Some(stream) => stream.next_id(given, now)?,
        };
        let empty = Value::Stream(Box::default());
        let Value::Stream(stream) = self.live_or_create(&words[1], now, empty)? else {
            unreachable!("checked: a stream")
        };
        stream.entries.insert(id, words[at + 1..].to_vec());
        stream.last_id = id;
        stream.entries_added += 1;
        if let Some(trim) = trim {
            stream.trim(trim);
        }
        bulk(out, id.text().as_bytes());
        Ok(())
    }

    /// `XGROUP CREATE key group id|$ [MKSTREAM]`, `XGROUP DESTROY key group`, `XGROUP
    /// CREATECONSUMER key group consumer` and `XGROUP DELCONSUMER key group consumer`.
    fn xgroup(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let (sub, key, name) = (words[1].as_slice(), &words[2], &words[3]);
        let mkstream = sub == b"CREATE" && words.get(5).is_some_and(|word| word == b"MKSTREAM");
        let exists = self.stream_mut(key, now)?.is_some();
        if !exists && !mkstream {
            return Err(GROUP_NEEDS_KEY.into());
        }
        let empty = Value::Stream(Box::default());
        let Value::Stream(stream) = self.live_or_create(key, now, empty)? else {
            unreachable!("checked: a stream")
        };
        if sub == b"CREATE" {
            if stream.groups.contains_key(name) {
                return Err(BUSYGROUP.into());
            }
            let last_id = match words[4].as_slice() {
                b"$" => stream.last_id,
                id => StreamId::parse(id, 0),
            };
            let group = Group {
                last_id,
                ..Group::default()
            };
            stream.groups.insert(name.clone(), group);
            simple(out, "OK");
            return Ok(());
        }
        if sub == b"DESTROY" {
            integer(out, i64::from(stream.groups.remove(name).is_some()));
            return Ok(());
        }
        let Some(group) = stream.groups.get_mut(name) else {
            return Err(format!(
                "NOGROUP No such consumer group '{}' for key name '{}'",
                String::from_utf8_lossy(name),
                String::from_utf8_lossy(key)
            ));
        };
        let consumer = &words[4];
        match sub {
            b"CREATECONSUMER" if group.consumers.contains_key(consumer) => integer(out, 0),
            b"CREATECONSUMER" => {
                group.seen(consumer, now);
                integer(out, 1);
            }
            b"DELCONSUMER" if group.consumers.remove(consumer).is_none() => integer(out, 0),
            b"DELCONSUMER" => {
                let before = group.pending.len();
                group
                    .pending
                    .retain(|_, delivery| delivery.consumer != *consumer);
                integer(out, (before - group.pending.len()) as i64);
            }
            other => panic!(
                "the workload has no XGROUP {}",
                String::from_utf8_lossy(other)
            ),
        }
        Ok(())
    }

    /// `XREADGROUP GROUP group consumer [COUNT n] [NOACK] STREAMS key >|id`.
    fn xreadgroup(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let (group_name, consumer) = (&words[2], &words[3]);
        let (mut count, mut noack, mut at) = (usize::MAX, false, 4);
        while words[at] != b"STREAMS" {
            match words[at].as_slice() {
                b"COUNT" => {
                    count = super::integer_arg(&words[at + 1]) as usize;
                    at += 1;
                }
                b"NOACK" => noack = true,
                other => panic!(
                    "the workload's XREADGROUP has no option {}",
                    String::from_utf8_lossy(other)
                ),
            }
            at += 1;
        }
        let (key, from) = (&words[at + 1], words[at + 2].as_slice());
        let found = match self.stream_mut(key, now)? {
            Some(stream) if stream.groups.contains_key(group_name) => Some(stream),
            _ => None,
        };
        let Some(stream) = found else {
            return Err(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP \
                 option",
                String::from_utf8_lossy(key),
                String::from_utf8_lossy(group_name)
            ));
        };
        let mut entries = Vec::new();
        if from == b">" {
            let group = &stream.groups[group_name];
            // Served only when the stream holds an entry past the group's cursor; else
            // nothing is read, and no consumer is created or seen.
            let Some((&last, _)) = stream.entries.last_key_value() else {
                out.extend_from_slice(b"*-1\r\n");
                return Ok(());
            };
            if last <= group.last_id {
                out.extend_from_slice(b"*-1\r\n");
                return Ok(());
            }
            let after = group.last_id.next().expect("below the last entry");
            stream.read_new(
                group_name,
                consumer,
                (after, count),
                noack,
                now,
                &mut entries,
            );
        } else {
            let after = StreamId::parse(from, 0)
                .next()
                .expect("an ID below the last");
            stream.read_history(group_name, consumer, (after, count), now, &mut entries);
        }
        array(out, 1);
        array(out, 2);
        bulk(out, key);
        out.extend_from_slice(&entries);
        Ok(())
    }

    /// `XCLAIM key group consumer 0 id… [JUSTID]`.
    fn xclaim(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        assert_eq!(
            words[4], b"0",
            "the workload's claims have no minimum idle time"
        );
        let justid = words.last().is_some_and(|word| word == b"JUSTID");
        let ids = &words[5..words.len() - usize::from(justid)];
        let consumer = &words[3];
        let (stream, name) = self.group_mut(words, now)?;
        let mut claimed = Vec::new();
        for id in ids.iter().map(|text| StreamId::parse(text, 0)) {
            let group = stream.groups.get_mut(&name).expect("checked: the group");
            if !stream.entries.contains_key(&id) {
                // A pending entry deleted from the stream is dropped.
                group.pending.remove(&id);
                continue;
            }
            if !group.pending.contains_key(&id) {
                continue;
            }
            group.seen(consumer, now);
            group.claim(id, consumer, now, justid);
            claimed.push(id);
        }
        array(out, claimed.len());
        for id in claimed {
            if justid {
                bulk(out, id.text().as_bytes());
            } else {
                reply_entry(&stream.entries, id, out);
            }
        }
        Ok(())
    }

    /// `XAUTOCLAIM key group consumer 0 start [COUNT n] [JUSTID]`.
    fn xautoclaim(&mut self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        assert_eq!(
            words[4], b"0",
            "the workload's claims have no minimum idle time"
        );
        let start = bound(&words[5], 0, StreamId::next, "start")?;
        let (mut count, mut justid) = (100, false);
        let mut at = 6;
        while at < words.len() {
            match words[at].as_slice() {
                b"COUNT" => {
                    count = super::integer_arg(&words[at + 1]);
                    at += 1;
                }
                b"JUSTID" => justid = true,
                other => panic!(
                    "the workload's XAUTOCLAIM has no option {}",
                    String::from_utf8_lossy(other)
                ),
            }
            at += 1;
        }
        let consumer = &words[3];
        let (stream, name) = self.group_mut(words, now)?;
        let group = stream.groups.get_mut(&name).expect("checked: the group");
        let ids: Vec<StreamId> = group.pending.range(start..).map(|(id, _)| *id).collect();
        let (mut claimed, mut deleted, mut examined) = (Vec::new(), Vec::new(), 0);
        // Redis looks at ten entries per one it may claim, and counts the deleted ones it
        // drops against the count.
        let mut attempts = count * 10;
        while attempts > 0 && count > 0 && examined < ids.len() {
            attempts -= 1;
            let id = ids[examined];
            examined += 1;
            if stream.entries.contains_key(&id) {
                group.seen(consumer, now);
                group.claim(id, consumer, now, justid);
                claimed.push(id);
            } else {
                group.pending.remove(&id);
                deleted.push(id);
            }
            count -= 1;
        }
        let cursor = ids.get(examined).copied().unwrap_or(StreamId::MIN);
        array(out, 3);
        bulk(out, cursor.text().as_bytes());
        array(out, claimed.len());
        for id in claimed {
            if justid {
                bulk(out, id.text().as_bytes());
            } else {
                reply_entry(&stream.entries, id, out);
            }
        }
        array(out, deleted.len());
        for id in deleted {
            bulk(out, id.text().as_bytes());
        }
        Ok(())
    }

    /// Runs a read-only stream command, writing its reply to `out`, or returns its error.
    pub(super) fn stream_read(
        &self,
        words: &[Vec<u8>],
        now: u64,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        match words[0].as_slice() {
            b"XLEN" => {
                let len = self.stream(&words[1], now)?.map_or(0, Stream::len);
                integer(out, len as i64);
                Ok(())
            }
            b"XRANGE" => self.xrange(words, now, false, out),
            b"XREVRANGE" => self.xrange(words, now, true, out),
            b"XPENDING" => self.xpending(words, now, out),
            b"XINFO" => {
                assert_eq!(words[1], b"GROUPS", "the workload's XINFO");
                let stream = self.stream(&words[2], now)?.ok_or("ERR no such key")?;
                array(out, stream.groups.len());
                for (name, group) in &stream.groups {
                    array(out, 12);
                    bulk(out, b"name");
                    bulk(out, name);
                    bulk(out, b"consumers");
                    integer(out, group.consumers.len() as i64);
                    bulk(out, b"pending");
                    integer(out, group.pending.len() as i64);
                    bulk(out, b"last-delivered-id");
                    bulk(out, group.last_id.text().as_bytes());
                    bulk(out, b"entries-read");
                    integer_or_null(out, group.entries_read);
                    bulk(out, b"lag");
                    integer_or_null(out, stream.lag(group));
                }
                Ok(())
            }
            other => panic!(
                "the reference has no command {}",
                String::from_utf8_lossy(other)
            ),
        }
    }

    /// `XRANGE key start end [COUNT n]`, or `XREVRANGE key end start [COUNT n]` (`rev`).
    fn xrange(
        &self,
        words: &[Vec<u8>],
        now: u64,
        rev: bool,
        out: &mut Vec<u8>,
    ) -> Result<(), String> {
        let (start_at, end_at) = if rev { (3, 2) } else { (2, 3) };
        let start = bound(&words[start_at], 0, StreamId::next, "start")?;
        let end = bound(&words[end_at], u64::MAX, StreamId::prev, "end")?;
        let count = match words.get(4).map(Vec::as_slice) {
            Some(b"COUNT") => super::integer_arg(&words[5]).max(0) as usize,
            None => usize::MAX,
            Some(other) => panic!(
                "the workload's XRANGE has no option {}",
                String::from_utf8_lossy(other)
            ),
        };
        let Some(stream) = self.stream(&words[1], now)? else {
            array(out, 0);
            return Ok(());
        };
        if count == 0 {
            out.extend_from_slice(b"*-1\r\n");
            return Ok(());
        }
        let ids: Vec<StreamId> = if start > end {
            Vec::new()
        } else if rev {
            let range = stream.entries.range(start..=end).rev();
            range.take(count).map(|(id, _)| *id).collect()
        } else {
            let range = stream.entries.range(start..=end);
            range.take(count).map(|(id, _)| *id).collect()
        };
        array(out, ids.len());
        for id in ids {
            reply_entry(&stream.entries, id, out);
        }
        Ok(())
    }

    /// `XPENDING key group`, or `XPENDING key group start end count [consumer]`.
    fn xpending(&self, words: &[Vec<u8>], now: u64, out: &mut Vec<u8>) -> Result<(), String> {
        let start = words
            .get(3)
            .map(|text| bound(text, 0, StreamId::next, "start"));
        let end = words
            .get(4)
            .map(|text| bound(text, u64::MAX, StreamId::prev, "end"));
        let (start, end) = (start.transpose()?, end.transpose()?);
        let stream = self.stream(&words[1], now)?;
        let Some(group) = stream.and_then(|stream| stream.groups.get(&words[2])) else {
            return Err(format!(
                "NOGROUP No such key '{}' or consumer group '{}'",
                String::from_utf8_lossy(&words[1]),
                String::from_utf8_lossy(&words[2])
            ));
        };
        let (Some(start), Some(end)) = (start, end) else {
            group.reply_pending_summary(out);
            return Ok(());
        };
        let count = super::integer_arg(&words[5]).max(0) as usize;
        let consumer = words.get(6);
        if consumer.is_some_and(|name| !group.consumers.contains_key(name)) || start > end {
            array(out, 0);
            return Ok(());
        }
        let pending: Vec<(&StreamId, &Delivery)> = group
            .pending
            .range(start..=end)
            .filter(|(_, delivery)| consumer.is_none_or(|name| delivery.consumer == *name))
            .take(count)
            .collect();
        array(out, pending.len());
        for (id, delivery) in pending {
            array(out, 4);
            bulk(out, id.text().as_bytes());
            bulk(out, &delivery.consumer);
            integer(out, now as i64 - delivery.time_ms as i64);
            integer(out, delivery.count as i64);
        }
        Ok(())
    }
}

impl Group {
    /// `XPENDING key group`'s reply: how many entries are pending, the smallest and
    /// greatest of their IDs, and how many each consumer holds (those holding any).
    fn reply_pending_summary(&self, out: &mut Vec<u8>) {
        array(out, 4);
        integer(out, self.pending.len() as i64);
        let (Some((first, _)), Some((last, _))) = (
            self.pending.first_key_value(),
            self.pending.last_key_value(),
        ) else {
            null(out);
            null(out);
            out.extend_from_slice(b"*-1\r\n");
            return;
        };
        bulk(out, first.text().as_bytes());
        bulk(out, last.text().as_bytes());
        let holding: Vec<(&Vec<u8>, usize)> = self
            .consumers
            .keys()
            .map(|name| (name, self.held_by(name).count()))
            .filter(|&(_, held)| held > 0)
            .collect();
        array(out, holding.len());
        for (name, held) in holding {
            array(out, 2);
            bulk(out, name);
            bulk(out, held.to_string().as_bytes());
        }
    }
}

impl Stream {
    /// Delivers the entries from `after` on, at most `count`, to `consumer` of group `name`
    /// (Redis's `streamReplyWithRange` with a group): the group's cursor and read counter
    /// move past them and, unless `noack`, each becomes the consumer's pending entry.
    fn read_new(
        &mut self,
        name: &[u8],
        consumer: &[u8],
        (after, count): (StreamId, usize),
        noack: bool,
        now: u64,
        out: &mut Vec<u8>,
    ) {
        let ids: Vec<StreamId> = self
            .entries
            .range(after..)
            .take(count)
            .map(|(id, _)| *id)
            .collect();
        let mut group = self.groups.remove(name).expect("checked: the group");
        group.seen(consumer, now);
        array(out, ids.len());
        for &id in &ids {
            if id > group.last_id {
                group.entries_read = match group.entries_read {
                    Some(read) if !self.has_tombstones_from(id) => Some(read + 1),
                    _ => self.estimate_entries_read(id),
                };
                group.last_id = id;
            }
            if !noack {
                let delivery = Delivery {
                    consumer: consumer.to_vec(),
                    time_ms: now,
                    count: 1,
                };
                group.pending.insert(id, delivery);
            }
            reply_entry(&self.entries, id, out);
        }
        self.groups.insert(name.to_vec(), group);
    }

    /// The pending entries `consumer` of group `name` holds from `after` on, at most
    /// `count` (Redis's `streamReplyWithRangeFromConsumerPEL`): each entry still in the
    /// stream is delivered again, one deleted since is its ID and a null.
    fn read_history(
        &mut self,
        name: &[u8],
        consumer: &[u8],
        (after, count): (StreamId, usize),
        now: u64,
        out: &mut Vec<u8>,
    ) {
        let group = self.groups.get_mut(name).expect("checked: the group");
        group.seen(consumer, now);
        let ids: Vec<StreamId> = group
            .held_by(consumer)
            .filter(|(id, _)| **id >= after)
            .take(count)
            .map(|(id, _)| *id)
            .collect();
        array(out, ids.len());
        for id in ids {
            if self.entries.contains_key(&id) {
                let delivery = group.pending.get_mut(&id).expect("held");
                delivery.time_ms = now;
                delivery.count += 1;
                reply_entry(&self.entries, id, out);
            } else {
                array(out, 2);
                bulk(out, id.text().as_bytes());
                out.extend_from_slice(b"*-1\r\n");
            }
        }
    }
}

/// An integer, or a null when it is not known.
fn integer_or_null(out: &mut Vec<u8>, n: Option<i64>) {
    match n {
        Some(n) => integer(out, n),
        None => null(out),
    }
}
