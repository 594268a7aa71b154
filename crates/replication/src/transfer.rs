//! State transfer: how a member catches up when the primary's retained tail no longer holds
//! the records after its LSN (a node that rejoins after a long absence, or after a restart
//! that reloaded the initial database).
//!
//! The member's segment is the group's history at its LSN `lsn_from`, so the only pages it
//! lacks are those changed after `lsn_from`: the primary sends exactly those, each with its
//! page version, as its segment stands at its LSN `lsn` (the page-version transfer of DESIGN.md:
//! a node fetches only what changed). The member stages every chunk and installs them at once,
//! so a transfer cut short leaves its segment as it was.
//!
//! A chunk's bytes are entries of `[page u32 LE][version u64 LE][PAGE_SIZE bytes]`.

use std::sync::Arc;

use tandem_memory::{InstallError, Segment};

/// Pages per chunk: one message carries 256 KiB of pages.
pub const PAGES_PER_CHUNK: usize = 64;

const PAGE_SIZE: usize = tandem_memory::PAGE_SIZE;
const ENTRY_HEADER_LEN: usize = 4 + 8;
/// Bytes of one page entry in a chunk.
pub const ENTRY_LEN: usize = ENTRY_HEADER_LEN + PAGE_SIZE;

/// Why a transfer could not be installed; the segment is untouched.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TransferError {
    #[error("chunk {index} is {len} bytes, not a whole number of {ENTRY_LEN}-byte page entries")]
    ChunkLen { index: usize, len: usize },
    #[error("the transfer starts at LSN {lsn_from}, after this segment's LSN {lsn_segment}")]
    Ahead { lsn_from: u64, lsn_segment: u64 },
    #[error(transparent)]
    Install(#[from] InstallError),
}

/// A whole transfer, staged by the receiver for the applier: the pages changed after
/// `lsn_from`, as they stood at `lsn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PageImage {
    pub lsn_from: u64,
    pub lsn: u64,
    pub chunks: Vec<Arc<[u8]>>,
}

impl PageImage {
    /// Brings `segment` (at an LSN of at least `lsn_from`) to `lsn`. Every chunk is decoded and
    /// every page checked before the first byte is written.
    pub fn install(&self, segment: &mut Segment) -> Result<(), TransferError> {
        let chunks = self.chunks.iter().map(|chunk| &chunk[..]);
        install_chunks(segment, self.lsn_from, self.lsn, chunks)
    }

    /// Pages the image carries.
    pub fn page_count(&self) -> usize {
        self.chunks
            .iter()
            .map(|chunk| chunk.len() / ENTRY_LEN)
            .sum()
    }
}

/// Brings `segment` (at an LSN of at least `lsn_from`) to `lsn` with the pages in `chunks`
/// (a transfer's, or a checkpoint's read from the log), borrowed where they lie. Every chunk is
/// decoded and every page checked before the first byte is written.
pub fn install_chunks<'a>(
    segment: &mut Segment,
    lsn_from: u64,
    lsn: u64,
    chunks: impl IntoIterator<Item = &'a [u8]>,
) -> Result<(), TransferError> {
    if lsn_from > segment.lsn() {
        return Err(TransferError::Ahead {
            lsn_from,
            lsn_segment: segment.lsn(),
        });
    }
    let mut pages = Vec::new();
    for (index, chunk) in chunks.into_iter().enumerate() {
        decode_chunk(index, chunk, &mut pages)?;
    }
    segment.install_pages(lsn, &pages)?;
    Ok(())
}

/// The pages of `segment` changed after `lsn_from`, and the pages `diverged` (ascending: the
/// member's own, which records the group discarded changed), in chunks of at most
/// [`PAGES_PER_CHUNK`] pages; at least one chunk (empty if nothing changed), so the member
/// always learns the LSN it is brought to.
pub fn capture(segment: &Segment, lsn_from: u64, diverged: &[u32]) -> Vec<Arc<[u8]>> {
    let mut chunks = Vec::new();
    let mut chunk = Vec::new();
    let mut diverged = diverged.iter().copied().peekable();
    #[cfg(feature = "inject-bugs")]
    let mut skip_one = tandem_memory::bugs::planted(tandem_memory::bugs::Bug::TransferShort);
    for page in 0..segment.pages() {
        let version = segment.page_version(page);
        let index = u32::try_from(page).expect("a segment has fewer than 2^32 pages");
        let wanted = diverged.next_if_eq(&index).is_some();
        if version <= lsn_from && !wanted {
            continue;
        }
        #[cfg(feature = "inject-bugs")]
        if std::mem::take(&mut skip_one) {
            continue;
        }
        chunk.extend_from_slice(&index.to_le_bytes());
        chunk.extend_from_slice(&version.to_le_bytes());
        chunk.extend_from_slice(segment.read(page * PAGE_SIZE, PAGE_SIZE));
        if chunk.len() == PAGES_PER_CHUNK * ENTRY_LEN {
            chunks.push(Arc::from(std::mem::take(&mut chunk)));
        }
    }
    assert!(
        diverged.next().is_none(),
        "the diverged pages are ascending and inside the segment"
    );
    if !chunk.is_empty() || chunks.is_empty() {
        chunks.push(Arc::from(chunk));
    }
    chunks
}

