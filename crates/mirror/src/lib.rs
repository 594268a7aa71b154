//! Mirroring a program's memory to a backup (issue 42): dirty-page tracking, and the
//! checkpoint protocol over it. In the deliberate-update protocol of seed paper 001 (§3.3), the
//! primary sends its backup, at each checkpoint, the pages written since the last one, found by
//! page protection; the backup keeps undo copies of what they overwrite until the checkpoint is
//! complete, and the program's output waits until its checkpoint is on the backup.
//!
//! The protocol, sans-I/O (no socket, thread or clock; the caller sends and receives):
//! - [`Checkpointer`] (primary): owns a tracker; [`Checkpointer::checkpoint`] gives the next
//!   checkpoint's [`Frame`]s (`Begin`, `Page`s, `End` with the memory's hash, `hash.rs`);
//!   [`Checkpointer::acked`] takes the backup's `Ack`.
//! - [`Mirror`] (backup): [`Mirror::step`] applies one frame, keeping undo copies, and answers
//!   a complete checkpoint with an [`Ack`]; [`Mirror::rollback`] goes back to the last complete.
//! - [`HeldOutput`]: output released once the checkpoint holding its state is acked.
//! - [`decode_frame`], [`FrameReader`]: the frames' encoding (`frame.rs` draws it) and order.
//!
//! A [`Region`] is an anonymous private mapping that a program writes with ordinary stores. A
//! [`DirtyTracker`] owns one region and, at each [`DirtyTracker::harvest`], appends the pages
//! written since the previous harvest and re-arms, so the next harvest sees only later stores.
//! Three mechanisms, fastest first:
//! - [`UffdTracker`]: userfaultfd write-protect in asynchronous mode, harvested and re-armed in
//!   one atomic step by `PAGEMAP_SCAN` (Linux 6.7+; root or `vm.unprivileged_userfaultfd=1`).
//! - [`SoftDirtyTracker`]: the kernel's soft-dirty bits (CONFIG_MEM_SOFT_DIRTY); one per
//!   process, since clearing them is process-wide.
//! - [`MprotectTracker`]: read-only pages and a process-wide SIGSEGV handler; works anywhere.
//!
//! [`tracker_for`] makes the fastest the kernel grants, by trying each; [`probe`] names it.
//!
//! The contract every tracker keeps: no store is lost. A store between two harvests is
//! reported by the second; a store racing with a harvest is reported by that harvest or the
//! next. A page counts as written if any store reached it, even one that left its bytes as
//! they were. Tracking never changes the region's bytes. After a harvest fails, the tracker
//! is poisoned: the caller copies the whole region and makes a new tracker.
//!
//! [`bench::measure_tracking`] measures what tracking costs, [`bench::measure_checkpoints`]
//! what checkpoints, their application and a rollback cost.

mod checkpoint;
mod error;
mod fault;
mod frame;
mod hash;
mod mirror;
mod mprotect;
mod output;
mod planted;
mod region;
mod soft_dirty;
mod uapi;
mod uffd;

pub mod bench;

use std::fmt;

pub use checkpoint::{AckError, Checkpoint, Checkpointer};
pub use error::{Refusal, TrackError};
pub use fault::SLOTS as WATCHED_REGIONS_MAX;
pub use frame::{
    Ack, Frame, FrameError, FrameReader, HEADER_LEN as FRAME_HEADER_LEN, Limits, OrderError,
    decode_frame,
};
pub use hash::hash_memory;
pub use mirror::{Mirror, MirrorError};
pub use mprotect::MprotectTracker;
pub use output::HeldOutput;
#[doc(hidden)]
pub use planted::{HarvestHook, PlantedBug, PlantedMirrorBug, PlantedOutputBug};
pub use region::{Region, page_size};
pub use soft_dirty::SoftDirtyTracker;
pub use uffd::UffdTracker;

/// The mechanism behind a tracker.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TrackerKind {
    Uffd,
    SoftDirty,
    Mprotect,
}

