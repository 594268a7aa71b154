//! Function libraries in Redis's RDB format, as `FUNCTION DUMP` writes them and `FUNCTION
//! RESTORE` reads them (functions.c's `functionDumpCommand` and `functionRestoreCommand`,
//! rdb.c's `rdbSaveFunctions` and `rdbFunctionLoad`).
//!
//! ```text
//! per library:  [RDB_OPCODE_FUNCTION2 = 245][the library's code: an RDB string]
//! then:         [RDB version: u16 LE][CRC-64 of everything before: u64 LE]
//! ```
//!
//! The code is the whole text `FUNCTION LOAD` was given, shebang line included, written as
//! `rdbSaveRawString` writes any string (LZF-compressed when that saves 4 bytes). Redis
//! 7.0 also reads the format of its release candidates (opcode 246: the name, the engine, a
//! description and the code apart), which it turns into the same text; so does
//! [`Records`]. Every length is untrusted and checked against the bytes left.

use super::io::{Input, Reader, Writer};
use super::{FOOTER_BYTES, RDB_VERSION, crc64};

/// A library's record (`RDB_OPCODE_FUNCTION2`).
pub const OPCODE_FUNCTION2: u8 = 245;
/// A library's record as Redis 7.0's release candidates wrote it (`RDB_OPCODE_FUNCTION`).
pub const OPCODE_FUNCTION: u8 = 246;

/// The `FUNCTION DUMP` payload of libraries whose codes are `codes`, in that order.
pub fn dump<'c>(codes: impl IntoIterator<Item = &'c [u8]>) -> Vec<u8> {
    let mut out = Writer::default();
    for code in codes {
        out.bytes.push(OPCODE_FUNCTION2);
        out.string(code);
    }
    let mut bytes = out.bytes;
    bytes.extend_from_slice(&RDB_VERSION.to_le_bytes());
    let checksum = crc64(&bytes);
    bytes.extend_from_slice(&checksum.to_le_bytes());
    bytes
}

/// The library records of a payload, one at a time, as `FUNCTION RESTORE` reads them: Redis
/// loads each library before it reads the next record, so an error in a later record comes
/// after those of the libraries before it.
#[derive(Debug)]
pub struct Records<'p> {
    reader: Reader<'p>,
    failed: bool,
}

impl<'p> Records<'p> {
    /// The records of `payload`, or `None` if its footer is wrong (Redis's
    /// `verifyDumpPayload`: too short, a newer RDB version, or a checksum that does not match).
    pub fn new(payload: &'p [u8]) -> Option<Records<'p>> {
        if payload.len() < FOOTER_BYTES {
            return None;
        }
        let (body, footer) = payload.split_at(payload.len() - 8);
        let version = u16::from_le_bytes([body[body.len() - 2], body[body.len() - 1]]);
        let checksum = u64::from_le_bytes(footer.try_into().expect("8 bytes"));
        if version > RDB_VERSION || crc64(body) != checksum {
            return None;
        }
        // Like Redis, records are read from the whole payload while more than the footer's
        // bytes are left: a record cut short may run on into the footer.
        Some(Records {
            reader: Reader::new(payload),
            failed: false,
        })
    }

    fn record(&mut self) -> Result<Vec<u8>, &'static str> {
        let kind = self.reader.byte().map_err(|_| "can not read data type")?;
        match kind {
            OPCODE_FUNCTION2 | OPCODE_FUNCTION => library(kind, &mut self.reader),
            _ => Err("given type is not a function"),
        }
    }
}

