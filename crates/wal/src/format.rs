//! The on-disk layout of a segment file: its name, its header, the frame around each entry and
//! the image chunk's own encoding (a batch is stored in tandem-redo's format as it is).
//!
//! Everything here is pure: it encodes into and decodes from byte slices, and never touches a
//! file, so recovery's decisions can be tested byte by byte.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use crate::entry::ImageChunk;

/// The segment header's magic, so a stray file in the directory is never read as a segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"TWAL";
/// The segment format's version; recovery refuses (and never cuts) a segment of another one.
///
/// Version 2 added image chunks beside batches and names segments by a sequence number;
/// version 3 gives each image chunk the view it was transferred in. Older files are refused
/// like any other version (none was ever deployed).
pub const SEGMENT_VERSION: u16 = 3;
/// Size of the header at the start of every segment file.
pub const SEGMENT_HEADER_LEN: usize = 24;
/// Size of the frame in front of every entry: the length and the length's own checksum.
pub const FRAME_HEADER_LEN: usize = 8;
/// The image chunk's magic, where a batch has tandem-redo's "TB": the first bytes of a frame's
/// payload say which of the two it holds.
pub const IMAGE_MAGIC: [u8; 4] = *b"TIMG";
/// Size of the header in front of an image chunk's pages.
pub const IMAGE_HEADER_LEN: usize = 44;
/// The smallest payload a frame can hold: a batch's header alone (40 bytes; an image chunk
/// without pages is its 44-byte header).
pub const FRAME_PAYLOAD_MIN: usize = tandem_redo::batch::HEADER_LEN;

const _: () = assert!(FRAME_PAYLOAD_MIN <= IMAGE_HEADER_LEN);

/// What a segment file's name ends with.
pub const SEGMENT_SUFFIX: &str = ".wal";
/// Digits of the zero-padded sequence number in a segment file's name, enough for any `u64`.
const NAME_DIGITS: usize = 20;

/// A segment file's name: its sequence number, zero-padded so that names sort as numbers do.
///
/// Segments are numbered, not named by an LSN, because no LSN names a segment uniquely once
/// images are in the log: every chunk of an image sits at the same place in the LSN history,
/// and a batch trimmed by [`crate::Wal::cut_after`] starts at the LSN of the batch it replaces.
/// The log's order is the segments' order; the entries inside say which LSNs they hold.
pub fn segment_name(seq: u64) -> String {
    assert!(seq >= 1, "segments are numbered from 1");
    format!("{seq:0NAME_DIGITS$}{SEGMENT_SUFFIX}")
}

pub fn segment_path(dir: &Path, seq: u64) -> PathBuf {
    dir.join(segment_name(seq))
}

/// The sequence number a segment file's name gives, or `None` for a file that is not a segment
/// (which the log leaves alone).
pub fn parse_segment_name(name: &str) -> Option<u64> {
    let digits = name.strip_suffix(SEGMENT_SUFFIX)?;
    if digits.len() != NAME_DIGITS || !digits.bytes().all(|byte| byte.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok().filter(|&lsn| lsn >= 1)
}

/// The segment header, little-endian:
///
/// ```text
/// offset size field
///  0      4   magic       "TWAL"
///  4      2   version     2
///  6      2   reserved    0
///  8      8   seq         the segment's sequence number (also its file name)
/// 16      4   reserved    0
/// 20      4   crc32c      over bytes 0..20
/// ```
pub fn encode_segment_header(seq: u64, out: &mut Vec<u8>) {
    assert!(seq >= 1, "segments are numbered from 1");
    let start = out.len();
    out.extend_from_slice(&SEGMENT_MAGIC);
    out.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&seq.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(out.len() - start, SEGMENT_HEADER_LEN);
}

/// What the first bytes of a segment file say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentHeader {
    /// A whole, checksummed header of this format.
    Valid { seq: u64 },
    /// A whole, checksummed header of another format version.
    OtherVersion { version: u16 },
    /// Too short, a bad checksum, a bad magic or nonzero reserved bytes: a header that was
    /// torn by a crash (or damaged since).
    Torn,
}

pub fn decode_segment_header(bytes: &[u8]) -> SegmentHeader {
    let Some(header) = bytes.get(..SEGMENT_HEADER_LEN) else {
        return SegmentHeader::Torn;
    };
    let crc_stored = u32::from_le_bytes(header[20..24].try_into().expect("4 bytes"));
    if crc32c::crc32c(&header[..20]) != crc_stored || header[..4] != SEGMENT_MAGIC {
        return SegmentHeader::Torn;
    }
    if header[6..8] != [0; 2] || header[16..20] != [0; 4] {
        return SegmentHeader::Torn;
    }
    let version = u16::from_le_bytes(header[4..6].try_into().expect("2 bytes"));
    if version != SEGMENT_VERSION {
        return SegmentHeader::OtherVersion { version };
    }
    let seq = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if seq == 0 {
        return SegmentHeader::Torn;
    }
    SegmentHeader::Valid { seq }
}

