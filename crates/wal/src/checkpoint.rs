//! The on-disk layout of a checkpoint file: an image of a node's database as it stood at one LSN,
//! in the state-transfer chunk format, written beside the log's segments so that the segments
//! it covers can go.
//!
//! Everything here is pure, as in `format`: it encodes into and decodes from byte slices, so
//! what recovery accepts can be tested byte by byte. The writer is [`crate::Wal`]'s
//! `checkpoint_begin`, `checkpoint_append` and `checkpoint_finish`.
//!
//! ```text
//! checkpoint file, all integers little-endian:
//!   header (36 bytes)
//!     0  4  magic        "TCKP"
//!     4  2  version      1
//!     6  2  reserved     0
//!     8  8  lsn          the database as it stood at this LSN (>= 1; also in the file name)
//!    16  8  view         the view whose history its records follow (the role rule reads it)
//!    24  4  chunk_count  chunks that follow
//!    28  4  reserved     0
//!    32  4  crc32c       of bytes 0..32
//!   then chunk_count chunks, each framed:
//!     0  4  len          bytes of the chunk
//!     4  4  index        0, 1, 2, ... in order
//!     8  4  crc32c       of bytes 0..8, then the chunk
//!    12  len chunk       opaque (the state-transfer chunk: [page u32][version u64][4096 bytes]…)
//!   then the trailer (20 bytes), which says the file is complete:
//!     0  4  magic        "TEND"
//!     4  4  chunk_count  as in the header
//!     8  8  lsn          as in the header
//!    16  4  crc32c       of bytes 0..16
//!   and nothing after it.
//! ```
//!
//! The chunk's index is inside its checksum so that a chunk can be neither lost nor repeated
//! without the file being refused; the trailer repeats the header's fields so that a file cut
//! short exactly at a chunk boundary is told apart from a complete one.

use std::ops::Range;
use std::path::{Path, PathBuf};

/// The header's magic, so that a stray file is never read as a checkpoint.
pub const CHECKPOINT_MAGIC: [u8; 4] = *b"TCKP";
/// The checkpoint format's version: a file of another version stops recovery (it is never
/// removed), as a segment of another version does.
pub const CHECKPOINT_VERSION: u16 = 1;
pub const CHECKPOINT_HEADER_LEN: usize = 36;
/// Size of the frame in front of each chunk: its length, its index and its checksum.
pub const CHECKPOINT_CHUNK_HEADER_LEN: usize = 12;
/// The trailer's magic: a file that ends with a valid trailer is complete.
pub const CHECKPOINT_TRAILER_MAGIC: [u8; 4] = *b"TEND";
pub const CHECKPOINT_TRAILER_LEN: usize = 20;

const NAME_PREFIX: &str = "ckpt-";
/// What a complete checkpoint's file name ends with.
pub const CHECKPOINT_SUFFIX: &str = ".ckpt";
/// What a checkpoint being written is named with until it is complete and synced.
pub const CHECKPOINT_TEMP_SUFFIX: &str = ".tmp";
/// Digits of the zero-padded LSN in a checkpoint's name, enough for any `u64`, so that names
/// sort as LSNs do.
const NAME_DIGITS: usize = 20;

/// A checkpoint file's name: `ckpt-<lsn, 20 digits>.ckpt`, or `.tmp` while it is written.
pub fn checkpoint_name(lsn: u64, temporary: bool) -> String {
    assert!(
        lsn >= 1,
        "a checkpoint stands at an LSN, and LSNs start at 1"
    );
    let suffix = if temporary {
        CHECKPOINT_TEMP_SUFFIX
    } else {
        CHECKPOINT_SUFFIX
    };
    format!("{NAME_PREFIX}{lsn:0NAME_DIGITS$}{suffix}")
}

pub fn checkpoint_path(dir: &Path, lsn: u64, temporary: bool) -> PathBuf {
    dir.join(checkpoint_name(lsn, temporary))
}

/// The LSN a checkpoint file's name gives and whether it is temporary, or `None` for a file that
/// is not a checkpoint (which the log leaves alone).
pub fn parse_checkpoint_name(name: &str) -> Option<(u64, bool)> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let (digits, temporary) = match rest.strip_suffix(CHECKPOINT_SUFFIX) {
        Some(digits) => (digits, false),
        None => (rest.strip_suffix(CHECKPOINT_TEMP_SUFFIX)?, true),
    };
    if digits.len() != NAME_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    let lsn: u64 = digits.parse().ok()?;
    (lsn >= 1).then_some((lsn, temporary))
}

