//! The `cmsgpack` library Redis embeds (lua_cmsgpack.c), written over the Lua values:
//! `pack`, `unpack`, `unpack_one`, `unpack_limit`, byte for byte as Redis's.
//!
//! Packing: a number equal to a 64-bit integer is the smallest integer encoding, any other
//! a float32 if exact, else a float64; a string is a str (fixstr, str8/16/32); a table whose
//! keys are exactly 1..n is an array, any other a map; nil and anything else are nil;
//! tables nested deeper than 16 pack as nil (so a table that contains itself packs).
//!
//! Unpacking is iterative and keeps lua_cmsgpack's account of Lua's stack, so it accepts
//! and refuses what Redis does, with its messages, and no input costs the thread's stack.

use mlua::{Lua, Table, Value};

/// Tables nested deeper than this pack as nil (LUACMSGPACK_MAX_NESTING).
const NESTING_MAX: usize = 16;

/// `cmsgpack.pack(...)`: every value packed, one after the other.
pub fn pack(values: &[Value]) -> mlua::Result<Vec<u8>> {
    let mut out = Vec::new();
    for value in values {
        pack_value(value, 0, &mut out)?;
    }
    Ok(out)
}

fn pack_value(value: &Value, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    match value {
        Value::String(s) => pack_bytes(&s.as_bytes(), out),
        Value::Boolean(b) => out.push(if *b { 0xc3 } else { 0xc2 }),
        Value::Integer(i) => pack_number(*i as f64, out),
        Value::Number(n) => pack_number(*n, out),
        Value::Table(table) if level < NESTING_MAX => pack_table(table, level, out)?,
        _ => out.push(0xc0),
    }
    Ok(())
}

fn pack_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    let len = bytes.len();
    if len < 32 {
        out.push(0xa0 | len as u8);
    } else if len <= 0xff {
        out.extend_from_slice(&[0xd9, len as u8]);
    } else if len <= 0xffff {
        out.push(0xda);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(0xdb);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
    out.extend_from_slice(bytes);
}

