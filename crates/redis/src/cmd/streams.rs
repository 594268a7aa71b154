//! Stream commands (t_stream.c): `XADD`, `XLEN`, `XRANGE`, `XREVRANGE`, `XDEL`, `XTRIM`,
//! `XREAD`, `XSETID`, and consumer groups: `XGROUP`, `XREADGROUP`, `XACK`, `XPENDING`,
//! `XCLAIM`, `XAUTOCLAIM`, `XINFO`.
//!
//! # Encoding
//!
//! A stream's root block (`KeyHead::value`) holds three things: the header of a skip list
//! of its entries ([`skiplist`]), keyed by ID (16 bytes big-endian, so byte order is ID
//! order); the stream's fields (last ID, max deleted ID, first ID, entries added); and the
//! header of a skip list of its consumer groups, keyed by name. Each entry is one block,
//! its node in the list, holding its field/value pairs.
//!
//! ## Why a skip list
//!
//! Redis keeps a radix tree of listpacks of about 100 entries. Here every declared byte is
//! undo-logged and shipped as redo, so a structure whose updates declare little wins: an
//! append writes one new block and one forward pointer per level of the new node (about
//! 1.3 on average), a delete rewrites the same pointers of its neighbours and frees one
//! block, never rewriting a run of entries as a listpack delete or a B-tree node shift
//! would. Range reads seek in O(log n) and walk O(1) per entry, in both directions; the
//! length is the list's count. Appends, the common case, land at the tail. The same list,
//! keyed by name, holds groups and consumers, and keyed by ID, pending entries: one
//! structure to check and to free.
//!
//! ## Packs: Redis's nodes, counted
//!
//! `XADD … MAXLEN ~ n` and `MINID ~` trim whole listpack nodes only, and `XINFO STREAM`
//! counts them, so what Redis answers depends on where its nodes start. A *pack* is a small
//! record per Redis node (live entries, entries ever appended, the last ID appended), and
//! every entry names its pack: an entry starts a new pack when the last one took
//! [`stream::PACK_ENTRIES_MAX`] entries or was deleted, as Redis starts a new node, so
//! approximate trimming removes exactly the entries Redis's does. Redis also closes a node
//! at 4096 bytes (`stream-node-max-bytes`); packs do not, so for entries of more than about
//! 40 bytes `~` may trim later than Redis does (README lists it). A pack keeps its first ID
//! too, Redis's node key: `XINFO STREAM`'s `radix-tree-nodes` is the node count of Redis's
//! radix tree over those keys, which Redis keeps compressed whatever the history
//! ([`stream::radix_tree_nodes`]), and `COPY` copies packs as they are, as Redis copies
//! its nodes.
//!
//! ## Consumer groups
//!
//! The groups' list holds each group's cursor (last delivered ID, entries read) and two
//! lists of its own: its pending entries, keyed by ID, each holding its delivery (time,
//! count, consumer), and its consumers, keyed by name, each holding its seen time and a
//! list of the IDs it holds that point at the group's nodes ([`groups`] draws the bytes).
//! A read of new entries declares, per entry, one node in each of two lists; a claim
//! rewrites one delivery and moves one small node. Deleting entries (`XDEL`, `XTRIM`,
//! `MAXLEN`) leaves their pending entries, as Redis does: a history read shows them as an
//! ID and a null, `XCLAIM` and `XAUTOCLAIM` drop them. Deleting the stream frees every
//! group, consumer and pending entry with it. The read counter and the lag are Redis 7's
//! arithmetic, ported as they are (`streamEstimateDistanceFromFirstEverEntry`,
//! `streamRangeHasTombstones`). Times (delivery, seen, idle) are the call's clock.
//! Changing only groups leaves the key's version alone, as Redis signals no change to
//! `WATCH` for it (`MKSTREAM` creating the key does).

mod admin;
mod consume;
mod groups;
mod inspect;
mod skiplist;
mod stream;

use tandem_memory::Txn;

use super::blocking::{self, BLOCK_OPTION};
use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::db::{Key, Kind, Layout};
use crate::mem::Mem;
use crate::notify::EventClass;
use crate::resp::{Argv, Proto, ReplyWriter};
use crate::wire::Waiting;

pub use stream::StreamId;
use stream::{Stream, Trim, TrimBy};

