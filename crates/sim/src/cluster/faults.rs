//! The world's faults: the rates a seed draws ([`ClusterFaults`], [`Mix`]), and the
//! network, crashes, restarts and pauses that carry them out.

use super::checkers::Held;
use super::*;

/// Fault rates and timing of one run, drawn from its seed.
#[derive(Clone, Debug, PartialEq)]
pub struct ClusterFaults {
    pub nodes: usize,
    pub clients: usize,
    pub safety: Safety,
    pub suspect_ticks: u64,
    pub election_ticks: usize,
    /// Message delay range, micro-ticks.
    pub delay_min: u64,
    pub delay_max: u64,
    /// Chances per million messages.
    pub loss_ppm: u64,
    pub duplicate_ppm: u64,
    /// Chances per million that a message overtakes those sent before it on its link
    /// (links are otherwise first-in first-out, as a TCP connection is).
    pub reorder_ppm: u64,
    /// Chances per million node ticks of a new partition, a crash or a pause.
    pub partition_per_tick_ppm: u64,
    pub partition_ticks_max: u64,
    pub crash_per_tick_ppm: u64,
    /// Chances per million node ticks that every connection of a live node is reset (both
    /// ends see it closed, as after a TCP reset): a strong sign that lies. Drawn from a
    /// generator of its own (see [`ClusterFaults::draw_resets`]), so that seeds without
    /// resets run as they did before resets existed.
    pub reset_per_tick_ppm: u64,
    /// Crashes may also land while the cluster is not whole: in a view change, while a view
    /// has no caught-up backup, while a member catches up (but not while another node is
    /// without its memory: down, or restarted and not yet rejoined). Such a crash may take the only
    /// copy of acknowledged records (counted, and then neither the lost-commit checker nor
    /// the liveness phase holds the run to them); otherwise the cluster must recover.
    pub crash_any_time: bool,
    pub restart_ticks_max: u64,
    pub pause_per_tick_ppm: u64,
    pub pause_ticks_max: u64,
    /// Each node's tick lasts MICROS_PER_TICK ± this many micro-ticks.
    pub drift_max: u64,
    pub slow_node: Option<NodeId>,
    pub slow_factor: u64,
    /// A client's deadline for one call, and its wait before resending it, in micro-ticks.
    pub deadline: u64,
    pub retry_after: u64,
    pub batch_bytes_max: usize,
    /// Records a primary's retained tail keeps: small in some seeds, so that members that
    /// come back find it moved on and need a state transfer.
    pub tail_records_max: u64,
    /// How long a sync of a node's write-ahead log takes, micro-ticks (drawn from the disks'
    /// generator, as the rest of this block).
    pub sync_delay_min: u64,
    pub sync_delay_max: u64,
    /// Chances per million node ticks that the node's disk fails its next sync (the log
    /// poisons).
    pub sync_fail_per_tick_ppm: u64,
    /// Power losses during the fault period (0 to 2): every node crashes at the same instant
    /// (each disk keeps its synced bytes and a drawn part of the rest), and every node
    /// restarts after a drawn delay. Drawn from a generator of its own (see
    /// [`ClusterFaults::draw_power`]), so that seeds without them run as before.
    pub power_losses: u64,
}

/// Which part of the fault space a seed's rates are drawn from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mix {
    /// Every safety rule, every fault at its usual rates (what `tandem sim` runs by default).
    #[default]
    Every,
    /// Where the rarest bugs hid past the CI budget: `2-safe` or `2-safe-applied` with fewer
    /// acks than backups, frequent crashes with quick restarts (restarted nodes rejoin as
    /// spares and catch up), frequent partitions and pauses (removals, frozen backups),
    /// short tails (state transfers). The seeds of one mix are unrelated to the other's.
    KOfN,
    /// `Every`'s rates, and crashes that may land at any time (`crash_any_time`): in a view
    /// change, while a view has no caught-up backup, while a member catches up. The liveness
    /// phase then requires recovery unless the crash took the only copy of acknowledged
    /// records.
    AnyTime,
}

