//! The dedup table through the public API: duplicates answered from the table, stale seqs and
//! new clients of a full table refused without a change, rollbacks leaving no entry, slots
//! replicated with their call's redo record, and, as a property, no (client, seq) applied twice
//! whatever order retries arrive in.

use std::collections::{BTreeMap, BTreeSet};

use proptest::prelude::*;
use tandem_memory::{PAGE_SIZE, Segment, Strategy as Logging};
use tandem_store::{
    CallError, Compiled, DEDUP_REPLY_INLINE_MAX, DedupTable, Deduped, Driver, Inconsistency,
    Layout, ProcError, ProcId, Registry, Store, Table, Workload,
};
use tandem_workloads::debit_credit::{self, DEBIT_CREDIT, DebitCredit, DebitCreditConfig};
use tandem_workloads::order_entry::{self, NEW_ORDER, OrderEntry, OrderEntryConfig};

/// 128 dedup slots, 112 clients.
const SEGMENT_LEN: usize = 1 << 20;

fn debit_credit_config() -> DebitCreditConfig {
    DebitCreditConfig {
        accounts_per_branch: 2_000,
        history_bytes: 16 * 1024,
        overdraft_limit: Some(1_500_000),
        ..DebitCreditConfig::default()
    }
}

fn debit_credit(len: usize) -> Store {
    let workload = DebitCredit::new(len, &debit_credit_config()).unwrap();
    Store::load(
        Segment::anonymous(len, Logging::V3InlineLog).unwrap(),
        Compiled::boxed(workload),
    )
}

fn debit_credit_args(account: u32, delta: i32) -> Vec<u8> {
    let mut args = Vec::new();
    DebitCredit::encode_args(&mut args, account, 0, 0, delta);
    args
}

/// The LSN of a committed call; panics on any other outcome.
fn committed(outcome: Result<Deduped<'_>, CallError>) -> u64 {
    match outcome {
        Ok(Deduped::Committed(redo)) => redo.lsn(),
        other => panic!("expected a commit, got {other:?}"),
    }
}

#[test]
fn a_duplicate_returns_the_stored_reply_and_takes_no_lsn() {
    let mut store = debit_credit(SEGMENT_LEN);
    let mut reply = Vec::new();
    let lsn =
        committed(store.call_once(7, 1, DEBIT_CREDIT, &debit_credit_args(3, 500), &mut reply));
    assert_eq!(reply, 500i32.to_le_bytes());
    let entry = store.dedup_entry(7).expect("the commit wrote the slot");
    assert_eq!(
        (entry.seq(), entry.lsn(), entry.reply()),
        (1, lsn, Some(&reply[..]))
    );

    let before = store.segment().bytes().to_vec();
    // The retry carries the same call; even different arguments would not run again.
    for args in [debit_credit_args(3, 500), debit_credit_args(4, 9)] {
        let mut retry_reply = vec![0xee; 3];
        let outcome = store.call_once(7, 1, DEBIT_CREDIT, &args, &mut retry_reply);
        assert!(matches!(outcome, Ok(Deduped::Duplicate { lsn: at }) if at == lsn));
        assert_eq!(retry_reply, reply);
    }
    assert_eq!(store.segment().lsn(), lsn);
    assert_eq!(store.segment().bytes(), &before[..]);
    assert_eq!(
        store
            .workload::<DebitCredit>()
            .account_total(store.segment()),
        500
    );

    // The next seq runs, and replaces the stored call.
    let lsn_next =
        committed(store.call_once(7, 2, DEBIT_CREDIT, &debit_credit_args(3, 1), &mut reply));
    assert_eq!(lsn_next, lsn + 1);
    let entry = store.dedup_entry(7).unwrap();
    assert_eq!(
        (entry.seq(), entry.lsn(), entry.reply()),
        (2, lsn_next, Some(&501i32.to_le_bytes()[..]))
    );
    store
        .workload::<DebitCredit>()
        .check(store.segment())
        .unwrap();
}

