//! A backup's applier on batches a real primary role ships through a real receiver core:
//! what it skips, what it keeps for a promotion, what it acks and when it hands over; and the
//! whole backup role's turn (what it logs, applies, acks and tells its watch).

use tandem_config::GroupId;
use tandem_memory::Segment;
use tandem_node::{
    ApplierRole, BackupReady, BackupRole, BackupTurnError, BackupWatch, Call, HandoverError,
    LogOrder, PrimaryRole, Ran, ReadSettings, RoleReady,
};
use tandem_redo::{CallId, TailLimits};
use tandem_replication::{
    AckCount, ApplyBatch, Message, NodeId, Primary, Receiver, ReceiverConfig, ReceiverReady, Safety,
};
use tandem_store::{Compiled, DataModel, Store};
use tandem_workloads::debit_credit::{DEBIT_CREDIT, DebitCredit};

use crate::common;

use common::loaded;

const PRIMARY: NodeId = 1;
const BACKUP: NodeId = 2;

/// A primary whose every call ships in a batch of its own, and the receiver of its backup.
struct Pair {
    primary: PrimaryRole<()>,
    receiver: Receiver,
    seq: u64,
}

impl Pair {
    fn new() -> Pair {
        let mut pair = Pair {
            primary: primary_role(),
            receiver: Receiver::new(receiver_config(), loaded().lsn()),
            seq: 0,
        };
        pair.receiver.introduce();
        pair.accepted();
        pair
    }

    /// Commits one call and ships it; returns the batches the receiver accepted.
    fn commit(&mut self) -> Vec<ApplyBatch> {
        self.seq += 1;
        commit_one(&mut self.primary, self.seq);
        self.accepted()
    }

    /// Carries messages both ways until none is left; returns the batches accepted.
    fn accepted(&mut self) -> Vec<ApplyBatch> {
        let mut accepted = Vec::new();
        loop {
            let mut ready = ReceiverReady::default();
            self.receiver.take_ready(&mut ready);
            accepted.append(&mut ready.to_apply);
            let to_primary: Vec<Message> = ready.messages.drain(..).map(|(_, m)| m).collect();
            for message in to_primary {
                self.primary.step(BACKUP, message);
            }
            let mut role_ready = RoleReady::default();
            self.primary.take_ready(&mut role_ready);
            let to_backup: Vec<Message> = role_ready
                .replication
                .messages
                .drain(..)
                .map(|(_, m)| m)
                .collect();
            if to_backup.is_empty() {
                return accepted;
            }
            for message in to_backup {
                self.receiver.step(PRIMARY, message);
            }
        }
    }
}

/// A primary role of view 1 on the loaded database, whose one backup must ack every commit.
fn primary_role() -> PrimaryRole<()> {
    let segment = loaded();
    let config = common::config(1, &[BACKUP], Safety::TwoSafe(AckCount::All));
    let primary = Primary::new(config, segment.lsn());
    PrimaryRole::new(
        Store::open(segment, Compiled::boxed(common::workload())),
        primary,
    )
}

/// The backup's receiver settings: view 1, following the primary.
fn receiver_config() -> ReceiverConfig {
    ReceiverConfig {
        group: 0,
        view: 1,
        primary: PRIMARY,
        nack_ticks: 2,
    }
}

/// Commits call `seq` of one client (a transfer between two accounts) at `primary`, and
/// ships it.
fn commit_one(primary: &mut PrimaryRole<()>, seq: u64) {
    let mut args = Vec::new();
    DebitCredit::encode_args(&mut args, 3, 1, 0, 5);
    let call = Call {
        client_id: 9,
        seq,
        proc_id: DEBIT_CREDIT,
        args: &args,
        read_only: false,
        safety: None,
    };
    assert!(matches!(primary.run_call(&call, ()), Ran::Committed { .. }));
    primary.flush();
}

fn limits(records_max: u64) -> TailLimits {
    TailLimits {
        records_max,
        bytes_max: 1 << 20,
    }
}

#[test]
fn a_batch_applied_already_is_skipped_and_acked_once() {
    let mut pair = Pair::new();
    let mut applier = ApplierRole::active(loaded(), Vec::new(), limits(100));
    assert_eq!(applier.take_ack(1), None, "nothing applied, nothing to ack");
    let batches = pair.commit();
    assert_eq!(batches.len(), 1);
    let again = ApplyBatch {
        lsn_from: batches[0].lsn_from,
        batch: batches[0].batch.clone(),
    };
    let lsn = applier.apply(batches.into_iter().next().unwrap()).unwrap();
    assert_eq!(lsn, Some(pair.primary.primary().lsn_committed()));
    assert_eq!(applier.calls_applied().len(), 1);
    let Some(Message::Ack {
        view: 1,
        lsn_applied,
        tick_echoed: 0,
        ..
    }) = applier.take_ack(1)
    else {
        panic!("an ack of what was applied, echoing no tick");
    };
    assert_eq!(Some(lsn_applied), lsn);
    assert_eq!(
        applier.apply(again).unwrap(),
        None,
        "applied already: skipped"
    );
    assert_eq!(applier.take_ack(1), None);
}

