//! The receive buffer a connection reads into.

use std::fmt;

use crate::auth::{FRAME_TAG_LEN, FrameOpener};
use crate::frame::{Frame, FrameError, decode_frame};

/// The buffer's smallest size: one read can bring many small frames.
const BUFFER_LEN_MIN: usize = 64 << 10;

/// Bytes read from one connection, handed back as frames.
///
/// The loop is: `read` into [`spare`](Self::spare), report the count with
/// [`filled`](Self::filled), then take frames with [`next_frame`](Self::next_frame) until it
/// returns `Ok(None)`. Done in that order, `spare` is never empty. The buffer holds
/// `max(64 KiB, 4 + max_frame_len)` bytes at most: it grows only to fit a frame whose length
/// it has seen and accepted.
///
/// ```
/// use std::io::Read;
/// use tandem_wire::{Frame, FrameBuffer, MAX_FRAME_LEN_DEFAULT, encode_call};
///
/// let mut sent = Vec::new();
/// encode_call(&mut sent, 1, 7, None, b"args");
/// let mut connection: &[u8] = &sent;
///
/// let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
/// loop {
///     let n = connection.read(buffer.spare())?;
///     if n == 0 {
///         assert_eq!(buffer.buffered(), 0, "the peer stopped mid-frame");
///         break;
///     }
///     buffer.filled(n);
///     while let Some(frame) = buffer.next_frame()? {
///         let Frame::Call(call) = frame else { unreachable!() };
///         assert_eq!((call.seq, call.proc_id, call.args), (1, 7, &b"args"[..]));
///     }
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct FrameBuffer {
    buf: Vec<u8>,
    /// First byte not yet taken as a frame.
    start: usize,
    /// End of the bytes read so far.
    end: usize,
    max_frame_len: usize,
    /// On an authenticated link, what checks each frame's tag before the frame is decoded.
    opener: Option<FrameOpener>,
    /// On an authenticated link, the error that ended it (a tag that did not check, or a
    /// checked frame that did not decode): it stays, as an unauthenticated link's does.
    forged: Option<FrameError>,
}

impl FrameBuffer {
    pub fn new(max_frame_len: usize) -> FrameBuffer {
        FrameBuffer {
            buf: vec![0; BUFFER_LEN_MIN],
            start: 0,
            end: 0,
            max_frame_len,
            opener: None,
            forged: None,
        }
    }

    /// From now on every frame must be followed by its tag, which is checked before anything
    /// of the frame is decoded: a frame whose tag does not check ends the link
    /// ([`FrameError::BadMac`]). Frames already buffered are taken under the same rule.
    pub fn authenticate(&mut self, opener: FrameOpener) {
        assert!(self.opener.is_none(), "a link authenticates once");
        self.opener = Some(opener);
    }

    /// Whether frames are checked ([`authenticate`](Self::authenticate)).
    pub fn is_authenticated(&self) -> bool {
        self.opener.is_some()
    }

    /// Bytes that follow a frame on this link: its tag, if authenticated.
    fn trailer_len(&self) -> usize {
        if self.opener.is_some() {
            FRAME_TAG_LEN
        } else {
            0
        }
    }

