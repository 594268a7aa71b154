//! `Peer` frames: replication [`Message`]s between a group's primary and its backups, each
//! naming its group (one connection per node pair carries every group's stream).

use std::sync::Arc;

use tandem_replication::{Message, PagesChunk};
use zerocopy::little_endian::{U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::frame::{self, ENVELOPE_LEN, FrameError, TYPE_PEER, bad_body};

/// Bytes [`encode_batch_frame_header`] writes: the envelope, the group and the sub-tag.
pub const BATCH_FRAME_HEADER_LEN: usize = ENVELOPE_LEN + GROUP_LEN + 1;

/// Bytes of the group id that opens every `Peer` body.
const GROUP_LEN: usize = 4;

const TAG_BATCH: u8 = 1;
const TAG_HEARTBEAT: u8 = 2;
const TAG_ACK: u8 = 3;
const TAG_NACK: u8 = 4;
const TAG_STALE_VIEW: u8 = 5;
const TAG_PAGES: u8 = 6;
const TAG_PULSE: u8 = 7;
const TAG_DIVERGED: u8 = 8;
const TAG_READ_INDEX: u8 = 9;
const TAG_READ_INDEXED: u8 = 10;
const TAG_SYNC_WANTED: u8 = 11;

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Heartbeat {
    view: U64,
    lsn_committed: U64,
    lsn_released: U64,
    tick_sent: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Ack {
    view: U64,
    lsn_received: U64,
    lsn_applied: U64,
    lsn_durable: U64,
    tick_echoed: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct Nack {
    view: U64,
    lsn_received: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct StaleView {
    view: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct ReadIndex {
    view: U64,
    id: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct SyncWanted {
    view: U64,
    lsn: U64,
}

#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct ReadIndexed {
    view: U64,
    id: U64,
    lsn_released: U64,
}

/// The fixed fields of a `Diverged` message; the page numbers follow, u32 LE each.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct DivergedHeader {
    view: U64,
    lsn_received: U64,
}

/// The fixed fields of a `Pages` message; the page entries follow.
#[derive(FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct PagesHeader {
    view: U64,
    lsn_from: U64,
    lsn: U64,
    index: U32,
    count: U32,
    crc: U32,
}

/// Appends a `Peer` frame carrying `message` of `group`. A batch's bytes are copied into `out`;
/// to send a shared batch without copying, use [`encode_batch_frame_header`].
pub fn encode_peer(out: &mut Vec<u8>, group: u32, message: &Message) {
    match *message {
        Message::Batch(ref bytes) => {
            encode_batch_frame_header(out, group, bytes.len());
            out.extend_from_slice(bytes);
        }
        Message::Heartbeat {
            view,
            lsn_committed,
            lsn_released,
            tick_sent,
        } => {
            let fields = Heartbeat {
                view: view.into(),
                lsn_committed: lsn_committed.into(),
                lsn_released: lsn_released.into(),
                tick_sent: tick_sent.into(),
            };
            encode_fixed(out, group, TAG_HEARTBEAT, fields.as_bytes());
        }
        Message::Ack {
            view,
            lsn_received,
            lsn_applied,
            lsn_durable,
            tick_echoed,
        } => {
            let fields = Ack {
                view: view.into(),
                lsn_received: lsn_received.into(),
                lsn_applied: lsn_applied.into(),
                lsn_durable: lsn_durable.into(),
                tick_echoed: tick_echoed.into(),
            };
            encode_fixed(out, group, TAG_ACK, fields.as_bytes());
        }
        Message::Nack { view, lsn_received } => {
            let fields = Nack {
                view: view.into(),
                lsn_received: lsn_received.into(),
            };
            encode_fixed(out, group, TAG_NACK, fields.as_bytes());
        }
        Message::StaleView { view } => {
            encode_fixed(
                out,
                group,
                TAG_STALE_VIEW,
                StaleView { view: view.into() }.as_bytes(),
            );
        }
        Message::Pulse { view } => {
            // The same layout as StaleView: one view number.
            encode_fixed(
                out,
                group,
                TAG_PULSE,
                StaleView { view: view.into() }.as_bytes(),
            );
        }
        Message::ReadIndex { view, id } => {
            let fields = ReadIndex {
                view: view.into(),
                id: id.into(),
            };
            encode_fixed(out, group, TAG_READ_INDEX, fields.as_bytes());
        }
        Message::ReadIndexed {
            view,
            id,
            lsn_released,
        } => {
            let fields = ReadIndexed {
                view: view.into(),
                id: id.into(),
                lsn_released: lsn_released.into(),
            };
            encode_fixed(out, group, TAG_READ_INDEXED, fields.as_bytes());
        }
        Message::SyncWanted { view, lsn } => {
            let fields = SyncWanted {
                view: view.into(),
                lsn: lsn.into(),
            };
            encode_fixed(out, group, TAG_SYNC_WANTED, fields.as_bytes());
        }
        Message::Pages(ref chunk) => encode_pages(out, group, chunk),
        Message::Diverged {
            view,
            lsn_received,
            ref pages,
        } => {
            let header = DivergedHeader {
                view: view.into(),
                lsn_received: lsn_received.into(),
            };
            let start = begin_peer(out, group, TAG_DIVERGED);
            out.extend_from_slice(header.as_bytes());
            for &page in pages.iter() {
                out.extend_from_slice(&page.to_le_bytes());
            }
            frame::finish(out, start);
        }
    }
}

/// Appends the `Peer` frame of a chunk of a state transfer's pages.
fn encode_pages(out: &mut Vec<u8>, group: u32, chunk: &PagesChunk) {
    let header = PagesHeader {
        view: chunk.view.into(),
        lsn_from: chunk.lsn_from.into(),
        lsn: chunk.lsn.into(),
        index: chunk.index.into(),
        count: chunk.count.into(),
        crc: chunk.crc.into(),
    };
    let start = begin_peer(out, group, TAG_PAGES);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(&chunk.pages);
    frame::finish(out, start);
}

fn encode_fixed(out: &mut Vec<u8>, group: u32, tag: u8, fields: &[u8]) {
    let start = begin_peer(out, group, tag);
    out.extend_from_slice(fields);
    frame::finish(out, start);
}

/// Begins a `Peer` frame of `group` with sub-tag `tag`; returns where it starts.
fn begin_peer(out: &mut Vec<u8>, group: u32, tag: u8) -> usize {
    let start = frame::begin(out, TYPE_PEER);
    out.extend_from_slice(&group.to_le_bytes());
    out.push(tag);
    start
}

/// Appends only the first [`BATCH_FRAME_HEADER_LEN`] bytes of a `Peer` `Batch` frame of `group`
/// whose batch is `batch_len` bytes long. The frame is complete once the caller sends the batch's
/// bytes right after these, typically with one vectored write of `[out, batch]`, so a batch
/// shared by every backup's link and the retained tail is never copied to be sent.
pub fn encode_batch_frame_header(out: &mut Vec<u8>, group: u32, batch_len: usize) {
    // `len` counts the type, the group and the sub-tag before the batch.
    let len = batch_len
        .checked_add(1 + GROUP_LEN + 1)
        .and_then(|len| u32::try_from(len).ok())
        .expect("a batch frame's length fits in u32");
    out.extend_from_slice(&len.to_le_bytes());
    out.push(TYPE_PEER);
    out.extend_from_slice(&group.to_le_bytes());
    out.push(TAG_BATCH);
}

/// The group and the message a `Peer` frame's body holds.
pub(crate) fn decode_peer(body: &[u8]) -> Result<(u32, Message), FrameError> {
    let Some((group, body)) = body.split_first_chunk::<GROUP_LEN>() else {
        let detail = format!("missing: the body holds {} of its 4 bytes", body.len());
        return Err(bad_body("Peer", "group", detail));
    };
    let group = u32::from_le_bytes(*group);
    let Some((&tag, rest)) = body.split_first() else {
        return Err(bad_body(
            "Peer",
            "sub_tag",
            "missing: the body is empty".into(),
        ));
    };
    let message = match tag {
        TAG_BATCH => Message::Batch(Arc::from(rest)),
        TAG_HEARTBEAT => {
            let fields = fixed::<Heartbeat>("Heartbeat", rest)?;
            Message::Heartbeat {
                view: fields.view.get(),
                lsn_committed: fields.lsn_committed.get(),
                lsn_released: fields.lsn_released.get(),
                tick_sent: fields.tick_sent.get(),
            }
        }
        TAG_ACK => {
            let fields = fixed::<Ack>("Ack", rest)?;
            Message::Ack {
                view: fields.view.get(),
                lsn_received: fields.lsn_received.get(),
                lsn_applied: fields.lsn_applied.get(),
                lsn_durable: fields.lsn_durable.get(),
                tick_echoed: fields.tick_echoed.get(),
            }
        }
        TAG_NACK => {
            let fields = fixed::<Nack>("Nack", rest)?;
            Message::Nack {
                view: fields.view.get(),
                lsn_received: fields.lsn_received.get(),
            }
        }
        TAG_STALE_VIEW => Message::StaleView {
            view: fixed::<StaleView>("StaleView", rest)?.view.get(),
        },
        TAG_PULSE => Message::Pulse {
            view: fixed::<StaleView>("Pulse", rest)?.view.get(),
        },
        TAG_PAGES => {
            let Ok((header, pages)) = PagesHeader::ref_from_prefix(rest) else {
                let detail = format!(
                    "Pages takes at least {} bytes after the sub-tag, got {}",
                    size_of::<PagesHeader>(),
                    rest.len()
                );
                return Err(bad_body("Peer", "body", detail));
            };
            Message::Pages(PagesChunk {
                view: header.view.get(),
                lsn_from: header.lsn_from.get(),
                lsn: header.lsn.get(),
                index: header.index.get(),
                count: header.count.get(),
                crc: header.crc.get(),
                pages: Arc::from(pages),
            })
        }
        TAG_DIVERGED => decode_diverged(rest)?,
        TAG_READ_INDEX => {
            let fields = fixed::<ReadIndex>("ReadIndex", rest)?;
            Message::ReadIndex {
                view: fields.view.get(),
                id: fields.id.get(),
            }
        }
        TAG_READ_INDEXED => {
            let fields = fixed::<ReadIndexed>("ReadIndexed", rest)?;
            Message::ReadIndexed {
                view: fields.view.get(),
                id: fields.id.get(),
                lsn_released: fields.lsn_released.get(),
            }
        }
        TAG_SYNC_WANTED => {
            let fields = fixed::<SyncWanted>("SyncWanted", rest)?;
            Message::SyncWanted {
                view: fields.view.get(),
                lsn: fields.lsn.get(),
            }
        }
        _ => {
            let detail = format!("unknown message {tag}; 1 to {TAG_SYNC_WANTED} are defined");
            return Err(bad_body("Peer", "sub_tag", detail));
        }
    };
    Ok((group, message))
}

fn decode_diverged(rest: &[u8]) -> Result<Message, FrameError> {
    let Ok((header, pages)) = DivergedHeader::ref_from_prefix(rest) else {
        let detail = format!(
            "Diverged takes at least {} bytes after the sub-tag, got {}",
            size_of::<DivergedHeader>(),
            rest.len()
        );
        return Err(bad_body("Peer", "body", detail));
    };
    if !pages.len().is_multiple_of(4) {
        let detail = format!(
            "Diverged's page numbers take 4 bytes each, got {} bytes",
            pages.len()
        );
        return Err(bad_body("Peer", "pages", detail));
    }
    let pages: Vec<u32> = pages
        .chunks_exact(4)
        .map(|page| u32::from_le_bytes(page.try_into().expect("4 bytes")))
        .collect();
    if pages.len() > tandem_replication::DIVERGED_PAGES_MAX {
        let detail = format!(
            "{} page numbers, more than the {} a member sends",
            pages.len(),
            tandem_replication::DIVERGED_PAGES_MAX
        );
        return Err(bad_body("Peer", "pages", detail));
    }
    if !pages.is_sorted_by(|a, b| a < b) {
        let detail = "page numbers must be strictly ascending".to_owned();
        return Err(bad_body("Peer", "pages", detail));
    }
    Ok(Message::Diverged {
        view: header.view.get(),
        lsn_received: header.lsn_received.get(),
        pages: Arc::from(pages),
    })
}

/// The fields of a fixed-size message, which must fill the rest of the body exactly.
fn fixed<'a, T: FromBytes + KnownLayout + Immutable>(
    name: &'static str,
    rest: &'a [u8],
) -> Result<&'a T, FrameError> {
    T::ref_from_bytes(rest).map_err(|_| {
        let detail = format!(
            "{name} takes {} bytes after the sub-tag, got {}",
            size_of::<T>(),
            rest.len()
        );
        bad_body("Peer", "body", detail)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Frame;

    use crate::frame::decode_whole as decode;

    #[test]
    fn every_message_round_trips() {
        for message in [
            Message::Batch(Arc::from(&b"batch bytes"[..])),
            Message::Batch(Arc::from(&[][..])),
            Message::Heartbeat {
                view: 1,
                lsn_committed: 2,
                lsn_released: 13,
                tick_sent: 8,
            },
            Message::Ack {
                view: 3,
                lsn_received: 4,
                lsn_applied: 5,
                lsn_durable: 3,
                tick_echoed: 9,
            },
            Message::Nack {
                view: 6,
                lsn_received: 7,
            },
            Message::StaleView { view: u64::MAX },
            Message::Pulse { view: 14 },
            Message::ReadIndex { view: 17, id: 18 },
            Message::SyncWanted { view: 21, lsn: 22 },
            Message::ReadIndexed {
                view: 19,
                id: 20,
                lsn_released: u64::MAX,
            },
            Message::Diverged {
                view: 15,
                lsn_received: 16,
                pages: Arc::from(&[0, 3, 70_000][..]),
            },
            Message::Diverged {
                view: 15,
                lsn_received: 16,
                pages: Arc::from(&[][..]),
            },
            Message::Pages(PagesChunk {
                view: 10,
                lsn_from: 11,
                lsn: 12,
                index: 1,
                count: 3,
                crc: 0xdead_beef,
                pages: Arc::from(&b"page entries"[..]),
            }),
        ] {
            for group in [0, 7, u32::MAX] {
                let mut out = Vec::new();
                encode_peer(&mut out, group, &message);
                let message = message.clone();
                assert_eq!(decode(&out), Ok(Frame::Peer { group, message }));
            }
        }
    }

    #[test]
    fn batch_header_then_batch_bytes_is_a_whole_frame() {
        let batch: Arc<[u8]> = Arc::from(&[9u8; 300][..]);
        let mut header = Vec::new();
        encode_batch_frame_header(&mut header, 5, batch.len());
        assert_eq!(header.len(), BATCH_FRAME_HEADER_LEN);
        let mut whole = Vec::new();
        encode_peer(&mut whole, 5, &Message::Batch(Arc::clone(&batch)));
        assert_eq!(
            decode(&whole),
            Ok(Frame::Peer {
                group: 5,
                message: Message::Batch(Arc::clone(&batch))
            })
        );
        assert_eq!(whole[..BATCH_FRAME_HEADER_LEN], header[..]);
        assert_eq!(whole[BATCH_FRAME_HEADER_LEN..], batch[..]);
    }

    #[test]
    fn fixed_messages_need_exact_lengths() {
        let mut out = Vec::new();
        encode_peer(&mut out, 0, &Message::StaleView { view: 1 });
        out.push(0);
        out[0] += 1;
        assert_eq!(
            decode(&out).unwrap_err().to_string(),
            "Peer frame, field 'body': StaleView takes 8 bytes after the sub-tag, got 9"
        );
        let empty = [1, 0, 0, 0, TYPE_PEER];
        assert_eq!(
            decode(&empty).unwrap_err().to_string(),
            "Peer frame, field 'group': missing: the body holds 0 of its 4 bytes"
        );
        let short_group = [3, 0, 0, 0, TYPE_PEER, 1, 0];
        assert_eq!(
            decode(&short_group).unwrap_err().to_string(),
            "Peer frame, field 'group': missing: the body holds 2 of its 4 bytes"
        );
        let no_tag = [5, 0, 0, 0, TYPE_PEER, 1, 0, 0, 0];
        assert_eq!(
            decode(&no_tag).unwrap_err().to_string(),
            "Peer frame, field 'sub_tag': missing: the body is empty"
        );
        let unknown = [6, 0, 0, 0, TYPE_PEER, 0, 0, 0, 0, 12];
        assert_eq!(
            decode(&unknown).unwrap_err().to_string(),
            "Peer frame, field 'sub_tag': unknown message 12; 1 to 11 are defined"
        );
        let mut ragged = Vec::new();
        let pages = std::sync::Arc::from(&[1, 2][..]);
        let diverged = Message::Diverged {
            view: 1,
            lsn_received: 2,
            pages,
        };
        encode_peer(&mut ragged, 0, &diverged);
        ragged.push(0);
        ragged[0] += 1;
        assert_eq!(
            decode(&ragged).unwrap_err().to_string(),
            "Peer frame, field 'pages': Diverged's page numbers take 4 bytes each, got 9 bytes"
        );
        let mut unsorted = Vec::new();
        let pages = std::sync::Arc::from(&[2, 2][..]);
        let diverged = Message::Diverged {
            view: 1,
            lsn_received: 2,
            pages,
        };
        encode_peer(&mut unsorted, 0, &diverged);
        assert_eq!(
            decode(&unsorted).unwrap_err().to_string(),
            "Peer frame, field 'pages': page numbers must be strictly ascending"
        );
        let short_pages = [7, 0, 0, 0, TYPE_PEER, 0, 0, 0, 0, 6, 0];
        assert_eq!(
            decode(&short_pages).unwrap_err().to_string(),
            "Peer frame, field 'body': Pages takes at least 36 bytes after the sub-tag, got 1"
        );
    }
}