#[test]
fn a_stale_seq_is_refused_and_changes_nothing() {
    let mut store = debit_credit(SEGMENT_LEN);
    let mut reply = Vec::new();
    committed(store.call_once(7, 5, DEBIT_CREDIT, &debit_credit_args(3, 500), &mut reply));
    let before = store.segment().bytes().to_vec();
    let lsn = store.segment().lsn();
    let err = store
        .call_once(7, 4, DEBIT_CREDIT, &debit_credit_args(3, 500), &mut reply)
        .unwrap_err();
    assert_eq!(err, CallError::StaleSeq { seq: 4, last: 5 });
    assert_eq!(
        err.to_string(),
        "seq 4 is older than the client's last committed seq 5"
    );
    assert_eq!(store.segment().lsn(), lsn);
    assert_eq!(store.segment().bytes(), &before[..]);
    assert_eq!(store.dedup_entry(7).unwrap().seq(), 5);
}

#[test]
fn a_rolled_back_call_leaves_no_entry_and_runs_again_on_retry() {
    let mut store = debit_credit(SEGMENT_LEN);
    let mut reply = Vec::new();
    let lsn = store.segment().lsn();
    // Over the overdraft limit: the procedure makes all four updates, then rolls back.
    let overdraft = debit_credit_args(3, -999_999);
    committed(store.call_once(9, 1, DEBIT_CREDIT, &overdraft, &mut reply));
    let err = store
        .call_once(9, 2, DEBIT_CREDIT, &overdraft, &mut reply)
        .unwrap_err();
    assert_eq!(err, CallError::Proc(ProcError::Rollback("overdraft limit")));
    assert!(reply.is_empty());
    assert_eq!(store.dedup_entry(9).unwrap().seq(), 1);
    // A new client whose first call rolls back takes no slot.
    let err = store
        .call_once(10, 1, DEBIT_CREDIT, &overdraft, &mut reply)
        .unwrap_err();
    assert!(matches!(err, CallError::Proc(ProcError::Rollback(_))));
    assert_eq!(store.dedup_entry(10), None);
    assert_eq!(store.segment().lsn(), lsn + 1);
    // A bad argument and an unknown procedure are refused before anything runs.
    let err = store
        .call_once(11, 1, DEBIT_CREDIT, &overdraft[..5], &mut reply)
        .unwrap_err();
    assert!(matches!(err, CallError::Proc(ProcError::BadArgs(_))));
    let err = store
        .call_once(11, 1, ProcId(9), &overdraft, &mut reply)
        .unwrap_err();
    assert_eq!(err, CallError::UnknownProcedure(9));
    assert_eq!(store.dedup_entry(11), None);

    // Retrying the rolled-back seq runs it again: its first attempt had no effect.
    let retry = debit_credit_args(3, 2);
    let lsn_retry = committed(store.call_once(9, 2, DEBIT_CREDIT, &retry, &mut reply));
    assert_eq!(lsn_retry, lsn + 2);
    assert_eq!(store.dedup_entry(9).unwrap().seq(), 2);
    assert_eq!(
        store
            .workload::<DebitCredit>()
            .account_total(store.segment()),
        -999_997
    );
    store
        .workload::<DebitCredit>()
        .check(store.segment())
        .unwrap();
}

