//! Discovery against a local cluster: `tandem up` starts three nodes, and a client given one
//! backup's address alone learns every node's address, then calls through the list it learnt.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use tandem_client::{Client, ClientConfig, discover, discover_members};
use tandem_wire::{Frame, FrameBuffer, Hello, MAX_FRAME_LEN_DEFAULT, PeerKind, Role};
use tandem_workloads::debit_credit::DEBIT_CREDIT;
use up_support::Up;

use crate::up_support;

/// How long each seed may take to answer: far more than loopback needs, so a loaded machine
/// does not fail the test.
const TIMEOUT: Duration = Duration::from_secs(5);

/// The role `address` welcomes a client with, if it welcomes one.
fn role(address: SocketAddr) -> Option<Role> {
    let mut stream = TcpStream::connect(address).ok()?;
    stream.set_read_timeout(Some(TIMEOUT)).ok()?;
    let mut hello = Vec::new();
    tandem_wire::encode_hello(&mut hello, &Hello::new(PeerKind::Client, 0, 0));
    stream.write_all(&hello).ok()?;
    let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
    loop {
        match buffer.next_frame().ok()? {
            Some(Frame::Welcome(welcome)) => return Some(welcome.role),
            Some(_) => return None,
            None => {
                let read = stream.read(buffer.spare()).ok()?;
                if read == 0 {
                    return None;
                }
                buffer.filled(read);
            }
        }
    }
}

#[test]
fn one_backups_address_is_enough_to_learn_every_member() {
    let up = Up::start("discover");
    let mut all = up.clients_at.clone();
    all.sort();
    // A client needs a primary before a backup's role is settled: one call waits for both.
    let mut config = ClientConfig::new(up.clients_at.clone(), 0, 1);
    config.deadline = Duration::from_secs(10);
    let mut warm = Client::new(config).expect("a valid config");
    warm.call(DEBIT_CREDIT.0, &deposit(1), None)
        .expect("the cluster serves calls");
    let backup = *up
        .clients_at
        .iter()
        .find(|&&address| role(address) == Some(Role::Backup))
        .expect("one of three nodes is a backup");

    let mut learnt = discover(&[backup], 0, TIMEOUT).expect("the backup answers");
    learnt.sort();
    assert_eq!(learnt, all, "every member, each once");
    let discovery = discover_members(&[backup], 0, TIMEOUT).expect("the backup answers");
    assert_eq!(discovery.seed, backup);
    assert!(discovery.view >= 1, "{discovery:?}");
    let ids: Vec<u32> = discovery.members.iter().map(|m| m.node_id).collect();
    assert_eq!(ids, [1, 2, 3], "sorted by node id");

    // A client that knew only the backup calls through the list it learnt.
    let mut config = ClientConfig::new(vec![backup], 0, 2);
    config.deadline = Duration::from_secs(10);
    let mut client = Client::new(config).expect("a valid config");
    client.set_nodes(learnt).expect("a valid list");
    for seq in 1..=2 {
        let outcome = client.call(DEBIT_CREDIT.0, &deposit(2), None);
        assert_eq!(outcome.expect("the deposit commits").seq, seq);
    }
}

/// A deposit of 1 into `account` (teller 0 of branch 0).
fn deposit(account: u32) -> Vec<u8> {
    let mut args = Vec::new();
    for field in [account, 0, 0] {
        args.extend_from_slice(&field.to_le_bytes());
    }
    args.extend_from_slice(&1i32.to_le_bytes());
    args
}
