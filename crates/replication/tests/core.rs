//! The replication core on scripted scenarios and on a seeded lossy network.
//!
//! A small harness wires one primary to its backups through an in-memory queue of messages the
//! tests may drop, duplicate, reorder or corrupt. The primary's segment runs real txns; each
//! backup has a receiver, an applier and its own segment.

use std::collections::VecDeque;

use tandem_memory::{Segment, Strategy};
use tandem_redo::{BatchKind, CallId, TailLimits};
use tandem_replication::{
    AckCount, Applier, Disposition, Message, NodeId, Primary, PrimaryConfig, PrimaryFault,
    PrimaryReady, Receiver, ReceiverConfig, ReceiverFault, ReceiverReady, Reply, Safety,
};
use tandem_store::Rng;
use tandem_store::{Driver, Store, Workload};
use tandem_workloads::debit_credit::{DebitCredit, DebitCreditConfig};

const PRIMARY: NodeId = 1;
const SEGMENT_LEN: usize = 16 * 4096;

struct Backup {
    node: NodeId,
    receiver: Receiver,
    applier: Applier,
    segment: Segment,
    faults: Vec<ReceiverFault>,
    /// Its write-ahead log, modelled by LSNs: what it appended (received) and what it synced.
    logged: u64,
    synced: u64,
}

struct Harness {
    segment: Segment,
    primary: Primary<(u64, Safety)>,
    backups: Vec<Backup>,
    /// (from, to, message) in flight.
    network: VecDeque<(NodeId, NodeId, Message)>,
    /// LSNs of released replies, in release order.
    released: Vec<u64>,
    abandoned: Vec<u64>,
    primary_faults: Vec<PrimaryFault>,
    /// Pages sent by state transfers.
    pages_transferred: usize,
    /// Each released reply's `lease_end`, in release order.
    lease_ends: Vec<Option<u64>>,
    /// The primary's write-ahead log, modelled by LSNs: what it appended and what it synced.
    logged: u64,
    synced: u64,
}

fn receiver_config(view: u64) -> ReceiverConfig {
    ReceiverConfig {
        group: 0,
        view,
        primary: PRIMARY,
        nack_ticks: 2,
    }
}

fn config(backups: usize, safety: Safety) -> PrimaryConfig {
    PrimaryConfig {
        spares: Vec::new(),
        group: 0,
        view: 1,
        backups: (0..backups as NodeId).map(|index| 2 + index).collect(),
        safety,
        tail: TailLimits {
            records_max: 1_000,
            bytes_max: 1 << 20,
        },
        batch_bytes_max: 1 << 16,
        heartbeat_ticks: 3,
        resend_ticks: 2,
        kind: BatchKind::Redo,
        flush_batches_in_flight_max: 1,
        lone: backups == 0,
        lease_ticks: None,
    }
}

impl Harness {
    fn new(config: PrimaryConfig) -> Harness {
        Harness::with_load(config, |_| {})
    }

    /// A harness whose every segment starts from what `load` writes (the same bytes and LSN
    /// everywhere, as a deterministic load gives).
    fn with_load(config: PrimaryConfig, load: impl Fn(&mut Segment)) -> Harness {
        let fresh = || {
            let mut segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).unwrap();
            load(&mut segment);
            segment
        };
        let segment = fresh();
        let lsn_start = segment.lsn();
        let backups = config
            .backups
            .iter()
            .map(|&node| Backup {
                node,
                receiver: Receiver::new(receiver_config(config.view), lsn_start),
                applier: Applier::new(lsn_start),
                segment: fresh(),
                faults: Vec::new(),
                logged: lsn_start,
                synced: lsn_start,
            })
            .collect();
        let mut harness = Harness {
            segment,
            primary: Primary::new(config, lsn_start),
            backups,
            network: VecDeque::new(),
            released: Vec::new(),
            abandoned: Vec::new(),
            primary_faults: Vec::new(),
            pages_transferred: 0,
            lease_ends: Vec::new(),
            logged: lsn_start,
            synced: lsn_start,
        };
        for backup in &mut harness.backups {
            backup.receiver.introduce();
        }
        harness.collect();
        harness
    }

    /// Commits a txn that writes `value` at a spot chosen by the LSN.
    fn commit(&mut self, safety: Safety) -> u64 {
        assert!(self.primary.can_commit(safety));
        let mut txn = self.segment.begin();
        let lsn = txn.lsn_next();
        let offset = (lsn as usize * 8) % SEGMENT_LEN;
        *txn.set_pod::<u64>(offset) = lsn;
        let record = txn.commit();
        let call = CallId {
            client_id: 1,
            seq: lsn,
        };
        self.primary.commit(call, record, safety, (lsn, safety));
        self.collect();
        lsn
    }

    /// Moves every Ready output into the network and the release lists.
    fn collect(&mut self) {
        let mut ready = PrimaryReady::default();
        self.primary.take_ready(&mut ready);
        for (to, message) in ready.messages.drain(..) {
            self.network.push_back((PRIMARY, to, message));
        }
        for reply in ready.replies.drain(..) {
            let (lsn, safety) = reply.reply;
            assert_eq!(lsn, reply.lsn);
            self.check_rule_holds(safety, lsn);
            self.released.push(lsn);
            self.lease_ends.push(reply.lease_end);
        }
        self.abandoned
            .extend(ready.abandoned.drain(..).map(|reply| reply.reply.0));
        self.primary_faults.append(&mut ready.faults);
        for batch in ready.to_log.drain(..) {
            assert_eq!(batch.lsn_base(), self.logged + 1, "the log is fed in order");
            self.logged = batch.lsn_last();
        }
        let transfers: Vec<NodeId> = ready.transfers.drain(..).collect();
        for node in transfers {
            if let Some(sent) = self.primary.transfer(node, &self.segment) {
                self.pages_transferred += sent.pages;
            }
            let mut ready = PrimaryReady::default();
            self.primary.take_ready(&mut ready);
            assert!(ready.replies.is_empty() && ready.transfers.is_empty());
            for (to, message) in ready.messages.drain(..) {
                self.network.push_back((PRIMARY, to, message));
            }
        }
        for backup in &mut self.backups {
            let mut ready = ReceiverReady::default();
            backup.receiver.take_ready(&mut ready);
            if let Some(image) = ready.to_install.take() {
                let lsn = backup.applier.install(&mut backup.segment, &image).unwrap();
                backup.receiver.applied(lsn);
            }
            for apply in ready.to_apply.drain(..) {
                backup.logged = backup.logged.max(apply.batch.lsn_last());
                let lsn_applied = backup.applier.apply(&mut backup.segment, &apply).unwrap();
                backup.receiver.applied(lsn_applied);
                let ack = Message::Ack {
                    view: backup.receiver.view(),
                    lsn_received: lsn_applied,
                    lsn_applied,
                    lsn_durable: 0,
                    tick_echoed: backup.receiver.tick_echoed(),
                };
                self.network.push_back((backup.node, PRIMARY, ack));
            }
            for (to, message) in ready.messages.drain(..) {
                self.network.push_back((backup.node, to, message));
            }
            backup.faults.append(&mut ready.faults);
        }
    }

    /// A released reply's rule must hold at the backups themselves, not just in the primary's
    /// books.
    fn check_rule_holds(&self, safety: Safety, lsn: u64) {
        // Only the view's backups count, not its spares.
        let members = &self.primary.config().backups;
        let counted = || self.backups.iter().filter(|b| members.contains(&b.node));
        let n = members.len();
        let (holding, k) = match safety {
            Safety::OneSafe | Safety::Bounded(_) => return,
            Safety::TwoSafe(acks) => {
                let received = counted();
                let holding = received
                    .filter(|b| b.receiver.lsn_received() >= lsn)
                    .count();
                (holding, acks)
            }
            Safety::TwoSafeApplied(acks) => {
                let applied = counted();
                let holding = applied.filter(|b| b.applier.lsn_applied() >= lsn).count();
                (holding, acks)
            }
            Safety::Durable(acks) => {
                assert!(
                    self.synced >= lsn,
                    "a durable reply before the primary synced"
                );
                let holding = counted().filter(|b| b.synced >= lsn).count();
                (holding, acks)
            }
        };
        let k = match k {
            AckCount::All => n,
            AckCount::Of(k) => k as usize,
        };
        assert!(
            holding >= k,
            "reply for LSN {lsn} under {safety} released while only {holding} backups hold it"
        );
    }

    fn deliver_one(&mut self, from: NodeId, to: NodeId, message: Message) {
        if to == PRIMARY {
            self.primary.step(from, message);
        } else {
            let backup = self.backups.iter_mut().find(|b| b.node == to).unwrap();
            backup.receiver.step(from, message);
        }
        self.collect();
    }

    /// Backup `index` restarts empty (a fresh segment at LSN 0) on a new link, and introduces
    /// itself; the introduction waits in the network.
    fn restart_backup(&mut self, index: usize) {
        let backup = &mut self.backups[index];
        backup.receiver = Receiver::new(receiver_config(1), 0);
        backup.applier = Applier::new(0);
        backup.segment = Segment::anonymous(SEGMENT_LEN, Strategy::V3InlineLog).unwrap();
        (backup.logged, backup.synced) = (0, 0);
        let node = backup.node;
        self.primary.link_reset(node);
        self.backups[index].receiver.introduce();
        self.collect();
    }

    /// The logs of `nodes` (PRIMARY for the primary's) sync what they appended; each backup's
    /// log says so to the primary at once, as a node's log thread does.
    fn sync_logs(&mut self, nodes: &[NodeId]) {
        for &node in nodes {
            if node == PRIMARY {
                self.synced = self.logged;
                self.primary.log_synced(self.synced);
                continue;
            }
            let backup = self.backups.iter_mut().find(|b| b.node == node).unwrap();
            backup.synced = backup.logged;
            backup.receiver.synced(backup.synced);
            let ack = Message::durable_ack(
                backup.receiver.view(),
                backup.synced,
                backup.applier.lsn_applied(),
            );
            self.network.push_back((node, PRIMARY, ack));
        }
        self.collect();
    }

    /// Delivers messages in order until the network is quiet, dropping those `lost` picks.
    fn deliver_all_but(&mut self, lost: impl Fn(&Message) -> bool) {
        while let Some((from, to, message)) = self.network.pop_front() {
            if !lost(&message) {
                self.deliver_one(from, to, message);
            }
        }
    }

    fn assert_behind(&self) {
        let backup = &self.backups[0];
        assert!(backup.segment.lsn() < self.segment.lsn());
    }

    /// Delivers messages in order until the network is quiet.
    fn deliver_all(&mut self) {
        while let Some((from, to, message)) = self.network.pop_front() {
            self.deliver_one(from, to, message);
        }
    }

    fn tick(&mut self) {
        self.primary.tick();
        for backup in &mut self.backups {
            backup.receiver.tick();
        }
        self.collect();
    }

    /// Seals the open batch whatever is in flight (the scripts want one batch per call).
    fn flush(&mut self) {
        self.primary.flush_now();
        self.collect();
    }

    fn take_batches(&mut self) -> Vec<(NodeId, NodeId, Message)> {
        let (batches, rest): (Vec<_>, Vec<_>) = self
            .network
            .drain(..)
            .partition(|(_, _, message)| matches!(message, Message::Batch(_)));
        self.network = rest.into();
        batches
    }

    fn assert_replicas_match(&self) {
        for backup in &self.backups {
            assert_eq!(
                backup.segment.lsn(),
                self.segment.lsn(),
                "backup {}",
                backup.node
            );
            assert!(
                backup.segment.bytes() == self.segment.bytes(),
                "backup {} differs from the primary",
                backup.node
            );
            assert_eq!(backup.segment.page_versions(), self.segment.page_versions());
        }
    }
}

