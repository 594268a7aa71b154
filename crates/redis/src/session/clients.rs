//! `CLIENT LIST`, `CLIENT INFO`, `CLIENT KILL`, `CLIENT NO-EVICT`, `CLIENT NO-TOUCH` and
//! `CLIENT HELP`, as Redis 7.0 answers them (`clientCommand` in its `networking.c`).
//!
//! The session reads and checks the request and answers a bad one with Redis's error; a good
//! `LIST`, `INFO` or `KILL` needs every connection, which only the front end holds, so the
//! session asks it ([`Step::ClientList`], [`Step::ClientKill`]). The front end then writes
//! one line per connection with [`Session::write_client_line`], from what it knows of the
//! socket ([`ConnFacts`]) and what the connection's session knows of itself, and picks the
//! connections to close with [`KillRequest::matches`].
//!
//! Two additions from later Redis releases are served too: `CLIENT KILL … MAXAGE` (7.4) and
//! `CLIENT NO-TOUCH` (7.2). The line keeps 7.0's fields and order (no `lib-name`, `lib-ver`).
//!
//! Inside `MULTI`, a good `LIST`, `INFO` or `KILL` answers an error in `EXEC`'s array
//! ([`IN_BLOCK`]): a block runs as one call on the primary's executor, away from the loop
//! that holds the connections, and a kill decided when `EXEC` arrives would happen even if a
//! watched key then aborted the block. A bad one gets Redis's error there, as in Redis.

use std::fmt::Write as _;

use super::{ServerInfo, Session, Step, c_string};
use crate::cmd::CmdError;
use crate::resp::{Argv, Proto, ReplyWriter};

/// What a front end that cannot see its other connections answers a good `CLIENT LIST`,
/// `INFO` or `KILL` (`tandem proxy` serves each connection on a thread of its own).
pub const NOT_SERVED: &str = "ERR CLIENT LIST, INFO and KILL are answered on a node's RESP \
     port: tandem proxy serves each connection apart and does not see the others";

/// What a good `CLIENT LIST`, `INFO` or `KILL` queued in a `MULTI` block answers in `EXEC`.
pub const IN_BLOCK: &str = "ERR CLIENT LIST, INFO and KILL are not served inside MULTI here: a \
     block runs as one call on the primary, away from the connections";

/// Redis's `CLIENT HELP` lines, for the subcommands this node answers.
const HELP: &[&str] = &[
    "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "GETNAME",
    "    Return the name of the current connection.",
    "ID",
    "    Return the ID of the current connection.",
    "INFO",
    "    Return information about the current client connection.",
    "KILL <ip:port>",
    "    Kill connection made from <ip:port>.",
    "KILL <option> <value> [<option> <value> [...]]",
    "    Kill connections. Options are:",
    "    * ADDR <ip:port>",
    "      Kill connections made from the specified address",
    "    * LADDR <ip:port>",
    "      Kill connections made to specified local address",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Kill connections by type.",
    "    * USER <username>",
    "      Kill connections authenticated by <username>.",
    "    * SKIPME (YES|NO)",
    "      Skip killing current connection (default: yes).",
    "    * ID <client-id>",
    "      Kill connections by client id.",
    "    * MAXAGE <maxage>",
    "      Kill connections older than the specified age.",
    "LIST [options ...]",
    "    Return information about client connections. Options:",
    "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)",
    "      Return clients of specified type.",
    "    * ID <client-id> [<client-id> ...]",
    "      Return clients of specified IDs only.",
    "REPLY (ON|OFF|SKIP)",
    "    Control the replies sent to the current connection.",
    "SETNAME <name>",
    "    Assign the name <name> to the current connection.",
    "SETINFO <option> <value>",
    "    Set client meta attr. Options are:",
    "    * LIB-NAME: the client lib name.",
    "    * LIB-VER: the client lib version.",
    "UNBLOCK <clientid> [TIMEOUT|ERROR]",
    "    Unblock the specified blocked client.",
    "NO-EVICT (ON|OFF)",
    "    Protect current client connection from eviction.",
    "NO-TOUCH (ON|OFF)",
    "    Will not touch LRU/LFU stats when this mode is on.",
    "HELP",
    "    Prints this help.",
];

