//! The receive buffer a connection reads into.

use std::fmt;

use crate::auth::{FRAME_TAG_LEN, FrameOpener};
use crate::frame::{Frame, FrameError, decode_frame};
use crate::records::{RECORD_BODY_MAX, RECORD_HEADER_LEN, RecordOpener};

/// The buffer's smallest size: one read can bring many small frames.
const BUFFER_LEN_MIN: usize = 64 << 10;

/// Bytes read from one connection, handed back as frames.
///
/// The loop is: `read` into [`spare`](Self::spare), report the count with
/// [`filled`](Self::filled), then take frames with [`next_frame`](Self::next_frame) until it
/// returns `Ok(None)`. Done in that order, `spare` is never empty. The buffer holds
/// `max(64 KiB, 4 + max_frame_len)` bytes at most: it grows only for a frame whose length
/// it has seen and accepted, and then with the bytes received (it doubles when full), never
/// to the length announced: a peer that announces a large frame and sends nothing more
/// makes the node hold nothing more.
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
    /// On a TLS link, what opens the records read: the bytes read are then laid out as
    /// frames' plaintext in `start..plain_end`, a gap, and records not yet whole in
    /// `raw_start..end`.
    records: Option<RecordOpener>,
    plain_end: usize,
    raw_start: usize,
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
            records: None,
            plain_end: 0,
            raw_start: 0,
        }
    }

    /// From now on the bytes read are TLS 1.3 records, opened as they arrive (`received`:
    /// bytes of the link read already, after the handshake); the frames are their
    /// plaintext. A record that does not open ends the link (`FrameError::Tls`).
    pub fn decrypt(&mut self, opener: RecordOpener, received: &[u8]) {
        assert!(self.opener.is_none(), "a link is sealed one way");
        assert!(
            self.records.is_none(),
            "a link's records are opened by one opener"
        );
        assert_eq!(
            self.buffered(),
            0,
            "bytes read before the handshake ended belong to it (take_unread)"
        );
        self.records = Some(opener);
        self.start = 0;
        self.end = 0;
        self.plain_end = 0;
        self.raw_start = 0;
        let mut received = received;
        while !received.is_empty() {
            let spare = self.spare();
            let n = spare.len().min(received.len());
            spare[..n].copy_from_slice(&received[..n]);
            self.filled(n);
            received = &received[n..];
        }
    }

    /// Whether the link's frames come in TLS records ([`decrypt`](Self::decrypt)).
    pub fn is_decrypting(&self) -> bool {
        self.records.is_some()
    }

    /// Takes the bytes read but not yet taken as frames (the start of a TLS handshake that
    /// came with the `Hello`), leaving the buffer empty.
    pub fn take_unread(&mut self) -> Vec<u8> {
        assert!(
            self.records.is_none(),
            "unread bytes are taken before records"
        );
        let unread = self.buf[self.start..self.end].to_vec();
        self.start = 0;
        self.end = 0;
        unread
    }

    /// Opens every whole record read, moving its plaintext after the frames' bytes.
    fn open_records(&mut self) {
        let Some(opener) = &mut self.records else {
            return;
        };
        while self.forged.is_none() {
            let raw = &self.buf[self.raw_start..self.end];
            let len = match opener.record_len(raw) {
                Ok(Some(len)) if len <= raw.len() => len,
                Ok(_) => break,
                Err(err) => {
                    self.forged = Some(FrameError::Tls(err));
                    break;
                }
            };
            let record = self.raw_start..self.raw_start + len;
            match opener.open_in_place(&mut self.buf[record.clone()]) {
                Ok(plain) => {
                    let plain_len = plain.len();
                    self.buf.copy_within(
                        record.start + plain.start..record.start + plain.end,
                        self.plain_end,
                    );
                    self.plain_end += plain_len;
                    self.raw_start = record.end;
                }
                Err(err) => self.forged = Some(FrameError::Tls(err)),
            }
        }
    }

    /// From now on every frame must be followed by its tag, which is checked before anything
    /// of the frame is decoded: a frame whose tag does not check ends the link
    /// ([`FrameError::BadMac`]). Frames already buffered are taken under the same rule.
    pub fn authenticate(&mut self, opener: FrameOpener) {
        assert!(self.opener.is_none(), "a link authenticates once");
        self.opener = Some(opener);
    }

    /// Raises (or lowers) the longest frame accepted from now on: a link is read under a
    /// small limit until its peer proved itself, then under the node's.
    pub fn set_max_frame_len(&mut self, max_frame_len: usize) {
        self.max_frame_len = max_frame_len;
    }

    /// Whether a whole frame waits at the front (not yet taken); an error if the frame
    /// announced there is longer than the limit, or the link's bytes were refused already
    /// (a record that did not open, a frame whose tag did not check). Decodes nothing.
    pub fn holds_whole_frame(&self) -> Result<bool, FrameError> {
        if let Some(forged) = &self.forged {
            return Err(forged.clone());
        }
        let end = if self.records.is_some() {
            self.plain_end
        } else {
            self.end
        };
        let bytes = &self.buf[self.start..end];
        let Some(len) = bytes.first_chunk::<4>().map(|len| u32::from_le_bytes(*len)) else {
            return Ok(false);
        };
        if u64::from(len) > self.max_frame_len as u64 {
            return Err(FrameError::TooLarge {
                len,
                max: self.max_frame_len,
            });
        }
        Ok(bytes.len() >= 4 + len as usize + self.trailer_len())
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
        if self.records.is_some() {
            return self.spare_for_records();
        }
        if self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        if let Some(len) = self.buf[..self.end].first_chunk::<4>() {
            let len = u32::from_le_bytes(*len) as usize;
            let total = len.saturating_add(4 + self.trailer_len());
            if len <= self.max_frame_len && total > self.buf.len() && self.end == self.buf.len() {
                let grown = self.buf.len().saturating_mul(2).min(total);
                self.buf.resize(grown, 0);
            }
        }
        &mut self.buf[self.end..]
    }

    /// [`spare`](Self::spare) on a TLS link: the frames' plaintext and then the records not
    /// yet whole move to the front, and there is room for the whole first frame (if its
    /// length is known) and one whole record after it.
    fn spare_for_records(&mut self) -> &mut [u8] {
        // Each byte moves only when something before it was taken: a large frame that comes
        // in many reads is not copied again on every one.
        let plain = self.plain_end - self.start;
        if self.start > 0 {
            self.buf.copy_within(self.start..self.plain_end, 0);
        }
        let raw = self.end - self.raw_start;
        if self.raw_start > plain {
            self.buf.copy_within(self.raw_start..self.end, plain);
        }
        self.start = 0;
        self.plain_end = plain;
        self.raw_start = plain;
        self.end = plain + raw;
        let frame_len = match self.buf[..plain].first_chunk::<4>() {
            Some(len) if u32::from_le_bytes(*len) as usize <= self.max_frame_len => {
                4 + u32::from_le_bytes(*len) as usize
            }
            _ => plain,
        };
        // Room for the frame grows with the plaintext received (doubling), not with the
        // length announced.
        let frame_room = frame_len.min(plain.saturating_mul(2).max(BUFFER_LEN_MIN));
        let needed = frame_room.max(plain) + RECORD_HEADER_LEN + RECORD_BODY_MAX;
        if needed > self.buf.len() {
            self.buf.resize(needed, 0);
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
        self.open_records();
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
        let end = if self.records.is_some() {
            self.plain_end
        } else {
            self.end
        };
        let bytes = &self.buf[self.start..end];
        let Some((frame, used)) = decode_frame(bytes, self.max_frame_len)? else {
            return Ok(None);
        };
        self.start += used;
        Ok(Some(frame))
    }

    /// Bytes read but not yet taken as frames: nonzero at end of stream means the peer stopped
    /// mid-frame.
    pub fn buffered(&self) -> usize {
        if self.records.is_some() {
            (self.plain_end - self.start) + (self.end - self.raw_start)
        } else {
            self.end - self.start
        }
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
            .field("decrypting", &self.records.is_some())
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
            let records = if buffer.records.is_some() {
                RECORD_HEADER_LEN + RECORD_BODY_MAX
            } else {
                0
            };
            assert!(buffer.buf.len() <= BUFFER_LEN_MIN.max(4 + buffer.max_frame_len) + records);
        }
        assert_eq!(buffer.buffered(), 0);
        frames
    }

    #[test]
    fn grows_for_a_large_frame_and_no_further() {
        let max = 200 << 10;
        let mut frames = Vec::new();
        let mut stream = Vec::new();
        for size in [10, max - 6, 70 << 10, 0] {
            let mut out = Vec::new();
            encode_peer(
                &mut out,
                0,
                &Message::Batch(Arc::from(vec![size as u8; size])),
            );
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
    fn grows_with_the_bytes_received_not_the_length_announced() {
        let max = 4 << 20;
        let mut buffer = FrameBuffer::new(max);
        buffer.spare()[..4].copy_from_slice(&(max as u32).to_le_bytes());
        buffer.filled(4);
        assert_eq!(buffer.holds_whole_frame(), Ok(false));
        assert_eq!(buffer.spare().len(), BUFFER_LEN_MIN - 4);
        assert_eq!(
            buffer.buf.len(),
            BUFFER_LEN_MIN,
            "four bytes reserve nothing more"
        );
        // Filling the buffer doubles it, a step at a time.
        let spare = buffer.spare().len();
        buffer.filled(spare);
        assert_eq!(buffer.spare().len(), BUFFER_LEN_MIN);
        assert_eq!(buffer.buf.len(), 2 * BUFFER_LEN_MIN);
    }

    #[test]
    fn a_small_limit_refuses_before_anything_grows_and_can_be_raised() {
        let mut buffer = FrameBuffer::new(1024);
        let mut frame = Vec::new();
        encode_call(&mut frame, 1, 2, None, &[7; 2000]);
        buffer.spare()[..frame.len()].copy_from_slice(&frame);
        buffer.filled(frame.len());
        assert!(matches!(
            buffer.holds_whole_frame(),
            Err(FrameError::TooLarge { max: 1024, .. })
        ));
        buffer.set_max_frame_len(MAX_FRAME_LEN_DEFAULT);
        assert_eq!(buffer.holds_whole_frame(), Ok(true));
        assert!(matches!(buffer.next_frame(), Ok(Some(Frame::Call(_)))));
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

    fn traffic_key() -> crate::TrafficKey {
        crate::TrafficKey {
            cipher: crate::RecordCipher::Aes128Gcm,
            key: vec![9; 16],
            iv: [1; 12],
            seq: 0,
        }
    }

    #[test]
    fn frames_in_tls_records_come_out_whole_whatever_the_reads() {
        let max = 200 << 10;
        let mut frames = Vec::new();
        let mut plain = Vec::new();
        for size in [10, max - 6, 70 << 10, 0, 16_384, 3] {
            let mut out = Vec::new();
            encode_peer(
                &mut out,
                0,
                &Message::Batch(Arc::from(vec![size as u8; size])),
            );
            plain.extend_from_slice(&out);
            frames.push(out);
        }
        for seq in 0..2_000 {
            let mut out = Vec::new();
            encode_call(&mut out, seq, 1, None, b"twelve bytes");
            plain.extend_from_slice(&out);
            frames.push(out);
        }
        // Sealed in writes of different sizes, as a writer thread would.
        let mut sealer = crate::RecordSealer::new(&traffic_key()).unwrap();
        let mut stream = Vec::new();
        for chunk in plain.chunks(50_000) {
            sealer.seal(&[chunk], &mut stream).unwrap();
        }
        for (chunk, already) in [(1, 0), (1000, 7), (65_535, 100), (1 << 20, 20_000)] {
            let mut buffer = FrameBuffer::new(max);
            let opener = crate::RecordOpener::new(&traffic_key()).unwrap();
            buffer.decrypt(opener, &stream[..already]);
            let mut got = Vec::new();
            while let Some(frame) = buffer.next_frame().unwrap() {
                let mut out = Vec::new();
                frame.encode(&mut out);
                got.push(out);
            }
            got.extend(feed(&mut buffer, &stream[already..], chunk));
            assert_eq!(got, frames, "reads of {chunk} bytes");
            assert!(buffer.buf.len() <= 4 + max + RECORD_HEADER_LEN + RECORD_BODY_MAX);
        }
    }

    #[test]
    fn an_altered_tls_record_ends_the_link_before_any_of_it_is_decoded() {
        let mut sealer = crate::RecordSealer::new(&traffic_key()).unwrap();
        let mut stream = Vec::new();
        let mut frame = Vec::new();
        encode_call(&mut frame, 1, 7, None, b"args");
        sealer.seal(&[&frame], &mut stream).unwrap();
        sealer.seal(&[&frame], &mut stream).unwrap();
        let second = stream.len() - 3;
        stream[second] ^= 0x80;
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        buffer.decrypt(crate::RecordOpener::new(&traffic_key()).unwrap(), &[]);
        let spare = buffer.spare();
        spare[..stream.len()].copy_from_slice(&stream);
        buffer.filled(stream.len());
        let err = buffer.next_frame().unwrap_err();
        assert_eq!(
            err,
            FrameError::Tls(crate::RecordError::BadRecord { seq: 1 })
        );
        assert_eq!(buffer.next_frame().unwrap_err(), err, "the error stays");

        // Frames without TLS where records are expected.
        let mut buffer = FrameBuffer::new(MAX_FRAME_LEN_DEFAULT);
        buffer.decrypt(crate::RecordOpener::new(&traffic_key()).unwrap(), &frame);
        assert!(matches!(
            buffer.next_frame(),
            Err(FrameError::Tls(crate::RecordError::BadHeader { .. }))
        ));
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
