//! The executor thread: it drives the node core's primary role (the store and the
//! replication core) and carries out its `RoleReady` (see the parent module).

use super::*;

pub(super) struct LocalDriver {
    pub(super) driver: Box<dyn Driver>,
    pub(super) load: Arc<LocalLoad>,
    pub(super) args: Vec<u8>,
    /// The call generated ahead and prefetched (the executor works one call ahead).
    pub(super) id_next: Option<ProcId>,
    pub(super) args_next: Vec<u8>,
    pub(super) started: Instant,
    pub(super) calls_since_clock: usize,
}

/// Local calls that share one reading of the clock as their start time.
const LOCAL_CALLS_PER_CLOCK_READ: usize = 16;

pub(crate) struct ConnOut {
    pub(super) sink: ConnSink,
    /// Answers of this turn not yet handed over: frames for a TCP client, answers for a
    /// local port (only the one its sink takes is used).
    pub(super) frames: Vec<u8>,
    pub(super) answers: Vec<LocalAnswer>,
    pub(super) unanswered: Arc<AtomicU64>,
    pub(super) answer_withheld: bool,
}

impl ConnOut {
    pub(crate) fn new(sink: ConnSink, unanswered: Arc<AtomicU64>, answer_withheld: bool) -> Self {
        ConnOut {
            sink,
            frames: Vec::new(),
            answers: Vec::new(),
            unanswered,
            answer_withheld,
        }
    }

    /// Where the answers go.
    pub(crate) fn sink(&self) -> &ConnSink {
        &self.sink
    }

    /// Answers call `seq` as `kind` says, at `lsn` unless it repeats an earlier run's; false
    /// for a refusal (it acknowledges nothing, and its latency is not counted).
    pub(crate) fn answer(&mut self, seq: u64, lsn: u64, kind: AnswerKind) -> bool {
        match kind {
            AnswerKind::Committed { body, lsn_repeated } => {
                self.committed(seq, lsn_repeated.unwrap_or(lsn), body);
            }
            AnswerKind::CommittedReplyNotKept {
                lsn_repeated,
                message,
            } => self.committed_reply_not_kept(seq, lsn_repeated, message),
            AnswerKind::RolledBack {
                message,
                ran_before,
            } => self.rolled_back(seq, ran_before.map_or(lsn, |run| run.lsn), message),
            AnswerKind::Refused { refusal, message } => {
                self.error(seq, error_code(refusal), &message);
                return false;
            }
        }
        true
    }

