//! `Members` and `MembersAnswer`: a client asks any node which nodes make up its group.
//!
//! A program given one node's address (a proxy, an operator's tool) learns every member's
//! address from it, whatever its role. The answer is what the node was configured with: its
//! own address and its peers', sorted by node id, and the view it knows. The list is short
//! and bounded ([`MEMBERS_MAX`]), each entry a fixed 27 bytes, so the decoder checks the
//! count against its cap and against the body's length before it builds the list.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use tandem_replication::NodeId;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::frame::{self, FrameError, TYPE_MEMBERS, TYPE_MEMBERS_ANSWER, bad_body};

/// The most members an answer names: a group is a handful of nodes, and a cap lets the
/// decoder refuse a count before it builds anything.
pub const MEMBERS_MAX: usize = 64;

/// One member of the group: its node id and the address clients and peers dial (its
/// `listen`). An IPv6 address keeps its scope id; its flow info is not carried (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    pub node_id: NodeId,
    pub address: SocketAddr,
}

/// A node's answer to `Members`: every member it knows, sorted by node id (strictly
/// ascending, itself included), and the view it knows (0 if none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembersAnswer {
    pub view: u64,
    /// 1 to [`MEMBERS_MAX`] members.
    pub members: Vec<Member>,
}

const FAMILY_IPV4: u8 = 4;
const FAMILY_IPV6: u8 = 6;

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct AnswerHeader {
    view: U64,
    count: U16,
}

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct MemberEntry {
    node_id: U32,
    port: U16,
    family: u8,
    /// IPv4: the 4 address bytes, then 12 zero bytes.
    ip: [u8; 16],
    /// IPv6's scope id; 0 for IPv4.
    scope_id: U32,
}

const _: () = assert!(size_of::<AnswerHeader>() == 10);
const _: () = assert!(size_of::<MemberEntry>() == 27);
// The count field carries the cap.
const _: () = assert!(MEMBERS_MAX <= u16::MAX as usize);

/// Appends a `Members` frame (no body).
pub fn encode_members(out: &mut Vec<u8>) {
    let start = frame::begin(out, TYPE_MEMBERS);
    frame::finish(out, start);
}

/// Appends a `MembersAnswer` frame.
///
/// Panics unless `members` holds 1 to [`MEMBERS_MAX`] entries, strictly ascending by node id,
/// none with port 0: the decoder refuses anything else, so a node must not send it.
pub fn encode_members_answer(out: &mut Vec<u8>, view: u64, members: &[Member]) {
    assert!(!members.is_empty(), "a node names itself at least");
    assert!(
        members.len() <= MEMBERS_MAX,
        "{} members, more than the {MEMBERS_MAX} an answer carries",
        members.len()
    );
    assert!(
        members.is_sorted_by(|a, b| a.node_id < b.node_id),
        "members are sent sorted by node id, each once"
    );
    let header = AnswerHeader {
        view: view.into(),
        count: u16::try_from(members.len())
            .expect("MEMBERS_MAX fits u16")
            .into(),
    };
    let start = frame::begin(out, TYPE_MEMBERS_ANSWER);
    out.extend_from_slice(header.as_bytes());
    for member in members {
        assert_ne!(member.address.port(), 0, "port 0 cannot be dialled");
        let (family, ip, scope_id) = match member.address {
            SocketAddr::V4(v4) => {
                let mut ip = [0; 16];
                ip[..4].copy_from_slice(&v4.ip().octets());
                (FAMILY_IPV4, ip, 0)
            }
            SocketAddr::V6(v6) => (FAMILY_IPV6, v6.ip().octets(), v6.scope_id()),
        };
        let entry = MemberEntry {
            node_id: member.node_id.into(),
            port: member.address.port().into(),
            family,
            ip,
            scope_id: scope_id.into(),
        };
        out.extend_from_slice(entry.as_bytes());
    }
    frame::finish(out, start);
}

pub(crate) fn decode_members(body: &[u8]) -> Result<(), FrameError> {
    if body.is_empty() {
        return Ok(());
    }
    let detail = format!("{} bytes; Members has no body", body.len());
    Err(bad_body("Members", "body", detail))
}