impl ClusterFaults {
    /// Draws the reset rate from `rng`, the generator resets use: one seed in three has
    /// them.
    pub fn draw_resets(&mut self, rng: &mut Rng) {
        self.reset_per_tick_ppm = if rng.below(3) == 0 {
            200 + rng.below(3_000)
        } else {
            0
        };
    }

    /// Draws the disks' rates from `rng`, the generator the disks use: one 2-safe seed in
    /// three runs `durable` with the same acks instead (all, or k of the backups), so that
    /// the other seeds' rates stay as they were; a sync takes a tenth of a tick to a tick
    /// and a half; one seed in four fails a sync now and then.
    pub fn draw_disks(&mut self, rng: &mut Rng) {
        if let Safety::TwoSafe(acks) | Safety::TwoSafeApplied(acks) = self.safety
            && rng.below(3) == 0
        {
            self.safety = Safety::Durable(acks);
        }
        self.sync_delay_min = 20 + rng.below(200);
        self.sync_delay_max = self.sync_delay_min + rng.below(1_300);
        self.sync_fail_per_tick_ppm = if rng.below(4) == 0 {
            200 + rng.below(2_000)
        } else {
            0
        };
    }

    /// Draws the power losses from `rng`, the generator power losses use: one `durable` seed
    /// in two loses power once or twice (acknowledged records survive in the logs, and the
    /// checkers hold the run to them); one seed in eight of the other rules does too (their
    /// acknowledgements lived in memory, and the checkers exempt those made before the power
    /// loss that did not survive it).
    pub fn draw_power(&mut self, rng: &mut Rng) {
        let one_in = match self.safety {
            Safety::Durable(_) => 2,
            _ => 8,
        };
        self.power_losses = if rng.below(one_in) == 0 {
            1 + rng.below(2)
        } else {
            0
        };
    }

    /// Draws every rate from `rng`, from the part of the fault space `mix` names.
    pub fn draw(rng: &mut Rng, mix: Mix) -> ClusterFaults {
        let mut faults = ClusterFaults::draw_every(rng);
        if mix == Mix::KOfN {
            // Drawn after the usual rates, so the seeds of `Mix::Every` stay as they were.
            faults.nodes = 3 + rng.below(2) as usize;
            let backups = faults.nodes as u64 - 1;
            let k = 1 + rng.below(backups - 1) as u32;
            faults.safety = if rng.below(2) == 0 {
                Safety::TwoSafe(AckCount::Of(k))
            } else {
                Safety::TwoSafeApplied(AckCount::Of(k))
            };
            faults.crash_per_tick_ppm = 1_000 + rng.below(4_000);
            faults.restart_ticks_max = 1 + rng.below(30);
            faults.partition_per_tick_ppm = 1_000 + rng.below(4_000);
            faults.pause_per_tick_ppm = 500 + rng.below(3_000);
            if rng.below(2) == 0 {
                faults.tail_records_max = 8 + rng.below(64);
            }
            faults.slow_node =
                (rng.below(3) == 0).then(|| 1 + rng.below(faults.nodes as u64) as NodeId);
        }
        faults.crash_any_time = mix == Mix::AnyTime;
        faults
    }

