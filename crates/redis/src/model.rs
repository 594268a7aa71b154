//! The Redis data model as the store's [`DataModel`].
//!
//! Every data command of [`commands`] is a procedure, its id [`FIRST_COMMAND`] plus the
//! command's index in the table, its kind the command's class; the ids below it run what a
//! connection asks for on its own behalf, [`PROC_EXEC`] (a `MULTI` … `EXEC` block, one txn)
//! and [`PROC_WATCH`] (what a `WATCH` saw of each key it names: its version, or the LSN at
//! which it was absent), the primary's expiry sweep ([`PROC_SWEEP`]), and [`PROC_READS`],
//! several read-only commands read at one point of the history (what `tandem proxy` sends for
//! a pipeline of reads; a pipeline with a write goes as a [`PROC_EXEC`] without watched
//! keys). A call's arguments
//! are [`CallArgs`]: the connection's protocol and the command's arguments; its reply is the
//! RESP reply, in that protocol. A command that answers an error fails the call
//! ([`ProcError::Failed`] with the error's text), so it takes no LSN; it has written nothing
//! (see [`crate::cmd`]). The error replies that commit are those of an `EVAL` whose script
//! failed before writing (it keeps the script, as Redis does, see [`crate::cmd::scripts`])
//! and of a `SORT` of a sorted set that refused a number (Redis converted the set's
//! encoding first, see [`crate::cmd::sort`]).

use std::sync::Arc;
use tandem_memory::{Segment, Txn};

use tandem_store::{
    DataModel, DedupTable, Driver, Inconsistency, ProcError, ProcId, ProcKind, Publication,
    Publications,
};

use crate::cmd::evict::{self, Accesses, Policy};
use crate::cmd::scripts::ScriptEngine;
use crate::cmd::{Access, Class, CmdError, Ctx, commands};
use crate::db::Layout;
use crate::mem::Mem;
use crate::notify::Notices;
use crate::params::{MAXMEMORY, MAXMEMORY_POLICY, NOTIFY_KEYSPACE_EVENTS};
use crate::resp::{Argv, ReplyWriter};
use crate::wire::{CallArgs, ExecArgs, encode_versions};

/// What the model's statistics about one database begin with ([`keyspace_lines`]).
pub const KEYSPACE_STAT_PREFIX: &str = "keyspace_db";

/// The names of each database's statistics: its keys, and those with an expiry.
const KEYSPACE_STATS: [(&str, &str); crate::db::DB_COUNT as usize] = [
    ("keyspace_db0_keys", "keyspace_db0_expires"),
    ("keyspace_db1_keys", "keyspace_db1_expires"),
    ("keyspace_db2_keys", "keyspace_db2_expires"),
    ("keyspace_db3_keys", "keyspace_db3_expires"),
    ("keyspace_db4_keys", "keyspace_db4_expires"),
    ("keyspace_db5_keys", "keyspace_db5_expires"),
    ("keyspace_db6_keys", "keyspace_db6_expires"),
    ("keyspace_db7_keys", "keyspace_db7_expires"),
    ("keyspace_db8_keys", "keyspace_db8_expires"),
    ("keyspace_db9_keys", "keyspace_db9_expires"),
    ("keyspace_db10_keys", "keyspace_db10_expires"),
    ("keyspace_db11_keys", "keyspace_db11_expires"),
    ("keyspace_db12_keys", "keyspace_db12_expires"),
    ("keyspace_db13_keys", "keyspace_db13_expires"),
    ("keyspace_db14_keys", "keyspace_db14_expires"),
    ("keyspace_db15_keys", "keyspace_db15_expires"),
];

