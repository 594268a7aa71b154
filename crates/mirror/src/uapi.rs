//! The kernel's userfaultfd and pagemap ABI, written out by hand from the uapi headers.
//!
//! The system's headers here predate `PAGEMAP_SCAN` and `UFFD_FEATURE_WP_ASYNC`, and the
//! `userfaultfd` crate needs libclang to build, so the numbers and structs are copied from the
//! kernel's `include/uapi/linux/userfaultfd.h` and `include/uapi/linux/fs.h` (Linux 6.7 and
//! later); each item names its header. The unit tests pin every size and ioctl number.

use libc::Ioctl;

/// `_IOC` of `asm-generic/ioctl.h`: direction, size, type and number packed in one word.
const fn ioc(direction: u32, kind: u32, number: u32, size: usize) -> Ioctl {
    assert!(size < (1 << 14), "an ioctl argument's size has 14 bits");
    ((direction << 30) | ((size as u32) << 16) | (kind << 8) | number) as Ioctl
}

/// `_IOC_WRITE | _IOC_READ` (`asm-generic/ioctl.h`): the kernel reads and writes the argument.
const IOC_READ_WRITE: u32 = 3;
/// `_IOC_READ` (`asm-generic/ioctl.h`).
const IOC_READ: u32 = 2;
/// `_IOC_NONE` (`asm-generic/ioctl.h`).
const IOC_NONE: u32 = 0;

/// `UFFDIO` (`linux/userfaultfd.h`): the ioctl type of userfaultfd.
const UFFDIO: u32 = 0xAA;

/// `UFFD_API` (`linux/userfaultfd.h`): the only API version.
pub(crate) const UFFD_API: u64 = 0xAA;
/// `UFFD_USER_MODE_ONLY` (`linux/userfaultfd.h`): handle faults from user mode only, which
/// `vm.unprivileged_userfaultfd=0` still lets an unprivileged process open.
pub(crate) const UFFD_USER_MODE_ONLY: libc::c_int = 1;
/// `UFFD_FEATURE_WP_UNPOPULATED` (`linux/userfaultfd.h`): write-protect pages never touched too.
pub(crate) const UFFD_FEATURE_WP_UNPOPULATED: u64 = 1 << 13;
/// `UFFD_FEATURE_WP_ASYNC` (`linux/userfaultfd.h`): the kernel resolves a write-protect fault
/// itself (clearing the page's protection) instead of waking a handler thread.
pub(crate) const UFFD_FEATURE_WP_ASYNC: u64 = 1 << 15;
/// `UFFDIO_REGISTER_MODE_WP` (`linux/userfaultfd.h`).
pub(crate) const UFFDIO_REGISTER_MODE_WP: u64 = 1 << 1;
/// `UFFDIO_WRITEPROTECT_MODE_WP` (`linux/userfaultfd.h`): protect (0 unprotects).
pub(crate) const UFFDIO_WRITEPROTECT_MODE_WP: u64 = 1 << 0;
/// `1 << _UFFDIO_WRITEPROTECT` (`linux/userfaultfd.h`): in `UffdioRegister::ioctls` when the
/// registered range may be write-protected.
pub(crate) const UFFDIO_WRITEPROTECT_ALLOWED: u64 = 1 << 0x06;

/// `struct uffdio_api` (`linux/userfaultfd.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UffdioApi {
    pub(crate) api: u64,
    pub(crate) features: u64,
    pub(crate) ioctls: u64,
}

/// `struct uffdio_range` (`linux/userfaultfd.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UffdioRange {
    pub(crate) start: u64,
    pub(crate) len: u64,
}

/// `struct uffdio_register` (`linux/userfaultfd.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UffdioRegister {
    pub(crate) range: UffdioRange,
    pub(crate) mode: u64,
    pub(crate) ioctls: u64,
}

/// `struct uffdio_writeprotect` (`linux/userfaultfd.h`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct UffdioWriteprotect {
    pub(crate) range: UffdioRange,
    pub(crate) mode: u64,
}

/// `UFFDIO_API` (`linux/userfaultfd.h`): `_IOWR(UFFDIO, 0x3F, struct uffdio_api)`.
pub(crate) const UFFDIO_API: Ioctl = ioc(IOC_READ_WRITE, UFFDIO, 0x3F, size_of::<UffdioApi>());
/// `UFFDIO_REGISTER` (`linux/userfaultfd.h`): `_IOWR(UFFDIO, 0x00, struct uffdio_register)`.
pub(crate) const UFFDIO_REGISTER: Ioctl =
    ioc(IOC_READ_WRITE, UFFDIO, 0x00, size_of::<UffdioRegister>());
