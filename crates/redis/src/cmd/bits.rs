//! Bit commands on strings (bitops.c): `SETBIT`, `GETBIT`, `BITCOUNT`, `BITPOS`, `BITOP`,
//! `BITFIELD` and `BITFIELD_RO`.
//!
//! A string is a bitmap whose bit 0 is the most significant bit of its first byte; reading
//! past its end reads zeros. A write that reaches past the end first grows the string with
//! zeros (Redis's `lookupStringForBitCommand`), up to Redis's `proto-max-bulk-len`: a bit
//! offset is refused once its byte is 512 MB or more into the string. As everywhere in this
//! model, every argument is checked before the first write, and a command that changes no bit
//! (and no length) does not mark its key changed, so a `WATCH` on it holds, as in Redis.

use super::strings::{Ttl, get_string, lengthen, put};
use super::{CmdError, Command, Ctx, Read, STRING_LEN_MAX, Write, arg, data};
use crate::db::Key;
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("BITCOUNT", -2, Read, (1, 1, 1), false, bitcount),
    data("BITFIELD", -2, Write, (1, 1, 1), true, bitfield),
    data("BITFIELD_RO", -2, Read, (1, 1, 1), false, bitfield_ro),
    data("BITOP", -4, Write, (2, -1, 1), true, bitop),
    data("BITPOS", -3, Read, (1, 1, 1), false, bitpos),
    data("GETBIT", 3, Read, (1, 1, 1), false, getbit),
    data("SETBIT", 4, Write, (1, 1, 1), true, setbit),
];

const BIT_OFFSET_INVALID: CmdError =
    CmdError::fixed("ERR bit offset is not an integer or out of range");

/// A bit offset as Redis's `getBitOffsetFromArgument` reads it: with `field_bits` (a
/// `BITFIELD` type's width), `#n` means the `n`th field of that width. The offset's byte must
/// lie within `proto-max-bulk-len`, so the largest offset is 2^32 - 1.
fn bit_offset(text: &[u8], field_bits: Option<u32>) -> Result<u64, CmdError> {
    let (digits, scale) = match (text.split_first(), field_bits) {
        (Some((b'#', rest)), Some(bits)) => (rest, i64::from(bits)),
        _ => (text, 1),
    };
    let n = num::parse_i64(digits).ok_or(BIT_OFFSET_INVALID)?;
    // Redis multiplies in C's `long long`, which wraps on this machine's compiler.
    let offset = n.wrapping_mul(scale);
    if offset < 0 || (offset >> 3) >= STRING_LEN_MAX as i64 {
        return Err(BIT_OFFSET_INVALID);
    }
    Ok(offset as u64)
}

/// The bytes of string `key`, or none for a missing key.
fn bytes_of<'m>(ctx: &'m Ctx<'_, '_>, key: &Option<Key>) -> &'m [u8] {
    key.as_ref().map_or(&[], |key| ctx.string(key))
}

pub fn setbit(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    let offset = bit_offset(arg(argv, 2), None)?;
    let value = match num::parse_i64(arg(argv, 3)) {
        Some(value @ (0 | 1)) => value as u8,
        _ => return Err(CmdError::fixed("ERR bit is not an integer or out of range")),
    };
    let existing = get_string(ctx, name)?;
    let byte = (offset >> 3) as usize;
    let shift = 7 - (offset & 7) as u32;
    let old_len = existing.map(|key| key.head.value_len as usize);
    let old_byte = bytes_of(ctx, &existing).get(byte).copied().unwrap_or(0);
    let old_bit = (old_byte >> shift) & 1;
    let grows = old_len.is_none_or(|len| len <= byte);
    if grows || old_bit != value {
        let key = lengthen(ctx, name, existing, byte + 1)?;
        let new_byte = (old_byte & !(1 << shift)) | (value << shift);
        let layout = ctx.layout;
        let txn = ctx.txn();
        txn.set_range(key.string_at() + byte, 1)[0] = new_byte;
        layout.touch(txn, &key);
        ctx.notify(EventClass::String, "setbit", name);
    } else {
        // Redis makes the string a raw copy of its own even when no bit changes.
        super::dump::mark(ctx, name, crate::db::EncodingMark::Large);
    }
    out.integer(i64::from(old_bit));
    Ok(())
}

