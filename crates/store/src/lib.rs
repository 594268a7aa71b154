//! The store: the data model boundary, typed record tables on a segment, the procedure
//! registry, and the store that runs a model's procedures in txns.
//!
//! A [`DataModel`] is what a group serves: procedures by name and id, an initial database, a
//! consistency check. [`Store::call`] runs a write procedure inside one txn: commit when it
//! returns `Ok`, abort when it returns `Err`. [`Store::call_once`] runs a client's call exactly
//! once, through the [`DedupTable`] at the end of the segment, which it writes in the call's
//! own txn.
//!
//! A model compiled into the binary is a [`Workload`]: a [`Table`] places fixed-size
//! plain-old-data records at a fixed offset of a segment, a [`Layout`] hands out table
//! positions, a [`Registry`] names Rust functions as procedures, and [`Compiled`] makes the
//! whole a model. The benchmark workloads (the `tandem-workloads` crate) are built only from
//! these pieces and leave the dedup table's region free.
//!
//! Like the memory crate below it, the store never does I/O, never reads the clock and never
//! draws from an unseeded random source: the same calls give the same bytes everywhere.

#![forbid(unsafe_code)]

pub mod args;
pub mod dedup;
pub mod heap;
mod model;
mod monitor;
mod publish;
mod registry;
mod rng;
mod table;
mod watch;

pub use dedup::{DEDUP_REPLY_INLINE_MAX, DedupEntry, DedupTable};
pub use heap::{Heap, HeapFull, HeapStats};
pub use model::{Compiled, DataModel, ProcKind};
pub use monitor::{INNER_CALLS_QUEUED_BYTES_MAX, INNER_CALLS_QUEUED_MAX, InnerCall, InnerCalls};
pub use publish::{
    PUBLICATIONS_QUEUED_BYTES_MAX, PUBLICATIONS_QUEUED_MAX, Publication, Publications,
};
pub use registry::{
    CallError, Deduped, Prefetch, ProcError, ProcId, Procedure, ReadProcedure, Registry, Store,
    read, record_len_bound,
};
pub use rng::Rng;
pub use table::{Layout, LayoutError, Table};
pub use watch::{CallWatch, RunId, Running, StopReason};

/// A data model written in Rust: its tables, its procedures, how to load it and how to check
/// it. [`Compiled`] makes one a [`DataModel`].
pub trait Workload: Sized + Clone + Send + 'static {
    /// The name used on the command line and in reports.
    const NAME: &'static str;
    /// Generates calls and remembers what it needs to check their effects.
    type Driver: Driver + 'static;

    /// The workload's procedures.
    fn registry() -> Registry<Self>;
    /// Writes the initial database into a fresh segment, through txns.
    fn load(&self, segment: &mut tandem_memory::Segment);
    /// The workload's consistency conditions, checked on the segment alone. The workloads'
    /// checks end with the dedup table's ([`DedupTable::check`]).
    fn check(&self, segment: &tandem_memory::Segment) -> Result<(), Inconsistency>;
    /// The part of [`Workload::check`] cheap enough to run after every batch a replica
    /// applies (a checker's sampling; none by default).
    fn check_quick(&self, segment: &tandem_memory::Segment) -> Result<(), Inconsistency> {
        let _ = segment;
        Ok(())
    }
    /// A call generator drawing from a generator seeded with `seed`.
    fn driver(&self, seed: u64) -> Self::Driver;
}

/// Produces the stream of calls a benchmark or a client issues.
pub trait Driver: Send {
    /// Writes the next call's arguments into `args` (cleared first) and names its procedure.
    fn next_call(&mut self, args: &mut Vec<u8>) -> ProcId;
    /// Learns whether a call it produced committed (`Ok`) or rolled back (`Err`); `id` and
    /// `args` are that call's. Calls are observed in the order they were produced, but the
    /// driver may already have produced the next one: an executor that prefetches works one
    /// call ahead.
    fn observe(&mut self, id: ProcId, args: &[u8], outcome: Result<(), &ProcError>);
    /// Checks what only the driver knows, such as the sum of the deltas that committed.
    fn check(&self, segment: &tandem_memory::Segment) -> Result<(), Inconsistency>;
}

/// Runs `calls` calls from `driver` on `store`, one after another, telling the driver each
/// outcome; `on_commit` sees every committed redo record (to feed a replica, say).
///
/// Panics if the driver names a procedure the store does not have: that is a bug in the driver.
pub fn drive(
    store: &mut Store,
    driver: &mut dyn Driver,
    calls: usize,
    mut on_commit: impl FnMut(&tandem_memory::RedoRecord),
) {
    let (mut args, mut reply) = (Vec::new(), Vec::new());
    for _ in 0..calls {
        let id = driver.next_call(&mut args);
        match store.call(id, &args, &mut reply) {
            Ok(redo) => {
                on_commit(redo);
                driver.observe(id, &args, Ok(()));
            }
            Err(CallError::Proc(err)) => driver.observe(id, &args, Err(&err)),
            Err(err) => panic!("the driver produced a call the store cannot run: {err}"),
        }
    }
}

/// A consistency condition that does not hold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("consistency check '{check}' failed: {detail}")]
pub struct Inconsistency {
    /// Short name of the condition, e.g. "accounts = tellers".
    pub check: &'static str,
    /// What was found.
    pub detail: String,
}
