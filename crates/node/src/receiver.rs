//! A backup's receiver on its primary's connection: the replication core's [`Receiver`],
//! kept in line with the node's [`GateRule`] and with what the applier has applied.
//!
//! The runtime runs one per connection from the primary, on the connection's thread, and
//! calls [`ReceiverRole::follow`] under the gate's lock before it takes anything read; the
//! simulator runs one per backup and calls it before every message from the primary.

use tandem_replication::{Message, NodeId, Receiver, ReceiverConfig, ReceiverReady};

use crate::gate::GateRule;

/// A backup's receiver core and the primary it takes records from.
#[derive(Debug)]
pub struct ReceiverRole {
    core: Receiver,
}

impl ReceiverRole {
    /// A receiver for `config`'s primary that holds records up to `lsn_received`, of which
    /// the applier applied up to `lsn_applied`. It introduces itself: its first ack says
    /// where it stands, so that the primary sends from there.
    pub fn new(config: ReceiverConfig, lsn_received: u64, lsn_applied: u64) -> ReceiverRole {
        let mut core = Receiver::resume(config, lsn_received, lsn_applied.min(lsn_received));
        core.introduce();
        ReceiverRole { core }
    }

    /// A receiver on a member whose segment was rewound to `lsn_received` and diverges from
    /// the group's history on `diverged` (see [`Receiver::rejoin`]): it introduces itself
    /// with `Diverged` and takes only a transfer that replaces those pages.
    pub fn rejoin(
        config: ReceiverConfig,
        lsn_received: u64,
        diverged: std::sync::Arc<[u32]>,
    ) -> ReceiverRole {
        let mut core = Receiver::rejoin(config, lsn_received, diverged);
        core.introduce();
        ReceiverRole { core }
    }

    /// A receiver for a backup role whose applier holds `segment_diverged` (the rewound
    /// segment's diverged pages, empty if it was not rewound): [`ReceiverRole::rejoin`] or
    /// [`ReceiverRole::new`].
    pub fn for_segment(
        config: ReceiverConfig,
        lsn_received: u64,
        lsn_applied: u64,
        segment_diverged: &[u32],
    ) -> ReceiverRole {
        if segment_diverged.is_empty() {
            ReceiverRole::new(config, lsn_received, lsn_applied)
        } else {
            assert_eq!(
                lsn_received, lsn_applied,
                "a rewound segment received nothing yet"
            );
            ReceiverRole::rejoin(config, lsn_received, segment_diverged.into())
        }
    }

    /// The receiver core, read-only.
    pub fn core(&self) -> &Receiver {
        &self.core
    }

    /// Brings the receiver in line with the `gate` and with the applier's `lsn_applied`,
    /// before it takes anything more from its primary. False: the gate no longer accepts the
    /// primary (the node froze for a view change, or follows another primary); the driver
    /// takes nothing more from it and acknowledges nothing, so the LSN the node reported is
    /// all it ever acknowledged.
    pub fn follow(&mut self, gate: &GateRule, lsn_applied: u64) -> bool {
        if !gate.accepts(self.core.primary()) {
            return false;
        }
        // A newer view that keeps the primary (a member joined or left).
        if gate.view() > self.core.view() {
            self.core.install_view(gate.view());
        }
        // The applier may run ahead of a receiver that a new connection started afresh: it
        // acks only what this receiver holds.
        if lsn_applied > self.core.lsn_applied() && lsn_applied <= self.core.lsn_received() {
            self.core.applied(lsn_applied);
        }
        true
    }

    /// The applier applied the records up to `lsn_applied`.
    pub fn applied(&mut self, lsn_applied: u64) {
        self.core.applied(lsn_applied);
    }

    /// The node's write-ahead log synced every record up to `lsn_durable`: acks say so.
    pub fn synced(&mut self, lsn_durable: u64) {
        self.core.synced(lsn_durable);
    }

    pub fn step(&mut self, from: NodeId, message: Message) {
        self.core.step(from, message);
    }

    pub fn tick(&mut self) {
        self.core.tick();
    }

    /// Bytes of a message from the primary arrived, and the message is not whole yet (see
    /// `Receiver::receiving`).
    pub fn receiving(&mut self) {
        self.core.receiving();
    }

    pub fn take_ready(&mut self, into: &mut ReceiverReady) {
        self.core.take_ready(into);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(view: u64) -> ReceiverConfig {
        ReceiverConfig {
            group: 1,
            view,
            primary: 1,
            nack_ticks: 2,
        }
    }

    #[test]
    fn a_frozen_gate_stops_the_receiver_and_a_newer_view_reopens_it() {
        let mut gate = GateRule::new(3, 1);
        let mut role = ReceiverRole::new(config(3), 10, 10);
        assert!(role.follow(&gate, 10));
        gate.freeze();
        assert!(!role.follow(&gate, 10));
        // The same primary in a newer view: the receiver takes the view on.
        gate.set_view(4, 1);
        assert!(role.follow(&gate, 10));
        assert_eq!(role.core().view(), 4);
        // Another primary: this receiver's primary is not accepted.
        gate.set_view(5, 2);
        assert!(!role.follow(&gate, 10));
    }

    #[test]
    fn the_receiver_counts_as_applied_only_what_it_holds() {
        let gate = GateRule::new(3, 1);
        // The applier is ahead of what this connection's receiver holds.
        let mut role = ReceiverRole::new(config(3), 10, 20);
        assert_eq!(role.core().lsn_applied(), 10);
        assert!(role.follow(&gate, 20));
        assert_eq!(role.core().lsn_applied(), 10);
        let mut behind = ReceiverRole::new(config(3), 10, 4);
        assert_eq!(behind.core().lsn_applied(), 4);
        assert!(behind.follow(&gate, 7));
        assert_eq!(behind.core().lsn_applied(), 7);
    }
}
