//! The answer to a client's `Members` frame: who the node was configured with.
//!
//! Every role that welcomes clients (a primary, a backup or spare in cluster mode) answers
//! with its own `listen` address and each peer's `address` from its configuration, sorted by
//! node id, and the view its role knows. The runtime decides nothing here: it reports what
//! it was given, and the client (a proxy's discovery) makes of it what it will.

use std::net::SocketAddr;
use std::sync::Arc;

use tandem_replication::NodeId;
use tandem_wire::{ErrorCode, Member, encode_error, encode_members_answer};

use crate::config::NodeConfig;

/// The group's members as this node's configuration lists them.
#[derive(Clone, Debug)]
pub(crate) struct MemberList {
    node_id: NodeId,
    /// Every member, this node included at its `listen` address, sorted by node id.
    members: Arc<[Member]>,
}

impl MemberList {
    /// The members `config` names: at most `MEMBERS_MAX` with distinct ids, and no peer at
    /// port 0 (`NodeConfig::validate`).
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
        MemberList {
            node_id: config.node_id,
            members: members.into(),
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
        encode_members_answer(out, view, &members);
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
    }
}
