//! Handshake and control frames: `Hello`, `Welcome`, `Error`, postcard-encoded.
//!
//! A postcard struct is its fields' encodings one after another, so the decoder takes the
//! fields one at a time: an error then names the field, the magic and version are checked
//! before anything a later version might lay out differently, and the `Error` message is
//! checked against its cap while it is still borrowed from the frame.

use serde::{Deserialize, Serialize};
use tandem_replication::NodeId;

use crate::PROTOCOL_VERSION;
use crate::frame::{self, FrameError, TYPE_ERROR, TYPE_HELLO, TYPE_WELCOME, bad_body};

/// The first four body bytes of every `Hello`.
pub const MAGIC: [u8; 4] = *b"TNDM";

/// The longest `Error` message in bytes: longer ones are truncated on encode, refused on decode.
pub const MESSAGE_LEN_MAX: usize = 1024;

/// Who is connecting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum PeerKind {
    /// A client that will send `Call`s.
    Client,
    /// Another node of the group, which will exchange `Peer` frames.
    Replica,
    /// Another node's cluster core, which will send `Cluster` frames.
    Cluster,
}

/// The first frame on a connection, from the side that connected.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    pub magic: [u8; 4],
    pub version: u16,
    pub peer: PeerKind,
    /// The client id for a client, the node id for a replica.
    pub id: u64,
    /// The replication group the connection is for; a client that only asks who the
    /// members are may name [`GROUP_ANY`].
    pub group: u32,
}

/// The group a client names in its `Hello` when any group of the node will do: a program
/// that asks for the members and the slot table (a proxy's discovery) before it knows which
/// groups the cluster has. The node serves the connection in the first group it serves in.
pub const GROUP_ANY: u32 = u32::MAX;

impl Hello {
    /// A `Hello` with this build's magic and version.
    pub fn new(peer: PeerKind, id: u64, group: u32) -> Hello {
        Hello {
            magic: MAGIC,
            version: PROTOCOL_VERSION,
            peer,
            id,
            group,
        }
    }
}

/// What the answering node is in its group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Role {
    Primary,
    Backup,
}

/// The server's answer to an accepted `Hello`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: u16,
    pub node_id: NodeId,
    pub role: Role,
    pub view: u64,
    /// The node's last committed LSN.
    pub lsn: u64,
}

/// Why a request or a connection was refused. The wire carries the variant's index, so new
/// codes go at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[non_exhaustive]
pub enum ErrorCode {
    /// A frame could not be decoded ([`FrameError`]).
    BadFrame,
    /// The `Hello`'s version is not spoken here.
    UnsupportedVersion,
    /// Calls go to the primary; this node is not it.
    NotPrimary,
    UnknownProcedure,
    /// The procedure refused its arguments.
    BadArgs,
    /// Too much in flight; retry later.
    Busy,
    Internal,
    /// The sender's view is older than the receiver's.
    StaleView,
    /// The client did not prove a password the node accepts (or its user's rights are not
    /// the native port's).
    Unauthorized,
}

/// A decoded `Error` frame.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorFrame {
    pub code: ErrorCode,
    /// At most [`MESSAGE_LEN_MAX`] bytes.
    pub message: String,
}

/// Appends a `Hello` frame.
pub fn encode_hello(out: &mut Vec<u8>, hello: &Hello) {
    encode_postcard(out, TYPE_HELLO, hello);
}

/// Appends a `Welcome` frame.
pub fn encode_welcome(out: &mut Vec<u8>, welcome: &Welcome) {
    encode_postcard(out, TYPE_WELCOME, welcome);
}

/// Appends an `Error` frame, its message truncated to [`MESSAGE_LEN_MAX`] bytes on a char
/// boundary.
pub fn encode_error(out: &mut Vec<u8>, code: ErrorCode, message: &str) {
    let mut end = message.len().min(MESSAGE_LEN_MAX);
    while !message.is_char_boundary(end) {
        end -= 1;
    }
    encode_postcard(out, TYPE_ERROR, &(code, &message[..end]));
}

fn encode_postcard<T: Serialize + ?Sized>(out: &mut Vec<u8>, ty: u8, value: &T) {
    let start = frame::begin(out, ty);
    *out = postcard::to_extend(value, std::mem::take(out)).expect("postcard encodes to a Vec");
    frame::finish(out, start);
}

