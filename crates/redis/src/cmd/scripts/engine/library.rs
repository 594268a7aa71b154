//! Function libraries in the VM (function_lua.c): a library's code loading in its sandbox,
//! and one of its functions running.
//!
//! # Loading
//!
//! A library's code (after its shebang line, whose line feed it keeps, so that errors count
//! lines as the user does) compiles under the chunk name `@user_function` and runs once, in
//! an environment of its own where nothing exists but `redis`, and of `redis` nothing but
//! `register_function`, `log`, the log levels and the version: anything else is Redis's
//! "Script attempted to access nonexistent global variable". `redis.register_function`
//! checks its arguments in Redis's order and words. The code runs under
//! [`LOAD_INSTRUCTION_BUDGET`] (Redis stops a load after 500 ms, "FUNCTION LOAD timeout"),
//! unwatched: `SCRIPT KILL` does not reach it.
//!
//! A load is deterministic (no clock, no generator, no data), so every node that loads the
//! same code gets the same functions: a node loads a library again, from the segment's
//! copy, when its cache lacks it (a backup's first `FCALL_RO`, a new primary's first
//! `FCALL`). Only an exhausted Lua memory limit could fail one node's load and not
//! another's; that `FCALL` then answers the load's error.
//!
//! # Running
//!
//! The functions keep the library's environment, which after the load falls through to the
//! globals as a script's does (without `KEYS` and `ARGV`: a function is called with its keys
//! and arguments as two tables). A function runs like a script ([`Vm::execute`]): the same
//! budgets, the same `redis` table, the same rollback. As in Redis, what the library's code
//! keeps in its locals lives as long as the loaded library: in this node's cache.

use mlua::{Function, LuaString, Table, Value};

use super::{CmdError, Ctx, ReplyWriter, ScriptEngine, Sha, Target, Vm, text_chunk};

/// The chunk name library code compiles under (errors say "user_function:LINE:").
pub const FUNCTION_CHUNK: &str = "@user_function";
/// The most functions one library may register (tandem's bound; Redis has none).
pub const FUNCTIONS_PER_LIBRARY_MAX: usize = 1000;
/// Lua instructions a library's code may run as it loads: about what pure Lua runs in the
/// 500 ms Redis allows a load. An instruction budget, not a clock, so that a load that
/// succeeded on one node succeeds on every node.
const LOAD_INSTRUCTION_BUDGET: u64 = 50_000_000;

/// A function a library registered as it loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registered {
    pub name: Vec<u8>,
    /// `None` where none was given (`FUNCTION LIST` answers a null).
    pub description: Option<Vec<u8>>,
    /// Bit `i` is flag `FUNCTION_FLAGS[i]`.
    pub flags: u8,
}

/// The flags a function may declare, in the order Redis lists them (script.c's
/// `scripts_flags_def`): flag `i` is bit `i` of [`Registered::flags`].
pub const FUNCTION_FLAGS: [&str; 5] = [
    "no-writes",
    "allow-oom",
    "allow-stale",
    "no-cluster",
    "allow-cross-slot-keys",
];

/// The bit of `no-writes` in [`Registered::flags`].
pub const NO_WRITES: u8 = 1;
/// The bit of `allow-oom` in [`Registered::flags`].
pub const ALLOW_OOM: u8 = 2;

/// A library's code as the segment holds it, and the SHA-1 of that code: the cache's key.
#[derive(Clone, Copy, Debug)]
pub struct LibraryRef<'c> {
    pub sha: Sha,
    pub code: &'c [u8],
}

/// A loaded library: the environment its code ran in, and its functions by name.
#[derive(Clone, Debug)]
pub(super) struct Loaded {
    env: Table,
    functions: Vec<(Vec<u8>, Function)>,
}

impl ScriptEngine {
    /// Loads `library` afresh (as `FUNCTION LOAD` and `FUNCTION RESTORE` do) and caches it:
    /// the functions it registered, in order, or Redis's error ("Error compiling function",
    /// "Error registering functions").
    pub fn load_library(&mut self, library: LibraryRef<'_>) -> Result<Vec<Registered>, CmdError> {
        let vm = self.vm()?;
        let (loaded, registered) = vm.load(library.code)?;
        vm.cache_library(library.sha, loaded);
        Ok(registered)
    }