/// The family's commands (merged into [`super::commands`]).
///
/// `XREAD` and `XREADGROUP` name their keys after `STREAMS`, and `XGROUP` and `XINFO` after
/// their subcommand: their (first, last, step) is Redis's (0, 0, 0), and [`keys_at`] finds
/// their keys.
pub static COMMANDS: &[Command] = &[
    data("XACK", -4, Write, (1, 1, 1), false, consume::xack),
    data("XADD", -5, Write, (1, 1, 1), true, xadd),
    data(
        "XAUTOCLAIM",
        -6,
        Write,
        (1, 1, 1),
        false,
        consume::xautoclaim,
    ),
    data("XCLAIM", -6, Write, (1, 1, 1), false, consume::xclaim),
    data("XDEL", -3, Write, (1, 1, 1), false, xdel),
    data("XGROUP", -2, Write, (0, 0, 0), true, admin::xgroup),
    data("XINFO", -2, Read, (0, 0, 0), false, inspect::xinfo),
    data("XLEN", 2, Read, (1, 1, 1), false, xlen),
    data("XPENDING", -3, Read, (1, 1, 1), false, inspect::xpending),
    data("XRANGE", -4, Read, (1, 1, 1), false, xrange),
    data("XREAD", -4, Read, (0, 0, 0), false, xread).blocking(BLOCK_OPTION),
    data(
        "XREADGROUP",
        -7,
        Write,
        (0, 0, 0),
        false,
        consume::xreadgroup,
    )
    .blocking(BLOCK_OPTION),
    data("XREVRANGE", -4, Read, (1, 1, 1), false, xrevrange),
    data("XSETID", -3, Write, (1, 1, 1), true, admin::xsetid),
    data("XTRIM", -4, Write, (1, 1, 1), false, xtrim),
];

/// The keys of `argv` when its command is one whose keys its (first, last, step) cannot
/// name (see [`COMMANDS`]); `None` for any other command.
pub fn keys_at(name: &str, argv: &Argv) -> Option<Vec<usize>> {
    match name {
        "XREAD" | "XREADGROUP" => Some(read_keys_at(argv)),
        // Every subcommand but HELP names its key right after itself.
        "XGROUP" | "XINFO" => Some(if argv.len() > 2 { vec![2] } else { Vec::new() }),
        _ => None,
    }
}

/// The keys of an `XREAD` or `XREADGROUP` (Redis's `xreadGetKeys`): the first half of the
/// arguments after the first `STREAMS` that is not an option's value; none if the options
/// do not parse that far or the rest is unbalanced (the command then refuses itself).
fn read_keys_at(argv: &Argv) -> Vec<usize> {
    let mut i = 1;
    while i < argv.len() {
        let option = arg(argv, i);
        if option.eq_ignore_ascii_case(b"BLOCK") || option.eq_ignore_ascii_case(b"COUNT") {
            i += 2;
        } else if option.eq_ignore_ascii_case(b"GROUP") {
            i += 3;
        } else if option.eq_ignore_ascii_case(b"NOACK") {
            i += 1;
        } else if option.eq_ignore_ascii_case(b"STREAMS") {
            let rest = argv.len() - i - 1;
            if rest == 0 || !rest.is_multiple_of(2) {
                return Vec::new();
            }
            return (i + 1..i + 1 + rest / 2).collect();
        } else {
            break;
        }
    }
    Vec::new()
}

const INVALID_ID: CmdError =
    CmdError::fixed("ERR Invalid stream ID specified as stream command argument");
/// Redis's limit on one entry's bytes (`STREAM_LISTPACK_MAX_SIZE`).
const ENTRY_BYTES_MAX: usize = 1 << 30;
/// The longest ID argument Redis parses (its buffer's 128 bytes, the NUL included).
const ID_ARG_MAX: usize = 127;

// ---------------------------------------------------------------------------------------
// Parsing.

/// Redis's `string2ull`: `string2ll`'s strict form if it gives a number (negative ones
/// refused), else `strtoull`'s (leading spaces, a sign, leading zeros; a minus wraps).
fn string2ull(text: &[u8]) -> Option<u64> {
    if let Some(n) = crate::num::parse_i64(text) {
        return u64::try_from(n).ok();
    }
    let mut rest = text;
    while let [b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r', tail @ ..] = rest {
        rest = tail;
    }
    let negative = rest.first() == Some(&b'-');
    if matches!(rest.first(), Some(b'-' | b'+')) {
        rest = &rest[1..];
    }
    if rest.is_empty() || !rest.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let mut n = 0u64;
    for &digit in rest {
        n = n.checked_mul(10)?.checked_add(u64::from(digit - b'0'))?;
    }
    Some(if negative { n.wrapping_neg() } else { n })
}

