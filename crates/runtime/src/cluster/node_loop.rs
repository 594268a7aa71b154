//! The node's thread: it owns the member's [`Node`] (its supervisor, the role it holds and
//! that role's store) and drives it, its connections to the other nodes (a poll loop:
//! [`super::peers`]) and its clients' I/O loop ([`IoLoop`], whose epoll descriptor it
//! watches beside the peers' sockets). The log, the loader and the hello threads hand it
//! what they have through one channel ([`NodeTx`], which wakes the poll); it hands the node
//! each input, drives it, and then publishes what the other threads read of it: the role's
//! handle (for the acceptor), the links the role keeps, and what `/status` says.
//!
//! Order in a pass: the clients' sockets, when the node's poll says they are ready (their
//! calls queue); what the peers' sockets hold, frame by frame, each followed by a drive;
//! then the channel's inputs, likewise; the calls queued, run together; the ticks that are
//! due; the answers of the whole pass handed over and written to the clients' sockets; the
//! role published; and last what the pass queued for the peers, written. While a script
//! runs past its busy threshold, the script watch turns the I/O loop from inside the
//! script (`CallWatch::busy_tick`), as Redis serves clients from its Lua hook: they get
//! `-BUSY` and `SCRIPT KILL` reaches the script.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tandem_cluster::ClusterMessage;
use tandem_config::{GroupId, Member};
use tandem_memory::Segment;
use tandem_node::{DriveError, Needs, Node, Slot as RoleSlot, WaitingCall, WaitingRead};
use tandem_replication::NodeId;
use tandem_store::ProcId;
use tandem_wire::ErrorCode;

use super::beat::Beat;
use super::env::{CallTo, Conn, RuntimeEnv};
use super::peers::{self, Connected, PeerInput};
use super::{ClusterInfo, GroupPlace, Slot, TICKS_REPLAYED_MAX, brief};
use crate::backup::{BackupHandle, Gate, ReadRequest, ReadTo};
use crate::net::ConnError;
use crate::primary::{CallBatch, ConnOut, ConnSink, Inbound, InboundTx};
use crate::resp::{IoLoop, LoopWakers};
use crate::scripts::Scripts;
use crate::{Checksum, Control, NodeStatus, StartError};

/// The poll token of the first clients' I/O loop's own poll; loop k's is this one minus k
/// (peers' tokens are small numbers).
const IO_LOOP: usize = usize::MAX - 1;

/// The I/O loop whose poll `token` is, if it is one's.
fn io_loop_of(token: mio::Token, loops: usize) -> Option<usize> {
    let at = IO_LOOP.checked_sub(token.0)?;
    (at < loops).then_some(at)
}

/// How often the model's figures are refreshed for `/metrics` (and for an `INFO` that cannot
/// read them by a call: inside `MULTI`, or on a node without a role).
const STATS_INTERVAL: Duration = Duration::from_millis(100);

/// What reaches the node's thread.
#[derive(Debug)]
pub(crate) enum ToNode {
    /// What a primary role's connections read (clients' calls, members' acks), tagged with
    /// the group and epoch of the role they were opened under.
    Primary {
        group: GroupId,
        role_epoch: u64,
        inbound: Inbound,
    },
    /// A peer's connection, accepted and authenticated.
    PeerAccepted { peer: NodeId, connected: Connected },
    /// A dial to a peer ended.
    PeerDialed {
        peer: NodeId,
        result: Result<Connected, ConnError>,
    },
    /// A client's read at the backup role of `group`.
    Read { group: GroupId, read: ReadRequest },
    /// The log of `group` synced every record up to `lsn`.
    Synced { group: GroupId, lsn: u64 },
    /// Load number `load` of `group` ended.
    Loaded {
        group: GroupId,
        load: u64,
        result: Result<Segment, StartError>,
    },
    /// End the node's thread (a node run inside another program, such as a test or a
    /// benchmark; a node process ends with its process instead).
    Stop,
}

/// The way into the node's thread: its channel, and the waker of its poll. The waker is
/// rung only when the thread sleeps (or is about to), so a busy node is not woken once per
/// input.
#[derive(Clone, Debug)]
pub(crate) struct NodeTx {
    tx: Sender<ToNode>,
    waker: Arc<mio::Waker>,
    asleep: Arc<AtomicBool>,
}

/// The node's thread has stopped.
#[derive(Debug)]
pub(crate) struct NodeGone;

