//! The frames' codec: every frame decodes to itself; any byte altered or any bytes missing is
//! refused, never decoded as something else, and no input makes the decoder panic; a reader
//! refuses frames out of their order.

use proptest::prelude::*;

use tandem_mirror::{
    Frame, FrameError, FrameReader, Limits, OrderError, decode_frame, hash_memory,
};

/// Frames of a stream within `limits`.
fn frame(limits: Limits) -> impl Strategy<Value = Frame<'static>> {
    let checkpoint = prop_oneof![1..4u64, Just(u64::MAX), 1..u64::MAX];
    let page_size = limits.page_size as usize;
    prop_oneof![
        (checkpoint.clone(), 0..=limits.pages_max).prop_map(move |(checkpoint, pages)| {
            Frame::Begin {
                checkpoint,
                pages,
                page_size: limits.page_size,
            }
        }),
        (
            checkpoint.clone(),
            0..limits.pages_max,
            prop::collection::vec(any::<u8>(), page_size)
        )
            .prop_map(|(checkpoint, index, bytes)| Frame::Page {
                checkpoint,
                index,
                bytes: bytes.into(),
            }),
        (checkpoint.clone(), any::<u64>())
            .prop_map(|(checkpoint, hash)| Frame::End { checkpoint, hash }),
        checkpoint.prop_map(|checkpoint| Frame::Ack { checkpoint }),
    ]
}

fn limits() -> impl Strategy<Value = Limits> {
    (
        prop_oneof![Just(1u32), Just(16), Just(4096), 1..64u32],
        1..100u32,
    )
        .prop_map(|(page_size, pages_max)| Limits {
            page_size,
            pages_max,
        })
}

fn limits_and_frames() -> impl Strategy<Value = (Limits, Vec<Frame<'static>>)> {
    limits().prop_flat_map(|limits| (Just(limits), prop::collection::vec(frame(limits), 1..8)))
}

fn encoded(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::new();
    for frame in frames {
        frame.encode(&mut out);
    }
    out
}

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 512,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn frames_decode_to_themselves((limits, frames) in limits_and_frames()) {
        let bytes = encoded(&frames);
        let mut at = 0;
        for frame in &frames {
            let (decoded, len) = decode_frame(&bytes[at..], limits)
                .map_err(|error| TestCaseError::fail(format!("{frame:?}: {error}")))?;
            prop_assert_eq!(&decoded, frame);
            prop_assert_eq!(len, frame.encoded_len());
            at += len;
        }
        prop_assert_eq!(at, bytes.len());
    }

    #[test]
    fn an_altered_byte_is_refused(
        (limits, frames) in limits_and_frames(),
        at: prop::sample::Index,
        flip in 1..=255u8,
        flips_more in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..3),
    ) {
        let original = encoded(&frames[..1]);
        let mut bytes = original.clone();
        let at = at.index(bytes.len());
        bytes[at] ^= flip;
        for (more, flip) in flips_more {
            let more = more.index(bytes.len());
            bytes[more] ^= flip;
        }
        // A later flip may undo the first.
        prop_assume!(bytes != original);
        let decoded = decode_frame(&bytes, limits);
        prop_assert!(decoded.is_err(), "byte {} ^ {:#04x} decoded as {:?}", at, flip, decoded);
    }

    #[test]
    fn a_truncated_frame_is_refused_as_truncated(
        (limits, frames) in limits_and_frames(),
        cut: prop::sample::Index,
    ) {
        let bytes = encoded(&frames[..1]);
        let cut = cut.index(bytes.len());
        let decoded = decode_frame(&bytes[..cut], limits);
        prop_assert!(
            matches!(decoded, Err(FrameError::Truncated { .. })),
            "{} of {} bytes: {:?}", cut, bytes.len(), decoded
        );
    }

    /// Any bytes: refused or decoded, never a panic; what decodes re-encodes to the same bytes,
    /// so no two encodings mean one frame.
    #[test]
    fn any_bytes_decode_without_panic(
        limits in limits(),
        ty in 0..6u8,
        length in prop_oneof![Just(8u32), Just(16), 0..5000u32, any::<u32>()],
        rest in prop::collection::vec(any::<u8>(), 0..200),
    ) {
        let mut bytes = vec![ty];
        bytes.extend_from_slice(&length.to_le_bytes());
        bytes.extend_from_slice(&rest);
        for input in [&bytes[..], &rest[..]] {
            if let Ok((frame, len)) = decode_frame(input, limits) {
                prop_assert_eq!(encoded(&[frame]), &input[..len]);
            }
        }
    }
}

const LIMITS: Limits = Limits {
    page_size: 4,
    pages_max: 3,
};