/// Appends an entry's frame: its length (`u32`, little-endian), the CRC32C of those four length
/// bytes, then the entry's bytes (a batch exactly as sealed, or an encoded image chunk).
///
/// The length carries its own checksum because a torn or zeroed length would otherwise send
/// recovery to a wrong offset: it could read garbage as a length and skip valid data, or land
/// on a stale batch. A length whose check fails ends the log there.
pub fn encode_frame(payload: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(payload.len()).expect("an entry fits in u32 bytes");
    assert!(payload.len() >= FRAME_PAYLOAD_MIN);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&len.to_le_bytes()).to_le_bytes());
    out.extend_from_slice(payload);
}

/// The length of the entry whose frame starts `bytes`, if the frame header is whole, its check
/// holds, and that many bytes follow it.
pub fn decode_frame_len(bytes: &[u8]) -> Option<usize> {
    let header = bytes.get(..FRAME_HEADER_LEN)?;
    let len_bytes: [u8; 4] = header[..4].try_into().expect("4 bytes");
    let check = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c(&len_bytes) != check {
        return None;
    }
    let len = u32::from_le_bytes(len_bytes) as usize;
    if len < FRAME_PAYLOAD_MIN || len > bytes.len() - FRAME_HEADER_LEN {
        return None;
    }
    Some(len)
}

/// Whether a frame's payload is an image chunk (else it is a batch, or garbage).
pub fn is_image(payload: &[u8]) -> bool {
    payload.starts_with(&IMAGE_MAGIC)
}

/// Bytes of an image chunk's encoding: its header and its pages.
pub fn image_chunk_len(chunk: &ImageChunk) -> usize {
    IMAGE_HEADER_LEN + chunk.pages.len()
}

/// Appends an image chunk's encoding, little-endian:
///
/// ```text
/// offset size field
///  0      4   magic      "TIMG"
///  4      4   index      of this chunk, < count
///  8      4   count      chunks of the image, >= 1
/// 12      4   pages_len  bytes of pages after the header
/// 16      8   lsn_from   the image holds the pages changed after this LSN ...
/// 24      8   lsn        ... as they stood at this LSN (lsn_from <= lsn, lsn >= 1)
/// 32      4   crc32c     over bytes 0..32, then the pages
/// 36      …   pages      opaque to the log (replication's transfer chunk)
/// ```
pub fn encode_image_chunk(chunk: &ImageChunk, out: &mut Vec<u8>) {
    chunk.assert_valid();
    let start = out.len();
    let pages_len = u32::try_from(chunk.pages.len()).expect("a chunk's pages fit in u32 bytes");
    out.extend_from_slice(&IMAGE_MAGIC);
    out.extend_from_slice(&chunk.index.to_le_bytes());
    out.extend_from_slice(&chunk.count.to_le_bytes());
    out.extend_from_slice(&pages_len.to_le_bytes());
    out.extend_from_slice(&chunk.lsn_from.to_le_bytes());
    out.extend_from_slice(&chunk.lsn.to_le_bytes());
    out.extend_from_slice(&chunk.view.to_le_bytes());
    let crc = crc32c::crc32c_append(crc32c::crc32c(&out[start..]), &chunk.pages);
    out.extend_from_slice(&crc.to_le_bytes());
    out.extend_from_slice(&chunk.pages);
    assert_eq!(out.len() - start, image_chunk_len(chunk));
}

/// Why a frame's payload is not a valid image chunk.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ImageError {
    #[error("an image chunk needs at least {IMAGE_HEADER_LEN} header bytes, got {len}")]
    Short { len: usize },
    #[error("bad image chunk magic {found:?}")]
    Magic { found: [u8; 4] },
    #[error("image chunk field '{field}' is invalid: {detail}")]
    Header { field: &'static str, detail: String },
    #[error(
        "image chunk checksum mismatch: header says {expected:#010x}, bytes give {actual:#010x}"
    )]
    Checksum { expected: u32, actual: u32 },
}

