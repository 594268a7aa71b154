//! The envelope, the decoding entry point and its errors.

use tandem_replication::Message;

use crate::auth::{self, Auth, ClientProof};
use crate::call::{self, Call, Read, Reply};
use crate::control::{self, ErrorCode, ErrorFrame, Hello, Welcome};
use crate::members::{self, MembersAnswer};
use crate::{PROTOCOL_VERSION, peer};

pub(crate) const TYPE_HELLO: u8 = 0x01;
pub(crate) const TYPE_WELCOME: u8 = 0x02;
pub(crate) const TYPE_ERROR: u8 = 0x03;
pub(crate) const TYPE_AUTH: u8 = 0x04;
pub(crate) const TYPE_CLIENT_PROOF: u8 = 0x05;
pub(crate) const TYPE_CALL: u8 = 0x10;
pub(crate) const TYPE_REPLY: u8 = 0x11;
pub(crate) const TYPE_READ: u8 = 0x12;
pub(crate) const TYPE_MEMBERS: u8 = 0x13;
pub(crate) const TYPE_MEMBERS_ANSWER: u8 = 0x14;
pub(crate) const TYPE_PEER: u8 = 0x20;
pub(crate) const TYPE_CLUSTER: u8 = 0x30;
pub(crate) const TYPE_PUBLICATION: u8 = 0x31;

/// Bytes of the envelope in front of the body: `len` and `type`.
pub(crate) const ENVELOPE_LEN: usize = 5;

/// One decoded frame. `Call` and `Reply` borrow their payload from the decoded bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    Hello(Hello),
    Welcome(Welcome),
    Error(ErrorFrame),
    /// A step of a peer link's handshake, or a node's challenge to a client (auth.rs).
    Auth(Auth),
    /// A client's answer to a node's challenge (auth.rs).
    ClientProof(ClientProof),
    Call(Call<'a>),
    Reply(Reply<'a>),
    Read(Read<'a>),
    /// A client asks which nodes make up the group.
    Members,
    MembersAnswer(MembersAnswer),
    /// A replication message of a group's stream.
    Peer {
        group: u32,
        message: Message,
    },
    /// A cluster-core message between two nodes, its bytes decoded by the cluster layer
    /// (the wire does not know its types).
    Cluster(&'a [u8]),
    /// A pub/sub message a primary relays to the other members of its group, its bytes
    /// decoded by the node (the wire does not know its types).
    Publication(&'a [u8]),
}

impl Frame<'_> {
    /// The frame's type, as error messages name it.
    pub fn kind(&self) -> &'static str {
        match self {
            Frame::Hello(_) => "Hello",
            Frame::Welcome(_) => "Welcome",
            Frame::Error(_) => "Error",
            Frame::Auth(_) => "Auth",
            Frame::ClientProof(_) => "ClientProof",
            Frame::Call(_) => "Call",
            Frame::Reply(_) => "Reply",
            Frame::Read(_) => "Read",
            Frame::Members => "Members",
            Frame::MembersAnswer(_) => "MembersAnswer",
            Frame::Peer { .. } => "Peer",
            Frame::Cluster(_) => "Cluster",
            Frame::Publication(_) => "Publication",
        }
    }

    /// Appends this frame as its encoder would (relays and tests).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match self {
            Frame::Hello(hello) => control::encode_hello(out, hello),
            Frame::Welcome(welcome) => control::encode_welcome(out, welcome),
            Frame::Error(error) => control::encode_error(out, error.code, &error.message),
            Frame::Auth(a) => auth::encode_auth(out, a),
            Frame::ClientProof(p) => auth::encode_client_proof(out, &p.user, &p.proof),
            Frame::Call(c) => call::encode_call(out, c.seq, c.proc_id, c.safety, c.args),
            Frame::Reply(r) => call::encode_reply(out, r.seq, r.lsn, r.status, r.body),
            Frame::Read(r) => {
                call::encode_read(out, r.seq, r.proc_id, r.min_lsn, r.consistency, r.args)
            }
            Frame::Members => members::encode_members(out),
            Frame::MembersAnswer(answer) => {
                members::encode_members_answer(out, answer.view, &answer.members, &answer.slots)
            }
            Frame::Peer { group, message } => peer::encode_peer(out, *group, message),
            Frame::Cluster(body) => encode_cluster(out, body),
            Frame::Publication(body) => encode_publication(out, body),
        }
    }
}

