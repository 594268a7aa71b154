//! One node as the runtime drives it: a [`tandem_node::Node`] (its supervisor and the role it
//! holds, as values), fed its ticks and messages, and driven through [`SimEnv`], which hands
//! what leaves it to the simulated network and log and lets the checkers follow it. Nothing
//! here decides what a node does: the `Node` does.

use super::*;
use disk::CHECKPOINT_BYTES;

/// Where a read's answer goes: a reader and its connection.
pub(super) type ReaderConn = (usize, u64);

/// A simulated member: the node's own type, with the simulator's destinations.
pub(super) type Member = tandem_node::Node<ClientConn, ReaderConn>;

impl Destination for ClientConn {
    fn periodic() -> ClientConn {
        ClientConn::PERIODIC
    }

    fn is_periodic(&self) -> bool {
        *self == ClientConn::PERIODIC
    }
}

impl World {
    /// The settings every simulated node's roles share.
    pub(super) fn node_settings(&self) -> NodeSettings {
        NodeSettings {
            primary: PrimaryConfig {
                group: GROUP,
                view: 0,
                backups: Vec::new(),
                spares: Vec::new(),
                safety: self.faults.safety,
                tail: self.tail_limits(),
                batch_bytes_max: self.faults.batch_bytes_max,
                heartbeat_ticks: 1,
                resend_ticks: 3,
                kind: BatchKind::Redo,
                flush_batches_in_flight_max: 2,
                lone: false,
                lease_ticks: Some(self.primary_lease_ticks()),
            },
            nack_ticks: 2,
            reads: read_settings(),
            checkpoint_bytes: CHECKPOINT_BYTES,
            lsn_loaded: self.lsn_loaded,
            periodic_interval_ms: (self.groups[0].redis.as_ref())
                .map(|redis| redis.periodic_interval_ms),
            model_clock: self.redis_model(),
            reply_len_max: usize::MAX,
            record_len_max: usize::MAX,
        }
    }

    /// A member for node `id` with `supervisor`, on the records each group's log gave back.
    /// Its roles' epochs start past every epoch the node used in any group.
    pub(super) fn member(
        &self,
        supervisor: Supervisor,
        recovered: Vec<(GroupId, Segment)>,
    ) -> Member {
        let planes = &self.nodes[index_of(supervisor.node())].planes;
        let role_epoch = planes.iter().map(|plane| plane.role_epoch).max();
        Member::new(
            supervisor,
            self.node_settings(),
            Arc::clone(&self.model),
            role_epoch.expect("a node serves in a group"),
            recovered,
        )
    }

