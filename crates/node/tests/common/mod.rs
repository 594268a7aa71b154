//! What the node core's tests share: a small Debit-Credit database and a primary's settings.

use tandem_memory::{Segment, Strategy};
use tandem_redo::{BatchKind, TailLimits};
use tandem_replication::{NodeId, PrimaryConfig, Safety};
use tandem_store::Workload;
use tandem_workloads::debit_credit::{DebitCredit, DebitCreditConfig};

pub const SEGMENT_LEN: usize = 64 * 1024;

pub fn workload() -> DebitCredit {
    DebitCredit::new(
        SEGMENT_LEN,
        &DebitCreditConfig {
            tellers_per_branch: 4,
            accounts_per_branch: 100,
            history_bytes: 2048,
            overdraft_limit: None,
        },
    )
    .expect("fits")
}

/// A segment with the database loaded.
pub fn loaded() -> Segment {
    let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).expect("map");
    workload().load(&mut segment);
    segment
}

/// A primary's settings in `view`, with `backups` (none: a lone primary), no lease.
pub fn config(view: u64, backups: &[NodeId], safety: Safety) -> PrimaryConfig {
    PrimaryConfig {
        group: 0,
        view,
        backups: backups.to_vec(),
        spares: Vec::new(),
        safety,
        tail: TailLimits {
            records_max: 1_000,
            bytes_max: 1 << 20,
        },
        batch_bytes_max: 1 << 16,
        heartbeat_ticks: 3,
        resend_ticks: 2,
        kind: BatchKind::Redo,
        flush_batches_in_flight_max: 8,
        lone: backups.is_empty(),
        lease_ticks: None,
    }
}