impl NodeTx {
    /// A way into a node thread, the inbox it reads and the poll it waits on.
    pub(crate) fn with_poll() -> Result<(NodeTx, NodeInbox, mio::Poll), StartError> {
        let poll_failed = |source| StartError::Thread {
            thread: "the node's poll",
            source,
        };
        let poll = mio::Poll::new().map_err(poll_failed)?;
        let waker = mio::Waker::new(poll.registry(), peers::WAKER).map_err(poll_failed)?;
        let (tx, rx) = std::sync::mpsc::channel();
        let asleep = Arc::new(AtomicBool::new(false));
        let node_tx = NodeTx {
            tx,
            waker: Arc::new(waker),
            asleep: Arc::clone(&asleep),
        };
        Ok((node_tx, NodeInbox { rx, asleep }, poll))
    }

    pub(crate) fn send(&self, input: ToNode) -> Result<(), NodeGone> {
        self.tx.send(input).map_err(|_| NodeGone)?;
        // Sent before the flag is read: a thread going to sleep either finds the input in
        // its last look at the channel or finds the flag taken here and is woken.
        self.wake_if_asleep();
        Ok(())
    }

    /// Wakes the node's thread if it sleeps. Only the node's thread itself may rely on it
    /// for what is not in the channel: it looks at its I/O loop again before it sleeps.
    fn wake_if_asleep(&self) {
        if self.asleep.swap(false, Ordering::SeqCst) {
            let _ = self.waker.wake();
        }
    }

    /// How the I/O loop the node's thread drives is woken: from the node's thread, only if
    /// it sleeps (it is about to look at the loop anyway); from any other, always.
    pub(crate) fn io_wakers(&self) -> LoopWakers {
        let from_driver = self.clone();
        let waker = Arc::clone(&self.waker);
        LoopWakers {
            from_driver: Arc::new(move || from_driver.wake_if_asleep()),
            from_elsewhere: Arc::new(move || {
                let _ = waker.wake();
            }),
        }
    }
}

/// The node thread's end of [`NodeTx`].
pub(crate) struct NodeInbox {
    rx: Receiver<ToNode>,
    asleep: Arc<AtomicBool>,
}

#[cfg(test)]
impl NodeInbox {
    /// The next input waiting, if any.
    pub(crate) fn try_recv(&self) -> Option<ToNode> {
        self.rx.try_recv().ok()
    }
}

/// What the node publishes of its role to the other threads, and the role's epoch.
pub(super) enum Published {
    Outside,
    Primary {
        role_epoch: u64,
        view: Arc<AtomicU64>,
        lsn_committed: Arc<AtomicU64>,
    },
    Backup {
        role_epoch: u64,
        gate: Arc<Gate>,
        lsn_applied: Arc<AtomicU64>,
    },
}

/// What the node's thread keeps of one group the node serves in: the role it published for
/// the other threads, and the links the role asked for or was asked.
pub(super) struct Hosted {
    pub(super) group: GroupId,
    /// The group's role as the acceptor, the RESP port and `/status` see it.
    pub(super) slot: Arc<Mutex<Slot>>,
    pub(super) published: Published,
    /// Primary: asks for a link from backups its role cannot take yet, with when each is
    /// refused (a view change makes the asker wait a moment rather than ask again).
    pub(super) link_asks_waiting: BTreeMap<NodeId, Instant>,
    /// Backup: the role epoch this node's last ask for a link was sent in, by primary.
    pub(super) link_asked: BTreeMap<NodeId, u64>,
    /// Backup: a refused ask is sent again from then.
    pub(super) link_ask_after: Option<Instant>,
    /// Since when this node is primary of a view without a backup, if it is.
    pub(super) alone_since: Option<Instant>,
    /// Backups the primary role heard from since it started (for the trace lines).
    pub(super) heard_since_role: BTreeSet<NodeId>,
    /// Calls were queued at the primary role in this pass, to run once it is over.
    pub(super) calls_queued: bool,
}

impl Hosted {
    /// A group the node serves in, holding no role yet; `slot` is where its role is
    /// published.
    pub(super) fn new(group: GroupId, slot: Arc<Mutex<Slot>>) -> Hosted {
        Hosted {
            group,
            slot,
            published: Published::Outside,
            link_asks_waiting: BTreeMap::new(),
            link_asked: BTreeMap::new(),
            link_ask_after: None,
            alone_since: None,
            heard_since_role: BTreeSet::new(),
            calls_queued: false,
        }
    }
}

