//! The `cjson` library Redis embeds (lua_cjson.c, with Redis's defaults), written over the
//! Lua values directly: `encode` and `decode`, and `cjson.null`.
//!
//! What scripts see matches lua-cjson on the cases that matter: a table whose keys are all
//! positive integers is an array (holes become `null`; one more than half holes past index
//! 10 is "excessively sparse" and refused), any other table an object, an empty table `{}`;
//! numbers print as `%.14g`; `/` is escaped as `\/`; JSON `null` decodes to `cjson.null`
//! (a null light userdata); decode errors name the token and the character, as
//! lua-cjson's do. Its settings ([`Config`]: nesting bounds, invalid numbers, precision,
//! sparse arrays) are the VM's, changed by `cjson.encode_max_depth` and its kin as a script
//! calls them, and kept for the VM's later scripts, as in Redis.

use mlua::{LightUserData, Lua, MultiValue, Table, Value};

/// Nesting lua-cjson accepts by default before refusing, both ways; tandem's bound on the
/// settings too, since [`crate::SCRIPT_THREAD_STACK_BYTES`] is sized for it.
pub const DEPTH_MAX: usize = 1000;

/// What `cjson.encode` does with a NaN or an infinity (`encode_invalid_numbers`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidNumbers {
    /// Refuses it: Redis's default.
    Refuse,
    /// Writes `nan`, `inf`, `-inf`, which is not JSON.
    Write,
    /// Writes `null`.
    Null,
}

/// lua-cjson's settings, with Redis's defaults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Config {
    pub encode_max_depth: usize,
    pub decode_max_depth: usize,
    pub encode_invalid_numbers: InvalidNumbers,
    /// Whether `decode` reads `NaN`, `Inf`, hexadecimal, a leading `+` or zero.
    pub decode_invalid_numbers: bool,
    /// Significant digits of an encoded number, 1 to 14.
    pub encode_number_precision: usize,
    /// Kept for `encode_keep_buffer` to answer: it changes no output.
    pub encode_keep_buffer: bool,
    /// An excessively sparse array is encoded as an object instead of refused.
    pub encode_sparse_convert: bool,
    /// An array whose greatest index exceeds its elements × this (0: never) and
    /// `encode_sparse_safe` is excessively sparse.
    pub encode_sparse_ratio: u32,
    pub encode_sparse_safe: u32,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            encode_max_depth: DEPTH_MAX,
            decode_max_depth: DEPTH_MAX,
            encode_invalid_numbers: InvalidNumbers::Refuse,
            decode_invalid_numbers: true,
            encode_number_precision: 14,
            encode_keep_buffer: true,
            encode_sparse_convert: false,
            encode_sparse_ratio: 2,
            encode_sparse_safe: 10,
        }
    }
}

/// `cjson.null`: a light userdata holding a null pointer.
pub fn null() -> Value {
    Value::LightUserData(LightUserData(std::ptr::null_mut()))
}

/// Appends `d` as C's `printf("%.{precision}g")` prints a finite number.
pub fn format_g(d: f64, precision: usize, out: &mut Vec<u8>) {
    debug_assert!(d.is_finite() && precision > 0);
    let scientific = format!("{:.*e}", precision - 1, d);
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's exponent format has an e");
    let exponent: i32 = exponent.parse().expect("Rust's exponent is an integer");
    let trim = |text: &str| -> String {
        if text.contains('.') {
            text.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            text.to_string()
        }
    };
    if exponent < -4 || exponent >= precision as i32 {
        out.extend_from_slice(trim(mantissa).as_bytes());
        out.push(b'e');
        out.push(if exponent < 0 { b'-' } else { b'+' });
        if exponent.unsigned_abs() < 10 {
            out.push(b'0');
        }
        out.extend_from_slice(exponent.unsigned_abs().to_string().as_bytes());
    } else {
        let decimals = (precision as i32 - 1 - exponent).max(0) as usize;
        out.extend_from_slice(trim(&format!("{d:.decimals$}")).as_bytes());
    }
}

