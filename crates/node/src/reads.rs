//! Reads on a backup (DESIGN.md, "Versioned reads"): when a client's read may be served, what
//! it gets, when the backup must ask the primary something for it, and when the applier must
//! hold further batches back for it.
//!
//! A read names `min_lsn`, the highest LSN its client has seen, and a [`ReadConsistency`]:
//! - linearizable (the default): the backup asks its primary a `ReadIndex` question after the
//!   read arrived and raises `min_lsn` to the answer, the primary's released LSN, which is at
//!   least every write acknowledged before the read started (see
//!   `tandem_replication::Primary`'s answer for why). One question serves every read that
//!   arrived since the previous one, and several may be on their way (Raft's ReadIndex);
//! - session: `min_lsn` alone (read-your-writes and monotonic reads);
//! - bounded: `min_lsn` raised to a released LSN the backup heard no earlier than the read's
//!   staleness before it arrived; it waits for the next heartbeat if none was heard since.
//!
//! The backup then serves it once it has applied `min_lsn` and nothing it applied lies beyond
//! the LSN the primary says it released: a record above that may still be discarded by a view
//! change, and a reader must never see one. While a waiting read needs only that release,
//! applying more would move the state past what it may show, so the applier holds batches
//! back ([`BackupReads::holding`]). A read still waiting at its deadline is answered `Busy`
//! (the stub then asks the primary).
//!
//! The runtime's applier thread and the simulator's backups keep one [`BackupReads`] each and
//! carry out what it says: send the questions [`BackupReads::question`] hands out, pass the
//! answers to [`BackupReads::indexed`] and the released LSNs heard to
//! [`BackupReads::heard_released`], and turn each [`ReadAnswer`] into a frame. Time is the
//! driver's (`I` is any ordered instant, the runtime's `Instant`).

use std::time::Duration;

use tandem_replication::ReadConsistency;
use tandem_store::{CallError, DataModel, ProcId, ProcKind};

use crate::backup::ApplierRole;

/// How long a read may wait at a backup for its `min_lsn`, its question's answer and the
/// release of what the backup applied, before it is answered `Busy`. A few heartbeats:
/// longer, and asking the primary is faster. (The simulator scales it to its ticks.)
pub const READ_WAIT: Duration = Duration::from_millis(10);

/// How long a `ReadIndex` question may go unanswered before the backup asks again (it or its
/// answer may have been lost with a connection): a fifth of [`READ_WAIT`], so a read whose
/// first question was lost still has time for a second.
pub const READ_INDEX_RETRY: Duration = Duration::from_millis(2);

/// A client's read waiting at a backup; `to` is where its answer goes.
#[derive(Debug)]
pub struct WaitingRead<T, I> {
    pub seq: u64,
    pub proc_id: u16,
    pub min_lsn: u64,
    pub args: Vec<u8>,
    pub deadline: I,
    pub to: T,
    /// What the backup must learn before `min_lsn` is final.
    pub needs: Needs<I>,
}

/// What a read needs to learn from the primary before its `min_lsn` is final.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Needs<I> {
    /// Nothing: `min_lsn` is final (a session read, or a read whose question was answered).
    Nothing,
    /// The answer to a `ReadIndex` question asked after it arrived (linearizable).
    ReadIndex,
    /// A released LSN heard at or after this instant (bounded staleness).
    HeardSince(I),
}

impl<I> Needs<I> {
    /// What a read of `consistency` needs; `fresh_from(staleness_ms)` is the driver's instant
    /// that long before the read arrived.
    pub fn of(consistency: ReadConsistency, fresh_from: impl FnOnce(u32) -> I) -> Needs<I> {
        match consistency {
            ReadConsistency::Linearizable => Needs::ReadIndex,
            ReadConsistency::Session => Needs::Nothing,
            ReadConsistency::Bounded { staleness_ms } => {
                Needs::HeardSince(fresh_from(staleness_ms))
            }
        }
    }
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
    /// and may show up to `lsn_released`, and the read needs `min_lsn` (`None`: the primary
    /// had not yet said what it needs).
    Busy {
        lsn_applied: u64,
        lsn_released: u64,
        min_lsn: Option<u64>,
    },
}

/// A read as the backup holds it: with, for a linearizable one, the first question asked
/// after it arrived (`question`), whose answer or any later one settles its `min_lsn`.
#[derive(Debug)]
struct Held<T, I> {
    read: WaitingRead<T, I>,
    question: u64,
}

