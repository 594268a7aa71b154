//! The primary role's decisions on scripted calls: exactly-once, answers in call order, a
//! deposed primary, refusals, and what the node's cluster core is told; and the host that
//! holds the calls waiting for it.

use tandem_node::{
    Answer, AnswerKind, Call, Observed, PrimaryHost, PrimaryRole, Ran, Refusal, RoleReady,
    WaitingCall,
};
use tandem_replication::{AckCount, Disposition, Message, NodeId, Primary, Reply, Safety};
use tandem_store::{Compiled, ProcId, Store};
use tandem_workloads::debit_credit::{BALANCE, DEBIT_CREDIT, DebitCredit};

use crate::common;

const BACKUP: NodeId = 2;
const CLIENT: u64 = 7;

type Role = PrimaryRole<&'static str>;

fn role(backups: &[NodeId], safety: Safety) -> Role {
    let segment = common::loaded();
    let primary = Primary::new(common::config(1, backups, safety), segment.lsn());
    PrimaryRole::new(
        Store::open(segment, Compiled::boxed(common::workload())),
        primary,
    )
}

fn args() -> Vec<u8> {
    let mut args = Vec::new();
    DebitCredit::encode_args(&mut args, 3, 1, 0, 5);
    args
}

fn call(seq: u64, args: &[u8]) -> Call<'_> {
    Call {
        client_id: CLIENT,
        seq,
        proc_id: DEBIT_CREDIT,
        args,
        read_only: false,
        safety: None,
    }
}

/// The backup acknowledges receiving and applying everything up to `lsn`.
fn ack(role: &mut Role, lsn: u64) {
    role.step(
        BACKUP,
        Message::Ack {
            view: 1,
            lsn_received: lsn,
            lsn_applied: lsn,
            lsn_durable: 0,
            tick_echoed: 0,
        },
    );
}

/// Takes the ready and sorts its answers by disposition.
fn answers(role: &mut Role) -> (Vec<Reply<Answer<&'static str>>>, Vec<Answer<&'static str>>) {
    role.flush();
    let mut ready = RoleReady::default();
    role.take_ready(&mut ready);
    let mut sent = Vec::new();
    let mut not_primary = Vec::new();
    for disposition in ready.drain_replies(role.primary().tick_count()) {
        match disposition {
            Disposition::Send(reply) => sent.push(reply),
            Disposition::NotPrimary(reply) => not_primary.push(reply.reply),
            Disposition::Withhold(_) => panic!("no lease runs out here"),
        }
    }
    (sent, not_primary)
}

#[test]
fn a_retry_is_answered_from_the_dedup_table_at_its_first_lsn() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    let args = args();
    let Ran::Committed { call: id, .. } = role.run_call(&call(1, &args), "first") else {
        panic!("a new call commits");
    };
    assert_eq!((id.client_id, id.seq), (CLIENT, 1));
    let lsn = role.primary().lsn_committed();
    ack(&mut role, lsn);
    let (sent, _) = answers(&mut role);
    assert_eq!(sent.len(), 1);
    let AnswerKind::Committed { body: first, .. } = &sent[0].reply.kind else {
        panic!("committed");
    };

    assert_eq!(
        role.run_call(&call(1, &args), "retry"),
        Ran::Duplicate { lsn }
    );
    assert_eq!(
        role.primary().lsn_committed(),
        lsn,
        "a retry commits nothing"
    );
    let (sent, _) = answers(&mut role);
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0].reply.to, "retry");
    let AnswerKind::Committed { body, lsn_repeated } = &sent[0].reply.kind else {
        panic!("the stored reply");
    };
    assert_eq!(*lsn_repeated, Some(lsn));
    assert_eq!(body, first, "the reply stored at the commit");
}

/// Commits the client's call 2 ("second"), then gets its call 1 again ("stale"): refused.
fn commit_then_stale(role: &mut Role, args: &[u8]) {
    assert!(matches!(
        role.run_call(&call(2, args), "second"),
        Ran::Committed { .. }
    ));
    assert_eq!(
        role.run_call(&call(1, args), "stale"),
        Ran::Refused(Refusal::StaleSeq)
    );
}

