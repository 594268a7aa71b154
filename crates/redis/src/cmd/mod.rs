//! Commands on the database: the table of every command a node knows, and the context a
//! command runs in.
//!
//! A data command runs in a [`Ctx`]: a write command inside the txn of its call (or of the
//! `EXEC` or script it is part of), a read-only command on a segment (a primary's or a
//! backup's) or inside a txn alike. **Every command checks everything it can refuse before
//! its first write**, so a command that answers an error has changed nothing: `EXEC` can then
//! answer one queued command's error and keep the others' effects, as Redis does, in one txn.
//! The one error found after writing is running out of memory, which fails the whole call.
//!
//! Connection commands (`PING`, `HELLO`, `MULTI`, …) are in the table too, for `COMMAND`
//! and arity checks, but run in the connection's [`crate::session::Session`], not here.

mod bits;
pub mod blocking;
mod collection;
pub mod config;
pub mod dump;
pub mod evict;
pub mod functions;
pub mod hashes;
pub mod hll;
mod keys;
pub mod lists;
pub mod scripts;
pub mod sets;
pub mod sort;
pub mod specs;
pub mod streams;
mod strings;
pub mod sync;
pub mod zsets;

use std::borrow::Cow;
use std::sync::OnceLock;

use tandem_memory::{Segment, Txn};

use crate::alloc::OutOfMemory;
use crate::db::{Key, Kind, Layout};
use crate::mem::Mem;
use crate::notify::{EventClass, Notices};
use crate::resp::{Argv, ReplyWriter};

pub use keys::{free_value, sweep, value_blocks};

/// Where a command reads and writes.
#[derive(Debug)]
pub enum Access<'a, 't> {
    /// A read-only command on a segment as it stands.
    Read(&'a Segment),
    /// Any command inside an open txn.
    Write(&'a mut Txn<'t>),
}

impl Mem for Access<'_, '_> {
    #[inline]
    fn bytes(&self, offset: usize, len: usize) -> &[u8] {
        match self {
            Access::Read(segment) => segment.read(offset, len),
            Access::Write(txn) => txn.read(offset, len),
        }
    }
}

/// What a command runs with.
#[derive(Debug)]
pub struct Ctx<'a, 't> {
    pub access: Access<'a, 't>,
    pub layout: Layout,
    /// The primary's time, in Unix milliseconds: what expiry is measured against.
    pub now_ms: u64,
    /// The state of the generator [`Ctx::random`] draws from (SplitMix64). What a write draws
    /// reaches the backups as the redo of its effects, so no replica draws again; it only
    /// needs to differ between calls.
    pub rng: u64,
    /// The node's script engine, for `EVAL` and its relatives; `None` while a script runs
    /// (a script cannot start another) or where no engine was given.
    pub scripts: Option<&'a mut scripts::ScriptEngine>,
    /// Whether a blocking command may leave its connection waiting ([`blocking`]): only a
    /// call made for the command itself; inside `EXEC` or a script it answers at once.
    pub waiting: crate::wire::Waiting,
    /// The command runs inside a `MULTI` block's `EXEC`: a read that would wait answers at
    /// once, as Redis answers a client that may not block (`XREAD … BLOCK`).
    pub in_exec: bool,
    /// The keyspace notifications the call publishes if it commits ([`crate::notify`]);
    /// none unless the model asks for them.
    pub notices: Notices,
    /// The database was past `maxmemory` when the call began (and eviction could not bring
    /// it back): a script's commands that may grow it are refused (Redis's
    /// `pre_command_oom_state`).
    pub over_maxmemory: bool,
}

impl<'a, 't> Ctx<'a, 't> {
    /// A context for one call.
    pub fn new(access: Access<'a, 't>, layout: Layout, now_ms: u64, rng_seed: u64) -> Self {
        Ctx {
            access,
            layout,
            now_ms,
            rng: rng_seed,
            scripts: None,
            waiting: crate::wire::Waiting::Never,
            in_exec: false,
            notices: Notices::default(),
            over_maxmemory: false,
        }
    }

