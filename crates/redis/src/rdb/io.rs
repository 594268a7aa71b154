//! The RDB format's primitives: a bounded reader of untrusted bytes, the writer, lengths,
//! strings (plain, integer-encoded, LZF-compressed) and Redis's CRC-64.

use super::{BadData, lzf};
use crate::num;

/// Bytes a string may hold (Redis's `proto-max-bulk-len`): a length past it is refused
/// before anything is allocated for it.
pub const STRING_LEN_MAX: u64 = crate::cmd::STRING_LEN_MAX as u64;

const ENC_INT8: u64 = 0;
const ENC_INT16: u64 = 1;
const ENC_INT32: u64 = 2;
const ENC_LZF: u64 = 3;

/// Where an object's bytes come from: a payload in memory ([`Reader`]) or a file read as it
/// goes ([`super::file`]). Every read is checked against what is left, so no read panics,
/// and nothing is sized by an untrusted length before the bytes it describes have arrived.
pub trait Input {
    /// Fills `buf` with the next bytes, or fails if fewer are left.
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), BadData>;

    /// The next `n` bytes, owned.
    fn take_owned(&mut self, n: usize) -> Result<Vec<u8>, BadData>;

    /// The most bytes that may be left: a count of items the input could not hold is
    /// refused before anything is sized by it (`u64::MAX` when the input's end is unknown).
    fn left_max(&self) -> u64;

    fn byte(&mut self) -> Result<u8, BadData> {
        Ok(self.array::<1>()?[0])
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], BadData> {
        let mut bytes = [0u8; N];
        self.fill(&mut bytes)?;
        Ok(bytes)
    }

    fn u16_le(&mut self) -> Result<u16, BadData> {
        Ok(u16::from_le_bytes(self.array()?))
    }

    fn u32_le(&mut self) -> Result<u32, BadData> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64_le(&mut self) -> Result<u64, BadData> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn u64_be(&mut self) -> Result<u64, BadData> {
        Ok(u64::from_be_bytes(self.array()?))
    }

    /// `rdbLoadLenByRef`.
    fn len_or_encoding(&mut self) -> Result<Len, BadData> {
        let first = self.byte()?;
        Ok(match first >> 6 {
            0 => Len::Plain(u64::from(first & 0x3f)),
            1 => Len::Plain(u64::from(first & 0x3f) << 8 | u64::from(self.byte()?)),
            3 => Len::Encoded(u64::from(first & 0x3f)),
            _ if first == 0x80 => Len::Plain(u64::from(u32::from_be_bytes(self.array()?))),
            _ if first == 0x81 => Len::Plain(self.u64_be()?),
            _ => return Err(BadData),
        })
    }

    /// A length (`rdbLoadLen`); a string encoding marker here is bad data.
    fn len(&mut self) -> Result<u64, BadData> {
        match self.len_or_encoding()? {
            Len::Plain(len) => Ok(len),
            Len::Encoded(_) => Err(BadData),
        }
    }

    /// A length as `rdbLoadLen` reads one for a caller that does not ask whether it is a
    /// string encoding marker: a marker reads as its number.
    fn len_any(&mut self) -> Result<u64, BadData> {
        match self.len_or_encoding()? {
            Len::Plain(len) | Len::Encoded(len) => Ok(len),
        }
    }

    /// A count of items that each take at least `item_bytes_min` bytes of what is left: a
    /// count the input cannot hold is refused before anything is sized by it.
    fn count(&mut self, item_bytes_min: usize) -> Result<usize, BadData> {
        let count = self.len()?;
        let most = self.left_max() / item_bytes_min.max(1) as u64;
        if count > most {
            return Err(BadData);
        }
        usize::try_from(count).map_err(|_| BadData)
    }

    /// A string in any of its encodings (`rdbGenericLoadStringObject`).
    fn string(&mut self) -> Result<Vec<u8>, BadData> {
        match self.len_or_encoding()? {
            Len::Plain(len) => {
                let len = usize::try_from(len).map_err(|_| BadData)?;
                self.take_owned(len)
            }
            Len::Encoded(ENC_INT8) => Ok(int_text(i64::from(self.byte()? as i8))),
            Len::Encoded(ENC_INT16) => Ok(int_text(i64::from(self.u16_le()? as i16))),
            Len::Encoded(ENC_INT32) => Ok(int_text(i64::from(self.u32_le()? as i32))),
            Len::Encoded(ENC_LZF) => self.lzf_string(),
            Len::Encoded(_) => Err(BadData),
        }
    }

    fn lzf_string(&mut self) -> Result<Vec<u8>, BadData> {
        let compressed_len = usize::try_from(self.len()?).map_err(|_| BadData)?;
        let len = self.len()?;
        // The compressed length is the payload's to say: bounded by multiplying without
        // overflow (a huge one would wrap and let any length through).
        let expanded_max = lzf::EXPANSION_MAX.saturating_mul(compressed_len as u64);
        if len > STRING_LEN_MAX || len > expanded_max {
            return Err(BadData);
        }
        let compressed = self.take_owned(compressed_len)?;
        lzf::decompress(&compressed, len as usize).ok_or(BadData)
    }

    /// A double as text with a one-byte length (`rdbLoadDoubleValue`).
    fn text_double(&mut self) -> Result<f64, BadData> {
        match self.byte()? {
            255 => Ok(f64::NEG_INFINITY),
            254 => Ok(f64::INFINITY),
            253 => Ok(f64::NAN),
            len => {
                let text = self.take_owned(usize::from(len))?;
                num::parse_f64_strtod(&text).ok_or(BadData)
            }
        }
    }

    /// A little-endian binary double (`rdbLoadBinaryDoubleValue`).
    fn binary_double(&mut self) -> Result<f64, BadData> {
        Ok(f64::from_bits(self.u64_le()?))
    }
}

