//! Redis's number parsing and formatting, reproduced byte for byte.
//!
//! Clients see numbers as text, so a Redis-compatible server must accept exactly the texts
//! Redis accepts and print exactly the texts Redis prints. The rules here come from Redis
//! 7.0's `util.c`, `object.c` and `t_string.c`, and were checked against a live
//! `redis-server` 7.0.15:
//!
//! - [`parse_i64`] is `string2ll`: an optional `-`, no `+`, no spaces, no leading zeros
//!   (so `"-0"` and `"007"` are rejected), at most 20 bytes, overflow rejected.
//! - [`parse_f64`] is `string2d`, the parser behind scores and `getDoubleFromObject`: glibc
//!   `strtod` must consume the whole text, the first byte must not be whitespace, NaN is
//!   rejected, and so is a finite text that overflows to infinity or underflows to zero.
//!   strtod's syntax is wider than Rust's `str::parse`: it takes hexadecimal floats
//!   (`0x1p3`) and `infinity` in any case, so the syntax is checked here by hand.
//! - [`format_double`] is C's `%.17g`, which Redis 7.0's `addReplyDouble` sends for every
//!   double reply (`ZSCORE`, `ZINCRBY`, ...).
//! - `INCRBYFLOAT` and `HINCRBYFLOAT` parse with `string2ld`, add in C `long double`
//!   (on x86-64 the 80-bit x87 format, with a 64-bit mantissa) and print the sum with
//!   `ld2string`'s human mode, `%.17Lf` with trailing zeros removed. Two ways to follow:
//!   - [`LongDouble`] reproduces them exactly. It is a small software implementation of
//!     the x87 format: correctly rounded parsing (as glibc's `strtold`), a correctly
//!     rounded sum (as the x87 `fadd`) and exact `%.17Lf` printing (as glibc's `printf`,
//!     which rounds ties to even). Prefer it: an `f64` cannot produce Redis's replies,
//!     which answer `0.1 + 0.2` with `0.3` but `12345.1 + 0.1` with
//!     `12345.19999999999999929`; both follow only from a 64-bit mantissa.
//!   - [`parse_long_double_like`] and [`format_long_double_human`] work on `f64` and
//!     match Redis for sums of short decimals with no rounding error in `f64` (`10.5 + 0.1`
//!     is "10.6", `5e3 + 2e2` is "5200"), but differ elsewhere (`0.1 + 0.2` is
//!     "0.30000000000000004").
//!
//! The integer and `f64` paths never allocate beyond appending to the caller's `Vec`;
//! [`LongDouble`] allocates a little big-integer scratch space to parse decimal text and
//! to print integers above 2^64, which only the two float-increment commands pay for.

use std::cmp::Ordering;
use std::fmt;
use std::fmt::Write as _;
use std::io::Write as _;

/// The longest decimal text of an `i64` ("-9223372036854775808"). Redis's `string2ll`
/// rejects anything longer before looking at it.
const I64_TEXT_MAX: usize = 20;

/// Parses a decimal integer exactly as Redis's `string2ll` does.
///
/// Redis uses this strict form for every integer argument, so `"+1"`, `" 1"`, `"01"`,
/// `"-0"` and `"1.0"` are all "not an integer" to it, and must be to us.
pub fn parse_i64(bytes: &[u8]) -> Option<i64> {
    if bytes.is_empty() || bytes.len() > I64_TEXT_MAX {
        return None;
    }
    if bytes == b"0" {
        return Some(0);
    }
    let (negative, digits) = match bytes.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, bytes),
    };
    // The first digit must be 1-9: the only text allowed to start with zero is "0" itself.
    if !matches!(digits.first(), Some(b'1'..=b'9')) {
        return None;
    }
    let mut magnitude: u64 = 0;
    for &byte in digits {
        if !byte.is_ascii_digit() {
            return None;
        }
        magnitude = magnitude
            .checked_mul(10)?
            .checked_add(u64::from(byte - b'0'))?;
    }
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Appends the decimal text of `n`, without allocating beyond `out`'s own growth.
///
/// Integer replies and RESP length headers are written on every reply, so this avoids the
/// temporary `String` that `to_string` would create.
pub fn format_i64(n: i64, out: &mut Vec<u8>) {
    if n < 0 {
        out.push(b'-');
    }
    format_u64(n.unsigned_abs(), out);
}