/// Decodes a frame's payload as an image chunk, checking every header field and the checksum
/// before anything is believed.
pub fn decode_image_chunk(bytes: &[u8]) -> Result<ImageChunk, ImageError> {
    let Some(header) = bytes.get(..IMAGE_HEADER_LEN) else {
        return Err(ImageError::Short { len: bytes.len() });
    };
    let u32_at = |at: usize| u32::from_le_bytes(header[at..at + 4].try_into().expect("4 bytes"));
    let u64_at = |at: usize| u64::from_le_bytes(header[at..at + 8].try_into().expect("8 bytes"));
    let magic: [u8; 4] = header[..4].try_into().expect("4 bytes");
    if magic != IMAGE_MAGIC {
        return Err(ImageError::Magic { found: magic });
    }
    let pages = &bytes[IMAGE_HEADER_LEN..];
    let (index, count, pages_len) = (u32_at(4), u32_at(8), u32_at(12));
    let (lsn_from, lsn, view) = (u64_at(16), u64_at(24), u64_at(32));
    let invalid = |field, detail: String| Err(ImageError::Header { field, detail });
    if pages_len as usize != pages.len() {
        return invalid(
            "pages_len",
            format!("{pages_len} but {} bytes follow", pages.len()),
        );
    }
    let expected = u32_at(40);
    let actual = crc32c::crc32c_append(crc32c::crc32c(&header[..40]), pages);
    if expected != actual {
        return Err(ImageError::Checksum { expected, actual });
    }
    if count == 0 || index >= count {
        return invalid("index", format!("{index} of {count} chunks"));
    }
    if lsn == 0 || lsn_from > lsn {
        return invalid("lsn", format!("{lsn} with lsn_from {lsn_from}"));
    }
    Ok(ImageChunk {
        lsn_from,
        lsn,
        view,
        index,
        count,
        pages: Arc::from(pages),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_as_their_numbers() {
        let names: Vec<String> = [9, 10, 100, u64::MAX].map(segment_name).to_vec();
        let mut sorted = names.clone();
        sorted.sort();
        assert_eq!(names, sorted);
        for lsn in [1, 9, 10, u64::MAX] {
            assert_eq!(parse_segment_name(&segment_name(lsn)), Some(lsn));
        }
        for name in [
            "1.wal",
            "00000000000000000000.wal",
            "0000000000000000001x.wal",
            "x",
        ] {
            assert_eq!(parse_segment_name(name), None, "{name}");
        }
    }

    #[test]
    fn every_flipped_bit_of_a_segment_header_is_noticed() {
        let mut header = Vec::new();
        encode_segment_header(77, &mut header);
        assert_eq!(
            decode_segment_header(&header),
            SegmentHeader::Valid { seq: 77 }
        );
        assert_eq!(decode_segment_header(&header[..23]), SegmentHeader::Torn);
        for bit in 0..SEGMENT_HEADER_LEN * 8 {
            let mut flipped = header.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(
                decode_segment_header(&flipped),
                SegmentHeader::Torn,
                "bit {bit}"
            );
        }
    }

    fn chunk() -> ImageChunk {
        ImageChunk {
            lsn_from: 3,
            lsn: 9,
            view: 7,
            index: 1,
            count: 4,
            pages: Arc::from(&[5u8; 30][..]),
        }
    }

    #[test]
    fn an_image_chunk_round_trips_and_every_flipped_bit_is_noticed() {
        let mut bytes = Vec::new();
        encode_image_chunk(&chunk(), &mut bytes);
        assert!(is_image(&bytes));
        assert_eq!(decode_image_chunk(&bytes), Ok(chunk()));
        for len in 0..bytes.len() {
            assert!(decode_image_chunk(&bytes[..len]).is_err(), "{len} bytes");
        }
        for bit in 0..bytes.len() * 8 {
            let mut flipped = bytes.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert!(decode_image_chunk(&flipped).is_err(), "bit {bit}");
        }
    }

    #[test]
    fn an_image_chunk_with_a_valid_checksum_but_broken_fields_is_refused() {
        for (index, count, lsn_from, lsn) in
            [(4, 4, 3, 9), (0, 0, 3, 9), (0, 1, 10, 9), (0, 1, 0, 0)]
        {
            let mut bytes = Vec::new();
            encode_image_chunk(&chunk(), &mut bytes);
            bytes[4..8].copy_from_slice(&u32::to_le_bytes(index));
            bytes[8..12].copy_from_slice(&u32::to_le_bytes(count));
            bytes[16..24].copy_from_slice(&u64::to_le_bytes(lsn_from));
            bytes[24..32].copy_from_slice(&u64::to_le_bytes(lsn));
            let crc = crc32c::crc32c_append(crc32c::crc32c(&bytes[..40]), &bytes[44..]);
            bytes[40..44].copy_from_slice(&crc.to_le_bytes());
            assert!(
                matches!(decode_image_chunk(&bytes), Err(ImageError::Header { .. })),
                "{index} of {count}, {lsn_from}..{lsn}"
            );
        }
    }

    #[test]
    fn a_batch_is_never_taken_for_an_image() {
        let mut builder = tandem_redo::BatchBuilder::new(tandem_redo::BatchKind::Redo, 0, 1, 1);
        let mut record = tandem_memory::RedoRecord::empty(1);
        record.push_run(0, &[1]).unwrap();
        builder.push_redo(tandem_redo::CallId::default(), &record);
        assert!(!is_image(builder.seal().bytes()));
    }

    #[test]
    fn a_zeroed_or_torn_frame_length_is_refused() {
        let batch = vec![7; 100];
        let mut frame = Vec::new();
        encode_frame(&batch, &mut frame);
        assert_eq!(decode_frame_len(&frame), Some(100));
        assert_eq!(decode_frame_len(&frame[..frame.len() - 1]), None);
        assert_eq!(decode_frame_len(&[0; 200]), None, "zeros are not a frame");
        for bit in 0..FRAME_HEADER_LEN * 8 {
            let mut flipped = frame.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            assert_eq!(decode_frame_len(&flipped), None, "bit {bit}");
        }
    }
}