/// A client's type, as Redis names them (`getClientTypeByName`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClientType {
    Normal,
    /// A replica's link to its master. A RESP connection here is never one.
    Master,
    /// A replica's connection. tandem streams no replication over RESP: none is one.
    Replica,
    /// A connection that holds a subscription.
    PubSub,
}

impl ClientType {
    /// The type called `name` (any case; `slave` is `replica`).
    pub fn named(name: &[u8]) -> Option<ClientType> {
        match name.to_ascii_lowercase().as_slice() {
            b"normal" => Some(ClientType::Normal),
            b"slave" | b"replica" => Some(ClientType::Replica),
            b"pubsub" => Some(ClientType::PubSub),
            b"master" => Some(ClientType::Master),
            _ => None,
        }
    }
}

/// Which connections `CLIENT LIST` or `CLIENT INFO` shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ListRequest {
    /// Every connection, in the order they connected; only those of a type if one is given.
    All(Option<ClientType>),
    /// The connections with these ids, in this order (an id no connection has is skipped,
    /// one given twice is shown twice).
    Ids(Vec<u64>),
    /// The asking connection only (`CLIENT INFO`).
    Own,
}

/// `CLIENT KILL`'s filters: a connection is killed if it passes every one given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct KillRequest {
    /// The old form, `CLIENT KILL addr`: answered `+OK` or `-ERR No such client` rather
    /// than with a count.
    pub old_form: bool,
    /// The client's address, as the line's `addr` shows it.
    pub addr: Option<Vec<u8>>,
    /// The address it connected to, as the line's `laddr` shows it.
    pub laddr: Option<Vec<u8>>,
    /// The user it is logged in as.
    pub user: Option<String>,
    pub client_type: Option<ClientType>,
    pub id: Option<u64>,
    /// Connected at least this many seconds ago (`MAXAGE`).
    pub max_age_s: Option<u64>,
    /// The asking connection is spared (`SKIPME yes`, the default of the new form).
    pub skip_me: bool,
}

impl KillRequest {
    /// Whether the connection of `session`, as the front end sees it (`conn`), is to be
    /// killed; `caller`: it is the asking connection.
    pub fn matches(&self, session: &Session, conn: &ConnFacts, caller: bool) -> bool {
        let same = |given: &Option<Vec<u8>>, actual: &str| {
            given
                .as_ref()
                .is_none_or(|given| given.as_slice() == actual.as_bytes())
        };
        same(&self.addr, &conn.addr)
            && same(&self.laddr, &conn.laddr)
            && self.client_type.is_none_or(|t| t == session.client_type())
            && self.id.is_none_or(|id| id == session.id)
            && self
                .user
                .as_deref()
                .is_none_or(|u| u == session.user_name())
            && !(caller && self.skip_me)
            && self.max_age_s.is_none_or(|max| conn.age_s >= max)
    }

    /// The reply to the request once `killed` connections were killed.
    pub fn write_reply(&self, killed: usize, proto: Proto, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, proto);
        match (self.old_form, killed) {
            (true, 0) => w.error("ERR No such client"),
            (true, _) => w.ok(),
            (false, killed) => w.integer(killed as i64),
        }
    }
}

