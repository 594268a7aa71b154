//! The config store (DESIGN.md layer 6): the cluster map (nodes, groups, views) replicated by
//! an embedded Raft, tikv's raft-rs. No consensus is written here; this crate decides what
//! the replicated state is, how it is saved and how raft-rs is driven.
//!
//! [`ConfigCore`] is sans-I/O, like raft-rs's `RawNode` it wraps: the caller ticks it, hands
//! it the bytes other members sent, proposes [`Command`]s, and calls [`ConfigCore::ready`],
//! which saves through a [`Durable`] before it releases the messages that depend on the save
//! and applies committed commands to the [`ClusterMap`]. The runtime drives it with TCP, a
//! clock and [`FileDurable`]; the simulator with a simulated network, ticks and
//! [`MemDurable`], from one seed. The core never opens a socket or a file, starts a thread,
//! reads the clock or draws from an unseeded random source: raft-rs's own election jitter
//! (a thread RNG) is neutralized by a degenerate timeout range, and the jitter is drawn from
//! [`ConfigSettings::jitter_seed`] (see `jitter.rs`).
//!
//! Raft settings: pre-vote and check-quorum on (a partitioned node does not disrupt the
//! leader when it returns; a leader cut from its quorum steps down). Membership is fixed at
//! the first start: the voters (by default [`default_voters`], the three lowest node ids)
//! and, as learners, the other nodes of the initial map. The log is compacted into a
//! snapshot of the map every [`SNAPSHOT_INTERVAL_ENTRIES`] applied entries; a follower that
//! fell behind the compaction receives the snapshot.

mod core;
mod jitter;
mod map;
mod persist;
mod placement;
mod slots;
mod storage;

pub use crate::core::{
    Applied, ConfigCore, ConfigError, ConfigReady, ConfigSettings, Proposal, ProposeError,
    RaftRole, SNAPSHOT_INTERVAL_ENTRIES, StartError, StepError, default_voters,
};
pub use crate::map::{
    ClusterMap, Command, GroupId, MapError, Member, NodeId, NodeInfo, PROMOTIONS_KEPT, Promotion,
    Rejection, SinceView, View, ViewError,
};
pub use crate::persist::{
    CorruptState, Durable, FileDurable, MemDurable, Persisted, PersistedEntry, STATE_MAGIC,
};
pub use crate::placement::{PlacementError, place_groups};
pub use crate::slots::{SLOT_COUNT, SlotError, SlotRange, SlotTable};