/// The node's thread: see the module.
pub(super) struct NodeThread {
    pub(super) node: Node<CallTo, ReadTo>,
    /// Each group the node serves in, in the order of its core's groups (and of
    /// `env.groups`).
    pub(super) hosted: Vec<Hosted>,
    pub(super) disk: super::ConfigDisk,
    pub(super) env: RuntimeEnv,
    pub(super) inbox: NodeInbox,
    /// Polls the peers' connections and the waker of [`NodeTx`].
    pub(super) poll: mio::Poll,
    /// The links the beat thread speaks on, as last published to it.
    pub(super) beats_published: Vec<(NodeId, u64, GroupId, Beat)>,
    /// What the peers' connections brought in this pass (a buffer reused).
    pub(super) peer_inputs: Vec<PeerInput>,
    /// Status and checksum questions of the backup roles' probes, by group.
    pub(super) controls: Receiver<(GroupId, Control)>,
    pub(super) controls_tx: Sender<(GroupId, Control)>,
    pub(super) tick: Duration,
    pub(super) scripts: Scripts,
    pub(super) info: Arc<Mutex<ClusterInfo>>,
    pub(super) started: Instant,
    /// When the model's figures (keys, memory) were last refreshed for `/metrics` and
    /// `INFO`.
    pub(super) stats_refreshed: Option<Instant>,
    /// The clients' I/O loops, driven by this thread: the first serves the native clients
    /// and the RESP endpoint of the node's first group, each other the RESP endpoint of
    /// another group the node serves in. They are shared with the script watch, which
    /// serves them while a script is busy.
    pub(super) io: Vec<Arc<Mutex<IoLoop>>>,
    /// The in-process driver's calls (a benchmark's primary, of the node's first group), if
    /// the node runs one.
    pub(super) local: Option<super::local_load::LocalCalls>,
    /// Asked to end ([`ToNode::Stop`]): the thread returns at the end of this pass.
    pub(super) stopping: bool,
}

impl NodeThread {
    /// The index of `group` among the hosted groups, if the node serves in it.
    pub(super) fn hosted_at(&self, group: GroupId) -> Option<usize> {
        self.hosted.iter().position(|hosted| hosted.group == group)
    }

    /// The group of the in-process driver's calls: the node's first.
    fn local_group(&self) -> GroupId {
        self.hosted[0].group
    }

    /// Runs the node until the process stops, or until it is asked to stop.
    pub(super) fn run(mut self) {
        let tick = self.tick;
        let mut next_tick = Instant::now() + tick;
        let mut events = mio::Events::with_capacity(64);
        self.watch_io();
        self.drive();
        self.publish();
        loop {
            let io_due = self.io.iter().filter_map(|io| lock(io).due()).min();
            let due = io_due.map_or(next_tick, |due| due.min(next_tick));
            let timeout = match self.local_wants_calls() {
                true => Duration::ZERO,
                false => due.saturating_duration_since(Instant::now()),
            };
            let first = self.wait(&mut events, timeout);
            // The clients' sockets first: the calls they read join this pass's. The loop's
            // own poll is asked only when this one said it is ready (its wake-ups are
            // edge-triggered: each new event of the loop's raises one here) or the loop
            // asked to look again; what the node handed over reaches the clients at the
            // pass below either way.
            let loops = self.io.len();
            for at in 0..loops {
                let ready = events
                    .iter()
                    .any(|e| io_loop_of(e.token(), loops) == Some(at));
                let due = lock(&self.io[at])
                    .due()
                    .is_some_and(|due| due <= Instant::now());
                if ready || due {
                    self.io_turn(at);
                }
            }
            let peer_events = events
                .iter()
                .filter(|e| io_loop_of(e.token(), loops).is_none());
            for event in peer_events {
                let Some(peer) = peers::peer_of(event.token()) else {
                    continue;
                };
                if event.is_writable() {
                    self.env.peers.flush(Some(peer));
                }
                let closed = event.is_read_closed() || event.is_error();
                if event.is_readable() || closed {
                    self.read_peer(peer, closed);
                }
            }
            if let Some(input) = first {
                self.input(input);
            }
            while let Ok(input) = self.inbox.rx.try_recv() {
                self.input(input);
            }
            self.local_calls();
            self.run_queued();
            while let Ok((group, control)) = self.controls.try_recv() {
                self.answer(group, control);
            }
            self.env.progress.turn();
            next_tick = self.ticks_due(next_tick);
            self.env.hand_over();
            // What the node handed over reaches the clients' sockets before the thread
            // sleeps.
            for io in &self.io {
                lock(io).pass();
            }
            self.publish();
            self.env.peers.dial_due(Instant::now());
            self.env.peers.flush(None);
            self.peers_ended();
            if self.stopping {
                return self.stop();
            }
        }
    }

    /// Runs the calls queued in this pass, group by group. The calls of every connection
    /// read in this pass run together: they share batches, as they would in one
    /// connection's pipeline.
    fn run_queued(&mut self) {
        for at in 0..self.hosted.len() {
            if std::mem::take(&mut self.hosted[at].calls_queued) {
                let group = self.hosted[at].group;
                let ran = self.node.run_queued(group, &mut self.env);
                self.check(ran);
                self.drive();
            }
        }
    }

