//! The replication core: redo shipping from a primary to its backups, as sans-I/O state
//! machines.
//!
//! - [`Primary`] takes each committed record, batches it, keeps it in the retained tail, ships
//!   it to every backup, tracks what each backup has received and applied, and releases the
//!   commit's reply once the call's [`Safety`] rule holds, in LSN order.
//! - [`Receiver`] (on a backup) checks each batch's view, LSN continuity and checksum, acks
//!   receipt, and hands the batch on.
//! - [`Applier`] (on a backup) applies received batches to its segment and reports what it
//!   applied. Seed 004 §3.2 separates the two so a 2-safe ack never waits for application.
//!
//! Inputs are method calls: a commit, a message from a peer, a tick. Outputs accumulate in a
//! `Ready` value the driver takes and acts on in the order its fields document. Time exists
//! only as ticks. This crate never opens a socket, starts a thread, reads the clock or draws a
//! random number: the runtime and the simulator drive the same code.

#![forbid(unsafe_code)]

mod applier;
#[cfg(feature = "inject-bugs")]
pub use tandem_memory::bugs;
pub mod lease;
mod message;
mod primary;
mod receiver;
pub mod transfer;

pub use applier::{Applier, ApplyError, Kept, PassiveApplier, keep_applied};
pub use lease::{LeaseMargins, primary_lease_ticks};
pub use message::{
    AckCount, DIVERGED_PAGES_MAX, Message, NodeId, PagesChunk, ReadConsistency,
    ReadConsistencyError, Safety, SafetyError,
};
pub use primary::{
    Disposition, DrainReplies, Primary, PrimaryConfig, PrimaryFault, PrimaryReady, Removal, Reply,
    TransferSent,
};
pub use receiver::{ApplyBatch, Receiver, ReceiverConfig, ReceiverFault, ReceiverReady};
