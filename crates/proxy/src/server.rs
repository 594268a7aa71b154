//! The proxy's I/O: a listener thread that deals the applications' connections out to the
//! worker threads (`worker.rs`: each serves its connections and their stubs on one poll),
//! and a thread that asks the cluster for its members and slot table now and then.
//!
//! **Lanes.** A connection borrows a stub ([`Client`]) from the proxy's pool for its life and
//! gives it back when it closes: the stub's client id names its calls in the primary's dedup
//! table, whose entries are never removed, so ids are reused by later connections rather than
//! minted per connection (a stub's seqs keep growing across the connections that borrow it).
//! Ids start at a random base drawn when the proxy starts, so two proxies never share one.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::Duration;

use tandem_client::{
    CallError, Client, ClientConfig, ConfigError, GROUP_ANY, ReadConsistency, ReplyStatus,
    discover_secure,
};
use tandem_redis::session::ServerInfo;

use crate::conn::{Answer, ProxyConn, Target, Unit};
use crate::route::{GroupAnswer, Route, SlotGroups, combine};
use crate::worker::{Inbox, Message, Worker};

/// Most worker threads a proxy runs.
pub const THREADS_MAX: usize = 64;
/// How often the proxy asks the cluster for its members again.
const MEMBERS_EVERY: Duration = Duration::from_secs(2);
/// How long one node may take to say who the members are.
const MEMBERS_TIMEOUT: Duration = Duration::from_millis(500);

/// What a proxy needs to know.
#[derive(Clone, Debug)]
pub struct ProxyConfig {
    /// Nodes of the cluster (their client address, a node config's `listen`): one is
    /// enough, the proxy asks it for the others.
    pub cluster: Vec<SocketAddr>,
    /// Where applications connect.
    pub listen: SocketAddr,
    /// The replication group the proxy asks the nodes about, and sends every command to
    /// when the cluster has one group; a cluster of several routes each by its keys' slot.
    pub group: u32,
    /// How long a command may wait for the cluster (failovers included) before its
    /// application is told an error.
    pub deadline: Duration,
    /// How reads sent to backups (after `READONLY`) see the history.
    pub read_consistency: ReadConsistency,
    /// Who the proxy is to the cluster's nodes, when they ask clients for a password: its
    /// own user (one with every right), whatever its applications log in as.
    pub credentials: Option<tandem_client::Credentials>,
    /// TLS to the nodes' native ports, if they speak it (`[tls] native = true`).
    pub tls: Option<tandem_client::ClientTls>,
    /// The password applications give (`AUTH`), as a node's `requirepass`.
    pub requirepass: Option<tandem_redis::session::Password>,
    /// The applications' users and their rights, checked here as a node checks them: they
    /// hold through failovers, which the proxy rides out.
    pub users: Arc<Vec<Arc<tandem_redis::session::User>>>,
    /// Worker threads, each serving its share of the applications' connections on one poll
    /// (1 to [`THREADS_MAX`]).
    pub threads: usize,
}

/// Why a proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    #[error("cannot listen on {listen}: {source}")]
    Listen {
        listen: SocketAddr,
        #[source]
        source: std::io::Error,
    },
    #[error("the stub's configuration: {0}")]
    Config(#[from] ConfigError),
    #[error("cannot start the proxy's threads: {0}")]
    Thread(#[source] std::io::Error),
    #[error("threads is {threads}: give 1 to {THREADS_MAX} worker threads")]
    Threads { threads: usize },
}

/// Counters since the proxy started.
#[derive(Debug, Default)]
pub(crate) struct Counters {
    pub(crate) connections: AtomicU64,
    pub(crate) connections_open: AtomicU64,
    units: AtomicU64,
    commands: AtomicU64,
    /// Units whose commands were told an error the proxy wrote (deadline, refusal).
    errors: AtomicU64,
    reads_at_backups: AtomicU64,
}

/// A snapshot of [`Proxy::stats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    pub connections: u64,
    pub connections_open: u64,
    /// Calls made for applications (a pipelined unit is one call).
    pub units: u64,
    /// Data commands those calls carried.
    pub commands: u64,
    /// Units whose commands got an error from the proxy itself.
    pub errors: u64,
    /// Units of reads a backup served (after `READONLY`; the others went to the primary).
    pub reads_at_backups: u64,
}

