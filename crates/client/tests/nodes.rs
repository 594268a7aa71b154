//! A new node list for a long-lived client, and discovery, against a scripted primary: the
//! client's seqs go on in order, its pending call survives, and its connection to the
//! primary stays while the primary's address is still listed.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use tandem_client::{
    CallError, Client, ClientConfig, ConfigError, Member, Polled, SlotRange, discover_members,
};
use tandem_wire::{Frame, FrameBuffer, MAX_FRAME_LEN_DEFAULT, ReplyStatus, Role, Welcome};
use tandem_wire::{encode_members_answer, encode_reply, encode_welcome};

/// A primary (node 1 of view 1) that answers every call on any connection with a reply for
/// its seq and reports the seq, names itself and node 2 and the slot table of
/// `two_groups` to a `Members` frame, and counts the connections it accepted.
fn scripted_primary() -> (SocketAddr, mpsc::Receiver<u64>, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (called, calls) = mpsc::channel();
    let accepted = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&accepted);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(stream) = stream else { return };
            counted.fetch_add(1, Ordering::Relaxed);
            let called = called.clone();
            thread::spawn(move || serve(stream, address, &called));
        }
    });
    (address, calls, accepted)
}

/// The `Welcome` frame of node `node_id`, primary of view 1.
fn welcome_as_primary(node_id: u32) -> Vec<u8> {
    let welcome = Welcome {
        version: tandem_wire::PROTOCOL_VERSION,
        node_id,
        role: Role::Primary,
        view: 1,
        lsn: 0,
    };
    let mut out = Vec::new();
    encode_welcome(&mut out, &welcome);
    out
}

fn serve(mut stream: TcpStream, address: SocketAddr, called: &mpsc::Sender<u64>) {
    let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
    loop {
        while let Ok(Some(frame)) = buffer.next_frame() {
            let mut out = Vec::new();
            match frame {
                Frame::Hello(_) => out = welcome_as_primary(1),
                Frame::Call(call) => {
                    let _ = called.send(call.seq);
                    encode_reply(&mut out, call.seq, call.seq, ReplyStatus::Committed, b"");
                }
                Frame::Members => {
                    let members = [
                        Member {
                            node_id: 1,
                            address,
                        },
                        Member {
                            node_id: 2,
                            address: "[::1]:7002".parse().unwrap(),
                        },
                    ];
                    encode_members_answer(&mut out, 1, &members, &two_groups());
                }
                other => panic!("unexpected {other:?}"),
            }
            if stream.write_all(&out).is_err() {
                return;
            }
        }
        match stream.read(buffer.spare()) {
            Ok(0) | Err(_) => return,
            Ok(read) => buffer.filled(read),
        }
    }
}

/// The slot table the scripted primary sends: the slots split over groups 1 and 2.
fn two_groups() -> [SlotRange; 2] {
    [
        SlotRange {
            first: 0,
            last: 8191,
            group: 1,
        },
        SlotRange {
            first: 8192,
            last: 16383,
            group: 2,
        },
    ]
}

/// A loopback address nothing listens on (bound, then released).
fn closed_address() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap()
}

#[test]
fn a_new_node_list_keeps_the_seq_the_pending_call_and_the_primarys_connection() {
    let (primary, seqs, accepted) = scripted_primary();
    let dead = closed_address();
    let mut config = ClientConfig::new(vec![dead], 0, 1);
    config.deadline = Duration::from_millis(50);
    let mut client = Client::new(config).unwrap();
    let first = client.call(1, b"a", None);
    assert!(
        matches!(first, Err(CallError::Deadline { seq: 1, .. })),
        "no primary listed: {first:?}"
    );

    // A list the config would refuse changes nothing.
    assert_eq!(client.set_nodes(vec![]), Err(ConfigError::NoNodes));
    let twice = vec![primary, primary];
    assert_eq!(
        client.set_nodes(twice),
        Err(ConfigError::DuplicateNode(primary))
    );
    assert_eq!(client.config().nodes, [dead]);
    assert_eq!(client.pending_seq(), Some(1));

    client.set_nodes(vec![dead, primary]).unwrap();
    let resumed = client.resume().expect("call 1 is pending");
    assert_eq!(resumed.unwrap().seq, 1, "the same call, resent");

    // The primary's address moves to another place in the list: its connection stays.
    let connects = client.stats().connects;
    client.set_nodes(vec![primary, closed_address()]).unwrap();
    assert_eq!(client.primary(), Some((1, 1)));
    assert_eq!(client.call(1, b"b", None).unwrap().seq, 2);
    assert_eq!(client.stats().connects, connects, "no new connection");

    // Without the primary's address, the next call looks for one in the new list.
    client.set_nodes(vec![dead]).unwrap();
    assert_eq!(client.primary(), None);
    client.set_nodes(vec![primary]).unwrap();
    assert_eq!(client.call(1, b"c", None).unwrap().seq, 3);

    let seen: Vec<u64> = seqs.try_iter().collect();
    assert_eq!(seen, [1, 2, 3], "each seq once, in order");
    assert_eq!(accepted.load(Ordering::Relaxed), 2);
}

#[test]
fn discovery_asks_the_seeds_in_turn_until_one_answers() {
    let (primary, _, _) = scripted_primary();
    let dead = closed_address();
    let discovery = discover_members(&[dead, primary], 0, Duration::from_secs(5)).unwrap();
    assert_eq!(
        (discovery.seed, discovery.node, discovery.view),
        (primary, 1, 1)
    );
    let v6: SocketAddr = "[::1]:7002".parse().unwrap();
    assert_eq!(discovery.addresses(), [primary, v6]);
    assert_eq!(discovery.slots, two_groups());
}