#[test]
fn a_full_table_refuses_new_clients_and_changes_nothing() {
    let mut store = debit_credit(SEGMENT_LEN);
    let clients_max = store.dedup().clients_max();
    assert_eq!(
        (store.dedup().slot_count(), clients_max),
        (128, 112),
        "1 MiB has 128 slots"
    );
    let mut reply = Vec::new();
    let args = debit_credit_args(1, 1);
    for client_id in 1..=clients_max as u64 {
        committed(store.call_once(client_id, 1, DEBIT_CREDIT, &args, &mut reply));
    }
    let before = store.segment().bytes().to_vec();
    let lsn = store.segment().lsn();
    let err = store
        .call_once(1 << 32, 1, DEBIT_CREDIT, &args, &mut reply)
        .unwrap_err();
    assert_eq!(err, CallError::DedupFull { clients_max: 112 });
    assert_eq!(
        err.to_string(),
        "the dedup table holds its maximum of 112 clients; give a larger database size"
    );
    assert_eq!(store.segment().lsn(), lsn);
    assert_eq!(store.segment().bytes(), &before[..]);

    // Clients with a slot carry on, and client 0 is never refused.
    committed(store.call_once(5, 2, DEBIT_CREDIT, &args, &mut reply));
    committed(store.call_once(0, 1, DEBIT_CREDIT, &args, &mut reply));
    assert_eq!(store.dedup_entry(0), None);
    store
        .workload::<DebitCredit>()
        .check(store.segment())
        .unwrap();

    // The count survives reopening: a reopened store refuses the same client.
    let (segment, workload) = store.into_parts();
    let mut store = Store::open(segment, workload);
    let err = store.call_once(1 << 32, 1, DEBIT_CREDIT, &args, &mut reply);
    assert!(matches!(err, Err(CallError::DedupFull { .. })));
}

#[test]
fn a_segment_too_small_for_a_table_serves_only_client_zero() {
    let mut store = debit_credit(PAGE_SIZE);
    assert_eq!(store.dedup().slot_count(), 0);
    let mut reply = Vec::new();
    let args = debit_credit_args(0, 1);
    let err = store.call_once(1, 1, DEBIT_CREDIT, &args, &mut reply);
    assert_eq!(err.unwrap_err(), CallError::DedupFull { clients_max: 0 });
    committed(store.call_once(0, 1, DEBIT_CREDIT, &args, &mut reply));
    committed(store.call_once(0, 1, DEBIT_CREDIT, &args, &mut reply));
    assert_eq!(
        store
            .workload::<DebitCredit>()
            .account_total(store.segment()),
        2
    );
}

#[test]
fn slots_replicate_and_a_promoted_backup_answers_retries_from_them() {
    let mut primary = debit_credit(SEGMENT_LEN);
    let mut backup = Segment::anonymous(SEGMENT_LEN, Logging::V1MirrorCopy).unwrap();
    primary.workload::<DebitCredit>().load(&mut backup);
    let mut reply = Vec::new();
    let mut replies = BTreeMap::new();
    for round in 1..=3u64 {
        for client_id in [3u64, 1 << 40, u64::MAX] {
            let args = debit_credit_args(client_id as u32 % 100, round as i32 * 10);
            let outcome = primary.call_once(client_id, round, DEBIT_CREDIT, &args, &mut reply);
            let Ok(Deduped::Committed(redo)) = outcome else {
                panic!("the call commits: {outcome:?}");
            };
            backup.apply_redo(redo).unwrap();
            replies.insert(client_id, (redo.lsn(), reply.clone()));
        }
    }
    assert_eq!(backup.bytes(), primary.segment().bytes());
    let table = DedupTable::for_segment_len(SEGMENT_LEN);
    for (&client_id, (lsn, reply)) in &replies {
        let entry = table.entry(&backup, client_id).unwrap();
        assert_eq!(Some(entry.clone()), primary.dedup_entry(client_id));
        assert_eq!(
            (entry.seq(), entry.lsn(), entry.reply()),
            (3, *lsn, Some(&reply[..]))
        );
    }

    // The primary dies; the backup takes over and the stubs resend their last calls.
    let workload = primary.workload::<DebitCredit>().clone();
    drop(primary);
    let mut promoted = Store::open(backup, Compiled::boxed(workload));
    let lsn_promoted = promoted.segment().lsn();
    for (&client_id, (lsn, stored)) in &replies {
        let args = debit_credit_args(0, 1);
        let outcome = promoted.call_once(client_id, 3, DEBIT_CREDIT, &args, &mut reply);
        assert!(matches!(outcome, Ok(Deduped::Duplicate { lsn: at }) if at == *lsn));
        assert_eq!(&reply, stored);
    }
    assert_eq!(promoted.segment().lsn(), lsn_promoted);
    let lsn_next =
        committed(promoted.call_once(3, 4, DEBIT_CREDIT, &debit_credit_args(3, 1), &mut reply));
    assert_eq!(lsn_next, lsn_promoted + 1);
    promoted
        .workload::<DebitCredit>()
        .check(promoted.segment())
        .unwrap();
}