    /// Publishes that `event` of `class` happened to `key` (a keyspace notification), if the
    /// database's `notify-keyspace-events` asks for the class.
    pub fn notify(&mut self, class: EventClass, event: &str, key: &[u8]) {
        self.notices.notify(class, event, self.layout.db, key);
    }

    /// Whether a script runs the command: a script's run takes the engine out of its context
    /// (a script cannot start another), and the model gives every call of its own one.
    pub fn in_script(&self) -> bool {
        self.scripts.is_none()
    }

    /// The context publishing `notices`' classes of keyspace notifications.
    pub fn with_notices(mut self, notices: Notices) -> Self {
        self.notices = notices;
        self
    }

    /// The context with the node's script engine, so that it can run scripts.
    pub fn with_scripts(mut self, engine: &'a mut scripts::ScriptEngine) -> Self {
        self.scripts = Some(engine);
        self
    }

    /// The next number of the call's generator.
    pub fn random(&mut self) -> u64 {
        self.rng = self.rng.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number below `n` (> 0), nearly uniform.
    pub fn random_below(&mut self, n: u64) -> u64 {
        assert!(n > 0, "a number below zero");
        ((u128::from(self.random()) * u128::from(n)) >> 64) as u64
    }
}

impl<'t> Ctx<'_, 't> {
    /// The open txn. Panics in a read-only command: the table marks it wrong.
    pub fn txn(&mut self) -> &mut Txn<'t> {
        match &mut self.access {
            Access::Write(txn) => txn,
            Access::Read(_) => panic!("a command the table marks read-only wrote"),
        }
    }

    /// `key`, if it exists and has not expired.
    pub fn find(&self, key: &[u8]) -> Option<Key> {
        self.layout.find(&self.access, key, self.now_ms)
    }

    /// `key` for a write: an expired entry is deleted first (in this txn), so the caller sees
    /// only a live key or none.
    pub fn find_for_write(&mut self, key: &[u8]) -> Option<Key> {
        let found = self.layout.find_any(&self.access, key)?;
        if found.head.expire_at_ms != 0 && found.head.expire_at_ms <= self.now_ms {
            self.delete(&found);
            self.notify(EventClass::Expired, "expired", key);
            return None;
        }
        Some(found)
    }

    /// `key` if it exists and is of type `kind`; `WRONGTYPE` if it is of another.
    pub fn find_typed(&self, key: &[u8], kind: Kind) -> Result<Option<Key>, CmdError> {
        match self.find(key) {
            Some(found) if found.kind() != kind => Err(CmdError::WRONGTYPE),
            other => Ok(other),
        }
    }

    /// Deletes `key` and its value.
    pub fn delete(&mut self, key: &Key) {
        let layout = self.layout;
        let txn = self.txn();
        free_value(txn, &layout, key);
        layout.unlink(txn, key);
    }

    /// The database's encoding thresholds (`CONFIG SET` changes them).
    pub fn thresholds(&self) -> crate::params::Thresholds {
        self.layout.params.thresholds(&self.access)
    }

    /// The bytes of string `key`.
    pub fn string<'m>(&'m self, key: &Key) -> &'m [u8] {
        assert_eq!(key.kind(), Kind::String, "a string read of another type");
        self.access
            .bytes(key.string_at(), key.head.value_len as usize)
    }
}

