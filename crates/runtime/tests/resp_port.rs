//! The RESP port's event loop, over real TCP on loopback: one thread serves every
//! connection, gathers their calls into one batch per pass and writes each connection's
//! replies in request order.
//!
//! Each test starts its own standalone primary (no backups, 1-safe, the Redis model in
//! 16 MiB) with a RESP port in this process. The rules under test: every connection gets its
//! replies in the order it sent its requests, however the calls of many connections
//! interleave on the executor; a WATCH is answered before the EXEC after it is decided; a
//! client that stops sending still gets its replies; a client that vanishes with calls in
//! flight disturbs no one; a protocol error closes that one connection after the replies
//! before it; a reply larger than a wire frame arrives whole.
//!
//! Every socket has a read timeout, so a node that never answers fails the test instead of
//! hanging it.

use crate::common;

use common::outward_address;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::thread;
use std::time::Duration;

use tandem_redis::model::RedisModel;
use tandem_redis::resp::{Argv, Proto};
use tandem_redis::resp::{Value, parse_reply};
use tandem_redis::wire::CallArgs;
use tandem_replication::Safety;
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{EXAMPLE, NodeConfig, Secret, Tuning};
use tandem_runtime::metrics::Metrics;
use tandem_store::DataModel;
use tandem_wire::{
    Frame, FrameBuffer, Hello, MAX_FRAME_LEN_DEFAULT, PeerKind, ReplyStatus, encode_call,
    encode_hello,
};

const READ_TIMEOUT: Duration = Duration::from_secs(10);

/// A standalone primary serving the Redis model (node 1, 1-safe, 16 MiB, in protected mode),
/// which serves its RESP port itself; it runs until dropped.
struct TestNode {
    running: RunningNode,
    /// Where its RESP port listens.
    address: SocketAddr,
    /// Where its native port listens (client stubs connect there).
    native: SocketAddr,
}

impl TestNode {
    fn metrics(&self) -> &Metrics {
        self.running.metrics()
    }
}

/// Starts a node on loopback.
fn start() -> TestNode {
    start_on("127.0.0.1:0", None)
}

/// Starts a node whose RESP port listens on `resp` and asks `requirepass`.
fn start_on(resp: &str, requirepass: Option<&str>) -> TestNode {
    start_tuned(resp, requirepass, |_| {})
}

/// Starts a node as [`start_on`] does, its configuration changed by `tune` first.
fn start_tuned(
    resp: &str,
    requirepass: Option<&str>,
    tune: impl FnOnce(&mut NodeConfig),
) -> TestNode {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let resp_listener = TcpListener::bind(resp).expect("a port");
    let address = resp_listener.local_addr().expect("bound");
    let mut config = NodeConfig::from_toml_str(EXAMPLE).expect("the example parses");
    tune(&mut config);
    config.listen = listener.local_addr().expect("bound");
    config.resp_listen = Some(address);
    config.metrics_listen = None;
    config.requirepass = requirepass.map(|password| Secret(password.to_owned()));
    config.peers = vec![];
    config.group.workload = "redis".into();
    config.group.safety = Safety::OneSafe;
    config.group.db_mib = 16;
    config.validate().expect("a standalone primary is valid");
    let model = RedisModel::new(config.group.db_mib << 20).expect("the database fits");
    let running = common::start(&config, listener, Some(resp_listener), Box::new(model));
    TestNode {
        running,
        address,
        native: config.listen,
    }
}

struct Conn {
    stream: TcpStream,
    input: Vec<u8>,
}

impl Conn {
    fn open(address: SocketAddr) -> Conn {
        let stream = TcpStream::connect(address).expect("connects");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("a timeout");
        Conn {
            stream,
            input: Vec::new(),
        }
    }

    fn send(&mut self, commands: &[&[&[u8]]]) {
        let mut out = Vec::new();
        for args in commands {
            out.extend_from_slice(format!("*{}\r\n", args.len()).as_bytes());
            for arg in *args {
                out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
                out.extend_from_slice(arg);
                out.extend_from_slice(b"\r\n");
            }
        }
        self.stream.write_all(&out).expect("sends");
    }

    fn reply(&mut self) -> Value {
        loop {
            if let Some((value, used)) = parse_reply(&self.input).expect("well-formed RESP") {
                self.input.drain(..used);
                return value;
            }
            let mut chunk = [0u8; 64 * 1024];
            let n = self
                .stream
                .read(&mut chunk)
                .expect("a reply before the timeout");
            assert!(n > 0, "the node closed the connection before replying");
            self.input.extend_from_slice(&chunk[..n]);
        }
    }

    /// Reads until the node closes the connection; returns whatever came first.
    fn rest_until_closed(&mut self) -> Vec<u8> {
        self.stream
            .read_to_end(&mut self.input)
            .expect("the node closes the connection");
        std::mem::take(&mut self.input)
    }
}

fn int(value: Value) -> i64 {
    match value {
        Value::Integer(n) => n,
        other => panic!("expected an integer, got {other:?}"),
    }
}

fn bulk(text: &str) -> Value {
    Value::Bulk(text.as_bytes().to_vec())
}

fn ok() -> Value {
    Value::Simple(b"OK".to_vec())
}

#[test]
fn each_connection_gets_its_replies_in_request_order_while_many_interleave() {
    let node = start();
    let address = node.address;
    const CONNS: usize = 12;
    const ROUNDS: usize = 40;
    const PIPELINE: usize = 25;
    let workers: Vec<_> = (0..CONNS)
        .map(|c| {
            thread::spawn(move || {
                let mut conn = Conn::open(address);
                let own = format!("own-{c}");
                let mut shared_seen = Vec::new();
                for round in 0..ROUNDS {
                    let mut commands: Vec<Vec<&[u8]>> = Vec::new();
                    for _ in 0..PIPELINE {
                        commands.push(vec![b"INCR", own.as_bytes()]);
                        commands.push(vec![b"INCR", b"shared"]);
                        commands.push(vec![b"GET", own.as_bytes()]);
                    }
                    let borrowed: Vec<&[&[u8]]> = commands.iter().map(Vec::as_slice).collect();
                    conn.send(&borrowed);
                    for i in 0..PIPELINE {
                        let expected = (round * PIPELINE + i + 1) as i64;
                        assert_eq!(int(conn.reply()), expected, "conn {c}: own counter");
                        shared_seen.push(int(conn.reply()));
                        assert_eq!(conn.reply(), bulk(&expected.to_string()), "conn {c}: GET");
                    }
                }
                shared_seen
            })
        })
        .collect();
    let mut shared: Vec<i64> = workers
        .into_iter()
        .flat_map(|worker| worker.join().expect("a worker"))
        .collect();
    shared.sort_unstable();
    let total = (CONNS * ROUNDS * PIPELINE) as i64;
    assert_eq!(
        shared,
        (1..=total).collect::<Vec<_>>(),
        "every INCR answered once"
    );
}

#[test]
fn reads_writes_and_a_watch_in_one_pipeline_are_answered_in_order() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    let mut other = Conn::open(address);
    conn.send(&[
        &[b"SET", b"k", b"v1"],
        &[b"GET", b"k"],
        &[b"SET", b"k", b"v2"],
        &[b"GET", b"k"],
        &[b"WATCH", b"k"],
        &[b"MULTI"],
        &[b"SET", b"k", b"v3"],
        &[b"EXEC"],
        &[b"GET", b"k"],
        &[b"PING"],
    ]);
    let expected = [
        ok(),
        bulk("v1"),
        ok(),
        bulk("v2"),
        ok(),
        ok(),
        Value::Simple(b"QUEUED".to_vec()),
        Value::Array(vec![ok()]),
        bulk("v3"),
        Value::Simple(b"PONG".to_vec()),
    ];
    for want in expected {
        assert_eq!(conn.reply(), want);
    }
    // A write after the WATCH in the same pipeline (the connection's own, as in Redis)
    // aborts the EXEC: the WATCH's versions are in before anything after it is handled.
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"WATCH", b"k"],
        &[b"SET", b"k", b"changed"],
        &[b"MULTI"],
        &[b"SET", b"k", b"lost"],
        &[b"EXEC"],
        &[b"GET", b"k"],
    ]);
    for want in [
        ok(),
        ok(),
        ok(),
        Value::Simple(b"QUEUED".to_vec()),
        Value::NullArray,
        bulk("changed"),
    ] {
        assert_eq!(conn.reply(), want);
    }
    // A write by another connection between WATCH and EXEC aborts the EXEC.
    conn.send(&[&[b"WATCH", b"k"]]);
    assert_eq!(conn.reply(), ok());
    other.send(&[&[b"SET", b"k", b"theirs"]]);
    assert_eq!(other.reply(), ok());
    conn.send(&[
        &[b"MULTI"],
        &[b"SET", b"k", b"mine"],
        &[b"EXEC"],
        &[b"GET", b"k"],
    ]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::NullArray, "the EXEC is aborted");
    assert_eq!(conn.reply(), bulk("theirs"));
}