#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) config: ProxyConfig,
    pub(crate) info: ServerInfo,
    /// How long a stub waits for one answer before it looks for the primary again.
    pub(crate) attempt_timeout: Duration,
    /// The cluster's members as last learned, and how many times the list changed.
    members: Mutex<Vec<SocketAddr>>,
    members_version: AtomicU64,
    /// Which group serves each slot, when the cluster has several (`None`: one group).
    slots: Mutex<Option<Arc<SlotGroups>>>,
    /// Idle stubs of each group, ready for the next connection, each with the members
    /// version it knows.
    lanes: Mutex<BTreeMap<u32, Vec<(Client, u64)>>>,
    lane_id_base: u64,
    lane_next: AtomicU64,
    pub(crate) conn_next: AtomicU64,
    pub(crate) counters: Counters,
    pub(crate) stopping: AtomicBool,
    /// The threads that run what would make a worker wait.
    pub(crate) helpers: Arc<crate::worker::Helpers>,
}

/// A running proxy.
#[derive(Debug)]
pub struct Proxy {
    local_addr: SocketAddr,
    shared: Arc<Shared>,
}

impl Proxy {
    /// Checks `config`, listens, and serves on threads of its own.
    pub fn start(config: ProxyConfig) -> Result<Proxy, ProxyError> {
        // The stub checks what it is given (nodes, timeouts) now, not at the first command.
        let mut checked = ClientConfig::new(config.cluster.clone(), config.group, 1);
        checked.credentials = config.credentials.clone();
        checked.tls = config.tls.clone();
        checked.validate()?;
        if !(1..=THREADS_MAX).contains(&config.threads) {
            return Err(ProxyError::Threads {
                threads: config.threads,
            });
        }
        let listener = TcpListener::bind(config.listen).map_err(|source| ProxyError::Listen {
            listen: config.listen,
            source,
        })?;
        let local_addr = listener.local_addr().map_err(|source| ProxyError::Listen {
            listen: config.listen,
            source,
        })?;
        let info = ServerInfo {
            // To its applications the proxy is the primary: it takes writes and reads.
            primary: true,
            resp_port: local_addr.port(),
            backups: config.cluster.len().saturating_sub(1),
            safety: "the group's".to_owned(),
            requirepass: config.requirepass.clone(),
            users: Arc::clone(&config.users),
            ..ServerInfo::default()
        };
        // Any reachable node names the others; until one does, the proxy goes round the nodes
        // it was given (and keeps asking). Any group will do to learn the members and the
        // slot table: the cluster's groups are not known yet.
        let found = discover_secure(
            &config.cluster,
            GROUP_ANY,
            MEMBERS_TIMEOUT,
            config.credentials.as_ref(),
            config.tls.as_ref(),
        )
        .map(|discovery| (discovery.addresses(), slot_groups(&discovery)));
        let (members, slots) = match found {
            Ok((members, slots)) => {
                tracing::info!("proxy: the cluster's members are {members:?}");
                if slots.is_none() {
                    warn_unless_served(&members, &config);
                }
                (members, slots)
            }
            Err(err) => {
                tracing::warn!("proxy: {err}; using the nodes given until one answers");
                (config.cluster.clone(), None)
            }
        };
        let shared = Arc::new(Shared {
            config,
            info,
            attempt_timeout: checked.attempt_timeout,
            members: Mutex::new(members),
            members_version: AtomicU64::new(0),
            slots: Mutex::new(slots),
            lanes: Mutex::new(BTreeMap::new()),
            lane_id_base: random_id_base(),
            lane_next: AtomicU64::new(0),
            conn_next: AtomicU64::new(1),
            counters: Counters::default(),
            stopping: AtomicBool::new(false),
            helpers: Arc::default(),
        });
        let mut inboxes = Vec::with_capacity(shared.config.threads);
        for _ in 0..shared.config.threads {
            let (worker, inbox) = Worker::new(Arc::clone(&shared)).map_err(ProxyError::Thread)?;
            thread::Builder::new()
                .name("proxy-worker".into())
                .spawn(move || worker.run())
                .map_err(ProxyError::Thread)?;
            inboxes.push(inbox);
        }
        let accepting = Arc::clone(&shared);
        thread::Builder::new()
            .name("proxy-accept".into())
            .spawn(move || accept(&listener, &accepting, &inboxes))
            .map_err(ProxyError::Thread)?;
        let learning = Arc::clone(&shared);
        thread::Builder::new()
            .name("proxy-members".into())
            .spawn(move || learn_members(&learning))
            .map_err(ProxyError::Thread)?;
        Ok(Proxy { local_addr, shared })
    }

