//! RESP, the Redis serialization protocol: requests in, replies out, and replies back in
//! for tests.
//!
//! # Requests
//!
//! A client sends each command in one of two forms, told apart by the first byte:
//!
//! - **Multibulk** (starts with `*`): `*<count>\r\n` then, per argument,
//!   `$<length>\r\n<bytes>\r\n`. Binary safe; what every client library sends.
//! - **Inline** (anything else): one line of text ending in `\n` (a `\r` before it is
//!   dropped), split into arguments like a shell would (see [`parse_request`]). This is
//!   what a person types into `telnet`.
//!
//! [`parse_request`] follows Redis 7.0's `processMultibulkBuffer` and `processInlineBuffer`
//! (networking.c), including their error texts and their quirks, which were confirmed
//! against redis-server 7.0.15:
//!
//! - Lines are found with C's `strchr` on a NUL-terminated buffer, so a NUL byte before the
//!   line's end hides the end: Redis waits for more bytes until the buffered request
//!   exceeds 64 KiB and then reports the line as too big. We do the same.
//! - After the `\r` that ends a count line, Redis skips one more byte without checking that
//!   it is `\n`; after a bulk argument it skips two bytes without checking that they are
//!   `\r\n`. We do the same, so `*1\r\n$4\r\nPINGxx` is a PING, as in Redis.
//! - A multibulk count of zero or below (`*0`, `*-1`) is skipped without a reply.
//! - Redis parses incrementally and checks the 64 KiB line limits only when a read leaves
//!   a line unfinished, so whether a 70 KB inline line is refused depends on how the bytes
//!   happened to arrive. Our parser starts again from the request's first byte on every
//!   call and applies the limits as if the bytes arrived one at a time: a line longer than
//!   the limit is always refused. That is deterministic, and it is what Redis does
//!   whenever a read ends inside the line.
//! - Not reproduced: the "unauthenticated multibulk/bulk length" errors (no AUTH here), and
//!   the exemptions Redis makes for its own replication master.
//!
//! # Replies
//!
//! [`ReplyWriter`] writes replies in the protocol a connection negotiated with `HELLO`:
//! RESP2 (the default) or RESP3, which adds types such as maps, sets, doubles, booleans
//! and a distinct null. Each method names the Redis 7.0 `addReply*` function it matches.
//!
//! # Parsing replies
//!
//! [`parse_reply`] reads RESP2 and RESP3 replies into [`Value`]s, so tests can compare our
//! replies with a real redis-server's.

use std::fmt;

use thiserror::Error;

use crate::num::{format_double, format_i64, format_u64, parse_i64};

/// Limits a node enforces on requests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RequestLimits {
    /// The longest bulk argument accepted (Redis's `proto-max-bulk-len`, default 512 MiB).
    pub bulk_len_max: usize,
    /// The most arguments one multibulk request may announce. Redis 7.0 only caps this at
    /// `INT_MAX`; a lower cap stops a client from announcing a huge command and then
    /// trickling it in.
    pub args_max: usize,
    /// The longest inline request line, and the longest multibulk count or bulk length
    /// line (Redis's `PROTO_INLINE_MAX_SIZE`, 64 KiB).
    pub inline_len_max: usize,
    /// The connection has not authenticated yet where a password is asked: Redis then
    /// refuses a multibulk of more than 10 arguments or a bulk longer than 16 KiB, with
    /// errors of their own, so that a stranger cannot make the node buffer a large request.
    pub unauthenticated: bool,
}

/// The most arguments a request may announce before its connection authenticated (Redis's).
pub const UNAUTHENTICATED_ARGS_MAX: i64 = 10;
/// The longest bulk a request may announce before its connection authenticated (Redis's).
pub const UNAUTHENTICATED_BULK_LEN_MAX: i64 = 16 * 1024;

impl Default for RequestLimits {
    fn default() -> Self {
        RequestLimits {
            bulk_len_max: 512 * 1024 * 1024,
            args_max: 1024 * 1024,
            inline_len_max: 64 * 1024,
            unauthenticated: false,
        }
    }
}

/// One command's arguments, binary-safe, stored in one buffer so that a reused `Argv`
/// stops allocating once it has grown to the connection's usual command size.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Argv {
    /// All arguments' bytes, back to back.
    bytes: Vec<u8>,
    /// Where each argument ends in `bytes`; argument `i` starts where `i - 1` ends.
    ends: Vec<usize>,
}

impl Argv {
    /// Makes an empty argument list.
    pub fn new() -> Argv {
        Argv::default()
    }

    /// The arguments `words` name, in order (a test's or a tool's command).
    pub fn of_words(words: &[&str]) -> Argv {
        let mut argv = Argv::new();
        for word in words {
            argv.push(word.as_bytes());
        }
        argv
    }

    /// Removes all arguments, keeping the allocated space for the next command.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Appends one argument.
    pub fn push(&mut self, arg: &[u8]) {
        self.bytes.extend_from_slice(arg);
        self.finish_arg();
    }

    /// Ends the argument made of the bytes appended to `self.bytes` since the last one.
    fn finish_arg(&mut self) {
        self.ends.push(self.bytes.len());
    }

    /// The number of arguments, the command name included.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there are no arguments at all.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// The argument at `index`, if there is one.
    pub fn get(&self, index: usize) -> Option<&[u8]> {
        let end = *self.ends.get(index)?;
        let start = match index.checked_sub(1) {
            Some(previous) => self.ends[previous],
            None => 0,
        };
        self.bytes.get(start..end)
    }

    /// The arguments in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &[u8]> + '_ {
        let mut start = 0;
        self.ends.iter().map(move |&end| {
            let arg = &self.bytes[start..end];
            start = end;
            arg
        })
    }

    /// About the length of [`Argv::encode`]'s output (exact for arguments shorter than 128
    /// bytes each, and fewer than 128 of them): what a buffer reserves to take it in one
    /// allocation.
    pub fn encoded_len_hint(&self) -> usize {
        self.bytes.len() + 2 * self.ends.len() + 2
    }

    /// Encodes as a LEB128 count followed by, for each argument, its LEB128 length and its
    /// bytes, appended to `out`.
    ///
    /// This compact form is ours, not RESP: it travels inside a replicated call, where
    /// RESP's decimal lengths and CRLFs would only cost space.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.reserve(self.encoded_len_hint());
        write_varint(self.len() as u64, out);
        for arg in self.iter() {
            write_varint(arg.len() as u64, out);
            out.extend_from_slice(arg);
        }
    }

    /// Decodes what [`Argv::encode`] wrote.
    ///
    /// Decoding is strict, because the bytes come from a replicated log where any
    /// difference from the encoder's output means corruption: truncation, trailing bytes,
    /// and non-canonical (over-long) varints are all errors. It never reserves more memory
    /// than `bytes` itself could describe.
    pub fn decode(bytes: &[u8]) -> Result<Argv, ArgvDecodeError> {
        let mut argv = Argv::default();
        argv.decode_from(bytes)?;
        Ok(argv)
    }

    /// [`Argv::decode`] into `self`, reusing its space (a decoder's scratch argv allocates
    /// only when a command is longer than any before it). On an error `self` holds some of
    /// the arguments: it is scratch, never state.
    pub fn decode_from(&mut self, bytes: &[u8]) -> Result<(), ArgvDecodeError> {
        self.clear();
        let mut reader = ByteReader { bytes, position: 0 };
        let count = reader.varint()?;
        // Each argument needs at least one byte for its length, which bounds the count by
        // the input's size before anything is reserved for it.
        let remaining = reader.remaining();
        if count > remaining as u64 {
            return Err(ArgvDecodeError::Truncated);
        }
        self.bytes.reserve(remaining);
        self.ends.reserve(count as usize);
        for _ in 0..count {
            let len = reader.varint()?;
            self.push(reader.take(len)?);
        }
        match reader.remaining() {
            0 => Ok(()),
            extra => Err(ArgvDecodeError::TrailingBytes(extra)),
        }
    }
}

/// Why [`Argv::decode`] refused its input.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ArgvDecodeError {
    /// The input ends before the arguments it announces.
    #[error("encoded argv is truncated")]
    Truncated,
    /// A length is over-long (non-canonical) or does not fit in 64 bits.
    #[error("encoded argv has a malformed varint")]
    BadVarint,
    /// Bytes follow the last argument.
    #[error("encoded argv has {0} trailing bytes")]
    TrailingBytes(usize),
}

fn write_varint(mut value: u64, out: &mut Vec<u8>) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