/// Why a command answered an error. Nothing was written (but for `Oom` and `Abort`, which
/// fail the whole call).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CmdError {
    /// An error reply, its code first ("ERR …", "WRONGTYPE …").
    Reply(Cow<'static, str>),
    /// The database is full: the call changes nothing.
    Oom,
    /// A script failed after it wrote: the whole call fails with this error reply (so its
    /// writes are undone), even inside `EXEC`, where a command's error otherwise leaves the
    /// block's other effects in place.
    Abort(Cow<'static, str>),
    /// A blocking command found nothing to serve it and its call may wait: it wrote nothing,
    /// and its connection waits (see [`blocking`]).
    WouldBlock,
    /// As [`CmdError::WouldBlock`], for a stream read whose later tries must read after
    /// other IDs than it was given (`$` resolved): [`blocking::would_block_after`]'s text.
    WouldBlockAfter(String),
}

impl CmdError {
    pub const WRONGTYPE: CmdError =
        CmdError::fixed("WRONGTYPE Operation against a key holding the wrong kind of value");
    pub const NOT_INTEGER: CmdError =
        CmdError::fixed("ERR value is not an integer or out of range");
    pub const NOT_FLOAT: CmdError = CmdError::fixed("ERR value is not a valid float");
    pub const SYNTAX: CmdError = CmdError::fixed("ERR syntax error");
    pub const NO_SUCH_KEY: CmdError = CmdError::fixed("ERR no such key");
    pub const OVERFLOW: CmdError = CmdError::fixed("ERR increment or decrement would overflow");
    pub const TOO_LONG: CmdError =
        CmdError::fixed("ERR string exceeds maximum allowed size (proto-max-bulk-len)");

    pub const fn fixed(text: &'static str) -> CmdError {
        CmdError::Reply(Cow::Borrowed(text))
    }

    pub fn owned(text: String) -> CmdError {
        CmdError::Reply(Cow::Owned(text))
    }

    /// The error reply's text, code first.
    pub fn text(&self) -> &str {
        match self {
            CmdError::Reply(text) | CmdError::Abort(text) => text,
            CmdError::Oom => OOM_TEXT,
            CmdError::WouldBlock => blocking::WOULD_BLOCK,
            CmdError::WouldBlockAfter(text) => text,
        }
    }
}

/// Redis's reply to a write that does not fit.
pub const OOM_TEXT: &str = "OOM command not allowed when used memory > 'maxmemory'.";

impl From<OutOfMemory> for CmdError {
    fn from(_: OutOfMemory) -> CmdError {
        CmdError::Oom
    }
}

/// The longest string Redis accepts (`proto-max-bulk-len`).
pub const STRING_LEN_MAX: usize = 512 * 1024 * 1024;

/// A command's body.
pub type Run = fn(&mut Ctx<'_, '_>, &Argv, &mut ReplyWriter<'_>) -> Result<(), CmdError>;

/// What a command is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// Changes the database: runs in a txn on the primary.
    Write,
    /// Only reads the database.
    Read,
    /// Runs in the connection (no database access): `PING`, `HELLO`, `MULTI`, …
    Connection,
}

/// One command of the table.
#[derive(Clone, Copy)]
pub struct Command {
    /// Upper case, as the procedure is named.
    pub name: &'static str,
    /// Redis's arity: `n` exactly n arguments (the name included), `-n` at least n.
    pub arity: i32,
    pub class: Class,
    /// Redis's key positions (first, last, step; 0 for no key), for `COMMAND`.
    pub keys: (i32, i32, i32),
    /// Whether the command may need more memory (`denyoom`).
    pub grows: bool,
    /// Whether a write of it may leave a set, hash or sorted set past its compact encoding,
    /// which its key's encoding mark must then remember (the families of those types).
    pub settles: bool,
    /// How the command leaves its connection waiting when nothing serves it (the blocking
    /// commands of [`blocking`]); `None` for every other.
    pub blocks: Option<blocking::Blocks>,
    pub run: Option<Run>,
}

impl std::fmt::Debug for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Command")
            .field("name", &self.name)
            .field("arity", &self.arity)
            .field("class", &self.class)
            .finish()
    }
}

impl Command {
    /// Whether `argc` arguments (the name included) fit the arity.
    pub fn arity_fits(&self, argc: usize) -> bool {
        let argc = argc as i64;
        let arity = self.arity as i64;
        if arity >= 0 {
            argc == arity
        } else {
            argc >= -arity
        }
    }
}

pub const fn data(
    name: &'static str,
    arity: i32,
    class: Class,
    keys: (i32, i32, i32),
    grows: bool,
    run: Run,
) -> Command {
    Command {
        name,
        arity,
        class,
        keys,
        grows,
        settles: false,
        blocks: None,
        run: Some(run),
    }
}