    /// Space to read into. Moves the unread bytes to the front (each byte moves at most once
    /// per call) and makes room for the whole of the first frame if its length is known.
    pub fn spare(&mut self) -> &mut [u8] {
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if let Some(len) = self.buf[..self.end].first_chunk::<4>() {
            let len = u32::from_le_bytes(*len) as usize;
            let total = len.saturating_add(4 + self.trailer_len());
            if len <= self.max_frame_len && total > self.buf.len() {
                self.buf.resize(total, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// Records that a read put `n` bytes at the front of [`spare`](Self::spare).
    pub fn filled(&mut self, n: usize) {
        assert!(
            n <= self.buf.len() - self.end,
            "filled {n} bytes, more than spare() had"
        );
        self.end += n;
    }

    /// Takes the next whole frame, or `Ok(None)` until one is in. An error stays: the stream
    /// cannot be resynchronized, so the connection should be closed.
    pub fn next_frame(&mut self) -> Result<Option<Frame<'_>>, FrameError> {
        if let Some(forged) = &self.forged {
            return Err(forged.clone());
        }
        if let Some(opener) = &mut self.opener {
            let bytes = &self.buf[self.start..self.end];
            let Some(len) = bytes.first_chunk::<4>().map(|len| u32::from_le_bytes(*len)) else {
                return Ok(None);
            };
            if u64::from(len) > self.max_frame_len as u64 {
                return Err(FrameError::TooLarge {
                    len,
                    max: self.max_frame_len,
                });
            }
            let frame_len = 4 + len as usize;
            let Some(sealed) = bytes.get(..frame_len + FRAME_TAG_LEN) else {
                return Ok(None);
            };
            let (frame, tag) = sealed.split_at(frame_len);
            if !opener.open(frame, tag) {
                let forged = FrameError::BadMac { seq: opener.seq() };
                self.forged = Some(forged.clone());
                return Err(forged);
            }
            let start = self.start;
            self.start += frame_len + FRAME_TAG_LEN;
            let decoded = decode_frame(&self.buf[start..start + frame_len], self.max_frame_len);
            return match decoded {
                Ok(Some((frame, used))) => {
                    debug_assert_eq!(used, frame_len);
                    Ok(Some(frame))
                }
                Ok(None) => unreachable!("a whole frame is buffered"),
                Err(err) => {
                    self.forged = Some(err.clone());
                    Err(err)
                }
            };
        }
        let bytes = &self.buf[self.start..self.end];
        let Some((frame, used)) = decode_frame(bytes, self.max_frame_len)? else {
            return Ok(None);
        };
        self.start += used;
        Ok(Some(frame))
    }

    /// Bytes read but not yet taken as frames: nonzero at end of stream means the peer stopped
    /// mid-frame.
    pub fn buffered(&self) -> usize {
        self.end - self.start
    }

    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }
}

impl fmt::Debug for FrameBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FrameBuffer")
            .field("capacity", &self.buf.len())
            .field("start", &self.start)
            .field("end", &self.end)
            .field("max_frame_len", &self.max_frame_len)
            .field("authenticated", &self.opener.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use tandem_replication::Message;

    use super::*;
    use crate::{MAX_FRAME_LEN_DEFAULT, encode_call, encode_peer};

    /// Feeds `stream` in reads of at most `chunk` bytes, returning each frame re-encoded.
    fn feed(buffer: &mut FrameBuffer, stream: &[u8], chunk: usize) -> Vec<Vec<u8>> {
        let mut frames = Vec::new();
        let mut at = 0;
        while at < stream.len() {
            let spare = buffer.spare();
            assert!(!spare.is_empty());
            let n = spare.len().min(chunk).min(stream.len() - at);
            spare[..n].copy_from_slice(&stream[at..at + n]);
            buffer.filled(n);
            at += n;
            while let Some(frame) = buffer.next_frame().unwrap() {
                let mut out = Vec::new();
                frame.encode(&mut out);
                frames.push(out);
            }
            assert!(buffer.buf.len() <= BUFFER_LEN_MIN.max(4 + buffer.max_frame_len));
        }
        assert_eq!(buffer.buffered(), 0);
        frames
    }

    #[test]
    fn grows_for_a_large_frame_and_no_further() {
        let max = 200 << 10;
        let mut frames = Vec::new();
        let mut stream = Vec::new();
        for size in [10, max - 2, 70 << 10, 0] {
            let mut out = Vec::new();
            encode_peer(&mut out, &Message::Batch(Arc::from(vec![size as u8; size])));
            stream.extend_from_slice(&out);
            frames.push(out);
        }
        for chunk in [1, 1000, 65_535, 1 << 20] {
            let mut buffer = FrameBuffer::new(max);
            assert_eq!(feed(&mut buffer, &stream, chunk), frames);
            assert_eq!(buffer.buf.len(), 4 + max);
        }
    }

    #[test]
    fn stays_small_for_small_frames() {
        let mut stream = Vec::new();
        for seq in 0..20_000 {
            encode_call(&mut stream, seq, 1, None, b"twelve bytes");
        }
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        assert_eq!(feed(&mut buffer, &stream, 4096).len(), 20_000);
        assert_eq!(buffer.buf.len(), BUFFER_LEN_MIN);
    }

    #[test]
    fn refuses_an_oversize_frame_without_growing() {
        let mut buffer = FrameBuffer::new(100);
        buffer.spare()[..4].copy_from_slice(&101u32.to_le_bytes());
        buffer.filled(4);
        let err = buffer.next_frame().unwrap_err();
        assert_eq!(err, FrameError::TooLarge { len: 101, max: 100 });
        assert_eq!(buffer.next_frame().unwrap_err(), err, "the error stays");
        assert_eq!(buffer.spare().len(), BUFFER_LEN_MIN - 4);
    }
}
