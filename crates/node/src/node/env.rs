//! What a [`super::Node`]'s driver provides and hears: the services only it has (the model's
//! clock, a load, the log), the outputs it carries out (frames, answers, log orders), and
//! the hooks through which the simulator's checkers follow the node. A hook's default does
//! nothing; nothing the node decides depends on a hook's answer, but for the planted bugs'
//! hooks and an error, which ends the input and is handed back to the driver.

use std::fmt;

use tandem_config::{GroupId, View};
use tandem_memory::Segment;
use tandem_replication::{NodeId, Reply};
use tandem_store::ProcId;

use crate::backup_role::BackupWatch;
use crate::carry_out::{CarryNote, Records};
use crate::log::LogOrder;
use crate::peer_frame::PeerMessage;
use crate::peer_frame::RelayedPublication;
use crate::primary::{Answer, Ran, RoleReady};
use crate::primary_host::{PrimaryHost, WaitingCall};
use crate::reads::ReadAnswer;
use crate::supervisor::Notice;
use crate::{BackupRole, Slot};

/// Where a call's answer goes, as a driver names it: a connection, or nobody for the
/// primary's own periodic procedure.
pub trait Destination: Clone {
    /// Where the answer of the model's periodic procedure goes: nobody.
    fn periodic() -> Self;

    fn is_periodic(&self) -> bool;
}

/// What went wrong in the node itself that a driver turns into its own error.
#[derive(Debug)]
pub enum NodeFailure {
    /// The backup role could not apply a batch it accepted.
    Apply(tandem_replication::ApplyError),
    /// The backup role could not install a state transfer.
    Install(String),
}

impl fmt::Display for NodeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeFailure::Apply(err) => write!(f, "cannot apply a batch: {err}"),
            NodeFailure::Install(err) => write!(f, "cannot install a transfer: {err}"),
        }
    }
}

/// What became of the records the node's role holds, for a driver that keeps a ledger of
/// them beside the segment (the simulator's ghost histories).
#[derive(Debug)]
pub enum RecordsMoved<'a> {
    /// A backup role handed its segment over at `lsn` (a rewound one takes back the records
    /// it held before the rewind).
    HandedOver { lsn: u64 },
    /// The records the log gave back at a restart, `segment`, are the role's.
    Recovered { segment: &'a Segment },
    /// The initial database: the records recovered, if any, are dropped.
    Loaded,
    /// Rewound to `lsn` to rejoin: the records above it are taken back.
    Rewound { lsn: u64 },
}

/// A carry-out's outcome, for the driver's bookkeeping.
#[derive(Debug)]
pub struct Carried<'a, D, R> {
    pub group: GroupId,
    /// The role the node holds now (not yet given its checkpoints nor told of its log).
    pub role: &'a Slot<Box<PrimaryHost<D>>, Box<BackupRole<R>>>,
    pub view: &'a View,
    /// A new role started (the node's role epoch moved): its links are new connections.
    pub new_role: bool,
    /// The role epoch of the node's roles in the group now.
    pub role_epoch: u64,
}

/// A primary role about to start (its records' origin, the LSN it starts at, and the lease
/// it waits out first).
#[derive(Clone, Copy, Debug)]
pub struct PrimaryStarting<'a> {
    pub group: GroupId,
    pub view: &'a View,
    pub records: Records,
    pub lsn: u64,
    pub lease_owed_ticks: u64,
}

/// A node's driver. The node calls it while it handles an input, in the order it acts. Every
/// call about a role names the role's group first: each group has its own segment, log and
/// load (docs/many-groups.md, decision 4).
pub trait NodeEnv<D, R>: BackupWatch {
    /// Why the initial database could not be loaded.
    type LoadError: fmt::Display;

    /// The driver's clock in microseconds: reads' deadlines and the backup's turns.
    fn now_us(&self) -> u64;

    /// The model's clock, Unix milliseconds: what a call runs at and the periodic procedure.
    fn now_ms(&self) -> u64;

    /// A segment holding the initial database, now: a load [`NodeEnv::start_load`] began
    /// is finished (or abandoned) here, and its segment is never handed to the node.
    fn load(&mut self, group: GroupId) -> Result<Segment, Self::LoadError>;

    /// Starts loading the initial database off the node's thread (a load takes a while);
    /// the driver hands the segment to [`super::Node::segment_loaded`] once it is done.
    fn start_load(&mut self, group: GroupId);

    /// Makes the log end at `lsn` before the role that starts there appends anything.
    fn log_align(&mut self, group: GroupId, lsn: u64);

    /// Before a rejoin's rewind to `lsn`: where the log lets the node rewind to (at most
    /// `lsn`).
    fn log_align_rejoin(&mut self, group: GroupId, lsn: u64) -> u64;

    /// What the log has told the roles is durable.
    fn lsn_durable(&self, group: GroupId) -> u64;

    /// Whether the log would like a checkpoint now.
    fn wants_checkpoint(&self, group: GroupId) -> bool;

    /// Hands the log an order; returns the LSN the log now tells the role is durable if
    /// carrying it out made more so at once (a checkpoint it finished).
    fn log_order(&mut self, group: GroupId, order: LogOrder) -> Option<u64>;