    /// Answers call `seq`: committed (or read, or repeated) at `lsn` with `body`.
    pub(crate) fn committed(&mut self, seq: u64, lsn: u64, body: Vec<u8>) {
        match self.sink {
            ConnSink::Frames(_) => {
                encode_reply(&mut self.frames, seq, lsn, ReplyStatus::Committed, &body);
            }
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::Committed(body),
            }),
        }
        self.answered();
    }

    /// Answers a retry of call `seq`, which committed at `lsn` but whose reply was not kept.
    pub(crate) fn committed_reply_not_kept(&mut self, seq: u64, lsn: u64, message: String) {
        match self.sink {
            ConnSink::Frames(_) => {
                let status = ReplyStatus::CommittedReplyNotKept;
                encode_reply(&mut self.frames, seq, lsn, status, message.as_bytes());
            }
            ConnSink::Local { .. } => {
                unreachable!("a local call has client id 0: it is never deduplicated")
            }
        }
        self.answered();
    }

    /// Answers call `seq`: its procedure refused with `message` and wrote nothing.
    pub(crate) fn rolled_back(&mut self, seq: u64, lsn: u64, message: String) {
        match self.sink {
            ConnSink::Frames(_) => {
                let status = ReplyStatus::RolledBack;
                encode_reply(&mut self.frames, seq, lsn, status, message.as_bytes());
            }
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::RolledBack(message),
            }),
        }
        self.answered();
    }

    /// Answers call `seq` with an error: it did not run, or it cannot be said that it did.
    pub(crate) fn error(&mut self, seq: u64, code: ErrorCode, message: &str) {
        match self.sink {
            ConnSink::Frames(_) => encode_error(&mut self.frames, code, message),
            ConnSink::Local { .. } => self.answers.push(LocalAnswer {
                seq,
                outcome: LocalOutcome::Unanswered {
                    code,
                    message: message.to_string(),
                },
            }),
        }
        self.answered();
    }

    /// A withheld reply of call `seq` (its lease ran out before it could leave): a TCP client
    /// is told what `tandem_node::withheld_answer` says; a local port is told "not primary"
    /// if it asked for it (the RESP front runs a withheld read again and tells a writer its
    /// command may have run), else nothing.
    pub(crate) fn withheld(&mut self, seq: u64) {
        let message = "this primary's lease ran out before the reply could leave";
        match self.sink {
            ConnSink::Frames(_) => {
                match tandem_node::withheld_answer(self.unanswered.load(Ordering::SeqCst)) {
                    Some(code) => self.error(seq, code, message),
                    None => self.answered(),
                }
            }
            _ if self.answer_withheld => self.error(seq, ErrorCode::NotPrimary, message),
            _ => self.answered(),
        }
    }

    /// Hands this turn's answers over.
    pub(crate) fn hand_over(&mut self) {
        match &self.sink {
            ConnSink::Frames(out) => {
                if !self.frames.is_empty() {
                    out.send(std::mem::take(&mut self.frames));
                }
            }
            ConnSink::Local { answers, wake } => {
                if !self.answers.is_empty() {
                    let _ = answers.send(std::mem::take(&mut self.answers));
                    wake();
                }
            }
        }
    }

    /// Counts one call answered.
    fn answered(&self) {
        self.unanswered.fetch_sub(1, Ordering::Relaxed);
    }
}

/// When the model's periodic procedure is next due (what it runs, and whether it may, is
/// `PrimaryRole::run_periodic`'s to decide).
pub(super) struct Periodic {
    pub(super) interval: Duration,
    pub(super) due: Instant,
}

pub(super) struct Executor {
    pub(super) node_id: NodeId,
    /// The model's periodic procedure (the Redis model's expiry sweep), if it has one.
    pub(super) periodic: Option<Periodic>,
    /// The node's write-ahead log, which takes every batch the role seals.
    pub(super) log: Option<NodeLog>,
    /// A checkpoint's orders for the log, between turns (kept for their capacity).
    pub(super) log_orders: Vec<LogOrder>,
    /// Until when the role answers nothing (a promotion's lease owed), taken at the start.
    pub(super) answer_from: Option<Instant>,
    /// The primary role's decisions: the store, the replication core, each call's outcome.
    pub(super) role: PrimaryRole<ReplyTo>,
    pub(super) ready: RoleReady<ReplyTo>,
    pub(super) links: BTreeMap<NodeId, Sender<Message>>,
    /// Links whose thread stopped (said once each).
    pub(super) links_lost: BTreeSet<NodeId>,
    pub(super) link_factory: LinkFactory,
    /// Where the node hears about backups (cluster mode), if anywhere.
    pub(super) observed: Option<Sender<Observed>>,
    pub(super) conns: BTreeMap<ConnId, ConnOut>,
    /// Calls received and not yet run, with the index of the next one in each batch.
    pub(super) queue: VecDeque<(CallBatch, usize)>,
    pub(super) local: Option<LocalDriver>,
    pub(super) metrics: Arc<Metrics>,
    pub(super) tick: Duration,
    /// When the core's tick 1 began: the clock's tick at any instant counts from here.
    pub(super) tick_origin: Instant,
    /// Latencies of local replies released in this turn, in nanoseconds.
    pub(super) replies_local: Vec<u64>,
    /// Payload bytes of every record shipped, by class (an active record's are data and
    /// meta; a passive trace's are data, undo and meta).
    pub(super) shipped: ClassBytes,
    /// Batch bytes handed to the links, framing included (once per backup).
    pub(super) wire_bytes: u64,
    pub(super) commits: u64,
    /// What the metrics have been told of `commits` and `rollbacks` so far.
    pub(super) commits_reported: u64,
    pub(super) rollbacks: u64,
    pub(super) rollbacks_reported: u64,
    /// The last committed LSN, for the client threads' Welcome frames.
    pub(super) lsn_committed: Arc<AtomicU64>,
    /// Each backup's gauges, in the order of the view's backups (looked up once, not per turn).
    pub(super) backup_gauges: Vec<BackupGauges>,
    /// The view, for the client threads' Welcome frames.
    pub(super) view_shared: Arc<AtomicU64>,
    /// When this thread last began a turn (for the links' pulses and the watchdog).
    pub(super) progress: Arc<Progress>,
}

