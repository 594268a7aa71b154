//! What can go wrong when mapping a region, making a tracker or harvesting: each variant
//! names what failed and, where there is one, the fix.

use std::fmt;
use std::io;

use crate::Region;
use crate::fault::SLOTS;

/// Why a region could not be mapped, a tracker made, or a harvest taken.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TrackError {
    /// `userfaultfd(2)` and `/dev/userfaultfd` both refused.
    #[error(
        "userfaultfd refused ({source}): run as root or set vm.unprivileged_userfaultfd=1 \
         (a kernel without CONFIG_USERFAULTFD has none: use soft-dirty or mprotect)"
    )]
    UffdRefused { source: io::Error },
    /// The `UFFDIO_API` handshake did not grant asynchronous write-protect.
    #[error(
        "userfaultfd lacks asynchronous write-protect (features wanted {wanted:#x}, granted \
         {granted:#x}): it needs Linux 6.7 or later; use soft-dirty or mprotect"
    )]
    UffdFeatures { wanted: u64, granted: u64 },
    /// A userfaultfd ioctl on the region failed.
    #[error(
        "userfaultfd {call} failed ({source}): the region must be an anonymous private mapping \
         on a kernel with CONFIG_PTE_MARKER_UFFD_WP; use soft-dirty or mprotect"
    )]
    Uffd {
        call: &'static str,
        source: io::Error,
    },
    /// `PAGEMAP_SCAN` on `/proc/self/pagemap` failed.
    #[error(
        "PAGEMAP_SCAN on /proc/self/pagemap failed ({source}): it needs Linux 6.7 or later; \
         use soft-dirty or mprotect"
    )]
    PagemapScan { source: io::Error },
    /// A written page's soft-dirty bit stayed clear.
    #[error(
        "soft-dirty bits unavailable: pagemap bit 55 stayed clear after a write (a kernel built \
         without CONFIG_MEM_SOFT_DIRTY accepts clear_refs but never sets it); use uffd or mprotect"
    )]
    SoftDirtyUnsupported,
    /// Another soft-dirty tracker is live in this process.
    #[error(
        "a SoftDirtyTracker is already live in this process: /proc/self/clear_refs clears \
         soft-dirty bits process-wide, so only one may run at a time; drop it or use another kind"
    )]
    SoftDirtyBusy,
    /// A file of `/proc/self` could not be opened, read or written.
    #[error("{path} unusable ({source}): tracking needs procfs mounted on /proc")]
    Proc {
        path: &'static str,
        source: io::Error,
    },
    /// Every slot of the SIGSEGV handler's table holds a live tracker.
    #[error(
        "all {SLOTS} regions the SIGSEGV handler can watch are taken: drop a mprotect or \
         soft-dirty tracker first, or use uffd"
    )]
    WatchTableFull,
    /// A memory or signal system call failed.
    #[error(
        "{call} failed ({source}): ENOMEM means memory or vm.max_map_count (each \
         unprotected run of a mprotect-tracked region is a mapping) ran out"
    )]
    Syscall {
        call: &'static str,
        source: io::Error,
    },
    /// An earlier harvest failed part-way, so the tracker no longer knows what is dirty.
    #[error(
        "this tracker failed earlier and no longer knows which pages are dirty: copy the whole \
         region and make a new tracker"
    )]
    Poisoned,
}

impl TrackError {
    /// The last OS error as the failure of `call`.
    pub(crate) fn last_os(call: &'static str) -> TrackError {
        TrackError::Syscall {
            call,
            source: io::Error::last_os_error(),
        }
    }
}

/// A tracker that could not be made, with the region it was to watch, handed back unchanged
/// (mapped, writable, untracked) so the caller can try another kind.
#[derive(Debug)]
pub struct Refusal {
    pub error: TrackError,
    pub region: Region,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for Refusal {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
