//! A deterministic cluster of `ConfigCore`s for the tests: an in-memory network (a queue of
//! messages, each due at some tick) and a `MemDurable` per node, driven tick by tick.
//!
//! Fault model (when enabled, all drawn from one seed): a message is lost with probability
//! `drop_percent`, delivered twice with `duplicate_percent`, delayed by up to `delay_ticks_max`
//! ticks, and the messages due at a tick are delivered in a random order. A partition drops
//! everything between its sides. A crash drops the node's core (its unsaved state is lost)
//! and every message still addressed to it; a restart rebuilds the core from the last image
//! its disk saved.
//!
//! Checker: every entry any node applies is recorded by index; a node that applies a
//! different entry, term or outcome at an index already recorded fails the test (Raft's
//! state machine safety, and the determinism of `ClusterMap::apply`).

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

use protobuf::Message as _;
use raft::prelude::{Message, MessageType};
use tandem_config::{
    Applied, ClusterMap, Command, ConfigCore, ConfigReady, ConfigSettings, MemDurable, NodeId,
    NodeInfo, View,
};

/// SplitMix64, for the network's faults.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_5EED)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub fn below(&mut self, bound: u64) -> u64 {
        self.next_u64() % bound
    }

    pub fn percent(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    pub drop_percent: u64,
    pub duplicate_percent: u64,
    pub delay_ticks_max: u64,
}

pub fn map_of(nodes: &[NodeId]) -> ClusterMap {
    ClusterMap {
        nodes: nodes
            .iter()
            .map(|&id| {
                let address = format!("127.0.0.1:{}", 7000 + id);
                (id, NodeInfo { id, address })
            })
            .collect(),
        groups: BTreeMap::new(),
        slots: Default::default(),
    }
}

pub fn view(number: u64, primary: NodeId, backups: &[NodeId]) -> View {
    View {
        number,
        primary,
        backups: backups.to_vec(),
        spares: Vec::new(),
        promotions: Vec::new(),
        primary_sole_holder: false,
    }
}

pub fn change_view(group: u32, from_view: u64, view: View) -> Command {
    Command::ChangeView {
        group,
        from_view,
        view,
    }
}

pub struct Node {
    pub core: Option<ConfigCore>,
    pub disk: MemDurable,
    /// Everything this node reported applied, in order (not the replay after a restart).
    pub applied: Vec<Applied>,
    pub snapshots_installed: Vec<u64>,
}

struct InFlight {
    due_tick: u64,
    from: NodeId,
    to: NodeId,
    bytes: Vec<u8>,
}

pub struct Net {
    pub settings: BTreeMap<NodeId, ConfigSettings>,
    pub initial: ClusterMap,
    pub nodes: BTreeMap<NodeId, Node>,
    queue: Vec<InFlight>,
    pub faults: Faults,
    pub rng: Rng,
    pub tick: u64,
    /// Nodes cut off from everyone else.
    pub isolated: BTreeSet<NodeId>,
    /// index → (term, command, outcome) as first applied anywhere.
    history: BTreeMap<u64, Applied>,
    /// Every delivered message, in order, for determinism checks.
    pub trace: Vec<(u64, NodeId, NodeId, Vec<u8>)>,
    pub snapshot_messages: u64,
    out: ConfigReady,
}

pub const ELECTION_TICKS: usize = 10;
pub const HEARTBEAT_TICKS: usize = 2;

