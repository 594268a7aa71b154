//! The checkpoint protocol's frames, their encoding, and the order a stream of them must keep.
//!
//! The primary sends each checkpoint as `Begin`, its `Page`s, then `End`; the backup answers
//! each complete checkpoint with an `Ack`. Every frame is a 9-byte header and a body, all
//! integers little-endian:
//!
//! ```text
//! offset  size  field
//! 0       1     type: 1 Begin, 2 Page, 3 End, 4 Ack
//! 1       4     length of the body in bytes: exact for each type (below)
//! 5       4     crc32c of bytes 0..5, then of the body
//! 9       len   body:
//!                 Begin  checkpoint u64, pages u32, page_size u32   16 bytes
//!                 Page   checkpoint u64, index u32, the page        12 + page_size bytes
//!                 End    checkpoint u64, hash u64                   16 bytes
//!                 Ack    checkpoint u64                             8 bytes
//! ```
//!
//! `pages` counts the `Page` frames that follow a `Begin`, and `hash` is the whole memory's
//! after the checkpoint (`hash.rs`). Since every type has one body length, a length other than
//! that (a `Page` longer than a page, say) is refused from the header alone, before any body
//! byte is waited for; decoding allocates nothing (a `Page` borrows its bytes from the input).
//!
//! [`decode_frame`] checks one frame by itself. [`FrameReader`] also checks that each frame
//! may follow the ones before it ([`OrderError`]); the backup's [`crate::Mirror`] keeps the same
//! order by the same code. Decoding never panics on any input.

use std::borrow::Cow;
use std::fmt;

use crate::hash::page_crc;

const TYPE_BEGIN: u8 = 1;
const TYPE_PAGE: u8 = 2;
const TYPE_END: u8 = 3;
const TYPE_ACK: u8 = 4;

/// Bytes of the header in front of every body: type, length, crc32c.
pub const HEADER_LEN: usize = 9;
/// The body of a `Page` frame before the page's bytes: checkpoint and index.
const PAGE_PREFIX_LEN: usize = 12;

/// One frame of the checkpoint protocol. Checkpoints number from 1.
///
/// A `Page` borrows its bytes where it can (from the checkpoint taken, or from the buffer it
/// was decoded from), so no page is copied on its way but into the backup's memory; frames
/// built by hand may own theirs.
#[derive(Clone, PartialEq, Eq)]
pub enum Frame<'a> {
    /// Opens checkpoint `checkpoint`, announcing `pages` `Page` frames of `page_size` bytes.
    Begin {
        checkpoint: u64,
        pages: u32,
        page_size: u32,
    },
    /// The bytes of page `index` as of checkpoint `checkpoint`.
    Page {
        checkpoint: u64,
        index: u32,
        bytes: Cow<'a, [u8]>,
    },
    /// Closes checkpoint `checkpoint`: the whole memory then hashes to `hash`.
    End { checkpoint: u64, hash: u64 },
    /// The backup holds checkpoint `checkpoint` whole (and every one before it).
    Ack { checkpoint: u64 },
}

/// The backup's answer to a complete checkpoint, sent to the primary as [`Frame::Ack`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    pub checkpoint: u64,
}

impl From<Ack> for Frame<'_> {
    fn from(ack: Ack) -> Self {
        Frame::Ack {
            checkpoint: ack.checkpoint,
        }
    }
}

