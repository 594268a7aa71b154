//! `XPENDING` (t_stream.c's `xpendingCommand`) and `XINFO` (`xinfoCommand`): the reads of
//! groups. Idle times are measured against the call's clock (`Ctx::now_ms`).

use super::groups::{self, Consumer, ENTRIES_READ_UNKNOWN, Group, Pending};
use super::stream::{Stream, StreamId, radix_tree_nodes};
use super::{
    get_stream, long_long, no_group, no_key_or_group, parse_interval, reply_entry, reply_help,
    reply_id, reply_range, subcommand_syntax,
};
use crate::cmd::{CmdError, Ctx, arg, subcommand_error};
use crate::mem::Mem;
use crate::resp::{Argv, ReplyWriter};

/// The range `XPENDING`'s extended form asks for.
struct PendingRange<'a> {
    min_idle_ms: i64,
    start: StreamId,
    end: StreamId,
    count: u64,
    consumer: Option<&'a [u8]>,
}

/// Redis's parse of `XPENDING`'s range, in its order (count first, then the bounds).
fn parse_pending_range(argv: &Argv) -> Result<PendingRange<'_>, CmdError> {
    let (mut at, mut min_idle_ms) = (3, 0);
    if arg(argv, 3).eq_ignore_ascii_case(b"IDLE") {
        min_idle_ms = long_long(arg(argv, 4))?;
        if argv.len() < 8 {
            return Err(CmdError::SYNTAX);
        }
        at += 2;
    }
    let count = long_long(arg(argv, at + 2))?.max(0) as u64;
    let (mut start, open) = parse_interval(arg(argv, at), 0)?;
    if open {
        start = start
            .next()
            .ok_or(CmdError::fixed("ERR invalid start ID for the interval"))?;
    }
    let (mut end, open) = parse_interval(arg(argv, at + 1), u64::MAX)?;
    if open {
        end = end
            .prev()
            .ok_or(CmdError::fixed("ERR invalid end ID for the interval"))?;
    }
    Ok(PendingRange {
        min_idle_ms,
        start,
        end,
        count,
        consumer: (at + 3 < argv.len()).then(|| arg(argv, at + 3)),
    })
}

/// `XPENDING key group [[IDLE min-idle] start end count [consumer]]`.
pub fn xpending(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if argv.len() != 3 && !(6..=9).contains(&argv.len()) {
        return Err(CmdError::SYNTAX);
    }
    let range = if argv.len() >= 6 {
        Some(parse_pending_range(argv)?)
    } else {
        None
    };
    let (name, group_name) = (arg(argv, 1), arg(argv, 2));
    let stream = get_stream(ctx, name)?.map(|key| Stream::of(&key));
    let Some(group) = stream.and_then(|stream| groups::find(&ctx.access, stream, group_name))
    else {
        return Err(no_key_or_group(name, group_name));
    };
    let mem = &ctx.access;
    match range {
        None => reply_pending_summary(mem, out, group),
        Some(range) => reply_pending_range(mem, out, group, &range, ctx.now_ms as i64),
    }
    Ok(())
}

/// `XPENDING key group`: the count, the first and last IDs, each consumer's count.
fn reply_pending_summary(mem: &impl Mem, out: &mut ReplyWriter<'_>, group: Group) {
    let pending = group.pending(mem);
    out.array(4);
    out.integer(pending.len(mem) as i64);
    if pending.len(mem) == 0 {
        out.null();
        out.null();
        out.null_array();
        return;
    }
    reply_id(
        out,
        StreamId::from_key(skiplist_key(mem, pending.first(mem))),
    );
    reply_id(
        out,
        StreamId::from_key(skiplist_key(mem, pending.last(mem))),
    );
    let holders: Vec<(Consumer, u64)> = group
        .consumers(mem)
        .nodes(mem)
        .into_iter()
        .map(|node| Consumer { node })
        .map(|consumer| (consumer, consumer.pending(mem).len(mem)))
        .filter(|&(_, held)| held > 0)
        .collect();
    out.array(holders.len());
    for (consumer, held) in holders {
        out.array(2);
        out.bulk(consumer.name(mem));
        out.bulk_integer(held as i64);
    }
}

fn skiplist_key(mem: &impl Mem, node: usize) -> &[u8] {
    super::skiplist::SkipList::key(mem, node)
}