struct ByteReader<'a> {
    bytes: &'a [u8],
    position: usize,
}

impl<'a> ByteReader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.position
    }

    /// Reads one canonical unsigned LEB128 value.
    fn varint(&mut self) -> Result<u64, ArgvDecodeError> {
        let mut value: u64 = 0;
        for shift in (0..64).step_by(7) {
            let byte = *self
                .bytes
                .get(self.position)
                .ok_or(ArgvDecodeError::Truncated)?;
            self.position += 1;
            let payload = u64::from(byte & 0x7f);
            // The tenth byte holds bit 63 only; anything more does not fit.
            if shift == 63 && payload > 1 {
                return Err(ArgvDecodeError::BadVarint);
            }
            value |= payload << shift;
            if byte & 0x80 == 0 {
                // A final zero byte after the first adds nothing: an over-long encoding.
                if byte == 0 && shift > 0 {
                    return Err(ArgvDecodeError::BadVarint);
                }
                return Ok(value);
            }
        }
        Err(ArgvDecodeError::BadVarint)
    }

    fn take(&mut self, len: u64) -> Result<&'a [u8], ArgvDecodeError> {
        let len = usize::try_from(len).map_err(|_| ArgvDecodeError::Truncated)?;
        if len > self.remaining() {
            return Err(ArgvDecodeError::Truncated);
        }
        let taken = &self.bytes[self.position..self.position + len];
        self.position += len;
        Ok(taken)
    }
}

/// What [`parse_request`] found at the start of the buffer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Parsed {
    /// More bytes are needed; `at_least` is a lower bound on the total buffered bytes the
    /// next attempt needs (so a caller receiving a 100 MB bulk string does not re-parse
    /// after every read).
    Incomplete { at_least: usize },
    /// A command was parsed into argv; `consumed` bytes of the buffer belong to it.
    Command { consumed: usize },
    /// Bytes Redis skips without a command (an empty inline line, `*0\r\n`, `*-1\r\n`).
    Skip { consumed: usize },
}

/// A malformed request. The server replies `-ERR <text>\r\n` (see
/// [`ReplyWriter::protocol_error`]) and closes the connection, as Redis does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProtocolError {
    /// An inline line longer than [`RequestLimits::inline_len_max`].
    TooBigInlineRequest,
    /// An inline line with an unterminated quote, or a closing quote followed by
    /// something other than whitespace.
    UnbalancedQuotes,
    /// A multibulk count line longer than [`RequestLimits::inline_len_max`].
    TooBigMultibulkCount,
    /// A multibulk count that is not a strict integer, exceeds `INT_MAX`, or exceeds
    /// [`RequestLimits::args_max`].
    InvalidMultibulkLength,
    /// A bulk length line longer than [`RequestLimits::inline_len_max`].
    TooBigBulkCount,
    /// An argument that does not start with `$`.
    ExpectedDollar {
        /// The byte found instead.
        found: u8,
    },
    /// A bulk length that is not a strict integer, is negative, or exceeds
    /// [`RequestLimits::bulk_len_max`].
    InvalidBulkLength,
    /// Before authentication, a multibulk count above [`UNAUTHENTICATED_ARGS_MAX`].
    UnauthenticatedMultibulkLength,
    /// Before authentication, a bulk length above [`UNAUTHENTICATED_BULK_LEN_MAX`].
    UnauthenticatedBulkLength,
}

impl ProtocolError {
    /// Appends the error's text exactly as Redis sends it after `-ERR `.
    ///
    /// For [`ProtocolError::ExpectedDollar`] that includes the offending byte raw (it may
    /// not be UTF-8), with CR and LF turned into spaces as Redis's `addReplyErrorFormat`
    /// does.
    pub fn write_text(&self, out: &mut Vec<u8>) {
        let text: &[u8] = match self {
            ProtocolError::TooBigInlineRequest => b"Protocol error: too big inline request",
            ProtocolError::UnbalancedQuotes => b"Protocol error: unbalanced quotes in request",
            ProtocolError::TooBigMultibulkCount => b"Protocol error: too big mbulk count string",
            ProtocolError::InvalidMultibulkLength => b"Protocol error: invalid multibulk length",
            ProtocolError::TooBigBulkCount => b"Protocol error: too big bulk count string",
            ProtocolError::InvalidBulkLength => b"Protocol error: invalid bulk length",
            ProtocolError::UnauthenticatedMultibulkLength => {
                b"Protocol error: unauthenticated multibulk length"
            }
            ProtocolError::UnauthenticatedBulkLength => {
                b"Protocol error: unauthenticated bulk length"
            }
            ProtocolError::ExpectedDollar { found } => {
                out.extend_from_slice(b"Protocol error: expected '$', got '");
                out.push(if matches!(found, b'\r' | b'\n') {
                    b' '
                } else {
                    *found
                });
                out.push(b'\'');
                return;
            }
        };
        out.extend_from_slice(text);
    }
}

impl fmt::Display for ProtocolError {
    /// Shows the text of [`ProtocolError::write_text`]; a non-UTF-8 byte in it shows as
    /// U+FFFD, so use `write_text` for the exact bytes.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut text = Vec::new();
        self.write_text(&mut text);
        formatter.write_str(&String::from_utf8_lossy(&text))
    }
}

impl std::error::Error for ProtocolError {}

/// Parses the first request in `buf` (which starts at a request boundary) into `argv`
/// (cleared first; it holds arguments only when [`Parsed::Command`] is returned).
///
/// A request starting with `*` is a multibulk; anything else is inline. Inline lines are
/// split as Redis's `sdssplitargs` does: arguments are separated by whitespace; an
/// argument may contain `"double quoted"` parts, where `\n \r \t \b \a \\ \"` and `\xHH`
/// are escapes (and a backslash before any other character stands for that character),
/// and `'single quoted'` parts, where only `\'` is an escape. A closing quote must be
/// followed by whitespace or the end of the line. A line that is empty or all whitespace
/// is skipped.
///
/// The parser keeps no state between calls: after [`Parsed::Incomplete`], call again with
/// the same start of buffer once at least `at_least` bytes are buffered. Nothing is
/// reserved on the strength of an announced length; arguments are copied only once their
/// bytes have arrived.
pub fn parse_request(
    buf: &[u8],
    limits: &RequestLimits,
    argv: &mut Argv,
) -> Result<Parsed, ProtocolError> {
    argv.clear();
    let parsed = match buf.first() {
        None => return Ok(Parsed::Incomplete { at_least: 1 }),
        Some(b'*') => parse_multibulk(buf, limits, argv),
        Some(_) => parse_inline(buf, limits, argv),
    };
    if !matches!(parsed, Ok(Parsed::Command { .. })) {
        argv.clear();
    }
    parsed
}

/// Where the end of a line is, searching as C's `strchr` does on Redis's NUL-terminated
/// query buffer: a NUL byte ends the search.
enum LineEnd {
    /// The terminator byte is at this index.
    Found(usize),
    /// No terminator within the limit; the line is still arriving.
    Incomplete { at_least: usize },
}

/// Finds `terminator` in `buf[start..]`, where the line may be at most `max_len` bytes
/// long. Refuses with `too_big` once more than `max_len` bytes are buffered without a
/// terminator, as Redis does.
fn find_line_end(
    buf: &[u8],
    start: usize,
    max_len: usize,
    terminator: u8,
    too_big: ProtocolError,
) -> Result<LineEnd, ProtocolError> {
    let window_end = buf
        .len()
        .min(start.saturating_add(max_len).saturating_add(1));
    let window = &buf[start..window_end];
    let found = window
        .iter()
        .position(|&byte| byte == terminator || byte == 0);
    if let Some(offset) = found
        && window[offset] == terminator
    {
        return Ok(LineEnd::Found(start + offset));
    }
    if buf.len() - start > max_len {
        return Err(too_big);
    }
    // Behind a NUL the terminator stays hidden however many bytes arrive, so nothing
    // changes until the limit is exceeded.
    let at_least = match found {
        Some(_) => start + max_len + 1,
        None => buf.len() + 1,
    };
    Ok(LineEnd::Incomplete { at_least })
}

/// Finds the `\r` ending a count or length line that starts at `start`, and checks that one
/// more byte (Redis assumes it is `\n` without looking) has arrived.
fn find_crlf_line(
    buf: &[u8],
    start: usize,
    max_len: usize,
    too_big: ProtocolError,
) -> Result<LineEnd, ProtocolError> {
    match find_line_end(buf, start, max_len, b'\r', too_big)? {
        LineEnd::Found(cr) if cr + 1 >= buf.len() => Ok(LineEnd::Incomplete { at_least: cr + 2 }),
        line_end => Ok(line_end),
    }
}

