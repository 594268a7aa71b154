//! Lua scripts (eval.c, script.c, script_lua.c): `EVAL`, `EVALSHA`, their read-only forms,
//! and `SCRIPT`.
//!
//! # The script store
//!
//! The scripts `SCRIPT LOAD` and `EVAL` stored live in the segment, so a backup promoted to
//! primary knows every script its primary knew, and `SCRIPT FLUSH` reaches the backups as
//! redo like any write. The store is a [`Dict`] whose 64-byte header is at
//! [`Layout::scripts_at`]; each entry is one block:
//!
//! ```text
//! Link     24 bytes   next, hash of the SHA-1, key_len = 40, aux = the body's length
//! sha1     40 bytes   the body's SHA-1 in lower-case hex: the key
//! body     aux bytes  the script as given
//! ```
//!
//! The block's length follows from its link (`24 + 40 + aux`), so [`owned`] and `SCRIPT
//! FLUSH` need nothing else to account for it.
//!
//! # Running a script
//!
//! A script runs in the Lua 5.1 VM of the node's [`ScriptEngine`] (see [`engine`]), inside
//! the call's txn: `redis.call` runs a data command on the same [`Ctx`] through
//! [`super::run_in`], so the script's writes are the call's writes. The compiled functions
//! are a per-node cache of the store, keyed by SHA-1; `EVALSHA` asks the store first, so the
//! cache never answers for a script the segment does not hold.
//!
//! **Unlike Redis, a script that fails rolls back everything it wrote**: a Lua error, an
//! error a `redis.call` raised, an exhausted instruction or memory budget all fail the call,
//! and the store undoes its txn. A script that *returns* an error reply (`return
//! redis.error_reply(...)`, `return {err=...}`) did not fail: its writes stay, as in Redis.
//! Inside `MULTI` a failing script that had written fails the whole `EXEC`
//! ([`CmdError::Abort`]), since its writes cannot be undone alone; one that had written
//! nothing answers its error in `EXEC`'s array, as in Redis.
//!
//! As in Redis, `EVAL` keeps a script that compiled for `EVALSHA` whether it then succeeded
//! or failed: a failed script that wrote nothing answers its error in a call that commits the
//! store's entry alone (if the store lacked it); one that wrote is rolled back, the entry
//! with it. `EVAL_RO` runs on a segment and keeps nothing (Redis keeps its script too).
//!
//! Redis 7's functions (`FUNCTION`, `FCALL`) run in the same engine, by the same rules: see
//! [`super::functions`].

mod bit;
mod cjson;
mod engine;
mod guards;
mod msgpack;
mod pattern;

use tandem_memory::Txn;

use super::{Access, CmdError, Command, Ctx, Read, Write, arg, data, int_arg};
use crate::alloc::OutOfMemory;
use crate::db::Layout;
use crate::dict::{Dict, LINK_BYTES, Link};
use crate::mem::Mem;
use crate::resp::{Argv, ReplyWriter};

pub use engine::{
    ALLOW_OOM, FUNCTION_FLAGS, FUNCTIONS_PER_LIBRARY_MAX, INSTRUCTION_BUDGET_DEFAULT, LibraryRef,
    MEMORY_LIMIT_DEFAULT, NO_WRITES, Registered, ScriptEngine, may_run_past_maxmemory,
};

/// Whether `name` runs or manages scripts or functions (`EVAL`, `SCRIPT`, `FCALL`,
/// `FUNCTION`, …): a script may not call one, and a user limited to reads or to some keys
/// may not run one.
pub(crate) fn is_script_command(name: &str) -> bool {
    matches!(
        name,
        "EVAL"
            | "EVALSHA"
            | "EVAL_RO"
            | "EVALSHA_RO"
            | "SCRIPT"
            | "FCALL"
            | "FCALL_RO"
            | "FUNCTION"
    )
}

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    data("EVAL", -3, Write, (0, 0, 0), false, eval),
    data("EVALSHA", -3, Write, (0, 0, 0), false, evalsha),
    data("EVALSHA_RO", -3, Read, (0, 0, 0), false, evalsha),
    data("EVAL_RO", -3, Read, (0, 0, 0), false, eval),
    data("SCRIPT", -2, Write, (0, 0, 0), false, script),
];

