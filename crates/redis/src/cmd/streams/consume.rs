//! `XREADGROUP` (t_stream.c's `xreadCommand` with a group), `XACK`, `XCLAIM` and
//! `XAUTOCLAIM`: the commands that deliver entries to consumers and move or settle their
//! pending entries. Each checks all it can refuse before its first write; delivery times
//! are the call's clock (`Ctx::now_ms`).

use super::groups::{self, Consumer, Group, Pending};
use super::stream::{Stream, StreamId};
use super::{
    IdForm, ReadArgs, c_text, get_stream, no_key_or_group, parse_id, parse_interval, reply_entry,
    reply_id,
};
use crate::cmd::{CmdError, Ctx, arg};
use crate::db::Layout;
use crate::notify::EventClass;
use crate::resp::{Argv, Proto, ReplyWriter};
use crate::wire::Waiting;
use tandem_memory::Txn;

/// Where an `XREADGROUP` reads one stream: past the group's last delivered ID (`>`), or
/// the consumer's own pending entries after an ID.
#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadFrom {
    New,
    History(StreamId),
}

/// `XREADGROUP GROUP g c [COUNT n] [BLOCK ms] [NOACK] STREAMS key… id…`.
pub fn xreadgroup(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut args = super::parse_read_args(argv, true, ctx.in_script())?;
    let (_, consumer_name) = args.group.expect("XREADGROUP's parse requires GROUP");
    if ctx.waiting == Waiting::Awakened && args.count == 0 {
        args.count = super::BLOCKED_COUNT_DEFAULT;
    }
    let reads = resolve_reads(ctx, &args).map_err(|err| awakened_refusal(ctx, &args, err))?;
    let mut served = Vec::new();
    let mut replies = Vec::new();
    for (i, &(stream, group, from)) in reads.iter().enumerate() {
        // Decided stream by stream, after the reads before it (a stream named twice).
        let after = match from {
            ReadFrom::History(id) => id,
            ReadFrom::New => {
                let last = stream.entries().last(&ctx.access);
                let last_id = group.last_id(&ctx.access);
                if last == 0 || Stream::id_of(&ctx.access, last) <= last_id {
                    continue;
                }
                last_id
            }
        };
        let mut reply = ReplyWriter::new(&mut replies, out.proto());
        if reply.proto() != Proto::Resp3 {
            reply.array(2);
        }
        reply.bulk(args.keys[i]);
        let (layout, now_ms) = (ctx.layout, ctx.now_ms as i64);
        let txn = ctx.txn();
        let (consumer, created) =
            groups::consumer_seen(txn, &layout, group, consumer_name, now_ms)?;
        let start = after.next().expect("an ID below the greatest");
        let read = Read {
            stream,
            group,
            consumer,
            count: args.count,
            now_ms,
        };
        match from {
            ReadFrom::New => read.new_entries(txn, &layout, start, args.noack, &mut reply)?,
            ReadFrom::History(_) => read.history(txn, start, &mut reply),
        }
        if created {
            ctx.notify(EventClass::Stream, "xgroup-createconsumer", args.keys[i]);
        }
        served.push(i);
    }
    if served.is_empty() {
        if args.block {
            return super::found_nothing_blocking(ctx, out, None);
        }
        out.null_array();
        return Ok(());
    }
    if out.proto() == Proto::Resp3 {
        out.map(served.len());
    } else {
        out.array(served.len());
    }
    out.append(&replies);
    Ok(())
}

/// What a read that waited answers when its stream or group is gone (Redis's words when it
/// unblocks such a client); any other refusal, or a first try's, as it is.
fn awakened_refusal(ctx: &Ctx<'_, '_>, args: &ReadArgs<'_>, err: CmdError) -> CmdError {
    if ctx.waiting != Waiting::Awakened {
        return err;
    }
    let stream_gone = args
        .keys
        .iter()
        .any(|name| !matches!(get_stream(ctx, name), Ok(Some(_))));
    if stream_gone {
        CmdError::fixed("UNBLOCKED the stream key no longer exists")
    } else {
        CmdError::fixed("NOGROUP the consumer group this client was blocked on no longer exists")
    }
}