    /// Ends the thread's work: dropped, it closes the clients' sockets and the peers'; the
    /// beat thread, which runs while the node holds it, ends at its next beat.
    fn stop(self) {
        tracing::info!("node {}: stopped", self.env.id);
    }

    /// Watches the I/O loops' polls from this thread's, and lets the script watch serve the
    /// loops while a script is busy (this thread runs the script and cannot otherwise).
    fn watch_io(&mut self) {
        for at in 0..self.io.len() {
            let fd = lock(&self.io[at]).poll_fd();
            let registered = self.poll.registry().register(
                &mut mio::unix::SourceFd(&fd),
                mio::Token(IO_LOOP - at),
                mio::Interest::READABLE,
            );
            if let Err(err) = registered {
                self.poisoned(&format!("cannot watch its clients' sockets ({err})"));
            }
        }
        // Weak: a stopped node's loops are dropped with its thread, sockets and all.
        let loops: Vec<_> = self.io.iter().map(Arc::downgrade).collect();
        let me = self.env.id;
        self.scripts.watch().serve_while_busy(Box::new(move || {
            for io in &loops {
                let Some(io) = io.upgrade() else {
                    return;
                };
                // The node thread holds a loop only between calls: a script runs outside.
                let Ok(mut io) = io.try_lock() else {
                    continue;
                };
                if let Err(err) = io.turn(Some(Duration::ZERO)) {
                    tracing::error!("node {me}: poisoned: cannot poll its clients ({err})");
                    std::process::exit(70);
                }
            }
        }));
    }

    /// One turn of the clients' I/O loop at `at`, without waiting.
    fn io_turn(&mut self, at: usize) {
        let turned = lock(&self.io[at]).turn(Some(Duration::ZERO));
        if let Err(err) = turned {
            self.poisoned(&format!("cannot poll its clients ({err})"));
        }
    }

    fn poisoned(&self, why: &str) -> ! {
        tracing::error!("node {}: poisoned: {why}; the node stops", self.env.id);
        std::process::exit(70);
    }

    /// Waits for sockets, an input or `timeout`, whichever comes first; returns an input
    /// already waiting, if one was (the poll then only looks).
    fn wait(&mut self, events: &mut mio::Events, timeout: Duration) -> Option<ToNode> {
        self.inbox.asleep.store(true, Ordering::SeqCst);
        let first = self.inbox.rx.try_recv().ok();
        let timeout = if first.is_some() {
            Duration::ZERO
        } else {
            timeout
        };
        if let Err(err) = self.poll.poll(events, Some(timeout))
            && err.kind() != std::io::ErrorKind::Interrupted
        {
            self.poisoned(&format!("cannot poll ({err})"));
        }
        self.inbox.asleep.store(false, Ordering::SeqCst);
        first
    }

    /// Ticks the node for every tick due by now, and returns when the next one is. The
    /// cluster core skips ticks this thread missed while busy (a long call, a load) or
    /// descheduled, rather than replaying them at once: that would make the failure
    /// detector accuse peers of a silence that was this node's own, while skipping only
    /// makes it wait longer, which keeps its lease promise. A primary role's lease is
    /// measured against the clock: its role gets every tick.
    fn ticks_due(&mut self, mut next_tick: Instant) -> Instant {
        let tick = self.tick;
        let now = Instant::now();
        if now >= next_tick + tick * TICKS_REPLAYED_MAX {
            let missed = now.duration_since(next_tick).as_nanos() / tick.as_nanos().max(1);
            self.node
                .catch_up_ticks(u64::try_from(missed).unwrap_or(u64::MAX));
            next_tick = now;
        }
        while now >= next_tick {
            // The node's one thread runs every group's calls: a long script holds them all.
            let long_call = self.scripts.watch().running().is_some();
            for hosted in &self.hosted {
                self.node
                    .core_mut()
                    .long_call_running(hosted.group, long_call);
            }
            let ticked = self.node.tick(&mut self.env);
            self.check(ticked);
            self.drive();
            next_tick += tick;
        }
        let core = self.node.core();
        let stuck = self
            .hosted
            .iter()
            .any(|hosted| core.is_stalled(hosted.group));
        self.env.progress.set_stuck(stuck);
        self.refresh_stats(now);
        next_tick
    }

    /// Refreshes the model's figures for `/metrics` and `INFO`, at most every
    /// [`STATS_INTERVAL`], from the role's store.
    fn refresh_stats(&mut self, now: Instant) {
        if self
            .stats_refreshed
            .is_some_and(|at| now.duration_since(at) < STATS_INTERVAL)
        {
            return;
        }
        // A primary's figures come from the model its calls run on, which also counts what
        // only it does (evictions); a backup's from the node's, over the segment it applies.
        // They are the node's first group's.
        let stats = match self.node.role(self.local_group()) {
            RoleSlot::Primary(host) => {
                let store = host.role().store();
                store.model().stats(store.segment())
            }
            // A passive backup's mirror is no database a model reads.
            RoleSlot::Backup(backup) if backup.is_passive() => return,
            RoleSlot::Backup(backup) => self.env.model.stats(backup.segment()),
            RoleSlot::Outside => return,
        };
        self.stats_refreshed = Some(now);
        self.env.metrics.set_model_stats(stats);
    }

