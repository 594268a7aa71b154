//! Redis 7 functions (functions.c, function_lua.c): `FUNCTION` and its subcommands, `FCALL`
//! and `FCALL_RO`.
//!
//! A library is Lua code whose first line names it (`#!lua name=mylib`) and which registers
//! functions as it loads (`redis.register_function`). The libraries live in the segment
//! (see `store.rs`): a backup promoted to primary has every library, and `FUNCTION LOAD`,
//! `DELETE`, `FLUSH` and `RESTORE` reach the backups as redo, each one txn that changes
//! nothing when it answers an error (every check comes before the first write, as everywhere
//! in [`crate::cmd`]). The loaded libraries are a per-node cache in the script engine, keyed
//! by the SHA-1 of their code, which the segment's copy names: a node loads a library its
//! cache lacks from that copy, so the cache never answers for a library the segment does not
//! hold (see `scripts/engine/library.rs`).
//!
//! A function runs as a script does (`EVAL`): in the same VM, under the same budgets, with
//! the same `redis` table, and **a function that fails rolls back what it wrote** (see
//! [`crate::cmd::scripts`]). It is called with its keys and arguments as two tables (Redis
//! passes them so; there are no `KEYS` and `ARGV`). `FCALL_RO` is a read, served wherever
//! `EVAL_RO` is (a backup too), and refuses a function without the `no-writes` flag, as
//! Redis does; the other flags are kept and listed, and change nothing here.
//!
//! `FUNCTION LIST` and `FUNCTION DUMP` give the libraries in the order of their names, and a
//! library's functions in the order its code registered them (Redis gives both in its hash
//! tables' orders). `FUNCTION STATS` never shows a running function (calls are serial: none
//! runs while a command does; a front end answers others `-BUSY` meanwhile). `FUNCTION
//! KILL` is `SCRIPT KILL`: a node's front end answers it while a script or function runs
//! (`session::is_script_kill`), and it stops either, undoing its writes; reaching the model,
//! it finds none running (`NOTBUSY`).
//!
//! Bounds Redis lacks: a library's code holds at most [`LIBRARY_CODE_LEN_MAX`] bytes, a
//! library registers at most [`super::scripts::FUNCTIONS_PER_LIBRARY_MAX`] functions, whose names and
//! descriptions hold at most [`REGISTERED_LEN_MAX`] bytes together, and its code runs at
//! most 50 million Lua instructions as it loads (Redis: 500 ms).

mod shebang;
mod store;

use super::scripts::{
    ALLOW_OOM, FUNCTION_FLAGS, LibraryRef, NO_WRITES, Registered, ScriptEngine, sha1_hex,
};
use super::{CmdError, Command, Ctx, Read, Write, arg, data, subcommand_error};
use crate::rdb::functions::Records;
use crate::resp::{Argv, ReplyWriter};

pub use store::{CHECK_FUNCTION_INDEX, Library, all as libraries, check, counts, owned};

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("FCALL", -3, Write, (0, 0, 0), false, fcall),
    data("FCALL_RO", -3, Read, (0, 0, 0), false, fcall),
    data("FUNCTION", -2, Write, (0, 0, 0), false, function),
];

/// The most bytes a library's code may hold (tandem's bound; Redis has none but the 512 MB
/// of a bulk string).
pub const LIBRARY_CODE_LEN_MAX: usize = 1 << 20;
/// The most bytes the names and descriptions of a library's functions may hold together.
pub const REGISTERED_LEN_MAX: usize = 1 << 20;

/// The one engine there is (functions.c's `engines` holds "LUA" alone).
const ENGINE_NAME: &str = "LUA";

const NOT_FOUND: CmdError = CmdError::fixed("ERR Function not found");

fn lossy(bytes: &[u8]) -> std::borrow::Cow<'_, str> {
    String::from_utf8_lossy(bytes)
}