pub fn getbit(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let offset = bit_offset(arg(argv, 2), None)?;
    let key = get_string(ctx, arg(argv, 1))?;
    let byte = bytes_of(ctx, &key)
        .get((offset >> 3) as usize)
        .copied()
        .unwrap_or(0);
    out.integer(i64::from((byte >> (7 - (offset & 7))) & 1));
    Ok(())
}

/// Whether a `BITCOUNT` or `BITPOS` range counts bits or bytes (its `BIT|BYTE` option).
fn range_unit_is_bit(option: &[u8]) -> Result<bool, CmdError> {
    match option.to_ascii_uppercase().as_slice() {
        b"BIT" => Ok(true),
        b"BYTE" => Ok(false),
        _ => Err(CmdError::SYNTAX),
    }
}

/// A range of a string's bytes, from `start` to `end` inclusive (empty if `start > end`),
/// with, for a range given in bits, the masks of the bits of its first and last bytes that
/// lie outside it (Redis's `first_byte_neg_mask` and `last_byte_neg_mask`).
#[derive(Clone, Copy, Debug)]
struct ByteRange {
    start: i64,
    end: i64,
    first_outside: u8,
    last_outside: u8,
}

impl ByteRange {
    /// The range `start..=end` (negative from the end) of a string of `len` bytes, in bits
    /// if `in_bits`, clamped as Redis's `bitcountCommand` and `bitposCommand` clamp it.
    fn new(len: usize, mut start: i64, mut end: i64, in_bits: bool) -> ByteRange {
        let total = if in_bits {
            (len as i64) << 3
        } else {
            len as i64
        };
        if start < 0 {
            start += total;
        }
        if end < 0 {
            end += total;
        }
        start = start.max(0);
        end = end.max(0).min(total - 1);
        let mut range = ByteRange {
            start,
            end,
            first_outside: 0,
            last_outside: 0,
        };
        if in_bits && start <= end {
            range.first_outside = !((1u32 << (8 - (start & 7))) - 1) as u8;
            range.last_outside = ((1u32 << (7 - (end & 7))) - 1) as u8;
            range.start = start >> 3;
            range.end = end >> 3;
        }
        range
    }

    /// The whole string of `len` bytes.
    fn whole(len: usize) -> ByteRange {
        ByteRange {
            start: 0,
            end: len as i64 - 1,
            first_outside: 0,
            last_outside: 0,
        }
    }
}

pub fn bitcount(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    // As Redis: a missing key answers 0 before the arguments are read.
    let Some(key) = get_string(ctx, arg(argv, 1))? else {
        out.integer(0);
        return Ok(());
    };
    let bytes = ctx.string(&key);
    let range = match argv.len() {
        2 => ByteRange::whole(bytes.len()),
        4 | 5 => {
            let start = super::int_arg(argv, 2)?;
            let end = super::int_arg(argv, 3)?;
            if start < 0 && end < 0 && start > end {
                out.integer(0);
                return Ok(());
            }
            let in_bits = match argv.get(4) {
                Some(option) => range_unit_is_bit(option)?,
                None => false,
            };
            ByteRange::new(bytes.len(), start, end, in_bits)
        }
        _ => return Err(CmdError::SYNTAX),
    };
    if range.start > range.end {
        out.integer(0);
        return Ok(());
    }
    let (start, end) = (range.start as usize, range.end as usize);
    let ones = |bytes: &[u8]| -> i64 { bytes.iter().map(|b| i64::from(b.count_ones())).sum() };
    let outside = [
        bytes[start] & range.first_outside,
        bytes[end] & range.last_outside,
    ];
    out.integer(ones(&bytes[start..=end]) - ones(&outside));
    Ok(())
}