#[test]
fn a_refused_call_is_answered_behind_the_calls_before_it() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    let args = args();
    commit_then_stale(&mut role, &args);
    let (sent, _) = answers(&mut role);
    assert!(sent.is_empty(), "both wait for the backup's ack");
    let lsn = role.primary().lsn_committed();
    ack(&mut role, lsn);
    let (sent, _) = answers(&mut role);
    let order: Vec<&str> = sent.iter().map(|reply| reply.reply.to).collect();
    assert_eq!(order, ["second", "stale"]);
    assert!(matches!(
        sent[1].reply.kind,
        AnswerKind::Refused {
            refusal: Refusal::StaleSeq,
            ..
        }
    ));
}

#[test]
fn a_refusal_waits_for_no_lease_and_holds_back_no_answer_behind_it() {
    // A lease the backup never renews (its acks echo no heartbeat): answers that need it
    // would never leave.
    let mut config = common::config(1, &[BACKUP], Safety::TwoSafe(AckCount::All));
    config.lease_ticks = Some(2);
    let segment = common::loaded();
    let primary = Primary::new(config, segment.lsn());
    let mut role: Role = PrimaryRole::new(
        Store::open(segment, Compiled::boxed(common::workload())),
        primary,
    );
    let args = args();
    commit_then_stale(&mut role, &args);
    assert!(matches!(
        role.run_call(&call(3, &args), "third"),
        Ran::Committed { .. }
    ));
    let lsn = role.primary().lsn_committed();
    ack(&mut role, lsn);
    let (sent, _) = answers(&mut role);
    let order: Vec<&str> = sent.iter().map(|reply| reply.reply.to).collect();
    assert_eq!(order, ["second", "stale", "third"]);
}

#[test]
fn a_deposed_role_runs_nothing_and_abandons_what_it_held() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    let args = args();
    assert!(matches!(
        role.run_call(&call(1, &args), "held"),
        Ran::Committed { .. }
    ));
    let lsn = role.store().segment().lsn();
    role.depose(2);
    assert_eq!(role.run_call(&call(2, &args), "late"), Ran::Stalled);
    assert_eq!(role.store().segment().lsn(), lsn, "nothing ran");
    let (sent, not_primary) = answers(&mut role);
    assert!(sent.is_empty());
    let abandoned: Vec<&str> = not_primary.iter().map(|answer| answer.to).collect();
    assert_eq!(abandoned, ["held"]);
    assert!(
        !role.install_view(3, &[BACKUP], &[]),
        "a deposed role installs nothing"
    );
}

#[test]
fn a_read_frame_runs_no_procedure_that_writes() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    let args = args();
    let lsn = role.store().segment().lsn();
    let read = Call {
        read_only: true,
        ..call(1, &args)
    };
    assert_eq!(
        role.run_call(&read, "read"),
        Ran::Refused(Refusal::WritesOnRead)
    );
    assert_eq!(role.store().segment().lsn(), lsn);

    let mut balance_args = Vec::new();
    balance_args.extend_from_slice(&3u32.to_le_bytes());
    let balance = Call {
        proc_id: BALANCE,
        read_only: true,
        ..call(2, &balance_args)
    };
    assert_eq!(role.run_call(&balance, "balance"), Ran::Read);
    assert_eq!(role.store().segment().lsn(), lsn, "a read takes no LSN");
}

#[test]
fn an_unknown_procedure_is_refused_without_running() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    let args = args();
    let unknown = Call {
        proc_id: ProcId(99),
        ..call(1, &args)
    };
    assert_eq!(
        role.run_call(&unknown, "unknown"),
        Ran::Refused(Refusal::UnknownProcedure)
    );
}

#[test]
fn a_lone_primary_refuses_a_call_that_asks_for_backups() {
    let mut role = role(&[], Safety::OneSafe);
    let args = args();
    let asks = Call {
        safety: Some(Safety::TwoSafe(AckCount::Of(1))),
        ..call(1, &args)
    };
    assert_eq!(
        role.run_call(&asks, "asks"),
        Ran::Refused(Refusal::RuleUnmet)
    );
    let (sent, _) = answers(&mut role);
    let AnswerKind::Refused { message, .. } = &sent[0].reply.kind else {
        panic!("refused");
    };
    assert!(
        message.contains("call 1"),
        "the message names the call: {message}"
    );
}