/// Bytes of a SHA-1 in hex: the store's key.
pub const SHA_HEX_LEN: usize = 40;

/// A script's SHA-1, in lower-case hex.
pub type Sha = [u8; SHA_HEX_LEN];

const NOSCRIPT: CmdError = CmdError::fixed("NOSCRIPT No matching script. Please use EVAL.");

/// The SHA-1 of `body` in lower-case hex, as Redis names scripts.
pub fn sha1_hex(body: &[u8]) -> Sha {
    let digest = sha1_smol::Sha1::from(body).digest().bytes();
    let mut hex = [0u8; SHA_HEX_LEN];
    for (i, byte) in digest.iter().enumerate() {
        hex[2 * i] = HEX_DIGITS[usize::from(byte >> 4)];
        hex[2 * i + 1] = HEX_DIGITS[usize::from(byte & 15)];
    }
    hex
}

const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";

/// `text` as a store key if it is 40 bytes long (Redis compares SHA-1s without case), else
/// `None`: no script can have that name.
fn sha_arg(text: &[u8]) -> Option<Sha> {
    let mut sha: Sha = text.try_into().ok()?;
    sha.make_ascii_lowercase();
    Some(sha)
}

// ---------------------------------------------------------------------------------------
// The store.

fn store(layout: &Layout) -> Dict {
    Dict::new(layout.scripts_at, LINK_BYTES)
}

/// Bytes asked of the allocator for an entry holding a body of `body_len` bytes.
fn entry_len(body_len: usize) -> usize {
    LINK_BYTES + SHA_HEX_LEN + body_len
}

/// The entry of the script named `sha`, if the store holds it.
fn find(mem: &impl Mem, layout: &Layout, sha: &Sha) -> Option<usize> {
    let hash = crate::dict::hash(layout.seed(mem), sha);
    store(layout).find(mem, sha, hash).map(|found| found.entry)
}

/// The body the entry at `entry` holds.
fn body_at(mem: &impl Mem, entry: usize) -> &[u8] {
    let link: Link = mem.pod(entry);
    mem.bytes(entry + LINK_BYTES + SHA_HEX_LEN, link.aux as usize)
}

/// Whether the store holds the script named `sha`.
/// How many scripts the store holds (`INFO memory`'s `number_of_cached_scripts`).
pub fn count(mem: &impl Mem, layout: &Layout) -> u64 {
    store(layout).len(mem)
}

pub fn is_stored(mem: &impl Mem, layout: &Layout, sha: &Sha) -> bool {
    find(mem, layout, sha).is_some()
}

/// The body of the script named `sha`, if the store holds it.
pub fn stored_body(mem: &impl Mem, layout: &Layout, sha: &Sha) -> Option<Vec<u8>> {
    find(mem, layout, sha).map(|entry| body_at(mem, entry).to_vec())
}

/// Stores `body` under its SHA-1 `sha` unless the store holds it already.
fn put(txn: &mut Txn<'_>, layout: &Layout, sha: &Sha, body: &[u8]) -> Result<(), OutOfMemory> {
    if find(txn, layout, sha).is_some() {
        return Ok(());
    }
    let body_len = u32::try_from(body.len()).map_err(|_| OutOfMemory {
        requested: body.len(),
    })?;
    let len = entry_len(body.len());
    let entry = layout.alloc.alloc(txn, len)?;
    let link = Link {
        next: 0,
        hash: crate::dict::hash(layout.seed(txn), sha),
        key_len: SHA_HEX_LEN as u32,
        aux: body_len,
    };
    let bytes = txn.set_range(entry, len);
    bytes[..LINK_BYTES].copy_from_slice(bytemuck::bytes_of(&link));
    bytes[LINK_BYTES..LINK_BYTES + SHA_HEX_LEN].copy_from_slice(sha);
    bytes[LINK_BYTES + SHA_HEX_LEN..].copy_from_slice(body);
    if let Err(err) = store(layout).insert(txn, &layout.alloc, entry) {
        layout.alloc.free(txn, entry, len);
        return Err(err);
    }
    Ok(())
}