#[test]
fn the_tail_kept_for_a_promotion_is_bounded_and_ends_at_the_segment() {
    let mut pair = Pair::new();
    let mut applier = ApplierRole::active(loaded(), Vec::new(), limits(3));
    for _ in 0..6 {
        for batch in pair.commit() {
            applier.apply(batch).unwrap();
        }
    }
    let lsn = applier.lsn_applied();
    assert_eq!(lsn, pair.primary.primary().lsn_committed());
    let handover = applier.handover(lsn).unwrap();
    assert_eq!(handover.segment.lsn(), lsn);
    assert_eq!(
        handover.segment.bytes(),
        pair.primary.store().segment().bytes()
    );
    let records: u64 = handover
        .batches
        .iter()
        .map(|batch| u64::from(batch.record_count()))
        .sum();
    assert!(records <= 3, "{records} records kept over a limit of 3");
    assert!(!handover.batches.is_empty());
    assert_eq!(handover.batches.last().unwrap().lsn_last(), lsn);
    for pair in handover.batches.windows(2) {
        assert_eq!(pair[0].lsn_last() + 1, pair[1].lsn_base(), "contiguous");
    }
    // A new primary can resume from what was handed over.
    let config = common::config(2, &[], Safety::OneSafe);
    let resumed: Primary<()> = Primary::resume(config, lsn, handover.batches);
    assert_eq!(resumed.lsn_committed(), lsn);
}

#[test]
fn a_handover_before_everything_is_applied_is_refused() {
    let mut pair = Pair::new();
    let applier = ApplierRole::active(loaded(), Vec::new(), limits(100));
    let lsn = applier.lsn_applied();
    pair.commit();
    assert_eq!(
        applier.handover(lsn + 1).unwrap_err(),
        HandoverError::Behind {
            lsn_applied: lsn,
            lsn: lsn + 1
        }
    );
}

/// What a backup role's watch saw, and whether it refuses what is applied.
#[derive(Default)]
struct Seen {
    applying: usize,
    applied: Vec<(u64, u64, usize)>,
    refuse: bool,
}

impl BackupWatch for Seen {
    type Error = &'static str;

    fn applying(&mut self, _: GroupId, _: &ApplyBatch) {
        self.applying += 1;
    }

    fn applied(
        &mut self,
        _: GroupId,
        lsn_before: u64,
        lsn: u64,
        calls: &[CallId],
    ) -> Result<(), Self::Error> {
        self.applied.push((lsn_before, lsn, calls.len()));
        if self.refuse {
            return Err("refused");
        }
        Ok(())
    }

    fn installed(&mut self, _: GroupId, _: u64, _: u64, _: &Segment) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// A primary role and a whole backup role following it.
struct RolePair {
    primary: PrimaryRole<()>,
    backup: BackupRole<()>,
    model: Box<dyn DataModel>,
    seq: u64,
}

impl RolePair {
    fn new() -> RolePair {
        let settings = ReadSettings {
            reply_len_max: 1 << 20,
            index_retry_us: 1_000,
        };
        let backup = BackupRole::on_segment(
            receiver_config(),
            loaded(),
            Vec::new(),
            limits(100),
            settings,
            1,
        );
        let mut pair = RolePair {
            primary: primary_role(),
            backup,
            model: Compiled::boxed(common::workload()),
            seq: 0,
        };
        pair.carry(&mut Seen::default()).expect("the introduction");
        pair
    }

    /// Commits one call at the primary and ships it (not yet carried to the backup).
    fn commit(&mut self) {
        self.seq += 1;
        commit_one(&mut self.primary, self.seq);
    }

    /// The primary's messages to the backup.
    fn primary_messages(&mut self) -> Vec<Message> {
        let mut ready = RoleReady::default();
        self.primary.take_ready(&mut ready);
        let messages = ready.replication.messages.drain(..);
        messages.map(|(_, message)| message).collect()
    }

    /// Carries messages both ways, a backup turn after each delivery, until none is left;
    /// returns every turn's output.
    fn carry(&mut self, watch: &mut Seen) -> Result<Vec<BackupReady<()>>, &'static str> {
        let mut turns = Vec::new();
        loop {
            let to_backup = self.primary_messages();
            for message in to_backup {
                assert!(self.backup.admits(PRIMARY));
                self.backup.step(PRIMARY, message);
            }
            let mut ready = BackupReady::default();
            let turned = self.backup.turn(0, &*self.model, watch, &mut ready);
            turned.map_err(|err| match err {
                BackupTurnError::Watch(err) => err,
                other => panic!("{other:?}"),
            })?;
            if ready.messages.is_empty() {
                turns.push(ready);
                return Ok(turns);
            }
            for (to, message) in &ready.messages {
                assert_eq!(*to, PRIMARY, "a backup speaks to its primary only");
                self.primary.step(BACKUP, message.clone());
            }
            turns.push(ready);
        }
    }
}