/// Handles on one backup's labelled gauges.
pub(crate) struct BackupGauges {
    pub(crate) lsn_received: Gauge,
    pub(crate) lsn_applied: Gauge,
    pub(crate) lag_records: Gauge,
}

impl BackupGauges {
    pub(crate) fn new(metrics: &Metrics, node: NodeId) -> BackupGauges {
        let label = crate::metrics::BackupLabel {
            backup: node.to_string(),
        };
        BackupGauges {
            lsn_received: metrics.backup_lsn_received.get_or_create(&label).clone(),
            lsn_applied: metrics.backup_lsn_applied.get_or_create(&label).clone(),
            lag_records: metrics.backup_lag_records.get_or_create(&label).clone(),
        }
    }
}

/// Calls run per turn before the executor looks at its inbox again.
const CALLS_PER_TURN: usize = 512;
/// The longest a turn runs calls (or a quarter of a tick, if less): replies released in it
/// leave at its end, and the lease allows them a tick at most (see `lease_ticks` in `start`).
const TURN_MAX: Duration = Duration::from_micros(250);

impl Executor {
    /// Runs the primary role until it is stopped (`None`) or deposed: then it gives its
    /// segment back, at its last commit, for the node to stand by with.
    pub(super) fn run(mut self, inbound: Receiver<Inbound>) -> Option<tandem_memory::Segment> {
        self.tick_origin = Instant::now();
        let mut next_tick = self.tick_origin + self.tick;
        // The replication core holds replies in its own ticks: until the first of them that
        // falls at or after the instant the old primary's lease surely ended.
        if let Some(answer_from) = self.answer_from.take() {
            let wait = answer_from.saturating_duration_since(self.tick_origin);
            let ticks = wait.as_nanos().div_ceil(self.tick.as_nanos());
            self.role
                .hold_releases(u64::try_from(ticks).unwrap_or(u64::MAX));
        }
        loop {
            self.progress.turn();
            // 1. Ticks, every one missed replayed: the lease is measured in them, so the
            // primary's tick must be current before an ack can release a reply.
            let now = Instant::now();
            while now >= next_tick {
                self.role.tick();
                next_tick += self.tick;
            }
            // 2. Everything that arrived.
            loop {
                match inbound.try_recv() {
                    Ok(Inbound::Control(Control::Stop)) => {
                        self.finish();
                        return None;
                    }
                    Ok(event) => self.handle(event),
                    Err(_) => break,
                }
            }
            // 3. Calls.
            let ran = self.run_calls();
            // 4. Nothing more to run right now: ship what is open.
            let idle = self.queue.is_empty() && !self.local_can_issue();
            if idle || ran == 0 {
                self.role.flush();
            }
            self.dispatch();
            if self.role.primary().is_deposed() {
                self.refuse_queued();
                return Some(self.role.into_segment());
            }
            // 5. Wait for work when there is none.
            if ran == 0 {
                // A checkpoint under way goes on while nothing else waits.
                let timeout = if self.role.checkpoint_under_way() {
                    Duration::ZERO
                } else {
                    next_tick.saturating_duration_since(Instant::now())
                };
                match inbound.recv_timeout(timeout) {
                    Ok(Inbound::Control(Control::Stop)) => {
                        self.finish();
                        return None;
                    }
                    Ok(event) => self.handle(event),
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => return None,
                }
            }
        }
    }

