//! `SYNC`, `PSYNC` and `REPLCONF` (replication.c): what `redis-cli --rdb FILE` asks for, the
//! whole database as an RDB file ([`crate::rdb::file`]), so Redis's own tools read it.
//!
//! `SYNC` and `PSYNC` are reads: one call writes every live key (its value, its encoding,
//! its expiry) and every function library at one point of the history (a primary's
//! segment, or a backup's, linearizably), so the file is a true snapshot. The model answers
//! an array of that point's LSN and the file; the session frames it as Redis starts its
//! replication stream ([`Framing`]): `+FULLRESYNC <replid> <offset>` first for `PSYNC`,
//! then `$<length>` and the file's bytes (no CRLF after them), and the connection closes,
//! as Redis closes an `rdb-only` replica's: tandem streams no Redis replication protocol
//! after the file, so `PSYNC` never continues a stream and no Redis replica can follow a
//! node. A file longer than the connection may hold unsent ([`ReplyLimit`], the RESP port's
//! `tuning.output_buffer_mib`) is refused with an error naming the setting, never cut short;
//! one longer than a reply may be (`tuning.max_frame_len`) is refused by the store.
//!
//! `REPLCONF` answers as Redis 7.0 answers a client that is no replica yet: `listening-port`,
//! `ip-address`, `capa` and `rdb-only` are checked and taken (`+OK`), `ack` and `getack`
//! answer nothing, and `rdb-filter-only` is refused (the file is always whole).

use super::{CmdError, Command, Ctx, Read, conn, data, int_arg};
use crate::db::{Key, KeyHead, Layout};
use crate::dict::Found;
use crate::mem::Mem;
use crate::rdb::file::{FileWriter, Origin};
use crate::resp::{Argv, Proto, ReplyWriter};

pub static COMMANDS: &[Command] = &[
    data("PSYNC", -3, Read, (0, 0, 0), false, snapshot),
    conn("REPLCONF", -1),
    // The node's snapshot file: the session takes it as `SYNC` does, the front end writes it.
    conn("SAVE", 1),
    conn("BGSAVE", -1),
    conn("LASTSAVE", 1),
    data("SYNC", 1, Read, (0, 0, 0), false, snapshot),
];

/// Whether `name` is a command that answers with the database's file (Redis flags both
/// `no-multi` and `noscript`: neither runs in a block or a script).
pub fn is_snapshot(name: &str) -> bool {
    matches!(name, "SYNC" | "PSYNC")
}

/// Redis's refusal of a `no-multi` command inside `MULTI`.
pub const NOT_IN_MULTI: &str = "ERR Command not allowed inside a transaction";

/// `SYNC` / `PSYNC replid offset`: an array of the LSN the database stands at and its RDB
/// file, which the session frames ([`Framing`]).
fn snapshot(ctx: &mut Ctx<'_, '_>, argv: &Argv, out: &mut ReplyWriter<'_>) -> Result<(), CmdError> {
    if argv.len() >= 3 {
        // As Redis: the offset must be a number, though no partial sync is ever made.
        int_arg(argv, 2)?;
    }
    let super::Access::Read(segment) = ctx.access else {
        return Err(CmdError::fixed(NOT_IN_MULTI));
    };
    let origin = Origin {
        ctime_s: ctx.now_ms / 1000,
        used_mem_bytes: ctx.layout.alloc.stats(segment).used_bytes as u64,
    };
    let file = database_file(segment, &ctx.layout, ctx.now_ms, origin);
    out.array(2);
    out.integer(i64::try_from(segment.lsn()).unwrap_or(i64::MAX));
    out.bulk(&file);
    Ok(())
}

/// The RDB file of the database in `mem` at `now_ms`: its libraries, then the live keys of
/// each database that has any (an expired key not swept yet is left out, as loading it would
/// drop it).
pub fn database_file(mem: &impl Mem, layout: &Layout, now_ms: u64, origin: Origin) -> Vec<u8> {
    let thresholds = layout.params.thresholds(mem);
    // Writing to memory cannot fail.
    let written = "a Vec takes every write";
    let mut writer = FileWriter::new(Vec::new(), origin).expect(written);
    for library in super::functions::libraries(mem, layout) {
        writer.function(&library.code).expect(written);
    }
    for db in layout.dbs() {
        let mut live = Vec::new();
        db.keyspace.for_each(mem, |entry| {
            let head: KeyHead = mem.pod(entry);
            if head.expire_at_ms == 0 || head.expire_at_ms > now_ms {
                live.push((entry, head));
            }
        });
        if live.is_empty() {
            continue;
        }
        let expires = live.iter().filter(|(_, h)| h.expire_at_ms != 0).count();
        writer
            .database(u64::from(db.db), live.len() as u64, expires as u64)
            .expect(written);
        for (entry, head) in live {
            let key = Key {
                found: Found { link: 0, entry },
                head,
            };
            let name = db.keyspace.key(mem, entry);
            let (value, encoding) = super::dump::image(mem, &key, &thresholds);
            let expire_at_ms = (head.expire_at_ms != 0).then_some(head.expire_at_ms);
            writer
                .key(name, expire_at_ms, &value, encoding)
                .expect(written);
        }
    }
    writer.finish().expect(written)
}

