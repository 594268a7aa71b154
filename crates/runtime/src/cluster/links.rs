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
                if self.env.replicas.get(&from) == Some(&self.node.role_epoch(self.group)) {
                    let received = self.node.receiving(from, &mut self.env);
                    self.check(received);
                }
            }
            PeerInput::LinkAsked { from } => self.link_asked(from),
            PeerInput::LinkAnswered { from, answer } => self.link_answered(from, answer),
        }
        self.drive();
    }

    /// A replication message of `group`: taken on a link of the role the node holds now in
    /// the group it serves in.
    fn replication(&mut self, from: NodeId, group: GroupId, message: Message) {
        if group != self.group {
            self.env.metrics.frames_rejected.inc();
            return;
        }
        let role_epoch = self.node.role_epoch(self.group);
        let linked = match self.env.primary_epoch {
            Some(_) => self.env.links.get(&from) == Some(&role_epoch),
            None => self.env.replicas.get(&from) == Some(&role_epoch),
        };
        if !linked {
            return;
        }
        if self.env.primary_epoch.is_some() {
            if self.env.trace && self.heard_since_role.insert(from) {
                tracing::trace!(
                    "node {}: first ack from node {from} in this role",
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

    /// Backup `backup` asks for a link: taken now if the primary role can, else held for
    /// the moment a view change takes (an earlier ask still held is refused: every ask is
    /// answered, in order).
    fn link_asked(&mut self, backup: NodeId) {
        if self.link_asks_waiting.remove(&backup).is_some() {
            let why = format!("node {backup} asked again");
            self.env.peers.answer_link(backup, Err(why));
        }
        match self.can_take(backup) {
            Ok(welcome) => self.take_link(backup, welcome),
            Err(_) => {
                let deadline = Instant::now() + ROLE_WAIT_MAX;
                self.link_asks_waiting.insert(backup, deadline);
            }
        }
    }

    /// The view and LSN a primary role welcomes `backup` with, or why it cannot take it.
    fn can_take(&self, backup: NodeId) -> Result<(u64, u64), String> {
        let me = self.env.id;
        let RoleSlot::Primary(host) = self.node.role(self.group) else {
            return Err(format!("node {me} is not a primary now"));
        };
        let primary = host.primary();
        if !self.node.serving(self.group, &self.env) {
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

    /// Welcomes `backup` into the primary role: from here on the role ships to it, starting
    /// from what its next ack says it holds.
    fn take_link(&mut self, backup: NodeId, (view, lsn): (u64, u64)) {
        self.env.peers.answer_link(backup, Ok((view, lsn)));
        self.env
            .links
            .insert(backup, self.node.role_epoch(self.group));
        self.node.link_up(backup);
    }

    /// The answer to this node's last ask for a link from `primary`: the link is the backup
    /// role's if the role that asked still follows `primary`.
    fn link_answered(&mut self, primary: NodeId, answer: Result<(), String>) {
        let asked_in = self.link_asked.remove(&primary);
        match answer {
            Ok(()) => {
                let role_epoch = self.node.role_epoch(self.group);
                if asked_in == Some(role_epoch) && self.following() == Some(primary) {
                    self.env.replicas.insert(primary, role_epoch);
                }
            }
            Err(why) => {
                if self.env.trace {
                    tracing::trace!("node {}: node {primary} refused a link: {why}", self.env.id);
                }
                self.link_ask_after = Some(Instant::now() + RETRY_FAST_PAUSE);
            }
        }
    }

    /// The primary this node's backup role follows now, if it holds one and is not frozen.
    fn following(&self) -> Option<NodeId> {
        match self.node.role(self.group) {
            RoleSlot::Backup(backup) if !backup.gate().is_frozen() => Some(backup.gate().primary()),
            _ => None,
        }
    }

    /// Keeps the links of the role the node holds now: a primary role's with the members of
    /// its view (asks held for it answered once it can take them, or refused once they
    /// waited long enough); a backup role's with the primary it follows, asked for if it
    /// has none.
    pub(super) fn keep_links(&mut self) {
        let role_epoch = self.node.role_epoch(self.group);
        let members: Vec<NodeId> = match self.node.role(self.group) {
            RoleSlot::Primary(host) => host
                .primary()
                .backup_progress()
                .map(|(node, _, _)| node)
                .collect(),
            _ => Vec::new(),
        };
        self.env
            .links
            .retain(|node, epoch| *epoch == role_epoch && members.contains(node));
        self.answer_waiting_asks();
        let following = self.following();
        self.env
            .replicas
            .retain(|primary, epoch| following == Some(*primary) && *epoch == role_epoch);
        let Some(primary) = following else {
            return;
        };
        let now = Instant::now();
        let asked = self.link_asked.get(&primary) == Some(&role_epoch);
        if self.env.replicas.contains_key(&primary)
            || asked
            || !self.env.peers.is_connected(primary)
            || self.link_ask_after.is_some_and(|after| now < after)
        {
            return;
        }
        self.link_ask_after = None;
        self.link_asked.insert(primary, role_epoch);
        self.env.peers.ask_link(primary);
    }

    /// Answers the asks held for the primary role: taken if it can now, refused if they
    /// waited [`ROLE_WAIT_MAX`].
    fn answer_waiting_asks(&mut self) {
        if self.link_asks_waiting.is_empty() {
            return;
        }
        let now = Instant::now();
        let waiting = std::mem::take(&mut self.link_asks_waiting);
        for (backup, deadline) in waiting {
            match self.can_take(backup) {
                Ok(welcome) => self.take_link(backup, welcome),
                Err(why) if now >= deadline => self.env.peers.answer_link(backup, Err(why)),
                Err(_) => {
                    self.link_asks_waiting.insert(backup, deadline);
                }
            }
        }
    }

    /// Tells the beat thread which links the node's role holds, if that changed: a primary
    /// role's to its backups, a backup role's to its primary.
    pub(super) fn publish_beats(&mut self) {
        let role_epoch = self.node.role_epoch(self.group);
        let beat = match self.node.role(self.group) {
            RoleSlot::Primary(host) if self.env.primary_epoch.is_some() => Beat::Pulse {
                view: host.primary().view(),
            },
            // A backup role's link, or none (a node outside holds no link).
            _ => Beat::Ack,
        };
        let links = match beat {
            Beat::Pulse { .. } => &self.env.links,
            Beat::Ack => &self.env.replicas,
        };
        let peers = &self.env.peers;
        // Compared before anything is collected: this runs every pass of the loop.
        let linked = || {
            links
                .iter()
                .filter(move |&(_, &epoch)| epoch == role_epoch)
                .filter_map(|(&node, _)| peers.number_of(node).map(|number| (node, number, beat)))
        };
        if self.beats_published.iter().copied().eq(linked()) {
            return;
        }
        let key: Vec<_> = linked().collect();
        let links = key
            .iter()
            .filter_map(|&(node, number, beat)| {
                let (_, out) = self.env.peers.out_of(node)?;
                Some((node, number, beat, out))
            })
            .collect();
        self.beats_published = key;
        self.env.beats.publish(links);
    }

    /// Lets go of the links on connections that ended; one its peer's side ended tells the
    /// node at once (the peer's process may have died).
    pub(super) fn peers_ended(&mut self) {
        for (peer, by_peer) in self.env.peers.take_ended() {
            self.env.links.remove(&peer);
            self.env.replicas.remove(&peer);
            self.link_asks_waiting.remove(&peer);
            self.link_asked.remove(&peer);
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
