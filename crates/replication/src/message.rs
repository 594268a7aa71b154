//! What replicas say to each other, and when a reply may be released.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

/// A node of the cluster.
pub type NodeId = u32;

/// A message between the primary and one backup of a group.
///
/// Every message carries the sender's view number, so a node that moved on can tell a stale
/// sender so (fencing). Messages between two nodes travel over one FIFO link; the protocol
/// still tolerates loss, duplication and reordering (a reconnect, the simulator).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Message {
    /// Primary → backup: a sealed batch's wire bytes, verified by the receiver before use.
    Batch(Arc<[u8]>),
    /// Primary → backup, every `heartbeat_ticks`: what has been shipped so far, the highest
    /// LSN a reply was released for (`lsn_released`: state a backup may show a reader), and
    /// the primary's tick when it sent this (`tick_sent`), which the backup echoes to renew
    /// the primary's lease.
    Heartbeat {
        view: u64,
        lsn_committed: u64,
        lsn_released: u64,
        tick_sent: u64,
    },
    /// Primary → backup: the primary's process runs and its executor made progress lately.
    /// Sent by the link itself when the executor gave it nothing for a heartbeat's interval
    /// (a long call, a checksum), so that a busy primary is not taken for a dead one. It
    /// renews no lease and says nothing of LSNs; the backup answers with an ack, so that
    /// the primary keeps hearing its backups too.
    Pulse { view: u64 },
    /// Backup → primary: every record up to `lsn_received` is held, up to `lsn_applied`
    /// applied, up to `lsn_durable` synced to its write-ahead log (`lsn_applied` and
    /// `lsn_durable` are at most `lsn_received`). Also the backup's introduction when it
    /// connects. `tick_echoed` is the `tick_sent` of the newest heartbeat it accepted in this
    /// view (0: none yet): the backup heard the primary no earlier than that, so its lease
    /// promise runs from there.
    Ack {
        view: u64,
        lsn_received: u64,
        lsn_applied: u64,
        lsn_durable: u64,
        tick_echoed: u64,
    },
    /// Backup → primary: a batch was missing or corrupt; send again everything after
    /// `lsn_received`.
    Nack { view: u64, lsn_received: u64 },
    /// Either way: the sender's view is older than `view`, which the receiver knows.
    StaleView { view: u64 },
    /// Primary → member: one chunk of a state transfer.
    Pages(PagesChunk),
    /// Member → primary, instead of an Ack: the introduction of a member that kept its
    /// segment through a view change that discarded some of its records (a deposed primary,
    /// a node that stood by). It holds the group's history at `lsn_received` except on
    /// `pages` (ascending), which those records changed: it needs a state transfer of the
    /// pages changed after `lsn_received` and of these, before any batch. At most
    /// [`DIVERGED_PAGES_MAX`] pages; a member with more reloads instead.
    Diverged {
        view: u64,
        lsn_received: u64,
        pages: Arc<[u32]>,
    },
    /// Member → primary: which LSN must a linearizable read wait for? Asked for the reads
    /// that reached the member before it sent this; `id` (from 1, rising per member) names
    /// the question in the answer.
    ReadIndex { view: u64, id: u64 },
    /// Primary → backup: a `durable` reply waits for records up to `lsn` to be synced to the
    /// backup's write-ahead log: sync now, whatever the node's own `fsync` schedule.
    SyncWanted { view: u64, lsn: u64 },
    /// Primary → member: the answer to `ReadIndex` `id`: when the primary took the question,
    /// its lease held and it had released replies up to `lsn_released` and none beyond, so
    /// every write acknowledged before the question was asked lies at or below it.
    ReadIndexed {
        view: u64,
        id: u64,
        lsn_released: u64,
    },
}

/// The most diverged pages a [`Message::Diverged`] names: 256 KiB of page numbers, no more
/// than one chunk of a state transfer carries.
pub const DIVERGED_PAGES_MAX: usize = 64 * 1024;

/// A state transfer's chunk `index` of `count`: pages changed after `lsn_from`, as they stood
/// at `lsn` (see [`crate::transfer`]), with their CRC32C.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PagesChunk {
    pub view: u64,
    pub lsn_from: u64,
    pub lsn: u64,
    pub index: u32,
    pub count: u32,
    pub crc: u32,
    pub pages: Arc<[u8]>,
}

impl Message {
    /// The ack a backup's write-ahead log sends the primary of `view` once it synced every
    /// record up to `lsn_durable`, without waiting for the receiver's next message. It claims
    /// no more than it knows: the records up to `lsn_durable` are held (so received), and
    /// applied up to what the applier reached. The primary keeps the highest of each claim,
    /// and the lease's echo rides on the receiver's own acks (0 here: none is echoed).
    pub fn durable_ack(view: u64, lsn_durable: u64, lsn_applied: u64) -> Message {
        Message::Ack {
            view,
            lsn_received: lsn_durable,
            lsn_applied: lsn_applied.min(lsn_durable),
            lsn_durable,
            tick_echoed: 0,
        }
    }

