//! The mapped bytes under a segment: an anonymous mapping or a file mapped shared.
//!
//! This is the only module of tandem with `unsafe` code. Mapping a file is unsafe because
//! another process could change or truncate the file while it is mapped; tandem owns the
//! files under its data directory and never maps the same file twice. Prefetching is unsafe
//! only because it is a CPU intrinsic taking a pointer; it reads nothing the program can see.

#![allow(unsafe_code)]

use std::fs::OpenOptions;
use std::io;
use std::path::Path;

use memmap2::{Advice, MmapMut, MmapOptions};

/// A fixed-length mapping of writable bytes.
#[derive(Debug)]
pub(crate) struct Region {
    map: MmapMut,
}

impl Region {
    /// Maps `len` zeroed bytes not backed by any file.
    pub(crate) fn anonymous(len: usize) -> io::Result<Region> {
        assert!(len > 0, "a region must not be empty");
        let map = MmapOptions::new().len(len).map_anon()?;
        // Transparent huge pages cut TLB misses on random record access. The advice is a hint;
        // a kernel that refuses it still gives a correct mapping, so its error is ignored.
        let _ = map.advise(Advice::HugePage);
        Ok(Region { map })
    }

    /// Maps the file at `path`, creating it (zero-filled) when it does not exist.
    ///
    /// An existing file must already be exactly `len` bytes long: a segment never silently
    /// grows or truncates data it did not write.
    pub(crate) fn file(path: &Path, len: usize) -> io::Result<Region> {
        assert!(len > 0, "a region must not be empty");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(path)?;
        let len_file = file.metadata()?.len();
        let len_wanted = u64::try_from(len).expect("usize fits in u64");
        if len_file == 0 {
            file.set_len(len_wanted)?;
        } else if len_file != len_wanted {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "segment file {} is {len_file} bytes but the segment is {len_wanted} bytes; \
                     use the size it was created with or remove the file",
                    path.display()
                ),
            ));
        }
        // SAFETY: the file was opened read-write above and is exactly `len` bytes long. tandem
        // maps each segment file once and does not let other code resize it while mapped; a
        // foreign process truncating it is outside the model (the mapping would fault, not
        // corrupt memory safety of other objects).
        let map = unsafe { MmapOptions::new().len(len).map_mut(&file)? };
        Ok(Region { map })
    }

    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    pub(crate) fn bytes(&self) -> &[u8] {
        &self.map
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        &mut self.map
    }

    /// Asks the CPU to start loading the cache line holding byte `offset` (ignored past the end).
    #[inline]
    pub(crate) fn prefetch(&self, offset: usize) {
        if let Some(byte) = self.map.get(offset) {
            prefetch_line(byte);
        }
    }

    /// Writes dirty pages of a file mapping back to the file (a no-op for anonymous memory).
    pub(crate) fn flush(&self) -> io::Result<()> {
        self.map.flush()
    }
}

/// Asks the CPU to start loading the cache line holding `value` into the nearest cache.
#[inline]
pub(crate) fn prefetch_line<T>(value: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: the pointer comes from a live reference. A prefetch is a hint: it never faults,
    // never writes, and its result is not observable by the program.
    unsafe {
        use std::arch::x86_64::{_MM_HINT_T0, _mm_prefetch};
        _mm_prefetch::<_MM_HINT_T0>(std::ptr::from_ref(value).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = value;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn anonymous_region_is_zeroed_and_writable() {
        let mut region = Region::anonymous(8192).unwrap();
        assert_eq!(region.len(), 8192);
        assert!(region.bytes().iter().all(|&b| b == 0));
        region.bytes_mut()[8191] = 7;
        assert_eq!(region.bytes()[8191], 7);
    }

    #[test]
    fn prefetch_anywhere_is_harmless() {
        let region = Region::anonymous(4096).unwrap();
        for offset in [0, 4095, 4096, usize::MAX] {
            region.prefetch(offset);
        }
        assert!(region.bytes().iter().all(|&b| b == 0));
    }

    #[test]
    fn file_region_keeps_bytes_across_mappings() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        {
            let mut region = Region::file(&path, 4096).unwrap();
            region.bytes_mut()[10] = 42;
            region.flush().unwrap();
        }
        let region = Region::file(&path, 4096).unwrap();
        assert_eq!(region.bytes()[10], 42);
    }

    #[test]
    fn file_region_refuses_a_size_change() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("seg");
        drop(Region::file(&path, 4096).unwrap());
        let err = Region::file(&path, 8192).unwrap_err();
        assert!(
            err.to_string()
                .contains("4096 bytes but the segment is 8192"),
            "{err}"
        );
    }
}
