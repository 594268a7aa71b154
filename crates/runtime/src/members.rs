//! The answer to a client's `Members` frame: who the node was configured with.
//!
//! Every role that welcomes clients (a primary, a backup or spare in cluster mode) answers
//! with its own `listen` address and each peer's `address` from its configuration, sorted by
//! node id, the view its role knows, and the slot table its configuration gives (empty for a
//! cluster of one group). The runtime decides nothing here: it reports what it was given,
//! and the client (a proxy's discovery, which routes each key to its slot's group) makes of
//! it what it will.

use std::net::SocketAddr;
use std::sync::Arc;

use tandem_replication::NodeId;
use tandem_wire::{ErrorCode, Member, SlotRange, encode_error, encode_members_answer};

use crate::config::NodeConfig;

/// The group's members as this node's configuration lists them.
#[derive(Clone, Debug)]
pub(crate) struct MemberList {
    node_id: NodeId,
    /// Every member, this node included at its `listen` address, sorted by node id.
    members: Arc<[Member]>,
    /// The cluster's slot table, in slot order; empty for a cluster of one group.
    slots: Arc<[SlotRange]>,
}

impl MemberList {
    /// The members `config` names: at most `MEMBERS_MAX` with distinct ids, and no peer at
    /// port 0 (`NodeConfig::validate`); and its slot table, which covers every slot once or
    /// is empty, as the answer must carry it.
    pub(crate) fn of(config: &NodeConfig) -> MemberList {
        let mut members: Vec<Member> = std::iter::once(Member {
            node_id: config.node_id,
            address: config.listen,
        })
        .chain(config.peers.iter().map(|peer| Member {
            node_id: peer.node_id,
            address: peer.address,
        }))
        .collect();
        members.sort_by_key(|member| member.node_id);
        let slots: Vec<SlotRange> = (config.slot_table().ranges().iter())
            .map(|range| SlotRange {
                first: range.first,
                last: range.last,
                group: range.group,
            })
            .collect();
        MemberList {
            node_id: config.node_id,
            members: members.into(),
            slots: slots.into(),
        }
    }

    /// Appends the answer to a `Members` frame that came in at address `local`, in view `view`.
    ///
    /// A node listening on a wildcard address or on port 0 names itself by the address the
    /// client reached it at instead: that one can be dialled.
    pub(crate) fn answer(&self, out: &mut Vec<u8>, view: u64, local: Option<SocketAddr>) {
        let mut members = self.members.to_vec();
        let this = members
            .iter_mut()
            .find(|member| member.node_id == self.node_id)
            .expect("a node is one of its members");
        if (this.address.ip().is_unspecified() || this.address.port() == 0)
            && let Some(local) = local
        {
            this.address = local;
        }
        if this.address.port() == 0 {
            let message = format!("node {} cannot tell which port it listens on", self.node_id);
            encode_error(out, ErrorCode::Internal, &message);
            return;
        }
        encode_members_answer(out, view, &members, &self.slots);
    }
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener, TcpStream};

    use tandem_wire::{Frame, MAX_FRAME_LEN_DEFAULT, decode_frame};

    use super::*;
    use crate::config::{EXAMPLE, PeerConfig, Role};

    #[test]
    fn a_node_names_itself_and_its_peers_by_id_and_a_wildcard_listen_by_the_address_reached() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let reached = listener.local_addr().unwrap();
        let mut config = NodeConfig::from_toml_str(EXAMPLE).unwrap();
        config.node_id = 3;
        config.listen = "0.0.0.0:0".parse().unwrap();
        config.peers.push(PeerConfig {
            node_id: 7,
            address: "[::1]:7007".parse().unwrap(),
            role: Some(Role::Backup),
            resp: None,
        });
        let list = MemberList::of(&config);
        let client = TcpStream::connect(reached).unwrap();
        let (served, _) = listener.accept().unwrap();
        let mut out = Vec::new();
        list.answer(&mut out, 4, served.local_addr().ok());
        drop(client);
        let (frame, _) = decode_frame(&out, MAX_FRAME_LEN_DEFAULT).unwrap().unwrap();
        let Frame::MembersAnswer(answer) = frame else {
            panic!("a MembersAnswer: {frame:?}");
        };
        assert_eq!(answer.view, 4);
        let named: Vec<(NodeId, SocketAddr)> = answer
            .members
            .iter()
            .map(|member| (member.node_id, member.address))
            .collect();
        let peer: SocketAddr = "127.0.0.1:7002".parse().unwrap();
        let v6: SocketAddr = "[::1]:7007".parse().unwrap();
        assert_eq!(named, [(2, peer), (3, reached), (7, v6)]);
        assert_eq!(answer.slots, [], "a cluster of one group has no slot table");
    }

    /// Three nodes, each the first primary of one of three groups, the slots given unevenly.
    const THREE_GROUPS: &str = r#"
node_id = 2
listen = "127.0.0.1:7002"

[group]
workload = "debit-credit"

[cluster]
data_dir = "raft"

[[cluster.groups]]
id = 1
members = [1, 2, 3]
slots = ["0-99"]

[[cluster.groups]]
id = 7
members = [2, 3, 1]
slots = ["100-10000"]

[[cluster.groups]]
id = 3
members = [3, 1, 2]
slots = ["10001-16383"]

[[peers]]
node_id = 1
address = "127.0.0.1:7001"

[[peers]]
node_id = 3
address = "127.0.0.1:7003"
"#;

    #[test]
    fn a_node_of_a_cluster_of_several_groups_sends_its_slot_table() {
        let config = NodeConfig::from_toml_str(THREE_GROUPS).expect("THREE_GROUPS is valid");
        let mut out = Vec::new();
        MemberList::of(&config).answer(&mut out, 9, None);
        let (frame, _) = decode_frame(&out, MAX_FRAME_LEN_DEFAULT).unwrap().unwrap();
        let Frame::MembersAnswer(answer) = frame else {
            panic!("a MembersAnswer: {frame:?}");
        };
        let range = |first, last, group| SlotRange { first, last, group };
        assert_eq!(
            answer.slots,
            [
                range(0, 99, 1),
                range(100, 10000, 7),
                range(10001, 16383, 3)
            ]
        );
        let ids: Vec<NodeId> = answer.members.iter().map(|member| member.node_id).collect();
        assert_eq!(ids, [1, 2, 3]);
    }
}