#[test]
fn one_safe_replies_at_commit_and_two_safe_after_receipt() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    let first = harness.commit(Safety::OneSafe);
    assert_eq!(harness.released, vec![first]);
    let second = harness.commit(Safety::DEFAULT);
    assert_eq!(
        harness.released,
        vec![first],
        "a 2-safe reply waits for its ack"
    );
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released, vec![first, second]);
    harness.assert_replicas_match();
}

#[test]
fn durable_waits_until_the_primary_and_every_backup_synced_the_record() {
    let durable = Safety::Durable(AckCount::All);
    let mut harness = Harness::new(config(2, durable));
    harness.deliver_all();
    let first = harness.commit(durable);
    harness.flush();
    harness.deliver_all();
    assert!(
        harness.released.is_empty(),
        "received everywhere, synced nowhere"
    );
    harness.sync_logs(&[2, 3]);
    harness.deliver_all();
    assert!(
        harness.released.is_empty(),
        "the primary's own copy is not on disk"
    );
    harness.sync_logs(&[PRIMARY]);
    assert_eq!(harness.released, vec![first]);
    // The primary may sync first; a 2-safe reply behind a durable one waits in LSN order.
    let second = harness.commit(durable);
    let third = harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    harness.sync_logs(&[PRIMARY, 2]);
    harness.deliver_all();
    assert_eq!(harness.released, vec![first], "backup 3 has not synced");
    harness.sync_logs(&[3]);
    harness.deliver_all();
    assert_eq!(harness.released, vec![first, second, third]);
    harness.assert_replicas_match();
}

#[test]
fn a_shipped_durable_record_asks_every_backup_to_sync_it_and_a_2_safe_one_does_not() {
    let durable = Safety::Durable(AckCount::All);
    let mut harness = Harness::new(config(2, durable));
    harness.deliver_all();
    let asks = |harness: &Harness| -> Vec<(NodeId, u64)> {
        harness
            .network
            .iter()
            .filter_map(|(_, to, message)| match message {
                Message::SyncWanted { lsn, .. } => Some((*to, *lsn)),
                _ => None,
            })
            .collect()
    };
    harness.commit(Safety::DEFAULT);
    harness.flush();
    assert!(asks(&harness).is_empty(), "2-safe waits for no disk");
    harness.deliver_all();
    let lsn = harness.commit(durable);
    assert!(asks(&harness).is_empty(), "asked only once shipped");
    harness.flush();
    assert_eq!(asks(&harness), vec![(2, lsn), (3, lsn)]);
    assert_eq!(harness.primary.lsn_sync_wanted(), lsn, "and its own log");
}

#[test]
fn durable_k_of_n_waits_for_k_backups_and_a_lone_primary_for_its_own_disk() {
    let durable = Safety::Durable(AckCount::Of(1));
    let mut harness = Harness::new(config(2, durable));
    harness.deliver_all();
    let lsn = harness.commit(durable);
    harness.flush();
    harness.deliver_all();
    harness.sync_logs(&[PRIMARY, 3]);
    harness.deliver_all();
    assert_eq!(harness.released, vec![lsn], "one backup of two suffices");

    let durable = Safety::Durable(AckCount::All);
    let mut lone = Harness::new(config(0, durable));
    let lsn = lone.commit(durable);
    lone.flush();
    assert!(
        lone.released.is_empty(),
        "a lone primary's record waits for its disk"
    );
    lone.sync_logs(&[PRIMARY]);
    assert_eq!(lone.released, vec![lsn]);
}

#[test]
fn a_durable_claim_beyond_what_was_received_is_refused() {
    let durable = Safety::Durable(AckCount::All);
    let mut harness = Harness::new(config(1, durable));
    harness.deliver_all();
    let lsn = harness.commit(durable);
    harness.flush();
    harness.sync_logs(&[PRIMARY]);
    // Before the batch arrives, an ack claims it durable but not received.
    let lie = Message::Ack {
        view: 1,
        lsn_received: lsn - 1,
        lsn_applied: lsn - 1,
        lsn_durable: lsn,
        tick_echoed: 0,
    };
    harness.deliver_one(2, PRIMARY, lie);
    assert!(harness.released.is_empty());
    assert!(
        harness
            .primary_faults
            .iter()
            .any(|fault| matches!(fault, PrimaryFault::BackupAhead { from: 2, .. }))
    );
}

/// The checker of the durable rule looks at the backups' own logs, not at what acks claim:
/// a backup whose ack says it synced what it did not is caught at the release.
#[test]
#[should_panic(expected = "under durable released while only 0 backups hold it")]
fn the_durable_check_catches_a_release_on_a_false_sync_claim() {
    let durable = Safety::Durable(AckCount::All);
    let mut harness = Harness::new(config(1, durable));
    harness.deliver_all();
    let lsn = harness.commit(durable);
    harness.flush();
    harness.deliver_all();
    harness.sync_logs(&[PRIMARY]);
    let false_claim = Message::Ack {
        view: 1,
        lsn_received: lsn,
        lsn_applied: lsn,
        lsn_durable: lsn,
        tick_echoed: 0,
    };
    harness.deliver_one(2, PRIMARY, false_claim);
}

#[test]
fn an_idle_executor_holds_records_back_while_every_link_has_a_full_window_in_flight() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.commit(Safety::DEFAULT);
    harness.primary.flush();
    harness.collect();
    assert_eq!(
        harness.take_batches().len(),
        1,
        "an idle link gets the record at once"
    );
    // The batch is in flight (taken, not yet delivered): the next records gather.
    let second = harness.commit(Safety::DEFAULT);
    harness.commit(Safety::DEFAULT);
    harness.primary.flush();
    harness.collect();
    assert!(
        harness.take_batches().is_empty(),
        "records gather behind the batch in flight"
    );
    // A tick ships them whatever is in flight: the delay is bounded.
    harness.tick();
    let batches = harness.take_batches();
    assert_eq!(batches.len(), 1);
    let (_, _, Message::Batch(bytes)) = &batches[0] else {
        unreachable!()
    };
    let batch = tandem_redo::BatchRef::parse(bytes).unwrap();
    assert_eq!((batch.lsn_base(), batch.record_count()), (second, 2));
}