/// `XPENDING`'s extended form: each pending entry in the range (of one consumer's, if
/// named) idle at least the minimum, with its consumer, idle time and delivery count.
fn reply_pending_range(
    mem: &impl Mem,
    out: &mut ReplyWriter<'_>,
    group: Group,
    range: &PendingRange<'_>,
    now_ms: i64,
) {
    let (list, of_consumer) = match range.consumer {
        Some(name) => match group.find_consumer(mem, name) {
            Some(consumer) => (consumer.pending(mem), true),
            None => {
                out.array(0);
                return;
            }
        },
        None => (group.pending(mem), false),
    };
    let mut found = Vec::new();
    let mut node = list.seek_ge(mem, &range.start.key());
    while (found.len() as u64) < range.count && node != 0 {
        if StreamId::from_key(skiplist_key(mem, node)) > range.end {
            break;
        }
        let entry = if of_consumer {
            Pending::of_consumer_node(mem, node)
        } else {
            Pending { node }
        };
        let idle_ms = now_ms.wrapping_sub(entry.delivery(mem).time_ms);
        if range.min_idle_ms == 0 || idle_ms >= range.min_idle_ms {
            found.push(entry);
        }
        node = list.next(mem, node);
    }
    out.array(found.len());
    for entry in found {
        let delivery = entry.delivery(mem);
        out.array(4);
        reply_id(out, entry.id(mem));
        out.bulk(entry.consumer(mem).name(mem));
        out.integer(now_ms.wrapping_sub(delivery.time_ms).max(0));
        out.integer(delivery.count as i64);
    }
}

const XINFO_HELP: &[&str] = &[
    "CONSUMERS <key> <groupname>",
    "    Show consumers of <groupname>.",
    "GROUPS <key>",
    "    Show the stream consumer groups.",
    "STREAM <key> [FULL [COUNT <count>]",
    "    Show information about the stream.",
];

/// `XINFO CONSUMERS key group`, `XINFO GROUPS key`, `XINFO STREAM key [FULL [COUNT n]]`.
pub fn xinfo(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if let Some(refusal) = subcommand_error("XINFO", argv) {
        return Err(refusal);
    }
    let sub = arg(argv, 1).to_ascii_uppercase();
    if sub == b"HELP" {
        reply_help(out, "XINFO", XINFO_HELP);
        return Ok(());
    }
    let name = arg(argv, 2);
    let Some(key) = get_stream(ctx, name)? else {
        return Err(CmdError::NO_SUCH_KEY);
    };
    let (stream, mem, now_ms) = (Stream::of(&key), &ctx.access, ctx.now_ms as i64);
    match sub.as_slice() {
        b"CONSUMERS" => {
            let group_name = arg(argv, 3);
            let group =
                groups::find(mem, stream, group_name).ok_or_else(|| no_group(name, group_name))?;
            reply_consumers(mem, out, group, now_ms);
        }
        b"GROUPS" => {
            let groups = stream.groups().nodes(mem);
            out.array(groups.len());
            for node in groups {
                reply_group(mem, out, stream, Group { node });
            }
        }
        b"STREAM" => reply_stream_info(mem, out, stream, argv)?,
        _ => return Err(subcommand_syntax("XINFO", argv)),
    }
    Ok(())
}

/// Each consumer of `group`: its name, how many entries it holds, how long it is idle.
fn reply_consumers(mem: &impl Mem, out: &mut ReplyWriter<'_>, group: Group, now_ms: i64) {
    let consumers = group.consumers(mem).nodes(mem);
    out.array(consumers.len());
    for node in consumers {
        let consumer = Consumer { node };
        out.map(3);
        out.bulk(b"name");
        out.bulk(consumer.name(mem));
        out.bulk(b"pending");
        out.integer(consumer.pending(mem).len(mem) as i64);
        out.bulk(b"idle");
        out.integer(now_ms.wrapping_sub(consumer.seen_ms(mem)).max(0));
    }
}

/// A group's entries read, or null when not known.
fn reply_entries_read(out: &mut ReplyWriter<'_>, entries_read: i64) {
    if entries_read == ENTRIES_READ_UNKNOWN {
        out.null();
    } else {
        out.integer(entries_read);
    }
}

/// A group's lag, or null when it cannot be known.
fn reply_lag(mem: &impl Mem, out: &mut ReplyWriter<'_>, stream: Stream, group: Group) {
    let cursor = (group.last_id(mem), group.entries_read(mem));
    match groups::lag(&stream.meta(mem), stream.len(mem), cursor) {
        Some(lag) => out.integer(lag),
        None => out.null(),
    }
}

/// One group of `XINFO GROUPS`.
fn reply_group(mem: &impl Mem, out: &mut ReplyWriter<'_>, stream: Stream, group: Group) {
    out.map(6);
    out.bulk(b"name");
    out.bulk(group.name(mem));
    out.bulk(b"consumers");
    out.integer(group.consumers(mem).len(mem) as i64);
    out.bulk(b"pending");
    out.integer(group.pending(mem).len(mem) as i64);
    out.bulk(b"last-delivered-id");
    reply_id(out, group.last_id(mem));
    out.bulk(b"entries-read");
    reply_entries_read(out, group.entries_read(mem));
    out.bulk(b"lag");
    reply_lag(mem, out, stream, group);
}

