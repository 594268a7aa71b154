//! The Redis-compatible data model: every key, value and index lives in the group's segment
//! and changes only through txns, so redo capture, replication, the dedup table, state
//! transfer and the checkers work on it unchanged, and a backup never runs a command.
//!
//! - [`resp`] and [`num`]: the wire protocol and Redis's number formats.
//! - [`alloc`]: the allocator of variable-size blocks in the segment; [`dict`]: the hash
//!   table that grows without a pause; [`db`]: the database's layout and key entries.
//! - [`cmd`]: the command table and every data command; [`model`]: the store's
//!   `DataModel` over them; [`wire`]: what a connection sends in a call;
//!   [`session`]: a connection's state (protocol, `MULTI`, `WATCH`).

pub mod alloc;
pub mod cmd;
pub mod db;
pub mod dict;
pub mod glob;
pub mod mem;
pub mod model;
pub mod num;
pub mod resp;
pub mod session;
pub mod wire;

pub use model::{PROC_EXEC, PROC_WATCH, RedisModel};
