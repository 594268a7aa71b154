//! A library's first line, `#!<engine> name=<library>` (functions.c's
//! `functionExtractLibMetaData`, with sds.c's `sdssplitargs` to split it), and the name rule
//! Redis holds library and function names to (`functionsVerifyName`).

/// What a library's shebang line says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shebang {
    pub engine: Vec<u8>,
    pub name: Vec<u8>,
}

/// Redis's error for a name that is not letters, digits and underscores (it says "Library"
/// for function names too).
pub const BAD_NAME: &str = "Library names can only contain letters, numbers, or underscores(_) \
                            and must be at least one character long";

/// The shebang line of library `code`, or Redis's error (without its "ERR " code).
pub fn parse(code: &[u8]) -> Result<Shebang, String> {
    if !code.starts_with(b"#!") {
        return Err("Missing library metadata".into());
    }
    // C strings: the line ends at the first line feed, and nothing of a NUL byte before it
    // is seen.
    let line_end = code.iter().position(|&b| b == b'\n' || b == 0);
    let Some(line_end) = line_end.filter(|&at| code[at] == b'\n') else {
        return Err("Invalid library metadata".into());
    };
    let parts = match split_args(&code[..line_end]) {
        Some(parts) if !parts.is_empty() => parts,
        _ => return Err("Invalid library metadata".into()),
    };
    let engine = parts[0].get(2..).unwrap_or_default().to_vec();
    let mut name = None;
    for part in &parts[1..] {
        if part.len() >= 5 && part[..5].eq_ignore_ascii_case(b"name=") {
            if name.is_some() {
                return Err(
                    "Invalid metadata value, name argument was given multiple times".into(),
                );
            }
            name = Some(part[5..].to_vec());
            continue;
        }
        return Err(format!(
            "Invalid metadata value given: {}",
            String::from_utf8_lossy(c_text(part))
        ));
    }
    let Some(name) = name else {
        return Err("Library name was not given".into());
    };
    Ok(Shebang { engine, name })
}

/// Whether `name` follows Redis's rule for library and function names.
pub fn valid_name(name: &[u8]) -> bool {
    !name.is_empty() && name.iter().all(|&b| b.is_ascii_alphanumeric() || b == b'_')
}

/// What `%s` prints of `bytes`: up to the first NUL.
pub fn c_text(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

/// C's `isspace` in the C locale.
fn is_space(byte: u8) -> bool {
    matches!(byte, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// `sdssplitargs`: words split at blanks, with "double quotes" (and their `\xHH`, `\n`, …
/// escapes) and 'single quotes'; `None` for unbalanced quotes or a closing quote not
/// followed by a blank.
fn split_args(line: &[u8]) -> Option<Vec<Vec<u8>>> {
    let at = |p: usize| line.get(p).copied().unwrap_or(0);
    let mut words = Vec::new();
    let mut p = 0;
    loop {
        while at(p) != 0 && is_space(at(p)) {
            p += 1;
        }
        if at(p) == 0 {
            return Some(words);
        }
        let mut word = Vec::new();
        let (mut in_double, mut in_single) = (false, false);
        loop {
            let c = at(p);
            if in_double {
                if c == b'\\'
                    && at(p + 1) == b'x'
                    && hex(at(p + 2)).is_some()
                    && hex(at(p + 3)).is_some()
                {
                    word.push(hex(at(p + 2))? * 16 + hex(at(p + 3))?);
                    p += 3;
                } else if c == b'\\' && at(p + 1) != 0 {
                    p += 1;
                    word.push(match at(p) {
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        b'b' => 0x08,
                        b'a' => 0x07,
                        other => other,
                    });
                } else if c == b'"' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    word.push(c);
                }
            } else if in_single {
                if c == b'\\' && at(p + 1) == b'\'' {
                    p += 1;
                    word.push(b'\'');
                } else if c == b'\'' {
                    if at(p + 1) != 0 && !is_space(at(p + 1)) {
                        return None;
                    }
                    p += 1;
                    break;
                } else if c == 0 {
                    return None;
                } else {
                    word.push(c);
                }
            } else {
                match c {
                    b' ' | b'\n' | b'\r' | b'\t' | 0 => {
                        if c != 0 {
                            p += 1;
                        }
                        break;
                    }
                    b'"' => in_double = true,
                    b'\'' => in_single = true,
                    _ => word.push(c),
                }
            }
            p += 1;
        }
        words.push(word);
    }
}

fn hex(byte: u8) -> Option<u8> {
    (byte as char).to_digit(16).map(|digit| digit as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Option<Vec<String>> {
        split_args(line.as_bytes()).map(|words| {
            words
                .into_iter()
                .map(|word| String::from_utf8_lossy(&word).into_owned())
                .collect()
        })
    }

    #[test]
    fn lines_split_as_sdssplitargs_splits_them() {
        assert_eq!(words("#!lua name=x").unwrap(), ["#!lua", "name=x"]);
        assert_eq!(words("  a\tb  ").unwrap(), ["a", "b"]);
        assert_eq!(words("a \"b c\" 'd e'").unwrap(), ["a", "b c", "d e"]);
        assert_eq!(words("name=\"a\\x41\\n\"").unwrap(), ["name=aA\n"]);
        assert_eq!(words("'it\\'s'").unwrap(), ["it's"]);
        assert_eq!(words("\"open"), None);
        assert_eq!(words("\"a\"b"), None);
        assert_eq!(words("").unwrap(), Vec::<String>::new());
    }

    #[test]
    fn shebangs_are_refused_in_redis_s_words() {
        let refusal = |code: &str| parse(code.as_bytes()).unwrap_err();
        assert_eq!(refusal("x"), "Missing library metadata");
        assert_eq!(refusal("#!lua"), "Invalid library metadata");
        assert_eq!(refusal("#!lua \"x\n"), "Invalid library metadata");
        assert_eq!(refusal("#!lua\n"), "Library name was not given");
        assert_eq!(
            refusal("#!lua name=a NAME=b\n"),
            "Invalid metadata value, name argument was given multiple times"
        );
        assert_eq!(
            refusal("#!lua foo=x\n"),
            "Invalid metadata value given: foo=x"
        );
        let shebang = parse(b"#!LUA Name=lib\nreturn").unwrap();
        assert_eq!(shebang.engine, b"LUA");
        assert_eq!(shebang.name, b"lib");
        assert_eq!(parse(b"#!\n").unwrap_err(), "Library name was not given");
        assert_eq!(
            parse(b"#!lua\0 name=x\n").unwrap_err(),
            "Invalid library metadata"
        );
    }

    #[test]
    fn names_are_letters_digits_and_underscores() {
        assert!(valid_name(b"a_Z9"));
        assert!(!valid_name(b""));
        assert!(!valid_name(b"a-b"));
        assert!(!valid_name("é".as_bytes()));
    }
}
