//! The checkers: what a run must show (no acknowledged commit lost, lease promises kept,
//! replicas equal, conservation, exactly-once, convergence after healing, and on the Redis
//! model every acknowledged reply as a plain model of the final history answers it).

use super::*;
use crate::redis::{Outcome, Reference, dump_database, dump_difference, render};

impl World {
    pub(super) fn describe(&self) -> String {
        let groups = self.group_ids();
        let nodes: Vec<String> = (self.nodes.iter())
            .flat_map(|node| groups.iter().map(move |&group| (node, group)))
            .filter(|(node, group)| node.serves_in(*group))
            .map(|(node, group)| {
                let view = node.core().and_then(|core| core.view(group).cloned());
                let role = match node.role(group) {
                    Slot::Outside => "outside".to_owned(),
                    Slot::Primary(role) => format!(
                        "primary v{} lsn {} pending {} inbox {} backups {:?} released and synced {:?}",
                        role.primary().view(),
                        role.primary().lsn_committed(),
                        role.primary().pending_replies(),
                        role.waiting(),
                        role.primary().backup_progress().collect::<Vec<_>>(),
                        role.primary().durable_progress(),
                    ),
                    Slot::Backup(role) => format!(
                        "backup of {} v{} lsn {}{}",
                        role.gate().primary(),
                        role.receiver().core().view(),
                        role.applier().lsn_applied(),
                        if role.gate().is_frozen() { " frozen" } else { "" }
                    ),
                };
                let leader = node.core().and_then(|core| core.leader());
                format!(
                    "node {}{} ({}): {role}; view {:?}, leader {leader:?}",
                    node.id,
                    node::in_group(self, group),
                    if node.core().is_some() { "up" } else { "down" },
                    view.map(|view| (view.number, view.primary, view.backups, view.spares))
                )
            })
            .collect();
        let calls: Vec<Option<u64>> = self
            .clients
            .iter()
            .map(|client| client.call.as_ref().map(|(route, _)| route.seq()))
            .collect();
        format!("{}; calls in flight {calls:?}", nodes.join("; "))
    }

    /// In every group, one primary of the newest view, every other node its backup at its
    /// LSN; nothing in flight.
    pub(super) fn converged(&self) -> bool {
        if self.clients.iter().any(|client| client.call.is_some()) {
            return false;
        }
        self.groups.iter().all(|group| self.converged_in(group))
    }

    fn converged_in(&self, sim: &GroupSim) -> bool {
        let (view, group) = (&sim.view_latest, sim.id);
        let serving = self
            .nodes
            .iter()
            .filter(|node| node.serves_in(group))
            .count();
        if !view.spares.is_empty() || view.backups.len() + 1 != serving {
            return false;
        }
        let Slot::Primary(primary) = self.nodes[index_of(view.primary)].role(group) else {
            return false;
        };
        if primary.primary().view() != view.number
            || primary.primary().pending_replies() > 0
            || primary.waiting() > 0
        {
            return false;
        }
        let lsn = primary.primary().lsn_committed();
        view.backups.iter().all(|&id| {
            let node = &self.nodes[index_of(id)];
            node.core()
                .is_some_and(|core| core.view(group).is_some_and(|v| v.number == view.number))
                && matches!(node.role(group), Slot::Backup(backup)
                    if backup.gate().primary() == view.primary && backup.applier().lsn_applied() == lsn)
        })
    }

    /// Every group's final checks.
    pub(super) fn final_checks(&mut self) -> Result<(), String> {
        for group in self.group_ids() {
            self.final_checks_in(group)?;
        }
        Ok(())
    }

    fn final_checks_in(&mut self, group: GroupId) -> Result<(), String> {
        let view = self.group(group).view_latest.clone();
        let Slot::Primary(primary) = self.nodes[index_of(view.primary)].role(group) else {
            unreachable!("converged on a primary");
        };
        let bytes = primary.role().store().segment().bytes().to_vec();
        self.model
            .check(primary.role().store().segment())
            .map_err(|err| self.fail(format!("primary {}: {err}", view.primary)))?;
        self.check_acked(view.primary, group, primary)?;
        self.report.acks_lost_to_power += self.acks_lost_to_power(view.primary, group);
        for &id in &view.backups {
            let Slot::Backup(backup) = self.nodes[index_of(id)].role(group) else {
                unreachable!("converged on backups");
            };
            if backup.segment().bytes() != bytes.as_slice() {
                return Err(self.fail(format!(
                    "backup {id} differs from primary {} at LSN {}",
                    view.primary,
                    backup.segment().lsn()
                )));
            }
        }
        if self.redis_model() {
            self.check_replies(view.primary, group)?;
        }
        Ok(())
    }

