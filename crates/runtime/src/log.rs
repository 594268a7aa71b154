//! The node's write-ahead log thread: it runs the node core's `tandem_node::LogCore` (what
//! each order appends, where the log ends when a role starts, when it syncs, what a sync is
//! worth) on the file system, and tells the current role what it synced.
//!
//! One log per node, outliving its roles: a backup promoted to primary goes on appending to
//! the log that holds what it received. Group commit: the thread takes every order queued
//! while the last sync ran and syncs them together, so under load many batches share one
//! `fdatasync`.
//!
//! **Lingering.** Having carried orders out, the thread waits [`LINGER`] for more before it
//! sleeps until woken, and orders given meanwhile do not wake it: a node under load orders
//! something every pass, and a wake-up per pass cost a context switch on both sides. An order
//! someone waits for ([`Input::urgent`]: a `durable` reply's sync, an align, a drain) wakes
//! it at once whatever it is doing.
//!
//! The thread only moves orders in, reads the clock for the `every:MS` policy, and hands
//! syncs out: to the primary role (`Primary::log_synced`) or, on a backup, to the
//! primary as a `Message::durable_ack`.
//!
//! **Poisoning.** An I/O error on the log poisons it: the thread stops, says why (an error in
//! the node's log), and reports nothing durable ever again, so no `durable` reply leaves on
//! its account. A failed sync is never retried (see tandem-wal). Restart the node.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

use tandem_node::{Aligned, LogCore, LogOrder};
use tandem_redo::SealedBatch;
use tandem_wal::{FsDisk, Recovered, WalOptions};

use crate::StartError;
use crate::config::{LogSettings, NodeConfig};
use crate::metrics::Metrics;

/// Who hears what the log synced: the current role (a primary's commits, a backup's ack).
pub type SyncListener = Box<dyn Fn(u64) + Send>;

/// What the roles ask of the log thread.
enum Input {
    Order(LogOrder),
    /// Make the log end at `lsn` (a role starts on a segment at that LSN); `id` names the
    /// ceiling it lifts once done.
    Align {
        lsn: u64,
        id: u64,
    },
    /// Before a rejoin's rewind to `lsn`: cut the log there, and answer where the member
    /// should rewind to (`LogCore::align_rejoin`).
    AlignRejoin {
        lsn: u64,
        answer: mpsc::SyncSender<u64>,
    },
    /// Write and sync everything ordered before this, then say so (a node that stops).
    Drain(mpsc::SyncSender<()>),
}

impl Input {
    /// Whether someone waits for this order: it wakes a lingering thread at once.
    fn urgent(&self) -> bool {
        match self {
            Input::Order(order) => matches!(order, LogOrder::SyncWanted { .. }),
            Input::Align { .. } | Input::AlignRejoin { .. } | Input::Drain(_) => true,
        }
    }
}

/// How long the log thread, having carried orders out, waits for more before it sleeps
/// until an order wakes it. Orders given meanwhile wait for it rather than wake it, unless
/// urgent: under load a node orders something every pass, so this is how long a batch can
/// wait to be written (a `durable` reply's sync does not wait; see [`Input::urgent`]).
pub const LINGER: Duration = Duration::from_millis(1);

/// Where the log thread is, as its inbox sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Thread {
    /// Carrying orders out: it looks at the inbox again before it waits.
    Working,
    /// Waiting up to [`LINGER`] after work: only an urgent order wakes it.
    Lingering,
    /// Waiting until woken (or the sync policy's next sync).
    Asleep,
    /// Stopped (poisoned): orders are dropped.
    Gone,
}

/// The orders queued for the log thread and what it is doing.
struct Queue {
    inputs: VecDeque<Input>,
    thread: Thread,
    /// Every handle is gone: the thread syncs what it holds and stops.
    closed: bool,
}

/// The log thread's inbox: the roles push, the thread takes everything at once.
struct Inbox {
    queue: Mutex<Queue>,
    woken: Condvar,
}

