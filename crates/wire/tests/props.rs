//! Property tests: round trips, prefixes, arbitrary bytes and split streams.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;

use proptest::prelude::*;
use tandem_replication::{AckCount, Message, PagesChunk, ReadConsistency, Safety};
use tandem_wire::{
    Call, ErrorCode, Frame, FrameBuffer, FrameError, Hello, MAX_FRAME_LEN_DEFAULT, MEMBERS_MAX,
    Member, MembersAnswer, PeerKind, Read, Reply, ReplyStatus, Role, Welcome, decode_frame,
    encode_call, encode_error, encode_hello, encode_members, encode_members_answer, encode_peer,
    encode_read, encode_reply, encode_welcome,
};

fn acks() -> impl Strategy<Value = AckCount> {
    prop_oneof![Just(AckCount::All), (1..=u32::MAX).prop_map(AckCount::Of)]
}

fn safety() -> impl Strategy<Value = Option<Safety>> {
    prop_oneof![
        Just(None),
        Just(Some(Safety::OneSafe)),
        (1..=u64::MAX).prop_map(|n| Some(Safety::Bounded(n))),
        acks().prop_map(|k| Some(Safety::TwoSafe(k))),
        acks().prop_map(|k| Some(Safety::TwoSafeApplied(k))),
    ]
}

fn message() -> impl Strategy<Value = Message> {
    prop_oneof![
        prop::collection::vec(any::<u8>(), 0..300).prop_map(|b| Message::Batch(Arc::from(b))),
        (any::<u64>(), any::<u64>(), any::<u64>(), any::<u64>()).prop_map(
            |(view, lsn_committed, lsn_released, tick)| Message::Heartbeat {
                view,
                lsn_committed,
                lsn_released,
                tick_sent: tick,
            }
        ),
        (
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>(),
            any::<u64>()
        )
            .prop_map(|(view, r, a, d, tick)| Message::Ack {
                view,
                lsn_received: r,
                lsn_applied: a,
                lsn_durable: d,
                tick_echoed: tick,
            }),
        (any::<u64>(), any::<u64>())
            .prop_map(|(view, lsn_received)| Message::Nack { view, lsn_received }),
        any::<u64>().prop_map(|view| Message::StaleView { view }),
        any::<u64>().prop_map(|view| Message::Pulse { view }),
        (any::<u64>(), any::<u64>()).prop_map(|(view, id)| Message::ReadIndex { view, id }),
        (any::<u64>(), any::<u64>(), any::<u64>()).prop_map(|(view, id, lsn_released)| {
            Message::ReadIndexed {
                view,
                id,
                lsn_released,
            }
        }),
        (
            any::<u64>(),
            any::<u64>(),
            prop::collection::btree_set(any::<u32>(), 0..50)
        )
            .prop_map(|(view, lsn_received, pages)| Message::Diverged {
                view,
                lsn_received,
                pages: pages.into_iter().collect(),
            }),
        (
            (any::<u64>(), any::<u64>(), any::<u64>()),
            (any::<u32>(), any::<u32>(), any::<u32>()),
            prop::collection::vec(any::<u8>(), 0..300)
        )
            .prop_map(|((view, lsn_from, lsn), (index, count, crc), pages)| {
                Message::Pages(PagesChunk {
                    view,
                    lsn_from,
                    lsn,
                    index,
                    count,
                    crc,
                    pages: Arc::from(pages),
                })
            }),
    ]
}

/// A dialable address of either family (IPv6 with a scope id, without flow info, which the
/// wire does not carry).
fn address() -> impl Strategy<Value = SocketAddr> {
    prop_oneof![
        (any::<u32>(), 1..=u16::MAX)
            .prop_map(|(ip, port)| { SocketAddr::V4(SocketAddrV4::new(Ipv4Addr::from(ip), port)) }),
        (any::<u128>(), 1..=u16::MAX, any::<u32>()).prop_map(|(ip, port, scope_id)| {
            SocketAddr::V6(SocketAddrV6::new(Ipv6Addr::from(ip), port, 0, scope_id))
        }),
    ]
}

/// A valid answer: 1 to `MEMBERS_MAX` members with distinct node ids, sorted.
fn members_answer() -> impl Strategy<Value = MembersAnswer> {
    let members = prop::collection::btree_map(any::<u32>(), address(), 1..=MEMBERS_MAX);
    (any::<u64>(), members).prop_map(|(view, members)| MembersAnswer {
        view,
        members: members
            .into_iter()
            .map(|(node_id, address)| Member { node_id, address })
            .collect(),
    })
}