/// Empties the store.
fn flush(txn: &mut Txn<'_>, layout: &Layout) {
    let alloc = layout.alloc;
    store(layout).clear(txn, &alloc, |txn, entry| {
        let link: Link = txn.pod(entry);
        alloc.free(txn, entry, entry_len(link.aux as usize));
    });
}

/// Pushes every block the script store holds, as (segment offset, bytes asked for).
pub fn owned(mem: &impl Mem, layout: &Layout, owned: &mut Vec<(usize, usize)>) {
    let dict = store(layout);
    dict.blocks(mem, |block, len| owned.push((block, len)));
    dict.for_each(mem, |entry| {
        let link: Link = mem.pod(entry);
        owned.push((entry, entry_len(link.aux as usize)));
    });
}

/// The scripts in the store, as (SHA-1, body), in no particular order.
pub fn stored_scripts(mem: &impl Mem, layout: &Layout) -> Vec<(Sha, Vec<u8>)> {
    let dict = store(layout);
    let mut scripts = Vec::new();
    dict.for_each(mem, |entry| {
        let sha: Sha = dict
            .key(mem, entry)
            .try_into()
            .expect("a store key is a SHA-1");
        scripts.push((sha, body_at(mem, entry).to_vec()));
    });
    scripts
}

// ---------------------------------------------------------------------------------------
// Shebang flags (eval.c's evalExtractShebangFlags).

/// What a script's `#!lua flags=...` line declares.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ScriptFlags {
    /// The script has a shebang line: it is not in Redis's compatibility mode.
    pub shebang: bool,
    /// `no-writes`: the script may not call a write command.
    pub no_writes: bool,
    /// `allow-oom`: the script may run, and grow the database, past `maxmemory`.
    pub allow_oom: bool,
}

/// The flags a body declares and the length of its shebang line (which the compiler skips,
/// keeping the line feed so line numbers stay the user's), or Redis's error.
pub fn shebang_flags(body: &[u8]) -> Result<(ScriptFlags, usize), CmdError> {
    if !body.starts_with(b"#!") {
        return Ok((ScriptFlags::default(), 0));
    }
    let Some(end) = body.iter().position(|&b| b == b'\n') else {
        return Err(CmdError::fixed("ERR Invalid script shebang"));
    };
    let line = &body[..end];
    let mut parts = line
        .split(|b| b.is_ascii_whitespace())
        .filter(|part| !part.is_empty());
    let engine = parts.next().unwrap_or_default();
    if engine != b"#!lua" {
        return Err(CmdError::owned(format!(
            "ERR Unexpected engine in script shebang: {}",
            String::from_utf8_lossy(engine)
        )));
    }
    let mut flags = ScriptFlags {
        shebang: true,
        ..ScriptFlags::default()
    };
    for part in parts {
        let Some(list) = part.strip_prefix(b"flags=") else {
            return Err(CmdError::owned(format!(
                "ERR Unknown lua shebang option: {}",
                String::from_utf8_lossy(part)
            )));
        };
        // `flags=` alone declares none (Redis splits an empty list into no flags).
        for flag in list.split(|&b| b == b',').filter(|_| !list.is_empty()) {
            match flag {
                b"no-writes" => flags.no_writes = true,
                b"allow-oom" => flags.allow_oom = true,
                // Meaningful only for a Redis server's state (replication, cluster):
                // accepted and ignored here.
                b"allow-stale" | b"no-cluster" | b"allow-cross-slot-keys" => {}
                _ => {
                    return Err(CmdError::owned(format!(
                        "ERR Unexpected flag in script shebang: {}",
                        String::from_utf8_lossy(flag)
                    )));
                }
            }
        }
    }
    Ok((flags, end))
}

// ---------------------------------------------------------------------------------------
// Commands.

/// The keys and arguments of `EVAL script numkeys key... arg...`, checked as Redis does.
fn keys_and_args(argv: &Argv) -> Result<usize, CmdError> {
    let numkeys = int_arg(argv, 2)?;
    if numkeys > (argv.len() - 3) as i64 {
        return Err(CmdError::fixed(
            "ERR Number of keys can't be greater than number of args",
        ));
    }
    if numkeys < 0 {
        return Err(CmdError::fixed("ERR Number of keys can't be negative"));
    }
    Ok(numkeys as usize)
}

