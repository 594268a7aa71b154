//! Procedures, the registry that names them, and the store that runs them in txns.

use std::collections::BTreeMap;
use std::fmt;

use tandem_memory::{RedoRecord, Segment, Txn};

/// A procedure: runs inside one txn on the workload `W`'s tables, reads its arguments, writes
/// its reply. Returning `Err` rolls the whole txn back.
pub type Procedure<W> = fn(&W, &mut Txn<'_>, &[u8], &mut Vec<u8>) -> Result<(), ProcError>;

/// A hint for a procedure: starts loading the cache lines that a call with these arguments will
/// touch, so an executor can overlap memory latency with the call before it. It changes
/// nothing and must ignore arguments it cannot read.
pub type Prefetch<W> = fn(&W, &Segment, &[u8]);

/// Why a procedure rolled its txn back.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProcError {
    /// The arguments are malformed; the caller must fix them.
    #[error("bad arguments: {0}")]
    BadArgs(&'static str),
    /// The procedure decided to roll back, as TPC-C's new-order does for an unknown item.
    #[error("rolled back: {0}")]
    Rollback(&'static str),
}

/// Why [`Store::call`] did not commit.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("no procedure has id {0}")]
    UnknownProcedure(u16),
    #[error(transparent)]
    Proc(#[from] ProcError),
}

/// A procedure's index in its registry: cheap to send and to dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId(pub u16);

/// Procedures of a workload by name and by id.
pub struct Registry<W> {
    procedures: Vec<(&'static str, Procedure<W>)>,
    prefetches: Vec<Option<Prefetch<W>>>,
    by_name: BTreeMap<&'static str, ProcId>,
}

impl<W> fmt::Debug for Registry<W> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registry")
            .field("procedures", &self.by_name)
            .finish()
    }
}

impl<W> Default for Registry<W> {
    fn default() -> Self {
        Registry {
            procedures: Vec::new(),
            prefetches: Vec::new(),
            by_name: BTreeMap::new(),
        }
    }
}

impl<W> Registry<W> {
    pub fn new() -> Registry<W> {
        Registry::default()
    }

    /// Adds a procedure; its id is its registration order. Panics on a duplicate name.
    pub fn register(&mut self, name: &'static str, procedure: Procedure<W>) -> ProcId {
        let id = ProcId(u16::try_from(self.procedures.len()).expect("at most 65536 procedures"));
        let previous = self.by_name.insert(name, id);
        assert!(previous.is_none(), "procedure '{name}' registered twice");
        self.procedures.push((name, procedure));
        self.prefetches.push(None);
        id
    }

    /// Gives procedure `id` a prefetch hint. Panics if `id` is not registered.
    pub fn set_prefetch(&mut self, id: ProcId, prefetch: Prefetch<W>) {
        self.prefetches[usize::from(id.0)] = Some(prefetch);
    }

    pub fn lookup(&self, name: &str) -> Option<ProcId> {
        self.by_name.get(name).copied()
    }

    pub fn name(&self, id: ProcId) -> Option<&'static str> {
        self.procedures
            .get(usize::from(id.0))
            .map(|(name, _)| *name)
    }

    pub fn get(&self, id: ProcId) -> Option<Procedure<W>> {
        self.procedures
            .get(usize::from(id.0))
            .map(|(_, procedure)| *procedure)
    }

    pub fn prefetch(&self, id: ProcId) -> Option<Prefetch<W>> {
        self.prefetches.get(usize::from(id.0)).copied().flatten()
    }

    pub fn len(&self) -> usize {
        self.procedures.len()
    }

    pub fn is_empty(&self) -> bool {
        self.procedures.is_empty()
    }
}

/// A segment holding one workload's tables, with the procedures that run on it.
///
/// Calls are serial: one txn at a time, no locks (the group's executor model).
#[derive(Debug)]
pub struct Store<W> {
    segment: Segment,
    workload: W,
    registry: Registry<W>,
}

impl<W: crate::Workload> Store<W> {
    /// Loads the workload's initial database into `segment` and wraps both.
    pub fn load(mut segment: Segment, workload: W) -> Store<W> {
        workload.load(&mut segment);
        Store::open(segment, workload)
    }

    /// A store over a segment that already holds the workload's database (a replica that
    /// received it, or one loaded earlier).
    pub fn open(segment: Segment, workload: W) -> Store<W> {
        Store {
            segment,
            workload,
            registry: W::registry(),
        }
    }
}