/// What the front end knows of a connection's socket and buffers, for its line. Where it
/// has no such thing, a field holds what Redis shows for an idle client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ConnFacts {
    /// The client's address (`ip:port`, `[ipv6]:port`).
    pub addr: String,
    /// The address it connected to.
    pub laddr: String,
    /// The socket's file descriptor.
    pub fd: i64,
    /// Seconds since it connected.
    pub age_s: u64,
    /// Seconds since it last sent or was sent anything.
    pub idle_s: u64,
    /// It waits in a blocking command.
    pub blocked: bool,
    /// It is closed once its replies are sent (`QUIT`, a kill of itself).
    pub closing: bool,
    /// Its subscriptions: channels, patterns, shard channels.
    pub sub: usize,
    pub psub: usize,
    pub ssub: usize,
    /// Bytes read and not yet handled (for the asking connection, its request's too, as
    /// Redis's query buffer still holds it), and the room left in the buffer.
    pub qbuf: usize,
    pub qbuf_free: usize,
    /// The arguments' bytes of the request being handled (the asking connection's).
    pub argv_mem: usize,
    /// The room in its reply buffer.
    pub rbs: usize,
    /// Reply bytes ready to send and not yet sent.
    pub obl: usize,
    /// Replies held behind a call not yet answered (the call itself is none), and their
    /// bytes.
    pub oll: usize,
    pub omem: usize,
    /// The bytes its buffers hold (the request's arguments, the input, the replies).
    pub buffers_mem: usize,
    /// Replies wait for the socket to take them (Redis's write handler).
    pub writing: bool,
}

impl Session {
    /// Appends the connection's line (Redis 7.0's `catClientInfoString`, no newline).
    pub fn write_client_line(&self, conn: &ConnFacts, out: &mut String) {
        let name = self.name.as_deref().unwrap_or_default();
        let (multi, multi_mem) = match &self.multi {
            Some((queued, _)) => (queued.len() as i64, queued.iter().map(argv_mem).sum()),
            None => (-1, 0),
        };
        let _ = write!(
            out,
            "id={} addr={} laddr={} fd={} name={} age={} idle={} flags={} db={} sub={} psub={} \
             ssub={} multi={multi} qbuf={} qbuf-free={} argv-mem={} multi-mem={multi_mem} \
             rbs={} rbp=0 obl={} oll={} omem={} tot-mem={} events={} cmd={} user={} redir=-1 \
             resp={}",
            self.id,
            conn.addr,
            conn.laddr,
            conn.fd,
            String::from_utf8_lossy(name),
            conn.age_s,
            conn.idle_s,
            self.client_flags(conn),
            self.db,
            conn.sub,
            conn.psub,
            conn.ssub,
            conn.qbuf,
            conn.qbuf_free,
            conn.argv_mem,
            conn.rbs,
            conn.obl,
            conn.oll,
            conn.omem,
            conn.buffers_mem + multi_mem,
            if conn.writing { "rw" } else { "r" },
            self.last_command.name().unwrap_or("NULL"),
            self.user_name(),
            if self.proto == Proto::Resp3 { 3 } else { 2 },
        );
    }

    /// The connection's type, as `CLIENT LIST TYPE` and `CLIENT KILL TYPE` filter it.
    pub fn client_type(&self) -> ClientType {
        if self.subscribed {
            ClientType::PubSub
        } else {
            ClientType::Normal
        }
    }

    /// The name of the user the connection is logged in as.
    pub fn user_name(&self) -> &str {
        self.user.as_ref().map_or("default", |user| user.name())
    }

    /// Whether `CLIENT NO-EVICT on` spares the connection when the front end closes clients
    /// to keep their replies within its total budget (Redis's `maxmemory-clients`).
    pub fn no_evict(&self) -> bool {
        self.no_evict
    }

    /// Redis's flags of those this connection can have: `P` subscribed, `x` in `MULTI`, `b`
    /// blocked, `c` closed after its reply, `e` spared from eviction; `N` none.
    fn client_flags(&self, conn: &ConnFacts) -> String {
        let flags = [
            (self.subscribed, 'P'),
            (self.multi.is_some(), 'x'),
            (conn.blocked, 'b'),
            (conn.closing, 'c'),
            (self.no_evict, 'e'),
        ];
        let set: String = flags.iter().filter(|(on, _)| *on).map(|(_, f)| f).collect();
        if set.is_empty() { "N".into() } else { set }
    }

