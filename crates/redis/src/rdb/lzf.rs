//! LZF as Redis ships it (lzf_c.c with `HLOG 16`, `VERY_FAST`; lzf_d.c with `CHECK_INPUT`):
//! the compressor is ported step for step so that a value dumps to Redis's exact bytes, the
//! decompressor checks every reference against what it has written.

/// The most one compressed byte can stand for: a three-byte back reference copies 264.
pub const EXPANSION_MAX: u64 = 88;

const HLOG: u32 = 16;
const HSIZE: u32 = 1 << HLOG;
const MAX_LIT: usize = 1 << 5;
const MAX_OFF: usize = 1 << 13;
const MAX_REF: usize = (1 << 8) + (1 << 3);

/// `lzf_decompress` into exactly `len` bytes; `None` if the input is not that.
pub fn decompress(input: &[u8], len: usize) -> Option<Vec<u8>> {
    let mut out: Vec<u8> = Vec::with_capacity(len);
    let mut ip = 0;
    while ip < input.len() {
        let ctrl = usize::from(input[ip]);
        ip += 1;
        if ctrl < MAX_LIT {
            let run = ctrl + 1;
            if out.len() + run > len || ip + run > input.len() {
                return None;
            }
            out.extend_from_slice(&input[ip..ip + run]);
            ip += run;
            continue;
        }
        let mut run = ctrl >> 5;
        let mut back = (ctrl & 0x1f) << 8;
        if run == 7 {
            run += usize::from(*input.get(ip)?);
            ip += 1;
        }
        back += usize::from(*input.get(ip)?) + 1;
        ip += 1;
        run += 2;
        if out.len() + run > len || back > out.len() {
            return None;
        }
        let from = out.len() - back;
        for i in 0..run {
            let byte = out[from + i];
            out.push(byte);
        }
    }
    (out.len() == len).then_some(out)
}

fn first(bytes: &[u8], ip: usize) -> u32 {
    u32::from(bytes[ip]) << 8 | u32::from(bytes[ip + 1])
}

fn next(hval: u32, bytes: &[u8], ip: usize) -> u32 {
    hval << 8 | u32::from(bytes[ip + 2])
}

fn idx(hval: u32) -> usize {
    ((hval >> (24 - HLOG)).wrapping_sub(hval.wrapping_mul(5)) & (HSIZE - 1)) as usize
}

/// The output of [`compress`] as it is built: the literal run open at its end.
struct Out {
    bytes: Vec<u8>,
    out_len: usize,
    /// Bytes in the open literal run; its count byte sits just before them.
    lit: usize,
}

impl Out {
    fn start_run(&mut self) {
        self.lit = 0;
        self.bytes.push(0);
    }

    fn stop_run(&mut self) {
        let at = self.bytes.len() - self.lit - 1;
        if self.lit == 0 {
            self.bytes.truncate(at);
        } else {
            self.bytes[at] = (self.lit - 1) as u8;
        }
    }

    fn literal(&mut self, byte: u8) {
        self.lit += 1;
        self.bytes.push(byte);
        if self.lit == MAX_LIT {
            let at = self.bytes.len() - self.lit - 1;
            self.bytes[at] = (self.lit - 1) as u8;
            self.start_run();
        }
    }
}