    /// The view a message was sent in (a batch's sits in its header).
    pub fn view(&self) -> Option<u64> {
        match *self {
            Message::Batch(_) => None,
            Message::Heartbeat { view, .. }
            | Message::Pulse { view }
            | Message::Ack { view, .. }
            | Message::Nack { view, .. }
            | Message::StaleView { view }
            | Message::Pages(PagesChunk { view, .. })
            | Message::Diverged { view, .. }
            | Message::ReadIndex { view, .. }
            | Message::SyncWanted { view, .. }
            | Message::ReadIndexed { view, .. } => Some(view),
        }
    }
}

/// How many backups must hold a record before a 2-safe reply is released.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AckCount {
    /// Every backup of the view (the default).
    All,
    /// At least this many, ≥ 1.
    Of(u32),
}

impl AckCount {
    /// How many of `backups` backups must hold a record: k, or every backup there is when
    /// failures left fewer than k.
    pub fn needed(self, backups: usize) -> usize {
        match self {
            AckCount::All => backups,
            AckCount::Of(k) => (k as usize).min(backups),
        }
    }
}

/// When a commit may be acknowledged (DESIGN.md, safety rules).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Safety {
    /// At local commit.
    OneSafe,
    /// At local commit, but no more than `n` records may lack a backup's receipt: the
    /// executor stops taking commits at that point, so a failover loses at most `n`.
    Bounded(u64),
    /// Once the backups have received the record.
    TwoSafe(AckCount),
    /// Once the backups have applied the record.
    TwoSafeApplied(AckCount),
    /// Once the primary and the backups have synced the record to their write-ahead logs, so
    /// that it survives every node losing power at once.
    Durable(AckCount),
}

impl Safety {
    /// The default: received by every backup.
    pub const DEFAULT: Safety = Safety::TwoSafe(AckCount::All);

    /// How many backups must hold a record before its reply leaves; `None` for a rule that
    /// releases at the local commit (1-safe, bounded).
    pub fn backup_acks(self) -> Option<AckCount> {
        match self {
            Safety::OneSafe | Safety::Bounded(_) => None,
            Safety::TwoSafe(acks) | Safety::TwoSafeApplied(acks) | Safety::Durable(acks) => {
                Some(acks)
            }
        }
    }

    /// Checks the rule in itself, whatever the group: a zero bound or a zero ack count is
    /// never meaningful. (A view may hold fewer backups than k after failures; the primary
    /// then waits for every backup there is.)
    pub fn validate_form(self) -> Result<(), SafetyError> {
        self.validate(usize::MAX)
    }

    /// Checks the rule against a group with `backups` backups: a count larger than the group
    /// could never be met.
    pub fn validate(self, backups: usize) -> Result<(), SafetyError> {
        match self {
            Safety::Bounded(0) => Err(SafetyError::BoundedZero),
            Safety::TwoSafe(AckCount::Of(k))
            | Safety::TwoSafeApplied(AckCount::Of(k))
            | Safety::Durable(AckCount::Of(k)) => {
                if k == 0 {
                    Err(SafetyError::ZeroAcks)
                } else if backups == 0 {
                    Err(SafetyError::NoBackups { k })
                } else if k as usize > backups {
                    Err(SafetyError::TooManyAcks { k, backups })
                } else {
                    Ok(())
                }
            }
            _ => Ok(()),
        }
    }
}

impl fmt::Display for Safety {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Safety::OneSafe => f.write_str("1-safe"),
            Safety::Bounded(n) => write!(f, "bounded:{n}"),
            Safety::TwoSafe(AckCount::All) => f.write_str("2-safe"),
            Safety::TwoSafe(AckCount::Of(k)) => write!(f, "2-safe:{k}"),
            Safety::TwoSafeApplied(AckCount::All) => f.write_str("2-safe-applied"),
            Safety::TwoSafeApplied(AckCount::Of(k)) => write!(f, "2-safe-applied:{k}"),
            Safety::Durable(AckCount::All) => f.write_str("durable"),
            Safety::Durable(AckCount::Of(k)) => write!(f, "durable:{k}"),
        }
    }
}

/// A safety rule that is malformed or cannot be met.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SafetyError {
    #[error(
        "unknown safety '{0}'; accepted: 1-safe, bounded:N, 2-safe, 2-safe:K, 2-safe-applied, \
         2-safe-applied:K, durable, durable:K"
    )]
    Unknown(String),
    #[error("bounded:0 would stop every commit; use 2-safe, or bounded:N with N ≥ 1")]
    BoundedZero,
    #[error("an ack count of 0 is 1-safe; write 1-safe, or give K ≥ 1")]
    ZeroAcks,
    #[error(
        "a rule with {k} backup acks cannot be met by a group without backups; use 1-safe, or \
         the rule without a count (all backups, none here)"
    )]
    NoBackups { k: u32 },
    #[error(
        "a rule with {k} backup acks cannot be met by a group of {backups} backups; use \
         K ≤ {backups}"
    )]
    TooManyAcks { k: u32, backups: usize },
}

