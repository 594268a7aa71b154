//! `tandem proxy` in front of a local 3-node cluster serving the Redis model: pipelined
//! commands run exactly once and in order through a failover, with no error seen by the
//! application; reads sent to backups after `READONLY` see every acknowledged write; and the
//! proxy learns nothing wrong from a node that is gone.
//!
//! The proxy runs in process ([`tandem_proxy::Proxy`]); the nodes are processes, so a kill is
//! a real SIGKILL.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

use tandem_proxy::{Proxy, ProxyConfig};
use tandem_redis::resp::{Value, parse_reply};

/// A local cluster started with `tandem up` (default failure detection), stopped when dropped.
struct Up {
    child: Child,
    dir: PathBuf,
    /// Each node's client (stub) address, in node order.
    clients_at: Vec<SocketAddr>,
    /// Each node's RESP address (its first group's endpoint), in node order.
    resp_at: Vec<SocketAddr>,
}

impl Up {
    fn start(name: &str) -> Up {
        Up::start_with(name, &[])
    }

    /// [`Up::start`] with more flags to `tandem up`.
    fn start_with(name: &str, extra: &[&str]) -> Up {
        let dir = std::env::temp_dir().join(format!("tandem-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let stdout = std::fs::File::create(dir.join("up.out")).unwrap();
        // Its errors are kept for a failure's message (once `tandem up` ended at once, with
        // nothing on its output to say why).
        let stderr = std::fs::File::create(dir.join("up.err")).unwrap();
        let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(["up", "--workload", "redis", "--nodes", "3", "--db-mib", "8"])
            .args(extra)
            .arg("--dir")
            .arg(&dir)
            .stdin(Stdio::null())
            .stdout(stdout)
            .stderr(stderr)
            .spawn()
            .expect("tandem up starts");
        let started = Instant::now();
        loop {
            let text = std::fs::read_to_string(dir.join("up.out")).unwrap_or_default();
            // "cluster up: node N is primary …", or with groups "cluster up: G groups".
            if text.contains("cluster up: ") {
                break;
            }
            if let Some(status) = child.try_wait().unwrap() {
                let errors = std::fs::read_to_string(dir.join("up.err")).unwrap_or_default();
                panic!("tandem up ended ({status}): {text}\n{errors}");
            }
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "no cluster: {text}"
            );
            thread::sleep(Duration::from_millis(20));
        }
        let file: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(dir.join("cluster.json")).unwrap())
                .unwrap();
        let address_of = |field: &str| -> Vec<SocketAddr> {
            let nodes = file["nodes"].as_array().unwrap().iter();
            nodes
                .map(|node| node[field].as_str().unwrap().parse().unwrap())
                .collect()
        };
        Up {
            child,
            dir,
            clients_at: address_of("listen"),
            resp_at: address_of("resp"),
        }
    }

