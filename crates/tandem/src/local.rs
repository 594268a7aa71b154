//! A local cluster on loopback: `tandem up`, `tandem status` and `tandem kill`, and the
//! processes `tandem demo` and `tandem bench failover` run.
//!
//! Every node is a `tandem node` child process in cluster mode. Its configuration, log and
//! config-store state live under the cluster's directory (`./.tandem/` by default):
//!
//! ```text
//! .tandem/cluster.json        the nodes: id, addresses, pid, config and log paths
//! .tandem/node1/node.toml     node 1's configuration
//! .tandem/node1/node.log      what node 1 printed
//! .tandem/node1/raft/         node 1's config-store state
//! .tandem/node1/log/          node 1's write-ahead log (the batches it holds)
//! ```
//!
//! All of it is its owner's alone, whatever the umask: the directories are 0700 (one found
//! open to others is tightened, and `up` says so) and every file is 0600 (`node.toml` holds
//! the cluster's secrets, the logs its data). A node gets its password only from its
//! `node.toml`: nothing secret is in a node's command line or environment.
//!
//! A child reads its stdin until end-of-file (`--exit-on-stdin-eof`), and this process holds
//! the other end: however this process ends, Ctrl-C or a crash, its nodes end with it.
//!
//! `tandem start N` brings a killed node back as a detached process (no stdin tie: the
//! `tandem start` that spawned it exits at once) and writes its new pid into `cluster.json`;
//! `tandem down`, and `tandem up` on Ctrl-C, stop such nodes through that file. Before
//! anything signals a pid from `cluster.json`, `probe` checks that the pid still is that node
//! (`/proc/PID/cmdline` reads `tandem node --config <its config>`): the file outlives its
//! processes, and a pid is reused.

use std::ffi::OsStr;
use std::fs;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tandem_replication::Safety;
use tandem_runtime::config::{self, ClusterTable, NodeConfig, PeerConfig, Role};

use crate::Failure;
use crate::bench::replication::{free_address, free_address_on, http_get_json, http_get_json_as};

/// The file that lists a running local cluster's nodes.
pub const CLUSTER_FILE: &str = "cluster.json";

/// The environment variable `tandem up` takes the password from (see `--requirepass`). It is
/// taken out of the nodes' environment: they read the password from their `node.toml`.
pub const REQUIREPASS_ENV: &str = "TANDEM_REQUIREPASS";

/// The mode of every file a local cluster writes: its owner's alone.
const PRIVATE_FILE_MODE: u32 = 0o600;

/// How a local cluster is set up.
#[derive(Clone, Debug)]
pub struct Options {
    pub nodes: u32,
    /// Replication groups: one (group 0, led by node 1), or several numbered from 1, group G
    /// led by node (G − 1) mod `nodes` + 1 with every other node a backup.
    pub groups: u32,
    pub db_mib: usize,
    pub safety: Safety,
    /// Tick length and failure-detection timeouts (ticks).
    pub tick_us: u64,
    pub heartbeat_ticks: u64,
    pub suspect_ticks: u64,
    /// The primary's lease (ticks), cut to below `suspect_ticks`.
    pub lease_ticks: u64,
    /// Records a primary's retained tail keeps.
    pub tail_records_max: u64,
    /// The data model the nodes serve; `redis` also opens each node's RESP port.
    pub workload: String,
    /// When each node syncs its write-ahead log.
    pub fsync: tandem_node::SyncPolicy,
    /// MiB of batches between two checkpoints of a node's database.
    pub checkpoint_mib: u64,
    /// The password Redis clients give before any other command, if one is asked for.
    pub requirepass: Option<String>,
    /// Redis users besides `default`.
    pub users: Vec<tandem_runtime::config::UserConfig>,
    /// The RESP ports speak TLS, with certificates from a CA made for the cluster.
    pub tls: bool,
    /// The IP address each node's HTTP endpoint binds to (a port of its own each).
    pub http_ip: IpAddr,
    /// The RESP ports speak Redis Cluster's protocol (`redis_cluster` in each node's config).
    pub redis_cluster: bool,
}

impl Options {
    pub fn new(nodes: u32) -> Options {
        let tuning = config::Tuning::default();
        Options {
            nodes,
            groups: 1,
            db_mib: 50,
            safety: Safety::DEFAULT,
            tick_us: tuning.tick_us,
            heartbeat_ticks: tuning.heartbeat_ticks,
            suspect_ticks: tuning.suspect_ticks,
            lease_ticks: ClusterTable::new(PathBuf::new()).lease_ticks,
            tail_records_max: tuning.tail_records_max,
            workload: "debit-credit".to_string(),
            fsync: tandem_runtime::config::LogTable::default().fsync,
            checkpoint_mib: tandem_runtime::config::LogTable::default().checkpoint_mib,
            requirepass: None,
            users: Vec::new(),
            tls: false,
            http_ip: IpAddr::from([127, 0, 0, 1]),
            redis_cluster: false,
        }
    }
}

impl Options {
    pub fn with_db_mib(mut self, db_mib: usize) -> Options {
        self.db_mib = db_mib;
        self
    }
}

/// One node as `cluster.json` lists it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct NodeEntry {
    pub id: u32,
    pub listen: SocketAddr,
    pub status: SocketAddr,
    /// Where Redis clients connect, for the `redis` model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resp: Option<SocketAddr>,
    pub pid: u32,
    pub config: PathBuf,
    pub log: PathBuf,
}

/// `cluster.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClusterFile {
    pub nodes: Vec<NodeEntry>,
}

impl ClusterFile {
    /// The cluster file in `dir` (as the user gave it: messages name it so).
    pub fn load(dir: &Path) -> Result<ClusterFile, Failure> {
        let path = dir.join(CLUSTER_FILE);
        let text = fs::read_to_string(&path).map_err(|err| {
            Failure::Usage(format!(
                "no local cluster in {} ({}: {err}); start one with `tandem up --nodes 3`",
                dir.display(),
                path.display()
            ))
        })?;
        serde_json::from_str(&text)
            .map_err(|err| Failure::Run(format!("{} is not a cluster file: {err}", path.display())))
    }

    /// Writes the file whole under a temporary name, 0600, and renames it into place: a
    /// reader never sees half of it, and a file an older version left readable by others is
    /// replaced by a private one.
    pub fn save(&self, dir: &Path) -> Result<(), Failure> {
        let path = dir.join(CLUSTER_FILE);
        let temporary = dir.join(format!("{CLUSTER_FILE}.tmp"));
        let text = serde_json::to_string_pretty(self).expect("serializable");
        write_private(&temporary, &text)?;
        fs::rename(&temporary, &path)
            .map_err(|err| Failure::Run(format!("cannot write {}: {err}", path.display())))
    }
}

/// A node process of a local cluster.
pub struct LocalNode {
    pub entry: NodeEntry,
    child: Option<Child>,
    _stdin: Option<ChildStdin>,
    /// The iptables chain that cuts it off the network (`LocalCluster::isolate`), removed
    /// when it is let back on or dropped.
    cut_chain: Option<String>,
    /// Where this process's lines begin in its log (the log holds earlier starts' too).
    log_from: u64,
    /// The node's password (its `requirepass`), which `/checksum` asks for off loopback.
    password: Option<String>,
}