/// How an ID argument is read.
#[derive(Clone, Copy, PartialEq, Eq)]
enum IdForm {
    /// `-` and `+` stand for the least and greatest IDs.
    Range,
    /// `-` and `+` are refused.
    Strict,
    /// Strict, and `ms-*` leaves the sequence to the stream (XADD).
    Add,
}

/// Redis's `streamGenericParseIDOrReply`: `<ms>[-<seq>]`, the sequence `missing_seq` when
/// absent. Returns the ID and whether the sequence was given (`ms-*` gives none).
fn parse_id_form(
    text: &[u8],
    missing_seq: u64,
    form: IdForm,
) -> Result<(StreamId, bool), CmdError> {
    if text.len() > ID_ARG_MAX {
        return Err(INVALID_ID);
    }
    // Redis reads the argument as a C string: it ends at a NUL.
    let text = text.split(|&b| b == 0).next().unwrap_or_default();
    match text {
        b"-" | b"+" if form != IdForm::Range => return Err(INVALID_ID),
        b"-" => return Ok((StreamId::MIN, true)),
        b"+" => return Ok((StreamId::MAX, true)),
        _ => {}
    }
    let (ms_text, seq_text) = match text.iter().position(|&b| b == b'-') {
        Some(dash) => (&text[..dash], Some(&text[dash + 1..])),
        None => (text, None),
    };
    let ms = string2ull(ms_text).ok_or(INVALID_ID)?;
    match seq_text {
        Some(b"*") if form == IdForm::Add => Ok((StreamId { ms, seq: 0 }, false)),
        Some(seq) => Ok((
            StreamId {
                ms,
                seq: string2ull(seq).ok_or(INVALID_ID)?,
            },
            true,
        )),
        None => Ok((
            StreamId {
                ms,
                seq: missing_seq,
            },
            true,
        )),
    }
}

fn parse_id(text: &[u8], missing_seq: u64, form: IdForm) -> Result<StreamId, CmdError> {
    Ok(parse_id_form(text, missing_seq, form)?.0)
}

/// Redis's `getLongLongFromObjectOrReply`.
fn long_long(text: &[u8]) -> Result<i64, CmdError> {
    crate::num::parse_i64(text).ok_or(CmdError::NOT_INTEGER)
}

/// What `XADD` and `XTRIM` read of their options.
struct AddArgs {
    trim: Option<Trim>,
    no_mkstream: bool,
    /// The ID argument's index (XADD), and the ID given: `None` for `*`, else the ID and
    /// whether its sequence was given.
    id_at: usize,
    id: Option<(StreamId, bool)>,
}

/// Redis's `streamParseAddOrTrimArgsOrReply`, the same checks in the same order.
fn parse_add_args(argv: &Argv, xadd: bool) -> Result<AddArgs, CmdError> {
    const BOTH: CmdError = CmdError::fixed(
        "ERR syntax error, MAXLEN and MINID options at the same time are not compatible",
    );
    let mut args = AddArgs {
        trim: None,
        no_mkstream: false,
        id_at: 0,
        id: None,
    };
    let (mut by, mut approx, mut limit, mut limit_given) = (None, false, 0i64, false);
    let mut i = 2;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let option = arg(argv, i);
        let upper = option.to_ascii_uppercase();
        if xadd && option == b"*" {
            break;
        } else if (upper == b"MAXLEN" || upper == b"MINID") && more > 0 {
            if by.is_some() {
                return Err(BOTH);
            }
            approx = false;
            let next = arg(argv, i + 1);
            if more >= 2 && (next == b"~" || next == b"=") {
                approx = next == b"~";
                i += 1;
            }
            let value = arg(argv, i + 1);
            by = Some(if upper == b"MAXLEN" {
                let max = long_long(value)?;
                if max < 0 {
                    return Err(CmdError::fixed("ERR The MAXLEN argument must be >= 0."));
                }
                TrimBy::MaxLen(max as u64)
            } else {
                TrimBy::MinId(parse_id(value, 0, IdForm::Strict)?)
            });
            i += 1;
        } else if upper == b"LIMIT" && more > 0 {
            limit = long_long(arg(argv, i + 1))?;
            if limit < 0 {
                return Err(CmdError::fixed("ERR The LIMIT argument must be >= 0."));
            }
            limit_given = true;
            i += 1;
        } else if xadd && upper == b"NOMKSTREAM" {
            args.no_mkstream = true;
        } else if xadd {
            args.id = Some(parse_id_form(option, 0, IdForm::Add)?);
            break;
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 1;
    }
    args.id_at = i;
    if limit != 0 && by.is_none() {
        return Err(CmdError::fixed(
            "ERR syntax error, LIMIT cannot be used without specifying a trimming strategy",
        ));
    }
    if !xadd && by.is_none() {
        return Err(CmdError::fixed(
            "ERR syntax error, XTRIM must be called with a trimming strategy",
        ));
    }
    if limit_given && !approx {
        return Err(CmdError::fixed(
            "ERR syntax error, LIMIT cannot be used without the special ~ option",
        ));
    }
    if !limit_given {
        // Redis's default bound on approximate trimming: 100 nodes.
        limit = if approx {
            100 * stream::PACK_ENTRIES_MAX as i64
        } else {
            0
        };
    }
    args.trim = by.map(|by| Trim {
        by,
        approx,
        limit: limit as u64,
    });
    Ok(args)
}

