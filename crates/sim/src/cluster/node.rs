//! One node as the runtime drives it: ticks, the data plane (the primary's and the backup's
//! cores and the store), and the node's [`Supervisor`] (the cluster core and the role rule),
//! whose orders [`SimRoles`] carries out in memory as the runtime's `RuntimeRoles` does with
//! threads. Nothing here decides what a node does: the cores do.

use super::*;
use disk::CHECKPOINT_BYTES;
use tandem_log::SealedBatch;

impl World {
    pub(super) fn core_mut(&mut self, node: NodeId) -> &mut Cluster {
        self.nodes[index_of(node)]
            .supervisor
            .as_mut()
            .expect("the node is up, and its supervisor not driving")
            .core_mut()
    }

    /// Replays, into a primary's data plane, the ticks it missed while paused (the cluster
    /// core skips them, as the runtime's supervisor does: that only delays its reports).
    pub(super) fn catch_up_ticks(&mut self, node: NodeId) {
        let state = &mut self.nodes[index_of(node)];
        let missed = std::mem::take(&mut state.ticks_missed);
        if let Slot::Primary(role) = &mut state.role {
            for _ in 0..missed {
                role.role_mut().tick();
            }
        }
    }

    pub(super) fn tick(&mut self, node: NodeId) -> Result<(), String> {
        self.catch_up_ticks(node);
        if matches!(self.nodes[index_of(node)].role, Slot::Primary(_)) {
            self.core_mut(node).executor_turned();
        }
        self.core_mut(node).tick();
        let index = index_of(node);
        match &mut self.nodes[index].role {
            Slot::Primary(role) => {
                role.role_mut().tick();
                self.maybe_run_periodic(node)?;
                self.drain_inbox(node)?;
                self.collect_primary(node)?;
            }
            Slot::Backup(role) => {
                role.tick();
                self.collect_backup(node)?;
            }
            Slot::Outside => {}
        }
        self.drive(node)
    }

    /// Has the node's supervisor save, send and act on what its cluster core produced, as the
    /// runtime's supervisor thread does; then tells it what the primary role observed
    /// meanwhile, and drives again until nothing is left.
    pub(super) fn drive(&mut self, node: NodeId) -> Result<(), String> {
        // A crash now would cost a second node's memory: the save goes through after all.
        if self.nodes[index_of(node)].tear_next_save && !self.whole() {
            let state = &mut self.nodes[index_of(node)];
            state.tear_next_save = false;
            state.disk.set_failing(false);
        }
        loop {
            let state = &mut self.nodes[index_of(node)];
            let Some(mut supervisor) = state.supervisor.take() else {
                return Ok(());
            };
            let mut disk = std::mem::take(&mut state.disk);
            let driven = supervisor.drive(&mut disk, &mut SimRoles { world: self, node });
            let state = &mut self.nodes[index_of(node)];
            state.disk = disk;
            match driven {
                Ok(()) => {}
                Err(DriveError::Save(_)) if state.tear_next_save => {
                    // The save tore: nothing that depended on it was sent, and the node is
                    // gone.
                    self.note(format!("node {node}: crash in the middle of a save"));
                    self.report.torn_saves += 1;
                    self.crash_and_restart(node);
                    return Ok(());
                }
                Err(DriveError::Save(err)) => {
                    return Err(format!("node {node}: the config store cannot save: {err}"));
                }
                Err(DriveError::Role(err)) => return Err(err),
            }
            let observed = std::mem::take(&mut state.observed_pending);
            let nothing_new = observed.is_empty();
            for observed in observed {
                supervisor.observe(observed);
            }
            state.supervisor = Some(supervisor);
            if nothing_new {
                return Ok(());
            }
        }
    }

    /// Tells node `node`'s cluster core what its primary role observed; while the supervisor
    /// drives, that waits for the end of the drive (as the runtime's channel makes it wait).
    pub(super) fn observe(&mut self, node: NodeId, observed: Observed) {
        let state = &mut self.nodes[index_of(node)];
        match state.supervisor.as_mut() {
            Some(supervisor) => supervisor.observe(observed),
            None => state.observed_pending.push(observed),
        }
    }

    /// A primary role that the view replaced gives up its replies, as the core says
    /// (abandoned: "not primary").
    fn depose(&mut self, node: NodeId, view: &View) -> Result<(), String> {
        let index = index_of(node);
        if let Slot::Primary(role) = &mut self.nodes[index].role
            && view.primary != node
        {
            role.role_mut().depose(view.number);
            // Calls still queued are told "not primary", as the runtime's executor tells
            // them: their clients go to the new primary at once.
            let queued: Vec<ClientConn> = role.take_waiting().map(|waiting| waiting.to).collect();
            for ClientConn { client, conn, .. } in queued {
                self.send(
                    node,
                    CLIENT_BASE + client as NodeId,
                    Wire::NotPrimary { conn },
                );
            }
            self.collect_primary(node)?;
        }
        Ok(())
    }

