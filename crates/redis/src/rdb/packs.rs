//! The compact blobs a payload may carry inside a string: listpacks (read and written),
//! ziplists, intsets (read and written) and zipmaps (read). Every reader checks the whole
//! blob, as Redis does only under `sanitize-dump-payload yes`: headers, every entry's
//! bounds and back length, counts, order where the format has one.

use super::BadData;
use super::io::{Input, Reader};
use crate::num;

/// One element of a listpack or ziplist.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Item<'a> {
    Int(i64),
    Str(&'a [u8]),
}

impl Item<'_> {
    /// The element as Redis hands it out: an integer as its decimal text.
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Item::Str(bytes) => bytes.to_vec(),
            Item::Int(value) => {
                let mut text = Vec::new();
                num::format_i64(value, &mut text);
                text
            }
        }
    }

    pub fn int(self) -> Result<i64, BadData> {
        match self {
            Item::Int(value) => Ok(value),
            Item::Str(_) => Err(BadData),
        }
    }
}

const LP_HEADER_BYTES: usize = 6;
const LP_EOF: u8 = 0xff;
/// The count a listpack's header holds when it has this many elements or more.
const LP_COUNT_UNKNOWN: u16 = u16::MAX;

/// Sign-extends the low `bits` of `raw`.
fn signed(raw: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((raw << shift) as i64) >> shift
}

fn le_uint(bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .rev()
        .fold(0u64, |acc, &byte| acc << 8 | u64::from(byte))
}

/// Bytes `lpEncodeBacklen` takes for an entry of `len` bytes.
fn backlen_bytes(len: usize) -> usize {
    match len {
        0..=127 => 1,
        128..=16382 => 2,
        16383..=2_097_150 => 3,
        2_097_151..=268_435_454 => 4,
        _ => 5,
    }
}

/// `lpEncodeBacklen`.
fn write_backlen(out: &mut Vec<u8>, len: usize) {
    let n = backlen_bytes(len);
    for i in (0..n).rev() {
        let part = ((len >> (7 * i)) & 127) as u8;
        out.push(if i == n - 1 { part } else { part | 128 });
    }
    // The first byte written holds the highest bits and no continuation bit.
    let first = out.len() - n;
    out[first] &= 127;
}

/// One listpack entry at the start of `reader`: its item; the back length is checked.
fn lp_entry<'a>(reader: &mut Reader<'a>) -> Result<Item<'a>, BadData> {
    let start = reader.left();
    let first = reader.byte()?;
    let item = match first {
        0x00..=0x7f => Item::Int(i64::from(first)),
        0x80..=0xbf => Item::Str(reader.take(usize::from(first & 0x3f))?),
        0xc0..=0xdf => {
            let raw = u64::from(first & 0x1f) << 8 | u64::from(reader.byte()?);
            Item::Int(signed(raw, 13))
        }
        0xe0..=0xef => {
            let len = usize::from(first & 0x0f) << 8 | usize::from(reader.byte()?);
            Item::Str(reader.take(len)?)
        }
        0xf0 => {
            let len = reader.u32_le()? as usize;
            Item::Str(reader.take(len)?)
        }
        0xf1 => Item::Int(signed(le_uint(reader.take(2)?), 16)),
        0xf2 => Item::Int(signed(le_uint(reader.take(3)?), 24)),
        0xf3 => Item::Int(signed(le_uint(reader.take(4)?), 32)),
        0xf4 => Item::Int(le_uint(reader.take(8)?) as i64),
        _ => return Err(BadData),
    };
    let len = start - reader.left();
    let mut expected = Vec::with_capacity(5);
    write_backlen(&mut expected, len);
    if reader.take(expected.len())? != expected.as_slice() {
        return Err(BadData);
    }
    Ok(item)
}

/// Every element of listpack `blob`, checked whole.
pub fn listpack(blob: &[u8]) -> Result<Vec<Item<'_>>, BadData> {
    let mut reader = Reader::new(blob);
    let total = reader.u32_le()? as usize;
    let count = reader.u16_le()?;
    if total != blob.len() || total < LP_HEADER_BYTES + 1 || blob[total - 1] != LP_EOF {
        return Err(BadData);
    }
    let mut body = Reader::new(&blob[LP_HEADER_BYTES..total - 1]);
    let mut items = Vec::new();
    while !body.is_empty() {
        items.push(lp_entry(&mut body)?);
    }
    if count != LP_COUNT_UNKNOWN && usize::from(count) != items.len() {
        return Err(BadData);
    }
    Ok(items)
}

/// Builds a listpack as `lpAppend` does, element after element.
#[derive(Debug)]
pub struct ListpackWriter {
    bytes: Vec<u8>,
    count: usize,
}

impl Default for ListpackWriter {
    fn default() -> Self {
        ListpackWriter {
            bytes: vec![0; LP_HEADER_BYTES],
            count: 0,
        }
    }
}