    /// Hands the node one input, then drives it.
    fn input(&mut self, input: ToNode) {
        match input {
            ToNode::Primary {
                group,
                role_epoch,
                inbound,
            } => self.primary_input(group, role_epoch, inbound),
            ToNode::PeerAccepted { peer, connected } => {
                self.env.peers.open(peer, connected);
                self.read_peer(peer, true);
            }
            ToNode::PeerDialed { peer, result } => {
                let opened = result.is_ok();
                self.env.peers.dialed(peer, result);
                if opened {
                    self.read_peer(peer, true);
                }
            }
            ToNode::Read { group, read } => self.read(group, read),
            ToNode::Synced { group, lsn } => {
                let synced = self.node.log_synced(group, lsn, &mut self.env);
                self.check(synced);
            }
            ToNode::Loaded {
                group,
                load,
                result,
            } => {
                if load == self.env.group(group).loads_started {
                    self.node.segment_loaded(group, result, &mut self.env);
                }
            }
            ToNode::Stop => self.stopping = true,
        }
        self.drive();
    }

    pub(super) fn cluster_message(&mut self, from: NodeId, message: ClusterMessage) {
        let me = self.env.id;
        if self.env.trace && !matches!(message, ClusterMessage::Alive { .. }) {
            tracing::trace!("node {me}: from {from}: {}", brief(&message));
        }
        if let Err(err) = self.node.core_mut().step(from, message) {
            self.env.metrics.frames_rejected.inc();
            tracing::warn!("node {me}: a cluster message from node {from}: {err}");
        }
    }

    /// What a primary role's connection read. A connection of a role that has ended is
    /// answered "not primary"; a port inside the node (the RESP front end) of such a role
    /// is let go, which tells it the role is gone.
    fn primary_input(&mut self, group: GroupId, role_epoch: u64, inbound: Inbound) {
        let current = self.env.group(group).primary_epoch == Some(role_epoch);
        match inbound {
            Inbound::Calls(batch) if current => self.calls(group, batch),
            Inbound::Calls(batch) => {
                if let Some(conn) = self.env.conns.get_mut(&batch.conn) {
                    for call in &batch.calls {
                        let message = "this primary was replaced";
                        conn.out.error(call.seq, ErrorCode::NotPrimary, message);
                    }
                }
            }
            Inbound::ConnOpened {
                conn,
                out,
                unanswered,
                answer_withheld,
            } => {
                if !current && matches!(out, ConnSink::Local { .. }) {
                    return;
                }
                let out = ConnOut::new(out, unanswered, answer_withheld);
                let conn_of = Conn {
                    group,
                    role_epoch,
                    out,
                };
                self.env.conns.insert(conn, conn_of);
            }
            Inbound::ConnClosed { conn } => {
                self.env.conns.remove(&conn);
            }
            Inbound::Publication {
                shard,
                channel,
                message,
            } if current => {
                self.node
                    .relay_publication(group, shard, &channel, &message, &mut self.env);
            }
            // A message published under a role that has ended is its subscribers' alone.
            Inbound::Publication { .. } => {}
            Inbound::Control(control) => self.answer(group, control),
        }
    }

    /// A connection's calls, queued at the primary role of `group` together.
    fn calls(&mut self, group: GroupId, batch: CallBatch) {
        let started = Instant::now();
        let CallBatch {
            conn,
            client_id,
            calls,
        } = batch;
        let calls = calls.into_iter().map(|slot| WaitingCall {
            to: CallTo::Conn {
                conn,
                seq: slot.seq,
                started,
            },
            client_id,
            seq: slot.seq,
            proc_id: ProcId(slot.proc_id),
            args: slot.args,
            read_only: slot.read_only,
            safety: slot.safety,
        });
        self.node.queue_calls(group, calls, &mut self.env);
        if let Some(at) = self.hosted_at(group) {
            self.hosted[at].calls_queued = true;
        }
    }

    /// Whether the in-process driver would issue calls now (then the loop does not sleep).
    fn local_wants_calls(&self) -> bool {
        let RoleSlot::Primary(host) = self.node.role(self.local_group()) else {
            return false;
        };
        host.waiting() == 0 && self.local.as_ref().is_some_and(|local| local.wants_calls())
    }

