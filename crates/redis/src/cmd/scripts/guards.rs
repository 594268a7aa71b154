//! Guards in front of the Lua 5.1 library functions through which a script could take the
//! node down, each run by a Lua wrapper in the sandbox's prelude before the real function.
//!
//! **Patterns** (`string.find`, `string.match`, `string.gmatch`, `string.gsub`): lstrlib.c's
//! matcher recurses in C once for each capture parenthesis and once for each
//! single-character item with a quantifier (`?`, `*`, `+`, `-`), with no limit: a pattern
//! of 200,000 `a?` overflows any thread's stack, and a stack overflow aborts the whole node
//! (redis-server 7.0.15 crashes on it too). Lua 5.2 bounds that recursion at 200 calls
//! (`MAXCCALLS`) and raises "pattern too complex". The bound here is static: before a
//! pattern function runs, [`match_depth_bound`] walks the pattern as the matcher reads it
//! (`%x` escapes, `[...]` sets, `%b`, `%f`, back references) and counts the calls that can
//! nest; a pattern that could nest deeper than [`MATCH_DEPTH_MAX`] is refused with Lua 5.2's
//! message. A plain `find` (a true fourth argument) never runs the matcher and is never
//! refused.
//!
//! **Chunks** (`loadstring`, `load`): Lua 5.1 loads a chunk that starts with ESC as
//! bytecode, which no loader checks, so crafted bytecode reads and writes memory at will.
//! Redis took the bytecode loader out of its Lua; the prelude makes the parser read such a
//! chunk instead, as Redis's does (see the prelude), and [`chunk_refusal`] only checks the
//! arguments.
//!
//! The real functions, called from a wrapper, would name themselves after the wrapper's
//! local variables and place their errors in the prelude, so each guard also checks the
//! arguments as Lua 5.1 does, in its order and with its messages, naming the function as
//! the script called it; the wrapper raises the message at its caller's position.

use mlua::{Lua, MultiValue, Value};

use super::bit::lua_type_name;

/// The deepest the matcher may recurse for a pattern to be accepted (Lua 5.2's
/// `MAXCCALLS`): counted in calls of lstrlib's `match`, the first included.
pub const MATCH_DEPTH_MAX: usize = 200;

/// Lua 5.2's message for a pattern that recurses too deeply.
pub const TOO_COMPLEX: &str = "pattern too complex";

/// The pattern functions the guard stands in front of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PatternFunction {
    Find,
    Match,
    Gmatch,
    Gsub,
}

impl PatternFunction {
    /// Every guarded pattern function.
    pub const ALL: [PatternFunction; 4] = [
        PatternFunction::Find,
        PatternFunction::Match,
        PatternFunction::Gmatch,
        PatternFunction::Gsub,
    ];

    /// Its name in the `string` table.
    pub fn name(self) -> &'static str {
        match self {
            PatternFunction::Find => "find",
            PatternFunction::Match => "match",
            PatternFunction::Gmatch => "gmatch",
            PatternFunction::Gsub => "gsub",
        }
    }
}

/// Why a call of `function` with `args` must not reach the real function: the error
/// message lstrlib would raise for its arguments, or "pattern too complex"; `None` if the
/// call may go ahead. The caller raises the message at its own caller's position.
pub fn pattern_refusal(
    lua: &Lua,
    function: PatternFunction,
    args: &MultiValue,
) -> mlua::Result<Option<String>> {
    if let Some(message) = pattern_argument_error(lua, function, args)? {
        return Ok(Some(message));
    }
    let plain = function == PatternFunction::Find
        && !matches!(args.get(3), None | Some(Value::Nil | Value::Boolean(false)));
    if plain {
        return Ok(None);
    }
    let Some(pattern) = args
        .get(1)
        .cloned()
        .and_then(|p| lua.coerce_string(p).ok()?)
    else {
        return Ok(None);
    };
    // `gmatch` alone reads a leading `^` as an ordinary character.
    let skips_anchor = function != PatternFunction::Gmatch;
    if match_depth_bound(&pattern.as_bytes(), skips_anchor) > MATCH_DEPTH_MAX {
        return Ok(Some(TOO_COMPLEX.to_string()));
    }
    Ok(None)
}

