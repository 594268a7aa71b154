//! The Lua 5.1 VM scripts run in, as Redis 7.0 sets it up (script_lua.c, eval.c).
//!
//! One VM per [`ScriptEngine`], and one engine per model (so per node): it is made on the
//! first script a node runs, and holds nothing the segment does not (the compiled scripts
//! and the loaded function libraries, see `library.rs`, are caches keyed by SHA-1). It is
//! `Send` (mlua's `send` feature), as a model must be.
//!
//! # The sandbox
//!
//! Scripts see what Redis 7.0.15 gives them: the base library without `print`, `dofile`,
//! `loadfile`, `setfenv`, `getfenv`, `newproxy`, `module` and `require`; `string`, `table`,
//! `math` (its `random` drawn from the call's generator), `coroutine`; `cjson`, `bit`,
//! `cmsgpack`; and `redis`. No `os`, `io`, `debug` or `package`. Globals are read-only: a
//! script runs in an environment of its own whose reads fall through to the globals (a
//! missing one is Redis's "Script attempted to access nonexistent global variable") and whose
//! writes are refused ("Attempt to modify a readonly table"); the library tables are
//! read-only proxies, and `rawset`, `table.insert`, `table.remove` and `table.sort` refuse
//! them, so no script can leave state behind for the next (Redis patches Lua for this; here
//! the same holds without a patch). `loadstring` and `load` give the chunks they compile the
//! script's environment.
//!
//! # Bad input
//!
//! No script can take the node down. Every chunk compiles as text, as in Redis (whose Lua
//! has no bytecode loader): bytecode, which Lua 5.1 would load unchecked, meets the parser's
//! "unexpected symbol near 'char(27)'". Lua 5.1's pattern matcher recurses without a limit,
//! so `string.find`, `match`, `gmatch` and `gsub` refuse a pattern that could nest deeper
//! than Lua 5.2 allows ("pattern too complex", see `guards.rs`). `cmsgpack.unpack` decodes
//! iteratively and refuses what overflows Redis's Lua stack; `cjson` and the reply stop at
//! 1,000 levels; Lua bounds nested `pcall`s, coroutines and metamethods at 200 C calls. A
//! thread of [`crate::SCRIPT_THREAD_STACK_BYTES`] holds the deepest of each. No table
//! crosses to Rust whole: mlua holds the Lua values Rust keeps in a stack of about 8,000
//! slots, so large tables are read one element at a time.
//!
//! # Budgets
//!
//! A count hook runs every 1 to [`HOOK_INTERVAL_MAX`] instructions (see
//! [`next_hook_interval`]). Once a script has run its instruction budget, or the node's
//! [`CallWatch`] says it must stop (`SCRIPT KILL`, the time limit), the hook raises an error
//! at every call, and `pcall`, `xpcall` and `coroutine.resume` raise it again as they
//! return, so no script can catch its way past the stop; the call then fails with the
//! stop's error whatever the script returned, and its writes are undone. The pattern
//! functions (`pattern.rs`) ask the same as they backtrack.
//! Lua's allocations are capped by `Lua::set_memory_limit`; a script that runs out fails
//! with the memory budget's error.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};

use mlua::chunk::ChunkMode;
use mlua::{
    Function, HookTriggers, IntoLuaMulti, Lua, LuaOptions, LuaString, MultiValue, StdLib, Table,
    Value, VmState,
};

use super::guards::{self, ChunkFunction, PatternFunction};
use super::{ScriptFlags, ScriptRef, Sha, cjson, msgpack, shebang_flags, stored_body};
use crate::cmd::{Access, Class, CmdError, Command, Ctx, OOM_TEXT, lookup, run_in};
use crate::resp::{self, Argv, Proto, ReplyWriter};
use tandem_store::{CallWatch, InnerCall, InnerCalls, RunId, StopReason};

mod library;

pub use library::{
    ALLOW_OOM, FUNCTION_FLAGS, FUNCTIONS_PER_LIBRARY_MAX, LibraryRef, NO_WRITES, Registered,
};

/// Lua instructions a script may run, by default: a few seconds at most.
pub const INSTRUCTION_BUDGET_DEFAULT: u64 = 100_000_000;
/// Bytes the Lua VM may hold, by default (the libraries and the compiled scripts included).
pub const MEMORY_LIMIT_DEFAULT: usize = 64 << 20;
/// Instructions between two runs of the budget hook, at most.
const HOOK_INTERVAL_MAX: u32 = 1000;
/// Instructions between two runs of the budget hook when a run begins.
const HOOK_INTERVAL_START: u32 = 100;
/// The hook aims to run about this often: a run slower than twice it shortens the interval,
/// one faster than a tenth of it lengthens the interval (see [`next_hook_interval`]).
const HOOK_PERIOD_TARGET_US: u64 = 500;
/// Compiled functions kept at most; past it the cache starts over (it is only a cache).
const COMPILED_MAX: usize = 10_000;
/// How deeply a script's reply may nest before it is cut with an error element.
const REPLY_DEPTH_MAX: usize = 1000;
/// The chunk name scripts compile under, as Redis's (errors say "user_script:LINE:").
const SCRIPT_CHUNK: &str = "@user_script";
/// What Redis 7.0.15 reports as its version to scripts.
const REDIS_VERSION_NUM: i64 = 0x0007_000f;

/// The node's script VM and its budgets.
pub struct ScriptEngine {
    instruction_budget: u64,
    memory_limit: usize,
    /// Where the node sees a script run and asks it to stop (unclocked until it is given one).
    watch: Arc<CallWatch>,
    /// Where the commands scripts run go for the node's monitors, if it serves any.
    monitor: Option<Arc<InnerCalls>>,
    vm: Option<Vm>,
}

impl std::fmt::Debug for ScriptEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptEngine")
            .field("instruction_budget", &self.instruction_budget)
            .field("memory_limit", &self.memory_limit)
            .field("started", &self.vm.is_some())
            .field(
                "compiled",
                &self.vm.as_ref().map_or(0, |vm| vm.compiled.len()),
            )
            .field(
                "libraries",
                &self.vm.as_ref().map_or(0, |vm| vm.libraries.len()),
            )
            .finish()
    }
}

impl Default for ScriptEngine {
    fn default() -> Self {
        ScriptEngine::new(INSTRUCTION_BUDGET_DEFAULT, MEMORY_LIMIT_DEFAULT)
    }
}

/// A compiled script and what its shebang line declared.
#[derive(Clone, Debug)]
struct Compiled {
    function: Function,
    flags: ScriptFlags,
}

/// What a run calls.
#[derive(Clone, Copy, Debug)]
enum Target<'t> {
    /// An `EVAL` script: its chunk, run in an environment of its own with KEYS and ARGV.
    Script(&'t Function),
    /// A library's function: called with its keys and arguments as Lua tables, in the
    /// environment its library's code loaded in.
    Function {
        callback: &'t Function,
        env: &'t Table,
    },
}

/// What the budget hook counts and decides, shared with it.
#[derive(Debug, Default)]
struct Budget {
    used: AtomicU64,
    limit: AtomicU64,
    /// The run must stop: its instruction budget is spent, or the watch said so
    /// (`stopped`). The prelude raises the stop again wherever a script could catch it.
    spent: AtomicBool,
    /// Why the watch stopped the run, if it did.
    stopped: std::sync::Mutex<Option<StopReason>>,
    /// The watch's number for the run under way.
    run: AtomicU64,
    /// Instructions between two runs of the hook now (see [`next_hook_interval`]).
    interval: AtomicU32,
    /// When the hook last ran, by the watch's clock, in microseconds.
    last_hook_us: AtomicU64,
}

#[derive(Debug)]
struct Vm {
    lua: Lua,
    /// A private table shared with the Lua side: `env` is the running script's environment,
    /// `resp` the protocol it chose with `redis.setresp`.
    bridge: Table,
    /// The real `redis` table (scripts see a read-only proxy): `call` and `pcall` are set in
    /// it for the length of a run, functions scoped to the call's context.
    redis: Table,
    /// Makes a run's environment from its KEYS and ARGV tables.
    new_env: Function,
    /// Runs a script function under Redis's error handler: returns ok, the value, and the
    /// protocol the script chose with `redis.setresp`.
    runner: Function,
    compiled: BTreeMap<Sha, Compiled>,
    /// The prelude's pieces the libraries' sandbox is made of (see `library.rs`).
    library_parts: Function,
    /// Loads a library's code in its sandbox: made on the first library the node loads, so
    /// that a node which never sees one runs scripts in the VM it always had.
    load_library: Option<Function>,
    /// The libraries loaded, keyed by the SHA-1 of their code: a cache of the segment's.
    libraries: BTreeMap<Sha, library::Loaded>,
    budget: Arc<Budget>,
    hook: Arc<Hook>,
    /// The state of `math.random`'s generator, seeded from the call's for each run.
    rng: Arc<AtomicU64>,
    /// The protocol the running script chose with `redis.setresp` (2 or 3).
    resp: Arc<AtomicU8>,
    /// Where the commands a run calls go for the node's monitors, if anywhere.
    monitor: Option<Arc<InnerCalls>>,
}

/// What a run's `redis.call`s leave for the end of the run.
#[derive(Debug, Default)]
struct RunState {
    /// A write command succeeded: the run has written.
    dirty: bool,
    /// A command ran out of memory: the whole call fails.
    oom: bool,
    /// Where each command the run calls is shown to the node's monitors, if anywhere.
    monitor: Option<Arc<InnerCalls>>,
}