/// A node that welcomes every client as primary of view 1 (node 3), answers the first call
/// it reads, and closes the connection on every later one without an answer; it counts the
/// calls it read.
fn vanishing_primary() -> (SocketAddr, Arc<AtomicU64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let read = Arc::new(AtomicU64::new(0));
    let counted = Arc::clone(&read);
    thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
            'conn: loop {
                while let Ok(Some(frame)) = buffer.next_frame() {
                    match frame {
                        Frame::Hello(_) => {
                            if stream.write_all(&welcome_as_primary(3)).is_err() {
                                break 'conn;
                            }
                        }
                        Frame::Call(call) if counted.fetch_add(1, Ordering::Relaxed) == 0 => {
                            let mut out = Vec::new();
                            encode_reply(&mut out, call.seq, 1, ReplyStatus::Committed, b"");
                            if stream.write_all(&out).is_err() {
                                break 'conn;
                            }
                        }
                        _ => break 'conn,
                    }
                }
                match stream.read(buffer.spare()) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buffer.filled(n),
                }
            }
        }
    });
    (address, read)
}

#[test]
fn calls_sent_together_are_received_in_any_order_and_a_lost_one_is_resent_with_its_seq() {
    let (primary, seqs, _) = scripted_primary();
    let mut a = Client::new(ClientConfig::new(vec![primary], 0, 1)).unwrap();
    let mut b = Client::new(ClientConfig::new(vec![primary], 0, 2)).unwrap();
    // Not yet connected: the send leaves the call for the receive to route.
    a.send(1, b"a", None).unwrap();
    assert_eq!(a.primary(), None);
    assert_eq!(a.receive().unwrap().seq, 1);
    b.call(1, b"b", None).unwrap();
    assert_eq!(seqs.try_iter().count(), 2);
    // Connected: both calls are on the wire before either answer is read.
    a.send(1, b"a2", None).unwrap();
    b.send(1, b"b2", None).unwrap();
    let sent = seqs.recv_timeout(Duration::from_secs(5)).unwrap();
    let also = seqs.recv_timeout(Duration::from_secs(5)).unwrap();
    assert_eq!(
        (sent, also),
        (2, 2),
        "each client's second call reached the primary"
    );
    assert_eq!(b.receive().unwrap().seq, 2);
    assert_eq!(a.receive().unwrap().seq, 2);
    assert_eq!(
        a.call(1, b"a3", None).unwrap().seq,
        3,
        "a call follows a receive"
    );

    // A primary that vanishes with a sent call: the receive finds the next primary and
    // sends the same seq there.
    let (vanishing, read) = vanishing_primary();
    let (next, next_seqs, _) = scripted_primary();
    let mut c = Client::new(ClientConfig::new(vec![vanishing, next], 0, 7)).unwrap();
    assert_eq!(c.call(1, b"warm", None).unwrap().node, 3);
    c.send(1, b"x", None).unwrap();
    let outcome = c.receive().unwrap();
    assert_eq!(
        (outcome.seq, outcome.node),
        (2, 1),
        "call 2, answered by node 1"
    );
    assert_eq!(
        read.load(Ordering::Relaxed),
        2,
        "node 3 read call 2 and vanished"
    );
    assert_eq!(
        next_seqs.try_iter().collect::<Vec<_>>(),
        [2],
        "resent with its seq"
    );
}

/// Polls `client`'s sent call until it is answered or stuck.
fn poll_until_settled(client: &mut Client) -> Polled {
    for _ in 0..5000 {
        match client.poll_receive() {
            Polled::Waiting => thread::sleep(Duration::from_millis(1)),
            settled => return settled,
        }
    }
    panic!("no answer within 5 s");
}

#[test]
fn a_call_polled_without_waiting_is_answered_or_handed_to_receive() {
    let (vanishing, read) = vanishing_primary();
    let (next, next_seqs, _) = scripted_primary();
    let mut client = Client::new(ClientConfig::new(vec![vanishing, next], 0, 9)).unwrap();
    assert!(
        !client.send(1, b"a", None).unwrap(),
        "no connection yet: not on the wire"
    );
    assert!(matches!(client.poll_receive(), Polled::Stuck));
    assert_eq!(
        client.receive().unwrap().node,
        3,
        "node 3 answers its first call"
    );
    assert!(client.nonblocking_fd().is_some());
    // Node 3 reads call 2 and vanishes: the poll hands the call to receive, which sends the
    // same seq to node 1.
    assert!(client.send(1, b"b", None).unwrap());
    assert!(matches!(poll_until_settled(&mut client), Polled::Stuck));
    let outcome = client.receive().unwrap();
    assert_eq!((outcome.seq, outcome.node), (2, 1));
    assert_eq!(read.load(Ordering::Relaxed), 2);
    // On node 1, in non-blocking mode, the answer comes to the poll.
    assert!(client.nonblocking_fd().is_some());
    assert!(client.send(1, b"c", None).unwrap());
    match poll_until_settled(&mut client) {
        Polled::Answered(Ok(outcome)) => assert_eq!((outcome.seq, outcome.node), (3, 1)),
        other => panic!("call 3: {other:?}"),
    }
    // A blocking call after polling works as ever.
    assert_eq!(client.call(1, b"d", None).unwrap().seq, 4);
    assert_eq!(next_seqs.try_iter().collect::<Vec<_>>(), [2, 3, 4]);
}