    /// The in-process driver takes the answers released since the last pass, issues the
    /// calls it may to a primary role, and checks the database once the benchmark asks and
    /// no call of its waits.
    fn local_calls(&mut self) {
        let Some(local) = &mut self.local else {
            return;
        };
        local.answered(&mut self.env.local_answers);
        let group = self.hosted[0].group;
        let RoleSlot::Primary(host) = self.node.role(group) else {
            return;
        };
        if local.check_due() {
            let store = host.role().store();
            local.check(store.model(), store.segment());
        }
        // Calls are issued only when those before them ran (flow control holds none): a call
        // waiting in the queue would count its wait as commit latency, which the paper's
        // driver, issuing as the primary could run, never did.
        if !local.wants_calls() || host.waiting() > 0 {
            return;
        }
        let mut calls = Vec::new();
        local.issue(&mut calls);
        self.node.queue_calls(group, calls, &mut self.env);
        self.hosted[0].calls_queued = true;
    }

    /// A client's read in `group`: the backup role keeps it; anywhere else it is let go,
    /// which closes a reader's connection and answers a port's read as dropped.
    fn read(&mut self, group: GroupId, read: ReadRequest) {
        let origin = self.env.origin;
        let micros = |at: Instant| {
            u64::try_from(at.saturating_duration_since(origin).as_micros()).unwrap_or(u64::MAX)
        };
        let needs = match read.needs {
            Needs::Nothing => Needs::Nothing,
            Needs::ReadIndex => Needs::ReadIndex,
            Needs::HeardSince(at) => Needs::HeardSince(micros(at)),
        };
        let read = WaitingRead {
            seq: read.seq,
            proc_id: read.proc_id,
            min_lsn: read.min_lsn,
            args: read.args,
            deadline: micros(read.deadline),
            to: read.to,
            needs,
        };
        let kept = self.node.read(group, read, &mut self.env);
        self.check(kept.map(|_| ()));
    }

    /// Has the node's supervisor save, send and act on what its core produced.
    pub(super) fn drive(&mut self) {
        let started = Instant::now();
        let driven = self.node.drive(&mut self.disk, &mut self.env);
        match driven {
            Ok(()) => {}
            Err(DriveError::Save(err)) => {
                // The config store cannot promise what it persisted: stop, never retry.
                tracing::error!(
                    "node {}: poisoned: the config store's state cannot be persisted ({err}); \
                     the node stops",
                    self.env.id
                );
                std::process::exit(70);
            }
            Err(DriveError::Role(err)) => self.check(Err(err)),
        }
        if self.env.trace && started.elapsed() > Duration::from_micros(300) {
            tracing::trace!(
                "node {}: a step of the supervisor (saving the config store's state) took {:?}",
                self.env.id,
                started.elapsed()
            );
        }
        let released = std::mem::take(&mut self.env.replies_released);
        self.env.metrics.replies_released.inc_by(released);
    }

    /// A failure of the node's own (a batch its backup role accepted and cannot apply): the
    /// node cannot go on with a replica it cannot trust.
    pub(super) fn check(&self, result: Result<(), String>) {
        if let Err(err) = result {
            tracing::error!("node {}: poisoned: {err}; the node stops", self.env.id);
            std::process::exit(70);
        }
    }

    /// Answers a status or checksum question from the role the node holds in `group`.
    fn answer(&mut self, group: GroupId, control: Control) {
        match control {
            Control::Status(reply) => {
                let _ = reply.send(self.status(group));
            }
            Control::Checksum(reply) => {
                let _ = reply.send(self.checksum(group));
            }
        }
    }

    fn status(&self, group: GroupId) -> NodeStatus {
        let tallies = &self.env.tallies;
        let mut status = NodeStatus {
            node_id: self.env.id,
            role: "outside",
            view: self.node.view(group).map_or(0, |view| view.number),
            lsn: 0,
            lsn_applied: 0,
            pending_replies: 0,
            backups: Vec::new(),
            commits: 0,
            shipped_data_bytes: 0,
            shipped_undo_bytes: 0,
            shipped_meta_bytes: 0,
            shipped_wire_bytes: 0,
            check: None,
        };
        match self.node.role(group) {
            RoleSlot::Primary(host) => {
                let primary = host.primary();
                let lsn = host.role().store().segment().lsn();
                status.role = "primary";
                status.view = primary.view();
                status.lsn = lsn;
                status.lsn_applied = lsn;
                status.pending_replies = primary.pending_replies() as u64;
                status.backups = primary.backup_progress().collect();
                status.commits = tallies.commits;
                status.shipped_data_bytes = tallies.shipped.data;
                status.shipped_undo_bytes = tallies.shipped.undo;
                status.shipped_meta_bytes = tallies.shipped.meta;
                status.shipped_wire_bytes = tallies.wire_bytes;
            }
            RoleSlot::Backup(backup) => {
                status.role = "backup";
                status.view = backup.gate().view();
                status.lsn = backup.receiver().core().lsn_received();
                status.lsn_applied = backup.applier().lsn_applied();
            }
            RoleSlot::Outside => {}
        }
        status
    }