/// Appends the decimal text of `n`; the unsigned sibling of [`format_i64`] for lengths.
pub fn format_u64(n: u64, out: &mut Vec<u8>) {
    let mut buffer = [0u8; I64_TEXT_MAX];
    let mut start = buffer.len();
    let mut rest = n;
    loop {
        start -= 1;
        buffer[start] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    out.extend_from_slice(&buffer[start..]);
}

/// Parses a double exactly as Redis 7.0's `string2d` (and so `getDoubleFromObject`) does.
///
/// Accepted: what glibc's `strtod` accepts when it must consume the whole text: an
/// optional sign, then decimal digits with an optional point and exponent (`1e5`, `.5`,
/// `5.`, `00012`), a hexadecimal float (`0x10`, `0x1p3`, `0x.8`), or `inf`/`infinity` in
/// any case. Rejected: empty text, a leading space, any trailing byte, NaN in any form,
/// and finite texts whose value overflows to infinity (`1e400`) or underflows to zero
/// (`1e-400`; but `0e-400` is a true zero and accepted, and subnormals are accepted).
pub fn parse_f64(bytes: &[u8]) -> Option<f64> {
    let scanned = scan_c_float(bytes)?;
    let magnitude = match scanned.form {
        FloatForm::Infinity => f64::INFINITY,
        FloatForm::Hex(mantissa) => {
            match round_binary(&mantissa.into_unrounded(), BinaryFormat::DOUBLE) {
                Rounded::Zero if mantissa.is_zero() => 0.0,
                // glibc reports ERANGE on overflow and on underflow to zero; Redis rejects.
                Rounded::Zero | Rounded::Overflow => return None,
                Rounded::Finite { mantissa, exponent } => f64_from_parts(mantissa, exponent),
            }
        }
        FloatForm::Decimal(decimal) => {
            // The text is ASCII (the scanner checked every byte), and its syntax is one
            // that Rust's correctly rounded parser also accepts: the unsigned part is
            // digits, an optional point, digits, and an optional exponent.
            let text = std::str::from_utf8(scanned.unsigned_text).ok()?;
            let value: f64 = text.parse().ok()?;
            // glibc reports ERANGE for these two, and Redis rejects the text.
            if value.is_infinite() || (value == 0.0 && !decimal.is_zero()) {
                return None;
            }
            value
        }
    };
    Some(if scanned.negative {
        -magnitude
    } else {
        magnitude
    })
}

/// Parses a number as Redis 7.0 parses the bounds of a score range (`zslParseRange`, for
/// `ZCOUNT`, `ZRANGEBYSCORE`, …): glibc's `strtod` on the argument read as a C string, which
/// must consume all of it, and whose result must not be NaN.
///
/// So, unlike [`parse_f64`]: leading white space is skipped (`" 1"`), an empty text is 0
/// (strtod converts nothing and stops at the terminating NUL), a value beyond a double's
/// range saturates instead of being refused (`1e400` is infinity, `1e-400` zero), and the
/// text ends at its first NUL byte, as C sees it. White space alone is refused (strtod then
/// stops at the first byte, which is not the end).
pub fn parse_f64_strtod(bytes: &[u8]) -> Option<f64> {
    let text = bytes.split(|&byte| byte == 0).next().unwrap_or_default();
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text
        .iter()
        .position(|&byte| !matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let scanned = scan_c_float(&text[start..])?;
    let magnitude = match scanned.form {
        FloatForm::Infinity => f64::INFINITY,
        FloatForm::Hex(mantissa) => {
            match round_binary(&mantissa.into_unrounded(), BinaryFormat::DOUBLE) {
                Rounded::Zero => 0.0,
                Rounded::Overflow => f64::INFINITY,
                Rounded::Finite { mantissa, exponent } => f64_from_parts(mantissa, exponent),
            }
        }
        // Rust's parser saturates as strtod does: to infinity above the range, to zero
        // below it.
        FloatForm::Decimal(_) => std::str::from_utf8(scanned.unsigned_text)
            .ok()?
            .parse()
            .ok()?,
    };
    Some(if scanned.negative {
        -magnitude
    } else {
        magnitude
    })
}

/// Appends `d` as C's `printf("%.17g")` prints it with glibc, which is what Redis 7.0 sends
/// for double replies: 0.1 is "0.10000000000000001", 1.5 is "1.5", 1e20 is "1e+20",
/// 3.0 is "3", -0.0 is "-0", and infinities are "inf" and "-inf".
///
/// `%.17g` rounds to 17 significant digits, then uses the exponent form when the decimal
/// exponent X is below -4 or at least 17 (with at least two exponent digits) and the fixed
/// form otherwise, and in both forms drops trailing zeros and a trailing point.
pub fn format_double(d: f64, out: &mut Vec<u8>) {
    if d.is_nan() {
        out.extend_from_slice(if d.is_sign_negative() {
            b"-nan"
        } else {
            b"nan"
        });
        return;
    }
    if d.is_sign_negative() {
        out.push(b'-');
    }
    if d.is_infinite() {
        out.extend_from_slice(b"inf");
        return;
    }
    // An integral value below 10^15 prints as its digits under %.17g; the common case (Lua
    // numbers passed to redis.call, counters) skips the digit generation.
    if d.abs() < 1e15 && d.fract() == 0.0 {
        format_u64(d.abs() as u64, out);
        return;
    }
    const SIGNIFICANT: usize = 17;
    let (digits, exponent) = seventeen_significant_digits(d.abs());
    if !(-4..SIGNIFICANT as i32).contains(&exponent) {
        out.push(digits[0]);
        let fraction = trim_trailing_zeros(&digits[1..]);
        if !fraction.is_empty() {
            out.push(b'.');
            out.extend_from_slice(fraction);
        }
        out.push(b'e');
        out.push(if exponent < 0 { b'-' } else { b'+' });
        if exponent.unsigned_abs() < 10 {
            out.push(b'0');
        }
        format_u64(u64::from(exponent.unsigned_abs()), out);
    } else if exponent >= 0 {
        let integer_digits = exponent as usize + 1;
        out.extend_from_slice(&digits[..integer_digits]);
        let fraction = trim_trailing_zeros(&digits[integer_digits..]);
        if !fraction.is_empty() {
            out.push(b'.');
            out.extend_from_slice(fraction);
        }
    } else {
        out.extend_from_slice(b"0.");
        for _ in 0..(-exponent - 1) {
            out.push(b'0');
        }
        out.extend_from_slice(trim_trailing_zeros(&digits));
    }
}

/// Returns the 17 significant decimal digits of a finite, non-negative `magnitude`
/// (correctly rounded, ties to even, as glibc's printf) and its decimal exponent.
fn seventeen_significant_digits(magnitude: f64) -> ([u8; 17], i32) {
    let mut text = StackText::default();
    // Rust's `{:.16e}` is exact and rounds ties to even, as glibc does. Its output for a
    // finite f64 is at most 22 bytes ("1.7976931348623157e308"), so it always fits.
    let written = write!(text, "{magnitude:.16e}");
    debug_assert!(written.is_ok(), "a formatted f64 always fits in StackText");
    let mut digits = [b'0'; 17];
    let mut digit_count = 0;
    let mut bytes = text.as_bytes().iter();
    for &byte in bytes.by_ref() {
        match byte {
            b'0'..=b'9' if digit_count < digits.len() => {
                digits[digit_count] = byte;
                digit_count += 1;
            }
            b'e' => break,
            _ => {}
        }
    }
    let mut exponent: i32 = 0;
    let mut exponent_negative = false;
    for &byte in bytes {
        match byte {
            b'-' => exponent_negative = true,
            b'0'..=b'9' => exponent = exponent * 10 + i32::from(byte - b'0'),
            _ => {}
        }
    }
    (
        digits,
        if exponent_negative {
            -exponent
        } else {
            exponent
        },
    )
}

fn trim_trailing_zeros(digits: &[u8]) -> &[u8] {
    let kept = digits
        .iter()
        .rposition(|&digit| digit != b'0')
        .map_or(0, |last| last + 1);
    &digits[..kept]
}

/// A fixed-size `fmt::Write` target, so Rust's float formatting can be used without
/// allocating.
#[derive(Debug, Default)]
struct StackText {
    buffer: [u8; 32],
    len: usize,
}

impl StackText {
    fn as_bytes(&self) -> &[u8] {
        &self.buffer[..self.len]
    }
}

impl fmt::Write for StackText {
    fn write_str(&mut self, text: &str) -> fmt::Result {
        let end = self.len + text.len();
        let slot = self.buffer.get_mut(self.len..end).ok_or(fmt::Error)?;
        slot.copy_from_slice(text.as_bytes());
        self.len = end;
        Ok(())
    }
}

/// The longest text Redis's `string2ld` accepts is one byte less than its buffer,
/// `MAX_LONG_DOUBLE_CHARS` (5 KiB).
const LONG_DOUBLE_TEXT_MAX: usize = 5 * 1024 - 1;

/// A C `long double` as Redis on x86-64 has it: the x87 80-bit extended format, with a
/// 64-bit mantissa and a 15-bit exponent.
///
/// Only what `INCRBYFLOAT` and `HINCRBYFLOAT` need is provided: parse
/// ([`LongDouble::parse`]), add (`+`, correctly rounded to nearest, ties to even), test
/// for infinity or NaN ([`LongDouble::is_finite`]), and print
/// ([`LongDouble::format_human`]). With it, `INCRBYFLOAT` is
/// `LongDouble::parse(old)? + LongDouble::parse(increment)?`, refused unless finite, then
/// `format_human`, and its replies are byte for byte Redis's.
#[derive(Clone, Copy, Debug)]
pub struct LongDouble {
    negative: bool,
    class: LongDoubleClass,
}

#[derive(Clone, Copy, Debug)]
enum LongDoubleClass {
    Zero,
    /// The value `mantissa * 2^exponent`, with the mantissa normalized (bit 63 set) unless
    /// the value is subnormal, in which case the exponent is the format's minimum.
    Finite {
        mantissa: u64,
        exponent: i32,
    },
    Infinite,
    NotANumber,
}

impl LongDouble {
    /// Parses a long double exactly as Redis 7.0's `string2ld` does (used by
    /// `INCRBYFLOAT` and `HINCRBYFLOAT` for both the stored value and the increment).
    ///
    /// The syntax is that of [`parse_f64`]; the differences are the range (a long double
    /// reaches about 1.19e4932 and 3.6e-4951, so `1e400` is accepted here) and a length
    /// limit of 5119 bytes. `inf` is accepted; the commands then refuse the infinite sum.
    pub fn parse(bytes: &[u8]) -> Option<LongDouble> {
        if bytes.len() > LONG_DOUBLE_TEXT_MAX {
            return None;
        }
        let scanned = scan_c_float(bytes)?;
        let class = match scanned.form {
            FloatForm::Infinity => LongDoubleClass::Infinite,
            FloatForm::Hex(mantissa) => {
                match round_binary(&mantissa.into_unrounded(), BinaryFormat::EXTENDED) {
                    Rounded::Zero if mantissa.is_zero() => LongDoubleClass::Zero,
                    // glibc reports ERANGE on overflow and on underflow to zero.
                    Rounded::Zero | Rounded::Overflow => return None,
                    Rounded::Finite { mantissa, exponent } => {
                        LongDoubleClass::Finite { mantissa, exponent }
                    }
                }
            }
            FloatForm::Decimal(decimal) => match decimal_to_extended(&decimal) {
                DecimalValue::Zero => LongDoubleClass::Zero,
                DecimalValue::OutOfRange => return None,
                DecimalValue::Finite { mantissa, exponent } => {
                    LongDoubleClass::Finite { mantissa, exponent }
                }
            },
        };
        Some(LongDouble {
            negative: scanned.negative,
            class,
        })
    }

    /// Whether the value is neither infinite nor NaN. `INCRBYFLOAT` refuses to store a sum
    /// that is not finite ("ERR increment would produce NaN or Infinity").
    pub fn is_finite(&self) -> bool {
        matches!(
            self.class,
            LongDoubleClass::Zero | LongDoubleClass::Finite { .. }
        )
    }

    /// The nearest `f64` (ties to even); beyond the `f64` range that is an infinity or a
    /// zero.
    pub fn to_f64(&self) -> f64 {
        let magnitude = match self.class {
            LongDoubleClass::Zero => 0.0,
            LongDoubleClass::Infinite => f64::INFINITY,
            LongDoubleClass::NotANumber => f64::NAN,
            LongDoubleClass::Finite { mantissa, exponent } => {
                let exact = Unrounded {
                    mantissa: u128::from(mantissa),
                    exponent: i64::from(exponent),
                    sticky: false,
                };
                match round_binary(&exact, BinaryFormat::DOUBLE) {
                    Rounded::Zero => 0.0,
                    Rounded::Overflow => f64::INFINITY,
                    Rounded::Finite { mantissa, exponent } => f64_from_parts(mantissa, exponent),
                }
            }
        };
        if self.negative { -magnitude } else { magnitude }
    }

    /// Appends the value as Redis's `ld2string(..., LD_STR_HUMAN)` prints it, which is
    /// what `INCRBYFLOAT` and `HINCRBYFLOAT` store and reply: `%.17Lf`, then trailing
    /// zeros and a trailing point removed, and "-0" turned into "0". So there is never an
    /// exponent, at most 17 digits follow the point, and magnitudes below 5e-18 print as
    /// "0".
    ///
    /// Infinity prints as "inf"/"-inf" and NaN as "nan"/"-nan" (glibc's spelling),
    /// although the commands reject those sums before printing.
    pub fn format_human(&self, out: &mut Vec<u8>) {
        const FRACTION_DIGITS: usize = 17;
        const FRACTION_SCALE: u128 = 100_000_000_000_000_000; // 10^17
        let (mantissa, exponent) = match self.class {
            LongDoubleClass::NotANumber => {
                out.extend_from_slice(if self.negative { b"-nan" } else { b"nan" });
                return;
            }
            LongDoubleClass::Infinite => {
                out.extend_from_slice(if self.negative { b"-inf" } else { b"inf" });
                return;
            }
            LongDoubleClass::Zero => {
                out.push(b'0');
                return;
            }
            LongDoubleClass::Finite { mantissa, exponent } => (mantissa, exponent),
        };
        if exponent >= 0 {
            // An integer: the 17 fractional digits are all zero and are trimmed away.
            if self.negative {
                out.push(b'-');
            }
            let mut integer = BigUint::from_u64(mantissa);
            integer.shift_left(exponent as u64);
            integer.write_decimal(out);
            return;
        }
        // value * 10^17 = mantissa * 10^17 / 2^shift, where mantissa * 10^17 < 2^121.
        let shift = exponent.unsigned_abs();
        let scaled = u128::from(mantissa) * FRACTION_SCALE;
        let fixed_point = if shift >= 122 {
            // scaled < 2^121 <= half of 2^shift, so the value rounds to zero.
            0
        } else {
            let kept = scaled >> shift;
            let lost = scaled & ((1u128 << shift) - 1);
            let half = 1u128 << (shift - 1);
            let round_up = lost > half || (lost == half && kept & 1 == 1);
            kept + u128::from(round_up)
        };
        if fixed_point == 0 {
            // "-0.00000000000000000" trims to "-0", which Redis replaces with "0".
            out.push(b'0');
            return;
        }
        if self.negative {
            out.push(b'-');
        }
        // The integer part is below 2^64, because the value is when its exponent is < 0.
        format_u64((fixed_point / FRACTION_SCALE) as u64, out);
        let fraction_part = fixed_point % FRACTION_SCALE;
        if fraction_part != 0 {
            let mut digits = [b'0'; FRACTION_DIGITS];
            let mut rest = fraction_part;
            for digit in digits.iter_mut().rev() {
                *digit = b'0' + (rest % 10) as u8;
                rest /= 10;
            }
            out.push(b'.');
            out.extend_from_slice(trim_trailing_zeros(&digits));
        }
    }

    fn from_rounded(negative: bool, rounded: Rounded) -> LongDouble {
        let class = match rounded {
            Rounded::Zero => LongDoubleClass::Zero,
            Rounded::Overflow => LongDoubleClass::Infinite,
            Rounded::Finite { mantissa, exponent } => {
                LongDoubleClass::Finite { mantissa, exponent }
            }
        };
        LongDouble { negative, class }
    }
}

impl std::ops::Add for LongDouble {
    type Output = LongDouble;

    /// Adds as the x87 FPU does in its default 64-bit precision: the exact sum, rounded
    /// once to nearest with ties to even.
    fn add(self, other: LongDouble) -> LongDouble {
        use LongDoubleClass::{Finite, Infinite, NotANumber, Zero};
        match (self.class, other.class) {
            (NotANumber, _) => self,
            (_, NotANumber) => other,
            (Infinite, Infinite) if self.negative != other.negative => LongDouble {
                negative: false,
                class: NotANumber,
            },
            (Infinite, _) => self,
            (_, Infinite) => other,
            // Under round-to-nearest, a sum of zeros is -0 only when both are -0.
            (Zero, Zero) => LongDouble {
                negative: self.negative && other.negative,
                class: Zero,
            },
            (Zero, _) => other,
            (_, Zero) => self,
            (
                Finite {
                    mantissa: self_mantissa,
                    exponent: self_exponent,
                },
                Finite {
                    mantissa: other_mantissa,
                    exponent: other_exponent,
                },
            ) => {
                let mut larger = (self.negative, self_mantissa, self_exponent);
                let mut smaller = (other.negative, other_mantissa, other_exponent);
                if other_exponent > self_exponent {
                    std::mem::swap(&mut larger, &mut smaller);
                }
                add_finite(larger, smaller)
            }
        }
    }
}

/// Adds two finite non-zero values given as (negative, mantissa, exponent), where the
/// first has the larger or equal exponent.
fn add_finite(larger: (bool, u64, i32), smaller: (bool, u64, i32)) -> LongDouble {
    // 62 guard bits below the larger operand's last bit, plus the shifted-out bits of the
    // smaller operand folded into the lowest bit (a "sticky" bit), are more than the two
    // guard bits and sticky bit that correct rounding of a sum or difference needs.
    const GUARD_BITS: u32 = 62;
    let (larger_negative, larger_mantissa, larger_exponent) = larger;
    let (smaller_negative, smaller_mantissa, smaller_exponent) = smaller;
    let larger_wide = u128::from(larger_mantissa) << GUARD_BITS;
    let smaller_wide = u128::from(smaller_mantissa) << GUARD_BITS;
    let distance = (i64::from(larger_exponent) - i64::from(smaller_exponent)) as u64;
    let smaller_aligned = if distance >= 128 {
        u128::from(smaller_wide != 0)
    } else {
        let shift = distance as u32;
        let lost = smaller_wide & ((1u128 << shift) - 1);
        (smaller_wide >> shift) | u128::from(lost != 0)
    };
    let (negative, sum) = if larger_negative == smaller_negative {
        (larger_negative, larger_wide + smaller_aligned)
    } else if larger_wide >= smaller_aligned {
        (larger_negative, larger_wide - smaller_aligned)
    } else {
        (smaller_negative, smaller_aligned - larger_wide)
    };
    if sum == 0 {
        // An exact cancellation is +0 under round-to-nearest.
        return LongDouble {
            negative: false,
            class: LongDoubleClass::Zero,
        };
    }
    let unrounded = Unrounded {
        mantissa: sum,
        exponent: i64::from(larger_exponent) - i64::from(GUARD_BITS),
        sticky: false,
    };
    LongDouble::from_rounded(negative, round_binary(&unrounded, BinaryFormat::EXTENDED))
}

/// Parses with the acceptance rules of Redis 7.0's `string2ld` (see [`LongDouble::parse`])
/// and rounds to the nearest `f64`. A text beyond the `f64` range but inside the long
/// double range (`1e400`) gives an infinity, so a caller checking the sum for infinity
/// refuses it, where Redis would accept it.
pub fn parse_long_double_like(bytes: &[u8]) -> Option<f64> {
    LongDouble::parse(bytes).map(|value| value.to_f64())
}

/// Appends `d` in the form of Redis's `ld2string(..., LD_STR_HUMAN)` (see
/// [`LongDouble::format_human`]): no exponent, at most 17 digits after the point, no
/// trailing zeros, and "0" for "-0".
///
/// Redis prints the exact value of a 64-bit-mantissa long double to 17 decimals; an `f64`
/// printed that way shows its rounding error (10.5 + 0.1 would print as
/// "10.59999999999999964"). So the digits here are the shortest ones that read back as
/// `d`, and only values needing more than 17 decimals are rounded at the 17th. That
/// matches Redis whenever the `f64` sum carries no rounding error beyond what the
/// shortest form hides (`10.5 + 0.1` is "10.6", `5e3 + 2e2` is "5200"), and differs in
/// the last digits otherwise (`0.1 + 0.2` is "0.30000000000000004" here and "0.3" in
/// Redis). Use [`LongDouble`] for replies identical to Redis's.
pub fn format_long_double_human(d: f64, out: &mut Vec<u8>) {
    const FRACTION_DIGITS_MAX: usize = 17;
    if !d.is_finite() {
        format_double(d, out);
        return;
    }
    let start = out.len();
    // Rust's `Display` for f64 is the shortest text that reads back as the same value,
    // never in exponent form. Writing to a Vec cannot fail.
    let _ = write!(out, "{d}");
    let point = out[start..].iter().position(|&byte| byte == b'.');
    if let Some(point) = point
        && out.len() - (start + point + 1) > FRACTION_DIGITS_MAX
    {
        out.truncate(start);
        let _ = write!(out, "{d:.17}");
    }
    if out[start..].contains(&b'.') {
        let kept = start + trim_trailing_zeros(&out[start..]).len();
        out.truncate(kept);
        if out.last() == Some(&b'.') {
            out.pop();
        }
    }
    if &out[start..] == b"-0" {
        out.truncate(start);
        out.push(b'0');
    }
}

/// A text accepted by glibc's `strtod` in full, split into its parts.
struct ScannedFloat<'a> {
    negative: bool,
    /// The text after the sign, for handing to Rust's parser.
    unsigned_text: &'a [u8],
    form: FloatForm<'a>,
}

enum FloatForm<'a> {
    Infinity,
    Decimal(DecimalText<'a>),
    Hex(HexMantissa),
}

/// The digits of a decimal text and its exponent: the value is
/// `integer_digits.fraction_digits * 10^exponent`.
struct DecimalText<'a> {
    integer_digits: &'a [u8],
    fraction_digits: &'a [u8],
    exponent: i64,
}

