//! Client connections to a running primary, over real TCP on loopback.
//!
//! Each test starts its own standalone primary (no backups, 1-safe, Debit-Credit in 4 MiB) in
//! this process and talks to it with the wire codec, as a client library would. The rule under
//! test: malformed input closes that one connection and nothing else; a call the primary
//! refuses (unknown procedure, bad arguments, a safety rule the group cannot meet) leaves the
//! connection usable.
//!
//! Every socket has a read timeout, so a primary that never answers fails the test instead of
//! hanging it.

use crate::common;

use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::Duration;

use tandem_replication::{AckCount, Safety};
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{EXAMPLE, NodeConfig, PeerConfig};
use tandem_wire::{
    ErrorCode, Frame, FrameBuffer, Hello, MAX_FRAME_LEN_DEFAULT, Member, MembersAnswer,
    PROTOCOL_VERSION, PeerKind, ReplyStatus, Role, Welcome, encode_call, encode_hello,
    encode_members,
};
use tandem_workloads::debit_credit::{DEBIT_CREDIT, DebitCredit};

/// How long a test waits for any one frame from the primary.
const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Debit-Credit's procedure id on the wire.
const PROC: u16 = DEBIT_CREDIT.0;

/// A standalone primary on a free loopback port, running until it is stopped or dropped.
struct Node {
    running: RunningNode,
    address: SocketAddr,
}

impl Node {
    fn start() -> Node {
        let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
        let mut config = NodeConfig::from_toml_str(EXAMPLE).expect("the example parses");
        config.listen = listener.local_addr().expect("bound");
        config.metrics_listen = None;
        config.peers = vec![];
        config.group.safety = Safety::OneSafe;
        config.group.db_mib = 4;
        config
            .validate()
            .expect("a standalone primary is a valid configuration");
        let running = common::start(&config, listener, None, common::model(&config));
        Node {
            running,
            address: config.listen,
        }
    }

    /// (last committed LSN, commits since start); also checks nothing waits for release.
    fn progress(&self) -> (u64, u64) {
        let status = self.running.status().expect("the primary role answers");
        assert_eq!(status.role, "primary");
        assert_eq!(status.pending_replies, 0, "{status:?}");
        assert!(status.backups.is_empty(), "{status:?}");
        (status.lsn, status.commits)
    }

    /// Stops the primary after checking that its database is consistent.
    fn stop(self) {
        let checksum = self.running.checksum().expect("the primary role answers");
        assert_eq!(checksum.check, None, "the workload's consistency check");
        self.running.stop();
    }
}

/// A frame from the primary, owned (decoded frames borrow the receive buffer).
#[derive(Debug, PartialEq)]
enum Got {
    Welcome(Welcome),
    Error(ErrorCode, String),
    Reply {
        seq: u64,
        lsn: u64,
        status: ReplyStatus,
        body: Vec<u8>,
    },
    Members(MembersAnswer),
    /// End of stream (or a reset): the primary closed the connection.
    Closed,
}

struct Client {
    stream: TcpStream,
    buffer: FrameBuffer,
}

impl Client {
    /// A bare connection: nothing sent yet.
    fn connect(address: SocketAddr) -> Client {
        let stream = TcpStream::connect(address).expect("the primary accepts");
        stream.set_read_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_write_timeout(Some(READ_TIMEOUT)).unwrap();
        stream.set_nodelay(true).unwrap();
        Client {
            stream,
            buffer: FrameBuffer::new(MAX_FRAME_LEN_DEFAULT),
        }
    }

    /// A connection past the handshake.
    fn welcomed(address: SocketAddr, client_id: u64) -> Client {
        let mut client = Client::connect(address);
        let mut hello = Vec::new();
        encode_hello(&mut hello, &Hello::new(PeerKind::Client, client_id, 0));
        client.send(&hello);
        match client.next() {
            Got::Welcome(welcome) => {
                assert_eq!(welcome.version, PROTOCOL_VERSION);
                assert_eq!(welcome.node_id, 1);
                assert_eq!(welcome.role, Role::Primary);
                assert_eq!(welcome.view, 1);
            }
            other => panic!("expected a Welcome, got {other:?}"),
        }
        client
    }

    fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("the primary reads");
    }

    /// The next frame, or `Closed`; panics if nothing comes within the read timeout.
    fn next(&mut self) -> Got {
        loop {
            match self.buffer.next_frame() {
                Ok(Some(frame)) => {
                    return match frame {
                        Frame::Welcome(welcome) => Got::Welcome(welcome),
                        Frame::Error(error) => Got::Error(error.code, error.message),
                        Frame::Reply(reply) => Got::Reply {
                            seq: reply.seq,
                            lsn: reply.lsn,
                            status: reply.status,
                            body: reply.body.to_vec(),
                        },
                        Frame::MembersAnswer(answer) => Got::Members(answer),
                        other => panic!("a primary never sends a client {other:?}"),
                    };
                }
                Ok(None) => {}
                Err(err) => panic!("the primary sent a malformed frame: {err}"),
            }
            match self.stream.read(self.buffer.spare()) {
                Ok(0) => return Got::Closed,
                Ok(n) => self.buffer.filled(n),
                Err(err) if matches!(err.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    panic!("no frame from the primary within {READ_TIMEOUT:?}")
                }
                Err(err)
                    if matches!(
                        err.kind(),
                        ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted
                    ) =>
                {
                    return Got::Closed;
                }
                Err(err) => panic!("reading from the primary: {err}"),
            }
        }
    }

    /// Sends one Debit-Credit call and returns its reply's LSN and the account's new balance.
    fn debit_credit(&mut self, seq: u64, account: u32, delta: i32) -> (u64, i32) {
        let mut frame = Vec::new();
        encode_call(&mut frame, seq, PROC, None, &args(account, delta));
        self.send(&frame);
        self.committed(seq)
    }

    /// Expects the reply to `seq`, committed; returns its LSN and the balance in its body.
    fn committed(&mut self, seq: u64) -> (u64, i32) {
        match self.next() {
            Got::Reply {
                seq: got,
                lsn,
                status: ReplyStatus::Committed,
                body,
            } if got == seq => {
                let balance = body.try_into().map(i32::from_le_bytes);
                (
                    lsn,
                    balance.expect("the reply body is the account's balance"),
                )
            }
            other => panic!("expected call {seq} to commit, got {other:?}"),
        }
    }

    /// Expects an Error frame with `code` and a message containing `says`, then the end of
    /// the connection.
    fn refused_and_closed(&mut self, code: ErrorCode, says: &str) {
        match self.next() {
            Got::Error(got, message) => {
                assert_eq!(got, code, "{message}");
                assert!(message.contains(says), "{message:?} should say {says:?}");
            }
            other => panic!("expected an Error frame ({code:?}), got {other:?}"),
        }
        assert_eq!(
            self.next(),
            Got::Closed,
            "the primary closes the connection"
        );
    }
}

/// Debit-Credit arguments: `account` and teller 3 of branch 0 (each branch has 10 tellers and,
/// in 4 MiB, more than 1000 accounts).
fn args(account: u32, delta: i32) -> Vec<u8> {
    let mut args = Vec::new();
    DebitCredit::encode_args(&mut args, account, 3, 0, delta);
    args
}

#[test]
fn a_client_is_welcomed_and_its_calls_commit_in_order() {
    let node = Node::start();
    let (lsn_start, commits) = node.progress();
    assert_eq!(commits, 0);
    let mut client = Client::welcomed(node.address, 7);
    let mut balance = 0;
    for (i, delta) in [100, -30, 5, 999_999, -999_999].into_iter().enumerate() {
        let seq = 10 + i as u64;
        balance += delta;
        let (lsn, got) = client.debit_credit(seq, 42, delta);
        assert_eq!(
            lsn,
            lsn_start + 1 + i as u64,
            "one LSN per commit, in order"
        );
        assert_eq!(
            got, balance,
            "the procedure ran: the reply is the new balance"
        );
    }
    // A call may name its own safety rule; on a primary without backups each one holds at
    // once (2-safe of all zero backups included).
    let safeties = [
        Safety::OneSafe,
        Safety::Bounded(1),
        Safety::TwoSafe(AckCount::All),
        Safety::TwoSafeApplied(AckCount::All),
    ];
    for (i, safety) in safeties.into_iter().enumerate() {
        let seq = 100 + i as u64;
        let mut frame = Vec::new();
        encode_call(&mut frame, seq, PROC, Some(safety), &args(43, 1));
        client.send(&frame);
        let (lsn, got) = client.committed(seq);
        assert_eq!(lsn, lsn_start + 6 + i as u64, "{safety}");
        assert_eq!(got, 1 + i as i32, "{safety}");
    }
    assert_eq!(node.progress(), (lsn_start + 9, 9));
    node.stop();
}