    fn checksum(&self, group: GroupId) -> Checksum {
        let model = &self.env.model;
        let segment = match self.node.role(group) {
            RoleSlot::Primary(host) => host.role().store().segment(),
            RoleSlot::Backup(backup) if backup.is_passive() => {
                return passive_checksum(backup.applier());
            }
            RoleSlot::Backup(backup) => backup.segment(),
            RoleSlot::Outside => {
                return Checksum {
                    lsn: 0,
                    crc32c: 0,
                    error: Some("the node holds no role".into()),
                    check: None,
                };
            }
        };
        let mut checksum = Checksum::of(segment.bytes(), segment.lsn());
        checksum.check = model.check(segment).err().map(|err| err.to_string());
        checksum
    }

    /// Publishes the roles the node holds now: each group's handle for the other threads (a
    /// new one for a new role), its figures, the links a role needs, and what `/status` and
    /// `/metrics` say.
    fn publish(&mut self) {
        for at in 0..self.hosted.len() {
            let group = self.hosted[at].group;
            let role_epoch = self.node.role_epoch(group);
            let fresh = match (&self.hosted[at].published, self.node.role(group)) {
                (Published::Outside, RoleSlot::Outside) => false,
                (Published::Primary { role_epoch: e, .. }, RoleSlot::Primary(_))
                | (Published::Backup { role_epoch: e, .. }, RoleSlot::Backup(_)) => {
                    *e != role_epoch
                }
                _ => true,
            };
            if fresh {
                self.publish_new_role(at, role_epoch);
            }
            self.publish_figures(at);
            self.keep_links(at);
        }
        self.publish_beats();
        self.publish_info();
    }

    /// A new role in the group at `at`: a new handle in its slot, and the connections of the
    /// old one let go.
    fn publish_new_role(&mut self, at: usize, role_epoch: u64) {
        let group = self.hosted[at].group;
        self.hosted[at].heard_since_role.clear();
        let (slot, published) = match self.node.role(group) {
            RoleSlot::Outside => (Slot::Outside, Published::Outside),
            RoleSlot::Primary(host) => {
                let inbound = InboundTx {
                    to_node: self.env.to_node.clone(),
                    group,
                    role_epoch,
                };
                let lsn = host.primary().lsn_committed();
                let view = host.primary().view();
                let role = crate::primary::node_role(
                    &self.env.config,
                    inbound,
                    Arc::clone(&self.env.progress),
                    Some(self.scripts.clone()),
                    Arc::clone(&self.env.conn_next),
                );
                role.view.store(view, Ordering::Release);
                role.lsn_committed.store(lsn, Ordering::Release);
                (
                    Slot::Primary(role.handle),
                    Published::Primary {
                        role_epoch,
                        view: role.view,
                        lsn_committed: role.lsn_committed,
                    },
                )
            }
            RoleSlot::Backup(backup) => {
                let rule = backup.gate();
                let gate = Gate::new(rule.view(), rule.primary());
                let lsn_applied = backup.applier().lsn_applied();
                let backup = BackupHandle::on_node(
                    &self.env.config,
                    group,
                    self.env.to_node.clone(),
                    self.controls_tx.clone(),
                    gate,
                    lsn_applied,
                );
                (
                    Slot::Backup(backup.handle),
                    Published::Backup {
                        role_epoch,
                        gate: backup.gate,
                        lsn_applied: backup.lsn_applied,
                    },
                )
            }
        };
        // A port inside the node of a role that ended is let go: it tells its front end.
        let env = &mut self.env;
        let current: Vec<(GroupId, Option<u64>)> = env
            .groups
            .iter()
            .map(|part| (part.group, part.primary_epoch))
            .collect();
        env.conns.retain(|_, conn| {
            let epoch = current.iter().find(|(of, _)| *of == conn.group);
            epoch.is_some_and(|&(_, epoch)| epoch == Some(conn.role_epoch))
                || !matches!(conn.out.sink(), ConnSink::Local { .. })
        });
        let hosted = &mut self.hosted[at];
        hosted.published = published;
        *hosted.slot.lock().expect("not poisoned") = slot;
    }