/// The reads waiting at a backup, and its `ReadIndex` questions.
#[derive(Debug)]
pub struct BackupReads<T, I> {
    waiting: Vec<Held<T, I>>,
    /// The longest reply body a read may return.
    reply_len_max: usize,
    /// The id of the first question (answers to lower ids are another role's).
    question_first: u64,
    /// The id the next question carries: reads that arrive now wait for it.
    question_next: u64,
    /// The last question sent, and when to ask again if no answer came (it or its answer
    /// may be lost: a connection reset, a new primary).
    asked: Option<(u64, I)>,
    /// The newest released LSN heard from the primary, and when.
    heard: Option<(I, u64)>,
}

impl<T, I: Ord + Copy> BackupReads<T, I> {
    /// No read waiting; a reply longer than `reply_len_max` is refused; questions are
    /// numbered from `question_first`. The driver gives each `BackupReads` of a node ids no
    /// other one used (the runtime a range per role from a process-wide counter, the
    /// simulator one per role epoch): an answer to an earlier role's question may still
    /// arrive, and taken for one of this role's it would settle reads that arrived after the
    /// primary answered.
    pub fn new(reply_len_max: usize, question_first: u64) -> BackupReads<T, I> {
        assert!(question_first >= 1, "question ids start at 1");
        BackupReads {
            waiting: Vec::new(),
            reply_len_max,
            question_first,
            question_next: question_first,
            asked: None,
            heard: None,
        }
    }

    pub fn push(&mut self, mut read: WaitingRead<T, I>) {
        #[cfg(feature = "inject-bugs")]
        if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::SkipReadIndex)
            && read.needs == Needs::ReadIndex
        {
            read.needs = Needs::Nothing;
        }
        self.settle_heard(&mut read);
        self.waiting.push(Held {
            read,
            question: self.question_next,
        });
    }

    pub fn len(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_empty(&self) -> bool {
        self.waiting.is_empty()
    }

    /// The `ReadIndex` question to send now, if any: one for the linearizable reads that
    /// arrived since the last question; one for a read that waits only for the primary to
    /// release what is applied (`lsn_applied` above `lsn_released`: the answer carries the
    /// released LSN one round trip from now, where the next heartbeat may be a tick away),
    /// unless a question is on its way already; and, once `now` reaches the time set when
    /// the last was sent, again for those still unanswered. `retry_at` is when to ask again
    /// if this one goes unanswered. The driver sends `Message::ReadIndex { id, .. }` to the
    /// primary.
    pub fn question(
        &mut self,
        now: I,
        retry_at: I,
        lsn_applied: u64,
        lsn_released: u64,
    ) -> Option<u64> {
        let unsettled = self
            .waiting
            .iter()
            .filter(|held| held.read.needs == Needs::ReadIndex);
        let mut arrived_since = false;
        let mut any = false;
        for held in unsettled {
            any = true;
            arrived_since |= held.question == self.question_next;
        }
        let retry_due = self.asked.is_some_and(|(_, at)| now >= at);
        let idle = self.asked.is_none() || retry_due;
        let release_awaited = self.holding(lsn_applied, lsn_released);
        if !(arrived_since || idle && (any || release_awaited)) {
            return None;
        }
        let id = self.question_next;
        self.question_next += 1;
        self.asked = Some((id, retry_at));
        Some(id)
    }

    /// The primary answered question `id` with `lsn_released`: every read that arrived
    /// before it was asked needs at least that LSN. An answer to a question this
    /// `BackupReads` never asked (an earlier role's, a peer's mistake) settles nothing;
    /// returns whether the answer was to one of its questions.
    pub fn indexed(&mut self, id: u64, lsn_released: u64) -> bool {
        if !(self.question_first..self.question_next).contains(&id) {
            return false;
        }
        for held in &mut self.waiting {
            if held.read.needs == Needs::ReadIndex && held.question <= id {
                held.read.min_lsn = held.read.min_lsn.max(lsn_released);
                held.read.needs = Needs::Nothing;
            }
        }
        if self.asked.is_some_and(|(asked, _)| asked <= id) {
            self.asked = None;
        }
        true
    }

    /// The primary said at `at` (a heartbeat, an answer) that it released up to `lsn`.
    pub fn heard_released(&mut self, at: I, lsn: u64) {
        let lsn = self.heard.map_or(lsn, |(_, heard)| heard.max(lsn));
        let at = self.heard.map_or(at, |(heard, _)| heard.max(at));
        self.heard = Some((at, lsn));
        let heard = self.heard;
        for held in &mut self.waiting {
            settle(heard, &mut held.read);
        }
    }

    fn settle_heard(&self, read: &mut WaitingRead<T, I>) {
        settle(self.heard, read);
    }

    /// Every waiting read ends now, at its next answer: its deadline becomes `now` (the
    /// applier cannot hold batches any longer, for a transfer or a handover).
    pub fn expire(&mut self, now: I) {
        for held in &mut self.waiting {
            held.read.deadline = held.read.deadline.min(now);
        }
    }

    /// Answers every read that can be answered at `now`: those whose `min_lsn` is final and
    /// applied while nothing applied lies beyond `lsn_released` (and the segment is no
    /// rewound one waiting for its transfer) run on the applier's segment with `model`;
    /// those past their deadline get `Busy`. The rest keep waiting.
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
            let read = &self.waiting[index].read;
            let settled = read.needs == Needs::Nothing;
            let answer = if settled
                && consistent
                && read.min_lsn <= lsn_applied
                && lsn_applied <= lsn_released
            {
                run_read(applier, model, read, self.reply_len_max)
            } else if now >= read.deadline {
                ReadAnswer::Busy {
                    lsn_applied,
                    lsn_released,
                    min_lsn: settled.then_some(read.min_lsn),
                }
            } else {
                index += 1;
                continue;
            };
            let held = self.waiting.swap_remove(index);
            send(held.read.to, held.read.seq, answer);
        }
    }

    /// Whether the applier must hold further batches back: some waiting read could be
    /// served as soon as the primary releases what is applied.
    pub fn holding(&self, lsn_applied: u64, lsn_released: u64) -> bool {
        lsn_applied > lsn_released && self.could_be_served(lsn_applied)
    }

    /// Whether some waiting read's `min_lsn` is final and applied: the applier stops applying
    /// to serve it.
    pub fn could_be_served(&self, lsn_applied: u64) -> bool {
        self.waiting
            .iter()
            .any(|held| held.read.needs == Needs::Nothing && held.read.min_lsn <= lsn_applied)
    }
}

