//! `CLIENT LIST`, `CLIENT INFO` and `CLIENT KILL` on the RESP port. The session reads and
//! checks them ([`Step::ClientList`], [`Step::ClientKill`]); the loop, which holds every
//! connection, answers: each line joins what the loop knows of the socket and its buffers
//! ([`ConnFacts`]) with what the connection's session knows of itself.
//!
//! Only the RESP port's connections are listed and killed. The native port's clients, which
//! this loop also serves, speak another protocol and have no session (no name, database or
//! last command to show); the node's links to its peers and backups are no clients of this
//! loop at all, so no filter can close them.
//!
//! [`Step::ClientList`]: tandem_redis::session::Step::ClientList
//! [`Step::ClientKill`]: tandem_redis::session::Step::ClientKill

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::time::Instant;

use mio::Token;
use tandem_redis::session::{ConnFacts, KillRequest, ListRequest, write_list};

use super::{Conn, Front, slot_len, token_of};

impl Front {
    /// The reply to `CLIENT LIST` or `CLIENT INFO` from `caller`, connection `token` (out of
    /// `conns` while it is served), whose request took `request_len` bytes of its input.
    pub(super) fn client_list(
        &self,
        token: Token,
        caller: &Conn,
        request: &ListRequest,
        request_len: usize,
    ) -> Vec<u8> {
        let mut lines = String::new();
        let mut line = |conn: &Conn, own: bool| {
            let facts = self.facts(conn, own.then_some(request_len));
            conn.session.write_client_line(&facts, &mut lines);
            lines.push('\n');
        };
        match request {
            ListRequest::Own => line(caller, true),
            ListRequest::Ids(ids) => {
                for conn_token in ids.iter().filter_map(|&id| token_of(id)) {
                    if conn_token == token {
                        line(caller, true);
                    } else if let Some(conn) = self.conns.get(&conn_token) {
                        line(conn, false);
                    }
                }
            }
            ListRequest::All(client_type) => {
                for (conn_token, conn) in self.in_order(token, caller) {
                    if client_type.is_none_or(|wanted| wanted == conn.session.client_type()) {
                        line(conn, conn_token == token);
                    }
                }
            }
        }
        let mut reply = Vec::new();
        write_list(&lines, caller.session.proto(), &mut reply);
        reply
    }

    /// `CLIENT KILL` from `caller`, connection `token`: closes at once the other connections
    /// the request matches (Redis frees them at once too; their calls in flight are then
    /// answered to no one). Returns how many matched, the caller included, and whether the
    /// caller did: it is closed only once its reply is sent.
    pub(super) fn client_kill(
        &mut self,
        caller: &Conn,
        request: &KillRequest,
        request_len: usize,
    ) -> (usize, bool) {
        let victims: Vec<Token> = self
            .conns
            .iter()
            .filter(|(_, conn)| request.matches(&conn.session, &self.facts(conn, None), false))
            .map(|(token, _)| *token)
            .collect();
        let facts = self.facts(caller, Some(request_len));
        let caller_too = request.matches(&caller.session, &facts, true);
        for victim in &victims {
            if let Some(conn) = self.conns.remove(victim) {
                self.reply_bytes_total -= conn.reply_bytes_counted;
                self.close(*victim, conn);
            }
        }
        (victims.len() + usize::from(caller_too), caller_too)
    }

    /// Every connection in the order they connected (their ids'), `caller` in its place.
    fn in_order<'a>(&'a self, token: Token, caller: &'a Conn) -> Vec<(Token, &'a Conn)> {
        let mut all: Vec<(Token, &Conn)> = self
            .conns
            .iter()
            .map(|(token, conn)| (*token, &**conn))
            .collect();
        let at = all.partition_point(|(other, _)| *other < token);
        all.insert(at, (token, caller));
        all
    }

    /// What the loop knows of `conn` now; `request_len`: it is the connection being served,
    /// handling a request that took so many bytes (still in Redis's query buffer then).
    fn facts(&self, conn: &Conn, request_len: Option<usize>) -> ConnFacts {
        let subscriptions = self.hub.subscriptions_of(conn.session.id());
        let argv_mem = match request_len {
            Some(_) => self.argv.iter().map(<[u8]>::len).sum(),
            None => 0,
        };
        let unsent = conn.out.len() - conn.written;
        let seconds_since = |then: Instant| self.pass_started.saturating_duration_since(then);
        ConnFacts {
            addr: address(Some(conn.peer)),
            laddr: address(conn.local),
            fd: i64::from(conn.stream.as_raw_fd()),
            age_s: seconds_since(conn.connected).as_secs(),
            idle_s: seconds_since(conn.last_interaction).as_secs(),
            blocked: conn.waits(),
            closing: conn.closing,
            sub: subscriptions.channels,
            psub: subscriptions.patterns,
            ssub: subscriptions.shard_channels,
            qbuf: conn.input.len() - conn.start + request_len.unwrap_or(0),
            qbuf_free: conn.input.capacity() - conn.input.len(),
            argv_mem,
            rbs: conn.out.capacity(),
            obl: unsent,
            oll: conn.slots.iter().filter(|slot| slot_len(slot) > 0).count(),
            omem: conn.slot_bytes,
            buffers_mem: argv_mem + conn.input.capacity() + conn.out.capacity() + conn.slot_bytes,
            writing: unsent > 0,
        }
    }
}

/// An address as Redis writes it (`ip:port`, `[ipv6]:port`; `?:0` if the socket could not
/// say).
fn address(address: Option<SocketAddr>) -> String {
    match address {
        Some(SocketAddr::V4(v4)) => v4.to_string(),
        Some(SocketAddr::V6(v6)) => format!("[{}]:{}", v6.ip(), v6.port()),
        None => "?:0".to_string(),
    }
}
