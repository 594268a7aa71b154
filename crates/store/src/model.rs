//! The data model boundary: what a group serves, as one dyn-compatible trait.
//!
//! A [`DataModel`] names its procedures, runs a write procedure inside a txn and a read
//! procedure on a segment, loads a fresh database and checks a database's consistency. The
//! store, the node core, the runtime, the simulator and the command line hold a
//! `Box<dyn DataModel>` and never know which model it is, so a new model (the Redis one, a
//! script engine) needs no change to any of them.
//!
//! A model may hold state beyond the segment (a script engine's compiled scripts) and may add
//! procedures while it runs: it is asked for a procedure's kind at every call, not once. What
//! it holds outside the segment is not replicated, so it must be a cache of what the segment
//! holds or of what [`DataModel::replica`] rebuilds: a backup promoted to primary runs calls
//! with its own copy.
//!
//! [`Compiled`] makes a model of a [`Workload`]: Rust functions in a [`Registry`], as the
//! benchmark workloads are written.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use tandem_memory::{Segment, Txn};

use crate::{
    CallWatch, Driver, Inconsistency, ProcError, ProcId, Publications, Registry, Workload,
};

/// Whether a procedure writes (runs in a txn, takes an LSN, leaves a dedup slot) or only
/// reads (runs on a segment, on a primary or a backup).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcKind {
    Write,
    Read,
}

/// What a group serves: its procedures, its initial database and its consistency conditions.
///
/// Calls are serial: the store calls one procedure at a time, so a model needs no locks.
pub trait DataModel: Any + Send {
    /// The name used on the command line and in reports.
    fn name(&self) -> &str;

    /// The procedure called `name`, if there is one now.
    fn lookup(&self, name: &str) -> Option<ProcId>;

    /// The name of procedure `id`, if there is one now.
    fn procedure_name(&self, id: ProcId) -> Option<&str>;

    /// Whether procedure `id` writes or reads; `None` if there is no such procedure now.
    fn kind(&self, id: ProcId) -> Option<ProcKind>;

    /// How many procedures there are now; their ids are `0..procedure_count()`.
    fn procedure_count(&self) -> usize;

    /// Runs write procedure `id` in `txn`, reading `args` and writing `reply` (empty on
    /// entry). `Err` rolls the txn back. The store calls it only for an id whose
    /// [`kind`](DataModel::kind) is [`ProcKind::Write`].
    fn call(
        &mut self,
        id: ProcId,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError>;

    /// Runs read procedure `id` on `segment`, reading `args` and writing `reply` (empty on
    /// entry). The store calls it only for an id whose kind is [`ProcKind::Read`]. It runs
    /// on a primary's segment and on a backup's copy alike.
    fn read(
        &self,
        id: ProcId,
        segment: &Segment,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError>;

    /// Starts loading the cache lines a later call to `id` with `args` will touch, so an
    /// executor can overlap memory latency with the call before it. It changes nothing and
    /// must ignore arguments it cannot read. None by default.
    fn prefetch(&self, id: ProcId, segment: &Segment, args: &[u8]) {
        let _ = (id, segment, args);
    }

    /// Tells the model the time, in Unix milliseconds, by the clock of the node that runs its
    /// calls (a primary's executor calls it before each turn of calls). A model whose data
    /// expires measures expiry against it; the store never reads a clock, so a model that is
    /// never told the time sees none pass. The default ignores it.
    fn set_time_ms(&mut self, now_ms: u64) {
        let _ = now_ms;
    }

    /// A write procedure the primary runs on its own, with empty arguments, every so many
    /// milliseconds (the Redis model's sweep of expired keys), and that interval; none by
    /// default. A run that rolls back (nothing to do) takes no LSN.
    fn periodic(&self) -> Option<(ProcId, u64)> {
        None
    }

    /// Figures about the database for operators (memory in use, fragmentation, keys), by
    /// name; none by default. Cheap: the primary asks ten times a second.
    fn stats(&self, segment: &Segment) -> Vec<(&'static str, f64)> {
        let _ = segment;
        Vec::new()
    }

    /// Writes the initial database into a fresh segment, through txns. Deterministic: a
    /// primary and its backups load the same bytes at the same LSN.
    fn load(&self, segment: &mut Segment);

    /// The model's consistency conditions, checked on the segment alone, ending with the
    /// dedup table's ([`DedupTable::check`](crate::DedupTable::check)).
    fn check(&self, segment: &Segment) -> Result<(), Inconsistency>;

    /// The part of [`DataModel::check`] cheap enough to run after every batch a replica
    /// applies (the simulator's checkers run it then, and the whole check at intervals).
    fn check_quick(&self, segment: &Segment) -> Result<(), Inconsistency>;

    /// A model for another replica of the same group (a backup's reads, a node that takes
    /// over): the same procedures under the same ids, watched by the same [`CallWatch`].
    fn replica(&self) -> Box<dyn DataModel>;

    /// Gives the model the node's watch over long calls: a model whose calls can run long
    /// (scripts) marks them there and stops one the watch says must stop, rolling it back.
    /// The default runs no long calls and ignores it.
    fn watch_calls(&mut self, watch: Arc<CallWatch>) {
        let _ = watch;
    }

    /// The watch the model's long calls run under, if it runs any (see
    /// [`DataModel::watch_calls`]); none by default.
    fn call_watch(&self) -> Option<Arc<CallWatch>> {
        None
    }

    /// Gives the model the queue its committed calls publish messages to (Redis's keyspace
    /// notifications), which the node's pub/sub front end takes. A replica made after this
    /// publishes to the same queue. The default publishes nothing and ignores it.
    fn publish_to(&mut self, publications: Arc<Publications>) {
        let _ = publications;
    }

    /// Gives the model the queue it pushes the commands its calls run inside them to (a
    /// script's), for the node's monitors, whenever the queue says a front end watches. A
    /// replica made after this pushes to the same queue. The default runs no commands inside
    /// its calls and ignores it.
    fn monitor_to(&mut self, inner_calls: Arc<crate::InnerCalls>) {
        let _ = inner_calls;
    }

    /// The call [`DataModel::call`] last ran has ended: its txn committed, or it was rolled
    /// back (by the model's error, or by the store after it: a reply or a redo record too
    /// long). A model that publishes holds a call's messages until this says it committed.
    /// The default does nothing.
    fn call_ended(&mut self, committed: bool) {
        let _ = committed;
    }

    /// A generator of calls for a benchmark or an in-process load, drawing from a generator
    /// seeded with `seed`; `None` for a model without one.
    fn driver(&self, seed: u64) -> Option<Box<dyn Driver>>;
}

impl fmt::Debug for dyn DataModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DataModel")
            .field("name", &self.name())
            .field("procedures", &self.procedure_count())
            .finish()
    }
}

