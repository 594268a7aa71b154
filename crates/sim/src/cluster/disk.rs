//! Each node's write-ahead log on a simulated disk of its own, carried out as the runtime's
//! log thread carries out `tandem_node::LogCore`'s decisions: orders in the order the roles
//! give them, a sync that takes simulated time (orders that arrive meanwhile wait for the
//! next one: group commit), what a sync made durable told to the current role (a primary's
//! `log_synced`, a backup's `Message::durable_ack`), a crash that crashes the disk too
//! (`SimDisk::crash`: unsynced bytes may be lost or torn), and a restart that recovers the
//! log and replays it onto a freshly loaded segment, as the runtime's `cluster::run` does.
//!
//! **Align.** Every role start aligns the log with its segment before the role appends
//! anything. The runtime queues the align behind the orders before it and keeps a ceiling
//! (nothing above the segment's LSN is published until the align is carried out); here
//! there are no threads, so the align is carried out at once, after the orders waiting for
//! the sync in flight, and the ceiling has nothing to guard.
//!
//! **Policy.** Every node syncs `always` (a sync as soon as the one in flight is done and
//! something is unsynced); a sync takes a delay drawn per seed.
//!
//! **Poisoning.** A failed sync or cut (`SimDisk::fail_next_sync`) poisons the log as in the
//! runtime: it takes no more orders and reports nothing durable, and the node keeps running
//! without durability. An operator restarts it some ticks later (a crash and a restart from
//! its disk), once a crash is one failure (`World::whole`).

use std::path::Path;

use tandem_node::{Aligned, LogCore, LogOrder, SyncPolicy};
use tandem_wal::{SimDisk, WalOptions};

use super::*;

/// Where each node's log lives on its disk.
const LOG_DIR: &str = "/log";
/// Log segments are closed at this size (several per run, so recovery and cuts cross files).
const LOG_SEGMENT_BYTES: u64 = 256 << 10;
/// Ticks a node runs with a poisoned log before its operator restarts it.
const POISONED_RESTART_TICKS: u64 = 20;

/// A node's log: open on its disk while the node is up, the disk alone while it is down.
pub(super) struct NodeLog {
    state: LogState,
    /// Orders given while a sync was under way: carried out when it completes (the runtime's
    /// log thread is in `fdatasync` meanwhile, and they queue in its channel).
    waiting: VecDeque<LogOrder>,
    syncing: bool,
    /// Bumped at a crash: a sync completion of an older incarnation is void.
    epoch: u64,
    /// What the roles were last told is durable (the runtime's published `lsn_durable`).
    lsn_published: u64,
    /// When the log was poisoned (µt), if it is.
    poisoned_at: Option<u64>,
    /// What the log reported durable when the node crashed: recovery must find at least that.
    durable_at_crash: u64,
    /// The Redis model's ghost of what the log holds (saved when a role ends or the node
    /// crashes): what a replay's records were.
    pub(super) history: Option<History>,
}

enum LogState {
    Open(Box<LogCore<SimDisk>>),
    Down(SimDisk),
    /// Only while the disk moves between the two.
    Moving,
}

impl NodeLog {
    /// A node's log on an empty disk, as the node starts for the first time.
    pub(super) fn open_new(lsn_loaded: u64) -> NodeLog {
        let (core, _) = open_core(SimDisk::new(), lsn_loaded).expect("an empty disk opens");
        NodeLog {
            state: LogState::Open(Box::new(core)),
            waiting: VecDeque::new(),
            syncing: false,
            epoch: 0,
            lsn_published: 0,
            poisoned_at: None,
            durable_at_crash: 0,
            history: None,
        }
    }

    fn core_mut(&mut self) -> Option<&mut LogCore<SimDisk>> {
        match &mut self.state {
            LogState::Open(core) => Some(core),
            _ => None,
        }
    }

    /// What the roles were told is durable (0 while not anchored, poisoned, or down).
    pub(super) fn lsn_durable(&self) -> u64 {
        self.lsn_published
    }

    pub(super) fn is_poisoned(&self) -> bool {
        self.poisoned_at.is_some()
    }

    /// Whether the log would like a checkpoint now (`LogCore::wants_checkpoint`).
    pub(super) fn wants_checkpoint(&self) -> bool {
        match &self.state {
            LogState::Open(core) => core.wants_checkpoint(),
            _ => false,
        }
    }
}

/// Batch bytes a role applies between two checkpoints: small, so that every run takes a few
/// and its restarts install them.
pub(super) const CHECKPOINT_BYTES: u64 = 24 << 10;