fn status() -> impl Strategy<Value = ReplyStatus> {
    prop_oneof![Just(ReplyStatus::Committed), Just(ReplyStatus::RolledBack)]
}

/// One encoded frame of any type.
fn encoded_frame() -> impl Strategy<Value = Vec<u8>> {
    let bytes = || prop::collection::vec(any::<u8>(), 0..200);
    prop_oneof![
        (any::<u64>(), any::<u16>(), safety(), bytes()).prop_map(|(seq, proc_id, s, args)| {
            let mut out = Vec::new();
            encode_call(&mut out, seq, proc_id, s, &args);
            out
        }),
        (any::<u64>(), any::<u64>(), status(), bytes()).prop_map(|(seq, lsn, st, body)| {
            let mut out = Vec::new();
            encode_reply(&mut out, seq, lsn, st, &body);
            out
        }),
        message().prop_map(|m| {
            let mut out = Vec::new();
            encode_peer(&mut out, &m);
            out
        }),
        (any::<bool>(), any::<u64>(), any::<u32>()).prop_map(|(replica, id, group)| {
            let peer = if replica {
                PeerKind::Replica
            } else {
                PeerKind::Client
            };
            let mut out = Vec::new();
            encode_hello(&mut out, &Hello::new(peer, id, group));
            out
        }),
        (any::<u32>(), any::<bool>(), any::<u64>(), any::<u64>()).prop_map(
            |(node_id, primary, view, lsn)| {
                let role = if primary { Role::Primary } else { Role::Backup };
                let welcome = Welcome {
                    version: tandem_wire::PROTOCOL_VERSION,
                    node_id,
                    role,
                    view,
                    lsn,
                };
                let mut out = Vec::new();
                encode_welcome(&mut out, &welcome);
                out
            }
        ),
        ".{0,40}".prop_map(|message| {
            let mut out = Vec::new();
            encode_error(&mut out, ErrorCode::BadArgs, &message);
            out
        }),
        Just({
            let mut out = Vec::new();
            encode_members(&mut out);
            out
        }),
        members_answer().prop_map(|answer| {
            let mut out = Vec::new();
            encode_members_answer(&mut out, answer.view, &answer.members);
            out
        }),
    ]
}

fn decode_whole(bytes: &[u8]) -> Frame<'_> {
    let (frame, used) = decode_frame(bytes, MAX_FRAME_LEN_DEFAULT).unwrap().unwrap();
    assert_eq!(used, bytes.len());
    frame
}

