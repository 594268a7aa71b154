//! A node's write-ahead log, as its roles see it: what each role hands the log, when the log
//! syncs, and what a sync is worth to the primary.
//!
//! Every member appends the records it holds (the primary the batches it seals, a backup the
//! batches it accepts and the state transfers it installs) to one log that outlives its roles
//! (crates/wal stores it). The driver (the runtime's log thread, the simulator's disk) carries
//! out the [`LogOrder`]s in the order given and syncs when [`SyncPolicy::due`] says; what it
//! synced goes back to the primary role (`Primary::log_synced`) or, on a backup, to the
//! primary as a `Message::durable_ack`. The `durable` rule releases a reply once the primary and k
//! backups synced its record.

use std::fmt;
use std::str::FromStr;

use tandem_log::SealedBatch;
use tandem_replication::transfer::PageImage;

/// What a role hands the log, in the order the log must hold it.
#[derive(Clone, Debug)]
pub enum LogOrder {
    /// A batch the node holds from `lsn_from` on (earlier records of it were held already: a
    /// backup accepted a batch that overlapped what it had).
    Batch { batch: SealedBatch, lsn_from: u64 },
    /// A state transfer installed: the segment went from the image's `lsn_from` to its `lsn`
    /// by pages, not records.
    Image(PageImage),
    /// The node's segment was rewound to `lsn` (a view change discarded the records above
    /// it): the log must end there before anything else is appended.
    Cut { lsn: u64 },
}

/// When a node syncs its log for rules other than `durable` (`fsync` in the node's config).
/// A `durable` record is synced as soon as one waits, whatever the policy: the policy says
/// how much a power loss may take of what the other rules acknowledged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SyncPolicy {
    /// Sync every group of appends as it is written (group commit: one sync for all the
    /// batches that arrived while the last one ran).
    Always,
    /// Sync at most every `ms` milliseconds; a power loss takes at most that much.
    EveryMs(u32),
    /// Leave it to the operating system: a crash of the process loses nothing written, a
    /// power loss may take anything not synced for a `durable` record.
    Never,
}

impl SyncPolicy {
    /// Whether the log should sync now: it holds appends not yet synced (`unsynced`), a
    /// `durable` record waits for them (`durable_waiting`), or the policy's interval has
    /// passed since the last sync (`ms_since_sync`).
    pub fn due(self, unsynced: bool, durable_waiting: bool, ms_since_sync: u64) -> bool {
        if !unsynced {
            return false;
        }
        match self {
            SyncPolicy::Always => true,
            SyncPolicy::EveryMs(ms) => durable_waiting || ms_since_sync >= u64::from(ms),
            SyncPolicy::Never => durable_waiting,
        }
    }
}

impl fmt::Display for SyncPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SyncPolicy::Always => f.write_str("always"),
            SyncPolicy::EveryMs(ms) => write!(f, "every:{ms}"),
            SyncPolicy::Never => f.write_str("never"),
        }
    }
}

/// A `fsync` setting that is not one of the accepted forms.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown fsync '{0}'; accepted: always, every:MS (1 to 60000), never")]
pub struct SyncPolicyError(pub String);

impl FromStr for SyncPolicy {
    type Err = SyncPolicyError;

    fn from_str(text: &str) -> Result<SyncPolicy, SyncPolicyError> {
        let unknown = || SyncPolicyError(text.to_owned());
        match text.split_once(':') {
            None if text == "always" => Ok(SyncPolicy::Always),
            None if text == "never" => Ok(SyncPolicy::Never),
            Some(("every", ms)) => match ms.parse::<u32>() {
                Ok(ms @ 1..=60_000) => Ok(SyncPolicy::EveryMs(ms)),
                _ => Err(unknown()),
            },
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fsync_settings_round_trip_and_bad_ones_say_what_is_accepted() {
        for text in ["always", "every:1", "every:250", "never"] {
            let policy: SyncPolicy = text.parse().unwrap();
            assert_eq!(policy.to_string(), text);
        }
        for text in [
            "",
            "sometimes",
            "every",
            "every:0",
            "every:x",
            "every:60001",
            "never:1",
        ] {
            let err = text.parse::<SyncPolicy>().unwrap_err();
            assert!(err.to_string().contains("accepted"), "{text}: {err}");
        }
    }

    #[test]
    fn a_durable_record_waiting_syncs_under_every_policy() {
        for policy in [
            SyncPolicy::Always,
            SyncPolicy::EveryMs(1000),
            SyncPolicy::Never,
        ] {
            assert!(policy.due(true, true, 0), "{policy}");
            assert!(!policy.due(false, true, 5000), "{policy}: nothing to sync");
        }
        assert!(SyncPolicy::Always.due(true, false, 0));
        assert!(!SyncPolicy::EveryMs(10).due(true, false, 9));
        assert!(SyncPolicy::EveryMs(10).due(true, false, 10));
        assert!(!SyncPolicy::Never.due(true, false, u64::MAX));
    }
}
