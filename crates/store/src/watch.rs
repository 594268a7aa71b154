//! The watch over a call that may run long (a Lua script): what the call and its node's
//! driver share so that the call can be seen from outside and stopped.
//!
//! A call runs on its role's executor (or a backup's applier) and nothing else runs there
//! until it returns. The driver must still be able to answer other clients `-BUSY`, let
//! `SCRIPT KILL` stop the call, end any call past a hard time limit, and keep its failure
//! detector from taking a long call for a stuck node. A [`CallWatch`] is the meeting point:
//!
//! - the model marks each run it watches with [`CallWatch::begin`] and [`CallWatch::end`];
//! - the driver reads [`CallWatch::running`] (which run, for how long) and asks a run to stop
//!   with [`CallWatch::request_stop`];
//! - the model polls [`CallWatch::stop_reason`] while the run goes on (a Lua count hook) and
//!   stops it, rolling back what it wrote.
//!
//! The store reads no clock: time comes from the clock the driver gave [`CallWatch::new`]
//! (the runtime's monotonic clock; the simulator's, which is a counter). A watch made with
//! [`CallWatch::unclocked`] sees no time pass, so only a requested stop ends a run.
//!
//! A driver whose clients are served by the thread the call runs on (the runtime's node
//! thread) gives the watch a way to serve them ([`CallWatch::serve_while_busy`]); the model
//! calls [`CallWatch::busy_tick`] from its hook, and the watch serves them, at most every
//! [`BUSY_SERVE_INTERVAL_US`], once the run is past its busy threshold: as Redis answers
//! `-BUSY` and takes `SCRIPT KILL` from inside a script's hook.
//!
//! Runs are numbered, so that a stop asked of one run never stops the next: the driver
//! reads a run's number before it asks, and a stop for a run that already ended is ignored.

use std::fmt;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU64, Ordering};

/// How often a run past its busy threshold lets the driver serve its clients.
pub const BUSY_SERVE_INTERVAL_US: u64 = 1_000;

/// What serves the driver's clients while a run is busy.
pub type Serve = Box<dyn Fn() + Send + Sync>;

/// A run's number, unique for the watch's life (the first is 1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(pub u64);

/// Why a run must stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StopReason {
    /// A client asked (`SCRIPT KILL`).
    Killed,
    /// The run has gone on for the watch's time limit.
    TimeLimit { limit_ms: u64 },
}

/// A run under way, as the driver sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Running {
    pub run: RunId,
    /// How long it has run, by the watch's clock.
    pub elapsed_ms: u64,
    /// After how long clients are told the node is busy with it (0: never), as the run began
    /// with it ([`CallWatch::begin`]).
    pub busy_reply_threshold_ms: u64,
}

/// What a long call and its driver share (see the module's documentation).
pub struct CallWatch {
    /// Microseconds on a monotonic clock the driver chose.
    clock_us: Box<dyn Fn() -> u64 + Send + Sync>,
    /// Runs begun so far: the last run's number.
    runs: AtomicU64,
    /// The number of the run under way, 0 if none.
    running: AtomicU64,
    /// When the run under way began, by the clock.
    started_us: AtomicU64,
    /// The number of the run a client asked to stop, 0 if none.
    stop_requested: AtomicU64,
    /// The number of the last run told to stop ([`CallWatch::stop_reason`] said why), 0 if
    /// none.
    stopped_last: AtomicU64,
    /// The busy threshold of the run under way ([`Running::busy_reply_threshold_ms`]).
    busy_reply_threshold_ms: AtomicU64,
    /// The busy threshold of a run whose call has none of its own (the driver's setting).
    busy_reply_threshold_default_ms: u64,
    /// A run that goes on this long is stopped; 0: no limit.
    time_limit_ms: u64,
    /// Serves the driver's clients while a run is busy, if the driver needs it.
    serve_while_busy: OnceLock<Serve>,
    /// When the clients were last served during the run under way, by the clock.
    busy_served_us: AtomicU64,
}

impl fmt::Debug for CallWatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallWatch")
            .field("runs", &self.runs.load(Ordering::Relaxed))
            .field("running", &self.running.load(Ordering::Relaxed))
            .field("time_limit_ms", &self.time_limit_ms)
            .finish()
    }
}

impl CallWatch {
    /// A watch on `clock_us` (monotonic microseconds) that stops any run that lasts
    /// `time_limit_ms` (0: none).
    pub fn new(clock_us: Box<dyn Fn() -> u64 + Send + Sync>, time_limit_ms: u64) -> CallWatch {
        CallWatch {
            clock_us,
            runs: AtomicU64::new(0),
            running: AtomicU64::new(0),
            started_us: AtomicU64::new(0),
            stop_requested: AtomicU64::new(0),
            stopped_last: AtomicU64::new(0),
            busy_reply_threshold_ms: AtomicU64::new(0),
            busy_reply_threshold_default_ms: 0,
            time_limit_ms,
            serve_while_busy: OnceLock::new(),
            busy_served_us: AtomicU64::new(0),
        }
    }