    /// The `CLIENT` subcommands of this module, their arity already checked; `None` for
    /// another subcommand.
    pub(super) fn client_more(
        &mut self,
        argv: &Argv,
        info: &ServerInfo,
        out: &mut Vec<u8>,
    ) -> Option<Step> {
        let sub = argv.get(1).unwrap_or_default().to_ascii_uppercase();
        let request = match sub.as_slice() {
            b"HELP" => {
                write_help(self.proto, out);
                return Some(Step::Replied);
            }
            b"NO-EVICT" | b"NO-TOUCH" => {
                self.client_switch(&sub, argv, out);
                return Some(Step::Replied);
            }
            b"INFO" => Ok(Step::ClientList(ListRequest::Own)),
            b"LIST" => list_request(argv).map(Step::ClientList),
            b"KILL" => kill_request(argv, info).map(Step::ClientKill),
            _ => return None,
        };
        Some(match request {
            Ok(_) if !info.clients => {
                ReplyWriter::new(out, self.proto).error(NOT_SERVED);
                Step::Replied
            }
            Ok(step) => step,
            Err(text) => {
                ReplyWriter::new(out, self.proto).error_bytes(&text);
                Step::Replied
            }
        })
    }

    /// `CLIENT NO-EVICT on|off` and `CLIENT NO-TOUCH on|off`.
    fn client_switch(&mut self, sub: &[u8], argv: &Argv, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, self.proto);
        let on = match argv
            .get(2)
            .unwrap_or_default()
            .to_ascii_lowercase()
            .as_slice()
        {
            b"on" => true,
            b"off" => false,
            _ => return w.error(CmdError::SYNTAX.text()),
        };
        // NO-TOUCH is accepted and changes nothing: the use that `-lru` and `-lfu` eviction
        // judge by is recorded by the model as it runs a call, from the call's arguments
        // alone, which carry nothing of the connection that sent it; sparing this
        // connection's reads would take a field in every call's encoding.
        if sub == b"NO-EVICT" {
            self.no_evict = on;
        }
        w.ok();
    }
}

/// `CLIENT LIST [TYPE type | ID id …]`, read as Redis 7.0 reads it.
fn list_request(argv: &Argv) -> Result<ListRequest, Vec<u8>> {
    let option = argv.get(2).unwrap_or_default();
    if argv.len() == 4 && option.eq_ignore_ascii_case(b"TYPE") {
        return client_type(argv.get(3).unwrap_or_default()).map(|t| ListRequest::All(Some(t)));
    }
    if argv.len() > 3 && option.eq_ignore_ascii_case(b"ID") {
        let ids = argv.iter().skip(3).map(|id| {
            // Redis reads the id as a signed number and looks it up unsigned: a negative one
            // names no connection, as 0 does here.
            let id = crate::num::parse_i64(id).ok_or(b"ERR Invalid client ID".to_vec())?;
            Ok(u64::try_from(id).unwrap_or(0))
        });
        return ids.collect::<Result<_, _>>().map(ListRequest::Ids);
    }
    if argv.len() != 2 {
        return Err(CmdError::SYNTAX.text().as_bytes().to_vec());
    }
    Ok(ListRequest::All(None))
}