    fn draw_every(rng: &mut Rng) -> ClusterFaults {
        let nodes = 3 + rng.below(2) as usize;
        let backups = nodes as u64 - 1;
        let safety = match rng.below(6) {
            0 => Safety::TwoSafeApplied(AckCount::All),
            1 => Safety::TwoSafe(AckCount::All),
            2 => Safety::TwoSafeApplied(AckCount::Of(1 + rng.below(backups) as u32)),
            3 => Safety::TwoSafe(AckCount::Of(1 + rng.below(backups) as u32)),
            4 => Safety::OneSafe,
            _ => Safety::Bounded(1 + rng.below(16)),
        };
        // Mostly loopback-like delays (a small fraction of a tick); one seed in four has a
        // slow network, with delays up to about a tick and a half.
        let delay_min = 5 + rng.below(50);
        let delay_spread = if rng.below(4) == 0 { 1_500 } else { 300 };
        // A backup's lease promise is suspect_ticks − 2 ≥ 3 ticks: with the drift below, the
        // primary's share of it is at least one tick.
        let suspect_ticks = 5 + rng.below(8);
        let mut faults = ClusterFaults {
            nodes,
            clients: 2 + rng.below(6) as usize,
            safety,
            suspect_ticks,
            election_ticks: 10 + rng.below(20) as usize,
            delay_min,
            delay_max: delay_min + rng.below(delay_spread),
            loss_ppm: rng.below(30_000),
            duplicate_ppm: rng.below(20_000),
            reorder_ppm: rng.below(20_000),
            partition_per_tick_ppm: rng.below(3_000),
            partition_ticks_max: 1 + rng.below(40),
            crash_per_tick_ppm: rng.below(3_000),
            reset_per_tick_ppm: 0,
            crash_any_time: false,
            restart_ticks_max: 1 + rng.below(80),
            pause_per_tick_ppm: rng.below(3_000),
            pause_ticks_max: 1 + rng.below(20),
            drift_max: rng.below(100),
            slow_node: (rng.below(3) == 0).then(|| 1 + rng.below(nodes as u64) as NodeId),
            slow_factor: 2 + rng.below(5),
            deadline: (20 + rng.below(200)) * MICROS_PER_TICK,
            retry_after: (2 + rng.below(6)) * MICROS_PER_TICK,
            batch_bytes_max: 64 + rng.below(4_096) as usize,
            tail_records_max: if rng.below(3) == 0 {
                8 + rng.below(64)
            } else {
                1 << 20
            },
            sync_delay_min: 0,
            sync_delay_max: 0,
            sync_fail_per_tick_ppm: 0,
            power_losses: 0,
        };
        // An operator sizes the tick to the network: a primary's lease (about suspect_ticks
        // − 4 ticks) must outlast a heartbeat's round trip, or no answer that needs it ever
        // leaves (seed 34246: delays up to 1.5 ticks against a one-tick lease). Raised after
        // the draws, so other seeds stay as they were.
        let round_trip_ticks = (2 * faults.delay_max).div_ceil(MICROS_PER_TICK);
        faults.suspect_ticks = faults.suspect_ticks.max(4 + round_trip_ticks);
        faults
    }
}

impl fmt::Display for ClusterFaults {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} nodes, {} clients, {}, suspect {} ticks, election {} ticks; delay {}..{} µt, \
             loss {} ppm, dup {} ppm, reorder {} ppm, partitions {} ppm/tick ≤{} ticks, resets {} ppm/tick, crashes {} ppm/tick{} \
             restart ≤{} ticks, pauses {} ppm/tick ≤{} ticks, drift ±{} µt/tick, slow {}, \
             deadline {} µt, retry {} µt, batches ≤{} B, tail ≤{} records; syncs {}..{} µt, \
             failed syncs {} ppm/tick, power losses {}",
            self.nodes,
            self.clients,
            self.safety,
            self.suspect_ticks,
            self.election_ticks,
            self.delay_min,
            self.delay_max,
            self.loss_ppm,
            self.duplicate_ppm,
            self.reorder_ppm,
            self.partition_per_tick_ppm,
            self.partition_ticks_max,
            self.reset_per_tick_ppm,
            self.crash_per_tick_ppm,
            if self.crash_any_time {
                " (any time)"
            } else {
                ""
            },
            self.restart_ticks_max,
            self.pause_per_tick_ppm,
            self.pause_ticks_max,
            self.drift_max,
            match self.slow_node {
                Some(node) => format!("node {node} ×{}", self.slow_factor),
                None => "none".to_owned(),
            },
            self.deadline,
            self.retry_after,
            self.batch_bytes_max,
            self.tail_records_max,
            self.sync_delay_min,
            self.sync_delay_max,
            self.sync_fail_per_tick_ppm,
            self.power_losses
        )
    }
}

