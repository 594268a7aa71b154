//! `Members` and `MembersAnswer`: a client asks any node which nodes make up its group, and
//! how the cluster's hash slots are split over its groups.
//!
//! A program given one node's address (a proxy, an operator's tool) learns every member's
//! address from it, whatever its role. The answer is what the node was configured with: its
//! own address and its peers', sorted by node id, the view it knows, and the cluster's slot
//! table (which group serves each of Redis Cluster's [`SLOT_COUNT`] hash slots), so that a
//! proxy can route each command to the group that holds its key. Both lists are bounded
//! ([`MEMBERS_MAX`], [`SLOT_RANGES_MAX`]) and their entries fixed in size (27 and 8 bytes),
//! so the decoder checks each count against its cap and against the body's length, and the
//! slot ranges against each other, before it builds either list.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6};

use tandem_replication::NodeId;
use zerocopy::little_endian::{U16, U32, U64};
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout, Unaligned};

use crate::frame::{self, FrameError, TYPE_MEMBERS, TYPE_MEMBERS_ANSWER, bad_body};

/// The most members an answer names: a group is a handful of nodes, and a cap lets the
/// decoder refuse a count before it builds anything.
pub const MEMBERS_MAX: usize = 64;

/// How many hash slots the keyspace is split into: Redis Cluster's 16,384. It is the same
/// number as `tandem_config::SLOT_COUNT`, repeated here so that the codec does not depend on
/// the configuration crate for one constant.
pub const SLOT_COUNT: u16 = 16_384;

/// The most slot ranges an answer carries. Every range holds one slot at least and the
/// ranges hold each slot once, so no table the decoder accepts has more ranges than there
/// are slots; the cap lets it refuse a larger count before it reads or builds anything.
pub const SLOT_RANGES_MAX: usize = SLOT_COUNT as usize;

/// One member of the group: its node id and the address clients and peers dial (its
/// `listen`). An IPv6 address keeps its scope id; its flow info is not carried (0).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Member {
    pub node_id: NodeId,
    pub address: SocketAddr,
}

/// Slots `first..=last` (both included), served by the replication group `group`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct SlotRange {
    pub first: u16,
    pub last: u16,
    pub group: u32,
}

/// A node's answer to `Members`: every member it knows, sorted by node id (strictly
/// ascending, itself included), the view it knows (0 if none) and the cluster's slot table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MembersAnswer {
    pub view: u64,
    /// 1 to [`MEMBERS_MAX`] members.
    pub members: Vec<Member>,
    /// The slot table: ranges in slot order that cover slots 0 to `SLOT_COUNT - 1`, each
    /// slot once (so at most [`SLOT_RANGES_MAX`] ranges). Empty when the cluster has one
    /// group, which serves every slot.
    pub slots: Vec<SlotRange>,
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

#[derive(Clone, Copy, Debug, FromBytes, IntoBytes, KnownLayout, Immutable, Unaligned)]
#[repr(C)]
struct SlotEntry {
    first: U16,
    last: U16,
    group: U32,
}

const _: () = assert!(size_of::<AnswerHeader>() == 10);
const _: () = assert!(size_of::<MemberEntry>() == 27);
const _: () = assert!(size_of::<SlotEntry>() == 8);
// The count fields carry the caps.
const _: () = assert!(MEMBERS_MAX <= u16::MAX as usize);
const _: () = assert!(SLOT_RANGES_MAX <= u16::MAX as usize);

/// Appends a `Members` frame (no body).
pub fn encode_members(out: &mut Vec<u8>) {
    let start = frame::begin(out, TYPE_MEMBERS);
    frame::finish(out, start);
}

/// Appends a `MembersAnswer` frame.
///
/// Panics unless `members` holds 1 to [`MEMBERS_MAX`] entries, strictly ascending by node id,
/// none with port 0, and `slots` is empty or covers slots 0 to `SLOT_COUNT - 1` in order,
/// each slot once: the decoder refuses anything else, so a node must not send it.
pub fn encode_members_answer(
    out: &mut Vec<u8>,
    view: u64,
    members: &[Member],
    slots: &[SlotRange],
) {
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
    assert!(
        slots.len() <= SLOT_RANGES_MAX,
        "{} slot ranges, more than the {SLOT_RANGES_MAX} an answer carries",
        slots.len()
    );
    if let Err(detail) = check_cover(slots.iter().map(|range| (range.first, range.last))) {
        panic!("a slot table the decoder refuses: {detail}");
    }
    let header = AnswerHeader {
        view: view.into(),
        count: u16::try_from(members.len())
            .expect("MEMBERS_MAX fits u16")
            .into(),
    };
    let start = frame::begin(out, TYPE_MEMBERS_ANSWER);
    out.extend_from_slice(header.as_bytes());
    for member in members {
        out.extend_from_slice(member_entry(member).as_bytes());
    }
    let slot_count = u16::try_from(slots.len()).expect("SLOT_RANGES_MAX fits u16");
    out.extend_from_slice(U16::new(slot_count).as_bytes());
    for range in slots {
        let entry = SlotEntry {
            first: range.first.into(),
            last: range.last.into(),
            group: range.group.into(),
        };
        out.extend_from_slice(entry.as_bytes());
    }
    frame::finish(out, start);
}

