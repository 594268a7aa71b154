//! Redis's glob-style pattern match (`stringmatchlen` in util.c), for `KEYS` and `SCAN MATCH`.
//!
//! `*` matches any run, `?` one byte, `[abc]`, `[^abc]` and `[a-z]` a byte of a class, and `\x`
//! the byte `x`. Matching is on bytes; a malformed class (an unclosed `[`) matches as Redis's
//! does: the class ends at the pattern's end.

/// Whether `string` matches `pattern`.
pub fn matches(pattern: &[u8], string: &[u8]) -> bool {
    // Redis bounds the recursion of `*` (CVE-2022-36021); this loop keeps one backtrack point
    // instead, so a pattern of many stars costs O(pattern × string) and never recurses.
    let (mut p, mut s) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while s < string.len() {
        if p < pattern.len() {
            match pattern[p] {
                b'*' => {
                    while p < pattern.len() && pattern[p] == b'*' {
                        p += 1;
                    }
                    if p == pattern.len() {
                        return true;
                    }
                    star = Some((p, s));
                    continue;
                }
                b'?' => {
                    p += 1;
                    s += 1;
                    continue;
                }
                b'[' => {
                    if let Some(end) = class_matches(pattern, p, string[s]) {
                        p = end;
                        s += 1;
                        continue;
                    }
                }
                b'\\' if p + 1 < pattern.len() => {
                    if pattern[p + 1] == string[s] {
                        p += 2;
                        s += 1;
                        continue;
                    }
                }
                byte => {
                    if byte == string[s] {
                        p += 1;
                        s += 1;
                        continue;
                    }
                }
            }
        }
        // A mismatch: let the last star take one more byte, or fail.
        match star {
            Some((star_p, star_s)) => {
                p = star_p;
                s = star_s + 1;
                star = Some((star_p, star_s + 1));
            }
            None => return false,
        }
    }
    pattern[p..].iter().all(|&b| b == b'*')
}

/// If the class starting at `pattern[open] == b'['` matches `byte`, the index after the class.
fn class_matches(pattern: &[u8], open: usize, byte: u8) -> Option<usize> {
    let mut p = open + 1;
    let negate = p < pattern.len() && pattern[p] == b'^';
    if negate {
        p += 1;
    }
    let mut matched = false;
    loop {
        if p >= pattern.len() {
            // An unclosed class ends at the pattern's end (Redis steps back onto the last
            // byte, so the class is all there is).
            break;
        }
        match pattern[p] {
            b']' => {
                p += 1;
                break;
            }
            b'\\' if p + 1 < pattern.len() => {
                if pattern[p + 1] == byte {
                    matched = true;
                }
                p += 2;
            }
            low if p + 2 < pattern.len() && pattern[p + 1] == b'-' => {
                let high = pattern[p + 2];
                let (low, high) = if low > high { (high, low) } else { (low, high) };
                if (low..=high).contains(&byte) {
                    matched = true;
                }
                p += 3;
            }
            single => {
                if single == byte {
                    matched = true;
                }
                p += 1;
            }
        }
    }
    (matched != negate).then_some(p)
}

#[cfg(test)]
mod tests {
    use super::matches;

    #[test]
    fn patterns_match_as_redis_documents() {
        let cases: &[(&str, &str, bool)] = &[
            ("*", "", true),
            ("*", "anything", true),
            ("h?llo", "hello", true),
            ("h?llo", "hllo", false),
            ("h*llo", "heeeello", true),
            ("h*llo", "hllo", true),
            ("h[ae]llo", "hallo", true),
            ("h[ae]llo", "hillo", false),
            ("h[^e]llo", "hallo", true),
            ("h[^e]llo", "hello", false),
            ("h[a-b]llo", "hbllo", true),
            ("h[a-b]llo", "hcllo", false),
            ("h\\*llo", "h*llo", true),
            ("h\\*llo", "hello", false),
            ("user:*:name", "user:42:name", true),
            ("user:*:name", "user:42:mail", false),
            ("*a*b*c", "xxaxxbxxc", true),
            ("*a*b*c", "xxaxxbxx", false),
            ("abc", "abcd", false),
            ("abc*", "abc", true),
        ];
        for &(pattern, string, want) in cases {
            assert_eq!(
                matches(pattern.as_bytes(), string.as_bytes()),
                want,
                "{pattern} on {string}"
            );
        }
    }

    #[test]
    fn many_stars_take_linear_steps() {
        let pattern = "*a".repeat(500) + "b";
        let string = "a".repeat(5000);
        assert!(!matches(pattern.as_bytes(), string.as_bytes()));
    }
}
