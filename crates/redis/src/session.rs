//! One RESP connection's state, sans-I/O: what each command does before (and after) it
//! reaches the database.
//!
//! The runtime parses a request into an [`Argv`] and hands it to [`Session::handle`], which
//! either answers at once (connection commands, refusals, `MULTI`'s `+QUEUED`) or asks for
//! a call ([`Step::Call`]): a data command, a `MULTI` block's data commands (the session
//! answers the block's connection commands itself, see `BlockAnswers`), or what a `WATCH`
//! records of the keys it names. The runtime runs the call where [`Call::runs_on`] says (in
//! order with the connection's other calls) and hands the outcome to [`Session::called`],
//! which writes the reply.
//!
//! On a backup, a read-only command (GET, HGET, LRANGE, EVAL_RO, …) is a call too, served by
//! the backup's applier linearizably (it reflects every write acknowledged before it
//! arrived); a write, a `MULTI` block's `EXEC` and a `WATCH` are refused with `-READONLY`,
//! naming the primary, as a Redis replica refuses writes.
//!
//! Pub/sub commands are the front end's to carry out ([`Step::PubSub`]), on its node's
//! [`crate::pubsub::Hub`]; those inside `MULTI` run there when the block's outcome is back
//! and it ran. `CLIENT REPLY OFF|SKIP` silences replies ([`Session::reply_silenced`],
//! [`Call::silent`]), never pushed messages. `CLIENT LIST`, `INFO` and `KILL` are the front
//! end's to answer too, which holds every connection ([`Step::ClientList`],
//! [`Step::ClientKill`], see [`clients`]).

use std::sync::Arc;
use std::time::Duration;

use tandem_store::{DataModel, ProcId, ProcKind};

use crate::cmd::specs::{self, Begin, Find, KeySpec, Spec};
use crate::cmd::{self, Class, Command, commands};
use crate::model::{PROC_EXEC, PROC_WATCH, command_proc};
use crate::pubsub::{self, Hub};
use crate::resp::{Argv, Proto, ReplyWriter};
use crate::stats::{CommandStats, StatId, Tally};
use crate::wire::{CallArgs, ExecArgs, decode_versions};

mod acl;
pub mod clients;
pub mod cluster;
pub mod spread;

pub use clients::{ClientType, ConnFacts, KillRequest, ListRequest, write_list};
pub use cluster::{ClusterShape, Shard, ShardNode, endpoint_name, node_name};

/// The version this server reports (`HELLO`, `INFO`): the Redis release whose commands and
/// replies it follows.
pub const REDIS_VERSION: &str = "7.0.15";

/// What a session knows of the node it runs on.
#[derive(Clone, Debug, Default)]
pub struct ServerInfo {
    /// This node's id in the cluster.
    pub node_id: u64,
    /// Whether it is its group's primary now.
    pub primary: bool,
    /// Whether it holds a backup role now, which serves read-only commands.
    pub backup: bool,
    /// Where the primary serves RESP, if known.
    pub primary_resp: Option<String>,
    /// The port this node serves RESP on.
    pub resp_port: u16,
    /// Backups in the current view.
    pub backups: usize,
    /// Where the backups of the current view serve RESP (`host:port`), those that do:
    /// what `ROLE` lists on a primary.
    pub backups_resp: Arc<[String]>,
    /// Backups that hold every write before its reply leaves, by the group's safety rule
    /// (every backup under 2-safe, K under 2-safe:K, none under 1-safe or bounded): what
    /// `WAIT` answers, since a reply it follows left only once they did.
    pub backups_acked: usize,
    /// The segment's size: the most the database may hold.
    pub maxmemory: usize,
    /// The group's safety rule, as the config names it.
    pub safety: String,
    /// The password a connection gives (`AUTH`, `HELLO … AUTH`) before any other command,
    /// as Redis's `requirepass`; `None`: none is asked for.
    pub requirepass: Option<Password>,
    /// The node's users besides `default` (Redis's ACL users, a subset: see [`User`]).
    pub users: Arc<Vec<Arc<User>>>,
    /// Whether a script runs on this node now, as this connection may see it.
    pub script: ScriptActivity,
    /// What the hosting process tells `INFO` of itself, if a runtime hosts the node.
    pub host: Option<Arc<dyn HostFacts>>,
    /// The model's figures as a [`Purpose::Info`] call read them, in place of the host's
    /// latest ([`HostFacts::model_stats`]).
    pub model_stats_read: Option<Arc<Vec<(String, String)>>>,
    /// Whether the front end serves pub/sub (a node's RESP port does; `tandem proxy` does
    /// not carry it): without it the pub/sub commands are refused, saying so.
    pub pubsub: bool,
    /// What the front end's hub holds (`INFO stats`).
    pub pubsub_counts: pubsub::Counts,
    /// The front end's command and error counters, copied only for a request that shows
    /// them ([`Session::wants_stats`]); `None` (a proxy keeps none): `INFO` writes the
    /// sections' headers without their lines.
    pub command_stats: Option<Arc<CommandStats>>,
    /// Whether the front end lists and kills its connections (`CLIENT LIST`, `INFO`,
    /// `KILL`: [`Step::ClientList`], [`Step::ClientKill`]), as a node's RESP loop does;
    /// without it they are refused, saying so (`tandem proxy` serves each connection apart).
    pub clients: bool,
    /// `master_repl_offset`: the LSN the primary's log committed last, on a primary whose
    /// front end knows it; on a backup, the LSN it applied last; 0 elsewhere.
    pub repl_offset: u64,
    /// What the node's snapshots (`SAVE`, `BGSAVE`) did; `None` where the front end writes
    /// none (`tandem proxy`): then they are refused, saying so.
    pub saves: Option<SaveFacts>,
    /// The cluster's shards, where the node speaks Redis Cluster's protocol (`CLUSTER
    /// SLOTS`, `-MOVED`); `None`: it answers as one server ([`cluster`]).
    pub cluster: Option<Arc<ClusterShape>>,
}

/// What a node's snapshots have done, as `LASTSAVE` and `INFO persistence` show it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SaveFacts {
    /// Unix seconds when the last snapshot was written whole (the node's start before any).
    pub last_save_unix: u64,
    /// Whether a `BGSAVE`'s file is being written now.
    pub in_progress: bool,
    /// Whether the last snapshot failed to be written.
    pub last_failed: bool,
    /// Snapshots written whole since the node started.
    pub saves: u64,
    /// Seconds the last `BGSAVE` took to write its file (-1 before the first).
    pub last_bgsave_seconds: i64,
}

/// Which snapshot command a [`Purpose::Save`] call serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SaveKind {
    /// `SAVE`: the file is written before the reply (the front end waits for the disk).
    Foreground,
    /// `BGSAVE`: the reply says saving started; the file is written on another thread.
    Background,
}

/// Why `SAVE`, `BGSAVE` and `LASTSAVE` are refused where no snapshot file is written.
pub const SAVES_NOT_SERVED: &str = "ERR SAVE, BGSAVE and LASTSAVE are not served through tandem \
     proxy: send them to a node's own RESP port (each node writes its own snapshot)";

/// Why a snapshot is refused while a `BGSAVE`'s file is still being written (Redis's text).
pub const SAVE_IN_PROGRESS: &str = "ERR Background save already in progress";

/// A script running on the node's executor or applier, as a connection sees it: only one
/// whose own calls are all answered sees it at all (a connection waiting behind a call, as
/// Redis's blocked script caller, reads nothing until its replies came).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ScriptActivity {
    /// None runs.
    #[default]
    Idle,
    /// One runs: `SCRIPT KILL` stops it.
    Running,
    /// One has run past `tuning.busy_reply_threshold_ms`: every command but those Redis
    /// allows a busy server (`SCRIPT KILL`, `AUTH`, `MULTI`, …) is answered `-BUSY`.
    Busy,
}

/// Redis's answer to a command sent while a script is busy.
pub const BUSY: &str =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";

/// A user of the node's user table: a name, a password, and rights that Redis's ACLs can
/// state. A `read_only` user runs the commands that only read the database; a user with key
/// patterns other than `*` may name only keys that match one of them (Redis's `~pattern`),
/// and runs no command that reaches keys without naming them (`KEYS`, `SCAN`, `DBSIZE`,
/// `FLUSHALL`, `FLUSHDB`, `RANDOMKEY`, `SORT` with a `BY` or `GET` pattern) and no script (a
/// script may reach any key). Every user runs the
/// connection's own commands. [`User::may_run`] is the command half of the rule, from
/// which the equivalent Redis ACL is built (`-@all +cmd … ~pattern …`).
pub struct User {
    name: String,
    password: Password,
    read_only: bool,
    /// Glob patterns (Redis's syntax); `None`: any key.
    keys: Option<Vec<Vec<u8>>>,
}

impl User {
    /// Panics on an empty name or password, or no pattern: the configuration check refuses
    /// them. A pattern `*` among `keys` stands for any key.
    pub fn new(name: &str, password: &[u8], read_only: bool, keys: &[&[u8]]) -> User {
        assert!(!name.is_empty(), "a user has a name");
        assert!(!keys.is_empty(), "a user has at least one key pattern");
        let any = keys.iter().any(|pattern| *pattern == b"*");
        User {
            name: name.to_owned(),
            password: Password::new(password),
            read_only,
            keys: (!any).then(|| keys.iter().map(|pattern| pattern.to_vec()).collect()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether this user may run `command` at all, whatever keys it names.
    pub fn may_run(&self, command: &Command) -> bool {
        // Stopping the node, writing its snapshot file and watching every command of every
        // connection (`MONITOR`) are an administrator's: not a user limited to reads or to
        // keys.
        if matches!(command.name, "SHUTDOWN" | "SAVE" | "BGSAVE" | "MONITOR") {
            return !self.read_only && self.keys.is_none();
        }
        if command.class == Class::Connection {
            return true;
        }
        let script = cmd::scripts::is_script_command(command.name);
        let names_its_keys = command.keys != (0, 0, 0)
            || cmd::counted_keys_at(command.name).is_some()
            || cmd::streams::keys_at(command.name, &Argv::new()).is_some();
        // TIME reads the clock and no key, so key patterns do not concern it.
        let reaches_no_key = command.name == "TIME";
        !(script && (self.read_only || self.keys.is_some())
            || self.read_only && command.class == Class::Write
            || self.keys.is_some() && !names_its_keys && !reaches_no_key)
    }

    /// This user's rights over commands in Redis's ACL rule syntax, as `ACL LIST` shows them
    /// and `ACL SETUSER` takes them: `+@all` for a user with every right, else `-@all` and
    /// each command of the table it may run (of `ACL`, only `CAT`, `HELP` and `WHOAMI`).
    pub fn command_rules(&self) -> Vec<String> {
        if !self.read_only && self.keys.is_none() {
            return vec!["+@all".to_owned()];
        }
        let mut rules = vec!["-@all".to_owned()];
        for command in commands().iter().filter(|command| self.may_run(command)) {
            if command.name == "ACL" {
                rules.extend(["+acl|cat", "+acl|help", "+acl|whoami"].map(str::to_owned));
            } else {
                rules.push(format!("+{}", command.name.to_ascii_lowercase()));
            }
        }
        rules
    }

    /// Redis's refusal of `argv` (a `command`) for this user, or `None` if it may run it.
    fn refusal(&self, command: &Command, argv: &Argv) -> Option<String> {
        if !self.may_run(command) {
            return Some(format!(
                "NOPERM this user has no permissions to run the '{}' command",
                command.name.to_ascii_lowercase()
            ));
        }
        let patterns = self.keys.as_ref()?;
        let allowed = |key: &[u8]| patterns.iter().any(|p| crate::glob::matches(p, key));
        let all_allowed = key_positions(command, argv)
            .into_iter()
            .all(|index| allowed(argv.get(index).unwrap_or_default()));
        (!all_allowed).then(|| {
            "NOPERM this user has no permissions to access one of the keys used as arguments"
                .to_owned()
        })
    }

    /// The error a command this user may run answers when it runs: `SORT`'s `BY` and `GET`
    /// patterns reach keys the command does not name, which a user limited to some keys may
    /// not read. Redis's `SORT` refuses them itself, so in a `MULTI` the command is queued
    /// and its refusal is its reply in `EXEC`'s array.
    fn run_refusal(&self, command: &Command, argv: &Argv) -> Option<&'static str> {
        if self.keys.is_none() || !matches!(command.name, "SORT" | "SORT_RO") {
            return None;
        }
        cmd::sort::pattern_refusal(argv, command.name == "SORT_RO")
    }
}

impl std::fmt::Debug for User {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("User")
            .field("name", &self.name)
            .field("read_only", &self.read_only)
            .field("keys", &self.keys.as_ref().map(|keys| keys.len()))
            .finish_non_exhaustive()
    }
}

/// The indices in `argv` of the keys `command` names: Redis's (first, last, step), the keys
/// after a count ([`cmd::counted_keys_at`]), `SORT`'s and `GEORADIUS`'s `STORE` destination,
/// the streams `XREAD` and `XREADGROUP` read and the key of an `XGROUP` or `XINFO`
/// ([`cmd::streams::keys_at`]), and `WATCH`'s every argument.
pub(crate) fn key_positions(command: &Command, argv: &Argv) -> Vec<usize> {
    let argc = argv.len() as i64;
    let (first, last, step) = match command.name {
        "WATCH" => (1, -1, 1),
        _ => {
            let (first, last, step) = command.keys;
            (i64::from(first), i64::from(last), i64::from(step))
        }
    };
    let last = if last < 0 { argc + last } else { last }.min(argc - 1);
    // A command that names no key (first 0) gives an empty range.
    let first = if first == 0 { last + 1 } else { first };
    let mut positions: Vec<usize> = (first..=last)
        .step_by(step.max(1) as usize)
        .map(|index| index as usize)
        .collect();
    if let Some(count_at) = cmd::counted_keys_at(command.name) {
        let count = argv.get(count_at).and_then(crate::num::parse_i64);
        let count = count.unwrap_or(0).clamp(0, argc) as usize;
        positions.extend((count_at + 1..=count_at + count).filter(|&i| i < argv.len()));
    }
    if command.name == "SORT" {
        positions.extend(cmd::sort::store_key_at(argv));
    }
    positions.extend(cmd::zsets::geo::store_keys_at(command.name, argv));
    positions.extend(cmd::streams::keys_at(command.name, argv).unwrap_or_default());
    positions
}

/// A password a connection must give: never printed (its `Debug` only says one is set), and
/// compared in time that does not depend on where the guess goes wrong.
#[derive(Clone, PartialEq, Eq)]
pub struct Password(Arc<[u8]>);

impl Password {
    /// The password's SHA-256 in lower-case hex: how Redis's `ACL LIST` shows a password.
    pub fn sha256_hex(&self) -> String {
        let digest = ring::digest::digest(&ring::digest::SHA256, &self.0);
        digest
            .as_ref()
            .iter()
            .map(|byte| format!("{byte:02x}"))
            .collect()
    }

    /// Panics on an empty password: the caller's configuration check refuses one.
    pub fn new(bytes: &[u8]) -> Password {
        assert!(!bytes.is_empty(), "a password is not empty");
        Password(Arc::from(bytes))
    }

    /// Whether `given` is this password. Every byte of the longer of the two is looked at
    /// whatever the outcome, so the time taken says nothing of how much of a guess was right.
    pub fn matches(&self, given: &[u8]) -> bool {
        let expected = &self.0;
        let mut differ = u8::from(expected.len() != given.len());
        for index in 0..expected.len().max(given.len()) {
            let a = expected.get(index).copied().unwrap_or(0);
            let b = given.get(index).copied().unwrap_or(0);
            differ |= a ^ b;
        }
        differ == 0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(set)")
    }
}

/// The reply to a command other than `AUTH`, `HELLO`, `QUIT` and `RESET` from a connection
/// that has not given the password yet (Redis's text).
pub const NOAUTH: &str = "NOAUTH Authentication required.";

/// The reply to a password that is not the one asked for, or a user other than `default`.
pub const WRONGPASS: &str = "WRONGPASS invalid username-password pair or user is disabled.";

/// `HELLO` without its `AUTH` option from a connection that has not given the password yet.
const HELLO_NOAUTH: &str = "NOAUTH HELLO must be called with the client already \
     authenticated, otherwise the HELLO AUTH <user> <pass> option can be used to authenticate \
     the client and select the RESP protocol version at the same time";

/// Who `user` with password `given` logs in as: `Some(None)` the `default` user (which takes
/// any password when none is asked for, Redis's `nopass`), `Some(Some(user))` one of the
/// table's, `None` nobody (a wrong password or an unknown user).
fn login(info: &ServerInfo, user: &[u8], given: &[u8]) -> Option<Option<Arc<User>>> {
    if user == b"default" {
        let required = info.requirepass.as_ref();
        return required
            .is_none_or(|password| password.matches(given))
            .then_some(None);
    }
    let found = info.users.iter().find(|u| u.name.as_bytes() == user)?;
    found
        .password
        .matches(given)
        .then(|| Some(Arc::clone(found)))
}

/// What a client connecting from `peer` is told before its connection is closed, when the
/// node asks no password and accepts only loopback clients (protected mode, as Redis's):
/// `None` lets it in.
pub fn protected_refusal(
    peer: std::net::IpAddr,
    password_set: bool,
    protected_mode: bool,
) -> Option<&'static str> {
    let loopback = match peer {
        std::net::IpAddr::V4(ip) => ip.is_loopback(),
        std::net::IpAddr::V6(ip) => {
            ip.is_loopback() || ip.to_ipv4_mapped().is_some_and(|ip| ip.is_loopback())
        }
    };
    (protected_mode && !password_set && !loopback).then_some(
        "-DENIED tandem is running in protected mode because no password is set: it accepts \
         connections from the loopback interface only. To connect from other machines, set a \
         password (`requirepass = \"...\"` in the node's configuration, or `tandem up \
         --requirepass PASS`) and send it with AUTH, or turn protected mode off \
         (`protected_mode = false`) on a network you trust.\r\n",
    )
}