#[test]
fn what_a_block_sets_holds_for_the_commands_pipelined_after_it() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"MULTI"],
        &[b"CLIENT", b"SETNAME", b"first"],
        &[b"INCR", b"n"],
        &[b"EXEC"],
        &[b"CLIENT", b"GETNAME"],
        &[b"MULTI"],
        &[b"CLIENT", b"SETNAME", b"second"],
        &[b"INCR", b"n"],
        &[b"EXEC"],
        &[b"CLIENT", b"GETNAME"],
    ]);
    let queued = || Value::Simple(b"QUEUED".to_vec());
    for want in [
        ok(),
        queued(),
        queued(),
        Value::Array(vec![ok(), Value::Integer(1)]),
        bulk("first"),
        ok(),
        queued(),
        queued(),
        Value::Array(vec![ok(), Value::Integer(2)]),
        bulk("second"),
    ] {
        assert_eq!(conn.reply(), want);
    }
}

#[test]
fn a_client_that_stops_sending_still_gets_every_reply() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"SET", b"half", b"1"],
        &[b"INCR", b"half"],
        &[b"GET", b"half"],
    ]);
    conn.stream.shutdown(Shutdown::Write).expect("half-closes");
    assert_eq!(
        conn.rest_until_closed(),
        b"+OK\r\n:2\r\n$1\r\n2\r\n".to_vec(),
        "every reply, then the node closes"
    );
}

/// The node stops reading a socket after a read that gave less than it asked for (the
/// socket is empty then); a close that comes later, on its own, must still be seen.
#[test]
fn a_close_that_follows_the_requests_later_is_still_seen() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[&[b"SET", b"late", b"1"], &[b"GET", b"late"]]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), bulk("1"));
    // A request in two pieces, the second well after the first was read.
    conn.stream.write_all(b"*2\r\n$3\r\nGET").expect("sends");
    thread::sleep(Duration::from_millis(20));
    conn.stream.write_all(b"\r\n$4\r\nlate\r\n").expect("sends");
    assert_eq!(conn.reply(), bulk("1"));
    thread::sleep(Duration::from_millis(20));
    conn.stream.shutdown(Shutdown::Write).expect("half-closes");
    assert_eq!(
        conn.rest_until_closed(),
        Vec::<u8>::new(),
        "the node closes"
    );
    // Requests and the close often arrive in one event: the read that gets the requests is
    // short, and the close behind them must be read all the same.
    for round in 0..40 {
        let mut conn = Conn::open(address);
        conn.send(&[&[b"GET", b"late"]]);
        conn.stream.shutdown(Shutdown::Write).expect("half-closes");
        assert_eq!(
            conn.rest_until_closed(),
            b"$1\r\n1\r\n".to_vec(),
            "round {round}: the reply, then the node closes"
        );
    }
}

#[test]
fn a_client_that_vanishes_with_calls_in_flight_disturbs_no_one() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    for _ in 0..20 {
        let mut gone = Conn::open(address);
        let incr: &[&[u8]] = &[b"INCR", b"c"];
        let commands: Vec<&[&[u8]]> = (0..500).map(|_| incr).collect();
        gone.send(&commands);
        drop(gone);
    }
    let mut conn = Conn::open(address);
    conn.send(&[&[b"INCR", b"c"]]);
    let after = int(conn.reply());
    assert!(
        (1..=10_001).contains(&after),
        "the counter holds what committed: {after}"
    );
    conn.send(&[&[b"GET", b"c"]]);
    assert_eq!(conn.reply(), bulk(&after.to_string()));
    // The vanished connections are counted closed (the one open remains).
    for _ in 0..100 {
        if metrics.client_connections.get() == 1 {
            return;
        }
        thread::sleep(Duration::from_millis(20));
    }
    panic!(
        "connections still counted: {}",
        metrics.client_connections.get()
    );
}

#[test]
fn a_protocol_error_closes_that_connection_after_the_replies_before_it() {
    let node = start();
    let address = node.address;
    let mut bystander = Conn::open(address);
    let mut conn = Conn::open(address);
    conn.stream
        .write_all(b"SET p 1\r\nINCR p\r\n*2\r\n$3\r\nGET\r\n$-5\r\nPING\r\n")
        .expect("sends");
    assert_eq!(
        conn.rest_until_closed(),
        b"+OK\r\n:2\r\n-ERR Protocol error: invalid bulk length\r\n".to_vec()
    );
    bystander.send(&[&[b"GET", b"p"]]);
    assert_eq!(bystander.reply(), bulk("2"));
}

#[test]
fn a_long_reply_arrives_whole_and_one_past_the_limit_is_refused_clearly() {
    let node = start_tuned("127.0.0.1:0", None, |config| {
        config.tuning.max_frame_len = 4 << 20;
    });
    let address = node.address;
    let mut conn = Conn::open(address);
    // Far more than one socket write takes: the rest goes out as the client reads.
    let value: Vec<u8> = (0..1 << 20).map(|i: u32| b'a' + (i % 26) as u8).collect();
    conn.send(&[&[b"SET", b"big", &value], &[b"GET", b"big"]]);
    assert_eq!(conn.reply(), ok());
    let got = conn.reply();
    assert!(
        got == Value::Bulk(value.clone()),
        "the 1 MiB value came back changed"
    );
    // A reply must fit the frame a deduplicated call's reply travels in
    // (`tuning.max_frame_len`, 4 MiB here): longer ones are refused, and the connection
    // stays usable.
    let longer = vec![b'x'; 3 << 20];
    conn.send(&[
        &[b"SET", b"bigger", &longer],
        &[b"GET", b"bigger"],
        &[b"STRLEN", b"bigger"],
    ]);
    assert_eq!(conn.reply(), ok());
    match conn.reply() {
        Value::Error(text) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            assert!(
                text.starts_with("ERR the call's") && text.contains("tuning.max_frame_len"),
                "{text}"
            );
        }
        other => panic!(
            "expected the limit's error, got a {}-byte reply",
            format!("{other:?}").len()
        ),
    }
    assert_eq!(int(conn.reply()), longer.len() as i64);
}

/// Protected mode: a node that asks no password serves loopback clients only, and tells any
/// other why it closes the connection; once a password is asked, anyone may try it.
#[test]
fn without_a_password_only_loopback_clients_are_served() {
    let Some(outward) = outward_address() else {
        eprintln!("skipped: this machine has no address but loopback to connect from");
        return;
    };
    let open_node = start_on("0.0.0.0:0", None);
    let open = open_node.address;
    let mut local = Conn::open(SocketAddr::from(([127, 0, 0, 1], open.port())));
    local.send(&[&[b"PING"]]);
    assert_eq!(local.reply(), Value::Simple(b"PONG".to_vec()));
    let mut remote = Conn::open(SocketAddr::new(outward, open.port()));
    remote.send(&[&[b"PING"]]);
    match remote.reply() {
        Value::Error(text) => {
            let text = String::from_utf8_lossy(&text).into_owned();
            assert!(text.starts_with("DENIED "), "{text}");
            assert!(text.contains("requirepass"), "{text}");
        }
        other => panic!("served from {outward}: {other:?}"),
    }
    let locked_node = start_on("0.0.0.0:0", Some("s3cret"));
    let locked = locked_node.address;
    let mut remote = Conn::open(SocketAddr::new(outward, locked.port()));
    remote.send(&[&[b"PING"], &[b"AUTH", b"s3cret"], &[b"PING"]]);
    assert_eq!(
        remote.reply(),
        Value::Error(tandem_redis::session::NOAUTH.as_bytes().to_vec())
    );
    assert_eq!(remote.reply(), Value::Simple(b"OK".to_vec()));
    assert_eq!(remote.reply(), Value::Simple(b"PONG".to_vec()));
}

/// What `tandem_connections_refused_total` says for `reason`.
fn refused(metrics: &Metrics, reason: &str) -> u64 {
    let label = tandem_runtime::metrics::ReasonLabel {
        reason: reason.to_owned(),
    };
    metrics.connections_refused.get_or_create(&label).get()
}

/// Reads until the node ends the connection (a close, or a reset if it closed with requests
/// of ours unread); returns how many bytes came.
fn drain_until_closed(stream: &mut TcpStream) -> usize {
    let mut total = 0;
    let mut chunk = vec![0u8; 1 << 16];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => return total,
            Ok(n) => total += n,
            Err(err) if err.kind() == std::io::ErrorKind::ConnectionReset => return total,
            Err(err) => panic!("the node neither replied nor closed: {err}"),
        }
    }
}

/// A web page can make a browser send an HTTP request to a local Redis port: its `POST` or
/// `Host:` line closes the connection before anything in the request runs, as in Redis.
#[test]
fn an_http_request_closes_the_connection_and_runs_nothing() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut bystander = Conn::open(address);
    for request in [
        &b"POST / HTTP/1.1\r\nHost: localhost\r\nContent-Length: 13\r\n\r\nSET hacked 1\r\n"[..],
        b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\nSET hacked 1\r\n",
    ] {
        let mut attacker = Conn::open(address);
        attacker.stream.write_all(request).expect("sends");
        let answered = attacker.rest_until_closed();
        // `GET / HTTP/1.1` is a GET with too many arguments: refused, then `Host:` closes.
        assert!(
            answered.is_empty() || answered.starts_with(b"-ERR wrong number of arguments"),
            "{}",
            String::from_utf8_lossy(&answered)
        );
    }
    bystander.send(&[&[b"EXISTS", b"hacked"]]);
    assert_eq!(int(bystander.reply()), 0, "nothing after the line ran");
    assert_eq!(refused(metrics, "cross_protocol"), 2);
}