#[test]
fn two_safe_applied_waits_for_the_applier() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    let lsn = harness.commit(Safety::TwoSafeApplied(AckCount::All));
    harness.flush();
    // Deliver the batch to the receiver, but hold back the applier's ack.
    let (from, to, batch) = harness.network.pop_front().unwrap();
    harness.deliver_one(from, to, batch);
    let (receipt, application): (Vec<_>, Vec<_>) = harness.network.drain(..).partition(
        |(_, _, message)| matches!(message, Message::Ack { lsn_applied, .. } if *lsn_applied == 0),
    );
    for (from, to, message) in receipt {
        harness.deliver_one(from, to, message);
    }
    assert!(harness.released.is_empty(), "received but not applied");
    for (from, to, message) in application {
        harness.deliver_one(from, to, message);
    }
    assert_eq!(harness.released, vec![lsn]);
}

#[test]
fn replies_are_released_in_lsn_order() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    let first = harness.commit(Safety::DEFAULT);
    let second = harness.commit(Safety::OneSafe);
    assert!(
        harness.released.is_empty(),
        "a 1-safe reply may not overtake an earlier 2-safe one"
    );
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released, vec![first, second]);
}

#[test]
fn k_of_n_releases_after_k_receipts() {
    let mut harness = Harness::new(config(3, Safety::TwoSafe(AckCount::Of(2))));
    harness.deliver_all();
    let lsn = harness.commit(Safety::TwoSafe(AckCount::Of(2)));
    harness.flush();
    let batches = harness.take_batches();
    assert_eq!(batches.len(), 3);
    for (step, (from, to, message)) in batches.into_iter().enumerate() {
        harness.deliver_one(from, to, message);
        harness.deliver_all();
        let expected: &[u64] = if step == 0 { &[] } else { &[lsn] };
        assert_eq!(harness.released, expected, "after {} receipts", step + 1);
    }
}

#[test]
fn bounded_stops_commits_at_n_unacknowledged() {
    let mut harness = Harness::new(config(1, Safety::Bounded(2)));
    harness.deliver_all();
    harness.commit(Safety::Bounded(2));
    harness.commit(Safety::Bounded(2));
    assert_eq!(harness.released.len(), 2, "bounded replies at commit");
    assert_eq!(harness.primary.uncertainty(), 2);
    assert!(!harness.primary.can_commit(Safety::Bounded(2)));
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.primary.uncertainty(), 0);
    assert!(harness.primary.can_commit(Safety::Bounded(2)));
}

#[test]
fn a_full_tail_stops_commits_until_acks_free_it() {
    let mut config = config(1, Safety::OneSafe);
    config.tail.records_max = 4;
    config.batch_bytes_max = 1; // one record per batch
    let mut harness = Harness::new(config);
    harness.deliver_all();
    for _ in 0..3 {
        harness.commit(Safety::OneSafe);
    }
    assert!(
        !harness.primary.can_commit(Safety::OneSafe),
        "three records held for the backup, and the next would fill the tail"
    );
    harness.deliver_all();
    assert!(harness.primary.can_commit(Safety::OneSafe));
    harness.assert_replicas_match();
}

#[test]
fn idle_primaries_send_heartbeats_and_a_backup_that_missed_a_batch_asks_again() {
    let mut harness = Harness::new(config(1, Safety::OneSafe));
    harness.deliver_all();
    for _ in 0..2 {
        harness.tick();
    }
    assert!(
        harness.network.is_empty(),
        "no heartbeat before heartbeat_ticks"
    );
    harness.tick();
    assert!(matches!(
        harness.network.front(),
        Some((PRIMARY, 2, Message::Heartbeat { .. }))
    ));
    harness.deliver_all();
    // Lose a batch; the next heartbeat reveals it.
    harness.commit(Safety::OneSafe);
    harness.flush();
    assert_eq!(harness.take_batches().len(), 1);
    for _ in 0..3 {
        harness.tick();
    }
    harness.deliver_all();
    harness.assert_replicas_match();
}

#[test]
fn a_gap_is_refused_then_filled_by_a_resend() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.commit(Safety::DEFAULT);
    harness.flush();
    let lost = harness.take_batches();
    assert_eq!(lost.len(), 1);
    harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    let faults = &harness.backups[0].faults;
    assert!(faults.contains(&ReceiverFault::Gap {
        lsn_expected: 1,
        lsn_base: 2
    }));
    assert_eq!(harness.released.len(), 2, "the resend filled the gap");
    harness.assert_replicas_match();
}

#[test]
fn duplicated_and_reordered_batches_apply_once_in_order() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    for _ in 0..3 {
        harness.commit(Safety::DEFAULT);
        harness.flush();
    }
    let mut batches = harness.take_batches();
    assert_eq!(batches.len(), 3);
    // Deliver the first twice, then the third before the second.
    let first = batches[0].clone();
    batches.insert(1, first);
    batches.swap(2, 3);
    for (from, to, message) in batches {
        harness.deliver_one(from, to, message);
    }
    harness.deliver_all();
    let faults = &harness.backups[0].faults;
    assert!(
        faults
            .iter()
            .any(|fault| matches!(fault, ReceiverFault::Duplicate { .. }))
    );
    assert!(
        faults
            .iter()
            .any(|fault| matches!(fault, ReceiverFault::Gap { .. }))
    );
    assert_eq!(harness.released, vec![1, 2, 3]);
    harness.assert_replicas_match();
}

#[test]
fn a_corrupted_batch_is_refused_reported_and_never_applied() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.commit(Safety::DEFAULT);
    harness.flush();
    let (from, to, message) = harness.take_batches().pop().unwrap();
    let Message::Batch(bytes) = message else {
        unreachable!()
    };
    let mut corrupted = bytes.to_vec();
    let last = corrupted.len() - 1;
    corrupted[last] ^= 0x40;
    let before = harness.backups[0].segment.bytes().to_vec();
    harness
        .backups
        .get_mut(0)
        .unwrap()
        .receiver
        .step(from, Message::Batch(corrupted.into()));
    let mut ready = ReceiverReady::default();
    harness.backups[0].receiver.take_ready(&mut ready);
    assert!(
        ready.to_apply.is_empty(),
        "a corrupt batch never reaches the applier"
    );
    assert!(matches!(ready.faults[..], [ReceiverFault::Corrupt { .. }]));
    assert!(matches!(
        ready.messages[..],
        [(
            PRIMARY,
            Message::Nack {
                lsn_received: 0,
                ..
            }
        )]
    ));
    assert_eq!(harness.backups[0].segment.bytes(), &before[..]);
    assert_eq!(harness.backups[0].receiver.lsn_received(), 0);
    let _ = to;
    // The Nack brings a good copy.
    for (to, message) in ready.messages {
        harness.deliver_one(harness.backups[0].node, to, message);
    }
    harness.deliver_all();
    assert_eq!(harness.released, vec![1]);
    harness.assert_replicas_match();
}

#[test]
fn stale_views_are_fenced_and_a_deposed_primary_abandons_its_replies() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.commit(Safety::DEFAULT);
    harness.flush();
    let batches = harness.take_batches();
    // The backup has moved to view 2 with another primary (a view change this primary did
    // not see).
    let mut view_2 = receiver_config(2);
    view_2.primary = PRIMARY + 100;
    harness.backups[0].receiver = Receiver::new(view_2, 0);
    for (from, to, message) in batches {
        harness.deliver_one(from, to, message);
    }
    assert!(
        harness.backups[0]
            .faults
            .contains(&ReceiverFault::StaleMessage {
                from: PRIMARY,
                view: 1
            })
    );
    harness.deliver_all();
    assert_eq!(harness.primary.newer_view(), Some(2));
    assert!(
        harness.released.is_empty(),
        "no ack from the old view's backup"
    );
    assert!(
        !harness.primary.can_commit(Safety::OneSafe),
        "a primary that saw a newer view holds until the config store says"
    );
    assert!(harness.abandoned.is_empty());
    harness.primary.depose(2);
    harness.collect();
    assert!(harness.primary.is_deposed());
    assert_eq!(harness.abandoned, vec![1]);
    assert!(!harness.primary.can_commit(Safety::OneSafe));
    assert_eq!(
        harness.backups[0].segment.lsn(),
        0,
        "nothing from view 1 applied"
    );
}

