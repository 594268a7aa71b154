//! Property tests: round trips, prefixes, arbitrary bytes and split streams.

use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};
use std::sync::Arc;

use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use tandem_replication::{AckCount, Message, PagesChunk, ReadConsistency, Safety};
use tandem_wire::{
    Accepting, Auth, AuthStep, Call, ClusterSecret, Connecting, ErrorCode, Frame, FrameBuffer,
    FrameError, FrameOpener, FrameSealer, Hello, MAX_FRAME_LEN_DEFAULT, MEMBERS_MAX, Member,
    MembersAnswer, NONCE_LEN, PeerKind, Read, RecordCipher, RecordOpener, RecordSealer, Reply,
    ReplyStatus, Role, SECRET_LEN_MIN, SLOT_COUNT, SlotRange, TAG_LEN, TrafficKey, Welcome,
    check_client_proof, client_proof, decode_frame, encode_auth, encode_call, encode_client_proof,
    encode_error, encode_hello, encode_members, encode_members_answer, encode_peer, encode_read,
    encode_reply, encode_welcome,
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

/// The most ranges `slot_table` makes: enough to vary, few enough to keep frames small.
const SPLIT_RANGES_MAX: usize = 40;

/// A valid slot table: none (a cluster of one group), or the slots split where a range
/// starts, at distinct slots past 0, each range given a group.
fn slot_table() -> impl Strategy<Value = Vec<SlotRange>> {
    let starts = prop::collection::btree_set(1..SLOT_COUNT, 0..SPLIT_RANGES_MAX);
    let groups = prop::collection::vec(any::<u32>(), SPLIT_RANGES_MAX);
    let split = (starts, groups).prop_map(|(starts, groups)| {
        let firsts = std::iter::once(0).chain(starts.iter().copied());
        let lasts = (starts.iter().map(|start| start - 1)).chain(std::iter::once(SLOT_COUNT - 1));
        (firsts.zip(lasts).zip(groups))
            .map(|((first, last), group)| SlotRange { first, last, group })
            .collect()
    });
    prop_oneof![Just(Vec::new()), split]
}

/// A valid answer: 1 to `MEMBERS_MAX` members with distinct node ids, sorted, and a slot
/// table.
fn members_answer() -> impl Strategy<Value = MembersAnswer> {
    let members = prop::collection::btree_map(any::<u32>(), address(), 1..=MEMBERS_MAX);
    (any::<u64>(), members, slot_table()).prop_map(|(view, members, slots)| MembersAnswer {
        view,
        members: members
            .into_iter()
            .map(|(node_id, address)| Member { node_id, address })
            .collect(),
        slots,
    })
}

fn status() -> impl Strategy<Value = ReplyStatus> {
    prop_oneof![
        Just(ReplyStatus::Committed),
        Just(ReplyStatus::RolledBack),
        Just(ReplyStatus::CommittedReplyNotKept)
    ]
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
        (any::<u32>(), message()).prop_map(|(group, m)| {
            let mut out = Vec::new();
            encode_peer(&mut out, group, &m);
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
            encode_members_answer(&mut out, answer.view, &answer.members, &answer.slots);
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
        encode_members_answer(&mut out, answer.view, &answer.members, &answer.slots);
        prop_assert_eq!(decode_whole(&out), Frame::MembersAnswer(answer));
    }

    #[test]
    fn members_answer_count_is_checked_against_cap_and_length(
        answer in members_answer(),
        count in any::<u16>(),
        cut in 0..27usize,
    ) {
        // Any count but the true one is refused, whatever the cap: the members no longer fit
        // the body, or the bytes after where they would end are not a slot table that ends
        // with the body (they could only be for members and ranges crafted to line up, which
        // these are not). A body cut short is refused too.
        let mut out = Vec::new();
        encode_members_answer(&mut out, answer.view, &answer.members, &answer.slots);
        let mut recounted = out.clone();
        recounted[13..15].copy_from_slice(&count.to_le_bytes());
        let decoded = decode_frame(&recounted, MAX_FRAME_LEN_DEFAULT);
        if usize::from(count) == answer.members.len() {
            prop_assert!(decoded.is_ok());
        } else {
            let err = decoded.unwrap_err().to_string();
            let named = ["'count'", "'members'", "'slots'"];
            prop_assert!(named.iter().any(|field| err.contains(field)), "{}", err);
        }
        let kept = out.len() - 1 - cut;
        out.truncate(kept);
        out[..4].copy_from_slice(&u32::try_from(kept - 4).unwrap().to_le_bytes());
        let err = decode_frame(&out, MAX_FRAME_LEN_DEFAULT).unwrap_err().to_string();
        let named = ["'header'", "'members'", "'slots'"];
        prop_assert!(named.iter().any(|field| err.contains(field)), "{}", err);
    }

    #[test]
    fn a_slot_range_moved_by_one_slot_is_refused(
        answer in members_answer(),
        which in any::<prop::sample::Index>(),
        last in any::<bool>(),
        later in any::<bool>(),
    ) {
        // Moving either end of any range leaves a slot out, holds one twice, starts the table
        // past 0, ends it short of or past the last slot, or turns the range inside out.
        prop_assume!(!answer.slots.is_empty());
        let mut out = Vec::new();
        encode_members_answer(&mut out, answer.view, &answer.members, &answer.slots);
        let first_entry = 5 + 10 + 27 * answer.members.len() + 2;
        let at = first_entry + 8 * which.index(answer.slots.len()) + if last { 2 } else { 0 };
        let slot = u16::from_le_bytes([out[at], out[at + 1]]);
        let moved = if later { slot.wrapping_add(1) } else { slot.wrapping_sub(1) };
        out[at..at + 2].copy_from_slice(&moved.to_le_bytes());
        let err = decode_frame(&out, MAX_FRAME_LEN_DEFAULT).unwrap_err().to_string();
        prop_assert!(err.contains("'slots'"), "{}", err);
    }

    #[test]
    fn peer_round_trips(group in any::<u32>(), message in message()) {
        let mut out = Vec::new();
        encode_peer(&mut out, group, &message);
        prop_assert_eq!(decode_whole(&out), Frame::Peer { group, message });
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

// ---------------------------------------------------------------------------------------
// Fuzz targets (docs/fuzzing.md): `TANDEM_FUZZ_CASES` cases each, a few seconds' worth in a
// debug build by default. `crates/wire/fuzz` runs the first under cargo-fuzz (nightly).

use tandem_fuzzkit::{config as fuzz_config, mutate};

/// Cases a wire fuzz target runs by default.
const WIRE_FUZZ_CASES: u32 = 16384;

/// Small enough that the length check and the buffer's growth are both reached.
const FUZZ_FRAME_LEN_MAX: usize = 1 << 17;

type Edits = Vec<(prop::sample::Index, u8, u8)>;

fn edits() -> impl Strategy<Value = Edits> {
    prop::collection::vec(
        (any::<prop::sample::Index>(), any::<u8>(), any::<u8>()),
        0..4,
    )
}

/// Frames of every type, the handshake's and the client proof's included.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    let auth = (
        prop_oneof![
            Just(AuthStep::Challenge),
            Just(AuthStep::Proof),
            Just(AuthStep::Confirm),
            Just(AuthStep::StartTls),
        ],
        any::<[u8; NONCE_LEN]>(),
        any::<[u8; TAG_LEN]>(),
    )
        .prop_map(|(step, nonce, proof)| {
            let mut out = Vec::new();
            encode_auth(&mut out, &Auth { step, nonce, proof });
            out
        });
    let client_proof = ("[a-z]{0,12}", any::<[u8; TAG_LEN]>()).prop_map(|(user, proof)| {
        let mut out = Vec::new();
        encode_client_proof(&mut out, &user, &proof);
        out
    });
    prop_oneof![4 => encoded_frame(), 1 => auth, 1 => client_proof]
}

/// A stream a link might receive: arbitrary bytes, or whole frames with bytes flipped, cut or
/// inserted.
fn link_stream() -> impl Strategy<Value = Vec<u8>> {
    let frames = (prop::collection::vec(any_frame(), 0..12), edits())
        .prop_map(|(frames, edits)| mutate(frames.concat(), &edits));
    prop_oneof![prop::collection::vec(any::<u8>(), 0..1024), frames]
}

/// The frames `decode_frame` finds one after another at the front of `bytes`, each encoded
/// again (checking that it decodes again, equal, from that encoding).
fn frames_decoded_directly(bytes: &[u8], max: usize) -> Result<Vec<Vec<u8>>, TestCaseError> {
    let mut frames = Vec::new();
    let mut at = 0;
    while let Ok(Some((frame, used))) = decode_frame(&bytes[at..], max) {
        prop_assert!(used >= 5 && used <= bytes.len() - at);
        let mut again = Vec::new();
        frame.encode(&mut again);
        let decoded_again = decode_frame(&again, max).map(|found| found.map(|(f, _)| f));
        prop_assert_eq!(decoded_again, Ok(Some(frame)));
        frames.push(again);
        at += used;
    }
    Ok(frames)
}

/// Feeds `bytes` to `buffer` in reads of the sizes `reads` cycles through, and gives the
/// frames it yields (encoded again) until it runs out of bytes or refuses one.
fn frames_through_buffer(
    buffer: &mut FrameBuffer,
    bytes: &[u8],
    reads: &[usize],
) -> (Vec<Vec<u8>>, Option<FrameError>) {
    let mut frames = Vec::new();
    let mut fed = 0;
    for &read in reads.iter().cycle() {
        loop {
            match buffer.next_frame() {
                Ok(Some(frame)) => {
                    let mut out = Vec::new();
                    frame.encode(&mut out);
                    frames.push(out);
                }
                Ok(None) => break,
                Err(error) => return (frames, Some(error)),
            }
        }
        if fed == bytes.len() {
            return (frames, None);
        }
        let spare = buffer.spare();
        let n = spare.len().min(read).min(bytes.len() - fed);
        spare[..n].copy_from_slice(&bytes[fed..fed + n]);
        buffer.filled(n);
        fed += n;
    }
    unreachable!("the reads cycle until the bytes are fed")
}

fn reads() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(1..4096usize, 1..8)
}

/// A handshake between two nodes that know `secret`, as the runtime runs it: the link's
/// sealers and openers, connector's first.
fn handshake(secret: &ClusterSecret) -> ((FrameSealer, FrameOpener), (FrameSealer, FrameOpener)) {
    let hello = Hello::new(PeerKind::Replica, 2, 9);
    let connecting = Connecting::new(secret, &hello, [1; NONCE_LEN]);
    let accepting = Accepting::new(secret, &hello, [2; NONCE_LEN]);
    let (proof, awaiting) = connecting.answer(&accepting.challenge()).unwrap();
    let (confirm, acceptor_sealer, acceptor_opener) = accepting.check(&proof).unwrap();
    let (connector_sealer, connector_opener) = awaiting.confirm(&confirm).unwrap();
    (
        (connector_sealer, connector_opener),
        (acceptor_sealer, acceptor_opener),
    )
}

proptest! {
    #![proptest_config(fuzz_config(WIRE_FUZZ_CASES))]

    /// Fuzz target (as `crates/wire/fuzz`'s `decode_frame`): arbitrary and mutated streams
    /// through `decode_frame` and through `FrameBuffer` in reads of any size; neither panics,
    /// both see the same frames, and every frame decodes again, equal, from its encoding.
    #[test]
    fn fuzz_decode_frame_and_frame_buffer_agree(
        bytes in link_stream(),
        reads in reads(),
        max in prop_oneof![Just(FUZZ_FRAME_LEN_MAX), 0..2048usize],
    ) {
        let direct = frames_decoded_directly(&bytes, max)?;
        let (buffered, _) = frames_through_buffer(&mut FrameBuffer::new(max), &bytes, &reads);
        prop_assert_eq!(direct, buffered);
    }

    /// Fuzz target: an authenticated link's buffer yields exactly the frames the peer sealed,
    /// in order, and nothing after the first byte that is not the peer's: mutated sealed
    /// streams end in `BadMac` (or want more bytes), arbitrary bytes never make a frame.
    #[test]
    fn fuzz_authenticated_buffer_yields_only_sealed_frames(
        frames in prop::collection::vec(encoded_frame(), 0..8),
        edits in edits(),
        forged in prop::collection::vec(any::<u8>(), 0..512),
        reads in reads(),
    ) {
        let secret = ClusterSecret::new(&[7; SECRET_LEN_MIN]).unwrap();
        let ((mut sealer, _), (_, opener)) = handshake(&secret);
        let mut sealed = Vec::new();
        sealer.seal_frames(&frames.concat(), &mut sealed);
        let received = mutate(sealed.clone(), &edits);
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        buffer.authenticate(opener);
        let (yielded, error) = frames_through_buffer(&mut buffer, &received, &reads);
        prop_assert!(frames.starts_with(&yielded), "a frame the peer never sealed");
        if received == sealed {
            prop_assert_eq!(&yielded, &frames);
        }
        if let Some(error) = error {
            prop_assert!(matches!(error, FrameError::BadMac { .. } | FrameError::TooLarge { .. }), "{error:?}");
        }
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        buffer.authenticate(handshake(&secret).1.1);
        let (yielded, _) = frames_through_buffer(&mut buffer, &forged, &reads);
        prop_assert!(yielded.is_empty(), "a forged frame was taken");
    }

    /// Fuzz target: the handshake's steps, given any `Auth` frame a peer might send (decoded
    /// from arbitrary or mutated bytes), refuse every proof but the one the secret makes.
    #[test]
    fn fuzz_handshake_refuses_what_the_secret_did_not_make(
        frame in any_frame(),
        edits in edits(),
        password in prop::collection::vec(any::<u8>(), 0..16),
    ) {
        let secret = ClusterSecret::new(&[7; SECRET_LEN_MIN]).unwrap();
        let hello = Hello::new(PeerKind::Replica, 2, 9);
        let bytes = mutate(frame, &edits);
        let Ok(Some((decoded, _))) = decode_frame(&bytes, MAX_FRAME_LEN_DEFAULT) else {
            return Ok(());
        };
        match decoded {
            Frame::Auth(auth) => {
                let accepting = Accepting::new(&secret, &hello, [2; NONCE_LEN]);
                prop_assert!(accepting.check(&auth).is_err());
                let connecting = Connecting::new(&secret, &hello, [1; NONCE_LEN]);
                if let Ok((_, awaiting)) = connecting.answer(&auth) {
                    prop_assert!(awaiting.confirm(&auth).is_err());
                }
            }
            Frame::ClientProof(proof) => {
                let nonce = [3; NONCE_LEN];
                let genuine = client_proof(&password, &hello, &nonce);
                let checks = check_client_proof(&password, &hello, &nonce, &proof.proof);
                prop_assert_eq!(checks, proof.proof == genuine);
            }
            _ => {}
        }
    }

    /// Fuzz target: a TLS link's buffer yields exactly the plaintext frames the peer sealed
    /// in records, and ends the link (`Tls`) at the first record that is not the peer's.
    #[test]
    fn fuzz_tls_buffer_yields_only_sealed_frames(
        frames in prop::collection::vec(encoded_frame(), 0..8),
        edits in edits(),
        reads in reads(),
        cipher in prop_oneof![
            Just(RecordCipher::Aes128Gcm),
            Just(RecordCipher::Aes256Gcm),
            Just(RecordCipher::Chacha20Poly1305),
        ],
    ) {
        let key_len = if cipher == RecordCipher::Aes128Gcm { 16 } else { 32 };
        let traffic = || TrafficKey { cipher, key: vec![5; key_len], iv: [6; 12], seq: 0 };
        let mut sealer = RecordSealer::new(&traffic()).unwrap();
        let plaintext = frames.concat();
        let mut sealed = Vec::new();
        if !plaintext.is_empty() {
            sealer.seal(&[&plaintext], &mut sealed).unwrap();
        }
        let received = mutate(sealed.clone(), &edits);
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        buffer.decrypt(RecordOpener::new(&traffic()).unwrap(), &[]);
        let (yielded, error) = frames_through_buffer(&mut buffer, &received, &reads);
        prop_assert!(frames.starts_with(&yielded), "a frame the peer never sealed");
        if received == sealed {
            prop_assert_eq!(&yielded, &frames);
            prop_assert!(error.is_none());
        }
    }
}