/// Why a call came to be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Purpose {
    Command,
    /// An `EXEC`, with the session's answers to its block's connection commands if it had
    /// any (they are woven into the model's reply when the call is back).
    Exec(Option<Box<BlockAnswers>>),
    /// The keys whose versions the call reads.
    Watch(Vec<Vec<u8>>),
    /// A blocking command whose connection waits while nothing serves it.
    Block(BlockingCall),
    /// `SYNC` or `PSYNC`: the reply is the database's RDB file, framed as Redis's
    /// replication stream starts; the connection closes after it.
    Snapshot(Box<cmd::sync::Framing>),
    /// `SAVE` or `BGSAVE`: the reply is the database's RDB file (as `SYNC`'s), which the
    /// front end writes to the node's snapshot file and answers as Redis does.
    Save(SaveKind),
    /// `INFO` of sections that show the model's figures: the reply is the figures
    /// ([`crate::model::PROC_STATS`]), read after the connection's earlier calls, and the
    /// session writes the whole text when it comes back.
    Info(Box<InfoRequest>),
}

/// An `INFO` waiting for the model's figures: its arguments, and what the node told the
/// session when the request came.
#[derive(Clone, Debug)]
pub struct InfoRequest {
    argv: Vec<Vec<u8>>,
    info: ServerInfo,
}

impl PartialEq for InfoRequest {
    fn eq(&self, other: &InfoRequest) -> bool {
        self.argv == other.argv
    }
}

impl Eq for InfoRequest {}

/// A blocking command's call made for a connection that waits (see [`crate::cmd::blocking`]):
/// while it fails with [`crate::cmd::blocking::WOULD_BLOCK`] the front end parks it, handles
/// nothing more of its connection, and sends it again ([`CallArgs::set_awakened`]) after a
/// write commits, until it is served or its time is up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockingCall {
    /// How long the connection waits, from its first try; 0 for as long as it takes.
    pub timeout_ms: u64,
    /// What the call answers when its time is up (a null in the connection's protocol).
    pub timeout_reply: Vec<u8>,
}

/// Where a call runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunsOn {
    /// The primary's executor: every call on the primary.
    Primary,
    /// The backup's applier, as a linearizable read: a read-only command on a backup. It is
    /// never run again; if the backup cannot serve it in time its client is told to retry
    /// ([`backup_busy`]).
    Backup,
}

/// A call the session asks the runtime to make.
#[derive(Clone, Debug)]
pub struct Call {
    pub proc_id: ProcId,
    pub kind: ProcKind,
    pub args: Vec<u8>,
    pub purpose: Purpose,
    pub runs_on: RunsOn,
    /// `CLIENT REPLY OFF` or `SKIP` silenced its reply: [`Session::called`] writes none (the
    /// call's effects on the connection still take hold).
    pub silent: bool,
    /// What the counters make of it once its reply is written ([`CommandStats::count`]).
    pub tally: Tally,
}

/// How long a read whose reply was withheld is tried again before its client gets an error.
pub const READ_RETRY_MAX: Duration = Duration::from_secs(1);
/// The pause between two tries of a withheld read: about a heartbeat.
pub const READ_RETRY_PAUSE: Duration = Duration::from_micros(500);

impl Call {
    /// Whether this call must wait until the connection's earlier calls (`unanswered`) are
    /// answered before it is sent. A read whose reply the primary withholds runs again
    /// ([`Call::runs_again_after`]), so no write may be sent before it is answered, or the read
    /// run again would see that write; and a WATCH reads versions as of every earlier call.
    pub fn waits_for<'a>(&self, mut unanswered: impl Iterator<Item = &'a Call>) -> bool {
        match self.purpose {
            Purpose::Watch(_) | Purpose::Exec(Some(_)) => unanswered.next().is_some(),
            _ => self.kind == ProcKind::Write && unanswered.any(|p| p.kind == ProcKind::Read),
        }
    }

    /// Whether the connection's later commands must wait for this call's outcome before the
    /// session handles them: a WATCH's versions decide what a later EXEC sends, and an EXEC
    /// whose block holds connection commands may change the connection's protocol or name,
    /// which take hold only if it ran.
    pub fn holds_later(&self) -> bool {
        matches!(
            self.purpose,
            Purpose::Watch(_) | Purpose::Exec(Some(_)) | Purpose::Block(_)
        )
    }

    /// Whether the connection closes once this call's reply is sent, reading nothing more:
    /// after `SYNC`'s file nothing follows (tandem streams no replication).
    pub fn closes_connection(&self) -> bool {
        matches!(self.purpose, Purpose::Snapshot(_))
    }

    /// When the primary could not answer the call (its lease ran out before the reply could
    /// leave) `waited` after it was first sent: the pause after which it runs again, or
    /// `None` if its client is told instead. A read changes nothing and runs again, for up to
    /// [`READ_RETRY_MAX`], a heartbeat apart so the lease may be renewed meanwhile; a write
    /// may have committed.
    pub fn runs_again_after(&self, waited: Duration) -> Option<Duration> {
        (self.runs_on == RunsOn::Primary && self.kind == ProcKind::Read && waited < READ_RETRY_MAX)
            .then_some(READ_RETRY_PAUSE)
    }
}

/// What to do after [`Session::handle`].
#[derive(Debug)]
pub enum Step {
    /// The reply is written.
    Replied,
    /// Make this call; hand its outcome to [`Session::called`].
    Call(Call),
    /// The reply is written; close the connection once it is sent.
    Close,
    /// The request is a line of HTTP (`POST`, `Host:`): someone, likely a web page the
    /// user visited, is sending an HTTP request to the Redis port to drive the node. Close
    /// the connection at once, without a reply and without running anything after it, and
    /// say so in the log, as Redis does ("Possible SECURITY ATTACK").
    CrossProtocol,
    /// `SCRIPT KILL` while a script runs ([`ScriptActivity::Running`] or `Busy`): ask the
    /// node's watch to stop it and answer `+OK`; if it ended before the ask, make this call
    /// instead (it answers `NOTBUSY`).
    KillScript(Call),
    /// `CLIENT UNBLOCK`: if the connection `client_id` waits in a blocking command, end its
    /// wait and answer `:1`, else `:0` (nothing is written yet).
    Unblock(Unblock),
    /// `SHUTDOWN` (its arguments checked): stop the node as `SIGTERM` does, its log synced
    /// first, with no reply; a node run inside another program answers that it cannot.
    /// `save_refused`: `SAVE` was asked without `FORCE`, and a node writes no RDB file when
    /// it stops, so it answers Redis's failed-save error and says why in its log instead.
    Shutdown { save_refused: bool },
    /// A pub/sub command: carry it out on the node's hub ([`Hub::run`]), in order after the
    /// connection's earlier calls, appending its answer to what is written (`RESET` wrote
    /// `+RESET` and asks [`pubsub::Request::EndAll`]); then tell the session whether the
    /// connection is still subscribed ([`Session::set_subscribed`]).
    PubSub(pubsub::Request),
    /// `CLIENT LIST` or `CLIENT INFO`: answer with the lines of the connections asked for
    /// ([`Session::write_client_line`], each ending in a newline) as one verbatim string
    /// ([`write_list`]); nothing is written yet. Only a front end that sets
    /// [`ServerInfo::clients`] is asked.
    ClientList(ListRequest),
    /// `CLIENT KILL`: close the connections the request matches ([`KillRequest::matches`]),
    /// the asking one only once its reply is sent, and answer
    /// ([`KillRequest::write_reply`]); nothing is written yet. Only a front end that sets
    /// [`ServerInfo::clients`] is asked.
    ClientKill(KillRequest),
    /// `MONITOR`: from now on the connection is shown every command the node runs
    /// ([`monitor_line`]), until it closes or sends `RESET`; `+OK` is written. Only a front
    /// end that sets [`ServerInfo::clients`] is asked.
    Monitor,
}

/// The answer to `MONITOR` where the front end holds no other connections (`tandem proxy`).
pub const MONITOR_NOT_SERVED: &str =
    "ERR MONITOR is served by a node's own Redis port, not here: run it against a node";

/// Redis's refusal of `MONITOR` inside `MULTI` (a connection that may not wait).
pub const MONITOR_IN_BLOCK: &str = "ERR MONITOR isn't allowed for DENY BLOCKING client";

/// `MONITOR`, where the front end holds every connection.
fn monitor(info: &ServerInfo, proto: Proto, out: &mut Vec<u8>) -> Step {
    if !info.clients {
        ReplyWriter::new(out, proto).error(MONITOR_NOT_SERVED);
        return Step::Replied;
    }
    ReplyWriter::new(out, proto).ok();
    Step::Monitor
}

/// Whether a monitor is shown `argv` when it runs (Redis's `call()`): not an administrative
/// command nor one Redis keeps from monitors, but for the scripts and functions, which Redis
/// shows before they run (their commands follow, see `tandem_store::InnerCalls`).
pub fn shown_to_monitors(argv: &Argv) -> bool {
    let name = String::from_utf8_lossy(argv.get(0).unwrap_or_default()).to_ascii_lowercase();
    let spec = match (specs::spec(&name), argv.get(1)) {
        (Some(_), Some(sub)) if specs::subcommands(&name).next().is_some() => {
            let sub = String::from_utf8_lossy(sub).to_ascii_lowercase();
            specs::spec(&format!("{name}|{sub}"))
        }
        (spec, _) => spec,
    };
    let Some(spec) = spec else {
        return true;
    };
    let scripted = matches!(
        spec.name,
        "eval" | "evalsha" | "eval_ro" | "evalsha_ro" | "fcall" | "fcall_ro"
    );
    scripted
        || !spec
            .flags
            .iter()
            .any(|flag| matches!(*flag, "admin" | "skip_monitor"))
}

/// The line a monitor is shown for `words` run in database `db` by `client` (`127.0.0.1:
/// 50000`, or `lua` for a script's command) at `unix_us` microseconds: Redis's format,
/// passwords redacted as Redis redacts them (`AUTH`, `HELLO … AUTH`, `MIGRATE … AUTH`).
pub fn monitor_line(unix_us: u64, db: u32, client: &str, words: &[&[u8]]) -> Vec<u8> {
    let mut line = format!(
        "+{}.{:06} [{db} {client}] ",
        unix_us / 1_000_000,
        unix_us % 1_000_000
    )
    .into_bytes();
    let redacted = redacted_words(words);
    for (index, word) in words.iter().enumerate() {
        if index > 0 {
            line.push(b' ');
        }
        if redacted.contains(&index) {
            line.extend_from_slice(b"\"(redacted)\"");
        } else {
            quote_repr(word, &mut line);
        }
    }
    line.extend_from_slice(b"\r\n");
    line
}

/// Which of `words` hold a password: `AUTH`'s arguments, `HELLO`'s after its `AUTH`, and
/// `MIGRATE`'s after `AUTH` (one) or `AUTH2` (a user and a password).
fn redacted_words(words: &[&[u8]]) -> Vec<usize> {
    let name = words.first().copied().unwrap_or_default();
    let after = |keyword: &[u8], count: usize, from: usize| -> Vec<usize> {
        (from..words.len())
            .filter(|index| words[*index].eq_ignore_ascii_case(keyword))
            .flat_map(|index| index + 1..=index + count)
            .filter(|index| *index < words.len())
            .collect()
    };
    if name.eq_ignore_ascii_case(b"AUTH") {
        (1..words.len()).collect()
    } else if name.eq_ignore_ascii_case(b"HELLO") {
        after(b"AUTH", 2, 2)
    } else if name.eq_ignore_ascii_case(b"MIGRATE") {
        let mut redacted = after(b"AUTH", 1, 6);
        redacted.extend(after(b"AUTH2", 2, 6));
        redacted
    } else {
        Vec::new()
    }
}

/// `word` quoted as Redis's `sdscatrepr` quotes it.
fn quote_repr(word: &[u8], out: &mut Vec<u8>) {
    out.push(b'"');
    for &byte in word {
        match byte {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            b'\r' => out.extend_from_slice(b"\\r"),
            b'\t' => out.extend_from_slice(b"\\t"),
            0x07 => out.extend_from_slice(b"\\a"),
            0x08 => out.extend_from_slice(b"\\b"),
            byte if byte.is_ascii_graphic() || byte == b' ' => out.push(byte),
            byte => out.extend_from_slice(format!("\\x{byte:02x}").as_bytes()),
        }
    }
    out.push(b'"');
}

/// What `CLIENT UNBLOCK` asks of a waiting connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Unblock {
    pub client_id: u64,
    /// The wait ends with an error ([`UNBLOCKED_BY_CLIENT`]) rather than as if its time were
    /// up.
    pub error: bool,
}

/// What a connection whose wait `CLIENT UNBLOCK … ERROR` ended is told.
pub const UNBLOCKED_BY_CLIENT: &str = "UNBLOCKED client unblocked via CLIENT UNBLOCK";
/// What a connection waiting in a blocking command is told when the node stops being its
/// group's primary (Redis's words when a master turns replica).
pub const UNBLOCKED_BY_ROLE: &str =
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)";

/// How a call ended.
#[derive(Clone, Copy, Debug)]
pub enum Outcome<'a> {
    /// The call committed or read: its reply, in RESP.
    Reply(&'a [u8]),
    /// The command refused: its error text, code first.
    Failed(&'a str),
}

/// A connection's state.
#[derive(Debug)]
pub struct Session {
    id: u64,
    proto: Proto,
    name: Option<Vec<u8>>,
    /// The database its commands run in (`SELECT`).
    db: u8,
    /// Inside `MULTI`: the queued commands, and whether one was refused (`EXEC` then aborts).
    multi: Option<(Vec<Argv>, bool)>,
    /// The keys `WATCH`ed: each with the version seen and its database.
    watched: Vec<(Vec<u8>, u64, u8)>,
    /// Whether the connection gave the password (consulted only while one is asked for).
    authenticated: bool,
    /// The table's user the connection logged in as; `None`: `default`, with every right.
    user: Option<Arc<User>>,
    /// The most a `SYNC` reply may hold (the port's output buffer limit).
    reply_limit: Option<cmd::sync::ReplyLimit>,
    /// Whether the connection holds a subscription (the hub's to say): in RESP2 it may then
    /// send only the pub/sub commands, `PING`, `QUIT` and `RESET`.
    subscribed: bool,
    replies: ReplyMode,
    /// Whether the reply to the request handled last is silenced.
    silenced: bool,
    /// What the counters make of the request handled last ([`Session::take_tally`]).
    tally: Tally,
    /// The command of the request handled last, as Redis's `lookupCommand` found it (none
    /// for an unknown command or subcommand): `CLIENT LIST`'s `cmd`.
    last_command: StatId,
    /// `CLIENT NO-EVICT on`: the front end spares the connection when it closes clients to
    /// keep their replies within its budget ([`Session::no_evict`]).
    no_evict: bool,
    /// A `BGSAVE` in a block that ran answered "scheduled": the front end makes its call
    /// next ([`Session::take_scheduled_save`]).
    save_scheduled: bool,
}

/// `CLIENT REPLY`: whether the connection's replies are sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ReplyMode {
    On,
    Off,
    /// `SKIP`: the next request's reply is not sent.
    SkipNext,
}

/// What the connection commands of a `MULTI` block answered, and the connection's state
/// after them. Redis queues them with the data commands and runs them in `EXEC`, in order; a
/// block is still one txn here, so the session answers its own commands when `EXEC` is sent
/// (none reads the database, and no data command reads the connection's state) and weaves
/// their replies into the model's array once the call is back. Their effects (a name, a
/// protocol) take hold only if `EXEC` ran: a `WATCH` that aborts it undoes them, as in Redis.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BlockAnswers {
    /// Per queued command, in order: who answers it.
    replies: Vec<BlockReply>,
    /// The protocol after the block (`HELLO` may switch it).
    proto: Proto,
    /// The client name after the block (`CLIENT SETNAME`, `HELLO … SETNAME`).
    name: Option<Vec<u8>>,
    /// The database after the block (`SELECT`).
    db: u8,
    /// Whether the connection is spared from eviction after the block (`CLIENT NO-EVICT`).
    no_evict: bool,
    /// Whether a `BGSAVE` in the block was scheduled, to run once the block ran.
    save_scheduled: bool,
}

/// Who answers one command of a `MULTI` block.
#[derive(Clone, Debug, PartialEq, Eq)]
enum BlockReply {
    /// The session answered it (a connection command).
    Session(Vec<u8>),
    /// The model does: a data command.
    Data,
    /// A pub/sub command: the hub, once the block ran (a publication's count, a
    /// subscription's confirmation), in the protocol in force at its place in the block (a
    /// `HELLO` after it does not change how it is answered).
    PubSub(pubsub::Request, Proto),
}

impl Session {
    pub fn new(id: u64) -> Session {
        Session {
            id,
            proto: Proto::Resp2,
            name: None,
            db: 0,
            multi: None,
            watched: Vec::new(),
            authenticated: false,
            user: None,
            reply_limit: None,
            subscribed: false,
            replies: ReplyMode::On,
            silenced: false,
            tally: Tally::Nothing,
            last_command: StatId::NONE,
            no_evict: false,
            save_scheduled: false,
        }
    }

    /// What the counters make of the request [`Session::handle`] handled last, if it was
    /// answered at once (a [`Step::Call`]'s is [`Call::tally`], counted with its reply).
    pub fn take_tally(&mut self) -> Tally {
        std::mem::take(&mut self.tally)
    }

