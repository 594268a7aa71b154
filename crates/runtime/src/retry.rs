//! The pace of a peer connection's attempts to reach a peer, and what it says about them:
//! fast for the first milliseconds (a failover makes peers refuse for about that long, and
//! its speed depends on retrying at once), then backing off; the first failure, then at most
//! one summary per interval, and the reconnection are said, never a line per attempt.

use std::time::{Duration, Instant};

use crate::net::ConnError;

/// Attempts at the fastest pace: 20 × 500 µs covers the 10 ms a failover takes.
const RETRY_FAST_ATTEMPTS: u64 = 20;
pub(crate) const RETRY_FAST_PAUSE: Duration = Duration::from_micros(500);
/// After the fast attempts, the pause doubles from `RETRY_PAUSE_MIN` up to `RETRY_PAUSE_MAX`:
/// a node that comes back after a long absence is reached within 20 ms, so it rejoins in
/// milliseconds (an attempt costs a refused connect, and what floods a log is a line per
/// attempt, which `Retry` no longer says).
const RETRY_PAUSE_MIN: Duration = Duration::from_millis(1);
const RETRY_PAUSE_MAX: Duration = Duration::from_millis(20);
/// A link that keeps failing says so at most once per this interval.
const RETRY_SUMMARY_INTERVAL: Duration = Duration::from_secs(5);

/// What a link says about a failed attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RetrySay {
    Nothing,
    /// The first failure since the link last connected (or started).
    FirstFailure,
    /// A summary: `attempts` failed in a row so far.
    StillFailing {
        attempts: u64,
    },
}

/// The pace of a link's reconnection attempts and what it says about them. Time is handed in,
/// so the schedule is a pure function of the attempts and the instants they failed at.
#[derive(Debug, Default)]
pub(crate) struct Retry {
    /// Attempts failed since the link last connected.
    failures: u64,
    /// The pause before the next attempt, once past the fast ones.
    pause: Option<Duration>,
    /// When the last line about the failures was said.
    said_at: Option<Instant>,
}

impl Retry {
    /// An attempt failed at `now`: how long to pause before the next, and what to say.
    pub(crate) fn failed(&mut self, now: Instant) -> (Duration, RetrySay) {
        self.failures += 1;
        let said = match self.said_at {
            None => RetrySay::FirstFailure,
            Some(at) if now.duration_since(at) >= RETRY_SUMMARY_INTERVAL => {
                RetrySay::StillFailing {
                    attempts: self.failures,
                }
            }
            Some(_) => RetrySay::Nothing,
        };
        if said != RetrySay::Nothing {
            self.said_at = Some(now);
        }
        if self.failures <= RETRY_FAST_ATTEMPTS {
            return (RETRY_FAST_PAUSE, said);
        }
        let pause = self
            .pause
            .map_or(RETRY_PAUSE_MIN, |pause| (pause * 2).min(RETRY_PAUSE_MAX));
        self.pause = Some(pause);
        (pause, said)
    }

    /// The link connected: the attempts it took, if a failure was said (so the reconnection
    /// is said too), and a fresh start for the next failure.
    pub(crate) fn connected(&mut self) -> Option<u64> {
        let attempts = self.said_at.map(|_| self.failures + 1);
        *self = Retry::default();
        attempts
    }
}

/// Why an attempt failed, in words: an I/O error's kind ("connection refused") rather than
/// its errno.
pub(crate) fn error_words(err: &ConnError) -> String {
    match err {
        ConnError::Io(io) => io.kind().to_string(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_link_that_keeps_failing_says_so_once_then_a_summary_per_interval() {
        let mut retry = Retry::default();
        let start = Instant::now();
        let mut said = Vec::new();
        let mut pauses = Vec::new();
        let mut now = start;
        // 94 attempts over 12 s of (simulated) time.
        for _ in 0..94 {
            let (pause, say) = retry.failed(now);
            pauses.push(pause);
            if say != RetrySay::Nothing {
                said.push((now.duration_since(start), say));
            }
            now += Duration::from_millis(130);
        }
        assert_eq!(said[0], (Duration::ZERO, RetrySay::FirstFailure));
        assert_eq!(said.len(), 3, "first failure and two summaries: {said:?}");
        for pair in said.windows(2) {
            assert!(pair[1].0 - pair[0].0 >= RETRY_SUMMARY_INTERVAL, "{said:?}");
        }
        assert!(matches!(said[1].1, RetrySay::StillFailing { attempts } if attempts > 1));
        // Fast for a failover's first 10 ms, then doubling from 1 ms up to the cap.
        assert!(pauses[..20].iter().all(|&pause| pause == RETRY_FAST_PAUSE));
        assert_eq!(pauses[20..24], [1, 2, 4, 8].map(Duration::from_millis));
        assert_eq!(*pauses.last().unwrap(), RETRY_PAUSE_MAX);
        assert!(pauses.iter().all(|&pause| pause <= RETRY_PAUSE_MAX));

        // The reconnection is said with the attempts it took, and the next failure is a first
        // failure again, retried fast.
        assert_eq!(retry.connected(), Some(95));
        assert_eq!(
            retry.failed(now),
            (RETRY_FAST_PAUSE, RetrySay::FirstFailure)
        );
    }

    #[test]
    fn a_link_that_connects_at_once_says_nothing() {
        let mut retry = Retry::default();
        assert_eq!(retry.connected(), None);
    }

    #[test]
    fn an_io_error_is_said_without_its_errno() {
        let refused = ConnError::Io(std::io::Error::from_raw_os_error(111));
        assert_eq!(error_words(&refused), "connection refused");
    }
}