pub const fn conn(name: &'static str, arity: i32) -> Command {
    Command {
        name,
        arity,
        class: Class::Connection,
        keys: (0, 0, 0),
        grows: false,
        settles: false,
        blocks: None,
        run: None,
    }
}

pub use Class::{Read, Write};

/// Every command a node knows, sorted by name: the procedure ids are indices here, the same
/// on every node of a build.
pub fn commands() -> &'static [Command] {
    static TABLE: OnceLock<Vec<Command>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut all: Vec<Command> = BASE.to_vec();
        for family in [
            bits::COMMANDS,
            blocking::COMMANDS,
            config::COMMANDS,
            dump::COMMANDS,
            functions::COMMANDS,
            hashes::COMMANDS,
            hll::COMMANDS,
            lists::COMMANDS,
            scripts::COMMANDS,
            sets::COMMANDS,
            sort::COMMANDS,
            streams::COMMANDS,
            sync::COMMANDS,
            zsets::COMMANDS,
            zsets::geo::COMMANDS,
        ] {
            all.extend_from_slice(family);
        }
        // Only these families' writes make a set, hash or sorted set (RENAME, COPY and
        // RESTORE carry or set the mark themselves).
        let settling = [
            hashes::COMMANDS,
            sets::COMMANDS,
            zsets::COMMANDS,
            zsets::geo::COMMANDS,
        ];
        for family in settling {
            for command in family {
                if let Some(entry) = all.iter_mut().find(|entry| entry.name == command.name) {
                    entry.settles = true;
                }
            }
        }
        all.sort_by_key(|command| command.name);
        for pair in all.windows(2) {
            assert_ne!(pair[0].name, pair[1].name, "a command is in two families");
        }
        all
    })
}

