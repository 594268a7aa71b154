//! `Call` and `Reply`: the client's hot path, fixed little-endian headers and a borrowed payload.

use tandem_replication::{AckCount, ReadConsistency, Safety};
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::frame::{self, ENVELOPE_LEN, FrameError, TYPE_CALL, TYPE_READ, TYPE_REPLY, bad_body};

/// A client's request to run procedure `proc_id` with `args`, borrowed from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call<'a> {
    /// The client's sequence number; the reply carries it back.
    pub seq: u64,
    pub proc_id: u16,
    /// `None` means the group's default rule.
    pub safety: Option<Safety>,
    pub args: &'a [u8],
}

/// A read-only call any node may serve: a backup answers it once it has applied `min_lsn`
/// (DESIGN.md, "Versioned reads"); the primary answers it as a call. The payload is borrowed
/// from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Read<'a> {
    pub seq: u64,
    pub proc_id: u16,
    /// The oldest state the reader accepts: the reply reflects every commit up to here.
    pub min_lsn: u64,
    /// What a backup promises beyond `min_lsn` (the primary's own answer is linearizable).
    pub consistency: ReadConsistency,
    pub args: &'a [u8],
}

/// How a call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ReplyStatus {
    /// The call committed; the body is the procedure's reply.
    Committed,
    /// The procedure said no and the txn was rolled back; the body is its reason.
    RolledBack,
    /// A retry of a call that committed once, at the reply's LSN, whose reply was too long
    /// for the dedup table to keep: the body says so, in words for a person. Nothing ran
    /// again.
    CommittedReplyNotKept,
}

impl ReplyStatus {
    /// Whether the call committed (now or, for a retry, before).
    pub fn committed(self) -> bool {
        matches!(
            self,
            ReplyStatus::Committed | ReplyStatus::CommittedReplyNotKept
        )
    }
}