    /// Carries `transition` out on node `node` to follow `view`; whether the node serves.
    fn carry_out(
        &mut self,
        node: NodeId,
        transition: Transition,
        view: &View,
    ) -> Result<bool, String> {
        let index = index_of(node);
        let ignore_depose = self.sabotage == Some(ClusterSabotage::IgnoreDepose)
            && view.primary != node
            && matches!(self.nodes[index].role, Slot::Primary(_));
        if !ignore_depose {
            self.depose(node, view)?;
        }
        // Whatever the node becomes, the batches a backup held back for reads come first: a
        // role change cannot wait (the runtime's applier ends the hold for a handover).
        self.release_held(node)?;
        // What the log holds is the old role's (the Redis model's ghost of it, for a replay).
        self.save_log_history(node);
        let was_backup = matches!(self.nodes[index].role, Slot::Backup(_));
        let role = std::mem::replace(&mut self.nodes[index].role, Slot::Outside);
        if ignore_depose {
            return self.stay_stale_primary(node, role, view);
        }
        // The node's table decides what becomes of the role and its records, as the
        // runtime's; the carrier holds them as values and moves the checkers' ledger along.
        let mut carrier = SimCarrier {
            world: self,
            node,
            failure: None,
        };
        let next = tandem_node::carry_out(&mut carrier, transition, role, view);
        if let Some(failure) = carrier.failure {
            return Err(failure);
        }
        let promoted = matches!(transition, Transition::Promote { .. });
        let new_role = !matches!(
            transition,
            Transition::StayPrimary | Transition::StayBackup | Transition::Wait
        ) || (transition == Transition::StayBackup && !was_backup);
        // Every role started (as the runtime's `start_role`, which a backup kept through a
        // stand-by does not call) aligns the log with its segment first.
        let starts_role = new_role
            && !(transition == Transition::StandBy && was_backup)
            && !matches!(next, Slot::Outside);
        if new_role {
            self.nodes[index].role_epoch += 1;
            // A new primary role starts a new history: what backups received from this
            // node's earlier reign says nothing of it.
            if let Slot::Primary(_) = &next {
                self.received_ever
                    .retain(|&(_, primary), _| primary != node);
                self.synced_ever.retain(|&(_, primary), _| primary != node);
                // A backup that already follows this node (it followed the view before this
                // node took it up: seeds 48 and 948) holds what it holds, and told it what
                // its log synced when it started.
                for backup in &self.nodes {
                    let Slot::Backup(role) = &backup.role else {
                        continue;
                    };
                    if role.gate().primary() != node || backup.supervisor.is_none() {
                        continue;
                    }
                    let held = (
                        role.receiver().core().lsn_received(),
                        role.applier().lsn_applied(),
                    );
                    self.received_ever.insert((backup.id, node), held);
                    if backup.log.lsn_durable() > 0 {
                        self.synced_ever
                            .insert((backup.id, node), backup.log.lsn_durable());
                    }
                }
            }
            // The primary accepts the new role's connection: what it knew of the old one is
            // void, and the backup's introduction says where it stands now.
            if let Slot::Backup(_) = &next
                && let Slot::Primary(primary) = &mut self.nodes[index_of(view.primary)].role
            {
                primary.role_mut().link_reset(node);
            }
        }
        let serving = !matches!(next, Slot::Outside);
        if !serving {
            self.nodes[index].ledger = Ledger::none();
        }
        if self.redis.is_some() {
            let lsn = match &next {
                Slot::Primary(role) => role.role().store().segment().lsn(),
                Slot::Backup(role) => role.segment().lsn(),
                Slot::Outside => 0,
            };
            assert_eq!(
                self.nodes[index].ledger.history.lsn(),
                lsn,
                "node {node}'s history follows its segment"
            );
        }
        // Where the role's records end: a backup kept across the view (`Follow` of the same
        // role) may hold received batches its applier has not applied yet, which its log
        // holds already (Redis seed 438 aligned at the applied LSN, cut them, and the next
        // batch did not continue the log).
        let lsn_start = match &next {
            Slot::Primary(role) => role.role().store().segment().lsn(),
            Slot::Backup(role) => role
                .segment()
                .lsn()
                .max(role.receiver().core().lsn_received()),
            Slot::Outside => 0,
        };
        if starts_role {
            self.log_align(node, lsn_start);
        }
        let mut next = next;
        // Every role checkpoints for its log, as the runtime's do.
        let (bytes, lsn_loaded) = (CHECKPOINT_BYTES, self.lsn_loaded);
        match &mut next {
            Slot::Primary(role) => role.role_mut().enable_checkpoints(bytes, lsn_loaded),
            Slot::Backup(role) => role.applier_mut().enable_checkpoints(bytes, lsn_loaded),
            Slot::Outside => {}
        }
        self.nodes[index].role = next;
        if starts_role {
            self.log_listen(node)?;
        }
        // A promotion in a view the config store has already replaced (a node cut off while
        // later views were made learns them late and follows each in turn, k-of-n seed
        // 1102351) makes a primary that serves nothing: its members have moved on, so no
        // batch of it is acked and no lease is granted it. Only a promotion in the newest view
        // must hold every acknowledged commit; were a commit the stale primary acknowledged
        // missing from the newest view, the next promotion there, or the check once the
        // cluster has healed, would say so.
        if promoted && view.number == self.view_latest.number {
            self.check_acked(node)?;
        }
        match &self.nodes[index].role {
            Slot::Primary(_) => self.collect_primary(node)?,
            Slot::Backup(_) => self.collect_backup(node)?,
            Slot::Outside => {}
        }
        Ok(serving)
    }

    /// Under the `IgnoreDepose` sabotage, primary `node` keeps its `role` in `view`, which
    /// names another primary: it believes itself alone in the new view.
    fn stay_stale_primary(
        &mut self,
        node: NodeId,
        role: Slot,
        view: &View,
    ) -> Result<bool, String> {
        let Slot::Primary(mut stale) = role else {
            unreachable!("checked: a primary")
        };
        if !stale.primary().is_deposed() && stale.primary().view() < view.number {
            self.note(format!(
                "sabotage: node {node} stays primary in view {}",
                view.number
            ));
            // Alone in the new view, it releases at commit.
            let config = PrimaryConfig {
                backups: Vec::new(),
                spares: Vec::new(),
                lone: true,
                ..self.primary_config(view)
            };
            stale.role_mut().restart_replication(config);
        }
        self.nodes[index_of(node)].role = Slot::Primary(stale);
        self.collect_primary(node)?;
        Ok(true)
    }

    /// A backup role of `view` on `segment` (loaded, or kept from an earlier role, perhaps
    /// rewound), keeping `tail`, the batches a handed-over applier retained.
    fn backup_on_tail(
        &self,
        node: NodeId,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
    ) -> Slot {
        let role = tandem_node::BackupRole::on_segment(
            receiver_config(view),
            segment,
            tail,
            self.tail_limits(),
            read_settings(),
            question_first(self.nodes[index_of(node)].role_epoch + 1),
        );
        Slot::Backup(Box::new(role))
    }

    /// A retained tail's limits, a primary's and a backup's alike (as the runtime's
    /// `tuning.tail_records_max` and `tail_bytes_max` bound both).
    pub(super) fn tail_limits(&self) -> TailLimits {
        TailLimits {
            records_max: self.faults.tail_records_max,
            bytes_max: 256 << 20,
        }
    }