impl Inbox {
    /// An empty inbox of a thread that is `thread`.
    fn new(thread: Thread) -> Inbox {
        Inbox {
            queue: Mutex::new(Queue {
                inputs: VecDeque::new(),
                thread,
                closed: false,
            }),
            woken: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Queue> {
        self.queue.lock().expect("not poisoned")
    }

    /// Queues `input`, waking the thread if it sleeps, or lingers and the input is urgent;
    /// false if the thread is gone.
    fn push(&self, input: Input) -> bool {
        let urgent = input.urgent();
        let mut queue = self.lock();
        let wake = match queue.thread {
            Thread::Gone => return false,
            Thread::Working => false,
            Thread::Lingering => urgent,
            Thread::Asleep => true,
        };
        queue.inputs.push_back(input);
        if wake {
            // Woken once: later pushes find it working.
            queue.thread = Thread::Working;
            drop(queue);
            self.woken.notify_one();
        }
        true
    }
}

/// What every handle shares: when the last goes, the inbox closes.
struct Sender(Arc<Inbox>);

impl Drop for Sender {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.woken.notify_one();
    }
}

/// State the log thread shares with the roles.
struct Shared {
    /// What is synced and anchored (0 while not anchored, or once poisoned).
    lsn_durable: AtomicU64,
    /// While an align is queued, (its id, its LSN): nothing above that LSN is reported
    /// durable until the log thread carried it out, so a new role never claims records a
    /// view change discarded but the log still holds. Published values change under it.
    ceiling: Mutex<Option<(u64, u64)>>,
    /// The id of the next align.
    align_next: AtomicU64,
    listener: Mutex<Option<SyncListener>>,
    poisoned: Mutex<Option<String>>,
    /// The initial load's LSN, and the batch bytes a backup applies between checkpoints.
    lsn_load: u64,
    checkpoint_bytes: u64,
    /// The log is not anchored and would like a checkpoint (`LogCore::wants_checkpoint`).
    checkpoint_wanted: AtomicBool,
}

/// The handle roles hold: cheap to clone; every method returns at once but
/// [`NodeLog::align_rejoin`], which waits for the log thread. The thread lives as long as
/// the node's process, or until the log is poisoned.
#[derive(Clone)]
pub struct NodeLog {
    inputs: Arc<Sender>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for NodeLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NodeLog")
            .field("lsn_durable", &self.lsn_durable())
            .field("poisoned", &self.poisoned())
            .finish()
    }
}

impl NodeLog {
    /// Opens (recovering) the log in `settings.dir` and starts its thread. `lsn_load` is the
    /// LSN of the node's initial load: a log whose history starts there is anchored.
    pub fn open(
        settings: &LogSettings,
        node: u32,
        lsn_load: u64,
        metrics: Arc<Metrics>,
    ) -> Result<(NodeLog, Recovered), String> {
        let options = WalOptions {
            segment_bytes_max: settings.segment_bytes_max,
            ..WalOptions::default()
        };
        let (core, recovered) =
            LogCore::open(FsDisk, &settings.dir, options, settings.fsync, lsn_load).map_err(
                |err| format!("cannot open the log in {}: {err}", settings.dir.display()),
            )?;
        if let Some(stop) = &recovered.stop {
            tracing::warn!(
                "node {node}: the log in {} ended early ({stop:?}); cut {} bytes and removed \
                 {} files after the last whole batch",
                settings.dir.display(),
                recovered.bytes_cut,
                recovered.files_removed
            );
        }
        let shared = Arc::new(Shared {
            lsn_durable: AtomicU64::new(core.lsn_durable()),
            ceiling: Mutex::new(None),
            align_next: AtomicU64::new(1),
            listener: Mutex::new(None),
            poisoned: Mutex::new(None),
            lsn_load,
            checkpoint_bytes: settings.checkpoint_bytes,
            checkpoint_wanted: AtomicBool::new(core.wants_checkpoint()),
        });
        let inbox = Arc::new(Inbox::new(Thread::Working));
        let inputs = Arc::new(Sender(Arc::clone(&inbox)));
        let state = LogThread {
            node,
            core,
            shared: Arc::clone(&shared),
            last_sync: Instant::now(),
            metrics,
        };
        thread::Builder::new()
            .name("log".into())
            .spawn(move || state.run(inbox))
            .map_err(|err| format!("cannot start the log thread: {err}"))?;
        Ok((NodeLog { inputs, shared }, recovered))
    }

