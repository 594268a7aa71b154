//! HyperLogLog commands (hyperloglog.c): `PFADD`, `PFCOUNT`, `PFMERGE` and `PFDEBUG`.
//!
//! A HyperLogLog is a string, byte for byte Redis 7.0's: a 16-byte header ("HYLL", the
//! encoding, three unused bytes, the cached cardinality little endian with its top bit set
//! when stale), then 16384 six-bit registers, dense (12288 bytes) or sparse (run-length
//! opcodes, promoted to dense past `hll-sparse-max-bytes`, 3000). Since a user may `SET` any
//! bytes and then count them, every read of an opcode is bounded by the string: a byte past
//! the end reads as the terminating zero Redis's sds keeps there. (Redis itself can leave
//! that byte non-zero: splitting an `XZERO` cut short by the end, its `memcpy` writes one byte
//! past the new end, which a later command on the same corrupt value then reads. That case,
//! a value ending in half an opcode whose register is then raised, is not followed here.)
//!
//! Each command works on a copy of the value and writes it back whole once nothing can be
//! refused any more, so an error (`INVALIDOBJ`, found half-way through a `PFADD` of several
//! elements) leaves the key as it was, where Redis keeps the registers it set before.
//!
//! `PFDEBUG` (`GETREG`, `DECODE`, `ENCODING`, `TODENSE`) is served as Redis serves it, a
//! write since two of its subcommands turn a sparse value dense; `PFSELFTEST`, which tests
//! Redis's own code, is not.
//!
//! `PFCOUNT` is read-only here: it answers a valid cached cardinality as Redis does, but
//! never writes the one it computes (Redis stores it in the value), since a backup, which
//! serves reads, cannot write. `PFADD` and `PFMERGE` mark the cache stale as Redis does.

use super::strings::{Ttl, put};
use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::db::Kind;
use crate::notify::EventClass;
use crate::resp::{Argv, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("PFADD", -2, Write, (1, 1, 1), true, pfadd),
    data("PFCOUNT", -2, Read, (1, -1, 1), false, pfcount),
    data("PFDEBUG", 3, Write, (2, 2, 1), true, pfdebug),
    data("PFMERGE", -2, Write, (1, -1, 1), true, pfmerge),
];

const HEADER_LEN: usize = 16;
const P: u32 = 14;
const Q: u32 = 64 - P;
const REGISTERS: usize = 1 << P;
const REGISTER_MAX: u8 = 63;
const DENSE_LEN: usize = HEADER_LEN + (REGISTERS * 6).div_ceil(8);
const DENSE: u8 = 0;
const SPARSE: u8 = 1;
/// Redis's default `hll-sparse-max-bytes`: a sparse value that would grow past it turns dense.
const SPARSE_LEN_MAX: usize = 3000;
const SPARSE_VAL_MAX_VALUE: u8 = 32;
const SPARSE_VAL_MAX_LEN: usize = 4;
const SPARSE_ZERO_MAX_LEN: usize = 64;
const SPARSE_XZERO_MAX_LEN: usize = 16384;
/// 0.5 / ln(2), as hyperloglog.c spells it.
const ALPHA_INF: f64 = 0.721_347_520_444_481_7;
/// MurmurHash64A's seed in `hllPatLen`.
const HASH_SEED: u32 = 0xadc8_3b19;

const NOT_HLL: CmdError = CmdError::fixed("WRONGTYPE Key is not a valid HyperLogLog string value.");
const CORRUPT: CmdError = CmdError::fixed("INVALIDOBJ Corrupted HLL object detected");

/// MurmurHash64A as hyperloglog.c has it (little-endian words).
pub fn murmur64a(key: &[u8], seed: u32) -> u64 {
    const M: u64 = 0xc6a4_a793_5bd1_e995;
    const R: u32 = 47;
    let mut h = u64::from(seed) ^ (key.len() as u64).wrapping_mul(M);
    let mut words = key.chunks_exact(8);
    for word in &mut words {
        let mut k = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        k = k.wrapping_mul(M);
        k ^= k >> R;
        k = k.wrapping_mul(M);
        h ^= k;
        h = h.wrapping_mul(M);
    }
    let tail = words.remainder();
    if !tail.is_empty() {
        for (i, byte) in tail.iter().enumerate() {
            h ^= u64::from(*byte) << (8 * i);
        }
        h = h.wrapping_mul(M);
    }
    h ^= h >> R;
    h = h.wrapping_mul(M);
    h ^= h >> R;
    h
}