/// Settles a bounded read once a released LSN was heard recently enough for it.
fn settle<T, I: Ord + Copy>(heard: Option<(I, u64)>, read: &mut WaitingRead<T, I>) {
    if let (Needs::HeardSince(since), Some((at, lsn))) = (read.needs, heard)
        && at >= since
    {
        read.min_lsn = read.min_lsn.max(lsn);
        read.needs = Needs::Nothing;
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
    use tandem_memory::{Segment, Strategy};
    use tandem_redo::TailLimits;
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
            needs: Needs::Nothing,
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
        let mut reads = BackupReads::new(1 << 20, 1);
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
        assert!(matches!(busy[..], [ReadAnswer::Busy { min_lsn, .. }] if min_lsn == Some(lsn + 1)));
    }

    #[test]
    fn a_linearizable_read_waits_for_the_answer_to_a_question_asked_after_it_arrived() {
        let (applier, model) = applier();
        let model = Some(&*model);
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20, 1);
        assert_eq!(reads.question(0, 10, 0, 0), None, "no read, no question");
        let linearizable = |min_lsn| WaitingRead {
            needs: Needs::ReadIndex,
            ..read(BALANCE.0, min_lsn, 100)
        };
        reads.push(linearizable(0));
        // Applied and released, but the primary has not said what was acknowledged.
        assert!(answers(&mut reads, &applier, model, lsn, 0).is_empty());
        assert!(
            !reads.could_be_served(lsn),
            "applying stops for no unsettled read"
        );
        assert_eq!(reads.question(0, 10, 0, 0), Some(1));
        assert_eq!(reads.question(1, 11, 0, 0), None, "asked already");
        // A read that arrives after question 1 left needs a question of its own.
        reads.push(linearizable(0));
        assert_eq!(reads.question(2, 12, 0, 0), Some(2));
        // The answer to 1 settles the first read only: it now needs LSN `lsn`.
        reads.indexed(1, lsn);
        let served = answers(&mut reads, &applier, model, lsn, 3);
        assert!(matches!(served[..], [ReadAnswer::Served { .. }]));
        assert_eq!(reads.len(), 1);
        // The answer to 2 says more was acknowledged than is applied: it waits, then Busy.
        reads.indexed(2, lsn + 1);
        assert!(answers(&mut reads, &applier, model, lsn, 4).is_empty());
        let busy = answers(&mut reads, &applier, model, lsn, 100);
        assert!(matches!(busy[..], [ReadAnswer::Busy { min_lsn, .. }] if min_lsn == Some(lsn + 1)));
    }

    #[test]
    fn a_read_waiting_only_for_the_release_asks_the_primary_once() {
        let (applier, model) = applier();
        let model = Some(&*model);
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20, 1);
        reads.push(read(BALANCE.0, lsn, 100));
        // Applied beyond what is known released: ask, rather than wait for a heartbeat.
        assert!(answers(&mut reads, &applier, model, lsn - 1, 0).is_empty());
        assert_eq!(reads.question(0, 10, lsn, lsn - 1), Some(1));
        assert_eq!(reads.question(1, 11, lsn, lsn - 1), None, "one on its way");
        assert_eq!(
            reads.question(10, 20, lsn, lsn - 1),
            Some(2),
            "lost: asked again"
        );
        // Released as far as applied: nothing to ask.
        assert!(reads.indexed(2, lsn));
        assert_eq!(reads.question(11, 21, lsn, lsn), None);
    }

    #[test]
    fn a_lost_question_is_asked_again_and_a_later_answer_settles_earlier_reads() {
        let (applier, model) = applier();
        let model = Some(&*model);
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20, 1);
        reads.push(WaitingRead {
            needs: Needs::ReadIndex,
            ..read(BALANCE.0, 0, 100)
        });
        assert_eq!(reads.question(0, 10, 0, 0), Some(1));
        assert_eq!(reads.question(9, 19, 0, 0), None);
        // No answer by 10: asked again under a new id.
        assert_eq!(reads.question(10, 20, 0, 0), Some(2));
        reads.indexed(2, lsn);
        let served = answers(&mut reads, &applier, model, lsn, 11);
        assert!(matches!(served[..], [ReadAnswer::Served { .. }]));
        // A late answer to 1 finds nothing to settle; answers to questions never asked (an
        // earlier role's) are ignored.
        assert!(reads.indexed(1, lsn));
        assert!(!reads.indexed(3, lsn));
        let mut later_role: BackupReads<u32, u64> = BackupReads::new(1 << 20, 100);
        later_role.push(WaitingRead {
            needs: Needs::ReadIndex,
            ..read(BALANCE.0, 0, 100)
        });
        assert!(!later_role.indexed(1, lsn), "another role's answer");
        assert_eq!(later_role.question(0, 10, 0, 0), Some(100));
        assert!(later_role.indexed(100, lsn));
        // An unsettled read at its deadline is Busy, saying the primary never answered.
        reads.push(WaitingRead {
            needs: Needs::ReadIndex,
            ..read(BALANCE.0, 0, 50)
        });
        let busy = answers(&mut reads, &applier, model, lsn, 50);
        assert!(matches!(busy[..], [ReadAnswer::Busy { min_lsn: None, .. }]));
    }

    #[test]
    fn a_bounded_read_takes_a_release_heard_recently_enough_or_waits_for_the_next() {
        let (applier, model) = applier();
        let model = Some(&*model);
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20, 1);
        reads.heard_released(5, lsn - 1);
        // Heard at 5, the read accepts what was heard from 3 on: it needs lsn - 1.
        reads.push(WaitingRead {
            needs: Needs::HeardSince(3),
            ..read(BALANCE.0, 0, 100)
        });
        let served = answers(&mut reads, &applier, model, lsn, 6);
        assert!(matches!(served[..], [ReadAnswer::Served { .. }]));
        // From 8 on: nothing heard since, so it waits for the next heartbeat, which says
        // more was released than is applied.
        reads.push(WaitingRead {
            needs: Needs::HeardSince(8),
            ..read(BALANCE.0, 0, 100)
        });
        assert!(answers(&mut reads, &applier, model, lsn, 9).is_empty());
        reads.heard_released(10, lsn + 2);
        assert!(answers(&mut reads, &applier, model, lsn, 11).is_empty());
        let busy = answers(&mut reads, &applier, model, lsn, 100);
        assert!(matches!(busy[..], [ReadAnswer::Busy { min_lsn, .. }] if min_lsn == Some(lsn + 2)));
        assert_eq!(
            reads.question(100, 110, 0, 0),
            None,
            "a bounded read asks nothing"
        );
    }

    #[test]
    fn a_backup_runs_no_writer_and_caps_what_a_read_returns() {
        let (applier, model) = applier();
        let lsn = applier.lsn_applied();
        let mut reads = BackupReads::new(1 << 20, 1);
        reads.push(read(DEBIT_CREDIT.0, 0, 0));
        let writes = answers(&mut reads, &applier, Some(&*model), lsn, 0);
        assert_eq!(
            writes,
            vec![ReadAnswer::Writes {
                proc_id: DEBIT_CREDIT.0
            }]
        );
        // A reply longer than the cap rolls back instead of leaving.
        let mut capped = BackupReads::new(2, 1);
        capped.push(read(BALANCE.0, 0, 0));
        let answer = answers(&mut capped, &applier, Some(&*model), lsn, 0);
        assert!(matches!(answer[..], [ReadAnswer::RolledBack { .. }]));
        // Expired reads end at the next answer.
        let mut expiring = BackupReads::new(1 << 20, 1);
        expiring.push(read(BALANCE.0, lsn + 5, 1_000));
        expiring.expire(3);
        assert!(matches!(
            answers(&mut expiring, &applier, Some(&*model), lsn, 3)[..],
            [ReadAnswer::Busy { .. }]
        ));
    }
}