/// The code of the library whose record of kind `kind` ([`OPCODE_FUNCTION2`] or
/// [`OPCODE_FUNCTION`]) `reader` reads next, or why it cannot be read (Redis's text).
pub fn library(kind: u8, reader: &mut impl Input) -> Result<Vec<u8>, &'static str> {
    if kind == OPCODE_FUNCTION2 {
        return reader
            .string()
            .map_err(|_| "Failed loading library payload");
    }
    assert_eq!(kind, OPCODE_FUNCTION, "a library's record");
    let name = reader.string().map_err(|_| "Failed loading library name")?;
    let engine = reader.string().map_err(|_| "Failed loading engine name")?;
    let has_description = reader
        .len_any()
        .map_err(|_| "Failed loading library description indicator")?;
    if has_description != 0 {
        reader
            .string()
            .map_err(|_| "Failed loading library description")?;
    }
    let blob = reader.string().map_err(|_| "Failed loading library blob")?;
    // rdbFunctionLoad: "#!%s name=%s\n%s", the description dropped.
    let mut code = b"#!".to_vec();
    code.extend_from_slice(c_text(&engine));
    code.extend_from_slice(b" name=");
    code.extend_from_slice(c_text(&name));
    code.push(b'\n');
    code.extend_from_slice(c_text(&blob));
    Ok(code)
}

/// What `%s` of an sds prints in `sdscatfmt`: the bytes up to the first NUL.
fn c_text(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().position(|&b| b == 0).unwrap_or(bytes.len());
    &bytes[..end]
}

impl Iterator for Records<'_> {
    /// A library's code, or why the record cannot be read (Redis's text, without its code).
    type Item = Result<Vec<u8>, &'static str>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.reader.left() <= FOOTER_BYTES {
            return None;
        }
        let record = self.record();
        self.failed = record.is_err();
        Some(record)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn codes(payload: &[u8]) -> Result<Vec<Vec<u8>>, &'static str> {
        Records::new(payload).expect("a good footer").collect()
    }

    #[test]
    fn a_dump_reads_back_whole_and_compressed() {
        let short = b"#!lua name=a\nredis.register_function('f', function() end)".to_vec();
        let long = [short.clone(), b" -- ".repeat(100)].concat();
        let payload = dump([short.as_slice(), long.as_slice()]);
        assert_eq!(payload[0], OPCODE_FUNCTION2);
        assert!(payload.len() < long.len(), "the long code is compressed");
        assert_eq!(codes(&payload).unwrap(), vec![short, long]);
        assert_eq!(codes(&dump([])).unwrap(), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn an_empty_dump_is_redis_s() {
        // redis-server 7.0.15 answers FUNCTION DUMP of no library with these bytes.
        assert_eq!(dump([]), b"\n\x00]\x9b\\@\x0f\x7f\xa2\xda");
    }

    #[test]
    fn footers_and_records_are_refused_in_redis_s_words() {
        assert!(Records::new(b"short").is_none());
        let mut payload = dump([b"#!lua name=a\n".as_slice()]);
        *payload.last_mut().unwrap() ^= 1;
        assert!(Records::new(&payload).is_none());
        let bad_type = super::super::with_footer(vec![7, 1, b'x'], 10);
        assert_eq!(codes(&bad_type), Err("given type is not a function"));
        let cut = super::super::with_footer(vec![OPCODE_FUNCTION2, 0x3f, b'x'], 10);
        // The string's length runs past the payload's end.
        assert_eq!(codes(&cut), Err("Failed loading library payload"));
        let newer = super::super::with_footer(vec![OPCODE_FUNCTION2, 0], 11);
        assert!(Records::new(&newer).is_none());
    }

    #[test]
    fn the_release_candidates_format_becomes_a_shebang() {
        let mut body = vec![OPCODE_FUNCTION];
        for part in [&b"lib"[..], b"LUA"] {
            body.push(part.len() as u8);
            body.extend_from_slice(part);
        }
        body.extend_from_slice(&[1, 4]);
        body.extend_from_slice(b"desc");
        let blob = b"redis.register_function('f', function() end)";
        body.push(blob.len() as u8);
        body.extend_from_slice(blob);
        let payload = super::super::with_footer(body, 10);
        assert_eq!(
            codes(&payload).unwrap(),
            vec![[&b"#!LUA name=lib\n"[..], blob].concat()]
        );
    }
}