// ---------------------------------------------------------------------------------------
// Settings.

/// The settings functions of the `cjson` table, each answering its setting after it read
/// its arguments (none: only the answer).
pub const SETTINGS: &[&str] = &[
    "encode_max_depth",
    "decode_max_depth",
    "encode_invalid_numbers",
    "decode_invalid_numbers",
    "encode_number_precision",
    "encode_keep_buffer",
    "encode_sparse_array",
];

/// Runs settings function `name` (one of [`SETTINGS`]) with `args` on `config`, as
/// lua_cjson.c's do: its answer, or the text of the argument error it raises.
pub fn setting(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    config: &mut Config,
) -> mlua::Result<Result<MultiValue, String>> {
    let most = if name == "encode_sparse_array" { 3 } else { 1 };
    if args.len() > most {
        return Ok(Err(format!(
            "bad argument #{} to '{name}' (found too many arguments)",
            most + 1
        )));
    }
    let answer = |values: Vec<Value>| Ok(Ok(MultiValue::from_iter(values)));
    let depth = |current: usize| integer_option(lua, name, args, 0, 1, DEPTH_MAX as i64, current);
    let flag = |current: bool| -> mlua::Result<Result<bool, String>> {
        let option = enum_option(lua, name, args, 0, &["off", "on"], usize::from(current))?;
        Ok(option.map(|index| index == 1))
    };
    match name {
        "encode_max_depth" | "decode_max_depth" => {
            let setting = if name == "encode_max_depth" {
                &mut config.encode_max_depth
            } else {
                &mut config.decode_max_depth
            };
            match depth(*setting)? {
                Ok(n) => {
                    *setting = n;
                    answer(vec![Value::Integer(n as i64)])
                }
                Err(message) => Ok(Err(message)),
            }
        }
        "encode_number_precision" => {
            match integer_option(lua, name, args, 0, 1, 14, config.encode_number_precision)? {
                Ok(n) => {
                    config.encode_number_precision = n;
                    answer(vec![Value::Integer(n as i64)])
                }
                Err(message) => Ok(Err(message)),
            }
        }
        "encode_invalid_numbers" => {
            let current = match config.encode_invalid_numbers {
                InvalidNumbers::Refuse => 0,
                InvalidNumbers::Write => 1,
                InvalidNumbers::Null => 2,
            };
            match enum_option(lua, name, args, 0, &["off", "on", "null"], current)? {
                Ok(2) => {
                    config.encode_invalid_numbers = InvalidNumbers::Null;
                    answer(vec![Value::String(lua.create_string("null")?)])
                }
                Ok(on) => {
                    config.encode_invalid_numbers = if on == 1 {
                        InvalidNumbers::Write
                    } else {
                        InvalidNumbers::Refuse
                    };
                    answer(vec![Value::Boolean(on == 1)])
                }
                Err(message) => Ok(Err(message)),
            }
        }
        "decode_invalid_numbers" => match flag(config.decode_invalid_numbers)? {
            Ok(on) => {
                config.decode_invalid_numbers = on;
                answer(vec![Value::Boolean(on)])
            }
            Err(message) => Ok(Err(message)),
        },
        "encode_keep_buffer" => match flag(config.encode_keep_buffer)? {
            Ok(on) => {
                config.encode_keep_buffer = on;
                answer(vec![Value::Boolean(on)])
            }
            Err(message) => Ok(Err(message)),
        },
        "encode_sparse_array" => sparse_array(lua, args, config),
        other => unreachable!("cjson has no setting {other}"),
    }
}