    /// Whether `argv`, handled next, shows the counters (`INFO`, or an `EXEC` whose block
    /// holds one): the front end then copies them into [`ServerInfo::command_stats`], which
    /// no other request pays for.
    pub fn wants_stats(&self, argv: &Argv) -> bool {
        let named = |argv: &Argv, name: &[u8]| {
            argv.get(0)
                .is_some_and(|first| first.eq_ignore_ascii_case(name))
        };
        named(argv, b"INFO")
            || (named(argv, b"EXEC")
                && self
                    .multi
                    .as_ref()
                    .is_some_and(|(queued, _)| queued.iter().any(|q| named(q, b"INFO"))))
    }

    /// The database the connection's commands run in (`SELECT`).
    pub fn db(&self) -> u8 {
        self.db
    }

    /// The commands queued in the connection's `MULTI` block, if one is open.
    pub fn queued(&self) -> Option<&[Argv]> {
        self.multi.as_ref().map(|(queued, _)| queued.as_slice())
    }

    /// The connection's id (`CLIENT ID`).
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Tells the session whether its connection holds a subscription now (after a
    /// [`Step::PubSub`]).
    pub fn set_subscribed(&mut self, subscribed: bool) {
        self.subscribed = subscribed;
    }

    /// Whether the reply to the request [`Session::handle`] handled last is silenced
    /// (`CLIENT REPLY OFF` or `SKIP`): a front end that writes it (`CLIENT UNBLOCK`'s, a
    /// `SCRIPT KILL`'s, a pub/sub command's that is no push) drops it.
    pub fn reply_silenced(&self) -> bool {
        self.silenced
    }

    /// The session, told the most bytes a reply may leave unsent on its connection before
    /// the connection is closed: a `SYNC` file longer than that is refused, not cut short.
    pub fn with_reply_limit(mut self, limit: Option<cmd::sync::ReplyLimit>) -> Session {
        self.reply_limit = limit;
        self
    }

    pub fn proto(&self) -> Proto {
        self.proto
    }

    /// Whether the connection must still give the password before it runs anything: it is
    /// then held to Redis's limits for unauthenticated requests
    /// ([`crate::resp::RequestLimits::unauthenticated`]).
    pub fn awaits_auth(&self, info: &ServerInfo) -> bool {
        info.requirepass.is_some() && !self.authenticated
    }

    /// Handles one request; its reply (if any now) is appended to `out`.
    pub fn handle(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let start = out.len();
        let skipped = self.replies == ReplyMode::SkipNext;
        if skipped {
            self.replies = ReplyMode::On;
        }
        let mut step = self.handle_request(argv, info, out);
        // `CLIENT REPLY ON` clears the skip before it answers, as in Redis: its `OK` is sent.
        let skipped = skipped && !turns_replies_on(argv);
        self.silenced = skipped || self.replies == ReplyMode::Off;
        if self.silenced {
            out.truncate(start);
            if let Step::Call(call) | Step::KillScript(call) = &mut step {
                call.silent = true;
            }
        }
        step
    }

    fn handle_request(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let name = argv.get(0).unwrap_or_default();
        // Before anything else, as Redis's processCommand: no Redis command is called
        // `POST` or `Host:`, so these are a browser's request, never a client's.
        if name.eq_ignore_ascii_case(b"POST") || name.eq_ignore_ascii_case(b"Host:") {
            return Step::CrossProtocol;
        }
        self.tally = Tally::Rejected(StatId::NONE);
        self.last_command = StatId::NONE;
        let Some((index, command)) = cmd::lookup(name) else {
            self.refuse_in_multi();
            ReplyWriter::new(out, self.proto).error_bytes(&unknown_command(argv));
            return Step::Replied;
        };
        // Refused until it runs: each refusal below is a rejected call of its command.
        let stat = StatId::of(index, argv);
        self.tally = Tally::Rejected(stat);
        self.last_command = stat.as_looked_up(index, argv);
        if !command.arity_fits(argv.len()) {
            self.refuse_in_multi();
            ReplyWriter::new(out, self.proto).error(cmd::arity_error(name).text());
            return Step::Replied;
        }
        // As Redis: the subcommand of a container command is looked up, and its arity
        // checked, with the command's own.
        if matches!(
            command.name,
            "XGROUP" | "XINFO" | "OBJECT" | "FUNCTION" | "CONFIG" | "MEMORY" | "PUBSUB" | "ACL"
        ) && let Some(refusal) = cmd::subcommand_refusal(command.name, argv)
        {
            // As Redis: an unknown subcommand is no command, whose refusal counts only as
            // an error.
            if stat == StatId::entry(index) {
                self.tally = Tally::Rejected(StatId::NONE);
            }
            self.refuse_in_multi();
            ReplyWriter::new(out, self.proto).error_bytes(&refusal);
            return Step::Replied;
        }
        // `CONFIG GET`, `CONFIG SET` and `MEMORY USAGE` are commands of their own (the model
        // runs them).
        let (index, command) = cmd::resolve(index, command, argv);
        // As Redis: an unknown command or a wrong arity is refused first, then anything but
        // the commands that authenticate, end or reset the connection waits for the password.
        if info.requirepass.is_some()
            && !self.authenticated
            && !matches!(command.name, "AUTH" | "HELLO" | "QUIT" | "RESET")
        {
            ReplyWriter::new(out, self.proto).error(NOAUTH);
            return Step::Replied;
        }
        if let Some(refusal) = self.refusal(command, argv, info) {
            self.reject(command, &refusal, out);
            return Step::Replied;
        }
        if info.script != ScriptActivity::Idle
            && self.multi.is_none()
            && is_script_kill(command.name, argv)
        {
            self.tally = Tally::Ran(stat);
            return match self.data_call(index, command, argv, info, out) {
                Step::Call(call) => Step::KillScript(call),
                other => other,
            };
        }
        if self.refuses_while_subscribed(command, argv, out) {
            return Step::Replied;
        }
        if self.multi.is_some()
            && !matches!(
                command.name,
                "EXEC" | "DISCARD" | "MULTI" | "WATCH" | "QUIT" | "RESET"
            )
        {
            // A queued command counts when `EXEC` runs it.
            if self.queue(command, argv, out) {
                self.tally = Tally::Nothing;
            }
            return Step::Replied;
        }
        if let Some(user) = &self.user
            && let Some(refusal) = user.run_refusal(command, argv)
        {
            ReplyWriter::new(out, self.proto).error(refusal);
            return Step::Replied;
        }
        self.tally = Tally::Ran(stat);
        if command.class != Class::Connection {
            return self.data_call(index, command, argv, info, out);
        }
        self.connection_command(command, argv, info, out)
    }

    /// A subscribed RESP2 connection may send only the pub/sub commands, `PING`, `QUIT` and
    /// `RESET` (Redis's check in `processCommand`): whether `command` was refused for it.
    fn refuses_while_subscribed(
        &mut self,
        command: &Command,
        argv: &Argv,
        out: &mut Vec<u8>,
    ) -> bool {
        if !self.subscribed
            || self.proto != Proto::Resp2
            || pubsub::allowed_while_subscribed(command.name)
        {
            return false;
        }
        // Redis looks a subcommand up (and checks its arity) before this check, as it does
        // for the containers `handle` checks first.
        if matches!(command.name, "CLIENT" | "CLUSTER" | "COMMAND" | "SCRIPT")
            && argv.len() >= 2
            && let Some(refusal) = cmd::subcommand_refusal(command.name, argv)
        {
            self.refuse_in_multi();
            ReplyWriter::new(out, self.proto).error_bytes(&refusal);
            return true;
        }
        // Redis's `rejectCommandFormat`: an `EXEC` so refused gives the text without its code
        // after "EXECABORT … because of:".
        let text = pubsub::only_pubsub_here(argv);
        let text = match command.name {
            "EXEC" => text.trim_start_matches("ERR "),
            _ => &text,
        };
        self.reject(command, text, out);
        true
    }

    /// Queues `argv` in the connection's `MULTI` block. Like Redis, every command but those
    /// that end or watch the block is queued, connection commands too (`EXEC` answers them,
    /// see `BlockAnswers`); a subcommand Redis does not know, or one given the wrong number
    /// of arguments, is refused now, as an unknown command is, and so is `SYNC` (a block
    /// cannot hold its file).
    /// Returns whether it was queued.
    fn queue(&mut self, command: &Command, argv: &Argv, out: &mut Vec<u8>) -> bool {
        if matches!(command.name, "CLIENT" | "CLUSTER" | "COMMAND" | "SCRIPT")
            && argv.len() >= 2
            && let Some(refusal) = cmd::subcommand_refusal(command.name, argv)
        {
            self.refuse_in_multi();
            ReplyWriter::new(out, self.proto).error_bytes(&refusal);
            return false;
        }
        if cmd::sync::is_snapshot(command.name) || matches!(command.name, "SHUTDOWN" | "SAVE") {
            self.reject(command, cmd::sync::NOT_IN_MULTI, out);
            return false;
        }
        let (queued, _) = self.multi.as_mut().expect("inside MULTI");
        queued.push(argv.clone());
        ReplyWriter::new(out, self.proto).simple("QUEUED");
        true
    }

    /// Why `command` is refused before it is queued in a block (a refused one aborts the
    /// block), as Redis checks: the user's rights (the command's first, then the keys it
    /// names), then in Redis Cluster mode whether its keys are this endpoint's shard's and
    /// what the mode does not allow, then a busy script's refusal.
    fn refusal(&self, command: &Command, argv: &Argv, info: &ServerInfo) -> Option<String> {
        if let Some(user) = &self.user
            && let Some(refusal) = user.refusal(command, argv)
        {
            return Some(refusal);
        }
        if let Some(redirection) = cluster::redirection(info, command, argv) {
            return Some(redirection);
        }
        if let Some(refusal) = cluster::refusal(info, command.name, argv) {
            return Some(refusal.to_owned());
        }
        (info.script == ScriptActivity::Busy && !allowed_while_busy(command.name, argv))
            .then(|| BUSY.to_owned())
    }

    /// Refuses `command` with `text` as Redis's `rejectCommand` does: refused before it could
    /// be queued, so a block it was sent in fails; `EXEC` itself so refused discards its block
    /// (`-EXECABORT`), and the connection leaves it.
    fn reject(&mut self, command: &Command, text: &str, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, self.proto);
        // Redis's `execCommandAbort` answers so even without `MULTI`.
        if command.name == "EXEC" {
            self.multi = None;
            self.watched.clear();
            w.error(&format!(
                "EXECABORT Transaction discarded because of: {text}"
            ));
        } else {
            self.refuse_in_multi();
            w.error(text);
        }
    }

    fn refuse_in_multi(&mut self) {
        if let Some((_, refused)) = &mut self.multi {
            *refused = true;
        }
    }

    /// `LASTSAVE`; `SAVE` and `BGSAVE [SCHEDULE]`: the database's RDB file, taken as `SYNC`
    /// takes it (one read of the history on this node: a primary's, or a backup's), for the
    /// front end to write to the node's snapshot file ([`Purpose::Save`]). `SCHEDULE` asks
    /// to wait for another child process, which a node never runs, so it changes nothing.
    fn save(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let name = argv.get(0).unwrap_or_default();
        if name.eq_ignore_ascii_case(b"LASTSAVE") {
            match &info.saves {
                Some(saves) => {
                    let unix = i64::try_from(saves.last_save_unix).unwrap_or(i64::MAX);
                    ReplyWriter::new(out, self.proto).integer(unix);
                }
                None => ReplyWriter::new(out, self.proto).error(SAVES_NOT_SERVED),
            }
            return Step::Replied;
        }
        let background = name.eq_ignore_ascii_case(b"BGSAVE");
        if background && !bgsave_args_valid(argv) {
            ReplyWriter::new(out, self.proto).error("ERR syntax error");
            return Step::Replied;
        }
        let Some(saves) = &info.saves else {
            ReplyWriter::new(out, self.proto).error(SAVES_NOT_SERVED);
            return Step::Replied;
        };
        if saves.in_progress {
            ReplyWriter::new(out, self.proto).error(SAVE_IN_PROGRESS);
            return Step::Replied;
        }
        let (index, sync) = cmd::lookup(b"SYNC").expect("SYNC is a command");
        let mut snapshot = Argv::new();
        snapshot.push(b"SYNC");
        match self.data_call(index, sync, &snapshot, info, out) {
            Step::Call(mut call) => {
                call.purpose = Purpose::Save(if background {
                    SaveKind::Background
                } else {
                    SaveKind::Foreground
                });
                if let Some((save_index, _)) = cmd::lookup(argv.get(0).unwrap_or_default()) {
                    call.tally = Tally::Ran(StatId::of(save_index, argv));
                }
                Step::Call(call)
            }
            other => other,
        }
    }

    /// `INFO`: written at once, unless it shows the model's figures on a node with a role,
    /// which are then read by a call in the connection's order ([`Purpose::Info`]).
    fn info(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let shows_model = info_sections(argv)
            .iter()
            .any(|section| matches!(*section, "memory" | "stats" | "keyspace"));
        let runs_on = if info.primary {
            RunsOn::Primary
        } else {
            RunsOn::Backup
        };
        if !shows_model || info.host.is_none() || !(info.primary || info.backup) {
            let text = info_text(info, self.id, argv);
            ReplyWriter::new(out, self.proto).verbatim("txt", &text);
            return Step::Replied;
        }
        let request = InfoRequest {
            argv: argv.iter().map(<[u8]>::to_vec).collect(),
            info: info.clone(),
        };
        let (index, _) = cmd::lookup(b"INFO").expect("INFO is a command");
        Step::Call(Call {
            proc_id: crate::model::PROC_STATS,
            kind: ProcKind::Read,
            args: Vec::new(),
            purpose: Purpose::Info(Box::new(request)),
            runs_on,
            silent: false,
            tally: Tally::Ran(StatId::of(index, argv)),
        })
    }

    fn data_call(
        &mut self,
        index: usize,
        command: &Command,
        argv: &Argv,
        info: &ServerInfo,
        out: &mut Vec<u8>,
    ) -> Step {
        let kind = match command.class {
            Class::Write => ProcKind::Write,
            _ => ProcKind::Read,
        };
        // A Redis replica serves reads by default (`replica-read-only` is about writes);
        // a backup serves them linearizably, through its applier.
        let runs_on = if info.primary {
            RunsOn::Primary
        } else if info.backup && kind == ProcKind::Read {
            RunsOn::Backup
        } else {
            // As a Redis replica's refusal of a write (`rejectCommand`), or a cluster node's
            // redirection to the slot's primary.
            self.tally = Tally::Rejected(StatId::of(index, argv));
            let refusal = cluster::moved(info, command, argv).unwrap_or_else(|| not_primary(info));
            ReplyWriter::new(out, self.proto).error(&refusal);
            return Step::Replied;
        };
        let mut args = Vec::new();
        // A blocking command with a timeout Redis takes may leave the connection waiting;
        // with one it refuses, the call answers the error at once.
        let blocking = command.blocks.and_then(|blocks| {
            let timeout_ms = blocks.timeout_ms(argv)?;
            let mut timeout_reply = Vec::new();
            blocks.write_timeout_reply(&mut ReplyWriter::new(&mut timeout_reply, self.proto));
            Some(BlockingCall {
                timeout_ms,
                timeout_reply,
            })
        });
        let purpose = match blocking {
            // A backup's reads never wait (its front end parks none): a read that may wait
            // (`XREAD … BLOCK`) is the primary's to serve.
            Some(_) if runs_on == RunsOn::Backup => {
                let refusal =
                    cluster::moved(info, command, argv).unwrap_or_else(|| not_primary(info));
                ReplyWriter::new(out, self.proto).error(&refusal);
                return Step::Replied;
            }
            Some(blocking) => {
                CallArgs::encode_may_block(self.proto, self.db, argv, &mut args);
                Purpose::Block(blocking)
            }
            None => {
                CallArgs::encode_in(self.proto, self.db, argv, &mut args);
                if cmd::sync::is_snapshot(command.name) {
                    let framing =
                        cmd::sync::Framing::new(command.name, info.node_id, self.reply_limit);
                    Purpose::Snapshot(Box::new(framing))
                } else {
                    Purpose::Command
                }
            }
        };
        Step::Call(Call {
            proc_id: command_proc(index),
            kind,
            args,
            purpose,
            runs_on,
            silent: false,
            tally: Tally::Ran(StatId::of(index, argv)),
        })
    }

    /// Writes the reply of `call` (none if it was silenced). A `MULTI` block's publications
    /// go out on `hub` now, if the block ran: a front end without one never sent such a block
    /// ([`ServerInfo::pubsub`]).
    pub fn called(
        &mut self,
        call: Call,
        outcome: Outcome<'_>,
        out: &mut Vec<u8>,
        hub: Option<&mut Hub>,
    ) {
        let start = out.len();
        self.write_called(call.purpose, outcome, out, hub);
        if call.silent {
            out.truncate(start);
        }
    }

    fn write_called(
        &mut self,
        purpose: Purpose,
        outcome: Outcome<'_>,
        out: &mut Vec<u8>,
        hub: Option<&mut Hub>,
    ) {
        match (purpose, outcome) {
            (Purpose::Exec(Some(answers)), Outcome::Reply(bytes)) => {
                self.finish_exec(*answers, bytes, out, hub);
            }
            (Purpose::Watch(keys), Outcome::Reply(bytes)) => match decode_versions(bytes) {
                Ok(versions) if versions.len() == keys.len() => {
                    let db = self.db;
                    for (key, version) in keys.into_iter().zip(versions) {
                        if !self.watched.iter().any(|(k, _, d)| *k == key && *d == db) {
                            self.watched.push((key, version, db));
                        }
                    }
                    ReplyWriter::new(out, self.proto).ok();
                }
                _ => ReplyWriter::new(out, self.proto)
                    .error("ERR the node answered WATCH with malformed versions"),
            },
            (Purpose::Snapshot(framing), Outcome::Reply(bytes)) => {
                framing.write(bytes, self.proto, out);
            }
            // The figures, or (the node could not read them: it lost its role meanwhile) the
            // host's latest.
            (Purpose::Info(request), outcome) => {
                let InfoRequest {
                    argv: words,
                    mut info,
                } = *request;
                if let Outcome::Reply(bytes) = outcome {
                    info.model_stats_read = crate::model::decode_stats(bytes).map(Arc::new);
                }
                let mut argv = Argv::new();
                for word in &words {
                    argv.push(word);
                }
                let text = info_text(&info, self.id, &argv);
                ReplyWriter::new(out, self.proto).verbatim("txt", &text);
            }
            (_, Outcome::Reply(bytes)) => out.extend_from_slice(bytes),
            (_, Outcome::Failed(text)) => ReplyWriter::new(out, self.proto).error(text),
        }
    }