    /// Whether the library whose code has SHA-1 `sha` is loaded (else [`Self::call_function`]
    /// needs it loaded first, from the segment's copy, with [`Self::load_library`]).
    pub fn has_library(&self, sha: &Sha) -> bool {
        self.vm
            .as_ref()
            .is_some_and(|vm| vm.libraries.contains_key(sha))
    }

    /// Runs function `name` of the loaded library whose code has SHA-1 `sha`, with `keys` and
    /// `args`, writing its reply to `out` (`no_writes`: refuse its write commands).
    #[allow(clippy::too_many_arguments)]
    pub fn call_function(
        &mut self,
        ctx: &mut Ctx<'_, '_>,
        sha: &Sha,
        name: &[u8],
        keys: &[&[u8]],
        args: &[&[u8]],
        no_writes: bool,
        out: &mut ReplyWriter<'_>,
    ) -> Result<(), CmdError> {
        let budgets = (self.instruction_budget, self.memory_limit);
        let vm = self.vm()?;
        let loaded = vm.libraries.get(sha).cloned();
        let callback = loaded.as_ref().and_then(|loaded| {
            let found = loaded.functions.iter().find(|(known, _)| known == name);
            found.map(|(_, callback)| (callback, &loaded.env))
        });
        let Some((callback, env)) = callback else {
            return Err(CmdError::fixed("ERR Function not found"));
        };
        let target = Target::Function { callback, env };
        let result = vm.execute(ctx, target, name, keys, args, no_writes, budgets, out);
        vm.maybe_forget_compiled(budgets.1);
        result
    }

    /// Drops every loaded library (`FUNCTION FLUSH`): only a cache.
    pub fn forget_libraries(&mut self) {
        if let Some(vm) = &mut self.vm {
            vm.libraries.clear();
            let _ = vm.lua.gc_collect();
        }
    }
}

impl Vm {
    /// The prelude's `load_library`, made the first time a library loads.
    fn load_library(&mut self) -> Result<Function, CmdError> {
        if let Some(load_library) = &self.load_library {
            return Ok(load_library.clone());
        }
        let made = (|| -> mlua::Result<Function> {
            let parts: Table = self.library_parts.call(())?;
            let setup = self.lua.load(PRELUDE).set_name("=tandem_functions");
            setup.call((parts, FUNCTIONS_PER_LIBRARY_MAX))
        })()
        .map_err(|err| CmdError::owned(format!("ERR the Lua VM failed: {err}")))?;
        self.load_library = Some(made.clone());
        Ok(made)
    }

    fn cache_library(&mut self, sha: Sha, loaded: Loaded) {
        if self.libraries.len() >= super::COMPILED_MAX {
            self.libraries.clear();
        }
        self.libraries.insert(sha, loaded);
    }

    /// Compiles and runs library `code` in the load sandbox: the library and what it
    /// registered, or Redis's error.
    fn load(&mut self, code: &[u8]) -> Result<(Loaded, Vec<Registered>), CmdError> {
        // The shebang line ends at the first line feed (functions.c), which the body keeps.
        let body_at = code.iter().position(|&b| b == b'\n').unwrap_or(code.len());
        let chunk = self
            .lua
            .load(text_chunk(&code[body_at..]).as_ref())
            .set_name(FUNCTION_CHUNK)
            .set_mode(mlua::chunk::ChunkMode::Text)
            .into_function()
            .map_err(|err| {
                let message = match &err {
                    mlua::Error::SyntaxError { message, .. } => message.clone(),
                    other => other.to_string(),
                };
                CmdError::owned(format!("ERR Error compiling function: {message}"))
            })?;
        self.reset_for_run(LOAD_INSTRUCTION_BUDGET, 0);
        self.budget
            .run
            .store(0, std::sync::atomic::Ordering::Relaxed);
        self.hook
            .install(&self.lua, super::HOOK_INTERVAL_START)
            .map_err(|err| CmdError::owned(format!("ERR the Lua VM failed: {err}")))?;
        let outcome: mlua::Result<(bool, Value, Table, Table)> = self.load_library()?.call(chunk);
        let registering = |text: String| {
            let _ = self.lua.gc_collect();
            CmdError::owned(format!("ERR Error registering functions: {text}"))
        };
        if self.budget.spent.load(std::sync::atomic::Ordering::Relaxed) {
            return Err(registering("ERR FUNCTION LOAD timeout".into()));
        }
        let (ok, err, env, list) = match outcome {
            Ok(outcome) => outcome,
            Err(err) => return Err(registering(format!("ERR {}", super::error_message(&err)))),
        };
        if !ok {
            return Err(registering(load_error_text(&self.lua, err)));
        }
        registrations(env, &list).map_err(|err| registering(format!("ERR {err}")))
    }
}

