//! Procedures, the registry that names them, and the store that runs them in txns.

use std::collections::BTreeMap;
use std::fmt;

use tandem_memory::{RedoRecord, Segment, Txn};

use crate::dedup::{DedupEntry, DedupTable, Probe};
use crate::model::{DataModel, ProcKind};

/// A procedure: runs inside one txn on the workload `W`'s tables, reads its arguments, writes
/// its reply. Returning `Err` rolls the whole txn back.
pub type Procedure<W> = fn(&W, &mut Txn<'_>, &[u8], &mut Vec<u8>) -> Result<(), ProcError>;

/// A read-only procedure: reads the workload's tables from the segment (it cannot write, by
/// its type), reads its arguments, writes its reply. It takes no LSN and leaves no dedup slot:
/// running it again is harmless. A backup may run it on its own copy (DESIGN.md, "Versioned
/// reads").
pub type ReadProcedure<W> = fn(&W, &Segment, &[u8], &mut Vec<u8>) -> Result<(), ProcError>;

/// What a registered procedure is.
enum Kind<W> {
    Write(Procedure<W>),
    Read(ReadProcedure<W>),
}

impl<W> Clone for Kind<W> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<W> Copy for Kind<W> {}

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
    /// The procedure refused the call with this message for its caller, and wrote nothing
    /// that stays (the Redis model's error replies: "WRONGTYPE …", "ERR syntax error").
    #[error("{0}")]
    Failed(String),
}

/// Why [`Store::call`] or [`Store::call_once`] did not commit. Nothing was written.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CallError {
    #[error("no procedure has id {0}")]
    UnknownProcedure(u16),
    #[error(transparent)]
    Proc(#[from] ProcError),
    /// The procedure only reads: it runs on a replica's segment, not in a txn (see
    /// [`Store::read`]).
    #[error("procedure {0} is read-only: it runs with Store::read")]
    ReadOnly(u16),
    /// The client already committed a later call, so this one is an old duplicate: its reply
    /// was superseded and is no longer kept. Only a client with more than one call in flight,
    /// or a message delayed past its retry, sees this.
    #[error("seq {seq} is older than the client's last committed seq {last}")]
    StaleSeq { seq: u64, last: u64 },
    /// The call is a new client's first and the dedup table already holds all the clients it
    /// admits (none in a segment too small to have one).
    #[error(
        "the dedup table holds its maximum of {clients_max} clients; give a larger database \
         size"
    )]
    DedupFull { clients_max: usize },
    /// The call's reply is longer than its client could be sent (the node's frame limit): it
    /// rolled back.
    #[error(
        "the call's {reply_len}-byte reply is longer than the {reply_len_max} bytes a reply \
         frame carries; return less, or raise tuning.max_frame_len"
    )]
    ReplyTooLong {
        reply_len: usize,
        reply_len_max: usize,
    },
    /// The call wrote more than one record may carry to the backups (a batch must fit a
    /// frame and the retained tail): it rolled back before anything was applied.
    #[error(
        "the write's redo record could be up to {record_len_bound} bytes, more than the \
         {record_len_max} bytes one record may carry to the backups; write less at once, or \
         raise tuning.tail_bytes_max (a record takes at most half of it) and \
         tuning.max_frame_len"
    )]
    RecordTooLong {
        record_len_bound: usize,
        record_len_max: usize,
    },
}

/// The most bytes the redo record of a txn that declared `declared_bytes` in
/// `declared_ranges` can encode to. Redo capture clips runs to the declared ranges, so the
/// record's data is at most the bytes declared. Each run costs two varints: a range's first
/// run at most 20 bytes; each later run of the range follows at least 8 unchanged declared
/// bytes, which pay for its varints (an offset gap and a length inside a range of the
/// segment take 4 bytes each at most). The record's header (call id, run count) takes at
/// most 64.
pub fn record_len_bound(declared_bytes: usize, declared_ranges: usize) -> usize {
    const RECORD_HEADER_MAX: usize = 64;
    const PER_RANGE_MAX: usize = 2 * 10;
    declared_bytes
        .saturating_add(declared_ranges.saturating_mul(PER_RANGE_MAX))
        .saturating_add(RECORD_HEADER_MAX)
}