#[test]
fn a_client_asks_for_the_members_between_its_calls() {
    let node = Node::start();
    let mut client = Client::welcomed(node.address, 8);
    let mut frames = Vec::new();
    encode_call(&mut frames, 1, PROC, None, &args(9, 1));
    encode_members(&mut frames);
    encode_call(&mut frames, 2, PROC, None, &args(9, 1));
    client.send(&frames);
    // The reader answers Members itself, so its answer may overtake the first reply.
    let mut got: Vec<Got> = (0..3).map(|_| client.next()).collect();
    let at = got.iter().position(|g| matches!(g, Got::Members(_)));
    let Got::Members(answer) = got.remove(at.expect("an answer to Members")) else {
        unreachable!("found above");
    };
    let itself = Member {
        node_id: 1,
        address: node.address,
    };
    assert_eq!(
        answer,
        MembersAnswer {
            view: 1,
            members: vec![itself],
            slots: Vec::new(),
        }
    );
    let seqs: Vec<u64> = got
        .iter()
        .map(|g| match g {
            Got::Reply { seq, .. } => *seq,
            other => panic!("a reply, not {other:?}"),
        })
        .collect();
    assert_eq!(seqs, [1, 2], "the calls around it are answered in order");
    node.stop();
}

#[test]
fn pipelined_calls_are_answered_in_call_order() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut client = Client::welcomed(node.address, 8);
    let mut frames = Vec::new();
    for i in 0..100u32 {
        encode_call(
            &mut frames,
            1000 + u64::from(i),
            PROC,
            None,
            &args(i % 7, 1),
        );
    }
    client.send(&frames);
    let mut balances = [0; 7];
    for i in 0..100u32 {
        let (lsn, balance) = client.committed(1000 + u64::from(i));
        assert_eq!(lsn, lsn_start + 1 + u64::from(i));
        balances[(i % 7) as usize] += 1;
        assert_eq!(balance, balances[(i % 7) as usize]);
    }
    assert_eq!(node.progress(), (lsn_start + 100, 100));
    node.stop();
}

/// A Call frame from `encode_call`, then `patch` applied to its bytes.
fn patched_call(patch: impl FnOnce(&mut Vec<u8>)) -> Vec<u8> {
    let mut frame = Vec::new();
    encode_call(&mut frame, 1, PROC, None, &args(1, 1));
    patch(&mut frame);
    frame
}

fn hello_bytes(hello: &Hello) -> Vec<u8> {
    let mut frame = Vec::new();
    encode_hello(&mut frame, hello);
    frame
}