impl<W> Store<W> {
    /// Runs procedure `id` in a txn: commits and returns the redo record when it succeeds,
    /// aborts (restoring every byte) when it fails.
    pub fn call(
        &mut self,
        id: ProcId,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<&RedoRecord, CallError> {
        let procedure = self
            .registry
            .get(id)
            .ok_or(CallError::UnknownProcedure(id.0))?;
        reply.clear();
        let lsn_before = self.segment.lsn();
        let mut txn = self.segment.begin();
        if let Err(err) = procedure(&self.workload, &mut txn, args, reply) {
            // The segment asserts that an abort restores every declared byte and takes no LSN.
            txn.abort();
            reply.clear();
            return Err(err.into());
        }
        let redo = txn.commit();
        assert_eq!(redo.lsn(), lsn_before + 1, "a commit takes the next LSN");
        Ok(redo)
    }

    /// Starts loading what a later call to `id` with `args` will touch; changes nothing.
    #[inline]
    pub fn prefetch(&self, id: ProcId, args: &[u8]) {
        if let Some(prefetch) = self.registry.prefetch(id) {
            prefetch(&self.workload, &self.segment, args);
        }
    }

    /// Gives the segment and the workload back, ending the store.
    pub fn into_parts(self) -> (Segment, W) {
        (self.segment, self.workload)
    }

    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    pub fn workload(&self) -> &W {
        &self.workload
    }

    pub fn registry(&self) -> &Registry<W> {
        &self.registry
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registry_names_and_ids_agree() {
        fn nothing(_: &(), _: &mut Txn<'_>, _: &[u8], _: &mut Vec<u8>) -> Result<(), ProcError> {
            Ok(())
        }
        let mut registry: Registry<()> = Registry::new();
        let a = registry.register("a", nothing);
        let b = registry.register("b", nothing);
        assert_eq!((a, b), (ProcId(0), ProcId(1)));
        assert_eq!(registry.lookup("b"), Some(b));
        assert_eq!(registry.name(a), Some("a"));
        assert!(registry.get(ProcId(2)).is_none());
    }

    #[test]
    #[should_panic(expected = "registered twice")]
    fn duplicate_names_panic() {
        fn nothing(_: &(), _: &mut Txn<'_>, _: &[u8], _: &mut Vec<u8>) -> Result<(), ProcError> {
            Ok(())
        }
        let mut registry: Registry<()> = Registry::new();
        registry.register("a", nothing);
        registry.register("a", nothing);
    }
}

#[cfg(test)]
mod prefetch_tests {
    use super::*;
    use crate::Workload;
    use crate::workloads::debit_credit::{DebitCredit, DebitCreditConfig};
    use crate::workloads::order_entry::{OrderEntry, OrderEntryConfig};
    use tandem_memory::Strategy;

    /// Prefetch hints read arguments from outside; garbage must neither panic nor change a byte.
    fn prefetch_garbage<W: Workload>(store: &Store<W>) {
        let before = store.segment().bytes().to_vec();
        let mut rng = crate::Rng::new(3);
        for len in 0..80 {
            let args: Vec<u8> = (0..len).map(|_| rng.next_u64() as u8).collect();
            for id in 0..=store.registry().len() as u16 {
                store.prefetch(ProcId(id), &args);
                store.prefetch(ProcId(id), &[0xff; 64]);
            }
        }
        assert_eq!(store.segment().bytes(), &before[..]);
    }

    #[test]
    fn prefetch_hints_ignore_garbage_and_change_nothing() {
        let len = 4 << 20;
        let config = DebitCreditConfig {
            accounts_per_branch: 1000,
            ..Default::default()
        };
        let debit_credit = DebitCredit::new(len, &config).unwrap();
        let segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        prefetch_garbage(&Store::load(segment, debit_credit));

        let config = OrderEntryConfig {
            item_count: 1000,
            customers_per_district: 100,
            orders_per_district: 64,
            history_per_warehouse: 256,
            ..Default::default()
        };
        let order_entry = OrderEntry::new(len, &config).unwrap();
        let segment = Segment::anonymous(len, Strategy::V3InlineLog).unwrap();
        prefetch_garbage(&Store::load(segment, order_entry));
    }
}
