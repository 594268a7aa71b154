//! Redis Cluster's protocol on a node's RESP port, for a node that speaks it
//! ([`ServerInfo::cluster`]): `CLUSTER SLOTS`, `SHARDS`, `NODES`, `INFO`, `MYID` and
//! `KEYSLOT` as Redis 7.0 answers them (its `cluster.c`); `-MOVED` for a command whose keys
//! another shard serves, or for a write sent to a backup of its shard; `-CROSSSLOT` for one
//! whose keys several shards serve. Cluster clients (`redis-cli -c`, redis-py's
//! `RedisCluster`, go-redis's `ClusterClient`) so find each slot's primary by themselves and
//! follow it across a failover.
//!
//! A group is a shard: its primary serves its slots' writes, its backups are the shard's
//! replicas (and serve reads, linearizably, whatever `READONLY` says). Each endpoint (a node's
//! RESP port for one group) is one Redis Cluster node of exactly one shard, its own
//! ([`ClusterShape::own`]), and serves only that shard's keys. The runtime describes the
//! shards from the config store's views; the session only writes them. The slots are placed
//! by the config store, never by a client: the subcommands that would change them
//! (`ADDSLOTS`, `MEET`, `FAILOVER`, …) are refused, saying so.

use std::fmt::Write as _;

use super::ServerInfo;
use crate::cmd;
use crate::cmd::specs::{self, Spec};
use crate::resp::{Argv, Proto, ReplyWriter};
use crate::slot::{SLOT_COUNT, key_slot};

/// The shards of the cluster as its RESP clients see them, from one endpoint.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterShape {
    /// This endpoint's name ([`endpoint_name`]).
    pub myself: String,
    /// The config store's view number of this endpoint's group: Redis's epochs (every
    /// node's line in `CLUSTER NODES` shows it, as the only one the session knows).
    pub epoch: u64,
    pub shards: Vec<Shard>,
    /// The index in `shards` of the shard this endpoint serves, its group's: the only one
    /// whose keys it serves, the others' are `-MOVED` to their primaries.
    pub own: usize,
}

/// One group: the slot ranges it serves and its members that serve RESP.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Shard {
    /// Inclusive ranges, in order.
    pub slots: Vec<(u16, u16)>,
    /// Its primary, if it has one now and it serves RESP.
    pub primary: Option<ShardNode>,
    /// Its backups that serve RESP.
    pub replicas: Vec<ShardNode>,
}

/// A member of a shard: one node's endpoint for the shard's group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardNode {
    /// Its name ([`endpoint_name`]).
    pub name: String,
    pub ip: String,
    pub port: u16,
}

impl ShardNode {
    fn address(&self) -> String {
        format!("{}:{}", self.ip, self.port)
    }
}

impl ClusterShape {
    /// The cluster of `shards` as endpoint `myself` (its [`endpoint_name`]) sees it in view
    /// `epoch` of its group, whose shard is `shards[own]`.
    pub fn new(myself: String, epoch: u64, shards: Vec<Shard>, own: usize) -> ClusterShape {
        assert!(
            own < shards.len(),
            "the endpoint's own shard is one of the shards"
        );
        ClusterShape {
            myself,
            epoch,
            shards,
            own,
        }
    }

    /// A cluster of one group, as node `myself` sees it in view `epoch`: one shard serving
    /// every slot, its primary and its backups that serve RESP.
    pub fn one_group(
        myself: u64,
        epoch: u64,
        primary: Option<ShardNode>,
        replicas: Vec<ShardNode>,
    ) -> ClusterShape {
        let shard = Shard {
            slots: vec![(0, SLOT_COUNT - 1)],
            primary,
            replicas,
        };
        ClusterShape::new(endpoint_name(myself, 0), epoch, vec![shard], 0)
    }

    /// The index in `shards` of the shard that serves `slot`, if one does.
    fn shard_of(&self, slot: u16) -> Option<usize> {
        self.shards
            .iter()
            .position(|shard| shard.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))
    }

    /// The primary that serves `slot`, if any.
    fn primary_of(&self, slot: u16) -> Option<&ShardNode> {
        self.shards.get(self.shard_of(slot)?)?.primary.as_ref()
    }

    /// How many slots a primary serves now (`cluster_slots_ok`).
    fn slots_served(&self) -> usize {
        self.shards
            .iter()
            .filter(|shard| shard.primary.is_some())
            .flat_map(|shard| &shard.slots)
            .map(|&(a, b)| usize::from(b - a) + 1)
            .sum()
    }
}