#[test]
fn malformed_input_closes_that_one_connection_and_nothing_else() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut good = Client::welcomed(node.address, 1);
    let (lsn, _) = good.debit_credit(1, 5, 10);
    assert_eq!(lsn, lsn_start + 1);

    // Refused at the handshake: what the first frame is.
    let mut bad_version = Hello::new(PeerKind::Client, 2, 0);
    bad_version.version = PROTOCOL_VERSION + 1;
    let mut bad_magic = hello_bytes(&Hello::new(PeerKind::Client, 2, 0));
    bad_magic[5..9].copy_from_slice(b"HTTP");
    let before_hello: [(&str, Vec<u8>, ErrorCode, &str); 8] = [
        (
            "a Call before the Hello",
            patched_call(|_| {}),
            ErrorCode::BadFrame,
            "Hello",
        ),
        (
            "an HTTP request (its first 4 bytes read as a huge length)",
            b"GET /status HTTP/1.1\r\nHost: tandem\r\n\r\n".to_vec(),
            ErrorCode::BadFrame,
            "exceeds",
        ),
        (
            "a frame longer than the maximum",
            vec![0xFF; 4],
            ErrorCode::BadFrame,
            "exceeds",
        ),
        (
            "garbage: an unknown frame type",
            vec![6, 0, 0, 0, 0x7F, 1, 2, 3, 4, 5],
            ErrorCode::BadFrame,
            "unknown frame type",
        ),
        (
            "a Hello of another protocol version",
            hello_bytes(&bad_version),
            ErrorCode::UnsupportedVersion,
            "version",
        ),
        (
            "a Hello with the wrong magic",
            bad_magic,
            ErrorCode::BadFrame,
            "magic",
        ),
        (
            "a Hello from a replica (peers link over their own connection)",
            hello_bytes(&Hello::new(PeerKind::Replica, 2, 0)),
            ErrorCode::BadFrame,
            "cluster connection",
        ),
        (
            "a Hello for another group",
            hello_bytes(&Hello::new(PeerKind::Client, 2, 9)),
            ErrorCode::BadFrame,
            "does not serve in group 9",
        ),
    ];
    for (what, bytes, code, says) in before_hello {
        eprintln!("before the Hello: {what}");
        let mut bad = Client::connect(node.address);
        bad.send(&bytes);
        bad.refused_and_closed(code, says);
    }

    // Refused after the handshake: what a Call frame holds.
    let after_hello: [(&str, Vec<u8>, &str); 6] = [
        (
            "a Call with safety tag 9",
            patched_call(|frame| frame[5 + 10] = 9),
            "safety_tag",
        ),
        (
            "a Call with a safety parameter its tag does not take",
            patched_call(|frame| frame[5 + 11] = 1),
            "safety_param",
        ),
        (
            "a Call whose args_len disagrees with its length",
            patched_call(|frame| frame[5 + 19] += 1),
            "args_len",
        ),
        ("a frame longer than the maximum", vec![0xFF; 4], "exceeds"),
        (
            "a second Hello",
            hello_bytes(&Hello::new(PeerKind::Client, 3, 0)),
            "only Call, Read and Members frames",
        ),
        (
            "garbage: an unknown frame type",
            vec![6, 0, 0, 0, 0x7F, 1, 2, 3, 4, 5],
            "unknown frame type",
        ),
    ];
    for (what, bytes, says) in after_hello {
        eprintln!("after the Hello: {what}");
        let mut bad = Client::welcomed(node.address, 3);
        bad.send(&bytes);
        bad.refused_and_closed(ErrorCode::BadFrame, says);
    }

    // A client that hangs up in the middle of a frame gets nothing more.
    let mut quitter = Client::welcomed(node.address, 4);
    let call = patched_call(|_| {});
    quitter.send(&call[..call.len() / 2]);
    quitter.stream.shutdown(std::net::Shutdown::Write).unwrap();
    assert_eq!(quitter.next(), Got::Closed);

    // The good connection and the listener are unharmed, and no refused call ran.
    let (lsn, balance) = good.debit_credit(2, 5, 1);
    assert_eq!((lsn, balance), (lsn_start + 2, 11));
    let mut late = Client::welcomed(node.address, 5);
    assert_eq!(late.debit_credit(1, 5, 1), (lsn_start + 3, 12));
    assert_eq!(node.progress(), (lsn_start + 3, 3));
    node.stop();
}

#[test]
fn an_unknown_procedure_is_refused_and_the_connection_stays_usable() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut client = Client::welcomed(node.address, 9);
    for proc_id in [2, 99, u16::MAX] {
        let mut frame = Vec::new();
        encode_call(&mut frame, 1, proc_id, None, &args(1, 1));
        client.send(&frame);
        match client.next() {
            Got::Error(ErrorCode::UnknownProcedure, message) => {
                assert!(message.contains(&proc_id.to_string()), "{message}");
            }
            other => panic!("expected UnknownProcedure for {proc_id}, got {other:?}"),
        }
    }
    assert_eq!(client.debit_credit(2, 1, 1), (lsn_start + 1, 1));
    assert_eq!(node.progress(), (lsn_start + 1, 1));
    node.stop();
}