/// `CLIENT KILL addr` or `CLIENT KILL option value …`, read as Redis reads it: the first
/// bad option's error, in order.
fn kill_request(argv: &Argv, info: &ServerInfo) -> Result<KillRequest, Vec<u8>> {
    let syntax = || CmdError::SYNTAX.text().as_bytes().to_vec();
    // The table's arity refuses fewer arguments first; without any filter every connection
    // would match.
    if argv.len() < 3 {
        return Err(syntax());
    }
    if argv.len() == 3 {
        // With the old form a connection may kill itself.
        return Ok(KillRequest {
            old_form: true,
            addr: argv.get(2).map(<[u8]>::to_vec),
            ..KillRequest::default()
        });
    }
    let mut request = KillRequest {
        skip_me: true,
        ..KillRequest::default()
    };
    let mut at = 2;
    while at < argv.len() {
        let (Some(option), Some(value)) = (argv.get(at), argv.get(at + 1)) else {
            return Err(syntax());
        };
        kill_option(&mut request, option, value, info)?;
        at += 2;
    }
    Ok(request)
}

/// Reads one `CLIENT KILL` option into `request`.
fn kill_option(
    request: &mut KillRequest,
    option: &[u8],
    value: &[u8],
    info: &ServerInfo,
) -> Result<(), Vec<u8>> {
    let error = |text: &str| text.as_bytes().to_vec();
    match option.to_ascii_uppercase().as_slice() {
        b"ID" => {
            let id = crate::num::parse_i64(value).filter(|&id| id >= 1);
            let id = id.ok_or_else(|| error("ERR client-id should be greater than 0"))?;
            request.id = Some(id as u64);
        }
        b"MAXAGE" => {
            let age = crate::num::parse_i64(value)
                .ok_or_else(|| error("ERR maxage is not an integer or out of range"))?;
            if age <= 0 {
                return Err(error("ERR maxage should be greater than 0"));
            }
            request.max_age_s = Some(age as u64);
        }
        b"TYPE" => request.client_type = Some(client_type(value)?),
        b"ADDR" => request.addr = Some(value.to_vec()),
        b"LADDR" => request.laddr = Some(value.to_vec()),
        b"USER" => request.user = Some(known_user(value, info)?),
        b"SKIPME" => {
            request.skip_me = match value.to_ascii_lowercase().as_slice() {
                b"yes" => true,
                b"no" => false,
                _ => return Err(error(CmdError::SYNTAX.text())),
            }
        }
        _ => return Err(error(CmdError::SYNTAX.text())),
    }
    Ok(())
}

/// The client type `name`, or Redis's error naming it.
fn client_type(name: &[u8]) -> Result<ClientType, Vec<u8>> {
    ClientType::named(name).ok_or_else(|| quoted("ERR Unknown client type '", name))
}

/// The name of the node's user `name` (`default` or one of the table's), or Redis's error.
fn known_user(name: &[u8], info: &ServerInfo) -> Result<String, Vec<u8>> {
    let known = name == b"default" || info.users.iter().any(|u| u.name().as_bytes() == name);
    match std::str::from_utf8(name) {
        Ok(name) if known => Ok(name.to_string()),
        _ => Err(quoted("ERR No such user '", name)),
    }
}

/// `head`, then `value` as Redis's `%s` prints it, then a closing quote.
fn quoted(head: &str, value: &[u8]) -> Vec<u8> {
    let mut text = head.as_bytes().to_vec();
    text.extend_from_slice(c_string(value, usize::MAX));
    text.push(b'\'');
    text
}

/// Redis's `mstate.argv_len_sums` share of one queued command: its arguments' bytes and a
/// pointer per argument.
fn argv_mem(argv: &Argv) -> usize {
    argv.iter().map(<[u8]>::len).sum::<usize>() + argv.len() * std::mem::size_of::<usize>()
}

/// `CLIENT HELP`: Redis's status lines, for the subcommands served here.
fn write_help(proto: Proto, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, proto);
    w.array(HELP.len());
    for line in HELP {
        w.simple(line);
    }
}

/// `CLIENT LIST`'s or `CLIENT INFO`'s reply: the lines (each ending in a newline) as a
/// verbatim string, a bulk string in RESP2.
pub fn write_list(lines: &str, proto: Proto, out: &mut Vec<u8>) {
    ReplyWriter::new(out, proto).verbatim("txt", lines);
}