    /// The Redis model's reply checker, on the converged cluster whose primary is `node`:
    /// replays the primary's history (every committed call in LSN order, at the time it ran,
    /// and the sweeps) on the [`Reference`], and compares with it every reply a client
    /// accepted: a commit's with the reference's reply to that call at its LSN, and a read's
    /// or a failed call's with the reference's answer on the state after every record up to
    /// the LSN the reply carries, at the time the call ran. Then the final database with the
    /// reference's, key by key.
    ///
    /// An answer from a history a failover discarded (its fingerprint at its LSN is not the
    /// final history's) is lost by the rules' own terms under a 1-safe or bounded rule, and
    /// is not judged; under a 2-safe rule it fails the run.
    pub(super) fn check_replies(&mut self, node: NodeId, group: GroupId) -> Result<(), String> {
        let history = &self.nodes[index_of(node)].plane(group).ledger.history;
        let acked = self.acked_by_lsn((node, group), history)?;
        let mut reference = Reference::default();
        // Each client's last call applied, and what it answered: a call the records hold
        // twice is answered the second time from the dedup table, as exactly-once requires.
        let mut last_applied: BTreeMap<u64, (u64, Vec<u8>)> = BTreeMap::new();
        let mut checked = 0;
        let lsn_first = history.lsn() - history.entries().len() as u64;
        for lsn in lsn_first..=history.lsn() {
            if lsn > lsn_first {
                let entry = history.entries()[(lsn - lsn_first - 1) as usize];
                if entry.call.client_id == 0 {
                    reference.sweep(entry.time_ms);
                    continue;
                }
                let reply = match last_applied.get(&entry.call.client_id) {
                    Some((seq, reply)) if *seq >= entry.call.seq => reply.clone(),
                    _ => self.reference_commits(&mut reference, lsn, entry)?,
                };
                last_applied.insert(entry.call.client_id, (entry.call.seq, reply.clone()));
                let commits = acked.commits.get(&lsn).map_or(&[][..], Vec::as_slice);
                checked += self.check_commits(lsn, entry, &reply, commits)?;
            }
            let others = acked.others.get(&lsn).map_or(&[][..], Vec::as_slice);
            checked += self.check_others(lsn, &reference, others)?;
        }
        let discarded = acked.discarded;
        self.report.replies_checked += checked;
        self.report.replies_discarded += discarded;
        self.check_final_database((node, group), &reference)
    }

