//! `SORT` and `SORT_RO` (sort.c): the elements of a list, set or sorted set, sorted as
//! numbers or as text, by their own value or by keys a pattern makes of them (`BY`), a
//! window of them (`LIMIT`), each answered as itself or as keys patterns make of it (`GET`),
//! and with `STORE` kept as a list instead of answered.
//!
//! What follows Redis 7.0 exactly: option parsing and its errors; the window's clamping;
//! numbers read by glibc's `strtod` on the value as a C string (an empty value is 0, one it
//! cannot read whole refuses the command); ties between equal numbers broken by the
//! elements' bytes; text compared by `strcoll` in the C locale (bytes up to the first NUL)
//! when answering and by all bytes when storing; a `BY` key that is missing sorting first
//! (as 0 for numbers); `BY` without `*` (`nosort`) keeping a list's or sorted set's order.
//!
//! Where it differs, and why: a set given `BY nosort` is sorted as text here also when the
//! reply is answered rather than stored. Redis then answers its hash table's order (or, in a
//! script or with `STORE`, sorts as text so that replicas agree); any order is Redis's answer,
//! and sorting keeps tandem's deterministic. Redis sorts a window it was asked for with a
//! partial quicksort, which may order ties differently; the sort here is stable.
//!
//! Redis converts a sorted set it sorts to its skiplist encoding before it reads it
//! (`zsetConvert`), whatever the sort then finds: `SORT` marks the key so
//! ([`EncodingMark::Large`]), and when it then refuses a number it answers its error in a
//! call that commits the mark. `SORT_RO`, a read here (a backup serves it), leaves the
//! encoding as it was.

use std::cmp::Ordering;

use super::{CmdError, Command, Ctx, Read, Write, arg, data};
use crate::db::{EncodingMark, Key, Kind};
use crate::notify::EventClass;
use crate::num;
use crate::resp::{Argv, ReplyWriter};

/// The family's commands (merged into [`super::commands`]).
pub static COMMANDS: &[Command] = &[
    // Redis flags SORT a write (for its STORE option) whether or not it stores, so a replica
    // or a read-only script refuses it; SORT_RO is its read-only form.
    data("SORT", -2, Write, (1, 1, 1), true, sort),
    data("SORT_RO", -2, Read, (1, 1, 1), false, sort_ro),
];

/// Redis's refusal of a `BY` pattern for a user limited to some keys.
const BY_DENIED: &str = "ERR BY option of SORT denied due to insufficient ACL permissions.";
/// Redis's refusal of a `GET` pattern for a user limited to some keys.
const GET_DENIED: &str = "ERR GET option of SORT denied due to insufficient ACL permissions.";

/// A `SORT`'s options, as Redis's parse leaves them.
#[derive(Debug, Default)]
struct SortOptions<'a> {
    desc: bool,
    alpha: bool,
    /// `LIMIT offset count`: Redis's defaults are 0 and -1 (no limit).
    offset: i64,
    count: i64,
    store: Option<&'a [u8]>,
    /// The last `BY` pattern.
    by: Option<&'a [u8]>,
    /// Whether any `BY` pattern lacked a `*`: nothing is sorted.
    dont_sort: bool,
    gets: Vec<&'a [u8]>,
}

/// The bytes of `text` as C reads it: up to its first NUL.
fn c_string(text: &[u8]) -> &[u8] {
    text.split(|&byte| byte == 0).next().unwrap_or_default()
}

/// Whether `pattern` makes key names of elements: Redis looks for a `*` with `strchr`.
fn has_star(pattern: &[u8]) -> bool {
    c_string(pattern).contains(&b'*')
}