impl World {
    pub(super) fn paused(&self, node: NodeId) -> bool {
        self.paused_until
            .get(&node)
            .is_some_and(|&until| until > self.now)
    }

    /// The epochs of both ends of the connection `wire` travels on: a replication frame's
    /// are the epochs of its group's roles.
    pub(super) fn link(&self, from: NodeId, to: NodeId, wire: &Wire) -> (u64, u64) {
        let replication = match wire {
            Wire::Replication { group, .. } => Some(*group),
            _ => None,
        };
        let epoch = |node: NodeId| {
            if node >= CLIENT_BASE {
                return 0;
            }
            let node = &self.nodes[index_of(node)];
            match replication {
                Some(group) => node.plane(group).role_epoch,
                None => node.incarnation,
            }
        };
        (epoch(from), epoch(to))
    }

    /// Per tick of `node`, maybe start a partition, a pause or a crash.
    pub(super) fn maybe_fault(&mut self, node: NodeId) {
        let faults = self.faults.clone();
        if self.rng.below(1_000_000) < faults.partition_per_tick_ppm {
            // A partition from another node or (one time in four) from a client.
            let other = if self.rng.below(4) == 0 {
                CLIENT_BASE + self.rng.below(faults.clients as u64) as NodeId
            } else {
                let pick = self.rng.below(faults.nodes as u64 - 1) as NodeId + 1;
                if pick >= node { pick + 1 } else { pick }
            };
            let until =
                self.now + (1 + self.rng.below(faults.partition_ticks_max)) * MICROS_PER_TICK;
            let both = self.rng.below(2) == 0;
            self.cut_until.insert((node, other), until);
            if both {
                self.cut_until.insert((other, node), until);
            }
            self.note(format!(
                "partition {node}{}{other}",
                if both { "|" } else { "->|" }
            ));
        }
        if faults.reset_per_tick_ppm > 0
            && self.reset_rng.below(1_000_000) < faults.reset_per_tick_ppm
        {
            self.note(format!("reset of node {node}'s connections"));
            for other in 1..=faults.nodes as NodeId {
                if other != node {
                    self.send(node, other, Wire::Closed);
                    self.send(other, node, Wire::Closed);
                }
            }
        }
        if self.rng.below(1_000_000) < faults.pause_per_tick_ppm {
            let until = self.now + (1 + self.rng.below(faults.pause_ticks_max)) * MICROS_PER_TICK;
            self.paused_until.insert(node, until);
            self.note(format!("pause {node}"));
        }
        self.maybe_fail_sync(node);
        if self.rng.below(1_000_000) < faults.crash_per_tick_ppm
            && (self.whole() || (faults.crash_any_time && self.others_hold_memory(node)))
        {
            if self.rng.below(2) == 0 {
                let state = &mut self.nodes[index_of(node)];
                state.tear_next_save = true;
                state.disk.set_failing(true);
                self.note(format!(
                    "node {node} will crash in the middle of its next save"
                ));
            } else {
                self.crash_and_restart(node);
            }
        }
    }

    /// Every node up, not frozen for a view change, and a member of each group's newest
    /// view, as primary or backup: a crash now costs one node's memory, which the 2-safe
    /// rules tolerate. (A crash of a backup that reported, while the view change that
    /// promotes it is under way, is a second failure: the new view may hold no other copy.)
    pub(super) fn whole(&self) -> bool {
        self.nodes.iter().all(|node| node.core().is_some())
            && self.groups.iter().all(|group| self.whole_in(group))
    }