    /// Sends a message to peer `to`.
    fn send(&mut self, to: NodeId, message: PeerMessage);

    /// A backup role sent the acks of what it received and is about to apply it, long
    /// enough to keep the primary waiting: a driver that holds frames back to write them
    /// together writes those now.
    fn acks_sent(&mut self) {}

    /// An answer the primary role released, in LSN order.
    fn release(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<D>,
        reply: Reply<Answer<D>>,
    ) -> Result<(), Self::Error>;

    /// An answer the primary role withheld (its reply cannot be kept): the client may be told
    /// to ask again.
    fn withheld(&mut self, to: D);

    /// A call the node cannot run: it is not the primary (any more).
    fn not_primary(&mut self, to: D);

    /// A read the backup role answered.
    fn read_answered(&mut self, to: R, seq: u64, answer: ReadAnswer) -> Result<(), Self::Error>;

    /// Something the driver logs.
    fn note(&mut self, note: fmt::Arguments<'_>);

    /// Something the supervisor reports about `group`.
    fn notice(&mut self, group: GroupId, notice: Notice<'_>);

    /// A failure of the node's own, as the driver's error.
    fn failure(&mut self, failure: NodeFailure) -> Self::Error;

    /// What the carry-out table reports; an error fails the carry-out (the simulator's
    /// policy on a refused handover).
    fn carry_note(&mut self, group: GroupId, note: &CarryNote<'_>) -> Result<(), Self::Error> {
        let _ = (group, note);
        Ok(())
    }

    /// The call at the front of the queue is about to run at `time_ms` (a driver may stamp
    /// where its answer goes).
    fn running(&mut self, group: GroupId, call: &mut WaitingCall<D>, time_ms: u64) {
        let _ = (group, call, time_ms);
    }

    /// A planted bug of the simulator's: the procedure and arguments the front call runs
    /// with instead of its own, this once.
    fn rewrite_call(&mut self, group: GroupId, call: &WaitingCall<D>) -> Option<(ProcId, Vec<u8>)> {
        let _ = (group, call);
        None
    }

    /// A call of procedure `proc_id` ran at `time_ms` on the primary role.
    fn ran(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<D>,
        proc_id: ProcId,
        ran: &Ran,
        time_ms: u64,
    ) -> Result<(), Self::Error> {
        let _ = (group, primary, proc_id, ran, time_ms);
        Ok(())
    }

    /// The model's periodic procedure committed at `time_ms`.
    fn swept(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<D>,
        time_ms: u64,
    ) -> Result<(), Self::Error> {
        let _ = (group, primary, time_ms);
        Ok(())
    }

    /// What leaves the primary role now, before it is sent (transfers may be drained).
    fn leaving(&mut self, group: GroupId, primary: &PrimaryHost<D>, ready: &mut RoleReady<D>) {
        let _ = (group, primary, ready);
    }

    /// A pub/sub message the primary relayed, to deliver to this node's subscribers now:
    /// the backup role has applied every write its publisher sent before it. A driver
    /// without subscribers ignores it.
    fn relayed(&mut self, publication: RelayedPublication) {
        let _ = publication;
    }

    /// A relayed pub/sub message was dropped: too many waited for the applier.
    fn relayed_dropped(&mut self) {}

    /// The backup role following `primary` has received and applied this far.
    fn backup_holds(
        &mut self,
        group: GroupId,
        primary: NodeId,
        lsn_received: u64,
        lsn_applied: u64,
    ) {
        let _ = (group, primary, lsn_received, lsn_applied);
    }

    /// The backup role applied records from `lsn_before` on.
    fn backup_applied(
        &mut self,
        group: GroupId,
        backup: &BackupRole<R>,
        lsn_before: u64,
    ) -> Result<(), Self::Error> {
        let _ = (group, backup, lsn_before);
        Ok(())
    }

    /// The role following `primary` (the node itself, for a primary) heard its log synced
    /// `lsn`.
    fn synced_heard(&mut self, group: GroupId, primary: NodeId, lsn: u64) {
        let _ = (group, primary, lsn);
    }

    /// The backup role heard from its primary.
    fn heard_primary(&mut self, group: GroupId, primary: NodeId) {
        let _ = (group, primary);
    }

    /// What became of the role's records.
    fn records(&mut self, group: GroupId, moved: RecordsMoved<'_>) {
        let _ = (group, moved);
    }

    /// The role before a carry-out replaces or keeps it.
    fn carrying_out(
        &mut self,
        group: GroupId,
        role: &Slot<Box<PrimaryHost<D>>, Box<BackupRole<R>>>,
    ) {
        let _ = (group, role);
    }

    /// A primary role starts.
    fn primary_starting(&mut self, starting: PrimaryStarting<'_>) {
        let _ = starting;
    }

    /// A carry-out ended with the role in `carried`.
    fn carried(&mut self, carried: Carried<'_, D, R>) {
        let _ = carried;
    }

    /// A promotion to primary of `view` was carried out (its role is told of its log).
    fn promoted(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost<D>,
        view: &View,
    ) -> Result<(), Self::Error> {
        let _ = (group, primary, view);
        Ok(())
    }

    /// A planted bug of the simulator's: a primary that a view deposes keeps serving.
    fn ignores_depose(&self) -> bool {
        false
    }
}