    pub(super) fn primary_config(&self, view: &View) -> PrimaryConfig {
        PrimaryConfig {
            group: GROUP,
            view: view.number,
            backups: view.backups.clone(),
            spares: view.spares.clone(),
            safety: self.faults.safety,
            tail: self.tail_limits(),
            batch_bytes_max: self.faults.batch_bytes_max,
            heartbeat_ticks: 1,
            resend_ticks: 3,
            kind: BatchKind::Redo,
            flush_batches_in_flight_max: 2,
            lone: false,
            lease_ticks: Some(self.primary_lease_ticks()),
        }
    }

    /// The primary's share of the backups' lease promise (`tandem_replication::lease`): a
    /// backup notices a message at some point inside a tick, a released reply leaves at
    /// once, and the nodes' ticks differ by their drift.
    pub(super) fn primary_lease_ticks(&self) -> u64 {
        let margins = LeaseMargins {
            notice_ticks: 1,
            send_ticks: 0,
            period_min: *self.period.values().min().expect("nodes"),
            period_max: *self.period.values().max().expect("nodes"),
        };
        let promise_ticks = self.nodes[0].settings.lease_ticks;
        primary_lease_ticks(promise_ticks, margins).expect("the faults leave the primary a lease")
    }

    pub(super) fn replicate(
        &mut self,
        from: NodeId,
        to: NodeId,
        message: Message,
    ) -> Result<(), String> {
        let index = index_of(to);
        match &mut self.nodes[index].role {
            Slot::Primary(role) => {
                role.role_mut().step(from, message);
                // An ack may lift flow control: the executor runs what was waiting.
                self.drain_inbox(to)?;
                if let Slot::Primary(role) = &mut self.nodes[index].role {
                    role.role_mut().flush();
                }
                // Hearing a member changes only the core's timers: nothing for it to hand over
                // until its next tick or message.
                self.collect_primary(to)
            }
            Slot::Backup(role) => {
                // A frozen backup has closed its primary's links; a stranger's message goes
                // to the receiver, which fences an older view's primary.
                if !role.admits(from) {
                    return Ok(());
                }
                let heard = from == role.gate().primary();
                // What the log synced first, as the runtime's receiver loop before each read.
                self.backup_hears_synced(to);
                let Slot::Backup(role) = &mut self.nodes[index].role else {
                    unreachable!("matched above");
                };
                role.step(from, message);
                if heard {
                    self.core_mut(to).heard_from_primary();
                    let promise_ticks = self.nodes[index_of(to)].settings.lease_ticks;
                    let end = self.tick_next_at[&to] + (promise_ticks - 1) * self.period[&to];
                    let promise = self.promise_end.entry((to, from)).or_insert(0);
                    *promise = (*promise).max(end);
                }
                self.collect_backup(to)
            }
            Slot::Outside => Ok(()),
        }
    }

    /// Whether primary `node` serves clients now: its role is not deposed and its node's
    /// view names it primary of the role's view (the sabotaged stale primary serves
    /// whatever its role says).
    fn serving(&self, node: NodeId) -> bool {
        let index = index_of(node);
        let stale_serves = self.sabotage == Some(ClusterSabotage::IgnoreDepose);
        match &self.nodes[index].role {
            Slot::Primary(role) if stale_serves => !role.primary().is_deposed(),
            Slot::Primary(role) => {
                !role.primary().is_deposed()
                    && self.nodes[index]
                        .core()
                        .and_then(|core| core.view())
                        .is_some_and(|view| {
                            view.number == role.primary().view() && view.primary == node
                        })
            }
            _ => false,
        }
    }

    /// A client greets node `to` on connection `conn`: the node says whether it serves as
    /// primary, and its view, as a node's `Welcome` does.
    pub(super) fn greet(&mut self, from: NodeId, to: NodeId, conn: u64) {
        let index = index_of(to);
        let (primary, view) = match &self.nodes[index].role {
            Slot::Primary(role) if self.serving(to) => (true, role.primary().view()),
            _ => {
                let view = self.nodes[index]
                    .core()
                    .and_then(|core| core.view())
                    .map_or(0, |view| view.number);
                (false, view)
            }
        };
        self.send(
            to,
            from,
            Wire::Welcome {
                conn,
                primary,
                view,
            },
        );
    }

    pub(super) fn call(
        &mut self,
        from: NodeId,
        to: NodeId,
        conn: u64,
        seq: u64,
        sim_call: SimCall,
    ) -> Result<(), String> {
        let client = ClientConn {
            client: (from - CLIENT_BASE) as usize,
            conn,
            ran_at_ms: 0,
            reads: false,
        };
        let index = index_of(to);
        let serving = self.serving(to);
        if !serving {
            self.send(to, from, Wire::NotPrimary { conn });
            return Ok(());
        }
        if let Slot::Primary(role) = &mut self.nodes[index].role {
            role.queue(WaitingCall {
                to: client,
                client_id: client_id(client.client),
                seq,
                proc_id: sim_call.proc_id,
                args: sim_call.args,
                read_only: false,
                safety: None,
            });
        }
        self.drain_inbox(to)?;
        if let Slot::Primary(role) = &mut self.nodes[index].role {
            // The executor has run dry: ship what is open.
            role.role_mut().flush();
        }
        self.collect_primary(to)
    }

    /// Runs the calls waiting at primary `node` while flow control allows.
    pub(super) fn drain_inbox(&mut self, node: NodeId) -> Result<(), String> {
        let time_ms = self.clock_ms();
        let redis = self.redis.is_some();
        loop {
            let sabotaged = self.increment_twice(node);
            let state = &mut self.nodes[index_of(node)];
            let Slot::Primary(role) = &mut state.role else {
                return Ok(());
            };
            let Some(front) = role.front_mut() else {
                return Ok(());
            };
            let incr = redis && front.proc_id == command_proc_of(b"INCR");
            // The sabotage runs the call with other words this once: a stalled call keeps
            // its own, as it waits.
            let own = sabotaged.map(|(proc_id, args)| {
                let proc_id = std::mem::replace(&mut front.proc_id, proc_id);
                (proc_id, std::mem::replace(&mut front.args, args))
            });
            front.to.ran_at_ms = time_ms;
            front.to.reads = self.model.kind(front.proc_id) == Some(ProcKind::Read);
            if redis {
                role.role_mut().set_time_ms(time_ms);
            }
            let ran = role.run_next().expect("a call waits");
            if let Some((proc_id, args)) = own
                && ran == Ran::Stalled
            {
                let front = role.front_mut().expect("a stalled call keeps its place");
                front.proc_id = proc_id;
                front.args = args;
            }
            if incr
                && ran != Ran::Stalled
                && let Some(redis) = self.redis.as_mut()
            {
                redis.increments_run += 1;
            }
            if ran == Ran::Stalled {
                return Ok(());
            }
            self.ran(node, ran, time_ms)?;
        }
    }