/// The streams of an `XREADGROUP`, each with its group and where it reads, or the first
/// refusal, stream by stream in Redis's order (its type, its group, its ID).
fn resolve_reads(
    ctx: &Ctx<'_, '_>,
    args: &ReadArgs<'_>,
) -> Result<Vec<(Stream, Group, ReadFrom)>, CmdError> {
    let (group_name, _) = args.group.expect("XREADGROUP's parse requires GROUP");
    let mut reads = Vec::with_capacity(args.keys.len());
    for (name, id) in args.keys.iter().zip(&args.ids) {
        let stream = get_stream(ctx, name)?.map(|key| Stream::of(&key));
        let Some(group) = stream.and_then(|s| groups::find(&ctx.access, s, group_name)) else {
            return Err(CmdError::owned(format!(
                "NOGROUP No such key '{}' or consumer group '{}' in XREADGROUP with GROUP \
                 option",
                c_text(name, usize::MAX),
                c_text(group_name, usize::MAX)
            )));
        };
        let from = match *id {
            b"$" => {
                return Err(CmdError::fixed(
                    "ERR The $ ID is meaningless in the context of XREADGROUP: you want to read \
                     the history of this consumer by specifying a proper ID, or use the > ID to \
                     get new messages. The $ ID would just return an empty result set.",
                ));
            }
            b">" => ReadFrom::New,
            // Redis marks `>` with the greatest ID, so that ID given reads new entries too.
            text => match parse_id(text, 0, IdForm::Strict)? {
                StreamId::MAX => ReadFrom::New,
                id => ReadFrom::History(id),
            },
        };
        reads.push((stream.expect("a group has a stream"), group, from));
    }
    Ok(reads)
}

/// One stream's read by one consumer of a group.
struct Read {
    stream: Stream,
    group: Group,
    consumer: Consumer,
    /// At most this many entries (0: all).
    count: u64,
    now_ms: i64,
}