#[test]
fn a_restarted_backup_is_caught_up_from_the_tail() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    for _ in 0..3 {
        harness.commit(Safety::DEFAULT);
        harness.flush();
    }
    harness.deliver_all();
    harness.assert_replicas_match();
    // The backup restarts empty: a new link, a fresh segment, an introduction at LSN 0.
    harness.restart_backup(0);
    assert_eq!(
        harness.primary.backup_progress().next(),
        Some((2, 3, 3)),
        "until it introduces itself, the primary keeps what the backup acked"
    );
    let (from, to, introduction) = harness.network.pop_front().unwrap();
    harness.deliver_one(from, to, introduction);
    assert_eq!(
        harness.primary.backup_progress().next(),
        Some((2, 0, 0)),
        "the introduction is the truth: a restarted backup lost what it held"
    );
    // Records 1..=3 are still in the tail: they are shipped again, then a new commit.
    harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    harness.assert_replicas_match();
    assert_eq!(harness.released.len(), 4);
}

/// Found by the simulator: a restarted backup whose introduction was lost is introduced by
/// the Nack a heartbeat provokes, although it holds less than it applied before.
#[test]
fn a_restarted_backup_whose_introduction_was_lost_catches_up_after_a_heartbeat() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    for _ in 0..2 {
        harness.commit(Safety::DEFAULT);
        harness.flush();
    }
    harness.deliver_all();
    harness.restart_backup(0);
    harness.network.clear(); // the introduction is lost
    for _ in 0..4 {
        harness.tick();
        harness.deliver_all();
    }
    harness.assert_replicas_match();
}

/// Found by the simulator: a backup far behind is sent a window of batches at a time, not the
/// whole tail at every Nack.
#[test]
fn a_backup_far_behind_is_caught_up_a_window_at_a_time() {
    let mut harness = Harness::new(config(1, Safety::OneSafe));
    harness.deliver_all();
    for _ in 0..100 {
        harness.commit(Safety::OneSafe);
        harness.flush();
    }
    assert_eq!(harness.take_batches().len(), 100, "all lost on the way");
    // A heartbeat reveals the loss; the Nack rewinds the shipping point.
    for _ in 0..3 {
        harness.tick();
    }
    let (from, to, heartbeat) = harness.network.pop_front().unwrap();
    harness.deliver_one(from, to, heartbeat);
    // The heartbeat is answered with an ack (its echo renews the lease), then a Nack.
    let (_, _, ack) = harness.network.pop_front().unwrap();
    assert!(matches!(ack, Message::Ack { .. }));
    let (from, to, nack) = harness.network.pop_front().unwrap();
    assert!(matches!(nack, Message::Nack { .. }));
    harness.deliver_one(from, to, nack);
    assert_eq!(harness.take_batches().len(), 32, "one window of batches");
    // That window is lost too: later heartbeats bring it again, the rest follows the acks.
    for _ in 0..10 {
        harness.tick();
        harness.deliver_all();
    }
    harness.assert_replicas_match();
}

#[test]
fn acks_from_strangers_and_claims_beyond_the_log_are_ignored() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    let ack = |lsn| Message::Ack {
        view: 1,
        lsn_received: lsn,
        lsn_applied: lsn,
        lsn_durable: 0,
        tick_echoed: 0,
    };
    harness.primary.step(99, ack(0));
    harness.primary.step(2, ack(5));
    harness.collect();
    assert_eq!(
        harness.primary_faults,
        vec![
            PrimaryFault::UnknownPeer { from: 99 },
            PrimaryFault::BackupAhead {
                from: 2,
                lsn_received: 5
            }
        ]
    );
}

/// Debit-Credit through a primary and two backups over a network that drops, duplicates,
/// reorders and corrupts; then the network heals and every replica must converge to the
/// primary's bytes, with every 2-safe reply released only after both backups held it.
#[test]
fn debit_credit_over_a_lossy_network_converges() {
    for seed in 0..8u64 {
        let mut rng = Rng::new(seed);
        let mut config = config(2, Safety::DEFAULT);
        config.batch_bytes_max = 256 + rng.below(4096) as usize;
        let small = DebitCreditConfig {
            tellers_per_branch: 2,
            accounts_per_branch: 100,
            history_bytes: 4096,
            overdraft_limit: None,
        };
        let workload = DebitCredit::new(SEGMENT_LEN, &small).unwrap();
        let mut harness = Harness::with_load(config, |segment| workload.load(segment));
        let lsn_loaded = harness.segment.lsn();
        let segment = std::mem::replace(
            &mut harness.segment,
            Segment::anonymous(4096, Strategy::V3InlineLog).unwrap(),
        );
        // The primary's segment already holds the load.
        let mut store = Store::open(segment, tandem_store::Compiled::boxed(workload.clone()));
        let mut driver = workload.driver(seed);
        let (mut args, mut reply) = (Vec::new(), Vec::new());
        let mut calls = 0u64;
        for _ in 0..3_000 {
            match rng.below(10) {
                0..=5 if harness.primary.can_commit(Safety::DEFAULT) => {
                    let id = driver.next_call(&mut args);
                    let outcome = store.call(id, &args, &mut reply);
                    if let Ok(record) = outcome {
                        calls += 1;
                        let call = CallId {
                            client_id: 1,
                            seq: calls,
                        };
                        harness.primary.commit(
                            call,
                            record,
                            Safety::DEFAULT,
                            (record.lsn(), Safety::DEFAULT),
                        );
                        driver.observe(id, &args, Ok(()));
                    }
                    harness.collect();
                }
                6 => harness.tick(),
                7 if rng.below(2) == 0 => harness.flush(),
                7 => {
                    harness.primary.flush();
                    harness.collect();
                }
                _ => {
                    let Some((from, to, message)) = harness.network.pop_front() else {
                        continue;
                    };
                    match rng.below(20) {
                        0 => {} // lost
                        1 => {
                            harness.network.push_back((from, to, message.clone()));
                            harness.deliver_one(from, to, message);
                        }
                        2 => harness.network.push_back((from, to, message)),
                        3 => {
                            if let Message::Batch(bytes) = &message {
                                let mut bytes = bytes.to_vec();
                                let index = rng.below(bytes.len() as u64) as usize;
                                bytes[index] ^= 1 << rng.below(8);
                                harness.deliver_one(from, to, Message::Batch(bytes.into()));
                            }
                        }
                        _ => harness.deliver_one(from, to, message),
                    }
                }
            }
        }
        // Heal: tick and deliver until every reply is out.
        for _ in 0..50 {
            harness.tick();
            harness.deliver_all();
        }
        assert_eq!(harness.primary.pending_replies(), 0, "seed {seed}");
        let (segment, workload) = store.into_parts();
        harness.segment = segment;
        harness.assert_replicas_match();
        for backup in &harness.backups {
            workload.check(&backup.segment).unwrap();
            driver.check(&backup.segment).unwrap();
        }
        let released: Vec<u64> = harness.released.clone();
        assert!(released.windows(2).all(|pair| pair[0] < pair[1]));
        assert_eq!(
            released.len() as u64,
            harness.segment.lsn() - lsn_loaded,
            "seed {seed}"
        );
    }
}

/// Drops every message in flight to `node` (a silent or partitioned member).
fn drop_to(harness: &mut Harness, node: NodeId) {
    harness.network.retain(|(_, to, _)| *to != node);
}

#[test]
fn removing_a_silent_backup_lets_2_safe_commits_go_on() {
    let mut harness = Harness::new(config(2, Safety::DEFAULT));
    harness.deliver_all();
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    drop_to(&mut harness, 3);
    harness.deliver_all();
    assert!(harness.released.is_empty(), "backup 3 never acked");
    // The config store removes backup 3: view 2 has backup 2 alone.
    harness.primary.install_view(2, &[2], &[]);
    harness.collect();
    assert_eq!(harness.released, vec![lsn]);
    assert_eq!(harness.primary.view(), 2);
    // Backup 2 learns view 2 too; the primary keeps shipping to it, and ignores node 3.
    harness.backups[0].receiver.install_view(2);
    harness.collect();
    let next = harness.commit(Safety::DEFAULT);
    harness.flush();
    drop_to(&mut harness, 3);
    harness.deliver_all();
    assert_eq!(harness.released, vec![lsn, next]);
    assert_eq!(harness.backups[0].segment.lsn(), next);
}