impl ListpackWriter {
    /// Appends `element`: as an integer if it is one's exact text (`lpStringToInt64`).
    pub fn push(&mut self, element: &[u8]) {
        match num::parse_i64(element) {
            Some(value) => self.push_int(value),
            None => self.push_str(element),
        }
    }

    pub fn push_int(&mut self, value: i64) {
        let start = self.bytes.len();
        let out = &mut self.bytes;
        let raw = value as u64;
        match value {
            0..=127 => out.push(value as u8),
            -4096..=4095 => {
                let v = raw & 0x1fff;
                out.extend_from_slice(&[0xc0 | (v >> 8) as u8, v as u8]);
            }
            -32768..=32767 => {
                out.push(0xf1);
                out.extend_from_slice(&raw.to_le_bytes()[..2]);
            }
            -8_388_608..=8_388_607 => {
                out.push(0xf2);
                out.extend_from_slice(&raw.to_le_bytes()[..3]);
            }
            -2_147_483_648..=2_147_483_647 => {
                out.push(0xf3);
                out.extend_from_slice(&raw.to_le_bytes()[..4]);
            }
            _ => {
                out.push(0xf4);
                out.extend_from_slice(&raw.to_le_bytes());
            }
        }
        self.finish_entry(start);
    }

    fn push_str(&mut self, element: &[u8]) {
        let start = self.bytes.len();
        let len = element.len();
        if len < 64 {
            self.bytes.push(0x80 | len as u8);
        } else if len < 4096 {
            self.bytes
                .extend_from_slice(&[0xe0 | (len >> 8) as u8, len as u8]);
        } else {
            self.bytes.push(0xf0);
            let len = u32::try_from(len).expect("an element is shorter than 4 GiB");
            self.bytes.extend_from_slice(&len.to_le_bytes());
        }
        self.bytes.extend_from_slice(element);
        self.finish_entry(start);
    }

    fn finish_entry(&mut self, start: usize) {
        let len = self.bytes.len() - start;
        write_backlen(&mut self.bytes, len);
        self.count += 1;
    }

    /// Bytes the listpack would take now.
    pub fn len(&self) -> usize {
        self.bytes.len() + 1
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.bytes.push(LP_EOF);
        let total = u32::try_from(self.bytes.len()).expect("a listpack is shorter than 4 GiB");
        self.bytes[..4].copy_from_slice(&total.to_le_bytes());
        let count = u16::try_from(self.count).unwrap_or(LP_COUNT_UNKNOWN);
        self.bytes[4..6].copy_from_slice(&count.to_le_bytes());
        self.bytes
    }
}

const ZL_HEADER_BYTES: usize = 10;
const ZL_END: u8 = 0xff;
const ZL_BIG_PREVLEN: u8 = 254;

/// One ziplist entry's encoding and data.
fn zl_entry<'a>(reader: &mut Reader<'a>) -> Result<Item<'a>, BadData> {
    let first = reader.byte()?;
    Ok(match first >> 6 {
        0 => Item::Str(reader.take(usize::from(first & 0x3f))?),
        1 => {
            let len = usize::from(first & 0x3f) << 8 | usize::from(reader.byte()?);
            Item::Str(reader.take(len)?)
        }
        2 if first == 0x80 => {
            let len = u32::from_be_bytes(reader.take(4)?.try_into().expect("4 bytes"));
            Item::Str(reader.take(len as usize)?)
        }
        2 => return Err(BadData),
        _ => match first {
            0xc0 => Item::Int(signed(le_uint(reader.take(2)?), 16)),
            0xd0 => Item::Int(signed(le_uint(reader.take(4)?), 32)),
            0xe0 => Item::Int(le_uint(reader.take(8)?) as i64),
            0xf0 => Item::Int(signed(le_uint(reader.take(3)?), 24)),
            0xfe => Item::Int(i64::from(reader.byte()? as i8)),
            0xf1..=0xfd => Item::Int(i64::from(first & 0x0f) - 1),
            _ => return Err(BadData),
        },
    })
}

/// Every element of ziplist `blob`, checked whole (each entry's previous length too).
pub fn ziplist(blob: &[u8]) -> Result<Vec<Item<'_>>, BadData> {
    let mut reader = Reader::new(blob);
    let total = reader.u32_le()? as usize;
    let tail = reader.u32_le()? as usize;
    let count = reader.u16_le()?;
    if total != blob.len() || total < ZL_HEADER_BYTES + 1 || blob[total - 1] != ZL_END {
        return Err(BadData);
    }
    let mut body = Reader::new(&blob[ZL_HEADER_BYTES..total - 1]);
    let (mut items, mut prev_len, mut last_at) = (Vec::new(), 0usize, ZL_HEADER_BYTES);
    while !body.is_empty() {
        let start = body.left();
        last_at = total - 1 - start;
        let prev = match body.byte()? {
            ZL_BIG_PREVLEN => body.u32_le()? as usize,
            ZL_END => return Err(BadData),
            small => usize::from(small),
        };
        if prev != prev_len {
            return Err(BadData);
        }
        items.push(zl_entry(&mut body)?);
        prev_len = start - body.left();
    }
    if tail != last_at || (count != u16::MAX && usize::from(count) != items.len()) {
        return Err(BadData);
    }
    Ok(items)
}