/// The engine, which `FUNCTION` needs to load libraries (no script calls `FUNCTION`).
fn engine<'c, 'a>(ctx: &'c mut Ctx<'a, '_>) -> Result<&'c mut ScriptEngine, CmdError> {
    ctx.scripts.as_deref_mut().ok_or(CmdError::fixed(
        "ERR This Redis command is not allowed from script",
    ))
}

// ---------------------------------------------------------------------------------------
// FCALL and FCALL_RO.

/// `FCALL name numkeys key... arg...` and `FCALL_RO`.
fn fcall(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let Some(called) = store::called(&ctx.access, &ctx.layout, arg(argv, 1)) else {
        return Err(NOT_FOUND);
    };
    let numkeys = crate::num::parse_i64(arg(argv, 2))
        .ok_or(CmdError::fixed("ERR Bad number of keys provided"))?;
    if numkeys > (argv.len() - 3) as i64 {
        return Err(CmdError::fixed(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::fixed("ERR Number of keys can't be negative"));
    }
    let read_only = arg(argv, 0).eq_ignore_ascii_case(b"FCALL_RO");
    let no_writes = called.flags & NO_WRITES != 0;
    if read_only && !no_writes {
        return Err(CmdError::fixed(
            "ERR Can not execute a script with write flag using *_ro command.",
        ));
    }
    super::scripts::may_run_past_maxmemory(ctx, called.flags & ALLOW_OOM != 0 || no_writes)?;
    let Some(engine) = ctx.scripts.take() else {
        return Err(CmdError::fixed(
            "ERR This Redis command is not allowed from script",
        ));
    };
    let result = (|| {
        if !engine.has_library(&called.sha) {
            let code = store::code(&ctx.access, &called);
            engine.load_library(LibraryRef {
                sha: called.sha,
                code: &code,
            })?;
        }
        let numkeys = numkeys as usize;
        let keys: Vec<&[u8]> = argv.iter().skip(3).take(numkeys).collect();
        let args: Vec<&[u8]> = argv.iter().skip(3 + numkeys).collect();
        let no_writes = read_only || no_writes;
        engine.call_function(ctx, &called.sha, &called.name, &keys, &args, no_writes, out)
    })();
    ctx.scripts = Some(engine);
    result
}

// ---------------------------------------------------------------------------------------
// FUNCTION.

fn function(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    // The session checks the subcommand and its arity first; a call from elsewhere (the
    // native port) is checked here.
    if let Some(refusal) = subcommand_error("FUNCTION", argv) {
        return Err(refusal);
    }
    match arg(argv, 1).to_ascii_uppercase().as_slice() {
        b"LOAD" => load(ctx, argv, out),
        b"DELETE" => {
            let layout = ctx.layout;
            if !store::delete(ctx.txn(), &layout, arg(argv, 2)) {
                return Err(CmdError::fixed("ERR Library not found"));
            }
            out.ok();
            Ok(())
        }
        b"FLUSH" => flush(ctx, argv, out),
        b"LIST" => list(ctx, argv, out),
        b"DUMP" => {
            let all = store::all(&ctx.access, &ctx.layout);
            out.bulk(&crate::rdb::functions::dump(
                all.iter().map(|library| library.code.as_slice()),
            ));
            Ok(())
        }
        b"RESTORE" => restore(ctx, argv, out),
        b"STATS" => {
            let (libraries, functions) = store::counts(&ctx.access, &ctx.layout);
            out.map(2);
            out.bulk(b"running_script");
            out.null();
            out.bulk(b"engines");
            out.map(1);
            out.bulk(ENGINE_NAME.as_bytes());
            out.map(2);
            out.bulk(b"libraries_count");
            out.integer(libraries as i64);
            out.bulk(b"functions_count");
            out.integer(functions as i64);
            Ok(())
        }
        // A script never runs while a command waits: calls are serial (see the module).
        b"KILL" => Err(CmdError::fixed(
            "NOTBUSY No scripts in execution right now.",
        )),
        b"HELP" => {
            help(out);
            Ok(())
        }
        _ => unreachable!("the subcommand was checked"),
    }
}

/// Redis's `addReplySubcommandSyntaxError`.
fn syntax_error(argv: &Argv) -> CmdError {
    let sub = arg(argv, 1);
    CmdError::owned(format!(
        "ERR unknown subcommand or wrong number of arguments for '{}'. Try FUNCTION HELP.",
        lossy(shebang::c_text(&sub[..sub.len().min(128)]))
    ))
}

/// `FUNCTION LOAD [REPLACE] code`.
fn load(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let mut replace = false;
    let mut at = 2;
    while at < argv.len() - 1 {
        let option = arg(argv, at);
        at += 1;
        if option.eq_ignore_ascii_case(b"REPLACE") {
            replace = true;
            continue;
        }
        // `addReplyErrorFormat` trims CR and LF from the text's ends.
        let text = format!(
            "ERR Unknown option given: {}",
            lossy(shebang::c_text(option))
        );
        return Err(CmdError::owned(
            text.trim_end_matches(['\r', '\n']).to_string(),
        ));
    }
    let code = arg(argv, at);
    let layout = ctx.layout;
    let library = {
        let access = &ctx.access;
        let stored = |name: &[u8]| store::exists(access, &layout, name);
        let Some(engine) = ctx.scripts.as_deref_mut() else {
            return Err(CmdError::fixed(
                "ERR This Redis command is not allowed from script",
            ));
        };
        create(engine, code, replace, stored)?
    };
    for function in &library.functions {
        let owner = store::library_of(&ctx.access, &layout, &function.name);
        if owner.is_some_and(|owner| !(replace && owner == library.name)) {
            return Err(function_exists(&function.name));
        }
    }
    let txn = ctx.txn();
    store::delete(txn, &layout, &library.name);
    store::insert(txn, &layout, &library)?;
    out.bulk(&library.name);
    Ok(())
}

/// A library made of `code` as `functionsCreateWithLibraryCtx` makes one: its shebang read,
/// its name checked, its code loaded (and cached) in `engine`. `stored` says whether the
/// place it goes holds a library of that name already, which only `replace` allows. The
/// caller checks its functions against those of the other libraries.
fn create(
    engine: &mut ScriptEngine,
    code: &[u8],
    replace: bool,
    stored: impl Fn(&[u8]) -> bool,
) -> Result<Library, CmdError> {
    let fail = |text: String| CmdError::owned(format!("ERR {text}"));
    let shebang = shebang::parse(code).map_err(fail)?;
    if !shebang::valid_name(&shebang.name) {
        return Err(fail(shebang::BAD_NAME.into()));
    }
    if !shebang.engine.eq_ignore_ascii_case(ENGINE_NAME.as_bytes()) {
        return Err(fail(format!(
            "Engine '{}' not found",
            lossy(&shebang.engine)
        )));
    }
    if stored(&shebang.name) && !replace {
        return Err(fail(format!(
            "Library '{}' already exists",
            lossy(&shebang.name)
        )));
    }
    if code.len() > LIBRARY_CODE_LEN_MAX {
        return Err(fail(format!(
            "a library's code may hold at most {LIBRARY_CODE_LEN_MAX} bytes, this one holds {}",
            code.len()
        )));
    }
    let sha = sha1_hex(code);
    let functions = engine.load_library(LibraryRef { sha, code })?;
    if functions.is_empty() {
        return Err(fail("No functions registered".into()));
    }
    // Redis holds a library's own functions to their case, and the functions of all
    // libraries without it: a library registering `f` and `F` links one of them, and Redis
    // fails an assertion when it deletes that library. It is refused here.
    for (at, function) in functions.iter().enumerate() {
        if functions[..at]
            .iter()
            .any(|earlier| defined(earlier, &function.name))
        {
            return Err(function_exists(&function.name));
        }
    }
    let registered_len: usize = functions.iter().map(registered_len).sum();
    if registered_len > REGISTERED_LEN_MAX {
        return Err(fail(format!(
            "the names and descriptions of a library's functions may hold at most \
             {REGISTERED_LEN_MAX} bytes, these hold {registered_len}"
        )));
    }
    Ok(Library {
        name: shebang.name,
        code: code.to_vec(),
        sha,
        functions,
    })
}

fn registered_len(function: &Registered) -> usize {
    function.name.len() + function.description.as_ref().map_or(0, Vec::len)
}

/// `FUNCTION FLUSH [ASYNC|SYNC]`.
fn flush(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if argv.len() > 3 {
        return Err(syntax_error(argv));
    }
    if let Some(mode) = argv.get(2)
        && !mode.eq_ignore_ascii_case(b"SYNC")
        && !mode.eq_ignore_ascii_case(b"ASYNC")
    {
        return Err(CmdError::fixed(
            "ERR FUNCTION FLUSH only supports SYNC|ASYNC option",
        ));
    }
    let layout = ctx.layout;
    store::flush(ctx.txn(), &layout);
    if let Some(engine) = ctx.scripts.as_deref_mut() {
        engine.forget_libraries();
    }
    out.ok();
    Ok(())
}

/// `FUNCTION LIST [LIBRARYNAME pattern] [WITHCODE]`.
fn list(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let mut with_code = false;
    let mut pattern: Option<&[u8]> = None;
    let mut at = 2;
    while at < argv.len() {
        let option = arg(argv, at);
        if !with_code && option.eq_ignore_ascii_case(b"WITHCODE") {
            with_code = true;
        } else if pattern.is_none() && option.eq_ignore_ascii_case(b"LIBRARYNAME") {
            if at + 1 >= argv.len() {
                return Err(CmdError::fixed("ERR library name argument was not given"));
            }
            at += 1;
            pattern = Some(arg(argv, at));
        } else {
            return Err(CmdError::owned(format!(
                "ERR Unknown argument {}",
                lossy(shebang::c_text(option))
            )));
        }
        at += 1;
    }
    let mut libraries = store::all(&ctx.access, &ctx.layout);
    if let Some(pattern) = pattern {
        // Redis matches without case (`stringmatchlen(…, nocase = 1)`).
        let pattern = pattern.to_ascii_lowercase();
        libraries
            .retain(|library| crate::glob::matches(&pattern, &library.name.to_ascii_lowercase()));
    }
    out.array(libraries.len());
    for library in &libraries {
        out.map(if with_code { 4 } else { 3 });
        out.bulk(b"library_name");
        out.bulk(&library.name);
        out.bulk(b"engine");
        out.bulk(ENGINE_NAME.as_bytes());
        out.bulk(b"functions");
        out.array(library.functions.len());
        for function in &library.functions {
            out.map(3);
            out.bulk(b"name");
            out.bulk(&function.name);
            out.bulk(b"description");
            match &function.description {
                Some(description) => out.bulk(description),
                None => out.null(),
            }
            out.bulk(b"flags");
            let flags: Vec<&str> = FUNCTION_FLAGS
                .iter()
                .enumerate()
                .filter(|(bit, _)| function.flags & (1 << bit) != 0)
                .map(|(_, flag)| *flag)
                .collect();
            out.set(flags.len());
            for flag in flags {
                out.simple(flag);
            }
        }
        if with_code {
            out.bulk(b"library_code");
            out.bulk(&library.code);
        }
    }
    Ok(())
}

/// How `FUNCTION RESTORE` treats the libraries it finds in place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Policy {
    /// Every library goes first.
    Flush,
    /// A library of a restored one's name is an error (the default).
    Append,
    /// A library of a restored one's name is replaced.
    Replace,
}

/// `FUNCTION RESTORE payload [FLUSH|APPEND|REPLACE]`.
fn restore(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if argv.len() > 4 {
        return Err(syntax_error(argv));
    }
    let policy = match argv.get(3).map(<[u8]>::to_ascii_uppercase).as_deref() {
        None | Some(b"APPEND") => Policy::Append,
        Some(b"REPLACE") => Policy::Replace,
        Some(b"FLUSH") => Policy::Flush,
        Some(_) => {
            return Err(CmdError::fixed(
                "ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE.",
            ));
        }
    };
    let Some(records) = Records::new(arg(argv, 2)) else {
        return Err(CmdError::fixed(
            "ERR DUMP payload version or checksum are wrong",
        ));
    };
    // Each library loads into a set of its own first, as Redis's does: one that repeats an
    // earlier one's name or function fails the whole payload.
    let mut restored: Vec<Library> = Vec::new();
    for record in records {
        let code = record.map_err(|text| CmdError::owned(format!("ERR {text}")))?;
        let in_payload = |name: &[u8]| restored.iter().any(|library| library.name == name);
        let library = create(engine(ctx)?, &code, false, in_payload)?;
        if let Some(function) = library
            .functions
            .iter()
            .find(|function| restored.iter().any(|other| defines(other, &function.name)))
        {
            return Err(function_exists(&function.name));
        }
        restored.push(library);
    }
    let layout = ctx.layout;
    if policy != Policy::Flush {
        join_check(ctx, &restored, policy == Policy::Replace)?;
    }
    let txn = ctx.txn();
    if policy == Policy::Flush {
        store::flush(txn, &layout);
    }
    for library in &restored {
        store::delete(txn, &layout, &library.name);
        store::insert(txn, &layout, library)?;
    }
    out.ok();
    Ok(())
}

/// Whether `library` holds `function`, whose name is compared without case.
fn defines(library: &Library, function: &[u8]) -> bool {
    library
        .functions
        .iter()
        .any(|known| defined(known, function))
}

fn defined(known: &Registered, function: &[u8]) -> bool {
    known.name.eq_ignore_ascii_case(function)
}

fn function_exists(name: &[u8]) -> CmdError {
    CmdError::owned(format!("ERR Function {} already exists", lossy(name)))
}

/// `libraryJoin`'s checks of `restored` against the stored libraries: a library of the same
/// name is an error unless `replace`, and so, always, is a function another stored library
/// (one not replaced) holds.
fn join_check(ctx: &Ctx<'_, '_>, restored: &[Library], replace: bool) -> Result<(), CmdError> {
    let stored = |name: &[u8]| store::exists(&ctx.access, &ctx.layout, name);
    if !replace && let Some(library) = restored.iter().find(|library| stored(&library.name)) {
        return Err(CmdError::owned(format!(
            "ERR Library {} already exists",
            lossy(&library.name)
        )));
    }
    for library in restored {
        for function in &library.functions {
            let owner = store::library_of(&ctx.access, &ctx.layout, &function.name);
            let replaced = |owner: &Vec<u8>| replace && restored.iter().any(|r| &r.name == owner);
            if owner.is_some_and(|owner| !replaced(&owner)) {
                return Err(function_exists(&function.name));
            }
        }
    }
    Ok(())
}

fn help(out: &mut ReplyWriter<'_>) {
    let help = [
        "FUNCTION <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "LOAD [REPLACE] <FUNCTION CODE>",
        "    Create a new library with the given library name and code.",
        "DELETE <LIBRARY NAME>",
        "    Delete the given library.",
        "LIST [LIBRARYNAME PATTERN] [WITHCODE]",
        "    Return general information on all the libraries:",
        "    * Library name",
        "    * The engine used to run the Library",
        "    * Library description",
        "    * Functions list",
        "    * Library code (if WITHCODE is given)",
        "    It also possible to get only function that matches a pattern using LIBRARYNAME argument.",
        "STATS",
        "    Return information about the current function running:",
        "    * Function name",
        "    * Command used to run the function",
        "    * Duration in MS that the function is running",
        "    If no function is running, return nil",
        "    In addition, returns a list of available engines.",
        "KILL",
        "    Kill the current running function.",
        "FLUSH [ASYNC|SYNC]",
        "    Delete all the libraries.",
        "    When called without the optional mode argument, the behavior is determined by the",
        "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
        "    * ASYNC: Asynchronously flush the libraries.",
        "    * SYNC: Synchronously flush the libraries.",
        "DUMP",
        "    Return a serialized payload representing the current libraries, can be restored using FUNCTION RESTORE command",
        "RESTORE <PAYLOAD> [FLUSH|APPEND|REPLACE]",
        "    Restore the libraries represented by the given payload, it is possible to give a restore policy to",
        "    control how to handle existing libraries (default APPEND):",
        "    * FLUSH: delete all existing libraries.",
        "    * APPEND: appends the restored libraries to the existing libraries. On collision, abort.",
        "    * REPLACE: appends the restored libraries to the existing libraries, On collision, replace the old",
        "      libraries with the new libraries (notice that even on this option there is a chance of failure",
        "      in case of functions name collision with another library).",
        "HELP",
        "    Prints this help.",
    ];
    out.array(help.len());
    for line in help {
        out.simple(line);
    }
}