impl Frame<'_> {
    /// The frame's type, as error messages name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Begin { .. } => "Begin",
            Frame::Page { .. } => "Page",
            Frame::End { .. } => "End",
            Frame::Ack { .. } => "Ack",
        }
    }

    /// The checkpoint the frame belongs to.
    pub fn checkpoint(&self) -> u64 {
        match *self {
            Frame::Begin { checkpoint, .. }
            | Frame::Page { checkpoint, .. }
            | Frame::End { checkpoint, .. }
            | Frame::Ack { checkpoint } => checkpoint,
        }
    }

    /// Bytes [`Frame::encode`] appends.
    pub fn encoded_len(&self) -> usize {
        HEADER_LEN + self.body_len()
    }

    /// Bytes a `Page` frame of a `page_size`-byte page takes encoded.
    pub(crate) fn page_encoded_len(page_size: u32) -> usize {
        HEADER_LEN + PAGE_PREFIX_LEN + page_size as usize
    }

    fn body_len(&self) -> usize {
        match self {
            Frame::Begin { .. } | Frame::End { .. } => 16,
            Frame::Page { bytes, .. } => PAGE_PREFIX_LEN + bytes.len(),
            Frame::Ack { .. } => 8,
        }
    }

    /// Appends the frame's encoding to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let start = out.len();
        let body_len = u32::try_from(self.body_len()).expect("a page fits a frame");
        let ty = match self {
            Frame::Begin { .. } => TYPE_BEGIN,
            Frame::Page { .. } => TYPE_PAGE,
            Frame::End { .. } => TYPE_END,
            Frame::Ack { .. } => TYPE_ACK,
        };
        out.push(ty);
        out.extend_from_slice(&body_len.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.checkpoint().to_le_bytes());
        match self {
            Frame::Begin {
                pages, page_size, ..
            } => {
                out.extend_from_slice(&pages.to_le_bytes());
                out.extend_from_slice(&page_size.to_le_bytes());
            }
            Frame::Page { index, bytes, .. } => {
                out.extend_from_slice(&index.to_le_bytes());
                out.extend_from_slice(bytes);
            }
            Frame::End { hash, .. } => out.extend_from_slice(&hash.to_le_bytes()),
            Frame::Ack { .. } => {}
        }
        let crc = frame_crc(&out[start..start + 5], &out[start + HEADER_LEN..]);
        out[start + 5..start + HEADER_LEN].copy_from_slice(&crc.to_le_bytes());
        debug_assert_eq!(out.len() - start, self.encoded_len());
    }
}

/// A page's bytes would drown a failure message: a `Page` shows their length and crc32c.
impl fmt::Debug for Frame<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Frame::Begin {
                checkpoint,
                pages,
                page_size,
            } => write!(
                f,
                "Begin {{ checkpoint: {checkpoint}, pages: {pages}, page_size: {page_size} }}"
            ),
            Frame::Page {
                checkpoint,
                index,
                bytes,
            } => {
                let (len, crc) = (bytes.len(), page_crc(bytes));
                let bytes = format!("{len} with crc32c {crc:#010x}");
                write!(
                    f,
                    "Page {{ checkpoint: {checkpoint}, index: {index}, bytes: {bytes} }}"
                )
            }
            Frame::End { checkpoint, hash } => {
                write!(f, "End {{ checkpoint: {checkpoint}, hash: {hash:#018x} }}")
            }
            Frame::Ack { checkpoint } => write!(f, "Ack {{ checkpoint: {checkpoint} }}"),
        }
    }
}

/// The crc32c a header carries: over its type and length, then the body.
fn frame_crc(type_and_length: &[u8], body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(type_and_length), body)
}

/// What a stream's frames may hold: its page size, and the memory's page count, which bounds
/// both a page's index and the `Page` frames one checkpoint announces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub page_size: u32,
    pub pages_max: u32,
}

/// Why bytes are not a frame, or not the next one. Each names the field at fault. After any
/// but `Truncated` the stream is not to be trusted to be at a frame boundary, or the peer to
/// speak the protocol, so the connection ends.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    /// The bytes end inside the header or the body; on a stream, wait for more.
    #[error("truncated {part}: {needed} bytes needed, {available} there")]
    Truncated {
        part: &'static str,
        needed: usize,
        available: usize,
    },
    #[error("field 'type': {found:#04x} is no frame type (1 Begin, 2 Page, 3 End, 4 Ack)")]
    UnknownType { found: u8 },
    /// The length disagrees with the type's one body length (oversized or short).
    #[error("{frame} frame, field 'length': {found} bytes, but its body is {expected}")]
    Length {
        frame: &'static str,
        expected: usize,
        found: u32,
    },
    #[error(
        "{frame} frame, field 'crc32c': {found:#010x}, but its bytes give {computed:#010x}: \
         altered in transit"
    )]
    Checksum {
        frame: &'static str,
        found: u32,
        computed: u32,
    },
    #[error("{frame} frame, field 'checkpoint': 0, but checkpoints number from 1")]
    CheckpointZero { frame: &'static str },
    #[error(
        "Begin frame, field 'page_size': {found}, but this stream's pages are {expected} bytes"
    )]
    PageSize { found: u32, expected: u32 },
    #[error("Begin frame, field 'pages': {found} Page frames, above the bound of {max}")]
    PageCount { found: u32, max: u32 },
    #[error("Page frame, field 'index': {found}, but the memory has {pages_max} pages")]
    PageIndex { found: u32, pages_max: u32 },
    /// A well-formed frame that may not come where it came.
    #[error(transparent)]
    Order(#[from] OrderError),
}

