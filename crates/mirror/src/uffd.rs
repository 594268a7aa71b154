//! `UffdTracker`: userfaultfd write-protect in asynchronous mode. Every page of the region is
//! write-protected (pages never touched too, `UFFD_FEATURE_WP_UNPOPULATED`); the first store
//! to a page makes the kernel itself lift its protection (`UFFD_FEATURE_WP_ASYNC`: no thread,
//! no signal), and `PAGEMAP_SCAN` reports the unprotected pages and protects them again, page
//! by page under the page table lock, so reading and re-arming are one step. Linux 6.7+.
//!
//! `unsafe` here: the `userfaultfd` system call and the ioctls, each given a struct that lives
//! across the call.

#![allow(unsafe_code)]

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;

use crate::planted::{HarvestHook, Planted, PlantedBug};
use crate::uapi::{
    PAGE_IS_WRITTEN, PAGEMAP_SCAN, PM_SCAN_CHECK_WPASYNC, PM_SCAN_WP_MATCHING, PageRegion,
    PmScanArg, UFFD_API, UFFD_FEATURE_WP_ASYNC, UFFD_FEATURE_WP_UNPOPULATED, UFFD_USER_MODE_ONLY,
    UFFDIO_API, UFFDIO_REGISTER, UFFDIO_REGISTER_MODE_WP, UFFDIO_UNREGISTER, UFFDIO_WRITEPROTECT,
    UFFDIO_WRITEPROTECT_ALLOWED, UFFDIO_WRITEPROTECT_MODE_WP, USERFAULTFD_IOC_NEW, UffdioApi,
    UffdioRange, UffdioRegister, UffdioWriteprotect,
};
use crate::{DirtyTracker, Refusal, Region, TrackError, TrackerKind};

/// Page runs one `PAGEMAP_SCAN` call may report; the scan resumes where a full buffer stopped.
const RUNS_PER_SCAN: usize = 512;
/// The features the handshake asks for.
const FEATURES: u64 = UFFD_FEATURE_WP_ASYNC | UFFD_FEATURE_WP_UNPOPULATED;

/// How userfaultfd was opened (the device is the fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Opener {
    Syscall,
    #[allow(dead_code, reason = "only the tests go to the device first")]
    Device,
}

/// A region registered with a userfaultfd; unregistered on drop (before the fd closes).
#[derive(Debug)]
struct Registration {
    uffd: OwnedFd,
    range: UffdioRange,
}

impl Drop for Registration {
    fn drop(&mut self) {
        let mut range = self.range;
        // SAFETY: `range` lives across the call. A failure leaves the range registered until
        // the fd closes just after, which unregisters it anyway, so it is ignored.
        let _ = unsafe { libc::ioctl(self.uffd.as_raw_fd(), UFFDIO_UNREGISTER, &mut range) };
    }
}

/// Dirty-page tracking with userfaultfd write-protect and `PAGEMAP_SCAN`. Any number may live.
#[derive(Debug)]
pub struct UffdTracker {
    // Field order is drop order: unregistered before the region is unmapped.
    registration: Registration,
    region: Region,
    pagemap: File,
    runs: Vec<PageRegion>,
    planted: Planted,
    poisoned: bool,
}

impl UffdTracker {
    /// Watches `region`, all of its pages clean.
    pub fn new(region: Region) -> Result<UffdTracker, Refusal> {
        UffdTracker::with(region, Planted::default())
    }

    /// A tracker with a known bug planted (test use only).
    #[doc(hidden)]
    pub fn with_planted_bug(region: Region, bug: PlantedBug) -> Result<UffdTracker, Refusal> {
        UffdTracker::with(region, Planted::bug(bug))
    }

    fn with(region: Region, planted: Planted) -> Result<UffdTracker, Refusal> {
        let made = register(&region, Opener::Syscall).and_then(|registration| {
            let pagemap = File::open("/proc/self/pagemap").map_err(|source| TrackError::Proc {
                path: "/proc/self/pagemap",
                source,
            })?;
            Ok((registration, pagemap))
        });
        let (registration, pagemap) = match made {
            Ok(made) => made,
            Err(error) => return Err(Refusal { error, region }),
        };
        let mut tracker = UffdTracker {
            registration,
            region,
            pagemap,
            runs: vec![PageRegion::default(); RUNS_PER_SCAN],
            planted,
            poisoned: false,
        };
        // A first scan proves PAGEMAP_SCAN works on this region; every page was just
        // protected, so it reports nothing.
        let mut none = Vec::new();
        if let Err(error) = tracker.scan(PM_SCAN_WP_MATCHING, &mut none) {
            let UffdTracker {
                registration,
                region,
                ..
            } = tracker;
            drop(registration);
            return Err(Refusal { error, region });
        }
        assert!(
            none.is_empty(),
            "a freshly protected region has no written page"
        );
        Ok(tracker)
    }