/// The connection, string and key commands (the bit commands are a family of their own).
static BASE: &[Command] = &[
    conn("ACL", -2),
    data("APPEND", 3, Write, (1, 1, 1), true, strings::append),
    conn("AUTH", -2),
    conn("CLIENT", -2),
    conn("CLUSTER", -2),
    conn("COMMAND", -1),
    conn("CONFIG", -2),
    data("COPY", -3, Write, (1, 2, 1), true, keys::copy),
    data("DBSIZE", 1, Read, (0, 0, 0), false, keys::dbsize),
    data("DECR", 2, Write, (1, 1, 1), true, strings::decr),
    data("DECRBY", 3, Write, (1, 1, 1), true, strings::decrby),
    data("DEL", -2, Write, (1, -1, 1), false, keys::del),
    conn("DISCARD", 1),
    conn("ECHO", 2),
    conn("EXEC", 1),
    data("EXISTS", -2, Read, (1, -1, 1), false, keys::exists),
    data("EXPIRE", -3, Write, (1, 1, 1), false, keys::expire),
    data("EXPIREAT", -3, Write, (1, 1, 1), false, keys::expireat),
    data("EXPIRETIME", 2, Read, (1, 1, 1), false, keys::expiretime),
    data("FLUSHALL", -1, Write, (0, 0, 0), false, keys::flushall),
    data("FLUSHDB", -1, Write, (0, 0, 0), false, keys::flushdb),
    data("GET", 2, Read, (1, 1, 1), false, strings::get),
    data("GETDEL", 2, Write, (1, 1, 1), false, strings::getdel),
    data("GETEX", -2, Write, (1, 1, 1), false, strings::getex),
    data("GETRANGE", 4, Read, (1, 1, 1), false, strings::getrange),
    data("GETSET", 3, Write, (1, 1, 1), true, strings::getset),
    conn("HELLO", -1),
    data("INCR", 2, Write, (1, 1, 1), true, strings::incr),
    data("INCRBY", 3, Write, (1, 1, 1), true, strings::incrby),
    data(
        "INCRBYFLOAT",
        3,
        Write,
        (1, 1, 1),
        true,
        strings::incrbyfloat,
    ),
    conn("INFO", -1),
    data("KEYS", 2, Read, (0, 0, 0), false, keys::keys),
    data("LCS", -3, Read, (1, 2, 1), false, strings::lcs),
    data("MGET", -2, Read, (1, -1, 1), false, strings::mget),
    data("MOVE", 3, Write, (1, 1, 1), false, keys::move_key),
    data("MSET", -3, Write, (1, -1, 2), true, strings::mset),
    data("MSETNX", -3, Write, (1, -1, 2), true, strings::msetnx),
    conn("MEMORY", -2),
    conn("MONITOR", 1),
    conn("MULTI", 1),
    data("PERSIST", 2, Write, (1, 1, 1), false, keys::persist),
    data("PEXPIRE", -3, Write, (1, 1, 1), false, keys::pexpire),
    data("PEXPIREAT", -3, Write, (1, 1, 1), false, keys::pexpireat),
    data("PEXPIRETIME", 2, Read, (1, 1, 1), false, keys::pexpiretime),
    conn("PING", -1),
    conn("PSUBSCRIBE", -2),
    data("PSETEX", 4, Write, (1, 1, 1), true, strings::psetex),
    data("PTTL", 2, Read, (1, 1, 1), false, keys::pttl),
    conn("PUBLISH", 3),
    conn("PUBSUB", -2),
    conn("PUNSUBSCRIBE", -1),
    conn("QUIT", -1),
    data("RANDOMKEY", 1, Read, (0, 0, 0), false, keys::randomkey),
    conn("READONLY", 1),
    conn("READWRITE", 1),
    data("RENAME", 3, Write, (1, 2, 1), false, keys::rename),
    data("RENAMENX", 3, Write, (1, 2, 1), false, keys::renamenx),
    conn("RESET", 1),
    conn("ROLE", 1),
    data("SCAN", -2, Read, (0, 0, 0), false, keys::scan),
    conn("SELECT", 2),
    data("SET", -3, Write, (1, 1, 1), true, strings::set),
    data("SETEX", 4, Write, (1, 1, 1), true, strings::setex),
    data("SETNX", 3, Write, (1, 1, 1), true, strings::setnx),
    data("SETRANGE", 4, Write, (1, 1, 1), true, strings::setrange),
    conn("SHUTDOWN", -1),
    conn("SPUBLISH", 3),
    conn("SSUBSCRIBE", -2),
    data("STRLEN", 2, Read, (1, 1, 1), false, strings::strlen),
    // Redis's old name for GETRANGE, which it still serves.
    data("SUBSTR", 4, Read, (1, 1, 1), false, strings::getrange),
    conn("SUBSCRIBE", -2),
    conn("SUNSUBSCRIBE", -1),
    data("SWAPDB", 3, Write, (0, 0, 0), false, keys::swapdb),
    // Redis flags it neither read nor write: it reads the clock, not the database. Here
    // it reads the time a call runs at, which never falls behind the primary's.
    data("TIME", 1, Read, (0, 0, 0), false, keys::time),
    data("TOUCH", -2, Read, (1, -1, 1), false, keys::exists),
    data("TTL", 2, Read, (1, 1, 1), false, keys::ttl),
    data("TYPE", 2, Read, (1, 1, 1), false, keys::type_),
    data("UNLINK", -2, Write, (1, -1, 1), false, keys::del),
    conn("UNSUBSCRIBE", -1),
    conn("UNWATCH", 1),
    conn("WAIT", 3),
    conn("WATCH", -2),
];

/// Where the keys of command `name` follow a count, as Redis's `numkeys` key specs say
/// (`ZUNION numkeys key…`, `ZUNIONSTORE destination numkeys key…`): the count's argument
/// index. Such a command's (first, last, step) range names at most its destination (Redis
/// 7.0 flags it `movablekeys`), so ACL key checks read the count through this.
pub fn counted_keys_at(name: &str) -> Option<usize> {
    match name {
        "SINTERCARD" | "ZUNION" | "ZINTER" | "ZDIFF" | "ZINTERCARD" | "ZMPOP" | "LMPOP" => Some(1),
        "ZUNIONSTORE" | "ZINTERSTORE" | "ZDIFFSTORE" | "BLMPOP" | "BZMPOP" => Some(2),
        _ => None,
    }
}