/// Why bytes are not a valid frame. Each one ends the connection: after it the stream cannot
/// be trusted to be at a frame boundary.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FrameError {
    #[error("frame length {len} exceeds this receiver's limit of {max} bytes")]
    TooLarge { len: u32, max: usize },
    #[error("frame length 0: a frame holds at least its type byte")]
    Empty,
    #[error("unknown frame type {found:#04x}")]
    UnknownType { found: u8 },
    #[error("Hello magic \"{}\" is not \"TNDM\": the peer does not speak tandem", found.escape_ascii())]
    BadMagic { found: [u8; 4] },
    #[error("protocol version {found} is not supported (this node speaks {PROTOCOL_VERSION})")]
    UnsupportedVersion { found: u16 },
    #[error(
        "frame {seq} on an authenticated link carries a wrong MAC: not from the peer, or altered"
    )]
    BadMac { seq: u64 },
    #[error(transparent)]
    Tls(#[from] crate::records::RecordError),
    #[error("{frame} frame, field '{field}': {detail}")]
    BadBody {
        frame: &'static str,
        field: &'static str,
        detail: String,
    },
}

impl FrameError {
    /// The code to put in the `Error` frame sent back before closing.
    pub fn code(&self) -> ErrorCode {
        match self {
            FrameError::UnsupportedVersion { .. } => ErrorCode::UnsupportedVersion,
            _ => ErrorCode::BadFrame,
        }
    }
}

pub(crate) fn bad_body(frame: &'static str, field: &'static str, detail: String) -> FrameError {
    FrameError::BadBody {
        frame,
        field,
        detail,
    }
}

/// Decodes the frame at the front of `buf`: `Ok(None)` until all of it is there, then the
/// frame and the number of bytes it took. A `len` above `max_frame_len` is refused as soon as
/// its 4 bytes are in, and an unknown type as soon as its byte is.
pub fn decode_frame(
    buf: &[u8],
    max_frame_len: usize,
) -> Result<Option<(Frame<'_>, usize)>, FrameError> {
    let Some(len) = buf
        .first_chunk::<4>()
        .map(|bytes| u32::from_le_bytes(*bytes))
    else {
        return Ok(None);
    };
    if u64::from(len) > max_frame_len as u64 {
        return Err(FrameError::TooLarge {
            len,
            max: max_frame_len,
        });
    }
    if len == 0 {
        return Err(FrameError::Empty);
    }
    let Some(&ty) = buf.get(4) else {
        return Ok(None);
    };
    if !matches!(
        ty,
        TYPE_HELLO
            | TYPE_WELCOME
            | TYPE_ERROR
            | TYPE_AUTH
            | TYPE_CLIENT_PROOF
            | TYPE_CALL
            | TYPE_REPLY
            | TYPE_READ
            | TYPE_MEMBERS
            | TYPE_MEMBERS_ANSWER
            | TYPE_PEER
            | TYPE_CLUSTER
            | TYPE_PUBLICATION
    ) {
        return Err(FrameError::UnknownType { found: ty });
    }
    let total = (len as usize).saturating_add(4);
    let Some(body) = buf.get(ENVELOPE_LEN..total) else {
        return Ok(None);
    };
    let frame = match ty {
        TYPE_HELLO => Frame::Hello(control::decode_hello(body)?),
        TYPE_WELCOME => Frame::Welcome(control::decode_welcome(body)?),
        TYPE_ERROR => Frame::Error(control::decode_error(body)?),
        TYPE_AUTH => Frame::Auth(auth::decode_auth(body)?),
        TYPE_CLIENT_PROOF => Frame::ClientProof(auth::decode_client_proof(body)?),
        TYPE_CALL => Frame::Call(call::decode_call(body)?),
        TYPE_REPLY => Frame::Reply(call::decode_reply(body)?),
        TYPE_READ => Frame::Read(call::decode_read(body)?),
        TYPE_MEMBERS => {
            members::decode_members(body)?;
            Frame::Members
        }
        TYPE_MEMBERS_ANSWER => Frame::MembersAnswer(members::decode_members_answer(body)?),
        TYPE_CLUSTER => Frame::Cluster(body),
        TYPE_PUBLICATION => Frame::Publication(body),
        _ => {
            let (group, message) = peer::decode_peer(body)?;
            Frame::Peer { group, message }
        }
    };
    Ok(Some((frame, total)))
}

