//! Redis Cluster's protocol on a node's RESP port, for a node that speaks it
//! ([`ServerInfo::cluster`]): `CLUSTER SLOTS`, `SHARDS`, `NODES`, `INFO`, `MYID` and
//! `KEYSLOT` as Redis 7.0 answers them (its `cluster.c`), and `-MOVED` for a write sent to a
//! node that is not its slot's primary, so that cluster clients (`redis-cli -c`, redis-py's
//! `RedisCluster`, go-redis's `ClusterClient`) find the primary by themselves and follow it
//! across a failover.
//!
//! A group is a shard: its primary serves its slots' writes, its backups are the shard's
//! replicas (and serve reads, linearizably, whatever `READONLY` says). The runtime describes
//! the shards ([`ClusterShape`]) from the config store's views; the session only writes them.
//! The slots are placed by the config store, never by a client: the subcommands that would
//! change them (`ADDSLOTS`, `MEET`, `FAILOVER`, …) are refused, saying so.

use std::fmt::Write as _;

use super::ServerInfo;
use crate::cmd;
use crate::resp::{Argv, Proto, ReplyWriter};
use crate::slot::{SLOT_COUNT, key_slot};

/// The shards of the cluster as its RESP clients see them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterShape {
    /// This node's name ([`node_name`]).
    pub myself: String,
    /// The config store's view number of this node's group: Redis's epochs.
    pub epoch: u64,
    pub shards: Vec<Shard>,
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

/// A member of a shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardNode {
    /// Its name ([`node_name`]).
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
    /// A cluster of one group, as node `myself` sees it in view `epoch`: one shard serving
    /// every slot, its primary and its backups that serve RESP.
    pub fn one_group(
        myself: u64,
        epoch: u64,
        primary: Option<ShardNode>,
        replicas: Vec<ShardNode>,
    ) -> ClusterShape {
        ClusterShape {
            myself: node_name(myself),
            epoch,
            shards: vec![Shard {
                slots: vec![(0, SLOT_COUNT - 1)],
                primary,
                replicas,
            }],
        }
    }

    /// The primary that serves `slot`, if any.
    fn primary_of(&self, slot: u16) -> Option<&ShardNode> {
        self.shards
            .iter()
            .find(|shard| shard.slots.iter().any(|&(a, b)| (a..=b).contains(&slot)))?
            .primary
            .as_ref()
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
/// id always reads the same, on every node.
pub fn node_name(node_id: u64) -> String {
    format!("{node_id:040x}")
}

/// What a node that is not the primary of a command's slot answers a write on a key: Redis
/// Cluster's redirection to the primary that serves it, when one is known and the node
/// speaks the protocol; `None` otherwise (the caller answers `READONLY`).
pub fn moved(info: &ServerInfo, command: &cmd::Command, argv: &Argv) -> Option<String> {
    info.cluster.as_ref()?;
    let spec = cmd::specs::spec(&command.name.to_ascii_lowercase())?;
    let first = spec.keys(argv).first()?.index;
    moved_key(info, argv.get(first)?)
}

/// [`moved`] for a command whose key is `key`.
pub fn moved_key(info: &ServerInfo, key: &[u8]) -> Option<String> {
    let shape = info.cluster.as_ref()?;
    let slot = key_slot(key);
    let primary = shape.primary_of(slot)?;
    Some(format!("MOVED {slot} {}", primary.address()))
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
            cluster: Some(Arc::new(ClusterShape {
                myself: node_name(2),
                epoch: 5,
                shards: vec![shard],
            })),
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
}