/// How many items to make room for before reading `count` of them: a count the input's end
/// does not bound (a file read as it goes) reserves no more than this, and grows as they come.
pub fn capacity_for(count: usize) -> usize {
    const RESERVED_MAX: usize = 1024;
    count.min(RESERVED_MAX)
}

/// A cursor over untrusted bytes in memory: every read is checked against what is left, so
/// no read panics and nothing allocates more than the input's own size.
#[derive(Debug)]
pub struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

/// A length as the format gives it: a count, or the marker of a special string encoding.
#[derive(Debug)]
pub enum Len {
    Plain(u64),
    Encoded(u64),
}

impl<'a> Reader<'a> {
    pub fn new(bytes: &'a [u8]) -> Reader<'a> {
        Reader { bytes, at: 0 }
    }

    /// Bytes not read yet.
    pub fn left(&self) -> usize {
        self.bytes.len() - self.at
    }

    pub fn is_empty(&self) -> bool {
        self.left() == 0
    }

    pub fn take(&mut self, n: usize) -> Result<&'a [u8], BadData> {
        if n > self.left() {
            return Err(BadData);
        }
        let bytes = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(bytes)
    }
}

impl Input for Reader<'_> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), BadData> {
        buf.copy_from_slice(self.take(buf.len())?);
        Ok(())
    }

    fn take_owned(&mut self, n: usize) -> Result<Vec<u8>, BadData> {
        Ok(self.take(n)?.to_vec())
    }

    fn left_max(&self) -> u64 {
        self.left() as u64
    }
}

fn int_text(value: i64) -> Vec<u8> {
    let mut text = Vec::new();
    num::format_i64(value, &mut text);
    text
}

/// Writes the RDB format.
#[derive(Debug, Default)]
pub struct Writer {
    pub bytes: Vec<u8>,
}

impl Writer {
    /// `rdbSaveLen`.
    pub fn len(&mut self, len: u64) {
        if len < 1 << 6 {
            self.bytes.push(len as u8);
        } else if len < 1 << 14 {
            self.bytes.push(0x40 | (len >> 8) as u8);
            self.bytes.push(len as u8);
        } else if len <= u64::from(u32::MAX) {
            self.bytes.push(0x80);
            self.bytes.extend_from_slice(&(len as u32).to_be_bytes());
        } else {
            self.bytes.push(0x81);
            self.bytes.extend_from_slice(&len.to_be_bytes());
        }
    }

    /// `rdbSaveRawString` with compression on: an integer of up to 11 characters as an
    /// integer, a string of more than 20 bytes LZF-compressed when that saves 4 bytes or
    /// more, anything else as it is.
    pub fn string(&mut self, bytes: &[u8]) {
        if bytes.len() <= 11 && self.maybe_integer(bytes) {
            return;
        }
        if bytes.len() > 20 && self.maybe_lzf(bytes) {
            return;
        }
        self.len(bytes.len() as u64);
        self.bytes.extend_from_slice(bytes);
    }

