//! The framed binary protocol: client ↔ node and node ↔ node.
//!
//! A pure codec. Encoders append whole frames to a `Vec<u8>`; [`decode_frame`] reads one frame
//! from the front of a byte slice; [`FrameBuffer`] is the receive buffer a connection reads
//! into. This crate never opens a socket, starts a thread or reads the clock.
//!
//! Contract of the decoder: it never panics, whatever the bytes; it refuses a frame longer than
//! the receiver's `max_frame_len` as soon as the 4 length bytes are in, before buffering or
//! allocating for it; it never allocates more than the frame's own bytes describe (a batch is
//! copied once into an `Arc<[u8]>`, `Call` and `Reply` borrow their payload from the buffer,
//! a `MembersAnswer`'s lists of at most 64 members and 16,384 slot ranges are built only once
//! their counts matched the body's length). Every refusal is a [`FrameError`] value saying
//! what was wrong and, for a body, in which frame and field. After one the stream is no
//! longer known to be at a frame boundary: the receiver sends an `Error` frame
//! ([`FrameError::code`]) and closes the connection.
//!
//! Integers are little-endian except inside postcard bodies, where they are LEB128 varints
//! and an enum is the varint index of its variant (in declaration order).
//!
//! ```text
//! envelope (every frame)
//!  0   4  len        u32 = 1 + body length; 1 ≤ len ≤ max_frame_len
//!  4   1  type       0x01 Hello, 0x02 Welcome, 0x03 Error, 0x10 Call, 0x11 Reply,
//!                     0x12 Read, 0x13 Members, 0x14 MembersAnswer, 0x20 Peer, 0x30 Cluster,
//!                     0x31 Publication
//!  5   …  body       len - 1 bytes
//!
//! 0x01 Hello, connecting side → server, first frame (postcard)
//!      magic    4 bytes   "TNDM"
//!      version  varint    u16, PROTOCOL_VERSION; checked right after the magic
//!      peer     varint    0 Client, 1 Replica
//!      id       varint    u64: the client id, or the replica's node id
//!      group    varint    u32
//!
//! 0x02 Welcome, server → connecting side (postcard)
//!      version  varint    u16, the Hello's version; checked first
//!      node_id  varint    u32
//!      role     varint    0 Primary, 1 Backup
//!      view     varint    u64
//!      lsn      varint    u64
//!
//! 0x03 Error, either way, usually before closing (postcard)
//!      code     varint    ErrorCode: 0 BadFrame, 1 UnsupportedVersion, 2 NotPrimary,
//!                         3 UnknownProcedure, 4 BadArgs, 5 Busy, 6 Internal, 7 StaleView
//!      message  varint length, then UTF-8; at most 1024 bytes
//!
//! 0x10 Call, client → primary (fixed layout)
//!  0   8  seq
//!  8   2  proc_id
//! 10   1  safety_tag    0 group default, 1 1-safe, 2 bounded, 3 2-safe, 4 2-safe-applied,
//!                       5 durable
//! 11   8  safety_param  tags 0, 1: 0; tag 2: n ≥ 1; tags 3–5: 0 = all backups, else K ≤ u32
//! 19   4  args_len      = body length - 23
//! 23   …  args
//!
//! 0x12 Read, client → any node (fixed layout): a read-only call
//!  0   8  seq
//!  8   2  proc_id
//! 10   8  min_lsn       the reply reflects every commit up to here
//! 18   1  consistency   0 linearizable, 1 session, 2 bounded
//! 19   4  staleness_ms  tag 2: ≥ 1; tags 0, 1: 0
//! 23   4  args_len      = body length - 27
//! 27   …  args
//!
//! 0x11 Reply, node → client (fixed layout)
//!  0   8  seq
//!  8   8  lsn           the call's commit LSN (RolledBack: whatever the sender put)
//! 16   1  status        0 Committed, 1 RolledBack (body = the procedure's reason)
//! 17   4  body_len      = body length - 21
//! 21   …  body
//!
//! 0x13 Members, client → any node that welcomed it: no body
//!
//! 0x14 MembersAnswer, node → client (fixed layout): the node's own address and its peers',
//!      and the cluster's slot table
//!  0   8  view          the view the node knows; 0 if none
//!  8   2  count         1 ≤ count ≤ MEMBERS_MAX (64)
//! 10   …  count entries of 27 bytes, node_id strictly ascending:
//!      0   4  node_id
//!      4   2  port      ≥ 1
//!      6   1  family    4 IPv4, 6 IPv6
//!      7  16  ip        IPv4: its 4 bytes, then 12 zero bytes
//!     23   4  scope_id  IPv6's scope id; IPv4: 0 (IPv6 flow info is not carried)
//!  s   2  slot_count    s = 10 + 27 × count; ≤ SLOT_RANGES_MAX (16384); 0: the cluster
//!                       has one group, which serves every slot
//! s+2  …  slot_count entries of 8 bytes, the last at the body's end; the first starts at
//!         slot 0, each next at the slot after the one before ends, the last ends at 16383:
//!      0   2  first     the range's first slot
//!      2   2  last      its last slot, ≥ first
//!      4   4  group     the replication group that serves slots first..=last
//!
//! 0x20 Peer, between a group's primary and a backup (a tandem_replication::Message)
//!  0   4  group         u32, the replication group whose stream it belongs to
//!  4   1  sub_tag       then, with exact lengths for the fixed ones:
//!         1 Batch       the batch's bytes verbatim (tandem_redo's batch layout)
//!         2 Heartbeat   view u64, lsn_committed u64, lsn_released u64, tick_sent u64
//!         3 Ack         view u64, lsn_received u64, lsn_applied u64, lsn_durable u64,
//!                       tick_echoed u64
//!         4 Nack        view u64, lsn_received u64
//!         5 StaleView   view u64
//!         6 Pages       view, lsn_from, lsn u64, index, count, crc u32, then the pages
//!         7 Pulse       view u64
//!         8 Diverged    view u64, lsn_received u64, then page numbers u32 each
//!         9 ReadIndex   view u64, id u64
//!        10 ReadIndexed view u64, id u64, lsn_released u64
//!        11 SyncWanted  view u64, lsn u64
//!
//! 0x30 Cluster, between two nodes' cluster cores: a body the cluster layer decodes
//!
//! 0x31 Publication, a group's primary → its members: a pub/sub message relayed, a body
//!      tandem-node decodes (group u32, view u64, lsn u64, shard u8, channel_len u32,
//!      channel, message)
//! ```

