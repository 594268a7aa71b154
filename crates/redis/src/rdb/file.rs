//! Whole RDB files, as Redis 7.0.15 reads them (`rdbLoadRio`) and writes them (`rdbSaveRio`).
//!
//! ```text
//! "REDIS" [version: 4 ASCII digits]
//! then records, each an opcode or a key's type byte:
//!   AUX (250)           [key: string][value: string]
//!   FUNCTION2 (245)     [code: string]           (FUNCTION (246): Redis 7.0's release
//!                                                  candidates' record, read as Redis does)
//!   SELECTDB (254)      [db: length]
//!   RESIZEDB (251)      [keys: length][keys with an expiry: length]
//!   EXPIRETIME_MS (252) [Unix ms: i64 LE]         (before the key it applies to)
//!   EXPIRETIME (253)    [Unix s: i32 LE]          (before the key it applies to)
//!   IDLE (248)          [seconds: length]         (before the key it applies to)
//!   FREQ (249)          [counter: u8]             (before the key it applies to)
//!   a type byte         [key: string][the value's body, as a DUMP payload's]
//!   EOF (255)
//! [CRC-64 of every byte before: u64 LE]           (version 5 and later; 0: not computed)
//! ```
//!
//! [`FileReader`] reads a file record by record from any [`BufRead`], so a file of many GiB
//! needs memory for one value at a time (twice: its bytes as the file holds them, which
//! `RESTORE` takes, and the value parsed). A value's extent is found by parsing it (the
//! format does not give it), with the same code `RESTORE` uses ([`super::load::object`]);
//! every length is untrusted, nothing recurses, and no input panics. Modules' records are
//! refused (tandem runs no module), as is a version past 10 (Redis 7.2 and later write 11).
//!
//! [`FileWriter`] writes what Redis 7.0.15's `SAVE` writes for the same database: version
//! 10, the AUX fields `redis-ver`, `redis-bits`, `ctime`, `used-mem` and `aof-base`, the
//! function libraries, database 0 with its RESIZEDB hint, each key (its expiry first), EOF
//! and the checksum.

use std::io::{BufRead, Read, Write};

use super::functions::{self, OPCODE_FUNCTION, OPCODE_FUNCTION2};
use super::io::{Input, Writer, crc64_extend};
use super::{BadData, Encoding, RDB_VERSION, Value, load, save};

pub const OPCODE_MODULE_AUX: u8 = 247;
pub const OPCODE_IDLE: u8 = 248;
pub const OPCODE_FREQ: u8 = 249;
pub const OPCODE_AUX: u8 = 250;
pub const OPCODE_RESIZEDB: u8 = 251;
pub const OPCODE_EXPIRETIME_MS: u8 = 252;
pub const OPCODE_EXPIRETIME: u8 = 253;
pub const OPCODE_SELECTDB: u8 = 254;
pub const OPCODE_EOF: u8 = 255;
/// A module's value (`RDB_TYPE_MODULE`, `RDB_TYPE_MODULE_2`).
const TYPE_MODULE: u8 = 6;
const TYPE_MODULE_2: u8 = 7;
/// The first version whose files end in a checksum.
const CHECKSUM_VERSION_MIN: u16 = 5;
const MAGIC: &[u8; 5] = b"REDIS";

/// Why a file could not be read, and where (the offset of the record that failed, or of the
/// file's end when it ends too soon).
#[derive(Debug)]
pub struct FileError {
    pub offset: u64,
    pub kind: FileErrorKind,
}