/// A client's bytes as Redis's `%s` and `%.Ns` quote them in an error: up to the first NUL,
/// at most `max` bytes (CR and LF become spaces when the error is written).
fn c_text(bytes: &[u8], max: usize) -> String {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    String::from_utf8_lossy(&bytes[..end.min(max)]).into_owned()
}

/// Redis's error for a key without group `group` (`XPENDING`, `XCLAIM`, `XAUTOCLAIM`).
fn no_key_or_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "NOGROUP No such key '{}' or consumer group '{}'",
        c_text(key, usize::MAX),
        c_text(group, usize::MAX)
    ))
}

/// Redis's error for a stream without group `group` (`XGROUP`, `XINFO CONSUMERS`).
fn no_group(key: &[u8], group: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "NOGROUP No such consumer group '{}' for key name '{}'",
        c_text(group, usize::MAX),
        c_text(key, usize::MAX)
    ))
}

/// Redis's `addReplySubcommandSyntaxError` for `container`'s subcommand `argv[1]`.
fn subcommand_syntax(container: &str, argv: &Argv) -> CmdError {
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try {container} HELP.",
        c_text(arg(argv, 1), 128)
    ))
}

/// Redis's `addReplyHelp`: the header, `lines`, and the lines on `HELP` itself.
pub(crate) fn reply_help(out: &mut ReplyWriter<'_>, container: &str, lines: &[&str]) {
    out.array(lines.len() + 3);
    out.simple(&format!(
        "{container} <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"
    ));
    for line in lines {
        out.simple(line);
    }
    out.simple("HELP");
    out.simple("    Prints this help.");
}

// ---------------------------------------------------------------------------------------
// Reading and writing the value.

fn get_stream(ctx: &Ctx<'_, '_>, name: &[u8]) -> Result<Option<Key>, CmdError> {
    ctx.find_typed(name, Kind::Stream)
}

/// Stream `name` for a write (the caller checked its type), created empty if missing (a
/// new key to Redis: `new` is published).
fn stream_for_write(ctx: &mut Ctx<'_, '_>, name: &[u8]) -> Result<Key, CmdError> {
    if let Some(key) = ctx.find_for_write(name) {
        assert_eq!(key.kind(), Kind::Stream, "the caller checked the type");
        return Ok(key);
    }
    let layout = ctx.layout;
    let txn = ctx.txn();
    let stream = Stream::create(txn, &layout)?;
    let key = layout.create(txn, name, Kind::Stream, 0)?;
    layout.set_value(txn, &key, stream.root as u64);
    ctx.notify(EventClass::New, "new", name);
    Ok(ctx.find_for_write(name).expect("a stream just created"))
}

/// Records that stream `key` changed: its element count and its version (for `WATCH`).
fn changed(ctx: &mut Ctx<'_, '_>, key: &Key) {
    let layout = ctx.layout;
    let txn = ctx.txn();
    let len = Stream::of(key).len(txn);
    layout.set_value_len(txn, key, len);
    layout.touch(txn, key);
}

/// Frees every block the value of `key` holds (not its key entry): its groups, with their
/// consumers and pending entries, its entries and packs, its root.
pub fn free(txn: &mut Txn<'_>, layout: &Layout, key: &Key) {
    let stream = Stream::of(key);
    groups::free_all(txn, layout, stream);
    stream.free(txn, layout);
}

/// Pushes every block the value of `key` holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, _layout: &Layout, key: &Key, owned: &mut Vec<(usize, usize)>) {
    let stream = Stream::of(key);
    stream.owned(mem, owned);
    groups::owned(mem, stream, owned);
}

