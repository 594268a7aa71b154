//! Builds a workload by name, and hands it to code generic over the workload type.

use tandem_memory::Segment;
use tandem_store::Workload;
use tandem_store::workloads::debit_credit::{DebitCredit, DebitCreditConfig};
use tandem_store::workloads::order_entry::{OrderEntry, OrderEntryConfig};

use crate::config::{GroupConfig, WorkloadName};

/// A workload the runtime can serve: its data may move between threads.
pub trait ServedWorkload: Workload + Clone + Send + Sync {}

impl<W: Workload + Clone + Send + Sync> ServedWorkload for W where W::Driver: Send {}

/// Code that runs with a concrete workload type (Rust closures cannot be generic).
pub trait WithWorkload {
    type Output;
    fn run<W: ServedWorkload>(self, workload: W) -> Self::Output
    where
        W::Driver: Send;
}

/// Lays out workload `name` in a segment of `db_bytes` and runs `with` on it.
pub fn with_workload<F: WithWorkload>(
    name: WorkloadName,
    db_bytes: usize,
    with: F,
) -> Result<F::Output, String> {
    match name {
        WorkloadName::DebitCredit => {
            let workload = DebitCredit::new(db_bytes, &DebitCreditConfig::default())
                .map_err(|err| format!("debit-credit does not fit: {err}"))?;
            Ok(with.run(workload))
        }
        WorkloadName::OrderEntry => {
            let config = OrderEntryConfig::default();
            let workload = OrderEntry::new(db_bytes, &config).map_err(|_| {
                let mib = OrderEntry::min_db_mib(&config);
                format!(
                    "order-entry needs at least {mib} MiB for one warehouse; give db_mib ≥ {mib}"
                )
            })?;
            Ok(with.run(workload))
        }
    }
}

/// A fresh segment for `group`, loaded with `workload`'s initial database. The load is
/// deterministic, so a primary and its backups start from the same bytes at the same LSN.
pub fn loaded_segment<W: Workload>(group: &GroupConfig, workload: &W) -> Result<Segment, String> {
    let mut segment = Segment::anonymous(group.db_mib << 20, group.strategy)
        .map_err(|err| format!("group.db_mib: {err}"))?;
    workload.load(&mut segment);
    Ok(segment)
}
