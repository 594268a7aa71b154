//! Known bugs that can be planted in the real code of the crates above this one (the store,
//! the replication core, the cluster core), one at a time, so that the simulator's checkers
//! can show they catch them. The switch lives in the lowest crate so that every crate above
//! reads the same one. Compiled only with the `inject-bugs` feature; a normal build has no
//! switch at all.
//!
//! The switch is per thread: a simulation runs in one thread, and tests running side by side
//! do not plant bugs in each other.

use std::cell::Cell;

/// A bug to plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The primary releases a 2-safe reply at commit, before any backup acknowledged it
    /// (tandem-replication).
    EarlyReply,
    /// A member that switches to a new primary keeps records above the view's truncate LSN
    /// instead of discarding them (tandem-cluster's role rule).
    SkipTruncate,
    /// A view change promotes the backup that reported the lowest LSN (tandem-cluster's
    /// promotion rule).
    PromoteLowest,
    /// The store runs a retried call again instead of answering it from the dedup table
    /// (tandem-store).
    SkipDedup,
    /// The primary releases 1-safe replies and answers calls without a commit of their own
    /// whether or not its lease holds (tandem-replication).
    IgnoreLease,
    /// A state transfer leaves out the first page that changed after the member's LSN
    /// (tandem-replication).
    TransferShort,
    /// The primary releases replies by the current view's rule alone, ignoring the views it
    /// asked for (tandem-replication; seeds 3184 and 107 lost commits so).
    IgnoreViewsAskedFor,
    /// A member that missed views truncates at the newest view's own truncate LSN, not at the
    /// first promotion since the view it followed (tandem-cluster's role rule; seed 28184).
    MissedPromotion,
    /// A restarted node named a spare by a view it replays serves at once (tandem-cluster's
    /// role rule; seed 28840).
    RestartedServes,
    /// The primary's lease is one tick longer than its backups' promise allows
    /// (tandem-replication's lease margin, which the runtime once computed on its own).
    LeaseMarginOffByOne,
    /// A deposed primary sends its abandoned replies as if their rule had held, instead of
    /// "not primary" (tandem-replication's reply disposition, which the runtime once decided
    /// on its own).
    AbandonedSent,
    /// The primary takes commits under `bounded:n` however many records its backups lack
    /// (tandem-replication's flow control).
    IgnoreBound,
    /// A rewound segment marks no page diverged, so a member that rejoins fetches only the
    /// pages changed after the truncate LSN and keeps what its discarded records wrote
    /// (tandem-memory's `Segment::rewind`).
    RewindForgets,
    /// A promoted primary releases replies at once instead of after the rest of the lease its
    /// node granted the old primary (tandem-replication's `Primary::hold_releases`).
    IgnoreLeaseOwed,
    /// A backup serves a linearizable read as soon as it has applied the reader's own
    /// `min_lsn`, without asking the primary what was acknowledged (tandem-node's
    /// `BackupReads`).
    SkipReadIndex,
    /// The proxy sends a unit that ended without an answer (a deadline error) again as new
    /// calls, with new seqs, instead of telling its application (tandem-proxy's
    /// `ProxyConn::finish`): a command that had committed runs twice.
    ProxyRetriesUnanswered,
    /// The primary counts a backup's received LSN as durable under the `durable` rule, so a
    /// reply leaves before the backups' logs synced its record (tandem-replication's
    /// `lsn_releasable`).
    DurableBeforeSync,
}

impl Bug {
    pub const ALL: [Bug; 17] = [
        Bug::EarlyReply,
        Bug::SkipTruncate,
        Bug::PromoteLowest,
        Bug::SkipDedup,
        Bug::IgnoreLease,
        Bug::TransferShort,
        Bug::IgnoreViewsAskedFor,
        Bug::MissedPromotion,
        Bug::RestartedServes,
        Bug::LeaseMarginOffByOne,
        Bug::AbandonedSent,
        Bug::IgnoreBound,
        Bug::RewindForgets,
        Bug::IgnoreLeaseOwed,
        Bug::SkipReadIndex,
        Bug::ProxyRetriesUnanswered,
        Bug::DurableBeforeSync,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Bug::EarlyReply => "early-reply",
            Bug::SkipTruncate => "skip-truncate",
            Bug::PromoteLowest => "promote-lowest",
            Bug::SkipDedup => "skip-dedup",
            Bug::IgnoreLease => "ignore-lease",
            Bug::TransferShort => "transfer-short",
            Bug::IgnoreViewsAskedFor => "ignore-views-asked-for",
            Bug::MissedPromotion => "missed-promotion",
            Bug::RestartedServes => "restarted-serves",
            Bug::LeaseMarginOffByOne => "lease-margin-off-by-one",
            Bug::AbandonedSent => "abandoned-sent",
            Bug::IgnoreBound => "ignore-bound",
            Bug::RewindForgets => "rewind-forgets",
            Bug::IgnoreLeaseOwed => "ignore-lease-owed",
            Bug::SkipReadIndex => "skip-read-index",
            Bug::ProxyRetriesUnanswered => "proxy-retries-unanswered",
            Bug::DurableBeforeSync => "durable-before-sync",
        }
    }

    /// The bug named `name`, as [`Bug::name`] spells it.
    pub fn from_name(name: &str) -> Option<Bug> {
        Bug::ALL.into_iter().find(|bug| bug.name() == name)
    }
}

thread_local! {
    static PLANTED: Cell<Option<Bug>> = const { Cell::new(None) };
}

/// Plants `bug` (or none) for the calling thread.
pub fn plant(bug: Option<Bug>) {
    PLANTED.with(|planted| planted.set(bug));
}

/// Whether `bug` is planted on the calling thread.
pub fn planted(bug: Bug) -> bool {
    PLANTED.with(|planted| planted.get() == Some(bug))
}