/// Checks the stream `key` holds: its lists, its packs, its fields, its groups.
pub fn verify(mem: &impl Mem, key: &Key) -> Result<(), String> {
    let stream = Stream::of(key);
    if key.head.value_len != stream.len(mem) {
        return Err("the key's count is not the stream's length".into());
    }
    stream.verify(mem)?;
    groups::verify(mem, stream)
}

/// Makes `to` (which does not exist) a copy of stream `from` (`COPY`), as Redis's
/// `streamDup`: its entries in their packs, its fields, its groups.
pub fn copy(ctx: &mut Ctx<'_, '_>, from: &Key, to: &[u8]) -> Result<(), CmdError> {
    let source = Stream::of(from);
    let key = stream_for_write(ctx, to)?;
    let layout = ctx.layout;
    let txn = ctx.txn();
    let target = Stream::of(&key);
    source.copy_entries_to(txn, &layout, target)?;
    groups::copy(txn, &layout, source, target)?;
    changed(ctx, &key);
    Ok(())
}

/// Stream `key` whole, as a payload holds it (`DUMP`).
pub fn image(mem: &impl Mem, key: &Key) -> crate::rdb::StreamImage {
    let stream = Stream::of(key);
    let mut image = stream.image(mem);
    image.groups = groups::images(mem, stream);
    image
}

/// Makes `name` (which does not exist) the stream `image` holds (`RESTORE`).
pub fn restore(
    ctx: &mut Ctx<'_, '_>,
    name: &[u8],
    image: &crate::rdb::StreamImage,
) -> Result<(), CmdError> {
    let key = stream_for_write(ctx, name)?;
    let layout = ctx.layout;
    let txn = ctx.txn();
    let stream = Stream::of(&key);
    stream.restore(txn, &layout, image)?;
    groups::restore(txn, &layout, stream, &image.groups)?;
    changed(ctx, &key);
    Ok(())
}

// ---------------------------------------------------------------------------------------
// Replies.

fn reply_id(out: &mut ReplyWriter<'_>, id: StreamId) {
    out.bulk(id.to_string().as_bytes());
}

/// One entry: its ID and its fields and values.
fn reply_entry(mem: &impl Mem, out: &mut ReplyWriter<'_>, node: usize) {
    out.array(2);
    reply_id(out, Stream::id_of(mem, node));
    let fields = Stream::fields_of(mem, node);
    out.array(fields.len());
    for field in fields {
        out.bulk(field);
    }
}

/// The entries from `start` to `end` (inclusive), at most `count` (0: all), forward or in
/// reverse: Redis's `streamReplyWithRange` without a group.
fn reply_range(
    mem: &impl Mem,
    out: &mut ReplyWriter<'_>,
    stream: Stream,
    (start, end): (StreamId, StreamId),
    count: u64,
    rev: bool,
) {
    let mut nodes = Vec::new();
    let list = stream.entries();
    let mut node = if rev {
        stream.seek_back(mem, end)
    } else {
        stream.seek(mem, start)
    };
    while node != 0 && (count == 0 || (nodes.len() as u64) < count) {
        let id = Stream::id_of(mem, node);
        if id > end || id < start {
            break;
        }
        nodes.push(node);
        node = if rev {
            list.prev(mem, node)
        } else {
            list.next(mem, node)
        };
    }
    out.array(nodes.len());
    for node in nodes {
        reply_entry(mem, out, node);
    }
}

// ---------------------------------------------------------------------------------------
// Commands.

pub fn xadd(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let args = parse_add_args(argv, true)?;
    let fields_at = args.id_at + 1;
    if argv.len() < fields_at + 2 || (argv.len() - fields_at) % 2 == 1 {
        return Err(super::arity_error(arg(argv, 0)));
    }
    if let Some((id, true)) = args.id
        && id.is_zero()
    {
        return Err(CmdError::fixed(
            "ERR The ID specified in XADD must be greater than 0-0",
        ));
    }
    let name = arg(argv, 1);
    let existing = get_stream(ctx, name)?;
    if existing.is_none() && args.no_mkstream {
        out.null();
        return Ok(());
    }
    let meta = existing
        .map(|key| Stream::of(&key).meta(&ctx.access))
        .unwrap_or_default();
    let id = next_id(meta.last_id(), args.id, ctx.now_ms)?;
    let fields: Vec<&[u8]> = argv.iter().skip(fields_at).collect();
    if fields.iter().map(|f| f.len()).sum::<usize>() > ENTRY_BYTES_MAX {
        return Err(CmdError::fixed("ERR Elements are too large to be stored"));
    }
    let key = stream_for_write(ctx, name)?;
    let layout = ctx.layout;
    let stream = Stream::of(&key);
    stream.append(ctx.txn(), &layout, id, &fields)?;
    ctx.notify(EventClass::Stream, "xadd", name);
    if let Some(trim) = args.trim
        && stream.trim(ctx.txn(), &layout, &trim) > 0
    {
        ctx.notify(EventClass::Stream, "xtrim", name);
    }
    changed(ctx, &key);
    reply_id(out, id);
    Ok(())
}