impl Read {
    /// Delivers the entries from `start` on (Redis's `streamReplyWithRange` with a group):
    /// the group's cursor moves past them and, unless `noack`, each becomes the consumer's
    /// pending entry.
    fn new_entries(
        &self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        start: StreamId,
        noack: bool,
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError> {
        let list = self.stream.entries();
        let mut nodes = Vec::new();
        let mut node = self.stream.seek(txn, start);
        while node != 0 && (self.count == 0 || (nodes.len() as u64) < self.count) {
            nodes.push(node);
            node = list.next(txn, node);
        }
        let (meta, len) = (self.stream.meta(txn), self.stream.len(txn));
        let mut last_id = self.group.last_id(txn);
        let mut entries_read = self.group.entries_read(txn);
        out.array(nodes.len());
        for &node in &nodes {
            let id = Stream::id_of(txn, node);
            if id > last_id {
                entries_read = groups::entries_read_after(&meta, len, entries_read, id);
                last_id = id;
            }
            reply_entry(txn, out, node);
        }
        self.group.set_cursor(txn, last_id, entries_read);
        if !noack {
            for node in nodes {
                let id = Stream::id_of(txn, node);
                groups::deliver(txn, layout, (self.group, self.consumer), id, self.now_ms)?;
            }
        }
        Ok(())
    }

    /// The consumer's pending entries from `start` on (Redis's
    /// `streamReplyWithRangeFromConsumerPEL`): each entry still in the stream is delivered
    /// again; one deleted since is its ID with a null.
    fn history(&self, txn: &mut Txn<'_>, start: StreamId, out: &mut ReplyWriter<'_>) {
        let own = self.consumer.pending(txn);
        let mut held = Vec::new();
        let mut node = own.seek_ge(txn, &start.key());
        while node != 0 && (self.count == 0 || (held.len() as u64) < self.count) {
            held.push(Pending::of_consumer_node(txn, node));
            node = own.next(txn, node);
        }
        out.array(held.len());
        for entry in held {
            let id = entry.id(txn);
            match self.stream.find(txn, id) {
                Some(node) => {
                    reply_entry(txn, out, node);
                    let delivery = entry.delivery(txn);
                    entry.set_delivery(txn, self.now_ms, delivery.count.wrapping_add(1));
                }
                None => {
                    out.array(2);
                    reply_id(out, id);
                    out.null_array();
                }
            }
        }
    }
}

/// The stream and group a pending-entry command names, or Redis's `NOGROUP` error.
fn stream_and_group(ctx: &Ctx<'_, '_>, argv: &Argv) -> Result<(Stream, Group), CmdError> {
    let (name, group_name) = (arg(argv, 1), arg(argv, 2));
    let stream = get_stream(ctx, name)?.map(|key| Stream::of(&key));
    match stream.and_then(|stream| Some((stream, groups::find(&ctx.access, stream, group_name)?))) {
        Some(found) => Ok(found),
        None => Err(no_key_or_group(name, group_name)),
    }
}

/// `XACK key group id…`.
pub fn xack(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let stream = get_stream(ctx, arg(argv, 1))?.map(|key| Stream::of(&key));
    let Some(group) = stream.and_then(|stream| groups::find(&ctx.access, stream, arg(argv, 2)))
    else {
        // A missing key or group acknowledges nothing (before the IDs are read).
        out.integer(0);
        return Ok(());
    };
    let ids = argv
        .iter()
        .skip(3)
        .map(|text| parse_id(text, 0, IdForm::Strict))
        .collect::<Result<Vec<_>, _>>()?;
    let layout = ctx.layout;
    let txn = ctx.txn();
    let mut acknowledged = 0;
    for id in ids {
        if let Some(entry) = group.find_pending(txn, id) {
            groups::remove_pending(txn, &layout, group, entry);
            acknowledged += 1;
        }
    }
    out.integer(acknowledged);
    Ok(())
}

/// A minimum idle time argument (`getLongLongFromObjectOrReply` with `command`'s message),
/// a negative one taken as 0.
fn min_idle(text: &[u8], command: &str) -> Result<i64, CmdError> {
    let min_idle = crate::num::parse_i64(text).ok_or_else(|| {
        CmdError::owned(format!("ERR Invalid min-idle-time argument for {command}"))
    })?;
    Ok(min_idle.max(0))
}

/// What `XCLAIM` reads after its IDs.
struct ClaimOptions {
    force: bool,
    justid: bool,
    /// The delivery time to set (IDLE or TIME), as given.
    time_ms: Option<i64>,
    retry_count: Option<i64>,
    last_id: StreamId,
}

/// Redis's parse of `XCLAIM`'s options, from argument `at` on.
fn parse_claim_options(argv: &Argv, at: usize, now_ms: i64) -> Result<ClaimOptions, CmdError> {
    let mut options = ClaimOptions {
        force: false,
        justid: false,
        time_ms: None,
        retry_count: None,
        last_id: StreamId::MIN,
    };
    let number = |i: usize, what: &str| {
        crate::num::parse_i64(arg(argv, i)).ok_or_else(|| {
            CmdError::owned(format!("ERR Invalid {what} option argument for XCLAIM"))
        })
    };
    let mut i = at;
    while i < argv.len() {
        let option = arg(argv, i);
        let more = i + 1 < argv.len();
        let is = |name: &[u8]| option.eq_ignore_ascii_case(name);
        if is(b"FORCE") {
            options.force = true;
        } else if is(b"JUSTID") {
            options.justid = true;
        } else if is(b"IDLE") && more {
            i += 1;
            options.time_ms = Some(now_ms.wrapping_sub(number(i, "IDLE")?));
        } else if is(b"TIME") && more {
            i += 1;
            options.time_ms = Some(number(i, "TIME")?);
        } else if is(b"RETRYCOUNT") && more {
            i += 1;
            options.retry_count = Some(number(i, "RETRYCOUNT")?);
        } else if is(b"LASTID") && more {
            i += 1;
            options.last_id = parse_id(arg(argv, i), 0, IdForm::Strict)?;
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unrecognized XCLAIM option '{}'",
                c_text(option, usize::MAX)
            )));
        }
        i += 1;
    }
    Ok(options)
}