    /// The checks and counts of what a call that ran at primary `node` at `time_ms` did.
    fn ran(&mut self, node: NodeId, ran: Ran, time_ms: u64) -> Result<(), String> {
        let redis = self.redis.is_some();
        let state = &mut self.nodes[index_of(node)];
        match ran {
            Ran::Stalled => unreachable!("a stalled call did not run"),
            Ran::Committed { call, .. } => {
                if !state.ledger.calls.insert(call) {
                    return Err(format!(
                        "tick {}: node {node} committed call {call:?} twice",
                        self.now / MICROS_PER_TICK
                    ));
                }
                if redis {
                    state.ledger.history.push(call, time_ms);
                }
                self.check_bounded(node)
            }
            Ran::Duplicate { .. } => {
                self.report.duplicates_answered += 1;
                Ok(())
            }
            // The client gave up on this call and moved on: nobody waits for it.
            Ran::RolledBack | Ran::Refused(Refusal::StaleSeq) => Ok(()),
            // A read-only command of the Redis model: answered behind the latest commit.
            Ran::Read if redis => Ok(()),
            Ran::Read => Err(format!("node {node}: the simulated clients issue no reads")),
            Ran::Refused(refusal) => Err(format!(
                "tick {}: node {node} refused a call: {refusal:?}",
                self.now / MICROS_PER_TICK
            )),
        }
    }

    /// Under the `IncrementTwice` sabotage, the procedure and arguments the call at the front
    /// of primary `node`'s inbox runs with instead of its own, if it is the tenth `INCR`:
    /// `INCRBY key 2`.
    fn increment_twice(&mut self, node: NodeId) -> Option<(ProcId, Vec<u8>)> {
        if self.sabotage != Some(ClusterSabotage::IncrementTwice)
            || self.redis.as_ref()?.increments_run != INCREMENT_TWICE_AT - 1
        {
            return None;
        }
        let Slot::Primary(role) = &mut self.nodes[index_of(node)].role else {
            return None;
        };
        let call = role.front_mut()?;
        if call.proc_id != command_proc_of(b"INCR") {
            return None;
        }
        let mut argv = Argv::new();
        CallArgs::decode_into(&call.args, &mut argv).expect("the workload's encoding");
        let key = argv.get(1).expect("INCR names its key").to_vec();
        let mut twice = Argv::new();
        for word in [b"INCRBY".as_slice(), &key, b"2"] {
            twice.push(word);
        }
        let mut args = Vec::new();
        CallArgs::encode(Proto::Resp2, &twice, &mut args);
        let key = String::from_utf8_lossy(&key).into_owned();
        self.note(format!("sabotage: node {node} runs INCR {key} as INCRBY 2"));
        Some((command_proc_of(b"INCRBY"), args))
    }

    /// Runs the model's periodic procedure (the Redis model's expiry sweep) on primary
    /// `node` if it is due, as the runtime's executor does at the start of a turn; a sweep
    /// that found nothing to delete takes no LSN.
    fn maybe_run_periodic(&mut self, node: NodeId) -> Result<(), String> {
        let Some(redis) = self.redis.as_ref() else {
            return Ok(());
        };
        let interval_ms = redis.periodic_interval_ms;
        let now_ms = self.clock_ms();
        let state = &mut self.nodes[index_of(node)];
        let Slot::Primary(role) = &mut state.role else {
            return Ok(());
        };
        if role
            .run_periodic_if_due(now_ms, interval_ms, ClientConn::PERIODIC)
            .is_none()
        {
            return Ok(());
        }
        state.ledger.history.push(CallId::default(), now_ms);
        role.role_mut().flush();
        self.report.sweeps += 1;
        self.check_bounded(node)
    }

    /// Notes the transfers primary `node` sends and, under the Redis model, what history
    /// each transfer and each batch carries, for the backups' checks.
    fn remember_what_leaves(&mut self, node: NodeId, ready: &mut RoleReady<ClientConn>) {
        let state = &self.nodes[index_of(node)];
        let Slot::Primary(role) = &state.role else {
            unreachable!("a primary's ready");
        };
        let history = &state.ledger.history;
        for (to, sent) in ready.transfers_sent.drain(..) {
            self.trace.note(
                self.now,
                format!(
                    "node {node}: transfer to {to}: {} pages, LSN {} → {}",
                    sent.pages, sent.lsn_from, sent.lsn
                ),
            );
            if let Some(redis) = self.redis.as_mut() {
                // Copied from the segment as it stands: its history is the role's.
                let segment = role.role().store().segment();
                assert_eq!(sent.lsn, segment.lsn(), "a transfer of the last commit");
                let key = (sent.lsn, crc32c::crc32c(segment.bytes()));
                redis
                    .transfers
                    .entry(key)
                    .or_insert_with(|| history.prefix(sent.lsn));
            }
        }
        if let Some(redis) = self.redis.as_mut() {
            for (_, message) in &ready.replication.messages {
                if let Message::Batch(bytes) = message {
                    let (key, lsn_base, lsn_last) = batch_key(bytes);
                    redis
                        .batches
                        .entry(key)
                        .or_insert_with(|| history.range(lsn_base, lsn_last).to_vec());
                }
            }
        }
    }

    /// What the reply checker is told of an answer primary `node` releases at `lsn` for a
    /// call that ran at `ran_at_ms`.
    fn witness(&self, node: NodeId, ran_at_ms: u64, lsn: u64) -> Witness {
        let state = &self.nodes[index_of(node)];
        let power_losses = self.report.power_losses;
        match &state.role {
            Slot::Primary(_) if self.redis.is_some() => Witness {
                ran_at_ms,
                chain: state.ledger.history.chain_at(lsn),
                power_losses,
            },
            _ => Witness {
                power_losses,
                ..Witness::default()
            },
        }
    }