    /// Writes and syncs everything ordered so far, waiting at most `timeout`; false if the
    /// log thread did not finish within it (or is gone).
    pub fn drain(&self, timeout: Duration) -> bool {
        let (done, finished) = mpsc::sync_channel(1);
        self.send(Input::Drain(done)) && finished.recv_timeout(timeout).is_ok()
    }

    /// A backup's checkpoint schedule for this log: the batch bytes between checkpoints, and
    /// the initial load's LSN (a checkpoint holds only the pages changed after it).
    pub fn checkpoints(&self) -> (u64, u64) {
        (self.shared.checkpoint_bytes, self.shared.lsn_load)
    }

    /// Whether the log would like a checkpoint now (it reports nothing durable until one
    /// anchors it).
    pub fn checkpoint_wanted(&self) -> bool {
        self.shared.checkpoint_wanted.load(Ordering::Relaxed)
    }

    /// Hands the log an order; it is carried out after every order given before it.
    pub fn order(&self, order: LogOrder) {
        // A stopped thread (poisoned, or the node is stopping) takes nothing: no harm, since
        // it reports nothing durable either.
        let _ = self.send(Input::Order(order));
    }

    /// Queues `input` for the log thread; false if the thread is gone.
    fn send(&self, input: Input) -> bool {
        self.inputs.0.push(input)
    }

    /// Hands the log the batches a primary sealed.
    pub fn batches(&self, batches: impl IntoIterator<Item = SealedBatch>) {
        for batch in batches {
            let lsn_from = batch.lsn_base();
            self.order(LogOrder::Batch { batch, lsn_from });
        }
    }

    /// Makes the log end at `lsn`, the LSN of the segment a role starts on, before anything
    /// the role appends (orders are carried out in the order given): records above it are
    /// cut (a view change discarded them), durably; a log that ends below it cannot hold
    /// the role's records contiguously and starts again, unanchored (see `LogCore::align`).
    ///
    /// It does not wait: a role must not start later for a sync the log thread is in. From
    /// now until the thread has carried it out, nothing above `lsn` is reported durable.
    pub fn align(&self, lsn: u64) {
        let id = self.shared.align_next.fetch_add(1, Ordering::Relaxed);
        {
            let mut ceiling = self.shared.ceiling.lock().expect("not poisoned");
            *ceiling = Some((id, lsn));
            self.shared.lsn_durable.fetch_min(lsn, Ordering::AcqRel);
        }
        let _ = self.send(Input::Align { lsn, id });
    }

    /// Before a member rewinds to `lsn` to rejoin: where its log lets it rewind to, `lsn` or
    /// less (see `LogCore::align_rejoin`). Waits for the log thread: a rejoin is not on a
    /// failover's path (the new primary already serves), and the rewind depends on it.
    pub fn align_rejoin(&self, lsn: u64) -> u64 {
        let (answer, answered) = mpsc::sync_channel(1);
        if !self.send(Input::AlignRejoin { lsn, answer }) {
            return lsn;
        }
        answered.recv().unwrap_or(lsn)
    }

    /// Sets who hears each sync from now on (`None`: nobody); it is told the durable LSN at
    /// once if there is one.
    pub fn listen(&self, listener: Option<SyncListener>) {
        let lsn = self.lsn_durable();
        let mut slot = self.shared.listener.lock().expect("not poisoned");
        if let Some(listener) = &listener
            && lsn > 0
        {
            listener(lsn);
        }
        *slot = listener;
    }

    /// Every record up to here is on disk and a restart could rebuild it (0: nothing).
    pub fn lsn_durable(&self) -> u64 {
        self.shared.lsn_durable.load(Ordering::Acquire)
    }