impl DecimalText<'_> {
    fn is_zero(&self) -> bool {
        self.integer_digits
            .iter()
            .chain(self.fraction_digits)
            .all(|&digit| digit == b'0')
    }
}

/// The leading bits of a hexadecimal float's mantissa: the value is about
/// `mantissa * 2^exponent`, a little more if `sticky` (non-zero digits were dropped).
#[derive(Clone, Copy)]
struct HexMantissa {
    mantissa: u128,
    exponent: i64,
    sticky: bool,
}

impl HexMantissa {
    fn is_zero(&self) -> bool {
        self.mantissa == 0 && !self.sticky
    }

    fn into_unrounded(self) -> Unrounded {
        Unrounded {
            mantissa: self.mantissa,
            exponent: self.exponent,
            sticky: self.sticky,
        }
    }
}

/// Exponents are clamped to this magnitude while scanning: any exponent that large already
/// overflows or underflows every format, and clamping keeps the arithmetic in range.
const EXPONENT_CLAMP: i64 = 1_000_000_000;

/// Checks `bytes` against the syntax glibc's `strtod` accepts in the C locale, requiring
/// that all of it is consumed (as Redis does), and splits it into its parts.
///
/// NaN texts return `None` because Redis rejects every NaN, and so do leading spaces,
/// which strtod would skip but Redis rejects.
fn scan_c_float(bytes: &[u8]) -> Option<ScannedFloat<'_>> {
    let (negative, unsigned_text) = match bytes.split_first()? {
        (b'-', rest) => (true, rest),
        (b'+', rest) => (false, rest),
        _ => (false, bytes),
    };
    let form = if unsigned_text.eq_ignore_ascii_case(b"inf")
        || unsigned_text.eq_ignore_ascii_case(b"infinity")
    {
        FloatForm::Infinity
    } else if let [b'0', b'x' | b'X', hex @ ..] = unsigned_text {
        FloatForm::Hex(scan_hex_float(hex)?)
    } else {
        FloatForm::Decimal(scan_decimal_float(unsigned_text)?)
    };
    Some(ScannedFloat {
        negative,
        unsigned_text,
        form,
    })
}