proptest! {
    #[test]
    fn call_round_trips(
        seq in any::<u64>(),
        proc_id in any::<u16>(),
        safety in safety(),
        args in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut out = Vec::new();
        encode_call(&mut out, seq, proc_id, safety, &args);
        let call = Call { seq, proc_id, safety, args: &args };
        prop_assert_eq!(decode_whole(&out), Frame::Call(call));
    }

    #[test]
    fn read_round_trips(
        seq in any::<u64>(),
        proc_id in any::<u16>(),
        min_lsn in any::<u64>(),
        consistency in prop_oneof![
            Just(ReadConsistency::Linearizable),
            Just(ReadConsistency::Session),
            (1..=u32::MAX).prop_map(|staleness_ms| ReadConsistency::Bounded { staleness_ms }),
        ],
        args in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut out = Vec::new();
        encode_read(&mut out, seq, proc_id, min_lsn, consistency, &args);
        let read = Read { seq, proc_id, min_lsn, consistency, args: &args };
        prop_assert_eq!(decode_whole(&out), Frame::Read(read));
    }

    #[test]
    fn reply_round_trips(
        seq in any::<u64>(),
        lsn in any::<u64>(),
        status in status(),
        body in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut out = Vec::new();
        encode_reply(&mut out, seq, lsn, status, &body);
        let reply = Reply { seq, lsn, status, body: &body };
        prop_assert_eq!(decode_whole(&out), Frame::Reply(reply));
    }

    #[test]
    fn members_answer_round_trips(answer in members_answer()) {
        let mut out = Vec::new();
        encode_members_answer(&mut out, answer.view, &answer.members);
        prop_assert_eq!(decode_whole(&out), Frame::MembersAnswer(answer));
    }

    #[test]
    fn members_answer_count_is_checked_against_cap_and_length(
        answer in members_answer(),
        count in any::<u16>(),
        cut in 0..27usize,
    ) {
        // Any count but the true one is refused, whatever the cap; so is a body cut short.
        let mut out = Vec::new();
        encode_members_answer(&mut out, answer.view, &answer.members);
        let mut recounted = out.clone();
        recounted[13..15].copy_from_slice(&count.to_le_bytes());
        let decoded = decode_frame(&recounted, MAX_FRAME_LEN_DEFAULT);
        if usize::from(count) == answer.members.len() {
            prop_assert!(decoded.is_ok());
        } else {
            let err = decoded.unwrap_err().to_string();
            prop_assert!(err.contains("'count'") || err.contains("'members'"), "{}", err);
        }
        let kept = out.len() - 1 - cut;
        out.truncate(kept);
        out[..4].copy_from_slice(&u32::try_from(kept - 4).unwrap().to_le_bytes());
        let err = decode_frame(&out, MAX_FRAME_LEN_DEFAULT).unwrap_err().to_string();
        prop_assert!(err.contains("'members'") || err.contains("'header'"), "{}", err);
    }

    #[test]
    fn peer_round_trips(message in message()) {
        let mut out = Vec::new();
        encode_peer(&mut out, &message);
        prop_assert_eq!(decode_whole(&out), Frame::Peer(message));
    }

    #[test]
    fn every_strict_prefix_needs_more(frame in encoded_frame()) {
        for end in 0..frame.len() {
            prop_assert_eq!(decode_frame(&frame[..end], MAX_FRAME_LEN_DEFAULT), Ok(None));
        }
        let mut again = Vec::new();
        decode_whole(&frame).encode(&mut again);
        prop_assert_eq!(again, frame);
    }

    #[test]
    fn oversize_is_refused_from_the_length_alone(max in 0..1000usize, extra in 1..1000u32) {
        let len = max as u32 + extra;
        let err = decode_frame(&len.to_le_bytes(), max).unwrap_err();
        prop_assert_eq!(err, FrameError::TooLarge { len, max });
    }

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in prop::collection::vec(any::<u8>(), 0..512),
        max in prop_oneof![Just(MAX_FRAME_LEN_DEFAULT), 0..600usize],
    ) {
        if let Ok(Some((_, used))) = decode_frame(&bytes, max) {
            prop_assert!(used <= bytes.len());
        }
    }

    #[test]
    fn arbitrary_bodies_never_panic(
        ty in prop_oneof![
            Just(0x01u8), Just(0x02), Just(0x03), Just(0x10), Just(0x11), Just(0x12), Just(0x13),
            Just(0x14), Just(0x20), any::<u8>()
        ],
        lead in prop::collection::vec(0..8u8, 0..3),
        body in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        // Small leading bytes reach past the sub-tag and the postcard enum indices.
        let len = u32::try_from(1 + lead.len() + body.len()).unwrap();
        let mut frame = len.to_le_bytes().to_vec();
        frame.push(ty);
        frame.extend_from_slice(&lead);
        frame.extend_from_slice(&body);
        match decode_frame(&frame, MAX_FRAME_LEN_DEFAULT) {
            Ok(Some((decoded, used))) => {
                prop_assert_eq!(used, frame.len());
                // What decodes is encodable, and decodes again to the same value (as the
                // fuzz target checks too).
                let mut again = Vec::new();
                decoded.encode(&mut again);
                prop_assert_eq!(decode_whole(&again), decoded);
            }
            Ok(None) => prop_assert!(false, "a whole frame needs no more bytes"),
            Err(err) => prop_assert!(!err.to_string().is_empty()),
        }
    }

    #[test]
    fn split_stream_gives_the_same_frames(
        frames in prop::collection::vec(encoded_frame(), 1..60),
        chunks in prop::collection::vec(1..400usize, 1..50),
    ) {
        let stream = frames.concat();
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        let mut decoded = Vec::new();
        let mut at = 0;
        for chunk in chunks.iter().cycle() {
            if at == stream.len() {
                break;
            }
            let spare = buffer.spare();
            let n = spare.len().min(*chunk).min(stream.len() - at);
            spare[..n].copy_from_slice(&stream[at..at + n]);
            buffer.filled(n);
            at += n;
            while let Some(frame) = buffer.next_frame().unwrap() {
                let mut out = Vec::new();
                frame.encode(&mut out);
                decoded.push(out);
            }
        }
        prop_assert_eq!(buffer.buffered(), 0);
        prop_assert_eq!(decoded, frames);
    }
}