/// The primary's answer to a `Call`, its body borrowed from the frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reply<'a> {
    pub seq: u64,
    pub lsn: u64,
    pub status: ReplyStatus,
    pub body: &'a [u8],
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct CallHeader {
    seq: U64,
    proc_id: U16,
    safety_tag: u8,
    safety_param: U64,
    args_len: U32,
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct ReadHeader {
    seq: U64,
    proc_id: U16,
    min_lsn: U64,
    consistency_tag: u8,
    staleness_ms: U32,
    args_len: U32,
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct ReplyHeader {
    seq: U64,
    lsn: U64,
    status: u8,
    body_len: U32,
}

const _: () = assert!(size_of::<CallHeader>() == 23);
const _: () = assert!(size_of::<ReplyHeader>() == 21);
const _: () = assert!(size_of::<ReadHeader>() == 27);

/// Appends a `Call` frame.
///
/// Panics on `Bounded(0)` or `Of(0)`, which the wire cannot carry (`Of(0)` would read back as
/// `All`); parsing a [`Safety`] or [`Safety::validate`] refuses both.
pub fn encode_call(out: &mut Vec<u8>, seq: u64, proc_id: u16, safety: Option<Safety>, args: &[u8]) {
    let (safety_tag, safety_param) = safety_to_wire(safety);
    let header = CallHeader {
        seq: seq.into(),
        proc_id: proc_id.into(),
        safety_tag,
        safety_param: safety_param.into(),
        args_len: u32::try_from(args.len())
            .expect("call args fit in u32 bytes")
            .into(),
    };
    let start = frame::begin(out, TYPE_CALL);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(args);
    frame::finish(out, start);
}

/// Appends a `Read` frame.
pub fn encode_read(
    out: &mut Vec<u8>,
    seq: u64,
    proc_id: u16,
    min_lsn: u64,
    consistency: ReadConsistency,
    args: &[u8],
) {
    let (consistency_tag, staleness_ms) = match consistency {
        ReadConsistency::Linearizable => (0, 0),
        ReadConsistency::Session => (1, 0),
        ReadConsistency::Bounded { staleness_ms } => {
            assert!(
                staleness_ms >= 1,
                "bounded staleness of 0 ms is linearizable"
            );
            (2, staleness_ms)
        }
    };
    let header = ReadHeader {
        seq: seq.into(),
        proc_id: proc_id.into(),
        min_lsn: min_lsn.into(),
        consistency_tag,
        staleness_ms: staleness_ms.into(),
        args_len: u32::try_from(args.len())
            .expect("read args fit in u32 bytes")
            .into(),
    };
    let start = frame::begin(out, TYPE_READ);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(args);
    frame::finish(out, start);
}

/// The longest reply body a `Reply` frame carries when frames are at most `max_frame_len`
/// bytes: a node must not commit a call whose answer its client could not read.
pub fn reply_body_len_max(max_frame_len: usize) -> usize {
    max_frame_len.saturating_sub(ENVELOPE_LEN + size_of::<ReplyHeader>())
}

/// Appends a `Reply` frame.
pub fn encode_reply(out: &mut Vec<u8>, seq: u64, lsn: u64, status: ReplyStatus, body: &[u8]) {
    let header = ReplyHeader {
        seq: seq.into(),
        lsn: lsn.into(),
        status: match status {
            ReplyStatus::Committed => 0,
            ReplyStatus::RolledBack => 1,
            ReplyStatus::CommittedReplyNotKept => 2,
        },
        body_len: u32::try_from(body.len())
            .expect("a reply body fits in u32 bytes")
            .into(),
    };
    let start = frame::begin(out, TYPE_REPLY);
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(body);
    frame::finish(out, start);
}

pub(crate) fn decode_call(body: &[u8]) -> Result<Call<'_>, FrameError> {
    let (header, args) = header_and_payload::<CallHeader>("Call", body)?;
    check_payload_len("Call", "args_len", header.args_len, args)?;
    Ok(Call {
        seq: header.seq.get(),
        proc_id: header.proc_id.get(),
        safety: safety_from_wire(header.safety_tag, header.safety_param.get())?,
        args,
    })
}

pub(crate) fn decode_read(body: &[u8]) -> Result<Read<'_>, FrameError> {
    let (header, args) = header_and_payload::<ReadHeader>("Read", body)?;
    check_payload_len("Read", "args_len", header.args_len, args)?;
    let staleness_ms = header.staleness_ms.get();
    let consistency = match (header.consistency_tag, staleness_ms) {
        (0, 0) => ReadConsistency::Linearizable,
        (1, 0) => ReadConsistency::Session,
        (2, 1..) => ReadConsistency::Bounded { staleness_ms },
        (0 | 1, _) => {
            let detail = format!("{staleness_ms}; only tag 2 (bounded) takes a staleness");
            return Err(bad_body("Read", "staleness_ms", detail));
        }
        (2, 0) => {
            let detail = "0; a bounded read takes at least 1 ms".to_owned();
            return Err(bad_body("Read", "staleness_ms", detail));
        }
        (tag, _) => {
            let detail =
                format!("unknown tag {tag}; 0 linearizable, 1 session and 2 bounded are defined");
            return Err(bad_body("Read", "consistency_tag", detail));
        }
    };
    Ok(Read {
        seq: header.seq.get(),
        proc_id: header.proc_id.get(),
        min_lsn: header.min_lsn.get(),
        consistency,
        args,
    })
}

pub(crate) fn decode_reply(body: &[u8]) -> Result<Reply<'_>, FrameError> {
    let (header, payload) = header_and_payload::<ReplyHeader>("Reply", body)?;
    check_payload_len("Reply", "body_len", header.body_len, payload)?;
    let status = match header.status {
        0 => ReplyStatus::Committed,
        1 => ReplyStatus::RolledBack,
        2 => ReplyStatus::CommittedReplyNotKept,
        other => {
            let detail = format!(
                "{other} is not 0 (committed), 1 (rolled back) or 2 (committed, reply not kept)"
            );
            return Err(bad_body("Reply", "status", detail));
        }
    };
    Ok(Reply {
        seq: header.seq.get(),
        lsn: header.lsn.get(),
        status,
        body: payload,
    })
}