/// `XCLAIM key group consumer min-idle-time id… [IDLE ms] [TIME ms] [RETRYCOUNT n] [FORCE]
/// [JUSTID] [LASTID id]`.
pub fn xclaim(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (stream, group) = stream_and_group(ctx, argv)?;
    let min_idle_ms = min_idle(arg(argv, 4), "XCLAIM")?;
    // IDs until the first argument that is not one: the options start there.
    let ids: Vec<StreamId> = argv
        .iter()
        .skip(5)
        .map_while(|text| parse_id(text, 0, IdForm::Strict).ok())
        .collect();
    let now_ms = ctx.now_ms as i64;
    let options = parse_claim_options(argv, 5 + ids.len(), now_ms)?;
    let layout = ctx.layout;
    let txn = ctx.txn();
    if options.last_id > group.last_id(txn) {
        let entries_read = group.entries_read(txn);
        group.set_cursor(txn, options.last_id, entries_read);
    }
    // A time in the future or before 1970 is taken as now, as Redis does.
    let time_ms = options
        .time_ms
        .filter(|&time| (0..=now_ms).contains(&time))
        .unwrap_or(now_ms);
    let mut claim = Claim {
        stream,
        group,
        name: arg(argv, 3),
        consumer: None,
        created: false,
        now_ms,
        justid: options.justid,
    };
    let mut claimed = Vec::new();
    for id in ids {
        if claim.claim_one(txn, &layout, id, (min_idle_ms, time_ms), &options)? {
            claimed.push(id);
        }
    }
    claim.reply(txn, out, &claimed);
    claim.notify(ctx, arg(argv, 1));
    Ok(())
}

/// The consumer a claim gives entries to, found (and seen) or created at its first entry.
struct Claim<'a> {
    stream: Stream,
    group: Group,
    name: &'a [u8],
    consumer: Option<Consumer>,
    /// Whether the claim created its consumer, which the command publishes once done.
    created: bool,
    now_ms: i64,
    justid: bool,
}

impl Claim<'_> {
    fn consumer(&mut self, txn: &mut Txn<'_>, layout: &Layout) -> Result<Consumer, CmdError> {
        if let Some(consumer) = self.consumer {
            return Ok(consumer);
        }
        let (consumer, created) =
            groups::consumer_seen(txn, layout, self.group, self.name, self.now_ms)?;
        self.consumer = Some(consumer);
        self.created = created;
        Ok(consumer)
    }

    /// Publishes the creation of the claim's consumer, if it made one: the claim's only
    /// event, so telling it once the entries are claimed keeps Redis's order.
    fn notify(&self, ctx: &mut Ctx<'_, '_>, key: &[u8]) {
        if self.created {
            ctx.notify(EventClass::Stream, "xgroup-createconsumer", key);
        }
    }

    /// Claims entry `id` for `XCLAIM` if it is pending (or `FORCE`d) and idle at least
    /// the minimum, with its new delivery time; says whether it did. A pending entry gone
    /// from the stream is dropped.
    fn claim_one(
        &mut self,
        txn: &mut Txn<'_>,
        layout: &Layout,
        id: StreamId,
        (min_idle_ms, time_ms): (i64, i64),
        options: &ClaimOptions,
    ) -> Result<bool, CmdError> {
        let (group, now_ms) = (self.group, self.now_ms);
        let mut entry = group.find_pending(txn, id);
        if self.stream.find(txn, id).is_none() {
            if let Some(entry) = entry {
                groups::remove_pending(txn, layout, group, entry);
            }
            return Ok(false);
        }
        if entry.is_none() && options.force {
            let consumer = self.consumer(txn, layout)?;
            // As Redis's FORCE: a new entry delivered once, then claimed below.
            let times = (now_ms, 1);
            entry = Some(groups::add_pending(
                txn,
                layout,
                (group, consumer),
                id,
                times,
            )?);
        } else if let Some(found) = entry
            && min_idle_ms > 0
            && now_ms.wrapping_sub(found.delivery(txn).time_ms) < min_idle_ms
        {
            return Ok(false);
        }
        let Some(entry) = entry else {
            return Ok(false);
        };
        let count = match options.retry_count {
            Some(count) if count >= 0 => count as u64,
            _ if options.justid => entry.delivery(txn).count,
            _ => entry.delivery(txn).count.wrapping_add(1),
        };
        let consumer = self.consumer(txn, layout)?;
        groups::reassign(txn, layout, entry, consumer, (time_ms, count))?;
        Ok(true)
    }

    /// The claimed entries (or their IDs alone, with `JUSTID`).
    fn reply(&self, txn: &Txn<'_>, out: &mut ReplyWriter<'_>, claimed: &[StreamId]) {
        out.array(claimed.len());
        for &id in claimed {
            if self.justid {
                reply_id(out, id);
            } else {
                let node = self.stream.find(txn, id).expect("a claimed entry exists");
                reply_entry(txn, out, node);
            }
        }
    }
}