/// `XINFO STREAM`'s options: `None` for the short form, else `FULL`'s count (0: all).
fn parse_stream_info_options(argv: &Argv) -> Result<Option<u64>, CmdError> {
    let options = argv.len() - 3;
    if options == 0 {
        return Ok(None);
    }
    if (options != 1 && options != 3) || !arg(argv, 3).eq_ignore_ascii_case(b"FULL") {
        return Err(subcommand_syntax("XINFO", argv));
    }
    if options == 1 {
        return Ok(Some(10));
    }
    if !arg(argv, 4).eq_ignore_ascii_case(b"COUNT") {
        return Err(subcommand_syntax("XINFO", argv));
    }
    let count = long_long(arg(argv, 5))?;
    Ok(Some(if count < 0 { 10 } else { count as u64 }))
}

/// `XINFO STREAM key [FULL [COUNT n]]`.
fn reply_stream_info(
    mem: &impl Mem,
    out: &mut ReplyWriter<'_>,
    stream: Stream,
    argv: &Argv,
) -> Result<(), CmdError> {
    let full = parse_stream_info_options(argv)?;
    let meta = stream.meta(mem);
    out.map(if full.is_some() { 9 } else { 10 });
    out.bulk(b"length");
    out.integer(stream.len(mem) as i64);
    out.bulk(b"radix-tree-keys");
    out.integer(meta.pack_count as i64);
    out.bulk(b"radix-tree-nodes");
    out.integer(radix_tree_nodes(&stream.pack_keys(mem)) as i64);
    out.bulk(b"last-generated-id");
    reply_id(out, meta.last_id());
    out.bulk(b"max-deleted-entry-id");
    reply_id(out, meta.max_deleted_id());
    out.bulk(b"entries-added");
    out.integer(meta.entries_added as i64);
    out.bulk(b"recorded-first-entry-id");
    reply_id(out, meta.first_id());
    let Some(count) = full else {
        out.bulk(b"groups");
        out.integer(stream.groups().len(mem) as i64);
        for (field, node) in [
            (&b"first-entry"[..], stream.entries().first(mem)),
            (b"last-entry", stream.entries().last(mem)),
        ] {
            out.bulk(field);
            if node == 0 {
                out.null();
            } else {
                reply_entry(mem, out, node);
            }
        }
        return Ok(());
    };
    out.bulk(b"entries");
    reply_range(
        mem,
        out,
        stream,
        (StreamId::MIN, StreamId::MAX),
        count,
        false,
    );
    out.bulk(b"groups");
    let groups = stream.groups().nodes(mem);
    out.array(groups.len());
    for node in groups {
        reply_group_full(mem, out, stream, Group { node }, count);
    }
    Ok(())
}

/// The first `count` (0: all) nodes of a list of pending entries.
fn first_nodes(mem: &impl Mem, list: super::skiplist::SkipList, count: u64) -> Vec<usize> {
    let mut nodes = Vec::new();
    let mut node = list.first(mem);
    while node != 0 && (count == 0 || (nodes.len() as u64) < count) {
        nodes.push(node);
        node = list.next(mem, node);
    }
    nodes
}

/// One group of `XINFO STREAM … FULL`: its fields, its first `count` pending entries, its
/// consumers with theirs.
fn reply_group_full(
    mem: &impl Mem,
    out: &mut ReplyWriter<'_>,
    stream: Stream,
    group: Group,
    count: u64,
) {
    out.map(7);
    out.bulk(b"name");
    out.bulk(group.name(mem));
    out.bulk(b"last-delivered-id");
    reply_id(out, group.last_id(mem));
    out.bulk(b"entries-read");
    reply_entries_read(out, group.entries_read(mem));
    out.bulk(b"lag");
    reply_lag(mem, out, stream, group);
    out.bulk(b"pel-count");
    out.integer(group.pending(mem).len(mem) as i64);
    out.bulk(b"pending");
    let pending = first_nodes(mem, group.pending(mem), count);
    out.array(pending.len());
    for node in pending {
        let entry = Pending { node };
        let delivery = entry.delivery(mem);
        out.array(4);
        reply_id(out, entry.id(mem));
        out.bulk(entry.consumer(mem).name(mem));
        out.integer(delivery.time_ms);
        out.integer(delivery.count as i64);
    }
    out.bulk(b"consumers");
    let consumers = group.consumers(mem).nodes(mem);
    out.array(consumers.len());
    for node in consumers {
        let consumer = Consumer { node };
        out.map(4);
        out.bulk(b"name");
        out.bulk(consumer.name(mem));
        out.bulk(b"seen-time");
        out.integer(consumer.seen_ms(mem));
        out.bulk(b"pel-count");
        out.integer(consumer.pending(mem).len(mem) as i64);
        out.bulk(b"pending");
        let held = first_nodes(mem, consumer.pending(mem), count);
        out.array(held.len());
        for node in held {
            let entry = Pending::of_consumer_node(mem, node);
            let delivery = entry.delivery(mem);
            out.array(3);
            reply_id(out, entry.id(mem));
            out.integer(delivery.time_ms);
            out.integer(delivery.count as i64);
        }
    }
}