fn open_core(
    disk: SimDisk,
    lsn_loaded: u64,
) -> Result<(LogCore<SimDisk>, tandem_wal::Recovered), tandem_wal::WalError> {
    let options = WalOptions {
        segment_bytes_max: LOG_SEGMENT_BYTES,
        ..WalOptions::default()
    };
    LogCore::open(
        disk,
        Path::new(LOG_DIR),
        options,
        SyncPolicy::Always,
        lsn_loaded,
    )
}

impl World {
    /// Hands node `node`'s log an order from its current role; what the role hears is
    /// durable now, if carrying it out at once made more so (a checkpoint it finished).
    pub(super) fn log_order(
        &mut self,
        node: NodeId,
        group: GroupId,
        order: LogOrder,
    ) -> Option<u64> {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        if log.is_poisoned() || log.core_mut().is_none() {
            // A stopped log thread takes nothing: no harm, it reports nothing durable either.
            return None;
        }
        // Behind the orders that wait, as in the runtime's queue: a role that hears of a
        // sync (`log_publish`) may give orders before those that waited for it are carried
        // out (Redis seed 53913: a paused primary's sync completed as it resumed, the
        // publish let it commit, and its next batch went in ahead of the one that waited).
        if log.syncing || !log.waiting.is_empty() {
            log.waiting.push_back(order);
            return None;
        }
        let heard = self.log_carry_out(node, group, order);
        self.log_maybe_sync(node, group);
        heard
    }

    /// Carries an order out; what the role is to hear is durable, if that rose.
    fn log_carry_out(&mut self, node: NodeId, group: GroupId, order: LogOrder) -> Option<u64> {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let core = log.core_mut()?;
        let finishes_checkpoint = matches!(order, LogOrder::CheckpointFinish { .. });
        if let Err(err) = core.carry_out(order) {
            self.log_poison(node, group, err.to_string());
            return None;
        }
        if finishes_checkpoint {
            return self.log_checkpoint_durable(node, group);
        }
        None
    }

    /// A checkpoint finished: what it made durable (a log with nothing synced after it, or
    /// one it anchored again) is the role's to hear at its next step, as the runtime's log
    /// thread publishes after a checkpoint. Heard only after the next sync, it could wait for
    /// good on an idle primary (any-time seed 335116: the primary's log held a checkpoint at
    /// LSN 399 and nothing after it, and its `durable` replies to retries never left).
    fn log_checkpoint_durable(&mut self, node: NodeId, group: GroupId) -> Option<u64> {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let lsn = log.core_mut().map_or(0, |core| core.lsn_durable());
        if lsn <= log.lsn_published {
            return None;
        }
        log.lsn_published = lsn;
        Some(lsn)
    }

    /// Starts a sync if the policy says so and none is under way; it completes after a delay
    /// drawn from the seed's range.
    fn log_maybe_sync(&mut self, node: NodeId, group: GroupId) {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        if log.syncing || log.is_poisoned() {
            return;
        }
        let Some(core) = log.core_mut() else {
            return;
        };
        if !core.sync_due(0) {
            return;
        }
        log.syncing = true;
        let epoch = log.epoch;
        let (min, max) = (self.faults.sync_delay_min, self.faults.sync_delay_max);
        let delay = min + self.disk_rng.below(max - min + 1);
        self.schedule(delay, Event::LogSynced { node, group, epoch });
    }

    /// The sync under way completes: everything carried out before it is durable (or the
    /// log is poisoned); the roles hear it; the orders that waited go in, and the next sync
    /// starts.
    pub(super) fn log_synced(
        &mut self,
        node: NodeId,
        group: GroupId,
        epoch: u64,
    ) -> Result<(), String> {
        let state = &mut self.nodes[index_of(node)];
        let log = &state.plane(group).log;
        if state.node.is_none() || log.epoch != epoch || !log.syncing {
            return Ok(());
        }
        if self.paused(node) {
            // A paused process syncs nothing: it completes once the node resumes.
            let resume = self.paused_until[&node] - self.now;
            self.schedule(resume, Event::LogSynced { node, group, epoch });
            return Ok(());
        }
        // A primary that resumes replays the ticks it missed before it does anything else
        // (its lease is measured against the clock), as for a message.
        self.catch_up_ticks(node);
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        log.syncing = false;
        let Some(core) = log.core_mut() else {
            return Ok(());
        };
        match core.sync() {
            Ok(()) => self.report.log_syncs += 1,
            Err(err) => {
                self.log_poison(node, group, err.to_string());
                return Ok(());
            }
        }
        self.log_publish(node, group)?;
        // Group commit: everything that waited goes into the next sync.
        while let Some(order) = self.nodes[index_of(node)]
            .plane_mut(group)
            .log
            .waiting
            .pop_front()
        {
            if let Some(lsn) = self.log_carry_out(node, group, order) {
                self.with_node(node, |member, env| member.log_anchored(group, lsn, env));
            }
        }
        self.log_maybe_sync(node, group);
        Ok(())
    }