fn parse_multibulk(
    buf: &[u8],
    limits: &RequestLimits,
    argv: &mut Argv,
) -> Result<Parsed, ProtocolError> {
    let count_end = match find_crlf_line(
        buf,
        0,
        limits.inline_len_max,
        ProtocolError::TooBigMultibulkCount,
    )? {
        LineEnd::Found(cr) => cr,
        LineEnd::Incomplete { at_least } => return Ok(Parsed::Incomplete { at_least }),
    };
    let args_max = i64::try_from(limits.args_max).unwrap_or(i64::MAX);
    let count = match parse_i64(&buf[1..count_end]) {
        Some(count) if count <= i64::from(i32::MAX) && count <= args_max => count,
        _ => return Err(ProtocolError::InvalidMultibulkLength),
    };
    if limits.unauthenticated && count > UNAUTHENTICATED_ARGS_MAX {
        return Err(ProtocolError::UnauthenticatedMultibulkLength);
    }
    let mut position = count_end + 2;
    if count <= 0 {
        return Ok(Parsed::Skip { consumed: position });
    }
    let bulk_len_max = i64::try_from(limits.bulk_len_max).unwrap_or(i64::MAX);
    for _ in 0..count {
        let length_end = match find_crlf_line(
            buf,
            position,
            limits.inline_len_max,
            ProtocolError::TooBigBulkCount,
        )? {
            LineEnd::Found(cr) => cr,
            LineEnd::Incomplete { at_least } => return Ok(Parsed::Incomplete { at_least }),
        };
        if buf[position] != b'$' {
            return Err(ProtocolError::ExpectedDollar {
                found: buf[position],
            });
        }
        let len = match parse_i64(&buf[position + 1..length_end]) {
            Some(len) if len >= 0 && len <= bulk_len_max => len as usize,
            _ => return Err(ProtocolError::InvalidBulkLength),
        };
        if limits.unauthenticated && len as i64 > UNAUTHENTICATED_BULK_LEN_MAX {
            return Err(ProtocolError::UnauthenticatedBulkLength);
        }
        let arg_start = length_end + 2;
        let arg_end = arg_start.saturating_add(len);
        let next = arg_end.saturating_add(2);
        if next > buf.len() {
            return Ok(Parsed::Incomplete { at_least: next });
        }
        argv.push(&buf[arg_start..arg_end]);
        position = next;
    }
    Ok(Parsed::Command { consumed: position })
}

fn parse_inline(
    buf: &[u8],
    limits: &RequestLimits,
    argv: &mut Argv,
) -> Result<Parsed, ProtocolError> {
    let newline = match find_line_end(
        buf,
        0,
        limits.inline_len_max,
        b'\n',
        ProtocolError::TooBigInlineRequest,
    )? {
        LineEnd::Found(newline) => newline,
        LineEnd::Incomplete { at_least } => return Ok(Parsed::Incomplete { at_least }),
    };
    let line = &buf[..newline];
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    split_inline_args(line, argv)?;
    let consumed = newline + 1;
    Ok(if argv.is_empty() {
        Parsed::Skip { consumed }
    } else {
        Parsed::Command { consumed }
    })
}

/// C's `isspace` in the C locale, which `sdssplitargs` uses to skip between arguments and
/// to check what follows a closing quote.
fn is_c_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c)
}

fn hex_digit_value(byte: u8) -> Option<u8> {
    match byte {
        b'0'..=b'9' => Some(byte - b'0'),
        b'a'..=b'f' => Some(byte - b'a' + 10),
        b'A'..=b'F' => Some(byte - b'A' + 10),
        _ => None,
    }
}