    /// The cluster's members, as the proxy last learned them.
    pub fn members(&self) -> Vec<SocketAddr> {
        self.shared.members.lock().expect("members").clone()
    }

    /// The groups the proxy routes commands to by slot, as it last learned the slot table
    /// (none for a cluster of one group, which takes every command).
    pub fn groups(&self) -> Vec<u32> {
        self.shared
            .slots()
            .map(|slots| slots.groups().to_vec())
            .unwrap_or_default()
    }

    /// Where applications connect.
    pub fn local_addr(&self) -> SocketAddr {
        self.local_addr
    }

    pub fn stats(&self) -> ProxyStats {
        let c = &self.shared.counters;
        ProxyStats {
            connections: c.connections.load(Ordering::Relaxed),
            connections_open: c.connections_open.load(Ordering::Relaxed),
            units: c.units.load(Ordering::Relaxed),
            commands: c.commands.load(Ordering::Relaxed),
            errors: c.errors.load(Ordering::Relaxed),
            reads_at_backups: c.reads_at_backups.load(Ordering::Relaxed),
        }
    }

    /// Stops accepting connections (open ones run until their application closes them).
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wakes the listener's blocking accept.
        drop(TcpStream::connect_timeout(
            &self.local_addr,
            Duration::from_millis(100),
        ));
    }
}

/// Says in the log if no node serves the group the proxy sends every command to, over a
/// cluster of one group (a `--group` that names another group than the nodes'), which would
/// otherwise show only as each command's deadline error.
fn warn_unless_served(members: &[SocketAddr], config: &ProxyConfig) {
    let credentials = config.credentials.as_ref();
    let tls = config.tls.as_ref();
    if let Err(err) = discover_secure(members, config.group, MEMBERS_TIMEOUT, credentials, tls) {
        tracing::warn!(
            "proxy: group {} does not answer ({err}); give the cluster's group with --group",
            config.group
        );
    }
}

/// A random, non-zero base for this proxy's client ids (the top bit set keeps them clear of
/// the small ids tools and tests use).
fn random_id_base() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u32(std::process::id());
    if let Ok(since) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        hasher.write_u128(since.as_nanos());
    }
    (hasher.finish() | (1 << 63)) & !0xffff_ffff
}

/// Asks the cluster for its members every [`MEMBERS_EVERY`] (the members it knows and the
/// nodes it was given, in turn), so that a node added to the cluster is used, and a proxy
/// that started before any node answered learns them.
fn learn_members(shared: &Shared) {
    while !shared.stopping.load(Ordering::SeqCst) {
        thread::sleep(MEMBERS_EVERY);
        let mut asked = shared.members.lock().expect("members").clone();
        for seed in &shared.config.cluster {
            if !asked.contains(seed) {
                asked.push(*seed);
            }
        }
        let credentials = shared.config.credentials.as_ref();
        let tls = shared.config.tls.as_ref();
        let found = discover_secure(&asked, GROUP_ANY, MEMBERS_TIMEOUT, credentials, tls);
        let Ok(discovery) = found else {
            continue;
        };
        let members = discovery.addresses();
        let slots = slot_groups(&discovery);
        {
            let mut known = shared.slots.lock().expect("slots");
            if *known != slots {
                tracing::info!("proxy: the cluster's slot table changed");
                *known = slots;
            }
        }
        let mut known = shared.members.lock().expect("members");
        if *known != members {
            tracing::info!("proxy: the cluster's members are now {members:?}");
            *known = members;
            shared.members_version.fetch_add(1, Ordering::SeqCst);
        }
    }
}

/// Deals each accepted connection to the next worker in turn.
fn accept(listener: &TcpListener, shared: &Shared, workers: &[Inbox]) {
    for (stream, turn) in listener.incoming().zip((0..workers.len()).cycle()) {
        if shared.stopping.load(Ordering::SeqCst) {
            return;
        }
        let stream = match stream {
            Ok(stream) => stream,
            Err(err) => {
                tracing::warn!("proxy: accept failed: {err}");
                thread::sleep(Duration::from_millis(10));
                continue;
            }
        };
        if !workers[turn].send(Message::Accepted(stream)) {
            tracing::error!("proxy: a worker thread is gone; no more connections are taken");
            return;
        }
    }
}

