//! The `cmsgpack` library Redis embeds (lua_cmsgpack.c), written over the Lua values:
//! `pack`, `unpack`, `unpack_one`, `unpack_limit`, byte for byte as Redis's.
//!
//! Packing: a number equal to a 64-bit integer is the smallest integer encoding, any other
//! a float32 if exact, else a float64; a string is a str (fixstr, str8/16/32); a table whose
//! keys are exactly 1..n is an array, any other a map; nil and anything else are nil;
//! tables nested deeper than 16 pack as nil (so a table that contains itself packs).

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

fn pack_table(table: &Table, level: usize, out: &mut Vec<u8>) -> mlua::Result<()> {
    let mut count = 0u64;
    let mut max = 0.0f64;
    let mut is_array = true;
    let mut pairs = Vec::new();
    for pair in table.pairs::<Value, Value>() {
        let (key, value) = pair?;
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
        pairs.push((key, value));
    }
    if is_array && max == count as f64 {
        pack_header(0x90, 0xdc, count, out);
        for index in 1..=count {
            let element: Value = table.get(index)?;
            pack_value(&element, level + 1, out)?;
        }
    } else {
        pack_header(0x80, 0xde, count, out);
        for (key, value) in &pairs {
            pack_value(key, level + 1, out)?;
            pack_value(value, level + 1, out)?;
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

/// Why an unpack stopped.
enum Bad {
    Eof,
    Format,
}

struct Cursor<'b> {
    bytes: &'b [u8],
    at: usize,
}

impl Cursor<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], Bad> {
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
/// was given; or lua_cmsgpack's error message.
pub fn unpack(
    lua: &Lua,
    bytes: &[u8],
    limit: i64,
    offset: i64,
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
        match unpack_value(lua, &mut cursor) {
            Ok(value) => values.push(value?),
            Err(Bad::Eof) => return Ok(Err("Missing bytes in input.".to_string())),
            Err(Bad::Format) => return Ok(Err("Bad data format in input.".to_string())),
        }
    }
    let next = (!decode_all).then_some(if cursor.at == bytes.len() {
        -1
    } else {
        cursor.at as i64
    });
    Ok(Ok((values, next)))
}

fn unpack_value(lua: &Lua, cursor: &mut Cursor<'_>) -> Result<mlua::Result<Value>, Bad> {
    let first = cursor.number::<1>()?[0];
    let number = |n: f64| Ok(Ok(Value::Number(n)));
    match first {
        0xcc => number(f64::from(cursor.number::<1>()?[0])),
        0xd0 => number(f64::from(cursor.number::<1>()?[0] as i8)),
        0xcd => number(f64::from(u16::from_be_bytes(cursor.number()?))),
        0xd1 => number(f64::from(i16::from_be_bytes(cursor.number()?))),
        0xce => number(f64::from(u32::from_be_bytes(cursor.number()?))),
        0xd2 => number(f64::from(i32::from_be_bytes(cursor.number()?))),
        0xcf => number(u64::from_be_bytes(cursor.number()?) as f64),
        0xd3 => number(i64::from_be_bytes(cursor.number()?) as f64),
        0xc0 => Ok(Ok(Value::Nil)),
        0xc3 => Ok(Ok(Value::Boolean(true))),
        0xc2 => Ok(Ok(Value::Boolean(false))),
        0xca => number(f64::from(f32::from_be_bytes(cursor.number()?))),
        0xcb => number(f64::from_be_bytes(cursor.number()?)),
        0xd9 => {
            let len = usize::from(cursor.number::<1>()?[0]);
            Ok(lua.create_string(cursor.take(len)?).map(Value::String))
        }
        0xda => {
            let len = usize::from(u16::from_be_bytes(cursor.number()?));
            Ok(lua.create_string(cursor.take(len)?).map(Value::String))
        }
        0xdb => {
            let len = u32::from_be_bytes(cursor.number()?) as usize;
            Ok(lua.create_string(cursor.take(len)?).map(Value::String))
        }
        0xdc => {
            let len = usize::from(u16::from_be_bytes(cursor.number()?));
            unpack_array(lua, cursor, len)
        }
        0xdd => {
            let len = u32::from_be_bytes(cursor.number()?) as usize;
            unpack_array(lua, cursor, len)
        }
        0xde => {
            let len = usize::from(u16::from_be_bytes(cursor.number()?));
            unpack_map(lua, cursor, len)
        }
        0xdf => {
            let len = u32::from_be_bytes(cursor.number()?) as usize;
            unpack_map(lua, cursor, len)
        }
        _ if first & 0x80 == 0 => number(f64::from(first)),
        _ if first & 0xe0 == 0xe0 => number(f64::from(first as i8)),
        _ if first & 0xe0 == 0xa0 => {
            let len = usize::from(first & 0x1f);
            Ok(lua.create_string(cursor.take(len)?).map(Value::String))
        }
        _ if first & 0xf0 == 0x90 => unpack_array(lua, cursor, usize::from(first & 0xf)),
        _ if first & 0xf0 == 0x80 => unpack_map(lua, cursor, usize::from(first & 0xf)),
        _ => Err(Bad::Format),
    }
}

fn unpack_array(
    lua: &Lua,
    cursor: &mut Cursor<'_>,
    len: usize,
) -> Result<mlua::Result<Value>, Bad> {
    let table = match lua.create_table() {
        Ok(table) => table,
        Err(err) => return Ok(Err(err)),
    };
    for index in 1..=len {
        let value = match unpack_value(lua, cursor)? {
            Ok(value) => value,
            Err(err) => return Ok(Err(err)),
        };
        if let Err(err) = table.raw_set(index, value) {
            return Ok(Err(err));
        }
    }
    Ok(Ok(Value::Table(table)))
}

fn unpack_map(lua: &Lua, cursor: &mut Cursor<'_>, len: usize) -> Result<mlua::Result<Value>, Bad> {
    let table = match lua.create_table() {
        Ok(table) => table,
        Err(err) => return Ok(Err(err)),
    };
    for _ in 0..len {
        let key = match unpack_value(lua, cursor)? {
            Ok(key) => key,
            Err(err) => return Ok(Err(err)),
        };
        let value = match unpack_value(lua, cursor)? {
            Ok(value) => value,
            Err(err) => return Ok(Err(err)),
        };
        // A nil or NaN key cannot index a table; lua_cmsgpack's settable would raise.
        let settable = match &key {
            Value::Nil => false,
            Value::Number(n) => !n.is_nan(),
            _ => true,
        };
        if settable && let Err(err) = table.raw_set(key, value) {
            return Ok(Err(err));
        }
    }
    Ok(Ok(Value::Table(table)))
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