#[test]
fn a_safety_rule_the_group_cannot_meet_is_refused_and_the_connection_stays_usable() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut client = Client::welcomed(node.address, 10);
    // A primary without backups can never collect one ack.
    let mut frame = Vec::new();
    encode_call(
        &mut frame,
        33,
        PROC,
        Some(Safety::TwoSafe(AckCount::Of(1))),
        &args(1, 1),
    );
    client.send(&frame);
    match client.next() {
        Got::Error(ErrorCode::BadArgs, message) => {
            assert!(message.contains("call 33"), "names the call: {message}");
        }
        other => panic!("expected BadArgs, got {other:?}"),
    }
    assert_eq!(client.debit_credit(34, 1, 1), (lsn_start + 1, 1));
    assert_eq!(node.progress(), (lsn_start + 1, 1));
    node.stop();
}

#[test]
fn bad_arguments_roll_back_and_the_connection_stays_usable() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut client = Client::welcomed(node.address, 11);
    let mut wrong_branch = Vec::new();
    DebitCredit::encode_args(&mut wrong_branch, 1, 3, 1, 1);
    let cases: [(&str, Vec<u8>, &str); 6] = [
        ("no arguments", Vec::new(), "bad arguments"),
        (
            "arguments too short",
            args(1, 1)[..15].to_vec(),
            "bad arguments",
        ),
        (
            "arguments too long",
            [args(1, 1), vec![0]].concat(),
            "bad arguments",
        ),
        ("an account out of range", args(u32::MAX, 1), "account"),
        ("a teller of another branch", wrong_branch, "teller"),
        ("a delta out of range", args(1, 1_000_000), "delta"),
    ];
    let mut frames = Vec::new();
    for (seq, (_, args, _)) in cases.iter().enumerate() {
        encode_call(&mut frames, seq as u64, PROC, None, args);
    }
    // One call that commits after them, in the same write: replies keep call order.
    encode_call(&mut frames, 6, PROC, None, &args(1, 1));
    client.send(&frames);
    for (seq, (what, _, says)) in cases.iter().enumerate() {
        match client.next() {
            Got::Reply {
                seq: got,
                lsn,
                status: ReplyStatus::RolledBack,
                body,
            } if got == seq as u64 => {
                let reason = String::from_utf8(body).expect("the reason is text");
                assert!(
                    reason.contains(says),
                    "{what}: {reason:?} should say {says:?}"
                );
                // A rolled-back call takes no LSN: its reply carries the last commit's.
                assert_eq!(lsn, lsn_start, "{what}");
            }
            other => panic!("{what}: expected a RolledBack reply to call {seq}, got {other:?}"),
        }
    }
    assert_eq!(client.committed(6), (lsn_start + 1, 1));
    assert_eq!(client.debit_credit(7, 1, 1), (lsn_start + 2, 2));
    assert_eq!(node.progress(), (lsn_start + 2, 2));
    node.stop();
}

/// Pipelined refusals must come back in call order too: an `Error` frame carries no `seq`, so
/// its place in the stream is the only way a client can tell which call it refuses.
#[test]
fn refusals_and_replies_come_back_in_call_order() {
    let node = Node::start();
    let (lsn_start, _) = node.progress();
    let mut client = Client::welcomed(node.address, 12);
    let mut frames = Vec::new();
    encode_call(&mut frames, 1, PROC, None, &args(1, 1));
    encode_call(&mut frames, 2, 77, None, &args(1, 1));
    let cannot_be_met = Some(Safety::TwoSafe(AckCount::Of(1)));
    encode_call(&mut frames, 3, PROC, cannot_be_met, &args(1, 1));
    encode_call(&mut frames, 4, PROC, None, &args(1, 1));
    client.send(&frames);
    assert_eq!(client.committed(1), (lsn_start + 1, 1));
    assert!(matches!(
        client.next(),
        Got::Error(ErrorCode::UnknownProcedure, _)
    ));
    assert!(matches!(client.next(), Got::Error(ErrorCode::BadArgs, _)));
    assert_eq!(client.committed(4), (lsn_start + 2, 2));
    node.stop();
}

/// `Welcome.lsn` is documented (tandem_wire::Welcome) as the node's last committed LSN.
#[test]
fn the_welcome_carries_the_last_committed_lsn() {
    let node = Node::start();
    let mut client = Client::welcomed(node.address, 13);
    client.debit_credit(1, 1, 1);
    let (lsn, _) = node.progress();
    let mut late = Client::connect(node.address);
    late.send(&hello_bytes(&Hello::new(PeerKind::Client, 14, 0)));
    match late.next() {
        Got::Welcome(welcome) => assert_eq!(welcome.lsn, lsn),
        other => panic!("expected a Welcome, got {other:?}"),
    }
    node.stop();
}