pub(crate) fn decode_hello(body: &[u8]) -> Result<Hello, FrameError> {
    let mut fields = Fields::new("Hello", body);
    let magic: [u8; 4] = fields.take("magic")?;
    if magic != MAGIC {
        return Err(FrameError::BadMagic { found: magic });
    }
    let version = fields.take_version()?;
    let hello = Hello {
        magic,
        version,
        peer: fields.take("peer")?,
        id: fields.take("id")?,
        group: fields.take("group")?,
    };
    fields.finish()?;
    Ok(hello)
}

pub(crate) fn decode_welcome(body: &[u8]) -> Result<Welcome, FrameError> {
    let mut fields = Fields::new("Welcome", body);
    let welcome = Welcome {
        version: fields.take_version()?,
        node_id: fields.take("node_id")?,
        role: fields.take("role")?,
        view: fields.take("view")?,
        lsn: fields.take("lsn")?,
    };
    fields.finish()?;
    Ok(welcome)
}

pub(crate) fn decode_error(body: &[u8]) -> Result<ErrorFrame, FrameError> {
    let mut fields = Fields::new("Error", body);
    let code = fields.take("code")?;
    let message: &str = fields.take("message")?;
    if message.len() > MESSAGE_LEN_MAX {
        let detail = format!(
            "{} bytes, more than the {MESSAGE_LEN_MAX} allowed",
            message.len()
        );
        return Err(bad_body("Error", "message", detail));
    }
    fields.finish()?;
    Ok(ErrorFrame {
        code,
        message: message.to_owned(),
    })
}

