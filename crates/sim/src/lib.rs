//! Deterministic simulation of a whole tandem cluster: the real cores of every node (the
//! cluster core with its Raft config store, the node core's primary role and applier, the
//! receiver, the store), driven by a simulated network, clock, disk and set of clients, all
//! from one seed. See [`cluster`] for the fault model and the checkers; the Redis model's
//! workload and the reference model its replies are checked against are in `redis`.
//!
//! Time: the simulation's clock counts micro-ticks; a node's tick lasts about
//! [`MICROS_PER_TICK`] of them, more or less by its drift.

#![forbid(unsafe_code)]

pub mod cluster;
mod event;
mod redis;

pub use cluster::{
    ClusterFaults, ClusterReport, ClusterSabotage, Mix, Model, RunOptions, run_cluster,
    run_cluster_mixed, run_cluster_sabotaged, run_cluster_with,
};

use tandem_redo::{BatchBuilder, BatchKind};

/// Micro-ticks in a nominal tick.
pub const MICROS_PER_TICK: u64 = 1_000;

/// The batch `bytes` with data of its first record changed (the first byte, or with
/// `every_run` the first byte of each run) and its checksum recomputed: what a primary that
/// ships wrong bytes sends, which no checksum can notice.
pub(crate) fn forge_batch(bytes: &[u8], every_run: bool) -> std::sync::Arc<[u8]> {
    let batch = tandem_redo::BatchRef::parse(bytes).expect("sealed by the primary");
    let (mut records, mut calls) = (Vec::new(), Vec::new());
    batch
        .decode_redo_into(&mut records, &mut calls)
        .expect("the primary's records decode");
    let mut builder = BatchBuilder::new(
        BatchKind::Redo,
        batch.group(),
        batch.view(),
        batch.lsn_base(),
    );
    for (index, (record, call)) in records.iter().zip(&calls).enumerate() {
        let mut data = record.data().to_vec();
        if index == 0 && !data.is_empty() {
            data[0] ^= 0x01;
            if every_run {
                let mut start = 0;
                for run in record.runs() {
                    data[start] ^= 0x01;
                    start += run.len as usize;
                }
                data[0] ^= 0x01;
            }
        }
        let forged =
            tandem_memory::RedoRecord::from_parts(record.lsn(), record.runs().to_vec(), data)
                .expect("same shape");
        builder.push_redo(*call, &forged);
    }
    builder.seal().shared()
}