    fn ping(&self, argv: &Argv, out: &mut Vec<u8>) {
        let mut w = ReplyWriter::new(out, self.proto);
        match argv.get(1) {
            _ if argv.len() > 2 => {
                w.error(cmd::arity_error(argv.get(0).unwrap_or_default()).text())
            }
            // A subscribed RESP2 connection reads arrays only: Redis answers there `pong` and
            // the message (or an empty one).
            message if self.subscribed && self.proto == Proto::Resp2 => {
                w.array(2);
                w.bulk(b"pong");
                w.bulk(message.unwrap_or_default());
            }
            Some(message) => w.bulk(message),
            None => w.simple("PONG"),
        }
    }

    /// `RESET`: the connection as it was when it connected (Redis's
    /// `clearClientConnectionState`), its subscriptions ended unannounced.
    fn reset(&mut self, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        self.proto = Proto::Resp2;
        self.name = None;
        self.db = 0;
        self.multi = None;
        self.watched.clear();
        // Back to the default user, which must give its password again.
        self.authenticated = false;
        self.user = None;
        self.replies = ReplyMode::On;
        ReplyWriter::new(out, Proto::Resp2).simple("RESET");
        if !info.pubsub {
            return Step::Replied;
        }
        self.subscribed = false;
        Step::PubSub(pubsub::Request::EndAll)
    }

    fn connection_command(
        &mut self,
        command: &Command,
        argv: &Argv,
        info: &ServerInfo,
        out: &mut Vec<u8>,
    ) -> Step {
        let proto = self.proto;
        let arg = |i: usize| argv.get(i).unwrap_or_default();
        if matches!(command.name, "CLIENT" | "COMMAND" | "CONFIG" | "ACL")
            && argv.len() >= 2
            && let Some(refusal) = cmd::subcommand_refusal(command.name, argv)
        {
            ReplyWriter::new(out, proto).error_bytes(&refusal);
            return Step::Replied;
        }
        match command.name {
            "PING" => self.ping(argv, out),
            "ECHO" => ReplyWriter::new(out, proto).bulk(arg(1)),
            "QUIT" => {
                ReplyWriter::new(out, proto).ok();
                return Step::Close;
            }
            "SELECT" => {
                let mut w = ReplyWriter::new(out, proto);
                match crate::db::selected_db(arg(1)) {
                    Ok(db) => {
                        self.db = db;
                        w.ok();
                    }
                    Err(text) => w.error(text),
                }
            }
            "AUTH" => self.auth(argv, info, out),
            "HELLO" => return self.hello(argv, info, out),
            "RESET" => return self.reset(info, out),
            "MONITOR" => return monitor(info, proto, out),
            name if pubsub::is_command(name) => {
                if !info.pubsub {
                    ReplyWriter::new(out, proto).error(pubsub::NOT_SERVED);
                    return Step::Replied;
                }
                return match pubsub::request(name, argv, proto, out) {
                    Some(request) => Step::PubSub(request),
                    None => Step::Replied,
                };
            }
            "CLIENT" => return self.client(argv, info, out),
            "SHUTDOWN" => return shutdown(argv, info, proto, out),
            "SAVE" | "BGSAVE" | "LASTSAVE" => return self.save(argv, info, out),
            "COMMAND" => command_command(argv, proto, out),
            "ACL" => acl::acl(self, argv, info, out),
            "CONFIG" => config(argv, proto, out),
            "INFO" => return self.info(argv, info, out),
            "WAIT" => wait(argv, info, proto, out),
            "ROLE" => role(info, proto, out),
            "REPLCONF" => match cmd::sync::replconf(argv) {
                Some(Ok(())) => ReplyWriter::new(out, proto).ok(),
                Some(Err(text)) => ReplyWriter::new(out, proto).error(&text),
                None => {}
            },
            "MULTI" => {
                let mut w = ReplyWriter::new(out, proto);
                if self.multi.is_some() {
                    w.error("ERR MULTI calls can not be nested");
                } else {
                    self.multi = Some((Vec::new(), false));
                    w.ok();
                }
            }
            "DISCARD" => {
                let mut w = ReplyWriter::new(out, proto);
                if self.multi.take().is_some() {
                    self.watched.clear();
                    w.ok();
                } else {
                    w.error("ERR DISCARD without MULTI");
                }
            }
            "EXEC" => return self.exec(info, out),
            "WATCH" => return self.watch(argv, info, out),
            // Redis Cluster clients send these before reading from a replica; every node
            // here serves reads (a backup linearizably) and refuses writes it cannot take,
            // whatever the connection asked.
            "READONLY" | "READWRITE" => ReplyWriter::new(out, proto).ok(),
            "CLUSTER" => cluster::cluster(argv, info, proto, out),
            "UNWATCH" => {
                self.watched.clear();
                ReplyWriter::new(out, proto).ok();
            }
            other => {
                ReplyWriter::new(out, proto).error(&format!(
                    "ERR the connection command '{other}' is not served here"
                ));
            }
        }
        Step::Replied
    }

    /// `AUTH [user] password`: a wrong password leaves the connection as it was.
    fn auth(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) {
        let proto = self.proto;
        let arg = |i: usize| argv.get(i).unwrap_or_default();
        let mut w = ReplyWriter::new(out, proto);
        let required = info.requirepass.as_ref();
        if argv.len() > 3 {
            w.error(cmd::CmdError::SYNTAX.text());
        } else if argv.len() == 2 && required.is_none() {
            w.error(
                "ERR AUTH <password> called without any password configured for the \
                 default user. Are you sure your configuration is correct?",
            );
        } else {
            // `AUTH password` is the default user's; it is the only user there is.
            let (user, given) = if argv.len() == 2 {
                (b"default".as_slice(), arg(1))
            } else {
                (arg(1), arg(2))
            };
            if let Some(login) = login(info, user, given) {
                self.authenticated = true;
                self.user = login;
                w.ok();
            } else {
                // A wrong password leaves the connection as it was, as in Redis.
                w.error(WRONGPASS);
            }
        }
    }

    /// `WATCH key…`: a read of the keys' versions on the primary, which `EXEC` checks.
    fn watch(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let proto = self.proto;
        if self.multi.is_some() {
            ReplyWriter::new(out, proto).error("ERR WATCH inside MULTI is not allowed");
            return Step::Replied;
        }
        if !info.primary {
            let first = argv.get(1).unwrap_or_default();
            let refusal = cluster::moved_key(info, first).unwrap_or_else(|| not_primary(info));
            ReplyWriter::new(out, proto).error(&refusal);
            return Step::Replied;
        }
        let keys: Vec<Vec<u8>> = argv.iter().skip(1).map(<[u8]>::to_vec).collect();
        let mut key_argv = Argv::new();
        for key in &keys {
            key_argv.push(key);
        }
        let mut args = Vec::new();
        CallArgs::encode_in(proto, self.db, &key_argv, &mut args);
        Step::Call(Call {
            proc_id: PROC_WATCH,
            kind: ProcKind::Read,
            args,
            purpose: Purpose::Watch(keys),
            runs_on: RunsOn::Primary,
            silent: false,
            // `handle` counts the command that asks for a call as run.
            tally: self.tally.clone(),
        })
    }

    fn exec(&mut self, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let proto = self.proto;
        let Some((queued, refused)) = self.multi.take() else {
            ReplyWriter::new(out, proto).error("ERR EXEC without MULTI");
            return Step::Replied;
        };
        let watched = std::mem::take(&mut self.watched);
        if refused {
            ReplyWriter::new(out, proto)
                .error("EXECABORT Transaction discarded because of previous errors.");
            return Step::Replied;
        }
        // `handle` counted `EXEC` as run; its block's commands count as it runs them.
        let exec = match self.tally {
            Tally::Ran(id) => id,
            _ => StatId::NONE,
        };
        let block = queued.iter().map(StatId::of_argv).collect();
        self.tally = Tally::Exec { exec, block };
        let (answers, data) = self.answer_block(&queued, info);
        let uses_hub = answers
            .replies
            .iter()
            .any(|reply| matches!(reply, BlockReply::PubSub(..)));
        if data.is_empty() && watched.is_empty() && !uses_hub {
            // Nothing for the database to run or check: the session answers the block.
            let mut w = ReplyWriter::new(out, proto);
            w.array(answers.replies.len());
            for reply in &answers.replies {
                let BlockReply::Session(reply) = reply else {
                    unreachable!("a block without data or pub/sub commands");
                };
                out.extend_from_slice(reply);
            }
            self.proto = answers.proto;
            self.name = answers.name;
            self.db = answers.db;
            self.no_evict = answers.no_evict;
            self.save_scheduled |= answers.save_scheduled;
            return Step::Replied;
        }
        if !info.primary {
            ReplyWriter::new(out, proto).error(&not_primary(info));
            return Step::Replied;
        }
        // The session's answers travel with the call; the runtime handles nothing after it
        // until its outcome is back (`Call::holds_later`), so the commands after a block
        // that set a name or a protocol see it, if the block ran.
        // A block with pub/sub commands goes to the primary even without data commands: they
        // run on the hub in order after the connection's earlier calls, once it ran.
        let answers = answers
            .replies
            .iter()
            .any(|reply| !matches!(reply, BlockReply::Data))
            .then(|| Box::new(answers));
        // A block runs as one call, so it sees one state and its writes land together; a
        // block of reads only takes an LSN too (rare enough not to have a procedure of its
        // own).
        let mut args = Vec::new();
        ExecArgs::encode_in(proto, &watched, &data, &mut args);
        Step::Call(Call {
            proc_id: PROC_EXEC,
            kind: ProcKind::Write,
            args,
            purpose: Purpose::Exec(answers),
            runs_on: RunsOn::Primary,
            silent: false,
            tally: self.tally.clone(),
        })
    }

    /// Answers the connection commands of the block `queued` as they will run in `EXEC`, on
    /// a copy of this session's state; returns those answers and the block's data commands,
    /// each with the protocol it answers in (a `HELLO` before it may have switched it).
    fn answer_block(
        &self,
        queued: &[Argv],
        info: &ServerInfo,
    ) -> (BlockAnswers, Vec<(Proto, u8, Argv)>) {
        let mut scratch = Session {
            id: self.id,
            proto: self.proto,
            name: self.name.clone(),
            db: self.db,
            multi: None,
            watched: Vec::new(),
            authenticated: self.authenticated,
            user: self.user.clone(),
            reply_limit: self.reply_limit,
            subscribed: self.subscribed,
            replies: ReplyMode::On,
            silenced: false,
            tally: Tally::Nothing,
            last_command: self.last_command,
            no_evict: self.no_evict,
            save_scheduled: false,
        };
        let mut replies = Vec::with_capacity(queued.len());
        let mut data = Vec::new();
        let mut save_scheduled = false;
        for argv in queued {
            let (index, command) =
                cmd::lookup(argv.get(0).unwrap_or_default()).expect("a queued command is known");
            let (_, command) = cmd::resolve(index, command, argv);
            if command.class == Class::Connection {
                let mut reply = Vec::new();
                if command.name == "SSUBSCRIBE" && info.pubsub {
                    // Redis lets `SUBSCRIBE` and `PSUBSCRIBE` run in `EXEC`, for clients of
                    // old, but not `SSUBSCRIBE`.
                    ReplyWriter::new(&mut reply, scratch.proto).error(pubsub::SHARD_IN_MULTI);
                    replies.push(BlockReply::Session(reply));
                    continue;
                }
                if command.name == "BGSAVE" {
                    save_scheduled |= scratch.bgsave_in_block(argv, info, &mut reply);
                    replies.push(BlockReply::Session(reply));
                    continue;
                }
                // A block runs as one call: its `INFO` shows the host's latest figures.
                if command.name == "INFO" {
                    let text = info_text(info, scratch.id, argv);
                    ReplyWriter::new(&mut reply, scratch.proto).verbatim("txt", &text);
                    replies.push(BlockReply::Session(reply));
                    continue;
                }
                let mut step = scratch.connection_command(command, argv, info, &mut reply);
                if let Step::Unblock(_) = step {
                    // A block runs in one txn, in which no other connection's wait can end.
                    ReplyWriter::new(&mut reply, scratch.proto).integer(0);
                    step = Step::Replied;
                }
                if let Step::ClientList(_) | Step::ClientKill(_) = step {
                    ReplyWriter::new(&mut reply, scratch.proto).error(clients::IN_BLOCK);
                    step = Step::Replied;
                }
                if let Step::Monitor = step {
                    reply.clear();
                    ReplyWriter::new(&mut reply, scratch.proto).error(MONITOR_IN_BLOCK);
                    step = Step::Replied;
                }
                if let Step::PubSub(request) = step {
                    replies.push(BlockReply::PubSub(request, scratch.proto));
                    continue;
                }
                // The commands that call, close or end the block are never queued.
                assert!(
                    matches!(step, Step::Replied),
                    "{} ran in a block",
                    command.name
                );
                replies.push(BlockReply::Session(reply));
            } else if let Some(refusal) = scratch
                .user
                .as_ref()
                .and_then(|user| user.run_refusal(command, argv))
            {
                let mut reply = Vec::new();
                ReplyWriter::new(&mut reply, scratch.proto).error(refusal);
                replies.push(BlockReply::Session(reply));
            } else {
                data.push((scratch.proto, scratch.db, argv.clone()));
                replies.push(BlockReply::Data);
            }
        }
        let answers = BlockAnswers {
            replies,
            proto: scratch.proto,
            name: scratch.name,
            db: scratch.db,
            no_evict: scratch.no_evict,
            save_scheduled,
        };
        (answers, data)
    }

    /// Writes `EXEC`'s reply from the model's `reply` (a null array if a watched key
    /// changed, else one reply per data command) and the session's `answers`, and applies
    /// the block's effects on the connection (and its publications, on `hub`) if it ran.
    fn finish_exec(
        &mut self,
        answers: BlockAnswers,
        reply: &[u8],
        out: &mut Vec<u8>,
        mut hub: Option<&mut Hub>,
    ) {
        if reply == b"*-1\r\n" || reply == b"_\r\n" {
            out.extend_from_slice(reply);
            return;
        }
        let data_count = answers
            .replies
            .iter()
            .filter(|r| matches!(r, BlockReply::Data))
            .count();
        let Some(mut data_replies) =
            crate::resp::array_elements(reply).filter(|r| r.len() == data_count)
        else {
            ReplyWriter::new(out, self.proto)
                .error("ERR the node answered EXEC with a malformed reply");
            return;
        };
        data_replies.reverse();
        ReplyWriter::new(out, self.proto).array(answers.replies.len());
        for reply in answers.replies {
            match reply {
                BlockReply::Session(reply) => out.extend_from_slice(&reply),
                BlockReply::Data => out.extend_from_slice(data_replies.pop().expect("counted")),
                BlockReply::PubSub(request, proto) => {
                    let hub = hub
                        .as_deref_mut()
                        .expect("a block holds pub/sub commands only where a hub serves them");
                    hub.run(self.id, proto, request, out);
                    self.subscribed = hub.subscriptions(self.id) > 0;
                }
            }
        }
        self.proto = answers.proto;
        self.name = answers.name;
        self.db = answers.db;
        self.no_evict = answers.no_evict;
        self.save_scheduled |= answers.save_scheduled;
    }