/// The subcommands served here, with Redis's arity for each (the command's name included),
/// so that a wrong one is refused in Redis's words.
pub const SUBCOMMANDS: &[(&str, &str, i32)] = &[
    ("ACL", "CAT", -2),
    ("ACL", "DRYRUN", -4),
    ("ACL", "GETUSER", 3),
    ("ACL", "HELP", 2),
    ("ACL", "LIST", 2),
    ("ACL", "USERS", 2),
    ("ACL", "WHOAMI", 2),
    ("CLIENT", "GETNAME", 2),
    ("CLIENT", "HELP", 2),
    ("CLIENT", "ID", 2),
    ("CLIENT", "INFO", 2),
    ("CLIENT", "KILL", -3),
    ("CLIENT", "LIST", -2),
    ("CLIENT", "NO-EVICT", 3),
    // Redis 7.2's, served for clients that send it (it changes nothing here: see
    // `session::clients`).
    ("CLIENT", "NO-TOUCH", 3),
    ("CLIENT", "REPLY", 3),
    ("CLIENT", "SETINFO", 4),
    ("CLIENT", "SETNAME", 3),
    ("CLIENT", "UNBLOCK", -3),
    ("CLUSTER", "ADDSLOTS", -3),
    ("CLUSTER", "ADDSLOTSRANGE", -4),
    ("CLUSTER", "BUMPEPOCH", 2),
    ("CLUSTER", "COUNT-FAILURE-REPORTS", 3),
    ("CLUSTER", "COUNTKEYSINSLOT", 3),
    ("CLUSTER", "DELSLOTS", -3),
    ("CLUSTER", "DELSLOTSRANGE", -4),
    ("CLUSTER", "FAILOVER", -2),
    ("CLUSTER", "FLUSHSLOTS", 2),
    ("CLUSTER", "FORGET", 3),
    ("CLUSTER", "GETKEYSINSLOT", 4),
    ("CLUSTER", "HELP", 2),
    ("CLUSTER", "INFO", 2),
    ("CLUSTER", "KEYSLOT", 3),
    ("CLUSTER", "LINKS", 2),
    ("CLUSTER", "MEET", -4),
    ("CLUSTER", "MYID", 2),
    ("CLUSTER", "NODES", 2),
    ("CLUSTER", "REPLICAS", 3),
    ("CLUSTER", "REPLICATE", 3),
    ("CLUSTER", "RESET", -2),
    ("CLUSTER", "SAVECONFIG", 2),
    ("CLUSTER", "SET-CONFIG-EPOCH", 3),
    ("CLUSTER", "SETSLOT", -4),
    ("CLUSTER", "SHARDS", 2),
    ("CLUSTER", "SLAVES", 3),
    ("CLUSTER", "SLOTS", 2),
    ("COMMAND", "COUNT", 2),
    ("COMMAND", "DOCS", -2),
    ("COMMAND", "GETKEYS", -4),
    ("COMMAND", "GETKEYSANDFLAGS", -4),
    ("COMMAND", "INFO", -2),
    ("COMMAND", "LIST", -2),
    ("CONFIG", "GET", -3),
    ("CONFIG", "RESETSTAT", 2),
    ("CONFIG", "REWRITE", 2),
    ("CONFIG", "SET", -4),
    ("MEMORY", "USAGE", -3),
    ("OBJECT", "ENCODING", 3),
    ("OBJECT", "FREQ", 3),
    ("OBJECT", "HELP", 2),
    ("OBJECT", "IDLETIME", 3),
    ("OBJECT", "REFCOUNT", 3),
    ("PUBSUB", "CHANNELS", -2),
    ("PUBSUB", "HELP", 2),
    ("PUBSUB", "NUMPAT", 2),
    ("PUBSUB", "NUMSUB", -2),
    ("PUBSUB", "SHARDCHANNELS", -2),
    ("PUBSUB", "SHARDNUMSUB", -2),
    // Data commands, which the model answers. Inside `MULTI` a subcommand is checked when
    // queued, as Redis checks every container command's (`XGROUP`, `XINFO` and `FUNCTION`
    // always before anything else, as Redis does).
    ("FUNCTION", "DELETE", 3),
    ("FUNCTION", "DUMP", 2),
    ("FUNCTION", "FLUSH", -2),
    ("FUNCTION", "HELP", 2),
    ("FUNCTION", "KILL", 2),
    ("FUNCTION", "LIST", -2),
    ("FUNCTION", "LOAD", -3),
    ("FUNCTION", "RESTORE", -3),
    ("FUNCTION", "STATS", 2),
    ("SCRIPT", "DEBUG", 3),
    ("SCRIPT", "EXISTS", -3),
    ("SCRIPT", "FLUSH", -2),
    ("SCRIPT", "HELP", 2),
    ("SCRIPT", "KILL", 2),
    ("SCRIPT", "LOAD", 3),
    ("XGROUP", "CREATE", -5),
    ("XGROUP", "CREATECONSUMER", 5),
    ("XGROUP", "DELCONSUMER", 5),
    ("XGROUP", "DESTROY", 4),
    ("XGROUP", "HELP", 2),
    ("XGROUP", "SETID", -5),
    ("XINFO", "CONSUMERS", 4),
    ("XINFO", "GROUPS", 3),
    ("XINFO", "HELP", 2),
    ("XINFO", "STREAM", -3),
];