/// One option of Redis's parse loop at argument `i`: what it takes, and how many arguments.
enum SortOption<'a> {
    Desc(bool),
    Alpha,
    Limit(&'a [u8], &'a [u8]),
    Store(&'a [u8]),
    By(&'a [u8]),
    Get(&'a [u8]),
}

/// The option at argument `i` and the index after it, or `None` for Redis's syntax error.
fn option_at(argv: &Argv, i: usize, read_only: bool) -> Option<(SortOption<'_>, usize)> {
    let word = arg(argv, i);
    let left = argv.len() - i - 1;
    let is = |name: &str| word.eq_ignore_ascii_case(name.as_bytes());
    let option = if is("ASC") {
        (SortOption::Desc(false), i + 1)
    } else if is("DESC") {
        (SortOption::Desc(true), i + 1)
    } else if is("ALPHA") {
        (SortOption::Alpha, i + 1)
    } else if is("LIMIT") && left >= 2 {
        (SortOption::Limit(arg(argv, i + 1), arg(argv, i + 2)), i + 3)
    } else if !read_only && is("STORE") && left >= 1 {
        (SortOption::Store(arg(argv, i + 1)), i + 2)
    } else if is("BY") && left >= 1 {
        (SortOption::By(arg(argv, i + 1)), i + 2)
    } else if is("GET") && left >= 1 {
        (SortOption::Get(arg(argv, i + 1)), i + 2)
    } else {
        return None;
    };
    Some(option)
}

fn parse_options(argv: &Argv, read_only: bool) -> Result<SortOptions<'_>, CmdError> {
    let mut options = SortOptions {
        count: -1,
        ..SortOptions::default()
    };
    let mut i = 2;
    while i < argv.len() {
        let (option, next) = option_at(argv, i, read_only).ok_or(CmdError::SYNTAX)?;
        match option {
            SortOption::Desc(desc) => options.desc = desc,
            SortOption::Alpha => options.alpha = true,
            SortOption::Limit(offset, count) => {
                options.offset = num::parse_i64(offset).ok_or(CmdError::NOT_INTEGER)?;
                options.count = num::parse_i64(count).ok_or(CmdError::NOT_INTEGER)?;
            }
            SortOption::Store(key) => options.store = Some(key),
            SortOption::By(pattern) => {
                options.dont_sort |= !has_star(pattern);
                options.by = Some(pattern);
            }
            SortOption::Get(pattern) => options.gets.push(pattern),
        }
        i = next;
    }
    Ok(options)
}

/// What Redis answers a user limited to some keys who sends `argv` (a `SORT`, or a `SORT_RO`
/// if `read_only`): its refusal of the first `BY` pattern with a `*` or `GET` pattern, met in
/// its parse before any option it would refuse for another reason (`None` then: the command
/// answers that reason itself).
pub fn pattern_refusal(argv: &Argv, read_only: bool) -> Option<&'static str> {
    let mut i = 2;
    while i < argv.len() {
        let (option, next) = option_at(argv, i, read_only)?;
        match option {
            SortOption::Limit(offset, count) => {
                num::parse_i64(offset)?;
                num::parse_i64(count)?;
            }
            SortOption::By(pattern) if has_star(pattern) => return Some(BY_DENIED),
            SortOption::Get(_) => return Some(GET_DENIED),
            _ => {}
        }
        i = next;
    }
    None
}

/// Where `SORT`'s destination key is, as Redis's `sortGetKeys` finds it: after the last
/// `STORE` that has an argument after it, skipping the arguments of `LIMIT`, `GET` and `BY`.
pub fn store_key_at(argv: &Argv) -> Option<usize> {
    let mut found = None;
    let mut i = 2;
    while i < argv.len() {
        let word = arg(argv, i);
        if word.eq_ignore_ascii_case(b"LIMIT") {
            i += 2;
        } else if word.eq_ignore_ascii_case(b"GET") || word.eq_ignore_ascii_case(b"BY") {
            i += 1;
        } else if word.eq_ignore_ascii_case(b"STORE") && i + 1 < argv.len() {
            found = Some(i + 1);
        }
        i += 1;
    }
    found
}

