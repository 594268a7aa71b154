//! Links between a primary role and its backups over the peers' connections, as the node's
//! thread keeps them (the protocol is in [`super::peers`]). A link belongs to one role on
//! each side: a backup role asks the primary it follows for one, once per role, and a primary
//! role takes only the members of its view. A role that ends lets its links go; its
//! successor asks (or is asked) afresh.

use std::time::Instant;

use tandem_config::GroupId;
use tandem_node::Slot as RoleSlot;
use tandem_replication::{Message, NodeId};

use super::ROLE_WAIT_MAX;
use super::beat::Beat;
use super::node_loop::NodeThread;
use super::peers::PeerInput;
use crate::retry::RETRY_FAST_PAUSE;

impl NodeThread {
    /// Reads what `peer`'s connection holds and hands it to the node; `closed` when the poll
    /// said the peer's side ended, or the connection is new (read until nothing is left).
    pub(super) fn read_peer(&mut self, peer: NodeId, closed: bool) {
        let mut inputs = std::mem::take(&mut self.peer_inputs);
        self.env
            .peers
            .read(peer, closed, Instant::now(), self.tick, &mut inputs);
        for input in inputs.drain(..) {
            self.peer_input(input);
        }
        self.peer_inputs = inputs;
        self.peers_ended();
    }

    /// Hands the node one thing a peer sent, then drives it.
    fn peer_input(&mut self, input: PeerInput) {
        match input {
            PeerInput::Cluster { from, message } => self.cluster_message(from, message),
            PeerInput::Replication {
                from,
                group,
                message,
            } => self.replication(from, group, message),
            PeerInput::Publication { from, publication } => {
                self.node.step_publication(from, publication, &mut self.env);
            }
            PeerInput::Receiving { from } => {
                // A long frame from a primary this node's backup role is linked to.
                let node = &self.node;
                let linked = self
                    .env
                    .groups
                    .iter()
                    .any(|part| part.replicas.get(&from) == Some(&node.role_epoch(part.group)));
                if linked {
                    let received = self.node.receiving(from, &mut self.env);
                    self.check(received);
                }
            }
            PeerInput::LinkAsked { from, group } => self.link_asked(from, group),
            PeerInput::LinkAnswered {
                from,
                group,
                answer,
            } => self.link_answered(from, group, answer),
        }
        self.drive();
    }

    /// A replication message of `group`: taken on a link of the role the node holds now in
    /// that group, dropped in a group it does not serve in.
    fn replication(&mut self, from: NodeId, group: GroupId, message: Message) {
        let Some(at) = self.hosted_at(group) else {
            self.env.metrics.frames_rejected.inc();
            return;
        };
        let role_epoch = self.node.role_epoch(group);
        let part = self.env.group(group);
        let primary = part.primary_epoch.is_some();
        let linked = match primary {
            true => part.links.get(&from) == Some(&role_epoch),
            false => part.replicas.get(&from) == Some(&role_epoch),
        };
        if !linked {
            return;
        }
        if primary {
            if self.env.trace && self.hosted[at].heard_since_role.insert(from) {
                tracing::trace!(
                    "node {}: first ack from node {from} in this role of group {group}",
                    self.env.id
                );
            }
        } else if let Message::Batch(_) = message {
            self.env.metrics.batches_received.inc();
        }
        let stepped = self
            .node
            .step_replication(from, group, message, &mut self.env);
        self.check(stepped);
    }

    /// Backup `backup` asks for a link in `group`: taken now if the primary role can, else
    /// held for the moment a view change takes (an earlier ask still held is refused: every
    /// ask is answered, in order). An ask in a group the node does not serve in is refused.
    fn link_asked(&mut self, backup: NodeId, group: GroupId) {
        let Some(at) = self.hosted_at(group) else {
            let why = format!("node {} does not serve in group {group}", self.env.id);
            self.env.peers.answer_link(backup, Err(why));
            return;
        };
        if self.hosted[at].link_asks_waiting.remove(&backup).is_some() {
            let why = format!("node {backup} asked again");
            self.env.peers.answer_link(backup, Err(why));
        }
        match self.can_take(group, backup) {
            Ok(welcome) => self.take_link(group, backup, welcome),
            Err(_) => {
                let deadline = Instant::now() + ROLE_WAIT_MAX;
                self.hosted[at].link_asks_waiting.insert(backup, deadline);
            }
        }
    }

    /// The view and LSN the primary role of `group` welcomes `backup` with, or why it
    /// cannot take it.
    fn can_take(&self, group: GroupId, backup: NodeId) -> Result<(u64, u64), String> {
        let me = self.env.id;
        let RoleSlot::Primary(host) = self.node.role(group) else {
            return Err(format!("node {me} is not a primary of group {group} now"));
        };
        let primary = host.primary();
        if !self.node.serving(group, &self.env) {
            return Err(format!("node {me} is not primary of its view now"));
        }
        if !primary.backup_progress().any(|(node, _, _)| node == backup) {
            return Err(format!(
                "node {backup} is not a member of view {}",
                primary.view()
            ));
        }
        Ok((primary.view(), primary.lsn_committed()))
    }

    /// Welcomes `backup` into the primary role of `group`: from here on the role ships to
    /// it, starting from what its next ack says it holds.
    fn take_link(&mut self, group: GroupId, backup: NodeId, (view, lsn): (u64, u64)) {
        self.env.peers.answer_link(backup, Ok((view, lsn)));
        let role_epoch = self.node.role_epoch(group);
        self.env.group_mut(group).links.insert(backup, role_epoch);
        self.node.link_up(backup);
    }