    /// Runs `f` on node `node`'s member with the world as its driver (the member is out of
    /// the world meanwhile, as a node's state is its own); None if the node is down.
    pub(super) fn with_node<T>(
        &mut self,
        node: NodeId,
        f: impl FnOnce(&mut Member, &mut SimEnv<'_>) -> T,
    ) -> Option<T> {
        let mut member = self.nodes[index_of(node)].node.take()?;
        let mut env = SimEnv {
            world: self,
            node,
            applying: None,
        };
        let result = f(&mut member, &mut env);
        let state = &mut self.nodes[index_of(node)];
        for (plane, group) in state.planes.iter_mut().zip(GROUP..) {
            if member.serves_in(group) {
                plane.role_epoch = member.role_epoch(group);
            }
        }
        state.node = Some(member);
        Some(result)
    }

    pub(super) fn core_mut(&mut self, node: NodeId) -> &mut Cluster {
        self.nodes[index_of(node)]
            .node
            .as_mut()
            .expect("the node is up")
            .core_mut()
    }

    /// Replays, into a primary's role, the ticks it missed while paused (the cluster core
    /// skips them, as the runtime's supervisor does: that only delays its reports).
    pub(super) fn catch_up_ticks(&mut self, node: NodeId) {
        let state = &mut self.nodes[index_of(node)];
        let missed = std::mem::take(&mut state.ticks_missed);
        if let Some(member) = state.node.as_mut() {
            member.catch_up_ticks(missed);
        }
    }

    pub(super) fn tick(&mut self, node: NodeId) -> Result<(), String> {
        self.catch_up_ticks(node);
        self.with_node(node, |member, env| member.tick(env))
            .unwrap_or(Ok(()))?;
        self.drive(node)
    }

    /// Has node `node` save, send and act on what its cluster core produced, as the
    /// runtime's supervisor thread does.
    pub(super) fn drive(&mut self, node: NodeId) -> Result<(), String> {
        // A crash now would cost a second node's memory: the save goes through after all.
        if self.nodes[index_of(node)].tear_next_save && !self.whole() {
            let state = &mut self.nodes[index_of(node)];
            state.tear_next_save = false;
            state.disk.set_failing(false);
        }
        let mut disk = std::mem::take(&mut self.nodes[index_of(node)].disk);
        let driven = self.with_node(node, |member, env| member.drive(&mut disk, env));
        let state = &mut self.nodes[index_of(node)];
        state.disk = disk;
        match driven {
            None | Some(Ok(())) => Ok(()),
            Some(Err(DriveError::Save(_))) if state.tear_next_save => {
                // The save tore: nothing that depended on it was sent, and the node is gone.
                self.note(format!("node {node}: crash in the middle of a save"));
                self.report.torn_saves += 1;
                self.crash_and_restart(node);
                Ok(())
            }
            Some(Err(DriveError::Save(err))) => {
                Err(format!("node {node}: the config store cannot save: {err}"))
            }
            Some(Err(DriveError::Role(err))) => Err(err),
        }
    }

    /// The load node `node` started (`epoch`) ends: its member takes the segment, unless the
    /// load was finished at once or lost in a crash since. A paused process takes it once it
    /// resumes.
    pub(super) fn loaded(
        &mut self,
        node: NodeId,
        group: GroupId,
        epoch: u64,
    ) -> Result<(), String> {
        let state = &self.nodes[index_of(node)];
        if state.node.is_none() || state.plane(group).load_epoch != epoch {
            return Ok(());
        }
        if self.paused(node) {
            let resume = self.paused_until[&node] - self.now;
            self.schedule(resume, Event::Loaded { node, group, epoch });
            return Ok(());
        }
        self.catch_up_ticks(node);
        let segment = loaded(&*self.model, self.segment_len);
        self.with_node(node, |member, env| {
            member.segment_loaded(group, Ok(segment), env)
        });
        self.drive(node)
    }

    pub(super) fn tail_limits(&self) -> TailLimits {
        TailLimits {
            records_max: self.faults.tail_records_max,
            bytes_max: 256 << 20,
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
        group: GroupId,
        message: Message,
    ) -> Result<(), String> {
        self.with_node(to, |member, env| {
            member.step_replication(from, group, message, env)
        })
        .unwrap_or(Ok(()))
    }

    /// A client greets node `to` on connection `conn`: the node says whether it serves as
    /// primary, and its view, as a node's `Welcome` does.
    pub(super) fn greet(&mut self, from: NodeId, to: NodeId, conn: u64) {
        let group = self.clients[(from - CLIENT_BASE) as usize].group;
        let Some((primary, view)) = self.with_node(to, |member, env| member.welcome(group, env))
        else {
            return;
        };
        let welcome = Wire::Welcome {
            conn,
            primary,
            view,
        };
        self.send(to, from, welcome);
    }

    pub(super) fn call(
        &mut self,
        from: NodeId,
        to: NodeId,
        conn: u64,
        seq: u64,
        sim_call: SimCall,
    ) -> Result<(), String> {
        let client = (from - CLIENT_BASE) as usize;
        let waiting = WaitingCall {
            to: ClientConn {
                client,
                conn,
                ran_at_ms: 0,
                reads: false,
            },
            client_id: client_id(client),
            seq,
            proc_id: sim_call.proc_id,
            args: sim_call.args,
            read_only: false,
            safety: None,
        };
        let group = self.clients[client].group;
        self.with_node(to, |member, env| member.call(group, waiting, env))
            .unwrap_or(Ok(()))
    }

    /// The checks and counts of a call that ran at primary `node` at `time_ms`.
    fn ran(
        &mut self,
        (node, group): (NodeId, GroupId),
        primary: &PrimaryHost,
        ran: &Ran,
        time_ms: u64,
    ) -> Result<(), String> {
        let redis = self.redis_model();
        let state = self.nodes[index_of(node)].plane_mut(group);
        match *ran {
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
                self.check_bounded(node, group, primary)
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

    /// Under the `IncrementTwice` sabotage, the procedure and arguments `call`, at the front
    /// of primary `node`'s queue, runs with instead of its own, if it is the tenth `INCR`:
    /// `INCRBY key 2`.
    fn increment_twice(
        &mut self,
        (node, group): (NodeId, GroupId),
        call: &WaitingCall<ClientConn>,
    ) -> Option<(ProcId, Vec<u8>)> {
        if self.sabotage != Some(ClusterSabotage::IncrementTwice)
            || self.group(group).redis.as_ref()?.increments_run != INCREMENT_TWICE_AT - 1
            || call.proc_id != command_proc_of(b"INCR")
        {
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

    /// Notes the transfers primary `node` sends and, under the Redis model, what history
    /// each transfer and each batch carries, for the backups' checks; and the checksum of
    /// its bytes at the end of its last sealed batch, at sampled LSNs.
    fn remember_what_leaves(
        &mut self,
        (node, group): (NodeId, GroupId),
        primary: &PrimaryHost,
        ready: &mut RoleReady<ClientConn>,
    ) {
        let history = &self.nodes[index_of(node)].planes[group_index(group)]
            .ledger
            .history;
        let sim = &mut self.groups[group_index(group)];
        let segment = primary.role().store().segment();
        for (to, sent) in ready.transfers_sent.drain(..) {
            self.trace.note(
                self.now,
                format!(
                    "node {node}: transfer to {to}: {} pages, LSN {} → {}",
                    sent.pages, sent.lsn_from, sent.lsn
                ),
            );
            if let Some(redis) = sim.redis.as_mut() {
                // Copied from the segment as it stands: its history is the role's.
                assert_eq!(sent.lsn, segment.lsn(), "a transfer of the last commit");
                let view = primary.role().primary().view();
                let key = (view, sent.lsn, crc32c::crc32c(segment.bytes()));
                redis
                    .transfers
                    .entry(key)
                    .or_insert_with(|| history.prefix(sent.lsn));
            }
        }
        if let Some(redis) = sim.redis.as_mut() {
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
        // The primary's bytes at the end of its last sealed batch: what a backup must hold
        // once it has applied that batch. Only the newest view's primary writes history.
        let lsn_sealed = primary.primary().tail().lsn_next() - 1;
        if primary.primary().view() == sim.view_latest.number
            && lsn_sealed == segment.lsn()
            && lsn_sealed > self.lsn_loaded
            && lsn_sealed.is_multiple_of(self.checksum_every_lsn)
        {
            sim.checksums
                .entry(lsn_sealed)
                .or_insert_with(|| crc32c::crc32c(segment.bytes()));
        }
    }

    /// What the reply checker is told of an answer primary `node` releases at `lsn` for a
    /// call that ran at `ran_at_ms`.
    fn witness(&self, (node, group): (NodeId, GroupId), ran_at_ms: u64, lsn: u64) -> Witness {
        let power_losses = self.report.power_losses;
        if !self.redis_model() {
            return Witness {
                power_losses,
                ..Witness::default()
            };
        }
        Witness {
            ran_at_ms,
            chain: (self.nodes[index_of(node)].plane(group).ledger.history).chain_at(lsn),
            power_losses,
        }
    }

    /// The lease checks of a reply primary `node` releases in `view` to `(client, seq)`:
    /// one that `needs_lease` is released while the backups' promise runs and before a newer
    /// view's primary released anything; any reply, once the lease this node granted an old
    /// primary ran out.
    fn check_lease(
        &self,
        (node, group, primary): (NodeId, GroupId, &PrimaryHost),
        (client, seq): (usize, u64),
        needs_lease: bool,
    ) -> Result<(), String> {
        let view = primary.primary().view();
        let sim = self.group(group);
        if needs_lease && let Some((backup, end)) = self.promise_broken(node, group, primary) {
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
        let owed = sim.promise_end.iter().find(|&(&(backup, primary), &end)| {
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
        let newer = sim
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

    /// The checks of a reply primary `node` releases, then its sending: the release rule
    /// (the lease, one releaser per view, the old primary's lease waited out), what backups
    /// hold, and what the reply checker needs of it.
    fn release(
        &mut self,
        (node, group): (NodeId, GroupId),
        primary: &PrimaryHost,
        reply: tandem_replication::Reply<Answer<ClientConn>>,
    ) -> Result<(), String> {
        let view = primary.primary().view();
        let now = self.now;
        let released_by = &mut self.group_mut(group).released_by;
        let (releaser, _) = *released_by.entry(view).or_insert((node, now));
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
        self.check_lease((node, group, primary), (client, seq), needs_lease)?;
        // A refused call is one its client gave up on (a stale seq): nobody waits for it.
        // It was held under 1-safe; every other answer under the group's rule.
        if matches!(kind, AnswerKind::Refused { .. }) {
            return Ok(());
        }
        self.check_release(node, group, primary, reply.lsn)?;
        let lsn = lsn_first.unwrap_or(reply.lsn);
        let power_losses = self.report.power_losses;
        if committed && fenced_by_acks(self.faults.safety) {
            let acked = self.group_mut(group).acked.entry(client).or_default();
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
        let witness = self.witness((node, group), ran_at_ms, lsn);
        if status == ReplyStatus::Committed {
            self.maybe_alter_reply(group, &mut body);
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

    /// Under the `AlterReply` sabotage, changes the last digit of the twentieth reply body
    /// with a digit that goes to a client (a bulk string's or an integer's, not a length).
    fn maybe_alter_reply(&mut self, group: GroupId, body: &mut [u8]) {
        if self.sabotage != Some(ClusterSabotage::AlterReply) {
            return;
        }
        let Some(redis) = self.group_mut(group).redis.as_mut() else {
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

    /// A read backup `node` answered: sent to its reader. A refusal of the read's procedure
    /// is a bug: the readers read only what a backup serves.
    fn read_answered(
        &mut self,
        node: NodeId,
        (reader, conn): ReaderConn,
        seq: u64,
        answer: ReadAnswer,
    ) -> Result<(), String> {
        let served_at = match answer {
            // A refusal by the procedure (a `GET` of a key that became a list) is an answer
            // about the state at its LSN all the same.
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
        Ok(())
    }

    /// The checkers' ledger follows node `node`'s records as the carry-out moves them.
    fn records_moved(&mut self, (node, group): (NodeId, GroupId), moved: RecordsMoved<'_>) {
        let redis = self.redis_model();
        let clients = self.clients.len();
        let lsn_loaded = self.lsn_loaded;
        let state = self.nodes[index_of(node)].plane_mut(group);
        match moved {
            RecordsMoved::HandedOver { lsn } => {
                if redis {
                    state.ledger.history.set_lsn(lsn);
                }
            }
            RecordsMoved::Recovered { segment } => {
                let history = state
                    .recovered_history
                    .take()
                    .expect("recovered records come with their history");
                let calls = CallsHeld::from_dedup(segment, clients);
                state.ledger = Ledger { calls, history };
                self.report.recovered_followed += 1;
            }
            RecordsMoved::Loaded => {
                state.recovered_history = None;
                state.ledger = Ledger::of(History::new(lsn_loaded));
            }
            RecordsMoved::Rewound { lsn } => {
                if redis {
                    state.ledger.history.set_lsn(lsn);
                }
                // The calls of the records taken back may run again in the new history;
                // those in the transfer are not seen (as after a reload).
                state.ledger.calls = CallsHeld::default();
                self.report.rejoins += 1;
            }
        }
    }

    /// A primary role starts on node `node`: its notes and counts, and the checksums of
    /// records above the LSN it starts at (they described a history the view discards).
    fn primary_starting(&mut self, node: NodeId, starting: PrimaryStarting<'_>) {
        if starting.records == Records::Loaded {
            return;
        }
        if starting.records == Records::Recovered {
            self.note(format!(
                "node {node}: primary of view {} from the records its log gave back (LSN {})",
                starting.view.number, starting.lsn
            ));
            self.report.recovered_promoted += 1;
        }
        (self.group_mut(starting.group).checksums).split_off(&(starting.lsn + 1));
        if starting.lease_owed_ticks > 0 {
            self.report.lease_waits += 1;
        }
    }

    /// After a carry-out on node `node`: a new role's links are new connections, so what
    /// backups received from an earlier reign says nothing of it; a node outside holds no
    /// records; the ledger follows the role's segment.
    fn carried(&mut self, node: NodeId, carried: Carried<'_, ClientConn, ReaderConn>) {
        let Carried {
            group,
            role,
            view,
            new_role,
            role_epoch,
        } = carried;
        // Its links are new connections from now on.
        self.nodes[index_of(node)].plane_mut(group).role_epoch = role_epoch;
        if new_role {
            match role {
                Slot::Primary(_) => self.primary_started(node, group),
                // The primary accepts the new role's connection: what it knew of the old
                // one is void, and the backup's introduction says where it stands now.
                Slot::Backup(_) => {
                    if let Some(Slot::Primary(primary)) = self.nodes[index_of(view.primary)]
                        .node
                        .as_mut()
                        .map(|member| member.role_mut(group))
                    {
                        primary.role_mut().link_reset(node);
                    }
                }
                Slot::Outside => {}
            }
        }
        let redis = self.redis_model();
        let state = self.nodes[index_of(node)].plane_mut(group);
        if matches!(role, Slot::Outside) {
            state.ledger = Ledger::none();
        }
        if redis {
            let lsn = match role {
                Slot::Primary(host) => host.role().store().segment().lsn(),
                Slot::Backup(backup) => backup.segment().lsn(),
                Slot::Outside => 0,
            };
            assert_eq!(
                state.ledger.history.lsn(),
                lsn,
                "node {node}'s history follows its segment"
            );
        }
    }

    /// A new primary role on node `node` starts a new history: what backups received from
    /// this node's earlier reign says nothing of it. A backup that already follows this node
    /// (it followed the view before this node took it up: seeds 48 and 948) holds what it
    /// holds, and told it what its log synced when it started.
    fn primary_started(&mut self, node: NodeId, group: GroupId) {
        let sim = &mut self.groups[group_index(group)];
        sim.received_ever.retain(|&(_, primary), _| primary != node);
        sim.synced_ever.retain(|&(_, primary), _| primary != node);
        for backup in &self.nodes {
            let Slot::Backup(role) = backup.role(group) else {
                continue;
            };
            if role.gate().primary() != node {
                continue;
            }
            let held = (
                role.receiver().core().lsn_received(),
                role.applier().lsn_applied(),
            );
            sim.received_ever.insert((backup.id, node), held);
            let lsn_durable = backup.plane(group).log.lsn_durable();
            if lsn_durable > 0 {
                sim.synced_ever.insert((backup.id, node), lsn_durable);
            }
        }
    }
}

/// The simulated world as node `node`'s driver, while the node handles an input: what leaves
/// the node goes to the network and the log, and the checkers see it on its way.
pub(super) struct SimEnv<'a> {
    world: &'a mut World,
    node: NodeId,
    /// The key of the batch the backup role is applying (the Redis model only).
    applying: Option<((u64, u64, u32), u64, u64)>,
}

/// The checks a backup's turn runs on what it applies: the Redis model's history must
/// continue, no call may be applied twice, and a transfer installs bytes some primary held.
impl BackupWatch for SimEnv<'_> {
    type Error = String;

    fn applying(&mut self, _: GroupId, apply: &ApplyBatch) {
        self.applying = (self.world.redis_model()).then(|| batch_key(apply.batch.bytes()));
    }

    fn applied(
        &mut self,
        group: GroupId,
        lsn_before: u64,
        lsn: u64,
        calls: &[CallId],
    ) -> Result<(), String> {
        let (node, tick) = (self.node, self.world.now / MICROS_PER_TICK);
        let world = &mut *self.world;
        let ledger = &mut world.nodes[index_of(node)].planes[group_index(group)].ledger;
        let redis = &world.groups[group_index(group)].redis;
        if let (Some(redis), Some((key, lsn_base, _))) = (redis, self.applying.take()) {
            assert_eq!(ledger.history.lsn(), lsn_before, "the history follows");
            let Some(entries) = redis.batches.get(&key) else {
                return Err(format!(
                    "tick {tick}: node {node} applied a batch (view {}, LSN {lsn_base}) that no \
                     primary sent",
                    key.0
                ));
            };
            let first = (lsn_before + 1 - lsn_base) as usize;
            let last = (lsn - lsn_base) as usize;
            if !ledger.history.extend(&entries[first..=last]) {
                return Err(format!(
                    "tick {tick}: node {node} applied records from LSN {} on top of a history \
                     they do not continue",
                    lsn_before + 1
                ));
            }
        }
        for &call in calls {
            if !ledger.calls.insert(call) {
                return Err(format!(
                    "tick {tick}: node {node} applied call {call:?} twice"
                ));
            }
        }
        Ok(())
    }

    fn installed(
        &mut self,
        group: GroupId,
        view: u64,
        lsn: u64,
        segment: &Segment,
    ) -> Result<(), String> {
        let world = &mut *self.world;
        world.report.transfers += 1;
        // The member now holds the bytes of the sender's segment at `lsn`: its records are
        // the sender's.
        if let Some(redis) = &world.groups[group_index(group)].redis {
            let key = (view, lsn, crc32c::crc32c(segment.bytes()));
            let Some(history) = redis.transfers.get(&key) else {
                return Err(format!(
                    "tick {}: node {} installed a state transfer to LSN {lsn} and holds bytes \
                     no primary held at that LSN in view {view}",
                    world.now / MICROS_PER_TICK,
                    self.node
                ));
            };
            world.nodes[index_of(self.node)]
                .plane_mut(group)
                .ledger
                .history = history.clone();
        }
        Ok(())
    }
}

impl NodeEnv<ClientConn, ReaderConn> for SimEnv<'_> {
    type LoadError = std::convert::Infallible;

    fn now_us(&self) -> u64 {
        self.world.now
    }

    fn now_ms(&self) -> u64 {
        self.world.clock_ms()
    }

    /// A load the node cannot wait for is instant; one under way is abandoned.
    fn load(&mut self, group: GroupId) -> Result<Segment, Self::LoadError> {
        self.world.nodes[index_of(self.node)]
            .plane_mut(group)
            .load_epoch += 1;
        Ok(loaded(&*self.world.model, self.world.segment_len))
    }

    /// A load takes up to [`LOAD_TICKS_MAX`] ticks, drawn from the seed.
    fn start_load(&mut self, group: GroupId) {
        let world = &mut *self.world;
        let state = world.nodes[index_of(self.node)].plane_mut(group);
        state.load_epoch += 1;
        let epoch = state.load_epoch;
        let delay = world.load_rng.below(LOAD_TICKS_MAX * MICROS_PER_TICK + 1);
        world.schedule(
            delay,
            Event::Loaded {
                node: self.node,
                group,
                epoch,
            },
        );
    }

    fn log_align(&mut self, group: GroupId, lsn: u64) {
        self.world.log_align(self.node, group, lsn);
    }

    fn log_align_rejoin(&mut self, group: GroupId, lsn: u64) -> u64 {
        self.world.log_align_rejoin(self.node, group, lsn)
    }

    fn lsn_durable(&self, group: GroupId) -> u64 {
        self.world.nodes[index_of(self.node)]
            .plane(group)
            .log
            .lsn_durable()
    }

    fn wants_checkpoint(&self, group: GroupId) -> bool {
        (self.world.nodes[index_of(self.node)].plane(group).log).wants_checkpoint()
    }

    fn log_order(&mut self, group: GroupId, order: LogOrder) -> Option<u64> {
        if matches!(order, LogOrder::CheckpointFinish { .. }) {
            self.world.report.checkpoints += 1;
        }
        self.world.log_order(self.node, group, order)
    }

    fn send(&mut self, to: NodeId, message: PeerMessage) {
        let wire = match &message {
            PeerMessage::Replication { group, message } => Wire::replication(*group, message),
            PeerMessage::Cluster(message) => Wire::cluster(message),
            // Only a driver relays pub/sub messages (`Node::relay_publication`), and the
            // simulator's clients publish none.
            PeerMessage::Publication(_) => unreachable!("a simulated node relayed a message"),
        };
        self.world.send(self.node, to, wire);
    }

    fn release(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost,
        reply: tandem_replication::Reply<Answer<ClientConn>>,
    ) -> Result<(), String> {
        self.world.release((self.node, group), primary, reply)
    }

    fn withheld(&mut self, to: ClientConn) {
        // A simulated client has one call in flight; were a reply withheld, the client would
        // be told `Busy`, as the runtime tells a stub, and send the call again.
        if tandem_node::withheld_answer(1).is_some() {
            let client = CLIENT_BASE + to.client as NodeId;
            self.world
                .send(self.node, client, Wire::Busy { conn: to.conn });
        }
    }

    fn not_primary(&mut self, to: ClientConn) {
        let client = CLIENT_BASE + to.client as NodeId;
        self.world
            .send(self.node, client, Wire::NotPrimary { conn: to.conn });
    }

    fn read_answered(
        &mut self,
        to: ReaderConn,
        seq: u64,
        answer: ReadAnswer,
    ) -> Result<(), String> {
        self.world.read_answered(self.node, to, seq, answer)
    }

    fn note(&mut self, note: fmt::Arguments<'_>) {
        self.world.note(note.to_string());
    }

    fn notice(&mut self, group: GroupId, notice: Notice<'_>) {
        let world = &mut *self.world;
        world.note(format!(
            "node {}{}: {notice}",
            self.node,
            in_group(world, group)
        ));
        let sim = world.group_mut(group);
        if let Notice::Following { view, .. } = notice
            && view.number > sim.view_latest.number
        {
            sim.view_latest = view.clone();
        }
    }

    fn failure(&mut self, failure: NodeFailure) -> String {
        format!("node {} {failure}", self.node)
    }

    /// A refused handover, which no correct node asks for, fails the run.
    fn carry_note(&mut self, group: GroupId, note: &CarryNote<'_>) -> Result<(), String> {
        match note {
            CarryNote::HandoverRefused { error } => Err(format!(
                "node {} cannot hand its records of group {group} over: {error}",
                self.node
            )),
            _ => Ok(()),
        }
    }

    fn running(&mut self, _: GroupId, call: &mut WaitingCall<ClientConn>, time_ms: u64) {
        call.to.ran_at_ms = time_ms;
        call.to.reads = self.world.model.kind(call.proc_id) == Some(ProcKind::Read);
    }

    fn rewrite_call(
        &mut self,
        group: GroupId,
        call: &WaitingCall<ClientConn>,
    ) -> Option<(ProcId, Vec<u8>)> {
        self.world.increment_twice((self.node, group), call)
    }

    fn ran(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost,
        proc_id: ProcId,
        ran: &Ran,
        time_ms: u64,
    ) -> Result<(), String> {
        if let Some(redis) = self.world.group_mut(group).redis.as_mut()
            && proc_id == command_proc_of(b"INCR")
        {
            redis.increments_run += 1;
        }
        self.world.ran((self.node, group), primary, ran, time_ms)
    }

    fn swept(&mut self, group: GroupId, primary: &PrimaryHost, time_ms: u64) -> Result<(), String> {
        let world = &mut *self.world;
        (world.nodes[index_of(self.node)]
            .plane_mut(group)
            .ledger
            .history)
            .push(CallId::default(), time_ms);
        world.report.sweeps += 1;
        world.check_bounded(self.node, group, primary)
    }

    fn leaving(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost,
        ready: &mut RoleReady<ClientConn>,
    ) {
        self.world
            .remember_what_leaves((self.node, group), primary, ready);
    }

    fn backup_holds(
        &mut self,
        group: GroupId,
        primary: NodeId,
        lsn_received: u64,
        lsn_applied: u64,
    ) {
        let ever = self
            .world
            .group_mut(group)
            .received_ever
            .entry((self.node, primary))
            .or_insert((0, 0));
        ever.0 = ever.0.max(lsn_received);
        ever.1 = ever.1.max(lsn_applied);
    }

    fn backup_applied(
        &mut self,
        group: GroupId,
        backup: &BackupRole,
        lsn_before: u64,
    ) -> Result<(), String> {
        self.world
            .check_backup(self.node, group, lsn_before, backup)
    }

    fn synced_heard(&mut self, group: GroupId, primary: NodeId, lsn: u64) {
        let synced = self
            .world
            .group_mut(group)
            .synced_ever
            .entry((self.node, primary))
            .or_insert(0);
        *synced = (*synced).max(lsn);
    }

    /// The backup's lease promise to `primary` runs from the tick after the message.
    fn heard_primary(&mut self, group: GroupId, primary: NodeId) {
        let world = &mut *self.world;
        let node = self.node;
        let promise_ticks = world.nodes[index_of(node)].settings.lease_ticks;
        let end = world.tick_next_at[&node] + (promise_ticks - 1) * world.period[&node];
        let promise_end = &mut world.group_mut(group).promise_end;
        let promise = promise_end.entry((node, primary)).or_insert(0);
        *promise = (*promise).max(end);
    }

    fn records(&mut self, group: GroupId, moved: RecordsMoved<'_>) {
        self.world.records_moved((self.node, group), moved);
    }

    /// What the log holds is the old role's (the Redis model's ghost of it, for a replay),
    /// unless the log failed before the role rewound.
    fn carrying_out(&mut self, group: GroupId, role: &Slot) {
        let history = self.world.log_history(self.node, group, role);
        self.world.note_log_history(self.node, group, history);
    }

    fn primary_starting(&mut self, starting: PrimaryStarting<'_>) {
        self.world.primary_starting(self.node, starting);
    }

    fn carried(&mut self, carried: Carried<'_, ClientConn, ReaderConn>) {
        self.world.carried(self.node, carried);
    }

    /// A promotion in a view the config store has already replaced (a node cut off while
    /// later views were made learns them late and follows each in turn, k-of-n seed
    /// 1102351) makes a primary that serves nothing: its members have moved on, so no batch
    /// of it is acked and no lease is granted it. Only a promotion in the newest view must
    /// hold every acknowledged commit; were a commit the stale primary acknowledged missing
    /// from the newest view, the next promotion there, or the check once the cluster has
    /// healed, would say so.
    fn promoted(
        &mut self,
        group: GroupId,
        primary: &PrimaryHost,
        view: &View,
    ) -> Result<(), String> {
        if view.number != self.world.group(group).view_latest.number {
            return Ok(());
        }
        self.world.check_acked(self.node, group, primary)
    }

    fn ignores_depose(&self) -> bool {
        self.world.sabotage == Some(ClusterSabotage::IgnoreDepose)
    }
}

/// " in group G" when the run has more than one group: the notes of a one-group run read as
/// they always did.
pub(super) fn in_group(world: &World, group: GroupId) -> String {
    if world.groups.len() > 1 {
        format!(" in group {group}")
    } else {
        String::new()
    }
}
