//! The primary's side of deliberate-update mirroring (seed paper 001, §3.3): at each
//! checkpoint, the pages written since the previous one, copied into frames for the caller to
//! send; the backup's acks, recorded.
//!
//! Sans-I/O: [`Checkpointer::checkpoint`] harvests the tracker and returns the checkpoint; the
//! caller sends its frames in order and hands back each `Ack` it receives. Nothing here sends,
//! waits or reads a clock. The program must not store to the region while a checkpoint is
//! being taken (the seed's DU protocol stops computing for it too): the frames are then
//! exactly the region's bytes at that instant.
//!
//! The pages of a checkpoint are no longer dirty once it is taken, so only its [`Checkpoint`]
//! can send them again: a caller whose link to the backup may break and come back keeps each
//! checkpoint until it is acked, and after a reconnection (the backup rolled back) sends again,
//! whole and in order, every one after the backup's [`crate::Mirror::last_complete`].

use std::borrow::Cow;

use crate::frame::{Frame, HEADER_LEN as FRAME_HEADER_LEN};
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

/// One checkpoint: its number, the pages shipped (their indices, and their bytes in one
/// buffer) and the memory's hash; as frames, `Begin`, a `Page` per page, `End`. A caller that
/// takes checkpoints into the same one ([`Checkpointer::checkpoint_into`]) reuses its buffers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Checkpoint {
    number: u64,
    page_size: u32,
    indices: Vec<u32>,
    /// The pages' bytes, `page_size` each, in the order of `indices`.
    bytes: Vec<u8>,
    hash: u64,
}

impl Checkpoint {
    /// The checkpoint's number (0: none taken into it yet).
    pub fn number(&self) -> u64 {
        self.number
    }

    /// The pages shipped.
    pub fn pages(&self) -> usize {
        self.indices.len()
    }

    /// The hash of the whole memory as of this checkpoint (`hash.rs`).
    pub fn hash(&self) -> u64 {
        self.hash
    }

    /// The frames to send, in order: `Begin`, the `Page`s (borrowing the bytes), `End`.
    pub fn frames(&self) -> Vec<Frame<'_>> {
        assert!(self.number > 0, "a checkpoint was taken into it");
        let page_size = self.page_size as usize;
        let mut frames = Vec::with_capacity(self.indices.len() + 2);
        frames.push(Frame::Begin {
            checkpoint: self.number,
            pages: page_index(self.indices.len()),
            page_size: self.page_size,
        });
        let pages = self.bytes.chunks_exact(page_size);
        frames.extend(
            self.indices
                .iter()
                .zip(pages)
                .map(|(&index, bytes)| Frame::Page {
                    checkpoint: self.number,
                    index,
                    bytes: Cow::Borrowed(bytes),
                }),
        );
        frames.push(Frame::End {
            checkpoint: self.number,
            hash: self.hash,
        });
        frames
    }

    /// Bytes the frames take encoded: what a checkpoint puts on the wire (`Begin` and `End`
    /// are a header and 16 bytes each).
    pub fn encoded_len(&self) -> usize {
        2 * (FRAME_HEADER_LEN + 16) + self.pages() * Frame::page_encoded_len(self.page_size)
    }

    /// Appends every frame's encoding to `out`, in order.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len());
        let start = out.len();
        for frame in self.frames() {
            frame.encode(out);
        }
        assert_eq!(out.len() - start, self.encoded_len());
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
            u32::try_from(region.page_count()).is_ok(),
            "a mirrored region has at most 2^32 - 1 pages"
        );
        assert!(
            u32::try_from(region.page_size()).is_ok(),
            "a page fits a frame"
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
    /// first time), copies each for its `Page` frame, and closes with the memory's hash.
    ///
    /// A failed harvest takes no checkpoint and leaves the tracker poisoned (every later call
    /// fails too): the caller ships the whole region another way and starts anew.
    pub fn checkpoint(&mut self) -> Result<Checkpoint, TrackError> {
        let mut checkpoint = Checkpoint::default();
        self.checkpoint_into(&mut checkpoint)?;
        Ok(checkpoint)
    }

    /// As [`Checkpointer::checkpoint`], into `checkpoint`, whose buffers are reused: a sender
    /// done with one checkpoint's frames takes the next into it without allocating. On error,
    /// `checkpoint` is left empty (number 0).
    pub fn checkpoint_into(&mut self, checkpoint: &mut Checkpoint) -> Result<(), TrackError> {
        checkpoint.number = 0;
        checkpoint.indices.clear();
        checkpoint.bytes.clear();
        self.dirty_pages.clear();
        self.tracker.harvest(&mut self.dirty_pages)?;
        let region = self.tracker.region();
        if self.taken_last == 0 {
            self.dirty_pages.clear();
            self.dirty_pages.extend(0..region.page_count());
        }
        checkpoint
            .bytes
            .reserve(self.dirty_pages.len() * region.page_size());
        for &index in &self.dirty_pages {
            let index = page_index(index);
            let at = checkpoint.bytes.len();
            checkpoint
                .bytes
                .extend_from_slice(region.page(index as usize));
            self.hashes.set(index, page_crc(&checkpoint.bytes[at..]));
            checkpoint.indices.push(index);
        }
        self.taken_last += 1;
        checkpoint.number = self.taken_last;
        checkpoint.page_size = u32::try_from(region.page_size()).expect("checked by new");
        checkpoint.hash = self.hashes.sum();
        Ok(())
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
