//! One node's decisions, sans-I/O. The runtime's threads and the simulator both drive these
//! types; neither decides anything a node does in their place.
//!
//! - [`PrimaryRole`] is the primary role: it runs each client call exactly once on the store,
//!   hands its commit and its answer to the replication core, applies the node's orders (a new
//!   view, a deposition, a removal to prepare) and hands everything that must leave the node in
//!   one [`RoleReady`].
//! - [`PrimaryHost`] is a primary role as one value: the role, the calls waiting for flow
//!   control ([`WaitingCall`]) and the model's periodic procedure, collected in one order.
//! - [`ApplierRole`] is a backup's applier: it applies what the receiver core accepted, skips
//!   what an older connection delivered again, keeps the applied batches a promotion serves
//!   from, acks what it applied, checkpoints its segment for the log ([`Checkpointer`]), and
//!   hands the segment over to the node's next role.
//! - [`BackupRole`] is a backup role as one value: the gate, the receiver, the applier and
//!   the reads waiting on it, composed in one order for every driver (one `turn`, one
//!   [`BackupReady`]).
//! - [`ReceiverRole`] is a backup's receiver on its primary's connection, kept in line with
//!   the gate and the applier.
//! - [`BackupReads`] is when a client's read on a backup may be served, what it gets, and
//!   when the applier holds batches back for it.
//! - [`GateRule`] is whom a backup takes batches from, and whether a freeze for a view change
//!   still holds.
//! - [`Supervisor`] owns the node's cluster core and role rule and carries their outputs out
//!   through the driver's [`Roles`], in one documented order (see its module).
//! - [`carry_out`] is the table of what a node does with its role and records to follow a
//!   committed view, for each transition from each role; a driver holds the roles
//!   ([`Carrier`]).
//! - [`PeerMessage`] is a message between two nodes; [`decode_peer_message`] and its
//!   encoders are the bytes a peer connection carries, in the runtime and the simulator.
//! - [`Node`] is one member as one value: its supervisor and the role it holds, the
//!   carry-out table carried out on values; a driver feeds it inputs and hears it through
//!   its [`NodeEnv`].
//! - [`RoleRule`] is the order in which a node follows a committed view into a role
//!   (`tandem_cluster::role` decides which), and whether it restarted without its memory.
//!
//! Nothing here reads a clock, opens a socket or starts a thread: ticks and tick numbers come
//! from the driver.

mod backup;
mod backup_role;
mod carry_out;
mod checkpoint;
mod gate;
mod log;
mod node;
mod peer_frame;
mod primary;
mod primary_host;
mod reads;
mod receiver;
mod rule;
mod supervisor;

pub use backup::{ApplierRole, Handover, HandoverError, Replica, rewind_to_rejoin};
pub use backup_role::{
    BackupReady, BackupRole, BackupTurnError, BackupWatch, RELAYED_HELD_BYTES_MAX,
    RELAYED_HELD_MAX, ReadSettings,
};
pub use carry_out::{Carrier, CarryNote, Records, Slot, carry_out};
pub use checkpoint::{Checkpointer, PAGES_PER_STEP};
pub use gate::GateRule;
pub use log::{
    Aligned, LogCore, LogOrder, Replayed, SyncPolicy, SyncPolicyError, rebuild, rebuilds_state,
    receiver_orders, replay, replay_from,
};
pub use node::{
    Carried, Destination, Node, NodeEnv, NodeFailure, NodeSettings, PrimaryStarting, RecordsMoved,
    RoleSlot,
};
pub use peer_frame::{
    PeerFrameError, PeerMessage, RelayedPublication, decode_cluster_message, decode_peer_message,
    decode_relayed_publication, encode_cluster_message, encode_relayed_publication,
    encode_replication, relayed_publication_frame_len,
};
pub use primary::{
    Answer, AnswerKind, Call, EarlierRun, Observed, PrimaryRole, Ran, Refusal, RoleReady,
    record_len_max, reply_len_max, reply_not_kept, withheld_answer,
};
pub use primary_host::{PrimaryHost, WaitingCall};
pub use reads::{BackupReads, Needs, READ_INDEX_RETRY, READ_WAIT, ReadAnswer, WaitingRead};
pub use receiver::ReceiverRole;
pub use rule::{Recovered, RoleRule};
pub use supervisor::{
    DriveError, Notice, RoleHeld, Roles, Supervisor, lsn_released_at_promotion, lsn_synced_bound,
};