/// `lzf_compress` into at most `out_len` bytes; `None` where it gives up (the output would
/// not fit). The hash table starts empty (Redis's starts with whatever the stack held, which
/// finds a match only by chance and never changes what decompresses).
pub fn compress(input: &[u8], out_len: usize) -> Option<Vec<u8>> {
    if input.is_empty() || out_len == 0 {
        return None;
    }
    let mut htab = vec![0usize; HSIZE as usize];
    let mut out = Out {
        bytes: Vec::with_capacity(out_len + 1),
        out_len,
        lit: 0,
    };
    out.start_run();
    let end = input.len();
    let mut ip = 0;
    let mut hval = if end >= 2 { first(input, 0) } else { 0 };
    while ip + 2 < end {
        hval = next(hval, input, ip);
        let slot = idx(hval);
        let reference = htab[slot];
        // Positions are stored plus one, so that 0 is an empty slot.
        htab[slot] = ip + 1;
        let matched = reference > 1 && {
            let reference = reference - 1;
            let off = ip - reference - 1;
            off < MAX_OFF && input[reference..reference + 3] == input[ip..ip + 3]
        };
        if !matched {
            if out.bytes.len() >= out.out_len {
                return None;
            }
            out.literal(input[ip]);
            ip += 1;
            continue;
        }
        let reference = reference - 1;
        if out.bytes.len() + 4 >= out.out_len
            && out.bytes.len() - usize::from(out.lit == 0) + 4 >= out.out_len
        {
            return None;
        }
        ip = back_reference(&mut out, input, (ip, reference), &mut htab, &mut hval)?;
    }
    if out.bytes.len() + 3 > out.out_len {
        return None;
    }
    while ip < end {
        out.literal(input[ip]);
        ip += 1;
    }
    out.stop_run();
    Some(out.bytes)
}

/// How many bytes match at `ip` and `reference` (three are known to), as lzf_c.c counts
/// them: 16 more unrolled without looking at `maxlen` when it is above 16, then up to it.
fn match_len(input: &[u8], (ip, reference): (usize, usize), maxlen: usize) -> usize {
    let mut len = 2;
    if maxlen > 16 {
        for _ in 0..16 {
            len += 1;
            if input[reference + len] != input[ip + len] {
                return len;
            }
        }
    }
    len += 1;
    while len < maxlen && input[reference + len] == input[ip + len] {
        len += 1;
    }
    len
}

/// Writes the back reference found at `ip` to `reference` and rehashes as `VERY_FAST` does;
/// returns where compression goes on.
fn back_reference(
    out: &mut Out,
    input: &[u8],
    (mut ip, reference): (usize, usize),
    htab: &mut [usize],
    hval: &mut u32,
) -> Option<usize> {
    let end = input.len();
    let off = ip - reference - 1;
    let maxlen = (end - ip - 2).min(MAX_REF);
    let len = match_len(input, (ip, reference), maxlen);
    out.stop_run();
    let len = len - 2;
    ip += 1;
    if len < 7 {
        out.bytes.push(((off >> 8) + (len << 5)) as u8);
    } else {
        out.bytes.push(((off >> 8) + (7 << 5)) as u8);
        out.bytes.push((len - 7) as u8);
    }
    out.bytes.push(off as u8);
    out.start_run();
    ip += len + 1;
    if ip + 2 >= end {
        return Some(ip);
    }
    ip -= 2;
    *hval = first(input, ip);
    for _ in 0..2 {
        *hval = next(*hval, input, ip);
        htab[idx(*hval)] = ip + 1;
        ip += 1;
    }
    Some(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compressed_text_decompresses_to_itself() {
        let texts: [&[u8]; 4] = [
            b"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabcabc",
            b"the quick brown fox jumps over the lazy dog, the quick brown fox",
            &[7u8; 5000],
        ];
        for text in texts {
            let compressed = compress(text, text.len() - 4).expect("it compresses");
            assert!(compressed.len() < text.len() - 4);
            assert_eq!(decompress(&compressed, text.len()).as_deref(), Some(text));
        }
    }

    #[test]
    fn random_text_that_does_not_compress_is_refused() {
        let text: Vec<u8> = (0..200u32)
            .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
            .collect();
        assert_eq!(compress(&text, text.len() - 4), None);
    }

    #[test]
    fn bad_references_are_refused() {
        // A back reference before the start, a literal run past the input's end.
        assert_eq!(decompress(&[0x20, 0x05], 3), None);
        assert_eq!(decompress(&[0x05, b'a'], 6), None);
        assert_eq!(decompress(&[0x00, b'a'], 2), None);
    }
}