/// Redis's limits before `AUTH`: a large bulk or a long multibulk is refused and the
/// connection closed before the node buffers it.
#[test]
fn before_auth_a_large_request_is_refused_before_it_is_buffered() {
    let node = start_on("127.0.0.1:0", Some("s3cret"));
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.stream
        .write_all(b"*2\r\n$4\r\nAUTH\r\n$536870912\r\n")
        .expect("sends");
    assert_eq!(
        conn.rest_until_closed(),
        b"-ERR Protocol error: unauthenticated bulk length\r\n".to_vec()
    );
    let mut conn = Conn::open(address);
    conn.stream.write_all(b"*11\r\n").expect("sends");
    assert_eq!(
        conn.rest_until_closed(),
        b"-ERR Protocol error: unauthenticated multibulk length\r\n".to_vec()
    );
    // Once authenticated, the same requests are the usual sizes.
    let mut conn = Conn::open(address);
    let value = vec![b'v'; 100_000];
    conn.send(&[
        &[b"AUTH", b"s3cret"],
        &[b"SET", b"k", &value],
        &[b"STRLEN", b"k"],
    ]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), ok());
    assert_eq!(int(conn.reply()), 100_000);
}

#[test]
fn past_maxclients_a_client_is_told_and_the_others_are_served() {
    let node = start_tuned("127.0.0.1:0", None, |config| config.tuning.maxclients = 2);
    let (address, metrics) = (node.address, node.metrics());
    let mut served: Vec<Conn> = (0..2).map(|_| Conn::open(address)).collect();
    for conn in &mut served {
        conn.send(&[&[b"PING"]]);
        assert_eq!(conn.reply(), Value::Simple(b"PONG".to_vec()));
    }
    let mut third = Conn::open(address);
    assert_eq!(
        third.rest_until_closed(),
        b"-ERR max number of clients reached\r\n".to_vec()
    );
    assert_eq!(refused(metrics, "maxclients"), 1);
    for conn in &mut served {
        conn.send(&[&[b"PING"]]);
        assert_eq!(conn.reply(), Value::Simple(b"PONG".to_vec()));
    }
    // Once one leaves, a new client is served (when the node has seen the close).
    drop(served.pop());
    for _ in 0..500 {
        if metrics.client_connections.get() < 2 {
            let mut next = Conn::open(address);
            next.send(&[&[b"PING"]]);
            assert_eq!(next.reply(), Value::Simple(b"PONG".to_vec()));
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("the closed connection was never counted out");
}

/// A client that pipelines reads of a large value and never reads the replies is closed
/// once the replies it left pass the output buffer limit; the node does not grow without
/// bound, and other clients are served meanwhile.
#[test]
fn a_client_that_leaves_large_replies_unread_is_closed_and_others_are_served() {
    // (tuning.output_buffer_mib, tuning.output_buffers_total_mib): first one connection's
    // limit, then only the limit on all of them together (0: no limit).
    for limits in [(1, Tuning::default().output_buffers_total_mib), (0, 1)] {
        let node = start_tuned("127.0.0.1:0", None, |config| {
            (
                config.tuning.output_buffer_mib,
                config.tuning.output_buffers_total_mib,
            ) = limits;
        });
        let (address, metrics) = (node.address, node.metrics());
        let mut bystander = Conn::open(address);
        let value = vec![b'v'; 512 << 10];
        bystander.send(&[&[b"SET", b"big", &value]]);
        assert_eq!(bystander.reply(), ok());
        let mut greedy = TcpStream::connect(address).expect("connects");
        greedy
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("a timeout");
        // 200 replies of 512 KiB: 100 MiB if the node kept them all.
        let mut pipeline = Vec::new();
        for _ in 0..200 {
            pipeline.extend_from_slice(b"*2\r\n$3\r\nGET\r\n$3\r\nbig\r\n");
        }
        greedy.write_all(&pipeline).expect("sends");
        thread::sleep(Duration::from_millis(200));
        let came = drain_until_closed(&mut greedy);
        assert!(
            came < 200 * value.len(),
            "the node sent every reply ({came} bytes) instead of closing"
        );
        assert_eq!(refused(metrics, "output_buffer"), 1, "{limits:?}");
        bystander.send(&[&[b"STRLEN", b"big"]]);
        assert_eq!(int(bystander.reply()), value.len() as i64);
    }
}

/// A native client's handshake that waits for its password's proof waits in the gate, not
/// on a thread of its own: clients challenged that never answer add no thread, and clients
/// that answer meanwhile are welcomed or refused as their proof says.
#[test]
fn native_clients_silent_after_the_challenge_hold_no_thread() {
    const SILENT: usize = 128;
    let node = start_on("127.0.0.1:0", Some("s3cret"));
    let before = common::threads_now();
    let challenged = |id: u64| -> (TcpStream, FrameBuffer, [u8; tandem_wire::NONCE_LEN]) {
        let mut stream = TcpStream::connect(node.native).expect("the node accepts");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        let mut hello = Vec::new();
        encode_hello(&mut hello, &Hello::new(PeerKind::Client, id, 0));
        stream.write_all(&hello).unwrap();
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        let Some(Frame::Auth(challenge)) = next_frame(&mut stream, &mut buffer) else {
            panic!("a challenge")
        };
        let nonce = challenge.nonce;
        (stream, buffer, nonce)
    };
    let silent: Vec<_> = (0..SILENT as u64).map(|id| challenged(100 + id)).collect();
    let grown = common::threads_now().saturating_sub(before);
    // Other tests of this binary start nodes alongside; a thread per handshake would be
    // 128 more.
    assert!(
        grown < SILENT / 4,
        "{grown} more threads with {} handshakes waiting for a proof",
        silent.len()
    );
    for (password, welcomed) in [("s3cret", true), ("wrong", false)] {
        let id = if welcomed { 7 } else { 8 };
        let (mut stream, mut buffer, nonce) = challenged(id);
        let hello = Hello::new(PeerKind::Client, id, 0);
        let proof = tandem_wire::client_proof(password.as_bytes(), &hello, &nonce);
        let mut bytes = Vec::new();
        tandem_wire::encode_client_proof(&mut bytes, "default", &proof);
        stream.write_all(&bytes).unwrap();
        match next_frame(&mut stream, &mut buffer) {
            Some(Frame::Welcome(_)) if welcomed => {}
            Some(Frame::Error(err)) if !welcomed => {
                assert!(err.message.contains("WRONGPASS"), "{}", err.message);
            }
            other => panic!("{password}: {other:?}"),
        }
    }
}

/// The next frame `stream` sends, if any, re-decoded so that it outlives `buffer`.
fn next_frame(stream: &mut TcpStream, buffer: &mut FrameBuffer) -> Option<Frame<'static>> {
    loop {
        if let Some(frame) = buffer.next_frame().expect("well-formed frames") {
            let mut bytes = Vec::new();
            frame.encode(&mut bytes);
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            let decoded = tandem_wire::decode_frame(bytes, MAX_FRAME_LEN_DEFAULT);
            return Some(decoded.unwrap().unwrap().0);
        }
        let n = stream.read(buffer.spare()).expect("a frame in time");
        if n == 0 {
            return None;
        }
        buffer.filled(n);
    }
}

/// A wrong password on the RESP port counts in `tandem_auth_failures_total{port="resp"}`.
#[test]
fn a_wrong_password_counts_as_a_failed_authentication() {
    let node = start_on("127.0.0.1:0", Some("s3cret"));
    let (address, metrics) = (node.address, node.metrics());
    let resp_failures = |metrics: &Metrics| -> u64 {
        metrics
            .encode()
            .lines()
            .find(|line| {
                line.starts_with("tandem_auth_failures_total") && line.contains("\"resp\"")
            })
            .and_then(|line| line.rsplit(' ').next()?.parse().ok())
            .unwrap_or(0)
    };
    assert_eq!(resp_failures(metrics), 0);
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"AUTH", b"wrong"],
        &[b"AUTH", b"s3cret"],
        &[b"AUTH", b"nope"],
    ]);
    for _ in 0..3 {
        conn.reply();
    }
    assert_eq!(resp_failures(metrics), 2);
}

/// Waits until the node's script has run past the busy threshold: the RESP port then
/// answers a `PING` of a connection that waits for nothing `-BUSY`, as Redis does.
fn wait_until_busy(address: SocketAddr) {
    let mut probe = Conn::open(address);
    let busy = Value::Error(tandem_redis::session::BUSY.as_bytes().to_vec());
    loop {
        probe.send(&[&[b"PING"]]);
        if probe.reply() == busy {
            return;
        }
        thread::sleep(Duration::from_millis(5));
    }
}