    fn tandem(&self, args: &[&str]) -> String {
        let output = Command::new(env!("CARGO_BIN_EXE_tandem"))
            .args(args)
            .arg("--dir")
            .arg(&self.dir)
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The node `tandem status` shows as primary.
    fn primary(&self) -> Option<u32> {
        self.tandem(&["status"]).lines().find_map(|line| {
            let mut words = line.split_whitespace();
            let node = words.next()?.parse().ok()?;
            (words.next()? == "primary").then_some(node)
        })
    }

    fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for Up {
    fn drop(&mut self) {
        let _ = Command::new("kill")
            .args(["-INT", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn proxy(up: &Up) -> Proxy {
    proxy_of(up.clients_at.clone())
}

fn proxy_of(cluster: Vec<SocketAddr>) -> Proxy {
    Proxy::start(ProxyConfig {
        cluster,
        listen: "127.0.0.1:0".parse().unwrap(),
        group: 0,
        deadline: Duration::from_secs(10),
        read_consistency: tandem_client::ReadConsistency::Linearizable,
        credentials: None,
        tls: None,
        requirepass: None,
        users: Default::default(),
        threads: 1,
    })
    .expect("the proxy starts")
}

/// A RESP connection that sends several commands before it reads their replies.
struct Conn {
    stream: TcpStream,
    buffer: Vec<u8>,
}

impl Conn {
    fn connect(address: SocketAddr) -> Conn {
        let stream = TcpStream::connect(address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .unwrap();
        Conn {
            stream,
            buffer: Vec::new(),
        }
    }

    fn send(&mut self, words: &[&str]) {
        let mut out = format!("*{}\r\n", words.len()).into_bytes();
        for word in words {
            out.extend_from_slice(format!("${}\r\n{word}\r\n", word.len()).as_bytes());
        }
        self.stream.write_all(&out).unwrap();
    }

    fn read(&mut self) -> Value {
        loop {
            if let Some((value, used)) = parse_reply(&self.buffer).unwrap() {
                self.buffer.drain(..used);
                return value;
            }
            let mut chunk = [0; 4096];
            let n = self
                .stream
                .read(&mut chunk)
                .expect("a reply before the timeout");
            assert!(n > 0, "the proxy closed the connection");
            self.buffer.extend_from_slice(&chunk[..n]);
        }
    }

    fn call(&mut self, words: &[&str]) -> Value {
        self.send(words);
        self.read()
    }
}

/// Commands per pipeline.
const PIPELINE: usize = 8;

/// Pipelines `INCR key` through `address` until `stop`, checking that each reply is one more
/// than the last (none lost, none doubled, none out of turn); `each_ack` runs once per
/// acknowledged increment. Returns how many were acknowledged.
fn increment_until(
    address: SocketAddr,
    key: &str,
    stop: &AtomicBool,
    mut each_ack: impl FnMut(),
) -> i64 {
    let mut conn = Conn::connect(address);
    let mut acked = 0i64;
    while !stop.load(Ordering::SeqCst) {
        for _ in 0..PIPELINE {
            conn.send(&["INCR", key]);
        }
        for _ in 0..PIPELINE {
            let reply = conn.read();
            assert_eq!(
                reply,
                Value::Integer(acked + 1),
                "{key}: a reply out of turn (lost or doubled)"
            );
            acked += 1;
            each_ack();
        }
    }
    acked
}

/// Each client pipelines `INCR` of its own counter and checks every reply is one more than
/// the last; the primary is killed midway. Every acknowledged increment must be in the
/// counter exactly once, and no client may see an error. The proxy is given one backup's
/// address only: it learns the other members from it.
#[test]
fn pipelined_commands_run_exactly_once_and_in_order_through_a_failover() {
    let up = Up::start("proxy-failover");
    let primary_first = up.primary().expect("a primary");
    let backup = up.clients_at[if primary_first == 1 { 1 } else { 0 }];
    let proxy = proxy_of(vec![backup]);
    let mut members = proxy.members();
    members.sort();
    let mut all = up.clients_at.clone();
    all.sort();
    assert_eq!(
        members, all,
        "the proxy learned every member from one backup"
    );
    let address = proxy.local_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let acked_after_kill = Arc::new(AtomicU64::new(0));
    let killed = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let stop = Arc::clone(&stop);
            let killed = Arc::clone(&killed);
            let acked_after_kill = Arc::clone(&acked_after_kill);
            thread::spawn(move || {
                let key = format!("counter:{client}");
                let acked = increment_until(address, &key, &stop, || {
                    if killed.load(Ordering::SeqCst) {
                        acked_after_kill.fetch_add(1, Ordering::Relaxed);
                    }
                });
                (key, acked)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    let primary = up.primary().expect("a primary");
    killed.store(true, Ordering::SeqCst);
    up.tandem(&["kill", &primary.to_string()]);
    thread::sleep(Duration::from_millis(1000));
    stop.store(true, Ordering::SeqCst);
    let mut check = Conn::connect(address);
    for client in clients {
        let (key, acked) = client.join().expect("a client saw a wrong reply");
        assert!(acked > 0);
        assert_eq!(
            check.call(&["GET", &key]),
            Value::Bulk(acked.to_string().into_bytes()),
            "{key}: acknowledged {acked} increments; the counter must hold exactly those"
        );
    }
    assert!(
        acked_after_kill.load(Ordering::Relaxed) > 0,
        "the clients made progress after the kill"
    );
    assert_ne!(up.primary(), Some(primary), "another node took over");
    assert_eq!(proxy.stats().errors, 0, "no command was told an error");
    let _ = up.dir();
}

/// A write acknowledged to one connection is seen by a read that another connection sends
/// to a backup (after `READONLY`) at once, pipelined or alone; writes on the read-only
/// connection still go to the primary.
#[test]
fn reads_after_readonly_go_to_backups_and_see_every_acknowledged_write() {
    let up = Up::start("proxy-reads");
    let proxy = proxy(&up);
    let mut writer = Conn::connect(proxy.local_addr());
    let mut reader = Conn::connect(proxy.local_addr());
    assert_eq!(reader.call(&["READONLY"]), Value::Simple(b"OK".to_vec()));
    for round in 0..50 {
        let value = round.to_string();
        assert_eq!(
            writer.call(&["SET", "k", &value]),
            Value::Simple(b"OK".to_vec())
        );
        reader.send(&["GET", "k"]);
        reader.send(&["STRLEN", "k"]);
        assert_eq!(reader.read(), Value::Bulk(value.clone().into_bytes()));
        assert_eq!(reader.read(), Value::Integer(value.len() as i64));
    }
    assert!(
        proxy.stats().reads_at_backups > 0,
        "backups served reads: {:?}",
        proxy.stats()
    );
    assert_eq!(reader.call(&["INCR", "n"]), Value::Integer(1));
    assert_eq!(writer.call(&["GET", "n"]), Value::Bulk(b"1".to_vec()));

    // Databases: each connection's `SELECT` goes with its calls, pipelined reads at a
    // backup and a `MULTI` block among them.
    let ok = Value::Simple(b"OK".to_vec());
    assert_eq!(writer.call(&["SELECT", "5"]), ok);
    assert_eq!(writer.call(&["SET", "k", "in-5"]), ok);
    writer.send(&["MULTI"]);
    writer.send(&["SET", "m", "in-5"]);
    writer.send(&["SELECT", "6"]);
    writer.send(&["SET", "m", "in-6"]);
    writer.send(&["EXEC"]);
    for _ in 0..4 {
        writer.read();
    }
    assert_eq!(
        writer.read(),
        Value::Array(vec![ok.clone(), ok.clone(), ok.clone()])
    );
    assert_eq!(reader.call(&["SELECT", "5"]), ok);
    reader.send(&["GET", "k"]);
    reader.send(&["GET", "m"]);
    assert_eq!(reader.read(), Value::Bulk(b"in-5".to_vec()));
    assert_eq!(reader.read(), Value::Bulk(b"in-5".to_vec()));
    assert_eq!(reader.call(&["SELECT", "6"]), ok);
    assert_eq!(reader.call(&["GET", "m"]), Value::Bulk(b"in-6".to_vec()));
    assert_eq!(writer.call(&["GET", "m"]), Value::Bulk(b"in-6".to_vec()));
    assert_eq!(reader.call(&["SELECT", "0"]), ok);
    assert_eq!(reader.call(&["GET", "k"]), Value::Bulk(b"49".to_vec()));
    assert_a_redis_port_is_refused_by_name(&up);
}

/// `tandem proxy --cluster` given a node's Redis port instead of its native one says so at
/// once (exit code 2) instead of waiting for an answer that never comes.
fn assert_a_redis_port_is_refused_by_name(up: &Up) {
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(up.dir().join("cluster.json")).unwrap())
            .unwrap();
    let resp = file["nodes"][0]["resp"].as_str().unwrap().to_owned();
    let mut child = Command::new(env!("CARGO_BIN_EXE_tandem"))
        .args(["proxy", "--cluster", &resp, "--listen", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // A bound against a hang (a proxy that took the port for a node's would run on).
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("tandem proxy --cluster {resp} (a Redis port) still runs");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    assert_eq!(status.code(), Some(2), "{stderr}");
    let expected = format!(
        "{resp} is a Redis (RESP) port; --cluster takes the nodes' native addresses: see \
         `tandem status`"
    );
    assert!(stderr.contains(&expected), "{stderr}");
}

/// An application that writes a whole long pipeline before it reads a reply (as redis-py's
/// pipeline does) gets every reply: more requests than the sockets' buffers hold, and far
/// more replies, so a proxy that stopped reading while its replies wait would wait for ever.
#[test]
fn a_pipeline_longer_than_the_socket_buffers_is_answered_whole() {
    const REQUESTS: usize = 400_000;
    let up = Up::start("proxy-pipeline");
    let proxy = proxy(&up);
    let value = "v".repeat(100);
    let mut conn = Conn::connect(proxy.local_addr());
    assert_eq!(
        conn.call(&["SET", "k", &value]),
        Value::Simple(b"OK".to_vec())
    );
    let mut writing = conn.stream.try_clone().unwrap();
    writing
        .set_write_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let requests = b"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".repeat(REQUESTS);
    let writer = thread::spawn(move || writing.write_all(&requests));
    writer
        .join()
        .unwrap()
        .expect("the proxy reads the whole pipeline before its replies are read");
    let reply = format!("${}\r\n{value}\r\n", value.len()).into_bytes();
    let mut received = conn.buffer.len();
    let mut chunk = vec![0; 1 << 20];
    while received < reply.len() * REQUESTS {
        let n = conn
            .stream
            .read(&mut chunk)
            .expect("replies before the timeout");
        assert!(n > 0, "the proxy closed the connection");
        assert!(
            chunk[..n].iter().all(|b| reply.contains(b)),
            "only GET's replies"
        );
        received += n;
    }
    assert_eq!(received, reply.len() * REQUESTS, "one reply per request");
}

/// A cluster that asks a password: the stub must prove one (no password, a wrong one, or a
/// user whose rights the native port does not serve are refused at once, and counted); a
/// proxy given the nodes' configuration proves its own and checks its applications' users
/// itself, so a user's rights hold, and its connection stays, through a failover.
#[test]
fn a_proxy_proves_its_own_password_and_keeps_users_rights_through_a_failover() {
    let up = Up::start_with(
        "proxy-auth",
        &[
            "--requirepass",
            "cluster-pw",
            "--user",
            "app >app-pw ~app:*",
        ],
    );
    let call = |credentials: Option<tandem_client::Credentials>| {
        let mut config = tandem_client::ClientConfig::new(up.clients_at.clone(), 0, 77);
        config.credentials = credentials;
        config.deadline = Duration::from_secs(5);
        let mut client = tandem_client::Client::new(config).expect("a valid config");
        let mut argv = tandem_redis::resp::Argv::new();
        argv.push(b"GET");
        argv.push(b"app:0");
        let mut args = Vec::new();
        tandem_redis::wire::CallArgs::encode(tandem_redis::resp::Proto::Resp2, &argv, &mut args);
        let get = tandem_redis::model::command_proc(tandem_redis::cmd::lookup(b"GET").unwrap().0);
        client.call(get.0, &args, None)
    };
    let credentials = |user: &str, password: &str| {
        Some(tandem_client::Credentials {
            user: user.into(),
            password: password.into(),
        })
    };
    let refused =
        |result: Result<tandem_client::Outcome, tandem_client::CallError>, says: &str| match result
        {
            Err(tandem_client::CallError::Refused { code, message }) => {
                assert_eq!(code, tandem_client::ErrorCode::Unauthorized);
                assert!(message.contains(says), "{message}");
                assert!(!message.contains("cluster-pw") && !message.contains("app-pw"));
            }
            other => panic!("expected a refusal saying {says:?}, got {other:?}"),
        };
    refused(call(None), "asks clients for a password");
    refused(call(credentials("default", "wrong")), "WRONGPASS");
    refused(call(credentials("app", "app-pw")), "restricted rights");
    let answered = call(credentials("default", "cluster-pw")).expect("the password is right");
    assert!(answered.committed());

    let node = tandem_runtime::config::NodeConfig::load(&up.dir.join("node1/node.toml"))
        .expect("the node's configuration");
    let proxy = Proxy::start(ProxyConfig {
        cluster: up.clients_at.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        group: 0,
        deadline: Duration::from_secs(10),
        read_consistency: tandem_client::ReadConsistency::Linearizable,
        credentials: credentials("default", "cluster-pw"),
        tls: None,
        requirepass: node.resp_password(),
        users: Arc::new(node.resp_users()),
        threads: 2,
    })
    .expect("the proxy starts");
    let mut app = Conn::connect(proxy.local_addr());
    assert_eq!(
        app.call(&["SET", "app:1", "x"]),
        Value::Error(b"NOAUTH Authentication required.".to_vec())
    );
    assert_eq!(
        app.call(&["AUTH", "app", "app-pw"]),
        Value::Simple(b"OK".to_vec())
    );
    let noperm = Value::Error(
        b"NOPERM this user has no permissions to access one of the keys used as arguments".to_vec(),
    );
    assert_eq!(
        app.call(&["SET", "app:1", "x"]),
        Value::Simple(b"OK".to_vec())
    );
    assert_eq!(app.call(&["SET", "other", "x"]), noperm);
    // A Redis port that asks for a password is told from a native one too.
    assert_a_redis_port_is_refused_by_name(&up);
    let primary = up.primary().expect("a primary");
    up.tandem(&["kill", &primary.to_string()]);
    // The same connection, after the failover: its writes still land, its rights still hold.
    assert_eq!(app.call(&["INCR", "app:2"]), Value::Integer(1));
    assert_eq!(app.call(&["GET", "other"]), noperm);
    assert_eq!(app.call(&["GET", "app:1"]), Value::Bulk(b"x".to_vec()));
    assert_ne!(up.primary(), Some(primary), "another node took over");
    assert_eq!(proxy.stats().errors, 0, "no command was told an error");
}

/// Through the proxy, `SCRIPT KILL` stops a running script (the node's native port answers
/// it itself, since the executor is busy) and its write is undone. The stub resends a call it
/// waited for too long; a resend queued while the script ran gets the kill's error and does
/// not start it again (the primary remembers the stopped call), so one kill ends it. The
/// client asks until the node says nothing runs; the script's client gets the kill's error.
#[test]
fn a_long_script_is_killed_through_the_proxy() {
    let up = Up::start("proxy-script");
    let proxy = proxy(&up);
    let mut writer = Conn::connect(proxy.local_addr());
    assert_eq!(
        writer.call(&["SET", "w", "0"]),
        Value::Simple(b"OK".to_vec())
    );
    writer.send(&[
        "EVAL",
        "redis.call('SET', 'w', '1') local s = string.rep('x', 1000000) \
         while true do local u = s:upper() end",
        "0",
    ]);
    let mut killer = Conn::connect(proxy.local_addr());
    // Until the script runs, `SCRIPT KILL` would wait behind it for the executor.
    thread::sleep(Duration::from_millis(300));
    let mut killed = 0;
    loop {
        match killer.call(&["SCRIPT", "KILL"]) {
            Value::Simple(ok) if ok == b"OK" => killed += 1,
            Value::Error(text) if text.starts_with(b"NOTBUSY") => break,
            other => panic!("SCRIPT KILL answered {other:?}"),
        }
        thread::sleep(Duration::from_millis(20));
    }
    assert!(killed >= 1, "the script was killed");
    let Value::Error(text) = writer.read() else {
        panic!("the killed script answers an error");
    };
    assert!(
        text.starts_with(b"ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&text)
    );
    assert_eq!(writer.call(&["GET", "w"]), Value::Bulk(b"0".to_vec()));
}

/// Blocking pops through the proxy: each waiter gets one element of the pushes (none twice,
/// none lost), a waiter blocked when the primary is killed is served on the new one without
/// an error, and a wait whose time is up answers Redis's null.
#[test]
fn blocked_pops_through_the_proxy_are_served_once_across_a_failover() {
    let up = Up::start("proxy-blocking");
    let proxy = proxy(&up);
    let address = proxy.local_addr();
    let waiter = |key: &'static str| {
        thread::spawn(move || {
            let mut conn = Conn::connect(address);
            let mut got = Vec::new();
            for _ in 0..2 {
                match conn.call(&["BLPOP", key, "0"]) {
                    Value::Array(pair) => got.push(pair[1].clone()),
                    other => panic!("BLPOP answered {other:?}"),
                }
            }
            got
        })
    };
    let waiters = [waiter("q"), waiter("q")];
    let mut pusher = Conn::connect(address);
    thread::sleep(Duration::from_millis(300));
    assert_eq!(pusher.call(&["RPUSH", "q", "a", "b"]), Value::Integer(2));
    thread::sleep(Duration::from_millis(300));
    let primary = up.primary().expect("a primary");
    up.tandem(&["kill", &primary.to_string()]);
    thread::sleep(Duration::from_millis(500));
    assert_eq!(pusher.call(&["RPUSH", "q", "c", "d"]), Value::Integer(2));
    let mut got: Vec<Value> = waiters
        .into_iter()
        .flat_map(|waiter| waiter.join().expect("a waiter saw a wrong reply"))
        .collect();
    got.sort_by_key(|value| match value {
        Value::Bulk(element) => element.clone(),
        other => panic!("an element is a bulk string, not {other:?}"),
    });
    let expected: Vec<Value> = ["a", "b", "c", "d"]
        .iter()
        .map(|element| Value::Bulk(element.as_bytes().to_vec()))
        .collect();
    assert_eq!(got, expected, "each element popped once");
    assert_eq!(pusher.call(&["EXISTS", "q"]), Value::Integer(0));
    assert_eq!(pusher.call(&["BLPOP", "q", "0.05"]), Value::NullArray);
    let timed_out = pusher.call(&["BLMOVE", "q", "d", "LEFT", "LEFT", "0.05"]);
    assert_eq!(
        timed_out,
        Value::NullArray,
        "as Redis answers a wait whose time is up"
    );
    assert_ne!(up.primary(), Some(primary), "another node took over");
    assert_eq!(proxy.stats().errors, 0, "no command was told an error");
}

/// A proxy over three groups sends each command to the group that serves its keys' slots,
/// pipelines across groups keep their order, keys of two groups get `-CROSSSLOT` (a
/// `MULTI` block's too, and nothing of it runs), and a keyless command runs on every group
/// as Redis's command tips say (`DBSIZE` sums, `KEYS` joins, `SCAN` walks the groups in
/// turn, `FLUSHALL` empties every group). Then node 1, group 1's primary, dies while
/// clients pipeline increments into every group: none sees an error, and every counter
/// holds exactly the increments acknowledged.
#[test]
fn a_proxy_over_three_groups_routes_by_slot_and_runs_keyless_commands_on_every_group() {
    let up = Up::start_with("proxy-groups", &["--groups", "3"]);
    let proxy = proxy(&up);
    assert_eq!(
        proxy.groups(),
        [1, 2, 3],
        "the proxy learned the slot table"
    );
    let address = proxy.local_addr();
    let mut conn = Conn::connect(address);
    let ok = Value::Simple(b"OK".to_vec());
    // "bar" and "b" are group 1's slots, "c" group 2's, "foo" group 3's (node g leads g).
    let keys = ["bar", "c", "foo", "b"];
    for (at, key) in keys.iter().enumerate() {
        conn.send(&["SET", key, &at.to_string()]);
        conn.send(&["GET", key]);
    }
    for (at, _) in keys.iter().enumerate() {
        assert_eq!(conn.read(), ok);
        assert_eq!(conn.read(), Value::Bulk(at.to_string().into_bytes()));
    }
    let crossed = conn.call(&["MSET", "bar", "x", "foo", "y"]);
    assert!(
        matches!(&crossed, Value::Error(text) if text.starts_with(b"CROSSSLOT ")),
        "{crossed:?}"
    );
    // Each key is in its own group: the group's endpoint on its primary's node holds it.
    for (node, group, key, value) in [(1, 1, "bar", "0"), (2, 2, "c", "1"), (3, 3, "foo", "2")] {
        let base: SocketAddr = up.resp_at[node - 1];
        let endpoint = SocketAddr::new(base.ip(), base.port() + group - 1);
        let held = Conn::connect(endpoint).call(&["GET", key]);
        assert_eq!(
            held,
            Value::Bulk(value.as_bytes().to_vec()),
            "{key} in group {group}"
        );
    }
    assert_eq!(conn.call(&["MSET", "bar", "10", "b", "13"]), ok);
    assert_eq!(conn.call(&["MULTI"]), ok);
    conn.call(&["SET", "bar", "lost"]);
    conn.call(&["SET", "foo", "lost"]);
    let exec = conn.call(&["EXEC"]);
    assert!(
        matches!(&exec, Value::Error(text) if text.starts_with(b"CROSSSLOT ")),
        "{exec:?}"
    );
    assert_eq!(conn.call(&["GET", "bar"]), Value::Bulk(b"10".to_vec()));
    assert_eq!(conn.call(&["DBSIZE"]), Value::Integer(4));
    let mut listed = bulk_strings(&conn.call(&["KEYS", "*"]));
    listed.sort();
    let mut expected: Vec<String> = keys.iter().map(|key| key.to_string()).collect();
    expected.sort();
    assert_eq!(listed, expected, "KEYS joins every group's keys");
    assert_eq!(scan_all(&mut conn), expected, "SCAN walks every group once");
    assert_eq!(conn.call(&["FLUSHALL"]), ok);
    assert_eq!(conn.call(&["DBSIZE"]), Value::Integer(0));

    let stop = Arc::new(AtomicBool::new(false));
    let clients: Vec<_> = ["{bar}", "{c}", "{foo}"]
        .into_iter()
        .map(|tag| {
            let stop = Arc::clone(&stop);
            thread::spawn(move || {
                let key = format!("{tag}:counter");
                let acked = increment_until(address, &key, &stop, || {});
                (key, acked)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(500));
    up.tandem(&["kill", "1"]);
    thread::sleep(Duration::from_millis(1500));
    stop.store(true, Ordering::SeqCst);
    for client in clients {
        let (key, acked) = client.join().expect("a client saw a wrong reply");
        assert!(acked > 0, "{key}: no increment acknowledged");
        assert_eq!(
            conn.call(&["GET", &key]),
            Value::Bulk(acked.to_string().into_bytes()),
            "{key}: acknowledged {acked} increments; the counter must hold exactly those"
        );
    }
    assert_eq!(proxy.stats().errors, 0, "no command was told an error");
}

/// The bulk strings of an array reply, as text.
fn bulk_strings(value: &Value) -> Vec<String> {
    let Value::Array(elements) = value else {
        panic!("an array: {value:?}");
    };
    elements
        .iter()
        .map(|element| match element {
            Value::Bulk(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            other => panic!("a bulk string: {other:?}"),
        })
        .collect()
}

/// Every key `SCAN` gives from cursor 0 until it says 0 again (a key per step), sorted.
fn scan_all(conn: &mut Conn) -> Vec<String> {
    let mut cursor = "0".to_owned();
    let mut found = Vec::new();
    for _ in 0..1000 {
        let reply = conn.call(&["SCAN", &cursor, "COUNT", "1"]);
        let Value::Array(parts) = &reply else {
            panic!("SCAN answers an array: {reply:?}");
        };
        let [Value::Bulk(next), keys] = parts.as_slice() else {
            panic!("SCAN answers a cursor and keys: {reply:?}");
        };
        found.extend(bulk_strings(keys));
        cursor = String::from_utf8_lossy(next).into_owned();
        if cursor == "0" {
            found.sort();
            return found;
        }
    }
    panic!("SCAN did not end within 1000 steps: {found:?}");
}