#[test]
fn order_entry_replies_are_stored_whole() {
    let config = OrderEntryConfig {
        item_count: 1_000,
        customers_per_district: 100,
        orders_per_district: 64,
        history_per_warehouse: 256,
        ..OrderEntryConfig::default()
    };
    let workload = OrderEntry::new(SEGMENT_LEN, &config).unwrap();
    let mut store = Store::load(
        Segment::anonymous(SEGMENT_LEN, Logging::V3InlineLog).unwrap(),
        Compiled::boxed(workload),
    );
    let mut driver = store.workload::<OrderEntry>().driver(5);
    let mut args = Vec::new();
    let mut reply = Vec::new();
    let mut lengths = BTreeSet::new();
    for seq in 1..=300u64 {
        let id = driver.next_call(&mut args);
        let client_id = 1 + seq % 7;
        match store.call_once(client_id, seq, id, &args, &mut reply) {
            Ok(Deduped::Committed(_)) => {
                driver.observe(id, &args, Ok(()));
                lengths.insert(reply.len());
                let entry = store.dedup_entry(client_id).unwrap();
                assert_eq!(entry.reply(), Some(&reply[..]));
                let mut retry = Vec::new();
                let outcome = store.call_once(client_id, seq, id, &args, &mut retry);
                assert!(matches!(outcome, Ok(Deduped::Duplicate { .. })));
                assert_eq!(retry, reply);
                if id == NEW_ORDER {
                    assert_eq!(reply.len(), order_entry::REPLY_LEN_MAX);
                }
            }
            Err(CallError::Proc(err)) => driver.observe(id, &args, Err(&err)),
            Err(err) => panic!("{err}"),
            Ok(Deduped::Duplicate { .. } | Deduped::DuplicateReplyNotKept { .. }) => {
                panic!("every seq is new")
            }
            Ok(Deduped::Read) => panic!("order-entry's driver issues no read-only call"),
        }
    }
    assert_eq!(
        lengths,
        BTreeSet::from([4, 8, 12]),
        "all three procedures committed"
    );
    store
        .workload::<OrderEntry>()
        .check(store.segment())
        .unwrap();
    driver.check(store.segment()).unwrap();
}

#[test]
fn the_debit_credit_driver_runs_through_call_once_and_every_check_holds() {
    let mut store = debit_credit(SEGMENT_LEN);
    let mut driver = store.workload::<DebitCredit>().driver(11);
    let (mut args, mut reply) = (Vec::new(), Vec::new());
    for seq in 1..=2_000u64 {
        let id = driver.next_call(&mut args);
        match store.call_once(1 + seq % 50, seq, id, &args, &mut reply) {
            Ok(Deduped::Committed(_)) => {
                assert_eq!(reply.len(), debit_credit::REPLY_LEN);
                driver.observe(id, &args, Ok(()));
            }
            Err(CallError::Proc(err)) => driver.observe(id, &args, Err(&err)),
            other => panic!("{other:?}"),
        }
    }
    assert!(driver.rolled_back() > 0);
    assert_eq!(store.dedup().clients(store.segment()), 50);
    store
        .workload::<DebitCredit>()
        .check(store.segment())
        .unwrap();
    driver.check(store.segment()).unwrap();
}

