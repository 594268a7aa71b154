//! What a connection sends the model in a call, and what `WATCH` gets back.
//!
//! These bytes travel in replicated calls and are decoded by whichever node is primary, so
//! every decoder is strict: a malformed or trailing byte is an error, never a panic, and no
//! length in the input reserves memory the input could not fill.
//!
//! ```text
//! a command   [proto u8: 2 | 3, | 0x10 may block, | 0x20 awakened, | 0x40 in a db]
//!             [db u8, if 0x40: 1 to 15][argv]                (argv: Argv::encode)
//! an EXEC     [proto u8, | 0x40: watched keys in dbs][watched keys: argv]
//!             [versions: u64 LE × keys][dbs: u8 × keys, if 0x40]
//!             [command count: varint]([proto u8 | 0x40][db u8, if 0x40][byte length: varint]
//!             [argv])×count
//! versions    [count: varint][u64 LE × count]                (the WATCH procedure's reply)
//! ```
//!
//! A watched key's "version" word is the model's to read (`model::Watched`: the key's
//! version, or the LSN at which it was absent); the session keeps it and sends it back.

use crate::resp::{Argv, Proto};

/// A call's bytes do not decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("malformed call arguments: {0}")]
pub struct Malformed(&'static str);

fn proto_from(byte: u8) -> Result<Proto, Malformed> {
    match byte {
        2 => Ok(Proto::Resp2),
        3 => Ok(Proto::Resp3),
        _ => Err(Malformed("the protocol byte is neither 2 nor 3")),
    }
}

fn proto_byte(proto: Proto) -> u8 {
    match proto {
        Proto::Resp2 => 2,
        Proto::Resp3 => 3,
    }
}

pub fn put_varint(mut n: u64, out: &mut Vec<u8>) {
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}

/// Reads a LEB128 varint at `*at`, advancing it.
pub fn get_varint(bytes: &[u8], at: &mut usize) -> Result<u64, Malformed> {
    let mut n = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *bytes
            .get(*at)
            .ok_or(Malformed("a varint runs past the end"))?;
        *at += 1;
        n |= u64::from(byte & 0x7f) << shift;
        if byte & 0x80 == 0 {
            return Ok(n);
        }
    }
    Err(Malformed("a varint is longer than 64 bits"))
}

/// The protocol byte's flag of a blocking command's call made for a connection that may
/// wait (see [`crate::cmd::blocking`]): with nothing to serve it, the call fails with
/// [`crate::cmd::blocking::WOULD_BLOCK`] instead of answering a null.
const MAY_BLOCK: u8 = 0x10;
/// The protocol byte's flag of a blocking call tried again after a write: it already
/// blocked, so a key that now holds another type is passed over rather than refused.
const AWAKENED: u8 = 0x20;

/// The protocol byte's flag of a call in a database other than 0 (`SELECT`): the database's
/// number follows the byte. A call in database 0 has no such byte, as before databases.
const IN_DB: u8 = 0x40;

/// Writes a protocol byte (with `flags`) and, for a database other than 0, its number.
fn put_head(proto: Proto, flags: u8, db: u8, out: &mut Vec<u8>) {
    assert!(db < crate::db::DB_COUNT, "database {db} does not exist");
    if db == 0 {
        out.push(proto_byte(proto) | flags);
    } else {
        out.push(proto_byte(proto) | flags | IN_DB);
        out.push(db);
    }
}

/// Reads a database number after a protocol byte with [`IN_DB`], at `*at`.
fn get_db(bytes: &[u8], at: &mut usize) -> Result<u8, Malformed> {
    let db = *bytes
        .get(*at)
        .ok_or(Malformed("a database number runs past the end"))?;
    if db == 0 || db >= crate::db::DB_COUNT {
        return Err(Malformed("a database number is out of range"));
    }
    *at += 1;
    Ok(db)
}

/// How a blocking command's call may wait (see [`crate::cmd::blocking`]); every other
/// call is [`Waiting::Never`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Waiting {
    /// It answers at once: a null when nothing serves it (inside `MULTI`, a script).
    #[default]
    Never,
    /// Its connection waits if nothing serves it.
    MayBlock,
    /// Its connection waits already and a write may now serve it.
    Awakened,
}

/// A single command's call.
#[derive(Debug)]
pub struct CallArgs;

impl CallArgs {
    /// A command's call in database 0.
    pub fn encode(proto: Proto, argv: &Argv, out: &mut Vec<u8>) {
        CallArgs::encode_in(proto, 0, argv, out);
    }

    /// A command's call in database `db`.
    pub fn encode_in(proto: Proto, db: u8, argv: &Argv, out: &mut Vec<u8>) {
        // The head's two bytes at most and the arguments, in one allocation.
        out.reserve(2 + argv.encoded_len_hint());
        put_head(proto, 0, db, out);
        argv.encode(out);
    }