    pub(super) fn local_can_issue(&self) -> bool {
        self.local.as_ref().is_some_and(|local| {
            local.load.active.load(Ordering::Relaxed)
                && (local.load.outstanding.load(Ordering::Relaxed) as usize) < local.load.clients
        })
    }

    pub(super) fn handle(&mut self, event: Inbound) {
        match event {
            Inbound::Calls(batch) => self.queue.push_back((batch, 0)),
            Inbound::Peer { from, message } => self.role.step(from, message),
            Inbound::LinkUp { node } => self.role.link_reset(node),
            Inbound::ConnOpened {
                conn,
                out,
                unanswered,
                answer_withheld,
            } => {
                self.conns
                    .insert(conn, ConnOut::new(out, unanswered, answer_withheld));
            }
            Inbound::ConnClosed { conn } => {
                self.conns.remove(&conn);
            }
            Inbound::Control(Control::Status(reply)) => {
                let _ = reply.send(self.status());
            }
            Inbound::Control(Control::Checksum(reply)) => {
                let store = self.role.store();
                let segment = store.segment();
                let mut checksum = Checksum::of(segment.bytes(), segment.lsn());
                checksum.check = store.model().check(segment).err().map(|e| e.to_string());
                let _ = reply.send(checksum);
            }
            Inbound::View {
                view,
                backups,
                spares,
                addresses,
            } => {
                if self.role.install_view(view, &backups, &spares) {
                    self.view_shared.store(view, Ordering::Release);
                    let members: Vec<NodeId> = backups.iter().chain(&spares).copied().collect();
                    // A link whose member left ends when its sender is dropped.
                    self.links.retain(|node, _| members.contains(node));
                    for (node, address) in addresses {
                        if members.contains(&node) && !self.links.contains_key(&node) {
                            match self.link_factory.spawn(node, address) {
                                Ok(link) => {
                                    self.links.insert(node, link);
                                }
                                Err(err) => tracing::error!("node {}: {err}", self.node_id),
                            }
                        }
                    }
                    self.refresh_gauges();
                }
            }
            Inbound::Depose { view } => self.role.depose(view),
            Inbound::Synced { lsn } => self.role.log_synced(lsn),
            Inbound::PrepareRemoval { view, backup } => self.role.prepare_removal(view, backup),
            Inbound::Control(Control::Stop) => unreachable!("handled by the loop"),
        }
    }

    pub(super) fn status(&self) -> NodeStatus {
        let primary = self.role.primary();
        let lsn = self.role.store().segment().lsn();
        NodeStatus {
            node_id: self.node_id,
            role: "primary",
            view: primary.view(),
            lsn,
            lsn_applied: lsn,
            pending_replies: primary.pending_replies() as u64,
            commits: self.commits,
            shipped_data_bytes: self.shipped.data,
            shipped_undo_bytes: self.shipped.undo,
            shipped_meta_bytes: self.shipped.meta,
            shipped_wire_bytes: self.wire_bytes,
            check: None,
            backups: primary.backup_progress().collect(),
        }
    }