#[test]
fn a_spare_is_shipped_to_but_counts_for_no_rule() {
    let mut harness = Harness::new(config(2, Safety::DEFAULT));
    harness.deliver_all();
    // Node 3 becomes a spare in view 2.
    harness.primary.install_view(2, &[2], &[3]);
    for backup in &mut harness.backups {
        backup.receiver.install_view(2);
    }
    harness.collect();
    harness.deliver_all();
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    let in_flight: Vec<_> = harness
        .network
        .iter()
        .filter(|(_, to, _)| *to == 3)
        .cloned()
        .collect();
    assert!(!in_flight.is_empty(), "the spare is shipped to");
    drop_to(&mut harness, 3);
    harness.deliver_all();
    assert_eq!(harness.released, vec![lsn], "2-safe waits for backups only");
    // Once it is a backup, its acks count again.
    harness.primary.install_view(3, &[2, 3], &[]);
    for backup in &mut harness.backups {
        backup.receiver.install_view(3);
    }
    harness.collect();
    harness.deliver_all();
    let next = harness.commit(Safety::DEFAULT);
    harness.flush();
    drop_to(&mut harness, 3);
    harness.deliver_all();
    assert_eq!(
        harness.released,
        vec![lsn],
        "backup 3 now counts, and it holds nothing"
    );
    assert!(harness.primary.pending_replies() == 1 && next > lsn);
}

fn drop_heartbeats(harness: &mut Harness) {
    harness
        .network
        .retain(|(_, _, message)| !matches!(message, Message::Heartbeat { .. }));
}

/// Two ticks whose heartbeats are lost: a lease of two ticks, counted from the heartbeat
/// before, runs out.
fn lapse_lease(harness: &mut Harness) {
    for _ in 0..2 {
        harness.tick();
        drop_heartbeats(harness);
    }
}

/// A leased primary whose backups' introductions were lost, so none has echoed a heartbeat.
fn unleased(backups: usize) -> Harness {
    let config = PrimaryConfig {
        heartbeat_ticks: 1,
        lease_ticks: Some(2),
        ..config(backups, Safety::DEFAULT)
    };
    let mut harness = Harness::new(config);
    harness.network.clear();
    harness
}

#[test]
fn a_backup_that_introduces_itself_is_greeted_and_its_echo_starts_the_lease() {
    let mut harness = unleased(1);
    assert!(!harness.primary.lease_holds());
    harness.backups[0].receiver.introduce();
    harness.collect();
    harness.deliver_all();
    assert!(harness.primary.lease_holds(), "no tick was needed");
}

#[test]
fn one_safe_replies_and_replies_without_a_commit_wait_for_the_lease() {
    let mut harness = unleased(2);
    // No backup has echoed a heartbeat yet: no lease.
    assert!(!harness.primary.lease_holds());
    let first = harness.commit(Safety::OneSafe);
    assert!(
        harness.released.is_empty(),
        "a 1-safe reply waits for the lease"
    );
    harness.tick();
    harness.deliver_all();
    assert!(harness.primary.lease_holds());
    assert_eq!(harness.released, vec![first]);
    // A call with no commit of its own (a read) is answered at once under the lease.
    harness
        .primary
        .defer(Safety::DEFAULT, (first, Safety::OneSafe));
    harness.collect();
    assert_eq!(harness.released, vec![first, first]);

    // Two ticks without an echo: the lease (counted from the heartbeat before) has run out.
    lapse_lease(&mut harness);
    assert!(!harness.primary.lease_holds());
    harness
        .primary
        .defer(Safety::DEFAULT, (first, Safety::OneSafe));
    harness.collect();
    assert_eq!(
        harness.released.len(),
        2,
        "no read is answered without the lease"
    );
    harness.tick();
    harness.deliver_all();
    assert_eq!(harness.released.len(), 3, "the renewed lease releases it");
}

#[test]
fn two_safe_replies_need_no_lease() {
    let mut harness = unleased(1);
    harness.backups[0].receiver.introduce();
    harness.collect();
    harness.deliver_all_but(|message| matches!(message, Message::Heartbeat { .. }));
    assert!(!harness.primary.lease_holds());
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    drop_heartbeats(&mut harness);
    harness.deliver_all();
    assert!(!harness.primary.lease_holds());
    assert_eq!(
        harness.released,
        vec![lsn],
        "the backup's ack fences a 2-safe reply"
    );
}

#[test]
fn the_lease_needs_every_backup_and_an_echo_from_the_future_is_refused() {
    let mut harness = unleased(2);
    for backup in &mut harness.backups {
        backup.receiver.introduce();
    }
    harness.collect();
    harness.deliver_all_but(|message| matches!(message, Message::Heartbeat { .. }));
    harness.tick();
    // Only backup 2 hears the heartbeat.
    harness
        .network
        .retain(|(_, to, message)| !matches!(message, Message::Heartbeat { .. }) || *to == 2);
    harness.deliver_all();
    assert!(!harness.primary.lease_holds(), "backup 3 granted nothing");
    let echo_ahead = Message::Ack {
        view: 1,
        lsn_received: 0,
        lsn_applied: 0,
        lsn_durable: 0,
        tick_echoed: 50,
    };
    harness.primary.step(3, echo_ahead);
    harness.collect();
    assert!(!harness.primary.lease_holds());
    assert_eq!(
        harness.primary_faults,
        vec![PrimaryFault::EchoAhead {
            from: 3,
            tick_echoed: 50
        }]
    );
}

#[test]
fn a_spare_made_a_backup_grants_no_lease_until_it_echoes_as_one() {
    let config = PrimaryConfig {
        heartbeat_ticks: 1,
        lease_ticks: Some(2),
        spares: vec![3],
        ..config(1, Safety::DEFAULT)
    };
    let mut harness = Harness::new(config);
    // The harness made only backup 2; the spare answers heartbeats with hand-made acks.
    let to_spare = |harness: &mut Harness| harness.network.retain(|(_, to, _)| *to != 3);
    to_spare(&mut harness);
    harness.deliver_all();
    harness.tick();
    to_spare(&mut harness);
    harness.deliver_all();
    let spare_ack = Message::Ack {
        view: 1,
        lsn_received: 0,
        lsn_applied: 0,
        lsn_durable: 0,
        tick_echoed: 1,
    };
    harness.primary.step(3, spare_ack);
    assert!(
        harness.primary.lease_holds(),
        "a spare's lease does not count"
    );
    harness.primary.install_view(2, &[2, 3], &[]);
    assert!(
        !harness.primary.lease_holds(),
        "node 3's echo as a spare counts for nothing"
    );
}

/// A primary whose tail keeps only `records_max` records.
fn short_tail(records_max: u64) -> Harness {
    let config = PrimaryConfig {
        tail: TailLimits {
            records_max,
            bytes_max: 1 << 20,
        },
        ..config(1, Safety::DEFAULT)
    };
    let mut harness = Harness::new(config);
    harness.deliver_all();
    for _ in 0..30 {
        harness.commit(Safety::DEFAULT);
        harness.flush();
        harness.deliver_all();
    }
    assert!(
        harness.primary.tail().lsn_first() > 1,
        "the tail let go of LSN 1"
    );
    harness
}

#[test]
fn a_backup_the_tail_no_longer_covers_gets_the_pages_changed_and_goes_on_from_there() {
    let mut harness = short_tail(8);
    harness.restart_backup(0);
    harness.deliver_all();
    assert!(harness.pages_transferred > 0);
    assert!(
        harness.pages_transferred < SEGMENT_LEN / 4096,
        "only the pages changed since the backup's LSN go"
    );
    harness.assert_replicas_match();
    // Commits after the transfer are shipped as batches again.
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released.last(), Some(&lsn));
    harness.assert_replicas_match();
}

#[test]
fn a_lost_or_corrupted_transfer_is_asked_for_again() {
    let mut harness = short_tail(8);
    harness.restart_backup(0);
    // The introduction reaches the primary; the transfer it starts is lost.
    harness.deliver_all_but(|message| matches!(message, Message::Pages(_)));
    harness.assert_behind();
    // A heartbeat shows the gap; the Nack brings a new transfer, corrupted on the way.
    for _ in 0..3 {
        harness.tick();
    }
    let mut corrupted = false;
    while let Some((from, to, mut message)) = harness.network.pop_front() {
        if let Message::Pages(chunk) = &mut message
            && !corrupted
        {
            chunk.crc ^= 1;
            corrupted = true;
        }
        harness.deliver_one(from, to, message);
    }
    assert!(corrupted, "the Nack started a new transfer");
    assert!(
        harness.backups[0]
            .faults
            .iter()
            .any(|fault| matches!(fault, ReceiverFault::TransferRefused { .. }))
    );
    harness.assert_behind();
    // The next rounds of heartbeats and Nacks bring a whole one.
    for _ in 0..6 {
        harness.tick();
        harness.deliver_all();
    }
    harness.assert_replicas_match();
}