/// Splits `text` into a run of bytes matching `keep` and the rest.
fn split_while(text: &[u8], keep: impl Fn(u8) -> bool) -> (&[u8], &[u8]) {
    let end = text
        .iter()
        .position(|&byte| !keep(byte))
        .unwrap_or(text.len());
    text.split_at(end)
}

/// Scans `digits[.digits]` with at least one digit in total, returning the two runs and
/// what follows.
fn scan_mantissa(text: &[u8], is_digit: impl Fn(u8) -> bool) -> Option<(&[u8], &[u8], &[u8])> {
    let (integer_digits, rest) = split_while(text, &is_digit);
    let (fraction_digits, rest) = match rest.split_first() {
        Some((b'.', after_point)) => split_while(after_point, &is_digit),
        _ => (&rest[..0], rest),
    };
    if integer_digits.is_empty() && fraction_digits.is_empty() {
        return None;
    }
    Some((integer_digits, fraction_digits, rest))
}

/// Scans an exponent (`[+-]digits`, after its marker letter) that must end the text, and
/// returns it clamped to [`EXPONENT_CLAMP`]. An empty text is an exponent of zero.
fn scan_exponent(text: &[u8], markers: [u8; 2]) -> Option<i64> {
    let Some((&marker, after_marker)) = text.split_first() else {
        return Some(0);
    };
    if !markers.contains(&marker) {
        return None;
    }
    let (negative, digits) = match after_marker.split_first() {
        Some((b'-', rest)) => (true, rest),
        Some((b'+', rest)) => (false, rest),
        _ => (false, after_marker),
    };
    // strtod leaves a marker without digits unconsumed ("1e", "0x1p"), so Redis rejects.
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let magnitude = digits.iter().fold(0i64, |value, &digit| {
        (value * 10 + i64::from(digit - b'0')).min(EXPONENT_CLAMP)
    });
    Some(if negative { -magnitude } else { magnitude })
}

fn scan_decimal_float(text: &[u8]) -> Option<DecimalText<'_>> {
    let (integer_digits, fraction_digits, rest) = scan_mantissa(text, |b| b.is_ascii_digit())?;
    let exponent = scan_exponent(rest, [b'e', b'E'])?;
    Some(DecimalText {
        integer_digits,
        fraction_digits,
        exponent,
    })
}

fn scan_hex_float(text: &[u8]) -> Option<HexMantissa> {
    let (integer_digits, fraction_digits, rest) = scan_mantissa(text, |b| b.is_ascii_hexdigit())?;
    let binary_exponent = scan_exponent(rest, [b'p', b'P'])?;
    let mut mantissa: u128 = 0;
    let mut exponent = binary_exponent;
    let mut sticky = false;
    let digits = integer_digits
        .iter()
        .map(|&digit| (digit, false))
        .chain(fraction_digits.iter().map(|&digit| (digit, true)));
    for (digit, in_fraction) in digits {
        let value = match digit {
            b'0'..=b'9' => digit - b'0',
            _ => (digit | 0x20) - b'a' + 10,
        };
        if mantissa >> 120 == 0 {
            // Room for four more bits: keep the digit exactly.
            mantissa = (mantissa << 4) | u128::from(value);
            if in_fraction {
                exponent -= 4;
            }
        } else {
            // 121+ significant bits are already kept; the rest only matters for rounding.
            sticky |= value != 0;
            if !in_fraction {
                exponent += 4;
            }
        }
    }
    Some(HexMantissa {
        mantissa,
        exponent,
        sticky,
    })
}

