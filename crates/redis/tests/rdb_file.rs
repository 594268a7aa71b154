//! Whole RDB files ([`tandem_redis::rdb::file`]): the file redis-server 7.0.15 saved of keys
//! of every type and encoding (`fixtures/rdb_redis_7_0_15.rdb`, recorded by
//! `tools/record_rdb.py` with what the server held: each key's type, encoding, expiry and
//! `DUMP` payload, and `FUNCTION DUMP`) read back key by key; the writer's files read back;
//! and mutated files, which never panic the reader.

use std::collections::BTreeMap;
use std::io::BufReader;

use proptest::prelude::*;
use tandem_fuzzkit::mutate;
use tandem_redis::rdb::file::{FileErrorKind, FileReader, FileWriter, KeyRecord, Origin, Record};
use tandem_redis::rdb::{self, Value};

const FILE: &[u8] = include_bytes!("fixtures/rdb_redis_7_0_15.rdb");
const HELD: &str = include_str!("fixtures/rdb_redis_7_0_15.txt");

/// What the server held of one key when it saved the file.
#[derive(Debug)]
struct Held {
    kind: String,
    encoding: String,
    /// `PEXPIRETIME`: -1 without an expiry.
    expire_at_ms: i64,
    dump: Vec<u8>,
}

fn unhex(text: &str) -> Vec<u8> {
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(&text[at..at + 2], 16).expect("hex"))
        .collect()
}

/// The fixture's keys, and the libraries' `FUNCTION DUMP` payload.
fn held() -> (BTreeMap<Vec<u8>, Held>, Vec<u8>) {
    let mut keys = BTreeMap::new();
    let mut functions = Vec::new();
    for line in HELD.lines() {
        let fields: Vec<&str> = line.split(' ').collect();
        if fields[0] == "functions" {
            functions = unhex(fields[1]);
            continue;
        }
        let held = Held {
            kind: fields[1].to_owned(),
            encoding: fields[2].to_owned(),
            expire_at_ms: fields[3].parse().expect("an expiry"),
            dump: unhex(fields[4]),
        };
        keys.insert(unhex(fields[0]), held);
    }
    (keys, functions)
}

/// Every record of `file`, read from a buffered reader that does not know its length.
fn records(file: &[u8]) -> Result<Vec<Record>, tandem_redis::rdb::file::FileError> {
    let mut reader = FileReader::new(BufReader::with_capacity(64, file), None)?;
    let mut all = Vec::new();
    while let Some(record) = reader.next_record()? {
        all.push(record);
    }
    Ok(all)
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::String(_) => "string",
        Value::List(_) => "list",
        Value::Set(_) => "set",
        Value::ZSet(_) => "zset",
        Value::Hash(_) => "hash",
        Value::Stream(_) => "stream",
    }
}

/// Checks each key read from a file against what the server held: its type, its value (as
/// the server's own `DUMP` payload parses), its encoding and its expiry; and that the file
/// holds every key the server did, once.
fn check_against_server(keys: &[KeyRecord], held: &BTreeMap<Vec<u8>, Held>) {
    let mut seen = BTreeMap::new();
    for record in keys {
        let name = String::from_utf8_lossy(&record.key).into_owned();
        let expected = held
            .get(&record.key)
            .unwrap_or_else(|| panic!("the file holds key {name}, the server did not"));
        let (value, _) = rdb::parse(&expected.dump).expect("the server's payload parses");
        assert_eq!(type_name(&record.value), expected.kind, "{name}");
        assert_eq!(sorted(&record.value), sorted(&value), "{name}");
        assert_eq!(record.encoding.name(), expected.encoding, "{name}");
        let expire = record.expire_at_ms.unwrap_or(-1);
        assert_eq!(expire, expected.expire_at_ms, "{name}'s expiry");
        assert_eq!(record.db, 0, "{name}");
        // What a file's key gives RESTORE parses to the same value.
        let (again, _) = rdb::parse(&record.payload()).expect("the payload parses");
        assert_eq!(sorted(&again), sorted(&value), "{name}");
        assert!(
            seen.insert(record.key.clone(), ()).is_none(),
            "{name} twice"
        );
    }
    assert_eq!(
        seen.len(),
        held.len(),
        "every key the server held is in the file"
    );
}

/// `value` with its members in one order (a set's and a hash's order is the table's).
fn sorted(value: &Value) -> Value {
    let mut value = value.clone();
    match &mut value {
        Value::Set(members) => members.sort(),
        Value::Hash(pairs) => pairs.sort_by(|a, b| a.0.cmp(&b.0)),
        Value::ZSet(pairs) => pairs.sort_by(|a, b| a.0.cmp(&b.0)),
        _ => {}
    }
    value
}

