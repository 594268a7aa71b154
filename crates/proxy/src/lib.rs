//! `tandem proxy`: a local process that speaks RESP to applications and tandem's own protocol
//! to the cluster, so unmodified Redis clients (redis-cli, redis-py, go-redis, Jedis) get what
//! the client stub gives Rust programs: every command runs exactly once, and a failover shows
//! them a latency bump, never an error (DESIGN.md, "Seamless switchover"; seed 004, 4.1-4.4).
//!
//! - [`conn`]: one application connection, sans-I/O (the session, pipelining into units,
//!   replies in order). The simulator can drive it.
//! - [`route`]: which group runs each call over a cluster of several groups (by slot, or by
//!   Redis's command tips for a keyless one), and how the replies of a call every group
//!   ran make one.
//! - [`server`]: the listener, the thread that learns the members and the slot table, the
//!   pool of stubs (lanes) the connections borrow, and the blocking calls helpers make.
//! - `worker`: the event loop: a worker thread serves its connections and their stubs'
//!   calls on one poll, handing what would wait (a failover, a call every group runs) to a
//!   helper thread.

pub mod conn;
pub mod route;
pub mod server;
mod worker;

pub use conn::{Answer, ProxyConn, Target, Unit};
pub use server::{Proxy, ProxyConfig, ProxyError, THREADS_MAX};