#[test]
fn the_cluster_core_hears_a_backup_once_per_take_and_each_prepared_removal() {
    let mut role = role(&[BACKUP, 3], Safety::TwoSafe(AckCount::Of(1)));
    let lsn = role.primary().lsn_committed();
    ack(&mut role, lsn);
    ack(&mut role, lsn);
    role.prepare_removal(1, 3);
    let mut ready = RoleReady::default();
    role.take_ready(&mut ready);
    assert_eq!(ready.observed[0], Observed::Heard(BACKUP));
    assert!(
        matches!(
            ready.observed[1..],
            [Observed::RemovalPrepared {
                view: 1,
                backup: 3,
                ..
            }]
        ),
        "{:?}",
        ready.observed
    );
    // A view this role is not in prepares nothing.
    role.prepare_removal(5, 3);
    ready.clear();
    role.take_ready(&mut ready);
    assert!(ready.observed.is_empty());
}

#[test]
fn only_a_newer_view_is_installed() {
    let mut role = role(&[BACKUP], Safety::TwoSafe(AckCount::All));
    assert!(!role.install_view(1, &[BACKUP], &[]));
    assert!(role.install_view(2, &[BACKUP], &[]));
    assert_eq!(role.primary().view(), 2);
}

#[test]
fn a_reply_fits_its_frame_and_half_of_what_a_batch_leaves() {
    // The defaults: 4 MiB frames, batches sealed past 64 KiB.
    let (frame, batch) = (4 << 20, 64 << 10);
    assert_eq!(
        tandem_node::reply_len_max(frame, batch),
        (frame - batch) / 2
    );
    // With batches nearly as large as frames, the batch bound rules; with none, the frame.
    assert_eq!(tandem_node::reply_len_max(frame, frame - 100), 50);
    assert_eq!(
        tandem_node::reply_len_max(frame, 0),
        tandem_wire::reply_body_len_max(frame).min(frame / 2)
    );
    assert_eq!(tandem_node::reply_len_max(100, 200), 0);
}

fn waiting(seq: u64, to: &'static str) -> WaitingCall<&'static str> {
    WaitingCall {
        to,
        client_id: CLIENT,
        seq,
        proc_id: DEBIT_CREDIT,
        args: args(),
        read_only: false,
        safety: None,
    }
}

#[test]
fn a_host_runs_its_waiting_calls_in_arrival_order_and_answers_them_in_that_order() {
    let mut host = PrimaryHost::new(role(&[BACKUP], Safety::TwoSafe(AckCount::All)));
    for (seq, to) in [(1, "first"), (2, "second"), (3, "third")] {
        host.queue(waiting(seq, to));
    }
    let mut seqs = Vec::new();
    while let Some(ran) = host.run_next() {
        let Ran::Committed { call, .. } = ran else {
            panic!("each call commits: {ran:?}");
        };
        seqs.push(call.seq);
    }
    assert_eq!(seqs, [1, 2, 3]);
    assert_eq!(host.waiting(), 0);
    host.role_mut().flush();
    let lsn = host.primary().lsn_committed();
    ack(host.role_mut(), lsn);
    let mut ready = host.collect(host.primary().tick_count());
    let order: Vec<&str> = ready
        .drain_replies(host.primary().tick_count())
        .map(|disposition| match disposition {
            Disposition::Send(reply) => reply.reply.to,
            other => panic!("every answer is sent: {other:?}"),
        })
        .collect();
    assert_eq!(order, ["first", "second", "third"]);
    host.recycle(ready);
}

#[test]
fn a_stalled_call_keeps_its_place_and_a_deposed_host_hands_every_waiting_call_back() {
    let mut host = PrimaryHost::new(role(&[BACKUP], Safety::TwoSafe(AckCount::All)));
    host.role_mut().depose(2);
    for (seq, to) in [(1, "first"), (2, "second")] {
        host.queue(waiting(seq, to));
    }
    assert_eq!(host.run_next(), Some(Ran::Stalled));
    assert_eq!(host.waiting(), 2, "a stalled call waits on");
    let back: Vec<(u64, &str)> = host
        .take_waiting()
        .map(|call| (call.seq, call.to))
        .collect();
    assert_eq!(back, [(1, "first"), (2, "second")]);
    assert_eq!(host.run_next(), None);
    host.into_segment();
}

#[test]
#[should_panic(expected = "waiting calls are answered")]
fn a_host_with_calls_waiting_does_not_give_its_segment_up() {
    let mut host = PrimaryHost::new(role(&[BACKUP], Safety::TwoSafe(AckCount::All)));
    host.role_mut().depose(2);
    host.queue(waiting(1, "first"));
    host.into_segment();
}