/// An upper bound of how deeply lstrlib's `match` recurses for `pattern`: one call, plus
/// one for each `(`, `)` and quantified item. Every nested call starts further along the
/// pattern than its caller, and only those elements start one, so no match nests deeper.
/// `skips_anchor`: a leading `^` anchors the match rather than being an item.
pub fn match_depth_bound(pattern: &[u8], skips_anchor: bool) -> usize {
    // lstrlib reads the pattern as a C string: a NUL ends it.
    let end = pattern
        .iter()
        .position(|&b| b == 0)
        .unwrap_or(pattern.len());
    let pattern = &pattern[..end];
    let mut at = usize::from(skips_anchor && pattern.first() == Some(&b'^'));
    let mut depth = 1;
    while at < pattern.len() {
        let next = pattern.get(at + 1).copied();
        match (pattern[at], next) {
            (b'(', Some(b')')) => {
                depth += 1;
                at += 2;
            }
            (b'(' | b')', _) => {
                depth += 1;
                at += 1;
            }
            // A balance (`%bxy`), a frontier (`%f[set]`) and a back reference (`%1`) go on
            // matching in the same call.
            (b'%', Some(b'b')) => at += 4,
            (b'%', Some(b'f')) => at = class_end(pattern, at + 2),
            (b'%', Some(digit)) if digit.is_ascii_digit() => at += 2,
            _ => {
                let item_end = class_end(pattern, at);
                if matches!(pattern.get(item_end), Some(b'?' | b'*' | b'+' | b'-')) {
                    depth += 1;
                    at = item_end + 1;
                } else {
                    at = item_end;
                }
            }
        }
    }
    depth
}

/// Where the single-character class at `at` ends (lstrlib's `classEnd`): after `%x`, after
/// the `]` of a set, or after one character. A malformed class (which the matcher refuses
/// when it gets there) ends the pattern.
fn class_end(pattern: &[u8], at: usize) -> usize {
    match pattern.get(at) {
        Some(b'%') => at + 2,
        Some(b'[') => {
            let mut at = at + 1;
            if pattern.get(at) == Some(&b'^') {
                at += 1;
            }
            // The first character of a set is in it even when it is `]`.
            loop {
                let Some(&byte) = pattern.get(at) else {
                    return pattern.len();
                };
                at += 1;
                if byte == b'%' && at < pattern.len() {
                    at += 1;
                }
                if pattern.get(at) == Some(&b']') {
                    return at + 1;
                }
            }
        }
        _ => at + 1,
    }
}

/// The message lstrlib raises for a pattern function's `args`, checked in its order, or
/// `None` if they are good.
fn pattern_argument_error(
    lua: &Lua,
    function: PatternFunction,
    args: &MultiValue,
) -> mlua::Result<Option<String>> {
    for index in [1, 2] {
        if !is_string_like(args.get(index - 1)) {
            let message = expected("string", args, index);
            return Ok(Some(bad_argument(lua, function.name(), index, &message)));
        }
    }
    let optional_integer = match function {
        PatternFunction::Find | PatternFunction::Match => Some(3),
        PatternFunction::Gsub => Some(4),
        PatternFunction::Gmatch => None,
    };
    if let Some(index) = optional_integer
        && !is_optional_integer(lua, args.get(index - 1))
    {
        let message = expected("number", args, index);
        return Ok(Some(bad_argument(lua, function.name(), index, &message)));
    }
    if function == PatternFunction::Gsub
        && !matches!(
            args.get(2),
            Some(Value::Integer(_) | Value::Number(_) | Value::String(_))
                | Some(Value::Function(_) | Value::Table(_))
        )
    {
        let message = "string/function/table expected";
        return Ok(Some(bad_argument(lua, function.name(), 3, message)));
    }
    Ok(None)
}

/// What `luaL_checklstring` takes: a string or a number.
fn is_string_like(value: Option<&Value>) -> bool {
    matches!(
        value,
        Some(Value::String(_) | Value::Integer(_) | Value::Number(_))
    )
}

/// What `luaL_optinteger` takes: nothing, nil, a number or a string that reads as one.
fn is_optional_integer(lua: &Lua, value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Nil | Value::Integer(_) | Value::Number(_)) => true,
        Some(text @ Value::String(_)) => matches!(lua.coerce_number(text.clone()), Ok(Some(_))),
        Some(_) => false,
    }
}