/// Redis's refusal of subcommand `argv[1]` of `container`, if it is unknown here or has the
/// wrong number of arguments.
pub fn subcommand_refusal(container: &str, argv: &Argv) -> Option<Vec<u8>> {
    let sub = argv.get(1).unwrap_or_default();
    let Some(&(_, name, arity)) = SUBCOMMANDS
        .iter()
        .find(|(of, name, _)| *of == container && name.as_bytes().eq_ignore_ascii_case(sub))
    else {
        let mut text = b"ERR unknown subcommand '".to_vec();
        text.extend_from_slice(crate::session::c_string(sub, 128));
        text.extend_from_slice(format!("'. Try {container} HELP.").as_bytes());
        return Some(text);
    };
    let argc = argv.len() as i64;
    let fits = if arity >= 0 {
        argc == i64::from(arity)
    } else {
        argc >= -i64::from(arity)
    };
    (!fits).then(|| {
        format!(
            "ERR wrong number of arguments for '{}|{}' command",
            container.to_ascii_lowercase(),
            name.to_ascii_lowercase()
        )
        .into_bytes()
    })
}

/// [`subcommand_refusal`] as a command's error, for a command that checks its own
/// subcommand (a script's call reaches it without the session's check).
pub fn subcommand_error(container: &str, argv: &Argv) -> Option<CmdError> {
    let text = subcommand_refusal(container, argv)?;
    Some(CmdError::owned(String::from_utf8_lossy(&text).into_owned()))
}

/// The command called `name` (any case).
pub fn lookup(name: &[u8]) -> Option<(usize, &'static Command)> {
    // A subcommand's entry (`CONFIG|SET`) is no command a client can name.
    if name.contains(&b'|') {
        return None;
    }
    find(name)
}

/// The table's entry called `name` (without case), a subcommand's (`CONFIG|SET`) included:
/// a procedure's name.
pub fn find(name: &[u8]) -> Option<(usize, &'static Command)> {
    let mut upper = [0u8; 32];
    if name.len() > upper.len() {
        return None;
    }
    for (to, from) in upper.iter_mut().zip(name) {
        *to = from.to_ascii_uppercase();
    }
    let upper = &upper[..name.len()];
    let table = commands();
    table
        .binary_search_by(|command| command.name.as_bytes().cmp(upper))
        .ok()
        .map(|index| (index, &table[index]))
}

/// The containers whose subcommands are commands of their own in the table (`CONFIG|GET`, a
/// read, `CONFIG|SET`, a write, `MEMORY|USAGE`, a read of a key), as Redis 7's table has
/// them; the other containers' subcommands run in the container's entry.
const CONTAINERS_OF_COMMANDS: &[&str] = &["CONFIG", "MEMORY"];