/// Redis's `redisBitpos`: the position of the first bit equal to `bit` in `bytes`; if there
/// is none, -1 when looking for a 1, and the first position past the end when looking for a
/// 0 (the string is taken as followed by zeros).
fn first_bit(bytes: &[u8], bit: bool) -> i64 {
    for (i, &byte) in bytes.iter().enumerate() {
        let wanted = if bit { byte } else { !byte };
        if wanted != 0 {
            return i as i64 * 8 + i64::from(wanted.leading_zeros());
        }
    }
    if bit { -1 } else { bytes.len() as i64 * 8 }
}

pub fn bitpos(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let bit = match super::int_arg(argv, 2)? {
        0 => false,
        1 => true,
        _ => return Err(CmdError::fixed("ERR The bit argument must be 1 or 0.")),
    };
    // A missing key is an endless run of zeros.
    let Some(key) = get_string(ctx, arg(argv, 1))? else {
        out.integer(if bit { -1 } else { 0 });
        return Ok(());
    };
    let bytes = ctx.string(&key);
    let (range, end_given) = match argv.len() {
        3 => (ByteRange::whole(bytes.len()), false),
        4..=6 => {
            let start = super::int_arg(argv, 3)?;
            // As Redis: the unit is read before the end.
            let in_bits = match argv.get(5) {
                Some(option) => range_unit_is_bit(option)?,
                None => false,
            };
            let end = match argv.len() {
                4 => i64::MAX,
                _ => super::int_arg(argv, 4)?,
            };
            (
                ByteRange::new(bytes.len(), start, end, in_bits),
                argv.len() >= 5,
            )
        }
        _ => return Err(CmdError::SYNTAX),
    };
    out.integer(bit_position(bytes, range, bit, end_given));
    Ok(())
}

/// `BITPOS` over `range` of `bytes`, as Redis's `bitposCommand` computes it: the bits outside
/// a bit range are made the opposite of `bit` in its first and last bytes.
fn bit_position(bytes: &[u8], range: ByteRange, bit: bool, end_given: bool) -> i64 {
    if range.start > range.end {
        return -1;
    }
    let (mut start, end) = (range.start as usize, range.end as usize);
    let mut count = end - start + 1;
    let hide = |byte: u8, outside: u8| if bit { byte & !outside } else { byte | outside };
    let mut found = None;
    if range.first_outside != 0 {
        let mut first = hide(bytes[start], range.first_outside);
        if range.last_outside != 0 && count == 1 {
            first = hide(first, range.last_outside);
        }
        let pos = first_bit(&[first], bit);
        if count == 1 || (pos != -1 && pos != 8) {
            found = Some(pos);
        } else {
            start += 1;
            count -= 1;
        }
    }
    if found.is_none() {
        let middle = count - usize::from(range.last_outside != 0);
        if middle > 0 {
            let pos = first_bit(&bytes[start..start + middle], bit);
            if count == middle || (pos != -1 && pos != middle as i64 * 8) {
                found = Some(pos);
            } else {
                start += middle;
                count -= middle;
            }
        }
    }
    let pos = found.unwrap_or_else(|| first_bit(&[hide(bytes[end], range.last_outside)], bit));
    // Looking for a 0 in a range whose end was given, the zeros past the range do not count.
    if end_given && !bit && pos == count as i64 * 8 {
        return -1;
    }
    if pos == -1 {
        -1
    } else {
        pos + start as i64 * 8
    }
}

/// The operations of `BITOP`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum BitOp {
    And,
    Or,
    Xor,
    Not,
}

pub fn bitop(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let op = match arg(argv, 1).to_ascii_uppercase().as_slice() {
        b"AND" => BitOp::And,
        b"OR" => BitOp::Or,
        b"XOR" => BitOp::Xor,
        b"NOT" => BitOp::Not,
        _ => return Err(CmdError::SYNTAX),
    };
    if op == BitOp::Not && argv.len() != 4 {
        return Err(CmdError::fixed(
            "ERR BITOP NOT must be called with a single source key.",
        ));
    }
    let sources = argv
        .iter()
        .skip(3)
        .map(|name| get_string(ctx, name))
        .collect::<Result<Vec<_>, _>>()?;
    let result = combine(op, sources.iter().map(|key| bytes_of(ctx, key)));
    let target = arg(argv, 2);
    if result.is_empty() {
        super::keys::delete_destination(ctx, target);
    } else {
        put(ctx, target, &result, Ttl::Clear)?;
        // Redis stores the result as a raw string object.
        super::dump::mark(ctx, target, crate::db::EncodingMark::Large);
        ctx.notify(EventClass::String, "set", target);
    }
    out.integer(result.len() as i64);
    Ok(())
}