/// The library and its registrations, as the prelude's `load_library` listed them.
fn registrations(env: Table, list: &Table) -> mlua::Result<(Loaded, Vec<Registered>)> {
    let count = list.raw_len();
    let mut functions = Vec::with_capacity(count);
    let mut registered = Vec::with_capacity(count);
    for index in 1..=count {
        let entry: Table = list.raw_get(index)?;
        let name: LuaString = entry.raw_get("name")?;
        let description: Option<LuaString> = entry.raw_get("description")?;
        let flags: u8 = entry.raw_get("flags")?;
        let callback: Function = entry.raw_get("callback")?;
        let name = name.as_bytes().to_vec();
        functions.push((name.clone(), callback));
        registered.push(Registered {
            name,
            description: description.map(|text| text.as_bytes().to_vec()),
            flags,
        });
    }
    Ok((Loaded { env, functions }, registered))
}

/// What Redis's `luaExtractErrorInformation` makes of an error a library's code raised as it
/// loaded: "ERR " and the text of a string (or number), an error table's `err`.
fn load_error_text(lua: &mlua::Lua, err: Value) -> String {
    match err {
        Value::Table(table) => match table.raw_get::<Value>("err") {
            Ok(Value::String(text)) => String::from_utf8_lossy(&text.as_bytes()).into_owned(),
            // Redis prints a null message with glibc's "%s".
            _ => "(null)".to_string(),
        },
        Value::Error(err) => match err.downcast_ref::<super::RaisedReply>() {
            Some(super::RaisedReply(text)) => text.clone(),
            None => format!("ERR {}", super::error_message(&err)),
        },
        other @ (Value::String(_) | Value::Integer(_) | Value::Number(_)) => {
            match lua.coerce_string(other) {
                Ok(Some(text)) => format!("ERR {}", String::from_utf8_lossy(&text.as_bytes())),
                _ => "(null)".to_string(),
            }
        }
        _ => "(null)".to_string(),
    }
}

/// The libraries' part of the sandbox, run on a node's first library with the prelude's
/// pieces (`library_parts` in the engine's `PRELUDE`) and [`FUNCTIONS_PER_LIBRARY_MAX`]:
/// `redis.register_function` and the load sandbox. It returns `load_library(chunk)`, which
/// runs a library's compiled code and answers whether it ran, what it raised, its
/// environment and the list of what it registered (`name`, `description`, `flags`,
/// `callback`).
const PRELUDE: &str = r##"
local parts, functions_max = ...
local G, redis, readonly, refuse_write = parts.G, parts.redis, parts.readonly, parts.refuse_write
local raw_pcall, setfenv, protect = parts.raw_pcall, parts.setfenv, parts.protect
local next, tostring, type, error, select, setmetatable =
      next, tostring, type, error, select, setmetatable
local string_lower, string_byte = string.lower, string.byte

-- Functions (function_lua.c).
local FUNCTION_FLAGS = {["no-writes"] = 1, ["allow-oom"] = 2, ["allow-stale"] = 4,
                        ["no-cluster"] = 8, ["allow-cross-slot-keys"] = 16}
-- What the library loading now registers: {names = {}, list = {}}; nil between loads.
local registering = nil

local function refuse_registration(text) error({err = "ERR " .. text}, 0) end
-- What Lua's lua_isstring accepts, and luaGetStringSds reads.
local function is_text(value)
  local kind = type(value)
  return kind == "string" or kind == "number"
end
-- functionsVerifyName: letters, digits and underscores, at least one.
local function valid_function_name(name)
  if #name == 0 then return false end
  for i = 1, #name do
    local b = string_byte(name, i)
    if not (b == 95 or (b >= 48 and b <= 57) or (b >= 65 and b <= 90) or (b >= 97 and b <= 122)) then
      return false
    end
  end
  return true
end
local function function_flags(list)
  local flags, j = 0, 1
  while true do
    local flag = list[j]
    if flag == nil then return flags end
    local bit = is_text(flag) and FUNCTION_FLAGS[string_lower(tostring(flag))]
    if not bit then refuse_registration("unknown flag given") end
    if flags % (2 * bit) < bit then flags = flags + bit end
    j = j + 1
  end