/// Backup `index` ran `extra` records of its own that the group discards (as a deposed
/// primary did), rewound its segment to the LSN it shares with the primary, and comes back
/// on a new link introducing itself with `Diverged`; the introduction waits in the network.
fn rejoin_diverged(harness: &mut Harness, index: usize, extra: usize) -> Vec<u32> {
    let backup = &mut harness.backups[index];
    let lsn_shared = backup.segment.lsn();
    for value in 0..extra {
        let mut txn = backup.segment.begin();
        // Pages the primary's own commits (at LSN × 8 bytes) do not reach.
        *txn.set_pod::<u64>(SEGMENT_LEN - 4096 * (1 + value)) = 0xdead;
        txn.commit();
    }
    let diverged = backup.segment.rewind(lsn_shared).to_vec();
    assert_eq!(diverged.len(), extra);
    backup.receiver = Receiver::rejoin(receiver_config(1), lsn_shared, diverged.clone().into());
    backup.applier = Applier::new(lsn_shared);
    let node = backup.node;
    harness.primary.link_reset(node);
    harness.backups[index].receiver.introduce();
    harness.collect();
    diverged
}

#[test]
fn a_member_that_rewound_gets_its_diverged_pages_with_the_changed_ones_and_goes_on() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    for _ in 0..3 {
        harness.commit(Safety::DEFAULT);
        harness.flush();
        harness.deliver_all();
    }
    let diverged = rejoin_diverged(&mut harness, 0, 2);
    assert!(matches!(
        harness.network.back(),
        Some((
            2,
            PRIMARY,
            Message::Diverged {
                lsn_received: 3,
                ..
            }
        ))
    ));
    // The primary goes on meanwhile: a 2-safe reply now waits for the member, which holds
    // nothing until its transfer is installed.
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    assert!(!harness.released.contains(&lsn));
    harness.deliver_all();
    // The tail covered the member's LSN, yet it got pages: the diverged ones with the rest.
    assert!(harness.pages_transferred > diverged.len());
    assert!(harness.backups[0].segment.diverged().is_empty());
    harness.assert_replicas_match();
    assert!(harness.released.contains(&lsn));
    // Then it is shipped batches again.
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released.last(), Some(&lsn));
    harness.assert_replicas_match();
}

#[test]
fn a_promoted_primary_holds_its_replies_for_the_lease_its_node_owed_the_old_one() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.primary.hold_releases(2);
    // A 2-safe commit acked by the backup, and a 1-safe one: neither leaves while held.
    let two_safe = harness.commit(Safety::DEFAULT);
    let one_safe = harness.commit(Safety::OneSafe);
    harness.flush();
    harness.deliver_all();
    assert!(harness.released.is_empty(), "{:?}", harness.released);
    harness.tick();
    harness.deliver_all();
    assert!(harness.released.is_empty(), "one tick of two");
    // The hold ends at the second tick: both leave then, in LSN order, without another ack.
    harness.primary.tick();
    harness.collect();
    assert_eq!(harness.released, vec![two_safe, one_safe]);
}

/// A primary and one backup that both hold one 2-safe commit.
fn one_commit_held_by_both() -> Harness {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    harness
}

/// Seed 3465: a member rewound to the LSN the primary is still at got a transfer to that
/// same LSN, dropped it as a duplicate of what it held, and asked again, for good.
#[test]
fn a_member_rewound_to_the_primarys_own_lsn_takes_its_transfer() {
    let mut harness = one_commit_held_by_both();
    rejoin_diverged(&mut harness, 0, 2);
    assert_eq!(harness.backups[0].segment.lsn(), harness.segment.lsn());
    harness.deliver_all();
    assert!(!harness.backups[0].receiver.is_diverged());
    assert!(harness.backups[0].segment.diverged().is_empty());
    harness.assert_replicas_match();
}

#[test]
fn a_diverged_member_takes_no_batch_and_asks_again_when_its_transfer_is_lost() {
    let mut harness = one_commit_held_by_both();
    // A batch still in flight when the member rewinds arrives after its introduction left:
    // it is refused.
    harness.commit(Safety::OneSafe);
    harness.flush();
    let batch = harness
        .take_batches()
        .into_iter()
        .next()
        .expect("a batch in flight")
        .2;
    rejoin_diverged(&mut harness, 0, 1);
    harness.deliver_one(PRIMARY, 2, batch);
    assert!(
        harness.backups[0]
            .faults
            .iter()
            .any(|fault| matches!(fault, ReceiverFault::DivergedLeft { .. }))
    );
    assert_eq!(harness.backups[0].receiver.lsn_received(), 1);
    // The introduction arrives; its transfer is lost.
    harness.deliver_all_but(|message| matches!(message, Message::Pages(_)));
    assert!(harness.backups[0].receiver.is_diverged());
    // Heartbeats find no transfer under way: the member asks again, and gets one.
    for _ in 0..6 {
        harness.tick();
        harness.deliver_all();
    }
    assert!(!harness.backups[0].receiver.is_diverged());
    harness.assert_replicas_match();
}

#[test]
fn a_repeated_answer_needs_the_lease_only_under_a_rule_without_acks() {
    let mut harness = unleased(1);
    let lsn = harness.primary.lsn_committed();
    // 2-safe: the answer waits for the latest commit's acks, not for a lease.
    harness
        .primary
        .repeat(Safety::DEFAULT, (lsn, Safety::DEFAULT));
    harness.collect();
    assert_eq!(harness.released, vec![lsn]);
    // 1-safe: nothing fences it but the lease.
    harness
        .primary
        .repeat(Safety::OneSafe, (lsn, Safety::OneSafe));
    harness.collect();
    assert_eq!(harness.released, vec![lsn], "released without a lease");
    harness.backups[0].receiver.introduce();
    harness.collect();
    harness.deliver_all();
    assert_eq!(harness.released, vec![lsn, lsn]);
}

#[test]
fn a_reply_released_under_the_lease_says_when_the_lease_runs_out() {
    let mut harness = unleased(2);
    for backup in &mut harness.backups {
        backup.receiver.introduce();
    }
    harness.collect();
    harness.deliver_all();
    // Both backups echoed the greeting sent at tick 1; the lease is 2 ticks.
    assert_eq!(harness.primary.lease_end(), Some(3));
    harness.commit(Safety::OneSafe);
    let two_safe = harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released.last(), Some(&two_safe));
    assert_eq!(
        harness.lease_ends,
        vec![Some(3), None],
        "the 1-safe reply carries the lease's end, the 2-safe one none"
    );
}

/// Seeds 3184 and 107 (`--ticks 2000`): a primary asked for a backup's removal on what the
/// backups held, then a late ack from a backup the new view demotes released a record the
/// backup that stays lacked; promoted later, it lost an acknowledged commit. Once a removal
/// is prepared, a reply leaves only when its rule also holds among the remaining backups.
#[test]
fn a_prepared_removal_holds_back_replies_the_remaining_backups_lack() {
    let safety = Safety::TwoSafe(AckCount::Of(1));
    let mut harness = Harness::new(config(3, safety));
    harness.deliver_all();
    // LSN a reaches node 4 only, and is released on its ack.
    let a = harness.commit(safety);
    harness.flush();
    let mut held = Vec::new();
    for (from, to, message) in harness.take_batches() {
        if to == 4 {
            harness.deliver_one(from, to, message);
        } else {
            held.push((from, to, message));
        }
    }
    harness.deliver_all();
    assert_eq!(harness.released, [a]);
    // Node 3 fell silent: node 2 lacks LSN a, so the view asked for keeps node 4 alone.
    let removal = harness
        .primary
        .prepare_removal(1, 3)
        .expect("node 4 holds LSN a");
    assert_eq!(removal.behind, [2]);
    assert!(removal.joining.is_empty(), "node 4 remains");
    // LSN b reaches nodes 2 and 3, not node 4: under the old view's rule one ack would do,
    // but node 4, the only backup of the view asked for, lacks it.
    let b = harness.commit(safety);
    harness.flush();
    for (from, to, message) in harness.take_batches() {
        if to == 4 {
            held.push((from, to, message));
        } else {
            harness.network.push_back((from, to, message));
        }
    }
    let (to_4, to_others): (Vec<_>, Vec<_>) = held.into_iter().partition(|(_, to, _)| *to == 4);
    for (from, to, message) in to_others {
        harness.deliver_one(from, to, message);
    }
    harness.deliver_all();
    assert_eq!(
        harness.released,
        [a],
        "released LSN b before node 4 held it"
    );
    for (from, to, message) in to_4 {
        harness.deliver_one(from, to, message);
    }
    harness.deliver_all();
    assert_eq!(harness.released, [a, b]);
    // The view that commits voids what was asked for.
    harness.primary.install_view(2, &[4], &[2]);
    assert_eq!(harness.primary.prepare_removal(1, 3), None, "an old view");
}