    /// A blocking command's call in database `db` for a connection that waits when nothing
    /// serves it.
    pub fn encode_may_block(proto: Proto, db: u8, argv: &Argv, out: &mut Vec<u8>) {
        out.reserve(2 + argv.encoded_len_hint());
        put_head(proto, MAY_BLOCK, db, out);
        argv.encode(out);
    }

    /// The database the encoded call `args` runs in (0 if it does not decode: the call
    /// itself then fails to).
    pub fn db(args: &[u8]) -> u8 {
        match args.first() {
            Some(&first) if first & IN_DB != 0 => get_db(args, &mut 1).unwrap_or(0),
            _ => 0,
        }
    }

    /// Marks the encoded call `args` as tried again after its connection blocked.
    pub fn set_awakened(args: &mut [u8]) {
        assert!(
            args.first().is_some_and(|&first| first & MAY_BLOCK != 0),
            "only a call that may block is awakened"
        );
        args[0] |= AWAKENED;
    }

    /// How the encoded call `args` may wait.
    pub fn waiting(args: &[u8]) -> Waiting {
        match args.first().map(|&first| first & (MAY_BLOCK | AWAKENED)) {
            Some(flags) if flags & AWAKENED != 0 => Waiting::Awakened,
            Some(MAY_BLOCK) => Waiting::MayBlock,
            _ => Waiting::Never,
        }
    }

    /// Puts `last` in place of the encoded call's last arguments, its flags kept: a stream
    /// read that waits reads after the IDs its first try resolved
    /// ([`crate::cmd::blocking::would_block_after`]). False, changing nothing, if the call
    /// does not decode or has fewer arguments.
    pub fn replace_last(args: &mut Vec<u8>, last: &[&str]) -> bool {
        let mut argv = Argv::new();
        let Ok(proto) = CallArgs::decode_into(args, &mut argv) else {
            return false;
        };
        let Some(kept) = argv.len().checked_sub(last.len()) else {
            return false;
        };
        let mut replaced = Argv::new();
        for arg in argv.iter().take(kept) {
            replaced.push(arg);
        }
        for arg in last {
            replaced.push(arg.as_bytes());
        }
        let flags = args[0] & (MAY_BLOCK | AWAKENED);
        let db = CallArgs::db(args);
        args.clear();
        put_head(proto, flags, db, args);
        replaced.encode(args);
        true
    }

    /// Decodes a command's call into `argv`, reusing its space; returns its protocol.
    pub fn decode_into(bytes: &[u8], argv: &mut Argv) -> Result<Proto, Malformed> {
        let (&first, rest) = bytes
            .split_first()
            .ok_or(Malformed("empty call arguments"))?;
        let waiting = first & (MAY_BLOCK | AWAKENED);
        if waiting == AWAKENED {
            return Err(Malformed("a call is awakened that may not block"));
        }
        let proto = proto_from(first & !(waiting | IN_DB))?;
        let rest = if first & IN_DB != 0 {
            get_db(bytes, &mut 1)?;
            &rest[1..]
        } else {
            rest
        };
        argv.decode_from(rest)
            .map_err(|_| Malformed("the arguments do not decode"))?;
        Ok(proto)
    }
}

/// A block's commands, each with the protocol it answers in.
type Commands = Vec<(Proto, Argv)>;

/// A `MULTI` … `EXEC` block: the keys it watched with the versions seen, and its data
/// commands, each with the protocol it answers in (a `HELLO` queued before it may have
/// switched the connection's) and the database it runs in (a `SELECT` before it may have
/// switched that). The block's first protocol answers an aborted `EXEC`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecArgs {
    proto: Option<Proto>,
    watched_keys: Argv,
    versions: Vec<u64>,
    /// The database of each watched key.
    watched_dbs: Vec<u8>,
    commands: Vec<(Proto, Argv)>,
    /// The database of each command.
    dbs: Vec<u8>,
}

impl ExecArgs {
    /// A block in database 0: its watched keys and commands.
    pub fn encode(
        proto: Proto,
        watched: &[(Vec<u8>, u64)],
        commands: &[(Proto, Argv)],
        out: &mut Vec<u8>,
    ) {
        let watched: Vec<(Vec<u8>, u64, u8)> = watched
            .iter()
            .map(|(key, v)| (key.clone(), *v, 0))
            .collect();
        let commands: Vec<(Proto, u8, Argv)> = commands
            .iter()
            .map(|(proto, argv)| (*proto, 0, argv.clone()))
            .collect();
        ExecArgs::encode_in(proto, &watched, &commands, out);
    }