/// The proxy's routes from `discovery`'s slot table: `None` for a cluster of one group, or
/// a table that does not cover every slot (the nodes' decoder checks it, so never).
fn slot_groups(discovery: &tandem_client::Discovery) -> Option<Arc<SlotGroups>> {
    let ranges = discovery.slots.iter().map(|r| (r.first, r.last, r.group));
    match SlotGroups::new(ranges) {
        Ok(slots) => slots.map(Arc::new),
        Err(err) => {
            tracing::warn!("proxy: the cluster's slot table cannot route: {err}");
            None
        }
    }
}

/// A stub a connection borrowed for one group, and the members version it was given.
pub(crate) struct Lane {
    group: u32,
    pub(crate) client: Client,
    members_version: u64,
}

/// The stubs one connection borrowed, one per group it sent a call to.
#[derive(Default)]
pub(crate) struct Lanes {
    pub(crate) by_group: BTreeMap<u32, Lane>,
}

impl Shared {
    /// The slot table as last learned.
    pub(crate) fn slots(&self) -> Option<Arc<SlotGroups>> {
        self.slots.lock().expect("slots").clone()
    }

    /// `lanes`' stub for `group`, borrowed now if the connection has none yet, with the
    /// members learned since it last looked.
    pub(crate) fn lane<'a>(&self, lanes: &'a mut Lanes, group: u32) -> &'a mut Lane {
        let lane = lanes
            .by_group
            .entry(group)
            .or_insert_with(|| self.borrow_lane(group));
        self.refresh(lane);
        lane
    }

    fn borrow_lane(&self, group: u32) -> Lane {
        let idle = (self.lanes.lock().expect("lanes").get_mut(&group)).and_then(Vec::pop);
        if let Some((client, members_version)) = idle {
            return Lane {
                group,
                client,
                members_version,
            };
        }
        let lane = self.lane_next.fetch_add(1, Ordering::Relaxed);
        let members_version = self.members_version.load(Ordering::SeqCst);
        let members = self.members.lock().expect("members").clone();
        let mut config = ClientConfig::new(members, group, self.lane_id_base + lane + 1);
        config.deadline = self.config.deadline;
        config.read_consistency = self.config.read_consistency;
        config.credentials = self.config.credentials.clone();
        config.tls = self.config.tls.clone();
        let mut client = Client::new(config).expect("checked when the proxy started");
        // Lanes start their search for a backup at different nodes: reads after `READONLY`
        // spread over the backups.
        client.prefer_backup(lane as usize);
        Lane {
            group,
            client,
            members_version,
        }
    }

    pub(crate) fn return_lanes(&self, lanes: Lanes) {
        let mut idle = self.lanes.lock().expect("lanes");
        for lane in lanes.by_group.into_values() {
            let Lane {
                group,
                client,
                members_version,
            } = lane;
            idle.entry(group)
                .or_default()
                .push((client, members_version));
        }
    }

    /// Gives `lane` the members learned since it last looked (its seq and any connection to
    /// a node still listed stay).
    fn refresh(&self, lane: &mut Lane) {
        let version = self.members_version.load(Ordering::SeqCst);
        if version == lane.members_version {
            return;
        }
        let members = self.members.lock().expect("members").clone();
        if lane.client.set_nodes(members).is_ok() {
            lane.members_version = version;
        }
    }
}

/// Counts `unit` and its commands as sent.
pub(crate) fn count_unit(unit: &Unit, shared: &Shared) {
    let counters = &shared.counters;
    counters.units.fetch_add(1, Ordering::Relaxed);
    counters
        .commands
        .fetch_add(unit.commands() as u64, Ordering::Relaxed);
}