    /// `BGSAVE` in a block, as Redis answers it inside `EXEC`: the file is not taken inside
    /// the block's txn but once it ran ("scheduled"); returns whether one was.
    fn bgsave_in_block(&self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> bool {
        let mut w = ReplyWriter::new(out, self.proto);
        if !bgsave_args_valid(argv) {
            w.error("ERR syntax error");
            return false;
        }
        match &info.saves {
            None => w.error(SAVES_NOT_SERVED),
            Some(saves) if saves.in_progress => w.error(SAVE_IN_PROGRESS),
            Some(_) => {
                w.simple("Background saving scheduled");
                return true;
            }
        }
        false
    }

    /// The call of a `BGSAVE` a block scheduled, once it can start (none is being written):
    /// its reply is silenced, the block having answered for it.
    pub fn take_scheduled_save(&mut self, info: &ServerInfo) -> Option<Call> {
        if !self.save_scheduled || info.saves.is_none_or(|saves| saves.in_progress) {
            return None;
        }
        self.save_scheduled = false;
        let mut argv = Argv::new();
        argv.push(b"BGSAVE");
        let mut out = Vec::new();
        match self.save(&argv, info, &mut out) {
            Step::Call(mut call) => {
                call.silent = true;
                call.tally = Tally::Nothing;
                Some(call)
            }
            _ => None,
        }
    }

    /// Whether a block scheduled a `BGSAVE` that has not started yet.
    pub fn save_is_scheduled(&self) -> bool {
        self.save_scheduled
    }

    fn hello(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        let mut proto = self.proto;
        let mut i = 1;
        if let Some(version) = argv.get(1) {
            match crate::num::parse_i64(version) {
                Some(2) => proto = Proto::Resp2,
                Some(3) => proto = Proto::Resp3,
                Some(_) => {
                    ReplyWriter::new(out, self.proto).error("NOPROTO unsupported protocol version");
                    return Step::Replied;
                }
                None => {
                    ReplyWriter::new(out, self.proto)
                        .error("ERR Protocol version is not an integer or out of range");
                    return Step::Replied;
                }
            }
            i = 2;
        }
        // Like Redis 7.0, each option takes effect as it is read: a name set, or a password
        // given, before a later option is refused stays set.
        while i < argv.len() {
            let option = argv.get(i).unwrap_or_default();
            match option.to_ascii_uppercase().as_slice() {
                b"AUTH" if i + 2 < argv.len() => {
                    let user = argv.get(i + 1).unwrap_or_default();
                    let given = argv.get(i + 2).unwrap_or_default();
                    let Some(login) = login(info, user, given) else {
                        ReplyWriter::new(out, self.proto).error(WRONGPASS);
                        return Step::Replied;
                    };
                    self.authenticated = true;
                    self.user = login;
                    i += 3;
                }
                b"SETNAME" if i + 1 < argv.len() => {
                    let name = argv.get(i + 1).unwrap_or_default();
                    if !valid_client_name(name) {
                        ReplyWriter::new(out, self.proto).error(BAD_CLIENT_NAME);
                        return Step::Replied;
                    }
                    self.name = (!name.is_empty()).then(|| name.to_vec());
                    i += 2;
                }
                _ => {
                    let mut text = b"ERR Syntax error in HELLO option '".to_vec();
                    text.extend_from_slice(c_string(option, usize::MAX));
                    text.push(b'\'');
                    ReplyWriter::new(out, self.proto).error_bytes(&text);
                    return Step::Replied;
                }
            }
        }
        if info.requirepass.is_some() && !self.authenticated {
            ReplyWriter::new(out, self.proto).error(HELLO_NOAUTH);
            return Step::Replied;
        }
        self.proto = proto;
        let mut w = ReplyWriter::new(out, proto);
        w.map(7);
        w.bulk(b"server");
        w.bulk(b"redis");
        w.bulk(b"version");
        w.bulk(REDIS_VERSION.as_bytes());
        w.bulk(b"proto");
        w.integer(if proto == Proto::Resp3 { 3 } else { 2 });
        w.bulk(b"id");
        w.integer(self.id as i64);
        w.bulk(b"mode");
        w.bulk(b"standalone");
        w.bulk(b"role");
        w.bulk(if info.primary { b"master" } else { b"replica" });
        w.bulk(b"modules");
        w.array(0);
        Step::Replied
    }

    fn client(&mut self, argv: &Argv, info: &ServerInfo, out: &mut Vec<u8>) -> Step {
        if let Some(step) = self.client_more(argv, info, out) {
            return step;
        }
        let mut w = ReplyWriter::new(out, self.proto);
        let sub = argv.get(1).unwrap_or_default().to_ascii_uppercase();
        match (sub.as_slice(), argv.len()) {
            (b"UNBLOCK", 3 | 4) => match client_unblock(argv) {
                Ok(unblock) => return Step::Unblock(unblock),
                Err(text) => w.error(text),
            },
            (b"SETNAME", 3) => {
                let name = argv.get(2).unwrap_or_default();
                if !valid_client_name(name) {
                    w.error(BAD_CLIENT_NAME);
                } else {
                    self.name = (!name.is_empty()).then(|| name.to_vec());
                    w.ok();
                }
            }
            (b"GETNAME", 2) => match &self.name {
                Some(name) => w.bulk(name),
                None => w.null(),
            },
            (b"ID", 2) => w.integer(self.id as i64),
            (b"REPLY", 3) => match argv
                .get(2)
                .unwrap_or_default()
                .to_ascii_uppercase()
                .as_slice()
            {
                b"ON" => {
                    self.replies = ReplyMode::On;
                    w.ok();
                }
                b"OFF" => self.replies = ReplyMode::Off,
                b"SKIP" if self.replies == ReplyMode::On => self.replies = ReplyMode::SkipNext,
                b"SKIP" => {}
                _ => w.error(cmd::CmdError::SYNTAX.text()),
            },
            (b"SETINFO", 4) => {
                let attr = argv.get(2).unwrap_or_default().to_ascii_uppercase();
                if attr == b"LIB-NAME" || attr == b"LIB-VER" {
                    w.ok();
                } else {
                    w.error(&format!(
                        "ERR Unrecognized option '{}'",
                        String::from_utf8_lossy(argv.get(2).unwrap_or_default())
                    ));
                }
            }
            _ => w.error(&format!(
                "ERR unknown subcommand or wrong number of arguments for '{}'. Try CLIENT HELP.",
                String::from_utf8_lossy(argv.get(1).unwrap_or_default())
            )),
        }
        Step::Replied
    }
}

/// `SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]`, read as Redis 7.0 reads it. No shutdown
/// is ever under way when a command is read (a node stops at once, with no save to wait
/// for), so `ABORT` finds none; `NOW` (skip waiting for replicas) changes nothing, as every
/// acknowledged write is on the backups the safety rule names already. While a script is
/// busy only `NOSAVE` stops the node, as in Redis.
fn shutdown(argv: &Argv, info: &ServerInfo, proto: Proto, out: &mut Vec<u8>) -> Step {
    let mut w = ReplyWriter::new(out, proto);
    let (mut nosave, mut save, mut now, mut force, mut abort) = (false, false, false, false, false);
    for arg in argv.iter().skip(1) {
        let flag = match arg.to_ascii_uppercase().as_slice() {
            b"NOSAVE" => &mut nosave,
            b"SAVE" => &mut save,
            b"NOW" => &mut now,
            b"FORCE" => &mut force,
            b"ABORT" => &mut abort,
            _ => {
                w.error(cmd::CmdError::SYNTAX.text());
                return Step::Replied;
            }
        };
        *flag = true;
    }
    if abort && (nosave || save || now || force) || nosave && save {
        w.error(cmd::CmdError::SYNTAX.text());
        return Step::Replied;
    }
    if abort {
        w.error("ERR No shutdown in progress.");
        return Step::Replied;
    }
    if !nosave && info.script == ScriptActivity::Busy {
        w.error(BUSY);
        return Step::Replied;
    }
    Step::Shutdown {
        save_refused: save && !force,
    }
}

/// `CLIENT UNBLOCK client-id [TIMEOUT|ERROR]`, read as Redis reads it.
fn client_unblock(argv: &Argv) -> Result<Unblock, &'static str> {
    let client_id = crate::num::parse_i64(argv.get(2).unwrap_or_default())
        .ok_or("ERR value is not an integer or out of range")?;
    let error = match argv.get(3).map(<[u8]>::to_ascii_uppercase).as_deref() {
        None | Some(b"TIMEOUT") => false,
        Some(b"ERROR") => true,
        Some(_) => return Err("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR"),
    };
    Ok(Unblock {
        client_id: u64::try_from(client_id).unwrap_or(0),
        error,
    })
}

/// The bytes C's `%.*s` prints of `bytes`: at most `max`, and none from a NUL on. Redis
/// quotes a client's bytes in its errors this way, other bytes as they are.
pub(crate) fn c_string(bytes: &[u8], max: usize) -> &[u8] {
    let end = bytes
        .iter()
        .position(|&byte| byte == 0)
        .unwrap_or(bytes.len());
    &bytes[..end.min(max)]
}

/// Redis's reply to a command it does not know: the name, then the arguments quoted while
/// the quoted text (quotes and spaces included) is shorter than 128 bytes, each cut to what
/// is left of those 128.
/// Whether a call of procedure `proc_id` with wire arguments `args` (as a session encodes a
/// command for the native port) is `SCRIPT KILL` or `FUNCTION KILL`: a node's native port
/// answers it itself while a script runs, as its RESP port does.
pub fn is_script_kill_call(proc_id: tandem_store::ProcId, args: &[u8]) -> bool {
    let Some(command) = ["SCRIPT", "FUNCTION"].into_iter().find_map(|name| {
        let (index, command) = cmd::lookup(name.as_bytes())?;
        (proc_id == crate::model::command_proc(index)).then_some(command)
    }) else {
        return false;
    };
    let mut argv = Argv::new();
    crate::wire::CallArgs::decode_into(args, &mut argv).is_ok()
        && is_script_kill(command.name, &argv)
}

/// Whether `SCRIPT KILL` or `FUNCTION KILL` is what `argv` asks. Either stops whatever
/// script or function runs (Redis refuses to stop a function with `SCRIPT KILL` and a script
/// with `FUNCTION KILL`; a node's watch does not tell them apart).
fn is_script_kill(name: &str, argv: &Argv) -> bool {
    matches!(name, "SCRIPT" | "FUNCTION")
        && argv.len() == 2
        && argv
            .get(1)
            .is_some_and(|sub| sub.eq_ignore_ascii_case(b"KILL"))
}

/// Whether Redis runs `name` while a script is busy (its commands flagged `allow-busy`, of
/// those tandem has: the ones that authenticate, end or reset the connection, frame a block,
/// `SCRIPT KILL` and `FUNCTION KILL`; `FUNCTION STATS`, which the executor would answer only
/// once the script ended, is answered `-BUSY`).
fn allowed_while_busy(name: &str, argv: &Argv) -> bool {
    matches!(
        name,
        "AUTH"
            | "HELLO"
            | "QUIT"
            | "RESET"
            | "MULTI"
            | "DISCARD"
            | "WATCH"
            | "UNWATCH"
            | "SHUTDOWN"
    ) || is_script_kill(name, argv)
}

/// Whether `argv` is `BGSAVE` alone or `BGSAVE SCHEDULE`, the forms Redis 7.0 takes.
fn bgsave_args_valid(argv: &Argv) -> bool {
    match argv.len() {
        1 => true,
        2 => argv
            .get(1)
            .unwrap_or_default()
            .eq_ignore_ascii_case(b"SCHEDULE"),
        _ => false,
    }
}

/// Whether `argv` is `CLIENT REPLY ON`.
fn turns_replies_on(argv: &Argv) -> bool {
    argv.len() == 3
        && argv
            .get(0)
            .unwrap_or_default()
            .eq_ignore_ascii_case(b"CLIENT")
        && argv
            .get(1)
            .unwrap_or_default()
            .eq_ignore_ascii_case(b"REPLY")
        && argv.get(2).unwrap_or_default().eq_ignore_ascii_case(b"ON")
}

fn unknown_command(argv: &Argv) -> Vec<u8> {
    let mut quoted = Vec::new();
    for arg in argv.iter().skip(1) {
        if quoted.len() >= 128 {
            break;
        }
        let room = 128 - quoted.len();
        quoted.push(b'\'');
        quoted.extend_from_slice(c_string(arg, room));
        quoted.extend_from_slice(b"' ");
    }
    let mut text = b"ERR unknown command '".to_vec();
    text.extend_from_slice(c_string(argv.get(0).unwrap_or_default(), 128));
    text.extend_from_slice(b"', with args beginning with: ");
    text.extend_from_slice(&quoted);
    text
}

/// Redis's check of a client name (`clientSetNameOrReply`).
fn valid_client_name(name: &[u8]) -> bool {
    name.iter().all(|&b| (b'!'..=b'~').contains(&b))
}

const BAD_CLIENT_NAME: &str =
    "ERR Client names cannot contain spaces, newlines or special characters.";

/// A backup's answer to a read it could not serve in time (the primary did not answer its
/// question, or the backup could not catch up, within the read's wait): Redis's `TRYAGAIN`,
/// naming the primary, which the client may read from instead.
pub fn backup_busy(info: &ServerInfo) -> String {
    let node = info.node_id;
    match &info.primary_resp {
        Some(address) => format!(
            "TRYAGAIN backup {node} could not serve the read in time; retry, or read from the \
             primary at {address}"
        ),
        None => format!(
            "TRYAGAIN backup {node} could not serve the read in time, and no primary is known \
             now; retry shortly"
        ),
    }
}

/// A passive backup's answer to a read: it keeps the primary's memory, not a database it
/// could run a command on. `READONLY`, as a write's refusal, so that clients go to the
/// primary it names.
pub fn passive_backup(info: &ServerInfo) -> String {
    let node = info.node_id;
    let primary = match &info.primary_resp {
        Some(address) => format!("the primary serves at {address}"),
        None => "no primary is known now; retry shortly".to_owned(),
    };
    format!("READONLY backup {node} keeps a passive copy and serves no reads; {primary}")
}

/// A node's answer to a data command it does not run: Redis's `READONLY`, naming the
/// primary (a write on a backup, or any command on a node with no role).
pub fn not_primary(info: &ServerInfo) -> String {
    match &info.primary_resp {
        Some(address) => format!(
            "READONLY You can't write against a read only replica. The primary serves at \
             {address}"
        ),
        None => "READONLY You can't write against a read only replica. No primary is known \
                 now; retry shortly"
            .to_string(),
    }
}

/// One command's entry of `COMMAND INFO`: Redis's own for a command Redis has (its flags,
/// ACL categories, tips and key specs, and the subcommands tandem serves), else what tandem
/// knows of it.
fn command_info(command: &Command, w: &mut ReplyWriter<'_>) {
    match specs::spec(&command.name.to_ascii_lowercase()) {
        Some(spec) => spec_info(spec, w),
        None => tandem_info(command, w),
    }
}

fn spec_info(spec: &Spec, w: &mut ReplyWriter<'_>) {
    w.array(10);
    w.bulk(spec.name.as_bytes());
    w.integer(i64::from(spec.arity));
    simples(spec.flags, w);
    w.integer(i64::from(spec.keys.0));
    w.integer(i64::from(spec.keys.1));
    w.integer(i64::from(spec.keys.2));
    simples(spec.acl, w);
    w.set(spec.tips.len());
    for tip in spec.tips {
        w.bulk(tip.as_bytes());
    }
    w.set(spec.key_specs.len());
    for key_spec in spec.key_specs {
        key_spec_info(key_spec, w);
    }
    let container = spec.name.to_ascii_uppercase();
    let served: Vec<&Spec> = specs::subcommands(spec.name)
        .filter(|sub| {
            let name = sub.name.split('|').nth(1).unwrap_or_default();
            cmd::SUBCOMMANDS
                .iter()
                .any(|(c, s, _)| *c == container && s.eq_ignore_ascii_case(name))
        })
        .collect();
    if served.is_empty() {
        w.set(0);
    } else {
        w.array(served.len());
        for sub in served {
            spec_info(sub, w);
        }
    }
}

fn simples(items: &[&str], w: &mut ReplyWriter<'_>) {
    w.set(items.len());
    for item in items {
        w.simple(item);
    }
}

fn key_spec_info(key_spec: &KeySpec, w: &mut ReplyWriter<'_>) {
    w.map(3 + usize::from(key_spec.notes.is_some()));
    if let Some(notes) = key_spec.notes {
        w.bulk(b"notes");
        w.bulk(notes.as_bytes());
    }
    w.bulk(b"flags");
    simples(key_spec.flags, w);
    w.bulk(b"begin_search");
    w.map(2);
    w.bulk(b"type");
    match key_spec.begin {
        Begin::Index(index) => typed_spec("index", &[("index", index)], w),
        Begin::Keyword(keyword, startfrom) => {
            w.bulk(b"keyword");
            w.bulk(b"spec");
            w.map(2);
            w.bulk(b"keyword");
            w.bulk(keyword.as_bytes());
            integer_field("startfrom", startfrom, w);
        }
        Begin::Unknown => typed_spec("unknown", &[], w),
    }
    w.bulk(b"find_keys");
    w.map(2);
    w.bulk(b"type");
    match key_spec.find {
        Find::Range(lastkey, keystep, limit) => {
            let fields = [("lastkey", lastkey), ("keystep", keystep), ("limit", limit)];
            typed_spec("range", &fields, w);
        }
        Find::Keynum(keynumidx, firstkey, keystep) => {
            let fields = [
                ("keynumidx", keynumidx),
                ("firstkey", firstkey),
                ("keystep", keystep),
            ];
            typed_spec("keynum", &fields, w);
        }
        Find::Unknown => typed_spec("unknown", &[], w),
    }
}

fn integer_field(name: &str, value: i32, w: &mut ReplyWriter<'_>) {
    w.bulk(name.as_bytes());
    w.integer(i64::from(value));
}

/// A `begin_search` or `find_keys` map's `type` and its `spec` of integer fields.
fn typed_spec(kind: &str, fields: &[(&str, i32)], w: &mut ReplyWriter<'_>) {
    w.bulk(kind.as_bytes());
    w.bulk(b"spec");
    w.map(fields.len());
    for (name, value) in fields {
        integer_field(name, *value, w);
    }
}

/// `COMMAND INFO` of a command Redis 7.0 does not have: its name, arity, class and keys.
fn tandem_info(command: &Command, w: &mut ReplyWriter<'_>) {
    w.array(10);
    w.bulk(command.name.to_ascii_lowercase().as_bytes());
    w.integer(i64::from(command.arity));
    let mut flags: Vec<&str> = Vec::new();
    match command.class {
        Class::Write => flags.push("write"),
        Class::Read => flags.push("readonly"),
        Class::Connection => {}
    }
    if command.grows {
        flags.push("denyoom");
    }
    simples(&flags, w);
    w.integer(i64::from(command.keys.0));
    w.integer(i64::from(command.keys.1));
    w.integer(i64::from(command.keys.2));
    w.set(0);
    w.set(0);
    w.set(0);
    w.set(0);
}

/// The table's commands a client names (a subcommand's entry, `CONFIG|SET`, is its
/// container's).
fn named_commands() -> impl Iterator<Item = &'static Command> {
    commands()
        .iter()
        .filter(|command| !command.name.contains('|'))
}

