//! A message between two nodes as the bytes a peer connection carries: the replication
//! stream's `Peer` frames and the cluster cores' `Cluster` frames. The runtime writes these
//! bytes to its sockets and the simulator sends them over its network, so the codec is in
//! the loop the simulator checks.

use tandem_cluster::ClusterMessage;
use tandem_replication::Message;
use tandem_wire::{Frame, FrameError, decode_frame, encode_cluster, encode_peer};

/// What one peer frame carries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum PeerMessage {
    /// The replication stream: batches, acks, heartbeats, transfers, read indexes.
    Replication(Message),
    /// A message between the cluster cores (the config store's Raft, suspicions, freezes).
    Cluster(ClusterMessage),
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
}

/// Appends the `Peer` frame that carries `message`.
pub fn encode_replication(out: &mut Vec<u8>, message: &Message) {
    encode_peer(out, message);
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
        Frame::Peer(message) => Ok(PeerMessage::Replication(message)),
        Frame::Cluster(body) => decode_cluster_message(body).map(PeerMessage::Cluster),
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
        for message in replication {
            let mut bytes = Vec::new();
            encode_replication(&mut bytes, &message);
            let back = decode_peer_message(&bytes, MAX).expect("decodes");
            assert_eq!(back, PeerMessage::Replication(message));
        }
        let cluster = ClusterMessage::Freeze { group: 0, view: 12 };
        let mut bytes = Vec::new();
        encode_cluster_message(&mut bytes, &cluster);
        let back = decode_peer_message(&bytes, MAX).expect("decodes");
        assert_eq!(back, PeerMessage::Cluster(cluster));
    }

    #[test]
    fn a_cut_a_tail_a_client_frame_and_a_bad_body_are_refused() {
        let mut bytes = Vec::new();
        encode_replication(&mut bytes, &Message::StaleView { view: 4 });
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