    /// `rdbTryIntegerEncoding`: the text must read back as the same text.
    fn maybe_integer(&mut self, bytes: &[u8]) -> bool {
        let Some(value) = num::parse_i64(bytes) else {
            return false;
        };
        if int_text(value) != bytes {
            return false;
        }
        if let Ok(small) = i8::try_from(value) {
            self.bytes
                .extend_from_slice(&[0xc0 | ENC_INT8 as u8, small as u8]);
        } else if let Ok(small) = i16::try_from(value) {
            self.bytes.push(0xc0 | ENC_INT16 as u8);
            self.bytes.extend_from_slice(&small.to_le_bytes());
        } else if let Ok(small) = i32::try_from(value) {
            self.bytes.push(0xc0 | ENC_INT32 as u8);
            self.bytes.extend_from_slice(&small.to_le_bytes());
        } else {
            return false;
        }
        true
    }

    /// `rdbSaveLzfStringObject`.
    fn maybe_lzf(&mut self, bytes: &[u8]) -> bool {
        let Some(compressed) = lzf::compress(bytes, bytes.len() - 4) else {
            return false;
        };
        self.bytes.push(0xc0 | ENC_LZF as u8);
        self.len(compressed.len() as u64);
        self.len(bytes.len() as u64);
        self.bytes.extend_from_slice(&compressed);
        true
    }

    pub fn binary_double(&mut self, value: f64) {
        self.bytes.extend_from_slice(&value.to_bits().to_le_bytes());
    }
}

/// Redis's CRC-64 (Jones polynomial, reflected, no final xor: `crc64` in crc64.c).
pub fn crc64(bytes: &[u8]) -> u64 {
    crc64_extend(0, bytes)
}

/// The CRC-64 of the bytes `crc` covers followed by `bytes`: a file's checksum, kept as it
/// is read or written.
pub fn crc64_extend(crc: u64, bytes: &[u8]) -> u64 {
    static TABLE: std::sync::OnceLock<[u64; 256]> = std::sync::OnceLock::new();
    let table = TABLE.get_or_init(|| {
        const POLY_REFLECTED: u64 = 0x95ac_9329_ac4b_c9b5;
        let mut table = [0u64; 256];
        for (i, slot) in table.iter_mut().enumerate() {
            let mut crc = i as u64;
            for _ in 0..8 {
                crc = if crc & 1 == 1 {
                    (crc >> 1) ^ POLY_REFLECTED
                } else {
                    crc >> 1
                };
            }
            *slot = crc;
        }
        table
    });
    bytes.iter().fold(crc, |crc, &byte| {
        table[((crc ^ u64::from(byte)) & 0xff) as usize] ^ (crc >> 8)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc64_has_redis_check_value() {
        // crc64.c's own test vector.
        assert_eq!(crc64(b"123456789"), 0xe9c6_d914_c4b8_d9ca);
    }

    #[test]
    fn lengths_round_trip_at_every_width() {
        for len in [0, 1, 63, 64, 16383, 16384, u64::from(u32::MAX), 1 << 40] {
            let mut writer = Writer::default();
            writer.len(len);
            let mut reader = Reader::new(&writer.bytes);
            assert_eq!(reader.len().ok(), Some(len));
            assert!(reader.is_empty());
        }
    }

    #[test]
    fn strings_round_trip_in_every_encoding() {
        let long = b"abcabcabcabcabcabcabcabcabcabcabcabc".to_vec();
        for text in [
            &b""[..],
            b"0",
            b"-128",
            b"127",
            b"32767",
            b"-2147483648",
            b"2147483648",
            b"007",
            b"hello",
            &long,
        ] {
            let mut writer = Writer::default();
            writer.string(text);
            let mut reader = Reader::new(&writer.bytes);
            assert_eq!(reader.string().ok().as_deref(), Some(text));
            assert!(reader.is_empty());
        }
    }

    /// A compressed string whose compressed length is near 2^64 is refused: bounding the
    /// expanded length by it once overflowed (found by the mutated-payload property test).
    #[test]
    fn an_lzf_string_with_a_huge_compressed_length_is_refused() {
        let mut writer = Writer::default();
        writer.bytes.push(0xc0 | ENC_LZF as u8);
        writer.len(u64::MAX / 2);
        writer.len(1 << 20);
        writer.bytes.extend_from_slice(&[0; 64]);
        let mut reader = Reader::new(&writer.bytes);
        assert!(reader.string().is_err());
    }
}