    /// Gives the watch what serves the driver's clients while a run is past its busy
    /// threshold (see the module); false if it already had one.
    pub fn serve_while_busy(&self, serve: Serve) -> bool {
        self.serve_while_busy.set(serve).is_ok()
    }

    /// The model's hook: serves the driver's clients if a run is under way past its busy
    /// threshold and they were not served within [`BUSY_SERVE_INTERVAL_US`]. A threshold of
    /// 0 (never busy) serves them from the run's start.
    pub fn busy_tick(&self) {
        let Some(serve) = self.serve_while_busy.get() else {
            return;
        };
        let Some(running) = self.running() else {
            return;
        };
        if running.elapsed_ms < running.busy_reply_threshold_ms {
            return;
        }
        let now_us = self.now_us();
        let served_us = self.busy_served_us.load(Ordering::Relaxed);
        if now_us.saturating_sub(served_us) < BUSY_SERVE_INTERVAL_US {
            return;
        }
        self.busy_served_us.store(now_us, Ordering::Relaxed);
        serve();
    }

    /// The watch with `ms` as the busy threshold of a run that brings none (0: never busy).
    pub fn with_busy_reply_threshold_ms(mut self, ms: u64) -> CallWatch {
        self.busy_reply_threshold_default_ms = ms;
        self
    }

    /// The busy threshold of a run that brings none.
    pub fn busy_reply_threshold_default_ms(&self) -> u64 {
        self.busy_reply_threshold_default_ms
    }

    /// The number of the last run begun (0 before the first): a caller that reads it before
    /// a call asks [`CallWatch::stopped_since`] after it.
    pub fn runs(&self) -> RunId {
        RunId(self.runs.load(Ordering::Relaxed))
    }

    /// Whether a run begun after `mark` (a [`CallWatch::runs`] reading) was told to stop:
    /// the call that made it was killed or ran out of time, not failed by its own doing.
    pub fn stopped_since(&self, mark: RunId) -> bool {
        self.stopped_last.load(Ordering::Relaxed) > mark.0
    }

    /// A watch that sees no time pass: only [`CallWatch::request_stop`] stops a run.
    pub fn unclocked() -> CallWatch {
        CallWatch::new(Box::new(|| 0), 0)
    }

    /// The clock's reading, in microseconds.
    pub fn now_us(&self) -> u64 {
        (self.clock_us)()
    }

    /// The time limit in milliseconds (0: none).
    pub fn time_limit_ms(&self) -> u64 {
        self.time_limit_ms
    }

    /// A run begins (calls are serial: the run before it ended).
    /// `busy_reply_threshold_ms`: after how long the driver tells other clients the node is
    /// busy with it (`None`: the watch's default).
    pub fn begin(&self, busy_reply_threshold_ms: Option<u64>) -> RunId {
        let run = self.runs.fetch_add(1, Ordering::Relaxed) + 1;
        self.started_us.store(self.now_us(), Ordering::Relaxed);
        let busy_ms = busy_reply_threshold_ms.unwrap_or(self.busy_reply_threshold_default_ms);
        self.busy_reply_threshold_ms
            .store(busy_ms, Ordering::Relaxed);
        // Release: a driver that reads the number reads the start time stored before it.
        self.running.store(run, Ordering::Release);
        RunId(run)
    }

    /// Run `run` ended.
    pub fn end(&self, run: RunId) {
        let ended = self
            .running
            .compare_exchange(run.0, 0, Ordering::Release, Ordering::Relaxed);
        assert!(
            ended.is_ok(),
            "run {} ended, but it was not under way",
            run.0
        );
    }

    /// The run under way, if any, and how long it has run.
    pub fn running(&self) -> Option<Running> {
        let run = self.running.load(Ordering::Acquire);
        if run == 0 {
            return None;
        }
        let started_us = self.started_us.load(Ordering::Relaxed);
        let elapsed_ms = self.now_us().saturating_sub(started_us) / 1000;
        let busy_reply_threshold_ms = self.busy_reply_threshold_ms.load(Ordering::Relaxed);
        // The run may have ended (and another begun) since: the number read first is the
        // one the caller acts on, and a stop asked of an ended run is ignored.
        Some(Running {
            run: RunId(run),
            elapsed_ms,
            busy_reply_threshold_ms,
        })
    }

    /// Asks run `run` to stop; true if it was still under way when asked.
    pub fn request_stop(&self, run: RunId) -> bool {
        self.stop_requested.store(run.0, Ordering::Relaxed);
        self.running.load(Ordering::Acquire) == run.0
    }