/// Appends a `Cluster` frame carrying `body`.
pub fn encode_cluster(out: &mut Vec<u8>, body: &[u8]) {
    let start = begin(out, TYPE_CLUSTER);
    out.extend_from_slice(body);
    finish(out, start);
}

/// Appends a `Publication` frame carrying `body`.
pub fn encode_publication(out: &mut Vec<u8>, body: &[u8]) {
    let start = begin(out, TYPE_PUBLICATION);
    out.extend_from_slice(body);
    finish(out, start);
}

/// Starts a frame of type `ty` with a placeholder length; returns where it starts.
pub(crate) fn begin(out: &mut Vec<u8>, ty: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, 0, ty]);
    start
}

/// Writes the length of the frame begun at `start`, now that its body is in.
pub(crate) fn finish(out: &mut [u8], start: usize) {
    let len = u32::try_from(out.len() - start - 4).expect("a frame's body fits in u32 bytes");
    out[start..start + 4].copy_from_slice(&len.to_le_bytes());
}

/// Decodes `bytes` as exactly one whole frame (unit tests of the frame bodies share this).
#[cfg(test)]
pub(crate) fn decode_whole(bytes: &[u8]) -> Result<Frame<'_>, FrameError> {
    let (frame, used) = decode_frame(bytes, 1 << 20)?.expect("a whole frame");
    assert_eq!(used, bytes.len());
    Ok(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_errors_come_as_early_as_possible() {
        let max = 100;
        assert_eq!(decode_frame(&[], max), Ok(None));
        assert_eq!(decode_frame(&[101, 0, 0], max), Ok(None));
        let err = decode_frame(&[101, 0, 0, 0], max).unwrap_err();
        assert_eq!(err, FrameError::TooLarge { len: 101, max });
        assert_eq!(
            err.to_string(),
            "frame length 101 exceeds this receiver's limit of 100 bytes"
        );
        let huge = u32::MAX.to_le_bytes();
        assert_eq!(
            decode_frame(&huge, usize::MAX),
            Ok(None),
            "no limit, any length"
        );
        assert_eq!(decode_frame(&[0, 0, 0, 0], max), Err(FrameError::Empty));
        assert_eq!(decode_frame(&[100, 0, 0, 0], max), Ok(None));
        let err = decode_frame(&[100, 0, 0, 0, 0x7f], max).unwrap_err();
        assert_eq!(err.to_string(), "unknown frame type 0x7f");
        assert_eq!(err.code(), ErrorCode::BadFrame);
    }

    #[test]
    fn consumes_exactly_one_frame() {
        let mut out = Vec::new();
        call::encode_call(&mut out, 1, 2, None, b"abc");
        let first = out.len();
        call::encode_call(&mut out, 3, 4, None, b"");
        let (frame, used) = decode_frame(&out, 1000).unwrap().unwrap();
        assert_eq!(used, first);
        assert!(matches!(frame, Frame::Call(Call { seq: 1, .. })));
        let (frame, used) = decode_frame(&out[first..], 1000).unwrap().unwrap();
        assert_eq!(used, out.len() - first);
        assert!(matches!(frame, Frame::Call(Call { seq: 3, .. })));
    }

    #[test]
    fn a_frame_exactly_at_the_limit_is_accepted() {
        let mut out = Vec::new();
        peer::encode_peer(&mut out, 0, &Message::Batch(vec![7; 94].into()));
        assert_eq!(out.len(), 4 + 100);
        assert!(decode_frame(&out, 100).unwrap().is_some());
        assert!(decode_frame(&out, 99).is_err());
    }
}