/// The ID `XADD` adds after `last`: `given` (`None` for `*`, else the ID and whether its
/// sequence was given), or Redis's refusal.
fn next_id(
    last: StreamId,
    given: Option<(StreamId, bool)>,
    now_ms: u64,
) -> Result<StreamId, CmdError> {
    const EXHAUSTED: CmdError = CmdError::fixed(
        "ERR The stream has exhausted the last possible ID, unable to add more items",
    );
    const NOT_GREATER: CmdError = CmdError::fixed(
        "ERR The ID specified in XADD is equal or smaller than the target stream top item",
    );
    if last == StreamId::MAX {
        return Err(EXHAUSTED);
    }
    let id = match given {
        None if now_ms > last.ms => StreamId { ms: now_ms, seq: 0 },
        None => last.next().ok_or(EXHAUSTED)?,
        Some((id, true)) => id,
        Some((id, false)) if id.ms == last.ms => {
            last.next().filter(|n| n.ms == id.ms).ok_or(NOT_GREATER)?
        }
        Some((id, false)) => id,
    };
    if id <= last {
        return Err(NOT_GREATER);
    }
    Ok(id)
}

pub fn xlen(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let len = match get_stream(ctx, arg(argv, 1))? {
        Some(key) => Stream::of(&key).len(&ctx.access),
        None => 0,
    };
    out.integer(len as i64);
    Ok(())
}

pub fn xrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, false)
}

pub fn xrevrange(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    range_generic(ctx, argv, out, true)
}

/// Redis's `streamParseIntervalIDOrReply`: an ID, or `(` and a strict one for an exclusive
/// bound.
fn parse_interval(text: &[u8], missing_seq: u64) -> Result<(StreamId, bool), CmdError> {
    if text.len() > 1 && text[0] == b'(' {
        Ok((parse_id(&text[1..], missing_seq, IdForm::Strict)?, true))
    } else {
        Ok((parse_id(text, missing_seq, IdForm::Range)?, false))
    }
}

/// Redis's `xrangeGenericCommand`.
fn range_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    rev: bool,
) -> Result<(), CmdError> {
    let (start_at, end_at) = if rev { (3, 2) } else { (2, 3) };
    let (mut start, start_open) = parse_interval(arg(argv, start_at), 0)?;
    if start_open {
        start = start
            .next()
            .ok_or(CmdError::fixed("ERR invalid start ID for the interval"))?;
    }
    let (mut end, end_open) = parse_interval(arg(argv, end_at), u64::MAX)?;
    if end_open {
        end = end
            .prev()
            .ok_or(CmdError::fixed("ERR invalid end ID for the interval"))?;
    }
    let mut count: i64 = -1;
    let mut i = 4;
    while i < argv.len() {
        if arg(argv, i).eq_ignore_ascii_case(b"COUNT") && i + 1 < argv.len() {
            count = long_long(arg(argv, i + 1))?.max(0);
            i += 2;
        } else {
            return Err(CmdError::SYNTAX);
        }
    }
    let Some(key) = get_stream(ctx, arg(argv, 1))? else {
        out.array(0);
        return Ok(());
    };
    if count == 0 {
        out.null_array();
        return Ok(());
    }
    let count = if count < 0 { 0 } else { count as u64 };
    reply_range(&ctx.access, out, Stream::of(&key), (start, end), count, rev);
    Ok(())
}

