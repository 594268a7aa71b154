//! A message between two nodes as the bytes a peer connection carries: the replication
//! stream's `Peer` frames, the cluster cores' `Cluster` frames and the pub/sub messages a
//! primary relays (`Publication` frames). The runtime writes these
//! bytes to its sockets and the simulator sends them over its network, so the codec is in
//! the loop the simulator checks.

use tandem_cluster::ClusterMessage;
use tandem_config::GroupId;
use tandem_replication::Message;
use tandem_wire::{
    Frame, FrameError, decode_frame, encode_cluster, encode_peer, encode_publication,
};

/// What one peer frame carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMessage {
    /// A group's replication stream: batches, acks, heartbeats, transfers, read indexes.
    Replication { group: GroupId, message: Message },
    /// A message between the cluster cores (the config store's Raft, suspicions, freezes).
    Cluster(ClusterMessage),
    /// A pub/sub message the group's primary relays to the other members.
    Publication(RelayedPublication),
}

/// A pub/sub message a primary relays to the other members of its group, so that their
/// subscribers hear what was published on the primary, as a Redis replica's subscribers
/// hear what its master publishes. Like every pub/sub message it is never stored: a member
/// that misses it (cut off, or in another role by then) never delivers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RelayedPublication {
    /// The group whose primary relayed it.
    pub group: GroupId,
    /// The view of that group the primary relayed it in.
    pub view: u64,
    /// The primary's last committed LSN when it relayed the message: a member delivers it
    /// once it has applied that far, so after every write its publisher sent before it.
    pub lsn: u64,
    /// A shard channel's message (`SPUBLISH`), not a channel's.
    pub shard: bool,
    pub channel: Vec<u8>,
    pub message: Vec<u8>,
}

/// Bytes of a relayed publication's body before its channel: group, view, LSN, shard flag
/// and the channel's length.
const PUBLICATION_HEAD_LEN: usize = 4 + 8 + 8 + 1 + 4;

/// Bytes of the `Publication` frame that carries a message of `channel_len` and
/// `message_len` bytes, its length prefix included: what a receiver's frame limit weighs.
pub fn relayed_publication_frame_len(channel_len: usize, message_len: usize) -> usize {
    5 + PUBLICATION_HEAD_LEN + channel_len + message_len
}

/// Appends the `Publication` frame that carries `publication`.
pub fn encode_relayed_publication(out: &mut Vec<u8>, publication: &RelayedPublication) {
    let channel_len =
        u32::try_from(publication.channel.len()).expect("a channel fits a frame's length");
    let mut body = Vec::with_capacity(
        PUBLICATION_HEAD_LEN + publication.channel.len() + publication.message.len(),
    );
    body.extend_from_slice(&publication.group.to_le_bytes());
    body.extend_from_slice(&publication.view.to_le_bytes());
    body.extend_from_slice(&publication.lsn.to_le_bytes());
    body.push(u8::from(publication.shard));
    body.extend_from_slice(&channel_len.to_le_bytes());
    body.extend_from_slice(&publication.channel);
    body.extend_from_slice(&publication.message);
    encode_publication(out, &body);
}

/// The relayed publication a `Publication` frame's body holds.
pub fn decode_relayed_publication(body: &[u8]) -> Result<RelayedPublication, PeerFrameError> {
    let bad = |detail: &str| PeerFrameError::PublicationBody {
        detail: detail.to_owned(),
    };
    let head = body
        .get(..PUBLICATION_HEAD_LEN)
        .ok_or_else(|| bad("shorter than its head (group, view, LSN, shard, channel length)"))?;
    let half = |at: usize| u32::from_le_bytes(head[at..at + 4].try_into().expect("4 bytes"));
    let word = |at: usize| u64::from_le_bytes(head[at..at + 8].try_into().expect("8 bytes"));
    let shard = match head[20] {
        0 => false,
        1 => true,
        _ => return Err(bad("the shard flag is neither 0 nor 1")),
    };
    let channel_len = half(21) as usize;
    let rest = &body[PUBLICATION_HEAD_LEN..];
    if channel_len > rest.len() {
        return Err(bad("the channel's length runs past the frame"));
    }
    let (channel, message) = rest.split_at(channel_len);
    Ok(RelayedPublication {
        group: half(0),
        view: word(4),
        lsn: word(12),
        shard,
        channel: channel.to_vec(),
        message: message.to_vec(),
    })
}