/// The register `element` falls in and the length of its run of zeros plus one
/// (`hllPatLen`): from 1 to Q + 1.
pub fn pattern(element: &[u8]) -> (usize, u8) {
    let hash = murmur64a(element, HASH_SEED);
    let index = (hash as usize) & (REGISTERS - 1);
    let rest = (hash >> P) | (1u64 << Q);
    (index, rest.trailing_zeros() as u8 + 1)
}

/// Register `index` of dense registers (`HLL_DENSE_GET_REGISTER`); the byte past the last
/// reads as zero.
fn dense_get(registers: &[u8], index: usize) -> u8 {
    let byte = index * 6 / 8;
    let shift = (index * 6) & 7;
    let b0 = u16::from(registers[byte]);
    let b1 = u16::from(registers.get(byte + 1).copied().unwrap_or(0));
    (((b0 >> shift) | (b1 << (8 - shift))) & u16::from(REGISTER_MAX)) as u8
}

/// Sets register `index` of dense registers to `value` (`HLL_DENSE_SET_REGISTER`).
fn dense_put(registers: &mut [u8], index: usize, value: u8) {
    let byte = index * 6 / 8;
    let shift = (index * 6) & 7;
    let v = u16::from(value);
    registers[byte] &= !((u16::from(REGISTER_MAX) << shift) as u8);
    registers[byte] |= (v << shift) as u8;
    if let Some(next) = registers.get_mut(byte + 1) {
        *next &= !((u16::from(REGISTER_MAX) >> (8 - shift)) as u8);
        *next |= (v >> (8 - shift)) as u8;
    }
}

/// Raises dense register `index` to `count` (`hllDenseSet`): whether it changed.
fn dense_raise(registers: &mut [u8], index: usize, count: u8) -> bool {
    if count > dense_get(registers, index) {
        dense_put(registers, index, count);
        true
    } else {
        false
    }
}

/// One sparse opcode: `ZERO` (1 byte, runs of up to 64 zeros), `XZERO` (2 bytes, up to
/// 16384 zeros) or `VAL` (1 byte, up to 4 registers of a value from 1 to 32).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    Zero(usize),
    XZero(usize),
    Val(u8, usize),
}

impl Op {
    /// The opcode at `at` (< `bytes.len()`); an `XZERO` cut short reads a zero second byte.
    fn at(bytes: &[u8], at: usize) -> Op {
        let b = bytes[at];
        match b & 0xc0 {
            0x00 => Op::Zero(usize::from(b & 0x3f) + 1),
            0x40 => {
                let low = bytes.get(at + 1).copied().unwrap_or(0);
                Op::XZero(((usize::from(b & 0x3f) << 8) | usize::from(low)) + 1)
            }
            _ => Op::Val(((b >> 2) & 0x1f) + 1, usize::from(b & 3) + 1),
        }
    }

    fn span(self) -> usize {
        match self {
            Op::Zero(len) | Op::XZero(len) | Op::Val(_, len) => len,
        }
    }

    fn width(self) -> usize {
        if matches!(self, Op::XZero(_)) { 2 } else { 1 }
    }

    fn encode(self, out: &mut Vec<u8>) {
        match self {
            Op::Zero(len) => out.push((len - 1) as u8),
            Op::XZero(len) => {
                out.extend_from_slice(&[((len - 1) >> 8) as u8 | 0x40, (len - 1) as u8])
            }
            Op::Val(value, len) => out.push(((value - 1) << 2) | (len - 1) as u8 | 0x80),
        }
    }

