//! The backup's side of deliberate-update mirroring (seed paper 001, §3.2-3.3): memory the size
//! of the primary's region, written page by page as checkpoints arrive, with an undo copy of
//! each page a checkpoint overwrites, so that if the primary dies mid-transfer the memory
//! goes back to the last complete checkpoint.
//!
//! Sans-I/O: [`Mirror::step`] takes one frame and may return the `Ack` to send; the caller
//! decides the primary is dead and calls [`Mirror::rollback`]. Nothing here reads a socket or a
//! clock. The contract: between steps, the memory is the last complete checkpoint's, plus
//! the pages of the open one received so far, and the undo copies hold exactly what those
//! pages held at the last complete checkpoint. A frame refused changes nothing.
//!
//! The seed's backup makes its undo copy when the primary first faults on a page, one message
//! per fault; here the copy is made when the page's `Page` frame arrives, which needs no
//! message of its own and copies only pages that really come.

use crate::frame::{Ack, Frame, Limits, OrderError, Sequence};
use crate::hash::{PageHashes, page_crc, page_index};
use crate::planted::PlantedMirrorBug;
use crate::{Region, TrackError};

/// The backup's copy of a primary's region, checkpoint by checkpoint.
#[derive(Debug)]
pub struct Mirror {
    memory: Region,
    /// The memory's page hashes, current with every page written.
    hashes: PageHashes,
    sequence: Sequence,
    undo: Undo,
    planted: Option<PlantedMirrorBug>,
}

/// The undo copies of the open checkpoint: at most one per page, in the order taken.
#[derive(Debug, Default)]
struct Undo {
    /// Per page: its copy's place in `pages`, or `NONE` while the open checkpoint has not
    /// written it.
    slot_of_page: Vec<u32>,
    /// Each copy's page and the crc its bytes had.
    pages: Vec<(u32, u32)>,
    /// The copies' bytes, one page each, in the order of `pages`.
    bytes: Vec<u8>,
}

const NONE: u32 = u32::MAX;

/// Why a frame was refused. The mirror is as it was before the frame; a checkpoint left open
/// is the caller's to end by [`Mirror::rollback`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum MirrorError {
    /// The frame may not come now: a `Page` before a `Begin`, a wrong checkpoint number, …
    #[error(transparent)]
    Order(#[from] OrderError),
    #[error("Begin frame, field 'page_size': {found}, but the mirror's pages are {expected} bytes")]
    PageSize { found: u32, expected: u32 },
    #[error("Begin frame, field 'pages': {found} Page frames, more than the mirror's {max} pages")]
    PageCount { found: u32, max: u32 },
    #[error("Page frame, field 'index': {found}, but the mirror has {pages} pages")]
    PageIndex { found: u32, pages: u32 },
    #[error("Page frame, field 'bytes': {found} bytes, but a page is {expected}")]
    PageLength { found: usize, expected: usize },
    #[error(
        "End frame, field 'hash': checkpoint {checkpoint} hashes to {primary:#018x} on the \
         primary but the mirror's memory to {mirror:#018x}: roll back"
    )]
    Hash {
        checkpoint: u64,
        primary: u64,
        mirror: u64,
    },
}

impl Mirror {
    /// A mirror of `pages` zeroed pages of the system's page size, at checkpoint 0.
    pub fn new(pages: usize) -> Result<Mirror, TrackError> {
        assert!(
            u32::try_from(pages).is_ok_and(|pages| pages < NONE),
            "a mirror holds fewer than 2^32 - 1 pages"
        );
        let memory = Region::with_pages(pages)?;
        let hashes = PageHashes::zeroed(pages, memory.page_size());
        Ok(Mirror {
            undo: Undo {
                slot_of_page: vec![NONE; pages],
                ..Undo::default()
            },
            memory,
            hashes,
            sequence: Sequence::new(0),
            planted: None,
        })
    }

    /// Plants a known bug (test use only).
    #[doc(hidden)]
    pub fn plant(&mut self, bug: PlantedMirrorBug) {
        self.planted = Some(bug);
    }

    /// The memory: the last complete checkpoint's, plus what the open one wrote so far.
    pub fn memory(&self) -> &[u8] {
        self.memory.as_slice()
    }

    /// The last checkpoint received whole and acked (0 before the first).
    pub fn last_complete(&self) -> u64 {
        self.sequence.complete_last()
    }

    /// The checkpoint begun and not ended, if any.
    pub fn open(&self) -> Option<u64> {
        self.sequence.open()
    }

    /// The hash of the memory as it is now (`hash.rs`).
    pub fn hash(&self) -> u64 {
        self.hashes.sum()
    }

    /// What the frames to this mirror may hold, for a [`crate::FrameReader`].
    pub fn limits(&self) -> Limits {
        Limits {
            page_size: u32::try_from(self.memory.page_size()).expect("a page fits u32"),
            pages_max: page_index(self.memory.page_count()),
        }
    }