pub(crate) fn decode_members_answer(body: &[u8]) -> Result<MembersAnswer, FrameError> {
    let frame = "MembersAnswer";
    let Ok((header, entries)) = AnswerHeader::ref_from_prefix(body) else {
        let detail = format!(
            "needs {} bytes, the body has {}",
            size_of::<AnswerHeader>(),
            body.len()
        );
        return Err(bad_body(frame, "header", detail));
    };
    let count = usize::from(header.count.get());
    if count == 0 {
        let detail = "0 members; a node names itself at least".to_owned();
        return Err(bad_body(frame, "count", detail));
    }
    if count > MEMBERS_MAX {
        let detail = format!("{count} members, more than the {MEMBERS_MAX} allowed");
        return Err(bad_body(frame, "count", detail));
    }
    // Checked before anything is built: the list is never larger than the body describes.
    let entries = match <[MemberEntry]>::ref_from_bytes(entries) {
        Ok(entries) if entries.len() == count => entries,
        _ => {
            let detail = format!(
                "{count} members take {} bytes, {} follow the header",
                count * size_of::<MemberEntry>(),
                entries.len()
            );
            return Err(bad_body(frame, "members", detail));
        }
    };
    let mut members = Vec::with_capacity(count);
    for entry in entries {
        let member = decode_member(entry)?;
        if members
            .last()
            .is_some_and(|last: &Member| last.node_id >= member.node_id)
        {
            let detail = "node ids must be strictly ascending".to_owned();
            return Err(bad_body(frame, "node_id", detail));
        }
        members.push(member);
    }
    Ok(MembersAnswer {
        view: header.view.get(),
        members,
    })
}