fn pack_number(n: f64, out: &mut Vec<u8>) {
    const TWO_63: f64 = 9_223_372_036_854_775_808.0;
    if n.is_finite() && n.fract() == 0.0 && (-TWO_63..TWO_63).contains(&n) {
        pack_int(n as i64, out);
    } else if f64::from(n as f32) == n {
        out.push(0xca);
        out.extend_from_slice(&(n as f32).to_be_bytes());
    } else {
        out.push(0xcb);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

fn pack_int(n: i64, out: &mut Vec<u8>) {
    if n >= 0 {
        if n <= 127 {
            out.push(n as u8);
        } else if n <= 0xff {
            out.extend_from_slice(&[0xcc, n as u8]);
        } else if n <= 0xffff {
            out.push(0xcd);
            out.extend_from_slice(&(n as u16).to_be_bytes());
        } else if n <= 0xffff_ffff {
            out.push(0xce);
            out.extend_from_slice(&(n as u32).to_be_bytes());
        } else {
            out.push(0xcf);
            out.extend_from_slice(&(n as u64).to_be_bytes());
        }
    } else if n >= -32 {
        out.push(n as i8 as u8);
    } else if n >= -128 {
        out.extend_from_slice(&[0xd0, n as i8 as u8]);
    } else if n >= -32768 {
        out.push(0xd1);
        out.extend_from_slice(&(n as i16).to_be_bytes());
    } else if n >= -2_147_483_648 {
        out.push(0xd2);
        out.extend_from_slice(&(n as i32).to_be_bytes());
    } else {
        out.push(0xd3);
        out.extend_from_slice(&n.to_be_bytes());
    }
}

/// Packs a table as an array or a map. The table is walked twice, to classify it and then
/// to pack it, one pair at a time: mlua keeps every Lua value Rust holds in a stack of about
/// 8,000 slots, which a large table's pairs held at once would fill.
fn pack_table(table: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut count = 0u64;
    let mut max = 0.0f64;
    let mut is_array = true;
    for pair in table.pairs::<Value, Value>() {
        let (key, _) = pair?;
        let index = match &key {
            Value::Integer(i) => Some(*i as f64),
            Value::Number(n) => Some(*n),
            _ => None,
        };
        match index {
            Some(n) if n > 0.0 && n.fract() == 0.0 && n <= f64::from(i32::MAX) => max = max.max(n),
            _ => is_array = false,
        }
        count += 1;
    }
    if is_array && max == count as f64 {
        pack_header(0x90, 0xdc, count, out);
        for index in 1..=count {
            let element: Value = table.get(index)?;
            pack_value(&element, level + 1, out)?;
        }
    } else {
        pack_header(0x80, 0xde, count, out);
        for pair in table.pairs::<Value, Value>() {
            let (key, value) = pair?;
            pack_value(&key, level + 1, out)?;
            pack_value(&value, level + 1, out)?;
        }
    }
    Ok(())
}

/// An array's or a map's header: the fix form below 16, else the 16-bit or 32-bit one.
fn pack_header(fix: u8, wide16: u8, len: u64, out: &mut Vec<u8>) {
    if len <= 15 {
        out.push(fix | len as u8);
    } else if len <= 0xffff {
        out.push(wide16);
        out.extend_from_slice(&(len as u16).to_be_bytes());
    } else {
        out.push(wide16 + 1);
        out.extend_from_slice(&(len as u32).to_be_bytes());
    }
}

/// Lua stack slots a C function may fill (Lua 5.1's `LUAI_MAXCSTACK`). lua_cmsgpack has no
/// nesting limit of its own: it checks for one free slot before each value it pushes and
/// after each array it opens, so Redis refuses input once the values it holds at once fill
/// these slots. Each level of nesting holds two (the table and an array index or a map key),
/// so Redis accepts 3,999 nested arrays or maps and refuses the 4,000th. This decoder keeps
/// the same account and raises the same errors; it is iterative, so no input, however deep,
/// costs the thread's stack more than a flat one.
const LUA_STACK_SLOTS: usize = 8000;

/// lua_cmsgpack's message when a value finds no free slot.
const NO_SLOT_FOR_VALUE: &str = "stack overflow (too many return values at once; use unpack_one or \
                                 unpack_limit instead.)";
/// lua_cmsgpack's message when an array, once opened, leaves no slot for its elements.
const NO_SLOT_IN_ARRAY: &str = "stack overflow (in function mp_decode_to_lua_array)";
/// lua_cmsgpack's message when no slot is left for the offset `unpack_one`/`unpack_limit`
/// return.
const NO_SLOT_FOR_OFFSET: &str = "stack overflow (in function mp_unpack_full)";

/// Why an unpack stopped.
enum Bad {
    Eof,
    Format,
    /// The Lua stack Redis would decode on is full: lua_cmsgpack's message.
    StackFull(&'static str),
    /// Lua refused to make a value (the memory budget).
    Lua(mlua::Error),
}

impl From<mlua::Error> for Bad {
    fn from(err: mlua::Error) -> Bad {
        Bad::Lua(err)
    }
}

struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl<'b> Cursor<'b> {
    fn take(&mut self, n: usize) -> Result<&'b [u8], Bad> {
        let end = self.at.checked_add(n).ok_or(Bad::Eof)?;
        let slice = self.bytes.get(self.at..end).ok_or(Bad::Eof)?;
        self.at = end;
        Ok(slice)
    }

    fn number<const N: usize>(&mut self) -> Result<[u8; N], Bad> {
        Ok(self.take(N)?.try_into().expect("took N bytes"))
    }
}

/// What an unpack gives: the values, and the offset after them when one was asked for.
pub type Unpacked = (Vec<Value>, Option<i64>);

/// `cmsgpack.unpack`, `unpack_one` and `unpack_limit`: up to `limit` values (all if 0)
/// from byte `offset`, and the offset after them (-1 at the end) when a limit or an offset
/// was given; or lua_cmsgpack's error message. `slots_taken` is how many Lua stack slots
/// Redis's function holds when it starts decoding: the arguments `unpack` was given, or the
/// one string `unpack_one` and `unpack_limit` keep.
pub fn unpack(
    lua: &Lua,
    bytes: &[u8],
    limit: i64,
    offset: i64,
    slots_taken: usize,
) -> mlua::Result<Result<Unpacked, String>> {
    let decode_all = limit == 0 && offset == 0;
    if offset < 0 || limit < 0 {
        return Ok(Err(format!(
            "Invalid request to unpack with offset of {offset} and limit of {}.",
            bytes.len()
        )));
    }
    if offset as u64 > bytes.len() as u64 {
        return Ok(Err(format!(
            "Start offset {offset} greater than input length {}.",
            bytes.len()
        )));
    }
    let limit = if decode_all { i64::MAX } else { limit };
    let mut cursor = Cursor {
        bytes,
        at: offset as usize,
    };
    let mut values = Vec::new();
    while cursor.at < bytes.len() && (values.len() as i64) < limit {
        // Every value decoded so far stays on the stack until the function returns.
        match unpack_value(lua, &mut cursor, slots_taken + values.len()) {
            Ok(value) => values.push(value),
            Err(bad) => return bad_input(bad),
        }
    }
    if decode_all {
        return Ok(Ok((values, None)));
    }
    if slots_taken + values.len() + 1 > LUA_STACK_SLOTS {
        return Ok(Err(NO_SLOT_FOR_OFFSET.to_string()));
    }
    let next = if cursor.at == bytes.len() {
        -1
    } else {
        cursor.at as i64
    };
    Ok(Ok((values, Some(next))))
}

/// lua_cmsgpack's message for input it refuses, or the Lua error that stopped the decoding.
fn bad_input(bad: Bad) -> mlua::Result<Result<Unpacked, String>> {
    match bad {
        Bad::Eof => Ok(Err("Missing bytes in input.".to_string())),
        Bad::Format => Ok(Err("Bad data format in input.".to_string())),
        Bad::StackFull(message) => Ok(Err(message.to_string())),
        Bad::Lua(err) => Err(err),
    }
}

/// An array or a map whose elements are still being read.
struct Open<'b> {
    table: Table,
    /// Elements (of an array) or pairs (of a map) still to read.
    remaining: usize,
    /// How many Lua stack slots are taken while the next element is read.
    slots: usize,
    shape: Shape<'b>,
}

enum Shape<'b> {
    /// An array; `next` is the index of the element read next.
    Array { next: usize },
    /// A map; `key` holds a pair's key while its value is read.
    Map { key: Option<Decoded<'b>> },
}

/// A decoded value. A string stays the input's bytes until it is stored: mlua holds every
/// Lua value Rust keeps in a stack of its own, of about 8,000 slots, and the keys of maps
/// nested 3,999 deep would otherwise fill it alongside their tables.
enum Decoded<'b> {
    Lua(Value),
    Bytes(&'b [u8]),
}

impl Decoded<'_> {
    fn into_lua(self, lua: &Lua) -> mlua::Result<Value> {
        match self {
            Decoded::Lua(value) => Ok(value),
            Decoded::Bytes(bytes) => lua.create_string(bytes).map(Value::String),
        }
    }
}