/// The greatest `COUNT` `XAUTOCLAIM` takes (Redis's `LONG_MAX / max(sizeof(streamID), 10)`).
const AUTOCLAIM_COUNT_MAX: i64 = i64::MAX / 16;

/// What `XAUTOCLAIM` reads of its arguments.
struct AutoclaimArgs {
    min_idle_ms: i64,
    start: StreamId,
    count: i64,
    justid: bool,
}

/// Redis's parse of `XAUTOCLAIM`'s arguments, in its order (before the key is looked up).
fn parse_autoclaim_args(argv: &Argv) -> Result<AutoclaimArgs, CmdError> {
    let min_idle_ms = min_idle(arg(argv, 4), "XAUTOCLAIM")?;
    let (mut start, open) = parse_interval(arg(argv, 5), 0)?;
    if open {
        start = start
            .next()
            .ok_or(CmdError::fixed("ERR invalid start ID for the interval"))?;
    }
    let (mut count, mut justid) = (100i64, false);
    let mut i = 6;
    while i < argv.len() {
        let option = arg(argv, i);
        if option.eq_ignore_ascii_case(b"COUNT") && i + 1 < argv.len() {
            count = crate::num::parse_i64(arg(argv, i + 1))
                .filter(|count| (1..=AUTOCLAIM_COUNT_MAX).contains(count))
                .ok_or(CmdError::fixed("ERR COUNT must be > 0"))?;
            i += 1;
        } else if option.eq_ignore_ascii_case(b"JUSTID") {
            justid = true;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    Ok(AutoclaimArgs {
        min_idle_ms,
        start,
        count,
        justid,
    })
}

/// `XAUTOCLAIM key group consumer min-idle-time start [COUNT n] [JUSTID]`.
pub fn xautoclaim(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let AutoclaimArgs {
        min_idle_ms,
        start,
        mut count,
        justid,
    } = parse_autoclaim_args(argv)?;
    let (stream, group) = stream_and_group(ctx, argv)?;
    let now_ms = ctx.now_ms as i64;
    let layout = ctx.layout;
    let txn = ctx.txn();
    let mut claim = Claim {
        stream,
        group,
        name: arg(argv, 3),
        consumer: None,
        created: false,
        now_ms,
        justid,
    };
    let pending = group.pending(txn);
    let (mut claimed, mut deleted) = (Vec::new(), Vec::new());
    // Redis looks at ten entries per one it may claim, and counts the deleted ones it drops.
    let mut attempts = count * 10;
    let mut node = pending.seek_ge(txn, &start.key());
    while attempts > 0 && count > 0 && node != 0 {
        attempts -= 1;
        let next = pending.next(txn, node);
        let entry = Pending { node };
        let id = entry.id(txn);
        if stream.find(txn, id).is_none() {
            groups::remove_pending(txn, &layout, group, entry);
            deleted.push(id);
            count -= 1;
        } else if min_idle_ms == 0
            || now_ms.wrapping_sub(entry.delivery(txn).time_ms) >= min_idle_ms
        {
            let consumer = claim.consumer(txn, &layout)?;
            let delivered = entry.delivery(txn).count;
            let times = (
                now_ms,
                if justid {
                    delivered
                } else {
                    delivered.wrapping_add(1)
                },
            );
            groups::reassign(txn, &layout, entry, consumer, times)?;
            claimed.push(id);
            count -= 1;
        }
        node = next;
    }
    out.array(3);
    let cursor = if node == 0 {
        StreamId::MIN
    } else {
        Pending { node }.id(txn)
    };
    reply_id(out, cursor);
    claim.reply(txn, out, &claimed);
    out.array(deleted.len());
    for id in deleted {
        reply_id(out, id);
    }
    claim.notify(ctx, arg(argv, 1));
    Ok(())
}