    /// A run of `len` zeros: `ZERO` while it fits, `XZERO` beyond.
    fn zeros(len: usize) -> Op {
        if len > SPARSE_ZERO_MAX_LEN {
            Op::XZero(len)
        } else {
            Op::Zero(len)
        }
    }
}

/// Walks the sparse opcodes of `value` (header included), calling `visit(first, op)` for
/// each. Returns the registers they cover: a valid value's cover exactly every register. (So
/// Redis 7.0.15 as Debian ships it checks, with the fix for CVE-2025-32023: an opcode past
/// the last register makes the value corrupt, where 7.0.15's source stops at a `VAL` there.)
fn walk_sparse(value: &[u8], mut visit: impl FnMut(usize, Op)) -> usize {
    let mut at = HEADER_LEN;
    let mut covered = 0usize;
    while at < value.len() {
        let op = Op::at(value, at);
        visit(covered, op);
        covered = covered.saturating_add(op.span());
        at += op.width();
    }
    covered
}

/// Whether `value` is a HyperLogLog as Redis's `isHLLObjectOrReply` checks it.
fn is_hll(value: &[u8]) -> bool {
    value.len() >= HEADER_LEN
        && value.starts_with(b"HYLL")
        && value[4] <= SPARSE
        && (value[4] != DENSE || value.len() == DENSE_LEN)
}

/// Raises `max` (one byte per register) to the registers of `value` (`hllMerge`); `false`
/// if a sparse value does not cover exactly every register (see [`walk_sparse`]).
fn merge_into(max: &mut [u8; REGISTERS], value: &[u8]) -> bool {
    if value[4] == DENSE {
        let registers = &value[HEADER_LEN..];
        for (index, slot) in max.iter_mut().enumerate() {
            *slot = (*slot).max(dense_get(registers, index));
        }
        return true;
    }
    let covered = walk_sparse(value, |first, op| {
        if let Op::Val(value, len) = op
            && first + len <= REGISTERS
        {
            for slot in &mut max[first..first + len] {
                *slot = (*slot).max(value);
            }
        }
    });
    covered == REGISTERS
}

/// The dense form of sparse `value` (`hllSparseToDense`), its header kept but for the
/// encoding; `None` if it does not cover exactly every register (see [`walk_sparse`]).
fn to_dense(value: &[u8]) -> Option<Vec<u8>> {
    let mut dense = vec![0u8; DENSE_LEN];
    dense[..HEADER_LEN].copy_from_slice(&value[..HEADER_LEN]);
    dense[4] = DENSE;
    let registers = &mut dense[HEADER_LEN..];
    let covered = walk_sparse(value, |first, op| {
        if let Op::Val(value, len) = op
            && first + len <= REGISTERS
        {
            for index in first..first + len {
                dense_put(registers, index, value);
            }
        }
    });
    (covered == REGISTERS).then_some(dense)
}