/// Default-mix seed 591408: under `durable:1` a backup's log failed (nothing further synced)
/// while the other backup synced every released record; the primary lost the one that
/// synced and prepared its removal on what the backups had *received*, so the view kept as
/// its only backup the node whose log lacked the released records. That node restarted
/// from its log, reported it (a restarted report counts under `durable`), was promoted and
/// lost acknowledged commits. Under `durable` a removal keeps as backups only nodes whose
/// logs synced every released record; the others are behind.
#[test]
fn a_removal_under_durable_keeps_only_backups_that_synced_what_was_released() {
    let durable = Safety::Durable(AckCount::Of(1));
    let mut harness = Harness::new(config(2, durable));
    harness.deliver_all();
    let lsn = harness.commit(durable);
    harness.flush();
    harness.deliver_all();
    // Both backups received LSN `lsn`; only node 3's log synced it.
    harness.sync_logs(&[PRIMARY, 3]);
    harness.deliver_all();
    assert_eq!(harness.released, [lsn]);
    // Node 3 falls silent: node 2 never synced `lsn`, and no spare holds it.
    let removal = harness.primary.prepare_removal(1, 3);
    assert_eq!(
        removal, None,
        "the only backup left would be one whose log lacks a released record"
    );
    // Once node 2's log synced it, node 2 may stay the only backup.
    harness.sync_logs(&[2]);
    harness.deliver_all();
    let removal = harness
        .primary
        .prepare_removal(1, 3)
        .expect("node 2 synced every released record");
    assert!(removal.behind.is_empty());
    assert!(removal.joining.is_empty());
}

/// Any-time seeds 42226, 46053 and 70648: a promotion kept a backup that crashed just after
/// it reported. Its primary could not remove its only backup, nor make a caught-up spare a
/// backup (the rule would count the dead one's acks): the group committed nothing for good.
/// The removal now names the spares that hold every released record, to take its place.
#[test]
fn a_removal_of_the_last_backup_names_the_spares_that_take_its_place() {
    let mut harness = Harness::new(config(2, Safety::DEFAULT));
    harness.deliver_all();
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    harness.deliver_all();
    assert_eq!(harness.released, [lsn]);
    // Node 3 is a spare of view 2 (it holds everything so far); node 2, the only backup,
    // falls silent.
    harness.primary.install_view(2, &[2], &[3]);
    for backup in &mut harness.backups {
        backup.receiver.install_view(2);
    }
    harness.deliver_all();
    let removal = harness
        .primary
        .prepare_removal(2, 2)
        .expect("spare 3 holds every released record");
    assert!(removal.behind.is_empty());
    assert_eq!(removal.joining, [3]);
    // From now a reply leaves only once the spare holds it too.
    let next = harness.commit(Safety::DEFAULT);
    harness.flush();
    let released_before = deliver_to_last(&mut harness, 3);
    assert_eq!(released_before, [lsn], "released before the spare held it");
    assert_eq!(harness.released, [lsn, next]);
}

/// Default-mix seed 458046: the only backup of a 1-safe primary restarted without its memory
/// and waited to be left out; no spare held what was released, so no removal was prepared,
/// and it waited for good. A rule that releases without backups promises nothing at a
/// failover: the removal is prepared all the same (the coordinator allows it only for a
/// backup that restarted). A rule that waits for backups still prepares none.
#[test]
fn a_removal_of_the_last_backup_under_a_rule_without_acks_needs_no_spare() {
    for (safety, prepared) in [
        (Safety::OneSafe, true),
        (Safety::Bounded(5), true),
        (Safety::DEFAULT, false),
    ] {
        let mut harness = Harness::new(config(1, safety));
        harness.deliver_all();
        let lsn = harness.commit(safety);
        harness.flush();
        harness.deliver_all();
        assert_eq!(harness.released, [lsn], "{safety:?}");
        // Node 3 joins view 2 as a spare and has heard nothing yet; node 2, the only backup,
        // falls silent.
        harness.primary.install_view(2, &[2], &[3]);
        let removal = harness.primary.prepare_removal(2, 2);
        assert_eq!(removal.is_some(), prepared, "{safety:?}: {removal:?}");
        if let Some(removal) = removal {
            assert!(removal.behind.is_empty(), "{safety:?}");
            assert!(
                removal.joining.is_empty(),
                "{safety:?}: spare 3 holds nothing"
            );
        }
    }
}

/// Delivers the batches in flight to every node but `last`, then to `last`; returns what was
/// released before `last` had them.
fn deliver_to_last(harness: &mut Harness, last: NodeId) -> Vec<u64> {
    let (to_last, rest): (Vec<_>, Vec<_>) = harness
        .take_batches()
        .into_iter()
        .partition(|(_, to, _)| *to == last);
    for (from, to, message) in rest {
        harness.deliver_one(from, to, message);
    }
    harness.deliver_all();
    let released_before = harness.released.clone();
    for (from, to, message) in to_last {
        harness.deliver_one(from, to, message);
    }
    harness.deliver_all();
    released_before
}

/// With every backup acking, a spare made a backup must hold every record released before
/// the change commits: the next promotion may rest on its report alone.
#[test]
fn a_prepared_spare_promotion_holds_back_replies_the_spare_lacks() {
    let mut harness = Harness::new(config(2, Safety::DEFAULT));
    harness.deliver_all();
    // Node 3 becomes a spare of view 2 (it holds everything so far).
    harness.primary.install_view(2, &[2], &[3]);
    for backup in &mut harness.backups {
        backup.receiver.install_view(2);
    }
    assert_eq!(
        harness.primary.prepare_spare_promotions(1),
        Vec::<NodeId>::new()
    );
    assert_eq!(harness.primary.prepare_spare_promotions(2), [3]);
    let lsn = harness.commit(Safety::DEFAULT);
    harness.flush();
    let released_before = deliver_to_last(&mut harness, 3);
    assert!(
        released_before.is_empty(),
        "released before the spare held it"
    );
    assert_eq!(harness.released, [lsn]);
}

/// The one decision of when a reply may leave, shared by the runtime and the simulator: a
/// reply released under the lease is withheld if it would leave at or after the lease's end,
/// and a deposed primary's pending replies are answered "not primary", never sent.
#[test]
fn replies_leave_withheld_or_refused_as_drain_replies_says() {
    let (mut primary, mut ready) = leased_primary();
    // The backup introduces itself and echoes the greeting: the lease runs to tick 1 + 2.
    primary.step(2, echo(0));
    primary.take_ready(&mut ready);
    ready.clear();
    primary.step(2, echo(primary.tick_count()));
    assert!(primary.lease_holds());
    primary.defer(Safety::OneSafe, 7);
    primary.take_ready(&mut ready);
    let end = ready.replies[0]
        .lease_end
        .expect("released under the lease");
    let sent: Vec<_> = ready.drain_replies(end - 1).collect();
    assert!(matches!(
        sent[..],
        [Disposition::Send(Reply { reply: 7, .. })]
    ));
    ready.clear();
    primary.defer(Safety::OneSafe, 8);
    primary.take_ready(&mut ready);
    let late: Vec<_> = ready.drain_replies(end).collect();
    assert!(matches!(
        late[..],
        [Disposition::Withhold(Reply { reply: 8, .. })]
    ));
    ready.clear();
    // A reply pending when the primary is deposed (here: waiting for a lease that ran out)
    // is refused, not sent.
    primary.tick();
    primary.tick();
    primary.tick();
    assert!(!primary.lease_holds());
    primary.defer(Safety::OneSafe, 9);
    primary.take_ready(&mut ready);
    assert!(ready.replies.is_empty());
    ready.clear();
    primary.depose(2);
    primary.take_ready(&mut ready);
    let refused: Vec<_> = ready.drain_replies(0).collect();
    assert!(matches!(
        refused[..],
        [Disposition::NotPrimary(Reply { reply: 9, .. })]
    ));
}

/// A 1-safe primary of view 1 with one backup (node 2) and a lease of 2 ticks, its greeting
/// taken.
fn leased_primary() -> (Primary<u64>, PrimaryReady<u64>) {
    let config = PrimaryConfig {
        heartbeat_ticks: 1,
        lease_ticks: Some(2),
        ..config(1, Safety::OneSafe)
    };
    let mut primary: Primary<u64> = Primary::new(config, 0);
    let mut ready = PrimaryReady::default();
    primary.take_ready(&mut ready);
    ready.clear();
    (primary, ready)
}

/// Node 2's ack of nothing, echoing the heartbeat sent at `tick_echoed`.
fn echo(tick_echoed: u64) -> Message {
    Message::Ack {
        view: 1,
        lsn_received: 0,
        lsn_applied: 0,
        lsn_durable: 0,
        tick_echoed,
    }
}