fn begin(checkpoint: u64, pages: u32) -> Frame<'static> {
    Frame::Begin {
        checkpoint,
        pages,
        page_size: 4,
    }
}

fn page(checkpoint: u64, index: u32) -> Frame<'static> {
    Frame::Page {
        checkpoint,
        index,
        bytes: vec![1; 4].into(),
    }
}

fn end(checkpoint: u64) -> Frame<'static> {
    Frame::End {
        checkpoint,
        hash: hash_memory(&[0; 12], 4),
    }
}

/// Reads `frames` from a reader that starts at checkpoint 1 complete, and returns the first
/// refusal.
fn first_refusal(frames: &[Frame<'_>]) -> Option<FrameError> {
    let mut reader = FrameReader::to_backup(LIMITS, 1);
    frames
        .iter()
        .find_map(|frame| reader.read(&encoded(std::slice::from_ref(frame))).err())
}

#[test]
fn a_reader_refuses_frames_out_of_order() {
    let order = |error: OrderError| Some(FrameError::Order(error));
    let cases: Vec<(Vec<Frame<'_>>, Option<FrameError>)> = vec![
        (
            vec![begin(2, 1), page(2, 0), end(2), begin(3, 0), end(3)],
            None,
        ),
        (vec![begin(2, 2), page(2, 1), page(2, 1), end(2)], None),
        (
            vec![page(2, 0)],
            order(OrderError::NotOpen {
                frame: "Page",
                found: 2,
            }),
        ),
        (
            vec![end(2)],
            order(OrderError::NotOpen {
                frame: "End",
                found: 2,
            }),
        ),
        (
            vec![begin(3, 0)],
            order(OrderError::Checkpoint {
                frame: "Begin",
                expected: 2,
                found: 3,
            }),
        ),
        (
            vec![begin(1, 0)],
            order(OrderError::Checkpoint {
                frame: "Begin",
                expected: 2,
                found: 1,
            }),
        ),
        (
            vec![begin(2, 1), begin(2, 1)],
            order(OrderError::StillOpen { open: 2, found: 2 }),
        ),
        (
            vec![begin(2, 1), page(3, 0)],
            order(OrderError::Checkpoint {
                frame: "Page",
                expected: 2,
                found: 3,
            }),
        ),
        (
            vec![begin(2, 1), page(2, 0), page(2, 1)],
            order(OrderError::PagesBeyond {
                checkpoint: 2,
                announced: 1,
            }),
        ),
        (
            vec![begin(2, 2), page(2, 0), end(2)],
            order(OrderError::PagesMissing {
                checkpoint: 2,
                announced: 2,
                received: 1,
            }),
        ),
        (
            vec![Frame::Ack { checkpoint: 2 }],
            order(OrderError::AckToBackup),
        ),
        (
            vec![page(2, 3)],
            Some(FrameError::PageIndex {
                found: 3,
                pages_max: 3,
            }),
        ),
        (
            vec![begin(2, 4)],
            Some(FrameError::PageCount { found: 4, max: 3 }),
        ),
        (
            vec![Frame::Begin {
                checkpoint: 2,
                pages: 1,
                page_size: 8,
            }],
            Some(FrameError::PageSize {
                found: 8,
                expected: 4,
            }),
        ),
    ];
    for (frames, expected) in cases {
        assert_eq!(first_refusal(&frames), expected, "{frames:?}");
    }
}

#[test]
fn a_reader_to_the_primary_takes_only_later_acks() {
    let mut reader = FrameReader::to_primary(LIMITS, 1);
    let ack = |checkpoint| encoded(&[Frame::Ack { checkpoint }]);
    assert!(reader.read(&ack(3)).is_ok(), "an ack may cover a lost one");
    assert_eq!(
        reader.read(&ack(3)),
        Err(FrameError::Order(OrderError::AckStale {
            acked_last: 3,
            found: 3
        }))
    );
    assert_eq!(
        reader.read(&encoded(&[begin(4, 0)])),
        Err(FrameError::Order(OrderError::DataToPrimary {
            frame: "Begin"
        }))
    );
    assert!(reader.read(&ack(4)).is_ok(), "a refusal changes nothing");
}

#[test]
fn a_checkpoint_numbered_zero_is_refused() {
    let bytes = encoded(&[Frame::Ack { checkpoint: 0 }]);
    assert_eq!(
        decode_frame(&bytes, LIMITS),
        Err(FrameError::CheckpointZero { frame: "Ack" })
    );
}

#[test]
fn a_frame_error_names_the_field() {
    let mut bytes = encoded(&[page(2, 1)]);
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    let error = decode_frame(&bytes, LIMITS).expect_err("a flipped bit");
    assert!(
        error.to_string().starts_with("Page frame, field 'crc32c'"),
        "{error}"
    );
}
