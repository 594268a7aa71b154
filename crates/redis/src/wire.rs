//! What a connection sends the model in a call, and what `WATCH` gets back.
//!
//! These bytes travel in replicated calls and are decoded by whichever node is primary, so
//! every decoder is strict: a malformed or trailing byte is an error, never a panic, and no
//! length in the input reserves memory the input could not fill.
//!
//! ```text
//! a command   [proto u8: 2 | 3, | 0x10 may block, | 0x20 awakened][argv]
//!                                                            (argv: Argv::encode)
//! an EXEC     [proto u8][watched keys: argv][versions: u64 LE × keys]
//!             [command count: varint]([proto u8][byte length: varint][argv])×count
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
    pub fn encode(proto: Proto, argv: &Argv, out: &mut Vec<u8>) {
        out.push(proto_byte(proto));
        argv.encode(out);
    }

    /// A blocking command's call for a connection that waits when nothing serves it.
    pub fn encode_may_block(proto: Proto, argv: &Argv, out: &mut Vec<u8>) {
        out.push(proto_byte(proto) | MAY_BLOCK);
        argv.encode(out);
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
        args.clear();
        args.push(proto_byte(proto) | flags);
        replaced.encode(args);
        true
    }

    /// Decodes a command's call into `argv`; returns its protocol.
    pub fn decode_into(bytes: &[u8], argv: &mut Argv) -> Result<Proto, Malformed> {
        let (&first, rest) = bytes
            .split_first()
            .ok_or(Malformed("empty call arguments"))?;
        let waiting = first & (MAY_BLOCK | AWAKENED);
        if waiting == AWAKENED {
            return Err(Malformed("a call is awakened that may not block"));
        }
        let proto = proto_from(first & !waiting)?;
        *argv = Argv::decode(rest).map_err(|_| Malformed("the arguments do not decode"))?;
        Ok(proto)
    }
}

/// A `MULTI` … `EXEC` block: the keys it watched with the versions seen, and its data
/// commands, each with the protocol it answers in (a `HELLO` queued before it may have
/// switched the connection's). The block's first protocol answers an aborted `EXEC`.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ExecArgs {
    proto: Option<Proto>,
    watched_keys: Argv,
    versions: Vec<u64>,
    commands: Vec<(Proto, Argv)>,
}

impl ExecArgs {
    pub fn encode(
        proto: Proto,
        watched: &[(Vec<u8>, u64)],
        commands: &[(Proto, Argv)],
        out: &mut Vec<u8>,
    ) {
        out.push(proto_byte(proto));
        let mut keys = Argv::new();
        for (key, _) in watched {
            keys.push(key);
        }
        keys.encode(out);
        for (_, version) in watched {
            out.extend_from_slice(&version.to_le_bytes());
        }
        put_varint(commands.len() as u64, out);
        let mut one = Vec::new();
        for (command_proto, argv) in commands {
            one.clear();
            argv.encode(&mut one);
            out.push(proto_byte(*command_proto));
            put_varint(one.len() as u64, out);
            out.extend_from_slice(&one);
        }
    }

    pub fn decode(bytes: &[u8]) -> Result<ExecArgs, Malformed> {
        let (&first, _) = bytes
            .split_first()
            .ok_or(Malformed("empty EXEC arguments"))?;
        let proto = proto_from(first)?;
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
        let count = get_varint(bytes, &mut at)?;
        let mut commands = Vec::new();
        for _ in 0..count {
            let command_proto = proto_from(
                *bytes
                    .get(at)
                    .ok_or(Malformed("a command's protocol runs past the end"))?,
            )?;
            at += 1;
            let len = usize::try_from(get_varint(bytes, &mut at)?)
                .map_err(|_| Malformed("a command is too long"))?;
            let end = at
                .checked_add(len)
                .filter(|&end| end <= bytes.len())
                .ok_or(Malformed("a command runs past the end"))?;
            let argv = Argv::decode(&bytes[at..end])
                .map_err(|_| Malformed("a queued command does not decode"))?;
            commands.push((command_proto, argv));
            at = end;
        }
        if at != bytes.len() {
            return Err(Malformed("bytes follow the last command"));
        }
        Ok(ExecArgs {
            proto: Some(proto),
            watched_keys,
            versions,
            commands,
        })
    }

    pub fn proto(&self) -> Proto {
        self.proto.expect("a decoded EXEC has a protocol")
    }

    pub fn watched(&self) -> impl Iterator<Item = (&[u8], u64)> {
        self.watched_keys.iter().zip(self.versions.iter().copied())
    }

    pub fn commands(&self) -> &[(Proto, Argv)] {
        &self.commands
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
        let mut argv = Argv::new();
        for arg in args {
            argv.push(arg.as_bytes());
        }
        argv
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
        let seen: Vec<(Vec<u8>, u64)> = exec.watched().map(|(k, v)| (k.to_vec(), v)).collect();
        assert_eq!(seen, watched);
        assert_eq!(exec.commands(), &commands[..]);
        for cut in 0..bytes.len() {
            assert!(ExecArgs::decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        bytes.push(0);
        assert!(ExecArgs::decode(&bytes).is_err());
    }

    #[test]
    fn versions_round_trip() {
        let mut bytes = Vec::new();
        encode_versions(&[1, 0, u64::MAX], &mut bytes);
        assert_eq!(decode_versions(&bytes).unwrap(), vec![1, 0, u64::MAX]);
        assert!(decode_versions(&bytes[..bytes.len() - 1]).is_err());
    }
}