    /// Tells the current role what is durable now, if that rose (the runtime's `publish`
    /// and its listener).
    fn log_publish(&mut self, node: NodeId, group: GroupId) -> Result<(), String> {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let lsn = log.core_mut().map_or(0, |core| core.lsn_durable());
        let before = std::mem::replace(&mut log.lsn_published, lsn);
        if lsn <= before {
            return Ok(());
        }
        self.log_tell_role(node, group, lsn)
    }

    /// The log's listener: the primary role hears `log_synced`; a backup acks to its
    /// primary at once (`Message::durable_ack`).
    fn log_tell_role(&mut self, node: NodeId, group: GroupId, lsn: u64) -> Result<(), String> {
        self.with_node(node, |member, env| member.log_synced(group, lsn, env))
            .unwrap_or(Ok(()))
    }

    fn log_poison(&mut self, node: NodeId, group: GroupId, cause: String) {
        let now = self.now;
        // A failed log takes nothing more, rewinds included: what it holds is a prefix of
        // its role's records now, or of what the role holds later if it only went on from
        // them (records received before the failure and applied after); not of records that
        // a rewind since replaced ([`Self::note_log_history`]).
        let history = self.log_history(node, group, self.nodes[index_of(node)].role(group));
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        if history.is_some() {
            log.history = history;
        }
        log.poisoned_at = Some(now);
        log.lsn_published = 0;
        log.waiting.clear();
        log.syncing = false;
        self.report.logs_poisoned += 1;
        self.note(format!(
            "node {node}: its log failed and takes nothing more; nothing further is durable \
             ({cause})"
        ));
    }

    /// Makes node `node`'s log end at `lsn`, the LSN of the segment the role it starts is on,
    /// before that role appends anything (after the orders given before, as the runtime's
    /// queue carries them out). At once: nothing else runs meanwhile, so no ceiling is needed.
    /// Before a rejoin's rewind to `lsn`: where the member's log lets it rewind to (see
    /// `LogCore::align_rejoin`); `lsn` when the log cannot say (poisoned, absent).
    pub(super) fn log_align_rejoin(&mut self, node: NodeId, group: GroupId, lsn: u64) -> u64 {
        // The role is outside while its records move: a checkpoint finished here is heard
        // by none.
        self.log_carry_out_waiting(node, group);
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        if log.is_poisoned() {
            return lsn;
        }
        let Some(core) = log.core_mut() else {
            return lsn;
        };
        match core.align_rejoin(lsn) {
            Ok(kept) => {
                log.lsn_published = core.lsn_durable();
                if kept < lsn {
                    self.note(format!(
                        "node {node}: its log holds an image across LSN {lsn}; it rejoins from \
                         LSN {kept} instead"
                    ));
                }
                kept
            }
            Err(err) => {
                self.log_poison(node, group, err.to_string());
                lsn
            }
        }
    }

    /// Carries out the orders that waited for the sync under way, at once.
    fn log_carry_out_waiting(&mut self, node: NodeId, group: GroupId) {
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let orders: Vec<LogOrder> = log.waiting.drain(..).collect();
        for order in orders {
            self.log_carry_out(node, group, order);
        }
    }

    pub(super) fn log_align(&mut self, node: NodeId, group: GroupId, lsn: u64) {
        // The role is outside while it starts: a checkpoint finished here is heard by none.
        self.log_carry_out_waiting(node, group);
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        if log.is_poisoned() {
            return;
        }
        let Some(core) = log.core_mut() else {
            return;
        };
        match core.align(lsn) {
            Ok(aligned) => {
                log.lsn_published = core.lsn_durable();
                match aligned {
                    Aligned::AsItWas => {}
                    Aligned::Cut { lsn_end_before } => self.note(format!(
                        "node {node}: cut its log from LSN {lsn_end_before} back to {lsn}"
                    )),
                    Aligned::Restarted { lsn_end_before } => self.note(format!(
                        "node {node}: its log ended at LSN {lsn_end_before} and starts again \
                         at {lsn}, unanchored"
                    )),
                }
            }
            Err(err) => self.log_poison(node, group, err.to_string()),
        }
        // A cut may leave appends to sync (none today: a cut is durable), and a sync that was
        // under way still completes.
        self.log_maybe_sync(node, group);
    }