/// `encode_sparse_array([convert [, ratio [, safe]]])`.
fn sparse_array(
    lua: &Lua,
    args: &MultiValue,
    config: &mut Config,
) -> mlua::Result<Result<MultiValue, String>> {
    let name = "encode_sparse_array";
    let current = usize::from(config.encode_sparse_convert);
    let convert = match enum_option(lua, name, args, 0, &["off", "on"], current)? {
        Ok(convert) => convert == 1,
        Err(message) => return Ok(Err(message)),
    };
    let int_max = i64::from(i32::MAX);
    let ratio = config.encode_sparse_ratio as usize;
    let ratio = match integer_option(lua, name, args, 1, 0, int_max, ratio)? {
        Ok(ratio) => ratio,
        Err(message) => return Ok(Err(message)),
    };
    let safe = config.encode_sparse_safe as usize;
    let safe = match integer_option(lua, name, args, 2, 0, int_max, safe)? {
        Ok(safe) => safe,
        Err(message) => return Ok(Err(message)),
    };
    config.encode_sparse_convert = convert;
    config.encode_sparse_ratio = u32::try_from(ratio).expect("checked against INT_MAX");
    config.encode_sparse_safe = u32::try_from(safe).expect("checked against INT_MAX");
    Ok(Ok(MultiValue::from_iter([
        Value::Boolean(convert),
        Value::Integer(ratio as i64),
        Value::Integer(safe as i64),
    ])))
}

/// lua-cjson's `json_integer_option`: `value` (a number, or a string that reads as one) if
/// given, within `min..=max`, else `current`.
fn integer_option(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    at: usize,
    min: i64,
    max: i64,
    current: usize,
) -> mlua::Result<Result<usize, String>> {
    let Some(value) = args.get(at).filter(|value| !value.is_nil()) else {
        return Ok(Ok(current));
    };
    let position = at + 1;
    let Some(n) = lua.coerce_number(value.clone())? else {
        return Ok(Err(format!(
            "bad argument #{position} to '{name}' (number expected, got {})",
            type_name(value)
        )));
    };
    // Lua 5.1's lua_tointeger truncates toward zero.
    let n = n.trunc();
    if !(min as f64..=max as f64).contains(&n) {
        return Ok(Err(format!(
            "bad argument #{position} to '{name}' (expected integer between {min} and {max})"
        )));
    }
    Ok(Ok(n as usize))
}

/// lua-cjson's `json_enum_option`: a boolean (false is option 0, true option 1) or the name
/// of one of `options`, if given, else `current`.
fn enum_option(
    lua: &Lua,
    name: &str,
    args: &MultiValue,
    at: usize,
    options: &[&str],
    current: usize,
) -> mlua::Result<Result<usize, String>> {
    let Some(value) = args.get(at).filter(|value| !value.is_nil()) else {
        return Ok(Ok(current));
    };
    let position = at + 1;
    if let Value::Boolean(on) = value {
        return Ok(Ok(usize::from(*on)));
    }
    let Some(text) = lua.coerce_string(value.clone())? else {
        return Ok(Err(format!(
            "bad argument #{position} to '{name}' (string expected, got {})",
            type_name(value)
        )));
    };
    let text = text.as_bytes();
    match options
        .iter()
        .position(|option| option.as_bytes() == &text[..])
    {
        Some(index) => Ok(Ok(index)),
        None => Ok(Err(format!(
            "bad argument #{position} to '{name}' (invalid option '{}')",
            String::from_utf8_lossy(&text)
        ))),
    }
}

// ---------------------------------------------------------------------------------------
// Encoding.

/// `cjson.encode(value)` under `config`: the JSON text, or lua-cjson's error message.
pub fn encode(value: &Value, config: &Config) -> mlua::Result<Result<Vec<u8>, String>> {
    let mut out = Vec::new();
    Ok(append_value(value, 0, config, &mut out)?.map(|()| out))
}

fn type_name(value: &Value) -> &'static str {
    super::bit::lua_type_name(value)
}

fn append_number(value: &Value, n: f64, config: &Config, out: &mut Vec<u8>) -> Result<(), String> {
    if !n.is_finite() {
        match config.encode_invalid_numbers {
            InvalidNumbers::Refuse => {
                return Err(format!(
                    "Cannot serialise {}: must not be NaN or Inf",
                    type_name(value)
                ));
            }
            InvalidNumbers::Null => out.extend_from_slice(b"null"),
            // As C's printf writes them.
            InvalidNumbers::Write if n.is_nan() => out.extend_from_slice(b"nan"),
            InvalidNumbers::Write if n > 0.0 => out.extend_from_slice(b"inf"),
            InvalidNumbers::Write => out.extend_from_slice(b"-inf"),
        }
        return Ok(());
    }
    format_g(n, config.encode_number_precision, out);
    Ok(())
}