    /// The answer to this node's last ask for a link in `group` from `primary`: the link is
    /// the backup role's if the role that asked still follows `primary`.
    fn link_answered(&mut self, primary: NodeId, group: GroupId, answer: Result<(), String>) {
        let Some(at) = self.hosted_at(group) else {
            return;
        };
        let asked_in = self.hosted[at].link_asked.remove(&primary);
        match answer {
            Ok(()) => {
                let role_epoch = self.node.role_epoch(group);
                if asked_in == Some(role_epoch) && self.following(group) == Some(primary) {
                    self.env
                        .group_mut(group)
                        .replicas
                        .insert(primary, role_epoch);
                }
            }
            Err(why) => {
                if self.env.trace {
                    tracing::trace!(
                        "node {}: node {primary} refused a link in group {group}: {why}",
                        self.env.id
                    );
                }
                self.hosted[at].link_ask_after = Some(Instant::now() + RETRY_FAST_PAUSE);
            }
        }
    }

    /// The primary this node's backup role of `group` follows now, if it holds one and is
    /// not frozen.
    fn following(&self, group: GroupId) -> Option<NodeId> {
        match self.node.role(group) {
            RoleSlot::Backup(backup) if !backup.gate().is_frozen() => Some(backup.gate().primary()),
            _ => None,
        }
    }

    /// Keeps the links of the role the node holds now in the group at `at`: a primary
    /// role's with the members of its view (asks held for it answered once it can take
    /// them, or refused once they waited long enough); a backup role's with the primary it
    /// follows, asked for if it has none.
    pub(super) fn keep_links(&mut self, at: usize) {
        let group = self.hosted[at].group;
        let role_epoch = self.node.role_epoch(group);
        let members: Vec<NodeId> = match self.node.role(group) {
            RoleSlot::Primary(host) => host
                .primary()
                .backup_progress()
                .map(|(node, _, _)| node)
                .collect(),
            _ => Vec::new(),
        };
        let following = self.following(group);
        let part = self.env.group_mut(group);
        part.links
            .retain(|node, epoch| *epoch == role_epoch && members.contains(node));
        part.replicas
            .retain(|primary, epoch| following == Some(*primary) && *epoch == role_epoch);
        let linked = following.is_some_and(|primary| part.replicas.contains_key(&primary));
        self.answer_waiting_asks(at);
        let Some(primary) = following else {
            return;
        };
        let now = Instant::now();
        let hosted = &mut self.hosted[at];
        let asked = hosted.link_asked.get(&primary) == Some(&role_epoch);
        if linked
            || asked
            || !self.env.peers.is_connected(primary)
            || hosted.link_ask_after.is_some_and(|after| now < after)
        {
            return;
        }
        hosted.link_ask_after = None;
        hosted.link_asked.insert(primary, role_epoch);
        self.env.peers.ask_link(primary, group);
    }

    /// Answers the asks held for the primary role of the group at `at`: taken if it can
    /// now, refused if they waited [`ROLE_WAIT_MAX`].
    fn answer_waiting_asks(&mut self, at: usize) {
        if self.hosted[at].link_asks_waiting.is_empty() {
            return;
        }
        let group = self.hosted[at].group;
        let now = Instant::now();
        let waiting = std::mem::take(&mut self.hosted[at].link_asks_waiting);
        for (backup, deadline) in waiting {
            match self.can_take(group, backup) {
                Ok(welcome) => self.take_link(group, backup, welcome),
                Err(why) if now >= deadline => self.env.peers.answer_link(backup, Err(why)),
                Err(_) => {
                    self.hosted[at].link_asks_waiting.insert(backup, deadline);
                }
            }
        }
    }

    /// Tells the beat thread which links the node's roles hold, if that changed: a primary
    /// role's to its backups, a backup role's to its primary, in every group.
    pub(super) fn publish_beats(&mut self) {
        let peers = &self.env.peers;
        let node = &self.node;
        // Compared before anything is collected: this runs every pass of the loop.
        let linked = || {
            self.env.groups.iter().flat_map(move |part| {
                let group = part.group;
                let role_epoch = node.role_epoch(group);
                let beat = match node.role(group) {
                    RoleSlot::Primary(host) if part.primary_epoch.is_some() => Beat::Pulse {
                        view: host.primary().view(),
                    },
                    // A backup role's link, or none (a node outside holds no link).
                    _ => Beat::Ack,
                };
                let links = match beat {
                    Beat::Pulse { .. } => &part.links,
                    Beat::Ack => &part.replicas,
                };
                links
                    .iter()
                    .filter(move |&(_, &epoch)| epoch == role_epoch)
                    .filter_map(move |(&peer, _)| {
                        peers
                            .number_of(peer)
                            .map(|number| (peer, number, group, beat))
                    })
            })
        };
        if self.beats_published.iter().copied().eq(linked()) {
            return;
        }
        let key: Vec<_> = linked().collect();
        let links = key
            .iter()
            .filter_map(|&(peer, number, group, beat)| {
                let (_, out) = self.env.peers.out_of(peer)?;
                Some((peer, number, group, beat, out))
            })
            .collect();
        self.beats_published = key;
        self.env.beats.publish(links);
    }

    /// Lets go of the links on connections that ended; one its peer's side ended tells the
    /// node at once (the peer's process may have died).
    pub(super) fn peers_ended(&mut self) {
        for (peer, by_peer) in self.env.peers.take_ended() {
            for part in &mut self.env.groups {
                part.links.remove(&peer);
                part.replicas.remove(&peer);
            }
            for hosted in &mut self.hosted {
                hosted.link_asks_waiting.remove(&peer);
                hosted.link_asked.remove(&peer);
            }
            if by_peer {
                if self.env.trace {
                    tracing::trace!("node {}: node {peer} closed its connection", self.env.id);
                }
                self.node.peer_closed(peer);
                self.drive();
            }
        }
    }
}