impl LocalNode {
    /// Whether the process still runs.
    pub fn alive(&mut self) -> bool {
        match &mut self.child {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        }
    }

    /// The node's `/status` JSON.
    pub fn status(&self) -> Result<Value, Failure> {
        http_get_json(self.entry.status, "/status")
    }

    /// The node's `/checksum` JSON (status, segment checksum and consistency check), with
    /// its password when it has one: a node whose HTTP address is not loopback asks for it.
    pub fn checksum(&self) -> Result<Value, Failure> {
        http_get_json_as(self.entry.status, "/checksum", self.password.as_deref())
    }

    pub fn log(&self) -> String {
        fs::read_to_string(&self.entry.log).unwrap_or_default()
    }

    /// What this process wrote to its log (not what earlier starts of the node did).
    pub fn log_since_start(&self) -> String {
        log_since(&self.entry.log, self.log_from)
    }

    /// The process id, while the node has a process.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }
}

impl Drop for LocalNode {
    fn drop(&mut self) {
        if let Some(chain) = self.cut_chain.take() {
            let _ = remove_chain(&chain);
        }
        if let Some(child) = &mut self.child {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A local cluster whose nodes are this process's children.
pub struct LocalCluster {
    /// The cluster's directory, absolute (the nodes' configurations name their files so).
    pub dir: PathBuf,
    /// The directory as the user gave it (`--dir`), which messages repeat.
    pub shown: PathBuf,
    pub nodes: Vec<LocalNode>,
    exe: PathBuf,
    /// Whether this is a new cluster (whose ports were drawn now), not one restarted from
    /// its disks.
    fresh: bool,
}

impl LocalCluster {
    /// Writes the configurations under `dir` (wiping what a previous cluster left there) and
    /// starts every node. Node 1 is the first view's primary; the others are its backups.
    pub fn start(dir: &Path, options: &Options) -> Result<LocalCluster, Failure> {
        if options.nodes == 0 || options.nodes > 9 {
            return Err(Failure::Usage(format!(
                "--nodes {}: a local cluster has 1 to 9 nodes",
                options.nodes
            )));
        }
        let shown = dir;
        // Absolute, so that the nodes find their files whatever their working directory.
        let dir = &std::path::absolute(dir)
            .map_err(|err| Failure::Run(format!("{}: {err}", dir.display())))?;
        refuse_if_running(shown)?;
        for id in 1..=9 {
            let node_dir = dir.join(format!("node{id}"));
            if node_dir.exists() {
                fs::remove_dir_all(&node_dir).map_err(|err| {
                    let node_dir = shown.join(format!("node{id}"));
                    Failure::Run(format!("cannot clear {}: {err}", node_dir.display()))
                })?;
            }
        }
        make_cluster_dir(dir, shown)?;
        let exe = std::env::current_exe()
            .map_err(|err| Failure::Run(format!("cannot find the tandem binary: {err}")))?;
        let mut members = Vec::new();
        for id in 1..=options.nodes {
            members.push(PeerConfig {
                node_id: id,
                address: free_address()?,
                // Several groups: each group's entry says who leads it.
                role: (options.groups == 1).then_some(if id == 1 {
                    Role::Primary
                } else {
                    Role::Backup
                }),
                // A RESP endpoint per group, on consecutive ports from this one.
                resp: if options.workload == "redis" {
                    Some(crate::bench::replication::free_run(options.groups as u16)?)
                } else {
                    None
                },
            });
        }
        let mut cluster = LocalCluster {
            dir: dir.to_path_buf(),
            shown: shown.to_path_buf(),
            nodes: Vec::new(),
            exe,
            fresh: true,
        };
        // Every peer link of the cluster proves it knows this secret, so that nothing but the
        // cluster's own nodes can join its links, without any set-up by the user.
        let peer_secret = fresh_peer_secret()?;
        let certificates = if options.tls {
            Some(Certificates::make(dir, &members)?)
        } else {
            None
        };
        for member in &members {
            let mut config = node_config(dir, options, member, &members, &peer_secret)?;
            if let Some(certificates) = &certificates {
                config.tls = Some(certificates.node(member.node_id));
            }
            let node_dir = dir.join(format!("node{}", member.node_id));
            make_private(&node_dir, &shown.join(format!("node{}", member.node_id)))?;
            let path = node_dir.join("node.toml");
            write_private(&path, &config.to_toml_string())?;
            let entry = NodeEntry {
                id: member.node_id,
                listen: member.address,
                status: config.metrics_listen.expect("local nodes serve /status"),
                resp: member.resp,
                pid: 0,
                config: path,
                log: node_dir.join("node.log"),
            };
            let node = cluster.spawn(entry)?;
            cluster.nodes.push(node);
        }
        cluster.save()?;
        Ok(cluster)
    }

    /// [`LocalCluster::start`], then waits until the cluster has settled. Ports are drawn at
    /// random and probed, but another program (another `tandem up` starting at the same
    /// moment, say) may bind one between the probe and the node's own bind: a node that
    /// could not bind its address makes the start begin again on other ports, up to
    /// `START_ATTEMPTS` times in all.
    pub fn start_settled(
        dir: &Path,
        options: &Options,
        timeout: Duration,
    ) -> Result<(LocalCluster, Settled), Failure> {
        const START_ATTEMPTS: u32 = 3;
        let mut attempt = 1;
        loop {
            let mut cluster = LocalCluster::start(dir, options)?;
            match cluster.wait_settled(timeout) {
                Ok(settled) => return Ok((cluster, settled)),
                Err(err) if attempt < START_ATTEMPTS && cluster.address_taken() => {
                    eprintln!(
                        "another program took a node's port before the node could bind it; \
                         starting again on other ports"
                    );
                    cluster.kill_all();
                    attempt += 1;
                    drop(err);
                }
                Err(err) => return Err(err),
            }
        }
    }

    /// Whether a node exited because its address was in use (what it logged since it
    /// started says so).
    fn address_taken(&mut self) -> bool {
        self.nodes
            .iter_mut()
            .any(|node| !node.alive() && port_taken(&node.log_since_start()).is_some())
    }

    /// Starts again the cluster `dir` holds (its `cluster.json`, configurations, config-store
    /// states and write-ahead logs), none of whose nodes runs: each node restarts from its
    /// disk, rebuilding what its log holds, and the group promotes the backup whose log
    /// holds the most (every node lost its memory at once).
    pub fn reopen(dir: &Path) -> Result<LocalCluster, Failure> {
        let shown = dir;
        let dir = &std::path::absolute(dir)
            .map_err(|err| Failure::Run(format!("{}: {err}", dir.display())))?;
        refuse_if_running(shown)?;
        let file = ClusterFile::load(shown)?;
        for entry in &file.nodes {
            if !entry.config.is_file() {
                return Err(Failure::Run(format!(
                    "node {}'s configuration {} is missing, so the cluster in {} cannot \
                     restart; `tandem up --fresh --dir {}` starts a new one there (and deletes \
                     this one's data)",
                    entry.id,
                    shown_path(shown, &entry.config).display(),
                    shown.display(),
                    shown.display()
                )));
            }
        }
        // A cluster an older version made may have left its directories open to others.
        make_cluster_dir(dir, shown)?;
        for entry in &file.nodes {
            if let Some(node_dir) = entry.config.parent() {
                make_private(node_dir, &shown_path(shown, node_dir))?;
            }
        }
        let exe = std::env::current_exe()
            .map_err(|err| Failure::Run(format!("cannot find the tandem binary: {err}")))?;
        let mut cluster = LocalCluster {
            dir: dir.to_path_buf(),
            shown: shown.to_path_buf(),
            nodes: Vec::new(),
            exe,
            fresh: false,
        };
        for entry in file.nodes {
            let node = cluster.spawn(entry)?;
            cluster.nodes.push(node);
        }
        cluster.save()?;
        Ok(cluster)
    }

    /// Whether `dir` holds a cluster `tandem up` can restart: its `cluster.json`.
    pub fn exists_in(dir: &Path) -> bool {
        dir.join(CLUSTER_FILE).is_file()
    }

    /// SIGKILL to every node at once, as when the whole cluster loses power: the signals all
    /// leave before any process is waited for. (The kernel keeps what the processes wrote
    /// but did not sync; the simulator's disk is where unsynced writes are lost.)
    pub fn kill_all(&mut self) {
        for node in &mut self.nodes {
            if let Some(child) = &mut node.child {
                let _ = child.kill();
            }
        }
        for node in &mut self.nodes {
            if let Some(mut child) = node.child.take() {
                let _ = child.wait();
            }
        }
    }

    /// Starts every node again from its disk, after [`LocalCluster::kill_all`].
    pub fn restart_all(&mut self) -> Result<(), Failure> {
        let ids: Vec<u32> = self.nodes.iter().map(|node| node.entry.id).collect();
        for id in ids {
            self.restart(id)?;
        }
        Ok(())
    }

    fn spawn(&self, mut entry: NodeEntry) -> Result<LocalNode, Failure> {
        let (log, log_from) = open_log(&entry, &self.shown)?;
        let password = node_password(&entry);
        let mut child = Command::new(&self.exe)
            .arg("node")
            .arg("--config")
            .arg(&entry.config)
            .arg("--exit-on-stdin-eof")
            .env_remove(REQUIREPASS_ENV)
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .map_err(|err| Failure::Run(format!("cannot start node {}: {err}", entry.id)))?;
        entry.pid = child.id();
        let stdin = child.stdin.take();
        Ok(LocalNode {
            entry,
            child: Some(child),
            _stdin: stdin,
            cut_chain: None,
            log_from,
            password,
        })
    }

    fn save(&self) -> Result<(), Failure> {
        ClusterFile {
            nodes: self.nodes.iter().map(|node| node.entry.clone()).collect(),
        }
        .save(&self.dir)
    }

    /// `path` (under the cluster's directory) as the user would write it: under the `--dir`
    /// they gave.
    pub fn show(&self, path: &Path) -> PathBuf {
        shown_path(&self.shown, path)
    }

    fn node_mut(&mut self, id: u32) -> &mut LocalNode {
        self.nodes
            .iter_mut()
            .find(|node| node.entry.id == id)
            .expect("a node of this cluster")
    }

    /// The client-facing addresses of every node.
    pub fn addresses(&self) -> Vec<SocketAddr> {
        self.nodes.iter().map(|node| node.entry.listen).collect()
    }

    /// SIGKILL: the node's memory is gone at once, as in a machine failure.
    pub fn kill(&mut self, id: u32) {
        let node = self.node_mut(id);
        if let Some(mut child) = node.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// SIGSTOP or SIGCONT: a stopped node neither sends nor answers until it is continued, as
    /// in a partition or a long pause, and then finds the cluster moved on.
    pub fn pause(&mut self, id: u32, paused: bool) -> Result<(), Failure> {
        let node = self.node_mut(id);
        let signal = if paused {
            nix::sys::signal::Signal::SIGSTOP
        } else {
            nix::sys::signal::Signal::SIGCONT
        };
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(node.entry.pid as i32), signal)
            .map_err(|err| Failure::Run(format!("cannot signal node {id}: {err}")))
    }

    /// Cuts node `id` off the network (`cut`), or lets it back on: every packet its process
    /// sends is dropped, to peers, clients and the config store alike, as when its machine
    /// drops off the network; TCP then stalls both ways, since its acknowledgements are
    /// dropped too. Packets of the sockets it holds are dropped by their local port, and
    /// those of sockets it opens while cut off by its cgroup: the process goes into a cgroup
    /// of its own, which iptables matches for sockets made there (a socket keeps the cgroup it
    /// was made in). Needs root, cgroup v2 and iptables' `cgroup` match
    /// ([`isolation_unavailable`] says what is missing).
    pub fn isolate(&mut self, id: u32, cut: bool) -> Result<(), Failure> {
        let pid = self.node_mut(id).entry.pid;
        let root = cgroup2_root().ok_or_else(|| {
            Failure::Run("cannot cut a node off: no cgroup v2 hierarchy is mounted".into())
        })?;
        let name = format!("tandem-cut-{pid}");
        let group = root.join(&name);
        let io = |what: &str, err: std::io::Error| {
            Failure::Run(format!("cannot cut node {id} off: {what}: {err}"))
        };
        // The rules go into a chain of their own first, and one jump from OUTPUT puts them all
        // in force at once.
        let chain = format!("TANDEM-CUT-{pid}");
        if cut {
            std::fs::create_dir_all(&group).map_err(|err| io("a cgroup of its own", err))?;
            std::fs::write(group.join("cgroup.procs"), pid.to_string())
                .map_err(|err| io("moving it into its cgroup", err))?;
            let mut rules = vec![vec![
                "-m".to_owned(),
                "cgroup".to_owned(),
                "--path".to_owned(),
                name.clone(),
                "-j".to_owned(),
                "DROP".to_owned(),
            ]];
            for port in tcp_ports_of(pid) {
                rules.push(vec![
                    "-p".to_owned(),
                    "tcp".to_owned(),
                    "--sport".to_owned(),
                    port.to_string(),
                    "-j".to_owned(),
                    "DROP".to_owned(),
                ]);
            }
            let failed = |err: String| Failure::Run(format!("cannot cut node {id} off: {err}"));
            iptables(&["-N", &chain]).map_err(failed)?;
            self.node_mut(id).cut_chain = Some(chain.clone());
            for rule in &rules {
                let mut args = vec!["-A", chain.as_str()];
                args.extend(rule.iter().map(String::as_str));
                iptables(&args).map_err(failed)?;
            }
            iptables(&["-I", "OUTPUT", "-j", &chain]).map_err(failed)
        } else {
            if let Some(chain) = self.node_mut(id).cut_chain.take() {
                remove_chain(&chain)
                    .map_err(|err| Failure::Run(format!("cannot let node {id} back: {err}")))?;
            }
            std::fs::write(root.join("cgroup.procs"), pid.to_string())
                .map_err(|err| io("moving it back", err))?;
            // Empty now; a failure leaves an empty directory, which costs nothing.
            let _ = std::fs::remove_dir(&group);
            Ok(())
        }
    }

    /// Starts a killed node again, from its configuration and its config store's state: its
    /// memory is gone, so it rejoins as a spare and catches up.
    pub fn restart(&mut self, id: u32) -> Result<(), Failure> {
        self.kill(id);
        let entry = self.node_mut(id).entry.clone();
        let node = self.spawn(entry)?;
        *self.node_mut(id) = node;
        self.save()
    }

    /// Waits until the cluster serves: one node is primary, and every other live node is a
    /// backup of its view that has applied everything the primary committed.
    pub fn wait_settled(&mut self, timeout: Duration) -> Result<Settled, Failure> {
        let deadline = Instant::now() + timeout;
        loop {
            let last = match self.settled() {
                Ok(settled) => return Ok(settled),
                Err(why) => why,
            };
            let (shown, fresh) = (self.shown.clone(), self.fresh);
            for node in &mut self.nodes {
                if node.child.is_some() && !node.alive() {
                    let log = node.log_since_start();
                    return Err(Failure::Run(start_failure(
                        &node.entry,
                        &log,
                        &shown,
                        fresh,
                    )));
                }
            }
            if Instant::now() >= deadline {
                return Err(Failure::Run(format!(
                    "the cluster did not settle within {timeout:?}: {last}"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn settled(&self) -> Result<Settled, String> {
        let mut statuses = Vec::new();
        for node in self.nodes.iter().filter(|node| node.child.is_some()) {
            let status = node
                .status()
                .map_err(|err| format!("node {}: {}", node.entry.id, err.text()))?;
            statuses.push((node.entry.id, status));
        }
        let groups: std::collections::BTreeSet<u64> = statuses
            .iter()
            .flat_map(|(_, status)| status["groups"].as_array().cloned().unwrap_or_default())
            .filter_map(|group| group["group"].as_u64())
            .collect();
        if groups.is_empty() {
            return Err("no node serves in a group yet".into());
        }
        let groups: Vec<GroupSettled> = groups
            .into_iter()
            .map(|group| group_settled(&statuses, group))
            .collect::<Result<_, _>>()?;
        // The config store's leader is kept off the primary, so that the primary's death
        // needs no Raft election before its view change: until it has moved (a start-up
        // election may land on the primary), a kill would measure an election too. A lone
        // node leads and is primary both; where every voter leads a group, the leader stays.
        let primaries: Vec<u32> = groups.iter().map(|group| group.primary).collect();
        // A local cluster's voters are its three lowest node ids (the default).
        let voter_leads_none = statuses
            .iter()
            .take(3)
            .any(|(id, _)| !primaries.contains(id));
        for (id, status) in &statuses {
            match status["cluster"]["leader"].as_u64() {
                Some(leader) if primaries.contains(&(leader as u32)) && voter_leads_none => {
                    return Err(format!(
                        "node {id} sees the primary {leader} lead the config store"
                    ));
                }
                Some(_) => {}
                None => return Err(format!("node {id} knows no config store leader")),
            }
        }
        let first = groups[0];
        Ok(Settled {
            primary: first.primary,
            view: first.view,
            lsn: first.lsn,
            groups,
        })
    }
}

/// Whether `group` serves: one of its members is primary, and every other live member is a
/// backup of its view that has applied everything the primary committed.
fn group_settled(statuses: &[(u32, Value)], group: u64) -> Result<GroupSettled, String> {
    // Each member's place in the group and its role's report, as its `/status` says them.
    let members: Vec<(u32, &Value, &Value)> = statuses
        .iter()
        .filter_map(|(id, status)| {
            let place = status["cluster"]["groups"]
                .as_array()?
                .iter()
                .find(|place| place["group"].as_u64() == Some(group))?;
            let report = status["groups"]
                .as_array()?
                .iter()
                .find(|report| report["group"].as_u64() == Some(group))?;
            Some((*id, place, report))
        })
        .collect();
    let primaries: Vec<&(u32, &Value, &Value)> = members
        .iter()
        .filter(|(_, place, _)| place["role"] == "primary")
        .collect();
    let [(primary, primary_place, primary_report)] = primaries.as_slice() else {
        return Err(format!(
            "{} nodes say they are primary of group {group}",
            primaries.len()
        ));
    };
    let view = primary_place["view"].as_u64().unwrap_or(0);
    let lsn = primary_report["report"]["status"]["lsn"]
        .as_u64()
        .ok_or(format!("the primary of group {group} has no LSN yet"))?;
    for (id, place, report) in &members {
        if id == primary {
            continue;
        }
        let role = place["role"].as_str().unwrap_or("?");
        if role != "backup" {
            return Err(format!("node {id} is {role} in group {group}"));
        }
        if place["view"].as_u64() != Some(view) {
            return Err(format!(
                "node {id} is not in view {view} of group {group} yet"
            ));
        }
        let applied = report["report"]["status"]["lsn_applied"]
            .as_u64()
            .unwrap_or(0);
        if applied != lsn {
            return Err(format!(
                "node {id} applied {applied} of {lsn} in group {group}"
            ));
        }
    }
    Ok(GroupSettled {
        group: group as u32,
        primary: *primary,
        view,
        lsn,
    })
}

/// A settled cluster's first group's primary, view and LSN, and every group's.
#[derive(Clone, Debug)]
pub struct Settled {
    pub primary: u32,
    pub view: u64,
    pub lsn: u64,
    pub groups: Vec<GroupSettled>,
}

/// A settled group's primary, view and LSN.
#[derive(Clone, Copy, Debug)]
pub struct GroupSettled {
    pub group: u32,
    pub primary: u32,
    pub view: u64,
    pub lsn: u64,
}

/// A cluster directory whose `cluster.json` names a live node is in use.
fn refuse_if_running(dir: &Path) -> Result<(), Failure> {
    let Ok(file) = ClusterFile::load(dir) else {
        return Ok(());
    };
    for node in &file.nodes {
        if probe(node) == PidHolder::Node {
            return Err(Failure::Usage(format!(
                "a local cluster already runs in {} (node {} is pid {}); stop it with \
                 `tandem down --dir {}` (or Ctrl-C in the terminal of its `tandem up`), or use \
                 another --dir",
                dir.display(),
                node.id,
                node.pid,
                dir.display()
            )));
        }
    }
    Ok(())
}

/// What holds the pid `cluster.json` names for a node.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PidHolder {
    /// The node itself: `tandem node --config <the node's config>`.
    Node,
    /// No process any more (or a zombie, which has ended and only waits to be reaped).
    Gone,
    /// Another program, which took the pid after the node ended: its command line.
    Other { command: String },
}

/// Who holds `entry.pid` now, read from `/proc/PID/cmdline`.
pub fn probe(entry: &NodeEntry) -> PidHolder {
    if entry.pid == 0 {
        return PidHolder::Gone;
    }
    match read_cmdline(entry.pid) {
        // A zombie's command line is empty.
        Ok(cmdline) if cmdline.is_empty() => PidHolder::Gone,
        Ok(cmdline) if is_node_command(&cmdline, &entry.config) => PidHolder::Node,
        Ok(cmdline) => PidHolder::Other {
            command: command_text(&cmdline),
        },
        Err(_) => PidHolder::Gone,
    }
}

/// `/proc/PID/cmdline`. A zombie's is empty, and so, for a moment, may be that of a process
/// the kernel is still setting up (a command line read right after the process started was
/// once found empty, and a live process taken for gone): an empty one is read again, for a
/// few milliseconds, unless `/proc/PID/stat` says the process is a zombie.
fn read_cmdline(pid: u32) -> std::io::Result<Vec<u8>> {
    let path = format!("/proc/{pid}/cmdline");
    let mut cmdline = fs::read(&path)?;
    for _ in 0..20 {
        let zombie = fs::read_to_string(format!("/proc/{pid}/stat"))
            .map(|stat| {
                // The state follows the command name, which is in parentheses.
                stat.rsplit_once(')')
                    .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
            })
            .unwrap_or(true);
        if !cmdline.is_empty() || zombie {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(1));
        cmdline = fs::read(&path)?;
    }
    Ok(cmdline)
}

/// Whether a NUL-separated command line (as in `/proc/PID/cmdline`) runs the tandem binary as
/// `node --config CONFIG`: the check that a pid is this cluster's node and not whatever
/// process took the number since (config paths are absolute and differ per node and per
/// cluster directory).
pub fn is_node_command(cmdline: &[u8], config: &Path) -> bool {
    let own = std::env::current_exe().ok();
    is_node_command_of(cmdline, config, own.as_deref().and_then(Path::file_name))
}

/// [`is_node_command`], where the program may also be named `own_name` (the binary running
/// now, which `tandem up` started the nodes with, under whatever name it was copied as).
fn is_node_command_of(cmdline: &[u8], config: &Path, own_name: Option<&OsStr>) -> bool {
    let args: Vec<&[u8]> = cmdline
        .strip_suffix(b"\0")
        .unwrap_or(cmdline)
        .split(|&byte| byte == 0)
        .collect();
    let Some(program) = args.first() else {
        return false;
    };
    let name = Path::new(OsStr::from_bytes(program)).file_name();
    let named_tandem = name == Some(OsStr::new("tandem")) || (name.is_some() && name == own_name);
    let runs_node = args.get(1) == Some(&b"node".as_slice());
    let with_config = args
        .windows(2)
        .any(|pair| pair[0] == b"--config" && Path::new(OsStr::from_bytes(pair[1])) == config);
    named_tandem && runs_node && with_config
}

/// A command line for a message: arguments separated by spaces.
fn command_text(cmdline: &[u8]) -> String {
    let text = String::from_utf8_lossy(cmdline.strip_suffix(b"\0").unwrap_or(cmdline));
    text.replace('\0', " ")
}

/// Why a node does not answer, in words: "not running (process 1234 is gone)".
pub fn not_running_reason(entry: &NodeEntry, holder: &PidHolder) -> String {
    match holder {
        PidHolder::Gone => format!("not running (process {} is gone)", entry.pid),
        PidHolder::Other { command } => format!(
            "not running (pid {} now belongs to another program: {command})",
            entry.pid
        ),
        PidHolder::Node => format!(
            "running as process {} but not answering at http://{}/status",
            entry.pid, entry.status
        ),
    }
}

/// How long a node has after SIGTERM before SIGKILL, and after SIGKILL before giving up.
pub const STOP_GRACE: Duration = Duration::from_secs(2);

/// Stops every listed node that `probe` finds running: SIGTERM to each, then SIGKILL to those
/// still running after `STOP_GRACE`. Returns the nodes it stopped; a pid that is no node of
/// this cluster is never signalled.
pub fn stop_nodes(entries: &[NodeEntry]) -> Result<Vec<NodeEntry>, Failure> {
    let running: Vec<&NodeEntry> = entries
        .iter()
        .filter(|entry| probe(entry) == PidHolder::Node)
        .collect();
    for entry in &running {
        signal(entry, nix::sys::signal::Signal::SIGTERM)?;
    }
    if !wait_gone(&running, STOP_GRACE) {
        for entry in running
            .iter()
            .filter(|entry| probe(entry) == PidHolder::Node)
        {
            signal(entry, nix::sys::signal::Signal::SIGKILL)?;
        }
        if !wait_gone(&running, STOP_GRACE) {
            let left: Vec<String> = running
                .iter()
                .filter(|entry| probe(entry) == PidHolder::Node)
                .map(|entry| format!("node {} (pid {})", entry.id, entry.pid))
                .collect();
            return Err(Failure::Run(format!(
                "{} still running {STOP_GRACE:?} after SIGKILL",
                left.join(", ")
            )));
        }
    }
    Ok(running.into_iter().cloned().collect())
}

/// Waits until none of `entries` runs any more, at most `within`; whether they all ended.
pub fn wait_gone(entries: &[&NodeEntry], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if entries.iter().all(|entry| probe(entry) != PidHolder::Node) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Sends `signal` to a node `probe` found running. A process that ended meanwhile is not an
/// error; any other refusal is said in words (a raw errno means nothing to a user).
pub fn signal(entry: &NodeEntry, signal: nix::sys::signal::Signal) -> Result<(), Failure> {
    use nix::errno::Errno;
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(entry.pid as i32), signal) {
        Ok(()) | Err(Errno::ESRCH) => Ok(()),
        Err(Errno::EPERM) => Err(Failure::Run(format!(
            "not allowed to signal node {} (pid {}): it runs as another user; run this \
             command as that user",
            entry.id, entry.pid
        ))),
        Err(err) => Err(Failure::Run(format!(
            "cannot signal node {} (pid {}): {}",
            entry.id,
            entry.pid,
            err.desc()
        ))),
    }
}

/// Starts node `entry` again as a detached process (its own process group, no stdin, its
/// output appended to its log), from the same configuration: its memory is gone, so it
/// rejoins the cluster as a spare and catches up. Returns the child, whose pid the caller
/// writes into `cluster.json`.
pub fn spawn_detached(entry: &NodeEntry, shown: &Path) -> Result<(Child, u64), Failure> {
    let exe = std::env::current_exe()
        .map_err(|err| Failure::Run(format!("cannot find the tandem binary: {err}")))?;
    if let Some(node_dir) = entry.config.parent() {
        make_private(node_dir, &shown_path(shown, node_dir))?;
    }
    let (log, log_from) = open_log(entry, shown)?;
    let child = Command::new(exe)
        .arg("node")
        .arg("--config")
        .arg(&entry.config)
        .env_remove(REQUIREPASS_ENV)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own process group: a Ctrl-C in the terminal that ran `tandem start` does not
        // reach it.
        .process_group(0)
        .spawn()
        .map_err(|err| Failure::Run(format!("cannot start node {}: {err}", entry.id)))?;
    Ok((child, log_from))
}

/// Makes `dir` (`shown` in messages: the path under the user's `--dir`) a directory only its
/// owner may enter: created 0700 if missing, tightened if it lets its group or others in,
/// which is said on stderr, since it changes what the user had.
pub fn make_private(dir: &Path, shown: &Path) -> Result<(), Failure> {
    use tandem_runtime::files::{Made, private_dir};
    match private_dir(dir) {
        Ok(Made::Tightened { from, to }) => {
            eprintln!(
                "{} was open to other users (mode {from:04o}); tightened it to {to:04o}: it \
                 holds the cluster's data and secrets",
                shown.display()
            );
            Ok(())
        }
        Ok(Made::Shared { mode }) => {
            eprintln!(
                "{} is shared with other users (mode {mode:04o}) and left as it is; every \
                 node's own directory in it is private",
                shown.display()
            );
            Ok(())
        }
        Ok(Made::Created | Made::Kept) => Ok(()),
        Err(err) => Err(Failure::Run(format!(
            "cannot make {} a private directory: {err}",
            shown.display()
        ))),
    }
}

/// The cluster's own directory (`--dir`): made private when it is new, empty or already a
/// cluster's; one that holds other things (a project's folder given as `--dir`, say) keeps
/// its mode, since the nodes' directories in it and every file are private whatever it is.
fn make_cluster_dir(dir: &Path, shown: &Path) -> Result<(), Failure> {
    let ours = match fs::read_dir(dir) {
        Ok(mut entries) => entries.next().is_none() || dir.join(CLUSTER_FILE).is_file(),
        Err(_) => true,
    };
    if ours {
        make_private(dir, shown)
    } else {
        Ok(())
    }
}

/// `path`, which lies under the cluster's directory (absolute, as `cluster.json` holds it),
/// as the user would write it: under the `--dir` they gave (`shown`). A path elsewhere is
/// given as it is.
pub fn shown_path(shown: &Path, path: &Path) -> PathBuf {
    let Ok(absolute) = std::path::absolute(shown) else {
        return path.to_path_buf();
    };
    match path.strip_prefix(&absolute) {
        Ok(rest) if rest.as_os_str().is_empty() => shown.to_path_buf(),
        Ok(rest) => shown.join(rest),
        Err(_) => path.to_path_buf(),
    }
}

/// Opens a node's log to append, 0600 (a log an older version left open is made private),
/// and says where this start's lines begin.
fn open_log(entry: &NodeEntry, shown: &Path) -> Result<(fs::File, u64), Failure> {
    let cannot = |err: std::io::Error| {
        let path = shown_path(shown, &entry.log);
        Failure::Run(format!("cannot open {}: {err}", path.display()))
    };
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .mode(PRIVATE_FILE_MODE)
        .open(&entry.log)
        .map_err(cannot)?;
    let metadata = log.metadata().map_err(cannot)?;
    if metadata.permissions().mode() & 0o077 != 0 {
        log.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))
            .map_err(cannot)?;
    }
    Ok((log, metadata.len()))
}

/// What a log holds from byte `from` on.
pub fn log_since(path: &Path, from: u64) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let from = usize::try_from(from).unwrap_or(usize::MAX).min(bytes.len());
    String::from_utf8_lossy(&bytes[from..]).into_owned()
}

/// The password node `entry` asks for (its `requirepass`), read from its configuration.
fn node_password(entry: &NodeEntry) -> Option<String> {
    let config = NodeConfig::load(&entry.config).ok()?;
    config.requirepass.map(|secret| secret.0)
}

/// The address a node could not bind because another program holds it, if what it logged
/// says so (`… cannot bind ADDR: Address already in use …`).
pub fn port_taken(log: &str) -> Option<String> {
    log.lines().find_map(|line| {
        let rest = line.split("cannot bind ").nth(1)?;
        let (address, why) = rest.split_once(": ")?;
        why.contains("in use").then(|| address.to_owned())
    })
}

/// The lines of a node's log that say why it failed: those `tandem node` ends with
/// (`error: …`) and those logged at the error level.
fn error_lines(log: &str) -> Vec<&str> {
    log.lines()
        .filter(|line| {
            let line = line.trim_start();
            line.starts_with("error:") || line.split_whitespace().nth(1) == Some("ERROR")
        })
        .collect()
}

/// An error line as a part of another message: without the `error: ` the node began it with.
fn error_text(line: &str) -> &str {
    let line = line.trim_start();
    line.strip_prefix("error: ").unwrap_or(line)
}

/// Why node `entry` did not start, from what it logged since it was started (`log`): its
/// own error lines first, then what to do about a port another program holds (keeping the
/// cluster's data, unless the cluster is `fresh` and has none yet), then the rest of what
/// it logged. `shown` is the cluster's directory as the user gave it.
pub fn start_failure(entry: &NodeEntry, log: &str, shown: &Path, fresh: bool) -> String {
    let errors = error_lines(log);
    let mut text = match errors.as_slice() {
        [] => format!("node {} exited without saying why", entry.id),
        [only] => format!("node {} could not start: {}", entry.id, error_text(only)),
        _ => {
            let said: Vec<&str> = errors.iter().map(|line| error_text(line)).collect();
            format!(
                "node {} could not start:\n  {}",
                entry.id,
                said.join("\n  ")
            )
        }
    };
    if let Some(address) = port_taken(log) {
        let port = address.rsplit(':').next().unwrap_or(&address);
        let dir = shown.display();
        text.push_str(&format!(
            "\n{address} is taken by another program (`ss -ltnp 'sport = :{port}'` names it). "
        ));
        if fresh {
            text.push_str("Run `tandem up` again: a new cluster draws other ports.");
        } else {
            text.push_str(&format!(
                "The cluster in {dir} was made with that port: stop the other program and run \
                 `tandem up --dir {dir}` again; the cluster comes back with its data. (`--fresh` \
                 would start a new cluster on other ports and delete this one's data.)"
            ));
        }
    }
    let rest: Vec<&str> = log
        .lines()
        .filter(|line| !errors.contains(line) && !line.trim().is_empty())
        .collect();
    let log_path = shown_path(shown, &entry.log);
    if rest.is_empty() {
        text.push_str(&format!("\n(its log: {})", log_path.display()));
    } else {
        const SHOWN: usize = 15;
        let skipped = rest.len().saturating_sub(SHOWN);
        text.push_str(&format!(
            "\nwhat node {} logged before, in this start ({}{}):\n  {}",
            entry.id,
            log_path.display(),
            if skipped > 0 {
                format!(", its last {SHOWN} lines")
            } else {
                String::new()
            },
            rest[skipped..].join("\n  ")
        ));
    }
    text
}

/// Writes a file (a node's configuration, a certificate's key, `cluster.json`) readable and
/// writable by its owner only: it may hold the password clients give or the peer secret.
pub(crate) fn write_private(path: &Path, text: &str) -> Result<(), Failure> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let cannot =
        |err: std::io::Error| Failure::Run(format!("cannot write {}: {err}", path.display()));
    let mut file = fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(PRIVATE_FILE_MODE)
        .open(path)
        .map_err(cannot)?;
    // A file that existed keeps its mode through `open`: one left readable by others is made
    // private before the secret goes in.
    file.set_permissions(fs::Permissions::from_mode(PRIVATE_FILE_MODE))
        .map_err(cannot)?;
    file.write_all(text.as_bytes()).map_err(cannot)
}

/// The file of a local cluster's CA certificate, which clients trust (`redis-cli --tls
/// --cacert`).
pub const CA_FILE: &str = "tls/ca.pem";

/// The certificates of a local cluster: a CA made for it (its key is not kept: a new
/// cluster gets a new CA) and, per node, a certificate it signed for `localhost`,
/// `127.0.0.1` and `node-ID`, with its key (readable by the owner only).
pub struct Certificates {
    dir: PathBuf,
}

impl Certificates {
    pub fn make(dir: &Path, members: &[PeerConfig]) -> Result<Certificates, Failure> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer,
            KeyPair, KeyUsagePurpose,
        };
        let failed = |err: rcgen::Error| Failure::Run(format!("cannot make certificates: {err}"));
        let ca_key = KeyPair::generate().map_err(failed)?;
        let mut ca = CertificateParams::new(Vec::<String>::new()).map_err(failed)?;
        ca.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca.distinguished_name
            .push(DnType::CommonName, "tandem local cluster CA");
        ca.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        let ca_cert = ca.self_signed(&ca_key).map_err(failed)?;
        let tls_dir = dir.join("tls");
        make_private(&tls_dir, &tls_dir)?;
        write_private(&dir.join(CA_FILE), &ca_cert.pem())?;
        let issuer = Issuer::new(ca, ca_key);
        for member in members {
            let id = member.node_id;
            let mut names = vec![
                "localhost".to_owned(),
                "127.0.0.1".to_owned(),
                format!("node-{id}"),
            ];
            for address in [Some(member.address), member.resp].into_iter().flatten() {
                let ip = address.ip();
                if !ip.is_unspecified() && !ip.is_loopback() {
                    names.push(ip.to_string());
                }
            }
            let mut params = CertificateParams::new(names).map_err(failed)?;
            params
                .distinguished_name
                .push(DnType::CommonName, format!("tandem node {id}"));
            params.extended_key_usages = vec![
                ExtendedKeyUsagePurpose::ServerAuth,
                ExtendedKeyUsagePurpose::ClientAuth,
            ];
            let key = KeyPair::generate().map_err(failed)?;
            let cert = params.signed_by(&key, &issuer).map_err(failed)?;
            let node_dir = dir.join(format!("node{id}"));
            make_private(&node_dir, &node_dir)?;
            write_private(&node_dir.join("tls-cert.pem"), &cert.pem())?;
            write_private(&node_dir.join("tls-key.pem"), &key.serialize_pem())?;
        }
        Ok(Certificates {
            dir: dir.to_path_buf(),
        })
    }

    /// Node `id`'s `[tls]` table.
    pub fn node(&self, id: u32) -> tandem_runtime::config::TlsTable {
        let node_dir = self.dir.join(format!("node{id}"));
        tandem_runtime::config::TlsTable {
            cert: node_dir.join("tls-cert.pem"),
            key: node_dir.join("tls-key.pem"),
            resp: true,
            peers: true,
            native: true,
            ca: Some(self.dir.join(CA_FILE)),
        }
    }
}

/// A CA and one server certificate signed by it for `127.0.0.1` and `localhost`, made in
/// `dir` (for a peer such as a `redis-server` with TLS): where the files are.
pub fn certificates_for_one(dir: &Path) -> Result<CertificateFiles, Failure> {
    let one = PeerConfig {
        node_id: 1,
        address: "127.0.0.1:0".parse().expect("an address"),
        role: Some(Role::Primary),
        resp: None,
    };
    let made = Certificates::make(dir, &[one])?;
    let table = made.node(1);
    Ok(CertificateFiles {
        ca: dir.join(CA_FILE),
        cert: table.cert,
        key: table.key,
    })
}

/// Where [`certificates_for_one`] put its files.
#[derive(Debug)]
pub struct CertificateFiles {
    pub ca: PathBuf,
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// A new cluster's `peer_secret`: 256 bits from the operating system, in hex.
fn fresh_peer_secret() -> Result<String, Failure> {
    use ring::rand::SecureRandom;
    let mut bytes = [0u8; 32];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .map_err(|_| Failure::Run("the system's random source failed".into()))?;
    Ok(bytes.iter().map(|byte| format!("{byte:02x}")).collect())
}

/// Node `member`'s configuration in a cluster of `members`.
fn node_config(
    dir: &Path,
    options: &Options,
    member: &PeerConfig,
    members: &[PeerConfig],
    peer_secret: &str,
) -> Result<NodeConfig, Failure> {
    let mut config = NodeConfig::from_toml_str(config::EXAMPLE)
        .map_err(|err| Failure::Run(format!("the example config: {err}")))?
        .for_member(member, members);
    config.metrics_listen = Some(free_address_on(options.http_ip)?);
    config.group.db_mib = options.db_mib;
    config.group.workload = options.workload.clone();
    // A lone node has no backup to wait for: 1-safe, unless its own disk is the point.
    config.group.safety = match options.safety {
        Safety::Durable(_) => options.safety,
        _ if members.len() == 1 => Safety::OneSafe,
        _ => options.safety,
    };
    config.tuning.tick_us = options.tick_us;
    config.tuning.heartbeat_ticks = options.heartbeat_ticks;
    config.tuning.suspect_ticks = options.suspect_ticks;
    config.tuning.tail_records_max = options.tail_records_max;
    config.requirepass = options.requirepass.clone().map(config::Secret);
    config.peer_secret = Some(config::Secret(peer_secret.to_owned()));
    config.users = options.users.clone();
    let data_dir = dir.join(format!("node{}", member.node_id)).join("raft");
    // The write-ahead log beside the config store's state, not inside it.
    config.log = Some(tandem_runtime::config::LogTable {
        dir: Some(dir.join(format!("node{}", member.node_id)).join("log")),
        fsync: options.fsync,
        checkpoint_mib: options.checkpoint_mib,
        ..tandem_runtime::config::LogTable::default()
    });
    let mut cluster = ClusterTable::new(data_dir);
    cluster.groups = group_entries(options.nodes, options.groups);
    // Several groups' endpoints send a client to the others by slot.
    config.redis_cluster = options.redis_cluster || options.groups > 1;
    // The lease must run out before a silent primary is suspected.
    cluster.lease_ticks = options.lease_ticks.min(options.suspect_ticks - 1);
    cluster.collect_ticks = cluster.lease_ticks + 1;
    config.cluster = Some(cluster);
    config
        .validate()
        .map_err(|err| Failure::Usage(format!("node {}: {err}", member.node_id)))?;
    Ok(config)
}

/// The `[[cluster.groups]]` of a cluster of `nodes` nodes and `groups` groups: none for one
/// group (the node's `role` says who leads it); else groups 1 to `groups`, group G led by
/// node (G − 1) mod `nodes` + 1 and backed up by every other node, round the ring
/// (`tandem_config::place_groups`), the slots split evenly.
fn group_entries(nodes: u32, groups: u32) -> Vec<config::GroupEntry> {
    if groups <= 1 {
        return Vec::new();
    }
    let node_ids: Vec<u32> = (1..=nodes).collect();
    let group_ids: Vec<u32> = (1..=groups).collect();
    let views = tandem_config::place_groups(&node_ids, &group_ids, node_ids.len())
        .expect("every group fits on the cluster's nodes");
    views
        .into_iter()
        .map(|(id, view)| config::GroupEntry {
            id,
            members: std::iter::once(view.primary).chain(view.backups).collect(),
            safety: None,
            slots: None,
        })
        .collect()
}

/// Runs `iptables ARGS…`.
fn iptables(args: &[&str]) -> Result<(), String> {
    let status = std::process::Command::new("iptables")
        .args(args)
        .stderr(std::process::Stdio::null())
        .status();
    match status {
        Ok(status) if status.success() => Ok(()),
        _ => Err(format!(
            "`iptables {}` failed (it needs root)",
            args.join(" ")
        )),
    }
}

/// Takes a cut-off node's chain out of OUTPUT, then empties and deletes it.
fn remove_chain(chain: &str) -> Result<(), String> {
    iptables(&["-D", "OUTPUT", "-j", chain])?;
    iptables(&["-F", chain])?;
    iptables(&["-X", chain])
}

/// The local ports of the TCP sockets process `pid` holds: its sockets' inodes from
/// `/proc/PID/fd`, looked up in `/proc/net/tcp` and `tcp6`.
fn tcp_ports_of(pid: u32) -> Vec<u16> {
    let mut inodes = std::collections::BTreeSet::new();
    if let Ok(fds) = std::fs::read_dir(format!("/proc/{pid}/fd")) {
        for fd in fds.flatten() {
            let Ok(target) = std::fs::read_link(fd.path()) else {
                continue;
            };
            let target = target.to_string_lossy().into_owned();
            if let Some(inode) = target
                .strip_prefix("socket:[")
                .and_then(|rest| rest.strip_suffix(']'))
            {
                inodes.insert(inode.to_owned());
            }
        }
    }
    let mut ports = std::collections::BTreeSet::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let Ok(text) = std::fs::read_to_string(table) else {
            continue;
        };
        for line in text.lines().skip(1) {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let (Some(local), Some(inode)) = (fields.get(1), fields.get(9)) else {
                continue;
            };
            if !inodes.contains(*inode) {
                continue;
            }
            if let Some(port) = local
                .rsplit(':')
                .next()
                .and_then(|hex| u16::from_str_radix(hex, 16).ok())
            {
                ports.insert(port);
            }
        }
    }
    ports.into_iter().collect()
}

/// Where the cgroup v2 hierarchy is mounted (`/sys/fs/cgroup`, or `/sys/fs/cgroup/unified`
/// beside v1 controllers), from `/proc/self/mounts`.
fn cgroup2_root() -> Option<PathBuf> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").ok()?;
    mounts.lines().find_map(|line| {
        let mut fields = line.split_whitespace();
        let (_, path, kind) = (fields.next()?, fields.next()?, fields.next()?);
        (kind == "cgroup2").then(|| PathBuf::from(path))
    })
}

/// Why [`LocalCluster::isolate`] cannot work here, if it cannot: it tries the iptables rule
/// it would add (and removes it).
pub fn isolation_unavailable() -> Option<String> {
    let Some(root) = cgroup2_root() else {
        return Some("no cgroup v2 hierarchy is mounted".into());
    };
    let name = format!("tandem-probe-{}", std::process::id());
    let group = root.join(&name);
    if let Err(err) = std::fs::create_dir_all(&group) {
        return Some(format!(
            "cannot make a cgroup under {}: {err}",
            root.display()
        ));
    }
    let rule = |action: &str| {
        iptables(&[
            action, "OUTPUT", "-m", "cgroup", "--path", &name, "-j", "DROP",
        ])
        .is_ok()
    };
    let works = rule("-A") && rule("-D");
    let _ = std::fs::remove_dir(&group);
    (!works).then(|| "iptables cannot drop a cgroup's packets here (it needs root)".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_tandem_binary_running_this_nodes_config_is_the_node() {
        let config = Path::new("/tmp/c/.tandem/node2/node.toml");
        let node = b"/usr/local/bin/tandem\0node\0--config\0/tmp/c/.tandem/node2/node.toml\0";
        assert!(is_node_command(node, config));
        let with_stdin_tie =
            b"./target/release/tandem\0node\0--config\0/tmp/c/.tandem/node2/node.toml\0--exit-on-stdin-eof\0";
        assert!(is_node_command(with_stdin_tie, config));
        let other_node = b"tandem\0node\0--config\0/tmp/c/.tandem/node3/node.toml\0";
        assert!(!is_node_command(other_node, config));
        let other_cluster = b"tandem\0node\0--config\0/tmp/d/.tandem/node2/node.toml\0";
        assert!(!is_node_command(other_cluster, config));
        assert!(!is_node_command(b"sleep\0infinity\0", config));
        let not_tandem = b"/bin/mytandem\0node\0--config\0/tmp/c/.tandem/node2/node.toml\0";
        assert!(!is_node_command_of(not_tandem, config, None));
        let renamed = Some(OsStr::new("mytandem"));
        assert!(
            is_node_command_of(not_tandem, config, renamed),
            "the binary running now, copied under another name"
        );
        let up = b"tandem\0up\0--config\0/tmp/c/.tandem/node2/node.toml\0";
        assert!(!is_node_command(up, config));
        assert!(!is_node_command(b"", config));
    }

    #[test]
    fn a_node_that_does_not_answer_is_explained_in_words() {
        let entry = NodeEntry {
            id: 2,
            listen: "127.0.0.1:7001".parse().unwrap(),
            status: "127.0.0.1:7002".parse().unwrap(),
            resp: None,
            pid: 1234,
            config: PathBuf::from("/tmp/node2/node.toml"),
            log: PathBuf::from("/tmp/node2/node.log"),
        };
        assert_eq!(
            not_running_reason(&entry, &PidHolder::Gone),
            "not running (process 1234 is gone)"
        );
        let other = PidHolder::Other {
            command: command_text(b"sleep\0infinity\0"),
        };
        assert_eq!(
            not_running_reason(&entry, &other),
            "not running (pid 1234 now belongs to another program: sleep infinity)"
        );
    }
}