/// A reply whose lease ran out between its release and its send (the call that made it ran
/// longer than the lease) is held, not withheld: it leaves, with the lease's new end, once a
/// heartbeat sent after it is echoed, ahead of every reply released after it; and a primary
/// deposed meanwhile answers it "not primary".
#[test]
fn a_reply_whose_lease_ran_out_before_it_left_waits_for_the_lease() {
    let (mut primary, mut ready) = leased_primary();
    primary.step(2, echo(0));
    primary.step(2, echo(primary.tick_count()));
    primary.take_ready(&mut ready);
    ready.clear();
    primary.defer(Safety::OneSafe, 8);
    primary.take_ready(&mut ready);
    let end = ready.replies[0]
        .lease_end
        .expect("released under the lease");
    // The driver sends it only at `end`: held back, with nothing left to withhold.
    primary.hold_lapsed(&mut ready.replies, end);
    assert!(ready.replies.is_empty());
    assert_eq!(primary.pending_replies(), 1);
    // A reply released after it waits behind it.
    primary.defer(Safety::OneSafe, 9);
    primary.take_ready(&mut ready);
    primary.hold_lapsed(&mut ready.replies, end);
    assert!(ready.replies.is_empty());
    assert_eq!(primary.pending_replies(), 2);
    while primary.tick_count() < end {
        primary.tick();
    }
    primary.take_ready(&mut ready);
    assert!(
        ready.replies.is_empty(),
        "nothing leaves on a lease that ran out"
    );
    ready.clear();
    primary.step(2, echo(primary.tick_count()));
    primary.take_ready(&mut ready);
    let tick_now = primary.tick_count();
    let sent: Vec<_> = ready.drain_replies(tick_now).collect();
    assert!(
        matches!(
            sent[..],
            [
                Disposition::Send(Reply { reply: 8, lease_end: Some(a), .. }),
                Disposition::Send(Reply { reply: 9, lease_end: Some(b), .. }),
            ] if a > end && b > end
        ),
        "{sent:?}"
    );
    assert_eq!(primary.pending_replies(), 0);
    ready.clear();

    // Held again, then deposed: abandoned, never sent.
    primary.defer(Safety::OneSafe, 10);
    primary.take_ready(&mut ready);
    let end = ready.replies[0]
        .lease_end
        .expect("released under the lease");
    primary.hold_lapsed(&mut ready.replies, end);
    primary.depose(2);
    primary.take_ready(&mut ready);
    let refused: Vec<_> = ready.drain_replies(end).collect();
    assert!(matches!(
        refused[..],
        [Disposition::NotPrimary(Reply { reply: 10, .. })]
    ));
}

/// A receiver of view 1 that heard one heartbeat, sent at the primary's tick 5, and acked it.
fn receiver_after_a_heartbeat() -> (Receiver, ReceiverReady) {
    let mut receiver = Receiver::new(receiver_config(1), 0);
    let mut ready = ReceiverReady::default();
    let heartbeat = Message::Heartbeat {
        view: 1,
        lsn_committed: 0,
        lsn_released: 0,
        tick_sent: 5,
    };
    receiver.step(PRIMARY, heartbeat);
    receiver.take_ready(&mut ready);
    ready.clear();
    (receiver, ready)
}

/// The ack of a receiver that heard only that heartbeat: it echoes tick 5, no newer one.
const ACK_ECHOING_5: Message = Message::Ack {
    view: 1,
    lsn_received: 0,
    lsn_applied: 0,
    lsn_durable: 0,
    tick_echoed: 5,
};

#[test]
fn a_pulse_is_answered_with_an_ack_that_renews_no_lease() {
    let (mut receiver, mut ready) = receiver_after_a_heartbeat();
    receiver.step(PRIMARY, Message::Pulse { view: 1 });
    receiver.take_ready(&mut ready);
    assert_eq!(
        ready.messages,
        vec![(PRIMARY, ACK_ECHOING_5)],
        "the ack echoes the last heartbeat's tick, not a newer one"
    );
    ready.clear();
    // A pulse of another view is not this primary's word.
    receiver.step(PRIMARY, Message::Pulse { view: 0 });
    receiver.take_ready(&mut ready);
    assert!(
        ready
            .messages
            .iter()
            .all(|(_, message)| !matches!(message, Message::Ack { .. })),
        "a stale pulse gets no ack"
    );
}

#[test]
fn bytes_of_a_long_batch_arriving_are_answered_like_a_pulse() {
    let (mut receiver, mut ready) = receiver_after_a_heartbeat();
    receiver.tick();
    receiver.receiving();
    receiver.take_ready(&mut ready);
    assert_eq!(
        ready.messages,
        vec![(PRIMARY, ACK_ECHOING_5)],
        "the primary hears the backup, and no lease is renewed by it"
    );
    assert_eq!(receiver.ticks(), 1);
}

/// The answers to `ReadIndex` questions in flight to `node`, as (id, released LSN).
fn read_indexes_to(harness: &Harness, node: NodeId) -> Vec<(u64, u64)> {
    harness
        .network
        .iter()
        .filter_map(|(_, to, message)| match *message {
            Message::ReadIndexed {
                id, lsn_released, ..
            } if *to == node => Some((id, lsn_released)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_read_index_is_the_released_lsn_answered_only_under_the_lease() {
    let mut harness = unleased(1);
    harness.backups[0].receiver.introduce();
    harness.collect();
    harness.deliver_all();
    assert!(harness.primary.lease_holds());
    // A 1-safe commit is released at once; a 2-safe one only once the backup acks it.
    let released = harness.commit(Safety::OneSafe);
    let unreleased = harness.commit(Safety::DEFAULT);
    assert_eq!(harness.released, vec![released]);
    harness.network.clear();
    harness
        .primary
        .step(2, Message::ReadIndex { view: 1, id: 7 });
    harness.collect();
    assert_eq!(
        read_indexes_to(&harness, 2),
        vec![(7, released)],
        "the answer is what was released, not what was committed ({unreleased})"
    );
    // The lease runs out: the next question waits, and the renewed lease answers it with
    // what was released by then.
    harness.network.clear();
    lapse_lease(&mut harness);
    assert!(!harness.primary.lease_holds());
    harness
        .primary
        .step(2, Message::ReadIndex { view: 1, id: 8 });
    harness.collect();
    assert_eq!(read_indexes_to(&harness, 2), vec![]);
    harness.flush();
    harness.tick();
    harness.deliver_all();
    assert!(harness.released.contains(&unreleased));
    // The answer is on its way to the backup, whose receiver passed it on.
    let mut ready = ReceiverReady::default();
    harness.backups[0].receiver.take_ready(&mut ready);
    assert!(harness.primary.lease_holds());
    let answer = Message::ReadIndexed {
        view: 1,
        id: 8,
        lsn_released: unreleased,
    };
    harness.backups[0].receiver.step(PRIMARY, answer);
    harness.backups[0].receiver.take_ready(&mut ready);
    assert_eq!(ready.read_indexes, vec![(8, unreleased)]);
    assert_eq!(harness.backups[0].receiver.lsn_released(), unreleased);
}

#[test]
fn a_deposed_primary_answers_no_read_index() {
    let mut harness = Harness::new(config(1, Safety::DEFAULT));
    harness.deliver_all();
    harness.network.clear();
    // No lease setting: a question is answered at once.
    harness
        .primary
        .step(2, Message::ReadIndex { view: 1, id: 1 });
    harness.collect();
    assert_eq!(read_indexes_to(&harness, 2).len(), 1);
    // A newer view seen: the primary waits to learn whether it still is one, then is deposed.
    harness.network.clear();
    harness.primary.step(2, Message::StaleView { view: 2 });
    harness
        .primary
        .step(2, Message::ReadIndex { view: 1, id: 2 });
    harness.collect();
    assert_eq!(read_indexes_to(&harness, 2), vec![]);
    harness.primary.depose(2);
    harness.tick();
    assert_eq!(read_indexes_to(&harness, 2), vec![]);
}

/// k-of-n seed 508619 at 2,000 ticks, at the core: a primary promoted with records above what
/// the promotion says earlier views released counts only that bound as released, in the
/// answers its backups serve linearizable reads by, until its own backups hold more.
#[test]
fn a_promoted_primary_counts_released_only_what_its_promotion_says() {
    // No lease (it always holds): the answer is what this primary counts as released.
    let resumed = |bound: Option<u64>| {
        let mut primary: Primary<u64> =
            Primary::resume(config(1, Safety::DEFAULT), 658, Vec::new());
        if let Some(lsn) = bound {
            primary.released_at_most(lsn);
        }
        let mut ready = PrimaryReady::default();
        primary.take_ready(&mut ready);
        ready.clear();
        primary.step(2, Message::ReadIndex { view: 1, id: 9 });
        primary.take_ready(&mut ready);
        ready
            .messages
            .iter()
            .find_map(|(_, message)| match *message {
                Message::ReadIndexed { lsn_released, .. } => Some(lsn_released),
                _ => None,
            })
            .expect("answered under the lease")
    };
    assert_eq!(
        resumed(None),
        658,
        "a primary that starts a group counts its load released"
    );
    assert_eq!(
        resumed(Some(655)),
        655,
        "the promotion's bound, not the records taken over"
    );
    assert_eq!(resumed(Some(700)), 658, "never more than it holds");
}