/// A binary floating-point format: how many mantissa bits it keeps and its exponent range.
#[derive(Clone, Copy)]
struct BinaryFormat {
    precision: u32,
    /// The exponent of the smallest subnormal's last bit: values are `m * 2^e`, e >= this.
    min_exponent: i64,
    /// Values must stay below `2^max_bits`.
    max_bits: i64,
}

impl BinaryFormat {
    /// IEEE 754 binary64, Rust's `f64` and C's `double`.
    const DOUBLE: BinaryFormat = BinaryFormat {
        precision: 53,
        min_exponent: -1074,
        max_bits: 1024,
    };
    /// The x87 80-bit extended format, C's `long double` on x86-64 Linux.
    const EXTENDED: BinaryFormat = BinaryFormat {
        precision: 64,
        min_exponent: -16445,
        max_bits: 16384,
    };
}

/// An exact value `mantissa * 2^exponent`, plus "a little more" if `sticky`.
struct Unrounded {
    mantissa: u128,
    exponent: i64,
    sticky: bool,
}

enum Rounded {
    Zero,
    Overflow,
    Finite { mantissa: u64, exponent: i32 },
}

/// Rounds an exact value to `format`, to nearest with ties to even, handling subnormals
/// and overflow as IEEE 754 (and so glibc and the x87) do.
fn round_binary(value: &Unrounded, format: BinaryFormat) -> Rounded {
    if value.mantissa == 0 {
        // Only a sticky remainder below any representable bit; callers never pass this
        // with a non-zero value small enough to matter, but it rounds to zero regardless.
        return Rounded::Zero;
    }
    let precision = i64::from(format.precision);
    let bits = i64::from(128 - value.mantissa.leading_zeros());
    let mut shift = bits - precision;
    if value.exponent + shift < format.min_exponent {
        shift = format.min_exponent - value.exponent;
    }
    let (mut mantissa, mut exponent) = if shift <= 0 {
        (value.mantissa << (-shift) as u32, value.exponent + shift)
    } else if shift > 128 {
        // value < 2^(exponent+128) <= half of the last kept bit: rounds to zero.
        (0, value.exponent + shift)
    } else {
        let shift = shift as u32;
        let kept = value.mantissa.checked_shr(shift).unwrap_or(0);
        let lost = if shift == 128 {
            value.mantissa
        } else {
            value.mantissa & ((1u128 << shift) - 1)
        };
        let half = 1u128 << (shift - 1);
        let round_up = lost > half || (lost == half && (value.sticky || kept & 1 == 1));
        (
            kept + u128::from(round_up),
            value.exponent + i64::from(shift),
        )
    };
    if mantissa >> format.precision != 0 {
        // Rounding carried into a new leading bit.
        mantissa >>= 1;
        exponent += 1;
    }
    if mantissa == 0 {
        return Rounded::Zero;
    }
    if exponent + i64::from(128 - mantissa.leading_zeros()) > format.max_bits {
        return Rounded::Overflow;
    }
    Rounded::Finite {
        mantissa: mantissa as u64,
        exponent: exponent as i32,
    }
}

/// Builds the `f64` `mantissa * 2^exponent` from a result of [`round_binary`] in
/// [`BinaryFormat::DOUBLE`].
fn f64_from_parts(mantissa: u64, exponent: i32) -> f64 {
    const HIDDEN_BIT: u64 = 1 << 52;
    if mantissa < HIDDEN_BIT {
        // Subnormal: the exponent is the minimum and the bits are the mantissa itself.
        return f64::from_bits(mantissa);
    }
    let biased_exponent = (i64::from(exponent) + 52 + 1023) as u64;
    f64::from_bits((biased_exponent << 52) | (mantissa & (HIDDEN_BIT - 1)))
}

enum DecimalValue {
    Zero,
    OutOfRange,
    Finite { mantissa: u64, exponent: i32 },
}

/// Converts a decimal text to the nearest long double, as glibc's `strtold` does.
///
/// The value is `digits * 10^k = digits * 5^k * 2^k`. Rounding needs the leading 66 or
/// so bits of that and whether anything non-zero follows, so the quotient
/// `numerator / denominator` (one of them carrying the power of five) is computed to
/// 66-67 bits by long division on big integers, and the remainder becomes the sticky bit.
fn decimal_to_extended(decimal: &DecimalText<'_>) -> DecimalValue {
    let all_digits = || {
        decimal
            .integer_digits
            .iter()
            .chain(decimal.fraction_digits)
            .copied()
    };
    let leading_zeros = all_digits().take_while(|&digit| digit == b'0').count();
    let total = decimal.integer_digits.len() + decimal.fraction_digits.len();
    if leading_zeros == total {
        return DecimalValue::Zero;
    }
    let trailing_zeros = all_digits()
        .rev()
        .take_while(|&digit| digit == b'0')
        .count();
    let significant: Vec<u8> = all_digits()
        .skip(leading_zeros)
        .take(total - leading_zeros - trailing_zeros)
        .collect();
    // The text's length is bounded, so these sums cannot overflow an i64.
    let power_of_ten =
        decimal.exponent - decimal.fraction_digits.len() as i64 + trailing_zeros as i64;
    // The value lies in [10^(magnitude-1), 10^magnitude). The long double range is about
    // 3.6e-4951 (half of that rounds to zero) to 1.19e4932, so outside these bounds the
    // answer is known without computing; inside, exact rounding decides.
    let magnitude = significant.len() as i64 + power_of_ten;
    if !(-4951..=4933).contains(&magnitude) {
        return DecimalValue::OutOfRange;
    }
    let mut numerator = BigUint::from_decimal_digits(&significant);
    let mut denominator = BigUint::from_u64(1);
    if power_of_ten >= 0 {
        numerator.multiply_by_power_of_five(power_of_ten as u64);
    } else {
        denominator.multiply_by_power_of_five(power_of_ten.unsigned_abs());
    }
    // Scale so that the quotient has 66 or 67 bits.
    const QUOTIENT_BITS: i64 = 66;
    let scale = QUOTIENT_BITS - (numerator.bit_len() as i64 - denominator.bit_len() as i64);
    if scale >= 0 {
        numerator.shift_left(scale as u64);
    } else {
        denominator.shift_left(scale.unsigned_abs());
    }
    let (quotient, remainder_is_zero) = numerator.divide_small_quotient(&denominator);
    let unrounded = Unrounded {
        mantissa: quotient,
        exponent: power_of_ten - scale,
        sticky: !remainder_is_zero,
    };
    match round_binary(&unrounded, BinaryFormat::EXTENDED) {
        Rounded::Zero | Rounded::Overflow => DecimalValue::OutOfRange,
        Rounded::Finite { mantissa, exponent } => DecimalValue::Finite { mantissa, exponent },
    }
}

/// A non-negative big integer, just enough for exact long-double conversions.
/// Little-endian 32-bit limbs with no high zero limbs.
#[derive(Clone, Debug)]
struct BigUint {
    limbs: Vec<u32>,
}

impl BigUint {
    fn from_u64(value: u64) -> BigUint {
        let mut number = BigUint {
            limbs: vec![value as u32, (value >> 32) as u32],
        };
        number.normalize();
        number
    }

    fn from_decimal_digits(digits: &[u8]) -> BigUint {
        let mut number = BigUint { limbs: Vec::new() };
        // Nine decimal digits fit in a u32, so take them nine at a time.
        for chunk in digits.chunks(9) {
            let chunk_value = chunk
                .iter()
                .fold(0u32, |value, &digit| value * 10 + u32::from(digit - b'0'));
            number.multiply_add_small(10u32.pow(chunk.len() as u32), chunk_value);
        }
        number
    }

    fn normalize(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }

    fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    fn bit_len(&self) -> u64 {
        match self.limbs.last() {
            None => 0,
            Some(&top) => self.limbs.len() as u64 * 32 - u64::from(top.leading_zeros()),
        }
    }

    fn multiply_add_small(&mut self, factor: u32, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.limbs {
            let product = u64::from(*limb) * u64::from(factor) + carry;
            *limb = product as u32;
            carry = product >> 32;
        }
        if carry != 0 {
            self.limbs.push(carry as u32);
        }
        self.normalize();
    }