    /// Why the log stopped taking records, if it did.
    pub fn poisoned(&self) -> Option<String> {
        self.shared.poisoned.lock().expect("not poisoned").clone()
    }
}

struct LogThread {
    node: u32,
    core: LogCore<FsDisk>,
    shared: Arc<Shared>,
    last_sync: Instant,
    metrics: Arc<Metrics>,
}

impl LogThread {
    fn run(mut self, inbox: Arc<Inbox>) {
        let mut lingering = false;
        loop {
            let (mut inputs, mut closed) = self.next_inputs(&inbox, lingering);
            lingering = !inputs.is_empty();
            // Group commit: everything queued while the last sync ran goes into this one.
            while !inputs.is_empty() {
                for input in inputs {
                    if let Err(cause) = self.carry_out(input) {
                        inbox.lock().thread = Thread::Gone;
                        self.poison(cause);
                        return;
                    }
                }
                let mut queue = inbox.lock();
                inputs = std::mem::take(&mut queue.inputs);
                closed = queue.closed;
            }
            let ms_since = self.last_sync.elapsed().as_millis() as u64;
            // With every handle gone, the thread syncs what it holds, whatever the policy.
            let due = (closed && self.core.unsynced()) || self.core.sync_due(ms_since);
            let done = if due {
                self.sync()
            } else {
                self.core.write().map_err(|err| err.to_string())
            };
            if let Err(cause) = done {
                inbox.lock().thread = Thread::Gone;
                self.poison(cause);
                return;
            }
            if closed {
                return;
            }
        }
    }

    /// Waits for orders (after work, lingering: see [`LINGER`]) and takes every one queued;
    /// also whether the inbox is closed.
    fn next_inputs(&self, inbox: &Inbox, lingering: bool) -> (VecDeque<Input>, bool) {
        let policy_wait = self.wait();
        let mut queue = inbox.lock();
        if queue.inputs.is_empty() && !queue.closed {
            let (thread, timeout) = if lingering {
                let linger = policy_wait.map_or(LINGER, |wait| wait.min(LINGER));
                (Thread::Lingering, Some(linger))
            } else {
                (Thread::Asleep, policy_wait)
            };
            queue.thread = thread;
            queue = match timeout {
                None => inbox.woken.wait(queue).expect("not poisoned"),
                Some(timeout) => {
                    inbox
                        .woken
                        .wait_timeout(queue, timeout)
                        .expect("not poisoned")
                        .0
                }
            };
        }
        queue.thread = Thread::Working;
        (std::mem::take(&mut queue.inputs), queue.closed)
    }

    /// Carries out one input; an error poisons the log.
    fn carry_out(&mut self, input: Input) -> Result<(), String> {
        match input {
            Input::Order(order) => {
                let finishing = matches!(order, LogOrder::CheckpointFinish { .. });
                let carried = self.core.carry_out(order).map_err(|e| e.to_string());
                if finishing && carried.is_ok() {
                    self.checkpointed();
                }
                carried
            }
            Input::Align { lsn, id } => self.align(lsn, id),
            Input::Drain(done) => {
                let synced = self.sync();
                let _ = done.send(());
                synced
            }
            Input::AlignRejoin { lsn, answer } => match self.core.align_rejoin(lsn) {
                Ok(kept) => {
                    let _ = answer.send(kept);
                    self.publish();
                    Ok(())
                }
                Err(err) => {
                    let _ = answer.send(lsn);
                    Err(err.to_string())
                }
            },
        }
    }

    /// How long to wait for the next order: until the policy's next sync is due, or for
    /// good when nothing waits to be synced.
    fn wait(&self) -> Option<Duration> {
        let ms_since = self.last_sync.elapsed().as_millis() as u64;
        self.core
            .ms_until_sync_due(ms_since)
            .map(Duration::from_millis)
    }

