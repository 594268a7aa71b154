//! The `bit` library Redis embeds (LuaBitOp, lua_bit.c): 32-bit operations on Lua numbers,
//! with LuaJIT's semantics.

use mlua::{Lua, MultiValue, Table, Value};

/// A number's 32 bits as LuaBitOp takes them: it adds 2^52 + 2^51 to the double and keeps
/// the low word of the result's bits, which rounds to the nearest integer (ties to even) and
/// wraps modulo 2^32. Done the same way here, so every input, fractional or huge, maps to
/// the same bits.
fn bits_of(n: f64) -> u32 {
    (n + 6_755_399_441_055_744.0).to_bits() as u32
}

/// The number a bit operation returns: its 32 bits read as a signed integer.
fn number_of(bits: u32) -> f64 {
    f64::from(bits as i32)
}

/// Argument `index` (from 1) of `function`, as Lua 5.1's `lua_tonumber` converts it (a
/// numeric string counts, read by Lua itself: C's `strtod`, so "nan", hexadecimal and a
/// string cut at a NUL read as LuaBitOp reads them), or LuaBitOp's "number expected" error.
fn arg(lua: &Lua, args: &MultiValue, index: usize, function: &str) -> mlua::Result<u32> {
    let value = args.get(index - 1).cloned().unwrap_or(Value::Nil);
    let number = match &value {
        Value::Integer(i) => Some(*i as f64),
        Value::Number(n) => Some(*n),
        Value::String(_) => lua.coerce_number(value.clone())?,
        _ => None,
    };
    match number {
        Some(n) => Ok(bits_of(n)),
        None => Err(mlua::Error::runtime(format!(
            "{}bad argument #{index} to '{function}' (number expected, got {})",
            super::engine::caller_position(lua),
            lua_type_name(&value)
        ))),
    }
}

/// The name Lua's `type` gives a value.
pub fn lua_type_name(value: &Value) -> &'static str {
    match value {
        Value::Nil => "nil",
        Value::Boolean(_) => "boolean",
        Value::LightUserData(_) | Value::UserData(_) => "userdata",
        Value::Integer(_) | Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Table(_) => "table",
        Value::Function(_) => "function",
        Value::Thread(_) => "thread",
        _ => "userdata",
    }
}

/// Builds the `bit` table.
pub fn library(lua: &Lua) -> mlua::Result<Table> {
    let bit = lua.create_table()?;
    let unary = |name: &'static str, op: fn(u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            Ok(number_of(op(arg(lua, &args, 1, name)?)))
        })
    };
    bit.set("tobit", unary("tobit", |b| b)?)?;
    bit.set("bnot", unary("bnot", |b| !b)?)?;
    bit.set("bswap", unary("bswap", |b| b.swap_bytes())?)?;
    let fold = |name: &'static str, op: fn(u32, u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            let mut bits = arg(lua, &args, 1, name)?;
            // LuaBitOp folds from the last argument down; the operations commute.
            for index in (2..=args.len()).rev() {
                bits = op(bits, arg(lua, &args, index, name)?);
            }
            Ok(number_of(bits))
        })
    };
    bit.set("band", fold("band", |a, b| a & b)?)?;
    bit.set("bor", fold("bor", |a, b| a | b)?)?;
    bit.set("bxor", fold("bxor", |a, b| a ^ b)?)?;
    let shift = |name: &'static str, op: fn(u32, u32) -> u32| {
        lua.create_function(move |lua, args: MultiValue| {
            let bits = arg(lua, &args, 1, name)?;
            let count = arg(lua, &args, 2, name)? & 31;
            Ok(number_of(op(bits, count)))
        })
    };
    bit.set("lshift", shift("lshift", |b, n| b << n)?)?;
    bit.set("rshift", shift("rshift", |b, n| b >> n)?)?;
    bit.set(
        "arshift",
        shift("arshift", |b, n| ((b as i32) >> n) as u32)?,
    )?;
    bit.set("rol", shift("rol", u32::rotate_left)?)?;
    bit.set("ror", shift("ror", u32::rotate_right)?)?;
    bit.set(
        "tohex",
        lua.create_function(|lua, args: MultiValue| {
            let mut bits = arg(lua, &args, 1, "tohex")?;
            let mut digits = if args.len() < 2 {
                8
            } else {
                arg(lua, &args, 2, "tohex")? as i32
            };
            let alphabet: &[u8; 16] = if digits < 0 {
                digits = digits.saturating_neg();
                b"0123456789ABCDEF"
            } else {
                b"0123456789abcdef"
            };
            let digits = digits.min(8) as usize;
            let mut text = [0u8; 8];
            for slot in text[..digits].iter_mut().rev() {
                *slot = alphabet[(bits & 15) as usize];
                bits >>= 4;
            }
            lua.create_string(&text[..digits])
        })?,
    )?;
    Ok(bit)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_wrap_and_round_as_luabitop() {
        assert_eq!(bits_of(1_437_217_655.0), 1_437_217_655);
        assert_eq!(number_of(bits_of(4_294_967_295.0)), -1.0);
        assert_eq!(number_of(bits_of(4_294_967_296.0)), 0.0);
        assert_eq!(number_of(bits_of(-1.0)), -1.0);
        assert_eq!(bits_of(2.5), 2);
        assert_eq!(bits_of(3.5), 4);
        assert_eq!(number_of(bits_of(2_147_483_648.0)), -2_147_483_648.0);
    }
}