fn header_and_payload<'a, H: FromBytes + KnownLayout + Immutable>(
    frame: &'static str,
    body: &'a [u8],
) -> Result<(&'a H, &'a [u8]), FrameError> {
    H::ref_from_prefix(body).map_err(|_| {
        let detail = format!(
            "needs {} bytes, the body has {}",
            size_of::<H>(),
            body.len()
        );
        bad_body(frame, "header", detail)
    })
}

fn check_payload_len(
    frame: &'static str,
    field: &'static str,
    declared: U32,
    payload: &[u8],
) -> Result<(), FrameError> {
    if u64::from(declared.get()) == payload.len() as u64 {
        return Ok(());
    }
    let detail = format!("{declared} but {} bytes follow the header", payload.len());
    Err(bad_body(frame, field, detail))
}

fn safety_to_wire(safety: Option<Safety>) -> (u8, u64) {
    let acks = |acks: AckCount| match acks {
        AckCount::All => 0,
        AckCount::Of(k) => {
            assert!(k >= 1, "an ack count of 0 cannot be sent");
            u64::from(k)
        }
    };
    match safety {
        None => (0, 0),
        Some(Safety::OneSafe) => (1, 0),
        Some(Safety::Bounded(n)) => {
            assert!(n >= 1, "bounded:0 cannot be sent");
            (2, n)
        }
        Some(Safety::TwoSafe(count)) => (3, acks(count)),
        Some(Safety::TwoSafeApplied(count)) => (4, acks(count)),
        Some(Safety::Durable(count)) => (5, acks(count)),
    }
}