fn append_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in bytes {
        match byte {
            b'"' => out.extend_from_slice(b"\\\""),
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'/' => out.extend_from_slice(b"\\/"),
            0x08 => out.extend_from_slice(b"\\b"),
            b'\t' => out.extend_from_slice(b"\\t"),
            b'\n' => out.extend_from_slice(b"\\n"),
            0x0c => out.extend_from_slice(b"\\f"),
            b'\r' => out.extend_from_slice(b"\\r"),
            0..=0x1f | 0x7f => out.extend_from_slice(format!("\\u{byte:04x}").as_bytes()),
            _ => out.push(byte),
        }
    }
    out.push(b'"');
}

fn append_value(
    value: &Value,
    depth: usize,
    config: &Config,
    out: &mut Vec<u8>,
) -> mlua::Result<Result<(), String>> {
    match value {
        Value::String(s) => append_string(&s.as_bytes(), out),
        Value::Integer(i) => return Ok(append_number(value, *i as f64, config, out)),
        Value::Number(n) => return Ok(append_number(value, *n, config, out)),
        Value::Boolean(true) => out.extend_from_slice(b"true"),
        Value::Boolean(false) => out.extend_from_slice(b"false"),
        Value::Nil => out.extend_from_slice(b"null"),
        Value::LightUserData(pointer) if pointer.0.is_null() => out.extend_from_slice(b"null"),
        Value::Table(table) => return append_table(table, depth + 1, config, out),
        other => {
            return Ok(Err(format!(
                "Cannot serialise {}: type not supported",
                type_name(other)
            )));
        }
    }
    Ok(Ok(()))
}

/// The length of `table` as an array, or `None` for an object (lua_array_length).
fn array_length(table: &Table, config: &Config) -> mlua::Result<Result<Option<usize>, String>> {
    let mut max = 0.0f64;
    let mut items = 0.0f64;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let k = match key {
            Value::Integer(i) => i as f64,
            Value::Number(n) => n,
            _ => return Ok(Ok(None)),
        };
        if k == 0.0 || k.floor() != k || k < 1.0 {
            return Ok(Ok(None));
        }
        max = max.max(k);
        items += 1.0;
    }
    let ratio = f64::from(config.encode_sparse_ratio);
    if ratio > 0.0 && max > items * ratio && max > f64::from(config.encode_sparse_safe) {
        if config.encode_sparse_convert {
            return Ok(Ok(None));
        }
        return Ok(Err(
            "Cannot serialise table: excessively sparse array".to_string()
        ));
    }
    Ok(Ok(Some(max as usize)))
}

fn append_table(
    table: &Table,
    depth: usize,
    config: &Config,
    out: &mut Vec<u8>,
) -> mlua::Result<Result<(), String>> {
    if depth > config.encode_max_depth {
        return Ok(Err(format!(
            "Cannot serialise, excessive nesting ({depth})"
        )));
    }
    let length = match array_length(table, config)? {
        Ok(length) => length,
        Err(message) => return Ok(Err(message)),
    };
    if let Some(length) = length.filter(|&length| length > 0) {
        out.push(b'[');
        for index in 1..=length {
            if index > 1 {
                out.push(b',');
            }
            let element: Value = table.raw_get(index)?;
            if let Err(message) = append_value(&element, depth, config, out)? {
                return Ok(Err(message));
            }
        }
        out.push(b']');
        return Ok(Ok(()));
    }
    out.push(b'{');
    let mut first = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, element) = pair?;
        if !first {
            out.push(b',');
        }
        first = false;
        match &key {
            Value::Integer(_) | Value::Number(_) => {
                out.push(b'"');
                let n = match key {
                    Value::Integer(i) => i as f64,
                    Value::Number(n) => n,
                    _ => unreachable!("matched a number"),
                };
                if let Err(message) = append_number(&key, n, config, out) {
                    return Ok(Err(message));
                }
                out.extend_from_slice(b"\":");
            }
            Value::String(s) => {
                append_string(&s.as_bytes(), out);
                out.push(b':');
            }
            other => {
                return Ok(Err(format!(
                    "Cannot serialise {}: table key must be a number or string",
                    type_name(other)
                )));
            }
        }
        if let Err(message) = append_value(&element, depth, config, out)? {
            return Ok(Err(message));
        }
    }
    out.push(b'}');
    Ok(Ok(()))
}