    /// The lease checks of a reply primary `node` releases in `view` to `(client, seq)`:
    /// one that `needs_lease` is released while the backups' promise runs and before a newer
    /// view's primary released anything; any reply, once the lease this node granted an old
    /// primary ran out.
    fn check_lease(
        &self,
        node: NodeId,
        view: u64,
        (client, seq): (usize, u64),
        needs_lease: bool,
    ) -> Result<(), String> {
        if needs_lease && let Some((backup, end)) = self.promise_broken(node, view) {
            return Err(self.fail(format!(
                "node {node} released a reply to client {client} (call {seq}) that \
                 needed its lease as primary of view {view} at {} µt, after backup \
                 {backup}'s promise ran out at {end} µt: the lease outlived the promise",
                self.now
            )));
        }
        // A promoted primary waits out the lease its node granted the old primary: the
        // old one may answer under it until then (a sharper check than the one below,
        // which needs the old primary to answer late).
        let owed = self.promise_end.iter().find(|&(&(backup, primary), &end)| {
            backup == node && primary != node && end > self.now
        });
        if let Some((&(_, old), &end)) = owed {
            return Err(self.fail(format!(
                "node {node} released a reply to client {client} (call {seq}) as primary \
                 of view {view} at {} µt, before the lease it had granted node {old} ran \
                 out at {end} µt",
                self.now
            )));
        }
        let newer = self
            .released_by
            .range(view + 1..)
            .find(|(_, (_, at))| *at <= self.now);
        if needs_lease && let Some((&newer, &(newer_primary, at))) = newer {
            return Err(self.fail(format!(
                "node {node} released a reply to client {client} (call {seq}) \
                 that needed its lease as primary of view {view} at {} µt, but node \
                 {newer_primary} had released a reply as primary of view {newer} at {at} \
                 µt: the new primary did not wait out the lease",
                self.now
            )));
        }
        Ok(())
    }

    /// The checks of a reply primary `node` releases in `view`, then its sending: the
    /// release rule (the lease, one releaser per view, the old primary's lease waited out),
    /// what backups hold, and what the reply checker needs of it.
    fn release(
        &mut self,
        node: NodeId,
        view: u64,
        reply: tandem_replication::Reply<Answer<ClientConn>>,
    ) -> Result<(), String> {
        // The primary's own periodic procedure answers nobody.
        if reply.reply.to == ClientConn::PERIODIC {
            return Ok(());
        }
        let (releaser, _) = *self.released_by.entry(view).or_insert((node, self.now));
        if releaser != node {
            return Err(self.fail(format!(
                "nodes {releaser} and {node} both released replies as primary of view {view}"
            )));
        }
        let Answer {
            to:
                ClientConn {
                    client,
                    conn,
                    ran_at_ms,
                    reads,
                },
            seq,
            kind,
        } = reply.reply;
        // A repeated failure is judged when its run was, too.
        let ran_at_ms = match &kind {
            AnswerKind::RolledBack {
                ran_before: Some(run),
                ..
            } => run.time_ms,
            _ => ran_at_ms,
        };
        // A read answers with the latest commit's LSN, but has no commit of its own.
        let (committed, lsn_first) = match kind {
            AnswerKind::Committed { lsn_repeated, .. } => (!reads, lsn_repeated),
            AnswerKind::CommittedReplyNotKept { lsn_repeated, .. } => (true, Some(lsn_repeated)),
            // A repeated failure is judged where its run was.
            AnswerKind::RolledBack { ran_before, .. } => (false, ran_before.map(|run| run.lsn)),
            AnswerKind::Refused { .. } => (false, None),
        };
        // No backup ack fences the answer (a 1-safe or bounded commit, or no commit of
        // its own): the primary may release it only under its lease. A refusal
        // acknowledges nothing and needs none. Worked out here, not taken from the core,
        // so that a core that forgets the lease is caught.
        let refused = matches!(kind, AnswerKind::Refused { .. });
        let fenced = committed && fenced_by_acks(self.faults.safety);
        let needs_lease = !(refused || fenced);
        self.check_lease(node, view, (client, seq), needs_lease)?;
        // A refused call is one its client gave up on (a stale seq): nobody waits for it.
        // It was held under 1-safe; every other answer under the group's rule.
        if matches!(kind, AnswerKind::Refused { .. }) {
            return Ok(());
        }
        self.check_release(node, reply.lsn)?;
        let lsn = lsn_first.unwrap_or(reply.lsn);
        let power_losses = self.report.power_losses;
        if committed && fenced_by_acks(self.faults.safety) {
            let acked = self.acked.entry(client).or_default();
            if seq > acked.seq {
                *acked = Acked {
                    seq,
                    lsn,
                    power_losses,
                };
            }
        }
        let (status, mut body) = match kind {
            AnswerKind::Committed { body, .. } => (ReplyStatus::Committed, body),
            AnswerKind::CommittedReplyNotKept { message, .. } => {
                self.report.replies_not_kept += 1;
                (ReplyStatus::CommittedReplyNotKept, message.into_bytes())
            }
            AnswerKind::RolledBack { message, .. } => {
                (ReplyStatus::RolledBack, message.into_bytes())
            }
            AnswerKind::Refused { .. } => unreachable!("a refusal is not sent"),
        };
        let witness = self.witness(node, ran_at_ms, lsn);
        if status == ReplyStatus::Committed {
            self.maybe_alter_reply(&mut body);
        }
        let wire = Wire::Reply {
            conn,
            seq,
            lsn,
            status,
            body,
            witness,
        };
        self.send(node, CLIENT_BASE + client as NodeId, wire);
        Ok(())
    }