#![forbid(unsafe_code)]

mod auth;
mod buffer;
mod call;
mod control;
mod frame;
mod members;
mod peer;
mod records;

pub use auth::{
    Accepting, Auth, AuthError, AuthStep, AwaitingConfirm, CLIENT_USER_LEN_MAX, ClientProof,
    ClusterSecret, Connecting, FRAME_TAG_LEN, FrameOpener, FrameSealer, NONCE_LEN, SECRET_LEN_MIN,
    TAG_LEN, check_client_proof, client_proof, encode_auth, encode_client_proof,
};
pub use buffer::FrameBuffer;
pub use call::{
    Call, Read, Reply, ReplyStatus, encode_call, encode_read, encode_reply, reply_body_len_max,
};
pub use control::{
    ErrorCode, ErrorFrame, GROUP_ANY, Hello, MAGIC, MESSAGE_LEN_MAX, PeerKind, Role, Welcome,
    encode_error, encode_hello, encode_welcome,
};
pub use frame::{Frame, FrameError, decode_frame, encode_cluster, encode_publication};
pub use members::{
    MEMBERS_MAX, Member, MembersAnswer, SLOT_COUNT, SLOT_RANGES_MAX, SlotRange, encode_members,
    encode_members_answer,
};
pub use peer::{BATCH_FRAME_HEADER_LEN, encode_batch_frame_header, encode_peer};
pub use records::{
    RECORD_PLAINTEXT_MAX, RecordCipher, RecordError, RecordOpener, RecordSealer, TrafficKey,
};

/// The protocol version this build speaks; a server refuses any other in a `Hello`.
/// Version 2: heartbeats carry the primary's tick and acks echo it (the primary lease).
/// Version 3: a primary's links send `Pulse` while its executor is busy.
/// Version 4: a member that kept its segment through a truncation introduces itself with
/// `Diverged`.
/// Version 5: a frozen member's cluster `Report` names the view whose history its records
/// follow, and a view's promotions name the view they are based on.
/// Version 6: a `Read` names its consistency; members ask the primary `ReadIndex` for
/// linearizable reads.
/// Version 7: a client asks any node for the group's members (`Members`, `MembersAnswer`).
/// Version 8: acks say what the backup synced to its write-ahead log (`lsn_durable`), and
/// calls may ask for the `durable` rule.
/// Version 9: a cluster `Report` says whether its records were rebuilt from a write-ahead log
/// after a restart.
/// Version 10: peer links authenticate (`Auth`) and seal every frame when the cluster has a
/// secret; a node with a password challenges clients (`Auth`, `ClientProof`).
/// Version 11: a cluster `Report` names the reporter's life (its incarnation), and a
/// promotion lists the lives it named from reports of rebuilt records.
/// Version 12: an acceptor that runs TLS announces it (`Auth` step `StartTls`) after the
/// `Hello`, and the connector's TLS handshake follows.
/// Version 13: a cluster `Report` says what the reporter's log synced (`lsn_synced`).
/// Version 14: a view says whether its primary may be the only holder of what it released
/// since the last promotion (`primary_sole_holder`).
/// Version 15: a `Peer` frame and a relayed publication name their group (one connection
/// per node pair carries every group's stream).
/// Version 16: a `MembersAnswer` carries the cluster's slot table after its members.
/// A client's `Hello` may name any group (`GROUP_ANY`) to ask who the members are.
pub const PROTOCOL_VERSION: u16 = 16;

/// The default limit on a frame's `len` field: a receiver refuses longer frames. It carries
/// a record or a reply of Redis's largest value (`proto-max-bulk-len`, 512 MiB) — a
/// deduplicated reply travels in its record too, so a frame holds two — with room to spare.
/// A receiver's buffer grows with the bytes that come, never with a length announced, and a
/// connection that has not proved itself is held to far less (the native port's gate).
pub const MAX_FRAME_LEN_DEFAULT: usize = (1 << 30) + (2 << 20);