    /// Runs queued calls, then local ones, for at most `CALLS_PER_TURN` calls or `TURN_MAX`.
    /// Returns how many ran.
    pub(super) fn run_calls(&mut self) -> usize {
        let mut ran = 0;
        let turn_started = Instant::now();
        // Expiry is measured against the primary's clock (backups get the deletions as redo).
        // A clock set before 1970 reads as 0: nothing expires until it is set right.
        let now_ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |since| since.as_millis() as u64);
        self.role.set_time_ms(now_ms);
        let turn_max = (self.tick / 4).min(TURN_MAX);
        // The clock is read every 16 calls: a read costs a fifth of a Debit-Credit call.
        let turn_over = |ran: usize| {
            ran >= CALLS_PER_TURN
                || (ran.is_multiple_of(16) && ran > 0 && turn_started.elapsed() >= turn_max)
        };
        // The front batch is taken out of the queue while its calls run (they borrow its
        // bytes), and put back if flow control stops the turn half-way.
        while !turn_over(ran) {
            let Some((batch, mut next)) = self.queue.pop_front() else {
                break;
            };
            let mut stalled = false;
            while next < batch.calls.len() && !turn_over(ran) {
                let slot = &batch.calls[next];
                let call = Call {
                    client_id: batch.client_id,
                    seq: slot.seq,
                    proc_id: ProcId(slot.proc_id),
                    args: &batch.bytes[slot.args.clone()],
                    read_only: slot.read_only,
                    safety: slot.safety,
                };
                let to = ReplyTo::Remote {
                    conn: batch.conn,
                    started: Instant::now(),
                };
                match self.role.run_call(&call, to) {
                    Ran::Stalled => {
                        self.metrics.flow_control_stalls.inc();
                        stalled = true;
                        break;
                    }
                    Ran::Committed { shipped, .. } => {
                        self.commits += 1;
                        self.shipped += shipped;
                    }
                    Ran::Duplicate { .. } => {
                        self.metrics.duplicates_answered.inc();
                    }
                    Ran::RolledBack => self.rollbacks += 1,
                    Ran::Read | Ran::Refused(_) => {}
                }
                next += 1;
                ran += 1;
            }
            if next < batch.calls.len() {
                self.queue.push_front((batch, next));
            }
            if stalled {
                return ran;
            }
        }
        self.run_periodic(turn_started);
        while !turn_over(ran) && self.local_can_issue() {
            let safety = self.role.primary().effective_safety(None);
            if !self.role.can_commit(safety) {
                self.metrics.flow_control_stalls.inc();
                break;
            }
            self.run_local(safety);
            ran += 1;
        }
        ran
    }

    /// Runs the model's periodic procedure if it is due (and refreshes the model's figures
    /// for `/metrics` and `INFO`). Its answer goes nowhere.
    fn run_periodic(&mut self, now: Instant) {
        let Some(periodic) = &mut self.periodic else {
            return;
        };
        if now < periodic.due {
            return;
        }
        periodic.due = now + periodic.interval;
        let store = self.role.store();
        self.metrics
            .set_model_stats(store.model().stats(store.segment()));
        if let Some(shipped) = self.role.run_periodic(ReplyTo::Periodic) {
            self.commits += 1;
            self.shipped += shipped;
        }
    }

    pub(super) fn run_local(&mut self, safety: Safety) {
        let local = self.local.as_mut().expect("local load");
        // Reading the clock costs as much as a fifth of a Debit-Credit call, so local calls
        // share a start time per run of LOCAL_CALLS_PER_CLOCK_READ (a few microseconds).
        if local.calls_since_clock == 0 {
            local.started = Instant::now();
        }
        local.calls_since_clock = (local.calls_since_clock + 1) % LOCAL_CALLS_PER_CLOCK_READ;
        let started = local.started;
        let id = match local.id_next.take() {
            Some(id) => id,
            None => local.driver.next_call(&mut local.args_next),
        };
        std::mem::swap(&mut local.args, &mut local.args_next);
        // Work one call ahead: the next call's records start loading while this one runs.
        let id_next = local.driver.next_call(&mut local.args_next);
        self.role.store().prefetch(id_next, &local.args_next);
        local.id_next = Some(id_next);
        local.load.outstanding.fetch_add(1, Ordering::Relaxed);
        let outcome = self
            .role
            .run_local(id, &local.args, safety, ReplyTo::Local { started });
        match outcome {
            Ok(shipped) => {
                local.driver.observe(id, &local.args, Ok(()));
                self.commits += 1;
                self.shipped += shipped;
            }
            Err(err) => {
                local.driver.observe(id, &local.args, Err(&err));
                self.rollbacks += 1;
            }
        }
    }

    /// Acts on the core's outputs: messages to the links, replies to their clients.
    pub(super) fn dispatch(&mut self) {
        self.role.take_ready(&mut self.ready);
        // The log first: the batches' records are the node's from now on, whatever else
        // this turn sends.
        let sealed = self.ready.replication.to_log.drain(..);
        match &self.log {
            Some(log) => {
                log.batches(sealed);
                if let Some(lsn) = self.ready.replication.sync_wanted.take() {
                    log.order(LogOrder::SyncWanted { lsn });
                }
                // A checkpoint goes on a few pages a turn, after the turn's batches.
                self.role
                    .checkpoint_step(log.checkpoint_wanted(), &mut self.log_orders);
                for order in self.log_orders.drain(..) {
                    log.order(order);
                }
            }
            None => drop(sealed),
        }
        // A transfer's pages were copied into its messages while the executor waited: it
        // costs a pause proportional to the pages changed since the member's LSN.
        for (node, sent) in self.ready.transfers_sent.drain(..) {
            tracing::info!(
                "node {}: state transfer to node {node}: {} pages changed after LSN {}, as of \
                 LSN {}",
                self.node_id,
                sent.pages,
                sent.lsn_from,
                sent.lsn
            );
        }
        self.pass_observed();
        for (to, message) in self.ready.replication.messages.drain(..) {
            if let Message::Batch(bytes) = &message {
                self.metrics.batches_shipped.inc();
                self.metrics.bytes_shipped.inc_by(bytes.len() as u64);
                self.wire_bytes += bytes.len() as u64;
            }
            // A link reconnects for as long as the role runs: a send fails only if its
            // thread panicked, and then that backup hears nothing more and is removed once
            // the primary suspects it. Said once per link.
            if let Some(link) = self.links.get(&to)
                && link.send(message).is_err()
                && self.links_lost.insert(to)
            {
                tracing::error!(
                    "node {}: the link to node {to} stopped; that backup will be suspected",
                    self.node_id
                );
            }
        }
        let now = Instant::now();
        // Counters move once per turn, not once per call: an atomic add per call costs as
        // much as a tenth of a Debit-Credit call.
        self.metrics
            .replies_released
            .inc_by(self.ready.replication.replies.len() as u64);
        self.metrics
            .commits
            .inc_by(self.commits - self.commits_reported);
        self.commits_reported = self.commits;
        self.metrics
            .rollbacks
            .inc_by(self.rollbacks - self.rollbacks_reported);
        self.rollbacks_reported = self.rollbacks;
        // The core released these at its tick, earlier in the turn: it says which to send
        // now, which to withhold (a lease that ran out since: its client retries) and which
        // to answer "not primary" (abandoned by a deposed primary).
        let tick_now = 1
            + (now.duration_since(self.tick_origin).as_nanos() / self.tick.as_nanos().max(1))
                as u64;
        // A reply whose lease ran out while this turn ran (a long call) waits for it to hold
        // again rather than being withheld.
        self.role.hold_lapsed(&mut self.ready, tick_now);
        let mut withheld = 0;
        for disposition in self.ready.drain_replies(tick_now) {
            match disposition {
                Disposition::Send(reply) => {
                    let Answer { to, seq, kind } = reply.reply;
                    let (conn, started) = match to {
                        ReplyTo::Local { started } => {
                            self.replies_local
                                .push(now.duration_since(started).as_nanos() as u64);
                            continue;
                        }
                        ReplyTo::Remote { conn, started } => (conn, started),
                        ReplyTo::Periodic => continue,
                    };
                    let Some(out) = self.conns.get_mut(&conn) else {
                        continue;
                    };
                    if !out.answer(seq, reply.lsn, kind) {
                        continue;
                    }
                    self.metrics
                        .ack_latency_seconds
                        .observe(now.duration_since(started).as_secs_f64());
                }
                Disposition::Withhold(reply) => {
                    withheld += 1;
                    if let ReplyTo::Remote { conn, .. } = reply.reply.to
                        && let Some(out) = self.conns.get_mut(&conn)
                    {
                        out.withheld(reply.reply.seq);
                    }
                }
                Disposition::NotPrimary(reply) => {
                    if let ReplyTo::Remote { conn, .. } = reply.reply.to
                        && let Some(out) = self.conns.get_mut(&conn)
                    {
                        let message = "this primary was replaced";
                        out.error(reply.reply.seq, ErrorCode::NotPrimary, message);
                    }
                }
            }
        }
        self.metrics.replies_withheld.inc_by(withheld);
        for fault in self.ready.replication.faults.drain(..) {
            if let PrimaryFault::TailMissed { from, .. } = fault {
                tracing::warn!(
                    "node {}: passive backup {from} needs records that left the retained tail; \
                     restart it from the same load, or raise tuning.tail_records_max and \
                     tuning.tail_bytes_max",
                    self.node_id
                );
            }
        }
        self.ready.clear();
        let lsn = self.publish_lsn();
        for out in self.conns.values_mut() {
            out.hand_over();
        }
        if let Some(local) = &self.local
            && !self.replies_local.is_empty()
        {
            let count = self.replies_local.len() as u64;
            let mut histogram = local.load.latency_ns.lock().expect("not poisoned");
            for &latency in &self.replies_local {
                let _ = histogram.record(latency.max(1));
            }
            drop(histogram);
            local.load.replies.fetch_add(count, Ordering::Relaxed);
            local.load.outstanding.fetch_sub(count, Ordering::Relaxed);
            self.replies_local.clear();
        }
        self.metrics.lsn_committed.set(lsn as i64);
        let gauges = self.backup_gauges.iter();
        for ((_, received, applied), gauges) in self.role.primary().backup_progress().zip(gauges) {
            gauges.lsn_received.set(received as i64);
            gauges.lsn_applied.set(applied as i64);
            gauges.lag_records.set(lsn.saturating_sub(applied) as i64);
        }
    }

    /// Publishes the last committed LSN, before the answers it covers are handed over: a
    /// front end that takes an answer sees its commit in `lsn_committed` (a waiting blocking
    /// call is tried again on it).
    fn publish_lsn(&mut self) -> u64 {
        let lsn = self.role.primary().lsn_committed();
        self.lsn_committed.store(lsn, Ordering::Release);
        lsn
    }

    /// A deposed primary answers the calls it never ran: another node is the primary now,
    /// and the client resends them there with the same (client id, seq).
    pub(super) fn refuse_queued(&mut self) {
        for (batch, next) in self.queue.drain(..) {
            if let Some(out) = self.conns.get_mut(&batch.conn) {
                for slot in &batch.calls[next..] {
                    out.error(slot.seq, ErrorCode::NotPrimary, "this primary was replaced");
                }
            }
        }
        for out in self.conns.values_mut() {
            out.hand_over();
        }
    }

    /// Looks up the gauges of the view's backups and spares, in `backup_progress` order.
    pub(super) fn refresh_gauges(&mut self) {
        self.backup_gauges = self
            .role
            .primary()
            .backup_progress()
            .map(|(node, _, _)| BackupGauges::new(&self.metrics, node))
            .collect();
    }

    /// Tells the node's supervisor what the role observed: a spare caught up, a removal
    /// prepared. That a backup was heard the links tell it themselves (`link.rs`), so that a
    /// busy executor does not look like silent backups.
    pub(super) fn pass_observed(&mut self) {
        let Some(observed) = &self.observed else {
            self.ready.observed.clear();
            return;
        };
        for event in self.ready.observed.drain(..) {
            if let Observed::Heard(_) = event {
                continue;
            }
            // The supervisor outlives its roles; if it is gone, so is the node.
            let _ = observed.send(event);
        }
    }

    /// Checks the data model's consistency and the local driver's tallies before stopping.
    pub(super) fn finish(&mut self) {
        if let Some(local) = &self.local {
            let store = self.role.store();
            let segment = store.segment();
            let result = store
                .model()
                .check(segment)
                .and_then(|()| local.driver.check(segment))
                .map_err(|err| err.to_string());
            *local.load.check.lock().expect("not poisoned") = Some(result);
        }
    }
}

/// The Error frame's code for a refused call.
pub(crate) fn error_code(refusal: Refusal) -> ErrorCode {
    match refusal {
        Refusal::UnknownProcedure => ErrorCode::UnknownProcedure,
        Refusal::WritesOnRead | Refusal::RuleUnmet | Refusal::StaleSeq | Refusal::DedupFull => {
            ErrorCode::BadArgs
        }
        Refusal::Internal => ErrorCode::Internal,
    }
}