pub fn xdel(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if get_stream(ctx, arg(argv, 1))?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let ids = argv
        .iter()
        .skip(2)
        .map(|text| parse_id(text, 0, IdForm::Strict))
        .collect::<Result<Vec<_>, _>>()?;
    let key = ctx
        .find_for_write(arg(argv, 1))
        .expect("a live key stays live");
    let layout = ctx.layout;
    let stream = Stream::of(&key);
    let txn = ctx.txn();
    let mut meta = stream.meta(txn);
    let (mut deleted, mut first_deleted) = (0, false);
    for id in ids {
        let Some(node) = stream.find(txn, id) else {
            continue;
        };
        stream.delete_entry(txn, &layout, node, false);
        first_deleted |= id == meta.first_id();
        if id > meta.max_deleted_id() {
            meta.set_max_deleted_id(id);
        }
        deleted += 1;
    }
    if deleted > 0 {
        // The packs' fields may have moved while deleting: keep those, set the rest.
        let mut current = stream.meta(txn);
        current.set_max_deleted_id(meta.max_deleted_id());
        stream.set_meta(txn, &current);
        if first_deleted || stream.len(txn) == 0 {
            stream.refresh_first_id(txn);
        }
        changed(ctx, &key);
        ctx.notify(EventClass::Stream, "xdel", arg(argv, 1));
    }
    out.integer(deleted);
    Ok(())
}

pub fn xtrim(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let args = parse_add_args(argv, false)?;
    let trim = args.trim.expect("XTRIM's parse requires a strategy");
    if get_stream(ctx, arg(argv, 1))?.is_none() {
        out.integer(0);
        return Ok(());
    }
    let key = ctx
        .find_for_write(arg(argv, 1))
        .expect("a live key stays live");
    let layout = ctx.layout;
    let deleted = Stream::of(&key).trim(ctx.txn(), &layout, &trim);
    if deleted > 0 {
        changed(ctx, &key);
        ctx.notify(EventClass::Stream, "xtrim", arg(argv, 1));
    }
    out.integer(deleted as i64);
    Ok(())
}

/// The most streams one `XREAD` names: far more than any client needs, and a bound on the
/// work one call does before it answers.
const READ_STREAMS_MAX: usize = 1 << 16;

/// What `XREAD` and `XREADGROUP` read of their options (Redis's `xreadCommand`).
struct ReadArgs<'a> {
    block: bool,
    count: u64,
    /// `XREADGROUP`'s group and consumer names.
    group: Option<(&'a [u8], &'a [u8])>,
    noack: bool,
    keys: Vec<&'a [u8]>,
    ids: Vec<&'a [u8]>,
}

/// Parses the options of `XREAD`, or of `XREADGROUP` if `xreadgroup`.
/// A script may not give `BLOCK` (`from_script`): Redis refuses it there, by the name the
/// script called.
fn parse_read_args(
    argv: &Argv,
    xreadgroup: bool,
    from_script: bool,
) -> Result<ReadArgs<'_>, CmdError> {
    let mut args = ReadArgs {
        block: false,
        count: 0,
        group: None,
        noack: false,
        keys: Vec::new(),
        ids: Vec::new(),
    };
    let mut streams_at = None;
    let mut i = 1;
    while i < argv.len() {
        let more = argv.len() - 1 - i;
        let option = arg(argv, i).to_ascii_uppercase();
        match option.as_slice() {
            b"BLOCK" if more > 0 && from_script => {
                return Err(CmdError::owned(format!(
                    "ERR {} command is not allowed with BLOCK option from scripts",
                    String::from_utf8_lossy(arg(argv, 0))
                )));
            }
            b"BLOCK" if more > 0 => {
                i += 1;
                let timeout = crate::num::parse_i64(arg(argv, i)).ok_or(CmdError::fixed(
                    "ERR timeout is not an integer or out of range",
                ))?;
                if timeout < 0 {
                    return Err(CmdError::fixed("ERR timeout is negative"));
                }
                args.block = true;
            }
            b"COUNT" if more > 0 => {
                i += 1;
                args.count = long_long(arg(argv, i))?.max(0) as u64;
            }
            b"STREAMS" if more > 0 => {
                streams_at = Some(i + 1);
                break;
            }
            b"GROUP" if more >= 2 && xreadgroup => {
                args.group = Some((arg(argv, i + 1), arg(argv, i + 2)));
                i += 2;
            }
            b"GROUP" if more >= 2 => {
                return Err(CmdError::fixed(
                    "ERR The GROUP option is only supported by XREADGROUP. You called XREAD \
                     instead.",
                ));
            }
            b"NOACK" if xreadgroup => args.noack = true,
            b"NOACK" => {
                return Err(CmdError::fixed(
                    "ERR The NOACK option is only supported by XREADGROUP. You called XREAD \
                     instead.",
                ));
            }
            _ => return Err(CmdError::SYNTAX),
        }
        i += 1;
    }
    let Some(streams_at) = streams_at else {
        return Err(CmdError::SYNTAX);
    };
    split_streams(argv, streams_at, xreadgroup, args)
}