/// Raises register `index` of sparse `value` to `count` (`hllSparseSet`), promoting the
/// value to dense when the count does not fit a `VAL` or the value would outgrow
/// [`SPARSE_LEN_MAX`]. `Ok(changed)`, or `Err` for a corrupt value.
fn sparse_raise(value: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, CmdError> {
    if count > SPARSE_VAL_MAX_VALUE {
        return promote_and_raise(value, index, count);
    }
    // Find the opcode that covers `index`, and the one before it.
    let (mut at, mut first, mut prev, mut span) = (HEADER_LEN, 0usize, None, 0usize);
    while at < value.len() {
        let op = Op::at(value, at);
        span = op.span();
        if index < first + span {
            break;
        }
        prev = Some(at);
        at += op.width();
        first += span;
    }
    if span == 0 || at >= value.len() {
        return Err(CORRUPT);
    }
    let op = Op::at(value, at);
    let last = first + span - 1;
    let mut seq = Vec::with_capacity(5);
    match op {
        Op::Val(old, _) if old >= count => return Ok(false),
        Op::Val(_, 1) | Op::Zero(1) => Op::Val(count, 1).encode(&mut seq),
        Op::Zero(_) | Op::XZero(_) => {
            if index != first {
                Op::zeros(index - first).encode(&mut seq);
            }
            Op::Val(count, 1).encode(&mut seq);
            if index != last {
                Op::zeros(last - index).encode(&mut seq);
            }
        }
        Op::Val(old, _) => {
            if index != first {
                Op::Val(old, index - first).encode(&mut seq);
            }
            Op::Val(count, 1).encode(&mut seq);
            if index != last {
                Op::Val(old, last - index).encode(&mut seq);
            }
        }
    }
    let new_len = value.len() - op.width() + seq.len();
    if seq.len() > op.width() && new_len > SPARSE_LEN_MAX {
        return promote_and_raise(value, index, count);
    }
    // Splice, cut to Redis's new length (an `XZERO` cut short by the end counts two bytes).
    let tail_from = (at + op.width()).min(value.len());
    let mut spliced = Vec::with_capacity(value.len() + seq.len());
    spliced.extend_from_slice(&value[..at]);
    spliced.extend_from_slice(&seq);
    spliced.extend_from_slice(&value[tail_from..]);
    spliced.truncate(new_len);
    *value = spliced;
    merge_adjacent_vals(value, prev.unwrap_or(HEADER_LEN));
    invalidate_cache(value);
    Ok(true)
}

/// Step 4 of `hllSparseSet`: from `from`, up to five opcodes, merges two adjacent `VAL`s of
/// the same value whose lengths fit one.
fn merge_adjacent_vals(value: &mut Vec<u8>, from: usize) {
    let mut at = from;
    let mut scans = 5;
    while at < value.len() && scans > 0 {
        scans -= 1;
        match Op::at(value, at) {
            Op::XZero(_) => {
                at += 2;
                continue;
            }
            Op::Zero(_) => {
                at += 1;
                continue;
            }
            Op::Val(v1, len1) => {
                if at + 1 < value.len()
                    && let Op::Val(v2, len2) = Op::at(value, at + 1)
                    && v1 == v2
                    && len1 + len2 <= SPARSE_VAL_MAX_LEN
                {
                    value.remove(at);
                    let mut merged = Vec::with_capacity(1);
                    Op::Val(v1, len1 + len2).encode(&mut merged);
                    value[at] = merged[0];
                    continue;
                }
            }
        }
        at += 1;
    }
}

/// The promotion path of `hllSparseSet`: the value turns dense, then register `index` is
/// raised (which must change it).
fn promote_and_raise(value: &mut Vec<u8>, index: usize, count: u8) -> Result<bool, CmdError> {
    let mut dense = to_dense(value).ok_or(CORRUPT)?;
    let changed = dense_raise(&mut dense[HEADER_LEN..], index, count);
    assert!(changed, "a promotion is for a register that grows");
    *value = dense;
    Ok(true)
}

fn invalidate_cache(value: &mut [u8]) {
    value[15] |= 0x80;
}

/// The value a new HyperLogLog starts as (`createHLLObject`): sparse, one `XZERO` for all
/// registers, a valid cached cardinality of 0.
fn empty_hll() -> Vec<u8> {
    let mut value = Vec::with_capacity(HEADER_LEN + 2);
    value.extend_from_slice(b"HYLL");
    value.extend_from_slice(&[SPARSE, 0, 0, 0]);
    value.extend_from_slice(&[0; 8]);
    Op::XZero(SPARSE_XZERO_MAX_LEN).encode(&mut value);
    value
}

/// Adds `element` to `value` (`hllAdd`): whether a register changed.
fn add(value: &mut Vec<u8>, element: &[u8]) -> Result<bool, CmdError> {
    let (index, count) = pattern(element);
    match value[4] {
        DENSE => Ok(dense_raise(&mut value[HEADER_LEN..], index, count)),
        _ => sparse_raise(value, index, count),
    }
}

/// How many registers hold each value (`hllDenseRegHisto`, `hllSparseRegHisto`); for a
/// sparse value also whether it covers exactly every register. Values past 63 cannot occur.
fn histogram(value: &[u8]) -> ([u32; 64], bool) {
    let mut counts = [0u32; 64];
    if value[4] == DENSE {
        let registers = &value[HEADER_LEN..];
        for index in 0..REGISTERS {
            counts[usize::from(dense_get(registers, index))] += 1;
        }
        return (counts, true);
    }
    let covered = walk_sparse(value, |_, op| {
        let slot = match op {
            Op::Val(value, _) => usize::from(value),
            Op::Zero(_) | Op::XZero(_) => 0,
        };
        counts[slot] = counts[slot].wrapping_add(op.span() as u32);
    });
    (counts, covered == REGISTERS)
}

/// The histogram of raw registers, one byte each (`hllRawRegHisto`).
fn raw_histogram(registers: &[u8; REGISTERS]) -> [u32; 64] {
    let mut counts = [0u32; 64];
    for &register in registers {
        counts[usize::from(register & 63)] += 1;
    }
    counts
}

/// `hllSigma`.
fn sigma(mut x: f64) -> f64 {
    if x == 1.0 {
        return f64::INFINITY;
    }
    let mut y = 1.0;
    let mut z = x;
    loop {
        x *= x;
        let z_prime = z;
        z += x * y;
        y += y;
        if z_prime == z {
            return z;
        }
    }
}

/// `hllTau`.
fn tau(mut x: f64) -> f64 {
    if x == 0.0 || x == 1.0 {
        return 0.0;
    }
    let mut y = 1.0;
    let mut z = 1.0 - x;
    loop {
        x = x.sqrt();
        let z_prime = z;
        y *= 0.5;
        z -= (1.0 - x) * (1.0 - x) * y;
        if z_prime == z {
            return z / 3.0;
        }
    }
}

/// The cardinality estimate of a register histogram (`hllCount`: Ertl's estimator).
fn estimate(counts: &[u32; 64]) -> u64 {
    let m = REGISTERS as f64;
    let mut z = m * tau((m - f64::from(counts[Q as usize + 1])) / m);
    for j in (1..=Q as usize).rev() {
        z += f64::from(counts[j]);
        z *= 0.5;
    }
    z += m * sigma(f64::from(counts[0]) / m);
    (ALPHA_INF * m * m / z).round() as u64
}

/// The cardinality cached in `value`'s header, if it is valid.
fn cached_cardinality(value: &[u8]) -> Option<u64> {
    let card = u64::from_le_bytes(value[8..16].try_into().expect("eight bytes"));
    (card >> 63 == 0).then_some(card)
}

/// The HyperLogLog at `key`: `None` if missing; the error Redis answers for another type or
/// a string that is no HyperLogLog.
fn read_hll(ctx: &Ctx<'_, '_>, key: &[u8]) -> Result<Option<Vec<u8>>, CmdError> {
    let Some(found) = ctx.find_typed(key, Kind::String)? else {
        return Ok(None);
    };
    let value = ctx.string(&found);
    if !is_hll(value) {
        return Err(NOT_HLL);
    }
    Ok(Some(value.to_vec()))
}

pub fn pfadd(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 1);
    let (mut value, mut updated) = match read_hll(ctx, key)? {
        Some(value) => (value, false),
        None => (empty_hll(), true),
    };
    for element in argv.iter().skip(2) {
        updated |= add(&mut value, element)?;
    }
    if updated {
        invalidate_cache(&mut value);
        put(ctx, key, &value, Ttl::Keep)?;
        super::dump::mark(ctx, key, crate::db::EncodingMark::Large);
        ctx.notify(EventClass::String, "pfadd", key);
    }
    out.integer(i64::from(updated));
    Ok(())
}