    /// Takes the next frame from the primary: a `Begin` opens the next checkpoint; a `Page`
    /// saves an undo copy of its page the first time the checkpoint writes it, then writes
    /// it; an `End` checks the page count and the hash, drops the undo copies and returns the
    /// `Ack` to send. A frame refused changes nothing.
    pub fn step(&mut self, frame: &Frame<'_>) -> Result<Option<Ack>, MirrorError> {
        self.sequence.check(frame)?;
        let ack = match frame {
            Frame::Begin {
                pages, page_size, ..
            } => {
                self.check_begin(*pages, *page_size)?;
                None
            }
            Frame::Page { index, bytes, .. } => {
                self.write_page(*index, bytes)?;
                None
            }
            Frame::End { checkpoint, hash } => {
                self.end(*checkpoint, *hash)?;
                Some(Ack {
                    checkpoint: *checkpoint,
                })
            }
            Frame::Ack { .. } => unreachable!("the sequence refuses an Ack"),
        };
        self.sequence.advance(frame);
        assert!(
            self.sequence.open().is_some() || self.undo.pages.is_empty(),
            "undo copies live only while a checkpoint is open"
        );
        assert!(
            self.undo.pages.len() <= self.memory.page_count(),
            "at most one undo copy per page"
        );
        if let Some(ack) = ack {
            assert_eq!(
                ack.checkpoint,
                self.last_complete(),
                "an ack of what is complete"
            );
        }
        Ok(ack)
    }

    fn check_begin(&self, pages: u32, page_size: u32) -> Result<(), MirrorError> {
        let limits = self.limits();
        if page_size != limits.page_size {
            let expected = limits.page_size;
            return Err(MirrorError::PageSize {
                found: page_size,
                expected,
            });
        }
        if pages > limits.pages_max {
            let max = limits.pages_max;
            return Err(MirrorError::PageCount { found: pages, max });
        }
        Ok(())
    }

    /// Saves page `index`'s undo copy if the open checkpoint has none yet, then writes it.
    fn write_page(&mut self, index: u32, bytes: &[u8]) -> Result<(), MirrorError> {
        let pages = page_index(self.memory.page_count());
        if index >= pages {
            return Err(MirrorError::PageIndex {
                found: index,
                pages,
            });
        }
        let page_size = self.memory.page_size();
        if bytes.len() != page_size {
            let expected = page_size;
            let found = bytes.len();
            return Err(MirrorError::PageLength { found, expected });
        }
        if self.planted == Some(PlantedMirrorBug::UndoDroppedEarly) {
            self.undo.clear();
        }
        let at = index as usize * page_size;
        let current = &self.memory.as_slice()[at..at + page_size];
        match self.undo.slot_of_page[index as usize] {
            NONE => self.undo.save(index, self.hashes.crc(index), current),
            slot if self.planted == Some(PlantedMirrorBug::UndoOnEveryWrite) => {
                self.undo.resave(slot, self.hashes.crc(index), current);
            }
            _ => {}
        }
        self.memory.as_mut_slice()[at..at + page_size].copy_from_slice(bytes);
        self.hashes.set(index, page_crc(bytes));
        Ok(())
    }

    /// Completes checkpoint `checkpoint` if the memory hashes to the primary's `hash`.
    fn end(&mut self, checkpoint: u64, hash: u64) -> Result<(), MirrorError> {
        let mirror = self.hashes.sum();
        if mirror != hash {
            return Err(MirrorError::Hash {
                checkpoint,
                primary: hash,
                mirror,
            });
        }
        self.undo.clear();
        Ok(())
    }

    /// Ends the open checkpoint incomplete, if there is one, and puts back every page it wrote
    /// from its undo copy: the memory is then exactly the last complete checkpoint's. Returns
    /// the checkpoint abandoned. The caller decides the primary is gone; a new stream starts
    /// at the checkpoint after [`Mirror::last_complete`].
    pub fn rollback(&mut self) -> Option<u64> {
        let abandoned = self.sequence.open();
        let page_size = self.memory.page_size();
        let memory = self.memory.as_mut_slice();
        for (slot, &(index, crc)) in self.undo.pages.iter().enumerate() {
            let at = index as usize * page_size;
            let copy = &self.undo.bytes[slot * page_size..(slot + 1) * page_size];
            memory[at..at + page_size].copy_from_slice(copy);
            self.hashes.set(index, crc);
        }
        self.undo.clear();
        self.sequence.abandon();
        assert!(
            self.sequence.open().is_none(),
            "nothing is open after a rollback"
        );
        abandoned
    }

    /// Stops mirroring and hands the memory over (to run the program on, after a rollback).
    pub fn into_region(self) -> Region {
        self.memory
    }
}

impl Undo {
    fn save(&mut self, index: u32, crc: u32, bytes: &[u8]) {
        self.slot_of_page[index as usize] = page_index(self.pages.len());
        self.pages.push((index, crc));
        self.bytes.extend_from_slice(bytes);
    }

    /// Overwrites copy `slot` (only the planted `UndoOnEveryWrite` does).
    fn resave(&mut self, slot: u32, crc: u32, bytes: &[u8]) {
        let page_size = bytes.len();
        let at = slot as usize * page_size;
        self.bytes[at..at + page_size].copy_from_slice(bytes);
        self.pages[slot as usize].1 = crc;
    }

    /// Drops every copy. The buffer keeps up to twice what this checkpoint used: similar
    /// checkpoints reuse it, and one much smaller than the last (the first ships the whole
    /// memory) lets the rest go.
    fn clear(&mut self) {
        for &(index, _) in &self.pages {
            self.slot_of_page[index as usize] = NONE;
        }
        self.pages.clear();
        let used = self.bytes.len();
        self.bytes.clear();
        self.bytes.shrink_to(used.saturating_mul(2));
    }
}
