//! Warnings a client can cause, logged at most once per interval each: an attacker must not
//! be able to fill the log, yet the line that is logged says how many it stands for.

use std::time::{Duration, Instant};

/// One kind of warning's rate limit.
#[derive(Debug)]
pub struct Throttle {
    every: Duration,
    logged_at: Option<Instant>,
    held_back: u64,
}

impl Throttle {
    /// A warning logged at most once per `every`.
    pub const fn new(every: Duration) -> Throttle {
        Throttle {
            every,
            logged_at: None,
            held_back: 0,
        }
    }

    /// Whether the warning that happened at `now` is logged: `Some(n)`, with the `n`
    /// warnings held back since the last line; `None`: hold this one back.
    pub fn pass(&mut self, now: Instant) -> Option<u64> {
        let due = self
            .logged_at
            .is_none_or(|at| now.saturating_duration_since(at) >= self.every);
        if !due {
            self.held_back += 1;
            return None;
        }
        self.logged_at = Some(now);
        Some(std::mem::take(&mut self.held_back))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn logs_the_first_then_one_per_interval_counting_the_rest() {
        let mut throttle = Throttle::new(Duration::from_secs(10));
        let start = Instant::now();
        assert_eq!(throttle.pass(start), Some(0));
        assert_eq!(throttle.pass(start + Duration::from_secs(1)), None);
        assert_eq!(throttle.pass(start + Duration::from_secs(9)), None);
        assert_eq!(throttle.pass(start + Duration::from_secs(10)), Some(2));
        assert_eq!(throttle.pass(start + Duration::from_secs(11)), None);
        assert_eq!(throttle.pass(start + Duration::from_secs(30)), Some(1));
    }
}