    /// Keeps the published figures of the role of the group at `at` in step with it.
    fn publish_figures(&mut self, at: usize) {
        let group = self.hosted[at].group;
        match (&self.hosted[at].published, self.node.role(group)) {
            (
                Published::Primary {
                    view,
                    lsn_committed,
                    ..
                },
                RoleSlot::Primary(host),
            ) => {
                let lsn = host.primary().lsn_committed();
                view.store(host.primary().view(), Ordering::Release);
                lsn_committed.store(lsn, Ordering::Release);
                if at == 0 {
                    publish_primary_metrics(&self.env.metrics, host.primary(), lsn);
                }
            }
            (
                Published::Backup {
                    gate, lsn_applied, ..
                },
                RoleSlot::Backup(backup),
            ) => {
                let rule = backup.gate();
                if rule.is_frozen() {
                    if !gate.is_frozen() {
                        gate.freeze();
                    }
                } else if gate.view() != rule.view()
                    || gate.is_frozen()
                    || gate.primary() != rule.primary()
                {
                    gate.set_view(rule.view(), rule.primary());
                }
                lsn_applied.store(backup.applier().lsn_applied(), Ordering::Release);
            }
            _ => {}
        }
    }

    /// Refreshes what `/status` and `/metrics` say of the node.
    fn publish_info(&mut self) {
        for at in 0..self.hosted.len() {
            self.count_alone(at);
        }
        let core = self.node.core();
        let mut info = self.info.lock().expect("not poisoned");
        for (at, hosted) in self.hosted.iter().enumerate() {
            let group = hosted.group;
            let role = match self.node.role(group) {
                RoleSlot::Outside => "outside",
                RoleSlot::Primary(_) => "primary",
                // A backup role serves a backup or a spare, as the view says.
                RoleSlot::Backup(_) => match core.member(group) {
                    Member::Spare => "spare",
                    _ => "backup",
                },
            };
            let heard = (role == "backup" || role == "spare").then(|| {
                core.ticks_since_heard_primary(group) as f64 * self.tick.as_secs_f64() * 1000.0
            });
            let place = GroupPlace {
                group,
                role,
                view: core.view(group),
                heard_primary_ms_ago: heard,
            };
            info.set_group(at, place);
        }
        self.env.metrics.set_role(info.first.role);
        if info.map.groups != core.map().groups || info.map.slots != core.map().slots {
            info.map = Arc::new(core.map().clone());
        }
        info.leader = core.leader();
        info.uptime_ms = self.started.elapsed().as_secs_f64() * 1000.0;
        info.alone_ms = self.env.metrics.primary_alone_seconds.get() * 1000.0;
    }

    /// Adds the time since the last pass to `tandem_primary_alone_seconds_total` while this
    /// node serves as primary of a view without a backup in the group at `at`.
    fn count_alone(&mut self, at: usize) {
        let now = Instant::now();
        let group = self.hosted[at].group;
        if let Some(since) = self.hosted[at].alone_since.take() {
            let alone = now.duration_since(since).as_secs_f64();
            self.env.metrics.primary_alone_seconds.inc_by(alone);
        }
        let alone = matches!(self.node.role(group), RoleSlot::Primary(_))
            && self
                .node
                .view(group)
                .is_some_and(|view| view.backups.is_empty() && !self.env.config.peers.is_empty());
        if alone {
            self.hosted[at].alone_since = Some(now);
        }
    }
}

/// The primary role's figures in `/metrics`: its committed LSN and each backup's progress.
fn publish_primary_metrics(
    metrics: &crate::metrics::Metrics,
    primary: &tandem_replication::Primary<tandem_node::Answer<CallTo>>,
    lsn: u64,
) {
    metrics.lsn_committed.set(lsn as i64);
    for (node, received, applied) in primary.backup_progress() {
        let label = crate::metrics::BackupLabel {
            backup: node.to_string(),
        };
        let lag = lsn.saturating_sub(applied) as i64;
        metrics
            .backup_lsn_received
            .get_or_create(&label)
            .set(received as i64);
        metrics
            .backup_lsn_applied
            .get_or_create(&label)
            .set(applied as i64);
        metrics.backup_lag_records.get_or_create(&label).set(lag);
    }
}

/// A passive backup's checksum: of the database its mirror recovers to (what a takeover
/// would start from), at the LSN it applied.
fn passive_checksum(applier: &tandem_node::ApplierRole) -> Checksum {
    let tandem_node::Replica::Passive { mirror, applier } = applier.replica() else {
        unreachable!("a passive backup holds a mirror");
    };
    match mirror.recover() {
        Ok(image) => Checksum::of(&image, applier.lsn_applied()),
        Err(err) => Checksum {
            lsn: applier.lsn_applied(),
            crc32c: 0,
            error: Some(format!("the mirror does not recover: {err}")),
            check: None,
        },
    }
}

/// An I/O loop, locked (the node thread holds it only between calls).
fn lock(io: &Mutex<IoLoop>) -> std::sync::MutexGuard<'_, IoLoop> {
    io.lock().expect("not poisoned")
}