impl FromStr for Safety {
    type Err = SafetyError;

    fn from_str(text: &str) -> Result<Safety, SafetyError> {
        let unknown = || SafetyError::Unknown(text.to_owned());
        let (name, count) = match text.split_once(':') {
            Some((name, count)) => (name, Some(count.parse::<u64>().map_err(|_| unknown())?)),
            None => (text, None),
        };
        let acks = |count: Option<u64>| match count {
            None => Ok(AckCount::All),
            Some(0) => Err(SafetyError::ZeroAcks),
            Some(k) => u32::try_from(k).map(AckCount::Of).map_err(|_| unknown()),
        };
        let safety = match name {
            "1-safe" if count.is_none() => Safety::OneSafe,
            "bounded" => match count {
                Some(0) => return Err(SafetyError::BoundedZero),
                Some(n) => Safety::Bounded(n),
                None => return Err(unknown()),
            },
            "2-safe" => Safety::TwoSafe(acks(count)?),
            "2-safe-applied" => Safety::TwoSafeApplied(acks(count)?),
            "durable" => Safety::Durable(acks(count)?),
            _ => return Err(unknown()),
        };
        Ok(safety)
    }
}

/// What a read served by a backup promises about the state it shows (DESIGN.md, "Versioned
/// reads"). Every mode shows only state the primary released, which no view change discards,
/// and never older state than the reader's own `min_lsn`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum ReadConsistency {
    /// The read reflects every write acknowledged, to any client, before it started: the
    /// backup asks the primary for its released LSN after the read arrived (one round trip,
    /// shared by the reads that arrived meanwhile) and waits until it has applied it.
    #[default]
    Linearizable,
    /// Read-your-writes and monotonic reads for one client: only the client's `min_lsn`.
    Session,
    /// The read reflects every write the primary had released `staleness_ms` before it
    /// arrived at the backup (plus the time the primary's last word took to arrive): the
    /// backup serves at once while it heard the primary that recently, and waits for the
    /// next heartbeat otherwise.
    Bounded { staleness_ms: u32 },
}

impl fmt::Display for ReadConsistency {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReadConsistency::Linearizable => f.write_str("linearizable"),
            ReadConsistency::Session => f.write_str("session"),
            ReadConsistency::Bounded { staleness_ms } => write!(f, "bounded:{staleness_ms}"),
        }
    }
}

/// A read consistency name that is not one.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown read consistency '{0}'; accepted: linearizable, session, bounded:MS (MS from 1 \
     to 4294967295 milliseconds)"
)]
pub struct ReadConsistencyError(pub String);

impl FromStr for ReadConsistency {
    type Err = ReadConsistencyError;

    fn from_str(text: &str) -> Result<ReadConsistency, ReadConsistencyError> {
        let unknown = || ReadConsistencyError(text.to_owned());
        match text.split_once(':') {
            None if text == "linearizable" => Ok(ReadConsistency::Linearizable),
            None if text == "session" => Ok(ReadConsistency::Session),
            Some(("bounded", ms)) => match ms.parse::<u32>() {
                Ok(0) | Err(_) => Err(unknown()),
                Ok(staleness_ms) => Ok(ReadConsistency::Bounded { staleness_ms }),
            },
            _ => Err(unknown()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn safety_names_round_trip() {
        for text in [
            "1-safe",
            "bounded:5",
            "2-safe",
            "2-safe:1",
            "2-safe-applied",
            "2-safe-applied:2",
            "durable",
            "durable:1",
        ] {
            let safety: Safety = text.parse().unwrap();
            assert_eq!(safety.to_string(), text);
        }
    }

    #[test]
    fn bad_safety_names_say_what_is_accepted() {
        for text in [
            "",
            "3-safe",
            "bounded",
            "bounded:x",
            "1-safe:2",
            "2-safe:",
            "durable:x",
        ] {
            let err = text.parse::<Safety>().unwrap_err();
            assert!(err.to_string().contains("accepted"), "{text}: {err}");
        }
        assert_eq!("bounded:0".parse::<Safety>(), Err(SafetyError::BoundedZero));
        assert_eq!("2-safe:0".parse::<Safety>(), Err(SafetyError::ZeroAcks));
        assert_eq!(
            Safety::TwoSafe(AckCount::Of(3)).validate(2),
            Err(SafetyError::TooManyAcks { k: 3, backups: 2 })
        );
        assert_eq!(Safety::DEFAULT.validate(0), Ok(()));
    }

    #[test]
    fn read_consistency_names_round_trip_and_bad_ones_say_what_is_accepted() {
        for text in ["linearizable", "session", "bounded:1", "bounded:250"] {
            let consistency: ReadConsistency = text.parse().unwrap();
            assert_eq!(consistency.to_string(), text);
        }
        for text in [
            "",
            "strong",
            "bounded",
            "bounded:0",
            "bounded:-1",
            "session:3",
        ] {
            let err = text.parse::<ReadConsistency>().unwrap_err();
            assert!(err.to_string().contains("accepted"), "{text}: {err}");
        }
    }
}
