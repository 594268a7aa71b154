//! The mapped bytes a tracker watches: an anonymous private mapping between two guard pages.
//!
//! `unsafe` here is the mapping itself: `mmap`, `mprotect`, `madvise`, `munmap`, and the slices
//! over the mapped bytes. The region is only ever reached through `&self` (reads) and
//! `&mut self` (writes), so a slice handed out never aliases a mutable one. Changing a page's
//! protection (`set_writable`) does not touch its bytes: a store to a read-only page faults,
//! and the tracker that made it read-only serves the fault.

#![allow(unsafe_code)]

use std::ptr::NonNull;
use std::sync::OnceLock;

use crate::TrackError;

/// The system's page size, read once with `sysconf(_SC_PAGESIZE)`.
pub fn page_size() -> usize {
    static PAGE_SIZE: OnceLock<usize> = OnceLock::new();
    *PAGE_SIZE.get_or_init(|| {
        // SAFETY: sysconf reads a constant of the system; it has no memory effects.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        let size = usize::try_from(size).expect("sysconf(_SC_PAGESIZE) is positive");
        assert!(size.is_power_of_two(), "the page size is a power of two");
        size
    })
}

/// Page-aligned memory of whole pages that a program writes with ordinary stores.
///
/// The mapping is anonymous and private, with one inaccessible guard page on each side, so
/// it never merges with a neighbouring mapping (a merge would hand it the neighbour's
/// soft-dirty flag). It is advised `MADV_NOHUGEPAGE`: tracking is per base page, and a huge
/// page would make one store dirty 512 pages. Unmapped on drop.
#[derive(Debug)]
pub struct Region {
    /// The first byte after the leading guard page.
    base: NonNull<u8>,
    len: usize,
    page_size: usize,
}

// SAFETY: a `Region` owns its mapping exclusively, like a `Vec<u8>` owns its buffer: moving it
// to another thread moves that ownership; shared references only read.
unsafe impl Send for Region {}
// SAFETY: `&Region` only reads the bytes (`as_slice`) or changes page protections, which the
// kernel serialises; writes need `&mut Region`.
unsafe impl Sync for Region {}

impl Region {
    /// Maps `len` zeroed bytes. `len` must be a positive multiple of [`page_size`] (a
    /// programmer error otherwise); see [`Region::with_pages`].
    pub fn new(len: usize) -> Result<Region, TrackError> {
        let page_size = page_size();
        assert!(len > 0, "a region holds at least one page");
        assert!(
            len.is_multiple_of(page_size),
            "a region of {len} bytes is not whole {page_size}-byte pages"
        );
        let len_mapped = len
            .checked_add(2 * page_size)
            .expect("region length overflows");
        // SAFETY: a fresh anonymous mapping at an address the kernel picks; nothing else
        // refers to that range.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len_mapped,
                libc::PROT_NONE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return Err(TrackError::last_os("mmap"));
        }
        let base = NonNull::new(mapped.cast::<u8>().wrapping_add(page_size))
            .expect("mmap never maps at address 0");
        let region = Region {
            base,
            len,
            page_size,
        };
        region.set_writable(0, region.page_count(), true)?;
        // SAFETY: advice on our own mapping; it changes no byte.
        if unsafe { libc::madvise(base.as_ptr().cast(), len, libc::MADV_NOHUGEPAGE) } != 0 {
            return Err(TrackError::last_os("madvise(MADV_NOHUGEPAGE)"));
        }
        Ok(region)
    }

    /// Maps `pages` zeroed pages.
    pub fn with_pages(pages: usize) -> Result<Region, TrackError> {
        Region::new(
            pages
                .checked_mul(page_size())
                .expect("region length overflows"),
        )
    }

    pub fn as_ptr(&self) -> *const u8 {
        self.base.as_ptr()
    }

    pub fn as_mut_ptr(&mut self) -> *mut u8 {
        self.base.as_ptr()
    }

    /// In bytes: a multiple of [`Region::page_size`].
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: a region holds at least one page.
    pub fn is_empty(&self) -> bool {
        false
    }

    pub fn page_count(&self) -> usize {
        self.len / self.page_size
    }

    pub fn page_size(&self) -> usize {
        self.page_size
    }

    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: `base..base + len` is mapped readable for as long as `self` lives, and no
        // `&mut [u8]` over it exists while `&self` is borrowed.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as `as_slice`, and `&mut self` makes this slice the only one. A page may be
        // read-only for a tracker: a store to it faults and the tracker's handler makes it
        // writable before the store runs again, so the slice is writable as far as the program
        // can tell.
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr(), self.len) }
    }

    /// The bytes of page `index`.
    pub fn page(&self, index: usize) -> &[u8] {
        assert!(
            index < self.page_count(),
            "page {index} is past the region's end"
        );
        &self.as_slice()[index * self.page_size..(index + 1) * self.page_size]
    }

    /// The address range as two integers, for the kernel and the SIGSEGV handler.
    pub(crate) fn address_range(&self) -> (usize, usize) {
        (self.base.as_ptr() as usize, self.len)
    }

    /// Makes `pages` pages from `first` writable (read-write) or read-only.
    pub(crate) fn set_writable(
        &self,
        first: usize,
        pages: usize,
        writable: bool,
    ) -> Result<(), TrackError> {
        assert!(
            first + pages <= self.page_count(),
            "pages past the region's end"
        );
        let protection = if writable {
            libc::PROT_READ | libc::PROT_WRITE
        } else {
            libc::PROT_READ
        };
        let start = self.base.as_ptr().wrapping_add(first * self.page_size);
        // SAFETY: the pages lie inside our mapping; changing their protection changes no byte
        // (a store to a read-only page faults, and the tracker that made it so serves it).
        if unsafe { libc::mprotect(start.cast(), pages * self.page_size, protection) } != 0 {
            return Err(TrackError::last_os("mprotect"));
        }
        Ok(())
    }
}

impl Drop for Region {
    fn drop(&mut self) {
        let start = self.base.as_ptr().wrapping_sub(self.page_size);
        // SAFETY: the whole mapping, guard pages included, made in `Region::new`; no slice over
        // it outlives `self`.
        let unmapped = unsafe { libc::munmap(start.cast(), self.len + 2 * self.page_size) };
        assert!(unmapped == 0, "munmap of a region's own mapping failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_region_is_whole_aligned_pages() {
        let mut region = Region::with_pages(3).expect("map 3 pages");
        assert_eq!(region.page_size(), page_size());
        assert_eq!(region.len(), 3 * page_size());
        assert_eq!(region.page_count(), 3);
        assert_eq!(region.as_ptr() as usize % page_size(), 0);
        assert!(region.as_slice().iter().all(|&byte| byte == 0));
        region.as_mut_slice()[page_size()] = 7;
        assert_eq!(region.page(1)[0], 7);
    }

    #[test]
    #[should_panic(expected = "not whole")]
    fn a_length_of_part_of_a_page_is_a_bug() {
        let _ = Region::new(page_size() + 1);
    }
}