/// The postcard fields of one body, taken in order.
struct Fields<'a> {
    frame: &'static str,
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    fn new(frame: &'static str, body: &'a [u8]) -> Fields<'a> {
        Fields { frame, rest: body }
    }

    fn take<T: Deserialize<'a>>(&mut self, field: &'static str) -> Result<T, FrameError> {
        let (value, rest) = postcard::take_from_bytes(self.rest)
            .map_err(|err| bad_body(self.frame, field, err.to_string()))?;
        self.rest = rest;
        Ok(value)
    }

    fn take_version(&mut self) -> Result<u16, FrameError> {
        let version = self.take("version")?;
        if version != PROTOCOL_VERSION {
            return Err(FrameError::UnsupportedVersion { found: version });
        }
        Ok(version)
    }

    fn finish(self) -> Result<(), FrameError> {
        if self.rest.is_empty() {
            return Ok(());
        }
        let detail = format!("{} bytes after the last field", self.rest.len());
        Err(bad_body(self.frame, "body", detail))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorCode, Frame};

    use crate::frame::decode_whole as decode;

    /// A frame of type `ty` around `body`, however malformed.
    fn with_body(ty: u8, body: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let start = frame::begin(&mut out, ty);
        out.extend_from_slice(body);
        frame::finish(&mut out, start);
        out
    }

    #[test]
    fn hello_and_welcome_round_trip() {
        for hello in [
            Hello::new(PeerKind::Client, 0, 0),
            Hello::new(PeerKind::Replica, u64::MAX, u32::MAX),
        ] {
            let mut out = Vec::new();
            encode_hello(&mut out, &hello);
            assert_eq!(&out[5..9], b"TNDM");
            assert_eq!(decode(&out), Ok(Frame::Hello(hello.clone())));
            // The field-by-field decoder reads what postcard's derive would.
            assert_eq!(postcard::from_bytes::<Hello>(&out[5..]), Ok(hello));
        }
        for role in [Role::Primary, Role::Backup] {
            let welcome = Welcome {
                version: PROTOCOL_VERSION,
                node_id: 3,
                role,
                view: 7,
                lsn: 1 << 40,
            };
            let mut out = Vec::new();
            encode_welcome(&mut out, &welcome);
            assert_eq!(decode(&out), Ok(Frame::Welcome(welcome.clone())));
            assert_eq!(postcard::from_bytes::<Welcome>(&out[5..]), Ok(welcome));
        }
    }

    #[test]
    fn hello_checks_magic_then_version() {
        let mut hello = Hello::new(PeerKind::Client, 1, 2);
        hello.magic = *b"HTTP";
        let mut out = Vec::new();
        encode_hello(&mut out, &hello);
        let err = decode(&out).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Hello magic \"HTTP\" is not \"TNDM\": the peer does not speak tandem"
        );

        // A later version may lay out the rest differently: only magic and version are read.
        let mut body = MAGIC.to_vec();
        let later = PROTOCOL_VERSION as u8 + 1;
        body.extend_from_slice(&[later, 0xff, 0xff]);
        let err = decode(&with_body(TYPE_HELLO, &body)).unwrap_err();
        assert_eq!(
            err,
            FrameError::UnsupportedVersion {
                found: u16::from(later)
            }
        );
        assert_eq!(err.code(), ErrorCode::UnsupportedVersion);

        let mut welcome = Vec::new();
        let bad = Welcome {
            version: PROTOCOL_VERSION + 1,
            node_id: 1,
            role: Role::Backup,
            view: 1,
            lsn: 1,
        };
        encode_welcome(&mut welcome, &bad);
        assert_eq!(
            decode(&welcome),
            Err(FrameError::UnsupportedVersion {
                found: PROTOCOL_VERSION + 1
            })
        );
    }

    #[test]
    fn control_errors_name_the_field() {
        let mut body = MAGIC.to_vec();
        body.extend_from_slice(&[PROTOCOL_VERSION as u8, 7]); // this version, peer kind 7
        let err = decode(&with_body(TYPE_HELLO, &body)).unwrap_err();
        assert!(
            err.to_string().starts_with("Hello frame, field 'peer': "),
            "{err}"
        );

        body.truncate(5);
        body.extend_from_slice(&[0, 1]); // Client, id 1, then no group
        let err = decode(&with_body(TYPE_HELLO, &body)).unwrap_err();
        assert!(
            err.to_string().starts_with("Hello frame, field 'group': "),
            "{err}"
        );

        let mut out = Vec::new();
        encode_hello(&mut out, &Hello::new(PeerKind::Client, 1, 2));
        out.push(0);
        let err = decode(&with_body(TYPE_HELLO, &out[5..])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Hello frame, field 'body': 1 bytes after the last field"
        );
    }

    #[test]
    fn error_messages_are_capped() {
        let mut out = Vec::new();
        encode_error(&mut out, ErrorCode::NotPrimary, "node 2 is primary");
        let expected = ErrorFrame {
            code: ErrorCode::NotPrimary,
            message: "node 2 is primary".into(),
        };
        assert_eq!(decode(&out), Ok(Frame::Error(expected)));

        // 'é' is two bytes: 1023 of them end exactly at the cap, 1024 cross it mid-char.
        let long = "é".repeat(600);
        out.clear();
        encode_error(&mut out, ErrorCode::Internal, &long);
        let Ok(Frame::Error(error)) = decode(&out) else {
            panic!("decodes")
        };
        assert_eq!(error.message.len(), MESSAGE_LEN_MAX);
        let odd = format!("x{long}");
        out.clear();
        encode_error(&mut out, ErrorCode::Internal, &odd);
        let Ok(Frame::Error(error)) = decode(&out) else {
            panic!("decodes")
        };
        assert_eq!(error.message.len(), MESSAGE_LEN_MAX - 1);
        assert!(odd.starts_with(&error.message));

        let oversize = postcard::to_allocvec(&(ErrorCode::Busy, "y".repeat(1025))).unwrap();
        let err = decode(&with_body(TYPE_ERROR, &oversize)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "Error frame, field 'message': 1025 bytes, more than the 1024 allowed"
        );
        let bad_utf8 = [0, 2, 0xc3, 0x28];
        let err = decode(&with_body(TYPE_ERROR, &bad_utf8)).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("Error frame, field 'message': "),
            "{err}"
        );
    }

    #[test]
    fn error_codes_keep_their_wire_numbers() {
        let codes = [
            ErrorCode::BadFrame,
            ErrorCode::UnsupportedVersion,
            ErrorCode::NotPrimary,
            ErrorCode::UnknownProcedure,
            ErrorCode::BadArgs,
            ErrorCode::Busy,
            ErrorCode::Internal,
            ErrorCode::StaleView,
        ];
        for (number, code) in codes.into_iter().enumerate() {
            assert_eq!(postcard::to_allocvec(&code).unwrap(), [number as u8]);
        }
    }
}