/// Why bytes are not one whole peer frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PeerFrameError {
    #[error(transparent)]
    Frame(#[from] FrameError),
    #[error("a peer frame cut short: {len} bytes hold no whole frame")]
    Incomplete { len: usize },
    #[error("{extra} bytes follow the peer frame")]
    Trailing { extra: usize },
    #[error("a {kind} frame where a peer frame was expected")]
    NotPeer { kind: &'static str },
    #[error("cluster frame: {detail}")]
    ClusterBody { detail: String },
    #[error("publication frame: {detail}")]
    PublicationBody { detail: String },
}

/// Appends the `Peer` frame that carries `message` of `group`'s stream.
pub fn encode_replication(out: &mut Vec<u8>, group: GroupId, message: &Message) {
    encode_peer(out, group, message);
}

/// Appends the `Cluster` frame that carries `message` (postcard inside the envelope).
pub fn encode_cluster_message(out: &mut Vec<u8>, message: &ClusterMessage) {
    let body = postcard::to_allocvec(message).expect("a cluster message always serializes");
    encode_cluster(out, &body);
}

/// The cluster message a `Cluster` frame's body holds.
pub fn decode_cluster_message(body: &[u8]) -> Result<ClusterMessage, PeerFrameError> {
    postcard::from_bytes(body).map_err(|err| PeerFrameError::ClusterBody {
        detail: err.to_string(),
    })
}

/// The message in `bytes`, which must be exactly one peer or cluster frame of at most
/// `max_frame_len` bytes.
pub fn decode_peer_message(
    bytes: &[u8],
    max_frame_len: usize,
) -> Result<PeerMessage, PeerFrameError> {
    let (frame, used) = decode_frame(bytes, max_frame_len)?
        .ok_or(PeerFrameError::Incomplete { len: bytes.len() })?;
    if used != bytes.len() {
        return Err(PeerFrameError::Trailing {
            extra: bytes.len() - used,
        });
    }
    match frame {
        Frame::Peer { group, message } => Ok(PeerMessage::Replication { group, message }),
        Frame::Cluster(body) => decode_cluster_message(body).map(PeerMessage::Cluster),
        Frame::Publication(body) => decode_relayed_publication(body).map(PeerMessage::Publication),
        other => Err(PeerFrameError::NotPeer { kind: other.kind() }),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const MAX: usize = 1 << 20;

    #[test]
    fn every_kind_of_message_comes_back_as_it_left() {
        let replication = [
            Message::Batch(Arc::from(&b"some batch bytes"[..])),
            Message::Heartbeat {
                view: 3,
                lsn_committed: 9,
                lsn_released: 8,
                tick_sent: 77,
            },
            Message::StaleView { view: 4 },
        ];
        for (group, message) in [0, 3, u32::MAX].into_iter().zip(replication) {
            let mut bytes = Vec::new();
            encode_replication(&mut bytes, group, &message);
            let back = decode_peer_message(&bytes, MAX).expect("decodes");
            assert_eq!(back, PeerMessage::Replication { group, message });
        }
        let cluster = ClusterMessage::Freeze { group: 0, view: 12 };
        let mut bytes = Vec::new();
        encode_cluster_message(&mut bytes, &cluster);
        let back = decode_peer_message(&bytes, MAX).expect("decodes");
        assert_eq!(back, PeerMessage::Cluster(cluster));
        for (group, shard, channel) in [(0, false, &b"news"[..]), (9, true, &b""[..])] {
            let publication = RelayedPublication {
                group,
                view: 7,
                lsn: 1_234,
                shard,
                channel: channel.to_vec(),
                message: b"hello \x00 there".to_vec(),
            };
            let mut bytes = Vec::new();
            encode_relayed_publication(&mut bytes, &publication);
            let back = decode_peer_message(&bytes, MAX).expect("decodes");
            assert_eq!(back, PeerMessage::Publication(publication));
        }
    }

    #[test]
    fn a_publication_body_cut_short_or_with_a_bad_flag_is_refused() {
        let publication = RelayedPublication {
            group: 4,
            view: 1,
            lsn: 2,
            shard: false,
            channel: b"chan".to_vec(),
            message: b"m".to_vec(),
        };
        let mut frame = Vec::new();
        encode_relayed_publication(&mut frame, &publication);
        assert_eq!(frame.len(), relayed_publication_frame_len(4, 1));
        let body = &frame[5..];
        assert!(decode_relayed_publication(body).is_ok());
        for cut in [0, PUBLICATION_HEAD_LEN - 1, PUBLICATION_HEAD_LEN + 3] {
            assert!(
                matches!(
                    decode_relayed_publication(&body[..cut]),
                    Err(PeerFrameError::PublicationBody { .. })
                ),
                "a body cut to {cut} bytes"
            );
        }
        let mut flagged = body.to_vec();
        flagged[20] = 2;
        assert!(matches!(
            decode_relayed_publication(&flagged),
            Err(PeerFrameError::PublicationBody { .. })
        ));
    }

    #[test]
    fn a_cut_a_tail_a_client_frame_and_a_bad_body_are_refused() {
        let mut bytes = Vec::new();
        encode_replication(&mut bytes, 0, &Message::StaleView { view: 4 });
        let cut = &bytes[..bytes.len() - 1];
        assert!(matches!(
            decode_peer_message(cut, MAX),
            Err(PeerFrameError::Incomplete { .. })
        ));
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(
            decode_peer_message(&longer, MAX),
            Err(PeerFrameError::Trailing { extra: 1 })
        );
        let mut members = Vec::new();
        tandem_wire::encode_members(&mut members);
        assert_eq!(
            decode_peer_message(&members, MAX),
            Err(PeerFrameError::NotPeer { kind: "Members" })
        );
        let mut cluster = Vec::new();
        encode_cluster(&mut cluster, &[0xff, 0xff, 0xff]);
        assert!(matches!(
            decode_peer_message(&cluster, MAX),
            Err(PeerFrameError::ClusterBody { .. })
        ));
    }
}