    fn multiply_by_power_of_five(&mut self, mut power: u64) {
        const FIVE_TO_THE_13: u32 = 1_220_703_125; // The largest power of five in a u32.
        while power >= 13 {
            self.multiply_add_small(FIVE_TO_THE_13, 0);
            power -= 13;
        }
        self.multiply_add_small(5u32.pow(power as u32), 0);
    }

    fn shift_left(&mut self, bits: u64) {
        if self.is_zero() {
            return;
        }
        let whole_limbs = (bits / 32) as usize;
        let bit_shift = (bits % 32) as u32;
        if bit_shift != 0 {
            let mut carry = 0u32;
            for limb in &mut self.limbs {
                let shifted = (u64::from(*limb) << bit_shift) | u64::from(carry);
                *limb = shifted as u32;
                carry = (shifted >> 32) as u32;
            }
            if carry != 0 {
                self.limbs.push(carry);
            }
        }
        self.limbs.splice(0..0, std::iter::repeat_n(0, whole_limbs));
    }

    fn shift_right_one(&mut self) {
        let mut carry = 0u32;
        for limb in self.limbs.iter_mut().rev() {
            let next_carry = *limb & 1;
            *limb = (*limb >> 1) | (carry << 31);
            carry = next_carry;
        }
        self.normalize();
    }