// ---------------------------------------------------------------------------------------
// Decoding.

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TokenKind {
    ObjBegin,
    ObjEnd,
    ArrBegin,
    ArrEnd,
    String,
    Number,
    Boolean,
    Null,
    Colon,
    Comma,
    End,
    Error(&'static str),
}

impl TokenKind {
    fn name(self) -> &'static str {
        match self {
            TokenKind::ObjBegin => "T_OBJ_BEGIN",
            TokenKind::ObjEnd => "T_OBJ_END",
            TokenKind::ArrBegin => "T_ARR_BEGIN",
            TokenKind::ArrEnd => "T_ARR_END",
            TokenKind::String => "T_STRING",
            TokenKind::Number => "T_NUMBER",
            TokenKind::Boolean => "T_BOOLEAN",
            TokenKind::Null => "T_NULL",
            TokenKind::Colon => "T_COLON",
            TokenKind::Comma => "T_COMMA",
            TokenKind::End => "T_END",
            TokenKind::Error(reason) => reason,
        }
    }
}

#[derive(Debug)]
struct Token {
    kind: TokenKind,
    /// Where the token starts (or where its error was found).
    index: usize,
    string: Vec<u8>,
    number: f64,
    boolean: bool,
}

struct Parser<'j> {
    /// The text up to its first NUL, which ends it for lua-cjson (a C string).
    data: &'j [u8],
    at: usize,
    depth: usize,
    config: &'j Config,
}

/// `cjson.decode(text)` under `config`: the value, or lua-cjson's error message.
pub fn decode(lua: &Lua, text: &[u8], config: &Config) -> mlua::Result<Result<Value, String>> {
    if text.len() >= 2 && (text[0] == 0 || text[1] == 0) {
        return Ok(Err(
            "JSON parser does not support UTF-16 or UTF-32".to_string()
        ));
    }
    let end = text.iter().position(|&b| b == 0).unwrap_or(text.len());
    let mut parser = Parser {
        data: &text[..end],
        at: 0,
        depth: 0,
        config,
    };
    let token = parser.next_token();
    let value = match parser.value(lua, token)? {
        Ok(value) => value,
        Err(message) => return Ok(Err(message)),
    };
    let token = parser.next_token();
    if token.kind != TokenKind::End {
        return Ok(Err(parse_error("the end", &token)));
    }
    Ok(Ok(value))
}

fn parse_error(expected: &str, token: &Token) -> String {
    format!(
        "Expected {expected} but found {} at character {}",
        token.kind.name(),
        token.index + 1
    )
}