    /// Every reply a client accepted, by the LSN it must be judged at: commits at their
    /// record, the others on the state after it; and how many came from a history the final
    /// primary `node` (whose records `history` follows) does not hold, which only a rule
    /// that may lose released commits allows.
    fn acked_by_lsn<'a>(
        &'a self,
        (node, group): (NodeId, GroupId),
        history: &History,
    ) -> Result<AckedByLsn<'a>, String> {
        let Slot::Primary(role) = self.nodes[index_of(node)].role(group) else {
            unreachable!("converged on a primary");
        };
        assert_eq!(
            history.lsn(),
            role.role().store().segment().lsn(),
            "the history follows the segment"
        );
        let judged_strictly =
            fenced_by_acks(self.faults.safety) && !self.group(group).sole_copy_lost;
        let mut acked = AckedByLsn::default();
        let clients = self.clients.iter().enumerate();
        for (client, state) in clients.filter(|(_, client)| client.group == group) {
            let ClientCalls::Redis(redis) = &state.calls else {
                unreachable!("a Redis run's clients");
            };
            for ack in &redis.acked {
                let call = &redis.sent[ack.seq as usize - 1];
                let same_history =
                    ack.lsn <= history.lsn() && history.chain_at(ack.lsn) == ack.witness.chain;
                if !same_history {
                    if judged_strictly && self.acked_kept(ack.witness.power_losses) {
                        return Err(self.fail(format!(
                            "client {client}'s call {} ({call}) was answered at LSN {} from a \
                             history the final primary {node} does not hold, under {}",
                            ack.seq, ack.lsn, self.faults.safety
                        )));
                    }
                    acked.discarded += 1;
                    continue;
                }
                let commit = ack.status.committed() && !Reference::is_read(call);
                let at = if commit {
                    &mut acked.commits
                } else {
                    &mut acked.others
                };
                at.entry(ack.lsn).or_default().push((client, ack));
            }
        }
        Ok(acked)
    }

    /// The reference's reply to the call the record at `lsn` (`entry`) holds, which it must
    /// commit.
    fn reference_commits(
        &self,
        reference: &mut Reference,
        lsn: u64,
        entry: HistoryEntry,
    ) -> Result<Vec<u8>, String> {
        let client = (entry.call.client_id - u64::from(CLIENT_BASE)) as usize;
        let call = self.sent_call(client, entry.call.seq);
        match reference.call(call, entry.time_ms) {
            Outcome::Committed(reply) => Ok(reply),
            outcome => Err(self.fail(format!(
                "LSN {lsn} holds client {client}'s call {} ({call}), which the reference does \
                 not commit: it answers {}",
                entry.call.seq,
                show(&outcome)
            ))),
        }
    }

    /// The commits acknowledged at `lsn`, whose record (`entry`) the reference answered
    /// `reply`: each is that record's call, answered so. Returns how many were checked.
    fn check_commits(
        &self,
        lsn: u64,
        entry: HistoryEntry,
        reply: &[u8],
        commits: &[(usize, &AckedReply)],
    ) -> Result<u64, String> {
        for &(client, ack) in commits {
            let call = self.sent_call(client, ack.seq);
            if entry.call.client_id != client_id(client) || entry.call.seq != ack.seq {
                return Err(self.fail(format!(
                    "client {client}'s call {} ({call}) was acknowledged as committed at LSN \
                     {lsn}, which holds client {}'s call {}",
                    ack.seq,
                    entry.call.client_id - u64::from(CLIENT_BASE),
                    entry.call.seq
                )));
            }
            // A retry whose reply the dedup table could not keep is told only that its call
            // committed, at the LSN checked above.
            let reply_kept = ack.status == ReplyStatus::Committed;
            if reply_kept && ack.body != reply {
                return Err(self.fail(format!(
                    "client {client}'s call {} ({call}) committed at LSN {lsn}: the primary \
                     answered {}, the reference {}",
                    ack.seq,
                    render(&ack.body),
                    render(reply)
                )));
            }
        }
        Ok(commits.len() as u64)
    }

    /// The reads and failed calls answered on the state after `lsn`: each as the reference
    /// answers it there, at the time it ran. Returns how many were checked.
    fn check_others(
        &self,
        lsn: u64,
        reference: &Reference,
        others: &[(usize, &AckedReply)],
    ) -> Result<u64, String> {
        for &(client, ack) in others {
            let call = self.sent_call(client, ack.seq);
            let expected = reference.answer(call, ack.witness.ran_at_ms);
            let actual = match ack.status {
                ReplyStatus::Committed => Outcome::Read(ack.body.clone()),
                ReplyStatus::CommittedReplyNotKept => {
                    unreachable!("a retry whose reply was not kept is judged as a commit")
                }
                ReplyStatus::RolledBack => {
                    Outcome::Failed(String::from_utf8_lossy(&ack.body).into_owned())
                }
            };
            if actual != expected {
                return Err(self.fail(format!(
                    "client {client}'s call {} ({call}) at LSN {lsn}: the primary answered {}, \
                     the reference {}",
                    ack.seq,
                    show(&actual),
                    show(&expected)
                )));
            }
        }
        Ok(others.len() as u64)
    }

    /// The final database of primary `node`, key by key, against the reference's replay.
    fn check_final_database(
        &self,
        (node, group): (NodeId, GroupId),
        reference: &Reference,
    ) -> Result<(), String> {
        let now_ms = self.clock_ms();
        let mut model = RedisModel::new(self.segment_len).expect("fits");
        model.set_time_ms(now_ms);
        let Slot::Primary(role) = self.nodes[index_of(node)].role(group) else {
            unreachable!("converged on a primary");
        };
        let actual = dump_database(&model, role.role().store().segment())
            .map_err(|err| self.fail(format!("the final database cannot be read: {err}")))?;
        if let Some(difference) = dump_difference(&actual, &reference.dump(now_ms)) {
            return Err(self.fail(format!(
                "the final database of group {group} differs from the reference's replay of \
                 its history: {difference}"
            )));
        }
        Ok(())
    }

    fn sent_call(&self, client: usize, seq: u64) -> &RedisCall {
        let ClientCalls::Redis(redis) = &self.clients[client].calls else {
            unreachable!("a Redis run's clients");
        };
        &redis.sent[seq as usize - 1]
    }

    /// A backup of `primary`'s view whose lease promise to it has run out by now, if any:
    /// such a backup may already have reported for a new view, so a reply that needs the
    /// lease must not leave (a sharper check than waiting for an actual report, which
    /// usually comes ticks after the promise ran out).
    pub(super) fn promise_broken(
        &self,
        primary: NodeId,
        group: GroupId,
        role: &PrimaryHost,
    ) -> Option<(NodeId, u64)> {
        // Those who could report for a new view: the backups, or the spares when there are
        // none (a caught-up spare may then replace the primary).
        let config = role.primary().config();
        let reporters = if config.backups.is_empty() {
            &config.spares
        } else {
            &config.backups
        };
        reporters.iter().find_map(|&backup| {
            (self.group(group).promise_end)
                .get(&(backup, primary))
                .filter(|&&end| self.now >= end)
                .map(|&end| (backup, end))
        })
    }

    /// A backup after it applied from `lsn_before` on: the current primary's bytes at the
    /// same LSN (if it follows the newest view's primary), and conservation, each at its
    /// sampled LSNs.
    pub(super) fn check_backup(
        &self,
        node: NodeId,
        group: GroupId,
        lsn_before: u64,
        role: &BackupRole,
    ) -> Result<(), String> {
        let lsn = role.segment().lsn();
        let every = self.full_check_every_lsn;
        let checked = if lsn / every != lsn_before / every {
            self.model.check(role.segment())
        } else {
            self.model.check_quick(role.segment())
        };
        checked.map_err(|err| self.fail(format!("node {node} at LSN {lsn}: {err}")))?;
        let sim = self.group(group);
        let current = role.gate().primary() == sim.view_latest.primary
            && role.receiver().core().view() == sim.view_latest.number;
        if current && let Some(&expected) = sim.checksums.get(&lsn) {
            let actual = crc32c::crc32c(role.segment().bytes());
            if actual != expected {
                return Err(self.fail(format!(
                    "node {node} at LSN {lsn} has checksum {actual:#010x}, its primary had \
                     {expected:#010x}"
                )));
            }
        }
        Ok(())
    }

    /// Clients whose last acknowledged commit primary `node`'s records lack because a power
    /// loss took it (the exemption `check_acked` makes).
    fn acks_lost_to_power(&self, node: NodeId, group: GroupId) -> u64 {
        let Slot::Primary(role) = self.nodes[index_of(node)].role(group) else {
            return 0;
        };
        let store = role.role().store();
        (self.group(group).acked)
            .iter()
            .filter(|&(&client, acked)| {
                let held = store
                    .dedup_entry(client_id(client))
                    .map_or(0, |entry| entry.seq());
                held < acked.seq && !self.acked_kept(acked.power_losses)
            })
            .count() as u64
    }

    /// Every client's last acknowledged commit is in primary `node`'s dedup table, but one
    /// acknowledged from memory that a power loss took.
    pub(super) fn check_acked(
        &self,
        node: NodeId,
        group: GroupId,
        role: &PrimaryHost,
    ) -> Result<(), String> {
        let sim = self.group(group);
        if sim.sole_copy_lost {
            return Ok(());
        }
        for (
            &client,
            &Acked {
                seq,
                lsn,
                power_losses,
            },
        ) in &sim.acked
        {
            let held = role
                .role()
                .store()
                .dedup_entry(client_id(client))
                .map_or(0, |entry| entry.seq());
            // Acknowledged from memory before a power loss took it, and not in the logs:
            // lost by the rule's own terms.
            if held < seq && !self.acked_kept(power_losses) {
                continue;
            }
            if held < seq {
                return Err(self.fail(format!(
                    "lost an acknowledged commit: client {client}'s call {seq} (LSN {lsn}) is \
                     not in node {node}'s records (it holds the client's call {held}, up to \
                     LSN {})",
                    role.primary().lsn_committed()
                )));
            }
        }
        Ok(())
    }

    /// A reply that primary `node` released under a 2-safe rule at `lsn`: the rule held. At
    /// least k of its view's backups (every one, for a rule of all) had really received (or,
    /// for 2-safe-applied, applied) the record, whatever the acks said.
    pub(super) fn check_release(
        &self,
        node: NodeId,
        group: GroupId,
        role: &PrimaryHost,
        lsn: u64,
    ) -> Result<(), String> {
        let (held, acks) = match self.faults.safety {
            Safety::TwoSafe(acks) => (Held::Received, acks),
            Safety::TwoSafeApplied(acks) => (Held::Applied, acks),
            Safety::Durable(acks) => (Held::Synced, acks),
            Safety::OneSafe | Safety::Bounded(_) => return Ok(()),
        };
        if self.release_unchecked {
            return Ok(());
        }
        if held == Held::Synced {
            // The primary's own log must have synced it too.
            let synced_ever = &self.group(group).synced_ever;
            let synced = synced_ever.get(&(node, node)).copied().unwrap_or(0);
            if synced < lsn {
                return Err(self.fail(format!(
                    "node {node} released a reply at LSN {lsn} under {}, but its own log had \
                     synced only up to LSN {synced}",
                    self.faults.safety
                )));
            }
        }
        let backups = &role.primary().config().backups;
        let needed = acks.needed(backups.len());
        let holding: Vec<NodeId> = backups
            .iter()
            .copied()
            .filter(|&backup| self.held_by(group, held, backup, node) >= lsn)
            .collect();
        if holding.len() < needed {
            return Err(self.fail(format!(
                "node {node} released a reply at LSN {lsn} under {} with backups {backups:?}, \
                 but only {holding:?} {} it",
                self.faults.safety,
                match held {
                    Held::Received => "had received",
                    Held::Applied => "had applied",
                    Held::Synced => "had synced to their logs",
                }
            )));
        }
        Ok(())
    }

    /// The highest LSN `backup` really held (received, applied, or synced to its log) while
    /// it followed `primary`'s current role.
    pub(super) fn held_by(
        &self,
        group: GroupId,
        held: Held,
        backup: NodeId,
        primary: NodeId,
    ) -> u64 {
        let sim = self.group(group);
        match held {
            Held::Received | Held::Applied => {
                sim.received_ever
                    .get(&(backup, primary))
                    .map_or(0, |&(received, applied)| {
                        if held == Held::Applied {
                            applied
                        } else {
                            received
                        }
                    })
            }
            Held::Synced => sim
                .synced_ever
                .get(&(backup, primary))
                .copied()
                .unwrap_or(0),
        }
    }

    /// After primary `node` committed under a `bounded:n` rule: no backup of its view lacks
    /// more than n of its records.
    pub(super) fn check_bounded(
        &self,
        node: NodeId,
        group: GroupId,
        role: &PrimaryHost,
    ) -> Result<(), String> {
        let Safety::Bounded(bound) = self.faults.safety else {
            return Ok(());
        };
        let lsn = role.primary().lsn_committed();
        for &backup in &role.primary().config().backups {
            let received = (self.group(group).received_ever)
                .get(&(backup, node))
                .map_or(0, |&(received, _)| received);
            if lsn.saturating_sub(received) > bound {
                return Err(self.fail(format!(
                    "node {node} committed LSN {lsn} under bounded:{bound} while backup \
                     {backup} had received only up to LSN {received}"
                )));
            }
        }
        Ok(())
    }
}

/// The replies clients accepted, by the LSN each is judged at (see `World::acked_by_lsn`).
#[derive(Default)]
struct AckedByLsn<'a> {
    commits: BTreeMap<u64, Vec<(usize, &'a AckedReply)>>,
    others: BTreeMap<u64, Vec<(usize, &'a AckedReply)>>,
    discarded: u64,
}

/// What a backup must hold of a record before a reply for it may leave, by the group's rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Held {
    Received,
    Applied,
    /// Synced to its write-ahead log (`durable`).
    Synced,
}

/// An outcome as a failure message shows it.
fn show(outcome: &Outcome) -> String {
    match outcome {
        Outcome::Committed(reply) => format!("{} (a commit)", render(reply)),
        Outcome::Read(reply) => render(reply),
        Outcome::Failed(text) => format!("the error \"{text}\""),
    }
}