/// What [`Store::call_once`] did with a call that did not fail.
#[derive(Debug)]
pub enum Deduped<'a> {
    /// The call ran and committed with this redo record, which also carries its dedup slot.
    Committed(&'a RedoRecord),
    /// The call had committed before, at `lsn`: nothing ran, no LSN was taken, and the reply
    /// it stored then is in the reply buffer.
    Duplicate { lsn: u64 },
    /// The call had committed before, at `lsn`, but its `reply_len`-byte reply was too long
    /// for the dedup table's heap to keep: nothing ran, no LSN was taken, and the reply
    /// buffer is empty. The client can only be told that the call ran once.
    DuplicateReplyNotKept { lsn: u64, reply_len: usize },
    /// The procedure is read-only: it read the segment at its LSN and wrote the reply; no LSN
    /// was taken and no dedup slot written.
    Read,
}

/// A procedure's index in its registry: cheap to send and to dispatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProcId(pub u16);

/// Procedures of a workload by name and by id.
pub struct Registry<W> {
    procedures: Vec<(&'static str, Kind<W>)>,
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
        self.add(name, Kind::Write(procedure))
    }

    /// Adds a read-only procedure; its id is its registration order. Panics on a duplicate
    /// name.
    pub fn register_read(&mut self, name: &'static str, procedure: ReadProcedure<W>) -> ProcId {
        self.add(name, Kind::Read(procedure))
    }