pub fn encode_checkpoint_header(lsn: u64, view: u64, chunk_count: u32, out: &mut Vec<u8>) {
    assert!(lsn >= 1);
    let start = out.len();
    out.extend_from_slice(&CHECKPOINT_MAGIC);
    out.extend_from_slice(&CHECKPOINT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&lsn.to_le_bytes());
    out.extend_from_slice(&view.to_le_bytes());
    out.extend_from_slice(&chunk_count.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(out.len() - start, CHECKPOINT_HEADER_LEN);
}

/// Appends chunk `index`'s frame and the chunk.
pub fn encode_checkpoint_chunk(index: u32, chunk: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(chunk.len()).expect("a checkpoint chunk fits in u32 bytes");
    let start = out.len();
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&index.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..]), chunk);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(chunk);
}

pub fn encode_checkpoint_trailer(lsn: u64, chunk_count: u32, out: &mut Vec<u8>) {
    let start = out.len();
    out.extend_from_slice(&CHECKPOINT_TRAILER_MAGIC);
    out.extend_from_slice(&chunk_count.to_le_bytes());
    out.extend_from_slice(&lsn.to_le_bytes());
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(out.len() - start, CHECKPOINT_TRAILER_LEN);
}

/// Why a checkpoint file is not a complete, valid checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
    /// Too short, a bad magic or checksum, nonzero reserved bytes: torn or damaged.
    #[error("the checkpoint header is torn or damaged")]
    TornHeader,
    /// A whole, checksummed header of another format version.
    #[error("checkpoint format version {found}, this node reads {CHECKPOINT_VERSION}")]
    Version { found: u16 },
    /// The header's LSN is not the one the file's name gives.
    #[error("the header says LSN {lsn_header}, the file name says {lsn_name}")]
    Misnamed { lsn_name: u64, lsn_header: u64 },
    /// A chunk's frame is cut short, or its checksum (or index) fails.
    #[error("chunk {index} of {count} is torn or damaged")]
    TornChunk { index: u32, count: u32 },
    /// The file ends without its trailer, or the trailer does not match the header.
    #[error("the trailer is missing, torn or does not match the header")]
    Incomplete,
    /// Bytes follow the trailer.
    #[error("{len} bytes follow the trailer")]
    TrailingBytes { len: usize },
}

/// Where each chunk of a checkpoint lies in its file's bytes, in order.
pub type ChunkRanges = Vec<Range<usize>>;