    pub(super) fn collect_primary(&mut self, node: NodeId) -> Result<(), String> {
        let authoritative_view = self.view_latest.number;
        let state = &mut self.nodes[index_of(node)];
        let Slot::Primary(role) = &mut state.role else {
            return Ok(());
        };
        // Released under a lease that ran out before it could leave: held until the lease
        // holds again, as the runtime's executor holds a long call's reply (seed 22594).
        let mut ready = role.collect(role.primary().tick_count());
        // The log first: the batches' records are the node's from now on (the runtime's
        // executor hands `to_log` to its log at the start of `dispatch`).
        let to_log = std::mem::take(&mut ready.replication.to_log);
        let sync_wanted = ready.replication.sync_wanted.take();
        self.remember_what_leaves(node, &mut ready);
        let Slot::Primary(role) = &mut self.nodes[index_of(node)].role else {
            unreachable!("matched above");
        };
        let tick_now = role.primary().tick_count();
        let view = role.primary().view();
        // The primary's bytes at the end of its last sealed batch: what a backup must hold
        // once it has applied that batch. Only the newest view's primary writes history.
        let segment = role.role().store().segment();
        let lsn_sealed = role.primary().tail().lsn_next() - 1;
        if view == authoritative_view
            && lsn_sealed == segment.lsn()
            && lsn_sealed > self.lsn_loaded
            && lsn_sealed.is_multiple_of(self.checksum_every_lsn)
        {
            self.checksums
                .entry(lsn_sealed)
                .or_insert_with(|| crc32c::crc32c(segment.bytes()));
        }
        for (to, message) in ready.replication.messages.drain(..) {
            self.send(node, to, Wire::replication(&message));
        }
        for disposition in ready.drain_replies(tick_now) {
            let reply = match disposition {
                Disposition::Send(reply) => reply,
                // Nothing is withheld once lapsed replies are held; were one, the client would
                // be told `Busy`, as the runtime tells a stub, and send the call again.
                Disposition::Withhold(reply) if reply.reply.to == ClientConn::PERIODIC => {
                    continue;
                }
                Disposition::Withhold(reply) => {
                    // A simulated client has one call in flight.
                    if tandem_node::withheld_answer(1).is_some() {
                        let ClientConn { client, conn, .. } = reply.reply.to;
                        self.send(node, CLIENT_BASE + client as NodeId, Wire::Busy { conn });
                    }
                    continue;
                }
                Disposition::NotPrimary(reply) if reply.reply.to == ClientConn::PERIODIC => {
                    continue;
                }
                Disposition::NotPrimary(reply) => {
                    let ClientConn { client, conn, .. } = reply.reply.to;
                    self.send(
                        node,
                        CLIENT_BASE + client as NodeId,
                        Wire::NotPrimary { conn },
                    );
                    continue;
                }
            };
            self.release(node, view, reply)?;
        }
        for observed in ready.observed.drain(..) {
            self.observe(node, observed);
        }
        for batch in to_log {
            let lsn_from = batch.lsn_base();
            self.log_order(node, LogOrder::Batch { batch, lsn_from });
        }
        if let Some(lsn) = sync_wanted {
            self.log_order(node, LogOrder::SyncWanted { lsn });
        }
        self.checkpoint_step(node);
        // The buffers go back for the next collection (capacity kept).
        if let Slot::Primary(role) = &mut self.nodes[index_of(node)].role {
            role.recycle(ready);
        }
        Ok(())
    }

    /// Under the `AlterReply` sabotage, changes the last digit of the twentieth reply body
    /// with a digit that goes to a client (a bulk string's or an integer's, not a length).
    fn maybe_alter_reply(&mut self, body: &mut [u8]) {
        if self.sabotage != Some(ClusterSabotage::AlterReply) {
            return;
        }
        let Some(redis) = self.redis.as_mut() else {
            return;
        };
        let Some(digit) = body.iter().rposition(u8::is_ascii_digit) else {
            return;
        };
        redis.replies_sent += 1;
        if redis.replies_sent == ALTER_REPLY_AT {
            body[digit] = b'0' + (body[digit] - b'0' + 1) % 10;
            self.note("sabotage: a reply's digit changed on the way".into());
        }
    }

    /// Ends every read waiting at backup `node` and applies the batches it held back for them.
    fn release_held(&mut self, node: NodeId) -> Result<(), String> {
        let now = self.now;
        let Slot::Backup(role) = &mut self.nodes[index_of(node)].role else {
            return Ok(());
        };
        if !role.has_reads_or_held() {
            return Ok(());
        }
        role.expire_reads(now);
        self.collect_backup(node)
    }

    /// A turn of backup `node`'s role: what it applied checked, what it sends sent, what it
    /// answered answered, what its log must hold ordered.
    pub(super) fn collect_backup(&mut self, node: NodeId) -> Result<(), String> {
        let now = self.now;
        let state = &mut self.nodes[index_of(node)];
        let Slot::Backup(role) = &mut state.role else {
            return Ok(());
        };
        let mut ready = BackupReady::default();
        let mut checks = BackupChecks {
            node,
            now,
            redis: self.redis.as_deref(),
            calls: &mut state.ledger.calls,
            history: &mut state.ledger.history,
            transfers: &mut self.report.transfers,
            applying: None,
        };
        let turned = role.turn(now, &*self.model, &mut checks, &mut ready);
        turned.map_err(|err| match err {
            BackupTurnError::Apply(err) => format!("node {node} cannot apply a batch: {err}"),
            BackupTurnError::Install(err) => {
                format!("node {node} cannot install a transfer: {err}")
            }
            BackupTurnError::Watch(err) => err,
        })?;
        let ever = self
            .received_ever
            .entry((node, role.gate().primary()))
            .or_insert((0, 0));
        ever.0 = ever.0.max(role.receiver().core().lsn_received());
        ever.1 = ever.1.max(role.applier().lsn_applied());
        for (to, message) in ready.messages.drain(..) {
            self.send(node, to, Wire::replication(&message));
        }
        for ((reader, conn), seq, answer) in ready.answers.drain(..) {
            let served_at = match answer {
                // A refusal by the procedure (a `GET` of a key that became a list) is an
                // answer about the state at its LSN all the same.
                ReadAnswer::Served { lsn, .. } | ReadAnswer::RolledBack { lsn, .. } => Some(lsn),
                ReadAnswer::Writes { proc_id } | ReadAnswer::Unknown { proc_id } => {
                    return Err(self.fail(format!(
                        "node {node} refused a reader's read of procedure {proc_id}"
                    )));
                }
                ReadAnswer::Busy { .. } => None,
            };
            let wire = Wire::ReadAnswer {
                conn,
                seq,
                served_at,
            };
            self.send(node, READER_BASE + reader as NodeId, wire);
        }
        for order in ready.to_log.drain(..) {
            self.log_order(node, order);
        }
        self.checkpoint_step(node);
        if let Some(lsn_before) = ready.applied_from {
            self.check_backup(node, lsn_before)?;
        }
        Ok(())
    }
}