    /// Per tick of a node that is up: maybe fail the next sync of one of its logs' disks
    /// (the group's drawn when there are several).
    pub(super) fn maybe_fail_sync(&mut self, node: NodeId) {
        let ppm = self.faults.sync_fail_per_tick_ppm;
        if ppm == 0 || self.disk_rng.below(1_000_000) >= ppm {
            return;
        }
        let groups = self.groups.len() as u64;
        let group = GROUP
            + if groups > 1 {
                self.disk_rng.below(groups) as GroupId
            } else {
                0
            };
        if let Some(core) = self.nodes[index_of(node)].plane_mut(group).log.core_mut() {
            core.disk_mut().fail_next_sync();
            self.note(format!(
                "node {node}: its disk's next sync in group {group} will fail"
            ));
        }
    }

    /// Whether node `node`'s operator restarts it now: its log has been poisoned a while,
    /// and a crash now is one failure. That is so while the group is whole; once the faults
    /// have healed, also when the node holds no acknowledged record alone and either every
    /// other node holds its memory or the rule is `durable` (a released record is then in
    /// the logs that synced it, never in a failed one: a memory loss takes none). Healing
    /// repairs every fault, and only a restart repairs a poisoned log: under `durable`, a
    /// backup whose log failed kept the removal of a restarted one waiting for good, since it
    /// alone would have held the released records, and not in its log (default seed 705016,
    /// any-time seed 305890). Two restarts at once under a memory rule are two failures
    /// (k-of-n seed 457 lost a commit when healing restarted two poisoned nodes together).
    /// Neither rule restarts the newest view's primary while no backup of that view holds
    /// its memory: the view's records are then in that primary's memory alone, its log
    /// failed, and no view change can go on without them (seed 1229786: a primary with no
    /// backup; seed 1226396, `durable`: its one backup a restarted node).
    pub(super) fn poisoned_restart_due(&self, node: NodeId) -> bool {
        let healed_restart = || {
            !self.faults_on
                && self.group_ids().into_iter().all(|group| {
                    !self.holds_sole_copy(node, group) && !self.holds_view_alone(node, group)
                })
                && (self.others_hold_memory(node)
                    || matches!(self.faults.safety, Safety::Durable(_)))
        };
        let poisoned_long = (self.nodes[index_of(node)].planes.iter()).any(|plane| {
            (plane.log.poisoned_at)
                .is_some_and(|at| self.now >= at + POISONED_RESTART_TICKS * MICROS_PER_TICK)
        });
        poisoned_long && (self.whole() || healed_restart())
    }

    /// Whether node `node` is `group`'s newest view's primary and none of that view's
    /// backups holds its memory (each is down, or restarted and not yet left out).
    fn holds_view_alone(&self, node: NodeId, group: GroupId) -> bool {
        let view = &self.group(group).view_latest;
        view.primary == node
            && !view.backups.iter().any(|&backup| {
                self.nodes[index_of(backup)]
                    .supervisor()
                    .is_some_and(|supervisor| !supervisor.rule(group).restarted())
            })
    }

    /// The ghost of what node `node`'s records hold, as its `role` has them now (the Redis
    /// model): what its log holds is a prefix of it.
    pub(super) fn log_history(&self, node: NodeId, group: GroupId, role: &Slot) -> Option<History> {
        let redis = self.group(group).redis.as_deref()?;
        let ledger = &self.nodes[index_of(node)].plane(group).ledger;
        match role {
            Slot::Primary(_) => Some(ledger.history.clone()),
            Slot::Backup(backup) => {
                // Received batches held back for reads are in the log already.
                let mut history = ledger.history.clone();
                for apply in backup.held() {
                    let (key, lsn_base, _) = batch_key(apply.batch.bytes());
                    let Some(entries) = redis.batches.get(&key) else {
                        break;
                    };
                    if apply.lsn_from != history.lsn() + 1 {
                        break;
                    }
                    let first = (apply.lsn_from - lsn_base) as usize;
                    let last = (apply.batch.lsn_last() - lsn_base) as usize;
                    if !history.extend(&entries[first..=last]) {
                        break;
                    }
                }
                Some(history)
            }
            Slot::Outside => None,
        }
    }

    /// Takes `history`, a role's ([`Self::log_history`]), as the ghost of node `node`'s log:
    /// a working log holds a prefix of what its role holds; a failed one's ghost moves only
    /// to a history that continues it (a rewind after the failure left the log behind).
    pub(super) fn note_log_history(
        &mut self,
        node: NodeId,
        group: GroupId,
        history: Option<History>,
    ) {
        let Some(history) = history else {
            return;
        };
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let continues = log
            .history
            .as_ref()
            .is_none_or(|ghost| history.extends(ghost));
        if log.poisoned_at.is_none() || continues {
            log.history = Some(history);
        }
    }

