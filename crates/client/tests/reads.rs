//! The stub's reads against a scripted backup: each `Read` frame carries the highest LSN the
//! client has seen, or the one the caller passes if higher.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc;
use std::thread;

use tandem_client::{Client, ClientConfig, ReplyStatus};
use tandem_wire::{Frame, FrameBuffer, MAX_FRAME_LEN_DEFAULT, Role, Welcome};
use tandem_wire::{encode_reply, encode_welcome};

/// A backup that welcomes one client, then answers each read at LSN `lsn_reply` and reports
/// the `min_lsn` it asked for.
fn scripted_backup(lsn_reply: u64) -> (std::net::SocketAddr, mpsc::Receiver<u64>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (asked, asks) = mpsc::channel();
    thread::spawn(move || {
        let (mut stream, _) = listener.accept().unwrap();
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        let mut welcomed = false;
        loop {
            while let Some(frame) = buffer.next_frame().unwrap() {
                let mut out = Vec::new();
                match frame {
                    Frame::Hello(_) if !welcomed => {
                        welcomed = true;
                        let welcome = Welcome {
                            version: tandem_wire::PROTOCOL_VERSION,
                            node_id: 2,
                            role: Role::Backup,
                            view: 1,
                            lsn: 0,
                        };
                        encode_welcome(&mut out, &welcome);
                    }
                    Frame::Read(read) => {
                        asked.send(read.min_lsn).unwrap();
                        let balance = 5i32.to_le_bytes();
                        encode_reply(
                            &mut out,
                            read.seq,
                            lsn_reply,
                            ReplyStatus::Committed,
                            &balance,
                        );
                    }
                    other => panic!("unexpected {other:?}"),
                }
                stream.write_all(&out).unwrap();
            }
            if !fill(&mut stream, &mut buffer) {
                return;
            }
        }
    });
    (address, asks)
}

fn fill(stream: &mut TcpStream, buffer: &mut FrameBuffer) -> bool {
    match stream.read(buffer.spare()) {
        Ok(0) | Err(_) => false,
        Ok(read) => {
            buffer.filled(read);
            true
        }
    }
}

#[test]
fn a_read_asks_for_what_the_client_has_seen_or_was_told() {
    let (address, asks) = scripted_backup(90);
    let mut client = Client::new(ClientConfig::new(vec![address], 0, 1)).unwrap();
    let outcome = client.read_after(1, &0u32.to_le_bytes(), 77).unwrap();
    assert_eq!(asks.recv().unwrap(), 77, "the LSN the caller passed");
    assert_eq!((outcome.lsn, outcome.node), (90, 2));
    assert_eq!(client.lsn_seen(), 90, "a read's LSN counts as seen");
    client.read(1, &0u32.to_le_bytes()).unwrap();
    assert_eq!(asks.recv().unwrap(), 90, "what the client has seen");
    client.read_after(1, &0u32.to_le_bytes(), 12).unwrap();
    assert_eq!(asks.recv().unwrap(), 90, "never less than what it has seen");
    assert_eq!(client.stats().reads_at_backups, 3);
}