    /// Why run `run` must stop now, if it must (never, once it ended). A run told a reason
    /// counts as stopped for [`CallWatch::stopped_since`].
    pub fn stop_reason(&self, run: RunId) -> Option<StopReason> {
        let reason = self.reason(run);
        if reason.is_some() {
            self.stopped_last.fetch_max(run.0, Ordering::Relaxed);
        }
        reason
    }

    fn reason(&self, run: RunId) -> Option<StopReason> {
        if self.running.load(Ordering::Acquire) != run.0 {
            return None;
        }
        if self.stop_requested.load(Ordering::Relaxed) == run.0 {
            return Some(StopReason::Killed);
        }
        if self.time_limit_ms == 0 {
            return None;
        }
        let elapsed_us = self
            .now_us()
            .saturating_sub(self.started_us.load(Ordering::Relaxed));
        (elapsed_us >= self.time_limit_ms * 1000).then_some(StopReason::TimeLimit {
            limit_ms: self.time_limit_ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    fn clocked(limit_ms: u64) -> (Arc<AtomicU64>, CallWatch) {
        let now = Arc::new(AtomicU64::new(0));
        let clock = now.clone();
        let watch = CallWatch::new(Box::new(move || clock.load(Ordering::Relaxed)), limit_ms);
        (now, watch)
    }

    #[test]
    fn a_run_is_seen_while_under_way_and_not_after() {
        let (now, watch) = clocked(0);
        assert_eq!(watch.running(), None);
        now.store(5_000, Ordering::Relaxed);
        let run = watch.begin(None);
        now.store(12_999, Ordering::Relaxed);
        let running = Running {
            run,
            elapsed_ms: 7,
            busy_reply_threshold_ms: 0,
        };
        assert_eq!(watch.running(), Some(running));
        watch.end(run);
        assert_eq!(watch.running(), None);
    }

    /// A run brings its own busy threshold, or takes the watch's.
    #[test]
    fn a_run_keeps_the_busy_threshold_it_began_with() {
        let watch = CallWatch::unclocked().with_busy_reply_threshold_ms(5000);
        let run = watch.begin(None);
        assert_eq!(watch.running().unwrap().busy_reply_threshold_ms, 5000);
        watch.end(run);
        let run = watch.begin(Some(10));
        assert_eq!(watch.running().unwrap().busy_reply_threshold_ms, 10);
        watch.end(run);
    }

    #[test]
    fn a_stop_reaches_the_run_asked_and_no_later_one() {
        let watch = CallWatch::unclocked();
        let first = watch.begin(None);
        assert_eq!(watch.stop_reason(first), None);
        assert!(watch.request_stop(first));
        assert_eq!(watch.stop_reason(first), Some(StopReason::Killed));
        watch.end(first);
        // Asked again after it ended: nothing is under way, and the next run is not stopped.
        assert!(!watch.request_stop(first));
        let second = watch.begin(None);
        assert_ne!(first, second);
        assert_eq!(watch.stop_reason(second), None);
        watch.end(second);
    }

    #[test]
    fn a_caller_learns_whether_a_run_since_its_mark_was_stopped() {
        let watch = CallWatch::unclocked();
        let mark = watch.runs();
        let run = watch.begin(None);
        assert_eq!(watch.stop_reason(run), None);
        watch.end(run);
        assert!(!watch.stopped_since(mark), "a run that ended by itself");
        let mark = watch.runs();
        let run = watch.begin(None);
        watch.request_stop(run);
        assert_eq!(watch.stop_reason(run), Some(StopReason::Killed));
        watch.end(run);
        assert!(watch.stopped_since(mark));
        // The next call's mark is past the stopped run.
        let mark = watch.runs();
        let run = watch.begin(None);
        watch.end(run);
        assert!(!watch.stopped_since(mark));
    }

    #[test]
    fn the_time_limit_stops_a_run_at_the_limit_and_not_before() {
        let (now, watch) = clocked(30);
        let run = watch.begin(None);
        now.store(29_999, Ordering::Relaxed);
        assert_eq!(watch.stop_reason(run), None);
        now.store(30_000, Ordering::Relaxed);
        assert_eq!(
            watch.stop_reason(run),
            Some(StopReason::TimeLimit { limit_ms: 30 })
        );
        watch.end(run);
    }

    #[test]
    fn an_unclocked_watch_never_times_a_run_out() {
        let watch = CallWatch::unclocked();
        let run = watch.begin(None);
        assert_eq!(watch.stop_reason(run), None);
        assert_eq!(watch.running().map(|running| running.elapsed_ms), Some(0));
        watch.end(run);
    }

    #[test]
    #[should_panic(expected = "not under way")]
    fn ending_a_run_twice_is_a_bug() {
        let watch = CallWatch::unclocked();
        let run = watch.begin(None);
        watch.end(run);
        watch.end(run);
    }
}