#[test]
fn a_busy_script_gets_others_busy_and_script_kill_stops_it_and_undoes_its_writes() {
    let node = start_tuned("127.0.0.1:0", None, |config| {
        config.tuning.busy_reply_threshold_ms = 100;
    });
    let address = node.address;
    let mut writer = Conn::open(address);
    writer.send(&[&[b"SET", b"w", b"0"]]);
    assert_eq!(writer.reply(), ok());
    // C calls on 100 KB: it would run for days before its instruction budget ran out.
    let script: &[u8] = b"redis.call('SET', 'w', '1') local s = string.rep('x', 100000) \
        while true do local u = s:upper() end";
    writer.send(&[&[b"EVAL", script, b"0"], &[b"GET", b"w"]]);
    wait_until_busy(address);

    let mut other = Conn::open(address);
    other.send(&[
        &[b"GET", b"w"],
        &[b"PING"],
        &[b"MULTI"],
        &[b"SET", b"x", b"1"],
    ]);
    let busy = Value::Error(tandem_redis::session::BUSY.as_bytes().to_vec());
    assert_eq!(other.reply(), busy);
    assert_eq!(other.reply(), busy);
    assert_eq!(
        other.reply(),
        ok(),
        "MULTI runs while a script is busy, as in Redis"
    );
    assert_eq!(other.reply(), busy);
    // EXEC refused while busy discards the block, as Redis's rejectCommand: the connection
    // is out of MULTI (its PING is refused as busy, not queued).
    other.send(&[&[b"EXEC"], &[b"PING"]]);
    let execabort = format!(
        "EXECABORT Transaction discarded because of: {}",
        tandem_redis::session::BUSY
    );
    assert_eq!(other.reply(), Value::Error(execabort.into_bytes()));
    assert_eq!(
        other.reply(),
        busy,
        "out of MULTI: PING is answered, not queued"
    );

    let mut killer = Conn::open(address);
    killer.send(&[&[b"SCRIPT", b"KILL"]]);
    assert_eq!(killer.reply(), ok());
    let Value::Error(text) = writer.reply() else {
        panic!("the killed script answers an error");
    };
    assert!(
        text.starts_with(b"ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&text)
    );
    // The writer's pipelined GET waited behind its script, and sees the write undone.
    assert_eq!(writer.reply(), bulk("0"));
    killer.send(&[&[b"SCRIPT", b"KILL"], &[b"GET", b"w"]]);
    assert_eq!(
        killer.reply(),
        Value::Error(b"NOTBUSY No scripts in execution right now.".to_vec())
    );
    assert_eq!(killer.reply(), bulk("0"));
}

/// `CONFIG SET busy-reply-threshold` gives the database a threshold of its own, which the
/// node's next script runs under instead of its configuration's.
#[test]
fn the_databases_busy_threshold_holds_over_the_nodes() {
    let node = start_tuned("127.0.0.1:0", None, |config| {
        // Far beyond the test: only the database's threshold can make the node busy.
        config.tuning.busy_reply_threshold_ms = 3_600_000;
    });
    let address = node.address;
    let mut writer = Conn::open(address);
    writer.send(&[&[b"CONFIG", b"SET", b"lua-time-limit", b"50"]]);
    assert_eq!(writer.reply(), ok());
    writer.send(&[&[b"CONFIG", b"GET", b"busy-reply-threshold"]]);
    assert_eq!(
        writer.reply(),
        Value::Array(vec![bulk("busy-reply-threshold"), bulk("50")])
    );
    let script: &[u8] = b"local s = string.rep('x', 100000) while true do local u = s:upper() end";
    writer.send(&[&[b"EVAL", script, b"0"]]);
    wait_until_busy(address);
    let mut killer = Conn::open(address);
    killer.send(&[&[b"SCRIPT", b"KILL"]]);
    assert_eq!(killer.reply(), ok());
    assert!(
        matches!(writer.reply(), Value::Error(_)),
        "the killed script fails"
    );
}

/// A client stub's connection to the native port, past the handshake: it sends Redis commands
/// as calls under its own (client id, seq), as `tandem proxy` does.
struct Stub {
    stream: TcpStream,
    buffer: FrameBuffer,
}

impl Stub {
    fn welcomed(address: SocketAddr, client_id: u64) -> Stub {
        let stream = TcpStream::connect(address).expect("connects");
        stream
            .set_read_timeout(Some(READ_TIMEOUT))
            .expect("a timeout");
        let mut stub = Stub {
            stream,
            buffer: FrameBuffer::new(MAX_FRAME_LEN_DEFAULT),
        };
        let mut hello = Vec::new();
        encode_hello(&mut hello, &Hello::new(PeerKind::Client, client_id, 0));
        stub.stream.write_all(&hello).expect("sends");
        match stub.next() {
            (None, _) => {}
            other => panic!("expected a Welcome, got {other:?}"),
        }
        stub
    }

    /// Sends `command` as call `seq`.
    fn call(&mut self, seq: u64, command: &[&[u8]]) {
        let model = RedisModel::new(1 << 20).expect("fits");
        let name = String::from_utf8_lossy(command[0]).to_lowercase();
        let proc_id = model.lookup(&name).expect("a data command");
        let mut argv = Argv::new();
        for arg in command {
            argv.push(arg);
        }
        let mut args = Vec::new();
        CallArgs::encode(Proto::Resp2, &argv, &mut args);
        let mut frame = Vec::new();
        encode_call(&mut frame, seq, proc_id.0, None, &args);
        self.stream.write_all(&frame).expect("sends");
    }

    /// The next frame: `(None, _)` for a Welcome, else the reply's seq and its status and
    /// body. Panics on anything else, or on nothing within the read timeout.
    fn next(&mut self) -> (Option<(u64, ReplyStatus)>, Vec<u8>) {
        loop {
            match self.buffer.next_frame().expect("well-formed frames") {
                Some(Frame::Welcome(_)) => return (None, Vec::new()),
                Some(Frame::Reply(reply)) => {
                    return (Some((reply.seq, reply.status)), reply.body.to_vec());
                }
                Some(other) => panic!("a primary sends a client no {other:?}"),
                None => {}
            }
            let n = self
                .stream
                .read(self.buffer.spare())
                .expect("an answer within the read timeout");
            assert!(n > 0, "the node closed the connection");
            self.buffer.filled(n);
        }
    }
}

/// A stub resends a call it timed out on, and a long script outlasts its timeouts: the
/// resends wait behind the script. When the script is killed, each resend is answered with
/// the same failure; none runs the script again (which would need killing again, and here
/// would never answer).
#[test]
fn resends_of_a_killed_script_get_its_failure_and_do_not_run_it_again() {
    let node = start_tuned("127.0.0.1:0", None, |config| {
        config.tuning.busy_reply_threshold_ms = 100;
        config.tuning.script_time_limit_ms = 0;
    });
    let (address, native) = (node.address, node.native);
    let script: &[u8] = b"redis.call('SET', 'w', '1') while true do end";
    let mut first = Stub::welcomed(native, 77);
    first.call(1, &[b"EVAL", script, b"0"]);
    wait_until_busy(address);
    // Two resends of the same call, on connections of their own, as a stub's retries are.
    let mut resends: Vec<Stub> = (0..2).map(|_| Stub::welcomed(native, 77)).collect();
    for stub in &mut resends {
        stub.call(1, &[b"EVAL", script, b"0"]);
    }
    let mut killer = Conn::open(address);
    killer.send(&[&[b"SCRIPT", b"KILL"]]);
    assert_eq!(killer.reply(), ok());
    let (answer, killed) = first.next();
    assert_eq!(answer, Some((1, ReplyStatus::RolledBack)));
    assert!(
        killed.starts_with(b"ERR Script killed by user with SCRIPT KILL..."),
        "{}",
        String::from_utf8_lossy(&killed)
    );
    for stub in &mut resends {
        let (answer, body) = stub.next();
        assert_eq!(answer, Some((1, ReplyStatus::RolledBack)));
        assert_eq!(
            String::from_utf8_lossy(&body),
            String::from_utf8_lossy(&killed),
            "the resend gets the kill's failure, not a run of its own"
        );
    }
    // No script runs: the node serves its RESP port between scripts, or while one is past
    // its busy threshold (then with `-BUSY`), so a script run again by a resend would hold
    // this PING until it answered `-BUSY`.
    let mut probe = Conn::open(address);
    probe.send(&[&[b"PING"]]);
    assert_eq!(probe.reply(), Value::Simple(b"PONG".to_vec()));
    // The client's next call runs as any other.
    first.call(2, &[b"EVAL", b"return redis.call('GET', 'w')", b"0"]);
    assert_eq!(
        first.next(),
        (Some((2, ReplyStatus::Committed)), b"$-1\r\n".to_vec())
    );
}

/// Waits until `count` connections are blocked, as `INFO`'s `blocked_clients` counts them.
fn wait_blocked(metrics: &Metrics, count: i64) {
    for _ in 0..500 {
        if metrics.blocked_clients.get() == count {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!(
        "{} blocked connections, not {count}",
        metrics.blocked_clients.get()
    );
}

#[test]
fn blocked_pops_wait_for_the_pushes_that_serve_them_first_blocked_first_served() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut waiters: Vec<Conn> = (0..3).map(|_| Conn::open(address)).collect();
    for (i, waiter) in waiters.iter_mut().enumerate() {
        waiter.send(&[&[b"BLPOP", b"none", b"q", b"0"], &[b"PING"]]);
        wait_blocked(metrics, i as i64 + 1);
    }
    let mut pusher = Conn::open(address);
    pusher.send(&[&[b"RPUSH", b"q", b"a", b"b"]]);
    assert_eq!(pusher.reply(), Value::Integer(2));
    for (waiter, element) in waiters.iter_mut().zip(["a", "b"]) {
        assert_eq!(waiter.reply(), Value::Array(vec![bulk("q"), bulk(element)]));
        assert_eq!(waiter.reply(), Value::Simple(b"PONG".to_vec()));
    }
    wait_blocked(metrics, 1);
    // A write that serves no one wakes the last waiter, which waits on; its PING waits too.
    pusher.send(&[&[b"SET", b"other", b"1"], &[b"RPUSH", b"q", b"c"]]);
    assert_eq!(pusher.reply(), ok());
    assert_eq!(pusher.reply(), Value::Integer(1));
    let last = &mut waiters[2];
    assert_eq!(last.reply(), Value::Array(vec![bulk("q"), bulk("c")]));
    assert_eq!(last.reply(), Value::Simple(b"PONG".to_vec()));
    wait_blocked(metrics, 0);
    pusher.send(&[&[b"EXISTS", b"q"]]);
    assert_eq!(pusher.reply(), Value::Integer(0), "every element went once");
}

#[test]
fn a_move_that_serves_one_waiter_serves_the_next_in_the_chain() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut last = Conn::open(address);
    last.send(&[&[b"BZPOPMIN", b"never", b"0"], &[b"BLPOP", b"target", b"0"]]);
    wait_blocked(metrics, 1);
    let mut mover = Conn::open(address);
    mover.send(&[&[b"BLMOVE", b"source", b"target", b"LEFT", b"RIGHT", b"0"]]);
    wait_blocked(metrics, 2);
    let mut pusher = Conn::open(address);
    pusher.send(&[
        &[b"ZADD", b"never", b"5", b"m"],
        &[b"LPUSH", b"source", b"x"],
    ]);
    assert_eq!(pusher.reply(), Value::Integer(1));
    assert_eq!(pusher.reply(), Value::Integer(1));
    assert_eq!(
        last.reply(),
        Value::Array(vec![bulk("never"), bulk("m"), bulk("5")])
    );
    assert_eq!(mover.reply(), bulk("x"));
    assert_eq!(last.reply(), Value::Array(vec![bulk("target"), bulk("x")]));
    wait_blocked(metrics, 0);
}

#[test]
fn a_wait_ends_with_redis_null_when_its_time_is_up() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut conn = Conn::open(address);
    conn.send(&[&[b"BLPOP", b"q", b"0.5"]]);
    wait_blocked(metrics, 1);
    assert_eq!(conn.reply(), Value::NullArray, "after it waited");
    // Redis answers every wait whose time is up with a null array, BLMOVE's too.
    conn.send(&[&[b"BLMOVE", b"q", b"d", b"LEFT", b"LEFT", b"0.01"]]);
    assert_eq!(conn.reply(), Value::NullArray);
    conn.send(&[&[b"HELLO", b"3"]]);
    conn.reply();
    conn.send(&[&[b"BZMPOP", b"0.01", b"1", b"z", b"MIN"]]);
    assert_eq!(conn.reply(), Value::Null, "RESP3's one null");
    wait_blocked(metrics, 0);
    conn.send(&[&[b"DBSIZE"]]);
    assert_eq!(conn.reply(), Value::Integer(0));
}