    /// The group's newest view holds every node that serves in it, each following it.
    fn whole_in(&self, group: &GroupSim) -> bool {
        let view = &group.view_latest;
        let group = group.id;
        let serving = || self.nodes.iter().filter(|node| node.serves_in(group));
        view.spares.is_empty()
            && view.backups.len() + 1 == serving().count()
            && serving().all(|node| {
                node.core().is_some_and(|core| {
                    !core.is_frozen(group)
                        && core.view(group).is_some_and(|v| v.number == view.number)
                }) && node
                    .supervisor()
                    .is_some_and(|supervisor| !supervisor.rule(group).restarted())
                    && match node.role(group) {
                        Slot::Primary(role) => role.primary().view() == view.number,
                        Slot::Backup(role) => {
                            role.gate().primary() == view.primary
                                && role.receiver().core().view() == view.number
                        }
                        Slot::Outside => false,
                    }
            })
    }

    /// Every node but `node` is up and holds its memory (it is not a restarted node waiting
    /// to be left out of the view): a crash of `node` now is one failure, whatever the views
    /// are doing. A second memory loss before the first healed is beyond what the rules
    /// promise (with k of n acks a promotion needs n − k + 1 reports).
    pub(super) fn others_hold_memory(&self, node: NodeId) -> bool {
        self.nodes
            .iter()
            .filter(|other| other.id != node)
            .all(|other| {
                other.supervisor().is_some_and(|supervisor| {
                    (supervisor.core().groups().iter())
                        .all(|&group| !supervisor.rule(group).restarted())
                })
            })
    }

    pub(super) fn crash_and_restart(&mut self, node: NodeId) {
        self.crash(node);
        let restart = (1 + self.rng.below(self.faults.restart_ticks_max)) * MICROS_PER_TICK;
        self.schedule(restart, Event::Restart { node });
    }

    pub(super) fn crash(&mut self, node: NodeId) {
        self.note_releasable();
        for group in self.group_ids() {
            if self.holds_sole_copy(node, group) {
                self.report.sole_copy_crashes += 1;
                self.group_mut(group).sole_copy_lost = true;
                self.note(format!(
                    "node {node} crashes holding the only copy of acknowledged records of \
                     group {group}"
                ));
            }
        }
        self.lose_memory(node);
    }

    /// Every node loses power at the same instant: each one that is up crashes (its disk
    /// keeps the synced bytes and a drawn part of the rest, its config store what it last
    /// saved), and every node restarts after a delay drawn from the power losses' generator,
    /// a little apart, in the order the draws give. A node down already keeps the restart it
    /// had. Under `durable` every acknowledged record is in the logs of the primary and k
    /// backups, and the checkers hold the run to them; under the rules that acknowledge from
    /// memory, what was acknowledged before now may be lost (see `acked_kept`), and only
    /// that is exempt.
    pub(super) fn power_loss(&mut self) {
        if !self.faults_on {
            return;
        }
        if self.nodes.iter().all(|node| node.node.is_none()) {
            // Nothing is up to lose power (the last one has not come back yet).
            return;
        }
        let poisoned = |node: &SimNode| node.planes.iter().any(|plane| plane.log.is_poisoned());
        if self.nodes.iter().any(poisoned) {
            // A poisoned log is a disk that failed already (its node runs on without
            // durability until its operator restarts it): a power loss now is a second
            // failure, beyond what `durable` promises. K-of-n seed 699: the only backup of
            // the view had a poisoned log, the records acknowledged were in the primary's
            // and a spare's logs only, and no reporter could be promoted for good. The
            // power loss waits a tick.
            self.schedule(MICROS_PER_TICK, Event::PowerLoss);
            return;
        }
        self.note_releasable();
        self.report.power_losses += 1;
        self.note("power loss: every node crashes".into());
        if !matches!(self.faults.safety, Safety::Durable(_)) {
            // What was answered before lived in memory: reads and replies from now on are
            // judged against what was answered since.
            for group in &mut self.groups {
                group.lsn_answered_max = 0;
                group.lsn_releasable_max = 0;
            }
        }
        // Every node back within the usual restart delays, a few ticks apart at most.
        let restart = (1 + self.power_rng.below(self.faults.restart_ticks_max)) * MICROS_PER_TICK;
        for index in 0..self.nodes.len() {
            let node = self.nodes[index].id;
            if self.nodes[index].node.is_none() {
                continue;
            }
            self.lose_memory(node);
            let stagger = self.power_rng.below(3 * MICROS_PER_TICK);
            self.schedule(restart + stagger, Event::Restart { node });
        }
    }

