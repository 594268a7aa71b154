//! A frame the mirror refuses changes nothing: each bad frame, sent at a point of a checkpoint,
//! is refused with the error that names its fault, the mirror is as it was, and the rest of the
//! checkpoint, sent after it, still completes.

use tandem_mirror::{Frame, MirrorError, OrderError, hash_memory};

use crate::common;
use crate::mirrored::{Primary, deliver, expect_at, new_mirror};

const PAGES: usize = 4;

/// A bad frame, sent after `after` of checkpoint 2's good frames, and the refusal expected.
struct Bad {
    after: usize,
    frame: Frame<'static>,
    error: MirrorError,
}

fn page(checkpoint: u64, index: u32, len: usize) -> Frame<'static> {
    Frame::Page {
        checkpoint,
        index,
        bytes: vec![7; len].into(),
    }
}

fn bad_frames(page_size: usize, hash: u64) -> Vec<Bad> {
    let order = MirrorError::Order;
    let begin = |checkpoint, pages, page_size| Frame::Begin {
        checkpoint,
        pages,
        page_size,
    };
    let size = page_size as u32;
    let bad = |after, frame, error| Bad {
        after,
        frame,
        error,
    };
    vec![
        bad(
            0,
            page(2, 0, page_size),
            order(OrderError::NotOpen {
                frame: "Page",
                found: 2,
            }),
        ),
        bad(
            0,
            Frame::End {
                checkpoint: 2,
                hash,
            },
            order(OrderError::NotOpen {
                frame: "End",
                found: 2,
            }),
        ),
        bad(
            0,
            begin(3, 2, size),
            order(OrderError::Checkpoint {
                frame: "Begin",
                expected: 2,
                found: 3,
            }),
        ),
        bad(
            0,
            begin(1, 2, size),
            order(OrderError::Checkpoint {
                frame: "Begin",
                expected: 2,
                found: 1,
            }),
        ),
        bad(
            0,
            begin(2, 2, size * 2),
            MirrorError::PageSize {
                found: size * 2,
                expected: size,
            },
        ),
        bad(
            0,
            begin(2, 5, size),
            MirrorError::PageCount { found: 5, max: 4 },
        ),
        bad(
            0,
            Frame::Ack { checkpoint: 2 },
            order(OrderError::AckToBackup),
        ),
        bad(
            1,
            begin(2, 2, size),
            order(OrderError::StillOpen { open: 2, found: 2 }),
        ),
        bad(
            1,
            page(3, 0, page_size),
            order(OrderError::Checkpoint {
                frame: "Page",
                expected: 2,
                found: 3,
            }),
        ),
        bad(
            1,
            page(2, 4, page_size),
            MirrorError::PageIndex { found: 4, pages: 4 },
        ),
        bad(
            2,
            page(2, 1, 10),
            MirrorError::PageLength {
                found: 10,
                expected: page_size,
            },
        ),
        bad(
            2,
            Frame::End {
                checkpoint: 2,
                hash,
            },
            order(OrderError::PagesMissing {
                checkpoint: 2,
                announced: 2,
                received: 1,
            }),
        ),
        bad(
            3,
            page(2, 1, page_size),
            order(OrderError::PagesBeyond {
                checkpoint: 2,
                announced: 2,
            }),
        ),
        bad(
            3,
            Frame::End {
                checkpoint: 2,
                hash: hash ^ 1,
            },
            MirrorError::Hash {
                checkpoint: 2,
                primary: hash ^ 1,
                mirror: hash,
            },
        ),
    ]
}

#[test]
fn a_refused_frame_changes_nothing() {
    let kind = common::granted_kinds()[0];
    let mut primary = Primary::new(kind, PAGES);
    let page_size = primary.page_size();
    primary.store(page_size + 3, 1);
    let first = primary.take().expect("checkpoint 1");
    primary.store(5, 2);
    primary.store(2 * page_size, 3);
    let second = primary.take().expect("checkpoint 2");
    let good = &second.frames()[..];
    assert_eq!(good.len(), 4, "Begin, pages 0 and 2, End");
    let hash = hash_memory(&primary.saved[2], page_size);
    for bad in bad_frames(page_size, hash) {
        let mut mirror = new_mirror(PAGES, None);
        deliver(&mut mirror, &first.frames()).expect("checkpoint 1");
        for frame in &good[..bad.after] {
            mirror.step(frame).expect("a good frame");
        }
        let before = (
            mirror.memory().to_vec(),
            mirror.last_complete(),
            mirror.open(),
            mirror.hash(),
        );
        assert_eq!(
            mirror.step(&bad.frame),
            Err(bad.error.clone()),
            "{:?}",
            bad.frame
        );
        let after = (
            mirror.memory().to_vec(),
            mirror.last_complete(),
            mirror.open(),
            mirror.hash(),
        );
        assert!(
            before == after,
            "{:?} after {} frames changed the mirror",
            bad.frame,
            bad.after
        );
        for frame in &good[bad.after..] {
            mirror.step(frame).expect("the rest of the checkpoint");
        }
        let when = format!(
            "{:?} refused after {} frames, the rest sent",
            bad.frame, bad.after
        );
        expect_at(&mirror, &primary.saved, 2, &when).unwrap_or_else(|failure| panic!("{failure}"));
    }
}