/// What `argv` runs, once `command` (its first argument's entry) is known: the entry of its
/// subcommand where that is a command of its own ([`CONTAINERS_OF_COMMANDS`]), else
/// `(index, command)` itself.
pub fn resolve(index: usize, command: &'static Command, argv: &Argv) -> (usize, &'static Command) {
    if !CONTAINERS_OF_COMMANDS.contains(&command.name) {
        return (index, command);
    }
    let Some(sub) = argv.get(1).filter(|sub| !sub.contains(&b'|')) else {
        return (index, command);
    };
    let mut name = format!("{}|", command.name).into_bytes();
    name.extend_from_slice(sub);
    find(&name).unwrap_or((index, command))
}

/// Runs the data command `argv` in `ctx` as a command of a `MULTI` block or a script does:
/// found by name, its arity checked; a connection command is refused. Its reply goes to
/// `out`; an error is returned, not written.
pub fn run_in(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = argv.get(0).unwrap_or_default();
    let Some((index, command)) = lookup(name) else {
        return Err(CmdError::owned(format!(
            "ERR unknown command '{}'",
            String::from_utf8_lossy(name)
        )));
    };
    let (_, command) = resolve(index, command, argv);
    // The connection commands a `MULTI` block queues, answered as the connection would
    // (`UNWATCH` in a block has nothing left to do: `EXEC` unwatches).
    match command.name {
        "PING" if argv.len() <= 2 => {
            match argv.get(1) {
                Some(message) => out.bulk(message),
                None => out.simple("PONG"),
            }
            return Ok(());
        }
        "ECHO" if argv.len() == 2 => {
            out.bulk(argv.get(1).unwrap_or_default());
            return Ok(());
        }
        "UNWATCH" if argv.len() == 1 => {
            out.ok();
            return Ok(());
        }
        _ => {}
    }
    if command.run.is_none() {
        return Err(CmdError::owned(format!(
            "ERR '{}' is a connection command: it cannot run here",
            command.name.to_ascii_lowercase()
        )));
    }
    if !command.arity_fits(argv.len()) {
        return Err(arity_error(name));
    }
    if command.class == Class::Write && matches!(ctx.access, Access::Read(_)) {
        return Err(CmdError::fixed(
            "ERR Write commands are not allowed from read-only scripts.",
        ));
    }
    run_command(command, ctx, argv, out)
}

/// Runs data command `command` in `ctx`; after a write that succeeded, settles the encoding
/// marks of the keys it names ([`dump::settle`]). Every data command runs through here.
pub fn run_command(
    command: &Command,
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let run = command.run.expect("a data command runs");
    run(ctx, argv, out)?;
    if command.settles && command.class == Class::Write && matches!(ctx.access, Access::Write(_)) {
        let positions = crate::session::key_positions(command, argv);
        dump::settle(ctx, argv, &positions);
    }
    Ok(())
}

/// Redis's error for a wrong argument count.
pub fn arity_error(name: &[u8]) -> CmdError {
    CmdError::owned(format!(
        "ERR wrong number of arguments for '{}' command",
        String::from_utf8_lossy(name).to_lowercase()
    ))
}

/// Parses argument `i` as Redis's `string2ll` does, or answers "not an integer".
pub fn int_arg(argv: &Argv, i: usize) -> Result<i64, CmdError> {
    crate::num::parse_i64(argv.get(i).expect("the arity was checked")).ok_or(CmdError::NOT_INTEGER)
}

/// Argument `i` (which the arity guarantees).
pub fn arg(argv: &Argv, i: usize) -> &[u8] {
    argv.get(i).expect("the arity was checked")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_is_sorted_and_every_data_command_runs() {
        let table = commands();
        for pair in table.windows(2) {
            assert!(
                pair[0].name < pair[1].name,
                "{} before {}",
                pair[0].name,
                pair[1].name
            );
        }
        for command in table {
            assert_eq!(
                command.run.is_some(),
                command.class != Class::Connection,
                "{}",
                command.name
            );
            assert_eq!(command.name, command.name.to_ascii_uppercase());
        }
        assert_eq!(lookup(b"get").map(|(_, c)| c.name), Some("GET"));
        assert!(lookup(b"nosuchcommand").is_none());
    }
}