/// `INFO keyspace`'s databases from the model's statistics (as `HostFacts::model_stats`
/// gives them): each database that holds keys, with its keys and those that expire.
pub fn keyspace_lines(stats: &[(String, String)]) -> Vec<(u8, String, String)> {
    let stat = |name: &str| {
        stats
            .iter()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    (0..crate::db::DB_COUNT)
        .filter_map(|db| {
            let (keys, expires) = KEYSPACE_STATS[usize::from(db)];
            let keys = stat(keys).filter(|keys| keys != "0")?;
            Some((db, keys, stat(expires).unwrap_or_else(|| "0".into())))
        })
        .collect()
}

/// A figure of [`DataModel::stats`] as `INFO` writes it: a whole number without a fraction,
/// any other with two decimals.
pub fn stat_text(value: f64) -> String {
    if value.fract() == 0.0 {
        format!("{}", value as i64)
    } else {
        format!("{value:.2}")
    }
}

/// The figures a [`PROC_STATS`] call answered, as `(name, value)` pairs; `None` for a reply
/// that is not one.
pub fn decode_stats(reply: &[u8]) -> Option<Vec<(String, String)>> {
    let (crate::resp::Value::Array(items), used) = crate::resp::parse_reply(reply).ok()?? else {
        return None;
    };
    if used != reply.len() || items.len() % 2 != 0 {
        return None;
    }
    let text = |item: &crate::resp::Value| match item {
        crate::resp::Value::Bulk(bytes) => String::from_utf8(bytes.clone()).ok(),
        _ => None,
    };
    items
        .chunks(2)
        .map(|pair| Some((text(&pair[0])?, text(&pair[1])?)))
        .collect()
}

/// The procedure of a `MULTI` … `EXEC` block.
pub const PROC_EXEC: ProcId = ProcId(0);
/// The read procedure that answers what `EXEC` will compare of `WATCH`ed keys (a word per
/// key, see `Watched` in this module).
pub const PROC_WATCH: ProcId = ProcId(1);
/// The write procedure the primary runs every [`SWEEP_INTERVAL_MS`]: the active expiry sweep.
pub const PROC_SWEEP: ProcId = ProcId(2);
/// The read procedure that runs several read-only commands at one point of the history and
/// answers an array of their replies, as `EXEC` does (its arguments are [`ExecArgs`] without
/// watched keys). A pipeline of reads costs one call this way, and may run on a backup.
pub const PROC_READS: ProcId = ProcId(3);
/// The read procedure that answers the model's figures ([`DataModel::stats`]) as `INFO`
/// shows them: an array of names and values, as of the call's point in the history, so that
/// an `INFO` sees every write its connection made before it.
pub const PROC_STATS: ProcId = ProcId(4);
/// The procedure id of the first command of the table.
pub const FIRST_COMMAND: u16 = 5;
const PROC_STATS_NAME: &str = "tandem.stats";
const PROC_READS_NAME: &str = "tandem.reads";
const PROC_SWEEP_NAME: &str = "tandem.sweep";
/// How often the primary sweeps expired keys (Redis's default `hz` is 10).
pub const SWEEP_INTERVAL_MS: u64 = 100;

/// The procedure id of the command at `index` in [`commands`].
pub fn command_proc(index: usize) -> ProcId {
    ProcId(FIRST_COMMAND + u16::try_from(index).expect("fewer than 65,534 commands"))
}
const PROC_EXEC_NAME: &str = "tandem.exec";
const PROC_WATCH_NAME: &str = "tandem.watch";

/// How stale the database's clock high-water mark may get before a write raises it.
const CLOCK_STEP_MS: u64 = 100;

/// The seed of a fresh database's hash function.
const SEED_DEFAULT: u64 = 0x7461_6e64_656d_0001;

/// The Redis model of a group.
#[derive(Debug)]
pub struct RedisModel {
    layout: Layout,
    /// The node's clock, as the executor last told it.
    clock_ms: u64,
    /// Scratch space for a call's arguments.
    argv: Argv,
    /// Scratch space for a read's arguments, taken for the read and given back after it (a
    /// read inside a read, from a read-only script, finds it taken and decodes into its
    /// own).
    read_argv: std::cell::RefCell<Argv>,
    /// Calls run so far: mixed into each call's random seed.
    calls: std::cell::Cell<u64>,
    /// The Lua VM scripts run in (a cache of the script store; made on the first script).
    /// In a `RefCell` because read-only scripts (`EVAL_RO`) run in [`DataModel::read`].
    scripts: std::cell::RefCell<ScriptEngine>,
    /// Where committed calls' keyspace notifications go, if the node delivers any.
    publications: Option<Arc<Publications>>,
    /// The notifications of the call that runs, until it commits or rolls back.
    pending: Vec<Publication>,
    /// When and how often this node saw each key used, for the LRU and LFU eviction
    /// policies; in a `RefCell` because reads record uses too.
    accesses: std::cell::RefCell<Accesses>,
    /// Keys evicted by calls that committed (`INFO stats`' `evicted_keys`).
    evicted: std::cell::Cell<u64>,
}

impl RedisModel {
    /// The model for a segment of `segment_len` bytes.
    pub fn new(segment_len: usize) -> Result<RedisModel, crate::db::TooSmall> {
        Ok(RedisModel {
            layout: Layout::for_segment_len(segment_len)?,
            clock_ms: 0,
            argv: Argv::new(),
            read_argv: Default::default(),
            calls: std::cell::Cell::new(0),
            scripts: std::cell::RefCell::new(ScriptEngine::default()),
            publications: None,
            pending: Vec::new(),
            accesses: Default::default(),
            evicted: Default::default(),
        })
    }

    /// The notices a write call starts with: the database's `notify-keyspace-events`, if
    /// the node delivers notifications at all.
    fn notices(&self, mem: &impl Mem) -> Notices {
        match self.publications {
            Some(_) => Notices::new(self.layout.params.get(mem, &NOTIFY_KEYSPACE_EVENTS)),
            None => Notices::default(),
        }
    }

    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// The time a call runs at: the node's clock, but never behind the latest time a primary
    /// stamped in the database.
    fn now_ms(&self, mem: &impl Mem) -> u64 {
        self.clock_ms.max(self.layout.clock_ms(mem))
    }

    /// A seed for one call's generator: different for every call this model runs.
    fn rng_seed(&self) -> u64 {
        let calls = self.calls.get().wrapping_add(1);
        self.calls.set(calls);
        calls ^ self.clock_ms.rotate_left(32)
    }

    fn command(id: ProcId) -> Option<&'static crate::cmd::Command> {
        let index = id.0.checked_sub(FIRST_COMMAND)? as usize;
        commands()
            .get(index)
            .filter(|c| c.class != Class::Connection)
    }

    /// Runs a `MULTI` block's data commands in `txn`, writing `EXEC`'s reply: a null array if
    /// a watched key changed (nothing ran), else each command's reply (the session weaves in
    /// those of the block's connection commands), an error for a command that refused
    /// (it wrote nothing; the others' effects stay, as in Redis). Running out of memory fails
    /// the whole block.
    fn exec(
        &mut self,
        txn: &mut Txn<'_>,
        args: &ExecArgs,
        reply: &mut Vec<u8>,
    ) -> Result<(), CmdError> {
        let now_ms = self.now_ms(txn);
        let rng_seed = self.rng_seed();
        let notices = self.notices(txn);
        let mut ctx = Ctx::new(Access::Write(txn), self.layout, now_ms, rng_seed)
            .with_scripts(self.scripts.get_mut())
            .with_notices(notices);
        ctx.in_exec = true;
        let grows = args.commands().iter().any(|(_, argv)| {
            crate::cmd::lookup(argv.get(0).unwrap_or_default())
                .is_some_and(|(index, command)| crate::cmd::resolve(index, command, argv).1.grows)
        });
        let evicted = evict::make_room(&mut ctx, self.accesses.get_mut(), grows)?;
        let result = Self::exec_in(&mut ctx, args, reply);
        self.pending = ctx.notices.take();
        if result.is_ok() {
            self.evicted.set(self.evicted.get() + evicted);
            for ((_, argv), &db) in args.commands().iter().zip(args.dbs()) {
                self.record_use(txn, db, argv, now_ms);
            }
        }
        result
    }

    /// Records the use of the keys `argv` names in database `db`, if the eviction policy
    /// in force chooses by use.
    fn record_use(&self, mem: &impl Mem, db: u8, argv: &Argv, now_ms: u64) {
        let policy = Policy::of(self.layout.params.get(mem, &MAXMEMORY_POLICY));
        let Some(tracking) = policy.tracking() else {
            return;
        };
        let Some((index, command)) = crate::cmd::lookup(argv.get(0).unwrap_or_default()) else {
            return;
        };
        let (_, command) = crate::cmd::resolve(index, command, argv);
        let mut accesses = self.accesses.borrow_mut();
        for at in crate::session::key_positions(command, argv) {
            if let Some(key) = argv.get(at) {
                accesses.touch(tracking, db, key, now_ms);
            }
        }
    }

    /// [`RedisModel::exec`] in its context.
    fn exec_in(
        ctx: &mut Ctx<'_, '_>,
        args: &ExecArgs,
        reply: &mut Vec<u8>,
    ) -> Result<(), CmdError> {
        let proto = args.proto();
        let (layout, now_ms) = (ctx.layout, ctx.now_ms);
        for (key, word, db) in args.watched() {
            if Watched::from_word(word).changed(&layout.in_db(db), &ctx.access, key, now_ms) {
                ReplyWriter::new(reply, proto).null_array();
                return Ok(());
            }
        }
        ReplyWriter::new(reply, proto).array(args.commands().len());
        let mut one = Vec::new();
        for ((command_proto, argv), &db) in args.commands().iter().zip(args.dbs()) {
            ctx.layout = layout.in_db(db);
            one.clear();
            let mut writer = ReplyWriter::new(&mut one, *command_proto);
            let result = crate::cmd::run_in(ctx, argv, &mut writer);
            match result {
                Ok(()) => reply.extend_from_slice(&one),
                // A script that failed after writing cannot be undone alone: the block fails.
                Err(err @ (CmdError::Oom | CmdError::Abort(_))) => return Err(err),
                Err(CmdError::Reply(text)) => ReplyWriter::new(reply, *command_proto).error(&text),
                Err(CmdError::WouldBlock | CmdError::WouldBlockAfter(_)) => {
                    unreachable!("a command in EXEC never waits")
                }
            }
        }
        Ok(())
    }
}