impl Parser<'_> {
    fn peek(&self, offset: usize) -> u8 {
        self.data.get(self.at + offset).copied().unwrap_or(0)
    }

    fn token(&self, kind: TokenKind, index: usize) -> Token {
        Token {
            kind,
            index,
            string: Vec::new(),
            number: 0.0,
            boolean: false,
        }
    }

    fn next_token(&mut self) -> Token {
        while matches!(self.peek(0), b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
        let index = self.at;
        let simple = match self.peek(0) {
            b'{' => Some(TokenKind::ObjBegin),
            b'}' => Some(TokenKind::ObjEnd),
            b'[' => Some(TokenKind::ArrBegin),
            b']' => Some(TokenKind::ArrEnd),
            b',' => Some(TokenKind::Comma),
            b':' => Some(TokenKind::Colon),
            _ => None,
        };
        if let Some(kind) = simple {
            self.at += 1;
            return self.token(kind, index);
        }
        let rest = &self.data[self.at..];
        match self.peek(0) {
            0 => self.token(TokenKind::End, index),
            b'"' => self.string_token(),
            b'-' | b'0'..=b'9'
                if !self.config.decode_invalid_numbers && is_invalid_number(rest) =>
            {
                self.token(TokenKind::Error("invalid number"), index)
            }
            b'-' | b'0'..=b'9' => self.number_token(),
            b't' if rest.starts_with(b"true") => {
                self.at += 4;
                let mut token = self.token(TokenKind::Boolean, index);
                token.boolean = true;
                token
            }
            b'f' if rest.starts_with(b"false") => {
                self.at += 5;
                self.token(TokenKind::Boolean, index)
            }
            b'n' if rest.starts_with(b"null") => {
                self.at += 4;
                self.token(TokenKind::Null, index)
            }
            // What only lua-cjson's invalid numbers start with (`+`, `inf`, `nan`).
            _ if self.config.decode_invalid_numbers && is_invalid_number(rest) => {
                self.number_token()
            }
            _ => self.token(TokenKind::Error("invalid token"), index),
        }
    }

    fn number_token(&mut self) -> Token {
        let index = self.at;
        match scan_number(&self.data[self.at..]) {
            Some((number, used)) => {
                self.at += used;
                let mut token = self.token(TokenKind::Number, index);
                token.number = number;
                token
            }
            None => self.token(TokenKind::Error("invalid number"), index),
        }
    }

    fn string_token(&mut self) -> Token {
        let index = self.at;
        self.at += 1;
        let mut string = Vec::new();
        loop {
            let ch = self.peek(0);
            match ch {
                b'"' => break,
                0 => return self.token(TokenKind::Error("unexpected end of string"), self.at),
                b'\\' => {
                    let escaped = match self.peek(1) {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 0x08,
                        b'f' => 0x0c,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'u' => {
                            if self.unicode_escape(&mut string) {
                                continue;
                            }
                            return self
                                .token(TokenKind::Error("invalid unicode escape code"), self.at);
                        }
                        _ => return self.token(TokenKind::Error("invalid escape code"), self.at),
                    };
                    string.push(escaped);
                    self.at += 2;
                }
                _ => {
                    string.push(ch);
                    self.at += 1;
                }
            }
        }
        self.at += 1;
        let mut token = self.token(TokenKind::String, index);
        token.string = string;
        token
    }

    fn hex4(&self, offset: usize) -> Option<u32> {
        let mut value = 0;
        for i in 0..4 {
            let digit = char::from(self.peek(offset + i)).to_digit(16)?;
            value = (value << 4) | digit;
        }
        Some(value)
    }

    /// Decodes `\uXXXX` (or a surrogate pair) at the cursor into UTF-8; false if invalid.
    fn unicode_escape(&mut self, out: &mut Vec<u8>) -> bool {
        let Some(mut codepoint) = self.hex4(2) else {
            return false;
        };
        let mut escape_len = 6;
        if codepoint & 0xF800 == 0xD800 {
            if codepoint & 0x400 != 0 || self.peek(6) != b'\\' || self.peek(7) != b'u' {
                return false;
            }
            let Some(low) = self.hex4(8) else {
                return false;
            };
            if low & 0xFC00 != 0xDC00 {
                return false;
            }
            codepoint = (((codepoint & 0x3FF) << 10) | (low & 0x3FF)) + 0x10000;
            escape_len = 12;
        }
        // lua-cjson writes the UTF-8 bytes of any code point up to 0x1FFFFF itself.
        if codepoint <= 0x7F {
            out.push(codepoint as u8);
        } else if codepoint <= 0x7FF {
            out.extend_from_slice(&[
                (codepoint >> 6) as u8 | 0xC0,
                (codepoint & 0x3F) as u8 | 0x80,
            ]);
        } else if codepoint <= 0xFFFF {
            out.extend_from_slice(&[
                (codepoint >> 12) as u8 | 0xE0,
                ((codepoint >> 6) & 0x3F) as u8 | 0x80,
                (codepoint & 0x3F) as u8 | 0x80,
            ]);
        } else {
            out.extend_from_slice(&[
                (codepoint >> 18) as u8 | 0xF0,
                ((codepoint >> 12) & 0x3F) as u8 | 0x80,
                ((codepoint >> 6) & 0x3F) as u8 | 0x80,
                (codepoint & 0x3F) as u8 | 0x80,
            ]);
        }
        self.at += escape_len;
        true
    }

    fn descend(&mut self) -> Result<(), String> {
        self.depth += 1;
        if self.depth > self.config.decode_max_depth {
            return Err(format!(
                "Found too many nested data structures ({}) at character {}",
                self.depth, self.at
            ));
        }
        Ok(())
    }

    fn value(&mut self, lua: &Lua, token: Token) -> mlua::Result<Result<Value, String>> {
        Ok(Ok(match token.kind {
            TokenKind::String => Value::String(lua.create_string(&token.string)?),
            TokenKind::Number => Value::Number(token.number),
            TokenKind::Boolean => Value::Boolean(token.boolean),
            TokenKind::Null => null(),
            TokenKind::ObjBegin => return self.object(lua),
            TokenKind::ArrBegin => return self.array(lua),
            _ => return Ok(Err(parse_error("value", &token))),
        }))
    }

    fn object(&mut self, lua: &Lua) -> mlua::Result<Result<Value, String>> {
        if let Err(message) = self.descend() {
            return Ok(Err(message));
        }
        let table = lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == TokenKind::ObjEnd {
            self.depth -= 1;
            return Ok(Ok(Value::Table(table)));
        }
        loop {
            if token.kind != TokenKind::String {
                return Ok(Err(parse_error("object key string", &token)));
            }
            let key = lua.create_string(&token.string)?;
            let colon = self.next_token();
            if colon.kind != TokenKind::Colon {
                return Ok(Err(parse_error("colon", &colon)));
            }
            let next = self.next_token();
            match self.value(lua, next)? {
                Ok(value) => table.raw_set(key, value)?,
                Err(message) => return Ok(Err(message)),
            }
            token = self.next_token();
            if token.kind == TokenKind::ObjEnd {
                self.depth -= 1;
                return Ok(Ok(Value::Table(table)));
            }
            if token.kind != TokenKind::Comma {
                return Ok(Err(parse_error("comma or object end", &token)));
            }
            token = self.next_token();
        }
    }

    fn array(&mut self, lua: &Lua) -> mlua::Result<Result<Value, String>> {
        if let Err(message) = self.descend() {
            return Ok(Err(message));
        }
        let table = lua.create_table()?;
        let mut token = self.next_token();
        if token.kind == TokenKind::ArrEnd {
            self.depth -= 1;
            return Ok(Ok(Value::Table(table)));
        }
        for index in 1.. {
            match self.value(lua, token)? {
                Ok(value) => table.raw_set(index, value)?,
                Err(message) => return Ok(Err(message)),
            }
            token = self.next_token();
            if token.kind == TokenKind::ArrEnd {
                self.depth -= 1;
                return Ok(Ok(Value::Table(table)));
            }
            if token.kind != TokenKind::Comma {
                return Ok(Err(parse_error("comma or array end", &token)));
            }
            token = self.next_token();
        }
        unreachable!("the loop returns")
    }
}