/// Before a connection proves itself it may send only short frames: four bytes announcing a
/// large first frame are refused at once, before the node holds any of it.
#[test]
fn a_stranger_announcing_a_large_first_frame_is_refused_before_it_is_buffered() {
    let node = Node::start();
    let mut stranger = Client::connect(node.address);
    stranger.send(&(4u32 << 20).to_le_bytes());
    stranger.refused_and_closed(ErrorCode::BadFrame, "the first frame must be a Hello");
    let mut client = Client::welcomed(node.address, 7);
    client.debit_credit(1, 1, 5);
    node.stop();
}

/// Connections that send nothing, or only the start of a frame, wait at the gate without a
/// thread each; the node goes on welcoming and serving others meanwhile.
#[test]
fn idle_and_half_sent_connections_hold_no_thread_and_others_are_served() {
    const IDLE: usize = 300;
    let node = Node::start();
    let before = common::threads_now();
    let mut idle = Vec::new();
    for index in 0..IDLE {
        let mut stream = TcpStream::connect(node.address).expect("the node accepts");
        if index % 2 == 1 {
            // The length of an 8 KiB frame, and nothing of it.
            stream.write_all(&(8u32 << 10).to_le_bytes()).unwrap();
        }
        idle.push(stream);
    }
    let mut client = Client::welcomed(node.address, 7);
    client.debit_credit(1, 1, 5);
    let grown = common::threads_now().saturating_sub(before);
    // Other tests of this binary start nodes and clients alongside; a thread per idle
    // connection would be 300 more.
    assert!(
        grown < IDLE / 3,
        "{grown} more threads with {IDLE} idle connections"
    );
    drop(idle);
    node.stop();
}

/// A backup's port has the same gate: strangers that send nothing, or four bytes announcing
/// a large frame, hold no thread each, and a client's `Hello` is still answered (a backup
/// welcomes a client as a backup, which tells it to send its calls to the primary).
#[test]
fn a_backup_holds_no_thread_for_idle_or_half_sent_connections() {
    const IDLE: usize = 300;
    let listener = TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let address = listener.local_addr().expect("bound");
    // Its primary is nowhere (nobody listens on port 9, and the node with the lower id is the
    // one that dials): the backup role is the node's all the same, as its view is fixed.
    let primary = PeerConfig {
        node_id: 1,
        address: "127.0.0.1:9".parse().unwrap(),
        role: Some(tandem_runtime::config::Role::Primary),
        resp: None,
    };
    let config = common::pair_config(2, address, primary, |config| config.log = None);
    let running = common::start(&config, listener, None, common::model(&config));
    // A node that holds its role runs its fixed set of threads: whatever grows from here
    // grows for the connections.
    let before = common::threads_now();
    let mut idle = Vec::new();
    for index in 0..IDLE {
        let mut stream = TcpStream::connect(address).expect("the node accepts");
        if index % 2 == 1 {
            stream.write_all(&(4u32 << 20).to_le_bytes()).unwrap();
        }
        idle.push(stream);
    }
    let mut client = Client::connect(address);
    client.send(&hello_bytes(&Hello::new(
        PeerKind::Client,
        7,
        config.group.id,
    )));
    match client.next() {
        Got::Welcome(welcome) => {
            assert_eq!((welcome.node_id, welcome.role), (2, Role::Backup));
        }
        other => panic!("expected a backup's Welcome, got {other:?}"),
    }
    // A call is refused, and the refusal says where calls go.
    let mut frame = Vec::new();
    encode_call(&mut frame, 1, PROC, None, &args(1, 1));
    client.send(&frame);
    match client.next() {
        Got::Error(ErrorCode::NotPrimary, message) => {
            assert!(message.contains("send calls to the primary"), "{message}");
        }
        other => panic!("expected NotPrimary, got {other:?}"),
    }
    let grown = common::threads_now().saturating_sub(before);
    assert!(
        grown < IDLE / 3,
        "{grown} more threads with {IDLE} idle connections"
    );
    drop(idle);
    // Its role still answers: it is whole.
    let status = running.status().expect("the backup role answers");
    assert_eq!(status.role, "backup");
}
