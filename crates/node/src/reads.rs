//! Reads on a backup (DESIGN.md, "Versioned reads"): when a client's read may be served, what
//! it gets, and when the applier must hold further batches back for it.
//!
//! A read names `min_lsn`, the highest LSN its client has seen. The backup serves it once it
//! has applied `min_lsn` and nothing it applied lies beyond the LSN the primary says it
//! released: a record above that may still be discarded by a view change, and a reader must
//! never see one. While a waiting read needs only that release, applying more would move the
//! state past what it may show, so the applier holds batches back ([`BackupReads::holding`]).
//! A read still waiting at its deadline is answered `Busy` (the stub then asks the primary).
//!
//! The runtime's applier thread keeps one [`BackupReads`] and turns each [`ReadAnswer`] into
//! a frame; time is the driver's (`I` is any ordered instant, the runtime's `Instant`).

use tandem_store::{CallError, DataModel, ProcId, ProcKind};

use crate::backup::ApplierRole;

/// A client's read waiting at a backup; `to` is where its answer goes.
#[derive(Debug)]
pub struct WaitingRead<T, I> {
    pub seq: u64,
    pub proc_id: u16,
    pub min_lsn: u64,
    pub args: Vec<u8>,
    pub deadline: I,
    pub to: T,
}

/// What a read gets.
#[derive(Debug, PartialEq, Eq)]
pub enum ReadAnswer {
    /// The procedure ran on the state at `lsn`, and returned `body`.
    Served { lsn: u64, body: Vec<u8> },
    /// The procedure ran on the state at `lsn` and refused (its reason), or its reply was
    /// longer than a reply may be.
    RolledBack { lsn: u64, reason: String },
    /// Procedure `proc_id` writes: only the primary runs it (or this backup is passive and
    /// runs nothing).
    Writes { proc_id: u16 },
    /// No procedure has id `proc_id`.
    Unknown { proc_id: u16 },
    /// The deadline passed before the backup could serve it: it had applied `lsn_applied`
    /// and may show up to `lsn_released`, and the read needs `min_lsn`.
    Busy {
        lsn_applied: u64,
        lsn_released: u64,
        min_lsn: u64,
    },
}

/// The reads waiting at a backup.
#[derive(Debug)]
pub struct BackupReads<T, I> {
    waiting: Vec<WaitingRead<T, I>>,
    /// The longest reply body a read may return.
    reply_len_max: usize,
}

impl<T, I: Ord + Copy> BackupReads<T, I> {
    /// No read waiting; a reply longer than `reply_len_max` is refused.
    pub fn new(reply_len_max: usize) -> BackupReads<T, I> {
        BackupReads {
            waiting: Vec::new(),
            reply_len_max,
        }
    }

    pub fn push(&mut self, read: WaitingRead<T, I>) {
        self.waiting.push(read);
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// Every waiting read ends now, at its next answer: its deadline becomes `now` (the
    /// applier cannot hold batches any longer, for a transfer or a handover).
    pub fn expire(&mut self, now: I) {
        for read in &mut self.waiting {
            read.deadline = read.deadline.min(now);
        }
    }

    /// Answers every read that can be answered at `now`: those whose `min_lsn` is applied
    /// while nothing applied lies beyond `lsn_released` (and the segment is no rewound one
    /// waiting for its transfer) run on the applier's segment with
    /// `model`; those past their deadline get `Busy`. The rest keep waiting.
    pub fn answer(
        &mut self,
        applier: &ApplierRole,
        model: Option<&dyn DataModel>,
        lsn_released: u64,
        now: I,
        mut send: impl FnMut(T, u64, ReadAnswer),
    ) {
        let lsn_applied = applier.lsn_applied();
        // A rewound segment shows no state of the group's history until its transfer.
        let consistent = !applier.is_diverged();
        let mut index = 0;
        while index < self.waiting.len() {
            let read = &self.waiting[index];
            let answer = if consistent && read.min_lsn <= lsn_applied && lsn_applied <= lsn_released
            {
                run_read(applier, model, read, self.reply_len_max)
            } else if now >= read.deadline {
                ReadAnswer::Busy {
                    lsn_applied,
                    lsn_released,
                    min_lsn: read.min_lsn,
                }
            } else {
                index += 1;
                continue;
            };
            let read = self.waiting.swap_remove(index);
            send(read.to, read.seq, answer);
        }
    }

    /// Whether the applier must hold further batches back: some waiting read could be
    /// served as soon as the primary releases what is applied.
    pub fn holding(&self, lsn_applied: u64, lsn_released: u64) -> bool {
        lsn_applied > lsn_released && self.could_be_served(lsn_applied)
    }

    /// Whether some waiting read's `min_lsn` is applied: the applier stops applying to serve
    /// it.
    pub fn could_be_served(&self, lsn_applied: u64) -> bool {
        self.waiting.iter().any(|read| read.min_lsn <= lsn_applied)
    }
}

/// Runs `read`'s procedure on the applier's segment, if it is a read-only procedure of
/// `model` and this backup is active.
fn run_read<T, I>(
    applier: &ApplierRole,
    model: Option<&dyn DataModel>,
    read: &WaitingRead<T, I>,
    reply_len_max: usize,
) -> ReadAnswer {
    let writes = ReadAnswer::Writes {
        proc_id: read.proc_id,
    };
    let (Some(segment), Some(model)) = (applier.segment(), model) else {
        return writes;
    };
    let id = ProcId(read.proc_id);
    if model.kind(id) == Some(ProcKind::Write) {
        return writes;
    }
    let lsn = applier.lsn_applied();
    // The body moves into the answer: a buffer kept for reuse would be copied out anyway.
    let mut body = Vec::new();
    match tandem_store::read(model, segment, id, &read.args, &mut body) {
        Ok(()) if body.len() > reply_len_max => ReadAnswer::RolledBack {
            lsn,
            reason: CallError::ReplyTooLong {
                reply_len: body.len(),
                reply_len_max,
            }
            .to_string(),
        },
        Ok(()) => ReadAnswer::Served { lsn, body },
        Err(CallError::Proc(err)) => ReadAnswer::RolledBack {
            lsn,
            reason: err.to_string(),
        },
        Err(_) => ReadAnswer::Unknown {
            proc_id: read.proc_id,
        },
    }
}

#[cfg(test)]
mod tests {
    use tandem_log::TailLimits;
    use tandem_memory::{Segment, Strategy};
    use tandem_store::{Compiled, Store};
    use tandem_workloads::debit_credit::{BALANCE, DEBIT_CREDIT, DebitCredit};