/// The wire entry of `member`. Panics on port 0, which the decoder refuses.
fn member_entry(member: &Member) -> MemberEntry {
    assert_ne!(member.address.port(), 0, "port 0 cannot be dialled");
    let (family, ip, scope_id) = match member.address {
        SocketAddr::V4(v4) => {
            let mut ip = [0; 16];
            ip[..4].copy_from_slice(&v4.ip().octets());
            (FAMILY_IPV4, ip, 0)
        }
        SocketAddr::V6(v6) => (FAMILY_IPV6, v6.ip().octets(), v6.scope_id()),
    };
    MemberEntry {
        node_id: member.node_id.into(),
        port: member.address.port().into(),
        family,
        ip,
        scope_id: scope_id.into(),
    }
}

/// Whether the ranges, each `(first, last)`, cover slots 0 to `SLOT_COUNT - 1` in slot
/// order, each slot once; if not, what is wrong and what is allowed, in words. No range at
/// all is a whole table too: the cluster has one group, which serves every slot.
fn check_cover(ranges: impl Iterator<Item = (u16, u16)>) -> Result<(), String> {
    let last_slot = SLOT_COUNT - 1;
    // The slot the next range must start at: one past where the previous range ended.
    let mut next: u16 = 0;
    for (index, (first, last)) in ranges.enumerate() {
        if first > last {
            return Err(format!(
                "range {index} is {first}..={last}, its first slot after its last; a range \
                 holds one slot at least"
            ));
        }
        if last > last_slot {
            return Err(format!(
                "range {index} is {first}..={last}; slots run from 0 to {last_slot}"
            ));
        }
        if index == 0 && first != 0 {
            return Err(format!(
                "the first range starts at slot {first}; it must start at 0"
            ));
        }
        if first > next {
            return Err(format!(
                "slots {next}..={} are in no range; each range starts right after the one \
                 before it ends",
                first - 1
            ));
        }
        if first < next {
            return Err(format!(
                "slot {first} is in two ranges; range {index} must start right after the one \
                 before it ends, at {next}"
            ));
        }
        // At most SLOT_COUNT, which fits u16: `last` is at most the last slot.
        next = last + 1;
    }
    if next != 0 && next < SLOT_COUNT {
        return Err(format!(
            "the last range ends at slot {}; the ranges must cover every slot, up to \
             {last_slot}",
            next - 1
        ));
    }
    Ok(())
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
    let Ok((header, after_header)) = AnswerHeader::ref_from_prefix(body) else {
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
    // Both lists are checked before either is built: neither is ever larger than the body
    // describes.
    let Ok((entries, after_members)) =
        <[MemberEntry]>::ref_from_prefix_with_elems(after_header, count)
    else {
        let detail = format!(
            "{count} members take {} bytes, {} follow the header",
            count * size_of::<MemberEntry>(),
            after_header.len()
        );
        return Err(bad_body(frame, "members", detail));
    };
    let slot_entries = slot_entries(after_members)?;
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
    let slots = (slot_entries.iter())
        .map(|entry| SlotRange {
            first: entry.first.get(),
            last: entry.last.get(),
            group: entry.group.get(),
        })
        .collect();
    Ok(MembersAnswer {
        view: header.view.get(),
        members,
        slots,
    })
}

/// The slot table's entries in `body`, the bytes after the members: a count, then exactly
/// that many entries (nothing left over), which cover every slot once or are none.
fn slot_entries(body: &[u8]) -> Result<&[SlotEntry], FrameError> {
    let frame = "MembersAnswer";
    let Ok((count, entries)) = U16::read_from_prefix(body) else {
        let detail = format!(
            "their count takes 2 bytes, {} follow the members",
            body.len()
        );
        return Err(bad_body(frame, "slots", detail));
    };
    let count = usize::from(count.get());
    if count > SLOT_RANGES_MAX {
        let detail = format!(
            "{count} ranges, more than the {SLOT_RANGES_MAX} allowed (one slot each at least)"
        );
        return Err(bad_body(frame, "slots", detail));
    }
    let entries = match <[SlotEntry]>::ref_from_bytes(entries) {
        Ok(entries) if entries.len() == count => entries,
        _ => {
            let detail = format!(
                "{count} ranges take {} bytes, {} follow their count",
                count * size_of::<SlotEntry>(),
                entries.len()
            );
            return Err(bad_body(frame, "slots", detail));
        }
    };
    let ranges = entries
        .iter()
        .map(|entry| (entry.first.get(), entry.last.get()));
    check_cover(ranges).map_err(|detail| bad_body(frame, "slots", detail))?;
    Ok(entries)
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

    fn answer_bytes(view: u64, members: &[Member], slots: &[SlotRange]) -> Vec<u8> {
        let mut out = Vec::new();
        encode_members_answer(&mut out, view, members, slots);
        out
    }

    fn range(first: u16, last: u16, group: u32) -> SlotRange {
        SlotRange { first, last, group }
    }

    /// A three-group cluster's table, split as `redis-cli --cluster create` splits it.
    fn three_ranges() -> Vec<SlotRange> {
        vec![
            range(0, 5460, 1),
            range(5461, 10922, 2),
            range(10923, 16383, 3),
        ]
    }

    /// An answer of one member whose slot table is `ranges`, `(first, last, group)` each,
    /// written byte by byte: the encoder refuses to write a table the decoder refuses.
    fn answer_with_ranges(ranges: &[(u16, u16, u32)]) -> Vec<u8> {
        let mut out = answer_bytes(1, &[member(1, "1.2.3.4:80")], &[]);
        out.truncate(out.len() - 2);
        let count = u16::try_from(ranges.len()).unwrap();
        out.extend_from_slice(&count.to_le_bytes());
        for &(first, last, group) in ranges {
            out.extend_from_slice(&first.to_le_bytes());
            out.extend_from_slice(&last.to_le_bytes());
            out.extend_from_slice(&group.to_le_bytes());
        }
        let len = u32::try_from(out.len() - 4).unwrap();
        out[..4].copy_from_slice(&len.to_le_bytes());
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
        let out = answer_bytes(7, &members, &[]);
        assert_eq!(out.len(), 5 + 10 + 3 * 27 + 2);
        let answer = MembersAnswer {
            view: 7,
            members,
            slots: Vec::new(),
        };
        assert_eq!(decode(&out), Ok(Frame::MembersAnswer(answer)));

        let most: Vec<Member> = (1..=MEMBERS_MAX as NodeId)
            .map(|id| member(id, "[::1]:1"))
            .collect();
        let out = answer_bytes(0, &most, &[]);
        let Ok(Frame::MembersAnswer(answer)) = decode(&out) else {
            panic!("{MEMBERS_MAX} members decode");
        };
        assert_eq!(answer.members, most);
    }

    #[test]
    fn an_answer_has_a_fixed_layout() {
        let out = answer_bytes(0x0102, &[member(5, "1.2.3.4:80")], &[range(0, 16383, 7)]);
        #[rustfmt::skip]
        let expected = [
            48, 0, 0, 0, TYPE_MEMBERS_ANSWER,
            2, 1, 0, 0, 0, 0, 0, 0,
            1, 0,
            5, 0, 0, 0,
            80, 0,
            4,
            1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            0, 0, 0, 0,
            1, 0,
            0, 0, 0xff, 0x3f, 7, 0, 0, 0,
        ];
        assert_eq!(out, expected);
    }

    #[test]
    fn a_bad_count_or_length_is_refused_before_the_list_is_built() {
        let mut out = answer_bytes(1, &three(), &[]);
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
            "MembersAnswer frame, field 'members': 4 members take 108 bytes, 83 follow the \
             header"
        );
        // Truncated: the envelope says the frame ends 3 bytes early, inside the last member.
        let mut short = answer_bytes(1, &three(), &[]);
        short.truncate(short.len() - 3);
        short[0] -= 3;
        assert_eq!(
            error(&short),
            "MembersAnswer frame, field 'members': 3 members take 81 bytes, 80 follow the \
             header"
        );
        // One byte early: the members are whole, the slot table's count is not.
        let mut short = answer_bytes(1, &three(), &[]);
        short.pop();
        short[0] -= 1;
        assert_eq!(
            error(&short),
            "MembersAnswer frame, field 'slots': their count takes 2 bytes, 1 follow the members"
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
        let out = answer_bytes(1, &three(), &three_ranges());
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
        answer_bytes(1, &members, &[]);
    }

    #[test]
    #[should_panic = "more than the 64"]
    fn too_many_members_are_not_encodable() {
        let members: Vec<Member> = (1..=65).map(|id| member(id, "1.1.1.1:1")).collect();
        answer_bytes(1, &members, &[]);
    }

    #[test]
    fn a_slot_table_round_trips_whole_or_split() {
        let members = three();
        for slots in [vec![range(0, 16383, 4)], three_ranges()] {
            let out = answer_bytes(2, &members, &slots);
            assert_eq!(out.len(), 5 + 10 + 3 * 27 + 2 + slots.len() * 8);
            let answer = MembersAnswer {
                view: 2,
                members: members.clone(),
                slots,
            };
            assert_eq!(decode(&out), Ok(Frame::MembersAnswer(answer)));
        }
        // The most ranges there can be: one slot each.
        let most: Vec<SlotRange> = (0..SLOT_COUNT).map(|slot| range(slot, slot, 1)).collect();
        let out = answer_bytes(0, &members, &most);
        let Ok(Frame::MembersAnswer(answer)) = decode(&out) else {
            panic!("{SLOT_RANGES_MAX} slot ranges decode");
        };
        assert_eq!(answer.slots, most);
    }

    #[test]
    fn a_slot_count_above_the_cap_or_off_the_body_length_is_refused() {
        let whole = answer_with_ranges(&[(0, 16383, 1)]);
        let count_at = 5 + 10 + 27;
        let mut above_cap = whole.clone();
        let count = u16::try_from(SLOT_RANGES_MAX + 1).unwrap();
        above_cap[count_at..count_at + 2].copy_from_slice(&count.to_le_bytes());
        assert_eq!(
            error(&above_cap),
            "MembersAnswer frame, field 'slots': 16385 ranges, more than the 16384 allowed (one \
             slot each at least)"
        );
        let mut short = whole.clone();
        short.pop();
        short[0] -= 1;
        assert_eq!(
            error(&short),
            "MembersAnswer frame, field 'slots': 1 ranges take 8 bytes, 7 follow their count"
        );
        let mut long = whole.clone();
        long.push(0);
        long[0] += 1;
        assert_eq!(
            error(&long),
            "MembersAnswer frame, field 'slots': 1 ranges take 8 bytes, 9 follow their count"
        );
        // A whole range left over is refused too: the count says how many there are.
        let mut one_more = answer_with_ranges(&[(0, 16383, 1), (0, 16383, 2)]);
        one_more[count_at..count_at + 2].copy_from_slice(&1u16.to_le_bytes());
        assert_eq!(
            error(&one_more),
            "MembersAnswer frame, field 'slots': 1 ranges take 8 bytes, 16 follow their count"
        );
    }

    #[test]
    fn ranges_that_leave_a_slot_out_or_hold_one_twice_are_refused() {
        let refusal = |ranges: &[(u16, u16, u32)]| error(&answer_with_ranges(ranges));
        let field = "MembersAnswer frame, field 'slots': ";
        assert_eq!(
            refusal(&[(0, 99, 1), (101, 16383, 2)]),
            format!(
                "{field}slots 100..=100 are in no range; each range starts right after the one \
                 before it ends"
            )
        );
        assert_eq!(
            refusal(&[(0, 100, 1), (100, 16383, 2)]),
            format!(
                "{field}slot 100 is in two ranges; range 1 must start right after the one \
                 before it ends, at 101"
            )
        );
        assert_eq!(
            refusal(&[(1, 16383, 1)]),
            format!("{field}the first range starts at slot 1; it must start at 0")
        );
        assert_eq!(
            refusal(&[(0, 99, 1), (100, 16382, 2)]),
            format!(
                "{field}the last range ends at slot 16382; the ranges must cover every slot, \
                 up to 16383"
            )
        );
        assert_eq!(
            refusal(&[(0, 16384, 1)]),
            format!("{field}range 0 is 0..=16384; slots run from 0 to 16383")
        );
        assert_eq!(
            refusal(&[(0, 99, 1), (100, 50, 2), (51, 16383, 3)]),
            format!(
                "{field}range 1 is 100..=50, its first slot after its last; a range holds one \
                 slot at least"
            )
        );
    }

    #[test]
    #[should_panic = "a slot table the decoder refuses: slots 100..=100 are in no range"]
    fn a_slot_table_with_a_gap_is_not_encodable() {
        answer_bytes(1, &three(), &[range(0, 99, 1), range(101, 16383, 2)]);
    }
}