#[test]
fn client_unblock_ends_a_wait_as_a_timeout_or_with_an_error() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut waiter = Conn::open(address);
    waiter.send(&[&[b"CLIENT", b"ID"]]);
    let id = int(waiter.reply()).to_string();
    let mut other = Conn::open(address);
    other.send(&[&[b"CLIENT", b"UNBLOCK", id.as_bytes()]]);
    assert_eq!(other.reply(), Value::Integer(0), "not blocked yet");
    for (reason, ended) in [
        (&b"TIMEOUT"[..], Value::NullArray),
        (
            b"ERROR",
            Value::Error(b"UNBLOCKED client unblocked via CLIENT UNBLOCK".to_vec()),
        ),
    ] {
        waiter.send(&[&[b"BLPOP", b"q", b"0"]]);
        wait_blocked(metrics, 1);
        other.send(&[&[b"CLIENT", b"UNBLOCK", id.as_bytes(), reason]]);
        assert_eq!(other.reply(), Value::Integer(1));
        assert_eq!(waiter.reply(), ended);
        wait_blocked(metrics, 0);
    }
    // The connection serves on.
    waiter.send(&[&[b"BLPOP", b"q", b"0"]]);
    wait_blocked(metrics, 1);
    other.send(&[&[b"RPUSH", b"q", b"v"]]);
    assert_eq!(other.reply(), Value::Integer(1));
    assert_eq!(waiter.reply(), Value::Array(vec![bulk("q"), bulk("v")]));
}

#[test]
fn a_client_that_leaves_while_it_waits_is_dropped_and_pops_nothing() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut gone = Conn::open(address);
    gone.send(&[&[b"BRPOPLPUSH", b"q", b"d", b"0"], &[b"BLPOP", b"q", b"0"]]);
    wait_blocked(metrics, 1);
    drop(gone);
    wait_blocked(metrics, 0);
    let mut conn = Conn::open(address);
    for _ in 0..100 {
        if metrics.client_connections.get() == 1 {
            break;
        }
        thread::sleep(Duration::from_millis(10));
    }
    assert_eq!(metrics.client_connections.get(), 1, "the waiter was closed");
    conn.send(&[
        &[b"RPUSH", b"q", b"x"],
        &[b"LLEN", b"q"],
        &[b"EXISTS", b"d"],
    ]);
    assert_eq!(conn.reply(), Value::Integer(1));
    assert_eq!(conn.reply(), Value::Integer(1), "no one took the element");
    assert_eq!(conn.reply(), Value::Integer(0));
}

fn arr(items: &[&str]) -> Vec<Value> {
    items.iter().map(|item| bulk(item)).collect()
}

/// `[word, name, count]`, a (un)subscription's confirmation as RESP2 sends it.
fn confirmed(word: &str, name: &str, count: i64) -> Value {
    Value::Array(vec![bulk(word), bulk(name), Value::Integer(count)])
}

/// Subscribes `conn` to `channel` and waits for the confirmation, so that a publication
/// sent after this returns reaches it.
fn subscribed(conn: &mut Conn, channel: &str) {
    conn.send(&[&[b"SUBSCRIBE", channel.as_bytes()]]);
    assert_eq!(conn.reply(), confirmed("subscribe", channel, 1));
}

#[test]
fn a_publication_reaches_every_subscriber_of_the_channel_and_of_matching_patterns() {
    let node = start();
    let address = node.address;
    let mut first = Conn::open(address);
    subscribed(&mut first, "news");
    let mut second = Conn::open(address);
    second.send(&[&[b"PSUBSCRIBE", b"n*", b"x*"]]);
    assert_eq!(second.reply(), confirmed("psubscribe", "n*", 1));
    assert_eq!(second.reply(), confirmed("psubscribe", "x*", 2));
    let mut publisher = Conn::open(address);
    publisher.send(&[
        &[b"PUBLISH", b"news", b"one"],
        &[b"PUBLISH", b"nothing-here", b"two"],
        &[b"PUBLISH", b"other", b"three"],
    ]);
    assert_eq!(publisher.reply(), Value::Integer(2));
    assert_eq!(publisher.reply(), Value::Integer(1));
    assert_eq!(publisher.reply(), Value::Integer(0));
    assert_eq!(
        first.reply(),
        Value::Array(arr(&["message", "news", "one"]))
    );
    assert_eq!(
        second.reply(),
        Value::Array(arr(&["pmessage", "n*", "news", "one"]))
    );
    assert_eq!(
        second.reply(),
        Value::Array(arr(&["pmessage", "n*", "nothing-here", "two"]))
    );
    publisher.send(&[
        &[b"PUBSUB", b"NUMSUB", b"news", b"n*"],
        &[b"PUBSUB", b"NUMPAT"],
    ]);
    assert_eq!(
        publisher.reply(),
        Value::Array(vec![
            bulk("news"),
            Value::Integer(1),
            bulk("n*"),
            Value::Integer(0)
        ])
    );
    assert_eq!(publisher.reply(), Value::Integer(2));
    // A subscriber that leaves is forgotten: nothing is delivered to it, and it is not
    // counted.
    drop(first);
    for _ in 0..500 {
        publisher.send(&[&[b"PUBLISH", b"news", b"again"]]);
        if publisher.reply() == Value::Integer(1) {
            return;
        }
        thread::sleep(Duration::from_millis(10));
    }
    panic!("a closed subscriber is still counted");
}

/// Whether the node has written something to `conn` that it has not read yet.
fn has_unread_reply(conn: &mut Conn) -> bool {
    conn.stream.set_nonblocking(true).expect("non-blocking");
    let mut byte = [0u8; 1];
    let unread = matches!(conn.stream.peek(&mut byte), Ok(n) if n > 0);
    conn.stream.set_nonblocking(false).expect("blocking again");
    unread
}

#[test]
fn a_subscriber_hears_a_publication_only_after_the_writes_sent_before_it() {
    let node = start();
    let address = node.address;
    let mut subscriber = Conn::open(address);
    subscribed(&mut subscriber, "done");
    let mut writer = Conn::open(address);
    // A slow write (a script that spins before it sets the key) and the publication that
    // announces it, in one pipeline: the message must not overtake the write. The node
    // writes the write's reply before it delivers the message, so once the subscriber has
    // the message the writer's reply is waiting on its socket (a message sent when the
    // PUBLISH was read would come while the script still spins).
    let script = b"for i = 1, 20000000 do end redis.call('SET', KEYS[1], ARGV[1]) return 1";
    for round in 0..5 {
        let value = round.to_string();
        writer.send(&[
            &[b"EVAL", script, b"1", b"k", value.as_bytes()],
            &[b"PUBLISH", b"done", value.as_bytes()],
        ]);
        assert_eq!(
            subscriber.reply(),
            Value::Array(arr(&["message", "done", &value]))
        );
        assert!(
            has_unread_reply(&mut writer),
            "round {round}: the message came before the write it follows was answered"
        );
        assert_eq!(writer.reply(), Value::Integer(1));
        assert_eq!(writer.reply(), Value::Integer(1));
    }
}

