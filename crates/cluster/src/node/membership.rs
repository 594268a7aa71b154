//! Membership under the same primary: removing a suspected backup, a node outside the view
//! asking to join as a spare, and a spare that caught up becoming a backup.

use super::*;

impl Cluster {
    pub(super) fn propose_membership(&mut self, view: &View, new: View) {
        if self.tick_membership_proposed.is_some_and(|(number, tick)| {
            number == view.number && self.tick - tick < 10 * self.settings.suspect_ticks
        }) {
            return;
        }
        self.tick_membership_proposed = Some((view.number, self.tick));
        let command = Command::ChangeView {
            group: self.settings.group,
            from_view: view.number,
            view: new,
        };
        let _ = self.config.propose(command);
    }

    pub(super) fn on_join(&mut self, from: NodeId, view_number: u64) {
        let Some(view) = self.view.clone() else {
            return;
        };
        if !self.config.is_leader() || view.number != view_number {
            return;
        }
        if matches!(view.member(from), Member::Backup | Member::Spare) {
            // A member that waits to be left out: it restarted without its memory and holds
            // nothing this view counts on, like a backup that reported records rebuilt from
            // its log. The primary's request to remove it may then leave the primary without
            // a backup (`on_suspect`), and its place is not held for it.
            self.restarted_reported.insert(from, view.number);
            return;
        }
        if self.collecting.is_some() {
            return;
        }
        if let Ok(new) = rule::add_spare(&view, from) {
            self.propose_membership(&view, new);
        }
    }

    pub(super) fn on_caught_up(&mut self, from: NodeId, view_number: u64, node: NodeId) {
        let Some(view) = self.view.clone() else {
            return;
        };
        if !self.config.is_leader()
            || view.number != view_number
            || from != view.primary
            || self.collecting.is_some()
        {
            return;
        }
        if let Ok(new) = rule::promote_spare(&view, node) {
            self.propose_membership(&view, new);
        }
    }

    /// A node outside the view asks to join, every two suspicion timeouts: the group may be
    /// short of a backup until it does (a Join sent before the coordinator applied the view
    /// it names is dropped, and a retry 10 timeouts later left the primary alone that long).
    /// So does a backup or spare that the role rule holds out of its view (`waiting`): it
    /// must be left out before it can join.
    pub(super) fn maybe_join(&mut self) {
        let asks = match self.member() {
            Member::Outside => true,
            Member::Backup | Member::Spare => self.waiting,
            Member::Primary => false,
        };
        if !asks || !self.loaded {
            return;
        }
        let Some(view) = &self.view else { return };
        let period = 2 * self.settings.suspect_ticks;
        if self
            .tick_join_sent
            .is_some_and(|tick| self.tick - tick < period)
        {
            return;
        }
        self.tick_join_sent = Some(self.tick);
        let join = ClusterMessage::Join {
            group: self.settings.group,
            view: view.number,
        };
        self.send_coordinator(join);
    }
}
