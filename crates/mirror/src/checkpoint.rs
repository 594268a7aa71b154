//! The primary's side of deliberate-update mirroring (seed paper 001, §3.3): at each
//! checkpoint, the pages written since the previous one, copied into frames for the caller to
//! send; the backup's acks, recorded.
//!
//! Sans-I/O: [`Checkpointer::checkpoint`] harvests the tracker and returns the frames; the
//! caller sends them in order and hands back each `Ack` it receives. Nothing here sends,
//! waits or reads a clock. The program must not store to the region while a checkpoint is
//! being taken (the seed's DU protocol stops computing for it too): the frames are then
//! exactly the region's bytes at that instant.

use crate::frame::Frame;
use crate::hash::{PageHashes, page_crc, page_index};
use crate::{DirtyTracker, Region, TrackError};

/// Takes checkpoints of a tracked region and follows which the backup holds.
///
/// Checkpoint `n` holds the region as it was when the `n`-th call to
/// [`Checkpointer::checkpoint`] returned; they number from 1. The first ships every page,
/// since the backup starts from zeroed memory; each later one, the pages the tracker reports.
#[derive(Debug)]
pub struct Checkpointer {
    tracker: Box<dyn DirtyTracker>,
    /// The region's page hashes as of the last checkpoint taken.
    hashes: PageHashes,
    taken_last: u64,
    acked_last: u64,
    /// Reused by every harvest.
    dirty_pages: Vec<usize>,
}

/// One checkpoint's frames, in the order they are to be sent: `Begin`, the `Page`s, `End`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    number: u64,
    frames: Vec<Frame>,
}

impl Checkpoint {
    pub fn number(&self) -> u64 {
        self.number
    }

    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    pub fn into_frames(self) -> Vec<Frame> {
        self.frames
    }

    /// The pages shipped.
    pub fn pages(&self) -> usize {
        self.frames.len() - 2
    }

    /// Bytes the frames take encoded: what a checkpoint puts on the wire.
    pub fn encoded_len(&self) -> usize {
        self.frames.iter().map(Frame::encoded_len).sum()
    }

    /// Appends every frame's encoding to `out`, in order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        for frame in &self.frames {
            frame.encode(out);
        }
    }
}

/// Why an ack from the backup was not taken: it cannot be right, so the caller drops it (and
/// may distrust the link).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum AckError {
    #[error(
        "Ack of checkpoint {found}, but the last taken is {taken_last}: nothing acks the unsent"
    )]
    NotTaken { found: u64, taken_last: u64 },
    #[error(
        "Ack of checkpoint {found}, but {acked_last} is already acked: a repeat or out of order"
    )]
    Stale { found: u64, acked_last: u64 },
}

impl Checkpointer {
    /// Checkpoints `tracker`'s region, whatever it holds now; no checkpoint is taken yet.
    pub fn new(tracker: Box<dyn DirtyTracker>) -> Checkpointer {
        let region = tracker.region();
        assert!(
            u32::try_from(region.page_count()).is_ok() && u32::try_from(region.page_size()).is_ok(),
            "a mirrored region has at most 2^32 - 1 pages of at most 4 GiB"
        );
        let hashes = PageHashes::zeroed(region.page_count(), region.page_size());
        Checkpointer {
            tracker,
            hashes,
            taken_last: 0,
            acked_last: 0,
            dirty_pages: Vec::new(),
        }
    }

    /// The region, to read.
    pub fn region(&self) -> &Region {
        self.tracker.region()
    }

    /// The region, for the program to store to between checkpoints.
    pub fn region_mut(&mut self) -> &mut Region {
        self.tracker.region_mut()
    }

    pub fn tracker(&self) -> &dyn DirtyTracker {
        self.tracker.as_ref()
    }

    /// The last checkpoint taken (0 before the first).
    pub fn taken_last(&self) -> u64 {
        self.taken_last
    }

    /// The last checkpoint the backup acked (0 before the first): it holds that one whole.
    pub fn acked_last(&self) -> u64 {
        self.acked_last
    }

    /// The checkpoint that will hold what the program stores now: the next one taken. Output
    /// produced now is released once it is acked ([`crate::HeldOutput`]).
    pub fn in_progress(&self) -> u64 {
        self.taken_last + 1
    }

    /// Takes the next checkpoint: harvests the pages written since the last (every page, the
    /// first time), copies each into a `Page` frame, and closes with the memory's hash.
    ///
    /// A failed harvest takes no checkpoint and leaves the tracker poisoned (every later call
    /// fails too): the caller ships the whole region another way and starts anew.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, TrackError> {
        self.dirty_pages.clear();
        self.tracker.harvest(&mut self.dirty_pages)?;
        let page_count = self.region().page_count();
        if self.taken_last == 0 {
            self.dirty_pages.clear();
            self.dirty_pages.extend(0..page_count);
        }
        let number = self.taken_last + 1;
        let pages = u32::try_from(self.dirty_pages.len()).expect("checked by new: pages fit");
        let page_size = u32::try_from(self.region().page_size()).expect("checked by new");
        let mut frames = Vec::with_capacity(self.dirty_pages.len() + 2);
        frames.push(Frame::Begin {
            checkpoint: number,
            pages,
            page_size,
        });
        let region = self.tracker.region();
        for &index in &self.dirty_pages {
            assert!(index < page_count, "a tracker reports pages of its region");
            let bytes = region.page(index).to_vec();
            self.hashes.set(page_index(index), page_crc(&bytes));
            frames.push(Frame::Page {
                checkpoint: number,
                index: page_index(index),
                bytes,
            });
        }
        frames.push(Frame::End {
            checkpoint: number,
            hash: self.hashes.sum(),
        });
        self.taken_last = number;
        Ok(Checkpoint { number, frames })
    }

    /// Records the backup's ack of `checkpoint`, which also acks every one before it (the
    /// backup completes them in order, so a lost ack is covered by a later one).
    pub fn acked(&mut self, checkpoint: u64) -> Result<(), AckError> {
        if checkpoint > self.taken_last {
            let taken_last = self.taken_last;
            return Err(AckError::NotTaken {
                found: checkpoint,
                taken_last,
            });
        }
        if checkpoint <= self.acked_last {
            let acked_last = self.acked_last;
            return Err(AckError::Stale {
                found: checkpoint,
                acked_last,
            });
        }
        self.acked_last = checkpoint;
        assert!(
            self.acked_last <= self.taken_last,
            "only what was taken is acked"
        );
        Ok(())
    }

    /// Stops checkpointing and hands the tracker back.
    pub fn into_tracker(self) -> Box<dyn DirtyTracker> {
        self.tracker
    }
}