    fn align(&mut self, lsn: u64, id: u64) -> Result<(), String> {
        let aligned = self.core.align(lsn).map_err(|err| err.to_string())?;
        match aligned {
            Aligned::AsItWas => {}
            Aligned::Cut { lsn_end_before } => tracing::info!(
                "node {}: cut the log from LSN {lsn_end_before} back to the segment's {lsn}",
                self.node
            ),
            Aligned::Restarted { lsn_end_before } => tracing::info!(
                "node {}: the log ended at LSN {lsn_end_before} and cannot continue to the \
                 segment's {lsn}; it starts again, reporting nothing durable until a \
                 checkpoint anchors it",
                self.node
            ),
        }
        {
            // The last align queued lifts the ceiling; an earlier one leaves a later's.
            let mut ceiling = self.shared.ceiling.lock().expect("not poisoned");
            if ceiling.is_some_and(|(queued, _)| queued == id) {
                *ceiling = None;
            }
        }
        self.publish();
        Ok(())
    }

    /// A checkpoint is durable and the log dropped the segments it covers: the log may be
    /// anchored again, so what is durable is published at once.
    fn checkpointed(&self) {
        if let Some(lsn) = self.core.lsn_checkpoint() {
            tracing::info!(
                "node {}: checkpoint at LSN {lsn} written; the log keeps only what follows it",
                self.node
            );
        }
        self.publish();
    }

    fn sync(&mut self) -> Result<(), String> {
        let started = Instant::now();
        self.core.sync().map_err(|err| err.to_string())?;
        self.last_sync = Instant::now();
        self.metrics.log_syncs.inc();
        self.metrics
            .log_sync_seconds
            .observe((self.last_sync - started).as_secs_f64());
        self.publish();
        Ok(())
    }

    /// Tells the roles what is durable now.
    fn publish(&self) {
        let before;
        let lsn;
        {
            let ceiling = self.shared.ceiling.lock().expect("not poisoned");
            lsn = ceiling.map_or(self.core.lsn_durable(), |(_, lsn_max)| {
                self.core.lsn_durable().min(lsn_max)
            });
            before = self.shared.lsn_durable.swap(lsn, Ordering::AcqRel);
        }
        self.metrics.log_lsn_durable.set(lsn as i64);
        self.shared
            .checkpoint_wanted
            .store(self.core.wants_checkpoint(), Ordering::Relaxed);
        if lsn > before
            && let Some(listener) = &*self.shared.listener.lock().expect("not poisoned")
        {
            listener(lsn);
        }
    }

    fn poison(&self, cause: String) {
        tracing::error!(
            "node {}: the write-ahead log failed and takes nothing more; nothing further is \
             acknowledged as durable. Restart the node to recover from what is on disk. \
             Cause: {cause}",
            self.node
        );
        self.shared.lsn_durable.store(0, Ordering::Release);
        self.metrics.log_lsn_durable.set(0);
        *self.shared.poisoned.lock().expect("not poisoned") = Some(cause);
    }
}

/// Opens the write-ahead log `config` asks for, if any (see [`NodeLog::open`]), with what
/// it recovered; in the subdirectory `group_dir` of the configured one, if given (a group's
/// own log, where a node serves in several).
pub fn open_configured(
    config: &NodeConfig,
    group_dir: Option<String>,
    lsn_load: u64,
    metrics: &Arc<Metrics>,
) -> Result<Option<(NodeLog, Recovered)>, StartError> {
    let Some(mut settings) = config.log_settings() else {
        return Ok(None);
    };
    if let Some(group_dir) = group_dir {
        settings.dir = settings.dir.join(group_dir);
    }
    let (log, recovered) = NodeLog::open(&settings, config.node_id, lsn_load, Arc::clone(metrics))
        .map_err(StartError::Log)?;
    if let Some(base) = recovered.lsn_base() {
        tracing::info!(
            "node {}: the log in {} holds {} entries after LSN {base}",
            config.node_id,
            settings.dir.display(),
            recovered.entries.len()
        );
    }
    Ok(Some((log, recovered)))
}

#[cfg(test)]
mod tests {
    use tandem_node::SyncPolicy;

    use super::*;

