//! `XGROUP` (t_stream.c's `xgroupCommand`) and `XSETID` (`xsetidCommand`): commands that
//! set a group's or a stream's fields. Each checks all it can refuse, in Redis's order,
//! before its first write.

use super::groups::{self, ENTRIES_READ_UNKNOWN, Group};
use super::stream::{Stream, StreamId};
use super::{
    IdForm, get_stream, long_long, no_group, parse_id, reply_help, stream_for_write,
    subcommand_syntax,
};
use crate::cmd::{CmdError, Ctx, arg, subcommand_error};
use crate::notify::EventClass;
use crate::resp::{Argv, ReplyWriter};

/// What `XGROUP CREATE` and `SETID` read after their ID.
struct GroupOptions {
    mkstream: bool,
    entries_read: i64,
}

/// Redis's parse of `XGROUP`'s options (from argument 5): `MKSTREAM` for `CREATE`,
/// `ENTRIESREAD n` for `CREATE` and `SETID`.
fn parse_group_options(argv: &Argv, sub: &[u8]) -> Result<GroupOptions, CmdError> {
    let mut options = GroupOptions {
        mkstream: false,
        entries_read: ENTRIES_READ_UNKNOWN,
    };
    let (create, setid) = (sub == b"CREATE", sub == b"SETID");
    let mut i = 5;
    while i < argv.len() {
        let option = arg(argv, i);
        if create && option.eq_ignore_ascii_case(b"MKSTREAM") {
            options.mkstream = true;
            i += 1;
        } else if (create || setid)
            && option.eq_ignore_ascii_case(b"ENTRIESREAD")
            && i + 1 < argv.len()
        {
            options.entries_read = long_long(arg(argv, i + 1))?;
            if options.entries_read < 0 && options.entries_read != ENTRIES_READ_UNKNOWN {
                return Err(CmdError::fixed(
                    "ERR value for ENTRIESREAD must be positive or -1",
                ));
            }
            i += 2;
        } else {
            return Err(subcommand_syntax("XGROUP", argv));
        }
    }
    Ok(options)
}

const XGROUP_HELP: &[&str] = &[
    "CREATE <key> <groupname> <id|$> [option]",
    "    Create a new consumer group. Options are:",
    "    * MKSTREAM",
    "      Create the empty stream if it does not exist.",
    "    * ENTRIESREAD entries_read",
    "      Set the group's entries_read counter (internal use).",
    "CREATECONSUMER <key> <groupname> <consumer>",
    "    Create a new consumer in the specified group.",
    "DELCONSUMER <key> <groupname> <consumer>",
    "    Remove the specified consumer.",
    "DESTROY <key> <groupname>",
    "    Remove the specified group.",
    "SETID <key> <groupname> <id|$> [ENTRIESREAD entries_read]",
    "    Set the current group ID and entries_read counter.",
];

pub fn xgroup(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if let Some(refusal) = subcommand_error("XGROUP", argv) {
        return Err(refusal);
    }
    let sub = arg(argv, 1).to_ascii_uppercase();
    if sub == b"HELP" {
        reply_help(out, "XGROUP", XGROUP_HELP);
        return Ok(());
    }
    // Every other subcommand names a key and a group (its arity says so).
    let options = parse_group_options(argv, &sub)?;
    let (name, group_name) = (arg(argv, 2), arg(argv, 3));
    let stream = get_stream(ctx, name)?.map(|key| Stream::of(&key));
    let group = stream.and_then(|stream| groups::find(&ctx.access, stream, group_name));
    if !options.mkstream {
        if stream.is_none() {
            return Err(CmdError::fixed(
                "ERR The XGROUP subcommand requires the key to exist. Note that for CREATE you \
                 may want to use the MKSTREAM option to create an empty stream automatically.",
            ));
        }
        let needs_group = matches!(
            sub.as_slice(),
            b"SETID" | b"CREATECONSUMER" | b"DELCONSUMER"
        );
        if group.is_none() && needs_group {
            return Err(no_group(name, group_name));
        }
    }
    let target = Target {
        stream,
        group,
        entries_read: options.entries_read,
    };
    run_subcommand(ctx, argv, &sub, target, out)
}

/// What an `XGROUP` subcommand found to work on.
struct Target {
    stream: Option<Stream>,
    group: Option<Group>,
    /// `ENTRIESREAD`'s value, or unknown.
    entries_read: i64,
}