impl RedisModel {
    /// Runs the read-only data command `command` with arguments `args` (decoded into `argv`).
    fn read_command(
        &self,
        segment: &Segment,
        command: &'static crate::cmd::Command,
        args: &[u8],
        argv: &mut Argv,
        now_ms: u64,
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let proto = CallArgs::decode_into(args, argv)
            .map_err(|_| ProcError::BadArgs("malformed command arguments"))?;
        if !command.arity_fits(argv.len()) {
            return Err(failed(crate::cmd::arity_error(command.name.as_bytes())));
        }
        let mut scripts = self.scripts.borrow_mut();
        let layout = self.layout.in_db(CallArgs::db(args));
        let mut ctx = Ctx::new(Access::Read(segment), layout, now_ms, self.rng_seed())
            .with_scripts(&mut scripts);
        if command.blocks.is_some() {
            ctx.waiting = CallArgs::waiting(args);
        }
        let mut out = ReplyWriter::new(reply, proto);
        let run = command.run.expect("a data command runs");
        run(&mut ctx, argv, &mut out).map_err(failed)?;
        self.record_use(segment, layout.db, argv, now_ms);
        Ok(())
    }

    /// Runs a batch of read-only commands on `segment`, writing an array of their replies (an
    /// error for a command that refused). A write in the batch is refused as a replica
    /// refuses one: the proxy sends only read-only commands here, so one means a bug.
    fn reads(
        &self,
        segment: &Segment,
        args: &ExecArgs,
        now_ms: u64,
        reply: &mut Vec<u8>,
    ) -> Result<(), CmdError> {
        if args.watched().next().is_some() {
            return Err(CmdError::Reply("ERR a read batch watches no key".into()));
        }
        let mut scripts = self.scripts.borrow_mut();
        let mut ctx = Ctx::new(Access::Read(segment), self.layout, now_ms, self.rng_seed())
            .with_scripts(&mut scripts);
        ReplyWriter::new(reply, args.proto()).array(args.commands().len());
        let mut one = Vec::new();
        for ((command_proto, argv), &db) in args.commands().iter().zip(args.dbs()) {
            ctx.layout = self.layout.in_db(db);
            one.clear();
            let name = argv.get(0).unwrap_or_default();
            let mut writer = ReplyWriter::new(&mut one, *command_proto);
            let command = crate::cmd::lookup(name)
                .map(|(index, command)| crate::cmd::resolve(index, command, argv));
            let result = match command {
                Some((_, command)) if command.class == Class::Write => Err(CmdError::Reply(
                    "READONLY You can't write against a read only replica.".into(),
                )),
                _ => crate::cmd::run_in(&mut ctx, argv, &mut writer),
            };
            match result {
                Ok(()) => {
                    reply.extend_from_slice(&one);
                    self.record_use(segment, db, argv, now_ms);
                }
                Err(CmdError::Reply(text)) => ReplyWriter::new(reply, *command_proto).error(&text),
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }
}

impl DataModel for RedisModel {
    fn name(&self) -> &str {
        "redis"
    }

    fn lookup(&self, name: &str) -> Option<ProcId> {
        match name {
            PROC_EXEC_NAME => Some(PROC_EXEC),
            PROC_WATCH_NAME => Some(PROC_WATCH),
            PROC_SWEEP_NAME => Some(PROC_SWEEP),
            PROC_READS_NAME => Some(PROC_READS),
            PROC_STATS_NAME => Some(PROC_STATS),
            _ => crate::cmd::find(name.as_bytes())
                .filter(|(_, c)| c.class != Class::Connection)
                .map(|(index, _)| command_proc(index)),
        }
    }

    fn procedure_name(&self, id: ProcId) -> Option<&str> {
        match id {
            PROC_EXEC => Some(PROC_EXEC_NAME),
            PROC_WATCH => Some(PROC_WATCH_NAME),
            PROC_SWEEP => Some(PROC_SWEEP_NAME),
            PROC_READS => Some(PROC_READS_NAME),
            PROC_STATS => Some(PROC_STATS_NAME),
            _ => Self::command(id).map(|c| c.name),
        }
    }

    fn kind(&self, id: ProcId) -> Option<ProcKind> {
        match id {
            PROC_EXEC => Some(ProcKind::Write),
            PROC_WATCH => Some(ProcKind::Read),
            PROC_SWEEP => Some(ProcKind::Write),
            PROC_READS => Some(ProcKind::Read),
            PROC_STATS => Some(ProcKind::Read),
            _ => Self::command(id).map(|c| match c.class {
                Class::Write => ProcKind::Write,
                _ => ProcKind::Read,
            }),
        }
    }

    fn procedure_count(&self) -> usize {
        commands().len() + usize::from(FIRST_COMMAND)
    }

    fn call(
        &mut self,
        id: ProcId,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let now_ms = self.now_ms(txn);
        if now_ms >= self.layout.clock_ms(txn) + CLOCK_STEP_MS {
            self.layout.advance_clock(txn, now_ms);
        }
        if id == PROC_SWEEP {
            let notices = self.notices(txn);
            let mut ctx = Ctx::new(Access::Write(txn), self.layout, now_ms, self.rng_seed())
                .with_notices(notices);
            let deleted = crate::cmd::sweep(&mut ctx);
            self.pending = ctx.notices.take();
            if deleted == 0 {
                // Nothing to replicate: no LSN taken ten times a second for nothing.
                return Err(ProcError::Rollback("no key had expired"));
            }
            ReplyWriter::new(reply, crate::resp::Proto::Resp2).integer(deleted as i64);
            return Ok(());
        }
        if id == PROC_EXEC {
            let exec =
                ExecArgs::decode(args).map_err(|_| ProcError::BadArgs("a malformed EXEC"))?;
            return self.exec(txn, &exec, reply).map_err(failed);
        }
        let command = Self::command(id).ok_or(ProcError::BadArgs("no such command"))?;
        let proto = CallArgs::decode_into(args, &mut self.argv)
            .map_err(|_| ProcError::BadArgs("malformed command arguments"))?;
        if !command.arity_fits(self.argv.len()) {
            return Err(failed(crate::cmd::arity_error(command.name.as_bytes())));
        }
        let rng_seed = self.rng_seed();
        let notices = self.notices(txn);
        let layout = self.layout.in_db(CallArgs::db(args));
        let mut ctx = Ctx::new(Access::Write(txn), layout, now_ms, rng_seed)
            .with_scripts(self.scripts.get_mut())
            .with_notices(notices);
        if command.blocks.is_some() {
            ctx.waiting = CallArgs::waiting(args);
        }
        // A script is not refused whole past the limit, but its commands that may grow the
        // database are (`Ctx::over_maxmemory`), as Redis's are.
        let evicted =
            evict::make_room(&mut ctx, self.accesses.get_mut(), command.grows).map_err(failed)?;
        let mut out = ReplyWriter::new(reply, proto);
        let result = crate::cmd::run_command(command, &mut ctx, &self.argv, &mut out);
        self.pending = ctx.notices.take();
        if result.is_ok() {
            self.evicted.set(self.evicted.get() + evicted);
            self.record_use(txn, layout.db, &self.argv, now_ms);
        }
        result.map_err(failed)
    }

    fn read(
        &self,
        id: ProcId,
        segment: &Segment,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let now_ms = self.now_ms(segment);
        if id == PROC_WATCH {
            let mut argv = Argv::new();
            CallArgs::decode_into(args, &mut argv)
                .map_err(|_| ProcError::BadArgs("malformed WATCH arguments"))?;
            let layout = self.layout.in_db(CallArgs::db(args));
            let words: Vec<u64> = argv
                .iter()
                .map(|key| Watched::read(&layout, segment, key, now_ms).word())
                .collect();
            encode_versions(&words, reply);
            return Ok(());
        }
        if id == PROC_READS {
            let reads =
                ExecArgs::decode(args).map_err(|_| ProcError::BadArgs("a malformed read batch"))?;
            return self.reads(segment, &reads, now_ms, reply).map_err(failed);
        }
        if id == PROC_STATS {
            let stats = self.stats(segment);
            let mut out = ReplyWriter::new(reply, crate::resp::Proto::Resp2);
            out.array(stats.len() * 2);
            for (name, value) in stats {
                out.bulk(name.as_bytes());
                out.bulk(stat_text(value).as_bytes());
            }
            return Ok(());
        }
        let command = Self::command(id).ok_or(ProcError::BadArgs("no such command"))?;
        let mut argv = self.read_argv.take();
        let read = self.read_command(segment, command, args, &mut argv, now_ms, reply);
        self.read_argv.replace(argv);
        read
    }

    fn stats(&self, segment: &Segment) -> Vec<(&'static str, f64)> {
        let alloc = self.layout.alloc.stats(segment);
        let used = alloc.used_bytes as f64;
        let mut stats = vec![
            ("used_memory", used),
            (
                "maxmemory",
                match self.layout.params.get(segment, &MAXMEMORY) {
                    0 => segment.len() as f64,
                    bytes => bytes as f64,
                },
            ),
            (
                "maxmemory_policy",
                self.layout.params.get(segment, &MAXMEMORY_POLICY) as f64,
            ),
            ("evicted_keys", self.evicted.get() as f64),
            ("allocator_carved_bytes", alloc.carved_bytes as f64),
            ("allocator_free_bytes", alloc.free_bytes as f64),
            ("allocator_free_blocks", alloc.free_blocks as f64),
            (
                "allocator_allocatable_bytes",
                alloc.allocatable_bytes as f64,
            ),
            // Carved over used: 1 when no freed block waits for reuse.
            (
                "allocator_frag_ratio",
                if used > 0.0 {
                    alloc.carved_bytes as f64 / used
                } else {
                    1.0
                },
            ),
        ];
        // Each database (`INFO keyspace` lists those that hold keys), every time: a gauge
        // of a database emptied since must say 0.
        let (mut keys_all, mut expires_all) = (0, 0);
        for db in self.layout.dbs() {
            let (keys, expires) = (db.keyspace.len(segment), db.expires.len(segment));
            let (keys_name, expires_name) = KEYSPACE_STATS[usize::from(db.db)];
            stats.push((keys_name, keys as f64));
            stats.push((expires_name, expires as f64));
            keys_all += keys;
            expires_all += expires;
        }
        stats.push(("keys", keys_all as f64));
        stats.push(("expires", expires_all as f64));
        // The script store and the function libraries live in the database: every node
        // counts the same ones, as `INFO memory` names them.
        let scripts = crate::cmd::scripts::count(segment, &self.layout);
        let (libraries, functions) = crate::cmd::functions::counts(segment, &self.layout);
        stats.push(("number_of_cached_scripts", scripts as f64));
        stats.push(("number_of_functions", functions as f64));
        stats.push(("number_of_libraries", libraries as f64));
        stats
    }

    fn periodic(&self) -> Option<(ProcId, u64)> {
        Some((PROC_SWEEP, SWEEP_INTERVAL_MS))
    }

    fn set_time_ms(&mut self, now_ms: u64) {
        self.clock_ms = now_ms;
    }

    fn load(&self, segment: &mut Segment) {
        let mut txn = segment.begin();
        self.layout.format(&mut txn, SEED_DEFAULT);
        txn.commit();
    }

    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        if !self.layout.is_formatted(segment) {
            return Err(Inconsistency {
                check: "the segment holds a Redis database",
                detail: "its header's magic or layout version is wrong".into(),
            });
        }
        let mut owned = Vec::new();
        self.layout.owned_blocks(segment, &mut owned);
        self.layout.alloc.check(segment, &mut owned.into_iter())?;
        for db in self.layout.dbs() {
            db.check_expiry_index(segment)?;
            db.check_keys_unique(segment)?;
        }
        crate::cmd::functions::check(segment, &self.layout)?;
        self.layout.params.check(segment)?;
        DedupTable::for_segment_len(segment.len()).check(segment)
    }

    fn check_quick(&self, _segment: &Segment) -> Result<(), Inconsistency> {
        Ok(())
    }

    fn replica(&self) -> Box<dyn DataModel> {
        let mut replica = RedisModel {
            layout: self.layout,
            clock_ms: 0,
            argv: Argv::new(),
            read_argv: Default::default(),
            calls: std::cell::Cell::new(0),
            scripts: std::cell::RefCell::new(ScriptEngine::default()),
            publications: self.publications.clone(),
            pending: Vec::new(),
            accesses: Default::default(),
            evicted: Default::default(),
        };
        replica.watch_calls(self.scripts.borrow().watch().clone());
        if let Some(monitor) = self.scripts.borrow().monitor() {
            replica.scripts.get_mut().monitor_to(monitor.clone());
        }
        Box::new(replica)
    }

    fn publish_to(&mut self, publications: Arc<Publications>) {
        self.publications = Some(publications);
    }

    fn monitor_to(&mut self, inner_calls: Arc<tandem_store::InnerCalls>) {
        self.scripts.get_mut().monitor_to(inner_calls);
    }

    fn call_ended(&mut self, committed: bool) {
        match &self.publications {
            Some(publications) if committed => publications.push(&mut self.pending),
            _ => self.pending.clear(),
        }
    }

    fn watch_calls(&mut self, watch: std::sync::Arc<tandem_store::CallWatch>) {
        self.scripts.get_mut().set_watch(watch);
    }

    fn call_watch(&self) -> Option<std::sync::Arc<tandem_store::CallWatch>> {
        Some(self.scripts.borrow().watch().clone())
    }

    fn driver(&self, _seed: u64) -> Option<Box<dyn Driver>> {
        None
    }
}

/// What a `WATCH` saw of a key, as the one word per key the session keeps and `EXEC` sends
/// back ([`PROC_WATCH`]'s reply): the key's version if it existed, else the LSN the database
/// stood at, so that `EXEC` can tell a key created and deleted again since (which Redis
/// counts as a change) from one nobody touched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Watched {
    /// The key existed with this version (the LSN of its last change).
    Version(u64),
    /// The key did not exist (or had expired) when the database stood at this LSN.
    AbsentAt(u64),
}