/// Whether the pages `chunks` carry include every page of `wanted` (ascending): a member
/// whose segment diverged checks a transfer before it takes it. Chunks must be whole
/// entries (a chunk that is not counts as covering nothing).
pub fn covers(chunks: &[Arc<[u8]>], wanted: &[u32]) -> bool {
    if wanted.is_empty() {
        return true;
    }
    let mut carried = Vec::new();
    for chunk in chunks {
        if !chunk.len().is_multiple_of(ENTRY_LEN) {
            return false;
        }
        for entry in chunk.chunks_exact(ENTRY_LEN) {
            carried.push(u32::from_le_bytes(entry[..4].try_into().expect("4 bytes")));
        }
    }
    carried.sort_unstable();
    wanted
        .iter()
        .all(|page| carried.binary_search(page).is_ok())
}

fn decode_chunk<'a>(
    index: usize,
    chunk: &'a [u8],
    into: &mut Vec<(usize, u64, &'a [u8])>,
) -> Result<(), TransferError> {
    if !chunk.len().is_multiple_of(ENTRY_LEN) {
        let len = chunk.len();
        return Err(TransferError::ChunkLen { index, len });
    }
    for entry in chunk.chunks_exact(ENTRY_LEN) {
        let (header, bytes) = entry.split_at(ENTRY_HEADER_LEN);
        let page = u32::from_le_bytes(header[..4].try_into().expect("4 bytes"));
        let version = u64::from_le_bytes(header[4..].try_into().expect("8 bytes"));
        into.push((page as usize, version, bytes));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use tandem_memory::Strategy;

    use super::*;

    fn commit(segment: &mut Segment, offset: usize, value: u64) {
        let mut txn = segment.begin();
        *txn.set_pod::<u64>(offset) = value;
        txn.commit();
    }

    #[test]
    fn a_capture_carries_the_diverged_pages_and_covers_says_so() {
        let mut segment = Segment::anonymous(8 * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        commit(&mut segment, 0, 1);
        commit(&mut segment, 5 * PAGE_SIZE, 2);
        // Changed after LSN 1: page 5; diverged on the member: pages 3 and 5.
        let chunks = capture(&segment, 1, &[3, 5]);
        let mut pages = Vec::new();
        for (index, chunk) in chunks.iter().enumerate() {
            decode_chunk(index, chunk, &mut pages).unwrap();
        }
        let carried: Vec<(usize, u64)> = pages.iter().map(|&(page, v, _)| (page, v)).collect();
        assert_eq!(carried, vec![(3, 0), (5, 2)]);
        assert!(covers(&chunks, &[3, 5]));
        assert!(covers(&chunks, &[]));
        assert!(!covers(&chunks, &[0, 3]));
        let plain = capture(&segment, 1, &[]);
        assert!(!covers(&plain, &[3]));
    }

    #[test]
    fn a_member_behind_gets_only_the_pages_changed_and_ends_equal() {
        let pages = 3 * PAGES_PER_CHUNK;
        let mut primary = Segment::anonymous(pages * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        let mut member = Segment::anonymous(pages * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        commit(&mut primary, 0, 1);
        member
            .install_pages(1, &[(0, 1, primary.read(0, PAGE_SIZE))])
            .unwrap();
        // After the member's LSN, 100 pages change, one of them twice.
        for page in 1..=100 {
            commit(&mut primary, page * PAGE_SIZE, 7);
        }
        commit(&mut primary, PAGE_SIZE, 8);
        let chunks = capture(&primary, member.lsn(), &[]);
        let image = PageImage {
            lsn_from: member.lsn(),
            lsn: primary.lsn(),
            chunks,
        };
        assert_eq!(
            image.chunks.len(),
            2,
            "100 pages in chunks of {PAGES_PER_CHUNK}"
        );
        assert_eq!(image.page_count(), 100);
        image.install(&mut member).unwrap();
        assert_eq!(member.lsn(), primary.lsn());
        assert!(member.bytes() == primary.bytes());
        assert_eq!(member.page_versions(), primary.page_versions());
    }

    #[test]
    fn nothing_changed_is_one_empty_chunk_that_moves_the_lsn() {
        let mut segment = Segment::anonymous(4 * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        commit(&mut segment, 0, 1);
        let chunks = capture(&segment, 1, &[]);
        assert_eq!(chunks.len(), 1);
        assert!(chunks[0].is_empty());
    }

    #[test]
    fn a_malformed_or_misplaced_image_is_refused_untouched() {
        let mut segment = Segment::anonymous(4 * PAGE_SIZE, Strategy::V3InlineLog).unwrap();
        let torn = PageImage {
            lsn_from: 0,
            lsn: 3,
            chunks: vec![Arc::from(vec![0u8; ENTRY_LEN + 5])],
        };
        assert_eq!(
            torn.install(&mut segment),
            Err(TransferError::ChunkLen {
                index: 0,
                len: ENTRY_LEN + 5
            })
        );
        let ahead = PageImage {
            lsn_from: 2,
            lsn: 3,
            chunks: vec![Arc::from(Vec::new())],
        };
        assert_eq!(
            ahead.install(&mut segment),
            Err(TransferError::Ahead {
                lsn_from: 2,
                lsn_segment: 0
            })
        );
        assert_eq!(segment.lsn(), 0);
    }
}