/// `UFFDIO_UNREGISTER` (`linux/userfaultfd.h`): `_IOR(UFFDIO, 0x01, struct uffdio_range)`.
pub(crate) const UFFDIO_UNREGISTER: Ioctl = ioc(IOC_READ, UFFDIO, 0x01, size_of::<UffdioRange>());
/// `UFFDIO_WRITEPROTECT` (`linux/userfaultfd.h`):
/// `_IOWR(UFFDIO, 0x06, struct uffdio_writeprotect)`.
pub(crate) const UFFDIO_WRITEPROTECT: Ioctl = ioc(
    IOC_READ_WRITE,
    UFFDIO,
    0x06,
    size_of::<UffdioWriteprotect>(),
);
/// `USERFAULTFD_IOC_NEW` (`linux/userfaultfd.h`): `_IO(USERFAULTFD_IOC, 0x00)` on
/// `/dev/userfaultfd`, whose argument is the flags `userfaultfd(2)` would take.
pub(crate) const USERFAULTFD_IOC_NEW: Ioctl = ioc(IOC_NONE, 0xAA, 0x00, 0);

/// `PAGE_IS_WRITTEN` (`linux/fs.h`): the page is not write-protected by userfaultfd, that is,
/// it was written since it was last protected.
pub(crate) const PAGE_IS_WRITTEN: u64 = 1 << 1;
/// `PM_SCAN_WP_MATCHING` (`linux/fs.h`): write-protect the pages reported, atomically with
/// reading their state (under the page table lock).
pub(crate) const PM_SCAN_WP_MATCHING: u64 = 1 << 0;
/// `PM_SCAN_CHECK_WPASYNC` (`linux/fs.h`): fail rather than walk a page not registered for
/// asynchronous write-protect.
pub(crate) const PM_SCAN_CHECK_WPASYNC: u64 = 1 << 1;

/// `struct page_region` (`linux/fs.h`): a run of pages with the same categories.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PageRegion {
    pub(crate) start: u64,
    /// Exclusive.
    pub(crate) end: u64,
    pub(crate) categories: u64,
}

/// `struct pm_scan_arg` (`linux/fs.h`): the argument of `PAGEMAP_SCAN`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct PmScanArg {
    pub(crate) size: u64,
    pub(crate) flags: u64,
    pub(crate) start: u64,
    pub(crate) end: u64,
    /// Written by the kernel: where the walk stopped (`end` when it covered the whole range).
    pub(crate) walk_end: u64,
    pub(crate) vec: u64,
    pub(crate) vec_len: u64,
    pub(crate) max_pages: u64,
    pub(crate) category_inverted: u64,
    pub(crate) category_mask: u64,
    pub(crate) category_anyof_mask: u64,
    pub(crate) return_mask: u64,
}

/// `PAGEMAP_SCAN` (`linux/fs.h`): `_IOWR('f', 16, struct pm_scan_arg)`, on `/proc/*/pagemap`.
pub(crate) const PAGEMAP_SCAN: Ioctl = ioc(IOC_READ_WRITE, b'f' as u32, 16, size_of::<PmScanArg>());

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn struct_sizes_match_the_kernel_headers() {
        assert_eq!(size_of::<UffdioApi>(), 24);
        assert_eq!(size_of::<UffdioRange>(), 16);
        assert_eq!(size_of::<UffdioRegister>(), 32);
        assert_eq!(size_of::<UffdioWriteprotect>(), 24);
        assert_eq!(size_of::<PageRegion>(), 24);
        assert_eq!(size_of::<PmScanArg>(), 96);
    }

    #[test]
    fn ioctl_numbers_match_the_kernel_headers() {
        // The values the C macros expand to on x86-64 and arm64 (asm-generic/ioctl.h).
        assert_eq!(UFFDIO_API, 0xC018_AA3F);
        assert_eq!(UFFDIO_REGISTER, 0xC020_AA00);
        assert_eq!(UFFDIO_UNREGISTER, 0x8010_AA01);
        assert_eq!(UFFDIO_WRITEPROTECT, 0xC018_AA06);
        assert_eq!(USERFAULTFD_IOC_NEW, 0xAA00);
        assert_eq!(PAGEMAP_SCAN, 0xC060_6610);
    }
}