/// What a call of a script names: its SHA-1, and its body when the caller gave it (`EVAL`).
#[derive(Clone, Copy, Debug)]
pub struct ScriptRef<'b> {
    pub sha: Sha,
    pub body: Option<&'b [u8]>,
}

fn eval(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let numkeys = keys_and_args(argv)?;
    let body = arg(argv, 1);
    let script = ScriptRef {
        sha: sha1_hex(body),
        body: Some(body),
    };
    // Compiled first, as Redis does before it runs: a script that does not compile is not
    // kept, one that does is, whatever it does next.
    if let Some(engine) = ctx.scripts.as_deref_mut() {
        engine.compile(&script.sha, body)?;
    }
    let result = run(ctx, argv, numkeys, script, out);
    // Like Redis, EVAL leaves the script for EVALSHA, even when it then failed; only a write
    // can (not EVAL_RO, which runs on a segment). A script that failed after writing rolls
    // its call back, this entry with it (`CmdError::Abort`); one that wrote nothing answers
    // its error in a call that commits the entry alone, if the store lacked it.
    let Access::Write(txn) = &mut ctx.access else {
        return result;
    };
    match result {
        Ok(()) => {
            put(txn, &ctx.layout, &script.sha, body)?;
            Ok(())
        }
        Err(CmdError::Reply(text)) if !is_stored(&**txn, &ctx.layout, &script.sha) => {
            put(txn, &ctx.layout, &script.sha, body)?;
            out.error(&text);
            Ok(())
        }
        Err(err) => Err(err),
    }
}

fn evalsha(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let Some(sha) = sha_arg(arg(argv, 1)) else {
        return Err(NOSCRIPT);
    };
    let numkeys = keys_and_args(argv)?;
    if !is_stored(&ctx.access, &ctx.layout, &sha) {
        return Err(NOSCRIPT);
    }
    run(ctx, argv, numkeys, ScriptRef { sha, body: None }, out)
}

/// Runs a script in the context's engine, its keys and arguments from `argv[3..]`.
fn run(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    numkeys: usize,
    script: ScriptRef<'_>,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let Some(engine) = ctx.scripts.take() else {
        return Err(CmdError::fixed(
            "ERR This Redis command is not allowed from script",
        ));
    };
    let read_only = arg(argv, 0).to_ascii_uppercase().ends_with(b"_RO");
    let keys: Vec<&[u8]> = argv.iter().skip(3).take(numkeys).collect();
    let args: Vec<&[u8]> = argv.iter().skip(3 + numkeys).collect();
    let result = engine.run(ctx, script, &keys, &args, read_only, out);
    ctx.scripts = Some(engine);
    result
}