/// The bit of a [`Watched`] word that marks an absent key; LSNs stay far below it.
const ABSENT_BIT: u64 = 1 << 63;

impl Watched {
    fn read(layout: &Layout, segment: &Segment, key: &[u8], now_ms: u64) -> Watched {
        match layout.find(segment, key, now_ms) {
            Some(found) => Watched::Version(found.head.version),
            None => Watched::AbsentAt(segment.lsn()),
        }
    }

    fn word(self) -> u64 {
        match self {
            Watched::Version(version) => {
                assert!(version & ABSENT_BIT == 0, "a version below 2^63");
                version
            }
            Watched::AbsentAt(lsn) => {
                assert!(lsn & ABSENT_BIT == 0, "an LSN below 2^63");
                lsn | ABSENT_BIT
            }
        }
    }

    fn from_word(word: u64) -> Watched {
        if word & ABSENT_BIT == 0 {
            Watched::Version(word)
        } else {
            Watched::AbsentAt(word & !ABSENT_BIT)
        }
    }

    /// Whether `key` may have been written since the `WATCH` (Redis then aborts `EXEC`). A
    /// key that existed changed if its version did, or if it is gone or expired. A key that
    /// did not exist changed if it exists now, if its entry (live or expired) was written
    /// after the `WATCH`, or if some key written after the `WATCH` was deleted since: that
    /// may have been this key, created and deleted again. The last test is conservative (the
    /// deleted key may have been another), and an `EXEC` aborted for nothing is a correct
    /// outcome under optimistic locking; one run after a change would not be.
    fn changed(self, layout: &Layout, mem: &impl Mem, key: &[u8], now_ms: u64) -> bool {
        match self {
            Watched::Version(version) => {
                layout
                    .find(mem, key, now_ms)
                    .map(|found| found.head.version)
                    != Some(version)
            }
            Watched::AbsentAt(lsn) => {
                layout.find(mem, key, now_ms).is_some()
                    || layout
                        .find_any(mem, key)
                        .is_some_and(|found| found.head.version > lsn)
                    || layout.deleted_version_max(mem) > lsn
            }
        }
    }
}

fn failed(err: CmdError) -> ProcError {
    ProcError::Failed(err.text().to_string())
}