/// The 40-character name Redis Cluster gives a node, made from tandem's node id: the same
/// id always reads the same, on every node. It is the node's endpoint name for group 0
/// ([`endpoint_name`]).
pub fn node_name(node_id: u64) -> String {
    format!("{node_id:040x}")
}

/// The 40-character name of node `node_id`'s endpoint for group `group`, which Redis
/// Cluster's clients see as a node of its own: the same pair always reads the same, on every
/// node, and no two pairs read alike.
///
/// Group 0's is the node's name ([`node_name`]: 24 zeros, then the id in 16 hex digits), so
/// a cluster of one group keeps the names it always had. Another group's is a `1`, the id in
/// 31 hex digits, then the group in 8: the leading `1` keeps it from every [`node_name`]
/// (whose first digit is a `0`), and the id and group each have digits of their own.
pub fn endpoint_name(node_id: u64, group: u32) -> String {
    if group == 0 {
        return node_name(node_id);
    }
    format!("1{node_id:031x}{group:08x}")
}

/// What a backup of a command's shard answers a write on its keys: Redis Cluster's
/// redirection to the shard's primary, when one is known and the node speaks the protocol;
/// `None` otherwise (the caller answers `READONLY`). The keys are the endpoint's own shard's
/// ([`redirection`] refused the others').
pub fn moved(info: &ServerInfo, command: &cmd::Command, argv: &Argv) -> Option<String> {
    info.cluster.as_ref()?;
    let first = command_keys(command, argv).first()?.index;
    moved_key(info, argv.get(first)?)
}

/// [`moved`] for a command whose key is `key`.
pub fn moved_key(info: &ServerInfo, key: &[u8]) -> Option<String> {
    let shape = info.cluster.as_ref()?;
    let slot = key_slot(key);
    let primary = shape.primary_of(slot)?;
    Some(format!("MOVED {slot} {}", primary.address()))
}

/// What an endpoint that speaks the protocol answers a command whose keys are not its own
/// shard's, as Redis Cluster's `getNodeByQuery` decides: `CLUSTERDOWN Hash slot not served`
/// when no shard serves the first key's slot, `CROSSSLOT` when the keys are in several
/// shards, `MOVED` to the primary of the shard that serves them all, or `CLUSTERDOWN` when
/// it has none now. `None` for a keyless command, or one whose keys are all the endpoint's
/// own shard's: those run here, in different slots too, since its group runs a call whole
/// (where Redis would answer `CROSSSLOT` for keys of different slots on one node).
pub fn redirection(info: &ServerInfo, command: &cmd::Command, argv: &Argv) -> Option<String> {
    let shape = info.cluster.as_ref()?;
    let keys = command_keys(command, argv);
    let first_slot = key_slot(argv.get(keys.first()?.index)?);
    let Some(shard) = shape.shard_of(first_slot) else {
        return Some(SLOT_NOT_SERVED.to_owned());
    };
    let one_shard = keys.iter().skip(1).all(|key| {
        let slot = key_slot(argv.get(key.index).unwrap_or_default());
        slot == first_slot || shape.shard_of(slot) == Some(shard)
    });
    if !one_shard {
        return Some(CROSS_SHARD.to_owned());
    }
    if shard == shape.own {
        return None;
    }
    Some(match &shape.shards[shard].primary {
        Some(primary) => format!("MOVED {first_slot} {}", primary.address()),
        None => SLOT_NOT_SERVED.to_owned(),
    })
}

/// Redis's refusal of a command whose keys are in more than one slot; here, in more than
/// one shard.
const CROSS_SHARD: &str = "CROSSSLOT Keys in request don't hash to the same slot";

/// Redis's refusal of a command whose slot no node serves.
const SLOT_NOT_SERVED: &str = "CLUSTERDOWN Hash slot not served";

/// The keys `argv` names, as Redis finds them (its key specs, or the command's own rule):
/// a container's (`OBJECT`, `XINFO`, `XGROUP`, …) are its subcommand's. A command Redis does
/// not have, or an unknown subcommand, names none.
fn command_keys(command: &cmd::Command, argv: &Argv) -> Vec<specs::KeyRef> {
    command_spec(command, argv)
        .map(|spec| spec.keys(argv))
        .unwrap_or_default()
}

/// Redis's spec of what `argv` runs: its subcommand's for a container.
pub(super) fn command_spec(command: &cmd::Command, argv: &Argv) -> Option<&'static Spec> {
    let name = command.name.to_ascii_lowercase();
    let spec = specs::spec(&name)?;
    if name.contains('|') || specs::subcommands(&name).next().is_none() {
        return Some(spec);
    }
    let sub = String::from_utf8_lossy(argv.get(1)?).to_ascii_lowercase();
    specs::spec(&format!("{name}|{sub}"))
}

