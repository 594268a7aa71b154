//! Arbitrary bytes through `decode_frame` and `FrameBuffer`: neither may panic, both must see
//! the same frames, and every frame decodes again, equal, from its own encoding. A decoded
//! batch also goes through `BatchRef::parse`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use tandem_replication::Message;
use tandem_wire::{Frame, FrameBuffer, decode_frame};

/// Small enough that the length check and the buffer's growth are both reached.
const MAX_FRAME_LEN: usize = 1 << 17;

fuzz_target!(|data: &[u8]| {
    // The frames decode_frame finds at the front of the input, one after another.
    let mut direct = Vec::new();
    let mut at = 0;
    while let Ok(Some((frame, used))) = decode_frame(&data[at..], MAX_FRAME_LEN) {
        assert!(used >= 5 && used <= data.len() - at);
        if let Frame::Peer {
            message: Message::Batch(bytes),
            ..
        } = &frame
        {
            let _ = tandem_redo::BatchRef::parse(bytes);
        }
        let mut out = Vec::new();
        frame.encode(&mut out);
        // What decodes re-encodes to a frame that decodes to the same value (a member list
        // and its count, a slot table, a diverged page list, a safety rule: nothing is lost
        // or reordered).
        let again = decode_frame(&out, MAX_FRAME_LEN).map(|found| found.map(|(f, _)| f));
        assert_eq!(again, Ok(Some(frame)));
        direct.push(out);
        at += used;
    }

    // The same input through the receive buffer, in reads of uneven sizes.
    let mut buffer = FrameBuffer::new(MAX_FRAME_LEN);
    let mut buffered = Vec::new();
    let mut fed = 0;
    let mut read = 1;
    'feed: while fed < data.len() {
        let spare = buffer.spare();
        let n = spare.len().min(read).min(data.len() - fed);
        spare[..n].copy_from_slice(&data[fed..fed + n]);
        buffer.filled(n);
        fed += n;
        read = read * 7 % 4093 + 1;
        loop {
            match buffer.next_frame() {
                Ok(Some(frame)) => {
                    let mut out = Vec::new();
                    frame.encode(&mut out);
                    buffered.push(out);
                }
                Ok(None) => break,
                Err(_) => break 'feed,
            }
        }
    }
    assert_eq!(direct, buffered);
});