end
-- The table form, read in the order `next` walks it, as Redis's lua_next does.
local function named_registration(options)
  if type(options) ~= "table" then
    refuse_registration("calling redis.register_function with a single argument is only " ..
      "applicable to Lua table (representing named arguments).")
  end
  local name, description, callback, flags = nil, nil, nil, 0
  for key, value in next, options do
    if not is_text(key) then
      refuse_registration("named argument key given to redis.register_function is not a string")
    end
    local option = string_lower(tostring(key))
    if option == "function_name" then
      if not is_text(value) then
        refuse_registration("function_name argument given to redis.register_function must be a string")
      end
      name = tostring(value)
    elseif option == "description" then
      if not is_text(value) then
        refuse_registration("description argument given to redis.register_function must be a string")
      end
      description = tostring(value)
    elseif option == "callback" then
      if type(value) ~= "function" then
        refuse_registration("callback argument given to redis.register_function must be a function")
      end
      callback = value
    elseif option == "flags" then
      if type(value) ~= "table" then
        refuse_registration("flags argument to redis.register_function must be a table " ..
          "representing function flags")
      end
      flags = function_flags(value)
    else
      refuse_registration("unknown argument given to redis.register_function")
    end
  end
  if name == nil then refuse_registration("redis.register_function must get a function name argument") end
  if callback == nil then refuse_registration("redis.register_function must get a callback argument") end
  return name, description, callback, flags
end
local function register_function(...)
  if registering == nil then
    refuse_registration("redis.register_function can only be called on FUNCTION LOAD command")
  end
  local argc = select("#", ...)
  if argc < 1 or argc > 2 then refuse_registration("wrong number of arguments to redis.register_function") end
  local name, description, callback, flags
  if argc == 1 then
    name, description, callback, flags = named_registration((...))
  else
    local first, second = ...
    if not is_text(first) then refuse_registration("first argument to redis.register_function must be a string") end
    if type(second) ~= "function" then
      refuse_registration("second argument to redis.register_function must be a function")
    end
    name, callback, flags = tostring(first), second, 0
  end
  if not valid_function_name(name) then
    refuse_registration("Library names can only contain letters, numbers, or underscores(_) and " ..
      "must be at least one character long")
  end
  if registering.names[name] then refuse_registration("Function already exists in the library") end
  if #registering.list >= functions_max then
    refuse_registration("a library may register at most " .. functions_max .. " functions")
  end
  registering.names[name] = true
  registering.list[#registering.list + 1] =
    {name = name, description = description, callback = callback, flags = flags}
end

-- What a library's code sees of `redis` as it loads; anything else is a nonexistent global.
local load_api = {register_function = register_function, log = redis.log,
  LOG_DEBUG = redis.LOG_DEBUG, LOG_VERBOSE = redis.LOG_VERBOSE, LOG_NOTICE = redis.LOG_NOTICE,
  LOG_WARNING = redis.LOG_WARNING, REDIS_VERSION = redis.REDIS_VERSION,
  REDIS_VERSION_NUM = redis.REDIS_VERSION_NUM}
local load_redis = setmetatable({}, {
  __index = function(_, name)
    local value = load_api[name]
    if value == nil then
      error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
    end
    return value
  end,
  __newindex = refuse_write,
  __metatable = false,
})
readonly[load_redis] = true

-- A library's environment: while its code loads, `redis` (the load API) alone; afterwards,
-- for its functions, the globals, read-only, as a script's environment.
local loading = setmetatable({}, {__mode = "k"})
local library_meta = {
  __index = function(env, name)
    if loading[env] then
      if name == "redis" then return load_redis end
    else
      if name == "_G" then return env end
      local value = G[name]
      if value ~= nil then return value end
    end
    error("Script attempted to access nonexistent global variable '" .. tostring(name) .. "'", 2)
  end,
  __newindex = refuse_write,
}
-- getmetatable(_G) in a function shows a read-only view, as in a script (engine.rs).
library_meta.__metatable = protect(library_meta)
local function load_library(chunk)
  local env = setmetatable({}, library_meta)
  readonly[env] = true
  setfenv(chunk, env)
  loading[env] = true
  registering = {names = {}, list = {}}
  local ok, err = raw_pcall(chunk)
  loading[env] = nil
  local list = registering.list
  registering = nil
  return ok, err, env, list
end
return load_library
"##;