/// `luaL_typerror`'s text: "string expected, got nil".
fn expected(type_name: &str, args: &MultiValue, index: usize) -> String {
    let got = args.get(index - 1).map_or("no value", lua_type_name);
    format!("{type_name} expected, got {got}")
}

/// `luaL_argerror`'s message for argument `index` of the guarded function, named as its
/// caller called it (the wrapper's frame, one level up): a method call counts its
/// arguments after `self`. A Lua function that was tail-called has lost its caller's frame,
/// and with it its name, where the real (C) function would still have it: it is then
/// `library_name`.
fn bad_argument(lua: &Lua, library_name: &str, index: usize, message: &str) -> String {
    let (name, method) = lua
        .inspect_stack(1, |frame| {
            let names = frame.names();
            let name = names.name.map(|name| name.into_owned());
            (name, names.name_what == Some("method"))
        })
        .unwrap_or((None, false));
    let tail_called = lua
        .inspect_stack(2, |frame| frame.source().what == "tail")
        .unwrap_or(false);
    let name = match name {
        Some(name) => name,
        None if tail_called => library_name.to_string(),
        None => "?".to_string(),
    };
    match (method, index) {
        (true, 1) => format!("calling '{name}' on bad self ({message})"),
        (true, _) => format!("bad argument #{} to '{name}' ({message})", index - 1),
        (false, _) => format!("bad argument #{index} to '{name}' ({message})"),
    }
}

/// The chunk loaders the guard stands in front of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChunkFunction {
    Load,
    Loadstring,
}

impl ChunkFunction {
    /// Every guarded chunk loader.
    pub const ALL: [ChunkFunction; 2] = [ChunkFunction::Load, ChunkFunction::Loadstring];

    /// Its name among the globals.
    pub fn name(self) -> &'static str {
        match self {
            ChunkFunction::Load => "load",
            ChunkFunction::Loadstring => "loadstring",
        }
    }
}

/// The error message Lua 5.1's `load` or `loadstring` would raise for `args`, or `None`
/// if they are good.
pub fn chunk_refusal(lua: &Lua, function: ChunkFunction, args: &MultiValue) -> Option<String> {
    let first_is_good = match function {
        ChunkFunction::Load => matches!(args.front(), Some(Value::Function(_))),
        ChunkFunction::Loadstring => is_string_like(args.front()),
    };
    if !first_is_good {
        let wanted = match function {
            ChunkFunction::Load => "function",
            ChunkFunction::Loadstring => "string",
        };
        return Some(bad_argument(
            lua,
            function.name(),
            1,
            &expected(wanted, args, 1),
        ));
    }
    // The chunk's name is optional (`luaL_optstring`).
    if !matches!(args.get(1), None | Some(Value::Nil)) && !is_string_like(args.get(1)) {
        let message = expected("string", args, 2);
        return Some(bad_argument(lua, function.name(), 2, &message));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_counts_captures_and_quantified_items() {
        assert_eq!(match_depth_bound(b"abc", true), 1);
        assert_eq!(match_depth_bound(b"a?b*c+d-", true), 5);
        assert_eq!(match_depth_bound(b"(a)()", true), 4);
        assert_eq!(match_depth_bound(b"%a+%d*", true), 3);
        assert_eq!(match_depth_bound(b"[%]?]*x", true), 2);
        assert_eq!(match_depth_bound(b"[]]?", true), 2);
        assert_eq!(match_depth_bound(b"%b()?", true), 1);
        assert_eq!(match_depth_bound(b"%b()a?", true), 2);
        assert_eq!(match_depth_bound(b"%f[%w]%w+", true), 2);
        assert_eq!(match_depth_bound(b"(a)%1?", true), 3);
        assert_eq!(match_depth_bound(b"^*", true), 1);
        assert_eq!(match_depth_bound(b"^*", false), 2);
        assert_eq!(match_depth_bound(b"a?\0b?b?", true), 2);
        assert_eq!(match_depth_bound(b"[a", true), 1);
        assert_eq!(match_depth_bound(b"%", true), 1);
    }
}
