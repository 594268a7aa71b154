//! Whom a backup takes batches from, and whether it still does.
//!
//! A backup follows one primary per view. When its node reports for a new view (a freeze), it
//! stops accepting that primary for the rest of the view, so the LSN it reported is exactly
//! what it ever acknowledged: a promotion built on that report counts on nothing more. A newer
//! view reopens it: the config store commits one change per view, so a newer view that keeps
//! the same primary means no promotion was built on the report.
//!
//! The runtime holds a [`GateRule`] under the lock its receivers take around everything they
//! do with a read (accept, queue for the applier, ack); the simulator holds one per backup.

use tandem_replication::NodeId;

/// Whether a backup accepts batches from its primary, in its view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GateRule {
    view: u64,
    primary: NodeId,
    frozen: bool,
}

impl GateRule {
    /// A backup of `primary` in `view`, accepting it.
    pub fn new(view: u64, primary: NodeId) -> GateRule {
        GateRule {
            view,
            primary,
            frozen: false,
        }
    }

    pub fn view(&self) -> u64 {
        self.view
    }

    /// The primary this backup follows.
    pub fn primary(&self) -> NodeId {
        self.primary
    }

    pub fn is_frozen(&self) -> bool {
        self.frozen
    }

    /// Whether a batch, an ack or a connection from node `from` may be taken now.
    pub fn accepts(&self, from: NodeId) -> bool {
        !self.frozen && from == self.primary
    }

    /// Stops accepting the primary for the rest of this view.
    pub fn freeze(&mut self) {
        self.frozen = true;
    }

    /// The node installed `view` with `primary`: a newer view reopens a freeze of an older
    /// one; the same view keeps it.
    pub fn set_view(&mut self, view: u64, primary: NodeId) {
        assert!(view >= self.view, "views only move forward");
        if view > self.view {
            self.frozen = false;
        }
        self.view = view;
        self.primary = primary;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_freeze_holds_for_its_view_and_a_newer_view_reopens_it() {
        let mut gate = GateRule::new(3, 1);
        assert!(gate.accepts(1));
        assert!(!gate.accepts(2), "only the primary it follows");
        gate.freeze();
        assert!(!gate.accepts(1));
        gate.set_view(3, 1);
        assert!(!gate.accepts(1), "the same view keeps the freeze");
        gate.set_view(4, 1);
        assert!(gate.accepts(1));
        gate.set_view(5, 2);
        assert!(!gate.accepts(1));
        assert!(gate.accepts(2));
    }

    #[test]
    #[should_panic(expected = "views only move forward")]
    fn an_older_view_is_a_bug() {
        let mut gate = GateRule::new(3, 1);
        gate.set_view(2, 1);
    }
}