    /// A block whose watched keys (key, version, database) and commands (protocol,
    /// database, arguments) each name their database.
    pub fn encode_in(
        proto: Proto,
        watched: &[(Vec<u8>, u64, u8)],
        commands: &[(Proto, u8, Argv)],
        out: &mut Vec<u8>,
    ) {
        let in_dbs = watched.iter().any(|&(_, _, db)| db != 0);
        out.push(proto_byte(proto) | if in_dbs { IN_DB } else { 0 });
        let mut keys = Argv::new();
        for (key, _, _) in watched {
            keys.push(key);
        }
        keys.encode(out);
        for (_, version, _) in watched {
            out.extend_from_slice(&version.to_le_bytes());
        }
        if in_dbs {
            out.extend(watched.iter().map(|&(_, _, db)| {
                assert!(db < crate::db::DB_COUNT, "database {db} does not exist");
                db
            }));
        }
        put_varint(commands.len() as u64, out);
        let mut one = Vec::new();
        for (command_proto, db, argv) in commands {
            one.clear();
            argv.encode(&mut one);
            put_head(*command_proto, 0, *db, out);
            put_varint(one.len() as u64, out);
            out.extend_from_slice(&one);
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<ExecArgs, Malformed> {
        let (&first, _) = bytes
            .split_first()
            .ok_or(Malformed("empty EXEC arguments"))?;
        let proto = proto_from(first & !IN_DB)?;
        // The watched keys' argv is followed by more, so find its end by decoding a prefix.
        let mut at = 1;
        let key_count = get_varint(bytes, &mut at)?;
        for _ in 0..key_count {
            let len = get_varint(bytes, &mut at)?;
            at = at
                .checked_add(usize::try_from(len).map_err(|_| Malformed("a key is too long"))?)
                .filter(|&end| end <= bytes.len())
                .ok_or(Malformed("a watched key runs past the end"))?;
        }
        let watched_keys =
            Argv::decode(&bytes[1..at]).map_err(|_| Malformed("the watched keys do not decode"))?;
        let mut versions = Vec::new();
        for _ in 0..watched_keys.len() {
            let word = bytes
                .get(at..at + 8)
                .ok_or(Malformed("a version runs past the end"))?;
            versions.push(u64::from_le_bytes(word.try_into().expect("eight bytes")));
            at += 8;
        }
        let mut watched_dbs = vec![0; watched_keys.len()];
        if first & IN_DB != 0 {
            for db in &mut watched_dbs {
                *db = *bytes
                    .get(at)
                    .ok_or(Malformed("a watched key's database runs past the end"))?;
                if *db >= crate::db::DB_COUNT {
                    return Err(Malformed("a database number is out of range"));
                }
                at += 1;
            }
        }
        let (commands, dbs) = ExecArgs::decode_commands(bytes, &mut at)?;
        if at != bytes.len() {
            return Err(Malformed("bytes follow the last command"));
        }
        Ok(ExecArgs {
            proto: Some(proto),
            watched_keys,
            versions,
            watched_dbs,
            commands,
            dbs,
        })
    }

    /// The block's commands from `*at` on, and their databases.
    fn decode_commands(bytes: &[u8], at: &mut usize) -> Result<(Commands, Vec<u8>), Malformed> {
        let count = get_varint(bytes, at)?;
        let mut commands = Vec::new();
        let mut dbs = Vec::new();
        for _ in 0..count {
            let head = *bytes
                .get(*at)
                .ok_or(Malformed("a command's protocol runs past the end"))?;
            let command_proto = proto_from(head & !IN_DB)?;
            *at += 1;
            dbs.push(if head & IN_DB != 0 {
                get_db(bytes, at)?
            } else {
                0
            });
            let len = usize::try_from(get_varint(bytes, at)?)
                .map_err(|_| Malformed("a command is too long"))?;
            let end = at
                .checked_add(len)
                .filter(|&end| end <= bytes.len())
                .ok_or(Malformed("a command runs past the end"))?;
            let argv = Argv::decode(&bytes[*at..end])
                .map_err(|_| Malformed("a queued command does not decode"))?;
            commands.push((command_proto, argv));
            *at = end;
        }
        Ok((commands, dbs))
    }

    pub fn proto(&self) -> Proto {
        self.proto.expect("a decoded EXEC has a protocol")
    }

    /// Each watched key, the version seen, and its database.
    pub fn watched(&self) -> impl Iterator<Item = (&[u8], u64, u8)> {
        self.watched_keys
            .iter()
            .zip(self.versions.iter().copied())
            .zip(self.watched_dbs.iter().copied())
            .map(|((key, version), db)| (key, version, db))
    }

    pub fn commands(&self) -> &[(Proto, Argv)] {
        &self.commands
    }

    /// The database of each of [`ExecArgs::commands`].
    pub fn dbs(&self) -> &[u8] {
        &self.dbs
    }
}

pub fn encode_versions(versions: &[u64], out: &mut Vec<u8>) {
    put_varint(versions.len() as u64, out);
    for version in versions {
        out.extend_from_slice(&version.to_le_bytes());
    }
}

pub fn decode_versions(bytes: &[u8]) -> Result<Vec<u64>, Malformed> {
    let mut at = 0;
    let count = get_varint(bytes, &mut at)?;
    let rest = &bytes[at..];
    if (rest.len() as u64) != count.saturating_mul(8) {
        return Err(Malformed("the versions' count does not match their bytes"));
    }
    Ok(rest
        .chunks_exact(8)
        .map(|word| u64::from_le_bytes(word.try_into().expect("eight bytes")))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Argv {
        Argv::of_words(args)
    }

    #[test]
    fn an_exec_round_trips_and_refuses_every_truncation() {
        let watched = vec![(b"a".to_vec(), 7), (b"bb".to_vec(), 0)];
        let commands = vec![
            (Proto::Resp3, argv(&["SET", "a", "1"])),
            (Proto::Resp2, argv(&["INCR", "bb"])),
        ];
        let mut bytes = Vec::new();
        ExecArgs::encode(Proto::Resp3, &watched, &commands, &mut bytes);
        let exec = ExecArgs::decode(&bytes).unwrap();
        assert_eq!(exec.proto(), Proto::Resp3);
        let seen: Vec<(Vec<u8>, u64)> = exec.watched().map(|(k, v, _)| (k.to_vec(), v)).collect();
        assert_eq!(seen, watched);
        assert_eq!(exec.commands(), &commands[..]);
        for cut in 0..bytes.len() {
            assert!(ExecArgs::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        bytes.push(0);
        assert!(ExecArgs::decode(&bytes).is_err());
    }

    /// A call in a database other than 0 carries its number; database 0's encoding is the
    /// one calls had before databases; a number out of range or cut off is refused.
    #[test]
    fn a_call_names_its_database_and_a_bad_number_is_refused() {
        let words = argv(&["GET", "k"]);
        let mut plain = Vec::new();
        CallArgs::encode(Proto::Resp2, &words, &mut plain);
        let mut zero = Vec::new();
        CallArgs::encode_in(Proto::Resp2, 0, &words, &mut zero);
        assert_eq!(plain, zero);
        assert_eq!(CallArgs::db(&plain), 0);
        let mut in_db = Vec::new();
        CallArgs::encode_may_block(Proto::Resp3, 15, &words, &mut in_db);
        assert_eq!(CallArgs::db(&in_db), 15);
        let mut decoded = Argv::new();
        assert_eq!(
            CallArgs::decode_into(&in_db, &mut decoded),
            Ok(Proto::Resp3)
        );
        assert_eq!(decoded, words);
        assert_eq!(CallArgs::waiting(&in_db), Waiting::MayBlock);
        assert!(CallArgs::replace_last(&mut in_db, &["j"]));
        assert_eq!(
            CallArgs::db(&in_db),
            15,
            "replacing arguments keeps the database"
        );
        for bad in [0u8, 16, 255] {
            let mut bytes = in_db.clone();
            bytes[1] = bad;
            assert!(
                CallArgs::decode_into(&bytes, &mut decoded).is_err(),
                "db {bad}"
            );
        }
        assert!(CallArgs::decode_into(&in_db[..1], &mut decoded).is_err());
    }

    #[test]
    fn a_block_names_each_command_s_and_watched_key_s_database() {
        let watched = vec![(b"a".to_vec(), 7, 0), (b"b".to_vec(), 9, 3)];
        let commands = vec![
            (Proto::Resp2, 0, argv(&["SET", "a", "1"])),
            (Proto::Resp3, 12, argv(&["GET", "b"])),
        ];
        let mut bytes = Vec::new();
        ExecArgs::encode_in(Proto::Resp2, &watched, &commands, &mut bytes);
        let exec = ExecArgs::decode(&bytes).unwrap();
        let seen: Vec<(Vec<u8>, u64, u8)> = exec
            .watched()
            .map(|(k, v, db)| (k.to_vec(), v, db))
            .collect();
        assert_eq!(seen, watched);
        assert_eq!(exec.dbs(), &[0, 12]);
        assert_eq!(exec.commands()[1], (Proto::Resp3, argv(&["GET", "b"])));
        for cut in 0..bytes.len() {
            assert!(ExecArgs::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn versions_round_trip() {
        let mut bytes = Vec::new();
        encode_versions(&[1, 0, u64::MAX], &mut bytes);
        assert_eq!(decode_versions(&bytes).unwrap(), vec![1, 0, u64::MAX]);
        assert!(decode_versions(&bytes[..bytes.len() - 1]).is_err());
    }
}