/// A workload for the table alone: each call adds 1 to its client's counter and replies with
/// its arguments, so a duplicate's reply names the call that committed.
#[derive(Clone, Debug)]
struct Echo {
    counters: Table<u64>,
}

/// Echo's arguments: client index (u8), then anything; a first byte of 0xff rolls back after
/// the counter was written.
const ROLL_BACK: u8 = 0xff;
const COUNTERS: usize = 8;

impl Echo {
    fn new(segment_len: usize) -> Echo {
        let counters = Layout::workload(segment_len)
            .table("counters", COUNTERS)
            .unwrap();
        Echo { counters }
    }

    fn counter(&self, segment: &Segment, index: usize) -> u64 {
        self.counters.get_committed(segment, index)
    }
}

impl Workload for Echo {
    const NAME: &'static str = "echo";
    type Driver = EchoDriver;

    fn registry() -> Registry<Echo> {
        let mut registry = Registry::new();
        registry.register("echo", |echo: &Echo, txn, args, reply| {
            let Some(&first) = args.first() else {
                return Err(ProcError::BadArgs("no client index"));
            };
            let index = usize::from(first) % COUNTERS;
            *echo.counters.update(txn, index) += 1;
            if first == ROLL_BACK {
                return Err(ProcError::Rollback("asked to"));
            }
            reply.extend_from_slice(args);
            Ok(())
        });
        registry
    }

    fn load(&self, _: &mut Segment) {}

    fn check(&self, segment: &Segment) -> Result<(), Inconsistency> {
        DedupTable::for_segment_len(segment.len()).check(segment)
    }

    fn driver(&self, _: u64) -> EchoDriver {
        EchoDriver
    }
}

#[derive(Debug)]
struct EchoDriver;

impl Driver for EchoDriver {
    fn next_call(&mut self, args: &mut Vec<u8>) -> ProcId {
        args.clear();
        args.push(0);
        ProcId(0)
    }

    fn observe(&mut self, _: ProcId, _: &[u8], _: Result<(), &ProcError>) {}

    fn check(&self, _: &Segment) -> Result<(), Inconsistency> {
        Ok(())
    }
}

fn echo(len: usize, strategy: Logging) -> Store {
    Store::load(
        Segment::anonymous(len, strategy).unwrap(),
        Compiled::boxed(Echo::new(len)),
    )
}