impl RunState {
    fn monitored_by(monitor: Option<Arc<InnerCalls>>) -> RunState {
        RunState {
            monitor,
            ..RunState::default()
        }
    }

    /// Shows the command `argv`, which runs now in database `db`, to the node's monitors.
    fn monitored(&self, db: u8, argv: &Argv) {
        if let Some(monitor) = self
            .monitor
            .as_ref()
            .filter(|monitor| monitor.is_watching())
        {
            monitor.push(InnerCall {
                db: u32::from(db),
                words: argv.iter().map(<[u8]>::to_vec).collect(),
            });
        }
    }
}

/// The count hook: it charges the instructions run to the budget, stops a run the watch
/// says must stop, and keeps its own interval near [`HOOK_PERIOD_TARGET_US`].
#[derive(Debug)]
struct Hook {
    budget: Arc<Budget>,
    watch: Arc<CallWatch>,
}

impl Hook {
    /// Makes the VM run the hook every `interval` instructions (on the running coroutine,
    /// and on those it creates from now on).
    fn install(self: &Arc<Self>, lua: &Lua, interval: u32) -> mlua::Result<()> {
        self.budget.interval.store(interval, Ordering::Relaxed);
        let hook = self.clone();
        lua.set_global_hook(
            HookTriggers::new().every_nth_instruction(interval),
            move |lua, _| hook.ran(lua, interval),
        )
    }

    /// The hook ran after `interval` instructions.
    fn ran(self: &Arc<Self>, lua: &Lua, interval: u32) -> mlua::Result<VmState> {
        let budget = &self.budget;
        let used = budget
            .used
            .fetch_add(u64::from(interval), Ordering::Relaxed)
            + u64::from(interval);
        if used > budget.limit.load(Ordering::Relaxed) {
            budget.spent.store(true, Ordering::Relaxed);
        }
        // The node's other clients are served from here while the run is busy (a
        // `SCRIPT KILL` among them is seen just below).
        if budget.run.load(Ordering::Relaxed) != 0 {
            self.watch.busy_tick();
        }
        must_stop(budget, &self.watch)?;
        let now_us = self.watch.now_us();
        let elapsed_us = now_us.saturating_sub(budget.last_hook_us.swap(now_us, Ordering::Relaxed));
        let next = next_hook_interval(interval, elapsed_us);
        if next != interval {
            self.install(lua, next)?;
        }
        Ok(VmState::Continue)
    }
}

/// Raises the stop if the run must stop: its instruction budget is spent, or the watch says
/// it must (`SCRIPT KILL`, the time limit), which it then records as the reason.
fn must_stop(budget: &Budget, watch: &CallWatch) -> mlua::Result<()> {
    if budget.spent.load(Ordering::Relaxed) {
        return Err(mlua::Error::runtime(STOPPED));
    }
    let run = RunId(budget.run.load(Ordering::Relaxed));
    // Run 0 is no run of the watch's: a library's code loading, which only its budget stops.
    if run.0 == 0 {
        return Ok(());
    }
    if let Some(reason) = watch.stop_reason(run) {
        *budget.stopped.lock().expect("not poisoned") = Some(reason);
        budget.spent.store(true, Ordering::Relaxed);
        return Err(mlua::Error::runtime(STOPPED));
    }
    Ok(())
}

/// The hook's next interval after one of `interval` instructions took `elapsed_us`.
///
/// A stop is seen only when the hook runs, and the VM cannot run it inside an instruction or
/// a C function: a script that spends its time in C (`string.upper` of a megabyte takes
/// about 5 ms) or on large strings (`..` copies them) runs few instructions per millisecond,
/// so a fixed interval of a thousand would leave a stop waiting seconds. The interval
/// shrinks eightfold at once when it took more than twice the target and doubles back when
/// it took less than a tenth of it: pure Lua runs a thousand instructions in about 10 µs,
/// and a hook costs 60 to 80 ns.
fn next_hook_interval(interval: u32, elapsed_us: u64) -> u32 {
    if elapsed_us > 2 * HOOK_PERIOD_TARGET_US {
        (interval / 8).max(1)
    } else if elapsed_us < HOOK_PERIOD_TARGET_US / 10 {
        interval.saturating_mul(2).min(HOOK_INTERVAL_MAX)
    } else {
        interval
    }
}

/// What the hook raises to stop a run; the prelude raises it again wherever a script could
/// catch it, and the engine answers the reason instead (the budget's `spent`/`stopped`).
const STOPPED: &str = "the script was stopped";

impl ScriptEngine {
    /// An engine whose scripts may run `instruction_budget` Lua instructions and whose VM
    /// may hold `memory_limit` bytes. The VM is made on first use.
    pub fn new(instruction_budget: u64, memory_limit: usize) -> ScriptEngine {
        ScriptEngine {
            instruction_budget,
            memory_limit,
            watch: Arc::new(CallWatch::unclocked()),
            monitor: None,
            vm: None,
        }
    }

    /// Runs scripts under `watch` from now on: each run is marked there, and one the watch
    /// says must stop (`SCRIPT KILL`, the time limit) stops and is rolled back.
    pub fn set_watch(&mut self, watch: Arc<CallWatch>) {
        self.watch = watch;
        // The budget hook holds the watch it was made with.
        self.vm = None;
    }

    /// Shows the commands scripts run to the node's monitors through `inner_calls` from now
    /// on (whenever it says a front end watches).
    pub fn monitor_to(&mut self, inner_calls: Arc<InnerCalls>) {
        if let Some(vm) = &mut self.vm {
            vm.monitor = Some(inner_calls.clone());
        }
        self.monitor = Some(inner_calls);
    }

    /// Where the commands scripts run go for the node's monitors, if anywhere.
    pub fn monitor(&self) -> Option<&Arc<InnerCalls>> {
        self.monitor.as_ref()
    }

    /// The watch scripts run under.
    pub fn watch(&self) -> &Arc<CallWatch> {
        &self.watch
    }

    /// Drops every compiled function and puts `cjson`'s settings back to their defaults
    /// (`SCRIPT FLUSH`, after which Redis starts a new VM).
    pub fn forget_compiled(&mut self) {
        if let Some(vm) = &mut self.vm {
            vm.compiled.clear();
            vm.lua.set_app_data(cjson::Config::default());
            let _ = vm.lua.gc_collect();
        }
    }

    fn vm(&mut self) -> Result<&mut Vm, CmdError> {
        if self.vm.is_none() {
            let mut vm = Vm::start(self.memory_limit, self.watch.clone())
                .map_err(|err| CmdError::owned(format!("ERR the Lua VM could not start: {err}")))?;
            vm.monitor = self.monitor.clone();
            self.vm = Some(vm);
        }
        Ok(self.vm.as_mut().expect("just started"))
    }

    /// Compiles `body` (named `sha`) into the cache, or answers Redis's compile error
    /// (`SCRIPT LOAD` checks a script this way before storing it).
    pub fn compile(&mut self, sha: &Sha, body: &[u8]) -> Result<(), CmdError> {
        let vm = self.vm()?;
        vm.compiled_or_compile(sha, body).map(|_| ())
    }