/// `op` over `sources` (at least one), each taken as followed by zeros: as long as the
/// longest. Each source is read once, so the work is the sum of their lengths.
fn combine<'m>(op: BitOp, sources: impl Iterator<Item = &'m [u8]> + Clone) -> Vec<u8> {
    let len_max = sources.clone().map(<[u8]>::len).max().unwrap_or(0);
    let mut result = vec![0u8; len_max];
    // AND leaves zeros past the shortest source.
    let mut len_and = len_max;
    for (i, source) in sources.enumerate() {
        if i == 0 {
            result[..source.len()].copy_from_slice(source);
            if op == BitOp::Not {
                result.iter_mut().for_each(|byte| *byte = !*byte);
            }
            len_and = source.len();
            continue;
        }
        let pairs = result.iter_mut().zip(source);
        match op {
            BitOp::And => pairs.for_each(|(to, from)| *to &= from),
            BitOp::Or => pairs.for_each(|(to, from)| *to |= from),
            BitOp::Xor => pairs.for_each(|(to, from)| *to ^= from),
            BitOp::Not => unreachable!("NOT has one source"),
        }
        len_and = len_and.min(source.len());
    }
    if op == BitOp::And {
        result[len_and..].fill(0);
    }
    result
}

/// What a `BITFIELD` write does when its result does not fit the field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Overflow {
    /// Keeps the low bits (two's complement for a signed field).
    Wrap,
    /// Stops at the field's largest or smallest value.
    Sat,
    /// Writes nothing and answers null.
    Fail,
}