/// What was wrong with a file.
#[derive(Debug)]
#[non_exhaustive]
pub enum FileErrorKind {
    /// Reading failed.
    Io(std::io::Error),
    /// The file ends inside a record, or before its EOF record.
    Truncated,
    /// The file does not start with "REDIS" and a version.
    NotRdb,
    /// A version Redis 7.0 does not read (0, or past 10).
    Version(u32),
    /// A record's opcode or type byte no Redis 7.0 writes.
    UnknownType(u8),
    /// A module's value or aux data.
    Module,
    /// A field of an opcode (its name) does not parse.
    BadField(&'static str),
    /// A key's value does not parse.
    BadValue { key: Vec<u8>, kind: u8 },
    /// A function library's record does not parse (Redis's reason).
    BadFunction(&'static str),
    /// The checksum at the end does not match the bytes before it.
    Checksum { computed: u64, stored: u64 },
}

impl std::fmt::Display for FileError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let at = self.offset;
        match &self.kind {
            FileErrorKind::Io(err) => write!(f, "reading the file failed at byte {at}: {err}"),
            FileErrorKind::Truncated => write!(
                f,
                "the file ends at byte {at} inside a record, before its EOF record: it was cut \
                 short (copy it again, or save it again)"
            ),
            FileErrorKind::NotRdb => write!(
                f,
                "the file does not start with \"REDIS\" and a 4-digit version: it is not an RDB \
                 file"
            ),
            FileErrorKind::Version(version) if *version > u32::from(RDB_VERSION) => write!(
                f,
                "the file is RDB version {version}, written by a Redis newer than 7.0; tandem \
                 reads versions 1 to {RDB_VERSION} (Redis 7.0 and older): save the data from a \
                 Redis 7.0 server, or copy the keys with a tool that speaks commands"
            ),
            FileErrorKind::Version(version) => write!(
                f,
                "the file's RDB version {version} is not one Redis ever wrote (1 to \
                 {RDB_VERSION})"
            ),
            FileErrorKind::UnknownType(kind) => write!(
                f,
                "byte {at} holds record type {kind}, which Redis 7.0 never writes: the file is \
                 damaged"
            ),
            FileErrorKind::Module => write!(
                f,
                "the record at byte {at} holds a Redis module's data; tandem runs no module: \
                 delete the module's keys and save the file again"
            ),
            FileErrorKind::BadField(field) => {
                write!(
                    f,
                    "the {field} at byte {at} does not parse: the file is damaged"
                )
            }
            FileErrorKind::BadValue { key, kind } => write!(
                f,
                "the value of key '{}' (type {kind}) at byte {at} does not parse: the file \
                 is damaged",
                String::from_utf8_lossy(key)
            ),
            FileErrorKind::BadFunction(why) => write!(
                f,
                "the function library at byte {at} does not parse ({why}): the file is damaged"
            ),
            FileErrorKind::Checksum { computed, stored } => write!(
                f,
                "the file's checksum {stored:#018x} (at byte {at}) is not that of its bytes \
                 ({computed:#018x}): the file is damaged"
            ),
        }
    }
}

impl std::error::Error for FileError {}

/// One record of a file, as [`FileReader::next_record`] gives them.
#[derive(Debug)]
pub enum Record {
    /// An AUX field (Redis writes its version, the time, its memory, …).
    Aux {
        key: Vec<u8>,
        value: Vec<u8>,
    },
    /// A function library's code, whole (what `FUNCTION LOAD` was given).
    Function {
        code: Vec<u8>,
    },
    /// The keys that follow are database `db`'s.
    SelectDb {
        db: u64,
    },
    /// How many keys the database holds, and how many of them expire (a hint).
    ResizeDb {
        keys: u64,
        expires: u64,
    },
    Key(Box<KeyRecord>),
}

/// A key and its value, as a file holds them.
#[derive(Debug)]
pub struct KeyRecord {
    /// Where its first record (its expiry's, or its type byte) starts.
    pub offset: u64,
    pub db: u64,
    pub key: Vec<u8>,
    /// When it expires, in Unix milliseconds.
    pub expire_at_ms: Option<i64>,
    /// Its LRU idle time in seconds, and its LFU counter, if the file has them.
    pub idle_s: Option<u64>,
    pub freq: Option<u8>,
    pub value: Value,
    /// How Redis 7.0 holds it after loading it.
    pub encoding: Encoding,
    /// Its type byte and body, as the file holds them: [`KeyRecord::payload`] makes them
    /// `RESTORE`'s payload, so Redis's own encoding travels unchanged.
    pub body: Vec<u8>,
}

impl KeyRecord {
    /// The value as a `DUMP` payload (the body with its footer).
    pub fn payload(&self) -> Vec<u8> {
        super::with_footer(self.body.clone(), RDB_VERSION)
    }
}

/// A [`BufRead`] as the format's [`Input`]: it counts and checksums what it reads, keeps
/// the bytes of the value being read, and remembers why a read failed.
struct Source<R> {
    inner: R,
    offset: u64,
    crc: u64,
    /// The file's length, if known: a count of items is held to the bytes left.
    len_total: Option<u64>,
    /// The bytes read since capturing began.
    capture: Option<Vec<u8>>,
    truncated: bool,
    io_error: Option<std::io::Error>,
}