fn script(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    let sub = arg(argv, 1).to_ascii_uppercase();
    let arity_error = |name: &str| {
        CmdError::owned(format!(
            "ERR wrong number of arguments for 'script|{name}' command"
        ))
    };
    match sub.as_slice() {
        b"LOAD" => {
            if argv.len() != 3 {
                return Err(arity_error("load"));
            }
            let body = arg(argv, 2);
            let sha = sha1_hex(body);
            let Some(engine) = ctx.scripts.as_deref_mut() else {
                return Err(CmdError::fixed(
                    "ERR This Redis command is not allowed from script",
                ));
            };
            engine.compile(&sha, body)?;
            let layout = ctx.layout;
            put(ctx.txn(), &layout, &sha, body)?;
            out.bulk(&sha);
        }
        b"EXISTS" => {
            if argv.len() < 3 {
                return Err(arity_error("exists"));
            }
            out.array(argv.len() - 2);
            for name in argv.iter().skip(2) {
                let known =
                    sha_arg(name).is_some_and(|sha| is_stored(&ctx.access, &ctx.layout, &sha));
                out.integer(i64::from(known));
            }
        }
        b"FLUSH" => {
            let mode = argv.get(2).map(<[u8]>::to_ascii_uppercase);
            let valid = match mode.as_deref() {
                None => true,
                Some(b"SYNC" | b"ASYNC") => argv.len() == 3,
                Some(_) => false,
            };
            if !valid {
                return Err(CmdError::fixed(
                    "ERR SCRIPT FLUSH only support SYNC|ASYNC option",
                ));
            }
            let layout = ctx.layout;
            flush(ctx.txn(), &layout);
            if let Some(engine) = ctx.scripts.as_deref_mut() {
                engine.forget_compiled();
            }
            out.ok();
        }
        b"KILL" if argv.len() == 2 => {
            // A script never runs while a command waits: calls are serial.
            return Err(CmdError::fixed(
                "NOTBUSY No scripts in execution right now.",
            ));
        }
        b"KILL" => return Err(arity_error("kill")),
        b"DEBUG" if argv.len() == 3 => {
            return Err(CmdError::fixed(
                "ERR SCRIPT DEBUG is not supported: scripts run on the primary's executor",
            ));
        }
        b"DEBUG" => return Err(arity_error("debug")),
        b"HELP" if argv.len() == 2 => {
            let help = [
                "SCRIPT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
                "DEBUG (YES|SYNC|NO)",
                "    Set the debug mode for subsequent scripts executed.",
                "EXISTS <sha1> [<sha1> ...]",
                "    Return information about the existence of the scripts in the script cache.",
                "FLUSH [ASYNC|SYNC]",
                "    Flush the Lua scripts cache. Very dangerous on replicas.",
                "    When called without the optional mode argument, the behavior is determined by the",
                "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
                "    * ASYNC: Asynchronously flush the scripts cache.",
                "    * SYNC: Synchronously flush the scripts cache.",
                "KILL",
                "    Kill the currently executing Lua script.",
                "LOAD <script>",
                "    Load a script into the scripts cache without executing it.",
                "HELP",
                "    Prints this help.",
            ];
            out.array(help.len());
            for line in help {
                out.simple(line);
            }
        }
        b"HELP" => return Err(arity_error("help")),
        _ => {
            return Err(CmdError::owned(format!(
                "ERR unknown subcommand '{}'. Try SCRIPT HELP.",
                String::from_utf8_lossy(arg(argv, 1))
            )));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha1_matches_known_vectors() {
        assert_eq!(&sha1_hex(b""), b"da39a3ee5e6b4b0d3255bfef95601890afd80709");
        assert_eq!(
            &sha1_hex(b"abc"),
            b"a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            &sha1_hex(b"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            b"84983e441c3bd26ebaae4aa1f95129e5e54670f1"
        );
        // Redis's name for `return 1`.
        assert_eq!(
            &sha1_hex(b"return 1"),
            b"e0e1f9fabfc9d4800c877a703b823ac0578ff8db"
        );
        let million_a = vec![b'a'; 1_000_000];
        assert_eq!(
            &sha1_hex(&million_a),
            b"34aa973cd4c4daa4f61eeb2bdbad27316534016f"
        );
    }

    #[test]
    fn shebang_flags_follow_redis() {
        assert_eq!(
            shebang_flags(b"return 1").unwrap(),
            (ScriptFlags::default(), 0)
        );
        let (flags, len) = shebang_flags(b"#!lua flags=no-writes,allow-oom\nreturn 1").unwrap();
        assert!(flags.shebang && flags.no_writes && flags.allow_oom);
        assert_eq!(len, 31);
        let (flags, _) = shebang_flags(b"#!lua flags=\nreturn 1").unwrap();
        assert!(flags.shebang && !flags.no_writes && !flags.allow_oom);
        assert_eq!(
            shebang_flags(b"#!lua flags=no-writes,\n")
                .unwrap_err()
                .text(),
            "ERR Unexpected flag in script shebang: "
        );
        assert_eq!(
            shebang_flags(b"#!lua").unwrap_err().text(),
            "ERR Invalid script shebang"
        );
        assert_eq!(
            shebang_flags(b"#!py\n").unwrap_err().text(),
            "ERR Unexpected engine in script shebang: #!py"
        );
        assert_eq!(
            shebang_flags(b"#!lua flags=bad\n").unwrap_err().text(),
            "ERR Unexpected flag in script shebang: bad"
        );
        assert_eq!(
            shebang_flags(b"#!lua x=1\n").unwrap_err().text(),
            "ERR Unknown lua shebang option: x=1"
        );
    }
}