/// One `BITFIELD` subcommand, parsed.
#[derive(Clone, Copy, Debug)]
struct FieldOp {
    kind: FieldOpKind,
    offset: u64,
    bits: u32,
    signed: bool,
    overflow: Overflow,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FieldOpKind {
    Get,
    Set(i64),
    IncrBy(i64),
}

const FIELD_TYPE_INVALID: CmdError = CmdError::fixed(
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but \
     i64 is.",
);

/// A field type, `i1` to `i64` or `u1` to `u63`, as (signed, bits). Redis reads the width as
/// a C string, so it ends at a NUL byte.
fn field_type(text: &[u8]) -> Result<(bool, u32), CmdError> {
    let (signed, width) = match text.split_first() {
        Some((b'i', width)) => (true, width),
        Some((b'u', width)) => (false, width),
        _ => return Err(FIELD_TYPE_INVALID),
    };
    let width = width.split(|&b| b == 0).next().unwrap_or_default();
    match num::parse_i64(width) {
        Some(bits @ 1..=64) if signed => Ok((true, bits as u32)),
        Some(bits @ 1..=63) => Ok((false, bits as u32)),
        _ => Err(FIELD_TYPE_INVALID),
    }
}

/// The subcommands of `BITFIELD key …` (from argument 2), checked whole as Redis checks
/// them before it looks at the key.
fn field_ops(argv: &Argv) -> Result<Vec<FieldOp>, CmdError> {
    let mut ops = Vec::new();
    let mut overflow = Overflow::Wrap;
    let mut i = 2;
    while i < argv.len() {
        let remaining = argv.len() - i - 1;
        let name = arg(argv, i).to_ascii_uppercase();
        let takes_value = match name.as_slice() {
            b"GET" if remaining >= 2 => false,
            b"SET" | b"INCRBY" if remaining >= 3 => true,
            b"OVERFLOW" if remaining >= 1 => {
                overflow = match arg(argv, i + 1).to_ascii_uppercase().as_slice() {
                    b"WRAP" => Overflow::Wrap,
                    b"SAT" => Overflow::Sat,
                    b"FAIL" => Overflow::Fail,
                    _ => return Err(CmdError::fixed("ERR Invalid OVERFLOW type specified")),
                };
                i += 2;
                continue;
            }
            _ => return Err(CmdError::SYNTAX),
        };
        let (signed, bits) = field_type(arg(argv, i + 1))?;
        let offset = bit_offset(arg(argv, i + 2), Some(bits))?;
        let kind = if takes_value {
            let value = super::int_arg(argv, i + 3)?;
            if name == b"SET" {
                FieldOpKind::Set(value)
            } else {
                FieldOpKind::IncrBy(value)
            }
        } else {
            FieldOpKind::Get
        };
        ops.push(FieldOp {
            kind,
            offset,
            bits,
            signed,
            overflow,
        });
        i += if takes_value { 4 } else { 3 };
    }
    Ok(ops)
}

pub fn bitfield(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    bitfield_generic(ctx, argv, out, false)
}

pub fn bitfield_ro(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    bitfield_generic(ctx, argv, out, true)
}

fn bitfield_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    read_only: bool,
) -> Result<(), CmdError> {
    let name = arg(argv, 1);
    let ops = field_ops(argv)?;
    let reach = ops
        .iter()
        .filter(|op| op.kind != FieldOpKind::Get)
        .map(|op| op.offset + u64::from(op.bits) - 1)
        .max();
    let Some(reach) = reach else {
        let existing = get_string(ctx, name)?;
        let bytes = bytes_of(ctx, &existing);
        out.array(ops.len());
        for op in &ops {
            out.integer(read_field(bytes, op));
        }
        return Ok(());
    };
    if read_only {
        return Err(CmdError::fixed(
            "ERR BITFIELD_RO only supports the GET subcommand",
        ));
    }
    let existing = get_string(ctx, name)?;
    let len_before = existing.map(|key| key.head.value_len);
    let key = lengthen(ctx, name, existing, (reach >> 3) as usize + 1)?;
    // As Redis: a write that grew the string counts as a change even if its field was zero.
    let grew = len_before != Some(key.head.value_len);
    let mut changed = false;
    out.array(ops.len());
    for op in &ops {
        if op.kind == FieldOpKind::Get {
            out.integer(read_field(ctx.string(&key), op));
            continue;
        }
        match write_field(ctx, &key, op) {
            Some((reply, field_changed)) => {
                out.integer(reply);
                changed |= grew || field_changed;
            }
            None => out.null(),
        }
    }
    if changed {
        let layout = ctx.layout;
        layout.touch(ctx.txn(), &key);
        ctx.notify(EventClass::String, "setbit", name);
    }
    Ok(())
}

/// Bytes of the window a field is read and written through: a field of up to 64 bits that
/// starts anywhere in its first byte ends within 9 bytes.
const WINDOW_BYTES: usize = 9;

/// The window of `bytes` from `op`'s first byte (zeros past the end), and the field's
/// offset into it.
fn window(bytes: &[u8], op: &FieldOp) -> (u128, u32) {
    let first = (op.offset >> 3) as usize;
    let mut window = 0u128;
    for i in 0..WINDOW_BYTES {
        let byte = bytes.get(first + i).copied().unwrap_or(0);
        window = window << 8 | u128::from(byte);
    }
    (window, (op.offset & 7) as u32)
}

/// Where the field's lowest bit lies in a window (counted from the window's lowest bit).
fn field_shift(op: &FieldOp, skip: u32) -> u32 {
    (WINDOW_BYTES as u32 * 8) - skip - op.bits
}

fn field_mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}

/// The field `op` reads, as its type reads it (sign-extended if signed).
fn read_field(bytes: &[u8], op: &FieldOp) -> i64 {
    let (window, skip) = window(bytes, op);
    let raw = (window >> field_shift(op, skip)) as u64 & field_mask(op.bits);
    if op.signed && op.bits < 64 && (raw >> (op.bits - 1)) & 1 == 1 {
        (raw | !field_mask(op.bits)) as i64
    } else {
        raw as i64
    }
}

