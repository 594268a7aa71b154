//! The node's side of its watch over long calls (scripts): the clock the watch reads, what
//! the RESP front end tells its clients while a script runs, and `SCRIPT KILL`.
//!
//! The data model marks each script run on the node's [`CallWatch`] and stops one the watch
//! says must stop (the model's count hook polls it). Here the node gives the watch its
//! clock, reads whether a script has run past its busy threshold (the front end then answers
//! other clients `-BUSY`, as Redis does: the database's `busy-reply-threshold` if `CONFIG
//! SET` gave it one, else `tuning.busy_reply_threshold_ms`), asks the run to stop on `SCRIPT
//! KILL`, and says whether one runs (the cluster core counts a script within its time limit
//! as progress, not a stuck executor: `Cluster::long_call_running`).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use tandem_redis::session::ScriptActivity;
use tandem_store::{CallWatch, DataModel};

use crate::config::Tuning;

/// Microseconds since the process first asked: the monotonic clock every watch reads.
fn clock_us() -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    let epoch = *EPOCH.get_or_init(Instant::now);
    u64::try_from(epoch.elapsed().as_micros()).unwrap_or(u64::MAX)
}

/// The node's watch over its scripts.
#[derive(Debug, Clone)]
pub struct Scripts {
    watch: Arc<CallWatch>,
}

impl Scripts {
    /// A watch on the runtime's clock, with `tuning`'s limits.
    pub fn new(tuning: &Tuning) -> Scripts {
        Scripts::with_clock(tuning, Box::new(clock_us))
    }

    /// A watch on `clock_us` (monotonic microseconds), with `tuning`'s limits.
    pub fn with_clock(tuning: &Tuning, clock_us: Box<dyn Fn() -> u64 + Send + Sync>) -> Scripts {
        let watch = CallWatch::new(clock_us, tuning.script_time_limit_ms)
            .with_busy_reply_threshold_ms(tuning.busy_reply_threshold_ms);
        Scripts {
            watch: Arc::new(watch),
        }
    }

    /// The watch `model`'s long calls run under, if it has one (a role finds the node's
    /// watch this way: each role's model is a replica of the node's, and shares its watch).
    pub fn of(model: &dyn DataModel) -> Option<Scripts> {
        model.call_watch().map(|watch| Scripts { watch })
    }

    /// The watch the data model's scripts run under.
    pub fn watch(&self) -> &Arc<CallWatch> {
        &self.watch
    }

    /// Whether a script runs now, and whether it has run past the busy threshold.
    pub fn activity(&self) -> ScriptActivity {
        match self.watch.running() {
            None => ScriptActivity::Idle,
            Some(running)
                if running.busy_reply_threshold_ms > 0
                    && running.elapsed_ms >= running.busy_reply_threshold_ms =>
            {
                ScriptActivity::Busy
            }
            Some(_) => ScriptActivity::Running,
        }
    }

    /// `SCRIPT KILL`: asks the script running now to stop (it rolls back what it wrote).
    /// False if none runs by the time it is asked.
    pub fn kill(&self) -> bool {
        self.watch
            .running()
            .is_some_and(|running| self.watch.request_stop(running.run))
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU64, Ordering};

    use super::*;

    /// Scripts on a clock the test moves, in milliseconds.
    fn scripts(busy_ms: u64, limit_ms: u64) -> (Arc<AtomicU64>, Scripts) {
        let tuning = Tuning {
            busy_reply_threshold_ms: busy_ms,
            script_time_limit_ms: limit_ms,
            ..Tuning::default()
        };
        let now_ms = Arc::new(AtomicU64::new(0));
        let clock = now_ms.clone();
        let scripts = Scripts::with_clock(
            &tuning,
            Box::new(move || clock.load(Ordering::Relaxed) * 1000),
        );
        (now_ms, scripts)
    }

    #[test]
    fn a_script_is_running_then_busy_then_gone() {
        let (now_ms, scripts) = scripts(5000, 0);
        assert_eq!(scripts.activity(), ScriptActivity::Idle);
        let run = scripts.watch().begin(None);
        now_ms.store(4999, Ordering::Relaxed);
        assert_eq!(scripts.activity(), ScriptActivity::Running);
        now_ms.store(5000, Ordering::Relaxed);
        assert_eq!(scripts.activity(), ScriptActivity::Busy);
        scripts.watch().end(run);
        assert_eq!(scripts.activity(), ScriptActivity::Idle);
    }

    #[test]
    fn kill_stops_the_run_under_way_and_only_it() {
        let (_, scripts) = scripts(5000, 0);
        assert!(!scripts.kill(), "nothing runs");
        let run = scripts.watch().begin(None);
        assert!(scripts.kill());
        assert_eq!(
            scripts.watch().stop_reason(run),
            Some(tandem_store::StopReason::Killed)
        );
        scripts.watch().end(run);
        let next = scripts.watch().begin(None);
        assert_eq!(scripts.watch().stop_reason(next), None);
        scripts.watch().end(next);
    }

    #[test]
    fn a_zero_threshold_never_answers_busy() {
        let (now_ms, scripts) = scripts(0, 0);
        let run = scripts.watch().begin(None);
        now_ms.store(1 << 40, Ordering::Relaxed);
        assert_eq!(scripts.activity(), ScriptActivity::Running);
        scripts.watch().end(run);
    }

    /// A run the database gave a threshold (`CONFIG SET busy-reply-threshold`) is busy by
    /// that one, not the node's configuration's.
    #[test]
    fn a_run_brings_the_databases_threshold() {
        let (now_ms, scripts) = scripts(5000, 0);
        let run = scripts.watch().begin(Some(10));
        now_ms.store(10, Ordering::Relaxed);
        assert_eq!(scripts.activity(), ScriptActivity::Busy);
        scripts.watch().end(run);
        let run = scripts.watch().begin(Some(0));
        now_ms.store(1 << 40, Ordering::Relaxed);
        assert_eq!(scripts.activity(), ScriptActivity::Running);
        scripts.watch().end(run);
    }
}
