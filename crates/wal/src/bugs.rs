//! Bugs that the crate's own tests plant in the real writer and recovery, one at a time, to show
//! that the checkers catch them. The switch exists only in this crate's test build: a normal
//! build asks a function that always answers `false`, which the compiler folds away.
//!
//! The switch is per thread, so tests running side by side do not plant bugs in each other.

/// A bug to plant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bug {
    /// `Wal::sync` writes the buffered batches but reports them durable without syncing the file.
    AckBeforeSync,
    /// Recovery accepts a batch that parses whether or not its first LSN continues the previous
    /// batch (within a segment and across segments).
    SkipSuccessorCheck,
    /// `Wal::remove_below` removes all its segment files and then syncs the directory once,
    /// so a crash may bring back an older segment while a newer one stays removed.
    RemoveWithOneDirectorySync,
    /// `Wal::cut_after` truncates the file holding a straddling batch at that batch's frame
    /// before it has written and synced the batch's prefix to a new segment, so a crash in
    /// between loses the prefix's records although a sync had reported them durable.
    CutTruncatesBeforeWritingPrefix,
    /// `Wal::sync` reports an unfinished image's `lsn` durable once its chunks so far are synced,
    /// before its last chunk is.
    ImageDurableBeforeLastChunk,
    /// `Wal::checkpoint_finish` renames the checkpoint to its final name (and syncs the
    /// directory) without syncing the file first, so a crash may leave a complete-looking name
    /// over a file whose bytes never reached the disk, after the segments it covered are gone.
    CheckpointRenamedBeforeSync,
    /// `Wal::cut_after` below a checkpoint's LSN keeps the checkpoint, so recovery may return
    /// the image of a history the cluster discarded.
    CutKeepsCheckpoint,
}

#[cfg(test)]
thread_local! {
    static PLANTED: std::cell::Cell<Option<Bug>> = const { std::cell::Cell::new(None) };
}

/// Whether `bug` is planted in this thread.
pub(crate) fn planted(bug: Bug) -> bool {
    #[cfg(test)]
    {
        PLANTED.with(|planted| planted.get()) == Some(bug)
    }
    #[cfg(not(test))]
    {
        let _ = bug;
        false
    }
}

/// Plants a bug until the returned guard is dropped.
#[cfg(test)]
pub(crate) fn plant(bug: Bug) -> Planted {
    PLANTED.with(|planted| {
        assert_eq!(planted.get(), None, "one bug at a time");
        planted.set(Some(bug));
    });
    Planted
}

#[cfg(test)]
#[derive(Debug)]
pub(crate) struct Planted;

#[cfg(test)]
impl Drop for Planted {
    fn drop(&mut self) {
        PLANTED.with(|planted| planted.set(None));
    }
}
