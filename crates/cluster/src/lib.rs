//! The cluster core (DESIGN.md layer 5): failure detection, the view-change rule, leases,
//! rejoin requests and the config store's Raft member, as sans-I/O state machines driven by
//! the runtime (real TCP, threads and clock) and by the simulator (one seed) alike.
//!
//! [`rule`] holds the view-change rules as pure functions; [`Cluster`] is one node's core, for every group
//! it serves in.
//! Time exists only as ticks; there is no socket, thread, clock or random source here.

pub mod node;
pub mod role;
pub mod rule;

pub use node::{
    Cluster, ClusterEvent, ClusterMessage, ClusterReady, ClusterSettings, GroupSettings, Rebuilt,
    Suspicion,
};
pub use rule::{RuleError, add_spare, promote, promote_spare, remove_backup, reports_needed};