    /// The node's process dies: its memory is gone, its disk crashes, its peers see its
    /// connections close.
    fn lose_memory(&mut self, node: NodeId) {
        let led = (self.groups.iter())
            .filter(|group| {
                group.view_latest.primary == node
                    && matches!(self.nodes[index_of(node)].role(group.id), Slot::Primary(_))
            })
            .count();
        if led > 1 {
            self.report.several_primaries_crashes += 1;
            self.note(format!(
                "node {node} crashes as the primary of {led} groups"
            ));
        }
        for group in self.group_ids() {
            self.crash_log(node, group);
        }
        let state = &mut self.nodes[index_of(node)];
        let member = state.node.take();
        for (plane, group) in state.planes.iter_mut().zip(GROUP..) {
            if let Some(member) = member.as_ref().filter(|member| member.serves_in(group)) {
                plane.role_epoch = member.role_epoch(group);
            }
            plane.recovered = None;
            plane.recovered_history = None;
            plane.load_epoch += 1;
            plane.ledger = Ledger::none();
        }
        state.ticks_missed = 0;
        state.tear_next_save = false;
        state.disk.set_failing(false);
        self.report.crashes += 1;
        self.note(format!("crash {node}"));
        for other in 1..=self.faults.nodes as NodeId {
            if other != node {
                self.send(node, other, Wire::Closed);
            }
        }
    }

    /// Raises each group's `lsn_releasable_max` to what k backups of its newest view hold
    /// now.
    pub(super) fn note_releasable(&mut self) {
        for group in self.group_ids() {
            self.note_releasable_in(group);
        }
    }

    fn note_releasable_in(&mut self, group: GroupId) {
        let (held_by, acks) = match self.faults.safety {
            Safety::TwoSafe(acks) => (Held::Received, acks),
            Safety::TwoSafeApplied(acks) => (Held::Applied, acks),
            // What the backups' logs synced: all a `durable` release may count on.
            Safety::Durable(acks) => (Held::Synced, acks),
            Safety::OneSafe | Safety::Bounded(_) => return,
        };
        let view = &self.group(group).view_latest;
        let needed = acks.needed(view.backups.len());
        if needed == 0 {
            return;
        }
        let mut held: Vec<u64> = view
            .backups
            .iter()
            .filter_map(|&backup| {
                let state = &self.nodes[index_of(backup)];
                let Slot::Backup(role) = state.role(group) else {
                    return None;
                };
                let follows = state.node.is_some()
                    && role.gate().primary() == view.primary
                    && role.gate().view() == view.number;
                follows.then(|| match held_by {
                    Held::Applied => role.applier().lsn_applied(),
                    Held::Received => role.receiver().core().lsn_received(),
                    Held::Synced => self
                        .held_by(group, Held::Synced, backup, view.primary)
                        .min(role.receiver().core().lsn_received()),
                })
            })
            .collect();
        if held.len() < needed {
            return;
        }
        held.sort_unstable_by(|a, b| b.cmp(a));
        let group = self.group_mut(group);
        group.lsn_releasable_max = group.lsn_releasable_max.max(held[needed - 1]);
    }

    /// Whether an answer released after `power_losses` power losses must survive: under
    /// `durable` always (its record was synced by the primary and k backups), under the
    /// rules that acknowledge from memory only if no power loss came since (it took the
    /// memory the answer's record lived in).
    pub(super) fn acked_kept(&self, power_losses: u64) -> bool {
        matches!(self.faults.safety, Safety::Durable(_)) || power_losses == self.report.power_losses
    }