/// A data model compiled into the binary: a [`Workload`] value and its registry of Rust
/// functions.
pub struct Compiled<W> {
    workload: W,
    registry: Registry<W>,
}

impl<W: Workload> Compiled<W> {
    pub fn new(workload: W) -> Compiled<W> {
        Compiled {
            workload,
            registry: W::registry(),
        }
    }

    /// The model as the boundary takes it.
    pub fn boxed(workload: W) -> Box<dyn DataModel> {
        Box::new(Compiled::new(workload))
    }

    pub fn workload(&self) -> &W {
        &self.workload
    }
}

impl<W> fmt::Debug for Compiled<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Compiled")
            .field("registry", &self.registry)
            .finish()
    }
}

impl<W: Workload> DataModel for Compiled<W> {
    fn name(&self) -> &str {
        W::NAME
    }

    fn lookup(&self, name: &str) -> Option<ProcId> {
        self.registry.lookup(name)
    }

    fn procedure_name(&self, id: ProcId) -> Option<&str> {
        self.registry.name(id)
    }

    #[inline]
    fn kind(&self, id: ProcId) -> Option<ProcKind> {
        self.registry.kind(id)
    }

    fn procedure_count(&self) -> usize {
        self.registry.len()
    }

    #[inline]
    fn call(
        &mut self,
        id: ProcId,
        txn: &mut Txn<'_>,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let procedure = self
            .registry
            .get(id)
            .expect("the store calls only a write procedure");
        procedure(&self.workload, txn, args, reply)
    }

    fn read(
        &self,
        id: ProcId,
        segment: &Segment,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<(), ProcError> {
        let procedure = self
            .registry
            .get_read(id)
            .expect("the store reads only with a read procedure");
        procedure(&self.workload, segment, args, reply)
    }

    #[inline]
    fn prefetch(&self, id: ProcId, segment: &Segment, args: &[u8]) {
        if let Some(prefetch) = self.registry.prefetch(id) {
            prefetch(&self.workload, segment, args);
        }
    }

    fn load(&self, segment: &mut Segment) {
        self.workload.load(segment);
    }

    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        self.workload.check(segment)
    }

    fn check_quick(&self, segment: &Segment) -> Result<(), Inconsistency> {
        self.workload.check_quick(segment)
    }

    fn replica(&self) -> Box<dyn DataModel> {
        Compiled::boxed(self.workload.clone())
    }

    fn driver(&self, seed: u64) -> Option<Box<dyn Driver>> {
        Some(Box::new(self.workload.driver(seed)))
    }
}
