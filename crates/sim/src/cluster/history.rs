//! What each node's records hold, as the Redis model's reply checker needs it: for every LSN
//! above the loaded database, which client call ran there (or the primary's expiry sweep)
//! and at what time. The records themselves carry the call but not the time, and a state
//! transfer carries no records at all, so the simulator keeps this beside each segment as a
//! ghost: a primary writes an entry for each commit it makes, and the entries travel with
//! the bytes — a backup takes those of the batches it applies (from the registry of what each
//! sealed batch held) and those of a transfer it installs (from the registry of what the
//! sender's segment held), a rewind drops them with the records, a reload starts empty.
//!
//! Each entry also fingerprints the whole history up to it (`chain`), so that an answer a
//! primary gave at some LSN can be matched with the final history: if the fingerprints at
//! that LSN differ, the answer came from a history a failover discarded.

use tandem_redo::CallId;

/// What ran at one LSN.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct HistoryEntry {
    /// The client call; client 0 is the primary's expiry sweep.
    pub call: CallId,
    /// The primary's clock when it ran, Unix ms.
    pub time_ms: u64,
    /// A fingerprint of every entry up to this one.
    pub chain: u64,
}

impl HistoryEntry {
    /// The entry that follows a history whose fingerprint is `chain`.
    fn after(chain: u64, call: CallId, time_ms: u64) -> HistoryEntry {
        let mut hash = chain;
        for word in [call.client_id, call.seq, time_ms] {
            // SplitMix64's finaliser over each word in turn: not cryptographic, but two
            // different histories of a run agree by chance only with odds of 2^-64.
            hash = (hash ^ word).wrapping_add(0x9e37_79b9_7f4a_7c15);
            hash = (hash ^ (hash >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            hash = (hash ^ (hash >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            hash ^= hash >> 31;
        }
        HistoryEntry {
            call,
            time_ms,
            chain: hash,
        }
    }
}

/// The entries of one segment's records, from the loaded database's LSN on.
#[derive(Clone, Debug)]
pub(super) struct History {
    /// The loaded database's LSN: the first entry is for the LSN after it.
    lsn_loaded: u64,
    entries: Vec<HistoryEntry>,
    /// How many entries the segment holds: fewer than `entries` after a rewind, whose
    /// records a promotion may take back (`ApplierRole::handover` undoes the rewind).
    held: usize,
}

impl History {
    /// The history of a freshly loaded segment.
    pub fn new(lsn_loaded: u64) -> History {
        History {
            lsn_loaded,
            entries: Vec::new(),
            held: 0,
        }
    }

    /// The LSN of the last record the segment holds.
    pub fn lsn(&self) -> u64 {
        self.lsn_loaded + self.held as u64
    }

    /// The fingerprint of the history up to `lsn` (0 for the loaded database).
    pub fn chain_at(&self, lsn: u64) -> u64 {
        assert!(
            (self.lsn_loaded..=self.lsn()).contains(&lsn),
            "LSN {lsn} is outside the history ({}..={})",
            self.lsn_loaded,
            self.lsn()
        );
        match lsn - self.lsn_loaded {
            0 => 0,
            index => self.entries[index as usize - 1].chain,
        }
    }

    /// The entries the segment holds, oldest first.
    pub fn entries(&self) -> &[HistoryEntry] {
        &self.entries[..self.held]
    }

    /// The entries for `lsn_from..=lsn_to`, which the segment holds.
    pub fn range(&self, lsn_from: u64, lsn_to: u64) -> &[HistoryEntry] {
        assert!(
            self.lsn_loaded < lsn_from && lsn_from <= lsn_to && lsn_to <= self.lsn(),
            "LSNs {lsn_from}..={lsn_to} are outside the history ({}..={})",
            self.lsn_loaded,
            self.lsn()
        );
        let first = (lsn_from - self.lsn_loaded - 1) as usize;
        &self.entries[first..first + (lsn_to - lsn_from + 1) as usize]
    }

    /// The primary committed `call` (or its sweep) at the next LSN, at `time_ms`.
    pub fn push(&mut self, call: CallId, time_ms: u64) {
        let chain = self.chain_at(self.lsn());
        self.entries.truncate(self.held);
        self.entries.push(HistoryEntry::after(chain, call, time_ms));
        self.held += 1;
    }

    /// The segment applied records that continue it with `entries` (another node's, which
    /// it sent). False if they do not continue this history: the records were written on
    /// top of another state than the one this segment holds.
    pub fn extend(&mut self, entries: &[HistoryEntry]) -> bool {
        let Some(first) = entries.first() else {
            return true;
        };
        let chain = self.chain_at(self.lsn());
        if HistoryEntry::after(chain, first.call, first.time_ms) != *first {
            return false;
        }
        self.entries.truncate(self.held);
        self.entries.extend_from_slice(entries);
        self.held = self.entries.len();
        true
    }

    /// Whether this history continues `before` (the same load, `before`'s records, then
    /// perhaps more), as the chain of the records says.
    pub fn extends(&self, before: &History) -> bool {
        self.lsn_loaded == before.lsn_loaded
            && self.lsn() >= before.lsn()
            && self.chain_at(before.lsn()) == before.chain_at(before.lsn())
    }

    /// The segment was rewound to `lsn`, or a rewind was taken back up to it: it holds the
    /// records up to there, as this history knew them.
    pub fn set_lsn(&mut self, lsn: u64) {
        assert!(
            (self.lsn_loaded..=self.lsn_loaded + self.entries.len() as u64).contains(&lsn),
            "a rewind to LSN {lsn} outside what the history knew ({}..={})",
            self.lsn_loaded,
            self.lsn_loaded + self.entries.len() as u64
        );
        self.held = (lsn - self.lsn_loaded) as usize;
    }

    /// The history up to `lsn` alone (what a state transfer at `lsn` carries).
    pub fn prefix(&self, lsn: u64) -> History {
        let mut prefix = self.clone();
        prefix.set_lsn(lsn);
        prefix.entries.truncate(prefix.held);
        prefix
    }
}