/// The most bytes a reply may hold unsent on a connection, and the setting that says so: a
/// file longer than that would be cut off when the connection is closed for it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReplyLimit {
    pub bytes: usize,
    /// The setting's name, for the error (`tuning.output_buffer_mib`).
    pub setting: &'static str,
}

/// The LSN (its digits) and the RDB file of the model's `SYNC` reply, or `None` if the reply
/// is not that array.
pub fn snapshot_parts(reply: &[u8]) -> Option<(&[u8], &[u8])> {
    let parts = crate::resp::array_elements(reply).filter(|parts| parts.len() == 2)?;
    let lsn = parts[0].strip_prefix(b":")?.strip_suffix(b"\r\n")?;
    let body = parts[1].strip_suffix(b"\r\n")?;
    let at = body.iter().position(|&b| b == b'\n')?;
    Some((lsn, &body[at + 1..]))
}

/// How the session writes a `SYNC` or `PSYNC` reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Framing {
    /// `PSYNC`: `+FULLRESYNC` first.
    pub psync: bool,
    /// The 40 hex digits `+FULLRESYNC` names.
    pub replid: String,
    pub limit: Option<ReplyLimit>,
}

impl Framing {
    /// The framing of command `name` on node `node_id`.
    pub fn new(name: &str, node_id: u64, limit: Option<ReplyLimit>) -> Framing {
        Framing {
            psync: name == "PSYNC",
            // A node's id, not a random one: no replica ever resumes from it.
            replid: format!("{node_id:040x}"),
            limit,
        }
    }

    /// Writes the model's `reply` ([LSN, file]) as Redis's replication stream starts.
    pub fn write(&self, reply: &[u8], proto: Proto, out: &mut Vec<u8>) {
        let Some((lsn, file)) = snapshot_parts(reply) else {
            ReplyWriter::new(out, proto).error("ERR the node answered SYNC with a malformed reply");
            return;
        };
        let header = format!("${}\r\n", file.len());
        let fullresync = if self.psync {
            let offset = String::from_utf8_lossy(lsn);
            format!("+FULLRESYNC {} {offset}\r\n", self.replid)
        } else {
            String::new()
        };
        let framed_len = fullresync.len() + header.len() + file.len();
        if let Some(limit) = self.limit.filter(|limit| framed_len > limit.bytes) {
            ReplyWriter::new(out, proto).error(&format!(
                "ERR the database's RDB file takes {framed_len} bytes, more than the {} bytes \
                 a connection may hold unsent ({}): raise it on the node to export this \
                 database",
                limit.bytes, limit.setting
            ));
            return;
        }
        out.extend_from_slice(fullresync.as_bytes());
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(file);
    }
}

/// `REPLCONF option value …`, as Redis 7.0 answers a client that is no replica; `None`:
/// no reply at all (`ack`, `getack`).
pub fn replconf(argv: &Argv) -> Option<Result<(), String>> {
    if argv.len().is_multiple_of(2) {
        return Some(Err(CmdError::SYNTAX.text().to_owned()));
    }
    let mut at = 1;
    while at + 1 < argv.len() {
        let given = argv.get(at).unwrap_or_default();
        let option = given.to_ascii_lowercase();
        let value = argv.get(at + 1).unwrap_or_default();
        let number = || crate::num::parse_i64(value);
        let not_integer = || CmdError::NOT_INTEGER.text().to_owned();
        match option.as_slice() {
            b"listening-port" if number().is_none() => return Some(Err(not_integer())),
            b"ip-address" if value.len() >= HOST_LEN_MAX => {
                return Some(Err(format!(
                    "ERR REPLCONF ip-address provided by replica instance is too long: {} bytes",
                    value.len()
                )));
            }
            b"listening-port" | b"ip-address" | b"capa" => {}
            // Redis answers these only on a replica's link, which no connection here is.
            b"ack" | b"getack" => return None,
            b"rdb-only" => match number() {
                None => return Some(Err(not_integer())),
                Some(0 | 1) => {}
                Some(_) => {
                    return Some(Err(
                        "ERR value is out of range, value must between 0 and 1".to_owned()
                    ));
                }
            },
            b"rdb-filter-only" => {
                return Some(Err(
                    "ERR tandem sends the whole database's RDB file and filters \
                     nothing out (rdb-filter-only): take the function libraries alone with \
                     FUNCTION DUMP"
                        .to_owned(),
                ));
            }
            _ => {
                return Some(Err(format!(
                    "ERR Unrecognized REPLCONF option: {}",
                    String::from_utf8_lossy(crate::session::c_string(given, usize::MAX))
                )));
            }
        }
        at += 2;
    }
    Some(Ok(()))
}