impl Net {
    /// `nodes` nodes numbered 1..=nodes, the first `voters` of them voting.
    pub fn new(nodes: u32, voters: u32, seed: u64) -> Net {
        let ids: Vec<NodeId> = (1..=nodes).collect();
        let initial = map_of(&ids);
        let voter_ids: Vec<NodeId> = (1..=voters).collect();
        let settings = ids
            .iter()
            .map(|&id| {
                let settings = ConfigSettings {
                    id,
                    voters: voter_ids.clone(),
                    election_ticks: ELECTION_TICKS,
                    heartbeat_ticks: HEARTBEAT_TICKS,
                    jitter_seed: seed,
                };
                (id, settings)
            })
            .collect::<BTreeMap<_, _>>();
        let mut net = Net {
            settings,
            initial,
            nodes: BTreeMap::new(),
            queue: Vec::new(),
            faults: Faults::default(),
            rng: Rng::new(seed),
            tick: 0,
            isolated: BTreeSet::new(),
            history: BTreeMap::new(),
            trace: Vec::new(),
            snapshot_messages: 0,
            out: ConfigReady::default(),
        };
        for &id in &ids {
            let core = ConfigCore::new(net.settings[&id].clone(), net.initial.clone(), None)
                .expect("a fresh node starts");
            let node = Node {
                core: Some(core),
                disk: MemDurable::new(),
                applied: Vec::new(),
                snapshots_installed: Vec::new(),
            };
            net.nodes.insert(id, node);
        }
        net
    }

    pub fn core(&self, id: NodeId) -> &ConfigCore {
        self.nodes[&id].core.as_ref().expect("node is up")
    }

    pub fn core_mut(&mut self, id: NodeId) -> &mut ConfigCore {
        self.nodes
            .get_mut(&id)
            .unwrap()
            .core
            .as_mut()
            .expect("node is up")
    }

    pub fn live(&self) -> Vec<NodeId> {
        self.nodes
            .iter()
            .filter(|(_, node)| node.core.is_some())
            .map(|(&id, _)| id)
            .collect()
    }

    /// Drains the node's Ready into the network and the checker.
    pub fn ready(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap();
        let Some(core) = node.core.as_mut() else {
            return;
        };
        core.ready(&mut node.disk, &mut self.out)
            .expect("the disk works");
        if let Some(index) = self.out.snapshot_installed {
            node.snapshots_installed.push(index);
        }
        for applied in self.out.applied.drain(..) {
            match self.history.get(&applied.index) {
                None => {
                    self.history.insert(applied.index, applied.clone());
                }
                Some(first) => assert_eq!(
                    first, &applied,
                    "node {id} applied a different entry or outcome at index {}",
                    applied.index
                ),
            }
            node.applied.push(applied);
        }
        let messages = std::mem::take(&mut self.out.messages);
        for (to, bytes) in messages {
            self.send(id, to, bytes);
        }
        self.out.clear();
    }

    fn send(&mut self, from: NodeId, to: NodeId, bytes: Vec<u8>) {
        assert_ne!(from, to);
        let faults = self.faults;
        if faults.drop_percent > 0 && self.rng.percent(faults.drop_percent) {
            return;
        }
        let copies = if faults.duplicate_percent > 0 && self.rng.percent(faults.duplicate_percent) {
            2
        } else {
            1
        };
        for _ in 0..copies {
            let delay = if faults.delay_ticks_max > 0 {
                self.rng.below(faults.delay_ticks_max + 1)
            } else {
                0
            };
            self.queue.push(InFlight {
                due_tick: self.tick + delay,
                from,
                to,
                bytes: bytes.clone(),
            });
        }
    }

    /// Delivers every message due now, and the replies they cause, until none is due.
    pub fn deliver(&mut self) {
        for _ in 0..100_000 {
            let due: Vec<usize> = (0..self.queue.len())
                .filter(|&i| self.queue[i].due_tick <= self.tick)
                .collect();
            if due.is_empty() {
                return;
            }
            let pick = if self.faults.delay_ticks_max > 0 || self.faults.duplicate_percent > 0 {
                due[self.rng.below(due.len() as u64) as usize]
            } else {
                due[0]
            };
            let message = self.queue.remove(pick);
            if self.isolated.contains(&message.from) || self.isolated.contains(&message.to) {
                continue;
            }
            let node = self.nodes.get_mut(&message.to).unwrap();
            let Some(core) = node.core.as_mut() else {
                continue;
            };
            if decode(&message.bytes).get_msg_type() == MessageType::MsgSnapshot {
                self.snapshot_messages += 1;
            }
            core.step(message.from, &message.bytes)
                .expect("members' messages are accepted");
            self.trace
                .push((self.tick, message.from, message.to, message.bytes));
            self.ready(message.to);
        }
        panic!("the network did not quiesce");
    }