    /// The node crashes: its disk loses power (what was not synced may be lost or torn).
    pub(super) fn crash_log(&mut self, node: NodeId, group: GroupId) {
        let history = self.log_history(node, group, self.nodes[index_of(node)].role(group));
        self.note_log_history(node, group, history);
        let seed = self.disk_rng.next_u64();
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        log.epoch += 1;
        log.syncing = false;
        log.waiting.clear();
        log.lsn_published = 0;
        log.poisoned_at = None;
        let state = std::mem::replace(&mut log.state, LogState::Moving);
        let mut disk = match state {
            LogState::Open(core) => {
                log.durable_at_crash = core.lsn_durable();
                core.into_disk()
            }
            LogState::Down(disk) => disk,
            LogState::Moving => unreachable!("the disk is somewhere"),
        };
        disk.crash(seed);
        log.state = LogState::Down(disk);
    }

    /// The node restarts: it opens its log (recovery) and, if the log's history starts at
    /// the initial load, replays it onto a freshly loaded segment, which the node follows the
    /// next view from (`RoleRule::with_recovered`); what it rebuilt.
    pub(super) fn recover_log(
        &mut self,
        node: NodeId,
        group: GroupId,
        view_known: u64,
    ) -> Result<Option<Recovered>, String> {
        let lsn_loaded = self.lsn_loaded;
        let log = &mut self.nodes[index_of(node)].plane_mut(group).log;
        let disk = match std::mem::replace(&mut log.state, LogState::Moving) {
            LogState::Down(disk) => disk,
            _ => unreachable!("a node restarts after a crash"),
        };
        let (core, recovered) = open_core(disk, lsn_loaded)
            .map_err(|err| format!("node {node} cannot open its log: {err}"))?;
        log.lsn_published = core.lsn_durable();
        log.state = LogState::Open(Box::new(core));
        // The disk's truth against what the log claimed: every record reported durable
        // before the crash is still there (in the checkpoint or the entries after it).
        // A log that rebuilds a state gives back at least the initial load (an empty one
        // gives back just that).
        let durable = std::mem::take(&mut log.durable_at_crash);
        let rebuilds = tandem_node::rebuilds_state(&recovered, lsn_loaded);
        let lsn_last = recovered
            .lsn_last()
            .unwrap_or(0)
            .max(recovered.lsn_checkpoint().unwrap_or(0))
            .max(if rebuilds { lsn_loaded } else { 0 });
        if durable > 0 && (!rebuilds || lsn_last < durable) {
            return Err(self.fail(format!(
                "node {node}'s log reported LSN {durable} durable before it crashed, but its \
                 disk gave back {:?}..={lsn_last} (checkpoint {:?})",
                recovered.lsn_base(),
                recovered.lsn_checkpoint()
            )));
        }
        if !rebuilds {
            return Ok(None);
        }
        if recovered.checkpoint.is_some() {
            self.report.checkpoints_installed += 1;
        }
        let mut segment = loaded(&*self.model, self.segment_len);
        let replayed = match tandem_node::rebuild(&mut segment, &recovered, lsn_loaded, view_known)
        {
            Ok(Some(replayed)) => replayed,
            Ok(None) => unreachable!("the log rebuilds a state"),
            Err(err) => {
                return Err(self.fail(format!(
                    "node {node} cannot replay its log, which recovery gave back whole: {err}"
                )));
            }
        };
        let history = if self.redis_model() {
            let ghost = self.nodes[index_of(node)]
                .plane_mut(group)
                .log
                .history
                .as_ref();
            match ghost {
                Some(ghost) if ghost.lsn() >= replayed.lsn => ghost.prefix(replayed.lsn),
                // An empty log: the load, whether or not the node held records before.
                _ if replayed.lsn == lsn_loaded => History::new(lsn_loaded),
                _ => {
                    return Err(self.fail(format!(
                        "node {node} replayed its log to LSN {}, beyond what its records were \
                         known to hold",
                        replayed.lsn
                    )));
                }
            }
        } else {
            History::new(lsn_loaded)
        };
        self.report.log_replays += 1;
        self.note(format!(
            "node {node}: replayed its log to LSN {} (records of view {}, {} records, {} \
             images)",
            replayed.lsn, replayed.view, replayed.records, replayed.images
        ));
        self.nodes[index_of(node)].plane_mut(group).recovered = Some((segment, history));
        Ok(Some(Recovered {
            view: replayed.view,
            lsn: replayed.lsn,
        }))
    }
}