impl<R: BufRead> Source<R> {
    fn note(&mut self, bytes: &[u8]) {
        self.offset += bytes.len() as u64;
        self.crc = crc64_extend(self.crc, bytes);
        if let Some(capture) = &mut self.capture {
            capture.extend_from_slice(bytes);
        }
    }

    fn failed(&mut self, err: std::io::Error) -> BadData {
        if err.kind() == std::io::ErrorKind::UnexpectedEof {
            self.truncated = true;
        } else {
            self.io_error = Some(err);
        }
        BadData
    }
}

impl<R: BufRead> Input for Source<R> {
    fn fill(&mut self, buf: &mut [u8]) -> Result<(), BadData> {
        match self.inner.read_exact(buf) {
            Ok(()) => {
                self.note(buf);
                Ok(())
            }
            Err(err) => Err(self.failed(err)),
        }
    }

    fn take_owned(&mut self, n: usize) -> Result<Vec<u8>, BadData> {
        // Read as it comes: a length the file does not hold reserves nothing up front.
        let mut bytes = Vec::new();
        match (&mut self.inner).take(n as u64).read_to_end(&mut bytes) {
            Ok(got) if got == n => {
                self.note(&bytes);
                Ok(bytes)
            }
            Ok(_) => {
                self.truncated = true;
                Err(BadData)
            }
            Err(err) => Err(self.failed(err)),
        }
    }

    fn left_max(&self) -> u64 {
        self.len_total
            .map_or(u64::MAX, |len| len.saturating_sub(self.offset))
    }
}

/// Reads a file record by record ([`FileReader::next_record`]), or key by key
/// ([`Iterator`]: the keys, the other records skipped).
pub struct FileReader<R> {
    source: Source<R>,
    version: u16,
    db: u64,
    /// The EOF record and the checksum were read (or reading failed): nothing follows.
    done: bool,
}

impl<R> std::fmt::Debug for FileReader<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileReader")
            .field("offset", &self.source.offset)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// The expiry, idle time and LFU counter opcodes give the key after them.
#[derive(Default)]
struct KeyAttributes {
    offset: Option<u64>,
    expire_at_ms: Option<i64>,
    idle_s: Option<u64>,
    freq: Option<u8>,
}

impl<R: BufRead> FileReader<R> {
    /// Reads the header of the file `inner` reads (`len_total` bytes long, if known).
    pub fn new(inner: R, len_total: Option<u64>) -> Result<FileReader<R>, FileError> {
        let mut reader = FileReader {
            source: Source {
                inner,
                offset: 0,
                crc: 0,
                len_total,
                capture: None,
                truncated: false,
                io_error: None,
            },
            version: 0,
            db: 0,
            done: false,
        };
        let header: Result<[u8; 9], BadData> = reader.source.array();
        // A file shorter than a header is no RDB file, rather than one cut short.
        reader.source.truncated = false;
        let header = header.map_err(|BadData| reader.error(0, FileErrorKind::NotRdb))?;
        let digits = &header[MAGIC.len()..];
        if &header[..MAGIC.len()] != MAGIC || !digits.iter().all(u8::is_ascii_digit) {
            return Err(reader.error(0, FileErrorKind::NotRdb));
        }
        let version = digits
            .iter()
            .fold(0u32, |n, digit| n * 10 + u32::from(digit - b'0'));
        if version == 0 || version > u32::from(RDB_VERSION) {
            return Err(reader.error(5, FileErrorKind::Version(version)));
        }
        reader.version = version as u16;
        Ok(reader)
    }

    /// The file's RDB version.
    pub fn version(&self) -> u16 {
        self.version
    }

    /// Bytes read so far.
    pub fn offset(&self) -> u64 {
        self.source.offset
    }

    /// The error of a read that failed in the record at `offset`: `kind`, unless the file
    /// ended or reading failed, which say more.
    fn error(&mut self, offset: u64, kind: FileErrorKind) -> FileError {
        self.done = true;
        if let Some(err) = self.source.io_error.take() {
            return FileError {
                offset: self.source.offset,
                kind: FileErrorKind::Io(err),
            };
        }
        if self.source.truncated {
            return FileError {
                offset: self.source.offset,
                kind: FileErrorKind::Truncated,
            };
        }
        FileError { offset, kind }
    }