    /// Whether `node` holds every acknowledged record (or one a reply may have been released
    /// for: `lsn_releasable_max`) and no other node that is up does:
    /// a node holds them when it serves the newest view (its primary, or a backup or spare
    /// following that primary) with every record up to the highest acknowledged LSN.
    pub(super) fn holds_sole_copy(&self, node: NodeId, group: GroupId) -> bool {
        let sim = self.group(group);
        let lsn_acked = sim
            .acked
            .values()
            .filter(|acked| self.acked_kept(acked.power_losses))
            .map(|acked| acked.lsn)
            .max()
            .unwrap_or(0)
            .max(sim.lsn_releasable_max);
        if lsn_acked == 0 {
            return false;
        }
        let view = &sim.view_latest;
        let holds = |id: NodeId| {
            let state = &self.nodes[index_of(id)];
            state.node.is_some()
                && match state.role(group) {
                    Slot::Primary(role) => {
                        id == view.primary && role.primary().lsn_committed() >= lsn_acked
                    }
                    // A node left out of the view (standing by) holds records no view
                    // change can use. A frozen backup the newest view names its primary
                    // holds them until its promotion is carried out (k-of-n seed 501114 at
                    // 2,000 ticks: healing restarted a poisoned node in that moment, taking
                    // the last copy of what the view's truncate LSN named, and the group
                    // waited for good).
                    Slot::Backup(role) => {
                        view.members().any(|member| member == id)
                            && (role.gate().primary() == view.primary || id == view.primary)
                            && role.receiver().core().lsn_received() >= lsn_acked
                    }
                    Slot::Outside => false,
                }
        };
        holds(node)
            && self
                .nodes
                .iter()
                .all(|other| other.id == node || !holds(other.id))
    }

    /// The node starts again from its config store's saved state, with its memory gone.
    pub(super) fn restart(&mut self, node: NodeId) -> Result<(), String> {
        let initial = self.initial.clone();
        let state = &mut self.nodes[index_of(node)];
        let persisted = state
            .disk
            .load()
            .map_err(|err| format!("node {node}: the saved state does not decode: {err}"))?;
        let core = Cluster::new(state.settings.clone(), initial, persisted)
            .map_err(|err| format!("node {node} cannot restart: {err}"))?;
        // As the runtime's `cluster::run`: each group's log recovers, and what it replays is
        // followed into the group's next view that names the node once one has left it out.
        let mut rules = Vec::new();
        for group in core.groups().to_vec() {
            let mut rule = RoleRule::new(node, VIEW_FIRST, true);
            let view_known = core.view(group).map_or(VIEW_FIRST, |view| view.number);
            if let Some(recovered) = self.recover_log(node, group, view_known)? {
                rule = rule.with_recovered(recovered);
            }
            rules.push((group, rule));
        }
        let mut supervisor = Supervisor::new(core, rules);
        // As the runtime: a node without its memory runs no role.
        for group in supervisor.core().groups().to_vec() {
            supervisor.core_mut().set_serving(group, false);
        }
        let state = &mut self.nodes[index_of(node)];
        state.incarnation += 1;
        let mut recovered = Vec::new();
        for (plane, group) in state.planes.iter_mut().zip(GROUP..) {
            plane.role_epoch += 1;
            let (segment, history) = plane.recovered.take().unzip();
            plane.recovered_history = history;
            recovered.extend(segment.map(|segment| (group, segment)));
        }
        // A group's log holds nothing on a node that never served in it.
        assert!(recovered.iter().all(|&(group, _)| state.serves_in(group)));
        let member = self.member(supervisor, recovered);
        self.nodes[index_of(node)].node = Some(member);
        self.note(format!("restart {node}"));
        self.drive(node)
    }

    pub(super) fn send(&mut self, from: NodeId, to: NodeId, wire: Wire) {
        let wire = self.maybe_forge(to, wire);
        let link = self.link(from, to, &wire);
        if self.faults_on {
            if self
                .cut_until
                .get(&(from, to))
                .is_some_and(|&until| until > self.now)
            {
                return;
            }
            if self.rng.below(1_000_000) < self.faults.loss_ppm {
                return;
            }
            if self.rng.below(1_000_000) < self.faults.duplicate_ppm {
                self.deliver_later(from, to, link, wire.clone());
            }
        }
        self.deliver_later(from, to, link, wire);
    }