pub fn pfcount(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    if argv.len() == 2 {
        let card = match read_hll(ctx, arg(argv, 1))? {
            None => 0,
            Some(value) => match cached_cardinality(&value) {
                Some(card) => card,
                None => match histogram(&value) {
                    (counts, true) => estimate(&counts),
                    (_, false) => return Err(CORRUPT),
                },
            },
        };
        out.integer(card as i64);
        return Ok(());
    }
    let mut max = Box::new([0u8; REGISTERS]);
    for key in argv.iter().skip(1) {
        if let Some(value) = read_hll(ctx, key)?
            && !merge_into(&mut max, &value)
        {
            return Err(CORRUPT);
        }
    }
    out.integer(estimate(&raw_histogram(&max)) as i64);
    Ok(())
}

pub fn pfmerge(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let mut max = Box::new([0u8; REGISTERS]);
    let mut any_dense = false;
    // The destination is the first source, as in Redis.
    let mut target = None;
    for (i, key) in argv.iter().enumerate().skip(1) {
        let Some(value) = read_hll(ctx, key)? else {
            continue;
        };
        any_dense |= value[4] == DENSE;
        if !merge_into(&mut max, &value) {
            return Err(CORRUPT);
        }
        if i == 1 {
            target = Some(value);
        }
    }
    let mut value = target.unwrap_or_else(empty_hll);
    if any_dense && value[4] == SPARSE {
        value = to_dense(&value).ok_or(CORRUPT)?;
    }
    for (index, &register) in max.iter().enumerate() {
        if register == 0 {
            continue;
        }
        if value[4] == DENSE {
            dense_raise(&mut value[HEADER_LEN..], index, register);
        } else {
            // The destination covered every register when merged, so this cannot fail.
            sparse_raise(&mut value, index, register)?;
        }
    }
    invalidate_cache(&mut value);
    put(ctx, arg(argv, 1), &value, Ttl::Keep)?;
    super::dump::mark(ctx, arg(argv, 1), crate::db::EncodingMark::Large);
    // Redis tells a merge as an add of many elements, whether or not a register rose.
    ctx.notify(EventClass::String, "pfadd", arg(argv, 1));
    out.ok();
    Ok(())
}

