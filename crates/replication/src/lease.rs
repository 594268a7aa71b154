//! The primary's share of its backups' lease promise (DESIGN.md, "Fencing and leases"): the
//! one computation of the lease margin, which the runtime and the simulator both use.
//!
//! A backup promises to report for a new view only `promise_ticks` of its own ticks after it
//! last heard the primary. The primary counts its lease from the tick at which it sent the
//! heartbeat a backup echoed, in its own ticks, and must stop releasing replies that need the
//! lease before any backup can have reported. Three things eat into the promise:
//! - the backup notices a frame only at a tick boundary, so it may count from up to
//!   `notice_ticks` after the frame arrived;
//! - a reply the primary releases may leave `send_ticks` later (the end of an executor's
//!   turn);
//! - the two clocks may run at different speeds: a primary tick may last `period_max` while a
//!   backup tick lasts only `period_min`.
//!
//! A lease of ℓ primary ticks ends, in real time, within ℓ · `period_max` of the heartbeat it
//! counts from, and the reply leaves `send_ticks` primary ticks after that at most; the
//! backup reports no earlier than (`promise_ticks` − `notice_ticks`) · `period_min` after the
//! heartbeat arrived (and so after it was sent). So
//! (ℓ + `send_ticks`) · `period_max` ≤ (`promise_ticks` − `notice_ticks`) · `period_min`.

/// What the lease must allow for, besides the promise itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseMargins {
    /// Ticks a backup may take to notice a frame that arrived.
    pub notice_ticks: u64,
    /// Primary ticks between releasing a reply and its leaving the node.
    pub send_ticks: u64,
    /// The shortest and longest tick of any node, in any common unit.
    pub period_min: u64,
    pub period_max: u64,
}

impl LeaseMargins {
    /// Clocks that run at the same speed.
    pub fn same_clocks(notice_ticks: u64, send_ticks: u64) -> LeaseMargins {
        LeaseMargins {
            notice_ticks,
            send_ticks,
            period_min: 1,
            period_max: 1,
        }
    }
}

/// The longest lease, in primary ticks, that ends before a backup that promised
/// `promise_ticks` can report; `None` if the margins leave none.
pub fn primary_lease_ticks(promise_ticks: u64, margins: LeaseMargins) -> Option<u64> {
    assert!(margins.period_min >= 1, "a tick lasts some time");
    assert!(
        margins.period_min <= margins.period_max,
        "the shortest tick is not the longest"
    );
    let backup_span = promise_ticks.checked_sub(margins.notice_ticks)? * margins.period_min;
    let primary_ticks = backup_span / margins.period_max;
    let lease_ticks = primary_ticks.checked_sub(margins.send_ticks)?;
    #[cfg(feature = "inject-bugs")]
    if tandem_memory::bugs::planted(tandem_memory::bugs::Bug::LeaseMarginOffByOne) {
        return Some(lease_ticks + 1);
    }
    (lease_ticks >= 1).then_some(lease_ticks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_keeps_two_ticks_of_the_promise() {
        let runtime = LeaseMargins::same_clocks(1, 1);
        assert_eq!(primary_lease_ticks(4, runtime), Some(2));
        assert_eq!(primary_lease_ticks(3, runtime), Some(1));
        assert_eq!(primary_lease_ticks(2, runtime), None);
    }

    #[test]
    fn a_slower_primary_clock_shortens_the_lease() {
        let drift = LeaseMargins {
            notice_ticks: 1,
            send_ticks: 0,
            period_min: 900,
            period_max: 1_100,
        };
        // (ℓ + 0) · 1100 ≤ (10 − 1) · 900 = 8100: ℓ = 7 (7700 fits, 8800 does not).
        assert_eq!(primary_lease_ticks(10, drift), Some(7));
        let send = LeaseMargins {
            send_ticks: 2,
            ..drift
        };
        assert_eq!(primary_lease_ticks(10, send), Some(5));
    }
}