fn command_command(argv: &Argv, proto: Proto, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, proto);
    let sub = argv.get(1).map(|s| s.to_ascii_uppercase());
    match sub.as_deref() {
        None => {
            w.array(named_commands().count());
            for command in named_commands() {
                command_info(command, &mut w);
            }
        }
        Some(b"COUNT") => w.integer(named_commands().count() as i64),
        Some(b"INFO") => {
            w.array(argv.len() - 2);
            for name in argv.iter().skip(2) {
                match cmd::lookup(name) {
                    Some((_, command)) => command_info(command, &mut w),
                    // Redis's null (`$-1` in RESP2), not a null array.
                    None => w.null(),
                }
            }
        }
        Some(b"LIST") => command_list(argv, &mut w),
        Some(b"GETKEYS") => command_getkeys(argv, false, &mut w),
        Some(b"GETKEYSANDFLAGS") => command_getkeys(argv, true, &mut w),
        // redis-cli asks for the docs to show hints; it does without.
        Some(b"DOCS") => w.map(0),
        Some(_) => w.error(&format!(
            "ERR unknown subcommand '{}'. Try COMMAND HELP.",
            String::from_utf8_lossy(argv.get(1).unwrap_or_default())
        )),
    }
}

/// The full names (`config|get`) of the commands and subcommands tandem serves.
fn served_names() -> impl Iterator<Item = (String, Option<&'static Spec>)> {
    named_commands().flat_map(|command| {
        let name = command.name.to_ascii_lowercase();
        let subs = cmd::SUBCOMMANDS
            .iter()
            .filter(move |(container, _, _)| *container == command.name)
            .map(|(container, sub, _)| format!("{container}|{sub}").to_ascii_lowercase());
        std::iter::once(name)
            .chain(subs)
            .map(|name| {
                let spec = specs::spec(&name);
                (name, spec)
            })
            .collect::<Vec<_>>()
    })
}

/// `COMMAND LIST [FILTERBY MODULE name|ACLCAT category|PATTERN pattern]`.
fn command_list(argv: &Argv, w: &mut ReplyWriter<'_>) {
    let filter = match argv.len() {
        2 => None,
        5 if argv
            .get(2)
            .unwrap_or_default()
            .eq_ignore_ascii_case(b"FILTERBY") =>
        {
            let kind = argv.get(3).unwrap_or_default().to_ascii_uppercase();
            if !matches!(kind.as_slice(), b"MODULE" | b"ACLCAT" | b"PATTERN") {
                return w.error("ERR syntax error");
            }
            Some((kind, argv.get(4).unwrap_or_default()))
        }
        _ => return w.error("ERR syntax error"),
    };
    let kept: Vec<String> = served_names()
        .filter(|(name, spec)| match &filter {
            None => true,
            // tandem loads no modules.
            Some((kind, _)) if kind == b"MODULE" => false,
            Some((kind, category)) if kind == b"ACLCAT" => spec.is_some_and(|spec| {
                spec.acl.iter().any(|acl| {
                    acl.trim_start_matches('@')
                        .as_bytes()
                        .eq_ignore_ascii_case(category)
                })
            }),
            // Redis matches without case; the names are lower case.
            Some((_, pattern)) => {
                crate::glob::matches(&pattern.to_ascii_lowercase(), name.as_bytes())
            }
        })
        .map(|(name, _)| name)
        .collect();
    w.array(kept.len());
    for name in kept {
        w.bulk(name.as_bytes());
    }
}

/// `COMMAND GETKEYS command arg…` and `COMMAND GETKEYSANDFLAGS …`, as Redis 7.0 answers
/// them for the commands tandem serves.
fn command_getkeys(argv: &Argv, with_flags: bool, w: &mut ReplyWriter<'_>) {
    let mut args = Argv::new();
    for word in argv.iter().skip(2) {
        args.push(word);
    }
    let Some(spec) = served_spec(&args) else {
        return w.error("ERR Invalid command specified");
    };
    if !spec.has_keys() {
        return w.error("ERR The command has no key arguments");
    }
    let argc = args.len() as i64;
    let arity = i64::from(spec.arity);
    if (arity > 0 && arity != argc) || argc < -arity {
        return w.error("ERR Invalid number of arguments specified for command");
    }
    let keys = spec.keys(&args);
    if keys.is_empty() && !spec.keys_optional() {
        return w.error("ERR Invalid arguments specified for command");
    }
    w.array(keys.len());
    for key in keys {
        let name = args.get(key.index).unwrap_or_default();
        if with_flags {
            w.array(2);
            w.bulk(name);
            simples(key.flags, w);
        } else {
            w.bulk(name);
        }
    }
}

/// Redis's spec of the command `args` runs, if tandem serves it: a container's subcommand
/// when one follows (none that tandem does not serve), else the command itself.
fn served_spec(args: &Argv) -> Option<&'static Spec> {
    let (_, command) = cmd::lookup(args.get(0)?)?;
    let name = command.name.to_ascii_lowercase();
    let spec = specs::spec(&name)?;
    if args.len() < 2 || specs::subcommands(&name).next().is_none() {
        return Some(spec);
    }
    let sub = args.get(1)?;
    let served = cmd::SUBCOMMANDS
        .iter()
        .any(|(c, s, _)| *c == command.name && s.as_bytes().eq_ignore_ascii_case(sub));
    if !served {
        return None;
    }
    specs::spec(&format!(
        "{name}|{}",
        String::from_utf8_lossy(sub).to_ascii_lowercase()
    ))
}

/// The `CONFIG` subcommands the connection answers (`GET` and `SET` are the model's:
/// [`cmd::config`]).
fn config(argv: &Argv, proto: Proto, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, proto);
    let sub = argv.get(1).unwrap_or_default().to_ascii_uppercase();
    match sub.as_slice() {
        b"RESETSTAT" if argv.len() == 2 => w.ok(),
        // What `CONFIG SET` changed is in the database, replicated and logged like a write:
        // there is no file to rewrite, and nothing set would be lost by a restart.
        b"REWRITE" if argv.len() == 2 => w.ok(),
        _ => w.error(&format!(
            "ERR unknown subcommand or wrong number of arguments for '{}'. Try CONFIG HELP.",
            String::from_utf8_lossy(argv.get(1).unwrap_or_default())
        )),
    }
}

/// `WAIT numreplicas timeout`: the backups that hold the connection's last write, as far as
/// the node knows (its acknowledgements), without waiting.
fn wait(argv: &Argv, info: &ServerInfo, proto: Proto, out: &mut Vec<u8>) {
    let arg = |i: usize| argv.get(i).unwrap_or_default();
    let mut w = ReplyWriter::new(out, proto);
    match (crate::num::parse_i64(arg(1)), crate::num::parse_i64(arg(2))) {
        (Some(_), Some(timeout)) if timeout >= 0 => {
            // A reply leaves only once its rule holds: the backups the rule counts
            // already hold this connection's last write. Others may too, but
            // nothing says so: WAIT never claims more than was acknowledged.
            w.integer(info.backups_acked as i64)
        }
        (Some(_), Some(_)) => w.error("ERR timeout is negative"),
        (Some(_), None) => w.error("ERR timeout is not an integer or out of range"),
        (None, _) => w.error(cmd::CmdError::NOT_INTEGER.text()),
    }
}

/// What the process hosting a node tells `INFO` of itself (the runtime reads it; a session
/// without one, as in the model's tests, leaves those fields out).
pub trait HostFacts: Send + Sync + std::fmt::Debug {
    fn process_id(&self) -> u32;
    fn uptime_s(&self) -> u64;
    /// Client connections open now, RESP and native.
    fn connected_clients(&self) -> u64;
    /// RESP connections waiting in a blocking command.
    fn blocked_clients(&self) -> u64;
    fn cpu(&self) -> CpuTimes;
    /// What the data model reports of itself (its allocator's figures, each database's
    /// keys), as `INFO memory` and `INFO keyspace` show them: read only when one is asked
    /// for, since it walks the model's statistics.
    fn model_stats(&self) -> Vec<(String, String)>;
}

/// The CPU time a process used, in seconds (`INFO cpu`).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    pub user_s: f64,
    pub sys_s: f64,
    /// Of its children that ended.
    pub children_user_s: f64,
    pub children_sys_s: f64,
}

/// `INFO`'s sections in the order Redis 7.0 writes them, and whether `INFO` with no argument
/// (or `default`) includes each (`errorstats` is among Redis's defaults, `commandstats` is
/// not); `all` and `everything` include every one.
const INFO_SECTIONS: &[(&str, bool)] = &[
    ("server", true),
    ("clients", true),
    ("memory", true),
    ("persistence", true),
    ("stats", true),
    ("replication", true),
    ("cpu", true),
    ("modules", true),
    ("commandstats", false),
    ("errorstats", true),
    ("cluster", true),
    ("keyspace", true),
];

/// The sections `INFO` arguments ask for, as Redis reads them: without case, any number,
/// `default`, `all` and `everything` among them; a name it does not know adds nothing.
fn info_sections(argv: &Argv) -> Vec<&'static str> {
    let mut wanted = vec![false; INFO_SECTIONS.len()];
    let asked: Vec<Vec<u8>> = argv
        .iter()
        .skip(1)
        .map(<[u8]>::to_ascii_lowercase)
        .collect();
    for (i, &(name, default)) in INFO_SECTIONS.iter().enumerate() {
        wanted[i] = asked.iter().any(|arg| match arg.as_slice() {
            b"all" | b"everything" => true,
            b"default" => default,
            other => other == name.as_bytes(),
        }) || (asked.is_empty() && default);
    }
    INFO_SECTIONS
        .iter()
        .zip(wanted)
        .filter_map(|(&(name, _), wanted)| wanted.then_some(name))
        .collect()
}

/// The model's statistics `INFO` shows outside its `memory` section: the policy by its
/// name, the evictions in `stats`.
const STATS_SHOWN_ELSEWHERE: &[&str] = &["maxmemory_policy", "evicted_keys"];

fn info_text(info: &ServerInfo, client_id: u64, argv: &Argv) -> String {
    let mut text = String::new();
    for section in info_sections(argv) {
        if !text.is_empty() {
            text.push_str("\r\n");
        }
        let text = &mut text;
        // `line("#", &"Name")` writes the section's header, `# Name`.
        let mut line = |key: &str, value: &dyn std::fmt::Display| {
            let separator = if key == "#" { " " } else { ":" };
            text.push_str(&format!("{key}{separator}{value}\r\n"));
        };
        let host = info.host.as_deref();
        match section {
            "server" => {
                line("#", &"Server");
                line("redis_version", &REDIS_VERSION);
                line("redis_mode", &"standalone");
                line(
                    "os",
                    &format_args!("{} {}", std::env::consts::OS, std::env::consts::ARCH),
                );
                line("arch_bits", &usize::BITS);
                if let Some(host) = host {
                    line("process_id", &host.process_id());
                    line("uptime_in_seconds", &host.uptime_s());
                    line("uptime_in_days", &(host.uptime_s() / 86_400));
                }
                line("tcp_port", &info.resp_port);
                line("tandem_node", &info.node_id);
            }
            "clients" => {
                line("#", &"Clients");
                if let Some(host) = host {
                    line("connected_clients", &host.connected_clients());
                    line("blocked_clients", &host.blocked_clients());
                }
                line("client_id", &client_id);
            }
            "memory" => memory_section(&mut line, info),
            "persistence" => persistence_section(&mut line, info),
            "replication" => {
                line("#", &"Replication");
                line("role", &if info.primary { "master" } else { "slave" });
                line("connected_slaves", &info.backups);
                line("master_repl_offset", &info.repl_offset);
                line("tandem_safety", &info.safety);
            }
            "cpu" => {
                line("#", &"CPU");
                if let Some(host) = host {
                    let cpu = host.cpu();
                    line("used_cpu_sys", &format_args!("{:.6}", cpu.sys_s));
                    line("used_cpu_user", &format_args!("{:.6}", cpu.user_s));
                    line(
                        "used_cpu_sys_children",
                        &format_args!("{:.6}", cpu.children_sys_s),
                    );
                    line(
                        "used_cpu_user_children",
                        &format_args!("{:.6}", cpu.children_user_s),
                    );
                }
            }
            "modules" => line("#", &"Modules"),
            "cluster" => {
                line("#", &"Cluster");
                line("cluster_enabled", &u8::from(info.cluster.is_some()));
            }
            "keyspace" => {
                line("#", &"Keyspace");
                let stats = model_stats(info);
                for (db, keys, expires) in crate::model::keyspace_lines(&stats) {
                    line(
                        &format!("db{db}"),
                        &format_args!("keys={keys},expires={expires},avg_ttl=0"),
                    );
                }
            }
            counters => counters_section(text, counters, info),
        }
    }
    text
}

/// `ROLE`, as Redis answers it: a primary's offset and its backups (each with the
/// primary's offset, which under a 2-safe rule every backup holds); a backup's primary, as
/// `connected`, and its offset. A node that holds no role answers as a replica still
/// `connecting` to the primary it knows, if any, at offset -1.
fn role(info: &ServerInfo, proto: crate::resp::Proto, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, proto);
    let offset = info.repl_offset.to_string();
    if info.primary {
        w.array(3);
        w.bulk(b"master");
        w.integer(info.repl_offset as i64);
        w.array(info.backups_resp.len());
        for address in info.backups_resp.iter() {
            let (host, port) = address.rsplit_once(':').unwrap_or((address, "0"));
            w.array(3);
            w.bulk(host.as_bytes());
            w.bulk(port.as_bytes());
            w.bulk(offset.as_bytes());
        }
        return;
    }
    let primary = info.primary_resp.as_deref().unwrap_or_default();
    let (host, port) = primary.rsplit_once(':').unwrap_or(("", "0"));
    w.array(5);
    w.bulk(b"slave");
    w.bulk(host.as_bytes());
    w.integer(port.parse().unwrap_or(0));
    if info.backup {
        w.bulk(b"connected");
        w.integer(info.repl_offset as i64);
    } else {
        w.bulk(b"connecting");
        w.integer(-1);
    }
}

/// The model's figures `INFO` shows: as a [`Purpose::Info`] call read them, else the host's
/// latest, else none.
fn model_stats(info: &ServerInfo) -> Vec<(String, String)> {
    match (&info.model_stats_read, info.host.as_deref()) {
        (Some(read), _) => read.as_ref().clone(),
        (None, Some(host)) => host.model_stats(),
        (None, None) => Vec::new(),
    }
}

/// `INFO memory`: the model's figures, its policy by name.
fn memory_section(line: &mut dyn FnMut(&str, &dyn std::fmt::Display), info: &ServerInfo) {
    line("#", &"Memory");
    let stats = model_stats(info);
    if !stats.iter().any(|(key, _)| key == "maxmemory") {
        line("maxmemory", &info.maxmemory);
    }
    let policy = stats
        .iter()
        .find(|(key, _)| key == "maxmemory_policy")
        .and_then(|(_, word)| word.parse::<usize>().ok())
        .and_then(|word| crate::params::MAXMEMORY_POLICIES.get(word));
    line("maxmemory_policy", policy.unwrap_or(&"noeviction"));
    for (key, value) in &stats {
        let elsewhere = key.starts_with(crate::model::KEYSPACE_STAT_PREFIX)
            || STATS_SHOWN_ELSEWHERE.contains(&key.as_str());
        if !elsewhere {
            line(key, value);
        }
    }
}

/// `INFO persistence`: the snapshots' fields Redis 7.0 shows (`SAVE`, `BGSAVE`); tandem's
/// own durability (its logs) is in `INFO replication`'s `tandem_safety`.
fn persistence_section(line: &mut dyn FnMut(&str, &dyn std::fmt::Display), info: &ServerInfo) {
    line("#", &"Persistence");
    line("loading", &0);
    let Some(saves) = &info.saves else {
        return;
    };
    line("rdb_bgsave_in_progress", &u8::from(saves.in_progress));
    line("rdb_last_save_time", &saves.last_save_unix);
    let status = if saves.last_failed { "err" } else { "ok" };
    line("rdb_last_bgsave_status", &status);
    line("rdb_last_bgsave_time_sec", &saves.last_bgsave_seconds);
    line("rdb_saves", &saves.saves);
    line("aof_enabled", &0);
}

/// `INFO`'s sections of counters: `stats`, `commandstats` and `errorstats`.
fn counters_section(text: &mut String, section: &str, info: &ServerInfo) {
    let mut line = |key: &str, value: &dyn std::fmt::Display| {
        let separator = if key == "#" { " " } else { ":" };
        text.push_str(&format!("{key}{separator}{value}\r\n"));
    };
    let stats = info.command_stats.as_deref();
    match section {
        "stats" => {
            line("#", &"Stats");
            if let Some(stats) = stats {
                line(
                    "total_connections_received",
                    &stats.total_connections_received(),
                );
                line(
                    "total_commands_processed",
                    &stats.total_commands_processed(),
                );
            }
            let evicted = model_stats(info)
                .into_iter()
                .find_map(|(key, value)| (key == "evicted_keys").then_some(value));
            line("evicted_keys", &evicted.as_deref().unwrap_or("0"));
            line("pubsub_channels", &info.pubsub_counts.channels);
            line("pubsub_patterns", &info.pubsub_counts.patterns);
            line("pubsubshard_channels", &info.pubsub_counts.shard_channels);
            if let Some(stats) = stats {
                line("total_error_replies", &stats.total_error_replies());
            }
        }
        "commandstats" => {
            line("#", &"Commandstats");
            if let Some(stats) = stats {
                stats.write_commandstats(text);
            }
        }
        "errorstats" => {
            line("#", &"Errorstats");
            if let Some(stats) = stats {
                stats.write_errorstats(text);
            }
        }
        other => unreachable!("INFO has no section {other}"),
    }
}