#[test]
fn a_subscribed_resp2_connection_may_send_only_pubsub_commands_and_reset_ends_it() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    subscribed(&mut conn, "c");
    conn.send(&[&[b"GET", b"k"], &[b"PING"], &[b"PING", b"hi"]]);
    assert_eq!(
        conn.reply(),
        Value::Error(
            b"ERR Can't execute 'get': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / \
              RESET are allowed in this context"
                .to_vec()
        )
    );
    assert_eq!(conn.reply(), Value::Array(arr(&["pong", ""])));
    assert_eq!(conn.reply(), Value::Array(arr(&["pong", "hi"])));
    conn.send(&[&[b"RESET"], &[b"GET", b"k"]]);
    assert_eq!(conn.reply(), Value::Simple(b"RESET".to_vec()));
    assert_eq!(conn.reply(), Value::Null, "no longer subscribed");
    let mut publisher = Conn::open(address);
    publisher.send(&[&[b"PUBLISH", b"c", b"m"]]);
    assert_eq!(
        publisher.reply(),
        Value::Integer(0),
        "RESET ended the subscription"
    );
}

#[test]
fn in_resp3_messages_are_pushes_and_any_command_may_follow() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[&[b"HELLO", b"3"]]);
    conn.reply();
    conn.send(&[&[b"SUBSCRIBE", b"c"], &[b"SET", b"k", b"v"]]);
    assert_eq!(
        conn.reply(),
        Value::Push(vec![bulk("subscribe"), bulk("c"), Value::Integer(1)])
    );
    assert_eq!(conn.reply(), ok());
    // A connection that publishes where it listens gets the message before the count.
    conn.send(&[&[b"PUBLISH", b"c", b"mine"]]);
    assert_eq!(conn.reply(), Value::Push(arr(&["message", "c", "mine"])));
    assert_eq!(conn.reply(), Value::Integer(1));
}

#[test]
fn a_block_publishes_when_it_runs_and_not_when_a_watch_aborts_it() {
    let node = start();
    let address = node.address;
    let mut subscriber = Conn::open(address);
    subscribed(&mut subscriber, "c");
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"MULTI"],
        &[b"SET", b"k", b"1"],
        &[b"PUBLISH", b"c", b"in-block"],
        &[b"EXEC"],
    ]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::Array(vec![ok(), Value::Integer(1)]));
    assert_eq!(
        subscriber.reply(),
        Value::Array(arr(&["message", "c", "in-block"]))
    );
    let mut other = Conn::open(address);
    conn.send(&[&[b"WATCH", b"k"]]);
    assert_eq!(conn.reply(), ok());
    other.send(&[&[b"SET", b"k", b"2"]]);
    assert_eq!(other.reply(), ok());
    conn.send(&[&[b"MULTI"], &[b"PUBLISH", b"c", b"aborted"], &[b"EXEC"]]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::NullArray);
    // Only a block without a publication is answered without the database.
    conn.send(&[&[b"MULTI"], &[b"PUBLISH", b"c", b"alone"], &[b"EXEC"]]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::Array(vec![Value::Integer(1)]));
    assert_eq!(
        subscriber.reply(),
        Value::Array(arr(&["message", "c", "alone"])),
        "the aborted block's message never came"
    );
    // A subscription in a block holds once the block ran, for what follows it.
    conn.send(&[
        &[b"MULTI"],
        &[b"SUBSCRIBE", b"c"],
        &[b"EXEC"],
        &[b"GET", b"k"],
    ]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(
        conn.reply(),
        Value::Array(vec![confirmed("subscribe", "c", 1)])
    );
    assert!(
        matches!(conn.reply(), Value::Error(text) if text.starts_with(b"ERR Can't execute 'get'"))
    );
}

/// A subscription in a block is confirmed in the protocol in force at its place, as Redis
/// does: a RESP3 push, though a `HELLO 2` later in the block switches the connection back.
#[test]
fn a_subscription_in_a_block_answers_in_the_protocol_of_its_place() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"HELLO", b"3"],
        &[b"MULTI"],
        &[b"PSUBSCRIBE", b"p*"],
        &[b"HELLO", b"2"],
        &[b"EXEC"],
    ]);
    assert!(matches!(conn.reply(), Value::Map(_)), "HELLO 3");
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    let Value::Array(replies) = conn.reply() else {
        panic!("EXEC answers an array");
    };
    assert_eq!(
        replies[0],
        Value::Push(vec![bulk("psubscribe"), bulk("p*"), Value::Integer(1)]),
        "{replies:?}"
    );
    assert!(matches!(replies[1], Value::Array(_)), "HELLO 2's RESP2 map");
}

#[test]
fn client_reply_off_silences_replies_but_not_messages() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"CLIENT", b"REPLY", b"OFF"],
        &[b"SET", b"k", b"v"],
        &[b"SUBSCRIBE", b"c"],
        &[b"PUBSUB", b"NUMSUB", b"c"],
    ]);
    assert_eq!(conn.reply(), confirmed("subscribe", "c", 1));
    let mut publisher = Conn::open(address);
    publisher.send(&[&[b"PUBLISH", b"c", b"heard"]]);
    assert_eq!(publisher.reply(), Value::Integer(1));
    assert_eq!(conn.reply(), Value::Array(arr(&["message", "c", "heard"])));
    conn.send(&[
        &[b"UNSUBSCRIBE"],
        &[b"GET", b"k"],
        &[b"CLIENT", b"REPLY", b"ON"],
        &[b"CLIENT", b"REPLY", b"SKIP"],
        &[b"STRLEN", b"k"],
        &[b"GET", b"k"],
    ]);
    assert_eq!(conn.reply(), confirmed("unsubscribe", "c", 0));
    assert_eq!(conn.reply(), ok(), "CLIENT REPLY ON answers");
    assert_eq!(conn.reply(), bulk("v"), "the GET after the skipped STRLEN");
}

#[test]
fn a_stream_read_waits_for_entries_added_after_it_blocked() {
    let node = start();
    let (address, metrics) = (node.address, node.metrics());
    let mut writer = Conn::open(address);
    writer.send(&[&[b"XADD", b"s", b"1-1", b"f", b"old"]]);
    assert_eq!(writer.reply(), bulk("1-1"));
    let mut reader = Conn::open(address);
    reader.send(&[
        &[b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"],
        &[b"PING"],
    ]);
    wait_blocked(metrics, 1);
    // Writes that add nothing to the stream wake it, and it waits on; an entry added after
    // it blocked serves it, though the stream's last ID (what `$` means now) moved with it.
    writer.send(&[
        &[b"SET", b"other", b"1"],
        &[b"XADD", b"s", b"2-1", b"f", b"new"],
    ]);
    assert_eq!(writer.reply(), ok());
    assert_eq!(writer.reply(), bulk("2-1"));
    let entry = Value::Array(vec![
        bulk("2-1"),
        Value::Array(vec![bulk("f"), bulk("new")]),
    ]);
    assert_eq!(
        reader.reply(),
        Value::Array(vec![Value::Array(vec![
            bulk("s"),
            Value::Array(vec![entry])
        ])])
    );
    assert_eq!(reader.reply(), Value::Simple(b"PONG".to_vec()));
    // A group's read of new entries waits too, and its time runs out as Redis's: a null.
    reader.send(&[&[b"XGROUP", b"CREATE", b"s", b"g", b"$"]]);
    assert_eq!(reader.reply(), ok());
    reader.send(&[&[
        b"XREADGROUP",
        b"GROUP",
        b"g",
        b"c",
        b"BLOCK",
        b"20",
        b"STREAMS",
        b"s",
        b">",
    ]]);
    assert_eq!(reader.reply(), Value::NullArray);
    wait_blocked(metrics, 0);
}

/// The lines of the `INFO` reply `value` that start with `prefix`.
fn info_lines(value: Value, prefix: &str) -> Vec<String> {
    let Value::Bulk(text) = value else {
        panic!("INFO answers a bulk string, not {value:?}");
    };
    String::from_utf8(text)
        .expect("INFO is text")
        .lines()
        .filter(|line| line.starts_with(prefix))
        .map(str::to_owned)
        .collect()
}

#[test]
fn info_counts_calls_failed_and_rejected_calls_and_errors_by_code_until_resetstat() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[
        &[b"SET", b"k", b"v"],
        &[b"LPUSH", b"k", b"x"],
        &[b"GET"],
        &[b"GET", b"k"],
        &[b"NOSUCH"],
        &[b"MULTI"],
        &[b"INCR", b"n"],
        &[b"LPUSH", b"k", b"y"],
        &[b"EXEC"],
        &[b"CLIENT", b"ID"],
    ]);
    for _ in 0..10 {
        conn.reply();
    }
    conn.send(&[&[b"INFO", b"commandstats"], &[b"INFO", b"ERRORSTATS"]]);
    let stat = |calls: u64, rejected: u64, failed: u64| {
        format!(
            "calls={calls},usec=0,usec_per_call=0.00,rejected_calls={rejected},\
             failed_calls={failed}"
        )
    };
    assert_eq!(
        info_lines(conn.reply(), "cmdstat_"),
        [
            format!("cmdstat_client|id:{}", stat(1, 0, 0)),
            format!("cmdstat_exec:{}", stat(1, 0, 0)),
            format!("cmdstat_get:{}", stat(1, 1, 0)),
            format!("cmdstat_incr:{}", stat(1, 0, 0)),
            format!("cmdstat_lpush:{}", stat(2, 0, 2)),
            format!("cmdstat_multi:{}", stat(1, 0, 0)),
            format!("cmdstat_set:{}", stat(1, 0, 0)),
        ]
    );
    assert_eq!(
        info_lines(conn.reply(), "errorstat_"),
        ["errorstat_ERR:count=2", "errorstat_WRONGTYPE:count=2"]
    );
    conn.send(&[&[b"INFO", b"stats"]]);
    let stats = info_lines(conn.reply(), "total_");
    assert_eq!(
        stats,
        [
            "total_connections_received:1",
            "total_commands_processed:10",
            "total_error_replies:4",
        ]
    );
    conn.send(&[&[b"CONFIG", b"RESETSTAT"], &[b"INFO", b"everything"]]);
    assert_eq!(conn.reply(), ok());
    let info = conn.reply();
    assert_eq!(
        info_lines(info.clone(), "cmdstat_"),
        [format!("cmdstat_config|resetstat:{}", stat(1, 0, 0))]
    );
    assert!(info_lines(info, "errorstat_").is_empty());
}