    /// One tick everywhere, then delivery.
    pub fn step_tick(&mut self) {
        self.tick += 1;
        for id in self.live() {
            self.core_mut(id).tick();
            self.ready(id);
        }
        self.deliver();
    }

    pub fn run(&mut self, ticks: u64) {
        for _ in 0..ticks {
            self.step_tick();
        }
    }

    /// Runs until `done` holds; panics after `ticks_max`. Returns the ticks taken.
    pub fn run_until(&mut self, ticks_max: u64, mut done: impl FnMut(&Net) -> bool) -> u64 {
        for taken in 0..=ticks_max {
            if done(self) {
                return taken;
            }
            self.step_tick();
        }
        panic!(
            "condition not reached within {ticks_max} ticks (tick {})",
            self.tick
        );
    }

    /// The live node that leads with the highest term, if it is the only leader of that term.
    pub fn leader(&self) -> Option<NodeId> {
        let leaders: Vec<(u64, NodeId)> = self
            .live()
            .into_iter()
            .filter(|&id| self.core(id).is_leader())
            .map(|id| (self.core(id).term(), id))
            .collect();
        let &(term, id) = leaders.iter().max()?;
        assert_eq!(
            leaders.iter().filter(|(t, _)| *t == term).count(),
            1,
            "two leaders in term {term}"
        );
        Some(id)
    }

    /// A leader that every live, connected node follows.
    pub fn stable_leader(&self) -> Option<NodeId> {
        let leader = self.leader()?;
        let term = self.core(leader).term();
        let agreed = self
            .live()
            .into_iter()
            .filter(|id| !self.isolated.contains(id))
            .all(|id| self.core(id).leader() == Some(leader) && self.core(id).term() == term);
        agreed.then_some(leader)
    }

    pub fn elect(&mut self) -> NodeId {
        self.run_until(40 * ELECTION_TICKS as u64, |net| {
            net.stable_leader().is_some()
        });
        self.stable_leader().unwrap()
    }

    pub fn crash(&mut self, id: NodeId) {
        let node = self.nodes.get_mut(&id).unwrap();
        assert!(node.core.take().is_some(), "node {id} was up");
        self.queue.retain(|message| message.to != id);
    }

    pub fn restart(&mut self, id: NodeId) {
        let persisted = self.nodes[&id].disk.load().expect("the image decodes");
        let core = ConfigCore::new(self.settings[&id].clone(), self.initial.clone(), persisted)
            .expect("a node restarts from its disk");
        let node = self.nodes.get_mut(&id).unwrap();
        assert!(node.core.replace(core).is_none(), "node {id} was down");
    }

    /// Proposes on the current stable leader and runs until every live connected node applied
    /// it; returns the outcome.
    pub fn commit(&mut self, command: Command) -> Applied {
        let leader = self.elect();
        let proposal = self
            .core_mut(leader)
            .propose(command)
            .expect("the leader proposes");
        self.ready(leader);
        let members: Vec<NodeId> = self
            .live()
            .into_iter()
            .filter(|id| !self.isolated.contains(id))
            .collect();
        self.run_until(40 * ELECTION_TICKS as u64, |net| {
            members
                .iter()
                .all(|&id| net.core(id).applied_index() >= proposal.index)
        });
        let applied = self.history[&proposal.index].clone();
        assert_eq!(
            applied.term, proposal.term,
            "the proposal was not overwritten"
        );
        applied
    }

    /// Every live node has the same map and applied index.
    pub fn assert_agree(&self) {
        let live = self.live();
        let first = self.core(live[0]);
        for &id in &live[1..] {
            let core = self.core(id);
            assert_eq!(
                core.applied_index(),
                first.applied_index(),
                "node {id} applied index"
            );
            assert_eq!(core.map(), first.map(), "node {id} map");
        }
    }

    pub fn history(&self) -> &BTreeMap<u64, Applied> {
        &self.history
    }
}

pub fn decode(bytes: &[u8]) -> Message {
    Message::parse_from_bytes(bytes).expect("a raft message")
}

pub fn encode(message: &Message) -> Vec<u8> {
    message.write_to_bytes().expect("encodes")
}