/// The value a pattern makes of `element`, as Redis's `lookupKeyByPattern`: `#` is the
/// element itself; otherwise the first `*` is replaced by the element to name a key, whose
/// string value is the answer, or, after `->field` (the first `->` after the `*`, with a
/// field), whose hash field is. `None`: no `*`, no such key or field, or another type.
fn pattern_value(ctx: &Ctx<'_, '_>, pattern: &[u8], element: &[u8]) -> Option<Vec<u8>> {
    if pattern.first() == Some(&b'#') && pattern.get(1).is_none_or(|&byte| byte == 0) {
        return Some(element.to_vec());
    }
    let text = c_string(pattern);
    let star = text.iter().position(|&byte| byte == b'*')?;
    let arrow = text[star + 1..]
        .windows(2)
        .position(|pair| pair == b"->")
        .map(|at| star + 1 + at)
        .filter(|&at| at + 2 < text.len());
    let postfix_end = arrow.unwrap_or(pattern.len());
    let mut name = Vec::with_capacity(pattern.len() + element.len());
    name.extend_from_slice(&pattern[..star]);
    name.extend_from_slice(element);
    name.extend_from_slice(&pattern[star + 1..postfix_end]);
    let key = ctx.find(&name)?;
    match arrow {
        Some(at) if key.kind() == Kind::Hash => {
            super::hashes::field_value(ctx, &key, &pattern[at + 2..]).map(<[u8]>::to_vec)
        }
        None if key.kind() == Kind::String => Some(ctx.string(&key).to_vec()),
        _ => None,
    }
}