/// The checks a backup's turn runs on what it applies: the Redis model's history must
/// continue, no call may be applied twice, and a transfer installs bytes some primary held.
struct BackupChecks<'a> {
    node: NodeId,
    now: u64,
    redis: Option<&'a RedisRun>,
    calls: &'a mut CallsHeld,
    history: &'a mut History,
    transfers: &'a mut u64,
    /// The key of the batch being applied (the Redis model only).
    applying: Option<((u64, u64, u32), u64, u64)>,
}

impl BackupWatch for BackupChecks<'_> {
    type Error = String;

    fn applying(&mut self, apply: &ApplyBatch) {
        self.applying = self.redis.is_some().then(|| batch_key(apply.batch.bytes()));
    }

    fn applied(&mut self, lsn_before: u64, lsn: u64, calls: &[CallId]) -> Result<(), String> {
        let (node, tick) = (self.node, self.now / MICROS_PER_TICK);
        if let (Some(redis), Some((key, lsn_base, _))) = (self.redis, self.applying.take()) {
            assert_eq!(self.history.lsn(), lsn_before, "the history follows");
            let Some(entries) = redis.batches.get(&key) else {
                return Err(format!(
                    "tick {tick}: node {node} applied a batch (view {}, LSN {lsn_base}) that no \
                     primary sent",
                    key.0
                ));
            };
            let first = (lsn_before + 1 - lsn_base) as usize;
            let last = (lsn - lsn_base) as usize;
            if !self.history.extend(&entries[first..=last]) {
                return Err(format!(
                    "tick {tick}: node {node} applied records from LSN {} on top of a history \
                     they do not continue",
                    lsn_before + 1
                ));
            }
        }
        for &call in calls {
            if !self.calls.insert(call) {
                return Err(format!(
                    "tick {tick}: node {node} applied call {call:?} twice"
                ));
            }
        }
        Ok(())
    }

    fn installed(&mut self, lsn: u64, segment: &Segment) -> Result<(), String> {
        *self.transfers += 1;
        // The member now holds the bytes of the sender's segment at `lsn`: its records are
        // the sender's.
        if let Some(redis) = self.redis {
            let key = (lsn, crc32c::crc32c(segment.bytes()));
            let Some(history) = redis.transfers.get(&key) else {
                return Err(format!(
                    "tick {}: node {} installed a state transfer to LSN {lsn} and holds bytes \
                     no primary held at that LSN",
                    self.now / MICROS_PER_TICK,
                    self.node
                ));
            };
            *self.history = history.clone();
        }
        Ok(())
    }
}

/// Node `node`'s roles as the simulated world runs them, for its supervisor's drive.
struct SimRoles<'a> {
    world: &'a mut World,
    node: NodeId,
}

impl Roles for SimRoles<'_> {
    type Error = String;

    fn held(&self) -> RoleHeld {
        match &self.world.nodes[index_of(self.node)].role {
            Slot::Outside => RoleHeld::Outside,
            Slot::Primary(role) => RoleHeld::Primary {
                view: role.primary().view(),
            },
            Slot::Backup(role) => RoleHeld::Backup {
                view: role.gate().view(),
                primary: role.gate().primary(),
            },
        }
    }

    fn lsn_committed(&mut self) -> u64 {
        match &self.world.nodes[index_of(self.node)].role {
            Slot::Primary(role) => role.primary().lsn_committed(),
            _ => unreachable!("only a primary is asked its committed LSN"),
        }
    }

    fn freeze(&mut self) -> u64 {
        match &mut self.world.nodes[index_of(self.node)].role {
            Slot::Backup(role) => role.freeze(),
            _ => unreachable!("only a backup is frozen"),
        }
    }

    fn lsn_synced(&self) -> u64 {
        let state = &self.world.nodes[index_of(self.node)];
        let Slot::Backup(role) = &state.role else {
            unreachable!("asked of a frozen backup");
        };
        let core = role.receiver().core();
        tandem_node::lsn_synced_bound(state.log.lsn_durable(), core.lsn_synced_told())
    }

    fn diverged(&self) -> bool {
        match &self.world.nodes[index_of(self.node)].role {
            Slot::Backup(role) => role.applier().is_diverged(),
            _ => false,
        }
    }

    fn lsn_before_rewind(&self) -> Option<u64> {
        match &self.world.nodes[index_of(self.node)].role {
            Slot::Backup(role) => role.applier().lsn_before_rewind(),
            _ => None,
        }
    }

    fn prepare_removal(&mut self, view: u64, backup: NodeId) -> Result<(), String> {
        if let Slot::Primary(role) = &mut self.world.nodes[index_of(self.node)].role {
            role.role_mut().prepare_removal(view, backup);
        }
        self.world.collect_primary(self.node)
    }

    fn carry_out(&mut self, transition: Transition, view: &View) -> Result<bool, String> {
        self.world.carry_out(self.node, transition, view)
    }

    fn send(&mut self, to: NodeId, message: ClusterMessage) {
        self.world.send(self.node, to, Wire::cluster(&message));
    }

    fn notice(&mut self, notice: Notice<'_>) {
        let node = self.node;
        let world = &mut *self.world;
        world.note(format!("node {node}: {notice}"));
        match notice {
            Notice::Following { view, .. } if view.number > world.view_latest.number => {
                world.view_latest = view.clone();
            }
            _ => {}
        }
    }
}

/// Node `node`'s roles as values, for the carry-out table: the simulator's checkers follow
/// the records (its ledger, its log, its reports) as the table moves them.
struct SimCarrier<'a> {
    world: &'a mut World,
    node: NodeId,
    /// Why the run fails: a handover refused, which no correct node asks for.
    failure: Option<String>,
}

impl SimCarrier<'_> {
    fn state(&mut self) -> &mut Node {
        &mut self.world.nodes[index_of(self.node)]
    }
}

