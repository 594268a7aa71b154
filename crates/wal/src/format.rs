//! The on-disk layout of a segment file: its name, its header and the frame around each batch.
//!
//! Everything here is pure: it encodes into and decodes from byte slices, and never touches a
//! file, so recovery's decisions can be tested byte by byte.

use std::path::{Path, PathBuf};

/// The segment header's magic, so a stray file in the directory is never read as a segment.
pub const SEGMENT_MAGIC: [u8; 4] = *b"TWAL";
/// The segment format's version; recovery refuses (and never cuts) a segment of another one.
pub const SEGMENT_VERSION: u16 = 1;
/// Size of the header at the start of every segment file.
pub const SEGMENT_HEADER_LEN: usize = 24;
/// Size of the frame in front of every batch: the length and the length's own checksum.
pub const FRAME_HEADER_LEN: usize = 8;
/// What a segment file's name ends with.
pub const SEGMENT_SUFFIX: &str = ".wal";
/// Digits of the zero-padded first LSN in a segment file's name, enough for any `u64`.
const NAME_DIGITS: usize = 20;

/// A segment file's name: its first batch's LSN, zero-padded so that names sort as LSNs do.
pub fn segment_name(lsn_first: u64) -> String {
    assert!(lsn_first >= 1, "LSNs start at 1");
    format!("{lsn_first:0NAME_DIGITS$}{SEGMENT_SUFFIX}")
}

pub fn segment_path(dir: &Path, lsn_first: u64) -> PathBuf {
    dir.join(segment_name(lsn_first))
}

/// The first LSN a segment file's name gives, or `None` for a file that is not a segment (which
/// the log leaves alone).
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
///  4      2   version     1
///  6      2   reserved    0
///  8      8   lsn_first   LSN of the segment's first batch (also its file name)
/// 16      4   reserved    0
/// 20      4   crc32c      over bytes 0..20
/// ```
pub fn encode_segment_header(lsn_first: u64, out: &mut Vec<u8>) {
    assert!(lsn_first >= 1, "LSNs start at 1");
    let start = out.len();
    out.extend_from_slice(&SEGMENT_MAGIC);
    out.extend_from_slice(&SEGMENT_VERSION.to_le_bytes());
    out.extend_from_slice(&[0; 2]);
    out.extend_from_slice(&lsn_first.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    let crc = crc32c::crc32c(&out[start..]);
    out.extend_from_slice(&crc.to_le_bytes());
    assert_eq!(out.len() - start, SEGMENT_HEADER_LEN);
}

/// What the first bytes of a segment file say.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SegmentHeader {
    /// A whole, checksummed header of this format.
    Valid { lsn_first: u64 },
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
    let lsn_first = u64::from_le_bytes(header[8..16].try_into().expect("8 bytes"));
    if lsn_first == 0 {
        return SegmentHeader::Torn;
    }
    SegmentHeader::Valid { lsn_first }
}

/// Appends a batch's frame: its length (`u32`, little-endian), the CRC32C of those four length
/// bytes, then the batch's bytes exactly as sealed.
///
/// The length carries its own checksum because a torn or zeroed length would otherwise send
/// recovery to a wrong offset: it could read garbage as a length and skip valid data, or land
/// on a stale batch. A length whose check fails ends the log there.
pub fn encode_frame(batch: &[u8], out: &mut Vec<u8>) {
    let len = u32::try_from(batch.len()).expect("a batch fits in u32 bytes");
    assert!(batch.len() >= tandem_log::batch::HEADER_LEN);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&crc32c::crc32c(&len.to_le_bytes()).to_le_bytes());
    out.extend_from_slice(batch);
}

/// The length of the batch whose frame starts `bytes`, if the frame header is whole, its check
/// holds, and that many bytes follow it.
pub fn decode_frame_len(bytes: &[u8]) -> Option<usize> {
    let header = bytes.get(..FRAME_HEADER_LEN)?;
    let len_bytes: [u8; 4] = header[..4].try_into().expect("4 bytes");
    let check = u32::from_le_bytes(header[4..8].try_into().expect("4 bytes"));
    if crc32c::crc32c(&len_bytes) != check {
        return None;
    }
    let len = u32::from_le_bytes(len_bytes) as usize;
    if len < tandem_log::batch::HEADER_LEN || len > bytes.len() - FRAME_HEADER_LEN {
        return None;
    }
    Some(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segment_names_sort_as_their_lsns() {
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
            SegmentHeader::Valid { lsn_first: 77 }
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