/// What one header gave: a whole value, or an aggregate whose elements follow.
enum Item<'b> {
    Whole(Decoded<'b>),
    Array(usize),
    Map(usize),
}

/// One value and everything nested in it, read with an explicit stack of the aggregates
/// still open. `slots` is how many Lua stack slots Redis holds before pushing it.
fn unpack_value(lua: &Lua, cursor: &mut Cursor<'_>, slots: usize) -> Result<Value, Bad> {
    let mut open: Vec<Open<'_>> = Vec::new();
    loop {
        let slots_now = open.last().map_or(slots, |top| top.slots);
        let mut decoded = match unpack_item(cursor, slots_now)? {
            Item::Whole(decoded) => decoded,
            Item::Array(len) => {
                let table = lua.create_table()?;
                // The table takes a slot, and lua_cmsgpack asks for one more before it
                // reads the first element (even of an empty array).
                if slots_now + 2 > LUA_STACK_SLOTS {
                    return Err(Bad::StackFull(NO_SLOT_IN_ARRAY));
                }
                let shape = Shape::Array { next: 1 };
                match open_aggregate(&mut open, table, len, slots_now + 2, shape) {
                    Some(finished) => finished,
                    None => continue,
                }
            }
            Item::Map(len) => {
                let table = lua.create_table()?;
                let shape = Shape::Map { key: None };
                match open_aggregate(&mut open, table, len, slots_now + 1, shape) {
                    Some(finished) => finished,
                    None => continue,
                }
            }
        };
        // Hand the value to the aggregate it belongs to, closing every one it completes.
        loop {
            let Some(top) = open.last_mut() else {
                return Ok(decoded.into_lua(lua)?);
            };
            store(lua, top, decoded)?;
            match close_finished(&mut open) {
                Some(finished) => decoded = finished,
                None => break,
            }
        }
    }
}

/// Opens an aggregate whose elements follow, or gives it back whole if it has none.
fn open_aggregate<'b>(
    open: &mut Vec<Open<'b>>,
    table: Table,
    remaining: usize,
    slots: usize,
    shape: Shape<'b>,
) -> Option<Decoded<'b>> {
    open.push(Open {
        table,
        remaining,
        slots,
        shape,
    });
    close_finished(open)
}

/// Puts `decoded` in `open`: an array's next element, a map's next key or value.
fn store<'b>(lua: &Lua, open: &mut Open<'b>, decoded: Decoded<'b>) -> Result<(), Bad> {
    match &mut open.shape {
        Shape::Array { next } => {
            open.table.raw_set(*next, decoded.into_lua(lua)?)?;
            *next += 1;
            open.remaining -= 1;
        }
        Shape::Map { key } => match key.take() {
            None => {
                *key = Some(decoded);
                // The key holds a slot while the value is read.
                open.slots += 1;
            }
            Some(key) => {
                // lua_cmsgpack's settable raises Lua's own error for a key no table takes.
                match &key {
                    Decoded::Lua(Value::Nil) => {
                        return Err(mlua::Error::runtime("table index is nil").into());
                    }
                    Decoded::Lua(Value::Number(n)) if n.is_nan() => {
                        return Err(mlua::Error::runtime("table index is NaN").into());
                    }
                    _ => open
                        .table
                        .raw_set(key.into_lua(lua)?, decoded.into_lua(lua)?)?,
                }
                open.slots -= 1;
                open.remaining -= 1;
            }
        },
    }
    Ok(())
}