    /// The next record, or `None` after the EOF record (and the checksum, which is checked).
    pub fn next_record(&mut self) -> Result<Option<Record>, FileError> {
        if self.done {
            return Ok(None);
        }
        let mut attributes = KeyAttributes::default();
        loop {
            let at = self.source.offset;
            let kind = self
                .source
                .byte()
                .map_err(|BadData| self.error(at, FileErrorKind::Truncated))?;
            if let Some(record) = self.opcode(kind, at, &mut attributes)? {
                return Ok(record);
            }
        }
    }

    /// Reads the record of `kind` at `at`: `Some` when it is whole (a key, a field, the
    /// end), `None` for an attribute of the key that follows.
    fn opcode(
        &mut self,
        kind: u8,
        at: u64,
        attributes: &mut KeyAttributes,
    ) -> Result<Option<Option<Record>>, FileError> {
        let field = |name| FileErrorKind::BadField(name);
        let record = match kind {
            OPCODE_EXPIRETIME_MS | OPCODE_EXPIRETIME | OPCODE_IDLE | OPCODE_FREQ => {
                attributes.offset.get_or_insert(at);
                self.attribute(kind, at, attributes)?;
                return Ok(None);
            }
            OPCODE_EOF => {
                self.finish()?;
                None
            }
            OPCODE_SELECTDB => {
                let db = self.read(at, field("SELECTDB number"), |s| s.len())?;
                self.db = db;
                Some(Record::SelectDb { db })
            }
            OPCODE_RESIZEDB => {
                let keys = self.read(at, field("RESIZEDB key count"), |s| s.len())?;
                let expires = self.read(at, field("RESIZEDB expiry count"), |s| s.len())?;
                Some(Record::ResizeDb { keys, expires })
            }
            OPCODE_AUX => {
                let key = self.read(at, field("AUX field's name"), |s| s.string())?;
                let value = self.read(at, field("AUX field's value"), |s| s.string())?;
                Some(Record::Aux { key, value })
            }
            OPCODE_FUNCTION | OPCODE_FUNCTION2 => {
                let code = functions::library(kind, &mut self.source)
                    .map_err(|why| self.error(at, FileErrorKind::BadFunction(why)))?;
                Some(Record::Function { code })
            }
            OPCODE_MODULE_AUX | TYPE_MODULE | TYPE_MODULE_2 => {
                return Err(self.error(at, FileErrorKind::Module));
            }
            _ => Some(Record::Key(Box::new(self.key(kind, at, attributes)?))),
        };
        Ok(Some(record))
    }

    /// Reads a field with `read`, or fails with `kind` at `at`.
    fn read<T>(
        &mut self,
        at: u64,
        kind: FileErrorKind,
        read: impl FnOnce(&mut Source<R>) -> Result<T, BadData>,
    ) -> Result<T, FileError> {
        read(&mut self.source).map_err(|BadData| self.error(at, kind))
    }

    fn attribute(
        &mut self,
        kind: u8,
        at: u64,
        attributes: &mut KeyAttributes,
    ) -> Result<(), FileError> {
        let field = |name| FileErrorKind::BadField(name);
        match kind {
            OPCODE_EXPIRETIME_MS => {
                let ms = self.read(at, field("expiry"), |s| s.u64_le())?;
                attributes.expire_at_ms = Some(ms as i64);
            }
            OPCODE_EXPIRETIME => {
                let seconds = self.read(at, field("expiry"), |s| s.u32_le())?;
                attributes.expire_at_ms = Some(i64::from(seconds as i32) * 1000);
            }
            OPCODE_IDLE => {
                attributes.idle_s = Some(self.read(at, field("idle time"), |s| s.len())?)
            }
            _ => attributes.freq = Some(self.read(at, field("LFU counter"), |s| s.byte())?),
        }
        Ok(())
    }