    /// Appends the written pages from one walk of the region with `PAGEMAP_SCAN`, its `flags`
    /// besides `PM_SCAN_CHECK_WPASYNC` (`PM_SCAN_WP_MATCHING` re-protects what it reports).
    fn scan(&mut self, flags: u64, dirty_pages: &mut Vec<usize>) -> Result<(), TrackError> {
        let (base, len) = self.region.address_range();
        let page_size = self.region.page_size() as u64;
        let (base, end) = (base as u64, (base + len) as u64);
        let mut start = base;
        while start < end {
            let mut arg = PmScanArg {
                size: size_of::<PmScanArg>() as u64,
                flags: flags | PM_SCAN_CHECK_WPASYNC,
                start,
                end,
                vec: self.runs.as_mut_ptr() as u64,
                vec_len: self.runs.len() as u64,
                category_mask: PAGE_IS_WRITTEN,
                return_mask: PAGE_IS_WRITTEN,
                ..PmScanArg::default()
            };
            // SAFETY: `arg` lives across the call and `vec` points to `vec_len` writable
            // `page_region`s, which the kernel fills; the range is our registered region.
            let filled = unsafe { libc::ioctl(self.pagemap.as_raw_fd(), PAGEMAP_SCAN, &mut arg) };
            if filled < 0 {
                let source = io::Error::last_os_error();
                if source.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(TrackError::PagemapScan { source });
            }
            let filled = usize::try_from(filled).expect("a count of runs");
            assert!(
                filled <= self.runs.len(),
                "the kernel fills at most the buffer"
            );
            for run in &self.runs[..filled] {
                assert!(
                    base <= run.start && run.start < run.end && run.end <= end,
                    "run in range"
                );
                dirty_pages.extend(
                    ((run.start - base) / page_size..(run.end - base) / page_size)
                        .map(|page| page as usize),
                );
            }
            assert!(
                arg.walk_end > start && arg.walk_end <= end,
                "each scan makes progress"
            );
            start = arg.walk_end;
        }
        Ok(())
    }

    /// Write-protects the whole region (the planted `LostWindow`'s re-arm).
    fn protect_all(&self) -> Result<(), TrackError> {
        write_protect(self.registration.uffd.as_raw_fd(), self.registration.range)
    }
}

impl DirtyTracker for UffdTracker {
    fn kind(&self) -> TrackerKind {
        TrackerKind::Uffd
    }

    fn region(&self) -> &Region {
        &self.region
    }

    fn region_mut(&mut self) -> &mut Region {
        &mut self.region
    }

    /// One `PAGEMAP_SCAN` walk with `PM_SCAN_WP_MATCHING`: each written page is reported and
    /// protected again atomically, so a store is either before (reported now) or after
    /// (reported next time); there is no window in between.
    fn harvest(&mut self, dirty_pages: &mut Vec<usize>) -> Result<(), TrackError> {
        if self.poisoned {
            return Err(TrackError::Poisoned);
        }
        let start = dirty_pages.len();
        let split = self.planted.is(PlantedBug::LostWindow) || self.planted.is(PlantedBug::NoRearm);
        let mut result = self.scan(if split { 0 } else { PM_SCAN_WP_MATCHING }, dirty_pages);
        self.planted.run_hook(&mut self.region);
        if result.is_ok() && self.planted.is(PlantedBug::LostWindow) {
            result = self.protect_all();
        }
        if result.is_err() {
            self.poisoned = true;
            return result;
        }
        assert!(
            dirty_pages[start..]
                .windows(2)
                .all(|pair| pair[0] < pair[1]),
            "pages are reported ascending, each once"
        );
        Ok(())
    }

    fn into_region(self: Box<Self>) -> Region {
        let UffdTracker {
            registration,
            region,
            ..
        } = *self;
        drop(registration);
        region
    }

    fn set_harvest_hook(&mut self, hook: Option<HarvestHook>) {
        self.planted.hook = hook;
    }
}