/// Makes `unit`'s call through the stub of its group (each group's, for a call every group
/// runs), waiting for its answer.
pub(crate) fn call_unit(
    unit: &Unit,
    slots: Option<&SlotGroups>,
    lanes: &mut Lanes,
    shared: &Shared,
) -> Result<(ReplyStatus, Vec<u8>), CallError> {
    match (&unit.route, slots) {
        (Route::Every(how), Some(slots)) => every_group(unit, *how, slots, lanes, shared),
        (Route::Scan(cursor), Some(slots)) => {
            let args = cursor.args_for_group(&unit.args);
            let group = cursor.group(slots);
            call_group(unit, group, &args, lanes, shared).map(|outcome| match outcome {
                (ReplyStatus::Committed, body) => match cursor.reply_for_app(&body, slots) {
                    Ok(reply) => (ReplyStatus::Committed, reply),
                    Err(text) => (ReplyStatus::RolledBack, text.into_bytes()),
                },
                other => other,
            })
        }
        (Route::Group(group), _) => call_group(unit, *group, &unit.args, lanes, shared),
        // A cluster of one group.
        _ => call_group(unit, shared.config.group, &unit.args, lanes, shared),
    }
}

/// Finishes `unit` on `conn` as its call ended.
pub(crate) fn conclude(
    conn: &mut ProxyConn,
    unit: Unit,
    answered: Result<(ReplyStatus, Vec<u8>), CallError>,
    shared: &Shared,
) {
    match answered {
        Ok((status, body)) => {
            if status == ReplyStatus::CommittedReplyNotKept {
                let text = String::from_utf8_lossy(&body);
                tracing::warn!("proxy: a retried command's reply was not kept: {text}");
            }
            conn.finish_answered(unit, status, &body);
        }
        Err(err) => {
            shared.counters.errors.fetch_add(1, Ordering::Relaxed);
            let text = error_text(&err, shared.config.deadline);
            tracing::warn!("proxy: {text}");
            conn.finish(unit, Answer::Failed(&text));
        }
    }
}

/// `unit`'s call on every group in turn, the replies combined as `how` says. A group that
/// gives no answer fails the whole unit (the others' calls ran, each exactly once).
fn every_group(
    unit: &Unit,
    how: tandem_redis::session::spread::Combine,
    slots: &SlotGroups,
    lanes: &mut Lanes,
    shared: &Shared,
) -> Result<(ReplyStatus, Vec<u8>), CallError> {
    let mut answers: Vec<GroupAnswer> = Vec::with_capacity(slots.groups().len());
    for &group in slots.groups() {
        let answer = match call_group(unit, group, &unit.args, lanes, shared)? {
            (ReplyStatus::Committed, body) => Ok(body),
            (_, reason) => Err(String::from_utf8_lossy(&reason).into_owned()),
        };
        answers.push(answer);
    }
    Ok(match combine(how, &answers) {
        Ok(reply) => (ReplyStatus::Committed, reply),
        Err(text) => (ReplyStatus::RolledBack, text.into_bytes()),
    })
}

/// `unit`'s call with arguments `args` through the connection's stub for `group`: its
/// status and body.
fn call_group(
    unit: &Unit,
    group: u32,
    args: &[u8],
    lanes: &mut Lanes,
    shared: &Shared,
) -> Result<(ReplyStatus, Vec<u8>), CallError> {
    let client = &mut shared.lane(lanes, group).client;
    let outcome = match unit.target {
        Target::Primary => client.call(unit.proc_id.0, args, None)?,
        Target::Backup => {
            let before = client.stats().reads_at_backups;
            let result = client.read(unit.proc_id.0, args);
            let served = client.stats().reads_at_backups - before;
            let counters = &shared.counters;
            counters
                .reads_at_backups
                .fetch_add(served, Ordering::Relaxed);
            result?
        }
    };
    Ok((outcome.status, outcome.body))
}

/// What the application is told when the stub gave up: one line, Redis-style, code first.
fn error_text(err: &CallError, deadline: Duration) -> String {
    match err {
        CallError::Deadline { last_error, .. } => format!(
            "ERR tandem proxy: no answer from the cluster within {} ms (last error: \
             {last_error}); the command ran at most once, and whether it ran is unknown",
            deadline.as_millis()
        ),
        CallError::Refused { message, .. } => {
            format!("ERR tandem proxy: the cluster refused the command: {message}")
        }
        CallError::ArgsTooLarge { len } => format!(
            "ERR tandem proxy: the command's arguments are {len} bytes, more than the {} a \
             call carries",
            tandem_client::ARGS_LEN_MAX
        ),
        other => format!("ERR tandem proxy: {other}"),
    }
}