/// A number as `SORT` reads one: glibc's `strtod` over the value as a C string, refused
/// unless it reads all of it without NaN or `ERANGE` (an empty value reads as 0). glibc
/// reports `ERANGE` on overflow, on underflow to zero, and on a subnormal result it had to
/// round, which a decimal text always is (`5e-324`); a hexadecimal one (`0x1p-1074`) is
/// taken as exact.
fn sort_number(value: &[u8]) -> Option<f64> {
    let text = c_string(value);
    if text.is_empty() {
        return Some(0.0);
    }
    let start = text
        .iter()
        .position(|&byte| !matches!(byte, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r'))?;
    let number = num::parse_f64(&text[start..])?;
    let unsigned = text[start..]
        .strip_prefix(b"-")
        .or(text[start..].strip_prefix(b"+"));
    let hex = unsigned
        .unwrap_or(&text[start..])
        .get(..2)
        .is_some_and(|prefix| prefix.eq_ignore_ascii_case(b"0x"));
    let subnormal = number != 0.0 && number.abs() < f64::MIN_POSITIVE;
    (!subnormal || hex).then_some(number)
}

/// The window `LIMIT offset count` leaves of `len` elements, as Redis clamps it: the first
/// index and one past the last (an empty window when they are equal).
fn window(offset: i64, count: i64, len: i64) -> (usize, usize) {
    let mut start = offset.clamp(0, len);
    let count = count.clamp(-1, len);
    let mut end = if count < 0 {
        len - 1
    } else {
        start + count - 1
    };
    if start >= len {
        start = len - 1;
        end = len - 2;
    }
    end = end.min(len - 1);
    let start = start.max(0);
    (start as usize, (end + 1).max(start) as usize)
}

/// What an element is sorted by.
#[derive(Debug)]
enum SortKey {
    Number(f64),
    /// The `BY` value compared as text (`None`: its key is missing).
    Text(Option<Vec<u8>>),
    /// The element itself, compared as text.
    Element,
}

/// The elements of the sorted value `key`, read as Redis reads them: a list or sorted set
/// that is not sorted only in the window (`LIMIT`, `DESC` from the end), which is then the
/// whole answer; anything else whole, in its own order.
fn read_elements(ctx: &Ctx<'_, '_>, key: &Key, options: &SortOptions<'_>) -> Vec<Vec<u8>> {
    let len = key.head.value_len as i64;
    let mem = &ctx.access;
    if !options.dont_sort || key.kind() == Kind::Set {
        return match key.kind() {
            Kind::List => super::lists::elements_from(mem, key, 0, len as usize),
            Kind::Set => super::sets::members(mem, key)
                .into_iter()
                .map(<[u8]>::to_vec)
                .collect(),
            _ => super::zsets::members_by_rank(mem, key, 0, len as usize, false),
        };
    }
    let (start, end) = window(options.offset, options.count, len);
    let count = end - start;
    if count == 0 {
        return Vec::new();
    }
    let first = if options.desc {
        len as usize - end
    } else {
        start
    };
    match key.kind() {
        Kind::List => {
            let mut elements = super::lists::elements_from(mem, key, first, count);
            if options.desc {
                elements.reverse();
            }
            elements
        }
        _ => super::zsets::members_by_rank(mem, key, first, count, options.desc),
    }
}

/// Sorts `elements` as `options` say, or refuses when a number cannot be read.
fn sort_elements(
    ctx: &Ctx<'_, '_>,
    elements: Vec<Vec<u8>>,
    options: &SortOptions<'_>,
) -> Result<Vec<Vec<u8>>, CmdError> {
    let mut keyed: Vec<(SortKey, Vec<u8>)> = Vec::with_capacity(elements.len());
    for element in elements {
        let by = match options.by {
            Some(pattern) => pattern_value(ctx, pattern, &element),
            None => Some(element.clone()),
        };
        let key = if options.alpha {
            match options.by {
                Some(_) => SortKey::Text(by),
                None => SortKey::Element,
            }
        } else {
            match by {
                Some(value) => SortKey::Number(sort_number(&value).ok_or(CmdError::fixed(
                    "ERR One or more scores can't be converted into double",
                ))?),
                None => SortKey::Number(0.0),
            }
        };
        keyed.push((key, element));
    }
    // Redis compares text with strcoll when answering, by every byte when storing.
    let text_order = |a: &[u8], b: &[u8]| match options.store {
        Some(_) => a.cmp(b),
        None => c_string(a).cmp(c_string(b)),
    };
    keyed.sort_by(|(key_a, a), (key_b, b)| {
        let order = match (key_a, key_b) {
            (SortKey::Number(x), SortKey::Number(y)) => x
                .partial_cmp(y)
                .unwrap_or(Ordering::Equal)
                .then_with(|| a.cmp(b)),
            (SortKey::Text(Some(x)), SortKey::Text(Some(y))) => text_order(x, y),
            (SortKey::Text(x), SortKey::Text(y)) => x.is_some().cmp(&y.is_some()),
            _ => text_order(a, b),
        };
        if options.desc { order.reverse() } else { order }
    });
    Ok(keyed.into_iter().map(|(_, element)| element).collect())
}

fn sort_generic(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
    read_only: bool,
) -> Result<(), CmdError> {
    let mut options = parse_options(argv, read_only)?;
    let source = ctx.find(arg(argv, 1));
    if source.is_some_and(|key| !matches!(key.kind(), Kind::List | Kind::Set | Kind::ZSet)) {
        return Err(CmdError::WRONGTYPE);
    }
    if options.dont_sort && source.is_some_and(|key| key.kind() == Kind::Set) {
        // A set has no order of its own to keep: it is sorted as text (see the module).
        options = SortOptions {
            dont_sort: false,
            alpha: true,
            by: None,
            ..options
        };
    }
    let converted = !read_only
        && source.is_some_and(|key| key.kind() == Kind::ZSet && key.mark() != EncodingMark::Large);
    if let Some(key) = source.filter(|_| converted) {
        let layout = ctx.layout;
        layout.set_mark(ctx.txn(), &key, EncodingMark::Large);
    }
    let (elements, start, end) = match source {
        None => (Vec::new(), 0, 0),
        Some(key) if options.dont_sort => {
            let elements = read_elements(ctx, &key, &options);
            let len = elements.len();
            (elements, 0, len)
        }
        Some(key) => {
            let elements = read_elements(ctx, &key, &options);
            let sorted = match sort_elements(ctx, elements, &options) {
                Ok(sorted) => sorted,
                // The conversion stays, as in Redis (see the module).
                Err(CmdError::Reply(text)) if converted => {
                    out.error(&text);
                    return Ok(());
                }
                Err(err) => return Err(err),
            };
            let (start, end) = window(options.offset, options.count, sorted.len() as i64);
            (sorted, start, end)
        }
    };
    let chosen = &elements[start..end];
    match options.store {
        None => answer(ctx, chosen, &options.gets, out),
        Some(destination) => {
            let stored = store(ctx, chosen, &options.gets, destination)?;
            out.integer(stored as i64);
        }
    }
    Ok(())
}

/// Answers `chosen`, each as itself or as its `GET` patterns' values (null when missing).
fn answer(ctx: &Ctx<'_, '_>, chosen: &[Vec<u8>], gets: &[&[u8]], out: &mut ReplyWriter<'_>) {
    if gets.is_empty() {
        out.array(chosen.len());
        for element in chosen {
            out.bulk(element);
        }
        return;
    }
    out.array(chosen.len() * gets.len());
    for element in chosen {
        for pattern in gets {
            match pattern_value(ctx, pattern, element) {
                Some(value) => out.bulk(&value),
                None => out.null(),
            }
        }
    }
}

/// Replaces `destination` with a list of `chosen` (or of their `GET` values, empty when
/// missing) and publishes `sortstore` (a list event, as in Redis), or deletes it if that
/// list would be empty; answers the list's length.
fn store(
    ctx: &mut Ctx<'_, '_>,
    chosen: &[Vec<u8>],
    gets: &[&[u8]],
    destination: &[u8],
) -> Result<usize, CmdError> {
    let values: Vec<Vec<u8>> = if gets.is_empty() {
        chosen.to_vec()
    } else {
        chosen
            .iter()
            .flat_map(|element| {
                gets.iter()
                    .map(|pattern| pattern_value(ctx, pattern, element).unwrap_or_default())
            })
            .collect()
    };
    if values.is_empty() {
        super::keys::delete_destination(ctx, destination);
        return Ok(0);
    }
    let values: Vec<&[u8]> = values.iter().map(Vec::as_slice).collect();
    super::lists::store(ctx, destination, &values)?;
    ctx.notify(EventClass::List, "sortstore", destination);
    Ok(values.len())
}

pub fn sort(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    sort_generic(ctx, argv, out, false)
}

pub fn sort_ro(
    ctx: &mut Ctx<'_, '_>,
    argv: &Argv,
    out: &mut ReplyWriter<'_>,
) -> Result<(), CmdError> {
    sort_generic(ctx, argv, out, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn windows_clamp_as_redis_does() {
        assert_eq!(window(0, -1, 5), (0, 5));
        assert_eq!(window(1, 2, 5), (1, 3));
        assert_eq!(window(-3, 2, 5), (0, 2));
        assert_eq!(window(4, 100, 5), (4, 5));
        assert_eq!(window(5, 1, 5), (4, 4));
        assert_eq!(window(0, 0, 5), (0, 0));
        assert_eq!(window(0, -5, 5), (0, 5));
        assert_eq!(window(0, -1, 0), (0, 0));
    }

    #[test]
    fn numbers_read_as_strtod_reads_a_c_string() {
        assert_eq!(sort_number(b""), Some(0.0));
        assert_eq!(sort_number(b" 1.5"), Some(1.5));
        assert_eq!(sort_number(b"2\0junk"), Some(2.0));
        assert_eq!(sort_number(b"0x10"), Some(16.0));
        assert_eq!(sort_number(b"-inf"), Some(f64::NEG_INFINITY));
        assert_eq!(sort_number(b"nan"), None);
        assert_eq!(sort_number(b"1e400"), None);
        assert_eq!(sort_number(b"5e-324"), None);
        assert_eq!(sort_number(b"0x1p-1074"), Some(5e-324));
        assert_eq!(sort_number(b" "), None);
        assert_eq!(sort_number(b"1 "), None);
        assert_eq!(sort_number(b"abc"), None);
    }
}