    fn batch_at(lsn: u64) -> SealedBatch {
        let mut builder = tandem_redo::BatchBuilder::new(tandem_redo::BatchKind::Redo, 0, 1, lsn);
        let mut record = tandem_memory::RedoRecord::empty(lsn);
        record.push_run(lsn * 8, &[lsn as u8; 8]).unwrap();
        let call = tandem_redo::CallId {
            client_id: 1,
            seq: lsn,
        };
        builder.push_redo(call, &record);
        builder.seal()
    }

    /// A lingering thread is woken by an order someone waits for, and by nothing else; a
    /// sleeping one by any order; a working one by none (it looks again before it waits).
    #[test]
    fn only_an_urgent_order_wakes_a_lingering_log_thread() {
        let batch = || Input::Order(LogOrder::Cut { lsn: 1 });
        let sync = || Input::Order(LogOrder::SyncWanted { lsn: 1 });
        let cases = [
            (Thread::Lingering, batch(), Thread::Lingering),
            (Thread::Lingering, sync(), Thread::Working),
            (
                Thread::Lingering,
                Input::Align { lsn: 1, id: 1 },
                Thread::Working,
            ),
            (Thread::Asleep, batch(), Thread::Working),
            (Thread::Working, sync(), Thread::Working),
        ];
        for (before, input, after) in cases {
            let inbox = Inbox::new(before);
            assert!(inbox.push(input), "a live thread takes orders");
            let queue = inbox.lock();
            assert_eq!(
                queue.thread, after,
                "an order to a thread that was {before:?}"
            );
            assert_eq!(queue.inputs.len(), 1);
        }
        let gone = Inbox::new(Thread::Gone);
        assert!(!gone.push(batch()), "a stopped thread takes nothing");
        assert!(gone.lock().inputs.is_empty(), "nor keeps it");
    }

    /// Orders given while the thread lingers are carried out: batches ordered one by one,
    /// with no urgent order among them, all become durable under `always`.
    #[test]
    fn orders_given_while_the_log_thread_lingers_are_carried_out() {
        let dir = std::env::temp_dir().join(format!("tandem-log-linger-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = LogSettings {
            dir: dir.clone(),
            fsync: SyncPolicy::Always,
            segment_bytes_max: 1 << 20,
            checkpoint_bytes: 1 << 30,
        };
        let metrics = Arc::new(Metrics::new(1, "backup"));
        let (log, _) = NodeLog::open(&settings, 1, 0, metrics).expect("the log opens");
        for lsn in 1..=200 {
            log.order(LogOrder::Batch {
                batch: batch_at(lsn),
                lsn_from: lsn,
            });
            if lsn % 20 == 0 {
                std::thread::sleep(Duration::from_micros(300));
            }
        }
        // A liveness bound, not a speed one: the thread must get there at all.
        let deadline = Instant::now() + Duration::from_secs(60);
        while log.lsn_durable() < 200 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(log.lsn_durable(), 200, "every batch ordered is durable");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A stopping node drains its log: every batch ordered before is synced, though the
    /// log's own schedule would not have synced it for an hour.
    #[test]
    fn a_drain_syncs_every_batch_ordered_before_it() {
        let dir = std::env::temp_dir().join(format!("tandem-log-drain-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let settings = LogSettings {
            dir: dir.clone(),
            fsync: SyncPolicy::EveryMs(3_600_000),
            segment_bytes_max: 1 << 20,
            checkpoint_bytes: 1 << 30,
        };
        let metrics = Arc::new(Metrics::new(1, "backup"));
        let (log, _) = NodeLog::open(&settings, 1, 0, metrics).expect("the log opens");
        for lsn in 1..=50 {
            log.order(LogOrder::Batch {
                batch: batch_at(lsn),
                lsn_from: lsn,
            });
        }
        // No deadline (`Duration::MAX` waits for the answer): the test asserts what the
        // drain leaves durable, not how fast.
        assert!(log.drain(Duration::MAX), "the drain answers");
        assert_eq!(log.lsn_durable(), 50);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
