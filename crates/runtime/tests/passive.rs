//! A passive group's pair run by the one node path: the backup keeps the primary's memory
//! (written through by the primary's segment), not a database it could run a command on, so
//! it sends readers to the primary.

use crate::common;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

use tandem_redis::model::RedisModel;
use tandem_runtime::cluster::RunningNode;
use tandem_runtime::config::{Mode, NodeConfig, PeerConfig, Role};

/// Node `id` of a passive 2-safe pair serving the Redis model (1 the primary).
fn passive_config(id: u32, native: SocketAddr, resp: SocketAddr, peer: PeerConfig) -> NodeConfig {
    common::pair_config(id, native, peer, |config| {
        config.group.workload = "redis".into();
        config.group.db_mib = 16;
        config.group.mode = Mode::Passive;
        config.resp_listen = Some(resp);
        config.log = None;
    })
}

fn start(config: &NodeConfig, native: TcpListener, resp: TcpListener) -> RunningNode {
    let model = RedisModel::new(config.group.db_mib << 20).expect("the database fits");
    common::start(config, native, Some(resp), Box::new(model))
}

/// Sends one command and returns its reply's first line (every reply here is one line).
fn command(address: SocketAddr, args: &[&str]) -> String {
    let mut stream = TcpStream::connect(address).expect("connects");
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let mut request = format!("*{}\r\n", args.len());
    for arg in args {
        request.push_str(&format!("${}\r\n{arg}\r\n", arg.len()));
    }
    stream.write_all(request.as_bytes()).unwrap();
    let mut reply = Vec::new();
    let mut byte = [0u8; 1];
    while !reply.ends_with(b"\r\n") {
        stream.read_exact(&mut byte).expect("a whole reply line");
        reply.push(byte[0]);
    }
    String::from_utf8(reply).unwrap().trim_end().to_owned()
}

#[test]
fn a_passive_backup_mirrors_the_primary_and_sends_its_readers_there() {
    let bind = || TcpListener::bind("127.0.0.1:0").expect("a loopback port");
    let (native_1, native_2, resp_1, resp_2) = (bind(), bind(), bind(), bind());
    let address = |listener: &TcpListener| listener.local_addr().unwrap();
    let peer = |node_id, native, resp, role| PeerConfig {
        node_id,
        address: native,
        role: Some(role),
        resp: Some(resp),
    };
    let (resp_1_address, resp_2_address) = (address(&resp_1), address(&resp_2));
    let primary_peer = peer(1, address(&native_1), resp_1_address, Role::Primary);
    let backup_peer = peer(2, address(&native_2), resp_2_address, Role::Backup);
    let config_2 = passive_config(2, address(&native_2), resp_2_address, primary_peer);
    let config_1 = passive_config(1, address(&native_1), resp_1_address, backup_peer);
    let backup = start(&config_2, native_2, resp_2);
    let primary = start(&config_1, native_1, resp_1);

    assert_eq!(command(resp_1_address, &["SET", "k", "v"]), "+OK");
    assert_eq!(command(resp_1_address, &["INCR", "n"]), ":1");
    let lsn = primary.status().expect("the primary answers").lsn;
    let deadline = Instant::now() + Duration::from_secs(10);
    while backup.status().expect("the backup answers").lsn_applied < lsn {
        assert!(
            Instant::now() < deadline,
            "the backup never applied LSN {lsn}"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // The backup's checksum is its mirror's recovery: the primary's memory, byte for byte.
    let (ours, theirs) = (primary.checksum().unwrap(), backup.checksum().unwrap());
    assert_eq!((ours.lsn, ours.crc32c), (theirs.lsn, theirs.crc32c));
    assert_eq!(theirs.error, None);

    let refused = command(resp_2_address, &["GET", "k"]);
    assert!(
        refused.starts_with("-READONLY backup 2 keeps a passive copy and serves no reads")
            && refused.contains(&resp_1_address.to_string()),
        "{refused}"
    );
    assert!(command(resp_2_address, &["SET", "k", "w"]).starts_with("-READONLY"));
    assert_eq!(command(resp_1_address, &["GET", "k"]), "$1");
}