    fn compare(&self, other: &BigUint) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }

    /// Subtracts `other`, which must not exceed `self`.
    fn subtract(&mut self, other: &BigUint) {
        let mut borrow = 0i64;
        for (index, limb) in self.limbs.iter_mut().enumerate() {
            let subtrahend = i64::from(other.limbs.get(index).copied().unwrap_or(0));
            let mut difference = i64::from(*limb) - subtrahend - borrow;
            borrow = i64::from(difference < 0);
            if difference < 0 {
                difference += 1 << 32;
            }
            *limb = difference as u32;
        }
        self.normalize();
    }

    /// Divides `self` by `divisor` when the quotient is known to be below 2^68, returning
    /// the quotient and whether the remainder is zero. Binary long division: 68 rounds of
    /// compare-and-subtract.
    fn divide_small_quotient(mut self, divisor: &BigUint) -> (u128, bool) {
        const QUOTIENT_BITS: u32 = 68;
        let mut shifted_divisor = divisor.clone();
        shifted_divisor.shift_left(u64::from(QUOTIENT_BITS - 1));
        let mut quotient = 0u128;
        for bit in (0..QUOTIENT_BITS).rev() {
            if self.compare(&shifted_divisor) != Ordering::Less {
                self.subtract(&shifted_divisor);
                quotient |= 1 << bit;
            }
            shifted_divisor.shift_right_one();
        }
        (quotient, self.is_zero())
    }

    /// Divides in place by a small divisor and returns the remainder.
    fn divide_small(&mut self, divisor: u32) -> u32 {
        let mut remainder = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let current = (remainder << 32) | u64::from(*limb);
            *limb = (current / u64::from(divisor)) as u32;
            remainder = current % u64::from(divisor);
        }
        self.normalize();
        remainder as u32
    }

    fn write_decimal(mut self, out: &mut Vec<u8>) {
        const CHUNK: u32 = 1_000_000_000;
        let mut chunks = Vec::new();
        while !self.is_zero() {
            chunks.push(self.divide_small(CHUNK));
        }
        let Some((most_significant, rest)) = chunks.split_last() else {
            out.push(b'0');
            return;
        };
        format_u64(u64::from(*most_significant), out);
        for &chunk in rest.iter().rev() {
            let mut digits = [b'0'; 9];
            let mut value = chunk;
            for digit in digits.iter_mut().rev() {
                *digit = b'0' + (value % 10) as u8;
                value /= 10;
            }
            out.extend_from_slice(&digits);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_of(write: impl FnOnce(&mut Vec<u8>)) -> String {
        let mut out = Vec::new();
        write(&mut out);
        String::from_utf8(out).expect("number formatting writes ASCII")
    }

    #[test]
    fn parse_i64_follows_string2ll() {
        let accepted: &[(&str, i64)] = &[
            ("0", 0),
            ("1", 1),
            ("-1", -1),
            ("10", 10),
            ("9223372036854775807", i64::MAX),
            ("-9223372036854775808", i64::MIN),
        ];
        for &(text, value) in accepted {
            assert_eq!(parse_i64(text.as_bytes()), Some(value), "{text:?}");
        }
        let rejected = [
            "",
            "-",
            "+1",
            " 1",
            "1 ",
            "01",
            "-0",
            "00",
            "1.0",
            "1e3",
            "9223372036854775808",
            "-9223372036854775809",
            "99999999999999999999",
            "000000000000000000001",
            "0x10",
            "١",
        ];
        for text in rejected {
            assert_eq!(parse_i64(text.as_bytes()), None, "{text:?}");
        }
    }

    #[test]
    fn format_i64_writes_decimal() {
        for n in [0, 1, -1, 42, -42, 1_000_000, i64::MAX, i64::MIN] {
            assert_eq!(text_of(|out| format_i64(n, out)), n.to_string());
        }
        assert_eq!(
            text_of(|out| format_u64(u64::MAX, out)),
            u64::MAX.to_string()
        );
    }

    /// Every row was checked against redis-server 7.0.15 with `ZADD z <text> m`, which
    /// parses with `string2d` (rejections reply "ERR value is not a valid float"), and
    /// `ZSCORE`, which prints the parsed value with `%.17g`.
    const REDIS_DOUBLE_TEXTS: &[(&str, Option<&str>)] = &[
        (" 1", None),
        ("1 ", None),
        ("\t1", None),
        ("1\0", None),
        ("+1", Some("1")),
        ("1e", None),
        ("1e5", Some("100000")),
        ("1e+5", Some("100000")),
        ("1E-5", Some("1.0000000000000001e-05")),
        ("1.e5", Some("100000")),
        ("1e-0", Some("1")),
        ("e5", None),
        ("-e5", None),
        ("inf", Some("inf")),
        ("-inf", Some("-inf")),
        ("+inf", Some("inf")),
        ("INF", Some("inf")),
        ("infinity", Some("inf")),
        ("-Infinity", Some("-inf")),
        ("infinit", None),
        ("nan", None),
        ("-nan", None),
        ("NaN", None),
        ("nan(123)", None),
        ("0x1p3", Some("8")),
        ("0x10", Some("16")),
        ("0X1P-2", Some("0.25")),
        ("0x.8", Some("0.5")),
        ("0x", None),
        ("0x1p", None),
        ("0xg", None),
        ("0x1.fffffffffffffp1023", Some("1.7976931348623157e+308")),
        ("0x1p1024", None),
        ("0x1p-1074", Some("4.9406564584124654e-324")),
        ("0x1p-1075", None),
        (".5", Some("0.5")),
        ("5.", Some("5")),
        ("-.5", Some("-0.5")),
        (".", None),
        ("", None),
        ("-", None),
        ("+", None),
        ("1e400", None),
        ("-1e400", None),
        ("2e308", None),
        ("1e308", Some("1e+308")),
        ("1e-400", None),
        ("0e-400", Some("0")),
        ("1e-320", Some("9.9998886718268301e-321")),
        ("00012", Some("12")),
        ("0.1", Some("0.10000000000000001")),
        ("1_000", None),
        ("1,5", None),
        (
            "123456789012345678901234567890",
            Some("1.2345678901234568e+29"),
        ),
    ];

    #[test]
    fn parse_f64_matches_redis_string2d() {
        for &(text, expected) in REDIS_DOUBLE_TEXTS {
            let printed = parse_f64(text.as_bytes()).map(|d| text_of(|out| format_double(d, out)));
            assert_eq!(printed.as_deref(), expected, "{text:?}");
        }
    }

    #[test]
    fn parse_f64_keeps_the_sign_of_zero() {
        let zero = parse_f64(b"-0").expect("-0 is a valid double");
        assert!(zero == 0.0 && zero.is_sign_negative());
    }

    #[test]
    fn parse_f64_rounds_long_hex_mantissas_correctly() {
        // 2^53 + 1 is halfway between two doubles: ties go to the even one, 2^53.
        assert_eq!(parse_f64(b"0x20000000000001"), Some(9007199254740992.0));
        // Anything past the halfway point rounds up, even far beyond the kept bits.
        let just_above_half = b"0x20000000000001000000000000000000000000000001";
        assert_eq!(
            parse_f64(just_above_half),
            Some(9007199254740994.0 * 2f64.powi(120))
        );
    }

    /// `%.17g` as glibc prints these values, taken from python3's `'%.17g' % x`, which
    /// uses the same C formatting.
    const PRINTF_17G: &[(u64, &str)] = &[
        (0x3fb999999999999a, "0.10000000000000001"),
        (0x3ff8000000000000, "1.5"),
        (0x4415af1d78b58c40, "1e+20"),
        (0x4008000000000000, "3"),
        (0x8000000000000000, "-0"),
        (0x0000000000000000, "0"),
        (0x3ee4f8b588e368f1, "1.0000000000000001e-05"),
        (0x4376345785d8a000, "1e+17"),
        (0x4341c37937e08000, "10000000000000000"),
        (0x437b69b4ba630f35, "1.2345678901234568e+17"),
        (0x3f1a36e2eb1c432d, "0.0001"),
        (0x3f202e4b6ce5dc68, "0.00012344999999999999"),
        (0x3fd5555555555555, "0.33333333333333331"),
        (0x0000000000000001, "4.9406564584124654e-324"),
        (0x7fefffffffffffff, "1.7976931348623157e+308"),
        (0x40f86a0000000000, "100000"),
        (0x3e7ad7f29abcaf48, "9.9999999999999995e-08"),
        (0x4345ee2a2eb5a5c4, "12345678901234568"),
        (0x4376345785d89fff, "99999999999999984"),
        (0x3fd3333333333334, "0.30000000000000004"),
        (0x3efa36e2eb1c432d, "2.5000000000000001e-05"),
        // 26215 / 2^18 = 0.100002288818359375 exactly: a tie, rounded to even.
        (0x3fb999c000000000, "0.10000228881835938"),
        (0xbff4000000000000, "-1.25"),
        (0x4340000000000000, "9007199254740992"),
        (0x43e0000000000000, "9.2233720368547758e+18"),
        (0xc3e0000000000000, "-9.2233720368547758e+18"),
        (0x01a56e1fc2f8f359, "1e-300"),
        (0x44dfe185ca57c517, "6.0221407599999999e+23"),
        (0x54b249ad2594c37d, "1e+100"),
        (0x3fe0000000000000, "0.5"),
        (0x405edd2f1a9fbe77, "123.456"),
        (0x430c6bf526340000, "1000000000000000"),
        (0x3f1a36e2eb1c432c, "9.9999999999999991e-05"),
        (0xbdf80d43de9cc603, "-3.4999999999999998e-10"),
        (0xf2a74de452e6b438, "-1.989032661366619e+244"),
        (0x6513270e269e0d37, "7.761117632285041e+178"),
        (0x0c5c7fd0a6a3a450, "3.980498358697587e-249"),
        (0xd23f0824128b2f33, "-1.5432835417340557e+88"),
        (0x1818e811892f902b, "1.3647584518757569e-192"),
        (0x9531985d5d9dc9f8, "-1.3701135617873088e-206"),
        (0xe8e25d940ed90475, "-1.7160537630466207e+197"),
        (0x36f675cc81e74ef5, "6.2946752411953861e-44"),
        (0x1600a35a099950d8, "1.0613447212142254e-202"),
        (0x6b0d549b6f03675a, "4.7083251603875462e+207"),
        (0x3d9c172411e20b8f, "6.3870161585135632e-12"),
        (0x8d116ece1738f7d9, "-9.9731303785687331e-246"),
        (0x0f21ddb66cad4a26, "8.7797532256802712e-236"),
        (0x90c192cfd3ac94af, "-5.7955032484989932e-228"),
    ];

    #[test]
    fn format_double_matches_printf_17g() {
        for &(bits, expected) in PRINTF_17G {
            let value = f64::from_bits(bits);
            assert_eq!(
                text_of(|out| format_double(value, out)),
                expected,
                "{value:e}"
            );
        }
    }

    /// The shortcut for integral values agrees with the digit generation on both sides of
    /// its bound, and for zeros of both signs.
    #[test]
    fn format_double_prints_integral_values_as_printf_does() {
        let cases: [(f64, &str); 9] = [
            (0.0, "0"),
            (-0.0, "-0"),
            (999.0, "999"),
            (-42.0, "-42"),
            (999_999_999_999_999.0, "999999999999999"),
            (1e15, "1000000000000000"),
            (12_345_678_901_234_567.0, "12345678901234568"),
            (1e17, "1e+17"),
            (-1e16, "-10000000000000000"),
        ];
        for (value, expected) in cases {
            assert_eq!(
                text_of(|out| format_double(value, out)),
                expected,
                "{value:e}"
            );
        }
    }

    #[test]
    fn format_double_spells_out_infinities_and_nan() {
        assert_eq!(text_of(|out| format_double(f64::INFINITY, out)), "inf");
        assert_eq!(text_of(|out| format_double(f64::NEG_INFINITY, out)), "-inf");
        assert_eq!(text_of(|out| format_double(f64::NAN, out)), "nan");
    }

    fn incrbyfloat(stored: &str, increment: &str) -> Option<String> {
        let sum = LongDouble::parse(stored.as_bytes())? + LongDouble::parse(increment.as_bytes())?;
        sum.is_finite()
            .then(|| text_of(|out| sum.format_human(out)))
    }

    /// `SET s <stored>` then `INCRBYFLOAT s <increment>` on redis-server 7.0.15. `None` is
    /// an error reply (an unparsable text or a non-finite sum).
    const REDIS_INCRBYFLOAT: &[(&str, &str, Option<&str>)] = &[
        ("10.5", "0.1", Some("10.6")),
        ("0.1", "0.2", Some("0.3")),
        ("3.0e3", "0", Some("3000")),
        ("5.0e3", "2.0e2", Some("5200")),
        ("12345.1", "0.1", Some("12345.19999999999999929")),
        ("1234567.1", "0.1", Some("1234567.20000000000004547")),
        ("0", "1e-17", Some("0.00000000000000001")),
        ("0", "5e-18", Some("0")),
        ("0", "4e-18", Some("0")),
        ("0", "-1e-20", Some("0")),
        ("1", "-1", Some("0")),
        ("-1.5", "0.5", Some("-1")),
        ("100", "0.3", Some("100.3")),
        ("0.3", "0.3", Some("0.6")),
        ("1e20", "1", Some("100000000000000000000")),
        ("1.1", "2.2", Some("3.3")),
        ("99.9", "0.1", Some("100")),
        ("1000000.123", "0.001", Some("1000000.1239999999999668")),
        ("0", "0.123456789012345678", Some("0.12345678901234568")),
        ("0", "1.5e-17", Some("0.00000000000000002")),
        ("0", "2.5e-17", Some("0.00000000000000002")),
        ("0", "9007199254740993", Some("9007199254740993")),
        ("0", "12345678901234567890", Some("12345678901234567890")),
        ("-0", "-0", Some("0")),
        ("7", "-7.0", Some("0")),
        // 2^-18 has 18 decimals; the 18th is a 5 with nothing after: a tie, to even.
        ("0", "0.000003814697265625", Some("0.00000381469726562")),
        ("0", "0.000003814697265635", Some("0.00000381469726563")),
        ("0", "0x1p-60", Some("0")),
        ("1.2e4932", "0", None),
        ("1e-4951", "0", None),
        ("1e-4952", "0", None),
        (
            "0",
            "123456789.123456789",
            Some("123456789.12345678899873747"),
        ),
        ("0.1", "0.7", Some("0.8")),
        ("2.675", "0", Some("2.675")),
        ("1e19", "0.5", Some("10000000000000000000")),
        ("1e-5", "0", Some("0.00001")),
        ("18446744073709551615", "0", Some("18446744073709551615")),
        ("18446744073709551617", "0", Some("18446744073709551616")),
        ("36893488147419103231", "0", Some("36893488147419103232")),
        (
            "3.14159265358979323846264338327950288",
            "0",
            Some("3.14159265358979324"),
        ),
        (
            "0",
            "1000000000000000000000000000000.5",
            Some("1000000000000000000024696061952"),
        ),
        ("1.5", "-1.5", Some("0")),
        ("-2.5", "1e-30", Some("-2.5")),
        ("100", "-0.000000000000000001", Some("100")),
        ("1e-320", "0", Some("0")),
        ("0", "inf", None),
        ("0", "-inf", None),
        ("0", "nan", None),
        ("0", " 1", None),
        (
            "0x1p1024",
            "0",
            Some(
                "179769313486231590772930519078902473361797697894230657273430081157732675805500963\
             132708477322407536021120113879871393357658789768814416622492847430639474124377767\
             893424865485276302219601246094119453082952085005768838150682342462881473913110540\
             827237163350510684586298239947245938479716304835356329624224137216",
            ),
        ),
        // Random inputs of assorted shapes, replayed against the same server.
        ("44e24", "16e2", Some("44000000000000000000000000")),
        ("-6.306793e+12", "62e9", Some("-6244793000000")),
        ("457.2323", "129722", Some("130179.23230000000000217")),
        ("0x26p-30", "68e17", Some("6800000000000000000")),
        (
            "-6.85011809719675124225e-20",
            "-8.81e-08",
            Some("-0.0000000881"),
        ),
        ("-40910", "0xf6822a6b2p-10", Some("64579803.673828125")),
        (
            "484384",
            "51598.00980935380",
            Some("535982.00980935379999437"),
        ),
        ("-9.404961754e+16", "-160301", Some("-94049617540160301")),
        (
            "775414",
            "-86634.6985726917046",
            Some("688779.30142730829538777"),
        ),
        ("776937", "0x0p-54", Some("776937")),
        ("-14366", "82e-5", Some("-14365.99917999999999996")),
        (
            "-82571.16032956597",
            "92815.2",
            Some("10244.03967043403000048"),
        ),
        (
            "-45e-30",
            "-39170.9700258020966430195",
            Some("-39170.97002580209664302"),
        ),
        (
            "0x5123bap14",
            "0x2bf761cp-31",
            Some("87122935808.02146793901920319"),
        ),
        ("55e-25", "-87e-24", Some("0")),
        (
            "-918848",
            "-5.23185615e+25",
            Some("-52318561499999999998558208"),
        ),
        (
            "-34e-4",
            "-4.131293070305258e-09",
            Some("-0.00340000413129307"),
        ),
        (
            "-8.5171985208661277027e-07",
            "70.6740",
            Some("70.67399914828014792"),
        ),
        ("0x1edp-72", "0x2251a3b990p-71", Some("0.00000000006242572")),
        (
            "-49800",
            "4.74010989733e+25",
            Some("47401098973299999999262720"),
        ),
        ("-460606", "87e-9", Some("-460605.99999991300001057")),
        ("87786", "-4e-15", Some("87785.99999999999999289")),
        (
            "3.678924e+00",
            "0x1c8906e7f914fe8p-50",
            Some("117.81997051760496978"),
        ),
        (
            "-43e7",
            "-72764.7347233",
            Some("-430072764.73472330000367947"),
        ),
        ("-10e23", "491531", Some("-999999999999999999475712")),
        (
            "-29e29",
            "-391.5167",
            Some("-2900000000000000000051002736640"),
        ),
        (
            "0x4c78b5520235bcp26",
            "-416733",
            Some("1444506109979347792822272"),
        ),
        (
            "3.6e-03",
            "-3.81939297180e+16",
            Some("-38193929717999999.99609375"),
        ),
        (
            "2.79831674805058673883e+03",
            "435485",
            Some("438283.31674805058673883"),
        ),
        ("843.4194", "773.8762", Some("1617.29559999999999997")),
        (
            "2.2889533634198857e-10",
            "80e27",
            Some("79999999999999999997852516352"),
        ),
        ("420.2128", "17e-18", Some("420.21280000000000002")),
    ];

    #[test]
    fn long_double_sums_match_redis_incrbyfloat() {
        for &(stored, increment, expected) in REDIS_INCRBYFLOAT {
            assert_eq!(
                incrbyfloat(stored, increment).as_deref(),
                expected,
                "{stored} + {increment}"
            );
        }
    }

    #[test]
    fn long_double_reaches_far_beyond_f64() {
        // Redis accepts these; an f64 could not hold them.
        let huge = incrbyfloat("1e4932", "0").expect("1e4932 is a finite long double");
        assert_eq!(huge.len(), 4933);
        assert!(huge.starts_with("100000000000000000000601894938796389132383777425453311477378"));
        assert!(huge.ends_with("6622720"));
        let large = incrbyfloat("1e400", "0").expect("1e400 is a finite long double");
        assert!(large.starts_with("10000000000000000000281880683947586514586453433629"));
        assert!(large.ends_with("734806343732497430221946880"));
        assert_eq!(large.len(), 401);
    }

    #[test]
    fn long_double_text_length_is_limited_as_in_redis() {
        let longest = "0".repeat(LONG_DOUBLE_TEXT_MAX);
        assert_eq!(incrbyfloat(&longest, "0").as_deref(), Some("0"));
        let too_long = "0".repeat(LONG_DOUBLE_TEXT_MAX + 1);
        assert!(LongDouble::parse(too_long.as_bytes()).is_none());
    }

    #[test]
    fn long_double_sum_of_opposite_infinities_is_nan() {
        let inf = LongDouble::parse(b"inf").expect("inf parses");
        let minus_inf = LongDouble::parse(b"-inf").expect("-inf parses");
        let sum = inf + minus_inf;
        assert!(!sum.is_finite());
        assert_eq!(text_of(|out| sum.format_human(out)), "nan");
    }

    #[test]
    fn long_double_overflowing_sum_is_infinite() {
        let max = LongDouble::parse(b"1.18e4932").expect("below the long double maximum");
        assert!(!(max + max).is_finite());
    }

    #[test]
    fn long_double_converts_to_the_nearest_f64() {
        let to_f64 = |text: &str| LongDouble::parse(text.as_bytes()).map(|v| v.to_f64());
        assert_eq!(to_f64("0.1"), Some(0.1));
        assert_eq!(to_f64("-2.5e-3"), Some(-2.5e-3));
        assert_eq!(to_f64("1e400"), Some(f64::INFINITY));
        assert_eq!(to_f64("1e-400"), Some(0.0));
        assert_eq!(to_f64("0x1p-1074"), Some(f64::from_bits(1)));
        assert_eq!(parse_long_double_like(b"1e400"), Some(f64::INFINITY));
        assert_eq!(parse_long_double_like(b"1e5000"), None);
        assert_eq!(parse_long_double_like(b"nan"), None);
    }

    fn f64_human(d: f64) -> String {
        text_of(|out| format_long_double_human(d, out))
    }

    #[test]
    fn f64_human_format_matches_redis_for_sums_without_visible_error() {
        // Redis 7.0.15 replies to INCRBYFLOAT with these same texts.
        assert_eq!(f64_human(10.5 + 0.1), "10.6");
        assert_eq!(f64_human(3.0e3 + 0.0), "3000");
        assert_eq!(f64_human(5.0e3 + 2.0e2), "5200");
        assert_eq!(f64_human(-1.5 + 0.5), "-1");
        assert_eq!(f64_human(1.0 - 1.0), "0");
        assert_eq!(f64_human(-0.0), "0");
        assert_eq!(f64_human(1e-5), "0.00001");
        assert_eq!(f64_human(1e20), "100000000000000000000");
        assert_eq!(f64_human(1e-17), "0.00000000000000001");
        assert_eq!(f64_human(4e-18), "0");
        assert_eq!(f64_human(-4e-18), "0");
        assert_eq!(f64_human(0.123_456_789_012_345_68), "0.12345678901234568");
        assert_eq!(f64_human(f64::INFINITY), "inf");
    }

    #[test]
    fn f64_human_format_shows_f64_rounding_error_where_redis_does_not() {
        // Redis says "0.3": its long double hides the error below the 17th decimal.
        assert_eq!(f64_human(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(incrbyfloat("0.1", "0.2").as_deref(), Some("0.3"));
    }
}