/// What a node that speaks the protocol answers a command Redis Cluster does not allow: a
/// database other than 0 (`SELECT`, `SWAPDB`, `MOVE`, `COPY … DB`), as Redis's errors say.
pub fn refusal(info: &ServerInfo, name: &str, argv: &Argv) -> Option<&'static str> {
    info.cluster.as_ref()?;
    let not_zero = |arg: Option<&[u8]>| {
        let text = std::str::from_utf8(arg?).ok()?;
        text.parse::<i64>().ok().map(|db| db != 0)
    };
    match name {
        // A database that is no integer gets SELECT's own error.
        "SELECT" if not_zero(argv.get(1)) == Some(true) => {
            Some("ERR SELECT is not allowed in cluster mode")
        }
        "SWAPDB" => Some("ERR SWAPDB is not allowed in cluster mode"),
        "MOVE" => Some("ERR MOVE is not allowed in cluster mode"),
        "COPY" => {
            let db = (3..argv.len()).find(|&at| {
                argv.get(at)
                    .is_some_and(|arg| arg.eq_ignore_ascii_case(b"DB"))
            })?;
            (not_zero(argv.get(db + 1)) == Some(true))
                .then_some("ERR Copying to another database is not allowed in cluster mode")
        }
        _ => None,
    }
}

/// `CLUSTER …`: answered from [`ServerInfo::cluster`]; a node that does not speak the
/// protocol says so in the words a cluster client looks for, and the client carries on as a
/// client of one server.
pub fn cluster(argv: &Argv, info: &ServerInfo, proto: Proto, out: &mut Vec<u8>) {
    let mut w = ReplyWriter::new(out, proto);
    if let Some(refusal) = cmd::subcommand_refusal("CLUSTER", argv) {
        return w.error_bytes(&refusal);
    }
    let Some(shape) = &info.cluster else {
        return w.error("ERR This instance has cluster support disabled");
    };
    let sub = String::from_utf8_lossy(argv.get(1).unwrap_or_default()).to_ascii_uppercase();
    match sub.as_str() {
        "KEYSLOT" => w.integer(i64::from(key_slot(argv.get(2).unwrap_or_default()))),
        "MYID" => w.bulk(shape.myself.as_bytes()),
        "INFO" => w.verbatim("txt", &info_text(shape)),
        "SLOTS" => slots(shape, &mut w),
        "SHARDS" => shards(shape, info.repl_offset, &mut w),
        "NODES" => w.verbatim("txt", &nodes_text(shape)),
        "HELP" => {
            w.array(HELP.len());
            for line in HELP {
                w.simple(line);
            }
        }
        other => w.error(&format!(
            "ERR CLUSTER {other} is not served here: the config store places slots and \
             primaries, and tandem's own commands move them"
        )),
    }
}

/// `CLUSTER HELP`, for the subcommands served.
const HELP: &[&str] = &[
    "CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
    "INFO",
    "    Return information about the cluster.",
    "KEYSLOT <key>",
    "    Return the hash slot for <key>.",
    "MYID",
    "    Return the node id.",
    "NODES",
    "    Return cluster configuration seen by node. Output format:",
    "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
    "SHARDS",
    "    Return information about slot range mappings and the nodes associated with them.",
    "SLOTS",
    "    Return information about slots range mappings. Each range is made of:",
    "    start, end, master and replicas IP addresses, ports and ids",
    "HELP",
    "    Print this help.",
];

/// `CLUSTER INFO`'s lines (Redis's `clusterGenNodesSlotsInfo` counters; no bus, so no
/// messages).
fn info_text(shape: &ClusterShape) -> String {
    let served = shape.slots_served();
    let state = if served == usize::from(SLOT_COUNT) {
        "ok"
    } else {
        "fail"
    };
    let assigned: usize = shape
        .shards
        .iter()
        .flat_map(|shard| &shard.slots)
        .map(|&(a, b)| usize::from(b - a) + 1)
        .sum();
    let known: usize = shape
        .shards
        .iter()
        .map(|shard| usize::from(shard.primary.is_some()) + shard.replicas.len())
        .sum();
    let size = shape
        .shards
        .iter()
        .filter(|shard| shard.primary.is_some() && !shard.slots.is_empty())
        .count();
    let mut text = String::new();
    for (name, value) in [
        ("cluster_state", state.to_string()),
        ("cluster_slots_assigned", assigned.to_string()),
        ("cluster_slots_ok", served.to_string()),
        ("cluster_slots_pfail", "0".to_string()),
        ("cluster_slots_fail", (assigned - served).to_string()),
        ("cluster_known_nodes", known.to_string()),
        ("cluster_size", size.to_string()),
        ("cluster_current_epoch", shape.epoch.to_string()),
        ("cluster_my_epoch", shape.epoch.to_string()),
        ("cluster_stats_messages_sent", "0".to_string()),
        ("cluster_stats_messages_received", "0".to_string()),
        ("total_cluster_links_buffer_limit_exceeded", "0".to_string()),
    ] {
        let _ = write!(text, "{name}:{value}\r\n");
    }
    text
}