/// Whether the number at the start of `text` is one only `decode_invalid_numbers` reads
/// (lua-cjson's `json_is_invalid_number`): a leading `+`, hexadecimal, a leading zero before a
/// digit, `inf` or `nan`.
fn is_invalid_number(text: &[u8]) -> bool {
    let rest = match text {
        [b'+', ..] => return true,
        [b'-', rest @ ..] => rest,
        rest => rest,
    };
    match rest {
        [b'0', next, ..] => next | 0x20 == b'x' || next.is_ascii_digit(),
        [first, ..] if *first <= b'9' => false,
        _ => {
            rest.len() >= 3
                && (rest[..3].eq_ignore_ascii_case(b"inf")
                    || rest[..3].eq_ignore_ascii_case(b"nan"))
        }
    }
}

/// The number at the start of `text` as C's `strtod` reads it (decimal, hexadecimal, `inf`,
/// `infinity`, `nan`), and the bytes it took; `None` if no number starts there.
fn scan_number(text: &[u8]) -> Option<(f64, usize)> {
    let mut at = 0;
    let negative = match text.first() {
        Some(b'-') => {
            at += 1;
            true
        }
        Some(b'+') => {
            at += 1;
            false
        }
        _ => false,
    };
    let sign = if negative { -1.0 } else { 1.0 };
    let rest = &text[at..];
    let starts =
        |word: &[u8]| rest.len() >= word.len() && rest[..word.len()].eq_ignore_ascii_case(word);
    if starts(b"infinity") {
        return Some((sign * f64::INFINITY, at + 8));
    }
    if starts(b"inf") {
        return Some((sign * f64::INFINITY, at + 3));
    }
    if starts(b"nan") {
        return Some((f64::NAN, at + 3));
    }
    if (starts(b"0x")) && rest.get(2).is_some_and(u8::is_ascii_hexdigit) {
        let digits = rest[2..]
            .iter()
            .take_while(|b| b.is_ascii_hexdigit())
            .count();
        let mut value = 0.0f64;
        for &digit in &rest[2..2 + digits] {
            value = value * 16.0 + f64::from(char::from(digit).to_digit(16).unwrap_or(0));
        }
        return Some((sign * value, at + 2 + digits));
    }
    let digits = |from: usize| {
        text[from..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let integer = digits(at);
    let mut end = at + integer;
    let mut fraction = 0;
    if text.get(end) == Some(&b'.') {
        fraction = digits(end + 1);
        if integer + fraction > 0 {
            end += 1 + fraction;
        }
    }
    if integer + fraction == 0 {
        return None;
    }
    if matches!(text.get(end), Some(b'e' | b'E')) {
        let mut exp_at = end + 1;
        if matches!(text.get(exp_at), Some(b'+' | b'-')) {
            exp_at += 1;
        }
        let exponent_digits = digits(exp_at);
        if exponent_digits > 0 {
            end = exp_at + exponent_digits;
        }
    }
    let literal = std::str::from_utf8(&text[..end]).ok()?;
    let literal = literal.strip_prefix('+').unwrap_or(literal);
    let normalized = if literal.ends_with('.') {
        format!("{literal}0")
    } else {
        literal.replace("-.", "-0.")
    };
    let normalized = if normalized.starts_with('.') {
        format!("0{normalized}")
    } else {
        normalized
    };
    normalized.parse::<f64>().ok().map(|value| (value, end))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(d: f64) -> String {
        let mut out = Vec::new();
        format_g(d, 14, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn numbers_print_as_percent_fourteen_g() {
        assert_eq!(g(3.0), "3");
        assert_eq!(g(0.1), "0.1");
        assert_eq!(g(-0.5), "-0.5");
        assert_eq!(g(1e20), "1e+20");
        assert_eq!(g(123_456_789_012_345.0), "1.2345678901234e+14");
        assert_eq!(g(9_007_199_254_740_992.0), "9.007199254741e+15");
        assert_eq!(g(0.0001), "0.0001");
        assert_eq!(g(0.00001), "1e-05");
        assert_eq!(g(12_345_678_901_234.0), "12345678901234");
    }

    #[test]
    fn numbers_scan_as_strtod() {
        assert_eq!(scan_number(b"1.5e3,"), Some((1500.0, 5)));
        assert_eq!(scan_number(b"-0]"), Some((-0.0, 2)));
        assert_eq!(scan_number(b"01"), Some((1.0, 2)));
        assert_eq!(scan_number(b"1."), Some((1.0, 2)));
        assert_eq!(scan_number(b"0x10"), Some((16.0, 4)));
        assert_eq!(scan_number(b"-"), None);
        assert_eq!(scan_number(b"1e"), Some((1.0, 1)));
    }
}