/// Redis's `NET_HOST_STR_LEN`: an address this long or longer is refused.
const HOST_LEN_MAX: usize = 256;

#[cfg(test)]
mod tests {
    use super::*;

    fn model_reply(lsn: u64, file: &[u8]) -> Vec<u8> {
        let mut reply = Vec::new();
        let mut out = ReplyWriter::new(&mut reply, Proto::Resp2);
        out.array(2);
        out.integer(lsn as i64);
        out.bulk(file);
        reply
    }

    #[test]
    fn sync_and_psync_frame_the_file_as_redis_does() {
        let reply = model_reply(42, b"REDIS0010\xff");
        let mut out = Vec::new();
        Framing::new("SYNC", 3, None).write(&reply, Proto::Resp2, &mut out);
        assert_eq!(out, b"$10\r\nREDIS0010\xff");
        let mut out = Vec::new();
        Framing::new("PSYNC", 3, None).write(&reply, Proto::Resp3, &mut out);
        let replid = format!("{:040x}", 3);
        let mut expected = format!("+FULLRESYNC {replid} 42\r\n$10\r\n").into_bytes();
        expected.extend_from_slice(b"REDIS0010\xff");
        assert_eq!(out, expected);
    }

    #[test]
    fn a_file_past_the_output_buffer_is_refused_naming_the_setting() {
        let reply = model_reply(1, &[7u8; 100]);
        let limit = ReplyLimit {
            bytes: 100,
            setting: "tuning.output_buffer_mib",
        };
        let mut out = Vec::new();
        Framing::new("SYNC", 1, Some(limit)).write(&reply, Proto::Resp2, &mut out);
        let text = String::from_utf8_lossy(&out);
        assert!(
            text.starts_with("-ERR the database's RDB file takes 106 bytes"),
            "{text}"
        );
        assert!(text.contains("tuning.output_buffer_mib"), "{text}");
        let mut out = Vec::new();
        Framing::new("SYNC", 1, None).write(b"+OK\r\n", Proto::Resp2, &mut out);
        assert!(out.starts_with(b"-ERR the node answered SYNC with a malformed reply"));
    }

    fn replconf_of(text: &str) -> Option<Result<(), String>> {
        let mut argv = Argv::new();
        for arg in text.split(' ') {
            argv.push(arg.as_bytes());
        }
        replconf(&argv)
    }

    #[test]
    fn replconf_answers_as_redis_answers_a_client() {
        assert_eq!(replconf_of("REPLCONF capa eof capa psync2"), Some(Ok(())));
        assert_eq!(
            replconf_of("REPLCONF rdb-only 1 listening-port 6380"),
            Some(Ok(()))
        );
        assert_eq!(replconf_of("REPLCONF ACK 0"), None);
        assert_eq!(replconf_of("REPLCONF GETACK *"), None);
        let err = |text: &str| replconf_of(text).and_then(Result::err).unwrap_or_default();
        assert_eq!(err("REPLCONF capa"), "ERR syntax error");
        assert_eq!(
            err("REPLCONF rdb-only 2"),
            "ERR value is out of range, value must between 0 and 1"
        );
        assert_eq!(
            err("REPLCONF listening-port x"),
            "ERR value is not an integer or out of range"
        );
        assert_eq!(
            err("REPLCONF nope 1"),
            "ERR Unrecognized REPLCONF option: nope"
        );
        assert!(err("REPLCONF rdb-filter-only functions").contains("FUNCTION DUMP"));
    }
}
