//! The Redis-compatible data model: every key, value and index lives in the group's segment
//! and changes only through txns, so redo capture, replication, the dedup table, state
//! transfer and the checkers work on it unchanged, and a backup never runs a command.
//!
//! - [`resp`] and [`num`]: the wire protocol and Redis's number formats.
//! - [`alloc`]: the allocator of variable-size blocks in the segment; [`dict`]: the hash
//!   table that grows without a pause; [`db`]: the database's layout and key entries.
//! - [`cmd`]: the command table and every data command; [`model`]: the store's
//!   `DataModel` over them; [`wire`]: what a connection sends in a call;
//!   [`session`]: a connection's state (protocol, `MULTI`, `WATCH`); [`params`]: what
//!   `CONFIG SET` changes; [`pubsub`]: a node's subscriptions and what a publication
//!   delivers (nothing of it is data).

pub mod alloc;
pub mod cmd;
pub mod db;
pub mod dict;
pub mod glob;
pub mod mem;
pub mod model;
pub mod notify;
pub mod num;
pub mod params;
pub mod pubsub;
pub mod rdb;
pub mod resp;
pub mod session;
pub mod slot;
pub mod stats;
pub mod wire;

pub use model::{PROC_EXEC, PROC_WATCH, RedisModel};

/// The stack a thread that runs scripts or decodes client input must have: 8 MiB.
///
/// Every recursion a script or a client can drive is bounded; this holds the deepest input
/// each bound accepts, and the most a script can stack up of them, about four times over.
/// What each takes, measured as the smallest thread stack it runs on, in the profile tests run
/// in (opt-level 1, dependencies 2) and, in brackets, in release (fat LTO, no smaller):
///
/// - `cjson.decode` at its nesting limit (1,000): 1.3 KiB a level, 1.3 MiB (1.4 MiB);
/// - `cjson.encode` at its limit (1,000): 0.65 KiB a level, 0.65 MiB (0.6 MiB);
/// - a script's reply nested to the reply limit (1,000): 0.55 KiB a level, 0.55 MiB (0.6 MiB);
/// - nesting up to Lua's limit of 200 C calls: 0.15 MiB (0.15 MiB) for `pcall`s or
///   coroutines, 0.65 MiB (0.65 MiB) for `string.gsub` callbacks, each of which holds an
///   8 KiB buffer on the stack;
/// - a pattern at the matcher's bound (200 calls): 8 KiB; `cmsgpack.unpack` at Redis's
///   nesting limit (3,999): nothing, it is iterative.
///
/// The most a script can stack up is `cjson.decode` at its limit at the bottom of `gsub`
/// callbacks nested to Lua's limit: 1.9 MiB (2.0 MiB). The default thread stack (2 MiB) is
/// not enough for that, and a frame as large as gsub's buffer can jump a guard page: an
/// overflow then is a segmentation fault, not Rust's clean abort.
pub const SCRIPT_THREAD_STACK_BYTES: usize = 8 << 20;