    use super::*;

    const SEGMENT_LEN: usize = 1 << 20;

    /// An applier whose account 0 holds 7, after the load and one deposit, and its model.
    fn applier() -> (ApplierRole, Box<dyn DataModel>) {
        let workload = DebitCredit::new(SEGMENT_LEN, &Default::default()).unwrap();
        let segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).unwrap();
        let mut store = Store::load(segment, Compiled::boxed(workload.clone()));
        let mut args = Vec::new();
        for field in [0u32, 0, 0] {
            args.extend_from_slice(&field.to_le_bytes());
        }
        args.extend_from_slice(&7i32.to_le_bytes());
        store.call(DEBIT_CREDIT, &args, &mut Vec::new()).unwrap();
        let (segment, _) = store.into_parts();
        let limits = TailLimits {
            records_max: 1_000,
            bytes_max: 1 << 20,
        };
        let applier = ApplierRole::active(segment, Vec::new(), limits);
        (applier, Compiled::boxed(workload))
    }

    fn read(proc_id: u16, min_lsn: u64, deadline: u64) -> WaitingRead<u32, u64> {
        WaitingRead {
            seq: 9,
            proc_id,
            min_lsn,
            args: 0u32.to_le_bytes().to_vec(),
            deadline,
            to: 1,
        }
    }

    fn answers(
        reads: &mut BackupReads<u32, u64>,
        applier: &ApplierRole,
        model: Option<&dyn DataModel>,
        lsn_released: u64,
        now: u64,
    ) -> Vec<ReadAnswer> {
        let mut out = Vec::new();
        reads.answer(applier, model, lsn_released, now, |_, _, answer| {
            out.push(answer)
        });
        out
    }

    #[test]
    fn a_read_waits_for_its_min_lsn_and_for_the_primary_to_release_what_is_applied() {
        let (applier, model) = applier();
        let model = Some(&*model);
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20);
        reads.push(read(BALANCE.0, lsn - 1, 100));
        // Applied beyond what the primary released: nothing is shown, and batches wait.
        assert!(answers(&mut reads, &applier, model, lsn - 1, 0).is_empty());
        assert!(reads.holding(lsn, lsn - 1));
        // Released: served, at the applied LSN.
        let served = answers(&mut reads, &applier, model, lsn, 0);
        let body = 7i32.to_le_bytes().to_vec();
        assert_eq!(served, vec![ReadAnswer::Served { lsn, body }]);
        assert!(reads.is_empty());
        // A read that needs a later LSN waits without holding batches, then is Busy.
        reads.push(read(BALANCE.0, lsn + 1, 100));
        assert!(answers(&mut reads, &applier, model, lsn, 99).is_empty());
        assert!(!reads.holding(lsn, lsn));
        let busy = answers(&mut reads, &applier, model, lsn, 100);
        assert!(matches!(busy[..], [ReadAnswer::Busy { min_lsn, .. }] if min_lsn == lsn + 1));
    }

    #[test]
    fn a_backup_runs_no_writer_and_caps_what_a_read_returns() {
        let (applier, model) = applier();
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20);
        reads.push(read(DEBIT_CREDIT.0, 0, 0));
        let writes = answers(&mut reads, &applier, Some(&*model), lsn, 0);
        assert_eq!(
            writes,
            vec![ReadAnswer::Writes {
                proc_id: DEBIT_CREDIT.0
            }]
        );
        // A reply longer than the cap rolls back instead of leaving.
        let mut capped = BackupReads::new(2);
        capped.push(read(BALANCE.0, 0, 0));
        let answer = answers(&mut capped, &applier, Some(&*model), lsn, 0);
        assert!(matches!(answer[..], [ReadAnswer::RolledBack { .. }]));
        // Expired reads end at the next answer.
        let mut expiring = BackupReads::new(1 << 20);
        expiring.push(read(BALANCE.0, lsn + 5, 1_000));
        expiring.expire(3);
        assert!(matches!(
            answers(&mut expiring, &applier, Some(&*model), lsn, 3)[..],
            [ReadAnswer::Busy { .. }]
        ));
    }
}