/// Splits an inline line into arguments exactly as Redis's `sdssplitargs` (sds.c) does.
/// The line never contains a NUL (the line search stops at one), so C's end-of-string
/// checks become end-of-slice checks.
fn split_inline_args(line: &[u8], argv: &mut Argv) -> Result<(), ProtocolError> {
    let at = |index: usize| line.get(index).copied();
    let mut index = 0;
    loop {
        while at(index).is_some_and(is_c_space) {
            index += 1;
        }
        if index >= line.len() {
            return Ok(());
        }
        let mut in_double_quotes = false;
        let mut in_single_quotes = false;
        loop {
            let Some(byte) = at(index) else {
                if in_double_quotes || in_single_quotes {
                    return Err(ProtocolError::UnbalancedQuotes);
                }
                break;
            };
            if in_double_quotes {
                let escaped_hex = match (at(index + 1), at(index + 2), at(index + 3)) {
                    (Some(b'x'), Some(high), Some(low)) if byte == b'\\' => {
                        hex_digit_value(high).zip(hex_digit_value(low))
                    }
                    _ => None,
                };
                if let Some((high, low)) = escaped_hex {
                    argv.bytes.push(high * 16 + low);
                    index += 4;
                } else if byte == b'\\'
                    && let Some(escaped) = at(index + 1)
                {
                    argv.bytes.push(match escaped {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                    index += 2;
                } else if byte == b'"' {
                    if at(index + 1).is_some_and(|next| !is_c_space(next)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    index += 1;
                    break;
                } else {
                    argv.bytes.push(byte);
                    index += 1;
                }
            } else if in_single_quotes {
                if byte == b'\\' && at(index + 1) == Some(b'\'') {
                    argv.bytes.push(b'\'');
                    index += 2;
                } else if byte == b'\'' {
                    if at(index + 1).is_some_and(|next| !is_c_space(next)) {
                        return Err(ProtocolError::UnbalancedQuotes);
                    }
                    index += 1;
                    break;
                } else {
                    argv.bytes.push(byte);
                    index += 1;
                }
            } else {
                index += 1;
                match byte {
                    // Only these end an unquoted argument; vertical tab and form feed do
                    // not, although they are skipped between arguments.
                    b' ' | b'\n' | b'\r' | b'\t' => break,
                    b'"' => in_double_quotes = true,
                    b'\'' => in_single_quotes = true,
                    _ => argv.bytes.push(byte),
                }
            }
        }
        argv.finish_arg();
    }
}

/// The protocol a connection speaks, chosen with `HELLO`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Proto {
    /// RESP2, every connection's protocol until it sends `HELLO 3`.
    Resp2,
    /// RESP3, with maps, sets, doubles, booleans and one null type.
    Resp3,
}

/// Writes one connection's replies in the protocol it negotiated (HELLO).
///
/// Numbers and length headers are formatted on the stack, since every reply has them.
#[derive(Debug)]
pub struct ReplyWriter<'a> {
    out: &'a mut Vec<u8>,
    proto: Proto,
}

impl<'a> ReplyWriter<'a> {
    /// Makes a writer appending replies to `out`.
    pub fn new(out: &'a mut Vec<u8>, proto: Proto) -> Self {
        ReplyWriter { out, proto }
    }

    /// The protocol replies are written in.
    pub fn proto(&self) -> Proto {
        self.proto
    }

    fn crlf(&mut self) {
        self.out.extend_from_slice(b"\r\n");
    }

    /// Writes `<prefix><n>\r\n`, the header of bulk strings and aggregates.
    fn header(&mut self, prefix: u8, n: u64) {
        self.out.push(prefix);
        format_u64(n, self.out);
        self.crlf();
    }

    /// `+OK`, Redis's `shared.ok`.
    pub fn ok(&mut self) {
        self.out.extend_from_slice(b"+OK\r\n");
    }

    /// A simple string, `+text` (`addReplyStatus`). The text must not contain CR or LF.
    pub fn simple(&mut self, text: &str) {
        debug_assert!(
            !text.contains(['\r', '\n']),
            "a simple string cannot hold CR or LF: {text:?}"
        );
        self.out.push(b'+');
        self.out.extend_from_slice(text.as_bytes());
        self.crlf();
    }

    /// An error, `-text` (`addReplyError`). The text starts with its code, as in
    /// "ERR value is not an integer or out of range" or "WRONGTYPE ...". CR and LF in it
    /// become spaces, as Redis's `addReplyErrorFormat` makes them, so that a message
    /// quoting a client's bytes cannot break the protocol.
    pub fn error(&mut self, text: &str) {
        self.error_bytes(text.as_bytes());
    }

    /// An error whose text is not necessarily UTF-8, because Redis quotes client bytes
    /// in errors verbatim (e.g. "ERR unknown command '...'"); as [`ReplyWriter::error`].
    pub fn error_bytes(&mut self, text: &[u8]) {
        self.out.push(b'-');
        self.out.extend(text.iter().map(|&byte| {
            if matches!(byte, b'\r' | b'\n') {
                b' '
            } else {
                byte
            }
        }));
        self.crlf();
    }

    /// The `-ERR Protocol error: ...` reply sent before closing a connection that sent a
    /// malformed request.
    pub fn protocol_error(&mut self, error: &ProtocolError) {
        self.out.extend_from_slice(b"-ERR ");
        error.write_text(self.out);
        self.crlf();
    }

    /// Replies another writer of the same protocol wrote before: what follows a header whose
    /// length was known only once they were written (Redis's deferred lengths).
    pub fn append(&mut self, replies: &[u8]) {
        self.out.extend_from_slice(replies);
    }

    /// An integer, `:n` (`addReplyLongLong`).
    pub fn integer(&mut self, n: i64) {
        self.out.push(b':');
        format_i64(n, self.out);
        self.crlf();
    }

    /// A bulk string, `$len\r\nbytes\r\n` (`addReplyBulkCBuffer`).
    pub fn bulk(&mut self, bytes: &[u8]) {
        self.out.reserve(bytes.len() + 16);
        self.header(b'$', bytes.len() as u64);
        self.out.extend_from_slice(bytes);
        self.crlf();
    }

    /// A missing value (`addReplyNull`): RESP2 `$-1`, RESP3 `_`.
    pub fn null(&mut self) {
        self.out.extend_from_slice(match self.proto {
            Proto::Resp2 => b"$-1\r\n",
            Proto::Resp3 => b"_\r\n",
        });
    }

    /// A missing aggregate (`addReplyNullArray`): RESP2 `*-1`, RESP3 `_`.
    pub fn null_array(&mut self) {
        self.out.extend_from_slice(match self.proto {
            Proto::Resp2 => b"*-1\r\n",
            Proto::Resp3 => b"_\r\n",
        });
    }

    /// The header of an array of `len` replies, `*len` (`addReplyArrayLen`).
    pub fn array(&mut self, len: usize) {
        self.header(b'*', len as u64);
    }

    /// The header of a map of `pairs` key-value pairs (`addReplyMapLen`): RESP3 `%pairs`,
    /// and in RESP2 a flat array of twice as many replies.
    pub fn map(&mut self, pairs: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', (pairs as u64).saturating_mul(2)),
            Proto::Resp3 => self.header(b'%', pairs as u64),
        }
    }

    /// The header of a set of `len` replies (`addReplySetLen`): RESP3 `~len`, RESP2 `*len`.
    pub fn set(&mut self, len: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', len as u64),
            Proto::Resp3 => self.header(b'~', len as u64),
        }
    }

    /// The header of a push of `len` replies (`addReplyPushLen`): RESP3 `>len`; in RESP2,
    /// which has no pushes, an array, as Redis sends pub/sub messages there.
    pub fn push(&mut self, len: usize) {
        match self.proto {
            Proto::Resp2 => self.header(b'*', len as u64),
            Proto::Resp3 => self.header(b'>', len as u64),
        }
    }

    /// A double as Redis 7.0.15's `addReplyDouble` sends it: the `%.17g` text (see
    /// [`crate::num::format_double`]; infinities are "inf" and "-inf") as a bulk string in
    /// RESP2 and as `,text` in RESP3.
    pub fn double(&mut self, d: f64) {
        match self.proto {
            Proto::Resp2 => {
                let start = self.out.len();
                format_double(d, self.out);
                self.prepend_bulk_header(start);
            }
            Proto::Resp3 => {
                self.out.push(b',');
                format_double(d, self.out);
                self.crlf();
            }
        }
    }

    /// A double already formatted (`addReplyHumanLongDouble`'s text): a bulk string in RESP2,
    /// `,text` in RESP3.
    pub fn double_text(&mut self, text: &[u8]) {
        match self.proto {
            Proto::Resp2 => self.bulk(text),
            Proto::Resp3 => {
                self.out.push(b',');
                self.out.extend_from_slice(text);
                self.crlf();
            }
        }
    }

    /// A boolean (`addReplyBool`): RESP3 `#t`/`#f`, RESP2 the integers 1 and 0.
    pub fn boolean(&mut self, b: bool) {
        self.out.extend_from_slice(match (self.proto, b) {
            (Proto::Resp2, true) => b":1\r\n",
            (Proto::Resp2, false) => b":0\r\n",
            (Proto::Resp3, true) => b"#t\r\n",
            (Proto::Resp3, false) => b"#f\r\n",
        });
    }

    /// A verbatim string (`addReplyVerbatim`): RESP3 `=len\r\nfmt:text`, where `format`
    /// is a three-byte type such as "txt" (cut or padded with spaces to three bytes, as
    /// Redis does), and in RESP2 a plain bulk string of the text.
    pub fn verbatim(&mut self, format: &str, text: &str) {
        match self.proto {
            Proto::Resp2 => self.bulk(text.as_bytes()),
            Proto::Resp3 => {
                self.header(b'=', text.len() as u64 + 4);
                let padded_format = format.bytes().chain(std::iter::repeat(b' '));
                self.out.extend(padded_format.take(3));
                self.out.push(b':');
                self.out.extend_from_slice(text.as_bytes());
                self.crlf();
            }
        }
    }

    /// An integer sent as a bulk string of its decimal text (`addReplyBulkLongLong`),
    /// which Redis uses where a reply is a string that happens to hold a number.
    pub fn bulk_integer(&mut self, n: i64) {
        let start = self.out.len();
        format_i64(n, self.out);
        self.prepend_bulk_header(start);
    }

    /// Turns the text written since `start` into a bulk string by inserting its `$len\r\n`
    /// header before it and appending the CRLF, without a temporary buffer: the header
    /// is appended, then rotated into place.
    fn prepend_bulk_header(&mut self, start: usize) {
        let text_len = self.out.len() - start;
        self.header(b'$', text_len as u64);
        let header_len = self.out.len() - start - text_len;
        self.out[start..].rotate_right(header_len);
        self.crlf();
    }
}

/// A reply, as [`parse_reply`] reads it. Attributes (RESP3 `|`) are read and dropped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Value {
    /// `+text`.
    Simple(Vec<u8>),
    /// `-text` or RESP3's blob error `!len`, without the `-`.
    Error(Vec<u8>),
    /// `:n`.
    Integer(i64),
    /// `$len`.
    Bulk(Vec<u8>),
    /// RESP2's `$-1` or RESP3's `_`.
    Null,
    /// `*len`.
    Array(Vec<Value>),
    /// RESP2's `*-1`.
    NullArray,
    /// RESP3's `%len`.
    Map(Vec<(Value, Value)>),
    /// RESP3's `~len`.
    Set(Vec<Value>),
    /// RESP3's `,text`, kept as text so that formatting differences are visible.
    Double(Vec<u8>),
    /// RESP3's `#t` or `#f`.
    Boolean(bool),
    /// RESP3's `=len`: the three-byte format (such as "txt") and the text.
    Verbatim(Vec<u8>, Vec<u8>),
    /// RESP3's `(digits`.
    BigNumber(Vec<u8>),
    /// RESP3's `>len`, an out-of-band message such as a pub/sub delivery.
    Push(Vec<Value>),
}

impl fmt::Display for Value {
    /// Renders the reply on one line in the manner of `redis-cli`, so that test failures
    /// read like a terminal session: `"bulk"` (escaped like `redis-cli`'s quoted output),
    /// `(integer) 1`, `(error) ERR ...`, `(nil)`, `(double) 1.5`, `(true)`, and aggregates
    /// in brackets: `["a", (integer) 1]`, `{"key" => "value"}`, `(set) [...]`.
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |formatter: &mut fmt::Formatter<'_>, items: &[Value]| {
            formatter.write_str("[")?;
            for (index, item) in items.iter().enumerate() {
                if index > 0 {
                    formatter.write_str(", ")?;
                }
                write!(formatter, "{item}")?;
            }
            formatter.write_str("]")
        };
        match self {
            Value::Simple(text) => write!(formatter, "{}", String::from_utf8_lossy(text)),
            Value::Error(text) => write!(formatter, "(error) {}", String::from_utf8_lossy(text)),
            Value::Integer(n) => write!(formatter, "(integer) {n}"),
            Value::Bulk(bytes) => write_quoted(formatter, bytes),
            Value::Null | Value::NullArray => formatter.write_str("(nil)"),
            Value::Double(text) => write!(formatter, "(double) {}", String::from_utf8_lossy(text)),
            Value::Boolean(true) => formatter.write_str("(true)"),
            Value::Boolean(false) => formatter.write_str("(false)"),
            Value::BigNumber(text) => {
                write!(formatter, "(big number) {}", String::from_utf8_lossy(text))
            }
            Value::Verbatim(format, text) => {
                write!(formatter, "(verbatim {}) ", String::from_utf8_lossy(format))?;
                write_quoted(formatter, text)
            }
            Value::Array(items) => list(formatter, items),
            Value::Set(items) => {
                formatter.write_str("(set) ")?;
                list(formatter, items)
            }
            Value::Push(items) => {
                formatter.write_str("(push) ")?;
                list(formatter, items)
            }
            Value::Map(pairs) => {
                formatter.write_str("{")?;
                for (index, (key, value)) in pairs.iter().enumerate() {
                    if index > 0 {
                        formatter.write_str(", ")?;
                    }
                    write!(formatter, "{key} => {value}")?;
                }
                formatter.write_str("}")
            }
        }
    }
}