    /// Runs `script` with `keys` and `args` in `ctx`, writing its reply to `out`.
    /// `read_only` is true for `EVAL_RO`/`EVALSHA_RO`.
    pub fn run(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        script: ScriptRef<'_>,
        keys: &[&[u8]],
        args: &[&[u8]],
        read_only: bool,
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError> {
        let instruction_budget = self.instruction_budget;
        let memory_limit = self.memory_limit;
        let vm = self.vm()?;
        let compiled = match vm.compiled.get(&script.sha) {
            Some(compiled) => compiled.clone(),
            None => {
                let body = match script.body {
                    Some(body) => body.to_vec(),
                    None => stored_body(&ctx.access, &ctx.layout, &script.sha).ok_or(
                        CmdError::fixed("NOSCRIPT No matching script. Please use EVAL."),
                    )?,
                };
                vm.compiled_or_compile(&script.sha, &body)?
            }
        };
        if read_only && compiled.flags.shebang && !compiled.flags.no_writes {
            return Err(CmdError::fixed(
                "ERR Can not execute a script with write flag using *_ro command.",
            ));
        }
        let no_writes = read_only || compiled.flags.no_writes;
        if compiled.flags.shebang {
            may_run_past_maxmemory(ctx, compiled.flags.allow_oom || no_writes)?;
        }
        let result = vm.execute(
            ctx,
            Target::Script(&compiled.function),
            &script.sha,
            keys,
            args,
            no_writes,
            (instruction_budget, memory_limit),
            out,
        );
        vm.maybe_forget_compiled(memory_limit);
        result
    }
}

impl Vm {
    fn start(memory_limit: usize, watch: Arc<CallWatch>) -> mlua::Result<Vm> {
        let lua = Lua::new_with(
            StdLib::TABLE | StdLib::STRING | StdLib::MATH,
            LuaOptions::default(),
        )?;
        let bridge = lua.create_table()?;
        let budget = Arc::new(Budget::default());
        let rng = Arc::new(AtomicU64::new(0));
        let spent = {
            let budget = budget.clone();
            lua.create_function(move |_, ()| Ok(budget.spent.load(Ordering::Relaxed)))?
        };
        let handler = lua.create_function(error_handler)?;
        let resp = Arc::new(AtomicU8::new(2));
        let redis = Vm::redis_library(&lua, &resp)?;
        let error_text = lua.create_function(|lua, text: LuaString| {
            lua.create_string(lua_error_text(&text.as_bytes()))
        })?;
        let cjson_table = Vm::cjson_library(&lua)?;
        let msgpack_table = Vm::cmsgpack_library(&lua)?;
        let random = {
            let rng = rng.clone();
            lua.create_function(move |lua, args: MultiValue| math_random(lua, &rng, &args))?
        };
        let randomseed = {
            let rng = rng.clone();
            lua.create_function(move |_, seed: f64| {
                rng.store(seed as i64 as u64, Ordering::Relaxed);
                Ok(())
            })?
        };
        let bit = super::bit::library(&lua)?;
        let source = [PRELUDE, PRELUDE_END].concat();
        let setup: Function = lua.load(source).set_name("=tandem").into_function()?;
        let parts = lua.create_table()?;
        parts.set("bridge", bridge.clone())?;
        parts.set("handler", handler)?;
        parts.set("spent", spent)?;
        parts.set("error_text", error_text)?;
        parts.set("redis", redis)?;
        parts.set("cjson", cjson_table)?;
        parts.set("cmsgpack", msgpack_table)?;
        parts.set("unwrap_error", lua.create_function(unwrap_error)?)?;
        parts.set("bit", bit)?;
        parts.set("random", random)?;
        parts.set("randomseed", randomseed)?;
        parts.set("pattern_refusals", pattern_refusals(&lua)?)?;
        // The pattern functions backtrack in Rust and ask, as they go, what the hook asks.
        let check: super::pattern::Check = {
            let (budget, watch) = (budget.clone(), watch.clone());
            Arc::new(move || must_stop(&budget, &watch))
        };
        parts.set(
            "patterns",
            super::pattern::library(&lua, check, memory_limit)?,
        )?;
        parts.set("chunk_refusals", chunk_refusals(&lua)?)?;
        parts.set("version", crate::session::REDIS_VERSION)?;
        parts.set("version_num", REDIS_VERSION_NUM)?;
        let (new_env, runner, redis, library_parts): (Function, Function, Table, Function) =
            setup.call(parts)?;
        let hook = Arc::new(Hook {
            budget: budget.clone(),
            watch,
        });
        hook.install(&lua, HOOK_INTERVAL_START)?;
        lua.gc_collect()?;
        lua.set_memory_limit(memory_limit)?;
        Ok(Vm {
            lua,
            bridge,
            redis,
            new_env,
            runner,
            compiled: BTreeMap::new(),
            library_parts,
            load_library: None,
            libraries: BTreeMap::new(),
            budget,
            hook,
            rng,
            resp,
            monitor: None,
        })
    }