#[test]
fn replies_are_kept_for_a_retry_while_the_heap_holds_them_and_marked_not_kept_after() {
    // 1 MiB: a 1 KiB heap, 896 bytes of arena.
    let mut store = echo(SEGMENT_LEN, Logging::V3InlineLog);
    let mut reply = Vec::new();
    let fits = [1; DEDUP_REPLY_INLINE_MAX];
    committed(store.call_once(1, 1, ProcId(0), &fits, &mut reply));
    assert_eq!(store.dedup_entry(1).unwrap().reply(), Some(&fits[..]));
    // Longer than a slot: the reply goes to the heap, and a retry gets it whole.
    for (seq, len) in [(2, DEDUP_REPLY_INLINE_MAX + 1), (3, 500), (4, 40)] {
        let args: Vec<u8> = (0..len).map(|byte| byte as u8 | 1).collect();
        let lsn = committed(store.call_once(1, seq, ProcId(0), &args, &mut reply));
        assert_eq!(reply, args);
        let retry = store.call_once(1, seq, ProcId(0), &args, &mut reply);
        assert!(matches!(retry, Ok(Deduped::Duplicate { lsn: at }) if at == lsn));
        assert_eq!(reply, args);
        // The check accounts for every heap byte: the replaced reply's chunks were freed.
        store.workload::<Echo>().check(store.segment()).unwrap();
    }
    // Too long for the heap: the call commits and its caller gets the reply, but the slot
    // keeps only its length; a retry runs nothing and is told the reply was not kept. The
    // chain of the reply it replaced went back to the heap.
    let huge = vec![1; 5000];
    let lsn = committed(store.call_once(1, 5, ProcId(0), &huge, &mut reply));
    assert_eq!(reply, huge);
    let entry = store.dedup_entry(1).unwrap();
    assert_eq!((entry.seq(), entry.lsn(), entry.reply()), (5, lsn, None));
    assert_eq!(entry.reply_len(), 5000);
    let retry = store.call_once(1, 5, ProcId(0), &huge, &mut reply);
    let not_kept = matches!(
        retry,
        Ok(Deduped::DuplicateReplyNotKept { lsn: at, reply_len: 5000 }) if at == lsn
    );
    assert!(not_kept, "{retry:?}");
    assert!(reply.is_empty());
    assert_eq!(store.segment().lsn(), lsn);
    store.workload::<Echo>().check(store.segment()).unwrap();
    // The client's next call keeps its reply again.
    let args = [2; 300];
    let lsn = committed(store.call_once(1, 6, ProcId(0), &args, &mut reply));
    let retry = store.call_once(1, 6, ProcId(0), &args, &mut reply);
    assert!(matches!(retry, Ok(Deduped::Duplicate { lsn: at }) if at == lsn));
    assert_eq!(reply, args);
    store.workload::<Echo>().check(store.segment()).unwrap();
    // A call that is not deduplicated keeps no reply, so any length commits.
    committed(store.call_once(0, 1, ProcId(0), &huge, &mut reply));
    assert_eq!(reply, huge);

    // A node limits replies to what a frame carries: a longer one rolls its call back too,
    // deduplicated or not.
    store.set_reply_len_max(100);
    let lsn = store.segment().lsn();
    for client_id in [0, 1] {
        let err = store.call_once(client_id, 7, ProcId(0), &[3; 101], &mut reply);
        assert_eq!(
            err.unwrap_err(),
            CallError::ReplyTooLong {
                reply_len: 101,
                reply_len_max: 100
            }
        );
        assert_eq!(store.segment().lsn(), lsn);
    }
    committed(store.call_once(1, 7, ProcId(0), &[3; 100], &mut reply));

    // A node limits a write's redo record to what one batch carries to the backups: a write
    // that could make a longer one rolls back before anything is applied.
    store.set_reply_len_max(usize::MAX);
    store.set_record_len_max(300);
    let before = store.segment().bytes().to_vec();
    let lsn = store.segment().lsn();
    let err = store
        .call_once(1, 8, ProcId(0), &[5; 400], &mut reply)
        .unwrap_err();
    match err {
        CallError::RecordTooLong {
            record_len_bound,
            record_len_max: 300,
        } => assert!(record_len_bound > 400, "{record_len_bound}"),
        other => panic!("expected RecordTooLong, got {other:?}"),
    }
    assert!(err.to_string().contains("tuning.tail_bytes_max"), "{err}");
    assert!(reply.is_empty());
    assert_eq!(store.segment().lsn(), lsn);
    assert_eq!(store.segment().bytes(), &before[..]);
    assert_eq!(store.dedup_entry(1).unwrap().seq(), 7);
    store.set_record_len_max(usize::MAX);
    committed(store.call_once(1, 8, ProcId(0), &[5; 400], &mut reply));
}

/// One call of a property run: which client, how its seq moves, whether it rolls back.
#[derive(Clone, Copy, Debug)]
struct Step {
    client: usize,
    /// 0: resend the last seq; 1: the next; 2: skip two; 3: a delayed older one.
    seq_move: u8,
    roll_back: bool,
    /// Bytes of padding after the seq: past 27, the reply is too long for a slot.
    padding: usize,
}

/// Client 0 is not deduplicated; two ids share high bits to exercise the hash.
const CLIENT_IDS: [u64; 5] = [0, 1, 2, 1 << 40 | 1, u64::MAX];

fn step() -> impl proptest::strategy::Strategy<Value = Step> {
    (
        0..CLIENT_IDS.len(),
        0..4u8,
        prop::bool::weighted(0.2),
        prop::sample::select(vec![0, 10, 27, 28, 60, 150]),
    )
        .prop_map(|(client, seq_move, roll_back, padding)| Step {
            client,
            seq_move,
            roll_back,
            padding,
        })
}