fn decode_member(entry: &MemberEntry) -> Result<Member, FrameError> {
    let frame = "MembersAnswer";
    let port = entry.port.get();
    if port == 0 {
        let detail = "0 cannot be dialled".to_owned();
        return Err(bad_body(frame, "port", detail));
    }
    let scope_id = entry.scope_id.get();
    let ip = match entry.family {
        FAMILY_IPV4 => {
            let (octets, rest) = entry.ip.split_at(4);
            if rest.iter().any(|&byte| byte != 0) {
                let detail = "an IPv4 address takes 4 bytes, the other 12 must be 0".to_owned();
                return Err(bad_body(frame, "ip", detail));
            }
            if scope_id != 0 {
                let detail = format!("{scope_id} for an IPv4 address, which takes 0");
                return Err(bad_body(frame, "scope_id", detail));
            }
            let octets: [u8; 4] = octets.try_into().expect("split at 4");
            IpAddr::V4(Ipv4Addr::from(octets))
        }
        FAMILY_IPV6 => IpAddr::V6(Ipv6Addr::from(entry.ip)),
        other => {
            let detail = format!("unknown family {other}; 4 (IPv4) and 6 (IPv6) are defined");
            return Err(bad_body(frame, "family", detail));
        }
    };
    let address = match ip {
        IpAddr::V4(ip) => SocketAddr::V4(SocketAddrV4::new(ip, port)),
        IpAddr::V6(ip) => SocketAddr::V6(SocketAddrV6::new(ip, port, 0, scope_id)),
    };
    Ok(Member {
        node_id: entry.node_id.get(),
        address,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Frame;

    use crate::frame::decode_whole as decode;

    fn member(node_id: NodeId, address: &str) -> Member {
        Member {
            node_id,
            address: address.parse().expect("a socket address"),
        }
    }

    /// Three members, one of them IPv6 with a scope id.
    fn three() -> Vec<Member> {
        vec![
            member(1, "127.0.0.1:7001"),
            member(2, "[fe80::1%3]:7002"),
            member(9, "10.1.2.3:65535"),
        ]
    }

    fn answer_bytes(view: u64, members: &[Member]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_members_answer(&mut out, view, members);
        out
    }

    fn error(bytes: &[u8]) -> String {
        decode(bytes).unwrap_err().to_string()
    }

    #[test]
    fn both_frames_round_trip() {
        let mut out = Vec::new();
        encode_members(&mut out);
        assert_eq!(out, [1, 0, 0, 0, TYPE_MEMBERS]);
        assert_eq!(decode(&out), Ok(Frame::Members));

        let members = three();
        let out = answer_bytes(7, &members);
        assert_eq!(out.len(), 5 + 10 + 3 * 27);
        let answer = MembersAnswer { view: 7, members };
        assert_eq!(decode(&out), Ok(Frame::MembersAnswer(answer)));

        let most: Vec<Member> = (1..=MEMBERS_MAX as NodeId)
            .map(|id| member(id, "[::1]:1"))
            .collect();
        let out = answer_bytes(0, &most);
        let Ok(Frame::MembersAnswer(answer)) = decode(&out) else {
            panic!("{MEMBERS_MAX} members decode");
        };
        assert_eq!(answer.members, most);
    }

    #[test]
    fn an_answer_has_a_fixed_layout() {
        let out = answer_bytes(0x0102, &[member(5, "1.2.3.4:80")]);
        #[rustfmt::skip]
        let expected = [
            38, 0, 0, 0, TYPE_MEMBERS_ANSWER,
            2, 1, 0, 0, 0, 0, 0, 0,
            1, 0,
            5, 0, 0, 0,
            80, 0,
            4,
            1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn a_bad_count_or_length_is_refused_before_the_list_is_built() {
        let mut out = answer_bytes(1, &three());
        let count = 5 + 8;
        out[count..count + 2].copy_from_slice(&0u16.to_le_bytes());
        assert_eq!(
            error(&out),
            "MembersAnswer frame, field 'count': 0 members; a node names itself at least"
        );
        // A count far beyond the bytes that follow is refused by the cap, not allocated.
        out[count..count + 2].copy_from_slice(&u16::MAX.to_le_bytes());
        assert_eq!(
            error(&out),
            "MembersAnswer frame, field 'count': 65535 members, more than the 64 allowed"
        );
        out[count..count + 2].copy_from_slice(&4u16.to_le_bytes());
        assert_eq!(
            error(&out),
            "MembersAnswer frame, field 'members': 4 members take 108 bytes, 81 follow the \
             header"
        );
        // Truncated: the envelope says the frame ends one byte early.
        let mut short = answer_bytes(1, &three());
        short.pop();
        short[0] -= 1;
        assert_eq!(
            error(&short),
            "MembersAnswer frame, field 'members': 3 members take 81 bytes, 80 follow the \
             header"
        );
        let header_only = [10, 0, 0, 0, TYPE_MEMBERS_ANSWER, 0, 0, 0, 0, 0, 0, 0, 0, 1];
        assert_eq!(
            error(&header_only),
            "MembersAnswer frame, field 'header': needs 10 bytes, the body has 9"
        );
        let members_with_a_body = [2, 0, 0, 0, TYPE_MEMBERS, 0];
        assert_eq!(
            error(&members_with_a_body),
            "Members frame, field 'body': 1 bytes; Members has no body"
        );
    }

    #[test]
    fn bad_entries_name_their_field() {
        let out = answer_bytes(1, &three());
        // The second entry, IPv6, starts after the envelope, the header and one entry.
        let second = 5 + 10 + 27;
        let check = |at: usize, value: u8, expected: &str| {
            let mut bytes = out.clone();
            bytes[at] = value;
            assert_eq!(error(&bytes), expected);
        };
        check(
            second + 6,
            5,
            "MembersAnswer frame, field 'family': unknown family 5; 4 (IPv4) and 6 (IPv6) are \
             defined",
        );
        // The first entry is IPv4: byte 4 of its address must be 0.
        check(
            5 + 10 + 7 + 4,
            1,
            "MembersAnswer frame, field 'ip': an IPv4 address takes 4 bytes, the other 12 must \
             be 0",
        );
        check(
            5 + 10 + 23,
            1,
            "MembersAnswer frame, field 'scope_id': 1 for an IPv4 address, which takes 0",
        );
        let mut bytes = out.clone();
        bytes[second + 4..second + 6].copy_from_slice(&[0, 0]);
        assert_eq!(
            error(&bytes),
            "MembersAnswer frame, field 'port': 0 cannot be dialled"
        );
        // Node 2 becomes node 1: a duplicate.
        check(
            second,
            1,
            "MembersAnswer frame, field 'node_id': node ids must be strictly ascending",
        );
    }

    #[test]
    #[should_panic = "sorted by node id"]
    fn unsorted_members_are_not_encodable() {
        let mut members = three();
        members.swap(0, 1);
        answer_bytes(1, &members);
    }

    #[test]
    #[should_panic = "more than the 64"]
    fn too_many_members_are_not_encodable() {
        let members: Vec<Member> = (1..=65).map(|id| member(id, "1.1.1.1:1")).collect();
        answer_bytes(1, &members);
    }
}