/// `CLUSTER SLOTS`: each range a primary serves, with its primary and then its replicas,
/// each as `[ip, port, name, {}]` (7.0's fourth element: no other endpoints).
fn slots(shape: &ClusterShape, w: &mut ReplyWriter<'_>) {
    let served: Vec<(&(u16, u16), &ShardNode, &Shard)> = shape
        .shards
        .iter()
        .filter_map(|shard| Some((shard.primary.as_ref()?, shard)))
        .flat_map(|(primary, shard)| shard.slots.iter().map(move |range| (range, primary, shard)))
        .collect();
    w.array(served.len());
    for (&(start, end), primary, shard) in served {
        w.array(3 + shard.replicas.len());
        w.integer(i64::from(start));
        w.integer(i64::from(end));
        for node in std::iter::once(primary).chain(&shard.replicas) {
            w.array(4);
            w.bulk(node.ip.as_bytes());
            w.integer(i64::from(node.port));
            w.bulk(node.name.as_bytes());
            w.map(0);
        }
    }
}

/// `CLUSTER SHARDS`: each shard's ranges (as a flat list of bounds) and nodes. This node's
/// replication offset is `offset`; a peer's is not known here, so it reads 0.
fn shards(shape: &ClusterShape, offset: u64, w: &mut ReplyWriter<'_>) {
    w.array(shape.shards.len());
    for shard in &shape.shards {
        w.map(2);
        w.bulk(b"slots");
        w.array(shard.slots.len() * 2);
        for &(start, end) in &shard.slots {
            w.integer(i64::from(start));
            w.integer(i64::from(end));
        }
        w.bulk(b"nodes");
        let members: Vec<(&ShardNode, bool)> = shard
            .primary
            .iter()
            .map(|node| (node, true))
            .chain(shard.replicas.iter().map(|node| (node, false)))
            .collect();
        w.array(members.len());
        for (node, primary) in members {
            let offset = if node.name == shape.myself { offset } else { 0 };
            w.map(7);
            w.bulk(b"id");
            w.bulk(node.name.as_bytes());
            w.bulk(b"port");
            w.integer(i64::from(node.port));
            w.bulk(b"ip");
            w.bulk(node.ip.as_bytes());
            w.bulk(b"endpoint");
            w.bulk(node.ip.as_bytes());
            w.bulk(b"role");
            w.bulk(if primary { b"master" } else { b"replica" });
            w.bulk(b"replication-offset");
            w.integer(i64::try_from(offset).unwrap_or(i64::MAX));
            w.bulk(b"health");
            w.bulk(b"online");
        }
    }
}

/// `CLUSTER NODES`: a line per node, `<name> <ip>:<port>@<bus port> <flags> <primary>
/// <ping sent> <pong received> <epoch> connected <slots>…`. There is no cluster bus: its
/// port reads 0.
fn nodes_text(shape: &ClusterShape) -> String {
    let mut text = String::new();
    for shard in &shape.shards {
        let primary_name = shard.primary.as_ref().map(|node| node.name.as_str());
        let members = shard
            .primary
            .iter()
            .map(|node| (node, true))
            .chain(shard.replicas.iter().map(|node| (node, false)));
        for (node, primary) in members {
            let myself = if node.name == shape.myself {
                "myself,"
            } else {
                ""
            };
            let role = if primary { "master" } else { "slave" };
            let of = match (primary, primary_name) {
                (false, Some(name)) => name,
                _ => "-",
            };
            let _ = write!(
                text,
                "{} {}@0 {myself}{role} {of} 0 0 {} connected",
                node.name,
                node.address(),
                shape.epoch
            );
            if primary {
                for &(start, end) in &shard.slots {
                    match start == end {
                        true => write!(text, " {start}"),
                        false => write!(text, " {start}-{end}"),
                    }
                    .expect("a String takes every write");
                }
            }
            text.push('\n');
        }
    }
    text
}