    fn add(&mut self, name: &'static str, kind: Kind<W>) -> ProcId {
        let id = ProcId(u16::try_from(self.procedures.len()).expect("at most 65536 procedures"));
        let previous = self.by_name.insert(name, id);
        assert!(previous.is_none(), "procedure '{name}' registered twice");
        self.procedures.push((name, kind));
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

    /// The procedure `id` if it writes (runs in a txn).
    pub fn get(&self, id: ProcId) -> Option<Procedure<W>> {
        match self.procedures.get(usize::from(id.0)) {
            Some((_, Kind::Write(procedure))) => Some(*procedure),
            _ => None,
        }
    }

    /// The procedure `id` if it is read-only.
    pub fn get_read(&self, id: ProcId) -> Option<ReadProcedure<W>> {
        match self.procedures.get(usize::from(id.0)) {
            Some((_, Kind::Read(procedure))) => Some(*procedure),
            _ => None,
        }
    }

    /// Whether procedure `id` is registered and read-only.
    pub fn is_read(&self, id: ProcId) -> bool {
        self.get_read(id).is_some()
    }

    /// What procedure `id` is, if it is registered.
    pub fn kind(&self, id: ProcId) -> Option<ProcKind> {
        match self.procedures.get(usize::from(id.0)) {
            Some((_, Kind::Write(_))) => Some(ProcKind::Write),
            Some((_, Kind::Read(_))) => Some(ProcKind::Read),
            None => None,
        }
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

/// A segment holding one data model's database and the dedup table, with the model whose
/// procedures run on it.
///
/// Calls are serial: one txn at a time, no locks (the group's executor model).
#[derive(Debug)]
pub struct Store {
    segment: Segment,
    model: Box<dyn DataModel>,
    dedup: DedupTable,
    /// Clients with a slot in `dedup`: counted from the segment when the store opens, and
    /// kept up to date by `call_once`, the only writer of slots.
    dedup_clients: usize,
    /// Longest reply a call may have: a longer one rolls its call back (see
    /// [`Store::set_reply_len_max`]).
    reply_len_max: usize,
    /// Longest redo record a write may make: one that could be longer rolls back (see
    /// [`Store::set_record_len_max`]).
    record_len_max: usize,
}

/// The slot a committing call writes: which one, and for which call.
#[derive(Clone, Copy, Debug)]
struct DedupWrite {
    index: usize,
    client_id: u64,
    seq: u64,
    client_new: bool,
}

impl Store {
    /// Loads the model's initial database into `segment` and wraps both.
    pub fn load(mut segment: Segment, model: Box<dyn DataModel>) -> Store {
        model.load(&mut segment);
        Store::open(segment, model)
    }

    /// A store over a segment that already holds the workload's database (a replica that
    /// received it, or one loaded earlier).
    ///
    /// Counts the dedup table's clients, one read per slot: a backup promoted to primary opens
    /// its segment this way and carries on with the table its records built.
    pub fn open(segment: Segment, model: Box<dyn DataModel>) -> Store {
        let dedup = DedupTable::for_segment_len(segment.len());
        let dedup_clients = dedup.clients(&segment);
        assert!(
            dedup_clients <= dedup.slot_count(),
            "the dedup table counts more clients than slots"
        );
        Store {
            segment,
            model,
            dedup,
            dedup_clients,
            reply_len_max: usize::MAX,
            record_len_max: usize::MAX,
        }
    }

    /// Sets the longest reply a call may have (no limit by default). A node sets it to what a
    /// reply frame carries: a write with a longer reply rolls back with
    /// [`CallError::ReplyTooLong`], so no client is ever owed an answer it cannot read.
    pub fn set_reply_len_max(&mut self, reply_len_max: usize) {
        self.reply_len_max = reply_len_max;
    }

    /// Sets the longest redo record a write may make (no limit by default). A node sets it
    /// to what one batch may carry to its backups: a write that could make a longer one
    /// rolls back with [`CallError::RecordTooLong`] before anything is applied, so no
    /// commit waits for good on a record the links cannot ship.
    pub fn set_record_len_max(&mut self, record_len_max: usize) {
        self.record_len_max = record_len_max;
    }

    /// Runs procedure `id` in a txn: commits and returns the redo record when it succeeds,
    /// aborts (restoring every byte) when it fails. Nothing is deduplicated: this is
    /// [`call_once`](Store::call_once) for client 0. A reply may be of any length.
    pub fn call(
        &mut self,
        id: ProcId,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<&RedoRecord, CallError> {
        self.run(id, args, reply, None)
    }

    /// Runs a client's call exactly once: call `seq` of client `client_id`, to procedure `id`.
    ///
    /// - Client 0 is not deduplicated: the call runs as [`call`](Store::call) runs it.
    /// - `seq` equal to the client's last committed seq: the call is a retry of a call that
    ///   committed, so nothing runs and no LSN is taken; the reply stored then is copied into
    ///   `reply`, and [`Deduped::Duplicate`] carries the LSN it committed at.
    /// - `seq` below it: [`CallError::StaleSeq`].
    /// - `seq` above it, or a client without a slot: the procedure runs; when it commits, the
    ///   same txn writes the client's slot (seq, the commit's LSN, the reply), so the redo
    ///   record carries the slot. A new client takes a slot first, or gets
    ///   [`CallError::DedupFull`] before anything runs.
    ///
    /// A call whose procedure rolls back writes no slot, so a retry of the same seq runs it
    /// again. That is still exactly-once: the rolled-back attempt had no effect, and a client
    /// retries only a call whose answer it did not see.
    ///
    /// A reply may be of any length up to a reply frame; one the table's heap cannot hold
    /// commits all the same, and a retry of it gets [`Deduped::DuplicateReplyNotKept`].
    pub fn call_once(
        &mut self,
        client_id: u64,
        seq: u64,
        id: ProcId,
        args: &[u8],
        reply: &mut Vec<u8>,
    ) -> Result<Deduped<'_>, CallError> {
        // A model is asked what a procedure is at every call: it may add procedures while it
        // serves.
        if self.model.kind(id) == Some(ProcKind::Read) {
            return self.read(id, args, reply).map(|()| Deduped::Read);
        }
        if client_id == 0 {
            return self.run(id, args, reply, None).map(Deduped::Committed);
        }
        let write = match self.dedup.probe(&self.segment, client_id) {
            Probe::Found { index, slot } => {
                if seq == slot.seq() && !skip_dedup() {
                    self.dedup.read_reply(&self.segment, &slot, reply);
                    if !slot.reply_kept() {
                        return Ok(Deduped::DuplicateReplyNotKept {
                            lsn: slot.lsn(),
                            reply_len: slot.reply_len(),
                        });
                    }
                    return Ok(Deduped::Duplicate { lsn: slot.lsn() });
                }
                if seq < slot.seq() {
                    return Err(CallError::StaleSeq {
                        seq,
                        last: slot.seq(),
                    });
                }
                DedupWrite {
                    index,
                    client_id,
                    seq,
                    client_new: false,
                }
            }
            Probe::Vacant { index } if self.dedup_clients < self.dedup.clients_max() => {
                DedupWrite {
                    index,
                    client_id,
                    seq,
                    client_new: true,
                }
            }
            Probe::Vacant { .. } | Probe::Full => {
                return Err(CallError::DedupFull {
                    clients_max: self.dedup.clients_max(),
                });
            }
        };
        self.run(id, args, reply, Some(write))
            .map(Deduped::Committed)
    }

    /// What the dedup table holds for `client_id`: its last committed call. `None` for
    /// client 0 and for a client that has not committed a deduplicated call.
    pub fn dedup_entry(&self, client_id: u64) -> Option<DedupEntry> {
        self.dedup.entry(&self.segment, client_id)
    }

    /// The segment's dedup table: where it is and how many clients it admits.
    pub fn dedup(&self) -> &DedupTable {
        &self.dedup
    }

    /// Runs read-only procedure `id` on the segment as it stands.
    pub fn read(&self, id: ProcId, args: &[u8], reply: &mut Vec<u8>) -> Result<(), CallError> {
        read(&*self.model, &self.segment, id, args, reply)?;
        if reply.len() > self.reply_len_max {
            let reply_len = reply.len();
            reply.clear();
            return Err(CallError::ReplyTooLong {
                reply_len,
                reply_len_max: self.reply_len_max,
            });
        }
        Ok(())
    }

    /// Runs procedure `id` in a txn that, when it commits, also writes `dedup`'s slot.
    fn run(
        &mut self,
        id: ProcId,
        args: &[u8],
        reply: &mut Vec<u8>,
        dedup: Option<DedupWrite>,
    ) -> Result<&RedoRecord, CallError> {
        match self.model.kind(id) {
            Some(ProcKind::Write) => {}
            Some(ProcKind::Read) => return Err(CallError::ReadOnly(id.0)),
            None => return Err(CallError::UnknownProcedure(id.0)),
        }
        reply.clear();
        let lsn_before = self.segment.lsn();
        let mut txn = self.segment.begin();
        if let Err(err) = self.model.call(id, &mut txn, args, reply) {
            // The segment asserts that an abort restores every declared byte and takes no LSN.
            txn.abort();
            self.model.call_ended(false);
            reply.clear();
            return Err(err.into());
        }
        if reply.len() > self.reply_len_max {
            txn.abort();
            self.model.call_ended(false);
            let reply_len = reply.len();
            reply.clear();
            return Err(CallError::ReplyTooLong {
                reply_len,
                reply_len_max: self.reply_len_max,
            });
        }
        if let Some(write) = dedup {
            // A reply the heap cannot hold is not kept; the call commits all the same.
            self.dedup
                .record(&mut txn, write.index, write.client_id, write.seq, reply);
        }
        let (declared_bytes, declared_ranges) = txn.declared();
        let record_len_bound = record_len_bound(declared_bytes, declared_ranges);
        if record_len_bound > self.record_len_max {
            txn.abort();
            self.model.call_ended(false);
            reply.clear();
            return Err(CallError::RecordTooLong {
                record_len_bound,
                record_len_max: self.record_len_max,
            });
        }
        if let Some(write) = dedup
            && write.client_new
        {
            self.dedup_clients += 1;
            assert!(self.dedup_clients <= self.dedup.clients_max());
        }
        let redo = txn.commit();
        self.model.call_ended(true);
        assert_eq!(redo.lsn(), lsn_before + 1, "a commit takes the next LSN");
        Ok(redo)
    }

    /// Starts loading what a later call to `id` with `args` will touch; changes nothing.
    #[inline]
    pub fn prefetch(&self, id: ProcId, args: &[u8]) {
        self.model.prefetch(id, &self.segment, args);
    }

    /// Gives the segment and the model back, ending the store.
    pub fn into_parts(self) -> (Segment, Box<dyn DataModel>) {
        (self.segment, self.model)
    }

    pub fn segment(&self) -> &Segment {
        &self.segment
    }

    /// The segment, for a checkpoint's snapshot only (`Segment::begin_snapshot` and its
    /// steps, which copy pages and change no byte): every change of its bytes goes through
    /// [`Store::call`].
    pub fn segment_for_snapshot(&mut self) -> &mut Segment {
        &mut self.segment
    }

    pub fn model(&self) -> &dyn DataModel {
        &*self.model
    }

    /// The workload of a model compiled from `W` (tests and benchmarks read its tables).
    /// Panics if the store's model is another one: asking for the wrong type is a bug.
    pub fn workload<W: crate::Workload>(&self) -> &W {
        let model: &dyn std::any::Any = &*self.model;
        match model.downcast_ref::<crate::Compiled<W>>() {
            Some(compiled) => compiled.workload(),
            None => panic!(
                "the store serves '{}', not a compiled '{}'",
                self.model.name(),
                W::NAME
            ),
        }
    }

    /// The model, to add procedures to while it serves.
    pub fn model_mut(&mut self) -> &mut dyn DataModel {
        &mut *self.model
    }
}

/// Whether the skip-dedup bug is planted: a retried call then runs again.
fn skip_dedup() -> bool {
    #[cfg(feature = "inject-bugs")]
    if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::SkipDedup) {
        return true;
    }
    false
}

/// Runs read-only procedure `id` of `model` on `segment`: what a backup, which holds a
/// segment and no store, runs for a read. A reply may be of any length.
pub fn read(
    model: &dyn DataModel,
    segment: &Segment,
    id: ProcId,
    args: &[u8],
    reply: &mut Vec<u8>,
) -> Result<(), CallError> {
    match model.kind(id) {
        Some(ProcKind::Read) => {}
        Some(ProcKind::Write) | None => return Err(CallError::UnknownProcedure(id.0)),
    }
    reply.clear();
    if let Err(err) = model.read(id, segment, args, reply) {
        reply.clear();
        return Err(err.into());
    }
    Ok(())
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
mod record_bound_tests {
    use proptest::prelude::*;
    use tandem_memory::{Segment, Strategy};

    use super::record_len_bound;

    /// Declared ranges, each with which of its 8-byte words the txn changes (a bit per word,
    /// the pattern repeating).
    /// Cases either of tiny ranges, every byte changed (where per-run costs dominate), or of
    /// ranges up to 4 KiB with any pattern.
    fn ranges() -> impl proptest::strategy::Strategy<Value = Vec<(usize, usize, u64)>> {
        let tiny = (0usize..60_000, 1usize..8, Just(u64::MAX));
        let any_size = (0usize..60_000, 1usize..4096, any::<u64>());
        prop_oneof![
            proptest::collection::vec(tiny, 1..200),
            proptest::collection::vec(any_size, 1..40),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]

        /// Whatever a txn changes inside what it declared, its record encodes to no more than
        /// the bound the store checks before it commits.
        #[test]
        fn a_record_never_encodes_longer_than_its_bound(
            ranges in ranges(),
            client_id in any::<u64>(),
            seq in any::<u64>(),
        ) {
            let mut segment = Segment::anonymous(64 << 10, Strategy::V3InlineLog).unwrap();
            let mut txn = segment.begin();
            for (offset, len, pattern) in &ranges {
                let len = (*len).min((64 << 10) - offset);
                let bytes = txn.set_range(*offset, len);
                for (index, byte) in bytes.iter_mut().enumerate() {
                    if pattern >> ((index / 8) % 64) & 1 == 1 {
                        *byte = byte.wrapping_add(1 + index as u8 % 7);
                    }
                }
            }
            let (declared_bytes, declared_ranges) = txn.declared();
            let redo = txn.commit();
            let call = tandem_redo::CallId { client_id, seq };
            let encoded = tandem_redo::encoded_size(call, redo).total();
            prop_assert!(
                encoded <= record_len_bound(declared_bytes, declared_ranges),
                "{encoded} > bound of {declared_bytes} bytes in {declared_ranges} ranges"
            );
        }
    }
}
