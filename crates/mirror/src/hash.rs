//! The memory hash an `End` frame carries, so the backup can tell it holds what the primary
//! holds: a 64-bit digest of the whole mirrored memory, kept up to date per page on both sides.
//!
//! Definition: each page's bytes give a crc32c; the pair (page index, crc) is mixed to 64 bits
//! by splitmix64's finalizer, a bijection; the hash is the wrapping sum of the mixes over every
//! page. The sum is what makes it incremental: when a page changes, its old mix is subtracted
//! and its new one added, so a checkpoint costs the hashing of the pages it ships, not of the
//! whole memory (256 MiB would take milliseconds at every checkpoint). The crc32c of a page is
//! computed by the CPU's instruction where there is one.
//!
//! What it detects: a page whose crc differs changes the hash (the mix is a bijection), so any
//! one wrong page is caught unless its crc collides (crc32c catches every error of 32 or fewer
//! adjacent bits; two random pages collide with probability 2^-32); several wrong pages cancel
//! out with probability about 2^-64. It guards against transfer and apply faults, not an
//! adversary.

/// Hashes `bytes`, whole pages of `page_size` bytes, from scratch: the same value the
/// incremental hash of either side holds for the same bytes (tests and checks use it).
pub fn hash_memory(bytes: &[u8], page_size: usize) -> u64 {
    assert!(page_size > 0, "pages hold at least a byte");
    assert!(
        bytes.len().is_multiple_of(page_size),
        "memory of {} bytes is not whole {page_size}-byte pages",
        bytes.len()
    );
    bytes
        .chunks_exact(page_size)
        .enumerate()
        .fold(0u64, |sum, (index, page)| {
            sum.wrapping_add(mix(page_index(index), crc32c::crc32c(page)))
        })
}

/// The crc32c of one page, as the hash counts it.
pub(crate) fn page_crc(bytes: &[u8]) -> u32 {
    crc32c::crc32c(bytes)
}

/// Mixes a page's index and crc to 64 bits with splitmix64's finalizer: a bijection of
/// `index << 32 | crc`, so distinct pairs never give the same mix.
fn mix(index: u32, crc: u32) -> u64 {
    let mut z = (u64::from(index) << 32) | u64::from(crc);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A page index as the hash and the frames carry it. Memories are at most `u32::MAX` pages
/// (`Checkpointer::new` and `Mirror::new` assert it).
pub(crate) fn page_index(index: usize) -> u32 {
    u32::try_from(index).expect("a page index fits in 32 bits")
}

/// Each page's crc and the hash over them, kept current as pages change.
#[derive(Debug, Clone)]
pub(crate) struct PageHashes {
    crcs: Vec<u32>,
    sum: u64,
}

impl PageHashes {
    /// The hashes of `pages` zeroed pages of `page_size` bytes: what a fresh memory holds.
    pub(crate) fn zeroed(pages: usize, page_size: usize) -> PageHashes {
        let crc = page_crc(&vec![0; page_size]);
        let sum = (0..pages).fold(0u64, |sum, index| {
            sum.wrapping_add(mix(page_index(index), crc))
        });
        PageHashes {
            crcs: vec![crc; pages],
            sum,
        }
    }

    /// The hash of the whole memory.
    pub(crate) fn sum(&self) -> u64 {
        self.sum
    }

    pub(crate) fn crc(&self, index: u32) -> u32 {
        self.crcs[index as usize]
    }

    /// Records that page `index` now has crc `crc`.
    pub(crate) fn set(&mut self, index: u32, crc: u32) {
        let old = std::mem::replace(&mut self.crcs[index as usize], crc);
        self.sum = self
            .sum
            .wrapping_sub(mix(index, old))
            .wrapping_add(mix(index, crc));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_incremental_hash_equals_the_hash_from_scratch() {
        let page_size = 64;
        let mut memory = vec![0u8; 5 * page_size];
        let mut hashes = PageHashes::zeroed(5, page_size);
        assert_eq!(hashes.sum(), hash_memory(&memory, page_size));
        for (index, byte) in [(3usize, 7u8), (0, 1), (3, 0), (4, 9)] {
            memory[index * page_size + 5] = byte;
            let page = &memory[index * page_size..(index + 1) * page_size];
            hashes.set(page_index(index), page_crc(page));
            assert_eq!(hashes.sum(), hash_memory(&memory, page_size));
        }
    }

    #[test]
    fn pages_swapped_change_the_hash() {
        let page_size = 16;
        let mut memory = vec![0u8; 2 * page_size];
        memory[0] = 1;
        let before = hash_memory(&memory, page_size);
        memory.swap(0, page_size);
        assert_ne!(before, hash_memory(&memory, page_size));
    }
}