impl TrackerKind {
    /// Every kind, fastest first: the order [`tracker_for`] tries them in.
    pub const ALL: [TrackerKind; 3] = [
        TrackerKind::Uffd,
        TrackerKind::SoftDirty,
        TrackerKind::Mprotect,
    ];

    pub fn name(self) -> &'static str {
        match self {
            TrackerKind::Uffd => "uffd",
            TrackerKind::SoftDirty => "soft-dirty",
            TrackerKind::Mprotect => "mprotect",
        }
    }
}

impl fmt::Display for TrackerKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.pad(self.name())
    }
}

/// Finds the pages of its region written since the last harvest.
///
/// A tracker owns its region, so the region cannot be unmapped while it is watched; the
/// program writes it through [`DirtyTracker::region_mut`] (or a pointer taken from it) and
/// gets it back, untracked, with [`DirtyTracker::into_region`].
pub trait DirtyTracker: fmt::Debug + Send {
    fn kind(&self) -> TrackerKind;

    fn region(&self) -> &Region;

    fn region_mut(&mut self) -> &mut Region;

    /// Appends to `dirty_pages` the index of every page written since the tracker was made or
    /// since the previous harvest, ascending, each once, and re-arms so the next harvest sees
    /// only later stores. A store racing with the harvest is reported by it or by the next.
    fn harvest(&mut self, dirty_pages: &mut Vec<usize>) -> Result<(), TrackError>;

    /// Stops tracking and hands the region back, every page writable.
    fn into_region(self: Box<Self>) -> Region;

    /// Sets a callback that every harvest runs after reading the dirty state and before
    /// re-arming (test use only: it shows a store in that window is not lost).
    #[doc(hidden)]
    fn set_harvest_hook(&mut self, hook: Option<HarvestHook>);
}

/// Makes a tracker of `kind` over `region`, or with `None` the fastest the kernel grants
/// (uffd, then soft-dirty, then mprotect), trying each in turn. On refusal the region comes
/// back in the [`Refusal`] with the last kind's error.
pub fn tracker_for(
    region: Region,
    kind: Option<TrackerKind>,
) -> Result<Box<dyn DirtyTracker>, Refusal> {
    let Some(kind) = kind else {
        let mut region = region;
        let mut kinds = TrackerKind::ALL.into_iter().peekable();
        while let Some(kind) = kinds.next() {
            match tracker_for(region, Some(kind)) {
                Ok(tracker) => return Ok(tracker),
                Err(refusal) if kinds.peek().is_none() => return Err(refusal),
                Err(refusal) => region = refusal.region,
            }
        }
        unreachable!("TrackerKind::ALL is not empty");
    };
    Ok(match kind {
        TrackerKind::Uffd => Box::new(UffdTracker::new(region)?),
        TrackerKind::SoftDirty => Box::new(SoftDirtyTracker::new(region)?),
        TrackerKind::Mprotect => Box::new(MprotectTracker::new(region)?),
    })
}

/// The fastest kind this kernel grants, found by trying: a tracker of each kind is made over a
/// scratch page, which is written and harvested. Soft-dirty counts as granted while another
/// soft-dirty tracker lives (that one shows it works). Mprotect is the fallback.
pub fn probe() -> TrackerKind {
    for kind in [TrackerKind::Uffd, TrackerKind::SoftDirty] {
        if works(kind) {
            return kind;
        }
    }
    TrackerKind::Mprotect
}

fn works(kind: TrackerKind) -> bool {
    let Ok(scratch) = Region::with_pages(1) else {
        return false;
    };
    match tracker_for(scratch, Some(kind)) {
        Ok(mut tracker) => {
            tracker.region_mut().as_mut_slice()[0] = 1;
            let mut dirty_pages = Vec::new();
            tracker.harvest(&mut dirty_pages).is_ok() && dirty_pages == [0]
        }
        Err(refusal) => matches!(refusal.error, TrackError::SoftDirtyBusy),
    }
}