/// Runs the write `op` on string `key` (long enough for it): the reply, and whether the
/// field's value changed; `None` if it overflowed under `OVERFLOW FAIL` and wrote nothing.
fn write_field(ctx: &mut Ctx<'_, '_>, key: &Key, op: &FieldOp) -> Option<(i64, bool)> {
    let old = read_field(ctx.string(key), op);
    let (new, reply) = match (op.kind, op.signed) {
        (FieldOpKind::Set(value), true) => (fit_signed(value, 0, op)?, old),
        (FieldOpKind::Set(value), false) => (fit_unsigned(value as u64, 0, op)? as i64, old),
        (FieldOpKind::IncrBy(by), true) => {
            let new = fit_signed(old, by, op)?;
            (new, new)
        }
        (FieldOpKind::IncrBy(by), false) => {
            let new = fit_unsigned(old as u64, by, op)? as i64;
            (new, new)
        }
        (FieldOpKind::Get, _) => unreachable!("a GET writes nothing"),
    };
    let (window, skip) = window(ctx.string(key), op);
    let shift = field_shift(op, skip);
    let mask = u128::from(field_mask(op.bits)) << shift;
    let window = (window & !mask) | ((u128::from(new as u64) << shift) & mask);
    let bytes = window.to_be_bytes();
    let first = (op.offset >> 3) as usize;
    let last = ((op.offset + u64::from(op.bits) - 1) >> 3) as usize;
    let from = bytes.len() - WINDOW_BYTES;
    let txn = ctx.txn();
    txn.set_range(key.string_at() + first, last - first + 1)
        .copy_from_slice(&bytes[from..from + last - first + 1]);
    Some((reply, old != new))
}

/// `value + by` in a signed field of `op.bits`, as Redis's `checkSignedBitfieldOverflow`
/// decides (a `SET` is an add of 0); `None` on overflow under `FAIL`.
fn fit_signed(value: i64, by: i64, op: &FieldOp) -> Option<i64> {
    let bits = op.bits;
    let max = if bits == 64 {
        i64::MAX
    } else {
        (1i64 << (bits - 1)) - 1
    };
    let min = -max - 1;
    // Only compared once `value` is known in range, where they do not wrap.
    let max_by = (max as u64).wrapping_sub(value as u64) as i64;
    let min_by = min.wrapping_sub(value);
    let over = value > max || (bits != 64 && by > max_by) || (value >= 0 && by > 0 && by > max_by);
    let under = value < min || (bits != 64 && by < min_by) || (value < 0 && by < 0 && by < min_by);
    if !over && !under {
        return Some(value.wrapping_add(by));
    }
    match op.overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if over { max } else { min }),
        Overflow::Wrap => {
            let mut sum = (value as u64).wrapping_add(by as u64);
            if bits < 64 {
                let high = u64::MAX << bits;
                sum = if (sum >> (bits - 1)) & 1 == 1 {
                    sum | high
                } else {
                    sum & !high
                };
            }
            Some(sum as i64)
        }
    }
}

/// `value + by` in an unsigned field of `op.bits` (at most 63), as Redis's
/// `checkUnsignedBitfieldOverflow` decides; `None` on overflow under `FAIL`.
fn fit_unsigned(value: u64, by: i64, op: &FieldOp) -> Option<u64> {
    let max = field_mask(op.bits);
    let max_by = max.wrapping_sub(value) as i64;
    let min_by = 0u64.wrapping_sub(value) as i64;
    let over = value > max || (by > 0 && by > max_by);
    let under = !over && by < 0 && by < min_by;
    if !over && !under {
        return Some(value.wrapping_add(by as u64));
    }
    match op.overflow {
        Overflow::Fail => None,
        Overflow::Sat => Some(if over { max } else { 0 }),
        Overflow::Wrap => Some(value.wrapping_add(by as u64) & max),
    }
}