/// Decodes the frame at the front of `buf`, and says how many bytes it took. An unknown type
/// is refused from its byte, a length other than its type's from its four, before the rest of
/// the frame is there; a truncated frame is refused as [`FrameError::Truncated`] (on a stream:
/// wait for more bytes).
pub fn decode_frame(buf: &[u8], limits: Limits) -> Result<(Frame<'_>, usize), FrameError> {
    let truncated_header = FrameError::Truncated {
        part: "header",
        needed: HEADER_LEN,
        available: buf.len(),
    };
    let Some(&ty) = buf.first() else {
        return Err(truncated_header);
    };
    let frame = frame_name(ty)?;
    let expected = match ty {
        TYPE_BEGIN | TYPE_END => 16,
        TYPE_PAGE => PAGE_PREFIX_LEN + limits.page_size as usize,
        _ => 8,
    };
    if let Some(length) = buf.get(1..5) {
        let found = u32::from_le_bytes(length.try_into().expect("4 bytes"));
        if found as usize != expected {
            return Err(FrameError::Length {
                frame,
                expected,
                found,
            });
        }
    }
    let Some((header, rest)) = buf.split_first_chunk::<HEADER_LEN>() else {
        return Err(truncated_header);
    };
    let Some(body) = rest.get(..expected) else {
        return Err(FrameError::Truncated {
            part: "body",
            needed: HEADER_LEN + expected,
            available: buf.len(),
        });
    };
    let found = u32::from_le_bytes([header[5], header[6], header[7], header[8]]);
    let computed = frame_crc(&header[..5], body);
    if found != computed {
        return Err(FrameError::Checksum {
            frame,
            found,
            computed,
        });
    }
    let decoded = decode_body(header[0], body, limits)?;
    Ok((decoded, HEADER_LEN + expected))
}

/// The name of frame type `ty`, or why it is none.
fn frame_name(ty: u8) -> Result<&'static str, FrameError> {
    match ty {
        TYPE_BEGIN => Ok("Begin"),
        TYPE_PAGE => Ok("Page"),
        TYPE_END => Ok("End"),
        TYPE_ACK => Ok("Ack"),
        found => Err(FrameError::UnknownType { found }),
    }
}

/// Decodes a body whose length and checksum were checked.
fn decode_body(ty: u8, body: &[u8], limits: Limits) -> Result<Frame<'_>, FrameError> {
    let u64_at = |at: usize| u64::from_le_bytes(body[at..at + 8].try_into().expect("8 bytes"));
    let u32_at = |at: usize| u32::from_le_bytes(body[at..at + 4].try_into().expect("4 bytes"));
    let checkpoint = u64_at(0);
    let frame = match ty {
        TYPE_BEGIN => {
            let (pages, page_size) = (u32_at(8), u32_at(12));
            if page_size != limits.page_size {
                return Err(FrameError::PageSize {
                    found: page_size,
                    expected: limits.page_size,
                });
            }
            if pages > limits.pages_max {
                return Err(FrameError::PageCount {
                    found: pages,
                    max: limits.pages_max,
                });
            }
            Frame::Begin {
                checkpoint,
                pages,
                page_size,
            }
        }
        TYPE_PAGE => {
            let index = u32_at(8);
            if index >= limits.pages_max {
                return Err(FrameError::PageIndex {
                    found: index,
                    pages_max: limits.pages_max,
                });
            }
            Frame::Page {
                checkpoint,
                index,
                bytes: Cow::Borrowed(&body[PAGE_PREFIX_LEN..]),
            }
        }
        TYPE_END => Frame::End {
            checkpoint,
            hash: u64_at(8),
        },
        _ => Frame::Ack { checkpoint },
    };
    if checkpoint == 0 {
        return Err(FrameError::CheckpointZero {
            frame: frame.kind(),
        });
    }
    Ok(frame)
}