/// The members of intset `blob`, checked: a known width, the length its header gives,
/// strictly ascending.
pub fn intset(blob: &[u8]) -> Result<Vec<i64>, BadData> {
    let mut reader = Reader::new(blob);
    let width = reader.u32_le()? as usize;
    let len = reader.u32_le()? as usize;
    if !matches!(width, 2 | 4 | 8) || reader.left() != len.checked_mul(width).ok_or(BadData)? {
        return Err(BadData);
    }
    let mut members = Vec::with_capacity(len);
    for _ in 0..len {
        let raw = le_uint(reader.take(width)?);
        let member = signed(raw, 8 * width as u32);
        if members.last().is_some_and(|&last| last >= member) {
            return Err(BadData);
        }
        members.push(member);
    }
    Ok(members)
}

/// The intset of `members` (sorted, distinct), at the narrowest width that holds them all.
pub fn write_intset(members: &[i64]) -> Vec<u8> {
    let width: usize = if members.iter().all(|&m| i16::try_from(m).is_ok()) {
        2
    } else if members.iter().all(|&m| i32::try_from(m).is_ok()) {
        4
    } else {
        8
    };
    let mut out = Vec::with_capacity(8 + width * members.len());
    out.extend_from_slice(&(width as u32).to_le_bytes());
    out.extend_from_slice(&(members.len() as u32).to_le_bytes());
    for member in members {
        out.extend_from_slice(&member.to_le_bytes()[..width]);
    }
    out
}

/// A field and its value.
pub type Pair<'a> = (&'a [u8], &'a [u8]);

const ZIPMAP_BIGLEN: u8 = 254;
const ZIPMAP_END: u8 = 255;

fn zipmap_len(reader: &mut Reader<'_>) -> Result<Option<usize>, BadData> {
    Ok(match reader.byte()? {
        ZIPMAP_END => None,
        ZIPMAP_BIGLEN => Some(reader.u32_le()? as usize),
        small => Some(usize::from(small)),
    })
}

/// The (field, value) pairs of zipmap `blob` (Redis 2.4's small hashes), checked whole.
pub fn zipmap(blob: &[u8]) -> Result<Vec<Pair<'_>>, BadData> {
    let mut reader = Reader::new(blob);
    reader.byte()?; // The count, which a big map does not keep.
    let mut pairs = Vec::new();
    while let Some(field_len) = zipmap_len(&mut reader)? {
        let field = reader.take(field_len)?;
        let value_len = zipmap_len(&mut reader)?.ok_or(BadData)?;
        let free = usize::from(reader.byte()?);
        let value = reader.take(value_len)?;
        reader.take(free)?;
        pairs.push((field, value));
    }
    if !reader.is_empty() {
        return Err(BadData);
    }
    Ok(pairs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listpacks_round_trip_with_every_encoding() {
        let long = vec![b'x'; 5000];
        let mid = vec![b'y'; 300];
        let elements: Vec<&[u8]> = vec![
            b"0",
            b"127",
            b"128",
            b"-1",
            b"-4096",
            b"4095",
            b"-32768",
            b"32767",
            b"8388607",
            b"-8388608",
            b"2147483647",
            b"-2147483648",
            b"9223372036854775807",
            b"-9223372036854775808",
            b"01",
            b"",
            b"hello",
            &mid,
            &long,
        ];
        let mut writer = ListpackWriter::default();
        for element in &elements {
            writer.push(element);
        }
        let blob = writer.finish();
        let items = listpack(&blob).expect("a listpack just written reads");
        let read: Vec<Vec<u8>> = items.into_iter().map(Item::to_bytes).collect();
        assert_eq!(
            read,
            elements.iter().map(|e| e.to_vec()).collect::<Vec<_>>()
        );
    }

    #[test]
    fn intsets_round_trip_at_each_width() {
        for members in [vec![-3i64, 5, 700], vec![1, 70000], vec![-1, i64::MAX]] {
            assert_eq!(intset(&write_intset(&members)).ok(), Some(members));
        }
        // Out of order, or the wrong length.
        assert!(intset(&[2, 0, 0, 0, 2, 0, 0, 0, 5, 0, 1, 0]).is_err());
        assert!(intset(&[2, 0, 0, 0, 3, 0, 0, 0, 1, 0, 5, 0]).is_err());
    }
}