/// `PFDEBUG GETREG|DECODE|ENCODING|TODENSE key`.
pub fn pfdebug(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    let key = arg(argv, 2);
    let value = match ctx.find(key) {
        None => return Err(CmdError::fixed("ERR The specified key does not exist")),
        Some(_) => read_hll(ctx, key)?.expect("the key exists"),
    };
    let sparse = value[4] == SPARSE;
    let subcommand = arg(argv, 1);
    match subcommand.to_ascii_lowercase().as_slice() {
        b"getreg" => {
            let dense = if sparse {
                let dense = to_dense(&value).ok_or(CORRUPT)?;
                put(ctx, key, &dense, Ttl::Keep)?;
                super::dump::mark(ctx, key, crate::db::EncodingMark::Large);
                dense
            } else {
                value
            };
            out.array(REGISTERS);
            for index in 0..REGISTERS {
                out.integer(i64::from(dense_get(&dense[HEADER_LEN..], index)));
            }
        }
        b"decode" if !sparse => {
            return Err(CmdError::fixed("ERR HLL encoding is not sparse"));
        }
        b"decode" => {
            let mut decoded = Vec::new();
            walk_sparse(&value, |_, op| {
                let text = match op {
                    Op::Zero(len) => format!("z:{len} "),
                    Op::XZero(len) => format!("Z:{len} "),
                    Op::Val(value, len) => format!("v:{value},{len} "),
                };
                decoded.extend_from_slice(text.as_bytes());
            });
            out.bulk(decoded.trim_ascii_end());
        }
        b"encoding" => out.simple(if sparse { "sparse" } else { "dense" }),
        b"todense" => {
            if sparse {
                let dense = to_dense(&value).ok_or(CORRUPT)?;
                put(ctx, key, &dense, Ttl::Keep)?;
                super::dump::mark(ctx, key, crate::db::EncodingMark::Large);
            }
            out.integer(i64::from(sparse));
        }
        _ => {
            // Redis prints the subcommand as a C string: up to its first NUL.
            let shown = subcommand
                .split(|&byte| byte == 0)
                .next()
                .unwrap_or_default();
            return Err(CmdError::owned(format!(
                "ERR Unknown PFDEBUG subcommand '{}'",
                String::from_utf8_lossy(shown)
            )));
        }
    }
    Ok(())
}
