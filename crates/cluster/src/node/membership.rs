//! Membership under the same primary: removing a suspected backup, a node outside the view
//! asking to join as a spare, and a spare that caught up becoming a backup.

use super::*;

impl Cluster {
    pub(super) fn propose_membership(&mut self, view: &View, new: View) {
        if self
            .group
            .tick_membership_proposed
            .is_some_and(|(number, tick)| {
                number == view.number
                    && self.node.tick - tick < 10 * self.node.settings.suspect_ticks
            })
        {
            return;
        }
        self.group.tick_membership_proposed = Some((view.number, self.node.tick));
        let command = Command::ChangeView {
            group: self.group.id,
            from_view: view.number,
            view: new,
        };
        let _ = self.node.config.propose(command);
    }

    pub(super) fn on_join(&mut self, from: NodeId, view_number: u64) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        if !self.node.config.is_leader() || view.number != view_number {
            return;
        }
        if matches!(view.member(from), Member::Backup | Member::Spare) {
            // A member that waits to be left out: it restarted without its memory and holds
            // nothing this view counts on, like a backup that reported records rebuilt from
            // its log. The primary's request to remove it may then leave the primary without
            // a backup (`on_suspect`), and its place is not held for it.
            self.group.restarted_reported.insert(from, view.number);
            return;
        }
        if self.group.collecting.is_some() {
            return;
        }
        if let Ok(new) = rule::add_spare(&view, from) {
            self.propose_membership(&view, new);
        }
    }

    pub(super) fn on_caught_up(&mut self, from: NodeId, view_number: u64, node: NodeId) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        if !self.node.config.is_leader()
            || view.number != view_number
            || from != view.primary
            || self.group.collecting.is_some()
        {
            return;
        }
        if let Ok(new) = rule::promote_spare(&view, node) {
            self.propose_membership(&view, new);
        }
    }

    /// Coordinator: leaves out every backup and spare of the view once each of them restarted
    /// without its memory in it (it reported records rebuilt from its log, or asked to join
    /// while the view names it) and the primary runs. None of them serves a role in this
    /// view (it waits to be left out, or froze to report), so none acknowledged anything in
    /// it, and every record a reply was released for is the primary's (in its memory, and
    /// under `durable` in its log too), unless a whole group's power loss took it under a
    /// rule that acknowledges from memory: leaving them out loses no copy a view could count
    /// on. Under a rule that waits for backups the primary asks for no such removal (no
    /// member it could keep holds what it released), and a member the view names cannot
    /// rejoin before a view leaves it out: without this the group waited on them for good
    /// (default-mix seed 571285: a second power loss struck while a view made for the lost
    /// incarnations waited in the config store's log; it committed after the restart, named
    /// both restarted nodes backups of the primary that served again from its log, and a
    /// change their reports started ended in a view of the same members). Left out, they
    /// join again as spares with the records their logs gave back, and catch up; meanwhile
    /// the view without a backup releases nothing new under a rule that waits for backups.
    /// Until one of them is a backup again, the primary alone holds what it released with
    /// them ([`View::primary_sole_holder`]): should it fail, a spare's report bounds nothing,
    /// and only the primary's own report takes its place (any-time seed 1301508: a spare
    /// whose log stopped short of what had been released was promoted).
    /// A primary that does not run is replaced from the reports instead.
    pub(super) fn maybe_leave_out_restarted(&mut self) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        if !self.node.config.is_leader()
            || self.group.collecting.is_some()
            || view.backups.is_empty()
            || !self.primary_runs(&view)
        {
            return;
        }
        let restarted_here =
            |node: &NodeId| self.group.restarted_reported.get(node) == Some(&view.number);
        // A primary that reported its own log's records restarted too: its `Alive` was its
        // lost incarnation's, and a change replaces it from the reports.
        if restarted_here(&view.primary) {
            return;
        }
        if !view.backups.iter().chain(&view.spares).all(restarted_here) {
            // A member that still serves may take their place: the primary asks for that
            // removal itself, naming it (`Primary::prepare_removal`).
            return;
        }
        // The view says its primary may be the only holder of what it released: no spare
        // that joins takes its place before it has become a backup.
        let new = view.with_members(Vec::new(), Vec::new());
        self.propose_membership(&view, new);
    }

    /// A node outside the view asks to join, every two suspicion timeouts: the group may be
    /// short of a backup until it does (a Join sent before the coordinator applied the view
    /// it names is dropped, and a retry 10 timeouts later left the primary alone that long).
    /// So does a backup or spare that the role rule holds out of its view (`waiting`): it
    /// must be left out before it can join.
    pub(super) fn maybe_join(&mut self) {
        let asks = match self.group.member(&self.node) {
            Member::Outside => true,
            Member::Backup | Member::Spare => self.group.waiting,
            Member::Primary => false,
        };
        if !asks || !self.group.loaded {
            return;
        }
        let Some(view) = &self.group.view else { return };
        let period = 2 * self.node.settings.suspect_ticks;
        if self
            .group
            .tick_join_sent
            .is_some_and(|tick| self.node.tick - tick < period)
        {
            return;
        }
        self.group.tick_join_sent = Some(self.node.tick);
        let join = ClusterMessage::Join {
            group: self.group.id,
            view: view.number,
        };
        self.send_coordinator(join);
    }
}