#[test]
fn a_backup_turn_logs_what_it_received_applies_it_and_acks_it_last() {
    let mut pair = RolePair::new();
    let lsn_before = pair.backup.applier().lsn_applied();
    pair.commit();
    let mut seen = Seen::default();
    let turns = pair.carry(&mut seen).unwrap();
    let lsn = pair.primary.primary().lsn_committed();
    let first = &turns[0];
    assert!(
        matches!(first.to_log.as_slice(), [LogOrder::Batch { lsn_from, .. }] if *lsn_from == lsn_before + 1),
        "the log is told of the batch: {:?}",
        first.to_log
    );
    assert_eq!(first.applied_from, Some(lsn_before));
    let Some((_, Message::Ack { lsn_applied, .. })) = first.messages.last() else {
        panic!("the applier's ack leaves last: {:?}", first.messages);
    };
    assert_eq!(*lsn_applied, lsn);
    assert_eq!(seen.applying, 1);
    assert_eq!(seen.applied, vec![(lsn_before, lsn, 1)]);
    assert_eq!(
        pair.backup.segment().bytes(),
        pair.primary.store().segment().bytes()
    );
    let progress: Vec<_> = pair.primary.primary().backup_progress().collect();
    assert_eq!(
        progress,
        vec![(BACKUP, lsn, lsn)],
        "the primary heard the ack"
    );
}

#[test]
fn a_frozen_backup_applies_what_it_took_and_tells_its_primary_nothing() {
    let mut pair = RolePair::new();
    pair.commit();
    for message in pair.primary_messages() {
        pair.backup.step(PRIMARY, message);
    }
    let lsn_received = pair.backup.freeze();
    assert_eq!(lsn_received, pair.primary.primary().lsn_committed());
    assert!(
        !pair.backup.admits(PRIMARY),
        "a frozen gate takes nothing more"
    );
    let mut ready = BackupReady::default();
    let mut seen = Seen::default();
    pair.backup
        .turn(0, &*pair.model, &mut seen, &mut ready)
        .unwrap();
    assert_eq!(pair.backup.applier().lsn_applied(), lsn_received);
    assert!(ready.messages.is_empty(), "{:?}", ready.messages);
    // A newer view with the same primary reopens it.
    pair.backup.stay(2, PRIMARY);
    assert!(pair.backup.admits(PRIMARY));
}

#[test]
fn a_watch_that_refuses_what_was_applied_ends_the_turn() {
    let mut pair = RolePair::new();
    pair.commit();
    let mut seen = Seen {
        refuse: true,
        ..Seen::default()
    };
    assert_eq!(pair.carry(&mut seen).unwrap_err(), "refused");
    assert_eq!(seen.applied.len(), 1);
}

fn relayed(lsn: u64, message: &str) -> tandem_node::RelayedPublication {
    tandem_node::RelayedPublication {
        group: 1,
        view: 1,
        lsn,
        shard: false,
        channel: b"news".to_vec(),
        message: message.as_bytes().to_vec(),
    }
}

/// A relayed pub/sub message waits for the write its publisher sent before it: it leaves the
/// backup role only once the applier applied its LSN, in the order relayed, and the held
/// messages are bounded.
#[test]
fn a_relayed_publication_waits_until_its_lsn_is_applied() {
    let mut pair = RolePair::new();
    let lsn = pair.backup.applier().lsn_applied();
    assert!(pair.backup.hold_relayed(relayed(lsn, "now")));
    assert!(
        pair.backup
            .hold_relayed(relayed(lsn + 1, "after the write"))
    );
    let mut out = Vec::new();
    pair.backup.take_relayed_applied(&mut out);
    let messages = |out: &[tandem_node::RelayedPublication]| -> Vec<String> {
        out.iter()
            .map(|p| String::from_utf8_lossy(&p.message).into_owned())
            .collect()
    };
    assert_eq!(
        messages(&out),
        ["now"],
        "the second waits for LSN {}",
        lsn + 1
    );
    out.clear();
    pair.commit();
    pair.carry(&mut Seen::default()).unwrap();
    assert!(pair.backup.applier().lsn_applied() > lsn);
    pair.backup.take_relayed_applied(&mut out);
    assert_eq!(messages(&out), ["after the write"]);

    // Held messages are bounded: past the bound they are dropped, and room comes back once
    // they are delivered.
    let far = u64::MAX;
    for n in 0..tandem_node::RELAYED_HELD_MAX {
        assert!(pair.backup.hold_relayed(relayed(far, &n.to_string())));
    }
    assert!(!pair.backup.hold_relayed(relayed(far, "one too many")));
    let big = "x".repeat(tandem_node::RELAYED_HELD_BYTES_MAX);
    let mut fresh = RolePair::new();
    assert!(
        !fresh.backup.hold_relayed(relayed(far, &big)),
        "more bytes than held at most"
    );
}