/// Runs `XGROUP` subcommand `sub` (upper case) once its key and group are checked.
fn run_subcommand(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    sub: &[u8],
    Target {
        stream,
        group,
        entries_read,
    }: Target,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let (name, group_name) = (arg(argv, 2), arg(argv, 3));
    let last_id =
        |ctx: &Ctx<'_, '_>| stream.map_or(StreamId::MIN, |s| s.meta(&ctx.access).last_id());
    match sub {
        b"CREATE" if argv.len() <= 8 => {
            let id = match arg(argv, 4) {
                b"$" => last_id(ctx),
                text => parse_id(text, 0, IdForm::Strict)?,
            };
            create_group(ctx, (name, group_name), group, (id, entries_read))?;
            out.ok();
        }
        b"SETID" if argv.len() == 5 || argv.len() == 7 => {
            let id = match arg(argv, 4) {
                b"$" => last_id(ctx),
                text => parse_id(text, 0, IdForm::Range)?,
            };
            let group = group.expect("SETID found its group");
            group.set_cursor(ctx.txn(), id, entries_read);
            ctx.notify(EventClass::Stream, "xgroup-setid", name);
            out.ok();
        }
        b"DESTROY" => {
            let destroyed = match (stream, group) {
                (Some(stream), Some(group)) => {
                    let layout = ctx.layout;
                    groups::destroy(ctx.txn(), &layout, stream, group);
                    ctx.notify(EventClass::Stream, "xgroup-destroy", name);
                    1
                }
                _ => 0,
            };
            out.integer(destroyed);
        }
        b"CREATECONSUMER" => {
            let group = group.expect("CREATECONSUMER found its group");
            let consumer = arg(argv, 4);
            let created = group.find_consumer(&ctx.access, consumer).is_none();
            if created {
                let (layout, now_ms) = (ctx.layout, ctx.now_ms as i64);
                groups::create_consumer(ctx.txn(), &layout, group, consumer, now_ms)?;
                ctx.notify(EventClass::Stream, "xgroup-createconsumer", name);
            }
            out.integer(i64::from(created));
        }
        b"DELCONSUMER" => {
            let group = group.expect("DELCONSUMER found its group");
            let pending = match group.find_consumer(&ctx.access, arg(argv, 4)) {
                Some(consumer) => {
                    let layout = ctx.layout;
                    let pending = groups::delete_consumer(ctx.txn(), &layout, group, consumer);
                    ctx.notify(EventClass::Stream, "xgroup-delconsumer", name);
                    pending
                }
                None => 0,
            };
            out.integer(pending as i64);
        }
        _ => return Err(subcommand_syntax("XGROUP", argv)),
    }
    Ok(())
}

/// Creates group `group_name` of stream `name` unless it exists (`existing`), and the
/// stream if it is missing (`MKSTREAM`, which then counts as a change of the key).
fn create_group(
    ctx: &mut Ctx<'_, '_>,
    (name, group_name): (&[u8], &[u8]),
    existing: Option<Group>,
    cursor: (StreamId, i64),
) -> Result<(), CmdError> {
    if existing.is_some() {
        return Err(CmdError::fixed(
            "BUSYGROUP Consumer Group name already exists",
        ));
    }
    let created = get_stream(ctx, name)?.is_none();
    let key = stream_for_write(ctx, name)?;
    let layout = ctx.layout;
    groups::create(ctx.txn(), &layout, Stream::of(&key), group_name, cursor)?;
    if created {
        super::changed(ctx, &key);
    }
    ctx.notify(EventClass::Stream, "xgroup-create", name);
    Ok(())
}

/// `XSETID key last-id [ENTRIESADDED n] [MAXDELETEDID id]`.
pub fn xsetid(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let id = parse_id(arg(argv, 2), 0, IdForm::Strict)?;
    let (mut entries_added, mut max_deleted) = (-1i64, StreamId::MIN);
    let mut i = 3;
    while i < argv.len() {
        let option = arg(argv, i);
        let more = i + 1 < argv.len();
        if option.eq_ignore_ascii_case(b"ENTRIESADDED") && more {
            entries_added = long_long(arg(argv, i + 1))?;
            if entries_added < 0 {
                return Err(CmdError::fixed("ERR entries_added must be positive"));
            }
        } else if option.eq_ignore_ascii_case(b"MAXDELETEDID") && more {
            max_deleted = parse_id(arg(argv, i + 1), 0, IdForm::Strict)?;
            if id < max_deleted {
                return Err(CmdError::fixed(
                    "ERR The ID specified in XSETID is smaller than the provided \
                     max_deleted_entry_id",
                ));
            }
        } else {
            return Err(CmdError::SYNTAX);
        }
        i += 2;
    }
    let Some(key) = get_stream(ctx, arg(argv, 1))? else {
        return Err(CmdError::NO_SUCH_KEY);
    };
    let stream = Stream::of(&key);
    let len = stream.len(&ctx.access);
    if len > 0 {
        let top = Stream::id_of(&ctx.access, stream.entries().last(&ctx.access));
        if id < top {
            return Err(CmdError::fixed(
                "ERR The ID specified in XSETID is smaller than the target stream top item",
            ));
        }
        if entries_added != -1 && len > entries_added as u64 {
            return Err(CmdError::fixed(
                "ERR The entries_added specified in XSETID is smaller than the target stream \
                 length",
            ));
        }
    }
    let txn = ctx.txn();
    let mut meta = stream.meta(txn);
    meta.set_last_id(id);
    if entries_added != -1 {
        meta.entries_added = entries_added as u64;
    }
    if !max_deleted.is_zero() {
        meta.set_max_deleted_id(max_deleted);
    }
    stream.set_meta(txn, &meta);
    ctx.notify(EventClass::Stream, "xsetid", arg(argv, 1));
    out.ok();
    Ok(())
}