/// Whether `model` is the Redis model (the runtime serves RESP only for it).
pub fn is_redis(model: &dyn DataModel) -> bool {
    model.name() == "redis"
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(line: &str) -> Argv {
        let mut argv = Argv::new();
        for arg in line.split(' ') {
            argv.push(arg.as_bytes());
        }
        argv
    }

    fn backup() -> ServerInfo {
        ServerInfo {
            node_id: 2,
            backup: true,
            primary_resp: Some("127.0.0.1:7001".into()),
            ..ServerInfo::default()
        }
    }

    #[derive(Debug)]
    struct FakeHost;

    impl HostFacts for FakeHost {
        fn process_id(&self) -> u32 {
            42
        }
        fn uptime_s(&self) -> u64 {
            90_000
        }
        fn connected_clients(&self) -> u64 {
            3
        }
        fn blocked_clients(&self) -> u64 {
            1
        }
        fn cpu(&self) -> CpuTimes {
            CpuTimes {
                user_s: 1.5,
                ..CpuTimes::default()
            }
        }
        fn model_stats(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    /// `INFO`'s arguments choose sections as Redis's do: none or `default`, `all`,
    /// `everything`, names without case, several at once, each section once.
    #[test]
    fn info_writes_the_sections_asked_for() {
        let info = ServerInfo {
            host: Some(Arc::new(FakeHost)),
            ..ServerInfo::default()
        };
        let text = |line: &str| info_text(&info, 7, &argv(line));
        let headers = |line: &str| -> Vec<String> {
            text(line)
                .lines()
                .filter(|l| l.starts_with("# "))
                .map(str::to_owned)
                .collect()
        };
        let all = [
            "# Server",
            "# Clients",
            "# Memory",
            "# Persistence",
            "# Stats",
            "# Replication",
            "# CPU",
            "# Modules",
            "# Commandstats",
            "# Errorstats",
            "# Cluster",
            "# Keyspace",
        ];
        for line in ["INFO all", "info EVERYTHING", "INFO cpu all"] {
            assert_eq!(headers(line), all, "{line}");
        }
        // As Redis 7.0: `commandstats` only when asked for, `errorstats` by default.
        let default: Vec<&str> = all.into_iter().filter(|h| *h != "# Commandstats").collect();
        for line in ["INFO", "INFO default"] {
            assert_eq!(headers(line), default, "{line}");
        }
        assert_eq!(headers("INFO commandSTATS"), ["# Commandstats"]);
        assert_eq!(headers("INFO cpu"), ["# CPU"]);
        assert_eq!(headers("INFO CPU sentinel server"), ["# Server", "# CPU"]);
        assert_eq!(text("INFO sentinel"), "");
        let server = text("INFO server");
        for field in [
            "arch_bits:64",
            "process_id:42",
            "uptime_in_days:1",
            "redis_version:",
        ] {
            assert!(server.contains(field), "{field} in {server}");
        }
        assert!(text("INFO cpu").contains("used_cpu_user:1.500000\r\n"));
        assert!(text("INFO clients").contains("connected_clients:3\r\n"));
        assert!(text("INFO clients").contains("blocked_clients:1\r\n"));
    }

    /// A monitor's line is Redis's: the time, the database and client, each word quoted as
    /// `sdscatrepr` quotes it, passwords redacted; administrative commands are not shown,
    /// scripts are.
    #[test]
    fn monitors_are_shown_lines_as_redis_writes_them() {
        let line = |words: &[&str]| {
            let words: Vec<&[u8]> = words.iter().map(|w| w.as_bytes()).collect();
            String::from_utf8(monitor_line(1_700_000_000_000_042, 3, "1.2.3.4:5", &words)).unwrap()
        };
        assert_eq!(
            line(&["set", "k", "a \"b\"\\\n\x01\u{e9}"]),
            "+1700000000.000042 [3 1.2.3.4:5] \"set\" \"k\" \"a \\\"b\\\"\\\\\\n\\x01\\xc3\\xa9\"\r\n"
        );
        assert!(
            line(&["AUTH", "user", "pw"]).ends_with("\"AUTH\" \"(redacted)\" \"(redacted)\"\r\n")
        );
        assert!(
            line(&["HELLO", "3", "AUTH", "u", "p", "SETNAME", "n"]).ends_with(
                "\"HELLO\" \"3\" \"AUTH\" \"(redacted)\" \"(redacted)\" \"SETNAME\" \"n\"\r\n"
            )
        );
        assert!(
            line(&["MIGRATE", "h", "1", "k", "0", "5", "AUTH2", "u", "p"])
                .ends_with("\"AUTH2\" \"(redacted)\" \"(redacted)\"\r\n")
        );
        assert!(
            line(&["MIGRATE", "h", "1", "k", "0", "5", "AUTH", "p", "COPY"])
                .ends_with("\"AUTH\" \"(redacted)\" \"COPY\"\r\n")
        );
        for shown in [
            "GET k",
            "eval x 0",
            "FCALL f 0",
            "MULTI",
            "CONFIG REWRITE2",
            "NOSUCH",
        ] {
            assert!(shown_to_monitors(&argv(shown)), "{shown}");
        }
        for hidden in [
            "CONFIG SET a b",
            "config get x",
            "SAVE",
            "MONITOR",
            "CLIENT KILL x",
        ] {
            assert!(!shown_to_monitors(&argv(hidden)), "{hidden}");
        }
    }

    /// A read-only user, or one limited to some keys, may not watch every connection's
    /// commands; `MONITOR` in a block is refused as Redis refuses it.
    #[test]
    fn monitor_is_an_administrator_s_and_not_for_a_block() {
        let monitor = cmd::lookup(b"MONITOR").unwrap().1;
        assert!(!User::new("r", b"pw", true, &[b"*"]).may_run(monitor));
        assert!(!User::new("k", b"pw", false, &[b"app:*"]).may_run(monitor));
        assert!(User::new("a", b"pw", false, &[b"*"]).may_run(monitor));
        let mut session = Session::new(1);
        let info = ServerInfo {
            primary: true,
            clients: true,
            ..ServerInfo::default()
        };
        let mut out = Vec::new();
        assert!(matches!(
            session.handle(&argv("MONITOR"), &info, &mut out),
            Step::Monitor
        ));
        assert_eq!(out, b"+OK\r\n");
        session.handle(&argv("MULTI"), &info, &mut Vec::new());
        session.handle(&argv("MONITOR"), &info, &mut Vec::new());
        let mut out = Vec::new();
        session.handle(&argv("EXEC"), &info, &mut out);
        assert!(
            String::from_utf8_lossy(&out).contains(MONITOR_IN_BLOCK),
            "{out:?}"
        );
        let proxy = ServerInfo {
            clients: false,
            ..info
        };
        let mut out = Vec::new();
        session.handle(&argv("MONITOR"), &proxy, &mut out);
        assert!(String::from_utf8_lossy(&out).contains(MONITOR_NOT_SERVED));
    }

    /// An `INFO` that shows the model's figures on a node with a role reads them by a call
    /// in the connection's order, and writes what that call read (not the host's latest,
    /// which may be older than the connection's last write); where nothing can be read it
    /// falls back to the host's; other sections are written at once.
    #[test]
    fn info_reads_the_model_s_figures_in_the_connection_s_order() {
        let mut session = Session::new(1);
        let info = ServerInfo {
            primary: true,
            host: Some(Arc::new(FakeHost)),
            ..ServerInfo::default()
        };
        let mut out = Vec::new();
        assert!(matches!(
            session.handle(&argv("INFO cpu"), &info, &mut out),
            Step::Replied
        ));
        for line in ["INFO", "INFO memory", "info KEYSPACE cpu", "INFO stats"] {
            let Step::Call(call) = session.handle(&argv(line), &info, &mut Vec::new()) else {
                panic!("{line} makes no call");
            };
            assert_eq!(call.proc_id, crate::model::PROC_STATS, "{line}");
            assert_eq!(call.kind, ProcKind::Read);
        }
        let Step::Call(call) = session.handle(&argv("INFO memory keyspace"), &info, &mut out)
        else {
            panic!("no call");
        };
        let mut figures = Vec::new();
        let mut w = ReplyWriter::new(&mut figures, Proto::Resp2);
        w.array(4);
        for word in ["number_of_cached_scripts", "100", "keyspace_db0_keys", "7"] {
            w.bulk(word.as_bytes());
        }
        let mut text = Vec::new();
        session.called(call.clone(), Outcome::Reply(&figures), &mut text, None);
        let text = String::from_utf8(text).unwrap();
        assert!(text.contains("number_of_cached_scripts:100\r\n"), "{text}");
        assert!(text.contains("db0:keys=7,expires=0"), "{text}");
        let mut text = Vec::new();
        session.called(call, Outcome::Failed("READONLY lost"), &mut text, None);
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains("# Memory") && !text.contains("cached_scripts"),
            "{text}"
        );
        // Inside `MULTI`, `EXEC` answers it with the rest of the block.
        session.handle(&argv("MULTI"), &info, &mut Vec::new());
        session.handle(&argv("INFO memory"), &info, &mut Vec::new());
        let mut out = Vec::new();
        let step = session.handle(&argv("EXEC"), &info, &mut out);
        assert!(matches!(step, Step::Replied | Step::Call(_)), "{step:?}");
        // A node without a role answers from the host at once.
        let outside = ServerInfo {
            primary: false,
            ..info
        };
        assert!(matches!(
            session.handle(&argv("INFO memory"), &outside, &mut Vec::new()),
            Step::Replied
        ));
    }

    /// `EXEC` refused while a script is busy discards its block, as Redis's `rejectCommand`
    /// does: the connection is out of `MULTI` and its next command runs.
    #[test]
    fn exec_refused_while_busy_discards_the_block() {
        let mut session = Session::new(1);
        let idle = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let busy = ServerInfo {
            script: ScriptActivity::Busy,
            ..idle.clone()
        };
        let mut out = Vec::new();
        session.handle(&argv("MULTI"), &idle, &mut out);
        session.handle(&argv("INCR xx"), &idle, &mut out);
        out.clear();
        session.handle(&argv("EXEC"), &busy, &mut out);
        assert_eq!(
            String::from_utf8_lossy(&out),
            format!("-EXECABORT Transaction discarded because of: {BUSY}\r\n")
        );
        out.clear();
        let step = session.handle(&argv("PING"), &idle, &mut out);
        assert!(matches!(step, Step::Replied));
        assert_eq!(out, b"+PONG\r\n");
    }

    /// While a script or function runs, `SCRIPT KILL` and `FUNCTION KILL` ask the front end
    /// to stop it (and go to the node as a call only if none runs by then); once it is busy,
    /// `FUNCTION STATS` is refused `-BUSY` like any call the node would answer only after it.
    #[test]
    fn either_kill_stops_a_running_script_or_function() {
        let mut session = Session::new(1);
        for script in [ScriptActivity::Running, ScriptActivity::Busy] {
            let info = ServerInfo {
                primary: true,
                script,
                ..ServerInfo::default()
            };
            for line in ["SCRIPT KILL", "FUNCTION KILL", "function Kill"] {
                let step = session.handle(&argv(line), &info, &mut Vec::new());
                assert!(matches!(step, Step::KillScript(_)), "{line}: {step:?}");
            }
            let mut out = Vec::new();
            let step = session.handle(&argv("FUNCTION STATS"), &info, &mut out);
            match script {
                ScriptActivity::Busy => assert_eq!(out, format!("-{BUSY}\r\n").into_bytes()),
                _ => assert!(matches!(step, Step::Call(_)), "{step:?}"),
            }
        }
    }

    /// What `line` answers at once on `info`'s node, as text.
    #[test]
    fn the_native_port_recognizes_a_sessions_script_kill() {
        let mut session = Session::new(1);
        let info = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        for (line, kill) in [
            ("SCRIPT KILL", true),
            ("script kill", true),
            ("SCRIPT FLUSH", false),
            ("FUNCTION KILL", true),
            ("function kill", true),
            ("FUNCTION STATS", false),
        ] {
            let Step::Call(call) = session.handle(&argv(line), &info, &mut Vec::new()) else {
                panic!("{line} is a call");
            };
            assert_eq!(
                is_script_kill_call(call.proc_id, &call.args),
                kill,
                "{line}"
            );
        }
        let Step::Call(get) = session.handle(&argv("GET k"), &info, &mut Vec::new()) else {
            panic!("GET is a call");
        };
        assert!(!is_script_kill_call(get.proc_id, &get.args));
    }

    fn replied(session: &mut Session, line: &str, info: &ServerInfo) -> String {
        let mut out = Vec::new();
        let step = session.handle(&argv(line), info, &mut out);
        assert!(matches!(step, Step::Replied), "{line} was answered at once");
        String::from_utf8(out).expect("text")
    }

    fn locked() -> ServerInfo {
        ServerInfo {
            primary: true,
            requirepass: Some(Password::new(b"s3cret")),
            ..ServerInfo::default()
        }
    }

    /// The replies redis-server 7.0.15 gives with `--requirepass s3cret` (the differential
    /// test checks them against a live one).
    #[test]
    fn a_password_is_asked_before_anything_but_auth_hello_quit_and_reset() {
        let info = locked();
        let mut session = Session::new(1);
        let noauth = format!("-{NOAUTH}\r\n");
        let wrongpass = format!("-{WRONGPASS}\r\n");
        assert_eq!(replied(&mut session, "PING", &info), noauth);
        assert_eq!(replied(&mut session, "MULTI", &info), noauth);
        assert_eq!(replied(&mut session, "CLIENT SETNAME x", &info), noauth);
        assert!(replied(&mut session, "GET", &info).starts_with("-ERR wrong number"));
        assert!(replied(&mut session, "NOSUCH", &info).starts_with("-ERR unknown command"));
        let mut out = Vec::new();
        assert!(matches!(
            session.handle(&argv("SET k v"), &info, &mut out),
            Step::Replied
        ));
        assert_eq!(
            String::from_utf8(out).unwrap(),
            noauth,
            "no call before the password"
        );
        assert_eq!(replied(&mut session, "AUTH wrong", &info), wrongpass);
        assert_eq!(replied(&mut session, "AUTH bob s3cret", &info), wrongpass);
        assert_eq!(
            replied(&mut session, "AUTH a b c", &info),
            "-ERR syntax error\r\n"
        );
        assert!(replied(&mut session, "HELLO 3", &info).starts_with("-NOAUTH HELLO must be"));
        assert!(replied(&mut session, "HELLO 4", &info).starts_with("-NOPROTO"));
        assert_eq!(replied(&mut session, "PING", &info), noauth);
        assert_eq!(replied(&mut session, "AUTH s3cret", &info), "+OK\r\n");
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
        // A wrong password later leaves the connection authenticated, as in Redis.
        assert_eq!(replied(&mut session, "AUTH default nope", &info), wrongpass);
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
        // RESET goes back to the default user, which must give the password again.
        assert_eq!(replied(&mut session, "RESET", &info), "+RESET\r\n");
        assert_eq!(replied(&mut session, "PING", &info), noauth);
        // HELLO's AUTH option authenticates as it is read, even when a later option is
        // refused (as Redis 7.0 does).
        assert!(
            replied(&mut session, "HELLO 3 AUTH default s3cret FOO", &info)
                .starts_with("-ERR Syntax")
        );
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
        assert_eq!(replied(&mut session, "RESET", &info), "+RESET\r\n");
        let hello = replied(&mut session, "HELLO 3 AUTH default s3cret", &info);
        assert!(hello.starts_with('%'), "{hello}");
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
    }

    #[test]
    fn without_a_password_auth_answers_as_redis_with_none_configured() {
        let info = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
        assert!(replied(&mut session, "AUTH x", &info).starts_with("-ERR AUTH <password> called"));
        assert_eq!(
            replied(&mut session, "AUTH default anything", &info),
            "+OK\r\n"
        );
        assert_eq!(
            replied(&mut session, "AUTH bob anything", &info),
            format!("-{WRONGPASS}\r\n")
        );
    }

    #[test]
    fn an_http_request_line_closes_the_connection_before_anything_else() {
        let open = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        for info in [open, locked()] {
            let mut session = Session::new(1);
            for line in [
                "POST / HTTP/1.1",
                "post /x",
                "Host: localhost:6379",
                "HOST: x",
            ] {
                let mut out = Vec::new();
                let step = session.handle(&argv(line), &info, &mut out);
                assert!(matches!(step, Step::CrossProtocol), "{line}");
                assert!(out.is_empty(), "no reply to {line}");
            }
            // Inside MULTI too: the line is never queued.
            if info.requirepass.is_none() {
                assert_eq!(replied(&mut session, "MULTI", &info), "+OK\r\n");
                let mut out = Vec::new();
                let step = session.handle(&argv("Host: x"), &info, &mut out);
                assert!(matches!(step, Step::CrossProtocol));
            }
        }
    }

    #[test]
    fn a_connection_awaits_auth_only_while_a_password_is_asked_and_not_given() {
        let info = locked();
        let mut session = Session::new(1);
        assert!(session.awaits_auth(&info));
        assert_eq!(replied(&mut session, "AUTH s3cret", &info), "+OK\r\n");
        assert!(!session.awaits_auth(&info));
        let open = ServerInfo::default();
        assert!(!Session::new(2).awaits_auth(&open));
    }

    #[test]
    fn wait_answers_the_backups_the_safety_rule_counts_not_every_backup() {
        for (backups_acked, answer) in [(2, ":2\r\n"), (1, ":1\r\n"), (0, ":0\r\n")] {
            let info = ServerInfo {
                primary: true,
                backups: 2,
                backups_acked,
                ..ServerInfo::default()
            };
            let mut session = Session::new(1);
            assert_eq!(replied(&mut session, "WAIT 2 0", &info), answer);
        }
    }

    #[test]
    fn a_password_is_never_printed_and_is_compared_whole() {
        let password = Password::new(b"s3cret");
        assert_eq!(format!("{password:?}"), "Password(set)");
        assert_eq!(format!("{:?}", locked()).matches("s3cret").count(), 0);
        assert!(password.matches(b"s3cret"));
        for wrong in [&b""[..], b"s3cre", b"s3crets", b"S3cret", b"s3cres"] {
            assert!(!password.matches(wrong), "{wrong:?}");
        }
    }

    #[test]
    fn protected_mode_lets_in_loopback_clients_or_any_once_a_password_is_set() {
        let loopback: std::net::IpAddr = "127.0.0.1".parse().unwrap();
        let loopback6: std::net::IpAddr = "::1".parse().unwrap();
        let mapped: std::net::IpAddr = "::ffff:127.0.0.1".parse().unwrap();
        let other: std::net::IpAddr = "10.1.2.3".parse().unwrap();
        for ip in [loopback, loopback6, mapped] {
            assert_eq!(protected_refusal(ip, false, true), None, "{ip}");
        }
        let refusal = protected_refusal(other, false, true).expect("refused");
        assert!(refusal.starts_with("-DENIED "), "{refusal}");
        assert!(
            refusal.contains("requirepass"),
            "it says how to set a password"
        );
        assert_eq!(
            protected_refusal(other, true, true),
            None,
            "a password is set"
        );
        assert_eq!(
            protected_refusal(other, false, false),
            None,
            "protected mode is off"
        );
    }

    const READONLY: &str = "-READONLY You can't write against a read only replica. The primary \
                            serves at 127.0.0.1:7001\r\n";

    #[test]
    fn a_read_on_a_backup_is_a_call_its_applier_serves() {
        let mut session = Session::new(1);
        for line in ["GET k", "HGET h f", "LRANGE l 0 -1", "EVAL_RO return 1 0"] {
            let Step::Call(call) = session.handle(&argv(line), &backup(), &mut Vec::new()) else {
                panic!("{line} on a backup is a call")
            };
            assert_eq!(call.runs_on, RunsOn::Backup, "{line}");
            assert_eq!(call.kind, ProcKind::Read);
            assert_eq!(call.purpose, Purpose::Command);
            assert_eq!(
                call.runs_again_after(Duration::ZERO),
                None,
                "a backup read is never sent again: its client is told to retry"
            );
        }
        let primary = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let Step::Call(call) = session.handle(&argv("GET k"), &primary, &mut Vec::new()) else {
            panic!("a call")
        };
        assert_eq!(call.runs_on, RunsOn::Primary);
    }

    #[test]
    fn a_write_a_script_that_may_write_and_a_watch_on_a_backup_get_readonly() {
        let mut session = Session::new(1);
        for line in ["SET k v", "EVAL return 1 0", "DEL k", "WATCH k"] {
            assert_eq!(replied(&mut session, line, &backup()), READONLY, "{line}");
        }
        // A node with no role serves nothing, reads included.
        let outside = ServerInfo {
            backup: false,
            ..backup()
        };
        assert_eq!(replied(&mut session, "GET k", &outside), READONLY);
    }

    /// As before backups served reads: a block is queued, and `EXEC` (one call on the
    /// primary, which takes an LSN) is refused, whatever the block holds.
    #[test]
    fn a_block_on_a_backup_is_refused_at_exec() {
        let mut session = Session::new(1);
        for block in [["MULTI", "SET k v", "EXEC"], ["MULTI", "GET k", "EXEC"]] {
            assert_eq!(replied(&mut session, block[0], &backup()), "+OK\r\n");
            assert_eq!(replied(&mut session, block[1], &backup()), "+QUEUED\r\n");
            assert_eq!(replied(&mut session, block[2], &backup()), READONLY);
        }
        assert_eq!(
            replied(&mut session, "EXEC", &backup()),
            "-ERR EXEC without MULTI\r\n",
            "the refused EXEC ended the block"
        );
    }

    /// An endpoint of one group among many answers as a Redis Cluster node of its shard:
    /// another shard's keys are moved to its primary (in a script's declared keys too), and
    /// refused in a block, which `EXEC` then discards; its own shard's keys run, a backup's
    /// writes go to its own primary as before.
    #[test]
    fn an_endpoint_serves_only_its_own_shard_s_keys() {
        let primary = ServerInfo {
            primary: true,
            cluster: Some(Arc::new(cluster::three_shards(true))),
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        // `foo` is slot 12182, shard 2's, whose primary is on port 7033.
        let moved = "-MOVED 12182 10.0.0.1:7033\r\n";
        for line in ["SET foo 1", "GET foo", "EVAL return 1 foo", "WATCH foo"] {
            assert_eq!(replied(&mut session, line, &primary), moved, "{line}");
        }
        assert_eq!(
            replied(&mut session, "MSET {a}x 1 {b}y 2", &primary),
            "-CROSSSLOT Keys in request don't hash to the same slot\r\n"
        );
        assert_eq!(replied(&mut session, "PING", &primary), "+PONG\r\n");
        // `c` and `z` are in two slots of the endpoint's own shard.
        for line in ["MSET c 1 z 2", "EVAL return 2 c z", "DBSIZE"] {
            let step = session.handle(&argv(line), &primary, &mut Vec::new());
            assert!(matches!(step, Step::Call(_)), "{line} runs");
        }
        assert_eq!(replied(&mut session, "MULTI", &primary), "+OK\r\n");
        assert_eq!(replied(&mut session, "SET c 1", &primary), "+QUEUED\r\n");
        assert_eq!(replied(&mut session, "SET foo 1", &primary), moved);
        assert_eq!(
            replied(&mut session, "EXEC", &primary),
            "-EXECABORT Transaction discarded because of previous errors.\r\n"
        );
        let backup = ServerInfo {
            primary: false,
            backup: true,
            ..primary.clone()
        };
        // The own shard's primary is node 2's endpoint for group 2, on port 7022.
        assert_eq!(
            replied(&mut session, "SET c 1", &backup),
            "-MOVED 7365 10.0.0.1:7022\r\n"
        );
        assert_eq!(replied(&mut session, "GET foo", &backup), moved);
        match session.handle(&argv("GET c"), &backup, &mut Vec::new()) {
            Step::Call(call) => assert_eq!(call.runs_on, RunsOn::Backup),
            _ => panic!("a backup serves its own shard's reads"),
        }
    }

    #[test]
    fn readonly_and_readwrite_are_accepted_as_a_cluster_client_sends_them() {
        let mut session = Session::new(1);
        assert_eq!(replied(&mut session, "READONLY", &backup()), "+OK\r\n");
        assert_eq!(replied(&mut session, "READWRITE", &backup()), "+OK\r\n");
        assert_eq!(
            replied(&mut session, "readonly x", &backup()),
            "-ERR wrong number of arguments for 'readonly' command\r\n"
        );
    }

    #[test]
    fn a_busy_backup_says_to_retry_and_names_the_primary() {
        assert_eq!(
            backup_busy(&backup()),
            "TRYAGAIN backup 2 could not serve the read in time; retry, or read from the \
             primary at 127.0.0.1:7001"
        );
    }

    /// `ROLE` in Redis's shapes: a primary's offset and its backups, a backup's primary as
    /// `connected`, a node without a role still `connecting` at offset -1.
    #[test]
    fn role_answers_as_redis_for_a_primary_a_backup_and_a_node_outside() {
        let mut session = Session::new(1);
        let primary = ServerInfo {
            primary: true,
            repl_offset: 42,
            backups: 2,
            backups_resp: Arc::from(["127.0.0.1:7002".to_owned(), "127.0.0.1:7003".to_owned()]),
            ..ServerInfo::default()
        };
        assert_eq!(
            replied(&mut session, "ROLE", &primary),
            "*3\r\n$6\r\nmaster\r\n:42\r\n*2\r\n\
             *3\r\n$9\r\n127.0.0.1\r\n$4\r\n7002\r\n$2\r\n42\r\n\
             *3\r\n$9\r\n127.0.0.1\r\n$4\r\n7003\r\n$2\r\n42\r\n"
        );
        let backup = ServerInfo {
            repl_offset: 40,
            ..backup()
        };
        assert_eq!(
            replied(&mut session, "ROLE", &backup),
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7001\r\n$9\r\nconnected\r\n:40\r\n"
        );
        let outside = ServerInfo {
            backup: false,
            ..backup
        };
        assert_eq!(
            replied(&mut session, "ROLE", &outside),
            "*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7001\r\n$10\r\nconnecting\r\n:-1\r\n"
        );
        assert!(replied(&mut session, "ROLE x", &primary).starts_with("-ERR wrong number"));
    }

    /// A user limited to `app:*` may run the stream commands that name their keys after an
    /// option or a subcommand (`XREAD`, `XREADGROUP` after `STREAMS`, `XGROUP`, `XINFO`
    /// after the subcommand), on its own keys only, as Redis's ACL checks their key specs.
    #[test]
    fn stream_keys_after_streams_or_a_subcommand_are_checked_against_a_users_patterns() {
        let user = Arc::new(User::new("app", b"pw", false, &[b"app:*"]));
        let info = ServerInfo {
            primary: true,
            users: Arc::new(vec![user]),
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        assert_eq!(replied(&mut session, "AUTH app pw", &info), "+OK\r\n");
        let keys = "NOPERM this user has no permissions to access one of the keys used as \
                    arguments";
        for (line, allowed) in [
            ("XREADGROUP GROUP g c STREAMS app:1 app:2 > >", true),
            (
                "XREADGROUP GROUP g c COUNT 1 NOACK STREAMS app:1 other > >",
                false,
            ),
            ("XREADGROUP GROUP STREAMS STREAMS STREAMS app:1 >", true),
            ("XREADGROUP GROUP STREAMS STREAMS STREAMS other >", false),
            ("XREAD BLOCK 5 COUNT 1 STREAMS other 0", false),
            ("XREAD STREAMS app:1 0", true),
            ("XGROUP CREATE other g $", false),
            ("XGROUP CREATE app:1 g $ MKSTREAM", true),
            ("XGROUP HELP", true),
            ("XINFO STREAM other", false),
            ("XINFO GROUPS app:1", true),
            ("XACK other g 1-0", false),
            ("XCLAIM app:1 g c 0 1-0", true),
        ] {
            let mut out = Vec::new();
            let step = session.handle(&argv(line), &info, &mut out);
            if allowed {
                assert!(matches!(step, Step::Call(_)), "{line} runs");
            } else {
                assert_eq!(
                    String::from_utf8(out).unwrap(),
                    format!("-{keys}\r\n"),
                    "{line}"
                );
            }
        }
        assert_eq!(
            replied(&mut session, "XGROUP CREATE app:1", &info),
            "-ERR wrong number of arguments for 'xgroup|create' command\r\n"
        );
        assert_eq!(
            replied(&mut session, "XINFO NOSUCH app:1", &info),
            "-ERR unknown subcommand 'NOSUCH'. Try XINFO HELP.\r\n"
        );
    }

    /// `SHUTDOWN`'s arguments as Redis 7.0 reads them: a bad or contradictory one is a
    /// syntax error, `ABORT` finds no shutdown under way, a busy script lets only `NOSAVE`
    /// through, `SAVE` without `FORCE` is refused by the front end (no RDB file is written
    /// when a node stops), and inside `MULTI` it is not queued.
    #[test]
    fn shutdown_is_read_as_redis_reads_it() {
        let info = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        let syntax = "-ERR syntax error\r\n";
        for line in [
            "SHUTDOWN LATER",
            "SHUTDOWN SAVE NOSAVE",
            "SHUTDOWN ABORT NOW",
            "SHUTDOWN NOSAVE ABORT",
        ] {
            assert_eq!(replied(&mut session, line, &info), syntax, "{line}");
        }
        assert_eq!(
            replied(&mut session, "shutdown abort", &info),
            "-ERR No shutdown in progress.\r\n"
        );
        let stop = |session: &mut Session, line: &str, info: &ServerInfo| {
            let mut out = Vec::new();
            match session.handle(&argv(line), info, &mut out) {
                Step::Shutdown { save_refused } => Some(save_refused),
                _ => None,
            }
        };
        assert_eq!(stop(&mut session, "SHUTDOWN", &info), Some(false));
        assert_eq!(stop(&mut session, "SHUTDOWN NOW FORCE", &info), Some(false));
        assert_eq!(stop(&mut session, "SHUTDOWN SAVE", &info), Some(true));
        assert_eq!(
            stop(&mut session, "SHUTDOWN SAVE FORCE", &info),
            Some(false)
        );

        let busy = ServerInfo {
            script: ScriptActivity::Busy,
            ..info.clone()
        };
        let busy_reply = format!("-{BUSY}\r\n");
        assert_eq!(replied(&mut session, "SHUTDOWN", &busy), busy_reply);
        assert_eq!(stop(&mut session, "SHUTDOWN NOSAVE", &busy), Some(false));

        assert_eq!(replied(&mut session, "MULTI", &info), "+OK\r\n");
        assert_eq!(
            replied(&mut session, "SHUTDOWN", &info),
            "-ERR Command not allowed inside a transaction\r\n"
        );
    }

    /// Stopping the node and writing its snapshot are an administrator's: a user limited to
    /// reads or to some keys may not, the default user may.
    #[test]
    fn only_an_unlimited_user_may_shut_the_node_down_or_save_it() {
        for name in [&b"SHUTDOWN"[..], b"SAVE", b"BGSAVE"] {
            let (_, command) = cmd::lookup(name).expect("a command");
            assert!(!User::new("reader", b"pw", true, &[b"*"]).may_run(command));
            assert!(!User::new("app", b"pw", false, &[b"app:*"]).may_run(command));
            assert!(User::new("admin", b"pw", false, &[b"*"]).may_run(command));
        }
    }

    /// As Redis's "CLIENT REPLY ON: unset SKIP flag": `ON` right after `SKIP` is answered, and
    /// the skip it cleared silences nothing after it.
    #[test]
    fn client_reply_on_after_skip_is_answered_and_ends_the_skip() {
        let info = ServerInfo {
            primary: true,
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        assert_eq!(replied(&mut session, "CLIENT REPLY SKIP", &info), "");
        assert_eq!(replied(&mut session, "CLIENT REPLY ON", &info), "+OK\r\n");
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
        // A skip still silences the one reply after it.
        assert_eq!(replied(&mut session, "CLIENT REPLY SKIP", &info), "");
        assert_eq!(replied(&mut session, "PING", &info), "");
        assert_eq!(replied(&mut session, "PING", &info), "+PONG\r\n");
    }

    #[test]
    fn save_and_bgsave_take_the_file_as_sync_does_and_refuse_what_redis_refuses() {
        let saves = SaveFacts {
            last_save_unix: 1_700_000_000,
            ..SaveFacts::default()
        };
        let info = ServerInfo {
            primary: true,
            saves: Some(saves),
            ..ServerInfo::default()
        };
        let mut session = Session::new(1);
        assert_eq!(replied(&mut session, "LASTSAVE", &info), ":1700000000\r\n");
        for (line, kind) in [
            ("SAVE", SaveKind::Foreground),
            ("BGSAVE", SaveKind::Background),
            ("bgsave schedule", SaveKind::Background),
        ] {
            let mut out = Vec::new();
            match session.handle(&argv(line), &info, &mut out) {
                Step::Call(call) => {
                    assert_eq!(call.purpose, Purpose::Save(kind), "{line}");
                    assert_eq!(call.runs_on, RunsOn::Primary);
                }
                _ => panic!("{line} makes a call"),
            }
        }
        let syntax = "-ERR syntax error\r\n";
        assert_eq!(replied(&mut session, "BGSAVE NOW", &info), syntax);
        assert_eq!(replied(&mut session, "BGSAVE SCHEDULE X", &info), syntax);
        let saving = ServerInfo {
            saves: Some(SaveFacts {
                in_progress: true,
                ..saves
            }),
            ..info.clone()
        };
        let in_progress = format!("-{SAVE_IN_PROGRESS}\r\n");
        assert_eq!(replied(&mut session, "SAVE", &saving), in_progress);
        assert_eq!(replied(&mut session, "BGSAVE", &saving), in_progress);
        // Where no snapshot is written (the proxy), each says so.
        let proxied = ServerInfo {
            saves: None,
            ..info.clone()
        };
        let not_served = format!("-{SAVES_NOT_SERVED}\r\n");
        for line in ["SAVE", "BGSAVE", "LASTSAVE"] {
            assert_eq!(replied(&mut session, line, &proxied), not_served, "{line}");
        }
        // In a block SAVE is refused; BGSAVE is scheduled, and its call made once the block
        // ran, its reply silenced.
        assert_eq!(replied(&mut session, "MULTI", &info), "+OK\r\n");
        assert_eq!(
            replied(&mut session, "SAVE", &info),
            "-ERR Command not allowed inside a transaction\r\n"
        );
        assert_eq!(replied(&mut session, "DISCARD", &info), "+OK\r\n");
        assert_eq!(session.take_scheduled_save(&info).map(|c| c.purpose), None);
        assert_eq!(replied(&mut session, "MULTI", &info), "+OK\r\n");
        assert_eq!(replied(&mut session, "BGSAVE", &info), "+QUEUED\r\n");
        assert_eq!(replied(&mut session, "BGSAVE NOW", &info), "+QUEUED\r\n");
        assert_eq!(
            replied(&mut session, "EXEC", &info),
            "*2\r\n+Background saving scheduled\r\n-ERR syntax error\r\n"
        );
        assert!(session.save_is_scheduled());
        assert_eq!(session.take_scheduled_save(&saving).map(|c| c.silent), None);
        let scheduled = session
            .take_scheduled_save(&info)
            .expect("the scheduled call");
        assert_eq!(scheduled.purpose, Purpose::Save(SaveKind::Background));
        assert!(scheduled.silent);
        assert!(!session.save_is_scheduled());
    }
}