/// Opens a userfaultfd (`opener` first, the device if the system call is refused), agrees
/// on the asynchronous write-protect features, registers the region and protects all of it.
fn register(region: &Region, opener: Opener) -> Result<Registration, TrackError> {
    let uffd = open(opener)?;
    let mut api = UffdioApi {
        api: UFFD_API,
        features: FEATURES,
        ioctls: 0,
    };
    // SAFETY: `api` lives across the call.
    if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_API, &mut api) } != 0 {
        let granted = if io::Error::last_os_error().raw_os_error() == Some(libc::EINVAL) {
            0
        } else {
            return Err(uffd_error("UFFDIO_API"));
        };
        return Err(TrackError::UffdFeatures {
            wanted: FEATURES,
            granted,
        });
    }
    if api.features & FEATURES != FEATURES {
        return Err(TrackError::UffdFeatures {
            wanted: FEATURES,
            granted: api.features,
        });
    }
    let (base, len) = region.address_range();
    let range = UffdioRange {
        start: base as u64,
        len: len as u64,
    };
    let mut register = UffdioRegister {
        range,
        mode: UFFDIO_REGISTER_MODE_WP,
        ioctls: 0,
    };
    // SAFETY: `register` lives across the call; the range is our own anonymous mapping.
    if unsafe { libc::ioctl(uffd.as_raw_fd(), UFFDIO_REGISTER, &mut register) } != 0 {
        return Err(uffd_error("UFFDIO_REGISTER"));
    }
    let registration = Registration { uffd, range };
    if register.ioctls & UFFDIO_WRITEPROTECT_ALLOWED == 0 {
        let source = io::Error::from_raw_os_error(libc::EOPNOTSUPP);
        return Err(TrackError::Uffd {
            call: "UFFDIO_REGISTER (no UFFDIO_WRITEPROTECT)",
            source,
        });
    }
    write_protect(registration.uffd.as_raw_fd(), range)?;
    Ok(registration)
}

fn write_protect(uffd: RawFd, range: UffdioRange) -> Result<(), TrackError> {
    let mut protect = UffdioWriteprotect {
        range,
        mode: UFFDIO_WRITEPROTECT_MODE_WP,
    };
    // SAFETY: `protect` lives across the call; the range is registered with `uffd`.
    if unsafe { libc::ioctl(uffd, UFFDIO_WRITEPROTECT, &mut protect) } != 0 {
        return Err(uffd_error("UFFDIO_WRITEPROTECT"));
    }
    Ok(())
}

fn uffd_error(call: &'static str) -> TrackError {
    TrackError::Uffd {
        call,
        source: io::Error::last_os_error(),
    }
}

/// A new userfaultfd, non-blocking and close-on-exec, handling user-mode faults only.
fn open(opener: Opener) -> Result<OwnedFd, TrackError> {
    let flags = libc::O_CLOEXEC | libc::O_NONBLOCK | UFFD_USER_MODE_ONLY;
    let mut refused = None;
    if opener == Opener::Syscall {
        // SAFETY: userfaultfd(2) takes flags and returns a new fd or -1.
        let fd = unsafe { libc::syscall(libc::SYS_userfaultfd, flags) };
        if fd >= 0 {
            let fd = RawFd::try_from(fd).expect("an fd fits in a RawFd");
            // SAFETY: a fresh fd that nothing else owns.
            return Ok(unsafe { OwnedFd::from_raw_fd(fd) });
        }
        refused = Some(io::Error::last_os_error());
    }
    let device = OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_CLOEXEC)
        .open("/dev/userfaultfd")
        .map_err(|source| {
            // Without the device, the system call's refusal says more (EPERM: the sysctl).
            let missing = source.kind() == io::ErrorKind::NotFound;
            let source = if missing {
                refused.unwrap_or(source)
            } else {
                source
            };
            TrackError::UffdRefused { source }
        })?;
    // SAFETY: USERFAULTFD_IOC_NEW takes the flags as its argument and returns a new fd or -1.
    let fd = unsafe { libc::ioctl(device.as_raw_fd(), USERFAULTFD_IOC_NEW, flags) };
    if fd < 0 {
        return Err(TrackError::UffdRefused {
            source: io::Error::last_os_error(),
        });
    }
    // SAFETY: a fresh fd that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_device_opens_a_userfaultfd_when_the_system_call_is_not_used() {
        // This machine runs tests as root, so both ways must work.
        let region = Region::with_pages(2).expect("map 2 pages");
        register(&region, Opener::Device).expect("userfaultfd through /dev/userfaultfd");
        register(&region, Opener::Syscall).expect("userfaultfd through the system call");
    }
}