/// What the model expects the table to hold for one client.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Expected {
    seq: u64,
    lsn: u64,
    /// `None`: too long for the heap, not kept.
    reply: Option<Vec<u8>>,
    reply_len: usize,
}

/// Runs `steps` on a store of `len` bytes: 64 KiB has 8 slots for 4 clients, so probes
/// collide, and no heap, so no long reply is kept; 512 KiB has a 512-byte heap that holds
/// some long replies and not others.
fn run_steps(strategy: Logging, len: usize, steps: &[Step]) -> Result<(), TestCaseError> {
    let mut store = echo(len, strategy);
    let mut backup = Segment::anonymous(len, Logging::V3InlineLog).unwrap();
    let mut seq_next = [1u64; CLIENT_IDS.len()];
    let mut model: BTreeMap<u64, Expected> = BTreeMap::new();
    let mut applied: BTreeSet<(u64, u64)> = BTreeSet::new();
    let mut runs = [0u64; CLIENT_IDS.len()];
    let mut reply = Vec::new();
    for step in steps {
        let client_id = CLIENT_IDS[step.client];
        let last_sent = seq_next[step.client];
        let seq = match step.seq_move {
            0 => last_sent,
            1 => last_sent + 1,
            2 => last_sent + 3,
            _ => last_sent.saturating_sub(1),
        };
        seq_next[step.client] = seq;
        let first = if step.roll_back {
            ROLL_BACK
        } else {
            step.client as u8
        };
        let mut args = vec![first];
        args.extend_from_slice(&seq.to_le_bytes());
        args.resize(args.len() + step.padding, step.client as u8);
        let lsn_before = store.segment().lsn();
        let outcome = store.call_once(client_id, seq, ProcId(0), &args, &mut reply);
        let stored = model.get(&client_id).filter(|_| client_id != 0).cloned();
        match (outcome, stored) {
            (Ok(Deduped::Duplicate { lsn }), Some(expected)) if seq == expected.seq => {
                prop_assert_eq!(lsn, expected.lsn);
                prop_assert_eq!(Some(&reply), expected.reply.as_ref());
                prop_assert_eq!(store.segment().lsn(), lsn_before);
            }
            (Ok(Deduped::DuplicateReplyNotKept { lsn, reply_len }), Some(expected))
                if seq == expected.seq =>
            {
                prop_assert_eq!((lsn, reply_len), (expected.lsn, expected.reply_len));
                prop_assert!(expected.reply.is_none());
                prop_assert!(reply.is_empty());
                prop_assert_eq!(store.segment().lsn(), lsn_before);
            }
            (Err(CallError::StaleSeq { seq: got, last }), Some(expected)) if seq < expected.seq => {
                prop_assert_eq!((got, last), (seq, expected.seq));
                prop_assert_eq!(store.segment().lsn(), lsn_before);
            }
            (Err(CallError::Proc(ProcError::Rollback(_))), stored) if step.roll_back => {
                prop_assert!(stored.is_none_or(|expected| seq > expected.seq));
                prop_assert_eq!(store.segment().lsn(), lsn_before);
            }
            (Ok(Deduped::Committed(redo)), stored) if !step.roll_back => {
                prop_assert!(stored.is_none_or(|expected| seq > expected.seq));
                let lsn = redo.lsn();
                prop_assert_eq!(lsn, lsn_before + 1);
                backup.apply_redo(redo).unwrap();
                runs[step.client] += 1;
                if client_id != 0 {
                    // The property: no (client, seq) is applied twice.
                    prop_assert!(applied.insert((client_id, seq)), "{client_id}/{seq} twice");
                    // A reply the heap could not hold is kept as its length alone; only a
                    // long one may be.
                    let kept = store.dedup_entry(client_id).expect("just committed");
                    prop_assert!(kept.reply().is_none_or(|kept| kept == args));
                    prop_assert!(kept.reply().is_some() || args.len() > DEDUP_REPLY_INLINE_MAX);
                    let expected = Expected {
                        seq,
                        lsn,
                        reply: kept.reply().map(<[u8]>::to_vec),
                        reply_len: args.len(),
                    };
                    model.insert(client_id, expected);
                }
            }
            (outcome, stored) => {
                return Err(TestCaseError::fail(format!(
                    "{step:?} with seq {seq}: got {outcome:?}, the table held {stored:?}"
                )));
            }
        }
    }
    let echo = store.workload::<Echo>();
    for (index, &client_id) in CLIENT_IDS.iter().enumerate() {
        // Every committed call added 1 to its client's counter, and only those did.
        prop_assert_eq!(echo.counter(store.segment(), index), runs[index]);
        let expected = model.get(&client_id);
        let entry = store.dedup_entry(client_id);
        prop_assert_eq!(
            entry.clone().map(|e| (
                e.seq(),
                e.lsn(),
                e.reply().map(<[u8]>::to_vec),
                e.reply_len()
            )),
            expected.map(|e| (e.seq, e.lsn, e.reply.clone(), e.reply_len))
        );
        prop_assert_eq!(
            DedupTable::for_segment_len(len).entry(&backup, client_id),
            entry
        );
    }
    prop_assert_eq!(
        echo.counter(store.segment(), usize::from(ROLL_BACK) % COUNTERS),
        0
    );
    prop_assert_eq!(backup.bytes(), store.segment().bytes());
    echo.check(store.segment())
        .map_err(|err| TestCaseError::fail(err.to_string()))?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    #[test]
    fn retries_in_any_order_apply_each_call_at_most_once(
        strategy in prop::sample::select(Logging::ALL.to_vec()),
        len in prop::sample::select(vec![16 * PAGE_SIZE, 128 * PAGE_SIZE]),
        steps in prop::collection::vec(step(), 1..120),
    ) {
        run_steps(strategy, len, &steps)?;
    }
}