/// Why a well-formed frame may not come where it came.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OrderError {
    #[error("{frame} frame of checkpoint {found} with no checkpoint open: a Begin comes first")]
    NotOpen { frame: &'static str, found: u64 },
    #[error(
        "Begin of checkpoint {found} while checkpoint {open} is open: its End comes first, \
         or a rollback"
    )]
    StillOpen { open: u64, found: u64 },
    #[error("{frame} frame, field 'checkpoint': {found}, but the next is {expected}")]
    Checkpoint {
        frame: &'static str,
        expected: u64,
        found: u64,
    },
    #[error(
        "a Page frame past the {announced} that checkpoint {checkpoint}'s Begin announced \
         (field 'pages')"
    )]
    PagesBeyond { checkpoint: u64, announced: u32 },
    #[error(
        "End of checkpoint {checkpoint} after {received} Page frames, but its Begin announced \
         {announced} (field 'pages')"
    )]
    PagesMissing {
        checkpoint: u64,
        announced: u32,
        received: u32,
    },
    #[error("an Ack frame on the way to the backup: Acks go from the backup to the primary")]
    AckToBackup,
    #[error("a {frame} frame on the way to the primary: only Acks go that way")]
    DataToPrimary { frame: &'static str },
    #[error("Ack frame, field 'checkpoint': {found}, but checkpoint {acked_last} is acked")]
    AckStale { acked_last: u64, found: u64 },
}

/// Where a stream to the backup stands: the last checkpoint it completed and the one open.
/// Entered with the backup's last complete checkpoint; `Begin` opens the next, `End` completes
/// it, and a rollback ([`Sequence::abandon`]) closes it incomplete.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Sequence {
    complete_last: u64,
    open: Option<Open>,
}

/// A checkpoint begun and not yet ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Open {
    checkpoint: u64,
    pages_announced: u32,
    pages_received: u32,
}

impl Sequence {
    pub(crate) fn new(complete_last: u64) -> Sequence {
        Sequence {
            complete_last,
            open: None,
        }
    }

    pub(crate) fn complete_last(&self) -> u64 {
        self.complete_last
    }

    pub(crate) fn open(&self) -> Option<u64> {
        self.open.map(|open| open.checkpoint)
    }

    /// Says whether `frame` may come next, changing nothing.
    pub(crate) fn check(&self, frame: &Frame<'_>) -> Result<(), OrderError> {
        let expected = self.complete_last + 1;
        let found = frame.checkpoint();
        match (frame, self.open) {
            (Frame::Ack { .. }, _) => Err(OrderError::AckToBackup),
            (Frame::Begin { .. }, Some(open)) => Err(OrderError::StillOpen {
                open: open.checkpoint,
                found,
            }),
            (Frame::Page { .. } | Frame::End { .. }, None) => Err(OrderError::NotOpen {
                frame: frame.kind(),
                found,
            }),
            _ if found != expected => Err(OrderError::Checkpoint {
                frame: frame.kind(),
                expected,
                found,
            }),
            (Frame::Page { .. }, Some(open)) if open.pages_received == open.pages_announced => {
                Err(OrderError::PagesBeyond {
                    checkpoint: open.checkpoint,
                    announced: open.pages_announced,
                })
            }
            (Frame::End { .. }, Some(open)) if open.pages_received < open.pages_announced => {
                Err(OrderError::PagesMissing {
                    checkpoint: open.checkpoint,
                    announced: open.pages_announced,
                    received: open.pages_received,
                })
            }
            _ => Ok(()),
        }
    }