/// The innermost open aggregate, taken off the stack, if it has all its elements.
fn close_finished<'b>(open: &mut Vec<Open<'b>>) -> Option<Decoded<'b>> {
    if open.last()?.remaining > 0 {
        return None;
    }
    open.pop()
        .map(|finished| Decoded::Lua(Value::Table(finished.table)))
}

/// One header and, for a scalar, its value. `slots` is how many Lua stack slots are taken:
/// lua_cmsgpack wants one free before it reads anything but the first byte.
fn unpack_item<'b>(cursor: &mut Cursor<'b>, slots: usize) -> Result<Item<'b>, Bad> {
    let first = cursor.number::<1>()?[0];
    if slots + 1 > LUA_STACK_SLOTS {
        return Err(Bad::StackFull(NO_SLOT_FOR_VALUE));
    }
    let number = |n: f64| Ok(Item::Whole(Decoded::Lua(Value::Number(n))));
    let whole = |value: Value| Ok(Item::Whole(Decoded::Lua(value)));
    match first {
        0xcc => number(f64::from(cursor.number::<1>()?[0])),
        0xd0 => number(f64::from(cursor.number::<1>()?[0] as i8)),
        0xcd => number(f64::from(u16::from_be_bytes(cursor.number()?))),
        0xd1 => number(f64::from(i16::from_be_bytes(cursor.number()?))),
        0xce => number(f64::from(u32::from_be_bytes(cursor.number()?))),
        0xd2 => number(f64::from(i32::from_be_bytes(cursor.number()?))),
        0xcf => number(u64::from_be_bytes(cursor.number()?) as f64),
        0xd3 => number(i64::from_be_bytes(cursor.number()?) as f64),
        0xc0 => whole(Value::Nil),
        0xc3 => whole(Value::Boolean(true)),
        0xc2 => whole(Value::Boolean(false)),
        0xca => number(f64::from(f32::from_be_bytes(cursor.number()?))),
        0xcb => number(f64::from_be_bytes(cursor.number()?)),
        0xd9 => {
            let len = usize::from(cursor.number::<1>()?[0]);
            Ok(Item::Whole(Decoded::Bytes(cursor.take(len)?)))
        }
        0xda => {
            let len = usize::from(u16::from_be_bytes(cursor.number()?));
            Ok(Item::Whole(Decoded::Bytes(cursor.take(len)?)))
        }
        0xdb => {
            let len = u32::from_be_bytes(cursor.number()?) as usize;
            Ok(Item::Whole(Decoded::Bytes(cursor.take(len)?)))
        }
        0xdc => Ok(Item::Array(usize::from(u16::from_be_bytes(
            cursor.number()?,
        )))),
        0xdd => Ok(Item::Array(u32::from_be_bytes(cursor.number()?) as usize)),
        0xde => Ok(Item::Map(usize::from(u16::from_be_bytes(cursor.number()?)))),
        0xdf => Ok(Item::Map(u32::from_be_bytes(cursor.number()?) as usize)),
        _ if first & 0x80 == 0 => number(f64::from(first)),
        _ if first & 0xe0 == 0xe0 => number(f64::from(first as i8)),
        _ if first & 0xe0 == 0xa0 => {
            let len = usize::from(first & 0x1f);
            Ok(Item::Whole(Decoded::Bytes(cursor.take(len)?)))
        }
        _ if first & 0xf0 == 0x90 => Ok(Item::Array(usize::from(first & 0xf))),
        _ if first & 0xf0 == 0x80 => Ok(Item::Map(usize::from(first & 0xf))),
        _ => Err(Bad::Format),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn packed_int(n: i64) -> Vec<u8> {
        let mut out = Vec::new();
        pack_number(n as f64, &mut out);
        out
    }

    #[test]
    fn integers_take_the_smallest_encoding() {
        assert_eq!(packed_int(5), [0x05]);
        assert_eq!(packed_int(-1), [0xff]);
        assert_eq!(packed_int(200), [0xcc, 200]);
        assert_eq!(packed_int(-100), [0xd0, 0x9c]);
        assert_eq!(packed_int(65_535), [0xcd, 0xff, 0xff]);
        assert_eq!(packed_int(1 << 40), [0xcf, 0, 0, 1, 0, 0, 0, 0, 0]);
        let mut out = Vec::new();
        pack_number(0.5, &mut out);
        assert_eq!(out, [0xca, 0x3f, 0x00, 0x00, 0x00]);
        out.clear();
        pack_number(0.1, &mut out);
        assert_eq!(out[0], 0xcb);
    }
}