/// A read-only procedure runs on the segment as it stands, takes no LSN, writes no dedup slot
/// (a retry runs it again), and is refused by the write path.
#[test]
fn a_read_only_call_reads_the_latest_commit_and_leaves_nothing_behind() {
    use tandem_workloads::debit_credit::BALANCE;
    let segment = Segment::anonymous(1 << 20, Logging::V3InlineLog).unwrap();
    let workload = DebitCredit::new(1 << 20, &DebitCreditConfig::default()).unwrap();
    let mut store = Store::load(segment, Compiled::boxed(workload));
    let mut reply = Vec::new();
    let mut deposit = Vec::new();
    for field in [3u32, 0, 0] {
        deposit.extend_from_slice(&field.to_le_bytes());
    }
    deposit.extend_from_slice(&250i32.to_le_bytes());
    store
        .call_once(7, 1, DEBIT_CREDIT, &deposit, &mut reply)
        .unwrap();
    let lsn = store.segment().lsn();
    let account = 3u32.to_le_bytes();
    for seq in [2, 2, 3] {
        let outcome = store.call_once(7, seq, BALANCE, &account, &mut reply);
        assert!(matches!(outcome, Ok(Deduped::Read)));
        assert_eq!(reply, 250i32.to_le_bytes());
    }
    assert_eq!(store.segment().lsn(), lsn, "a read takes no LSN");
    assert_eq!(store.dedup_entry(7).unwrap().seq(), 1, "nor a dedup slot");
    assert_eq!(
        store.call(BALANCE, &account, &mut reply).unwrap_err(),
        CallError::ReadOnly(BALANCE.0)
    );
    let bad = store.call_once(7, 4, BALANCE, &[1, 2], &mut reply);
    assert!(matches!(bad, Err(CallError::Proc(_))));
}
