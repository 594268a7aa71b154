//! The Raft log as raft-rs reads it: hard state, membership, the last snapshot (with the map
//! it captured) and the entries after it.
//!
//! raft-rs's `MemStorage` is not used: its snapshots carry no data (it does not know the
//! state machine) and its `compact` forgets the term of the last compacted entry, which
//! raft-rs asks for when it matches a follower's log right after a compaction. This store is
//! the same idea with those two holes closed; it is plain memory, and [`crate::Persisted`] is
//! its image on disk.

use raft::prelude::*;
use raft::{GetEntriesContext, RaftState, StorageError};

use crate::map::{ClusterMap, encode_map};

#[derive(Clone, Debug)]
pub(crate) struct LogStore {
    pub(crate) hard_state: HardState,
    pub(crate) conf_state: ConfState,
    /// Index and term of the last entry the snapshot covers; 0 and 0 for the initial map.
    pub(crate) snapshot_index: u64,
    pub(crate) snapshot_term: u64,
    /// The map as of `snapshot_index`.
    pub(crate) snapshot_map: ClusterMap,
    /// Entries `snapshot_index + 1 ..= last_index`, contiguous.
    pub(crate) entries: Vec<Entry>,
}

impl LogStore {
    pub(crate) fn first_index(&self) -> u64 {
        self.snapshot_index + 1
    }

    pub(crate) fn last_index(&self) -> u64 {
        self.snapshot_index + self.entries.len() as u64
    }

    /// The term of entry `index`, if it is the snapshot's last entry or still in the log.
    pub(crate) fn term_of(&self, index: u64) -> Option<u64> {
        if index == self.snapshot_index {
            return Some(self.snapshot_term);
        }
        if index < self.first_index() || index > self.last_index() {
            return None;
        }
        Some(self.entries[(index - self.first_index()) as usize].term)
    }

    /// Appends entries raft-rs handed out in a Ready, replacing any conflicting suffix.
    pub(crate) fn append(&mut self, entries: &[Entry]) {
        let Some(first) = entries.first() else {
            return;
        };
        // raft-rs never rewrites a committed entry, and a snapshot covers only committed ones.
        assert!(
            first.index > self.snapshot_index,
            "append below the snapshot"
        );
        assert!(first.index <= self.last_index() + 1, "append leaves a gap");
        self.entries
            .truncate((first.index - self.first_index()) as usize);
        self.entries.extend_from_slice(entries);
        self.assert_contiguous();
    }

    /// Replaces everything with a snapshot received from the leader (raft-rs only hands one
    /// out when its log does not already hold the snapshot's last entry).
    pub(crate) fn install_snapshot(&mut self, index: u64, term: u64, map: ClusterMap) {
        assert!(
            index > self.snapshot_index,
            "an installed snapshot moves forward"
        );
        self.snapshot_index = index;
        self.snapshot_term = term;
        self.snapshot_map = map;
        self.entries.clear();
        self.hard_state.term = self.hard_state.term.max(term);
        self.hard_state.commit = self.hard_state.commit.max(index);
    }

    /// Takes a snapshot of `map`, the state after applying entry `applied`, and drops the
    /// entries it covers.
    pub(crate) fn compact(&mut self, applied: u64, map: &ClusterMap) {
        assert!(applied > self.snapshot_index);
        assert!(
            applied <= self.hard_state.commit,
            "only applied entries are compacted"
        );
        let term = self
            .term_of(applied)
            .expect("an applied entry is in the log");
        self.entries
            .drain(..(applied - self.snapshot_index) as usize);
        self.snapshot_index = applied;
        self.snapshot_term = term;
        self.snapshot_map = map.clone();
        self.assert_contiguous();
    }

    fn assert_contiguous(&self) {
        for (offset, entry) in self.entries.iter().enumerate() {
            assert_eq!(entry.index, self.first_index() + offset as u64);
        }
        // Terms never decrease along the log.
        let mut term = self.snapshot_term;
        for entry in &self.entries {
            assert!(
                entry.term >= term,
                "terms decrease at index {}",
                entry.index
            );
            term = entry.term;
        }
    }
}

impl raft::Storage for LogStore {
    fn initial_state(&self) -> raft::Result<RaftState> {
        Ok(RaftState::new(
            self.hard_state.clone(),
            self.conf_state.clone(),
        ))
    }

    fn entries(
        &self,
        low: u64,
        high: u64,
        max_size: impl Into<Option<u64>>,
        _context: GetEntriesContext,
    ) -> raft::Result<Vec<Entry>> {
        if low < self.first_index() {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        assert!(low <= high, "entries [{low}, {high}) is backwards");
        assert!(
            high <= self.last_index() + 1,
            "entries past the end of the log"
        );
        let offset = self.first_index();
        let mut entries = self.entries[(low - offset) as usize..(high - offset) as usize].to_vec();
        raft::util::limit_size(&mut entries, max_size.into());
        Ok(entries)
    }

    fn term(&self, index: u64) -> raft::Result<u64> {
        if let Some(term) = self.term_of(index) {
            return Ok(term);
        }
        if index < self.snapshot_index {
            return Err(raft::Error::Store(StorageError::Compacted));
        }
        Err(raft::Error::Store(StorageError::Unavailable))
    }

    fn first_index(&self) -> raft::Result<u64> {
        Ok(LogStore::first_index(self))
    }

    fn last_index(&self) -> raft::Result<u64> {
        Ok(LogStore::last_index(self))
    }

    fn snapshot(&self, request_index: u64, _to: u64) -> raft::Result<Snapshot> {
        // Only a follower's explicit request (unused here) can ask for a newer snapshot than
        // the last compaction took; raft-rs retries after a temporary error.
        if self.snapshot_index < request_index {
            return Err(raft::Error::Store(
                StorageError::SnapshotTemporarilyUnavailable,
            ));
        }
        let mut snapshot = Snapshot::default();
        snapshot.set_data(encode_map(&self.snapshot_map).into());
        let metadata = snapshot.mut_metadata();
        metadata.index = self.snapshot_index;
        metadata.term = self.snapshot_term;
        metadata.set_conf_state(self.conf_state.clone());
        Ok(snapshot)
    }
}