    pub(super) fn maybe_forge(&mut self, to: NodeId, wire: Wire) -> Wire {
        if self.sabotage.is_none() {
            return wire;
        }
        let Wire::Replication { frame, .. } = &wire else {
            return wire;
        };
        let Ok(PeerMessage::Replication {
            group,
            message: Message::Batch(bytes),
        }) = decode_peer(frame)
        else {
            return wire;
        };
        let every_run = match self.sabotage {
            Some(ClusterSabotage::ForgeBatch) => false,
            Some(ClusterSabotage::ForgeBalances) => true,
            _ => return wire,
        };
        if to != 2 {
            return wire;
        }
        self.batches_to_2 += 1;
        if self.batches_to_2 != 5 {
            return wire;
        }
        self.note("sabotage: a forged batch for node 2".into());
        Wire::replication(
            group,
            &Message::Batch(crate::forge_batch(&bytes, every_run)),
        )
    }

    pub(super) fn deliver_later(&mut self, from: NodeId, to: NodeId, link: (u64, u64), wire: Wire) {
        let (delay_min, delay_max) = (self.faults.delay_min, self.faults.delay_max);
        let mut delay = delay_min + self.rng.below(delay_max - delay_min + 1);
        let slow = self.faults.slow_node;
        if self.faults_on && (slow == Some(from) || slow == Some(to)) {
            delay *= self.faults.slow_factor;
        }
        let overtakes = self.faults_on && self.rng.below(1_000_000) < self.faults.reorder_ppm;
        let last = self.link_last.entry((from, to)).or_insert(0);
        if !overtakes {
            // Behind whatever the link carries already.
            delay = delay.max((*last + 1).saturating_sub(self.now));
            *last = self.now + delay;
        }
        self.schedule(
            delay,
            Event::Deliver {
                from,
                to,
                link,
                wire,
            },
        );
    }

    pub(super) fn deliver(&mut self, from: NodeId, to: NodeId, wire: Wire) -> Result<(), String> {
        if to >= READER_BASE {
            return self.reader_receive((to - READER_BASE) as usize, wire);
        }
        if to >= CLIENT_BASE {
            return self.client_receive((to - CLIENT_BASE) as usize, from, wire);
        }
        if self.nodes[index_of(to)].node.is_none() {
            return Ok(());
        }
        self.catch_up_ticks(to);
        match wire {
            Wire::Cluster(frame) => {
                let PeerMessage::Cluster(message) = decode_peer(&frame)? else {
                    return Err(self.fail(format!("a replication frame as a cluster one to {to}")));
                };
                let core = self.core_mut(to);
                // A malformed message is refused and counted by the runtime; here every
                // message was encoded by a real core, so a refusal is a bug.
                core.step(from, message)
                    .map_err(|err| format!("node {to} refused a cluster message: {err}"))?;
                self.drive(to)
            }
            Wire::Replication { frame, .. } => {
                let PeerMessage::Replication { group, message } = decode_peer(&frame)? else {
                    return Err(self.fail(format!("a cluster frame as a replication one to {to}")));
                };
                self.replicate(from, to, group, message)
            }
            Wire::Hello { conn } => {
                self.greet(from, to, conn);
                Ok(())
            }
            Wire::Call { conn, seq, call } => self.call(from, to, conn, seq, call),
            Wire::Read {
                conn,
                seq,
                call,
                min_lsn,
                consistency,
            } => self.read_at(from, to, conn, seq, call, min_lsn, consistency),
            Wire::Closed => {
                self.nodes[index_of(to)]
                    .node
                    .as_mut()
                    .expect("checked: up")
                    .peer_closed(from);
                self.drive(to)
            }
            wire => Err(self.fail(format!("misrouted {wire:?} to node {to}"))),
        }
    }
}