    /// Reads a key of type `kind` (its type byte at `at`) and its value.
    fn key(
        &mut self,
        kind: u8,
        at: u64,
        attributes: &mut KeyAttributes,
    ) -> Result<KeyRecord, FileError> {
        if !load::is_type(kind) {
            return Err(self.error(at, FileErrorKind::UnknownType(kind)));
        }
        let key = self.read(at, FileErrorKind::BadField("key's name"), |s| s.string())?;
        self.source.capture = Some(vec![kind]);
        let loaded = load::object(kind, &mut self.source);
        let body = self.source.capture.take().unwrap_or_default();
        let (value, encoding) = loaded.map_err(|BadData| {
            let bad = FileErrorKind::BadValue {
                key: key.clone(),
                kind,
            };
            self.error(at, bad)
        })?;
        Ok(KeyRecord {
            offset: attributes.offset.unwrap_or(at),
            db: self.db,
            key,
            expire_at_ms: attributes.expire_at_ms,
            idle_s: attributes.idle_s,
            freq: attributes.freq,
            value,
            encoding,
            body,
        })
    }

    /// After the EOF record: checks the checksum, if the version has one.
    fn finish(&mut self) -> Result<(), FileError> {
        self.done = true;
        if self.version < CHECKSUM_VERSION_MIN {
            return Ok(());
        }
        let computed = self.source.crc;
        let at = self.source.offset;
        let stored = self.read(at, FileErrorKind::Truncated, |s| s.u64_le())?;
        // Redis writes 0 when `rdbchecksum no`: nothing to check.
        if stored != 0 && stored != computed {
            return Err(self.error(at, FileErrorKind::Checksum { computed, stored }));
        }
        Ok(())
    }
}

impl<R: BufRead> Iterator for FileReader<R> {
    type Item = Result<Box<KeyRecord>, FileError>;

    /// The next key; the other records are skipped.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.next_record() {
                Ok(Some(Record::Key(key))) => return Some(Ok(key)),
                Ok(Some(_)) => {}
                Ok(None) => return None,
                Err(err) => return Some(Err(err)),
            }
        }
    }
}

/// What a file's AUX fields say of the server that wrote it.
#[derive(Clone, Copy, Debug)]
pub struct Origin {
    /// When it was written, in Unix seconds (`ctime`).
    pub ctime_s: u64,
    /// The memory the database took (`used-mem`).
    pub used_mem_bytes: u64,
}

/// Writes a file as Redis 7.0.15's `SAVE` does: the header on [`FileWriter::new`], then the
/// libraries, one database's keys, and [`FileWriter::finish`].
#[derive(Debug)]
pub struct FileWriter<W> {
    out: W,
    crc: u64,
    buf: Writer,
}

/// The version Redis 7.0.15 writes in its `redis-ver` AUX field.
pub const REDIS_VERSION_AUX: &str = "7.0.15";

impl<W: Write> FileWriter<W> {
    /// Writes the magic, the version and the AUX fields to `out`.
    pub fn new(out: W, origin: Origin) -> std::io::Result<FileWriter<W>> {
        let mut writer = FileWriter {
            out,
            crc: 0,
            buf: Writer::default(),
        };
        writer
            .buf
            .bytes
            .extend_from_slice(format!("REDIS{RDB_VERSION:04}").as_bytes());
        for (key, value) in [
            ("redis-ver", REDIS_VERSION_AUX.to_owned()),
            ("redis-bits", "64".to_owned()),
            ("ctime", origin.ctime_s.to_string()),
            ("used-mem", origin.used_mem_bytes.to_string()),
            ("aof-base", "0".to_owned()),
        ] {
            writer.buf.bytes.push(OPCODE_AUX);
            writer.buf.string(key.as_bytes());
            writer.buf.string(value.as_bytes());
        }
        writer.flush()?;
        Ok(writer)
    }

    /// Writes what is buffered, adding it to the checksum.
    fn flush(&mut self) -> std::io::Result<()> {
        self.crc = crc64_extend(self.crc, &self.buf.bytes);
        self.out.write_all(&self.buf.bytes)?;
        self.buf.bytes.clear();
        Ok(())
    }

    /// A function library (`code` as `FUNCTION LOAD` was given it).
    pub fn function(&mut self, code: &[u8]) -> std::io::Result<()> {
        self.buf.bytes.push(OPCODE_FUNCTION2);
        self.buf.string(code);
        self.flush()
    }

    /// Starts database `db`, which holds `keys` keys, `expires` of them with an expiry.
    pub fn database(&mut self, db: u64, keys: u64, expires: u64) -> std::io::Result<()> {
        self.buf.bytes.push(OPCODE_SELECTDB);
        self.buf.len(db);
        self.buf.bytes.push(OPCODE_RESIZEDB);
        self.buf.len(keys);
        self.buf.len(expires);
        self.flush()
    }