#[test]
fn keyspace_notifications_reach_the_subscribers_of_their_channels() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KEA"]]);
    assert_eq!(conn.reply(), ok());
    let mut subscriber = Conn::open(address);
    subscriber.send(&[&[b"PSUBSCRIBE", b"__key*__:*"]]);
    assert_eq!(subscriber.reply(), confirmed("psubscribe", "__key*__:*", 1));
    conn.send(&[&[b"SET", b"foo", b"bar"], &[b"DEL", b"foo", b"none"]]);
    assert_eq!(conn.reply(), ok());
    assert_eq!(conn.reply(), Value::Integer(1));
    for (channel, message) in [
        ("__keyspace@0__:foo", "set"),
        ("__keyevent@0__:set", "foo"),
        ("__keyspace@0__:foo", "del"),
        ("__keyevent@0__:del", "foo"),
    ] {
        assert_eq!(
            subscriber.reply(),
            Value::Array(arr(&["pmessage", "__key*__:*", channel, message]))
        );
    }
    // A RESP3 connection that listens where it writes hears its write's notification after
    // the reply (a message to a connection waits behind the replies it is owed); Redis, whose
    // command publishes as it runs, sends it before.
    conn.send(&[&[b"HELLO", b"3"]]);
    let _ = conn.reply();
    conn.send(&[&[b"SUBSCRIBE", b"__keyevent@0__:incrby"]]);
    assert_eq!(
        conn.reply(),
        Value::Push(vec![
            bulk("subscribe"),
            bulk("__keyevent@0__:incrby"),
            Value::Integer(1)
        ])
    );
    conn.send(&[&[b"INCR", b"n"]]);
    assert_eq!(conn.reply(), Value::Integer(1));
    assert_eq!(
        conn.reply(),
        Value::Push(arr(&["message", "__keyevent@0__:incrby", "n"]))
    );
}

#[test]
fn a_write_refused_or_rolled_back_publishes_no_notification() {
    let node = start();
    let address = node.address;
    let mut conn = Conn::open(address);
    conn.send(&[&[b"CONFIG", b"SET", b"notify-keyspace-events", b"KA"]]);
    assert_eq!(conn.reply(), ok());
    let mut subscriber = Conn::open(address);
    subscribed(&mut subscriber, "__keyspace@0__:k");
    let script = b"redis.call('SET', KEYS[1], 'v') return redis.call('INCR', KEYS[1])";
    conn.send(&[
        &[b"LPUSH", b"k", b"a"],
        &[b"INCR", b"k"],
        &[b"EVAL", script, b"1", b"k"],
        &[b"RPUSH", b"k", b"b"],
    ]);
    assert_eq!(conn.reply(), Value::Integer(1));
    assert!(matches!(conn.reply(), Value::Error(_)), "INCR of a list");
    assert!(matches!(conn.reply(), Value::Error(_)), "the script failed");
    assert_eq!(conn.reply(), Value::Integer(2));
    assert_eq!(
        subscriber.reply(),
        Value::Array(arr(&["message", "__keyspace@0__:k", "lpush"]))
    );
    assert_eq!(
        subscriber.reply(),
        Value::Array(arr(&["message", "__keyspace@0__:k", "rpush"])),
        "the refused INCR and the rolled-back script published nothing"
    );
}

/// `CLIENT LIST`'s fields, in Redis 7.0's order.
const CLIENT_FIELDS: [&str; 28] = [
    "id",
    "addr",
    "laddr",
    "fd",
    "name",
    "age",
    "idle",
    "flags",
    "db",
    "sub",
    "psub",
    "ssub",
    "multi",
    "qbuf",
    "qbuf-free",
    "argv-mem",
    "multi-mem",
    "rbs",
    "rbp",
    "obl",
    "oll",
    "omem",
    "tot-mem",
    "events",
    "cmd",
    "user",
    "redir",
    "resp",
];

/// One line of `CLIENT LIST`: its `field=value` pairs, in order.
type ClientLine = Vec<(String, String)>;

/// Sends `args` and returns the lines of the `CLIENT LIST` or `CLIENT INFO` reply (a bulk
/// string, or in RESP3 a verbatim one), each checked to hold Redis's fields in order.
fn client_lines(conn: &mut Conn, args: &[&[u8]]) -> Vec<ClientLine> {
    conn.send(&[args]);
    let text = match conn.reply() {
        Value::Bulk(text) => text,
        Value::Verbatim(format, text) => {
            assert_eq!(format, b"txt");
            text
        }
        other => panic!("expected the lines, got {other:?}"),
    };
    let text = String::from_utf8(text).expect("ASCII");
    assert!(
        text.is_empty() || text.ends_with('\n'),
        "each line ends: {text:?}"
    );
    let lines: Vec<ClientLine> = text
        .lines()
        .map(|line| {
            let fields = line.split(' ').map(|field| {
                let (name, value) = field.split_once('=').expect("field=value");
                (name.to_string(), value.to_string())
            });
            fields.collect()
        })
        .collect();
    for line in &lines {
        let names: Vec<&str> = line.iter().map(|(name, _)| name.as_str()).collect();
        assert_eq!(names, CLIENT_FIELDS);
    }
    lines
}

/// The value of field `name` in `line`.
fn field<'a>(line: &'a ClientLine, name: &str) -> &'a str {
    let (_, value) = line.iter().find(|(n, _)| n == name).expect("every field");
    value
}

/// The ids of `lines`, in order.
fn ids(lines: &[ClientLine]) -> Vec<i64> {
    let id = |line| field(line, "id").parse::<i64>().expect("a number");
    lines.iter().map(id).collect()
}

/// Asserts that `line` holds each of `expected`'s fields with its value.
fn assert_fields(line: &ClientLine, expected: &[(&str, &str)]) {
    for (name, value) in expected {
        assert_eq!(field(line, name), *value, "{name} in {line:?}");
    }
}

fn client_id(conn: &mut Conn) -> i64 {
    conn.send(&[&[b"CLIENT", b"ID"]]);
    int(conn.reply())
}