fn library_codes(payload: &[u8]) -> Vec<Vec<u8>> {
    let mut codes: Vec<Vec<u8>> = rdb::functions::Records::new(payload)
        .expect("a good footer")
        .collect::<Result<_, _>>()
        .expect("the libraries parse");
    codes.sort();
    codes
}

fn keys_of(records: Vec<Record>) -> (Vec<KeyRecord>, Vec<Vec<u8>>) {
    let mut keys = Vec::new();
    let mut codes = Vec::new();
    for record in records {
        match record {
            Record::Key(key) => keys.push(*key),
            Record::Function { code } => codes.push(code),
            _ => {}
        }
    }
    codes.sort();
    (keys, codes)
}

#[test]
fn redis_s_file_reads_back_as_the_server_held_it() {
    let (held, functions) = held();
    let records = records(FILE).expect("redis-server's file reads");
    let aux: Vec<Vec<u8>> = records
        .iter()
        .filter_map(|record| match record {
            Record::Aux { key, .. } => Some(key.clone()),
            _ => None,
        })
        .collect();
    assert!(aux.contains(&b"redis-ver".to_vec()), "{aux:?}");
    let (keys, codes) = keys_of(records);
    check_against_server(&keys, &held);
    assert_eq!(codes, library_codes(&functions));
    // The iterator gives the keys alone, in the same order.
    let reader = FileReader::new(FILE, Some(FILE.len() as u64)).unwrap();
    let names: Vec<Vec<u8>> = reader.map(|key| key.unwrap().key).collect();
    let expected: Vec<Vec<u8>> = keys.iter().map(|key| key.key.clone()).collect();
    assert_eq!(names, expected);
}

/// The writer's file of the server's keys reads back as the server held them.
#[test]
fn the_writer_s_file_reads_back() {
    let (held, functions) = held();
    let (keys, codes) = keys_of(records(FILE).unwrap());
    let origin = Origin {
        ctime_s: 1_700_000_000,
        used_mem_bytes: 1 << 20,
    };
    let mut writer = FileWriter::new(Vec::new(), origin).unwrap();
    for code in &codes {
        writer.function(code).unwrap();
    }
    let expires = keys.iter().filter(|k| k.expire_at_ms.is_some()).count();
    writer
        .database(0, keys.len() as u64, expires as u64)
        .unwrap();
    for key in &keys {
        let expire = key.expire_at_ms.map(|ms| ms as u64);
        writer
            .key(&key.key, expire, &key.value, key.encoding)
            .unwrap();
    }
    let file = writer.finish().unwrap();
    let (again, codes_again) = keys_of(records(&file).expect("the writer's file reads"));
    check_against_server(&again, &held);
    assert_eq!(codes_again, library_codes(&functions));
}

#[test]
fn a_damaged_file_is_refused_with_its_offset() {
    let mut flipped = FILE.to_vec();
    let at = FILE.len() / 2;
    flipped[at] ^= 0xff;
    let err = records(&flipped).expect_err("a flipped byte is found");
    assert!(err.offset <= FILE.len() as u64, "{err}");
    let cut = &FILE[..FILE.len() / 3];
    let err = records(cut).expect_err("a cut file is found");
    assert!(matches!(err.kind, FileErrorKind::Truncated), "{err}");
    assert!(err.to_string().contains("cut short"), "{err}");
}

/// `FILE` with its checksum zeroed ("not computed"), so a mutation reaches the parser of
/// what follows it instead of stopping at the checksum.
fn unchecked(file: &[u8]) -> Vec<u8> {
    let mut file = file.to_vec();
    let len = file.len();
    file[len - 8..].fill(0);
    file
}

proptest! {
    #![proptest_config(tandem_fuzzkit::config(300))]

    #[test]
    fn mutated_files_never_panic(edits in proptest::collection::vec(
        (any::<prop::sample::Index>(), any::<u8>(), any::<u8>()), 1..4)) {
        for base in [FILE.to_vec(), unchecked(FILE)] {
            let damaged = mutate(base, &edits);
            if let Ok(records) = records(&damaged) {
                // What reads whole gives payloads that parse.
                for record in records {
                    if let Record::Key(key) = record {
                        prop_assert!(rdb::parse(&key.payload()).is_ok());
                    }
                }
            }
        }
    }

    #[test]
    fn arbitrary_bodies_never_panic(body in proptest::collection::vec(any::<u8>(), 0..400)) {
        let file = [b"REDIS0010".as_slice(), &body].concat();
        let _ = records(&file);
        let _ = FileReader::new(body.as_slice(), Some(body.len() as u64)).map(|r| r.count());
    }
}