/// The keys and IDs from argument `streams_at` on, after Redis's checks of them and of
/// `XREADGROUP`'s group, into `args`.
fn split_streams<'a>(
    argv: &'a Argv,
    streams_at: usize,
    xreadgroup: bool,
    mut args: ReadArgs<'a>,
) -> Result<ReadArgs<'a>, CmdError> {
    let rest = argv.len() - streams_at;
    if !rest.is_multiple_of(2) {
        return Err(CmdError::fixed(
            "ERR Unbalanced XREAD list of streams: for each stream key an ID or '$' must be \
             specified.",
        ));
    }
    if xreadgroup && args.group.is_none() {
        return Err(CmdError::fixed("ERR Missing GROUP option for XREADGROUP"));
    }
    if rest / 2 > READ_STREAMS_MAX {
        return Err(CmdError::owned(format!(
            "ERR too many streams: at most {READ_STREAMS_MAX} in one call"
        )));
    }
    args.keys = argv.iter().skip(streams_at).take(rest / 2).collect();
    args.ids = argv.iter().skip(streams_at + rest / 2).collect();
    Ok(args)
}

/// What a `BLOCK` read that found nothing answers as its call may wait: a null array where
/// it may not (inside `EXEC`, a caller that cannot wait), as Redis answers a client that may
/// not block; else it fails so that its connection waits, its later tries reading after
/// `after` if given (an `XREAD`'s IDs, `$` resolved; see [`blocking`]).
fn found_nothing_blocking(
    ctx: &Ctx<'_, '_>,
    out: &mut ReplyWriter<'_>,
    after: Option<&[StreamId]>,
) -> Result<(), CmdError> {
    match (ctx.waiting, after) {
        (Waiting::Never, _) => {
            out.null_array();
            Ok(())
        }
        (_, None) => Err(CmdError::WouldBlock),
        (_, Some(ids)) => {
            let ids: Vec<String> = ids.iter().map(ToString::to_string).collect();
            Err(CmdError::WouldBlockAfter(blocking::would_block_after(&ids)))
        }
    }
}

/// How many entries a read that waited reads of a stream without `COUNT`: Redis's
/// `XREAD_BLOCKED_DEFAULT_COUNT`, so that an old ID does not make a woken read huge.
const BLOCKED_COUNT_DEFAULT: u64 = 1000;

/// Stream `name` for a read: one of another type is refused, `WRONGTYPE`, unless the call
/// waited already, as Redis wakes a read only for a key that is a stream.
fn read_stream(ctx: &Ctx<'_, '_>, name: &[u8]) -> Result<Option<Key>, CmdError> {
    match get_stream(ctx, name) {
        Err(_) if ctx.waiting == Waiting::Awakened => Ok(None),
        found => found,
    }
}

pub fn xread(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut args = parse_read_args(argv, false, ctx.in_script())?;
    if ctx.waiting == Waiting::Awakened && args.count == 0 {
        args.count = BLOCKED_COUNT_DEFAULT;
    }
    let mut after = Vec::with_capacity(args.keys.len());
    for (name, id) in args.keys.iter().zip(&args.ids) {
        let key = read_stream(ctx, name)?;
        after.push(match *id {
            b"$" => key.map_or(StreamId::MIN, |key| {
                Stream::of(&key).meta(&ctx.access).last_id()
            }),
            b">" => {
                return Err(CmdError::fixed(
                    "ERR The > ID can be specified only when calling XREADGROUP using the \
                     GROUP <group> <consumer> option.",
                ));
            }
            text => parse_id(text, 0, IdForm::Strict)?,
        });
    }
    let mem = &ctx.access;
    let mut served = Vec::new();
    for (i, name) in args.keys.iter().enumerate() {
        let Some(key) = read_stream(ctx, name)? else {
            continue;
        };
        let stream = Stream::of(&key);
        let last = stream.entries().last(mem);
        if last != 0 && Stream::id_of(mem, last) > after[i] {
            served.push((i, stream));
        }
    }
    if served.is_empty() {
        if args.block {
            return found_nothing_blocking(ctx, out, Some(&after));
        }
        out.null_array();
        return Ok(());
    }
    if out.proto() == Proto::Resp3 {
        out.map(served.len());
    } else {
        out.array(served.len());
    }
    for (i, stream) in served {
        if out.proto() != Proto::Resp3 {
            out.array(2);
        }
        out.bulk(args.keys[i]);
        let start = after[i].next().expect("an entry lies past it");
        reply_range(mem, out, stream, (start, StreamId::MAX), args.count, false);
    }
    Ok(())
}