/// A cluster of three groups on three nodes, as the tests see it from node 2's endpoint for
/// group 2 (`own` 1, its primary): group G is shard G - 1, served by node G's endpoint as
/// primary and by the two other nodes' as replicas, node N's endpoint for group G on port
/// 7000 + 10 N + G. Shard 2 has no primary unless `shard_2_primary`.
#[cfg(test)]
pub(crate) fn three_shards(shard_2_primary: bool) -> ClusterShape {
    let endpoint = |node: u64, group: u32| ShardNode {
        name: endpoint_name(node, group),
        ip: "10.0.0.1".into(),
        port: 7000 + 10 * node as u16 + group as u16,
    };
    let ranges = [(0, 5460), (5461, 10922), (10923, 16383)];
    let shards = (1..=3u32)
        .zip(ranges)
        .map(|(group, range)| {
            let primary_node = u64::from(group);
            let has_primary = group != 3 || shard_2_primary;
            Shard {
                slots: vec![range],
                primary: has_primary.then(|| endpoint(primary_node, group)),
                replicas: (1..=3u64)
                    .filter(|&node| node != primary_node)
                    .map(|node| endpoint(node, group))
                    .collect(),
            }
        })
        .collect();
    ClusterShape::new(endpoint_name(2, 2), 7, shards, 1)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::cmd::commands;

    fn node(id: u64, port: u16) -> ShardNode {
        ShardNode {
            name: node_name(id),
            ip: "10.0.0.1".into(),
            port,
        }
    }

    fn info(primary: Option<ShardNode>) -> ServerInfo {
        let shard = Shard {
            slots: vec![(0, 16383)],
            primary,
            replicas: vec![node(2, 7002)],
        };
        ServerInfo {
            repl_offset: 42,
            cluster: Some(Arc::new(ClusterShape::new(node_name(2), 5, vec![shard], 0))),
            ..ServerInfo::default()
        }
    }

    fn reply(args: &[&str], info: &ServerInfo, proto: Proto) -> String {
        let mut out = Vec::new();
        cluster(&Argv::of_words(args), info, proto, &mut out);
        String::from_utf8(out).expect("text")
    }

    fn argv(args: &[&str]) -> Argv {
        Argv::of_words(args)
    }

    #[test]
    fn names_are_forty_hex_digits() {
        assert_eq!(node_name(1), format!("{}1", "0".repeat(39)));
        assert_eq!(node_name(u64::MAX).len(), 40);
    }

    #[test]
    fn slots_list_the_primary_then_the_replicas_as_redis_does() {
        let info = info(Some(node(1, 7001)));
        let one = node_name(1);
        let two = node_name(2);
        assert_eq!(
            reply(&["CLUSTER", "SLOTS"], &info, Proto::Resp2),
            format!(
                "*1\r\n*4\r\n:0\r\n:16383\r\n*4\r\n$8\r\n10.0.0.1\r\n:7001\r\n$40\r\n{one}\r\n\
                 *0\r\n*4\r\n$8\r\n10.0.0.1\r\n:7002\r\n$40\r\n{two}\r\n*0\r\n"
            )
        );
        // RESP3: the fourth element is an empty map, as in Redis 7.0.
        assert!(reply(&["CLUSTER", "SLOTS"], &info, Proto::Resp3).contains("\r\n%0\r\n"));
    }

    #[test]
    fn shards_nodes_and_info_describe_one_shard() {
        let info = info(Some(node(1, 7001)));
        let shards = reply(&["cluster", "shards"], &info, Proto::Resp3);
        assert!(shards.starts_with("*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n"));
        assert!(
            shards.contains("$4\r\nrole\r\n$6\r\nmaster\r\n"),
            "{shards}"
        );
        assert!(
            shards.contains("$4\r\nrole\r\n$7\r\nreplica\r\n"),
            "{shards}"
        );
        // Its own offset is known; a peer's reads 0.
        assert!(shards.contains("replication-offset\r\n:42\r\n"), "{shards}");
        assert!(shards.contains("replication-offset\r\n:0\r\n"), "{shards}");
        let nodes = reply(&["CLUSTER", "NODES"], &info, Proto::Resp2);
        let one = node_name(1);
        let two = node_name(2);
        let want = format!(
            "{one} 10.0.0.1:7001@0 master - 0 0 5 connected 0-16383\n\
             {two} 10.0.0.1:7002@0 myself,slave {one} 0 0 5 connected\n"
        );
        assert_eq!(nodes, format!("${}\r\n{want}\r\n", want.len()));
        let text = reply(&["CLUSTER", "INFO"], &info, Proto::Resp2);
        for line in [
            "cluster_state:ok\r\n",
            "cluster_slots_ok:16384\r\n",
            "cluster_known_nodes:2\r\n",
            "cluster_size:1\r\n",
            "cluster_current_epoch:5\r\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }

    #[test]
    fn a_shard_without_a_primary_serves_no_slot() {
        let info = info(None);
        assert_eq!(reply(&["CLUSTER", "SLOTS"], &info, Proto::Resp2), "*0\r\n");
        let text = reply(&["CLUSTER", "INFO"], &info, Proto::Resp2);
        assert!(text.contains("cluster_state:fail\r\n"), "{text}");
        assert!(text.contains("cluster_slots_fail:16384\r\n"), "{text}");
        let set = commands().iter().find(|c| c.name == "SET").expect("SET");
        assert_eq!(moved(&info, set, &argv(&["SET", "foo", "1"])), None);
    }

    #[test]
    fn a_write_is_moved_to_its_slots_primary_and_a_keyless_one_is_not() {
        let info = info(Some(node(1, 7001)));
        let find = |name: &str| commands().iter().find(|c| c.name == name).expect(name);
        assert_eq!(
            moved(&info, find("SET"), &argv(&["SET", "foo", "1"])).as_deref(),
            Some("MOVED 12182 10.0.0.1:7001")
        );
        // The first key decides, as a cluster client computes it.
        let mset = argv(&["MSET", "{foo}a", "1", "{foo}b", "2"]);
        assert_eq!(
            moved(&info, find("MSET"), &mset).as_deref(),
            Some("MOVED 12182 10.0.0.1:7001")
        );
        assert_eq!(moved(&info, find("FLUSHALL"), &argv(&["FLUSHALL"])), None);
        // A node that does not speak the protocol never redirects.
        let plain = ServerInfo::default();
        assert_eq!(
            moved(&plain, find("SET"), &argv(&["SET", "foo", "1"])),
            None
        );
    }

    #[test]
    fn databases_other_than_zero_are_refused_as_redis_cluster_refuses_them() {
        let info = info(Some(node(1, 7001)));
        let refused = |args: &[&str]| refusal(&info, args[0], &argv(args));
        assert_eq!(
            refused(&["SELECT", "1"]),
            Some("ERR SELECT is not allowed in cluster mode")
        );
        assert_eq!(refused(&["SELECT", "0"]), None);
        assert_eq!(refused(&["SELECT", "x"]), None);
        assert!(refused(&["SWAPDB", "0", "1"]).is_some());
        assert!(refused(&["MOVE", "k", "1"]).is_some());
        assert!(refused(&["COPY", "a", "b", "db", "2"]).is_some());
        assert_eq!(refused(&["COPY", "a", "b", "DB", "0", "REPLACE"]), None);
        assert_eq!(refused(&["COPY", "a", "b"]), None);
        // A node that does not speak the protocol serves every database.
        let plain = ServerInfo::default();
        assert_eq!(refusal(&plain, "SELECT", &argv(&["SELECT", "1"])), None);
    }

    #[test]
    fn keyslot_help_and_refusals() {
        let info = info(Some(node(1, 7001)));
        assert_eq!(
            reply(
                &["CLUSTER", "KEYSLOT", "{user1000}.following"],
                &info,
                Proto::Resp2
            ),
            format!(":{}\r\n", crate::slot::key_slot(b"user1000"))
        );
        assert!(reply(&["CLUSTER", "HELP"], &info, Proto::Resp2).contains("+KEYSLOT <key>\r\n"));
        let refused = reply(&["CLUSTER", "ADDSLOTS", "1"], &info, Proto::Resp2);
        assert!(
            refused.starts_with("-ERR CLUSTER ADDSLOTS is not served here"),
            "{refused}"
        );
        // Arity as Redis checks it, before anything else.
        let wrong = reply(&["CLUSTER", "KEYSLOT"], &info, Proto::Resp2);
        assert_eq!(
            wrong,
            "-ERR wrong number of arguments for 'cluster|keyslot' command\r\n"
        );
        let plain = reply(&["CLUSTER", "SLOTS"], &ServerInfo::default(), Proto::Resp2);
        assert_eq!(plain, "-ERR This instance has cluster support disabled\r\n");
    }

    #[test]
    fn endpoint_names_keep_group_0_s_and_tell_every_pair_apart() {
        for node in [0, 1, 2, u64::MAX] {
            assert_eq!(endpoint_name(node, 0), node_name(node));
        }
        assert_eq!(
            endpoint_name(3, 2),
            "1000000000000000000000000000000300000002"
        );
        let nodes = [0, 1, 2, 0xffff_ffff, u64::MAX];
        let groups = [0, 1, 2, 0x100, u32::MAX];
        let mut names = std::collections::BTreeSet::new();
        for node in nodes {
            for group in groups {
                let name = endpoint_name(node, group);
                assert_eq!(name.len(), 40, "{name}");
                assert!(
                    name.bytes()
                        .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b)),
                    "{name}"
                );
                assert!(
                    names.insert(name),
                    "({node}, {group}) reads as another pair"
                );
            }
        }
        // No other group's endpoint reads as a node's name, whatever the node: a name
        // starts with a `0`, another group's endpoint with a `1`.
        for node in nodes {
            assert!(node_name(node).starts_with('0'));
            for group in groups.into_iter().filter(|&group| group != 0) {
                assert!(endpoint_name(node, group).starts_with('1'));
            }
        }
    }

    fn find(name: &str) -> &'static cmd::Command {
        let (index, command) = cmd::lookup(name.as_bytes()).expect(name);
        let args = Argv::of_words(&name.split(' ').collect::<Vec<_>>());
        cmd::resolve(index, command, &args).1
    }

    /// What the endpoint answers `line` before it would run it, `None` if it runs it.
    fn redirected(info: &ServerInfo, line: &str) -> Option<String> {
        let words: Vec<&str> = line.split(' ').collect();
        redirection(info, find(words[0]), &argv(&words))
    }

    fn three(shard_2_primary: bool) -> ServerInfo {
        ServerInfo {
            primary: true,
            cluster: Some(Arc::new(three_shards(shard_2_primary))),
            ..ServerInfo::default()
        }
    }

    #[test]
    fn keys_of_another_shard_are_moved_to_its_primary_reads_and_writes_alike() {
        let info = three(true);
        // `c` (slot 7365) and `z` (8157) are the endpoint's own shard's: they run, together
        // too, since its group runs a call whole.
        for line in [
            "SET c 1",
            "GET c",
            "MSET c 1 z 2",
            "EVAL return 2 c z",
            "WATCH c z",
        ] {
            assert_eq!(redirected(&info, line), None, "{line}");
        }
        let moved = Some("MOVED 12182 10.0.0.1:7033".to_owned());
        for line in [
            "SET foo 1",
            "GET foo",
            "MSET foo 1 {foo}x 2",
            "EVAL return 1 foo",
            "EVALSHA 0123 1 foo",
            "FCALL f 1 foo",
            "WATCH foo",
            "OBJECT ENCODING foo",
            "XINFO STREAM foo",
        ] {
            assert_eq!(redirected(&info, line), moved, "{line}");
        }
        // The first key's slot is the one a cluster client computes.
        assert_eq!(
            redirected(&info, "GET b").as_deref(),
            Some("MOVED 3300 10.0.0.1:7011")
        );
        // Keys in two shards, whichever they are.
        let cross = Some(CROSS_SHARD.to_owned());
        for line in [
            "MSET {a}x 1 {b}y 2",
            "MSET c 1 foo 2",
            "EVAL return 2 foo b",
        ] {
            assert_eq!(redirected(&info, line), cross, "{line}");
        }
        // Keyless commands, and a key that is only a command's argument, run anywhere.
        for line in [
            "PING",
            "DBSIZE",
            "FLUSHALL",
            "EVAL return 0",
            "CLUSTER KEYSLOT foo",
            "PUBLISH foo x",
        ] {
            assert_eq!(redirected(&info, line), None, "{line}");
        }
    }

    #[test]
    fn a_slot_no_primary_serves_is_not_served() {
        let info = three(false);
        assert_eq!(
            redirected(&info, "SET foo 1").as_deref(),
            Some(SLOT_NOT_SERVED)
        );
        assert_eq!(
            redirected(&info, "GET b").as_deref(),
            Some("MOVED 3300 10.0.0.1:7011")
        );
        // Nor one no shard serves (`x` is slot 16287).
        let mut shape = three_shards(true);
        shape.shards[2].slots = vec![(10923, 16000)];
        let info = ServerInfo {
            cluster: Some(Arc::new(shape)),
            ..ServerInfo::default()
        };
        assert_eq!(redirected(&info, "GET x").as_deref(), Some(SLOT_NOT_SERVED));
        assert_eq!(
            redirected(&info, "MSET c 1 x 2").as_deref(),
            Some(CROSS_SHARD)
        );
    }

    #[test]
    fn one_shard_serves_every_key_and_a_plain_node_checks_none() {
        let one_shard = info(Some(node(1, 7001)));
        for line in [
            "SET foo 1",
            "MSET {a}x 1 {b}y 2",
            "EVAL return 2 a b",
            "GET b",
        ] {
            assert_eq!(redirected(&one_shard, line), None, "{line}");
        }
        // Without a primary, a backup of the one shard still serves its reads.
        assert_eq!(redirected(&info(None), "MGET a b"), None);
        assert_eq!(redirected(&ServerInfo::default(), "SET foo 1"), None);
    }

    /// Each endpoint once, as a master with its ranges or a replica of its shard's primary.
    #[test]
    fn nodes_lists_every_endpoint_of_every_shard() {
        let info = three(true);
        let name = |node: u64, group: u32| endpoint_name(node, group);
        let mut want = String::new();
        for (group, primary, range) in [
            (1, 1, "0-5460"),
            (2, 2, "5461-10922"),
            (3, 3, "10923-16383"),
        ] {
            let me = |node: u64| {
                if (node, group) == (2, 2) {
                    "myself,"
                } else {
                    ""
                }
            };
            want += &format!(
                "{} 10.0.0.1:{}@0 {}master - 0 0 7 connected {range}\n",
                name(primary, group),
                7000 + 10 * primary + u64::from(group),
                me(primary)
            );
            for replica in (1..=3).filter(|&node| node != primary) {
                want += &format!(
                    "{} 10.0.0.1:{}@0 {}slave {} 0 0 7 connected\n",
                    name(replica, group),
                    7000 + 10 * replica + u64::from(group),
                    me(replica),
                    name(primary, group)
                );
            }
        }
        let nodes = reply(&["CLUSTER", "NODES"], &info, Proto::Resp2);
        assert_eq!(nodes, format!("${}\r\n{want}\r\n", want.len()));
        assert_eq!(
            reply(&["CLUSTER", "MYID"], &info, Proto::Resp2),
            format!("$40\r\n{}\r\n", name(2, 2))
        );
    }

    #[test]
    fn slots_shards_and_info_describe_three_shards() {
        let info = three(true);
        let node = |node: u64, group: u64| {
            let name = endpoint_name(node, group as u32);
            format!(
                "*4\r\n$8\r\n10.0.0.1\r\n:{}\r\n$40\r\n{name}\r\n*0\r\n",
                7000 + 10 * node + group
            )
        };
        let want = format!(
            "*3\r\n*5\r\n:0\r\n:5460\r\n{}{}{}*5\r\n:5461\r\n:10922\r\n{}{}{}\
             *5\r\n:10923\r\n:16383\r\n{}{}{}",
            node(1, 1),
            node(2, 1),
            node(3, 1),
            node(2, 2),
            node(1, 2),
            node(3, 2),
            node(3, 3),
            node(1, 3),
            node(2, 3),
        );
        assert_eq!(reply(&["CLUSTER", "SLOTS"], &info, Proto::Resp2), want);
        let shards = reply(&["CLUSTER", "SHARDS"], &info, Proto::Resp3);
        assert!(shards.starts_with("*3\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:5460\r\n"));
        for range in ["*2\r\n:5461\r\n:10922\r\n", "*2\r\n:10923\r\n:16383\r\n"] {
            assert!(shards.contains(range), "{range:?} in {shards}");
        }
        assert_eq!(
            shards.matches("$5\r\nnodes\r\n*3\r\n").count(),
            3,
            "{shards}"
        );
        assert_eq!(shards.matches("$6\r\nmaster\r\n").count(), 3, "{shards}");
        assert_eq!(shards.matches("$7\r\nreplica\r\n").count(), 6, "{shards}");
        let text = reply(&["CLUSTER", "INFO"], &info, Proto::Resp2);
        for line in [
            "cluster_state:ok\r\n",
            "cluster_slots_assigned:16384\r\n",
            "cluster_slots_ok:16384\r\n",
            "cluster_slots_fail:0\r\n",
            "cluster_known_nodes:9\r\n",
            "cluster_size:3\r\n",
            "cluster_current_epoch:7\r\n",
            "cluster_my_epoch:7\r\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
        // A shard without a primary: its range leaves `SLOTS`, its slots fail.
        let info = three(false);
        assert!(reply(&["CLUSTER", "SLOTS"], &info, Proto::Resp2).starts_with("*2\r\n"));
        let text = reply(&["CLUSTER", "INFO"], &info, Proto::Resp2);
        for line in [
            "cluster_state:fail\r\n",
            "cluster_slots_ok:10923\r\n",
            "cluster_slots_fail:5461\r\n",
            "cluster_known_nodes:8\r\n",
            "cluster_size:2\r\n",
        ] {
            assert!(text.contains(line), "{line:?} in {text}");
        }
    }
}