fn safety_from_wire(tag: u8, param: u64) -> Result<Option<Safety>, FrameError> {
    let bad_param = |detail: String| bad_body("Call", "safety_param", detail);
    let acks = |param: u64| match param {
        0 => Ok(AckCount::All),
        k => u32::try_from(k)
            .map(AckCount::Of)
            .map_err(|_| bad_param(format!("ack count {k} does not fit in u32"))),
    };
    let safety = match tag {
        0 | 1 if param != 0 => {
            return Err(bad_param(format!(
                "{param} for safety_tag {tag}, which takes 0"
            )));
        }
        0 => None,
        1 => Some(Safety::OneSafe),
        2 if param == 0 => {
            return Err(bad_param("0 for bounded, which needs at least 1".into()));
        }
        2 => Some(Safety::Bounded(param)),
        3 => Some(Safety::TwoSafe(acks(param)?)),
        4 => Some(Safety::TwoSafeApplied(acks(param)?)),
        5 => Some(Safety::Durable(acks(param)?)),
        _ => {
            let detail = format!("unknown tag {tag}; 0 to 5 are defined");
            return Err(bad_body("Call", "safety_tag", detail));
        }
    };
    Ok(safety)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Frame;

    use crate::frame::decode_whole as decode;

    #[test]
    fn a_read_names_a_known_consistency_and_only_a_bounded_one_a_staleness() {
        let mut out = Vec::new();
        let bounded = ReadConsistency::Bounded { staleness_ms: 250 };
        encode_read(&mut out, 1, 2, 3, bounded, b"a");
        // Envelope 5, seq 8, proc_id 2, min_lsn 8: the tag is byte 23, the staleness 24..28.
        assert_eq!(out[23], 2);
        assert_eq!(out[24..28], 250u32.to_le_bytes());
        let mut unknown = out.clone();
        unknown[23] = 3;
        let err = decode(&unknown).unwrap_err().to_string();
        assert!(
            err.contains("'consistency_tag'") && err.contains("unknown tag 3"),
            "{err}"
        );
        let mut zero = out.clone();
        zero[24..28].copy_from_slice(&0u32.to_le_bytes());
        let err = decode(&zero).unwrap_err().to_string();
        assert!(
            err.contains("'staleness_ms'") && err.contains("at least 1 ms"),
            "{err}"
        );
        let mut session_with_staleness = out;
        session_with_staleness[23] = 1;
        let err = decode(&session_with_staleness).unwrap_err().to_string();
        assert!(err.contains("only tag 2"), "{err}");
    }

    #[test]
    fn call_layout_is_fixed() {
        let mut out = Vec::new();
        encode_call(&mut out, 0x0102, 7, Some(Safety::Bounded(5)), b"xy");
        #[rustfmt::skip]
        let expected = [
            26, 0, 0, 0, 0x10,
            2, 1, 0, 0, 0, 0, 0, 0,
            7, 0,
            2,
            5, 0, 0, 0, 0, 0, 0, 0,
            2, 0, 0, 0,
            b'x', b'y',
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn every_safety_round_trips() {
        for safety in [
            None,
            Some(Safety::OneSafe),
            Some(Safety::Bounded(1)),
            Some(Safety::Bounded(u64::MAX)),
            Some(Safety::TwoSafe(AckCount::All)),
            Some(Safety::TwoSafe(AckCount::Of(2))),
            Some(Safety::TwoSafeApplied(AckCount::All)),
            Some(Safety::TwoSafeApplied(AckCount::Of(u32::MAX))),
            Some(Safety::Durable(AckCount::All)),
            Some(Safety::Durable(AckCount::Of(2))),
        ] {
            let mut out = Vec::new();
            encode_call(&mut out, 9, 1, safety, b"args");
            let call = Call {
                seq: 9,
                proc_id: 1,
                safety,
                args: b"args",
            };
            assert_eq!(decode(&out), Ok(Frame::Call(call)));
        }
    }

    #[test]
    fn call_errors_name_the_field() {
        let mut out = Vec::new();
        encode_call(&mut out, 1, 1, None, b"abc");
        let check = |patch: &dyn Fn(&mut Vec<u8>), expected: &str| {
            let mut bytes = out.clone();
            patch(&mut bytes);
            assert_eq!(decode(&bytes).unwrap_err().to_string(), expected);
        };
        let param = 5 + 11;
        check(
            &|b| b[5 + 10] = 6,
            "Call frame, field 'safety_tag': unknown tag 6; 0 to 5 are defined",
        );
        check(
            &|b| b[param] = 1,
            "Call frame, field 'safety_param': 1 for safety_tag 0, which takes 0",
        );
        check(
            &|b| b[5 + 10] = 2,
            "Call frame, field 'safety_param': 0 for bounded, which needs at least 1",
        );
        check(
            &|b| {
                b[5 + 10] = 3;
                b[param + 4] = 1;
            },
            "Call frame, field 'safety_param': ack count 4294967296 does not fit in u32",
        );
        check(
            &|b| b[5 + 19] = 4,
            "Call frame, field 'args_len': 4 but 3 bytes follow the header",
        );
        check(
            &|b| {
                b.truncate(5 + 20);
                b[0] = 21;
            },
            "Call frame, field 'header': needs 23 bytes, the body has 20",
        );
    }

    #[test]
    fn reply_round_trips_and_checks_status() {
        let statuses = [
            ReplyStatus::Committed,
            ReplyStatus::RolledBack,
            ReplyStatus::CommittedReplyNotKept,
        ];
        for status in statuses {
            let mut out = Vec::new();
            encode_reply(&mut out, 4, 99, status, b"no funds");
            let reply = Reply {
                seq: 4,
                lsn: 99,
                status,
                body: b"no funds",
            };
            assert_eq!(decode(&out), Ok(Frame::Reply(reply)));
            out[5 + 16] = 3;
            assert_eq!(
                decode(&out).unwrap_err().to_string(),
                "Reply frame, field 'status': 3 is not 0 (committed), 1 (rolled back) or 2 \
                 (committed, reply not kept)"
            );
        }
    }

    #[test]
    #[should_panic = "bounded:0 cannot be sent"]
    fn bounded_zero_is_not_encodable() {
        encode_call(&mut Vec::new(), 1, 1, Some(Safety::Bounded(0)), b"");
    }

    #[test]
    #[should_panic = "an ack count of 0 cannot be sent"]
    fn zero_acks_are_not_encodable() {
        encode_call(
            &mut Vec::new(),
            1,
            1,
            Some(Safety::TwoSafe(AckCount::Of(0))),
            b"",
        );
    }
}