/// Decodes a whole checkpoint file named for `lsn_name` and returns its view and where its
/// chunks lie in `bytes` (not copied: a checkpoint is as large as the database it holds),
/// checking every checksum, the chunks' order and count, and the trailer, before anything is
/// believed.
pub fn decode_checkpoint(
    bytes: &[u8],
    lsn_name: u64,
) -> Result<(u64, ChunkRanges), CheckpointError> {
    let Some(header) = bytes.get(..CHECKPOINT_HEADER_LEN) else {
        return Err(CheckpointError::TornHeader);
    };
    let u32_at = |bytes: &[u8], at: usize| {
        u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"))
    };
    let u64_at = |bytes: &[u8], at: usize| {
        u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"))
    };
    if header[..4] != CHECKPOINT_MAGIC || crc32c::crc32c(&header[..32]) != u32_at(header, 32) {
        return Err(CheckpointError::TornHeader);
    }
    if header[6..8] != [0; 2] || header[28..32] != [0; 4] {
        return Err(CheckpointError::TornHeader);
    }
    let version = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
    if version != CHECKPOINT_VERSION {
        return Err(CheckpointError::Version { found: version });
    }
    let (lsn, view, count) = (u64_at(header, 8), u64_at(header, 16), u32_at(header, 24));
    if lsn != lsn_name {
        return Err(CheckpointError::Misnamed {
            lsn_name,
            lsn_header: lsn,
        });
    }
    // The count comes from a checksummed header, but it is not trusted to size an allocation
    // beyond what the file could hold.
    let count_max = bytes.len() / CHECKPOINT_CHUNK_HEADER_LEN;
    let mut chunks = Vec::with_capacity((count as usize).min(count_max));
    let mut offset = CHECKPOINT_HEADER_LEN;
    for index in 0..count {
        let torn = CheckpointError::TornChunk { index, count };
        let Some(frame) = bytes.get(offset..offset + CHECKPOINT_CHUNK_HEADER_LEN) else {
            return Err(torn);
        };
        let len = u32_at(frame, 0) as usize;
        let start = offset + CHECKPOINT_CHUNK_HEADER_LEN;
        let Some(chunk) = bytes.get(start..).and_then(|rest| rest.get(..len)) else {
            return Err(torn);
        };
        let crc = crc32c::crc32c_append(crc32c::crc32c(&frame[..8]), chunk);
        if crc != u32_at(frame, 8) || u32_at(frame, 4) != index {
            return Err(torn);
        }
        chunks.push(start..start + len);
        offset = start + len;
    }
    let Some(trailer) = bytes.get(offset..offset + CHECKPOINT_TRAILER_LEN) else {
        return Err(CheckpointError::Incomplete);
    };
    let trailer_valid = trailer[..4] == CHECKPOINT_TRAILER_MAGIC
        && crc32c::crc32c(&trailer[..16]) == u32_at(trailer, 16)
        && u32_at(trailer, 4) == count
        && u64_at(trailer, 8) == lsn;
    if !trailer_valid {
        return Err(CheckpointError::Incomplete);
    }
    let len = bytes.len() - offset - CHECKPOINT_TRAILER_LEN;
    if len > 0 {
        return Err(CheckpointError::TrailingBytes { len });
    }
    assert_eq!(chunks.len(), count as usize);
    Ok((view, chunks))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(lsn: u64, chunks: &[&[u8]]) -> Vec<u8> {
        let count = chunks.len() as u32;
        let mut bytes = Vec::new();
        encode_checkpoint_header(lsn, 3, count, &mut bytes);
        for (index, chunk) in chunks.iter().enumerate() {
            encode_checkpoint_chunk(index as u32, chunk, &mut bytes);
        }
        encode_checkpoint_trailer(lsn, count, &mut bytes);
        bytes
    }

    #[test]
    fn checkpoint_names_sort_as_their_lsns_and_parse_back() {
        let names: Vec<String> = [9, 10, 100, u64::MAX]
            .map(|lsn| checkpoint_name(lsn, false))
            .to_vec();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for lsn in [1, 77, u64::MAX] {
            for temporary in [false, true] {
                let name = checkpoint_name(lsn, temporary);
                assert_eq!(parse_checkpoint_name(&name), Some((lsn, temporary)));
            }
        }
        for name in [
            "ckpt-1.ckpt",
            "ckpt-00000000000000000000.ckpt",
            "ckpt-0000000000000000001x.tmp",
            "00000000000000000001.wal",
            "ckpt-00000000000000000001.wal",
        ] {
            assert_eq!(parse_checkpoint_name(name), None, "{name}");
        }
    }

    #[test]
    fn a_checkpoint_round_trips_and_every_cut_or_flipped_bit_is_refused() {
        let bytes = file(42, &[&[1; 40], &[], &[3; 17]]);
        let (view, chunks) = decode_checkpoint(&bytes, 42).unwrap();
        assert_eq!(view, 3);
        let chunks: Vec<&[u8]> = chunks.into_iter().map(|range| &bytes[range]).collect();
        assert_eq!(chunks, [&[1u8; 40][..], &[], &[3u8; 17]]);
        for len in 0..bytes.len() {
            assert!(decode_checkpoint(&bytes[..len], 42).is_err(), "{len} bytes");
        }
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_checkpoint(&flipped, 42).is_err(), "bit {bit}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_checkpoint(&longer, 42),
            Err(CheckpointError::TrailingBytes { len: 1 })
        );
        assert!(matches!(
            decode_checkpoint(&bytes, 41),
            Err(CheckpointError::Misnamed { .. })
        ));
    }

    #[test]
    fn an_empty_checkpoint_round_trips() {
        assert_eq!(decode_checkpoint(&file(5, &[]), 5), Ok((3, Vec::new())));
    }

    #[test]
    fn swapped_chunks_are_refused() {
        let mut bytes = Vec::new();
        encode_checkpoint_header(9, 3, 2, &mut bytes);
        encode_checkpoint_chunk(1, &[1; 8], &mut bytes);
        encode_checkpoint_chunk(0, &[2; 8], &mut bytes);
        encode_checkpoint_trailer(9, 2, &mut bytes);
        assert!(matches!(
            decode_checkpoint(&bytes, 9),
            Err(CheckpointError::TornChunk { index: 0, .. })
        ));
    }
}