/// Writes bytes in double quotes with `redis-cli`'s escapes (Redis's `sdscatrepr`).
fn write_quoted(formatter: &mut fmt::Formatter<'_>, bytes: &[u8]) -> fmt::Result {
    formatter.write_str("\"")?;
    for &byte in bytes {
        match byte {
            b'\\' => formatter.write_str("\\\\")?,
            b'"' => formatter.write_str("\\\"")?,
            b'\n' => formatter.write_str("\\n")?,
            b'\r' => formatter.write_str("\\r")?,
            b'\t' => formatter.write_str("\\t")?,
            0x07 => formatter.write_str("\\a")?,
            0x08 => formatter.write_str("\\b")?,
            0x20..=0x7e => write!(formatter, "{}", char::from(byte))?,
            _ => write!(formatter, "\\x{byte:02x}")?,
        }
    }
    formatter.write_str("\"")
}

/// Why [`parse_reply`] refused its input.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
pub enum ReplyParseError {
    /// The first byte of a reply is not a RESP type marker.
    #[error("unknown reply type byte {0:#04x}")]
    UnknownType(u8),
    /// A `\r` that is not followed by `\n`, or a blob not followed by `\r\n`.
    #[error("reply line does not end in CRLF")]
    MissingCrlf,
    /// A length or count that is not a non-negative integer (or -1 where RESP2 allows it).
    #[error("bad reply length")]
    BadLength,
    /// An integer reply that is not a valid integer.
    #[error("bad integer reply")]
    BadInteger,
    /// A boolean other than `t` or `f`, or a null with text after the `_`.
    #[error("bad boolean or null reply")]
    BadScalar,
    /// A verbatim string without its `fmt:` prefix.
    #[error("bad verbatim string reply")]
    BadVerbatim,
    /// Aggregates nested deeper than any real reply, refused to protect the stack.
    #[error("reply nested too deeply")]
    TooDeep,
}

/// How deeply [`parse_reply`] follows nested aggregates before refusing the input.
const REPLY_DEPTH_MAX: usize = 256;

/// Parses the first reply in `buf`, RESP2 or RESP3, returning it and the number of bytes
/// it occupies, or `None` if `buf` holds only part of it.
pub fn parse_reply(buf: &[u8]) -> Result<Option<(Value, usize)>, ReplyParseError> {
    parse_reply_at(buf, 0, 0)
}

/// The length in bytes of the first whole reply in `buf`, RESP2 or RESP3, or `None` if `buf`
/// holds only part of it. Unlike [`parse_reply`] it builds nothing and follows aggregates
/// nested to any depth without recursion (it counts the replies still owed), so a reply a
/// script built 1,000 levels deep can be cut out of a block's reply.
pub fn reply_len(buf: &[u8]) -> Result<Option<usize>, ReplyParseError> {
    let mut position = 0;
    // Replies still to be read: the first, then each aggregate's elements.
    let mut owed: usize = 1;
    while owed > 0 {
        owed -= 1;
        let Some(&marker) = buf.get(position) else {
            return Ok(None);
        };
        let Some((line, after_line)) = reply_line(buf, position + 1)? else {
            return Ok(None);
        };
        position = after_line;
        let mut owe = |count_multiplier: usize, extra: usize| {
            let count = reply_length(line)?
                .checked_mul(count_multiplier)
                .and_then(|count| count.checked_add(extra))
                .ok_or(ReplyParseError::BadLength)?;
            owed = owed.checked_add(count).ok_or(ReplyParseError::BadLength)?;
            Ok::<(), ReplyParseError>(())
        };
        match marker {
            b'+' | b'-' | b',' | b'(' => {}
            b':' => {
                parse_i64(line).ok_or(ReplyParseError::BadInteger)?;
            }
            b'_' if line.is_empty() => {}
            b'#' if line == b"t" || line == b"f" => {}
            b'_' | b'#' => return Err(ReplyParseError::BadScalar),
            b'$' | b'*' if line == b"-1" => {}
            b'$' | b'!' | b'=' => {
                let len = reply_length(line)?;
                let end = after_line
                    .checked_add(len)
                    .ok_or(ReplyParseError::BadLength)?;
                let Some(terminator) = buf.get(end..end.saturating_add(2)) else {
                    return Ok(None);
                };
                if terminator != b"\r\n" {
                    return Err(ReplyParseError::MissingCrlf);
                }
                if marker == b'=' && (len < 4 || buf[after_line + 3] != b':') {
                    return Err(ReplyParseError::BadVerbatim);
                }
                position = end + 2;
            }
            b'*' | b'~' | b'>' => owe(1, 0)?,
            b'%' => owe(2, 0)?,
            // Attributes: their pairs, then the reply they describe.
            b'|' => owe(2, 1)?,
            other => return Err(ReplyParseError::UnknownType(other)),
        }
    }
    Ok(Some(position))
}

/// The elements of the RESP array `reply`, each as its bytes; `None` if `reply` is not one
/// whole array (an `EXEC` reply the session weaves connection commands into, or a block's
/// reply a proxy hands back command by command). Elements may nest to any depth.
pub fn array_elements(reply: &[u8]) -> Option<Vec<&[u8]>> {
    let (header, mut at) = reply_line(reply, 1).ok()??;
    if reply.first() != Some(&b'*') {
        return None;
    }
    let count = reply_length(header).ok()?;
    let mut elements = Vec::with_capacity(count.min(reply.len() / 3));
    for _ in 0..count {
        let used = reply_len(&reply[at..]).ok()??;
        elements.push(&reply[at..at + used]);
        at += used;
    }
    (at == reply.len()).then_some(elements)
}

/// Reads the line starting at `start`, returning it (without CRLF) and where the next
/// line starts.
fn reply_line(buf: &[u8], start: usize) -> Result<Option<(&[u8], usize)>, ReplyParseError> {
    let Some(offset) = buf[start..].iter().position(|&byte| byte == b'\r') else {
        return Ok(None);
    };
    let cr = start + offset;
    match buf.get(cr + 1) {
        None => Ok(None),
        Some(b'\n') => Ok(Some((&buf[start..cr], cr + 2))),
        Some(_) => Err(ReplyParseError::MissingCrlf),
    }
}

/// Parses a non-negative length or count.
fn reply_length(text: &[u8]) -> Result<usize, ReplyParseError> {
    parse_i64(text)
        .and_then(|n| usize::try_from(n).ok())
        .ok_or(ReplyParseError::BadLength)
}

/// Reads `len` bytes at `start` followed by CRLF.
fn reply_blob(
    buf: &[u8],
    start: usize,
    len: usize,
) -> Result<Option<(Vec<u8>, usize)>, ReplyParseError> {
    let end = start.checked_add(len).ok_or(ReplyParseError::BadLength)?;
    let Some(terminator) = buf.get(end..end.saturating_add(2)) else {
        return Ok(None);
    };
    if terminator != b"\r\n" {
        return Err(ReplyParseError::MissingCrlf);
    }
    Ok(Some((buf[start..end].to_vec(), end + 2)))
}

/// Parses `count` replies from `start`, returning them and where they end.
fn reply_elements(
    buf: &[u8],
    start: usize,
    count: usize,
    depth: usize,
) -> Result<Option<(Vec<Value>, usize)>, ReplyParseError> {
    // Every reply takes at least three bytes, which bounds what is worth reserving.
    let mut elements = Vec::with_capacity(count.min((buf.len() - start) / 3));
    let mut position = start;
    for _ in 0..count {
        let Some((element, next)) = parse_reply_at(buf, position, depth + 1)? else {
            return Ok(None);
        };
        elements.push(element);
        position = next;
    }
    Ok(Some((elements, position)))
}