    /// Moves past `frame`, which [`Sequence::check`] allowed.
    pub(crate) fn advance(&mut self, frame: &Frame<'_>) {
        assert_eq!(
            self.check(frame),
            Ok(()),
            "advance past a frame checked first"
        );
        match frame {
            Frame::Begin { pages, .. } => {
                self.open = Some(Open {
                    checkpoint: self.complete_last + 1,
                    pages_announced: *pages,
                    pages_received: 0,
                });
            }
            Frame::Page { .. } => {
                let open = self.open.as_mut().expect("checked: a checkpoint is open");
                open.pages_received += 1;
            }
            Frame::End { .. } => {
                self.open = None;
                self.complete_last += 1;
            }
            Frame::Ack { .. } => unreachable!("checked: no Ack goes to the backup"),
        }
    }

    /// Closes the open checkpoint, if any, incomplete.
    pub(crate) fn abandon(&mut self) {
        self.open = None;
    }
}

/// Decodes a stream of frames and checks their order: to the backup, `Begin`, its `Page`s and
/// its `End` for each checkpoint in turn, from the one after the backup's last complete; to the
/// primary, `Ack`s of ever later checkpoints. A frame refused leaves the reader as it was.
#[derive(Debug, Clone)]
pub struct FrameReader {
    limits: Limits,
    direction: Direction,
}

#[derive(Debug, Clone)]
enum Direction {
    ToBackup(Sequence),
    ToPrimary { acked_last: u64 },
}

impl FrameReader {
    /// Reads what a primary sends a backup whose last complete checkpoint is `complete_last`.
    pub fn to_backup(limits: Limits, complete_last: u64) -> FrameReader {
        FrameReader {
            limits,
            direction: Direction::ToBackup(Sequence::new(complete_last)),
        }
    }

    /// Reads what a backup sends a primary whose last acked checkpoint is `acked_last`.
    pub fn to_primary(limits: Limits, acked_last: u64) -> FrameReader {
        FrameReader {
            limits,
            direction: Direction::ToPrimary { acked_last },
        }
    }

    /// Decodes the frame at the front of `buf` (see [`decode_frame`]) and checks that it may
    /// come next; says how many bytes it took.
    pub fn read<'a>(&mut self, buf: &'a [u8]) -> Result<(Frame<'a>, usize), FrameError> {
        let (frame, len) = decode_frame(buf, self.limits)?;
        match &mut self.direction {
            Direction::ToBackup(sequence) => {
                sequence.check(&frame)?;
                sequence.advance(&frame);
            }
            Direction::ToPrimary { acked_last } => {
                let Frame::Ack { checkpoint } = frame else {
                    let frame = frame.kind();
                    return Err(OrderError::DataToPrimary { frame }.into());
                };
                if checkpoint <= *acked_last {
                    let acked_last = *acked_last;
                    let found = checkpoint;
                    return Err(OrderError::AckStale { acked_last, found }.into());
                }
                *acked_last = checkpoint;
            }
        }
        Ok((frame, len))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: Limits = Limits {
        page_size: 8,
        pages_max: 4,
    };

    #[test]
    fn a_page_frame_is_laid_out_as_documented() {
        let frame = Frame::Page {
            checkpoint: 2,
            index: 3,
            bytes: vec![0xAA; 8].into(),
        };
        let mut out = Vec::new();
        frame.encode(&mut out);
        assert_eq!(out.len(), HEADER_LEN + 12 + 8);
        assert_eq!(out[0], TYPE_PAGE);
        assert_eq!(out[1..5], 20u32.to_le_bytes());
        assert_eq!(out[9..17], 2u64.to_le_bytes());
        assert_eq!(out[17..21], 3u32.to_le_bytes());
        assert_eq!(decode_frame(&out, LIMITS), Ok((frame, out.len())));
    }

    #[test]
    fn an_oversized_page_is_refused_from_its_header() {
        let mut header = vec![TYPE_PAGE];
        header.extend_from_slice(&(1u32 << 30).to_le_bytes());
        assert_eq!(
            decode_frame(&header, LIMITS),
            Err(FrameError::Length {
                frame: "Page",
                expected: 20,
                found: 1 << 30
            })
        );
    }
}