#[test]
fn client_list_shows_each_connection_as_redis_does_and_its_filters_select() {
    let node = start();
    let mut lister = Conn::open(node.address);
    let mut other = Conn::open(node.address);
    lister.send(&[&[b"CLIENT", b"SETNAME", b"lister"]]);
    assert_eq!(lister.reply(), ok());
    let lister_id = client_id(&mut lister);
    other.send(&[&[b"SELECT", b"3"]]);
    assert_eq!(other.reply(), ok());
    let other_id = client_id(&mut other);
    let lister_addr = lister.stream.local_addr().expect("bound").to_string();
    let other_addr = other.stream.local_addr().expect("bound").to_string();
    let node_addr = node.address.to_string();

    let lines = client_lines(&mut lister, &[b"CLIENT", b"LIST"]);
    assert_eq!(
        ids(&lines),
        [lister_id, other_id],
        "every connection, oldest first"
    );
    // As Redis shows a client listing: its request still in the query buffer (26 bytes),
    // its arguments' 10 bytes, nothing unsent.
    assert_fields(
        &lines[0],
        &[
            ("addr", &lister_addr),
            ("laddr", &node_addr),
            ("name", "lister"),
            ("flags", "N"),
            ("db", "0"),
            ("sub", "0"),
            ("multi", "-1"),
            ("qbuf", "26"),
            ("argv-mem", "10"),
            ("multi-mem", "0"),
            ("rbp", "0"),
            ("obl", "0"),
            ("oll", "0"),
            ("omem", "0"),
            ("events", "r"),
            ("cmd", "client|list"),
            ("user", "default"),
            ("redir", "-1"),
            ("resp", "2"),
        ],
    );
    assert_fields(
        &lines[1],
        &[
            ("addr", &other_addr),
            ("name", ""),
            ("db", "3"),
            ("qbuf", "0"),
            ("argv-mem", "0"),
            ("cmd", "client|id"),
        ],
    );
    assert_ne!(field(&lines[0], "fd"), field(&lines[1], "fd"));

    // In MULTI: `x`, the commands queued and their memory (Redis's: the arguments' bytes and
    // a pointer per argument), the last one queued as the command.
    other.send(&[&[b"MULTI"], &[b"SET", b"k", b"v"], &[b"GET", b"k"]]);
    assert_eq!(other.reply(), ok());
    assert_eq!(other.reply(), Value::Simple(b"QUEUED".to_vec()));
    assert_eq!(other.reply(), Value::Simple(b"QUEUED".to_vec()));
    let id = other_id.to_string();
    let lines = client_lines(&mut lister, &[b"CLIENT", b"LIST", b"ID", id.as_bytes()]);
    assert_eq!(ids(&lines), [other_id]);
    let multi_mem = (5 + 3 * 8 + 4 + 2 * 8).to_string();
    assert_fields(
        &lines[0],
        &[
            ("flags", "x"),
            ("multi", "2"),
            ("multi-mem", &multi_mem),
            ("cmd", "get"),
        ],
    );
    other.send(&[&[b"DISCARD"]]);
    assert_eq!(other.reply(), ok());

    // A subscriber: `P`, its subscriptions counted by kind, and of type pubsub.
    other.send(&[&[b"SUBSCRIBE", b"news"], &[b"PSUBSCRIBE", b"n*"]]);
    assert_eq!(other.reply(), confirmed("subscribe", "news", 1));
    assert_eq!(other.reply(), confirmed("psubscribe", "n*", 2));
    let lines = client_lines(&mut lister, &[b"CLIENT", b"LIST", b"TYPE", b"pubsub"]);
    assert_eq!(ids(&lines), [other_id]);
    assert_fields(
        &lines[0],
        &[
            ("flags", "P"),
            ("sub", "1"),
            ("psub", "1"),
            ("ssub", "0"),
            ("cmd", "psubscribe"),
        ],
    );
    let lines = client_lines(&mut lister, &[b"CLIENT", b"LIST", b"TYPE", b"NORMAL"]);
    assert_eq!(ids(&lines), [lister_id]);
    assert!(client_lines(&mut lister, &[b"CLIENT", b"LIST", b"TYPE", b"replica"]).is_empty());

    // IDs are shown in the order asked; one no connection has is skipped.
    let (lister_text, other_text) = (lister_id.to_string(), other_id.to_string());
    let args: [&[u8]; 6] = [
        b"CLIENT",
        b"LIST",
        b"ID",
        other_text.as_bytes(),
        b"99999",
        lister_text.as_bytes(),
    ];
    assert_eq!(
        ids(&client_lines(&mut lister, &args)),
        [other_id, lister_id]
    );

    // CLIENT INFO is the caller's own line (the command aside, and the clock, which may
    // have ticked).
    let listed = client_lines(&mut lister, &[b"CLIENT", b"LIST"]).remove(0);
    let info = client_lines(&mut lister, &[b"CLIENT", b"INFO"]);
    assert_eq!(info.len(), 1);
    assert_eq!(field(&info[0], "cmd"), "client|info");
    let besides = |line: &ClientLine| -> ClientLine {
        let kept = |(name, _): &&(String, String)| !matches!(name.as_str(), "cmd" | "age" | "idle");
        line.iter().filter(kept).cloned().collect()
    };
    assert_eq!(besides(&info[0]), besides(&listed));

    // `CLIENT NO-EVICT on` shows as `e`; RESP3 gets a verbatim string and `resp=3`.
    lister.send(&[&[b"CLIENT", b"NO-EVICT", b"on"], &[b"HELLO", b"3"]]);
    assert_eq!(lister.reply(), ok());
    assert!(matches!(lister.reply(), Value::Map(_)));
    let info = client_lines(&mut lister, &[b"CLIENT", b"INFO"]);
    assert_fields(&info[0], &[("flags", "e"), ("resp", "3")]);
}

#[test]
fn client_kill_closes_the_connections_it_matches_and_answers_as_redis() {
    let node = start();
    let mut killer = Conn::open(node.address);
    let mut waiter = Conn::open(node.address);
    let mut old = Conn::open(node.address);
    let waiter_id = client_id(&mut waiter);
    old.send(&[&[b"PING"]]);
    assert_eq!(old.reply(), Value::Simple(b"PONG".to_vec()));

    // Bad filters get Redis's errors and kill no one.
    let syntax = Value::Error(b"ERR syntax error".to_vec());
    let refusals: [(&[&[u8]], Value); 5] = [
        (
            &[b"CLIENT", b"KILL", b"ID", b"0"],
            Value::Error(b"ERR client-id should be greater than 0".to_vec()),
        ),
        (
            &[b"CLIENT", b"KILL", b"TYPE", b"bogus"],
            Value::Error(b"ERR Unknown client type 'bogus'".to_vec()),
        ),
        (
            &[b"CLIENT", b"KILL", b"USER", b"nobody"],
            Value::Error(b"ERR No such user 'nobody'".to_vec()),
        ),
        (&[b"CLIENT", b"KILL", b"SKIPME", b"maybe"], syntax.clone()),
        (&[b"CLIENT", b"KILL", b"ID", b"2", b"SKIPME"], syntax),
    ];
    for (args, refusal) in refusals {
        killer.send(&[args]);
        assert_eq!(killer.reply(), refusal, "{args:?}");
    }
    assert_eq!(client_lines(&mut killer, &[b"CLIENT", b"LIST"]).len(), 3);

    // A connection waiting in a blocking command shows `b`; killed, it is closed and pops
    // nothing.
    waiter.send(&[&[b"BLPOP", b"queue", b"0"]]);
    wait_blocked(node.metrics(), 1);
    let id = waiter_id.to_string();
    let lines = client_lines(&mut killer, &[b"CLIENT", b"LIST", b"ID", id.as_bytes()]);
    assert_fields(&lines[0], &[("flags", "b"), ("cmd", "blpop"), ("oll", "0")]);
    killer.send(&[&[b"CLIENT", b"KILL", b"ID", id.as_bytes()]]);
    assert_eq!(int(killer.reply()), 1);
    assert!(
        waiter.rest_until_closed().is_empty(),
        "closed without a reply"
    );
    wait_blocked(node.metrics(), 0);
    killer.send(&[
        &[b"CLIENT", b"KILL", b"ID", id.as_bytes()],
        &[b"RPUSH", b"queue", b"x"],
    ]);
    assert_eq!(int(killer.reply()), 0, "gone already");
    assert_eq!(int(killer.reply()), 1, "the killed waiter popped nothing");

    // The old form names the client's address, and answers OK or an error.
    let old_addr = old.stream.local_addr().expect("bound").to_string();
    killer.send(&[&[b"CLIENT", b"KILL", old_addr.as_bytes()]]);
    assert_eq!(killer.reply(), ok());
    assert!(old.rest_until_closed().is_empty());
    killer.send(&[&[b"CLIENT", b"KILL", old_addr.as_bytes()]]);
    assert_eq!(killer.reply(), Value::Error(b"ERR No such client".to_vec()));

    // The new form spares the caller unless told not to; filters that match no one kill no
    // one.
    let mut others = [Conn::open(node.address), Conn::open(node.address)];
    for conn in &mut others {
        conn.send(&[&[b"PING"]]);
        assert_eq!(conn.reply(), Value::Simple(b"PONG".to_vec()));
    }
    let node_addr = node.address.to_string();
    let none_match: [&[&[u8]]; 3] = [
        &[b"CLIENT", b"KILL", b"MAXAGE", b"100000"],
        &[b"CLIENT", b"KILL", b"TYPE", b"master"],
        &[
            b"CLIENT",
            b"KILL",
            b"ADDR",
            b"192.0.2.1:1",
            b"SKIPME",
            b"no",
        ],
    ];
    for args in none_match {
        killer.send(&[args]);
        assert_eq!(int(killer.reply()), 0, "{args:?}");
    }
    killer.send(&[&[b"CLIENT", b"KILL", b"LADDR", node_addr.as_bytes()]]);
    assert_eq!(int(killer.reply()), 2, "every connection but the caller");
    for conn in &mut others {
        assert!(conn.rest_until_closed().is_empty());
    }
    // Killing itself, the caller gets its reply, then the connection closes.
    killer.send(&[
        &[b"CLIENT", b"KILL", b"USER", b"default", b"SKIPME", b"no"],
        &[b"PING"],
    ]);
    assert_eq!(int(killer.reply()), 1);
    assert!(
        killer.rest_until_closed().is_empty(),
        "nothing after the kill runs"
    );
    let mut fresh = Conn::open(node.address);
    assert_eq!(client_lines(&mut fresh, &[b"CLIENT", b"LIST"]).len(), 1);
}

#[test]
fn client_list_and_kill_in_a_block_answer_an_error_and_the_block_still_runs() {
    let node = start();
    let mut conn = Conn::open(node.address);
    conn.send(&[
        &[b"MULTI"],
        &[b"CLIENT", b"LIST"],
        &[b"CLIENT", b"KILL", b"ID", b"0"],
        &[b"CLIENT", b"KILL", b"SKIPME", b"no"],
        &[b"SET", b"k", b"v"],
        &[b"EXEC"],
    ]);
    assert_eq!(conn.reply(), ok());
    for _ in 0..4 {
        assert_eq!(conn.reply(), Value::Simple(b"QUEUED".to_vec()));
    }
    let in_block = Value::Error(tandem_redis::session::clients::IN_BLOCK.as_bytes().to_vec());
    let bad_id = Value::Error(b"ERR client-id should be greater than 0".to_vec());
    assert_eq!(
        conn.reply(),
        Value::Array(vec![in_block.clone(), bad_id, in_block, ok()])
    );
    conn.send(&[&[b"GET", b"k"]]);
    assert_eq!(
        conn.reply(),
        bulk("v"),
        "the block ran; the connection lives"
    );
}
