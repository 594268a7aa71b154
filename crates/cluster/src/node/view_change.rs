//! The view change for a failed primary, as the coordinator runs it and the backups take
//! part: suspicions, the freeze, the reports, and the promotion proposed through Raft.

use super::*;

impl Cluster {
    pub(super) fn on_suspect(
        &mut self,
        from: NodeId,
        view_number: u64,
        suspect: NodeId,
        behind: &[NodeId],
        joining: &[NodeId],
    ) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        if !self.node.config.is_leader() || view.number != view_number {
            return;
        }
        if suspect == view.primary {
            self.on_primary_suspected(from, &view);
        } else if from == view.primary && view.backups.contains(&suspect) {
            // The primary is alive (it says so). A change collecting reports does not hold the
            // removal back unless the suspect reported: a backup that lost its memory never
            // reports, and the collection would wait for it for good (the simulator found
            // that). Whichever change the config store commits first voids the other.
            // A report of records rebuilt after a restart holds nothing back either: that
            // backup lost its memory, and is removed like one that never reports.
            let reported = self.group.collecting.as_ref().is_some_and(|collecting| {
                collecting
                    .reports
                    .get(&suspect)
                    .is_some_and(|reported| !reported.restarted)
            });
            if !reported && self.removal_confirmed(suspect) {
                let new = rule::remove_backup(&view, suspect, behind, joining);
                // A spare named to join may have left the view meanwhile: the primary asks
                // again next suspicion.
                let Ok(new) = new else { return };
                // A view without a backup cannot survive its primary: no one could report,
                // and with 2-safe nothing new is acknowledged in it anyway. The last backup
                // stays (a spare that catches up joins it; if the primary dies, this backup
                // is promoted). Found in a benchmark: a primary removed its last backup on a
                // false suspicion just before it was killed, and the group never recovered.
                // Unless every backup leaving restarted (each reported rebuilt records, or
                // asked to join, in this view): none of them can serve in it, and none leaves
                // the view until it is removed (seed 1160: a second power loss struck as a
                // promotion committed; its backups came back without it, and the group waited
                // on them for good). The primary asks for such a removal only under a rule
                // that promises nothing at a failover, or with spares `joining`.
                let leaving_restarted = view
                    .backups
                    .iter()
                    .filter(|backup| !new.backups.contains(backup))
                    .all(|backup| self.group.restarted_reported.get(backup) == Some(&view.number));
                if !new.backups.is_empty() || leaving_restarted {
                    self.propose_membership(&view, new);
                }
            }
        } else if from == view.primary && view.spares.contains(&suspect) {
            // A silent spare simply leaves; it asks to join again when it is back.
            if self.group.collecting.is_none() {
                let spares = view.spares.iter().copied().filter(|&n| n != suspect);
                let new = view.with_members(view.backups.clone(), spares.collect());
                self.propose_membership(&view, new);
            }
        }
    }

    /// How long a view change waits on members that do not report before a view under the
    /// same primary ends it.
    fn collect_patience_ticks(&self) -> u64 {
        let settings = &self.node.settings;
        settings
            .collect_ticks
            .max(RESUME_AFTER_SUSPICIONS * settings.suspect_ticks)
    }

    /// A backup `from` suspects the primary of `view`.
    fn on_primary_suspected(&mut self, from: NodeId, view: &View) {
        // A backup lost the primary. If this node is a backup that still hears it, the
        // fault is the reporter's link: the primary will suspect that backup and have it
        // removed, which costs less than replacing the primary.
        // A coordinator that is the suspected primary and serves is alive. Otherwise
        // the suspicion waits (`suspicion_pending`) until the coordinator has itself
        // heard nothing of the primary for `suspect_ticks`: a freeze cannot be undone,
        // so one backup's word is not enough while the primary still says it is alive.
        if !rule::reporters(view).contains(&from) {
            return;
        }
        if self
            .group
            .collecting
            .as_ref()
            .is_some_and(|c| c.view == view.number)
        {
            // A backup that still suspects while a change is collected has not reported:
            // its Freeze may have been lost, so it is sent again.
            let reported = self
                .group
                .collecting
                .as_ref()
                .is_some_and(|collecting| collecting.reports.contains_key(&from));
            if !reported && from != self.node.settings.node {
                let freeze = ClusterMessage::Freeze {
                    group: self.group.id,
                    view: view.number,
                };
                self.node.ready.messages.push((from, freeze));
            }
            return;
        }
        self.group
            .tick_backup_suspected
            .insert(from, self.node.tick);
        let suspect_ticks = self.node.settings.suspect_ticks;
        let pending = Repeated::renew(self.group.suspicion_pending, self.node.tick, suspect_ticks);
        self.group.suspicion_pending = Some(pending);
        self.maybe_confirm_suspicion();
    }

    /// Whether the coordinator confirms the primary's suspicion of backup `suspect`: the
    /// coordinator lost it too (its connection closed, or it sent nothing, not even Raft's
    /// answers, for `suspect_ticks`), or the primary has asked for `RESUME_AFTER_SUSPICIONS`
    /// suspicion timeouts in a row. A removal on one word would turn every stall of a loaded
    /// backup into two view changes (out, then back in); waiting for good would leave a
    /// primary whose link to a live backup is cut unable to shed it.
    fn removal_confirmed(&mut self, suspect: NodeId) -> bool {
        let suspect_ticks = self.node.settings.suspect_ticks;
        let tick = self.node.tick;
        let asked = Repeated::renew(
            self.group.removal_asked.get(&suspect).copied(),
            tick,
            suspect_ticks,
        );
        self.group.removal_asked.insert(suspect, asked);
        let overdue = asked.has_lasted(tick, suspect_ticks);
        let hears_suspect = if suspect == self.node.settings.node {
            self.group.serving
        } else {
            !self.node.closed.contains(&suspect)
                && self
                    .node
                    .tick_heard_node
                    .get(&suspect)
                    .is_some_and(|&heard| tick - heard < suspect_ticks)
        };
        overdue || !hears_suspect
    }

    pub(super) fn start_collecting(&mut self, view: &View) {
        if self
            .group
            .collecting
            .as_ref()
            .is_some_and(|c| c.view == view.number)
        {
            return;
        }
        self.group.collecting = Some(Collecting {
            view: view.number,
            reports: BTreeMap::new(),
            tick_started: self.node.tick,
            tick_freeze_sent: self.node.tick,
            tick_proposed: None,
            spares_asked: false,
        });
        self.send_freeze(view, rule::reporters(view));
    }

    /// Sends Freeze for `view` to `nodes` (this node freezes at once if it is one of them).
    fn send_freeze(&mut self, view: &View, nodes: &[NodeId]) {
        for &node in nodes {
            if node == self.node.settings.node {
                self.on_freeze(view.number);
            } else {
                let freeze = ClusterMessage::Freeze {
                    group: self.group.id,
                    view: view.number,
                };
                self.node.ready.messages.push((node, freeze));
            }
        }
    }

    /// A Freeze reaches a backup of the view, or a spare (which the coordinator asks only
    /// once the backups' reports held too little, [`rule::promote_from`]).
    pub(super) fn on_freeze(&mut self, view_number: u64) {
        let Some(view) = &self.group.view else { return };
        let node = self.node.settings.node;
        if view.number != view_number
            || !(view.backups.contains(&node) || view.spares.contains(&node))
        {
            return;
        }
        if self.group.frozen.is_some() {
            return;
        }
        self.group.frozen = Some(Frozen {
            view: view_number,
            lsn_received: None,
            view_held: view_number,
            restarted: false,
            lsn_synced: 0,
            tick_reported: None,
        });
        if let Some(rebuilt) = self.rebuilt_reporting() {
            // No role to freeze: the records rebuilt from the log are reported as they are.
            // The lease owed is the one `restarted_with` set: nothing was heard since.
            let frozen = self.group.frozen.as_mut().expect("set above");
            frozen.lsn_received = Some(rebuilt.lsn);
            frozen.view_held = rebuilt.view;
            frozen.restarted = true;
            frozen.lsn_synced = rebuilt.lsn;
            self.maybe_report();
        } else {
            self.push_event(ClusterEvent::Freeze { view: view_number });
        }
    }

    /// Reports a frozen backup's LSN at once, and again every `suspect_ticks` until a new
    /// view is committed (the coordinator may have changed). The lease it granted the old
    /// primary need not run out first: a new primary it might become honours it
    /// ([`Cluster::lease_owed_ticks`]).
    pub(super) fn maybe_report(&mut self) {
        let Some(frozen) = &self.group.frozen else {
            return;
        };
        let Some(lsn_received) = frozen.lsn_received else {
            return;
        };
        if frozen
            .tick_reported
            .is_some_and(|tick| self.node.tick - tick < self.node.settings.suspect_ticks)
        {
            return;
        }
        let view = frozen.view;
        let view_held = frozen.view_held;
        let restarted = frozen.restarted;
        let lsn_synced = frozen.lsn_synced;
        let first_report = frozen.tick_reported.is_none();
        // A report names this life of the node: it waits until the config store saved it
        // (the first save after a restart), so that no later life can share it.
        let Some(incarnation) = self.node.config.incarnation() else {
            return;
        };
        self.group.frozen.as_mut().expect("checked").tick_reported = Some(self.node.tick);
        if first_report {
            let rebuilt_by = restarted.then_some(incarnation);
            self.push_event(ClusterEvent::Reported { view, rebuilt_by });
        }
        let report = ClusterMessage::Report {
            group: self.group.id,
            view,
            lsn_received,
            view_held,
            restarted,
            incarnation,
            lsn_synced,
        };
        self.send_coordinator(report);
    }

    /// A restarted primary that rebuilt records from its log tells the coordinator, every
    /// `suspect_ticks` while it serves nothing: its report says the primary lost its memory
    /// (so a change is due at once, and a whole group that lost power may count its backups'
    /// logs), and offers its records for the promotion.
    pub(super) fn maybe_report_restarted_primary(&mut self) {
        let Some(rebuilt) = self.rebuilt_reporting() else {
            return;
        };
        let Some(view) = self
            .group
            .view
            .as_ref()
            .map(|view| (view.number, view.primary))
        else {
            return;
        };
        let (view_number, primary) = view;
        if primary != self.node.settings.node
            || self
                .group
                .tick_restarted_reported
                .is_some_and(|tick| self.node.tick - tick < self.node.settings.suspect_ticks)
        {
            return;
        }
        // Named by the report, this life of the node must be saved first (see `maybe_report`).
        let Some(incarnation) = self.node.config.incarnation() else {
            return;
        };
        if self.group.tick_restarted_reported.is_none() {
            // The role rule hears of it as of a backup's report: a view made from it names
            // this life of the node, for these records only.
            self.push_event(ClusterEvent::Reported {
                view: view_number,
                rebuilt_by: Some(incarnation),
            });
        }
        self.group.tick_restarted_reported = Some(self.node.tick);
        let report = ClusterMessage::Report {
            group: self.group.id,
            view: view_number,
            lsn_received: rebuilt.lsn,
            view_held: rebuilt.view,
            restarted: true,
            incarnation,
            lsn_synced: rebuilt.lsn,
        };
        self.send_coordinator(report);
    }

    pub(super) fn on_report(&mut self, from: NodeId, view_number: u64, reported: rule::Reported) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        let restarted_primary = from == view.primary && reported.restarted;
        let spare_asked = view.spares.contains(&from)
            && self.group.collecting.as_ref().is_some_and(|collecting| {
                collecting.view == view.number && collecting.spares_asked
            });
        if !self.node.config.is_leader()
            || view.number != view_number
            || !(rule::reporters(&view).contains(&from) || restarted_primary || spare_asked)
            || reported.view_held > view_number
        {
            return;
        }
        if reported.restarted {
            self.group.restarted_reported.insert(from, view.number);
            // Records rebuilt from a log are no reason to replace a primary that runs: no
            // rule promotes from them then, and a change started on them would only freeze
            // the other backups and end in the same members. Such changes, started again on
            // every report, also kept a silent spare from being left out, so none could
            // rejoin, catch up and take the restarted backup's place (seed 33390: a 2-safe
            // group committed nothing for good). A change already collecting takes it.
            let collecting = self
                .group
                .collecting
                .as_ref()
                .is_some_and(|collecting| collecting.view == view.number);
            if !collecting && self.primary_runs(&view) {
                return;
            }
        }
        // A report is a suspicion too: a coordinator that took over mid-change continues it.
        self.start_collecting(&view);
        let collecting = self.group.collecting.as_mut().expect("started above");
        collecting.reports.insert(from, reported);
        // The last report proposes at once rather than at the next tick.
        self.coordinate();
    }

    /// Coordinator: whether the primary of `view` runs, as far as it can tell: it said so
    /// (`Alive`) within a suspicion timeout, or the coordinator is that primary, serving and
    /// not stuck (it never sends itself `Alive`: seed 199407 found a primary that took the
    /// config store's lead while a frozen backup kept reporting, and collected against
    /// itself for good).
    pub(super) fn primary_runs(&self, view: &View) -> bool {
        (view.primary == self.node.settings.node
            && self.group.serving
            && !self.group.is_stalled(&self.node))
            || self
                .group
                .tick_alive_primary
                .is_some_and(|tick| self.node.tick - tick < self.node.settings.suspect_ticks)
    }

    pub(super) fn coordinate(&mut self) {
        let Some(view) = self.group.view.clone() else {
            return;
        };
        let patience_ticks = self.collect_patience_ticks();
        if !self.node.config.is_leader() {
            return;
        }
        let primary_runs = self.primary_runs(&view);
        let Some(collecting) = &mut self.group.collecting else {
            return;
        };
        if let Some(tick) = collecting.tick_proposed {
            // Raft lost it (a leader change in between) or it was refused: try again.
            if self.node.tick - tick >= 10 * self.node.settings.suspect_ticks {
                collecting.tick_proposed = None;
            } else {
                return;
            }
        }
        let reporters = rule::reporters(&view);
        // A restarted primary's report is no backup's: it does not make the count.
        let backups_reported = collecting
            .reports
            .keys()
            .filter(|node| reporters.contains(node))
            .count();
        let all = backups_reported == reporters.len();
        let waited = self.node.tick - collecting.tick_started >= self.node.settings.collect_ticks;
        let needed = rule::reports_needed_in(&view, self.group.safety);
        let decided = all || (waited && backups_reported >= needed);
        // Enough reports may still all lie below the last promotion's truncate LSN
        // (`RuleError::BehindTruncate`): then the change cannot go ahead either, and waits
        // for more reports or ends under the same primary as below.
        let promotion =
            decided.then(|| rule::promote_from(&view, &collecting.reports, self.group.safety));
        // Every counted report lies below what the last promotion released: a spare may
        // still hold it (its log, or its memory), so the spares are asked to report too, as
        // candidates (seed 155723).
        let behind = matches!(promotion, Some(Err(rule::RuleError::BehindTruncate { .. })));
        let ask_spares = behind && !collecting.spares_asked && !view.backups.is_empty();
        if ask_spares {
            collecting.spares_asked = true;
        }
        let spares_asked = collecting.spares_asked;
        let promoted = promotion.and_then(Result::ok);
        if ask_spares {
            // This node may be one of them: its own report then reaches this coordinator at
            // once, and may already have proposed the promotion it allows.
            self.send_freeze(&view, &view.spares);
        }
        let Some(collecting) = &mut self.group.collecting else {
            return;
        };
        if collecting.tick_proposed.is_some() {
            return;
        }
        // No view change waits for good on a member that cannot answer. A backup that
        // lost its memory never reports; while the primary says it runs, a view under the
        // same primary ends the change: it unfreezes the backups that reported, and the
        // primary then has the silent one removed (the simulator found clusters stuck for
        // good: a restarted backup could not report, the other was frozen, and the live
        // primary could commit nothing). Nothing is truncated, so no report is needed.
        let stalled = self.node.tick - collecting.tick_started >= patience_ticks;
        let resumed = || View {
            number: view.number + 1,
            ..view.clone()
        };
        let next = promoted.or_else(|| (stalled && primary_runs).then(resumed));
        if let Some(new) = next {
            collecting.tick_proposed = Some(self.node.tick);
            let command = Command::ChangeView {
                group: self.group.id,
                from_view: view.number,
                view: new,
            };
            // Not the leader any more: the next leader collects again from the repeated
            // reports.
            let _ = self.node.config.propose(command);
            return;
        }
        // A lost Freeze would hold the change (and every membership change behind it)
        // for good if the backup never suspects again: it goes again every suspicion
        // timeout to the backups that have not reported.
        let Some(collecting) = &mut self.group.collecting else {
            return;
        };
        if self.node.tick - collecting.tick_freeze_sent >= self.node.settings.suspect_ticks {
            collecting.tick_freeze_sent = self.node.tick;
            let asked: &[NodeId] = if spares_asked { &view.spares } else { &[] };
            let silent: Vec<NodeId> = reporters
                .iter()
                .chain(asked)
                .copied()
                .filter(|node| !collecting.reports.contains_key(node))
                .filter(|&node| node != self.node.settings.node)
                .collect();
            for backup in silent {
                let freeze = ClusterMessage::Freeze {
                    group: self.group.id,
                    view: view.number,
                };
                self.node.ready.messages.push((backup, freeze));
            }
        }
    }
}