impl Carrier for SimCarrier<'_> {
    type Primary = Box<PrimaryHost>;
    type Backup = Box<BackupRole>;
    type HandoverError = tandem_node::HandoverError;
    type LoadError = std::convert::Infallible;

    fn primary_view(&self, primary: &Self::Primary) -> u64 {
        primary.primary().view()
    }

    fn stay_primary(&mut self, mut primary: Self::Primary, view: &View) -> Slot {
        let installed = primary
            .role_mut()
            .install_view(view.number, &view.backups, &view.spares);
        assert!(installed, "a primary that stays learns a newer view");
        Slot::Primary(primary)
    }

    fn stay_backup(&mut self, mut backup: Self::Backup, view: &View) -> Self::Backup {
        // A new view reopens a backup frozen in the old one.
        backup.stay(view.number, view.primary);
        backup
    }

    fn hand_over(
        &mut self,
        backup: Self::Backup,
        lsn: u64,
    ) -> Result<tandem_node::Handover, Self::HandoverError> {
        let handover = backup.handover(lsn)?;
        // A rewound member promoted from the records it held before the rewind takes them
        // back, and their entries with them.
        if self.world.redis.is_some() {
            let lsn = handover.segment.lsn();
            self.state().ledger.history.set_lsn(lsn);
        }
        Ok(handover)
    }

    fn give_back(&mut self, primary: Self::Primary, _: &View) -> Option<Segment> {
        Some(primary.into_segment())
    }

    fn stop(&mut self, _: Slot, _: &View, discarded: u64) {
        if discarded > 0 {
            let node = self.node;
            self.world
                .note(format!("node {node}: discards {discarded} records"));
        }
    }

    fn take_recovered(&mut self) -> Option<Segment> {
        let clients = self.world.clients.len();
        let (segment, history) = self.state().recovered.take()?;
        let calls = CallsHeld::from_dedup(&segment, clients);
        self.state().ledger = Ledger { calls, history };
        self.world.report.recovered_followed += 1;
        Some(segment)
    }

    fn load(&mut self) -> Result<Segment, Self::LoadError> {
        // A role that starts from the load does not take records rebuilt from the log.
        let lsn_loaded = self.world.lsn_loaded;
        let state = self.state();
        state.recovered = None;
        state.ledger = Ledger::of(History::new(lsn_loaded));
        Ok(loaded(&*self.world.model, self.world.segment_len))
    }

    fn rewound(&mut self, mut segment: Segment, lsn: u64) -> Option<Segment> {
        // Where its log can end: below `lsn` if a logged image spans it.
        let lsn = self
            .world
            .log_align_rejoin(self.node, lsn)
            .min(segment.lsn());
        if !tandem_node::rewind_to_rejoin(&mut segment, lsn) {
            return None;
        }
        self.world.report.rejoins += 1;
        let redis = self.world.redis.is_some();
        let ledger = &mut self.state().ledger;
        if redis {
            ledger.history.set_lsn(lsn);
        }
        // The calls of the records taken back may run again in the new history; those in
        // the transfer are not seen (as after a reload).
        ledger.calls = CallsHeld::default();
        Some(segment)
    }

    fn start_primary(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        lease_owed_ticks: u64,
        records: Records,
    ) -> Slot {
        let world = &mut *self.world;
        let node = self.node;
        let lsn = segment.lsn();
        let primary = if records == Records::Loaded {
            Primary::new(world.primary_config(view), world.lsn_loaded)
        } else {
            if records == Records::Recovered {
                world.note(format!(
                    "node {node}: primary of view {} from the records its log gave back (LSN \
                     {lsn})",
                    view.number
                ));
                world.report.recovered_promoted += 1;
            }
            // The checksums of records above the truncate LSN described a history the new
            // view discards.
            world.checksums.split_off(&(lsn + 1));
            let mut primary = Primary::resume(world.primary_config(view), lsn, tail);
            if let Some(lsn) = tandem_node::lsn_released_at_promotion(view) {
                primary.released_at_most(lsn);
            }
            primary.hold_releases(lease_owed_ticks);
            if lease_owed_ticks > 0 {
                world.report.lease_waits += 1;
            }
            primary
        };
        let store = Store::open(segment, world.model.replica());
        let role = tandem_node::PrimaryRole::new(store, primary);
        Slot::Primary(Box::new(PrimaryHost::new(role)))
    }

    fn start_backup(
        &mut self,
        segment: Segment,
        tail: Vec<SealedBatch>,
        view: &View,
        records: Records,
    ) -> Slot {
        if records == Records::Recovered {
            let node = self.node;
            self.world.note(format!(
                "node {node}: follows view {} from the records its log gave back (LSN {})",
                view.number,
                segment.lsn()
            ));
        }
        self.world.backup_on_tail(self.node, segment, tail, view)
    }

    fn start_frozen_backup(&mut self, segment: Segment, view_held: u64, view: &View) -> Slot {
        let node = self.node;
        let lsn = segment.lsn();
        let config = ReceiverConfig {
            view: view_held,
            primary: node,
            ..receiver_config(view)
        };
        let mut gate = GateRule::new(view_held, node);
        gate.freeze();
        let role = tandem_node::BackupRole::new(
            gate,
            ReceiverRole::new(config, lsn, lsn),
            ApplierRole::active(segment, Vec::new(), self.world.tail_limits()),
            read_settings(),
            question_first(self.state().role_epoch + 1),
        );
        Slot::Backup(Box::new(role))
    }

    fn reload_backup(&mut self, view: &View) -> Slot {
        let Ok(segment) = self.load();
        self.world
            .backup_on_tail(self.node, segment, Vec::new(), view)
    }

    /// A simulated load is instant: nothing to start early.
    fn load_spare(&mut self) {}

    /// A simulated node is never waiting for a load: it always asks to join at once.
    fn join_with_records(&mut self) {}

    fn note(&mut self, note: CarryNote<'_>) {
        let node = self.node;
        if let CarryNote::HandoverRefused { error } = &note {
            self.failure = Some(format!("node {node} cannot hand its records over: {error}"));
        }
        self.world.note(format!("node {node}: {note}"));
    }
}