fn pair_up(elements: Vec<Value>) -> Vec<(Value, Value)> {
    let mut pairs = Vec::with_capacity(elements.len() / 2);
    let mut elements = elements.into_iter();
    while let (Some(key), Some(value)) = (elements.next(), elements.next()) {
        pairs.push((key, value));
    }
    pairs
}

fn parse_reply_at(
    buf: &[u8],
    start: usize,
    depth: usize,
) -> Result<Option<(Value, usize)>, ReplyParseError> {
    if depth > REPLY_DEPTH_MAX {
        return Err(ReplyParseError::TooDeep);
    }
    let Some(&marker) = buf.get(start) else {
        return Ok(None);
    };
    let Some((line, after_line)) = reply_line(buf, start + 1)? else {
        return Ok(None);
    };
    let scalar = |value: Value| Ok(Some((value, after_line)));
    let blob = || match reply_length(line) {
        Ok(len) => reply_blob(buf, after_line, len),
        Err(error) => Err(error),
    };
    let elements = |count_multiplier: usize| {
        let count = reply_length(line)?
            .checked_mul(count_multiplier)
            .ok_or(ReplyParseError::BadLength)?;
        reply_elements(buf, after_line, count, depth)
    };
    match marker {
        b'+' => scalar(Value::Simple(line.to_vec())),
        b'-' => scalar(Value::Error(line.to_vec())),
        b':' => scalar(Value::Integer(
            parse_i64(line).ok_or(ReplyParseError::BadInteger)?,
        )),
        b',' => scalar(Value::Double(line.to_vec())),
        b'(' => scalar(Value::BigNumber(line.to_vec())),
        b'_' if line.is_empty() => scalar(Value::Null),
        b'#' if line == b"t" => scalar(Value::Boolean(true)),
        b'#' if line == b"f" => scalar(Value::Boolean(false)),
        b'_' | b'#' => Err(ReplyParseError::BadScalar),
        b'$' if line == b"-1" => scalar(Value::Null),
        b'*' if line == b"-1" => scalar(Value::NullArray),
        b'$' => Ok(blob()?.map(|(bytes, next)| (Value::Bulk(bytes), next))),
        b'!' => Ok(blob()?.map(|(bytes, next)| (Value::Error(bytes), next))),
        b'=' => {
            let Some((bytes, next)) = blob()? else {
                return Ok(None);
            };
            if bytes.len() < 4 || bytes[3] != b':' {
                return Err(ReplyParseError::BadVerbatim);
            }
            let (format, text) = bytes.split_at(3);
            Ok(Some((
                Value::Verbatim(format.to_vec(), text[1..].to_vec()),
                next,
            )))
        }
        b'*' => Ok(elements(1)?.map(|(items, next)| (Value::Array(items), next))),
        b'~' => Ok(elements(1)?.map(|(items, next)| (Value::Set(items), next))),
        b'>' => Ok(elements(1)?.map(|(items, next)| (Value::Push(items), next))),
        b'%' => Ok(elements(2)?.map(|(items, next)| (Value::Map(pair_up(items)), next))),
        b'|' => {
            // Attributes describe the reply that follows them; tests compare replies only.
            let Some((_, next)) = elements(2)? else {
                return Ok(None);
            };
            parse_reply_at(buf, next, depth + 1)
        }
        other => Err(ReplyParseError::UnknownType(other)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `reply_len` agrees with `parse_reply` on every reply the tests parse, whole or cut,
    /// and measures replies nested deeper than `parse_reply` follows.
    #[test]
    fn reply_len_measures_what_parse_reply_parses_and_deeper() {
        let replies: &[&[u8]] = &[
            b"+OK\r\n",
            b"-ERR x\r\n",
            b":-12\r\n",
            b"$3\r\nabc\r\n",
            b"$-1\r\n",
            b"*-1\r\n",
            b"*2\r\n$1\r\na\r\n*1\r\n:1\r\n",
            b"%1\r\n+k\r\n~2\r\n#t\r\n_\r\n",
            b"|1\r\n+a\r\n+b\r\n,1.5\r\n",
            b"=7\r\ntxt:abc\r\n",
            b">1\r\n(12\r\n",
        ];
        for reply in replies {
            let mut buf = reply.to_vec();
            buf.extend_from_slice(b"+next\r\n");
            let parsed = parse_reply(&buf).unwrap().map(|(_, used)| used);
            assert_eq!(reply_len(&buf).unwrap(), parsed, "{}", reply.escape_ascii());
            assert_eq!(parsed, Some(reply.len()));
            for cut in 0..reply.len() {
                assert_eq!(reply_len(&reply[..cut]).unwrap(), None, "cut at {cut}");
            }
        }
        let deep = [b"*1\r\n".repeat(100_000), b":1\r\n".to_vec()].concat();
        assert_eq!(reply_len(&deep).unwrap(), Some(deep.len()));
        assert!(matches!(parse_reply(&deep), Err(ReplyParseError::TooDeep)));
        for bad in [
            &b"?x\r\n"[..],
            b"$3\r\nabcd\r\n",
            b"*x\r\n",
            b":1.5\r\n",
            b"#x\r\n",
        ] {
            assert!(reply_len(bad).is_err(), "{}", bad.escape_ascii());
        }
    }

    fn parse(buf: &[u8]) -> (Result<Parsed, ProtocolError>, Vec<Vec<u8>>) {
        let mut argv = Argv::new();
        let parsed = parse_request(buf, &RequestLimits::default(), &mut argv);
        (parsed, argv.iter().map(<[u8]>::to_vec).collect())
    }

    fn args(list: &[&str]) -> Vec<Vec<u8>> {
        list.iter().map(|arg| arg.as_bytes().to_vec()).collect()
    }

    fn error_text(error: ProtocolError) -> Vec<u8> {
        let mut text = Vec::new();
        error.write_text(&mut text);
        text
    }

    #[test]
    fn multibulk_request_is_parsed() {
        let request = b"*2\r\n$3\r\nGET\r\n$3\r\nkey\r\n";
        let (parsed, argv) = parse(request);
        assert_eq!(
            parsed,
            Ok(Parsed::Command {
                consumed: request.len()
            })
        );
        assert_eq!(argv, args(&["GET", "key"]));
    }

    #[test]
    fn multibulk_is_binary_safe() {
        let (parsed, argv) = parse(b"*1\r\n$5\r\na\r\n\0b\r\n");
        assert_eq!(parsed, Ok(Parsed::Command { consumed: 15 }));
        assert_eq!(argv, vec![b"a\r\n\0b".to_vec()]);
    }

    #[test]
    fn multibulk_skips_bytes_after_cr_and_bulk_unchecked_like_redis() {
        // Confirmed against redis-server 7.0.15: this is a PING.
        let (parsed, argv) = parse(b"*1\rX$4\r\nPINGxx");
        assert_eq!(parsed, Ok(Parsed::Command { consumed: 14 }));
        assert_eq!(argv, args(&["PING"]));
    }

    #[test]
    fn empty_and_negative_multibulk_counts_are_skipped() {
        for request in [&b"*0\r\n"[..], b"*-1\r\n", b"*-100\r\n"] {
            assert_eq!(
                parse(request).0,
                Ok(Parsed::Skip {
                    consumed: request.len()
                })
            );
        }
    }

    #[test]
    fn incomplete_requests_say_how_much_more_is_needed() {
        assert_eq!(parse(b"").0, Ok(Parsed::Incomplete { at_least: 1 }));
        assert_eq!(parse(b"*1").0, Ok(Parsed::Incomplete { at_least: 3 }));
        assert_eq!(parse(b"*1\r").0, Ok(Parsed::Incomplete { at_least: 4 }));
        assert_eq!(
            parse(b"*1\r\n$100\r\nab").0,
            Ok(Parsed::Incomplete { at_least: 112 })
        );
        assert_eq!(parse(b"PIN").0, Ok(Parsed::Incomplete { at_least: 4 }));
    }

    #[test]
    fn huge_announced_lengths_reserve_nothing() {
        let limits = RequestLimits {
            args_max: i32::MAX as usize,
            ..RequestLimits::default()
        };
        let mut argv = Argv::new();
        let parsed = parse_request(b"*2147483647\r\n$536870912\r\n", &limits, &mut argv);
        assert_eq!(
            parsed,
            Ok(Parsed::Incomplete {
                at_least: 25 + 536870912 + 2
            })
        );
        assert_eq!(argv.bytes.capacity(), 0);
        assert_eq!(argv.ends.capacity(), 0);
    }

    #[test]
    fn multibulk_errors_carry_redis_texts() {
        // Each confirmed against redis-server 7.0.15.
        let cases: &[(&[u8], &[u8])] = &[
            (b"*1\r\nX\r\n", b"Protocol error: expected '$', got 'X'"),
            (b"*1\r\n\r\n", b"Protocol error: expected '$', got ' '"),
            (
                b"*1\r\n\xff\r\n",
                b"Protocol error: expected '$', got '\xff'",
            ),
            (b"*1\r\n$-1\r\n", b"Protocol error: invalid bulk length"),
            (
                b"*1\r\n$01\r\nx\r\n",
                b"Protocol error: invalid bulk length",
            ),
            (
                b"*1\r\n$+1\r\nx\r\n",
                b"Protocol error: invalid bulk length",
            ),
            (b"*01\r\n", b"Protocol error: invalid multibulk length"),
            (b"*-0\r\n", b"Protocol error: invalid multibulk length"),
            (b"*\r\n", b"Protocol error: invalid multibulk length"),
            (
                b"*2147483648\r\n",
                b"Protocol error: invalid multibulk length",
            ),
        ];
        for &(request, text) in cases {
            let error = parse(request).0.expect_err("malformed request");
            assert_eq!(
                error_text(error),
                text,
                "{:?}",
                String::from_utf8_lossy(request)
            );
        }
    }

    #[test]
    fn limits_are_enforced() {
        let limits = RequestLimits {
            bulk_len_max: 10,
            args_max: 3,
            inline_len_max: 8,
            unauthenticated: false,
        };
        let mut argv = Argv::new();
        let mut check = |request: &[u8]| parse_request(request, &limits, &mut argv);
        assert_eq!(check(b"*3\r\n"), Ok(Parsed::Incomplete { at_least: 5 }));
        assert_eq!(check(b"*4\r\n"), Err(ProtocolError::InvalidMultibulkLength));
        assert_eq!(
            check(b"*1\r\n$10\r\n"),
            Ok(Parsed::Incomplete { at_least: 21 })
        );
        assert_eq!(
            check(b"*1\r\n$11\r\n"),
            Err(ProtocolError::InvalidBulkLength)
        );
        assert_eq!(check(b"*0000000"), Ok(Parsed::Incomplete { at_least: 9 }));
        assert_eq!(
            check(b"*00000000"),
            Err(ProtocolError::TooBigMultibulkCount)
        );
        assert_eq!(
            check(b"*1\r\n$00000000"),
            Err(ProtocolError::TooBigBulkCount)
        );
        assert_eq!(check(b"12345678\n"), Ok(Parsed::Command { consumed: 9 }));
        assert_eq!(
            check(b"123456789\n"),
            Err(ProtocolError::TooBigInlineRequest)
        );
        assert_eq!(check(b"123456789"), Err(ProtocolError::TooBigInlineRequest));
    }

    #[test]
    fn a_connection_that_has_not_authenticated_is_held_to_redis_smaller_limits() {
        let limits = RequestLimits {
            unauthenticated: true,
            ..RequestLimits::default()
        };
        let mut argv = Argv::new();
        let mut check = |request: &[u8]| parse_request(request, &limits, &mut argv);
        assert_eq!(
            check(b"*11\r\n"),
            Err(ProtocolError::UnauthenticatedMultibulkLength)
        );
        assert_eq!(
            check(b"*2\r\n$4\r\nAUTH\r\n$16385\r\n"),
            Err(ProtocolError::UnauthenticatedBulkLength)
        );
        assert!(matches!(
            check(b"*10\r\n$4\r\nAUTH\r\n$16384\r\n"),
            Ok(Parsed::Incomplete { .. })
        ));
        let mut text = Vec::new();
        ProtocolError::UnauthenticatedBulkLength.write_text(&mut text);
        assert_eq!(text, b"Protocol error: unauthenticated bulk length");
    }

    #[test]
    fn nul_hides_the_line_end_until_the_limit_like_redis() {
        let limits = RequestLimits {
            inline_len_max: 8,
            ..RequestLimits::default()
        };
        let mut argv = Argv::new();
        let mut check = |request: &[u8]| parse_request(request, &limits, &mut argv);
        assert_eq!(check(b"PING\0\r\n"), Ok(Parsed::Incomplete { at_least: 9 }));
        assert_eq!(
            check(b"PING\0\r\n\r\n"),
            Err(ProtocolError::TooBigInlineRequest)
        );
        assert_eq!(check(b"*1\0\r\n"), Ok(Parsed::Incomplete { at_least: 9 }));
        assert_eq!(
            check(b"*1\0\r\n\r\n\r\n"),
            Err(ProtocolError::TooBigMultibulkCount)
        );
    }

    #[test]
    fn inline_request_is_split_like_sdssplitargs() {
        let cases: &[(&[u8], &[&[u8]])] = &[
            (b"PING\r\n", &[b"PING"]),
            (b"PING\n", &[b"PING"]),
            (b"  set  a\tb \r\n", &[b"set", b"a", b"b"]),
            (
                b"set k \"a b\\n\\x41\\x4g\"\r\n",
                &[b"set", b"k", b"a b\nAx4g"],
            ),
            (b"set k 'it\\'s \\n'\n", &[b"set", b"k", b"it's \\n"]),
            (b"a\"b c\" d\n", &[b"ab c", b"d"]),
            (b"\"\"\n", &[b""]),
            (b"a\x0bb\n", &[b"a\x0bb"]),
            (b"\"\\q\\\"\\\\\"\n", &[b"q\"\\"]),
            (b"a\rb\n", &[b"a", b"b"]),
        ];
        for &(line, expected) in cases {
            let (parsed, argv) = parse(line);
            assert_eq!(
                parsed,
                Ok(Parsed::Command {
                    consumed: line.len()
                }),
                "{line:?}"
            );
            let expected: Vec<Vec<u8>> = expected.iter().map(|arg| arg.to_vec()).collect();
            assert_eq!(argv, expected, "{line:?}");
        }
    }

    #[test]
    fn blank_inline_lines_are_skipped() {
        for line in [&b"\n"[..], b"\r\n", b"   \r\n", b"\t\x0b\x0c\n"] {
            assert_eq!(
                parse(line).0,
                Ok(Parsed::Skip {
                    consumed: line.len()
                })
            );
        }
    }

    #[test]
    fn unbalanced_quotes_are_refused() {
        for line in [
            &b"set a \"x\r\n"[..],
            b"get 'a'b\r\n",
            b"get \"a\"b\r\n",
            b"get 'a\n",
            b"get \"a\\\"\n",
        ] {
            let error = parse(line).0.expect_err("unbalanced");
            assert_eq!(
                error_text(error),
                b"Protocol error: unbalanced quotes in request"
            );
        }
    }

    #[test]
    fn argv_round_trips_through_its_encoding() {
        let mut argv = Argv::new();
        argv.push(b"SET");
        argv.push(b"");
        argv.push(&[0xff; 200]);
        let mut encoded = Vec::new();
        argv.encode(&mut encoded);
        assert_eq!(&encoded[..4], &[3, 3, b'S', b'E']);
        assert_eq!(Argv::decode(&encoded), Ok(argv.clone()));
        assert_eq!(argv.get(2).map(<[u8]>::len), Some(200));
        assert_eq!(argv.get(3), None);
    }

    #[test]
    fn argv_decoding_is_strict() {
        assert_eq!(Argv::decode(b""), Err(ArgvDecodeError::Truncated));
        assert_eq!(Argv::decode(b"\x01"), Err(ArgvDecodeError::Truncated));
        assert_eq!(Argv::decode(b"\x01\x02a"), Err(ArgvDecodeError::Truncated));
        assert_eq!(
            Argv::decode(b"\x01\x01ab"),
            Err(ArgvDecodeError::TrailingBytes(1))
        );
        assert_eq!(Argv::decode(b"\x80\x00"), Err(ArgvDecodeError::BadVarint));
        assert_eq!(Argv::decode(&[0xff; 11]), Err(ArgvDecodeError::BadVarint));
        let huge_count = [0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01];
        assert_eq!(Argv::decode(&huge_count), Err(ArgvDecodeError::Truncated));
        assert_eq!(Argv::decode(b"\x00"), Ok(Argv::new()));
    }

    fn written(proto: Proto, write: impl FnOnce(&mut ReplyWriter<'_>)) -> Vec<u8> {
        let mut out = Vec::new();
        write(&mut ReplyWriter::new(&mut out, proto));
        out
    }

    fn both(write: impl Fn(&mut ReplyWriter<'_>)) -> (Vec<u8>, Vec<u8>) {
        (written(Proto::Resp2, &write), written(Proto::Resp3, &write))
    }

    #[test]
    fn scalar_replies_have_redis_bytes() {
        assert_eq!(both(|w| w.ok()), (b"+OK\r\n".to_vec(), b"+OK\r\n".to_vec()));
        assert_eq!(written(Proto::Resp2, |w| w.simple("PONG")), b"+PONG\r\n");
        assert_eq!(
            written(Proto::Resp2, |w| w.error("ERR bad\r\nthing")),
            b"-ERR bad  thing\r\n"
        );
        assert_eq!(
            written(Proto::Resp2, |w| w
                .error_bytes(b"ERR unknown command '\xff'")),
            b"-ERR unknown command '\xff'\r\n"
        );
        assert_eq!(
            written(Proto::Resp2, |w| w
                .protocol_error(&ProtocolError::ExpectedDollar { found: b'X' })),
            b"-ERR Protocol error: expected '$', got 'X'\r\n"
        );
        assert_eq!(written(Proto::Resp2, |w| w.integer(-42)), b":-42\r\n");
        assert_eq!(
            written(Proto::Resp2, |w| w.integer(i64::MIN)),
            b":-9223372036854775808\r\n"
        );
        assert_eq!(written(Proto::Resp2, |w| w.bulk(b"")), b"$0\r\n\r\n");
        assert_eq!(
            written(Proto::Resp2, |w| w.bulk(b"a\r\nb")),
            b"$4\r\na\r\nb\r\n"
        );
        assert_eq!(
            written(Proto::Resp2, |w| w.bulk_integer(-1234567890)),
            b"$11\r\n-1234567890\r\n"
        );
    }

    #[test]
    fn protocol_dependent_replies_have_redis_bytes() {
        assert_eq!(both(|w| w.null()), (b"$-1\r\n".to_vec(), b"_\r\n".to_vec()));
        assert_eq!(
            both(|w| w.null_array()),
            (b"*-1\r\n".to_vec(), b"_\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.array(3)),
            (b"*3\r\n".to_vec(), b"*3\r\n".to_vec())
        );
        assert_eq!(both(|w| w.map(2)), (b"*4\r\n".to_vec(), b"%2\r\n".to_vec()));
        assert_eq!(
            both(|w| w.set(12)),
            (b"*12\r\n".to_vec(), b"~12\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.boolean(true)),
            (b":1\r\n".to_vec(), b"#t\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.boolean(false)),
            (b":0\r\n".to_vec(), b"#f\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.verbatim("txt", "hi")),
            (b"$2\r\nhi\r\n".to_vec(), b"=6\r\ntxt:hi\r\n".to_vec())
        );
        assert_eq!(
            written(Proto::Resp3, |w| w.verbatim("markdown", "")),
            b"=4\r\nmar:\r\n"
        );
        assert_eq!(
            written(Proto::Resp3, |w| w.verbatim("x", "")),
            b"=4\r\nx  :\r\n"
        );
    }

    #[test]
    fn doubles_are_written_as_redis_7_0_does() {
        // Confirmed against redis-server 7.0.15 (ZSCORE, RESP2 and after HELLO 3).
        assert_eq!(
            both(|w| w.double(0.1)),
            (
                b"$19\r\n0.10000000000000001\r\n".to_vec(),
                b",0.10000000000000001\r\n".to_vec()
            )
        );
        assert_eq!(
            both(|w| w.double(f64::INFINITY)),
            (b"$3\r\ninf\r\n".to_vec(), b",inf\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.double(f64::NEG_INFINITY)),
            (b"$4\r\n-inf\r\n".to_vec(), b",-inf\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.double(1e20)),
            (b"$5\r\n1e+20\r\n".to_vec(), b",1e+20\r\n".to_vec())
        );
        assert_eq!(
            both(|w| w.double(3.0)),
            (b"$1\r\n3\r\n".to_vec(), b",3\r\n".to_vec())
        );
    }

    #[test]
    fn replies_append_after_existing_output() {
        let mut out = b"+OK\r\n".to_vec();
        let mut writer = ReplyWriter::new(&mut out, Proto::Resp2);
        writer.double(1.5);
        writer.bulk_integer(7);
        assert_eq!(writer.proto(), Proto::Resp2);
        assert_eq!(out, b"+OK\r\n$3\r\n1.5\r\n$1\r\n7\r\n");
    }

    #[test]
    fn replies_parse_back() {
        let reply = b"*3\r\n:1\r\n$-1\r\n%1\r\n+a\r\n,1.5\r\n";
        let parsed = parse_reply(reply).expect("valid reply");
        let expected = Value::Array(vec![
            Value::Integer(1),
            Value::Null,
            Value::Map(vec![(
                Value::Simple(b"a".to_vec()),
                Value::Double(b"1.5".to_vec()),
            )]),
        ]);
        assert_eq!(parsed, Some((expected, reply.len())));
        for end in 0..reply.len() {
            assert_eq!(
                parse_reply(&reply[..end]),
                Ok(None),
                "prefix of {end} bytes"
            );
        }
    }

    #[test]
    fn resp3_types_parse() {
        let cases: &[(&[u8], Value)] = &[
            (b"_\r\n", Value::Null),
            (b"*-1\r\n", Value::NullArray),
            (b"#t\r\n", Value::Boolean(true)),
            (b"(123\r\n", Value::BigNumber(b"123".to_vec())),
            (b"!3\r\nERR\r\n", Value::Error(b"ERR".to_vec())),
            (b"-WRONGTYPE x\r\n", Value::Error(b"WRONGTYPE x".to_vec())),
            (
                b"=6\r\ntxt:hi\r\n",
                Value::Verbatim(b"txt".to_vec(), b"hi".to_vec()),
            ),
            (b"~1\r\n:2\r\n", Value::Set(vec![Value::Integer(2)])),
            (
                b">1\r\n+m\r\n",
                Value::Push(vec![Value::Simple(b"m".to_vec())]),
            ),
            (b"|1\r\n+k\r\n+v\r\n:5\r\n", Value::Integer(5)),
        ];
        for (reply, expected) in cases {
            let parsed = parse_reply(reply).expect("valid reply");
            assert_eq!(parsed, Some((expected.clone(), reply.len())));
        }
    }

    #[test]
    fn values_display_like_redis_cli() {
        let value = Value::Array(vec![
            Value::Bulk(b"a\"\r\n\x01".to_vec()),
            Value::Integer(-1),
            Value::Null,
            Value::Error(b"ERR no".to_vec()),
            Value::Map(vec![(
                Value::Simple(b"k".to_vec()),
                Value::Double(b"1.5".to_vec()),
            )]),
            Value::Set(vec![Value::Boolean(true)]),
            Value::Verbatim(b"txt".to_vec(), b"hi".to_vec()),
        ]);
        assert_eq!(
            value.to_string(),
            concat!(
                r#"["a\"\r\n\x01", (integer) -1, (nil), (error) ERR no, "#,
                r#"{k => (double) 1.5}, (set) [(true)], (verbatim txt) "hi"]"#,
            )
        );
    }

    #[test]
    fn malformed_replies_are_errors() {
        assert_eq!(
            parse_reply(b"?1\r\n"),
            Err(ReplyParseError::UnknownType(b'?'))
        );
        assert_eq!(parse_reply(b"+a\rb"), Err(ReplyParseError::MissingCrlf));
        assert_eq!(
            parse_reply(b"$1\r\nab\r\n"),
            Err(ReplyParseError::MissingCrlf)
        );
        assert_eq!(parse_reply(b"$-2\r\n"), Err(ReplyParseError::BadLength));
        assert_eq!(parse_reply(b":x\r\n"), Err(ReplyParseError::BadInteger));
        assert_eq!(parse_reply(b"#x\r\n"), Err(ReplyParseError::BadScalar));
        assert_eq!(
            parse_reply(b"=2\r\nab\r\n"),
            Err(ReplyParseError::BadVerbatim)
        );
        let deep = b"*1\r\n".repeat(REPLY_DEPTH_MAX + 2);
        assert_eq!(parse_reply(&deep), Err(ReplyParseError::TooDeep));
    }
}