    /// A key, its value held as `encoding`, and its expiry (Unix milliseconds), if any.
    pub fn key(
        &mut self,
        key: &[u8],
        expire_at_ms: Option<u64>,
        value: &Value,
        encoding: Encoding,
    ) -> std::io::Result<()> {
        if let Some(ms) = expire_at_ms {
            self.buf.bytes.push(OPCODE_EXPIRETIME_MS);
            self.buf.bytes.extend_from_slice(&ms.to_le_bytes());
        }
        // The type byte comes first in the body, the key between them.
        let body = save::value(value, encoding);
        self.buf.bytes.push(body[0]);
        self.buf.string(key);
        self.buf.bytes.extend_from_slice(&body[1..]);
        self.flush()
    }

    /// Writes the EOF record and the checksum; returns the output.
    pub fn finish(mut self) -> std::io::Result<W> {
        self.buf.bytes.push(OPCODE_EOF);
        self.flush()?;
        self.out.write_all(&self.crc.to_le_bytes())?;
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn origin() -> Origin {
        Origin {
            ctime_s: 1_700_000_000,
            used_mem_bytes: 1 << 20,
        }
    }

    fn read_all(bytes: &[u8]) -> Result<Vec<Record>, FileError> {
        let mut reader = FileReader::new(bytes, Some(bytes.len() as u64))?;
        let mut records = Vec::new();
        while let Some(record) = reader.next_record()? {
            records.push(record);
        }
        Ok(records)
    }

    #[test]
    fn a_written_file_reads_back() {
        let mut writer = FileWriter::new(Vec::new(), origin()).unwrap();
        writer.function(b"#!lua name=a\nreturn 1").unwrap();
        writer.database(0, 2, 1).unwrap();
        let list = Value::List(vec![b"a".to_vec(), b"b".to_vec()]);
        writer
            .key(b"k", Some(1 << 42), &list, Encoding::Quicklist)
            .unwrap();
        let string = Value::String(b"12".to_vec());
        writer.key(b"s", None, &string, Encoding::Int).unwrap();
        let file = writer.finish().unwrap();
        assert!(file.starts_with(b"REDIS0010"));
        let records = read_all(&file).unwrap();
        assert!(matches!(&records[0], Record::Aux { key, .. } if key == b"redis-ver"));
        let keys: Vec<_> = FileReader::new(file.as_slice(), None)
            .unwrap()
            .collect::<Result<_, _>>()
            .unwrap();
        assert_eq!(keys.len(), 2);
        assert_eq!(keys[0].key, b"k");
        assert_eq!(keys[0].expire_at_ms, Some(1 << 42));
        assert_eq!(keys[0].value, list);
        assert_eq!(super::super::parse(&keys[0].payload()).unwrap().0, list);
        assert_eq!((keys[1].expire_at_ms, &keys[1].value), (None, &string));
    }

    #[test]
    fn damage_is_named_with_its_offset() {
        let mut writer = FileWriter::new(Vec::new(), origin()).unwrap();
        writer.database(0, 1, 0).unwrap();
        writer
            .key(b"k", None, &Value::String(b"v".to_vec()), Encoding::Embstr)
            .unwrap();
        let file = writer.finish().unwrap();
        let cut = &file[..file.len() - 3];
        let err = read_all(cut).unwrap_err();
        assert!(matches!(err.kind, FileErrorKind::Truncated), "{err}");
        let mut flipped = file.clone();
        let at = flipped.len() - 12;
        flipped[at] ^= 0x40;
        let err = read_all(&flipped).unwrap_err();
        assert!(matches!(err.kind, FileErrorKind::Checksum { .. }), "{err}");
        let mut zero = file.clone();
        let len = zero.len();
        zero[len - 8..].fill(0);
        assert!(read_all(&zero).is_ok(), "a zero checksum is not checked");
        let newer = [b"REDIS0011".as_slice(), &file[9..]].concat();
        let err = read_all(&newer).unwrap_err();
        assert!(err.to_string().contains("newer than 7.0"), "{err}");
        assert!(matches!(
            read_all(b"RUBBISH").unwrap_err().kind,
            FileErrorKind::NotRdb
        ));
    }
}