    /// The `redis` table's functions that Rust answers (`sha1hex`, `log`, `setresp`,
    /// `set_repl`, `acl_check_cmd`); the prelude adds `call`, `pcall` and the rest. `resp` is
    /// the protocol `setresp` chose.
    fn redis_library(lua: &Lua, resp: &Arc<AtomicU8>) -> mlua::Result<Table> {
        let redis = lua.create_table()?;
        redis.set(
            "sha1hex",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise_reply("ERR wrong number of arguments"));
                }
                let bytes = match lua.coerce_string(args[0].clone())? {
                    Some(s) => s.as_bytes().to_vec(),
                    None => Vec::new(),
                };
                lua.create_string(super::sha1_hex(&bytes))
            })?,
        )?;
        redis.set(
            "log",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() < 2 {
                    return Err(raise_reply(
                        "ERR redis.log() requires two arguments or more.",
                    ));
                }
                let Some(level) = lua.coerce_number(args[0].clone())? else {
                    return Err(raise_reply(
                        "ERR First argument must be a number (log level).",
                    ));
                };
                if !(0.0..4.0).contains(&level.trunc()) {
                    return Err(raise_reply("ERR Invalid debug level."));
                }
                // A script's log lines go nowhere: a node keeps no Redis log file.
                Ok(())
            })?,
        )?;
        {
            let resp = resp.clone();
            redis.set(
                "setresp",
                lua.create_function(move |lua, args: MultiValue| {
                    if args.len() != 1 {
                        return Err(raise_reply("ERR redis.setresp() requires one argument."));
                    }
                    let version = lua.coerce_number(args[0].clone())?.map(f64::trunc);
                    if version == Some(2.0) {
                        resp.store(2, Ordering::Relaxed);
                    } else if version == Some(3.0) {
                        resp.store(3, Ordering::Relaxed);
                    } else {
                        return Err(raise_reply("ERR RESP version must be 2 or 3."));
                    }
                    Ok(())
                })?,
            )?;
        }
        redis.set(
            "set_repl",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raise_reply("ERR redis.set_repl() requires two arguments."));
                }
                let flags = lua.coerce_number(args[0].clone())?.unwrap_or(0.0) as i64;
                if flags & !3 != 0 {
                    return Err(raise_reply(
                        "ERR Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or \
                         REPL_NONE.",
                    ));
                }
                // Every write replicates as the redo of its effects: there is nothing to pick.
                Ok(())
            })?,
        )?;
        redis.set(
            "acl_check_cmd",
            lua.create_function(|lua, args: MultiValue| {
                let Some(name) = args.front() else {
                    return Err(raise_reply(
                        "ERR Please specify at least one argument for this redis lib call",
                    ));
                };
                let known = match lua.coerce_string(name.clone())? {
                    Some(name) => lookup(&name.as_bytes()).is_some(),
                    None => false,
                };
                if !known {
                    return Err(raise_reply(
                        "ERR Invalid command passed to redis.acl_check_cmd()",
                    ));
                }
                // There is no user but the default one, which may run every command.
                Ok(true)
            })?,
        )?;
        Ok(redis)
    }

    /// The `cjson` table: `encode`, `decode` (depth-bounded), `null`, and the settings
    /// functions, whose [`cjson::Config`] the VM keeps as app data.
    fn cjson_library(lua: &Lua) -> mlua::Result<Table> {
        lua.set_app_data(cjson::Config::default());
        let cjson_table = lua.create_table()?;
        for &name in cjson::SETTINGS {
            cjson_table.set(
                name,
                lua.create_function(move |lua, args: MultiValue| {
                    let mut config = lua.app_data_mut::<cjson::Config>().expect("set above");
                    match cjson::setting(lua, name, &args, &mut config)? {
                        Ok(answer) => Ok(answer),
                        Err(message) => Err(raised(lua, &message)),
                    }
                })?,
            )?;
        }
        cjson_table.set(
            "encode",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raised(
                        lua,
                        "bad argument #1 to 'encode' (expected 1 argument)",
                    ));
                }
                let config = *lua
                    .app_data_ref::<cjson::Config>()
                    .expect("set with the table");
                match cjson::encode(&args[0], &config)? {
                    Ok(text) => lua.create_string(text),
                    Err(message) => Err(raised(lua, &message)),
                }
            })?,
        )?;
        cjson_table.set(
            "decode",
            lua.create_function(|lua, args: MultiValue| {
                if args.len() != 1 {
                    return Err(raised(
                        lua,
                        "bad argument #1 to 'decode' (expected 1 argument)",
                    ));
                }
                let text = match args.front() {
                    Some(value @ (Value::String(_) | Value::Integer(_) | Value::Number(_))) => lua
                        .coerce_string(value.clone())?
                        .map(|s| s.as_bytes().to_vec())
                        .unwrap_or_default(),
                    other => {
                        let message = format!(
                            "bad argument #1 to 'decode' (string expected, got {})",
                            lua_type_name(other)
                        );
                        return Err(raised(lua, &message));
                    }
                };
                let config = *lua
                    .app_data_ref::<cjson::Config>()
                    .expect("set with the table");
                match cjson::decode(lua, &text, &config)? {
                    Ok(value) => Ok(value),
                    Err(message) => Err(raised(lua, &message)),
                }
            })?,
        )?;
        cjson_table.set("null", cjson::null())?;
        Ok(cjson_table)
    }

    /// The `cmsgpack` table: `pack`, `unpack`, `unpack_one` and `unpack_limit`
    /// (depth-bounded).
    fn cmsgpack_library(lua: &Lua) -> mlua::Result<Table> {
        let msgpack_table = lua.create_table()?;
        msgpack_table.set(
            "pack",
            lua.create_function(|lua, args: MultiValue| {
                if args.is_empty() {
                    return Err(raised(
                        lua,
                        "bad argument #0 to 'pack' (MessagePack pack needs input.)",
                    ));
                }
                let values: Vec<Value> = args.into_iter().collect();
                lua.create_string(msgpack::pack(&values)?)
            })?,
        )?;
        for (name, takes_limit) in [
            ("unpack", None),
            ("unpack_one", Some(false)),
            ("unpack_limit", Some(true)),
        ] {
            msgpack_table.set(
                name,
                lua.create_function(move |lua, args: MultiValue| {
                    let number = |index: usize| match args.get(index) {
                        Some(Value::Integer(i)) => *i,
                        Some(Value::Number(n)) => *n as i64,
                        _ => 0,
                    };
                    // `unpack` decodes above all its arguments; the others keep only the
                    // string on Lua's stack (lua_cmsgpack pops the rest).
                    let (limit, offset, slots_taken) = match takes_limit {
                        None => (0, 0, args.len()),
                        Some(false) => (1, number(1), 1),
                        Some(true) => (number(1), number(2), 1),
                    };
                    let text = match args.front() {
                        Some(value) => lua.coerce_string(value.clone())?,
                        None => None,
                    };
                    let Some(text) = text else {
                        let message = format!(
                            "bad argument #1 to '{name}' (string expected, got {})",
                            lua_type_name(args.front())
                        );
                        return Err(raised(lua, &message));
                    };
                    match msgpack::unpack(lua, &text.as_bytes(), limit, offset, slots_taken)? {
                        Ok((values, next)) => {
                            let mut results: Vec<Value> = Vec::with_capacity(values.len() + 1);
                            if let Some(next) = next {
                                results.push(Value::Number(next as f64));
                            }
                            results.extend(values);
                            Ok(MultiValue::from_vec(results))
                        }
                        Err(message) => Err(raised(lua, &message)),
                    }
                })?,
            )?;
        }
        Ok(msgpack_table)
    }

    /// Starts the caches over when the VM holds more than half of `memory_limit`: that is
    /// mostly compiled scripts and libraries, and scripts must not starve for them.
    fn maybe_forget_compiled(&mut self, memory_limit: usize) {
        if self.lua.used_memory() > memory_limit / 2 {
            self.compiled.clear();
            self.libraries.clear();
            let _ = self.lua.gc_collect();
        }
    }

    fn compiled_or_compile(&mut self, sha: &Sha, body: &[u8]) -> Result<Compiled, CmdError> {
        if let Some(compiled) = self.compiled.get(sha) {
            return Ok(compiled.clone());
        }
        let (flags, shebang_len) = shebang_flags(body)?;
        let function = self
            .lua
            .load(text_chunk(&body[shebang_len..]).as_ref())
            .set_name(SCRIPT_CHUNK)
            .set_mode(ChunkMode::Text)
            .into_function()
            .map_err(|err| {
                let message = match &err {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                CmdError::owned(format!(
                    "ERR Error compiling script (new function): {message}"
                ))
            })?;
        if self.compiled.len() >= COMPILED_MAX {
            self.compiled.clear();
        }
        let compiled = Compiled { function, flags };
        self.compiled.insert(*sha, compiled.clone());
        Ok(compiled)
    }

    /// Runs `target` with `keys` and `args` in `ctx`, under the budgets; `name` is what its
    /// errors call it (a script's SHA-1, a function's name).
    #[allow(clippy::too_many_arguments)]
    fn execute(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        target: Target<'_>,
        name: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        no_writes: bool,
        (instruction_budget, memory_limit): (u64, usize),
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError> {
        let sha_text = String::from_utf8_lossy(name).into_owned();
        let memory_error = || script_memory_error(memory_limit, &sha_text);
        self.reset_for_run(instruction_budget, ctx.random());
        let state = std::cell::RefCell::new(RunState::monitored_by(self.monitor.clone()));
        let lua = &self.lua;
        if self.budget.interval.load(Ordering::Relaxed) != HOOK_INTERVAL_START {
            // Each run starts at the same interval: the last run's says nothing of this one.
            self.hook
                .install(lua, HOOK_INTERVAL_START)
                .map_err(|err| CmdError::owned(format!("ERR the Lua VM failed: {err}")))?;
        }
        let watch = self.hook.watch.clone();
        // The database's busy threshold, if `CONFIG SET` gave it one, else the node's.
        let run = watch.begin(ctx.layout.params.busy_reply_threshold_ms(&ctx.access));
        self.budget.run.store(run.0, Ordering::Relaxed);
        self.budget
            .last_hook_us
            .store(watch.now_us(), Ordering::Relaxed);
        let Ok(call_args) = self.prepare(&target, keys, args) else {
            watch.end(run);
            let _ = lua.gc_collect();
            return Err(memory_error());
        };
        let published_before = ctx.notices.len();
        let ctx = std::cell::RefCell::new(ctx);
        let outcome = lua.scope(|scope| {
            let state = &state;
            let resp = &self.resp;
            let resp_of = move || match resp.load(Ordering::Relaxed) {
                3 => Proto::Resp3,
                _ => Proto::Resp2,
            };
            let ctx = &ctx;
            let call = scope.create_function(move |lua, args: MultiValue| {
                let (ok, reply) = bridge_call(
                    lua,
                    &mut ctx.borrow_mut(),
                    &mut state.borrow_mut(),
                    no_writes,
                    resp_of(),
                    args,
                )?;
                if ok {
                    return Ok(reply);
                }
                let Value::Table(table) = &reply else {
                    unreachable!("a refused call answers an error table")
                };
                let text: LuaString = table.raw_get("err")?;
                Err(mlua::Error::external(RaisedReply(
                    String::from_utf8_lossy(&text.as_bytes()).into_owned(),
                )))
            })?;
            let pcall = scope.create_function(move |lua, args: MultiValue| {
                let (_, reply) = bridge_call(
                    lua,
                    &mut ctx.borrow_mut(),
                    &mut state.borrow_mut(),
                    no_writes,
                    resp_of(),
                    args,
                )?;
                Ok(reply)
            })?;
            self.redis.raw_set("call", call)?;
            self.redis.raw_set("pcall", pcall)?;
            let (ok, value): (bool, Value) = self.runner.call(call_args)?;
            let outcome = (ok, value, i64::from(resp.load(Ordering::Relaxed)));
            self.redis.raw_set("call", Value::Nil)?;
            self.redis.raw_set("pcall", Value::Nil)?;
            Ok(outcome)
        });
        watch.end(run);
        self.unbind_run();
        let concluded = self.conclude(
            outcome,
            state.into_inner(),
            &sha_text,
            (instruction_budget, memory_limit),
            out,
        );
        if concluded.is_err() {
            // A script that failed publishes nothing, though its call may still commit
            // (`EVAL` keeps a script that failed without writing, and a `MULTI` block the
            // messages of its other commands).
            ctx.into_inner().notices.truncate(published_before);
        }
        concluded
    }

    /// Takes `redis.call`, `redis.pcall` and the run's environment out of the VM, whatever
    /// way the run ended (they name values of the run only).
    fn unbind_run(&self) {
        let _ = self.redis.raw_set("call", Value::Nil);
        let _ = self.redis.raw_set("pcall", Value::Nil);
        let _ = self.bridge.raw_set("env", Value::Nil);
    }

    /// What the runner is called with for `target`, its keys and arguments made Lua tables: a
    /// script with an environment of its own (KEYS and ARGV), a function with its library's
    /// environment, which then also compiles what `loadstring` gives it.
    fn prepare(
        &self,
        target: &Target<'_>,
        keys: &[&[u8]],
        args: &[&[u8]],
    ) -> mlua::Result<MultiValue> {
        let lua = &self.lua;
        let keys = strings_table(lua, keys)?;
        let args = strings_table(lua, args)?;
        match target {
            Target::Script(function) => {
                let env: Table = self.new_env.call((keys, args))?;
                function.set_environment(env)?;
                (*function).clone().into_lua_multi(lua)
            }
            Target::Function { callback, env } => {
                self.bridge.raw_set("env", (*env).clone())?;
                ((*callback).clone(), keys, args).into_lua_multi(lua)
            }
        }
    }

    /// Starts a run's accounts afresh: `instruction_budget` to spend, nothing stopped, the
    /// script's random generator seeded with `seed`, RESP2 until `redis.setresp`.
    fn reset_for_run(&mut self, instruction_budget: u64, seed: u64) {
        self.budget.used.store(0, Ordering::Relaxed);
        self.budget
            .limit
            .store(instruction_budget, Ordering::Relaxed);
        self.budget.spent.store(false, Ordering::Relaxed);
        *self.budget.stopped.lock().expect("not poisoned") = None;
        self.rng.store(seed, Ordering::Relaxed);
        self.resp.store(2, Ordering::Relaxed);
    }

    /// Turns how a run ended into the script's reply or its error: a stop (`SCRIPT KILL`, the
    /// time limit, the instruction budget), out of memory, a Lua error, or the value it
    /// returned. An error of a run that wrote aborts its txn (`CmdError::Abort`).
    fn conclude(
        &self,
        outcome: mlua::Result<(bool, Value, i64)>,
        state: RunState,
        sha_text: &str,
        (instruction_budget, memory_limit): (u64, usize),
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError> {
        let lua = &self.lua;
        let memory_error = || script_memory_error(memory_limit, sha_text);
        if !matches!(outcome, Ok((true, _, _))) {
            // What a failed script left (a table grown to the memory limit, say) is garbage
            // now: collect it before the next script needs the room.
            let _ = lua.gc_collect();
        }
        let fail = |text: String| {
            if state.dirty {
                CmdError::Abort(text.into())
            } else {
                CmdError::owned(text)
            }
        };
        let stopped = self.budget.stopped.lock().expect("not poisoned").take();
        match stopped {
            Some(StopReason::Killed) => {
                return Err(fail(format!(
                    "ERR Script killed by user with SCRIPT KILL... (its writes are undone) \
                     script: {sha_text}"
                )));
            }
            Some(StopReason::TimeLimit { limit_ms }) => {
                return Err(fail(format!(
                    "ERR Script killed: it ran longer than the {limit_ms} ms a script may run \
                     (tuning.script_time_limit_ms; its writes are undone) script: {sha_text}"
                )));
            }
            None => {}
        }
        if self.budget.spent.load(Ordering::Relaxed) {
            return Err(fail(format!(
                "ERR Script killed: it ran more than the {instruction_budget} Lua instructions \
                 a script may run (its writes are undone) script: {sha_text}"
            )));
        }
        if state.oom {
            return Err(CmdError::Oom);
        }
        match outcome {
            Err(err) if is_memory_error(&err) => {
                let _ = lua.gc_collect();
                Err(fail(memory_error().text().to_string()))
            }
            Err(err) => Err(fail(format!(
                "ERR Error running script {sha_text}, {}",
                error_message(&err)
            ))),
            Ok((true, value, resp)) => {
                let lua_proto = if resp == 3 {
                    Proto::Resp3
                } else {
                    Proto::Resp2
                };
                write_reply(&value, lua_proto, out, 0);
                Ok(())
            }
            Ok((false, value, _)) => {
                if reports_memory_exhaustion(&value) {
                    let _ = lua.gc_collect();
                    return Err(fail(memory_error().text().to_string()));
                }
                Err(fail(failure_text(&value, sha_text)))
            }
        }
    }
}

/// A Lua sequence of `strings`, each set as it is made: mlua keeps every Lua value Rust
/// holds in a stack of about 8,000 slots, so the strings of a call with more arguments
/// cannot all be held at once.
fn strings_table(lua: &Lua, strings: &[&[u8]]) -> mlua::Result<Table> {
    let table = lua.create_table_with_capacity(strings.len(), 0)?;
    for (index, bytes) in strings.iter().enumerate() {
        table.raw_set(index + 1, lua.create_string(bytes)?)?;
    }
    Ok(table)
}

/// Whether what a failed script raised is Lua running out of memory: the message itself,
/// or an error table made of it (the pattern guards raise a memory error again at their
/// caller, as an ordinary error that the error handler turns into a table).
fn reports_memory_exhaustion(value: &Value) -> bool {
    let text = match value {
        Value::String(text) => text.clone(),
        Value::Table(table) => match table.raw_get::<Value>("err") {
            Ok(Value::String(text)) => text,
            _ => return false,
        },
        _ => return false,
    };
    text.as_bytes()
        .windows(17)
        .any(|window| window == b"not enough memory")
}

/// An error table raised by `redis.call` (its `err` text), carried through Lua as an error
/// value, since a Rust function cannot raise a table.
#[derive(Debug)]
struct RaisedReply(String);

impl std::fmt::Display for RaisedReply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for RaisedReply {}

/// An error table with `text`, raised from Rust (Redis's `luaPushError` then `luaError`).
fn raise_reply(text: &str) -> mlua::Error {
    mlua::Error::external(RaisedReply(text.to_string()))
}

/// The chunk Lua is given to compile `body` as Redis's Lua would: as text, always. Redis
/// took the bytecode loader out of its Lua, so a body that starts with ESC (bytecode's
/// mark) is read by the parser, which refuses it ("unexpected symbol near 'char(27)'").
/// Lua 5.1 would load it as bytecode, which no loader checks; a space in front makes the
/// parser read it, with the same error on the same line. (The chunk is also compiled in
/// text mode, so no bytecode could load even without the space.)
fn text_chunk(body: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    match body.first() {
        Some(&ESC) => {
            let mut spaced = Vec::with_capacity(body.len() + 1);
            spaced.push(b' ');
            spaced.extend_from_slice(body);
            std::borrow::Cow::Owned(spaced)
        }
        _ => std::borrow::Cow::Borrowed(body),
    }
}

/// The first byte of a Lua bytecode chunk.
const ESC: u8 = 0x1b;

/// The table of pattern guards the prelude wraps `string.find`, `match`, `gmatch` and
/// `gsub` with: each answers why a call must not go ahead, or nil (see `guards.rs`).
fn pattern_refusals(lua: &Lua) -> mlua::Result<Table> {
    let refusals = lua.create_table()?;
    for function in PatternFunction::ALL {
        refusals.set(
            function.name(),
            lua.create_function(move |lua, args: MultiValue| {
                guards::pattern_refusal(lua, function, &args)
            })?,
        )?;
    }
    Ok(refusals)
}

/// The table of argument checks the prelude's `load` and `loadstring` make first.
fn chunk_refusals(lua: &Lua) -> mlua::Result<Table> {
    let refusals = lua.create_table()?;
    for function in ChunkFunction::ALL {
        refusals.set(
            function.name(),
            lua.create_function(move |lua, args: MultiValue| {
                Ok(guards::chunk_refusal(lua, function, &args))
            })?,
        )?;
    }
    Ok(refusals)
}

/// The type Lua's `luaL_typerror` names in "string expected, got …" for an argument
/// (`None`: the argument was not given).
fn lua_type_name(value: Option<&Value>) -> &'static str {
    match value {
        None => "no value",
        Some(Value::Nil) => "nil",
        Some(Value::Boolean(_)) => "boolean",
        Some(Value::Integer(_) | Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(Value::Table(_)) => "table",
        Some(Value::Function(_)) => "function",
        Some(Value::Thread(_)) => "thread",
        Some(_) => "userdata",
    }
}

/// An error raised from Rust as `luaL_error` raises it: the message after the position of
/// the Lua code that called.
fn raised(lua: &Lua, message: &str) -> mlua::Error {
    mlua::Error::runtime(format!("{}{message}", caller_position(lua)))
}

/// What Redis's `pcall` gives a script for an error raised from Rust: the error table's text
/// for a `redis.call` error, the message for any other; other values unchanged.
fn unwrap_error(lua: &Lua, value: Value) -> mlua::Result<Value> {
    match &value {
        Value::Error(err) => {
            let text = match err.downcast_ref::<RaisedReply>() {
                Some(RaisedReply(text)) => text.clone(),
                None => error_message(err),
            };
            Ok(Value::String(lua.create_string(text)?))
        }
        _ => Ok(value),
    }
}

/// Whether an mlua error is Lua running out of memory (the memory budget).
fn is_memory_error(err: &mlua::Error) -> bool {
    match err {
        mlua::Error::MemoryError(_) => true,
        mlua::Error::CallbackError { cause, .. } => is_memory_error(cause),
        _ => false,
    }
}

/// The message of an mlua error, without the tracebacks mlua adds to callback errors.
/// The error of a script that needed more than the `memory_limit` bytes of Lua memory.
fn script_memory_error(memory_limit: usize, sha_text: &str) -> CmdError {
    CmdError::owned(format!(
        "ERR Script killed: it needed more than the {memory_limit} bytes of Lua memory scripts \
         may use (its writes are undone) script: {sha_text}"
    ))
}

fn error_message(err: &mlua::Error) -> String {
    match err {
        mlua::Error::CallbackError { cause, .. } => error_message(cause),
        mlua::Error::RuntimeError(message) => message.clone(),
        mlua::Error::MemoryError(message) => message.clone(),
        mlua::Error::WithContext { cause, .. } => error_message(cause),
        other => other.to_string(),
    }
}

/// The text of a failed script's error reply, from the value its error handler returned
/// (luaCallFunction): "<err> script: <sha>, on <source>:<line>." for an error table that
/// knows where it was raised.
fn failure_text(value: &Value, sha: &str) -> String {
    match value {
        Value::Table(table) => {
            let err: Option<LuaString> = table.get("err").ok();
            let Some(err) = err else {
                return format!("ERR Error running script {sha}, execution failure");
            };
            let mut text = String::from_utf8_lossy(&err.as_bytes()).into_owned();
            let source: Option<LuaString> = table.get("source").ok();
            let line: Option<i64> = table.get("line").ok();
            if let (Some(source), Some(line)) = (source, line) {
                text.push_str(&format!(
                    " script: {sha}, on {}:{line}.",
                    String::from_utf8_lossy(&source.as_bytes())
                ));
            }
            text
        }
        Value::String(message) => format!(
            "ERR Error running script {sha}, {}",
            String::from_utf8_lossy(&message.as_bytes())
        ),
        _ => format!("ERR Error running script {sha}, execution failure"),
    }
}

/// Where the Lua code that called the running Rust function is, as `luaL_where` prints it
/// ("user_script:3: "), for errors raised from Rust.
pub fn caller_position(lua: &Lua) -> String {
    lua.inspect_stack(1, |debug| {
        let source = debug.source();
        match (source.short_src, debug.current_line()) {
            (Some(short), Some(line)) => format!("{short}:{line}: "),
            _ => String::new(),
        }
    })
    .unwrap_or_default()
}

/// Redis's `__redis__err__handler`: turns what a script raised into an error table that
/// says where (the innermost frame of the script itself).
fn error_handler(lua: &Lua, err: Value) -> mlua::Result<Value> {
    let mut position = None;
    for level in 1..200 {
        let Some(found) = lua.inspect_stack(level, |debug| {
            let source = debug.source().source.map(|s| s.into_owned());
            (source, debug.current_line())
        }) else {
            break;
        };
        if let (Some(source), Some(line)) = found
            && (source == SCRIPT_CHUNK || source == library::FUNCTION_CHUNK)
        {
            position = Some((source, line));
            break;
        }
    }
    let table = match err {
        Value::Table(table) if matches!(table.raw_get::<Value>("err"), Ok(Value::String(_))) => {
            table
        }
        Value::Table(table) if matches!(table.get::<Value>("err"), Ok(Value::String(_))) => table,
        other => {
            if let Value::Error(err) = &other
                && let Some(RaisedReply(text)) = err.downcast_ref::<RaisedReply>()
            {
                let table = lua.create_table()?;
                table.raw_set("err", text.as_str())?;
                if let Some((source, line)) = position {
                    table.raw_set("source", source)?;
                    table.raw_set("line", line)?;
                }
                return Ok(Value::Table(table));
            }
            let message = match &other {
                Value::Error(err) => error_message(err),
                Value::String(s) => String::from_utf8_lossy(&s.as_bytes()).into_owned(),
                Value::Integer(_) | Value::Number(_) => lua
                    .coerce_string(other.clone())?
                    .map(|s| String::from_utf8_lossy(&s.as_bytes()).into_owned())
                    .unwrap_or_default(),
                Value::Nil => "nil".to_string(),
                Value::Boolean(b) => b.to_string(),
                _ => format!(
                    "{}: {:?}",
                    super::bit::lua_type_name(&other),
                    other.to_pointer()
                ),
            };
            let table = lua.create_table()?;
            table.raw_set("err", format!("ERR {message}"))?;
            table
        }
    };
    if let Some((source, line)) = position {
        table.raw_set("source", source)?;
        table.raw_set("line", line)?;
    }
    Ok(Value::Table(table))
}

/// The error text Redis's `luaPushErrorBuff` makes of an error reply's text: "CODE message",
/// with "ERR" when the text has no code, CR and LF trimmed from the message's ends.
pub fn lua_error_text(reply: &[u8]) -> Vec<u8> {
    let (code, message): (&[u8], &[u8]) = match reply.strip_prefix(b"-") {
        Some(rest) => match rest.iter().position(|&b| b == b' ') {
            Some(space) => (&rest[..space], &rest[space + 1..]),
            None => (b"ERR", rest),
        },
        None => (b"ERR", reply),
    };
    let start = message
        .iter()
        .position(|b| !matches!(b, b'\r' | b'\n'))
        .unwrap_or(message.len());
    let end = message
        .iter()
        .rposition(|b| !matches!(b, b'\r' | b'\n'))
        .map_or(start, |last| last + 1);
    let mut text = code.to_vec();
    text.push(b' ');
    text.extend_from_slice(&message[start..end]);
    text
}

fn error_table(lua: &Lua, reply_text: &[u8]) -> mlua::Result<Value> {
    let table = lua.create_table()?;
    table.raw_set("err", lua.create_string(lua_error_text(reply_text))?)?;
    Ok(Value::Table(table))
}

/// The commands a script may not call (Redis's `noscript` flag): those that run or manage
/// scripts and functions, most blocking commands, and those that answer with the database's
/// file.
/// Whether `command` runs when a script calls it, rather than being refused before it runs
/// (the refusals of `bridge_call`, in its order).
fn runs_from_script(command: &Command, no_writes: bool, ctx: &Ctx<'_, '_>) -> bool {
    let read_only = no_writes || matches!(ctx.access, Access::Read(_));
    match command.name {
        "PING" | "ECHO" | "SELECT" => true,
        "PUBLISH" => !read_only,
        name if command.run.is_none() || refused_in_scripts(name) => false,
        _ => !(command.class == Class::Write && read_only || command.grows && ctx.over_maxmemory),
    }
}

fn refused_in_scripts(name: &str) -> bool {
    super::is_script_command(name)
        || crate::cmd::blocking::refused_in_scripts(name)
        || crate::cmd::sync::is_snapshot(name)
}

/// Redis's refusal of a script that declares flags (so is no `EVAL` of compatibility mode)
/// without `allow-oom` or `no-writes`, past `maxmemory`.
const SCRIPT_OOM: &str =
    "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'";

/// Whether a script or function that declares its flags may start: past `maxmemory` only if
/// it may (`allow-oom`, or it writes nothing); then its growing commands run too, as Redis
/// lets them.
pub fn may_run_past_maxmemory(ctx: &mut Ctx<'_, '_>, allowed: bool) -> Result<(), CmdError> {
    if !ctx.over_maxmemory {
        return Ok(());
    }
    if !allowed {
        return Err(CmdError::fixed(SCRIPT_OOM));
    }
    ctx.over_maxmemory = false;
    Ok(())
}

/// The arguments a script gave `redis.call` as a command's: strings as they are, numbers
/// as Redis writes them; anything else is refused.
fn call_argv(args: MultiValue) -> Result<Argv, &'static str> {
    let mut argv = Argv::new();
    for value in args {
        match value {
            Value::String(s) => argv.push(&s.as_bytes()),
            Value::Integer(i) => {
                let mut text = Vec::new();
                crate::num::format_double(i as f64, &mut text);
                argv.push(&text);
            }
            Value::Number(n) => {
                let mut text = Vec::new();
                crate::num::format_double(n, &mut text);
                argv.push(&text);
            }
            _ => return Err("Lua redis lib command arguments must be strings or integers"),
        }
    }
    Ok(argv)
}

/// `redis.call` and `redis.pcall`: runs one command on the script's context. Returns true
/// and the reply as Lua sees it, or false and an error table (the Lua side raises it for
/// `call`).
fn bridge_call(
    lua: &Lua,
    ctx: &mut Ctx<'_, '_>,
    state: &mut RunState,
    no_writes: bool,
    proto: Proto,
    args: MultiValue,
) -> mlua::Result<(bool, Value)> {
    let refuse = |text: &str| Ok((false, error_table(lua, text.as_bytes())?));
    let argv = match call_argv(args) {
        Ok(argv) => argv,
        Err(text) => return refuse(text),
    };
    if argv.is_empty() {
        return refuse("Please specify at least one argument for this redis lib call");
    }
    let Some((_, command)) = lookup(argv.get(0).unwrap_or_default()) else {
        return refuse("Unknown Redis command called from script");
    };
    if !command.arity_fits(argv.len()) {
        return refuse("Wrong number of args calling Redis command from script");
    }
    let mut reply = Vec::new();
    // Shown to monitors as Redis's `call()` shows it: a command that runs, whatever it
    // answers; none refused before it runs.
    if runs_from_script(command, no_writes, ctx) {
        state.monitored(ctx.layout.db, &argv);
    }
    match command.name {
        "PING" => {
            let mut out = ReplyWriter::new(&mut reply, proto);
            match argv.get(1) {
                Some(message) => out.bulk(message),
                None => out.simple("PONG"),
            }
        }
        "ECHO" => ReplyWriter::new(&mut reply, proto).bulk(argv.get(1).unwrap_or_default()),
        // The script's own database from here on; its caller's stays (Redis 7).
        "SELECT" => match crate::db::selected_db(argv.get(1).unwrap_or_default()) {
            Ok(db) => {
                ctx.layout = ctx.layout.in_db(db);
                ReplyWriter::new(&mut reply, proto).ok();
            }
            Err(text) => return Ok((false, error_table(lua, format!("-{text}").as_bytes())?)),
        },
        // Delivered when the script commits, as a notification is: the subscribers are the
        // front end's, so the script is told 0 receivers (Redis counts its own at once).
        "PUBLISH" => {
            if no_writes || matches!(ctx.access, Access::Read(_)) {
                return refuse("Write commands are not allowed from read-only scripts.");
            }
            let arg = |at: usize| argv.get(at).unwrap_or_default();
            ctx.notices.publish(arg(1), arg(2));
            ReplyWriter::new(&mut reply, proto).integer(0);
        }
        name if command.run.is_none() || refused_in_scripts(name) => {
            return refuse("This Redis command is not allowed from script");
        }
        _ => {
            let writes = command.class == Class::Write;
            if writes && (no_writes || matches!(ctx.access, Access::Read(_))) {
                return refuse("Write commands are not allowed from read-only scripts.");
            }
            // Past `maxmemory` when the script started (Redis's `pre_command_oom_state`), a
            // command that may grow the database is refused; the script may go on.
            if command.grows && ctx.over_maxmemory {
                return Ok((false, error_table(lua, format!("-{OOM_TEXT}").as_bytes())?));
            }
            match run_in(ctx, &argv, &mut ReplyWriter::new(&mut reply, proto)) {
                Ok(()) => state.dirty |= writes,
                Err(CmdError::Oom) => {
                    state.oom = true;
                    return Ok((false, error_table(lua, format!("-{OOM_TEXT}").as_bytes())?));
                }
                Err(err) => {
                    if matches!(err, CmdError::Abort(_)) {
                        state.dirty = true;
                    }
                    let text = format!("-{}", err.text());
                    return Ok((false, error_table(lua, text.as_bytes())?));
                }
            }
        }
    }
    let parsed = resp::parse_reply(&reply)
        .ok()
        .flatten()
        .map(|(value, _)| value)
        .unwrap_or(resp::Value::Null);
    if let resp::Value::Error(text) = &parsed {
        let mut dashed = b"-".to_vec();
        dashed.extend_from_slice(text);
        return Ok((false, error_table(lua, &dashed)?));
    }
    Ok((true, reply_to_lua(lua, &parsed, proto)?))
}

/// A command's reply as Lua sees it (redisProtocolToLuaType).
/// `proto` is the protocol the command replied in: RESP2's null bulk string and null array
/// are `false`, RESP3's null is `nil` (the parser reads `$-1` and `_` alike).
fn reply_to_lua(lua: &Lua, reply: &resp::Value, proto: Proto) -> mlua::Result<Value> {
    use resp::Value as R;
    let tagged = |tag: &str, value: Value| -> mlua::Result<Value> {
        let table = lua.create_table()?;
        table.raw_set(tag, value)?;
        Ok(Value::Table(table))
    };
    Ok(match reply {
        R::Integer(n) => Value::Number(*n as f64),
        R::Bulk(bytes) => Value::String(lua.create_string(bytes)?),
        R::Null if proto == Proto::Resp3 => Value::Nil,
        R::Null => Value::Boolean(false),
        R::NullArray => Value::Boolean(false),
        R::Simple(text) => tagged("ok", Value::String(lua.create_string(text)?))?,
        R::Error(text) => {
            let mut dashed = b"-".to_vec();
            dashed.extend_from_slice(text);
            error_table(lua, &dashed)?
        }
        R::Array(items) | R::Push(items) => {
            let table = lua.create_table_with_capacity(items.len(), 0)?;
            for (index, item) in items.iter().enumerate() {
                table.raw_set(index + 1, reply_to_lua(lua, item, proto)?)?;
            }
            Value::Table(table)
        }
        R::Map(pairs) => {
            let map = lua.create_table()?;
            for (key, value) in pairs {
                map.raw_set(
                    reply_to_lua(lua, key, proto)?,
                    reply_to_lua(lua, value, proto)?,
                )?;
            }
            tagged("map", Value::Table(map))?
        }
        R::Set(items) => {
            let set = lua.create_table()?;
            for item in items {
                set.raw_set(reply_to_lua(lua, item, proto)?, true)?;
            }
            tagged("set", Value::Table(set))?
        }
        R::Double(text) => {
            let d = crate::num::parse_f64(text).unwrap_or(f64::NAN);
            tagged("double", Value::Number(d))?
        }
        R::Boolean(b) => Value::Boolean(*b),
        R::BigNumber(text) => tagged("big_number", Value::String(lua.create_string(text)?))?,
        R::Verbatim(format, text) => {
            let inner = lua.create_table()?;
            inner.raw_set("string", lua.create_string(text)?)?;
            inner.raw_set("format", lua.create_string(format)?)?;
            tagged("verbatim_string", Value::Table(inner))?
        }
    })
}

/// C's `(long long)` cast of a double on x86-64, as `lua_tointeger` makes it: truncation,
/// and the "integer indefinite" value (i64::MIN) for NaN and anything out of range.
pub(super) fn c_cast_i64(d: f64) -> i64 {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if d.is_nan() || !(-TWO_63..TWO_63).contains(&d) {
        i64::MIN
    } else {
        d as i64
    }
}

/// Writes a script's return value as Redis's reply (luaReplyToRedisReply). `lua_proto` is
/// the protocol the script chose with `redis.setresp`.
fn write_reply(value: &Value, lua_proto: Proto, out: &mut ReplyWriter<'_>, depth: usize) {
    if depth > REPLY_DEPTH_MAX {
        out.error("ERR reached lua stack limit");
        return;
    }
    match value {
        Value::String(s) => out.bulk(&s.as_bytes()),
        Value::Boolean(b) => match lua_proto {
            Proto::Resp2 if *b => out.integer(1),
            Proto::Resp2 => out.null(),
            Proto::Resp3 => out.boolean(*b),
        },
        Value::Integer(i) => out.integer(*i),
        Value::Number(n) => out.integer(c_cast_i64(*n)),
        Value::Table(table) => write_table(table, lua_proto, out, depth),
        _ => out.null(),
    }
}

fn write_table(table: &Table, lua_proto: Proto, out: &mut ReplyWriter<'_>, depth: usize) {
    let field = |name: &str| table.raw_get::<Value>(name).unwrap_or(Value::Nil);
    if let Value::String(err) = field("err") {
        out.error_bytes(&err.as_bytes());
        return;
    }
    if let Value::String(ok) = field("ok") {
        let text: String = String::from_utf8_lossy(&ok.as_bytes())
            .chars()
            .map(|c| if c == '\r' || c == '\n' { ' ' } else { c })
            .collect();
        out.simple(&text);
        return;
    }
    if let Value::Integer(_) | Value::Number(_) = field("double") {
        let d = match field("double") {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => unreachable!("matched a number"),
        };
        out.double(d);
        return;
    }
    if let Value::String(big) = field("big_number") {
        // A big number travels as a bulk string: RESP2's form (RESP3 callers get it too).
        out.bulk(&big.as_bytes());
        return;
    }
    if let Value::Table(verbatim) = field("verbatim_string")
        && let (Ok(Value::String(format)), Ok(Value::String(text))) = (
            verbatim.raw_get::<Value>("format"),
            verbatim.raw_get::<Value>("string"),
        )
    {
        out.verbatim(
            &String::from_utf8_lossy(&format.as_bytes()),
            &String::from_utf8_lossy(&text.as_bytes()),
        );
        return;
    }
    if let Value::Table(map) = field("map") {
        let count = map.pairs::<Value, Value>().map_while(Result::ok).count();
        out.map(count);
        write_pairs(&map, count, lua_proto, out, depth, true);
        return;
    }
    if let Value::Table(set) = field("set") {
        let count = set.pairs::<Value, Value>().map_while(Result::ok).count();
        out.set(count);
        write_pairs(&set, count, lua_proto, out, depth, false);
        return;
    }
    // Redis's array: the elements from index 1 up to the first nil.
    let length = (1..)
        .take_while(|&index| !matches!(table.raw_get::<Value>(index), Ok(Value::Nil) | Err(_)))
        .count();
    out.array(length);
    for index in 1..=length {
        let element = table.raw_get::<Value>(index).unwrap_or(Value::Nil);
        write_reply(&element, lua_proto, out, depth + 1);
    }
}

/// Writes the `count` pairs of a map (`with_values`) or members of a set that a first walk
/// counted, walking the table again (in the same order: nothing changes it between). The
/// elements are never collected: mlua keeps every Lua value Rust holds in a stack of about
/// 8,000 slots, and a table's elements held at once were cut short there. Whatever the
/// second walk cannot give is written as nulls, so the reply keeps the count it announced.
fn write_pairs(
    table: &Table,
    count: usize,
    lua_proto: Proto,
    out: &mut ReplyWriter<'_>,
    depth: usize,
    with_values: bool,
) {
    let mut written = 0;
    let pairs = table.pairs::<Value, Value>().map_while(Result::ok);
    for (key, value) in pairs.take(count) {
        write_reply(&key, lua_proto, out, depth + 1);
        if with_values {
            write_reply(&value, lua_proto, out, depth + 1);
        }
        written += 1;
    }
    for _ in written..count {
        out.null();
        if with_values {
            out.null();
        }
    }
}

/// `math.random` as Lua 5.1 defines it, over the call's generator (Redis replaces libc's
/// `rand` with its own generator for the same reason: the same on every machine).
fn math_random(lua: &Lua, rng: &AtomicU64, args: &MultiValue) -> mlua::Result<f64> {
    let mut state = rng
        .load(Ordering::Relaxed)
        .wrapping_add(0x9e37_79b9_7f4a_7c15);
    rng.store(state, Ordering::Relaxed);
    state = (state ^ (state >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    state = (state ^ (state >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    state ^= state >> 31;
    let r = (state >> 11) as f64 / (1u64 << 53) as f64;
    let int_arg = |index: usize| -> mlua::Result<f64> {
        match args.get(index) {
            Some(Value::Integer(i)) => Ok(*i as f64),
            Some(Value::Number(n)) => Ok(n.trunc()),
            other => Err(mlua::Error::runtime(format!(
                "{}bad argument #{} to 'random' (number expected, got {})",
                caller_position(lua),
                index + 1,
                other.map_or("no value", super::bit::lua_type_name)
            ))),
        }
    };
    let empty = |index: usize| {
        mlua::Error::runtime(format!(
            "{}bad argument #{index} to 'random' (interval is empty)",
            caller_position(lua)
        ))
    };
    match args.len() {
        0 => Ok(r),
        1 => {
            let upper = int_arg(0)?;
            if upper < 1.0 {
                return Err(empty(1));
            }
            Ok((r * upper).floor() + 1.0)
        }
        2 => {
            let (lower, upper) = (int_arg(0)?, int_arg(1)?);
            if lower > upper {
                return Err(empty(2));
            }
            Ok((r * (upper - lower + 1.0)).floor() + lower)
        }
        _ => Err(mlua::Error::runtime(format!(
            "{}wrong number of arguments",
            caller_position(lua)
        ))),
    }
}

/// The Lua side of the sandbox, run once when the VM starts, with [`PRELUDE_END`] after it.
/// It receives the Rust pieces and returns `new_env`, `runner`, the `redis` table and
/// `library_parts`.
const PRELUDE: &str = r##"
local parts = ...
local bridge, handler, spent = parts.bridge, parts.handler, parts.spent
local error_text = parts.error_text
local cjson, cmsgpack, bit, unwrap_error = parts.cjson, parts.cmsgpack, parts.bit, parts.unwrap_error
local G = _G
local type, error, select, tostring, rawget, rawset, setmetatable, getmetatable, unpack =
      type, error, select, tostring, rawget, rawset, setmetatable, getmetatable, unpack
local setfenv, raw_pcall, raw_xpcall, raw_loadstring, raw_load =
      setfenv, pcall, xpcall, loadstring, load
local resume = coroutine.resume

local READONLY = "Attempt to modify a readonly table"
local readonly = setmetatable({}, {__mode = "k"})
local function refuse_write() error(READONLY, 2) end
local function protect(lib)
  local proxy = setmetatable({}, {__index = lib, __newindex = refuse_write, __metatable = false})
  readonly[proxy] = true
  return proxy
end

local SPENT = "the script was stopped"
-- Every protected call raises the budget's error again as it returns, once it is spent.
local function after_protected(...)
  if spent() then error(SPENT, 0) end
  return ...
end

-- Redis's pcall: an error table becomes its message.
local function pcall_results(ok, ...)
  if spent() then error(SPENT, 0) end
  if ok then return true, ... end
  local err = unwrap_error((...))
  if type(err) == "table" then
    local message = rawget(err, "err")
    if type(message) == "string" then err = message end
  end
  return false, err
end
G.pcall = function(f, ...) return pcall_results(raw_pcall(f, ...)) end
G.xpcall = function(f, h) return after_protected(raw_xpcall(f, h)) end
coroutine.resume = function(co, ...) return after_protected(resume(co, ...)) end

G.rawset = function(t, k, v)
  if readonly[t] then error(READONLY, 0) end
  return rawset(t, k, v)
end
-- Redis's readonly tables refuse a new metatable as they refuse a write (Lua would say
-- "cannot change a protected metatable").
G.setmetatable = function(t, mt)
  if readonly[t] then error(READONLY, 0) end
  return setmetatable(t, mt)
end
for _, name in ipairs({"insert", "remove", "sort"}) do
  local f = table[name]
  table[name] = function(t, ...)
    if readonly[t] then error(READONLY, 0) end
    return f(t, ...)
  end
end
-- Redis compiles every chunk as text (it took the bytecode loader out of its Lua), so a
-- chunk that starts with ESC, bytecode's mark, is refused by the parser. Lua 5.1 would
-- load it as bytecode, which nothing checks: a space in front makes the parser read it,
-- with Redis's error ("unexpected symbol near 'char(27)'") on the same line. The loaders
-- check their arguments first (guards.rs), so that errors name them as the script did.
local chunk_refusals = parts.chunk_refusals
local BYTECODE_MARK = 27
G.loadstring = function(...)
  local refused = chunk_refusals.loadstring(...)
  if refused then error(refused, 2) end
  local text, name = ...
  if type(text) == "string" and string.byte(text, 1) == BYTECODE_MARK then
    if name == nil then name = text end
    text = " " .. text
  end
  local f, err = raw_loadstring(text, name)
  if f and bridge.env then setfenv(f, bridge.env) end
  return f, err
end
-- A reader whose first piece starts with ESC gives a space before it.
local function text_reader(reader)
  local first, held = true, nil
  return function()
    if held then
      local piece = held
      held = nil
      return piece
    end
    local piece = reader()
    if first then
      first = false
      if type(piece) == "string" and string.byte(piece, 1) == BYTECODE_MARK then
        held = piece
        return " "
      end
    end
    return piece
  end
end
G.load = function(...)
  local refused = chunk_refusals.load(...)
  if refused then error(refused, 2) end
  local reader, name = ...
  local f, err = raw_load(text_reader(reader), name)
  if f and bridge.env then setfenv(f, bridge.env) end
  return f, err
end

-- The pattern functions are pattern.rs's port of Lua 5.1's, which the watch can stop. Each
-- first asks its guard (guards.rs) whether its arguments are good and its pattern cannot
-- nest too deeply, and raises the answer at its caller; what the function itself raises is
-- raised again at the caller too, where Lua would place it.
local pattern_refusals, patterns = parts.pattern_refusals, parts.patterns
-- Tail-called by a wrapper, which leaves its caller at level 3.
local function raised_at_caller(ok, ...)
  if ok then return ... end
  error((...), 3)
end
-- `find` and `match` call their cores, which answer true and the results, or false and
-- the message, unprotected: a protected call would fail a debug build's API check on a
-- match of twenty or more captures.
for _, name in ipairs({"find", "match"}) do
  local core, refusal = patterns[name .. "_core"], pattern_refusals[name]
  string[name] = function(...)
    local refused = refusal(...)
    if refused then error(refused, 2) end
    return raised_at_caller(core(...))
  end
end
do
  local raw_gmatch, refusal = patterns.gmatch, pattern_refusals.gmatch
  -- Good arguments leave gmatch nothing to raise: its iterator matches when called.
  string.gmatch = function(...)
    local refused = refusal(...)
    if refused then error(refused, 2) end
    return raw_gmatch(...)
  end
end
do
  local raw_gsub, refusal = patterns.gsub, pattern_refusals.gsub
  string.gsub = function(...)
    local refused = refusal(...)
    if refused then error(refused, 2) end
    local text, pattern, replacement = ...
    local callback
    if type(replacement) == "function" then
      callback = replacement
    elseif type(replacement) == "table" and getmetatable(replacement) ~= nil then
      callback = function(key) return replacement[key] end
    else
      return raised_at_caller(raw_pcall(raw_gsub, ...))
    end
    -- What the script's own replacement code raises goes on unchanged, not re-placed.
    local callback_failed = false
    local function replace(...)
      local ok, value = raw_pcall(callback, ...)
      if not ok then
        callback_failed = true
        error(value, 0)
      end
      return value
    end
    local ok, result, count = raw_pcall(raw_gsub, text, pattern, replace, select(4, ...))
    if ok then return result, count end
    if callback_failed then error(result, 0) end
    error(result, 2)
  end
end

math.random = parts.random
math.randomseed = parts.randomseed

-- redis.*
local redis = parts.redis
function redis.error_reply(...)
  if select("#", ...) ~= 1 or type((...)) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  local text = ...
  if text:sub(1, 1) ~= "-" then text = "-" .. text end
  return {err = error_text(text)}
end
function redis.status_reply(...)
  if select("#", ...) ~= 1 or type((...)) ~= "string" then
    return {err = "ERR wrong number or type of arguments"}
  end
  return {ok = (...)}
end
redis.LOG_DEBUG, redis.LOG_VERBOSE, redis.LOG_NOTICE, redis.LOG_WARNING = 0, 1, 2, 3
redis.REPL_NONE, redis.REPL_AOF, redis.REPL_SLAVE, redis.REPL_REPLICA, redis.REPL_ALL =
  0, 1, 2, 2, 3
function redis.replicate_commands() return true end
function redis.breakpoint() return false end
function redis.debug() end
redis.REDIS_VERSION, redis.REDIS_VERSION_NUM = parts.version, parts.version_num

-- What scripts may not reach.
for _, name in ipairs({"print", "dofile", "loadfile", "setfenv", "getfenv", "newproxy",
                       "module", "require", "package", "os", "io", "debug"}) do
  G[name] = nil
end

local string_lib = protect(string)
G.string = string_lib
G.table = protect(table)
G.math = protect(math)
G.coroutine = protect(coroutine)
G.redis = protect(redis)
G.cjson = protect(cjson)
G.bit = protect(bit)
G.cmsgpack = protect(cmsgpack)
-- getmetatable("") shows a read-only table whose __index is the read-only string library.
getmetatable("").__metatable = protect({__index = string_lib})

local env_meta = {
  __index = function(env, name)
    if name == "_G" then return env end
    local value = G[name]
    if value == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return value
  end,
  __newindex = refuse_write,
}
-- getmetatable(_G) shows a read-only view of the globals' metatable, as Redis shows its own
-- read-only one: a script can read it, never change it.
env_meta.__metatable = protect(env_meta)
local function new_env(keys, argv)
  local env = setmetatable({KEYS = keys, ARGV = argv}, env_meta)
  readonly[env] = true
  bridge.env = env
  return env
end
-- A script is called alone; a function with its keys and arguments.
local function runner(f, keys, argv)
  if keys == nil then
    local ok, value = raw_xpcall(f, handler)
    return ok, value
  end
  local ok, value = raw_xpcall(function() return f(keys, argv) end, handler)
  return ok, value
end
"##;

/// The prelude's last lines: what the libraries' part of the sandbox (`library::PRELUDE`,
/// loaded on a node's first library) needs of the prelude's own.
const PRELUDE_END: &str = "local function library_parts() return {G = G, redis = redis, \
    readonly = readonly, refuse_write = refuse_write, protect = protect, raw_pcall = raw_pcall, \
    setfenv = setfenv} end
return new_env, runner, redis, library_parts
";

#[cfg(test)]
mod tests {
    use super::*;

    /// Slow intervals shrink eightfold at once, down to one instruction; quick ones double
    /// back, up to the most; the ones near the target stay.
    #[test]
    fn the_hook_interval_follows_how_long_its_instructions_take() {
        assert_eq!(next_hook_interval(1000, 5_000), 125);
        assert_eq!(next_hook_interval(125, 5_000), 15);
        assert_eq!(next_hook_interval(2, 5_000), 1);
        assert_eq!(next_hook_interval(1, 5_000), 1);
        assert_eq!(next_hook_interval(1, 10), 2);
        assert_eq!(next_hook_interval(600, 10), HOOK_INTERVAL_MAX);
        assert_eq!(next_hook_interval(HOOK_INTERVAL_MAX, 0), HOOK_INTERVAL_MAX);
        assert_eq!(next_hook_interval(300, HOOK_PERIOD_TARGET_US), 300);
    }

    #[test]
    fn error_texts_follow_lua_push_error_buff() {
        assert_eq!(
            lua_error_text(b"-WRONGTYPE Operation"),
            b"WRONGTYPE Operation"
        );
        assert_eq!(lua_error_text(b"-oops"), b"ERR oops");
        assert_eq!(lua_error_text(b"-MY oops\r\n"), b"MY oops");
        assert_eq!(lua_error_text(b"plain words"), b"ERR plain words");
    }

    #[test]
    fn casts_follow_c_on_x86() {
        assert_eq!(c_cast_i64(3.99), 3);
        assert_eq!(c_cast_i64(-3.99), -3);
        assert_eq!(c_cast_i64(1e20), i64::MIN);
        assert_eq!(c_cast_i64(f64::NAN), i64::MIN);
    }
}
